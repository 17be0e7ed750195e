//! `sojourn._engine`: the thin bridge between the Python front-end and the Rust engine.
//! Configuration comes in as a Python dict (already parsed from TOML by the front-end),
//! results go out as bytes of little-endian columns that numpy wraps without copying.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use sojourn_core::params::{ConfError, Table, Value};
use sojourn_core::qdisc::external::with_resolver;
use sojourn_sim::{config, Column, Columns};
use std::path::Path;
use std::rc::Rc;

mod deploy;
mod harness;
mod isp;
mod model;
mod pydisc;

pyo3::create_exception!(
    _engine,
    PrivilegeError,
    pyo3::exceptions::PyPermissionError,
    "The live engine may not create network namespaces here (needs root)."
);
pyo3::create_exception!(
    _engine,
    EmulateError,
    pyo3::exceptions::PyRuntimeError,
    "A live run failed (a namespace, device, socket or the forwarder)."
);
pyo3::create_exception!(
    _engine,
    ConfigError,
    PyValueError,
    "A mistake in an experiment file: .path is the key path, .msg the reason."
);

/// How deep tables and arrays may nest: experiment files need about 6 levels; the bound
/// keeps a hostile dict (5,000 levels) from overflowing the stack in this recursion.
pub const MAX_DEPTH: usize = 64;

pub(crate) fn to_value(
    obj: &Bound<'_, PyAny>,
    path: &str,
    depth: usize,
) -> Result<Value, ConfError> {
    if depth > MAX_DEPTH {
        return Err(ConfError::new(
            path,
            format!("nested more than {MAX_DEPTH} levels deep"),
        ));
    }
    if obj.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(obj.extract::<bool>().unwrap()));
    }
    if obj.is_instance_of::<PyInt>() {
        return obj
            .extract::<i64>()
            .map(Value::Int)
            .map_err(|_| ConfError::new(path, "integer out of range"));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Value::Float(obj.extract::<f64>().unwrap()));
    }
    if obj.is_instance_of::<PyString>() {
        return Ok(Value::Str(obj.extract::<String>().unwrap()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return Ok(Value::Table(to_table(d, path, depth + 1)?));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut v = Vec::new();
        for (i, x) in obj
            .try_iter()
            .map_err(|_| ConfError::new(path, "not iterable"))?
            .enumerate()
        {
            let x = x.map_err(|_| ConfError::new(path, "not iterable"))?;
            v.push(to_value(&x, &format!("{path}[{i}]"), depth + 1)?);
        }
        return Ok(Value::Array(v));
    }
    let tn = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    Err(ConfError::new(
        path,
        format!("unsupported value of type {tn}"),
    ))
}

pub(crate) fn to_table(
    d: &Bound<'_, PyDict>,
    path: &str,
    depth: usize,
) -> Result<Table, ConfError> {
    let mut t = Table::default();
    for (k, v) in d.iter() {
        let key: String = k
            .extract()
            .map_err(|_| ConfError::new(path, "keys must be strings"))?;
        let p = sojourn_core::params::join(path, &key);
        t.0.push((key, to_value(&v, &p, depth)?));
    }
    Ok(t)
}

pub(crate) fn conf_err(e: ConfError) -> PyErr {
    Python::attach(|py| {
        let err = ConfigError::new_err(e.to_string());
        let v = err.value(py);
        let _ = v.setattr("path", e.path.clone());
        let _ = v.setattr("msg", e.msg.clone());
        err
    })
}

/// The experiment dict as the validated model. `disciplines` is the front's
/// `sojourn.disciplines.Resolver`: with it, `kind = "python"` specs (and names the API
/// registered) are validated and bound to their classes; without it they are refused.
pub(crate) fn parse(
    cfg: &Bound<'_, PyDict>,
    base_dir: &str,
    disciplines: Option<Py<PyAny>>,
) -> PyResult<config::Experiment> {
    let t = to_table(cfg, "", 0).map_err(conf_err)?;
    let from_table = || config::from_table(&t, Path::new(base_dir));
    let exp = match disciplines {
        Some(obj) => with_resolver(Rc::new(pydisc::PyResolver { obj }), from_table),
        None => from_table(),
    }
    .map_err(conf_err)?;
    // Threads are the simulator's: only its plan knows how many copies of the network a
    // run cut over them builds (docs/limits.md, "Memory").
    sojourn_sim::check_thread_memory(&exp).map_err(conf_err)?;
    Ok(exp)
}

/// `v` as little-endian bytes in a Python bytes object: one copy, straight into it.
fn le_bytes<T: Copy, const N: usize>(
    py: Python<'_>,
    v: &[T],
    to_le: impl Fn(T) -> [u8; N],
) -> PyResult<Py<PyAny>> {
    let b = PyBytes::new_with(py, v.len() * N, |b| {
        for (d, &x) in b.chunks_exact_mut(N).zip(v) {
            d.copy_from_slice(&to_le(x));
        }
        Ok(())
    })?;
    Ok(b.into_any().unbind())
}

fn columns<'py>(py: Python<'py>, c: &Columns) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for (name, col) in &c.0 {
        let (dtype, data): (&str, Py<PyAny>) = match col {
            Column::U64(v) => ("<u8", le_bytes(py, v, u64::to_le_bytes)?),
            Column::U32(v) => ("<u4", le_bytes(py, v, u32::to_le_bytes)?),
            Column::F64(v) => ("<f8", le_bytes(py, v, f64::to_le_bytes)?),
            Column::Bool(v) => ("bool", le_bytes(py, v, |b| [b as u8])?),
            Column::Str(v) => ("str", PyList::new(py, v)?.into_any().unbind()),
        };
        out.append((name.as_str(), dtype, data))?;
    }
    Ok(out)
}

