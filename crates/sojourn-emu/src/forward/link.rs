//! The per-link pipeline: a packet enters its link at its arrival time (the `ct bytes`
//! classifier, then the qdisc), leaves it by sojourn-core's device (serialiser at the
//! link's rate), may be lost, carries a CE mark into its real header, waits out the
//! propagation delay in the delay line, and is released to a port or the next link. Drops
//! and the measured period's counters are counted here.

use super::pool::slot_of;
use super::record::log_packet;
use super::{Egress, Forwarder, Hop, LinkPlan, LinkReport, Measured};
use crate::wire;
use sojourn_core::conntrack::lookup;
use sojourn_core::device::{Device, Poll};
use sojourn_core::hist::Histogram;
use sojourn_core::qdisc::{DropReason, Qdisc};
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, Packet, Time};
use sojourn_record::metrics::LinkCounts;
use std::collections::VecDeque;

/// One emulated link's running state (its plan, device, delay line and counters).
pub(super) struct Link {
    pub(super) plan: LinkPlan,
    /// sojourn-core's sans-IO device: the qdisc, the serialiser at the link's rate
    /// (constant, schedule or Mahimahi trace, framing per wire packet) — the same code
    /// the simulator drives. Delay, loss and the clock are the forwarder's.
    pub(super) dev: Device,
    pub(super) delay: Duration,
    pub(super) delay_idx: usize,
    pub(super) loss_rng: Rng,
    /// End of the transmission in progress (the device is busy until `tx_done` is
    /// called for it), or of the last one.
    pub(super) tx_free_at: Time,
    /// Last time passed to the qdisc (its operations must see non-decreasing times).
    pub(super) clock: Time,
    /// Do not poll before this time (the qdisc's watchdog), unless an enqueue comes.
    pub(super) not_before: Option<Time>,
    /// The device's outstanding wake-up (from `take_wake`), until `wake` is called.
    pub(super) pending_wake: Option<Time>,
    /// Packets propagating, with release times (non-decreasing).
    pub(super) in_flight: VecDeque<(Time, Packet)>,
    pub(super) last_release: Time,
    pub(super) rep: LinkReport,
    /// Inside the measured period (counters in `rep.measured`, sojourn histogram).
    pub(super) measuring: bool,
    /// The qdisc's CE mark count when the measured period began.
    pub(super) marks_at_start: u64,
    /// Dequeues and drops go into the packet log.
    pub(super) log_packets: bool,
    /// Counters at the previous time series sample.
    pub(super) prev_counts: LinkCounts,
}

impl Link {
    pub(super) fn release_time(&mut self, tx_end: Time) -> Time {
        let sched = &self.plan.delay_schedule;
        while self.delay_idx < sched.len() && sched[self.delay_idx].0 <= tx_end {
            self.delay = sched[self.delay_idx].1;
            self.delay_idx += 1;
        }
        let t = (tx_end + self.delay).max(self.last_release);
        self.last_release = t;
        t
    }

    pub(super) fn queued(&self) -> usize {
        self.dev.qdisc.len_packets()
    }

    /// When this link next needs the thread: its next release, or the next dequeue.
    pub(super) fn next_event(&self) -> Time {
        let mut t = self.in_flight.front().map_or(Time::MAX, |&(t, _)| t);
        if self.queued() > 0 {
            let d = self.tx_free_at.max(self.not_before.unwrap_or(Time::ZERO));
            t = t.min(d);
        }
        t
    }
}

