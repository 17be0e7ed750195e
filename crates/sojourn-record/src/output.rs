//! Results of a run, as every engine writes them: the columnar tables of `flows.parquet`,
//! `timeseries.parquet`, `packets.parquet` and `histograms.parquet`, summary.json's shared
//! blocks (deterministic: no wall-clock values), and the chunks a streaming run hands out.
//! The schema is documented in docs/output-schema.md; `SCHEMA_VERSION` changes with it.

use crate::flows::FlowRecord;
use crate::metrics::{PacketLog, TimeSeries};
use serde_json::{json, Value as J};
use sojourn_core::hist::Histogram;
use sojourn_core::qdisc::DropReason;
use sojourn_core::Time;
use std::borrow::Borrow;

pub const SCHEMA_VERSION: u32 = 1;

/// A column of a result table.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    U64(Vec<u64>),
    U32(Vec<u32>),
    F64(Vec<f64>),
    Str(Vec<String>),
    Bool(Vec<bool>),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::U64(v) => v.len(),
            Column::U32(v) => v.len(),
            Column::F64(v) => v.len(),
            Column::Str(v) => v.len(),
            Column::Bool(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Named columns of equal length.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Columns(pub Vec<(String, Column)>);

impl Columns {
    fn add(&mut self, name: &str, c: Column) {
        self.0.push((name.to_string(), c));
    }
    pub fn get(&self, name: &str) -> Option<&Column> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }
    pub fn rows(&self) -> usize {
        self.0.first().map(|(_, c)| c.len()).unwrap_or(0)
    }
}

/// Everything a run produces.
pub struct RunOutput {
    pub summary: J,
    pub flows: Columns,
    pub timeseries: Columns,
    /// (series id, entity, metric) for `timeseries.series`.
    pub series_names: Columns,
    pub packets: Option<Columns>,
    /// Per-link per-packet sojourn histograms with their buckets (`histograms.parquet`):
    /// `link, lo_ns, hi_ns, count`, so percentiles can be pooled across repeats.
    pub histograms: Columns,
    /// One row per latency probe or isochronous datagram (`probes.parquet`; docs/tests.md),
    /// when the run has probe workloads.
    pub probes: Option<Columns>,
}

impl RunOutput {
    /// `summary.json` text: keys sorted, two-space indent, trailing newline.
    pub fn summary_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.summary).expect("serialisable");
        s.push('\n');
        s
    }
}

pub use sojourn_experiment::FctFrom;

pub fn fct_of(r: &FlowRecord, from: FctFrom) -> Option<f64> {
    let end = r.end?;
    let start = match from {
        FctFrom::Connect => r.start,
        FctFrom::FirstByte => r.first_byte.unwrap_or(r.start),
    };
    Some((end - start).as_secs_f64())
}

fn secs(t: Option<Time>) -> f64 {
    t.map(|t| t.as_secs_f64()).unwrap_or(f64::NAN)
}

/// Mean, 95% confidence half-width (1.96·SEM) and percentiles (nearest rank) of `xs`.
pub fn describe(xs: &mut [f64]) -> J {
    let n = xs.len();
    if n == 0 {
        return json!({ "count": 0 });
    }
    xs.sort_by(|a, b| a.total_cmp(b));
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n as f64 - 1.0)
    } else {
        0.0
    };
    let q = |p: f64| xs[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
    json!({
        "count": n,
        "mean": mean,
        "ci95": 1.96 * (var / n as f64).sqrt(),
        "std": var.sqrt(),
        "min": xs[0],
        "p50": q(0.50),
        "p75": q(0.75),
        "p95": q(0.95),
        "p99": q(0.99),
        "max": xs[n - 1],
    })
}

/// The `sojourn_ms` block of summary.json from a sojourn histogram in ns (every engine
/// writes it the same way).
pub fn hist_ms(h: &Histogram) -> J {
    if h.is_empty() {
        return json!({ "count": 0 });
    }
    let ms = |v: Option<f64>| v.map(|x| x * 1e-6).unwrap_or(f64::NAN);
    json!({
        "count": h.count(),
        "mean": h.mean() * 1e-6,
        "p50": ms(h.quantile(0.50)),
        "p95": ms(h.quantile(0.95)),
        "p99": ms(h.quantile(0.99)),
        "max": ms(h.max().map(|x| x as f64)),
        "precision": "percentiles within 0.8% (log-linear histogram, 128 sub-buckets per octave)",
    })
}

