//! The simulator's flows are what the engine-neutral workload generators schedule
//! (`sojourn_experiment::schedule::Generator`): driven as the live load generator drives
//! them (woken at their scheduled times, told completion times of its own), they give the
//! simulator's start times and sizes for one seed. These tests lived in sojourn-emu's load
//! generator; they compare with the simulator, so they live beside it now that the
//! emulator does not depend on it.

use sojourn_core::{Duration, Time};
use sojourn_experiment::schedule::{Generator, Open, Payload};
use sojourn_experiment::{Experiment, WorkloadPlan};
use sojourn_sim::Column;
use std::path::Path;

fn exp(text: &str) -> Experiment {
    sojourn_experiment::parse_str(text, Path::new(".")).unwrap()
}

/// The simulator's flows (start time, size) for one seed, from its own output.
fn sim_flows(e: &Experiment, seed: u64) -> Vec<(f64, u64)> {
    let out = sojourn_sim::run(e, seed, &mut |_| true).unwrap();
    let (Some(Column::F64(start)), Some(Column::U64(size))) =
        (out.flows.get("start_s"), out.flows.get("size_bytes"))
    else {
        panic!("flows columns")
    };
    start.iter().copied().zip(size.iter().copied()).collect()
}

#[test]
fn poisson_arrivals_match_the_simulator_for_one_seed() {
    // An open loop's start times and sizes do not depend on the network: driven as the
    // load generator drives it (woken at the scheduled times), the shared generator
    // gives exactly the simulator's flow table.
    let e = exp(r#"
        duration = "3s"
        [topology]
        bottleneck = { rate = "100Mbit", delay = "5ms" }
        [[workload]]
        kind = "poisson"
        interval = "40ms"
        size = { dist = "pareto", alpha = 1.2, min = "3KB", max = "300KB" }
    "#);
    let WorkloadPlan::Tcp(plan) = &e.workloads[0] else {
        panic!()
    };
    for seed in [1u64, 7] {
        let mut gen = Generator::new(plan, 0, seed);
        let mut ours = Vec::new();
        let mut wake = gen.start();
        let mut bound = sojourn_core::qdisc::testkit::Bound::new(1_000_000, "generator wakes");
        while let Some(t) = wake {
            bound.tick();
            if t >= Time::ZERO + e.duration {
                break;
            }
            let step = gen.wake(t);
            if let Some(Open {
                payload: Payload::Sized(n),
                ..
            }) = step.open
            {
                ours.push((t.as_secs_f64(), n));
            }
            wake = step.wake_at;
        }
        let sim = sim_flows(&e, seed);
        // 3 s at a 40 ms mean gap: about 75 arrivals.
        assert!(ours.len() > 40 && ours.len() < 120, "{}", ours.len());
        assert_eq!(ours, sim, "seed {seed}");
    }
}

#[test]
fn actor_sizes_match_the_simulator_for_one_seed() {
    // A closed loop's start times depend on FCTs, its sizes do not: the n-th transfer
    // of an actor has the same size in both engines, whatever the completion times.
    let e = exp(r#"
        duration = "2s"
        [topology]
        bottleneck = { rate = "100Mbit", delay = "2ms" }
        [[workload]]
        kind = "actors"
        think = "50ms"
        size = { dist = "exponential", mean = "20KB" }
    "#);
    let WorkloadPlan::Tcp(plan) = &e.workloads[0] else {
        panic!()
    };
    let sim = sim_flows(&e, 3);
    assert!(sim.len() > 5);
    let mut gen = Generator::new(plan, 0, 3);
    let first = gen.start().unwrap();
    // The first transfer starts after the first think time, to the nanosecond.
    assert!((sim[0].0 - first.as_secs_f64()).abs() < 1e-9);
    let mut t = first;
    for &(_, size) in &sim {
        let open = gen.wake(t).open.unwrap();
        assert!(matches!(open.payload, Payload::Sized(n) if n == size));
        // Completion times unlike the simulator's: sizes stay the same.
        t = gen.finished(t + Duration::from_ms(77)).wake_at.unwrap_or(t);
    }
}
