//! COBALT ("CoDel + BLUE Alternate"), the per-queue AQM of CAKE (Linux `sch_cake`).
//!
//! Two controllers run side by side on every queue:
//! - a CoDel variant (RFC 8289 control law `t + interval/sqrt(count)`) whose 1/sqrt(count) comes
//!   from a 16-entry table for small counts and one Newton step above; instead of CoDel's
//!   "re-enter at count - lastcount if within 16 intervals" heuristic, the count *decays by one
//!   per elapsed control interval* while the queue is below target;
//! - BLUE: a drop probability `p_drop` raised by `p_inc` (1/256) each time the queue overflows
//!   and lowered by `p_dec` (1/4096) each time it is found empty, at most once per `target`.
//!
//! The CoDel part always CE-marks ECN-capable packets (CAKE has no `ecn` switch); BLUE
//! always drops (deliberately: it exists to control flows that ignore marks).
//!
//! Times are signed nanoseconds (`ktime_t`), so "is now before drop_next" is a sign test.

use crate::packet::Packet;
use crate::rng::Rng;

/// Q0.32 fixed point "one" minus one ulp: the table value for counts 0 and 1.
const ONE_Q32: u32 = u32::MAX;

/// Counts below this use the precomputed table (`REC_INV_SQRT_CACHE` in Linux).
pub const REC_INV_SQRT_CACHE: usize = 16;

/// One Newton step for 1/sqrt(count) in Q0.32:
/// `y' = y/2 * (3 - count*y^2)`, with the same pre-shift Linux uses to stay within 64 bits.
const fn newton_step(rec_inv_sqrt: u32, count: u32) -> u32 {
    let y = rec_inv_sqrt as u64;
    let y2 = (y * y) >> 32;
    let mut val = (3u64 << 32).wrapping_sub(count as u64 * y2);
    val >>= 2;
    val = (val * y) >> (32 - 2 + 1);
    val as u32
}

/// The 1/sqrt(count) table: entry 0 = 0xFFFFFFFF, entry n = four Newton steps from the
/// previous entry (as `cobalt_cache_init` builds it), so entry 1 is also ~1.0.
const fn build_cache() -> [u32; REC_INV_SQRT_CACHE] {
    let mut cache = [0u32; REC_INV_SQRT_CACHE];
    cache[0] = ONE_Q32;
    let mut y = ONE_Q32;
    let mut count = 1;
    while count < REC_INV_SQRT_CACHE {
        y = newton_step(y, count as u32);
        y = newton_step(y, count as u32);
        y = newton_step(y, count as u32);
        y = newton_step(y, count as u32);
        cache[count] = y;
        count += 1;
    }
    cache
}

pub const REC_INV_SQRT: [u32; REC_INV_SQRT_CACHE] = build_cache();

/// Per-tin COBALT parameters (`struct cobalt_params`), derived by CAKE from the tin rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CobaltParams {
    pub interval_ns: u64,
    pub target_ns: u64,
    /// Serialisation time of one MTU at the tin rate (0 when unshaped).
    pub mtu_time_ns: u64,
    /// BLUE increment on overflow, Q0.32 (1/256).
    pub p_inc: u32,
    /// BLUE decrement on empty, Q0.32 (1/4096).
    pub p_dec: u32,
}

impl CobaltParams {
    pub const P_INC: u32 = 1 << 24;
    pub const P_DEC: u32 = 1 << 20;
}

/// Per-queue COBALT state (`struct cobalt_vars`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CobaltVars {
    pub count: u32,
    /// 1/sqrt(count) in Q0.32. Zero after init (Linux's memset), see [`CobaltVars::new`].
    pub rec_inv_sqrt: u32,
    /// Next signal time while dropping; otherwise an activity timeout (ns).
    pub drop_next: i64,
    /// Last BLUE adjustment (ns).
    pub blue_timer: i64,
    /// BLUE drop probability, Q0.32.
    pub p_drop: u32,
    pub dropping: bool,
    /// The last packet judged was CE-marked.
    pub ecn_marked: bool,
}

impl CobaltVars {
    /// `cobalt_vars_init`: everything zero, including `rec_inv_sqrt` (a code-literal quirk:
    /// the first over-target packet of a never-used queue sets `drop_next = now`, so the
    /// second over-target packet is already signalled).
    ///
    /// `blue_timer` starts "long ago": the kernel zeroes it but its clock counts from boot,
    /// so the first overflow always raises `p_drop`; our clock starts at 0.
    pub fn new() -> CobaltVars {
        CobaltVars {
            blue_timer: i64::MIN / 4,
            ..CobaltVars::default()
        }
    }

