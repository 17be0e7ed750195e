//! One run on many cores (issue 35 §3; docs/engine.md, "One run on many cores"): the same
//! experiment cut over 2 and 4 threads gives the single-threaded run's bytes — summary.json,
//! flows, time series, histograms — on a dumbbell, on a parking lot with three bottlenecks,
//! on two independent halves and on a 1,000-subscriber ISP tree. Threads oversubscribe this
//! machine's cores; identity does not depend on how they are scheduled.

mod tcp_common;
use tcp_common::fingerprint;

use sojourn_sim::config::from_toml;
use sojourn_sim::{output, parallel, RunOutput, Sim};
use std::path::Path;

fn serial(text: &str, seed: u64) -> RunOutput {
    let exp = from_toml(text, Path::new(".")).unwrap();
    let mut sim = Sim::new(&exp, seed);
    sim.start_apps();
    assert!(sim.run(&mut |_| true));
    sim.check_conservation().unwrap();
    output::collect(&mut sim, exp.record.fct_from)
}

fn threaded(text: &str, seed: u64, threads: usize) -> (RunOutput, parallel::Plan) {
    let exp = from_toml(text, Path::new(".")).unwrap();
    let plan = parallel::cut(&exp, threads).unwrap_or_else(|why| panic!("not cut: {why}"));
    let out = parallel::run(&exp, seed, &plan, &mut |_| true).expect("not aborted");
    (out, plan)
}

fn histograms(out: &RunOutput) -> String {
    format!("{:?}", out.histograms)
}

fn assert_identical(name: &str, text: &str, seed: u64, min_parts: usize) {
    let one = serial(text, seed);
    for threads in [2, 4] {
        let (many, plan) = threaded(text, seed, threads);
        eprintln!(
            "{name}, {threads} threads: {} partitions, {} cut links, lookahead {:?}",
            plan.parts,
            plan.cut_links.len(),
            plan.lookahead
        );
        assert!(plan.parts >= min_parts.min(threads), "{name}: {plan:?}");
        let (a, b) = (one.summary_json(), many.summary_json());
        if a != b {
            let diff: Vec<String> = a
                .lines()
                .zip(b.lines())
                .enumerate()
                .filter(|(_, (x, y))| x != y)
                .take(12)
                .map(|(i, (x, y))| format!("line {i}: {x} | {y}"))
                .collect();
            panic!(
                "{name}: summary.json differs on {threads} threads ({} partitions):\n{}",
                plan.parts,
                diff.join("\n")
            );
        }
        assert!(
            fingerprint(&one) == fingerprint(&many),
            "{name}: outputs differ on {threads} threads"
        );
        assert_eq!(histograms(&one), histograms(&many), "{name}: histograms");
    }
}

