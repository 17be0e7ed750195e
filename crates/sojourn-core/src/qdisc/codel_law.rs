//! The CoDel control law (RFC 8289), structured like Linux `include/net/codel_impl.h` so that
//! every CoDel-managed queue shares one implementation: `sch_codel` ([`super::codel`]),
//! each flow of `fq_codel` ([`super::fq_codel`]), and later CoDel over a priority queue
//! (LSTFCoDel) or age-based variants. The law does not know what the queue is: it pops the
//! head through the [`CodelQueue`] trait and asks it for the *whole qdisc's* byte backlog.
//!
//! Arithmetic follows Linux, not the RFC's floating-point pseudocode:
//! - `1/sqrt(count)` is `rec_inv_sqrt`, a u16 in Q0.16 (used as Q0.32 after `<< 16`),
//!   refreshed by **one** integer Newton step per change of `count` ([`newton_step`]), so it
//!   lags the exact value early in an episode (count 2 gives 0.5, not 0.707);
//! - the control law is `t + (interval * (rec_inv_sqrt << 16)) >> 32` ([`control_law`]);
//! - in the dropping state the next drop is scheduled from the previous `drop_next`, not
//!   from `now` (also after an ECN mark);
//! - re-entering the dropping state within 16 intervals of the last scheduled drop reuses
//!   `count - lastcount` with one Newton step from the stale `rec_inv_sqrt`;
//! - a packet is "above target" only if its sojourn is `>= target` (Linux tests
//!   `ldelay < target` for "below") **and** more than one MTU stays queued in the whole qdisc;
//!   it may be dropped only strictly after `first_above_time`;
//! - `ce_threshold` marks ECT packets whose sojourn exceeds it, independently of `ecn`.
//!
//! Time is in nanoseconds instead of Linux's 1024-ns `codel_time_t` ticks (so target 5 ms
//! is exactly 5 ms, not 4882 ticks = 4.999 ms), and comparisons are on u64 instants that
//! cannot wrap. Linux ≥ 6.15 caps the dropping loop at 256 drops per dequeue; this follows
//! the uncapped classic loop (the cap only matters after a long stall in dropping state).

use super::vocab::{DropReason, Drops};
use crate::packet::Packet;
use crate::time::{Duration, Time};

/// `rec_inv_sqrt` is kept in 16 bits and used as Q0.32 after this shift (`REC_INV_SQRT_SHIFT`).
const REC_INV_SQRT_SHIFT: u32 = 16;
/// `~0U >> REC_INV_SQRT_SHIFT`: 1/sqrt(1) ≈ 0.99998 in Q0.16.
pub const REC_INV_SQRT_ONE: u16 = 0xFFFF;

/// The configuration shared by every queue a CoDel instance manages (`codel_params`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelParams {
    /// Acceptable standing sojourn time (Linux default 5 ms).
    pub target: Duration,
    /// Sliding window over which sojourn must stay above target before dropping, and the
    /// base of the control law (Linux default 100 ms).
    pub interval: Duration,
    /// Whole-qdisc backlog at or below which nothing is dropped (`psched_mtu`, 1514 B).
    pub mtu_bytes: u32,
    /// Mark ECT packets instead of dropping them.
    pub ecn: bool,
    /// Mark (ECT) packets whose sojourn exceeds this, whatever `ecn` says; `None` = off.
    pub ce_threshold: Option<Duration>,
}

impl CodelParams {
    /// Linux defaults: target 5 ms, interval 100 ms, ecn off, ce_threshold off.
    pub fn linux_default(mtu_bytes: u32) -> CodelParams {
        CodelParams {
            target: Duration::from_ms(5),
            interval: Duration::from_ms(100),
            mtu_bytes,
            ecn: false,
            ce_threshold: None,
        }
    }
}

