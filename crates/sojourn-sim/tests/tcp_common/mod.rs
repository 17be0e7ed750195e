//! Helpers shared by the TCP tests (included with `mod tcp_common;`).
#![allow(dead_code)]

use sojourn_sim::{Column, RunOutput};

pub fn col_f64<'a>(c: &'a sojourn_sim::Columns, name: &str) -> &'a [f64] {
    match c.get(name) {
        Some(Column::F64(v)) => v,
        other => panic!("{name}: {other:?}"),
    }
}

pub fn col_u64(c: &sojourn_sim::Columns, name: &str) -> Vec<u64> {
    match c.get(name) {
        Some(Column::U64(v)) => v.clone(),
        Some(Column::U32(v)) => v.iter().map(|&x| x as u64).collect(),
        Some(Column::F64(v)) => v.iter().map(|&x| x as u64).collect(),
        other => panic!("{name}: {other:?}"),
    }
}

pub fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

pub fn series(out: &RunOutput, entity: &str, metric: &str) -> Vec<(f64, f64)> {
    let names = &out.series_names;
    let (Some(Column::U32(ids)), Some(Column::Str(ents)), Some(Column::Str(mets))) = (
        names.get("series"),
        names.get("entity"),
        names.get("metric"),
    ) else {
        panic!()
    };
    let Some(id) = ids
        .iter()
        .zip(ents.iter().zip(mets))
        .find(|(_, (e, m))| *e == entity && *m == metric)
        .map(|(i, _)| *i)
    else {
        return Vec::new();
    };
    let Some(Column::U32(sid)) = out.timeseries.get("series") else {
        panic!()
    };
    let t = col_f64(&out.timeseries, "time_s");
    let v = col_f64(&out.timeseries, "value");
    sid.iter()
        .enumerate()
        .filter(|(_, &s)| s == id)
        .map(|(i, _)| (t[i], v[i]))
        .collect()
}

/// Jain's fairness index of `x`.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * s2)
}

/// Everything a run writes, as text (summary.json and every table): equal strings mean
/// byte-identical outputs.
pub fn fingerprint(out: &RunOutput) -> String {
    format!(
        "{}|{:?}|{:?}|{:?}",
        out.summary_json(),
        out.flows,
        out.timeseries,
        out.packets
    )
}
