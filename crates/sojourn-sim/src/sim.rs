//! The discrete-event engine: nodes, links, endpoints and the event loop.
//!
//! Events per forwarded packet on a path of k links: one `TxDone` per link (serialisation
//! end, which also starts the next dequeue) and at most one `Arrive` per link (only the
//! head of each link's in-flight FIFO is a pending event; with zero delay the packet is
//! delivered inside `TxDone`). Endpoint timers are deadlines re-armed lazily. A link on
//! the fast path (a constant-rate, lossless tail-drop FIFO not leaving a host,
//! `sim/fast_link.rs`) has no `TxDone` at all: its transmissions are computed at enqueue.
//!
//! FIFO short cuts: a packet reaching an idle link without a ring whose FIFO is empty and
//! would accept it goes to the wire directly (`link_enqueue` → `transmit`: the FIFO's
//! enqueue and dequeue, two ~200-byte copies, are skipped; its sojourn, 0, is recorded all
//! the same), and a transmission end on a link whose FIFO is empty does not call the
//! dequeue (`restart_tx`). A FIFO keeps no
//! state but its packets, so both are exact; other disciplines always take the full path.
//! On a dumbbell this is every hop but the bottleneck.
//!
//! Arrivals in place: an arriving packet is not copied out of its in-flight pool slot; the
//! receiving endpoint reads it there, the next qdisc copies it from there, and a cut-through
//! hop moves the slot itself to the next link's list ([`Held`]).

use crate::app::WorkloadGenerator;
use crate::classify::{lookup, Conntrack, Hook, MedianPolicy};
use crate::config::{static_routes, Experiment, Routes};
use crate::dispatch::AnyEndpoint;
use crate::endpoint::{receiver_of, Endpoint, Io, Note};
use crate::event::{Event, EventQueue};
use crate::flight::FlightPool;
use crate::flows::FlowTable;
use crate::link::{Link, TxFate};
use sojourn_core::device::{Begin, Device};
use sojourn_core::qdisc::{BuildCtx, Dequeue, DropReason, Drops, Qdisc};
use sojourn_core::rng::{splitmix64_mix, Rng};
use sojourn_core::{Duration, Packet, Time};
use sojourn_record::flows::FlowRecord;
use sojourn_record::metrics::{EntityId, LinkCounts, PacketLog, TimeSeries};

mod fast_link;
pub mod wifi;

/// Where packets went: every created packet is delivered, dropped, or still inside.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    pub created: u64,
    pub delivered: u64,
    pub dropped: u64,
}

/// The fewest segments of a GSO buffer kept as a run in one in-flight slot
/// (`FlightPool::push_run`). A run's set-up (its last segment's end, what the cuts read of
/// the buffer, its second segment's cut) costs more than copying the buffer into a slot
/// per segment saves for 2-3 segments (row A's 10-Mbit/s senders: +1.7 % instructions
/// with every burst a run); seed 000's 64-KiB buffers have ~32.
const RUN_MIN_SEGMENTS: u32 = 4;

/// Where the packet a hop handles lies: the caller's (an endpoint's output, a dequeued
/// packet, a local) or the in-flight pool slot it arrived in (`Sim::on_arrive`), where it
/// is read in place and, on a cut-through hop, stays: the slot moves to the next link's
/// in-flight list (one ~200-byte copy fewer per arrival, none at
/// all on a cut-through hop).
#[derive(Clone, Copy)]
enum Held<'a> {
    Here(&'a Packet),
    Flight(u32),
    /// The current segment of a run (`FlightPool::push_run`): read in place like
    /// `Flight`, but the slot stays with the run (a hop that keeps the packet copies it).
    Run(u32),
}

impl Held<'_> {
    /// The packet's bytes are no longer needed: frees its in-flight slot, if any (a
    /// run's slot is the run's).
    #[inline(always)]
    fn release(self, flight: &mut FlightPool) {
        if let Held::Flight(s) = self {
            flight.free(s);
        }
    }

    /// The in-flight slot holding the packet (not for `Here`).
    #[inline(always)]
    fn slot(self) -> u32 {
        match self {
            Held::Flight(s) | Held::Run(s) => s,
            Held::Here(_) => unreachable!("a packet in a slot"),
        }
    }
}

/// An endpoint's identity: its flow's identity (`Sim::open_flow`, `node << 35 | k`) and
/// its side (0: the end that opens, 1: its peer), `node << 36 | 2k + side`, below 2^60.
#[inline(always)]
fn endpoint_ident(flow_ident: u64, side: u64) -> u64 {
    flow_ident << 1 | side
}

/// Where an endpoint identity's slot is kept: (its flow's source node, `2k + side`).
#[inline(always)]
fn ident_place(ident: u64) -> (usize, usize) {
    ((ident >> 36) as usize, (ident & ((1 << 36) - 1)) as usize)
}

pub struct Node {
    pub name: String,
    /// Connection tracking (byte counts per connection), when enabled on this node.
    pub conntrack: Option<Box<Conntrack>>,
    /// Classifier rules `(hook, ct-bytes map)` run on packets leaving this node.
    pub classifiers: Vec<(Hook, Vec<(u64, u32)>)>,
    /// Per classifier, its adaptive threshold policy (`adapt`), if any.
    pub adapt: Vec<Option<Box<MedianPolicy>>>,
}

/// `repr(C)` with the engine's small fields first: they share the slot's first cache line
/// with the endpoint's discriminant and the start of its (inline) socket.
#[repr(C)]
struct EndpointSlot {
    /// Time of the earliest pending `EndpointTimer` event (`Time::MAX` if none).
    scheduled: Time,
    /// The endpoint's identity (`endpoint_ident`): its timer events' entity.
    ident: u64,
    node: u32,
    /// Its socket number on its node (`Sim::sockets`): what its packets carry as `sk - 1`.
    sock: u32,
    flow: u32,
    live: bool,
    ep: AnyEndpoint,
}

/// Events handled in a run, by kind: what a run spends its events on (bench `scale`
/// prints them per bottleneck packet). Endpoint timer events are split by what they found:
/// a due deadline, a deadline moved later since the event was queued (re-armed, lazy
/// timers), or a superseded/closed endpoint (discarded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventCounts {
    pub tx_done: u64,
    pub arrive: u64,
    pub qdisc_wake: u64,
    pub timer_due: u64,
    pub timer_rearmed: u64,
    pub timer_discarded: u64,
    pub app_timer: u64,
    pub other: u64,
    /// Transmission ends computed at enqueue on fast links (`sim/fast_link.rs`): not
    /// events of the queue, but counted in `Sim::events_processed` as the `TxDone` events
    /// they replace, so the run's event count does not depend on the path.
    pub tx_done_computed: u64,
}

impl EventCounts {
    /// Adds `o`'s counts (a partitioned run's partitions, `parallel.rs`).
    pub fn add(&mut self, o: &EventCounts) {
        self.tx_done += o.tx_done;
        self.arrive += o.arrive;
        self.qdisc_wake += o.qdisc_wake;
        self.timer_due += o.timer_due;
        self.timer_rearmed += o.timer_rearmed;
        self.timer_discarded += o.timer_discarded;
        self.app_timer += o.app_timer;
        self.other += o.other;
        self.tx_done_computed += o.tx_done_computed;
    }
}

/// Progress of a running simulation, for progress bars.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub now: Time,
    pub end: Time,
    pub events: u64,
}

