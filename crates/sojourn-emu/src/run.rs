//! One live run: refuse what cannot be honoured, build the namespaces, start the forwarder
//! and the load generator, stop, remove everything, and produce the same outputs as the
//! simulator (summary.json with `"engine": "emulate"`, flows and time series columns).
//!
//! Every exit path removes what the run created: the namespaces belong to a
//! [`netns::Guard`] (dropped on return, error or abort) whose state file lets
//! `sojourn emulate --cleanup` ([`cleanup`]) remove them after a SIGKILL.

use crate::forward::{self, Egress, Hop, LinkPlan as FwdLink, PortPlan, Route};
use crate::loadgen::{Host, LoadResult, Loadgen};
use crate::netns::{self, Mac, Offloads, VethEnd};
use crate::plan::{self, LivePlan, GATEWAY, PREFIX};
use crate::sock::{self, Netns};
use serde_json::{json, Map, Value as J};
use sojourn_core::params::{ConfError, ConfResult};
use sojourn_core::qdisc::DropReason;
use sojourn_core::Time;
use sojourn_experiment::classify::Hook;
use sojourn_experiment::link::rate_model;
use sojourn_experiment::{static_routes, Experiment, LinkPlan, LinkRate};
use sojourn_record::flows::FlowRecord;
use sojourn_record::metrics::{PacketLog, TimeSeries};
use sojourn_record::output::{hist_ms, SCHEMA_VERSION};
use sojourn_record::output::{
    histogram_columns, packet_columns, timeseries_columns, FctFrom, FlowSummary,
};
use sojourn_record::{Chunk, Columns, RunOutput};
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Why a live run did not produce results.
#[derive(Debug)]
pub enum EmuError {
    /// The experiment asks for something the live engine cannot honour (exit 2).
    Refused(ConfError),
    /// Not allowed to create namespaces (exit 2).
    Privilege(String),
    /// The machine failed us (a namespace, device or socket could not be made).
    Failed(String),
    /// Stopped by the progress callback (a signal).
    Aborted,
}

impl std::fmt::Display for EmuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmuError::Refused(e) => write!(f, "{e}"),
            EmuError::Privilege(m) | EmuError::Failed(m) => f.write_str(m),
            EmuError::Aborted => f.write_str("aborted"),
        }
    }
}

/// Progress of a live run (wall seconds since its time zero, and its end).
pub struct Progress {
    pub elapsed_s: f64,
    pub end_s: f64,
}

/// The one-line refusal when the process may not create namespaces.
pub const PRIVILEGE_MESSAGE: &str = "emulate needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to \
create network namespaces; run it as root (e.g. sudo sojourn emulate ...)";

/// The experiment's key path of a link (`topology.bottleneck`, `topology.links[0]`).
fn link_key(l: &LinkPlan) -> String {
    l.qdisc_path
        .strip_suffix(".qdisc")
        .unwrap_or(&l.qdisc_path)
        .to_string()
}

/// Everything the live engine refuses, before anything is created.
pub fn check(exp: &Experiment) -> ConfResult<LivePlan> {
    let available = sock::available_congestion_controls();
    plan::check_transport(exp, &available)?;
    if plan::uses_accecn(exp) {
        plan::check_accecn(exp, sock::kernel_accepts_accecn())?;
    }
    for l in &exp.links {
        let key = link_key(l);
        if l.reorder > 0.0 {
            return Err(ConfError::new(
                format!("{key}.reorder"),
                "cannot be honoured live: the forwarder's delay line never reorders",
            ));
        }
        if l.tx_ring > 0 {
            return Err(ConfError::new(
                format!("{key}.tx_ring"),
                "cannot be honoured live: the forwarder has no device ring model",
            ));
        }
    }
    // A conntrack configuration for the whole forwarder: the nodes must agree.
    let mut ct = None;
    for (n, c) in exp.conntrack.iter().enumerate() {
        if let Some(c) = c {
            match ct {
                None => ct = Some(*c),
                Some(prev) if prev != *c => {
                    return Err(ConfError::new(
                        "classifier",
                        format!(
                            "node {:?} counts conntrack bytes differently from another node; \
                             the live forwarder has one conntrack table",
                            exp.node_names[n]
                        ),
                    ))
                }
                _ => {}
            }
        }
    }
    let p = plan::plan(exp, "sj000000")?;
    // The medium carries MTU frames (plan::gso_buffers keeps GSO off for kind = "wifi").
    debug_assert!(exp.wifi.is_none() || !p.gso_buffers);
    // A host forwards nothing: the forwarder is every router. A path through a node that
    // also ends flows cannot be built (that node is a namespace, not part of the forwarder).
    let routes = static_routes(exp);
    for (i, w) in exp.workloads.iter().enumerate() {
        for (a, b) in w.endpoints() {
            for (x, y) in [(a, b), (b, a)] {
                let mut at = exp.links[routes.next(x, y) as usize].to;
                while at != y {
                    if p.host_of_node[at as usize].is_some() {
                        return Err(ConfError::new(
                            format!("workload[{i}]"),
                            format!(
                                "the path from {:?} to {:?} crosses {:?}, which also ends flows; \
                                 live, a node either ends flows or forwards",
                                exp.node_names[x as usize],
                                exp.node_names[y as usize],
                                exp.node_names[at as usize]
                            ),
                        ));
                    }
                    at = exp.links[routes.next(at, y) as usize].to;
                }
            }
        }
    }
    for (i, c) in exp.classifiers.iter().enumerate() {
        if c.adapt.is_some() {
            return Err(ConfError::new(
                format!("classifier[{i}].adapt"),
                "cannot be honoured live yet: the forwarder's map is fixed (on a kernel map, \
                 `sojourn deploy threshold --watch --policy median` runs the same policy)",
            ));
        }
        for &n in &c.nodes {
            let host = p.host_of_node[n as usize].is_some();
            let ok = match c.hook {
                Hook::Output => host,
                Hook::Forward => !host,
                Hook::Both => true,
            };
            if !ok {
                return Err(ConfError::new(
                    "classifier",
                    format!(
                        "node {:?} is a {} live, so its {:?} hook never sees a packet",
                        exp.node_names[n as usize],
                        if host { "host" } else { "router" },
                        c.hook
                    ),
                ));
            }
        }
    }
    Ok(p)
}

