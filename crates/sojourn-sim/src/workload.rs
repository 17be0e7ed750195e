//! Workloads: what traffic an experiment offers (`[[workload]]` entries).
//!
//! Each entry is parsed into a [`WorkloadPlan`] at validation time and instantiated into
//! endpoints (and, for generators of many flows, an application with timers) when the
//! simulation starts. Endpoint selection is shared by all kinds:
//! `from`/`to` node names, or on a dumbbell `pair = N` / `pairs = "all" | [0, 2]`, with
//! `count` flows spread round-robin over the selected pairs.

use crate::config::Experiment;
use crate::endpoint::AnyEndpoint;
use crate::flows::{FlowKind, FlowRecord};
use crate::sim::Sim;
use crate::udp::{OnOff, UdpSink, UdpSource};
use sojourn_core::packet::{proto, Addr, Ecn, FlowKey};
use sojourn_core::params::{ConfError, ConfResult, Params, Table, Value};
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, Time};

/// A UDP constant-bit-rate or on/off workload.
#[derive(Clone, Debug)]
pub struct UdpPlan {
    pub index: u32,
    /// (source node, destination node) for each flow.
    pub flows: Vec<(u32, u32)>,
    pub rate_bps: u64,
    pub packet_bytes: u32,
    pub start: Duration,
    pub stop: Option<Duration>,
    pub onoff: OnOff,
    pub ecn: bool,
    pub dscp: u8,
}

/// A parsed workload.
#[derive(Clone, Debug)]
pub enum WorkloadPlan {
    Udp(UdpPlan),
    Tcp(crate::tcp::apps::TcpPlan),
}

impl WorkloadPlan {
    /// Every (source, destination) node pair this workload uses (for route checks).
    pub fn endpoints(&self) -> Vec<(u32, u32)> {
        match self {
            WorkloadPlan::Udp(u) => u.flows.clone(),
            WorkloadPlan::Tcp(t) => t.flows.clone(),
        }
    }
}

/// UDP workload kinds (this module); the TCP ones are `tcp::apps::KINDS`.
pub const UDP_KINDS: &[&str] = &["cbr", "onoff"];

/// Every workload kind, for messages and docs.
pub fn kinds() -> Vec<&'static str> {
    UDP_KINDS
        .iter()
        .chain(crate::tcp::apps::KINDS)
        .copied()
        .collect()
}

/// Parses one `[[workload]]` table.
pub fn parse(exp: &Experiment, t: &Table, path: &str, index: u32) -> ConfResult<WorkloadPlan> {
    let mut p = Params::new(path, t);
    let kind = match p.str_opt("kind")? {
        Some(k) => k,
        None => return Err(p.err("kind", format!("required; one of {}", kinds().join(", ")))),
    };
    let plan = match kind {
        "cbr" | "onoff" => WorkloadPlan::Udp(parse_udp(exp, &mut p, index, kind == "onoff")?),
        k if crate::tcp::apps::KINDS.contains(&k) => {
            WorkloadPlan::Tcp(crate::tcp::apps::parse(exp, &mut p, index, k)?)
        }
        other => {
            let kinds = kinds();
            let hint = sojourn_core::params::closest(other, &kinds)
                .map(|c| format!(" (did you mean {c:?}?)"))
                .unwrap_or_default();
            return Err(p.err(
                "kind",
                format!(
                    "unknown workload kind {other:?}{hint}; known: {}",
                    kinds.join(", ")
                ),
            ));
        }
    };
    p.finish()?;
    Ok(plan)
}

/// Reads `from`/`to`, `pair`, `pairs` and `count` into a list of (src, dst) per flow.
pub fn parse_flow_endpoints(exp: &Experiment, p: &mut Params) -> ConfResult<Vec<(u32, u32)>> {
    let node = |p: &mut Params, key: &str| -> ConfResult<Option<u32>> {
        match p.str_opt(key)? {
            None => Ok(None),
            Some(s) => exp.node(s).map(Some).ok_or_else(|| {
                p.err(
                    key,
                    format!("no node named {s:?}; nodes: {}", exp.node_names.join(", ")),
                )
            }),
        }
    };
    let from = node(p, "from")?;
    let to = node(p, "to")?;
    let has_pair = p.has("pair") || p.has("pairs");
    let selected: Vec<(u32, u32)> = match (from, to) {
        (Some(a), Some(b)) => {
            if has_pair {
                return Err(p.err("pair", "give either from/to or pair(s), not both"));
            }
            if a == b {
                return Err(p.err("to", "source and destination must differ"));
            }
            vec![(a, b)]
        }
        (Some(_), None) => return Err(p.err("to", "required with `from`")),
        (None, Some(_)) => return Err(p.err("from", "required with `to`")),
        (None, None) => {
            if exp.pairs.is_empty() {
                return Err(p.err("from", "required (node names) on a graph topology"));
            }
            let n = exp.pairs.len() as i64;
            if p.has("pair") {
                let i = p.int("pair", 0, 0, n - 1)?;
                vec![exp.pairs[i as usize]]
            } else {
                match p.raw("pairs") {
                    None => vec![exp.pairs[0]],
                    Some(Value::Str(s)) if s == "all" => exp.pairs.clone(),
                    Some(Value::Array(a)) => {
                        let mut v = Vec::new();
                        for (k, x) in a.iter().enumerate() {
                            match x {
                                Value::Int(i) if *i >= 0 && *i < n => {
                                    v.push(exp.pairs[*i as usize])
                                }
                                _ => {
                                    return Err(ConfError::new(
                                        format!("{}.pairs[{k}]", p.path()),
                                        format!("expected a pair index in 0..{n}"),
                                    ))
                                }
                            }
                        }
                        if v.is_empty() {
                            return Err(p.err("pairs", "empty list"));
                        }
                        v
                    }
                    Some(v) => {
                        return Err(p.err(
                            "pairs",
                            format!(
                                "expected \"all\" or a list of pair indices, got {}",
                                v.type_name()
                            ),
                        ))
                    }
                }
            }
        }
    };
    let count = p.u32("count", selected.len() as u32, 1, 10_000_000)?;
    Ok((0..count as usize)
        .map(|i| selected[i % selected.len()])
        .collect())
}

