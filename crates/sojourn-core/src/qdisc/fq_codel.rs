//! `fq_codel`: FlowQueue-CoDel (RFC 8290; Linux `sch_fq_codel.c`).
//!
//! Packets are hashed into `flows` queues; a deficit round robin with a byte `quantum`
//! serves two lists of active queues, `new_flows` before `old_flows`, so a queue that has
//! just become active (a sparse flow) is served ahead of the backlogged ones; each queue
//! is managed by its own CoDel state ([`super::codel_law`]) whose "≤ one MTU left" test uses
//! the backlog of the *whole* qdisc. On overflow (`limit` packets or `memory_limit` bytes of
//! truesize) up to `drop_batch` packets — at most about half its bytes — are dropped from
//! the head of the fattest queue, and that queue's CoDel `count` grows by the number dropped.
//!
//! Two switches (not in Linux) reproduce the ablations of Grigorescu et al. (EuCNC 2015):
//! - `new_flow_priority = false` ("FQ-CoDel WP"): there is one list; a queue that becomes
//!   active joins the tail of it (the old list) and queues are served in DRR order like
//!   SFQ. An emptied queue leaves the list. Everything else (CoDel, deficits, overflow) is
//!   unchanged. `starvation_prevention` then has no effect (no queue is ever "new").
//! - `starvation_prevention = false` ("FQ-CoDel WSPM"): a queue found empty at the head of
//!   `new_flows` is removed from the lists instead of being moved to the tail of
//!   `old_flows`, so its next packet makes it "new" again at once (fresh `quantum`).
//!
//! Data layout: packets live in one slab of index-linked nodes (no allocation per packet
//! once the slab has grown to the high-water mark); each flow holds head/tail indices, its
//! CoDel vars; the deficits and the `new_flows`/`old_flows` lists are the shared
//! [`DrrLists`] (super::drr_lists). Per-flow byte backlogs are a separate array, scanned
//! linearly only on overflow, as in Linux.

use super::codel::codel_params;
use super::codel_law::{codel_dequeue, CodelParams, CodelQueue, CodelStats, CodelVars};
use super::drr_lists::{DrrLists, NEW, OLD};
use super::vocab::{
    tc_size, BuildCtx, Dequeue, Discipline, DropReason, Drops, NotLinux, Qdisc, TcKey, Verdict,
};
use crate::packet::Packet;
use crate::params::{ConfResult, Params};
use crate::rng::splitmix64_mix;
use crate::time::Time;

/// "No index" in the intrusive lists.
const NIL: u32 = u32::MAX;

/// Linux bounds: flows 1..=65536, quantum raised to at least 256 and at most 2^20,
/// memory_limit capped at 2^31.
const MAX_FLOWS: u32 = 65536;
const MIN_QUANTUM: u64 = 256;
const MAX_QUANTUM: u64 = 1 << 20;
const MAX_MEMORY_LIMIT: u64 = 1 << 31;

/// A queued packet and the next one in its flow.
#[derive(Clone, Copy, Debug)]
struct Node {
    pkt: Packet,
    next: u32,
}

/// Packet storage shared by all flows, with a free list threaded through `next`.
#[derive(Debug, Default)]
struct Slab {
    nodes: Vec<Node>,
    free: u32,
}

impl Slab {
    fn new() -> Slab {
        Slab {
            nodes: Vec::new(),
            free: NIL,
        }
    }
    #[inline]
    fn alloc(&mut self, pkt: Packet) -> u32 {
        if self.free != NIL {
            let i = self.free;
            let n = &mut self.nodes[i as usize];
            self.free = n.next;
            n.pkt = pkt;
            n.next = NIL;
            if self.free != NIL {
                crate::prefetch::prefetch(&self.nodes[self.free as usize]);
            }
            i
        } else {
            self.nodes.push(Node { pkt, next: NIL });
            (self.nodes.len() - 1) as u32
        }
    }
    /// Frees node `i`, returning its packet and its successor.
    #[inline]
    fn release(&mut self, i: u32) -> (Packet, u32) {
        let n = &mut self.nodes[i as usize];
        let next = n.next;
        n.next = self.free;
        self.free = i;
        (n.pkt, next)
    }
}

/// One flow queue (`struct fq_codel_flow`).
#[derive(Clone, Copy, Debug)]
struct Flow {
    /// First and last packet (slab indices), `NIL` when empty.
    head: u32,
    tail: u32,
    cvars: CodelVars,
}

/// The CoDel view of one flow: pops its head, keeps every backlog counter right
/// (Linux `dequeue_func`), and reports the whole qdisc's backlog.
struct FlowQueue<'a> {
    head: &'a mut u32,
    tail: &'a mut u32,
    slab: &'a mut Slab,
    flow_backlog: &'a mut u32,
    qlen: &'a mut usize,
    backlog_bytes: &'a mut u64,
    memory_usage: &'a mut u64,
}

impl CodelQueue for FlowQueue<'_> {
    #[inline]
    fn dequeue_head(&mut self, _vars: &CodelVars) -> Option<Packet> {
        let i = *self.head;
        if i == NIL {
            return None;
        }
        // Read what the counters need in the slab and copy the packet once, straight
        // into the result (`Slab::release` would copy it twice; issue 19, session 9).
        let n = &mut self.slab.nodes[i as usize];
        let next = n.next;
        let (len, truesize) = (n.pkt.len_bytes, n.pkt.truesize_bytes);
        n.next = self.slab.free;
        self.slab.free = i;
        *self.head = next;
        if next == NIL {
            *self.tail = NIL;
        } else {
            crate::prefetch::prefetch(&self.slab.nodes[next as usize]);
        }
        *self.flow_backlog -= len;
        *self.qlen -= 1;
        *self.backlog_bytes -= len as u64;
        *self.memory_usage -= truesize as u64;
        Some(self.slab.nodes[i as usize].pkt)
    }
    #[inline]
    fn backlog_bytes(&self) -> u64 {
        *self.backlog_bytes
    }
}

#[derive(Debug)]
pub struct FqCodel {
    flows: Vec<Flow>,
    /// Bytes queued per flow (Linux `backlogs[]`), scanned for the fattest flow.
    backlogs: Vec<u32>,
    slab: Slab,
    /// Deficits and the new/old lists (RFC 8290 §4.2).
    drr: DrrLists<2>,
    /// Packets queued (`sch->q.qlen`).
    qlen: usize,
    /// Bytes queued (`sch->qstats.backlog`).
    backlog_bytes: u64,
    /// Truesize of the queued packets.
    memory_usage: u64,

