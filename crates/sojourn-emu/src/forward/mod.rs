//! The live forwarder: real frames from AF_PACKET ports through emulated links, each a
//! sojourn-core qdisc + a serialiser at the link's rate + a propagation delay line.
//!
//! # API (used by the orchestration in `run.rs`)
//! ```text
//! let plan = Plan { netns: Some(fwd_ns), ports, links, routes, .. };
//! let handle = forward::spawn(plan, stop.clone())?;   // returns once every socket is bound
//! ... traffic ...
//! stop.store(true, Ordering::Relaxed);
//! let report: ForwarderReport = handle.join()?;       // counters, histograms, samples
//! ```
//! or, on a thread of one's own: `Forwarder::new(plan)?` then `run(&stop)`.
//!
//! * [`Plan`]: `ports` (interface name in the forwarder namespace, the port's own MAC, the
//!   peer's MAC and optional per-address neighbours), `links` ([`LinkPlan`]: rate model —
//!   constant, schedule or Mahimahi trace —, delay and delay schedule, Bernoulli loss,
//!   framing bytes, the typed discipline spec the experiment model validated, an optional
//!   `ct bytes` → priority map, and the egress: a port or "route again" for multi-hop),
//!   `routes` (longest-prefix match on the destination address, optionally per ingress).
//! * [`ForwarderReport`]: per port rx/tx counters; per link received, delivered, dropped by
//!   [`DropReason`](sojourn_core::qdisc::DropReason), queued at the end, CE marks written, the qdisc sojourn histogram and
//!   release lateness; forwarder-level drops (not IP, unroutable, oversize, no buffer);
//!   time series samples; CPU time. [`ForwarderReport::check_conservation`] verifies
//!   received = delivered + dropped + queued.
//!
//! # How a frame moves
//! One thread (`ppoll` on all ports, timer slack 1 ns) does everything, in *virtual time
//! that follows the clock*: a frame received at `now` (CLOCK_MONOTONIC since the epoch) is
//! parsed ([`crate::wire`]), counted by conntrack, routed, and enqueued into its link's
//! qdisc at `now` — after the link has first been advanced to `now`, so every departure
//! that was due before the arrival happens first, at its exact (past) time. A link's
//! serialiser starts the next packet at `max(previous end, last qdisc operation)`, so the
//! rate is exact however late the thread wakes; the packet's release time is
//! `serialisation end + delay` (store and forward, as the simulator does), and the frame is
//! written to its egress port when the clock reaches it. The qdisc's `NotBefore(t)` is a
//! timer like the kernel's watchdog; a new enqueue retries the dequeue at once (as
//! `__qdisc_run` does). Frame bytes stay in a buffer pool; the `Packet` the qdisc
//! holds carries the buffer's slot in the low 24 bits of `uid`.
//!
//! # Where the code is
//! This file: the plan, the forwarder's state and its thread (the event loop, start and
//! finish). `port.rs`: capture and inject (AF_PACKET receive and send, parsing a frame into
//! a `Packet`, routes). `link.rs`: the per-link pipeline (conntrack classification,
//! qdisc and serialiser in sojourn-core's device, loss, CE into the real header, the delay
//! line, the measured period). `record.rs`: logging (time series samples and the packet
//! log, handed out while the run proceeds). `report.rs`: what a run reports. `pool.rs`:
//! the frame buffers; `conns.rs`: connection ids for conntrack and per-flow drops.

mod conns;
mod link;
mod pool;
mod port;
mod record;
mod report;
mod wifi;

pub use report::{
    limit_warning, ConnReport, EcnHandshakes, ForwarderReport, IngressDrops, LinkReport, Measured,
    PortReport, Sample, BEHIND_RELEASE_P99_NS,
};
pub use wifi::WifiMedium;

use crate::afpacket::{PacketSocket, RxMode, MAX_BATCH, VNET_HDR_BYTES};
use crate::netns::Mac;
use conns::Flows;
use link::Link;
use pool::Pool;
use port::Port;
use sojourn_core::conntrack::Conntrack;
pub use sojourn_core::conntrack::{ConntrackPlan, CountBytes, CountDirection};
use sojourn_core::device::Device;
pub use sojourn_core::device::{RateModel, Trace};
use sojourn_core::hist::Histogram;
use sojourn_core::qdisc::{BuildCtx, Drops, Qdisc, QdiscSpec};
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, FlowKey, Time};
use sojourn_record::metrics::{LinkCounts, PacketLog, TimeSeries};
use std::collections::VecDeque;
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

