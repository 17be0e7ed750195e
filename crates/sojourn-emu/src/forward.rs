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
//!   [`DropReason`], queued at the end, CE marks written, the qdisc sojourn histogram and
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
//! `__qdisc_run` does). Frame bytes stay in a buffer pool; the [`Packet`] the qdisc
//! holds carries the buffer's slot in the low 24 bits of `uid`.

use crate::afpacket::{PacketSocket, RxMode, MAX_BATCH, VNET_HDR_BYTES};
use crate::netns::Mac;
use crate::wire;
use sojourn_core::conntrack::{lookup, Conntrack};
pub use sojourn_core::conntrack::{ConntrackPlan, CountBytes, CountDirection};
use sojourn_core::device::{Device, Poll};
pub use sojourn_core::device::{RateModel, Trace};
use sojourn_core::hist::Histogram;
use sojourn_core::qdisc::{BuildCtx, DropReason, Drops, Qdisc, QdiscSpec};
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, FlowKey, Packet, Time};
use sojourn_record::metrics::{LinkCounts, PacketLog, TimeSeries};
use std::collections::{HashMap, VecDeque};
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
    /// `sample_interval`, by the simulator's own builder ([`TimeSeries::push_link`]).
    pub series_links: Vec<usize>,
    /// Where the time series go while the run proceeds (`run`'s streaming writer): every
    /// [`SERIES_OUTBOX_ROWS`] rows are moved there, so the forwarder does not hold them to
    /// the end; [`ForwarderReport::series`] then holds only the rows after the last move.
    pub series_outbox: Option<SeriesOutbox>,
    /// Links whose dequeues and drops go into [`ForwarderReport::packets`] (the
    /// simulator's packet log), a deterministic `packet_sample` fraction by packet number.
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

/// Frames the forwarder dropped before any link took them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngressDrops {
    /// Not IPv4/IPv6 (ARP, LLDP…): the emulated path carries IP only.
    pub not_ip: u64,
    /// No route for the destination.
    pub unroutable: u64,
    /// Longer than `max_frame_bytes` (e.g. a GSO/GRO buffer: offloads must be off).
    pub oversize: u64,
    /// Every buffer in use.
    pub no_buffer: u64,
}

/// TCP handshake segments the forwarder received, by what they say about ECN
/// ([`wire::ecn_setup`]); index = [`wire::EcnSetup`] as usize (None, Ecn, AccEcn, Other).
/// Retransmitted SYNs count again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EcnHandshakes {
    pub syn: [u64; 4],
    pub syn_ack: [u64; 4],
}

/// Per-port counters.
#[derive(Clone, Debug, Default)]
pub struct PortReport {
    pub ifname: String,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Frames the kernel refused on send (e.g. ENOBUFS: the receiver's backlog was full).
    pub tx_errors: u64,
    /// Frames the kernel dropped before the forwarder read them (its socket's receive
    /// buffer was full: `PACKET_STATISTICS` `tp_drops`). Not in `rx_frames`: they never
    /// reached the forwarder, so they are outside its conservation identity.
    pub rx_kernel_drops: u64,
    /// GSO buffers received (more than one segment; GSO mode only).
    pub rx_gso_buffers: u64,
}

/// Per-link counters; `received = delivered + dropped + queued_at_end`.
#[derive(Clone, Debug, Default)]
pub struct LinkReport {
    pub name: String,
    pub qdisc: String,
    pub received_pkts: u64,
    pub received_bytes: u64,
    /// Released at the far end (to a port or the next link), in frames (a GSO buffer is
    /// one, as `tc` counts it) and bytes on the wire (every segment with its headers).
    pub delivered_pkts: u64,
    pub delivered_bytes: u64,
    /// The wire packets of the delivered frames (a GSO buffer's segments; = frames with
    /// MTU frames).
    pub delivered_segs: u64,
    /// By [`DropReason`] (index = `reason as usize`); qdisc drops and link loss.
    pub drops: [u64; DropReason::COUNT],
    /// In the qdisc, being serialised or propagating when the run stopped.
    pub queued_at_end: u64,
    /// CE marks the qdisc applied (its own count).
    pub ecn_marks: u64,
    /// CE codepoints written into real IP headers (ECT → CE).
    pub ce_written: u64,
    /// Qdisc sojourn (dequeue − enqueue) of every packet dequeued in the measured period
    /// ([`Plan::measure_from`]..[`Plan::measure_until`]), ns.
    pub sojourn_ns: Histogram,
    /// Counters of the measured period only.
    pub measured: Measured,
    /// How late each release happened versus its due time, ns (timer + scheduling
    /// error of this thread: the delay accuracy).
    pub release_late_ns: Histogram,
}

impl LinkReport {
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }
}

/// A link's counters over the measured period ([`Plan::measure_from`] to
/// [`Plan::measure_until`]; the whole run without them), as the simulator's link counters
/// after its warm-up reset.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Start and end of the period, ns from the epoch (`until_ns` = the stop if the run
    /// stopped before `measure_until`).
    pub since_ns: u64,
    pub until_ns: u64,
    /// Released at the far end in the period (frames, wire bytes, wire packets).
    pub delivered_pkts: u64,
    pub delivered_bytes: u64,
    pub delivered_segs: u64,
    /// Drops in the period, by [`DropReason`].
    pub drops: [u64; DropReason::COUNT],
    /// CE marks the qdisc made in the period.
    pub ecn_marks: u64,
}

