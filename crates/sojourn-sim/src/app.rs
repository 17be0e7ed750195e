//! Workload generators as the engine holds them: the experiment model's sans-IO
//! [`Generator`] (what to open and when), the transport settings its flows open with, and
//! the completion it waits for. The engine drives them and applies their steps
//! (workload.rs); they never call into the engine.

use sojourn_experiment::apps::{AppMachine, Token};
use sojourn_experiment::schedule::Generator;
use sojourn_experiment::transport::TcpConfig;
use std::collections::{BTreeMap, VecDeque};

/// One (source, destination) entry of a TCP-kind workload.
pub struct WorkloadGenerator {
    pub gen: Generator,
    pub cfg: TcpConfig,
    /// The workload's index (flow records carry it).
    pub index: u32,
    /// The flow whose completion the generator waits for.
    pub watching: Option<u32>,
    /// An application workload (`rpm`, `web`, `video`) is driven by its machine instead
    /// of `gen` (apps.rs).
    pub app: Option<Box<AppDriver>>,
}

/// A load-generating connection of a machine.
pub(crate) struct Load {
    pub(crate) token: Token,
    pub(crate) flow: u32,
    /// The sender's endpoint id (its receiver is the sender's `peer`).
    pub(crate) sender: u32,
    /// Bytes of the stream claimed by self probes so far (a delivered-bytes offset).
    pub(crate) claimed: u64,
    /// Self probes waiting for their bytes: (delivered-bytes threshold, token), in order.
    pub(crate) markers: VecDeque<(u64, Token)>,
    pub(crate) stopped: bool,
}

/// The engine side of one application workload entry.
pub struct AppDriver {
    pub machine: AppMachine,
    /// Transfers in the air: flow → (token, opened with a handshake).
    pub(crate) watching: BTreeMap<u32, (Token, bool)>,
    pub(crate) loads: Vec<Load>,
}

impl AppDriver {
    pub fn new(machine: AppMachine) -> AppDriver {
        AppDriver {
            machine,
            watching: BTreeMap::new(),
            loads: Vec::new(),
        }
    }
}
