//! Congestion control: the `tcp_congestion_ops` interface as a trait, with the four
//! algorithms the seed papers use, dispatched by `match` (no virtual call per ACK).
//!
//! Windows are in packets like Linux (`snd_cwnd`, `snd_ssthresh`, `snd_cwnd_cnt`). The
//! sender calls, per ACK: `pkts_acked` (RTT sample), then either `cong_control` (BBR:
//! full control of cwnd and pacing from a delivery-rate sample) or, outside a window
//! reduction, `cong_avoid`; `ssthresh` when a loss or ECN mark reduces the window;
//! `set_state` on Loss (RTO) and `cwnd_event` when transmission restarts after idle.

pub mod bbr;
pub mod cubic;
pub mod dctcp;
pub mod newreno;
pub mod vegas;

mod vocab;
pub use vocab::{CaEvent, CaState, CcState, CongestionControl, RateSample, INFINITE_SSTHRESH};

pub use sojourn_experiment::transport::CcKind;
use sojourn_experiment::transport::TcpConfig;

/// The algorithm `cfg.cc` names with its options, seeded (BBR draws its random phase
/// from `seed`).
pub fn build(cfg: &TcpConfig, seed: u64) -> AnyCc {
    match cfg.cc {
        CcKind::NewReno => AnyCc::NewReno(newreno::NewReno),
        CcKind::Cubic => AnyCc::Cubic(Box::new(cubic::Cubic::new())),
        CcKind::Bbr => AnyCc::Bbr(Box::new(bbr::Bbr::new(seed))),
        CcKind::Vegas => AnyCc::Vegas(Box::default()),
        CcKind::Dctcp => AnyCc::Dctcp(dctcp::Dctcp::new(false)),
        CcKind::Prague if cfg.prague_rtt_scaling => {
            AnyCc::Dctcp(dctcp::Dctcp::new(true).with_rtt_target(cfg.prague_rtt_target))
        }
        CcKind::Prague => AnyCc::Dctcp(dctcp::Dctcp::new(true)),
    }
}

macro_rules! any_cc {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        /// Every algorithm, dispatched by `match`.
        pub enum AnyCc { $($variant($ty)),* }
        impl CongestionControl for AnyCc {
            fn name(&self) -> &'static str { match self { $(AnyCc::$variant(c) => c.name()),* } }
            fn init(&mut self, st: &mut CcState) { match self { $(AnyCc::$variant(c) => c.init(st)),* } }
            #[inline]
            fn ssthresh(&mut self, st: &CcState) -> u32 { match self { $(AnyCc::$variant(c) => c.ssthresh(st)),* } }
            #[inline]
            fn cong_avoid(&mut self, st: &mut CcState, acked: u32) { match self { $(AnyCc::$variant(c) => c.cong_avoid(st, acked)),* } }
            #[inline]
            fn pkts_acked(&mut self, st: &mut CcState, acked: u32, rtt: Option<u64>) { match self { $(AnyCc::$variant(c) => c.pkts_acked(st, acked, rtt)),* } }
            fn set_state(&mut self, st: &mut CcState, new: CaState) { match self { $(AnyCc::$variant(c) => c.set_state(st, new)),* } }
            fn cwnd_event(&mut self, st: &mut CcState, ev: CaEvent) { match self { $(AnyCc::$variant(c) => c.cwnd_event(st, ev)),* } }
            #[inline]
            fn in_ack_event(&mut self, st: &mut CcState, ece: bool) { match self { $(AnyCc::$variant(c) => c.in_ack_event(st, ece)),* } }
            #[inline]
            fn cong_control(&mut self, st: &mut CcState, rs: &RateSample) -> bool { match self { $(AnyCc::$variant(c) => c.cong_control(st, rs)),* } }
            fn undo_cwnd(&mut self, st: &CcState) -> u32 { match self { $(AnyCc::$variant(c) => c.undo_cwnd(st)),* } }
            fn needs_pacing(&self) -> bool { match self { $(AnyCc::$variant(c) => c.needs_pacing()),* } }
            fn observe(&self, emit: &mut dyn FnMut(&str, f64)) { match self { $(AnyCc::$variant(c) => c.observe(emit)),* } }
        }
    };
}

any_cc! {
    NewReno(newreno::NewReno),
    Cubic(Box<cubic::Cubic>),
    Bbr(Box<bbr::Bbr>),
    Vegas(Box<vegas::Vegas>),
    Dctcp(dctcp::Dctcp),
}

#[cfg(test)]
pub(crate) fn test_state(cwnd: u32) -> CcState {
    CcState {
        cwnd,
        init_cwnd: 10,
        is_cwnd_limited: true,
        ..CcState::new(10, 1448, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cong_avoid_ai_is_linux_tcp_cong_avoid_ai() {
        // One packet per w = 10 ACKed: 9 ACKs leave cwnd 10 with 9 counted, the 10th adds 1.
        let mut st = test_state(10);
        st.cwnd_cnt = 0;
        st.cong_avoid_ai(10, 9);
        assert_eq!((st.cwnd, st.cwnd_cnt), (10, 9));
        st.cong_avoid_ai(10, 1);
        assert_eq!((st.cwnd, st.cwnd_cnt), (11, 0));
        // A stretch ACK of 25 packets at w = 10: +2, 5 left counted.
        let mut st = test_state(10);
        st.cwnd_cnt = 0;
        st.cong_avoid_ai(10, 25);
        assert_eq!((st.cwnd, st.cwnd_cnt), (12, 5));
        // Credits gathered at a higher w (15 ≥ w = 10) are applied gently: +1 and the
        // count restarts from 0 before this ACK is counted.
        let mut st = test_state(10);
        st.cwnd_cnt = 15;
        st.cong_avoid_ai(10, 1);
        assert_eq!((st.cwnd, st.cwnd_cnt), (11, 1));
        // Never above the clamp.
        let mut st = test_state(10);
        st.cwnd_clamp = 10;
        st.cwnd_cnt = 0;
        st.cong_avoid_ai(10, 25);
        assert_eq!(st.cwnd, 10);
    }

    #[test]
    fn cwnd_limited_is_linux_tcp_is_cwnd_limited() {
        // Not flagged cwnd-limited: in slow start only while cwnd < 2 × max_packets_out.
        let mut st = test_state(10);
        st.is_cwnd_limited = false;
        st.ssthresh = INFINITE_SSTHRESH;
        st.max_packets_out = 5;
        assert!(!st.cwnd_limited(), "10 is not below 2 × 5");
        st.max_packets_out = 6;
        assert!(st.cwnd_limited(), "10 < 2 × 6");
        // In congestion avoidance the flag alone decides.
        st.ssthresh = 5;
        assert!(!st.cwnd_limited());
        st.is_cwnd_limited = true;
        assert!(st.cwnd_limited());
    }
}