/// Per-queue CoDel state (`codel_vars`). `Default` is `codel_vars_init` (all zero).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelVars {
    /// Drops (or marks) since entering the dropping state; drives the control law.
    pub count: u32,
    /// `count` when the dropping state was last entered (for the re-entry heuristic).
    pub lastcount: u32,
    /// In the dropping state.
    pub dropping: bool,
    /// 1/sqrt(count) in Q0.16.
    pub rec_inv_sqrt: u16,
    /// When sojourn may first be judged "above target for an interval"; `Time::ZERO` = unset.
    pub first_above_time: Time,
    /// When the next drop is due (kept after leaving the dropping state: re-entry uses it).
    pub drop_next: Time,
    /// Sojourn time of the last packet examined (`ldelay`).
    pub ldelay: Duration,
}

/// Counters of one CoDel instance (`codel_stats`), shared by all its queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelStats {
    /// Largest packet seen (statistic only, as in current kernels).
    pub maxpacket: u32,
    /// Packets dropped by the control law.
    pub drop_count: u64,
    /// Bytes dropped by the control law.
    pub drop_bytes: u64,
    /// Packets CE-marked by the control law instead of dropped (`ecn_mark`).
    pub ecn_mark: u64,
    /// Packets CE-marked by `ce_threshold` (`ce_mark`; a packet the control law has just
    /// marked and `ce_threshold` marks again is counted here too, as in Linux).
    pub ce_mark: u64,
    /// Distinct packets marked (what `Qdisc::ecn_marks` reports): `ecn_mark` plus the
    /// `ce_threshold` marks of packets the control law did not mark in the same call.
    pub marked_packets: u64,
}

/// The queue a CoDel instance manages. Linux passes these as callbacks
/// (`dequeue_func`, `skb_time_func`, the `backlog` pointer).
pub trait CodelQueue {
    /// Removes and returns the packet CoDel should judge next (the head of a FIFO, the
    /// first in order of a priority queue), updating the queue's and the whole qdisc's
    /// packet and byte counts. `None` if this queue is empty. `vars` is the queue's CoDel
    /// state, as Linux passes it to `dequeue_func`, so a queue may choose differently while
    /// `vars.dropping` (LSTFCoDel takes the victim from the other end in that state).
    fn dequeue_head(&mut self, vars: &CodelVars) -> Option<Packet>;
    /// Bytes still queued in the **whole qdisc** (after the packets already removed).
    fn backlog_bytes(&self) -> u64;
    /// When the packet's sojourn started (`codel_get_enqueue_time`).
    #[inline]
    fn enqueue_time(&self, pkt: &Packet) -> Time {
        pkt.enqueued_at
    }
}

/// One Newton–Raphson step of `x ← x·(3 − count·x²)/2` for x = 1/sqrt(count), in Linux's
/// fixed point (`codel_Newton_step`): x is Q0.32 while computing, 2 bits of headroom are
/// taken before the final multiply, and the result is truncated back to Q0.16. All
/// arithmetic is modular u64 as in C (it only matters if `count·x²` exceeds 3, e.g. after
/// fq_codel adds a batch of drops to `count`; the kernel then produces the same odd value).
#[inline]
pub fn newton_step(vars: &mut CodelVars) {
    let invsqrt = (vars.rec_inv_sqrt as u64) << REC_INV_SQRT_SHIFT; // Q0.32
    let invsqrt2 = (invsqrt * invsqrt) >> 32; // x², Q0.32
    let mut val = (3u64 << 32).wrapping_sub((vars.count as u64).wrapping_mul(invsqrt2));
    val >>= 2; // avoid overflow in the next multiply
    val = val.wrapping_mul(invsqrt) >> (32 - 2 + 1);
    vars.rec_inv_sqrt = (val >> REC_INV_SQRT_SHIFT) as u16;
}

/// `codel_control_law`: `t + interval / sqrt(count)` with the Q0.32 reciprocal
/// (`reciprocal_scale(interval, rec_inv_sqrt << 16)`).
#[inline]
pub fn control_law(t: Time, interval: Duration, rec_inv_sqrt: u16) -> Time {
    let scale = (rec_inv_sqrt as u128) << REC_INV_SQRT_SHIFT;
    t + Duration(((interval.0 as u128 * scale) >> 32) as u64)
}