/// Each series' index in the `entity` and `metric` dictionaries of
/// `sojourn._stream.name_series`: the distinct names in series-id order, each at its first
/// appearance. A series keeps its codes when later series are added (they only append
/// names), so a chunk's codes hold for the names known at any later time.
fn name_codes(names: &Columns) -> [Vec<i32>; 2] {
    ["entity", "metric"].map(|key| {
        let Some(Column::Str(per_series)) = names.get(key) else {
            return Vec::new();
        };
        let mut first: std::collections::HashMap<&str, i32> = Default::default();
        per_series
            .iter()
            .map(|n| {
                let next = first.len() as i32;
                *first.entry(n.as_str()).or_insert(next)
            })
            .collect()
    })
}

/// Time-series rows (`time_s, series, value`) for Python, plus `entity_code` and
/// `metric_code` (int32): each row's series' [`name_codes`], so that Python does not
/// gather them row by row.
fn timeseries_columns<'py>(
    py: Python<'py>,
    rows: &Columns,
    codes: &[Vec<i32>; 2],
) -> PyResult<Bound<'py, PyList>> {
    let out = columns(py, rows)?;
    let Some(Column::U32(series)) = rows.get("series") else {
        return Ok(out);
    };
    for (key, codes) in ["entity_code", "metric_code"].into_iter().zip(codes) {
        let data = PyBytes::new_with(py, series.len() * 4, |b| {
            for (d, &s) in b.chunks_exact_mut(4).zip(series) {
                d.copy_from_slice(&codes[s as usize].to_le_bytes());
            }
            Ok(())
        })?;
        out.append((key, "<i4", data))?;
    }
    Ok(out)
}

/// The series names of the last time-series chunk, as Python columns, and their codes:
/// consecutive chunks share one `Arc` of names while no series is added, and then share
/// these too (a run with 20,000 series would otherwise convert 40,000 strings per chunk).
type NamesCache = Option<(std::sync::Arc<Columns>, Py<PyList>, [Vec<i32>; 2])>;

/// The `(rows, names)` arguments of the sink for a time-series chunk.
fn timeseries_chunk<'py>(
    py: Python<'py>,
    cache: &mut NamesCache,
    rows: &Columns,
    names: &std::sync::Arc<Columns>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
    let (_, py_names, codes) = match cache {
        Some(c) if std::sync::Arc::ptr_eq(&c.0, names) => c,
        _ => cache.insert((
            std::sync::Arc::clone(names),
            columns(py, names)?.unbind(),
            name_codes(names),
        )),
    };
    Ok((
        timeseries_columns(py, rows, codes)?,
        py_names.bind(py).clone(),
    ))
}

