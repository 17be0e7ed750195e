//! Experiment files: parsing and validation into an [`Experiment`].
//!
//! Every key is read through [`Params`], so unknown keys are rejected with their path, and
//! every qdisc spec is built once here (a dry run), so a bad discipline parameter is
//! reported before the run starts. docs/experiment-files.md documents the format.

use crate::link::{load_trace, LinkRate, TraceSpec};
pub use crate::routing::{Routes, NO_ROUTE};
use crate::transport::{
    TcpConfig, ETHERNET_HEADER_BYTES, IP_TCP_HEADER_BYTES, SYN_FRAME_BYTES, TIMESTAMP_OPTION_BYTES,
};
use crate::workload::{TcpKind, TcpPlan, WorkloadPlan};
use sojourn_core::params::{join, ConfError, ConfResult, Params, Table, Value};
use sojourn_core::qdisc::{BuildCtx, QdiscSpec};
use sojourn_core::units;
use sojourn_core::{Duration, Time};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A link (one direction) to build.
#[derive(Clone, Debug)]
pub struct LinkPlan {
    pub name: String,
    pub from: u32,
    pub to: u32,
    pub rate: LinkRate,
    pub delay: Duration,
    pub delay_schedule: Vec<(Time, Duration)>,
    /// The egress discipline, parsed and validated once; engines build it with
    /// `qdisc.build(&ctx)` (infallible), deploy writes it with `qdisc.dump()`.
    pub qdisc: QdiscSpec,
    /// The spec as written in the file (`codel(target=5ms)`), the `qdisc` label in outputs.
    pub qdisc_desc: String,
    /// The spec's key path (`topology.bottleneck.qdisc`), for an engine's refusals.
    pub qdisc_path: String,
    /// Random loss probability per packet.
    pub loss: f64,
    /// Bytes added to every frame on the wire (`framing_overhead`).
    pub framing_bytes: u32,
    /// Reordering: probability that a packet is held back by the extra delay.
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Device transmit ring size in packets (0 = none).
    pub tx_ring: u32,
    /// The rate is a token-bucket shaper on a fast device (tc htb/tbf on a veth).
    pub shaper: bool,
}

/// What to record.
#[derive(Clone, Debug)]
pub struct RecordPlan {
    /// Time-series sampling interval (zero = no time series).
    pub interval: Duration,
    /// Links sampled in time series and reported in the summary (`None` = all).
    pub links: Option<Vec<String>>,
    /// Per-flow time series (goodput, cwnd, …).
    pub flow_series: bool,
    /// Links whose packets are logged to packets.parquet.
    pub packet_links: Vec<String>,
    /// Fraction of packets logged (deterministic by packet uid).
    pub packet_sample: f64,
    /// How flow completion time is measured.
    pub fct_from: FctFrom,
}

/// How flow completion time is measured (`[record] fct`, docs/transport.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FctFrom {
    /// From the application's connect (flow start) to the last byte delivered.
    Connect,
    /// From the first payload byte written after the connection is set up (seed 000).
    FirstByte,
}

/// A validated experiment.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub name: String,
    pub description: String,
    pub seed: u64,
    /// Threads one run may use (`threads = N` or `"auto"`, then 0: every core); the
    /// simulator cuts the run when it can (sojourn-sim `parallel.rs`), else runs it on one.
    pub threads: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub repeats: u32,
    pub node_names: Vec<String>,
    pub links: Vec<LinkPlan>,
    /// Explicit routes: (at node, to node, via link).
    pub routes: Vec<(u32, u32, u32)>,
    pub workloads: Vec<WorkloadPlan>,
    /// `[transport]` defaults for TCP workloads (docs/transport.md).
    pub transport: TcpConfig,
    pub record: RecordPlan,
    /// For dumbbells: sender and receiver node of each pair.
    pub pairs: Vec<(u32, u32)>,
    /// The subscriber tree of a `kind = "isp"` topology (docs/isp.md).
    pub isp: Option<crate::isp::IspPlan>,
    /// `[[classifier]]` rules (conntrack byte count -> priority).
    pub classifiers: Vec<crate::classify::ClassifierPlan>,
    /// `kind = "wifi"`: the shared medium (docs/wifi.md); `None` otherwise.
    pub wifi: Option<crate::wifi::WifiPlan>,
    /// Per node: conntrack enabled (by a classifier or an `age` qdisc on an egress link).
    pub conntrack: Vec<Option<crate::classify::ConntrackPlan>>,
    /// The directory relative file names (traces, CDF files) are read from.
    pub base_dir: PathBuf,
    /// Node and link ids by name, filled as they are added (name checks and look-ups in
    /// O(log n): a linear scan per added link made a 10,000-pair dumbbell quadratic).
    pub(crate) node_index: BTreeMap<String, u32>,
    pub(crate) link_index: BTreeMap<String, u32>,
}

impl Experiment {
    /// Whether any link runs a Python discipline, children included (the front's
    /// resolver builds them; the simulator keeps the GIL for them and one thread).
    pub fn any_external_qdisc(&self) -> bool {
        fn tree(s: &QdiscSpec) -> bool {
            matches!(s, QdiscSpec::External(_)) || s.children().into_iter().any(tree)
        }
        self.links.iter().any(|l| tree(&l.qdisc))
    }

    /// The id of the node named `name`.
    pub fn node(&self, name: &str) -> Option<u32> {
        self.node_index.get(name).copied()
    }
    /// The id of the link named `name`.
    pub fn link(&self, name: &str) -> Option<u32> {
        self.link_index.get(name).copied()
    }
}

/// Memory a run needs, by what it holds for its whole length (docs/limits.md has the
/// measurements): the engine and Python front (peak RSS of `sojourn run` for a 0.1-s run
/// of the bad-input catalogue's base file: 189 MB, 2026-11-29; `sojourn validate` alone
/// 176 MB; it was 117 MB before the front grew), per node and link, per flow
/// (UDP: 2.2–2.3 KB of peak RSS measured with 400,000 and 1,000,000 CBR flows, 2026-11-29:
/// its two endpoint slots of 872 B each, inline since sockets live in the slots, were
/// 0.8 KB with boxed sockets; budgeted at 4 KiB because the slot vector grows by doubling
/// and the address space holds up to twice the slots, 1,500,000 CBR flows aborted in
/// "memory allocation of 3657433088 bytes failed", 2²² slots of 872 B, under a 4 GiB cap
/// while 1 KiB was counted; TCP: 2.2 KB measured at set-up, budgeted at 16 KiB for the
/// connection state while data flows). A link measured ~2.5 KB at set-up
/// (the engine's link 1.5 KB, its plan twice) plus the packets it holds; 16 KiB allows ~60
/// queued or propagating packets on every link at once (a 10,000-pair dumbbell: 40,002
/// links, 0.66 GB budgeted).
pub const BASE_BYTES: f64 = 192.0 * 1024.0 * 1024.0;
pub const BYTES_PER_NODE: f64 = 4.0 * 1024.0;
pub const BYTES_PER_LINK: f64 = 16.0 * 1024.0;
pub const BYTES_PER_UDP_FLOW: f64 = 4.0 * 1024.0;
pub const BYTES_PER_TCP_FLOW: f64 = 16.0 * 1024.0;