/// `codel_should_drop`: judges the packet just removed (`None` if the queue was empty).
/// True iff its sojourn has been at or above target, with more than one MTU left in the
/// qdisc, continuously for longer than an interval.
#[inline]
pub fn should_drop<Q: CodelQueue + ?Sized>(
    pkt: Option<&Packet>,
    queue: &Q,
    params: &CodelParams,
    vars: &mut CodelVars,
    stats: &mut CodelStats,
    now: Time,
) -> bool {
    let Some(pkt) = pkt else {
        vars.first_above_time = Time::ZERO;
        return false;
    };
    vars.ldelay = now.saturating_since(queue.enqueue_time(pkt));
    stats.maxpacket = stats.maxpacket.max(pkt.len_bytes);

    // Below target (strict `<`), or no more than one MTU queued in the whole qdisc: good
    // queue; stay below for at least an interval before dropping again (RFC 8289 §5.3).
    if vars.ldelay < params.target || queue.backlog_bytes() <= params.mtu_bytes as u64 {
        vars.first_above_time = Time::ZERO;
        return false;
    }
    if vars.first_above_time == Time::ZERO {
        // Just went above: drop only if it stays above for an interval.
        vars.first_above_time = now + params.interval;
        false
    } else {
        now > vars.first_above_time
    }
}

/// Drops `pkt` on behalf of the control law.
#[inline]
fn aqm_drop(pkt: Packet, stats: &mut CodelStats, drops: &mut Drops) {
    stats.drop_count += 1;
    stats.drop_bytes += pkt.len_bytes as u64;
    drops.push(pkt, DropReason::Aqm);
}

