//! Streaming metrics: time series in long form and the optional packet log.

use sojourn_core::qdisc::{DropReason, Qdisc};
use sojourn_core::{Packet, Time};
use std::collections::HashMap;

/// Samples `(time, series, value)`, where a series is an (entity, metric) pair such as
/// ("bottleneck", "queue_packets") or ("flow3", "cwnd_bytes").
#[derive(Clone, Debug, Default)]
pub struct TimeSeries {
    pub names: Vec<(String, String)>,
    index: HashMap<(String, String), u32>,
    pub t_ns: Vec<u64>,
    pub series: Vec<u32>,
    pub value: Vec<f64>,
}

impl TimeSeries {
    pub fn push(&mut self, t: Time, entity: &str, metric: &str, v: f64) {
        let key = (entity.to_string(), metric.to_string());
        let id = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.names.len() as u32;
                self.names.push(key.clone());
                self.index.insert(key, i);
                i
            }
        };
        self.t_ns.push(t.0);
        self.series.push(id);
        self.value.push(v);
    }
    pub fn len(&self) -> usize {
        self.t_ns.len()
    }
    pub fn is_empty(&self) -> bool {
        self.t_ns.is_empty()
    }
    /// Takes the first `n` rows out as a series of their own (the streaming writer's
    /// chunk, with the names of every series known so far), keeping this series' names and
    /// its vectors' capacity, so later pushes do not reallocate.
    pub fn drain_front(&mut self, n: usize) -> TimeSeries {
        let n = n.min(self.len());
        TimeSeries {
            names: self.names.clone(),
            index: HashMap::new(),
            t_ns: self.t_ns.drain(..n).collect(),
            series: self.series.drain(..n).collect(),
            value: self.value.drain(..n).collect(),
        }
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
        let d_tx = now_counts.tx_bytes.wrapping_sub(prev.tx_bytes);
        let d_drop = now_counts.drops.wrapping_sub(prev.drops);
        let d_marks = now_counts.ecn_marks.saturating_sub(prev.ecn_marks);
        *prev = now_counts;
        self.push(now, name, "queue_packets", qdisc.len_packets() as f64);
        self.push(now, name, "queue_bytes", qdisc.len_bytes() as f64);
        if let Some(r) = ring_packets {
            self.push(now, name, "ring_packets", r as f64);
        }
        if now > Time::ZERO {
            self.push(now, name, "throughput_bps", d_tx as f64 * 8.0 / dt_s);
            self.push(now, name, "drops", d_drop as f64);
            self.push(now, name, "ecn_marks", d_marks as f64);
        }
        qdisc.observe(now, &mut |metric, v| self.push(now, name, metric, v));
    }

    /// Appends every sample of `other`, keeping each row's time (series ids are mapped
    /// to this series' own). Rows are merged in time order, this series' rows first at
    /// equal times, so the result is sorted by time when both were.
    pub fn merge(&mut self, other: &TimeSeries) {
        let mine = std::mem::take(self);
        let (mut i, mut j) = (0, 0);
        while i < mine.len() || j < other.len() {
            let take_mine = j >= other.len() || (i < mine.len() && mine.t_ns[i] <= other.t_ns[j]);
            let (src, k) = if take_mine { (&mine, i) } else { (other, j) };
            let (e, m) = &src.names[src.series[k] as usize];
            self.push(Time(src.t_ns[k]), e, m, src.value[k]);
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
