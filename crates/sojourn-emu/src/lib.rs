//! sojourn-emu: live emulation. Experiment hosts are network namespaces joined by veth
//! pairs to one user-space forwarder that drives sojourn-core disciplines with the real
//! packets (docs/emulate.md).
//!
//! Datapath:
//! - [`netns`]: namespaces, veth pairs, addresses, neighbours, sysctls, offloads; the
//!   [`netns::Guard`] that removes a run's devices on every exit path, and the state files
//!   `--cleanup` reads after a SIGKILL.
//! - [`forward`]: the forwarder (AF_PACKET ports, qdisc + serialiser + delay line per
//!   link, counters, histograms, time series); [`afpacket`]: batched socket I/O;
//!   [`wire`]: frames ↔ [`sojourn_core::Packet`] (pure, portable).
//!
//! Harness:
//! - [`plan`]: experiment → live plan (hosts, addresses, routes) and what is refused;
//! - [`loadgen`]: the live load generator (real sockets in the hosts' namespaces, every
//!   workload kind, FCT at the application, TCP_INFO sampling); [`sock`]: its system calls;
//! - [`run`]: one live run end to end, with outputs in every engine's schema (sojourn-record,
//!   docs/output-schema.md).
//!
//! Everything that touches the kernel is Linux-only (`cfg(target_os = "linux")`).

pub mod wire;

#[cfg(target_os = "linux")]
pub mod afpacket;
#[cfg(target_os = "linux")]
pub mod forward;
#[cfg(target_os = "linux")]
pub mod loadgen;
#[cfg(target_os = "linux")]
pub mod netns;
pub mod node_filters;
pub mod plan;
#[cfg(target_os = "linux")]
pub mod run;
#[cfg(target_os = "linux")]
pub mod sock;
#[cfg(target_os = "linux")]
pub mod testbed;
