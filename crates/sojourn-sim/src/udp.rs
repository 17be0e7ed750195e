//! UDP sources (constant bit rate, on/off, thin streams of messages) and sinks.
//!
//! A CBR source sends one datagram of `packet_bytes` (the frame length a qdisc sees) every
//! `packet_bytes·8/rate` seconds from `start` to `stop`. An on/off source does the same
//! during "on" periods and is silent during "off" periods, with exponential or fixed
//! period lengths drawn from the flow's own random stream.

use crate::endpoint::{packet_tag, Endpoint, Io};
use sojourn_core::packet::{Ecn, FlowKey, TransportHeader};
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, Packet, Time};
use sojourn_experiment::dist::IntervalDist;
use sojourn_experiment::transport::UDP_OVERHEAD_BYTES;

pub use sojourn_experiment::workload::OnOff;

pub struct UdpSource {
    pub flow: u32,
    pub key: FlowKey,
    pub hash: u32,
    pub peer_endpoint: u32,
    pub packet_bytes: u32,
    pub gap: Duration,
    pub stop: Time,
    pub ecn: Ecn,
    pub dscp: u8,
    pub onoff: OnOff,
    rng: Rng,
    next_send: Option<Time>,
    on_until: Time,
    seq: u64,
}

impl UdpSource {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        flow: u32,
        key: FlowKey,
        hash: u32,
        peer_endpoint: u32,
        rate_bps: u64,
        packet_bytes: u32,
        start: Time,
        stop: Time,
        onoff: OnOff,
        rng: Rng,
    ) -> UdpSource {
        let gap = sojourn_core::time::tx_time(packet_bytes as u64, rate_bps);
        UdpSource {
            flow,
            key,
            hash,
            peer_endpoint,
            packet_bytes,
            gap,
            stop,
            ecn: Ecn::NotEct,
            dscp: 0,
            onoff,
            rng,
            next_send: Some(start),
            on_until: Time::MAX,
            seq: 0,
        }
    }

    fn draw(&mut self, d: Duration) -> Duration {
        match self.onoff {
            OnOff::Exponential { .. } => Duration::from_secs_f64(self.rng.exp(d.as_secs_f64())),
            _ => d,
        }
    }
}

impl Endpoint for UdpSource {
    fn start(&mut self, _io: &mut Io) {
        if let OnOff::Exponential { on, .. } | OnOff::Fixed { on, .. } = self.onoff {
            let start = self.next_send.unwrap_or(Time::ZERO);
            self.on_until = start + self.draw(on);
        }
    }

    fn on_packet(&mut self, _pkt: &Packet, _io: &mut Io) {}

    fn on_timer(&mut self, io: &mut Io) {
        let Some(t) = self.next_send else { return };
        if t > io.now {
            return;
        }
        if t >= self.stop {
            self.next_send = None;
            return;
        }
        if t >= self.on_until {
            // Go silent for an off period, then start a new on period.
            if let OnOff::Exponential { on, off } | OnOff::Fixed { on, off } = self.onoff {
                let resume = t + self.draw(off);
                self.on_until = resume + self.draw(on);
                self.next_send = Some(resume);
                return;
            }
        }
        let pkt = Packet {
            tag: packet_tag(self.flow, self.peer_endpoint),
            key: self.key,
            hash: self.hash,
            len_bytes: self.packet_bytes,
            truesize_bytes: sojourn_core::packet::truesize_for(self.packet_bytes),
            dscp: self.dscp,
            ecn: self.ecn,
            hdr: sojourn_core::packet::TransportHeader {
                seq: self.seq,
                payload_bytes: self.packet_bytes.saturating_sub(UDP_OVERHEAD_BYTES),
                ..Default::default()
            },
            ..Default::default()
        };
        self.seq += 1;
        io.send(pkt);
        // Next send time follows the schedule, not `now`, so a late timer never drifts the rate.
        self.next_send = Some(t + self.gap);
    }

    fn deadline(&self) -> Option<Time> {
        self.next_send
    }
}

/// Counts what arrives; the engine records delay and bytes in the flow's record.
pub struct UdpSink {
    pub flow: u32,
}

impl Endpoint for UdpSink {
    fn start(&mut self, _io: &mut Io) {}
    fn on_packet(&mut self, pkt: &Packet, io: &mut Io) {
        io.flows.get_mut(self.flow).delivered_bytes += pkt.hdr.payload_bytes as u64;
    }
    fn on_timer(&mut self, _io: &mut Io) {}
    fn deadline(&self) -> Option<Time> {
        None
    }
}

/// A thin stream over UDP: every interval one message, split into datagrams of at most
/// MTU − 28 payload bytes (MTU − 48 over IPv6).
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

impl ThinUdpSource {
    /// A stream of `message`-byte messages from now until `stop`, every `interval` (drawn
    /// from `rng`), to endpoint `peer`; `mtu` and `ip6_extra` (the IPv6 header's extra
    /// bytes, or 0) bound the datagrams.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        flow: u32,
        key: FlowKey,
        hash: u32,
        peer: u32,
        message: u32,
        (mtu, ip6_extra): (u32, u32),
        interval: IntervalDist,
        (now, stop): (Time, Time),
        rng: Rng,
    ) -> ThinUdpSource {
        ThinUdpSource {
            flow,
            key,
            hash,
            peer,
            message,
            // IP (20 B, or 40 B over IPv6) and UDP (8 B) headers inside the MTU.
            max_payload: mtu - 28 - ip6_extra,
            overhead_bytes: UDP_OVERHEAD_BYTES + ip6_extra,
            interval,
            next_at: now,
            stop,
            rng,
            seq: 0,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::FlowTable;

    #[test]
    fn cbr_spacing_is_exact() {
        // 1500 B at 12 Mbit/s: one packet per 1 ms exactly.
        let key = FlowKey::default();
        let mut s = UdpSource::new(
            0,
            key,
            0,
            1,
            12_000_000,
            1500,
            Time(0),
            Time(10_000_000),
            OnOff::Always,
            Rng::from_seed(1),
        );
        let mut out = Vec::new();
        let mut notes = Vec::new();
        let mut flows = FlowTable::default();
        let mut now = Time(0);
        while let Some(d) = s.deadline() {
            now = d;
            let mut io = Io {
                now,
                out: &mut out,
                notes: &mut notes,
                flows: &mut flows,
            };
            s.on_timer(&mut io);
        }
        assert_eq!(out.len(), 10, "sends at 0..9 ms, not at stop");
        assert!(now <= Time(10_000_000));
        assert_eq!(s.gap, Duration::from_ms(1));
    }
}
