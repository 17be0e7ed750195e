//! What `sojourn deploy` needs from the model: each link's discipline as `tc` command
//! arguments (the typed spec's `dump` / `dump_shaped`, or the one-line reason Linux cannot
//! run it) and the `[[classifier]]` rules, with node names. The Python front
//! (`sojourn.deploy`) turns these into `tc` and `nft` command lines; nothing here runs them.

use crate::parse;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use sojourn_core::qdisc::tc_lines::interleave;
use sojourn_core::qdisc::QdiscSpec;
use sojourn_experiment::classify::{CountBytes, CountDirection, Hook};
use sojourn_experiment::LinkRate;

/// `(kind, reason)` of the first part of `spec` Linux cannot express.
fn not_linux(spec: &QdiscSpec) -> Option<(String, String)> {
    spec.linux()
        .err()
        .map(|e| (e.kind.to_string(), e.reason.clone()))
}

/// The deployable view of an experiment dict: `name`, `nodes`, `links` (per direction:
/// `name`, `from`, `to`, `rate_kind` = constant|schedule|trace, `rate_bps` (constant only),
/// `shaper`, `qdisc` (its one-line description), `not_linux` = `(kind, reason)` or None,
/// `tc` = the tree's `tc qdisc` argument lines after `dev DEV` (`root handle 1: pfifo limit
/// 1000`), `tc_shaped` = `[(object, args)]` for the tree behind htb at the link's constant
/// rate (object `qdisc` or `class`)), `classifiers` (`nodes`, `hook`, `map` = `[(upto_bytes,
/// priority)]`) and `conntrack` (per node: None or `(direction, bytes)`).
#[pyfunction]
#[pyo3(signature = (cfg, base_dir, disciplines=None))]
pub fn deploy_model<'py>(
    py: Python<'py>,
    cfg: &Bound<'py, PyDict>,
    base_dir: &str,
    disciplines: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let exp = parse(cfg, base_dir, disciplines)?;
    // An isp tree's filters on the subscribers' real addresses (docs/isp.md).
    let exp = crate::isp::with_real_addresses(exp).map_err(crate::conf_err)?;
    let d = PyDict::new(py);
    d.set_item("name", &exp.name)?;
    d.set_item("nodes", exp.node_names.clone())?;
    let links = PyList::empty(py);
    for l in &exp.links {
        let ld = PyDict::new(py);
        ld.set_item("name", &l.name)?;
        ld.set_item("from", &exp.node_names[l.from as usize])?;
        ld.set_item("to", &exp.node_names[l.to as usize])?;
        let (rate_kind, rate_bps) = match &l.rate {
            LinkRate::Constant(r) => ("constant", Some(*r)),
            LinkRate::Schedule(_) => ("schedule", None),
            LinkRate::Trace(_) => ("trace", None),
        };
        ld.set_item("rate_kind", rate_kind)?;
        ld.set_item("rate_bps", rate_bps)?;
        ld.set_item("shaper", l.shaper)?;
        ld.set_item("delay_ns", l.delay.0)?;
        ld.set_item("loss", l.loss)?;
        ld.set_item("qdisc", &l.qdisc_desc)?;
        ld.set_item("not_linux", not_linux(&l.qdisc))?;
        match l.qdisc.dump() {
            Ok(tree) => {
                let lines: Vec<String> = tree.iter().map(|n| n.to_string()).collect();
                ld.set_item("tc", lines)?;
            }
            Err(_) => ld.set_item("tc", py.None())?,
        }
        // With classes and filters (htb, drr): `(object, args)` in the order tc runs them.
        match l.qdisc.tc_lines() {
            Ok(lines) => ld.set_item("tc_lines", lines)?,
            Err(_) => ld.set_item("tc_lines", py.None())?,
        }
        // The majors of the priorities classifiers at this link's node write: htb's root
        // must not take one (see `QdiscSpec::dump_shaped_reserving`).
        let mut reserved: Vec<u16> = exp
            .classifiers
            .iter()
            .filter(|c| c.nodes.contains(&l.from))
            .flat_map(|c| c.map.iter().map(|&(_, prio)| (prio >> 16) as u16))
            .collect();
        reserved.sort_unstable();
        reserved.dedup();
        match (
            rate_bps,
            l.qdisc
                .dump_shaped_reserving(rate_bps.unwrap_or(0), &reserved),
        ) {
            (Some(_), Ok(s)) => {
                let mut v = vec![
                    ("qdisc".to_string(), s.root.to_string()),
                    ("class".to_string(), s.class.to_string()),
                ];
                // The tree's own classes (htb, drr) follow their qdisc; filters come last.
                let classes = l.qdisc.dump_classes().unwrap_or_default();
                let filters = l.qdisc.dump_filters().unwrap_or_default();
                v.extend(
                    interleave(&s.leaf, &classes, &filters)
                        .into_iter()
                        .map(|(o, a)| (o.to_string(), a)),
                );
                ld.set_item("tc_shaped", v)?;
            }
            _ => ld.set_item("tc_shaped", py.None())?,
        }
        links.append(ld)?;
    }
    d.set_item("links", links)?;
    let cls = PyList::empty(py);
    for c in &exp.classifiers {
        let cd = PyDict::new(py);
        let nodes: Vec<&str> = c
            .nodes
            .iter()
            .map(|&n| exp.node_names[n as usize].as_str())
            .collect();
        cd.set_item("nodes", nodes)?;
        cd.set_item(
            "hook",
            match c.hook {
                Hook::Output => "output",
                Hook::Forward => "forward",
                Hook::Both => "both",
            },
        )?;
        cd.set_item("map", c.map.clone())?;
        cd.set_item(
            "adapt_interval_s",
            c.adapt.map(|a| a.interval.as_secs_f64()),
        )?;
        cls.append(cd)?;
    }
    d.set_item("classifiers", cls)?;
    let ct = PyList::empty(py);
    for c in &exp.conntrack {
        match c {
            None => ct.append(py.None())?,
            Some(c) => ct.append((
                match c.direction {
                    CountDirection::Both => "both",
                    CountDirection::Original => "original",
                },
                match c.bytes {
                    CountBytes::Ip => "ip",
                    CountBytes::Payload => "payload",
                },
            ))?,
        }
    }
    d.set_item("conntrack", ct)?;
    Ok(d)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(deploy_model, m)?)?;
    Ok(())
}