/// One forwarder port: an interface in the forwarder namespace (a veth end, no address).
#[derive(Clone, Debug)]
pub struct PortPlan {
    pub ifname: String,
    /// This port's own MAC: the source of frames sent out of it.
    pub mac: Mac,
    /// The MAC frames sent out of this port go to (the host's veth end).
    pub peer_mac: Mac,
    /// Per-destination MACs behind this port (e.g. several hosts behind a bridge); a
    /// destination not listed goes to `peer_mac`.
    pub neighbours: Vec<(IpAddr, Mac)>,
}

/// Where a link's packets go once they have crossed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Egress {
    /// Out of this port (index into [`Plan::ports`]).
    Port(usize),
    /// Into the next link, chosen by the routes with `ingress = Some(Hop::Link(this))`
    /// (multi-hop paths of a graph topology inside one forwarder).
    Route,
}

/// Where a frame comes from, for ingress-specific routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    Port(usize),
    Link(usize),
}

/// A route: destination prefix → link.
#[derive(Clone, Debug)]
pub struct Route {
    /// `None`: any ingress; otherwise only frames from that port or link.
    pub ingress: Option<Hop>,
    pub prefix: IpAddr,
    pub prefix_len: u8,
    pub link: usize,
}

/// One emulated link.
#[derive(Clone, Debug)]
pub struct LinkPlan {
    pub name: String,
    pub egress: Egress,
    /// Serialisation rate: constant, schedule (times from the epoch) or Mahimahi trace.
    pub rate: RateModel,
    pub delay: Duration,
    /// `(from, delay)` changes, sorted; a packet gets the delay in force when its
    /// serialisation ends; releases never reorder (a decrease waits for earlier packets).
    pub delay_schedule: Vec<(Time, Duration)>,
    /// Bernoulli loss probability after serialisation (the packet still used the wire).
    pub loss: f64,
    /// Bytes added per packet for serialisation only (preamble, FCS, IFG, ATM…).
    pub framing_bytes: u32,
    /// A token-bucket shaper (tc htb/tbf on a veth) rather than a wire: a packet leaves
    /// whole at the start of its slot and the next one waits `len / rate` (the device's
    /// shaper mode, what the simulator runs for `shaper = true`).
    pub shaper: bool,
    /// The discipline, parsed and validated once (the experiment model's
    /// `LinkPlan.qdisc`, which the simulator builds too); built here with the forwarder's
    /// own seed. `qdisc_path` names it in refusals.
    pub qdisc: QdiscSpec,
    pub qdisc_path: String,
    /// `ct bytes` → `skb->priority` ranges (inclusive upper bounds, increasing), applied
    /// to packets entering this link (needs [`Plan::conntrack`]).
    pub classifier: Option<Vec<(u64, u32)>>,
}

