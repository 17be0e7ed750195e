//! Streaming metrics: time series in long form and the optional packet log.

use sojourn_core::qdisc::{DropReason, Qdisc};
use sojourn_core::{Packet, Time};
use std::collections::HashMap;

/// Samples `(time, series, value)`, where a series is an (entity, metric) pair such as
/// ("bottleneck", "queue_packets") or ("flow3", "cwnd_bytes").
///
/// Series ids are assigned in first-push order (`names[id]`). Recording is on every run's
/// path (a 1,024-pair dumbbell pushes ~12 M rows a minute), so a row must not allocate or
/// hash two strings: an entity is resolved once to an [`EntityId`] (callers that sample
/// the same entity repeatedly keep it), and within an entity each metric remembers which
/// metric was pushed after it last time, so a sample that repeats the previous sample's
/// order (every engine's does) finds each id with one string comparison. Anything else
/// (a new metric, a changed order) falls back to the entity's hash map: same ids, slower.
#[derive(Clone, Debug, Default)]
pub struct TimeSeries {
    pub names: Vec<(String, String)>,
    /// Entity name -> its slot in `entities`.
    entity_index: HashMap<Box<str>, u32>,
    entities: Vec<EntityKeys>,
    pub t_ns: Vec<u64>,
    pub series: Vec<u32>,
    pub value: Vec<f64>,
}

/// An entity of a [`TimeSeries`] resolved once ([`TimeSeries::entity`]), so that pushing
/// its rows does not hash its name. Valid for the series that issued it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntityId(u32);

const NO_SLOT: u32 = u32::MAX;

/// The metrics an entity has series for, in first-push order.
#[derive(Clone, Debug)]
struct EntityKeys {
    name: Box<str>,
    metrics: Vec<MetricSlot>,
    /// Metric name -> slot in `metrics` (the fallback when the guess is wrong).
    index: HashMap<Box<str>, u32>,
    /// The slot pushed last (`NO_SLOT` before the first push).
    last: u32,
    /// The series ids of [`LINK_METRICS`] once pushed (`NO_SLOT` before): a link sample
    /// pushes them without looking them up.
    link_ids: [u32; LINK_METRICS.len()],
}

/// The metrics every link sample pushes itself ([`TimeSeries::push_link`]), in order.
const LINK_METRICS: [&str; 6] = [
    "queue_packets",
    "queue_bytes",
    "ring_packets",
    "throughput_bps",
    "drops",
    "ecn_marks",
];

#[derive(Clone, Debug)]
struct MetricSlot {
    name: Box<str>,
    /// The series id.
    id: u32,
    /// The slot pushed right after this one last time: the guess for the next push.
    next: u32,
}

impl TimeSeries {
    pub fn push(&mut self, t: Time, entity: &str, metric: &str, v: f64) {
        let e = self.entity(entity);
        self.push_at(t, e, metric, v);
    }

    /// The handle of `entity` (registered on first use; registering creates no series).
    pub fn entity(&mut self, entity: &str) -> EntityId {
        if let Some(&e) = self.entity_index.get(entity) {
            return EntityId(e);
        }
        let e = self.entities.len() as u32;
        self.entities.push(EntityKeys {
            name: entity.into(),
            metrics: Vec::new(),
            index: HashMap::new(),
            last: NO_SLOT,
            link_ids: [NO_SLOT; LINK_METRICS.len()],
        });
        self.entity_index.insert(entity.into(), e);
        EntityId(e)
    }

