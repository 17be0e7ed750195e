//! The vocabulary the application machines and their engines share (apps/mod.rs): what a
//! machine asks for ([`Action`]), what it is told ([`Done`]), what it measures ([`Sample`],
//! [`AppSummary`]). A leaf: it imports no other module of the model.

use sojourn_core::params::{ConfResult, Params};
use sojourn_core::Time;

/// Names a transfer (or a load connection) of one machine; the engine hands it back.
pub type Token = u64;

/// What a transfer carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Body {
    /// `n` bytes, then the connection closes.
    Sized(u64),
    /// An unbounded transfer (a load-generating connection) until [`Action::Stop`].
    Bulk,
}

/// Something a machine asks its engine to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Open a TCP transfer from `src` to `dst` now and report its completion (the
    /// receiving application has every byte) as `token`; `handshake = false` is a
    /// transfer on a connection that is already open (no SYN exchange). A `Bulk` body
    /// never completes; `token` then names the connection for `Append` and `Stop`.
    Open {
        token: Token,
        src: u32,
        dst: u32,
        body: Body,
        handshake: bool,
    },
    /// Write `bytes` on load connection `load` behind what its sending socket already
    /// holds, and report as `token` when its receiver has them (a self probe).
    Append {
        token: Token,
        load: Token,
        bytes: u64,
    },
    /// The load connection `load` stops writing: it sends what it holds and closes.
    Stop { load: Token },
}

/// A measurement: the engine records `value` at the report's time under entity
/// `w{index}.{entity}` and `metric` (timeseries.parquet; `sojourn.load(..., what="apps")`).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub entity: &'static str,
    pub metric: &'static str,
    pub value: f64,
}

/// What to do after a call: the actions in order, the samples taken, and the next wake-up.
#[derive(Clone, Debug, Default)]
pub struct AppStep {
    pub actions: Vec<Action>,
    pub samples: Vec<Sample>,
    pub wake_at: Option<Time>,
}

/// "Transfer `token` finished at `at`"; `connected_at` is when its connection was
/// established (the SYN-ACK arrived) for a transfer opened with a handshake.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    pub token: Token,
    pub at: Time,
    pub connected_at: Option<Time>,
}

/// A machine's numbers at the end of the run: `(name, value)` pairs, grouped by a section
/// name (`""` for the top level; `rpm` uses `downlink` and `uplink`). A measurement the run
/// could not take (no probe in the window, no page finished) is `Real(None)`: JSON `null`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AppSummary {
    pub sections: Vec<(&'static str, Numbers)>,
}

/// Named numbers of a summary section.
pub type Numbers = Vec<(&'static str, Number)>;

/// A summary number: a count (a JSON integer) or a measurement (`None`: not measured,
/// JSON `null`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    Count(u64),
    Real(Option<f64>),
}

/// Where and when one entry runs.
#[derive(Clone, Copy, Debug)]
pub struct Ends {
    /// Sends the bulk of the bytes (the workload's `from`).
    pub server: u32,
    /// Asks (the workload's `to`).
    pub client: u32,
    pub start: Time,
    /// The workload's `stop` (`Time::MAX` without one).
    pub stop: Time,
}

/// Mean, median, 95th percentile and maximum of `v` (sorted in place); `None`s when empty.
pub fn describe(v: &mut [f64]) -> [Option<f64>; 4] {
    if v.is_empty() {
        return [None; 4];
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        // Nearest rank (the smallest value with at least p of the samples at or below it).
        let k = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[k - 1]
    };
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    [Some(mean), Some(q(0.5)), Some(q(0.95)), v.last().copied()]
}

/// A message size key (a request, a response, a TLS flight): bytes, 1 B to 1 GiB.
pub fn message_bytes(p: &mut Params, key: &str, default: u64) -> ConfResult<u64> {
    let b = p.bytes(key, default)?;
    if b == 0 || b > 1 << 30 {
        return Err(p.err(key, format!("{b} B is outside 1 B..1 GiB")));
    }
    Ok(b)
}
