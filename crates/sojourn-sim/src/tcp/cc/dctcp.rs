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
//! `prague = true` is TCP Prague's classic-ECN-feedback core as this model has it
//! (draft-briscoe-iccrg-prague-congestion-control): the same α law and window response,
//! packets sent ECT(1) (the L4S identifier), paced; see docs/transport.md for what of
//! Prague is not modelled.
//!
//! Prague's RTT independence (`prague_rtt_scaling = "rate"`, the draft's §2.3.4 "reduced
//! RTT dependence", Linux tcp_prague `RTT_CONTROL_RATE`): once out of slow start and past
//! [`RTT_TRANSITION`] α updates, a flow whose smoothed RTT R is below the target T
//! (`prague_rtt_target`, 25 ms) grows its window by (R/T)² packets per RTT instead of 1 —
//! the rate growth 1/T² of a flow with RTT T, whatever R — and updates α at most once per T
//! (`prague_should_update_ewma`), so that flows of different RTTs converge to the same α.

use super::vocab::{CaEvent, CaState, CcState, CongestionControl};
use sojourn_core::{Duration, Time};

/// α = 1.0 (`DCTCP_MAX_ALPHA`).
pub const MAX_ALPHA: u32 = 1024;
/// g = 1/2^4 (`dctcp_shift_g`).
const SHIFT_G: u32 = 4;
/// α updates after slow start before RTT independence applies (tcp_prague
/// `DEFAULT_RTT_TRANSITION` as submitted to netdev; later L4STeam trees use 500).
pub const RTT_TRANSITION: u32 = 4;

#[derive(Clone, Debug)]
pub struct Dctcp {
    prague: bool,
    /// α in 1/1024.
    alpha: u32,
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

    /// α as a fraction.
    pub fn alpha(&self) -> f64 {
        self.alpha as f64 / MAX_ALPHA as f64
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
        self.loss_cwnd = 0;
        self.alpha_stamp = st.now;
        self.rounds = 0;
        self.reset(st);
    }

