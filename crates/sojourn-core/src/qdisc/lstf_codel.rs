//! `lstf_codel`: the CoDel control law over a "least slack time first" priority queue
//! (seed 004, C. Ford, "LSTFCoDel: CoDel with LSTF-Style Priority Queuing"; public ns-2
//! code gollum18/cn2-project, summarised in docs/disciplines/lstf_codel.md).
//!
//! The qdisc keeps one number, the **slack** `s`: an EWMA of sojourn times, updated once
//! per dequeue call from the sojourn of the last packet that call pulled out of the queue
//! (delivered or dropped), like TCP's EstimatedRTT:
//!
//! ```text
//! s ← (1 − α)·s + α·sojourn            α = `alpha` (the seed's `forgetfulness_`)
//! ```
//!
//! Each arriving packet is stamped with the key `1/(1 + s)` of the slack at that moment
//! (`0` while `s == 0`). The queue serves the **smallest key** first, oldest first among
//! equal keys; so packets that arrived while the slack was larger leave earlier, and a
//! constant slack gives FIFO order. In CoDel's dropping state the packet is taken from the
//! **other end** (largest key, newest among equal keys): it is the packet CoDel drops, or,
//! between scheduled drops, the one delivered.
//!
//! CoDel itself is not re-implemented: [`codel_dequeue`] (Linux's `codel_dequeue`, see
//! [`super::codel_law`]) pulls packets through [`CodelQueue::dequeue_head`], which receives
//! the CoDel state and picks the end. As in the seed, the end is chosen from the dropping
//! flag *as it is when the packet is pulled*: the first packet of a dequeue in the dropping
//! state comes from the tail even if it then ends the dropping state and is delivered, and
//! the packet pulled right after the drop that *enters* the dropping state comes from the
//! head (the flag is set after it).
//!
//! Units: slack is kept in **seconds** (f64), as in the seed's ns-2 code, whose clock is in
//! seconds. The order of service depends only on the order of the keys, and `1/(1 + s)` is
//! strictly decreasing in `s` for any time unit, except that the `+ 1` makes the key's
//! *value* (and its floating-point resolution) unit-dependent; seconds reproduce the seed's
//! keys exactly. The `s == 0 → key 0` special case is the seed's; it makes the key
//! discontinuous (a tiny positive slack gives a key close to 1, the lowest priority).
//!
//! Data structure: a `BTreeMap<(key bits, arrival seq), slot>` over a slab of packets.
//! Keys are non-negative finite f64, whose IEEE-754 bit patterns order like the numbers
//! as u64, and the arrival sequence number breaks ties in arrival order; so
//! `first`/`last` are the seed's `multimap::begin()`/`--end()` (a C++ multimap inserts
//! an equal key after the existing ones). Enqueue and both pops are O(log n); the seed
//! scans its backing ns-2 `PacketQueue` (O(n)) on every dequeue. A B-tree, unlike a pair
//! of binary heaps with lazy deletion, needs no tombstones that pile up in the unused heap
//! while the queue is served from one end; packets stay in the slab (reused slots, no
//! per-packet allocation), only the tree's small nodes are allocated when it grows.

use super::codel::codel_params;
use super::codel_law::{codel_dequeue, CodelParams, CodelQueue, CodelStats, CodelVars};
use super::vocab::{BuildCtx, Dequeue, Discipline, DropReason, Drops, NotLinux, Qdisc, Verdict};
use crate::packet::Packet;
use crate::params::{ConfResult, Params};
use crate::time::Time;
use std::collections::BTreeMap;

/// The priority queue and its byte backlog, which is the whole qdisc's.
#[derive(Debug, Default)]
struct PrioQueue {
    /// `(key.to_bits(), seq) → slot` in `slab`.
    order: BTreeMap<(u64, u64), u32>,
    /// Packet storage; `free` lists the unused slots.
    slab: Vec<Packet>,
    free: Vec<u32>,
    /// Arrival counter: ties between equal keys go in arrival order.
    next_seq: u64,
    backlog_bytes: u64,
    /// Enqueue time of the last packet pulled in the current dequeue call (the slack
    /// update's sojourn sample); `None` if the call pulled nothing.
    last_pulled_enqueued_at: Option<Time>,
}

impl PrioQueue {
    fn len(&self) -> usize {
        self.order.len()
    }

