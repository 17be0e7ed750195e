//! One 802.11 channel shared by an access point and its stations, sans-IO: the queues of
//! every transmitter (the AP's per station, each station's towards the AP), contention for
//! the channel, A-MPDU aggregation, loss and retries. Like [`crate::device::Device`] it
//! has no clock: the driver calls [`Medium::enqueue`] when a packet reaches a transmitter,
//! [`Medium::poll`] when the channel may be free (it answers the end of the transmission
//! opportunity it started), and [`Medium::tx_done`] at that end, which hands over the
//! delivered packets. The simulator and a live forwarder drive the same code.
//!
//! Each transmitter has, from the top:
//! - `mac = "fifo"` (before 2016): one FIFO qdisc (pfifo_fast's 1000 packets) above the
//!   driver; the driver takes the FIFO's head while its queue holds fewer than
//!   `driver_queue_packets` (the head's station does not matter: a full driver stops the
//!   whole interface, as `netif_stop_queue` does);
//! - `mac = "fq_codel"` / `"airtime"`: mac80211's TXQs (FQ-CoDel per station over one flow
//!   table, [`super::fq`]); the driver pulls from a station's TXQ while that station has
//!   less than its AQL limit of estimated airtime queued below mac80211 (`aql = true`) or
//!   fewer than `driver_queue_packets` packets (`aql = false`);
//! - the driver's per-station hardware queues, from which aggregates are built: the AP
//!   serves stations one transmission opportunity each in turn (`fifo`, `fq_codel`) or by
//!   deficit round robin on airtime (`airtime`, [`super::airtime`]), charging downlink
//!   and uplink airtime, as mac80211 does.
//!
//! Contention (a documented abstraction of EDCA for AC_BE): whenever the channel falls
//! idle, every transmitter with a frame queued draws a fresh backoff uniformly from
//! [0, CW] slots (AP first, then stations in order, from the medium's random stream); the
//! lowest wins after AIFS + backoff × slot; equal lowest draws collide. Colliders each
//! double their CW (up to 1023) and retry; a success resets CW to 15. Residual backoff is
//! not carried over between rounds (real DCF freezes and resumes it), so a transmitter
//! that lost a round does not gain priority in the next.
//!
//! Airtime of one opportunity: AIFS + backoff + PPDU (preamble and data symbols) + SIFS +
//! block ack. A collision occupies the channel for the longest of the colliding PPDUs
//! followed by the same SIFS + block-ack time (the ack timeout). Every MPDU of a
//! successful A-MPDU is lost independently with the receiving station's `loss`; lost
//! MPDUs are retried at the head of their queue, and dropped after `retry_limit` retries.
//! Packets are handed over at the end of the opportunity (after the block ack).

use super::airtime::{aql_limit_ns, Policy, Scheduler};
use super::fq::{station_codel_params, MacFq};
use super::phy::{self, PhyRate, CW_MAX_BE, CW_MIN_BE, SLOT_NS};
use crate::packet::Packet;
use crate::qdisc::{DropReason, Drops};
use crate::rng::Rng;
use crate::time::{Duration, Time};
use std::collections::VecDeque;

/// The queueing above the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mac {
    /// One FIFO qdisc, per-station round robin by transmission opportunity.
    Fifo,
    /// mac80211's FQ-CoDel TXQs, round robin by transmission opportunity.
    FqCodel,
    /// mac80211's FQ-CoDel TXQs and its airtime-fairness scheduler.
    Airtime,
}

