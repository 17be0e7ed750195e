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
//! the min-heap of [`FlowHeap`] (super::flow_heap, shared with `las`) keyed by remaining
//! work; a flow's key only changes when it is served.

use super::flow_heap::FlowHeap;
use super::vocab::{BuildCtx, Dequeue, Discipline, Drops, NotLinux, Qdisc, Verdict};
use crate::packet::Packet;
use crate::params::{ConfResult, Params};
use crate::time::Time;

/// Default packet limit (sojourn's choice, as CAKE's `limit`).
pub const SRPT_LIMIT_PACKETS: u64 = 10240;

pub struct Srpt {
    /// Flows keyed by remaining work; a flow's slot is released when it empties.
    flows: FlowHeap<()>,
    /// Key given to packets of unknown remaining work (u64::MAX or 0).
    unknown_key: u64,
}

impl Srpt {
    pub fn new(limit: usize, unknown_largest: bool) -> Srpt {
        Srpt {
            flows: FlowHeap::new(limit, true),
            unknown_key: if unknown_largest { u64::MAX } else { 0 },
        }
    }

    /// A flow's remaining work with `p` at its head: bytes from `p` on.
    #[inline(always)]
    fn remaining_key(unknown_key: u64, p: &Packet) -> u64 {
        let r = p.remaining_bytes + p.hdr.payload_bytes as u64;
        if r == 0 {
            unknown_key
        } else {
            r
        }
    }
}

impl Qdisc for Srpt {
    fn enqueue(&mut self, pkt: Packet, _now: Time, drops: &mut Drops) -> Verdict {
        let idx = match self.flows.lookup(pkt.hash) {
            Some(i) => i,
            None => self.flows.insert(pkt.hash),
        };
        let uid = pkt.uid;
        let key = Srpt::remaining_key(self.unknown_key, &pkt);
        if self.flows.push(idx, pkt) {
            self.flows.schedule(idx, key);
        }
        // Overflow: drop the newest packet of the flow SRPT would serve last.
        self.flows.enforce_limit(idx, uid, drops)
    }

    fn dequeue(&mut self, _now: Time, _drops: &mut Drops) -> Dequeue {
        // The new head carries the flow's updated remaining work.
        let unknown = self.unknown_key;
        self.flows.dequeue_min(|f, _| {
            f.queue
                .front()
                .map_or(unknown, |h| Srpt::remaining_key(unknown, h))
        })
    }

    fn len_packets(&self) -> usize {
        self.flows.len_packets()
    }
    fn len_bytes(&self) -> u64 {
        self.flows.len_bytes()
    }
    fn ecn_marks(&self) -> u64 {
        0
    }
    fn observe(&mut self, _now: Time, emit: &mut dyn FnMut(&str, f64)) {
        emit("backlogged_flows", self.flows.known_flows() as f64);
    }
}

/// `srpt [limit PACKETS] [unknown largest|smallest]` (see docs/disciplines/srpt.md).
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Srpt> {
    Ok(*SrptSpec::parse(p, ctx)?.build(ctx))
}

/// Typed spec of `srpt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrptSpec {
    /// `limit`, packets.
    pub limit: u64,
    /// Packets without a known remaining size rank as the largest (`unknown = "largest"`).
    pub unknown_largest: bool,
}

impl Discipline for SrptSpec {
    const KIND: &'static str = "srpt";
    const SUMMARY: &'static str =
        "SRPT oracle: least remaining flow bytes first (reference, pkt.remaining_bytes)";
    type Qdisc = Box<Srpt>;

    /// `limit`, `unknown = "largest" | "smallest"`.
    fn parse(p: &mut Params, _ctx: &BuildCtx) -> ConfResult<Self> {
        let limit = p.u64("limit", SRPT_LIMIT_PACKETS, 1, u32::MAX as u64)?;
        let unknown = p.choice("unknown", &["largest", "smallest"], "largest")?;
        Ok(SrptSpec {
            limit,
            unknown_largest: unknown == "largest",
        })
    }

    fn build(&self, _ctx: &BuildCtx) -> Box<Srpt> {
        Box::new(Srpt::new(self.limit as usize, self.unknown_largest))
    }

    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        Err(not_linux())
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
    use crate::qdisc::testkit::{check_conservation_with, pkt, Bound};

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
        let mut bound = Bound::new(100_000, "drain");
        while let Some(p) = q.dequeue(Time(t), &mut d).packet() {
            bound.tick();
            t += p.len_bytes as u64;
            done[p.conversation() as usize] = t;
        }
        assert!(d.is_empty());
        assert_eq!(q.ecn_marks(), 0, "a scheduler without AQM marks nothing");
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
            AnyQdisc::Srpt(q) => assert_eq!(q.flows.limit() as u64, SRPT_LIMIT_PACKETS),
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
