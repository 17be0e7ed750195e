//! The TCP receiver: cumulative ACKs with SACK blocks (RFC 2018) and D-SACK (RFC 2883),
//! an out-of-order buffer, Linux-like delayed ACKs and the receive window.
//!
//! ACK policy (Linux `__tcp_ack_snd_check`, `tcp_event_data_recv`):
//! - quick-ACK mode for the first 16 data segments (`TCP_MAX_QUICKACKS`, bounded by
//!   rwnd / 2·MSS) and again after an idle period longer than the RTO estimate. Linux
//!   sets this budget when the *first data segment* arrives (`tcp_event_data_recv`:
//!   `icsk_ack.ato == 0` → `tcp_incr_quickack`), and only ACKs that acknowledge new data
//!   spend it (`tcp_dec_quickack_mode` counts an ACK only while one is scheduled): the
//!   SYN-ACK, sent by the request socket before the connection exists, spends nothing;
//! - otherwise ACK when more than one full-sized segment is unacknowledged (every
//!   second segment) — but only once the application has read, which it cannot do in
//!   the middle of a softirq batch: Linux sends that ACK only if the window's right edge
//!   advances, else `tcp_cleanup_rbuf` sends it when the application reads. Segments
//!   delivered at the same instant (a GSO buffer released by a shaper, or any burst) are
//!   one batch here, acknowledged together [`BATCH_END`] after it — one ACK per buffer,
//!   as measured on Linux 6.18 (bpftrace `tcp_probe`: 23.4 or 45 segments per ACK for
//!   22- or 45-segment buffers on a veth);
//! - immediately on out-of-order data, on a segment that fills a hole, on duplicates and
//!   on the first CE mark (quick-ACK 2, `tcp_ecn_check_ce`);
//! - else a delayed-ACK timer of `delack_min` (40 ms, `TCP_DELACK_MIN`; Linux's
//!   adaptive `ato` is not modelled).
//!
//! With Accurate ECN negotiated (`ecn = "accecn"` at both ends, [`super::accecn`]) the
//! receiver counts CE packets and ECN bytes, writes ACE and the AccECN option on every
//! ACK, and ACKs at once on a change of CE state and after 6 unreported marks, instead of
//! RFC 3168's ECE-until-CWR or DCTCP's echo.
//!
//! The receiving application reads every in-order byte immediately, so the advertised
//! window is `rwnd` minus the out-of-order bytes held — unless the experiment gives it a
//! wake-up latency (`reader_wakeup`, [`Reader`]): then the every-second-segment ACK,
//! which Linux sends when the application reads, waits for the reader to wake. The bytes
//! it has not read yet do not shrink the window here (with a receive buffer of megabytes,
//! a few milliseconds of data do not limit it).

use super::accecn::AccEcnReceiver;
use super::{IntervalDist, ReaderPause, TcpConfig};
use crate::endpoint::{packet_tag, Endpoint, Io, Note};
use sojourn_core::packet::{tcp_flags, FlowKey, SackBlock, TransportHeader};
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, Packet, Time};

/// A receiving application that is not running when data arrives: woken by the data,
/// it reads `wakeup` later (one draw per wake-up; `None`: at once), and everything that
/// arrives before then is read at that time. With `pause`, it is now and then not
/// scheduled at all: a read that falls inside a pause happens when the pause ends.
#[derive(Clone, Debug)]
pub struct Reader {
    wakeup: Option<IntervalDist>,
    pause: Option<ReaderPause>,
    rng: Rng,
    /// The pending read, if the reader has been woken and has not run yet.
    read_at: Option<Time>,
    /// The next pause `[start, end)` (drawn when first needed, then one after another).
    next_pause: Option<(Time, Time)>,
}

impl Reader {
    pub fn new(wakeup: Option<IntervalDist>, pause: Option<ReaderPause>, rng: Rng) -> Reader {
        Reader {
            wakeup,
            pause,
            rng,
            read_at: None,
            next_pause: None,
        }
    }

    /// When data that arrives at `now` is read: at the pending read, or after a new
    /// wake-up (plus the end of the delivery batch, as without a latency), moved to the
    /// end of a pause that covers it.
    fn read_time(&mut self, now: Time) -> Time {
        match self.read_at {
            Some(t) if t >= now => t,
            _ => {
                let mut t = now + BATCH_END;
                if let Some(w) = &self.wakeup {
                    t += w.draw(&mut self.rng);
                }
                if let Some(p) = &self.pause {
                    // Pauses are drawn after the wake-up, so that a file without pauses
                    // draws exactly what it drew before `reader_pause` existed.
                    let (mut start, mut end) = match self.next_pause {
                        Some(se) => se,
                        None => {
                            let s = Time::ZERO + p.every.draw(&mut self.rng);
                            (s, s + p.length.draw(&mut self.rng))
                        }
                    };
                    while end <= t {
                        start = end + p.every.draw(&mut self.rng);
                        end = start + p.length.draw(&mut self.rng);
                    }
                    if start <= t {
                        t = end;
                    }
                    self.next_pause = Some((start, end));
                }
                self.read_at = Some(t);
                t
            }
        }
    }
}

const MAX_QUICKACKS: u32 = 16;
/// The every-second-segment ACK waits until the end of the instant's delivery batch
/// (1 ns later: after every segment that arrives at the same time), when the application
/// reads the batch.
pub const BATCH_END: Duration = Duration(1);
/// How long a finished receiver keeps answering retransmissions (Linux TIME_WAIT/LAST_ACK
/// stand-in): restarted by every packet.
const LINGER: Duration = Duration(60_000_000_000);

