//! The TCP sender: connection set-up, segmentation, the retransmission queue, loss
//! recovery, timers and pacing. One direction of data (sender → receiver); the receiver
//! sends ACKs only.
//!
//! Behaviour follows Linux where the RFCs leave room (docs/transport.md lists every
//! simplification):
//! - windows in packets, `pipe = packets_out − sacked_out − lost_out + retrans_out`
//!   (RFC 6675 §4, `tcp_packets_in_flight`);
//! - loss marking by RFC 6675 `IsLost` (DupThresh = 3 SACKed segments above a hole), or
//!   without SACK by three duplicate ACKs and RFC 6582 partial ACKs;
//! - window reduction by Proportional Rate Reduction (RFC 6937, `tcp_cwnd_reduction`) in
//!   Recovery and CWR, cwnd = ssthresh on exit;
//! - RTO per RFC 6298 with Linux's minimum (`rtt.rs`), loss state with cwnd 1, ssthresh
//!   reduced once per episode;
//! - tail loss probe (RFC 8985 §7, `tcp_schedule_loss_probe`): PTO = 2·SRTT (+200 ms with
//!   one packet out, +2 ms otherwise), capped by the RTO; probe with new data or the last
//!   segment; a repaired loss triggers one cwnd reduction;
//! - delivery-rate sampling (`tcp_rate.c`) for BBR;
//! - ECN (RFC 3168): ECT(0) on new data, ECE → one CWR reduction per window, CWR flag
//!   on the next new data segment; with Accurate ECN (RFC 9768, [`super::accecn`]) the CE
//!   packets each ACK reports count exactly into `delivered_ce` and no CWR flag is sent;
//! - pacing at the congestion control's rate when it needs pacing (BBR) or `pacing = true`,
//!   otherwise Linux's `sk_pacing_rate` (cwnd·mss/srtt × 200% in slow start, × 120%
//!   after) is only stamped on packets for sch_fq and sizes TSQ;
//! - TCP Small Queues (Linux 6.18 `tcp_small_queue_check`, see [`tsq_limit_bytes`]): at
//!   most ~1 ms of the pacing rate (≥ 2 packets) of this socket below TCP (host qdisc +
//!   device); the socket is released when one of its packets leaves the host or is
//!   dropped there.

use super::accecn::{self, AccEcnSender};
use super::cc::{
    dctcp, AnyCc, CaEvent, CaState, CcKind, CcState, CongestionControl, RateSample,
    INFINITE_SSTHRESH,
};
use super::rtt::RttEstimator;
use super::scoreboard::{Scoreboard, Seg, EVER_RETRANS, FIN, RETRANS, SACKED};
use super::{IntervalDist, TcpConfig};
use crate::endpoint::{packet_tag, Endpoint, Io, Note};
use sojourn_core::accecn::{feedback_from_synack, Feedback};
use sojourn_core::packet::{tcp_flags, Ecn, FlowKey, TransportHeader};
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, Packet, Time};

/// Bytes of a bulk source: effectively infinite.
const BULK_BYTES: u64 = 1 << 60;
/// Linux `tcp_syn_retries`.
const SYN_RETRIES: u32 = 6;

/// What the sending application writes.
pub enum Source {
    /// A transfer of this many bytes, written at connect; FIN after the last byte.
    Sized(u64),
    /// An infinite transfer.
    Bulk,
    /// A message of `size` bytes every interval drawn from `interval`, from the connect
    /// time until `stop` (thin streams).
    Messages {
        size: u32,
        interval: IntervalDist,
        next_at: Time,
        stop: Time,
        rng: Rng,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    Idle,
    SynSent,
    Established,
    Closed,
}

/// Linux `tcp_update_pacing_rate` (6.18) in bit/s; 0 = unlimited (no SRTT yet: the kernel
/// skips the division and the rate is only capped by `sk_max_pacing_rate`, ~0 = none).
///
/// `rate = mss · 80 000 · ratio · max(cwnd, packets_out) / srtt_us` bytes/s, with `srtt_us`
/// the smoothed RTT in µs << 3 and ratio `tcp_pacing_ss_ratio` = 200 (%) while
/// cwnd < ssthresh/2 (slow start not about to end) else `tcp_pacing_ca_ratio` = 120 (%).
pub fn linux_pacing_rate_bps(
    mss: u32,
    cwnd: u32,
    packets_out: u32,
    ssthresh: u32,
    srtt_ns: u64,
) -> u64 {
    let srtt_us8 = srtt_ns * 8 / 1000;
    if srtt_us8 == 0 {
        return 0;
    }
    let ratio: u64 = if cwnd < ssthresh / 2 { 200 } else { 120 };
    let rate = mss as u64 * ((1_000_000 / 100) << 3) * ratio * cwnd.max(packets_out) as u64;
    rate / srtt_us8 * 8
}

/// The TSQ limit of Linux `tcp_small_queue_check` (6.18), in bytes of truesize:
/// `max(2 · truesize of the skb to send, sk_pacing_rate >> sk_pacing_shift)` with
/// `sk_pacing_shift` = 10 (~1 ms of the pacing rate), capped by `tcp_limit_output_bytes`
/// only while the socket is not paced (`sk_pacing_status == SK_PACING_NONE`), then
/// doubled `factor` times (1 for retransmissions). The caller throttles when the bytes
/// below TCP exceed it. `pacing_rate_bps` 0 means unlimited.
pub fn tsq_limit_bytes(
    truesize: u32,
    pacing_rate_bps: u64,
    paced: bool,
    limit_output_bytes: u64,
    factor: u32,
) -> u64 {
    let rate_bytes = if pacing_rate_bps == 0 {
        u64::MAX
    } else {
        pacing_rate_bps / 8
    };
    let mut limit = (2 * truesize as u64).max(rate_bytes >> 10);
    if !paced {
        limit = limit.min(limit_output_bytes);
    }
    limit.saturating_mul(1 << factor)
}

/// `skb->truesize` of a TCP data buffer beyond its payload (the `sk_buff`, its shared
/// info and the header room), measured on Linux 6.18 with `ss -m`: two 45-segment
/// buffers (2 × 65160 B of payload) in the qdisc showed `t131984`.
pub const SKB_HEAD_TRUESIZE: u32 = 832;

/// Linux `tcp_tso_autosize` (6.18) with `tcp_tso_rtt_log` = 9 and `sk_pacing_shift` = 10:
/// segments per GSO buffer — about 1 ms at the pacing rate, plus `gso_max_size` halved for
/// every 512 µs of minimum RTT (near peers get big buffers), at most `gso_max_size`, at
/// least `min_tso_segs`. `pacing_rate_bps` 0 = not yet known (`~0UL`); `min_rtt_us`
/// `u64::MAX` = no sample yet.
pub fn tso_autosize_segs(
    pacing_rate_bps: u64,
    min_rtt_us: u64,
    gso_max_bytes: u32,
    mss: u32,
    min_tso_segs: u32,
) -> u32 {
    let mut bytes = if pacing_rate_bps == 0 {
        u64::MAX
    } else {
        (pacing_rate_bps / 8) >> 10
    };
    let r = min_rtt_us >> 9;
    if r < 32 {
        bytes = bytes.saturating_add((gso_max_bytes >> r) as u64);
    }
    bytes = bytes.min(gso_max_bytes as u64);
    ((bytes / mss.max(1) as u64) as u32).max(min_tso_segs)
}

/// Segments of the next GSO buffer: `min(quota, ⌈sendable / mss⌉, at least 1)` as
/// `tcp_write_xmit` cuts it (the count as a `u32`), with the division only when the bytes
/// that may be sent are fewer than `quota` full segments (the common full buffer needs
/// none). `quota` ≥ 1.
#[inline]
fn gso_segs(quota: u32, sendable_bytes: u64, mss: u64) -> u32 {
    if sendable_bytes < 1 << 32 && sendable_bytes > (quota as u64 - 1) * mss {
        // ⌈sendable / mss⌉ ≥ quota, and it fits a u32.
        quota
    } else {
        quota.min(sendable_bytes.div_ceil(mss).max(1) as u32)
    }
}

/// The consecutive segments one transmitted buffer carries.
#[derive(Clone, Copy)]
struct Span {
    /// First sequence number.
    start: u64,
    /// Sequence number after the last payload byte.
    payload_end: u64,
    /// The last segment carries the FIN.
    fin: bool,
    /// Segments (MSS-sized but the last).
    n: u32,
}

pub struct TcpSender {
    pub flow: u32,
    pub key: FlowKey,
    pub hash: u32,
    /// Receiver's endpoint id.
    pub peer: u32,
    /// Own socket number on its host (`Sim::socket_number`; packets carry `sk = me + 1`).
    pub me: u32,
    cfg: TcpConfig,
    pub state: ConnState,
    pub snd_una: u64,
    pub snd_nxt: u64,
    /// Sequence after the last byte the application wrote.
    write_end: u64,
    /// The application closed: FIN follows `write_end`.
    fin_wanted: bool,
    fin_sent: bool,
    /// Recovery point (Linux `high_seq`).
    high_seq: u64,
    pub sb: Scoreboard,
    pub rtt: RttEstimator,
    pub cc: AnyCc,
    pub cs: CcState,
    prr_delivered: u32,
    prr_out: u32,
    prior_cwnd: u32,
    peer_rwnd: u64,
    rto_at: Option<Time>,
    tlp_at: Option<Time>,
    /// Earliest time the next paced data packet may leave.
    next_tx_at: Time,
    pacing: bool,
    tlp_high_seq: Option<u64>,
    tlp_retrans: bool,
    // Delivery-rate estimation (tcp_rate.c).
    delivered_at: Time,
    first_tx_at: Time,
    app_limited_until: u64,
    // ECN
    ecn_ok: bool,
    /// Accurate ECN feedback, once negotiated (boxed: off the per-flow state otherwise).
    pub accecn: Option<Box<AccEcnSender>>,
    send_cwr: bool,
    ts_recent: Time,
    /// Duplicate ACKs in a row (used without SACK).
    dupacks: u32,
    source: Source,
    syn_sent_at: Time,
    syn_retrans: u32,
    retx_hint: u64,
    cwnd_usage_seq: u64,
    /// The last transmission attempt stopped at the pacing gate.
    pace_blocked: bool,
    /// Bytes (truesize) of this socket queued below TCP (qdisc + device): Linux
    /// `sk_wmem_alloc` minus its bias of 1.
    pub bytes_below: u64,
    /// TSQ stopped the last transmission attempt (Linux `TSQ_THROTTLED`).
    tsq_throttled: bool,
    /// A host drop released a throttled socket: transmit from the timer, not from within
    /// the engine's enqueue (Linux runs the TSQ handler from a BH work item).
    tsq_wake: Option<Time>,
    /// Transmissions stopped by TSQ (Linux has no counter; `TCPSmallQueueFailure`-like).
    pub tsq_throttles: u64,
    /// Last data transmission (Linux `tcp_wstamp_ns` of an unpaced socket).
    last_tx_at: Time,
    /// First sequence number of the newest buffer of new data: the retransmission queue
    /// holds a single buffer once `snd_una` reaches it.
    last_skb_start: u64,
    /// Buffers deferred by `tcp_tso_should_defer`.
    pub tso_defers: u64,
    tso_deferred_cwnd_limited: bool,
    /// `tcp_xmit_size_goal` before growing to the quota: the largest multiple of the MSS in
    /// `gso_max_size` (at least one MSS). Constant per connection, computed once.
    size_goal_bytes: u64,
    /// `gso_max_size / mss` (the MSS at least 1): what `tcp_tso_autosize` gives before
    /// the minimum when the minimum RTT is under 512 µs (computed once).
    gso_max_segs: u32,
    // Counters.
    pub retransmits: u64,
    pub rtos: u64,
    pub tlps: u64,
    pub spurious_dsacks: u64,
    pub data_pkts_sent: u64,
}

impl TcpSender {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        flow: u32,
        key: FlowKey,
        hash: u32,
        peer: u32,
        me: u32,
        cfg: &TcpConfig,
        source: Source,
        seed: u64,
    ) -> TcpSender {
        let cc = super::cc::build(cfg, seed);
        let pacing = cfg.pacing || cc.needs_pacing();
        TcpSender {
            flow,
            key,
            hash,
            peer,
            me,
            cfg: cfg.clone(),
            state: ConnState::Idle,
            snd_una: 0,
            snd_nxt: 0,
            write_end: 1,
            fin_wanted: false,
            fin_sent: false,
            high_seq: 0,
            sb: Scoreboard::new(cfg.mss),
            rtt: RttEstimator::new(cfg.min_rto, cfg.initial_rto),
            cc,
            cs: CcState::new(cfg.initial_window, cfg.mss, pacing),
            prr_delivered: 0,
            prr_out: 0,
            prior_cwnd: 0,
            peer_rwnd: cfg.rwnd_bytes,
            rto_at: None,
            tlp_at: None,
            next_tx_at: Time::ZERO,
            pacing,
            tlp_high_seq: None,
            tlp_retrans: false,
            delivered_at: Time::ZERO,
            first_tx_at: Time::ZERO,
            app_limited_until: 0,
            ecn_ok: false,
            accecn: None,
            send_cwr: false,
            ts_recent: Time::ZERO,
            dupacks: 0,
            source,
            syn_sent_at: Time::ZERO,
            syn_retrans: 0,
            retx_hint: 0,
            cwnd_usage_seq: 0,
            pace_blocked: false,
            bytes_below: 0,
            tsq_throttled: false,
            tsq_wake: None,
            tsq_throttles: 0,
            last_tx_at: Time::ZERO,
            last_skb_start: 0,
            tso_defers: 0,
            tso_deferred_cwnd_limited: false,
            size_goal_bytes: (cfg.gso_max_bytes as u64 / cfg.mss as u64).max(1) * cfg.mss as u64,
            gso_max_segs: (cfg.gso_max_bytes as u64 / cfg.mss.max(1) as u64) as u32,
            retransmits: 0,
            rtos: 0,
            tlps: 0,
            spurious_dsacks: 0,
            data_pkts_sent: 0,
        }
    }

