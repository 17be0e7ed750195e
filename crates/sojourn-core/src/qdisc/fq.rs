//! `fq`: Linux's Fair Queue packet scheduler with per-flow pacing (`sch_fq`, Eric Dumazet).
//!
//! Modelled version: **Linux 6.18** `net/sched/sch_fq.c` (3 priority bands with WRR, per-band
//! packet limit, EDT time_to_send, the drift-guarded pacing correction). Behaviour follows
//! the kernel; the code is our own. Every deviation is listed in docs/disciplines/fq.md.
//!
//! In short:
//! - A *flow* is a socket (`pkt.sk != 0`, locally generated traffic) or, for forwarded
//!   packets, the pseudo-flow `pkt.hash & orphan_mask` (so at most 1024 routed flows).
//! - Each flow queues its packets ordered by `time_to_send` (the EDT stamp
//!   `pkt.departure_at`, else the enqueue time), and has a byte `credit`.
//! - Flows live on per-band `new_flows`/`old_flows` round-robin lists (DRR with `quantum`);
//!   the three bands are served by weighted round robin (`weights`, bytes).
//! - A flow whose head may not leave yet (EDT in the future, or pacing) is *throttled*: it
//!   leaves the RR lists for a time-ordered set until its time comes; when nothing can leave
//!   now, dequeue returns [`Dequeue::NotBefore`] (the kernel's watchdog).
//!
//! The scheduler is generic over a [`FlowPolicy`] that decides per-flow admission and sees
//! every dequeue: plain fq uses [`PerFlowLimit`] (`flow_limit` packets), and CoCoA
//! (`cocoa.rs`) plugs in its adaptive per-flow limit without copying the scheduler.

use super::vocab::{
    tc_rate, tc_time, BuildCtx, Dequeue, Discipline, DropReason, Drops, NotLinux, Qdisc, TcKey,
    Verdict,
};
use crate::packet::Packet;
use crate::params::{ConfResult, Params, Value};
use crate::time::{Duration, Time};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// `FQ_BANDS`.
pub const BANDS: usize = 3;
/// The pfifo_fast priomap (`sch_default_prio2band`), indexed by `priority & TC_PRIO_MAX`.
pub const DEFAULT_PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
/// Default band weights (bytes): 9<<16, 3<<16, 1<<16.
pub const DEFAULT_WEIGHTS: [u32; BANDS] = [589_824, 196_608, 65_536];
/// `FQ_MIN_WEIGHT`: the smallest band weight the kernel accepts.
pub const MIN_WEIGHT: u32 = 16_384;
/// `FQ_GC_MAX`: flows collected per classification at most.
const GC_MAX: usize = 8;
/// Default ce_threshold: `NSEC_PER_USEC * ~0U` (about 4295 s, i.e. off).
const CE_THRESHOLD_OFF_NS: u64 = 1_000 * u32::MAX as u64;
/// Orphan masks up to this size use a direct-indexed table instead of a hash map.
const DIRECT_TABLE_MAX: u64 = 1 << 20;
const NIL: u32 = u32::MAX;
const SOCKET_KEY: u64 = 1 << 32;

/// Every `sch_fq` parameter, by its tc name (rates in bytes/s as the kernel stores them).
#[derive(Clone, Debug, PartialEq)]
pub struct FqConfig {
    /// `limit`: packets per band (Linux >= 6.7 checks it per band).
    pub limit: u32,
    /// `flow_limit`: packets per flow.
    pub flow_limit: u32,
    /// `quantum`: DRR credit refill, bytes.
    pub quantum_bytes: u32,
    /// `initial_quantum`: credit of a new flow, bytes.
    pub initial_quantum_bytes: u32,
    /// `refill_delay`: a flow idle (detached) longer than this gets at least one quantum back.
    pub refill_delay: Duration,
    /// `maxrate` in bytes/s; `None` = unlimited (`~0UL`).
    pub maxrate_bytes_per_s: Option<u64>,
    /// `pacing` (tc `nopacing` = false): `rate_enable`.
    pub pacing: bool,
    /// `buckets`: number of rb-trees in the kernel's flow table (no behavioural effect here).
    pub buckets: u32,
    /// `orphan_mask`: pseudo-flow key mask for forwarded packets.
    pub orphan_mask: u32,
    /// `low_rate_threshold` in bytes/s: flows paced at or below it are paced per packet.
    pub low_rate_threshold_bytes_per_s: u64,
    /// `horizon`: EDT stamps further than this in the future are dropped or capped.
    pub horizon: Duration,
    /// `horizon_drop` (tc `horizon_cap` = false).
    pub horizon_drop: bool,
    /// `ce_threshold`: CE-mark packets dequeued later than their scheduled time by more.
    pub ce_threshold: Duration,
    /// `weights`: per-band WRR quantum, bytes.
    pub weights: [u32; BANDS],
    /// `priomap`: band of each `priority & 15`.
    pub priomap: [u8; 16],
    /// Idle (detached) flows are forgotten after this (`FQ_GC_AGE` = 3 s; CoCoA: 10 s).
    pub gc_age: Duration,
    /// CoCoA-literal: collect only when `flows >= 2 * buckets && inactive > flows / 2`,
    /// as the seed's `cocoa_classify` does.
    pub gc_only_when_crowded: bool,
}

impl FqConfig {
    /// `fq_init` defaults for a device with `psched_mtu = mtu`.
    pub fn linux_defaults(mtu: u32) -> FqConfig {
        let mtu = mtu.clamp(1, 1 << 20);
        FqConfig {
            limit: 10_000,
            flow_limit: 100,
            quantum_bytes: (2 * mtu).clamp(256, 1 << 20),
            initial_quantum_bytes: (10 * mtu).min(1 << 20),
            refill_delay: Duration::from_ms(40),
            maxrate_bytes_per_s: None,
            pacing: true,
            buckets: 1024,
            orphan_mask: 1023,
            low_rate_threshold_bytes_per_s: 550_000 / 8,
            horizon: Duration::from_secs(10),
            horizon_drop: true,
            ce_threshold: Duration(CE_THRESHOLD_OFF_NS),
            weights: DEFAULT_WEIGHTS,
            priomap: DEFAULT_PRIOMAP,
            gc_age: Duration::from_secs(3),
            gc_only_when_crowded: false,
        }
    }

