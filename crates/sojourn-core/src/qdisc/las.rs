//! `las`: Least Attained Service (a.k.a. foreground-background, FB) — a reference
//! scheduler, not a Linux qdisc.
//!
//! Every flow (by `pkt.hash`) has an *attained service*: the bytes (`len_bytes`) this qdisc
//! has dequeued for it. Dequeue always serves the head packet of the backlogged flow with
//! the least attained service; flows with equal attained service are served round-robin
//! packet by packet (the served flow goes behind the others with its new count), which is
//! the packet-level version of processor sharing among ties (Kleinrock; Rai, Urvoy-Keller,
//! Biersack 2003). Within a flow the order is FIFO.
//!
//! A flow's attained service is forgotten (reset to 0) when it has been idle — no packet
//! queued here — for `idle_reset` (default 1 s; `"0"` = never, keep forever). On overflow
//! (`limit` packets, default 10240) the *newest* packet of the backlogged flow with the
//! MOST attained service is dropped: that flow is the one LAS would serve last, so dropping
//! from it disturbs the schedule least (it may be the arrival itself).
//!
//! Backlogged flows sit in the min-heap of [`FlowHeap`] (super::flow_heap, shared with
//! `srpt`) keyed by attained bytes.

use super::flow_heap::FlowHeap;
use super::vocab::{BuildCtx, Dequeue, Discipline, Drops, NotLinux, Qdisc, Verdict};
use crate::packet::Packet;
use crate::params::{ConfResult, Params};
use crate::time::{Duration, Time};

/// Default packet limit (as CAKE's `limit`; sojourn's choice, there is no Linux LAS).
pub const LAS_LIMIT_PACKETS: u64 = 10240;

/// What LAS remembers of a flow.
#[derive(Debug, Default)]
struct Attained {
    /// Bytes dequeued for this flow since it (re)started.
    bytes: u64,
    /// Last enqueue or dequeue of this flow.
    last_active: Time,
}

pub struct Las {
    /// Flows keyed by attained bytes; idle flows are kept (their attained service counts).
    flows: FlowHeap<Attained>,
    /// Idle time after which attained service is forgotten; zero = never.
    idle_reset: Duration,
    /// Sweep idle flows out of the table when it reaches this many entries.
    gc_mark: usize,
}

impl Las {
    pub fn new(limit: usize, idle_reset: Duration) -> Las {
        Las {
            flows: FlowHeap::new(limit, false),
            idle_reset,
            gc_mark: 1024,
        }
    }

    /// Attained service (bytes) of the flow with hash `hash`, if known.
    pub fn attained_bytes(&self, hash: u32) -> Option<u64> {
        self.flows
            .lookup(hash)
            .map(|i| self.flows.flow(i).state.bytes)
    }

    /// Flows with state (backlogged or remembered).
    pub fn flow_count(&self) -> usize {
        self.flows.known_flows()
    }

    #[inline]
    fn idle_expired(idle_reset: Duration, a: &Attained, now: Time) -> bool {
        !idle_reset.is_zero() && now.saturating_since(a.last_active) >= idle_reset
    }

    /// Forgets idle flows whose attained service has expired (amortised: runs when the
    /// table has doubled since the last sweep). With `idle_reset = 0` state is kept forever.
    fn sweep(&mut self, now: Time) {
        if self.idle_reset.is_zero() || self.flows.known_flows() < self.gc_mark {
            return;
        }
        let idle_reset = self.idle_reset;
        self.flows
            .forget(|f| Las::idle_expired(idle_reset, &f.state, now));
        self.gc_mark = (2 * self.flows.known_flows()).max(1024);
    }

    fn flow_index(&mut self, hash: u32, now: Time) -> u32 {
        if let Some(i) = self.flows.lookup(hash) {
            return i;
        }
        self.sweep(now);
        let i = self.flows.insert(hash);
        self.flows.flow_mut(i).state.last_active = now;
        i
    }
}