/// Per connection (5-tuple, both directions; a SYN after the connection closed starts a
/// new one, as conntrack does) what the forwarder saw, indexed by its connection id.
#[derive(Clone, Debug)]
pub struct ConnReport {
    /// The original direction (the first packet's).
    pub key: FlowKey,
    /// When its first packet arrived, ns from the epoch.
    pub first_ns: u64,
    /// Packets of the connection dropped on any link, in its original direction and in
    /// the reply direction (TCP segments: a dropped GSO buffer counts all of its own).
    pub drops_original: u64,
    pub drops_reply: u64,
}

/// One time series sample of one link.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub t_ns: u64,
    pub link: usize,
    pub qlen_pkts: u64,
    pub qlen_bytes: u64,
    /// Cumulative since the start (differences give throughput).
    pub delivered_bytes: u64,
    pub delivered_pkts: u64,
    pub dropped_pkts: u64,
}

/// What a run of the forwarder did.
#[derive(Clone, Debug, Default)]
pub struct ForwarderReport {
    /// CLOCK_MONOTONIC ns of time 0.
    pub epoch_monotonic_ns: u64,
    /// Run time, ns from the epoch to the stop.
    pub duration_ns: u64,
    /// CPU time of the forwarder thread, ns.
    pub cpu_ns: u64,
    pub ports: Vec<PortReport>,
    pub links: Vec<LinkReport>,
    pub ingress_drops: IngressDrops,
    pub samples: Vec<Sample>,
    /// Frames released to a port but still waiting for the socket when stopped.
    pub unsent_at_end: u64,
    /// The first socket error, if the thread stopped on one.
    pub error: Option<String>,
    /// Whether the thread ran under SCHED_FIFO.
    pub realtime: bool,
    /// Work time of each loop iteration (receive, advance, release, send), ns.
    pub busy_ns: Histogram,
    /// How much later than asked each timed sleep ended, ns (timer + scheduler error).
    pub oversleep_ns: Histogram,
    /// The links' time series ([`Plan::series_links`]) in the simulator's metrics, at
    /// multiples of the sample interval.
    pub series: TimeSeries,
    /// The packet log of [`Plan::packet_log_links`] (the simulator's schema; `flow` is
    /// 2 × the connection id of [`ForwarderReport::conns`] + 1 in the reply direction,
    /// `uid` the packet's number).
    pub packets: PacketLog,
    /// Every connection seen, by connection id.
    pub conns: Vec<ConnReport>,
    /// The ECN negotiation seen in the handshakes' real headers.
    pub ecn_handshakes: EcnHandshakes,
}

impl ForwarderReport {
    /// Every frame received is accounted for: sent, refused by the kernel, dropped by
    /// the forwarder with a reason, or still inside at the end. Checked over the whole
    /// forwarder and per link.
    pub fn check_conservation(&self) -> Result<(), String> {
        for l in &self.links {
            let out = l.delivered_pkts + l.dropped() + l.queued_at_end;
            if l.received_pkts != out {
                return Err(format!(
                    "link {}: received {} ≠ delivered {} + dropped {} + queued {}",
                    l.name,
                    l.received_pkts,
                    l.delivered_pkts,
                    l.dropped(),
                    l.queued_at_end
                ));
            }
        }
        let rx: u64 = self.ports.iter().map(|p| p.rx_frames).sum();
        let tx: u64 = self.ports.iter().map(|p| p.tx_frames + p.tx_errors).sum();
        let d = &self.ingress_drops;
        let fwd = d.not_ip + d.unroutable + d.oversize + d.no_buffer;
        let link_drops: u64 = self.links.iter().map(|l| l.dropped()).sum();
        let queued: u64 = self.links.iter().map(|l| l.queued_at_end).sum();
        if rx != tx + fwd + link_drops + queued + self.unsent_at_end {
            return Err(format!(
                "forwarder: received {rx} ≠ sent {tx} + ingress drops {fwd} + link drops \
                 {link_drops} + queued {queued} + unsent {}",
                self.unsent_at_end
            ));
        }
        Ok(())
    }
}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

// ---------------------------------------------------------------------------------------
// Buffer pool: fixed-size slots in lazily allocated chunks; a slot index is 24 bits.

const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

struct Pool {
    chunks: Vec<Box<[u8]>>,
    slot_bytes: usize,
    /// Slots per chunk (chunks of ~2 MiB).
    chunk_slots: usize,
    /// Bytes before the frame in each slot (the `virtio_net_hdr` in GSO mode, else 0).
    hdr: usize,
    lens: Vec<u32>,
    free: Vec<u32>,
    max_slots: usize,
}

impl Pool {
    fn new(slot_bytes: usize, max_slots: usize, hdr: usize) -> Pool {
        Pool {
            chunks: Vec::new(),
            slot_bytes,
            chunk_slots: ((2 << 20) / slot_bytes).clamp(1, 1024),
            hdr,
            lens: Vec::new(),
            free: Vec::new(),
            max_slots: max_slots.min(1 << SLOT_BITS),
        }
    }

