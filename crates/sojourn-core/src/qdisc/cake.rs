//! CAKE — Common Applications Kept Enhanced (Linux `sch_cake`, ≥ 4.19), with COBALT.
//!
//! One qdisc combining
//! - an optional deficit-mode shaper (`bandwidth`) with overhead compensation
//!   (`overhead`, `mpu`, ATM/PTM framing), accumulating `time_next_packet`;
//! - Diffserv "tins" (besteffort, diffserv3/4/8, precedence), each a flow-queueing system:
//!   shaped, the highest tin still within its threshold rate wins; unshaped, weighted DRR
//!   over tins by `tin_quantum`;
//! - per tin 1024 queues hashed 8-way set-associatively with tags, and DRR++ over them with
//!   new/old/decaying lists, the per-flow quantum divided by the host's bulk-flow load
//!   (dual-/triple-isolation);
//! - COBALT (see [`super::cobalt`]) on every queue; a truesize memory limit enforced by
//!   head-dropping the globally fattest queue (max-heap, built lazily as Linux does);
//! - an optional TCP ACK filter.
//!
//! Structure follows the kernel's behaviour (docs/disciplines/cake.md); comments name
//! the kernel function whose behaviour a block reproduces. Times are signed ns (`ktime_t`).

use super::cobalt::{self, CobaltParams, CobaltVars};
use super::drr_lists::{self, DrrLists};
use super::vocab::{
    tc_rate, tc_size, tc_time, BuildCtx, Dequeue, Discipline, DropReason, Drops, Facts, NotLinux,
    Qdisc, TcKey, Verdict,
};
use crate::packet::{proto, seq32, tcp_flags, Packet, TransportHeader};
use crate::params::{ConfResult, Params, Value};
use crate::rng::Rng;
use crate::time::{Duration, Time};
use crate::units;

/// Queues per tin (`CAKE_QUEUES`); also host slots per tin.
pub const CAKE_QUEUES: usize = 1024;
/// Associativity of the queue and host tables (`CAKE_SET_WAYS`).
pub const CAKE_SET_WAYS: usize = 8;
/// At most this many tins (`CAKE_MAX_TINS`).
pub const CAKE_MAX_TINS: usize = 8;
/// Default `sch->limit`: only caps the memory limit at `limit * psched_mtu`.
pub const CAKE_LIMIT_PACKETS: u64 = 10240;

const NIL: u32 = u32::MAX;

/// `quantum_div[n] = 65535 / n` (entry 0 = 65535): host-load division by multiply-shift.
const QUANTUM_DIV: [u32; CAKE_QUEUES + 1] = {
    let mut t = [0u32; CAKE_QUEUES + 1];
    t[0] = 65535;
    let mut i = 1;
    while i <= CAKE_QUEUES {
        t[i] = 65535 / i as u32;
        i += 1;
    }
    t
};

// ---------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------

/// Tin layout (`diffserv` keyword of tc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffservMode {
    Besteffort,
    Diffserv3,
    Diffserv4,
    Diffserv8,
    Precedence,
}

/// Flow isolation mode (`CAKE_FLOW_*`): bit 0 = source host, bit 1 = destination host,
/// bit 2 = flows; "dual" modes are FLOWS plus one host bit, triple is all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowMode(u8);

impl FlowMode {
    pub const FLOWBLIND: FlowMode = FlowMode(0);
    pub const SRCHOST: FlowMode = FlowMode(1);
    pub const DSTHOST: FlowMode = FlowMode(2);
    pub const HOSTS: FlowMode = FlowMode(3);
    pub const FLOWS: FlowMode = FlowMode(4);
    pub const DUAL_SRCHOST: FlowMode = FlowMode(5);
    pub const DUAL_DSTHOST: FlowMode = FlowMode(6);
    pub const TRIPLE_ISOLATE: FlowMode = FlowMode(7);
    pub const NAMES: [&'static str; 8] = [
        "flowblind",
        "srchost",
        "dsthost",
        "hosts",
        "flows",
        "dual-srchost",
        "dual-dsthost",
        "triple-isolate",
    ];

    #[inline]
    fn hash_flows(self) -> bool {
        self.0 & 4 != 0
    }
    #[inline]
    fn hash_hosts(self) -> bool {
        self.0 & 3 != 0
    }
    /// `cake_dsrc`: per-source-host fairness among flows.
    #[inline]
    fn dual_src(self) -> bool {
        self.0 & 5 == 5
    }
    /// `cake_ddst`: per-destination-host fairness among flows.
    #[inline]
    fn dual_dst(self) -> bool {
        self.0 & 6 == 6
    }
}

/// Link-layer cell framing for overhead compensation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtmMode {
    None,
    /// ATM: 48-byte payload per 53-byte cell.
    Atm,
    /// PTM (VDSL2): 64b/65b, one byte per 64 or part thereof.
    Ptm,
}

/// ACK filter mode (`CAKE_ACK_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckFilter {
    Off,
    Filter,
    Aggressive,
}

/// How the tin to serve is chosen (`tin_mode`; not a tc option, see docs/disciplines/cake.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TinMode {
    /// Linux: weighted DRR over tins by `tin_quantum` when unshaped, threshold-rate
    /// priority when shaped.
    Linux,
    /// Weighted DRR by `tin_quantum` whether shaped or not (the global shaper still applies).
    Drr,
    /// Strict priority in the tins' priority rank (`tin_order` read from the top: for
    /// diffserv3 Voice > Best Effort > Bulk); per-tin threshold rates are ignored.
    Strict,
}

/// Everything `tc qdisc add ... cake` can set, in kernel units: CAKE's typed spec.
#[derive(Clone, Debug, PartialEq)]
pub struct CakeConfig {
    /// Shaper rate in bytes/s (tc passes bytes/s); 0 = unlimited (no shaper).
    pub rate_bytes_per_s: u64,
    /// `rtt` = CoDel interval before per-tin scaling.
    pub rtt: Duration,
    pub target: Duration,
    pub diffserv: DiffservMode,
    pub flow_mode: FlowMode,
    /// `CAKE_FLAG_OVERHEAD`: subtract the MAC header before adding `overhead`.
    pub overhead_compensation: bool,
    pub overhead_bytes: i32,
    pub mpu_bytes: u32,
    pub atm: AtmMode,
    /// User `memlimit` in truesize bytes; 0 = automatic.
    pub memlimit_bytes: u64,
    pub ack_filter: AckFilter,
    pub ingress: bool,
    pub wash: bool,
    pub split_gso: bool,
    pub nat: bool,
    /// Major number of the qdisc handle (`1:` by default) for `skb->priority` overrides.
    pub handle_major: u16,
    /// `psched_mtu`.
    pub mtu_bytes: u32,
    /// Bytes of L2 header included in `len_bytes` (`skb_network_offset`, 14 on Ethernet).
    pub network_offset_bytes: u32,
    /// Tin scheduling (sojourn extension; `Linux` reproduces the kernel).
    pub tin_mode: TinMode,
}

impl Default for CakeConfig {
    fn default() -> Self {
        CakeConfig {
            rate_bytes_per_s: 0,
            rtt: Duration::from_ms(100),
            target: Duration::from_ms(5),
            diffserv: DiffservMode::Diffserv3,
            flow_mode: FlowMode::TRIPLE_ISOLATE,
            overhead_compensation: false,
            overhead_bytes: 0,
            mpu_bytes: 0,
            atm: AtmMode::None,
            memlimit_bytes: 0,
            ack_filter: AckFilter::Off,
            ingress: false,
            wash: false,
            split_gso: true,
            nat: false,
            handle_major: 1,
            mtu_bytes: 1514,
            network_offset_bytes: 14,
            tin_mode: TinMode::Linux,
        }
    }
}

// DSCP -> tin tables (kernel `diffserv3`, `diffserv4`, `diffserv8`, `precedence`).
#[rustfmt::skip]
const DIFFSERV3: [u8; 64] = [
    0, 1, 0, 0, 2, 0, 0, 0,  1, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,  0, 0, 0, 0, 2, 0, 2, 0,
    2, 0, 0, 0, 0, 0, 0, 0,  2, 0, 0, 0, 0, 0, 0, 0,
];
#[rustfmt::skip]
const DIFFSERV4: [u8; 64] = [
    0, 1, 0, 0, 2, 0, 0, 0,  1, 0, 0, 0, 0, 0, 0, 0,
    2, 0, 2, 0, 2, 0, 2, 0,  2, 0, 2, 0, 2, 0, 2, 0,
    3, 0, 2, 0, 2, 0, 2, 0,  3, 0, 0, 0, 3, 0, 3, 0,
    3, 0, 0, 0, 0, 0, 0, 0,  3, 0, 0, 0, 0, 0, 0, 0,
];
#[rustfmt::skip]
const DIFFSERV8: [u8; 64] = [
    2, 0, 1, 2, 4, 2, 2, 2,  1, 2, 1, 2, 1, 2, 1, 2,
    5, 2, 4, 2, 4, 2, 4, 2,  3, 2, 3, 2, 3, 2, 3, 2,
    6, 2, 3, 2, 3, 2, 3, 2,  6, 2, 2, 2, 6, 2, 6, 2,
    7, 2, 2, 2, 2, 2, 2, 2,  7, 2, 2, 2, 2, 2, 2, 2,
];
const PRECEDENCE: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = (i >> 3) as u8;
        i += 1;
    }
    t
};
const BESTEFFORT: [u8; 64] = [0; 64];
/// Tin order for `priority`/stats: identity, or Bulk first for diffserv3/4.
const NORMAL_ORDER: [u8; 8] = [0, 1, 2, 3, 4, 5, 6, 7];
const BULK_ORDER: [u8; 8] = [1, 0, 2, 3, 4, 5, 6, 7];

// ---------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------

/// Flow set membership (`CAKE_SET_*`).
const SET_NONE: u8 = 0;
const SET_SPARSE: u8 = 1;
/// Counted as sparse, but in the bulk rotation (empty after exhausting its deficit).
const SET_SPARSE_WAIT: u8 = 2;
const SET_BULK: u8 = 3;
const SET_DECAYING: u8 = 4;

/// Which flow list a queue sits on: fq_codel's new and old lists, and CAKE's decaying one.
const LIST_NEW: u8 = drr_lists::NEW;
const LIST_OLD: u8 = drr_lists::OLD;
const LIST_DECAYING: u8 = 2;

/// A packet in the pool, linked into its queue.
#[derive(Clone, Copy, Debug)]
struct Slot {
    pkt: Packet,
    next: u32,
    /// Overhead-compensated length, charged to shapers and deficits.
    adjusted_len: u32,
}

/// One of the 1024 queues of a tin (`struct cake_flow`).
#[derive(Clone, Copy, Debug)]
struct Flow {
    head: u32,
    tail: u32,
    set: u8,
    srchost: u16,
    dsthost: u16,
    backlog_bytes: u32,
    dropped: u32,
    cvars: CobaltVars,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            head: NIL,
            tail: NIL,
            set: SET_NONE,
            srchost: 0,
            dsthost: 0,
            backlog_bytes: 0,
            dropped: 0,
            cvars: CobaltVars::new(),
        }
    }
}

/// A host slot (`struct cake_host`).
#[derive(Clone, Copy, Debug, Default)]
struct Host {
    srchost_tag: u32,
    dsthost_tag: u32,
    srchost_bulk_flow_count: u16,
    dsthost_bulk_flow_count: u16,
}

/// Per-tin counters (as `tc -s qdisc show` reports them).
#[derive(Clone, Copy, Debug, Default)]
pub struct TinStats {
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub dropped: u64,
    pub ecn_marked: u64,
    pub ack_drops: u64,
    pub drop_overlimit: u64,
    pub way_directs: u64,
    pub way_hits: u64,
    pub way_misses: u64,
    pub way_collisions: u64,
}

/// One tin (`struct cake_tin_data`).
struct Tin {
    flows: Vec<Flow>,
    tags: Vec<u32>,
    hosts: Vec<Host>,
    /// Position of each queue in the overflow heap.
    overflow_idx: Vec<u16>,
    /// Deficits and the new, old and decaying lists of the queues.
    lists: DrrLists<3>,
    flow_quantum: u32,
    cparams: CobaltParams,
    bulk_flow_count: u32,
    sparse_flow_count: u32,
    decaying_flow_count: u32,
    unresponsive_flow_count: u32,
    /// Tin shaper: `time_next = time + (len * rate_ns) >> rate_shft`.
    time_next_packet: i64,
    tin_rate_bytes_per_s: u64,
    tin_rate_ns: u64,
    tin_rate_shft: u32,
    tin_quantum: u32,
    tin_deficit: i32,
    tin_backlog: u64,
    stats: TinStats,
}

impl Tin {
    fn new() -> Tin {
        Tin {
            flows: vec![Flow::default(); CAKE_QUEUES],
            tags: vec![0; CAKE_QUEUES],
            hosts: vec![Host::default(); CAKE_QUEUES],
            overflow_idx: vec![0; CAKE_QUEUES],
            lists: DrrLists::new(CAKE_QUEUES),
            flow_quantum: 1514,
            cparams: CobaltParams {
                interval_ns: 100_000_000,
                target_ns: 5_000_000,
                mtu_time_ns: 0,
                p_inc: CobaltParams::P_INC,
                p_dec: CobaltParams::P_DEC,
            },
            bulk_flow_count: 0,
            sparse_flow_count: 0,
            decaying_flow_count: 0,
            unresponsive_flow_count: 0,
            time_next_packet: 0,
            tin_rate_bytes_per_s: 0,
            tin_rate_ns: 0,
            tin_rate_shft: 0,
            tin_quantum: 0,
            tin_deficit: 0,
            tin_backlog: 0,
            stats: TinStats::default(),
        }
    }

    #[inline]
    fn active_flows(&self) -> u32 {
        self.sparse_flow_count + self.bulk_flow_count
    }

    /// Host-load divisor for queue `idx`: the larger bulk-flow count of its hosts (≥ 1).
    #[inline]
    fn host_load(&self, idx: usize, mode: FlowMode) -> usize {
        let f = &self.flows[idx];
        let mut load = 1usize;
        if mode.dual_src() {
            load = load.max(self.hosts[f.srchost as usize].srchost_bulk_flow_count as usize);
        }
        if mode.dual_dst() {
            load = load.max(self.hosts[f.dsthost as usize].dsthost_bulk_flow_count as usize);
        }
        load.min(CAKE_QUEUES)
    }

