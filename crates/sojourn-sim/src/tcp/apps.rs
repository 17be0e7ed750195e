//! Applications over TCP (and thin streams over UDP): the `[[workload]]` kinds
//! `bulk`, `transfer`, `request_response`, `thin`, `actors`, `poisson`, `small_files`.
//!
//! Every workload may override any `[transport]` key (`cc`, `initial_window`, …).
//! Flow endpoints are chosen with `from`/`to` or `pair`/`pairs` and `count` like every
//! workload; generators (`actors`, `poisson`, `small_files`, `request_response`) run one
//! independent generator per selected (source, destination) entry, each with its own
//! random stream.

use super::dist::SizeDist;
use super::sender::Source;
use super::{open, IntervalDist, TcpConfig};
use crate::app::App;
use crate::config::Experiment;
use crate::endpoint::{AnyEndpoint, Endpoint, Io};
use crate::flows::{FlowKind, FlowRecord};
use crate::sim::Sim;
use crate::udp::{UdpSink, UDP_OVERHEAD_BYTES};
use crate::workload::parse_flow_endpoints;
use sojourn_core::packet::{proto, Addr, FlowKey, TransportHeader};
use sojourn_core::params::{ConfResult, Params};
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, Packet, Time};

pub const KINDS: &[&str] = &[
    "bulk",
    "transfer",
    "request_response",
    "thin",
    "actors",
    "poisson",
    "small_files",
];

#[derive(Clone, Debug)]
pub enum TcpKind {
    /// An infinite transfer per flow.
    Bulk,
    /// One transfer of `size` bytes per flow.
    Transfer { size: u64 },
    /// Repeated request (client → server) then response (server → client), separated by
    /// think times; `count` transactions (0 = until `stop`).
    RequestResponse {
        request: SizeDist,
        response: SizeDist,
        think: IntervalDist,
        count: u32,
    },
    /// A message of `message` bytes every `interval`, over TCP or UDP.
    Thin {
        udp: bool,
        message: u32,
        interval: IntervalDist,
    },
    /// Closed loop: think Exp(think), then one transfer, each a new connection.
    Actors { think: IntervalDist, size: SizeDist },
    /// Open loop: connections arrive with exponential gaps of mean `interval`.
    Poisson {
        interval: IntervalDist,
        size: SizeDist,
    },
}

#[derive(Clone, Debug)]
pub struct TcpPlan {
    pub index: u32,
    pub flows: Vec<(u32, u32)>,
    pub cfg: TcpConfig,
    pub start: Duration,
    pub stop: Option<Duration>,
    pub kind: TcpKind,
}

/// Parses a TCP (or thin-stream) workload of `kind`.
pub fn parse(exp: &Experiment, p: &mut Params, index: u32, kind: &str) -> ConfResult<TcpPlan> {
    let flows = parse_flow_endpoints(exp, p)?;
    let cfg = exp.transport.overridden(p)?;
    let start = p.duration("start", Duration::ZERO)?;
    let stop = p.duration_opt("stop")?;
    if let Some(s) = stop {
        if s <= start {
            return Err(p.err("stop", "must be after `start`"));
        }
    }
    let size = |p: &mut Params, key: &str| -> ConfResult<SizeDist> {
        SizeDist::parse(p, key, &exp.base_dir)?
            .ok_or_else(|| p.err(key, "required (bytes, or a distribution table)"))
    };
    let k = match kind {
        "bulk" => TcpKind::Bulk,
        "transfer" => {
            let b = p
                .bytes_opt("size")?
                .ok_or_else(|| p.err("size", "required (e.g. size = \"1MB\")"))?;
            if b == 0 {
                return Err(p.err("size", "must be positive"));
            }
            TcpKind::Transfer { size: b }
        }
        "request_response" => TcpKind::RequestResponse {
            request: SizeDist::parse(p, "request_size", &exp.base_dir)?
                .unwrap_or(SizeDist::Fixed(100)),
            response: size(p, "response_size")?,
            think: IntervalDist::parse(p, "think", true)?
                .unwrap_or(IntervalDist::Fixed(Duration::ZERO)),
            count: p.u32("transactions", 0, 0, u32::MAX)?,
        },
        "thin" => {
            let udp = p.choice("transport", &["tcp", "udp"], "tcp")? == "udp";
            let message = p
                .bytes_opt("message_size")?
                .ok_or_else(|| p.err("message_size", "required (bytes per message)"))?;
            if message == 0 || message > 1 << 24 {
                return Err(p.err("message_size", "must be between 1 B and 16 MiB"));
            }
            let interval = IntervalDist::parse(p, "interval", false)?
                .ok_or_else(|| p.err("interval", "required (e.g. \"638ms\" or { dist = \"uniform\", min = \"20ms\", max = \"30ms\" })"))?;
            TcpKind::Thin {
                udp,
                message: message as u32,
                interval,
            }
        }
        "actors" => TcpKind::Actors {
            think: IntervalDist::parse(p, "think", true)?
                .ok_or_else(|| p.err("think", "required (mean think time)"))?,
            size: size(p, "size")?,
        },
        "poisson" | "small_files" => {
            let interval = IntervalDist::parse(p, "interval", true)?
                .ok_or_else(|| p.err("interval", "required (mean gap between arrivals)"))?;
            let size = if kind == "small_files" && !p.has("size") {
                // Seed 002 §6.1: 15, 44, 73 or 102 kB files.
                SizeDist::Choice(vec![15_000, 44_000, 73_000, 102_000])
            } else {
                size(p, "size")?
            };
            TcpKind::Poisson { interval, size }
        }
        _ => unreachable!("dispatched by workload::parse"),
    };
    Ok(TcpPlan {
        index,
        flows,
        cfg,
        start,
        stop,
        kind: k,
    })
}