/// Validates an experiment dict; returns a short description of the plan.
#[pyfunction]
#[pyo3(signature = (cfg, base_dir, disciplines=None))]
fn validate<'py>(
    py: Python<'py>,
    cfg: &Bound<'py, PyDict>,
    base_dir: &str,
    disciplines: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let exp = parse(cfg, base_dir, disciplines)?;
    let d = PyDict::new(py);
    d.set_item("name", &exp.name)?;
    d.set_item("seed", exp.seed)?;
    d.set_item("duration_s", exp.duration.as_secs_f64())?;
    d.set_item("warmup_s", exp.warmup.as_secs_f64())?;
    d.set_item("repeats", exp.repeats)?;
    d.set_item("nodes", exp.node_names.clone())?;
    let links = PyList::empty(py);
    let applied = PyDict::new(py);
    for l in &exp.links {
        links.append((l.name.as_str(), l.qdisc_desc.as_str()))?;
        // The discipline as Linux would apply it, in tc's syntax (e.g. fq_codel's quantum
        // raised to 256, as the kernel does); None where Linux cannot express it.
        if let Ok((kind, args)) = l.qdisc.tc_args() {
            let line = if args.is_empty() {
                kind.to_string()
            } else {
                format!("{kind} {}", args.join(" "))
            };
            applied.set_item(l.name.as_str(), line)?;
        }
    }
    d.set_item("links", links)?;
    d.set_item("links_tc", applied)?;
    // What tc would print when applying the file's HTB trees (`quantum of class 10001 is
    // big. Consider r2q change.`), one line per class, named by link.
    let warnings = PyList::empty(py);
    for l in &exp.links {
        if let sojourn_core::qdisc::QdiscSpec::Htb(h) = &l.qdisc {
            for w in h.warnings() {
                warnings.append(format!("link {}: htb: {w}", l.name))?;
            }
        }
    }
    d.set_item("warnings", warnings)?;
    d.set_item("workloads", exp.workloads.len())?;
    // How the simulator cuts the run over threads (`threads`; docs/engine.md, "One run on
    // many cores"), or why it runs on one.
    let threads = PyDict::new(py);
    threads.set_item("asked", sojourn_sim::threads_wanted(&exp))?;
    let plan = sojourn_sim::thread_plan(&exp);
    match &plan {
        Ok(plan) => {
            threads.set_item("partitions", plan.parts)?;
            threads.set_item("cut_links", plan.cut_links.len())?;
            threads.set_item("heaviest_share", plan.heaviest_share)?;
            threads.set_item("shipped_per_s", plan.shipped_per_s)?;
            threads.set_item("predicted_speedup", plan.predicted_speedup())?;
            let la = (!plan.cut_links.is_empty()).then(|| plan.lookahead.as_secs_f64());
            threads.set_item("lookahead_s", la)?;
            threads.set_item("one_thread_because", py.None())?;
        }
        Err(why) => {
            threads.set_item("partitions", 1)?;
            threads.set_item("cut_links", 0)?;
            threads.set_item("heaviest_share", 1.0)?;
            threads.set_item("shipped_per_s", 0.0)?;
            threads.set_item("predicted_speedup", py.None())?;
            threads.set_item("lookahead_s", py.None())?;
            threads.set_item("one_thread_because", why)?;
        }
    }
    d.set_item("threads", threads)?;
    if let Some(isp) = isp::isp_dict(py, &exp)? {
        d.set_item("isp", isp)?;
    }
    // What validation compared with the machine's memory (docs/limits.md): a streamed
    // run's estimate in bytes, each partition's copy of the network included.
    let parts = plan.as_ref().map_or(1, |p| p.parts);
    d.set_item(
        "memory_estimate_bytes",
        sojourn_experiment::experiment::memory_estimate_cut(&exp, parts),
    )?;
    // The CPU time the run will take (docs/limits.md, "How long a run takes"): the link
    // packets its workloads offer per simulated second × the duration × a measured cost.
    let cpu = sojourn_experiment::cost::cpu_estimate(&exp);
    d.set_item("cpu_estimate_s", cpu.cpu_s)?;
    d.set_item("link_packets_per_s", cpu.link_packets_per_s)?;
    Ok(d)
}