/// The forwarder's plan: one port per host; every link of the experiment; routes that
/// follow the experiment's static routing tables from port to port.
pub fn forwarder_plan(exp: &Experiment, lp: &LivePlan, seed: u64) -> forward::Plan {
    let ports: Vec<PortPlan> = lp
        .hosts
        .iter()
        .map(|h| PortPlan {
            ifname: h.fwd_if.clone(),
            mac: Mac(h.fwd_mac),
            peer_mac: Mac(h.host_mac),
            neighbours: Vec::new(),
        })
        .collect();
    let mut classifier: Vec<Option<Vec<(u64, u32)>>> = vec![None; exp.links.len()];
    for c in &exp.classifiers {
        for &n in &c.nodes {
            for (li, l) in exp.links.iter().enumerate() {
                if l.from == n {
                    classifier[li] = Some(c.map.clone());
                }
            }
        }
    }
    let links: Vec<FwdLink> = exp
        .links
        .iter()
        .enumerate()
        .map(|(li, l)| FwdLink {
            name: l.name.clone(),
            egress: match lp.host_of_node[l.to as usize] {
                Some(h) => Egress::Port(h),
                None => Egress::Route,
            },
            rate: rate_model(&l.rate),
            delay: l.delay,
            delay_schedule: l.delay_schedule.clone(),
            loss: l.loss,
            framing_bytes: l.framing_bytes,
            shaper: l.shaper,
            // Node-named address filters (isp trees) match the live hosts' addresses.
            qdisc: crate::node_filters::live_filters(l.qdisc.clone(), lp),
            qdisc_path: l.qdisc_path.clone(),
            classifier: classifier[li].clone(),
        })
        .collect();
    let table = static_routes(exp);
    let mut routes = Vec::new();
    let families = |d: &crate::plan::HostPlan| {
        let mut v = vec![IpAddr::V4(d.addr)];
        if lp.ipv6 {
            v.push(IpAddr::V6(plan::addr6(d.addr)));
        }
        v
    };
    for (dst, prefix) in lp
        .hosts
        .iter()
        .flat_map(|d| families(d).into_iter().map(move |a| (d, a)))
    {
        let prefix_len = if prefix.is_ipv6() { 128 } else { 32 };
        // From every other host's port.
        for (k, src) in lp.hosts.iter().enumerate() {
            let l = table.next(src.node, dst.node);
            if src.node != dst.node && l != u32::MAX {
                routes.push(Route {
                    ingress: Some(Hop::Port(k)),
                    prefix,
                    prefix_len,
                    link: l as usize,
                });
            }
        }
        // From every link that ends at a router.
        for (li, l) in exp.links.iter().enumerate() {
            if lp.host_of_node[l.to as usize].is_some() {
                continue;
            }
            let next = if l.to == dst.node {
                u32::MAX
            } else {
                table.next(l.to, dst.node)
            };
            if next != u32::MAX {
                routes.push(Route {
                    ingress: Some(Hop::Link(li)),
                    prefix,
                    prefix_len,
                    link: next as usize,
                });
            }
        }
    }
    let mut p = forward::Plan::new(ports, links, routes);
    p.netns = Some(lp.fwd_ns.clone());
    p.conntrack = exp.conntrack.iter().flatten().next().copied();
    p.sample_interval = (!exp.record.interval.is_zero()).then_some(exp.record.interval);
    p.seed = seed;
    // The simulator's measured period: counters and the sojourn histogram start at the
    // end of warm-up (its `reset_stats`) and end at the run's duration.
    p.measure_from = (!exp.warmup.is_zero()).then_some(Time::ZERO + exp.warmup);
    p.measure_until = Some(Time::ZERO + exp.duration);
    let recorded = |l: &LinkPlan| {
        exp.record
            .links
            .as_ref()
            .is_none_or(|r| r.contains(&l.name))
    };
    p.series_links = (0..exp.links.len())
        .filter(|&i| recorded(&exp.links[i]))
        .collect();
    p.packet_log_links = (0..exp.links.len())
        .filter(|&i| exp.record.packet_links.contains(&exp.links[i].name))
        .collect();
    p.packet_sample = exp.record.packet_sample;
    p.keep_samples = false;
    p.wifi = exp.wifi.as_ref().map(|w| forward::WifiMedium {
        config: w.config.clone(),
        stations: w.stations.clone(),
        first_link: w.first_link as usize,
    });
    if lp.gso_buffers {
        // GSO mode (plan::gso_buffers): 64 KiB buffers pass whole. Each pool slot holds
        // one (66 KiB): at most 16,384 of them (~1.1 GB) wait in queues and delay lines
        // at once; beyond that arrivals are dropped as `no_buffer`.
        p.gso = true;
        p.max_buffers = 1 << 14;
    }
    p
}