/// Creates the generators and flows of a plan.
pub fn instantiate(plan: &TcpPlan, sim: &mut Sim) {
    let start = Time::ZERO + plan.start;
    let stop = plan.stop.map(|s| Time::ZERO + s).unwrap_or(Time::MAX);
    for (i, &(src, dst)) in plan.flows.iter().enumerate() {
        let rng = Rng::stream(sim.seed, &format!("workload{}", plan.index), i as u64);
        let g = Generator {
            plan: plan.clone(),
            src,
            dst,
            start,
            stop,
            rng,
            phase: Phase::NotStarted,
            done: 0,
            pending_response: None,
        };
        let id = sim.add_app(Box::new(g));
        let _ = id;
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    NotStarted,
    Thinking,
    Request { flow: u32, started: Time },
    Response { flow: u32 },
    Done,
}

struct Generator {
    plan: TcpPlan,
    src: u32,
    dst: u32,
    start: Time,
    stop: Time,
    rng: Rng,
    phase: Phase,
    done: u32,
    pending_response: Option<u64>,
}

impl Generator {
    fn open_sized(&mut self, sim: &mut Sim, me: u32, size: u64, owned: bool) -> u32 {
        let flow = open(
            sim,
            self.src,
            self.dst,
            Source::Sized(size),
            size,
            &self.plan.cfg,
            self.plan.index,
        );
        if owned {
            sim.set_flow_owner(flow, me);
        }
        flow
    }

    fn schedule(&mut self, sim: &mut Sim, me: u32, after: Duration) {
        let at = sim.now + after;
        if at < self.stop {
            sim.app_timer(me, at);
            self.phase = Phase::Thinking;
        } else {
            self.phase = Phase::Done;
        }
    }

    fn fire(&mut self, sim: &mut Sim, me: u32) {
        let kind = self.plan.kind.clone();
        match kind {
            TcpKind::Bulk => {
                open(
                    sim,
                    self.src,
                    self.dst,
                    Source::Bulk,
                    0,
                    &self.plan.cfg,
                    self.plan.index,
                );
                self.phase = Phase::Done;
            }
            TcpKind::Transfer { size } => {
                self.open_sized(sim, me, size, false);
                self.phase = Phase::Done;
            }
            TcpKind::Thin {
                udp,
                message,
                interval,
            } => {
                if udp {
                    open_thin_udp(sim, self, message, interval);
                } else {
                    let src = Source::Messages {
                        size: message,
                        interval,
                        next_at: sim.now,
                        stop: self.stop,
                        rng: self.rng.clone(),
                    };
                    open(
                        sim,
                        self.src,
                        self.dst,
                        src,
                        0,
                        &self.plan.cfg,
                        self.plan.index,
                    );
                }
                self.phase = Phase::Done;
            }
            TcpKind::Actors { size, .. } => {
                let s = size.draw(&mut self.rng);
                let flow = self.open_sized(sim, me, s, true);
                self.phase = Phase::Request {
                    flow,
                    started: sim.now,
                };
            }
            TcpKind::Poisson { interval, size } => {
                let s = size.draw(&mut self.rng);
                self.open_sized(sim, me, s, false);
                let gap = interval.draw(&mut self.rng);
                self.schedule(sim, me, gap);
            }
            TcpKind::RequestResponse {
                request, response, ..
            } => {
                let q = request.draw(&mut self.rng);
                // The request connection's record carries no size: the transaction's
                // FCT is recorded on the response flow (docs/transport.md).
                let flow = open(
                    sim,
                    self.src,
                    self.dst,
                    Source::Sized(q),
                    0,
                    &self.plan.cfg,
                    self.plan.index,
                );
                sim.set_flow_owner(flow, me);
                self.pending_response = Some(response.draw(&mut self.rng));
                self.phase = Phase::Request {
                    flow,
                    started: sim.now,
                };
            }
        }
    }
}

impl App for Generator {
    fn start(&mut self, sim: &mut Sim, me: u32) {
        let first = match &self.plan.kind {
            TcpKind::Actors { think, .. } => self.start + think.draw(&mut self.rng),
            TcpKind::Poisson { interval, .. } => self.start + interval.draw(&mut self.rng),
            _ => self.start,
        };
        if first < self.stop {
            sim.app_timer(me, first);
        }
    }

    fn on_timer(&mut self, sim: &mut Sim, me: u32) {
        if sim.now >= self.stop || self.phase == Phase::Done {
            return;
        }
        self.fire(sim, me);
    }

    fn on_flow_complete(&mut self, sim: &mut Sim, me: u32, flow: u32) {
        match (self.phase, self.plan.kind.clone()) {
            (Phase::Request { flow: f, .. }, TcpKind::Actors { think, .. }) if f == flow => {
                let gap = think.draw(&mut self.rng);
                self.schedule(sim, me, gap);
            }
            (Phase::Request { flow: f, started }, TcpKind::RequestResponse { .. }) if f == flow => {
                // The server answers on the open connection: no new handshake.
                let size = self.pending_response.take().unwrap_or(1);
                let mut cfg = self.plan.cfg.clone();
                cfg.handshake = false;
                let r = open(
                    sim,
                    self.dst,
                    self.src,
                    Source::Sized(size),
                    size,
                    &cfg,
                    self.plan.index,
                );
                sim.flows.get_mut(r).start = started;
                sim.set_flow_owner(r, me);
                self.phase = Phase::Response { flow: r };
            }
            (Phase::Response { flow: f }, TcpKind::RequestResponse { think, count, .. })
                if f == flow =>
            {
                self.done += 1;
                if count > 0 && self.done >= count {
                    self.phase = Phase::Done;
                } else {
                    let gap = think.draw(&mut self.rng);
                    self.schedule(sim, me, gap);
                }
            }
            _ => {}
        }
    }
}

fn open_thin_udp(sim: &mut Sim, g: &Generator, message: u32, interval: IntervalDist) {
    let now = sim.now;
    let flow = sim.flows.add(FlowRecord::new(
        0,
        FlowKind::UdpThin,
        g.plan.index,
        g.src,
        g.dst,
        now,
    ));
    let key = FlowKey {
        src_addr: Addr::v4(g.src),
        dst_addr: Addr::v4(g.dst),
        src_port: crate::workload::ephemeral_port(flow),
        dst_port: 9,
        proto: proto::UDP,
    };
    let hash = key.hash(sim.hash_salt);
    let sink = sim.add_endpoint(g.dst, flow, AnyEndpoint::UdpSink(UdpSink { flow }));
    let src = ThinUdpSource {
        flow,
        key,
        hash,
        peer: sink,
        message,
        max_payload: g.plan.cfg.mtu - 28,
        interval,
        next_at: now,
        stop: g.stop,
        rng: g.rng.clone(),
        seq: 0,
    };
    let id = sim.add_endpoint(g.src, flow, AnyEndpoint::ThinUdp(Box::new(src)));
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
                let len = payload + UDP_OVERHEAD_BYTES;
                io.send(Packet {
                    flow: self.flow,
                    to_endpoint: self.peer,
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
