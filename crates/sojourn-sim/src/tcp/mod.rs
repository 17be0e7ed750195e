//! TCP: sender, receiver, congestion control and the applications on top
//! (docs/transport.md).
//!
//! A connection is two endpoints: a [`sender::TcpSender`] on the source host (data
//! and FIN) and a [`receiver::TcpReceiver`] on the destination (ACKs). [`open`] creates
//! both and starts the connection (three-way handshake unless `handshake = false`).

pub mod accecn;
pub mod apps;
pub mod cc;
pub mod receiver;
pub mod rtt;
pub mod scoreboard;
pub mod sender;

use crate::endpoint::AnyEndpoint;
use crate::sim::Sim;
use sojourn_core::packet::{proto, Addr, FlowKey};
use sojourn_core::rng::Rng;
use sojourn_record::flows::{FlowKind, FlowRecord};

// The settings are the experiment model's (engine-neutral); this module is the machinery.
pub use sojourn_experiment::dist::{IntervalDist, SizeDist};
pub use sojourn_experiment::transport::{
    TcpConfig, ETHERNET_HEADER_BYTES, GSO_MAX_BYTES, IP_TCP_HEADER_BYTES, SERVER_PORT,
    SYN_FRAME_BYTES, TCP_LIMIT_OUTPUT_BYTES, TIMESTAMP_OPTION_BYTES,
};

/// Opens a TCP connection from `src` to `dst` now: creates the flow record and both
/// endpoints and starts the handshake. `size` is the transfer size recorded for FCT
/// (0 = unbounded). Returns the flow id.
pub fn open(
    sim: &mut Sim,
    src: u32,
    dst: u32,
    source: sender::Source,
    record_size: u64,
    cfg: &TcpConfig,
    workload: u32,
) -> u32 {
    let now = sim.now;
    let transfer = match &source {
        sender::Source::Sized(n) => *n,
        _ => 0,
    };
    let mut rec = FlowRecord::new(0, FlowKind::Tcp, workload, src, dst, now);
    rec.cc = cfg.cc.name();
    rec.size_bytes = record_size;
    let flow = sim.flows.add(rec);
    let key = FlowKey {
        src_addr: node_addr(src, cfg.ipv6),
        dst_addr: node_addr(dst, cfg.ipv6),
        src_port: crate::workload::ephemeral_port(flow),
        dst_port: SERVER_PORT,
        proto: proto::TCP,
    };
    let hash = key.hash(sim.hash_salt);
    let rcv = receiver::TcpReceiver::new(flow, key.reversed(), hash, cfg, transfer);
    let rid = sim.add_endpoint(dst, flow, AnyEndpoint::TcpReceiver(rcv));
    let seed = Rng::stream(sim.seed, "tcp", flow as u64).next_u64();
    let snd = sender::TcpSender::new(flow, key, hash, rid, 0, cfg, source, seed);
    let sid = sim.add_endpoint(src, flow, AnyEndpoint::TcpSender(snd));
    if let AnyEndpoint::TcpSender(s) = sim.endpoint_mut(sid) {
        s.me = sid;
    }
    if let AnyEndpoint::TcpReceiver(r) = sim.endpoint_mut(rid) {
        r.peer = sid;
    }
    sim.start_endpoint(rid);
    sim.start_endpoint(sid);
    flow
}

/// The engine side of endpoint calls for unit tests: collects sent packets and notes, with
/// one TCP flow record (flow 0).
/// The simulator's address of node `n`: the IPv4 address whose 32 bits are `n`, or with
/// `ipv6` the IPv6 address `fd00::` + `n` (a unique local address, RFC 4193). Routing
/// reads the node from the low 32 bits of either ([`Addr::low32`]).
pub fn node_addr(n: u32, ipv6: bool) -> Addr {
    if ipv6 {
        let mut o = [0u8; 16];
        o[0] = 0xfd;
        o[12..].copy_from_slice(&n.to_be_bytes());
        Addr::v6(o)
    } else {
        Addr::v4(n)
    }
}

#[cfg(test)]
pub(crate) mod test_io {
    use crate::endpoint::{Io, Note};
    use crate::flows::FlowTable;
    use sojourn_core::{Packet, Time};
    use sojourn_record::flows::{FlowKind, FlowRecord};

    pub(crate) struct Harness {
        pub out: Vec<Packet>,
        pub notes: Vec<Note>,
        pub flows: FlowTable,
    }

    impl Harness {
        pub fn new() -> Harness {
            let mut flows = FlowTable::default();
            flows.add(FlowRecord::new(0, FlowKind::Tcp, 0, 0, 1, Time::ZERO));
            Harness {
                out: Vec::new(),
                notes: Vec::new(),
                flows,
            }
        }
        pub fn io(&mut self, now: Time) -> Io<'_> {
            Io {
                now,
                out: &mut self.out,
                notes: &mut self.notes,
                flows: &mut self.flows,
            }
        }
        pub fn take(&mut self) -> Vec<Packet> {
            std::mem::take(&mut self.out)
        }
    }
}