    /// A queue joins the bulk set: its hosts' bulk counts go up (dual modes only).
    #[inline]
    fn inc_host_bulk(&mut self, idx: usize, mode: FlowMode) {
        let f = self.flows[idx];
        if mode.dual_src() {
            let c = &mut self.hosts[f.srchost as usize].srchost_bulk_flow_count;
            *c = (*c + 1).min(CAKE_QUEUES as u16);
        }
        if mode.dual_dst() {
            let c = &mut self.hosts[f.dsthost as usize].dsthost_bulk_flow_count;
            *c = (*c + 1).min(CAKE_QUEUES as u16);
        }
    }

    #[inline]
    fn dec_host_bulk(&mut self, idx: usize, mode: FlowMode) {
        let f = self.flows[idx];
        if mode.dual_src() {
            let c = &mut self.hosts[f.srchost as usize].srchost_bulk_flow_count;
            *c = c.saturating_sub(1);
        }
        if mode.dual_dst() {
            let c = &mut self.hosts[f.dsthost as usize].dsthost_bulk_flow_count;
            *c = c.saturating_sub(1);
        }
    }
}

/// `cake_set_rate`: time-per-byte as fixed point, `ns = (len * rate_ns) >> rate_shft`.
fn rate_fixed_point(rate_bytes_per_s: u64) -> (u64, u32) {
    if rate_bytes_per_s == 0 {
        return (0, 0);
    }
    const MIN_RATE: u64 = 64;
    let mut shft = 34u32;
    let mut rate_ns = (1_000_000_000u64 << shft) / rate_bytes_per_s.max(MIN_RATE);
    while rate_ns >> 34 != 0 {
        rate_ns >>= 1;
        shft -= 1;
    }
    (rate_ns, shft)
}

#[inline]
fn scaled_ns(len: u32, rate_ns: u64, shft: u32) -> u64 {
    ((len as u128 * rate_ns as u128) >> shft) as u64
}

/// The CAKE qdisc.
pub struct Cake {
    cfg: CakeConfig,
    /// Segments of a GSO buffer being split (reused).
    gso_scratch: Vec<Packet>,
    tins: Vec<Tin>,
    tin_index: &'static [u8; 64],
    tin_order: &'static [u8; 8],
    /// Packet pool with a free list (no allocation per packet once warm).
    slots: Vec<Slot>,
    free_slot: u32,
    /// Max-heap of (tin, queue) by byte backlog, for overflow drops (`overflow_heap`).
    heap: Vec<(u8, u16)>,
    /// Dequeues left before the heap is considered stale (`overflow_timeout`).
    overflow_timeout: u32,
    /// Global shaper (`rate_ns`, `rate_shft`, `time_next_packet`, `failsafe_next_packet`).
    rate_ns: u64,
    rate_shft: u32,
    time_next_packet: i64,
    failsafe_next_packet: i64,
    buffer_used: u64,
    buffer_max_used: u64,
    buffer_limit: u64,
    cur_tin: usize,
    qlen: usize,
    backlog_bytes: u64,
    ecn_marks: u64,
    rng: Rng,
    host_salt: u64,
}

impl Cake {
    /// A CAKE instance with `cfg` (already validated) and a random stream.
    pub fn new(cfg: CakeConfig, rng: Rng, host_salt: u64) -> Cake {
        let (tin_cnt, tin_index, tin_order): (usize, &'static [u8; 64], &'static [u8; 8]) =
            match cfg.diffserv {
                DiffservMode::Besteffort => (1, &BESTEFFORT, &NORMAL_ORDER),
                DiffservMode::Diffserv3 => (3, &DIFFSERV3, &BULK_ORDER),
                DiffservMode::Diffserv4 => (4, &DIFFSERV4, &BULK_ORDER),
                DiffservMode::Diffserv8 => (8, &DIFFSERV8, &NORMAL_ORDER),
                DiffservMode::Precedence => (8, &PRECEDENCE, &NORMAL_ORDER),
            };
        let mut q = Cake {
            tins: (0..tin_cnt).map(|_| Tin::new()).collect(),
            tin_index,
            tin_order,
            slots: Vec::with_capacity(1024),
            free_slot: NIL,
            heap: Vec::with_capacity(tin_cnt * CAKE_QUEUES),
            overflow_timeout: 0,
            rate_ns: 0,
            rate_shft: 0,
            time_next_packet: 0,
            failsafe_next_packet: 0,
            buffer_used: 0,
            buffer_max_used: 0,
            buffer_limit: 0,
            cur_tin: 0,
            qlen: 0,
            backlog_bytes: 0,
            ecn_marks: 0,
            rng,
            host_salt,
            cfg,
            gso_scratch: Vec::new(),
        };
        // Heap positions interleave tins like the kernel's `k = queue * MAX_TINS + tin`.
        for j in 0..CAKE_QUEUES {
            for (i, tin) in q.tins.iter_mut().enumerate() {
                tin.overflow_idx[j] = q.heap.len() as u16;
                q.heap.push((i as u8, j as u16));
            }
        }
        q.reconfigure();
        q
    }

    /// `cake_reconfigure` + `cake_config_*`: tin rates, quanta and COBALT parameters, the
    /// global shaper rate and the memory limit.
    fn reconfigure(&mut self) {
        let rate = self.cfg.rate_bytes_per_s;
        // (tin rate, tin quantum) per tin.
        let layout: Vec<(u64, u32)> = match self.cfg.diffserv {
            DiffservMode::Besteffort => vec![(rate, 65535)],
            DiffservMode::Diffserv3 => vec![(rate, 1024), (rate >> 4, 64), (rate >> 2, 256)],
            DiffservMode::Diffserv4 => vec![
                (rate, 1024),
                (rate >> 4, 64),
                (rate >> 1, 512),
                (rate >> 2, 256),
            ],
            DiffservMode::Diffserv8 | DiffservMode::Precedence => {
                // Each tin 7/8 of the previous one's rate and quantum, from (R, 256).
                let (mut r, mut qn) = (rate, 256u32);
                (0..8)
                    .map(|_| {
                        let t = (r, qn.max(1));
                        r = (r * 7) >> 3;
                        qn = (qn * 7) >> 3;
                        t
                    })
                    .collect()
            }
        };
        let mtu = self.cfg.mtu_bytes;
        let target_ns = self.cfg.target.as_ns();
        let rtt_ns = self.cfg.rtt.as_ns();
        for (tin, &(r, qn)) in self.tins.iter_mut().zip(layout.iter()) {
            // cake_set_rate
            let (rate_ns, shft) = rate_fixed_point(r);
            tin.flow_quantum = if r == 0 {
                1514
            } else {
                (r >> 12).clamp(300, 1514) as u32
            };
            tin.tin_rate_bytes_per_s = r;
            tin.tin_rate_ns = rate_ns;
            tin.tin_rate_shft = shft;
            let mtu_time = scaled_ns(mtu, rate_ns, shft);
            let target = (mtu_time * 3 / 2).max(target_ns);
            let interval = (rtt_ns + target - target_ns).max(target * 2);
            tin.cparams = CobaltParams {
                interval_ns: interval,
                target_ns: target,
                mtu_time_ns: mtu_time,
                p_inc: CobaltParams::P_INC,
                p_dec: CobaltParams::P_DEC,
            };
            tin.tin_quantum = qn;
        }
        // The global shaper runs at tin 0's (full) rate.
        self.rate_ns = self.tins[0].tin_rate_ns;
        self.rate_shft = self.tins[0].tin_rate_shft;
        // Memory limit: user value, else 4 x BDP (min 4 MiB) when shaped, else unlimited;
        // capped at max(limit * mtu, memlimit).
        let mut limit = if self.cfg.memlimit_bytes > 0 {
            self.cfg.memlimit_bytes
        } else if rate > 0 {
            let rtt_us = self.cfg.rtt.as_ns() / 1000;
            let t = (rate as u128 * rtt_us as u128 / 250_000) as u64;
            t.max(4 << 20).min(u32::MAX as u64)
        } else {
            u32::MAX as u64
        };
        limit = limit.min((CAKE_LIMIT_PACKETS * mtu as u64).max(self.cfg.memlimit_bytes));
        self.buffer_limit = limit;
    }

    // -- accessors -----------------------------------------------------------------------

    pub fn config(&self) -> &CakeConfig {
        &self.cfg
    }
    pub fn tin_count(&self) -> usize {
        self.tins.len()
    }
    /// DRR++ quantum of tin `i` (bytes).
    pub fn tin_flow_quantum(&self, i: usize) -> u32 {
        self.tins[i].flow_quantum
    }
    /// COBALT parameters of tin `i` after rate scaling.
    pub fn tin_cobalt_params(&self, i: usize) -> CobaltParams {
        self.tins[i].cparams
    }
    /// Threshold rate of tin `i` in bytes/s (0 = unshaped).
    pub fn tin_rate_bytes_per_s(&self, i: usize) -> u64 {
        self.tins[i].tin_rate_bytes_per_s
    }
    pub fn tin_quantum(&self, i: usize) -> u32 {
        self.tins[i].tin_quantum
    }
    pub fn tin_stats(&self, i: usize) -> TinStats {
        self.tins[i].stats
    }
    pub fn memory_limit_bytes(&self) -> u64 {
        self.buffer_limit
    }
    pub fn memory_used_bytes(&self) -> u64 {
        self.buffer_used
    }

    // -- classification ------------------------------------------------------------------

    /// `cake_select_tin`: wash, then besteffort → tin 0; `skb->priority` whose major is our
    /// handle and minor in 1..=tins → `tin_order[minor-1]`; otherwise the DSCP table.
    /// (fwmark overrides are not modelled: packets carry no mark.)
    fn classify_tin(&self, pkt: &mut Packet) -> usize {
        let dscp = (pkt.dscp & 0x3f) as usize;
        if self.cfg.wash {
            pkt.dscp = 0; // DSCP cleared, ECN bits kept
        }
        let tin_cnt = self.tins.len() as u32;
        let major = pkt.priority >> 16;
        let minor = pkt.priority & 0xffff;
        if self.cfg.diffserv == DiffservMode::Besteffort {
            0
        } else if major == self.cfg.handle_major as u32 && minor > 0 && minor <= tin_cnt {
            self.tin_order[minor as usize - 1] as usize
        } else {
            let t = self.tin_index[dscp] as usize;
            if t >= self.tins.len() {
                0
            } else {
                t
            }
        }
    }

    /// `cake_hash`: flow/host hashes by isolation mode, then the 8-way set-associative
    /// lookup of the queue (direct hit, tagged way, free way, or collision into the
    /// original way), allocating host slots for dual/triple modes.
    fn classify_queue(&mut self, tin: usize, pkt: &Packet) -> usize {
        let mode = self.cfg.flow_mode;
        if mode == FlowMode::FLOWBLIND {
            return 0;
        }
        let (src_hash, dst_hash) = if mode.hash_hosts() {
            (
                pkt.key.src_host_hash(self.host_salt),
                pkt.key.dst_host_hash(self.host_salt),
            )
        } else {
            (0, 0)
        };
        let mut flow_hash = if mode.hash_flows() { pkt.hash } else { 0 };
        if !mode.hash_flows() {
            if mode.0 & 1 != 0 {
                flow_hash ^= src_hash;
            }
            if mode.0 & 2 != 0 {
                flow_hash ^= dst_hash;
            }
        }
        let b = &mut self.tins[tin];
        let reduced = flow_hash as usize % CAKE_QUEUES;
        if b.tags[reduced] == flow_hash && b.flows[reduced].set != SET_NONE {
            b.stats.way_directs += 1;
            return reduced;
        }
        let inner = reduced % CAKE_SET_WAYS;
        let outer = reduced - inner;
        let mut allocate = false;
        let mut way = None;
        // A way already tagged for this flow?
        let mut k = inner;
        for i in 0..CAKE_SET_WAYS {
            if b.tags[outer + k] == flow_hash {
                if i > 0 {
                    b.stats.way_hits += 1;
                }
                allocate = b.flows[outer + k].set == SET_NONE;
                way = Some(k);
                break;
            }
            k = (k + 1) % CAKE_SET_WAYS;
        }
        // Else the first inactive way.
        if way.is_none() {
            for _ in 0..CAKE_SET_WAYS {
                if b.flows[outer + k].set == SET_NONE {
                    b.stats.way_misses += 1;
                    allocate = true;
                    way = Some(k);
                    break;
                }
                k = (k + 1) % CAKE_SET_WAYS;
            }
        }
        // Else all 8 ways busy: collide into the original way and retag it.
        let k = match way {
            Some(k) => k,
            None => {
                b.stats.way_collisions += 1;
                if b.flows[outer + inner].set == SET_BULK {
                    b.dec_host_bulk(outer + inner, mode);
                }
                allocate = true;
                inner
            }
        };
        let idx = outer + k;
        b.tags[idx] = flow_hash;
        if allocate {
            if mode.dual_src() {
                let h = find_host(&mut b.hosts, src_hash, true);
                b.flows[idx].srchost = h as u16;
            }
            if mode.dual_dst() {
                let h = find_host(&mut b.hosts, dst_hash, false);
                b.flows[idx].dsthost = h as u16;
            }
            if b.flows[idx].set == SET_BULK {
                b.inc_host_bulk(idx, mode);
            }
        }
        idx
    }

    /// `cake_overhead`/`cake_calc_overhead`: the length charged to shapers and deficits.
    #[inline]
    fn adjusted_len(&self, len: u32) -> u32 {
        let mut l = len as i64;
        if self.cfg.overhead_compensation {
            l -= self.cfg.network_offset_bytes as i64;
        }
        l += self.cfg.overhead_bytes as i64;
        l = l.max(self.cfg.mpu_bytes as i64).max(0);
        match self.cfg.atm {
            AtmMode::None => {}
            AtmMode::Atm => l = (l + 47) / 48 * 53,
            AtmMode::Ptm => l += (l + 63) / 64,
        }
        l as u32
    }

    // -- packet pool ---------------------------------------------------------------------