    // Configuration (tc names).
    limit: usize,
    quantum: i32,
    memory_limit: u64,
    drop_batch_size: u32,
    params: CodelParams,
    new_flow_priority: bool,
    starvation_prevention: bool,
    /// Per-instance hash perturbation (the kernel's per-boot flow-hash seed).
    salt: u64,

    // Statistics (Linux names).
    cstats: CodelStats,
    drop_overlimit: u64,
    drop_overmemory: u64,
    new_flow_count: u64,
}

/// Configuration of an [`FqCodel`]; `Default` is Linux's (with mtu 1514).
#[derive(Clone, Copy, Debug)]
pub struct FqCodelConfig {
    pub limit: usize,
    pub flows: u32,
    pub quantum: u32,
    pub memory_limit: u64,
    pub drop_batch_size: u32,
    pub codel: CodelParams,
    pub new_flow_priority: bool,
    pub starvation_prevention: bool,
    pub salt: u64,
}

impl Default for FqCodelConfig {
    fn default() -> Self {
        FqCodelConfig {
            limit: 10240,
            flows: 1024,
            quantum: 1514,
            memory_limit: 32 << 20,
            drop_batch_size: 64,
            codel: CodelParams {
                ecn: true,
                ..CodelParams::linux_default(1514)
            },
            new_flow_priority: true,
            starvation_prevention: true,
            salt: 0,
        }
    }
}

impl FqCodel {
    pub fn new(cfg: FqCodelConfig) -> FqCodel {
        let n = cfg.flows as usize;
        FqCodel {
            flows: vec![
                Flow {
                    head: NIL,
                    tail: NIL,
                    cvars: CodelVars::default(),
                };
                n
            ],
            backlogs: vec![0; n],
            slab: Slab::new(),
            drr: DrrLists::new(n),
            qlen: 0,
            backlog_bytes: 0,
            memory_usage: 0,
            limit: cfg.limit,
            quantum: cfg.quantum as i32,
            memory_limit: cfg.memory_limit,
            drop_batch_size: cfg.drop_batch_size.max(1),
            params: cfg.codel,
            new_flow_priority: cfg.new_flow_priority,
            starvation_prevention: cfg.starvation_prevention,
            salt: cfg.salt,
            cstats: CodelStats::default(),
            drop_overlimit: 0,
            drop_overmemory: 0,
            new_flow_count: 0,
        }
    }

    /// The queue a packet goes to: the salted flow hash scaled to `flows` by
    /// multiply-shift (`reciprocal_scale`), as Linux does with `skb_get_hash`.
    #[inline]
    pub fn flow_index(&self, pkt: &Packet) -> usize {
        let h = (splitmix64_mix(self.salt ^ pkt.hash as u64) >> 32) as u32;
        ((h as u64 * self.flows.len() as u64) >> 32) as usize
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
    pub fn flows(&self) -> usize {
        self.flows.len()
    }
    pub fn quantum(&self) -> u32 {
        self.quantum as u32
    }
    pub fn memory_limit(&self) -> u64 {
        self.memory_limit
    }
    pub fn drop_batch_size(&self) -> u32 {
        self.drop_batch_size
    }
    pub fn codel_params(&self) -> &CodelParams {
        &self.params
    }
    pub fn codel_stats(&self) -> &CodelStats {
        &self.cstats
    }
    pub fn memory_usage(&self) -> u64 {
        self.memory_usage
    }
    pub fn new_flows_len(&self) -> usize {
        self.drr.len(NEW)
    }
    pub fn old_flows_len(&self) -> usize {
        self.drr.len(OLD)
    }
    /// Overflow drops (`drop_overlimit`) and those while over the memory limit.
    pub fn drop_overlimit(&self) -> u64 {
        self.drop_overlimit
    }
    pub fn drop_overmemory(&self) -> u64 {
        self.drop_overmemory
    }
    pub fn new_flow_count(&self) -> u64 {
        self.new_flow_count
    }
    /// A queue's DRR deficit and CoDel state (for tests and probes).
    pub fn flow_state(&self, idx: usize) -> (i32, CodelVars) {
        (self.drr.deficit(idx), self.flows[idx].cvars)
    }

    /// `fq_codel_drop`: finds the flow with the largest byte backlog (first in index order
    /// on ties) and drops packets from its head until `drop_batch_size` packets are gone or
    /// at least half its backlog; tells CoDel by adding the count to that flow's `count`.
    /// Returns the victim flow and the number of packets dropped.
    fn drop_fattest(&mut self, arrival_idx: usize, drops: &mut Drops) -> (usize, u32) {
        // Linux starts from queue 0; starting from the arrival's (non-empty) queue only
        // differs if every queued packet had length 0, where Linux would crash.
        let idx = fattest(&self.backlogs).unwrap_or(arrival_idx);
        let max_backlog = self.backlogs[idx];
        let threshold = max_backlog >> 1;
        let flow = &mut self.flows[idx];
        let mut len = 0u32;
        let mut mem = 0u64;
        let mut n = 0u32;
        loop {
            let (p, next) = self.slab.release(flow.head);
            flow.head = next;
            len += p.len_bytes;
            mem += p.truesize_bytes as u64;
            drops.push(p, DropReason::FattestFlow);
            n += 1;
            if next == NIL {
                flow.tail = NIL;
                break;
            }
            if n >= self.drop_batch_size || len >= threshold {
                break;
            }
        }
        flow.cvars.count = flow.cvars.count.wrapping_add(n);
        self.backlogs[idx] -= len;
        self.memory_usage -= mem;
        self.backlog_bytes -= len as u64;
        self.qlen -= n as usize;
        (idx, n)
    }
}

/// The first queue (in index order) with the largest byte backlog, `None` if every
/// backlog is 0: Linux `fq_codel_drop`'s scan (`backlogs[i] > maxbacklog`).
///
/// In two steps, because with thousands of active flows the scan of all 1,024 queues on
/// every overflow was ~2.4 % of the instructions of the 10,000-flow bench (issue 19,
/// session 10): the maximum of each block of 64 backlogs (a loop the compiler vectorises),
/// keeping the first block whose maximum beats every earlier block's, then the first
/// backlog equal to that maximum from that block on. Earlier blocks hold only smaller
/// backlogs, so it is the first largest of all, as the one-pass scan found.
#[inline]
fn fattest(backlogs: &[u32]) -> Option<usize> {
    const BLOCK: usize = 64;
    let (mut max, mut block) = (0u32, 0usize);
    for (k, b) in backlogs.chunks(BLOCK).enumerate() {
        let m = b.iter().fold(0u32, |a, &x| a.max(x));
        if m > max {
            max = m;
            block = k;
        }
    }
    if max == 0 {
        return None;
    }
    let from = block * BLOCK;
    backlogs[from..]
        .iter()
        .position(|&x| x == max)
        .map(|i| from + i)
}

impl Qdisc for FqCodel {
    fn enqueue(&mut self, pkt: Packet, _now: Time, drops: &mut Drops) -> Verdict {
        let idx = self.flow_index(&pkt);
        let len = pkt.len_bytes;
        let truesize = pkt.truesize_bytes as u64;

        // Append to the flow's queue (the link already stamped enqueued_at).
        let node = self.slab.alloc(pkt);
        let flow = &mut self.flows[idx];
        if flow.tail == NIL {
            flow.head = node;
        } else {
            self.slab.nodes[flow.tail as usize].next = node;
        }
        flow.tail = node;
        self.backlogs[idx] += len;
        self.backlog_bytes += len as u64;

        // A flow on no list becomes active with a full quantum (WP ablation: at the tail
        // of the one round-robin list).
        let list = if self.new_flow_priority { NEW } else { OLD };
        if self.drr.activate(idx, self.quantum, list) {
            self.new_flow_count += 1;
        }

        self.memory_usage += truesize;
        self.qlen += 1;
        let memory_limited = self.memory_usage > self.memory_limit;
        if self.qlen <= self.limit && !memory_limited {
            return Verdict::Queued;
        }

        // Overflow: batch head drop from the fattest flow (not the arrival, normally).
        let (victim, n) = self.drop_fattest(idx, drops);
        self.drop_overlimit += n as u64;
        if memory_limited {
            self.drop_overmemory += n as u64;
        }
        if victim == idx {
            // The arrival is the flow's tail: it was dropped iff the flow is now empty.
            if self.flows[idx].head == NIL {
                Verdict::Dropped
            } else {
                Verdict::QueuedCongested
            }
        } else {
            Verdict::Queued
        }
    }

    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        // new_flows first, then old_flows (RFC 8290 §4.2).
        while let Some(idx) = self.drr.next_flow(self.quantum) {
            let Flow { head, tail, cvars } = &mut self.flows[idx];
            let mut q = FlowQueue {
                head,
                tail,
                slab: &mut self.slab,
                flow_backlog: &mut self.backlogs[idx],
                qlen: &mut self.qlen,
                backlog_bytes: &mut self.backlog_bytes,
                memory_usage: &mut self.memory_usage,
            };
            let got = codel_dequeue(&mut q, &self.params, cvars, &mut self.cstats, now, drops);

            match got {
                Some(p) => {
                    // Only delivered bytes are charged; CoDel's drops are not.
                    *self.drr.deficit_mut(idx) -= p.len_bytes as i32;
                    return Dequeue::Packet(p);
                }
                // Empty: an emptied new flow waits a full old round before it can be "new"
                // again (anti-starvation), unless the WSPM ablation is on.
                None => self.drr.retire_empty(idx, self.starvation_prevention),
            }
        }
        Dequeue::Empty
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
        self.cstats.marked_packets
    }
    fn observe(&mut self, _now: Time, emit: &mut dyn FnMut(&str, f64)) {
        emit("new_flows", self.drr.len(NEW) as f64);
        emit("old_flows", self.drr.len(OLD) as f64);
        emit("memory_usage_bytes", self.memory_usage as f64);
    }
}

