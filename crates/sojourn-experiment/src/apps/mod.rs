//! Application workloads measured at the application: responsiveness (`rpm`), web page
//! loads (`web`) and adaptive video (`video`) (docs/tests.md).
//!
//! Each is a sans-IO state machine like [`crate::schedule::Generator`], but one that keeps
//! several transfers in the air and measures them: it asks its engine to open TCP
//! transfers ([`Action::Open`]), to write a few bytes on one of its long-running
//! connections behind what that connection already holds ([`Action::Append`], a self probe),
//! or to stop writing on one ([`Action::Stop`]); the engine reports back "transfer
//! `token` finished at t" ([`Done`]). The machine turns those times into its metrics:
//! samples (one per probe, page or segment: the engine records them in its time series)
//! and a summary at the end of the run ([`AppSummary`]).
//!
//! Endpoints: `from` is the server (it sends the bulk of the bytes, like every other TCP
//! kind's `from`), `to` the client (it asks). On a dumbbell, pair i's server is `s{i}`
//! and its client `d{i}`, so downloads cross the `bottleneck` link.
//!
//! Random choices (object sizes, think times, the load connection a self probe rides on)
//! come from the workload's stream `Rng::stream(seed, "workload{index}", i)`, drawn in a
//! fixed order: same file and seed, same traffic.

pub mod rpm;
pub mod video;
pub mod web;

use crate::workload::{Context, TcpPlan};
use sojourn_core::params::{ConfResult, Params};
use sojourn_core::rng::Rng;
use sojourn_core::Time;

/// The application kinds (their `kind = ...` names).
pub const APP_KINDS: &[&str] = &["rpm", "web", "video"];

/// A parsed application workload.
#[derive(Clone, Debug)]
pub enum AppKind {
    Rpm(rpm::RpmPlan),
    Web(web::WebPlan),
    Video(video::VideoPlan),
}

impl AppKind {
    /// The `kind` name.
    pub fn name(&self) -> &'static str {
        match self {
            AppKind::Rpm(_) => "rpm",
            AppKind::Web(_) => "web",
            AppKind::Video(_) => "video",
        }
    }

    /// Mean offered bytes per second per (server, client) entry, for the run-cost estimate
    /// (`rpm` saturates its path: infinite).
    pub fn offered_bytes_per_s(&self) -> f64 {
        match self {
            AppKind::Rpm(_) => f64::INFINITY,
            AppKind::Web(w) => w.mean_page_bytes() / w.think.mean().as_secs_f64().max(1.0),
            AppKind::Video(v) => v.bitrates_bps.last().copied().unwrap_or(0) as f64 / 8.0,
        }
    }

    /// TCP connections opened per second per entry, at most (the run-cost estimate).
    pub fn connections_per_s(&self) -> f64 {
        match self {
            AppKind::Rpm(r) => 6.0 * r.probes_per_second as f64,
            AppKind::Web(w) => {
                2.0 * (1.0 + w.objects as f64) / w.think.mean().as_secs_f64().max(0.1)
            }
            AppKind::Video(v) => 2.0 / v.segment.as_secs_f64(),
        }
    }
}

/// Parses the keys of application kind `kind` (the shared keys — endpoints, transport,
/// `start`, `stop` — are [`crate::workload`]'s).
pub fn parse(exp: &Context, p: &mut Params, kind: &str) -> ConfResult<AppKind> {
    Ok(match kind {
        "rpm" => AppKind::Rpm(rpm::RpmPlan::parse(p)?),
        "web" => AppKind::Web(web::WebPlan::parse(exp, p)?),
        "video" => AppKind::Video(video::VideoPlan::parse(p)?),
        _ => unreachable!("dispatched by workload::parse"),
    })
}

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
/// name (`""` for the top level; `rpm` uses `downlink` and `uplink`). `None` is a number
/// the run did not measure (no probe in the window, no page finished): JSON `null`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AppSummary {
    pub sections: Vec<(&'static str, Numbers)>,
}

/// Named numbers of a summary section (`None`: not measured).
pub type Numbers = Vec<(&'static str, Option<f64>)>;

/// One application workload entry's state machine.
#[derive(Clone, Debug)]
pub enum AppMachine {
    Rpm(rpm::Rpm),
    Web(web::Web),
    Video(video::Video),
}

impl AppMachine {
    /// The machine of entry `i` of `plan` (whose kind is [`crate::workload::TcpKind::App`]).
    pub fn new(plan: &TcpPlan, kind: &AppKind, i: usize, seed: u64) -> AppMachine {
        let (server, client) = plan.flows[i];
        let rng = Rng::stream(seed, &format!("workload{}", plan.index), i as u64);
        let start = Time::ZERO + plan.start;
        let stop = plan.stop.map(|s| Time::ZERO + s).unwrap_or(Time::MAX);
        let ends = Ends {
            server,
            client,
            start,
            stop,
        };
        match kind {
            AppKind::Rpm(r) => AppMachine::Rpm(rpm::Rpm::new(r.clone(), ends, rng)),
            AppKind::Web(w) => AppMachine::Web(web::Web::new(w.clone(), ends, rng)),
            AppKind::Video(v) => AppMachine::Video(video::Video::new(v.clone(), ends)),
        }
    }

    /// The workload's start: the engine calls [`AppMachine::wake`] then.
    pub fn first_wake(&self) -> Option<Time> {
        let e = match self {
            AppMachine::Rpm(m) => &m.ends,
            AppMachine::Web(m) => &m.ends,
            AppMachine::Video(m) => &m.ends,
        };
        (e.start < e.stop).then_some(e.start)
    }

    /// The wake-up the engine scheduled is due.
    pub fn wake(&mut self, now: Time) -> AppStep {
        match self {
            AppMachine::Rpm(m) => m.wake(now),
            AppMachine::Web(m) => m.wake(now),
            AppMachine::Video(m) => m.wake(now),
        }
    }

    /// A transfer the machine asked for finished.
    pub fn done(&mut self, d: Done) -> AppStep {
        match self {
            AppMachine::Rpm(m) => m.done(d),
            AppMachine::Web(m) => m.done(d),
            AppMachine::Video(m) => m.done(d),
        }
    }

    /// The numbers of the run, which ended at `end`.
    pub fn summary(&self, end: Time) -> AppSummary {
        match self {
            AppMachine::Rpm(m) => m.summary(end),
            AppMachine::Web(m) => m.summary(end),
            AppMachine::Video(m) => m.summary(end),
        }
    }

    /// The `kind` name.
    pub fn kind(&self) -> &'static str {
        match self {
            AppMachine::Rpm(_) => "rpm",
            AppMachine::Web(_) => "web",
            AppMachine::Video(_) => "video",
        }
    }
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