impl Forwarder {
    /// Drains the drop sink of link `li` (drops at `t`) into its counters, freeing the
    /// buffers.
    pub(super) fn settle_drops(&mut self, li: usize, t: Time) {
        let mut drops = std::mem::take(&mut self.drops);
        for d in drops.drain() {
            self.count_drop(li, &d.pkt, d.reason, t);
        }
        self.drops = drops;
    }
    /// Counts a drop of `p` on link `li` at `t` (link, measured period, connection,
    /// packet log) and frees its buffer.
    pub(super) fn count_drop(&mut self, li: usize, p: &Packet, reason: DropReason, t: Time) {
        let link = &mut self.links[li];
        link.rep.drops[reason as usize] += 1;
        if link.measuring {
            link.rep.measured.drops[reason as usize] += 1;
        }
        let mut reply = false;
        if let Some(c) = self.flows.conns.get_mut(p.conversation() as usize) {
            reply = c.key != p.key;
            // A connection's drops count its TCP segments (a GSO buffer's all), as the
            // flow's `pkts_sent` (tcpi_segs_out) does.
            let segs = p.gso_segs.max(1) as u64;
            if reply {
                c.drops_reply += segs;
            } else {
                c.drops_original += segs;
            }
        }
        if link.log_packets && t <= self.series_until {
            let log = &mut self.packets;
            log_packet(log, t, li, p, Some(reason), self.packet_sample, reply);
        }
        self.pool.release(slot_of(p));
    }
    /// Passes a boundary of the measured period at `t` (≤ now): every link is first
    /// brought to `t` (its dequeues and releases due by then happen before), then its
    /// measured counters start (`start`) or stop.
    pub(super) fn measure_boundary(&mut self, t: Time, start: bool) {
        for li in 0..self.links.len() {
            self.advance(li, t);
            self.release(li, t);
            let link = &mut self.links[li];
            let marks = link.dev.qdisc.ecn_marks();
            if start {
                link.measuring = true;
                link.marks_at_start = marks;
                // As the simulator's `reset_stats` at the end of warm-up.
                link.rep.sojourn_ns = Histogram::new();
                link.rep.measured = Measured {
                    since_ns: t.as_ns(),
                    ..Measured::default()
                };
            } else if link.measuring {
                link.measuring = false;
                link.rep.measured.until_ns = t.as_ns();
                link.rep.measured.ecn_marks = marks - link.marks_at_start;
            }
        }
    }
    /// Starts every transmission link `li` would have started up to `t`, each at its
    /// exact (virtual) time.
    pub(super) fn advance(&mut self, li: usize, t: Time) {
        if self.on_medium(li) {
            return self.medium_advance(t);
        }
        loop {
            let link = &mut self.links[li];
            if link.dev.is_busy() {
                if link.tx_free_at > t {
                    return;
                }
                link.dev.tx_done(link.tx_free_at);
            }
            if link.queued() == 0 {
                return;
            }
            let mut at = link.tx_free_at.max(link.clock);
            if let Some(w) = link.not_before {
                if w > t {
                    return;
                }
                at = at.max(w);
            }
            if let Some(w) = link.pending_wake {
                if w <= at {
                    link.dev.wake(w);
                    link.pending_wake = None;
                }
            }
            link.clock = at;
            link.not_before = None;
            let mut dequeued = None;
            let mut sent = None;
            let res = link.dev.poll(
                at,
                &mut self.drops,
                &mut |p: &Packet| dequeued = Some(*p),
                |p, end| sent = Some((p, end)),
            );
            if let Some(p) = dequeued {
                if link.measuring {
                    link.rep
                        .sojourn_ns
                        .record(at.saturating_since(p.enqueued_at).as_ns());
                }
                if link.log_packets && at <= self.series_until {
                    let reply = self
                        .flows
                        .conns
                        .get(p.conversation() as usize)
                        .is_some_and(|c| c.key != p.key);
                    log_packet(
                        &mut self.packets,
                        at,
                        li,
                        &p,
                        None,
                        self.packet_sample,
                        reply,
                    );
                }
            }
            if !self.drops.is_empty() {
                self.settle_drops(li, at);
            }
            let link = &mut self.links[li];
            match res {
                Poll::Sent { end } => {
                    link.tx_free_at = end;
                    if let Some((p, _)) = sent {
                        self.depart(li, p, end);
                    }
                }
                Poll::Burst { .. } => {
                    // A GSO buffer (GSO mode), or any packet on a shaper: the device times
                    // its wire segments back to back and is busy until the last one's end.
                    // The real buffer leaves whole when its last segment departs — its end
                    // on a wire (the kernel segments it on the way to the host, or hands it
                    // on), the slot's start on a shaper (htb on a veth hands the whole
                    // packet over at once). Only the times are needed, not cut copies.
                    let buffer = *link.dev.burst_buffer().expect("a burst has a buffer");
                    let mut leave = at;
                    let end = link
                        .dev
                        .cut_burst(|_, seg| leave = seg.depart)
                        .unwrap_or(at);
                    link.tx_free_at = end;
                    self.depart(li, buffer, leave);
                }
                Poll::Busy(_) => return,
                Poll::Idle => {
                    if let Some(w) = link.dev.take_wake() {
                        link.pending_wake = Some(w);
                    }
                    if link.queued() == 0 {
                        return;
                    }
                    // Throttled (a shaper or pacer: the kernel's qdisc watchdog). A qdisc
                    // that counts packets but gives none without a wake-up (should not
                    // happen) is polled again in 100 µs rather than spun on.
                    let w = link
                        .pending_wake
                        .unwrap_or(at + Duration::from_us(100))
                        .max(at + Duration::from_ns(1));
                    link.not_before = Some(w);
                    if w > t {
                        return;
                    }
                }
            }
        }
    }
    /// A packet's serialisation on link `li` ended at `end`: random loss, the CE mark
    /// into the real header, and into the delay line.
    pub(super) fn depart(&mut self, li: usize, p: Packet, end: Time) {
        let link = &mut self.links[li];
        if link.plan.loss > 0.0 && link.loss_rng.chance(link.plan.loss) {
            self.count_drop(li, &p, DropReason::LinkLoss, end);
            return;
        }
        if p.ecn == sojourn_core::Ecn::Ce {
            let f = self.pool.frame_mut(slot_of(&p));
            let was_ce = wire::ecn_bits(f) == 3;
            if wire::set_ce(f) && !was_ce {
                link.rep.ce_written += 1;
            }
        }
        let rel = link.release_time(end);
        link.in_flight.push_back((rel, p));
    }
    /// Enqueues `p` (its frame in the pool) into link `li` at `now`.
    pub(super) fn enqueue(&mut self, li: usize, mut p: Packet, now: Time) {
        if self.on_medium(li) {
            return self.medium_enqueue(li, p, now);
        }
        self.advance(li, now);
        let link = &mut self.links[li];
        link.rep.received_pkts += 1;
        link.rep.received_bytes += p.len_bytes as u64;
        if let (Some(map), Some(_)) = (&link.plan.classifier, &self.conntrack) {
            p.priority = lookup(map, p.ct_bytes).unwrap_or(0);
        }
        let at = now.max(link.clock);
        link.clock = at;
        p.enqueued_at = at;
        link.not_before = None;
        let extra = link.dev.enqueue(p, at, &mut self.drops);
        // Splitting disciplines are refused in GSO mode (`QdiscSpec::splits_gso`), and MTU
        // frames are never split: a split would leave several packets on one buffer slot.
        assert_eq!(extra, 0, "a discipline split a GSO buffer in the forwarder");
        if !self.drops.is_empty() {
            self.settle_drops(li, at);
        }
        self.advance(li, now);
    }
    /// Releases every packet of link `li` due by `now`.
    pub(super) fn release(&mut self, li: usize, now: Time) {
        while let Some(&(due, _)) = self.links[li].in_flight.front() {
            if due > now {
                return;
            }
            let (_, p) = self.links[li].in_flight.pop_front().unwrap();
            let link = &mut self.links[li];
            let segs = p.gso_segs.max(1) as u64;
            link.rep.delivered_pkts += 1;
            link.rep.delivered_bytes += p.len_bytes as u64;
            link.rep.delivered_segs += segs;
            if link.measuring {
                link.rep.measured.delivered_pkts += 1;
                link.rep.measured.delivered_bytes += p.len_bytes as u64;
                link.rep.measured.delivered_segs += segs;
            }
            link.rep
                .release_late_ns
                .record(now.saturating_since(due).as_ns());
            match link.plan.egress {
                Egress::Port(pi) => self.send_to_port(pi, slot_of(&p)),
                Egress::Route => {
                    let dst = wire::parse(self.pool.frame(slot_of(&p))).map(|h| h.dst);
                    match dst.and_then(|d| self.route(Hop::Link(li), d)) {
                        // The next link receives it at its due time (virtual time).
                        Some(next) => self.enqueue(next, p, due),
                        None => {
                            self.ingress.unroutable += 1;
                            self.pool.release(slot_of(&p));
                        }
                    }
                }
            }
        }
    }
}
