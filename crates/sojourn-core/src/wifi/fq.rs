//! mac80211's per-station queues: FQ-CoDel over one flow table shared by every TXQ of the
//! interface (Linux `include/net/fq.h`, `fq_impl.h`; `net/mac80211/tx.c`).
//!
//! What mac80211 does, in our words:
//! - one table of 4096 flows (`fq_init(&local->fq, 4096)`) for all TXQs; a packet's flow
//!   is its hash scaled to the table; if that flow already holds packets of *another*
//!   TXQ (another station), the packet goes to its own TXQ's default flow instead, so two
//!   stations never share a queue;
//! - each TXQ (a "tin") has new and old flow lists served by deficit round robin with a
//!   quantum of 300 bytes (`fq_init`'s default), new flows first, as fq_codel;
//! - CoDel judges packets per flow at dequeue, with the station's parameters: target
//!   20 ms, interval 100 ms, ECN on; for a slow station (expected throughput below
//!   6000 kbit/s × associated stations, `sta_update_codel_params`) 50 ms, 300 ms, ECN off;
//! - one packet limit for the whole interface, 8192 (`fq_init`); above it the head of the
//!   fattest flow of the whole table (any station) is dropped, one packet at a time.
//!
//! Deviations: the 16 MiB memory limit is not modelled (8192 full-sized packets stay below
//! it); one TXQ per station (the best-effort TID), not one per TID.

use crate::packet::Packet;
use crate::qdisc::codel_law::{codel_dequeue, CodelParams, CodelQueue, CodelStats, CodelVars};
use crate::qdisc::{DropReason, Drops};
use crate::time::{Duration, Time};
use std::collections::VecDeque;

/// `fq_init`'s defaults and mac80211's table size.
pub const FQ_FLOWS: u32 = 4096;
pub const FQ_LIMIT_PACKETS: u32 = 8192;
pub const FQ_QUANTUM_BYTES: i32 = 300;
/// `STA_SLOW_THRESHOLD` (kbit/s): below it × stations, a station gets the slow CoDel set.
pub const STA_SLOW_THRESHOLD_KBPS: u64 = 6000;

/// mac80211's CoDel parameters for a station whose expected throughput is
/// `thr_kbps` with `stations` associated (`sta_update_codel_params`).
pub fn station_codel_params(thr_kbps: u64, stations: u64) -> CodelParams {
    let slow = thr_kbps > 0 && thr_kbps < STA_SLOW_THRESHOLD_KBPS * stations;
    CodelParams {
        target: Duration::from_ms(if slow { 50 } else { 20 }),
        interval: Duration::from_ms(if slow { 300 } else { 100 }),
        mtu_bytes: 1514,
        ecn: !slow,
        ce_threshold: None,
    }
}

#[derive(Default)]
struct Flow {
    packets: VecDeque<Packet>,
    backlog_bytes: u64,
    deficit: i32,
    /// The TXQ whose packets this flow holds (`flow->tin`); `None` when idle.
    tin: Option<u32>,
    /// On one of its TXQ's lists.
    listed: bool,
    vars: CodelVars,
}

/// The flow's FIFO as CoDel sees it; the backlog CoDel reads is the flow's own.
struct FlowQueue<'a> {
    flow: &'a mut Flow,
    total: &'a mut u32,
}

impl CodelQueue for FlowQueue<'_> {
    fn dequeue_head(&mut self, _vars: &CodelVars) -> Option<Packet> {
        let p = self.flow.packets.pop_front()?;
        self.flow.backlog_bytes -= p.len_bytes as u64;
        *self.total -= 1;
        Some(p)
    }
    fn backlog_bytes(&self) -> u64 {
        self.flow.backlog_bytes
    }
}

#[derive(Default)]
struct Tin {
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    packets: u32,
    params: Option<CodelParams>,
}

/// The interface's TXQs (one per station) and their shared flow table.
pub struct MacFq {
    /// `FQ_FLOWS` hashed flows, then one default flow per TXQ.
    flows: Vec<Flow>,
    tins: Vec<Tin>,
    flows_cnt: u32,
    limit_packets: u32,
    total_packets: u32,
    pub codel_stats: CodelStats,
    pub overlimit_drops: u64,
    /// The TXQ of each overflow drop, in the order they went into the drop sink (the
    /// caller drains it: a drop may belong to another station than the arriving packet).
    pub overflow_tins: Vec<u32>,
}

