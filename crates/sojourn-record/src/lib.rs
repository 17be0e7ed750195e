//! sojourn-record: what every engine records and how it writes it, so that the simulator
//! (`sojourn-sim`) and the live emulator (`sojourn-emu`) stand beside each other on the
//! same pieces rather than one on the other (docs/architecture.md).
//!
//! - [`metrics`]: the time series in long form ([`metrics::TimeSeries`], one link sample
//!   the same for every engine) and the packet log ([`metrics::PacketLog`]);
//! - [`flows`]: one [`flows::FlowRecord`] per flow (a row of `flows.parquet`);
//! - [`output`]: the result tables as [`Columns`], summary.json's shared blocks
//!   (`describe`, `hist_ms`, [`output::FlowSummary`]), [`RunOutput`], the schema version,
//!   and the [`Chunk`]s a streaming run hands out;
//! - [`probes`]: probes.parquet ([`probes::ProbeTable`]);
//! - [`apps`]: summary.json's `apps` entries (application workloads).
//!
//! The schema is docs/output-schema.md. Nothing here runs an engine or touches a file.

pub mod apps;
pub mod flows;
pub mod metrics;
pub mod output;
pub mod probes;

pub use output::{Chunk, Column, Columns, RunOutput, SCHEMA_VERSION};
pub use sojourn_experiment::FctFrom;
