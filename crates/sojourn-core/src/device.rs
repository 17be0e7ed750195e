//! A network device's egress, sans-IO: the qdisc, the device transmit ring, GSO
//! segmentation after the qdisc and a serialiser at a (possibly time-varying) rate, or a
//! token-bucket shaper in front of a much faster device.
//!
//! What is NOT here belongs to whoever drives the device: propagation delay, loss and
//! reordering on the medium, the clock and the timers. The simulator (sojourn-sim's
//! `link.rs`/`sim.rs`) wraps a `Device` with those; a live forwarder drives it from a
//! monotonic clock and writes [`Poll::Send`] packets to a socket.
//!
//! The driver's loop, with `now` read from its clock:
//!
//! 1. a packet arrives: [`Device::enqueue`];
//! 2. with a transmit ring, [`Device::refill`] tops it up from the qdisc (a no-op without
//!    one); then [`Device::poll`]: if the device is idle it starts the next transmission
//!    and answers [`Poll::Sent`] (the common case: one wire packet, handed to the `send`
//!    callback with the time its last bit is out), or [`Poll::Burst`] (a GSO buffer cut
//!    into wire segments, or any packet on a shaper: take them with
//!    [`Device::next_segment`]); otherwise [`Poll::Busy`] (serialising until `t`) or
//!    [`Poll::Idle`]. With a ring, `refill` again after a transmission started;
//! 3. after `poll`/`refill`, [`Device::take_wake`] says whether the qdisc asked to be
//!    polled again at some time (a shaper or pacer holding packets back, like the kernel's
//!    qdisc watchdog): at that time call [`Device::wake`], then `refill`/`poll`;
//! 4. at the end of a transmission: [`Device::tx_done`] (the transmit completion: the
//!    driver returns TSQ credit to the sending socket), then `refill`/`poll` again.
//!
//! Packets the qdisc drops go to the caller's [`Drops`] sink, as with a bare qdisc;
//! `on_dequeue` sees every packet as it leaves the qdisc (for sojourn times and logs).
//! There is no allocation per packet (the ring is a `VecDeque` sized once; segments are
//! computed one at a time from the buffer) and, on the common path, the packet goes from
//! the qdisc straight into `send` (a `Packet` is ~200 bytes: copies cost).
//!
//! ```
//! use sojourn_core::device::{Device, Poll, RateModel};
//! use sojourn_core::qdisc::{fifo::pfifo_with_limit, AnyQdisc, Drops};
//! use sojourn_core::{Packet, Time};
//!
//! // 10 Mbit/s, a 1000-packet FIFO, no ring, a wire (not a shaper).
//! let mut dev = Device::new(AnyQdisc::Pfifo(pfifo_with_limit(1000)), RateModel::Constant(10_000_000), 0, 0, false);
//! let mut drops = Drops::new();
//! let now = Time::ZERO;
//! dev.enqueue(Packet::synthetic(1, 1, 1250), now, &mut drops);
//! dev.enqueue(Packet::synthetic(2, 1, 1250), now, &mut drops);
//! // The first packet goes on the wire at once: 1250 B at 10 Mbit/s = 1 ms.
//! let mut wire = vec![];
//! let r = dev.poll(now, &mut drops, &mut |_| {}, |pkt, end| wire.push((pkt.uid, end)));
//! let end = Time(1_000_000);
//! assert!(matches!(r, Poll::Sent { end: e } if e == end));
//! // Until then the device is busy; at `end` the transmission completes and the next starts.
//! assert!(matches!(dev.poll(now, &mut drops, &mut |_| {}, |_, _| {}), Poll::Busy(t) if t == end));
//! dev.tx_done(end);
//! dev.poll(end, &mut drops, &mut |_| {}, |pkt, end| wire.push((pkt.uid, end)));
//! assert_eq!(wire, vec![(1, Time(1_000_000)), (2, Time(2_000_000))]);
//! ```

use crate::packet::{Packet, SegmentCut, SegmentCuts};
use crate::qdisc::{AnyQdisc, Dequeue, Drops, Qdisc};
use crate::time::{tx_time, Duration, Time};
use std::collections::VecDeque;

/// How fast a device serialises.
#[derive(Clone, Debug)]
pub enum RateModel {
    /// A constant rate in bit/s.
    Constant(u64),
    /// Piecewise constant: `(from, rate_bps)` sorted by time; the first entry is at 0.
    /// A packet is serialised at the rate in force when its transmission starts.
    Schedule(Vec<(Time, u64)>),
    /// Mahimahi trace: delivery opportunities (ms offsets, repeating every `period_ms`),
    /// each carrying up to `bytes_per_opportunity` bytes; partially sent packets carry over
    /// to the next opportunity like Mahimahi's link queue.
    Trace(Trace),
}

/// A Mahimahi-format delivery trace and the position in it.
#[derive(Clone, Debug)]
pub struct Trace {
    pub opportunities_ms: Vec<u64>,
    pub period_ms: u64,
    pub bytes_per_opportunity: u32,
    /// Index of the next unused opportunity (global count across repetitions).
    next: u64,
    /// Leftover bytes of the last used opportunity and its time.
    leftover: (Time, u32),
}

impl Trace {
    pub fn new(opportunities_ms: Vec<u64>, bytes_per_opportunity: u32) -> Trace {
        let period_ms = *opportunities_ms.last().unwrap_or(&1).max(&1);
        Trace {
            opportunities_ms,
            period_ms,
            bytes_per_opportunity,
            next: 0,
            leftover: (Time::ZERO, 0),
        }
    }

