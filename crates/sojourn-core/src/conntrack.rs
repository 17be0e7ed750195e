//! Connection tracking as nftables sees it (`ct bytes` with accounting), sans-IO, so any
//! engine can stamp `Packet::ct_bytes` before classification: the simulator per node, a
//! live forwarder per link. Age-based scheduling reads the count through a map of
//! inclusive ranges (`meta priority set ct bytes map { 0-T : 1:1, * : 1:2 }`), [`lookup`].
//!
//! Semantics (Linux `nft_ct` with accounting): the count covers both directions unless
//! `direction = "original"`, counts IP-layer lengths (the frame minus its 14-byte Ethernet
//! header; or payload bytes with `bytes = "payload"`), and already includes the current
//! packet when the rule runs (conntrack hooks at priority −200, before filter chains at 0).
//!
//! Connections are identified by the engine: the simulator has dense flow ids; an engine
//! that sees only 5-tuples gets dense ids (and the original direction: the first packet
//! seen) from [`ConnTable`].

use crate::packet::{FlowKey, Packet};
use std::collections::HashMap;

/// Which directions a connection's count covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountDirection {
    Both,
    Original,
}

/// What a connection's count adds up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountBytes {
    /// IP packet lengths (nftables `ct bytes`).
    Ip,
    /// Transport payload only.
    Payload,
}

/// Conntrack configuration (per node or per link).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConntrackPlan {
    pub direction: CountDirection,
    pub bytes: CountBytes,
}

impl Default for ConntrackPlan {
    fn default() -> Self {
        ConntrackPlan {
            direction: CountDirection::Both,
            bytes: CountBytes::Ip,
        }
    }
}

/// Byte counts per connection (dense connection ids).
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

    /// Accounts `pkt` on connection `conn` and returns the connection's count including
    /// it. `original` says whether the packet travels in the connection's original
    /// direction.
    #[inline]
    pub fn account_conn(&mut self, conn: u32, pkt: &Packet, original: bool) -> u64 {
        let f = conn as usize;
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

    /// The count of connection `conn` so far (0 if never seen).
    #[inline]
    pub fn count(&self, conn: u32) -> u64 {
        self.counts.get(conn as usize).copied().unwrap_or(0)
    }

    /// [`Conntrack::account_conn`] with the packet's own `flow` as the connection id (an
    /// engine whose flow ids are dense and shared by both directions, like the simulator).
    #[inline]
    pub fn account(&mut self, pkt: &Packet, original: bool) -> u64 {
        self.account_conn(pkt.conversation(), pkt, original)
    }
}

/// Dense connection ids for 5-tuples, both directions of a connection under one id; the
/// direction of the first packet seen is the original one (as conntrack's).
#[derive(Clone, Debug, Default)]
pub struct ConnTable {
    ids: HashMap<FlowKey, u32>,
    originals: Vec<FlowKey>,
}

impl ConnTable {
    /// The connection of `key` and whether `key` is its original direction.
    pub fn lookup(&mut self, key: FlowKey) -> (u32, bool) {
        if let Some(&id) = self.ids.get(&key) {
            return (id, self.originals[id as usize] == key);
        }
        if let Some(&id) = self.ids.get(&key.reversed()) {
            return (id, false);
        }
        let id = self.originals.len() as u32;
        self.ids.insert(key, id);
        self.originals.push(key);
        (id, true)
    }

    /// Connections seen.
    pub fn len(&self) -> usize {
        self.originals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.originals.is_empty()
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

/// Maps a count through inclusive ranges `(upto, priority)` (nftables map `0-T : …, * : …`).
#[inline]
pub fn lookup(map: &[(u64, u32)], count: u64) -> Option<u32> {
    map.iter()
        .find(|&&(upto, _)| count <= upto)
        .map(|&(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{proto, Addr};

    #[test]
    fn ranges_are_inclusive_like_nft() {
        let map = vec![(1000, 0x10001), (u64::MAX, 0x10002)];
        assert_eq!(lookup(&map, 0), Some(0x10001));
        assert_eq!(lookup(&map, 1000), Some(0x10001), "0-T includes T");
        assert_eq!(lookup(&map, 1001), Some(0x10002));
    }

    #[test]
    fn counts_ip_bytes_both_ways_including_the_current_packet() {
        // A 1514-B frame is a 1500-B IP packet; an ACK frame of 66 B is 52 B of IP.
        let mut t = ConnTable::default();
        let k = FlowKey {
            src_addr: Addr::v6([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            dst_addr: Addr::v4(0x0a00_0002),
            src_port: 40000,
            dst_port: 80,
            proto: proto::TCP,
        };
        let mut ct = Conntrack::new(ConntrackPlan::default());
        let (c, orig) = t.lookup(k);
        assert_eq!((c, orig), (0, true));
        assert_eq!(
            ct.account_conn(c, &Packet::synthetic(1, 9, 1514), orig),
            1500
        );
        let (c2, orig2) = t.lookup(k.reversed());
        assert_eq!((c2, orig2), (0, false));
        assert_eq!(
            ct.account_conn(c2, &Packet::synthetic(2, 9, 66), orig2),
            1552
        );
        let mut orig_only = Conntrack::new(ConntrackPlan {
            direction: CountDirection::Original,
            bytes: CountBytes::Ip,
        });
        assert_eq!(
            orig_only.account_conn(0, &Packet::synthetic(1, 9, 1514), true),
            1500
        );
        assert_eq!(
            orig_only.account_conn(0, &Packet::synthetic(2, 9, 66), false),
            1500
        );
        assert_eq!(t.len(), 1);
    }
}