impl Mac {
    pub const NAMES: [&'static str; 3] = ["fifo", "fq_codel", "airtime"];
    pub fn parse(s: &str) -> Option<Mac> {
        match s {
            "fifo" => Some(Mac::Fifo),
            "fq_codel" => Some(Mac::FqCodel),
            "airtime" => Some(Mac::Airtime),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        Mac::NAMES[self as usize]
    }
}

/// A station's PHY rate: an MCS of the standard, or a fixed rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    Phy(PhyRate),
    /// A fixed data rate in bit/s, sent behind a one-stream HT-mixed preamble (36 µs)
    /// with no symbol rounding and the HT A-MPDU limit.
    Fixed(u64),
}

impl Rate {
    pub fn rate_bps(&self) -> u64 {
        match self {
            Rate::Phy(p) => p.rate_bps(),
            Rate::Fixed(r) => *r,
        }
    }
    /// Duration of a PPDU carrying `psdu_bytes`, in ns.
    pub fn ppdu_ns(&self, psdu_bytes: u64) -> u64 {
        match self {
            Rate::Phy(p) => p.ppdu_ns(psdu_bytes),
            Rate::Fixed(r) => 36_000 + ((22 + 8 * psdu_bytes) * 1_000_000_000).div_ceil(*r),
        }
    }
    fn preamble_ns(&self) -> u64 {
        match self {
            Rate::Phy(p) => p.preamble_ns(),
            Rate::Fixed(_) => 36_000,
        }
    }
    pub fn max_ampdu_bytes(&self) -> u64 {
        match self {
            Rate::Phy(p) => p.max_ampdu_bytes(),
            Rate::Fixed(_) => 65_535,
        }
    }
}

/// The medium's parameters (defaults: [`WifiConfig::default`]).
#[derive(Clone, Debug)]
pub struct WifiConfig {
    pub mac: Mac,
    /// Airtime Queue Limits (fq modes only).
    pub aql: bool,
    pub aql_low_us: u64,
    pub aql_high_us: u64,
    pub aql_threshold_us: u64,
    /// A-MPDU bounds: frames (the 64-frame block-ack window), bytes (0: the PHY's
    /// maximum), and PPDU airtime (4 ms, as mac80211/ath9k cap aggregates).
    pub ampdu_max_frames: u32,
    pub ampdu_max_bytes: u64,
    pub ampdu_max_airtime: Duration,
    /// The FIFO qdisc of `mac = "fifo"` (pfifo_fast's txqueuelen, 1000).
    pub qdisc_limit_packets: u32,
    /// Driver queue: packets the driver holds (whole interface for `fifo`, per station
    /// for the fq modes without AQL).
    pub driver_queue_packets: u32,
    pub fq_flows: u32,
    pub fq_limit_packets: u32,
    /// Retries of an MPDU before it is dropped.
    pub retry_limit: u8,
    /// Equal backoff draws collide (`false`: the first of them wins alone).
    pub collisions: bool,
    /// mac80211's CoDel parameter switch for slow stations (`sta_update_codel_params`).
    pub slow_station_codel: bool,
}

impl Default for WifiConfig {
    fn default() -> WifiConfig {
        WifiConfig {
            mac: Mac::Airtime,
            aql: true,
            aql_low_us: super::airtime::AQL_TXQ_LIMIT_LOW_US,
            aql_high_us: super::airtime::AQL_TXQ_LIMIT_HIGH_US,
            aql_threshold_us: super::airtime::AQL_THRESHOLD_US,
            ampdu_max_frames: 64,
            ampdu_max_bytes: 0,
            ampdu_max_airtime: Duration::from_ms(4),
            qdisc_limit_packets: 1000,
            driver_queue_packets: 128,
            fq_flows: super::fq::FQ_FLOWS,
            fq_limit_packets: super::fq::FQ_LIMIT_PACKETS,
            retry_limit: 10,
            collisions: true,
            slow_station_codel: true,
        }
    }
}

/// One station: its rate (a schedule of `(from, rate)`, the first at 0), loss probability
/// per MPDU (both directions) and airtime weight (µs per round).
#[derive(Clone, Debug)]
pub struct StationConfig {
    pub rates: Vec<(Time, Rate)>,
    pub loss: f64,
    pub weight_us: u32,
}

impl StationConfig {
    pub fn fixed(rate: Rate) -> StationConfig {
        StationConfig {
            rates: vec![(Time::ZERO, rate)],
            loss: 0.0,
            weight_us: super::airtime::DEFAULT_AIRTIME_WEIGHT_US,
        }
    }
    fn rate_at(&self, now: Time) -> Rate {
        let i = self.rates.partition_point(|&(t, _)| t <= now);
        self.rates[i.saturating_sub(1)].1
    }
}

/// Which way a packet crosses the channel, and the station at the far end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// AP → station.
    Down,
    /// Station → AP.
    Up,
}

