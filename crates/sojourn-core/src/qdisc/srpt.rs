//! `srpt`: Shortest Remaining Processing Time, an oracle reference scheduler (not Linux).
//!
//! The sender of a sized transfer stamps every packet with `pkt.remaining_bytes`: the
//! flow's payload bytes still unsent after this packet. The flow's remaining work as this
//! queue sees it is its head packet's `remaining_bytes + hdr.payload_bytes` (everything from
//! the head on). Dequeue serves the head packet of the backlogged flow (by `pkt.hash`) with
//! the least remaining work — preemptive SRPT at packet granularity (Schrage 1968; pFabric
//! uses the same rule). Ties go to the flow that became backlogged (or was served) first;
//! FIFO within a flow.
//!
//! A packet with neither `remaining_bytes` nor payload (0 + 0: pure ACKs, SYNs, senders
//! that do not know their size) has unknown remaining work, ranked by `unknown`:
//! `"largest"` (default: behind every known flow) or `"smallest"` (ahead, as pFabric
//! treats control packets).
//!
//! On overflow (`limit` packets, default 10240) the newest packet of the backlogged flow
//! with the MOST remaining work is dropped (possibly the arrival). Backlogged flows sit in
//! a binary min-heap keyed by (remaining, sequence); a flow's key only changes when it is
//! served, so a dequeue is one pop and at most one push; entries orphaned by overflow drops
//! are skipped lazily.

use super::spec::NotLinux;
use super::{BuildCtx, Dequeue, DropReason, Drops, Qdisc, Verdict};
use crate::packet::Packet;
use crate::params::{ConfResult, Params};
use crate::time::Time;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// Default packet limit (sojourn's choice, as CAKE's `limit`).
pub const SRPT_LIMIT_PACKETS: u64 = 10240;

#[derive(Debug, Default)]
struct Flow {
    hash: u32,
    queue: VecDeque<Packet>,
    /// Sequence of the flow's valid heap entry (others are stale).
    seq: u64,
}

/// Heap entry: (remaining work, sequence, flow index), smallest first.
type Entry = Reverse<(u64, u64, u32)>;

pub struct Srpt {
    flows: Vec<Flow>,
    free: Vec<u32>,
    /// Backlogged flows only (a flow's slot is released when it empties).
    by_hash: HashMap<u32, u32>,
    heap: BinaryHeap<Entry>,
    next_seq: u64,
    limit: usize,
    /// Key given to packets of unknown remaining work (u64::MAX or 0).
    unknown_key: u64,
    qlen: usize,
    backlog_bytes: u64,
}

impl Srpt {
    pub fn new(limit: usize, unknown_largest: bool) -> Srpt {
        assert!(limit >= 1);
        Srpt {
            flows: Vec::new(),
            free: Vec::new(),
            by_hash: HashMap::new(),
            heap: BinaryHeap::new(),
            next_seq: 0,
            limit,
            unknown_key: if unknown_largest { u64::MAX } else { 0 },
            qlen: 0,
            backlog_bytes: 0,
        }
    }

    /// The flow's remaining work if `p` is its head: bytes from `p` on.
    #[inline]
    fn remaining_key(&self, p: &Packet) -> u64 {
        let r = p.remaining_bytes + p.hdr.payload_bytes as u64;
        if r == 0 {
            self.unknown_key
        } else {
            r
        }
    }

    #[inline]
    fn push_flow(&mut self, idx: u32) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let key = self.remaining_key(self.flows[idx as usize].queue.front().expect("backlogged"));
        self.flows[idx as usize].seq = seq;
        self.heap.push(Reverse((key, seq, idx)));
    }

    #[inline]
    fn entry_valid(&self, e: &Entry) -> bool {
        let f = &self.flows[e.0 .2 as usize];
        f.seq == e.0 .1 && !f.queue.is_empty()
    }

    /// Releases an emptied flow's slot.
    fn release(&mut self, idx: u32) {
        let f = &mut self.flows[idx as usize];
        f.seq = u64::MAX;
        let h = f.hash;
        self.by_hash.remove(&h);
        self.free.push(idx);
    }

    /// The backlogged flow with the most remaining work (ties: the latest). Scans the heap,
    /// only on overflow.
    fn most_remaining(&self) -> Option<u32> {
        self.heap
            .iter()
            .filter(|e| self.entry_valid(e))
            .max_by_key(|e| (e.0 .0, e.0 .1))
            .map(|e| e.0 .2)
    }
}