    #[inline]
    fn alloc_slot(&mut self, pkt: Packet, adjusted_len: u32) -> u32 {
        let slot = Slot {
            pkt,
            next: NIL,
            adjusted_len,
        };
        if self.free_slot != NIL {
            let s = self.free_slot;
            self.free_slot = self.slots[s as usize].next;
            self.slots[s as usize] = slot;
            // The next free slot was freed when this instance last sent, one subscriber's
            // turn ago under a classful parent: fetch it now, not on the next enqueue
            // (as FQ-CoDel's slab; bench/README.md, "ISP trees on a quiet machine").
            if self.free_slot != NIL {
                crate::prefetch::prefetch(&self.slots[self.free_slot as usize]);
            }
            s
        } else {
            self.slots.push(slot);
            (self.slots.len() - 1) as u32
        }
    }

    #[inline]
    fn release_slot(&mut self, s: u32) -> Packet {
        let pkt = self.slots[s as usize].pkt;
        self.slots[s as usize].next = self.free_slot;
        self.free_slot = s;
        pkt
    }

    // -- overflow heap (cake_heapify / cake_heapify_up) ----------------------------------

    #[inline]
    fn heap_backlog(&self, i: usize) -> u32 {
        let (t, b) = self.heap[i];
        self.tins[t as usize].flows[b as usize].backlog_bytes
    }

    #[inline]
    fn heap_swap(&mut self, i: usize, j: usize) {
        self.heap.swap(i, j);
        let (ti, bi) = self.heap[i];
        let (tj, bj) = self.heap[j];
        self.tins[ti as usize].overflow_idx[bi as usize] = i as u16;
        self.tins[tj as usize].overflow_idx[bj as usize] = j as u16;
    }

    fn heap_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            let r = l + 1;
            let mut m = i;
            let mut mb = self.heap_backlog(i);
            if l < n && self.heap_backlog(l) > mb {
                m = l;
                mb = self.heap_backlog(l);
            }
            if r < n && self.heap_backlog(r) > mb {
                m = r;
            }
            if m == i {
                return;
            }
            self.heap_swap(i, m);
            i = m;
        }
    }

    fn heap_up(&mut self, mut i: usize) -> usize {
        while i > 0 {
            let p = (i - 1) / 2;
            if self.heap_backlog(i) > self.heap_backlog(p) {
                self.heap_swap(i, p);
                i = p;
            } else {
                break;
            }
        }
        i
    }

    /// Restores the heap after queue (`tin`, `idx`) changed its backlog.
    #[inline]
    fn heap_fix(&mut self, tin: usize, idx: usize) {
        if self.overflow_timeout == 0 {
            return;
        }
        let pos = self.tins[tin].overflow_idx[idx] as usize;
        if self.heap_up(pos) == pos {
            self.heap_down(pos);
        }
    }

    // -- queue operations ----------------------------------------------------------------

    /// `cake_dequeue_one`: pops the head of queue (`tin`, `idx`) with all accounting.
    fn pop_head(&mut self, tin: usize, idx: usize) -> Option<u32> {
        let f = &mut self.tins[tin].flows[idx];
        if f.head == NIL {
            return None;
        }
        let s = f.head;
        // Three fields, not a copy of the whole slot (its packet is taken once, by the caller).
        let slot = &self.slots[s as usize];
        let (next, len, truesize) = (slot.next, slot.pkt.len_bytes, slot.pkt.truesize_bytes);
        f.head = next;
        if f.head == NIL {
            f.tail = NIL;
        } else {
            // The queue's next packet was written when it arrived, milliseconds ago.
            crate::prefetch::prefetch(&self.slots[f.head as usize]);
        }
        f.backlog_bytes -= len;
        self.tins[tin].tin_backlog -= len as u64;
        self.backlog_bytes -= len as u64;
        self.buffer_used -= truesize as u64;
        self.qlen -= 1;
        self.heap_fix(tin, idx);
        Some(s)
    }

    /// `cake_advance_shaper`: charges `len` to the tin and global shapers. The tin's clock
    /// accumulates when behind `now` and otherwise is pulled to at most `now + dur`; the
    /// global clock always accumulates (catch-up after timer lateness); the failsafe clock
    /// advances by 1.5x for delivered packets only.
    fn advance_shaper(&mut self, tin: usize, len: u32, now: i64, drop: bool) -> u32 {
        if self.rate_ns != 0 {
            let b = &mut self.tins[tin];
            let tin_dur = scaled_ns(len, b.tin_rate_ns, b.tin_rate_shft) as i64;
            let global_dur = scaled_ns(len, self.rate_ns, self.rate_shft) as i64;
            let failsafe_dur = global_dur + (global_dur >> 1);
            if b.time_next_packet < now {
                b.time_next_packet += tin_dur;
            } else if b.time_next_packet < now + tin_dur {
                b.time_next_packet = now + tin_dur;
            }
            self.time_next_packet += global_dur;
            if !drop {
                self.failsafe_next_packet += failsafe_dur;
            }
        }
        len
    }

    /// `cake_drop`: head-drop from the queue with the largest byte backlog across all tins
    /// (lazily built max-heap) and tell its COBALT the queue overflowed. Returns the
    /// victim (tin, queue, slot), or None if nothing could be dropped. The slot, not the
    /// packet's uid, identifies the victim: the segments of a split GSO buffer descend
    /// from one buffer, and the arriving packet is the victim only if its own slot went.
    fn drop_fattest(&mut self, now: i64, drops: &mut Drops) -> Option<(usize, usize, u32)> {
        if self.overflow_timeout == 0 {
            for i in (0..self.heap.len() / 2 + 1).rev() {
                self.heap_down(i);
            }
        }
        self.overflow_timeout = 65535;
        let (tin, idx) = self.heap[0];
        let (tin, idx) = (tin as usize, idx as usize);
        let Some(s) = self.pop_head(tin, idx) else {
            // Heap out of order; rebuild next time.
            self.overflow_timeout = 0;
            return None;
        };
        let b = &mut self.tins[tin];
        if cobalt::queue_full(&mut b.flows[idx].cvars, &b.cparams, now) {
            b.unresponsive_flow_count += 1;
        }
        b.flows[idx].dropped += 1;
        b.stats.dropped += 1;
        let adjusted = self.slots[s as usize].adjusted_len;
        if self.cfg.ingress {
            self.advance_shaper(tin, adjusted, now, true);
        }
        self.heap_down(0);
        let pkt = self.release_slot(s);
        drops.push(pkt, DropReason::FattestFlow);
        Some((tin, idx, s))
    }

    /// `cake_ack_filter`: the packet just appended to queue (`tin`, `idx`) is a TCP ACK; find
    /// an older pure ACK of the same 5-tuple it makes redundant. Conservative mode drops the
    /// eligible ACK nearest the head once two are eligible; aggressive mode also drops a
    /// single eligible ACK directly ahead of the new one with the same ECE/CWR flags.
    /// Returns the unlinked slot.
    fn ack_filter(&mut self, tin: usize, idx: usize) -> Option<u32> {
        let aggressive = self.cfg.ack_filter == AckFilter::Aggressive;
        let (head, tail) = {
            let f = &self.tins[tin].flows[idx];
            (f.head, f.tail)
        };
        if head == tail {
            return None;
        }
        let trig = self.slots[tail as usize].pkt;
        if trig.key.proto != proto::TCP
            || trig.hdr.flags & (tcp_flags::ACK | tcp_flags::SYN) != tcp_flags::ACK
        {
            return None;
        }
        const ECN_FLAGS: u8 = tcp_flags::ECE | tcp_flags::CWR;
        let mut elig: Option<(u32, u32)> = None; // (slot, prev slot)
        let mut elig_flags = 0u8;
        let mut num_found = 0i32;
        let mut prev = NIL;
        let mut cur = head;
        let mut found = false;
        while cur != tail {
            let c = &self.slots[cur as usize].pkt;
            if c.key == trig.key {
                if elig.is_some() && c.hdr.flags & ECN_FLAGS != elig_flags {
                    // ECE/CWR changed: dropping the earlier one would lose information.
                    elig = None;
                    num_found -= 1;
                }
                // Sequence numbers wrap: compared modulo 2^32 like the kernel's after().
                if tcp_may_drop(&c.hdr, &trig.hdr)
                    && c.hdr.payload_bytes == 0
                    && !seq32::after(c.hdr.ack, trig.hdr.ack)
                {
                    let sack = sack_compare(&c.hdr, &trig.hdr);
                    if !(sack < 0 || (seq32::eq(c.hdr.ack, trig.hdr.ack) && sack == 0)) {
                        if elig.is_none() {
                            elig = Some((cur, prev));
                            elig_flags = c.hdr.flags & ECN_FLAGS;
                        }
                        num_found += 1;
                        if num_found > 1 {
                            found = true;
                            break;
                        }
                    }
                }
            }
            prev = cur;
            cur = self.slots[cur as usize].next;
        }
        let (e, ep) = elig?;
        let single_ok = aggressive
            && self.slots[e as usize].next == tail
            && elig_flags == trig.hdr.flags & ECN_FLAGS;
        if !(found || single_ok) {
            return None;
        }
        // Unlink e (never the tail).
        let next = self.slots[e as usize].next;
        if ep == NIL {
            self.tins[tin].flows[idx].head = next;
        } else {
            self.slots[ep as usize].next = next;
        }
        Some(e)
    }

    // -- dequeue helpers -----------------------------------------------------------------

    /// Tin to serve next (`cake_dequeue`'s class choice). Kept in one function so variants
    /// (e.g. strict priority) can extend it.
    /// - Unshaped: weighted DRR over tins by `tin_quantum`; give up after two wraps over
    ///   tins without flows.
    /// - Shaped: the highest-index tin with flows whose `time_next_packet <= now`; if none
    ///   is due, the one with the earliest `time_next_packet` (ties → higher index).
    /// - `tin_mode = "strict"` (not Linux): the first tin with flows in priority rank, i.e.
    ///   `tin_order` from the top (the order `skb->priority` minors 1..=tins map to, minor
    ///   tins = highest): diffserv3 Voice > Best Effort > Bulk, diffserv4 Voice > Video >
    ///   Best Effort > Bulk, diffserv8/precedence by index, highest first.
    fn choose_tin(&mut self, now: i64) -> Option<usize> {
        let tin_cnt = self.tins.len();
        if self.cfg.tin_mode == TinMode::Strict {
            let tin = (0..tin_cnt)
                .rev()
                .map(|r| self.tin_order[r] as usize)
                .find(|&t| self.tins[t].active_flows() > 0)?;
            self.cur_tin = tin;
            return Some(tin);
        }
        if self.rate_ns == 0 || self.cfg.tin_mode == TinMode::Drr {
            let mut wrapped = false;
            let mut empty = true;
            loop {
                let b = &mut self.tins[self.cur_tin];
                let active = b.active_flows() > 0;
                if b.tin_deficit >= 0 && active {
                    return Some(self.cur_tin);
                }
                if b.tin_deficit <= 0 {
                    b.tin_deficit += b.tin_quantum as i32;
                }
                if active {
                    empty = false;
                }
                self.cur_tin += 1;
                if self.cur_tin >= tin_cnt {
                    self.cur_tin = 0;
                    if wrapped {
                        if empty {
                            return None;
                        }
                    } else {
                        wrapped = true;
                    }
                }
            }
        } else {
            let mut best_time = i64::MAX;
            let mut best_tin = 0;
            for (i, b) in self.tins.iter().enumerate() {
                if b.active_flows() > 0 {
                    let time_to_pkt = b.time_next_packet - now;
                    if time_to_pkt <= 0 || time_to_pkt <= best_time {
                        best_time = time_to_pkt;
                        best_tin = i;
                    }
                }
            }
            self.cur_tin = best_tin;
            if self.tins[best_tin].active_flows() == 0 {
                return None;
            }
            Some(best_tin)
        }
    }

    /// A queue was found empty at dequeue: keep it on the decaying list while COBALT still
    /// has state to decay, else take it out of every list.
    fn retire_empty_queue(&mut self, tin: usize, idx: usize, now: i64) {
        let mode = self.cfg.flow_mode;
        let b = &mut self.tins[tin];
        if cobalt::queue_empty(&mut b.flows[idx].cvars, &b.cparams, now) {
            b.unresponsive_flow_count = b.unresponsive_flow_count.saturating_sub(1);
        }
        let set = b.flows[idx].set;
        if b.flows[idx].cvars.is_active(now) {
            b.lists.move_tail(idx, LIST_DECAYING);
            match set {
                SET_BULK => {
                    b.bulk_flow_count -= 1;
                    b.dec_host_bulk(idx, mode);
                    b.decaying_flow_count += 1;
                }
                SET_SPARSE | SET_SPARSE_WAIT => {
                    b.sparse_flow_count -= 1;
                    b.decaying_flow_count += 1;
                }
                _ => {}
            }
            b.flows[idx].set = SET_DECAYING;
        } else {
            b.lists.remove(idx);
            match set {
                SET_SPARSE | SET_SPARSE_WAIT => b.sparse_flow_count -= 1,
                SET_BULK => {
                    b.bulk_flow_count -= 1;
                    b.dec_host_bulk(idx, mode);
                }
                _ => b.decaying_flow_count -= 1,
            }
            b.flows[idx].set = SET_NONE;
        }
    }
}

/// Host-table lookup (same 8-way scheme): a way tagged with `hash`, else the first way with
/// no bulk flows, else the original way; the chosen way is (re)tagged.
fn find_host(hosts: &mut [Host], hash: u32, src: bool) -> usize {
    let r = hash as usize % CAKE_QUEUES;
    let inner = r % CAKE_SET_WAYS;
    let outer = r - inner;
    let tag = |h: &Host| if src { h.srchost_tag } else { h.dsthost_tag };
    let count = |h: &Host| {
        if src {
            h.srchost_bulk_flow_count
        } else {
            h.dsthost_bulk_flow_count
        }
    };
    let mut k = inner;
    for _ in 0..CAKE_SET_WAYS {
        if tag(&hosts[outer + k]) == hash {
            return outer + k;
        }
        k = (k + 1) % CAKE_SET_WAYS;
    }
    let mut free = inner;
    for _ in 0..CAKE_SET_WAYS {
        if count(&hosts[outer + k]) == 0 {
            free = k;
            break;
        }
        k = (k + 1) % CAKE_SET_WAYS;
    }
    let h = &mut hosts[outer + free];
    if src {
        h.srchost_tag = hash;
    } else {
        h.dsthost_tag = hash;
    }
    outer + free
}