pub struct Sim {
    pub now: Time,
    pub end: Time,
    pub warmup_end: Time,
    pub seed: u64,
    /// Salt of the flow hash (the kernel's per-boot seed), derived from the master seed.
    pub hash_salt: u64,
    events: EventQueue,
    pub nodes: Vec<Node>,
    /// Whether any node tracks connections (`Node::conntrack`, set at construction).
    any_conntrack: bool,
    /// Static routes (egress link per node and destination; no N×N table).
    pub routes: Routes,
    pub links: Vec<Link>,
    /// The packets propagating on every link (each link's `in_flight` lists its own).
    flight: FlightPool,
    endpoints: Vec<EndpointSlot>,
    free_endpoints: Vec<u32>,
    /// Per node, the flows opened from it so far: the `k` of the next flow identity
    /// (`open_flow`).
    flows_opened: Vec<u64>,
    /// Per node, the endpoint slot of each endpoint identity handed out there, by
    /// `2k + side` (`u32::MAX` once closed): how a timer event finds its endpoint.
    endpoint_slots: Vec<Vec<u32>>,
    /// Per node, the endpoint slot of each socket number (`u32::MAX`: free), and the free
    /// socket numbers. A sender's packets carry `sk = socket number + 1`, which `fq` keys
    /// its flows by and TSQ completions are addressed by: numbered per host, so that the
    /// reuse of a number (as the kernel reuses a socket's memory) depends on that host's
    /// own history only.
    sockets: Vec<Vec<u32>>,
    free_sockets: Vec<Vec<u32>>,
    /// Per node, the packets it has numbered: a packet's uid is `node << uid_count_bits |
    /// count` (`number_packets`).
    uids_sent: Vec<u64>,
    /// The bits of a uid left to a node's count: 48 (uids stay below 2^48,
    /// `SEGMENT_UID_SHIFT`) minus the bits of the largest node index.
    uid_count_bits: u32,
    pub flows: FlowTable,
    /// Nodes with an adaptive classifier (`adapt`): told of every finished flow.
    adaptive_nodes: Vec<u32>,
    /// Workload generators (workload.rs applies their steps); `None` while one opens.
    pub(crate) apps: Vec<Option<WorkloadGenerator>>,
    drops: Drops,
    out: Vec<Packet>,
    notes: Vec<Note>,
    pub acct: Accounting,
    pub events_processed: u64,
    pub event_counts: EventCounts,
    pub series: TimeSeries,
    pub packet_log: PacketLog,
    sample_interval: Duration,
    sampled_links: Vec<u32>,
    /// Each sampled link's entity in `series` (resolved once, not per sample).
    sampled_entities: Vec<EntityId>,
    /// Each flow's entity in `series` (`flow{id}`, by flow id; resolved at its first row).
    flow_entities: Vec<Option<EntityId>>,
    flow_series: bool,
    packet_sample: f64,
    /// Previous sample's counters per sampled link: (tx_bytes, drops, marks).
    prev_link: Vec<LinkCounts>,
    pub exp: Experiment,
    /// The Wi-Fi medium of a `kind = "wifi"` topology (sim/wifi.rs); its links are the
    /// ids from `first_wifi_link` up (`u32::MAX` without one: one compare per enqueue).
    pub wifi: Option<Box<wifi::WifiHop>>,
    first_wifi_link: u32,
    /// The fast links' queues (`sim/fast_link.rs`), indexed by `TxFate::Fast`.
    fast: Vec<crate::fast_fifo::FastFifo>,
    /// This run's partition when it is one of several (`parallel.rs`), else `None`.
    pub(crate) part: Option<Box<crate::partition::Part>>,
}

impl Sim {
    /// Builds the network and the workloads of `exp` for one run with `seed`.
    pub fn new(exp: &Experiment, seed: u64) -> Sim {
        Sim::build(exp, seed, None)
    }

    /// [`Sim::new`] for one partition of a run cut over threads (`parallel.rs`): the whole
    /// network is built, but only the partition's nodes send, forward and receive.
    pub(crate) fn build(
        exp: &Experiment,
        seed: u64,
        part: Option<Box<crate::partition::Part>>,
    ) -> Sim {
        // Endpoint identities are `node << 36 | 2k + side` below 2^60 (event.rs).
        assert!(
            exp.node_names.len() < 1 << 24,
            "{} nodes: the simulator numbers at most 2^24",
            exp.node_names.len()
        );
        let mut nodes: Vec<Node> = exp
            .node_names
            .iter()
            .enumerate()
            .map(|(i, n)| Node {
                name: n.clone(),
                conntrack: exp
                    .conntrack
                    .get(i)
                    .copied()
                    .flatten()
                    .map(|p| Box::new(Conntrack::new(p))),
                classifiers: Vec::new(),
                adapt: Vec::new(),
            })
            .collect();
        let mut adaptive_nodes = Vec::new();
        for c in &exp.classifiers {
            for &n in &c.nodes {
                nodes[n as usize].classifiers.push((c.hook, c.map.clone()));
                let a = c.adapt.map(|a| Box::new(MedianPolicy::new(a.interval)));
                if a.is_some() && !adaptive_nodes.contains(&n) {
                    adaptive_nodes.push(n);
                }
                nodes[n as usize].adapt.push(a);
            }
        }
        let mut links = Vec::with_capacity(exp.links.len());
        for (i, lp) in exp.links.iter().enumerate() {
            let rate_bps = match &lp.rate {
                sojourn_experiment::LinkRate::Constant(r) => *r,
                _ => 0,
            };
            let ctx = BuildCtx {
                link_rate_bps: rate_bps,
                seed: Rng::stream(seed, "qdisc", i as u64).next_u64(),
                ..BuildCtx::default()
            };
            // Parsed and validated once at load time; building cannot fail.
            let q = lp.qdisc.build(&ctx);
            let desc = lp.qdisc_desc.clone();
            let rate = crate::link::rate_model(&lp.rate);
            let dev = Device::new(q, rate, lp.framing_bytes, lp.tx_ring, lp.shaper);
            let mut l = Link::new(
                lp.name.clone(),
                lp.from,
                lp.to,
                dev,
                lp.delay,
                desc,
                lp.loss,
                Rng::stream(seed, "link-loss", i as u64),
            );
            l.prop.set_delay_schedule(lp.delay_schedule.clone());
            l.reorder = lp.reorder;
            l.reorder_delay = lp.reorder_delay;
            l.reorder_rng = Rng::stream(seed, "link-reorder", i as u64);
            l.cut = part
                .as_ref()
                .is_some_and(|p| p.owner[lp.from as usize] != p.owner[lp.to as usize]);
            l.log_packets = exp.record.packet_links.contains(&lp.name);
            links.push(l);
        }
        let sampled_links: Vec<u32> = match &exp.record.links {
            None => (0..exp.links.len() as u32).collect(),
            Some(names) => names.iter().filter_map(|n| exp.link(n)).collect(),
        };
        // Registering an entity creates no series: ids still follow the first push.
        let mut series = TimeSeries::default();
        let sampled_entities = sampled_links
            .iter()
            .map(|&l| series.entity(&links[l as usize].name))
            .collect();
        let end = Time::ZERO + exp.duration;
        // The event wheel's slot width follows the fastest link (`event::slot_shift_for`;
        // only the queue's cost depends on it, never the pop order). Trace-driven links
        // have no rate to go by.
        let fastest_bps = exp
            .links
            .iter()
            .filter_map(|lp| match &lp.rate {
                sojourn_experiment::LinkRate::Constant(r) => Some(*r),
                sojourn_experiment::LinkRate::Schedule(s) => s.iter().map(|&(_, r)| r).max(),
                _ => None,
            })
            .max();
        let slot_shift = crate::event::slot_shift_for(fastest_bps);
        let mut sim = Sim {
            now: Time::ZERO,
            end,
            warmup_end: Time::ZERO + exp.warmup,
            seed,
            hash_salt: splitmix64_mix(seed ^ 0x00c0_ffee),
            events: EventQueue::with_slot_shift(slot_shift).with_order_seed(seed),
            any_conntrack: nodes.iter().any(|n| n.conntrack.is_some()),
            nodes,
            routes: static_routes(exp),
            links,
            flight: FlightPool::default(),
            endpoints: Vec::new(),
            free_endpoints: Vec::new(),
            flows_opened: vec![0; exp.node_names.len()],
            endpoint_slots: vec![Vec::new(); exp.node_names.len()],
            uids_sent: vec![0; exp.node_names.len()],
            sockets: vec![Vec::new(); exp.node_names.len()],
            free_sockets: vec![Vec::new(); exp.node_names.len()],
            uid_count_bits: 48 - (u32::BITS - (exp.node_names.len() as u32).leading_zeros()),
            flows: FlowTable::default(),
            adaptive_nodes,
            apps: Vec::new(),
            drops: Drops::new(),
            out: Vec::with_capacity(64),
            notes: Vec::with_capacity(8),
            acct: Accounting::default(),
            events_processed: 0,
            event_counts: EventCounts::default(),
            series,
            packet_log: PacketLog::default(),
            sample_interval: exp.record.interval,
            prev_link: vec![LinkCounts::default(); sampled_links.len()],
            sampled_links,
            sampled_entities,
            flow_entities: Vec::new(),
            flow_series: exp.record.flow_series,
            packet_sample: exp.record.packet_sample,
            exp: exp.clone(),
            wifi: exp
                .wifi
                .as_ref()
                .map(|w| Box::new(wifi::WifiHop::new(w, seed))),
            first_wifi_link: exp.wifi.as_ref().map_or(u32::MAX, |w| w.first_link),
            fast: Vec::new(),
            part,
        };
        // Links leaving a host that terminates flows are that host's NIC: their
        // transmissions complete TSQ accounting for the sending socket.
        let mut is_host = vec![false; sim.nodes.len()];
        for w in &exp.workloads {
            for (a, b) in w.endpoints() {
                is_host[a as usize] = true;
                is_host[b as usize] = true;
            }
        }
        for l in &mut sim.links {
            l.notify_tx = is_host[l.from as usize];
        }
        sim.choose_fast_links();
        for w in &exp.workloads {
            sim.add_workload(w);
        }
        if !sim.sample_interval.is_zero() {
            sim.events.push(Time::ZERO, Event::Sample);
        }
        if !exp.warmup.is_zero() {
            sim.events.push(sim.warmup_end, Event::WarmupEnd);
        }
        sim
    }