    fn opportunity_time(&self, k: u64) -> Time {
        let n = self.opportunities_ms.len() as u64;
        let cycle = k / n;
        let idx = (k % n) as usize;
        Time((cycle * self.period_ms + self.opportunities_ms[idx]) * 1_000_000)
    }

    /// When a packet of `len` bytes whose transmission starts at `now` is fully delivered.
    pub fn completion(&mut self, now: Time, len: u32) -> Time {
        let mut remaining = len;
        let mut done_at = now;
        // Bytes left in an opportunity at exactly `now` can still be used.
        if self.leftover.0 == now && self.leftover.1 > 0 {
            let used = remaining.min(self.leftover.1);
            remaining -= used;
            self.leftover.1 -= used;
        }
        if remaining == 0 {
            return done_at;
        }
        // Skip opportunities that passed while the link was idle (wasted, as in Mahimahi).
        // Jump whole periods first so long idle times cost O(1).
        let n = self.opportunities_ms.len() as u64;
        let period_ns = self.period_ms * 1_000_000;
        if self.opportunity_time(self.next) < now {
            let cycles_behind = (now.0 - self.opportunity_time(self.next).0) / period_ns;
            if cycles_behind > 1 {
                self.next += (cycles_behind - 1) * n;
            }
            while self.opportunity_time(self.next) < now {
                self.next += 1;
            }
        }
        while remaining > 0 {
            let t = self.opportunity_time(self.next);
            self.next += 1;
            let used = remaining.min(self.bytes_per_opportunity);
            remaining -= used;
            done_at = t;
            self.leftover = (t, self.bytes_per_opportunity - used);
        }
        done_at
    }
}

impl RateModel {
    /// Integral of the rate over `[a, b]`, in bits (the capacity offered in that time).
    pub fn capacity_bits_between(&self, a: Time, b: Time) -> f64 {
        if b <= a {
            return 0.0;
        }
        match self {
            RateModel::Constant(r) => *r as f64 * (b - a).as_secs_f64(),
            RateModel::Schedule(s) => {
                let mut total = 0.0;
                for (i, &(from, r)) in s.iter().enumerate() {
                    let until = s.get(i + 1).map(|x| x.0).unwrap_or(Time::MAX);
                    let lo = from.max(a);
                    let hi = until.min(b);
                    if hi > lo {
                        total += r as f64 * (hi - lo).as_secs_f64();
                    }
                }
                total
            }
            RateModel::Trace(t) => {
                // Count opportunities in [a, b).
                let n = t.opportunities_ms.len() as u64;
                let mut count = 0u64;
                let period_ns = t.period_ms * 1_000_000;
                let full = (b.0 - a.0) / period_ns;
                count += full * n;
                let rest_start = a.0 + full * period_ns;
                for k in 0..=1u64 {
                    for &o in &t.opportunities_ms {
                        let base = (rest_start / period_ns + k) * period_ns;
                        let ot = base + o * 1_000_000;
                        if ot >= rest_start && ot < b.0 {
                            count += 1;
                        }
                    }
                }
                count as f64 * t.bytes_per_opportunity as f64 * 8.0
            }
        }
    }
}

/// The rate of schedule `s` in force at `now`, `idx` the entry found last (times only go
/// forward).
#[inline]
fn schedule_rate(s: &[(Time, u64)], idx: &mut usize, now: Time) -> u64 {
    while *idx + 1 < s.len() && s[*idx + 1].0 <= now {
        *idx += 1;
    }
    s[*idx].1
}

/// When `bytes` on the wire that start at `now` are out, at `rate` (`Device::rate_at`'s
/// schedule position `schedule_idx`): the device's serialisation, by field, so a caller
/// may hold other parts of the device meanwhile.
#[inline(never)]
fn tx_end_model(rate: &mut RateModel, schedule_idx: &mut usize, now: Time, bytes: u32) -> Time {
    match rate {
        RateModel::Constant(r) => now + tx_time(bytes as u64, *r),
        RateModel::Schedule(s) => {
            let r = schedule_rate(s, schedule_idx, now);
            now + tx_time(bytes as u64, r.max(1))
        }
        RateModel::Trace(t) => t.completion(now, bytes),
    }
}

/// What the device wants next (the answer of [`Device::poll`]).
#[derive(Debug)]
pub enum Poll {
    /// A packet went on the medium now (handed to `send`); its last bit is out at `end`,
    /// when it starts to propagate and [`Device::tx_done`] is due. The common case.
    Sent { end: Time },
    /// A transmission of `segments` wire packets started now: a GSO buffer segmented after
    /// the qdisc (Linux `validate_xmit_skb` → `skb_gso_segment` when the device cannot
    /// segment), serialised back to back, or any packet of a shaper device. Take them with
    /// [`Device::next_segment`] before anything else; the last one's `end` is when to call
    /// [`Device::tx_done`].
    Burst { segments: u32 },
    /// Serialising until `t` (then [`Device::tx_done`]).
    Busy(Time),
    /// Nothing to send: the qdisc is empty or throttled (see [`Device::take_wake`]).
    Idle,
}

/// How a transmission started ([`Device::begin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// One wire packet, the caller's to send; its last bit is out at `end`.
    Sent { end: Time },
    /// A burst of `segments` wire packets: take them with [`Device::next_segment`].
    Burst { segments: u32 },
}

/// One wire packet of a [`Poll::Burst`].
#[derive(Debug)]
pub struct Segment {
    pub pkt: Packet,
    /// Position in the buffer (0 for the first; a split gives each later one a new identity).
    pub index: u32,
    /// When its last bit is out (serialisation end).
    pub end: Time,
    /// When it starts to propagate: `end` on a wire; the start of the shaper's slot on a
    /// shaper (tc htb/tbf in front of a veth hands the whole packet over at once).
    pub depart: Time,
}

