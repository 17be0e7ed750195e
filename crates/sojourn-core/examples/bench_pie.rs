//! ns per enqueue+dequeue pair for pie and fq_pie (pfifo as the floor).
//!
//! `cargo run --release -p sojourn-core --example bench_pie`; `BENCH_N` (pairs per
//! repetition, default 5M), `BENCH_REPS` (default 5, the minimum is reported) and
//! `BENCH_ONLY=<label>` (one case, e.g. under `valgrind --tool=callgrind`).
//!
//! Each pair: one arrival of a 1514-B packet from one of `active` flows, then (7 times in
//! 8) one dequeue, 10 us of simulated time apart, so queues stand full and AQMs work.

use sojourn_core::params::{Table, Value};
use sojourn_core::qdisc::{build, BuildCtx};
use sojourn_core::{Drops, Duration, Packet, Qdisc, Time};
use std::time::Instant;

fn env_u64(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(default)
}

fn run(spec: Value, active: u32, label: &str) {
    if let Ok(only) = std::env::var("BENCH_ONLY") {
        if only != label {
            return;
        }
    }
    let n = env_u64("BENCH_N", 5_000_000);
    let reps = env_u64("BENCH_REPS", 5).max(1);
    let pkts: Vec<Packet> = (0..4096u64)
        .map(|i| Packet::synthetic(i, (i as u32).wrapping_mul(2_654_435_761) % active, 1514))
        .collect();
    let mut best = f64::MAX;
    let mut last = (0, 0);
    for _ in 0..reps {
        let mut q = build(&spec, "q", &BuildCtx::default()).unwrap();
        let mut d = Drops::new();
        let mut now = Time(0);
        for i in 0..200u64 {
            let mut p = pkts[(i % 4096) as usize];
            p.uid = i;
            q.enqueue(p, now, &mut d);
        }
        d.clear();
        let t = Instant::now();
        let mut delivered = 0u64;
        for i in 0..n {
            now += Duration(10_000);
            let mut p = pkts[(i % 4096) as usize];
            p.uid = i + 1000;
            p.enqueued_at = now;
            q.enqueue(p, now, &mut d);
            if i % 8 != 7 && q.dequeue(now, &mut d).packet().is_some() {
                delivered += 1;
            }
            d.clear();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
        last = (delivered, q.len_packets());
    }
    println!(
        "{label:34} {best:6.1} ns per enqueue+dequeue (min of {reps}; delivered {}, qlen {})",
        last.0, last.1
    );
}

fn table(kind: &str, kv: &[(&str, Value)]) -> Value {
    let mut v = vec![("kind".to_string(), Value::Str(kind.into()))];
    v.extend(kv.iter().map(|(k, x)| (k.to_string(), x.clone())));
    Value::Table(Table(v))
}

fn main() {
    let us100 = || Value::Str("100us".into());
    run(Value::Str("pfifo".into()), 1, "pfifo");
    run(Value::Str("pie".into()), 1, "pie");
    run(
        table("pie", &[("dq_rate_estimator", Value::Bool(true))]),
        1,
        "pie dq_rate_estimator",
    );
    run(
        table("pie", &[("target", us100())]),
        1,
        "pie target=100us (dropping)",
    );
    run(
        table("fq_pie", &[("target", us100())]),
        1000,
        "fq_pie target=100us active=1000",
    );
    for (flows, active) in [(1024, 10), (1024, 1000), (65536, 50_000)] {
        run(
            table("fq_pie", &[("flows", Value::Int(flows))]),
            active,
            &format!("fq_pie flows={flows} active={active}"),
        );
    }
}
