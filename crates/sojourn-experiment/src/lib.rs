//! sojourn-experiment: the engine-neutral experiment model.
//!
//! An experiment file (TOML, docs/experiment-files.md) becomes a typed, validated
//! [`Experiment`]: topology (nodes, one-direction [`LinkPlan`]s with rate, schedule or
//! trace, delay, loss, overhead, shaper, tx ring and the discipline spec), routes,
//! `[transport]` settings, `[[classifier]]` rules, `[[workload]]` plans and what to
//! record. Every engine (the simulator `sojourn-sim`, the live emulator `sojourn-emu`)
//! consumes the same structures; none of this crate knows about any engine.
//!
//! Workloads are sans-IO schedules ([`schedule::Generator`]): given "you woke at t" or
//! "your transfer finished at t" they answer "open a transfer of S bytes from A to B" and
//! "wake me at t'", drawing sizes and think times from the random streams the seed fixes,
//! so every engine offers the same traffic for the same file and seed.
//!
//! The whole API an engine needs:
//! ```
//! use sojourn_experiment::{load, schedule::Generator, WorkloadPlan};
//! # let dir = std::env::temp_dir().join("sojourn-experiment-doc");
//! # std::fs::create_dir_all(&dir).unwrap();
//! # let file = dir.join("x.toml");
//! # std::fs::write(&file, "duration = \"10s\"\n[topology]\nbottleneck = { rate = \"10Mbit\" }\n[[workload]]\nkind = \"poisson\"\ninterval = \"100ms\"\nsize = \"20kB\"\n").unwrap();
//! // A file, `--set` overrides and an optional seed override:
//! let exp = load(&file, &["topology.bottleneck.delay=\"20ms\"".to_string()], Some(7)).unwrap();
//! assert_eq!(exp.seed, 7);
//! for (i, w) in exp.workloads.iter().enumerate() {
//!     match w {
//!         // Drive these: start(), then wake(t) / finished(t) -> Step { open, wake_at }.
//!         WorkloadPlan::Tcp(_) => assert!(!Generator::for_workload(&exp, i, exp.seed).is_empty()),
//!         WorkloadPlan::Udp(_) => {} // constant-rate / on-off sources: rate, packet size, start, stop
//!         WorkloadPlan::Probe(_) => {} // latency probes, isochronous streams (probe.rs)
//!     }
//! }
//! ```

pub mod apps;
pub mod budget;
pub mod classify;
pub mod cost;
pub mod dist;
pub mod experiment;
pub mod files;
pub mod isp;
pub mod isp_tree;
pub mod link;
pub mod load;
pub mod overrides;
pub mod probe;
pub mod qdisc_nodes;
pub mod routing;
pub mod schedule;
pub mod toml_text;
pub mod transport;
pub mod wifi;
pub mod workload;

pub use experiment::{static_routes, Experiment, FctFrom, LinkPlan, RecordPlan, Routes};
pub use link::{LinkRate, TraceSpec};
pub use load::{from_table, from_toml};
pub use sojourn_core::params::{ConfError, ConfResult, Table, Value};
pub use workload::{TcpKind, TcpPlan, UdpPlan, WorkloadPlan};

use std::path::Path;

/// Parses and validates TOML text; relative file names are read from `base_dir`.
pub fn parse_str(text: &str, base_dir: &Path) -> ConfResult<Experiment> {
    from_toml(text, base_dir)
}

/// Experiment files larger than this are refused (as the Python front does).
pub const MAX_EXPERIMENT_BYTES: u64 = 16 * 1024 * 1024;

/// Reads `file`, applies `--set KEY=VALUE` overrides (TOML values, bare words are
/// strings) in order, then `seed` if given, and validates. Errors name the key path (the
/// file itself for I/O and syntax errors).
pub fn load(file: &Path, set: &[String], seed: Option<u64>) -> ConfResult<Experiment> {
    let text = files::read_regular_text(file, "experiment file", MAX_EXPERIMENT_BYTES)
        .map_err(|m| ConfError::new("", m))?;
    let mut table = toml_text::parse_toml(&text)?;
    for item in set {
        let (key, value) = overrides::parse_assignment(item)?;
        overrides::set_key(&mut table, &key, value)?;
    }
    if let Some(s) = seed {
        let s = i64::try_from(s).map_err(|_| ConfError::new("seed", "must be below 2^63"))?;
        overrides::set_key(&mut table, "seed", Value::Int(s))?;
    }
    let base = file.parent().unwrap_or(Path::new("."));
    from_table(&table, base)
}