    fn alloc(&mut self) -> Option<u32> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        let cs = self.chunk_slots;
        let have = self.chunks.len() * cs;
        if have + cs > self.max_slots.max(cs) {
            return None;
        }
        self.chunks
            .push(vec![0u8; cs * self.slot_bytes].into_boxed_slice());
        self.lens.resize(have + cs, 0);
        // Hand out low slots first.
        self.free
            .extend((have as u32 + 1..(have + cs) as u32).rev());
        Some(have as u32)
    }

    #[inline]
    fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }

    #[inline]
    fn ptr(&mut self, slot: u32) -> *mut u8 {
        let s = slot as usize;
        let off = (s % self.chunk_slots) * self.slot_bytes;
        self.chunks[s / self.chunk_slots][off..].as_mut_ptr()
    }

    /// The slot's bytes as the socket moves them (virtio header + frame in GSO mode).
    #[inline]
    fn raw(&self, slot: u32) -> &[u8] {
        let s = slot as usize;
        let off = (s % self.chunk_slots) * self.slot_bytes;
        &self.chunks[s / self.chunk_slots][off..off + self.lens[s] as usize]
    }

    /// The Ethernet frame in the slot.
    #[inline]
    fn frame(&self, slot: u32) -> &[u8] {
        &self.raw(slot)[self.hdr..]
    }

    #[inline]
    fn frame_mut(&mut self, slot: u32) -> &mut [u8] {
        let s = slot as usize;
        let off = (s % self.chunk_slots) * self.slot_bytes;
        let len = self.lens[s] as usize;
        &mut self.chunks[s / self.chunk_slots][off + self.hdr..off + len]
    }
}

#[inline]
fn slot_of(p: &Packet) -> u32 {
    (p.uid & SLOT_MASK) as u32
}

// ---------------------------------------------------------------------------------------
// Links.

struct Link {
    plan: LinkPlan,
    /// sojourn-core's sans-IO device: the qdisc, the serialiser at the link's rate
    /// (constant, schedule or Mahimahi trace, framing per wire packet) — the same code
    /// the simulator drives. Delay, loss and the clock are the forwarder's.
    dev: Device,
    delay: Duration,
    delay_idx: usize,
    loss_rng: Rng,
    /// End of the transmission in progress (the device is busy until `tx_done` is
    /// called for it), or of the last one.
    tx_free_at: Time,
    /// Last time passed to the qdisc (its operations must see non-decreasing times).
    clock: Time,
    /// Do not poll before this time (the qdisc's watchdog), unless an enqueue comes.
    not_before: Option<Time>,
    /// The device's outstanding wake-up (from `take_wake`), until `wake` is called.
    pending_wake: Option<Time>,
    /// Packets propagating, with release times (non-decreasing).
    in_flight: VecDeque<(Time, Packet)>,
    last_release: Time,
    rep: LinkReport,
    /// Inside the measured period (counters in `rep.measured`, sojourn histogram).
    measuring: bool,
    /// The qdisc's CE mark count when the measured period began.
    marks_at_start: u64,
    /// Dequeues and drops go into the packet log.
    log_packets: bool,
    /// Counters at the previous time series sample.
    prev_counts: LinkCounts,
}

impl Link {
    fn release_time(&mut self, tx_end: Time) -> Time {
        let sched = &self.plan.delay_schedule;
        while self.delay_idx < sched.len() && sched[self.delay_idx].0 <= tx_end {
            self.delay = sched[self.delay_idx].1;
            self.delay_idx += 1;
        }
        let t = (tx_end + self.delay).max(self.last_release);
        self.last_release = t;
        t
    }

    fn queued(&self) -> usize {
        self.dev.qdisc.len_packets()
    }

    /// When this link next needs the thread: its next release, or the next dequeue.
    fn next_event(&self) -> Time {
        let mut t = self.in_flight.front().map_or(Time::MAX, |&(t, _)| t);
        if self.queued() > 0 {
            let d = self.tx_free_at.max(self.not_before.unwrap_or(Time::ZERO));
            t = t.min(d);
        }
        t
    }
}

// ---------------------------------------------------------------------------------------
// Flow table: dense flow ids for conntrack, and which direction is the original.

/// FlowKey's own symmetric mixer as the table's hash (std's SipHash costs more than the
/// rest of the lookup; keys come from our own namespaces, so DoS resistance is moot).
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        sojourn_core::rng::splitmix64_mix(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.0 = self.0.rotate_left(8) ^ v as u64;
    }
    fn write_u16(&mut self, v: u16) {
        self.0 = self.0.rotate_left(16) ^ v as u64;
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = self.0.rotate_left(32) ^ v as u64;
    }
}

type KeyMap<V> = HashMap<FlowKey, V, std::hash::BuildHasherDefault<KeyHasher>>;

#[derive(Default)]
struct Flows {
    ids: KeyMap<u32>,
    conns: Vec<ConnReport>,
    /// Whether a FIN or RST of the connection was seen.
    closed: Vec<bool>,
}