impl MacFq {
    /// `tins` TXQs, `flows` hashed flows, `limit` packets for the whole table.
    pub fn new(tins: usize, flows: u32, limit_packets: u32) -> MacFq {
        let n = flows as usize + tins;
        MacFq {
            flows: (0..n).map(|_| Flow::default()).collect(),
            tins: (0..tins).map(|_| Tin::default()).collect(),
            flows_cnt: flows,
            limit_packets,
            total_packets: 0,
            codel_stats: CodelStats::default(),
            overlimit_drops: 0,
            overflow_tins: Vec::new(),
        }
    }

    /// Sets TXQ `tin`'s CoDel parameters (the station's).
    pub fn set_params(&mut self, tin: usize, params: CodelParams) {
        self.tins[tin].params = Some(params);
    }

    pub fn len(&self, tin: usize) -> u32 {
        self.tins[tin].packets
    }

    pub fn total_packets(&self) -> u32 {
        self.total_packets
    }

    pub fn is_empty(&self, tin: usize) -> bool {
        self.tins[tin].packets == 0
    }

    /// Enqueues `pkt` (its `enqueued_at` stamped by the caller) into TXQ `tin`.
    pub fn enqueue(&mut self, tin: usize, pkt: Packet, drops: &mut Drops) {
        // `reciprocal_scale(hash, flows_cnt)`: the hash's high bits pick the flow.
        let mut idx = ((pkt.hash as u64 * self.flows_cnt as u64) >> 32) as usize;
        if let Some(owner) = self.flows[idx].tin {
            if owner != tin as u32 {
                idx = self.flows_cnt as usize + tin;
            }
        }
        let f = &mut self.flows[idx];
        f.tin = Some(tin as u32);
        f.backlog_bytes += pkt.len_bytes as u64;
        f.packets.push_back(pkt);
        self.total_packets += 1;
        self.tins[tin].packets += 1;
        if !f.listed {
            f.listed = true;
            f.deficit = FQ_QUANTUM_BYTES;
            self.tins[tin].new_flows.push_back(idx as u32);
        }
        while self.total_packets > self.limit_packets {
            self.drop_from_fattest(drops);
        }
    }

    /// Head drop from the flow with the largest byte backlog in the whole table
    /// (`fq_find_fattest_flow`; ties to the lowest index).
    fn drop_from_fattest(&mut self, drops: &mut Drops) {
        let mut best = 0usize;
        for (i, f) in self.flows.iter().enumerate() {
            if f.backlog_bytes > self.flows[best].backlog_bytes {
                best = i;
            }
        }
        let f = &mut self.flows[best];
        let Some(p) = f.packets.pop_front() else {
            return;
        };
        f.backlog_bytes -= p.len_bytes as u64;
        self.total_packets -= 1;
        let tin = f.tin.expect("a flow with packets belongs to a TXQ") as usize;
        self.tins[tin].packets -= 1;
        self.overlimit_drops += 1;
        self.overflow_tins.push(tin as u32);
        drops.push(p, DropReason::FattestFlow);
    }

