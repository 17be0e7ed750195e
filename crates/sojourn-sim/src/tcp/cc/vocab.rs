//! What every congestion control and the sender share: Linux's `tcp_congestion_ops`
//! interface as a trait and the connection state it reads and writes. A leaf: it imports
//! none of the algorithms, so they can import it without a circle through `cc`.

use sojourn_core::Time;

/// Linux `TCP_INFINITE_SSTHRESH`.
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Linux `tcp_ca_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CaState {
    Open,
    Cwr,
    Recovery,
    Loss,
}

/// The connection state congestion control reads and writes.
#[derive(Clone, Debug)]
pub struct CcState {
    pub now: Time,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub cwnd_cnt: u32,
    /// Largest cwnd reached (for the cwnd clamp).
    pub cwnd_clamp: u32,
    pub mss: u32,
    pub init_cwnd: u32,
    pub snd_una: u64,
    pub snd_nxt: u64,
    pub srtt_ns: u64,
    pub min_rtt_ns: u64,
    pub in_flight: u32,
    pub packets_out: u32,
    /// Packets delivered (ACKed or SACKed) so far.
    pub delivered: u64,
    /// Of those, packets delivered by ACKs carrying ECE (Linux `tp->delivered_ce`).
    pub delivered_ce: u64,
    pub ca_state: CaState,
    /// Linux `tp->is_cwnd_limited`: the sender used the whole cwnd at some transmission
    /// attempt of the current window (`tcp_cwnd_validate`); see [`CcState::cwnd_limited`].
    pub is_cwnd_limited: bool,
    /// Pacing rate (bit/s): Linux `sk_pacing_rate` (BBR sets its own).
    pub pacing_rate_bps: u64,
    /// Linux `tp->max_packets_out`: largest `packets_out` of the current window
    /// (`tcp_cwnd_validate`).
    pub max_packets_out: u32,
    /// Linux `sk_pacing_status != SK_PACING_NONE`: the socket is paced (internal pacing
    /// requested by the experiment or the algorithm). CUBIC's HyStart ack-train
    /// threshold is not halved for paced sockets.
    pub paced: bool,
    /// Linux `tp->lsndtime`: when data was last sent (new data or a retransmission). At a
    /// `CaEvent::TxStart` it is still the last send before the idle period.
    pub lsndtime: Time,
}

impl CcState {
    /// A connection's state before its first transmission (Linux `tcp_init_sock`):
    /// cwnd = the initial window, no ssthresh, no RTT sample yet.
    pub fn new(initial_window: u32, mss: u32, paced: bool) -> CcState {
        CcState {
            now: Time::ZERO,
            cwnd: initial_window,
            ssthresh: INFINITE_SSTHRESH,
            cwnd_cnt: 0,
            cwnd_clamp: u32::MAX,
            mss,
            init_cwnd: initial_window,
            snd_una: 1,
            snd_nxt: 1,
            srtt_ns: 0,
            min_rtt_ns: u64::MAX,
            in_flight: 0,
            packets_out: 0,
            delivered: 0,
            delivered_ce: 0,
            ca_state: CaState::Open,
            is_cwnd_limited: false,
            pacing_rate_bps: 0,
            max_packets_out: 0,
            paced,
            lsndtime: Time::ZERO,
        }
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Linux `tcp_is_cwnd_limited` (include/net/tcp.h), evaluated when the algorithm
    /// asks — after `pkts_acked`, so an ACK on which HyStart ends slow start already
    /// sees the congestion-avoidance rule: the flag `is_cwnd_limited`, or, in slow
    /// start, cwnd below twice the largest number of packets out in the window.
    pub fn cwnd_limited(&self) -> bool {
        self.is_cwnd_limited || (self.in_slow_start() && self.cwnd < 2 * self.max_packets_out)
    }

    /// Linux `tcp_slow_start`: cwnd grows by the packets ACKed, up to ssthresh; returns
    /// the ACKed packets left over for congestion avoidance.
    pub fn slow_start(&mut self, acked: u32) -> u32 {
        let cwnd = (self.cwnd + acked).min(self.ssthresh);
        let left = acked - (cwnd - self.cwnd).min(acked);
        self.cwnd = cwnd.min(self.cwnd_clamp);
        left
    }

    /// Linux `tcp_cong_avoid_ai`: one packet per `w` packets ACKed.
    pub fn cong_avoid_ai(&mut self, w: u32, acked: u32) {
        let w = w.max(1);
        if self.cwnd_cnt >= w {
            self.cwnd_cnt = 0;
            self.cwnd += 1;
        }
        self.cwnd_cnt += acked;
        if self.cwnd_cnt >= w {
            let delta = self.cwnd_cnt / w;
            self.cwnd_cnt -= delta * w;
            self.cwnd += delta;
        }
        self.cwnd = self.cwnd.min(self.cwnd_clamp);
    }
}

/// A delivery-rate sample (Linux `struct rate_sample`, tcp_rate.c).
#[derive(Clone, Copy, Debug, Default)]
pub struct RateSample {
    /// Packets delivered over the interval (negative = invalid).
    pub delivered: i64,
    /// Interval over which `delivered` was measured (ns); zero = invalid sample.
    pub interval_ns: u64,
    pub prior_delivered: u64,
    pub is_app_limited: bool,
    /// RTT of the most recently sent packet this ACK delivered (ns).
    pub rtt_ns: Option<u64>,
    /// Packets newly marked lost on this ACK.
    pub losses: u32,
    /// Packets newly ACKed or SACKed on this ACK.
    pub acked_sacked: u32,
    pub prior_in_flight: u32,
}

/// Events (Linux `tcp_ca_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaEvent {
    /// First transmission after the connection was idle (nothing in flight).
    TxStart,
    /// RTO: `tcp_enter_loss` reduced ssthresh (cwnd is still the pre-RTO window).
    Loss,
}