/// `histograms.parquet` columns (`link, lo_ns, hi_ns, count`): the non-empty buckets of each
/// link's per-packet sojourn histogram, for percentiles pooled across repeats. Every engine
/// writes them (docs/output-schema.md).
pub fn histogram_columns<'a>(links: impl Iterator<Item = (&'a str, &'a Histogram)>) -> Columns {
    let (mut link, mut lo, mut hi, mut count) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (name, h) in links {
        for (l, u, c) in h.buckets() {
            link.push(name.to_string());
            lo.push(l);
            hi.push(u);
            count.push(c);
        }
    }
    let mut out = Columns::default();
    out.add("link", Column::Str(link));
    out.add("lo_ns", Column::U64(lo));
    out.add("hi_ns", Column::U64(hi));
    out.add("count", Column::U64(count));
    out
}

/// summary.json's `flows` block, accumulated one record at a time: a streamed run adds each
/// flow record as it is handed out and the rest at the end, so what stays per finished flow
/// is its FCT and goodput (16 B; the percentiles are exact nearest ranks).
#[derive(Clone, Debug, Default)]
pub struct FlowSummary {
    count: usize,
    sized: usize,
    completed: usize,
    fcts: Vec<f64>,
    goodputs: Vec<f64>,
}

impl FlowSummary {
    /// Adds `r` if it started after the warm-up (`warm`); `end` closes unfinished flows.
    pub fn add(&mut self, r: &FlowRecord, warm: Time, end: Time, fct_from: FctFrom) {
        if r.start < warm {
            return;
        }
        self.count += 1;
        if r.size_bytes > 0 {
            self.sized += 1;
            if let Some(f) = fct_of(r, fct_from) {
                self.completed += 1;
                self.fcts.push(f);
            }
        }
        let from = r.first_byte.unwrap_or(r.start).max(warm);
        let d = (r.end.unwrap_or(end) - from).as_secs_f64();
        if d > 0.0 {
            self.goodputs.push(r.delivered_bytes as f64 * 8.0 / d);
        }
    }

    /// The block (`count`, `sized`, `completed`, `fct_s`, `goodput_bps` described).
    pub fn json(mut self, fct_from: FctFrom) -> J {
        json!({
            "count": self.count,
            "sized": self.sized,
            "completed": self.completed,
            "fct_definition": match fct_from { FctFrom::Connect => "connect", FctFrom::FirstByte => "first_byte" },
            "fct_s": describe(&mut self.fcts),
            "goodput_bps": describe(&mut self.goodputs),
        })
    }
}

/// `flows.parquet` columns (docs/output-schema.md), for every engine: `node_name` maps a
/// node id to its name, `end` closes flows that did not finish (goodput).
pub fn flow_columns<R: Borrow<FlowRecord>>(
    r: &[R],
    node_name: impl Fn(u32) -> String,
    end: Time,
    fct_from: FctFrom,
) -> Columns {
    let r: Vec<&FlowRecord> = r.iter().map(|x| x.borrow()).collect();
    let mut c = Columns::default();
    let mut add = |n: &str, col: Column| c.0.push((n.to_string(), col));
    add("flow", Column::U32(r.iter().map(|x| x.flow).collect()));
    add(
        "kind",
        Column::Str(r.iter().map(|x| x.kind.name().to_string()).collect()),
    );
    add(
        "workload",
        Column::U32(r.iter().map(|x| x.workload).collect()),
    );
    add(
        "src",
        Column::Str(r.iter().map(|x| node_name(x.src_node)).collect()),
    );
    add(
        "dst",
        Column::Str(r.iter().map(|x| node_name(x.dst_node)).collect()),
    );
    add(
        "cc",
        Column::Str(r.iter().map(|x| x.cc.to_string()).collect()),
    );
    add(
        "start_s",
        Column::F64(r.iter().map(|x| x.start.as_secs_f64()).collect()),
    );
    add(
        "first_byte_s",
        Column::F64(r.iter().map(|x| secs(x.first_byte)).collect()),
    );
    add(
        "end_s",
        Column::F64(r.iter().map(|x| secs(x.end)).collect()),
    );
    add(
        "size_bytes",
        Column::U64(r.iter().map(|x| x.size_bytes).collect()),
    );
    add(
        "delivered_bytes",
        Column::U64(r.iter().map(|x| x.delivered_bytes).collect()),
    );
    add(
        "completed",
        Column::Bool(r.iter().map(|x| x.end.is_some()).collect()),
    );
    add(
        "fct_s",
        Column::F64(
            r.iter()
                .map(|x| fct_of(x, fct_from).unwrap_or(f64::NAN))
                .collect(),
        ),
    );
    add(
        "goodput_bps",
        Column::F64(
            r.iter()
                .map(|x| {
                    let from = x.first_byte.unwrap_or(x.start);
                    let to = x.end.unwrap_or(end).max(from);
                    let d = (to - from).as_secs_f64();
                    if d > 0.0 {
                        x.delivered_bytes as f64 * 8.0 / d
                    } else {
                        f64::NAN
                    }
                })
                .collect(),
        ),
    );
    add(
        "pkts_sent",
        Column::U64(r.iter().map(|x| x.pkts_sent).collect()),
    );
    add(
        "pkts_dropped",
        Column::U64(r.iter().map(|x| x.pkts_dropped).collect()),
    );
    add(
        "pkts_ce",
        Column::U64(r.iter().map(|x| x.pkts_ce).collect()),
    );
    add(
        "retransmits",
        Column::U64(r.iter().map(|x| x.retransmits).collect()),
    );
    add("rtos", Column::U64(r.iter().map(|x| x.rtos).collect()));
    add(
        "mean_delay_ms",
        Column::F64(
            r.iter()
                .map(|x| {
                    if x.delay_count > 0 {
                        x.delay_sum_ns as f64 / x.delay_count as f64 * 1e-6
                    } else {
                        f64::NAN
                    }
                })
                .collect(),
        ),
    );
    add(
        "max_delay_ms",
        Column::F64(
            r.iter()
                .map(|x| {
                    if x.delay_count > 0 {
                        x.delay_max_ns as f64 * 1e-6
                    } else {
                        f64::NAN
                    }
                })
                .collect(),
        ),
    );
    c
}

