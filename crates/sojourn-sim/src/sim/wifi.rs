//! The Wi-Fi medium as a hop of the simulator: one transmitter shared by several link
//! directions (docs/wifi.md). The medium's links (`sta{i}.down`, `sta{i}.up`) are the
//! experiment's highest link ids; a packet routed onto one goes into the core's
//! [`Medium`] instead of a link device, and the medium's transmission opportunities end
//! in a `TxDone` event of its first link (the class "end of a transmission" of the
//! canonical event order, docs/engine.md: no new class). What an opportunity delivers
//! reaches the far node at its end (no propagation delay on a room-sized channel) and
//! is forwarded from there, in the order the medium hands it over.
//!
//! Per-link counters of the medium's links: `enq_pkts` at enqueue, `tx_pkts`/`tx_bytes`
//! at delivery, `busy_ns` the airtime of the opportunities of that direction and station,
//! drops by the station the packet was for (downlink) or from (uplink), and the sojourn
//! histogram the time from entering the medium's queues to delivery (queueing, channel
//! access and airtime).

use super::{Event, Held, Sim};
use sojourn_core::qdisc::Drops;
use sojourn_core::rng::Rng;
use sojourn_core::wifi::{Dir, Medium, StationStats};
use sojourn_core::Packet;
use sojourn_experiment::wifi::WifiPlan;

/// The medium and what the engine needs around it.
pub struct WifiHop {
    pub medium: Medium,
    pub plan: WifiPlan,
    /// Reused: what one opportunity delivered, `(direction, station, packet)`.
    delivered: Vec<(Dir, usize, Packet)>,
    /// Reused: the medium's drops, handed to the links' accounting.
    drops: Drops,
    /// The per-station counters at the end of warm-up (results count what follows).
    pub stats_at_warmup: Vec<StationStats>,
    pub busy_at_warmup_ns: u64,
    /// Set while an opportunity's deliveries are forwarded: the next contention round
    /// starts after all of them, so packets they cause at once (ACKs) take part.
    delivering: bool,
}

impl WifiHop {
    pub fn new(plan: &WifiPlan, seed: u64) -> WifiHop {
        WifiHop {
            medium: Medium::new(
                plan.config.clone(),
                plan.stations.clone(),
                Rng::stream(seed, "wifi-medium", 0),
            ),
            stats_at_warmup: vec![StationStats::default(); plan.stations.len()],
            busy_at_warmup_ns: 0,
            plan: plan.clone(),
            delivered: Vec::new(),
            drops: Drops::new(),
            delivering: false,
        }
    }

    /// Packets inside the medium (queued or in the current opportunity).
    pub fn in_medium(&self) -> u64 {
        self.medium.queued_packets()
    }
}

impl Sim {
    /// A packet routed onto medium link `l` (see the module's notes).
    pub(super) fn wifi_enqueue(&mut self, l: u32, held: Held) {
        let now = self.now;
        let pkt = match held {
            Held::Here(p) => *p,
            Held::Flight(s) | Held::Run(s) => *self.flight.packet(s),
        };
        held.release(&mut self.flight);
        let hop = self.wifi.as_mut().expect("a medium link has a medium");
        let (dir, sta) = hop.plan.link_role(l).expect("a medium link");
        self.links[l as usize].stats.enq_pkts += 1;
        // GSO buffers are cut into wire packets before the medium (the station's or the
        // AP's driver segments them, as the link device does after its qdisc).
        let segs = pkt.wire_packets();
        if segs > 1 {
            self.acct.created += segs as u64 - 1;
            self.flows.get_mut(pkt.conversation()).in_network += segs as u64 - 1;
            for i in 0..segs {
                let seg = pkt.segment(i);
                hop.medium.enqueue(dir, sta, seg, now, &mut hop.drops);
            }
        } else {
            hop.medium.enqueue(dir, sta, pkt, now, &mut hop.drops);
        }
        self.wifi_after();
    }

    /// After the medium changed: account its drops and start an opportunity if it is idle.
    fn wifi_after(&mut self) {
        let hop = self.wifi.as_mut().expect("medium");
        if !hop.drops.is_empty() {
            let mut drops = std::mem::take(&mut hop.drops);
            let mut owners = std::mem::take(&mut hop.medium.drop_owners);
            debug_assert_eq!(drops.len(), owners.len());
            let first = hop.plan.first_link;
            for (d, (dir, sta)) in drops.drain().zip(owners.drain(..)) {
                let l = first + 2 * sta as u32 + (dir == Dir::Up) as u32;
                self.drops.push(d.pkt, d.reason);
                self.account_drops(l);
            }
            let hop = self.wifi.as_mut().expect("medium");
            hop.drops = drops;
            hop.medium.drop_owners = owners;
        }
        let hop = self.wifi.as_mut().expect("medium");
        if hop.delivering {
            return;
        }
        if let Some(end) = hop.medium.poll(self.now) {
            let l = hop.plan.first_link;
            self.events.push(end, Event::TxDone(l));
        }
    }

