//! The experiment model as this engine sees it: a re-export of the engine-neutral
//! `sojourn-experiment` crate (parsing, validation, routes), so `sojourn_sim::config::…`
//! paths keep working. Nothing here depends on the engine (docs/architecture.md).

pub use sojourn_experiment::experiment::*;
pub use sojourn_experiment::link::load_trace;
pub use sojourn_experiment::load::{from_table, from_toml};
