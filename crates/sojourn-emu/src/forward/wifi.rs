//! The Wi-Fi medium in the live forwarder (docs/wifi.md, docs/emulate.md): the medium's
//! links (`sta{i}.down`, `sta{i}.up`, consecutive from `first_link`) do not serialise on a
//! device of their own; their frames go into sojourn-core's [`Medium`], the code the
//! simulator drives, in the forwarder's virtual time that follows the clock. A
//! transmission opportunity starts at the exact virtual time the channel fell idle (or a
//! frame arrived at an idle channel); at its end the frames it carried join their link's
//! delay line with a release at that end (no propagation delay), from where the link's
//! usual release sends them out of their port or routes them on. The frames' bytes stay in
//! the buffer pool while the medium holds their `Packet`s.

use super::pool::slot_of;
use super::Forwarder;
use crate::wire;
use sojourn_core::qdisc::Drops;
use sojourn_core::rng::Rng;
use sojourn_core::wifi::{Dir, Medium, StationConfig, WifiConfig};
use sojourn_core::{Packet, Time};

/// The medium of a `kind = "wifi"` experiment, for [`super::Plan::wifi`].
#[derive(Clone, Debug)]
pub struct WifiMedium {
    pub config: WifiConfig,
    pub stations: Vec<StationConfig>,
    /// `sta{i}.down` is link `first_link + 2i`, `sta{i}.up` the next.
    pub first_link: usize,
}

/// The running medium.
pub(super) struct LiveMedium {
    medium: Medium,
    first: usize,
    links: usize,
    /// End of the transmission opportunity under way.
    pub(super) busy_until: Option<Time>,
    /// Last virtual time the medium was driven at (its operations see non-decreasing times).
    clock: Time,
    drops: Drops,
    delivered: Vec<(Dir, usize, Packet)>,
}

impl LiveMedium {
    pub(super) fn new(plan: &WifiMedium, seed: u64) -> LiveMedium {
        LiveMedium {
            medium: Medium::new(
                plan.config.clone(),
                plan.stations.clone(),
                Rng::stream(seed, "emu-wifi", 0),
            ),
            first: plan.first_link,
            links: 2 * plan.stations.len(),
            busy_until: None,
            clock: Time::ZERO,
            drops: Drops::new(),
            delivered: Vec::new(),
        }
    }

    /// Whether link `li` is a direction of this medium.
    pub(super) fn holds(&self, li: usize) -> bool {
        li >= self.first && li < self.first + self.links
    }

    fn link_of(&self, dir: Dir, sta: usize) -> usize {
        self.first + 2 * sta + (dir == Dir::Up) as usize
    }

    /// The direction and station of medium link `li`.
    fn role(&self, li: usize) -> (Dir, usize) {
        let k = li - self.first;
        let dir = if k.is_multiple_of(2) {
            Dir::Down
        } else {
            Dir::Up
        };
        (dir, k / 2)
    }

    /// Frames the medium holds for link `li` (queued or in the opportunity under way).
    pub(super) fn queued_on(&self, li: usize) -> u64 {
        let (dir, sta) = self.role(li);
        self.medium.queued(dir, sta)
    }
}

impl Forwarder {
    /// Whether link `li` is a direction of the medium.
    #[inline]
    pub(super) fn on_medium(&self, li: usize) -> bool {
        self.medium.as_ref().is_some_and(|m| m.holds(li))
    }

    /// A frame routed onto medium link `li` at `now`.
    pub(super) fn medium_enqueue(&mut self, li: usize, p: Packet, now: Time) {
        self.medium_advance(now);
        let link = &mut self.links[li];
        link.rep.received_pkts += 1;
        link.rep.received_bytes += p.len_bytes as u64;
        let m = self.medium.as_mut().expect("a medium link has a medium");
        let (dir, sta) = m.role(li);
        let at = now.max(m.clock);
        m.clock = at;
        m.medium.enqueue(dir, sta, p, at, &mut m.drops);
        self.medium_settle(at);
        self.medium_start(at);
    }

    /// Ends every transmission opportunity due by `t`, each at its exact time, and starts
    /// the next one at that end.
    pub(super) fn medium_advance(&mut self, t: Time) {
        loop {
            let m = self.medium.as_mut().expect("medium");
            let Some(end) = m.busy_until.filter(|&e| e <= t) else {
                break;
            };
            m.busy_until = None;
            m.clock = end;
            let mut delivered = std::mem::take(&mut m.delivered);
            m.medium
                .tx_done(end, &mut m.drops, |d, s, p| delivered.push((d, s, p)));
            for (dir, sta, p) in delivered.drain(..) {
                let li = self.medium.as_ref().expect("medium").link_of(dir, sta);
                // CoDel in mac80211 marks with ECN: the mark goes into the real header.
                if p.ecn == sojourn_core::Ecn::Ce {
                    let f = self.pool.frame_mut(slot_of(&p));
                    let was_ce = wire::ecn_bits(f) == 3;
                    if wire::set_ce(f) && !was_ce {
                        self.links[li].rep.ce_written += 1;
                    }
                }
                let link = &mut self.links[li];
                if link.measuring {
                    link.rep
                        .sojourn_ns
                        .record(end.saturating_since(p.enqueued_at).as_ns());
                }
                link.last_release = link.last_release.max(end);
                link.in_flight.push_back((end, p));
            }
            self.medium.as_mut().expect("medium").delivered = delivered;
            self.medium_settle(end);
            self.medium_start(end);
        }
    }

    /// Starts an opportunity at `at` if the channel is idle and a transmitter has a frame.
    fn medium_start(&mut self, at: Time) {
        let m = self.medium.as_mut().expect("medium");
        if m.busy_until.is_none() {
            m.busy_until = m.medium.poll(at);
        }
    }

    /// Counts the medium's drops on the links whose queues lost them.
    fn medium_settle(&mut self, t: Time) {
        let m = self.medium.as_mut().expect("medium");
        if m.drops.is_empty() {
            return;
        }
        let mut drops = std::mem::take(&mut m.drops);
        let mut owners = std::mem::take(&mut m.medium.drop_owners);
        for (d, (dir, sta)) in drops.drain().zip(owners.drain(..)) {
            let li = self.medium.as_ref().expect("medium").link_of(dir, sta);
            self.count_drop(li, &d.pkt, d.reason, t);
        }
        let m = self.medium.as_mut().expect("medium");
        m.drops = drops;
        m.medium.drop_owners = owners;
    }
}