pub struct TcpReceiver {
    pub flow: u32,
    /// Key of the ACK direction (receiver → sender).
    pub key: FlowKey,
    pub hash: u32,
    pub peer: u32,
    /// DSCP of the ACKs (the connection's marking, TcpConfig::dscp).
    dscp: u8,
    sack: bool,
    delayed_ack: bool,
    delack: Duration,
    rwnd: u64,
    mss: u32,
    header_bytes: u32,
    /// `truesize_for(header_bytes)`: the truesize of an ACK without options beyond the
    /// timestamps, the usual one (computed once, not per ACK).
    ack_truesize: u32,
    syn_frame_bytes: u32,
    ecn: bool,
    /// This end offers Accurate ECN (`ecn = "accecn"`).
    accecn_offered: bool,
    timestamps: bool,
    /// Accurate ECN feedback, once negotiated (boxed: off the per-flow state otherwise).
    pub accecn: Option<Box<AccEcnReceiver>>,
    established: bool,
    synack_sent: bool,
    /// Next expected sequence number.
    pub rcv_nxt: u64,
    /// `rcv_nxt` when the last ACK was sent (Linux `rcv_wup`).
    rcv_wup: u64,
    /// Out-of-order ranges, sorted and disjoint.
    ooo: Vec<(u64, u64)>,
    /// SACK blocks in most-recently-changed-first order (RFC 2018 §4).
    recent: Vec<SackBlock>,
    dsack: Option<SackBlock>,
    ts_recent: Time,
    /// Quick-ACKs left (Linux `icsk_ack.quick`).
    quick: u32,
    /// `min(TCP_MAX_QUICKACKS, rwnd / 2·MSS)` (`tcp_incr_quickack`).
    quick_budget: u32,
    /// A data segment has arrived (Linux: `icsk_ack.ato != 0`).
    data_seen: bool,
    delack_at: Option<Time>,
    /// The reader's wake-up latency; `None`: it reads at once.
    reader: Option<Box<Reader>>,
    last_rcv: Time,
    idle_rto: Duration,
    /// ECE on every ACK until a CWR arrives (RFC 3168 §6.1.3); with `dctcp_echo`, the CE
    /// state of the latest data segment.
    ece: bool,
    /// DCTCP's receiver (RFC 8257 §3.2, Linux `dctcp_ece_ack_update`): ECE echoes each
    /// segment's CE state; a change of state sends the delayed ACK pending (with the old
    /// state) and then an immediate ACK.
    dctcp_echo: bool,
    /// Planned transfer size (0 = unbounded).
    pub size: u64,
    /// `delivered` at which the flow completes: `size`, or `u64::MAX` for an unbounded
    /// flow and once it completed (one comparison per segment instead of three).
    complete_at: u64,
    fin_at: Option<u64>,
    fin_received: bool,
    linger_at: Option<Time>,
    /// [`Self::quiet_state`], kept up to date: the per-connection half of
    /// [`Self::is_plain_next_segment`] in one flag instead of eight tests per segment
    /// (issue 19). Only the path for other packets and the timer change its inputs; both
    /// refresh it.
    quiet: bool,
    /// In-order payload bytes handed to the application.
    pub delivered: u64,
    /// Duplicate segments received.
    pub dup_segments: u64,
    pub acks_sent: u64,
    /// Tests: take the general path for every packet and ACK (the twin of the fast ones).
    #[cfg(test)]
    pub(crate) general_only: bool,
    /// Tests: ACKs sent by [`Self::send_quiet_ack`].
    #[cfg(test)]
    pub(crate) quiet_acks: u64,
}

impl TcpReceiver {
    /// The receiving application wakes `cfg.reader_wakeup` after data arrives and pauses
    /// as `cfg.reader_pause` says (drawn from `rng`); without either, it reads at once.
    pub fn with_reader(mut self, cfg: &TcpConfig, rng: Rng) -> TcpReceiver {
        if cfg.reader_wakeup.is_some() || cfg.reader_pause.is_some() {
            self.reader = Some(Box::new(Reader::new(
                cfg.reader_wakeup.clone(),
                cfg.reader_pause.as_deref().cloned(),
                rng,
            )));
        }
        self
    }

    /// Leave a `Completed` note once the application has `bytes` in total (an
    /// application's self probe on an unbounded transfer: apps.rs).
    pub(crate) fn notify_when_delivered(&mut self, bytes: u64) {
        self.complete_at = bytes;
    }

    pub fn new(flow: u32, key: FlowKey, hash: u32, cfg: &TcpConfig, size: u64) -> TcpReceiver {
        TcpReceiver {
            dscp: cfg.dscp,
            flow,
            key,
            hash,
            peer: 0,
            sack: cfg.sack,
            delayed_ack: cfg.delayed_ack,
            delack: cfg.delack_min,
            rwnd: cfg.rwnd_bytes,
            mss: cfg.mss,
            header_bytes: cfg.header_bytes(),
            ack_truesize: sojourn_core::packet::truesize_for(cfg.header_bytes()),
            syn_frame_bytes: cfg.syn_frame_bytes(),
            ecn: cfg.ecn_enabled(),
            accecn_offered: cfg.accecn,
            timestamps: cfg.timestamps,
            // Without a handshake both ends are assumed to have negotiated what they offer.
            accecn: (cfg.accecn && !cfg.handshake).then(Box::default),
            dctcp_echo: cfg.cc.needs_ecn(),
            established: !cfg.handshake,
            synack_sent: false,
            rcv_nxt: 1,
            rcv_wup: 1,
            ooo: Vec::new(),
            recent: Vec::with_capacity(4),
            dsack: None,
            ts_recent: Time::ZERO,
            quick: 0,
            quick_budget: MAX_QUICKACKS.min((cfg.rwnd_bytes / (2 * cfg.mss as u64)).max(1) as u32),
            data_seen: false,
            delack_at: None,
            reader: None,
            last_rcv: Time::ZERO,
            idle_rto: cfg.initial_rto,
            ece: false,
            size,
            complete_at: if size > 0 { size } else { u64::MAX },
            fin_at: None,
            fin_received: false,
            linger_at: None,
            quiet: false,
            delivered: 0,
            dup_segments: 0,
            acks_sent: 0,
            #[cfg(test)]
            general_only: false,
            #[cfg(test)]
            quiet_acks: 0,
        }
    }

    /// Whether the fast paths may be taken (always, but in the tests' general twin).
    #[inline(always)]
    fn fast_paths(&self) -> bool {
        #[cfg(test)]
        return !self.general_only;
        #[cfg(not(test))]
        true
    }

