//! Workloads: what traffic an experiment offers (`[[workload]]` entries).
//!
//! Each entry is parsed into a [`WorkloadPlan`] at validation time. An engine turns a
//! plan into traffic: UDP plans are sources of a fixed shape, TCP plans are driven by the
//! sans-IO [`crate::schedule::Generator`] ("open a transfer of S bytes from A to B now"),
//! which draws sizes and think times from the same random streams in every engine.
//! Endpoint selection is shared by all kinds:
//! `from`/`to` node names, or on a dumbbell `pair = N` / `pairs = "all" | [0, 2]`, with
//! `count` flows spread round-robin over the selected pairs.

use crate::dist::{IntervalDist, SizeDist};
use crate::probe::{self, ProbePlan, PROBE_KINDS};
use crate::transport::TcpConfig;
use sojourn_core::params::{ConfError, ConfResult, Params, Table, Value};
use sojourn_core::Duration;
use std::path::Path;

/// How the on and off periods of a UDP source are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OnOff {
    /// Always on (CBR).
    Always,
    /// Exponentially distributed on/off periods with these means.
    Exponential { on: Duration, off: Duration },
    /// Fixed on/off periods.
    Fixed { on: Duration, off: Duration },
}

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
// One per workload entry, built once at load time and never on the per-packet path, so
// the size of the TCP variant (its whole TcpConfig) costs nothing worth an indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum WorkloadPlan {
    Udp(UdpPlan),
    Tcp(TcpPlan),
    /// Latency probes and isochronous streams (probe.rs).
    Probe(ProbePlan),
}

impl WorkloadPlan {
    /// Every (source, destination) node pair this workload uses (for route checks).
    pub fn endpoints(&self) -> Vec<(u32, u32)> {
        match self {
            WorkloadPlan::Udp(u) => u.flows.clone(),
            WorkloadPlan::Tcp(t) => t.flows.clone(),
            WorkloadPlan::Probe(q) => q.flows.clone(),
        }
    }
}

/// UDP workload kinds; the TCP (and thin-stream) ones are [`TCP_KINDS`].
pub const UDP_KINDS: &[&str] = &["cbr", "onoff"];

/// Every workload kind, for messages and docs.
pub fn kinds() -> Vec<&'static str> {
    UDP_KINDS
        .iter()
        .chain(TCP_KINDS)
        .chain(PROBE_KINDS)
        .copied()
        .collect()
}

/// What a workload is parsed against: the topology and transport parsed before it.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// Node names by id.
    pub node_names: &'a [String],
    /// Dumbbell (sender, receiver) pairs (empty on a graph).
    pub pairs: &'a [(u32, u32)],
    /// The subscriber tree of an isp topology (`between = ...` selects in it).
    pub isp: Option<&'a crate::isp::IspPlan>,
    /// The `[transport]` defaults a TCP workload overrides.
    pub transport: &'a TcpConfig,
    /// Where relative file names (CDF files) are read from.
    pub base_dir: &'a Path,
}

impl Context<'_> {
    fn node(&self, name: &str) -> Option<u32> {
        self.node_names
            .iter()
            .position(|n| n == name)
            .map(|i| i as u32)
    }
}