/// The whole forwarder.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Namespace to enter (`setns`) on the forwarder's thread; `None` = stay.
    pub netns: Option<String>,
    pub ports: Vec<PortPlan>,
    pub links: Vec<LinkPlan>,
    pub routes: Vec<Route>,
    /// Connection tracking of every frame the forwarder receives (both directions), for
    /// the links' classifiers; `None` = off.
    pub conntrack: Option<ConntrackPlan>,
    /// Time series sampling interval; `None` = no samples.
    pub sample_interval: Option<Duration>,
    /// Seed of the links' loss streams and the qdiscs' random streams.
    pub seed: u64,
    /// Device MTU (IP bytes) of the ports; qdiscs see `mtu + 14` as psched_mtu.
    pub mtu: u32,
    /// Largest frame a buffer holds (longer frames are dropped as `oversize`).
    pub max_frame_bytes: u32,
    /// Pass GSO buffers through (up to 64 KiB, `PACKET_VNET_HDR` on every port): hosts may
    /// keep checksum and segmentation offloads on; the frame's virtio header (GSO type and
    /// size, checksum offsets) goes out with it, so the kernel segments or hands the whole
    /// buffer on. Disciplines that split GSO buffers themselves (`split_gso` of cake and dualpi2, tbf)
    /// are refused in this mode: a split segment has no frame of its own.
    pub gso: bool,
    /// Upper bound on frames held at once (qdiscs + delay lines); beyond it arrivals are
    /// dropped as `no_buffer`.
    pub max_buffers: usize,
    /// Timer lead: sleep until this long before the next event, then wait for it on the
    /// clock (a bounded busy-wait, no system calls). `None` = adaptive: the running mean
    /// of how late this thread's timed sleeps end (the VM's timer + wake-up latency,
    /// ~15–25 µs here), capped at 100 µs. `Some(0)` = plain sleeping.
    pub spin: Option<Duration>,
    /// CLOCK_MONOTONIC ns that is time 0 of this run (shared with the load generator);
    /// `None` = when the forwarder starts.
    pub epoch_monotonic_ns: Option<u64>,
    /// Run the forwarder thread under SCHED_FIFO with this priority (1–99), so compiler
    /// jobs or the load generator on the same cores do not delay its timers by
    /// milliseconds; `None` = normal scheduling. Needs root; if refused the forwarder runs
    /// normally and says so in [`ForwarderReport::realtime`]. The kernel's RT throttling
    /// (95% by default) still leaves the machine its share.
    pub realtime_priority: Option<i32>,
    /// The measured period `[measure_from, measure_until)` (times from the epoch), as the
    /// simulator's warm-up and end: each link's [`LinkReport::measured`] counters and its
    /// `sojourn_ns` histogram cover only it (the histogram is reset at `measure_from`, as
    /// the simulator resets its links at the end of warm-up). `None` = from the start / to
    /// the stop.
    pub measure_from: Option<Time>,
    pub measure_until: Option<Time>,
    /// Links whose time series ([`ForwarderReport::series`]) are sampled every
    /// `sample_interval`, by the builder every engine shares ([`TimeSeries::push_link`]).
    pub series_links: Vec<usize>,
    /// Where the time series go while the run proceeds (`run`'s streaming writer): every
    /// [`SERIES_OUTBOX_ROWS`] rows are moved there, so the forwarder does not hold them to
    /// the end; [`ForwarderReport::series`] then holds only the rows after the last move.
    pub series_outbox: Option<SeriesOutbox>,
    /// Links whose dequeues and drops go into [`ForwarderReport::packets`] (the
    /// packet log every engine writes), a deterministic `packet_sample` fraction by packet number.
    pub packet_log_links: Vec<usize>,
    pub packet_sample: f64,
    /// Where the packet log goes while the run proceeds (`run`'s streaming writer): every
    /// [`PACKET_OUTBOX_ROWS`] rows are moved there with the keys of the connections opened
    /// since the last move, so the forwarder does not hold the log to the end;
    /// [`ForwarderReport::packets`] then holds only the rows after the last move.
    pub packets_outbox: Option<PacketOutbox>,
    /// Keep the per-link [`ForwarderReport::samples`] (the datapath tests' accuracy
    /// samples: 56 B per link per sample interval); `run` does not need them.
    pub keep_samples: bool,
    /// How the ports receive; `None` = what measured best here (docs/emulate.md,
    /// "Forwarder throughput"): the TPACKET_V2 ring for GSO buffers, `recvmmsg` for MTU
    /// frames.
    pub rx: Option<RxMode>,
    /// Pin the forwarder thread to this CPU (`sched_setaffinity`); `None` = anywhere.
    pub cpu: Option<usize>,
    /// The Wi-Fi medium of a `kind = "wifi"` experiment (forward/wifi.rs): its links are
    /// driven by the medium, not by a device of their own.
    pub wifi: Option<WifiMedium>,
}

/// Time-series rows handed from the forwarder's thread to the run's, in order.
pub type SeriesOutbox = Arc<std::sync::Mutex<Vec<TimeSeries>>>;
/// Rows the forwarder gathers before moving them to its [`Plan::series_outbox`].
pub const SERIES_OUTBOX_ROWS: usize = 4096;

/// Packet-log rows handed from the forwarder's thread to the run's, in order, each batch
/// with the keys of the connections (by id, from where the previous batch ended) its
/// rows may name.
pub type PacketOutbox = Arc<std::sync::Mutex<Vec<(PacketLog, Vec<FlowKey>)>>>;
/// Packet-log rows the forwarder gathers before moving them to [`Plan::packets_outbox`].
pub const PACKET_OUTBOX_ROWS: usize = 4096;