/// Routers r0–r3 in a chain of three fq_codel bottlenecks with 5-ms links; a long flow
/// crosses all three, cross traffic (bulk, Poisson transfers, CBR) each one.
const PARKING_LOT: &str = r#"
duration = "4s"
warmup = "1s"
[topology]
kind = "graph"
nodes = ["r0", "r1", "r2", "r3", "long_src", "long_dst", "x0", "y0", "x1", "y1", "x2", "y2"]
[[topology.links]]
name = "b0"
from = "r0"
to = "r1"
rate = "20Mbit"
delay = "5ms"
qdisc = "fq_codel"
[[topology.links]]
name = "b1"
from = "r1"
to = "r2"
rate = "15Mbit"
delay = "5ms"
qdisc = "fq_codel"
[[topology.links]]
name = "b2"
from = "r2"
to = "r3"
rate = "10Mbit"
delay = "5ms"
qdisc = "codel"
[[topology.links]]
name = "ls"
from = "long_src"
to = "r0"
rate = "100Mbit"
delay = "1ms"
[[topology.links]]
name = "ld"
from = "r3"
to = "long_dst"
rate = "100Mbit"
delay = "1ms"
[[topology.links]]
name = "x0"
from = "x0"
to = "r0"
rate = "100Mbit"
delay = "1ms"
[[topology.links]]
name = "y0"
from = "r1"
to = "y0"
rate = "100Mbit"
delay = "1ms"
[[topology.links]]
name = "x1"
from = "x1"
to = "r1"
rate = "100Mbit"
delay = "1ms"
[[topology.links]]
name = "y1"
from = "r2"
to = "y1"
rate = "100Mbit"
delay = "1ms"
[[topology.links]]
name = "x2"
from = "x2"
to = "r2"
rate = "100Mbit"
delay = "1ms"
[[topology.links]]
name = "y2"
from = "r3"
to = "y2"
rate = "100Mbit"
delay = "1ms"
[transport]
cc = "cubic"
[[workload]]
kind = "bulk"
from = "long_src"
to = "long_dst"
count = 2
[[workload]]
kind = "bulk"
from = "x0"
to = "y0"
[[workload]]
kind = "poisson"
from = "x1"
to = "y1"
interval = "40ms"
size = { dist = "pareto", alpha = 1.2, min = "2KiB", max = "500KiB" }
[[workload]]
kind = "bulk"
from = "x2"
to = "y2"
cc = "bbr"
[[workload]]
kind = "cbr"
from = "x1"
to = "y2"
rate = "1Mbit"
[record]
interval = "50ms"
"#;

#[test]
fn a_parking_lot_gives_the_same_bytes_on_any_thread_count() {
    assert_identical("parking lot", PARKING_LOT, 3, 2);
}

#[test]
fn a_dumbbell_gives_the_same_bytes_on_any_thread_count() {
    let text = r#"
duration = "3s"
[topology]
kind = "dumbbell"
pairs = 4
bottleneck = { rate = "20Mbit", delay = "10ms", qdisc = "fq_codel" }
access = { rate = "100Mbit", delay = "2ms" }
[transport]
cc = "cubic"
[[workload]]
kind = "bulk"
pairs = "all"
count = 2
[[workload]]
kind = "poisson"
pair = 1
interval = "50ms"
size = "30kB"
[record]
interval = "100ms"
"#;
    assert_identical("dumbbell", text, 1, 2);
}

#[test]
fn a_thousand_subscriber_tree_gives_the_same_bytes_on_any_thread_count() {
    let text = include_str!("../../../experiments/isp/subscribers-1000.toml")
        .replace("duration = \"20s\"", "duration = \"2s\"")
        .replace("warmup = \"5s\"", "warmup = \"500ms\"")
        .replace("interval = \"500ms\"", "interval = \"100ms\"");
    assert_identical("1,000 subscribers", &text, 1, 2);
}

/// Two networks that share nothing: the planner cuts no link (infinite lookahead).
const TWO_HALVES: &str = r#"
duration = "3s"
[topology]
kind = "graph"
nodes = ["a1", "ra", "as", "b1", "rb", "bs"]
[[topology.links]]
name = "a1-ra"
from = "a1"
to = "ra"
rate = "200Mbit"
delay = "2ms"
[[topology.links]]
name = "a-bottleneck"
from = "ra"
to = "as"
rate = "50Mbit"
delay = "10ms"
qdisc = "fq_codel"
[[topology.links]]
name = "b1-rb"
from = "b1"
to = "rb"
rate = "200Mbit"
delay = "2ms"
[[topology.links]]
name = "b-bottleneck"
from = "rb"
to = "bs"
rate = "50Mbit"
delay = "10ms"
qdisc = "pie"
[transport]
cc = "cubic"
[[workload]]
kind = "bulk"
from = "a1"
to = "as"
count = 4
[[workload]]
kind = "poisson"
from = "b1"
to = "bs"
interval = "20ms"
size = "40kB"
[[workload]]
kind = "bulk"
from = "b1"
to = "bs"
count = 2
[record]
interval = "50ms"
"#;