/// Parses one `[[workload]]` table.
pub fn parse(exp: &Context, t: &Table, path: &str, index: u32) -> ConfResult<WorkloadPlan> {
    let mut p = Params::new(path, t);
    let kind = match p.str_opt("kind")? {
        Some(k) => k,
        None => return Err(p.err("kind", format!("required; one of {}", kinds().join(", ")))),
    };
    let plan = match kind {
        "cbr" | "onoff" => WorkloadPlan::Udp(parse_udp(exp, &mut p, index, kind == "onoff")?),
        k if TCP_KINDS.contains(&k) => WorkloadPlan::Tcp(parse_tcp(exp, &mut p, index, k)?),
        k if PROBE_KINDS.contains(&k) => {
            let flows = parse_flow_endpoints(exp, &mut p)?;
            WorkloadPlan::Probe(probe::parse(&mut p, index, k, flows)?)
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
    // `test`: the annotations the named-test expansion writes on each workload it makes
    // (test name, series label, direction, codec; python/sojourn/flent_tests.py,
    // docs/tests.md). The analysis reads them back from experiment.json; engines ignore them.
    match p.raw("test") {
        None | Some(Value::Table(_)) => {}
        Some(v) => {
            return Err(p.err(
                "test",
                format!(
                    "expected a table (a named test's annotations), got {}",
                    v.type_name()
                ),
            ))
        }
    }
    p.finish()?;
    Ok(plan)
}

/// Reads `from`/`to`, `pair`, `pairs` and `count` into a list of (src, dst) per flow.
pub fn parse_flow_endpoints(exp: &Context, p: &mut Params) -> ConfResult<Vec<(u32, u32)>> {
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
    if p.has("between") {
        let v = crate::isp::parse_between(exp.isp, p)?;
        let count = p.u32("count", v.len() as u32, 1, 10_000_000)?;
        return Ok((0..count as usize).map(|i| v[i % v.len()]).collect());
    }
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
            if p.has("pair") && p.has("pairs") {
                return Err(p.err("pairs", "give either `pair` or `pairs`, not both"));
            }
            if p.has("pair") {
                let i = p.int("pair", 0, 0, n - 1)?;
                vec![exp.pairs[i as usize]]
            } else {
                match p.raw("pairs") {
                    None => vec![exp.pairs[0]],
                    Some(Value::Str(s)) if s == "all" => exp.pairs.to_vec(),
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

fn parse_udp(exp: &Context, p: &mut Params, index: u32, onoff: bool) -> ConfResult<UdpPlan> {
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

/// TCP (and thin-stream) workload kinds.
pub const TCP_KINDS: &[&str] = &[
    "bulk",
    "transfer",
    "request_response",
    "thin",
    "actors",
    "poisson",
    "small_files",
    // Application workloads measured at the application (apps/): responsiveness, web
    // page loads, adaptive video.
    "rpm",
    "web",
    "video",
];

/// What a TCP workload does (one generator per selected endpoint pair).
#[derive(Clone, Debug)]
pub enum TcpKind {
    /// An infinite transfer per flow.
    Bulk,
    /// One transfer of `size` bytes per flow.
    Transfer { size: u64 },
    /// Repeated request (client → server) then response (server → client), separated by
    /// think times; `count` transactions (0 = until `stop`).
    RequestResponse {
        request: SizeDist,
        response: SizeDist,
        think: IntervalDist,
        count: u32,
    },
    /// A message of `message` bytes every `interval`, over TCP or UDP.
    Thin {
        udp: bool,
        message: u32,
        interval: IntervalDist,
    },
    /// Closed loop: think Exp(think), then one transfer, each a new connection.
    Actors { think: IntervalDist, size: SizeDist },
    /// Open loop: connections arrive with exponential gaps of mean `interval`.
    Poisson {
        interval: IntervalDist,
        size: SizeDist,
    },
    /// An application workload (`rpm`, `web`, `video`): a machine of [`crate::apps`]
    /// drives it instead of the [`crate::schedule::Generator`].
    App(crate::apps::AppKind),
}

/// A TCP (or thin-stream) workload.
#[derive(Clone, Debug)]
pub struct TcpPlan {
    pub index: u32,
    pub flows: Vec<(u32, u32)>,
    pub cfg: TcpConfig,
    pub start: Duration,
    pub stop: Option<Duration>,
    pub kind: TcpKind,
    /// `allow_overload = true` (open loops only): run even when the offered load reaches
    /// the path's bottleneck rate (validation refuses that otherwise, docs/limits.md); the
    /// memory estimate then counts every arrival as held to the end of the run.
    pub allow_overload: bool,
}

/// Parses a TCP (or thin-stream) workload of `kind`.
fn parse_tcp(exp: &Context, p: &mut Params, index: u32, kind: &str) -> ConfResult<TcpPlan> {
    let flows = parse_flow_endpoints(exp, p)?;
    let cfg = exp.transport.overridden(p)?;
    let start = p.duration("start", Duration::ZERO)?;
    let stop = p.duration_opt("stop")?;
    if let Some(s) = stop {
        if s <= start {
            return Err(p.err("stop", "must be after `start`"));
        }
    }
    let size = |p: &mut Params, key: &str| -> ConfResult<SizeDist> {
        SizeDist::parse(p, key, exp.base_dir)?
            .ok_or_else(|| p.err(key, "required (bytes, or a distribution table)"))
    };
    let k = match kind {
        "bulk" => TcpKind::Bulk,
        "transfer" => {
            let b = p
                .bytes_opt("size")?
                .ok_or_else(|| p.err("size", "required (e.g. size = \"1MB\")"))?;
            if b == 0 {
                return Err(p.err("size", "must be positive"));
            }
            TcpKind::Transfer { size: b }
        }
        "request_response" => TcpKind::RequestResponse {
            request: SizeDist::parse(p, "request_size", exp.base_dir)?
                .unwrap_or(SizeDist::Fixed(100)),
            response: size(p, "response_size")?,
            think: IntervalDist::parse(p, "think", true)?
                .unwrap_or(IntervalDist::Fixed(Duration::ZERO)),
            count: p.u32("transactions", 0, 0, u32::MAX)?,
        },
        "thin" => {
            let udp = p.choice("transport", &["tcp", "udp"], "tcp")? == "udp";
            let message = p
                .bytes_opt("message_size")?
                .ok_or_else(|| p.err("message_size", "required (bytes per message)"))?;
            if message == 0 || message > 1 << 24 {
                return Err(p.err("message_size", "must be between 1 B and 16 MiB"));
            }
            let interval = IntervalDist::parse(p, "interval", false)?
                .ok_or_else(|| p.err("interval", "required (e.g. \"638ms\" or { dist = \"uniform\", min = \"20ms\", max = \"30ms\" })"))?;
            TcpKind::Thin {
                udp,
                message: message as u32,
                interval,
            }
        }
        "actors" => TcpKind::Actors {
            think: IntervalDist::parse(p, "think", true)?
                .ok_or_else(|| p.err("think", "required (mean think time)"))?,
            size: size(p, "size")?,
        },
        "poisson" | "small_files" => {
            let interval = IntervalDist::parse(p, "interval", true)?
                .ok_or_else(|| p.err("interval", "required (mean gap between arrivals)"))?;
            let size = if kind == "small_files" && !p.has("size") {
                // Seed 002 §6.1: 15, 44, 73 or 102 kB files.
                SizeDist::Choice(vec![15_000, 44_000, 73_000, 102_000])
            } else {
                size(p, "size")?
            };
            TcpKind::Poisson { interval, size }
        }
        k if crate::apps::APP_KINDS.contains(&k) => {
            TcpKind::App(crate::apps::parse(exp.base_dir, p, k)?)
        }
        _ => unreachable!("dispatched by `parse`"),
    };
    let allow_overload = if matches!(k, TcpKind::Poisson { .. }) {
        p.bool("allow_overload", false)?
    } else {
        false
    };
    Ok(TcpPlan {
        index,
        flows,
        cfg,
        start,
        stop,
        kind: k,
        allow_overload,
    })
}
