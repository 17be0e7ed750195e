//! sojourn-emu: live emulation. Experiment hosts are network namespaces joined by veth
//! pairs to one user-space forwarder that drives sojourn-core disciplines with the real
//! packets (docs/emulate.md).
//!
//! - [`netns`]: namespaces, veth pairs, addresses, neighbours, sysctls, offloads; the
//!   [`netns::Guard`] that removes a run's devices on every exit path, and the state files
//!   `--cleanup` reads after a SIGKILL.
//! - [`forward`]: the forwarder (AF_PACKET ports, qdisc + serialiser + delay line per
//!   link, counters, histograms, time series); [`afpacket`]: batched socket I/O;
//!   [`wire`]: frames ↔ [`sojourn_core::Packet`] (pure, portable).
//!
//! Everything that touches the kernel is Linux-only (`cfg(target_os = "linux")`).

pub mod wire;

#[cfg(target_os = "linux")]
pub mod afpacket;
#[cfg(target_os = "linux")]
pub mod forward;
#[cfg(target_os = "linux")]
pub mod netns;
#[cfg(target_os = "linux")]
pub mod testbed;
