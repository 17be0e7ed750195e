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
//!
//! `observe` (the time series, every record interval) reports over every flow. A flow
//! whose queue is empty, whose probability is 0 and whose state is a fixed point of the
//! update (the next update would change nothing: an idle flow after its decay and
//! re-initialisation) is *settled*: it contributes nothing to `prob_max` (0), `prob_mean`
//! or `flows_backlogged`, and catching it up would change nothing but its `next_update`,
//! which its next enqueue or dequeue catches up to the same instant anyway. `observe` walks
//! only the unsettled flows, in index order (a bitmap; the float sum keeps its order), so
//! with 16 busy flows of 1024 it visits 16, not 1024 (issue 19, session 9: row A fq_pie
//! spent a quarter of its instructions there).

use super::drr_lists::{DrrLists, NEW};
use super::pie::{
    ns_to_ticks, pie_tc_keys, prob_fraction, PieControl, PieParams, PieVars, FIRST_UPDATE, MAX_PROB,
};
use super::vocab::{
    tc_size, BuildCtx, Dequeue, Discipline, DropReason, Drops, NotLinux, Qdisc, TcKey, Verdict,
};
use crate::packet::Packet;
use crate::params::{ConfResult, Params};
use crate::rng::{splitmix64_mix, Rng};
use crate::time::Time;
use std::collections::VecDeque;

/// One flow queue (`struct fq_pie_flow`).
#[derive(Debug)]
struct Flow {
    queue: VecDeque<Packet>,
    /// Bytes queued in this flow (`flow->backlog`).
    backlog_bytes: u32,
    vars: PieVars,
    /// This flow's next due probability update (lazy timer).
    next_update: Time,
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

/// Typed spec of `fq_pie`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FqPieSpec {
    pub cfg: FqPieConfig,
    pub control: PieControl,
}

impl Discipline for FqPieSpec {
    const KIND: &'static str = "fq_pie";
    const SUMMARY: &'static str =
        "FQ-PIE: DRR over hashed flows, each with its own PIE (Linux sch_fq_pie)";
    type Qdisc = Box<FqPie>;

    /// `fq_pie [limit P] [flows N] [quantum B] [target T] [tupdate T] [alpha A] [beta B]
    /// [ecn] [ecn_prob %] [bytemode] [dq_rate_estimator] [memory_limit B]`.
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
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
        let control = PieControl::parse(p, ctx)?;
        let cfg = FqPieConfig {
            limit,
            flows,
            quantum: quantum as u32,
            ecn_prob,
            memory_limit: memory_limit as u32,
        };
        Ok(FqPieSpec { cfg, control })
    }

    fn build(&self, ctx: &BuildCtx) -> Box<FqPie> {
        Box::new(FqPie::new(
            self.control.params.clone(),
            self.cfg,
            ctx.rng(),
            ctx.hash_salt(),
        ))
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS);

    /// `limit N flows N target T tupdate T alpha A beta B quantum N memory_limit SIZE
    /// ecn_prob N [ecn] [bytemode] [dq_rate_estimator]` (`tc qdisc show` order).
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        let c = &self.cfg;
        let mut a = vec![
            "limit".into(),
            c.limit.to_string(),
            "flows".into(),
            c.flows.to_string(),
        ];
        let mut ctl = Vec::new();
        self.control.tc_args("fq_pie", &mut ctl)?;
        // The controller's switches come last in tc's order; its numbers first.
        let switches = ctl.split_off(8);
        a.extend(ctl);
        a.extend([
            "quantum".into(),
            c.quantum.to_string(),
            "memory_limit".into(),
            tc_size(c.memory_limit as u64),
            "ecn_prob".into(),
            c.ecn_prob.to_string(),
        ]);
        a.extend(switches);
        Ok(a)
    }
}

