//! FQ-PIE as Linux `sch_fq_pie` (≥ 5.6) runs it: packets are hashed into `flows` queues
//! served by fq_codel's deficit round robin (new flows before old ones), and every queue
//! runs its own PIE controller (`PieVars`, see [`super::pie`]) on its own backlog.
//!
//! Differences from fq_codel worth knowing: drops happen only at enqueue (PIE's
//! `drop_early` with the flow's state and the flow's backlog, so a flow with fewer than
//! two MTUs queued is never early-dropped); at the packet limit the *arrival* is dropped
//! (no fattest-flow search); `memory_limit` is only counted (`overmemory`), never enforced;
//! ECN is off by default and, when on, marks while the flow's probability is at most
//! `ecn_prob` percent.
//!
//! The kernel's timer walks every flow each `tupdate`. Here each flow keeps its own
//! `next_update` and catches up its due updates when it is touched (or observed): a flow's
//! update depends only on its own state and its own backlog, which cannot change between
//! its operations, so this is exact and costs nothing per packet for idle flows.

use super::pie::{ns_to_ticks, prob_fraction, PieParams, PieVars, FIRST_UPDATE, MAX_PROB};
use super::{BuildCtx, Dequeue, DropReason, Drops, Qdisc, Verdict};
use crate::packet::Packet;
use crate::params::{ConfResult, Params};
use crate::rng::{splitmix64_mix, Rng};
use crate::time::Time;
use std::collections::VecDeque;

/// End of an index-linked list.
const NIL: u32 = u32::MAX;

/// Which DRR list a flow is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnList {
    None,
    New,
    Old,
}

/// One flow queue (`struct fq_pie_flow`).
#[derive(Debug)]
struct Flow {
    queue: VecDeque<Packet>,
    /// Bytes queued in this flow (`flow->backlog`).
    backlog_bytes: u32,
    /// DRR credit, bytes (`s32 deficit`).
    deficit: i32,
    list: OnList,
    /// Next flow on the same list.
    next: u32,
    vars: PieVars,
    /// This flow's next due probability update (lazy timer).
    next_update: Time,
}

/// A FIFO list of flow indices linked through `Flow::next`.
#[derive(Clone, Copy, Debug)]
struct FlowList {
    head: u32,
    tail: u32,
}

impl FlowList {
    const EMPTY: FlowList = FlowList {
        head: NIL,
        tail: NIL,
    };
    #[inline]
    fn is_empty(&self) -> bool {
        self.head == NIL
    }
}

/// fq_pie's own parameters (beside the PIE ones), Linux defaults in `Default`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FqPieConfig {
    /// Total packet limit (10240).
    pub limit: u32,
    /// Number of flow queues (1024).
    pub flows: u32,
    /// DRR quantum, bytes (psched_mtu).
    pub quantum: u32,
    /// ECN marks allowed while a flow's prob <= ecn_prob % (10).
    pub ecn_prob: u32,
    /// Truesize bytes above which arrivals are counted as `overmemory` (32 MiB).
    pub memory_limit: u32,
}

impl FqPieConfig {
    pub fn linux_default(mtu_bytes: u32) -> FqPieConfig {
        FqPieConfig {
            limit: 10 * 1024,
            flows: 1024,
            quantum: mtu_bytes,
            ecn_prob: 10,
            memory_limit: 32 << 20,
        }
    }
}

/// `sch_fq_pie`.
#[derive(Debug)]
pub struct FqPie {
    params: PieParams,
    /// Total packet limit (tail drop of the arrival).
    limit: u32,
    /// DRR quantum, bytes.
    quantum: u32,
    /// ECN marking allowed while the flow's prob <= ecn_prob %.
    ecn_prob: u32,
    /// Bytes of truesize above which `overmemory` is counted (never enforced, as Linux).
    memory_limit: u32,
    flows: Vec<Flow>,
    new_flows: FlowList,
    old_flows: FlowList,
    qlen: usize,
    backlog_bytes: u64,
    /// Sum of `truesize` of the queued packets.
    memory_usage: u64,
    hash_salt: u64,
    rng: Rng,
    ecn_marks: u64,
    /// Arrivals refused at the limit (`overlimit`).
    pub overlimit: u64,
    /// Arrivals that found memory_usage above memory_limit (`overmemory`, stat only).
    pub overmemory: u64,
    /// All drops (`dropped`).
    pub dropped: u64,
    /// Flows that (re-)entered new_flows (`new_flow_count`).
    pub new_flow_count: u64,
}

