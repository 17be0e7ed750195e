//! The subscriber tree of a `kind = "isp"` topology as `validate`'s `isp` entry: what the
//! front needs to turn flows into per-subscriber results (docs/isp.md) — each subscriber's
//! plan, site, base RTT and whether it is active, as columns, plus the oversubscription
//! ratios `sojourn validate` prints.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use sojourn_experiment::experiment::Experiment;
use sojourn_experiment::isp::IspPlan;

/// `exp.isp` as a dict of plain values and per-subscriber lists; None when the topology
/// is not an isp tree.
pub(crate) fn isp_dict<'py>(
    py: Python<'py>,
    exp: &Experiment,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(isp) = &exp.isp else {
        return Ok(None);
    };
    let d = PyDict::new(py);
    d.set_item("uplink_bps", isp.uplink_bps)?;
    d.set_item("upstream_bps", isp.upstream_bps)?;
    d.set_item("oversubscription_down", isp.oversubscription_down())?;
    d.set_item("oversubscription_up", isp.oversubscription_up())?;
    d.set_item("sites", isp.sites)?;
    d.set_item("access_routers", isp.access_routers)?;
    d.set_item("leaf", &isp.leaf)?;
    d.set_item("servers", isp.servers.len())?;
    d.set_item("subscribers", subscriber_columns(py, exp, isp)?)?;
    Ok(Some(d))
}

fn subscriber_columns<'py>(
    py: Python<'py>,
    exp: &Experiment,
    isp: &IspPlan,
) -> PyResult<Bound<'py, PyDict>> {
    let s = &isp.subscribers;
    let plan = |i: usize| &isp.plans[s[i].plan as usize];
    let c = PyDict::new(py);
    c.set_item(
        "subscriber",
        s.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
    )?;
    c.set_item("plan", s.iter().map(|x| x.plan).collect::<Vec<_>>())?;
    c.set_item("site", s.iter().map(|x| x.site).collect::<Vec<_>>())?;
    c.set_item("access", s.iter().map(|x| x.access).collect::<Vec<_>>())?;
    c.set_item("active", s.iter().map(|x| x.active).collect::<Vec<_>>())?;
    c.set_item(
        "classid",
        s.iter().map(|x| x.classid.as_str()).collect::<Vec<_>>(),
    )?;
    c.set_item(
        "server",
        s.iter()
            .map(|x| exp.node_names[x.server as usize].as_str())
            .collect::<Vec<_>>(),
    )?;
    c.set_item(
        "rtt_s",
        s.iter().map(|x| x.rtt.as_secs_f64()).collect::<Vec<_>>(),
    )?;
    c.set_item(
        "down_bps",
        (0..s.len()).map(|i| plan(i).down_bps).collect::<Vec<_>>(),
    )?;
    c.set_item(
        "up_bps",
        (0..s.len()).map(|i| plan(i).up_bps).collect::<Vec<_>>(),
    )?;
    c.set_item(
        "ceil_down_bps",
        (0..s.len())
            .map(|i| plan(i).ceil_down_bps)
            .collect::<Vec<_>>(),
    )?;
    c.set_item(
        "ceil_up_bps",
        (0..s.len())
            .map(|i| plan(i).ceil_up_bps)
            .collect::<Vec<_>>(),
    )?;
    Ok(c)
}