/// Which load generator flows each forwarder connection carries: `(flow in its original
/// direction, flow in the reply direction)` per connection id, `None` for a connection
/// the load generator did not make. Connections of one 5-tuple (a port reused after
/// TIME_WAIT) are matched in the order both sides made them.
pub fn conn_flows(
    fwd: &[forward::ConnReport],
    load: &[crate::loadgen::ConnKey],
) -> Vec<Option<(u32, u32)>> {
    let mut m = ConnMapper::default();
    m.add_load(load);
    for c in fwd {
        m.add_fwd(c.key);
    }
    m.owners
}

/// [`conn_flows`] while the run proceeds: the load generator's connections and the
/// forwarder's arrive in order (a connection is registered before its first packet, so
/// mapping each forwarder connection as it arrives gives what the whole lists give).
#[derive(Default)]
pub struct ConnMapper {
    load: Vec<crate::loadgen::ConnKey>,
    by_key: std::collections::HashMap<sojourn_core::FlowKey, Vec<usize>>,
    used: std::collections::HashMap<sojourn_core::FlowKey, usize>,
    /// Per forwarder connection id: (flow in its original direction, in the reply one).
    pub owners: Vec<Option<(u32, u32)>>,
}

impl ConnMapper {
    /// The load generator's next connections.
    pub fn add_load(&mut self, new: &[crate::loadgen::ConnKey]) {
        for c in new {
            self.by_key.entry(c.key).or_default().push(self.load.len());
            self.load.push(*c);
        }
    }

    /// The forwarder's next connection (its id is the number of those before).
    pub fn add_fwd(&mut self, key: sojourn_core::FlowKey) {
        // The forwarder's original direction is its first packet's: normally the load
        // generator's, but a connection seen first from the far end is reversed.
        let (key, swapped) = if self.by_key.contains_key(&key) {
            (key, false)
        } else {
            (key.reversed(), true)
        };
        let owner = self.by_key.get(&key).map(|list| {
            let k = self.used.entry(key).or_insert(0);
            let l = &self.load[list[(*k).min(list.len() - 1)]];
            *k += 1;
            if swapped {
                (l.reply_flow, l.flow)
            } else {
                (l.flow, l.reply_flow)
            }
        });
        self.owners.push(owner);
    }

    /// The packet log's flow ids (2 × connection + reply direction, as the forwarder logs
    /// them) replaced by the load generator's flows (`u32::MAX`: a connection it did not
    /// make).
    pub fn map_log(&self, pl: &mut PacketLog) {
        for f in &mut pl.flow {
            let (conn, reply) = ((*f >> 1) as usize, *f & 1 == 1);
            *f = match self.owners.get(conn).copied().flatten() {
                Some((o, r)) => {
                    if reply {
                        r
                    } else {
                        o
                    }
                }
                None => u32::MAX,
            };
        }
    }
}

/// Appends `b`'s rows to `a`.
fn append_log(a: &mut PacketLog, b: PacketLog) {
    a.t_ns.extend(b.t_ns);
    a.link.extend(b.link);
    a.uid.extend(b.uid);
    a.flow.extend(b.flow);
    a.len_bytes.extend(b.len_bytes);
    a.event.extend(b.event);
    a.sojourn_ns.extend(b.sojourn_ns);
    a.ecn.extend(b.ecn);
    a.priority.extend(b.priority);
    a.ct_bytes.extend(b.ct_bytes);
}

fn failed(e: impl std::fmt::Display) -> EmuError {
    EmuError::Failed(e.to_string())
}

