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

use super::{CaEvent, CaState, CcState, CongestionControl};

/// α = 1.0 (`DCTCP_MAX_ALPHA`).
pub const MAX_ALPHA: u32 = 1024;
/// g = 1/2^4 (`dctcp_shift_g`).
const SHIFT_G: u32 = 4;

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
        }
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
        let w = st.cwnd;
        st.cong_avoid_ai(w, acked);
    }

    /// `dctcp_update_alpha`: once per window, α ← (1 − g)·α + g·F.
    fn in_ack_event(&mut self, st: &mut CcState, _ece: bool) {
        if st.snd_una < self.next_seq {
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
}