/// Typed spec of `fq_codel`: every `FqCodelConfig` field but the per-instance hash salt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FqCodelSpec {
    /// `limit`, packets (10240).
    pub limit: u64,
    /// `flows` (1024).
    pub flows: u32,
    /// `quantum`, bytes (psched_mtu), already raised to Linux's 256-byte minimum.
    pub quantum: u32,
    /// `memory_limit`, bytes (32 MiB), capped like Linux.
    pub memory_limit: u64,
    /// `drop_batch` (64), at least 1.
    pub drop_batch_size: u32,
    pub codel: CodelParams,
    /// Ablation switches (not tc options); both true = Linux.
    pub new_flow_priority: bool,
    pub starvation_prevention: bool,
}

impl Discipline for FqCodelSpec {
    const KIND: &'static str = "fq_codel";
    const SUMMARY: &'static str =
        "flow queueing with per-flow CoDel (RFC 8290, Linux sch_fq_codel)";
    type Qdisc = Box<FqCodel>;

    /// `fq_codel [limit PACKETS] [flows N] [quantum BYTES] [target TIME] [interval TIME]
    /// [ecn BOOL] [ce_threshold TIME] [memory_limit BYTES] [drop_batch N]` plus the ablation
    /// switches `new_flow_priority` and `starvation_prevention` (both true = Linux).
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let limit = p.u64("limit", 10240, 1, u32::MAX as u64)?;
        let flows = p.u32("flows", 1024, 1, MAX_FLOWS)?;
        let quantum = p.bytes("quantum", ctx.mtu_bytes as u64)?;
        if quantum > MAX_QUANTUM {
            return Err(p.err(
                "quantum",
                format!("{quantum} B is above Linux's maximum of {MAX_QUANTUM} B"),
            ));
        }
        // Linux silently raises smaller values to 256 bytes.
        let quantum = quantum.max(MIN_QUANTUM) as u32;
        let codel = codel_params(p, ctx, true)?;
        let memory_limit = p.bytes("memory_limit", 32 << 20)?;
        if memory_limit == 0 {
            return Err(p.err("memory_limit", "memory_limit must be positive"));
        }
        let memory_limit = memory_limit.min(MAX_MEMORY_LIMIT);
        let drop_batch_size = if p.has("drop_batch_size") {
            if p.has("drop_batch") {
                return Err(p.err(
                    "drop_batch_size",
                    "give either drop_batch or its alias drop_batch_size, not both",
                ));
            }
            p.u32("drop_batch_size", 64, 0, u32::MAX)?
        } else {
            p.u32("drop_batch", 64, 0, u32::MAX)?
        };
        let new_flow_priority = p.bool("new_flow_priority", true)?;
        let starvation_prevention = p.bool("starvation_prevention", true)?;
        Ok(FqCodelSpec {
            limit,
            flows,
            quantum,
            memory_limit,
            // Linux: max(1, drop_batch_size).
            drop_batch_size: drop_batch_size.max(1),
            codel,
            new_flow_priority,
            starvation_prevention,
        })
    }

    fn build(&self, ctx: &BuildCtx) -> Box<FqCodel> {
        Box::new(FqCodel::new(FqCodelConfig {
            limit: self.limit as usize,
            flows: self.flows,
            quantum: self.quantum,
            memory_limit: self.memory_limit,
            drop_batch_size: self.drop_batch_size,
            codel: self.codel,
            new_flow_priority: self.new_flow_priority,
            starvation_prevention: self.starvation_prevention,
            salt: ctx.hash_salt(),
        }))
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS);

    /// `limit N flows N quantum N target T [ce_threshold T] interval T memory_limit SIZE
    /// ecn|noecn drop_batch N` (`tc qdisc show` order). The two ablation switches have no
    /// tc option: switched off, this fq_codel is sojourn-only.
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        for (on, name) in [
            (self.new_flow_priority, "new_flow_priority"),
            (self.starvation_prevention, "starvation_prevention"),
        ] {
            if !on {
                return Err(NotLinux::new(
                    "fq_codel",
                    format!(
                        "{name} = false is a sojourn ablation switch with no tc option; \
                         run it with `sojourn emulate`"
                    ),
                ));
            }
        }
        let mut a = vec![
            "limit".into(),
            self.limit.to_string(),
            "flows".into(),
            self.flows.to_string(),
            "quantum".into(),
            self.quantum.to_string(),
        ];
        super::codel::codel_tc_args("fq_codel", &self.codel, &mut a)?;
        a.extend(["memory_limit".into(), tc_size(self.memory_limit)]);
        // The kernel's default is ecn on, so off must be said (`tc qdisc show` just omits it).
        a.push(if self.codel.ecn { "ecn" } else { "noecn" }.into());
        a.extend(["drop_batch".into(), self.drop_batch_size.to_string()]);
        Ok(a)
    }
}