/// Runs one experiment. `progress(sim_s, end_s, events)` is called periodically; if it
/// returns False (or raises) the run stops. Without `sink` the whole time series and packet
/// log come back in the result (refused with the estimate when they would not fit in
/// memory); with `sink`, `sink(kind, columns, names)` receives them in chunks of exactly
/// `chunk_rows` rows while the run proceeds (`kind` "timeseries" with the series names
/// known so far, or "packets" with `names` None) and the result holds only the rows after
/// the last chunk; `kind` "flows" (`names` None) brings finished flows' records, in the
/// order they finished (at most `chunk_rows` each), and the result's `flows` holds only
/// the others. `disciplines`: the front's resolver of Python disciplines (see [`parse`]);
/// an exception a Python discipline raises stops the run as `DisciplineError`.
#[pyfunction]
#[pyo3(signature = (cfg, base_dir, seed=None, progress=None, sink=None, chunk_rows=65536, disciplines=None))]
#[allow(clippy::too_many_arguments)]
fn run<'py>(
    py: Python<'py>,
    cfg: &Bound<'py, PyDict>,
    base_dir: &str,
    seed: Option<u64>,
    progress: Option<Py<PyAny>>,
    sink: Option<Py<PyAny>>,
    chunk_rows: usize,
    disciplines: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let exp = parse(cfg, base_dir, disciplines)?;
    let python_disciplines = pydisc::any_external(&exp);
    if sink.is_none() {
        sojourn_experiment::experiment::check_in_memory(&exp).map_err(conf_err)?;
    }
    if sink.is_some() && chunk_rows == 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "chunk_rows must be positive",
        ));
    }
    let seed = seed.unwrap_or(exp.seed);
    // The simulation runs without the GIL, so other Python threads keep running; the
    // signal check, the progress callback and the sink take it back about every 65k events.
    // With a Python discipline it keeps the GIL throughout: that discipline takes it at
    // every packet, and taking it back each time would cost more than the call.
    let simulate = || {
        let err = std::cell::RefCell::new(None::<PyErr>);
        let mut cb = |p: &sojourn_sim::Progress| -> bool {
            let (now, end) = (p.now.as_secs_f64(), p.end.as_secs_f64());
            Python::attach(|py| {
                progress_ok(
                    py,
                    progress.as_ref(),
                    (now, end, p.events),
                    &mut err.borrow_mut(),
                )
            })
        };
        let mut names_cache: NamesCache = None;
        let mut hand_out = |c: sojourn_sim::Chunk| -> bool {
            let Some(f) = &sink else { return true };
            Python::attach(|py| {
                let r = (|| -> PyResult<()> {
                    match &c {
                        sojourn_sim::Chunk::TimeSeries { rows, names } => {
                            let (r, n) = timeseries_chunk(py, &mut names_cache, rows, names)?;
                            f.call1(py, ("timeseries", r, n))?;
                        }
                        sojourn_sim::Chunk::Packets(rows) => {
                            f.call1(py, ("packets", columns(py, rows)?, py.None()))?;
                        }
                        sojourn_sim::Chunk::Flows(rows) => {
                            f.call1(py, ("flows", columns(py, rows)?, py.None()))?;
                        }
                    }
                    Ok(())
                })();
                match r {
                    Ok(()) => true,
                    Err(e) => {
                        *err.borrow_mut() = Some(e);
                        false
                    }
                }
            })
        };
        let rows = if sink.is_some() { chunk_rows } else { 0 };
        let out =
            pydisc::catch(|| sojourn_sim::run_streaming(&exp, seed, rows, &mut cb, &mut hand_out));
        (out, err.into_inner())
    };
    let (out, cb_err) = if python_disciplines {
        simulate()
    } else {
        py.detach(simulate)
    };
    let out = out?;
    if let Some(e) = cb_err {
        return Err(e);
    }
    let Some(out) = out else {
        return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(
            "run aborted",
        ));
    };
    output_dict(py, &out)
}

