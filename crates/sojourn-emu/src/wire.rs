//! Real frames ↔ sojourn-core packets: Ethernet II, IPv4 (RFC 791), IPv6 (RFC 8200), TCP
//! (RFC 9293) and UDP (RFC 768) headers read into a [`Packet`]; the edits a forwarder makes
//! to a frame in place (MAC rewrite, ECN CE mark with the IPv4 header checksum updated
//! incrementally per RFC 1624).
//!
//! Pure functions on byte slices: no I/O, testable anywhere.

use sojourn_core::accecn::{feedback_from_synack, Feedback};
use sojourn_core::packet::{proto, truesize_for, Addr, Ecn, FlowKey, Packet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Ethernet II header length (no VLAN tag: veths carry none unless configured).
pub const ETH_HLEN: usize = 14;
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;

/// What the forwarder needs from a frame besides the [`Packet`] fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub src_port: u16,
    pub dst_port: u16,
    pub dscp: u8,
    pub ecn: Ecn,
    /// TCP flags (0 for other protocols).
    pub tcp_flags: u8,
    /// The AE flag (RFC 9768 §3.1: bit 0 of byte 12, formerly NS; Accurate ECN).
    pub tcp_ae: bool,
    /// TCP sequence and acknowledgement numbers as on the wire (32-bit, wrapping).
    pub seq: u32,
    pub ack: u32,
    /// TCP receive window (unscaled).
    pub window: u16,
    /// Transport payload bytes (0 if the transport is not TCP/UDP).
    pub payload_bytes: u32,
}

#[inline]
fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

#[inline]
fn be32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

fn ecn_of(bits: u8) -> Ecn {
    match bits & 3 {
        0 => Ecn::NotEct,
        1 => Ecn::Ect1,
        2 => Ecn::Ect0,
        _ => Ecn::Ce,
    }
}

/// Reads the headers of an Ethernet frame; `None` for anything but IPv4/IPv6 or a frame
/// too short for the headers it announces.
pub fn parse(frame: &[u8]) -> Option<Headers> {
    if frame.len() < ETH_HLEN {
        return None;
    }
    let l3 = &frame[ETH_HLEN..];
    let (src, dst, proto_nr, tos, l4_off, l3_end) = match be16(frame, 12) {
        ETHERTYPE_IPV4 => {
            if l3.len() < 20 || l3[0] >> 4 != 4 {
                return None;
            }
            let ihl = (l3[0] & 0x0f) as usize * 4;
            let total = be16(l3, 2) as usize;
            if ihl < 20 || l3.len() < ihl || total < ihl {
                return None;
            }
            let src = Ipv4Addr::new(l3[12], l3[13], l3[14], l3[15]);
            let dst = Ipv4Addr::new(l3[16], l3[17], l3[18], l3[19]);
            // Fragments after the first carry no transport header.
            let frag_off = be16(l3, 6) & 0x1fff;
            let p = if frag_off != 0 { 0 } else { l3[9] };
            (
                IpAddr::V4(src),
                IpAddr::V4(dst),
                p,
                l3[1],
                ihl,
                total.min(l3.len()),
            )
        }
        ETHERTYPE_IPV6 => {
            if l3.len() < 40 || l3[0] >> 4 != 6 {
                return None;
            }
            let tc = (l3[0] << 4) | (l3[1] >> 4);
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&l3[8..24]);
            d.copy_from_slice(&l3[24..40]);
            let payload = be16(l3, 4) as usize;
            // Extension headers are not walked: a transport behind one is reported as the
            // extension's number with ports 0 (the flow is then keyed by addresses only).
            (
                IpAddr::V6(Ipv6Addr::from(s)),
                IpAddr::V6(Ipv6Addr::from(d)),
                l3[6],
                tc,
                40,
                (40 + payload).min(l3.len()),
            )
        }
        _ => return None,
    };
    let mut h = Headers {
        src,
        dst,
        proto: proto_nr,
        src_port: 0,
        dst_port: 0,
        dscp: tos >> 2,
        ecn: ecn_of(tos),
        tcp_flags: 0,
        tcp_ae: false,
        seq: 0,
        ack: 0,
        window: 0,
        payload_bytes: 0,
    };
    let l4 = &l3[l4_off.min(l3_end)..l3_end];
    match proto_nr {
        proto::TCP if l4.len() >= 20 => {
            let doff = (l4[12] >> 4) as usize * 4;
            h.src_port = be16(l4, 0);
            h.dst_port = be16(l4, 2);
            h.seq = be32(l4, 4);
            h.ack = be32(l4, 8);
            h.tcp_flags = l4[13];
            h.tcp_ae = l4[12] & 1 != 0;
            h.window = be16(l4, 14);
            h.payload_bytes = l4.len().saturating_sub(doff) as u32;
        }
        proto::UDP if l4.len() >= 8 => {
            h.src_port = be16(l4, 0);
            h.dst_port = be16(l4, 2);
            h.payload_bytes = (l4.len() - 8) as u32;
        }
        _ => {}
    }
    Some(h)
}

