//! Logging: the links' time series samples (by the shared builder,
//! [`TimeSeries::push_link`](sojourn_record::metrics::TimeSeries::push_link)) and the packet log, moved to the run's outboxes while the
//! run proceeds so the forwarder does not hold them to the end.

use super::pool::SLOT_BITS;
use super::{Forwarder, Sample, SERIES_OUTBOX_ROWS};
use sojourn_core::qdisc::{DropReason, Qdisc};
use sojourn_core::{Packet, Time};
use sojourn_record::metrics::{LinkCounts, PacketLog};

impl Forwarder {
    /// Samples the links at `t` (the state now) into `samples`, and into the time series
    /// stamped `grid` (the sample's scheduled time) if given.
    pub(super) fn sample(&mut self, t: Time, grid: Option<Time>) {
        if let (Some(g), Some(iv)) = (grid, self.sample_interval) {
            if g <= self.series_until {
                for &li in &self.series_links {
                    let l = &mut self.links[li];
                    let counts = LinkCounts {
                        tx_bytes: l.rep.delivered_bytes,
                        drops: l.rep.dropped(),
                        ecn_marks: l.dev.qdisc.ecn_marks(),
                    };
                    self.series.push_link(
                        g,
                        &l.plan.name,
                        &mut l.dev.qdisc,
                        None,
                        counts,
                        &mut l.prev_counts,
                        iv.as_secs_f64(),
                    );
                }
                if let Some(o) = &self.series_outbox {
                    if self.series.len() >= SERIES_OUTBOX_ROWS {
                        let rows = self.series.drain_front(usize::MAX);
                        o.lock().unwrap_or_else(|e| e.into_inner()).push(rows);
                    }
                }
            }
        }
        if !self.keep_samples {
            return;
        }
        for (i, l) in self.links.iter().enumerate() {
            self.samples.push(Sample {
                t_ns: t.as_ns(),
                link: i,
                qlen_pkts: l.dev.qdisc.len_packets() as u64,
                qlen_bytes: l.dev.qdisc.len_bytes(),
                delivered_bytes: l.rep.delivered_bytes,
                delivered_pkts: l.rep.delivered_pkts,
                dropped_pkts: l.rep.dropped(),
            });
        }
    }
    /// Moves the packet log gathered so far, with the new connections' keys, to the
    /// outbox (if there is one).
    pub(super) fn move_packets(&mut self) {
        let Some(o) = &self.packets_outbox else {
            return;
        };
        let rows = self.packets.drain_front(usize::MAX);
        let keys = self.flows.conns[self.conns_moved..]
            .iter()
            .map(|c| c.key)
            .collect();
        self.conns_moved = self.flows.conns.len();
        o.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((rows, keys));
    }
}

/// Logs a dequeue (`reason = None`) or drop of `p` on link `li` at `t` in the shared
/// packet log, with the packet's number (not its buffer slot) as its uid and
/// `2 × connection id + reply` as its flow ([`ForwarderReport::packets`](super::ForwarderReport::packets)).
pub(super) fn log_packet(
    log: &mut PacketLog,
    t: Time,
    li: usize,
    p: &Packet,
    reason: Option<DropReason>,
    sample: f64,
    reply: bool,
) {
    let mut q = *p;
    q.uid >>= SLOT_BITS;
    q.tag = ((p.conversation() << 1) | reply as u32) as u64;
    log.push(t, li as u32, &q, reason, sample);
}
