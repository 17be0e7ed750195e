//! The queue of a link on the fast path (docs/engine.md, "The fast link path"; the engine's
//! side is `sim/fast_link.rs`): a tail-drop FIFO (`pfifo`/`bfifo`) in front of a wire at a
//! constant rate, whose transmissions are computed when a packet is enqueued — start
//! `max(now, previous end)`, end `start + (len + framing) · 8 / rate` — instead of being
//! driven by transmission-end events.
//!
//! It holds no packets (they wait in the link's in-flight list, with their arrival
//! times), only what the counters need: per transmission its enqueue, start and end times
//! and its length, until [`FastFifo::settle`] has counted its start (a dequeue: sojourn,
//! busy time) and its end (`tx_packets`, `tx_bytes`) into the link's statistics at the
//! moment the old events would have run. The caller decides that moment (the event
//! order): everything strictly before `bound` has happened.

use crate::link::LinkStats;
use sojourn_core::qdisc::{AnyQdisc, Dequeue, Drops, Qdisc, Verdict};
use sojourn_core::time::tx_time;
use sojourn_core::{Packet, Time};
use std::collections::VecDeque;

/// A transmission computed at enqueue whose counters are not all settled yet.
#[derive(Clone, Copy, Debug)]
struct Pending {
    enqueued: Time,
    start: Time,
    end: Time,
    len_bytes: u32,
}

/// What [`FastFifo::enqueue`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Queued (or straight to the wire): the last bit is out at `end`.
    Scheduled { end: Time },
    /// Tail-dropped: the FIFO was full.
    Dropped,
}

/// A fast link's queue: the transmissions computed and not yet settled, in start order.
#[derive(Debug)]
pub struct FastFifo {
    /// The link's constant rate (bit/s) and framing per wire packet.
    rate_bps: u64,
    framing_bytes: u32,
    /// The FIFO's limit, in packets (`pfifo`) or bytes (`bfifo`).
    limit: u64,
    limit_in_bytes: bool,
    /// Transmissions whose end is not settled; the first `started` of them have had
    /// their start settled (dequeued), the rest are the FIFO's backlog.
    pending: VecDeque<Pending>,
    started: usize,
    /// `len_bytes` of the backlog (`pending[started..]`).
    queued_bytes: u64,
}

impl FastFifo {
    /// The fast queue of a link with `qdisc` at `rate_bps` with `framing_bytes` per wire
    /// packet, if the qdisc is a tail-drop FIFO (`pfifo` or `bfifo`; not
    /// `pfifo_head_drop`, whose drops take a queued packet back).
    pub fn for_qdisc(qdisc: &AnyQdisc, rate_bps: u64, framing_bytes: u32) -> Option<FastFifo> {
        let (limit, limit_in_bytes) = match qdisc {
            AnyQdisc::Pfifo(f) => (f.limit(), false),
            AnyQdisc::Bfifo(f) => (f.limit(), true),
            _ => return None,
        };
        Some(FastFifo {
            rate_bps,
            framing_bytes,
            limit,
            limit_in_bytes,
            pending: VecDeque::new(),
            started: 0,
            queued_bytes: 0,
        })
    }

    /// No transmission pending (the link is idle and everything is counted).
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Settles the starts and the ends strictly before `bound` into `stats`; returns how
    /// many transmissions ended (each a `TxDone` event of the general path).
    #[inline]
    pub fn settle(&mut self, stats: &mut LinkStats, bound: Time) -> u64 {
        while let Some(p) = self.pending.get(self.started) {
            if p.start >= bound {
                break;
            }
            stats.sojourn.record((p.start - p.enqueued).as_ns());
            stats.busy_ns += (p.end - p.start).as_ns();
            self.queued_bytes -= p.len_bytes as u64;
            self.started += 1;
        }
        let mut ended = 0;
        while self.started > 0 {
            let p = self.pending.front().expect("started ones are pending");
            if p.end >= bound {
                break;
            }
            stats.tx_pkts += 1;
            stats.tx_bytes += p.len_bytes as u64;
            self.pending.pop_front();
            self.started -= 1;
            ended += 1;
        }
        ended
    }

    /// Enqueues a packet of `len_bytes` (`wire_packets` frames) at `now`, settled up to
    /// this moment by the caller: tail-dropped if the FIFO is full (sch_fifo: pfifo when
    /// `qlen >= limit`, bfifo when `backlog + len > limit`), else scheduled after the last
    /// pending transmission, or now on an idle link (a cut-through: dequeued at once,
    /// its sojourn 0, counted now).
    #[inline]
    pub fn enqueue(
        &mut self,
        now: Time,
        len_bytes: u32,
        wire_packets: u32,
        stats: &mut LinkStats,
    ) -> Admit {
        let admitted = if self.limit_in_bytes {
            self.queued_bytes + len_bytes as u64 <= self.limit
        } else {
            (self.backlog_packets() as u64) < self.limit
        };
        if !admitted {
            return Admit::Dropped;
        }
        // Busy: a transmission whose end has not been settled (it is later, or now and
        // not yet run at this moment).
        let busy = !self.pending.is_empty();
        let start = self.pending.back().map_or(now, |b| b.end);
        let wire_bytes = len_bytes + self.framing_bytes * wire_packets;
        let end = start + tx_time(wire_bytes as u64, self.rate_bps);
        self.pending.push_back(Pending {
            enqueued: now,
            start,
            end,
            len_bytes,
        });
        if busy {
            self.queued_bytes += len_bytes as u64;
        } else {
            stats.sojourn.record(0);
            stats.busy_ns += (end - start).as_ns();
            self.started += 1;
        }
        Admit::Scheduled { end }
    }

