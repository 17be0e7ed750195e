//! Point-to-point links: a sojourn-core [`Device`] (qdisc, tx ring, GSO segmentation
//! after the qdisc, serialiser or shaper) and what the medium adds: a constant (or
//! scheduled) propagation delay, loss and reordering.
//!
//! In-flight packets wait in the link's own FIFO (arrival times are non-decreasing because
//! the delay is constant between changes), so only the head's arrival is a pending event.
//! The FIFO is a list through one pool of slots shared by all links ([`crate::flight`]):
//! a packet is copied into the slot freed last, which is in cache.
//!
//! Performance: a packet is ~200 bytes and copying it dominated the per-hop cost, so the
//! common case moves it only once on a link: `begin_tx` already places it at the back of
//! `in_flight` (its fate is known then, see [`TxFate`]) and the serialisation-end event
//! only touches counters.

use crate::flight::FlightList;
use sojourn_core::device::Device;
pub use sojourn_core::device::{RateModel, Trace};
// Kept at this path for the engine's set-up (the rate model is the experiment model's).
use sojourn_core::hist::Histogram;
use sojourn_core::qdisc::DropReason;
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, Packet, Time};
pub use sojourn_experiment::link::rate_model;
use std::collections::VecDeque;

/// Counters for one link (reset at the end of warm-up).
/// `repr(C)`: the per-packet counters first, in one line with the histogram's header.
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct LinkStats {
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub enq_pkts: u64,
    /// Time the serialiser was busy (ns).
    pub busy_ns: u64,
    /// Qdisc sojourn of every dequeued packet (ns).
    pub sojourn: Histogram,
    pub drops: [u64; DropReason::COUNT],
    pub marks_at_reset: u64,
    /// Capacity offered over the measured period, in bits (integral of the rate).
    pub capacity_bits: f64,
    pub since: Time,
}

/// What becomes of the packet being serialised when its last bit is out.
///
/// Decided when serialisation starts. Loss, reordering and the arrival time depend only on
/// this link's own state (its `loss_rng`/`reorder_rng` streams, `delay_schedule`
/// evaluated at the serialisation end, `last_arrival`), and transmissions on a link end in
/// the order they start, so drawing them at the start gives exactly the values drawn at the
/// end. Everything observable (counters, events, deliveries) still happens at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxFate {
    /// Nothing being serialised.
    Idle,
    /// Lost on the wire; the packet waits in `tx_pkt`.
    Lost,
    /// Held back for reordering; the packet waits in `tx_pkt` and joins `late` with this
    /// arrival time.
    Late(Time),
    /// Arrives the instant its serialisation ends (zero delay); waits in `tx_pkt` and is
    /// forwarded directly at the end.
    Direct,
    /// The common case: the packet is already the back entry of `in_flight` (with its
    /// arrival time), not yet announced by an `Arrive` event.
    InFlight,
    /// Everything was decided and queued when the transmission began (a GSO buffer cut
    /// into segments, or any packet on a `shaper` link); the end only frees the link and,
    /// on a wire, completes TSQ for `tx_notify`.
    Released,
    /// The link is on the fast path (`sim/fast_link.rs`), for good: its transmissions are
    /// computed at enqueue, in the engine's fast queue with this index, and it has no
    /// transmission-end events.
    Fast(u32),
}

/// The medium's propagation delay, constant between scheduled changes.
///
/// 24 bytes (the schedule, rare, behind a pointer): it shares a cache line with the link's
/// per-packet counters (see [`Link`]'s layout).
pub struct Propagation {
    pub delay: Duration,
    last_arrival: Time,
    /// Scheduled changes of `delay`, if any ([`Propagation::set_delay_schedule`]).
    schedule: Option<Box<DelaySchedule>>,
}

/// `(from, delay)` changes, sorted; applied to packets whose transmission ends after `from`.
struct DelaySchedule {
    changes: Vec<(Time, Duration)>,
    /// The first change not applied yet.
    next: usize,
}

impl Propagation {
    pub fn new(delay: Duration) -> Propagation {
        Propagation {
            delay,
            last_arrival: Time::ZERO,
            schedule: None,
        }
    }

    /// Sets the `(from, delay)` changes (sorted by `from`) applied to packets whose
    /// transmission ends at or after `from`; none for an empty list.
    pub fn set_delay_schedule(&mut self, changes: Vec<(Time, Duration)>) {
        self.schedule = (!changes.is_empty()).then(|| Box::new(DelaySchedule { changes, next: 0 }));
    }

    /// The delay when it never changes (no schedule): then a packet whose serialisation
    /// ends at `t` arrives at `max(t + delay, previous arrival)`, which a caller may
    /// compute itself (a run of segments, `FlightPool::push_run`).
    #[inline]
    pub fn constant_delay(&self) -> Option<Duration> {
        self.schedule.is_none().then_some(self.delay)
    }

    /// Arrival time at the far end of a packet whose serialisation ended `now`; never
    /// earlier than the previous arrival (a delay decrease does not reorder the wire).
    #[inline]
    pub fn arrival_time(&mut self, now: Time) -> Time {
        if let Some(sch) = &mut self.schedule {
            while sch.next < sch.changes.len() && sch.changes[sch.next].0 <= now {
                self.delay = sch.changes[sch.next].1;
                sch.next += 1;
            }
        }
        let t = (now + self.delay).max(self.last_arrival);
        self.last_arrival = t;
        t
    }
}