impl Qdisc for Las {
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        let idx = self.flow_index(pkt.hash, now);
        let f = self.flows.flow_mut(idx);
        if f.queue.is_empty() && Las::idle_expired(self.idle_reset, &f.state, now) {
            f.state.bytes = 0;
        }
        f.state.last_active = now;
        let uid = pkt.uid;
        if self.flows.push(idx, pkt) {
            let key = self.flows.flow(idx).state.bytes;
            self.flows.schedule(idx, key);
        }
        // Overflow: drop the newest packet of the flow LAS would serve last.
        self.flows.enforce_limit(idx, uid, drops)
    }

    fn dequeue(&mut self, now: Time, _drops: &mut Drops) -> Dequeue {
        self.flows.dequeue_min(|f, p| {
            f.state.bytes += p.len_bytes as u64;
            f.state.last_active = now;
            f.state.bytes
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
        emit("flows", self.flows.known_flows() as f64);
        emit("backlogged_flows", self.flows.backlogged_flows() as f64);
    }
}

/// `las [limit PACKETS] [idle_reset TIME]` (see docs/disciplines/las.md).
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Las> {
    Ok(*LasSpec::parse(p, ctx)?.build(ctx))
}

/// Typed spec of `las`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LasSpec {
    /// `limit`, packets.
    pub limit: u64,
    /// A flow idle this long starts again from zero attained service.
    pub idle_reset: Duration,
}

impl Discipline for LasSpec {
    const KIND: &'static str = "las";
    const SUMMARY: &'static str =
        "LAS / foreground-background: least attained service first (reference)";
    type Qdisc = Box<Las>;

    /// `limit`, `idle_reset`.
    fn parse(p: &mut Params, _ctx: &BuildCtx) -> ConfResult<Self> {
        let limit = p.u64("limit", LAS_LIMIT_PACKETS, 1, u32::MAX as u64)?;
        let idle_reset = p.duration("idle_reset", Duration::from_secs(1))?;
        Ok(LasSpec { limit, idle_reset })
    }

    fn build(&self, _ctx: &BuildCtx) -> Box<Las> {
        Box::new(Las::new(self.limit as usize, self.idle_reset))
    }

    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        Err(not_linux())
    }
}