/// The estimate of [`BASE_BYTES`] + per node, link and flow, for a run that streams its
/// time series and packet log to disk (`sojourn run`, sweeps, `sojourn.run(out=…)`): the
/// recording then costs at most [`STREAM_BUFFER_BYTES`], whatever the duration.
pub fn memory_estimate(exp: &Experiment) -> (f64, usize, usize) {
    let (mut udp, mut tcp) = (0usize, 0usize);
    let (mut transfers, mut lingering, mut probes) = (0.0, 0.0, 0.0);
    for w in &exp.workloads {
        match w {
            WorkloadPlan::Udp(u) => udp += u.flows.len(),
            WorkloadPlan::Probe(q) => {
                udp += q.flows.len();
                probes +=
                    q.flows.len() as f64 * exp.duration.as_secs_f64() / q.interval.as_secs_f64();
            }
            WorkloadPlan::Tcp(t) => {
                tcp += t.flows.len();
                transfers += transfers_of(exp, t).0;
                lingering += held_of(exp, t);
            }
        }
    }
    let records = recording_bytes(exp, udp + tcp);
    let bytes = BASE_BYTES
        + BYTES_PER_NODE * exp.node_names.len() as f64
        + BYTES_PER_LINK * exp.links.len() as f64
        + BYTES_PER_UDP_FLOW * udp as f64
        + BYTES_PER_TCP_FLOW * tcp as f64
        + routing_bytes(exp)
        + records.min(STREAM_BUFFER_BYTES)
        + BYTES_PER_FINISHED_TRANSFER * transfers
        + BYTES_PER_CLOSING_TRANSFER * lingering
        + BYTES_PER_PROBE * probes
        + exp.wifi.as_ref().map_or(0.0, crate::wifi::memory_bytes);
    (bytes, udp, tcp)
}

/// A probe or isochronous datagram, held to the end of the run (probe.rs in the simulator):
/// its 24-B record, budgeted twice for the vector's growth, and its probes.parquet row built
/// at the end (nine columns, the mode a short string: ~90 B); docs/limits.md.
pub const BYTES_PER_PROBE: f64 = 160.0;
/// What a streamed run keeps of each finished transfer: its FCT and goodput for
/// summary.json's exact percentiles (2 × 8 B, budgeted twice for the vectors' growth); the
/// record itself goes to `flows.parquet` (docs/limits.md).
pub const BYTES_PER_FINISHED_TRANSFER: f64 = 32.0;
/// A transfer's connection is held from its start until its receiver's 60 s linger after
/// the FIN ends (Linux's TIME_WAIT length) and its record is handed out: measured ~2.5 KB
/// each (2,000 transfers/s: 441 MB at 80 s, ~125,000 held), budgeted at 4 KiB.
pub const BYTES_PER_CLOSING_TRANSFER: f64 = 4.0 * 1024.0;
/// Seconds a transfer's connection stays after its data: the receiver's linger (60 s)
/// plus a second for the transfer itself.
pub const TCP_HELD_AFTER_FIN_S: f64 = 61.0;
/// A transfer held to the end of a run that returns its tables in memory (`sojourn.run()`
/// without `out`): its record, its `flows.parquet` row being built and its connection while
/// it lingers; measured ~1.9 KB (160,000 transfers: 440 MB, 40,000: 208 MB).
pub const BYTES_PER_TRANSFER_IN_MEMORY: f64 = 2.5 * 1024.0;

/// Connections a TCP workload holds at once at most: its arrival rate × 61 s (each
/// transfer's connection stays until its receiver's 60 s linger ends), at most all its
/// transfers; an overloaded open loop allowed with `allow_overload = true` may hold every
/// arrival to the end (its backlog is bounded only by the arrivals).
pub fn held_of(exp: &Experiment, t: &TcpPlan) -> f64 {
    let (n, rate) = transfers_of(exp, t);
    if t.allow_overload {
        n
    } else {
        (rate * TCP_HELD_AFTER_FIN_S).min(n)
    }
}

/// Connections all TCP workloads hold at once at most ([`held_of`]).
pub fn held_connections(exp: &Experiment) -> f64 {
    exp.workloads
        .iter()
        .map(|w| match w {
            WorkloadPlan::Tcp(t) => held_of(exp, t),
            WorkloadPlan::Udp(_) | WorkloadPlan::Probe(_) => 0.0,
        })
        .sum()
}

/// Transfers all TCP workloads open over the run ([`transfers_of`]).
pub fn transfer_count(exp: &Experiment) -> f64 {
    exp.workloads
        .iter()
        .map(|w| match w {
            WorkloadPlan::Tcp(t) => transfers_of(exp, t).0,
            WorkloadPlan::Udp(_) | WorkloadPlan::Probe(_) => 0.0,
        })
        .sum()
}

/// Transfers a TCP workload opens over its active time beyond its one flow per entry, and
/// their rate per second: open loops (`poisson`, `small_files`) at the mean arrival rate;
/// closed loops (`actors`, `request_response` without a count) at most one per mean think
/// time (at least 1 ms: a transfer takes a round trip), so an upper bound.
pub fn transfers_of(exp: &Experiment, t: &TcpPlan) -> (f64, f64) {
    let stop = t.stop.unwrap_or(exp.duration).min(exp.duration);
    let window = if stop > t.start {
        (stop - t.start).as_secs_f64()
    } else {
        0.0
    };
    let entries = t.flows.len() as f64;
    // Closed loops: a transfer takes at least about a millisecond (a round trip).
    let per_s = |gap: Duration| 1.0 / gap.as_secs_f64().max(1e-3);
    let rate = entries
        * match &t.kind {
            TcpKind::Poisson { interval, .. } => 1.0 / interval.mean().as_secs_f64().max(1e-9),
            TcpKind::Actors { think, .. } => per_s(think.mean()),
            TcpKind::RequestResponse { think, count, .. } => {
                let r = per_s(think.mean());
                if *count > 0 {
                    r.min(*count as f64 / window.max(1e-9))
                } else {
                    r
                }
            }
            TcpKind::Bulk | TcpKind::Transfer { .. } | TcpKind::Thin { .. } => 0.0,
            TcpKind::App(a) => a.connections_per_s(),
        };
    (rate * window, rate)
}

/// The routing table: 4 bytes per pair of core nodes (nodes with more than one neighbour,
/// [`crate::routing`]); hosts on one router cost only their per-node entries.
fn routing_bytes(exp: &Experiment) -> f64 {
    let links: Vec<(u32, u32)> = exp.links.iter().map(|l| (l.from, l.to)).collect();
    let c = crate::routing::core_count(exp.node_names.len(), &links) as f64;
    4.0 * c * c
}

/// What a streamed run holds of its recording at most: the engine hands rows out in
/// chunks of 64 Ki rows, the writer keeps up to one Parquet row group (1 Mi rows: ~20 MB of
/// time series, ~50 MB of packet log) per table plus the chunk being converted; measured
/// peak RSS stays within ~60 MB above a run without recording (docs/limits.md).
pub const STREAM_BUFFER_BYTES: f64 = 192.0 * 1024.0 * 1024.0;