    fn ooo_bytes(&self) -> u64 {
        self.ooo.iter().map(|(a, b)| b - a).sum()
    }

    fn window(&self) -> u32 {
        self.rwnd
            .saturating_sub(self.ooo_bytes())
            .min(u32::MAX as u64) as u32
    }

    fn send_ack(&mut self, io: &mut Io, syn: bool) {
        if !syn && self.quiet && self.dsack.is_none() && self.fast_paths() {
            self.send_quiet_ack(io);
        } else {
            self.send_ack_for(io, syn, sojourn_core::Ecn::NotEct);
        }
    }

    /// [`Self::send_ack_for`] of a data ACK in the quiet state with no D-SACK block to
    /// report: no FIN (the ACK is `rcv_nxt`), nothing out of order (the whole `rwnd` is
    /// advertised and no SACK block goes out: RFC 2018 §4 reports only what is held), no
    /// AccECN option, so the frame is the bare header. What varies per ACK is written into
    /// the packet directly (issue 19: 662 k of seed 000's 663 k ACKs per 2 s are these;
    /// the twin test in `sender_quiet_ack.rs` runs both).
    #[inline(always)]
    fn send_quiet_ack(&mut self, io: &mut Io) {
        io.send(Packet {
            tag: packet_tag(self.flow, self.peer),
            key: self.key,
            hash: self.hash,
            len_bytes: self.header_bytes,
            truesize_bytes: self.ack_truesize,
            dscp: self.dscp,
            hdr: TransportHeader {
                seq: 1,
                ack: self.rcv_nxt,
                window: self.rwnd.min(u32::MAX as u64) as u32,
                flags: tcp_flags::ACK | (tcp_flags::ECE * self.ece as u8),
                ts_val: io.now,
                ts_ecr: self.ts_recent,
                ..Default::default()
            },
            ..Default::default()
        });
        self.acks_sent += 1;
        #[cfg(test)]
        {
            self.quiet_acks += 1;
        }
        self.rcv_wup = self.rcv_nxt;
        self.delack_at = None;
        // tcp_dec_quickack_mode.
        self.quick = self.quick.saturating_sub(1);
    }

    /// Sends an ACK; `syn_ecn` is the IP-ECN field of the SYN a SYN-ACK answers.
    fn send_ack_for(&mut self, io: &mut Io, syn: bool, syn_ecn: sojourn_core::Ecn) {
        let mut h = TransportHeader {
            seq: 1,
            ack: self.rcv_nxt + self.fin_received as u64,
            window: self.window(),
            flags: tcp_flags::ACK,
            ts_val: io.now,
            ts_ecr: self.ts_recent,
            ..Default::default()
        };
        let mut len = self.header_bytes;
        if syn {
            h.seq = 0;
            h.flags |= tcp_flags::SYN;
            if self.accecn.is_some() {
                // AccECN SYN-ACK: the SYN's IP-ECN field (RFC 9768 §3.1.1, Table 3).
                h.set_ace(sojourn_core::accecn::synack_ace(syn_ecn));
            } else if self.ecn {
                h.flags |= tcp_flags::ECE; // ECN-setup SYN-ACK (RFC 3168 §6.1.1)
            }
            len = self.syn_frame_bytes;
        } else if self.ece {
            h.flags |= tcp_flags::ECE;
        }
        if self.sack && !syn {
            let mut n = 0;
            if let Some(d) = self.dsack.take() {
                h.set_sack(0, d);
                n = 1;
            }
            for b in &self.recent {
                if n == 3 {
                    break;
                }
                h.set_sack(n, *b);
                n += 1;
            }
            h.sack_count = n as u8;
            if n > 0 {
                // NOP, NOP, kind, length, 8 bytes per block.
                len += 4 + 8 * n as u32;
            }
        }
        if !syn {
            if let Some(a) = &mut self.accecn {
                len += a.write_ack(&mut h, self.timestamps);
            }
        }
        let p = Packet {
            tag: packet_tag(self.flow, self.peer),
            key: self.key,
            hash: self.hash,
            dscp: self.dscp,
            len_bytes: len,
            truesize_bytes: if len == self.header_bytes {
                self.ack_truesize
            } else {
                sojourn_core::packet::truesize_for(len)
            },
            hdr: h,
            ..Default::default()
        };
        io.send(p);
        self.acks_sent += 1;
        self.rcv_wup = self.rcv_nxt;
        self.delack_at = None;
        if !syn {
            // tcp_dec_quickack_mode: the SYN-ACK is not an ACK of data.
            self.quick = self.quick.saturating_sub(1);
        }
    }

    /// Adds `[s, e)` to the out-of-order set; returns false if it was all there already.
    fn add_ooo(&mut self, s: u64, e: u64) -> bool {
        let i = self.ooo.partition_point(|r| r.1 < s);
        let mut j = i;
        let mut ns = s;
        let mut ne = e;
        let mut covered = false;
        while j < self.ooo.len() && self.ooo[j].0 <= e {
            if self.ooo[j].0 <= s && self.ooo[j].1 >= e {
                covered = true;
            }
            ns = ns.min(self.ooo[j].0);
            ne = ne.max(self.ooo[j].1);
            j += 1;
        }
        self.ooo.splice(i..j, [(ns, ne)]);
        self.touch_sack(SackBlock { start: ns, end: ne });
        !covered
    }

    /// RFC 2018 §4: the block holding the newest segment goes first.
    fn touch_sack(&mut self, b: SackBlock) {
        self.recent
            .retain(|x| !(x.start >= b.start && x.end <= b.end) && x.end > self.rcv_nxt);
        self.recent.insert(0, b);
        self.recent.truncate(4);
    }

