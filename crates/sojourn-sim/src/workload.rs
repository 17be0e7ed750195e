//! Workloads in the simulator: turns the experiment model's [`WorkloadPlan`]s into
//! endpoints at the start of the run (UDP sources here, TCP generators in
//! [`crate::tcp::apps`]). Parsing and the workload schedules themselves are the
//! engine-neutral `sojourn_experiment::{workload, schedule}`.

use crate::endpoint::AnyEndpoint;
use crate::sim::Sim;
use crate::udp::{OnOff, UdpSink, UdpSource};
use sojourn_core::packet::{proto, Addr, Ecn, FlowKey};
use sojourn_core::rng::Rng;
use sojourn_core::Time;
pub use sojourn_experiment::workload::WorkloadPlan;
use sojourn_record::flows::{FlowKind, FlowRecord};

/// Creates the flows and endpoints of a workload at the start of the run.
pub fn instantiate(plan: &WorkloadPlan, sim: &mut Sim) {
    match plan {
        WorkloadPlan::Tcp(t) => crate::tcp::apps::instantiate(t, sim),
        WorkloadPlan::Udp(u) => {
            for &(src, dst) in &u.flows {
                let kind = if u.onoff == OnOff::Always {
                    FlowKind::UdpCbr
                } else {
                    FlowKind::UdpOnOff
                };
                let start = Time::ZERO + u.start;
                let flow = sim
                    .flows
                    .add(FlowRecord::new(0, kind, u.index, src, dst, start));
                let stop = u.stop.map(|s| Time::ZERO + s).unwrap_or(Time::MAX);
                let key = FlowKey {
                    src_addr: Addr::v4(src),
                    dst_addr: Addr::v4(dst),
                    src_port: ephemeral_port(flow),
                    dst_port: 9,
                    proto: proto::UDP,
                };
                let hash = key.hash(sim.hash_salt);
                let sink = sim.add_endpoint(dst, flow, AnyEndpoint::UdpSink(UdpSink { flow }));
                let rng = Rng::stream(sim.seed, "udp", flow as u64);
                let mut s = UdpSource::new(
                    flow,
                    key,
                    hash,
                    sink,
                    u.rate_bps,
                    u.packet_bytes,
                    start,
                    stop,
                    u.onoff,
                    rng,
                );
                if u.ecn {
                    s.ecn = Ecn::Ect0;
                }
                s.dscp = u.dscp;
                let src_ep = sim.add_endpoint(src, flow, AnyEndpoint::UdpSource(s));
                sim.start_endpoint(sink);
                sim.start_endpoint(src_ep);
            }
        }
    }
}

/// A source port for flow `flow`: distinct for the first 64k flows of a host.
pub fn ephemeral_port(flow: u32) -> u16 {
    (1024 + flow % 64_000) as u16
}
