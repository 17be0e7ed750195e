//! The experiment model's single sources of truth, for the Python front: the units parser
//! of sojourn-core (sizes, rates, durations) and the flow-size distribution grammar and
//! sampler of sojourn-experiment. Python's `sojourn.units` and `sojourn.dists` call these
//! instead of parsing a second time (docs/architecture.md).

use crate::{conf_err, to_value};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sojourn_core::params::{Params, Table};
use sojourn_core::rng::Rng;
use sojourn_core::units;
use sojourn_experiment::dist::SizeDist;
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

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(parse_rate, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration_ns, m)?)?;
    m.add_function(wrap_pyfunction!(size_dist_spec, m)?)?;
    m.add_function(wrap_pyfunction!(sample_sizes, m)?)?;
    Ok(())
}