/// Where and when the next wire packet of a [`Poll::Burst`] goes, without the packet
/// ([`Device::next_segment_at`]): it is segment `index` of [`Device::burst_buffer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentAt {
    /// Position in the buffer, as in [`Segment::index`].
    pub index: u32,
    /// When its last bit is out (serialisation end).
    pub end: Time,
    /// When it starts to propagate, as in [`Segment::depart`].
    pub depart: Time,
    /// How the segment differs from the buffer ([`Packet::apply_cut`]).
    pub cut: SegmentCut,
}

/// A GSO buffer being cut into wire segments.
#[derive(Debug)]
struct Cutting {
    buffer: Packet,
    /// The segments not cut yet (what they share is computed once per buffer).
    cuts: SegmentCuts,
    start: Time,
    t: Time,
    /// At a constant rate, the last serialisation time computed and its wire bytes: all
    /// of a buffer's segments but the last are the same size (one division per buffer
    /// rather than per segment). `(0, 0)` is a true entry to start with.
    last_tx: (u32, Duration),
}

/// A device's egress: qdisc → tx ring → (segmentation) → serialiser or shaper. See the
/// module documentation for the driving loop.
///
/// Layout (issue 19, many active flows): `repr(C, align(64))` with everything a
/// transmission start and end touch in the first cache line and the qdisc (whose own
/// header — a FIFO's queue and counters — is its first bytes) from the second. With
/// 10,000 flows every packet meets a cold device, and each of its cache lines touched is a
/// miss; the rate model, the ring, the wake-up bookkeeping and the buffer being cut
/// (a whole `Packet`) come after the qdisc.
#[repr(C, align(64))]
pub struct Device {
    /// End of the transmission in progress, if any.
    busy_until: Option<Time>,
    /// A wake-up not yet handed out by [`Device::take_wake`] (asked at every empty poll).
    new_wake: Option<Time>,
    /// The rate in bit/s when `rate` is [`RateModel::Constant`], 0 otherwise: the
    /// per-packet path reads it here instead of the 64-byte model further on.
    constant_bps: u64,
    /// Bytes added on the wire per packet (preamble, FCS, inter-frame gap…), for
    /// serialisation only.
    pub framing_bytes: u32,
    /// The ring's capacity (`ring_cap()`; 0 = no ring).
    ring_cap: u32,
    tx_len: u32,
    tx_wire: u32,
    /// The rate is a token-bucket shaper (tc htb/tbf) in front of a much faster device (a
    /// veth): a packet leaves whole when the shaper releases it and the next one waits
    /// `len / rate`. False: the rate is the wire's own serialisation.
    pub shaper: bool,
    /// The qdisc, from the second cache line on.
    pub qdisc: AnyQdisc,
    /// How fast the device serialises; fixed at construction ([`Device::rate`]).
    rate: RateModel,
    schedule_idx: usize,
    /// The earliest pending wake-up the qdisc asked for.
    wake_at: Option<Time>,
    /// Device transmit ring between the qdisc and the wire (`ring_cap` packets; 0 = the
    /// qdisc feeds the serialiser directly, as on a router model or a veth).
    ring: VecDeque<Packet>,
    cutting: Option<Cutting>,
}

/// The segments of a burst not cut yet and its serialisation clock, at a constant rate on
/// a wire ([`Device::take_burst`]): each [`BurstCursor::next_segment`] is the next
/// iteration of [`Device::cut_burst`]'s loop (the same cut, the same end).
#[derive(Clone, Copy, Debug, Default)]
pub struct BurstCursor {
    cuts: SegmentCuts,
    /// The previous segment's end (the burst's start before the first).
    t: Time,
    /// As [`Cutting::last_tx`].
    last_tx: (u32, Duration),
    bps: u64,
    framing: u32,
}

impl BurstCursor {
    /// Segments not cut yet.
    #[inline]
    pub fn remaining(&self) -> u32 {
        self.cuts.remaining()
    }

    /// The next segment's cut and serialisation end (it departs then: a wire), `None`
    /// after the last.
    #[inline(always)]
    pub fn next_segment(&mut self) -> Option<(SegmentCut, Time)> {
        let cut = self.cuts.next_cut()?;
        // As `cut_burst` at a constant rate: framing once per segment, the duration
        // reused while the size is.
        let bytes = cut.len_bytes + self.framing;
        if self.last_tx.0 != bytes {
            self.last_tx = (bytes, tx_time(bytes as u64, self.bps));
        }
        self.t += self.last_tx.1;
        Some((cut, self.t))
    }

    /// The last segment's end (the clock as it is if none is left): what walking the
    /// cursor to its end gives, from the segments' lengths (at most three distinct ones)
    /// rather than segment by segment.
    fn last_end(&self) -> Time {
        let mut t = self.t;
        for (len, count) in self.cuts.remaining_lens() {
            if count > 0 {
                let d = tx_time((len + self.framing) as u64, self.bps);
                t += Duration(d.0.saturating_mul(count as u64));
            }
        }
        t
    }
}

/// What a finished transmission carried (for counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxDone {
    /// Wire packets (a GSO buffer's segments).
    pub wire_packets: u32,
    /// `len_bytes` of the buffer (framing excluded).
    pub bytes: u32,
}