    /// The series id of (`entity`, `metric`), assigned now if it is new.
    #[inline]
    pub fn series_id(&mut self, entity: EntityId, metric: &str) -> u32 {
        let ek = &mut self.entities[entity.0 as usize];
        let guess = match ek.last {
            NO_SLOT => NO_SLOT,
            last => ek.metrics[last as usize].next,
        };
        let slot = if guess != NO_SLOT && &*ek.metrics[guess as usize].name == metric {
            guess
        } else {
            match ek.index.get(metric) {
                Some(&s) => s,
                None => {
                    let s = ek.metrics.len() as u32;
                    let id = self.names.len() as u32;
                    self.names.push((ek.name.to_string(), metric.to_string()));
                    ek.metrics.push(MetricSlot {
                        name: metric.into(),
                        id,
                        next: NO_SLOT,
                    });
                    ek.index.insert(metric.into(), s);
                    s
                }
            }
        };
        if ek.last != NO_SLOT {
            ek.metrics[ek.last as usize].next = slot;
        }
        ek.last = slot;
        ek.metrics[slot as usize].id
    }

    /// The series id of the link metric `LINK_METRICS[k]` of `entity`; looked up (and
    /// assigned, in push order like every other) only at its first row.
    #[inline]
    fn link_metric_id(&mut self, entity: EntityId, k: usize) -> u32 {
        let id = self.entities[entity.0 as usize].link_ids[k];
        if id != NO_SLOT {
            return id;
        }
        let id = self.series_id(entity, LINK_METRICS[k]);
        self.entities[entity.0 as usize].link_ids[k] = id;
        id
    }

    /// Pushes one row of (`entity`, `metric`).
    #[inline]
    pub fn push_at(&mut self, t: Time, entity: EntityId, metric: &str, v: f64) {
        let id = self.series_id(entity, metric);
        self.push_id(t, id, v);
    }

    /// Pushes one row of the series `id` (from [`TimeSeries::series_id`]).
    #[inline]
    pub fn push_id(&mut self, t: Time, id: u32, v: f64) {
        debug_assert!((id as usize) < self.names.len());
        self.t_ns.push(t.0);
        self.series.push(id);
        self.value.push(v);
    }

    /// Pushes `N` rows at `t` at once (a fixed-size copy per column, one capacity check
    /// each rather than one per row).
    #[inline(always)]
    fn push_rows<const N: usize>(&mut self, t: Time, ids: [u32; N], values: [f64; N]) {
        self.t_ns.extend_from_slice(&[t.0; N]);
        self.series.extend_from_slice(&ids);
        self.value.extend_from_slice(&values);
    }

    /// Room for `rows` more rows without reallocating.
    pub fn reserve(&mut self, rows: usize) {
        self.t_ns.reserve(rows);
        self.series.reserve(rows);
        self.value.reserve(rows);
    }

    pub fn len(&self) -> usize {
        self.t_ns.len()
    }
    pub fn is_empty(&self) -> bool {
        self.t_ns.is_empty()
    }
    /// Takes the first `n` rows out as a series of their own (the streaming writer's
    /// chunk, with the names of every series known so far; only for reading: its rows
    /// and names, not for further pushes), keeping this series' names and its vectors'
    /// capacity, so later pushes do not reallocate.
    pub fn drain_front(&mut self, n: usize) -> TimeSeries {
        let n = n.min(self.len());
        TimeSeries {
            names: self.names.clone(),
            t_ns: self.t_ns.drain(..n).collect(),
            series: self.series.drain(..n).collect(),
            value: self.value.drain(..n).collect(),
            ..TimeSeries::default()
        }
    }

    /// Takes the first `n` rows out as `(t_ns, series, value)` (the streaming writer's
    /// chunk, without copying the names), keeping the vectors' capacity.
    pub fn drain_rows(&mut self, n: usize) -> (Vec<u64>, Vec<u32>, Vec<f64>) {
        let n = n.min(self.len());
        (
            self.t_ns.drain(..n).collect(),
            self.series.drain(..n).collect(),
            self.value.drain(..n).collect(),
        )
    }