/// An engine's periodic check, with the GIL: pending signal handlers, then the caller's
/// `progress(now_s, end_s, events)`. False (stop the run) when either raised (the
/// exception is kept in `err`) or `progress` returned False.
fn progress_ok(
    py: Python<'_>,
    progress: Option<&Py<PyAny>>,
    (now_s, end_s, events): (f64, f64, u64),
    err: &mut Option<PyErr>,
) -> bool {
    if let Err(e) = py.check_signals() {
        *err = Some(e);
        return false;
    }
    if let Some(f) = progress {
        match f.call1(py, (now_s, end_s, events)) {
            Ok(r) => {
                if r.bind(py).extract::<bool>().ok() == Some(false) {
                    return false;
                }
            }
            Err(e) => {
                *err = Some(e);
                return false;
            }
        }
    }
    true
}

fn output_dict<'py>(py: Python<'py>, out: &sojourn_sim::RunOutput) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("summary_json", out.summary_json())?;
    d.set_item("flows", columns(py, &out.flows)?)?;
    d.set_item(
        "timeseries",
        timeseries_columns(py, &out.timeseries, &name_codes(&out.series_names))?,
    )?;
    d.set_item("series_names", columns(py, &out.series_names)?)?;
    d.set_item("histograms", columns(py, &out.histograms)?)?;
    match &out.packets {
        Some(p) => d.set_item("packets", columns(py, p)?)?,
        None => d.set_item("packets", py.None())?,
    }
    if let Some(p) = &out.probes {
        d.set_item("probes", columns(py, p)?)?;
    }
    Ok(d)
}

/// Runs one experiment live (docs/emulate.md): real kernel TCP in network namespaces
/// through the user-space forwarder. Same arguments and result as `run` (`sink` receives
/// the time series in chunks of `chunk_rows` rows while the run proceeds). Pending Python
/// signal handlers run about every 100 ms; one that raises stops the run, and every
/// namespace and device is removed before the exception propagates. The run does not hold
/// the GIL (the callbacks take it): the forwarder's thread takes it to call a Python
/// discipline.
#[cfg(target_os = "linux")]
#[pyfunction]
#[pyo3(signature = (cfg, base_dir, seed=None, progress=None, kernel_hook=None, sink=None, chunk_rows=65536, disciplines=None))]
#[allow(clippy::too_many_arguments)]
fn emulate<'py>(
    py: Python<'py>,
    cfg: &Bound<'py, PyDict>,
    base_dir: &str,
    seed: Option<u64>,
    progress: Option<Py<PyAny>>,
    kernel_hook: Option<Py<PyAny>>,
    sink: Option<Py<PyAny>>,
    chunk_rows: usize,
    disciplines: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    use sojourn_emu::run::EmuError;
    let exp = parse(cfg, base_dir, disciplines)?;
    let seed = seed.unwrap_or(exp.seed);
    // `kernel_hook(stage, hosts)`: hosts = [(node, namespace, device)]; its exception ends
    // the run (namespaces removed) and is raised as is.
    let mut hook_err: Option<PyErr> = None;
    let mut py_err: Option<PyErr> = None;
    let mut sink_err: Option<PyErr> = None;
    let res = py.detach(|| {
        let mut hook = |stage: sojourn_emu::run::Stage,
                        lp: &sojourn_emu::plan::LivePlan|
         -> Result<(), String> {
            let Some(f) = &kernel_hook else { return Ok(()) };
            let hosts: Vec<(String, String, String)> = lp
                .hosts
                .iter()
                .map(|h| (h.name.clone(), h.ns.clone(), h.host_if.clone()))
                .collect();
            Python::attach(|py| f.call1(py, (stage.name(), hosts)).map(|_| ())).map_err(|e| {
                let msg = e.to_string();
                hook_err = Some(e);
                msg
            })
        };
        let mut cb = |p: &sojourn_emu::run::Progress| -> bool {
            Python::attach(|py| {
                progress_ok(
                    py,
                    progress.as_ref(),
                    (p.elapsed_s, p.end_s, 0),
                    &mut py_err,
                )
            })
        };
        let mut names_cache: NamesCache = None;
        let mut hand_out = |c: sojourn_sim::Chunk| -> bool {
            let Some(f) = &sink else { return true };
            Python::attach(|py| {
                let r = match &c {
                    sojourn_sim::Chunk::TimeSeries { rows, names } => {
                        timeseries_chunk(py, &mut names_cache, rows, names)
                            .and_then(|(r, n)| f.call1(py, ("timeseries", r, n)).map(|_| ()))
                    }
                    sojourn_sim::Chunk::Packets(rows) => columns(py, rows)
                        .and_then(|r| f.call1(py, ("packets", r, py.None())).map(|_| ())),
                    // The live engine keeps its flow records (one per connection) to the end.
                    sojourn_sim::Chunk::Flows(_) => Ok(()),
                };
                match r {
                    Ok(()) => true,
                    Err(e) => {
                        sink_err = Some(e);
                        false
                    }
                }
            })
        };
        let rows = if sink.is_some() { chunk_rows } else { 0 };
        pydisc::catch(|| {
            sojourn_emu::run::run_streaming(&exp, seed, rows, &mut cb, &mut hook, &mut hand_out)
        })
    });
    if let Some(e) = hook_err {
        return Err(e);
    }
    if let Some(e) = sink_err {
        return Err(e);
    }
    match res? {
        Ok(out) => output_dict(py, &out),
        Err(EmuError::Refused(e)) => Err(conf_err(e)),
        Err(EmuError::Privilege(m)) => Err(PrivilegeError::new_err(m)),
        Err(EmuError::Failed(m)) => Err(EmulateError::new_err(m)),
        Err(EmuError::Aborted) => Err(py_err.unwrap_or_else(|| {
            pyo3::exceptions::PyKeyboardInterrupt::new_err("emulation aborted")
        })),
    }
}