    /// The next packet of TXQ `tin` (`fq_tin_dequeue` with CoDel per flow).
    pub fn dequeue(&mut self, tin: usize, now: Time, drops: &mut Drops) -> Option<Packet> {
        let params = self.tins[tin].params.unwrap_or(station_codel_params(0, 1));
        loop {
            let t = &mut self.tins[tin];
            let (idx, from_new) = if let Some(&i) = t.new_flows.front() {
                (i as usize, true)
            } else if let Some(&i) = t.old_flows.front() {
                (i as usize, false)
            } else {
                return None;
            };
            if self.flows[idx].deficit <= 0 {
                self.flows[idx].deficit += FQ_QUANTUM_BYTES;
                let t = &mut self.tins[tin];
                if from_new {
                    t.new_flows.pop_front();
                } else {
                    t.old_flows.pop_front();
                }
                t.old_flows.push_back(idx as u32);
                continue;
            }
            let before = self.total_packets;
            let flow = &mut self.flows[idx];
            let mut vars = flow.vars;
            let mut q = FlowQueue {
                flow,
                total: &mut self.total_packets,
            };
            let pkt = codel_dequeue(
                &mut q,
                &params,
                &mut vars,
                &mut self.codel_stats,
                now,
                drops,
            );
            self.flows[idx].vars = vars;
            let removed = before - self.total_packets;
            self.tins[tin].packets -= removed;
            match pkt {
                Some(p) => {
                    self.flows[idx].deficit -= p.len_bytes as i32;
                    return Some(p);
                }
                None => {
                    let t = &mut self.tins[tin];
                    if from_new {
                        t.new_flows.pop_front();
                    } else {
                        t.old_flows.pop_front();
                    }
                    // An emptied new flow goes to the old list once (so it cannot jump
                    // ahead again at once); an emptied old flow leaves the lists.
                    if from_new && !t.old_flows.is_empty() {
                        t.old_flows.push_back(idx as u32);
                    } else {
                        self.flows[idx].listed = false;
                        self.flows[idx].tin = None;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(uid: u64, hash: u32, len: u32, at: Time) -> Packet {
        let mut p = Packet::synthetic(uid, uid as u32, len);
        p.hash = hash;
        p.enqueued_at = at;
        p
    }

    #[test]
    fn kernel_codel_sets_for_fast_and_slow_stations() {
        // 144 Mbit/s with 2 stations: 144000 kbit/s ≥ 6000 × 2 → the default set.
        let fast = station_codel_params(144_000, 2);
        assert_eq!(fast.target, Duration::from_ms(20));
        assert_eq!(fast.interval, Duration::from_ms(100));
        assert!(fast.ecn);
        // 6.5 Mbit/s with 2 stations: 6500 < 12000 → 50 ms / 300 ms, no ECN.
        let slow = station_codel_params(6_500, 2);
        assert_eq!(slow.target, Duration::from_ms(50));
        assert_eq!(slow.interval, Duration::from_ms(300));
        assert!(!slow.ecn);
    }

    #[test]
    fn a_flow_owned_by_another_station_sends_to_the_default_flow() {
        let mut fq = MacFq::new(2, 4096, 8192);
        let mut d = Drops::new();
        // Same hash for both stations: station 1's packet must not join station 0's flow.
        fq.enqueue(0, pkt(1, 7, 1000, Time::ZERO), &mut d);
        fq.enqueue(1, pkt(2, 7, 1000, Time::ZERO), &mut d);
        assert_eq!(fq.len(0), 1);
        assert_eq!(fq.len(1), 1);
        assert_eq!(fq.dequeue(1, Time::ZERO, &mut d).unwrap().uid, 2);
        assert_eq!(fq.dequeue(0, Time::ZERO, &mut d).unwrap().uid, 1);
        assert!(fq.dequeue(0, Time::ZERO, &mut d).is_none());
    }

    #[test]
    fn flows_alternate_by_the_300_byte_quantum() {
        let mut fq = MacFq::new(1, 4096, 8192);
        let mut d = Drops::new();
        // Two flows of 1000-byte packets (hashes in different flow slots).
        for i in 0..4 {
            fq.enqueue(0, pkt(i, 0, 1000, Time::ZERO), &mut d);
            fq.enqueue(0, pkt(100 + i, 0x8000_0000, 1000, Time::ZERO), &mut d);
        }
        let order: Vec<u64> = (0..8)
            .map(|_| fq.dequeue(0, Time::ZERO, &mut d).unwrap().uid)
            .collect();
        // Each flow's deficit (300) goes negative after one 1000-byte packet and needs
        // 300-byte refills to turn positive again, so the flows take turns.
        assert_eq!(order, vec![0, 100, 1, 101, 2, 102, 3, 103]);
    }

    #[test]
    fn overflow_drops_the_head_of_the_fattest_flow_of_any_station() {
        let mut fq = MacFq::new(2, 4096, 3);
        let mut d = Drops::new();
        fq.enqueue(0, pkt(1, 1 << 20, 1500, Time::ZERO), &mut d);
        fq.enqueue(0, pkt(2, 1 << 20, 1500, Time::ZERO), &mut d);
        fq.enqueue(1, pkt(3, 1 << 30, 100, Time::ZERO), &mut d);
        assert!(d.is_empty());
        fq.enqueue(1, pkt(4, 1 << 30, 100, Time::ZERO), &mut d);
        let dropped: Vec<u64> = d.drain().map(|x| x.pkt.uid).collect();
        assert_eq!(dropped, vec![1]);
        assert_eq!(fq.total_packets(), 3);
    }
}

#[cfg(test)]
mod size {
    /// sojourn-experiment budgets 128 B per flow-table entry (wifi::BYTES_PER_FQ_FLOW).
    #[test]
    fn a_flow_fits_the_memory_budget() {
        assert!(std::mem::size_of::<super::Flow>() <= 128);
    }
}
