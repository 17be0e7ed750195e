//! Per-flow records: one row per flow in `flows.parquet`. Fixed-size, so memory grows with
//! the number of flows, never with the number of packets.

use sojourn_core::Time;

/// How a flow's completion time is measured (docs/transport.md "FCT").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    UdpCbr,
    UdpOnOff,
    Tcp,
    UdpThin,
}

impl FlowKind {
    pub fn name(self) -> &'static str {
        match self {
            FlowKind::UdpCbr => "udp_cbr",
            FlowKind::UdpOnOff => "udp_onoff",
            FlowKind::Tcp => "tcp",
            FlowKind::UdpThin => "udp_thin",
        }
    }
}

/// One flow (a UDP stream or one TCP connection/transfer).
#[derive(Clone, Debug)]
pub struct FlowRecord {
    pub flow: u32,
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
    /// Payload bytes delivered in order to the receiving application.
    pub delivered_bytes: u64,
    /// Packets of this flow put on the wire by its endpoints (both directions).
    pub pkts_sent: u64,
    /// Packets of this flow dropped anywhere (both directions).
    pub pkts_dropped: u64,
    /// Packets of this flow that arrived CE-marked.
    pub pkts_ce: u64,
    /// Retransmitted segments (TCP).
    pub retransmits: u64,
    /// Retransmission timeouts (TCP).
    pub rtos: u64,
    /// One-way delay of delivered data packets: sum, count, max (ns).
    pub delay_sum_ns: u128,
    pub delay_count: u64,
    pub delay_max_ns: u64,
}

impl FlowRecord {
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
        }
    }
}

/// All flows of a run, indexed by flow id.
#[derive(Default)]
pub struct FlowTable {
    pub records: Vec<FlowRecord>,
}

impl FlowTable {
    pub fn add(&mut self, mut rec: FlowRecord) -> u32 {
        let id = self.records.len() as u32;
        rec.flow = id;
        self.records.push(rec);
        id
    }
    #[inline]
    pub fn get_mut(&mut self, flow: u32) -> &mut FlowRecord {
        &mut self.records[flow as usize]
    }
    #[inline]
    pub fn get(&self, flow: u32) -> &FlowRecord {
        &self.records[flow as usize]
    }
    pub fn len(&self) -> usize {
        self.records.len()
    }
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}
