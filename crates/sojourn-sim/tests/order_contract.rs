//! The event-order contract (docs/engine.md, "Event order"): simultaneous events run in
//! an order that does not depend on when, or in which order, the engine filed them. The
//! proof here: whole runs (the shipped examples mixed-dumbbell, shaped-host and lockstep,
//! and one with reordering and a rate schedule) in which every n-th event is filed through
//! an extra no-op event (a relay of its own class, due halfway, that files the real event
//! when it fires) give byte-identical outputs. Under the old insertion-order tie-break the
//! relayed events would have been filed later than their peers and every tie among them
//! would have flipped: with the queue's tie tag replaced by a filing counter (re-drawn when a relay
//! files its entry) the reordering run and the lockstep run differ at once (checked when
//! this test was written).

mod tcp_common;
use tcp_common::fingerprint;

use sojourn_sim::config::from_toml;
use sojourn_sim::{output, RunOutput, Sim};
use std::path::Path;

/// CUBIC and BBR bulk flows, a closed-loop Poisson workload (app timers, handshakes) and
/// CBR through fq_codel.
const MIXED: &str = include_str!("../../../experiments/examples/mixed-dumbbell.toml");

/// Late (reordered) arrivals on the access links, a rate change of the bottleneck, a
/// warm-up that resets the statistics, and flow time series.
const REORDER_SCHEDULE: &str = r#"
duration = "2s"
warmup = "400ms"
[topology]
kind = "dumbbell"
pairs = 2
bottleneck = { rate = "30Mbit", delay = "4ms", qdisc = "codel", rate_schedule = [{ at = "1200ms", rate = "15Mbit" }] }
access = { rate = "200Mbit", delay = "2ms", reorder = 0.08, reorder_delay = "3ms" }
[transport]
cc = "cubic"
[[workload]]
kind = "bulk"
pairs = "all"
count = 2
[record]
interval = "25ms"
flows = true
packets = ["bottleneck"]
"#;

/// A shaped sending host (shaper wake-ups, TSQ completions) with PIE, NewReno without
/// GSO and later transfers with it, CUBIC among them.
const SHAPED_HOST: &str = include_str!("../../../experiments/examples/shaped-host.toml");

/// A run's outputs and the number of relays it filed.
/// Lockstep: identical CBR sources on identical paths send at the same nanoseconds, so
/// their packets meet the bottleneck's small FIFO in exact ties (which one is queued and
/// which dropped is the tie order), and identical TCP flows start together. The engine
/// fingerprint of the reproduction pages runs the same file.
const LOCKSTEP: &str = include_str!("../../../experiments/examples/lockstep.toml");
/// Flows from four hosts in a 16-bucket fq_codel (the fingerprint's fourth run).
const SHARED_BUCKETS: &str = include_str!("../../../experiments/examples/shared-buckets.toml");
/// The Wi-Fi medium (one transmitter for several link directions, docs/wifi.md).
const WIFI: &str = include_str!("../../../experiments/wifi/ten-stations.toml");

fn run(text: &str, seed: u64, relay: u32) -> (RunOutput, u64) {
    let exp = from_toml(text, Path::new(".")).unwrap();
    let mut sim = Sim::new(&exp, seed);
    sim.relay_events_every(relay);
    sim.start_apps();
    assert!(sim.run(&mut |_| true));
    sim.check_conservation().unwrap();
    let relays = sim.relays_filed();
    (output::collect(&mut sim, exp.record.fct_from), relays)
}

#[test]
fn relayed_filings_leave_every_output_unchanged() {
    for (name, text) in [
        ("mixed dumbbell", MIXED),
        ("reordering and a rate schedule", REORDER_SCHEDULE),
        ("shaped host", SHAPED_HOST),
        ("lockstep", LOCKSTEP),
        ("shared buckets", SHARED_BUCKETS),
        (
            "wifi",
            &WIFI
                .replace("duration = \"60s\"", "duration = \"3s\"")
                .replace("warmup = \"5s\"", "warmup = \"1s\""),
        ),
    ] {
        let (direct, none) = run(text, 11, 0);
        assert_eq!(none, 0);
        // Real traffic went through (thousands of packets delivered).
        let delivered = direct.summary["accounting"]["delivered"].as_u64().unwrap();
        assert!(delivered > 1000, "{name}: {delivered} packets delivered");
        let base = fingerprint(&direct);
        for relay in [1, 2, 7] {
            let (relayed, relays) = run(text, 11, relay);
            // The relays really ran: thousands of events went through one.
            assert!(
                relays > 1000,
                "{name}: relay every {relay}: {relays} relays"
            );
            assert!(
                fingerprint(&relayed) == base,
                "{name}: filing one event in {relay} through a relay changed the outputs"
            );
        }
    }
}