/// The shortest sleep while events are dense (see `Forwarder::run`): 50 µs, about twice
/// this VM's median timer wake-up latency (15–25 µs), so that a busy link's releases are
/// handled ~5 at a time at 1 Gbit/s of MTU frames while none is later than a fraction
/// of the 100 µs p99 delay budget plus that latency.
const DENSE_SLEEP_NS: u64 = 50_000;

impl Plan {
    /// A plan with defaults for everything but the topology.
    pub fn new(ports: Vec<PortPlan>, links: Vec<LinkPlan>, routes: Vec<Route>) -> Plan {
        Plan {
            netns: None,
            ports,
            links,
            routes,
            conntrack: None,
            sample_interval: None,
            seed: 1,
            mtu: 1500,
            max_frame_bytes: 2048,
            gso: false,
            max_buffers: 1 << 18,
            spin: None,
            epoch_monotonic_ns: None,
            realtime_priority: Some(10),
            measure_from: None,
            measure_until: None,
            series_links: Vec::new(),
            series_outbox: None,
            packet_log_links: Vec::new(),
            packet_sample: 1.0,
            packets_outbox: None,
            keep_samples: true,
            rx: None,
            cpu: None,
            wifi: None,
        }
    }
}

/// Why the forwarder could not start.
#[derive(Debug)]
pub struct ForwardError(pub String);

impl fmt::Display for ForwardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ForwardError {}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

pub(super) fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A forwarder ready to run (sockets bound, qdiscs built).
pub struct Forwarder {
    ports: Vec<Port>,
    links: Vec<Link>,
    routes: Vec<Route>,
    pool: Pool,
    drops: Drops,
    flows: Flows,
    conntrack: Option<Conntrack>,
    hash_salt: u64,
    next_uid: u64,
    epoch: u64,
    sample_interval: Option<Duration>,
    spin: Option<Duration>,
    realtime_priority: Option<i32>,
    realtime: bool,
    cpu: Option<usize>,
    ingress: IngressDrops,
    samples: Vec<Sample>,
    /// Measured period boundaries still to pass.
    measure_from: Option<Time>,
    measure_until: Option<Time>,
    /// No time series sample or packet log row after this (the end of the measured
    /// period, the simulator's end of run).
    series_until: Time,
    series: TimeSeries,
    series_links: Vec<usize>,
    series_outbox: Option<SeriesOutbox>,
    packets: PacketLog,
    packet_sample: f64,
    packets_outbox: Option<PacketOutbox>,
    /// Connections whose keys went to the outbox already.
    conns_moved: usize,
    keep_samples: bool,
    ecn_handshakes: EcnHandshakes,
    medium: Option<Box<wifi::LiveMedium>>,
}

