//! Latency probes and isochronous streams in the simulator (the `ping` and `isochronous`
//! workloads, sojourn_experiment::probe): a [`ProbeSource`] on the sending host and a
//! [`ProbeReflector`] on the far one, and the table of every probe (probes.parquet).
//!
//! The source sends one small packet every `interval` on a fixed schedule. For an echo
//! (ICMP or UDP) the reflector answers each request at once with a packet of the same size
//! that carries the request's send time (`ts_ecr`) and its own receive time (`ts_val`), so
//! the source learns the round-trip time and both one-way delays when the answer arrives.
//! One way, the reflector records each datagram's arrival. Records are plain structs kept
//! by the endpoints (24 B per probe: a VoIP stream at 50 packets/s is 4.3 MB per hour),
//! read out once at the end of the run.

use crate::dispatch::AnyEndpoint;
use crate::endpoint::{packet_tag, Endpoint, Io};
use crate::sim::Sim;
use sojourn_core::packet::{proto, truesize_for, Addr, FlowKey, TransportHeader};
use sojourn_core::{Duration, Packet, Time};
use sojourn_experiment::probe::{ProbeMode, ProbePlan};
use sojourn_record::flows::{FlowKind, FlowRecord};
use sojourn_record::output::Columns;
use sojourn_record::probes::ProbeTable;

/// IP protocol number of ICMP (RFC 792): fq_codel and the classifiers hash it like any
/// other protocol; it has no ports.
const PROTO_ICMP: u8 = 1;

/// Bytes of headers inside a probe's frame (Ethernet 14 + IPv4 20 + ICMP/UDP 8).
const PROBE_HEADER_BYTES: u32 = 42;

pub use sojourn_record::probes::PROBE_GRACE;

/// One probe: when it was sent, when the far end got it, when its answer came back
/// (`Time::MAX` = never).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeRecord {
    pub sent: Time,
    pub far: Time,
    pub back: Time,
}

/// The sending side of a probe flow.
pub struct ProbeSource {
    pub flow: u32,
    key: FlowKey,
    hash: u32,
    /// The reflector's endpoint id.
    pub peer: u32,
    mode: ProbeMode,
    interval: Duration,
    packet_bytes: u32,
    dscp: u8,
    next_at: Time,
    stop: Time,
    /// Every probe sent, indexed by its sequence number.
    pub records: Vec<ProbeRecord>,
}

impl Endpoint for ProbeSource {
    fn start(&mut self, _io: &mut Io) {}

    fn on_packet(&mut self, pkt: &Packet, io: &mut Io) {
        // An answer: the first one for a sequence number counts (a duplicate cannot occur
        // in the simulator, but an answer is never counted twice).
        if let Some(r) = self.records.get_mut(pkt.hdr.seq as usize) {
            if r.back == Time::MAX {
                r.far = pkt.hdr.ts_val;
                r.back = io.now;
            }
        }
    }

    fn on_timer(&mut self, io: &mut Io) {
        // A fixed schedule, as `ping -i` and irtt keep: a late answer never delays the
        // next probe.
        while self.next_at <= io.now && self.next_at < self.stop {
            let seq = self.records.len() as u64;
            io.send(Packet {
                tag: packet_tag(self.flow, self.peer),
                key: self.key,
                hash: self.hash,
                len_bytes: self.packet_bytes,
                truesize_bytes: truesize_for(self.packet_bytes),
                dscp: self.dscp,
                hdr: TransportHeader {
                    seq,
                    payload_bytes: self.packet_bytes - PROBE_HEADER_BYTES,
                    ts_val: io.now,
                    ..Default::default()
                },
                ..Default::default()
            });
            self.records.push(ProbeRecord {
                sent: io.now,
                far: Time::MAX,
                back: Time::MAX,
            });
            self.next_at += self.interval;
        }
    }

    fn deadline(&self) -> Option<Time> {
        (self.next_at < self.stop).then_some(self.next_at)
    }
}

/// The far end of a probe flow: answers echoes, records one-way arrivals.
pub struct ProbeReflector {
    pub flow: u32,
    key: FlowKey,
    hash: u32,
    /// The source's endpoint id (set once the source exists).
    pub peer: u32,
    mode: ProbeMode,
    dscp: u8,
    /// One way: (sequence number, arrival time) of every datagram received.
    pub arrivals: Vec<(u64, Time)>,
}

impl Endpoint for ProbeReflector {
    fn start(&mut self, _io: &mut Io) {}

