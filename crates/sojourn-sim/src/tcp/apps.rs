//! Applications over TCP (and thin streams over UDP) in the simulator: the engine side of
//! the `[[workload]]` kinds `bulk`, `transfer`, `request_response`, `thin`, `actors`,
//! `poisson`, `small_files`.
//!
//! What to open and when is decided by the experiment model's sans-IO
//! [`sojourn_experiment::schedule::Generator`] (one per selected (source, destination)
//! entry, each with its own random stream); this module does the I/O: an application
//! whose timer is the generator's next wake-up and which opens the connections
//! (or thin UDP streams) the generator asks for, reporting back the completions it
//! watches.

use super::sender::Source;
use super::{open, IntervalDist, TcpConfig};
use crate::app::App;
use crate::endpoint::{packet_tag, AnyEndpoint, Endpoint, Io};
use crate::sim::Sim;
use crate::udp::UdpSink;
use sojourn_core::packet::{proto, FlowKey, TransportHeader};
use sojourn_core::rng::Rng;
use sojourn_core::{Packet, Time};
use sojourn_experiment::schedule::{Generator, Payload, Step};
use sojourn_experiment::transport::UDP_OVERHEAD_BYTES;
pub use sojourn_experiment::workload::{TcpKind, TcpPlan, TCP_KINDS as KINDS};
use sojourn_record::flows::{FlowKind, FlowRecord};

/// Creates the generators of a plan (their first wake-ups are set at start).
pub fn instantiate(plan: &TcpPlan, sim: &mut Sim) {
    for i in 0..plan.flows.len() {
        let app = GeneratorApp {
            gen: Generator::new(plan, i, sim.seed),
            cfg: plan.cfg.clone(),
            index: plan.index,
            watching: None,
        };
        sim.add_app(Box::new(app));
    }
}

/// A workload generator driven by the simulator's clock.
struct GeneratorApp {
    gen: Generator,
    cfg: TcpConfig,
    /// The workload's index (flow records carry it).
    index: u32,
    /// The flow whose completion the generator waits for.
    watching: Option<u32>,
}

impl GeneratorApp {
    /// Does what the generator asked: open first, then set the next wake-up.
    fn apply(&mut self, sim: &mut Sim, me: u32, step: Step) {
        if let Some(o) = step.open {
            let flow = match o.payload {
                Payload::Messages {
                    message_bytes,
                    interval,
                    udp: true,
                    stop,
                    rng,
                } => {
                    open_thin_udp(
                        sim,
                        self,
                        (o.src, o.dst),
                        message_bytes,
                        interval,
                        stop,
                        rng,
                    );
                    None
                }
                payload => {
                    let source = match payload {
                        Payload::Sized(n) => Source::Sized(n),
                        Payload::Bulk => Source::Bulk,
                        Payload::Messages {
                            message_bytes,
                            interval,
                            stop,
                            rng,
                            ..
                        } => Source::Messages {
                            size: message_bytes,
                            interval,
                            next_at: sim.now,
                            stop,
                            rng,
                        },
                    };
                    let flow = if o.reuses_connection {
                        let mut cfg = self.cfg.clone();
                        cfg.handshake = false;
                        open(sim, o.src, o.dst, source, o.record_size, &cfg, self.index)
                    } else {
                        open(
                            sim,
                            o.src,
                            o.dst,
                            source,
                            o.record_size,
                            &self.cfg,
                            self.index,
                        )
                    };
                    if o.started != sim.now {
                        sim.flows.get_mut(flow).start = o.started;
                    }
                    Some(flow)
                }
            };
            if o.report_completion {
                let flow = flow.expect("only TCP transfers are watched");
                sim.set_flow_owner(flow, me);
                self.watching = Some(flow);
            }
        }
        if let Some(at) = step.wake_at {
            sim.app_timer(me, at);
        }
    }
}

impl App for GeneratorApp {
    fn start(&mut self, sim: &mut Sim, me: u32) {
        if let Some(at) = self.gen.start() {
            sim.app_timer(me, at);
        }
    }

    fn on_timer(&mut self, sim: &mut Sim, me: u32) {
        let step = self.gen.wake(sim.now);
        self.apply(sim, me, step);
    }

    fn on_flow_complete(&mut self, sim: &mut Sim, me: u32, flow: u32) {
        if self.watching == Some(flow) {
            self.watching = None;
            let step = self.gen.finished(sim.now);
            self.apply(sim, me, step);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn open_thin_udp(
    sim: &mut Sim,
    app: &GeneratorApp,
    (src_node, dst_node): (u32, u32),
    message: u32,
    interval: IntervalDist,
    stop: Time,
    rng: Rng,
) {
    let now = sim.now;
    let flow = sim.flows.add(FlowRecord::new(
        0,
        FlowKind::UdpThin,
        app.index,
        src_node,
        dst_node,
        now,
    ));
    let key = FlowKey {
        src_addr: super::node_addr(src_node, app.cfg.ipv6),
        dst_addr: super::node_addr(dst_node, app.cfg.ipv6),
        src_port: crate::workload::ephemeral_port(flow),
        dst_port: 9,
        proto: proto::UDP,
    };
    let hash = key.hash(sim.hash_salt);
    let sink = sim.add_endpoint(dst_node, flow, AnyEndpoint::UdpSink(UdpSink { flow }));
    let ip6_extra = if app.cfg.ipv6 {
        sojourn_experiment::transport::IPV6_EXTRA_HEADER_BYTES
    } else {
        0
    };
    let src = ThinUdpSource {
        flow,
        key,
        hash,
        peer: sink,
        message,
        // IP (20 B, or 40 B over IPv6) and UDP (8 B) headers inside the MTU.
        max_payload: app.cfg.mtu - 28 - ip6_extra,
        overhead_bytes: UDP_OVERHEAD_BYTES + ip6_extra,
        interval,
        next_at: now,
        stop,
        rng,
        seq: 0,
    };
    let id = sim.add_endpoint(src_node, flow, AnyEndpoint::ThinUdp(src));
    sim.start_endpoint(sink);
    sim.start_endpoint(id);
}

/// A thin stream over UDP: every interval one message, split into datagrams of at most
/// MTU − 28 payload bytes.
pub struct ThinUdpSource {
    pub flow: u32,
    key: FlowKey,
    hash: u32,
    peer: u32,
    message: u32,
    max_payload: u32,
    /// Frame bytes around the payload (Ethernet, IP, UDP headers).
    overhead_bytes: u32,
    interval: IntervalDist,
    next_at: Time,
    stop: Time,
    rng: Rng,
    seq: u64,
}

impl Endpoint for ThinUdpSource {
    fn start(&mut self, _io: &mut Io) {}
    fn on_packet(&mut self, _pkt: &Packet, _io: &mut Io) {}
    fn on_timer(&mut self, io: &mut Io) {
        while self.next_at <= io.now && self.next_at < self.stop {
            let mut left = self.message;
            while left > 0 {
                let payload = left.min(self.max_payload);
                left -= payload;
                let len = payload + self.overhead_bytes;
                io.send(Packet {
                    tag: packet_tag(self.flow, self.peer),
                    key: self.key,
                    hash: self.hash,
                    len_bytes: len,
                    truesize_bytes: sojourn_core::packet::truesize_for(len),
                    hdr: TransportHeader {
                        seq: self.seq,
                        payload_bytes: payload,
                        ..Default::default()
                    },
                    ..Default::default()
                });
                self.seq += 1;
            }
            self.next_at += self.interval.draw(&mut self.rng);
        }
    }
    fn deadline(&self) -> Option<Time> {
        (self.next_at < self.stop).then_some(self.next_at)
    }
}