    /// `cobalt_invsqrt`: table below 16, one Newton step from the current value above.
    #[inline]
    fn invsqrt(&mut self) {
        self.rec_inv_sqrt = if (self.count as usize) < REC_INV_SQRT_CACHE {
            REC_INV_SQRT[self.count as usize]
        } else {
            newton_step(self.rec_inv_sqrt, self.count)
        };
    }

    /// AQM state worth keeping the queue on the decaying list for.
    #[inline]
    pub fn is_active(&self, now: i64) -> bool {
        self.p_drop != 0 || self.count != 0 || now < self.drop_next
    }
}

/// CoDel control law `t + interval * rec_inv_sqrt` (reciprocal_scale of the interval).
#[inline]
fn control(t: i64, interval_ns: u64, rec_inv_sqrt: u32) -> i64 {
    t + ((interval_ns as u128 * rec_inv_sqrt as u128) >> 32) as i64
}

/// `cobalt_queue_full`: the queue overflowed (CAKE dropped its head). Raises BLUE's
/// probability at most once per `target`, and arms the CoDel part to signal at once.
/// Returns true if BLUE went from quiescent to active.
pub fn queue_full(v: &mut CobaltVars, p: &CobaltParams, now: i64) -> bool {
    let mut up = false;
    if now - v.blue_timer > p.target_ns as i64 {
        up = v.p_drop == 0;
        v.p_drop = v.p_drop.saturating_add(p.p_inc);
        v.blue_timer = now;
    }
    v.dropping = true;
    v.drop_next = now;
    if v.count == 0 {
        v.count = 1;
    }
    up
}

/// `cobalt_queue_empty`: the queue was serviced but empty. Lowers BLUE's probability at
/// most once per `target`, leaves the dropping state, and decays the count once if due.
/// Returns true if BLUE went from active to quiescent.
pub fn queue_empty(v: &mut CobaltVars, p: &CobaltParams, now: i64) -> bool {
    let mut down = false;
    if v.p_drop != 0 && now - v.blue_timer > p.target_ns as i64 {
        v.p_drop = v.p_drop.saturating_sub(p.p_dec);
        v.blue_timer = now;
        down = v.p_drop == 0;
    }
    v.dropping = false;
    if v.count != 0 && now - v.drop_next >= 0 {
        v.count -= 1;
        v.invsqrt();
        v.drop_next = control(v.drop_next, p.interval_ns, v.rec_inv_sqrt);
    }
    down
}