/// Per-station counters (downlink: AP → station).
#[derive(Clone, Debug, Default)]
pub struct StationStats {
    /// Airtime of transmission opportunities used (collisions included), ns.
    pub airtime_down_ns: u64,
    pub airtime_up_ns: u64,
    pub delivered_down_pkts: u64,
    pub delivered_down_bytes: u64,
    pub delivered_up_pkts: u64,
    pub delivered_up_bytes: u64,
    pub txops_down: u64,
    pub txops_up: u64,
    /// MPDUs lost on the channel (each retry counts) and dropped after the retry limit.
    pub mpdus_lost: u64,
    pub retry_drops: u64,
    /// A-MPDU frames per successful opportunity, summed (mean = / txops).
    pub frames_down: u64,
    pub frames_up: u64,
}

/// Medium-wide counters.
#[derive(Clone, Debug, Default)]
pub struct MediumStats {
    pub busy_ns: u64,
    pub txops: u64,
    pub collisions: u64,
    /// Drops by the FIFO qdisc's limit.
    pub qdisc_drops: u64,
}

#[derive(Clone, Copy)]
struct HwPkt {
    pkt: Packet,
    retries: u8,
    /// Estimated airtime (AQL), ns.
    est_ns: u32,
}

/// One transmitter's queues: the AP (one destination per station) or a station (one).
struct Txr {
    /// The FIFO qdisc (`mac = "fifo"`), each packet with its destination queue.
    fifo: VecDeque<(Packet, u32)>,
    /// Packets in `fifo` per destination.
    fifo_per_dest: Vec<u32>,
    fq: Option<MacFq>,
    hw: Vec<VecDeque<HwPkt>>,
    hw_pending_ns: Vec<u64>,
    hw_packets: u32,
    hw_total_pending_ns: u64,
    sched: Scheduler,
    cw: u32,
}

impl Txr {
    fn new(cfg: &WifiConfig, weights: &[u32]) -> Txr {
        let n = weights.len();
        let policy = if cfg.mac == Mac::Airtime {
            Policy::Airtime
        } else {
            Policy::RoundRobin
        };
        Txr {
            fifo: VecDeque::new(),
            fifo_per_dest: vec![0; n],
            fq: (cfg.mac != Mac::Fifo).then(|| MacFq::new(n, cfg.fq_flows, cfg.fq_limit_packets)),
            hw: (0..n).map(|_| VecDeque::new()).collect(),
            hw_pending_ns: vec![0; n],
            hw_packets: 0,
            hw_total_pending_ns: 0,
            sched: Scheduler::new(policy, weights),
            cw: CW_MIN_BE,
        }
    }

    fn has_frames(&self) -> bool {
        self.hw_packets > 0
    }

    fn queued(&self) -> u64 {
        self.fifo.len() as u64
            + self.fq.as_ref().map_or(0, |f| f.total_packets() as u64)
            + self.hw_packets as u64
    }

    /// Packets queued for destination `d`, above and in the driver.
    fn queued_for(&self, d: usize) -> u64 {
        self.fifo_per_dest[d] as u64
            + self.fq.as_ref().map_or(0, |f| f.len(d) as u64)
            + self.hw[d].len() as u64
    }

    fn push_hw(&mut self, d: usize, hp: HwPkt) {
        self.hw_pending_ns[d] += hp.est_ns as u64;
        self.hw_total_pending_ns += hp.est_ns as u64;
        self.hw_packets += 1;
        self.hw[d].push_back(hp);
    }

    fn left_hw(&mut self, d: usize, hp: &HwPkt) {
        self.hw_pending_ns[d] -= hp.est_ns as u64;
        self.hw_total_pending_ns -= hp.est_ns as u64;
        self.hw_packets -= 1;
    }
}

/// Who transmits in one part of an opportunity: the AP (to station `dest`) or station `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sender {
    Ap,
    Sta(usize),
}

struct Part {
    sender: Sender,
    /// The station at the other end.
    sta: usize,
    frames: Vec<HwPkt>,
}

struct Txop {
    end: Time,
    success: bool,
    airtime_ns: u64,
    parts: Vec<Part>,
}

/// The channel, its access point and its stations.
pub struct Medium {
    cfg: WifiConfig,
    stations: Vec<StationConfig>,
    ap: Txr,
    sta: Vec<Txr>,
    rng: Rng,
    current: Option<Txop>,
    /// Reused buffers (no allocation per opportunity once warm).
    spare: Vec<Vec<HwPkt>>,
    pub station_stats: Vec<StationStats>,
    pub stats: MediumStats,
    /// Whose queue each drop came from, `(direction, station)`, one entry per packet the
    /// medium put into the caller's drop sink, in the same order: the caller drains both
    /// together (an overflow drop may belong to another station than the arrival).
    pub drop_owners: Vec<(Dir, usize)>,
}