/// tc keywords of `fq_pie`.
pub const TC_KEYS: &[TcKey] = pie_tc_keys!(
    TcKey::Int("flows", "flows"),
    TcKey::Size("quantum", "quantum"),
    TcKey::Size("memory_limit", "memory_limit"),
    TcKey::Int("ecn_prob", "ecn_prob"),
);

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
    /// Bit `i` set: flow `i` may not be settled (see the module doc), so `observe` must
    /// catch it up and read it. Set by every enqueue to the flow; cleared by
    /// `observe` once the flow is found settled; clear for a fresh flow.
    unsettled: Vec<u64>,
    /// DRR credits (`s32 deficit`) and the new/old lists, as fq_codel's.
    drr: DrrLists<2>,
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
                vars: PieVars::new(),
                next_update: Time::ZERO + FIRST_UPDATE,
            })
            .collect();
        let n = cfg.flows as usize;
        // A fresh flow (`PieVars::new()`, empty) is settled: its updates change nothing
        // until it gets a packet (test `fresh_pie_vars_are_a_fixed_point`).
        let unsettled = vec![0; n.div_ceil(64)];
        FqPie {
            params,
            limit: cfg.limit,
            quantum: cfg.quantum,
            ecn_prob: cfg.ecn_prob,
            memory_limit: cfg.memory_limit,
            flows,
            unsettled,
            drr: DrrLists::new(n),
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
        Ok(*FqPieSpec::parse(p, ctx)?.build(ctx))
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

    /// [`Self::catch_up`] before an enqueue to flow `idx`, which unsettles it.
    #[inline]
    fn touch(&mut self, idx: usize, now: Time) {
        self.unsettled[idx / 64] |= 1 << (idx % 64);
        self.catch_up(idx, now);
    }

    /// Whether flow `idx` (caught up) is settled: empty, probability 0, and a fixed point
    /// of the update with its backlog (so every later update leaves it as it is).
    fn is_settled(&self, idx: usize) -> bool {
        let f = &self.flows[idx];
        if !f.queue.is_empty() || f.vars.prob != 0 {
            return false;
        }
        let mut next = f.vars;
        next.calculate_probability(&self.params, f.backlog_bytes);
        next == f.vars
    }

    /// Flows `observe` still walks (tests: settled flows must drop out).
    #[cfg(test)]
    fn unsettled_count(&self) -> u32 {
        self.unsettled.iter().map(|w| w.count_ones()).sum()
    }
}