/// Creates the run's namespaces and veths under `guard` and configures the hosts.
fn build_network(guard: &mut netns::Guard, lp: &LivePlan) -> Result<(), EmuError> {
    let fw = guard.add_netns("fw").map_err(failed)?;
    debug_assert_eq!(fw, lp.fwd_ns);
    netns::make_forwarder_ns(&fw).map_err(failed)?;
    for (k, h) in lp.hosts.iter().enumerate() {
        let ns = guard.add_netns(&format!("h{k}")).map_err(failed)?;
        debug_assert_eq!(ns, h.ns);
        let mut addrs = vec![(IpAddr::V4(h.addr), 32)];
        if lp.ipv6 {
            // IPv6 hosts send nothing of their own into the links: no router
            // solicitations, no duplicate address detection (addresses are `nodad`); set
            // before the device exists so it inherits them.
            for key in ["router_solicitations", "accept_ra", "dad_transmits"] {
                netns::sysctl(&ns, &format!("net.ipv6.conf.default.{key}"), "0").map_err(failed)?;
            }
            addrs.push((IpAddr::V6(plan::addr6(h.addr)), 128));
        }
        let a = VethEnd {
            ns: ns.clone(),
            ifname: h.host_if.clone(),
            mac: Mac(h.host_mac),
            addrs,
        };
        let b = VethEnd {
            ns: fw.clone(),
            ifname: h.fwd_if.clone(),
            mac: Mac(h.fwd_mac),
            addrs: Vec::new(),
        };
        guard.add_veth(&a, &b, 1500).map_err(failed)?;
        // GSO mode: the hosts keep checksum, scatter-gather and segmentation offloads on,
        // so their TCP's GSO buffers reach the forwarder whole (with their virtio header:
        // partial checksum, GSO type and size) and the forwarder's ports hand buffers on
        // whole. Otherwise MTU frames with complete checksums on both ends (with tx
        // checksumming off the kernel cuts the buffers into segments before the veth);
        // docs/emulate.md "Datapath". GRO stays off (veth has no NAPI without it).
        let o = if lp.gso_buffers {
            Offloads::GSO_BUFFERS
        } else {
            Offloads::ALL_OFF
        };
        netns::set_offloads(&ns, &h.host_if, o).map_err(failed)?;
        netns::set_offloads(&fw, &h.fwd_if, o).map_err(failed)?;
        if !h.gso {
            // `gso = false` (one segment per buffer): Linux's `gso_max_segs 1` on the
            // host's device, as docs/transport.md measures it.
            netns::ip(&[
                "-n",
                &ns,
                "link",
                "set",
                "dev",
                &h.host_if,
                "gso_max_segs",
                "1",
            ])
            .map_err(failed)?;
        }
        if !lp.ipv6 {
            // No IPv6 in the hosts: no router or neighbour solicitations into the links.
            netns::sysctl(&ns, "net.ipv6.conf.all.disable_ipv6", "1").map_err(failed)?;
            netns::sysctl(&ns, "net.ipv6.conf.default.disable_ipv6", "1").map_err(failed)?;
        }
        for (key, v) in &h.sysctls {
            netns::sysctl(&ns, key, v).map_err(failed)?;
        }
        let gw = GATEWAY.to_string();
        netns::neigh_add(&ns, &h.host_if, IpAddr::V4(GATEWAY), Mac(h.fwd_mac)).map_err(failed)?;
        let prefix = format!("{}/{}", PREFIX.0, PREFIX.1);
        let mut args: Vec<String> = [
            "-n", &ns, "route", "replace", &prefix, "via", &gw, "dev", &h.host_if, "onlink",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for o in &h.route_opts {
            args.extend(o.split_whitespace().map(str::to_string));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        netns::ip(&args).map_err(failed)?;
        if lp.ipv6 {
            let gw6 = IpAddr::V6(plan::addr6(GATEWAY));
            netns::neigh_add(&ns, &h.host_if, gw6, Mac(h.fwd_mac)).map_err(failed)?;
            let gw6 = gw6.to_string();
            let prefix6 = format!("{}/{}", plan::PREFIX6.0, plan::PREFIX6.1);
            let mut args: Vec<String> = [
                "-n", &ns, "-6", "route", "replace", &prefix6, "via", &gw6, "dev", &h.host_if,
                "onlink",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            for o in &h.route_opts {
                args.extend(o.split_whitespace().map(str::to_string));
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            netns::ip(&args).map_err(failed)?;
        }
    }
    Ok(())
}

/// Removes what earlier runs killed by SIGKILL left behind; returns the namespaces removed
/// and the errors met.
pub fn cleanup() -> (Vec<String>, Vec<String>) {
    let r = netns::cleanup_stale();
    (r.namespaces, r.errors)
}

/// When [`run_with`] calls its hook: once the namespaces and veths exist, before the
/// forwarder and any traffic start (`Setup`: the kernel engine puts the experiment's qdiscs
/// and nft rules on the hosts' devices, docs/deploy.md), and once the load has ended,
/// before the namespaces are removed (`Collect`: it reads the kernel's counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Setup,
    Collect,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Setup => "setup",
            Stage::Collect => "collect",
        }
    }
}

/// Runs `exp` live with `seed`. `progress` is called about every 100 ms; returning false
/// aborts the run (everything created is removed before this returns).
pub fn run(
    exp: &Experiment,
    seed: u64,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<RunOutput, EmuError> {
    run_with(exp, seed, progress, &mut |_, _| Ok(()))
}

/// [`run`] with a `hook` called at each [`Stage`] with the live plan (hosts, their
/// namespaces and devices). An `Err` from the hook fails the run (everything created is
/// removed).
pub fn run_with(
    exp: &Experiment,
    seed: u64,
    progress: &mut dyn FnMut(&Progress) -> bool,
    hook: &mut dyn FnMut(Stage, &LivePlan) -> Result<(), String>,
) -> Result<RunOutput, EmuError> {
    run_streaming(exp, seed, 0, progress, hook, &mut |_| true)
}

/// [`run_with`], handing the time series out while the run proceeds in chunks of exactly
/// `chunk_rows` rows, as the simulator's `run_streaming` does (the same
/// [`Chunk::TimeSeries`]; the streaming writer is shared): the forwarder's
/// link series and the load generator's flow series are merged in time order as they
/// arrive ([`SeriesMerger`]), so the rows are those [`run`] returns. `sink` returns false
/// to abort. `chunk_rows = 0` hands nothing out.
pub fn run_streaming(
    exp: &Experiment,
    seed: u64,
    chunk_rows: usize,
    progress: &mut dyn FnMut(&Progress) -> bool,
    hook: &mut dyn FnMut(Stage, &LivePlan) -> Result<(), String>,
    sink: &mut dyn FnMut(Chunk) -> bool,
) -> Result<RunOutput, EmuError> {
    check(exp).map_err(EmuError::Refused)?;
    if !sock::have_net_admin() {
        return Err(EmuError::Privilege(PRIVILEGE_MESSAGE.into()));
    }
    let wall0 = std::time::Instant::now();
    let mut guard = netns::Guard::new().map_err(failed)?;
    let lp = plan::plan(exp, guard.run_id()).map_err(EmuError::Refused)?;
    build_network(&mut guard, &lp)?;
    hook(Stage::Setup, &lp).map_err(EmuError::Failed)?;

    let stop = Arc::new(AtomicBool::new(false));
    let mut fplan = forwarder_plan(exp, &lp, seed);
    let outbox = forward::SeriesOutbox::default();
    let packet_outbox = forward::PacketOutbox::default();
    let log_packets = !exp.record.packet_links.is_empty();
    if chunk_rows > 0 {
        fplan.series_outbox = Some(outbox.clone());
        if log_packets {
            fplan.packets_outbox = Some(packet_outbox.clone());
        }
    }
    // The packet log streamed: rows moved by the forwarder, their flows mapped to the load
    // generator's as they arrive, handed out in chunks of `chunk_rows`.
    let mut mapper = ConnMapper::default();
    let mut pending = PacketLog::default();
    let link_name = |l: u32| exp.links[l as usize].name.clone();
    let fwd = forward::spawn(fplan, stop.clone()).map_err(|e| failed(format!("forwarder: {e}")))?;
    let epoch = fwd.epoch_monotonic_ns;

    let mut hosts: Vec<Option<Arc<Host>>> = vec![None; exp.node_names.len()];
    for h in &lp.hosts {
        let ns = Netns::open(&h.ns).map_err(|e| failed(format!("open namespace {}: {e}", h.ns)))?;
        hosts[h.node as usize] = Some(Arc::new(Host {
            node: h.node,
            addr: h.addr,
            ns,
        }));
    }
    let end = Time::ZERO + exp.duration;
    let mut load = match Loadgen::start(exp, seed, &hosts, exp.duration, epoch) {
        Ok(l) => l,
        Err(e) => {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = fwd.join();
            return Err(failed(format!("load generator: {e}")));
        }
    };
    let interval = exp.record.interval;
    let flow_series = exp.record.flow_series && !interval.is_zero();
    let mut merger = SeriesMerger::new(flow_series);
    let mut next_sample = Time::ZERO + interval;
    let mut aborted = false;
    loop {
        let now = load.now();
        // The forwarder stops only when told to, unless it panicked (a discipline the
        // front implements may have raised): end the run now, and `join` says why.
        if now >= end || fwd.is_finished() {
            break;
        }
        if flow_series && now >= next_sample {
            let mut ts = TimeSeries::default();
            load.sample(&mut ts, next_sample, interval);
            merger.add_flows(&ts, next_sample + interval);
            next_sample += interval;
        }
        if chunk_rows > 0 && log_packets {
            let moved =
                std::mem::take(&mut *packet_outbox.lock().unwrap_or_else(|e| e.into_inner()));
            if !moved.is_empty() {
                mapper.add_load(&load.conns_from(mapper_load_len(&mapper)));
            }
            for (mut rows, keys) in moved {
                for k in keys {
                    mapper.add_fwd(k);
                }
                mapper.map_log(&mut rows);
                append_log(&mut pending, rows);
            }
            while pending.len() >= chunk_rows {
                let rows = packet_columns(pending.drain_front(chunk_rows), link_name);
                if !sink(Chunk::Packets(rows)) {
                    aborted = true;
                    break;
                }
            }
            if aborted {
                break;
            }
        }
        if chunk_rows > 0 {
            let moved = std::mem::take(&mut *outbox.lock().unwrap_or_else(|e| e.into_inner()));
            for rows in &moved {
                merger.add_links(rows);
            }
            merger.advance();
            while merger.out.len() >= chunk_rows {
                let (rows, names) = timeseries_columns(merger.out.drain_front(chunk_rows));
                let names = std::sync::Arc::new(names);
                if !sink(Chunk::TimeSeries { rows, names }) {
                    aborted = true;
                    break;
                }
            }
            if aborted {
                break;
            }
        }
        if !progress(&Progress {
            elapsed_s: now.as_secs_f64(),
            end_s: end.as_secs_f64(),
        }) {
            aborted = true;
            break;
        }
        let wake = if exp.record.flow_series && !interval.is_zero() {
            next_sample.min(end)
        } else {
            end
        };
        let left = wake.0.saturating_sub(load.now().0).min(100_000_000);
        std::thread::sleep(std::time::Duration::from_nanos(left.max(1_000_000)));
    }
    let result = load.finish(std::time::Duration::from_secs(5));
    // Application samples the periodic sampling did not hand out (all of them without
    // `[record] flows`), merged in time order with the rest.
    merger.add_flows(&result.app_series, Time(u64::MAX));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let report = fwd.join().map_err(failed)?;
    if !aborted {
        hook(Stage::Collect, &lp).map_err(EmuError::Failed)?;
    }
    guard.cleanup().map_err(failed)?;
    if aborted {
        return Err(EmuError::Aborted);
    }
    let wall = wall0.elapsed().as_secs_f64();
    // The forwarder's last rows: moved before it stopped, then those it held.
    for rows in std::mem::take(&mut *outbox.lock().unwrap_or_else(|e| e.into_inner())) {
        merger.add_links(&rows);
    }
    merger.add_links(&report.series);
    // The packet log's rows not handed out: in streaming mode those moved and not yet
    // handed out, then the forwarder's last ones, mapped by the same mapper; otherwise
    // the whole log, mapped at the end.
    let mut report = report;
    let packets = if chunk_rows > 0 && log_packets {
        mapper.add_load(&result.conns[mapper_load_len(&mapper).min(result.conns.len())..]);
        for (mut rows, keys) in
            std::mem::take(&mut *packet_outbox.lock().unwrap_or_else(|e| e.into_inner()))
        {
            for k in keys {
                mapper.add_fwd(k);
            }
            mapper.map_log(&mut rows);
            append_log(&mut pending, rows);
        }
        for c in &report.conns[mapper.owners.len().min(report.conns.len())..] {
            mapper.add_fwd(c.key);
        }
        let mut tail = std::mem::take(&mut report.packets);
        mapper.map_log(&mut tail);
        append_log(&mut pending, tail);
        Some(pending)
    } else {
        None
    };
    Ok(collect(
        exp,
        seed,
        &lp,
        &report,
        result,
        merger.finish(),
        wall,
        packets,
    ))
}

/// How many load generator connections a mapper has seen.
fn mapper_load_len(m: &ConnMapper) -> usize {
    m.load.len()
}

/// Merges the load generator's flow series and the forwarder's link series in time order
/// while they arrive, as [`TimeSeries::merge`] merges the whole tables (on equal times the
/// flows' rows first), so the rows and series ids are the same. Each source's rows come in
/// non-decreasing time; a row is emitted once neither source can still produce an earlier
/// one: the flows' next sample time is known, the forwarder's rows are bounded by the
/// newest it has sent.
pub struct SeriesMerger {
    /// The merged rows not yet handed out.
    pub out: TimeSeries,
    flows: std::collections::VecDeque<(u64, String, String, f64)>,
    links: std::collections::VecDeque<(u64, String, String, f64)>,
    /// No flow row will be earlier than this (ns); `u64::MAX` once none will come.
    flows_bound: u64,
    /// No link row will be earlier than this (the newest seen).
    links_bound: u64,
}

impl SeriesMerger {
    /// `flow_series`: the load generator samples flows (else only links have rows).
    pub fn new(flow_series: bool) -> SeriesMerger {
        SeriesMerger {
            out: TimeSeries::default(),
            flows: Default::default(),
            links: Default::default(),
            flows_bound: if flow_series { 0 } else { u64::MAX },
            links_bound: 0,
        }
    }

    fn rows(ts: &TimeSeries) -> impl Iterator<Item = (u64, String, String, f64)> + '_ {
        (0..ts.len()).map(move |k| {
            let (e, m) = &ts.names[ts.series[k] as usize];
            (ts.t_ns[k], e.clone(), m.clone(), ts.value[k])
        })
    }

    /// Flow rows of one sample; `next` is the time of the next sample (no later row is
    /// earlier).
    pub fn add_flows(&mut self, ts: &TimeSeries, next: Time) {
        self.flows.extend(Self::rows(ts));
        self.flows_bound = self.flows_bound.max(next.as_ns());
    }

    /// Link rows from the forwarder, in its order.
    pub fn add_links(&mut self, ts: &TimeSeries) {
        self.links.extend(Self::rows(ts));
        if let Some(&(t, ..)) = self.links.back() {
            self.links_bound = self.links_bound.max(t);
        }
    }

    /// Moves every row that can no longer be preceded by another into `out`.
    pub fn advance(&mut self) {
        self.emit(self.flows_bound.min(self.links_bound));
    }

    /// Everything, merged (the sources have ended).
    pub fn finish(mut self) -> TimeSeries {
        self.emit(u64::MAX);
        self.out
    }

    fn emit(&mut self, limit: u64) {
        loop {
            let f = self.flows.front().map(|r| r.0).filter(|&t| t < limit);
            let l = self.links.front().map(|r| r.0).filter(|&t| t < limit);
            // A head at or past `limit` (or none: later rows are past it) comes after the
            // other, earlier head.
            let from_flows = match (f, l) {
                (Some(a), Some(b)) => a <= b,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let r = if from_flows {
                self.flows.pop_front()
            } else {
                self.links.pop_front()
            };
            let Some((t, e, m, v)) = r else { break };
            self.out.push(Time(t), &e, &m, v);
        }
    }
}

/// The outputs of a live run, in every engine's schema (docs/output-schema.md);
/// `mapped_packets`: the packet log's rows not streamed, flows already mapped (else
/// `rep.packets` is mapped here).
#[allow(clippy::too_many_arguments)]
fn collect(
    exp: &Experiment,
    seed: u64,
    lp: &LivePlan,
    rep: &forward::ForwarderReport,
    load: LoadResult,
    ts: TimeSeries,
    wall_s: f64,
    mapped_packets: Option<PacketLog>,
) -> RunOutput {
    // The simulator's period: flows and links end at the run's duration (the forwarder
    // runs on while the load generator stops; its measured counters end at `duration`).
    let end = Time(rep.duration_ns.max(1)).min(Time::ZERO + exp.duration);
    let warm = Time::ZERO + exp.warmup;
    let fct_from = exp.record.fct_from;
    let recorded: Option<&Vec<String>> = exp.record.links.as_ref();
    // Time series: the links' (sampled in the forwarder by the builder both engines share) and
    // the flows' (the load generator's TCP_INFO samples), merged (`SeriesMerger`).

    let mut links = Map::new();
    for (li, l) in exp.links.iter().enumerate() {
        if recorded.is_some_and(|r| !r.contains(&l.name)) {
            continue;
        }
        let Some(r) = rep.links.get(li) else { continue };
        let m = &r.measured;
        let (since, until) = (Time(m.since_ns), Time(m.until_ns.max(m.since_ns)));
        let (bytes, pkts, segs) = (m.delivered_bytes, m.delivered_pkts, m.delivered_segs);
        let period = (until - since).as_secs_f64();
        let capacity = rate_model(&l.rate).capacity_bits_between(since, until);
        // Framing is per wire packet: a GSO buffer's every segment.
        let wire_bits = (bytes + segs * l.framing_bytes as u64) as f64 * 8.0;
        let mut drops = Map::new();
        for reason in DropReason::ALL {
            let n = m.drops[reason as usize];
            if n > 0 {
                drops.insert(reason.name().to_string(), json!(n));
            }
        }
        links.insert(
            l.name.clone(),
            json!({
                "from": exp.node_names[l.from as usize],
                "to": exp.node_names[l.to as usize],
                "rate_bps": match &l.rate { LinkRate::Constant(r) => json!(r), _ => J::Null },
                "delay_ms": l.delay.as_millis_f64(),
                "qdisc": l.qdisc_desc,
                "tx_packets": pkts,
                "tx_segments": segs,
                "tx_bytes": bytes,
                "throughput_bps": if period > 0.0 { bytes as f64 * 8.0 / period } else { 0.0 },
                "utilisation": if capacity > 0.0 { wire_bits / capacity } else { 0.0 },
                "drops": drops,
                "drops_total": m.drops.iter().sum::<u64>(),
                "ecn_marks": m.ecn_marks,
                "sojourn_ms": hist_ms(&r.sojourn_ns),
                "queue_packets_at_end": r.queued_at_end,
                "release_late_us": {
                    "mean": if r.release_late_ns.is_empty() { J::Null } else { json!(r.release_late_ns.mean() * 1e-3) },
                    "p99": r.release_late_ns.quantile(0.99).map(|x| x * 1e-3),
                },
            }),
        );
    }

    // Per-flow drops: the forwarder counts them per connection (5-tuple), the load
    // generator knows which flows each connection carries.
    let owners = conn_flows(&rep.conns, &load.conns);
    let mut flow_recs = load.flows.clone();
    for (c, o) in rep.conns.iter().zip(&owners) {
        if let Some((orig, reply)) = *o {
            if let Some(r) = flow_recs.get_mut(orig as usize) {
                r.pkts_dropped += c.drops_original;
            }
            if let Some(r) = flow_recs.get_mut(reply as usize) {
                r.pkts_dropped += c.drops_reply;
            }
        }
    }
    let load = LoadResult {
        flows: flow_recs,
        ..load
    };
    // summary.json's flows block, by the accumulator both engines share (flows started
    // after warm-up).
    let mut flow_summary = FlowSummary::default();
    for r in &load.flows {
        flow_summary.add(r, warm, end, fct_from);
    }
    let rx: u64 = rep.ports.iter().map(|p| p.rx_frames).sum();
    let tx: u64 = rep.ports.iter().map(|p| p.tx_frames + p.tx_errors).sum();
    let d = &rep.ingress_drops;
    let dropped: u64 = d.not_ip
        + d.unroutable
        + d.oversize
        + d.no_buffer
        + rep.links.iter().map(|l| l.dropped()).sum::<u64>();
    let inside: u64 = rep.links.iter().map(|l| l.queued_at_end).sum::<u64>() + rep.unsent_at_end;
    let summary = json!({
        "schema": "sojourn.summary",
        "schema_version": SCHEMA_VERSION,
        "sojourn_version": env!("CARGO_PKG_VERSION"),
        "engine": "emulate",
        "experiment": exp.name,
        "description": exp.description,
        "seed": seed,
        "duration_s": exp.duration.as_secs_f64(),
        "warmup_s": exp.warmup.as_secs_f64(),
        "events": rx,
        "accounting": {
            "created": rx,
            "delivered": tx,
            "dropped": dropped,
            "in_network": inside,
            "conserved": rep.check_conservation().is_ok(),
        },
        "links": links,
        "flows": flow_summary.json(fct_from),
        "emulate": {
            "run_id": lp.run_id,
            "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default(),
            "hosts": lp.hosts.iter().map(|h| {
                let mut j = json!({"node": h.name, "addr": h.addr.to_string()});
                if lp.ipv6 {
                    j["addr6"] = json!(plan::addr6(h.addr).to_string());
                }
                j
            }).collect::<Vec<_>>(),
            "wall_seconds": wall_s,
            "forwarder_cpu_seconds": rep.cpu_ns as f64 * 1e-9,
            "forwarder_error": rep.error,
            "ecn_handshakes": {
                "syn": handshake_counts(&rep.ecn_handshakes.syn),
                "syn_ack": handshake_counts(&rep.ecn_handshakes.syn_ack),
            },
            "gso_buffers": lp.gso_buffers,
            "gso_note": lp.gso_note,
            "rx_gso_buffers": rep.ports.iter().map(|p| p.rx_gso_buffers).sum::<u64>(),
            "ingress_drops": {"not_ip": d.not_ip, "unroutable": d.unroutable, "oversize": d.oversize, "no_buffer": d.no_buffer},
            "rx_kernel_drops": rep.ports.iter().map(|p| p.rx_kernel_drops).sum::<u64>(),
            "warning": forward::limit_warning(&limit_evidence(rep, &load.behind)),
            "skipped_flows": load.skipped_flows,
            "socket_errors": load.error_count,
            "first_socket_errors": load.errors,
        },
    });

    let mut summary = summary;
    if let Some(apps) = &load.apps {
        summary["apps"] = apps.clone();
    }

    // The packet log with the load generator's flow ids (u32::MAX: a connection it did
    // not make); the forwarder logs 2 × connection + reply direction.
    let packets = (!exp.record.packet_links.is_empty()).then(|| {
        let pl = match mapped_packets {
            Some(pl) => pl,
            None => {
                let mut pl = rep.packets.clone();
                let m = ConnMapper {
                    owners: owners.clone(),
                    ..ConnMapper::default()
                };
                m.map_log(&mut pl);
                pl
            }
        };
        packet_columns(pl, |l| exp.links[l as usize].name.clone())
    });
    let (timeseries, series_names) = timeseries_columns(ts);
    RunOutput {
        probes: load.probes,
        summary,
        flows: flow_columns(exp, &load.flows, end, fct_from),
        timeseries,
        series_names,
        packets,
        histograms: histogram_columns(rep.links.iter().map(|l| (l.name.as_str(), &l.sojourn_ns))),
    }
}

/// What shows that a run exceeded the live engine's limit on this machine: the
/// forwarder's evidence ([`forward::ForwarderReport::behind`]) and the load generator's UDP sources
/// that could not send at their rates.
fn limit_evidence(rep: &forward::ForwarderReport, behind: &[(u32, u64, u64)]) -> Vec<String> {
    let mut why = rep.behind();
    for &(flow, sent, due) in behind {
        why.push(format!(
            "the load generator's UDP source of flow {flow} offered {sent} of the {due} \
             datagrams its rate asks for"
        ));
    }
    why
}

/// `{"none": n, "ecn": n, "accecn": n, "other": n}` of [`forward::EcnHandshakes`].
fn handshake_counts(c: &[u64; 4]) -> J {
    json!({"none": c[0], "ecn": c[1], "accecn": c[2], "other": c[3]})
}

/// flows.parquet columns, by the builder both engines share.
pub fn flow_columns(exp: &Experiment, r: &[FlowRecord], end: Time, fct_from: FctFrom) -> Columns {
    sojourn_record::output::flow_columns(r, |n| exp.node_names[n as usize].clone(), end, fct_from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forward::ConnReport;
    use crate::loadgen::ConnKey;
    use sojourn_core::{Addr, FlowKey};

    /// Rows of a time series as (t, entity, metric, value, series id).
    fn rows(ts: &TimeSeries) -> Vec<(u64, String, String, u64, u32)> {
        (0..ts.len())
            .map(|k| {
                let (e, m) = &ts.names[ts.series[k] as usize];
                (
                    ts.t_ns[k],
                    e.clone(),
                    m.clone(),
                    ts.value[k].to_bits(),
                    ts.series[k],
                )
            })
            .collect()
    }

    /// The merge while the rows arrive gives the rows and series ids of merging the whole
    /// tables at the end (`TimeSeries::merge`, on equal times the flows' rows first): flow
    /// samples every 10 ms, link rows every 5 ms (two links), moved by the forwarder in
    /// chunks that split a sample time, drained at arbitrary points.
    #[test]
    fn streamed_merge_equals_the_merge_of_the_whole_series() {
        let ms = |n: u64| Time(n * 1_000_000);
        let mut flows_whole = TimeSeries::default();
        let mut links_whole = TimeSeries::default();
        let mut merger = SeriesMerger::new(true);
        let mut out = Vec::new();
        let mut link_chunk = TimeSeries::default();
        for step in 1..=40u64 {
            // The forwarder samples at 5 ms; it moves 3 rows at a time (mid-sample).
            for l in ["bottleneck", "reverse"] {
                let v = (step * 7 + l.len() as u64) as f64;
                links_whole.push(ms(5 * step), l, "queue_packets", v);
                link_chunk.push(ms(5 * step), l, "queue_packets", v);
                if link_chunk.len() == 3 {
                    merger.add_links(&std::mem::take(&mut link_chunk));
                }
            }
            // The load generator samples at 10 ms; a new flow appears at 100 ms.
            if step % 2 == 0 {
                let mut ts = TimeSeries::default();
                for f in 0..(1 + u64::from(step >= 20)) {
                    let e = format!("flow{f}");
                    ts.push(ms(5 * step), &e, "cwnd_bytes", (step * 100 + f) as f64);
                    flows_whole.push(ms(5 * step), &e, "cwnd_bytes", (step * 100 + f) as f64);
                }
                merger.add_flows(&ts, ms(5 * step + 10));
            }
            merger.advance();
            if step % 3 == 0 {
                let n = merger.out.len() / 2;
                out.extend(rows(&merger.out.drain_front(n)));
            }
        }
        merger.add_links(&link_chunk);
        out.extend(rows(&merger.finish()));
        let mut whole = flows_whole.clone();
        whole.merge(&links_whole);
        assert_eq!(out.len(), 40 * 2 + 20 + 11); // links, flow0, flow1 from 100 ms
        assert_eq!(out, rows(&whole));
    }

    fn key(port: u16) -> FlowKey {
        FlowKey {
            src_addr: Addr::v4(1),
            dst_addr: Addr::v4(2),
            src_port: port,
            dst_port: 5201,
            proto: 6,
        }
    }

    fn fwd(k: FlowKey) -> ConnReport {
        ConnReport {
            key: k,
            first_ns: 0,
            drops_original: 0,
            drops_reply: 0,
        }
    }

    #[test]
    fn connections_map_to_the_flows_that_made_them() {
        let load = [
            ConnKey {
                key: key(1),
                flow: 0,
                reply_flow: 0,
            },
            // A request/response transaction: the response's flow is the reply direction.
            ConnKey {
                key: key(2),
                flow: 1,
                reply_flow: 2,
            },
            // Port 1 reused later by flow 3.
            ConnKey {
                key: key(1),
                flow: 3,
                reply_flow: 3,
            },
        ];
        let f = [
            fwd(key(1)),
            fwd(key(2).reversed()), // seen first from the server's side
            fwd(key(1)),
            fwd(key(9)), // not the load generator's
        ];
        assert_eq!(
            conn_flows(&f, &load),
            vec![Some((0, 0)), Some((2, 1)), Some((3, 3)), None]
        );
        // Fed as a streamed run sees them (each connection registered by the load
        // generator before the forwarder sees its first packet), the mapping is the same,
        // and so is a packet log's flow column (2 × connection + reply direction).
        let mut m = ConnMapper::default();
        m.add_load(&load[..1]);
        m.add_fwd(f[0].key);
        m.add_load(&load[1..2]);
        m.add_fwd(f[1].key);
        m.add_load(&load[2..]);
        m.add_fwd(f[2].key);
        m.add_fwd(f[3].key);
        assert_eq!(m.owners, conn_flows(&f, &load));
        let mut pl = PacketLog {
            flow: vec![0, 2, 3, 4, 7, 6],
            ..PacketLog::default()
        };
        m.map_log(&mut pl);
        assert_eq!(pl.flow, vec![0, 2, 1, 3, u32::MAX, u32::MAX]);
    }
}