impl Device {
    /// A device with `qdisc`, serialising at `rate` with `framing_bytes` of framing per
    /// wire packet, a ring of `tx_ring` packets (0 = none), as a `shaper` or a wire.
    pub fn new(
        qdisc: AnyQdisc,
        rate: RateModel,
        framing_bytes: u32,
        tx_ring: u32,
        shaper: bool,
    ) -> Device {
        let constant_bps = match rate {
            RateModel::Constant(r) => r,
            _ => 0,
        };
        Device {
            qdisc,
            constant_bps,
            rate,
            schedule_idx: 0,
            framing_bytes,
            shaper,
            ring: VecDeque::with_capacity(tx_ring as usize),
            ring_cap: tx_ring,
            busy_until: None,
            tx_len: 0,
            tx_wire: 0,
            cutting: None,
            wake_at: None,
            new_wake: None,
        }
    }

    /// Whether a transmission is in progress.
    #[inline]
    pub fn is_busy(&self) -> bool {
        self.busy_until.is_some()
    }

    /// Packets in the transmit ring.
    #[inline]
    pub fn ring_len(&self) -> usize {
        self.ring.len()
    }

    /// The ring's capacity in packets (0: no ring).
    #[inline]
    pub fn ring_cap(&self) -> usize {
        self.ring_cap as usize
    }

    /// How the device serialises (as given to [`Device::new`]).
    pub fn rate(&self) -> &RateModel {
        &self.rate
    }

    /// Hands `pkt` to the qdisc (`enqueued_at` must be set by the caller). Returns how
    /// many packets the qdisc created beyond the one it got (CAKE's `split_gso` cuts a GSO
    /// buffer into segments at enqueue), for conservation accounting.
    #[inline]
    pub fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> u64 {
        if pkt.gso_segs > 1 {
            let before = self.qdisc.len_packets() + drops.len();
            self.qdisc.enqueue(pkt, now, drops);
            let entered = self.qdisc.len_packets() + drops.len() - before;
            entered.saturating_sub(1) as u64
        } else {
            self.qdisc.enqueue(pkt, now, drops);
            0
        }
    }

    /// The nominal rate at `now` (bit/s); for traces, the long-run average.
    pub fn rate_at(&mut self, now: Time) -> u64 {
        match &self.rate {
            RateModel::Constant(r) => *r,
            RateModel::Schedule(s) => schedule_rate(s, &mut self.schedule_idx, now),
            RateModel::Trace(t) => {
                let per_period =
                    t.opportunities_ms.len() as f64 * t.bytes_per_opportunity as f64 * 8.0;
                (per_period / (t.period_ms as f64 * 1e-3)) as u64
            }
        }
    }

    /// Serialisation end for `pkt` starting at `now` (framing counted once per wire packet).
    /// The constant rate is inlined into the per-packet path; schedules and traces are
    /// not (a call per packet there costs more than the arithmetic).
    #[inline(always)]
    fn tx_end(&mut self, now: Time, pkt: &Packet) -> Time {
        self.tx_end_bytes(now, pkt.len_bytes + self.framing_bytes * pkt.wire_packets())
    }

    /// When `bytes` on the wire (framing included) that start at `now` are out.
    #[inline]
    fn tx_end_bytes(&mut self, now: Time, bytes: u32) -> Time {
        // `constant_bps` is `RateModel::Constant`'s rate (a constant rate of 0 bit/s is
        // refused at load time, so 0 means "not constant").
        if self.constant_bps != 0 {
            now + tx_time(bytes as u64, self.constant_bps)
        } else {
            self.tx_end_varying(now, bytes)
        }
    }

    #[inline(never)]
    fn tx_end_varying(&mut self, now: Time, bytes: u32) -> Time {
        tx_end_model(&mut self.rate, &mut self.schedule_idx, now, bytes)
    }

    /// A wake-up the qdisc asked for that the caller has not been told about yet (at
    /// most one per poll; earlier pending ones are not repeated).
    #[inline]
    pub fn take_wake(&mut self) -> Option<Time> {
        self.new_wake.take()
    }

    /// The caller's timer for a wake-up at `t` fired: forget it (then `poll`).
    #[inline]
    pub fn wake(&mut self, t: Time) {
        if self.wake_at == Some(t) {
            self.wake_at = None;
        }
    }

    #[inline]
    fn throttled(&mut self, t: Time) {
        if self.wake_at.is_none_or(|w| t < w) {
            self.wake_at = Some(t);
            self.new_wake = Some(t);
        }
    }

    /// Tops up the transmit ring from the qdisc while it has room (the kernel's
    /// `qdisc_run` filling the driver queue); a no-op without a ring.
    /// `on_dequeue` is called with every packet that leaves the qdisc, in order.
    #[inline(never)]
    pub fn refill(&mut self, now: Time, drops: &mut Drops, on_dequeue: &mut impl FnMut(&Packet)) {
        while self.ring.len() < self.ring_cap as usize {
            match self.qdisc.dequeue(now, drops) {
                Dequeue::Packet(p) => {
                    on_dequeue(&p);
                    self.ring.push_back(p);
                }
                Dequeue::Empty => break,
                Dequeue::NotBefore(t) => {
                    self.throttled(t);
                    break;
                }
            }
        }
    }

    /// Starts the next transmission if the device is idle: the head of the ring, or
    /// (without a ring) the qdisc's next packet. A single wire packet goes to
    /// `send(packet, serialisation_end)` and the answer is [`Poll::Sent`]; a GSO buffer
    /// or a shaper's packet answers [`Poll::Burst`]. `on_dequeue` is called with a packet
    /// that leaves the qdisc here. (Built from [`Device::next_packet`] and
    /// [`Device::begin`], which a driver may call itself.)
    #[inline]
    pub fn poll(
        &mut self,
        now: Time,
        drops: &mut Drops,
        on_dequeue: &mut impl FnMut(&Packet),
        send: impl FnOnce(Packet, Time),
    ) -> Poll {
        debug_assert!(
            self.cutting.is_none(),
            "take every segment of a burst first"
        );
        if let Some(t) = self.busy_until {
            return Poll::Busy(t);
        }
        let from_qdisc = self.ring_cap == 0;
        match self.next_packet(now, drops) {
            Dequeue::Packet(p) => {
                if from_qdisc {
                    on_dequeue(&p);
                }
                match self.begin(&p, now) {
                    Begin::Sent { end } => {
                        send(p, end);
                        Poll::Sent { end }
                    }
                    Begin::Burst { segments } => Poll::Burst { segments },
                }
            }
            Dequeue::Empty | Dequeue::NotBefore(_) => Poll::Idle,
        }
    }

