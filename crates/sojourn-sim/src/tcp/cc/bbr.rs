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

use super::vocab::{CaEvent, CaState, CcState, CongestionControl, RateSample, INFINITE_SSTHRESH};
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

    /// A BBR sender driven ACK by ACK with hand-made rate samples. Every truth below is
    /// worked out by hand from tcp_bbr.c (v1) rules and written as a literal: a path of
    /// 1000 packets/s (11.584 Mbit/s of 1448-B segments) and a 20-ms min RTT has a BDP of
    /// 20 packets; at pacing rates between 1.2 and 35 Mbit/s `bbr_tso_segs_goal` is 2
    /// segments, so the quantization budget adds 3 × 2 = 6 packets.
    struct Path {
        b: Bbr,
        st: CcState,
        rtt_ns: u64,
    }

    const MS: u64 = 1_000_000;

    impl Path {
        fn new(seed: u64) -> Path {
            let mut st = crate::tcp::cc::test_state(10);
            // An SRTT of 100 ms before the first sample: the initial pacing rate is
            // 2.885 · 10 packets / 100 ms (bbr_init_pacing_rate_from_rtt), low enough
            // that the first bandwidth sample raises it.
            st.srtt_ns = 100 * MS;
            st.in_flight = 60;
            let mut b = Bbr::new(seed);
            b.init(&mut st);
            Path {
                b,
                st,
                rtt_ns: 20 * MS,
            }
        }

        /// One ACK `dt_ns` after the previous one that newly delivers `acked` packets,
        /// with a delivery-rate sample of `bw_pps`; `round` makes it the first ACK of a
        /// new round trip (its packet was sent after the previous round's last one).
        fn ack_with(
            &mut self,
            dt_ns: u64,
            round: bool,
            bw_pps: u64,
            app_limited: bool,
            acked: u32,
            losses: u32,
        ) {
            self.st.now += sojourn_core::Duration(dt_ns);
            let prior_delivered = if round { self.st.delivered } else { 0 };
            self.st.delivered += acked as u64;
            let rs = RateSample {
                delivered: (bw_pps / 10) as i64,
                interval_ns: 100 * MS,
                prior_delivered,
                is_app_limited: app_limited,
                rtt_ns: Some(self.rtt_ns),
                losses,
                acked_sacked: acked,
                prior_in_flight: self.st.in_flight,
            };
            self.b.cong_control(&mut self.st, &rs);
        }

        fn ack(&mut self, dt_ns: u64, round: bool, bw_pps: u64) {
            self.ack_with(dt_ns, round, bw_pps, false, 1, 0)
        }

        fn round(&mut self, bw_pps: u64) {
            self.ack(self.rtt_ns, true, bw_pps)
        }

        /// STARTUP at 500, 840 then 1000 packets/s for `plateau` rounds.
        fn startup(seed: u64, plateau: usize) -> Path {
            let mut p = Path::new(seed);
            p.round(500);
            p.round(840);
            for _ in 0..plateau {
                p.round(1000);
            }
            p
        }

        /// Through STARTUP and DRAIN into PROBE_BW at 1000 packets/s, 20 ms.
        fn probe_bw(seed: u64) -> Path {
            let mut p = Path::startup(seed, 3);
            p.st.in_flight = 20;
            p.ack(MS, false, 1000);
            assert_eq!(p.b.mode, Mode::ProbeBw);
            p
        }
    }

    fn close(got: u64, want: f64, rel: f64) -> bool {
        (got as f64 - want).abs() <= rel * want
    }

    #[test]
    fn startup_paces_and_sizes_cwnd_at_2_885_times_the_model() {
        let mut p = Path::new(1);
        // Before any sample: 2.885 · 10 pkts / 100 ms · 1448 B · 8 · 0.99 = 3.309 Mbit/s.
        assert!(
            close(p.st.pacing_rate_bps, 3_308_564.0, 0.003),
            "{}",
            p.st.pacing_rate_bps
        );
        p.round(1000);
        // 2.885 · 1000 pkt/s · 11584 bit · 0.99 (pacing margin) = 33.086 Mbit/s (the
        // kernel's 739/256 gives 33.105: within 0.1%).
        assert_eq!(p.b.mode, Mode::Startup);
        assert!(
            close(p.st.pacing_rate_bps, 33_085_642.0, 0.003),
            "{}",
            p.st.pacing_rate_bps
        );
        // cwnd grows by the packets ACKed up to ceil(2.885 · BDP 20) = 58 + 6 = 64.
        for _ in 0..100 {
            p.ack(MS, false, 1000);
        }
        assert_eq!(p.st.cwnd, 64);
    }

    /// Linux `bbr_init_pacing_rate_from_rtt` without an RTT sample assumes 1 ms:
    /// 2.885 · 10 packets / 1 ms · 1448 B · 8 · 0.99 = 330.9 Mbit/s.
    #[test]
    fn initial_pacing_rate_without_an_rtt_sample_assumes_1_ms() {
        let mut st = crate::tcp::cc::test_state(10);
        assert_eq!(st.srtt_ns, 0);
        let mut b = Bbr::new(1);
        b.init(&mut st);
        assert!(
            close(st.pacing_rate_bps, 330_856_416.0, 0.003),
            "{}",
            st.pacing_rate_bps
        );
        // The first RTT sample (SRTT 100 ms) re-derives it, even downwards (Linux
        // bbr_set_pacing_rate: `!has_seen_rtt && srtt_us`): 3.309 Mbit/s.
        st.srtt_ns = 100_000_000;
        let rs = RateSample {
            delivered: -1,
            ..Default::default()
        };
        b.cong_control(&mut st, &rs);
        assert!(
            close(st.pacing_rate_bps, 3_308_564.0, 0.003),
            "{}",
            st.pacing_rate_bps
        );
    }

    #[test]
    fn startup_ends_after_three_rounds_without_25_percent_growth() {
        // 500 -> 840 is growth (≥ 25%); 840 -> 1000 is 19%: not growth. The third round
        // without growth (round 5) ends STARTUP.
        let p = Path::startup(1, 2);
        assert_eq!(p.b.mode, Mode::Startup, "after 2 rounds without growth");
        let p = Path::startup(1, 3);
        assert_eq!(p.b.mode, Mode::Drain, "after 3 rounds without growth");
        // DRAIN sets ssthresh to the 1-BDP in-flight target: 20 + 6 = 26.
        assert_eq!(p.st.ssthresh, 26);
        // and paces at bw/2.885: 11.584 Mbit/s · 0.3466 · 0.99 = 3.975 Mbit/s (the
        // kernel's 88/256 gives 3.942).
        assert!(
            close(p.st.pacing_rate_bps, 3_975_000.0, 0.01),
            "{}",
            p.st.pacing_rate_bps
        );
    }

    #[test]
    fn app_limited_rounds_do_not_count_towards_full_bandwidth() {
        let mut p = Path::startup(1, 1);
        for _ in 0..5 {
            p.ack_with(p.rtt_ns, true, 1000, true, 1, 0);
        }
        assert_eq!(p.b.mode, Mode::Startup);
        p.round(1000);
        assert_eq!(p.b.mode, Mode::Startup);
        p.round(1000);
        assert_eq!(p.b.mode, Mode::Drain);
    }

    /// Linux `bbr_update_bw`: an app-limited sample enters the max filter only if it is
    /// at least the current max (it cannot underestimate then): 1200 packets/s over a
    /// 1000 max does, 800 does not lower anything either way.
    #[test]
    fn app_limited_samples_raise_the_max_filter_only_above_it() {
        let mut p = Path::startup(1, 3);
        assert_eq!(p.b.max_bw(), 1000.0);
        p.ack_with(p.rtt_ns, true, 1200, true, 1, 0);
        assert_eq!(p.b.max_bw(), 1200.0);
    }

    /// Full bandwidth, once reached, stays reached (only an undo or RTO restarts the
    /// count): 30 % more bandwidth in PROBE_BW, then a flat round, keep it.
    #[test]
    fn full_bandwidth_stays_reached_when_bandwidth_grows_later() {
        let mut p = Path::probe_bw(3);
        assert!(p.b.full_bw_reached);
        p.round(1300);
        p.round(1300);
        assert!(p.b.full_bw_reached);
    }

    #[test]
    fn drain_lasts_until_inflight_is_one_bdp() {
        let mut p = Path::startup(1, 3);
        p.st.in_flight = 27;
        p.ack(MS, false, 1000);
        assert_eq!(p.b.mode, Mode::Drain, "27 packets > BDP 20 + 6");
        p.st.in_flight = 26;
        p.ack(MS, false, 1000);
        assert_eq!(p.b.mode, Mode::ProbeBw);
    }

    #[test]
    fn probe_bw_phases_last_one_min_rtt_and_probe_until_1_25_bdp() {
        let mut p = Path::probe_bw(3);
        // Put the cycle in phase 2 (gain 1) now.
        p.b.cycle_idx = 2;
        p.b.cycle_stamp = p.st.now;
        for _ in 0..20 {
            p.ack(MS, false, 1000);
        }
        assert_eq!(p.b.cycle_idx, 2, "still in phase 2 after exactly 20 ms");
        p.ack(MS, false, 1000);
        assert_eq!(p.b.cycle_idx, 3, "next phase once 20 ms have passed");
        // Phases 3..7 and then the 5/4 phase, 21 ms each.
        for want in [4, 5, 6, 7, 0] {
            for _ in 0..21 {
                p.ack(MS, false, 1000);
            }
            assert_eq!(p.b.cycle_idx, want);
        }
        p.ack(MS, false, 1000);
        // 1.25 · 11.584 Mbit/s · 0.99 = 14.335 Mbit/s.
        assert_eq!(p.b.pacing_gain, 1.25);
        assert!(
            close(p.st.pacing_rate_bps, 14_335_200.0, 0.003),
            "{}",
            p.st.pacing_rate_bps
        );
        // The 5/4 phase is held past one min RTT until in-flight reaches
        // ceil(1.25 · 20) = 25 + 6 = 31 -> 32 (even) + 2 (the 5/4 phase) = 34 packets.
        p.st.in_flight = 33;
        for _ in 0..100 {
            p.ack(MS, false, 1000);
        }
        assert_eq!(p.b.cycle_idx, 0, "33 packets in flight: still probing");
        p.st.in_flight = 34;
        p.ack(MS, false, 1000);
        assert_eq!(p.b.cycle_idx, 1, "34 packets reached");
        // The 3/4 phase ends early once in-flight is down to one BDP target (26).
        p.st.in_flight = 27;
        p.ack(MS, false, 1000);
        assert_eq!(p.b.cycle_idx, 1);
        p.st.in_flight = 26;
        p.ack(MS, false, 1000);
        assert_eq!(p.b.cycle_idx, 2, "drained to 26 after 2 ms, not 20");
    }

    #[test]
    fn probe_bw_leaves_the_5_4_phase_on_loss() {
        let mut p = Path::probe_bw(3);
        p.b.cycle_idx = 0;
        p.b.cycle_stamp = p.st.now;
        p.st.in_flight = 20;
        for _ in 0..25 {
            p.ack(MS, false, 1000);
        }
        assert_eq!(p.b.cycle_idx, 0);
        p.ack_with(MS, false, 1000, false, 1, 1);
        assert_eq!(p.b.cycle_idx, 1);
    }

    #[test]
    fn probe_rtt_every_10_s_holds_4_packets_for_200_ms_then_restores_cwnd() {
        let mut p = Path::probe_bw(3);
        p.b.min_rtt_stamp = p.st.now;
        let t0 = p.st.now;
        p.st.cwnd = 40;
        p.rtt_ns = 25 * MS; // no lower RTT sample: the 20-ms estimate ages out
        p.st.in_flight = 30;
        // The estimate expires when more than 10 s have passed since it was taken.
        for _ in 0..1000 {
            p.ack(10 * MS, true, 1000);
            assert_ne!(p.b.mode, Mode::ProbeRtt, "at {:?}", p.st.now - t0);
        }
        assert_eq!((p.st.now - t0).0, 10_000 * MS);
        // PROBE_BW's cwnd: gain 2 · BDP 20 + 6 = 46, + 2 in the 5/4 phase.
        let before = p.st.cwnd;
        let want = if p.b.cycle_idx == 0 { 48 } else { 46 };
        assert_eq!(before, want, "phase {}", p.b.cycle_idx);
        p.ack(MS, true, 1000);
        assert_eq!(p.b.mode, Mode::ProbeRtt);
        assert_eq!(p.st.cwnd, 4);
        // Inflight reaches 4: the 200-ms timer starts.
        p.st.in_flight = 4;
        p.ack(MS, true, 1000);
        let start = p.st.now;
        let mut n = 0;
        while p.b.mode == Mode::ProbeRtt {
            if p.b.mode == Mode::ProbeRtt {
                assert_eq!(p.st.cwnd, 4);
            }
            p.ack(10 * MS, true, 1000);
            n += 1;
            assert!(n < 1000, "PROBE_RTT never ended");
        }
        assert_eq!((p.st.now - start).0, 210 * MS, "first ACK after 200 ms");
        // The saved cwnd comes back, plus the ACKed packet.
        assert_eq!(p.st.cwnd, before + 1);
        assert_eq!(p.b.mode, Mode::ProbeBw);
        assert_eq!(p.b.min_rtt_ns, 25 * MS);
    }

    /// Linux `bbr_save_cwnd`: outside recovery and PROBE_RTT the current cwnd is the one
    /// to restore later; in PROBE_RTT (or recovery) cwnd was cut, so the larger of the
    /// saved and the current one is kept.
    #[test]
    fn save_cwnd_keeps_the_larger_window_in_probe_rtt() {
        let mut p = Path::new(1);
        p.b.prior_cwnd = 40;
        p.st.cwnd = 30;
        p.b.mode = Mode::ProbeBw;
        p.b.save_cwnd(&p.st);
        assert_eq!(p.b.prior_cwnd, 30);
        p.b.prior_cwnd = 40;
        p.st.cwnd = 4;
        p.b.mode = Mode::ProbeRtt;
        p.b.save_cwnd(&p.st);
        assert_eq!(p.b.prior_cwnd, 40);
    }

    /// Linux `bbr_reset_mode` after PROBE_RTT: back to STARTUP when the pipe was never
    /// filled (full bandwidth not reached), to PROBE_BW otherwise.
    #[test]
    fn probe_rtt_returns_to_startup_before_full_bandwidth() {
        for (full, mode) in [(false, Mode::Startup), (true, Mode::ProbeBw)] {
            let mut p = Path::new(1);
            p.b.full_bw_reached = full;
            p.b.mode = Mode::ProbeRtt;
            p.b.probe_rtt_done_stamp = Some(p.st.now);
            p.st.now += sojourn_core::Duration(1);
            p.b.check_probe_rtt_done(&mut p.st);
            assert_eq!(p.b.mode, mode);
        }
    }

    #[test]
    fn probe_rtt_lasts_at_least_one_round() {
        let mut p = Path::probe_bw(3);
        p.b.min_rtt_stamp = p.st.now;
        p.st.cwnd = 40;
        p.ack(10_001 * MS, true, 1000);
        assert_eq!(p.b.mode, Mode::ProbeRtt);
        p.st.in_flight = 4;
        p.ack(MS, false, 1000);
        let start = p.st.now;
        // No new round for 300 ms: PROBE_RTT waits for it.
        for _ in 0..30 {
            p.ack(10 * MS, false, 1000);
        }
        assert_eq!(p.b.mode, Mode::ProbeRtt);
        assert_eq!(p.st.cwnd, 4);
        p.ack(10 * MS, true, 1000); // the round ends at 310 ms: round done
        p.ack(MS, false, 1000);
        assert_eq!(p.b.mode, Mode::ProbeBw);
        assert_eq!((p.st.now - start).0, 311 * MS);
    }

    #[test]
    fn idle_restart_paces_at_the_estimated_bandwidth_and_skips_probe_rtt() {
        let mut p = Path::probe_bw(3);
        p.b.cycle_idx = 0;
        p.b.cwnd_event(&mut p.st, CaEvent::TxStart);
        // Gain 1 whatever the phase: 11.584 Mbit/s · 0.99.
        assert!(
            close(p.st.pacing_rate_bps, 11_468_160.0, 0.003),
            "{}",
            p.st.pacing_rate_bps
        );
        // The min-RTT estimate expires during the idle period; the first ACK after the
        // restart takes its RTT sample and does not enter PROBE_RTT.
        p.b.min_rtt_stamp = p.st.now;
        p.rtt_ns = 30 * MS;
        p.ack(10_001 * MS, true, 1000);
        assert_eq!(p.b.mode, Mode::ProbeBw);
        assert_eq!(p.b.min_rtt_ns, 30 * MS);
    }

    #[test]
    fn quantization_budget_is_three_tso_goals_rounded_to_even() {
        let mut p = Path::probe_bw(3);
        p.b.cycle_idx = 2;
        for (rate, goal) in [
            (1_000_000u64, 1u32),
            (10_000_000, 2),
            (100_000_000, 8),
            (1_000_000_000, 45),
            (10_000_000_000, 45),
        ] {
            p.st.pacing_rate_bps = rate;
            assert_eq!(p.b.tso_segs_goal(&p.st), goal, "{rate} bit/s");
        }
        // The byte cap is GSO_LEGACY_MAX_SIZE − 1 − MAX_TCP_HEADER = 65 536 − 1 − 320 =
        // 65 215 B (x86-64): with a 1460-B MSS that is 44 segments (65 855 B would be 45).
        p.st.mss = 1460;
        p.st.pacing_rate_bps = 10_000_000_000;
        assert_eq!(p.b.tso_segs_goal(&p.st), 44);
        p.st.mss = 1448;
        p.st.pacing_rate_bps = 100_000_000;
        assert_eq!(p.b.quantization_budget(&p.st, 20), 44);
        assert_eq!(p.b.quantization_budget(&p.st, 21), 46);
        p.b.cycle_idx = 0;
        assert_eq!(
            p.b.quantization_budget(&p.st, 20),
            46,
            "+2 in the 5/4 phase"
        );
    }

    #[test]
    fn undo_restarts_the_full_bandwidth_count() {
        let mut p = Path::startup(1, 2);
        assert_eq!(p.st.cwnd, p.b.undo_cwnd(&p.st), "undo keeps cwnd");
        // The count starts again: one round re-arms full_bw, then three more.
        for _ in 0..3 {
            p.round(1000);
            assert_eq!(p.b.mode, Mode::Startup);
        }
        p.round(1000);
        assert_eq!(p.b.mode, Mode::Drain);
    }

    /// Linux `bbr_set_cwnd_to_recover_or_restore`: packets newly marked lost leave cwnd
    /// at once (`cwnd − losses`), outside recovery too: cwnd 40, 2 lost and 1 ACKed → 39.
    #[test]
    fn losses_are_taken_out_of_cwnd() {
        let mut p = Path::probe_bw(3);
        p.b.cycle_idx = 2;
        p.st.cwnd = 40;
        p.ack_with(MS, false, 1000, false, 1, 2);
        assert_eq!(p.st.cwnd, 39);
    }

    /// Linux `bbr_update_min_rtt`: an ACK that delivers data ends the idle restart.
    #[test]
    fn delivering_ack_ends_idle_restart() {
        let mut p = Path::probe_bw(3);
        p.b.cwnd_event(&mut p.st, CaEvent::TxStart);
        assert!(p.b.idle_restart);
        p.ack(MS, false, 1000);
        assert!(!p.b.idle_restart);
    }

    /// Linux `bbr_set_cwnd_to_recover_or_restore` during the conservation round: cwnd is
    /// at least in-flight + newly ACKed on every ACK (32, then in-flight 35 + 2 = 37).
    #[test]
    fn conservation_round_keeps_cwnd_at_inflight_plus_acked() {
        let mut p = Path::probe_bw(3);
        p.b.cycle_idx = 2;
        p.st.cwnd = 40;
        p.b.ssthresh(&p.st);
        p.st.ca_state = CaState::Recovery;
        p.st.in_flight = 30;
        p.ack_with(MS, false, 1000, false, 2, 1);
        assert_eq!(p.st.cwnd, 32);
        p.st.in_flight = 35;
        p.ack_with(MS, false, 1000, false, 2, 0);
        assert_eq!(p.st.cwnd, 37);
    }

    #[test]
    fn recovery_conserves_packets_for_one_round_then_restores() {
        let mut p = Path::probe_bw(3);
        p.b.cycle_idx = 2;
        p.st.cwnd = 40;
        p.b.ssthresh(&p.st); // saves cwnd 40
        p.st.ca_state = CaState::Recovery;
        p.st.in_flight = 30;
        p.ack_with(MS, false, 1000, false, 2, 1);
        // Packet conservation: cwnd = in-flight + newly ACKed.
        assert_eq!(p.st.cwnd, 32);
        p.st.ca_state = CaState::Open;
        p.ack(MS, false, 1000);
        // Leaving recovery restores the saved 40 (then grows by the ACKed packet).
        assert_eq!(p.st.cwnd, 41);
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

    /// Kathleen Nichols' windowed max (lib/minmax.c `minmax_running_max`), window 10,
    /// worked by hand: the 2nd choice is taken after a quarter of the window (t 103), the
    /// 3rd after half (t 106); at exactly one window (t 110) nothing expires, one round
    /// later the best sample is the 2nd choice (8), then the 3rd (6); a new max resets,
    /// and a sample with nothing else left in the window (t 130) resets too.
    #[test]
    fn max_filter_keeps_the_three_best_samples_of_the_window() {
        let mut f = MaxFilter::default();
        f.reset(100, 10.0);
        let got: Vec<f64> = [
            (101, 8.0),
            (103, 8.0),
            (106, 6.0),
            (110, 5.0),
            (111, 5.0),
            (114, 4.0),
            (117, 7.0),
            (130, 1.0),
        ]
        .iter()
        .map(|&(t, v)| f.update(10, t, v))
        .collect();
        assert_eq!(got, [10.0, 10.0, 10.0, 10.0, 8.0, 6.0, 7.0, 1.0]);
    }
}