impl FqPie {
    /// An fq_pie created at time 0 (first updates at 500 ms).
    pub fn new(params: PieParams, cfg: FqPieConfig, rng: Rng, hash_salt: u64) -> FqPie {
        assert!(cfg.flows >= 1);
        let flows = (0..cfg.flows)
            .map(|_| Flow {
                queue: VecDeque::new(),
                backlog_bytes: 0,
                deficit: 0,
                list: OnList::None,
                next: NIL,
                vars: PieVars::new(),
                next_update: Time::ZERO + FIRST_UPDATE,
            })
            .collect();
        FqPie {
            params,
            limit: cfg.limit,
            quantum: cfg.quantum,
            ecn_prob: cfg.ecn_prob,
            memory_limit: cfg.memory_limit,
            flows,
            new_flows: FlowList::EMPTY,
            old_flows: FlowList::EMPTY,
            qlen: 0,
            backlog_bytes: 0,
            memory_usage: 0,
            hash_salt,
            rng,
            ecn_marks: 0,
            overlimit: 0,
            overmemory: 0,
            dropped: 0,
            new_flow_count: 0,
        }
    }

    /// `fq_pie [limit P] [flows N] [quantum B] [target T] [tupdate T] [alpha A] [beta B]
    /// [ecn] [ecn_prob %] [bytemode] [dq_rate_estimator] [memory_limit B]`.
    pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<FqPie> {
        let limit = p.u32("limit", 10 * 1024, 1, u32::MAX)?;
        let flows = p.u32("flows", 1024, 1, 65536)?;
        let quantum = p.bytes("quantum", ctx.mtu_bytes as u64)?;
        if !(1..=1 << 20).contains(&quantum) {
            return Err(p.err(
                "quantum",
                "must be within [1B, 1MiB] (kernel range 1..2^20)",
            ));
        }
        let ecn_prob = p.u32("ecn_prob", 10, 0, 100)?;
        let memory_limit = p.bytes("memory_limit", 32 << 20)?;
        if memory_limit > u32::MAX as u64 {
            return Err(p.err("memory_limit", "must fit the kernel's u32 (< 4 GiB)"));
        }
        let params = PieParams::from_params(p, ctx)?;
        let cfg = FqPieConfig {
            limit,
            flows,
            quantum: quantum as u32,
            ecn_prob,
            memory_limit: memory_limit as u32,
        };
        Ok(FqPie::new(params, cfg, ctx.rng(), ctx.hash_salt()))
    }

    pub fn params(&self) -> &PieParams {
        &self.params
    }
    pub fn limit(&self) -> u32 {
        self.limit
    }
    pub fn flows_count(&self) -> usize {
        self.flows.len()
    }
    pub fn quantum(&self) -> u32 {
        self.quantum
    }
    pub fn ecn_prob(&self) -> u32 {
        self.ecn_prob
    }
    pub fn memory_limit(&self) -> u32 {
        self.memory_limit
    }
    pub fn memory_usage(&self) -> u64 {
        self.memory_usage
    }

    /// The queue index of a packet: the salted flow hash scaled into `flows` buckets with
    /// a multiply-shift (`reciprocal_scale`, as `fq_pie_hash`).
    #[inline]
    pub fn classify(&self, pkt: &Packet) -> usize {
        let h = (splitmix64_mix(pkt.hash as u64 ^ self.hash_salt) >> 32) as u32;
        ((h as u64 * self.flows.len() as u64) >> 32) as usize
    }

    /// Flow `idx`'s probability as a fraction, after its due updates up to `now`.
    pub fn flow_prob(&mut self, idx: usize, now: Time) -> f64 {
        self.catch_up(idx, now);
        prob_fraction(self.flows[idx].vars.prob)
    }

    /// Brings flow `idx`'s PIE state up to `now`.
    #[inline]
    fn catch_up(&mut self, idx: usize, now: Time) {
        let f = &mut self.flows[idx];
        f.vars
            .run_timer(&self.params, f.backlog_bytes, &mut f.next_update, now);
    }

    #[inline]
    fn list_mut(&mut self, which: OnList) -> &mut FlowList {
        match which {
            OnList::New => &mut self.new_flows,
            OnList::Old => &mut self.old_flows,
            OnList::None => unreachable!("no list"),
        }
    }

    /// Appends flow `idx` (on no list) to the tail of `which`.
    #[inline]
    fn push_tail(&mut self, which: OnList, idx: u32) {
        let f = &mut self.flows[idx as usize];
        f.next = NIL;
        f.list = which;
        let tail = self.list_mut(which).tail;
        if tail == NIL {
            self.list_mut(which).head = idx;
        } else {
            self.flows[tail as usize].next = idx;
        }
        self.list_mut(which).tail = idx;
    }