/// `cake_tcph_may_drop`: a queued ACK may be dropped only if its flags are exactly ACK
/// (ECE/CWR judged separately) and its timestamps are not newer than the new ACK's.
fn tcp_may_drop(old: &TransportHeader, new: &TransportHeader) -> bool {
    const ECN_FLAGS: u8 = tcp_flags::ECE | tcp_flags::CWR;
    old.flags & !ECN_FLAGS == tcp_flags::ACK && old.ts_val <= new.ts_val && old.ts_ecr <= new.ts_ecr
}

/// `cake_tcph_sack_compare(a, b)`: -1 if `a` SACKs something `b` does not (or carries a
/// D-SACK), 1 if `b` covers all of `a` and SACKs more bytes, 0 if equal. Edges are the
/// wire's 32-bit numbers, compared modulo 2^32 (`before`/`after`), as the kernel does.
fn sack_compare(a: &TransportHeader, b: &TransportHeader) -> i32 {
    let na = (a.sack_count as usize).min(3);
    let nb = (b.sack_count as usize).min(3);
    match (na == 0, nb == 0) {
        (false, true) => return -1,
        (true, false) => return 1,
        (true, true) => return 0,
        _ => {}
    }
    let mut bytes_a = 0u64;
    let mut bytes_b = 0u64;
    let mut first = true;
    for i in 0..na {
        let (xs, xe) = a.sack_wire(i);
        let (xs, xe) = (xs as u64, xe as u64);
        if seq32::before(xs, a.ack) {
            return -1; // D-SACK: always considered greater
        }
        bytes_a += seq32::diff(xs, xe) as u64;
        let mut found = false;
        for j in 0..nb {
            let (ys, ye) = b.sack_wire(j);
            let (ys, ye) = (ys as u64, ye as u64);
            if first {
                bytes_b += seq32::diff(ys, ye) as u64;
            }
            if !seq32::after(ys, xs) && !seq32::before(ye, xe) {
                found = true;
                if !first {
                    break;
                }
            }
        }
        if !found {
            return -1;
        }
        first = false;
    }
    if bytes_b > bytes_a {
        1
    } else {
        0
    }
}

impl Qdisc for Cake {
    /// `cake_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, now_t: Time, drops: &mut Drops) -> Verdict {
        if pkt.gso_segs > 1 && self.cfg.split_gso {
            // cake_enqueue with CAKE_FLAG_SPLIT_GSO (the default): a GSO buffer is
            // segmented and each segment classified, shaped and AQM-managed on its own,
            // so a 64-KiB burst does not hold the shaper for one long slot.
            let mut segs = std::mem::take(&mut self.gso_scratch);
            segs.clear();
            pkt.gso_segment(|s| segs.push(s));
            let mut verdict = Verdict::Dropped;
            for s in segs.drain(..) {
                match self.enqueue(s, now_t, drops) {
                    Verdict::Dropped => {}
                    v => {
                        if verdict != Verdict::QueuedCongested {
                            verdict = v;
                        }
                    }
                }
            }
            self.gso_scratch = segs;
            return verdict;
        }
        let now = now_t.as_ns() as i64;
        let mode = self.cfg.flow_mode;
        let tin = self.classify_tin(&mut pkt);
        let idx = self.classify_queue(tin, &pkt);

        // Keep shaper state from going stale across idle periods.
        {
            let qlen = self.qlen;
            let b = &mut self.tins[tin];
            if b.tin_backlog == 0 {
                if b.time_next_packet < now {
                    b.time_next_packet = now;
                }
                if qlen == 0 && self.time_next_packet < now {
                    self.time_next_packet = now;
                    self.failsafe_next_packet = now;
                }
            }
        }

        // Append (a GSO buffer reaches here whole only with split_gso off).
        let truesize = pkt.truesize_bytes as u64;
        // Net backlog change: this packet, minus an ACK the filter removes (may be < 0).
        let mut delta = pkt.len_bytes as i64;
        let adjusted = self.adjusted_len(pkt.len_bytes);
        let s = self.alloc_slot(pkt, adjusted);
        {
            let f = &mut self.tins[tin].flows[idx];
            if f.head == NIL {
                f.head = s;
            } else {
                self.slots[f.tail as usize].next = s;
            }
            f.tail = s;
        }
        let ack = if self.cfg.ack_filter != AckFilter::Off {
            self.ack_filter(tin, idx)
        } else {
            None
        };
        if let Some(a) = ack {
            let ack_adjusted = self.slots[a as usize].adjusted_len;
            let ack_pkt = self.release_slot(a);
            self.tins[tin].stats.ack_drops += 1;
            self.tins[tin].stats.dropped += 1;
            delta -= ack_pkt.len_bytes as i64;
            self.buffer_used = self.buffer_used + truesize - ack_pkt.truesize_bytes as u64;
            if self.cfg.ingress {
                self.advance_shaper(tin, ack_adjusted, now, true);
            }
            drops.push(ack_pkt, DropReason::Early);
        } else {
            self.qlen += 1;
            self.buffer_used += truesize;
        }
        let b = &mut self.tins[tin];
        let f = &mut b.flows[idx];
        f.backlog_bytes = (f.backlog_bytes as i64 + delta) as u32;
        b.tin_backlog = (b.tin_backlog as i64 + delta) as u64;
        self.backlog_bytes = (self.backlog_bytes as i64 + delta) as u64;
        self.heap_fix(tin, idx);

        // Flow-list state machine.
        let b = &mut self.tins[tin];
        let set = b.flows[idx].set;
        if set == SET_NONE || set == SET_DECAYING {
            if set == SET_DECAYING {
                b.decaying_flow_count -= 1;
            }
            b.lists.move_tail(idx, LIST_NEW);
            b.flows[idx].set = SET_SPARSE;
            b.sparse_flow_count += 1;
            let load = b.host_load(idx, mode);
            *b.lists.deficit_mut(idx) = ((b.flow_quantum * QUANTUM_DIV[load]) >> 16) as i32;
        } else if set == SET_SPARSE_WAIT {
            // Was empty and counted sparse, but already in the bulk rotation.
            b.flows[idx].set = SET_BULK;
            b.sparse_flow_count -= 1;
            b.bulk_flow_count += 1;
            b.inc_host_bulk(idx, mode);
        }

        self.buffer_max_used = self.buffer_max_used.max(self.buffer_used);

        // Memory limit: head-drop the globally fattest queue until under the limit.
        let mut verdict = Verdict::Queued;
        if self.buffer_used > self.buffer_limit {
            let mut dropped = 0u64;
            while self.buffer_used > self.buffer_limit {
                let Some((t, i, victim)) = self.drop_fattest(now, drops) else {
                    break;
                };
                dropped += 1;
                if victim == s {
                    verdict = Verdict::Dropped;
                } else if t == tin && i == idx && verdict == Verdict::Queued {
                    verdict = Verdict::QueuedCongested;
                }
            }
            self.tins[tin].stats.drop_overlimit += dropped;
        }
        verdict
    }

    /// `cake_dequeue`.
    fn dequeue(&mut self, now_t: Time, drops: &mut Drops) -> Dequeue {
        let now = now_t.as_ns() as i64;
        let mode = self.cfg.flow_mode;
        let ingress = self.cfg.ingress;
        let mut first_flow = true;
        'begin: loop {
            if self.qlen == 0 {
                return Dequeue::Empty;
            }
            // Global hard shaper (with failsafe).
            if self.rate_ns != 0 && self.time_next_packet > now && self.failsafe_next_packet > now {
                let next = self.time_next_packet.min(self.failsafe_next_packet);
                return Dequeue::NotBefore(Time(next as u64));
            }
            let Some(tin) = self.choose_tin(now) else {
                return Dequeue::Empty;
            };
            'retry: loop {
                // Flow choice: decaying head on the first pass, else new, old, decaying.
                let b = &mut self.tins[tin];
                let l = &b.lists;
                let head = if first_flow && !l.is_empty(LIST_DECAYING) {
                    l.head(LIST_DECAYING)
                } else {
                    l.head(LIST_NEW)
                        .or_else(|| l.head(LIST_OLD))
                        .or_else(|| l.head(LIST_DECAYING))
                };
                let Some(idx) = head else {
                    continue 'begin;
                };
                first_flow = false;

                // DRR++ with host-load-scaled quantum.
                if b.lists.deficit(idx) <= 0 {
                    if b.flows[idx].set == SET_SPARSE {
                        if b.flows[idx].head != NIL {
                            b.sparse_flow_count -= 1;
                            b.bulk_flow_count += 1;
                            b.inc_host_bulk(idx, mode);
                            b.flows[idx].set = SET_BULK;
                        } else {
                            b.flows[idx].set = SET_SPARSE_WAIT;
                        }
                    }
                    let load = b.host_load(idx, mode);
                    let dither = self.rng.next_u32() >> 16;
                    *b.lists.deficit_mut(idx) +=
                        ((b.flow_quantum * QUANTUM_DIV[load] + dither) >> 16) as i32;
                    b.lists.move_tail(idx, LIST_OLD);
                    continue 'retry;
                }

                // Take packets through COBALT.
                loop {
                    let Some(s) = self.pop_head(tin, idx) else {
                        self.retire_empty_queue(tin, idx, now);
                        continue 'begin;
                    };
                    let Cake {
                        tins, slots, rng, ..
                    } = self;
                    let b = &mut tins[tin];
                    let bulk = if ingress { b.bulk_flow_count } else { 0 };
                    let params = b.cparams;
                    let flow = &mut b.flows[idx];
                    let drop = cobalt::should_drop(
                        &mut flow.cvars,
                        &params,
                        now,
                        &mut slots[s as usize].pkt,
                        bulk,
                        rng,
                    );
                    // The last packet of a queue is never dropped (it may be marked).
                    if !drop || flow.head == NIL {
                        let marked = flow.cvars.ecn_marked;
                        return Dequeue::Packet(self.deliver(tin, idx, s, marked, now));
                    }
                    flow.dropped += 1;
                    b.stats.dropped += 1;
                    if ingress {
                        let adjusted = slots[s as usize].adjusted_len;
                        let len = self.advance_shaper(tin, adjusted, now, true) as i32;
                        let b = &mut self.tins[tin];
                        *b.lists.deficit_mut(idx) -= len;
                        b.tin_deficit = b.tin_deficit.wrapping_sub(len); // s32 arithmetic as in the kernel
                    }
                    let pkt = self.release_slot(s);
                    drops.push(pkt, DropReason::Aqm);
                    if ingress {
                        continue 'retry;
                    }
                }
            }
        }
    }

    fn len_packets(&self) -> usize {
        self.qlen
    }
    fn len_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    fn ecn_marks(&self) -> u64 {
        self.ecn_marks
    }
    fn observe(&mut self, _now: Time, emit: &mut dyn FnMut(&str, f64)) {
        const NAMES: [&str; CAKE_MAX_TINS] = [
            "tin0_backlog_bytes",
            "tin1_backlog_bytes",
            "tin2_backlog_bytes",
            "tin3_backlog_bytes",
            "tin4_backlog_bytes",
            "tin5_backlog_bytes",
            "tin6_backlog_bytes",
            "tin7_backlog_bytes",
        ];
        emit("memory_used_bytes", self.buffer_used as f64);
        for (i, b) in self.tins.iter().enumerate() {
            emit(NAMES[i], b.tin_backlog as f64);
        }
    }
}

impl Cake {
    /// Hands out slot `s` of queue (`tin`, `idx`): charges shapers and deficits.
    fn deliver(&mut self, tin: usize, idx: usize, s: u32, marked: bool, now: i64) -> Packet {
        let adjusted = self.slots[s as usize].adjusted_len;
        let len = self.advance_shaper(tin, adjusted, now, false) as i32;
        let b = &mut self.tins[tin];
        if marked {
            b.stats.ecn_marked += 1;
            self.ecn_marks += 1;
        }
        *b.lists.deficit_mut(idx) -= len;
        b.tin_deficit = b.tin_deficit.wrapping_sub(len); // s32 arithmetic as in the kernel
        b.stats.sent_packets += 1;
        let pkt = self.release_slot(s);
        self.tins[tin].stats.sent_bytes += pkt.len_bytes as u64;
        self.overflow_timeout = self.overflow_timeout.saturating_sub(1);
        pkt
    }
}

// ---------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------

/// tc's RTT keywords: (name, interval, target).
const RTT_PRESETS: [(&str, u64, u64); 8] = [
    ("datacentre", 100_000, 5_000),
    ("lan", 1_000_000, 50_000),
    ("metro", 10_000_000, 500_000),
    ("regional", 30_000_000, 1_500_000),
    ("internet", 100_000_000, 5_000_000),
    ("oceanic", 300_000_000, 15_000_000),
    ("satellite", 1_000_000_000, 50_000_000),
    ("interplanetary", 1_000_000_000_000, 50_000_000_000),
];

/// tc's overhead keywords: (name, overhead, mpu, atm).
const OVERHEAD_PRESETS: [(&str, i32, u32, AtmMode); 14] = [
    ("raw", 0, 0, AtmMode::None),
    ("conservative", 48, 0, AtmMode::Atm),
    ("ipoa-vcmux", 8, 0, AtmMode::Atm),
    ("ipoa-llcsnap", 16, 0, AtmMode::Atm),
    ("bridged-vcmux", 24, 0, AtmMode::Atm),
    ("bridged-llcsnap", 32, 0, AtmMode::Atm),
    ("pppoa-vcmux", 10, 0, AtmMode::Atm),
    ("pppoa-llc", 14, 0, AtmMode::Atm),
    ("pppoe-vcmux", 32, 0, AtmMode::Atm),
    ("pppoe-llcsnap", 40, 0, AtmMode::Atm),
    ("pppoe-ptm", 30, 0, AtmMode::Ptm),
    ("bridged-ptm", 22, 0, AtmMode::Ptm),
    ("ethernet", 38, 84, AtmMode::None),
    ("docsis", 18, 64, AtmMode::None),
];

/// Builds CAKE from tc-named parameters (see docs/disciplines/cake.md).
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Cake> {
    Ok(Cake::new(
        CakeConfig::parse(p, ctx)?,
        ctx.rng(),
        ctx.hash_salt(),
    ))
}