#[test]
fn two_independent_halves_give_the_same_bytes_on_any_thread_count() {
    assert_identical("two halves", TWO_HALVES, 5, 2);
}

/// What stays on one thread says why.
#[test]
fn what_cannot_be_cut_says_why() {
    let why = |text: &str, threads: usize| {
        let exp = from_toml(text, Path::new(".")).unwrap();
        parallel::plan(&exp, threads).unwrap_err()
    };
    assert!(why(TWO_HALVES, 1).contains("one thread"));
    let series = TWO_HALVES.replace("interval = \"50ms\"", "interval = \"50ms\"\nflows = true");
    assert!(
        why(&series, 2).contains("flow time series"),
        "{}",
        why(&series, 2)
    );
    let closed = TWO_HALVES
        .replace("kind = \"poisson\"", "kind = \"actors\"\nthink = \"20ms\"")
        .replace("interval = \"20ms\"\n", "");
    assert!(
        why(&closed, 2).contains("closed loop"),
        "{}",
        why(&closed, 2)
    );
    let lone = r#"
duration = "1s"
[topology]
kind = "graph"
nodes = ["a", "b"]
[[topology.links]]
name = "ab"
from = "a"
to = "b"
rate = "10Mbit"
delay = "0ms"
[[workload]]
kind = "bulk"
from = "a"
to = "b"
"#;
    assert!(why(lone, 2).contains("no link"), "{}", why(lone, 2));
}

/// A failure in one partition (here the progress callback of partition 0 panics at the
/// run's end) stops the others at their next barrier instead of leaving them waiting, and
/// reaches the caller as a run on one thread would.
#[test]
fn a_failing_partition_stops_the_run() {
    let exp = from_toml(TWO_HALVES, Path::new(".")).unwrap();
    let plan = parallel::cut(&exp, 4).unwrap();
    assert!(plan.parts == 4 && !plan.cut_links.is_empty());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        parallel::run(&exp, 1, &plan, &mut |p| {
            assert!(p.now < p.end, "the progress callback failed");
            true
        })
    }));
    let Err(e) = r else {
        panic!("the panic did not reach the caller")
    };
    let msg = e
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.contains("the progress callback failed"), "{msg}");
}

/// Every shipped example the planner cuts gives the same bytes on 2 and 4 threads: UDP
/// sources in lockstep whose packets meet a FIFO in exact ties, a shaped host with TSQ, rate
/// schedules, HTB trees, reader pauses, the fingerprint's shared FQ buckets; the others
/// say why they stay on one thread.
#[test]
fn every_example_that_can_be_cut_gives_the_same_bytes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/examples");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "toml")
                && !p.to_string_lossy().ends_with(".sweep.toml")
        })
        .collect();
    names.sort();
    let mut cut = 0;
    for path in names {
        let text = std::fs::read_to_string(&path).unwrap();
        let exp = sojourn_sim::config::from_toml(&text, &dir).unwrap();
        // A few simulated seconds are enough for every path to be taken.
        let short = exp.duration.min(sojourn_core::Duration::from_ms(3_000));
        let mut exp = exp;
        exp.warmup = exp.warmup.min(sojourn_core::Duration::from_ms(500));
        exp.duration = short.max(exp.warmup + sojourn_core::Duration::from_ms(500));
        let one = {
            let mut sim = Sim::new(&exp, exp.seed);
            sim.start_apps();
            assert!(sim.run(&mut |_| true));
            output::collect(&mut sim, exp.record.fct_from)
        };
        for threads in [2, 4] {
            let plan = match parallel::cut(&exp, threads) {
                Ok(p) => p,
                Err(why) => {
                    eprintln!("{}: one thread: {why}", path.display());
                    continue;
                }
            };
            cut += 1;
            let many = parallel::run(&exp, exp.seed, &plan, &mut |_| true).unwrap();
            assert!(
                one.summary_json() == many.summary_json()
                    && fingerprint(&one) == fingerprint(&many),
                "{} differs on {threads} threads ({plan:?})",
                path.display()
            );
        }
    }
    assert!(cut >= 10, "only {cut} cut runs");
}

