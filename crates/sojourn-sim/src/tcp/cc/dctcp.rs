//! DCTCP (RFC 8257) as Linux `tcp_dctcp` runs it, and TCP Prague's DCTCP-like core.
//!
//! The sender keeps α, an estimate of the fraction of its packets that met congestion:
//! once per window of data (when `snd_una` passes the `snd_nxt` recorded at the previous
//! update) `α ← (1 − g)·α + g·F`, with `F` the fraction of packets delivered in that window
//! by ACKs carrying ECE (RFC 8257 §3.3) and `g = 1/16` (`dctcp_shift_g = 4`). α is an
//! integer of 1/1024 (`DCTCP_MAX_ALPHA`), initially 1024 (`dctcp_alpha_on_init`), updated
//! as `α −= max-nonzero(α >> 4)` then `+= (ce << 6) / delivered`, as the kernel does. On ECE
//! the stack enters CWR once per window and asks for ssthresh: `cwnd − cwnd·α/2`
//! (`cwnd − (cwnd·α >> 11)`, at least 2). Losses are answered like Reno (halve), on entering
//! Recovery and on RTO. Window growth is Reno's.
//!
//! The receiver side (echoing each packet's CE state exactly, RFC 8257 §3.2) lives in
//! `receiver.rs`; the per-ACK ECE bookkeeping (`delivered_ce`) in `sender.rs`.
//!
//! `prague = true` is TCP Prague's core as this model has it
//! (draft-briscoe-iccrg-prague-congestion-control): DCTCP's window response, packets sent
//! ECT(1) (the L4S identifier), paced, and Prague's own α estimator (the draft's §2.3.2
//! and the L4S team's tcp_prague): the same EWMA with g = 1/16, but α kept in 2^-20 units
//! and stored divided by g, so the remainder of each update carries to the next, and no
//! update before the first CE mark. DCTCP's 1/1024 integers with the kernel's
//! max-nonzero decay have a floor: once α < 16/1024 an update sets α to
//! ⌊64·F⌋/1024 ≈ F/16, and only a window with F ≥ 1/4 lifts it out again — a window of
//! 150 packets marked at 5 % then keeps α near 0.3 % and the flow takes 3–5 times its
//! coupled share (issue 40 §1, docs/repro/l4s.md). See docs/transport.md for what of
//! Prague is not modelled.
//!
//! Prague's RTT independence (`prague_rtt_scaling = "rate"`, the draft's §2.3.4 "reduced
//! RTT dependence", Linux tcp_prague `RTT_CONTROL_RATE`): once out of slow start and past
//! [`RTT_TRANSITION`] α updates, a flow whose smoothed RTT R is below the target T
//! (`prague_rtt_target`, 25 ms) grows its window by (R/T)² packets per RTT instead of 1 —
//! the rate growth 1/T² of a flow with RTT T, whatever R — and updates α at most once per T
//! (`prague_should_update_ewma`), so that flows of different RTTs converge to the same α.

use super::vocab::{CaEvent, CaState, CcState, CongestionControl, RateSample};
use sojourn_core::{Duration, Time};

/// α = 1.0 (`DCTCP_MAX_ALPHA`).
pub const MAX_ALPHA: u32 = 1024;
/// g = 1/2^4 (`dctcp_shift_g`).
const SHIFT_G: u32 = 4;
/// α updates after slow start before RTT independence applies (tcp_prague
/// `DEFAULT_RTT_TRANSITION` as submitted to netdev; later L4STeam trees use 500).
pub const RTT_TRANSITION: u32 = 4;
/// Prague's α resolution: α = 1.0 is 2^20 (tcp_prague `PRAGUE_ALPHA_BITS`).
const PRAGUE_ALPHA_BITS: u32 = 20;
/// Prague's α = 1.0, stored divided by g (`PRAGUE_MAX_ALPHA << PRAGUE_SHIFT_G`).
const PRAGUE_MAX_UPSCALED_ALPHA: u64 = 1 << (PRAGUE_ALPHA_BITS + SHIFT_G);
/// One packet of Prague's window carry (`ONE_CWND`, 2^`CWND_UNIT` with `CWND_UNIT` = 20).
const PRAGUE_ONE_CWND: i64 = 1 << 20;
/// Prague's smallest window (`MIN_CWND`).
const PRAGUE_MIN_CWND: u32 = 2;
/// Prague's GSO burst: at most 1/2^12 s (~244 µs) at the pacing rate
/// (`prague_burst_shift`).
const PRAGUE_BURST_SHIFT: u32 = 12;

/// tcp_prague's pacing rate (`prague_update_pacing_rate`), bits/s: the window (or what
/// is in flight, if more) of `mtu`-byte packets per smoothed RTT — 100 %, where Linux's
/// default paces at 120 % in congestion avoidance — and 200 % while cwnd < ssthresh/2.
/// 0 (unlimited) before the first RTT sample.
pub fn prague_pacing_rate_bps(
    mtu: u32,
    cwnd: u32,
    packets_out: u32,
    ssthresh: u32,
    srtt_ns: u64,
) -> u64 {
    if srtt_ns == 0 {
        return 0;
    }
    let mut rate =
        mtu as u128 * 8 * 1_000_000_000 * cwnd.max(packets_out) as u128 / srtt_ns as u128;
    if cwnd < ssthresh / 2 {
        rate *= 2;
    }
    rate.min(u64::MAX as u128) as u64
}