/// Time-series rows and logged packets held in memory by a run that does NOT stream
/// (`sojourn.run()` without `out`, which returns the tables): 48 B per time-series row
/// (measured 44 B: 1.2 M rows took 53 MB), about 9 series per recorded link and 8 per flow
/// with `[record] flows`; 370 B per logged packet (measured 340 B), packets counted at the
/// link's rate with a 1000-B mean size.
pub const BYTES_PER_SERIES_ROW: f64 = 48.0;
pub const BYTES_PER_LOGGED_PACKET: f64 = 370.0;

fn recording_bytes(exp: &Experiment, flows: usize) -> f64 {
    let (rows, packets) = recorded_rows(exp, flows);
    rows * BYTES_PER_SERIES_ROW + packets * BYTES_PER_LOGGED_PACKET
}

/// What a run records over its duration: time-series rows (about 9 series per recorded
/// link and 8 per flow with `[record] flows`, one row per series per interval) and logged
/// packets (at each logged link's rate with a 1000-B mean size, times its sampling).
pub fn recorded_rows(exp: &Experiment, flows: usize) -> (f64, f64) {
    let secs = exp.duration.as_secs_f64();
    let (mut rows, mut packets) = (0.0, 0.0);
    if !exp.record.interval.is_zero() {
        let samples = secs / exp.record.interval.as_secs_f64();
        let links = exp
            .record
            .links
            .as_ref()
            .map_or(exp.links.len(), |l| l.len());
        let mut series = 9.0 * links as f64;
        if exp.record.flow_series {
            series += 8.0 * flows as f64;
        }
        rows += samples * series;
    }
    for name in &exp.record.packet_links {
        if let Some(l) = exp.links.iter().find(|l| &l.name == name) {
            let pps = l.rate.initial_bps().max(1) as f64 / 8.0 / 1000.0;
            packets += pps * secs * exp.record.packet_sample;
        }
    }
    (rows, packets)
}

/// Refuses, with the estimate, a run that would hold its whole time series and packet log
/// in memory (the Python API's `sojourn.run()` without `out`, which returns them as
/// tables) when they do not fit; a streamed run never needs this.
pub fn check_in_memory(exp: &Experiment) -> ConfResult<()> {
    let (streamed, udp, tcp) = memory_estimate(exp);
    let transfers = transfer_count(exp);
    let rec = recording_bytes(exp, udp + tcp) + BYTES_PER_TRANSFER_IN_MEMORY * transfers;
    let need = streamed - rec.min(STREAM_BUFFER_BYTES) + rec;
    let Some(crate::budget::MemoryBudget { bytes: have, whose }) =
        memory_budget().map_err(|m| ConfError::new("", m))?
    else {
        return Ok(());
    };
    if need > have {
        return Err(ConfError::new(
            "duration",
            format!(
                "{} of simulated time with its flow records, time series and packet log \
                 held in memory (~{}) needs ~{}; {whose} {}. Give an output directory \
                 (sojourn.run(..., out=DIR), or `sojourn run`), which streams them to disk, \
                 or set SOJOURN_MEMORY=<size> to override (docs/limits.md)",
                exp.duration,
                gb(rec),
                gb(need),
                gb(have)
            ),
        ));
    }
    Ok(())
}

/// The memory a run may use ([`crate::budget::memory_budget`]): `SOJOURN_MEMORY` if set,
/// else the smallest of what the address-space limit leaves, the cgroup's limit and
/// `MemAvailable`; `None` when none is known (no check).
pub fn memory_budget() -> Result<Option<crate::budget::MemoryBudget>, String> {
    crate::budget::memory_budget(BASE_BYTES)
}

fn gb(b: f64) -> String {
    crate::budget::gb(b)
}

/// Refuses a run whose memory estimate exceeds what this process may have
/// ([`memory_budget`]), naming the key that asks for the most: `topology.pairs` (or
/// `topology` for a graph) when nodes, links and the routing table weigh most, else the
/// heaviest workload, `workload[i].count` when its flows weigh most, `workload[i]` when its
/// transfers over the run do.
pub(crate) fn check_memory(exp: &Experiment) -> ConfResult<()> {
    let (need, udp, tcp) = memory_estimate(exp);
    let budget = memory_budget().map_err(|m| ConfError::new("", m))?;
    let Some(crate::budget::MemoryBudget { bytes: have, whose }) = budget else {
        return Ok(());
    };
    if need <= have {
        return Ok(());
    }
    let table = routing_bytes(exp);
    let topology = BYTES_PER_NODE * exp.node_names.len() as f64
        + BYTES_PER_LINK * exp.links.len() as f64
        + table;
    // The heaviest workload: (bytes of its flows, bytes of its transfers, index).
    let heaviest = exp
        .workloads
        .iter()
        .enumerate()
        .map(|(i, w)| match w {
            WorkloadPlan::Udp(u) => (BYTES_PER_UDP_FLOW * u.flows.len() as f64, 0.0, i),
            // A probe flow is a UDP flow plus its records (docs/tests.md: 32 B per probe).
            WorkloadPlan::Probe(q) => (BYTES_PER_UDP_FLOW * q.flows.len() as f64, 0.0, i),
            WorkloadPlan::Tcp(t) => (
                BYTES_PER_TCP_FLOW * t.flows.len() as f64,
                BYTES_PER_FINISHED_TRANSFER * transfers_of(exp, t).0
                    + BYTES_PER_CLOSING_TRANSFER * held_of(exp, t),
                i,
            ),
        })
        .max_by(|a, b| (a.0 + a.1).total_cmp(&(b.0 + b.1)));
    let size = format!("{} nodes, {} links", exp.node_names.len(), exp.links.len());
    let (path, what) = match heaviest {
        Some((flows, transfers, i)) if flows + transfers > topology => {
            let n = exp.workloads[i].endpoints().len();
            if flows >= transfers {
                (
                    format!("workload[{i}].count"),
                    format!("{n} flows in this workload ({tcp} TCP and {udp} UDP in all), {size}"),
                )
            } else {
                (
                    format!("workload[{i}]"),
                    format!(
                        "~{:.0} transfers over the run ({tcp} TCP and {udp} UDP flows), {size}",
                        transfer_count(exp)
                    ),
                )
            }
        }
        _ if table > topology / 2.0 => (
            "topology".to_string(),
            format!(
                "a routing table over {} core nodes (nodes with more than one neighbour; ~{}), {size}",
                (table / 4.0).sqrt().round(),
                gb(table)
            ),
        ),
        _ if !exp.pairs.is_empty() => (
            "topology.pairs".to_string(),
            format!("{} pairs ({size})", exp.pairs.len()),
        ),
        _ => ("topology".to_string(), size),
    };
    Err(ConfError::new(
        path,
        format!(
            "{what}: needs ~{} of memory; {whose} {} \
             (set SOJOURN_MEMORY=<size> to override, docs/limits.md)",
            gb(need),
            gb(have)
        ),
    ))
}

