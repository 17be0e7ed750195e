//! The fast link path (docs/engine.md, "The fast link path"; sim/fast_link.rs): a
//! constant-rate, lossless, tail-drop FIFO link leaving a router has its transmissions
//! computed at enqueue, with no transmission-end event. It must change nothing: the same
//! runs with every link forced onto the general path (`Sim::use_general_link_path`, a
//! transmission-end event per packet, the engine as it was) give byte-identical outputs
//! — summary (link counters, sojourn histograms, queue at the end, the event count),
//! flow records, time series (queue length and throughput samples) and packet logs.

mod tcp_common;
use tcp_common::fingerprint;

use sojourn_sim::config::from_toml;
use sojourn_sim::{output, RunOutput, Sim};
use std::path::Path;

/// Tail drops on a fast pfifo bottleneck (12 Mbit/s of CBR into 10 Mbit/s, 100 packets),
/// samples of its queue every 100 ms, a warm-up that resets the counters.
const CBR_OVERLOAD: &str = include_str!("../../../experiments/examples/cbr-fifo-overload.toml");
/// Identical sources in exact ties at a small FIFO (which packet is dropped is the tie
/// order). A variant without access delay enqueues on the (fast) bottleneck at the end
/// of the senders' transmissions, some at the instant of the bottleneck's own computed
/// ends: which of the two comes first is the permuted link ids' order.
const LOCKSTEP: &str = include_str!("../../../experiments/examples/lockstep.toml");
/// CUBIC and BBR, a closed-loop Poisson workload and CBR through fq_codel. The file's
/// access links have no delay: only the reverse bottleneck (a FIFO) takes the fast path,
/// and the ACKs reach it at the end of a receiver's transmission, in the same class as
/// its own computed ends (the tie between them is the permuted link ids'). A variant gives
/// the access links 500 µs, which puts the routers' access links on the fast path too.
const MIXED: &str = include_str!("../../../experiments/examples/mixed-dumbbell.toml");
const MIXED_BOTTLENECK: &str =
    r#"bottleneck = { rate = "20Mbit", delay = "10ms", qdisc = "fq_codel" }"#;
/// An ISP tree (HTB and FQ-CoDel on the uplink and upstream, FIFO subscriber lines): the
/// uplink has no delay, so packets enter the subscriber lines (fast) at the end of the
/// uplink's transmissions.
const ISP_SMALL: &str = include_str!("../../../experiments/isp/small.toml");

/// A dumbbell of `pairs` pairs running `duration`, with `links` (its `bottleneck`,
/// `access`, maybe `reverse` tables) and then `rest` (workloads, record) as TOML.
fn dumbbell(duration: &str, pairs: u32, links: &[(&str, &str)], rest: &str) -> String {
    let links: String = links.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
    let head = format!("duration = \"{duration}\"\n[topology]\nkind = \"dumbbell\"\n");
    format!("{head}pairs = {pairs}\n{links}{rest}")
}

