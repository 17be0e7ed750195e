//! BBR v1 as in Linux `tcp_bbr.c` (Cardwell et al., ACM Queue 2016).
//!
//! Model: a windowed max of delivery-rate samples over 10 round trips (`bbr_bw_rtts`)
//! and a min-RTT filter over 10 s (`bbr_min_rtt_win_sec`). Modes: STARTUP (pacing and
//! cwnd gain 2/ln2 ≈ 2.885) until the bandwidth stops growing by 25% for three rounds;
//! DRAIN (pacing gain 1/2.885) until inflight ≤ BDP; PROBE_BW cycling pacing gains
//! [5/4, 3/4, 1, 1, 1, 1, 1, 1] one min-RTT per phase, starting at a random phase that
//! is never the 3/4 one, cwnd gain 2; PROBE_RTT (cwnd 4 packets for ≥ 200 ms and one
//! round) when the min-RTT estimate is 10 s old. Pacing rate = gain·bw·(1 − 1%);
//! cwnd = gain·BDP + 3·tso_segs_goal (even), +2 in the 5/4 phase; packet conservation
//! in the first round of fast recovery.
//!
//! Not modelled (docs/transport.md): the long-term (policer) bandwidth estimate
//! (`lt_bw`), the ACK-aggregation cwnd allowance (`extra_acked`), and EDT timestamps.

use super::{CaEvent, CaState, CcState, CongestionControl, RateSample, INFINITE_SSTHRESH};
use sojourn_core::rng::Rng;
use sojourn_core::Time;

pub const HIGH_GAIN: f64 = 2885.0 / 1000.0;
pub const DRAIN_GAIN: f64 = 1000.0 / 2885.0;
pub const CWND_GAIN: f64 = 2.0;
pub const PACING_GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
pub const BW_RTTS: u64 = 10;
pub const MIN_RTT_WIN_NS: u64 = 10_000_000_000;
pub const PROBE_RTT_NS: u64 = 200_000_000;
pub const CWND_MIN_TARGET: u32 = 4;
const FULL_BW_THRESH: f64 = 1.25;
const FULL_BW_CNT: u32 = 3;
const PACING_MARGIN: f64 = 0.99;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Startup = 0,
    Drain = 1,
    ProbeBw = 2,
    ProbeRtt = 3,
}

/// Kathleen Nichols' windowed running max (Linux lib/minmax.c): three samples.
#[derive(Clone, Copy, Debug, Default)]
pub struct MaxFilter {
    s: [(u64, f64); 3],
}

impl MaxFilter {
    pub fn get(&self) -> f64 {
        self.s[0].1
    }
    pub fn reset(&mut self, t: u64, v: f64) {
        self.s = [(t, v); 3];
    }
    pub fn update(&mut self, win: u64, t: u64, v: f64) -> f64 {
        if v >= self.s[0].1 || t - self.s[2].0 > win {
            self.reset(t, v);
            return v;
        }
        if v >= self.s[1].1 {
            self.s[1] = (t, v);
            self.s[2] = (t, v);
        } else if v >= self.s[2].1 {
            self.s[2] = (t, v);
        }
        // Subwindow bookkeeping.
        let dt = t - self.s[0].0;
        if dt > win {
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = (t, v);
            if t - self.s[0].0 > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = (t, v);
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            self.s[1] = (t, v);
            self.s[2] = (t, v);
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = (t, v);
        }
        self.s[0].1
    }
}

pub struct Bbr {
    pub mode: Mode,
    /// Max-filtered delivery rate, packets per second.
    bw: MaxFilter,
    pub rtt_cnt: u64,
    next_rtt_delivered: u64,
    round_start: bool,
    pub min_rtt_ns: u64,
    min_rtt_stamp: Time,
    probe_rtt_done_stamp: Option<Time>,
    probe_rtt_round_done: bool,
    packet_conservation: bool,
    prev_ca_state: CaState,
    prior_cwnd: u32,
    idle_restart: bool,
    full_bw_reached: bool,
    full_bw: f64,
    full_bw_cnt: u32,
    cycle_idx: usize,
    cycle_stamp: Time,
    pub pacing_gain: f64,
    pub cwnd_gain: f64,
    has_seen_rtt: bool,
    rng: Rng,
    /// Times PROBE_RTT was entered (tests).
    pub probe_rtt_count: u32,
}