/// timeseries.parquet and its series names (docs/output-schema.md), from a [`TimeSeries`]:
/// one builder for both engines.
pub fn timeseries_columns(ts: TimeSeries) -> (Columns, Columns) {
    let names = series_name_columns(&ts.names);
    (timeseries_row_columns(ts.t_ns, ts.series, ts.value), names)
}

/// The rows of timeseries.parquet (`time_s, series, value`) from a time series' columns.
pub fn timeseries_row_columns(t_ns: Vec<u64>, series: Vec<u32>, value: Vec<f64>) -> Columns {
    let mut timeseries = Columns::default();
    // In place: a Vec<u64> mapped to f64 and collected reuses its own buffer.
    timeseries.add(
        "time_s",
        Column::F64(t_ns.into_iter().map(|t| t as f64 * 1e-9).collect()),
    );
    timeseries.add("series", Column::U32(series));
    timeseries.add("value", Column::F64(value));
    timeseries
}

/// The series names (`series, entity, metric`) of a time series, id `i` in row `i`.
pub fn series_name_columns(names: &[(String, String)]) -> Columns {
    let mut series_names = Columns::default();
    series_names.add("series", Column::U32((0..names.len() as u32).collect()));
    series_names.add(
        "entity",
        Column::Str(names.iter().map(|n| n.0.clone()).collect()),
    );
    series_names.add(
        "metric",
        Column::Str(names.iter().map(|n| n.1.clone()).collect()),
    );
    series_names
}

/// packets.parquet (docs/output-schema.md) from a [`PacketLog`]; `link_name` names a
/// link index. One builder for both engines.
pub fn packet_columns(pl: PacketLog, link_name: impl Fn(u32) -> String) -> Columns {
    let mut c = Columns::default();
    c.add(
        "time_s",
        Column::F64(pl.t_ns.iter().map(|&t| t as f64 * 1e-9).collect()),
    );
    c.add(
        "link",
        Column::Str(pl.link.iter().map(|&l| link_name(l)).collect()),
    );
    c.add("uid", Column::U64(pl.uid));
    c.add("flow", Column::U32(pl.flow));
    c.add("len_bytes", Column::U32(pl.len_bytes));
    c.add(
        "event",
        Column::Str(
            pl.event
                .iter()
                .map(|&e| {
                    if e == 255 {
                        "dequeue".to_string()
                    } else {
                        format!("drop:{}", DropReason::ALL[e as usize].name())
                    }
                })
                .collect(),
        ),
    );
    c.add(
        "sojourn_ms",
        Column::F64(pl.sojourn_ns.iter().map(|&s| s as f64 * 1e-6).collect()),
    );
    c.add(
        "ecn",
        Column::U32(pl.ecn.iter().map(|&e| e as u32).collect()),
    );
    c.add("priority", Column::U32(pl.priority));
    c.add("ct_bytes", Column::U64(pl.ct_bytes));
    c
}

/// A piece of a run's output handed out while the run proceeds (the simulator's and the
/// emulator's `run_streaming`; the streaming writer is shared).
#[derive(Debug)]
pub enum Chunk {
    /// `chunk_rows` time-series rows (`time_s, series, value`) and the names of every
    /// series id known so far (`series, entity, metric`; a prefix of the final list).
    /// Consecutive chunks share one `names` while no series was added (the same `Arc`),
    /// so a run with many series does not copy every name per chunk.
    TimeSeries {
        rows: Columns,
        names: std::sync::Arc<Columns>,
    },
    /// `chunk_rows` packet-log rows (the `packets.parquet` columns).
    Packets(Columns),
    /// `chunk_rows` finished flows' rows (the `flows.parquet` columns) in the order they
    /// finished, not by flow id: the writer puts them in order.
    Flows(Columns),
}
