//! Workloads in the simulator: the engine turns the experiment model's [`WorkloadPlan`]s
//! into endpoints (UDP flows at the start of the run) and workload generators
//! ([`WorkloadGenerator`]: the model's sans-IO `Generator` per (source, destination) entry
//! of a TCP-kind workload, `bulk`, `transfer`, `request_response`, `thin`, `actors`,
//! `poisson`, `small_files`), and applies the generators' steps: open this transfer now
//! (a TCP connection or a thin UDP stream), wake me at `t`. Generators never call into the
//! engine. Parsing and the schedules themselves are the engine-neutral
//! `sojourn_experiment::{workload, schedule}`.

use crate::app::WorkloadGenerator;
use crate::dispatch::AnyEndpoint;
use crate::sim::Sim;
use crate::tcp::receiver::TcpReceiver;
use crate::tcp::sender::{Source, TcpSender};
use crate::tcp::{node_addr, IntervalDist, TcpConfig, SERVER_PORT};
use crate::udp::{OnOff, ThinUdpSource, UdpSink, UdpSource};
use sojourn_core::packet::{proto, Addr, Ecn, FlowKey};
use sojourn_core::rng::Rng;
use sojourn_core::Time;
use sojourn_experiment::apps::AppMachine;
use sojourn_experiment::schedule::{Generator, Payload, Step};
pub use sojourn_experiment::workload::{TcpKind, TcpPlan, WorkloadPlan, TCP_KINDS as KINDS};
use sojourn_record::flows::{FlowKind, FlowRecord};

impl Sim {
    /// Creates the flows and endpoints of a UDP workload, or the generators of a TCP-kind
    /// one (their first wake-ups are set by `start_apps`).
    pub(crate) fn add_workload(&mut self, plan: &WorkloadPlan) {
        match plan {
            WorkloadPlan::Probe(q) => self.add_probe_workload(q),
            WorkloadPlan::Tcp(t) => {
                for i in 0..t.flows.len() {
                    let app = match &t.kind {
                        TcpKind::App(k) => {
                            Some(Box::new(crate::app::AppDriver::new(AppMachine::new(
                                k,
                                (t.index, i),
                                t.flows[i],
                                t.start,
                                t.stop,
                                self.seed,
                            ))))
                        }
                        _ => None,
                    };
                    self.apps.push(Some(WorkloadGenerator {
                        gen: Generator::new(t, i, self.seed),
                        cfg: t.cfg.clone(),
                        index: t.index,
                        watching: None,
                        app,
                    }));
                }
            }
            WorkloadPlan::Udp(u) => {
                for &(src, dst) in &u.flows {
                    let kind = if u.onoff == OnOff::Always {
                        FlowKind::UdpCbr
                    } else {
                        FlowKind::UdpOnOff
                    };
                    let start = Time::ZERO + u.start;
                    let (flow, ident) =
                        self.open_flow(FlowRecord::new(0, kind, u.index, src, dst, start));
                    let stop = u.stop.map(|s| Time::ZERO + s).unwrap_or(Time::MAX);
                    let key = FlowKey {
                        src_addr: Addr::v4(src),
                        dst_addr: Addr::v4(dst),
                        src_port: self.ephemeral_port(ident),
                        dst_port: 9,
                        proto: proto::UDP,
                    };
                    let hash = key.hash(self.hash_salt);
                    let sink = self.add_endpoint(
                        dst,
                        flow,
                        ident,
                        1,
                        AnyEndpoint::UdpSink(UdpSink { flow }),
                    );
                    let rng = Rng::stream(self.seed, "udp", ident);
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
                    let src_ep = self.add_endpoint(src, flow, ident, 0, AnyEndpoint::UdpSource(s));
                    self.start_endpoint(sink);
                    self.start_endpoint(src_ep);
                }
            }
        }
    }

    /// Generator `a`'s first wake-up (at time 0).
    pub(crate) fn start_generator(&mut self, a: u32) {
        if self.start_app(a) {
            return;
        }
        if let Some(at) = self.apps[a as usize].as_mut().and_then(|g| g.gen.start()) {
            self.app_timer(a, at);
        }
    }

    /// Generator `a`'s timer fired.
    pub(crate) fn wake_generator(&mut self, a: u32) {
        if self.wake_app(a) {
            return;
        }
        let now = self.now;
        let step = match self.apps[a as usize].as_mut() {
            Some(g) => g.gen.wake(now),
            None => return,
        };
        self.apply_step(a, step);
    }

    /// A flow generator `a` owns completed: if it is the one it waits for, it is told.
    pub(crate) fn generator_flow_completed(&mut self, a: u32, flow: u32) {
        if self.app_flow_completed(a, flow) {
            return;
        }
        let now = self.now;
        let step = match self.apps[a as usize].as_mut() {
            Some(g) if g.watching == Some(flow) => {
                g.watching = None;
                g.gen.finished(now)
            }
            _ => return,
        };
        self.apply_step(a, step);
    }