    // ----- endpoints and applications (used by workloads) -----

    /// Adds the record of a flow opened now from `rec.src_node` and hands out its identity:
    /// (source node, k-th flow opened there), `node << 35 | k`. Returns (flow id, identity).
    ///
    /// The identity, not the dense flow id, chooses the connection's ephemeral port and
    /// seeds its random streams, and its endpoints' identities are its timer events'
    /// entities (docs/engine.md, "Identity by owner"): everything a flow is depends on
    /// its source host's own history only, never on how many flows other hosts opened
    /// before it. The dense id (creation order) only numbers the outputs.
    pub fn open_flow(&mut self, rec: FlowRecord) -> (u32, u64) {
        let src = rec.src_node;
        let k = self.flows_opened[src as usize];
        assert!(k < 1 << 35, "node {src} opened 2^35 flows");
        self.flows_opened[src as usize] = k + 1;
        (self.flows.add(rec), (src as u64) << 35 | k)
    }

    /// The connection's ephemeral source port of the flow with identity `flow_ident`:
    /// the source host's flows take consecutive ports of Linux's default
    /// `ip_local_port_range` (32768–60999) from an offset drawn per host from the seed
    /// (RFC 6056's per-destination counters are one counter per host here).
    pub fn ephemeral_port(&self, flow_ident: u64) -> u16 {
        const LOW: u64 = 32_768;
        const PORTS: u64 = 60_999 - 32_768 + 1;
        let node = flow_ident >> 35;
        let k = flow_ident & ((1 << 35) - 1);
        let offset = Rng::stream(self.seed, "ephemeral-port", node).next_u64() % PORTS;
        (LOW + (offset + k) % PORTS) as u16
    }

    /// Adds an endpoint on `node` for `flow`, the `side` (0: the one that opens, 1: its
    /// peer) of the flow with identity `flow_ident` (not started yet); returns its slot.
    pub fn add_endpoint(
        &mut self,
        node: u32,
        flow: u32,
        flow_ident: u64,
        side: u64,
        ep: AnyEndpoint,
    ) -> u32 {
        let ident = endpoint_ident(flow_ident, side);
        let sock = match self.free_sockets[node as usize].pop() {
            Some(s) => s,
            None => {
                self.sockets[node as usize].push(u32::MAX);
                self.sockets[node as usize].len() as u32 - 1
            }
        };
        let slot = EndpointSlot {
            ep,
            ident,
            node,
            sock,
            flow,
            scheduled: Time::MAX,
            live: true,
        };
        self.flows.endpoint_opened(flow);
        let id = if let Some(id) = self.free_endpoints.pop() {
            self.endpoints[id as usize] = slot;
            id
        } else {
            self.endpoints.push(slot);
            self.endpoints.len() as u32 - 1
        };
        let (owner, index) = ident_place(ident);
        let slots = &mut self.endpoint_slots[owner];
        if slots.len() <= index {
            slots.resize(index + 1, u32::MAX);
        }
        slots[index] = id;
        self.sockets[node as usize][sock as usize] = id;
        id
    }

    /// Endpoint `id`'s socket number on its node (a sender's packets carry it plus one).
    pub fn socket_number(&self, id: u32) -> u32 {
        self.endpoints[id as usize].sock
    }

    /// The live endpoint on `node` that sent a packet with socket field `sk` for `flow`,
    /// if any (0: not from a socket).
    #[inline(always)]
    fn sending_endpoint(&self, node: u32, sk: u32, flow: u32) -> Option<u32> {
        if sk == 0 {
            return None;
        }
        let id = *self.sockets[node as usize].get(sk as usize - 1)?;
        (id != u32::MAX && self.serves(id, flow)).then_some(id)
    }

    /// The uids of `n` packets numbered now at `node`, returning the first (the others
    /// follow it): `node << uid_count_bits | count`, from the node's own count, so a
    /// packet's uid does not depend on what other nodes sent before it.
    #[inline(always)]
    fn number_packets(&mut self, node: u32, n: u64) -> u64 {
        let count = &mut self.uids_sent[node as usize];
        let first = *count;
        *count += n;
        assert!(
            *count < 1 << self.uid_count_bits,
            "node {node} numbered 2^{} packets",
            self.uid_count_bits
        );
        (node as u64) << self.uid_count_bits | first
    }

    /// The live endpoint with identity `ident`, if any.
    #[inline(always)]
    fn endpoint_with_ident(&self, ident: u64) -> Option<u32> {
        let (owner, index) = ident_place(ident);
        self.endpoint_slots[owner]
            .get(index)
            .copied()
            .filter(|&id| id != u32::MAX)
    }

    /// Calls `start` on an endpoint and sends what it produces. In a partition, an
    /// endpoint of another partition's node is created (numbers stay the same in every
    /// partition) but never started: it stays idle here.
    pub fn start_endpoint(&mut self, id: u32) {
        if let Some(p) = &self.part {
            if !p.owns(self.endpoints[id as usize].node) {
                return;
            }
        }
        let (ep, mut io) = self.endpoint_io(id);
        ep.start(&mut io);
        self.after_endpoint_call(id);
    }

    /// Endpoint `id` and an `Io` at the current time for one call into it; follow the call
    /// with `after_endpoint_call` (or re-arm its timer) so its output is sent.
    #[inline]
    fn endpoint_io(&mut self, id: u32) -> (&mut AnyEndpoint, Io<'_>) {
        let io = Io {
            now: self.now,
            out: &mut self.out,
            notes: &mut self.notes,
            flows: &mut self.flows,
        };
        (&mut self.endpoints[id as usize].ep, io)
    }

    /// Whether endpoint `id` is open and still serves `flow` (a closed endpoint's slot may
    /// have been reused by another flow).
    #[inline]
    pub(crate) fn serves(&self, id: u32, flow: u32) -> bool {
        self.endpoints
            .get(id as usize)
            .is_some_and(|slot| slot.live && slot.flow == flow)
    }

    /// Schedules generator `app`'s timer at `at`.
    pub(crate) fn app_timer(&mut self, app: u32, at: Time) {
        self.events.push(at.max(self.now), Event::AppTimer(app));
    }

    /// Declares `app` the owner of `flow`, to be told when it completes.
    pub fn set_flow_owner(&mut self, flow: u32, app: u32) {
        self.flows.get_mut(flow).owner = app;
    }

    /// The live TCP sender endpoint of `flow` (apps.rs: a load connection just opened).
    pub(crate) fn tcp_sender_of(&self, flow: u32) -> Option<u32> {
        self.endpoints
            .iter()
            .position(|s| s.live && s.flow == flow && matches!(s.ep, AnyEndpoint::TcpSender(_)))
            .map(|i| i as u32)
    }

    /// Access to an endpoint (tests, observers).
    pub fn endpoint(&self, id: u32) -> &AnyEndpoint {
        &self.endpoints[id as usize].ep
    }

    /// A streamed run: flow records are handed out once final ([`FlowTable::release`]).
    pub fn release_final_flows(&mut self) {
        self.flows
            .set_release(self.flow_series.then_some(self.sample_interval));
    }

    /// Mutable access to an endpoint (wiring connections at creation).
    pub fn endpoint_mut(&mut self, id: u32) -> &mut AnyEndpoint {
        &mut self.endpoints[id as usize].ep
    }