    fn push(&mut self, key: f64, pkt: Packet) {
        debug_assert!(key >= 0.0 && key.is_finite());
        self.backlog_bytes += pkt.len_bytes as u64;
        let slot = match self.free.pop() {
            Some(s) => {
                self.slab[s as usize] = pkt;
                s
            }
            None => {
                self.slab.push(pkt);
                (self.slab.len() - 1) as u32
            }
        };
        self.order.insert((key.to_bits(), self.next_seq), slot);
        self.next_seq += 1;
    }

    fn take(&mut self, slot: u32) -> Packet {
        self.free.push(slot);
        let p = self.slab[slot as usize];
        self.backlog_bytes -= p.len_bytes as u64;
        self.last_pulled_enqueued_at = Some(p.enqueued_at);
        p
    }
}

impl CodelQueue for PrioQueue {
    /// Smallest key (oldest among ties) normally; largest key (newest among ties) while
    /// CoDel is in its dropping state (seed: `sched_.begin()` / `--sched_.end()`).
    #[inline]
    fn dequeue_head(&mut self, vars: &CodelVars) -> Option<Packet> {
        let (_, slot) = if vars.dropping {
            self.order.pop_last()?
        } else {
            self.order.pop_first()?
        };
        Some(self.take(slot))
    }
    #[inline]
    fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }
}

#[derive(Debug)]
pub struct LstfCodel {
    queue: PrioQueue,
    /// Tail-drop threshold in packets (as `sch_codel`'s `limit`).
    limit: usize,
    params: CodelParams,
    vars: CodelVars,
    stats: CodelStats,
    /// Weight of the newest sojourn sample in the slack EWMA, in [0, 1].
    alpha: f64,
    /// The slack EWMA, in seconds.
    slack_s: f64,
    /// Key stamped on the last accepted packet.
    last_key: f64,
    /// Arrivals tail-dropped at `limit`.
    drop_overlimit: u64,
}

/// The priority key of a packet arriving while the slack is `slack_s` seconds.
#[inline]
pub fn key_for_slack(slack_s: f64) -> f64 {
    if slack_s == 0.0 {
        0.0
    } else {
        1.0 / (1.0 + slack_s)
    }
}

impl LstfCodel {
    /// `alpha` must be in [0, 1].
    pub fn new(limit: usize, params: CodelParams, alpha: f64) -> LstfCodel {
        assert!((0.0..=1.0).contains(&alpha), "alpha {alpha} not in [0, 1]");
        LstfCodel {
            queue: PrioQueue {
                slab: Vec::with_capacity(limit.min(1024)),
                free: Vec::with_capacity(limit.min(1024)),
                ..Default::default()
            },
            limit,
            params,
            vars: CodelVars::default(),
            stats: CodelStats::default(),
            alpha,
            slack_s: 0.0,
            last_key: 0.0,
            drop_overlimit: 0,
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
    pub fn params(&self) -> &CodelParams {
        &self.params
    }
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
    /// The current slack, in seconds.
    pub fn slack_s(&self) -> f64 {
        self.slack_s
    }
    /// The key given to the last accepted packet.
    pub fn last_key(&self) -> f64 {
        self.last_key
    }
    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }
    pub fn stats(&self) -> &CodelStats {
        &self.stats
    }
    pub fn drop_overlimit(&self) -> u64 {
        self.drop_overlimit
    }
}

impl Qdisc for LstfCodel {
    #[inline]
    fn enqueue(&mut self, pkt: Packet, _now: Time, drops: &mut Drops) -> Verdict {
        // Tail drop at `limit` packets (seed: `q_->length() >= qlim_`; sch_codel likewise).
        if self.queue.len() >= self.limit {
            self.drop_overlimit += 1;
            drops.push(pkt, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        let key = key_for_slack(self.slack_s);
        self.last_key = key;
        self.queue.push(key, pkt);
        Verdict::Queued
    }

    #[inline]
    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        self.queue.last_pulled_enqueued_at = None;
        let out = codel_dequeue(
            &mut self.queue,
            &self.params,
            &mut self.vars,
            &mut self.stats,
            now,
            drops,
        );
        // Once per dequeue call, after the CoDel logic, from the last packet pulled
        // (delivered or dropped). A call that found the queue empty leaves the slack alone
        // (the seed would reuse the stale sample; see docs/disciplines/lstf_codel.md).
        if let Some(at) = self.queue.last_pulled_enqueued_at {
            let sojourn_s = now.saturating_since(at).as_secs_f64();
            self.slack_s = (1.0 - self.alpha) * self.slack_s + self.alpha * sojourn_s;
        }
        match out {
            Some(p) => Dequeue::Packet(p),
            None => Dequeue::Empty,
        }
    }

    #[inline]
    fn len_packets(&self) -> usize {
        self.queue.len()
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        self.queue.backlog_bytes
    }
    fn ecn_marks(&self) -> u64 {
        self.stats.marked_packets
    }
    fn observe(&mut self, _now: Time, emit: &mut dyn FnMut(&str, f64)) {
        emit("slack_ms", self.slack_s * 1e3);
        emit("key", self.last_key);
        emit("count", self.vars.count as f64);
        emit("dropping", if self.vars.dropping { 1.0 } else { 0.0 });
        emit("ldelay_ms", self.vars.ldelay.as_millis_f64());
    }
}

/// `lstf_codel [limit PACKETS] [target TIME] [interval TIME] [ecn BOOL]
/// [ce_threshold TIME] [alpha 0..1]`.
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<LstfCodel> {
    Ok(*LstfCodelSpec::parse(p, ctx)?.build(ctx))
}

/// Typed spec of `lstf_codel`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LstfCodelSpec {
    /// `limit`, packets (1000).
    pub limit: u64,
    pub params: CodelParams,
    /// Weight of the slack estimate (0.5).
    pub alpha: f64,
}

impl Discipline for LstfCodelSpec {
    const KIND: &'static str = "lstf_codel";
    const SUMMARY: &'static str =
        "LSTFCoDel: CoDel over a least-slack-time-first priority queue (seed 004)";
    type Qdisc = Box<LstfCodel>;