/// Why `las` has no tc line.
pub fn not_linux() -> NotLinux {
    NotLinux::new(
        "las",
        "LAS (least attained service first) has no Linux qdisc; run it with `sojourn emulate`",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::testkit::{check_conservation, pkt, Bound};

    fn drain(q: &mut Las, now: Time) -> Vec<Packet> {
        let mut d = Drops::new();
        let mut bound = Bound::new(1_000_000, "drain");
        std::iter::from_fn(|| {
            bound.tick();
            q.dequeue(now, &mut d).packet()
        })
        .collect()
    }

    /// Among flows with equal attained service LAS is round-robin in the order they were
    /// (re)queued: B, requeued at 1000 B before idle A's new packet, goes first although
    /// A is the older flow. `observe` and `flow_count` count remembered and backlogged flows.
    #[test]
    fn ties_are_served_in_queueing_order_and_observed() {
        let mut q = Las::new(1000, Duration::from_secs(1));
        let mut d = Drops::new();
        q.enqueue(pkt(0, 1, 1000), Time(0), &mut d); // A
        assert_eq!(q.dequeue(Time(1), &mut d).packet().unwrap().uid, 0); // A: 1000 B, idle
        q.enqueue(pkt(1, 2, 1000), Time(2), &mut d); // B
        q.enqueue(pkt(2, 2, 1000), Time(2), &mut d);
        assert_eq!(q.dequeue(Time(3), &mut d).packet().unwrap().uid, 1); // B: 1000 B
        q.enqueue(pkt(3, 1, 1000), Time(4), &mut d); // A again, at 1000 B
        assert_eq!(q.flow_count(), 2);
        let mut seen = vec![];
        q.observe(Time(4), &mut |k, x| seen.push((k.to_string(), x)));
        assert_eq!(
            seen,
            vec![
                ("flows".to_string(), 2.0),
                ("backlogged_flows".to_string(), 2.0)
            ]
        );
        let order: Vec<u64> = drain(&mut q, Time(5)).iter().map(|p| p.uid).collect();
        assert_eq!(order, vec![2, 3], "B was requeued first");
    }

    /// The `flows` series (remembered flows) follows the sweep rule of
    /// docs/disciplines/las.md: idle state is forgotten only when a *new* flow arrives and
    /// the table holds at least max(1024, 2 × what the previous sweep left) flows. The
    /// counts are worked out by hand from that rule.
    #[test]
    fn idle_flows_are_swept_only_when_the_table_doubles() {
        fn flows(q: &mut Las, now: Time) -> f64 {
            let mut n = None;
            q.observe(now, &mut |k, x| {
                if k == "flows" {
                    n = Some(x)
                }
            });
            n.unwrap()
        }
        const S: u64 = 1_000_000_000;
        let mut d = Drops::new();
        // Two flows, the first idle for 2 s (past idle_reset): far below 1024, no sweep.
        let mut q = Las::new(10_000, Duration::from_secs(1));
        q.enqueue(pkt(0, 1, 1000), Time(0), &mut d);
        assert_eq!(drain(&mut q, Time(0)).len(), 1);
        q.enqueue(pkt(1, 2, 1000), Time(2 * S), &mut d);
        assert_eq!(flows(&mut q, Time(2 * S)), 2.0, "no sweep below 1024 flows");

        // 1024 flows served at t = 0 and idle. The 1025th flow (t = 0.5 s) triggers a sweep
        // that finds nothing expired: 1024 remain, the next sweep is due at 2048.
        let mut q = Las::new(10_000, Duration::from_secs(1));
        for f in 1..=1024u32 {
            q.enqueue(pkt(f as u64, f, 1000), Time(0), &mut d);
        }
        assert_eq!(drain(&mut q, Time(0)).len(), 1024);
        // Flows 1025 and 1026 stay backlogged (a sweep never forgets them).
        q.enqueue(pkt(1025, 1025, 1000), Time(S / 2), &mut d);
        q.enqueue(pkt(1026, 1026, 1000), Time(S / 2), &mut d);
        assert_eq!(flows(&mut q, Time(S / 2)), 1026.0);
        // At 2 s the first 1024 have expired, but the table (1026) is below 2048: kept.
        q.enqueue(pkt(1027, 1027, 1000), Time(2 * S), &mut d);
        assert_eq!(
            flows(&mut q, Time(2 * S)),
            1027.0,
            "next sweep only at 2048"
        );
        for f in 1028..=2048u32 {
            q.enqueue(pkt(f as u64, f, 1000), Time(2 * S), &mut d);
        }
        assert_eq!(flows(&mut q, Time(2 * S)), 2048.0);
        // The 2049th flow sweeps the 1024 expired idle flows: 1024 backlogged + itself.
        q.enqueue(pkt(2049, 2049, 1000), Time(2 * S), &mut d);
        assert_eq!(flows(&mut q, Time(2 * S)), 1025.0);
        assert_eq!(q.len_packets(), 1025);
    }

    #[test]
    fn new_flow_preempts_an_old_large_one() {
        let mut q = Las::new(1000, Duration::from_secs(1));
        let mut d = Drops::new();
        let old = pkt(0, 1, 1500).hash;
        for i in 0..50 {
            q.enqueue(pkt(i, 1, 1500), Time(0), &mut d);
        }
        for _ in 0..20 {
            assert_eq!(
                q.dequeue(Time(1), &mut d).packet().unwrap().conversation(),
                1
            );
        }
        assert_eq!(q.attained_bytes(old), Some(20 * 1500));
        // A new flow's 10 packets all leave before the old flow's next one: its attained
        // service stays below 30 kB until it has sent 20 packets.
        for i in 0..10 {
            q.enqueue(pkt(100 + i, 2, 1500), Time(2), &mut d);
        }
        let next: Vec<u32> = (0..12)
            .map(|_| q.dequeue(Time(3), &mut d).packet().unwrap().conversation())
            .collect();
        assert_eq!(&next[..10], &[2; 10]);
        assert_eq!(&next[10..], &[1, 1]);
    }

    #[test]
    fn equal_attained_flows_share_round_robin() {
        let mut q = Las::new(1000, Duration::ZERO);
        let mut d = Drops::new();
        for i in 0..30 {
            q.enqueue(pkt(i, (i % 3) as u32, 1000), Time(0), &mut d);
        }
        let order: Vec<u32> = drain(&mut q, Time(1))
            .iter()
            .map(|p| p.conversation())
            .collect();
        let expect: Vec<u32> = (0..30).map(|i| i % 3).collect();
        assert_eq!(order, expect, "packet-by-packet round robin among ties");
        // With unequal sizes LAS equalises bytes, not packets: a 500-B flow gets two
        // packets per 1000-B packet of the other.
        let mut q = Las::new(1000, Duration::ZERO);
        for i in 0..20 {
            q.enqueue(pkt(i, 1, 1000), Time(0), &mut d);
            q.enqueue(pkt(100 + i, 2, 500), Time(0), &mut d);
            q.enqueue(pkt(200 + i, 2, 500), Time(0), &mut d);
        }
        let out = drain(&mut q, Time(1));
        let (mut a, mut b) = (0i64, 0i64);
        for p in &out[..40] {
            if p.conversation() == 1 {
                a += 1000
            } else {
                b += 500
            }
            assert!(
                (a - b).abs() <= 1000,
                "attained service stays within one packet"
            );
        }
    }

    #[test]
    fn idle_reset_forgets_attained_service() {
        let mut q = Las::new(1000, Duration::from_secs(1));
        let mut d = Drops::new();
        let h = pkt(0, 1, 1500).hash;
        q.enqueue(pkt(0, 1, 1500), Time(0), &mut d);
        q.dequeue(Time(0), &mut d);
        q.enqueue(pkt(1, 1, 1500), Time(999_999_999), &mut d);
        assert_eq!(
            q.attained_bytes(h),
            Some(1500),
            "idle < 1 s keeps the count"
        );
        q.dequeue(Time(999_999_999), &mut d);
        q.enqueue(pkt(2, 1, 1500), Time(2_000_000_000), &mut d);
        assert_eq!(q.attained_bytes(h), Some(0), "idle >= 1 s resets it");
    }

    #[test]
    fn overflow_drops_from_the_most_attained_flow() {
        let mut q = Las::new(10, Duration::ZERO);
        let mut d = Drops::new();
        for i in 0..6 {
            q.enqueue(pkt(i, 1, 1500), Time(0), &mut d);
        }
        q.dequeue(Time(0), &mut d); // flow 1 attained 1500
        for i in 0..5 {
            q.enqueue(pkt(10 + i, 2, 1500), Time(0), &mut d);
        }
        assert_eq!(q.len_packets(), 10);
        // Flow 2 (attained 0) overflows: flow 1's newest packet goes.
        assert_eq!(
            q.enqueue(pkt(20, 2, 1500), Time(0), &mut d),
            Verdict::Queued
        );
        let dropped: Vec<u64> = d.drain().map(|x| x.pkt.uid).collect();
        assert_eq!(dropped, vec![5]);
        // Flow 1 (the most attained) arriving at a full queue loses its own arrival.
        assert_eq!(
            q.enqueue(pkt(21, 1, 1500), Time(0), &mut d),
            Verdict::Dropped
        );
    }

    /// Mean completion time of jobs (flows) all present at t = 0, served at 1 byte/ns.
    fn batch_completions(q: &mut Las, sizes_pkts: &[u32], len: u32) -> Vec<f64> {
        let mut d = Drops::new();
        let mut uid = 0;
        for (f, &n) in sizes_pkts.iter().enumerate() {
            for _ in 0..n {
                q.enqueue(pkt(uid, f as u32, len), Time(0), &mut d);
                uid += 1;
            }
        }
        let mut done = vec![0.0; sizes_pkts.len()];
        let mut t = 0u64;
        let mut bound = Bound::new(100_000, "drain");
        while let Some(p) = q.dequeue(Time(t), &mut d).packet() {
            bound.tick();
            t += p.len_bytes as u64;
            done[p.conversation() as usize] = t as f64;
        }
        done
    }

    #[test]
    fn batch_of_equal_jobs_matches_processor_sharing() {
        // n equal jobs of s bytes under PS all finish near n·s; packet-level PS (LAS with
        // all ties) finishes job k at (n·(s/L − 1) + k)·L: the last round is sequential.
        let (n, pkts, len) = (5usize, 40u32, 1000u32);
        let done = batch_completions(&mut Las::new(10_000, Duration::ZERO), &vec![pkts; n], len);
        for (k, &c) in done.iter().enumerate() {
            let expect = ((n as u64 * (pkts as u64 - 1) + k as u64 + 1) * len as u64) as f64;
            assert_eq!(c, expect, "job {k}");
        }
        // Unequal sizes: LAS = SRPT-like for a batch — sizes s1 < s2 < s3 finish at
        // n·s1, s1 + (n−1)·s2 ... (PS with the smallest job leaving first):
        // c1 = 3·s1, c2 = c1 + 2·(s2 − s1), c3 = c2 + (s3 − s2), up to the last-round
        // packet granularity.
        let sizes = [10u32, 20, 40];
        let done = batch_completions(&mut Las::new(10_000, Duration::ZERO), &sizes, len);
        let l = len as f64;
        let c1 = 3.0 * 10.0 * l;
        let c2 = c1 + 2.0 * 10.0 * l;
        let c3 = c2 + 20.0 * l;
        for (c, e) in done.iter().zip([c1, c2, c3]) {
            assert!((c - e).abs() <= 2.0 * l, "{c} vs {e}");
        }
    }

    #[test]
    fn registry_builds_with_defaults_and_rejects_bad_values() {
        use crate::params::Value;
        use crate::qdisc::{build, AnyQdisc};
        let ctx = BuildCtx::default();
        match build(&Value::Str("las".into()), "q", &ctx).unwrap() {
            AnyQdisc::Las(q) => assert_eq!(q.flows.limit() as u64, LAS_LIMIT_PACKETS),
            _ => panic!(),
        }
        assert_eq!(
            crate::qdisc::testkit::rejected_path("las", "limit", Value::Int(0)),
            "q.limit"
        );
    }

    #[test]
    fn conservation_property() {
        for seed in 0..20 {
            let mut q = Las::new(37, Duration::from_ms(3));
            check_conservation(&mut q, seed, 5_000, |q| q.len_packets() <= 37);
            let mut q = Las::new(500, Duration::ZERO);
            check_conservation(&mut q, seed + 100, 3_000, |q| q.len_packets() <= 500);
        }
    }

    #[test]
    fn idle_flows_are_swept_from_the_table() {
        let mut q = Las::new(100, Duration::from_ms(1));
        let mut d = Drops::new();
        for i in 0..5000u64 {
            let now = Time(i * 1_000_000);
            q.enqueue(pkt(i, i as u32, 100), now, &mut d);
            q.dequeue(now, &mut d);
        }
        assert!(q.flow_count() <= 2048, "{}", q.flow_count());
    }
}
