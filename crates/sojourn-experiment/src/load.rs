//! Reading an experiment file: the top of the experiment model. It parses the file's
//! tables in order — the topology (dispatching to each kind's expansion: the dumbbell, the
//! graph and Wi-Fi in [`crate::experiment`], the isp tree in [`crate::isp_tree`]), the
//! node names in qdisc filters, the transport, the workloads, the classifiers, the
//! recording — and checks the whole (memory, routes, overload). It sits above every module
//! it calls so the model has no import circle (sojourn-sim's tests/import_structure.rs).

use crate::experiment::{
    check_memory, check_overload, check_routes, parse_classifiers, parse_dumbbell, parse_graph,
    parse_record, parse_wifi, tables_of, Experiment, FctFrom, RecordPlan,
};
use crate::qdisc_nodes::{at_path, rewrite};
use crate::transport::TcpConfig;
use crate::workload;
use sojourn_core::params::{ConfError, ConfResult, Params, Table, Value};
use sojourn_core::qdisc::{BuildCtx, QdiscSpec};
use sojourn_core::Duration;
use std::collections::BTreeMap;
use std::path::Path;

/// Parses and validates an experiment from TOML text.
pub fn from_toml(text: &str, base_dir: &Path) -> ConfResult<Experiment> {
    let t = crate::toml_text::parse_toml(text)?;
    from_table(&t, base_dir)
}

/// Parses and validates an experiment from a value tree.
pub fn from_table(t: &Table, base_dir: &Path) -> ConfResult<Experiment> {
    let mut p = Params::new("", t);
    let name = p.str_opt("name")?.unwrap_or("experiment").to_string();
    let description = p.str_opt("description")?.unwrap_or("").to_string();
    let seed = p.u64("seed", 1, 0, i64::MAX as u64)?;
    let duration = p
        .duration_opt("duration")?
        .ok_or_else(|| ConfError::new("duration", "required (e.g. duration = \"30s\")"))?;
    if duration.is_zero() {
        return Err(p.err("duration", "must be positive"));
    }
    let warmup = p.duration("warmup", Duration::ZERO)?;
    if warmup >= duration {
        return Err(p.err(
            "warmup",
            format!("warm-up {warmup} must be shorter than the duration {duration}"),
        ));
    }
    let repeats = p.u32("repeats", 1, 1, 100_000)?;
    // How many threads one run may use (docs/engine.md, "One run on many cores"):
    // a count, or "auto" (0 here: the machine's cores).
    let threads = match p.raw("threads") {
        None => 1,
        Some(Value::Str(s)) if s == "auto" => 0,
        Some(Value::Int(n)) if (1..=1024).contains(n) => *n as usize,
        Some(v) => {
            return Err(p.err(
                "threads",
                format!(
                    "must be a count from 1 to 1024 or \"auto\", not {}",
                    v.type_name()
                ),
            ))
        }
    };

    let mut exp = Experiment {
        name,
        description,
        seed,
        duration,
        warmup,
        repeats,
        threads,
        node_names: Vec::new(),
        links: Vec::new(),
        routes: Vec::new(),
        workloads: Vec::new(),
        transport: TcpConfig::default(),
        record: RecordPlan {
            interval: Duration::from_ms(100),
            links: None,
            flow_series: false,
            packet_links: Vec::new(),
            packet_sample: 1.0,
            fct_from: FctFrom::Connect,
        },
        pairs: Vec::new(),
        isp: None,
        classifiers: Vec::new(),
        wifi: None,
        conntrack: Vec::new(),
        base_dir: base_dir.to_path_buf(),
        node_index: BTreeMap::new(),
        link_index: BTreeMap::new(),
    };

    let topo = p.table_opt("topology")?.ok_or_else(|| {
        ConfError::new(
            "topology",
            "required: a [topology] table (kind = \"dumbbell\" or \"graph\")",
        )
    })?;
    parse_topology(&mut exp, topo)?;
    resolve_qdisc_nodes(&mut exp, t)?;

    if let Some(tt) = p.table_opt("transport")? {
        exp.transport = crate::transport::parse_transport_table(tt)?;
    }

    // Workloads.
    let wl = match p.raw("workload") {
        None => {
            return Err(ConfError::new(
                "workload",
                "required: at least one [[workload]] entry",
            ))
        }
        Some(Value::Array(a)) => a,
        Some(Value::Table(_)) => {
            return Err(ConfError::new(
                "workload",
                "use [[workload]] (an array of tables), not [workload]",
            ))
        }
        Some(v) => {
            return Err(ConfError::new(
                "workload",
                format!("expected an array of tables, got {}", v.type_name()),
            ))
        }
    };
    if wl.is_empty() {
        return Err(ConfError::new(
            "workload",
            "at least one workload is required",
        ));
    }
    for (i, (path, wt)) in tables_of(wl, "workload")?.into_iter().enumerate() {
        let ctx = workload::Context {
            node_names: &exp.node_names,
            pairs: &exp.pairs,
            isp: exp.isp.as_ref(),
            transport: &exp.transport,
            base_dir: &exp.base_dir,
        };
        let plan = workload::parse(&ctx, wt, &path, i as u32)?;
        exp.workloads.push(plan);
    }

    parse_classifiers(&mut exp, p.raw("classifier"))?;

    if let Some(rt) = p.table_opt("record")? {
        parse_record(&mut exp, rt)?;
    }
    p.finish()?;
    // Memory first: it covers the routing table, which `check_routes` builds.
    check_memory(&exp)?;
    check_routes(&exp)?;
    check_overload(&exp)?;
    Ok(exp)
}

fn parse_topology(exp: &mut Experiment, t: &Table) -> ConfResult<()> {
    let mut p = Params::new("topology", t);
    let kind = p.choice("kind", &["dumbbell", "graph", "wifi", "isp"], "dumbbell")?;
    match kind {
        "dumbbell" => parse_dumbbell(exp, &mut p)?,
        "wifi" => parse_wifi(exp, &mut p)?,
        "isp" => crate::isp_tree::parse_isp(exp, &mut p)?,
        _ => parse_graph(exp, &mut p)?,
    }
    p.finish()
}

/// Re-parses each link's discipline whose filters name nodes, with the nodes' ids; an
/// unknown name is an error at its key. `file` is the experiment's top-level table.
fn resolve_qdisc_nodes(exp: &mut Experiment, file: &Table) -> ConfResult<()> {
    for li in 0..exp.links.len() {
        let path = exp.links[li].qdisc_path.clone();
        let Some(raw) = at_path(file, &path) else {
            continue;
        };
        let names = exp.node_names.clone();
        let fixed = rewrite(raw, &path, &mut |name, key| match exp.node(name) {
            Some(id) => Ok(id as i64),
            None => Err(ConfError::new(
                key,
                format!(
                    "no node named {name:?} (nor an IP address); nodes: {}",
                    names.join(", ")
                ),
            )),
        })?;
        if let Some(v) = fixed {
            let rate_bps = match exp.links[li].rate {
                crate::LinkRate::Constant(r) => r,
                _ => 0,
            };
            let ctx = BuildCtx {
                link_rate_bps: rate_bps,
                ..BuildCtx::default()
            };
            exp.links[li].qdisc = QdiscSpec::parse(&v, &path, &ctx)?;
        }
    }
    Ok(())
}