impl Bbr {
    pub fn new(seed: u64) -> Bbr {
        Bbr {
            mode: Mode::Startup,
            bw: MaxFilter::default(),
            rtt_cnt: 0,
            next_rtt_delivered: 0,
            round_start: false,
            min_rtt_ns: u64::MAX,
            min_rtt_stamp: Time::ZERO,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            packet_conservation: false,
            prev_ca_state: CaState::Open,
            prior_cwnd: 0,
            idle_restart: false,
            full_bw_reached: false,
            full_bw: 0.0,
            full_bw_cnt: 0,
            cycle_idx: 0,
            cycle_stamp: Time::ZERO,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            has_seen_rtt: false,
            rng: Rng::from_seed(seed),
            probe_rtt_count: 0,
        }
    }

    /// Max-filtered bottleneck bandwidth, packets/s.
    pub fn max_bw(&self) -> f64 {
        self.bw.get()
    }

    fn rate_bps(&self, st: &CcState, bw: f64, gain: f64) -> u64 {
        (bw * st.mss as f64 * 8.0 * gain * PACING_MARGIN) as u64
    }

    fn init_pacing_rate_from_rtt(&mut self, st: &mut CcState) {
        let rtt_s = if st.srtt_ns > 0 {
            self.has_seen_rtt = true;
            st.srtt_ns as f64 * 1e-9
        } else {
            1e-3
        };
        let bw = st.cwnd as f64 / rtt_s;
        st.pacing_rate_bps = self.rate_bps(st, bw, HIGH_GAIN);
    }

    fn set_pacing_rate(&mut self, st: &mut CcState, bw: f64, gain: f64) {
        let rate = self.rate_bps(st, bw, gain);
        if !self.has_seen_rtt && st.srtt_ns > 0 {
            self.init_pacing_rate_from_rtt(st);
        }
        if self.full_bw_reached || rate > st.pacing_rate_bps {
            st.pacing_rate_bps = rate;
        }
    }

    /// Linux `bbr_tso_segs_goal`: about 1 ms of data at the pacing rate, ≥ 2 segments
    /// (1 below 1.2 Mbit/s), ≤ 127.
    fn tso_segs_goal(&self, st: &CcState) -> u32 {
        let bytes = ((st.pacing_rate_bps / 8) >> 10).min(65_536 - 1 - 320);
        let min_segs = if st.pacing_rate_bps < 1_200_000 { 1 } else { 2 };
        ((bytes / st.mss as u64) as u32).max(min_segs).min(0x7f)
    }

    fn bdp(&self, bw: f64, gain: f64) -> u32 {
        if self.min_rtt_ns == u64::MAX {
            return 10; // TCP_INIT_CWND
        }
        (bw * self.min_rtt_ns as f64 * 1e-9 * gain).ceil() as u32
    }

