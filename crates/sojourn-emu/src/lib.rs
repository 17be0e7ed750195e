//! sojourn-emu: the live engine (docs/emulate.md).
//!
//! Hosts are network namespaces running the kernel's own TCP; the experiment's links run in
//! a user-space forwarder that drives sojourn-core disciplines with the real packets.
//!
//! Harness modules: [`plan`] (experiment → live plan, refusals), [`loadgen`] (the live
//! load generator: real sockets, FCT at the application, TCP_INFO sampling), [`sock`]
//! (socket and namespace system calls), [`run`] (orchestration and outputs).

#[cfg(target_os = "linux")]
pub mod afpacket;
#[cfg(target_os = "linux")]
pub mod forward;
pub mod loadgen;
#[cfg(target_os = "linux")]
pub mod netns;
pub mod plan;
pub mod run;
pub mod sock;
pub mod wire;