    /// Reads every fq parameter by its tc name (shared by `fq` and `cocoa`).
    pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<FqConfig> {
        let mut c = FqConfig::linux_defaults(ctx.mtu_bytes);
        c.limit = p.u32("limit", c.limit, 1, u32::MAX)?;
        c.flow_limit = p.u32("flow_limit", c.flow_limit, 1, u32::MAX)?;
        let q = p.bytes("quantum", c.quantum_bytes as u64)?;
        if !(256..=1 << 20).contains(&q) {
            return Err(p.err(
                "quantum",
                format!("{q} B is outside the kernel's range [256 B, 1 MiB]"),
            ));
        }
        c.quantum_bytes = q as u32;
        let iq = p.bytes("initial_quantum", c.initial_quantum_bytes as u64)?;
        if iq > 1 << 20 {
            return Err(p.err(
                "initial_quantum",
                format!("{iq} B exceeds the kernel's maximum of 1 MiB"),
            ));
        }
        c.initial_quantum_bytes = iq as u32;
        c.refill_delay = p.duration("refill_delay", c.refill_delay)?;
        c.maxrate_bytes_per_s = p.rate_opt("maxrate")?.map(|bps| bps / 8);
        c.pacing = p.bool("pacing", c.pacing)?;
        c.buckets = p.u32("buckets", c.buckets, 2, 256 * 1024)?;
        if !c.buckets.is_power_of_two() {
            return Err(p.err(
                "buckets",
                format!("{} is not a power of two (2 ... 262144)", c.buckets),
            ));
        }
        c.orphan_mask = p.u32("orphan_mask", c.orphan_mask, 0, u32::MAX)?;
        if let Some(bps) = p.rate_opt("low_rate_threshold")? {
            c.low_rate_threshold_bytes_per_s = bps / 8;
        }
        c.horizon = p.duration("horizon", c.horizon)?;
        c.horizon_drop = p.bool("horizon_drop", c.horizon_drop)?;
        if let Some(d) = p.duration_opt("ce_threshold")? {
            c.ce_threshold = d;
        }
        if let Some(v) = p.raw("weights") {
            let w = int_array(v, BANDS)
                .ok_or_else(|| p.err("weights", "expected an array of 3 integers (bytes)"))?;
            for (i, &x) in w.iter().enumerate() {
                if x < MIN_WEIGHT as i64 || x > i32::MAX as i64 {
                    return Err(p.err(
                        "weights",
                        format!(
                            "weight of band {i} is {x}; the kernel needs {MIN_WEIGHT} ... 2^31-1"
                        ),
                    ));
                }
                c.weights[i] = x as u32;
            }
        }
        if let Some(v) = p.raw("priomap") {
            let m = int_array(v, 16).ok_or_else(|| {
                p.err(
                    "priomap",
                    "expected an array of 16 band numbers (0, 1 or 2)",
                )
            })?;
            for (i, &b) in m.iter().enumerate() {
                if !(0..BANDS as i64).contains(&b) {
                    return Err(p.err(
                        "priomap",
                        format!("priority {i} maps to band {b}; fq has bands 0, 1, 2"),
                    ));
                }
                c.priomap[i] = b as u8;
            }
        }
        Ok(c)
    }
}

/// `tc qdisc … fq` arguments of `c` (`tc qdisc show` order; `bands 3 priomap …` and
/// `weights …` only when they differ from the kernel's defaults, so older tc accept the
/// line). `gc_age`/`gc_only_when_crowded` are CoCoA's internals, not tc options.
pub fn tc_args(c: &FqConfig) -> Result<Vec<String>, NotLinux> {
    let d = FqConfig::linux_defaults(1514);
    if c.gc_age != d.gc_age || c.gc_only_when_crowded {
        return Err(NotLinux::new(
            "fq",
            "a flow-collection age other than 3 s is CoCoA's, not a tc option",
        ));
    }
    let mut a: Vec<String> = vec![
        "limit".into(),
        c.limit.to_string(),
        "flow_limit".into(),
        c.flow_limit.to_string(),
        "buckets".into(),
        c.buckets.to_string(),
        "orphan_mask".into(),
        c.orphan_mask.to_string(),
        if c.pacing { "pacing" } else { "nopacing" }.into(),
        "quantum".into(),
        c.quantum_bytes.to_string(),
        "initial_quantum".into(),
        c.initial_quantum_bytes.to_string(),
        "low_rate_threshold".into(),
        tc_rate(c.low_rate_threshold_bytes_per_s * 8),
    ];
    if let Some(m) = c.maxrate_bytes_per_s {
        a.extend(["maxrate".into(), tc_rate(m * 8)]);
    }
    a.extend([
        "refill_delay".into(),
        tc_time("fq", "refill_delay", c.refill_delay)?,
        "horizon".into(),
        tc_time("fq", "horizon", c.horizon)?,
        if c.horizon_drop {
            "horizon_drop"
        } else {
            "horizon_cap"
        }
        .into(),
    ]);
    if c.ce_threshold != d.ce_threshold {
        a.extend([
            "ce_threshold".into(),
            tc_time("fq", "ce_threshold", c.ce_threshold)?,
        ]);
    }
    if c.priomap != d.priomap {
        a.extend(["bands".into(), BANDS.to_string(), "priomap".into()]);
        a.extend(c.priomap.iter().map(|b| b.to_string()));
    }
    if c.weights != d.weights {
        a.push("weights".into());
        a.extend(c.weights.iter().map(|w| w.to_string()));
    }
    Ok(a)
}

/// tc keywords of `fq`.
pub const TC_KEYS: &[TcKey] = &[
    TcKey::Int("limit", "limit"),
    TcKey::Int("flow_limit", "flow_limit"),
    TcKey::Int("buckets", "buckets"),
    TcKey::Int("orphan_mask", "orphan_mask"),
    TcKey::Flag("pacing", "pacing", true),
    TcKey::Flag("nopacing", "pacing", false),
    TcKey::Size("quantum", "quantum"),
    TcKey::Size("initial_quantum", "initial_quantum"),
    TcKey::Rate("low_rate_threshold", "low_rate_threshold"),
    TcKey::Rate("maxrate", "maxrate"),
    TcKey::Time("refill_delay", "refill_delay"),
    TcKey::Time("horizon", "horizon"),
    TcKey::Flag("horizon_drop", "horizon_drop", true),
    TcKey::Flag("horizon_cap", "horizon_drop", false),
    TcKey::Time("ce_threshold", "ce_threshold"),
    TcKey::Ignore("bands", 1),
    // hrtimer slack: sojourn's timers fire exactly, so the value has nothing to set.
    TcKey::Ignore("timer_slack", 1),
    TcKey::Ints("priomap", "priomap", 16),
    TcKey::Ints("weights", "weights", BANDS),
];