    /// Every live endpoint, in slot order (probe.rs reads its records at the end).
    pub(crate) fn endpoint_iter(&self) -> impl Iterator<Item = &AnyEndpoint> {
        self.endpoints.iter().filter(|s| s.live).map(|s| &s.ep)
    }

    /// Sends an endpoint's output, handles its notes and re-arms its timer.
    ///
    /// Most calls leave neither packets nor notes (a receiver's first segment of two, an
    /// ACK that sends nothing): only the timer is looked at, inline at the call site; the
    /// rest is out of line (issue 19, session 8: ~2.6 M endpoint calls per 2 s of seed
    /// 000's 10 Gb/s run).
    #[inline(always)]
    fn after_endpoint_call(&mut self, id: u32) {
        if !self.out.is_empty() || !self.notes.is_empty() {
            self.after_endpoint_output(id);
        } else {
            self.rearm_endpoint(id);
        }
    }

    /// Re-arms endpoint `id`'s timer: an event at its deadline unless one no later is
    /// pending already (lazy timers, see `EndpointSlot::scheduled`).
    #[inline(always)]
    fn rearm_endpoint(&mut self, id: u32) {
        let slot = &mut self.endpoints[id as usize];
        if let Some(d) = slot.ep.deadline() {
            if d < slot.scheduled {
                slot.scheduled = d;
                self.events
                    .push(d.max(self.now), Event::EndpointTimer(slot.ident));
            }
        }
    }

    /// `after_endpoint_call` when the endpoint sent packets or left notes.
    #[inline(never)]
    fn after_endpoint_output(&mut self, id: u32) {
        let node = self.endpoints[id as usize].node;
        if !self.out.is_empty() {
            let mut out = std::mem::take(&mut self.out);
            // Stamped and forwarded where they lie: the packet's only copy on the way is
            // the one into the qdisc (`drain`, or a copy into a local, costs one more
            // ~200-byte copy per packet).
            for pkt in out.iter_mut() {
                pkt.uid = self.number_packets(node, 1);
                pkt.created_at = self.now;
                self.acct.created += 1;
                // Wire packets: a GSO buffer counts its segments.
                let rec = self.flows.get_mut(pkt.conversation());
                rec.pkts_sent += pkt.wire_packets() as u64;
                rec.in_network += 1;
                self.forward(node, pkt, true);
            }
            out.clear();
            self.out = out;
        }
        if !self.notes.is_empty() {
            let notes: Vec<Note> = self.notes.drain(..).collect();
            for n in notes {
                match n {
                    Note::Completed { flow } => {
                        // A self probe's bytes on an application's load connection, not
                        // the flow's end (apps.rs).
                        if self.flows.get(flow).owner != u32::MAX && self.app_marker_reached(flow) {
                            continue;
                        }
                        let rec = self.flows.get_mut(flow);
                        if rec.end.is_none() {
                            rec.end = Some(self.now);
                            if !self.adaptive_nodes.is_empty() {
                                self.adaptive_finished(flow);
                            }
                        }
                        let app = self.flows.get(flow).owner;
                        if app != u32::MAX {
                            self.generator_flow_completed(app, flow);
                        }
                    }
                    Note::Closed => {
                        let slot = &mut self.endpoints[id as usize];
                        if slot.live {
                            slot.live = false;
                            // A partition never reuses a slot: the others, which do not
                            // see this one close, must give the next endpoint the same.
                            if self.part.is_none() {
                                self.free_endpoints.push(id);
                            }
                            let (ident, node, sock) = (slot.ident, slot.node, slot.sock);
                            let flow = slot.flow;
                            self.sockets[node as usize][sock as usize] = u32::MAX;
                            self.free_sockets[node as usize].push(sock);
                            let (owner, index) = ident_place(ident);
                            self.endpoint_slots[owner][index] = u32::MAX;
                            self.flows.endpoint_closed(flow);
                        }
                        return;
                    }
                }
            }
        }
        self.rearm_endpoint(id);
    }

    // ----- packet movement -----

    /// A packet is at `node` (created there if `local`, else arrived): run the node's
    /// conntrack and classifier hooks, then deliver or forward it.
    // Always inlined into its few callers, and by reference: the ~200-byte packet is read
    // where it lies (an in-flight FIFO, an endpoint's output) and copied once, into the
    // next qdisc; a delivered packet is not copied at all (issue 19, session 7).
    #[inline(always)]
    fn forward(&mut self, node: u32, pkt: &mut Packet, local: bool) {
        // The flag first: without it every hop would read the node's record (a cold line
        // per packet with thousands of hosts; issue 19).
        if self.any_conntrack && self.nodes[node as usize].conntrack.is_some() {
            self.conntrack_hook(node, pkt, local);
        }
        // The simulator's addresses are its node ids (IPv4, see `Addr::v4`).
        let dst = pkt.key.dst_addr.low32();
        if dst == node {
            self.deliver(Held::Here(pkt));
            return;
        }
        let l = self.routes.hop(node, dst);
        debug_assert!(l != u32::MAX, "route checked at load time");
        self.link_enqueue(l, pkt);
    }

    /// `forward` for a packet that arrived at `node` in an in-flight slot (`held` is
    /// `Flight` or `Run`): handled in place (see [`Held`]); the slot is freed or moved
    /// to the next link's list (a run's stays with its run).
    #[inline(always)]
    fn forward_arrived(&mut self, node: u32, held: Held) {
        let s = held.slot();
        if self.any_conntrack && self.nodes[node as usize].conntrack.is_some() {
            // The hooks rewrite the packet and are rare: on a copy, as before.
            let mut pkt = *self.flight.packet(s);
            held.release(&mut self.flight);
            self.forward(node, &mut pkt, false);
            return;
        }
        let dst = self.flight.packet(s).key.dst_addr.low32();
        if dst == node {
            self.deliver(held);
            return;
        }
        let l = self.routes.hop(node, dst);
        debug_assert!(l != u32::MAX, "route checked at load time");
        self.link_enqueue_arrived(l, held);
    }

    fn conntrack_hook(&mut self, node: u32, pkt: &mut Packet, local: bool) {
        let original = pkt.key.src_addr.low32() == self.flows.get(pkt.conversation()).src_node;
        let n = &mut self.nodes[node as usize];
        let ct = n.conntrack.as_mut().expect("checked by caller");
        let count = ct.account(pkt, original);
        let leaving = pkt.key.dst_addr.low32() != node;
        if !leaving {
            return; // input: counted, not classified
        }
        pkt.ct_bytes = count;
        if !n.adapt.is_empty() {
            let now = self.now;
            for (i, a) in n.adapt.iter_mut().enumerate() {
                let Some(a) = a else { continue };
                if now < a.boundary {
                    continue;
                }
                for (t, th) in a.roll(now, n.classifiers[i].1[0].0) {
                    n.classifiers[i].1[0].0 = th;
                    self.series
                        .push(t, &n.name, "classifier_threshold_bytes", th as f64);
                }
            }
        }
        for (hook, map) in &n.classifiers {
            let applies = match hook {
                Hook::Output => local,
                Hook::Forward => !local,
                Hook::Both => true,
            };
            if applies {
                if let Some(p) = lookup(map, count) {
                    pkt.priority = p;
                }
            }
        }
    }

    /// A flow finished: each adaptive classifier whose node tracked it records its
    /// conntrack count (a flow that never crossed the node has none).
    fn adaptive_finished(&mut self, flow: u32) {
        let now = self.now;
        for &n in &self.adaptive_nodes {
            let node = &mut self.nodes[n as usize];
            let Some(count) = node.conntrack.as_ref().map(|ct| ct.count(flow)) else {
                continue;
            };
            if count == 0 {
                continue;
            }
            for a in node.adapt.iter_mut().flatten() {
                a.finished(now, count);
            }
        }
    }