    fn on_packet(&mut self, pkt: &Packet, io: &mut Io) {
        io.flows.get_mut(self.flow).delivered_bytes += pkt.hdr.payload_bytes as u64;
        if self.mode == ProbeMode::OneWay {
            self.arrivals.push((pkt.hdr.seq, io.now));
            return;
        }
        // The answer: same size and marking (ping(8)'s reply mirrors the request; irtt's
        // server keeps the client's DSCP), the request's send time echoed.
        io.send(Packet {
            tag: packet_tag(self.flow, self.peer),
            key: self.key,
            hash: self.hash,
            len_bytes: pkt.len_bytes,
            truesize_bytes: truesize_for(pkt.len_bytes),
            dscp: self.dscp,
            hdr: TransportHeader {
                seq: pkt.hdr.seq,
                payload_bytes: pkt.hdr.payload_bytes,
                ts_val: io.now,
                ts_ecr: pkt.hdr.ts_val,
                ..Default::default()
            },
            ..Default::default()
        });
    }

    fn on_timer(&mut self, _io: &mut Io) {}

    fn deadline(&self) -> Option<Time> {
        None
    }
}

impl Sim {
    /// Creates the flows and both endpoints of a probe workload (at the start of the run).
    pub(crate) fn add_probe_workload(&mut self, q: &ProbePlan) {
        for &(src, dst) in &q.flows {
            let start = Time::ZERO + q.start;
            let (flow, ident) = self.open_flow(FlowRecord::new(
                0,
                FlowKind::Probe,
                q.index,
                src,
                dst,
                start,
            ));
            let stop = q.stop.map(|s| Time::ZERO + s).unwrap_or(Time::MAX);
            let (protocol, src_port, dst_port) = match q.mode {
                ProbeMode::Icmp => (PROTO_ICMP, 0, 0),
                // irtt's default server port.
                _ => (proto::UDP, self.ephemeral_port(ident), 2112),
            };
            let key = FlowKey {
                src_addr: Addr::v4(src),
                dst_addr: Addr::v4(dst),
                src_port,
                dst_port,
                proto: protocol,
            };
            let hash = key.hash(self.hash_salt);
            let back = key.reversed();
            let back_hash = back.hash(self.hash_salt);
            let refl = self.add_endpoint(
                dst,
                flow,
                ident,
                1,
                AnyEndpoint::ProbeReflector(ProbeReflector {
                    flow,
                    key: back,
                    hash: back_hash,
                    peer: 0,
                    mode: q.mode,
                    dscp: q.dscp,
                    arrivals: Vec::new(),
                }),
            );
            let source = ProbeSource {
                flow,
                key,
                hash,
                peer: refl,
                mode: q.mode,
                interval: q.interval,
                packet_bytes: q.packet_bytes,
                dscp: q.dscp,
                next_at: start,
                stop,
                records: Vec::new(),
            };
            let sid = self.add_endpoint(src, flow, ident, 0, AnyEndpoint::ProbeSource(source));
            if let AnyEndpoint::ProbeReflector(r) = self.endpoint_mut(refl) {
                r.peer = sid;
            }
            self.start_endpoint(refl);
            self.start_endpoint(sid);
        }
    }

    /// probes.parquet: one row per probe sent before the run's last second ([`PROBE_GRACE`]),
    /// flows in creation order, probes in sending order; `None` when the run has no probes.
    pub(crate) fn probe_columns(&self) -> Option<Columns> {
        let mut sources: Vec<(u32, &ProbeSource)> = Vec::new();
        let mut arrivals: Vec<(u32, &[(u64, Time)])> = Vec::new();
        for ep in self.endpoint_iter() {
            match ep {
                AnyEndpoint::ProbeSource(s) => sources.push((s.flow, s)),
                AnyEndpoint::ProbeReflector(r) if r.mode == ProbeMode::OneWay => {
                    arrivals.push((r.flow, &r.arrivals))
                }
                _ => {}
            }
        }
        if sources.is_empty() {
            return None;
        }
        sources.sort_by_key(|s| s.0);
        let cutoff = self.end.0.saturating_sub(PROBE_GRACE.0);
        let mut t = ProbeTable::default();
        for (flow, s) in sources {
            let rec = self.flows.get(flow);
            let mut recs = s.records.clone();
            if s.mode == ProbeMode::OneWay {
                if let Some((_, arr)) = arrivals.iter().find(|a| a.0 == flow) {
                    for &(seq, at) in arr.iter() {
                        if let Some(r) = recs.get_mut(seq as usize) {
                            r.far = at;
                        }
                    }
                }
            }
            for (seq, r) in recs.iter().enumerate() {
                if r.sent.0 >= cutoff {
                    break;
                }
                let at = |t: Time| (t != Time::MAX).then_some(t);
                t.push(
                    flow,
                    rec.workload,
                    s.mode,
                    seq as u64,
                    r.sent,
                    at(r.far),
                    at(r.back),
                );
            }
        }
        Some(t.finish())
    }
}