/// What each partition of a run cut over threads holds beyond the first (sojourn-sim's
/// `parallel.rs`): every partition builds the whole network and opens, and numbers, every
/// flow, while packets and connections live only where their node is. Measured with
/// `sojourn run --threads 1/2/4` (maximum resident set): a 10,000-pair dumbbell (40,002 links,
/// 20,002 nodes, 10,000 flows) +116 MB per partition, the 10,000-subscriber ISP tree
/// (20,004 links, 10,003 nodes) +39 MB; budgeted at 3 KiB per link and 1 KiB per node and
/// per flow (147 MB and ≤ 78 MB).
pub const BYTES_PER_LINK_REPLICA: f64 = 3.0 * 1024.0;
pub const BYTES_PER_NODE_REPLICA: f64 = 1024.0;
pub const BYTES_PER_FLOW_REPLICA: f64 = 1024.0;

/// A transfer's two endpoints in every partition for the whole run: a partition never
/// reuses an endpoint's slot, because the slot's number travels in the packets to the far
/// partition (their tag) and must be the same everywhere. Measured: 120,000 Poisson
/// transfers of 20 kB, 30 s, maximum resident set 310 MB on one thread and 764 MB on two
/// (~1.9 KB per transfer per partition); budgeted at 4 KiB.
pub const BYTES_PER_TRANSFER_REPLICA: f64 = 4.0 * 1024.0;

/// The bytes one more partition of a run cut over threads adds ([`BYTES_PER_LINK_REPLICA`],
/// [`BYTES_PER_TRANSFER_REPLICA`]).
pub fn partition_bytes(exp: &Experiment) -> f64 {
    let (_, udp, tcp) = memory_estimate(exp);
    BYTES_PER_LINK_REPLICA * exp.links.len() as f64
        + BYTES_PER_NODE_REPLICA * exp.node_names.len() as f64
        + BYTES_PER_FLOW_REPLICA * (udp + tcp) as f64
        + BYTES_PER_TRANSFER_REPLICA * transfer_count(exp)
        + routing_bytes(exp)
}

/// [`memory_estimate`]'s bytes for a run cut into `parts` partitions: a copy of the
/// network per partition beyond the first, and its time series whole, since a run cut over
/// threads hands its tables to the writer at its end instead of streaming them.
pub fn memory_estimate_cut(exp: &Experiment, parts: usize) -> f64 {
    if parts <= 1 {
        return memory_estimate(exp).0;
    }
    first_partition_bytes(exp) + (parts - 1) as f64 * partition_bytes(exp)
}

/// The first partition of a run cut over threads: [`memory_estimate`] with the time series
/// held whole instead of streamed.
fn first_partition_bytes(exp: &Experiment) -> f64 {
    let (streamed, udp, tcp) = memory_estimate(exp);
    let rec = recording_bytes(exp, udp + tcp);
    streamed - rec.min(STREAM_BUFFER_BYTES) + rec
}

/// Refuses a run cut into `parts` partitions (the simulator's plan for `threads`) whose
/// estimate, each partition's copy of the network included, exceeds what this process may
/// have; says how many threads would fit. One partition is [`check_memory`]'s case.
pub fn check_memory_cut(exp: &Experiment, parts: usize) -> ConfResult<()> {
    if parts <= 1 {
        return Ok(());
    }
    let need = memory_estimate_cut(exp, parts);
    let budget = memory_budget().map_err(|m| ConfError::new("", m))?;
    let Some(crate::budget::MemoryBudget { bytes: have, whose }) = budget else {
        return Ok(());
    };
    if need <= have {
        return Ok(());
    }
    let (one, each) = (first_partition_bytes(exp), partition_bytes(exp));
    let fits = (((have - one) / each).floor() as usize + 1).max(1);
    let advice = if fits > 1 {
        format!("threads = {fits} fits")
    } else {
        "one thread fits".to_string()
    };
    Err(ConfError::new(
        "threads",
        format!(
            "cut over {parts} threads, each building the whole network (~{} beyond the first) \
             and the time series held to the end, the run needs ~{}; {whose} {} ({advice}; \
             set SOJOURN_MEMORY=<size> to override, docs/limits.md)",
            mb(each),
            mb(need),
            mb(have)
        ),
    ))
}

/// Bytes in MB (the refusal of [`check_memory_cut`], whose differences are tens of MB).
fn mb(b: f64) -> String {
    format!("{:.0} MB", b / 1e6)
}

/// The entries of an array of tables (`[[key]]`) with their key paths `key[i]`; an entry
/// that is not a table is an error naming its path.
pub(crate) fn tables_of<'a>(
    entries: &'a [Value],
    key: &str,
) -> ConfResult<Vec<(String, &'a Table)>> {
    entries
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let path = format!("{key}[{i}]");
            match v {
                Value::Table(t) => Ok((path, t)),
                other => Err(ConfError::new(
                    path,
                    format!("expected a table, got {}", other.type_name()),
                )),
            }
        })
        .collect()
}

pub(crate) fn parse_classifiers(exp: &mut Experiment, v: Option<&Value>) -> ConfResult<()> {
    use crate::classify::{parse_classifier, ConntrackPlan};
    exp.conntrack = vec![None; exp.node_names.len()];
    for l in &exp.links {
        if l.qdisc.needs_conntrack() {
            exp.conntrack[l.from as usize] = Some(ConntrackPlan::default());
        }
    }
    let entries = match v {
        None => return Ok(()),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(ConfError::new(
                "classifier",
                format!("use [[classifier]] entries, got {}", other.type_name()),
            ))
        }
    };
    let mut hosts: Vec<u32> = exp
        .workloads
        .iter()
        .flat_map(|w| w.endpoints())
        .flat_map(|(a, b)| [a, b])
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    for (path, t) in tables_of(entries, "classifier")? {
        let (plan, ct) = parse_classifier(t, &path, &exp.node_names, &hosts)?;
        for &n in &plan.nodes {
            match exp.conntrack[n as usize] {
                Some(existing) if existing != ct && entries.len() > 1 => {
                    return Err(ConfError::new(
                        path,
                        format!(
                            "node {:?} already counts with other conntrack options",
                            exp.node_names[n as usize]
                        ),
                    ));
                }
                _ => exp.conntrack[n as usize] = Some(ct),
            }
        }
        exp.classifiers.push(plan);
    }
    Ok(())
}

pub(crate) fn parse_record(exp: &mut Experiment, t: &Table) -> ConfResult<()> {
    let mut p = Params::new("record", t);
    exp.record.interval = p.duration("interval", Duration::from_ms(100))?;
    let link_list = |p: &mut Params,
                     key: &str,
                     exp: &Experiment|
     -> ConfResult<Option<Vec<String>>> {
        match p.raw(key) {
            None => Ok(None),
            Some(Value::Str(s)) if s == "all" => {
                Ok(Some(exp.links.iter().map(|l| l.name.clone()).collect()))
            }
            Some(Value::Str(s)) if s == "none" => Ok(Some(Vec::new())),
            Some(Value::Bool(true)) => Ok(Some(exp.links.iter().map(|l| l.name.clone()).collect())),
            Some(Value::Bool(false)) => Ok(Some(Vec::new())),
            Some(Value::Array(a)) => {
                let mut out = Vec::new();
                for (i, v) in a.iter().enumerate() {
                    let Value::Str(s) = v else {
                        return Err(ConfError::new(
                            format!("record.{key}[{i}]"),
                            "expected a link name",
                        ));
                    };
                    if exp.link(s).is_none() {
                        let names: Vec<&str> = exp.links.iter().map(|l| l.name.as_str()).collect();
                        return Err(ConfError::new(
                            format!("record.{key}[{i}]"),
                            format!("no link named {s:?}; links: {}", names.join(", ")),
                        ));
                    }
                    out.push(s.clone());
                }
                Ok(Some(out))
            }
            Some(v) => Err(p.err(
                key,
                format!(
                    "expected \"all\", \"none\", true/false or a list of link names, got {}",
                    v.type_name()
                ),
            )),
        }
    };
    exp.record.links = link_list(&mut p, "links", exp)?;
    exp.record.packet_links = link_list(&mut p, "packets", exp)?.unwrap_or_default();
    exp.record.flow_series = p.bool("flows", false)?;
    exp.record.packet_sample = p.f64_in("packet_sample", 1.0, 0.0, 1.0)?;
    exp.record.fct_from = match p.choice("fct", &["connect", "first_byte"], "connect")? {
        "connect" => FctFrom::Connect,
        _ => FctFrom::FirstByte,
    };
    p.finish()
}