/// `repr(C)`, fields in the order the per-packet path touches them: what every
/// transmission and arrival reads or writes comes first and shares a few cache lines
/// (issue 19: with 10,000 flows each event touches a cold link); the device follows; the
/// packets held only for loss, reordering, zero delay or TSQ, and the names, come last.
/// Lines (64 bytes; the device aligns the link to 64): 0, the link's own fields and its
/// in-flight list; 1, the propagation delay and the per-packet counters; 2, the sojourn
/// histogram's header; then the device's per-packet line and its qdisc's.
#[repr(C)]
pub struct Link {
    pub from: u32,
    pub to: u32,
    /// What happens at the end of the current serialisation (`Idle` when not busy).
    pub tx_fate: TxFate,
    /// Notify the sending endpoint when its packet leaves (TSQ), for host egress links.
    pub notify_tx: bool,
    /// Whether to log packets of this link into packets.parquet.
    pub log_packets: bool,
    /// A link a partitioned run cuts (`parallel.rs`): its far end is another partition's,
    /// so it keeps to the general path (no fast path, no runs) and its packets are shipped.
    /// Read at every arrival: on the first line, with the other flags.
    pub cut: bool,
    /// Bernoulli loss probability applied after serialisation.
    pub loss: f64,
    /// Probability that a packet is reordered: held back by `reorder_delay` beyond its
    /// normal arrival, in a second in-flight FIFO, so later packets overtake it.
    pub reorder: f64,
    /// Packets propagating, with their arrival times (slots of the engine's
    /// [`crate::flight::FlightPool`]); while `tx_fate` is `InFlight` the back entry is
    /// still being serialised.
    pub in_flight: FlightList,
    /// Propagation delay (and its schedule).
    pub prop: Propagation,
    pub stats: LinkStats,
    /// The sending side: qdisc, ring, segmentation, serialiser or shaper.
    pub dev: Device,
    pub loss_rng: Rng,
    pub reorder_delay: Duration,
    pub reorder_rng: Rng,
    /// Reordered packets in flight, with their (later) arrival times.
    pub late: VecDeque<(Time, Packet)>,
    /// The packet being serialised, unless `tx_fate` is `InFlight` (then it is already
    /// the back of `in_flight`).
    pub tx_pkt: Option<Packet>,
    /// The GSO buffer whose TSQ completion is due at the end of a `Released` transmission.
    pub tx_notify: Option<Packet>,
    pub name: String,
    pub qdisc_desc: String,
}

impl Link {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        from: u32,
        to: u32,
        dev: Device,
        delay: Duration,
        qdisc_desc: String,
        loss: f64,
        loss_rng: Rng,
    ) -> Link {
        Link {
            name,
            from,
            to,
            dev,
            prop: Propagation::new(delay),
            loss,
            loss_rng,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            reorder_rng: Rng::from_seed(0),
            late: VecDeque::new(),
            cut: false,
            qdisc_desc,
            tx_fate: TxFate::Idle,
            tx_pkt: None,
            in_flight: FlightList::default(),
            notify_tx: false,
            tx_notify: None,
            stats: LinkStats::default(),
            log_packets: false,
        }
    }

    #[inline]
    pub fn busy(&self) -> bool {
        self.tx_fate != TxFate::Idle
    }

    /// Packets in `in_flight` whose serialisation has ended (propagating).
    #[inline]
    pub fn propagating(&self) -> usize {
        self.in_flight.len() - (self.tx_fate == TxFate::InFlight) as usize
    }

    /// Integral of the rate over `[a, b]`, in bits.
    pub fn capacity_bits_between(&self, a: Time, b: Time) -> f64 {
        self.dev.rate().capacity_bits_between(a, b)
    }

    /// Starts a new measurement period at `now` (warm-up end).
    pub fn reset_stats(&mut self, now: Time) {
        use sojourn_core::Qdisc;
        let marks = self.dev.qdisc.ecn_marks();
        self.stats = LinkStats {
            marks_at_reset: marks,
            since: now,
            ..Default::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// Every field a transmission or an arrival touches lies in the link's first three
    /// 64-byte cache lines (0: own fields and in-flight list; 1: propagation and counters;
    /// 2: the histogram header), and the device starts on a line of its own.
    #[test]
    fn per_packet_fields_share_three_cache_lines() {
        assert_eq!(std::mem::align_of::<Link>(), 64);
        let line = |off: usize, len: usize| {
            assert_eq!(
                off / 64,
                (off + len - 1) / 64,
                "field at {off} straddles lines"
            );
            off / 64
        };
        assert_eq!(line(offset_of!(Link, to), 4), 0);
        assert_eq!(line(offset_of!(Link, tx_fate), 16), 0);
        // Read at every arrival (a partitioned run's cut links; session 19 had put it after
        // the device, a cold line per arrival with 10,000 flows).
        assert_eq!(line(offset_of!(Link, cut), 1), 0);
        assert_eq!(line(offset_of!(Link, loss), 8), 0);
        assert_eq!(line(offset_of!(Link, reorder), 8), 0);
        assert_eq!(line(offset_of!(Link, in_flight), 12), 0);
        assert_eq!(line(offset_of!(Link, prop), 24), 1);
        let stats = offset_of!(Link, stats);
        assert_eq!(line(stats + offset_of!(LinkStats, tx_pkts), 8), 1);
        assert_eq!(line(stats + offset_of!(LinkStats, busy_ns), 8), 1);
        assert_eq!(line(stats + offset_of!(LinkStats, sojourn), 64), 2);
        assert_eq!(offset_of!(Link, dev) % 64, 0);
    }
}