    /// The packet to transmit next on an idle device: the head of the ring, or (without a
    /// ring, `ring_cap() == 0`) the qdisc's next packet — the caller then sees it leave
    /// the qdisc. `NotBefore` (a throttled qdisc) is also recorded for
    /// [`Device::take_wake`]. Hand a packet to [`Device::begin`] next.
    ///
    /// The qdisc's answer is returned as it is, so the ~200-byte packet is not copied on
    /// the way (the per-packet path; see docs/engine.md).
    #[inline(always)]
    pub fn next_packet(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        debug_assert!(
            self.cutting.is_none() && self.busy_until.is_none(),
            "next_packet on a busy device"
        );
        if self.ring_cap > 0 {
            return match self.ring.pop_front() {
                Some(p) => Dequeue::Packet(p),
                None => Dequeue::Empty,
            };
        }
        let d = self.qdisc.dequeue(now, drops);
        if let Dequeue::NotBefore(t) = d {
            self.throttled(t);
        }
        d
    }

    /// Starts transmitting `p` (from [`Device::next_packet`]) at `now`. [`Begin::Sent`]:
    /// one wire packet whose last bit is out at `end` — the caller puts `p` on its medium.
    /// [`Begin::Burst`]: the device keeps the buffer and cuts it
    /// ([`Device::next_segment`]).
    #[inline(always)]
    pub fn begin(&mut self, p: &Packet, now: Time) -> Begin {
        self.tx_len = p.len_bytes;
        self.tx_wire = p.wire_packets();
        if self.shaper || p.gso_segs > 1 {
            let segments = self.tx_wire;
            self.busy_until = Some(now);
            self.cutting = Some(Cutting {
                buffer: *p,
                cuts: p.segment_cuts(),
                start: now,
                t: now,
                last_tx: (0, Duration::ZERO),
            });
            return Begin::Burst { segments };
        }
        let end = self.tx_end(now, p);
        self.busy_until = Some(end);
        Begin::Sent { end }
    }

    /// The next wire packet of a [`Poll::Burst`], `None` after the last.
    #[inline]
    pub fn next_segment(&mut self) -> Option<Segment> {
        let at = self.next_segment_at()?;
        let buffer = self
            .burst_buffer()
            .expect("cutting until the last is taken");
        let mut pkt = *buffer;
        buffer.apply_cut(&at.cut, &mut pkt);
        Some(Segment {
            pkt,
            index: at.index,
            end: at.end,
            depart: at.depart,
        })
    }

    /// [`Device::next_segment`] without building the packet: the segment is
    /// `burst_buffer().segment(index)`, or a copy of the buffer cut by
    /// `burst_buffer().apply_cut(&cut, ..)`. An engine that keeps its packets in a queue
    /// copies the buffer into the slot and cuts it there, one copy of the ~200-byte packet
    /// instead of two. `None` after the last (the buffer is gone then).
    #[inline]
    pub fn next_segment_at(&mut self) -> Option<SegmentAt> {
        let c = self.cutting.as_mut()?;
        let Some(cut) = c.cuts.next_cut() else {
            self.cutting = None;
            return None;
        };
        let (start, t) = (c.start, c.t);
        // A segment is one wire packet: its framing once.
        let bytes = cut.len_bytes + self.framing_bytes;
        let end = if self.constant_bps != 0 {
            // `tx_end_bytes` at a constant rate, the duration reused while the size is.
            if c.last_tx.0 != bytes {
                c.last_tx = (bytes, tx_time(bytes as u64, self.constant_bps));
            }
            t + c.last_tx.1
        } else {
            self.tx_end_varying(t, bytes)
        };
        let c = self.cutting.as_mut().expect("cutting");
        c.t = end;
        self.busy_until = Some(end);
        let depart = if self.shaper { start } else { end };
        Some(SegmentAt {
            index: cut.index,
            end,
            depart,
            cut,
        })
    }

    /// Every segment of the current burst not taken yet, in order: `each(buffer, at)` with
    /// what [`Device::next_segment_at`] would answer, one call after another (the same
    /// times; a varying rate is asked in the same order), and the burst is over. The
    /// cut segment is `buffer` cut by `buffer.apply_cut(&at.cut, ..)`. Returns the last
    /// segment's end (`None` if none was left).
    ///
    /// One loop per burst rather than a call per segment: what the segments share (the
    /// buffer, the rate, the framing, the propagation start) is read once, the device's
    /// state written once at the end (issue 19, session 10: seed 000's 10 Gbit/s sender
    /// cuts ~32 segments per buffer).
    #[inline(always)]
    pub fn cut_burst(&mut self, mut each: impl FnMut(&Packet, &SegmentAt)) -> Option<Time> {
        let Device {
            cutting,
            rate,
            schedule_idx,
            busy_until,
            framing_bytes,
            constant_bps,
            shaper,
            ..
        } = self;
        let c = cutting.as_mut()?;
        let (framing, bps, shaper) = (*framing_bytes, *constant_bps, *shaper);
        let (start, mut t, mut last_tx) = (c.start, c.t, c.last_tx);
        // The cursor in a local (the device forgets it after the loop): the loop keeps it
        // in registers rather than in the device across the caller's stores.
        let mut cuts = c.cuts;
        let mut last = None;
        while let Some(cut) = cuts.next_cut() {
            // As `next_segment_at`.
            let bytes = cut.len_bytes + framing;
            let end = if bps != 0 {
                if last_tx.0 != bytes {
                    last_tx = (bytes, tx_time(bytes as u64, bps));
                }
                t + last_tx.1
            } else {
                tx_end_model(rate, schedule_idx, t, bytes)
            };
            t = end;
            let depart = if shaper { start } else { end };
            let at = SegmentAt {
                index: cut.index,
                end,
                depart,
                cut,
            };
            each(&c.buffer, &at);
            last = Some(end);
        }
        // `busy_until` follows the cutting time (`begin` and `next_segment_at` set both).
        *busy_until = Some(t);
        *cutting = None;
        last
    }