/// Link parameters shared by dumbbell and graph links (`None` = not given here).
#[derive(Clone, Default)]
pub(crate) struct LinkSpec {
    pub(crate) rate: Option<LinkRate>,
    pub(crate) delay: Option<Duration>,
    pub(crate) delay_schedule: Option<Vec<(Time, Duration)>>,
    pub(crate) qdisc: Option<Value>,
    pub(crate) loss: Option<f64>,
    pub(crate) framing_bytes: Option<u32>,
    pub(crate) reorder: Option<(f64, Duration)>,
    pub(crate) tx_ring: Option<u32>,
    pub(crate) shaper: Option<bool>,
}

impl LinkSpec {
    /// Fills what this spec leaves open from `base`.
    pub(crate) fn or(self, base: &LinkSpec) -> LinkSpec {
        LinkSpec {
            rate: self.rate.or_else(|| base.rate.clone()),
            delay: self.delay.or(base.delay),
            delay_schedule: self.delay_schedule.or_else(|| base.delay_schedule.clone()),
            qdisc: self.qdisc.or_else(|| base.qdisc.clone()),
            loss: self.loss.or(base.loss),
            framing_bytes: self.framing_bytes.or(base.framing_bytes),
            reorder: self.reorder.or(base.reorder),
            tx_ring: self.tx_ring.or(base.tx_ring),
            shaper: self.shaper.or(base.shaper),
        }
    }
}

pub(crate) fn parse_link_spec(p: &mut Params, base_dir: &Path) -> ConfResult<LinkSpec> {
    let mut rate = p.rate_opt("rate")?.map(LinkRate::Constant);
    if let Some(LinkRate::Constant(0)) = rate {
        return Err(p.err("rate", "must be positive"));
    }
    if let Some(v) = p.raw("rate_schedule") {
        let Some(LinkRate::Constant(r0)) = rate else {
            return Err(p.err(
                "rate_schedule",
                "needs `rate` (the rate before the first change)",
            ));
        };
        let steps = parse_schedule(v, &p.key_path("rate_schedule"), "rate", units::parse_rate)?;
        if steps.iter().any(|&(_, r)| r == 0) {
            return Err(p.err("rate_schedule", "rates must be positive"));
        }
        let mut s = vec![(Time::ZERO, r0)];
        s.extend(steps);
        rate = Some(LinkRate::Schedule(s));
    }
    if let Some(file) = p.str_opt("trace")? {
        if rate.is_some() {
            return Err(p.err("trace", "give either `rate` or `trace`, not both"));
        }
        let bytes = p.bytes("trace_bytes_per_opportunity", 1500)?;
        if bytes == 0 {
            return Err(p.err("trace_bytes_per_opportunity", "must be positive"));
        }
        let path = base_dir.join(file);
        let ops = load_trace(&path).map_err(|m| p.err("trace", m))?;
        rate = Some(LinkRate::Trace(TraceSpec {
            opportunities_ms: ops,
            bytes_per_opportunity: bytes as u32,
        }));
    } else if p.has("trace_bytes_per_opportunity") {
        return Err(p.err(
            "trace_bytes_per_opportunity",
            "only meaningful with `trace`",
        ));
    }
    let delay = p.duration_opt("delay")?;
    let delay_schedule = match p.raw("delay_schedule") {
        None => None,
        Some(v) => Some(parse_schedule(
            v,
            &p.key_path("delay_schedule"),
            "delay",
            units::parse_duration,
        )?),
    };
    let qdisc = p.raw("qdisc").cloned();
    let loss = if p.has("loss") {
        Some(p.f64_in("loss", 0.0, 0.0, 1.0)?)
    } else {
        None
    };
    let framing_bytes = p.bytes_opt("framing_overhead")?.map(|b| b as u32);
    let reorder = parse_reorder(p)?;
    let tx_ring = if p.has("tx_ring") {
        Some(p.u32("tx_ring", 0, 0, 65_536)?)
    } else {
        None
    };
    let shaper = if p.has("shaper") {
        Some(p.bool("shaper", false)?)
    } else {
        None
    };
    if shaper == Some(true) && matches!(rate, Some(LinkRate::Trace(_))) {
        return Err(p.err("shaper", "a Mahimahi trace is a wire, not a shaper"));
    }
    Ok(LinkSpec {
        rate,
        delay,
        delay_schedule,
        qdisc,
        loss,
        framing_bytes,
        reorder,
        tx_ring,
        shaper,
    })
}

/// Reads a link's `reorder` (probability) and `reorder_delay` (extra delay, default 1 ms).
pub fn parse_reorder(p: &mut Params) -> ConfResult<Option<(f64, Duration)>> {
    if !p.has("reorder") {
        if p.has("reorder_delay") {
            return Err(p.err("reorder_delay", "only meaningful with `reorder`"));
        }
        return Ok(None);
    }
    let prob = p.f64_in("reorder", 0.0, 0.0, 1.0)?;
    let delay = p.duration("reorder_delay", Duration::from_ms(1))?;
    if prob > 0.0 && delay.is_zero() {
        return Err(p.err("reorder_delay", "must be positive to reorder anything"));
    }
    Ok(Some((prob, delay)))
}