impl Qdisc for Srpt {
    fn enqueue(&mut self, pkt: Packet, _now: Time, drops: &mut Drops) -> Verdict {
        let idx = match self.by_hash.get(&pkt.hash) {
            Some(&i) => i,
            None => {
                let i = match self.free.pop() {
                    Some(i) => i,
                    None => {
                        self.flows.push(Flow::default());
                        (self.flows.len() - 1) as u32
                    }
                };
                self.flows[i as usize].hash = pkt.hash;
                self.by_hash.insert(pkt.hash, i);
                i
            }
        };
        let uid = pkt.uid;
        let f = &mut self.flows[idx as usize];
        let was_idle = f.queue.is_empty();
        f.queue.push_back(pkt);
        self.qlen += 1;
        self.backlog_bytes += pkt.len_bytes as u64;
        if was_idle {
            self.push_flow(idx);
        }
        if self.qlen <= self.limit {
            return Verdict::Queued;
        }
        // Overflow: drop the newest packet of the flow SRPT would serve last.
        let victim = self.most_remaining().expect("a backlogged flow exists");
        let f = &mut self.flows[victim as usize];
        let p = f.queue.pop_back().expect("valid entries are backlogged");
        let emptied = f.queue.is_empty();
        self.qlen -= 1;
        self.backlog_bytes -= p.len_bytes as u64;
        if emptied {
            self.release(victim);
        }
        let dropped_arrival = p.uid == uid;
        drops.push(p, DropReason::Overlimit);
        if dropped_arrival {
            Verdict::Dropped
        } else if victim == idx {
            Verdict::QueuedCongested
        } else {
            Verdict::Queued
        }
    }

    fn dequeue(&mut self, _now: Time, _drops: &mut Drops) -> Dequeue {
        while let Some(e) = self.heap.pop() {
            if !self.entry_valid(&e) {
                continue; // emptied by an overflow drop
            }
            let idx = e.0 .2;
            let f = &mut self.flows[idx as usize];
            let p = f.queue.pop_front().expect("valid entries are backlogged");
            let more = !f.queue.is_empty();
            self.qlen -= 1;
            self.backlog_bytes -= p.len_bytes as u64;
            if more {
                // The new head carries the flow's updated remaining work.
                self.push_flow(idx);
            } else {
                self.release(idx);
            }
            return Dequeue::Packet(p);
        }
        Dequeue::Empty
    }

    fn len_packets(&self) -> usize {
        self.qlen
    }
    fn len_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    fn ecn_marks(&self) -> u64 {
        0
    }
    fn observe(&mut self, _now: Time, emit: &mut dyn FnMut(&str, f64)) {
        emit("backlogged_flows", self.by_hash.len() as f64);
    }
}

/// `srpt [limit PACKETS] [unknown largest|smallest]` (see docs/disciplines/srpt.md).
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Srpt> {
    Ok(SrptSpec::parse(p, ctx)?.build())
}

/// Typed spec of `srpt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrptSpec {
    /// `limit`, packets.
    pub limit: u64,
    /// Packets without a known remaining size rank as the largest (`unknown = "largest"`).
    pub unknown_largest: bool,
}

impl SrptSpec {
    /// `limit`, `unknown = "largest" | "smallest"`.
    pub fn parse(p: &mut Params, _ctx: &BuildCtx) -> ConfResult<SrptSpec> {
        let limit = p.u64("limit", SRPT_LIMIT_PACKETS, 1, u32::MAX as u64)?;
        let unknown = p.choice("unknown", &["largest", "smallest"], "largest")?;
        Ok(SrptSpec {
            limit,
            unknown_largest: unknown == "largest",
        })
    }