fn int_array(v: &Value, n: usize) -> Option<Vec<i64>> {
    match v {
        Value::Array(a) if a.len() == n => a
            .iter()
            .map(|x| match x {
                Value::Int(i) => Some(*i),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// What a [`FlowPolicy`] decides about an arriving packet of a classified flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    Accept,
    /// Drop the arrival with this reason.
    Drop(DropReason),
    /// Drop this many of the flow's newest queued packets (`StandingQueue`), then the arrival
    /// (`FlowLimit`). CoCoA's standing-queue removal.
    TrimTailThenDrop(u32),
}

/// Per-flow admission and measurement hooks around the fq scheduler.
pub trait FlowPolicy {
    /// State kept with each flow (e.g. CoCoA's learned limit and intervals).
    type FlowState;
    /// State of a flow created at `now`.
    fn new_flow(&mut self, now: Time) -> Self::FlowState;
    /// Called at enqueue after classification; `qlen` = the flow's packets before the arrival.
    fn admit(&mut self, st: &mut Self::FlowState, qlen: u32, now: Time) -> Admit;
    /// The arrival was accepted into the flow.
    fn enqueued(&mut self, _st: &mut Self::FlowState, _now: Time) {}
    /// A packet of the flow left; `qlen_after` = the flow's packets after it.
    fn dequeued(&mut self, _st: &mut Self::FlowState, _qlen_after: u32, _now: Time) {}
    /// Whether [`FlowPolicy::observe_flow`] wants to see every flow in `observe`.
    fn observes_flows(&self) -> bool {
        false
    }
    /// Time-series values for one flow (`label` = sim flow id of the flow's first packet).
    fn observe_flow(
        &self,
        _label: u32,
        _st: &Self::FlowState,
        _qlen: u32,
        _emit: &mut dyn FnMut(&str, f64),
    ) {
    }
}

/// Plain fq: drop an arrival when its flow already holds `flow_limit` packets.
#[derive(Clone, Debug)]
pub struct PerFlowLimit {
    pub flow_limit: u32,
}

impl FlowPolicy for PerFlowLimit {
    type FlowState = ();
    fn new_flow(&mut self, _now: Time) {}
    #[inline]
    fn admit(&mut self, _st: &mut (), qlen: u32, _now: Time) -> Admit {
        // fq_enqueue: `if (f->qlen >= q->flow_plimit)` drop.
        if qlen >= self.flow_limit {
            Admit::Drop(DropReason::FlowLimit)
        } else {
            Admit::Accept
        }
    }
}

/// Which list a flow is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListState {
    Detached,
    New,
    Old,
    Throttled,
    Free,
}

#[derive(Clone, Copy, Debug)]
struct Queued {
    time_to_send: Time,
    band: u8,
    pkt: Packet,
}

struct Flow<S> {
    key: u64,
    /// `pkt.conversation()` of the packet that created this flow (for observe labels).
    label: u32,
    /// Bumped when the slot is freed, to recognise stale GC entries.
    generation: u32,
    queue: VecDeque<Queued>,
    credit: i64,
    /// Band of the last packet enqueued (`f->band`).
    band: u8,
    state: ListState,
    next: u32,
    /// When the flow was last detached (`f->age`).
    age: Time,
    /// Earliest departure of the next packet; zero = never paced (`f->time_next_packet`).
    time_next_packet: Time,
    ext: S,
}

#[derive(Clone, Copy, Debug)]
struct List {
    first: u32,
    last: u32,
}

impl List {
    const EMPTY: List = List {
        first: NIL,
        last: NIL,
    };
}

#[derive(Clone, Copy, Debug)]
struct Band {
    new_flows: List,
    old_flows: List,
    /// WRR credit (bytes); starts at 0 like the kernel's zeroed `fq_perband_flows`.
    credit: i64,
    weight: i64,
}

/// Counters mirroring `tc -s qdisc show` for fq.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FqStats {
    pub flows_created: u64,
    pub gc_flows: u64,
    pub throttled: u64,
    pub horizon_drops: u64,
    pub horizon_caps: u64,
    pub flows_plimit: u64,
    pub band_drops: [u64; BANDS],
    pub pkts_too_long: u64,
    pub ce_marks: u64,
}

/// A hasher for integer keys that are not attacker-chosen (flow keys, node ids): one
/// splitmix64 mix per word instead of SipHash's rounds (htb's address filters use it too).
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = crate::rng::splitmix64_mix(self.0 ^ b as u64);
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = crate::rng::splitmix64_mix(self.0 ^ x);
    }
    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }
}

type KeyMap = HashMap<u64, u32, BuildHasherDefault<KeyHasher>>;

/// The fq scheduler, generic over its per-flow admission policy.
pub struct FqSched<P: FlowPolicy> {
    cfg: FqConfig,
    policy: P,
    flows: Vec<Flow<P::FlowState>>,
    free_slots: Vec<u32>,
    /// Orphan key -> flow index (direct table when `orphan_mask` is small).
    orphan_table: Vec<u32>,
    /// Socket keys (and orphan keys when the mask is too large for the table).
    keyed: KeyMap,
    bands: [Band; BANDS],
    /// `q->band_nr`: the band being served.
    band_nr: usize,
    band_pkt_count: [u32; BANDS],
    /// `q->delayed`: throttled flows by (time_next_packet, insertion order).
    throttled: BinaryHeap<Reverse<(Time, u64, u32)>>,
    throttle_seq: u64,
    /// Detach events in time order: (age, flow, generation), for lazy garbage collection.
    gc_queue: VecDeque<(Time, u32, u32)>,
    active_flows: u32,
    inactive_flows: u32,
    qlen: usize,
    backlog_bytes: u64,
    stats: FqStats,
}

/// Linux `fq`.
pub type Fq = FqSched<PerFlowLimit>;

impl Fq {
    pub fn new(cfg: FqConfig) -> Fq {
        let policy = PerFlowLimit {
            flow_limit: cfg.flow_limit,
        };
        FqSched::with_policy(cfg, policy)
    }
}

/// Builder for `kind = "fq"`.
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Fq> {
    Ok(Fq::new(FqConfig::from_params(p, ctx)?))
}

impl Discipline for FqConfig {
    const KIND: &'static str = "fq";
    const SUMMARY: &'static str =
        "Linux fq: per-flow fair queueing with pacing, 3 WRR bands (6.18)";
    type Qdisc = Box<Fq>;

    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        FqConfig::from_params(p, ctx)
    }
    fn build(&self, _ctx: &BuildCtx) -> Box<Fq> {
        Box::new(Fq::new(self.clone()))
    }
    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS);

    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        tc_args(self)
    }
}

impl<P: FlowPolicy> FqSched<P> {
    pub fn with_policy(cfg: FqConfig, policy: P) -> FqSched<P> {
        let orphan_table = if (cfg.orphan_mask as u64) < DIRECT_TABLE_MAX {
            vec![NIL; cfg.orphan_mask as usize + 1]
        } else {
            Vec::new()
        };
        let bands = cfg.weights.map(|w| Band {
            new_flows: List::EMPTY,
            old_flows: List::EMPTY,
            credit: 0,
            weight: w as i64,
        });
        FqSched {
            cfg,
            policy,
            flows: Vec::new(),
            free_slots: Vec::new(),
            orphan_table,
            keyed: KeyMap::default(),
            bands,
            band_nr: 0,
            band_pkt_count: [0; BANDS],
            throttled: BinaryHeap::new(),
            throttle_seq: 0,
            gc_queue: VecDeque::new(),
            active_flows: 0,
            inactive_flows: 0,
            qlen: 0,
            backlog_bytes: 0,
            stats: FqStats::default(),
        }
    }

    pub fn config(&self) -> &FqConfig {
        &self.cfg
    }
    pub fn stats(&self) -> &FqStats {
        &self.stats
    }
    pub fn policy(&self) -> &P {
        &self.policy
    }
    /// Flows currently known (not yet garbage-collected).
    pub fn flow_count(&self) -> u32 {
        self.active_flows
    }
    /// Packets queued in each band.
    pub fn band_packets(&self) -> [u32; BANDS] {
        self.band_pkt_count
    }

    /// The flow a packet would be classified into, if it exists: `(qlen, &state)`.
    pub fn flow_of(&self, pkt: &Packet) -> Option<(u32, &P::FlowState)> {
        let (key, direct) = self.key_of(pkt);
        let idx = self.lookup(key, direct);
        (idx != NIL).then(|| {
            let f = &self.flows[idx as usize];
            (f.queue.len() as u32, &f.ext)
        })
    }