    fn on_data(&mut self, pkt: &Packet, io: &mut Io) -> bool {
        let h = &pkt.hdr;
        let now = io.now;
        let s = h.seq;
        let e = s + h.payload_bytes as u64;
        let mut ack_now = false;
        if h.flags & tcp_flags::FIN != 0 {
            self.fin_at = Some(e);
        }
        if let Some(a) = &mut self.accecn {
            ack_now |= a.on_data(pkt.ecn, h.payload_bytes, pkt.wire_packets());
        } else if self.dctcp_echo && self.ecn {
            let ce = pkt.ecn == sojourn_core::Ecn::Ce;
            if ce != self.ece {
                if self.delack_at.is_some() {
                    // The ACK owed for the segments before this one, with their CE state.
                    self.send_ack(io, false);
                }
                ack_now = true;
            }
            self.ece = ce;
        } else if h.flags & tcp_flags::CWR != 0 {
            self.ece = false;
        }
        if pkt.ecn == sojourn_core::Ecn::Ce && self.ecn && !self.dctcp_echo && self.accecn.is_none()
        {
            if !self.ece {
                self.quick = self.quick.max(2);
            }
            self.ece = true;
        }
        // Linux tcp_event_data_recv: the first data segment starts the delayed-ACK engine
        // in quick-ACK mode; idle longer than the RTO -> quick-ACK mode again.
        if !self.data_seen {
            self.data_seen = true;
            self.quick = self.quick.max(self.quick_budget);
        } else if now.saturating_since(self.last_rcv) > self.idle_rto {
            self.quick = self.quick.max(self.quick_budget);
        }
        self.last_rcv = now;
        // RFC 7323 §4.3: remember TSval of the segment covering the last ACK point.
        if s <= self.rcv_wup && h.ts_val > self.ts_recent {
            self.ts_recent = h.ts_val;
        }
        let fin_only = h.payload_bytes == 0;
        if e <= self.rcv_nxt
            && !(fin_only && self.fin_at == Some(self.rcv_nxt) && !self.fin_received)
        {
            // Entirely old: a duplicate (D-SACK it, ACK at once).
            self.dup_segments += 1;
            if h.payload_bytes > 0 {
                self.dsack = Some(SackBlock { start: s, end: e });
            }
            ack_now = true;
        } else if s <= self.rcv_nxt {
            let had_ooo = !self.ooo.is_empty();
            let new = e - self.rcv_nxt;
            self.rcv_nxt = e;
            // Pull in buffered data that is now in order.
            while let Some(&(a, b)) = self.ooo.first() {
                if a > self.rcv_nxt {
                    break;
                }
                self.rcv_nxt = self.rcv_nxt.max(b);
                self.ooo.remove(0);
            }
            let rcv = self.rcv_nxt;
            self.recent.retain(|x| x.end > rcv);
            let gained = new + (self.rcv_nxt - e);
            self.delivered += gained;
            io.flows.get_mut(self.flow).delivered_bytes += gained;
            if had_ooo {
                ack_now = true; // a hole was (partly) filled
            }
        } else if h.payload_bytes == 0 {
            ack_now = true; // a bare FIN beyond a hole
        } else {
            if !self.add_ooo(s, e) {
                self.dup_segments += 1;
                self.dsack = Some(SackBlock { start: s, end: e });
            }
            ack_now = true;
        }
        if self.fin_at == Some(self.rcv_nxt) && !self.fin_received {
            self.fin_received = true;
            ack_now = true;
        }
        if self.delivered >= self.complete_at {
            self.complete_at = u64::MAX;
            io.note(Note::Completed { flow: self.flow });
        }
        ack_now
    }
}

impl TcpReceiver {
    /// The connection is in the state in which the next in-order segment needs nothing but
    /// being taken in: established, past its first data segment, nothing out of order held
    /// or reported, no FIN seen, not lingering, no per-segment ECN feedback (AccECN,
    /// DCTCP's echo).
    fn quiet_state(&self) -> bool {
        self.established
            && self.data_seen
            && self.ooo.is_empty()
            && self.recent.is_empty()
            && self.fin_at.is_none()
            && self.linger_at.is_none()
            && self.accecn.is_none()
            && !(self.dctcp_echo && self.ecn)
    }

    /// The cached [`Self::quiet_state`] is the state's (tests).
    #[cfg(test)]
    pub(crate) fn quiet_flag_is_exact(&self) -> bool {
        self.quiet == self.quiet_state()
    }

    /// Tests: whether `on_packet` would take `pkt` by the plain-segment path.
    #[cfg(test)]
    pub(crate) fn takes_plain(&self, pkt: &Packet, now: Time) -> bool {
        self.fast_paths() && self.is_plain_next_segment(pkt, now)
    }

    /// Tests: the state packet and timer handling may change, as text.
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> String {
        format!(
            "est {} synack {} nxt {} wup {} ooo {:?} recent {:?} dsack {:?} ts {:?} quick {} \
             seen {} delack {:?} last {:?} idle {:?} ece {} accecn {:?} complete_at {} \
             fin {:?} {} linger {:?} quiet {} delivered {} dup {} acks {} deadline {:?}",
            self.established,
            self.synack_sent,
            self.rcv_nxt,
            self.rcv_wup,
            self.ooo,
            self.recent,
            self.dsack,
            self.ts_recent,
            self.quick,
            self.data_seen,
            self.delack_at,
            self.last_rcv,
            self.idle_rto,
            self.ece,
            self.accecn,
            self.complete_at,
            self.fin_at,
            self.fin_received,
            self.linger_at,
            self.quiet,
            self.delivered,
            self.dup_segments,
            self.acks_sent,
            self.deadline(),
        )
    }

    /// Whether `pkt` is the next in-order data segment of an established connection that
    /// asks for nothing but being taken in: no SYN, FIN or CWR, not CE-marked, nothing out
    /// of order held or reported, no per-segment ECN feedback (AccECN, DCTCP's echo), not
    /// after an idle period, not lingering. Most segments are (issue 19: 1.3 M per 2 s of
    /// seed 000's 10 Gb/s run); for them [`Self::on_data`] does exactly what
    /// [`Self::take_next_segment`] does.
    #[inline(always)]
    fn is_plain_next_segment(&self, pkt: &Packet, now: Time) -> bool {
        let h = &pkt.hdr;
        h.seq == self.rcv_nxt
            && h.payload_bytes > 0
            && h.flags & (tcp_flags::SYN | tcp_flags::FIN | tcp_flags::CWR) == 0
            && pkt.ecn != sojourn_core::Ecn::Ce
            && self.quiet
            && now.saturating_since(self.last_rcv) <= self.idle_rto
    }

