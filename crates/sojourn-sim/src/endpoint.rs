//! Endpoints: the transport ends of flows living on hosts (UDP sources and sinks, TCP
//! senders and receivers). Sans-IO: the engine calls them with an [`Io`] that carries
//! `now`, collects the packets they send and the notes they leave for the engine. The
//! engine holds them in its one enum of every endpoint type, `AnyEndpoint` (dispatch.rs).
//!
//! Timers are deadlines: after every call the engine reads [`Endpoint::deadline`] and
//! keeps at most one pending event per endpoint that is no later than it. An endpoint may
//! move its deadline freely (an RTO restarted by every ACK costs nothing); when the event
//! fires early the engine just re-arms it.

use crate::flows::FlowTable;
use sojourn_core::{Packet, Time};

/// The simulator's [`Packet::tag`]: its flow id in the low 32 bits (the packet's
/// [`Packet::conversation`]) and the id of the endpoint that receives it in the high 32.
/// The core never looks inside; only the simulator numbers flows and endpoints.
#[inline]
pub fn packet_tag(flow: u32, to_endpoint: u32) -> u64 {
    flow as u64 | (to_endpoint as u64) << 32
}

/// The endpoint that receives `pkt` (see [`packet_tag`]).
#[inline]
pub fn receiver_of(pkt: &Packet) -> u32 {
    (pkt.tag >> 32) as u32
}

/// Something an endpoint tells the engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Note {
    /// The receiving application got the last byte of the flow's planned size.
    Completed { flow: u32 },
    /// This endpoint is finished and its slot can be reused.
    Closed,
}

/// The engine side of a call into an endpoint.
pub struct Io<'a> {
    pub now: Time,
    pub(crate) out: &'a mut Vec<Packet>,
    pub(crate) notes: &'a mut Vec<Note>,
    /// Per-flow records; an endpoint updates its own flow's entry.
    pub flows: &'a mut FlowTable,
}

impl<'a> Io<'a> {
    /// Sends a packet from this endpoint's host. The engine assigns `uid` and `created_at`.
    #[inline]
    pub fn send(&mut self, pkt: Packet) {
        self.out.push(pkt);
    }
    #[inline]
    pub fn note(&mut self, n: Note) {
        self.notes.push(n);
    }
}

/// A transport endpoint.
pub trait Endpoint {
    /// Called once when the endpoint is created.
    fn start(&mut self, io: &mut Io);
    /// A packet addressed to this endpoint arrived.
    fn on_packet(&mut self, pkt: &Packet, io: &mut Io);
    /// The deadline returned by [`Endpoint::deadline`] has been reached (or passed).
    fn on_timer(&mut self, io: &mut Io);
    /// When this endpoint next needs `on_timer`, if ever.
    fn deadline(&self) -> Option<Time>;
    /// One of this endpoint's packets left the host's device (TSQ completion).
    fn on_tx_complete(&mut self, _pkt: &Packet, _io: &mut Io) {}
    /// One of this endpoint's packets was dropped by its own host's qdisc (Linux frees
    /// the skb: the same TSQ accounting as a completion). Called from inside the engine's
    /// enqueue/dequeue: an endpoint must not send from here (ask for a timer instead).
    fn on_host_drop(&mut self, _pkt: &Packet, _io: &mut Io) {}
    /// State for time series (cwnd, srtt, …).
    fn observe(&self, _emit: &mut dyn FnMut(&str, f64)) {}
}