    /// The application stops writing: the stream ends at sequence `at_least` or at what
    /// was already sent, whichever is later, then a FIN follows (an application's load
    /// connection at the end of its phase: apps.rs). The FIN leaves with the next
    /// transmission the ACKs of the data in flight trigger.
    pub(crate) fn stop_writing(&mut self, at_least: u64) {
        if self.fin_wanted {
            return;
        }
        if self.state != ConnState::Established {
            // Not connected yet: `established` sets the stream's end from the source.
            self.source = Source::Sized(at_least.saturating_sub(1));
            return;
        }
        self.write_end = self.write_end.min(self.snd_nxt.max(at_least));
        self.fin_wanted = true;
    }

    pub fn ca_state(&self) -> CaState {
        self.cs.ca_state
    }

    /// Bytes sent but not yet cumulatively acknowledged.
    pub fn inflight_bytes(&self) -> u64 {
        self.sb.in_flight() as u64 * self.cfg.mss as u64
    }

    fn base_packet(&self, now: Time) -> Packet {
        Packet {
            tag: packet_tag(self.flow, self.peer),
            key: self.key,
            hash: self.hash,
            sk: self.me + 1,
            dscp: self.cfg.dscp,
            pacing_rate_bps: self.cs.pacing_rate_bps,
            // A sender that paces itself stamps its departure time (EDT, Linux >= 4.20), so
            // sch_fq honours the sender's schedule instead of pacing a second time.
            departure_at: if self.pacing && self.cs.pacing_rate_bps > 0 {
                now.max(Time(1))
            } else {
                Time::ZERO
            },
            hdr: TransportHeader {
                ack: 1,
                window: 65_535,
                ts_val: now,
                ts_ecr: self.ts_recent,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn send_syn(&mut self, io: &mut Io) {
        let mut p = self.base_packet(io.now);
        p.len_bytes = self.cfg.syn_frame_bytes();
        p.truesize_bytes = sojourn_core::packet::truesize_for(p.len_bytes);
        p.hdr.seq = 0;
        p.hdr.ack = 0;
        p.hdr.flags = tcp_flags::SYN;
        if self.cfg.accecn {
            // RFC 9768 §3.1.1: an AccECN SYN carries AE, CWR and ECE.
            accecn::set_syn(&mut p.hdr);
        } else if self.cfg.ecn_enabled() {
            // RFC 3168 §6.1.1: an ECN-setup SYN carries ECE and CWR.
            p.hdr.flags |= tcp_flags::ECE | tcp_flags::CWR;
        }
        self.syn_sent_at = io.now;
        self.snd_nxt = 1;
        io.send(p);
    }

    /// The connection is open: the application writes and data may flow.
    fn established(&mut self, io: &mut Io) {
        let now = io.now;
        self.state = ConnState::Established;
        self.snd_una = 1;
        self.snd_nxt = 1;
        self.retx_hint = 1;
        self.cwnd_usage_seq = 1;
        // Linux tcp_init_transfer: cwnd 1 if the SYN had to be retransmitted twice or more.
        self.cs.cwnd = if self.syn_retrans > 1 {
            1
        } else {
            self.cfg.initial_window
        };
        self.cs.now = now;
        self.cs.snd_una = 1;
        self.cs.snd_nxt = 1;
        self.cs.srtt_ns = self.rtt.srtt_ns;
        self.cs.min_rtt_ns = self.rtt.min_rtt_ns;
        self.cc.init(&mut self.cs);
        self.delivered_at = now;
        self.first_tx_at = now;
        match &mut self.source {
            Source::Sized(n) => {
                self.write_end = 1 + *n;
                self.fin_wanted = true;
            }
            Source::Bulk => self.write_end = 1 + BULK_BYTES,
            Source::Messages { next_at, .. } => {
                *next_at = (*next_at).max(now);
            }
        }
        self.write_messages(now);
        let rec = io.flows.get_mut(self.flow);
        if rec.first_byte.is_none() && self.write_end > 1 {
            rec.first_byte = Some(now);
        }
        self.update_pacing_rate();
        self.try_send(io);
    }

    /// Thin streams: write every message due by `now`.
    fn write_messages(&mut self, now: Time) -> bool {
        let mut wrote = false;
        if let Source::Messages {
            size,
            interval,
            next_at,
            stop,
            rng,
        } = &mut self.source
        {
            while *next_at <= now && *next_at < *stop {
                self.write_end += *size as u64;
                *next_at += interval.draw(rng);
                wrote = true;
            }
        }
        wrote
    }

    fn next_message_at(&self) -> Option<Time> {
        match &self.source {
            Source::Messages { next_at, stop, .. } if *next_at < *stop => Some(*next_at),
            _ => None,
        }
    }

    // ----- transmission -----

    fn rate_on_send(&mut self, seg: &mut Seg, now: Time) {
        // tcp_rate_skb_sent: with nothing in flight, restart the rate intervals.
        if self.sb.packets_out() == 0 {
            self.first_tx_at = now;
            self.delivered_at = now;
        }
        seg.first_tx_at = self.first_tx_at;
        seg.delivered_at = self.delivered_at;
        seg.delivered = self.cs.delivered;
        seg.app_limited = self.app_limited_until != 0;
        seg.sent_at = now;
    }

    /// Emits one buffer carrying the `n` consecutive segments of `span` (already on the
    /// scoreboard) — a GSO buffer when there are several.
    fn emit_data(&mut self, span: Span, retrans: bool, io: &mut Io) {
        let Span {
            start,
            payload_end,
            fin,
            n,
        } = span;
        // Payload only: a FIN occupies sequence space but no byte on the wire.
        let payload = (payload_end - start) as u32;
        let mut p = self.base_packet(io.now);
        p.len_bytes = payload + n * self.cfg.header_bytes();
        p.truesize_bytes = self.data_truesize(payload);
        if n > 1 {
            p.gso_segs = n as u16;
            p.gso_size = self.cfg.mss as u16;
        }
        p.hdr.seq = start;
        p.hdr.payload_bytes = payload;
        if matches!(self.source, Source::Sized(_)) {
            // SRPT oracle: payload still unsent after this packet.
            p.remaining_bytes = self.write_end.saturating_sub(payload_end);
        }
        p.hdr.flags = tcp_flags::ACK;
        if fin {
            p.hdr.flags |= tcp_flags::FIN;
        }
        if self.ecn_ok && !retrans && payload > 0 {
            // Prague marks its packets with the L4S identifier (RFC 9331 §4.1).
            p.ecn = if self.cfg.cc == CcKind::Prague {
                Ecn::Ect1
            } else {
                Ecn::Ect0
            };
            if self.send_cwr {
                p.hdr.flags |= tcp_flags::CWR;
                self.send_cwr = false;
            }
        }
        if payload > 0 {
            // The last segment's end (a FIN takes one) reaches what the application wrote.
            p.hdr.flags |= tcp_flags::PSH * (payload_end + fin as u64 >= self.write_end) as u8;
        }
        if self.pacing && self.cs.pacing_rate_bps > 0 {
            // Linux EDT: the next departure is one payload serialisation at the pacing
            // rate after this one (or after now if the flow was idle).
            let gap = sojourn_core::time::tx_time(payload.max(1) as u64, self.cs.pacing_rate_bps);
            self.next_tx_at = self.next_tx_at.max(io.now) + gap;
        }
        self.bytes_below += p.truesize_bytes as u64;
        self.data_pkts_sent += n as u64;
        self.last_tx_at = io.now;
        self.cs.lsndtime = io.now;
        if !retrans {
            self.last_skb_start = start;
        }
        io.send(p);
    }

    /// `skb->truesize` of a data buffer: TCP keeps the payload in page fragments behind a
    /// small head, payload + [`SKB_HEAD_TRUESIZE`], whatever the buffer's segment count
    /// (`ss -m` on Linux 6.18: two 45-segment buffers in the qdisc show `t131984`; with
    /// `gso_max_segs 1`, ten one-segment buffers below TCP show `t22800`, 2280 B each —
    /// not the 2880 B of a linear 1514-B buffer, which only the receive path allocates).
    fn data_truesize(&self, payload: u32) -> u32 {
        payload + SKB_HEAD_TRUESIZE
    }

    /// The length of the next new segment (at most one MSS, within the receive window)
    /// and whether it carries the FIN; None when there is nothing to send.
    fn next_new_segment(&self) -> Option<(u32, bool)> {
        let avail = self.write_end.saturating_sub(self.snd_nxt);
        let mut len = avail.min(self.cfg.mss as u64) as u32;
        // Receive window (RFC 793/9293): never beyond snd_una + rwnd.
        let wnd_end = self.snd_una + self.peer_rwnd;
        if len > 0 && self.snd_nxt + len as u64 > wnd_end {
            if self.snd_nxt >= wnd_end {
                return None;
            }
            len = (wnd_end - self.snd_nxt) as u32;
        }
        let fin = self.fin_wanted && !self.fin_sent && self.snd_nxt + len as u64 == self.write_end;
        if len == 0 && !fin {
            return None;
        }
        Some((len, fin))
    }

    /// The extent of a buffer of new data starting at `start` whose first segment is
    /// `(len, fin)` ([`Self::next_new_segment`]): `(segments, payload end, FIN)`. Every
    /// segment but the last is one MSS; the buffer ends at `max_segs` segments, at a short
    /// segment, at the FIN, or where the receive window or the written data end — what
    /// taking [`Self::next_new_segment`] one segment at a time gives, in O(1).
    #[inline]
    fn buffer_extent(&self, start: u64, len: u32, fin: bool, max_segs: u32) -> (u32, u64, bool) {
        let mss = self.cfg.mss as u64;
        let first_end = start + len as u64;
        if fin || (len as u64) < mss || max_segs <= 1 {
            return (1, first_end, fin);
        }
        // After a full first segment, the next ones take min(MSS, what is written, what
        // the window allows) each: a full segment is never the FIN's unless it ends at
        // `write_end`, and nothing follows once either limit is reached.
        let wnd_end = self.snd_una + self.peer_rwnd;
        let usable = self
            .write_end
            .saturating_sub(first_end)
            .min(wnd_end.saturating_sub(first_end));
        let more_max = (max_segs - 1) as u64;
        let more = if usable >= more_max * mss {
            more_max
        } else {
            usable.div_ceil(mss)
        };
        let end = first_end + usable.min(more * mss);
        let fin = more > 0 && self.fin_wanted && !self.fin_sent && end == self.write_end;
        (1 + more as u32, end, fin)
    }

    /// Sends one buffer of up to `max_segs` new segments (one packet, a GSO buffer if
    /// more than one segment), each put on the scoreboard with the buffer's delivery-rate
    /// snapshot (`tcp_rate_skb_sent` runs once per skb in Linux too: every segment of a
    /// buffer shares it). False when there was nothing to send.
    fn send_new_data(&mut self, io: &mut Io, max_segs: u32) -> bool {
        let now = io.now;
        let Some((len, fin)) = self.next_new_segment() else {
            return false;
        };
        let was_empty = self.sb.packets_out() == 0;
        if was_empty {
            // First transmission after idle (Linux CA_EVENT_TX_START).
            self.cs.now = now;
            self.cc.cwnd_event(&mut self.cs, CaEvent::TxStart);
        }
        let mut seg = Seg {
            start: self.snd_nxt,
            len,
            pcount: 1,
            flags: 0,
            sent_at: now,
            delivered: 0,
            delivered_at: now,
            first_tx_at: now,
            app_limited: false,
        };
        self.rate_on_send(&mut seg, now);
        let start = self.snd_nxt;
        let (n, end, fin) = self.buffer_extent(start, len, fin, max_segs.max(1));
        if fin {
            self.fin_sent = true;
        }
        self.snd_nxt = end + fin as u64;
        seg.len = (end - start) as u32;
        seg.pcount = n;
        seg.flags = if fin { FIN } else { 0 };
        self.sb.push(seg);
        let span = Span {
            start,
            payload_end: end,
            fin,
            n,
        };
        self.emit_data(span, false, io);
        if was_empty || self.rto_at.is_none() {
            self.rto_at = Some(self.rtt.rto_deadline(now));
        }
        true
    }

    fn send_new_segment(&mut self, io: &mut Io, ignore_cwnd_reason_tlp: bool) -> bool {
        let _ = ignore_cwnd_reason_tlp;
        self.send_new_data(io, 1)
    }

    fn retransmit(&mut self, i: usize, io: &mut Io) {
        let now = io.now;
        let mut seg = self.sb.segs[i];
        self.rate_on_send(&mut seg, now);
        if !seg.is(RETRANS) {
            seg.flags |= RETRANS;
            self.sb.retrans_out += 1;
        }
        seg.flags |= EVER_RETRANS;
        self.sb.segs[i] = seg;
        self.retransmits += 1;
        io.flows.get_mut(self.flow).retransmits += 1;
        let span = Span {
            start: seg.start,
            payload_end: seg.start + seg.len as u64,
            fin: seg.is(FIN),
            n: 1,
        };
        self.emit_data(span, true, io);
    }

    /// Linux `tcp_write_xmit` + `tcp_xmit_retransmit_queue`: retransmit lost segments
    /// first, then new data, while the window, the receive window and pacing allow.
    fn try_send(&mut self, io: &mut Io) {
        if self.state != ConnState::Established {
            return;
        }
        let now = io.now;
        let mut cwnd_limited = false;
        // New data packets sent (tcp_write_xmit's sent_pkts; retransmissions come from
        // tcp_xmit_retransmit_queue, which does not validate the cwnd).
        let mut sent = 0u32;
        self.pace_blocked = false;
        // tcp_tso_segs, once per tcp_write_xmit: computed at its first use (most attempts
        // stop at the cwnd before); nothing in this loop changes its inputs before then.
        let mut max_segs_once: Option<u32> = None;
        loop {
            if self.pacing && self.next_tx_at > now {
                self.pace_blocked = true;
                break;
            }
            if self.sb.in_flight() >= self.cs.cwnd {
                cwnd_limited = true;
                break;
            }
            // Nothing marked lost: nothing to retransmit, skip the search (Linux
            // tcp_xmit_retransmit_queue returns early on !lost_out too). Speed only
            // (issue 19): the search finds nothing then.
            let lost = if self.sb.lost_out == 0 {
                None
            } else {
                self.sb.next_lost_from(self.retx_hint)
            };
            if let Some(i) = lost {
                // tcp_xmit_retransmit_queue: TSQ with the limit doubled for retransmits.
                if self.tsq_blocks(self.sb.segs[i].len, 1) {
                    break;
                }
                self.retx_hint = self.sb.segs[i].start;
                self.retransmit(i, io);
                if matches!(self.cs.ca_state, CaState::Recovery | CaState::Cwr) {
                    self.prr_out += 1;
                }
                continue;
            }
            self.retx_hint = self.snd_nxt;
            let avail = self.write_end.saturating_sub(self.snd_nxt);
            let has_data = avail > 0 || (self.fin_wanted && !self.fin_sent);
            let mss = self.cfg.mss as u64;
            let mut segs = 1u32;
            if self.cfg.gso && has_data {
                let max_segs = *max_segs_once.get_or_insert_with(|| self.tso_segs());
                // tcp_write_xmit: the buffer is cut to the cwnd quota (tcp_cwnd_test keeps
                // at least two buffers in flight) and to the autosized length, and may be
                // deferred hoping for a bigger quota (tcp_tso_should_defer).
                let in_flight = self.sb.in_flight();
                let quota = (self.cs.cwnd >> 1)
                    .max(1)
                    .min(self.cs.cwnd - in_flight)
                    .min(max_segs);
                // tcp_xmit_size_goal: write-queue buffers of gso_max_size, grown to the
                // quota from the next ones (tcp_grow_skb).
                let skb_len = avail.min(self.size_goal_bytes.max(quota as u64 * mss));
                // More than one segment (`skb_len.div_ceil(mss) > 1`, without the division).
                if skb_len > mss && self.tso_should_defer(now, skb_len, avail <= skb_len, max_segs)
                {
                    self.tso_defers += 1;
                    cwnd_limited |= self.tso_deferred_cwnd_limited;
                    break;
                }
                let wnd_left = (self.snd_una + self.peer_rwnd).saturating_sub(self.snd_nxt);
                segs = gso_segs(quota, avail.min(wnd_left), mss);
            }
            // tcp_write_xmit: TSQ after the cwnd test, for the buffer about to be sent.
            let payload = avail.min(segs as u64 * mss) as u32;
            if has_data && self.tsq_blocks(payload, 0) {
                break;
            }
            if !self.send_new_data(io, segs) {
                // Application-limited (tcp_rate_check_app_limited).
                if self.write_end <= self.snd_nxt {
                    self.app_limited_until =
                        (self.cs.delivered + self.sb.in_flight() as u64).max(1);
                }
                break;
            }
            sent += segs;
            if matches!(self.cs.ca_state, CaState::Recovery | CaState::Cwr) {
                self.prr_out += segs;
            }
        }
        // tcp_write_xmit: whatever stopped the loop (TSQ, pacing), a full window counts
        // as cwnd-limited.
        cwnd_limited |= self.sb.in_flight() >= self.cs.cwnd;
        if sent > 0 || cwnd_limited {
            self.cwnd_validate(cwnd_limited);
        }
        self.schedule_loss_probe(now);
    }

    /// Linux `tcp_cwnd_validate` (6.18; the `cwnd_usage_seq` rule since 5.19): a
    /// cwnd-limited attempt is remembered for the rest of the window (until `snd_una`
    /// passes `cwnd_usage_seq`); otherwise track the window's largest `packets_out`,
    /// which must not clear a cwnd-limited mark of the same window. Called only when
    /// something was sent or the attempt was cwnd-limited, as `tcp_write_xmit` does.
    fn cwnd_validate(&mut self, cwnd_limited: bool) {
        let pkts = self.sb.packets_out();
        if self.snd_una >= self.cwnd_usage_seq
            || cwnd_limited
            || (!self.cs.is_cwnd_limited && pkts > self.cs.max_packets_out)
        {
            self.cs.is_cwnd_limited = cwnd_limited;
            self.cs.max_packets_out = pkts;
            self.cwnd_usage_seq = self.snd_nxt;
        }
    }

    /// Linux `tcp_schedule_loss_probe` (RFC 8985 §7.2).
    fn schedule_loss_probe(&mut self, now: Time) {
        if !self.cfg.tlp
            || !self.cfg.sack
            || self.sb.packets_out() == 0
            || !matches!(self.cs.ca_state, CaState::Open | CaState::Cwr)
            || self.tlp_high_seq.is_some()
            || !self.rtt.has_sample()
        {
            self.tlp_at = None;
            return;
        }
        let extra = if self.sb.packets_out() == 1 {
            Duration::from_ms(200)
        } else {
            Duration::from_ms(2)
        };
        let mut at = now + Duration(2 * self.rtt.srtt_ns) + extra;
        if let Some(r) = self.rto_at {
            at = at.min(r);
        }
        self.tlp_at = Some(at);
    }

    /// Linux `tcp_send_loss_probe`.
    fn send_loss_probe(&mut self, io: &mut Io) {
        self.tlp_at = None;
        if self.tlp_high_seq.is_some() || self.sb.packets_out() == 0 {
            return;
        }
        let now = io.now;
        let saved = self.cs.cwnd;
        // New data if any may be sent (the probe ignores cwnd), else the last segment.
        self.cs.cwnd = u32::MAX;
        let sent_new = self.write_end > self.snd_nxt && self.send_new_segment(io, true);
        self.cs.cwnd = saved;
        if sent_new {
            self.tlp_retrans = false;
        } else {
            let Some(i) = (0..self.sb.segs.len())
                .rev()
                .find(|&i| !self.sb.segs[i].is(SACKED))
            else {
                return;
            };
            // Its last segment.
            let i = self.sb.isolate(i, self.sb.segs[i].pcount - 1);
            self.retransmit(i, io);
            self.tlp_retrans = true;
        }
        self.tlps += 1;
        self.tlp_high_seq = Some(self.snd_nxt);
        self.rto_at = Some(self.rtt.rto_deadline(now));
    }

    /// Linux `tcp_tso_segs`: the congestion control's minimum (BBR: 1 below 1.2 Mbit/s)
    /// or `tcp_min_tso_segs` (2), then `tcp_tso_autosize`.
    fn tso_segs(&self) -> u32 {
        if let AnyCc::Dctcp(d) = &self.cc {
            if d.is_prague() {
                // tcp_prague's `tso_segs` hook replaces tcp_tso_autosize (tcp_tso_segs),
                // still bounded by gso_max_segs.
                let mtu = self.cfg.mss + self.cfg.header_bytes();
                return dctcp::prague_tso_segs(self.cs.pacing_rate_bps, mtu, 2)
                    .min(self.gso_max_segs.max(2));
            }
        }
        let min_tso = if matches!(self.cc, AnyCc::Bbr(_)) && self.cs.pacing_rate_bps < 1_200_000 {
            1
        } else {
            2
        };
        let min_rtt_us = if self.cs.min_rtt_ns == u64::MAX {
            u64::MAX
        } else {
            self.cs.min_rtt_ns / 1000
        };
        if min_rtt_us >> 9 == 0 {
            // Under 512 µs `tcp_tso_autosize` adds all of `gso_max_size` to the rate's
            // bytes and then caps them at it: the pacing rate does not matter (issue 19:
            // every transmission attempt of a 10 Gb/s LAN flow).
            return self.gso_max_segs.max(min_tso);
        }
        tso_autosize_segs(
            self.cs.pacing_rate_bps,
            min_rtt_us,
            self.cfg.gso_max_bytes,
            self.cfg.mss,
            min_tso,
        )
    }

    /// Linux `tcp_tso_should_defer` (6.18, `tcp_tso_win_divisor` = 3) for a buffer of
    /// `skb_len` bytes of new data: wait for an ACK that should enlarge the quota instead
    /// of sending a small buffer, unless the socket was quiet for 1 ms, a full-size or
    /// a third of a window's buffer fits, or the oldest unacknowledged segment left less
    /// than half an SRTT ago. Sets `tso_deferred_cwnd_limited` when cwnd is the limit.
    fn tso_should_defer(&mut self, now: Time, skb_len: u64, is_tail: bool, max_segs: u32) -> bool {
        self.tso_deferred_cwnd_limited = false;
        if matches!(self.cs.ca_state, CaState::Recovery | CaState::Loss) {
            return false;
        }
        if now.saturating_since(self.last_tx_at) > Duration::from_ms(1) {
            return false;
        }
        let mss = self.cfg.mss as u64;
        let in_flight = self.sb.in_flight();
        let send_win = (self.snd_una + self.peer_rwnd).saturating_sub(self.snd_nxt);
        let cong_win = (self.cs.cwnd - in_flight) as u64 * mss;
        let limit = send_win.min(cong_win);
        if limit >= max_segs as u64 * mss {
            return false;
        }
        if !is_tail && limit >= skb_len {
            return false;
        }
        if limit >= self.peer_rwnd.min(self.cs.cwnd as u64 * mss) / 3 {
            return false;
        }
        let Some(head) = self.sb.segs.front() else {
            return false;
        };
        if now.saturating_since(head.sent_at) < Duration(self.rtt.srtt_ns / 2) {
            return false;
        }
        if cong_win < send_win {
            if cong_win <= skb_len {
                self.tso_deferred_cwnd_limited = true;
                return true;
            }
        } else if send_win <= skb_len {
            return true;
        }
        // A buffer carrying the FIN will not grow: send it.
        !(is_tail && self.fin_wanted)
    }

    fn update_pacing_rate(&mut self) {
        if matches!(self.cc, AnyCc::Bbr(_)) {
            return; // BBR sets its own pacing rate
        }
        if self.cc_is_prague() {
            self.cs.pacing_rate_bps = dctcp::prague_pacing_rate_bps(
                self.cfg.mss + self.cfg.header_bytes(),
                self.cs.cwnd,
                self.sb.packets_out(),
                self.cs.ssthresh,
                self.rtt.srtt_ns,
            );
            return;
        }
        self.cs.pacing_rate_bps = linux_pacing_rate_bps(
            self.cfg.mss,
            self.cs.cwnd,
            self.sb.packets_out(),
            self.cs.ssthresh,
            self.rtt.srtt_ns,
        );
    }

    /// Linux `tcp_small_queue_check` (6.18) for a segment of `payload` bytes about to be
    /// sent; `factor` is 0 for new data (`tcp_write_xmit`), 1 for retransmissions
    /// (`tcp_xmit_retransmit_queue`). True = do not send now (throttled until one of this
    /// socket's packets leaves the host or is dropped there).
    fn tsq_blocks(&mut self, payload: u32, factor: u32) -> bool {
        if !self.cfg.tsq {
            return false;
        }
        let truesize = self.data_truesize(payload);
        let limit = tsq_limit_bytes(
            truesize,
            self.cs.pacing_rate_bps,
            self.pacing,
            self.cfg.tsq_limit_output_bytes,
            factor,
        );
        // `sk_wmem_alloc` carries a bias of 1: throttled when bytes_below + 1 > limit.
        if self.bytes_below < limit {
            return false;
        }
        // "Always send skb if rtx queue is empty or has one skb": no TX completion needed
        // to make progress (tcp_rtx_queue_empty_or_single_skb, since 6.6).
        if self.sb.packets_out() <= 1 || (self.cfg.gso && self.snd_una >= self.last_skb_start) {
            return false;
        }
        self.tsq_throttled = true;
        self.tsq_throttles += 1;
        true
    }

    /// One of this socket's packets left the host queue (transmitted or dropped): Linux
    /// `tcp_wfree` returns its truesize and, if the socket was throttled, queues it for
    /// `tcp_tsq_handler`, which retransmits lost segments if cwnd allows and then calls
    /// `tcp_write_xmit` — both are what `try_send` does.
    fn tsq_release(&mut self, pkt: &Packet) -> bool {
        self.bytes_below = self.bytes_below.saturating_sub(pkt.truesize_bytes as u64);
        std::mem::take(&mut self.tsq_throttled)
    }

    // ----- window reductions -----

    /// Linux `tcp_init_cwnd_reduction`.
    fn init_cwnd_reduction(&mut self) {
        self.high_seq = self.snd_nxt;
        self.prior_cwnd = self.cs.cwnd;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.cs.ssthresh = self.cc.ssthresh(&self.cs);
        // RFC 9768 §3.2.2: in AccECN mode CWR is a bit of the ACE field, not a signal.
        if self.ecn_ok && self.accecn.is_none() {
            self.send_cwr = true;
        }
    }

    /// Linux `tcp_cwnd_reduction` (RFC 6937 PRR with slow-start reduction bound).
    fn cwnd_reduction(&mut self, newly_acked_sacked: u32, newly_lost: u32, una_advanced: bool) {
        if newly_acked_sacked == 0 && newly_lost == 0 {
            return;
        }
        let in_flight = self.sb.in_flight() as i64;
        let ssthresh = self.cs.ssthresh as i64;
        let delta = ssthresh - in_flight;
        self.prr_delivered += newly_acked_sacked;
        let prr_delivered = self.prr_delivered as i64;
        let prr_out = self.prr_out as i64;
        let mut sndcnt = if delta < 0 {
            let prior = self.prior_cwnd.max(1) as i64;
            (ssthresh * prr_delivered + prior - 1) / prior - prr_out
        } else {
            // Linux >= 5.19 ("tcp: improve PRR loss recovery"): the banked sending
            // opportunities in both bounds, one more only when snd_una advanced and the ACK
            // reported no new loss (PRR-SSRB's + 1 MSS).
            let banked = (prr_delivered - prr_out).max(newly_acked_sacked as i64);
            delta.min(banked + (una_advanced && newly_lost == 0) as i64)
        };
        // Force a fast retransmit upon entering recovery.
        sndcnt = sndcnt.max(if self.prr_out > 0 { 0 } else { 1 });
        self.cs.cwnd = (in_flight + sndcnt).max(1) as u32;
    }

    /// TCP Prague: a `cong_control` algorithm like BBR (the stack's PRR and end-of-CWR
    /// window do not apply), with its own pacing rate and GSO bursts.
    #[inline]
    fn cc_is_prague(&self) -> bool {
        matches!(&self.cc, AnyCc::Dctcp(d) if d.is_prague())
    }

    /// Linux `tcp_end_cwnd_reduction`: nothing for a `cong_control` algorithm.
    fn end_cwnd_reduction(&mut self) {
        if !matches!(self.cc, AnyCc::Bbr(_))
            && !self.cc_is_prague()
            && self.cs.ssthresh < INFINITE_SSTHRESH
        {
            self.cs.cwnd = self.cs.ssthresh;
            self.cs.cwnd_cnt = 0;
        }
    }

    fn set_ca_state(&mut self, s: CaState) {
        self.cs.ca_state = s;
        self.cc.set_state(&mut self.cs, s);
    }

    fn enter_recovery(&mut self) {
        if !matches!(self.cs.ca_state, CaState::Cwr) {
            self.init_cwnd_reduction();
        } else {
            self.high_seq = self.snd_nxt;
        }
        self.set_ca_state(CaState::Recovery);
    }

    /// RTO expiry (RFC 6298 §5.4-5.6, Linux `tcp_enter_loss`).
    fn enter_loss(&mut self, io: &mut Io) {
        let first = self.cs.ca_state != CaState::Loss || self.snd_una >= self.high_seq;
        if matches!(self.cs.ca_state, CaState::Open | CaState::Cwr) || first {
            self.cs.ssthresh = self.cc.ssthresh(&self.cs);
            // CA_EVENT_LOSS, with cwnd still the pre-RTO window (DCTCP halves it).
            self.cc.cwnd_event(&mut self.cs, CaEvent::Loss);
            if self.ecn_ok {
                self.send_cwr = true;
            }
        }
        self.sb.mark_all_lost();
        self.retx_hint = self.snd_una;
        self.cs.cwnd = self.sb.in_flight() + 1;
        self.cs.cwnd_cnt = 0;
        self.high_seq = self.snd_nxt;
        self.dupacks = 0;
        self.tlp_high_seq = None;
        self.set_ca_state(CaState::Loss);
        self.rtos += 1;
        io.flows.get_mut(self.flow).rtos += 1;
    }

    // ----- ACK processing -----

    /// ACK processing: the quiet path for the common ACK ([`Self::ack_is_quiet`]), else
    /// the general one.
    #[inline(always)]
    fn on_ack(&mut self, pkt: &Packet, io: &mut Io) {
        if self.ack_is_quiet(&pkt.hdr) {
            self.on_quiet_ack(pkt, io);
        } else {
            self.on_ack_general(pkt, io);
        }
    }

    /// Whether `h` is the common ACK of a quiet connection, for which
    /// [`Self::on_quiet_ack`] does exactly what [`Self::on_ack_general`] does: it advances
    /// `snd_una` within what was sent, carries no SACK block (so no D-SACK either) and no
    /// ECN echo (no ECE counted, no AccECN), and the connection is in the Open state with
    /// nothing SACKed, marked lost or being retransmitted, no loss probe outstanding, SACK
    /// loss detection on (`dupthresh` ≥ 1). Most ACKs of a bulk transfer without loss
    /// are (issue 19: 662 k per 2 s of seed 000's 10 Gb/s run).
    #[inline(always)]
    fn ack_is_quiet(&self, h: &TransportHeader) -> bool {
        h.ack > self.snd_una
            && h.ack <= self.snd_nxt
            && h.sack_count == 0
            && self.cfg.sack
            && self.cfg.dupthresh > 0
            && self.accecn.is_none()
            && !(self.ecn_ok && h.flags & tcp_flags::ECE != 0)
            && self.cs.ca_state == CaState::Open
            && (self.sb.sacked_out | self.sb.lost_out | self.sb.retrans_out) == 0
            && self.tlp_high_seq.is_none()
    }

    /// Closes the connection once everything, the FIN included, is acknowledged: the step
    /// both ACK paths take after their congestion response. Returns whether it closed.
    #[inline(always)]
    fn close_if_all_acked(&mut self, io: &mut Io) -> bool {
        if !(self.fin_sent && self.snd_una >= self.snd_nxt) {
            return false;
        }
        self.state = ConnState::Closed;
        self.rto_at = None;
        self.tlp_at = None;
        io.note(Note::Closed);
        true
    }

    /// [`Self::on_ack_general`] for an ACK [`Self::ack_is_quiet`] accepted: the steps it
    /// takes in that case, in its order, without the ones that cannot apply (SACK blocks,
    /// D-SACK, ECE, duplicate ACKs, RFC 6675 / RACK loss marking with nothing SACKed or
    /// retransmitted, the loss probe's outcome, the recovery state machine). The tests
    /// (`quiet_ack_path_matches_the_general_one`) run both on the same ACKs.
    #[inline]
    fn on_quiet_ack(&mut self, pkt: &Packet, io: &mut Io) {
        let now = io.now;
        let h = &pkt.hdr;
        let ack = h.ack;
        self.cs.now = now;
        self.peer_rwnd = h.window as u64;
        if h.ts_val > self.ts_recent {
            self.ts_recent = h.ts_val;
        }
        let prior_in_flight = self.sb.in_flight();
        // The cumulatively acknowledged segments (none was SACKed before): what is
        // delivered, whether one was ever retransmitted (Karn), the send times of the
        // oldest and the newest never retransmitted, and the delivery-rate snapshot of
        // the most recently sent one (`best`; only its send time and snapshot are read
        // below). Usually the ACK ends in the first entry, whose segments share all of
        // these (`ack_front`).
        let (delivered, retrans_acked, oldest_sent_at, newest_sent_at, best) =
            match self.sb.ack_front(ack) {
                Some((e, k)) => {
                    let retrans = e.is(EVER_RETRANS);
                    let t = (!retrans).then_some(e.sent_at);
                    (k as u64, retrans, t, t, Some(e))
                }
                None => {
                    // Nothing SACKed, lost or retransmitting (the quiet gate's counters).
                    let c = self.sb.ack_cum_clean(ack);
                    let (o, n) = (c.oldest_sent_at, c.newest_sent_at);
                    (c.delivered, c.retrans_acked, o, n, c.best)
                }
            };
        self.snd_una = ack;
        self.rtt.backoff = 0;
        self.cs.delivered += delivered;
        let acked_sacked = delivered as u32;
        self.dupacks = 0;
        // RTT (RFC 6298, Karn; RFC 7323 §4.1 from the timestamp echo otherwise), and the
        // congestion control's sample: the newest never-retransmitted segment, none when
        // this ACK covers a retransmission.
        let seq_rtt = if retrans_acked {
            None
        } else {
            oldest_sent_at.map(|t| now.saturating_since(t).0)
        }
        .or_else(|| (h.ts_ecr > Time::ZERO).then(|| now.saturating_since(h.ts_ecr).0));
        if let Some(r) = seq_rtt {
            self.rtt.sample(Duration(r));
        }
        let ca_rtt = if retrans_acked {
            None
        } else {
            newest_sent_at.map(|t| now.saturating_since(t).0)
        };
        self.cs.srtt_ns = self.rtt.srtt_ns;
        self.cs.min_rtt_ns = self.rtt.min_rtt_ns;

        // Rate sample (tcp_rate_gen).
        self.rate_gen_bookkeeping(now, delivered, best);
        // Nothing SACKed: RFC 6675 marks nothing lost; nothing retransmitted: nor does
        // RACK. The loss mark still follows the cumulative ACK (done by `ack_cum`).
        self.cs.snd_una = self.snd_una;
        self.cs.snd_nxt = self.snd_nxt;
        self.cc.in_ack_event(&mut self.cs, false);

        // Congestion control (Open: no window reduction under way).
        self.cs.in_flight = self.sb.in_flight();
        self.cs.packets_out = self.sb.packets_out();
        if let AnyCc::Cubic(c) = &mut self.cc {
            // The default's hooks called directly (no dispatch per ACK): CUBIC has no
            // `cong_control`.
            c.pkts_acked(&mut self.cs, acked_sacked, ca_rtt);
            if acked_sacked > 0 {
                c.cong_avoid(&mut self.cs, acked_sacked);
            }
        } else {
            self.cc.pkts_acked(&mut self.cs, acked_sacked, ca_rtt);
            // Only BBR and Prague take the rate sample (`cong_control`; the others'
            // returns false).
            let controlled = (matches!(self.cc, AnyCc::Bbr(_)) || self.cc_is_prague()) && {
                let rs = self.rate_sample(now, best, acked_sacked, prior_in_flight, ca_rtt);
                self.cc.cong_control(&mut self.cs, &rs)
            };
            if !controlled && acked_sacked > 0 {
                self.cc.cong_avoid(&mut self.cs, acked_sacked);
            }
        }
        self.update_pacing_rate();
        if self.close_if_all_acked(io) {
            return;
        }
        // Timers: RFC 6298 §5.2/5.3 (snd_una advanced).
        self.rto_at = if self.sb.packets_out() == 0 {
            None
        } else {
            Some(self.rtt.rto_deadline(now))
        };
        self.try_send(io);
    }

    /// `tcp_rate_gen`'s connection bookkeeping for an ACK that delivered `delivered`
    /// segments, `best` the most recently sent of them: the app-limited mark ends once
    /// delivery passes it, and the delivery and first-transmission clocks move.
    #[inline]
    fn rate_gen_bookkeeping(&mut self, now: Time, delivered: u64, best: Option<Seg>) {
        if self.app_limited_until != 0 && self.cs.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        if delivered > 0 {
            self.delivered_at = now;
        }
        if let Some(b) = best {
            self.first_tx_at = b.sent_at;
        }
    }

    /// The delivery-rate sample of an ACK (Linux `tcp_rate_gen`), from the most recently
    /// sent acknowledged segment's snapshot; shared by [`Self::on_ack_general`] and the
    /// quiet path (which builds it only for BBR). Losses are the caller's to add.
    #[inline]
    fn rate_sample(
        &self,
        now: Time,
        best: Option<Seg>,
        acked_sacked: u32,
        prior_in_flight: u32,
        ca_rtt: Option<u64>,
    ) -> RateSample {
        let mut rs = RateSample {
            delivered: -1,
            acked_sacked,
            prior_in_flight,
            rtt_ns: ca_rtt,
            ..Default::default()
        };
        if let Some(b) = best {
            rs.prior_delivered = b.delivered;
            rs.delivered = (self.cs.delivered - b.delivered) as i64;
            rs.is_app_limited = b.app_limited;
            let snd = b.sent_at.saturating_since(b.first_tx_at).0;
            let ackd = now.saturating_since(b.delivered_at).0;
            let interval = snd.max(ackd);
            if interval >= self.rtt.min_rtt_ns.min(u64::MAX - 1) || self.rtt.min_rtt_ns == u64::MAX
            {
                rs.interval_ns = interval;
            }
        }
        rs
    }

    /// ACK processing, every case. Out of line: inlined into `on_packet`, its frame and
    /// spills were the quiet path's too (issue 19).
    #[inline(never)]
    fn on_ack_general(&mut self, pkt: &Packet, io: &mut Io) {
        let now = io.now;
        let h = &pkt.hdr;
        let ack = h.ack;
        if ack > self.snd_nxt || ack < self.snd_una {
            return; // acknowledges nothing we sent, or old
        }
        self.cs.now = now;
        self.peer_rwnd = h.window as u64;
        if h.ts_val > self.ts_recent {
            self.ts_recent = h.ts_val;
        }
        let prior_in_flight = self.sb.in_flight();
        let prior_una = self.snd_una;
        let prior_sacked = self.sb.sacked_out;

        // Rate sample bookkeeping: the most recently sent delivered segment.
        let mut best: Option<Seg> = None;
        let mut newest_rtt: Option<(Time, u64)> = None; // (sent_at, rtt) of newest non-retrans
        let mut oldest_acked_rtt: Option<u64> = None; // set by the cumulative part
        let mut oldest_sacked_rtt: Option<u64> = None;
        let mut dsack = false;
        let mut delivered = 0u64;

        if self.cfg.sack && h.sack_count > 0 {
            for b in h.sacks() {
                if b.end <= ack || b.start < self.snd_una {
                    dsack = true; // RFC 2883 D-SACK: reports a duplicate
                    continue;
                }
                self.sb.sack(b, |s| {
                    // An entry of newly SACKed segments; the last one is the most
                    // recently sent of them (they share a send time).
                    delivered += s.pcount as u64;
                    if best.is_none_or(|b| (s.sent_at, s.end()) > (b.sent_at, b.end())) {
                        best = Some(*s);
                    }
                    if !s.is(EVER_RETRANS) {
                        let r = now.saturating_since(s.sent_at).0;
                        if newest_rtt.is_none_or(|(t, _)| s.sent_at >= t) {
                            newest_rtt = Some((s.sent_at, r));
                        }
                        oldest_sacked_rtt.get_or_insert(r);
                    }
                });
            }
        }
        let una_advanced = ack > self.snd_una;
        let mut retrans_acked = false;
        if una_advanced {
            // The cumulatively acknowledged segments not SACKed before, summed up in one
            // pass (the same as visiting each in sequence order after the SACKed ones).
            let c = self.sb.ack_cum(ack);
            delivered += c.delivered;
            retrans_acked = c.retrans_acked;
            if let Some(s) = c.best {
                if best.is_none_or(|b| (s.sent_at, s.end()) > (b.sent_at, b.end())) {
                    best = Some(s);
                }
            }
            if let Some(t) = c.newest_sent_at {
                if newest_rtt.is_none_or(|(n, _)| t >= n) {
                    newest_rtt = Some((t, now.saturating_since(t).0));
                }
            }
            oldest_acked_rtt = c.oldest_sent_at.map(|t| now.saturating_since(t).0);
            self.snd_una = ack;
            self.rtt.backoff = 0;
        }
        if dsack {
            self.spurious_dsacks += 1;
        }
        self.cs.delivered += delivered;
        // Linux tcp_count_delivered: packets delivered by an ACK carrying ECE; with
        // AccECN, the CE packets the ACK reports (and any report means congestion).
        let ece = if let Some(a) = &mut self.accecn {
            let d = a.on_ack(h, delivered, self.cfg.mss);
            self.cs.delivered_ce += d;
            d > 0
        } else {
            let ece = self.ecn_ok && h.flags & tcp_flags::ECE != 0;
            if ece {
                self.cs.delivered_ce += delivered;
            }
            ece
        };
        let acked_sacked = delivered as u32;
        let is_dupack = !una_advanced
            && h.payload_bytes == 0
            && self.sb.packets_out() > 0
            && (self.sb.sacked_out == prior_sacked || !self.cfg.sack);
        if is_dupack && !self.cfg.sack {
            self.dupacks += 1;
        } else if una_advanced {
            self.dupacks = 0;
        }

        // RTT: oldest newly-acked segment unless this ACK covers retransmitted data (Karn;
        // Linux FLAG_RETRANS_DATA_ACKED), else the newly SACKed, else the timestamp echo
        // (RFC 7323 §4.1).
        if retrans_acked {
            oldest_acked_rtt = None;
        }
        let seq_rtt = oldest_acked_rtt.or(oldest_sacked_rtt).or_else(|| {
            (una_advanced && h.ts_ecr > Time::ZERO).then(|| now.saturating_since(h.ts_ecr).0)
        });
        if let Some(r) = seq_rtt {
            self.rtt.sample(Duration(r));
        }
        let ca_rtt = if retrans_acked && oldest_sacked_rtt.is_none() {
            None
        } else {
            newest_rtt.map(|(_, r)| r)
        };
        self.cs.srtt_ns = self.rtt.srtt_ns;
        self.cs.min_rtt_ns = self.rtt.min_rtt_ns;

        // Rate sample (tcp_rate_gen).
        self.rate_gen_bookkeeping(now, delivered, best);
        let mut rs = self.rate_sample(now, best, acked_sacked, prior_in_flight, ca_rtt);

        // Loss detection.
        let mut newly_lost = 0;
        if self.cfg.sack {
            let (n, first) = self.sb.mark_lost(self.cfg.dupthresh);
            newly_lost = n;
            if n > 0 {
                self.retx_hint = self.retx_hint.min(first);
            }
        } else if self.sb.packets_out() > 0 {
            let start_recovery = matches!(self.cs.ca_state, CaState::Open | CaState::Cwr)
                && self.dupacks >= self.cfg.dupthresh;
            let partial =
                self.cs.ca_state == CaState::Recovery && una_advanced && ack < self.high_seq;
            if (start_recovery || partial) && self.sb.mark_one_lost(0) {
                newly_lost = 1;
            }
            // Reno: duplicate ACKs stand for segments that left the network (Linux
            // tcp_add_reno_sack): count them as delivered for PRR.
        }
        // Retransmissions overtaken by later transmissions are lost again (RACK rule).
        if let Some(b) = best {
            if self.sb.retrans_out > 0 && self.rtt.min_rtt_ns != u64::MAX {
                let (n, first) = self
                    .sb
                    .mark_lost_retransmissions(b.sent_at, self.rtt.min_rtt_ns / 4);
                if n > 0 {
                    newly_lost += n;
                    self.retx_hint = self.retx_hint.min(first);
                }
            }
        }
        if newly_lost > 0 && !self.cfg.sack {
            self.retx_hint = self.snd_una;
        }
        rs.losses = newly_lost;
        // Linux tcp_in_ack_event (before the state machine: DCTCP's once-per-window α
        // update precedes the ECE reduction it feeds).
        self.cs.snd_una = self.snd_una;
        self.cs.snd_nxt = self.snd_nxt;
        self.cc.in_ack_event(&mut self.cs, ece);

        // TLP outcome (Linux tcp_process_tlp_ack).
        if let Some(tlp) = self.tlp_high_seq {
            if ack >= tlp {
                if !self.tlp_retrans || dsack {
                    self.tlp_high_seq = None;
                } else if ack > tlp {
                    self.tlp_high_seq = None;
                    if matches!(self.cs.ca_state, CaState::Open) {
                        self.init_cwnd_reduction();
                        self.end_cwnd_reduction();
                    }
                } else if !una_advanced && !is_dupack {
                    self.tlp_high_seq = None;
                }
            }
        }

        // The state machine (tcp_fastretrans_alert, simplified).
        match self.cs.ca_state {
            CaState::Recovery | CaState::Loss | CaState::Cwr if self.snd_una >= self.high_seq => {
                if self.cs.ca_state != CaState::Loss {
                    self.end_cwnd_reduction();
                }
                self.set_ca_state(CaState::Open);
            }
            _ => {}
        }
        if matches!(self.cs.ca_state, CaState::Open | CaState::Cwr) && self.sb.lost_out > 0 {
            self.enter_recovery();
        } else if self.cs.ca_state == CaState::Open && ece {
            self.init_cwnd_reduction();
            self.set_ca_state(CaState::Cwr);
        }

        // Congestion control.
        self.cs.snd_una = self.snd_una;
        self.cs.snd_nxt = self.snd_nxt;
        self.cs.in_flight = self.sb.in_flight();
        self.cs.packets_out = self.sb.packets_out();
        self.cc.pkts_acked(&mut self.cs, acked_sacked, ca_rtt);
        let reno_delivered = if !self.cfg.sack && is_dupack {
            1
        } else {
            acked_sacked
        };
        if self.cc.cong_control(&mut self.cs, &rs) {
        } else if matches!(self.cs.ca_state, CaState::Recovery | CaState::Cwr) {
            self.cwnd_reduction(reno_delivered, newly_lost, una_advanced);
        } else if una_advanced && acked_sacked > 0 {
            self.cc.cong_avoid(&mut self.cs, acked_sacked);
        }
        self.update_pacing_rate();
        if self.close_if_all_acked(io) {
            return;
        }

        // Timers: RFC 6298 §5.2/5.3.
        if self.sb.packets_out() == 0 {
            self.rto_at = None;
        } else if una_advanced || self.rto_at.is_none() {
            self.rto_at = Some(self.rtt.rto_deadline(now));
        }
        let _ = prior_una;
        self.try_send(io);
    }
}

impl Endpoint for TcpSender {
    fn start(&mut self, io: &mut Io) {
        if self.cfg.handshake {
            self.state = ConnState::SynSent;
            self.send_syn(io);
            self.rto_at = Some(io.now + self.cfg.initial_rto);
        } else {
            self.ecn_ok = self.cfg.ecn_enabled();
            if self.cfg.accecn {
                self.accecn = Some(Box::default());
            }
            self.established(io);
        }
    }

    fn on_packet(&mut self, pkt: &Packet, io: &mut Io) {
        match self.state {
            ConnState::SynSent => {
                let f = pkt.hdr.flags;
                if f & tcp_flags::SYN != 0 && f & tcp_flags::ACK != 0 {
                    if self.syn_retrans == 0 {
                        self.rtt.sample(io.now.saturating_since(self.syn_sent_at));
                    }
                    self.ecn_ok = if self.cfg.accecn {
                        // RFC 9768 Table 2: the SYN-ACK says which feedback the peer has.
                        match feedback_from_synack(pkt.hdr.ace()) {
                            Feedback::AccEcn => {
                                self.accecn = Some(Box::default());
                                true
                            }
                            Feedback::Classic => true,
                            Feedback::None => false,
                        }
                    } else {
                        self.cfg.ecn_enabled() && f & tcp_flags::ECE != 0
                    };
                    self.peer_rwnd = pkt.hdr.window as u64;
                    self.ts_recent = pkt.hdr.ts_val;
                    self.rtt.backoff = 0;
                    self.rto_at = None;
                    self.established(io);
                }
            }
            ConnState::Established => self.on_ack(pkt, io),
            _ => {}
        }
    }

    fn on_timer(&mut self, io: &mut Io) {
        let now = io.now;
        match self.state {
            ConnState::SynSent if self.rto_at.is_some_and(|t| t <= now) => {
                if self.syn_retrans >= SYN_RETRIES {
                    self.state = ConnState::Closed;
                    self.rto_at = None;
                    io.note(Note::Closed);
                    return;
                }
                self.syn_retrans += 1;
                self.rtt.backoff += 1;
                self.send_syn(io);
                self.rto_at =
                    Some(now + Duration(self.cfg.initial_rto.0 << self.rtt.backoff.min(20)));
            }
            ConnState::Established => {
                if self.tsq_wake.take().is_some() | self.write_messages(now) {
                    self.try_send(io);
                }
                if self.rto_at.is_some_and(|t| t <= now) {
                    if self.sb.packets_out() == 0 {
                        self.rto_at = None;
                    } else {
                        self.enter_loss(io);
                        self.rtt.backoff += 1;
                        self.rto_at = Some(self.rtt.rto_deadline(now));
                        self.next_tx_at = now;
                        self.try_send(io);
                        // try_send may not have re-armed: keep the backed-off RTO.
                    }
                } else if self.tlp_at.is_some_and(|t| t <= now) {
                    self.send_loss_probe(io);
                } else if self.pace_blocked && self.next_tx_at <= now {
                    self.try_send(io);
                }
            }
            _ => {}
        }
    }

    // Inline: the engine asks after every call (seed 000: 0.64 M times per 2 s after an
    // ACK alone); out of line it was a call through the GOT per question (issue 19).
    #[inline]
    fn deadline(&self) -> Option<Time> {
        // The earliest of the armed timers, `Time::MAX` standing for "none" (no timer is
        // ever armed at the end of time: the engine would never fire it either).
        const NONE: Time = Time::MAX;
        let mut d = self
            .rto_at
            .unwrap_or(NONE)
            .min(self.tlp_at.unwrap_or(NONE))
            .min(self.tsq_wake.unwrap_or(NONE));
        if self.pace_blocked {
            d = d.min(self.next_tx_at);
        }
        if self.state == ConnState::Established {
            if let Some(t) = self.next_message_at() {
                d = d.min(t);
            }
        }
        (d != NONE).then_some(d)
    }

    fn on_tx_complete(&mut self, pkt: &Packet, io: &mut Io) {
        if self.tsq_release(pkt) && self.state == ConnState::Established {
            self.try_send(io);
        }
    }

    fn on_host_drop(&mut self, pkt: &Packet, io: &mut Io) {
        // Called from inside the engine's enqueue/dequeue: defer the transmission to a
        // timer at the current time (the kernel defers it to the TSQ BH work as well).
        if self.tsq_release(pkt) && self.state == ConnState::Established {
            self.tsq_wake = Some(io.now);
        }
    }

    fn observe(&self, emit: &mut dyn FnMut(&str, f64)) {
        let mss = self.cfg.mss as f64;
        emit("cwnd_bytes", self.cs.cwnd as f64 * mss);
        if self.cs.ssthresh < INFINITE_SSTHRESH {
            emit("ssthresh_bytes", self.cs.ssthresh as f64 * mss);
        }
        if self.rtt.has_sample() {
            emit("srtt_ms", self.rtt.srtt_ns as f64 * 1e-6);
        }
        emit("pacing_rate_bps", self.cs.pacing_rate_bps as f64);
        emit("inflight_bytes", self.sb.in_flight() as f64 * mss);
        self.cc.observe(emit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_core::packet::SackBlock;

    use crate::tcp::test_io::Harness;

    fn sender(cfg: TcpConfig, h: &mut Harness) -> TcpSender {
        let mut s = TcpSender::new(0, FlowKey::default(), 0, 1, 0, &cfg, Source::Bulk, 1);
        s.start(&mut h.io(Time::ZERO));
        s
    }

    fn ack(ack: u64, ece: bool, sack: &[(u64, u64)]) -> Packet {
        let mut p = Packet::default();
        p.hdr.ack = ack;
        p.hdr.window = 1 << 30;
        p.hdr.flags = tcp_flags::ACK | if ece { tcp_flags::ECE } else { 0 };
        for (i, &(a, b)) in sack.iter().enumerate() {
            p.hdr.set_sack(i, SackBlock { start: a, end: b });
        }
        p.hdr.sack_count = sack.len() as u8;
        p
    }

    const MSS: u64 = 1448;

    /// The harness never completes transmissions: TSQ off except in the TSQ tests.
    fn cfg() -> TcpConfig {
        TcpConfig {
            handshake: false,
            cc: crate::tcp::cc::CcKind::NewReno,
            tsq: false,
            // Per-segment mechanics; GSO buffers have their own tests.
            gso: false,
            ..TcpConfig::default()
        }
    }

    #[test]
    fn initial_window_and_ecn_once_per_window() {
        let mut h = Harness::new();
        let mut s = sender(TcpConfig { ecn: true, ..cfg() }, &mut h);
        let sent = h.take();
        assert_eq!(sent.len(), 10, "IW 10");
        assert!(sent
            .iter()
            .all(|p| p.ecn == Ecn::Ect0 && p.len_bytes == 1514));
        // First ECE: one reduction (RFC 3168 §6.1.2), CWR on the next new segment.
        let t = Time(40_000_000);
        s.on_packet(&ack(1 + MSS, true, &[]), &mut h.io(t));
        assert_eq!(s.ca_state(), CaState::Cwr);
        let ss = s.cs.ssthresh;
        assert_eq!(ss, 5, "Reno halves the 10-packet window");
        let out = h.take();
        assert!(out.iter().any(|p| p.hdr.flags & tcp_flags::CWR != 0));
        // More ECE within the same window (below high_seq): no further reduction.
        for k in 2..=9 {
            s.on_packet(
                &ack(1 + k * MSS, true, &[]),
                &mut h.io(t + Duration::from_ms(k)),
            );
        }
        assert_eq!(s.cs.ssthresh, ss);
        assert_eq!(h.flows.get(0).retransmits, 0);
        // After the window (high_seq) is acknowledged, a new ECE reduces again.
        let nxt = s.snd_nxt;
        s.on_packet(&ack(nxt, false, &[]), &mut h.io(t + Duration::from_ms(50)));
        assert_eq!(s.ca_state(), CaState::Open);
        h.take();
        let nxt = s.snd_nxt;
        s.on_packet(&ack(nxt, true, &[]), &mut h.io(t + Duration::from_ms(90)));
        assert!(
            s.cs.ssthresh < ss.max(s.cs.cwnd + 1),
            "second window, second reduction"
        );
    }

    #[test]
    fn rto_backs_off_exponentially_and_restarts_slow_start() {
        let mut h = Harness::new();
        let mut s = sender(cfg(), &mut h);
        h.take();
        let mut t = s.deadline().unwrap();
        assert_eq!(t, Time(1_000_000_000), "RFC 6298 §2.1: initial RTO 1 s");
        for k in 1..=4u64 {
            s.on_timer(&mut h.io(t));
            let out = h.take();
            assert_eq!(out.len(), 1, "cwnd 1 after an RTO: only the head is resent");
            assert_eq!(out[0].hdr.seq, 1);
            let next = s.deadline().unwrap();
            assert_eq!(next - t, Duration(1_000_000_000 << k), "backoff {k}");
            t = next;
        }
        assert_eq!(s.rtos, 4);
        assert_eq!(s.cs.ssthresh, 5, "ssthresh reduced once per loss episode");
    }

    #[test]
    fn sack_loss_triggers_fast_retransmit_and_prr() {
        let mut h = Harness::new();
        let mut s = sender(cfg(), &mut h);
        h.take();
        // Segment 1 lost; segments 2..5 SACKed one by one (dupthresh = 3).
        let t = Time(50_000_000);
        for k in 2..=3u64 {
            s.on_packet(&ack(1, false, &[(1 + MSS, 1 + k * MSS)]), &mut h.io(t));
        }
        assert_eq!(
            s.ca_state(),
            CaState::Open,
            "two SACKed segments: not yet lost"
        );
        assert!(h.take().iter().all(|p| p.hdr.seq != 1));
        s.on_packet(&ack(1, false, &[(1 + MSS, 1 + 4 * MSS)]), &mut h.io(t));
        let out = h.take();
        assert_eq!(s.ca_state(), CaState::Recovery);
        assert_eq!(out[0].hdr.seq, 1, "fast retransmit of the hole first");
        assert_eq!(s.retransmits, 1);
        assert_eq!(s.cs.ssthresh, 5);
        // Cumulative ACK of everything sent: recovery ends with cwnd = ssthresh.
        let nxt = s.snd_nxt;
        s.on_packet(&ack(nxt, false, &[]), &mut h.io(t + Duration::from_ms(50)));
        assert_eq!(s.ca_state(), CaState::Open);
        assert!(s.cs.cwnd >= 5 && s.cs.cwnd <= 6, "cwnd {}", s.cs.cwnd);
    }

    #[test]
    fn lost_retransmission_is_resent_without_an_rto() {
        let mut h = Harness::new();
        let mut s = sender(cfg(), &mut h);
        h.take();
        let t = Time(50_000_000);
        s.on_packet(&ack(1, false, &[(1 + MSS, 1 + 4 * MSS)]), &mut h.io(t));
        let out = h.take();
        assert_eq!(out[0].hdr.seq, 1, "fast retransmit");
        // 20 ms later another SACK lets new data out.
        let t1 = t + Duration::from_ms(20);
        s.on_packet(&ack(1, false, &[(1 + MSS, 1 + 9 * MSS)]), &mut h.io(t1));
        let after: Vec<u64> = h.take().iter().map(|p| p.hdr.seq).collect();
        assert!(
            !after.is_empty() && !after.contains(&1),
            "new data sent after the retransmission"
        );
        // That new data is SACKed but the retransmission is not: it was lost.
        let t2 = t1 + Duration::from_ms(50);
        let hi = after.last().unwrap() + MSS;
        s.on_packet(&ack(1, false, &[(1 + MSS, hi)]), &mut h.io(t2));
        let out = h.take();
        assert_eq!(
            out.first().map(|p| p.hdr.seq),
            Some(1),
            "second retransmission"
        );
        assert_eq!(s.retransmits, 2);
        assert_eq!(s.rtos, 0);
    }

    #[test]
    fn tail_loss_probe_fires_before_the_rto() {
        let mut h = Harness::new();
        let mut s = sender(
            TcpConfig {
                rwnd_bytes: 10 * MSS,
                ..cfg()
            },
            &mut h,
        );
        h.take();
        // ACK of the first 5 segments after 40 ms; the last 5 are lost.
        let t = Time(40_000_000);
        s.on_packet(&ack(1 + 5 * MSS, false, &[]), &mut h.io(t));
        h.take();
        let srtt = s.rtt.srtt_ns;
        let d = s.deadline().unwrap();
        assert_eq!(d - t, Duration(2 * srtt + 2_000_000), "PTO = 2·SRTT + 2 ms");
        assert!(d < s.rto_at.unwrap());
        s.on_timer(&mut h.io(d));
        let out = h.take();
        assert_eq!(out.len(), 1, "one probe");
        assert_eq!(s.tlps, 1);
    }

    #[test]
    fn newreno_partial_acks_without_sack() {
        let mut h = Harness::new();
        let mut s = sender(
            TcpConfig {
                sack: false,
                ..cfg()
            },
            &mut h,
        );
        h.take();
        // Segments 1 and 3 lost: three duplicate ACKs for 1.
        let t = Time(50_000_000);
        for _ in 0..3 {
            s.on_packet(&ack(1, false, &[]), &mut h.io(t));
        }
        assert_eq!(s.ca_state(), CaState::Recovery);
        let out = h.take();
        assert_eq!(out[0].hdr.seq, 1);
        // Partial ACK up to the second hole (RFC 6582 §3.2 step 5): resend it at once.
        s.on_packet(
            &ack(1 + 2 * MSS, false, &[]),
            &mut h.io(t + Duration::from_ms(50)),
        );
        assert_eq!(s.ca_state(), CaState::Recovery);
        let out = h.take();
        assert_eq!(out.first().map(|p| p.hdr.seq), Some(1 + 2 * MSS));
    }

    #[test]
    fn tso_autosize_follows_the_kernel_formula() {
        // tcp_tso_autosize: pacing_rate >> 10 plus gso_max_size >> (min_rtt_us >> 9).
        // 200 Mbit/s = 25 MB/s → 24414 B per ~1 ms.
        let rate = 200_000_000;
        // A near peer (50 µs): the whole 64 KiB → 45 segments of 1448 B (Linux here: two
        // 45-segment buffers in the qdisc, 136260 B).
        assert_eq!(tso_autosize_segs(rate, 50, 65_536, 1448, 2), 45);
        // 2 ms: 65536 >> 3 = 8192 more → 32606 B → 22 segments.
        assert_eq!(tso_autosize_segs(rate, 2_000, 65_536, 1448, 2), 22);
        // 20 ms: no RTT allowance (r ≥ 32 bits) → 24414 B → 16 segments.
        assert_eq!(tso_autosize_segs(rate, 20_000_000, 65_536, 1448, 2), 16);
        // 1 Mbit/s far away: below one segment → tcp_min_tso_segs (2).
        assert_eq!(tso_autosize_segs(1_000_000, 100_000, 65_536, 1448, 2), 2);
        // No pacing rate yet (~0UL) or no RTT sample: capped by gso_max_size.
        assert_eq!(tso_autosize_segs(0, u64::MAX, 65_536, 1448, 2), 45);
    }

    /// `tso_segs` (with its shortcut under 512 µs of minimum RTT) is `tcp_tso_autosize`
    /// of the sender's state, for rates from 0 (unknown) to 100 Gb/s, minimum RTTs around
    /// the 512-µs step and none yet, CUBIC and BBR (whose minimum is 1 below 1.2 Mb/s),
    /// and GSO sizes from under two segments to 64 KiB; and the near-peer literal: 45.
    #[test]
    fn tso_segs_is_tcp_tso_autosize_of_the_state() {
        let mut h = Harness::new();
        for cc in [CcKind::Cubic, CcKind::Bbr] {
            for gso_max_bytes in [2000, 20_000, 65_536] {
                let cfg = TcpConfig {
                    cc,
                    gso_max_bytes,
                    ..cfg()
                };
                let mut s = sender(cfg.clone(), &mut h);
                for rate in [
                    0,
                    1_000_000,
                    1_199_999,
                    1_200_000,
                    200_000_000,
                    100_000_000_000,
                ] {
                    for min_rtt_ns in [1, 50_000, 511_999, 512_000, 2_000_000, 20_000_000, u64::MAX]
                    {
                        s.cs.pacing_rate_bps = rate;
                        s.cs.min_rtt_ns = min_rtt_ns;
                        let min_tso = if cc == CcKind::Bbr && rate < 1_200_000 {
                            1
                        } else {
                            2
                        };
                        let us = if min_rtt_ns == u64::MAX {
                            u64::MAX
                        } else {
                            min_rtt_ns / 1000
                        };
                        let want = tso_autosize_segs(rate, us, gso_max_bytes, cfg.mss, min_tso);
                        assert_eq!(
                            s.tso_segs(),
                            want,
                            "{cc:?} {gso_max_bytes} {rate} {min_rtt_ns}"
                        );
                    }
                }
            }
        }
        let mut s = sender(cfg(), &mut h);
        s.cs.min_rtt_ns = 100_000;
        s.cs.pacing_rate_bps = 10_000_000_000;
        assert_eq!(s.tso_segs(), 45, "65536 B / 1448 B");
    }

    #[test]
    fn gso_segs_is_the_quota_cut_to_the_sendable_segments() {
        // tcp_write_xmit: min(quota, ⌈bytes that may be sent / mss⌉), at least one segment.
        // 100 kB sendable with a quota of 45: the whole quota.
        assert_eq!(gso_segs(45, 100_000, 1448), 45);
        // Exactly 45 segments' worth, and one byte less (still 45 by the ceiling).
        assert_eq!(gso_segs(45, 45 * 1448, 1448), 45);
        assert_eq!(gso_segs(45, 45 * 1448 - 1, 1448), 45);
        // 44 segments and one byte: 45; exactly 44: 44.
        assert_eq!(gso_segs(45, 44 * 1448 + 1, 1448), 45);
        assert_eq!(gso_segs(45, 44 * 1448, 1448), 44);
        // 3000 B = 2 full segments + 104 B: 3.
        assert_eq!(gso_segs(45, 3000, 1448), 3);
        // Nothing sendable (a FIN only): one.
        assert_eq!(gso_segs(45, 0, 1448), 1);
        assert_eq!(gso_segs(1, 0, 1448), 1);
        assert_eq!(gso_segs(1, 5_000_000, 1448), 1);
        // Beyond 2^32 bytes: the quota still (the division path).
        assert_eq!(gso_segs(7, 1 << 40, 1448), 7);
    }

    /// A buffer of new data built the way `tcp_write_xmit` fills an skb from the write
    /// queue: one segment at a time (each `min(MSS, written, window)`), stopping after a
    /// short segment, at the FIN, at `max_segs`, or when nothing more may be sent.
    fn extent_one_segment_at_a_time(s: &mut TcpSender, max_segs: u32) -> Option<(u32, u64, bool)> {
        let saved = s.snd_nxt;
        let (mut len, mut fin) = s.next_new_segment()?;
        let mut end = s.snd_nxt;
        let mut n = 0;
        for _ in 0..max_segs {
            end += len as u64;
            n += 1;
            s.snd_nxt = end;
            if fin || len < s.cfg.mss || n >= max_segs {
                break;
            }
            match s.next_new_segment() {
                Some((l, f)) => (len, fin) = (l, f),
                None => break,
            }
        }
        s.snd_nxt = saved;
        Some((n, end, fin))
    }

    #[test]
    fn a_buffer_extends_as_segment_by_segment_filling_would() {
        // Every combination of written data, receive window and segment budget around the
        // segment boundaries (bounded: 9 × 9 × 6 × 2 × 2 cases).
        let mut h = Harness::new();
        let mut s = sender(cfg(), &mut h);
        let offsets = [
            0u64,
            1,
            MSS - 1,
            MSS,
            MSS + 1,
            2 * MSS,
            3 * MSS - 5,
            10 * MSS,
            1 << 40,
        ];
        let start = 1 + 7 * MSS;
        let mut cases = 0;
        for &written in &offsets {
            for &wnd in &offsets {
                for max_segs in [1u32, 2, 3, 5, 10, 45] {
                    for fin_wanted in [false, true] {
                        for fin_sent in [false, true] {
                            s.snd_una = start - 3 * MSS;
                            s.snd_nxt = start;
                            s.write_end = start + written;
                            s.peer_rwnd = 3 * MSS + wnd;
                            s.fin_wanted = fin_wanted;
                            s.fin_sent = fin_sent;
                            let want = extent_one_segment_at_a_time(&mut s, max_segs);
                            let got = s
                                .next_new_segment()
                                .map(|(len, fin)| s.buffer_extent(start, len, fin, max_segs));
                            assert_eq!(
                                got, want,
                                "written {written} wnd {wnd} max {max_segs} fin {fin_wanted}/{fin_sent}"
                            );
                            cases += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(cases, 9 * 9 * 6 * 4);
        // One literal case: 5 full segments written, window for 3: a 3-segment buffer.
        s.snd_nxt = start;
        s.write_end = start + 5 * MSS;
        s.peer_rwnd = 6 * MSS;
        s.fin_wanted = true;
        s.fin_sent = false;
        assert_eq!(
            s.buffer_extent(start, MSS as u32, false, 45),
            (3, start + 3 * MSS, false)
        );
        // The window reaches past the data: all 5, the last one carrying the FIN.
        s.peer_rwnd = 100 * MSS;
        assert_eq!(
            s.buffer_extent(start, MSS as u32, false, 45),
            (5, start + 5 * MSS, true)
        );
    }

    #[test]
    fn gso_buffers_hold_at_most_half_the_cwnd() {
        // tcp_cwnd_test keeps at least two buffers in flight: IW 10 leaves as two
        // 5-segment GSO buffers, each 5 × 1514 B on the wire and truesize payload + 832.
        let mut h = Harness::new();
        let _s = sender(TcpConfig { gso: true, ..cfg() }, &mut h);
        let sent = h.take();
        assert_eq!(sent.len(), 2, "{sent:?}");
        for (i, p) in sent.iter().enumerate() {
            assert_eq!(p.gso_segs, 5);
            assert_eq!(p.gso_size as u32, MSS as u32);
            assert_eq!(p.hdr.payload_bytes, 5 * MSS as u32);
            assert_eq!(p.len_bytes, 5 * 1514);
            assert_eq!(p.truesize_bytes, 5 * MSS as u32 + SKB_HEAD_TRUESIZE);
            assert_eq!(p.hdr.seq, 1 + i as u64 * 5 * MSS);
        }
    }

    #[test]
    fn tsq_limit_follows_tcp_small_queue_check() {
        // 2 · truesize floor: 10 Mbit/s → 1 250 000 B/s >> 10 = 1220 B < 2 · 2880.
        assert_eq!(tsq_limit_bytes(2880, 10_000_000, false, 4 << 20, 0), 5760);
        // ~1 ms of the pacing rate: 1 Gbit/s → 125 000 000 >> 10 = 122 070 B.
        assert_eq!(
            tsq_limit_bytes(2880, 1_000_000_000, false, 4 << 20, 0),
            122_070
        );
        // Retransmissions: doubled (factor 1).
        assert_eq!(
            tsq_limit_bytes(2880, 1_000_000_000, false, 4 << 20, 1),
            244_140
        );
        // tcp_limit_output_bytes caps unpaced sockets only (100 Gbit/s → 12 207 031 B).
        assert_eq!(
            tsq_limit_bytes(2880, 100_000_000_000, false, 4 << 20, 0),
            4 << 20
        );
        assert_eq!(
            tsq_limit_bytes(2880, 100_000_000_000, true, 4 << 20, 0),
            12_207_031
        );
        // No rate yet (no SRTT): unlimited rate, so the cap.
        assert_eq!(tsq_limit_bytes(2880, 0, false, 1 << 20, 0), 1 << 20);
    }

    #[test]
    fn pacing_rate_follows_tcp_update_pacing_rate() {
        let inf = INFINITE_SSTHRESH;
        // Slow start, 200 %: 2 · 10 · 1448 B / 10 ms = 2 896 000 B/s.
        assert_eq!(
            linux_pacing_rate_bps(1448, 10, 0, inf, 10_000_000),
            2_896_000 * 8
        );
        // cwnd ≥ ssthresh/2: 120 %: 1.2 · 20 · 1448 / 10 ms = 3 475 200 B/s.
        assert_eq!(
            linux_pacing_rate_bps(1448, 20, 0, 30, 10_000_000),
            3_475_200 * 8
        );
        // max(cwnd, packets_out); srtt in µs << 3 as the kernel keeps it (truncation).
        assert_eq!(
            linux_pacing_rate_bps(1448, 10, 40, inf, 10_000_000),
            linux_pacing_rate_bps(1448, 40, 0, inf, 10_000_000)
        );
        let us8 = 1_234_567u64 * 8 / 1000;
        assert_eq!(
            linux_pacing_rate_bps(1000, 7, 0, inf, 1_234_567),
            1000 * 80_000 * 200 * 7 / us8 * 8
        );
        // No SRTT: the kernel does not divide; sojourn reports 0 = unlimited.
        assert_eq!(linux_pacing_rate_bps(1448, 10, 0, inf, 0), 0);
    }

    #[test]
    fn tsq_throttles_until_a_completion_releases_the_socket() {
        let mut h = Harness::new();
        let mut s = sender(TcpConfig { tsq: true, ..cfg() }, &mut h);
        // No SRTT yet: the limit is tcp_limit_output_bytes, the whole IW goes out.
        let iw = h.take();
        assert_eq!(iw.len(), 10);
        assert_eq!(s.bytes_below, 10 * 2280);
        // An ACK with a 100 ms RTT sample: pacing rate 2 · 11 · 1448 B / 100 ms ≈ 318 kB/s,
        // limit = max(2 · 2280, 311) = 4560 B (truesize 1448 + 832, `ss -m` on Linux 6.18), far below the 9 packets still below TCP.
        s.on_packet(&ack(1 + MSS, false, &[]), &mut h.io(Time(100_000_000)));
        assert!(s.cs.cwnd > 10);
        assert!(h.take().is_empty(), "throttled by TSQ, not by cwnd");
        // Completions of 8 packets: sk_wmem_alloc = 2 · 2280 + 1 (its bias) > 4560 still
        // throttled; the 9th brings it to 2281 ≤ limit: exactly one more packet may go.
        let t = Time(100_100_000);
        for p in &iw[..8] {
            s.on_tx_complete(p, &mut h.io(t));
        }
        assert!(h.take().is_empty());
        s.on_tx_complete(&iw[8], &mut h.io(t));
        assert_eq!(
            h.take().len(),
            1,
            "2280 + 1 ≤ limit: one more, then throttled"
        );
        assert_eq!(s.bytes_below, 2 * 2280);
        // Without TSQ the same ACK releases the whole cwnd at once.
        let mut h2 = Harness::new();
        let mut s2 = sender(cfg(), &mut h2);
        h2.take();
        s2.on_packet(&ack(1 + MSS, false, &[]), &mut h2.io(Time(100_000_000)));
        assert!(h2.take().len() >= 2);
    }

    #[test]
    fn a_host_drop_releases_the_socket_from_a_timer() {
        let mut h = Harness::new();
        let mut s = sender(TcpConfig { tsq: true, ..cfg() }, &mut h);
        let iw = h.take();
        s.on_packet(&ack(1 + MSS, false, &[]), &mut h.io(Time(100_000_000)));
        h.take();
        let t = Time(100_100_000);
        for p in &iw[..8] {
            s.on_tx_complete(p, &mut h.io(t));
        }
        // The host qdisc drops the 9th: credit returns, but nothing is sent from inside
        // the engine's enqueue; a timer at `now` transmits instead.
        s.on_host_drop(&iw[8], &mut h.io(t));
        assert!(h.take().is_empty());
        assert_eq!(s.deadline(), Some(t));
        s.on_timer(&mut h.io(t));
        assert!(!h.take().is_empty(), "released after the drop");
    }
}

/// Laws pinned by mutation testing (docs/testing.md), in their own file.
#[cfg(test)]
#[path = "sender_laws.rs"]
mod laws;

#[cfg(test)]
#[path = "sender_quiet_ack.rs"]
mod quiet_ack;