/// tc keywords of `fq_codel`.
pub const TC_KEYS: &[TcKey] = &[
    TcKey::Int("limit", "limit"),
    TcKey::Int("flows", "flows"),
    TcKey::Int("quantum", "quantum"),
    TcKey::Time("target", "target"),
    TcKey::Time("interval", "interval"),
    TcKey::Time("ce_threshold", "ce_threshold"),
    TcKey::Size("memory_limit", "memory_limit"),
    TcKey::Int("drop_batch", "drop_batch"),
    TcKey::Flag("ecn", "ecn", true),
    TcKey::Flag("noecn", "ecn", false),
];

/// `fq_codel` from its parameters (see [`FqCodelSpec::parse`]).
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<FqCodel> {
    Ok(*FqCodelSpec::parse(p, ctx)?.build(ctx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::truesize_for;
    use crate::params::{Table, Value};
    use crate::qdisc::testkit::{check_conservation, pkt, Bound};
    use crate::time::{tx_time, Duration};

    fn build_with(t: Vec<(&str, Value)>, ctx: &BuildCtx) -> ConfResult<FqCodel> {
        crate::qdisc::testkit::build_from(from_params, t, ctx)
    }
    fn build(t: Vec<(&str, Value)>) -> ConfResult<FqCodel> {
        build_with(t, &BuildCtx::default())
    }

    /// `n` flow ids whose packets land in distinct queues (these tests are about the
    /// scheduler, not about hash collisions).
    fn distinct_flows(q: &FqCodel, n: usize) -> Vec<u32> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for f in 1.. {
            if seen.insert(q.flow_index(&pkt(0, f, 100))) {
                out.push(f);
                if out.len() == n {
                    break;
                }
            }
        }
        out
    }

    fn p_at(uid: u64, flow: u32, len: u32, at: Time) -> Packet {
        let mut p = pkt(uid, flow, len);
        p.enqueued_at = at;
        p
    }

    #[test]
    fn defaults_and_bounds_are_linux() {
        let q = build(vec![]).unwrap();
        assert_eq!(q.limit(), 10240);
        assert_eq!(q.flows(), 1024);
        assert_eq!(q.quantum(), 1514);
        assert_eq!(q.memory_limit(), 32 * 1024 * 1024);
        assert_eq!(q.drop_batch_size(), 64);
        let c = q.codel_params();
        assert_eq!(c.target, Duration::from_ms(5));
        assert_eq!(c.interval, Duration::from_ms(100));
        assert!(c.ecn, "fq_codel has ecn on by default");
        assert_eq!(c.ce_threshold, None);
        assert_eq!(c.mtu_bytes, 1514);
        // Linux raises a small quantum to 256 and rejects > 2^20; flows 1..=65536.
        let q = build(vec![("quantum", Value::Int(100))]).unwrap();
        assert_eq!(q.quantum(), 256);
        let e = build(vec![("quantum", Value::Int(2_000_000))])
            .err()
            .unwrap();
        assert_eq!(e.path, "q.quantum");
        assert_eq!(
            build(vec![("flows", Value::Int(0))]).err().unwrap().path,
            "q.flows"
        );
        assert_eq!(
            build(vec![("flows", Value::Int(65537))])
                .err()
                .unwrap()
                .path,
            "q.flows"
        );
        let q = build(vec![
            ("drop_batch_size", Value::Int(0)),
            ("memory_limit", Value::Str("8GiB".into())),
            ("ecn", Value::Bool(false)),
            ("ce_threshold", Value::Str("2ms".into())),
        ])
        .unwrap();
        assert_eq!(q.drop_batch_size(), 1, "max(1, drop_batch_size)");
        assert_eq!(q.memory_limit(), 1 << 31, "capped at 2^31");
        assert!(!q.codel_params().ecn);
        assert_eq!(q.codel_params().ce_threshold, Some(Duration::from_ms(2)));
        assert_eq!(
            build(vec![("drop_batch", Value::Int(8))])
                .unwrap()
                .drop_batch_size(),
            8
        );
        assert!(build(vec![
            ("drop_batch", Value::Int(8)),
            ("drop_batch_size", Value::Int(8))
        ])
        .is_err());
        assert_eq!(
            build(vec![("limt", Value::Int(8))]).err().unwrap().path,
            "q.limt"
        );
    }

    #[test]
    fn registry_builds_both_kinds() {
        use crate::qdisc::{build, AnyQdisc};
        let q = build(&Value::Str("fq_codel".into()), "q", &BuildCtx::default()).unwrap();
        assert!(matches!(q, AnyQdisc::FqCodel(ref f) if f.limit() == 10240));
        let q = build(&Value::Str("codel".into()), "q", &BuildCtx::default()).unwrap();
        assert!(matches!(q, AnyQdisc::Codel(ref c) if c.limit() == 1000));
        let t = Table(vec![
            ("kind".into(), Value::Str("fq_codel".into())),
            ("new_flow_priority".into(), Value::Bool(false)),
            ("starvation_prevention".into(), Value::Bool(false)),
        ]);
        assert!(build(&Value::Table(t), "q", &BuildCtx::default()).is_ok());
    }

    fn v6_packet(src: &str, dst: &str, sport: u16, dport: u16) -> Packet {
        use crate::packet::{proto, Addr, FlowKey};
        let key = FlowKey {
            src_addr: Addr::from(src.parse::<std::net::IpAddr>().unwrap()),
            dst_addr: Addr::from(dst.parse::<std::net::IpAddr>().unwrap()),
            src_port: sport,
            dst_port: dport,
            proto: proto::TCP,
        };
        let mut p = pkt(0, 1, 100);
        p.key = key;
        p.hash = key.hash(0x5eed); // what an engine stamps (skb_get_hash)
        p
    }

    #[test]
    fn ipv6_connections_keep_one_queue_both_ways_and_flows_spread() {
        let q = build_with(vec![], &BuildCtx::default()).unwrap();
        // skb_get_hash is symmetric (flow dissector): data and ACKs share a queue.
        let fwd = v6_packet("2001:db8::10", "2001:db8:1::20", 40000, 443);
        let rev = v6_packet("2001:db8:1::20", "2001:db8::10", 443, 40000);
        assert_eq!(q.flow_index(&fwd), q.flow_index(&rev));
        // 64 clients that differ only in the top 32 bits of their addresses (same low 96
        // bits, same ports): 64 flows into 1024 queues. Uniform hashing leaves on average
        // 64·63/2/1024 ≈ 2 colliding pairs; a hash of the low 32 bits would put all 64 in one.
        let used: std::collections::HashSet<usize> = (0..64u32)
            .map(|i| {
                let src = format!("2001:{:x}::10", 0xdb8 + i);
                q.flow_index(&v6_packet(&src, "2001:db8:1::20", 40000, 443))
            })
            .collect();
        assert!(used.len() >= 58, "{} queues for 64 flows", used.len());
    }

    #[test]
    fn hashing_is_salted_per_instance() {
        let a = build_with(vec![], &BuildCtx::default()).unwrap();
        let b = build_with(vec![], &BuildCtx::default().child(3)).unwrap();
        let same = (0..400)
            .filter(|&f| a.flow_index(&pkt(0, f, 100)) == b.flow_index(&pkt(0, f, 100)))
            .count();
        // independent salts agree on ~1/1024 of the flows
        assert!(
            same < 10,
            "{same} of 400 flows share a queue in both instances"
        );
        // and the mapping spreads flows over the queues
        let used: std::collections::HashSet<usize> =
            (0..400).map(|f| a.flow_index(&pkt(0, f, 100))).collect();
        assert!(used.len() > 300, "{}", used.len());
    }

    /// A link at 10 Mbit/s drains the qdisc; 4 bulk flows are kept backlogged and a sparse
    /// flow sends a 200-B packet every 100 ms. Returns the sparse packets' sojourn times.
    fn sparse_beside_bulk(new_flow_priority: bool) -> Vec<Duration> {
        let (sojourns, sparse_drops) =
            sparse_every(new_flow_priority, Duration::from_ms(100), 10_000_000);
        assert_eq!(sparse_drops, 0, "only bulk packets are dropped");
        sojourns
    }

    /// As [`sparse_beside_bulk`] with a sparse packet every `gap` and a link of `rate`
    /// bit/s; returns the sparse packets' sojourn times and how many were dropped.
    fn sparse_every(new_flow_priority: bool, gap: Duration, rate: u64) -> (Vec<Duration>, usize) {
        let mut q = FqCodel::new(FqCodelConfig {
            new_flow_priority,
            ..Default::default()
        });
        let flows = distinct_flows(&q, 5);
        let (bulk, sparse) = (&flows[..4], flows[4]);
        let mut d = Drops::new();
        let mut now = Time::ZERO;
        let mut next_sparse = Time::from_ns(50_000_000);
        let mut uid = 0;
        let mut inside = [0i64; 4];
        let mut sojourns = Vec::new();
        let mut sparse_drops = 0;
        let mut bound = Bound::new(100_000, "3 s of sparse beside bulk");
        while now < Time::from_ns(3_000_000_000) {
            bound.tick();
            while next_sparse <= now {
                q.enqueue(p_at(uid, sparse, 200, next_sparse), now, &mut d);
                uid += 1;
                next_sparse += gap;
            }
            for (i, &f) in bulk.iter().enumerate() {
                while inside[i] < 20 {
                    q.enqueue(p_at(uid, f, 1514, now), now, &mut d);
                    uid += 1;
                    inside[i] += 1;
                }
            }
            let p = q.dequeue(now, &mut d).packet().expect("backlogged");
            for x in d.drain() {
                match bulk.iter().position(|&f| f == x.pkt.conversation()) {
                    Some(i) => inside[i] -= 1,
                    None => sparse_drops += 1,
                }
            }
            if p.conversation() == sparse {
                sojourns.push(now - p.enqueued_at);
            } else {
                inside[bulk.iter().position(|&f| f == p.conversation()).unwrap()] -= 1;
            }
            now += tx_time(p.len_bytes as u64, rate);
        }
        assert!(
            q.codel_stats().drop_count > 0,
            "bulk flows were CoDel-controlled"
        );
        (sojourns, sparse_drops)
    }

    /// RFC 8289 §5.4 (`dodequeue`: an empty queue resets `first_above_time`; Linux since
    /// 2026, commit 815980fe6dbb): a sparse flow whose every packet waits its round (WP)
    /// above target but leaves its queue empty is never "above target for an interval",
    /// so CoDel never drops it. With the stale timestamp (Linux before the fix) every
    /// second sparse packet, arriving more than an interval after the first, was dropped.
    #[test]
    fn sparse_flow_above_target_is_not_dropped_after_idle() {
        let target = Duration::from_ms(5);
        // 2 Mbit/s (seed 001): one 1514-B packet per bulk flow ahead is 6 ms > target.
        let (s, sparse_drops) = sparse_every(false, Duration::from_ms(250), 2_000_000);
        assert!(s.len() >= 10, "{} sparse packets delivered", s.len());
        assert!(
            s.iter().all(|&x| x >= target),
            "each sparse packet waited above target (the premise)"
        );
        assert_eq!(sparse_drops, 0, "no sparse packet dropped");
    }

    #[test]
    fn sparse_flow_jumps_ahead_of_bulk_flows() {
        let slot = tx_time(1514, 10_000_000);
        let s = sparse_beside_bulk(true);
        assert!(s.len() >= 25);
        let max = *s.iter().max().unwrap();
        // RFC 8290 §1.3: a new flow is served before the old ones: it waits at most for
        // the packet on the wire — far below one quantum per bulk flow.
        assert!(max <= slot, "sparse sojourn {max} > one MTU slot {slot}");
    }

    #[test]
    fn wp_switch_sparse_flow_waits_its_round() {
        let slot = tx_time(1514, 10_000_000);
        let s = sparse_beside_bulk(false);
        let max = *s.iter().max().unwrap();
        let min = *s.iter().min().unwrap();
        // One round-robin list: the sparse flow waits behind the bulk flows ahead of it
        // (3 full packets in steady state), bounded by one quantum per bulk flow.
        assert!(
            min > slot * 2,
            "WP sparse flow must not jump ahead: min {min}"
        );
        assert!(max <= slot * 5, "at most ~one quantum per bulk flow: {max}");
    }

    fn jain(x: &[f64]) -> f64 {
        let s: f64 = x.iter().sum();
        let s2: f64 = x.iter().map(|v| v * v).sum();
        s * s / (x.len() as f64 * s2)
    }

    #[test]
    fn drr_shares_bytes_not_packets() {
        let mut q = FqCodel::new(FqCodelConfig::default());
        let flows = distinct_flows(&q, 4);
        let sizes = [1514u32, 1000, 576, 100];
        let mut d = Drops::new();
        let mut inside = [0u32; 4];
        let mut bytes = [0f64; 4];
        let mut pkts = [0f64; 4];
        let mut uid = 0;
        for _ in 0..20_000 {
            for i in 0..4 {
                while inside[i] < 10 {
                    q.enqueue(
                        p_at(uid, flows[i], sizes[i], Time::ZERO),
                        Time::ZERO,
                        &mut d,
                    );
                    uid += 1;
                    inside[i] += 1;
                }
            }
            let p = q.dequeue(Time::ZERO, &mut d).packet().unwrap();
            let i = flows.iter().position(|&f| f == p.conversation()).unwrap();
            inside[i] -= 1;
            bytes[i] += p.len_bytes as f64;
            pkts[i] += 1.0;
        }
        assert!(d.is_empty());
        assert!(jain(&bytes) >= 0.99, "byte shares {bytes:?}");
        assert!(jain(&pkts) < 0.7, "packet counts should differ: {pkts:?}");
    }

    /// DRR with a deficit that reaches exactly zero (fq_codel_dequeue: `if (flow->deficit
    /// <= 0)` rotate): with quantum 1000 and 500-B packets each flow sends exactly two
    /// packets per turn, A A B B A A B B, never a third on a zero deficit.
    #[test]
    fn a_zero_deficit_ends_the_flows_turn() {
        let mut q = FqCodel::new(FqCodelConfig {
            quantum: 1000,
            ..Default::default()
        });
        let f = distinct_flows(&q, 2);
        let mut d = Drops::new();
        for i in 0..4 {
            for (k, &fl) in f.iter().enumerate() {
                q.enqueue(
                    p_at(10 * k as u64 + i, fl, 500, Time::ZERO),
                    Time::ZERO,
                    &mut d,
                );
            }
        }
        let order: Vec<usize> = (0..8)
            .map(|_| {
                let p = q.dequeue(Time::ZERO, &mut d).packet().unwrap();
                f.iter().position(|&x| x == p.conversation()).unwrap()
            })
            .collect();
        assert_eq!(order, vec![0, 0, 1, 1, 0, 0, 1, 1]);
    }

    #[test]
    fn overflow_drops_half_the_fattest_flow_from_its_head() {
        let mut q = FqCodel::new(FqCodelConfig {
            limit: 20,
            ..Default::default()
        });
        let f = distinct_flows(&q, 2);
        let (fat, sparse) = (f[0], f[1]);
        let mut d = Drops::new();
        for i in 0..20 {
            let v = q.enqueue(p_at(i, fat, 1000, Time::ZERO), Time::ZERO, &mut d);
            assert_eq!(v, Verdict::Queued);
        }
        let v = q.enqueue(p_at(100, sparse, 100, Time::ZERO), Time::ZERO, &mut d);
        assert_eq!(v, Verdict::Queued, "the arriving sparse packet is kept");
        let dropped: Vec<u64> = d.as_slice().iter().map(|x| x.pkt.uid).collect();
        // threshold = 20000/2 bytes: ten 1000-B packets from the head
        assert_eq!(dropped, (0..10).collect::<Vec<_>>());
        assert!(d.drain().all(|x| x.reason == DropReason::FattestFlow));
        assert_eq!(q.len_packets(), 11);
        assert_eq!(q.len_bytes(), 10 * 1000 + 100);
        assert_eq!(q.drop_overlimit(), 10);
        let fat_idx = q.flow_index(&pkt(0, fat, 1));
        assert_eq!(q.flow_state(fat_idx).1.count, 10, "CoDel count += dropped");
        // The fat flow entered new_flows first (fq_codel_enqueue appends a flow to
        // new_flows on its first packet) and the drop does not move it: its oldest
        // survivor leaves first, then the sparse packet.
        let first = q.dequeue(Time::ZERO, &mut d).packet().unwrap();
        assert_eq!(first.uid, 10);
    }

    /// Linux `fq_codel_drop` scans the queues in index order and keeps the first largest
    /// (`backlogs[i] > maxbacklog`): of two flows with the same backlog, the one in the
    /// lower-numbered queue loses half its bytes (5 of its 10 packets).
    #[test]
    fn overflow_tie_drops_from_the_lower_numbered_queue() {
        let mut q = FqCodel::new(FqCodelConfig {
            limit: 20,
            ..Default::default()
        });
        let f = distinct_flows(&q, 3);
        let mut pair = [f[0], f[1]];
        pair.sort_by_key(|&x| q.flow_index(&pkt(0, x, 1)));
        let mut d = Drops::new();
        // The higher-numbered queue fills first, so arrival order cannot decide the tie.
        for (k, &flow) in pair.iter().rev().enumerate() {
            for i in 0..10 {
                let uid = 100 * k as u64 + i;
                q.enqueue(p_at(uid, flow, 1000, Time::ZERO), Time::ZERO, &mut d);
            }
        }
        assert!(d.is_empty());
        q.enqueue(p_at(1000, f[2], 100, Time::ZERO), Time::ZERO, &mut d);
        let victims: Vec<u32> = d.as_slice().iter().map(|x| x.pkt.conversation()).collect();
        assert_eq!(victims, vec![pair[0]; 5]);
        // Each of the three flows entered new_flows once (tc -s "new_flow_count 3").
        assert_eq!(q.new_flow_count(), 3);
    }

    /// The fattest-queue search is Linux's scan (`if (backlogs[i] > maxbacklog)` over the
    /// queues in index order): the first of the largest, none when every backlog is 0;
    /// literal cases across the 64-queue blocks, then random backlogs (many ties) against
    /// that one-pass scan written out here.
    #[test]
    fn fattest_is_the_first_largest_backlog() {
        assert_eq!(fattest(&[]), None);
        assert_eq!(fattest(&[0; 1024]), None);
        assert_eq!(fattest(&[0, 5, 7, 7, 3]), Some(2));
        let mut b = vec![0u32; 200];
        b[10] = 9;
        b[70] = 12;
        b[130] = 12;
        b[199] = 11;
        assert_eq!(fattest(&b), Some(70));
        b[63] = 12; // same maximum, an earlier block
        assert_eq!(fattest(&b), Some(63));
        b[199] = 13; // the last queue, a partial block
        assert_eq!(fattest(&b), Some(199));
        b[0] = u32::MAX;
        assert_eq!(fattest(&b), Some(0));
        let mut r = crate::rng::Rng::from_seed(5);
        for n in [1usize, 63, 64, 65, 1024, 1000] {
            for _ in 0..200 {
                let top = 1 + r.below(6) as u32;
                let v: Vec<u32> = (0..n).map(|_| r.below(top as u64) as u32).collect();
                let mut scan = None;
                let mut max = 0;
                for (i, &x) in v.iter().enumerate() {
                    if x > max {
                        max = x;
                        scan = Some(i);
                    }
                }
                assert_eq!(fattest(&v), scan, "{v:?}");
            }
        }
    }

    /// fq_codel marks ECT packets instead of dropping them (ecn on by default): ten
    /// 1000-B ECT packets queued at 0; the dequeue at 10 ms starts the above-target
    /// interval, the one at 111 ms enters the dropping state and marks its packet.
    #[test]
    fn ecn_mark_is_reported_in_ecn_marks() {
        let mut q = FqCodel::new(FqCodelConfig::default());
        let mut d = Drops::new();
        for uid in 0..10 {
            let mut p = p_at(uid, 1, 1000, Time::ZERO);
            p.ecn = crate::packet::Ecn::Ect0;
            q.enqueue(p, Time::ZERO, &mut d);
        }
        let a = q
            .dequeue(Time::from_ns(10_000_000), &mut d)
            .packet()
            .unwrap();
        assert_eq!(a.ecn, crate::packet::Ecn::Ect0);
        let b = q
            .dequeue(Time::from_ns(111_000_000), &mut d)
            .packet()
            .unwrap();
        assert_eq!(b.ecn, crate::packet::Ecn::Ce);
        assert!(d.is_empty());
        assert_eq!(q.ecn_marks(), 1);
    }

    #[test]
    fn overflow_batch_is_capped_and_verdicts_follow_the_victim() {
        let mut q = FqCodel::new(FqCodelConfig {
            limit: 20,
            drop_batch_size: 3,
            ..Default::default()
        });
        let f = distinct_flows(&q, 2);
        let mut d = Drops::new();
        for i in 0..20 {
            q.enqueue(p_at(i, f[0], 1000, Time::ZERO), Time::ZERO, &mut d);
        }
        let v = q.enqueue(p_at(20, f[0], 1000, Time::ZERO), Time::ZERO, &mut d);
        assert_eq!(v, Verdict::QueuedCongested, "own flow hit: NET_XMIT_CN");
        assert_eq!(
            d.drain().map(|x| x.pkt.uid).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );

        // The arrival itself is the fattest flow's only packet: it is the one dropped.
        let mut q = FqCodel::new(FqCodelConfig {
            limit: 1,
            ..Default::default()
        });
        q.enqueue(p_at(0, f[0], 100, Time::ZERO), Time::ZERO, &mut d);
        let v = q.enqueue(p_at(1, f[1], 1500, Time::ZERO), Time::ZERO, &mut d);
        assert_eq!(v, Verdict::Dropped);
        assert_eq!(d.drain().map(|x| x.pkt.uid).collect::<Vec<_>>(), vec![1]);
        assert_eq!(q.len_packets(), 1);
    }

    #[test]
    fn memory_limit_counts_truesize() {
        let ts = truesize_for(1514) as u64;
        let mut q = FqCodel::new(FqCodelConfig {
            memory_limit: 3 * ts,
            ..Default::default()
        });
        let f = distinct_flows(&q, 1)[0];
        let mut d = Drops::new();
        for i in 0..3 {
            assert_eq!(
                q.enqueue(p_at(i, f, 1514, Time::ZERO), Time::ZERO, &mut d),
                Verdict::Queued
            );
        }
        assert_eq!(q.memory_usage(), 3 * ts);
        assert_eq!(
            q.enqueue(p_at(3, f, 1514, Time::ZERO), Time::ZERO, &mut d),
            Verdict::QueuedCongested
        );
        // half of 4·1514 B = 2 packets from the head
        assert_eq!(d.drain().map(|x| x.pkt.uid).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(q.drop_overmemory(), 2);
        assert_eq!(q.memory_usage(), 2 * ts);
    }

    /// B is backlogged on old_flows with deficit left; S sends one packet, empties, then
    /// sends another. Returns (the packet after S's second arrival, new_flows length then).
    fn emptied_new_flow(starvation_prevention: bool) -> (u64, usize, usize) {
        let mut q = FqCodel::new(FqCodelConfig {
            starvation_prevention,
            ..Default::default()
        });
        let f = distinct_flows(&q, 2);
        let (b, s) = (f[0], f[1]);
        let mut d = Drops::new();
        let t = Time::ZERO;
        for i in 0..100 {
            q.enqueue(p_at(i, b, 100, t), t, &mut d);
        }
        // 16 packets from new_flows (deficit 1514 → −86), the 17th after moving to old.
        for _ in 0..17 {
            assert_eq!(q.dequeue(t, &mut d).packet().unwrap().conversation(), b);
        }
        assert_eq!((q.new_flows_len(), q.old_flows_len()), (0, 1));
        q.enqueue(p_at(1000, s, 200, t), t, &mut d);
        assert_eq!(q.new_flows_len(), 1);
        assert_eq!(q.dequeue(t, &mut d).packet().unwrap().uid, 1000);
        // S is found empty at the head of new_flows during this call; B is served.
        assert_eq!(q.dequeue(t, &mut d).packet().unwrap().conversation(), b);
        let old_len = q.old_flows_len();
        q.enqueue(p_at(1001, s, 200, t), t, &mut d);
        let new_len = q.new_flows_len();
        (q.dequeue(t, &mut d).packet().unwrap().uid, new_len, old_len)
    }

    #[test]
    fn emptied_new_flow_must_wait_an_old_round() {
        let (next, new_len, old_len) = emptied_new_flow(true);
        assert_eq!(old_len, 2, "S moved to the tail of old_flows");
        assert_eq!(new_len, 0, "S is still listed, so it does not become new");
        assert_ne!(next, 1001, "S's next packet waits behind B");
    }

    #[test]
    fn wspm_switch_emptied_new_flow_reenters_new_flows() {
        let (next, new_len, old_len) = emptied_new_flow(false);
        assert_eq!(old_len, 1, "S was removed, not moved to old_flows");
        assert_eq!(new_len, 1, "S becomes new again at once");
        assert_eq!(next, 1001, "and is served immediately");
    }

    #[test]
    fn emptied_new_flow_is_removed_when_old_flows_is_empty() {
        let mut q = FqCodel::new(FqCodelConfig::default());
        let mut d = Drops::new();
        q.enqueue(p_at(0, 7, 200, Time::ZERO), Time::ZERO, &mut d);
        assert!(q.dequeue(Time::ZERO, &mut d).packet().is_some());
        assert!(matches!(q.dequeue(Time::ZERO, &mut d), Dequeue::Empty));
        assert_eq!((q.new_flows_len(), q.old_flows_len()), (0, 0));
        // Two sparse flows: S empties while old_flows is empty, so it is removed (not
        // parked on old_flows as ns-3 does) and its next packet makes it new again.
        let f = distinct_flows(&q, 2);
        let (s, t) = (f[0], f[1]);
        q.enqueue(p_at(1, s, 200, Time::ZERO), Time::ZERO, &mut d);
        q.enqueue(p_at(2, t, 200, Time::ZERO), Time::ZERO, &mut d);
        assert_eq!(q.dequeue(Time::ZERO, &mut d).packet().unwrap().uid, 1);
        assert_eq!(q.dequeue(Time::ZERO, &mut d).packet().unwrap().uid, 2);
        q.enqueue(p_at(3, s, 200, Time::ZERO), Time::ZERO, &mut d);
        assert_eq!((q.new_flows_len(), q.old_flows_len()), (2, 0));
    }

    /// Flow A holds 3 old packets, flow B 10. CoDel on A judges the qdisc-wide backlog
    /// (not A's own, which would be ≤ 1 MTU after removing a2 and exempt it), and the
    /// packet it drops is not charged to A's deficit.
    #[test]
    fn codel_uses_whole_backlog_and_drops_are_not_charged() {
        let mut q = FqCodel::new(FqCodelConfig::default());
        let f = distinct_flows(&q, 2);
        let (a, b) = (f[0], f[1]);
        let mut d = Drops::new();
        for i in 0..3 {
            q.enqueue(p_at(i, a, 1000, Time::ZERO), Time::ZERO, &mut d);
        }
        for i in 10..20 {
            q.enqueue(p_at(i, b, 1000, Time::ZERO), Time::ZERO, &mut d);
        }
        let ia = q.flow_index(&pkt(0, a, 1));
        let a1 = q
            .dequeue(Time::from_ns(10_000_000), &mut d)
            .packet()
            .unwrap();
        assert_eq!(a1.uid, 0);
        assert_eq!(q.flow_state(ia).0, 1514 - 1000);
        let a3 = q
            .dequeue(Time::from_ns(200_000_000), &mut d)
            .packet()
            .unwrap();
        assert_eq!(a3.uid, 2);
        let dropped: Vec<(u64, DropReason)> = d.drain().map(|x| (x.pkt.uid, x.reason)).collect();
        assert_eq!(dropped, vec![(1, DropReason::Aqm)]);
        assert_eq!(
            q.flow_state(ia).0,
            514 - 1000,
            "only delivered bytes are charged"
        );
        assert!(q.flow_state(ia).1.dropping);
    }

    #[test]
    fn observe_reports_list_lengths() {
        let mut q = FqCodel::new(FqCodelConfig::default());
        let f = distinct_flows(&q, 3);
        let mut d = Drops::new();
        for (i, &fl) in f.iter().enumerate() {
            q.enqueue(p_at(i as u64, fl, 100, Time::ZERO), Time::ZERO, &mut d);
        }
        let mut seen = Vec::new();
        q.observe(Time::ZERO, &mut |k, v| seen.push((k.to_string(), v)));
        assert!(seen.contains(&("new_flows".to_string(), 3.0)));
        assert!(seen.contains(&("old_flows".to_string(), 0.0)));
    }

    #[test]
    fn fq_codel_conservation_property() {
        let variants = [(true, true), (false, true), (true, false), (false, false)];
        for (k, (nfp, sp)) in variants.into_iter().enumerate() {
            for seed in 0..6u64 {
                let limit = 30 + 7 * seed as usize;
                let mut q = FqCodel::new(FqCodelConfig {
                    limit,
                    flows: [1, 16, 1024][seed as usize % 3],
                    quantum: 300 + 400 * seed as u32,
                    memory_limit: 40_000 + 20_000 * seed,
                    drop_batch_size: 1 + 3 * seed as u32,
                    codel: CodelParams {
                        target: Duration::from_us(500 + 700 * seed),
                        interval: Duration::from_ms(3 + seed),
                        mtu_bytes: 1514,
                        ecn: seed % 2 == 0,
                        ce_threshold: (seed % 3 == 1).then(|| Duration::from_ms(1)),
                    },
                    new_flow_priority: nfp,
                    starvation_prevention: sp,
                    salt: seed,
                });
                check_conservation(&mut q, seed * 10 + k as u64, 6_000, |q| {
                    q.len_packets() <= limit
                });
            }
        }
    }
}