    /// `limit`, the CoDel keys and `alpha`.
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let limit = p.u64("limit", 1000, 1, u32::MAX as u64)?;
        let params = codel_params(p, ctx, false)?;
        // The seed swept 0.125 … 0.875; its Table V has the lowest mean delay at 0.5.
        let alpha = p.f64_in("alpha", 0.5, 0.0, 1.0)?;
        Ok(LstfCodelSpec {
            limit,
            params,
            alpha,
        })
    }

    fn build(&self, _ctx: &BuildCtx) -> Box<LstfCodel> {
        Box::new(LstfCodel::new(self.limit as usize, self.params, self.alpha))
    }

    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        Err(not_linux())
    }
}

/// Why `lstf_codel` has no tc line.
pub fn not_linux() -> NotLinux {
    NotLinux::new(
        "lstf_codel",
        "LSTFCoDel has no Linux qdisc (a slack-ordered queue from seed 004); \
         run it with `sojourn emulate`",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{Table, Value};
    use crate::qdisc::codel::Codel;
    use crate::qdisc::testkit::{check_conservation, pkt, Bound};
    use crate::rng::Rng;
    use crate::time::Duration;

    fn ms(x: u64) -> Time {
        Time::from_ns(x * 1_000_000)
    }

    /// `x` ms as the slack's seconds, computed as the qdisc does (ns × 1e-9).
    fn secs(x: u64) -> f64 {
        Duration::from_ms(x).as_secs_f64()
    }

    /// CoDel parameters that never drop in these small scenarios.
    fn no_aqm() -> CodelParams {
        CodelParams {
            target: Duration::from_secs(1000),
            ..CodelParams::linux_default(1514)
        }
    }

    fn enq(q: &mut LstfCodel, uid: u64, now: Time) {
        let mut p = pkt(uid, 1, 1000);
        p.enqueued_at = now;
        let mut d = Drops::new();
        assert_eq!(q.enqueue(p, now, &mut d), Verdict::Queued);
    }

    fn deq(q: &mut LstfCodel, now: Time) -> Option<u64> {
        let mut d = Drops::new();
        let r = q.dequeue(now, &mut d).packet().map(|p| p.uid);
        assert!(d.is_empty());
        r
    }

    fn build(t: Vec<(&str, Value)>) -> ConfResult<LstfCodel> {
        crate::qdisc::testkit::build_from(from_params, t, &BuildCtx::default())
    }

    #[test]
    fn defaults_and_validation() {
        let q = build(vec![]).unwrap();
        assert_eq!(q.limit(), 1000);
        assert_eq!(q.params().target, Duration::from_ms(5));
        assert_eq!(q.params().interval, Duration::from_ms(100));
        assert!(!q.params().ecn);
        assert_eq!(q.alpha(), 0.5);
        assert_eq!(q.slack_s(), 0.0);
        // the seed's literal settings are just parameters
        let q = build(vec![
            ("interval", Value::Str("100s".into())),
            ("target", Value::Str("5s".into())),
            ("limit", Value::Int(32)),
            ("alpha", Value::Float(0.125)),
        ])
        .unwrap();
        assert_eq!(q.params().interval, Duration::from_secs(100));
        assert_eq!(q.params().target, Duration::from_secs(5));
        assert_eq!((q.limit(), q.alpha()), (32, 0.125));
        let e = build(vec![("alpha", Value::Float(1.5))]).err().unwrap();
        assert_eq!(e.path, "q.alpha");
        let e = build(vec![("alpha", Value::Float(-0.1))]).err().unwrap();
        assert_eq!(e.path, "q.alpha");
        let e = build(vec![("target", Value::Str("0ms".into()))])
            .err()
            .unwrap();
        assert_eq!(e.path, "q.target");
    }

    #[test]
    fn registered_as_lstf_codel() {
        let t = Table(vec![
            ("kind".into(), Value::Str("lstf_codel".into())),
            ("alpha".into(), Value::Float(0.25)),
        ]);
        let q = crate::qdisc::build(&Value::Table(t), "q", &BuildCtx::default()).unwrap();
        assert!(matches!(q, crate::qdisc::AnyQdisc::LstfCodel(ref l) if l.alpha() == 0.25));
    }

    #[test]
    fn key_is_one_over_one_plus_slack_and_zero_at_zero() {
        assert_eq!(key_for_slack(0.0), 0.0);
        assert_eq!(key_for_slack(1.0), 0.5);
        assert_eq!(key_for_slack(0.25), 0.8);
        // strictly decreasing: larger slack → smaller key → earlier service
        assert!(key_for_slack(0.030) < key_for_slack(0.001));
        // non-negative f64 bit patterns order like the numbers
        let ks: [f64; 6] = [0.0, 1e-300, 0.3, 0.5, 0.9999, 1.0];
        for w in ks.windows(2) {
            assert!(w[0].to_bits() < w[1].to_bits());
        }
    }

    /// With the slack held constant every key is equal and the queue is FIFO. Arrivals
    /// every 1 ms, each dequeue 20 ms after its packet arrived: FIFO gives every packet a
    /// sojourn of exactly 20 ms, so with the slack preset to 20 ms it stays there (for any
    /// α) and order must be arrival order.
    #[test]
    fn constant_slack_serves_fifo() {
        for alpha in [0.125, 0.5, 0.875, 1.0] {
            let mut q = LstfCodel::new(1000, no_aqm(), alpha);
            q.slack_s = 0.020;
            let mut out = Vec::new();
            for t in 0..200u64 {
                enq(&mut q, t, ms(t));
                if t >= 20 {
                    out.push(deq(&mut q, ms(t)).unwrap());
                    assert!((q.slack_s() - 0.020).abs() < 1e-15, "{}", q.slack_s());
                }
            }
            assert!(out.windows(2).all(|w| w[0] < w[1]), "not FIFO: {out:?}");
            assert_eq!(out.len(), 180);
            assert_eq!(q.last_key(), 1.0 / 1.020);
        }
    }

    /// A larger slack gives a smaller key, so a packet that arrived while the slack was
    /// larger leaves before one that arrived earlier under a smaller slack.
    #[test]
    fn rising_slack_serves_later_arrivals_first() {
        let mut q = LstfCodel::new(1000, no_aqm(), 1.0);
        enq(&mut q, 0, ms(0)); // slack 0: key 0
        enq(&mut q, 1, ms(0)); // key 0
        assert_eq!(deq(&mut q, ms(1)), Some(0)); // sojourn 1 ms
        assert_eq!(q.slack_s(), secs(1));
        enq(&mut q, 10, ms(1)); // key 1/1.001
        assert_eq!(q.last_key(), 1.0 / (1.0 + secs(1)));
        assert_eq!(deq(&mut q, ms(30)), Some(1)); // key 0 first; sojourn 30 ms
        assert_eq!(q.slack_s(), secs(30));
        enq(&mut q, 11, ms(30)); // key 1/1.030 < 1/1.001
        assert_eq!(
            deq(&mut q, ms(31)),
            Some(11),
            "later arrival, larger slack, first"
        );
        assert_eq!(deq(&mut q, ms(32)), Some(10));
        assert_eq!(deq(&mut q, ms(33)), None);

        // Under a steadily rising slack the queue runs newest first: arrivals every 1 ms,
        // one dequeue every 4 ms pulling an old packet with key 0 (a growing sojourn).
        let mut q = LstfCodel::new(1000, no_aqm(), 0.5);
        for u in 0..20 {
            enq(&mut q, u, ms(0)); // key 0 while slack is 0
        }
        let mut keys = Vec::new();
        for k in 1..=5u64 {
            assert!(deq(&mut q, ms(4 * k)).unwrap() < 20);
            enq(&mut q, 100 + k, ms(4 * k));
            keys.push(q.last_key());
        }
        assert!(keys.windows(2).all(|w| w[1] < w[0]), "{keys:?}");
        // drain the remaining key-0 packets; then the late arrivals come newest first
        let mut rest = Vec::new();
        let mut bound = Bound::new(1_000, "drain the rest");
        while let Some(u) = deq(&mut q, ms(100)) {
            bound.tick();
            rest.push(u);
        }
        assert_eq!(&rest[rest.len() - 5..], &[105, 104, 103, 102, 101]);
    }

    /// α = 1: the slack is exactly the sojourn of the last packet the dequeue pulled,
    /// also when that packet was dropped by CoDel.
    #[test]
    fn alpha_one_slack_is_last_sojourn() {
        let mut q = LstfCodel::new(1000, no_aqm(), 1.0);
        let mut rng = Rng::from_seed(7);
        let mut now = ms(1);
        for u in 0..2000 {
            if rng.chance(0.55) {
                enq(&mut q, u, now);
            } else {
                let before = q.slack_s();
                let mut d = Drops::new();
                match q.dequeue(now, &mut d) {
                    Dequeue::Packet(p) => {
                        let soj = now.saturating_since(p.enqueued_at).as_secs_f64();
                        assert_eq!(q.slack_s(), soj);
                    }
                    _ => assert_eq!(q.slack_s(), before, "empty dequeue: no update"),
                }
            }
            now += Duration(rng.below(3_000_000));
        }

        // A dequeue that drops and then delivers: the sample is the last packet pulled,
        // which is the delivered one (a drop needs more than one MTU queued behind the
        // victim, so the pull after a drop always finds a packet).
        let mut q = LstfCodel::new(1000, CodelParams::linux_default(1514), 1.0);
        for u in 0..3 {
            let mut p = pkt(u, 1, 1000);
            p.enqueued_at = ms(5 * u);
            q.enqueue(p, ms(5 * u), &mut Drops::new());
        }
        q.vars = CodelVars {
            count: 1,
            lastcount: 1,
            dropping: true,
            rec_inv_sqrt: crate::qdisc::codel_law::REC_INV_SQRT_ONE,
            first_above_time: ms(10),
            drop_next: ms(200),
            ldelay: Duration::ZERO,
        };
        let mut d = Drops::new();
        // dropping: the tail (uid 2, 240 ms) is pulled with 2000 B behind it: dropped;
        // then uid 1 (245 ms) with 1000 B ≤ 1 MTU behind it: delivered, dropping ends.
        let out = q.dequeue(ms(250), &mut d).packet().unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d.as_slice()[0].pkt.uid, 2, "victim from the tail");
        assert_eq!(out.uid, 1);
        assert!(!q.vars().dropping);
        assert_eq!(q.slack_s(), secs(245), "sojourn of the last packet pulled");
    }

    /// With ECN on, CoDel's drop in the dropping state marks an ECT packet instead and
    /// delivers it (codel_dequeue: `INET_ECN_set_ce`, `ecn_mark++`); `ecn_marks` counts it.
    #[test]
    fn ecn_marks_instead_of_dropping_and_is_counted() {
        let params = CodelParams {
            ecn: true,
            ..CodelParams::linux_default(1514)
        };
        let mut q = LstfCodel::new(1000, params, 1.0);
        for u in 0..3 {
            let mut p = pkt(u, 1, 1000);
            p.ecn = crate::packet::Ecn::Ect0;
            p.enqueued_at = ms(5 * u);
            q.enqueue(p, ms(5 * u), &mut Drops::new());
        }
        q.vars = CodelVars {
            count: 1,
            lastcount: 1,
            dropping: true,
            rec_inv_sqrt: crate::qdisc::codel_law::REC_INV_SQRT_ONE,
            first_above_time: ms(10),
            drop_next: ms(200),
            ldelay: Duration::ZERO,
        };
        assert_eq!(q.ecn_marks(), 0);
        let mut d = Drops::new();
        let out = q.dequeue(ms(250), &mut d).packet().unwrap();
        assert!(d.is_empty(), "marked, not dropped");
        assert_eq!((out.uid, out.ecn), (2, crate::packet::Ecn::Ce));
        assert_eq!(q.ecn_marks(), 1);
    }

    /// α = 0: the slack never leaves 0, every key is 0, the queue is exactly FIFO.
    /// A tiny positive α is NOT the same: the order depends only on whether the slack
    /// rose, not by how much.
    #[test]
    fn alpha_zero_is_fifo_but_tiny_alpha_is_not() {
        let run = |alpha: f64| {
            let mut q = LstfCodel::new(1000, no_aqm(), alpha);
            let mut rng = Rng::from_seed(3);
            let mut now = ms(1);
            let mut out = Vec::new();
            let mut arrivals = 0;
            for u in 0..3000 {
                if rng.chance(0.6) {
                    enq(&mut q, u, now);
                    arrivals += 1;
                } else if let Some(x) = deq(&mut q, now) {
                    out.push(x);
                }
                if alpha == 0.0 {
                    assert_eq!(q.slack_s(), 0.0);
                    assert_eq!(q.last_key(), 0.0);
                }
                now += Duration(rng.below(2_000_000));
            }
            let mut bound = Bound::new(1_000_000, "drain");
            while let Some(x) = deq(&mut q, now) {
                bound.tick();
                out.push(x);
            }
            assert_eq!(out.len(), arrivals, "no AQM, no limit: all delivered");
            out
        };
        let fifo = run(0.0);
        assert!(fifo.windows(2).all(|w| w[0] < w[1]), "α = 0 must be FIFO");
        let tiny = run(1e-6);
        assert_eq!(tiny.len(), fifo.len());
        assert!(
            tiny.windows(2).any(|w| w[0] > w[1]),
            "a tiny α still reorders"
        );
    }

    /// In the dropping state packets come from the tail (largest key, newest among equal
    /// keys). With all packets stamped at the same instant the sojourn seen by CoDel is
    /// the same at either end, so the drop times must be exactly those of plain `codel`
    /// on the same input; only the victims differ (the newest instead of the oldest).
    #[test]
    fn drop_schedule_matches_codel_and_victims_are_the_newest() {
        let params = CodelParams::linux_default(1514);
        let mut c = Codel::new(1000, params);
        let mut l = LstfCodel::new(1000, params, 0.5);
        let mut d = Drops::new();
        for u in 0..1000 {
            let mut p = pkt(u, 1, 1000);
            p.enqueued_at = Time::ZERO;
            c.enqueue(p, Time::ZERO, &mut d);
            l.enqueue(p, Time::ZERO, &mut d);
        }
        let (mut tc, mut tl) = (Vec::new(), Vec::new());
        let (mut vc, mut vl) = (Vec::new(), Vec::new());
        // every packet LSTFCoDel pulls in a dequeue that starts in the dropping state
        let mut pulled_in_dropping = Vec::new();
        for m in 10..1000u64 {
            let now = ms(m);
            c.dequeue(now, &mut d);
            for x in d.drain() {
                tc.push(m);
                vc.push(x.pkt.uid);
            }
            let was_dropping = l.vars().dropping;
            let out = l.dequeue(now, &mut d).packet();
            for x in d.drain() {
                assert_eq!(x.reason, DropReason::Aqm);
                tl.push(m);
                vl.push(x.pkt.uid);
                if was_dropping {
                    pulled_in_dropping.push(x.pkt.uid);
                }
            }
            if let (true, Some(p)) = (was_dropping, out) {
                pulled_in_dropping.push(p.uid);
            }
        }
        assert!(tc.len() >= 15, "{tc:?}");
        assert_eq!(tl, tc, "same drop instants as codel");
        assert_eq!(c.stats().drop_count, l.stats().drop_count);
        // codel drops from the head (oldest first)
        assert!(vc.windows(2).all(|w| w[0] < w[1]), "{vc:?}");
        // LSTFCoDel: the drop that enters the dropping state is the head packet (the flag
        // is not yet set), the same one codel drops; after that everything is pulled from
        // the tail, newest first: drops and the deliveries between them
        assert_eq!(vl[0], vc[0]);
        assert_eq!(
            pulled_in_dropping[0], 999,
            "first pull in dropping: the newest"
        );
        assert!(
            pulled_in_dropping.windows(2).all(|w| w[0] > w[1]),
            "{pulled_in_dropping:?}"
        );
        assert!(pulled_in_dropping.len() > 100);
        assert!(vl[1..].iter().all(|&u| u > vc[0]));
    }

    /// The B-tree + slab against a naive O(n) model of the seed's rules (no CoDel drops):
    /// same order, same slack, same keys, with a bounded queue and slot reuse.
    #[test]
    fn matches_naive_model() {
        for seed in 0..6 {
            let alpha = [0.125, 0.25, 0.5, 0.875, 1.0, 0.0][seed as usize];
            let mut q = LstfCodel::new(40, no_aqm(), alpha);
            let mut rng = Rng::from_seed(100 + seed);
            let mut model: Vec<(f64, u64, u64, Time)> = Vec::new(); // key, seq, uid, at
            let mut slack = 0.0f64;
            let mut seq = 0;
            let mut now = ms(1);
            let mut d = Drops::new();
            for u in 0..4000 {
                if rng.chance(0.5) {
                    let mut p = pkt(u, 1, 100 + rng.below(1400) as u32);
                    p.enqueued_at = now;
                    let v = q.enqueue(p, now, &mut d);
                    if model.len() >= 40 {
                        assert_eq!(v, Verdict::Dropped);
                        d.clear();
                    } else {
                        let key = if slack == 0.0 {
                            0.0
                        } else {
                            1.0 / (1.0 + slack)
                        };
                        model.push((key, seq, u, now));
                        seq += 1;
                    }
                } else {
                    let got = q.dequeue(now, &mut d).packet().map(|p| p.uid);
                    let best = (0..model.len()).min_by(|&a, &b| {
                        (model[a].0, model[a].1)
                            .partial_cmp(&(model[b].0, model[b].1))
                            .unwrap()
                    });
                    let want = best.map(|i| model.remove(i));
                    assert_eq!(got, want.map(|w| w.2));
                    if let Some(w) = want {
                        let s = now.saturating_since(w.3).as_secs_f64();
                        slack = (1.0 - alpha) * slack + alpha * s;
                    }
                    assert_eq!(q.slack_s(), slack);
                }
                now += Duration(rng.below(4_000_000));
            }
            assert!(q.queue.slab.len() <= 40, "slots are reused");
        }
    }

    #[test]
    fn tail_drops_at_limit_packets() {
        let mut q = LstfCodel::new(3, CodelParams::linux_default(1514), 0.5);
        let mut d = Drops::new();
        for i in 0..5 {
            let v = q.enqueue(pkt(i, 1, 100), Time::ZERO, &mut d);
            assert_eq!(v == Verdict::Dropped, i >= 3);
        }
        assert_eq!(q.len_packets(), 3);
        assert_eq!(q.len_bytes(), 300);
        assert_eq!(q.drop_overlimit(), 2);
        assert!(d.drain().all(|x| x.reason == DropReason::Overlimit));
    }

    #[test]
    fn observe_reports_slack_key_and_codel_state() {
        let mut q = LstfCodel::new(100, no_aqm(), 1.0);
        enq(&mut q, 0, ms(0));
        deq(&mut q, ms(40));
        enq(&mut q, 1, ms(40));
        let mut seen = Vec::new();
        q.observe(ms(40), &mut |n, v| seen.push((n.to_string(), v)));
        let get = |n: &str| seen.iter().find(|(k, _)| k == n).unwrap().1;
        assert!((get("slack_ms") - 40.0).abs() < 1e-9);
        assert_eq!(get("key"), 1.0 / 1.040);
        assert_eq!(get("count"), 0.0);
        assert_eq!(get("dropping"), 0.0);
    }

    #[test]
    fn lstf_codel_conservation_property() {
        for seed in 0..12 {
            let params = crate::qdisc::testkit::varied_codel_params(seed);
            let limit = 20 + 10 * seed as usize;
            let alpha = [0.0, 0.125, 0.5, 0.875, 1.0][seed as usize % 5];
            let mut q = LstfCodel::new(limit, params, alpha);
            check_conservation(&mut q, seed, 5_000, |q| {
                q.len_packets() <= limit && q.queue.slab.len() <= limit
            });
        }
    }
}