/// What a TCP handshake segment asks for or grants, from its AE, CWR and ECE flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcnSetup {
    /// Neither ECN nor Accurate ECN.
    None,
    /// RFC 3168 ECN (SYN: CWR + ECE; SYN-ACK: ECE alone, §6.1.1).
    Ecn,
    /// Accurate ECN (RFC 9768 §3.1.1: SYN: AE + CWR + ECE; SYN-ACK: (AE, CWR, ECE) = 010,
    /// 110, 100 or 111, echoing the SYN's IP-ECN field).
    AccEcn,
    /// Another combination (e.g. a SYN-ACK with CWR and ECE: a broken middlebox).
    Other,
}

/// Whether the segment is a SYN (`Some(false)`) or SYN-ACK (`Some(true)`), and what it
/// says about ECN; `None` for any other segment. A SYN-ACK is read as an Accurate ECN
/// client reads it (RFC 9768 Table 2, the
/// [`sojourn_core::accecn::feedback_from_synack`] the simulator's TCP negotiates with), except that the broken
/// reflector's 0b111 is counted apart (`Other`) rather than as no ECN.
pub fn ecn_setup(h: &Headers) -> Option<(bool, EcnSetup)> {
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    const ECE: u8 = 0x40;
    const CWR: u8 = 0x80;
    if h.proto != proto::TCP || h.tcp_flags & SYN == 0 {
        return None;
    }
    // (AE, CWR, ECE) as one 3-bit value, AE the most significant (RFC 9768 §3.1).
    let ace = (h.tcp_ae as u8) << 2
        | u8::from(h.tcp_flags & CWR != 0) << 1
        | u8::from(h.tcp_flags & ECE != 0);
    let syn_ack = h.tcp_flags & ACK != 0;
    let setup = if syn_ack {
        match (ace, feedback_from_synack(ace)) {
            (0b111, _) => EcnSetup::Other,
            (_, Feedback::None) => EcnSetup::None,
            (_, Feedback::Classic) => EcnSetup::Ecn,
            (_, Feedback::AccEcn) => EcnSetup::AccEcn,
        }
    } else {
        // RFC 3168 §6.1.1 ECN-setup SYN = CWR + ECE; RFC 9768 §3.1.1 AccECN SYN = all three.
        match ace {
            0b000 => EcnSetup::None,
            0b011 => EcnSetup::Ecn,
            0b111 => EcnSetup::AccEcn,
            _ => EcnSetup::Other,
        }
    };
    Some((syn_ack, setup))
}

/// The flow key of parsed headers.
pub fn flow_key(h: &Headers) -> FlowKey {
    FlowKey {
        src_addr: Addr::from(h.src),
        dst_addr: Addr::from(h.dst),
        src_port: h.src_port,
        dst_port: h.dst_port,
        proto: h.proto,
    }
}

/// A [`Packet`] for a frame of `len_bytes` (the frame length a qdisc sees: Ethernet
/// header included, no FCS) with headers `h`; identity fields (`uid`, `tag`, `hash`) and
/// times are the caller's.
pub fn packet(h: &Headers, len_bytes: u32) -> Packet {
    let mut p = Packet {
        key: flow_key(h),
        len_bytes,
        truesize_bytes: truesize_for(len_bytes),
        dscp: h.dscp,
        ecn: h.ecn,
        ..Default::default()
    };
    p.hdr.seq = h.seq as u64;
    p.hdr.ack = h.ack as u64;
    p.hdr.flags = h.tcp_flags;
    p.hdr.window = h.window as u32;
    p.hdr.payload_bytes = h.payload_bytes;
    p
}