/// bench/threads.py's parking lot: three 300-Mbit/s FQ-CoDel bottlenecks behind 5-ms links,
/// 10-Gbit/s access links of 1 ms, 8 bulk flows end to end and 16 across each bottleneck.
fn bench_parking_lot() -> String {
    let mut t = String::from(
        "duration = \"1s\"\n[transport]\ncc = \"cubic\"\n[topology]\nkind = \"graph\"\n\
         nodes = [\"r0\", \"r1\", \"r2\", \"r3\", \"ls\", \"ld\", \"x0\", \"x1\", \"x2\", \"y0\", \"y1\", \"y2\"]\n",
    );
    let mut link = |name: &str, from: &str, to: &str, rate: &str, delay: &str, q: &str| {
        t += &format!(
            "[[topology.links]]\nname = \"{name}\"\nfrom = \"{from}\"\nto = \"{to}\"\nrate = \"{rate}\"\ndelay = \"{delay}\"\n{q}"
        );
    };
    for i in 0..3 {
        let (a, b) = (format!("r{i}"), format!("r{}", i + 1));
        link(
            &format!("b{i}"),
            &a,
            &b,
            "300Mbit",
            "5ms",
            "qdisc = \"fq_codel\"\n",
        );
    }
    link("ls", "ls", "r0", "10Gbit", "1ms", "");
    link("ld", "r3", "ld", "10Gbit", "1ms", "");
    for i in 0..3 {
        let (x, y, r0, r1) = (
            format!("x{i}"),
            format!("y{i}"),
            format!("r{i}"),
            format!("r{}", i + 1),
        );
        link(&x, &x, &r0, "10Gbit", "1ms", "");
        link(&y, &r1, &y, "10Gbit", "1ms", "");
    }
    t += "[[workload]]\nkind = \"bulk\"\nfrom = \"ls\"\nto = \"ld\"\ncount = 8\n";
    for i in 0..3 {
        t +=
            &format!("[[workload]]\nkind = \"bulk\"\nfrom = \"x{i}\"\nto = \"y{i}\"\ncount = 16\n");
    }
    t
}

/// A cut predicted not to pay runs on one thread, saying why; the prediction against what
/// bench/threads.py measured on 2 cores (bench/README.md, "One run on many cores"): the
/// parking lot 1.66x and the 10,000-subscriber tree 0.87x (both cut anyway there).
#[test]
fn a_cut_that_would_not_pay_stays_on_one_thread() {
    let exp = |text: &str| from_toml(text, Path::new(".")).unwrap();
    let parking = parallel::plan(&exp(&bench_parking_lot()), 2).expect("the parking lot pays");
    let s = parking.predicted_speedup();
    assert!(
        (1.4..=2.0).contains(&s),
        "parking lot: predicted {s:.2}x, measured 1.66x"
    );
    let tree = exp(include_str!("../../../experiments/isp/scale-10k.toml"));
    let cut = parallel::cut(&tree, 2).expect("the tree can be cut");
    let s = cut.predicted_speedup();
    assert!(
        (0.7..1.0).contains(&s),
        "10,000 subscribers: predicted {s:.2}x, measured 0.87x"
    );
    let why = parallel::plan(&tree, 2).unwrap_err();
    assert!(why.starts_with("the cut would not pay"), "{why}");
    // A small dumbbell: a barrier every 10 ms against ~1 ms of work per simulated second
    // (measured 0.83x on 2 threads).
    let mixed = exp(include_str!(
        "../../../experiments/examples/mixed-dumbbell.toml"
    ));
    let s = parallel::cut(&mixed, 2).unwrap().predicted_speedup();
    assert!(s < 1.0, "mixed dumbbell: predicted {s:.2}x, measured 0.83x");
    assert!(parallel::plan(&mixed, 2).is_err());
}
