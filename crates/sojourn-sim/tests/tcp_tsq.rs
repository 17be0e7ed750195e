//! TCP Small Queues and the pacing rate on the sending host (issue 8).

mod tcp_common;
use tcp_common::*;

use sojourn_sim::{run_toml, RunOutput};

/// client -> server, the qdisc on the client's NIC (100 Mbit/s), ~0 propagation; the
/// reverse direction is a fast unshaped veth-like link.
fn sender_side(qdisc: &str, transport: &str, workloads: &str, duration: &str) -> RunOutput {
    let text = format!(
        r#"
        duration = "{duration}"
        [transport]
        {transport}
        [topology]
        kind = "graph"
        nodes = ["client", "server"]
        [[topology.links]]
        name = "nic"
        from = "client"
        to = "server"
        rate = "100Mbit"
        delay = "10us"
        qdisc = {qdisc}
        reverse = {{ rate = "10Gbit", qdisc = "pfifo" }}
        {workloads}
        [record]
        interval = "10ms"
        links = ["nic"]
        flows = true
        "#
    );
    run_toml(&text).unwrap()
}

const BULK: &str = r#"
        [[workload]]
        kind = "bulk"
        from = "client"
        to = "server"
"#;

fn mean_after(v: &[(f64, f64)], t0: f64) -> f64 {
    let xs: Vec<f64> = v.iter().filter(|x| x.0 >= t0).map(|x| x.1).collect();
    xs.iter().sum::<f64>() / xs.len() as f64
}

#[test]
fn explore() {
    for tsq in [true, false] {
        let out = sender_side(
            "{ kind = \"pfifo\", limit = 1000 }",
            &format!("tsq = {tsq}"),
            BULK,
            "3s",
        );
        let q = series(&out, "nic", "queue_packets");
        let thr = series(&out, "nic", "throughput_bps");
        let srtt = series(&out, "flow0", "srtt_ms");
        let cwnd = series(&out, "flow0", "cwnd_bytes");
        let pr = series(&out, "flow0", "pacing_rate_bps");
        let ss = series(&out, "flow0", "ssthresh_bytes");
        println!(
            "tsq={tsq}: q {:.1} max {:.0} thr {:.1} srtt {:.2} cwnd {:.0} pr {:.1} ss {:?}",
            mean_after(&q, 1.0),
            q.iter().map(|x| x.1).fold(0.0, f64::max),
            mean_after(&thr, 1.0) / 1e6,
            mean_after(&srtt, 1.0),
            mean_after(&cwnd, 1.0) / 1448.0,
            mean_after(&pr, 1.0) / 1e6,
            ss.last()
        );
        println!("{}", serde_json::to_string(&out.summary["links"]).unwrap());
    }
}

fn transfer_behind_bulk(qdisc: &str, transport: &str) -> f64 {
    let w = format!(
        r#"{BULK}
        [[workload]]
        kind = "transfer"
        from = "client"
        to = "server"
        size = "500kB"
        start = "2s"
        "#
    );
    let out = sender_side(qdisc, transport, &w, "3s");
    let fct = col_f64(&out.flows, "fct_s");
    fct[1] * 1e3
}

#[test]
fn explore_fct() {
    for tr in ["tsq = true", "tsq = false"] {
        let fifo = transfer_behind_bulk("{ kind = \"pfifo\", limit = 1000 }", tr);
        let age = transfer_behind_bulk(
            "{ kind = \"age\", thresholds = [\"633kB\"], child = \"pfifo\" }",
            tr,
        );
        println!("{tr}: fifo {fifo:.1} ms, age {age:.1} ms, ratio {:.2}", fifo / age);
    }
}