impl Medium {
    /// A channel with `stations` (at least one); `rng` is the medium's own random stream.
    pub fn new(cfg: WifiConfig, stations: Vec<StationConfig>, rng: Rng) -> Medium {
        let weights: Vec<u32> = stations.iter().map(|s| s.weight_us).collect();
        let mut ap = Txr::new(&cfg, &weights);
        let mut sta: Vec<Txr> = stations
            .iter()
            .map(|s| Txr::new(&cfg, &[s.weight_us]))
            .collect();
        let n = stations.len() as u64;
        for (i, s) in stations.iter().enumerate() {
            // The expected throughput the kernel reads from rate control; here the PHY
            // rate at the start (deviation: not re-evaluated when a rate schedule moves).
            let thr_kbps = s.rate_at(Time::ZERO).rate_bps() / 1000;
            let params = if cfg.slow_station_codel {
                station_codel_params(thr_kbps, n)
            } else {
                station_codel_params(0, n)
            };
            if let Some(fq) = &mut ap.fq {
                fq.set_params(i, params);
            }
            if let Some(fq) = &mut sta[i].fq {
                fq.set_params(0, params);
            }
        }
        Medium {
            station_stats: vec![StationStats::default(); stations.len()],
            cfg,
            stations,
            ap,
            sta,
            rng,
            current: None,
            spare: Vec::new(),
            stats: MediumStats::default(),
            drop_owners: Vec::new(),
        }
    }

    pub fn config(&self) -> &WifiConfig {
        &self.cfg
    }

    pub fn stations(&self) -> usize {
        self.stations.len()
    }

    pub fn is_busy(&self) -> bool {
        self.current.is_some()
    }

    /// Packets inside the medium: queued at the AP and the stations, including those of
    /// the opportunity under way (they leave the driver's count when handed over).
    pub fn queued_packets(&self) -> u64 {
        self.ap.queued() + self.sta.iter().map(|t| t.queued()).sum::<u64>()
    }

    /// Packets in the opportunity under way (taken off the queues, not yet handed over).
    pub fn in_flight_packets(&self) -> u64 {
        self.current
            .as_ref()
            .map_or(0, |t| t.parts.iter().map(|p| p.frames.len() as u64).sum())
    }

    /// Packets queued in direction `dir` for/at station `sta` (qdisc, TXQ, driver).
    pub fn queued(&self, dir: Dir, sta: usize) -> u64 {
        match dir {
            Dir::Down => self.ap.queued_for(sta),
            Dir::Up => self.sta[sta].queued_for(0),
        }
    }

    /// Airtime estimate of one packet for AQL: its subframe at the station's rate plus a
    /// sixteenth of the opportunity's fixed costs (mac80211 assumes 16-frame aggregates
    /// for HT/VHT/HE, `ieee80211_calc_expected_tx_airtime`).
    fn estimate_ns(&self, sta: usize, len_bytes: u32, now: Time) -> u32 {
        let r = self.stations[sta].rate_at(now);
        let bits = 8 * phy::subframe_bytes(len_bytes) as u64;
        let fixed =
            phy::aifs_ns() + CW_MIN_BE as u64 * SLOT_NS / 2 + r.preamble_ns() + phy::ack_ns();
        (bits * 1_000_000_000 / r.rate_bps().max(1) + fixed / 16).min(u32::MAX as u64) as u32
    }

