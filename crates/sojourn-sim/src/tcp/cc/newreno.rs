//! NewReno (RFC 5681 window growth, Linux `tcp_reno_*`): slow start by packets ACKed,
//! congestion avoidance of one packet per window, ssthresh = max(cwnd/2, 2). The
//! recovery side (RFC 6582 partial ACKs, or SACK-based RFC 6675) lives in the sender.

use super::vocab::{CcState, CongestionControl};

#[derive(Clone, Copy, Debug, Default)]
pub struct NewReno;

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }
    fn ssthresh(&mut self, st: &CcState) -> u32 {
        (st.cwnd / 2).max(2)
    }
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
    fn undo_cwnd(&mut self, st: &CcState) -> u32 {
        st.cwnd.max(st.ssthresh.saturating_mul(2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::cc::test_state;

    #[test]
    fn slow_start_doubles_and_ca_adds_one_per_window() {
        let mut st = test_state(10);
        let mut r = NewReno;
        // One window of ACKs in slow start doubles cwnd.
        for _ in 0..10 {
            r.cong_avoid(&mut st, 1);
        }
        assert_eq!(st.cwnd, 20);
        st.ssthresh = 20;
        // In CA, one window (20 ACKs) adds exactly one packet.
        for _ in 0..20 {
            r.cong_avoid(&mut st, 1);
        }
        assert_eq!(st.cwnd, 21);
        assert_eq!(r.ssthresh(&st), 10);
    }

    /// Linux tcp_reno_cong_avoid: the ACKs left over when slow start reaches ssthresh
    /// count towards the first congestion-avoidance increment (tcp_slow_start returns
    /// them, tcp_cong_avoid_ai adds them to snd_cwnd_cnt).
    #[test]
    fn acks_left_over_at_ssthresh_count_in_congestion_avoidance() {
        let mut st = test_state(19);
        st.ssthresh = 20;
        NewReno.cong_avoid(&mut st, 3);
        assert_eq!((st.cwnd, st.cwnd_cnt), (20, 2));
    }

    /// Undo after a spurious halving restores the window before it: 50 -> ssthresh 25 ->
    /// undo 50 (the window is never lowered by an undo).
    #[test]
    fn undo_restores_the_window_before_the_halving() {
        let mut st = test_state(50);
        let mut r = NewReno;
        st.ssthresh = r.ssthresh(&st);
        st.cwnd = st.ssthresh;
        assert_eq!(r.undo_cwnd(&st), 50);
        st.cwnd = 60;
        assert_eq!(r.undo_cwnd(&st), 60);
    }

    /// The names experiment files use (`cc = "reno"` is Linux's name for it).
    #[test]
    fn names() {
        use crate::tcp::cc::CcKind;
        assert_eq!(NewReno.name(), "newreno");
        assert_eq!(CcKind::parse("reno"), Some(CcKind::NewReno));
        for n in ["newreno", "cubic", "bbr", "vegas"] {
            let k = CcKind::parse(n).unwrap();
            assert_eq!(k.name(), n);
            let cfg = crate::tcp::TcpConfig {
                cc: k,
                ..Default::default()
            };
            assert_eq!(crate::tcp::cc::build(&cfg, 1).name(), n);
        }
        assert_eq!(CcKind::parse("bic"), None);
    }
}