    /// One sample of a link's series — the same for every engine (the simulator's links
    /// and the live forwarder's): `queue_packets`, `queue_bytes`, `ring_packets` (if the
    /// link has a ring), then, after time zero, `throughput_bps`, `drops` and `ecn_marks`
    /// over the `dt_s` since the previous sample, then the discipline's own metrics
    /// ([`Qdisc::observe`]). `now_counts` are the link's cumulative counters; deltas are
    /// taken against `prev` (wrapping for bytes and drops, so an engine may move `prev`
    /// when it resets its counters at the end of warm-up), which becomes `now_counts`.
    #[allow(clippy::too_many_arguments)]
    pub fn push_link(
        &mut self,
        now: Time,
        name: &str,
        qdisc: &mut dyn Qdisc,
        ring_packets: Option<usize>,
        now_counts: LinkCounts,
        prev: &mut LinkCounts,
        dt_s: f64,
    ) {
        let e = self.entity(name);
        self.push_link_at(now, e, qdisc, ring_packets, now_counts, prev, dt_s);
    }

    /// [`TimeSeries::push_link`] for an entity already resolved ([`TimeSeries::entity`]).
    /// Generic over the discipline's type: the engine's `AnyQdisc` answers its queue
    /// lengths inline rather than through two virtual calls per sample (issue 19, session
    /// 11: ~36 of a link sample's ~300 instructions on row A).
    #[allow(clippy::too_many_arguments)]
    pub fn push_link_at<Q: Qdisc + ?Sized>(
        &mut self,
        now: Time,
        e: EntityId,
        qdisc: &mut Q,
        ring_packets: Option<usize>,
        now_counts: LinkCounts,
        prev: &mut LinkCounts,
        dt_s: f64,
    ) {
        let d_tx = now_counts.tx_bytes.wrapping_sub(prev.tx_bytes);
        let d_drop = now_counts.drops.wrapping_sub(prev.drops);
        let d_marks = now_counts.ecn_marks.saturating_sub(prev.ecn_marks);
        *prev = now_counts;
        let full = now > Time::ZERO;
        // Every sample after a link's first two: its series ids are all known, and its
        // rows go straight in (issue 19, session 10: the general path below, with its
        // row tables and copies, was ~390 instructions a link sample, 5.5 % of a 30-s
        // 16-flow dumbbell's run; the rows are the same, in the same order).
        let ids = self.entities[e.0 as usize].link_ids;
        let known = |k: usize| ids[k] != NO_SLOT;
        if known(0)
            && known(1)
            && (ring_packets.is_none() || known(2))
            && (!full || (known(3) && known(4) && known(5)))
        {
            let (q_pkts, q_bytes) = (qdisc.len_packets() as f64, qdisc.len_bytes() as f64);
            let rates = [d_tx as f64 * 8.0 / dt_s, d_drop as f64, d_marks as f64];
            let [_, _, ring_id, tx, drops, marks] = ids;
            match (ring_packets, full) {
                (None, true) => self.push_rows(
                    now,
                    [ids[0], ids[1], tx, drops, marks],
                    [q_pkts, q_bytes, rates[0], rates[1], rates[2]],
                ),
                (None, false) => self.push_rows(now, [ids[0], ids[1]], [q_pkts, q_bytes]),
                (Some(r), true) => self.push_rows(
                    now,
                    [ids[0], ids[1], ring_id, tx, drops, marks],
                    [q_pkts, q_bytes, r as f64, rates[0], rates[1], rates[2]],
                ),
                (Some(r), false) => {
                    self.push_rows(now, [ids[0], ids[1], ring_id], [q_pkts, q_bytes, r as f64])
                }
            }
            qdisc.observe(now, &mut |metric, v| self.push_at(now, e, metric, v));
            return;
        }
        // The link's own rows go in with one copy per column; ids are resolved in push
        // order first, so a new series gets its id in the same order as row by row.
        let mut rows = [(0usize, 0.0f64); LINK_METRICS.len()];
        let mut n = 0;
        let mut row = |k: usize, v: f64| {
            rows[n] = (k, v);
            n += 1;
        };
        row(0, qdisc.len_packets() as f64);
        row(1, qdisc.len_bytes() as f64);
        if let Some(r) = ring_packets {
            row(2, r as f64);
        }
        if full {
            row(3, d_tx as f64 * 8.0 / dt_s);
            row(4, d_drop as f64);
            row(5, d_marks as f64);
        }
        let mut ids = [0u32; LINK_METRICS.len()];
        let mut values = [0.0f64; LINK_METRICS.len()];
        for (i, &(k, v)) in rows[..n].iter().enumerate() {
            ids[i] = self.link_metric_id(e, k);
            values[i] = v;
        }
        self.t_ns.extend(std::iter::repeat_n(now.0, n));
        self.series.extend_from_slice(&ids[..n]);
        self.value.extend_from_slice(&values[..n]);
        qdisc.observe(now, &mut |metric, v| self.push_at(now, e, metric, v));
    }