impl Flows {
    /// Dense id of the connection of `key` and whether `key` is its original direction.
    /// A TCP SYN (without ACK) on a connection that saw a FIN or RST starts a new
    /// connection with a new id (a port reused after TIME_WAIT; conntrack does the same).
    fn lookup(&mut self, key: FlowKey, tcp_flags: u8, now_ns: u64) -> (u32, bool) {
        use sojourn_core::packet::tcp_flags as f;
        let found = match self.ids.get(&key) {
            Some(&id) => Some(id),
            None => self.ids.get(&key.reversed()).copied(),
        };
        let syn = key.proto == 6 && tcp_flags & (f::SYN | f::ACK) == f::SYN;
        let id = match found {
            Some(id) if !(syn && self.closed[id as usize]) => {
                if key.proto == 6 && tcp_flags & (f::FIN | f::RST) != 0 {
                    self.closed[id as usize] = true;
                }
                return (id, self.conns[id as usize].key == key);
            }
            Some(_) => {
                self.ids.remove(&key.reversed());
                self.conns.len() as u32
            }
            None => self.conns.len() as u32,
        };
        self.conns.push(ConnReport {
            key,
            first_ns: now_ns,
            drops_original: 0,
            drops_reply: 0,
        });
        self.closed.push(false);
        self.ids.insert(key, id);
        (id, true)
    }
}

// ---------------------------------------------------------------------------------------
// The forwarder.

struct Port {
    plan: PortPlan,
    sock: PacketSocket,
    /// Slots posted for the next receive.
    rx_slots: Vec<u32>,
    /// Frames released to this port, not yet sent.
    tx: VecDeque<u32>,
    rep: PortReport,
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
                dev: Device::new(q, lp.rate.clone(), lp.framing_bytes, 0, false),
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

    /// Longest-prefix match, routes for this ingress before ingress-agnostic ones.
    fn route(&self, from: Hop, dst: IpAddr) -> Option<usize> {
        let mut best: Option<(u8, bool, usize)> = None;
        for r in &self.routes {
            let specific = match r.ingress {
                None => false,
                Some(h) if h == from => true,
                Some(_) => continue,
            };
            if !prefix_matches(r.prefix, r.prefix_len, dst) {
                continue;
            }
            let cand = (r.prefix_len, specific, r.link);
            if best.is_none_or(|b| (cand.0, cand.1) > (b.0, b.1)) {
                best = Some(cand);
            }
        }
        best.map(|b| b.2)
    }

    /// Drains the drop sink of link `li` (drops at `t`) into its counters, freeing the
    /// buffers.
    fn settle_drops(&mut self, li: usize, t: Time) {
        let mut drops = std::mem::take(&mut self.drops);
        for d in drops.drain() {
            self.count_drop(li, &d.pkt, d.reason, t);
        }
        self.drops = drops;
    }

    /// Counts a drop of `p` on link `li` at `t` (link, measured period, connection,
    /// packet log) and frees its buffer.
    fn count_drop(&mut self, li: usize, p: &Packet, reason: DropReason, t: Time) {
        let link = &mut self.links[li];
        link.rep.drops[reason as usize] += 1;
        if link.measuring {
            link.rep.measured.drops[reason as usize] += 1;
        }
        let mut reply = false;
        if let Some(c) = self.flows.conns.get_mut(p.conversation() as usize) {
            reply = c.key != p.key;
            // A connection's drops count its TCP segments (a GSO buffer's all), as the
            // flow's `pkts_sent` (tcpi_segs_out) does.
            let segs = p.gso_segs.max(1) as u64;
            if reply {
                c.drops_reply += segs;
            } else {
                c.drops_original += segs;
            }
        }
        if link.log_packets && t <= self.series_until {
            let log = &mut self.packets;
            log_packet(log, t, li, p, Some(reason), self.packet_sample, reply);
        }
        self.pool.release(slot_of(p));
    }

    /// Passes a boundary of the measured period at `t` (≤ now): every link is first
    /// brought to `t` (its dequeues and releases due by then happen before), then its
    /// measured counters start (`start`) or stop.
    fn measure_boundary(&mut self, t: Time, start: bool) {
        for li in 0..self.links.len() {
            self.advance(li, t);
            self.release(li, t);
            let link = &mut self.links[li];
            let marks = link.dev.qdisc.ecn_marks();
            if start {
                link.measuring = true;
                link.marks_at_start = marks;
                // As the simulator's `reset_stats` at the end of warm-up.
                link.rep.sojourn_ns = Histogram::new();
                link.rep.measured = Measured {
                    since_ns: t.as_ns(),
                    ..Measured::default()
                };
            } else if link.measuring {
                link.measuring = false;
                link.rep.measured.until_ns = t.as_ns();
                link.rep.measured.ecn_marks = marks - link.marks_at_start;
            }
        }
    }

