//! Point-to-point links: an egress qdisc, a serialiser with a (possibly time-varying) rate,
//! and a constant propagation delay.
//!
//! In-flight packets wait in the link's own FIFO (arrival times are non-decreasing because
//! the delay is constant between changes), so only the head's arrival is a pending event.
//!
//! Performance: a packet is ~200 bytes and copying it dominated the per-hop cost, so the
//! common case moves it only once on a link: `begin_tx` already places it at the back of
//! `in_flight` (its fate is known then, see [`TxFate`]) and the serialisation-end event
//! only touches counters.

use sojourn_core::hist::Histogram;
use sojourn_core::qdisc::{AnyQdisc, DropReason};
use sojourn_core::rng::Rng;
use sojourn_core::time::tx_time;
use sojourn_core::{Duration, Packet, Time};
use std::collections::VecDeque;

/// How fast a link serialises.
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

impl From<&sojourn_experiment::LinkRate> for RateModel {
    fn from(r: &sojourn_experiment::LinkRate) -> RateModel {
        use sojourn_experiment::LinkRate as L;
        match r {
            L::Constant(bps) => RateModel::Constant(*bps),
            L::Schedule(s) => RateModel::Schedule(s.clone()),
            L::Trace(t) => RateModel::Trace(Trace::new(
                t.opportunities_ms.clone(),
                t.bytes_per_opportunity,
            )),
        }
    }
}

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

/// Counters for one link (reset at the end of warm-up).
#[derive(Clone, Debug, Default)]
pub struct LinkStats {
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub enq_pkts: u64,
    pub drops: [u64; DropReason::COUNT],
    pub marks_at_reset: u64,
    /// Qdisc sojourn of every dequeued packet (ns).
    pub sojourn: Histogram,
    /// Time the serialiser was busy (ns).
    pub busy_ns: u64,
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
}

pub struct Link {
    pub name: String,
    pub from: u32,
    pub to: u32,
    pub rate: RateModel,
    schedule_idx: usize,
    pub delay: Duration,
    /// `(from, delay)` changes, sorted; applied to packets whose transmission ends after `from`.
    pub delay_schedule: Vec<(Time, Duration)>,
    delay_idx: usize,
    /// Bytes added on the wire per packet (preamble, FCS, inter-frame gap…), for serialisation only.
    pub framing_bytes: u32,
    /// Bernoulli loss probability applied after serialisation.
    pub loss: f64,
    pub loss_rng: Rng,
    /// Probability that a packet is reordered: held back by `reorder_delay` beyond its
    /// normal arrival, in a second in-flight FIFO, so later packets overtake it.
    pub reorder: f64,
    pub reorder_delay: Duration,
    pub reorder_rng: Rng,
    /// Reordered packets in flight, with their (later) arrival times.
    pub late: VecDeque<(Time, Packet)>,
    pub qdisc: AnyQdisc,
    pub qdisc_desc: String,
    /// Device transmit ring between the qdisc and the wire (`tx_ring` packets; 0 = the
    /// qdisc feeds the serialiser directly, as on a router model or a veth).
    pub ring: VecDeque<Packet>,
    pub ring_cap: usize,
    /// What happens at the end of the current serialisation (`Idle` when not busy).
    pub tx_fate: TxFate,
    /// `len_bytes` of the packet being serialised (counted when it is out).
    pub tx_len: u32,
    /// Wire packets of the current transmission (a GSO buffer's segments).
    pub tx_wire: u32,
    /// The packet being serialised, unless `tx_fate` is `InFlight` (then it is already
    /// the back of `in_flight`).
    pub tx_pkt: Option<Packet>,
    pub tx_started: Time,
    /// Pending `QdiscWake` time, if any.
    pub wake_at: Option<Time>,
    /// Packets propagating, with their arrival times; while `tx_fate` is `InFlight` the
    /// back entry is still being serialised.
    pub in_flight: VecDeque<(Time, Packet)>,
    last_arrival: Time,
    /// Notify the sending endpoint when its packet leaves (TSQ), for host egress links.
    pub notify_tx: bool,
    /// The rate is a token-bucket shaper (tc htb/tbf) in front of a much faster device
    /// (a veth): a packet leaves whole when the shaper releases it — it propagates from
    /// the start of its slot and its TSQ credit returns then (veth orphans the skb) — and
    /// the next one waits `len / rate`. False: the rate is the wire's own serialisation.
    pub shaper: bool,
    /// The GSO buffer whose TSQ completion is due at the end of a `Released` transmission.
    pub tx_notify: Option<Packet>,
    pub stats: LinkStats,
    /// Whether to log packets of this link into packets.parquet.
    pub log_packets: bool,
    /// Last rate change time, for the capacity integral.
    cap_mark: Time,
}