    /// Removes the head of `which` (non-empty) and returns it.
    #[inline]
    fn pop_head(&mut self, which: OnList) -> u32 {
        let idx = self.list_mut(which).head;
        let f = &mut self.flows[idx as usize];
        let next = f.next;
        f.next = NIL;
        f.list = OnList::None;
        let list = self.list_mut(which);
        list.head = next;
        if next == NIL {
            list.tail = NIL;
        }
        idx
    }
}

impl Qdisc for FqPie {
    fn enqueue(&mut self, mut pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        let idx = self.classify(&pkt);
        self.catch_up(idx, now);
        // memory_limit is only a statistic in Linux (never a drop).
        let memory_limited =
            self.memory_usage > self.memory_limit as u64 + pkt.truesize_bytes as u64;
        if self.qlen >= self.limit as usize {
            // Tail drop of the arrival, whatever flow is fattest.
            self.overlimit += 1;
            self.dropped += 1;
            self.flows[idx].vars.accu_prob = 0;
            drops.push(pkt, DropReason::Overlimit);
            return Verdict::Dropped;
        } else if memory_limited {
            self.overmemory += 1;
        }
        let f = &mut self.flows[idx];
        if f.vars
            .drop_early(&self.params, f.backlog_bytes, pkt.len_bytes, &mut self.rng)
        {
            if self.params.ecn
                && f.vars.prob <= (MAX_PROB / 100) * self.ecn_prob as u64
                && pkt.set_ce()
            {
                self.ecn_marks += 1;
            } else {
                self.dropped += 1;
                f.vars.accu_prob = 0;
                drops.push(pkt, DropReason::Early);
                return Verdict::Dropped;
            }
        }
        let len = pkt.len_bytes;
        self.memory_usage += pkt.truesize_bytes as u64;
        self.backlog_bytes += len as u64;
        self.qlen += 1;
        f.queue.push_back(pkt);
        if f.list == OnList::None {
            f.deficit = self.quantum as i32;
            f.backlog_bytes = 0;
            self.new_flow_count += 1;
            self.push_tail(OnList::New, idx as u32);
        }
        self.flows[idx].backlog_bytes += len;
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Time, _drops: &mut Drops) -> Dequeue {
        loop {
            let which = if !self.new_flows.is_empty() {
                OnList::New
            } else if !self.old_flows.is_empty() {
                OnList::Old
            } else {
                return Dequeue::Empty;
            };
            let idx = match which {
                OnList::New => self.new_flows.head,
                _ => self.old_flows.head,
            } as usize;
            // Credit exhausted: refill and go to the back of old_flows.
            if self.flows[idx].deficit <= 0 {
                self.flows[idx].deficit += self.quantum as i32;
                self.pop_head(which);
                self.push_tail(OnList::Old, idx as u32);
                continue;
            }
            if self.flows[idx].queue.is_empty() {
                // An emptied new flow passes through old_flows once (anti-starvation)
                // if there are old flows; otherwise it leaves the lists.
                self.pop_head(which);
                if which == OnList::New && !self.old_flows.is_empty() {
                    self.push_tail(OnList::Old, idx as u32);
                }
                continue;
            }
            // Due updates see the backlog before this dequeue.
            self.catch_up(idx, now);
            let f = &mut self.flows[idx];
            let pkt = f.queue.pop_front().expect("non-empty flow");
            let len = pkt.len_bytes;
            f.deficit -= len as i32;
            f.backlog_bytes -= len;
            self.qlen -= 1;
            self.backlog_bytes -= len as u64;
            self.memory_usage -= pkt.truesize_bytes as u64;
            f.vars.process_dequeue(
                &self.params,
                ns_to_ticks(now.as_ns()),
                ns_to_ticks(pkt.enqueued_at.as_ns()),
                len,
                f.backlog_bytes,
            );
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
        self.ecn_marks
    }
    /// `prob_max` over all flows, `prob_mean` over backlogged flows, `flows_backlogged`,
    /// `memory_usage_bytes`. Brings every flow's timer up to `now` (O(flows)).
    fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
        let mut max: f64 = 0.0;
        let mut sum = 0.0;
        let mut backlogged = 0u32;
        for idx in 0..self.flows.len() {
            self.catch_up(idx, now);
            let f = &self.flows[idx];
            let p = prob_fraction(f.vars.prob);
            max = max.max(p);
            if !f.queue.is_empty() {
                sum += p;
                backlogged += 1;
            }
        }
        emit("prob_max", max);
        emit(
            "prob_mean",
            if backlogged > 0 {
                sum / backlogged as f64
            } else {
                0.0
            },
        );
        emit("flows_backlogged", backlogged as f64);
        emit("memory_usage_bytes", self.memory_usage as f64);
    }
}