/// Checks what the live engine would refuse (no privilege needed, nothing created).
#[cfg(target_os = "linux")]
#[pyfunction]
#[pyo3(signature = (cfg, base_dir, disciplines=None))]
fn emulate_check(
    cfg: &Bound<'_, PyDict>,
    base_dir: &str,
    disciplines: Option<Py<PyAny>>,
) -> PyResult<()> {
    let exp = parse(cfg, base_dir, disciplines)?;
    sojourn_emu::run::check(&exp).map(|_| ()).map_err(conf_err)
}

/// Removes namespaces left by live runs that were killed (SIGKILL); returns
/// `(namespaces removed, errors)`.
#[cfg(target_os = "linux")]
#[pyfunction]
fn emulate_cleanup() -> PyResult<(Vec<String>, Vec<String>)> {
    if !sojourn_emu::sock::have_net_admin() {
        return Err(PrivilegeError::new_err(sojourn_emu::run::PRIVILEGE_MESSAGE));
    }
    Ok(sojourn_emu::run::cleanup())
}

/// `(name, summary)` of every registered discipline.
#[pyfunction]
fn qdiscs() -> Vec<(&'static str, &'static str)> {
    sojourn_core::qdisc::describe()
}

/// The version of the engine.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// SHA-256 of the sources this engine was built from (crates/sojourn-py/build.rs);
/// `sojourn._fingerprint.source_hash(root)` computes the same from a checkout.
#[pyfunction]
fn source_hash() -> &'static str {
    env!("SOJOURN_SOURCE_HASH")
}

/// The profile this engine was optimised with (profile-guided optimisation, docs/pgo.md):
/// the first 16 hex digits of the SHA-256 of `pgo/sojourn.profdata` as it was at build
/// time, or "" for a build without one (`maturin develop`, `SOJOURN_PGO=0`).
#[pyfunction]
fn pgo_profile() -> &'static str {
    env!("SOJOURN_PGO_PROFILE")
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(qdiscs, m)?)?;
    #[cfg(target_os = "linux")]
    {
        m.add_function(wrap_pyfunction!(emulate, m)?)?;
        m.add_function(wrap_pyfunction!(emulate_check, m)?)?;
        m.add_function(wrap_pyfunction!(emulate_cleanup, m)?)?;
    }
    m.add("PrivilegeError", m.py().get_type::<PrivilegeError>())?;
    m.add("EmulateError", m.py().get_type::<EmulateError>())?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(source_hash, m)?)?;
    m.add_function(wrap_pyfunction!(pgo_profile, m)?)?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    model::register(m)?;
    deploy::register(m)?;
    pydisc::register(m)?;
    harness::register(m)?;
    Ok(())
}