    /// Starts every transmission link `li` would have started up to `t`, each at its
    /// exact (virtual) time.
    fn advance(&mut self, li: usize, t: Time) {
        loop {
            let link = &mut self.links[li];
            if link.dev.is_busy() {
                if link.tx_free_at > t {
                    return;
                }
                link.dev.tx_done(link.tx_free_at);
            }
            if link.queued() == 0 {
                return;
            }
            let mut at = link.tx_free_at.max(link.clock);
            if let Some(w) = link.not_before {
                if w > t {
                    return;
                }
                at = at.max(w);
            }
            if let Some(w) = link.pending_wake {
                if w <= at {
                    link.dev.wake(w);
                    link.pending_wake = None;
                }
            }
            link.clock = at;
            link.not_before = None;
            let mut dequeued = None;
            let mut sent = None;
            let res = link.dev.poll(
                at,
                &mut self.drops,
                &mut |p: &Packet| dequeued = Some(*p),
                |p, end| sent = Some((p, end)),
            );
            if let Some(p) = dequeued {
                if link.measuring {
                    link.rep
                        .sojourn_ns
                        .record(at.saturating_since(p.enqueued_at).as_ns());
                }
                if link.log_packets && at <= self.series_until {
                    let reply = self
                        .flows
                        .conns
                        .get(p.conversation() as usize)
                        .is_some_and(|c| c.key != p.key);
                    log_packet(
                        &mut self.packets,
                        at,
                        li,
                        &p,
                        None,
                        self.packet_sample,
                        reply,
                    );
                }
            }
            if !self.drops.is_empty() {
                self.settle_drops(li, at);
            }
            let link = &mut self.links[li];
            match res {
                Poll::Sent { end } => {
                    link.tx_free_at = end;
                    if let Some((p, _)) = sent {
                        self.depart(li, p, end);
                    }
                }
                Poll::Burst { .. } => {
                    // A GSO buffer (GSO mode): the device times its wire segments back to
                    // back; the real buffer leaves whole when its last segment is out (the
                    // kernel segments it on the way to the host, or hands it on).
                    let buffer = *link.dev.burst_buffer().expect("a burst has a buffer");
                    let mut end = at;
                    while let Some(seg) = link.dev.next_segment() {
                        end = seg.end;
                    }
                    link.tx_free_at = end;
                    self.depart(li, buffer, end);
                }
                Poll::Busy(_) => return,
                Poll::Idle => {
                    if let Some(w) = link.dev.take_wake() {
                        link.pending_wake = Some(w);
                    }
                    if link.queued() == 0 {
                        return;
                    }
                    // Throttled (a shaper or pacer: the kernel's qdisc watchdog). A qdisc
                    // that counts packets but gives none without a wake-up (should not
                    // happen) is polled again in 100 µs rather than spun on.
                    let w = link
                        .pending_wake
                        .unwrap_or(at + Duration::from_us(100))
                        .max(at + Duration::from_ns(1));
                    link.not_before = Some(w);
                    if w > t {
                        return;
                    }
                }
            }
        }
    }

    /// A packet's serialisation on link `li` ended at `end`: random loss, the CE mark
    /// into the real header, and into the delay line.
    fn depart(&mut self, li: usize, p: Packet, end: Time) {
        let link = &mut self.links[li];
        if link.plan.loss > 0.0 && link.loss_rng.chance(link.plan.loss) {
            self.count_drop(li, &p, DropReason::LinkLoss, end);
            return;
        }
        if p.ecn == sojourn_core::Ecn::Ce {
            let f = self.pool.frame_mut(slot_of(&p));
            let was_ce = wire::ecn_bits(f) == 3;
            if wire::set_ce(f) && !was_ce {
                link.rep.ce_written += 1;
            }
        }
        let rel = link.release_time(end);
        link.in_flight.push_back((rel, p));
    }

    /// Enqueues `p` (its frame in the pool) into link `li` at `now`.
    fn enqueue(&mut self, li: usize, mut p: Packet, now: Time) {
        self.advance(li, now);
        let link = &mut self.links[li];
        link.rep.received_pkts += 1;
        link.rep.received_bytes += p.len_bytes as u64;
        if let (Some(map), Some(_)) = (&link.plan.classifier, &self.conntrack) {
            p.priority = lookup(map, p.ct_bytes).unwrap_or(0);
        }
        let at = now.max(link.clock);
        link.clock = at;
        p.enqueued_at = at;
        link.not_before = None;
        let extra = link.dev.enqueue(p, at, &mut self.drops);
        // Splitting disciplines are refused in GSO mode (`QdiscSpec::splits_gso`), and MTU
        // frames are never split: a split would leave several packets on one buffer slot.
        assert_eq!(extra, 0, "a discipline split a GSO buffer in the forwarder");
        if !self.drops.is_empty() {
            self.settle_drops(li, at);
        }
        self.advance(li, now);
    }

