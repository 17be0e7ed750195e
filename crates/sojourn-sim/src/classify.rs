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
//! chains at 0). A node counts every packet it originates, forwards or receives. The counting
//! is sojourn-core's `conntrack` (any engine stamps `ct_bytes` with it); the rules are the
//! experiment model's.

pub use sojourn_core::conntrack::{
    ip_len, lookup, Conntrack, ConntrackPlan, CountBytes, CountDirection,
};
pub use sojourn_experiment::classify::{ClassifierPlan, Hook};

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_core::Packet;

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
