//! The up-front count of transfers in the memory estimate (docs/limits.md): open loops at
//! their mean arrival rate over their active time, closed loops bounded by one per think
//! time, a fixed number of transactions as given.

use sojourn_experiment::experiment::transfer_count;
use sojourn_experiment::from_toml;
use std::path::Path;

fn transfers(workload: &str, duration: &str) -> f64 {
    let text = format!(
        r#"
        duration = "{duration}"
        [topology]
        kind = "dumbbell"
        pairs = 2
        bottleneck = {{ rate = "1Gbit", delay = "5ms" }}
        [[workload]]
        {workload}
        "#
    );
    transfer_count(&from_toml(&text, Path::new(".")).unwrap())
}

#[test]
fn poisson_arrivals_over_the_active_time() {
    // 2,000 arrivals per second (mean gap 0.5 ms) for 80 s: 160,000.
    let n = transfers(
        r#"kind = "poisson"
        pair = 0
        interval = "0.5ms"
        size = "10kB""#,
        "80s",
    );
    assert!((n - 160_000.0).abs() < 1.0, "{n}");
    // Started at 10 s and stopped at 30 s, on both pairs: 2 × 20 s × 100/s.
    let n = transfers(
        r#"kind = "poisson"
        pairs = "all"
        interval = "10ms"
        start = "10s"
        stop = "30s"
        size = "10kB""#,
        "80s",
    );
    assert!((n - 4_000.0).abs() < 1e-6, "{n}");
}

#[test]
fn closed_loops_are_bounded_by_their_think_time() {
    // 8 actors thinking 1 s on average for 200 s: at most 1,600 transfers.
    let n = transfers(
        r#"kind = "actors"
        pair = 0
        count = 8
        think = "1s"
        size = "50kB""#,
        "200s",
    );
    assert!((n - 1_600.0).abs() < 1e-6, "{n}");
    // Ten transactions are ten, however long the run.
    let n = transfers(
        r#"kind = "request_response"
        pair = 0
        response_size = "1kB"
        think = "10ms"
        transactions = 10"#,
        "1000s",
    );
    assert!((n - 10.0).abs() < 1e-6, "{n}");
    // A bulk flow is one flow, no transfers beyond it.
    assert_eq!(transfers(r#"kind = "bulk""#, "1000000h"), 0.0);
}

#[test]
fn each_partition_is_budgeted_at_least_what_it_was_measured_to_hold() {
    // `sojourn run --threads 1/2/4` on a 10,000-pair dumbbell with a bulk flow per pair
    // (issue 35 §2's realistic-rate set-up, 0.3 s): maximum resident set 662, 715 and 1,010 MB,
    // i.e. up to +116 MB per partition beyond the first. The estimate of one more partition
    // covers that, without budgeting it more than twice over.
    let delays: Vec<String> = (0..10_000)
        .map(|i| format!("\"{}us\"", 5_000 + 3 * i))
        .collect();
    let text = format!(
        r#"
        duration = "1s"
        [topology]
        kind = "dumbbell"
        pairs = 10000
        bottleneck = {{ rate = "10Gbit", delay = "5ms", qdisc = "fq_codel" }}
        access = {{ rate = "1Gbit" }}
        pair_delays = [{}]
        [[workload]]
        kind = "bulk"
        pairs = "all"
        "#,
        delays.join(", ")
    );
    let exp = from_toml(&text, Path::new(".")).unwrap();
    let each = sojourn_experiment::experiment::partition_bytes(&exp);
    assert!((116e6..=232e6).contains(&each), "{each}");
    let one = sojourn_experiment::experiment::memory_estimate_cut(&exp, 1);
    let four = sojourn_experiment::experiment::memory_estimate_cut(&exp, 4);
    // (Its time series, the bottleneck's only, are small: streamed or not, the same.)
    assert!((four - one - 3.0 * each).abs() < 1e6, "{four} {one} {each}");
    // Four partitions were measured at 1,010 MB.
    assert!(four >= 1_010e6, "{four}");
}

#[test]
fn a_cut_run_holds_its_time_series_whole() {
    // A run cut over threads hands its tables over at its end: 202 recorded links for an
    // hour at 10 ms, ~9 series each, are ~654 M rows (~31 GB at 48 B), which a streamed
    // run would keep to its buffer.
    let text = String::from(
        "duration = \"3600s\"\n[topology]\nkind = \"dumbbell\"\npairs = 50\n\
         bottleneck = { rate = \"1Gbit\", delay = \"5ms\" }\naccess = { rate = \"1Gbit\", delay = \"1ms\" }\n\
         [[workload]]\nkind = \"bulk\"\npairs = \"all\"\n[record]\ninterval = \"10ms\"\nlinks = \"all\"\n",
    );
    let exp = from_toml(&text, Path::new(".")).unwrap();
    let one = sojourn_experiment::experiment::memory_estimate_cut(&exp, 1);
    let two = sojourn_experiment::experiment::memory_estimate_cut(&exp, 2);
    assert!(one < 2e9, "{one}");
    assert!(two > 25e9, "{two}");
}
