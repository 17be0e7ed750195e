//! Latency probes and isochronous streams (`ping`, `isochronous`; probe.rs, docs/tests.md)
//! on an idle duplex link of 2 Mbit/s and 50 ms each way. Truths by hand: a frame of B bytes
//! crosses it in 50 ms + B·8 / 2e6 s (serialisation, then propagation), so ping(8)'s
//! 98-B request takes 50.392 ms each way and its echo 100.784 ms there and back; a G.711
//! datagram (160 B of payload + 54 B of RTP/UDP/IPv4/Ethernet headers = 214 B) takes
//! 50.856 ms. Probes sent in the run's last second are not in the table.

mod tcp_common;
use tcp_common::*;

use sojourn_sim::run_toml;
use sojourn_sim::Column;

/// A run of 2.5 s with `workload` from a to b over the 2 Mbit/s, 50-ms link (`extra`:
/// more keys of the link).
fn probes(workload: &str, extra: &str) -> sojourn_sim::RunOutput {
    let link = format!(r#"{{ from = "a", to = "b", rate = "2Mbit", delay = "50ms" {extra} }}"#);
    let text = format!(
        "duration = \"2.5s\"\ntopology = {{ kind = \"graph\", nodes = [\"a\", \"b\"], links = [{link}] }}\n\
         [[workload]]\nfrom = \"a\"\nto = \"b\"\n{workload}\n"
    );
    run_toml(&text).unwrap()
}

/// Column `name` of the probe table.
fn column(out: &sojourn_sim::RunOutput, name: &str) -> Column {
    out.probes
        .as_ref()
        .expect("a probe table")
        .get(name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .clone()
}

fn f64s(out: &sojourn_sim::RunOutput, name: &str) -> Vec<f64> {
    match column(out, name) {
        Column::F64(v) => v,
        other => panic!("{name}: {other:?}"),
    }
}

fn lost(out: &sojourn_sim::RunOutput) -> Vec<bool> {
    match column(out, "lost") {
        Column::Bool(v) => v,
        other => panic!("lost: {other:?}"),
    }
}

/// Flent's ping: every 200 ms (sent at 0, 0.2, …, 1.4 s before the last second: 8 rows),
/// each answered after 100.784 ms; ping sees no one-way delay.
#[test]
fn an_icmp_echo_on_an_idle_link_takes_two_serialisations_and_two_delays() {
    let out = probes(r#"kind = "ping""#, "");
    let rtt = f64s(&out, "rtt_ns");
    assert_eq!(rtt.len(), 8);
    for r in &rtt {
        assert_eq!(*r, 100_784_000.0);
    }
    assert!(f64s(&out, "owd_up_ns").iter().all(|v| v.is_nan()));
    assert_eq!(f64s(&out, "time_s")[..3], [0.0, 0.2, 0.4]);
    assert!(lost(&out).iter().all(|l| !l));
}

/// irtt-like UDP: both one-way delays are known, 50.392 ms each, and sum to the RTT.
#[test]
fn a_udp_probe_records_both_one_way_delays() {
    let out = probes(
        "kind = \"ping\"\nprotocol = \"udp\"\ninterval = \"100ms\"",
        "",
    );
    assert_eq!(f64s(&out, "rtt_ns").len(), 15);
    assert!(f64s(&out, "owd_up_ns").iter().all(|v| *v == 50_392_000.0));
    assert!(f64s(&out, "owd_down_ns").iter().all(|v| *v == 50_392_000.0));
}

/// A one-way stream of 214-B datagrams every 20 ms: 75 rows (0 … 1.48 s), each 50.856 ms
/// one way, no round trip.
#[test]
fn an_isochronous_stream_records_its_one_way_delay() {
    let workload = [
        "kind = \"isochronous\"",
        "interval = \"20ms\"",
        "packet_size = \"214B\"",
    ];
    let out = probes(&workload.join("\n"), "");
    let owd = f64s(&out, "owd_up_ns");
    assert_eq!(owd.len(), 75);
    assert!(owd.iter().all(|v| *v == 50_856_000.0));
    assert!(f64s(&out, "rtt_ns").iter().all(|v| v.is_nan()));
}

/// A link that loses every packet answers no probe: every row lost, no RTT.
#[test]
fn probes_across_a_link_that_drops_everything_are_all_lost() {
    let out = probes(r#"kind = "ping""#, ", loss = 1.0");
    assert_eq!(lost(&out), vec![true; 8]);
    assert!(f64s(&out, "rtt_ns").iter().all(|v| v.is_nan()));
}

/// A run without probe workloads has no probe table (and its outputs do not change).
#[test]
fn a_run_without_probes_has_no_probe_table() {
    let out = probes(
        r#"kind = "cbr"
        rate = "100kbit""#,
        "",
    );
    assert!(out.probes.is_none());
    assert_eq!(col_u64(&out.flows, "flow").len(), 1);
}
