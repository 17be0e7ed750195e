//! The fast link path (issue 35 §2): a constant-rate, lossless, tail-drop FIFO link whose
//! transmissions are computed when a packet is enqueued, with no transmission-end event.
//!
//! **When it applies** (decided per link when the network is built, [`Sim::choose_fast_links`];
//! docs/engine.md, "The fast link path"): the link's qdisc is `pfifo` or `bfifo` (tail
//! drop: a FIFO never changes a packet it queued, and which packets it admits depends
//! only on how many bytes or packets wait), there is no transmit ring, no shaper, no loss,
//! no reordering, no packet log, the rate and the propagation delay are constant and the
//! delay is not zero (a zero-delay hop forwards the packet at the transmission's end,
//! work that needs the event), the link is not the Wi-Fi medium's, and it does not leave a
//! host (a host's link returns TSQ credit to the sending socket at the transmission's end).
//!
//! **Why it is exact.** On such a link a packet's transmission starts at
//! `max(enqueued, previous end)` and ends `(len + framing) · 8 / rate` later, and the
//! arrival at the far end follows from the end alone; nothing later can change either
//! (no loss, no qdisc state besides the packets). So the packet goes into the link's
//! in-flight list at enqueue, with its arrival time, and its `Arrive` event is filed
//! (earlier than the old path filed it, which the event order permits). What the old
//! path did at the transmission start and end, the counters, is kept as a pending record
//! and settled whenever something could look at them, at the moment the old events
//! would have run:
//! - a packet counts as dequeued (sojourn, busy time) once its start is before the moment
//!   looked from, and as transmitted (`tx_packets`, `tx_bytes`, and one event in the
//!   run's event count, the `TxDone` it would have had) once its end is;
//! - an enqueue at `t` sees the start and the end due at `t` as happened iff the link's
//!   `TxDone` at `t` would have run before the event doing the enqueue (an arrival runs
//!   before it, an endpoint timer after it, another link's transmission end by the
//!   permuted link ids: `EventQueue::runs_before_current`); a packet not started then is
//!   still in the FIFO, as it was: tail drops count the packets and bytes not started,
//!   and the link is idle (the packet cuts through, starting now) when no end is pending;
//! - a sample or the warm-up end at `t` runs before every packet event at `t`: it sees
//!   the starts and ends before `t` (a packet cut through at `t` is not enqueued yet);
//! - at the end of the run everything due at or before the end has run.
//!
//! Per packet this saves the `TxDone` event (its push and pop) and the dequeue's copy of
//! the packet: a queued packet is copied once, into the in-flight slot where it waits.

use super::{Event, Held, Sim};
use crate::fast_fifo::{Admit, FastFifo};
use crate::link::TxFate;
use sojourn_core::qdisc::{DropReason, Qdisc};
use sojourn_core::{Duration, Time};

impl Sim {
    /// Marks every link that qualifies for the fast path (module documentation); called
    /// once, when the network is built, after the host links are known (`notify_tx`).
    pub(super) fn choose_fast_links(&mut self) {
        for (i, link) in self.links.iter_mut().enumerate() {
            let dev = &link.dev;
            let rate = match dev.rate() {
                crate::link::RateModel::Constant(r) => *r,
                _ => continue,
            };
            let eligible = (i as u32) < self.first_wifi_link
                && !link.notify_tx
                && !link.log_packets
                && link.loss == 0.0
                && link.reorder == 0.0
                && !link.cut
                && dev.ring_cap() == 0
                && !dev.shaper
                && link.prop.constant_delay().is_some_and(|d| !d.is_zero());
            if !eligible {
                continue;
            }
            if let Some(f) = FastFifo::for_qdisc(&dev.qdisc, rate, dev.framing_bytes) {
                link.tx_fate = TxFate::Fast(self.fast.len() as u32);
                self.fast.push(f);
            }
        }
    }

    /// Testing the fast link path: every link takes the general path (a transmission-end
    /// event per packet), as before it existed. Call before `start_apps`; the outputs
    /// must not change (tests/fast_link.rs).
    #[doc(hidden)]
    pub fn use_general_link_path(&mut self) {
        assert!(self.fast.iter().all(|f| f.is_empty()), "before any packet");
        for link in &mut self.links {
            if matches!(link.tx_fate, TxFate::Fast(_)) {
                link.tx_fate = TxFate::Idle;
            }
        }
        self.fast.clear();
    }