/// The per-algorithm operations.
pub trait CongestionControl {
    fn name(&self) -> &'static str;
    fn init(&mut self, _st: &mut CcState) {}
    /// Window after a loss or ECN mark (Linux `ssthresh`).
    fn ssthresh(&mut self, st: &CcState) -> u32;
    /// Window growth per ACK outside window reductions (Linux `cong_avoid`).
    fn cong_avoid(&mut self, st: &mut CcState, acked: u32);
    /// Every ACK that delivered packets, with the RTT sample if any (Linux `pkts_acked`).
    fn pkts_acked(&mut self, _st: &mut CcState, _acked: u32, _rtt_ns: Option<u64>) {}
    /// Congestion state changed (Linux `set_state`).
    fn set_state(&mut self, _st: &mut CcState, _new: CaState) {}
    fn cwnd_event(&mut self, _st: &mut CcState, _ev: CaEvent) {}
    /// Every ACK, with whether it carried ECE, after delivery counting and before the
    /// state machine (Linux `in_ack_event`).
    fn in_ack_event(&mut self, _st: &mut CcState, _ece: bool) {}
    /// Full control of cwnd and pacing (Linux `cong_control`); returns false if the
    /// algorithm uses the classic `cong_avoid` path instead.
    fn cong_control(&mut self, _st: &mut CcState, _rs: &RateSample) -> bool {
        false
    }
    /// Window after a spurious reduction was undone (Linux `undo_cwnd`, which every
    /// algorithm names: no default, so none silently keeps the reduced window).
    fn undo_cwnd(&mut self, st: &CcState) -> u32;
    /// True if the algorithm needs the sender to pace (BBR: `SK_PACING_NEEDED`).
    fn needs_pacing(&self) -> bool {
        false
    }
    fn observe(&self, _emit: &mut dyn FnMut(&str, f64)) {}
}