    /// The receive state's part of taking a segment [`Self::is_plain_next_segment`]
    /// accepted; returns its payload bytes (the caller credits the flow record).
    #[inline(always)]
    fn absorb_next_segment(&mut self, h: &TransportHeader, now: Time) -> u64 {
        self.last_rcv = now;
        // RFC 7323 §4.3: remember TSval of the segment covering the last ACK point.
        if h.seq <= self.rcv_wup && h.ts_val > self.ts_recent {
            self.ts_recent = h.ts_val;
        }
        let gained = h.payload_bytes as u64;
        self.rcv_nxt += gained;
        self.delivered += gained;
        gained
    }

    /// [`Self::on_data`] for a segment [`Self::is_plain_next_segment`] accepted: it goes
    /// to the application at once and asks for no immediate ACK.
    #[inline(always)]
    fn take_next_segment(&mut self, pkt: &Packet, io: &mut Io) {
        let gained = self.absorb_next_segment(&pkt.hdr, io.now);
        io.flows.get_mut(self.flow).delivered_bytes += gained;
        if self.delivered >= self.complete_at {
            self.complete_at = u64::MAX;
            io.note(Note::Completed { flow: self.flow });
        }
    }

    /// Every packet but a plain next segment (outside the tests' twin): the handshake,
    /// duplicates, out-of-order data, FIN, ECN signals. `None` when it carries no data
    /// (nothing more to decide), else whether it must be acknowledged at once.
    #[inline]
    fn on_other_packet(&mut self, pkt: &Packet, io: &mut Io) -> Option<bool> {
        let h = &pkt.hdr;
        if h.flags & tcp_flags::SYN != 0 {
            // (Re)transmitted SYN: answer with a SYN-ACK. An AccECN SYN sets AE, CWR and
            // ECE (RFC 9768 §3.1.1); a receiver that offers AccECN grants it.
            self.ts_recent = h.ts_val;
            self.synack_sent = true;
            if self.accecn_offered && h.ace() == 0b111 && self.accecn.is_none() {
                self.accecn = Some(Box::default());
            }
            self.send_ack_for(io, true, pkt.ecn);
            return None;
        }
        if !self.established {
            if h.flags & tcp_flags::ACK == 0 {
                return None;
            }
            self.established = true;
            // The passive side's RTO estimate from the SYN-ACK round trip (RFC 6298):
            // SRTT + max(4·RTTVAR, rto_min) with RTTVAR = RTT/2 on the first sample.
            let rtt = io.now.saturating_since(h.ts_ecr);
            if h.ts_ecr > Time::ZERO {
                self.idle_rto = Duration(rtt.0 + (2 * rtt.0).max(Duration::from_ms(200).0));
            }
        }
        if self.linger_at.is_some() {
            self.linger_at = Some(io.now + LINGER);
        }
        if h.payload_bytes == 0 && h.flags & tcp_flags::FIN == 0 {
            return None; // pure ACK (third step of the handshake)
        }
        Some(self.on_data(pkt, io))
    }
}

impl TcpReceiver {
    /// More than one full segment is unacknowledged: ACK at the end of the delivery batch
    /// (an earlier deadline stays).
    #[inline(always)]
    fn ack_at_batch_end(&mut self, now: Time) {
        let at = match &mut self.reader {
            None => now + BATCH_END,
            Some(r) => r.read_time(now),
        };
        if self.delack_at.is_none_or(|d| d > at) {
            self.delack_at = Some(at);
        }
    }

    /// `on_packet` for every packet but the usual plain next segment (for that one too in
    /// the tests' twin: [`Self::on_data`] takes it as [`Self::take_next_segment`] does).
    // Out of line: the plain path's frame stays small.
    #[inline(never)]
    fn on_packet_general(&mut self, pkt: &Packet, io: &mut Io) {
        let urgent = if self.fast_paths() && self.is_plain_next_segment(pkt, io.now) {
            // A plain segment with an ACK due now (quick-ACK mode, no delayed ACKs) or
            // that completes the flow: nothing of the quiet state changes.
            self.take_next_segment(pkt, io);
            false
        } else {
            // The quiet ACK is gated on the flag: off while the state may change under it.
            self.quiet = false;
            let urgent = self.on_other_packet(pkt, io);
            // The linger timer below starts only once the FIN arrived, which leaves the
            // quiet state for good: refreshing here covers it too.
            self.quiet = self.quiet_state();
            let Some(urgent) = urgent else {
                return;
            };
            urgent
        };
        let full = self.rcv_nxt - self.rcv_wup > self.mss as u64;
        if urgent || self.quick > 0 || !self.delayed_ack {
            self.send_ack(io, false);
        } else if full {
            self.ack_at_batch_end(io.now);
        } else if self.rcv_nxt > self.rcv_wup && self.delack_at.is_none() {
            self.delack_at = Some(io.now + self.delack);
        }
        if self.fin_received && self.linger_at.is_none() {
            self.linger_at = Some(io.now + LINGER);
        }
    }
}

impl Endpoint for TcpReceiver {
    fn start(&mut self, _io: &mut Io) {}

    fn on_packet(&mut self, pkt: &Packet, io: &mut Io) {
        // The usual plain segment: no ACK now (past quick-ACK mode, delayed ACKs on) and
        // not the flow's last byte. Nothing here calls out but the flow record's look-up,
        // last, so the path needs no saved registers (issue 19: 1.3 M segments per 2 s of
        // seed 000); the rest of the plain segments are the out-of-line path's.
        if self.fast_paths()
            && self.is_plain_next_segment(pkt, io.now)
            && self.quick == 0
            && self.delayed_ack
            && self.delivered + (pkt.hdr.payload_bytes as u64) < self.complete_at
        {
            let gained = self.absorb_next_segment(&pkt.hdr, io.now);
            // What `on_packet_general` decides for it: not urgent, `rcv_nxt > rcv_wup`
            // (the segment carried payload), no FIN seen (the quiet state) so no linger.
            if self.rcv_nxt - self.rcv_wup > self.mss as u64 {
                self.ack_at_batch_end(io.now);
            } else if self.delack_at.is_none() {
                self.delack_at = Some(io.now + self.delack);
            }
            io.flows.get_mut(self.flow).delivered_bytes += gained;
            return;
        }
        self.on_packet_general(pkt, io);
    }

