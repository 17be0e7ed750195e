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
pub mod vocab;
pub mod web;

pub use vocab::{
    describe, Action, AppStep, AppSummary, Body, Done, Ends, Number, Numbers, Sample, Token,
};

use sojourn_core::params::{ConfResult, Params};
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, Time};
use std::path::Path;

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
pub fn parse(base_dir: &Path, p: &mut Params, kind: &str) -> ConfResult<AppKind> {
    Ok(match kind {
        "rpm" => AppKind::Rpm(rpm::RpmPlan::parse(p)?),
        "web" => AppKind::Web(web::WebPlan::parse(base_dir, p)?),
        "video" => AppKind::Video(video::VideoPlan::parse(p)?),
        _ => unreachable!("dispatched by workload::parse"),
    })
}

/// One application workload entry's state machine.
#[derive(Clone, Debug)]
pub enum AppMachine {
    Rpm(rpm::Rpm),
    Web(web::Web),
    Video(video::Video),
}

impl AppMachine {
    /// The machine of entry `i` of workload `index` (a `TcpPlan` whose kind is
    /// `TcpKind::App(kind)`): its (server, client) pair `flows`, its `start` and `stop`,
    /// its random stream from `seed` (the one a `schedule::Generator` of that entry
    /// would draw from).
    pub fn new(
        kind: &AppKind,
        (index, i): (u32, usize),
        (server, client): (u32, u32),
        start: Duration,
        stop: Option<Duration>,
        seed: u64,
    ) -> AppMachine {
        let rng = Rng::stream(seed, &format!("workload{index}"), i as u64);
        let start = Time::ZERO + start;
        let stop = stop.map(|s| Time::ZERO + s).unwrap_or(Time::MAX);
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

    /// The TCP connection transfer `token` rides on, as a key (an engine that keeps
    /// connections open between transfers, the live load generator, maps each key to one
    /// real connection; the simulator opens a flow per transfer and needs none). A load
    /// connection's key is its own token.
    pub fn connection(&self, token: Token) -> Token {
        match self {
            AppMachine::Rpm(m) => m.connection(token),
            AppMachine::Web(_) => web::Web::connection(token),
            AppMachine::Video(_) => video::Video::connection(token),
        }
    }

    /// Whether connection `conn` (a [`AppMachine::connection`] key) may still carry a
    /// transfer: once false, an engine that holds it open closes it (a finished foreign
    /// probe's connection, a loaded page's connections). Load connections close on
    /// [`Action::Stop`] instead, and a video's connection lasts the whole session.
    pub fn keeps(&self, conn: Token) -> bool {
        match self {
            AppMachine::Rpm(m) => m.keeps(conn),
            AppMachine::Web(m) => m.keeps(conn),
            AppMachine::Video(_) => true,
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
