//! CUBIC (RFC 9438) with Linux `tcp_cubic` constants and behaviour:
//! β = 717/1024, C = 410/1024 ≈ 0.4 (bic_scale 41), fast convergence, the TCP-friendly
//! (Reno-estimate) region with Linux's `beta_scale`, the cubic target evaluated one
//! minimum RTT ahead (`t + delay_min`, as Linux and RFC 9438 §4.2 `W_cubic(t + RTT)`),
//! `cnt` clamped to 20 before the first loss, epoch shift after idle (`CA_EVENT_TX_START`),
//! and HyStart (ack-train and delay detection, cwnd ≥ 16) ending slow start.
//!
//! Linux computes the cubic in fixed point with jiffies; here it is f64 seconds (the
//! curve is the same to well under one packet).

use super::vocab::{CaEvent, CaState, CcState, CongestionControl};
use sojourn_core::Time;

pub const BETA: u32 = 717;
pub const BETA_SCALE: u32 = 1024;
/// C in packets/s³ (Linux: bic_scale·10/1024 = 410/1024).
pub const C: f64 = 410.0 / 1024.0;
/// Linux `beta_scale = 8·(1024 + β)/3/(1024 − β)` = 15 (integer), used in the TCP-friendly
/// estimate: one packet of Reno growth per `cwnd·beta_scale/8` packets ACKed.
const FRIENDLY_SCALE: u32 = 8 * (BETA_SCALE + BETA) / 3 / (BETA_SCALE - BETA);
const HYSTART_LOW_WINDOW: u32 = 16;
const HYSTART_MIN_SAMPLES: u32 = 8;
const HYSTART_ACK_DELTA_NS: u64 = 2_000_000;

#[derive(Clone, Debug, Default)]
pub struct Cubic {
    /// Linux `cnt`: ACKed packets per cwnd increment.
    pub cnt: u32,
    /// W_max (packets) after fast convergence.
    pub last_max_cwnd: u32,
    pub origin_point: u32,
    /// K in seconds.
    pub k_s: f64,
    /// Minimum RTT (ns), 0 = unknown.
    pub delay_min_ns: u64,
    /// Start of the current epoch; None = no epoch.
    pub epoch_start: Option<Time>,
    pub ack_cnt: u32,
    /// Reno-friendly window estimate (packets).
    pub tcp_cwnd: u32,
    // HyStart
    pub found: bool,
    round_start: Time,
    last_ack: Time,
    end_seq: u64,
    curr_rtt_ns: u64,
    sample_cnt: u32,
    pub hystart: bool,
}

impl Cubic {
    pub fn new() -> Cubic {
        Cubic {
            hystart: true,
            ..Default::default()
        }
    }

    fn reset(&mut self) {
        let hystart = self.hystart;
        *self = Cubic {
            hystart,
            ..Default::default()
        };
    }

    fn hystart_reset(&mut self, st: &CcState) {
        self.round_start = st.now;
        self.last_ack = st.now;
        self.end_seq = st.snd_nxt;
        self.curr_rtt_ns = u64::MAX;
        self.sample_cnt = 0;
    }

    /// RFC 9438 §4.2 W_cubic(t) = C·(t − K)³ + W_max, with t since the epoch start.
    pub fn w_cubic(&self, t_s: f64) -> f64 {
        self.origin_point as f64 + C * (t_s - self.k_s).powi(3)
    }

