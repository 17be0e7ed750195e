//! Streaming metrics: time series in long form and the optional packet log.

use sojourn_core::qdisc::DropReason;
use sojourn_core::{Packet, Time};
use std::collections::HashMap;

/// Samples `(time, series, value)`, where a series is an (entity, metric) pair such as
/// ("bottleneck", "queue_packets") or ("flow3", "cwnd_bytes").
#[derive(Default)]
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
    /// Takes the first `n` rows out (the streaming writer's chunk), keeping the series
    /// names and the vectors' capacity, so later pushes do not reallocate.
    pub fn drain_front(&mut self, n: usize) -> (Vec<u64>, Vec<u32>, Vec<f64>) {
        let n = n.min(self.len());
        (
            self.t_ns.drain(..n).collect(),
            self.series.drain(..n).collect(),
            self.value.drain(..n).collect(),
        )
    }
}

/// One row per logged packet event (dequeue or drop) on logged links.
#[derive(Default)]
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
        self.flow.push(p.flow);
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
