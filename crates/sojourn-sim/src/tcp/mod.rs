//! TCP: sender, receiver and congestion control (docs/transport.md).
//!
//! A connection is two endpoints: a [`sender::TcpSender`] on the source host (data
//! and FIN) and a [`receiver::TcpReceiver`] on the destination (ACKs). The engine's
//! `Sim::open_tcp` (workload.rs) creates both and starts the connection (three-way
//! handshake unless `handshake = false`).

pub mod accecn;
pub mod cc;
pub mod receiver;
pub mod rtt;
pub mod scoreboard;
pub mod sender;

use sojourn_core::packet::Addr;

// The settings are the experiment model's (engine-neutral); this module is the machinery.
pub use sojourn_experiment::dist::{IntervalDist, SizeDist};
pub use sojourn_experiment::transport::{
    ReaderPause, TcpConfig, ETHERNET_HEADER_BYTES, GSO_MAX_BYTES, IP_TCP_HEADER_BYTES, SERVER_PORT,
    SYN_FRAME_BYTES, TCP_LIMIT_OUTPUT_BYTES, TIMESTAMP_OPTION_BYTES,
};

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
