//! The time-series recorder (`[record]`): series ids, names, row counts and row order,
//! checked against what the schema (docs/output-schema.md) says a run records, counted
//! by hand for a small topology.

use sojourn_core::Time;
use sojourn_record::metrics::TimeSeries;
use sojourn_sim::config::from_toml;
use sojourn_sim::{run_toml, Chunk, Column, Columns};
use std::path::Path;

/// One pair through an fq_codel bottleneck, 300 ms, sampled every 100 ms: samples at
/// 0, 100, 200 and 300 ms.
const DUMBBELL: &str = r#"
    duration = "300ms"
    seed = 1
    [record]
    interval = "100ms"
    [topology]
    kind = "dumbbell"
    pairs = 1
    bottleneck = { rate = "10Mbit", delay = "5ms", qdisc = { kind = "fq_codel" } }
    access = { rate = "100Mbit", delay = "1ms" }
    [[workload]]
    kind = "bulk"
    pairs = "all"
    count = 1
"#;

fn u32s<'a>(c: &'a Columns, name: &str) -> &'a [u32] {
    match c.get(name) {
        Some(Column::U32(v)) => v,
        other => panic!("{name}: {other:?}"),
    }
}

fn f64s<'a>(c: &'a Columns, name: &str) -> &'a [f64] {
    match c.get(name) {
        Some(Column::F64(v)) => v,
        other => panic!("{name}: {other:?}"),
    }
}

fn strs<'a>(c: &'a Columns, name: &str) -> &'a [String] {
    match c.get(name) {
        Some(Column::Str(v)) => v,
        other => panic!("{name}: {other:?}"),
    }
}

/// Series ids follow the first push: at time 0 every link's queue_packets and queue_bytes
/// (links in definition order; the bottleneck's fq_codel adds new_flows, old_flows and
/// memory_usage_bytes), then at the first later sample each link's throughput_bps, drops
/// and ecn_marks, which have no value at time 0 (no interval yet).
#[test]
fn series_ids_and_names_in_first_push_order() {
    let out = run_toml(DUMBBELL).unwrap();
    let names = &out.series_names;
    let links = [
        "bottleneck",
        "reverse",
        "s0.up",
        "s0.down",
        "d0.down",
        "d0.up",
    ];
    let mut want: Vec<(String, String)> = Vec::new();
    for (i, l) in links.iter().enumerate() {
        want.push((l.to_string(), "queue_packets".into()));
        want.push((l.to_string(), "queue_bytes".into()));
        if i == 0 {
            for m in ["new_flows", "old_flows", "memory_usage_bytes"] {
                want.push((l.to_string(), m.into()));
            }
        }
    }
    for l in links {
        for m in ["throughput_bps", "drops", "ecn_marks"] {
            want.push((l.to_string(), m.into()));
        }
    }
    assert_eq!(want.len(), 33);
    assert_eq!(
        u32s(names, "series"),
        (0..33).collect::<Vec<u32>>().as_slice()
    );
    let got: Vec<(String, String)> = strs(names, "entity")
        .iter()
        .cloned()
        .zip(strs(names, "metric").iter().cloned())
        .collect();
    assert_eq!(got, want);
    // The ids of one sample, in row order: time 0, then 100 ms.
    let series = u32s(&out.timeseries, "series");
    assert_eq!(
        &series[..15],
        &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    );
    assert_eq!(
        &series[15..48],
        &[
            0, 1, 15, 16, 17, 2, 3, 4, 5, 6, 18, 19, 20, 7, 8, 21, 22, 23, 9, 10, 24, 25, 26, 11,
            12, 27, 28, 29, 13, 14, 30, 31, 32
        ]
    );
}

/// Rows = Σ over samples of the series sampled: 6 links × 2 + 3 (fq_codel) = 15 at time
/// 0, 6 × 5 + 3 = 33 at each of the 3 later samples: 114 rows, in non-decreasing time.
#[test]
fn row_count_is_samples_times_metrics() {
    let out = run_toml(DUMBBELL).unwrap();
    let t = f64s(&out.timeseries, "time_s");
    assert_eq!(t.len(), 15 + 3 * 33);
    assert_eq!(t.iter().filter(|&&x| x == 0.0).count(), 15);
    assert!(t.windows(2).all(|w| w[0] <= w[1]));
    assert!((t[t.len() - 1] - 0.3).abs() < 1e-12);
    // Only the links named in [record] links are sampled: the bottleneck alone.
    let only = DUMBBELL.replace(
        "interval = \"100ms\"",
        "interval = \"100ms\"\n    links = [\"bottleneck\"]",
    );
    let out = run_toml(&only).unwrap();
    assert_eq!(out.timeseries.rows(), 5 + 3 * 8);
}

