//! Connections as the forwarder sees them: dense ids for conntrack and per-connection
//! drops, and which direction is the original.

use super::ConnReport;
use sojourn_core::FlowKey;
use std::collections::HashMap;

/// FlowKey's own symmetric mixer as the table's hash (std's SipHash costs more than the
/// rest of the lookup; keys come from our own namespaces, so DoS resistance is moot).
#[derive(Default)]
pub(super) struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        sojourn_core::rng::splitmix64_mix(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.0 = self.0.rotate_left(8) ^ v as u64;
    }
    fn write_u16(&mut self, v: u16) {
        self.0 = self.0.rotate_left(16) ^ v as u64;
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = self.0.rotate_left(32) ^ v as u64;
    }
}

pub(super) type KeyMap<V> = HashMap<FlowKey, V, std::hash::BuildHasherDefault<KeyHasher>>;

#[derive(Default)]
pub(super) struct Flows {
    pub(super) ids: KeyMap<u32>,
    pub(super) conns: Vec<ConnReport>,
    /// Whether a FIN or RST of the connection was seen.
    pub(super) closed: Vec<bool>,
}

impl Flows {
    /// Dense id of the connection of `key` and whether `key` is its original direction.
    /// A TCP SYN (without ACK) on a connection that saw a FIN or RST starts a new
    /// connection with a new id (a port reused after TIME_WAIT; conntrack does the same).
    pub(super) fn lookup(&mut self, key: FlowKey, tcp_flags: u8, now_ns: u64) -> (u32, bool) {
        use sojourn_core::packet::tcp_flags as f;
        let found = match self.ids.get(&key) {
            Some(&id) => Some(id),
            None => self.ids.get(&key.reversed()).copied(),
        };
        let syn = key.proto == 6 && tcp_flags & (f::SYN | f::ACK) == f::SYN;
        let id = match found {
            Some(id) if !(syn && self.closed[id as usize]) => {
                if key.proto == 6 && tcp_flags & (f::FIN | f::RST) != 0 {
                    self.closed[id as usize] = true;
                }
                return (id, self.conns[id as usize].key == key);
            }
            Some(_) => {
                self.ids.remove(&key.reversed());
                self.conns.len() as u32
            }
            None => self.conns.len() as u32,
        };
        self.conns.push(ConnReport {
            key,
            first_ns: now_ns,
            drops_original: 0,
            drops_reply: 0,
        });
        self.closed.push(false);
        self.ids.insert(key, id);
        (id, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_core::Addr;

    #[test]
    fn flows_know_the_original_direction() {
        let mut f = Flows::default();
        let k = FlowKey {
            src_addr: Addr::v4(1),
            dst_addr: Addr::v4(2),
            src_port: 10,
            dst_port: 20,
            proto: 6,
        };
        assert_eq!(f.lookup(k, 0, 0), (0, true));
        assert_eq!(f.lookup(k.reversed(), 0, 0), (0, false));
        assert_eq!(f.lookup(k, 0, 0), (0, true));
        let k2 = FlowKey { src_port: 11, ..k };
        assert_eq!(f.lookup(k2, 0, 0), (1, true));
    }

    #[test]
    fn a_syn_after_the_close_is_a_new_connection() {
        use sojourn_core::packet::tcp_flags::{ACK, FIN, RST, SYN};
        let mut f = Flows::default();
        let k = FlowKey {
            src_addr: Addr::v4(1),
            dst_addr: Addr::v4(2),
            src_port: 40000,
            dst_port: 5201,
            proto: 6,
        };
        assert_eq!(f.lookup(k, SYN, 0), (0, true));
        // A retransmitted SYN of an open connection stays in it (conntrack: SYN_SENT).
        assert_eq!(f.lookup(k, SYN, 1), (0, true));
        assert_eq!(f.lookup(k.reversed(), SYN | ACK, 2), (0, false));
        assert_eq!(f.lookup(k, ACK | FIN, 3), (0, true));
        assert_eq!(f.lookup(k.reversed(), ACK, 4), (0, false));
        // The port reused after TIME_WAIT: a new connection, found from both directions.
        assert_eq!(f.lookup(k, SYN, 5), (1, true));
        assert_eq!(f.lookup(k.reversed(), SYN | ACK, 6), (1, false));
        assert_eq!(f.conns[1].first_ns, 5);
        // A reset closes too; UDP never splits.
        assert_eq!(f.lookup(k.reversed(), RST, 7), (1, false));
        assert_eq!(f.lookup(k, SYN, 8), (2, true));
        let u = FlowKey { proto: 17, ..k };
        assert_eq!(f.lookup(u, SYN | FIN, 9), (3, true));
        assert_eq!(f.lookup(u, SYN, 10), (3, true));
    }
}