impl Qdisc for FqPie {
    fn enqueue(&mut self, mut pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        let idx = self.classify(&pkt);
        self.touch(idx, now);
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
        if self.drr.activate(idx, self.quantum as i32, NEW) {
            f.backlog_bytes = 0;
            self.new_flow_count += 1;
        }
        f.backlog_bytes += len;
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Time, _drops: &mut Drops) -> Dequeue {
        // new_flows first, then old_flows (RFC 8290 §4.2, as fq_codel).
        while let Some(idx) = self.drr.next_flow(self.quantum as i32) {
            if self.flows[idx].queue.is_empty() {
                // An emptied new flow passes through old_flows once (anti-starvation).
                self.drr.retire_empty(idx, true);
                continue;
            }
            // Due updates see the backlog before this dequeue. The flow is unsettled
            // already: it holds a packet, so an enqueue set its bit, and observe clears
            // only the bits of empty flows.
            debug_assert!(self.unsettled[idx / 64] & (1 << (idx % 64)) != 0);
            self.catch_up(idx, now);
            let f = &mut self.flows[idx];
            let pkt = f.queue.pop_front().expect("non-empty flow");
            let len = pkt.len_bytes;
            *self.drr.deficit_mut(idx) -= len as i32;
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
        self.ecn_marks
    }
    /// `prob_max` over all flows, `prob_mean` over backlogged flows, `flows_backlogged`,
    /// `memory_usage_bytes`. Brings every unsettled flow's timer up to `now` (settled flows
    /// read 0 and are not backlogged: see the module doc), in index order.
    fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
        let mut max: f64 = 0.0;
        let mut sum = 0.0;
        let mut backlogged = 0u32;
        for w in 0..self.unsettled.len() {
            let mut bits = self.unsettled[w];
            while bits != 0 {
                let idx = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.catch_up(idx, now);
                let f = &self.flows[idx];
                let p = prob_fraction(f.vars.prob);
                max = max.max(p);
                if !f.queue.is_empty() {
                    sum += p;
                    backlogged += 1;
                } else if self.is_settled(idx) {
                    self.unsettled[w] &= !(1 << (idx % 64));
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::drr_lists::OLD;
    use crate::qdisc::testkit::{check_conservation, pkt, Bound};
    use crate::time::Duration;

    const MTU: u32 = 1514;
    /// 10 Mbit/s: one 1514-B frame per 1.2112 ms.
    const SERVICE: Duration = Duration(1_211_200);

    fn fq_pie(cfg: FqPieConfig) -> FqPie {
        FqPie::new(PieParams::linux_default(MTU), cfg, Rng::from_seed(5), 77)
    }

    fn default_cfg() -> FqPieConfig {
        FqPieConfig::linux_default(MTU)
    }

    /// `n` synthetic flow ids that land in different queues (of 1024: a handful of
    /// candidates suffices; the cap turns a broken classifier into a failure, not a hang).
    fn distinct_flows(q: &FqPie, n: usize) -> Vec<u32> {
        let mut out: Vec<u32> = vec![];
        let mut used = std::collections::HashSet::new();
        for f in 1..=10_000u32 {
            if used.insert(q.classify(&pkt(0, f, 100))) {
                out.push(f);
                if out.len() == n {
                    return out;
                }
            }
        }
        panic!("fewer than {n} distinct queues among 10 000 flows");
    }

    #[derive(Default)]
    struct Run {
        early: std::collections::HashMap<u32, u64>,
        overlimit: u64,
        delivered_bytes: std::collections::HashMap<u32, u64>,
    }

    /// Sources `(flow, len, interarrival)` from `start` to `end` into a 10 Mbit/s link.
    fn drive(q: &mut FqPie, start: Time, end: Time, sources: &[(u32, u32, Duration)]) -> Run {
        let mut r = Run::default();
        let mut d = Drops::new();
        let mut next: Vec<Time> = sources.iter().map(|_| start).collect();
        let mut link_free = start;
        let mut uid = 0;
        let mut bound = Bound::new(10_000_000, "event loop until end");
        loop {
            bound.tick();
            let (si, t_arr) = next
                .iter()
                .enumerate()
                .min_by_key(|(_, t)| **t)
                .map(|(i, t)| (i, *t))
                .unwrap();
            let dequeue_next = q.len_packets() > 0 && link_free <= t_arr;
            let now = if dequeue_next { link_free } else { t_arr };
            if now >= end {
                break;
            }
            if dequeue_next {
                let p = q.dequeue(now, &mut d).packet().expect("packet");
                *r.delivered_bytes.entry(p.conversation()).or_default() += p.len_bytes as u64;
                link_free = now + SERVICE * p.len_bytes as u64 / 1514;
            } else {
                let (flow, len, ia) = sources[si];
                let mut p = pkt(uid, flow, len);
                uid += 1;
                p.enqueued_at = now;
                q.enqueue(p, now, &mut d);
                link_free = link_free.max(now);
                next[si] += ia;
            }
            for x in d.drain() {
                match x.reason {
                    DropReason::Early => *r.early.entry(x.pkt.conversation()).or_default() += 1,
                    DropReason::Overlimit => r.overlimit += 1,
                    other => panic!("unexpected drop reason {other:?}"),
                }
            }
        }
        r
    }

    #[test]
    fn limit_tail_drops_the_arrival_not_the_fattest_flow() {
        // Linux fq_pie: qlen >= limit drops the arriving packet (no fq_codel-style head
        // drop from the fattest flow).
        let mut q = fq_pie(FqPieConfig {
            limit: 10,
            ..default_cfg()
        });
        let f = distinct_flows(&q, 2);
        let mut d = Drops::new();
        for i in 0..10 {
            assert_eq!(
                q.enqueue(pkt(i, f[0], 1000), Time(0), &mut d),
                Verdict::Queued
            );
        }
        assert_eq!(
            q.enqueue(pkt(99, f[1], 100), Time(0), &mut d),
            Verdict::Dropped
        );
        let dropped: Vec<(u64, DropReason)> = d.drain().map(|x| (x.pkt.uid, x.reason)).collect();
        assert_eq!(dropped, vec![(99, DropReason::Overlimit)]);
        assert_eq!(q.len_packets(), 10);
        assert_eq!(q.overlimit, 1);
        // The fat flow's packets all come out, in order.
        for i in 0..10 {
            assert_eq!(q.dequeue(Time(1), &mut d).packet().unwrap().uid, i);
        }
    }

    #[test]
    fn small_flow_backlog_is_never_early_dropped() {
        // drop_early runs on the flow's own backlog: below 2·mtu (3028 B) no early drop,
        // whatever the flow's probability.
        let mut q = fq_pie(default_cfg());
        let f = distinct_flows(&q, 1)[0];
        let idx = q.classify(&pkt(0, f, 100));
        let mut d = Drops::new();
        let now = Time(1000); // before the first update: the state stays as set here
        q.flows[idx].vars.burst_time = 0;
        q.flows[idx].vars.qdelay = ns_to_ticks(100_000_000);
        q.flows[idx].vars.prob = MAX_PROB; // certain drop once allowed
        q.flows[idx].vars.accu_prob = (MAX_PROB / 2) * 17;
        // 1500 + 1500 = 3000 < 3028 bytes queued before each arrival: never dropped.
        for i in 0..3 {
            assert_eq!(
                q.enqueue(pkt(i, f, 1500), now, &mut d),
                Verdict::Queued,
                "pkt {i}"
            );
        }
        assert_eq!(q.len_bytes(), 4500);
        // Now 4500 >= 3028 bytes are queued: the next arrival is dropped.
        assert_eq!(q.enqueue(pkt(9, f, 1500), now, &mut d), Verdict::Dropped);
    }

    /// Linux fq_pie_qdisc_enqueue: an early-dropped arrival is CE-marked instead only if
    /// ecn is on, the flow's prob is at most ecn_prob (10 %) and the packet is ECT.
    #[test]
    fn ecn_marks_only_with_ecn_on_below_ecn_prob() {
        let verdict = |ecn: bool, prob: u64, ect: bool| {
            let mut params = PieParams::linux_default(MTU);
            params.ecn = ecn;
            let mut q = FqPie::new(params, default_cfg(), Rng::from_seed(5), 77);
            let f = distinct_flows(&q, 1)[0];
            let idx = q.classify(&pkt(0, f, 100));
            let mut d = Drops::new();
            let now = Time(1000); // before the first update
            for i in 0..3 {
                q.enqueue(pkt(i, f, 1500), now, &mut d);
            }
            let v = &mut q.flows[idx].vars;
            v.burst_time = 0;
            v.qdelay = ns_to_ticks(100_000_000);
            v.prob = prob;
            v.accu_prob = (MAX_PROB / 2) * 17; // forces the early drop
            let mut p = pkt(9, f, 1500);
            if ect {
                p.ecn = crate::packet::Ecn::Ect0;
            }
            (q.enqueue(p, now, &mut d), q.ecn_marks())
        };
        assert_eq!(verdict(true, MAX_PROB / 20, true), (Verdict::Queued, 1));
        assert_eq!(verdict(true, MAX_PROB / 2, true), (Verdict::Dropped, 0));
        assert_eq!(verdict(true, MAX_PROB / 20, false), (Verdict::Dropped, 0));
        assert_eq!(verdict(false, MAX_PROB / 20, true), (Verdict::Dropped, 0));
    }

    /// `prob_mean` averages over backlogged flows only: one backlogged flow at 25 % among
    /// 1024 idle ones reads 0.25, not 0.25/1024.
    #[test]
    fn observe_averages_prob_over_backlogged_flows() {
        let mut q = fq_pie(default_cfg());
        let f = distinct_flows(&q, 1)[0];
        let idx = q.classify(&pkt(0, f, 100));
        let mut d = Drops::new();
        q.enqueue(pkt(0, f, 1500), Time(1000), &mut d);
        q.flows[idx].vars.prob = MAX_PROB / 4;
        let mut seen = std::collections::HashMap::new();
        q.observe(Time(2000), &mut |k, v| {
            seen.insert(k.to_string(), v);
        });
        assert!((seen["prob_mean"] - 0.25).abs() < 1e-9, "{seen:?}");
        assert!((seen["prob_max"] - 0.25).abs() < 1e-9);
        assert_eq!(seen["flows_backlogged"], 1.0);
    }

    #[test]
    fn flows_have_independent_probabilities() {
        // One unresponsive flow at twice the link rate and a light flow at 5% of it.
        // The heavy flow's queue builds and its PIE drops; the light flow's queue, served
        // first by DRR, never holds 2·mtu, so its own PIE never drops and its prob stays
        // at zero (per-flow pie_vars in Linux fq_pie).
        let mut q = fq_pie(default_cfg());
        let f = distinct_flows(&q, 2);
        let t0 = Time(1_000_000_000);
        let end = t0 + Duration::from_secs(20);
        let r = drive(
            &mut q,
            t0,
            end,
            &[(f[0], 1514, SERVICE / 2), (f[1], 1514, SERVICE * 20)],
        );
        assert!(r.early.get(&f[0]).copied().unwrap_or(0) > 1000);
        assert_eq!(r.early.get(&f[1]), None, "light flow was early-dropped");
        assert_eq!(r.overlimit, 0);
        let heavy = q.classify(&pkt(0, f[0], 1));
        let light = q.classify(&pkt(0, f[1], 1));
        assert!(q.flow_prob(heavy, end) > 0.3, "{}", q.flow_prob(heavy, end));
        assert_eq!(q.flow_prob(light, end), 0.0);
        // And the light flow got all its bytes through.
        let sent = (20_000_000_000 / (SERVICE.0 * 20)) * 1514;
        let got = r.delivered_bytes[&f[1]];
        assert!(got + 2 * 1514 >= sent, "{got} of {sent}");
    }

    #[test]
    fn drr_shares_bytes_equally() {
        // Two backlogged flows, 1514-B and 300-B packets: DRR with quantum 1514 gives
        // each half of the link in bytes (RFC 8290 §4.2 / fq_codel DRR).
        let mut q = fq_pie(default_cfg());
        let f = distinct_flows(&q, 2);
        let mut d = Drops::new();
        let mut uid = 0;
        for _ in 0..400 {
            q.enqueue(pkt(uid, f[0], 1514), Time(0), &mut d);
            uid += 1;
        }
        for _ in 0..2000 {
            q.enqueue(pkt(uid, f[1], 300), Time(0), &mut d);
            uid += 1;
        }
        let mut bytes = [0u64; 2];
        // Dequeue 300 kB (before any update: no AQM involvement).
        let mut bound = Bound::new(10_000, "dequeue 300 kB");
        while bytes[0] + bytes[1] < 300_000 {
            bound.tick();
            let p = q.dequeue(Time(1), &mut d).packet().unwrap();
            bytes[usize::from(p.conversation() == f[1])] += p.len_bytes as u64;
        }
        let share = bytes[0] as f64 / (bytes[0] + bytes[1]) as f64;
        assert!((share - 0.5).abs() < 0.01, "{bytes:?}");
    }

    #[test]
    fn empty_new_flow_goes_to_old_list_only_if_old_is_nonempty() {
        let mut q = fq_pie(default_cfg());
        let f = distinct_flows(&q, 2);
        let (a, b) = (q.classify(&pkt(0, f[0], 1)), q.classify(&pkt(0, f[1], 1)));
        let mut d = Drops::new();
        // Alone: the emptied new flow is removed from the lists.
        q.enqueue(pkt(1, f[0], 100), Time(0), &mut d);
        q.dequeue(Time(0), &mut d).packet().unwrap();
        assert!(matches!(q.dequeue(Time(0), &mut d), Dequeue::Empty));
        assert_eq!(q.drr.list_of(a), None);
        // With an old flow present it must first pass through old_flows.
        for i in 0..5 {
            q.enqueue(pkt(10 + i, f[1], 1000), Time(0), &mut d);
        }
        q.dequeue(Time(0), &mut d).packet().unwrap(); // b new: deficit 1514 -> 514
        q.dequeue(Time(0), &mut d).packet().unwrap(); // b new: 514 -> -486
        q.dequeue(Time(0), &mut d).packet().unwrap(); // b refilled to 1028, old; -> 28
        assert_eq!(q.drr.list_of(b), Some(OLD));
        q.enqueue(pkt(20, f[0], 100), Time(0), &mut d);
        assert_eq!(q.drr.list_of(a), Some(NEW));
        assert_eq!(q.dequeue(Time(0), &mut d).packet().unwrap().uid, 20);
        // a is empty: moved behind b on old_flows, then b (deficit 28) is served.
        assert_eq!(q.dequeue(Time(0), &mut d).packet().unwrap().uid, 13);
        assert_eq!(q.drr.list_of(a), Some(OLD));
        assert_eq!(q.drr.head(OLD), Some(b));
        assert_eq!(q.drr.tail(OLD), Some(a));
    }

    #[test]
    fn memory_limit_is_only_counted() {
        let mut q = fq_pie(FqPieConfig {
            memory_limit: 10_000,
            ..default_cfg()
        });
        let mut d = Drops::new();
        for i in 0..100 {
            assert_eq!(q.enqueue(pkt(i, 1, 1514), Time(0), &mut d), Verdict::Queued);
        }
        assert!(q.overmemory > 90);
        assert!(q.memory_usage() > 100_000);
    }

    #[test]
    fn idle_flow_decays_and_reinitialises() {
        // Linux's timer keeps updating flows without traffic: their prob decays and the
        // vars re-initialise (fresh burst allowance). Lazily, that happens when the flow
        // is next touched.
        let mut q = fq_pie(default_cfg());
        let f = distinct_flows(&q, 1)[0];
        let t0 = Time(1_000_000_000);
        drive(
            &mut q,
            t0,
            t0 + Duration::from_secs(3),
            &[(f, 1514, SERVICE / 2)],
        );
        let idx = q.classify(&pkt(0, f, 1));
        let mut d = Drops::new();
        let mut now = t0 + Duration::from_secs(3);
        let mut bound = Bound::new(100_000, "drain");
        while q.dequeue(now, &mut d).packet().is_some() {
            bound.tick();
            now += SERVICE;
        }
        assert!(q.flow_prob(idx, now) > 0.1);
        assert_eq!(q.flows[idx].vars.burst_time, 0);
        let later = now + Duration::from_secs(30);
        assert_eq!(q.flow_prob(idx, later), 0.0);
        assert_eq!(q.flows[idx].vars.burst_time, ns_to_ticks(150_000_000));
    }

    #[test]
    fn lazy_per_flow_timers_equal_a_global_timer() {
        // Each flow catching up its own updates when touched must equal Linux's timer
        // updating every flow at every tupdate. The eager copy is observed (which
        // updates every flow) at every update instant.
        let cfg = FqPieConfig {
            flows: 16,
            limit: 400,
            ..default_cfg()
        };
        let mut p = PieParams::linux_default(MTU);
        p.target_ticks = ns_to_ticks(2_000_000);
        let mut lazy = FqPie::new(p.clone(), cfg, Rng::from_seed(9), 1);
        let mut eager = FqPie::new(p, cfg, Rng::from_seed(9), 1);
        let mut rng = Rng::from_seed(4);
        let (mut dl, mut de) = (Drops::new(), Drops::new());
        let mut now = Time::ZERO;
        let mut tick = Time::ZERO + FIRST_UPDATE;
        for uid in 0..60_000u64 {
            now += Duration(rng.below(600_000));
            while tick <= now {
                eager.observe(tick, &mut |_, _| {});
                tick += Duration::from_ms(15);
            }
            if rng.chance(0.55) {
                // Skewed flows: a few heavy, many light.
                let flow = if rng.chance(0.7) {
                    rng.below(3)
                } else {
                    rng.below(40)
                } as u32;
                let mut x = pkt(uid, flow, 200 + rng.below(1315) as u32);
                x.enqueued_at = now;
                assert_eq!(
                    lazy.enqueue(x, now, &mut dl),
                    eager.enqueue(x, now, &mut de)
                );
            } else {
                let a = lazy.dequeue(now, &mut dl).packet().map(|x| x.uid);
                let b = eager.dequeue(now, &mut de).packet().map(|x| x.uid);
                assert_eq!(a, b);
            }
        }
        lazy.observe(now, &mut |_, _| {});
        eager.observe(now, &mut |_, _| {});
        for (a, b) in lazy.flows.iter().zip(&eager.flows) {
            assert_eq!(a.vars, b.vars);
        }
        let early = dl
            .as_slice()
            .iter()
            .filter(|x| x.reason == DropReason::Early)
            .count();
        assert!(
            early > 100,
            "the test should exercise early drops ({early})"
        );
        assert_eq!(dl.len(), de.len());
    }

    /// The `observe` of before session 9, the reference for the settled-flow skip: catches
    /// up and reads every flow, in index order. Returns what it emits, as bits.
    fn observe_every_flow(q: &mut FqPie, now: Time) -> Vec<(String, u64)> {
        let mut max: f64 = 0.0;
        let mut sum = 0.0;
        let mut backlogged = 0u32;
        for idx in 0..q.flows.len() {
            q.catch_up(idx, now);
            let f = &q.flows[idx];
            let p = prob_fraction(f.vars.prob);
            max = max.max(p);
            if !f.queue.is_empty() {
                sum += p;
                backlogged += 1;
            }
        }
        let mean = if backlogged > 0 {
            sum / backlogged as f64
        } else {
            0.0
        };
        vec![
            ("prob_max".into(), max.to_bits()),
            ("prob_mean".into(), mean.to_bits()),
            ("flows_backlogged".into(), (backlogged as f64).to_bits()),
            (
                "memory_usage_bytes".into(),
                (q.memory_usage as f64).to_bits(),
            ),
        ]
    }

    fn observed(q: &mut FqPie, now: Time) -> Vec<(String, u64)> {
        let mut v = vec![];
        q.observe(now, &mut |k, x| v.push((k.to_string(), x.to_bits())));
        v
    }

    /// RFC 8033 §4.2 / Linux `pie_calculate_probability` on a fresh `pie_vars` with an
    /// empty queue: delay 0 drives the probability to (stay at) 0, and an idle queue at
    /// prob 0 re-initialises to the fresh state, so the update changes nothing. What lets
    /// fq_pie leave fresh flows out of `observe`.
    #[test]
    fn fresh_pie_vars_are_a_fixed_point() {
        for dq_rate_estimator in [false, true] {
            let mut p = PieParams::linux_default(MTU);
            p.dq_rate_estimator = dq_rate_estimator;
            let mut v = PieVars::new();
            v.calculate_probability(&p, 0);
            assert_eq!(v, PieVars::new(), "dq_rate_estimator {dq_rate_estimator}");
            assert_eq!(v.prob, 0);
            assert_eq!(
                v.burst_time,
                ns_to_ticks(150_000_000),
                "150 ms burst allowance"
            );
        }
    }

    #[test]
    fn observe_walks_only_flows_that_can_still_change() {
        let mut q = fq_pie(default_cfg());
        assert_eq!(q.unsettled_count(), 0, "1024 fresh flows are settled");
        let zero = 0f64.to_bits();
        let at_1s = observed(&mut q, Time(1_000_000_000));
        assert!(at_1s[..3].iter().all(|(_, v)| *v == zero), "{at_1s:?}");
        assert_eq!(q.unsettled_count(), 0);
        // One unresponsive flow at twice the link rate for 3 s: its prob rises.
        let f = distinct_flows(&q, 1)[0];
        let idx = q.classify(&pkt(0, f, 1));
        let t0 = Time(1_000_000_000);
        drive(
            &mut q,
            t0,
            t0 + Duration::from_secs(3),
            &[(f, 1514, SERVICE / 2)],
        );
        assert_eq!(q.unsettled_count(), 1, "the busy flow");
        let mut d = Drops::new();
        let mut now = t0 + Duration::from_secs(3);
        let mut bound = Bound::new(100_000, "drain");
        while q.dequeue(now, &mut d).packet().is_some() {
            bound.tick();
            now += SERVICE;
        }
        // Empty but prob > 0: it still decays, so observe keeps reading it.
        let drained = observed(&mut q, now);
        assert!(f64::from_bits(drained[0].1) > 0.1, "{drained:?}");
        assert_eq!(drained[2].1, zero, "no backlogged flow");
        assert_eq!(q.unsettled_count(), 1);
        // 30 s later it has decayed to 0 and re-initialised: settled.
        let later = now + Duration::from_secs(30);
        let idle = observed(&mut q, later);
        assert_eq!(idle[0].1, zero, "prob_max");
        assert_eq!(q.unsettled_count(), 0);
        assert_eq!(q.flows[idx].vars, PieVars::new(), "back to the fresh state");
        // A packet unsettles it again, and observe reads it as backlogged.
        q.enqueue(pkt(1, f, 1514), later, &mut d);
        assert_eq!(q.unsettled_count(), 1);
        assert_eq!(observed(&mut q, later)[2].1, 1f64.to_bits());
    }

    /// With alpha = beta = 0 (tc accepts 0) an idle flow's probability only decays by
    /// prob/64 per update (Linux `pie_calculate_probability`), which stops changing once
    /// prob < 64 (of the kernel's MAX_PROB = 2^56 - 1): a fixed point with prob > 0. Such a
    /// flow still counts in `prob_max` at every sample, so it is never taken for settled.
    #[test]
    fn idle_flow_at_a_nonzero_fixed_point_stays_in_prob_max() {
        let mut p = PieParams::linux_default(MTU);
        p.alpha = 0;
        p.beta = 0;
        let mut q = FqPie::new(p, default_cfg(), Rng::from_seed(5), 77);
        let f = distinct_flows(&q, 1)[0];
        let idx = q.classify(&pkt(0, f, 100));
        let mut d = Drops::new();
        q.enqueue(pkt(0, f, 1500), Time(1000), &mut d);
        q.dequeue(Time(2000), &mut d).packet().unwrap();
        q.flows[idx].vars.prob = (u64::MAX >> 8) / 4;
        // 60 s of 15-ms updates: ~4000 decays by prob/64 leave prob in 1..63.
        for s in [60u64, 61, 62] {
            let v = observed(&mut q, Time(s * 1_000_000_000));
            let prob_max = f64::from_bits(v[0].1);
            assert!(
                prob_max > 0.0 && prob_max < 64.0 / (u64::MAX >> 8) as f64,
                "{v:?}"
            );
            assert_eq!(q.unsettled_count(), 1, "at {s} s");
        }
    }

    /// The settled-flow skip against the reference that walks every flow: two copies of
    /// one fq_pie under random traffic (bursts, idle gaps long enough to settle, random
    /// observation instants) emit the same bits, make the same decisions, and end in the
    /// same state.
    #[test]
    fn observe_skip_equals_walking_every_flow() {
        let mut settled_seen = 0;
        let mut nonzero_max = 0;
        for mode in 0..3 {
            for (seed, flows) in [(1u64, 1024u32), (2, 37), (3, 1), (4, 64)] {
                let mut p = PieParams::linux_default(MTU);
                p.target_ticks = ns_to_ticks(2_000_000);
                match mode {
                    1 => p.dq_rate_estimator = true,
                    2 => {
                        p.bytemode = true;
                        p.ecn = true;
                    }
                    _ => {}
                }
                let cfg = FqPieConfig {
                    flows,
                    limit: 300,
                    ..default_cfg()
                };
                let mut fast = FqPie::new(p.clone(), cfg, Rng::from_seed(seed), seed);
                let mut slow = FqPie::new(p, cfg, Rng::from_seed(seed), seed);
                let mut rng = Rng::from_seed(100 + seed);
                let (mut df, mut ds) = (Drops::new(), Drops::new());
                let mut now = Time::ZERO;
                for uid in 0..12_000u64 {
                    now += if rng.chance(0.002) {
                        Duration(rng.below(4_000_000_000)) // idle gap: flows settle
                    } else {
                        Duration(rng.below(700_000))
                    };
                    let r = rng.below(100);
                    if r < 52 {
                        let flow = if rng.chance(0.6) {
                            rng.below(4)
                        } else {
                            rng.below(200)
                        } as u32;
                        let mut x = pkt(uid, flow, 60 + rng.below(1455) as u32);
                        x.enqueued_at = now;
                        if rng.chance(0.5) {
                            x.ecn = crate::packet::Ecn::Ect0;
                        }
                        assert_eq!(fast.enqueue(x, now, &mut df), slow.enqueue(x, now, &mut ds));
                    } else if r < 97 {
                        let a = fast.dequeue(now, &mut df).packet().map(|x| x.uid);
                        let b = slow.dequeue(now, &mut ds).packet().map(|x| x.uid);
                        assert_eq!(a, b);
                    } else {
                        let before = fast.unsettled_count();
                        let a = observed(&mut fast, now);
                        assert_eq!(a, observe_every_flow(&mut slow, now), "uid {uid}");
                        settled_seen += (fast.unsettled_count() < before) as u32;
                        nonzero_max += (a[0].1 != 0) as u32;
                    }
                }
                assert_eq!(df.len(), ds.len());
                assert_eq!(fast.ecn_marks(), slow.ecn_marks());
                now += Duration::from_secs(1);
                assert_eq!(
                    observe_every_flow(&mut fast, now),
                    observe_every_flow(&mut slow, now)
                );
                for (a, b) in fast.flows.iter().zip(&slow.flows) {
                    assert_eq!((a.vars, a.next_update), (b.vars, b.next_update));
                }
            }
        }
        assert!(settled_seen > 50, "flows should settle ({settled_seen})");
        assert!(
            nonzero_max > 100,
            "probabilities should rise ({nonzero_max})"
        );
    }

    #[test]
    fn fq_pie_conservation_property() {
        for mode in 0..3 {
            for seed in 0..8 {
                let mut p = PieParams::linux_default(MTU);
                p.target_ticks = ns_to_ticks(1_000_000);
                match mode {
                    1 => p.dq_rate_estimator = true,
                    2 => {
                        p.bytemode = true;
                        p.ecn = true;
                    }
                    _ => {}
                }
                let cfg = FqPieConfig {
                    limit: 80,
                    flows: 1 + seed as u32 * 5,
                    quantum: 300 + seed as u32 * 200,
                    ..default_cfg()
                };
                let mut q = FqPie::new(p, cfg, Rng::from_seed(seed), seed);
                check_conservation(&mut q, seed, 6_000, |q| {
                    q.len_packets() <= 80
                        && q.flows.iter().map(|f| f.queue.len()).sum::<usize>() == q.qlen
                        && q.flows.iter().all(|f| {
                            f.backlog_bytes as u64
                                == f.queue.iter().map(|p| p.len_bytes as u64).sum::<u64>()
                        })
                });
            }
        }
    }

    #[test]
    fn registry_defaults_follow_linux() {
        use crate::params::{Table, Value};
        let q =
            crate::qdisc::build(&Value::Str("fq_pie".into()), "q", &BuildCtx::default()).unwrap();
        let crate::qdisc::AnyQdisc::FqPie(q) = q else {
            panic!()
        };
        assert_eq!(q.limit(), 10240);
        assert_eq!(q.flows_count(), 1024);
        assert_eq!(q.quantum(), 1514);
        assert_eq!(q.ecn_prob(), 10);
        assert_eq!(q.memory_limit(), 32 << 20);
        assert!(!q.params().ecn);
        assert_eq!(q.params().target_ticks, 234_375);
        let t = Table(vec![
            ("kind".into(), Value::Str("fq_pie".into())),
            ("flows".into(), Value::Int(65537)),
        ]);
        let e = crate::qdisc::build(&Value::Table(t), "q", &BuildCtx::default())
            .err()
            .unwrap();
        assert_eq!(e.path, "q.flows");
    }
}