/// tcp_prague's GSO buffer size (`prague_tso_segs`): the packets of 1/2^12 s at the
/// pacing rate, at least `min_tso_segs`; replaces `tcp_tso_autosize`.
pub fn prague_tso_segs(pacing_rate_bps: u64, mtu: u32, min_tso_segs: u32) -> u32 {
    let pkts_per_s = pacing_rate_bps / 8 / mtu.max(1) as u64;
    ((pkts_per_s >> PRAGUE_BURST_SHIFT).max(1) as u32).max(min_tso_segs)
}

#[derive(Clone, Debug)]
pub struct Dctcp {
    prague: bool,
    /// α in 1/1024 (DCTCP; Prague keeps it as `prague_upscaled_alpha >> 14`).
    alpha: u32,
    /// Prague: α/g in 2^-20 units (`upscaled_alpha`).
    prague_upscaled_alpha: u64,
    /// Prague's window carry in 2^-20 packets (`cwnd_cnt`): growth and reductions add up
    /// here and move cwnd by at most one packet per ACK.
    prague_cwnd_cnt: i64,
    /// The carry when the last loss reduction began (`loss_cwnd_cnt`, for undo).
    prague_loss_cwnd_cnt: i64,
    /// In a loss reduction: no growth until the connection is Open again (`in_loss`).
    prague_in_loss: bool,
    /// The connection's CE-delivered count at the previous ACK (for `ece_delta`).
    prague_seen_ce: u64,
    /// When the last CE reduction was applied (`cwr_stamp`).
    prague_cwr_stamp: Time,
    /// `snd_nxt` when the current observation window started.
    next_seq: u64,
    old_delivered: u64,
    old_delivered_ce: u64,
    /// cwnd at the last reduction (`loss_cwnd`, for undo).
    loss_cwnd: u32,
    /// Prague's RTT-independence target in ns (0 = off).
    rtt_target_ns: u64,
    /// When α was last updated (`alpha_stamp`).
    alpha_stamp: Time,
    /// α updates since slow start ended (tcp_prague's `round`).
    rounds: u32,
}

impl Dctcp {
    pub fn new(prague: bool) -> Dctcp {
        Dctcp {
            prague,
            alpha: MAX_ALPHA,
            prague_upscaled_alpha: PRAGUE_MAX_UPSCALED_ALPHA,
            prague_cwnd_cnt: 0,
            prague_loss_cwnd_cnt: 0,
            prague_in_loss: false,
            prague_seen_ce: 0,
            prague_cwr_stamp: Time::ZERO,
            next_seq: 0,
            old_delivered: 0,
            old_delivered_ce: 0,
            loss_cwnd: 0,
            rtt_target_ns: 0,
            alpha_stamp: Time::ZERO,
            rounds: 0,
        }
    }

    /// TCP Prague with RTT independence towards `target` (no effect on DCTCP).
    pub fn with_rtt_target(mut self, target: Duration) -> Dctcp {
        if self.prague {
            self.rtt_target_ns = target.0;
        }
        self
    }

    /// RTT independence applies now (tcp_prague `prague_is_rtt_indep`). Without a target
    /// (DCTCP, or Prague without scaling) its two effects vanish by themselves: no RTT is
    /// below 0 and no interval is shorter than 0.
    fn rtt_indep(&self, st: &CcState) -> bool {
        !st.in_slow_start() && self.rounds >= RTT_TRANSITION
    }

    /// Packets to ACK per +1 packet of cwnd in congestion avoidance: cwnd, or with RTT
    /// independence and R < T, cwnd·T²/R² (an increase of (R/T)² per RTT), rounded.
    fn ai_packets_per_increase(&self, st: &CcState, w: u32) -> u32 {
        let r = st.srtt_ns as u128;
        let t = self.rtt_target_ns as u128;
        if !self.rtt_indep(st) || r == 0 || r >= t {
            return w;
        }
        ((w as u128 * t * t + r * r / 2) / (r * r)).min(u32::MAX as u128) as u32
    }

    /// TCP Prague (its own window arithmetic, pacing and GSO bursts), not DCTCP.
    pub fn is_prague(&self) -> bool {
        self.prague
    }

    /// Prague's growth per RTT in 2^-20 packets (`ai_ack_increase`): one packet, or with
    /// RTT independence and R < T, (R/T)² of one, rounded.
    fn prague_ai_ack_increase(&self, st: &CcState) -> i64 {
        let r = st.srtt_ns as u128;
        let t = self.rtt_target_ns as u128;
        if !self.rtt_indep(st) || r == 0 || r >= t {
            return PRAGUE_ONE_CWND;
        }
        (((r << 20) * r + t * t / 2) / (t * t)) as i64
    }

