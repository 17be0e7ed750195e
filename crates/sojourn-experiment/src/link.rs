//! How a link serialises: a constant rate, a rate schedule or a Mahimahi trace.

use sojourn_core::device::{RateModel, Trace};
use sojourn_core::Time;
use std::path::Path;

/// A link's rate as the experiment file gives it (the engine keeps the running state).
#[derive(Clone, Debug, PartialEq)]
pub enum LinkRate {
    /// A constant rate in bit/s.
    Constant(u64),
    /// Piecewise constant: `(from, rate_bps)` sorted by time; the first entry is at 0.
    /// A packet is serialised at the rate in force when its transmission starts.
    Schedule(Vec<(Time, u64)>),
    /// A Mahimahi trace: delivery opportunities.
    Trace(TraceSpec),
}

impl LinkRate {
    /// The rate at time 0 in bit/s (0 for a trace, which has no nominal rate).
    pub fn initial_bps(&self) -> u64 {
        match self {
            LinkRate::Constant(r) => *r,
            LinkRate::Schedule(s) => s.first().map_or(0, |&(_, r)| r),
            LinkRate::Trace(_) => 0,
        }
    }

    /// The mean rate in bit/s over `[0, over)`: the constant rate; a schedule's rates
    /// weighted by how long each is in force; a trace's bytes per period (its delivery
    /// opportunities × bytes each) over the period. What an open loop's offered load is
    /// compared with (`experiment::check_overload`).
    pub fn mean_bps(&self, over: sojourn_core::Duration) -> f64 {
        match self {
            LinkRate::Constant(r) => *r as f64,
            LinkRate::Schedule(s) => {
                let end = over.0.max(1);
                let mut sum = 0.0;
                for (i, &(from, r)) in s.iter().enumerate() {
                    let to = s.get(i + 1).map_or(end, |&(t, _)| t.0.min(end));
                    if from.0 < to {
                        sum += r as f64 * (to - from.0) as f64;
                    }
                }
                sum / end as f64
            }
            LinkRate::Trace(t) => {
                let bytes = t.opportunities_ms.len() as f64 * t.bytes_per_opportunity as f64;
                bytes * 8.0 * 1000.0 / t.period_ms() as f64
            }
        }
    }
}

/// The rate model of the sans-IO link device ([`sojourn_core::device`]) for a link's
/// rate: what every engine's serialiser runs (the simulator's links and the live
/// forwarder's), from the same model.
pub fn rate_model(r: &LinkRate) -> RateModel {
    match r {
        LinkRate::Constant(bps) => RateModel::Constant(*bps),
        LinkRate::Schedule(s) => RateModel::Schedule(s.clone()),
        LinkRate::Trace(t) => RateModel::Trace(Trace::new(
            t.opportunities_ms.clone(),
            t.bytes_per_opportunity,
        )),
    }
}

/// A Mahimahi trace: delivery opportunities at these millisecond offsets, repeating every
/// period (the last offset), each carrying up to `bytes_per_opportunity` bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSpec {
    pub opportunities_ms: Vec<u64>,
    pub bytes_per_opportunity: u32,
}

impl TraceSpec {
    /// The period after which the trace repeats (its last timestamp, at least 1 ms).
    pub fn period_ms(&self) -> u64 {
        *self.opportunities_ms.last().unwrap_or(&1).max(&1)
    }
}

/// The largest trace file accepted (64 MiB, about 10 million delivery opportunities:
/// hours of a 100 Mbit/s Mahimahi trace). Larger files are refused before reading, so
/// `/dev/zero` or a runaway file cannot exhaust memory.
pub const MAX_TRACE_BYTES: u64 = 64 * 1024 * 1024;

/// Reads a Mahimahi trace: one delivery opportunity per line, in ms since the start.
/// Only regular files (a FIFO would block `validate` forever, a device never ends), at
/// most [`MAX_TRACE_BYTES`].
pub fn load_trace(path: &Path) -> Result<Vec<u64>, String> {
    let text = crate::files::read_regular_text(path, "trace", MAX_TRACE_BYTES)?;
    parse_trace(&text, &path.display().to_string())
}

/// Parses the text of a Mahimahi trace (`name` labels messages). Separate from
/// [`load_trace`] so that it can be fuzzed without files.
pub fn parse_trace(text: &str, name: &str) -> Result<Vec<u64>, String> {
    let mut ops = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let v: u64 = l.parse().map_err(|_| {
            format!(
                "{name}:{}: expected a whole number of milliseconds, got {}",
                i + 1,
                crate::files::excerpt(l)
            )
        })?;
        if let Some(&last) = ops.last() {
            if v < last {
                return Err(format!(
                    "{name}:{}: timestamps must not decrease ({v} after {last})",
                    i + 1
                ));
            }
        }
        ops.push(v);
    }
    if ops.is_empty() {
        return Err(format!("trace {name} has no delivery opportunities"));
    }
    if *ops.last().unwrap() == 0 {
        return Err(format!(
            "trace {name}: the last timestamp (the period) must be positive"
        ));
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_core::Duration;

    /// The device's rate model carries the file's rate: its capacity over an interval,
    /// worked out by hand, is the link's.
    #[test]
    fn rate_model_carries_the_links_rate() {
        let ms = |n: u64| Time::ZERO + Duration::from_ms(n);
        // 10 Mbit/s for 2 s: 20,000,000 bits.
        let c = rate_model(&LinkRate::Constant(10_000_000));
        assert_eq!(c.capacity_bits_between(ms(0), ms(2000)), 20_000_000.0);
        // 1 Mbit/s to 1 s, then 3 Mbit/s: over [0.5 s, 1.5 s) 500,000 + 1,500,000 bits.
        let s = rate_model(&LinkRate::Schedule(vec![
            (ms(0), 1_000_000),
            (ms(1000), 3_000_000),
        ]));
        assert_eq!(s.capacity_bits_between(ms(500), ms(1500)), 2_000_000.0);
        // Opportunities at 1, 2 and 4 ms, repeating every 4 ms, of 1500 B each: [0.5 ms,
        // 8.5 ms) holds six (1, 2, 4, 5, 6, 8 ms), 72,000 bits.
        let t = rate_model(&LinkRate::Trace(TraceSpec {
            opportunities_ms: vec![1, 2, 4],
            bytes_per_opportunity: 1500,
        }));
        let us = |n: u64| Time::ZERO + Duration::from_us(n);
        assert_eq!(t.capacity_bits_between(us(500), us(8500)), 72_000.0);
    }
}
