//! Connection tracking and classification at nodes, the way the seed-000 Linux deployment
//! does age-based scheduling: nftables counts a connection's bytes (`ct bytes`) and a rule
//! maps that count to `skb->priority` through inclusive ranges
//! (`meta priority set ct bytes map { 0-T : 1:1, * : 1:2 }`), which prio / pfifo_fast /
//! CAKE then honour.
//!
//! Conntrack semantics (Linux `nft_ct` with accounting): the count covers both directions
//! unless `direction = "original"`, counts IP-layer lengths (the frame minus its 14-byte
//! Ethernet header; or payload bytes with `bytes = "payload"`), and already includes the
//! current packet when the rule runs (conntrack hooks at priority −200, before filter
//! chains at 0). A node counts every packet it originates, forwards or receives.

use sojourn_core::Packet;
pub use sojourn_experiment::classify::{
    ClassifierPlan, ConntrackPlan, CountBytes, CountDirection, Hook,
};

/// Per-node state: a byte count per flow (flow ids are dense).
#[derive(Clone, Debug, Default)]
pub struct Conntrack {
    pub plan: ConntrackPlan,
    counts: Vec<u64>,
}

impl Conntrack {
    pub fn new(plan: ConntrackPlan) -> Conntrack {
        Conntrack {
            plan,
            counts: Vec::new(),
        }
    }

    /// Accounts `pkt` and returns the connection's count including it. `original` says
    /// whether the packet travels in the connection's original direction.
    #[inline]
    pub fn account(&mut self, pkt: &Packet, original: bool) -> u64 {
        let f = pkt.flow as usize;
        if self.counts.len() <= f {
            self.counts.resize(f + 1, 0);
        }
        if original || self.plan.direction == CountDirection::Both {
            self.counts[f] += match self.plan.bytes {
                // skb->len at the netfilter hook: a GSO buffer is one IP packet there,
                // its headers counted once (payload + one set of headers).
                CountBytes::Ip => ip_len(pkt) as u64,
                CountBytes::Payload => pkt.hdr.payload_bytes as u64,
            };
        }
        self.counts[f]
    }
}

/// The IP length netfilter sees (`skb->len` without the 14-byte Ethernet header): for a
/// GSO buffer the payload plus one set of headers.
#[inline]
pub fn ip_len(pkt: &Packet) -> u32 {
    let n = pkt.wire_packets();
    let headers = pkt.len_bytes.saturating_sub(pkt.hdr.payload_bytes) / n;
    (pkt.hdr.payload_bytes + headers).saturating_sub(14)
}

/// Maps a count through the inclusive ranges.
#[inline]
pub fn lookup(map: &[(u64, u32)], count: u64) -> Option<u32> {
    map.iter()
        .find(|&&(upto, _)| count <= upto)
        .map(|&(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_inclusive_like_nft() {
        let map = vec![(1000, 0x10001), (u64::MAX, 0x10002)];
        assert_eq!(lookup(&map, 0), Some(0x10001));
        assert_eq!(lookup(&map, 1000), Some(0x10001), "0-T includes T");
        assert_eq!(lookup(&map, 1001), Some(0x10002));
    }

    #[test]
    fn conntrack_counts_ip_bytes_both_directions_including_current() {
        let mut ct = Conntrack::new(ConntrackPlan::default());
        let mut data = Packet::synthetic(0, 3, 1514);
        data.hdr.payload_bytes = 1448;
        let ack = Packet::synthetic(1, 3, 66);
        assert_eq!(
            ct.account(&data, true),
            1500,
            "IP length of the current packet is included"
        );
        assert_eq!(ct.account(&ack, false), 1552, "reply direction counts too");
        let mut orig = Conntrack::new(ConntrackPlan {
            direction: CountDirection::Original,
            bytes: CountBytes::Payload,
        });
        assert_eq!(orig.account(&data, true), 1448);
        assert_eq!(orig.account(&ack, false), 1448);
        // A 45-segment GSO buffer is one IP packet at the output hook: payload + one
        // 52-B IP/TCP header set (skb->len), not 45 of them.
        let mut gso = Packet::synthetic(2, 3, 45 * 1514);
        gso.hdr.payload_bytes = 45 * 1448;
        gso.gso_segs = 45;
        gso.gso_size = 1448;
        assert_eq!(ct.account(&gso, true), 1552 + 45 * 1448 + 52);
    }
}