    /// Appends every sample of `other`, keeping each row's time (series ids are mapped
    /// to this series' own). Rows are merged in time order, this series' rows first at
    /// equal times, so the result is sorted by time when both were.
    pub fn merge(&mut self, other: &TimeSeries) {
        let mine = std::mem::take(self);
        self.reserve(mine.len() + other.len());
        // Each source id's id here, resolved (by name) at its first row: the ids are
        // assigned in the merged rows' first-appearance order.
        let mut map = [
            vec![NO_SLOT; mine.names.len()],
            vec![NO_SLOT; other.names.len()],
        ];
        let (mut i, mut j) = (0, 0);
        while i < mine.len() || j < other.len() {
            let take_mine = j >= other.len() || (i < mine.len() && mine.t_ns[i] <= other.t_ns[j]);
            let (src, k, m) = if take_mine {
                (&mine, i, &mut map[0])
            } else {
                (other, j, &mut map[1])
            };
            let s = src.series[k] as usize;
            if m[s] == NO_SLOT {
                let (en, mn) = &src.names[s];
                let e = self.entity(en);
                m[s] = self.series_id(e, mn);
            }
            self.push_id(Time(src.t_ns[k]), m[s], src.value[k]);
            if take_mine {
                i += 1;
            } else {
                j += 1;
            }
        }
    }
}

/// A link's cumulative counters at a time series sample ([`TimeSeries::push_link`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounts {
    /// Bytes sent over the link.
    pub tx_bytes: u64,
    /// Packets dropped (every reason).
    pub drops: u64,
    /// CE marks the discipline made ([`Qdisc::ecn_marks`]).
    pub ecn_marks: u64,
}

/// One row per logged packet event (dequeue or drop) on logged links.
#[derive(Clone, Debug, Default)]
pub struct PacketLog {
    pub t_ns: Vec<u64>,
    pub link: Vec<u32>,
    pub uid: Vec<u64>,
    pub flow: Vec<u32>,
    pub len_bytes: Vec<u32>,
    /// 255 = dequeued, otherwise the `DropReason` code.
    pub event: Vec<u8>,
    pub sojourn_ns: Vec<u64>,
    pub ecn: Vec<u8>,
    pub priority: Vec<u32>,
    pub ct_bytes: Vec<u64>,
}