    fn deliver(&mut self, held: Held) {
        let pkt = match held {
            Held::Here(p) => p,
            Held::Flight(s) | Held::Run(s) => self.flight.packet(s),
        };
        self.acct.delivered += 1;
        let rec = self.flows.get_mut(pkt.conversation());
        rec.in_network = rec.in_network.wrapping_sub(1);
        if pkt.hdr.payload_bytes > 0 {
            let d = (self.now - pkt.created_at).as_ns();
            rec.delay_sum_ns += d as u128;
            rec.delay_count += 1;
            rec.delay_max_ns = rec.delay_max_ns.max(d);
        }
        if pkt.ecn == sojourn_core::Ecn::Ce {
            rec.pkts_ce += 1;
        }
        let id = receiver_of(pkt);
        // A packet for an endpoint that has closed (its slot may be reused) is discarded
        // by the host, as a closed socket would; it still counts as delivered.
        if !self.serves(id, pkt.conversation()) {
            held.release(&mut self.flight);
            return;
        }
        // `endpoint_io` spelled out: the packet may be borrowed from `self.flight`.
        let mut io = Io {
            now: self.now,
            out: &mut self.out,
            notes: &mut self.notes,
            flows: &mut self.flows,
        };
        self.endpoints[id as usize].ep.on_packet(pkt, &mut io);
        // Freed before the endpoint's output is sent: its first packet reuses the slot.
        held.release(&mut self.flight);
        self.after_endpoint_call(id);
    }

    #[inline(always)]
    fn link_enqueue(&mut self, l: u32, pkt: &mut Packet) {
        if l >= self.first_wifi_link {
            return self.wifi_enqueue(l, Held::Here(pkt));
        }
        let now = self.now;
        let link = &mut self.links[l as usize];
        pkt.enqueued_at = now;
        link.stats.enq_pkts += 1;
        if let TxFate::Fast(f) = link.tx_fate {
            return self.fast_enqueue(l, f, Held::Here(pkt));
        }
        // Cut-through: an idle link without a ring whose FIFO is empty and would accept
        // the packet would dequeue it at once, unchanged (its sojourn 0), with no drop and
        // no wake-up: it goes to the wire directly, two ~200-byte copies and two
        // dispatches fewer; everything observable happens in the same order.
        // (Out of line: the queueing path below stays compact where links are busy.)
        if !link.busy() && link.dev.ring_cap() == 0 && link.dev.qdisc.cut_through(pkt) {
            self.transmit_cut_through(l, Held::Here(pkt));
            return;
        }
        let flow = pkt.conversation();
        let created = link.dev.enqueue(*pkt, now, &mut self.drops);
        self.after_enqueue(l, flow, created);
    }

    /// `link_enqueue` for a packet that arrived in an in-flight slot (`held`): copied
    /// from there into the qdisc (and the slot freed), or, cutting through, not copied at
    /// all (a run's segment is copied into a slot of its own).
    #[inline(always)]
    fn link_enqueue_arrived(&mut self, l: u32, held: Held) {
        if l >= self.first_wifi_link {
            return self.wifi_enqueue(l, held);
        }
        let now = self.now;
        let link = &mut self.links[l as usize];
        let pkt = self.flight.packet_mut(held.slot());
        pkt.enqueued_at = now;
        link.stats.enq_pkts += 1;
        if let TxFate::Fast(f) = link.tx_fate {
            return self.fast_enqueue(l, f, held);
        }
        if !link.busy() && link.dev.ring_cap() == 0 && link.dev.qdisc.cut_through(pkt) {
            self.transmit_cut_through(l, held);
            return;
        }
        let flow = pkt.conversation();
        let created = link.dev.enqueue(*pkt, now, &mut self.drops);
        held.release(&mut self.flight);
        self.after_enqueue(l, flow, created);
    }

    /// The rest of `link_enqueue` once the qdisc took the packet: what it created and
    /// dropped is counted, and an idle link starts (or a ring is topped up).
    #[inline(always)]
    fn after_enqueue(&mut self, l: u32, flow: u32, created: u64) {
        // A qdisc may segment a GSO buffer (CAKE's split_gso): the packets it created count.
        if created > 0 {
            self.acct.created += created;
            self.flows.get_mut(flow).in_network += created;
        }
        if !self.drops.is_empty() {
            self.account_drops(l);
        }
        let link = &self.links[l as usize];
        if !link.busy() {
            self.start_tx(l);
        } else if link.dev.ring_cap() > 0 {
            self.fill_ring(l);
        }
    }

    /// Tops up link `l`'s device transmit ring from its qdisc (the kernel's `qdisc_run`
    /// filling the driver queue); packets leaving the qdisc are measured and logged.
    fn fill_ring(&mut self, l: u32) {
        let now = self.now;
        let link = &mut self.links[l as usize];
        let log_packets = link.log_packets;
        let sojourn = &mut link.stats.sojourn;
        let log = &mut self.packet_log;
        let sample = self.packet_sample;
        link.dev.refill(now, &mut self.drops, &mut |p: &Packet| {
            sojourn.record((now - p.enqueued_at).as_ns());
            if log_packets {
                log.push(now, l, p, None, sample);
            }
        });
        if let Some(t) = link.dev.take_wake() {
            self.events.push(t, Event::QdiscWake(l));
        }
        if !self.drops.is_empty() {
            self.account_drops(l);
        }
    }

    /// The slower start of a transmission whose consequences are all settled at once
    /// ([`Poll::Burst`]): a GSO buffer the device cut into wire segments, serialised back
    /// to back; on a `shaper` link a packet propagates from the start of its slot. Loss
    /// and reordering are drawn per wire packet, in order, as on the fast path.
    fn begin_tx_released(&mut self, l: u32) {
        let now = self.now;
        let link = &self.links[l as usize];
        // Only the buffer's counters are read here; the whole ~200-byte buffer is copied
        // only for a TSQ completion.
        let p = link.dev.burst_buffer().expect("a burst");
        let (n, flow, sk) = (p.wire_packets(), p.conversation(), p.sk);
        // The segments after the first are numbered by the sending node, in order.
        let from = link.from;
        let mut next_uid = self.number_packets(from, (n as u64).saturating_sub(1));
        let link = &mut self.links[l as usize];
        let p = link.dev.burst_buffer().expect("a burst");
        let notify = link.notify_tx && sk != 0;
        // On a wire the completion waits in the link, written there directly (one copy;
        // a local moved into place cost two more, issue 19 session 9); a shaper completes
        // at once, from a local (the device's buffer is gone once cut).
        let shaper_buffer = if notify && link.dev.shaper {
            Some(*p)
        } else {
            if notify {
                link.tx_notify = Some(*p);
            }
            None
        };
        if n > 1 {
            // One buffer became n packets (conservation counts wire packets).
            self.acct.created += (n - 1) as u64;
            self.flows.get_mut(flow).in_network += (n - 1) as u64;
        }
        let had_in_flight = !link.in_flight.is_empty();
        let had_late = !link.late.is_empty();
        let mut lost = 0u64;
        let flight = &mut self.flight;
        // One loop over the burst (`Device::cut_burst`): the link's fields it uses are
        // borrowed apart from the device. A medium without loss or reordering (every
        // wire of a dumbbell) draws nothing: its loop tests neither per segment.
        let mut last = None;
        let lossless = link.loss == 0.0 && link.reorder == 0.0;
        // A wire at a constant rate and delay: the segments go into one slot, a run, and
        // are cut there one by one as they arrive (`FlightPool::push_run`).
        if let Some(delay) = link
            .prop
            .constant_delay()
            .filter(|_| lossless && n >= RUN_MIN_SEGMENTS && !link.cut)
        {
            let (prop, in_flight) = (&mut link.prop, &mut link.in_flight);
            last = link.dev.take_burst(|buffer, mut cursor, end| {
                let (first, first_end) = cursor.next_segment().expect("a segment at least");
                let at = prop.arrival_time(first_end);
                if cursor.remaining() > 0 {
                    // The medium's state as after every segment (the last arrival).
                    prop.arrival_time(end);
                }
                let first_uid = next_uid;
                next_uid += cursor.remaining() as u64;
                flight.push_run(in_flight, at, buffer, &first, cursor, delay, first_uid);
                end
            });
        }
        if lossless && last.is_none() {
            // A shaper or a varying rate (the device does not hand the burst over).
            last = link.dev.cut_burst(|buffer, seg| {
                let at = link.prop.arrival_time(seg.depart);
                let pkt = flight.push_back(&mut link.in_flight, at, buffer);
                buffer.apply_cut(&seg.cut, pkt);
                if seg.index > 0 {
                    pkt.uid = next_uid;
                    next_uid += 1;
                }
            });
        }
        // (Nothing is left for this one after the loop above.)
        let general = link.dev.cut_burst(|buffer, seg| {
            // Every segment after the first gets the engine's next uid, lost ones too.
            let uid = (seg.index > 0).then(|| {
                next_uid += 1;
                next_uid - 1
            });
            if link.loss > 0.0 && link.loss_rng.chance(link.loss) {
                lost += 1;
                return;
            }
            let at = link.prop.arrival_time(seg.depart);
            // The buffer is copied once, into the FIFO slot, and cut there.
            let pkt = if link.reorder > 0.0 && link.reorder_rng.chance(link.reorder) {
                link.late.push_back((at + link.reorder_delay, *buffer));
                &mut link.late.back_mut().expect("just pushed").1
            } else {
                flight.push_back(&mut link.in_flight, at, buffer)
            };
            buffer.apply_cut(&seg.cut, pkt);
            if let Some(uid) = uid {
                pkt.uid = uid;
            }
        });
        // The last segment's end (`now` for a burst of none).
        let t = general.or(last).unwrap_or(now);
        link.stats.busy_ns += (t - now).as_ns();
        link.tx_fate = TxFate::Released;
        if lost > 0 {
            link.stats.drops[DropReason::LinkLoss as usize] += lost;
            self.acct.dropped += lost;
            let rec = self.flows.get_mut(flow);
            rec.pkts_dropped += lost;
            rec.in_network = rec.in_network.wrapping_sub(lost);
        }
        if !had_in_flight {
            if let Some((at, _)) = self.flight.front(&link.in_flight) {
                self.events.push(at, Event::Arrive(l));
            }
        }
        if link.cut {
            self.part
                .as_mut()
                .expect("a cut link in a partition")
                .sent(l);
        }
        if !had_late {
            if let Some(&(at, _)) = link.late.front() {
                self.events.push(at, Event::ArriveLate(l));
            }
        }
        self.events.push(t, Event::TxDone(l));
        if let Some(p) = shaper_buffer {
            // The shaper hands the whole buffer to the device, which orphans it.
            self.notify_tx_complete(self.links[l as usize].from, &p);
        }
    }

