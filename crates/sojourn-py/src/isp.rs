//! The subscriber tree of a `kind = "isp"` topology as `validate`'s `isp` entry: what the
//! front needs to turn flows into per-subscriber results (docs/isp.md) — each subscriber's
//! plan, site, base RTT and whether it is active, as columns, plus the oversubscription
//! ratios `sojourn validate` prints.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use sojourn_core::packet::Addr;
use sojourn_core::params::ConfError;
use sojourn_experiment::experiment::Experiment;
use sojourn_experiment::isp::{filters_on_addresses, IspPlan};

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

/// An isp experiment with its trees' node filters on the subscribers' real addresses
/// (`topology.addresses`), for deploy: tc filters match addresses, and only the file can
/// say which address a subscriber has on the real network. Without `addresses` deploy
/// cannot write the trees' filters: refused, naming the key.
pub(crate) fn with_real_addresses(mut exp: Experiment) -> Result<Experiment, ConfError> {
    let Some(isp) = exp.isp.clone() else {
        return Ok(exp);
    };
    if isp.addresses.is_none() {
        return Err(ConfError::new(
            "topology.addresses",
            "required to deploy an isp tree: the prefix the subscribers' real addresses are \
             numbered from (subscriber i gets its address i + 1, e.g. addresses = \"100.64.0.0/16\"); \
             tc filters match addresses, not node names",
        ));
    }
    for l in &mut exp.links {
        filters_on_addresses(&mut l.qdisc, |n| {
            isp.address_of(n).map(Addr::from).into_iter().collect()
        });
    }
    Ok(exp)
}
