//! Workload generators as the engine holds them: the experiment model's sans-IO
//! [`Generator`] (what to open and when), the transport settings its flows open with, and
//! the completion it waits for. The engine drives them and applies their steps
//! (workload.rs); they never call into the engine.

use sojourn_experiment::schedule::Generator;
use sojourn_experiment::transport::TcpConfig;

/// One (source, destination) entry of a TCP-kind workload.
pub struct WorkloadGenerator {
    pub gen: Generator,
    pub cfg: TcpConfig,
    /// The workload's index (flow records carry it).
    pub index: u32,
    /// The flow whose completion the generator waits for.
    pub watching: Option<u32>,
}