    /// Linux `bictcp_update`: sets `cnt` from the cubic target and the Reno estimate.
    fn update(&mut self, st: &CcState, acked: u32) {
        let cwnd = st.cwnd;
        self.ack_cnt += acked;
        if self.epoch_start.is_none() {
            self.epoch_start = Some(st.now);
            self.ack_cnt = acked;
            self.tcp_cwnd = cwnd;
            if self.last_max_cwnd <= cwnd {
                self.k_s = 0.0;
                self.origin_point = cwnd;
            } else {
                // K = ∛((W_max − cwnd)/C); after a reduction cwnd = β·W_max.
                self.k_s = ((self.last_max_cwnd - cwnd) as f64 / C).cbrt();
                self.origin_point = self.last_max_cwnd;
            }
        }
        let t =
            (st.now - self.epoch_start.unwrap()).as_secs_f64() + self.delay_min_ns as f64 * 1e-9;
        let target = self.w_cubic(t).max(0.0);
        let cwnd_f = cwnd as f64;
        self.cnt = if target > cwnd_f {
            ((cwnd_f / (target - cwnd_f)) as u32).max(1)
        } else {
            100 * cwnd
        };
        if self.last_max_cwnd == 0 && self.cnt > 20 {
            self.cnt = 20;
        }
        // TCP-friendly region (RFC 9438 §4.3, Linux `tcp_friendliness`).
        let delta = (cwnd * FRIENDLY_SCALE) >> 3;
        if delta > 0 {
            while self.ack_cnt > delta {
                self.ack_cnt -= delta;
                self.tcp_cwnd += 1;
            }
        }
        if self.tcp_cwnd > cwnd {
            let max_cnt = cwnd / (self.tcp_cwnd - cwnd);
            self.cnt = self.cnt.min(max_cnt);
        }
        self.cnt = self.cnt.max(2);
    }

    fn hystart_update(&mut self, st: &mut CcState, delay_ns: u64) {
        // A new round starts at the first ACK past the previous round's snd_nxt, at any
        // cwnd; the tests below only from hystart_low_window on (Linux 6.14+, commit
        // "tcp_cubic: fix incorrect HyStart round start detection").
        if st.snd_una > self.end_seq {
            self.hystart_reset(st);
        }
        if st.cwnd < HYSTART_LOW_WINDOW {
            return;
        }
        // Ack train: ACKs keep arriving closely spaced for longer than delay_min/2
        // (plus Linux's ack-delay allowance of ≤ 1 ms when a pacing rate is known).
        if st.now.saturating_since(self.last_ack).0 <= HYSTART_ACK_DELTA_NS {
            self.last_ack = st.now;
            let rate_bytes = st.pacing_rate_bps / 8;
            let allowance = (65_536u64 * 4 * 1_000_000_000)
                .checked_div(rate_bytes)
                .map_or(0, |a| a.min(1_000_000));
            let mut threshold = self.delay_min_ns + allowance;
            if !st.paced {
                threshold /= 2;
            }
            if st.now.saturating_since(self.round_start).0 > threshold {
                self.found = true;
                st.ssthresh = st.cwnd;
            }
        }
        // Delay increase: the round's minimum RTT exceeds delay_min + clamp(delay_min/8, 4, 16 ms).
        self.curr_rtt_ns = self.curr_rtt_ns.min(delay_ns);
        if self.sample_cnt < HYSTART_MIN_SAMPLES {
            self.sample_cnt += 1;
        } else {
            let thresh = (self.delay_min_ns >> 3).clamp(4_000_000, 16_000_000);
            if self.curr_rtt_ns > self.delay_min_ns + thresh {
                self.found = true;
                st.ssthresh = st.cwnd;
            }
        }
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn init(&mut self, st: &mut CcState) {
        self.reset();
        self.hystart_reset(st);
    }

    /// Linux `cubictcp_recalc_ssthresh`: fast convergence and β = 717/1024.
    fn ssthresh(&mut self, st: &CcState) -> u32 {
        self.epoch_start = None;
        if st.cwnd < self.last_max_cwnd {
            self.last_max_cwnd = st.cwnd * (BETA_SCALE + BETA) / (2 * BETA_SCALE);
        } else {
            self.last_max_cwnd = st.cwnd;
        }
        (st.cwnd * BETA / BETA_SCALE).max(2)
    }

    #[inline]
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
        self.update(st, acked);
        let cnt = self.cnt;
        st.cong_avoid_ai(cnt, acked);
    }