/// `tc qdisc … cake` arguments in `tc qdisc show` order: `bandwidth RATE | unlimited`,
/// diffserv mode, flow mode, `nat|nonat`, `wash|nowash`, [`ingress`], ACK filter,
/// `split-gso|no-split-gso`, `rtt T`, [`raw`], `atm|ptm|noatm`, `overhead N`, [`mpu N`],
/// [`memlimit SIZE`]. tc has no `target` keyword (it sends rtt/20) and no tin scheduling
/// choice, so those are sojourn-only when they differ.
pub fn tc_args(c: &CakeConfig) -> Result<Vec<String>, NotLinux> {
    if c.tin_mode != TinMode::Linux {
        return Err(NotLinux::new(
            "cake",
            "tin_mode other than \"linux\" is a sojourn extension with no tc option; \
             run it with `sojourn emulate`",
        ));
    }
    if c.target.as_ns() != (c.rtt.as_ns() / 20).max(1000) {
        return Err(NotLinux::new(
            "cake",
            "a target other than rtt/20 has no tc keyword (tc derives target from rtt)",
        ));
    }
    let mut a: Vec<String> = Vec::new();
    if c.rate_bytes_per_s == 0 {
        // Input syntax: the keyword alone (`tc qdisc show` prints `bandwidth unlimited`).
        a.push("unlimited".into());
    } else {
        a.extend(["bandwidth".into(), tc_rate(c.rate_bytes_per_s * 8)]);
    }
    a.push(
        match c.diffserv {
            DiffservMode::Besteffort => "besteffort",
            DiffservMode::Diffserv3 => "diffserv3",
            DiffservMode::Diffserv4 => "diffserv4",
            DiffservMode::Diffserv8 => "diffserv8",
            DiffservMode::Precedence => "precedence",
        }
        .into(),
    );
    a.push(FlowMode::NAMES[c.flow_mode.0 as usize].into());
    a.push(if c.nat { "nat" } else { "nonat" }.into());
    a.push(if c.wash { "wash" } else { "nowash" }.into());
    if c.ingress {
        a.push("ingress".into());
    }
    a.push(
        match c.ack_filter {
            AckFilter::Off => "no-ack-filter",
            AckFilter::Filter => "ack-filter",
            AckFilter::Aggressive => "ack-filter-aggressive",
        }
        .into(),
    );
    a.push(
        if c.split_gso {
            "split-gso"
        } else {
            "no-split-gso"
        }
        .into(),
    );
    a.extend(["rtt".into(), tc_time("cake", "rtt", c.rtt)?]);
    if !c.overhead_compensation {
        a.push("raw".into());
    }
    match c.atm {
        AtmMode::Atm => a.push("atm".into()),
        AtmMode::Ptm => a.push("ptm".into()),
        // tc prints `noatm` only when not raw (raw implies it).
        AtmMode::None if c.overhead_compensation => a.push("noatm".into()),
        AtmMode::None => {}
    }
    a.extend(["overhead".into(), c.overhead_bytes.to_string()]);
    if c.mpu_bytes > 0 {
        a.extend(["mpu".into(), c.mpu_bytes.to_string()]);
    }
    if c.memlimit_bytes > 0 {
        a.extend(["memlimit".into(), tc_size(c.memlimit_bytes)]);
    }
    Ok(a)
}

/// tc keywords of `cake` (tc-cake(8)); overhead presets map to `overhead_preset`.
pub const TC_KEYS: &[TcKey] = &[
    TcKey::Rate("bandwidth", "bandwidth"),
    TcKey::Choice("unlimited", "bandwidth", "unlimited"),
    TcKey::Time("rtt", "rtt"),
    TcKey::Choice("datacentre", "rtt", "datacentre"),
    TcKey::Choice("lan", "rtt", "lan"),
    TcKey::Choice("metro", "rtt", "metro"),
    TcKey::Choice("regional", "rtt", "regional"),
    TcKey::Choice("internet", "rtt", "internet"),
    TcKey::Choice("oceanic", "rtt", "oceanic"),
    TcKey::Choice("satellite", "rtt", "satellite"),
    TcKey::Choice("interplanetary", "rtt", "interplanetary"),
    TcKey::Choice("besteffort", "diffserv", "besteffort"),
    TcKey::Choice("diffserv3", "diffserv", "diffserv3"),
    TcKey::Choice("diffserv4", "diffserv", "diffserv4"),
    TcKey::Choice("diffserv8", "diffserv", "diffserv8"),
    TcKey::Choice("precedence", "diffserv", "precedence"),
    TcKey::Choice("flowblind", "flow_mode", "flowblind"),
    TcKey::Choice("srchost", "flow_mode", "srchost"),
    TcKey::Choice("dsthost", "flow_mode", "dsthost"),
    TcKey::Choice("hosts", "flow_mode", "hosts"),
    TcKey::Choice("flows", "flow_mode", "flows"),
    TcKey::Choice("dual-srchost", "flow_mode", "dual-srchost"),
    TcKey::Choice("dual-dsthost", "flow_mode", "dual-dsthost"),
    TcKey::Choice("triple-isolate", "flow_mode", "triple-isolate"),
    TcKey::Flag("nat", "nat", true),
    TcKey::Flag("nonat", "nat", false),
    TcKey::Flag("wash", "wash", true),
    TcKey::Flag("nowash", "wash", false),
    TcKey::Flag("ingress", "ingress", true),
    TcKey::Flag("egress", "ingress", false),
    TcKey::Choice("no-ack-filter", "ack_filter", "no-ack-filter"),
    TcKey::Choice("ack-filter", "ack_filter", "ack-filter"),
    TcKey::Choice(
        "ack-filter-aggressive",
        "ack_filter",
        "ack-filter-aggressive",
    ),
    TcKey::Flag("split-gso", "split_gso", true),
    TcKey::Flag("no-split-gso", "split_gso", false),
    TcKey::Choice("atm", "atm", "atm"),
    TcKey::Choice("ptm", "atm", "ptm"),
    TcKey::Choice("noatm", "atm", "noatm"),
    TcKey::Int("overhead", "overhead"),
    TcKey::Int("mpu", "mpu"),
    TcKey::Size("memlimit", "memlimit"),
    TcKey::Choice("raw", "overhead_preset", "raw"),
    TcKey::Choice("conservative", "overhead_preset", "conservative"),
    TcKey::Choice("ipoa-vcmux", "overhead_preset", "ipoa-vcmux"),
    TcKey::Choice("ipoa-llcsnap", "overhead_preset", "ipoa-llcsnap"),
    TcKey::Choice("bridged-vcmux", "overhead_preset", "bridged-vcmux"),
    TcKey::Choice("bridged-llcsnap", "overhead_preset", "bridged-llcsnap"),
    TcKey::Choice("pppoa-vcmux", "overhead_preset", "pppoa-vcmux"),
    TcKey::Choice("pppoa-llc", "overhead_preset", "pppoa-llc"),
    TcKey::Choice("pppoe-vcmux", "overhead_preset", "pppoe-vcmux"),
    TcKey::Choice("pppoe-llcsnap", "overhead_preset", "pppoe-llcsnap"),
    TcKey::Choice("pppoe-ptm", "overhead_preset", "pppoe-ptm"),
    TcKey::Choice("bridged-ptm", "overhead_preset", "bridged-ptm"),
    TcKey::Choice("ethernet", "overhead_preset", "ethernet"),
    TcKey::Choice("docsis", "overhead_preset", "docsis"),
];

impl Discipline for CakeConfig {
    const KIND: &'static str = "cake";
    const SUMMARY: &'static str =
        "CAKE: shaper + diffserv tins + 8-way set-associative FQ with host isolation + COBALT";
    type Qdisc = Box<Cake>;

    /// Parses CAKE's tc-named parameters (see docs/disciplines/cake.md).
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let mut cfg = CakeConfig {
            mtu_bytes: ctx.mtu_bytes,
            ..CakeConfig::default()
        };

        // bandwidth RATE | "unlimited"
        cfg.rate_bytes_per_s = match p.raw("bandwidth") {
            None => 0,
            Some(Value::Str(s)) if s == "unlimited" => 0,
            Some(Value::Str(s)) => {
                let bps = units::parse_rate(s).map_err(|m| p.err("bandwidth", m))?;
                if bps < 8 {
                    return Err(p.err(
                        "bandwidth",
                        "a rate below 8 bit/s is 0 bytes/s; use \"unlimited\" for no shaper",
                    ));
                }
                bps / 8
            }
            Some(Value::Int(0)) => 0,
            Some(v) => {
                return Err(p.err(
                    "bandwidth",
                    format!(
                        "expected a rate like \"20Mbit\" or \"unlimited\", got {}",
                        v.type_name()
                    ),
                ))
            }
        };
        // rtt TIME | keyword; target = rtt/20 (min 1 us) unless `target` is given.
        match p.raw("rtt") {
            None => {}
            Some(Value::Str(s)) => {
                if let Some(&(_, i, t)) = RTT_PRESETS.iter().find(|(n, _, _)| *n == s.as_str()) {
                    cfg.rtt = Duration(i);
                    cfg.target = Duration(t);
                } else {
                    let d = units::parse_duration(s).map_err(|m| {
                        let names: Vec<&str> = RTT_PRESETS.iter().map(|x| x.0).collect();
                        p.err("rtt", format!("{m}; or one of {}", names.join(", ")))
                    })?;
                    if d.as_ns() < 1000 {
                        return Err(p.err("rtt", "rtt must be at least 1us"));
                    }
                    cfg.rtt = d;
                    cfg.target = Duration((d.as_ns() / 20).max(1000));
                }
            }
            Some(v) => {
                return Err(p.err(
                    "rtt",
                    format!(
                    "expected a duration like \"100ms\" or a keyword such as \"internet\", got {}",
                    v.type_name()
                ),
                ))
            }
        }
        if let Some(t) = p.duration_opt("target")? {
            if t.as_ns() < 1000 {
                return Err(p.err("target", "target must be at least 1us"));
            }
            cfg.target = t;
        }

        cfg.diffserv = match p.choice(
            "diffserv",
            &[
                "besteffort",
                "diffserv3",
                "diffserv4",
                "diffserv8",
                "precedence",
            ],
            "diffserv3",
        )? {
            "besteffort" => DiffservMode::Besteffort,
            "diffserv4" => DiffservMode::Diffserv4,
            "diffserv8" => DiffservMode::Diffserv8,
            "precedence" => DiffservMode::Precedence,
            _ => DiffservMode::Diffserv3,
        };
        let fm = p.choice("flow_mode", &FlowMode::NAMES, "triple-isolate")?;
        cfg.flow_mode = FlowMode(FlowMode::NAMES.iter().position(|n| *n == fm).unwrap() as u8);

        // Overhead: a preset keyword, then explicit overhead/mpu/atm override its parts.
        let preset_names: Vec<&'static str> = OVERHEAD_PRESETS.iter().map(|x| x.0).collect();
        let preset_given = p.has("overhead_preset");
        let preset = p.choice("overhead_preset", &preset_names, "raw")?;
        let &(_, pre_overhead, pre_mpu, pre_atm) =
            OVERHEAD_PRESETS.iter().find(|x| x.0 == preset).unwrap();
        let overhead_given = p.has("overhead");
        let vlan_tags = p.u32("ether_vlan", 0, 0, 8)?;
        cfg.overhead_bytes =
            p.int("overhead", pre_overhead as i64, -64, 256)? as i32 + 4 * vlan_tags as i32;
        cfg.mpu_bytes = p.u32("mpu", pre_mpu, 0, 256)?;
        let atm_default = match pre_atm {
            AtmMode::None => "none",
            AtmMode::Atm => "atm",
            AtmMode::Ptm => "ptm",
        };
        cfg.atm = match p.choice("atm", &["none", "noatm", "atm", "ptm"], atm_default)? {
            "atm" => AtmMode::Atm,
            "ptm" => AtmMode::Ptm,
            _ => AtmMode::None,
        };
        // `raw` (explicit) clears compensation like TCA_CAKE_RAW; any other preset, an explicit
        // overhead or a VLAN tag sets it (TCA_CAKE_OVERHEAD).
        cfg.overhead_compensation = if preset_given && preset == "raw" {
            false
        } else {
            (preset_given && preset != "raw") || overhead_given || vlan_tags > 0
        };

