//! The experiment model's single sources of truth, for the Python front: the units parser
//! of sojourn-core (sizes, rates, durations), the flow-size distribution grammar and
//! sampler and the `--set` overrides of sojourn-experiment. Python's `sojourn.units`,
//! `sojourn.dists` and `sojourn._config` call these instead of parsing a second time
//! (docs/architecture.md).

use crate::{conf_err, to_table, to_value};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString};
use sojourn_core::params::{Params, Table, Value};
use sojourn_core::rng::Rng;
use sojourn_core::units;
use sojourn_experiment::dist::SizeDist;
use sojourn_experiment::overrides;
use std::path::Path;

/// Bytes in a size such as `"1500B"`, `"300KiB"`, `"64kB"` (ValueError on bad input).
#[pyfunction]
fn parse_bytes(s: &str) -> PyResult<u64> {
    units::parse_bytes(s).map_err(PyValueError::new_err)
}

/// Bits per second in a rate such as `"10Mbit"` (ValueError on bad input).
#[pyfunction]
fn parse_rate(s: &str) -> PyResult<u64> {
    units::parse_rate(s).map_err(PyValueError::new_err)
}

/// Nanoseconds in a duration such as `"100ms"`, `"2min"` (ValueError on bad input).
#[pyfunction]
fn parse_duration_ns(s: &str) -> PyResult<u64> {
    units::parse_duration(s)
        .map(|d| d.0)
        .map_err(PyValueError::new_err)
}

/// Parses a size distribution written as in an experiment file (a size, or a table with
/// `dist`), at key path `key`; relative files are read from `base_dir`.
fn size_dist(spec: &Bound<'_, PyAny>, base_dir: &str, key: &str) -> PyResult<SizeDist> {
    let v = to_value(spec, key, 0).map_err(conf_err)?;
    let mut t = Table::default();
    t.insert(key, v);
    let mut p = Params::new("", &t);
    SizeDist::parse(&mut p, key, Path::new(base_dir))
        .map_err(conf_err)?
        .ok_or_else(|| PyValueError::new_err("no distribution given"))
}

/// The canonical form of a size distribution spec (what the engine will draw from):
/// `{"dist": kind, parameters…, "mean": analytic mean in bytes}`.
#[pyfunction]
#[pyo3(signature = (spec, base_dir = ".", key = "size"))]
fn size_dist_spec<'py>(
    py: Python<'py>,
    spec: &Bound<'py, PyAny>,
    base_dir: &str,
    key: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let d = size_dist(spec, base_dir, key)?;
    let out = PyDict::new(py);
    match &d {
        SizeDist::Fixed(b) => {
            out.set_item("dist", "fixed")?;
            out.set_item("value", *b)?;
        }
        SizeDist::Uniform { min, max } => {
            out.set_item("dist", "uniform")?;
            out.set_item("min", *min)?;
            out.set_item("max", *max)?;
        }
        SizeDist::Exponential { mean } => {
            out.set_item("dist", "exponential")?;
            out.set_item("mean_param", *mean)?;
        }
        SizeDist::BoundedPareto {
            alpha,
            min,
            max,
            grid,
        } => {
            out.set_item("dist", "pareto")?;
            out.set_item("alpha", *alpha)?;
            out.set_item("min", *min)?;
            out.set_item("max", *max)?;
            out.set_item("grid", *grid)?;
        }
        SizeDist::Choice(v) => {
            out.set_item("dist", "choice")?;
            out.set_item("values", v.clone())?;
        }
        SizeDist::Empirical(pts) => {
            out.set_item("dist", "empirical")?;
            out.set_item("points", pts.clone())?;
        }
    }
    out.set_item("mean", d.mean())?;
    Ok(out)
}

/// `n` sizes (bytes) drawn by the engine's sampler from `Rng::from_seed(seed)`: the same
/// numbers a Rust `SizeDist::draw` loop with that generator gives.
#[pyfunction]
#[pyo3(signature = (spec, n, seed, base_dir = "."))]
fn sample_sizes(
    spec: &Bound<'_, PyAny>,
    n: usize,
    seed: u64,
    base_dir: &str,
) -> PyResult<Vec<u64>> {
    let d = size_dist(spec, base_dir, "size")?;
    let mut rng = Rng::from_seed(seed);
    Ok((0..n).map(|_| d.draw(&mut rng)).collect())
}

/// A configuration value as Python's (tomllib's) types: dicts, lists, str, int, float, bool.
pub(crate) fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(x) => x.into_pyobject(py)?.into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let l = PyList::empty(py);
            for x in items {
                l.append(to_py(py, x)?)?;
            }
            l.into_any()
        }
        Value::Table(t) => {
            let d = PyDict::new(py);
            for (k, x) in &t.0 {
                d.set_item(k, to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// `--set KEY=VALUE` as `(KEY, VALUE)`: VALUE in TOML syntax, bare words are strings
/// (ConfigError with the item as its path on a missing `=`).
#[pyfunction]
fn parse_set<'py>(py: Python<'py>, item: &str) -> PyResult<(String, Bound<'py, PyAny>)> {
    let (k, v) = overrides::parse_assignment(item).map_err(conf_err)?;
    Ok((k, to_py(py, &v)?))
}

/// Checks the syntax of a dotted override key (`workload[1].rate`); ConfigError if bad.
#[pyfunction]
fn check_key(dotted: &str) -> PyResult<()> {
    overrides::parse_key(dotted).map_err(conf_err).map(|_| ())
}

/// `cfg` with `dotted = value` set (tables and list items created on the way), as a new
/// dict; ConfigError (path: the key) on a bad key or a path through a non-table.
#[pyfunction]
fn set_key<'py>(
    py: Python<'py>,
    cfg: &Bound<'py, PyDict>,
    dotted: &str,
    value: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    overrides::parse_key(dotted).map_err(conf_err)?;
    let mut t = to_table(cfg, "", 0).map_err(conf_err)?;
    let v = to_value(value, dotted, 1).map_err(conf_err)?;
    overrides::set_key(&mut t, dotted, v).map_err(conf_err)?;
    to_py(py, &Value::Table(t))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_set, m)?)?;
    m.add_function(wrap_pyfunction!(check_key, m)?)?;
    m.add_function(wrap_pyfunction!(set_key, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(parse_rate, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration_ns, m)?)?;
    m.add_function(wrap_pyfunction!(size_dist_spec, m)?)?;
    m.add_function(wrap_pyfunction!(sample_sizes, m)?)?;
    Ok(())
}