    /// The end of the medium's current transmission opportunity.
    pub(super) fn wifi_tx_done(&mut self) {
        let now = self.now;
        let hop = self.wifi.as_mut().expect("medium");
        let mut delivered = std::mem::take(&mut hop.delivered);
        let busy_before: Vec<u64> = hop
            .medium
            .station_stats
            .iter()
            .flat_map(|s| [s.airtime_down_ns, s.airtime_up_ns])
            .collect();
        hop.medium.tx_done(now, &mut hop.drops, |dir, sta, pkt| {
            delivered.push((dir, sta, pkt))
        });
        let first = hop.plan.first_link;
        for (k, s) in hop.medium.station_stats.iter().enumerate() {
            let (d, u) = (
                s.airtime_down_ns - busy_before[2 * k],
                s.airtime_up_ns - busy_before[2 * k + 1],
            );
            self.links[(first + 2 * k as u32) as usize].stats.busy_ns += d;
            self.links[(first + 2 * k as u32 + 1) as usize]
                .stats
                .busy_ns += u;
        }
        hop.delivering = true;
        for (dir, sta, mut pkt) in delivered.drain(..) {
            let l = first + 2 * sta as u32 + (dir == Dir::Up) as u32;
            let link = &mut self.links[l as usize];
            link.stats.tx_pkts += 1;
            link.stats.tx_bytes += pkt.len_bytes as u64;
            link.stats.sojourn.record((now - pkt.enqueued_at).as_ns());
            if link.log_packets {
                self.packet_log.push(now, l, &pkt, None, self.packet_sample);
            }
            let (to, notify) = (link.to, link.notify_tx);
            if notify {
                self.notify_tx_complete(self.links[l as usize].from, &pkt);
            }
            self.forward(to, &mut pkt, false);
        }
        let hop = self.wifi.as_mut().expect("medium");
        hop.delivered = delivered;
        hop.delivering = false;
        self.wifi_after();
    }

    /// Starts the per-station results' measured period (warm-up end).
    pub(super) fn wifi_reset_stats(&mut self) {
        if let Some(hop) = &mut self.wifi {
            hop.stats_at_warmup = hop.medium.station_stats.clone();
            hop.busy_at_warmup_ns = hop.medium.stats.busy_ns;
        }
    }
}

impl WifiHop {
    /// summary.json's `wifi` block: the medium's mode and, per station, what it got over
    /// the measured period (after warm-up; docs/output-schema.md).
    pub fn summary(&self, period_s: f64, names: &[String]) -> serde_json::Value {
        use serde_json::json;
        let cfg = self.medium.config();
        let per = |x: f64| if period_s > 0.0 { x / period_s } else { 0.0 };
        let stations: Vec<serde_json::Value> = self
            .medium
            .station_stats
            .iter()
            .zip(&self.stats_at_warmup)
            .enumerate()
            .map(|(i, (s, w))| {
                let down_ns = s.airtime_down_ns - w.airtime_down_ns;
                let up_ns = s.airtime_up_ns - w.airtime_up_ns;
                let txops = (s.txops_down - w.txops_down) + (s.txops_up - w.txops_up);
                let frames = (s.frames_down - w.frames_down) + (s.frames_up - w.frames_up);
                json!({
                    "station": names[self.plan.station_nodes[i] as usize],
                    "rate_bps": self.plan.stations[i].rates[0].1.rate_bps(),
                    "airtime_share": per((down_ns + up_ns) as f64 / 1e9),
                    "airtime_down_share": per(down_ns as f64 / 1e9),
                    "airtime_up_share": per(up_ns as f64 / 1e9),
                    "throughput_down_bps": per((s.delivered_down_bytes - w.delivered_down_bytes) as f64 * 8.0),
                    "throughput_up_bps": per((s.delivered_up_bytes - w.delivered_up_bytes) as f64 * 8.0),
                    "packets_down": s.delivered_down_pkts - w.delivered_down_pkts,
                    "packets_up": s.delivered_up_pkts - w.delivered_up_pkts,
                    "txops": txops,
                    "mean_ampdu_frames": if txops > 0 { frames as f64 / txops as f64 } else { 0.0 },
                    "mpdus_lost": s.mpdus_lost - w.mpdus_lost,
                    "retry_drops": s.retry_drops - w.retry_drops,
                })
            })
            .collect();
        json!({
            "mac": cfg.mac.name(),
            "aql": cfg.aql,
            "busy_share": per((self.medium.stats.busy_ns - self.busy_at_warmup_ns) as f64 / 1e9),
            "txops": self.medium.stats.txops,
            "collisions": self.medium.stats.collisions,
            "stations": stations,
        })
    }
}