    /// A packet reaches the AP for station `sta` (`Dir::Down`) or station `sta`'s
    /// transmitter for the AP (`Dir::Up`). Drops go to `drops`.
    pub fn enqueue(&mut self, dir: Dir, sta: usize, mut pkt: Packet, now: Time, drops: &mut Drops) {
        pkt.enqueued_at = now;
        let d = if dir == Dir::Down { sta } else { 0 };
        let limit = self.cfg.qdisc_limit_packets as usize;
        // The transmitter's fields, not `txr_mut`: `drop_owners` is borrowed beside it.
        let t = match dir {
            Dir::Down => &mut self.ap,
            Dir::Up => &mut self.sta[sta],
        };
        if let Some(fq) = &mut t.fq {
            fq.enqueue(d, pkt, drops);
            for tin in fq.overflow_tins.drain(..) {
                let owner = if dir == Dir::Down { tin as usize } else { sta };
                self.drop_owners.push((dir, owner));
            }
        } else if t.fifo.len() >= limit {
            self.stats.qdisc_drops += 1;
            drops.push(pkt, DropReason::Overlimit);
            self.drop_owners.push((dir, sta));
            return;
        } else {
            t.fifo.push_back((pkt, d as u32));
            t.fifo_per_dest[d] += 1;
        }
        // Only this queue changed: pull from it alone (the others' room is unchanged).
        self.refill_one(dir, sta, d, now, drops);
    }

    fn txr_mut(&mut self, dir: Dir, sta: usize) -> &mut Txr {
        match dir {
            Dir::Down => &mut self.ap,
            Dir::Up => &mut self.sta[sta],
        }
    }

    /// Moves packets from the queues above the driver into its hardware queues.
    fn refill(&mut self, dir: Dir, sta: usize, now: Time, drops: &mut Drops) {
        let dests = if dir == Dir::Down {
            self.stations.len()
        } else {
            1
        };
        if self.cfg.mac == Mac::Fifo {
            // The driver takes the FIFO's head while it has room, whoever it is for.
            let cap = self.cfg.driver_queue_packets;
            loop {
                let t = self.txr_mut(dir, sta);
                if t.hw_packets >= cap {
                    break;
                }
                let Some((pkt, d)) = t.fifo.pop_front() else {
                    break;
                };
                t.fifo_per_dest[d as usize] -= 1;
                let peer = if dir == Dir::Down { d as usize } else { sta };
                let est_ns = self.estimate_ns(peer, pkt.len_bytes, now);
                self.txr_mut(dir, sta).push_hw(
                    d as usize,
                    HwPkt {
                        pkt,
                        retries: 0,
                        est_ns,
                    },
                );
            }
            return;
        }
        for d in 0..dests {
            self.refill_one(dir, sta, d, now, drops);
        }
    }

    /// Pulls from the TXQ of destination `d` while the driver has room for it (fq modes:
    /// the AQL limit or the per-station packet limit); the FIFO's refill for `fifo`.
    fn refill_one(&mut self, dir: Dir, sta: usize, d: usize, now: Time, drops: &mut Drops) {
        if self.cfg.mac == Mac::Fifo {
            return self.refill(dir, sta, now, drops);
        }
        let (aql, cap) = (self.cfg.aql, self.cfg.driver_queue_packets as usize);
        let (low, high, thr) = (
            self.cfg.aql_low_us,
            self.cfg.aql_high_us,
            self.cfg.aql_threshold_us,
        );
        let peer = if dir == Dir::Down { d } else { sta };
        loop {
            let t = self.txr_mut(dir, sta);
            let room = if aql {
                t.hw_pending_ns[d] < aql_limit_ns(t.hw_total_pending_ns, low, high, thr)
            } else {
                t.hw[d].len() < cap
            };
            let fq = t.fq.as_mut().expect("fq modes have TXQs");
            if !room || fq.is_empty(d) {
                break;
            }
            // CoDel judges the packet here, when it leaves mac80211's TXQ.
            let before = drops.len();
            let pkt = fq.dequeue(d, now, drops);
            for _ in before..drops.len() {
                self.drop_owners.push((dir, peer));
            }
            let Some(pkt) = pkt else {
                break;
            };
            let est_ns = self.estimate_ns(peer, pkt.len_bytes, now);
            self.txr_mut(dir, sta).push_hw(
                d,
                HwPkt {
                    pkt,
                    retries: 0,
                    est_ns,
                },
            );
        }
    }

