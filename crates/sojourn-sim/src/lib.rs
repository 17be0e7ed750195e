//! sojourn-sim: the deterministic packet-level discrete-event simulator.
//!
//! The experiment model (files → a validated [`Experiment`], workload schedules) is the
//! engine-neutral crate `sojourn-experiment`; [`config`] re-exports it for this crate's
//! users. [`sim::Sim`] builds the network and runs it; [`output::collect`] produces the summary
//! and the columnar tables, with the recording pieces every engine shares (time series,
//! packet log, flow records, table writers: `sojourn-record`). One run is deterministic:
//! same experiment and seed, same bytes out, on one thread or cut over several
//! ([`parallel`], `threads = N`).

pub mod app;
pub mod apps;
pub mod classify;
pub mod config;
pub mod dispatch;
pub mod endpoint;
pub mod event;
pub mod fast_fifo;
pub mod flight;
pub mod flows;
pub mod link;
pub mod output;
pub mod parallel;
pub mod partition;
pub mod probe;
pub mod sim;
pub mod tcp;
pub mod udp;
pub mod workload;

pub use config::Experiment;
// The output types of `run`/`run_streaming` are every engine's (`sojourn-record`).
pub use sim::{Progress, Sim};
pub use sojourn_record::{Chunk, Column, Columns, FctFrom, RunOutput};

use sojourn_record::output::{
    flow_columns, packet_columns, series_name_columns, timeseries_row_columns, FlowSummary,
};
use std::path::Path;

/// Runs `exp` with `seed` to the end; `progress` is called periodically and may return
/// false to abort (then `None` is returned).
pub fn run(
    exp: &Experiment,
    seed: u64,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Option<RunOutput> {
    if let Ok(plan) = thread_plan(exp) {
        return parallel::run(exp, seed, &plan, progress);
    }
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

/// Like [`run`], but hands the time series, the packet log and the records of finished
/// flows out in chunks of exactly `chunk_rows` rows as they fill (checked between events,
/// about every 2^16 events), so memory stays flat however long the run: `sink` writes them
/// (to Parquet row groups) and returns false to abort. The returned output holds only the
/// rows after the last chunk; the chunks, in order, followed by those rows are the whole
/// tables (the same rows [`run`] returns; flow rows sorted by `flow`). A flow's record is
/// final once its endpoints closed and none of its packets is in the network
/// ([`flows::FlowTable::release`]); summary.json is the same as [`run`]'s. `chunk_rows = 0`
/// hands nothing out.
pub fn run_streaming(
    exp: &Experiment,
    seed: u64,
    chunk_rows: usize,
    progress: &mut dyn FnMut(&Progress) -> bool,
    sink: &mut dyn FnMut(Chunk) -> bool,
) -> Option<RunOutput> {
    // A run cut over threads hands its tables out at the end (not merged in chunks yet).
    if let Ok(plan) = thread_plan(exp) {
        return parallel::run(exp, seed, &plan, progress);
    }
    let mut sim = Sim::new(exp, seed);
    sim.start_apps();
    let link_names: Vec<String> = sim.links.iter().map(|l| l.name.clone()).collect();
    let (warm, end, fct_from) = (sim.warmup_end, sim.end, exp.record.fct_from);
    let mut released = FlowSummary::default();
    // The series names of the last time-series chunk: (how many, their columns).
    let mut names: Option<(usize, std::sync::Arc<Columns>)> = None;
    if chunk_rows > 0 {
        sim.release_final_flows();
    }
    let ok = sim.run_ticks(&mut |sim: &mut Sim| {
        if chunk_rows > 0 {
            while sim.flows.release(sim.now) >= chunk_rows {
                let recs = sim.flows.take_released(chunk_rows);
                for r in &recs {
                    released.add(r, warm, end, fct_from);
                }
                let nodes = &sim.nodes;
                let cols = flow_columns(&recs, |n| nodes[n as usize].name.clone(), end, fct_from);
                if !sink(Chunk::Flows(cols)) {
                    return false;
                }
            }
            while sim.series.len() >= chunk_rows {
                let (t_ns, series, value) = sim.series.drain_rows(chunk_rows);
                let rows = timeseries_row_columns(t_ns, series, value);
                // Names only grow: the same count is the same names.
                let known = sim.series.names.len();
                let names = match &names {
                    Some((n, c)) if *n == known => std::sync::Arc::clone(c),
                    _ => {
                        let c = std::sync::Arc::new(series_name_columns(&sim.series.names));
                        names = Some((known, std::sync::Arc::clone(&c)));
                        c
                    }
                };
                if !sink(Chunk::TimeSeries { rows, names }) {
                    return false;
                }
            }
            while sim.packet_log.len() >= chunk_rows {
                let rows = sim.packet_log.drain_front(chunk_rows);
                let cols = packet_columns(rows, |l| link_names[l as usize].clone());
                if !sink(Chunk::Packets(cols)) {
                    return false;
                }
            }
        }
        progress(&sim.progress())
    });
    if !ok {
        return None;
    }
    if let Err(e) = sim.check_conservation() {
        panic!("sojourn engine bug: {e}");
    }
    // Records released since the last chunk go out too (a last, shorter chunk).
    sim.flows.release(sim.now);
    let recs = sim.flows.take_released(usize::MAX);
    if !recs.is_empty() {
        for r in &recs {
            released.add(r, warm, end, fct_from);
        }
        let nodes = &sim.nodes;
        let cols = flow_columns(&recs, |n| nodes[n as usize].name.clone(), end, fct_from);
        if !sink(Chunk::Flows(cols)) {
            return None;
        }
    }
    Some(output::collect_after_release(&mut sim, fct_from, released))
}

/// The threads `exp` asks for (`threads`; `"auto"`: the machine's cores).
pub fn threads_wanted(exp: &Experiment) -> usize {
    match exp.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Refuses a run whose threads would not fit in memory: each partition of
/// [`thread_plan`]'s cut builds the whole network
/// (`sojourn_experiment::experiment::check_memory_cut`). A run that stays on one thread is
/// checked at load time already.
pub fn check_thread_memory(exp: &Experiment) -> Result<(), sojourn_core::params::ConfError> {
    match thread_plan(exp) {
        Ok(plan) => sojourn_experiment::experiment::check_memory_cut(exp, plan.parts),
        Err(_) => Ok(()),
    }
}

/// How `exp`'s run is cut over threads ([`parallel::plan`]), or why it runs on one
/// (including: it asks for one).
pub fn thread_plan(exp: &Experiment) -> Result<parallel::Plan, String> {
    parallel::plan(exp, threads_wanted(exp))
}

/// Convenience for tests: parse TOML text and run it with its own seed.
pub fn run_toml(text: &str) -> Result<RunOutput, sojourn_core::params::ConfError> {
    let exp = config::from_toml(text, Path::new("."))?;
    Ok(run(&exp, exp.seed, &mut |_| true).expect("not aborted"))
}