    /// Packets in the FIFO (not started) as of the last settle.
    pub fn backlog_packets(&self) -> usize {
        self.pending.len() - self.started
    }

    /// The backlog as a qdisc a sample reads (`len_packets`, `len_bytes`; a FIFO reports
    /// no metric of its own).
    pub fn backlog_view(&self) -> impl Qdisc {
        BacklogView {
            packets: self.backlog_packets(),
            bytes: self.queued_bytes,
        }
    }
}

/// What a sample reads of a fast link's FIFO: its backlog, computed (the FIFO object of
/// the link's device stays empty).
struct BacklogView {
    packets: usize,
    bytes: u64,
}

impl Qdisc for BacklogView {
    fn enqueue(&mut self, _: Packet, _: Time, _: &mut Drops) -> Verdict {
        unreachable!("a fast link's backlog view is only read")
    }
    fn dequeue(&mut self, _: Time, _: &mut Drops) -> Dequeue {
        unreachable!("a fast link's backlog view is only read")
    }
    fn len_packets(&self) -> usize {
        self.packets
    }
    fn len_bytes(&self) -> u64 {
        self.bytes
    }
    fn ecn_marks(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_core::qdisc::fifo::pfifo_with_limit;

    const MS: u64 = 1_000_000;

    fn t(ns: u64) -> Time {
        Time(ns)
    }

    /// 1000-B packets at 8 Mbit/s without framing take exactly 1 ms. Three arrive at 0,
    /// 0.5 and 0.5 ms into a pfifo of 1: the first goes straight out (0-1 ms), the second
    /// waits (1-2 ms), the third finds the FIFO full and is dropped; one arriving at
    /// 1 ms, the instant the first ends, sees the second still queued unless that end has
    /// run (the bound includes 1 ms).
    #[test]
    fn hand_worked_pfifo_of_one() {
        let mut q = FastFifo::for_qdisc(&AnyQdisc::Pfifo(pfifo_with_limit(1)), 8_000_000, 0)
            .expect("a pfifo");
        let mut st = LinkStats::default();
        assert_eq!(q.settle(&mut st, t(0)), 0);
        assert_eq!(
            q.enqueue(t(0), 1000, 1, &mut st),
            Admit::Scheduled { end: t(MS) }
        );
        assert_eq!(q.settle(&mut st, t(MS / 2)), 0);
        assert_eq!(
            q.enqueue(t(MS / 2), 1000, 1, &mut st),
            Admit::Scheduled { end: t(2 * MS) }
        );
        assert_eq!(q.enqueue(t(MS / 2), 1000, 1, &mut st), Admit::Dropped);
        assert_eq!(q.backlog_packets(), 1);
        // At 1 ms, before the first transmission's end has run: still full.
        assert_eq!(q.settle(&mut st, t(MS)), 0);
        assert_eq!(q.enqueue(t(MS), 1000, 1, &mut st), Admit::Dropped);
        // After it: the second started (waited 0.5 ms), room for one more, from 2 ms.
        assert_eq!(q.settle(&mut st, t(MS + 1)), 1);
        assert_eq!((st.tx_pkts, st.tx_bytes), (1, 1000));
        assert_eq!(q.backlog_packets(), 0);
        assert_eq!(
            q.enqueue(t(MS), 1000, 1, &mut st),
            Admit::Scheduled { end: t(3 * MS) }
        );
        // Everything out by 3 ms: 3 packets, 3 ms busy, sojourns 0, 0.5 and 1 ms.
        assert_eq!(q.settle(&mut st, t(3 * MS + 1)), 2);
        assert!(q.is_empty());
        assert_eq!((st.tx_pkts, st.tx_bytes, st.busy_ns), (3, 3000, 3 * MS));
        assert_eq!(st.sojourn.count(), 3);
        assert_eq!(st.sojourn.max(), Some(MS));
    }

    /// bfifo counts the backlog's bytes (not the packet on the wire): `limit 3000` holds
    /// two 1500-B packets behind the one being sent and refuses even 1 B more.
    #[test]
    fn hand_worked_bfifo() {
        use sojourn_core::qdisc::{BuildCtx, QdiscSpec};
        let ctx = BuildCtx::default();
        let b = QdiscSpec::from_tc_args("bfifo", &["limit", "3000"], &ctx)
            .expect("a bfifo")
            .build(&ctx);
        // 1500 B + 24 B of framing at 12.192 Mbit/s: 1 ms each.
        let mut q = FastFifo::for_qdisc(&b, 12_192_000, 24).expect("a bfifo");
        let mut st = LinkStats::default();
        assert_eq!(
            q.enqueue(t(0), 1500, 1, &mut st),
            Admit::Scheduled { end: t(MS) }
        );
        assert_eq!(
            q.enqueue(t(0), 1500, 1, &mut st),
            Admit::Scheduled { end: t(2 * MS) }
        );
        assert_eq!(
            q.enqueue(t(0), 1500, 1, &mut st),
            Admit::Scheduled { end: t(3 * MS) }
        );
        // Backlog 3000 B: one byte more does not fit.
        assert_eq!(q.enqueue(t(0), 1, 1, &mut st), Admit::Dropped);
        assert_eq!(q.backlog_view().len_bytes(), 3000);
        assert_eq!(q.backlog_view().len_packets(), 2);
    }
}
