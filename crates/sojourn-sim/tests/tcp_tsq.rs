//! TCP Small Queues and the pacing rate on the sending host (issue 8).

mod tcp_common;
use tcp_common::*;

use sojourn_sim::{run_toml, RunOutput};

/// client -> server, the qdisc under a 100 Mbit/s HTB shaper on the client's veth (the
/// issue's Linux set-up: `shaper = true`), ~0 propagation; the reverse direction is a
/// fast unshaped veth-like link.
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
        delay = "25us"
        shaper = true
        qdisc = {qdisc}
        reverse = {{ rate = "10Gbit", qdisc = "pfifo", delay = "25us" }}
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

const FIFO: &str = "{ kind = \"pfifo\", limit = 1000 }";
/// Serialisation of one 1514-B frame at 100 Mbit/s.
const SER_MS: f64 = 1514.0 * 8.0 / 100e6 * 1e3;

/// Linux 6.18 on this machine (`bench/linux/sender_side.sh`, one CUBIC bulk flow, HTB
/// 100 Mbit/s + pfifo_fast on the sender's veth, offloads off): `tc -s` shows two GSO
/// buffers of 45 segments queued, 136260 B, and `ss` an RTT of 10.9 ms (the backlog's
/// serialisation); `ss -m` t131984 = two buffers' truesize.
const LINUX_BACKLOG_BYTES: f64 = 136_260.0;

#[test]
fn tsq_keeps_the_sender_nic_queue_small_at_full_rate() {
    let out = sender_side(FIFO, "", BULK, "2s");
    let q = series(&out, "nic", "queue_packets");
    let qb = series(&out, "nic", "queue_bytes");
    let backlog = mean_after(&q, 0.5);
    let backlog_bytes = mean_after(&qb, 0.5);
    let max = q.iter().map(|x| x.1).fold(0.0, f64::max);
    // TSQ lets the socket keep two buffers (2 × truesize) below TCP; the near peer
    // (min RTT 50 µs < 512 µs) gets full 64-KiB buffers from tcp_tso_autosize.
    assert!(
        (1.5..=3.0).contains(&backlog),
        "mean backlog {backlog} buffers"
    );
    assert!(
        (backlog_bytes - LINUX_BACKLOG_BYTES).abs() < 0.1 * LINUX_BACKLOG_BYTES,
        "backlog {backlog_bytes} B vs Linux {LINUX_BACKLOG_BYTES} B"
    );
    assert!(max <= 6.0, "max backlog {max}");
    let link = &out.summary["links"]["nic"];
    assert!(f(&link["utilisation"]) >= 0.95, "{link}");
    assert_eq!(f(&link["drops_total"]), 0.0);
    // RTT = the backlog's serialisation (the shaper releases whole buffers): Linux 10.9 ms,
    // not the ~120 ms of a full 1000-packet FIFO.
    let srtt = mean_after(&series(&out, "flow0", "srtt_ms"), 0.5);
    let backlog_ms = backlog_bytes * 8.0 / 100e6 * 1e3;
    assert!(
        (srtt - backlog_ms).abs() < 0.1 * backlog_ms,
        "srtt {srtt} ms vs backlog {backlog_ms} ms"
    );
    assert!(
        (srtt - 10.9).abs() < 0.1 * 10.9,
        "srtt {srtt} ms vs Linux 10.9 ms"
    );
}