    #[inline]
    fn pkts_acked(&mut self, st: &mut CcState, _acked: u32, rtt_ns: Option<u64>) {
        let Some(delay) = rtt_ns else { return };
        // Discard delay samples right after fast recovery (Linux: within 1 s of the epoch).
        if let Some(e) = self.epoch_start {
            if st.now.saturating_since(e).0 < 1_000_000_000 {
                return;
            }
        }
        let delay = delay.max(1);
        if self.delay_min_ns == 0 || self.delay_min_ns > delay {
            self.delay_min_ns = delay;
        }
        if self.hystart && !self.found && st.in_slow_start() {
            self.hystart_update(st, delay);
        }
    }

    fn set_state(&mut self, st: &mut CcState, new: CaState) {
        if new == CaState::Loss {
            self.reset();
            self.hystart_reset(st);
        }
    }

    fn cwnd_event(&mut self, st: &mut CcState, ev: CaEvent) {
        if ev == CaEvent::TxStart {
            // The cubic curve does not advance while the flow is idle: shift the epoch by
            // the time since data was last sent (Linux `cubictcp_cwnd_event`, `now -
            // tp->lsndtime`), never past now.
            if let Some(e) = self.epoch_start {
                let idle = st.now.saturating_since(st.lsndtime);
                let shifted = (e + idle).min(st.now);
                self.epoch_start = Some(shifted);
            }
        }
    }

    fn undo_cwnd(&mut self, st: &CcState) -> u32 {
        st.cwnd.max(st.ssthresh.saturating_mul(BETA_SCALE) / BETA)
    }

