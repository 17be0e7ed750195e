//! The event-order contract (docs/engine.md, "Event order"): simultaneous events run in
//! an order that does not depend on when, or in which order, the engine filed them. The
//! proof here: whole runs in which every n-th event is filed through an extra no-op event
//! (a relay of its own class, due halfway, that files the real event when it fires) give
//! byte-identical outputs. Under the old insertion-order tie-break the relayed events
//! would have been filed later than their peers and every tie among them would have
//! flipped: with the queue's tie tag replaced by a filing counter (re-drawn when a relay
//! files its entry) the lockstep run below differs at once (checked when this test was
//! written), while the other two, with few exact ties, happen not to.

mod tcp_common;
use tcp_common::fingerprint;

use sojourn_sim::config::from_toml;
use sojourn_sim::{output, RunOutput, Sim};
use std::path::Path;

/// Dumbbell with TCP (CUBIC, BBR; handshakes, GSO), a closed-loop Poisson workload (app
/// timers), CBR, fq_codel, a reordering access link (late arrivals), a rate schedule,
/// warm-up and sampling.
const DUMBBELL: &str = r#"
duration = "3s"
warmup = "500ms"
[topology]
kind = "dumbbell"
pairs = 3
bottleneck = { rate = "20Mbit", delay = "10ms", qdisc = "fq_codel", rate_schedule = [{ at = "1500ms", rate = "12Mbit" }] }
access = { rate = "100Mbit", delay = "1ms", reorder = 0.05, reorder_delay = "2ms" }
[[workload]]
kind = "bulk"
pair = 0
cc = "cubic"
[[workload]]
kind = "bulk"
pair = 1
cc = "bbr"
start = "0.3s"
[[workload]]
kind = "poisson"
pair = 2
interval = "60ms"
size = { dist = "pareto", alpha = 1.2, min = "2KiB", max = "400KiB" }
[[workload]]
kind = "cbr"
pair = 2
rate = "2Mbit"
[record]
interval = "50ms"
packets = ["bottleneck"]
flows = true
"#;

/// A shaped sending host (shaper wake-ups, TSQ completions) with PIE, NewReno without
/// GSO and a late transfer with it; CAKE on the reverse path.
const SHAPED_HOST: &str = r#"
duration = "2s"
[transport]
gso = false
cc = "reno"
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
qdisc = "pie"
reverse = { rate = "1Gbit", qdisc = "cake", delay = "25us" }
[[workload]]
kind = "bulk"
from = "client"
to = "server"
[[workload]]
kind = "transfer"
from = "client"
to = "server"
start = "0.7s"
size = "300kB"
gso = true
cc = "cubic"
[record]
interval = "20ms"
"#;

/// A run's outputs and the number of relays it filed.
/// Lockstep: identical CBR sources on identical paths send at the same nanoseconds, so
/// their packets meet the bottleneck's small FIFO in exact ties (which one is queued and
/// which dropped is the tie order), and identical TCP flows start together. The engine
/// fingerprint of the reproduction pages runs the same file.
const LOCKSTEP: &str = include_str!("../../../experiments/examples/lockstep.toml");

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
        ("dumbbell", DUMBBELL),
        ("shaped host", SHAPED_HOST),
        ("lockstep", LOCKSTEP),
    ] {
        let (direct, none) = run(text, 11, 0);
        assert_eq!(none, 0);
        let flows = direct.summary["flows"]["count"].as_u64().unwrap();
        assert!(flows >= 2, "{name}: {flows} flows");
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
