//! Applications over TCP and thin streams: arrival processes, closed loops, FCT definitions.

mod tcp_common;
use tcp_common::*;

use sojourn_sim::run_toml;

const DUMBBELL: &str = r#"
[topology]
kind = "dumbbell"
pairs = 2
bottleneck = { rate = "10Mbit", delay = "20ms", qdisc = { kind = "pfifo", limit = 100 } }
"#;

fn kinds(out: &sojourn_sim::RunOutput) -> Vec<String> {
    match out.flows.get("kind") {
        Some(sojourn_sim::Column::Str(v)) => v.clone(),
        other => panic!("{other:?}"),
    }
}

/// Closed loop (seed 000): each actor alternates Exp(think) and one transfer, so by the
/// renewal theorem an actor completes T / (E[think] + E[FCT]) transfers in time T.
#[test]
fn closed_loop_actors_follow_the_renewal_rate() {
    let out = run_toml(&format!(
        r#"
        duration = "200s"
        seed = 3
        {DUMBBELL}
        [[workload]]
        kind = "actors"
        pairs = "all"
        count = 8
        think = "1s"
        size = "50kB"
        "#
    ))
    .unwrap();
    let fct = col_f64(&out.flows, "fct_s");
    let done: Vec<f64> = fct.iter().copied().filter(|x| x.is_finite()).collect();
    let mean_fct = done.iter().sum::<f64>() / done.len() as f64;
    let expect = 8.0 * 200.0 / (1.0 + mean_fct);
    let n = fct.len() as f64;
    assert!(
        (n - expect).abs() / expect < 0.08,
        "{n} transfers vs {expect:.0} expected (mean FCT {mean_fct:.3} s)"
    );
    // At most one transfer in progress per actor: only the last one may be unfinished.
    assert!(fct.len() - done.len() <= 8);
    assert!(col_u64(&out.flows, "size_bytes")
        .iter()
        .all(|&s| s == 50_000));
}

/// Poisson arrivals: the count in T is Poisson(T/mean) (3σ band); small files come from
/// the seed-002 set.
#[test]
fn poisson_arrivals_and_small_files() {
    let out = run_toml(&format!(
        r#"
        duration = "300s"
        seed = 8
        {DUMBBELL}
        [[workload]]
        kind = "poisson"
        pair = 0
        interval = "500ms"
        size = {{ dist = "pareto", alpha = 1.2, min = "10kB", max = "1MB" }}
        [[workload]]
        kind = "small_files"
        pair = 1
        interval = "9.5s"
        "#
    ))
    .unwrap();
    let wl = col_u64(&out.flows, "workload");
    let sizes = col_u64(&out.flows, "size_bytes");
    let n0 = wl.iter().filter(|&&w| w == 0).count() as f64;
    let lambda = 300.0 / 0.5;
    assert!(
        (n0 - lambda).abs() < 3.0 * lambda.sqrt(),
        "{n0} arrivals vs {lambda}"
    );
    let n1 = wl.iter().filter(|&&w| w == 1).count() as f64;
    let lambda1 = 300.0 / 9.5;
    assert!(
        (n1 - lambda1).abs() < 3.0 * lambda1.sqrt() + 1.0,
        "{n1} vs {lambda1}"
    );
    for (w, s) in wl.iter().zip(&sizes) {
        if *w == 1 {
            assert!([15_000, 44_000, 73_000, 102_000].contains(s), "{s}");
        } else {
            assert!((10_000..=1_000_000).contains(s), "{s}");
        }
    }
}