    fn observe(&self, emit: &mut dyn FnMut(&str, f64)) {
        emit("cubic_wmax_pkts", self.last_max_cwnd as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::cc::test_state;

    #[test]
    fn reduction_and_fast_convergence() {
        let mut c = Cubic::new();
        let mut st = test_state(100);
        assert_eq!(c.ssthresh(&st), 70, "β = 717/1024 ≈ 0.7 (RFC 9438 §4.6)");
        assert_eq!(c.last_max_cwnd, 100);
        // A second loss below W_max: W_max = cwnd·(1 + β)/2 = 0.85·cwnd (RFC 9438 §4.7;
        // Linux: cwnd·(1024 + 717)/2048).
        st.cwnd = 70;
        assert_eq!(c.ssthresh(&st), 49);
        assert_eq!(c.last_max_cwnd, 59, "70 · 0.85 = 59.5");
        st.cwnd = 80;
        c.ssthresh(&st);
        assert_eq!(
            c.last_max_cwnd, 80,
            "above the previous W_max: no fast convergence"
        );
        st.cwnd = 2;
        assert_eq!(c.ssthresh(&st), 2, "never below 2 packets");
    }

    /// ACK-clocked congestion avoidance: every RTT, one ACK per packet of the window,
    /// evenly spread. Returns the time (s) at which cwnd first reaches `w` (None if not
    /// within `max_rounds` RTTs).
    fn ca_until(
        c: &mut Cubic,
        st: &mut CcState,
        rtt_ns: u64,
        w: u32,
        max_rounds: u32,
    ) -> Option<f64> {
        let t0 = st.now;
        // Bounded: a wrong law that makes cwnd run away must fail, not hang the test.
        let mut budget = 1_000_000u32;
        for _ in 0..max_rounds {
            let n = st.cwnd;
            for _ in 0..n {
                budget = budget
                    .checked_sub(1)
                    .expect("more than 10^6 ACKs: cwnd ran away");
                st.now += sojourn_core::Duration(rtt_ns / n as u64);
                st.snd_una += 1;
                c.pkts_acked(st, 1, Some(rtt_ns));
                c.cong_avoid(st, 1);
                if st.cwnd >= w {
                    return Some((st.now - t0).as_secs_f64());
                }
            }
        }
        None
    }

    /// After a loss at W_max = 100 (no fast convergence), K = ∛(100 · 0.3 / 0.4) =
    /// 4.217 s (RFC 9438 §4.2; Linux's fixed point with C = 410/1024 gives 4.215 s).
    #[test]
    fn k_is_4_217_s_for_w_max_100() {
        let mut c = Cubic::new();
        let mut st = test_state(100);
        st.ssthresh = c.ssthresh(&st);
        st.cwnd = st.ssthresh;
        c.cong_avoid(&mut st, 1);
        assert!((c.k_s - 4.217).abs() < 0.005, "K = {} s", c.k_s);
        assert_eq!(c.origin_point, 100);
    }

    /// The window after a loss follows W(t) = 0.4·(t − 4.217)³ + 100 evaluated one RTT
    /// ahead (RFC 9438 §4.2 W_cubic(t + RTT)), t counted from the epoch start, which is
    /// the first ACK after recovery (here 1 s after the loss), not the loss. With a
    /// 100-ms RTT, W(t + 0.1) = 90 at t = 4.217 − ∛25 − 0.1 = 1.19 s and 96 at
    /// 4.217 − ∛10 − 0.1 = 1.96 s.
    #[test]
    fn window_follows_the_cubic_curve_from_the_epoch_start() {
        let mut c = Cubic::new();
        let mut st = test_state(100);
        c.delay_min_ns = 100_000_000;
        st.now = Time::from_ns(5_000_000_000);
        st.ssthresh = c.ssthresh(&st);
        st.cwnd = st.ssthresh;
        // Recovery: one second without congestion avoidance.
        st.now = Time::from_ns(6_000_000_000);
        let t90 = ca_until(&mut c, &mut st, 100_000_000, 90, 100).expect("reaches 90");
        // The first ACK comes one packet time (100 ms / 70) after recovery ends.
        assert_eq!(
            c.epoch_start,
            Some(Time::from_ns(6_000_000_000 + 100_000_000 / 70))
        );
        assert!((t90 - 1.19).abs() < 0.15, "cwnd 90 after {t90:.3} s");
        let t96 = ca_until(&mut c, &mut st, 100_000_000, 96, 100).unwrap() + t90;
        assert!((t96 - 1.96).abs() < 0.15, "cwnd 96 after {t96:.3} s");
    }

    /// RFC 9438 §4.3 (Linux tcp_friendliness): where Reno would be faster, CUBIC grows
    /// like Reno with α = 3(1 − β)/(1 + β) ≈ 0.53 packet per RTT. W_max 20 and a 1-ms
    /// RTT: the cubic curve alone would add under one packet in 100 RTTs (K = 2.47 s);
    /// the Reno estimate adds 100 · 8/15 = 53 (Linux's beta_scale 15), from 14 to 67.
    #[test]
    fn tcp_friendly_region_grows_like_reno() {
        let mut c = Cubic::new();
        let mut st = test_state(20);
        c.delay_min_ns = 1_000_000;
        st.ssthresh = c.ssthresh(&st);
        st.cwnd = st.ssthresh;
        assert_eq!(st.cwnd, 14);
        let t0 = st.now;
        let _ = ca_until(&mut c, &mut st, 1_000_000, u32::MAX, 100);
        assert!((st.now - t0).as_secs_f64() < 0.101);
        assert!(
            (60..=68).contains(&st.cwnd),
            "cwnd {} after 100 RTTs",
            st.cwnd
        );
    }

    /// Before the first loss W_max is 0 and Linux caps cnt at 20: at least 5% growth per
    /// RTT (cwnd 100 -> 105 -> 110 in two RTTs of ACKs).
    #[test]
    fn growth_before_the_first_loss_is_at_least_5_percent_per_rtt() {
        let mut c = Cubic::new();
        let mut st = test_state(100);
        st.ssthresh = 100; // left slow start without a loss (HyStart)
        c.delay_min_ns = 10_000_000;
        let _ = ca_until(&mut c, &mut st, 10_000_000, u32::MAX, 1);
        assert_eq!(st.cwnd, 105);
        let _ = ca_until(&mut c, &mut st, 10_000_000, u32::MAX, 1);
        assert_eq!(st.cwnd, 110);
    }

    /// Linux cubictcp_state: an RTO (Loss) forgets W_max and the epoch (bictcp_reset).
    #[test]
    fn rto_resets_w_max_and_the_epoch() {
        let mut c = Cubic::new();
        let mut st = test_state(100);
        c.ssthresh(&st);
        st.cwnd = 70;
        st.ssthresh = 70;
        c.cong_avoid(&mut st, 1);
        assert!(c.epoch_start.is_some());
        c.set_state(&mut st, CaState::Loss);
        assert_eq!(c.last_max_cwnd, 0);
        assert_eq!(c.epoch_start, None);
        assert!(c.hystart && !c.found);
    }

    /// Linux `bictcp_update`: a window at or above the curve's target grows by one packet
    /// per 100 · cwnd ACKs (cwnd 100: the 10 000th ACK), with the clock standing still.
    #[test]
    fn above_the_cubic_target_one_packet_per_100_windows_of_acks() {
        let mut c = Cubic::new();
        let mut st = test_state(100);
        st.ssthresh = 50;
        st.now = Time::from_ns(3_000_000_000);
        c.last_max_cwnd = 100;
        c.origin_point = 100;
        c.k_s = 2.0; // W(0) = 100 − 0.4 · 8 = 96.8 < cwnd
        c.epoch_start = Some(st.now);
        for _ in 0..9_999 {
            c.cong_avoid(&mut st, 1);
        }
        assert_eq!(st.cwnd, 100);
        c.cong_avoid(&mut st, 1);
        assert_eq!(st.cwnd, 101);
    }

    /// Linux `cubictcp_cong_avoid`: ACKs left over when slow start reaches ssthresh go
    /// to congestion avoidance in the same call (cwnd 9, ssthresh 10, 5 ACKed: cwnd 10
    /// and 4 counted towards the next increment; the epoch starts).
    #[test]
    fn acks_left_over_at_ssthresh_start_congestion_avoidance() {
        let mut c = Cubic::new();
        let mut st = test_state(9);
        st.ssthresh = 10;
        st.now = Time::from_ns(2_000_000_000);
        c.cong_avoid(&mut st, 5);
        assert_eq!((st.cwnd, st.cwnd_cnt), (10, 4));
        assert_eq!(c.epoch_start, Some(st.now));
    }

    /// Linux discards delay samples for HZ after the epoch starts (`now − epoch_start
    /// < HZ`): one at exactly 1 s counts.
    #[test]
    fn delay_samples_count_again_one_second_after_the_epoch() {
        let mut c = Cubic::new();
        let mut st = test_state(50);
        st.ssthresh = 30;
        c.epoch_start = Some(Time::from_ns(5_000_000_000));
        st.now = Time::from_ns(5_999_999_999);
        c.pkts_acked(&mut st, 1, Some(7_000_000));
        assert_eq!(c.delay_min_ns, 0, "within 1 s: discarded");
        st.now = Time::from_ns(6_000_000_000);
        c.pkts_acked(&mut st, 1, Some(7_000_000));
        assert_eq!(c.delay_min_ns, 7_000_000);
    }

    /// An undone reduction restores the window before the loss (Linux: prior_cwnd, 100
    /// after a loss at 100; here rebuilt from ssthresh 70 · 1024/717 = 99.97, so 99) and
    /// never lowers the current window.
    #[test]
    fn undo_restores_the_window_before_the_loss() {
        let mut c = Cubic::new();
        let mut st = test_state(100);
        st.ssthresh = c.ssthresh(&st);
        st.cwnd = st.ssthresh;
        let w = c.undo_cwnd(&st);
        assert!((99..=100).contains(&w), "undo to {w}");
        st.cwnd = 120;
        assert_eq!(c.undo_cwnd(&st), 120);
    }

    /// Linux `tcp_friendliness`: the Reno estimate gains a packet once more than
    /// cwnd · 15/8 packets were ACKed (`while (ca->ack_cnt > delta)`): cwnd 14 → delta 26,
    /// W_est 14 after the 26th ACK of the epoch, 15 after the 27th.
    #[test]
    fn reno_estimate_gains_a_packet_after_more_than_15_8_windows_of_acks() {
        let mut c = Cubic::new();
        let mut st = test_state(14);
        st.ssthresh = 10;
        st.now = Time::from_ns(1_000_000_000);
        c.last_max_cwnd = 20;
        for _ in 0..26 {
            c.cong_avoid(&mut st, 1);
        }
        assert_eq!((st.cwnd, c.tcp_cwnd), (14, 14));
        c.cong_avoid(&mut st, 1);
        assert_eq!(c.tcp_cwnd, 15);
    }

    /// Linux `cubictcp_cwnd_event(CA_EVENT_TX_START)`: the epoch moves by the idle time,
    /// `now − lsndtime` (the last data sent), never past now. Epoch at 10 s, last send at
    /// 20 s, restart at 21 s: the epoch moves to 11 s (the curve resumes where it left
    /// off), whenever the previous restart after idle was.
    #[test]
    fn restart_after_idle_shifts_the_epoch_by_the_time_since_the_last_send() {
        let mut c = Cubic::new();
        let mut st = test_state(50);
        st.now = Time::from_ns(1_000_000_000);
        c.cwnd_event(&mut st, CaEvent::TxStart); // an earlier restart, at 1 s
        c.epoch_start = Some(Time::from_ns(10_000_000_000));
        st.lsndtime = Time::from_ns(20_000_000_000);
        st.now = Time::from_ns(21_000_000_000);
        c.cwnd_event(&mut st, CaEvent::TxStart);
        assert_eq!(c.epoch_start, Some(Time::from_ns(11_000_000_000)));
        // An epoch that began (at an ACK) after the last send: 20.5 s + 1 s is past the
        // restart at 21 s, so the epoch starts at 21 s.
        c.epoch_start = Some(Time::from_ns(20_500_000_000));
        st.lsndtime = Time::from_ns(20_000_000_000);
        st.now = Time::from_ns(21_000_000_000);
        c.cwnd_event(&mut st, CaEvent::TxStart);
        assert_eq!(c.epoch_start, Some(Time::from_ns(21_000_000_000)));
    }

    /// Drive HyStart through one round with ACKs every `spacing_us`, delay samples
    /// `rtt_us`, and return the cwnd at which slow start ended (None = did not end).
    fn hystart_exit(paced: bool, spacing_us: u64, rtt_us: u64, acks: u32) -> Option<u32> {
        hystart_exit_at(16, 100, paced, spacing_us, rtt_us, acks)
    }

    fn hystart_exit_at(
        cwnd: u32,
        delay_min_us: u64,
        paced: bool,
        spacing_us: u64,
        rtt_us: u64,
        acks: u32,
    ) -> Option<u32> {
        let mut c = Cubic::new();
        let mut st = test_state(cwnd);
        st.paced = paced;
        // Linux sk_pacing_rate in slow start for cwnd 16, srtt 1 ms: 200% · 16·1448 B/ms.
        st.pacing_rate_bps = 2 * 16 * 1448 * 8 * 1000;
        c.init(&mut st);
        c.delay_min_ns = delay_min_us * 1000;
        // The first ACK passes end_seq and opens the round (bictcp_hystart_reset).
        st.snd_nxt = 1_000_000;
        for i in 1..=acks {
            st.now = Time::from_ns(i as u64 * spacing_us * 1000);
            st.snd_una += 2;
            c.pkts_acked(&mut st, 2, Some(rtt_us * 1000));
            if !st.in_slow_start() {
                return Some(i);
            }
        }
        None
    }

    #[test]
    fn hystart_ack_train_threshold_follows_the_kernel() {
        // hystart_ack_delay = min(1 ms, 4 · 65536 B / rate): capped at 1 ms here.
        // Unpaced (SK_PACING_NONE): the train ends slow start once the round is longer
        // than (delay_min + 1 ms)/2 = 550 us: ACKs every 100 us from the round's first
        // ACK -> the 7th ACK (600 us into the round).
        assert_eq!(hystart_exit(false, 100, 150, 20), Some(7));
        // Paced: no halving, > 1100 us -> the 13th ACK (1200 us).
        assert_eq!(hystart_exit(true, 100, 150, 20), Some(13));
        // ACKs more than hystart_ack_delta_us (2 ms) apart are no train: no exit, and
        // the delay test stays below delay_min + 4 ms (HYSTART_DELAY_MIN clamp).
        assert_eq!(hystart_exit(false, 2_100, 3_000, 20), None);
        // Delay test: 8 samples, then the round's minimum RTT above delay_min + 4 ms.
        assert_eq!(hystart_exit(false, 2_100, 4_200, 20), Some(9));
    }

    /// HyStart runs its tests only from hystart_low_window (16) on: the same ACK train
    /// ends slow start at the 7th ACK with cwnd 32, and never with cwnd 15.
    #[test]
    fn hystart_tests_only_from_the_low_window() {
        assert_eq!(hystart_exit_at(32, 100, false, 100, 150, 20), Some(7));
        assert_eq!(hystart_exit_at(15, 100, false, 100, 150, 20), None);
    }

    /// HyStart only runs in slow start (Linux: `!ca->found && tcp_in_slow_start(tp)`):
    /// the ACK train that ends slow start at the 7th ACK leaves a congestion-avoidance
    /// window's ssthresh (20) alone.
    #[test]
    fn hystart_is_off_in_congestion_avoidance() {
        let mut c = Cubic::new();
        let mut st = test_state(32);
        st.pacing_rate_bps = 2 * 16 * 1448 * 8 * 1000;
        c.init(&mut st);
        st.ssthresh = 20;
        c.delay_min_ns = 100_000;
        st.snd_nxt = 1_000_000;
        for i in 1..=20u64 {
            st.now = Time::from_ns(i * 100_000);
            st.snd_una += 2;
            c.pkts_acked(&mut st, 2, Some(150_000));
        }
        assert_eq!(st.ssthresh, 20);
        assert!(!c.found);
    }

    /// The delay threshold is delay_min/8 clamped to [4, 16] ms (HYSTART_DELAY_THRESH):
    /// 10 ms for an 80-ms path. ACKs 3 ms apart (no train): RTT samples of 90.5 ms end
    /// slow start at the 9th sample (after the 8 the round needs), 89.5 ms do not.
    #[test]
    fn hystart_delay_threshold_is_an_eighth_of_the_min_rtt() {
        assert_eq!(
            hystart_exit_at(16, 80_000, false, 3_000, 90_500, 20),
            Some(9)
        );
        assert_eq!(hystart_exit_at(16, 80_000, false, 3_000, 89_500, 20), None);
        // Exactly delay_min + threshold (90 ms) is not above it (Linux: strict `>`).
        assert_eq!(hystart_exit_at(16, 80_000, false, 3_000, 90_000, 20), None);
    }

    /// Linux `after(tp->snd_una, ca->end_seq)`: an ACK up to exactly end_seq still
    /// belongs to the round; the first one past it opens the next round.
    #[test]
    fn hystart_round_starts_strictly_after_end_seq() {
        let mut c = Cubic::new();
        let mut st = test_state(10);
        st.snd_nxt = 50;
        c.init(&mut st);
        assert_eq!(c.end_seq, 50);
        st.snd_nxt = 120;
        st.now = Time::from_ns(1_000_000);
        st.snd_una = 50;
        c.pkts_acked(&mut st, 1, Some(100_000));
        assert_eq!((c.round_start, c.end_seq), (Time::ZERO, 50));
        st.now = Time::from_ns(2_000_000);
        st.snd_una = 51;
        c.pkts_acked(&mut st, 1, Some(100_000));
        assert_eq!((c.round_start, c.end_seq), (Time::from_ns(2_000_000), 120));
    }

    /// RFC 9438 §4.3 (Linux `tcp_friendliness`): with the Reno estimate W_est ahead of
    /// cwnd, cwnd grows by (W_est − cwnd)/cwnd per ACK: W_est 110, cwnd 100 (above its
    /// cubic target) → one packet per 10 ACKs.
    #[test]
    fn reno_estimate_ahead_sets_the_growth_rate() {
        let mut c = Cubic::new();
        let mut st = test_state(100);
        st.ssthresh = 50;
        st.now = Time::from_ns(3_000_000_000);
        c.last_max_cwnd = 100;
        c.origin_point = 100;
        c.k_s = 2.0;
        c.epoch_start = Some(st.now);
        c.tcp_cwnd = 110;
        for _ in 0..9 {
            c.cong_avoid(&mut st, 1);
        }
        assert_eq!(st.cwnd, 100);
        c.cong_avoid(&mut st, 1);
        assert_eq!(st.cwnd, 101);
    }

    /// Linux `tcp_is_cwnd_limited`: in slow start a window below twice the packets out
    /// may grow even if the sender is not cwnd-limited; once HyStart has set
    /// ssthresh = cwnd only the cwnd-limited flag counts.
    #[test]
    fn growth_needs_cwnd_limited_after_hystart() {
        let mut c = Cubic::new();
        let mut st = test_state(20);
        c.init(&mut st);
        st.is_cwnd_limited = false;
        st.max_packets_out = 11;
        assert!(st.cwnd_limited(), "20 < 2 · 11 in slow start");
        c.cong_avoid(&mut st, 2);
        assert_eq!(st.cwnd, 22);
        st.ssthresh = st.cwnd; // HyStart exit
        assert!(!st.cwnd_limited());
        for _ in 0..100 {
            c.cong_avoid(&mut st, 2);
        }
        assert_eq!(st.cwnd, 22, "no growth while not cwnd-limited");
        st.is_cwnd_limited = true;
        for _ in 0..100 {
            c.cong_avoid(&mut st, 2);
        }
        assert!(st.cwnd > 22);
    }

    /// Linux 6.14+ ("fix incorrect HyStart round start detection"): rounds start below
    /// hystart_low_window too, so the train is timed from the round's true start.
    #[test]
    fn hystart_rounds_start_below_the_low_window() {
        let mut c = Cubic::new();
        let mut st = test_state(15);
        st.pacing_rate_bps = 2 * 16 * 1448 * 8 * 1000;
        c.init(&mut st);
        c.delay_min_ns = 100_000;
        st.snd_nxt = 1_000_000;
        st.snd_una = 3;
        st.now = Time::from_ns(100_000);
        c.pkts_acked(&mut st, 2, Some(150_000)); // cwnd 15: opens the round only
        assert!(st.in_slow_start());
        st.cwnd = 16;
        st.snd_una = 5;
        st.now = Time::from_ns(700_000);
        c.pkts_acked(&mut st, 2, Some(150_000));
        // 600 us into the round > (100 us + 1 ms)/2: slow start ends at once.
        assert!(!st.in_slow_start());
        assert_eq!(st.ssthresh, 16);
    }
}
