//! TCP Vegas (Brakmo & Peterson 1995, Linux `tcp_vegas`): once per RTT compare the
//! expected and actual rates through `diff = cwnd·(rtt − base_rtt)/rtt` (packets queued
//! in the network) and keep it between α = 2 and β = 4 packets; leave slow start when
//! diff exceeds γ = 1. With fewer than three RTT samples in a round, behave like Reno.

use super::newreno::NewReno;
use super::vocab::{CaEvent, CaState, CcState, CongestionControl};

pub const ALPHA: u32 = 2;
pub const BETA: u32 = 4;
pub const GAMMA: u32 = 1;

#[derive(Clone, Debug, Default)]
pub struct Vegas {
    pub base_rtt_ns: u64,
    min_rtt_ns: u64,
    cnt_rtt: u32,
    beg_snd_nxt: u64,
    enabled: bool,
    /// Last computed queue estimate (packets), for observation.
    pub diff: u32,
}

impl Vegas {
    fn enable(&mut self, st: &CcState) {
        self.enabled = true;
        self.beg_snd_nxt = st.snd_nxt;
        self.cnt_rtt = 0;
        self.min_rtt_ns = u64::MAX;
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }
    fn init(&mut self, st: &mut CcState) {
        self.base_rtt_ns = u64::MAX;
        self.enable(st);
    }
    fn ssthresh(&mut self, st: &CcState) -> u32 {
        NewReno.ssthresh(st)
    }
    fn undo_cwnd(&mut self, st: &CcState) -> u32 {
        // `.undo_cwnd = tcp_reno_undo_cwnd`.
        NewReno.undo_cwnd(st)
    }
    fn pkts_acked(&mut self, _st: &mut CcState, _acked: u32, rtt_ns: Option<u64>) {
        let Some(rtt) = rtt_ns else { return };
        let rtt = rtt.max(1);
        self.base_rtt_ns = self.base_rtt_ns.min(rtt);
        self.min_rtt_ns = self.min_rtt_ns.min(rtt);
        self.cnt_rtt += 1;
    }
    fn set_state(&mut self, st: &mut CcState, new: CaState) {
        if new == CaState::Open {
            self.enable(st);
        } else {
            self.enabled = false;
        }
    }
    fn cwnd_event(&mut self, st: &mut CcState, ev: CaEvent) {
        // tcp_vegas_cwnd_event: a restart after idle calls tcp_vegas_init, which also
        // forgets the base RTT (the path may have changed while idle).
        if ev == CaEvent::TxStart {
            self.init(st);
        }
    }
    fn cong_avoid(&mut self, st: &mut CcState, acked: u32) {
        if !self.enabled {
            NewReno.cong_avoid(st, acked);
            return;
        }
        if st.snd_una > self.beg_snd_nxt {
            // One RTT has passed: the Vegas decision.
            self.beg_snd_nxt = st.snd_nxt;
            if self.cnt_rtt <= 2 {
                NewReno.cong_avoid(st, acked);
            } else {
                let rtt = self.min_rtt_ns;
                let target = (st.cwnd as u64 * self.base_rtt_ns / rtt) as u32;
                let diff = (st.cwnd as u64 * (rtt - self.base_rtt_ns) / self.base_rtt_ns) as u32;
                self.diff = diff;
                if diff > GAMMA && st.in_slow_start() {
                    // Going too fast: leave slow start at the target window
                    // (tcp_vegas_ssthresh = min(ssthresh, cwnd) since Linux 3.x).
                    st.cwnd = st.cwnd.min(target + 1);
                    st.ssthresh = st.ssthresh.min(st.cwnd);
                } else if st.in_slow_start() {
                    st.slow_start(acked);
                } else if diff > BETA {
                    st.cwnd -= 1;
                    st.ssthresh = st.ssthresh.min(st.cwnd);
                } else if diff < ALPHA {
                    st.cwnd += 1;
                }
                st.cwnd = st.cwnd.clamp(2, st.cwnd_clamp);
                // tcp_current_ssthresh (Vegas only runs in the Open state, outside any
                // window reduction): ssthresh is at least 3/4 of cwnd.
                st.ssthresh = st.ssthresh.max((st.cwnd >> 1) + (st.cwnd >> 2));
            }
            self.cnt_rtt = 0;
            self.min_rtt_ns = u64::MAX;
        } else if st.in_slow_start() {
            st.slow_start(acked);
        }
    }
    fn observe(&self, emit: &mut dyn FnMut(&str, f64)) {
        emit("vegas_diff_pkts", self.diff as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::cc::test_state;

    /// One Vegas round: `n` ACKs with RTT samples `rtt_ms` against a base RTT of 100 ms
    /// (the first round's samples), then the ACK that passes `beg_snd_nxt`.
    fn round(v: &mut Vegas, st: &mut CcState, rtt_ms: u64) {
        for _ in 0..3 {
            v.pkts_acked(st, 1, Some(rtt_ms * 1_000_000));
        }
        st.snd_una = st.snd_nxt + 1;
        st.snd_nxt += 100_000;
        v.cong_avoid(st, 1);
    }

    fn vegas_at(cwnd: u32, ssthresh: u32) -> (Vegas, CcState) {
        let mut st = test_state(cwnd);
        st.ssthresh = ssthresh;
        let mut v = Vegas::default();
        v.init(&mut st);
        v.pkts_acked(&mut st, 1, Some(100_000_000)); // base RTT 100 ms
        v.enable(&st); // a new round: the base sample is not one of its samples
        (v, st)
    }

    #[test]
    fn congestion_avoidance_keeps_2_to_4_packets_queued() {
        // diff = cwnd · (rtt − base)/base packets in the queue; cwnd 20, base 100 ms.
        for (rtt_ms, want) in [
            (105, 21), // diff 1 < α = 2: +1
            (110, 20), // diff 2: hold
            (120, 20), // diff 4 = β: hold
            (125, 19), // diff 5 > β: −1
        ] {
            let (mut v, mut st) = vegas_at(20, 10);
            round(&mut v, &mut st, rtt_ms);
            assert_eq!(st.cwnd, want, "rtt {rtt_ms} ms");
        }
    }

    #[test]
    fn slow_start_ends_when_more_than_gamma_1_packet_is_queued() {
        // Slow start, cwnd 20: RTT 105 ms -> diff 1 = γ: keep doubling.
        let (mut v, mut st) = vegas_at(20, INF);
        round(&mut v, &mut st, 105);
        assert_eq!(st.cwnd, 21);
        assert!(st.in_slow_start());
        // RTT 110 ms -> diff 2 > γ: cwnd = min(cwnd, 20·100/110 + 1 = 19), ssthresh = 19
        // (tcp_vegas_ssthresh), then at least 3/4 cwnd (tcp_current_ssthresh).
        let (mut v, mut st) = vegas_at(20, INF);
        round(&mut v, &mut st, 110);
        assert_eq!(st.cwnd, 19);
        assert_eq!(st.ssthresh, 19);
        assert!(!st.in_slow_start());
    }

    #[test]
    fn too_few_rtt_samples_fall_back_to_reno() {
        let (mut v, mut st) = vegas_at(20, 10);
        st.cwnd_cnt = 19;
        // Only the base sample (1 ≤ 2): Reno's one packet per window.
        st.snd_una = st.snd_nxt + 1;
        v.cong_avoid(&mut st, 1);
        assert_eq!(st.cwnd, 21);
        // Loss response: Reno's (tcp_reno_ssthresh), half the window.
        assert_eq!(v.ssthresh(&st), 10);
    }

    #[test]
    fn vegas_runs_only_in_the_open_state() {
        // tcp_vegas_state: any other state disables Vegas and cong_avoid is Reno's (cwnd 20
        // above ssthresh 10: one ACK counts 1 of 20, no change), although the round's
        // samples (125 ms, diff 5 > β) would take one packet off.
        let (mut v, mut st) = vegas_at(20, 10);
        v.set_state(&mut st, CaState::Recovery);
        round(&mut v, &mut st, 125);
        assert_eq!((st.cwnd, st.cwnd_cnt), (20, 1));
        // Back to Open: enabled again, with a fresh round.
        v.set_state(&mut st, CaState::Open);
        round(&mut v, &mut st, 125);
        assert_eq!(st.cwnd, 19);
    }

    #[test]
    fn restart_after_idle_forgets_the_base_rtt() {
        // tcp_vegas_cwnd_event(CA_EVENT_TX_START) -> tcp_vegas_init: baseRTT is reset, so
        // 125-ms samples after the restart are the new base (diff 0 < α: +1), not 5
        // packets queued over the old 100-ms base.
        let (mut v, mut st) = vegas_at(20, 10);
        v.cwnd_event(&mut st, CaEvent::TxStart);
        round(&mut v, &mut st, 125);
        assert_eq!(st.cwnd, 21);
        // An RTO (CA_EVENT_LOSS) keeps it: diff 5 > β, −1.
        let (mut v, mut st) = vegas_at(20, 10);
        v.cwnd_event(&mut st, CaEvent::Loss);
        round(&mut v, &mut st, 125);
        assert_eq!(st.cwnd, 19);
    }

    #[test]
    fn the_round_ends_only_after_beg_snd_nxt() {
        // after(ack, beg_snd_nxt) is strict: an ACK of exactly beg_snd_nxt is no decision.
        let (mut v, mut st) = vegas_at(20, 10);
        for _ in 0..3 {
            v.pkts_acked(&mut st, 1, Some(125_000_000));
        }
        st.snd_una = st.snd_nxt;
        v.cong_avoid(&mut st, 1);
        assert_eq!(st.cwnd, 20);
        st.snd_una += 1;
        v.cong_avoid(&mut st, 1);
        assert_eq!(st.cwnd, 19);
    }

    #[test]
    fn ssthresh_is_at_least_three_quarters_of_cwnd_after_a_round() {
        // tcp_current_ssthresh: max(ssthresh, cwnd/2 + cwnd/4); cwnd 20 -> 21 (diff 1 < α),
        // ssthresh 10 -> 10 + 5 = 15.
        let (mut v, mut st) = vegas_at(20, 10);
        round(&mut v, &mut st, 105);
        assert_eq!((st.cwnd, st.ssthresh), (21, 15));
    }

    #[test]
    fn observe_reports_the_queue_estimate() {
        // cwnd 20, base 100 ms, round minimum 125 ms: diff = 20 · 25 / 100 = 5 packets.
        let (mut v, mut st) = vegas_at(20, 10);
        round(&mut v, &mut st, 125);
        let mut seen = vec![];
        v.observe(&mut |k, x| seen.push((k.to_string(), x)));
        assert_eq!(seen, vec![("vegas_diff_pkts".to_string(), 5.0)]);
    }

    #[test]
    fn undo_is_renos() {
        // tcp_reno_undo_cwnd: a spurious halving 50 -> 25 is undone to 50.
        let (mut v, mut st) = vegas_at(50, INF);
        st.ssthresh = v.ssthresh(&st);
        st.cwnd = st.ssthresh;
        assert_eq!(v.undo_cwnd(&st), 50);
    }

    const INF: u32 = crate::tcp::cc::INFINITE_SSTHRESH;
}