    /// Handles one received frame in slot `slot` from port `pi`.
    fn ingress(&mut self, pi: usize, slot: u32, len: u32, now: Time) {
        let port = &mut self.ports[pi];
        port.rep.rx_frames += 1;
        port.rep.rx_bytes += len as u64;
        self.pool.lens[slot as usize] = len;
        if (len as usize) < self.pool.hdr {
            self.ingress.not_ip += 1;
            self.pool.release(slot);
            return;
        }
        let Some(h) = wire::parse(self.pool.frame(slot)) else {
            self.ingress.not_ip += 1;
            self.pool.release(slot);
            return;
        };
        if let Some((syn_ack, setup)) = wire::ecn_setup(&h) {
            let c = &mut self.ecn_handshakes;
            let row = if syn_ack { &mut c.syn_ack } else { &mut c.syn };
            row[setup as usize] += 1;
        }
        let Some(li) = self.route(Hop::Port(pi), h.dst) else {
            self.ingress.unroutable += 1;
            self.pool.release(slot);
            return;
        };
        let frame_len = len - self.pool.hdr as u32;
        let mut p = wire::packet(&h, frame_len);
        if self.pool.hdr > 0 {
            // A GSO buffer (virtio_net_hdr: gso_type at byte 1, gso_size at bytes 4..6, in
            // host byte order): the qdisc sees its wire size — every segment with its own
            // copy of the headers — and its segment count, as the simulator's GSO
            // buffers (Packet::gso_segs).
            let raw = self.pool.raw(slot);
            let gso_type = raw[1] & !VIRTIO_NET_HDR_GSO_ECN;
            let gso_size = u16::from_ne_bytes([raw[4], raw[5]]) as u32;
            if gso_type != 0 && gso_size > 0 && h.payload_bytes > gso_size {
                let headers = frame_len - h.payload_bytes;
                let segs = h.payload_bytes.div_ceil(gso_size);
                p.len_bytes = h.payload_bytes + segs * headers;
                p.gso_segs = segs.min(u16::MAX as u32) as u16;
                p.gso_size = gso_size as u16;
                p.truesize_bytes = sojourn_core::packet::truesize_for(frame_len);
                self.ports[pi].rep.rx_gso_buffers += 1;
            }
        }
        p.uid = (self.next_uid << SLOT_BITS) | slot as u64;
        self.next_uid += 1;
        p.hash = p.key.hash(self.hash_salt);
        p.created_at = now;
        let (flow, original) = self.flows.lookup(p.key, h.tcp_flags, now.as_ns());
        p.tag = flow as u64;
        if let Some(ct) = &mut self.conntrack {
            p.ct_bytes = ct.account(&p, original);
        }
        self.enqueue(li, p, now);
    }

    /// Releases every packet of link `li` due by `now`.
    fn release(&mut self, li: usize, now: Time) {
        while let Some(&(due, _)) = self.links[li].in_flight.front() {
            if due > now {
                return;
            }
            let (_, p) = self.links[li].in_flight.pop_front().unwrap();
            let link = &mut self.links[li];
            let segs = p.gso_segs.max(1) as u64;
            link.rep.delivered_pkts += 1;
            link.rep.delivered_bytes += p.len_bytes as u64;
            link.rep.delivered_segs += segs;
            if link.measuring {
                link.rep.measured.delivered_pkts += 1;
                link.rep.measured.delivered_bytes += p.len_bytes as u64;
                link.rep.measured.delivered_segs += segs;
            }
            link.rep
                .release_late_ns
                .record(now.saturating_since(due).as_ns());
            match link.plan.egress {
                Egress::Port(pi) => self.send_to_port(pi, slot_of(&p)),
                Egress::Route => {
                    let dst = wire::parse(self.pool.frame(slot_of(&p))).map(|h| h.dst);
                    match dst.and_then(|d| self.route(Hop::Link(li), d)) {
                        // The next link receives it at its due time (virtual time).
                        Some(next) => self.enqueue(next, p, due),
                        None => {
                            self.ingress.unroutable += 1;
                            self.pool.release(slot_of(&p));
                        }
                    }
                }
            }
        }
    }

    fn send_to_port(&mut self, pi: usize, slot: u32) {
        let port = &mut self.ports[pi];
        let f = self.pool.frame_mut(slot);
        let dst = if port.plan.neighbours.is_empty() {
            port.plan.peer_mac
        } else {
            wire::parse(f)
                .and_then(|h| {
                    port.plan
                        .neighbours
                        .iter()
                        .find(|(a, _)| *a == h.dst)
                        .map(|n| n.1)
                })
                .unwrap_or(port.plan.peer_mac)
        };
        wire::rewrite_macs(f, port.plan.mac.0, dst.0);
        port.tx.push_back(slot);
    }

    /// Sends what is queued on every port. Returns an error only for a broken socket.
    fn flush(&mut self) -> Result<(), String> {
        for port in &mut self.ports {
            while !port.tx.is_empty() {
                let n = port.tx.len().min(MAX_BATCH);
                let frames: Vec<&[u8]> =
                    port.tx.iter().take(n).map(|&s| self.pool.raw(s)).collect();
                let (sent, failed, err) = port.sock.send_batch(&frames);
                for _ in 0..sent + failed {
                    let s = port.tx.pop_front().unwrap();
                    port.rep.tx_bytes += self.pool.lens[s as usize] as u64;
                    self.pool.free.push(s);
                }
                // tx_bytes counted refused frames too; take them back out is not worth it:
                // count frames exactly, bytes approximately on errors.
                port.rep.tx_frames += sent as u64;
                port.rep.tx_errors += failed as u64;
                if let Some(e) = err {
                    return Err(format!("send on {}: {e}", port.plan.ifname));
                }
                if sent + failed < n {
                    break; // EAGAIN: retry on the next round
                }
            }
        }
        Ok(())
    }