impl PacketLog {
    /// Logs a dequeue (`reason = None`) or a drop. With `sample < 1` only packets whose uid
    /// hashes below the fraction are kept (deterministic, and a kept packet is kept at
    /// every link).
    #[inline]
    pub fn push(
        &mut self,
        now: Time,
        link: u32,
        p: &Packet,
        reason: Option<DropReason>,
        sample: f64,
    ) {
        if sample < 1.0 {
            let h = sojourn_core::rng::splitmix64_mix(p.uid) as f64 / u64::MAX as f64;
            if h >= sample {
                return;
            }
        }
        self.t_ns.push(now.0);
        self.link.push(link);
        self.uid.push(p.uid);
        self.flow.push(p.conversation());
        self.len_bytes.push(p.len_bytes);
        self.event.push(reason.map(|r| r as u8).unwrap_or(255));
        self.sojourn_ns.push((now - p.enqueued_at).0);
        self.ecn.push(p.ecn as u8);
        self.priority.push(p.priority);
        self.ct_bytes.push(p.ct_bytes);
    }
    pub fn len(&self) -> usize {
        self.t_ns.len()
    }
    pub fn is_empty(&self) -> bool {
        self.t_ns.is_empty()
    }
    /// Takes the first `n` rows out (the streaming writer's chunk), keeping the vectors'
    /// capacity, so the per-packet pushes that follow do not reallocate.
    pub fn drain_front(&mut self, n: usize) -> PacketLog {
        let n = n.min(self.len());
        PacketLog {
            t_ns: self.t_ns.drain(..n).collect(),
            link: self.link.drain(..n).collect(),
            uid: self.uid.drain(..n).collect(),
            flow: self.flow.drain(..n).collect(),
            len_bytes: self.len_bytes.drain(..n).collect(),
            event: self.event.drain(..n).collect(),
            sojourn_ns: self.sojourn_ns.drain(..n).collect(),
            ecn: self.ecn.drain(..n).collect(),
            priority: self.priority.drain(..n).collect(),
            ct_bytes: self.ct_bytes.drain(..n).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_core::qdisc::{fifo::pfifo_with_limit, AnyQdisc, Drops};

    /// A link's samples, worked out by hand: at time zero the queue only (one 1000-B
    /// packet: 1 packet, 1000 bytes); later the deltas too (125,000 B in 0.5 s =
    /// 2,000,000 bit/s); a ring adds its row after the queue's. Series ids follow the
    /// first push of each metric, and a sample whose ids are all known (the third of a
    /// ring-less link, the fourth here) writes the same rows as the first time.
    #[test]
    fn link_samples_push_their_rows_in_order() {
        let mut ts = TimeSeries::default();
        let e = ts.entity("l");
        let mut q = AnyQdisc::Pfifo(pfifo_with_limit(10));
        q.enqueue(Packet::synthetic(1, 1, 1000), Time::ZERO, &mut Drops::new());
        let mut prev = LinkCounts::default();
        let counts = |tx_bytes, drops| LinkCounts {
            tx_bytes,
            drops,
            ecn_marks: 0,
        };
        let s = 1_000_000_000;
        for (k, (ring, tx, drops)) in [
            (None, 0, 0),
            (None, 125_000, 2),
            (None, 250_000, 2),
            (Some(3), 375_000, 2),
            (Some(3), 500_000, 5),
        ]
        .into_iter()
        .enumerate()
        {
            let now = Time(k as u64 * s / 2);
            ts.push_link_at(now, e, &mut q, ring, counts(tx, drops), &mut prev, 0.5);
        }
        let names: Vec<&str> = ts.names.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(
            names,
            [
                "queue_packets",
                "queue_bytes",
                "throughput_bps",
                "drops",
                "ecn_marks",
                "ring_packets"
            ]
        );
        let rows: Vec<(u64, u32, f64)> = (0..ts.len())
            .map(|i| (ts.t_ns[i], ts.series[i], ts.value[i]))
            .collect();
        let h = s / 2;
        let mut want = vec![(0, 0, 1.0), (0, 1, 1000.0)];
        for (t, ring, drops) in [(h, None, 2.0), (2 * h, None, 0.0), (3 * h, Some(3.0), 0.0)]
            .into_iter()
            .chain([(4 * h, Some(3.0), 3.0)])
        {
            want.extend([(t, 0, 1.0), (t, 1, 1000.0)]);
            if let Some(r) = ring {
                want.push((t, 5, r));
            }
            want.extend([(t, 2, 2_000_000.0), (t, 3, drops), (t, 4, 0.0)]);
        }
        assert_eq!(rows, want);
    }
}
