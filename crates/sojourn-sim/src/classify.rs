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
use sojourn_core::{Duration, Time};
pub use sojourn_experiment::classify::{Adapt, ClassifierPlan, Hook};

/// Seed 000's per-interval median policy on a two-level map ([`Adapt`]): connections that
/// finish are recorded with their conntrack count; when an interval ends, the threshold
/// becomes the median of the counts recorded during it (kept if none). Evaluated lazily:
/// [`MedianPolicy::roll`] closes every interval that ended by `now`, in order, so the
/// threshold in force at any time is the one a per-interval timer would have set.
#[derive(Clone, Debug)]
pub struct MedianPolicy {
    pub interval: Duration,
    /// End of the interval in progress.
    pub boundary: Time,
    /// `(finish time, count)` of connections finished since the last closed interval.
    done: Vec<(Time, u64)>,
}

impl MedianPolicy {
    pub fn new(interval: Duration) -> MedianPolicy {
        MedianPolicy {
            interval,
            boundary: Time::ZERO + interval,
            done: Vec::new(),
        }
    }

    /// A connection finished at `t` (non-decreasing) with `count` bytes.
    pub fn finished(&mut self, t: Time, count: u64) {
        self.done.push((t, count));
    }

    /// Closes every interval that ended at or before `now`; returns `(end of the interval,
    /// new threshold)` for each that changed the threshold from `current`.
    pub fn roll(&mut self, now: Time, mut current: u64) -> Vec<(Time, u64)> {
        let mut out = Vec::new();
        while now >= self.boundary {
            let n = self.done.partition_point(|&(t, _)| t < self.boundary);
            if n > 0 {
                let mut v: Vec<u64> = self.done.drain(..n).map(|(_, c)| c).collect();
                let m = median(&mut v);
                if m != current {
                    current = m;
                    out.push((self.boundary, m));
                }
            }
            self.boundary += self.interval;
        }
        out
    }
}

/// The median of `v` (sorted in place); for an even count the mean of the middle two,
/// rounded down (integer bytes, like the map's bounds).
pub fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        ((v[n / 2 - 1] as u128 + v[n / 2] as u128) / 2) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_core::Packet;

    fn at(ms: u64) -> Time {
        Time::ZERO + Duration::from_ms(ms)
    }

    #[test]
    fn median_policy_follows_a_hand_computed_schedule() {
        // 1 s intervals; connections finishing in each, and the threshold after it:
        // [0,1): 10000 30000 20000 -> 20000; [1,2): none -> kept; [2,3): 100000 400000 ->
        // 250000 (mean of the middle two); [3,4): 250000 -> unchanged (no change reported);
        // [4,5): 5 7 1000 9 3 -> 7.
        let mut m = MedianPolicy::new(Duration::from_secs(1));
        for (ms, c) in [
            (100, 10000),
            (500, 30000),
            (999, 20000),
            (2000, 100000),
            (2999, 400000),
            (3500, 250000),
            (4000, 5),
            (4100, 7),
            (4200, 1000),
            (4300, 9),
            (4999, 3),
        ] {
            m.finished(at(ms), c);
        }
        assert_eq!(m.roll(at(999), 6331208), vec![], "no interval has ended");
        assert_eq!(m.roll(at(1000), 6331208), vec![(at(1000), 20000)]);
        // several intervals closed at once, in order, each as a timer would have
        assert_eq!(
            m.roll(at(5000), 20000),
            vec![(at(3000), 250000), (at(5000), 7)]
        );
        assert_eq!(m.boundary, at(6000));
        assert_eq!(m.roll(at(7500), 7), vec![], "nothing finished: kept");
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(&mut [3, 1, 2]), 2);
        assert_eq!(median(&mut [4, 1, 3, 2]), 2, "(2 + 3) / 2 rounded down");
        assert_eq!(median(&mut [u64::MAX, u64::MAX]), u64::MAX, "no overflow");
    }

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