    /// Ends the current burst at once for a caller that cuts its segments later, one at a
    /// time: `take(buffer, cursor, last_end)` gets the buffer, a cursor that gives each
    /// segment's cut and serialisation end in order (the values [`Device::cut_burst`]
    /// gives), and the last segment's end, until which the device is busy; its answer is
    /// returned. An engine that keeps a buffer's propagating segments in one queue slot
    /// cuts each in place when it arrives instead of copying the ~200-byte buffer once
    /// per segment at the start (issue 19, session 11).
    ///
    /// Only on a wire at a constant rate (`None`, and `take` is not called, on a shaper,
    /// whose segments all depart at the slot's start, or at a varying rate: use
    /// `cut_burst` there), and `None` without a burst.
    #[inline(always)]
    pub fn take_burst<R>(
        &mut self,
        take: impl FnOnce(&Packet, BurstCursor, Time) -> R,
    ) -> Option<R> {
        if self.shaper || self.constant_bps == 0 {
            return None;
        }
        let c = self.cutting.as_ref()?;
        let cursor = BurstCursor {
            cuts: c.cuts,
            t: c.t,
            last_tx: c.last_tx,
            bps: self.constant_bps,
            framing: self.framing_bytes,
        };
        let last = cursor.last_end();
        let r = take(&c.buffer, cursor, last);
        self.busy_until = Some(last);
        self.cutting = None;
        Some(r)
    }

    /// The buffer the current burst is cut from (its TSQ completion is the caller's).
    pub fn burst_buffer(&self) -> Option<&Packet> {
        self.cutting.as_ref().map(|c| &c.buffer)
    }