/// Thin streams over UDP: one message per interval, one-way delay exactly propagation +
/// serialisation on an idle path.
#[test]
fn thin_udp_stream_timing() {
    let out = run_toml(
        r#"
        duration = "63.7s"
        [topology]
        kind = "graph"
        nodes = ["a", "b"]
        [[topology.links]]
        from = "a"
        to = "b"
        rate = "2Mbit"
        delay = "50ms"
        [[workload]]
        kind = "thin"
        transport = "udp"
        from = "a"
        to = "b"
        message_size = "100B"
        interval = "638ms"
        [[workload]]
        kind = "thin"
        transport = "udp"
        from = "a"
        to = "b"
        message_size = "3000B"
        interval = { dist = "uniform", min = "20ms", max = "30ms" }
        "#,
    )
    .unwrap();
    let k = kinds(&out);
    assert!(k.iter().all(|x| x == "udp_thin"));
    let sent = col_u64(&out.flows, "pkts_sent");
    assert_eq!(sent[0], 100, "t = 0, 0.638, …, 63.162 s");
    // 3000 B messages: three datagrams each (1472 + 1472 + 56), ~2552 messages.
    let msgs = sent[1] as f64 / 3.0;
    assert_eq!(sent[1] % 3, 0);
    assert!(
        (msgs - 63.7 / 0.025).abs() < 3.0 * (63.7f64 / 0.025).sqrt(),
        "{msgs}"
    );
    let max_delay = col_f64(&out.flows, "max_delay_ms")[0];
    let expect = 50.0 + (100.0 + 42.0) * 8.0 / 2e6 * 1e3;
    // The 3000-B stream shares the link: the small message may wait behind one datagram.
    assert!(max_delay >= expect - 1e-9 && max_delay < expect + 3.0 * 1514.0 * 8.0 / 2e6 * 1e3);
}

/// Thin streams over TCP deliver every message; with a message every 100 ms on a 40 ms
/// RTT the connection never needs more than the initial window.
#[test]
fn thin_tcp_stream_delivers_every_message() {
    let out = run_toml(&format!(
        r#"
        duration = "30.05s"
        {DUMBBELL}
        [[workload]]
        kind = "thin"
        pair = 0
        message_size = "200B"
        interval = "100ms"
        stop = "30s"
        "#
    ))
    .unwrap();
    let delivered = col_u64(&out.flows, "delivered_bytes")[0];
    // Messages at 0.04 (after the handshake), …: 300 written before 30 s, all delivered.
    assert_eq!(delivered, 300 * 200);
    assert_eq!(col_u64(&out.flows, "retransmits")[0], 0);
}

/// FCT definitions: `connect` includes the handshake round trip, `first_byte` does not.
#[test]
fn fct_definitions_differ_by_the_handshake() {
    let run = |fct: &str| {
        let out = run_toml(&format!(
            r#"
            duration = "10s"
            {DUMBBELL}
            [[workload]]
            kind = "transfer"
            pair = 0
            size = "100kB"
            [record]
            fct = "{fct}"
            "#
        ))
        .unwrap();
        col_f64(&out.flows, "fct_s")[0]
    };
    let a = run("connect");
    let b = run("first_byte");
    // Handshake: SYN and SYN-ACK, 74 B each over 1 Gbit access + 10 Mbit bottleneck, 40 ms RTT.
    let hs = 0.040 + 2.0 * 74.0 * 8.0 * (2.0 / 1e9 + 1.0 / 10e6);
    assert!((a - b - hs).abs() < 1e-6, "{a} − {b} vs {hs}");
}

/// Request/response: every transaction completes; the response's FCT counts from the
/// request's connect, so it is at least two round trips plus both transfers.
#[test]
fn request_response_transactions() {
    let out = run_toml(&format!(
        r#"
        duration = "60s"
        {DUMBBELL}
        [[workload]]
        kind = "request_response"
        pair = 0
        request_size = "300B"
        response_size = "20kB"
        think = "500ms"
        transactions = 20
        "#
    ))
    .unwrap();
    let sizes = col_u64(&out.flows, "size_bytes");
    let fct = col_f64(&out.flows, "fct_s");
    let responses: Vec<f64> = sizes
        .iter()
        .zip(fct)
        .filter(|(s, _)| **s == 20_000)
        .map(|(_, f)| *f)
        .collect();
    assert_eq!(responses.len(), 20);
    for f in responses {
        assert!(f.is_finite() && f > 0.080 && f < 0.5, "{f}");
    }
    assert_eq!(out.summary["flows"]["completed"], 20);
}