    /// Does what generator `a` asked: open first, then set the next wake-up.
    fn apply_step(&mut self, a: u32, step: Step) {
        if let Some(o) = step.open {
            // Out of its slot while it opens (the opening reads its settings).
            let mut g = self.apps[a as usize].take().expect("a live generator");
            let flow = match o.payload {
                Payload::Messages {
                    message_bytes,
                    interval,
                    udp: true,
                    stop,
                    rng,
                } => {
                    self.open_thin_udp(&g, (o.src, o.dst), message_bytes, interval, stop, rng);
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
                            next_at: self.now,
                            stop,
                            rng,
                        },
                    };
                    let flow = if o.reuses_connection {
                        let mut cfg = g.cfg.clone();
                        cfg.handshake = false;
                        self.open_tcp(o.src, o.dst, source, o.record_size, &cfg, g.index)
                    } else {
                        self.open_tcp(o.src, o.dst, source, o.record_size, &g.cfg, g.index)
                    };
                    if o.started != self.now {
                        self.flows.get_mut(flow).start = o.started;
                    }
                    Some(flow)
                }
            };
            if o.report_completion {
                let flow = flow.expect("only TCP transfers are watched");
                self.set_flow_owner(flow, a);
                g.watching = Some(flow);
            }
            self.apps[a as usize] = Some(g);
        }
        if let Some(at) = step.wake_at {
            self.app_timer(a, at);
        }
    }

    /// Opens a TCP connection from `src` to `dst` now: creates the flow record and both
    /// endpoints and starts the handshake. `record_size` is the transfer size recorded for
    /// FCT (0 = unbounded). Returns the flow id.
    pub fn open_tcp(
        &mut self,
        src: u32,
        dst: u32,
        source: Source,
        record_size: u64,
        cfg: &TcpConfig,
        workload: u32,
    ) -> u32 {
        let now = self.now;
        let transfer = match &source {
            Source::Sized(n) => *n,
            _ => 0,
        };
        let mut rec = FlowRecord::new(0, FlowKind::Tcp, workload, src, dst, now);
        rec.cc = cfg.cc.name();
        rec.size_bytes = record_size;
        let (flow, ident) = self.open_flow(rec);
        let key = FlowKey {
            src_addr: node_addr(src, cfg.ipv6),
            dst_addr: node_addr(dst, cfg.ipv6),
            src_port: self.ephemeral_port(ident),
            dst_port: SERVER_PORT,
            proto: proto::TCP,
        };
        let hash = key.hash(self.hash_salt);
        let rcv = TcpReceiver::new(flow, key.reversed(), hash, cfg, transfer)
            .with_reader(cfg, Rng::stream(self.seed, "reader", ident));
        let rid = self.add_endpoint(dst, flow, ident, 1, AnyEndpoint::TcpReceiver(rcv));
        let seed = Rng::stream(self.seed, "tcp", ident).next_u64();
        let snd = TcpSender::new(flow, key, hash, rid, 0, cfg, source, seed);
        let sid = self.add_endpoint(src, flow, ident, 0, AnyEndpoint::TcpSender(snd));
        // Its packets carry its socket number on its host (`sk`, for TSQ and `fq`).
        let sock = self.socket_number(sid);
        if let AnyEndpoint::TcpSender(s) = self.endpoint_mut(sid) {
            s.me = sock;
        }
        if let AnyEndpoint::TcpReceiver(r) = self.endpoint_mut(rid) {
            r.peer = sid;
        }
        self.start_endpoint(rid);
        self.start_endpoint(sid);
        flow
    }

    /// Opens a thin UDP stream (a `thin` workload with `udp = true`) for generator `g`.
    fn open_thin_udp(
        &mut self,
        g: &WorkloadGenerator,
        (src_node, dst_node): (u32, u32),
        message: u32,
        interval: IntervalDist,
        stop: Time,
        rng: Rng,
    ) {
        let now = self.now;
        let (flow, ident) = self.open_flow(FlowRecord::new(
            0,
            FlowKind::UdpThin,
            g.index,
            src_node,
            dst_node,
            now,
        ));
        let key = FlowKey {
            src_addr: node_addr(src_node, g.cfg.ipv6),
            dst_addr: node_addr(dst_node, g.cfg.ipv6),
            src_port: self.ephemeral_port(ident),
            dst_port: 9,
            proto: proto::UDP,
        };
        let hash = key.hash(self.hash_salt);
        let sink = self.add_endpoint(
            dst_node,
            flow,
            ident,
            1,
            AnyEndpoint::UdpSink(UdpSink { flow }),
        );
        let ip6_extra = if g.cfg.ipv6 {
            sojourn_experiment::transport::IPV6_EXTRA_HEADER_BYTES
        } else {
            0
        };
        let src = ThinUdpSource::new(
            flow,
            key,
            hash,
            sink,
            message,
            (g.cfg.mtu, ip6_extra),
            interval,
            (now, stop),
            rng,
        );
        let id = self.add_endpoint(src_node, flow, ident, 0, AnyEndpoint::ThinUdp(src));
        self.start_endpoint(sink);
        self.start_endpoint(id);
    }
}