    pub fn build(&self) -> Srpt {
        Srpt::new(self.limit as usize, self.unknown_largest)
    }
}

/// Why `srpt` has no tc line.
pub fn not_linux() -> NotLinux {
    NotLinux::new(
        "srpt",
        "SRPT needs every flow's remaining bytes, an oracle no Linux qdisc has; \
         run it with `sojourn emulate`",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::testkit::{check_conservation_with, pkt};

    /// A packet of flow `flow` with `remaining` bytes still unsent after it.
    fn rp(uid: u64, flow: u32, len: u32, remaining: u64) -> Packet {
        let mut p = pkt(uid, flow, len);
        p.hdr.payload_bytes = len - 54;
        p.remaining_bytes = remaining;
        p
    }

    /// Enqueues whole jobs of `pkts[i]` packets of `len` bytes at t = 0, serves them at
    /// 1 byte/ns and returns each job's completion time.
    fn batch(q: &mut Srpt, pkts: &[u64], len: u32) -> Vec<u64> {
        let mut d = Drops::new();
        let pay = (len - 54) as u64;
        let mut uid = 0;
        // Interleave the jobs' packets so arrival order gives no hint.
        let max = *pkts.iter().max().unwrap();
        for k in 0..max {
            for (f, &n) in pkts.iter().enumerate() {
                if k < n {
                    q.enqueue(rp(uid, f as u32, len, (n - k - 1) * pay), Time(0), &mut d);
                    uid += 1;
                }
            }
        }
        let mut done = vec![0; pkts.len()];
        let mut t = 0;
        while let Some(p) = q.dequeue(Time(t), &mut d).packet() {
            t += p.len_bytes as u64;
            done[p.conversation() as usize] = t;
        }
        assert!(d.is_empty());
        done
    }

    #[test]
    fn fewer_remaining_bytes_always_first() {
        let mut q = Srpt::new(1000, true);
        let mut d = Drops::new();
        // Flow 1 has 1 MB left, flow 2 has 10 kB, flow 3 is unknown (0 + no payload).
        q.enqueue(rp(0, 1, 1500, 1_000_000), Time(0), &mut d);
        q.enqueue(pkt(1, 3, 100), Time(0), &mut d);
        q.enqueue(rp(2, 2, 1500, 10_000), Time(0), &mut d);
        q.enqueue(rp(3, 1, 1500, 998_554), Time(0), &mut d);
        let order: Vec<u64> = (0..4)
            .map(|_| q.dequeue(Time(0), &mut d).packet().unwrap().uid)
            .collect();
        assert_eq!(
            order,
            vec![2, 0, 3, 1],
            "10 kB < 1 MB < unknown; FIFO in a flow"
        );
        // unknown = "smallest" puts control packets ahead.
        let mut q = Srpt::new(1000, false);
        q.enqueue(rp(0, 2, 1500, 10), Time(0), &mut d);
        q.enqueue(pkt(1, 3, 66), Time(0), &mut d);
        assert_eq!(q.dequeue(Time(0), &mut d).packet().unwrap().uid, 1);
        // The last packet of a flow (remaining 0) still counts its own payload: small.
        let mut q = Srpt::new(1000, true);
        q.enqueue(rp(0, 1, 1500, 5000), Time(0), &mut d);
        q.enqueue(rp(1, 2, 1500, 0), Time(0), &mut d);
        assert_eq!(q.dequeue(Time(0), &mut d).packet().unwrap().uid, 1);
    }

    #[test]
    fn batch_completion_times_are_prefix_sums() {
        // Single server, all jobs present at t = 0, sizes s1 <= ... <= sn: SRPT serves them
        // one after another, so job k completes at s1 + ... + sk and the mean response time
        // is sum_k (n − k + 1)·s_k / n (the optimum for a batch).
        let pkts = [7u64, 3, 12, 1, 5];
        let len = 1000u32;
        let done = batch(&mut Srpt::new(10_000, true), &pkts, len);
        let mut sorted: Vec<(u64, usize)> = pkts.iter().copied().zip(0..).collect();
        sorted.sort();
        let mut acc = 0;
        for (n, f) in sorted {
            acc += n * len as u64;
            assert_eq!(done[f], acc, "job {f} of {n} packets");
        }
        let mean = done.iter().sum::<u64>() as f64 / pkts.len() as f64;
        let mut s: Vec<u64> = pkts.iter().map(|&n| n * len as u64).collect();
        s.sort();
        let analytic: u64 = s
            .iter()
            .enumerate()
            .map(|(k, &x)| (s.len() - k) as u64 * x)
            .sum();
        assert_eq!(mean, analytic as f64 / s.len() as f64);
    }

    #[test]
    fn a_shorter_arrival_preempts_a_running_job() {
        let mut q = Srpt::new(1000, true);
        let mut d = Drops::new();
        for k in 0..20u64 {
            q.enqueue(rp(k, 1, 1500, (19 - k) * 1446), Time(0), &mut d);
        }
        for _ in 0..5 {
            assert_eq!(
                q.dequeue(Time(0), &mut d).packet().unwrap().conversation(),
                1
            );
        }
        // Flow 1 has 15 packets (21.7 kB) left; a 3-packet job arrives and goes first.
        for k in 0..3u64 {
            q.enqueue(rp(100 + k, 2, 1500, (2 - k) * 1446), Time(1), &mut d);
        }
        let next: Vec<u32> = (0..4)
            .map(|_| q.dequeue(Time(2), &mut d).packet().unwrap().conversation())
            .collect();
        assert_eq!(next, vec![2, 2, 2, 1]);
    }

    #[test]
    fn overflow_drops_from_the_most_remaining_flow() {
        let mut q = Srpt::new(4, true);
        let mut d = Drops::new();
        q.enqueue(rp(0, 1, 1500, 100_000), Time(0), &mut d);
        q.enqueue(rp(1, 1, 1500, 98_554), Time(0), &mut d);
        q.enqueue(rp(2, 2, 1500, 5_000), Time(0), &mut d);
        q.enqueue(rp(3, 2, 1500, 3_554), Time(0), &mut d);
        assert_eq!(
            q.enqueue(rp(4, 2, 1500, 2_108), Time(0), &mut d),
            Verdict::Queued
        );
        assert_eq!(d.drain().map(|x| x.pkt.uid).collect::<Vec<_>>(), vec![1]);
        assert_eq!(
            q.enqueue(rp(5, 3, 1500, 1_000_000), Time(0), &mut d),
            Verdict::Dropped
        );
        assert_eq!(d.drain().map(|x| x.pkt.uid).collect::<Vec<_>>(), vec![5]);
    }

    #[test]
    fn registry_builds_with_defaults_and_rejects_bad_values() {
        use crate::params::Value;
        use crate::qdisc::{build, AnyQdisc};
        let ctx = BuildCtx::default();
        match build(&Value::Str("srpt".into()), "q", &ctx).unwrap() {
            AnyQdisc::Srpt(q) => assert_eq!(q.limit as u64, SRPT_LIMIT_PACKETS),
            _ => panic!(),
        }
        assert_eq!(
            crate::qdisc::testkit::rejected_path("srpt", "limit", Value::Int(0)),
            "q.limit"
        );
    }

    #[test]
    fn conservation_property() {
        for seed in 0..20 {
            let mut q = Srpt::new(29, seed % 2 == 0);
            // Pseudo-random remaining sizes for the arrivals, some unknown (0).
            let mut lcg: u64 = seed;
            let stamp = |p: &mut Packet, _now: Time| {
                lcg = lcg
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                p.remaining_bytes = if lcg >> 60 == 0 {
                    0
                } else {
                    (lcg >> 40) % 1_000_000
                };
            };
            check_conservation_with(&mut q, seed, 5_000, |q| q.len_packets() <= 29, stamp);
        }
    }
}
