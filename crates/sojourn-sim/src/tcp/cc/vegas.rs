//! TCP Vegas (Brakmo & Peterson 1995, Linux `tcp_vegas`): once per RTT compare the
//! expected and actual rates through `diff = cwnd·(rtt − base_rtt)/rtt` (packets queued
//! in the network) and keep it between α = 2 and β = 4 packets; leave slow start when
//! diff exceeds γ = 1. With fewer than three RTT samples in a round, behave like Reno.

use super::{newreno::NewReno, CaEvent, CaState, CcState, CongestionControl};

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
        if ev == CaEvent::TxStart {
            self.enable(st);
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
                    // Going too fast: leave slow start at the target window.
                    st.cwnd = st.cwnd.min(target + 1);
                    st.ssthresh = (st.cwnd - 1).max(2).min(st.ssthresh);
                } else if st.in_slow_start() {
                    st.slow_start(acked);
                } else if diff > BETA {
                    st.cwnd -= 1;
                    st.ssthresh = (st.cwnd - 1).max(2).min(st.ssthresh);
                } else if diff < ALPHA {
                    st.cwnd += 1;
                }
                st.cwnd = st.cwnd.clamp(2, st.cwnd_clamp);
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