        cfg.memlimit_bytes = p.bytes("memlimit", 0)?;
        if cfg.memlimit_bytes > u32::MAX as u64 {
            return Err(p.err(
                "memlimit",
                "memlimit is a 32-bit byte count (at most 4 GiB - 1)",
            ));
        }
        cfg.ack_filter = match p.choice(
            "ack_filter",
            &[
                "none",
                "no-ack-filter",
                "ack-filter",
                "ack-filter-aggressive",
            ],
            "none",
        )? {
            "ack-filter" => AckFilter::Filter,
            "ack-filter-aggressive" => AckFilter::Aggressive,
            _ => AckFilter::Off,
        };
        cfg.ingress = p.bool("ingress", false)?;
        cfg.wash = p.bool("wash", false)?;
        cfg.split_gso = p.bool("split_gso", true)?;
        cfg.nat = p.bool("nat", false)?;
        cfg.handle_major = p.u32("handle", 1, 1, 0xffff)? as u16;
        cfg.tin_mode = match p.choice("tin_mode", &["linux", "drr", "strict"], "linux")? {
            "drr" => TinMode::Drr,
            "strict" => TinMode::Strict,
            _ => TinMode::Linux,
        };
        Ok(cfg)
    }

    fn build(&self, ctx: &BuildCtx) -> Box<Cake> {
        Box::new(Cake::new(self.clone(), ctx.rng(), ctx.hash_salt()))
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS);
    /// The handle is semantic (priority overrides name it): a tc tree keeps it.
    const TC_HANDLE_KEY: Option<&'static str> = Some("handle");

    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        tc_args(self)
    }

    /// CAKE's `handle` is semantic (priority overrides `major:tin` match it); `split_gso`
    /// cuts GSO buffers into segments at enqueue.
    fn facts(&self) -> Facts {
        Facts {
            splits_gso: self.split_gso,
            ..Facts::with_tc_handle(self.handle_major)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CAKE takes its MTU from the device (`psched_mtu`): 9014 B on a jumbo-frame link.
    #[test]
    fn mtu_comes_from_the_device() {
        let ctx = BuildCtx {
            mtu_bytes: 9014,
            ..BuildCtx::default()
        };
        let q = crate::qdisc::build(&crate::params::Value::Str("cake".into()), "q", &ctx).unwrap();
        let crate::qdisc::AnyQdisc::Cake(c) = q else {
            panic!("not cake")
        };
        assert_eq!(c.config().mtu_bytes, 9014);
    }

    /// `cake_tcph_sack_compare` (sch_cake.c): 1 when the newer ACK's SACK blocks cover
    /// all of the older one's and more bytes, 0 when they cover the same, −1 when the
    /// older one SACKs something the newer does not.
    #[test]
    fn sack_compare_orders_sack_coverage() {
        let h = |blocks: &[[u32; 2]]| {
            let mut t = TransportHeader {
                ack: 1000,
                sack_count: blocks.len() as u8,
                ..Default::default()
            };
            for (i, b) in blocks.iter().enumerate() {
                t.sack_wire[i] = *b;
            }
            t
        };
        let small = h(&[[2000, 3000]]);
        let large = h(&[[2000, 4000]]);
        assert_eq!(sack_compare(&small, &large), 1);
        assert_eq!(sack_compare(&small, &small), 0);
        assert_eq!(sack_compare(&large, &small), -1);
    }
    use crate::packet::{Addr, Ecn, FlowKey, SackBlock};
    use crate::params::Table;
    use crate::qdisc::testkit::{check_conservation_with, Bound};
    use crate::qdisc::{build, AnyQdisc};
    use crate::time::tx_time;

    fn pkt(uid: u64, src: u32, dst: u32, sport: u16, len: u32) -> Packet {
        let key = FlowKey {
            src_addr: Addr::v4(src),
            dst_addr: Addr::v4(dst),
            src_port: sport,
            dst_port: 80,
            proto: proto::UDP,
        };
        let mut p = Packet::synthetic(uid, sport as u32, len);
        p.key = key;
        p.hash = key.hash(5);
        p
    }

    fn built(pairs: &[(&str, Value)]) -> Cake {
        let mut t = Table::default();
        t.insert("kind", Value::Str("cake".into()));
        for (k, v) in pairs {
            t.insert(k, v.clone());
        }
        match build(&Value::Table(t), "q", &BuildCtx::default()).unwrap() {
            AnyQdisc::Cake(c) => *c,
            _ => unreachable!(),
        }
    }

    fn s(x: &str) -> Value {
        Value::Str(x.into())
    }

    #[test]
    fn derived_tin_parameters_match_reference_examples() {
        // reference §5.2: 1 Mbit -> quantum 300, target 18.2 ms, interval 113 ms;
        // 10 Mbit -> 305 B, 5 ms, 100 ms; unshaped -> 1514 B, 5 ms, 100 ms.
        let q = built(&[("bandwidth", s("1Mbit"))]);
        let c = q.tin_cobalt_params(0);
        assert_eq!(q.tin_flow_quantum(0), 300);
        let mtu_time = 1514.0 * 8.0 / 1e6 * 1e9; // ns
        assert!((c.mtu_time_ns as f64 - mtu_time).abs() / mtu_time < 1e-4);
        assert!(
            (c.target_ns as f64 - 1.5 * mtu_time).abs() < 1e4,
            "{}",
            c.target_ns
        );
        let interval = 100e6 + 1.5 * mtu_time - 5e6;
        assert!(
            (c.interval_ns as f64 - interval).abs() < 1e4,
            "{}",
            c.interval_ns
        );
        // Bulk tin (R/16) scales further: target = 1.5 * 16 * mtu_time.
        assert!((q.tin_cobalt_params(1).target_ns as f64 - 24.0 * mtu_time).abs() < 1e5);

        let q = built(&[("bandwidth", s("10Mbit"))]);
        assert_eq!(q.tin_flow_quantum(0), 305);
        assert_eq!(q.tin_cobalt_params(0).target_ns, 5_000_000);
        assert_eq!(q.tin_cobalt_params(0).interval_ns, 100_000_000);
        assert_eq!(q.memory_limit_bytes(), 4 << 20, "max(4*BDP, 4 MiB)");
        let q = built(&[("bandwidth", s("100Mbit"))]);
        assert_eq!(q.tin_flow_quantum(0), 1514);
        assert_eq!(q.memory_limit_bytes(), 5_000_000, "4 * 12.5 MB/s * 100 ms");
        let q = built(&[]);
        assert_eq!(q.tin_flow_quantum(0), 1514);
        assert_eq!(
            q.memory_limit_bytes(),
            10240 * 1514,
            "unshaped: capped at limit * mtu"
        );
        assert_eq!(q.tin_count(), 3, "diffserv3 by default");
        assert_eq!(
            (q.tin_quantum(0), q.tin_quantum(1), q.tin_quantum(2)),
            (1024, 64, 256)
        );
        // Tin threshold rates R, R/16, R/4 (bytes/s).
        let q = built(&[("bandwidth", s("16Mbit"))]);
        assert_eq!(q.tin_rate_bytes_per_s(0), 2_000_000);
        assert_eq!(q.tin_rate_bytes_per_s(1), 125_000);
        assert_eq!(q.tin_rate_bytes_per_s(2), 500_000);
        // diffserv8: each tin 7/8 of the previous.
        let q = built(&[("bandwidth", s("8Mbit")), ("diffserv", s("diffserv8"))]);
        assert_eq!(q.tin_rate_bytes_per_s(1), 875_000);
        assert_eq!(q.tin_quantum(1), 224);
        // rtt keywords: target = rtt / 20.
        let q = built(&[("rtt", s("lan"))]);
        assert_eq!(q.tin_cobalt_params(0).target_ns, 50_000);
        assert_eq!(q.tin_cobalt_params(0).interval_ns, 1_000_000);
        let q = built(&[("rtt", s("40ms"))]);
        assert_eq!(q.tin_cobalt_params(0).target_ns, 2_000_000);
        let q = built(&[("rtt", s("40ms")), ("target", s("3ms"))]);
        assert_eq!(q.tin_cobalt_params(0).target_ns, 3_000_000);
    }

    #[test]
    fn bad_parameters_are_rejected_with_key() {
        let mut t = Table::default();
        t.insert("kind", s("cake"));
        t.insert("rtt", s("intranet"));
        let e = build(&Value::Table(t), "q", &BuildCtx::default())
            .err()
            .unwrap();
        assert_eq!(e.path, "q.rtt");
        let mut t = Table::default();
        t.insert("kind", s("cake"));
        t.insert("overhead", Value::Int(300));
        let e = build(&Value::Table(t), "q", &BuildCtx::default())
            .err()
            .unwrap();
        assert_eq!(e.path, "q.overhead");
        let mut t = Table::default();
        t.insert("kind", s("cake"));
        t.insert("flow_mode", s("triple"));
        let e = build(&Value::Table(t), "q", &BuildCtx::default())
            .err()
            .unwrap();
        assert_eq!(e.path, "q.flow_mode");
    }

    /// A link that dequeues as fast as the shaper allows: returns (delivery time, adjusted
    /// wire bytes by an independent formula) for `n` packets, keeping 2 packets queued.
    fn drive_shaped(q: &mut Cake, n: usize, sizes: &[u32], wire: impl Fn(u32) -> u64) -> f64 {
        let mut drops = Drops::new();
        let mut now = Time(1_000_000);
        let mut uid = 0u64;
        let mut out: Vec<(Time, u64)> = Vec::new();
        let mut bound = Bound::new(4 * n as u64 + 100, "drive_shaped: n deliveries");
        while out.len() < n {
            bound.tick();
            let mut fill = Bound::new(10, "drive_shaped: refill to 2 packets");
            while q.len_packets() < 2 {
                fill.tick();
                let len = sizes[uid as usize % sizes.len()];
                let mut p = pkt(uid, 1, 2, 7, len);
                p.enqueued_at = now;
                p.ecn = Ecn::Ect0;
                q.enqueue(p, now, &mut drops);
                uid += 1;
            }
            match q.dequeue(now, &mut drops) {
                Dequeue::Packet(p) => out.push((now, wire(p.len_bytes))),
                Dequeue::NotBefore(t) => now = t,
                Dequeue::Empty => panic!("backlogged shaper returned Empty"),
            }
        }
        assert!(drops.is_empty(), "no drops at a 2-packet backlog");
        let bytes: u64 = out[..n - 1].iter().map(|x| x.1).sum();
        let secs = (out[n - 1].0 - out[0].0).as_secs_f64();
        bytes as f64 / secs
    }

    #[test]
    fn shaper_holds_rate_including_overhead() {
        // ethernet: wire = len - 14 + 38, at least mpu 84 (tc-cake(8)).
        let mut q = built(&[
            ("bandwidth", s("10Mbit")),
            ("overhead_preset", s("ethernet")),
        ]);
        let r = drive_shaped(&mut q, 3000, &[1514, 40, 600], |l| {
            (l as u64 - 14 + 38).max(84)
        });
        assert!((r / 1_250_000.0 - 1.0).abs() < 0.01, "rate {r} B/s");
        // conservative: ATM cells, 48 B overhead: ceil((len - 14 + 48) / 48) * 53.
        let mut q = built(&[
            ("bandwidth", s("2Mbit")),
            ("overhead_preset", s("conservative")),
        ]);
        let r = drive_shaped(&mut q, 800, &[1514, 66], |l| {
            (l as u64 - 14 + 48).div_ceil(48) * 53
        });
        assert!((r / 250_000.0 - 1.0).abs() < 0.01, "rate {r} B/s");
        // raw (default): the qdisc length as is; PTM adds one byte per 64.
        let mut q = built(&[("bandwidth", s("5Mbit")), ("atm", s("ptm"))]);
        let r = drive_shaped(&mut q, 1500, &[1514, 100], |l| {
            l as u64 + (l as u64).div_ceil(64)
        });
        assert!((r / 625_000.0 - 1.0).abs() < 0.01, "rate {r} B/s");
    }

    /// Closed loop at a fixed instant (no sojourn, so no AQM): every flow keeps `depth`
    /// packets queued; returns bytes delivered per `group(pkt)` over `n` dequeues.
    fn closed_loop(
        q: &mut Cake,
        flows: &[Packet],
        depth: usize,
        n: usize,
        group: impl Fn(&Packet) -> usize,
    ) -> Vec<u64> {
        let mut drops = Drops::new();
        let now = Time(1_000);
        let mut uid = 0;
        let mut by_flow = std::collections::HashMap::new();
        for (i, f) in flows.iter().enumerate() {
            for _ in 0..depth {
                let mut p = *f;
                p.uid = uid;
                p.tag = i as u64;
                p.enqueued_at = now;
                uid += 1;
                q.enqueue(p, now, &mut drops);
            }
            by_flow.insert(i as u32, *f);
        }
        let mut bytes = vec![0u64; 16];
        for k in 0..n {
            let p = q.dequeue(now, &mut drops).packet().expect("backlogged");
            if k >= n / 10 {
                bytes[group(&p)] += p.len_bytes as u64;
            }
            let mut r = by_flow[&p.conversation()];
            r.uid = uid;
            r.tag = p.tag;
            r.enqueued_at = now;
            uid += 1;
            q.enqueue(r, now, &mut drops);
        }
        assert!(drops.is_empty());
        bytes
    }

    #[test]
    fn host_isolation_gives_hosts_equal_shares() {
        // Host 1 runs 1 flow, host 2 runs 8 flows, each to its own server. With per-source
        // host fairness the two hosts get equal shares; plain per-flow fairness gives 1:8.
        let mut flows = vec![pkt(0, 1, 100, 10, 1514)];
        for i in 0..8 {
            flows.push(pkt(0, 2, 101 + i, 20 + i as u16, 1514));
        }
        let group = |p: &Packet| p.key.src_addr.low32() as usize;
        for mode in ["triple-isolate", "srchost", "dual-srchost"] {
            let mut q = built(&[("flow_mode", s(mode)), ("diffserv", s("besteffort"))]);
            let b = closed_loop(&mut q, &flows, 4, 20_000, group);
            let ratio = b[1] as f64 / b[2] as f64;
            assert!((ratio - 1.0).abs() < 0.05, "{mode}: host1/host2 = {ratio}");
        }
        let mut q = built(&[("flow_mode", s("flows")), ("diffserv", s("besteffort"))]);
        let b = closed_loop(&mut q, &flows, 4, 20_000, group);
        let ratio = b[1] as f64 / b[2] as f64;
        assert!((ratio - 0.125).abs() < 0.02, "flows: host1/host2 = {ratio}");
        // dsthost: two destinations (1 flow vs 8 flows) share equally.
        let mut flows = vec![pkt(0, 1, 100, 10, 1514)];
        for i in 0..8 {
            flows.push(pkt(0, 10 + i, 200, 20 + i as u16, 1514));
        }
        let mut q = built(&[
            ("flow_mode", s("dual-dsthost")),
            ("diffserv", s("besteffort")),
        ]);
        let b = closed_loop(&mut q, &flows, 4, 20_000, |p| {
            (p.key.dst_addr.low32() / 100) as usize
        });
        let ratio = b[1] as f64 / b[2] as f64;
        assert!((ratio - 1.0).abs() < 0.05, "dual-dsthost: {ratio}");
    }

    #[test]
    fn unshaped_diffserv3_splits_best_effort_and_bulk_by_tin_quantum() {
        // Weighted DRR over tins: 1024 (BE) vs 64 (Bulk) bytes per round = 16:1.
        let mut be = pkt(0, 1, 100, 10, 1514);
        be.dscp = 0;
        let mut bulk = pkt(0, 2, 100, 11, 1514);
        bulk.dscp = 8; // CS1
        let mut q = built(&[]);
        let b = closed_loop(&mut q, &[be, bulk], 4, 17_000, |p| {
            if p.dscp == 8 {
                1
            } else {
                0
            }
        });
        let ratio = b[0] as f64 / b[1] as f64;
        assert!((ratio / 16.0 - 1.0).abs() < 0.05, "BE/Bulk = {ratio}");
    }

    #[test]
    fn strict_tin_mode_serves_voice_then_best_effort_then_bulk() {
        // tin_mode = "strict": with every tin backlogged, Voice (1:3) drains before Best
        // Effort (1:2), which drains before Bulk (1:1) -- no 16:1 DRR share for Bulk.
        for shaped in [false, true] {
            let mut pairs = vec![("tin_mode", s("strict"))];
            if shaped {
                pairs.push(("bandwidth", s("1Gbit")));
            }
            let mut q = built(&pairs);
            let mut drops = Drops::new();
            let now = Time(1_000);
            let mut uid = 0;
            // Interleave arrivals so FIFO order would mix the classes.
            for _ in 0..20 {
                for (prio, sport) in [(0x1_0001u32, 11u16), (0x1_0002, 12), (0x1_0003, 13)] {
                    let mut p = pkt(uid, 1, 2, sport, 1000);
                    p.priority = prio;
                    p.enqueued_at = now;
                    uid += 1;
                    q.enqueue(p, now, &mut drops);
                }
            }
            let mut order = Vec::new();
            let mut t = now;
            let mut bound = Bound::new(1_000, "60 deliveries in tin order");
            while order.len() < 60 {
                bound.tick();
                match q.dequeue(t, &mut drops) {
                    Dequeue::Packet(p) => order.push(p.priority & 0xffff),
                    Dequeue::NotBefore(x) => t = x,
                    Dequeue::Empty => panic!("lost packets"),
                }
            }
            assert!(drops.is_empty());
            let expect: Vec<u32> = [3, 2, 1].iter().flat_map(|&m| [m; 20]).collect();
            assert_eq!(order, expect, "shaped = {shaped}");
        }
        // The same load under Linux's unshaped DRR gives Bulk a share before BE drains.
        let mut q = built(&[]);
        let mut drops = Drops::new();
        for i in 0..40u64 {
            let mut p = pkt(i, 1, 2, 11 + (i % 2) as u16, 1000);
            p.priority = 0x1_0001 + (i % 2) as u32;
            q.enqueue(p, Time(1_000), &mut drops);
        }
        let first: Vec<u32> = (0..20)
            .map(|_| {
                q.dequeue(Time(1_000), &mut drops)
                    .packet()
                    .unwrap()
                    .priority
                    & 0xffff
            })
            .collect();
        assert!(
            first.contains(&1),
            "Linux DRR serves Bulk within 20 packets"
        );
    }

    #[test]
    fn tin_classification_by_dscp_and_priority() {
        let q = built(&[]);
        let mut p = pkt(0, 1, 2, 3, 100);
        for (dscp, tin) in [
            (0, 0),
            (8, 1),
            (1, 1),
            (46, 2),
            (44, 2),
            (48, 2),
            (56, 2),
            (4, 2),
            (10, 0),
            (34, 0),
        ] {
            p.dscp = dscp;
            assert_eq!(q.classify_tin(&mut p), tin, "dscp {dscp}");
        }
        // skb->priority major == handle (1:) and minor in 1..=3 -> bulk-first order.
        p.dscp = 46;
        for (prio, tin) in [
            (0x1_0001, 1),
            (0x1_0002, 0),
            (0x1_0003, 2),
            (0x1_0004, 2),
            (0x2_0001, 2),
        ] {
            p.priority = prio;
            assert_eq!(q.classify_tin(&mut p), tin, "priority {prio:#x}");
        }
        let q = built(&[("handle", Value::Int(2)), ("diffserv", s("diffserv4"))]);
        p.priority = 0x2_0003;
        assert_eq!(q.classify_tin(&mut p), 2, "diffserv4 order 1,0,2,3");
        let q = built(&[("wash", Value::Bool(true))]);
        p.priority = 0;
        p.dscp = 46;
        assert_eq!(q.classify_tin(&mut p), 2, "wash classifies first");
        assert_eq!(p.dscp, 0, "then clears DSCP");
    }

    /// Shaped link at 10 Mbit with 8 backlogged BE flows and a 1.6 Mbit/s voice stream
    /// (200 B every 1 ms: above the per-flow fair share, below the Voice tin's R/4).
    /// Returns the voice packets' (mean, max) sojourn in ms.
    fn voice_delay(diffserv: &str) -> (f64, f64) {
        let mut q = built(&[("bandwidth", s("10Mbit")), ("diffserv", s(diffserv))]);
        let mut drops = Drops::new();
        let line = 100_000_000; // the physical link behind the shaper
        let mut uid = 0u64;
        let be: Vec<Packet> = (0..8)
            .map(|i| pkt(0, 1, 100 + i, 10 + i as u16, 1514))
            .collect();
        let mut now = Time(0);
        for (i, f) in be.iter().enumerate() {
            for _ in 0..8 {
                let mut p = *f;
                p.uid = uid;
                p.tag = i as u64;
                p.ecn = Ecn::Ect0;
                p.enqueued_at = now;
                uid += 1;
                q.enqueue(p, now, &mut drops);
            }
        }
        let mut next_voice = Time(0);
        let mut link_free = Time(0);
        let mut wake = Time(0);
        let mut delays = Vec::new();
        let end = Time(3_000_000_000);
        let mut bound = Bound::new(1_000_000, "3 s of voice beside bulk");
        while now < end {
            bound.tick();
            if next_voice <= now {
                let mut v = pkt(uid, 1, 300, 5000, 200);
                v.tag = 99;
                v.dscp = 46;
                v.enqueued_at = next_voice;
                uid += 1;
                q.enqueue(v, next_voice, &mut drops);
                next_voice += Duration::from_ms(1);
                wake = wake.min(link_free.max(now));
            }
            if wake <= now && link_free <= now {
                match q.dequeue(now, &mut drops) {
                    Dequeue::Packet(p) => {
                        if p.conversation() == 99 {
                            if now > Time(1_000_000_000) {
                                delays.push((now - p.enqueued_at).as_millis_f64());
                            }
                        } else {
                            let mut r = be[p.conversation() as usize];
                            r.uid = uid;
                            r.tag = p.tag;
                            r.ecn = Ecn::Ect0;
                            r.enqueued_at = now;
                            uid += 1;
                            q.enqueue(r, now, &mut drops);
                        }
                        link_free = now + tx_time(p.len_bytes as u64, line);
                        wake = link_free;
                    }
                    Dequeue::NotBefore(t) => wake = t,
                    Dequeue::Empty => wake = Time::MAX,
                }
            }
            // Replace BE packets dropped by COBALT so the backlog persists.
            for d in drops.drain().collect::<Vec<_>>() {
                if d.pkt.conversation() != 99 {
                    let mut r = be[d.pkt.conversation() as usize];
                    r.uid = uid;
                    r.tag = d.pkt.tag;
                    r.enqueued_at = now;
                    uid += 1;
                    q.enqueue(r, now, &mut drops);
                }
            }
            now = next_voice.min(wake.max(link_free)).max(now);
        }
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        let max = delays.iter().cloned().fold(0.0, f64::max);
        (mean, max)
    }

    #[test]
    fn voice_tin_gets_low_delay_within_its_share_when_shaped() {
        let (mean, max) = voice_delay("diffserv3");
        // At most one 1514-B BE packet at 10 Mbit (1.2 ms) ahead of a voice packet.
        assert!(max < 2.5, "diffserv3 voice max {max} ms (mean {mean})");
        // Control: without tins the same stream is one bulk flow among nine and queues.
        let (mean_be, _) = voice_delay("besteffort");
        assert!(
            mean_be > 4.0 * mean.max(0.5),
            "besteffort voice mean {mean_be} ms"
        );
    }

    #[test]
    fn last_packet_of_a_queue_is_never_dropped() {
        // BLUE forced to p_drop = 1: every judged packet is condemned, yet the last packet
        // of the queue is delivered (CAKE only drops when more packets remain).
        let mut q = built(&[("diffserv", s("besteffort")), ("flow_mode", s("flows"))]);
        let mut drops = Drops::new();
        let mut t = Time(1_000_000);
        let mut uid = 0;
        for round in 0..20 {
            let k = 1 + round % 4;
            let mut last = 0;
            for _ in 0..k {
                let mut p = pkt(uid, 1, 2, 3, 1000);
                p.enqueued_at = t;
                last = uid;
                uid += 1;
                q.enqueue(p, t, &mut drops);
            }
            for f in q.tins[0].flows.iter_mut() {
                f.cvars.p_drop = u32::MAX;
            }
            t += Duration::from_ms(300);
            let got = q
                .dequeue(t, &mut drops)
                .packet()
                .expect("last packet delivered");
            assert_eq!(got.uid, last);
            assert_eq!(drops.len(), k as usize - 1, "all but the last dropped");
            drops.clear();
            assert!(matches!(q.dequeue(t, &mut drops), Dequeue::Empty));
        }
        // Same with the CoDel part: Not-ECT, long sojourn, queue of 2 -> head may go, tail stays.
        let mut q = built(&[("diffserv", s("besteffort"))]);
        let mut delivered = 0;
        let mut dropped = 0;
        for _ in 0..50 {
            for _ in 0..2 {
                let mut p = pkt(uid, 1, 2, 3, 1000);
                p.enqueued_at = t;
                uid += 1;
                q.enqueue(p, t, &mut drops);
            }
            t += Duration::from_ms(200);
            let mut n = 0;
            let mut bound = Bound::new(1_000, "drain after 200 ms");
            while let Dequeue::Packet(_) = q.dequeue(t, &mut drops) {
                bound.tick();
                n += 1;
            }
            assert!(n >= 1, "the last packet always leaves");
            delivered += n;
            dropped += drops.len();
            drops.clear();
        }
        assert!(
            dropped > 0,
            "COBALT did drop heads (the rule was exercised)"
        );
        assert_eq!(delivered + dropped, 100);
    }

    #[test]
    fn eight_way_set_associative_hashing() {
        let mut q = built(&[("diffserv", s("besteffort")), ("flow_mode", s("flows"))]);
        let mut drops = Drops::new();
        // Nine flows whose hashes all reduce to queue 5 (set 0..8).
        for i in 0..9u32 {
            let mut p = pkt(i as u64, 1, 2, 3, 100);
            p.hash = i * 1024 + 5;
            q.enqueue(p, Time(0), &mut drops);
        }
        let b = &q.tins[0];
        let occupied: Vec<usize> = (0..8).filter(|&i| b.flows[i].head != NIL).collect();
        assert_eq!(
            occupied.len(),
            8,
            "first eight flows get the eight ways of the set"
        );
        assert_eq!(b.stats.way_misses, 8);
        assert_eq!(b.stats.way_collisions, 1, "the ninth collides");
        assert_eq!(
            b.flows[5].backlog_bytes, 200,
            "into the original way (queue 5)"
        );
        assert_eq!(b.tags[5], 8 * 1024 + 5, "which is retagged");
        // A flow already placed is found again through its tag.
        let mut p = pkt(100, 1, 2, 3, 100);
        p.hash = 1024 + 5;
        q.enqueue(p, Time(0), &mut drops);
        assert_eq!(q.tins[0].flows[6].backlog_bytes, 200);
        assert_eq!(q.tins[0].stats.way_hits, 1);
        // Another set is independent.
        let mut p = pkt(101, 1, 2, 3, 100);
        p.hash = 13;
        q.enqueue(p, Time(0), &mut drops);
        assert_eq!(q.tins[0].flows[13].backlog_bytes, 100);
    }

    #[test]
    fn overflow_head_drops_globally_fattest_queue_and_raises_blue() {
        // memlimit 40 kB; a fat BE flow and a thin Voice flow. Overflow always takes the
        // head of the fattest queue (across tins), and each overflow spaced > target
        // raises that queue's BLUE probability by 1/256.
        let mut q = built(&[("memlimit", Value::Int(40_000)), ("flow_mode", s("flows"))]);
        let mut drops = Drops::new();
        let mut t = Time(1_000_000);
        let mut uid = 0;
        let mut v = pkt(uid, 9, 9, 9, 200);
        v.dscp = 46;
        v.enqueued_at = t;
        q.enqueue(v, t, &mut drops);
        uid += 1;
        let mut overflows = 0;
        let mut expected_head = 1u64;
        for _ in 0..10 {
            let mut fill = Bound::new(1_000, "fill until the memory limit overflows");
            while drops.is_empty() {
                fill.tick();
                let mut p = pkt(uid, 1, 2, 3, 1514);
                p.enqueued_at = t;
                uid += 1;
                q.enqueue(p, t, &mut drops);
            }
            for d in drops.drain() {
                assert_eq!(d.reason, DropReason::FattestFlow);
                assert_eq!(d.pkt.uid, expected_head, "head of the fat queue");
                expected_head += 1;
            }
            overflows += 1;
            let idx = (0..CAKE_QUEUES)
                .find(|&i| q.tins[0].flows[i].head != NIL)
                .unwrap();
            assert_eq!(q.tins[0].flows[idx].cvars.p_drop, overflows << 24);
            assert!(q.memory_used_bytes() <= q.memory_limit_bytes());
            t += Duration::from_ms(6); // > target (5 ms)
        }
        assert_eq!(
            q.tins[2].stats.dropped, 0,
            "the thin voice queue is never the victim"
        );
    }

    /// `cake_heapify` swaps a queue with a child only when the child is strictly fatter, so
    /// of two equally fat queues the one nearer the heap's root loses the packet. The heap
    /// starts in the kernel's order (`k = queue * CAKE_MAX_TINS + tin`): with one queue per
    /// tin (flowblind), Best Effort is position 0, Bulk 1 and Voice 2 (diffserv3). 1000-B
    /// packets with a truesize of 1000 B and a 5500-B memory limit: the 6th arrival
    /// overflows and the first heap build picks the victim.
    #[test]
    fn overflow_tie_drops_from_the_queue_nearest_the_heap_root() {
        // (DSCP of each arrival in order, uid of the packet Linux drops)
        let be = 0u8;
        let bulk = 8u8; // CS1
        let voice = 46u8; // EF
        let cases: [([u8; 6], u64); 3] = [
            // BE ties Bulk (left child): BE's head, uid 0.
            ([be, bulk, be, bulk, be, bulk], 0),
            // BE ties Voice (right child): BE's head, uid 0.
            ([be, voice, be, voice, be, voice], 0),
            // Bulk ties Voice under an empty BE: the left child, Bulk's head, uid 0.
            ([bulk, voice, bulk, voice, bulk, voice], 0),
        ];
        for (arrivals, victim) in cases {
            let mut q = built(&[
                ("memlimit", Value::Int(5_500)),
                ("flow_mode", s("flowblind")),
            ]);
            let mut drops = Drops::new();
            for (uid, &dscp) in arrivals.iter().enumerate() {
                let mut p = pkt(uid as u64, 1, 2, 3, 1000);
                p.dscp = dscp;
                p.truesize_bytes = 1000;
                p.enqueued_at = Time(1_000_000);
                q.enqueue(p, Time(1_000_000), &mut drops);
            }
            let dropped: Vec<u64> = drops.drain().map(|d| d.pkt.uid).collect();
            assert_eq!(dropped, vec![victim], "arrivals {arrivals:?}");
        }
    }

    fn ack(uid: u64, ack_no: u64, flags: u8) -> Packet {
        let key = FlowKey {
            src_addr: Addr::v4(1),
            dst_addr: Addr::v4(2),
            src_port: 40000,
            dst_port: 80,
            proto: proto::TCP,
        };
        let mut p = Packet::synthetic(uid, 1, 66);
        p.key = key;
        p.hash = key.hash(0);
        p.hdr.flags = flags;
        p.hdr.ack = ack_no;
        p
    }

    #[test]
    fn split_gso_segments_are_packets_of_their_own_and_the_victim_is_told_right() {
        // A 3-segment GSO buffer (1448-B MSS, 1514-B frames, 2880 B of truesize each) into
        // CAKE with split_gso (the default) and a 4000-B memory limit: segment 2 overflows
        // it and CAKE head-drops segment 1 (its queue is the fattest), segment 3 then
        // drops segment 2. Each arriving segment was queued while its own flow lost a
        // packet: the kernel answers NET_XMIT_CN (queued, congested), not a drop.
        let mut q = built(&[("memlimit", Value::Int(4000)), ("flow_mode", s("flows"))]);
        let mut p = pkt(7, 1, 2, 3, 3 * 1514);
        p.hdr.seq = 1_000;
        p.hdr.payload_bytes = 3 * 1448;
        p.gso_segs = 3;
        p.gso_size = 1448;
        p.truesize_bytes = 3 * 2880;
        let mut drops = Drops::new();
        let v = q.enqueue(p, Time(0), &mut drops);
        assert_eq!(v, Verdict::QueuedCongested);
        let gone: Vec<(u64, u64)> = drops
            .as_slice()
            .iter()
            .map(|d| (d.pkt.uid, d.pkt.hdr.seq))
            .collect();
        // Fresh identities: buffer uid + (segment index << 48).
        assert_eq!(gone, vec![(7, 1_000), (7 + (1 << 48), 1_000 + 1448)]);
        assert_eq!(q.len_packets(), 1);
        let left = q.dequeue(Time(0), &mut drops).packet().unwrap();
        assert_eq!((left.uid, left.hdr.seq), (7 + (2 << 48), 1_000 + 2 * 1448));
    }

    /// A queue that becomes sparse starts with `flow_quantum × quantum_div[host_load] >> 16`
    /// bytes of deficit (sch_cake.c, cake_enqueue), quantum_div[n] = 65535 / n and the
    /// host load counting the host's *bulk* flows (at least 1): an unshaped CAKE's 1514-B
    /// quantum gives 1514 × 65535 >> 16 = 1513 B, also for a host's second flow while
    /// neither of its flows is bulk yet.
    #[test]
    fn a_new_sparse_flow_starts_with_the_host_scaled_quantum() {
        let sparse_deficits = |q: &Cake| -> Vec<i32> {
            let mut d = Vec::new();
            for b in &q.tins {
                for (i, f) in b.flows.iter().enumerate() {
                    if f.set == SET_SPARSE {
                        d.push(b.lists.deficit(i));
                    }
                }
            }
            d
        };
        let mut drops = Drops::new();
        let mut q = built(&[("flow_mode", s("flows"))]);
        q.enqueue(pkt(1, 1, 2, 3, 1514), Time(0), &mut drops);
        assert_eq!(sparse_deficits(&q), vec![1513]);
        let mut q = built(&[("flow_mode", s("dual-srchost"))]);
        q.enqueue(pkt(1, 1, 2, 3, 1514), Time(0), &mut drops);
        q.enqueue(pkt(2, 1, 2, 4, 1514), Time(0), &mut drops);
        let mut d = sparse_deficits(&q);
        d.sort();
        assert_eq!(d, vec![1513, 1513]);
        assert!(drops.as_slice().is_empty());
    }

    fn v6_pkt(src: &str, dst: &str, sport: u16, dport: u16) -> Packet {
        let key = FlowKey {
            src_addr: Addr::from(src.parse::<std::net::IpAddr>().unwrap()),
            dst_addr: Addr::from(dst.parse::<std::net::IpAddr>().unwrap()),
            src_port: sport,
            dst_port: dport,
            proto: proto::TCP,
        };
        let mut p = Packet::synthetic(0, 1, 1514);
        p.key = key;
        p.hash = key.hash(5);
        p
    }

    #[test]
    fn ipv6_connections_keep_one_queue_both_ways_and_flows_get_their_own() {
        for mode in ["flows", "triple-isolate"] {
            let mut q = built(&[("flow_mode", s(mode)), ("diffserv", s("besteffort"))]);
            let mut drops = Drops::new();
            // Both directions of one connection: one queue (the symmetric flow hash).
            q.enqueue(
                v6_pkt("2001:db8::10", "2001:db8:1::20", 40000, 443),
                Time(0),
                &mut drops,
            );
            q.enqueue(
                v6_pkt("2001:db8:1::20", "2001:db8::10", 443, 40000),
                Time(0),
                &mut drops,
            );
            let busy = |q: &Cake| {
                (0..CAKE_QUEUES)
                    .filter(|&i| q.tins[0].flows[i].backlog_bytes > 0)
                    .count()
            };
            assert_eq!(busy(&q), 1, "{mode}");
            // 64 clients differing only in the top 32 bits of their address: CAKE's 8-way
            // set-associative hash gives each of these few flows a queue of its own.
            for i in 1..=64u32 {
                let src = format!("2001:{:x}::10", 0xdb8 + i);
                q.enqueue(
                    v6_pkt(&src, "2001:db8:1::20", 40000, 443),
                    Time(0),
                    &mut drops,
                );
            }
            assert!(drops.is_empty());
            assert_eq!(busy(&q), 65, "{mode}");
        }
    }

    /// The drops of a fixed ACK sequence through the conservative ACK filter, with every
    /// sequence number offset by `base` modulo 2^32 (as a live engine stores the wire's
    /// 32-bit numbers).
    fn ack_filter_run(base: u64) -> Vec<Vec<u64>> {
        let a = tcp_flags::ACK;
        let w = |x: u64| (base + x) & 0xffff_ffff;
        let mut q = built(&[("ack_filter", s("ack-filter"))]);
        let mut drops = Drops::new();
        let mut out = vec![];
        let mut step = |q: &mut Cake, p: Packet, drops: &mut Drops| {
            q.enqueue(p, Time(0), drops);
            out.push(
                drops
                    .as_slice()
                    .iter()
                    .map(|d| d.pkt.uid)
                    .collect::<Vec<_>>(),
            );
            drops.clear();
        };
        step(&mut q, ack(1, w(1000), a), &mut drops);
        step(&mut q, ack(2, w(2000), a), &mut drops);
        step(&mut q, ack(3, w(3000), a), &mut drops);
        let mut sacked = ack(4, w(3000), a);
        sacked.hdr.sack_count = 1;
        sacked.hdr.set_sack(
            0,
            SackBlock {
                start: w(5000),
                end: w(6000),
            },
        );
        step(&mut q, sacked, &mut drops);
        step(&mut q, ack(5, w(3000), a), &mut drops);
        step(&mut q, ack(6, w(9000), a), &mut drops);
        out
    }

    #[test]
    fn ack_filter_decides_the_same_across_the_sequence_wrap() {
        // Far from the wrap: ACK 3000 makes ACK 1000 redundant (two eligible); the SACKing
        // ACK makes ACK 2000 redundant; ACK 3000 again drops nothing; ACK 9000 drops ACK 3000.
        let want: Vec<Vec<u64>> = vec![vec![], vec![], vec![1], vec![2], vec![], vec![3]];
        assert_eq!(ack_filter_run(1_000_000), want);
        // The same ACKs straddling 2^32 (the 32-bit numbers wrap between 2000 and 3000,
        // and inside the SACK block): the same decisions (RFC 1982 comparisons).
        assert_eq!(ack_filter_run((1 << 32) - 2500), want);
        assert_eq!(ack_filter_run((1 << 32) - 5500), want);
    }

    #[test]
    fn ack_filter_drops_redundant_pure_acks() {
        let a = tcp_flags::ACK;
        let mut drops = Drops::new();
        // Conservative: needs two eligible ACKs, drops the one nearest the head.
        let mut q = built(&[("ack_filter", s("ack-filter"))]);
        q.enqueue(ack(1, 1000, a), Time(0), &mut drops);
        q.enqueue(ack(2, 2000, a), Time(0), &mut drops);
        assert!(drops.is_empty(), "one eligible ACK is not enough");
        q.enqueue(ack(3, 3000, a), Time(0), &mut drops);
        assert_eq!(
            drops
                .as_slice()
                .iter()
                .map(|d| d.pkt.uid)
                .collect::<Vec<_>>(),
            vec![1]
        );
        assert_eq!(q.len_packets(), 2);
        assert_eq!(q.len_bytes(), 132);
        drops.clear();
        // A data segment and an ACK with a newer SACK are not redundant.
        let mut data = ack(4, 3000, a | tcp_flags::PSH);
        data.hdr.payload_bytes = 1000;
        data.len_bytes = 1066;
        q.enqueue(data, Time(0), &mut drops);
        assert!(drops.is_empty(), "data ACK trigger: only one eligible");
        let mut sacked = ack(5, 3000, a);
        sacked.hdr.sack_count = 1;
        sacked.hdr.set_sack(
            0,
            SackBlock {
                start: 5000,
                end: 6000,
            },
        );
        q.enqueue(sacked, Time(0), &mut drops);
        // The SACKing ACK makes ACK 2000 and ACK 3000 redundant: the older one goes.
        let uids = |d: &Drops| d.as_slice().iter().map(|x| x.pkt.uid).collect::<Vec<_>>();
        assert_eq!(uids(&drops), vec![2]);
        drops.clear();
        // ACK 3000 without SACK: ACK 3 is identical (not older), ACK 5 SACKs more: keep.
        q.enqueue(ack(6, 3000, a), Time(0), &mut drops);
        assert!(drops.is_empty(), "{:?}", uids(&drops));
        // ACK 9000: 3 and 6 are eligible, the data segment and the SACKing ACK are not.
        q.enqueue(ack(7, 9000, a), Time(0), &mut drops);
        assert_eq!(uids(&drops), vec![3]);
        drops.clear();

        // Aggressive: a single eligible ACK directly ahead with equal ECE/CWR is dropped.
        let mut q = built(&[("ack_filter", s("ack-filter-aggressive"))]);
        q.enqueue(ack(1, 1000, a), Time(0), &mut drops);
        q.enqueue(ack(2, 2000, a), Time(0), &mut drops);
        assert_eq!(
            drops
                .as_slice()
                .iter()
                .map(|d| d.pkt.uid)
                .collect::<Vec<_>>(),
            vec![1]
        );
        drops.clear();
        q.enqueue(ack(3, 3000, a | tcp_flags::ECE), Time(0), &mut drops);
        assert!(drops.is_empty(), "ECE differs: keep");
        // Off by default.
        let mut q = built(&[]);
        for i in 0..5 {
            q.enqueue(ack(i, 1000 * (i + 1), a), Time(0), &mut drops);
        }
        assert!(drops.is_empty() && q.len_packets() == 5);
    }

    /// Gives testkit's packets DSCPs and TCP ACK headers so every tin and the ACK filter
    /// are exercised.
    fn vary(p: &mut Packet, _now: Time) {
        p.dscp = [0, 8, 46, 34, 10, 48, 1, 24][(p.uid % 8) as usize];
        if p.uid.is_multiple_of(3) {
            p.key.proto = proto::TCP;
            p.hdr.flags = tcp_flags::ACK;
            p.hdr.ack = p.uid * 100;
            p.hash = p.key.hash(0);
        }
        if p.uid.is_multiple_of(5) {
            p.priority = 0x1_0000 | (p.uid % 4) as u32;
        }
    }

    #[test]
    fn conservation_property_across_modes() {
        let configs: Vec<Vec<(&str, Value)>> = vec![
            vec![],
            vec![("memlimit", Value::Int(30_000))],
            vec![
                ("bandwidth", s("10Mbit")),
                ("diffserv", s("diffserv4")),
                ("flow_mode", s("dual-srchost")),
                ("overhead_preset", s("ethernet")),
            ],
            vec![
                ("bandwidth", s("1Mbit")),
                ("memlimit", Value::Int(20_000)),
                ("diffserv", s("besteffort")),
                ("flow_mode", s("flows")),
                ("ingress", Value::Bool(true)),
            ],
            vec![
                ("diffserv", s("diffserv8")),
                ("flow_mode", s("srchost")),
                ("ack_filter", s("ack-filter")),
                ("memlimit", Value::Int(50_000)),
            ],
            vec![
                ("bandwidth", s("50Mbit")),
                ("diffserv", s("precedence")),
                ("flow_mode", s("hosts")),
                ("ack_filter", s("ack-filter-aggressive")),
                ("wash", Value::Bool(true)),
                ("atm", s("atm")),
                ("overhead", Value::Int(-20)),
            ],
            vec![
                ("flow_mode", s("flowblind")),
                ("memlimit", Value::Int(15_000)),
            ],
            vec![("tin_mode", s("strict")), ("memlimit", Value::Int(40_000))],
            vec![
                ("tin_mode", s("strict")),
                ("bandwidth", s("5Mbit")),
                ("diffserv", s("diffserv4")),
            ],
            vec![("tin_mode", s("drr")), ("bandwidth", s("5Mbit"))],
            vec![
                ("flow_mode", s("dsthost")),
                ("bandwidth", s("3Mbit")),
                ("ingress", Value::Bool(true)),
                ("ack_filter", s("ack-filter")),
            ],
            vec![("flow_mode", s("dual-dsthost")), ("rtt", s("lan"))],
        ];
        for (ci, c) in configs.iter().enumerate() {
            for seed in 0..6 {
                let mut q = built(c);
                check_conservation_with(
                    &mut q,
                    seed * 31 + ci as u64,
                    4_000,
                    |q| q.memory_used_bytes() <= q.memory_limit_bytes(),
                    vary,
                );
                // Drained: every counter back to rest.
                for b in &q.tins {
                    assert_eq!(b.tin_backlog, 0);
                    assert!(b
                        .flows
                        .iter()
                        .all(|f| f.backlog_bytes == 0 && f.head == NIL));
                }
                assert_eq!(q.memory_used_bytes(), 0, "config {ci}");
            }
        }
    }
}