    /// Every known flow: `(label, qlen, &state)`.
    pub fn flows(&self) -> impl Iterator<Item = (u32, u32, &P::FlowState)> {
        self.flows
            .iter()
            .filter(|f| f.state != ListState::Free)
            .map(|f| (f.label, f.queue.len() as u32, &f.ext))
    }

    // ---- classification (fq_classify) ------------------------------------------------------

    /// Socket flows are keyed by socket; everything else by `hash & orphan_mask`.
    #[inline]
    fn key_of(&self, pkt: &Packet) -> (u64, bool) {
        if pkt.sk != 0 {
            (SOCKET_KEY | pkt.sk as u64, false)
        } else {
            let k = (pkt.hash & self.cfg.orphan_mask) as u64;
            (k, !self.orphan_table.is_empty())
        }
    }

    #[inline]
    fn lookup(&self, key: u64, direct: bool) -> u32 {
        if direct {
            self.orphan_table[key as usize]
        } else {
            self.keyed.get(&key).copied().unwrap_or(NIL)
        }
    }

    fn classify(&mut self, pkt: &Packet, now: Time) -> u32 {
        let (key, direct) = self.key_of(pkt);
        let idx = self.lookup(key, direct);
        // fq_gc runs on every classification but never collects the flow being looked up.
        self.gc(now, idx);
        if idx != NIL {
            return idx;
        }
        // New flow: detached, credit = initial_quantum, band 0 (zeroed allocation).
        let ext = self.policy.new_flow(now);
        let idx = match self.free_slots.pop() {
            Some(i) => {
                let f = &mut self.flows[i as usize];
                f.key = key;
                f.label = pkt.conversation();
                f.credit = self.cfg.initial_quantum_bytes as i64;
                f.band = 0;
                f.state = ListState::Detached;
                f.next = NIL;
                f.age = now;
                f.time_next_packet = Time::ZERO;
                f.ext = ext;
                i
            }
            None => {
                self.flows.push(Flow {
                    key,
                    label: pkt.conversation(),
                    generation: 0,
                    queue: VecDeque::new(),
                    credit: self.cfg.initial_quantum_bytes as i64,
                    band: 0,
                    state: ListState::Detached,
                    next: NIL,
                    age: now,
                    time_next_packet: Time::ZERO,
                    ext,
                });
                (self.flows.len() - 1) as u32
            }
        };
        if direct {
            self.orphan_table[key as usize] = idx;
        } else {
            self.keyed.insert(key, idx);
        }
        self.active_flows += 1;
        self.inactive_flows += 1;
        self.stats.flows_created += 1;
        // A never-attached flow is a GC candidate too (e.g. its first packet was dropped).
        let g = self.flows[idx as usize].generation;
        self.gc_queue.push_back((now, idx, g));
        idx
    }

    /// Lazy garbage collection of flows detached for more than `gc_age` (`fq_gc`, at most
    /// `FQ_GC_MAX` per call). Detach events are kept in time order, so this is O(1) amortised.
    fn gc(&mut self, now: Time, keep: u32) {
        if self.cfg.gc_only_when_crowded
            && !(self.active_flows >= 2 * self.cfg.buckets
                && self.inactive_flows > self.active_flows / 2)
        {
            return;
        }
        let mut freed = 0;
        let mut looked = 0;
        while let Some(&(age, idx, generation)) = self.gc_queue.front() {
            // time_after(jiffies, f->age + FQ_GC_AGE)
            if freed == GC_MAX || looked == 2 * GC_MAX || now <= age + self.cfg.gc_age {
                break;
            }
            self.gc_queue.pop_front();
            looked += 1;
            let f = &self.flows[idx as usize];
            if f.generation != generation
                || f.state != ListState::Detached
                || f.age != age
                || idx == keep
                || !f.queue.is_empty()
            {
                continue; // stale event, or the flow being looked up
            }
            self.free_flow(idx);
            freed += 1;
        }
    }

    fn free_flow(&mut self, idx: u32) {
        let f = &mut self.flows[idx as usize];
        let key = f.key;
        f.generation = f.generation.wrapping_add(1);
        f.state = ListState::Free;
        if key & SOCKET_KEY == 0 && !self.orphan_table.is_empty() {
            self.orphan_table[key as usize] = NIL;
        } else {
            self.keyed.remove(&key);
        }
        self.free_slots.push(idx);
        self.active_flows -= 1;
        self.inactive_flows -= 1;
        self.stats.gc_flows += 1;
    }

    // ---- round-robin lists ------------------------------------------------------------------

    /// `fq_flow_add_tail`: append to the new or old list of the flow's band.
    fn add_tail(&mut self, idx: u32, state: ListState) {
        let band = self.flows[idx as usize].band as usize;
        let list = match state {
            ListState::New => &mut self.bands[band].new_flows,
            _ => &mut self.bands[band].old_flows,
        };
        if list.first == NIL {
            list.first = idx;
        } else {
            let last = list.last;
            self.flows[last as usize].next = idx;
        }
        list.last = idx;
        let f = &mut self.flows[idx as usize];
        f.next = NIL;
        f.state = state;
    }

    /// Removes the first flow of band `b`'s `new` (or old) list.
    #[inline]
    fn pop_first(&mut self, b: usize, new: bool) {
        let list = if new {
            &mut self.bands[b].new_flows
        } else {
            &mut self.bands[b].old_flows
        };
        let idx = list.first;
        list.first = self.flows[idx as usize].next;
    }

    fn set_detached(&mut self, idx: u32, now: Time) {
        let f = &mut self.flows[idx as usize];
        f.state = ListState::Detached;
        f.age = now;
        let g = f.generation;
        self.gc_queue.push_back((now, idx, g));
    }

    /// `fq_flow_set_throttled`: ties keep insertion order (rb-tree `>=` goes right).
    fn set_throttled(&mut self, idx: u32) {
        let f = &mut self.flows[idx as usize];
        f.state = ListState::Throttled;
        self.throttle_seq += 1;
        self.throttled
            .push(Reverse((f.time_next_packet, self.throttle_seq, idx)));
        self.stats.throttled += 1;
    }

    /// `fq_check_throttled`: flows whose time has come go to the tail of their band's old list.
    fn check_throttled(&mut self, now: Time) {
        while let Some(&Reverse((t, _, idx))) = self.throttled.peek() {
            if t > now {
                break;
            }
            self.throttled.pop();
            self.add_tail(idx, ListState::Old);
        }
    }

    /// `fq_pband_head_select`: true = new list, false = old list.
    #[inline]
    fn head_select(&self, b: usize) -> Option<bool> {
        let band = &self.bands[b];
        if band.credit <= 0 {
            None
        } else if band.new_flows.first != NIL {
            Some(true)
        } else if band.old_flows.first != NIL {
            Some(false)
        } else {
            None
        }
    }

    /// Drops the `n` newest packets of flow `idx` (CoCoA's standing-queue removal).
    fn trim_tail(&mut self, idx: u32, n: u32, drops: &mut Drops) {
        let was_empty = self.flows[idx as usize].queue.is_empty();
        for _ in 0..n {
            let Some(e) = self.flows[idx as usize].queue.pop_back() else {
                break;
            };
            self.band_pkt_count[e.band as usize] -= 1;
            self.qlen -= 1;
            self.backlog_bytes -= e.pkt.len_bytes as u64;
            drops.push(e.pkt, DropReason::StandingQueue);
        }
        if !was_empty && self.flows[idx as usize].queue.is_empty() {
            self.inactive_flows += 1;
        }
    }
}