    /// tcp_prague's `prague_update_cwnd` for an ACK that delivered `acked_sacked` packets.
    /// Growth continues in CWR (L4S marks are expected every round, so a flow spends most
    /// of its time there) but counts only the packets not CE-marked, making the increase
    /// per round proportional to (1 − p)/p ("unsaturated" marking). Then the carry moves
    /// cwnd by one packet at most; a decrease also sets ssthresh, ending slow start.
    fn prague_update_cwnd(&mut self, st: &mut CcState, acked_sacked: u32) {
        let ece_delta = st.delivered_ce - self.prague_seen_ce;
        self.prague_seen_ce = st.delivered_ce;
        let mut acked = acked_sacked as i64 - ece_delta as i64;
        if acked > 0 && !self.prague_in_loss && st.cwnd_limited() {
            if st.in_slow_start() {
                let left = st.slow_start(acked as u32);
                if left == 0 {
                    return;
                }
                acked = left as i64;
            }
            let cwnd = st.cwnd.max(1) as i64;
            let increase = (acked * self.prague_ai_ack_increase(st) + cwnd / 2) / cwnd;
            self.prague_cwnd_cnt += increase.max(acked);
        }
        if self.prague_cwnd_cnt <= -PRAGUE_ONE_CWND {
            self.prague_cwnd_cnt += PRAGUE_ONE_CWND;
            st.cwnd = st.cwnd.saturating_sub(1);
            if st.cwnd < PRAGUE_MIN_CWND {
                st.cwnd = PRAGUE_MIN_CWND;
                self.prague_cwnd_cnt = 0;
            }
            st.ssthresh = st.cwnd;
        } else if self.prague_cwnd_cnt >= PRAGUE_ONE_CWND {
            self.prague_cwnd_cnt -= PRAGUE_ONE_CWND;
            st.cwnd = (st.cwnd + 1).min(st.cwnd_clamp);
        }
    }

    /// tcp_prague's `prague_update_alpha`, once per round: no update until a CE mark
    /// proves an AQM on the path (`saw_ce`; the connection's CE count only grows); then
    /// A ← A − A/16 + F·2^20 with A = α/g, so nothing below one unit is lost between
    /// updates.
    fn prague_update_alpha(&mut self, st: &CcState) {
        if st.delivered_ce > 0 {
            let delivered = st.delivered - self.old_delivered;
            let delivered_ce = st.delivered_ce - self.old_delivered_ce;
            let f = (delivered_ce << PRAGUE_ALPHA_BITS) / delivered.max(1);
            let a = self.prague_upscaled_alpha;
            self.prague_upscaled_alpha = (a - (a >> SHIFT_G) + f).min(PRAGUE_MAX_UPSCALED_ALPHA);
            self.alpha = (self.prague_upscaled_alpha >> (SHIFT_G + PRAGUE_ALPHA_BITS - 10)) as u32;
            self.alpha_stamp = st.now;
        }
        if !st.in_slow_start() {
            self.rounds = self.rounds.saturating_add(1);
        }
        self.reset(st);
    }

    /// tcp_prague's `prague_enter_cwr`: the carry gives up cwnd·α/2 (rounded to the
    /// nearest 2^-20 packet), paid one packet per ACK; with RTT independence at most once
    /// per target RTT.
    fn prague_enter_cwr(&mut self, st: &CcState) {
        if self.rtt_indep(st)
            && st.now.saturating_since(self.prague_cwr_stamp).0 < self.rtt_target_ns
        {
            return;
        }
        self.prague_cwr_stamp = st.now;
        let alpha = (self.prague_upscaled_alpha >> SHIFT_G) as u128;
        let reduction = (alpha * ((st.cwnd as u128) << 20) + (1 << PRAGUE_ALPHA_BITS))
            >> (PRAGUE_ALPHA_BITS + 1);
        self.prague_cwnd_cnt -= reduction as i64;
    }

    /// tcp_prague's `prague_enter_loss`: the carry gives up half the window (and half of
    /// itself); no growth until Open.
    fn prague_enter_loss(&mut self, st: &CcState) {
        self.loss_cwnd = st.cwnd;
        self.prague_loss_cwnd_cnt = self.prague_cwnd_cnt;
        self.prague_cwnd_cnt -= ((st.cwnd as i64) << 19) + (self.prague_cwnd_cnt >> 1);
        self.prague_in_loss = true;
    }

    /// α as a fraction.
    pub fn alpha(&self) -> f64 {
        if self.prague {
            (self.prague_upscaled_alpha >> SHIFT_G) as f64 / (1u64 << PRAGUE_ALPHA_BITS) as f64
        } else {
            self.alpha as f64 / MAX_ALPHA as f64
        }
    }

    /// `dctcp_reset`: a new observation window starts at `snd_nxt`.
    fn reset(&mut self, st: &CcState) {
        self.next_seq = st.snd_nxt;
        self.old_delivered = st.delivered;
        self.old_delivered_ce = st.delivered_ce;
    }

    /// `dctcp_react_to_loss`: Reno's halving.
    fn react_to_loss(&mut self, st: &mut CcState) {
        self.loss_cwnd = st.cwnd;
        st.ssthresh = (st.cwnd >> 1).max(2);
    }
}