fn parse_schedule<T>(
    v: &Value,
    path: &str,
    key: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> ConfResult<Vec<(Time, T)>> {
    let Value::Array(a) = v else {
        return Err(ConfError::new(
            path,
            format!("expected a list like [{{ at = \"30s\", {key} = ... }}]"),
        ));
    };
    let mut out: Vec<(Time, T)> = Vec::new();
    for (i, e) in a.iter().enumerate() {
        let ep = format!("{path}[{i}]");
        let Value::Table(t) = e else {
            return Err(ConfError::new(
                ep,
                format!("expected a table {{ at = \"30s\", {key} = ... }}"),
            ));
        };
        let mut p = Params::new(ep.clone(), t);
        let at = p
            .duration_opt("at")?
            .ok_or_else(|| ConfError::new(join(&ep, "at"), "required"))?;
        let Some(Value::Str(s)) = p.raw(key) else {
            return Err(ConfError::new(
                join(&ep, key),
                "required (a string with a unit)",
            ));
        };
        let val = parse(s).map_err(|m| ConfError::new(join(&ep, key), m))?;
        p.finish()?;
        if let Some(last) = out.last() {
            if Time::ZERO + at <= last.0 {
                return Err(ConfError::new(
                    join(&ep, "at"),
                    "schedule times must increase",
                ));
            }
        }
        out.push((Time::ZERO + at, val));
    }
    Ok(out)
}

pub(crate) fn add_node(exp: &mut Experiment, name: &str, path: &str) -> ConfResult<u32> {
    if exp.node(name).is_some() {
        return Err(ConfError::new(
            path,
            format!("duplicate node name {name:?}"),
        ));
    }
    let id = exp.node_names.len() as u32;
    exp.node_names.push(name.to_string());
    exp.node_index.insert(name.to_string(), id);
    Ok(id)
}

pub(crate) fn add_link(
    exp: &mut Experiment,
    name: String,
    from: u32,
    to: u32,
    spec: &LinkSpec,
    default_qdisc: Value,
    path: &str,
) -> ConfResult<()> {
    let rate = spec
        .rate
        .clone()
        .ok_or_else(|| ConfError::new(join(path, "rate"), "required (e.g. rate = \"10Mbit\")"))?;
    if exp.link(&name).is_some() {
        return Err(ConfError::new(
            path,
            format!("duplicate link name {name:?}"),
        ));
    }
    let qdisc_value = spec.qdisc.as_ref().unwrap_or(&default_qdisc);
    let qpath = join(path, "qdisc");
    // Parsed and validated once (errors with their path); engines build from the spec.
    let rate_bps = match &rate {
        LinkRate::Constant(r) => *r,
        _ => 0,
    };
    // Filters may name nodes added later: placeholders now, ids after the topology.
    let qdisc = QdiscSpec::parse(
        &crate::qdisc_nodes::with_placeholders(qdisc_value),
        &qpath,
        &BuildCtx {
            link_rate_bps: rate_bps,
            ..BuildCtx::default()
        },
    )?;
    exp.link_index.insert(name.clone(), exp.links.len() as u32);
    exp.links.push(LinkPlan {
        name,
        from,
        to,
        rate,
        delay: spec.delay.unwrap_or(Duration::ZERO),
        delay_schedule: spec.delay_schedule.clone().unwrap_or_default(),
        qdisc_desc: qdisc_label(qdisc_value),
        qdisc,
        qdisc_path: qpath,
        loss: spec.loss.unwrap_or(0.0),
        framing_bytes: spec.framing_bytes.unwrap_or(0),
        reorder: spec.reorder.map_or(0.0, |r| r.0),
        reorder_delay: spec.reorder.map_or(Duration::ZERO, |r| r.1),
        tx_ring: spec.tx_ring.unwrap_or(0),
        shaper: spec.shaper.unwrap_or(false),
    });
    Ok(())
}

/// Dumbbell: senders s0..sN-1 → router `left` → bottleneck → `right` → receivers d0..dN-1.
/// Links: `bottleneck` (left→right), `reverse` (right→left), `s{i}.up`/`s{i}.down`,
/// `d{i}.down`/`d{i}.up`.
pub(crate) fn parse_dumbbell(exp: &mut Experiment, p: &mut Params) -> ConfResult<()> {
    let pairs = p.u32("pairs", 1, 1, 100_000)?;
    let base = exp.base_dir.clone();
    if !p.has("bottleneck") {
        return Err(ConfError::new(
            "topology.bottleneck",
            "required: { rate = \"10Mbit\", delay = \"10ms\", qdisc = ... }",
        ));
    }
    let mut bp = p.child("bottleneck")?;
    let bottleneck = parse_link_spec(&mut bp, &base)?;
    bp.finish()?;
    let mut rp = p.child("reverse")?;
    let reverse = parse_link_spec(&mut rp, &base)?;
    rp.finish()?;
    // The reverse bottleneck defaults to the forward one's rate and delay (not its qdisc).
    let reverse = reverse.or(&LinkSpec {
        qdisc: None,
        ..bottleneck.clone()
    });
    let mut ap = p.child("access")?;
    let access = parse_link_spec(&mut ap, &base)?;
    ap.finish()?;
    let access = access.or(&LinkSpec {
        rate: Some(LinkRate::Constant(1_000_000_000)),
        ..LinkSpec::default()
    });
    let mut sp = p.child("sender_access")?;
    let sender_access = parse_link_spec(&mut sp, &base)?.or(&access);
    sp.finish()?;
    let mut dp = p.child("receiver_access")?;
    let receiver_access = parse_link_spec(&mut dp, &base)?.or(&access);
    dp.finish()?;
    let pair_delays: Vec<Duration> = match p.raw("pair_delays") {
        None => Vec::new(),
        Some(Value::Array(a)) => {
            let mut v = Vec::new();
            for (i, d) in a.iter().enumerate() {
                let Value::Str(s) = d else {
                    return Err(ConfError::new(
                        format!("topology.pair_delays[{i}]"),
                        "expected a duration string",
                    ));
                };
                v.push(
                    units::parse_duration(s)
                        .map_err(|m| ConfError::new(format!("topology.pair_delays[{i}]"), m))?,
                );
            }
            if v.len() != pairs as usize {
                return Err(ConfError::new(
                    "topology.pair_delays",
                    format!("has {} entries but pairs = {pairs}", v.len()),
                ));
            }
            v
        }
        Some(v) => {
            return Err(ConfError::new(
                "topology.pair_delays",
                format!("expected a list of durations, got {}", v.type_name()),
            ))
        }
    };

    let left = add_node(exp, "left", "topology")?;
    let right = add_node(exp, "right", "topology")?;
    let pfifo = Value::Str("pfifo".into());
    add_link(
        exp,
        "bottleneck".into(),
        left,
        right,
        &bottleneck,
        pfifo.clone(),
        "topology.bottleneck",
    )?;
    add_link(
        exp,
        "reverse".into(),
        right,
        left,
        &reverse,
        pfifo.clone(),
        "topology.reverse",
    )?;
    for i in 0..pairs {
        let s = add_node(exp, &format!("s{i}"), "topology")?;
        let d = add_node(exp, &format!("d{i}"), "topology")?;
        exp.pairs.push((s, d));
        let mut sa = sender_access.clone();
        if let Some(&d) = pair_delays.get(i as usize) {
            sa.delay = Some(d);
        }
        add_link(
            exp,
            format!("s{i}.up"),
            s,
            left,
            &sa,
            pfifo.clone(),
            "topology.sender_access",
        )?;
        add_link(
            exp,
            format!("s{i}.down"),
            left,
            s,
            &sa,
            pfifo.clone(),
            "topology.sender_access",
        )?;
        add_link(
            exp,
            format!("d{i}.down"),
            right,
            d,
            &receiver_access,
            pfifo.clone(),
            "topology.receiver_access",
        )?;
        add_link(
            exp,
            format!("d{i}.up"),
            d,
            right,
            &receiver_access,
            pfifo.clone(),
            "topology.receiver_access",
        )?;
    }
    Ok(())
}

/// `[topology] kind = "wifi"` (docs/wifi.md): `gw`, `ap`, `server{j}`, `sta{i}`; links
/// `wan.down`/`wan.up`, `server{j}.out`/`.in`, then the medium's `sta{i}.down`/`.up`
/// (the experiment's highest link ids); `pair = i` is (`server{i mod servers}`, `sta{i}`).
pub(crate) fn parse_wifi(exp: &mut Experiment, p: &mut Params) -> ConfResult<()> {
    let base = exp.base_dir.clone();
    let servers = p.u32("servers", 1, 1, 1000)?;
    let wan = wired_spec(p, "wan", &base, 1_000_000_000)?;
    let access = wired_spec(p, "server_access", &base, 10_000_000_000)?;
    let (config, stations) = crate::wifi::parse_medium(p, &|v, path| {
        parse_schedule(v, path, "rate", units::parse_rate)
    })?;

    let gw = add_node(exp, "gw", "topology")?;
    let ap = add_node(exp, "ap", "topology")?;
    let pfifo = Value::Str("pfifo".into());
    add_link(
        exp,
        "wan.down".into(),
        gw,
        ap,
        &wan,
        pfifo.clone(),
        "topology.wan",
    )?;
    add_link(
        exp,
        "wan.up".into(),
        ap,
        gw,
        &wan,
        pfifo.clone(),
        "topology.wan",
    )?;
    let mut server_nodes = Vec::new();
    for j in 0..servers {
        let s = add_node(exp, &format!("server{j}"), "topology")?;
        server_nodes.push(s);
        let path = "topology.server_access";
        add_link(
            exp,
            format!("server{j}.out"),
            s,
            gw,
            &access,
            pfifo.clone(),
            path,
        )?;
        add_link(
            exp,
            format!("server{j}.in"),
            gw,
            s,
            &access,
            pfifo.clone(),
            path,
        )?;
    }
    let mut station_nodes = Vec::new();
    for i in 0..stations.len() {
        station_nodes.push(add_node(exp, &format!("sta{i}"), "topology")?);
    }
    let first_link = exp.links.len() as u32;
    for (i, st) in stations.iter().enumerate() {
        let node = station_nodes[i];
        // The medium's links carry the station's initial PHY rate as their nominal rate
        // (for labels and the event queue's granularity); the medium times them.
        let spec = LinkSpec {
            rate: Some(LinkRate::Constant(st.rates[0].1.rate_bps().max(1))),
            ..LinkSpec::default()
        };
        let path = format!("topology.stations[{i}]");
        add_link(
            exp,
            format!("sta{i}.down"),
            ap,
            node,
            &spec,
            pfifo.clone(),
            &path,
        )?;
        add_link(
            exp,
            format!("sta{i}.up"),
            node,
            ap,
            &spec,
            pfifo.clone(),
            &path,
        )?;
        let desc = format!("mac80211 {}", config.mac.name());
        let n = exp.links.len();
        exp.links[n - 2].qdisc_desc = desc.clone();
        exp.links[n - 1].qdisc_desc = desc;
        exp.pairs.push((server_nodes[i % server_nodes.len()], node));
    }
    exp.wifi = Some(crate::wifi::WifiPlan {
        config,
        stations,
        ap,
        station_nodes,
        first_link,
    });
    Ok(())
}

/// A wired link's keys under `key`, at `default_bps` unless it says otherwise.
fn wired_spec(p: &mut Params, key: &str, base: &Path, default_bps: u64) -> ConfResult<LinkSpec> {
    let mut lp = p.child(key)?;
    let spec = parse_link_spec(&mut lp, base)?;
    lp.finish()?;
    Ok(spec.or(&LinkSpec {
        rate: Some(LinkRate::Constant(default_bps)),
        ..LinkSpec::default()
    }))
}

/// General graph: named nodes, links (duplex by default), shortest-hop static routes
/// unless overridden.
pub(crate) fn parse_graph(exp: &mut Experiment, p: &mut Params) -> ConfResult<()> {
    let base = exp.base_dir.clone();
    let nodes = match p.raw("nodes") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => {
            return Err(ConfError::new(
                "topology.nodes",
                "required: a list of node names",
            ))
        }
    };
    for (i, n) in nodes.iter().enumerate() {
        let Value::Str(s) = n else {
            return Err(ConfError::new(
                format!("topology.nodes[{i}]"),
                "expected a node name (string)",
            ));
        };
        add_node(exp, s, &format!("topology.nodes[{i}]"))?;
    }
    let links = match p.raw("links") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => {
            return Err(ConfError::new(
                "topology.links",
                "required: [[topology.links]] entries",
            ))
        }
    };
    for (path, t) in tables_of(links, "topology.links")? {
        let mut lp = Params::new(path.clone(), t);
        let node_of = |lp: &mut Params, key: &str, exp: &Experiment| -> ConfResult<u32> {
            let s = lp
                .str_opt(key)?
                .ok_or_else(|| lp.err(key, "required (a node name)"))?;
            exp.node(s).ok_or_else(|| {
                lp.err(
                    key,
                    format!("no node named {s:?}; nodes: {}", exp.node_names.join(", ")),
                )
            })
        };
        let from = node_of(&mut lp, "from", exp)?;
        let to = node_of(&mut lp, "to", exp)?;
        if from == to {
            return Err(lp.err("to", "a link must join two different nodes"));
        }
        let name = lp.str_opt("name")?.map(str::to_string).unwrap_or_else(|| {
            format!(
                "{}->{}",
                exp.node_names[from as usize], exp.node_names[to as usize]
            )
        });
        let spec = parse_link_spec(&mut lp, &base)?;
        let duplex = lp.bool("duplex", true)?;
        let mut rp = lp.child("reverse")?;
        let rspec = parse_link_spec(&mut rp, &base)?;
        rp.finish()?;
        lp.finish()?;
        add_link(
            exp,
            name.clone(),
            from,
            to,
            &spec,
            Value::Str("pfifo".into()),
            &path,
        )?;
        if duplex {
            // The reverse direction copies rate, delay and framing, not the qdisc or loss.
            let rev = rspec.or(&LinkSpec {
                qdisc: None,
                loss: None,
                reorder: None,
                delay_schedule: None,
                ..spec.clone()
            });
            let rname = format!("{name}.reverse");
            add_link(
                exp,
                rname,
                to,
                from,
                &rev,
                Value::Str("pfifo".into()),
                &format!("{path}.reverse"),
            )?;
        }
    }
    if let Some(v) = p.raw("routes") {
        let Value::Array(a) = v else {
            return Err(ConfError::new(
                "topology.routes",
                "expected [[topology.routes]] entries",
            ));
        };
        for (path, t) in tables_of(a, "topology.routes")? {
            let mut rp = Params::new(path.clone(), t);
            let at = rp.str_opt("at")?.ok_or_else(|| rp.err("at", "required"))?;
            let to = rp.str_opt("to")?.ok_or_else(|| rp.err("to", "required"))?;
            let via = rp
                .str_opt("via")?
                .ok_or_else(|| rp.err("via", "required (a link name)"))?;
            let at_n = exp
                .node(at)
                .ok_or_else(|| rp.err("at", format!("no node named {at:?}")))?;
            let to_n = exp
                .node(to)
                .ok_or_else(|| rp.err("to", format!("no node named {to:?}")))?;
            let via_l = exp
                .link(via)
                .ok_or_else(|| rp.err("via", format!("no link named {via:?}")))?;
            if exp.links[via_l as usize].from != at_n {
                return Err(rp.err("via", format!("link {via:?} does not leave node {at:?}")));
            }
            rp.finish()?;
            exp.routes.push((at_n, to_n, via_l));
        }
    }
    Ok(())
}