    /// `dctcp_ssthresh`: cwnd·(1 − α/2), at least 2.
    fn ssthresh(&mut self, st: &CcState) -> u32 {
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
        if st.snd_una < self.next_seq {
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

    /// `dctcp_state`: entering Recovery halves like Reno.
    fn set_state(&mut self, st: &mut CcState, new: CaState) {
        if new == CaState::Recovery {
            self.react_to_loss(st);
        }
    }

    /// `dctcp_cwnd_event(CA_EVENT_LOSS)`: an RTO halves like Reno.
    fn cwnd_event(&mut self, st: &mut CcState, ev: CaEvent) {
        if ev == CaEvent::Loss {
            self.react_to_loss(st);
        }
    }

    /// `dctcp_cwnd_undo`.
    fn undo_cwnd(&mut self, st: &CcState) -> u32 {
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
        // One packet in 8 marked (F = 1/8), windows of 64 packets: α from 1024 by hand,
        // in the kernel's integers: 1024 − 64 + (8·64)/64 = 968; 968 − 60 + 8 = 916;
        // 916 − 57 + 8 = 867.
        let (mut d, mut st) = prague(25);
        assert_eq!(d.name(), "prague");
        let a: Vec<u32> = (1..=3)
            .map(|i| {
                end_window(&mut d, &mut st, 64, 8, i);
                d.alpha
            })
            .collect();
        assert_eq!(a, [968, 916, 867]);
        // The window response to the next mark: cwnd 100 → 100 − ⌊100·867 / 2048⌋ = 58.
        st.cwnd = 100;
        assert_eq!(d.ssthresh(&st), 58);
        // In the long run α settles where α >> 4 = 8: at 143 (143/1024 = 0.14, the integer
        // law's bias above F = 0.125), and the response to a mark is 100 → 94, close to
        // 100·(1 − F/2) = 93.75.
        for i in 4..200 {
            end_window(&mut d, &mut st, 64, 8, i);
        }
        assert_eq!(d.alpha, 143);
        assert_eq!(d.ssthresh(&st), 94);
    }

    #[test]
    fn prague_rtt_independence_scales_the_additive_increase() {
        // Out of slow start, RTT 5 ms, target 25 ms.
        let (mut d, mut st) = prague(25);
        st.ssthresh = 5;
        st.srtt_ns = 5_000_000;
        let acks_per_increase = |d: &mut Dctcp, st: &mut CcState| {
            let w = st.cwnd;
            let mut n = 0;
            while st.cwnd == w {
                d.cong_avoid(st, 1);
                n += 1;
                assert!(n < 100_000, "no growth");
            }
            st.cwnd = w;
            st.cwnd_cnt = 0;
            n
        };
        // Before RTT_TRANSITION (4) α updates after slow start: Reno's +1 per cwnd ACKed.
        assert_eq!(acks_per_increase(&mut d, &mut st), 10);
        for i in 1..=4 {
            end_window(&mut d, &mut st, 10, 0, 30 * i);
        }
        // Now (R/T)² = (5/25)² = 1/25 packet per RTT: one more packet per 25 windows of
        // 10 packets = 250 ACKed.
        assert_eq!(acks_per_increase(&mut d, &mut st), 250);
        // RTT 12.5 ms: (1/2)² = 1/4 per RTT: 40 ACKed.
        st.srtt_ns = 12_500_000;
        assert_eq!(acks_per_increase(&mut d, &mut st), 40);
        // RTT 10 ms: 0.16 per RTT, 62.5 ACKed, rounded to 63.
        st.srtt_ns = 10_000_000;
        assert_eq!(acks_per_increase(&mut d, &mut st), 63);
        // At or above the target: unscaled.
        st.srtt_ns = 25_000_000;
        assert_eq!(acks_per_increase(&mut d, &mut st), 10);
        st.srtt_ns = 80_000_000;
        assert_eq!(acks_per_increase(&mut d, &mut st), 10);
        // Slow start is never scaled: +1 per ACK.
        st.srtt_ns = 5_000_000;
        st.ssthresh = 1000;
        d.cong_avoid(&mut st, 1);
        assert_eq!(st.cwnd, 11);
        // Without RTT independence (and for DCTCP, which ignores the target): Reno's rate.
        for mut d in [
            Dctcp::new(true),
            Dctcp::new(false).with_rtt_target(Duration::from_ms(25)),
        ] {
            let mut st = test_state(10);
            d.init(&mut st);
            st.ssthresh = 5;
            st.srtt_ns = 5_000_000;
            for i in 1..=4 {
                end_window(&mut d, &mut st, 10, 0, 30 * i);
            }
            assert_eq!(acks_per_increase(&mut d, &mut st), 10);
        }
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
        for i in 1..=4 {
            end_window(&mut d, &mut st, 10, 0, 25 * i);
        }
        // 1024 decays by 1/16 four times: 960, 900, 844, 792.
        assert_eq!(d.alpha, 792);
        // Windows end every 5 ms (the RTT); α waits until 25 ms have passed since its last
        // update (at 100 ms), then takes every packet since: 5 windows of 10, 5 CE in the
        // first: F = 5/50 → 792 − 49 + (5·64)/50 = 792 − 49 + 6 = 749.
        end_window(&mut d, &mut st, 10, 5, 105);
        for t in [110, 115, 120] {
            end_window(&mut d, &mut st, 10, 0, t);
            assert_eq!(d.alpha, 792, "held at {t} ms");
        }
        end_window(&mut d, &mut st, 10, 0, 125);
        assert_eq!(d.alpha, 749);
        // Without RTT independence the same windows update α every time.
        let (mut d, mut st) = prague(25);
        d.rtt_target_ns = 0;
        st.ssthresh = 5;
        for i in 1..=4 {
            end_window(&mut d, &mut st, 10, 0, 25 * i);
        }
        end_window(&mut d, &mut st, 10, 5, 105);
        // 792 − 49 + (5·64)/10 = 775.
        assert_eq!(d.alpha, 775);
    }
}