    fn account_drops(&mut self, l: u32) {
        let now = self.now;
        let notify = self.links[l as usize].notify_tx;
        // Taken out (and put back, keeping its capacity) so endpoints can be called.
        let mut drops = std::mem::take(&mut self.drops);
        for d in drops.drain() {
            let link = &mut self.links[l as usize];
            link.stats.drops[d.reason as usize] += 1;
            self.acct.dropped += 1;
            let rec = self.flows.get_mut(d.pkt.conversation());
            rec.pkts_dropped += 1;
            rec.in_network = rec.in_network.wrapping_sub(1);
            if link.log_packets {
                self.packet_log
                    .push(now, l, &d.pkt, Some(d.reason), self.packet_sample);
            }
            // A drop in the sending host's own qdisc frees the skb: TSQ credit returns
            // to the socket as on a completion (Linux sock_wfree/tcp_wfree).
            // The endpoint may not send from here (the engine is inside the enqueue): only
            // its timer is re-armed.
            let from = self.links[l as usize].from;
            let sender = notify
                .then(|| self.sending_endpoint(from, d.pkt.sk, d.pkt.conversation()))
                .flatten();
            if let Some(id) = sender {
                let (ep, mut io) = self.endpoint_io(id);
                ep.on_host_drop(&d.pkt, &mut io);
                let slot = &mut self.endpoints[id as usize];
                if let Some(t) = slot.ep.deadline() {
                    if t < slot.scheduled {
                        slot.scheduled = t;
                        self.events
                            .push(t.max(now), Event::EndpointTimer(slot.ident));
                    }
                }
            }
        }
        self.drops = drops;
    }

    /// Asks the device of an idle link for its next packet and starts serialising it.
    ///
    /// A single wire packet's fate at the serialisation end is decided now (see `TxFate`:
    /// same draws, in the same per-link order, as at the end); in the common case the
    /// packet goes from the qdisc straight to the back of `in_flight`, its only copy.
    #[inline]
    fn start_tx(&mut self, l: u32) {
        debug_assert!(!self.links[l as usize].busy());
        // The order of ring refills, wake-ups, drop handling and the transmission start is
        // the engine's event order: with a ring, the refill's wake-up and drops come first
        // and the ring is topped up again after the transmission started.
        let ring = self.links[l as usize].dev.ring_cap() > 0;
        if ring {
            self.fill_ring(l);
        }
        let now = self.now;
        let link = &mut self.links[l as usize];
        // The device's primitives rather than its `poll`: the packet goes from the qdisc's
        // answer into the in-flight queue with one copy, and nothing is set up for an
        // empty qdisc (the common answer at a transmission's end).
        match link.dev.next_packet(now, &mut self.drops) {
            Dequeue::Packet(p) => self.transmit(l, Held::Here(&p), !ring),
            Dequeue::Empty | Dequeue::NotBefore(_) => {
                if ring {
                    return;
                }
                if let Some(t) = link.dev.take_wake() {
                    self.events.push(t, Event::QdiscWake(l));
                }
            }
        }
        if ring {
            self.fill_ring(l);
            return;
        }
        if !self.drops.is_empty() {
            self.account_drops(l);
        }
    }

    /// Starts serialising `p`, just out of link `l`'s qdisc (`measured`: its sojourn is
    /// recorded and it is logged here; not for a packet from the ring, measured when it
    /// entered the ring): the body of `start_tx` for a packet, shared with cut-through.
    #[inline(always)]
    fn transmit(&mut self, l: u32, held: Held, measured: bool) {
        let now = self.now;
        let link = &mut self.links[l as usize];
        let p = match held {
            Held::Here(p) => p,
            Held::Flight(s) | Held::Run(s) => self.flight.packet(s),
        };
        if measured {
            link.stats.sojourn.record((now - p.enqueued_at).as_ns());
            if link.log_packets {
                self.packet_log.push(now, l, p, None, self.packet_sample);
            }
        }
        match link.dev.begin(p, now) {
            Begin::Sent { end } => {
                link.stats.busy_ns += (end - now).as_ns();
                if link.loss > 0.0 && link.loss_rng.chance(link.loss) {
                    link.tx_fate = TxFate::Lost;
                    link.tx_pkt = Some(*p);
                    held.release(&mut self.flight);
                } else {
                    let at = link.prop.arrival_time(end);
                    if link.reorder > 0.0 && link.reorder_rng.chance(link.reorder) {
                        link.tx_fate = TxFate::Late(at + link.reorder_delay);
                        link.tx_pkt = Some(*p);
                        held.release(&mut self.flight);
                    } else if at == end {
                        link.tx_fate = TxFate::Direct;
                        link.tx_pkt = Some(*p);
                        held.release(&mut self.flight);
                    } else {
                        // The common case: the packet's only copy on this link (an arrived
                        // packet's slot moves to this link's list: no copy at all).
                        link.tx_fate = TxFate::InFlight;
                        match held {
                            Held::Here(p) => {
                                self.flight.push_back(&mut link.in_flight, at, p);
                            }
                            Held::Flight(s) => self.flight.relink_back(s, &mut link.in_flight, at),
                            Held::Run(s) => self.flight.push_copy(s, &mut link.in_flight, at),
                        }
                        if link.cut {
                            self.part
                                .as_mut()
                                .expect("a cut link in a partition")
                                .sent(l);
                        }
                    }
                }
                self.events.push(end, Event::TxDone(l));
            }
            Begin::Burst { .. } => {
                // The device holds its own copy of the buffer.
                held.release(&mut self.flight);
                self.begin_tx_released(l)
            }
        }
    }

    /// `transmit` for a packet that cut through an idle FIFO link (`link_enqueue`).
    #[inline(never)]
    fn transmit_cut_through(&mut self, l: u32, held: Held) {
        self.transmit(l, held, true);
    }

    /// `start_tx` at the end of a transmission, skipped when it would do nothing: no ring
    /// and an empty FIFO, whose dequeue answers `Empty` and changes no state (no wake-up,
    /// no drop). Most transmission ends on a path's non-bottleneck links are such.
    #[inline(always)]
    fn restart_tx(&mut self, l: u32) {
        let dev = &self.links[l as usize].dev;
        if dev.ring_cap() == 0 && dev.qdisc.idle() {
            return;
        }
        self.start_tx(l);
    }

