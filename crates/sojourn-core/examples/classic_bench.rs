//! ns per enqueue+dequeue pair for sfq/red/prio/pfifo_fast/tbf at steady backlog.
use sojourn_core::params::Value;
use sojourn_core::qdisc::{build, BuildCtx};
use sojourn_core::{Drops, Packet, Qdisc, Time};
use std::time::Instant;

fn run(spec: Value, flows: u32, backlog: usize) -> f64 {
    let mut q = build(&spec, "q", &BuildCtx::default()).unwrap();
    let mut d = Drops::new();
    let pkts: Vec<Packet> = (0..4096u32)
        .map(|i| {
            let mut p = Packet::synthetic(i as u64, i % flows, 64 + (i * 37) % 1450);
            p.priority = i % 8;
            p
        })
        .collect();
    let mut now = Time(0);
    for i in 0..backlog {
        q.enqueue(pkts[i % 4096], now, &mut d);
    }
    let n: u64 = std::env::var("N")
        .map(|v| v.parse().unwrap())
        .unwrap_or(5_000_000);
    let t = Instant::now();
    for i in 0..n {
        now.0 += 1000;
        let mut p = pkts[(i & 4095) as usize];
        p.enqueued_at = now;
        q.enqueue(p, now, &mut d);
        std::hint::black_box(q.dequeue(now, &mut d));
        d.clear();
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    if let Ok(k) = std::env::var("ONLY") {
        let flows: u32 = std::env::var("FLOWS")
            .map(|f| f.parse().unwrap())
            .unwrap_or(128);
        let ns = run(Value::Str(k.clone()), flows, 100);
        println!("{k} flows={flows}: {ns:.1} ns/pair");
        return;
    }
    for flows in [1, 16, 128, 1024, 4096] {
        let ns = run(Value::Str("sfq".into()), flows, 100);
        println!("sfq flows={flows:5}: {ns:.1} ns/pair");
    }
    let t = |kv: Vec<(&str, Value)>| {
        Value::Table(sojourn_core::params::Table(
            kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        ))
    };
    let red = t(vec![
        ("kind", Value::Str("red".into())),
        ("limit", Value::Int(400_000)),
    ]);
    println!(
        "pfifo: {:.1} ns/pair",
        run(Value::Str("pfifo".into()), 64, 50)
    );
    println!("red: {:.1} ns/pair", run(red, 64, 50));
    println!(
        "prio: {:.1} ns/pair",
        run(Value::Str("prio".into()), 64, 50)
    );
    println!(
        "pfifo_fast: {:.1} ns/pair",
        run(Value::Str("pfifo_fast".into()), 64, 50)
    );
    let tbf = t(vec![
        ("kind", Value::Str("tbf".into())),
        ("rate", Value::Str("100Gbit".into())),
        ("burst", Value::Int(100_000)),
        ("limit", Value::Int(10_000_000)),
    ]);
    println!("tbf: {:.1} ns/pair", run(tbf, 64, 50));
}