/// TCP through a bfifo bottleneck of 30 full frames (byte-limit tail drops), a warm-up
/// ending mid-run, queue and flow samples every 10 ms (many land on a transmission's start
/// or end), and a 1-µs access delay.
fn bfifo_tcp() -> String {
    dumbbell(
        "3s",
        4,
        &[
            (
                "bottleneck",
                r#"{ rate = "20Mbit", delay = "5ms", qdisc = { kind = "bfifo", limit = 45000 } }"#,
            ),
            ("access", r#"{ rate = "1Gbit", delay = "1us" }"#),
        ],
        "[transport]\ncc = \"cubic\"\n[[workload]]\nkind = \"bulk\"\npairs = \"all\"\ncount = 4\n\
         [record]\ninterval = \"10ms\"\nflows = true\n",
    )
    .replace("[topology]", "warmup = \"500ms\"\n[topology]")
}

/// Packets logged on one fast-path candidate (the bottleneck), which keeps it on the
/// general path, and a pfifo of 20 packets on the reverse direction.
fn logged() -> String {
    dumbbell(
        "2s",
        2,
        &[
            (
                "bottleneck",
                r#"{ rate = "8Mbit", delay = "10ms", qdisc = { kind = "pfifo", limit = 20 } }"#,
            ),
            ("reverse", r#"{ qdisc = { kind = "pfifo", limit = 20 } }"#),
            ("access", r#"{ rate = "100Mbit", delay = "2ms" }"#),
        ],
        "[transport]\ncc = \"reno\"\n[[workload]]\nkind = \"bulk\"\npairs = \"all\"\ncount = 3\n\
         [record]\ninterval = \"50ms\"\npackets = [\"bottleneck\"]\n",
    )
}

/// Exact ties between a fast link's computed ends and enqueues in the same class: two CBR
/// sources in lockstep send 1000-B packets every 2 ms (4 Mbit/s) over zero-delay access
/// links into an 8-Mbit/s pfifo of one packet, whose transmissions take exactly 1 ms
/// (no framing). Every 2 ms two packets reach the bottleneck at the instant it finishes
/// one: whether the queued one has started then (the bottleneck's `TxDone` before the
/// access links' in the permuted order) decides which arrival is dropped.
fn ties() -> String {
    dumbbell(
        "2s",
        2,
        &[
            ("bottleneck", r#"{ rate = "8Mbit", delay = "5ms", qdisc = { kind = "pfifo", limit = 1 } }"#),
            ("access", r#"{ rate = "1Gbit", delay = "0ms" }"#),
        ],
        "[[workload]]\nkind = \"cbr\"\npairs = \"all\"\nrate = \"4Mbit\"\npacket_size = \"1000B\"\n\
         [record]\ninterval = \"10ms\"\n",
    )
}

struct Run {
    out: RunOutput,
    fast_links: usize,
    computed: u64,
}

fn run(text: &str, seed: u64, general: bool) -> Run {
    let exp = from_toml(text, Path::new(".")).unwrap();
    let mut sim = Sim::new(&exp, seed);
    if general {
        sim.use_general_link_path();
    }
    sim.start_apps();
    assert!(sim.run(&mut |_| true));
    sim.check_conservation().unwrap();
    Run {
        fast_links: sim.fast_links(),
        computed: sim.event_counts.tx_done_computed,
        out: output::collect(&mut sim, exp.record.fct_from),
    }
}

#[test]
fn fast_links_change_no_output() {
    for (name, text, seed) in [
        ("cbr into a pfifo", CBR_OVERLOAD, 1),
        ("lockstep", LOCKSTEP, 3),
        (
            "lockstep, zero-delay access",
            &LOCKSTEP.replace(r#"delay = "1ms" }"#, r#"delay = "0ms" }"#),
            3,
        ),
        ("mixed dumbbell, zero-delay access", MIXED, 5),
        (
            "mixed dumbbell",
            &MIXED.replace(
                MIXED_BOTTLENECK,
                &format!("{MIXED_BOTTLENECK}\naccess = {{ rate = \"1Gbit\", delay = \"500us\" }}"),
            ),
            5,
        ),
        ("isp tree", ISP_SMALL, 1),
        ("tcp into a bfifo", &bfifo_tcp(), 7),
        ("exact ties, seed 1", &ties(), 1),
        ("exact ties, seed 2", &ties(), 2),
        ("exact ties, seed 3", &ties(), 3),
        ("a logged link", &logged(), 9),
    ] {
        let general = run(text, seed, true);
        assert_eq!(
            general.fast_links, 0,
            "{name}: forced onto the general path"
        );
        assert_eq!(general.computed, 0, "{name}");
        let fast = run(text, seed, false);
        // The fast path really ran: links on it, thousands of transmissions computed.
        assert!(fast.fast_links > 0, "{name}: no fast link");
        assert!(
            fast.computed > 1000,
            "{name}: {} transmissions computed at enqueue",
            fast.computed
        );
        let delivered = fast.out.summary["accounting"]["delivered"]
            .as_u64()
            .unwrap();
        assert!(delivered > 1000, "{name}: {delivered} packets delivered");
        assert!(
            fingerprint(&fast.out) == fingerprint(&general.out),
            "{name}: the fast link path changed the outputs"
        );
    }
}

/// The runs above exercise what the fast path must reproduce: tail drops on a fast link
/// (pfifo and bfifo), a queue standing at the end of the run, and a logged FIFO link left
/// on the general path.
#[test]
fn the_identity_runs_cover_drops_and_standing_queues() {
    let cbr = run(CBR_OVERLOAD, 1, false).out;
    let b = &cbr.summary["links"]["bottleneck"];
    // 12 Mbit/s offered to 10 Mbit/s: about 1/6 of the packets are dropped (the file's
    // own comment: 16.7 %), and the 100-packet FIFO is full or nearly so at the end.
    assert!(b["drops_total"].as_u64().unwrap() > 1000, "{b}");
    assert!(b["queue_packets_at_end"].as_u64().unwrap() >= 99, "{b}");
    let bfifo = run(&bfifo_tcp(), 7, false).out;
    let b = &bfifo.summary["links"]["bottleneck"];
    assert!(b["drops_total"].as_u64().unwrap() > 0, "{b}");
    // The logged bottleneck keeps the general path; the reverse FIFO and the routers'
    // access links take the fast one.
    let exp = from_toml(&logged(), Path::new(".")).unwrap();
    let sim = Sim::new(&exp, 9);
    // 2 pairs: 4 access links leave the routers, plus the reverse bottleneck.
    assert_eq!(sim.fast_links(), 5);
    // Access links without delay forward at the end of a transmission, work that needs
    // the event: of the mixed dumbbell's links only the reverse bottleneck qualifies.
    assert!(MIXED.contains(MIXED_BOTTLENECK));
    let exp = from_toml(MIXED, Path::new(".")).unwrap();
    assert_eq!(Sim::new(&exp, 5).fast_links(), 1);
}