    /// Receives everything waiting on port `pi` (batches until empty). Returns frames.
    fn receive(&mut self, pi: usize) -> Result<usize, String> {
        let mut total = 0;
        loop {
            let port = &mut self.ports[pi];
            while port.rx_slots.len() < MAX_BATCH {
                match self.pool.alloc() {
                    Some(s) => port.rx_slots.push(s),
                    None => break,
                }
            }
            if port.rx_slots.is_empty() {
                // No buffer at all: read and drop one frame so the socket does not stall.
                let mut scratch = [0u8; 64];
                let ptrs = [scratch.as_mut_ptr()];
                let (mut l, mut tr) = ([0u32; 1], [false; 1]);
                // SAFETY: scratch is a live local buffer of 64 bytes.
                let n = unsafe { port.sock.recv_batch(&ptrs, 64, &mut l, &mut tr) }
                    .map_err(|e| format!("receive on {}: {e}", port.plan.ifname))?;
                if n == 0 {
                    return Ok(total);
                }
                port.rep.rx_frames += 1;
                self.ingress.no_buffer += 1;
                total += 1;
                continue;
            }
            let mut ptrs = [std::ptr::null_mut::<u8>(); MAX_BATCH];
            let k = port.rx_slots.len();
            for (i, &s) in port.rx_slots.iter().enumerate() {
                ptrs[i] = self.pool.ptr(s);
            }
            let port = &mut self.ports[pi];
            let mut lens = [0u32; MAX_BATCH];
            let mut trunc = [false; MAX_BATCH];
            // SAFETY: each pointer is a distinct pool slot of slot_bytes bytes that only
            // this port's posted list owns until the frames are taken below.
            let n = unsafe {
                port.sock
                    .recv_batch(&ptrs[..k], self.pool.slot_bytes, &mut lens, &mut trunc)
            }
            .map_err(|e| format!("receive on {}: {e}", port.plan.ifname))?;
            if n == 0 {
                return Ok(total);
            }
            let now = self.now();
            // Take the filled slots (the first n posted) off the posted list.
            let filled: Vec<u32> = self.ports[pi].rx_slots.drain(..n).collect();
            for (i, slot) in filled.into_iter().enumerate() {
                if trunc[i] {
                    let port = &mut self.ports[pi];
                    port.rep.rx_frames += 1;
                    port.rep.rx_bytes += lens[i] as u64;
                    self.ingress.oversize += 1;
                    self.pool.release(slot);
                    continue;
                }
                self.ingress(pi, slot, lens[i], now);
            }
            total += n;
            if n < k {
                return Ok(total);
            }
        }
    }