/// One MSS per buffer (`gso = false`; on Linux `gso_max_segs 1` on the veth, issue 18 §2):
/// TSQ's 1-ms-of-pacing-rate limit keeps about ten packets queued. Linux 6.18 here
/// (`RX_RT=1 bench/linux/sender_side.sh segs1 fifo 3`, the receiving application at
/// real-time priority so that it reads at once, as sojourn's does): 9.9 packets in the qdisc
/// on average over 0.5–2 s, RTT 1.35 ms, cwnd 17–19 (HyStart exit at 16–18); `ss -m`
/// t22800 for ten one-segment buffers, i.e. 2280 B of truesize each (payload + 832).
/// With the 2880 B of a linear buffer sojourn held 8.8 packets.
#[test]
fn without_gso_the_queue_matches_linux() {
    let out = sender_side(FIFO, "gso = false", BULK, "2s");
    let backlog = mean_after(&series(&out, "nic", "queue_packets"), 0.5);
    assert!(
        (backlog - 9.9).abs() <= 0.1 * 9.9,
        "mean backlog {backlog} packets, Linux 9.9"
    );
    let link = &out.summary["links"]["nic"];
    assert!(f(&link["utilisation"]) >= 0.95, "{link}");
    let srtt = mean_after(&series(&out, "flow0", "srtt_ms"), 0.5);
    assert!(
        (srtt - 1.35).abs() <= 0.1 * 1.35,
        "srtt {srtt} ms, Linux 1.35"
    );
    assert!(
        (srtt - backlog * SER_MS).abs() < 1.0,
        "srtt {srtt} vs backlog {backlog}"
    );
    let cwnd = mean_after(&series(&out, "flow0", "cwnd_bytes"), 0.5) / 1448.0;
    assert!((16.0..=19.0).contains(&cwnd), "cwnd {cwnd}, Linux 17-19");
}

/// The receiving application's wake-up latency (`reader_wakeup`, issue 40 §4). Linux at
/// normal priority on a loaded 2-core machine (docs/transport.md, "One segment per
/// buffer"): the every-second-segment ACK came 136 µs (median) to 1.27 ms (p99) after the
/// data, the qdisc held 12–17 packets at 0.5–1 s with an RTT of 1.6–2.4 ms, and cwnd left
/// the TSQ-limited 17–19 (51–57 at 1 s). A log-normal with that median and p99 gives the
/// same queue and RTT; a constant 136 µs does not move them (only the tail lets a round
/// become cwnd-limited).
#[test]
fn a_late_reader_lets_cubic_grow_as_linux_at_normal_priority() {
    let late = r#"gso = false
        reader_wakeup = { dist = "lognormal", median = "136us", p99 = "1.27ms" }"#;
    let out = sender_side(FIFO, late, BULK, "1s");
    let backlog = mean_after(&series(&out, "nic", "queue_packets"), 0.5);
    assert!(
        (12.0..=17.0).contains(&backlog),
        "backlog {backlog} packets, Linux 12-17"
    );
    let srtt = mean_after(&series(&out, "flow0", "srtt_ms"), 0.5);
    assert!((1.6..=2.4).contains(&srtt), "srtt {srtt} ms, Linux 1.6-2.4");
    let cwnd = mean_after(&series(&out, "flow0", "cwnd_bytes"), 0.9) / 1448.0;
    assert!(cwnd > 19.0, "cwnd {cwnd}: still TSQ-limited (17-19)");
    // A constant latency of the median: still the prompt reader's 10 packets and cwnd 17.
    let fixed = sender_side(
        FIFO,
        "gso = false\n        reader_wakeup = \"136us\"",
        BULK,
        "1s",
    );
    let backlog = mean_after(&series(&fixed, "nic", "queue_packets"), 0.5);
    assert!(
        (8.9..=10.9).contains(&backlog),
        "fixed 136 µs: backlog {backlog}"
    );
    let cwnd = mean_after(&series(&fixed, "flow0", "cwnd_bytes"), 0.5) / 1448.0;
    assert!((16.0..=19.0).contains(&cwnd), "fixed 136 µs: cwnd {cwnd}");
}

