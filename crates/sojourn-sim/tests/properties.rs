//! Engine-level property test (issue #22): TCP (every congestion control) and UDP traffic
//! through EVERY registered discipline at the bottleneck. Each run must conserve packets
//! (`sojourn_sim::run` checks created = delivered + dropped + in network at the end and
//! panics otherwise; summary.json states it), deliver no sized transfer beyond its size,
//! complete some transfers, and be deterministic: the same file and seed give the same
//! summary, flows, time series and packet log.

mod tcp_common;
use tcp_common::*;

use sojourn_core::rng::Rng;
use sojourn_sim::config::from_toml;
use std::path::Path;

/// A bottleneck qdisc table for `kind` (the required parameters where tc has no default).
fn qdisc(kind: &str) -> String {
    match kind {
        "red" => r#"{ kind = "red", limit = 200000 }"#.into(),
        "tbf" => r#"{ kind = "tbf", rate = "8Mbit", burst = 20000, limit = 60000 }"#.into(),
        "age" => r#"{ kind = "age", thresholds = [20000, 200000] }"#.into(),
        // SRPT's default ranks a SYN (no payload, no remaining bytes) behind every known
        // flow, so behind a backlogged bulk flow a new connection never opens (seed 121:
        // BBR bulk at 10 Mbit/s, no transfer in 4 s); pFabric's rule lets it through.
        "srpt" => r#"{ kind = "srpt", unknown = "smallest" }"#.into(),
        // sch_drr drops what no class or filter claims (Linux): one class per sender.
        "drr" => r#"{ kind = "drr", classes = [{ classid = "1:1", quantum = 1500 }, { classid = "1:2", quantum = 3000 }], filters = [{ src = "s0", classid = "1:1" }, { src = "s1", classid = "1:2" }] }"#.into(),
        // An htb with classes (without any, everything takes the unshaped direct queue).
        "htb" => r#"{ kind = "htb", default = "20", classes = [{ classid = "1:1", rate = "10Mbit" }, { classid = "1:10", parent = "1:1", rate = "4Mbit", ceil = "10Mbit" }, { classid = "1:20", parent = "1:1", rate = "6Mbit", ceil = "10Mbit", qdisc = "fq_codel" }], filters = [{ src = "s0", classid = "1:10" }] }"#.into(),
        k => format!(r#"{{ kind = "{k}" }}"#),
    }
}

#[test]
fn every_discipline_with_tcp_conserves_and_is_deterministic() {
    let ccs = ["reno", "cubic", "bbr", "vegas"];
    for (i, kind) in sojourn_core::qdisc::KINDS.iter().enumerate() {
        // A Python discipline runs only from the Python front (tests/python/test_python_disciplines.py).
        if kind.name == sojourn_core::qdisc::external::KIND {
            continue;
        }
        let seed = 100 + i as u64;
        let mut r = Rng::from_seed(seed);
        let text = format!(
            r#"
            duration = "4s"
            seed = {seed}
            [transport]
            cc = "{cc}"
            ecn = {ecn}
            [topology]
            kind = "dumbbell"
            pairs = 2
            bottleneck = {{ rate = "10Mbit", delay = "{d}ms", qdisc = {q}, loss = {loss} }}
            [[workload]]
            kind = "actors"
            pairs = "all"
            count = 3
            think = "100ms"
            size = {{ dist = "pareto", alpha = 1.2, min = "2kB", max = "500kB" }}
            [[workload]]
            kind = "bulk"
            pair = 0
            cc = "{cc2}"
            [[workload]]
            kind = "onoff"
            pair = 1
            rate = "3Mbit"
            packet_size = "1000B"
            on_time = "100ms"
            off_time = "100ms"
            [record]
            interval = "100ms"
            packets = ["bottleneck"]
            flows = true
            "#,
            cc = ccs[r.below(4) as usize],
            cc2 = ccs[r.below(4) as usize],
            ecn = r.chance(0.5),
            d = 1 + r.below(30),
            q = qdisc(kind.name),
            loss = [0.0, 0.01][r.below(2) as usize],
        );
        let exp = from_toml(&text, Path::new("."))
            .unwrap_or_else(|e| panic!("{}: {e:?}\n{text}", kind.name));
        let a = sojourn_sim::run(&exp, seed, &mut |_| true).unwrap();
        let b = sojourn_sim::run(&exp, seed, &mut |_| true).unwrap();
        assert_eq!(a.summary["accounting"]["conserved"], true, "{}", kind.name);
        assert!(
            f(&a.summary["accounting"]["delivered"]) > 1000.0,
            "{}: little traffic",
            kind.name
        );
        assert!(
            fingerprint(&a) == fingerprint(&b),
            "{}: same file and seed, different outputs",
            kind.name
        );
        let sizes = col_u64(&a.flows, "size_bytes");
        let got = col_u64(&a.flows, "delivered_bytes");
        let mut completed = 0;
        for (s, g) in sizes.iter().zip(&got) {
            if *s > 0 {
                assert!(
                    g <= s,
                    "{}: delivered {g} of a {s}-byte transfer",
                    kind.name
                );
                completed += (g == s) as u32;
            }
        }
        assert!(
            completed > 0,
            "{}: no transfer completed\n{text}",
            kind.name
        );
    }
}