impl Link {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        from: u32,
        to: u32,
        rate: RateModel,
        delay: Duration,
        qdisc: AnyQdisc,
        qdisc_desc: String,
        loss: f64,
        loss_rng: Rng,
    ) -> Link {
        Link {
            name,
            from,
            to,
            rate,
            schedule_idx: 0,
            delay,
            delay_schedule: Vec::new(),
            delay_idx: 0,
            framing_bytes: 0,
            loss,
            loss_rng,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            reorder_rng: Rng::from_seed(0),
            late: VecDeque::new(),
            qdisc,
            qdisc_desc,
            ring: VecDeque::new(),
            ring_cap: 0,
            tx_fate: TxFate::Idle,
            tx_len: 0,
            tx_wire: 0,
            tx_pkt: None,
            tx_started: Time::ZERO,
            wake_at: None,
            in_flight: VecDeque::new(),
            last_arrival: Time::ZERO,
            notify_tx: false,
            shaper: false,
            tx_notify: None,
            stats: LinkStats::default(),
            log_packets: false,
            cap_mark: Time::ZERO,
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

    /// The nominal rate at `now` (bit/s); for traces, the long-run average.
    pub fn rate_at(&mut self, now: Time) -> u64 {
        match &self.rate {
            RateModel::Constant(r) => *r,
            RateModel::Schedule(s) => {
                while self.schedule_idx + 1 < s.len() && s[self.schedule_idx + 1].0 <= now {
                    self.schedule_idx += 1;
                }
                s[self.schedule_idx].1
            }
            RateModel::Trace(t) => {
                let per_period =
                    t.opportunities_ms.len() as f64 * t.bytes_per_opportunity as f64 * 8.0;
                (per_period / (t.period_ms as f64 * 1e-3)) as u64
            }
        }
    }

    /// Serialisation end for `pkt` starting now (framing counted once per wire packet).
    #[inline]
    pub fn tx_end(&mut self, now: Time, pkt: &Packet) -> Time {
        let bytes = pkt.len_bytes + self.framing_bytes * pkt.wire_packets();
        match &mut self.rate {
            RateModel::Constant(r) => now + tx_time(bytes as u64, *r),
            RateModel::Schedule(_) => {
                let r = self.rate_at(now);
                now + tx_time(bytes as u64, r.max(1))
            }
            RateModel::Trace(t) => t.completion(now, bytes),
        }
    }

    /// Arrival time at the far end of a packet whose serialisation ended `now`; never
    /// earlier than the previous arrival (a delay decrease does not reorder the wire).
    #[inline]
    pub fn arrival_time(&mut self, now: Time) -> Time {
        let mut delay = self.delay;
        if !self.delay_schedule.is_empty() {
            while self.delay_idx < self.delay_schedule.len()
                && self.delay_schedule[self.delay_idx].0 <= now
            {
                self.delay = self.delay_schedule[self.delay_idx].1;
                self.delay_idx += 1;
            }
            delay = self.delay;
        }
        let t = (now + delay).max(self.last_arrival);
        self.last_arrival = t;
        t
    }

    /// Integral of the rate over [cap_mark, now], in bits.
    pub fn capacity_bits_between(&self, a: Time, b: Time) -> f64 {
        if b <= a {
            return 0.0;
        }
        match &self.rate {
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

    /// Starts a new measurement period at `now` (warm-up end).
    pub fn reset_stats(&mut self, now: Time) {
        use sojourn_core::Qdisc;
        let marks = self.qdisc.ecn_marks();
        self.stats = LinkStats {
            marks_at_reset: marks,
            since: now,
            ..Default::default()
        };
        self.cap_mark = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
