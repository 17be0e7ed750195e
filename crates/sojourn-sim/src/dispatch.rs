//! The engine's endpoint slots: every endpoint type in one enum, dispatched by `match`
//! (no `Box<dyn>` on the per-packet path). It stands beside the engine, above the
//! endpoints it lists, so that `endpoint` (the trait and its `Io`) imports none of them.

use crate::endpoint::{Endpoint, Io};
use crate::probe::{ProbeReflector, ProbeSource};
use crate::tcp::receiver::TcpReceiver;
use crate::tcp::sender::TcpSender;
use crate::udp::{ThinUdpSource, UdpSink, UdpSource};
use sojourn_core::{Packet, Time};

macro_rules! any_endpoint {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        /// Every endpoint type, dispatched by `match`. The sockets are held inline, not
        /// boxed: the engine's endpoint slots are one contiguous vector, so a call into an
        /// endpoint touches the slot and the socket's first lines together instead of
        /// following a pointer to a separate allocation (issue 19: with 10,000 flows every
        /// event touches a cold socket). Every slot is as large as the largest socket
        /// (`TcpSender`); the unused tail of a smaller endpoint's slot is never touched.
        #[allow(clippy::large_enum_variant)]
        pub enum AnyEndpoint { $($variant($ty)),* }
        impl Endpoint for AnyEndpoint {
            #[inline]
            fn start(&mut self, io: &mut Io) { match self { $(AnyEndpoint::$variant(e) => e.start(io)),* } }
            #[inline]
            fn on_packet(&mut self, pkt: &Packet, io: &mut Io) { match self { $(AnyEndpoint::$variant(e) => e.on_packet(pkt, io)),* } }
            #[inline]
            fn on_timer(&mut self, io: &mut Io) { match self { $(AnyEndpoint::$variant(e) => e.on_timer(io)),* } }
            #[inline]
            fn deadline(&self) -> Option<Time> { match self { $(AnyEndpoint::$variant(e) => e.deadline()),* } }
            #[inline]
            fn on_tx_complete(&mut self, pkt: &Packet, io: &mut Io) { match self { $(AnyEndpoint::$variant(e) => e.on_tx_complete(pkt, io)),* } }
            #[inline]
            fn on_host_drop(&mut self, pkt: &Packet, io: &mut Io) { match self { $(AnyEndpoint::$variant(e) => e.on_host_drop(pkt, io)),* } }
            fn observe(&self, emit: &mut dyn FnMut(&str, f64)) { match self { $(AnyEndpoint::$variant(e) => e.observe(emit)),* } }
        }
    };
}

any_endpoint! {
    UdpSource(UdpSource),
    UdpSink(UdpSink),
    TcpSender(TcpSender),
    TcpReceiver(TcpReceiver),
    ThinUdp(ThinUdpSource),
    ProbeSource(ProbeSource),
    ProbeReflector(ProbeReflector),
}