/// The chunks a streamed run hands out, followed by the rows it returns, are the rows of
/// the unstreamed run; each chunk's names are a prefix of the final names.
#[test]
fn streamed_chunks_concatenate_to_the_whole_table() {
    let exp = from_toml(DUMBBELL, Path::new(".")).unwrap();
    let whole = sojourn_sim::run(&exp, 1, &mut |_| true).unwrap();
    let mut series: Vec<u32> = Vec::new();
    let mut time: Vec<f64> = Vec::new();
    let mut value: Vec<f64> = Vec::new();
    let mut chunks = 0;
    let final_names = strs(&whole.series_names, "entity").len();
    let tail = sojourn_sim::run_streaming(&exp, 1, 7, &mut |_| true, &mut |c| {
        if let Chunk::TimeSeries { rows, names } = c {
            assert_eq!(rows.rows(), 7);
            let n = strs(&names, "entity").len();
            assert!(n <= final_names);
            assert_eq!(
                strs(&names, "metric"),
                &strs(&whole.series_names, "metric")[..n]
            );
            series.extend_from_slice(u32s(&rows, "series"));
            time.extend_from_slice(f64s(&rows, "time_s"));
            value.extend_from_slice(f64s(&rows, "value"));
            chunks += 1;
        }
        true
    })
    .unwrap();
    // The series run once per 65,536 events: 114 rows of a 300 ms run are all in the
    // last tick, 16 chunks of 7 and 2 rows left.
    assert_eq!(chunks, 16);
    assert_eq!(tail.timeseries.rows(), 2);
    series.extend_from_slice(u32s(&tail.timeseries, "series"));
    time.extend_from_slice(f64s(&tail.timeseries, "time_s"));
    value.extend_from_slice(f64s(&tail.timeseries, "value"));
    assert_eq!(series, u32s(&whole.timeseries, "series"));
    assert_eq!(time, f64s(&whole.timeseries, "time_s"));
    assert_eq!(
        value.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        f64s(&whole.timeseries, "value")
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    );
    assert_eq!(tail.series_names, whole.series_names);
}

fn rows(ts: &TimeSeries) -> Vec<(u64, &str, &str, f64)> {
    (0..ts.len())
        .map(|k| {
            let (e, m) = &ts.names[ts.series[k] as usize];
            (ts.t_ns[k], e.as_str(), m.as_str(), ts.value[k])
        })
        .collect()
}

/// Ids do not depend on how an entity is addressed (by name or by handle) nor on the
/// order its metrics come in; a metric pushed in a new order keeps its id.
#[test]
fn ids_are_first_push_order_whatever_the_order_later() {
    let mut ts = TimeSeries::default();
    let a = ts.entity("a");
    let b = ts.entity("b");
    ts.push_at(Time(0), a, "x", 1.0);
    ts.push_at(Time(0), a, "y", 2.0);
    ts.push(Time(0), "b", "x", 3.0);
    // Later samples: a different order, a metric dropped, a new one in the middle.
    ts.push_at(Time(10), a, "y", 4.0);
    ts.push_at(Time(10), a, "z", 5.0);
    ts.push_at(Time(10), a, "x", 6.0);
    ts.push_at(Time(10), b, "x", 7.0);
    ts.push(Time(20), "a", "x", 8.0);
    ts.push(Time(20), "a", "z", 9.0);
    ts.push_at(Time(20), b, "y", 10.0);
    assert_eq!(ts.series, vec![0, 1, 2, 1, 3, 0, 2, 0, 3, 4]);
    let names: Vec<(&str, &str)> = ts
        .names
        .iter()
        .map(|(e, m)| (e.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![("a", "x"), ("a", "y"), ("b", "x"), ("a", "z"), ("b", "y")]
    );
    assert_eq!(
        ts.value,
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    );
    // Registering an entity made no series.
    let mut empty = TimeSeries::default();
    empty.entity("c");
    assert!(empty.names.is_empty() && empty.is_empty());
}

/// `merge` interleaves by time (this series' rows first at equal times) and numbers the
/// series in the merged rows' first-appearance order.
#[test]
fn merge_keeps_time_order_and_renumbers_by_first_appearance() {
    let mut links = TimeSeries::default();
    links.push(Time(0), "l", "q", 1.0);
    links.push(Time(20), "l", "q", 2.0);
    links.push(Time(20), "l", "d", 3.0);
    let mut flows = TimeSeries::default();
    flows.push(Time(10), "f", "c", 4.0);
    flows.push(Time(20), "l", "d", 5.0);
    flows.push(Time(30), "f", "c", 6.0);
    links.merge(&flows);
    assert_eq!(
        rows(&links),
        vec![
            (0, "l", "q", 1.0),
            (10, "f", "c", 4.0),
            (20, "l", "q", 2.0),
            (20, "l", "d", 3.0),
            (20, "l", "d", 5.0),
            (30, "f", "c", 6.0),
        ]
    );
    assert_eq!(links.series, vec![0, 1, 0, 2, 2, 1]);
    // The merged series takes further pushes under the same ids.
    links.push(Time(40), "f", "c", 7.0);
    links.push(Time(40), "g", "c", 8.0);
    assert_eq!(&links.series[6..], &[1, 3]);
}