impl CongestionControl for Dctcp {
    fn name(&self) -> &'static str {
        if self.prague {
            "prague"
        } else {
            "dctcp"
        }
    }

    fn init(&mut self, st: &mut CcState) {
        self.alpha = MAX_ALPHA;
        self.prague_upscaled_alpha = PRAGUE_MAX_UPSCALED_ALPHA;
        self.prague_cwnd_cnt = 0;
        self.prague_loss_cwnd_cnt = 0;
        self.prague_in_loss = false;
        self.prague_seen_ce = st.delivered_ce;
        self.prague_cwr_stamp = st.now;
        self.loss_cwnd = 0;
        self.alpha_stamp = st.now;
        self.rounds = 0;
        self.reset(st);
    }

    /// `dctcp_ssthresh`: cwnd·(1 − α/2), at least 2.
    fn ssthresh(&mut self, st: &CcState) -> u32 {
        if self.prague {
            // `prague_ssthresh`: unchanged; the reduction is the carry's (`set_state`).
            return st.ssthresh;
        }
        self.loss_cwnd = st.cwnd;
        let cut = ((st.cwnd as u64 * self.alpha as u64) >> 11) as u32;
        (st.cwnd - cut).max(2)
    }

    /// `tcp_reno_cong_avoid`.
    fn cong_avoid(&mut self, st: &mut CcState, mut acked: u32) {
        if !st.cwnd_limited() {
            return;
        }
        if st.in_slow_start() {
            acked = st.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        let w = self.ai_packets_per_increase(st, st.cwnd);
        st.cong_avoid_ai(w, acked);
    }

    /// `dctcp_update_alpha`: once per window, α ← (1 − g)·α + g·F.
    fn in_ack_event(&mut self, st: &mut CcState, _ece: bool) {
        // Prague updates α in `cong_control`, after the window.
        if self.prague || st.snd_una < self.next_seq {
            return;
        }
        // Prague's RTT independence: α at most once per target RTT; the packets of the
        // rounds in between count into the next update.
        if self.rtt_indep(st) && st.now.saturating_since(self.alpha_stamp).0 < self.rtt_target_ns {
            return;
        }
        let delivered = st.delivered - self.old_delivered;
        let delivered_ce = st.delivered_ce - self.old_delivered_ce;
        let mut alpha = self.alpha;
        // min_not_zero(α, α >> g): below 16 the decay takes α straight to 0.
        let decay = alpha >> SHIFT_G;
        alpha -= if decay == 0 { alpha } else { decay };
        // + g·F = (ce << (10 − 4)) / delivered (0 without marks; the kernel skips the
        // division then).
        let f = (delivered_ce << (10 - SHIFT_G)) / delivered.max(1);
        alpha = (alpha as u64 + f).min(MAX_ALPHA as u64) as u32;
        self.alpha = alpha;
        self.alpha_stamp = st.now;
        if !st.in_slow_start() {
            self.rounds = self.rounds.saturating_add(1);
        }
        self.reset(st);
    }

    /// Prague only (`prague_cong_control`): the window from the carry, then α once per
    /// round (at most once per target RTT with RTT independence). Taking `cong_control`
    /// also takes the stack's PRR and its end-of-CWR `cwnd = ssthresh` away, as in Linux.
    fn cong_control(&mut self, st: &mut CcState, rs: &RateSample) -> bool {
        if !self.prague {
            return false;
        }
        self.prague_update_cwnd(st, rs.acked_sacked);
        let round_over = st.snd_una >= self.next_seq;
        let held =
            self.rtt_indep(st) && st.now.saturating_since(self.alpha_stamp).0 < self.rtt_target_ns;
        if round_over && !held {
            self.prague_update_alpha(st);
        }
        true
    }

    /// `dctcp_state`: entering Recovery halves like Reno.
    fn set_state(&mut self, st: &mut CcState, new: CaState) {
        if self.prague {
            match new {
                CaState::Recovery => self.prague_enter_loss(st),
                CaState::Cwr => self.prague_enter_cwr(st),
                CaState::Open => self.prague_in_loss = false,
                _ => {}
            }
            return;
        }
        if new == CaState::Recovery {
            self.react_to_loss(st);
        }
    }

    /// `dctcp_cwnd_event(CA_EVENT_LOSS)`: an RTO halves like Reno.
    fn cwnd_event(&mut self, st: &mut CcState, ev: CaEvent) {
        if ev == CaEvent::Loss && self.prague {
            self.prague_enter_loss(st);
        } else if ev == CaEvent::Loss {
            self.react_to_loss(st);
        }
    }

    /// `dctcp_cwnd_undo`.
    fn undo_cwnd(&mut self, st: &CcState) -> u32 {
        if self.prague {
            // `prague_cwnd_undo`: keep the progress made since the reduction began.
            self.prague_cwnd_cnt += self.prague_cwnd_cnt - self.prague_loss_cwnd_cnt;
        }
        st.cwnd.max(self.loss_cwnd)
    }

    fn needs_pacing(&self) -> bool {
        self.prague
    }

    fn observe(&self, emit: &mut dyn FnMut(&str, f64)) {
        emit("dctcp_alpha", self.alpha());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::cc::test_state;
    use sojourn_core::{Duration, Time};

    /// Ends `n` observation windows of `per_window` delivered packets, `ce` of them by
    /// ECE-carrying ACKs; returns α (1/1024) after each.
    fn windows(d: &mut Dctcp, st: &mut CcState, n: usize, per_window: u64, ce: u64) -> Vec<u32> {
        let mut out = Vec::new();
        for _ in 0..n {
            // Mid-window ACKs do not update α.
            st.delivered += per_window / 2;
            st.delivered_ce += ce / 2;
            st.snd_una = d.next_seq - 1;
            d.in_ack_event(st, ce > 0);
            st.delivered += per_window - per_window / 2;
            st.delivered_ce += ce - ce / 2;
            st.snd_una = d.next_seq;
            st.snd_nxt = d.next_seq + per_window * 1448;
            d.in_ack_event(st, ce > 0);
            out.push(d.alpha);
        }
        out
    }

    fn fresh() -> (Dctcp, CcState) {
        let mut st = test_state(10);
        st.snd_nxt = 1 + 10 * 1448;
        let mut d = Dctcp::new(false);
        d.init(&mut st);
        (d, st)
    }

    #[test]
    fn alpha_recursion_rfc8257_section_3_3() {
        // F = 4/16 = 0.25 per window, α0 = 1 (1024), g = 1/16. By hand, in the kernel's
        // integers: 1024 − 64 + 16 = 976; 976 − 61 + 16 = 931; 931 − 58 + 16 = 889;
        // 889 − 55 + 16 = 850 (real-valued: 0.953, 0.909, 0.869, 0.832 of 1024 =
        // 0.25 + 0.75·(15/16)^n).
        let (mut d, mut st) = fresh();
        assert_eq!(d.alpha, 1024, "dctcp_alpha_on_init");
        assert_eq!(windows(&mut d, &mut st, 4, 16, 4), [976, 931, 889, 850]);
        // The integer recursion's fixed point from above: α >> 4 = 16 + 1 at 272 → 271,
        // where 271 − 16 + 16 = 271 (F·1024 = 256 in real numbers).
        let last = *windows(&mut d, &mut st, 300, 16, 4).last().unwrap();
        assert_eq!(last, 271);
        // No marks: α decays by 1/16 per window and, below 16, drops to 0.
        let (mut d, mut st) = fresh();
        let a = windows(&mut d, &mut st, 3, 16, 0);
        assert_eq!(a, [960, 900, 844]);
        let a = windows(&mut d, &mut st, 80, 16, 0);
        assert_eq!(*a.last().unwrap(), 0);
        assert!(a.windows(2).all(|w| w[1] <= w[0]));
        // Every packet marked: α stays at 1.
        let (mut d, mut st) = fresh();
        assert_eq!(windows(&mut d, &mut st, 5, 10, 10), [1024; 5]);
    }

    #[test]
    fn alpha_updates_once_per_window_only() {
        let (mut d, mut st) = fresh();
        let end = d.next_seq;
        st.delivered += 5;
        st.delivered_ce += 5;
        st.snd_una = end - 1;
        d.in_ack_event(&mut st, true);
        assert_eq!(d.alpha, 1024);
        assert_eq!(d.next_seq, end);
        st.snd_una = end;
        st.snd_nxt = end + 50_000;
        d.in_ack_event(&mut st, true);
        assert_eq!(d.next_seq, end + 50_000, "a new window starts at snd_nxt");
        assert_eq!(
            (d.old_delivered, d.old_delivered_ce),
            (st.delivered, st.delivered_ce)
        );
    }

    #[test]
    fn window_response_is_cwnd_times_one_minus_alpha_half() {
        // cwnd 100: α = 1 → 50; α = 0.25 (256) → 100 − 12 = 88 (≈ 100·(1 − 0.125) = 87.5);
        // α = 0 → 100; never below 2.
        let (mut d, mut st) = fresh();
        st.cwnd = 100;
        assert_eq!(d.ssthresh(&st), 50);
        assert_eq!(d.loss_cwnd, 100);
        d.alpha = 256;
        assert_eq!(d.ssthresh(&st), 88);
        d.alpha = 0;
        assert_eq!(d.ssthresh(&st), 100);
        d.alpha = 1024;
        st.cwnd = 3;
        assert_eq!(d.ssthresh(&st), 2);
        st.cwnd = 2000;
        d.alpha = 100;
        // 2000·100 >> 11 = 97.
        assert_eq!(d.ssthresh(&st), 1903);
    }

    #[test]
    fn losses_halve_like_reno() {
        let (mut d, mut st) = fresh();
        d.alpha = 10;
        st.cwnd = 81;
        d.set_state(&mut st, CaState::Recovery);
        assert_eq!((st.ssthresh, d.loss_cwnd), (40, 81));
        st.ssthresh = 1000;
        d.set_state(&mut st, CaState::Cwr);
        assert_eq!(st.ssthresh, 1000, "CWR is the ECN reduction, not a loss");
        st.cwnd = 3;
        d.cwnd_event(&mut st, CaEvent::Loss);
        assert_eq!(st.ssthresh, 2);
        st.ssthresh = 1000;
        d.cwnd_event(&mut st, CaEvent::TxStart);
        assert_eq!(st.ssthresh, 1000);
        assert_eq!(d.undo_cwnd(&st), 3);
        st.cwnd = 1;
        assert_eq!(d.undo_cwnd(&st), 3);
    }

    #[test]
    fn acks_left_over_at_ssthresh_count_in_congestion_avoidance() {
        // tcp_reno_cong_avoid: cwnd 10, ssthresh 12, 5 packets ACKed: slow start takes 2,
        // the 3 left over go to tcp_cong_avoid_ai (snd_cwnd_cnt = 3).
        let (mut d, mut st) = fresh();
        st.ssthresh = 12;
        d.cong_avoid(&mut st, 5);
        assert_eq!((st.cwnd, st.cwnd_cnt), (12, 3));
        // Exactly reaching ssthresh leaves nothing for congestion avoidance.
        let (mut d, mut st) = fresh();
        st.ssthresh = 12;
        d.cong_avoid(&mut st, 2);
        assert_eq!((st.cwnd, st.cwnd_cnt), (12, 0));
    }

    #[test]
    fn reno_growth_and_names() {
        let (mut d, mut st) = fresh();
        for _ in 0..10 {
            d.cong_avoid(&mut st, 1);
        }
        assert_eq!(st.cwnd, 20);
        st.ssthresh = 20;
        for _ in 0..20 {
            d.cong_avoid(&mut st, 1);
        }
        assert_eq!(st.cwnd, 21);
        st.is_cwnd_limited = false;
        st.max_packets_out = 0;
        d.cong_avoid(&mut st, 50);
        assert_eq!(st.cwnd, 21, "not cwnd-limited: no growth");
        assert_eq!(d.name(), "dctcp");
        assert!(!d.needs_pacing());
        let p = Dctcp::new(true);
        assert_eq!(p.name(), "prague");
        assert!(p.needs_pacing());
        d.alpha = 256;
        let mut seen = Vec::new();
        d.observe(&mut |k, v| seen.push((k.to_string(), v)));
        assert_eq!(seen, [("dctcp_alpha".to_string(), 0.25)]);
    }

    /// Ends one observation window at `now_ms`: `delivered` packets, `ce` of them CE.
    fn end_window(d: &mut Dctcp, st: &mut CcState, delivered: u64, ce: u64, now_ms: u64) {
        st.now = Time(now_ms * 1_000_000);
        st.delivered += delivered;
        st.delivered_ce += ce;
        st.snd_una = st.snd_una.max(d.next_seq);
        st.snd_nxt = st.snd_una + delivered * 1448;
        d.in_ack_event(st, ce > 0);
        // Prague's α moves in `cong_control` (an ACK of nothing new: no growth).
        d.cong_control(st, &RateSample::default());
    }

    /// Prague's window after one ACK of `acked` packets, `ce` of them CE-marked.
    fn prague_ack(d: &mut Dctcp, st: &mut CcState, acked: u32, ce: u64) {
        st.delivered += acked as u64;
        st.delivered_ce += ce;
        let rs = RateSample {
            acked_sacked: acked,
            ..RateSample::default()
        };
        assert!(d.cong_control(st, &rs));
    }

    fn prague(target_ms: u64) -> (Dctcp, CcState) {
        let mut st = test_state(10);
        st.snd_nxt = 1 + 10 * 1448;
        let mut d = Dctcp::new(true).with_rtt_target(Duration::from_ms(target_ms));
        d.init(&mut st);
        (d, st)
    }

    #[test]
    fn prague_window_response_to_a_known_marking_fraction() {
        // One packet in 8 marked (F = 1/8), windows of 64 packets. Prague's EWMA keeps
        // A = α/g in 2^-20 units: A0 = 2^24 (α = 1); each window A ← A − A/16 + F·2^20
        // (= 131072). By hand: 16777216 − 1048576 + 131072 = 15859712;
        // 15859712 − 991232 + 131072 = 14999552; 14999552 − 937472 + 131072 = 14193152,
        // i.e. α = 0.125 + 0.875·(15/16)^n exactly: 0.9453, 0.8940, 0.8460 — in 1/1024
        // units (A >> 14) 968, 915, 866 (0.8459778 = 887072/2^20).
        let (mut d, mut st) = prague(25);
        assert_eq!(d.name(), "prague");
        let a: Vec<u32> = (1..=3)
            .map(|i| {
                end_window(&mut d, &mut st, 64, 8, i);
                d.alpha
            })
            .collect();
        assert_eq!(a, [968, 915, 866]);
        assert!((d.alpha() - 0.845_977_8).abs() < 1e-6, "{}", d.alpha());
        // The response to the next mark: entering CWR at cwnd 100 puts 100·α/2 =
        // 887072·100/2 = 44353600 units (42.30 packets) into the carry, paid one packet
        // per ACK: after 42 ACKs cwnd is 58 (and ssthresh follows it); the 0.30 left
        // waits for growth to cancel it.
        st.cwnd = 100;
        st.ssthresh = 100;
        assert_eq!(
            d.ssthresh(&st),
            100,
            "prague_ssthresh leaves ssthresh alone"
        );
        st.ca_state = CaState::Cwr;
        d.set_state(&mut st, CaState::Cwr);
        assert_eq!(d.prague_cwnd_cnt, -44_353_600);
        for _ in 0..41 {
            prague_ack(&mut d, &mut st, 0, 0);
        }
        assert_eq!(st.cwnd, 59, "one packet per ACK");
        for _ in 0..10 {
            prague_ack(&mut d, &mut st, 0, 0);
        }
        assert_eq!((st.cwnd, st.ssthresh), (58, 58));
        st.ca_state = CaState::Open;
        d.set_state(&mut st, CaState::Open);
        // In the long run α settles at F exactly (A/16 = F·2^20; no integer bias), and
        // the response to a mark is 100·(1 − 1/16) = 93.75 → a cut of 6.25 → 6: 94.
        // (Out of slow start now: without RTT independence, so every window updates.)
        d.rtt_target_ns = 0;
        for i in 4..400 {
            end_window(&mut d, &mut st, 64, 8, i);
        }
        assert!((d.alpha() - 0.125).abs() < 1e-5, "{}", d.alpha());
        assert_eq!(d.alpha, 128);
        // 100·0.125/2 = 6.25 packets: cwnd 100 → 94.
        st.cwnd = 100;
        d.prague_cwnd_cnt = 0;
        d.prague_cwr_stamp = Time::ZERO;
        d.set_state(&mut st, CaState::Cwr);
        for _ in 0..10 {
            prague_ack(&mut d, &mut st, 0, 0);
        }
        assert_eq!(st.cwnd, 94);
    }

    #[test]
    fn prague_alpha_has_no_floor_at_a_low_marking_fraction() {
        // Windows of 150 packets with 7 marked (F = 4.67 %), after α has fallen to 0.01
        // (below DCTCP's 16/1024 floor). DCTCP's integers reset α every window to
        // ⌊64·7/150⌋ = 2 (0.2 %: F/16 and a bit); Prague's EWMA climbs back to F.
        let (mut d, mut st) = prague(25);
        d.prague_upscaled_alpha = (1 << 24) / 100;
        for i in 1..=200 {
            end_window(&mut d, &mut st, 150, 7, i);
        }
        assert!((d.alpha() - 7.0 / 150.0).abs() < 1e-4, "{}", d.alpha());
        let (mut c, mut sc) = fresh();
        c.alpha = 10;
        let a = windows(&mut c, &mut sc, 50, 150, 7);
        assert_eq!(
            *a.last().unwrap(),
            2,
            "DCTCP (Linux tcp_dctcp) keeps the floor"
        );
    }

    #[test]
    fn prague_alpha_waits_for_the_first_mark() {
        // tcp_prague's `saw_ce`: windows without any CE leave α at 1.
        let (mut d, mut st) = prague(25);
        for i in 1..=5 {
            end_window(&mut d, &mut st, 20, 0, i);
        }
        assert_eq!(d.alpha, 1024);
        // The first marked window updates: F = 2/20, A = 2^24 − 2^20 + 104857 (α ≈ 0.9375
        // + 0.1/16 = 0.94375).
        end_window(&mut d, &mut st, 20, 2, 6);
        assert!((d.alpha() - 0.94375).abs() < 1e-6, "{}", d.alpha());
    }

    #[test]
    fn prague_rtt_independence_scales_the_additive_increase() {
        // Out of slow start, RTT 5 ms, target 25 ms.
        let (mut d, mut st) = prague(25);
        st.ssthresh = 5;
        st.srtt_ns = 5_000_000;
        // ACKs of one packet until cwnd grows, from an empty carry. Prague's growth per
        // ACK is ⌊(ai + cwnd/2)/cwnd⌋ units of 2^-20 packet, ai the growth per RTT.
        let acks_per_increase = |d: &mut Dctcp, st: &mut CcState| {
            let w = st.cwnd;
            d.prague_cwnd_cnt = 0;
            let mut n = 0;
            while st.cwnd == w {
                prague_ack(d, st, 1, 0);
                n += 1;
                assert!(n < 100_000, "no growth");
            }
            st.cwnd = w;
            n
        };
        // Before RTT_TRANSITION (4) α updates after slow start: one packet per RTT,
        // (2^20 + 5)/10 = 104858 per ACK: 10 ACKs (1048580 ≥ 2^20).
        assert_eq!(acks_per_increase(&mut d, &mut st), 10);
        for i in 1..=4 {
            end_window(&mut d, &mut st, 10, 0, 30 * i);
        }
        // Now (R/T)² = (5/25)² = 1/25 packet per RTT: ai = 2^20/25 = 41943 (rounded),
        // 4194 per ACK, and ⌈2^20/4194⌉ = 251 ACKs (25 windows of 10 and one more).
        assert_eq!(acks_per_increase(&mut d, &mut st), 251);
        // RTT 12.5 ms: 1/4 per RTT: ai 262144, 26214 per ACK, ⌈2^20/26214⌉ = 41.
        st.srtt_ns = 12_500_000;
        assert_eq!(acks_per_increase(&mut d, &mut st), 41);
        // RTT 10 ms: 0.16 per RTT: ai 167772, 16777 per ACK, ⌈2^20/16777⌉ = 63.
        st.srtt_ns = 10_000_000;
        assert_eq!(acks_per_increase(&mut d, &mut st), 63);
        // At or above the target: unscaled.
        st.srtt_ns = 25_000_000;
        assert_eq!(acks_per_increase(&mut d, &mut st), 10);
        st.srtt_ns = 80_000_000;
        assert_eq!(acks_per_increase(&mut d, &mut st), 10);
        // CE-marked packets do not count: an ACK of 2 with 1 marked grows like an ACK of
        // 1 (unsaturated marking).
        st.srtt_ns = 25_000_000;
        d.prague_cwnd_cnt = 0;
        prague_ack(&mut d, &mut st, 2, 1);
        assert_eq!(d.prague_cwnd_cnt, 104_858);
        prague_ack(&mut d, &mut st, 2, 2);
        assert_eq!(
            d.prague_cwnd_cnt, 104_858,
            "a fully marked ACK does not grow"
        );
        // Slow start is never scaled: +1 per ACK.
        st.srtt_ns = 5_000_000;
        st.ssthresh = 1000;
        prague_ack(&mut d, &mut st, 1, 0);
        assert_eq!(st.cwnd, 11);
        // The same four rounds out of slow start at RTT 5 ms, for another algorithm.
        let four_rounds = |mut d: Dctcp| {
            let mut st = test_state(10);
            d.init(&mut st);
            st.ssthresh = 5;
            st.srtt_ns = 5_000_000;
            for i in 1..=4 {
                end_window(&mut d, &mut st, 10, 0, 30 * i);
            }
            (d, st)
        };
        // Without RTT independence: one packet per RTT.
        let (mut d, mut st) = four_rounds(Dctcp::new(true));
        assert_eq!(acks_per_increase(&mut d, &mut st), 10);
        // DCTCP ignores the target: Reno's +1 per cwnd ACKed.
        let (mut d, mut st) = four_rounds(Dctcp::new(false).with_rtt_target(Duration::from_ms(25)));
        let mut n = 0;
        while st.cwnd == 10 {
            d.cong_avoid(&mut st, 1);
            n += 1;
        }
        assert_eq!(n, 10);
    }

    #[test]
    fn the_experiment_switches_prague_rtt_independence() {
        use crate::tcp::cc::{build, AnyCc, CcKind};
        let target = |cc, scaling| {
            let cfg = crate::tcp::TcpConfig {
                cc,
                prague_rtt_scaling: scaling,
                prague_rtt_target: Duration::from_ms(30),
                ..Default::default()
            };
            match build(&cfg, 1) {
                AnyCc::Dctcp(d) => d.rtt_target_ns,
                _ => unreachable!(),
            }
        };
        assert_eq!(target(CcKind::Prague, true), 30_000_000);
        assert_eq!(target(CcKind::Prague, false), 0);
        assert_eq!(
            target(CcKind::Dctcp, true),
            0,
            "DCTCP has no RTT independence"
        );
    }

    #[test]
    fn prague_rtt_independence_updates_alpha_once_per_target_rtt() {
        let (mut d, mut st) = prague(25);
        st.ssthresh = 5;
        st.srtt_ns = 5_000_000;
        // Four unmarked windows: no update before the first mark (α stays 1), but they
        // count as rounds out of slow start, so RTT independence applies after them.
        for i in 1..=4 {
            end_window(&mut d, &mut st, 10, 0, 25 * i);
        }
        assert_eq!(d.alpha, 1024);
        // At 105 ms, 5 of 10 marked: A = 2^24 − 2^20 + 2^19 = 16252928 (α = 0.96875,
        // 992/1024); alpha_stamp 105 ms.
        end_window(&mut d, &mut st, 10, 5, 105);
        assert_eq!(d.alpha, 992);
        // Windows end every 5 ms (the RTT); α waits until 25 ms have passed since its last
        // update, then takes every packet since (50, none marked):
        // 16252928 − 1015808 = 15237120 → 930.
        for t in [110, 115, 120, 125] {
            end_window(&mut d, &mut st, 10, 0, t);
            assert_eq!(d.alpha, 992, "held at {t} ms");
        }
        end_window(&mut d, &mut st, 10, 0, 130);
        assert_eq!(d.alpha, 930);
        // Without RTT independence every window updates: 992, then 992·15/16 = 930.
        let (mut d, mut st) = prague(25);
        d.rtt_target_ns = 0;
        st.ssthresh = 5;
        for i in 1..=4 {
            end_window(&mut d, &mut st, 10, 0, 25 * i);
        }
        end_window(&mut d, &mut st, 10, 5, 105);
        assert_eq!(d.alpha, 992);
        end_window(&mut d, &mut st, 10, 0, 110);
        assert_eq!(d.alpha, 930);
    }
}