/// `codel_dequeue`: removes packets from `queue` until one may leave, dropping (or, with
/// `ecn`, marking) per the control law; drops go to `drops` with [`DropReason::Aqm`].
/// Returns `None` when the queue is (or became) empty.
pub fn codel_dequeue<Q: CodelQueue + ?Sized>(
    queue: &mut Q,
    params: &CodelParams,
    vars: &mut CodelVars,
    stats: &mut CodelStats,
    now: Time,
    drops: &mut Drops,
) -> Option<Packet> {
    // The packet stays in this one `Option` until it is returned or dropped (unwrapping
    // and re-wrapping it cost a ~200-byte copy per dequeue; issue 19, session 9).
    let mut pkt = queue.dequeue_head(vars);
    if pkt.is_none() {
        // An empty queue cannot be above target: leave the dropping state and forget
        // `first_above_time` (RFC 8289 §5.4 reference `dodequeue`; Linux since commit
        // 815980fe6dbb "net_sched: codel: fix stale state for empty flows in fq_codel",
        // 2026 — before it, a sparse fq_codel flow kept a stale timestamp and its next
        // packet, arriving more than an interval later, was dropped at once).
        vars.dropping = false;
        vars.first_above_time = Time::ZERO;
        return None;
    }
    let mut marked_by_law = false;
    let drop = should_drop(pkt.as_ref(), queue, params, vars, stats, now);

    if vars.dropping {
        if !drop {
            // Sojourn went below target (or the backlog is tiny): leave the dropping state.
            vars.dropping = false;
        } else if now >= vars.drop_next {
            // Time for the next drop(s). A large backlog may make several due at once.
            while vars.dropping && now >= vars.drop_next {
                vars.count = vars.count.wrapping_add(1);
                newton_step(vars);
                let p = pkt.as_mut().expect("dropping loop holds a packet");
                if params.ecn && p.set_ce() {
                    stats.ecn_mark += 1;
                    stats.marked_packets += 1;
                    marked_by_law = true;
                    // Linux schedules from the previous drop_next here too.
                    vars.drop_next =
                        control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                    break;
                }
                aqm_drop(pkt.take().expect("held"), stats, drops);
                pkt = queue.dequeue_head(vars);
                if !should_drop(pkt.as_ref(), queue, params, vars, stats, now) {
                    vars.dropping = false;
                } else {
                    vars.drop_next =
                        control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                }
            }
        }
    } else if drop {
        // Entering the dropping state: signal this packet.
        let p = pkt.as_mut().expect("held");
        if params.ecn && p.set_ce() {
            stats.ecn_mark += 1;
            stats.marked_packets += 1;
            marked_by_law = true;
        } else {
            aqm_drop(pkt.take().expect("held"), stats, drops);
            pkt = queue.dequeue_head(vars);
            // Evaluated for its side effects (first_above_time, ldelay) only.
            let _ = should_drop(pkt.as_ref(), queue, params, vars, stats, now);
        }
        vars.dropping = true;
        // If we were dropping recently, the previous episode's rate is a good start
        // (re-entry within 16 intervals of the last scheduled drop, Linux heuristic).
        let delta = vars.count.wrapping_sub(vars.lastcount);
        if delta > 1 && now.diff_ns(vars.drop_next) < (params.interval.0 as i64).saturating_mul(16)
        {
            vars.count = delta;
            newton_step(vars);
        } else {
            vars.count = 1;
            vars.rec_inv_sqrt = REC_INV_SQRT_ONE;
        }
        vars.lastcount = vars.count;
        vars.drop_next = control_law(now, params.interval, vars.rec_inv_sqrt);
    }

    // ce_threshold marking (DCTCP-style), independent of the `ecn` flag.
    if let (Some(p), Some(ce)) = (pkt.as_mut(), params.ce_threshold) {
        if vars.ldelay > ce && p.set_ce() {
            stats.ce_mark += 1;
            if !marked_by_law {
                stats.marked_packets += 1;
            }
        }
    }
    pkt
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Ecn;
    use crate::qdisc::testkit::pkt;
    use std::collections::VecDeque;

    /// A plain FIFO whose backlog is the whole "qdisc".
    #[derive(Default)]
    struct Fifo {
        q: VecDeque<Packet>,
        backlog: u64,
    }
    impl Fifo {
        fn push(&mut self, p: Packet) {
            self.backlog += p.len_bytes as u64;
            self.q.push_back(p);
        }
    }
    impl CodelQueue for Fifo {
        fn dequeue_head(&mut self, _vars: &CodelVars) -> Option<Packet> {
            let p = self.q.pop_front()?;
            self.backlog -= p.len_bytes as u64;
            Some(p)
        }
        fn backlog_bytes(&self) -> u64 {
            self.backlog
        }
    }

    fn stamped(uid: u64, len: u32, at: Time) -> Packet {
        let mut p = pkt(uid, 1, len);
        p.enqueued_at = at;
        p
    }

    /// Linux's rec_inv_sqrt after each Newton step as count climbs 1, 2, 3, … in one
    /// episode (docs/disciplines/codel.md).
    #[test]
    fn newton_step_matches_linux_table() {
        let table = [
            (1u32, 0.99998),
            (2, 0.5000),
            (3, 0.5625),
            (4, 0.4878),
            (5, 0.4415),
            (8, 0.3515),
            (10, 0.3150),
        ];
        let mut v = CodelVars {
            count: 1,
            rec_inv_sqrt: REC_INV_SQRT_ONE,
            ..Default::default()
        };
        let mut got = vec![(1u32, v.rec_inv_sqrt as f64 / 65536.0)];
        for c in 2..=10 {
            v.count = c;
            newton_step(&mut v);
            got.push((c, v.rec_inv_sqrt as f64 / 65536.0));
        }
        for (c, want) in table {
            let (_, x) = got[(c - 1) as usize];
            assert!((x - want).abs() < 1e-4, "count {c}: {x} vs Linux {want}");
        }
        // and it is NOT the exact 1/sqrt(2) (the classic simulator mistake)
        assert!((got[1].1 - std::f64::consts::FRAC_1_SQRT_2).abs() > 0.1);
    }

    #[test]
    fn control_law_scales_interval_by_rec_inv_sqrt() {
        let i = Duration::from_ms(100);
        assert_eq!(control_law(Time(7), i, 0x8000), Time(7 + 50_000_000));
        // 0xFFFF ≈ 0.99998: 100 ms · 65535/65536
        assert_eq!(control_law(Time(0), i, REC_INV_SQRT_ONE), Time(99_998_474));
    }

    fn params() -> CodelParams {
        CodelParams::linux_default(1514)
    }

    /// One packet judged at `now` with the given sojourn, the rest of the qdisc holding
    /// `rest` bytes.
    fn judge(vars: &mut CodelVars, sojourn: Duration, rest: u64, now: Time) -> bool {
        let q = Fifo {
            backlog: rest,
            ..Default::default()
        };
        let p = stamped(0, 100, now - sojourn);
        should_drop(
            Some(&p),
            &q,
            &params(),
            vars,
            &mut CodelStats::default(),
            now,
        )
    }

    #[test]
    fn should_drop_is_strict_on_target_and_first_above_time() {
        let mut v = CodelVars::default();
        let t0 = Time::from_ns(1_000_000_000);
        // sojourn just below target: below
        assert!(!judge(
            &mut v,
            Duration::from_ms(5) - Duration(1),
            10_000,
            t0
        ));
        assert_eq!(v.first_above_time, Time::ZERO);
        // sojourn == target counts as above (Linux tests `ldelay < target` for below)
        assert!(!judge(&mut v, Duration::from_ms(5), 10_000, t0));
        assert_eq!(v.first_above_time, t0 + Duration::from_ms(100));
        // at exactly first_above_time: not yet (strictly after)
        let fat = v.first_above_time;
        assert!(!judge(&mut v, Duration::from_ms(50), 10_000, fat));
        assert!(judge(
            &mut v,
            Duration::from_ms(50),
            10_000,
            fat + Duration(1)
        ));
    }

    #[test]
    fn one_mtu_whole_backlog_exemption() {
        let mut v = CodelVars::default();
        let t0 = Time::from_ns(1_000_000_000);
        assert!(!judge(&mut v, Duration::from_ms(50), 1514, t0));
        assert_eq!(v.first_above_time, Time::ZERO, "<= 1 MTU left: good queue");
        assert!(!judge(&mut v, Duration::from_ms(50), 1515, t0));
        assert_ne!(v.first_above_time, Time::ZERO, "1515 B left: above");
        // the exemption resets an ongoing above-target period
        assert!(!judge(
            &mut v,
            Duration::from_ms(50),
            1514,
            t0 + Duration::from_ms(200)
        ));
        assert_eq!(v.first_above_time, Time::ZERO);
    }

    /// Constant overload: arrivals every 0.5 ms, one dequeue per 1 ms. Returns the drop
    /// (or mark) times and the time sojourn first reached target.
    fn overload(ecn: bool, ect: bool) -> (Vec<Time>, Time, Vec<Time>) {
        let p = CodelParams { ecn, ..params() };
        let mut q = Fifo::default();
        let mut v = CodelVars::default();
        let mut st = CodelStats::default();
        let mut drops = Drops::new();
        let mut uid = 0;
        let mut first_above = None;
        let mut drop_times = Vec::new();
        let mut mark_times = Vec::new();
        for ms in 1..=600u64 {
            let now = Time::from_ns(ms * 1_000_000);
            for half in 0..2 {
                let mut pk = stamped(uid, 1000, now - Duration::from_us(500 * half));
                if ect {
                    pk.ecn = Ecn::Ect0;
                }
                q.push(pk);
                uid += 1;
            }
            let out = codel_dequeue(&mut q, &p, &mut v, &mut st, now, &mut drops);
            let out = out.expect("never empty under overload");
            if first_above.is_none() && v.ldelay >= p.target {
                first_above = Some(now);
            }
            if out.ecn == Ecn::Ce {
                mark_times.push(now);
            }
            for _ in drops.drain() {
                drop_times.push(now);
            }
        }
        (drop_times, first_above.unwrap(), mark_times)
    }

    /// Drop instants follow the Linux control law: first drop one interval after sojourn
    /// reached target, then drop_next(k) = drop_next(k-1) + interval·rec_inv_sqrt(k) with
    /// rec_inv_sqrt from the Linux table (0.99998, 0.5, 0.5625, 0.4878, 0.4415, …), each
    /// drop at the first dequeue (every 1 ms) at or after its scheduled time.
    fn check_spacing(times: &[Time], first_above: Time) {
        let interval = 100e-3;
        let t1 = times[0].as_secs_f64();
        let fa = first_above.as_secs_f64();
        assert!(
            t1 > fa + interval,
            "no drop within an interval of going above target"
        );
        assert!(
            t1 <= fa + interval + 1e-3 + 1e-9,
            "first drop at the first dequeue after it"
        );
        let r = [0.99998, 0.5000, 0.5625, 0.4878, 0.4415];
        let mut sched = t1;
        for k in 1..r.len() {
            sched += interval * r[k - 1];
            let t = times[k].as_secs_f64();
            assert!(
                t >= sched - 5e-5 && t < sched + 1e-3 + 5e-5,
                "drop {} at {t}, Linux schedules it at {sched}",
                k + 1
            );
        }
        // second gap ≈ interval·0.5 (exact sqrt would give 0.707)
        let gap2 = times[2].as_secs_f64() - times[1].as_secs_f64();
        assert!((gap2 - 0.05).abs() <= 1.1e-3, "{gap2}");
    }

    #[test]
    fn overload_drop_times_follow_linux_control_law() {
        let (drops, first_above, marks) = overload(false, true);
        assert!(marks.is_empty(), "ecn off: no marks");
        assert!(drops.len() >= 5, "{drops:?}");
        check_spacing(&drops, first_above);
    }

    #[test]
    fn ecn_marks_instead_of_drops_with_same_schedule() {
        let (drops, first_above, marks) = overload(true, true);
        assert!(
            drops.is_empty(),
            "ECT packets are marked, not dropped: {drops:?}"
        );
        assert!(marks.len() >= 5);
        // marks scheduled from the previous drop_next, exactly like drops
        check_spacing(&marks, first_above);
        // Not-ECT traffic is still dropped with ecn on
        let (drops, first_above, marks) = overload(true, false);
        assert!(marks.is_empty());
        check_spacing(&drops, first_above);
    }

    /// Drives a queue into the dropping state with old packets, then feeds fresh ones.
    #[test]
    fn leaves_dropping_on_a_packet_under_target_and_reenters_with_count_delta() {
        let p = params();
        let mut q = Fifo::default();
        let mut v = CodelVars::default();
        let mut st = CodelStats::default();
        let mut d = Drops::new();
        // 400 packets all stamped at t=0; dequeue every 1 ms from t=10 ms.
        for i in 0..400 {
            q.push(stamped(i, 1000, Time::ZERO));
        }
        let mut now = Time::from_ns(10_000_000);
        // Bounded: a wrong control law must fail this test, not hang it.
        for _ in 0..400 {
            if st.drop_count >= 4 {
                break;
            }
            codel_dequeue(&mut q, &p, &mut v, &mut st, now, &mut d);
            now += Duration::from_ms(1);
        }
        assert_eq!(st.drop_count, 4, "4 drops within 400 dequeues");
        assert_eq!(
            st.drop_bytes, 4000,
            "four 1000-byte packets (codel_stats.drop_len)"
        );
        assert!(v.dropping);
        let (count, lastcount) = (v.count, v.lastcount);
        assert_eq!((count, lastcount), (4, 1));
        // A fresh packet at the head (everything older gone): leaves dropping state.
        let rest: Vec<Packet> = q.q.drain(..).collect();
        q.backlog = 0;
        q.push(stamped(1000, 1000, now));
        for mut r in rest {
            r.enqueued_at = now;
            q.push(r);
        }
        let out = codel_dequeue(&mut q, &p, &mut v, &mut st, now, &mut d).unwrap();
        assert_eq!(out.uid, 1000);
        assert!(!v.dropping, "a packet under target ends the dropping state");
        assert_eq!(v.count, 4, "count is kept for a later re-entry");
        // Re-enter soon (well within 16 intervals of drop_next): count = count - lastcount.
        let stale = v.rec_inv_sqrt;
        let t2 = now + Duration::from_ms(300);
        // first packet sets first_above_time, second (after an interval) enters dropping
        codel_dequeue(&mut q, &p, &mut v, &mut st, t2, &mut d);
        let t3 = t2 + Duration::from_ms(101);
        let before = st.drop_count;
        codel_dequeue(&mut q, &p, &mut v, &mut st, t3, &mut d);
        assert_eq!(st.drop_count, before + 1);
        assert!(v.dropping);
        assert_eq!(v.count, 3, "count - lastcount = 4 - 1");
        let mut expect = CodelVars {
            count: 3,
            rec_inv_sqrt: stale,
            ..Default::default()
        };
        newton_step(&mut expect);
        assert_eq!(
            v.rec_inv_sqrt, expect.rec_inv_sqrt,
            "one Newton step from the stale value"
        );
        assert_eq!(
            v.drop_next,
            control_law(t3, p.interval, expect.rec_inv_sqrt)
        );
        assert_eq!(v.lastcount, 3);
    }

    #[test]
    fn reentry_after_16_intervals_restarts_at_count_one() {
        let p = params();
        let mut v = CodelVars {
            count: 9,
            lastcount: 1,
            rec_inv_sqrt: 0x5000,
            drop_next: Time::from_ns(1_000_000_000),
            ..Default::default()
        };
        let mut st = CodelStats::default();
        let mut d = Drops::new();
        let mut q = Fifo::default();
        for i in 0..50 {
            q.push(stamped(i, 1000, Time::ZERO));
        }
        // 16 intervals after drop_next exactly: not "before", so a fresh start.
        let t = v.drop_next + p.interval * 16;
        v.first_above_time = t - Duration(1);
        codel_dequeue(&mut q, &p, &mut v, &mut st, t, &mut d);
        assert!(v.dropping);
        assert_eq!((v.count, v.rec_inv_sqrt), (1, REC_INV_SQRT_ONE));
        // one ns earlier it would have resumed at 8
        let mut v2 = CodelVars {
            count: 9,
            lastcount: 1,
            rec_inv_sqrt: 0x5000,
            drop_next: Time::from_ns(1_000_000_000),
            first_above_time: t - Duration(2),
            ..Default::default()
        };
        codel_dequeue(&mut q, &p, &mut v2, &mut st, t - Duration(1), &mut d);
        assert_eq!(v2.count, 8);
    }

    /// Entering the dropping state with `ecn`: the head ECT packet is marked and still
    /// delivered, counted once as a law mark, and the episode starts at count 1 with
    /// drop_next one interval (× 0xFFFF/65536) after now.
    #[test]
    fn ecn_mark_on_entering_the_dropping_state_is_counted() {
        let p = CodelParams {
            ecn: true,
            ..params()
        };
        let mut q = Fifo::default();
        for i in 0..10 {
            let mut pk = stamped(i, 1000, Time::ZERO);
            pk.ecn = Ecn::Ect0;
            q.push(pk);
        }
        let now = Time::from_ns(1_000_000_000);
        let mut v = CodelVars {
            first_above_time: now - Duration(1),
            ..Default::default()
        };
        let mut st = CodelStats::default();
        let mut d = Drops::new();
        let out = codel_dequeue(&mut q, &p, &mut v, &mut st, now, &mut d).unwrap();
        assert_eq!((out.uid, out.ecn), (0, Ecn::Ce));
        assert!(d.is_empty() && v.dropping);
        assert_eq!((st.ecn_mark, st.marked_packets, st.drop_count), (1, 1, 0));
        assert_eq!((v.count, v.lastcount), (1, 1));
        assert_eq!(v.drop_next, Time::from_ns(1_099_998_474));
    }

    /// Re-entry with count − lastcount = 1 is not "dropping recently" (Linux tests
    /// `delta > 1`): count restarts at 1 with rec_inv_sqrt ≈ 1, not a Newton step from
    /// the stale 0.5.
    #[test]
    fn reentry_with_a_count_delta_of_one_restarts_at_count_one() {
        let p = params();
        let mut q = Fifo::default();
        for i in 0..10 {
            q.push(stamped(i, 1000, Time::ZERO));
        }
        let now = Time::from_ns(1_000_000_000);
        let mut v = CodelVars {
            count: 2,
            lastcount: 1,
            rec_inv_sqrt: 0x8000,
            drop_next: now - Duration::from_ms(50),
            first_above_time: now - Duration(1),
            ..Default::default()
        };
        let mut st = CodelStats::default();
        let mut d = Drops::new();
        codel_dequeue(&mut q, &p, &mut v, &mut st, now, &mut d);
        assert!(v.dropping);
        assert_eq!((st.drop_count, st.drop_bytes), (1, 1000));
        assert_eq!((v.count, v.rec_inv_sqrt), (1, 0xFFFF));
        assert_eq!(v.drop_next, Time::from_ns(1_099_998_474));
    }

    /// A mark in the dropping state schedules the next signal from the previous
    /// drop_next (Linux), not from now (ns-3's CoDelQueueDisc does the latter).
    #[test]
    fn ecn_mark_in_dropping_state_schedules_from_drop_next() {
        let p = CodelParams {
            ecn: true,
            ..params()
        };
        let d0 = Time::from_ns(1_000_000_000);
        let mut v = CodelVars {
            count: 2,
            lastcount: 1,
            dropping: true,
            rec_inv_sqrt: 0x8000,
            first_above_time: Time::from_ns(500_000_000),
            drop_next: d0,
            ldelay: Duration::ZERO,
        };
        let mut q = Fifo::default();
        for i in 0..10 {
            let mut pk = stamped(i, 1000, Time::ZERO);
            pk.ecn = Ecn::Ect0;
            q.push(pk);
        }
        let mut st = CodelStats::default();
        let mut d = Drops::new();
        let now = d0 + Duration::from_us(700);
        let out = codel_dequeue(&mut q, &p, &mut v, &mut st, now, &mut d).unwrap();
        assert_eq!(out.ecn, Ecn::Ce);
        assert!(d.is_empty());
        assert_eq!(v.count, 3);
        assert_eq!(v.rec_inv_sqrt as f64 / 65536.0, 0.5625);
        assert_eq!(
            v.drop_next,
            d0 + Duration(56_250_000),
            "drop_next + 100 ms · 0.5625"
        );
        assert_eq!(st.ecn_mark, 1);
    }

    #[test]
    fn ce_threshold_marks_independently_of_ecn() {
        let p = CodelParams {
            ce_threshold: Some(Duration::from_ms(1)),
            ..params()
        };
        let mut q = Fifo::default();
        let mut v = CodelVars::default();
        let mut st = CodelStats::default();
        let mut d = Drops::new();
        let now = Time::from_ns(100_000_000);
        let mut a = stamped(1, 1000, now - Duration::from_ms(2));
        a.ecn = Ecn::Ect1;
        let b = stamped(2, 1000, now - Duration::from_ms(2)); // Not-ECT
        let mut c = stamped(3, 1000, now - Duration::from_ms(1)); // exactly at threshold
        c.ecn = Ecn::Ect0;
        q.push(a);
        q.push(b);
        q.push(c);
        let a = codel_dequeue(&mut q, &p, &mut v, &mut st, now, &mut d).unwrap();
        assert_eq!(
            a.ecn,
            Ecn::Ce,
            "ECT above ce_threshold is marked with ecn off"
        );
        let b = codel_dequeue(&mut q, &p, &mut v, &mut st, now, &mut d).unwrap();
        assert_eq!(b.ecn, Ecn::NotEct, "Not-ECT is neither marked nor dropped");
        let c = codel_dequeue(&mut q, &p, &mut v, &mut st, now, &mut d).unwrap();
        assert_eq!(c.ecn, Ecn::Ect0, "strictly above the threshold only");
        assert!(d.is_empty());
        assert_eq!((st.ce_mark, st.marked_packets), (1, 1));
    }
}