impl Forwarder {
    /// Enters `plan.netns` (on the calling thread), binds one AF_PACKET socket per port
    /// and builds every link's qdisc from its spec.
    pub fn new(plan: Plan) -> Result<Forwarder, ForwardError> {
        if let Some(ns) = &plan.netns {
            crate::netns::enter(ns).map_err(|e| ForwardError(e.to_string()))?;
        }
        for r in &plan.routes {
            if r.link >= plan.links.len() {
                return Err(ForwardError(format!(
                    "route {}/{}: link {} does not exist",
                    r.prefix, r.prefix_len, r.link
                )));
            }
        }
        let mut links = Vec::with_capacity(plan.links.len());
        for (i, lp) in plan.links.iter().enumerate() {
            if let Egress::Port(p) = lp.egress {
                if p >= plan.ports.len() {
                    return Err(ForwardError(format!(
                        "link {}: egress port {p} does not exist",
                        lp.name
                    )));
                }
            }
            let rate_bps = match &lp.rate {
                RateModel::Constant(r) => *r,
                _ => 0,
            };
            let ctx = BuildCtx {
                mtu_bytes: plan.mtu + 14,
                tx_queue_len: 1000,
                link_rate_bps: rate_bps,
                seed: Rng::stream(plan.seed, "emu-qdisc", i as u64).next_u64(),
            };
            if plan.gso && lp.qdisc.splits_gso() {
                return Err(ForwardError(format!(
                    "{}: this discipline splits GSO buffers (split_gso of cake or dualpi2, tbf), \
                     which the forwarder cannot do with real frames; turn GSO off for this \
                     run or set split_gso = false",
                    lp.qdisc_path
                )));
            }
            // Validated when it was parsed: building cannot fail.
            let q = lp.qdisc.build(&ctx);
            links.push(Link {
                dev: Device::new(q, lp.rate.clone(), lp.framing_bytes, 0, lp.shaper),
                delay: lp.delay,
                delay_idx: 0,
                loss_rng: Rng::stream(plan.seed, "emu-loss", i as u64),
                tx_free_at: Time::ZERO,
                clock: Time::ZERO,
                not_before: None,
                pending_wake: None,
                in_flight: VecDeque::new(),
                last_release: Time::ZERO,
                rep: LinkReport {
                    name: lp.name.clone(),
                    qdisc: lp.qdisc.kind().to_string(),
                    ..Default::default()
                },
                plan: lp.clone(),
                measuring: plan.measure_from.is_none(),
                marks_at_start: 0,
                log_packets: plan.packet_log_links.contains(&i),
                prev_counts: LinkCounts::default(),
            });
        }
        let pool = if plan.gso {
            Pool::new(
                VNET_HDR_BYTES + 65_536 + 256,
                plan.max_buffers,
                VNET_HDR_BYTES,
            )
        } else {
            Pool::new(plan.max_frame_bytes.max(64) as usize, plan.max_buffers, 0)
        };
        let rx = plan
            .rx
            .unwrap_or(if plan.gso { RxMode::Ring } else { RxMode::Mmsg });
        // A ring's memory is the kernel's, pinned and allocated up front (a socket buffer
        // only holds what waits): 64 MiB shared by the ports, 2–8 MiB each (16–64 GSO
        // buffers).
        let ring_bytes = ((64usize << 20) / plan.ports.len().max(1)).clamp(2 << 20, 8 << 20);
        let mut ports = Vec::with_capacity(plan.ports.len());
        for pp in &plan.ports {
            let sock = PacketSocket::open(
                &pp.ifname,
                4 << 20,
                plan.gso,
                rx,
                ring_bytes,
                pool.slot_bytes,
            )
            .map_err(|e| ForwardError(format!("AF_PACKET socket on {}: {e}", pp.ifname)))?;
            ports.push(Port {
                rep: PortReport {
                    ifname: pp.ifname.clone(),
                    ..Default::default()
                },
                plan: pp.clone(),
                sock,
                rx_slots: Vec::with_capacity(MAX_BATCH),
                tx: VecDeque::new(),
            });
        }
        for &l in plan.series_links.iter().chain(&plan.packet_log_links) {
            if l >= plan.links.len() {
                return Err(ForwardError(format!("link {l} to record does not exist")));
            }
        }
        let epoch = plan.epoch_monotonic_ns.unwrap_or_else(monotonic_ns);
        Ok(Forwarder {
            ports,
            links,
            routes: plan.routes.clone(),
            pool,
            drops: Drops::new(),
            flows: Flows::default(),
            conntrack: plan.conntrack.map(Conntrack::new),
            hash_salt: sojourn_core::rng::splitmix64_mix(plan.seed ^ 0xf10e),
            next_uid: 1,
            epoch,
            sample_interval: plan.sample_interval,
            spin: plan.spin,
            realtime_priority: plan.realtime_priority,
            realtime: false,
            cpu: plan.cpu,
            ingress: IngressDrops::default(),
            samples: Vec::new(),
            measure_from: plan.measure_from,
            measure_until: plan.measure_until,
            series_until: plan.measure_until.unwrap_or(Time::MAX),
            series: TimeSeries::default(),
            packets: PacketLog::default(),
            packet_sample: plan.packet_sample,
            packets_outbox: plan.packets_outbox.clone(),
            conns_moved: 0,
            keep_samples: plan.keep_samples,
            ecn_handshakes: EcnHandshakes::default(),
            series_links: plan.series_links.clone(),
            series_outbox: plan.series_outbox.clone(),
            medium: plan
                .wifi
                .as_ref()
                .map(|w| Box::new(wifi::LiveMedium::new(w, plan.seed))),
        })
    }
    /// CLOCK_MONOTONIC ns of this run's time 0.
    pub fn epoch_monotonic_ns(&self) -> u64 {
        self.epoch
    }
    #[inline]
    fn now(&self) -> Time {
        Time(monotonic_ns().saturating_sub(self.epoch))
    }
    /// Forwards until `stop` is set (checked at least every 10 ms), then reports.
    pub fn run(&mut self, stop: &AtomicBool) -> ForwarderReport {
        // Sleep precisely: the default 50 µs timer slack would add to every delay.
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
        if let Some(prio) = self.realtime_priority {
            let param = libc::sched_param {
                sched_priority: prio.clamp(1, 99),
            };
            // SAFETY: pid 0 = this thread; param is a valid sched_param.
            self.realtime = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
        }
        if let Some(c) = self.cpu {
            // SAFETY: cpu_set_t is plain data; pid 0 = this thread.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(c, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
        }
        let cpu0 = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        for p in &mut self.ports {
            // Counted from here on (the read resets the kernel's counters).
            let _ = p.sock.kernel_drops();
        }
        let mut next_sample = self.sample_interval.map(|_| Time::ZERO);
        let mut pfds: Vec<libc::pollfd> = self
            .ports
            .iter()
            .map(|p| libc::pollfd {
                fd: p.sock.raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut error = None;
        let mut busy = Histogram::new();
        let mut oversleep = Histogram::new();
        let (mut late_mean, mut late_dev) = (20_000.0f64, 5_000.0f64);
        let (mut spin_budget, mut budget_at) = (0u64, 0u64);
        // Whether to read the sockets this round: not right after a timed wake-up with
        // nothing readable (the releases due now go first; frames that came meanwhile are
        // read a few µs later, in the next round).
        let mut rx_due = true;
        'outer: while !stop.load(Ordering::Relaxed) {
            let iter_start = monotonic_ns();
            let t0 = Time(iter_start.saturating_sub(self.epoch));
            if let Some(t) = self.measure_from.filter(|&t| t <= t0) {
                self.measure_from = None;
                self.measure_boundary(t, true);
            }
            if let Some(t) = self.measure_until.filter(|&t| t <= t0) {
                self.measure_until = None;
                self.measure_boundary(t, false);
            }
            for (pi, pfd) in pfds.iter_mut().enumerate() {
                let readable = std::mem::take(&mut pfd.revents) != 0;
                if !rx_due && !readable {
                    continue;
                }
                if let Err(e) = self.receive(pi) {
                    error = Some(e);
                    break 'outer;
                }
            }
            rx_due = true;
            let now = self.now();
            for li in 0..self.links.len() {
                self.advance(li, now);
                self.release(li, now);
            }
            if let Err(e) = self.flush() {
                error = Some(e);
                break;
            }
            if self.packets.len() >= PACKET_OUTBOX_ROWS {
                self.move_packets();
            }
            if let (Some(ns), Some(iv)) = (next_sample, self.sample_interval) {
                if now >= ns {
                    self.sample(now, Some(ns));
                    let mut n = ns + iv;
                    if n <= now {
                        n = now + iv;
                    }
                    next_sample = Some(n);
                }
            }
            // Sleep until the next event, a frame, or 10 ms (to see `stop`).
            let mut next = self
                .links
                .iter()
                .map(|l| l.next_event())
                .min()
                .unwrap_or(Time::MAX);
            if let Some(ns) = next_sample {
                next = next.min(ns);
            }
            if let Some(b) = self.medium.as_ref().and_then(|m| m.busy_until) {
                next = next.min(b);
            }
            if self.ports.iter().any(|p| !p.tx.is_empty()) {
                next = now; // EAGAIN earlier: retry soon
            }
            let now = self.now();
            busy.record((now.as_ns() + self.epoch).saturating_sub(iter_start));
            if next <= now {
                continue;
            }
            let wait = (next - now).as_ns().min(10_000_000);
            // Spin budget: clock waits may use at most 10% of the elapsed time (bucket of
            // 2 ms). Sparse events (an idle link's releases) get exact timing; dense ones
            // (a busy link at hundreds of Mbit/s) would otherwise keep the thread spinning
            // and take the CPU the hosts' own TCP needs on a 2-core machine.
            let now_ns = now.as_ns();
            spin_budget = (spin_budget + now_ns.saturating_sub(budget_at) / 10).min(2_000_000);
            budget_at = now_ns;
            let lead = match self.spin {
                Some(d) => d.as_ns(),
                None => ((late_mean + 2.0 * late_dev) as u64).min(100_000),
            };
            if wait <= lead && wait <= spin_budget {
                // Close enough: wait on the clock (≤ lead), then handle the event.
                while self.now() < next {
                    std::hint::spin_loop();
                }
                let spent = self.now().as_ns().saturating_sub(now_ns);
                spin_budget = spin_budget.saturating_sub(spent);
                budget_at += spent;
                rx_due = false;
                continue;
            }
            // Dense events (the next one within the lead and no spin budget left: a link
            // busy at hundreds of Mbit/s): sleep at least DENSE_SLEEP on the timer alone,
            // without waking for each arriving frame. Frames carry the kernel's receive
            // times and enter their links at those times when read (`receive`), so
            // waking late costs no link time and moves releases by at most that sleep;
            // waking for every frame (every ~10 µs at 1 Gbit/s of MTU frames) cost a
            // system call round per frame and held the forwarder below 1 Gbit/s.
            let dense = wait <= lead;
            let sleep = if dense {
                wait.max(DENSE_SLEEP_NS)
            } else {
                wait - lead
            };
            let ts = libc::timespec {
                tv_sec: (sleep / 1_000_000_000) as libc::time_t,
                tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
            };
            let nfds = if dense { 0 } else { pfds.len() as libc::nfds_t };
            // SAFETY: pfds is a valid array of pollfd (`nfds` of them read); ts a valid
            // timespec.
            let woken = unsafe { libc::ppoll(pfds.as_mut_ptr(), nfds, &ts, std::ptr::null()) };
            if dense {
                // Nothing was polled: read every port in the next round.
                for pfd in pfds.iter_mut() {
                    pfd.revents = libc::POLLIN;
                }
            }
            if woken == 0 {
                let asked = now.as_ns() + sleep;
                let late = self.now().as_ns().saturating_sub(asked);
                oversleep.record(late);
                // Lead = mean + 2 mean deviations of the oversleep (≈ its 90th
                // percentile), gains 1/16; a rare multi-ms stall (a non-preemptible kernel
                // section elsewhere) is clipped so it cannot make the thread spin long.
                let x = late.min(100_000) as f64;
                late_dev += ((x - late_mean).abs() - late_dev) / 16.0;
                late_mean += (x - late_mean) / 16.0;
                rx_due = false;
            }
        }
        let end = self.now();
        let mut rep = self.finish(end, cpu0, error);
        rep.busy_ns = busy;
        rep.oversleep_ns = oversleep;
        rep
    }
    fn finish(&mut self, end: Time, cpu0: u64, error: Option<String>) -> ForwarderReport {
        for p in &mut self.ports {
            p.rep.rx_kernel_drops += p.sock.kernel_drops().unwrap_or(0);
        }
        if self.sample_interval.is_some() {
            self.sample(end, None);
        }
        if self.measure_until.is_some() {
            // Stopped before the end of the measured period.
            self.measure_until = None;
            self.measure_boundary(end, false);
        }
        let mut links = Vec::with_capacity(self.links.len());
        for (li, l) in self.links.iter_mut().enumerate() {
            l.rep.queued_at_end = l.dev.qdisc.len_packets() as u64 + l.in_flight.len() as u64;
            if let Some(m) = self.medium.as_ref().filter(|m| m.holds(li)) {
                l.rep.queued_at_end += m.queued_on(li);
            }
            l.rep.ecn_marks = l.dev.qdisc.ecn_marks();
            if l.measuring {
                l.measuring = false;
                l.rep.measured.until_ns = end.as_ns();
                l.rep.measured.ecn_marks = l.rep.ecn_marks - l.marks_at_start;
            }
            links.push(l.rep.clone());
        }
        ForwarderReport {
            epoch_monotonic_ns: self.epoch,
            duration_ns: end.as_ns(),
            cpu_ns: clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(cpu0),
            ports: self.ports.iter().map(|p| p.rep.clone()).collect(),
            links,
            ingress_drops: self.ingress.clone(),
            samples: std::mem::take(&mut self.samples),
            unsent_at_end: self.ports.iter().map(|p| p.tx.len() as u64).sum(),
            error,
            realtime: self.realtime,
            busy_ns: Histogram::new(),
            oversleep_ns: Histogram::new(),
            series: std::mem::take(&mut self.series),
            packets: std::mem::take(&mut self.packets),
            conns: std::mem::take(&mut self.flows.conns),
            ecn_handshakes: self.ecn_handshakes.clone(),
        }
    }
}

/// A forwarder running on its own thread.
pub struct ForwarderHandle {
    thread: std::thread::JoinHandle<ForwarderReport>,
    /// CLOCK_MONOTONIC ns of the run's time 0.
    pub epoch_monotonic_ns: u64,
}

impl ForwarderHandle {
    /// Waits for the thread (after `stop` was set) and returns its report. A panic's
    /// message makes the error; a payload that is not a message (what a discipline the
    /// front implements unwinds with, qdisc/external.rs) goes on unwinding on this thread,
    /// to the front that started the run.
    pub fn join(self) -> Result<ForwarderReport, ForwardError> {
        self.thread
            .join()
            .map_err(|payload| panicked(payload, "forwarder thread panicked"))
    }