    fn quantization_budget(&self, st: &CcState, cwnd: u32) -> u32 {
        let mut c = cwnd + 3 * self.tso_segs_goal(st);
        c = (c + 1) & !1;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            c += 2;
        }
        c
    }

    fn inflight(&self, st: &CcState, bw: f64, gain: f64) -> u32 {
        self.quantization_budget(st, self.bdp(bw, gain))
    }

    fn reset_startup_mode(&mut self) {
        self.mode = Mode::Startup;
    }

    fn reset_probe_bw_mode(&mut self, st: &CcState) {
        self.mode = Mode::ProbeBw;
        // Random start phase, never phase 1 (the 3/4 drain phase): 7 − rand(7) then advance.
        self.cycle_idx = 7 - self.rng.below(7) as usize;
        self.advance_cycle_phase(st);
    }

    fn advance_cycle_phase(&mut self, st: &CcState) {
        self.cycle_idx = (self.cycle_idx + 1) & 7;
        self.cycle_stamp = st.now;
    }

    fn reset_mode(&mut self, st: &CcState) {
        if !self.full_bw_reached {
            self.reset_startup_mode();
        } else {
            self.reset_probe_bw_mode(st);
        }
    }

    fn save_cwnd(&mut self, st: &CcState) {
        if self.prev_ca_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = st.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(st.cwnd);
        }
    }

    fn update_bw(&mut self, st: &CcState, rs: &RateSample) {
        self.round_start = false;
        if rs.delivered < 0 || rs.interval_ns == 0 {
            return;
        }
        if rs.prior_delivered >= self.next_rtt_delivered {
            self.next_rtt_delivered = st.delivered;
            self.rtt_cnt += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        let bw = rs.delivered as f64 / (rs.interval_ns as f64 * 1e-9);
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.bw.update(BW_RTTS, self.rtt_cnt, bw);
        }
    }

    fn is_next_cycle_phase(&self, st: &CcState, rs: &RateSample) -> bool {
        let full_length = st.now.saturating_since(self.cycle_stamp).0 > self.min_rtt_ns;
        let gain = PACING_GAINS[self.cycle_idx];
        if gain == 1.0 {
            return full_length;
        }
        let inflight = rs.prior_in_flight;
        let bw = self.max_bw();
        if gain > 1.0 {
            return full_length && (rs.losses > 0 || inflight >= self.inflight(st, bw, gain));
        }
        full_length || inflight <= self.inflight(st, bw, 1.0)
    }

    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.is_app_limited {
            return;
        }
        if self.max_bw() >= self.full_bw * FULL_BW_THRESH {
            self.full_bw = self.max_bw();
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_CNT;
    }

    fn check_drain(&mut self, st: &mut CcState) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            st.ssthresh = self.inflight(st, self.max_bw(), 1.0);
        }
        if self.mode == Mode::Drain && st.in_flight <= self.inflight(st, self.max_bw(), 1.0) {
            self.reset_probe_bw_mode(st);
        }
    }

    fn check_probe_rtt_done(&mut self, st: &mut CcState) {
        match self.probe_rtt_done_stamp {
            Some(t) if st.now > t => {}
            _ => return,
        }
        self.min_rtt_stamp = st.now;
        st.cwnd = st.cwnd.max(self.prior_cwnd);
        self.reset_mode(st);
    }

    fn update_min_rtt(&mut self, st: &mut CcState, rs: &RateSample) {
        let expired = st.now.saturating_since(self.min_rtt_stamp).0 > MIN_RTT_WIN_NS;
        if let Some(rtt) = rs.rtt_ns {
            if rtt < self.min_rtt_ns || expired {
                self.min_rtt_ns = rtt;
                self.min_rtt_stamp = st.now;
            }
        }
        if expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.probe_rtt_count += 1;
            self.save_cwnd(st);
            self.probe_rtt_done_stamp = None;
        }
        if self.mode == Mode::ProbeRtt {
            if self.probe_rtt_done_stamp.is_none() && st.in_flight <= CWND_MIN_TARGET {
                self.probe_rtt_done_stamp = Some(st.now + sojourn_core::Duration(PROBE_RTT_NS));
                self.probe_rtt_round_done = false;
                self.next_rtt_delivered = st.delivered;
            } else if self.probe_rtt_done_stamp.is_some() {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(st);
                }
            }
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw => (PACING_GAINS[self.cycle_idx], CWND_GAIN),
            Mode::ProbeRtt => (1.0, 1.0),
        };
    }

    fn set_cwnd_to_recover_or_restore(&mut self, st: &CcState, rs: &RateSample) -> (u32, bool) {
        let state = st.ca_state;
        let mut cwnd = st.cwnd;
        let acked = rs.acked_sacked;
        if rs.losses > 0 {
            cwnd = cwnd.saturating_sub(rs.losses).max(1);
        }
        if state == CaState::Recovery && self.prev_ca_state != CaState::Recovery {
            self.packet_conservation = true;
            self.next_rtt_delivered = st.delivered;
            cwnd = st.in_flight + acked;
        } else if self.prev_ca_state >= CaState::Recovery && state < CaState::Recovery {
            cwnd = cwnd.max(self.prior_cwnd);
            self.packet_conservation = false;
        }
        self.prev_ca_state = state;
        if self.packet_conservation {
            return (cwnd.max(st.in_flight + acked), true);
        }
        (cwnd, false)
    }

    fn set_cwnd(&mut self, st: &mut CcState, rs: &RateSample, bw: f64) {
        let acked = rs.acked_sacked;
        if acked > 0 {
            let (mut cwnd, done) = self.set_cwnd_to_recover_or_restore(st, rs);
            if !done {
                let target = self.quantization_budget(st, self.bdp(bw, self.cwnd_gain));
                if self.full_bw_reached {
                    cwnd = (cwnd + acked).min(target);
                } else if cwnd < target || st.delivered < 10 {
                    cwnd += acked;
                }
                cwnd = cwnd.max(CWND_MIN_TARGET);
            }
            st.cwnd = cwnd.min(st.cwnd_clamp);
        }
        if self.mode == Mode::ProbeRtt {
            st.cwnd = st.cwnd.min(CWND_MIN_TARGET);
        }
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    fn init(&mut self, st: &mut CcState) {
        st.ssthresh = INFINITE_SSTHRESH;
        self.next_rtt_delivered = st.delivered;
        self.min_rtt_ns = st.min_rtt_ns;
        self.min_rtt_stamp = st.now;
        self.bw.reset(0, 0.0);
        self.init_pacing_rate_from_rtt(st);
        self.reset_startup_mode();
        self.update_gains();
    }

    fn ssthresh(&mut self, st: &CcState) -> u32 {
        self.save_cwnd(st);
        st.ssthresh
    }

    fn cong_avoid(&mut self, _st: &mut CcState, _acked: u32) {}

    fn cong_control(&mut self, st: &mut CcState, rs: &RateSample) -> bool {
        self.update_bw(st, rs);
        if self.mode == Mode::ProbeBw && self.is_next_cycle_phase(st, rs) {
            self.advance_cycle_phase(st);
        }
        self.check_full_bw_reached(rs);
        self.check_drain(st);
        self.update_min_rtt(st, rs);
        self.update_gains();
        let bw = self.max_bw();
        self.set_pacing_rate(st, bw, self.pacing_gain);
        self.set_cwnd(st, rs, bw);
        true
    }

    fn set_state(&mut self, _st: &mut CcState, new: CaState) {
        if new == CaState::Loss {
            self.prev_ca_state = CaState::Loss;
            self.full_bw = 0.0;
            self.round_start = true;
        }
    }

    fn cwnd_event(&mut self, st: &mut CcState, ev: CaEvent) {
        if ev == CaEvent::TxStart {
            self.idle_restart = true;
            if self.mode == Mode::ProbeBw {
                let bw = self.max_bw();
                self.set_pacing_rate(st, bw, 1.0);
            } else if self.mode == Mode::ProbeRtt {
                self.check_probe_rtt_done(st);
            }
        }
    }

    fn undo_cwnd(&mut self, st: &CcState) -> u32 {
        self.full_bw = 0.0;
        self.full_bw_cnt = 0;
        st.cwnd
    }

    fn needs_pacing(&self) -> bool {
        true
    }

    fn observe(&self, emit: &mut dyn FnMut(&str, f64)) {
        emit("btlbw_bps", self.max_bw() * 8.0 * 1448.0);
        if self.min_rtt_ns != u64::MAX {
            emit("min_rtt_ms", self.min_rtt_ns as f64 * 1e-6);
        }
        emit("mode", self.mode as u8 as f64);
        emit("pacing_gain", self.pacing_gain);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_bw_never_starts_in_the_drain_phase() {
        let st = crate::tcp::cc::test_state(10);
        let mut seen = [false; 8];
        for seed in 0..200 {
            let mut b = Bbr::new(seed);
            b.reset_probe_bw_mode(&st);
            seen[b.cycle_idx] = true;
        }
        assert!(!seen[1], "phase 1 (gain 3/4) is never the first");
        assert!(seen.iter().enumerate().all(|(i, &s)| s || i == 1));
    }

    #[test]
    fn max_filter_forgets_after_window() {
        let mut f = MaxFilter::default();
        f.reset(0, 10.0);
        f.update(10, 1, 5.0);
        assert_eq!(f.get(), 10.0);
        for t in 2..=11 {
            f.update(10, t, 5.0);
        }
        assert_eq!(f.get(), 5.0, "the old max leaves after 10 rounds");
    }
}