impl<P: FlowPolicy> Qdisc for FqSched<P> {
    fn enqueue(&mut self, mut pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        // Band from skb->priority through the priomap; the limit is per band (>= 6.7).
        let band = self.cfg.priomap[(pkt.priority & 15) as usize] as usize;
        if self.band_pkt_count[band] >= self.cfg.limit {
            self.stats.band_drops[band] += 1;
            drops.push(pkt, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        // time_to_send: the EDT stamp if any (beyond the horizon: drop or cap), else now.
        let time_to_send = if pkt.departure_at == Time::ZERO {
            now
        } else {
            if pkt.departure_at > now + self.cfg.horizon {
                if self.cfg.horizon_drop {
                    self.stats.horizon_drops += 1;
                    drops.push(pkt, DropReason::Horizon);
                    return Verdict::Dropped;
                }
                self.stats.horizon_caps += 1;
                pkt.departure_at = now + self.cfg.horizon;
            }
            pkt.departure_at
        };

        let idx = self.classify(&pkt, now);
        let fi = idx as usize;
        let qlen = self.flows[fi].queue.len() as u32;
        match self.policy.admit(&mut self.flows[fi].ext, qlen, now) {
            Admit::Accept => {}
            Admit::Drop(reason) => {
                self.stats.flows_plimit += 1;
                drops.push(pkt, reason);
                return Verdict::Dropped;
            }
            Admit::TrimTailThenDrop(n) => {
                self.stats.flows_plimit += 1;
                self.trim_tail(idx, n, drops);
                drops.push(pkt, DropReason::FlowLimit);
                return Verdict::Dropped;
            }
        }

        if self.flows[fi].state == ListState::Detached {
            // Appended to the new list of the band the flow had so far (band 0 for a fresh
            // flow): the kernel sets f->band only after fq_flow_add_tail.
            self.add_tail(idx, ListState::New);
            let f = &mut self.flows[fi];
            if now > f.age + self.cfg.refill_delay {
                f.credit = f.credit.max(self.cfg.quantum_bytes as i64);
            }
        }
        let f = &mut self.flows[fi];
        f.band = band as u8;
        self.band_pkt_count[band] += 1;
        if f.queue.is_empty() {
            self.inactive_flows -= 1;
        }
        self.policy.enqueued(&mut f.ext, now);

        // Per-flow queue ordered by time_to_send (O(1) when monotonic, as the kernel's list).
        self.backlog_bytes += pkt.len_bytes as u64;
        self.qlen += 1;
        let e = Queued {
            time_to_send,
            band: band as u8,
            pkt,
        };
        match f.queue.back() {
            Some(last) if last.time_to_send > time_to_send => {
                let pos = f.queue.partition_point(|q| q.time_to_send <= time_to_send);
                f.queue.insert(pos, e);
            }
            _ => f.queue.push_back(e),
        }
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Time, _drops: &mut Drops) -> Dequeue {
        if self.qlen == 0 {
            return Dequeue::Empty;
        }
        self.check_throttled(now);
        let mut retry = 0;
        loop {
            let b = self.band_nr;
            let Some(from_new) = self.head_select(b) else {
                // Next band by WRR: refill its credit (capped at its weight).
                let mut found = false;
                loop {
                    retry += 1;
                    if retry > BANDS {
                        break;
                    }
                    self.band_nr = (self.band_nr + 1) % BANDS;
                    let band = &mut self.bands[self.band_nr];
                    band.credit = (band.credit + band.weight).min(band.weight);
                    if band.credit > 0 {
                        found = true;
                        break;
                    }
                    retry = 0;
                }
                if found {
                    continue;
                }
                return match self.throttled.peek() {
                    Some(&Reverse((t, _, _))) => Dequeue::NotBefore(t),
                    None => Dequeue::Empty,
                };
            };
            let list = if from_new {
                self.bands[b].new_flows
            } else {
                self.bands[b].old_flows
            };
            let idx = list.first;
            let fi = idx as usize;
            retry = 0;

            // DRR: a flow out of credit gets a quantum and goes to the old tail.
            if self.flows[fi].credit <= 0 {
                self.flows[fi].credit += self.cfg.quantum_bytes as i64;
                self.pop_first(b, from_new);
                self.add_tail(idx, ListState::Old);
                continue;
            }

            let Some(head) = self.flows[fi].queue.front() else {
                // Empty flow: from new_flows it makes a pass through old_flows (prevents
                // starvation); from old_flows it is detached.
                self.pop_first(b, from_new);
                if from_new {
                    self.add_tail(idx, ListState::Old);
                } else {
                    self.set_detached(idx, now);
                }
                continue;
            };
            let time_next_packet = head.time_to_send.max(self.flows[fi].time_next_packet);
            if now < time_next_packet {
                self.pop_first(b, from_new);
                self.flows[fi].time_next_packet = time_next_packet;
                self.set_throttled(idx);
                continue;
            }

            let f = &mut self.flows[fi];
            let Queued { band, mut pkt, .. } = f.queue.pop_front().expect("peeked");
            self.qlen -= 1;
            self.backlog_bytes -= pkt.len_bytes as u64;
            self.band_pkt_count[band as usize] -= 1;
            if f.queue.is_empty() {
                self.inactive_flows += 1;
            }
            // ce_threshold: mark when later than scheduled by more than the threshold (the
            // kernel does not drop Not-ECT packets here; it just fails to mark them).
            if now.diff_ns(time_next_packet) > self.cfg.ce_threshold.as_ns() as i64 && pkt.set_ce()
            {
                self.stats.ce_marks += 1;
            }
            self.policy.dequeued(&mut f.ext, f.queue.len() as u32, now);

            let plen = pkt.len_bytes as i64;
            f.credit -= plen;
            self.bands[b].credit -= plen;

            if !self.cfg.pacing {
                return Dequeue::Packet(pkt);
            }
            // Pacing. With an EDT stamp, only maxrate paces (the sender already spaced them).
            let mut rate = self.cfg.maxrate_bytes_per_s.unwrap_or(u64::MAX);
            let mut pace_len = plen as u64;
            if pkt.departure_at == Time::ZERO {
                if pkt.sk != 0 && pkt.pacing_rate_bps != 0 {
                    rate = rate.min(pkt.pacing_rate_bps / 8);
                }
                if rate <= self.cfg.low_rate_threshold_bytes_per_s {
                    // Low rate: pace every packet by its own length.
                    f.credit = 0;
                } else {
                    // Otherwise pace once per quantum of credit, charging at least a quantum.
                    pace_len = pace_len.max(self.cfg.quantum_bytes as u64);
                    if f.credit > 0 {
                        return Dequeue::Packet(pkt);
                    }
                }
            }
            if rate != u64::MAX {
                let mut len_ns = pace_len as u128 * 1_000_000_000;
                if rate > 0 {
                    len_ns /= rate as u128;
                }
                // Clamp to 1 s: the socket rate can change later.
                if len_ns > 1_000_000_000 {
                    len_ns = 1_000_000_000;
                    self.stats.pkts_too_long += 1;
                }
                let mut len_ns = len_ns as u64;
                // Timer drift: if we are late w.r.t. the previous slot, take back up to half.
                if f.time_next_packet != Time::ZERO {
                    let drift = now.diff_ns(f.time_next_packet);
                    if drift > 0 {
                        len_ns -= (len_ns / 2).min(drift as u64);
                    }
                }
                f.time_next_packet = now + Duration(len_ns);
            }
            return Dequeue::Packet(pkt);
        }
    }

    #[inline]
    fn len_packets(&self) -> usize {
        self.qlen
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    fn ecn_marks(&self) -> u64 {
        self.stats.ce_marks
    }
    fn observe(&mut self, _now: Time, emit: &mut dyn FnMut(&str, f64)) {
        emit("flows", self.active_flows as f64);
        emit("throttled_flows", self.throttled.len() as f64);
        if self.policy.observes_flows() {
            for f in self.flows.iter().filter(|f| f.state != ListState::Free) {
                self.policy
                    .observe_flow(f.label, &f.ext, f.queue.len() as u32, emit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::testkit::{check_conservation_with, pkt, Bound};

    const MTU: u32 = 1514;

    fn fq() -> Fq {
        Fq::new(FqConfig::linux_defaults(MTU))
    }

    /// A locally generated packet of socket `sk` (flow id = socket id).
    fn sock(uid: u64, sk: u32, len: u32) -> Packet {
        let mut p = pkt(uid, sk, len);
        p.sk = sk;
        p
    }

    /// CoCoA-literal garbage collection (the seed's `cocoa_classify`): detached flows are
    /// collected only when there are at least 2 × buckets flows and more than half of them
    /// are inactive. With 4 buckets and 8 flows, 3 idle flows are kept, 4 are kept (4 is
    /// not more than 8 / 2), 5 are collected; with 7 flows nothing is collected.
    #[test]
    fn literal_gc_collects_only_when_crowded() {
        // (flows, of which idle (never attached), flows collected 4 s later)
        for (flows, idle, collected) in [(8u32, 3u32, 0u64), (8, 4, 0), (8, 5, 5), (7, 7, 0)] {
            let mut cfg = FqConfig::linux_defaults(MTU);
            cfg.buckets = 4;
            cfg.gc_only_when_crowded = true;
            let mut q = Fq::new(cfg);
            let mut d = Drops::new();
            for sk in 1..=flows {
                // An idle flow: its first packet is refused (flow_limit 0), so it stays
                // detached with an empty queue, a GC candidate from t = 0.
                q.policy.flow_limit = if sk <= flows - idle { 1 } else { 0 };
                enq(&mut q, sock(sk as u64, sk, 1000), Time(0), &mut d);
            }
            assert_eq!(d.len(), idle as usize);
            // fq_gc runs on the next classification, past gc_age (3 s).
            q.policy.flow_limit = 1;
            enq(
                &mut q,
                sock(99, 99, 1000),
                Time::from_ns(4_000_000_000),
                &mut d,
            );
            assert_eq!(
                q.stats().gc_flows,
                collected,
                "{flows} flows, {idle} of them idle"
            );
        }
    }

    /// A forwarded packet (no socket) with flow hash `hash`.
    fn fwd(uid: u64, flow: u32, hash: u32, len: u32) -> Packet {
        let mut p = pkt(uid, flow, len);
        p.hash = hash;
        p
    }

    fn enq<Q: Qdisc>(q: &mut Q, p: Packet, now: Time, d: &mut Drops) -> Verdict {
        let mut p = p;
        p.enqueued_at = now;
        q.enqueue(p, now, d)
    }

    #[test]
    fn defaults_are_linux_fq_init() {
        let c = FqConfig::linux_defaults(1514);
        assert_eq!(c.limit, 10_000);
        assert_eq!(c.flow_limit, 100);
        assert_eq!(c.quantum_bytes, 3028);
        assert_eq!(c.initial_quantum_bytes, 15140);
        assert_eq!(c.refill_delay, Duration::from_ms(40));
        assert_eq!(c.low_rate_threshold_bytes_per_s, 68_750);
        assert_eq!(c.orphan_mask, 1023);
        assert_eq!(c.horizon, Duration::from_secs(10));
        assert!(c.horizon_drop && c.pacing && c.maxrate_bytes_per_s.is_none());
        assert_eq!(c.weights, [9 << 16, 3 << 16, 1 << 16]);
        // ce_threshold off: NSEC_PER_USEC · ~0U = 4294.967295 s (`tc` shows none).
        assert_eq!(c.ce_threshold, Duration(4_294_967_295_000));
        // Built through the registry with no parameters, the same.
        let q = crate::qdisc::build(&Value::Str("fq".into()), "q", &BuildCtx::default()).unwrap();
        match q {
            crate::qdisc::AnyQdisc::Fq(f) => assert_eq!(f.config(), &c),
            _ => panic!("not fq"),
        }
    }

    #[test]
    fn params_by_tc_name_and_validation() {
        use crate::params::Table;
        let t = Table(vec![
            ("kind".into(), Value::Str("fq".into())),
            ("quantum".into(), Value::Int(1514)),
            ("maxrate".into(), Value::Str("8Mbit".into())),
            ("pacing".into(), Value::Bool(false)),
            ("horizon_drop".into(), Value::Bool(false)),
            ("ce_threshold".into(), Value::Str("2ms".into())),
            (
                "weights".into(),
                Value::Array(vec![
                    Value::Int(65536),
                    Value::Int(65536),
                    Value::Int(65536),
                ]),
            ),
        ]);
        match crate::qdisc::build(&Value::Table(t), "q", &BuildCtx::default()).unwrap() {
            crate::qdisc::AnyQdisc::Fq(f) => {
                let c = f.config();
                assert_eq!(c.quantum_bytes, 1514);
                assert_eq!(c.maxrate_bytes_per_s, Some(1_000_000));
                assert!(!c.pacing && !c.horizon_drop);
                assert_eq!(c.ce_threshold, Duration::from_ms(2));
                assert_eq!(c.weights, [65536; 3]);
            }
            _ => panic!(),
        }
        let bad = |k: &str, v: Value| {
            let t = Table(vec![
                ("kind".into(), Value::Str("fq".into())),
                (k.into(), v),
            ]);
            crate::qdisc::build(&Value::Table(t), "q", &BuildCtx::default())
                .err()
                .unwrap()
        };
        let mut pm = vec![Value::Int(0); 16];
        pm[3] = Value::Int(3);
        assert!(bad("priomap", Value::Array(pm)).msg.contains("band 3"));
        assert_eq!(
            bad("weights", Value::Array(vec![Value::Int(100); 3])).path,
            "q.weights"
        );
        assert_eq!(bad("quantum", Value::Int(100)).path, "q.quantum");
        assert_eq!(bad("buckets", Value::Int(1000)).path, "q.buckets");
    }

    #[test]
    fn flow_limit_drops_the_101st_packet_of_a_flow() {
        let mut q = fq();
        let mut d = Drops::new();
        for i in 0..100 {
            assert_eq!(
                enq(&mut q, sock(i, 7, 1000), Time(0), &mut d),
                Verdict::Queued
            );
        }
        assert_eq!(
            enq(&mut q, sock(100, 7, 1000), Time(0), &mut d),
            Verdict::Dropped
        );
        let dropped: Vec<_> = d.drain().map(|x| (x.pkt.uid, x.reason)).collect();
        assert_eq!(dropped, vec![(100, DropReason::FlowLimit)]);
        // Another flow is not affected.
        assert_eq!(
            enq(&mut q, sock(101, 8, 1000), Time(0), &mut d),
            Verdict::Queued
        );
        assert_eq!(q.len_packets(), 101);
    }

    #[test]
    fn initial_quantum_then_quantum_round_robin() {
        // A new flow may send initial_quantum = 10 MTU before yielding; afterwards flows
        // alternate by quantum = 2 MTU (two full-size packets each).
        let mut q = fq();
        let mut d = Drops::new();
        for i in 0..30 {
            enq(&mut q, sock(i, 1, MTU), Time(0), &mut d);
        }
        for i in 0..30 {
            enq(&mut q, sock(100 + i, 2, MTU), Time(0), &mut d);
        }
        let order: Vec<u32> = (0..40)
            .map(|_| q.dequeue(Time(0), &mut d).packet().unwrap().sk)
            .collect();
        let mut expect = vec![1; 10];
        expect.extend([2; 10]);
        for _ in 0..5 {
            expect.extend([1, 1, 2, 2]);
        }
        assert_eq!(order, expect);
    }

    fn jain(x: &[f64]) -> f64 {
        let s: f64 = x.iter().sum();
        let s2: f64 = x.iter().map(|v| v * v).sum();
        s * s / (x.len() as f64 * s2)
    }

    #[test]
    fn round_robin_by_credit_is_byte_fair() {
        // Backlogged flows with very different packet sizes get equal bytes (DRR).
        let sizes = [64u32, 300, 800, 1514, 1000];
        let mut q = fq();
        let mut d = Drops::new();
        let mut uid = 0;
        for (i, &s) in sizes.iter().enumerate() {
            for _ in 0..20 {
                uid += 1;
                enq(&mut q, sock(uid, i as u32 + 1, s), Time(0), &mut d);
            }
        }
        let mut bytes = [0f64; 5];
        for _ in 0..30_000 {
            let p = q.dequeue(Time(0), &mut d).packet().unwrap();
            let i = p.sk as usize - 1;
            bytes[i] += p.len_bytes as f64;
            uid += 1;
            enq(&mut q, sock(uid, p.sk, p.len_bytes), Time(0), &mut d);
        }
        let j = jain(&bytes);
        assert!(j >= 0.99, "Jain index {j} for {bytes:?}");
        assert!(d.is_empty());
    }

    /// Drains `q`, following NotBefore; returns (departure time, packet) and NotBefore count.
    fn drain_paced<Q: Qdisc>(q: &mut Q, mut now: Time) -> (Vec<(Time, Packet)>, usize) {
        let mut d = Drops::new();
        let mut out = Vec::new();
        let mut waits = 0;
        let mut bound = Bound::new(1_000_000, "drain_paced");
        loop {
            bound.tick();
            match q.dequeue(now, &mut d) {
                Dequeue::Packet(p) => out.push((now, p)),
                Dequeue::NotBefore(t) => {
                    assert!(t > now);
                    waits += 1;
                    now = t;
                }
                Dequeue::Empty => break,
            }
        }
        (out, waits)
    }

    #[test]
    fn pacing_releases_a_flow_at_its_pacing_rate() {
        let rate_bps = 10_000_000u64;
        let gap_ns = MTU as f64 * 8e9 / rate_bps as f64; // len / R = 1.2112 ms
        for quantum in [3028u32, 1514] {
            let mut cfg = FqConfig::linux_defaults(MTU);
            cfg.flow_limit = 1000;
            cfg.quantum_bytes = quantum;
            let mut q = Fq::new(cfg);
            let mut d = Drops::new();
            for i in 0..200 {
                let mut p = sock(i, 1, MTU);
                p.pacing_rate_bps = rate_bps;
                enq(&mut q, p, Time(0), &mut d);
            }
            let (out, waits) = drain_paced(&mut q, Time(0));
            assert_eq!(out.len(), 200);
            assert!(
                waits >= 90,
                "throttled flow must report NotBefore ({waits})"
            );
            // The initial quantum (10 packets) leaves at once, then the rate holds.
            assert!(out[..10].iter().all(|(t, _)| *t == Time(0)));
            let (a, b) = (10, 10 + 180);
            let mean = (out[b].0 .0 - out[a].0 .0) as f64 / (b - a) as f64;
            assert!(
                (mean / gap_ns - 1.0).abs() < 0.01,
                "quantum {quantum}: mean gap {mean} ns, expected {gap_ns}"
            );
            if quantum == MTU {
                // Charging one packet per quantum paces every packet individually.
                for w in out[10..].windows(2) {
                    let g = (w[1].0 .0 - w[0].0 .0) as f64;
                    assert!((g / gap_ns - 1.0).abs() < 0.01, "gap {g}");
                }
            }
        }
    }

    #[test]
    fn low_rate_flows_are_paced_per_packet_by_their_own_length() {
        // 400 kbit/s <= low_rate_threshold (550 kbit/s): credit is zeroed after every packet,
        // and each 300-B packet is spaced by 300 B / 50 kB/s = 6 ms (not by a 3028-B quantum).
        let mut q = fq();
        let mut d = Drops::new();
        for i in 0..20 {
            let mut p = sock(i, 3, 300);
            p.pacing_rate_bps = 400_000;
            enq(&mut q, p, Time(0), &mut d);
        }
        let (out, _) = drain_paced(&mut q, Time(0));
        assert_eq!(out.len(), 20);
        for (k, (t, _)) in out.iter().enumerate() {
            assert_eq!(*t, Time(k as u64 * 6_000_000), "packet {k}");
        }
    }

    #[test]
    fn nopacing_ignores_pacing_rates() {
        let mut cfg = FqConfig::linux_defaults(MTU);
        cfg.pacing = false;
        let mut q = Fq::new(cfg);
        let mut d = Drops::new();
        for i in 0..50 {
            let mut p = sock(i, 3, 1514);
            p.pacing_rate_bps = 100_000;
            enq(&mut q, p, Time(0), &mut d);
        }
        let (out, waits) = drain_paced(&mut q, Time(0));
        assert_eq!((out.len(), waits), (50, 0));
    }

    #[test]
    fn edt_timestamps_order_the_flow_and_are_honoured() {
        let mut q = fq();
        let mut d = Drops::new();
        for (uid, ms) in [(0u64, 3u64), (1, 1), (2, 2)] {
            let mut p = sock(uid, 1, 500);
            p.departure_at = Time::from_ns(ms * 1_000_000);
            enq(&mut q, p, Time(0), &mut d);
        }
        assert!(matches!(
            q.dequeue(Time(0), &mut d),
            Dequeue::NotBefore(Time(1_000_000))
        ));
        let (out, _) = drain_paced(&mut q, Time(0));
        let got: Vec<(u64, u64)> = out.iter().map(|(t, p)| (t.0, p.uid)).collect();
        assert_eq!(got, vec![(1_000_000, 1), (2_000_000, 2), (3_000_000, 0)]);
    }

    #[test]
    fn packets_beyond_the_horizon_are_dropped_or_capped() {
        let now = Time(5_000_000);
        let mut q = fq();
        let mut d = Drops::new();
        let mut p = sock(1, 1, 500);
        p.departure_at = now + Duration::from_secs(11);
        assert_eq!(enq(&mut q, p, now, &mut d), Verdict::Dropped);
        assert_eq!(d.drain().next().unwrap().reason, DropReason::Horizon);
        // Exactly at the horizon is still accepted.
        let mut p = sock(2, 1, 500);
        p.departure_at = now + Duration::from_secs(10);
        assert_eq!(enq(&mut q, p, now, &mut d), Verdict::Queued);

        let mut cfg = FqConfig::linux_defaults(MTU);
        cfg.horizon_drop = false;
        let mut q = Fq::new(cfg);
        let mut p = sock(3, 1, 500);
        p.departure_at = now + Duration::from_secs(11);
        assert_eq!(enq(&mut q, p, now, &mut d), Verdict::Queued);
        let cap = now + Duration::from_secs(10);
        assert!(matches!(q.dequeue(now, &mut d), Dequeue::NotBefore(t) if t == cap));
        let p = q.dequeue(cap, &mut d).packet().unwrap();
        assert_eq!(p.departure_at, cap);
    }

    #[test]
    fn forwarded_flows_colliding_under_the_orphan_mask_share_a_queue() {
        let mut q = fq();
        let mut d = Drops::new();
        let (h1, h2, h3) = (5u32, 5 + 1024 * 77, 6);
        for i in 0..60 {
            enq(&mut q, fwd(i, 1, h1, 800), Time(0), &mut d);
            enq(&mut q, fwd(1000 + i, 2, h2, 800), Time(0), &mut d);
        }
        assert_eq!(q.flow_count(), 1, "h1 & 1023 == h2 & 1023: one pseudo-flow");
        assert_eq!(q.len_packets(), 100, "the shared flow_limit of 100");
        assert!(d.drain().all(|x| x.reason == DropReason::FlowLimit));
        enq(&mut q, fwd(5000, 3, h3, 800), Time(0), &mut d);
        assert_eq!(q.flow_count(), 2);
        // Sockets are separate flows even with the same hash.
        let mut p = sock(6000, 9, 800);
        p.hash = h1;
        enq(&mut q, p, Time(0), &mut d);
        assert_eq!(q.flow_count(), 3);
    }

    #[test]
    fn bands_share_by_wrr_weights_9_3_1() {
        // priomap: priority 6 -> band 0, 0 -> band 1, 2 -> band 2.
        let mut q = fq();
        let mut d = Drops::new();
        let prio = [6u32, 0, 2];
        let mut uid = 0;
        for (i, &pr) in prio.iter().enumerate() {
            for _ in 0..50 {
                uid += 1;
                let mut p = sock(uid, i as u32 + 1, 1000);
                p.priority = pr;
                enq(&mut q, p, Time(0), &mut d);
            }
        }
        let mut bytes = [0f64; 3];
        for _ in 0..50_000 {
            let p = q.dequeue(Time(0), &mut d).packet().unwrap();
            bytes[p.sk as usize - 1] += p.len_bytes as f64;
            uid += 1;
            let mut n = sock(uid, p.sk, 1000);
            n.priority = p.priority;
            enq(&mut q, n, Time(0), &mut d);
        }
        let r1 = bytes[0] / bytes[2];
        let r2 = bytes[1] / bytes[2];
        assert!((r1 / 9.0 - 1.0).abs() < 0.02, "band0/band2 = {r1}");
        assert!((r2 / 3.0 - 1.0).abs() < 0.02, "band1/band2 = {r2}");
    }

    #[test]
    fn band_limit_is_per_band() {
        let mut cfg = FqConfig::linux_defaults(MTU);
        cfg.limit = 5;
        let mut q = Fq::new(cfg);
        let mut d = Drops::new();
        for i in 0..8 {
            enq(&mut q, sock(i, i as u32 + 1, 100), Time(0), &mut d);
        }
        assert_eq!(q.len_packets(), 5);
        let mut p = sock(100, 50, 100);
        p.priority = 6; // band 0 has its own limit
        assert_eq!(enq(&mut q, p, Time(0), &mut d), Verdict::Queued);
        assert!(d.drain().all(|x| x.reason == DropReason::Overlimit));
    }

    #[test]
    fn idle_flows_are_garbage_collected_after_3s() {
        let mut q = fq();
        let mut d = Drops::new();
        enq(&mut q, sock(1, 1, 100), Time(0), &mut d);
        enq(&mut q, sock(2, 2, 100), Time(0), &mut d);
        drain_paced(&mut q, Time(0));
        // Empty flows are detached when a dequeue finds them on old_flows: flow 3 exhausts
        // its initial quantum and rotates to old_flows behind flows 1 and 2.
        for i in 0..30 {
            enq(&mut q, sock(10 + i, 3, MTU), Time(1), &mut d);
        }
        drain_paced(&mut q, Time(1));
        assert_eq!(q.flow_count(), 3);
        enq(
            &mut q,
            sock(4, 4, 100),
            Time::from_ns(2_000_000_000),
            &mut d,
        );
        assert_eq!(q.flow_count(), 4, "not yet 3 s");
        enq(
            &mut q,
            sock(5, 4, 100),
            Time::from_ns(3_000_000_002),
            &mut d,
        );
        assert_eq!(
            q.flow_count(),
            2,
            "flows 1 and 2, detached > 3 s, are forgotten"
        );
        assert_eq!(q.stats().gc_flows, 2);
    }

    /// Gives the property test's packets sockets, pacing rates and EDT stamps.
    fn stamp(p: &mut Packet, now: Time) {
        match p.conversation() % 4 {
            0 => {}
            1 => {
                p.sk = p.conversation() + 1;
                p.pacing_rate_bps = 2_000_000 + 1_000_000 * (p.conversation() as u64 % 7);
            }
            2 => {
                p.sk = p.conversation() + 1;
                p.pacing_rate_bps = 300_000;
            }
            _ => {
                p.sk = p.conversation() + 1;
                p.departure_at = now + Duration((p.uid * 7919) % 3_000_000);
            }
        }
    }

    #[test]
    fn fq_conservation_property_pacing_on_and_off() {
        for pacing in [true, false] {
            for seed in 0..12 {
                let mut cfg = FqConfig::linux_defaults(MTU);
                cfg.pacing = pacing;
                cfg.limit = 60;
                cfg.flow_limit = 15;
                cfg.ce_threshold = Duration::from_ms(2);
                cfg.orphan_mask = if seed % 2 == 0 { 7 } else { 1023 };
                let mut q = Fq::new(cfg);
                check_conservation_with(
                    &mut q,
                    seed,
                    4_000,
                    |q| {
                        q.band_packets().iter().all(|&n| n <= 60)
                            && q.flows().all(|(_, qlen, _)| qlen <= 15)
                    },
                    stamp,
                );
            }
        }
    }
}