    fn on_tx_done(&mut self, l: u32) {
        if l >= self.first_wifi_link {
            return self.wifi_tx_done();
        }
        let link = &mut self.links[l as usize];
        let fate = std::mem::replace(&mut link.tx_fate, TxFate::Idle);
        // Counted when the last bit is out, so throughput bins and utilisation only see
        // transmitted bits (a trace link may hold a packet across an idle phase).
        let done = link.dev.tx_done(self.now);
        link.stats.tx_pkts += done.wire_packets as u64;
        link.stats.tx_bytes += done.bytes as u64;
        let notify = link.notify_tx;
        if fate == TxFate::InFlight {
            let (at, pkt) = self
                .flight
                .back(&link.in_flight)
                .expect("in flight since begin_tx");
            if link.in_flight.len() == 1 {
                self.events.push(at, Event::Arrive(l));
            }
            // TSQ needs the packet after the next transmission starts (which may push onto
            // `in_flight`): copy it only when a sending socket is waiting for it.
            let done = (notify && pkt.sk != 0).then_some(*pkt);
            self.restart_tx(l);
            if let Some(pkt) = done {
                self.notify_tx_complete(self.links[l as usize].from, &pkt);
            }
            return;
        }
        if fate == TxFate::Released {
            let done = link.tx_notify.take();
            self.restart_tx(l);
            if let Some(pkt) = done {
                self.notify_tx_complete(self.links[l as usize].from, &pkt);
            }
            return;
        }
        let pkt = link.tx_pkt.take().expect("TxDone on an idle link");
        match fate {
            TxFate::Lost => {
                link.stats.drops[DropReason::LinkLoss as usize] += 1;
                self.acct.dropped += 1;
                let rec = self.flows.get_mut(pkt.conversation());
                rec.pkts_dropped += 1;
                rec.in_network = rec.in_network.wrapping_sub(1);
                self.restart_tx(l);
                if notify {
                    self.notify_tx_complete(self.links[l as usize].from, &pkt);
                }
            }
            TxFate::Late(at) => {
                // Held back: arrival times in `late` are non-decreasing too (same extra delay).
                link.late.push_back((at, pkt));
                if link.late.len() == 1 {
                    self.events.push(at, Event::ArriveLate(l));
                }
                self.restart_tx(l);
                if notify {
                    self.notify_tx_complete(self.links[l as usize].from, &pkt);
                }
            }
            TxFate::Direct => {
                let to = link.to;
                self.restart_tx(l);
                if notify {
                    self.notify_tx_complete(self.links[l as usize].from, &pkt);
                }
                let mut pkt = pkt;
                self.forward(to, &mut pkt, false);
            }
            TxFate::Idle | TxFate::InFlight | TxFate::Released | TxFate::Fast(_) => {
                unreachable!("TxDone on an idle or fast link")
            }
        }
    }

    fn notify_tx_complete(&mut self, node: u32, pkt: &Packet) {
        // TSQ completion goes to the endpoint that sent the packet: the one on the packet's
        // source host (the link's sending node) serving this flow. Senders set `sk` to
        // their socket number on their host + 1.
        let Some(id) = self.sending_endpoint(node, pkt.sk, pkt.conversation()) else {
            return;
        };
        let (ep, mut io) = self.endpoint_io(id);
        ep.on_tx_complete(pkt, &mut io);
        self.after_endpoint_call(id);
    }

    /// The head of link `l`'s in-flight FIFO arrives at the far node.
    ///
    /// The packet is handled where it lies, in its pool slot (see [`Held`]): read there by
    /// the receiving endpoint, copied from there into the next qdisc, or, cutting through
    /// an idle FIFO link, not copied at all (the slot joins that link's list): a copy into a
    /// local first would cost ~200 bytes per arrival.
    fn on_arrive(&mut self, l: u32) {
        let link = &mut self.links[l as usize];
        if link.cut && !self.part.as_ref().is_some_and(|p| p.owns(link.from)) {
            return self.on_arrive_shipped(l);
        }
        let to = link.to;
        // The next packet's arrival is pending only once its serialisation has ended: more
        // than this one propagating. Pushed before the packet moves on, as the event order
        // requires.
        let next_propagating = link.propagating() > 1;
        // A run's segment (`FlightPool::push_run`): read where it lies, then the run's
        // next segment is cut in the same slot, which stays at the head.
        if let Some((s, next_at)) = self.flight.run_front(&mut link.in_flight) {
            if next_propagating {
                self.events.push(next_at, Event::Arrive(l));
            }
            self.forward_arrived(to, Held::Run(s));
            self.flight.advance_run(s);
            return;
        }
        let s = self
            .flight
            .unlink_front(&mut link.in_flight)
            .expect("Arrive with nothing in flight");
        if next_propagating {
            let at = self.flight.successor_at(s);
            debug_assert_eq!(Some(at), self.flight.front(&link.in_flight).map(|f| f.0));
            self.events.push(at, Event::Arrive(l));
            self.flight.prefetch_head(&link.in_flight);
        }
        if link.cut {
            // The sending partition's copy: the packet went to the far end's partition at
            // a window's end (`ship`), which counts this arrival.
            self.flight.free(s);
            let p = self.part.as_mut().expect("a cut link in a partition");
            p.shipped[l as usize] -= 1;
            self.events_processed -= 1;
            self.event_counts.arrive -= 1;
            return;
        }
        self.forward_arrived(to, Held::Flight(s));
    }

    /// An arrival on a cut link at the partition of its far end: the head of the packets
    /// the sending partition shipped (`receive`).
    #[inline(never)]
    fn on_arrive_shipped(&mut self, l: u32) {
        let p = self.part.as_mut().expect("a cut link in a partition");
        let q = &mut p.incoming[l as usize];
        let (_, mut pkt) = q.pop_front().expect("Arrive with nothing shipped");
        if let Some(&(next, _)) = q.front() {
            self.events.push(next, Event::Arrive(l));
        }
        let to = self.links[l as usize].to;
        self.forward(to, &mut pkt, false);
    }

    /// At a window's end: the packets that entered a cut link's in-flight list since the
    /// last window go to the partition of its far end (they arrive at least one lookahead
    /// after this window's start, so in a later window there).
    pub(crate) fn ship(&mut self) {
        let p = self.part.as_mut().expect("a partition");
        // In link order, as a scan of every cut link would ship them (the receiving
        // partition files each link's packets in their own order either way).
        p.sent_on.sort_unstable();
        for &l in &p.sent_on {
            let l = l as usize;
            p.in_sent_on[l] = false;
            let link = &self.links[l];
            let dest = p.owner[link.to as usize];
            let done = p.shipped[l] as usize;
            for (at, pkt) in self.flight.iter(&link.in_flight).skip(done) {
                p.outbox.push((dest, l as u32, at, *pkt));
            }
            p.shipped[l] = link.in_flight.len() as u32;
        }
        p.sent_on.clear();
    }

    /// Packets another partition shipped to this one, in their link's order.
    pub(crate) fn receive(&mut self, msgs: impl Iterator<Item = (u32, Time, Packet)>) {
        let p = self.part.as_mut().expect("a partition");
        for (l, at, pkt) in msgs {
            debug_assert!(at > self.now || self.events_processed == 0);
            let q = &mut p.incoming[l as usize];
            q.push_back((at, pkt));
            if q.len() == 1 {
                self.events.push(at, Event::Arrive(l));
            }
        }
    }

    fn on_arrive_late(&mut self, l: u32) {
        let link = &mut self.links[l as usize];
        let (_, mut pkt) = link.late.pop_front().expect("ArriveLate with nothing late");
        if let Some(&(next, _)) = link.late.front() {
            self.events.push(next, Event::ArriveLate(l));
        }
        let to = link.to;
        self.forward(to, &mut pkt, false);
    }

    // ----- the loop -----

    /// Runs to the end, calling `progress` about every 2^16 events (return false to abort).
    pub fn run(&mut self, progress: &mut dyn FnMut(&Progress) -> bool) -> bool {
        self.run_ticks(&mut |sim: &mut Sim| progress(&sim.progress()))
    }

    /// Where the run is, for progress bars.
    pub fn progress(&self) -> Progress {
        Progress {
            now: self.now,
            end: self.end,
            events: self.events_processed,
        }
    }

    /// Runs to the end, calling `tick(self)` about every 2^16 events and once at the end
    /// (return false to abort). The tick sees the whole simulation between two events:
    /// the streaming writer drains the time series and the packet log there
    /// (`crate::run_streaming`), so nothing is added to the per-event path.
    pub fn run_ticks(&mut self, tick: &mut dyn FnMut(&mut Sim) -> bool) -> bool {
        if !self.run_until(self.end, tick) {
            return false;
        }
        self.finish();
        tick(self);
        true
    }