    /// If the channel is idle and a transmitter has a frame, runs one contention round
    /// and starts the transmission opportunity; returns its end (the caller calls
    /// [`Medium::tx_done`] then). `None`: busy or nothing to send.
    pub fn poll(&mut self, now: Time) -> Option<Time> {
        if self.current.is_some() {
            return None;
        }
        // Contention: one backoff draw per transmitter with frames, AP first.
        let mut best = u32::MAX;
        let mut winners: [Option<Sender>; 2] = [None, None];
        let mut ties = 0u32;
        let contenders = std::iter::once(Sender::Ap).chain((0..self.sta.len()).map(Sender::Sta));
        for c in contenders {
            let t = match c {
                Sender::Ap => &self.ap,
                Sender::Sta(i) => &self.sta[i],
            };
            if !t.has_frames() {
                continue;
            }
            let draw = self.rng.below(t.cw as u64 + 1) as u32;
            if draw < best {
                best = draw;
                winners = [Some(c), None];
                ties = 1;
            } else if draw == best {
                ties += 1;
                if winners[1].is_none() {
                    winners[1] = Some(c);
                }
            }
        }
        winners[0]?;
        // More than two colliders are counted but only the first two transmit: a third
        // changes nothing but whose CW doubles (documented simplification).
        let collide = self.cfg.collisions && ties > 1;
        let mut parts = Vec::with_capacity(2);
        let mut longest = 0u64;
        for s in winners
            .into_iter()
            .take(if collide { 2 } else { 1 })
            .flatten()
        {
            let (part, ppdu) = self.build_ampdu(s, now);
            longest = longest.max(ppdu);
            parts.push(part);
        }
        let airtime_ns = phy::aifs_ns() + best as u64 * SLOT_NS + longest + phy::ack_ns();
        let end = now + Duration::from_ns(airtime_ns);
        self.current = Some(Txop {
            end,
            success: !collide,
            airtime_ns,
            parts,
        });
        Some(end)
    }

    /// Takes the next aggregate of sender `s` off its hardware queue; returns it and its
    /// PPDU duration.
    fn build_ampdu(&mut self, s: Sender, now: Time) -> (Part, u64) {
        let (t, sta) = match s {
            Sender::Ap => {
                let hw = &self.ap.hw;
                let d = self
                    .ap
                    .sched
                    .pick(|d| !hw[d].is_empty())
                    .expect("the AP has frames");
                (&mut self.ap, d)
            }
            Sender::Sta(i) => (&mut self.sta[i], i),
        };
        let d = if s == Sender::Ap { sta } else { 0 };
        let rate = self.stations[sta].rate_at(now);
        let max_bytes = match self.cfg.ampdu_max_bytes {
            0 => rate.max_ampdu_bytes(),
            b => b.min(rate.max_ampdu_bytes()),
        };
        let max_air = self.cfg.ampdu_max_airtime.as_ns();
        let mut frames = self.spare.pop().unwrap_or_default();
        let mut psdu = 0u64;
        let mut ppdu = 0u64;
        while let Some(hp) = t.hw[d].front() {
            let len = hp.pkt.len_bytes;
            // The previous last subframe gets its padding when another follows.
            let pad_prev = frames
                .last()
                .map_or(0, |p: &HwPkt| phy::last_subframe_pad(p.pkt.len_bytes))
                as u64;
            let next =
                psdu + pad_prev + (phy::subframe_bytes(len) - phy::last_subframe_pad(len)) as u64;
            let next_ppdu = rate.ppdu_ns(next);
            let fits = frames.len() < self.cfg.ampdu_max_frames as usize
                && next <= max_bytes
                && next_ppdu <= max_air;
            if !frames.is_empty() && !fits {
                break;
            }
            psdu = next;
            ppdu = next_ppdu;
            frames.push(t.hw[d].pop_front().expect("front exists"));
        }
        (
            Part {
                sender: s,
                sta,
                frames,
            },
            ppdu,
        )
    }