/// The experiment's static routes (fewest hops, ties by link declaration order, then the
/// `[[topology.routes]]` overrides; the rule and the table's size in [`crate::routing`]).
pub fn static_routes(exp: &Experiment) -> Routes {
    let links: Vec<(u32, u32)> = exp.links.iter().map(|l| (l.from, l.to)).collect();
    Routes::new(exp.node_names.len(), &links, &exp.routes)
}

/// Follows the route from `from` to `to` hop by hop, calling `on_link` with each link's
/// index; false when there is no route or it loops (a bad override), detected by a walk
/// longer than the number of nodes.
pub(crate) fn walk_route(
    exp: &Experiment,
    routes: &Routes,
    from: u32,
    to: u32,
    mut on_link: impl FnMut(usize),
) -> bool {
    let mut at = from;
    let mut hops = 0;
    while at != to {
        let l = routes.next(at, to);
        if l == NO_ROUTE || hops > exp.node_names.len() {
            return false;
        }
        on_link(l as usize);
        at = exp.links[l as usize].to;
        hops += 1;
    }
    true
}

pub(crate) fn check_routes(exp: &Experiment) -> ConfResult<()> {
    let routes = static_routes(exp);
    for (i, w) in exp.workloads.iter().enumerate() {
        for (a, b) in w.endpoints() {
            for (x, y) in [(a, b), (b, a)] {
                if !walk_route(exp, &routes, x, y, |_| {}) {
                    return Err(ConfError::new(
                        format!("workload[{i}]"),
                        format!(
                            "no route from {:?} to {:?}",
                            exp.node_names[x as usize], exp.node_names[y as usize]
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The bytes an open loop's transfer of `size` payload bytes puts on the wire in its data
/// direction: the payload in segments of `mss` bytes, each with its IP, TCP (and timestamps)
/// and Ethernet headers plus the link's framing; the SYN, the ACK ending the handshake and
/// the FIN. For a size distribution `size` is its mean (the segment count of the mean size,
/// an approximation documented in docs/limits.md).
pub fn transfer_wire_bytes(size: f64, cfg: &TcpConfig, framing: u32) -> f64 {
    let segments = (size / cfg.mss.max(1) as f64).ceil().max(1.0);
    let header = (cfg.mtu.saturating_sub(cfg.mss) + ETHERNET_HEADER_BYTES + framing) as f64;
    let bare = (IP_TCP_HEADER_BYTES + ETHERNET_HEADER_BYTES + framing) as f64;
    let ts = if cfg.timestamps {
        TIMESTAMP_OPTION_BYTES as f64
    } else {
        0.0
    };
    size + segments * header + (SYN_FRAME_BYTES + framing) as f64 + 2.0 * (bare + ts)
}

/// Refuses an open loop (`poisson`, `small_files`) whose offered load reaches the rate of a
/// link on its path: arrivals then outpace departures, the transfers in progress grow
/// without bound and with them the memory (an M/G/1 queue with load ≥ 1 has no steady
/// state). The loads of every open loop crossing a link add up; `allow_overload = true`
/// in each of them runs it anyway (the memory estimate then counts every arrival as held).
/// Competing traffic (bulk flows, UDP) is not subtracted (docs/limits.md).
pub(crate) fn check_overload(exp: &Experiment) -> ConfResult<()> {
    struct Loop {
        index: usize,
        per_s: f64,
        mean: f64,
        allowed: bool,
    }
    let mut wire = vec![0.0f64; exp.links.len()];
    let mut payload = vec![0.0f64; exp.links.len()];
    let mut by_link: Vec<Vec<usize>> = vec![Vec::new(); exp.links.len()];
    let mut loops: Vec<Loop> = Vec::new();
    let mut routes: Option<Routes> = None;
    for (i, w) in exp.workloads.iter().enumerate() {
        let WorkloadPlan::Tcp(t) = w else { continue };
        let TcpKind::Poisson { interval, size } = &t.kind else {
            continue;
        };
        let stop = t.stop.unwrap_or(exp.duration).min(exp.duration);
        if stop <= t.start {
            continue; // never active
        }
        let per_s = 1.0 / interval.mean().as_secs_f64().max(1e-9);
        let mean = size.mean();
        let routes = routes.get_or_insert_with(|| static_routes(exp));
        for &(a, b) in &t.flows {
            // A missing route was refused by check_routes already.
            walk_route(exp, routes, a, b, |l| {
                let framing = exp.links[l].framing_bytes;
                wire[l] += per_s * 8.0 * transfer_wire_bytes(mean, &t.cfg, framing);
                payload[l] += per_s * 8.0 * mean;
                by_link[l].push(loops.len());
            });
        }
        loops.push(Loop {
            index: i,
            per_s: per_s * t.flows.len() as f64,
            mean,
            allowed: t.allow_overload,
        });
    }
    for (l, link) in exp.links.iter().enumerate() {
        let rate = link.rate.mean_bps(exp.duration);
        if by_link[l].is_empty() || wire[l] < rate {
            continue;
        }
        let Some(&k) = by_link[l].iter().find(|&&k| !loops[k].allowed) else {
            continue;
        };
        let lp = &loops[k];
        let others = by_link[l].iter().any(|&j| j != k);
        let what = if others {
            "with the other open loops crossing it".to_string()
        } else {
            format!("{} transfers/s × {:.0} B mean", fmt_rate(lp.per_s), lp.mean)
        };
        return Err(ConfError::new(
            format!("workload[{}]", lp.index),
            format!(
                "an open loop offering {:.1} Mbit/s of payload ({what}; {:.1} Mbit/s on the \
                 wire with headers) through link {:?} of {:.1} Mbit/s ({:.0} % of its rate): \
                 arrivals outpace the link, so transfers in progress pile up without bound; \
                 lower the arrival rate or the size, or set allow_overload = true in the \
                 workload to run it anyway (memory then grows with the backlog, docs/limits.md)",
                payload[l] / 1e6,
                wire[l] / 1e6,
                link.name,
                rate / 1e6,
                100.0 * wire[l] / rate.max(1e-9),
            ),
        ));
    }
    Ok(())
}

/// An arrival rate for messages: whole numbers without decimals.
fn fmt_rate(r: f64) -> String {
    if (r - r.round()).abs() < 1e-9 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// A short description of a qdisc spec as written, e.g. `codel(target=5ms)` (the `qdisc`
/// label of a link in outputs).
pub fn qdisc_label(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::Table(t) => {
            let kind = match t.get("kind") {
                Some(Value::Str(k)) => k.clone(),
                _ => "?".into(),
            };
            let args: Vec<String> =
                t.0.iter()
                    .filter(|(k, _)| k != "kind")
                    .map(|(k, v)| format!("{k}={}", short_value(v)))
                    .collect();
            if args.is_empty() {
                kind
            } else {
                format!("{kind}({})", args.join(", "))
            }
        }
        other => short_value(other),
    }
}

fn short_value(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Table(_) => qdisc_label(v),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(short_value).collect::<Vec<_>>().join(" ")
        ),
    }
}
