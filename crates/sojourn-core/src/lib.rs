//! sojourn-core: the sans-IO heart of sojourn.
//!
//! Time, packets, random streams, parameters, histograms, the [`qdisc::Qdisc`] trait and
//! every discipline. No clock, no sockets, no files, no threads: time comes in as an
//! argument and results go out as values, so the same code serves the simulator and
//! (later) the live emulator.

#![deny(unsafe_code)]

pub mod accecn;
pub mod conntrack;
pub mod device;
pub mod hist;
pub mod packet;
pub mod params;
pub mod prefetch;
pub mod qdisc;
pub mod rng;
pub mod time;
pub mod units;
pub mod wifi;

pub use packet::{Addr, Ecn, FlowKey, Packet};
pub use qdisc::{AnyQdisc, Dequeue, DropReason, Drops, Qdisc, Verdict};
pub use time::{Duration, Time};
