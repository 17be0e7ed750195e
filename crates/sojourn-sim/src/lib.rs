//! sojourn-sim: the deterministic packet-level discrete-event simulator.
//!
//! The experiment model (files → a validated [`Experiment`], workload schedules) is the
//! engine-neutral crate `sojourn-experiment`; [`config`] re-exports it for this crate's
//! users. [`sim::Sim`] builds the network and runs it; [`output::collect`] produces the summary
//! and the columnar tables. One run is single-threaded and deterministic: same experiment
//! and seed, same bytes out.

pub mod app;
pub mod classify;
pub mod config;
pub mod endpoint;
pub mod event;
pub mod flows;
pub mod link;
pub mod metrics;
pub mod output;
pub mod sim;
pub mod tcp;
pub mod udp;
pub mod workload;

pub use config::Experiment;
pub use output::{Column, Columns, FctFrom, RunOutput};
pub use sim::{Progress, Sim};

use std::path::Path;

/// Runs `exp` with `seed` to the end; `progress` is called periodically and may return
/// false to abort (then `None` is returned).
pub fn run(
    exp: &Experiment,
    seed: u64,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Option<RunOutput> {
    let mut sim = Sim::new(exp, seed);
    sim.start_apps();
    if !sim.run(progress) {
        return None;
    }
    // Packet conservation (created = delivered + dropped + in the network) is checked at
    // the end of every run, in release builds too: a violation is an engine bug, and a
    // run that lost or invented packets must not write results. summary.json states the
    // four counts and `conserved`.
    if let Err(e) = sim.check_conservation() {
        panic!("sojourn engine bug: {e}");
    }
    Some(output::collect(&mut sim, exp.record.fct_from))
}

/// Convenience for tests: parse TOML text and run it with its own seed.
pub fn run_toml(text: &str) -> Result<RunOutput, sojourn_core::params::ConfError> {
    let exp = config::from_toml(text, Path::new("."))?;
    Ok(run(&exp, exp.seed, &mut |_| true).expect("not aborted"))
}
