//! Per-flow records: one row per flow in `flows.parquet`, for every engine. Fixed-size, so
//! memory grows with the number of flows, never with the number of packets.

use sojourn_core::Time;

/// How a flow's completion time is measured (docs/transport.md "FCT").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    UdpCbr,
    UdpOnOff,
    Tcp,
    UdpThin,
    /// A latency probe or isochronous stream (`ping`, `isochronous`; probes.parquet).
    Probe,
}

impl FlowKind {
    pub fn name(self) -> &'static str {
        match self {
            FlowKind::UdpCbr => "udp_cbr",
            FlowKind::UdpOnOff => "udp_onoff",
            FlowKind::Tcp => "tcp",
            FlowKind::UdpThin => "udp_thin",
            FlowKind::Probe => "probe",
        }
    }
}

/// One flow (a UDP stream or one TCP connection/transfer).
///
/// Layout (issue 19, many active flows): `repr(C, align(64))` with the counters the engine
/// updates for every packet it creates, delivers or drops in the first cache line, so
/// each such update touches one line of a (usually cold) record; what the endpoints count
/// and what is set once per flow follow.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct FlowRecord {
    /// One-way delay of delivered data packets: sum, count, max (ns).
    pub delay_sum_ns: u128,
    pub delay_count: u64,
    pub delay_max_ns: u64,
    /// Packets of this flow in the network now (created minus delivered and dropped, the
    /// engine's conservation count per flow): a record is final once this and
    /// `open_endpoints` are zero.
    pub in_network: u64,
    /// Packets of this flow put on the wire by its endpoints (both directions).
    pub pkts_sent: u64,
    /// Packets of this flow dropped anywhere (both directions).
    pub pkts_dropped: u64,
    /// Packets of this flow that arrived CE-marked.
    pub pkts_ce: u64,
    // ----- second cache line: the endpoints' counters, then the flow's description -----
    /// Payload bytes delivered in order to the receiving application.
    pub delivered_bytes: u64,
    /// Retransmitted segments (TCP).
    pub retransmits: u64,
    /// Retransmission timeouts (TCP).
    pub rtos: u64,
    /// `delivered_bytes` at the previous per-flow goodput sample (`[record] flows`).
    pub sampled_bytes: u64,
    pub flow: u32,
    /// Endpoints of this flow not yet closed.
    pub open_endpoints: u32,
    /// The application watching this flow's completion (`u32::MAX`: none).
    pub owner: u32,
    pub kind: FlowKind,
    /// Index of the `[[workload]]` entry that created it.
    pub workload: u32,
    pub src_node: u32,
    pub dst_node: u32,
    /// Congestion control name (TCP) or "" (UDP).
    pub cc: &'static str,
    /// When the application opened the flow (connect / first datagram scheduled).
    pub start: Time,
    /// When the first payload byte was written by the sending application (after connect).
    pub first_byte: Option<Time>,
    /// When the last byte of the planned size reached the receiving application.
    pub end: Option<Time>,
    /// Planned size in payload bytes; 0 = unbounded (bulk, CBR).
    pub size_bytes: u64,
}

impl FlowRecord {
    /// Adds what `other`, the same flow's record in another partition of a run cut over
    /// threads (sojourn-sim `parallel.rs`), counted at its nodes: counters add, the maximum
    /// delay is the larger, first byte and end come from the partition that saw them; what
    /// is set when the flow opens is alike in every partition. `open_endpoints` is left:
    /// it only decides when a streamed record is final, and a cut run does not stream.
    pub fn add_partition(&mut self, other: &FlowRecord) {
        self.delay_sum_ns += other.delay_sum_ns;
        self.delay_count += other.delay_count;
        self.delay_max_ns = self.delay_max_ns.max(other.delay_max_ns);
        // A partition's count goes below zero where packets it did not send left.
        self.in_network = self.in_network.wrapping_add(other.in_network);
        self.pkts_sent += other.pkts_sent;
        self.pkts_dropped += other.pkts_dropped;
        self.pkts_ce += other.pkts_ce;
        self.delivered_bytes += other.delivered_bytes;
        self.retransmits += other.retransmits;
        self.rtos += other.rtos;
        self.sampled_bytes += other.sampled_bytes;
        self.first_byte = self.first_byte.or(other.first_byte);
        self.end = self.end.or(other.end);
    }

    pub fn new(
        flow: u32,
        kind: FlowKind,
        workload: u32,
        src_node: u32,
        dst_node: u32,
        start: Time,
    ) -> FlowRecord {
        FlowRecord {
            flow,
            kind,
            workload,
            src_node,
            dst_node,
            cc: "",
            start,
            first_byte: None,
            end: None,
            size_bytes: 0,
            delivered_bytes: 0,
            pkts_sent: 0,
            pkts_dropped: 0,
            pkts_ce: 0,
            retransmits: 0,
            rtos: 0,
            delay_sum_ns: 0,
            delay_count: 0,
            delay_max_ns: 0,
            in_network: 0,
            open_endpoints: 0,
            owner: u32::MAX,
            sampled_bytes: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every counter the engine updates per packet (created, delivered, dropped) is in
    /// the record's first 64-byte cache line (issue 19: one line touched per update).
    #[test]
    fn per_packet_counters_share_the_first_cache_line() {
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!(align_of::<FlowRecord>(), 64);
        // Option<FlowRecord> uses the kind's niche: records stay 64-byte aligned in the window.
        assert_eq!(size_of::<Option<FlowRecord>>(), size_of::<FlowRecord>());
        for (name, off, len) in [
            ("delay_sum_ns", offset_of!(FlowRecord, delay_sum_ns), 16),
            ("delay_count", offset_of!(FlowRecord, delay_count), 8),
            ("delay_max_ns", offset_of!(FlowRecord, delay_max_ns), 8),
            ("in_network", offset_of!(FlowRecord, in_network), 8),
            ("pkts_sent", offset_of!(FlowRecord, pkts_sent), 8),
            ("pkts_dropped", offset_of!(FlowRecord, pkts_dropped), 8),
            ("pkts_ce", offset_of!(FlowRecord, pkts_ce), 8),
        ] {
            assert!(off + len <= 64, "{name} at {off}");
        }
    }
}