/// `cobalt_should_drop`: judge a freshly dequeued packet. CE-marks it when the CoDel part
/// signals and the packet is ECN-capable (`v.ecn_marked` tells the caller); returns true if
/// the packet should be dropped instead (CoDel signal on Not-ECT, or a BLUE draw).
/// `bulk_flows` is the tin's bulk-flow count in ingress mode, 0 otherwise.
pub fn should_drop(
    v: &mut CobaltVars,
    p: &CobaltParams,
    now: i64,
    pkt: &mut Packet,
    bulk_flows: u32,
    rng: &mut Rng,
) -> bool {
    let sojourn = (now - pkt.enqueued_at.as_ns() as i64).max(0) as u64;
    // `schedule` keeps, in its sign, whether now is past drop_next; `next_due` freezes the
    // first evaluation before any update.
    let mut schedule = now - v.drop_next;
    let over_target = sojourn > p.target_ns
        && sojourn > p.mtu_time_ns * bulk_flows as u64 * 2
        && sojourn > p.mtu_time_ns * 4;
    let mut next_due = v.count != 0 && schedule >= 0;
    let mut drop = false;
    v.ecn_marked = false;

    if over_target {
        if !v.dropping {
            v.dropping = true;
            v.drop_next = control(now, p.interval_ns, v.rec_inv_sqrt);
        }
        if v.count == 0 {
            v.count = 1;
        }
    } else if v.dropping {
        v.dropping = false;
    }

    if next_due && v.dropping {
        // Signal: mark ECT packets, drop the others.
        v.ecn_marked = pkt.set_ce();
        drop = !v.ecn_marked;
        v.count = v.count.saturating_add(1);
        v.invsqrt();
        v.drop_next = control(v.drop_next, p.interval_ns, v.rec_inv_sqrt);
        schedule = now - v.drop_next;
    } else {
        // Below target (or not yet due): the count decays by one per elapsed interval.
        while next_due {
            v.count -= 1;
            v.invsqrt();
            v.drop_next = control(v.drop_next, p.interval_ns, v.rec_inv_sqrt);
            schedule = now - v.drop_next;
            next_due = v.count != 0 && schedule >= 0;
        }
    }

    // BLUE: probabilistic drop, never a mark.
    if v.p_drop != 0 && rng.next_u32() < v.p_drop {
        drop = true;
    }

    // drop_next doubles as an activity timeout.
    if v.count == 0 {
        v.drop_next = now + p.interval_ns as i64;
    } else if schedule > 0 && !drop {
        v.drop_next = now;
    }
    drop
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Ecn;
    use crate::time::Time;

    fn params() -> CobaltParams {
        CobaltParams {
            interval_ns: 100_000_000,
            target_ns: 5_000_000,
            mtu_time_ns: 0,
            p_inc: CobaltParams::P_INC,
            p_dec: CobaltParams::P_DEC,
        }
    }

    fn q32(x: u32) -> f64 {
        x as f64 / 4_294_967_296.0
    }

    #[test]
    fn rec_inv_sqrt_table_approximates_one_over_sqrt() {
        // Entries 0 and 1 are ~1.0 (0xFFFFFFFF); the rest within 1e-3 of 1/sqrt(n) (four
        // Newton steps from the previous entry leave 4e-4 at n = 2: 0.70671).
        assert_eq!(REC_INV_SQRT[0], u32::MAX);
        assert!((q32(REC_INV_SQRT[1]) - 1.0).abs() < 1e-6);
        for (n, &y) in REC_INV_SQRT.iter().enumerate().skip(2) {
            let exact = 1.0 / (n as f64).sqrt();
            assert!((q32(y) - exact).abs() < 1e-3, "n={n} {} vs {exact}", q32(y));
        }
        // Above the table a single Newton step from the neighbour's value is close.
        let mut v = CobaltVars {
            count: 16,
            rec_inv_sqrt: REC_INV_SQRT[15],
            ..Default::default()
        };
        v.invsqrt();
        assert!((q32(v.rec_inv_sqrt) - 0.25).abs() < 1e-3);
    }

    #[test]
    fn fresh_queue_signals_on_second_over_target_packet() {
        // cobalt_vars_init leaves rec_inv_sqrt = 0, so drop_next = now on the first
        // over-target packet and the next one is marked without waiting an interval.
        let p = params();
        let mut v = CobaltVars::new();
        let mut rng = Rng::from_seed(1);
        let mut pkt = Packet::synthetic(1, 1, 1000);
        pkt.ecn = Ecn::Ect0;
        pkt.enqueued_at = Time(0);
        let t0 = 10_000_000; // sojourn 10 ms > 5 ms
        assert!(!should_drop(&mut v, &p, t0, &mut pkt, 0, &mut rng));
        assert!(!v.ecn_marked && v.dropping && v.count == 1);
        let mut pkt2 = pkt;
        pkt2.ecn = Ecn::Ect0;
        assert!(!should_drop(&mut v, &p, t0 + 1, &mut pkt2, 0, &mut rng));
        assert!(v.ecn_marked, "second over-target packet is marked");
        assert_eq!(pkt2.ecn, Ecn::Ce);
        assert_eq!(v.count, 2);
        // A Not-ECT packet in the same situation is dropped instead.
        let mut v = CobaltVars::new();
        let mut a = Packet::synthetic(2, 1, 1000);
        should_drop(&mut v, &p, t0, &mut a, 0, &mut rng);
        assert!(should_drop(&mut v, &p, t0 + 1, &mut a, 0, &mut rng));
    }

    #[test]
    fn after_decay_to_zero_first_signal_waits_an_interval() {
        let p = params();
        let mut v = CobaltVars::new();
        // State of a busy queue whose count decayed to 0: rec_inv_sqrt ~1.0 and drop_next
        // an activity timeout (last packet + interval) still in the future.
        let t0: i64 = 1_000_000_000;
        v.rec_inv_sqrt = REC_INV_SQRT[0];
        v.drop_next = t0 + 50_000_000;
        let mut rng = Rng::from_seed(1);
        let mut pkt = Packet::synthetic(1, 1, 1000);
        pkt.ecn = Ecn::Ect0;
        pkt.enqueued_at = Time(0);
        should_drop(&mut v, &p, t0, &mut pkt, 0, &mut rng);
        // drop_next = t0 + ~interval.
        assert!((v.drop_next - t0 - 100_000_000).abs() < 2);
        let mut q = pkt;
        q.ecn = Ecn::Ect0;
        should_drop(&mut v, &p, t0 + 50_000_000, &mut q, 0, &mut rng);
        assert!(!v.ecn_marked, "not yet an interval");
        should_drop(&mut v, &p, t0 + 100_000_000, &mut q, 0, &mut rng);
        assert!(
            v.ecn_marked,
            "signalled one interval after first exceeding target"
        );
    }

    #[test]
    fn count_decays_by_one_per_elapsed_interval_below_target() {
        // COBALT's rule: while below target, every control interval that elapses past
        // drop_next takes one off count, the interval shrinking as interval/sqrt(count).
        let p = params();
        let mut rng = Rng::from_seed(1);
        let t0: i64 = 1_000_000_000;
        let start = 10u32;
        let v0 = CobaltVars {
            count: start,
            rec_inv_sqrt: REC_INV_SQRT[start as usize],
            drop_next: t0,
            dropping: false,
            ..Default::default()
        };
        for elapsed_ms in [0i64, 20, 40, 90, 150, 320, 600] {
            let mut v = v0;
            let now = t0 + elapsed_ms * 1_000_000;
            let mut pkt = Packet::synthetic(1, 1, 100);
            pkt.enqueued_at = Time(now as u64); // sojourn 0: below target
            assert!(!should_drop(&mut v, &p, now, &mut pkt, 0, &mut rng));
            // Independent float model: steps at t0, t0 + I/sqrt(9), + I/sqrt(8), ...
            let mut expect = start;
            let mut next = t0 as f64;
            while expect > 0 && now as f64 >= next {
                expect -= 1;
                if expect > 0 {
                    next += 100e6 / (expect as f64).sqrt();
                }
            }
            assert_eq!(v.count, expect, "elapsed {elapsed_ms} ms");
        }
    }

    #[test]
    fn blue_rises_on_overflow_and_falls_on_empty_at_most_once_per_target() {
        let p = params();
        let mut v = CobaltVars::new();
        let mut t: i64 = 1_000_000_000;
        assert!(queue_full(&mut v, &p, t), "0 -> non-zero reports up");
        assert_eq!(v.p_drop, 1 << 24);
        assert!(v.dropping && v.count == 1 && v.drop_next == t);
        // Within target: no further increase; exactly one target later neither (Linux
        // `now − blue_timer > target`), one ns after it BLUE rises again.
        queue_full(&mut v, &p, t + 4_000_000);
        assert_eq!(v.p_drop, 1 << 24);
        let mut w = v;
        queue_full(&mut w, &p, t + 5_000_000);
        assert_eq!(w.p_drop, 1 << 24);
        queue_full(&mut w, &p, t + 5_000_001);
        assert_eq!(w.p_drop, 2 << 24);
        for k in 2..=10u32 {
            t += 6_000_000;
            queue_full(&mut v, &p, t);
            assert_eq!(v.p_drop, k << 24);
        }
        t += 6_000_000;
        queue_empty(&mut v, &p, t);
        assert_eq!(v.p_drop, (10 << 24) - (1 << 20));
        assert!(!v.dropping);
        // Saturation.
        let mut v = CobaltVars {
            p_drop: u32::MAX - 5,
            ..Default::default()
        };
        queue_full(&mut v, &p, t);
        assert_eq!(v.p_drop, u32::MAX);
    }

    #[test]
    fn blue_drops_but_never_marks() {
        let p = params();
        let mut v = CobaltVars {
            p_drop: u32::MAX,
            ..Default::default()
        };
        let mut rng = Rng::from_seed(3);
        let mut pkt = Packet::synthetic(1, 1, 100);
        pkt.ecn = Ecn::Ect0;
        pkt.enqueued_at = Time(0);
        assert!(should_drop(&mut v, &p, 1, &mut pkt, 0, &mut rng));
        assert_eq!(pkt.ecn, Ecn::Ect0, "BLUE does not mark");
        assert!(!v.ecn_marked);
    }

    #[test]
    fn over_target_needs_four_mtu_times_and_bulk_term() {
        let mut p = params();
        p.mtu_time_ns = 2_000_000; // 4*mtu_time = 8 ms > target 5 ms
        let mut rng = Rng::from_seed(1);
        let mut v = CobaltVars::new();
        let mut pkt = Packet::synthetic(1, 1, 100);
        pkt.enqueued_at = Time(0);
        should_drop(&mut v, &p, 7_000_000, &mut pkt, 0, &mut rng);
        assert!(!v.dropping, "7 ms < 4*mtu_time");
        should_drop(&mut v, &p, 9_000_000, &mut pkt, 0, &mut rng);
        assert!(v.dropping, "9 ms > 8 ms");
        let mut v = CobaltVars::new();
        should_drop(&mut v, &p, 9_000_000, &mut pkt, 3, &mut rng);
        assert!(!v.dropping, "9 ms < 2*mtu_time*3 bulk flows");
    }
}