/// A pause of the receiving application (`reader_pause`, issue 40 §4). Linux 6.18 here
/// (`bench/linux/cwnd_timeline.sh rt 30`, the set-up above, receiver at real-time
/// priority; docs/transport.md, "Over 30 s"): the flow is TSQ-limited and never
/// cwnd-limited until the reader stops for 1–20 ms; no ACK leaves meanwhile (the window's
/// edge waits for the read), in-flight reaches cwnd, and the window counts as
/// cwnd-limited: CUBIC then grows cwnd by about half in one round, ×1.41–1.64 over eight
/// such events (17→24, 24→37, 30→45, 18→28, 28→46, 32→49, 49→74, 74→112), and keeps it.
#[test]
fn a_reader_pause_grows_cubic_by_half_as_on_linux() {
    let pause = r#"gso = false
        reader_pause = { every = { dist = "fixed", value = "3s" }, length = "2.4ms" }"#;
    let out = sender_side(FIFO, pause, BULK, "3.9s");
    let cwnd = series(&out, "flow0", "cwnd_bytes");
    let at = |t: f64| {
        cwnd.iter()
            .rev()
            .find(|x| x.0 <= t)
            .map(|x| x.1 / 1448.0)
            .unwrap()
    };
    let (before, after) = (at(2.99), at(3.8));
    assert!(
        (16.0..=19.0).contains(&before),
        "cwnd {before} before the pause"
    );
    let grown = after / before;
    assert!(
        (1.35..=1.7).contains(&grown),
        "cwnd {before} -> {after} (x{grown:.2}); Linux x1.41-1.64"
    );
    // Between pauses nothing grows: the window is TSQ-limited again.
    assert!((at(3.4) - after).abs() <= 1.0, "{} vs {after}", at(3.4));
}

#[test]
fn without_tsq_the_fifo_fills_and_the_rtt_grows_to_the_buffer() {
    // Per-segment buffers: the pfifo limit counts buffers, and 1000 GSO buffers of 64 KiB
    // exceed the receive window (Linux counts skbs as well).
    let out = sender_side(FIFO, "tsq = false\n        gso = false", BULK, "3s");
    let link = &out.summary["links"]["nic"];
    assert!(
        f(&link["drops_total"]) > 0.0,
        "CUBIC fills the FIFO to overflow"
    );
    let q = series(&out, "nic", "queue_packets");
    assert!(q.iter().map(|x| x.1).fold(0.0, f64::max) >= 990.0);
    // limit × serialisation = 1000 × 0.121 ms ≈ 121 ms: the largest sojourn and RTT.
    let full = 1000.0 * SER_MS;
    let max_sojourn = f(&link["sojourn_ms"]["max"]);
    assert!(
        (max_sojourn - full).abs() < 0.05 * full,
        "{max_sojourn} vs {full}"
    );
    let srtt = series(&out, "flow0", "srtt_ms");
    let max_srtt = srtt.iter().map(|x| x.1).fold(0.0, f64::max);
    assert!(
        max_srtt > 0.8 * full && max_srtt < 1.1 * full,
        "srtt {max_srtt}"
    );
}

/// The bulk flow and, 2 s into it, a 500-kB transfer on the same path.
fn bulk_and_transfer() -> String {
    format!(
        r#"{BULK}
        [[workload]]
        kind = "transfer"
        from = "client"
        to = "server"
        size = "500kB"
        start = "2s"
        "#
    )
}

fn fct_ms(out: &RunOutput, flow: usize) -> f64 {
    col_f64(&out.flows, "fct_s")[flow] * 1e3
}

/// A 500-kB transfer 2 s into a bulk flow on the sender's NIC: FIFO vs 2LPS at 633 kB.
///
/// Linux 6.18 here (`bench/linux/sender_side.sh`, 8 FIFO and 6 age runs): age 41.6–46.5
/// ms; FIFO is bimodal — 113–163 ms when the bulk flow's cwnd stalled at 33–53 segments
/// (its buffers then hold cwnd/2 segments) and 1008–1011 ms when it grew to 139–177
/// (two full 45-segment buffers queued, the transfer's 2-segment buffers get ~4/94 of the
/// link). sojourn is deterministic and lands in the second mode; the ratio must match it.
#[test]
fn transfer_behind_a_bulk_flow_fifo_vs_age() {
    let w = bulk_and_transfer();
    let fifo_out = sender_side(FIFO, "", &w, "4s");
    let fifo = fct_ms(&fifo_out, 1);
    let age_out = sender_side(
        "{ kind = \"age\", thresholds = [\"633kB\"], child = \"pfifo\" }",
        "",
        &w,
        "4s",
    );
    let age = fct_ms(&age_out, 1);
    // Age-based: the whole transfer is in level 0, alone at the link rate behind at most
    // the bulk buffer in service: 500 kB / 100 Mbit/s = 40 ms + handshake + slow start.
    assert!((age - 42.0).abs() < 0.3 * 42.0, "age {age} ms");
    // FIFO / age: Linux 1009.5 ms / 43.1 ms (means of the modes) = 23.4, ±30%.
    let linux_ratio = 1009.5 / 43.1;
    let ratio = fifo / age;
    assert!(
        (ratio - linux_ratio).abs() < 0.3 * linux_ratio,
        "fifo {fifo} ms / age {age} ms = {ratio} vs Linux {linux_ratio}"
    );
    assert!((fifo - 1009.5).abs() < 0.3 * 1009.5, "fifo {fifo} ms");
}