    /// Samples the links at `t` (the state now) into `samples`, and into the time series
    /// stamped `grid` (the sample's scheduled time) if given.
    fn sample(&mut self, t: Time, grid: Option<Time>) {
        if let (Some(g), Some(iv)) = (grid, self.sample_interval) {
            if g <= self.series_until {
                for &li in &self.series_links {
                    let l = &mut self.links[li];
                    let counts = LinkCounts {
                        tx_bytes: l.rep.delivered_bytes,
                        drops: l.rep.dropped(),
                        ecn_marks: l.dev.qdisc.ecn_marks(),
                    };
                    self.series.push_link(
                        g,
                        &l.plan.name,
                        &mut l.dev.qdisc,
                        None,
                        counts,
                        &mut l.prev_counts,
                        iv.as_secs_f64(),
                    );
                }
                if let Some(o) = &self.series_outbox {
                    if self.series.len() >= SERIES_OUTBOX_ROWS {
                        let rows = self.series.drain_front(usize::MAX);
                        o.lock().unwrap_or_else(|e| e.into_inner()).push(rows);
                    }
                }
            }
        }
        if !self.keep_samples {
            return;
        }
        for (i, l) in self.links.iter().enumerate() {
            self.samples.push(Sample {
                t_ns: t.as_ns(),
                link: i,
                qlen_pkts: l.dev.qdisc.len_packets() as u64,
                qlen_bytes: l.dev.qdisc.len_bytes(),
                delivered_bytes: l.rep.delivered_bytes,
                delivered_pkts: l.rep.delivered_pkts,
                dropped_pkts: l.rep.dropped(),
            });
        }
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
            let sleep = if wait <= lead { wait } else { wait - lead };
            let ts = libc::timespec {
                tv_sec: (sleep / 1_000_000_000) as libc::time_t,
                tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: pfds is a valid array of pollfd; ts a valid timespec.
            let woken = unsafe {
                libc::ppoll(
                    pfds.as_mut_ptr(),
                    pfds.len() as libc::nfds_t,
                    &ts,
                    std::ptr::null(),
                )
            };
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

    /// Moves the packet log gathered so far, with the new connections' keys, to the
    /// outbox (if there is one).
    fn move_packets(&mut self) {
        let Some(o) = &self.packets_outbox else {
            return;
        };
        let rows = self.packets.drain_front(usize::MAX);
        let keys = self.flows.conns[self.conns_moved..]
            .iter()
            .map(|c| c.key)
            .collect();
        self.conns_moved = self.flows.conns.len();
        o.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((rows, keys));
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
        for l in &mut self.links {
            l.rep.queued_at_end = l.dev.qdisc.len_packets() as u64 + l.in_flight.len() as u64;
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

/// Logs a dequeue (`reason = None`) or drop of `p` on link `li` at `t` in the simulator's
/// packet log, with the packet's number (not its buffer slot) as its uid and
/// `2 × connection id + reply` as its flow ([`ForwarderReport::packets`]).
fn log_packet(
    log: &mut PacketLog,
    t: Time,
    li: usize,
    p: &Packet,
    reason: Option<DropReason>,
    sample: f64,
    reply: bool,
) {
    let mut q = *p;
    q.uid >>= SLOT_BITS;
    q.tag = ((p.conversation() << 1) | reply as u32) as u64;
    log.push(t, li as u32, &q, reason, sample);
}

/// `virtio_net_hdr` (include/uapi/linux/virtio_net.h): flags, gso_type, hdr_len,
/// gso_size, csum_start, csum_offset.
const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

fn prefix_matches(prefix: IpAddr, len: u8, a: IpAddr) -> bool {
    match (prefix, a) {
        (IpAddr::V4(p), IpAddr::V4(a)) => {
            let len = len.min(32) as u32;
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            (u32::from(p) & mask) == (u32::from(a) & mask)
        }
        (IpAddr::V6(p), IpAddr::V6(a)) => {
            let len = len.min(128) as u32;
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            (u128::from(p) & mask) == (u128::from(a) & mask)
        }
        _ => false,
    }
}

/// A forwarder running on its own thread.
pub struct ForwarderHandle {
    thread: std::thread::JoinHandle<ForwarderReport>,
    /// CLOCK_MONOTONIC ns of the run's time 0.
    pub epoch_monotonic_ns: u64,
}

impl ForwarderHandle {
    /// Waits for the thread (after `stop` was set) and returns its report.
    pub fn join(self) -> Result<ForwarderReport, ForwardError> {
        self.thread
            .join()
            .map_err(|_| ForwardError("forwarder thread panicked".into()))
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
        Err(_) => Err(ForwardError("forwarder thread died while starting".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_core::Addr;

    #[test]
    fn prefixes_match_like_a_routing_table() {
        let a: IpAddr = "10.0.2.7".parse().unwrap();
        assert!(prefix_matches("10.0.2.0".parse().unwrap(), 24, a));
        assert!(!prefix_matches("10.0.3.0".parse().unwrap(), 24, a));
        assert!(prefix_matches("0.0.0.0".parse().unwrap(), 0, a));
        let b: IpAddr = "fd00:0:0:2::7".parse().unwrap();
        assert!(prefix_matches("fd00:0:0:2::".parse().unwrap(), 64, b));
        assert!(!prefix_matches("fd00:0:0:3::".parse().unwrap(), 64, b));
        assert!(!prefix_matches("10.0.2.0".parse().unwrap(), 24, b));
    }

    #[test]
    fn flows_know_the_original_direction() {
        let mut f = Flows::default();
        let k = FlowKey {
            src_addr: Addr::v4(1),
            dst_addr: Addr::v4(2),
            src_port: 10,
            dst_port: 20,
            proto: 6,
        };
        assert_eq!(f.lookup(k, 0, 0), (0, true));
        assert_eq!(f.lookup(k.reversed(), 0, 0), (0, false));
        assert_eq!(f.lookup(k, 0, 0), (0, true));
        let k2 = FlowKey { src_port: 11, ..k };
        assert_eq!(f.lookup(k2, 0, 0), (1, true));
    }

    #[test]
    fn a_syn_after_the_close_is_a_new_connection() {
        use sojourn_core::packet::tcp_flags::{ACK, FIN, RST, SYN};
        let mut f = Flows::default();
        let k = FlowKey {
            src_addr: Addr::v4(1),
            dst_addr: Addr::v4(2),
            src_port: 40000,
            dst_port: 5201,
            proto: 6,
        };
        assert_eq!(f.lookup(k, SYN, 0), (0, true));
        // A retransmitted SYN of an open connection stays in it (conntrack: SYN_SENT).
        assert_eq!(f.lookup(k, SYN, 1), (0, true));
        assert_eq!(f.lookup(k.reversed(), SYN | ACK, 2), (0, false));
        assert_eq!(f.lookup(k, ACK | FIN, 3), (0, true));
        assert_eq!(f.lookup(k.reversed(), ACK, 4), (0, false));
        // The port reused after TIME_WAIT: a new connection, found from both directions.
        assert_eq!(f.lookup(k, SYN, 5), (1, true));
        assert_eq!(f.lookup(k.reversed(), SYN | ACK, 6), (1, false));
        assert_eq!(f.conns[1].first_ns, 5);
        // A reset closes too; UDP never splits.
        assert_eq!(f.lookup(k.reversed(), RST, 7), (1, false));
        assert_eq!(f.lookup(k, SYN, 8), (2, true));
        let u = FlowKey { proto: 17, ..k };
        assert_eq!(f.lookup(u, SYN | FIN, 9), (3, true));
        assert_eq!(f.lookup(u, SYN, 10), (3, true));
    }

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
            qdisc: q,
            qdisc_path: "links.l.qdisc".into(),
            classifier: None,
        };
        let s = |v: &str| Value::Str(v.into());
        let tbf = [("rate", s("5Mbit")), ("burst", Value::Int(3028))];
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

    #[test]
    fn pool_hands_out_distinct_slots_and_reuses_them() {
        let mut p = Pool::new(2048, 2048, 0);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        assert_ne!(a, b);
        p.release(a);
        assert_eq!(p.alloc(), Some(a));
        let mut n = 2;
        let mut bound = sojourn_core::qdisc::testkit::Bound::new(10_000, "allocate until full");
        while p.alloc().is_some() {
            bound.tick();
            n += 1;
        }
        assert_eq!(n, 2048, "bounded by max_slots");
    }
}