    /// The end of the run: time stands at its end, fast links settle.
    pub(crate) fn finish(&mut self) {
        self.now = self.end;
        self.settle_fast_links_at_end();
    }

    /// Runs every event due at or before `until`, calling `tick(self)` about every 2^16
    /// events (return false to abort).
    pub(crate) fn run_until(
        &mut self,
        until: Time,
        tick: &mut dyn FnMut(&mut Sim) -> bool,
    ) -> bool {
        let mut countdown: u32 = 1 << 16;
        while let Some((t, ev)) = self.events.pop_until(until) {
            self.now = t;
            self.events_processed += 1;
            match ev {
                Event::TxDone(l) => {
                    self.event_counts.tx_done += 1;
                    self.on_tx_done(l)
                }
                Event::Arrive(l) => {
                    self.event_counts.arrive += 1;
                    self.on_arrive(l)
                }
                Event::ArriveLate(l) => {
                    self.event_counts.arrive += 1;
                    self.on_arrive_late(l)
                }
                Event::QdiscWake(l) => {
                    self.event_counts.qdisc_wake += 1;
                    let link = &mut self.links[l as usize];
                    link.dev.wake(t);
                    if !link.busy() {
                        self.start_tx(l);
                    } else if link.dev.ring_cap() > 0 {
                        self.fill_ring(l);
                    }
                }
                Event::EndpointTimer(ident) => {
                    let Some(id) = self.endpoint_with_ident(ident) else {
                        self.event_counts.timer_discarded += 1;
                        continue; // closed
                    };
                    let slot = &mut self.endpoints[id as usize];
                    if !slot.live || slot.scheduled != t {
                        self.event_counts.timer_discarded += 1;
                        continue; // superseded by an earlier re-arm, or closed
                    }
                    slot.scheduled = Time::MAX;
                    if slot.ep.deadline().is_some_and(|d| d <= t) {
                        self.event_counts.timer_due += 1;
                        let (ep, mut io) = self.endpoint_io(id);
                        ep.on_timer(&mut io);
                    } else {
                        self.event_counts.timer_rearmed += 1;
                    }
                    self.after_endpoint_call(id);
                }
                Event::AppTimer(a) => {
                    self.event_counts.app_timer += 1;
                    self.wake_generator(a)
                }
                Event::Sample => {
                    self.event_counts.other += 1;
                    self.sample();
                    let next = t + self.sample_interval;
                    if next <= self.end {
                        self.events.push(next, Event::Sample);
                    }
                }
                Event::WarmupEnd => {
                    self.event_counts.other += 1;
                    self.settle_fast_links(t);
                    // What the sampled links counted since their last sample survives the
                    // reset: prev = -(counted since last sample), in wrapping arithmetic.
                    for (k, &l) in self.sampled_links.iter().enumerate() {
                        let st = &self.links[l as usize].stats;
                        let drops: u64 = st.drops.iter().sum();
                        let p = &mut self.prev_link[k];
                        p.tx_bytes = p.tx_bytes.wrapping_sub(st.tx_bytes);
                        p.drops = p.drops.wrapping_sub(drops);
                    }
                    for l in &mut self.links {
                        l.reset_stats(t);
                    }
                    self.wifi_reset_stats();
                }
            }
            countdown -= 1;
            if countdown == 0 {
                countdown = 1 << 16;
                if !tick(self) {
                    return false;
                }
            }
        }
        true
    }

    /// Testing the event-order contract (docs/engine.md, "Event order"): from now on every
    /// `n`-th event filed at least 2 ns ahead is filed through a no-op relay event due
    /// halfway (`EventQueue::relay_every`; 0 = never). The outputs must not change.
    pub fn relay_events_every(&mut self, n: u32) {
        self.events.relay_every(n);
    }

    /// How many events went through a relay (`relay_events_every`).
    pub fn relays_filed(&self) -> u64 {
        self.events.relays_filed()
    }

    /// Starts applications (called once before `run`).
    pub fn start_apps(&mut self) {
        for a in 0..self.apps.len() as u32 {
            self.start_generator(a);
        }
    }

    /// The names of the links the time series samples, in their sampling order.
    pub(crate) fn sampled_link_names(&self) -> Vec<String> {
        self.sampled_links
            .iter()
            .map(|&l| self.links[l as usize].name.clone())
            .collect()
    }

    /// Packets still inside the network: queued, being serialised or propagating.
    pub fn in_network(&self) -> u64 {
        self.links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                // A cut link's packets count where they arrive: in the far end's
                // partition, shipped (all of them, after the last window).
                let propagating = match &self.part {
                    Some(p) if l.cut => p.incoming[i].len() as u64,
                    _ => l.in_flight.len() as u64,
                };
                l.dev.qdisc.len_packets() as u64
                    + l.dev.ring_len() as u64
                    + l.tx_pkt.is_some() as u64
                    + propagating
                    + l.late.len() as u64
            })
            .sum::<u64>()
            + self.wifi.as_ref().map_or(0, |w| w.in_medium())
    }

    /// The conservation law: created = delivered + dropped + inside.
    pub fn check_conservation(&self) -> Result<(), String> {
        let inside = self.in_network();
        // The in-flight pool holds exactly the packets the links list (none lost or
        // leaked by a slot reused while still listed).
        let listed: usize = self.links.iter().map(|l| l.in_flight.len()).sum();
        if self.flight.len() != listed {
            return Err(format!(
                "in-flight pool holds {} packets, links list {listed}",
                self.flight.len()
            ));
        }
        let a = self.acct;
        if a.created == a.delivered + a.dropped + inside {
            Ok(())
        } else {
            Err(format!(
                "conservation violated: created {} != delivered {} + dropped {} + in network {}",
                a.created, a.delivered, a.dropped, inside
            ))
        }
    }

    // ----- sampling -----

    fn sample(&mut self) {
        let now = self.now;
        let dt = self.sample_interval.as_secs_f64();
        for k in 0..self.sampled_links.len() {
            let l = self.sampled_links[k];
            if let Some(p) = &self.part {
                if !p.owns(self.links[l as usize].from) {
                    continue; // sampled by its own partition
                }
            }
            if let TxFate::Fast(f) = self.links[l as usize].tx_fate {
                self.settle_fast(l, f, now);
            }
            let fast_view = self.fast_backlog_view(l);
            let link = &mut self.links[l as usize];
            // Deltas since the previous sample. The warm-up end resets the link counters
            // and carries what was counted since the last sample into `prev_link` (as a
            // wrapped negative offset), so the first sample after it is not a false 0.
            let counts = LinkCounts {
                tx_bytes: link.stats.tx_bytes,
                drops: link.stats.drops.iter().sum(),
                ecn_marks: link.dev.qdisc.ecn_marks(),
            };
            let ring = (link.dev.ring_cap() > 0).then(|| link.dev.ring_len());
            let (e, prev) = (self.sampled_entities[k], &mut self.prev_link[k]);
            match fast_view {
                Some(mut view) => self
                    .series
                    .push_link_at(now, e, &mut view, ring, counts, prev, dt),
                None => {
                    self.series
                        .push_link_at(now, e, &mut link.dev.qdisc, ring, counts, prev, dt)
                }
            }
        }
        if self.flow_series {
            for slot in &self.endpoints {
                if !slot.live {
                    continue;
                }
                let e = flow_entity(&mut self.flow_entities, &mut self.series, slot.flow);
                let series = &mut self.series;
                slot.ep
                    .observe(&mut |metric, v| series.push_at(now, e, metric, v));
            }
            for rec in self.flows.iter_mut() {
                if rec.end.is_some_and(|e| e + self.sample_interval < now) || rec.start > now {
                    continue;
                }
                let d = rec.delivered_bytes - rec.sampled_bytes;
                rec.sampled_bytes = rec.delivered_bytes;
                if now > Time::ZERO {
                    let e = flow_entity(&mut self.flow_entities, &mut self.series, rec.flow);
                    self.series
                        .push_at(now, e, "goodput_bps", d as f64 * 8.0 / dt);
                }
            }
        }
    }
}

/// The entity `flow{flow}` of `series`, resolved once per flow.
fn flow_entity(cache: &mut Vec<Option<EntityId>>, series: &mut TimeSeries, flow: u32) -> EntityId {
    let f = flow as usize;
    if cache.len() <= f {
        cache.resize(f + 1, None);
    }
    *cache[f].get_or_insert_with(|| series.entity(&format!("flow{flow}")))
}