/// Without TSQ the transfer waits behind a full 1000-packet FIFO: every round trip costs
/// ~120 ms, the FIFO FCT is several times the TSQ one.
#[test]
fn without_tsq_the_transfer_waits_behind_the_full_fifo() {
    let w = bulk_and_transfer();
    let out = sender_side(FIFO, "tsq = false\n        gso = false", &w, "5s");
    let fifo = fct_ms(&out, 1);
    assert!(fifo > 4.0 * 1000.0 * SER_MS, "fifo without TSQ {fifo} ms");
}

/// client -> router -> server with the bottleneck qdisc on the router: TSQ on the client
/// does not limit the router's queue (the client's 1 Gbit/s NIC drains at once).
#[test]
fn a_router_side_fifo_still_fills() {
    let text = format!(
        r#"
        duration = "6s"
        [topology]
        kind = "graph"
        nodes = ["client", "router", "server"]
        [[topology.links]]
        name = "nic"
        from = "client"
        to = "router"
        rate = "1Gbit"
        delay = "10us"
        [[topology.links]]
        name = "bottleneck"
        from = "router"
        to = "server"
        rate = "100Mbit"
        delay = "10us"
        qdisc = {FIFO}
        {BULK}
        [record]
        interval = "10ms"
        links = ["nic", "bottleneck"]
        "#
    );
    let out = run_toml(&text).unwrap();
    let b = &out.summary["links"]["bottleneck"];
    assert!(f(&b["drops_total"]) > 0.0, "{b}");
    let q = series(&out, "bottleneck", "queue_packets");
    assert!(q.iter().map(|x| x.1).fold(0.0, f64::max) >= 990.0);
    let nic = series(&out, "nic", "queue_packets");
    assert!(nic.iter().map(|x| x.1).fold(0.0, f64::max) <= 60.0);
    assert!(f(&b["utilisation"]) >= 0.95);
}

/// Drops in the sending host's own qdisc return TSQ credit (Linux frees the skb): with a
/// 2-packet FIFO on the NIC (over a thousand drops) the flow keeps the link ~97% busy;
/// without that credit the socket leaks credit at every drop and stalls within a few
/// drops (measured: 0.2% utilisation with the notification removed).
#[test]
fn host_qdisc_drops_return_tsq_credit() {
    // Single-segment buffers (gso = false): two 64-KiB GSO buffers would fit exactly.
    let out = sender_side("{ kind = \"pfifo\", limit = 2 }", "gso = false", BULK, "2s");
    let link = &out.summary["links"]["nic"];
    assert!(f(&link["drops_total"]) > 0.0, "{link}");
    assert!(f(&link["utilisation"]) >= 0.9, "{link}");
    assert_eq!(out.summary["accounting"]["conserved"], true);
}

/// A host tbf whose bucket (10 kB) is smaller than a 64-KiB GSO buffer segments the buffer
/// (Linux `tbf_segment`) instead of dropping it: the flow runs at the tbf rate.
#[test]
fn a_host_tbf_segments_gso_buffers_larger_than_its_bucket() {
    let out = sender_side(
        "{ kind = \"tbf\", rate = \"50Mbit\", burst = \"10kB\", limit = \"200kB\" }",
        "",
        BULK,
        "3s",
    );
    let link = &out.summary["links"]["nic"];
    let thr = f(&link["throughput_bps"]);
    assert!((thr - 50e6).abs() < 0.05 * 50e6, "{link}");
    assert_eq!(out.summary["accounting"]["conserved"], true);
}