    /// The end of the opportunity [`Medium::poll`] started: delivered packets go to
    /// `deliver(direction, station, packet)`, packets dropped after their last retry to
    /// `drops` (`LinkLoss`); the queues above the driver refill the hardware queues.
    pub fn tx_done(
        &mut self,
        now: Time,
        drops: &mut Drops,
        mut deliver: impl FnMut(Dir, usize, Packet),
    ) {
        let Some(txop) = self.current.take() else {
            return;
        };
        debug_assert_eq!(txop.end, now);
        self.stats.busy_ns += txop.airtime_ns;
        self.stats.txops += 1;
        if !txop.success {
            self.stats.collisions += 1;
        }
        let retry_limit = self.cfg.retry_limit;
        for mut part in txop.parts {
            let sta = part.sta;
            let (dir, d) = match part.sender {
                Sender::Ap => (Dir::Down, sta),
                Sender::Sta(_) => (Dir::Up, 0),
            };
            let st = &mut self.station_stats[sta];
            match dir {
                Dir::Down => {
                    st.airtime_down_ns += txop.airtime_ns;
                    st.txops_down += 1;
                    st.frames_down += part.frames.len() as u64;
                }
                Dir::Up => {
                    st.airtime_up_ns += txop.airtime_ns;
                    st.txops_up += 1;
                    st.frames_up += part.frames.len() as u64;
                }
            }
            // mac80211 charges both directions' airtime to the station (tx and rx
            // airtime, `ieee80211_sta_register_airtime`).
            self.ap.sched.charge(sta, txop.airtime_ns);
            let loss = self.stations[sta].loss;
            let mut back: Vec<HwPkt> = Vec::new();
            let t = match part.sender {
                Sender::Ap => &mut self.ap,
                Sender::Sta(i) => &mut self.sta[i],
            };
            t.cw = if txop.success {
                CW_MIN_BE
            } else {
                (2 * t.cw + 1).min(CW_MAX_BE)
            };
            for mut hp in part.frames.drain(..) {
                let lost = !txop.success || (loss > 0.0 && self.rng.chance(loss));
                if !lost {
                    t.left_hw(d, &hp);
                    let st = &mut self.station_stats[sta];
                    match dir {
                        Dir::Down => {
                            st.delivered_down_pkts += 1;
                            st.delivered_down_bytes += hp.pkt.len_bytes as u64;
                        }
                        Dir::Up => {
                            st.delivered_up_pkts += 1;
                            st.delivered_up_bytes += hp.pkt.len_bytes as u64;
                        }
                    }
                    deliver(dir, sta, hp.pkt);
                    continue;
                }
                if txop.success {
                    self.station_stats[sta].mpdus_lost += 1;
                }
                hp.retries += 1;
                if hp.retries > retry_limit {
                    t.left_hw(d, &hp);
                    self.station_stats[sta].retry_drops += 1;
                    drops.push(hp.pkt, DropReason::LinkLoss);
                    self.drop_owners.push((dir, sta));
                } else {
                    back.push(hp);
                }
            }
            // Retried frames go back to the head of their queue, in order.
            for hp in back.into_iter().rev() {
                t.hw[d].push_front(hp);
            }
            self.spare.push(part.frames);
            match dir {
                Dir::Down => self.refill(Dir::Down, 0, now, drops),
                Dir::Up => self.refill(Dir::Up, sta, now, drops),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An overflow drop is charged to the station whose queue lost the packet, not to the
    /// arrival's: mac80211 drops from the fattest flow of the whole table.
    #[test]
    fn drop_owners_name_the_queue_that_lost_the_packet() {
        let cfg = WifiConfig {
            fq_limit_packets: 3,
            aql: false,
            driver_queue_packets: 1,
            ..WifiConfig::default()
        };
        let st = StationConfig::fixed(Rate::Fixed(6_000_000));
        let mut m = Medium::new(cfg, vec![st.clone(), st], Rng::from_seed(1));
        let mut drops = Drops::new();
        let pkt = |uid: u64, hash: u32, len: u32| {
            let mut p = Packet::synthetic(uid, uid as u32, len);
            p.hash = hash;
            p
        };
        // Station 0: one packet in the driver, two 1500-byte ones in its TXQ; station 1:
        // one 100-byte packet in the driver, then a second arrival overflows the table.
        for uid in 1..=3 {
            m.enqueue(
                Dir::Down,
                0,
                pkt(uid, 1 << 20, 1500),
                Time::ZERO,
                &mut drops,
            );
        }
        m.enqueue(Dir::Down, 1, pkt(4, 1 << 30, 100), Time::ZERO, &mut drops);
        m.enqueue(Dir::Down, 1, pkt(5, 1 << 30, 100), Time::ZERO, &mut drops);
        m.enqueue(Dir::Down, 1, pkt(6, 1 << 30, 100), Time::ZERO, &mut drops);
        assert_eq!(drops.len(), 1);
        assert_eq!(m.drop_owners, vec![(Dir::Down, 0)]);
        assert_eq!(drops.as_slice()[0].pkt.uid, 2);
    }
}