    /// The thread has ended before it was asked to stop (it panicked).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }
}

/// The error of a forwarder thread that panicked with a message; any other payload (what a
/// discipline the front implements unwinds with) goes on unwinding on the calling thread.
fn panicked(payload: Box<dyn std::any::Any + Send>, what: &str) -> ForwardError {
    if payload.is::<&str>() || payload.is::<String>() {
        ForwardError(what.into())
    } else {
        std::panic::resume_unwind(payload)
    }
}

/// Starts a forwarder on a new thread (entering `plan.netns` there); returns once its
/// sockets are bound, so traffic may start, or with the reason it could not start.
pub fn spawn(plan: Plan, stop: Arc<AtomicBool>) -> Result<ForwarderHandle, ForwardError> {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("sojourn-forwarder".into())
        .spawn(move || match Forwarder::new(plan) {
            Ok(mut f) => {
                let _ = tx.send(Ok(f.epoch_monotonic_ns()));
                f.run(&stop)
            }
            Err(e) => {
                let _ = tx.send(Err(e));
                ForwarderReport::default()
            }
        })
        .map_err(|e| ForwardError(format!("spawn forwarder thread: {e}")))?;
    match rx.recv() {
        Ok(Ok(epoch)) => Ok(ForwarderHandle {
            thread,
            epoch_monotonic_ns: epoch,
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => Err(match thread.join() {
            Err(payload) => panicked(payload, "forwarder thread died while starting"),
            Ok(_) => ForwardError("forwarder thread died while starting".into()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_mode_refuses_disciplines_that_split_buffers() {
        use sojourn_core::params::{Table, Value};
        let spec = |kind: &str, args: &[(&str, Value)]| {
            let mut t = Table::default();
            t.0.push(("kind".into(), Value::Str(kind.into())));
            t.0.extend(args.iter().map(|(k, v)| (k.to_string(), v.clone())));
            QdiscSpec::parse(&Value::Table(t), "links.l.qdisc", &BuildCtx::default()).unwrap()
        };
        let link = |q: QdiscSpec| LinkPlan {
            name: "l".into(),
            egress: Egress::Route,
            rate: RateModel::Constant(1_000_000),
            delay: Duration::ZERO,
            delay_schedule: vec![],
            loss: 0.0,
            framing_bytes: 0,
            shaper: false,
            qdisc: q,
            qdisc_path: "links.l.qdisc".into(),
            classifier: None,
        };
        let s = |v: &str| Value::Str(v.into());
        let tbf = [
            ("rate", s("5Mbit")),
            ("burst", Value::Int(3028)),
            ("limit", Value::Int(100_000)),
        ];
        for (name, q, refused) in [
            // cake and dualpi2 split by default, as Linux's sch_cake and sch_dualpi2 do.
            ("cake", spec("cake", &[]), true),
            ("dualpi2", spec("dualpi2", &[]), true),
            ("tbf", spec("tbf", &tbf), true),
            (
                "a splitting child",
                spec("prio", &[("child", s("cake"))]),
                true,
            ),
            (
                "cake, split_gso off",
                spec("cake", &[("split_gso", Value::Bool(false))]),
                false,
            ),
            ("fq_codel", spec("fq_codel", &[]), false),
        ] {
            assert_eq!(q.splits_gso(), refused, "{name}");
            let mut plan = Plan::new(vec![], vec![link(q)], vec![]);
            plan.realtime_priority = None;
            plan.gso = true;
            let r = Forwarder::new(plan.clone());
            assert_eq!(r.is_err(), refused, "{name}");
            if let Err(e) = r {
                assert!(e.0.starts_with("links.l.qdisc: "), "{e}");
            }
            plan.gso = false;
            let r = Forwarder::new(plan);
            assert!(r.is_ok(), "without GSO {name} runs: {:?}", r.err());
        }
    }
}
