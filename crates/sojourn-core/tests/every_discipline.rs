//! Property test over EVERY registered discipline (issue #17 "Make it stay fixed", #22):
//! random enqueue/dequeue/time sequences conserve packets and bytes (enqueued = dequeued +
//! dropped + queued), never return a packet twice, keep `len_packets`/`len_bytes`
//! consistent with the packets inside, respect `limit`, and are deterministic (the same
//! seed gives the same sequence of deliveries and drops, at the same times).
//!
//! Each discipline runs with its defaults and with a small limit, on 6 random sequences
//! of 3000 operations (arrivals from up to 40 flows of 64–1514 B, half ECN-capable,
//! dequeues, time jumps up to 5 ms), then drains. The per-discipline tests beside the
//! code vary the other parameters.

use sojourn_core::params::{Table, Value};
use sojourn_core::qdisc::testkit::check_conservation;
use sojourn_core::qdisc::{build, external, BuildCtx, Qdisc, KINDS};

/// What `limit` bounds for a discipline given a small `limit`.
#[derive(Clone, Copy, Debug)]
enum Bound {
    Packets(usize),
    Bytes(u64),
    None,
}

fn spec(kind: &str, kv: &[(&str, Value)]) -> Value {
    let mut t = Table::default();
    t.insert("kind", Value::Str(kind.into()));
    for (k, v) in kv {
        t.insert(k, v.clone());
    }
    Value::Table(t)
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

/// The configurations each kind is checked in: defaults (or the minimal required
/// parameters) and a small limit with the bound it must respect.
fn configs(kind: &str) -> Vec<(Value, Bound)> {
    let small = 20usize;
    let p = |kv: &[(&str, Value)]| spec(kind, kv);
    match kind {
        // sch_fq (Linux >= 6.7) applies `limit` per band: three bands.
        "fq" => vec![
            (p(&[]), Bound::None),
            (
                p(&[("limit", int(small as i64))]),
                Bound::Packets(3 * small),
            ),
        ],
        "pfifo" | "pfifo_head_drop" | "codel" | "fq_codel" | "pie" | "fq_pie" | "sfq"
        | "lstf_codel" | "las" | "srpt" | "dualpi2" => vec![
            (p(&[]), Bound::None),
            (p(&[("limit", int(small as i64))]), Bound::Packets(small)),
        ],
        "bfifo" => vec![
            (p(&[]), Bound::Bytes(1000 * 1514)),
            (p(&[("limit", int(30_000))]), Bound::Bytes(30_000)),
        ],
        // RED requires its byte limit (tc-red); it never holds more.
        "red" => vec![(p(&[("limit", int(60_000))]), Bound::Bytes(60_000))],
        // tbf: tc requires rate, burst and limit (or latency); the child bfifo holds the
        // limit in bytes. The head packet tbf peeks at (qdisc_peek_dequeued) is kept
        // outside the child's count here, while Linux counts it in the child's backlog:
        // sojourn's tbf can hold one packet more than Linux (known deviation, issue #22
        // report; the per-file test allows the same 1514 B).
        "tbf" => vec![(
            p(&[
                ("rate", Value::Str("10Mbit".into())),
                ("burst", int(20_000)),
                ("limit", int(40_000)),
            ]),
            Bound::Bytes(40_000 + 1514),
        )],
        // age needs its byte thresholds (no default); counting by the qdisc's own bytes
        // (the synthetic packets carry no conntrack count).
        "age" => vec![(
            p(&[
                ("thresholds", Value::Array(vec![int(3_000), int(30_000)])),
                ("count", Value::Str("qdisc".into())),
            ]),
            Bound::None,
        )],
        // Composite and scheduling disciplines: defaults; their children's limits are
        // checked through the children's own kinds and the per-file tests.
        _ => vec![(p(&[]), Bound::None)],
    }
}

fn within(q: &impl Qdisc, b: Bound) -> bool {
    match b {
        Bound::Packets(n) => q.len_packets() <= n,
        Bound::Bytes(n) => q.len_bytes() <= n,
        Bound::None => true,
    }
}

#[test]
fn every_discipline_conserves_respects_its_limit_and_is_deterministic() {
    let mut checked = Vec::new();
    for kind in KINDS {
        // An external discipline is a class the front plugs in: its engine-side wrapper is
        // tested where it lives (crates/sojourn-py, tests/python/test_python_disciplines.py).
        if kind.name == external::KIND {
            checked.push(kind.name);
            continue;
        }
        for (cfg, bound) in configs(kind.name) {
            for seed in 0..6u64 {
                let ctx = BuildCtx {
                    link_rate_bps: 10_000_000,
                    seed: 1000 + seed,
                    ..BuildCtx::default()
                };
                let run = || {
                    let mut q = build(&cfg, "q", &ctx)
                        .unwrap_or_else(|e| panic!("{}: {cfg:?}: {e:?}", kind.name));
                    let name = kind.name;
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        check_conservation(&mut q, seed, 3000, |q| within(q, bound))
                    }))
                    .unwrap_or_else(|_| panic!("{name} (seed {seed}, {cfg:?}) failed above"))
                };
                let a = run();
                let b = run();
                assert!(!a.is_empty(), "{}: nothing happened", kind.name);
                assert!(
                    a == b,
                    "{} (seed {seed}, {cfg:?}): two runs of the same sequence differ",
                    kind.name
                );
            }
            checked.push(kind.name);
        }
    }
    // Every registered kind was exercised (a new kind gets its check by registering).
    for kind in KINDS {
        assert!(checked.contains(&kind.name), "{} not checked", kind.name);
    }
    assert!(checked.len() >= 20, "{checked:?}");
}

/// A non-trivial limit is actually reached by the random sequence (otherwise the limit
/// checks above would hold vacuously): with a 20-packet limit and arrivals outpacing
/// dequeues, pfifo drops at its tail.
#[test]
fn the_random_sequences_reach_the_limit() {
    let cfg = spec("pfifo", &[("limit", int(20))]);
    let mut q = build(&cfg, "q", &BuildCtx::default()).unwrap();
    let trace = check_conservation(&mut q, 3, 3000, |q| q.len_packets() <= 20);
    let drops = trace.iter().filter(|x| x.2 >= 0).count();
    assert!(drops > 100, "{drops} drops");
}