    /// Links on the fast path (`choose_fast_links`).
    pub fn fast_links(&self) -> usize {
        self.fast.len()
    }

    /// Settles fast link `l` (its queue `f`) up to, not including, `bound`.
    #[inline]
    pub(super) fn settle_fast(&mut self, l: u32, f: u32, bound: Time) {
        let ended = self.fast[f as usize].settle(&mut self.links[l as usize].stats, bound);
        self.events_processed += ended;
        self.event_counts.tx_done_computed += ended;
    }

    /// Settles every fast link as seen from the moment before the events of `t`
    /// (a sample or the warm-up end at `t`, which run first at their instant).
    pub(super) fn settle_fast_links(&mut self, t: Time) {
        for l in 0..self.links.len() as u32 {
            if let TxFate::Fast(f) = self.links[l as usize].tx_fate {
                self.settle_fast(l, f, t);
            }
        }
    }

    /// At the end of the run: everything due at or before `end` has happened.
    pub(super) fn settle_fast_links_at_end(&mut self) {
        if !self.fast.is_empty() {
            self.settle_fast_links(self.end + Duration::from_ns(1));
        }
    }

    /// The queue length of link `l` for a sample at `now` (settled by the caller), or
    /// `None` for a link on the general path.
    pub(super) fn fast_backlog_view(&self, l: u32) -> Option<impl Qdisc> {
        match self.links[l as usize].tx_fate {
            TxFate::Fast(f) => Some(self.fast[f as usize].backlog_view()),
            _ => None,
        }
    }

    /// Packets queued in link `l`'s qdisc (output: `queue_packets_at_end`).
    pub fn queue_packets(&self, l: usize) -> usize {
        let link = &self.links[l];
        link.dev.qdisc.len_packets()
            + match link.tx_fate {
                TxFate::Fast(f) => self.fast[f as usize].backlog_packets(),
                _ => 0,
            }
    }

    /// `link_enqueue` on fast link `l` (its queue `f`) at `self.now`: `held` (its `enqueued_at` set, counted in `enq_pkts`) is tail-dropped or
    /// scheduled, and goes into the in-flight list with its arrival time.
    #[inline(always)]
    pub(super) fn fast_enqueue(&mut self, l: u32, f: u32, held: Held) {
        let now = self.now;
        // The transmission end and start due now have happened iff this link's `TxDone`
        // at this instant would have run before the event being handled.
        let tie = self.events.runs_before_current(Event::TxDone(l));
        self.settle_fast(l, f, now + Duration::from_ns(tie as u64));
        let link = &mut self.links[l as usize];
        let p = match held {
            Held::Here(p) => p,
            Held::Flight(s) | Held::Run(s) => self.flight.packet(s),
        };
        debug_assert!(p.gso_segs <= 1, "wire packets only after a host's device");
        let (len, wire_packets, flow) = (p.len_bytes, p.wire_packets(), p.conversation());
        let end = match self.fast[f as usize].enqueue(now, len, wire_packets, &mut link.stats) {
            Admit::Scheduled { end } => end,
            Admit::Dropped => {
                // sch_fifo's tail drop, counted as `account_drops` counts a qdisc's drop
                // (no TSQ credit and no log on a fast link).
                link.stats.drops[DropReason::Overlimit as usize] += 1;
                self.acct.dropped += 1;
                let rec = self.flows.get_mut(flow);
                rec.pkts_dropped += 1;
                rec.in_network = rec.in_network.wrapping_sub(1);
                held.release(&mut self.flight);
                return;
            }
        };
        let at = link.prop.arrival_time(end);
        let first = link.in_flight.is_empty();
        match held {
            Held::Here(p) => {
                self.flight.push_back(&mut link.in_flight, at, p);
            }
            Held::Flight(s) => self.flight.relink_back(s, &mut link.in_flight, at),
            Held::Run(s) => self.flight.push_copy(s, &mut link.in_flight, at),
        }
        if first {
            self.events.push(at, Event::Arrive(l));
        }
    }
}