fn parse_udp(exp: &Experiment, p: &mut Params, index: u32, onoff: bool) -> ConfResult<UdpPlan> {
    let flows = parse_flow_endpoints(exp, p)?;
    let rate_bps = p
        .rate_opt("rate")?
        .ok_or_else(|| p.err("rate", "required (e.g. rate = \"12Mbit\")"))?;
    if rate_bps == 0 {
        return Err(p.err("rate", "must be positive"));
    }
    let packet_bytes = p.bytes("packet_size", 1514)?;
    if !(64..=65_535).contains(&packet_bytes) {
        return Err(p.err("packet_size", format!("{packet_bytes} B is outside 64..65535 B (frame length incl. the 14-B Ethernet header)")));
    }
    let start = p.duration("start", Duration::ZERO)?;
    let stop = p.duration_opt("stop")?;
    if let Some(s) = stop {
        if s <= start {
            return Err(p.err("stop", "must be after `start`"));
        }
    }
    let mode = if onoff {
        let on = p
            .duration_opt("on_time")?
            .ok_or_else(|| p.err("on_time", "required for onoff (mean on period)"))?;
        let off = p
            .duration_opt("off_time")?
            .ok_or_else(|| p.err("off_time", "required for onoff (mean off period)"))?;
        if on.is_zero() {
            return Err(p.err("on_time", "must be positive"));
        }
        match p.choice("distribution", &["exponential", "fixed"], "exponential")? {
            "exponential" => OnOff::Exponential { on, off },
            _ => OnOff::Fixed { on, off },
        }
    } else {
        OnOff::Always
    };
    let ecn = p.bool("ecn", false)?;
    let dscp = p.u32("dscp", 0, 0, 63)? as u8;
    Ok(UdpPlan {
        index,
        flows,
        rate_bps,
        packet_bytes: packet_bytes as u32,
        start,
        stop,
        onoff: mode,
        ecn,
        dscp,
    })
}

/// Creates the flows and endpoints of a workload at the start of the run.
pub fn instantiate(plan: &WorkloadPlan, sim: &mut Sim) {
    match plan {
        WorkloadPlan::Tcp(t) => crate::tcp::apps::instantiate(t, sim),
        WorkloadPlan::Udp(u) => {
            for &(src, dst) in &u.flows {
                let kind = if u.onoff == OnOff::Always {
                    FlowKind::UdpCbr
                } else {
                    FlowKind::UdpOnOff
                };
                let start = Time::ZERO + u.start;
                let flow = sim
                    .flows
                    .add(FlowRecord::new(0, kind, u.index, src, dst, start));
                let stop = u.stop.map(|s| Time::ZERO + s).unwrap_or(Time::MAX);
                let key = FlowKey {
                    src_addr: Addr::v4(src),
                    dst_addr: Addr::v4(dst),
                    src_port: ephemeral_port(flow),
                    dst_port: 9,
                    proto: proto::UDP,
                };
                let hash = key.hash(sim.hash_salt);
                let sink = sim.add_endpoint(dst, flow, AnyEndpoint::UdpSink(UdpSink { flow }));
                let rng = Rng::stream(sim.seed, "udp", flow as u64);
                let mut s = UdpSource::new(
                    flow,
                    key,
                    hash,
                    sink,
                    u.rate_bps,
                    u.packet_bytes,
                    start,
                    stop,
                    u.onoff,
                    rng,
                );
                if u.ecn {
                    s.ecn = Ecn::Ect0;
                }
                s.dscp = u.dscp;
                let src_ep = sim.add_endpoint(src, flow, AnyEndpoint::UdpSource(s));
                sim.start_endpoint(sink);
                sim.start_endpoint(src_ep);
            }
        }
    }
}

/// A source port for flow `flow`: distinct for the first 64k flows of a host.
pub fn ephemeral_port(flow: u32) -> u16 {
    (1024 + flow % 64_000) as u16
}