    fn on_timer(&mut self, io: &mut Io) {
        if self.delack_at.is_some_and(|t| t <= io.now) {
            self.send_ack(io, false);
        }
        if self.linger_at.is_some_and(|t| t <= io.now) {
            // No quiet-flag refresh: lingering follows the FIN, which ended the quiet
            // state for good (`fin_at` stays set).
            self.linger_at = None;
            io.note(Note::Closed);
        }
    }

    fn deadline(&self) -> Option<Time> {
        // The engine asks after every call; lingering (after the FIN) is the rare case.
        match self.linger_at {
            None => self.delack_at,
            Some(b) => Some(self.delack_at.map_or(b, |a| a.min(b))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tcp::test_io::Harness as H;

    const MSS: u64 = 1448;

    fn seg(i: u64) -> Packet {
        let mut p = Packet::default();
        p.hdr.seq = 1 + i * MSS;
        p.hdr.payload_bytes = MSS as u32;
        p.hdr.flags = tcp_flags::ACK;
        p
    }

    fn receiver(size: u64) -> TcpReceiver {
        let cfg = TcpConfig {
            handshake: false,
            ..TcpConfig::default()
        };
        TcpReceiver::new(0, FlowKey::default(), 0, &cfg, size)
    }

    #[test]
    fn dctcp_receiver_echoes_each_ce_state_change_at_once() {
        // RFC 8257 §3.2 / Linux dctcp_ece_ack_update: ECE mirrors the CE state of the
        // latest segment; on a change the pending delayed ACK goes out first with the old
        // state, then an ACK for the new segment with the new state.
        let mut h = H::new();
        let cfg = TcpConfig {
            handshake: false,
            cc: sojourn_experiment::transport::CcKind::Dctcp,
            ..TcpConfig::default()
        };
        let mut r = TcpReceiver::new(0, FlowKey::default(), 0, &cfg, 0);
        let t = Time(1_000_000);
        for i in 0..16 {
            r.on_packet(&seg(i), &mut h.io(t));
        }
        h.out.clear();
        let ce = |i: u64| {
            let mut p = seg(i);
            p.ecn = sojourn_core::Ecn::Ce;
            p
        };
        let ece = |p: &Packet| p.hdr.flags & tcp_flags::ECE != 0;
        let t1 = t + Duration(100_000);
        r.on_packet(&seg(16), &mut h.io(t1)); // delayed (one segment)
        assert!(h.out.is_empty());
        r.on_packet(&ce(17), &mut h.io(t1));
        assert_eq!(h.out.len(), 2);
        assert_eq!((h.out[0].hdr.ack, ece(&h.out[0])), (1 + 17 * MSS, false));
        assert_eq!((h.out[1].hdr.ack, ece(&h.out[1])), (1 + 18 * MSS, true));
        h.out.clear();
        let t2 = t1 + Duration(100_000);
        r.on_packet(&ce(18), &mut h.io(t2)); // same state: delayed
        assert!(h.out.is_empty());
        r.on_packet(&seg(19), &mut h.io(t2)); // back to not-CE
        assert_eq!(h.out.len(), 2);
        assert_eq!((h.out[0].hdr.ack, ece(&h.out[0])), (1 + 19 * MSS, true));
        assert_eq!((h.out[1].hdr.ack, ece(&h.out[1])), (1 + 20 * MSS, false));
        // A CWR from the sender does not clear a CE state that is still current.
        h.out.clear();
        let mut x = ce(20);
        x.hdr.flags |= tcp_flags::CWR;
        r.on_packet(&x, &mut h.io(t2 + Duration(100_000)));
        let mut y = ce(21);
        y.hdr.flags |= tcp_flags::CWR;
        r.on_packet(&y, &mut h.io(t2 + Duration(100_000)));
        r.on_timer(&mut h.io(t2 + Duration(100_000) + BATCH_END));
        assert!(h.out.iter().all(ece), "{:?}", h.out.len());
        // (seg 21 alone is not a full window more: its ACK waits for the delack timer.)
        assert_eq!(h.out.last().unwrap().hdr.ack, 1 + 21 * MSS);
    }

    #[test]
    fn a_late_reader_holds_the_every_second_segment_ack_until_it_runs() {
        // A reader that wakes 1 ms after data arrives (`reader_wakeup = "1ms"`): past
        // quick-ACK mode, the ACK Linux sends when the application reads
        // (tcp_cleanup_rbuf) goes out 1 ms + the batch's end after the segments that
        // woke it; segments arriving before then are read, and acknowledged, with them.
        let mut h = H::new();
        let cfg = TcpConfig {
            handshake: false,
            reader_wakeup: Some(IntervalDist::Fixed(Duration::from_ms(1))),
            ..TcpConfig::default()
        };
        let mut r = TcpReceiver::new(0, FlowKey::default(), 0, &cfg, 0)
            .with_reader(&cfg, Rng::from_seed(1));
        let t = Time(1_000_000);
        for i in 0..16 {
            r.on_packet(&seg(i), &mut h.io(t));
        }
        assert_eq!(
            h.out.len(),
            16,
            "quick ACKs are the kernel's, not the reader's"
        );
        h.out.clear();
        let t1 = t + Duration::from_ms(5);
        r.on_packet(&seg(16), &mut h.io(t1));
        r.on_packet(&seg(17), &mut h.io(t1));
        assert_eq!(
            r.deadline(),
            Some(t1 + Duration(1_000_001)),
            "1 ms + 1 ns later"
        );
        // 0.4 ms later, two more: read with the first two, at the same time.
        let t2 = t1 + Duration(400_000);
        r.on_packet(&seg(18), &mut h.io(t2));
        r.on_packet(&seg(19), &mut h.io(t2));
        assert_eq!(r.deadline(), Some(t1 + Duration(1_000_001)));
        r.on_timer(&mut h.io(t1 + Duration(1_000_001)));
        assert_eq!(h.out.len(), 1);
        assert_eq!(h.out[0].hdr.ack, 1 + 20 * MSS);
        // The next data wakes it again: another 1 ms.
        let t3 = t1 + Duration::from_ms(3);
        r.on_packet(&seg(20), &mut h.io(t3));
        r.on_packet(&seg(21), &mut h.io(t3));
        assert_eq!(r.deadline(), Some(t3 + Duration(1_000_001)));
    }

    #[test]
    fn a_read_that_falls_in_a_reader_pause_waits_for_its_end() {
        // Pauses every 1 ms (fixed) of 0.5 ms: [1, 1.5), [2.5, 3), [4, 4.5) ... ms, worked
        // by hand; a prompt reader otherwise (1 ns after the delivery batch).
        let ms = |x: f64| Time((x * 1e6) as u64);
        let pause = ReaderPause {
            every: IntervalDist::Fixed(Duration::from_ms(1)),
            length: IntervalDist::Fixed(Duration(500_000)),
        };
        let mut r = Reader::new(None, Some(pause), Rng::from_seed(1));
        assert_eq!(r.read_time(ms(0.2)), ms(0.2) + Duration(1));
        assert_eq!(r.read_time(ms(1.2)), ms(1.5), "inside [1, 1.5)");
        assert_eq!(r.read_time(ms(1.6)), ms(1.6) + Duration(1));
        assert_eq!(r.read_time(ms(2.9)), ms(3.0), "inside [2.5, 3)");
        // Pauses pass while no data comes: the one at [10, 10.5) still holds this read.
        assert_eq!(r.read_time(ms(10.4)), ms(10.5));
        assert_eq!(r.read_time(ms(11.0)), ms(11.0) + Duration(1));
    }

    #[test]
    fn quickack_then_every_second_segment_then_delack_timer() {
        let mut h = H::new();
        let mut r = receiver(0);
        let t = Time(1_000_000);
        for i in 0..16 {
            r.on_packet(&seg(i), &mut h.io(t));
        }
        assert_eq!(h.out.len(), 16, "quick-ACK for the first 16 segments");
        h.out.clear();
        // Then one ACK per two full segments, each at the end of its delivery batch: 121 µs
        // apart (a 100-Mbit/s wire) every second segment is acknowledged on its own.
        let mut now = t;
        for i in 16..26 {
            now += Duration(121_000);
            r.on_timer(&mut h.io(now));
            r.on_packet(&seg(i), &mut h.io(now));
        }
        r.on_timer(&mut h.io(now + BATCH_END));
        assert_eq!(h.out.len(), 5, "then one ACK per two full segments");
        assert_eq!(h.out[4].hdr.ack, 1 + 26 * MSS);
        h.out.clear();
        // Ten segments in one batch (the same instant, e.g. a GSO buffer released by a
        // shaper): one ACK for all of them, after the batch.
        let batch = now + Duration::from_ms(1);
        for i in 26..36 {
            r.on_packet(&seg(i), &mut h.io(batch));
        }
        assert!(h.out.is_empty(), "not within the batch");
        assert_eq!(r.deadline(), Some(batch + BATCH_END));
        r.on_timer(&mut h.io(batch + BATCH_END));
        assert_eq!(h.out.len(), 1);
        assert_eq!(h.out[0].hdr.ack, 1 + 36 * MSS);
        h.out.clear();
        let t = batch + Duration::from_ms(1);
        r.on_packet(&seg(36), &mut h.io(t));
        assert!(h.out.is_empty());
        assert_eq!(
            r.deadline(),
            Some(t + Duration::from_ms(40)),
            "TCP_DELACK_MIN"
        );
        r.on_timer(&mut h.io(t + Duration::from_ms(40)));
        assert_eq!(h.out.len(), 1);
        assert_eq!(r.deadline(), None);
    }

    /// Segments in order after the quick-ACK phase (the receiver's common path): RFC 7323
    /// §4.3 — the ACK echoes the TSval of the segment that starts at the last ACK point
    /// (20 ms), not the later one's (21 ms); the application gets every byte, and the flow
    /// completes exactly when its last byte arrives.
    #[test]
    fn in_order_segments_echo_the_ack_point_timestamp_and_complete_once() {
        let mut h = H::new();
        let mut r = receiver(18 * MSS);
        let t = Time(1_000_000);
        for i in 0..16 {
            r.on_packet(&seg(i), &mut h.io(t));
        }
        h.out.clear();
        let with_ts = |i: u64, ms: u64| {
            let mut p = seg(i);
            p.hdr.ts_val = Time(ms * 1_000_000);
            p
        };
        let now = t + Duration(100_000);
        r.on_packet(&with_ts(16, 20), &mut h.io(now));
        assert!(h.notes.is_empty());
        r.on_packet(&with_ts(17, 21), &mut h.io(now + Duration(1_200)));
        assert_eq!(r.delivered, 18 * MSS);
        assert_eq!(h.notes, vec![Note::Completed { flow: 0 }]);
        r.on_timer(&mut h.io(now + Duration(1_200) + BATCH_END));
        assert_eq!(h.out.len(), 1, "one ACK for the two segments");
        assert_eq!(h.out[0].hdr.ack, 1 + 18 * MSS);
        assert_eq!(h.out[0].hdr.ts_ecr, Time(20_000_000));
        // A duplicate of the last segment after completion: no second completion.
        r.on_packet(&with_ts(17, 22), &mut h.io(now + Duration::from_ms(1)));
        assert_eq!(h.notes.len(), 1);
    }

    /// The every-second-segment ACK of a quiet connection (the quiet ACK), field by field:
    /// a bare 66-B frame (14 Ethernet + 20 IP + 20 TCP + 12 timestamps option, RFC 7323
    /// §3; truesize 832 B: 66 B + 64 B headroom in a 256-B slab, + 576 B of `sk_buff` and
    /// `skb_shared_info`, the model of `packet::truesize_for`), ACK = the
    /// next byte expected (RFC 9293 §3.4), the whole 100 000-B receive window (nothing held
    /// out of order), no SACK block (RFC 2018 §4: none to report), TSval = its send time
    /// and TSecr = the TSval of the segment at the ACK point (RFC 7323 §4.3); with classic
    /// ECN after a CE mark (here during the quick-ACK phase, which it does not extend: 11
    /// quick ACKs are left, more than its 2) it carries ECE (RFC 3168 §6.1.3).
    #[test]
    fn the_quiet_ack_is_a_bare_header_with_the_whole_window() {
        for ecn_echo in [false, true] {
            let mut h = H::new();
            let cfg = TcpConfig {
                handshake: false,
                rwnd_bytes: 100_000,
                ecn: ecn_echo,
                cc: sojourn_experiment::transport::CcKind::NewReno,
                ..TcpConfig::default()
            };
            let mut r = TcpReceiver::new(0, FlowKey::default(), 0, &cfg, 0);
            let t = Time(1_000_000);
            for i in 0..16 {
                let mut p = seg(i);
                if ecn_echo && i == 5 {
                    p.ecn = sojourn_core::Ecn::Ce;
                }
                r.on_packet(&p, &mut h.io(t));
            }
            h.out.clear();
            let now = t + Duration(100_000);
            let mut a = seg(16);
            a.hdr.ts_val = Time(20_000_000);
            let mut b = seg(17);
            b.hdr.ts_val = Time(21_000_000);
            r.on_packet(&a, &mut h.io(now));
            r.on_packet(&b, &mut h.io(now));
            assert!(h.out.is_empty());
            let quiet = r.quiet_acks;
            r.on_timer(&mut h.io(now + BATCH_END));
            assert_eq!(r.quiet_acks, quiet + 1, "the quiet path sent it");
            let p = h.out[0];
            assert_eq!((p.len_bytes, p.truesize_bytes), (66, 832));
            let ece = if ecn_echo { tcp_flags::ECE } else { 0 };
            assert_eq!(p.hdr.flags, tcp_flags::ACK | ece);
            assert_eq!((p.hdr.seq, p.hdr.ack), (1, 1 + 18 * MSS));
            assert_eq!((p.hdr.window, p.hdr.sack_count), (100_000, 0));
            assert_eq!(p.hdr.ts_val, now + BATCH_END);
            assert_eq!(p.hdr.ts_ecr, Time(20_000_000));
            assert_eq!(p.hdr.payload_bytes, 0);
        }
    }

    /// Linux spends no quick-ACK on the SYN-ACK (the request socket sends it; the budget
    /// starts with the first data segment, `tcp_event_data_recv`): 16 data segments after
    /// a handshake are each ACKed at once, the 17th waits.
    #[test]
    fn the_syn_ack_spends_no_quickack() {
        let mut h = H::new();
        let cfg = TcpConfig::default();
        assert!(cfg.handshake);
        let mut r = TcpReceiver::new(0, FlowKey::default(), 0, &cfg, 0);
        let t = Time(1_000_000);
        let mut syn = Packet::default();
        syn.hdr.seq = 0;
        syn.hdr.flags = tcp_flags::SYN;
        r.on_packet(&syn, &mut h.io(t));
        let mut ack = Packet::default();
        ack.hdr.seq = 1;
        ack.hdr.flags = tcp_flags::ACK;
        r.on_packet(&ack, &mut h.io(t));
        assert_eq!(h.out.len(), 1, "the SYN-ACK");
        h.out.clear();
        let mut now = t;
        for i in 0..16 {
            now += Duration(121_000);
            r.on_packet(&seg(i), &mut h.io(now));
        }
        assert_eq!(
            h.out.len(),
            16,
            "each of the first 16 data segments is ACKed at once"
        );
        now += Duration(121_000);
        r.on_packet(&seg(16), &mut h.io(now));
        assert_eq!(
            h.out.len(),
            16,
            "the 17th waits (one full segment unacknowledged)"
        );
    }

    #[test]
    fn out_of_order_is_sacked_at_once_and_filled_in_order() {
        let mut h = H::new();
        let mut r = receiver(5 * MSS);
        let t = Time(1_000_000);
        r.data_seen = true; // past quick-ACK mode
        r.quiet = r.quiet_state();
        r.quick = 0;
        r.on_packet(&seg(0), &mut h.io(t));
        assert!(h.out.is_empty(), "delayed");
        r.on_packet(&seg(2), &mut h.io(t));
        r.on_packet(&seg(4), &mut h.io(t));
        assert_eq!(h.out.len(), 2, "out-of-order data is ACKed immediately");
        let last = h.out.last().unwrap().hdr;
        assert_eq!(last.ack, 1 + MSS);
        assert_eq!(last.sack_count, 2);
        assert_eq!(
            last.sack(0),
            SackBlock {
                start: 1 + 4 * MSS,
                end: 1 + 5 * MSS
            },
            "newest first"
        );
        assert_eq!(
            last.sack(1),
            SackBlock {
                start: 1 + 2 * MSS,
                end: 1 + 3 * MSS
            }
        );
        // A duplicate is D-SACKed (RFC 2883).
        r.on_packet(&seg(2), &mut h.io(t));
        let d = h.out.last().unwrap().hdr;
        assert_eq!(
            d.sack(0),
            SackBlock {
                start: 1 + 2 * MSS,
                end: 1 + 3 * MSS
            }
        );
        r.on_packet(&seg(1), &mut h.io(t));
        r.on_packet(&seg(3), &mut h.io(t));
        assert_eq!(r.rcv_nxt, 1 + 5 * MSS);
        assert_eq!(r.delivered, 5 * MSS);
        assert_eq!(h.flows.get(0).delivered_bytes, 5 * MSS);
        assert_eq!(h.notes, vec![Note::Completed { flow: 0 }]);
        assert_eq!(h.out.last().unwrap().hdr.sack_count, 0);
    }
}

/// Laws pinned by mutation testing (docs/testing.md), in their own file.
#[cfg(test)]
#[path = "receiver_laws.rs"]
mod laws;