/// A streamed run hands each flow's record out once nothing can change it (endpoints
/// closed, no packet of it in the network, past its last per-flow sample): the chunks plus
/// the records still held at the end, sorted by flow id, are exactly the rows of the run
/// that keeps every record, and summary.json and the time series are the same. A bulk
/// flow that lives the whole run (flow 0) does not hold the later ones back. A receiver
/// lingers 60 s after the FIN (Linux's TIME_WAIT length), so the transfers stop at 20 s
/// and the run lasts 85 s.
#[test]
fn streamed_flow_records_are_the_in_memory_rows() {
    let text = format!(
        r#"
        duration = "85s"
        seed = 5
        {DUMBBELL}
        [[workload]]
        kind = "bulk"
        pair = 0
        [[workload]]
        kind = "poisson"
        pair = 1
        interval = "10ms"
        stop = "20s"
        size = {{ dist = "pareto", alpha = 1.2, min = "2kB", max = "200kB" }}
        [[workload]]
        kind = "request_response"
        pair = 0
        response_size = "20kB"
        think = "50ms"
        stop = "20s"
        [record]
        interval = "100ms"
        flows = true
        "#
    );
    let exp = sojourn_sim::config::from_toml(&text, std::path::Path::new(".")).unwrap();
    let whole = sojourn_sim::run(&exp, exp.seed, &mut |_| true).unwrap();
    let mut chunks: Vec<sojourn_sim::Columns> = Vec::new();
    let mut ts_rows = 0usize;
    let streamed = sojourn_sim::run_streaming(&exp, exp.seed, 64, &mut |_| true, &mut |c| {
        match c {
            sojourn_sim::Chunk::Flows(cols) => chunks.push(cols),
            sojourn_sim::Chunk::TimeSeries { rows, .. } => ts_rows += rows.rows(),
            sojourn_sim::Chunk::Packets(_) => {}
        }
        true
    })
    .unwrap();
    assert_eq!(streamed.summary, whole.summary);
    assert_eq!(
        ts_rows + streamed.timeseries.rows(),
        whole.timeseries.rows()
    );
    let total = whole.flows.rows();
    assert!(total > 2_000, "{total} flows");
    // Held at the end: the flows still open (the bulk flow, transfers in progress), a
    // handful, not the ~2,000 finished ones.
    let held = streamed.flows.rows();
    assert!(held < 50, "{held} of {total} records still held at the end");
    chunks.push(streamed.flows);
    // Concatenate and sort by flow id.
    let flow_ids: Vec<u64> = chunks.iter().flat_map(|c| col_u64(c, "flow")).collect();
    let mut order: Vec<usize> = (0..flow_ids.len()).collect();
    order.sort_by_key(|&i| flow_ids[i]);
    let names: Vec<String> = whole.flows.0.iter().map(|(n, _)| n.clone()).collect();
    for name in names {
        let col = |c: &sojourn_sim::Columns| c.get(&name).unwrap().clone();
        let joined = chunks.iter().map(col).reduce(cat).unwrap();
        assert_eq!(
            bits(permute(joined, &order)),
            bits(col(&whole.flows)),
            "column {name}"
        );
    }
}

fn cat(a: sojourn_sim::Column, b: sojourn_sim::Column) -> sojourn_sim::Column {
    use sojourn_sim::Column::*;
    match (a, b) {
        (U64(mut x), U64(y)) => {
            x.extend(y);
            U64(x)
        }
        (U32(mut x), U32(y)) => {
            x.extend(y);
            U32(x)
        }
        (F64(mut x), F64(y)) => {
            x.extend(y);
            F64(x)
        }
        (Str(mut x), Str(y)) => {
            x.extend(y);
            Str(x)
        }
        (Bool(mut x), Bool(y)) => {
            x.extend(y);
            Bool(x)
        }
        other => panic!("{other:?}"),
    }
}

fn permute(c: sojourn_sim::Column, order: &[usize]) -> sojourn_sim::Column {
    use sojourn_sim::Column::*;
    match c {
        U64(v) => U64(order.iter().map(|&i| v[i]).collect()),
        U32(v) => U32(order.iter().map(|&i| v[i]).collect()),
        F64(v) => F64(order.iter().map(|&i| v[i]).collect()),
        Str(v) => Str(order.iter().map(|&i| v[i].clone()).collect()),
        Bool(v) => Bool(order.iter().map(|&i| v[i]).collect()),
    }
}

/// F64 columns compared by their bits (NaN: no FCT).
fn bits(c: sojourn_sim::Column) -> sojourn_sim::Column {
    match c {
        sojourn_sim::Column::F64(v) => {
            sojourn_sim::Column::U64(v.iter().map(|x| x.to_bits()).collect())
        }
        other => other,
    }
}