/// RFC 1071 Internet checksum of `data` (the IPv4 header with its checksum field zeroed
/// gives the value to store).
pub fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [b] = chunks.remainder() {
        sum += (*b as u32) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes ECN CE into the frame's IP header (RFC 3168 §5), as `INET_ECN_set_ce` does:
/// only an ECN-capable packet (ECT(0)/ECT(1)) is changed; returns whether the frame now
/// carries CE. IPv4's header checksum is updated incrementally (RFC 1624 eqn. 3:
/// HC' = ~(~HC + ~m + m')), IPv6 has none.
pub fn set_ce(frame: &mut [u8]) -> bool {
    if frame.len() < ETH_HLEN + 2 {
        return false;
    }
    match be16(frame, 12) {
        ETHERTYPE_IPV4 if frame.len() >= ETH_HLEN + 20 => {
            let l3 = &mut frame[ETH_HLEN..];
            let tos = l3[1];
            match tos & 3 {
                3 => return true,
                0 => return false,
                _ => {}
            }
            let old_word = u16::from_be_bytes([l3[0], l3[1]]);
            l3[1] = tos | 3;
            let new_word = u16::from_be_bytes([l3[0], l3[1]]);
            let hc = u16::from_be_bytes([l3[10], l3[11]]);
            let mut sum = (!hc) as u32 + (!old_word) as u32 + new_word as u32;
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            let out = !(sum as u16);
            l3[10..12].copy_from_slice(&out.to_be_bytes());
            true
        }
        ETHERTYPE_IPV6 if frame.len() >= ETH_HLEN + 40 => {
            let l3 = &mut frame[ETH_HLEN..];
            // Traffic class = low nibble of byte 0 and high nibble of byte 1; ECN is its
            // two low bits, i.e. bits 5..4 of byte 1.
            let ecn = (l3[1] >> 4) & 3;
            match ecn {
                3 => true,
                0 => false,
                _ => {
                    l3[1] |= 0x30;
                    true
                }
            }
        }
        _ => false,
    }
}

/// The ECN bits of the frame's IP header (0 for non-IP frames).
pub fn ecn_bits(frame: &[u8]) -> u8 {
    if frame.len() < ETH_HLEN + 2 {
        return 0;
    }
    match be16(frame, 12) {
        ETHERTYPE_IPV4 => frame[ETH_HLEN + 1] & 3,
        ETHERTYPE_IPV6 => (frame[ETH_HLEN + 1] >> 4) & 3,
        _ => 0,
    }
}

/// Rewrites the Ethernet addresses (the forwarder's own port MAC as source, the next hop's
/// as destination), as a router does; the IP header is left alone (no TTL decrement: the
/// emulated path is a link, not a router hop).
#[inline]
pub fn rewrite_macs(frame: &mut [u8], src: [u8; 6], dst: [u8; 6]) {
    frame[0..6].copy_from_slice(&dst);
    frame[6..12].copy_from_slice(&src);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + UDP frame built by hand; header checksum from RFC 1071.
    fn udp4(tos: u8, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + payload];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[1] = tos;
        ip[2..4].copy_from_slice(&((20 + 8 + payload) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 1, 2]);
        ip[16..20].copy_from_slice(&[10, 0, 2, 2]);
        let c = internet_checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f[34..36].copy_from_slice(&40000u16.to_be_bytes());
        f[36..38].copy_from_slice(&5201u16.to_be_bytes());
        f[38..40].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        f
    }

    #[test]
    fn rfc1071_example_sums() {
        // RFC 1071 §3 worked example: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2
        // (one's complement sum), so the checksum is its complement 220d.
        assert_eq!(
            internet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0x220d
        );
    }

    #[test]
    fn parses_udp_over_ipv4() {
        let f = udp4(0xb8 | 2, 1000);
        let h = parse(&f).unwrap();
        assert_eq!(h.src, "10.0.1.2".parse::<IpAddr>().unwrap());
        assert_eq!(h.dst, "10.0.2.2".parse::<IpAddr>().unwrap());
        assert_eq!((h.src_port, h.dst_port, h.proto), (40000, 5201, 17));
        assert_eq!(h.dscp, 46, "EF");
        assert_eq!(h.ecn, Ecn::Ect0);
        assert_eq!(h.payload_bytes, 1000);
        let p = packet(&h, f.len() as u32);
        assert_eq!(p.len_bytes, 1042);
        assert_eq!(p.key.src_addr, Addr::v4(0x0a00_0102));
    }

    /// A minimal IPv4/TCP frame with the given flags byte (13) and AE bit.
    fn tcp4(flags: u8, ae: bool) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&40u16.to_be_bytes());
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 0, 1, 2]);
        f[30..34].copy_from_slice(&[10, 0, 2, 2]);
        f[46] = 0x50 | ae as u8; // data offset 5 words; AE is bit 0 of byte 12
        f[47] = flags;
        f
    }

    #[test]
    fn handshakes_are_classified_by_rfc_3168_and_rfc_9768() {
        use EcnSetup::*;
        let (syn, ack, ece, cwr) = (0x02u8, 0x10u8, 0x40u8, 0x80u8);
        let setup = |flags: u8, ae: bool| ecn_setup(&parse(&tcp4(flags, ae)).unwrap());
        // SYNs: RFC 3168 §6.1.1 ECN-setup SYN = ECE + CWR; RFC 9768 §3.1.1 AccECN SYN =
        // AE + CWR + ECE.
        assert_eq!(setup(syn, false), Some((false, None)));
        assert_eq!(setup(syn | ece | cwr, false), Some((false, Ecn)));
        assert_eq!(setup(syn | ece | cwr, true), Some((false, AccEcn)));
        // SYN-ACKs: ECN-setup SYN-ACK = ECE only; AccECN SYN-ACK (RFC 9768 Table 3): the
        // SYN's IP-ECN field as (AE, CWR, ECE) = 0 1 0 (Not-ECT), 0 1 1 (ECT(1)),
        // 1 0 0 (ECT(0)), 1 1 0 (CE); Table 2: 1 0 1 is reserved and read as AccECN.
        assert_eq!(setup(syn | ack, false), Some((true, None)));
        assert_eq!(setup(syn | ack | ece, false), Some((true, Ecn)));
        assert_eq!(setup(syn | ack | cwr, false), Some((true, AccEcn)));
        assert_eq!(setup(syn | ack | cwr | ece, false), Some((true, AccEcn)));
        assert_eq!(setup(syn | ack, true), Some((true, AccEcn)));
        assert_eq!(setup(syn | ack | cwr, true), Some((true, AccEcn)));
        assert_eq!(setup(syn | ack | ece, true), Some((true, AccEcn)));
        // 1 1 1 on a SYN-ACK: a server that reflects the AccECN SYN's flags (broken,
        // Table 2), counted apart.
        assert_eq!(setup(syn | ack | cwr | ece, true), Some((true, Other)));
        // A SYN with only some of the flags is neither setup.
        assert_eq!(setup(syn | ece, false), Some((false, Other)));
        // Not a handshake segment.
        assert_eq!(setup(ack | ece, false), Option::None);
    }

    #[test]
    fn ce_mark_keeps_ipv4_checksum_valid() {
        for tos in [0x01u8, 0x02, 0xb9, 0xba] {
            let mut f = udp4(tos, 10);
            assert!(set_ce(&mut f));
            assert_eq!(f[15] & 3, 3);
            assert_eq!(f[15] & !3, tos & !3, "DSCP untouched");
            // A header with a valid checksum sums to zero (RFC 1071 §1).
            assert_eq!(internet_checksum(&f[14..34]), 0, "tos {tos:#x}");
        }
        let mut f = udp4(0, 10);
        assert!(!set_ce(&mut f), "Not-ECT is not marked");
        assert_eq!(f[15], 0);
        let mut f = udp4(3, 10);
        assert!(set_ce(&mut f), "CE stays CE");
    }

    #[test]
    fn ce_mark_ipv6_traffic_class() {
        let mut f = vec![0u8; 14 + 40 + 8];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        // Version 6, traffic class 0x02 (ECT(0)), flow label 0x12345.
        f[14] = 0x60;
        f[15] = 0x21;
        f[16] = 0x23;
        f[17] = 0x45;
        f[18..20].copy_from_slice(&8u16.to_be_bytes());
        f[20] = 17;
        let h = parse(&f).unwrap();
        assert_eq!(h.ecn, Ecn::Ect0);
        assert!(set_ce(&mut f));
        assert_eq!(parse(&f).unwrap().ecn, Ecn::Ce);
        assert_eq!(f[14], 0x60);
        assert_eq!(f[15], 0x31, "flow label nibble kept");
    }

    #[test]
    fn non_ip_and_short_frames_are_refused() {
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert!(parse(&arp).is_none());
        let mut f = udp4(0, 0);
        f.truncate(20);
        assert!(parse(&f).is_none());
    }
}