    /// The transmission in progress ended at `now`: the device is free again. Returns what
    /// it carried (the completion; the caller returns TSQ credit to the sending socket).
    #[inline]
    pub fn tx_done(&mut self, now: Time) -> TxDone {
        debug_assert!(
            self.busy_until.is_some_and(|t| t <= now),
            "tx_done before the end"
        );
        debug_assert!(self.cutting.is_none());
        self.busy_until = None;
        TxDone {
            wire_packets: self.tx_wire,
            bytes: self.tx_len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::fifo::pfifo_with_limit;
    use crate::qdisc::testkit::Bound;

    fn nop(_: &Packet) {}

    /// The per-packet state is in the device's first cache line and the qdisc starts at
    /// the second (issue 19: a cold device costs one miss per line touched). 64 is the
    /// x86-64 / AArch64 cache line size, written here as the literal it is.
    #[test]
    fn hot_fields_share_the_first_cache_line() {
        assert_eq!(std::mem::align_of::<Device>(), 64);
        let d = Device::new(
            AnyQdisc::Pfifo(pfifo_with_limit(10)),
            RateModel::Constant(10_000_000),
            4,
            0,
            false,
        );
        let base = &d as *const Device as usize;
        let at = |p: usize| p - base;
        assert_eq!(at(&d.qdisc as *const AnyQdisc as usize), 64);
        for f in [
            at(&d.busy_until as *const _ as usize),
            at(&d.new_wake as *const _ as usize),
            at(&d.constant_bps as *const _ as usize),
            at(&d.framing_bytes as *const _ as usize),
            at(&d.ring_cap as *const _ as usize),
            at(&d.tx_len as *const _ as usize),
            at(&d.tx_wire as *const _ as usize),
            at(&d.shaper as *const _ as usize),
        ] {
            assert!(f < 64, "a per-packet field at offset {f}");
        }
    }

    /// The cached constant rate serialises as the rate model does: 1250 B + 4 B framing
    /// at 10 Mbit/s is 1,003,200 ns; a schedule (not cached) gives the same at that rate.
    #[test]
    fn constant_rate_cache_matches_the_model() {
        for rate in [
            RateModel::Constant(10_000_000),
            RateModel::Schedule(vec![(Time::ZERO, 10_000_000)]),
        ] {
            let mut d = Device::new(AnyQdisc::Pfifo(pfifo_with_limit(10)), rate, 4, 0, false);
            let p = Packet::synthetic(1, 1, 1250);
            assert!(
                matches!(d.begin(&p, Time::ZERO), Begin::Sent { end } if end == Time(1_003_200))
            );
        }
    }

    #[test]
    fn trace_opportunities_carry_partial_packets() {
        // Opportunities at 1, 2, 3 ms, repeating every 3 ms, 1500 B each.
        let mut t = Trace::new(vec![1, 2, 3], 1500);
        // A 1000-B packet at t=0 leaves at the 1 ms opportunity with 500 B left over.
        assert_eq!(t.completion(Time(0), 1000), Time(1_000_000));
        // A 400-B packet starting at 1 ms uses the leftover of that same opportunity.
        assert_eq!(t.completion(Time(1_000_000), 400), Time(1_000_000));
        // A 2000-B packet needs two more opportunities: 2 ms and 3 ms.
        assert_eq!(t.completion(Time(1_000_000), 2000), Time(3_000_000));
        // After idling until 10 ms, the next opportunities are 10 (= 3·3+1) ms, …
        assert_eq!(t.completion(Time(9_500_000), 1500), Time(10_000_000));
    }

    fn gso_buffer(segs: u16) -> Packet {
        // `segs` segments of 1448 B payload + 66 B of headers each (1514-B frames).
        let mut p = Packet::synthetic(7, 1, 1514 * segs as u32);
        p.hdr.payload_bytes = 1448 * segs as u32;
        p.gso_segs = segs;
        p.gso_size = 1448;
        p
    }

    #[test]
    fn gso_buffer_is_cut_after_the_qdisc_and_serialised_back_to_back() {
        // 12 Mbit/s: a 1514-B frame (+24 B framing: preamble 8, FCS 4, IFG 12) takes
        // 1538*8/12e6 s = 1.0253333 ms, rounded up to whole nanoseconds per packet.
        let q = AnyQdisc::Pfifo(pfifo_with_limit(10));
        let mut dev = Device::new(q, RateModel::Constant(12_000_000), 24, 0, false);
        let mut drops = Drops::new();
        assert_eq!(dev.enqueue(gso_buffer(3), Time::ZERO, &mut drops), 0);
        let mut seen = 0;
        let r = dev.poll(
            Time::ZERO,
            &mut drops,
            &mut |_| seen += 1,
            |_, _| unreachable!(),
        );
        assert!(matches!(r, Poll::Burst { segments: 3 }));
        assert_eq!(seen, 1, "the qdisc saw one buffer");
        let mut ends = vec![];
        let mut bound = Bound::new(100, "segments of one buffer");
        while let Some(s) = dev.next_segment() {
            bound.tick();
            assert_eq!(s.pkt.len_bytes, 1514);
            assert_eq!(s.depart, s.end);
            ends.push(s.end.0);
        }
        assert_eq!(ends, vec![1_025_334, 2_050_668, 3_076_002]);
        let r = dev.poll(Time(1), &mut drops, &mut nop, |_, _| {});
        assert!(matches!(r, Poll::Busy(Time(3_076_002))));
        let done = dev.tx_done(Time(3_076_002));
        assert_eq!(
            done,
            TxDone {
                wire_packets: 3,
                bytes: 3 * 1514
            }
        );
        let r = dev.poll(Time(3_076_002), &mut drops, &mut nop, |_, _| {});
        assert!(matches!(r, Poll::Idle));
    }

    #[test]
    fn segments_cut_in_place_are_the_segments_next_segment_gives() {
        // Two full 1448-B segments and a 1000-B last one, 66 B of headers each: frames of
        // 1514, 1514 and 1066 B. At 10 Mbit/s without framing a 1514-B frame takes
        // 1514*8/1e7 s = 1,211,200 ns and a 1066-B one 852,800 ns.
        let mut buffer = gso_buffer(3);
        buffer.hdr.payload_bytes = 2 * 1448 + 1000;
        buffer.len_bytes = 2 * 1514 + 1066;
        buffer.hdr.seq = 1000;
        let start = |buffer: Packet| {
            let q = AnyQdisc::Pfifo(pfifo_with_limit(10));
            let mut dev = Device::new(q, RateModel::Constant(10_000_000), 0, 0, false);
            let mut drops = Drops::new();
            dev.enqueue(buffer, Time::ZERO, &mut drops);
            let r = dev.poll(Time::ZERO, &mut drops, &mut nop, |_, _| unreachable!());
            assert!(matches!(r, Poll::Burst { segments: 3 }));
            dev
        };
        let (mut whole, mut in_place) = (start(buffer), start(buffer));
        let mut bound = Bound::new(10, "segments of one buffer");
        let mut ends = vec![];
        while let Some(at) = in_place.next_segment_at() {
            bound.tick();
            let s = whole.next_segment().expect("as many segments");
            let b = in_place.burst_buffer().expect("cutting");
            let mut slot = *b;
            b.cut_segment(at.index, &mut slot);
            assert_eq!((at.index, at.end, at.depart), (s.index, s.end, s.depart));
            assert_eq!(format!("{slot:?}"), format!("{:?}", s.pkt));
            ends.push(at.end.0);
            assert_eq!(
                (slot.hdr.seq, slot.len_bytes),
                [(1000, 1514), (2448, 1514), (3896, 1066)][at.index as usize]
            );
        }
        assert!(whole.next_segment().is_none());
        assert_eq!(ends, vec![1_211_200, 2_422_400, 3_275_200]);
        // The whole burst in one loop (`cut_burst`, the engine's): the same segments at
        // the same times, and the device busy until the last one's end.
        for taken_first in [0, 1] {
            let (mut one_by_one, mut looped) = (start(buffer), start(buffer));
            let mut want = vec![];
            while let Some(at) = one_by_one.next_segment_at() {
                want.push(at);
            }
            let mut got = vec![];
            for _ in 0..taken_first {
                got.push(looped.next_segment_at().expect("a first segment"));
            }
            let last = looped.cut_burst(|b, at| {
                assert_eq!(b.hdr.seq, 1000, "the buffer itself");
                got.push(*at);
            });
            assert_eq!(last, Some(Time(3_275_200)));
            assert_eq!(
                looped.cut_burst(|_, _| unreachable!()),
                None,
                "nothing left"
            );
            assert_eq!(got, want);
            assert_eq!(
                got.iter().map(|a| a.end.0).collect::<Vec<_>>(),
                vec![1_211_200, 2_422_400, 3_275_200]
            );
            assert!(looped.burst_buffer().is_none() && looped.next_segment_at().is_none());
            let r = looped.poll(Time(1), &mut Drops::new(), &mut nop, |_, _| {});
            assert!(matches!(r, Poll::Busy(Time(3_275_200))));
        }
    }

    /// `take_burst` hands over the burst `cut_burst` would walk: the same cuts at the same
    /// ends (the 1514/1514/1066-B frames at 10 Mbit/s of the test above: 1,211,200 ns
    /// each for the full ones, 852,800 for the last), the last end at once, and the
    /// device busy until then with nothing left to cut. Not on a shaper or at a varying
    /// rate, which keep their burst for `cut_burst`.
    #[test]
    fn take_burst_hands_over_what_cut_burst_walks() {
        let mut buffer = gso_buffer(3);
        buffer.hdr.payload_bytes = 2 * 1448 + 1000;
        buffer.len_bytes = 2 * 1514 + 1066;
        let start = |rate: RateModel, shaper: bool| {
            let q = AnyQdisc::Pfifo(pfifo_with_limit(10));
            let mut dev = Device::new(q, rate, 0, 0, shaper);
            let mut drops = Drops::new();
            dev.enqueue(buffer, Time(5), &mut drops);
            let r = dev.poll(Time(5), &mut drops, &mut nop, |_, _| unreachable!());
            assert!(matches!(r, Poll::Burst { segments: 3 }));
            dev
        };
        let mut looped = start(RateModel::Constant(10_000_000), false);
        let mut want = vec![];
        looped.cut_burst(|_, at| want.push((at.cut, at.end)));
        let mut dev = start(RateModel::Constant(10_000_000), false);
        let (mut got, last) = dev
            .take_burst(|b, mut cursor, last| {
                assert_eq!(b.hdr.seq, buffer.hdr.seq, "the buffer itself");
                assert_eq!(cursor.remaining(), 3);
                let mut got = vec![];
                while let Some(s) = cursor.next_segment() {
                    got.push(s);
                }
                (got, last)
            })
            .expect("a burst on a wire at a constant rate");
        assert_eq!(got, want);
        assert_eq!(last, Time(5 + 3_275_200));
        let ends: Vec<u64> = got.drain(..).map(|(_, end)| end.0 - 5).collect();
        assert_eq!(ends, vec![1_211_200, 2_422_400, 3_275_200]);
        assert!(dev.burst_buffer().is_none() && dev.take_burst(|_, _, _| ()).is_none());
        let r = dev.poll(Time(6), &mut Drops::new(), &mut nop, |_, _| {});
        assert!(matches!(r, Poll::Busy(Time(3_275_205))));
        // A shaper, a schedule: the burst stays for `cut_burst`.
        for (rate, shaper) in [
            (RateModel::Constant(10_000_000), true),
            (RateModel::Schedule(vec![(Time::ZERO, 10_000_000)]), false),
        ] {
            let mut dev = start(rate, shaper);
            assert!(dev.take_burst(|_, _, _| ()).is_none());
            assert!(dev.burst_buffer().is_some());
            assert_eq!(dev.cut_burst(|_, _| {}), Some(Time(5 + 3_275_200)));
        }
    }

    #[test]
    fn shaper_releases_a_packet_whole_at_the_start_of_its_slot() {
        let q = AnyQdisc::Pfifo(pfifo_with_limit(10));
        let mut dev = Device::new(q, RateModel::Constant(1_000_000), 0, 0, true);
        let mut drops = Drops::new();
        dev.enqueue(Packet::synthetic(1, 1, 125), Time(5), &mut drops);
        let r = dev.poll(Time(5), &mut drops, &mut nop, |_, _| unreachable!());
        assert!(matches!(r, Poll::Burst { segments: 1 }));
        let s = dev.next_segment().unwrap();
        // 125 B at 1 Mbit/s = 1 ms; it propagates from the slot's start.
        assert_eq!((s.depart, s.end), (Time(5), Time(1_000_005)));
        assert!(dev.next_segment().is_none());
    }

    #[test]
    fn ring_is_filled_while_the_wire_is_busy() {
        let q = AnyQdisc::Pfifo(pfifo_with_limit(10));
        let mut dev = Device::new(q, RateModel::Constant(1_000_000), 0, 2, false);
        let mut drops = Drops::new();
        for uid in 1..=4 {
            dev.enqueue(Packet::synthetic(uid, 1, 125), Time::ZERO, &mut drops);
        }
        let mut left = vec![];
        dev.refill(Time::ZERO, &mut drops, &mut |p| left.push(p.uid));
        let mut sent = vec![];
        let r = dev.poll(Time::ZERO, &mut drops, &mut nop, |p, end| {
            sent.push((p.uid, end))
        });
        // 125 B at 1 Mbit/s = 1 ms.
        assert!(matches!(
            r,
            Poll::Sent {
                end: Time(1_000_000)
            }
        ));
        assert_eq!(sent, vec![(1, Time(1_000_000))]);
        // Two left the qdisc for the ring, one of them went on the wire.
        assert_eq!(
            (left.clone(), dev.ring_len(), dev.qdisc.len_packets()),
            (vec![1, 2], 1, 2)
        );
        dev.refill(Time::ZERO, &mut drops, &mut |p| left.push(p.uid));
        assert_eq!(
            (left, dev.ring_len(), dev.qdisc.len_packets()),
            (vec![1, 2, 3], 2, 1)
        );
        let r = dev.poll(Time::ZERO, &mut drops, &mut nop, |_, _| {});
        assert!(matches!(r, Poll::Busy(Time(1_000_000))));
    }
}
