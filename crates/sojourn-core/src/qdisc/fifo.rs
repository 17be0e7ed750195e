//! FIFOs: `pfifo` (packet limit), `bfifo` (byte limit), `pfifo_head_drop`.
//!
//! Linux `sch_fifo.c` semantics: pfifo tail-drops when `qlen >= limit` (default
//! `tx_queue_len` = 1000); bfifo drops when `backlog + len > limit` (default
//! `tx_queue_len · psched_mtu` bytes); pfifo_head_drop, when full, drops the head and
//! accepts the arrival.

use super::vocab::{
    tc_size, BuildCtx, Dequeue, Discipline, DropReason, Drops, NotLinux, Qdisc, TcKey, Verdict,
};
use crate::packet::Packet;
use crate::params::{ConfResult, Params};
use crate::time::Time;
use std::collections::VecDeque;

/// Which limit and which end to drop from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Packets,
    Bytes,
    HeadDrop,
}

#[derive(Debug)]
pub struct Fifo {
    queue: VecDeque<Packet>,
    backlog_bytes: u64,
    limit: u64,
    mode: Mode,
}

impl Fifo {
    fn new(mode: Mode, limit: u64) -> Fifo {
        Fifo {
            queue: VecDeque::new(),
            backlog_bytes: 0,
            limit,
            mode,
        }
    }

    #[inline]
    fn push(&mut self, pkt: Packet) {
        self.backlog_bytes += pkt.len_bytes as u64;
        self.queue.push_back(pkt);
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// No packet queued (a FIFO keeps no other state).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether `pkt`, enqueued now, would be accepted and be the very next packet
    /// dequeued, leaving the FIFO as it found it: the FIFO is empty and its limit admits
    /// the packet (sch_fifo: pfifo tail-drops only when `qlen >= limit`, bfifo when
    /// `backlog + len > limit`; pfifo_head_drop always accepts, dropping from a head an
    /// empty queue does not have). An engine may then hand the packet to an idle
    /// transmitter directly, skipping the enqueue and dequeue copies (cut-through).
    #[inline]
    pub fn passes_through(&self, pkt: &Packet) -> bool {
        self.queue.is_empty()
            && match self.mode {
                Mode::Packets => self.limit > 0,
                Mode::Bytes => pkt.len_bytes as u64 <= self.limit,
                Mode::HeadDrop => true,
            }
    }
}

impl Qdisc for Fifo {
    #[inline]
    fn enqueue(&mut self, pkt: Packet, _now: Time, drops: &mut Drops) -> Verdict {
        match self.mode {
            Mode::Packets => {
                if self.queue.len() as u64 >= self.limit {
                    drops.push(pkt, DropReason::Overlimit);
                    return Verdict::Dropped;
                }
            }
            Mode::Bytes => {
                if self.backlog_bytes + pkt.len_bytes as u64 > self.limit {
                    drops.push(pkt, DropReason::Overlimit);
                    return Verdict::Dropped;
                }
            }
            Mode::HeadDrop => {
                if self.queue.len() as u64 >= self.limit {
                    if let Some(head) = self.queue.pop_front() {
                        self.backlog_bytes -= head.len_bytes as u64;
                        let same_flow = head.conversation() == pkt.conversation();
                        drops.push(head, DropReason::HeadDrop);
                        self.push(pkt);
                        return if same_flow {
                            Verdict::QueuedCongested
                        } else {
                            Verdict::Queued
                        };
                    }
                }
            }
        }
        self.push(pkt);
        Verdict::Queued
    }

    #[inline]
    fn dequeue(&mut self, _now: Time, _drops: &mut Drops) -> Dequeue {
        // The head is copied straight into the answer, then dropped from the queue: one
        // ~200-byte copy per dequeue where `pop_front` into a local and then into
        // `Dequeue::Packet` made two (issue 19, callgrind).
        let Some(p) = self.queue.front() else {
            return Dequeue::Empty;
        };
        self.backlog_bytes -= p.len_bytes as u64;
        let d = Dequeue::Packet(*p);
        self.queue.pop_front();
        d
    }

    #[inline]
    fn len_packets(&self) -> usize {
        self.queue.len()
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    fn ecn_marks(&self) -> u64 {
        0
    }
}

pub type Pfifo = Fifo;
pub type Bfifo = Fifo;
pub type PfifoHeadDrop = Fifo;

/// Typed spec of `pfifo`, `pfifo_head_drop` (limit in packets) and `bfifo` (in bytes);
/// `MODE` tells the three kinds apart ([`PfifoSpec`], [`BfifoSpec`], [`PfifoHeadDropSpec`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FifoSpec<const MODE: u8> {
    pub limit: u64,
}

/// `pfifo [limit PACKETS]` (default `tx_queue_len`).
pub type PfifoSpec = FifoSpec<PACKETS>;
/// `bfifo [limit BYTES]` (default `tx_queue_len × psched_mtu`).
pub type BfifoSpec = FifoSpec<BYTES>;
/// `pfifo_head_drop [limit PACKETS]`.
pub type PfifoHeadDropSpec = FifoSpec<HEAD_DROP>;
const PACKETS: u8 = 0;
const BYTES: u8 = 1;
const HEAD_DROP: u8 = 2;

impl Discipline for PfifoSpec {
    const KIND: &'static str = "pfifo";
    const SUMMARY: &'static str = "FIFO with a packet limit (default tx_queue_len = 1000)";
    type Qdisc = Fifo;
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let limit = p.u64("limit", ctx.tx_queue_len as u64, 1, u32::MAX as u64)?;
        Ok(FifoSpec { limit })
    }
    fn build(&self, _ctx: &BuildCtx) -> Fifo {
        Fifo::new(Mode::Packets, self.limit)
    }
    const TC_KEYS: Option<&'static [TcKey]> = Some(&[TcKey::Int("limit", "limit")]);

    /// `limit N` (packets; `tc qdisc show` prints `limit Np`).
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        Ok(vec!["limit".into(), self.limit.to_string()])
    }
}

impl Discipline for BfifoSpec {
    const KIND: &'static str = "bfifo";
    const SUMMARY: &'static str = "FIFO with a byte limit (default 1000 x 1514 B)";
    type Qdisc = Fifo;
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let default = ctx.tx_queue_len as u64 * ctx.mtu_bytes as u64;
        let limit = p.bytes("limit", default)?;
        if limit == 0 {
            return Err(p.err("limit", "a byte limit must be positive"));
        }
        Ok(FifoSpec { limit })
    }
    fn build(&self, _ctx: &BuildCtx) -> Fifo {
        Fifo::new(Mode::Bytes, self.limit)
    }
    const TC_KEYS: Option<&'static [TcKey]> = Some(&[TcKey::Size("limit", "limit")]);

    /// `limit SIZE` (bytes, in tc's size units).
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        Ok(vec!["limit".into(), tc_size(self.limit)])
    }
}

impl Discipline for PfifoHeadDropSpec {
    const KIND: &'static str = "pfifo_head_drop";
    const SUMMARY: &'static str = "FIFO that drops the oldest packet when full";
    type Qdisc = Fifo;
    /// pfifo's parameters and tc words: only the end a full queue drops from differs.
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        PfifoSpec::parse(p, ctx).map(|pfifo| FifoSpec { limit: pfifo.limit })
    }
    fn build(&self, _ctx: &BuildCtx) -> Fifo {
        Fifo::new(Mode::HeadDrop, self.limit)
    }
    const TC_KEYS: Option<&'static [TcKey]> = PfifoSpec::TC_KEYS;
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        PfifoSpec { limit: self.limit }.tc_args()
    }
}

/// `pfifo [limit PACKETS]`.
pub fn pfifo(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Fifo> {
    Ok(PfifoSpec::parse(p, ctx)?.build(ctx))
}

/// `bfifo [limit BYTES]`.
pub fn bfifo(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Fifo> {
    Ok(BfifoSpec::parse(p, ctx)?.build(ctx))
}

/// `pfifo_head_drop [limit PACKETS]`.
pub fn pfifo_head_drop(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Fifo> {
    Ok(PfifoHeadDropSpec::parse(p, ctx)?.build(ctx))
}

/// A pfifo with the given limit (for composition and tests).
pub fn pfifo_with_limit(limit: u64) -> Fifo {
    Fifo::new(Mode::Packets, limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::testkit::{check_conservation, pkt};

    #[test]
    fn pfifo_tail_drops_at_limit() {
        let mut q = pfifo_with_limit(3);
        let mut d = Drops::new();
        for i in 0..5 {
            q.enqueue(pkt(i, 1, 100), Time(0), &mut d);
        }
        assert_eq!(q.len_packets(), 3);
        let dropped: Vec<u64> = d.drain().map(|x| x.pkt.uid).collect();
        assert_eq!(
            dropped,
            vec![3, 4],
            "the arrivals beyond the limit are dropped"
        );
        assert_eq!(q.dequeue(Time(1), &mut d).packet().unwrap().uid, 0);
    }

    #[test]
    fn bfifo_counts_bytes() {
        let mut q = Fifo::new(Mode::Bytes, 1000);
        let mut d = Drops::new();
        assert_eq!(q.enqueue(pkt(0, 1, 600), Time(0), &mut d), Verdict::Queued);
        assert_eq!(
            q.enqueue(pkt(1, 1, 500), Time(0), &mut d),
            Verdict::Dropped,
            "600+500 > 1000"
        );
        assert_eq!(
            q.enqueue(pkt(2, 1, 400), Time(0), &mut d),
            Verdict::Queued,
            "600+400 = 1000 fits"
        );
        assert_eq!(q.len_bytes(), 1000);
    }

    #[test]
    fn head_drop_keeps_newest() {
        let mut q = Fifo::new(Mode::HeadDrop, 2);
        let mut d = Drops::new();
        for i in 0..4 {
            q.enqueue(pkt(i, 1, 100), Time(0), &mut d);
        }
        let dropped: Vec<u64> = d.drain().map(|x| x.pkt.uid).collect();
        assert_eq!(dropped, vec![0, 1]);
        assert_eq!(q.dequeue(Time(0), &mut d).packet().unwrap().uid, 2);
    }

    /// Cut-through: an empty FIFO passes a packet straight through exactly when sch_fifo
    /// would accept it (limits written as literals).
    #[test]
    fn passes_through_only_when_empty_and_admitted() {
        // pfifo: qlen 0 < limit 1 admits; limit 0 admits nothing.
        let mut q = pfifo_with_limit(1);
        assert!(q.passes_through(&pkt(0, 1, 1500)));
        assert!(!pfifo_with_limit(0).passes_through(&pkt(0, 1, 100)));
        let mut d = Drops::new();
        q.enqueue(pkt(1, 1, 100), Time(0), &mut d);
        assert!(
            !q.passes_through(&pkt(2, 1, 100)),
            "a queued packet goes first"
        );
        // bfifo 1000 bytes: a 1000-byte packet fits (backlog + len = limit), 1001 does not.
        let b = Fifo::new(Mode::Bytes, 1000);
        assert!(b.passes_through(&pkt(0, 1, 1000)));
        assert!(!b.passes_through(&pkt(0, 1, 1001)));
        // pfifo_head_drop accepts into an empty queue whatever its limit.
        assert!(Fifo::new(Mode::HeadDrop, 0).passes_through(&pkt(0, 1, 100)));
        let mut h = Fifo::new(Mode::HeadDrop, 2);
        h.enqueue(pkt(1, 1, 100), Time(0), &mut d);
        assert!(!h.passes_through(&pkt(2, 1, 100)));
        assert!(d.is_empty());
    }

    /// `AnyQdisc::cut_through` and `AnyQdisc::idle` answer for the three FIFOs only, by their queue.
    #[test]
    fn cut_through_and_idle_are_for_fifos_only() {
        let mut d = Drops::new();
        let p = pkt(0, 1, 1500);
        use crate::qdisc::AnyQdisc;
        let fifos = [
            AnyQdisc::Pfifo(pfifo_with_limit(10)),
            AnyQdisc::Bfifo(Fifo::new(Mode::Bytes, 10_000)),
            AnyQdisc::PfifoHeadDrop(Fifo::new(Mode::HeadDrop, 10)),
        ];
        for mut q in fifos {
            assert!(q.idle() && q.cut_through(&p));
            q.enqueue(pkt(1, 1, 100), Time(0), &mut d);
            assert!(!q.idle() && !q.cut_through(&p));
            assert!(matches!(q.dequeue(Time(0), &mut d), Dequeue::Packet(_)));
            assert!(q.idle() && q.cut_through(&p));
        }
        // A bfifo too small for the packet is idle but does not pass it.
        let small = AnyQdisc::Bfifo(Fifo::new(Mode::Bytes, 1000));
        assert!(small.idle() && !small.cut_through(&p));
        let codel = AnyQdisc::Codel(crate::qdisc::codel::Codel::new(
            1000,
            crate::qdisc::codel_law::CodelParams::linux_default(1514),
        ));
        assert!(!codel.idle() && !codel.cut_through(&p));
    }

    /// Against the slow path it replaces: on random traffic, whenever `passes_through`
    /// says so, an enqueue followed by a dequeue gives back the same packet, drops
    /// nothing and leaves the FIFO empty; when it says no, the packet is not the next one
    /// out as itself (queued behind others, or dropped).
    #[test]
    fn passes_through_agrees_with_enqueue_then_dequeue() {
        let mut r = crate::rng::Rng::from_seed(5);
        for mode in [Mode::Packets, Mode::Bytes, Mode::HeadDrop] {
            let mut q = Fifo::new(mode, if mode == Mode::Bytes { 3000 } else { 3 });
            let mut d = Drops::new();
            let (mut yes, mut no) = (0, 0);
            for i in 0..2000u64 {
                if r.below(2) == 0 {
                    let p = pkt(i, 1, 100 + r.below(3500) as u32);
                    let pass = q.passes_through(&p);
                    let before = q.len_packets();
                    q.enqueue(p, Time(i), &mut d);
                    if pass {
                        yes += 1;
                        assert_eq!(before, 0);
                        assert!(d.is_empty());
                        assert_eq!(q.len_packets(), 1);
                        // Half the time it is taken out at once (the cut-through case),
                        // half the time others queue behind it.
                        if r.below(2) == 0 {
                            let out = q.dequeue(Time(i), &mut d).packet().expect("passed");
                            assert_eq!(out.uid, i);
                            assert_eq!((q.len_packets(), q.len_bytes()), (0, 0));
                        }
                    } else {
                        no += 1;
                        let dropped = d.drain().any(|x| x.pkt.uid == i);
                        assert!(dropped || q.len_packets() > 1 || before > 0);
                    }
                } else {
                    q.dequeue(Time(i), &mut d);
                }
                d.drain().for_each(drop);
            }
            assert!(yes > 50 && no > 50, "{mode:?}: {yes} / {no}");
        }
    }

    #[test]
    fn fifo_conservation_property() {
        for mode in [Mode::Packets, Mode::Bytes, Mode::HeadDrop] {
            for seed in 0..20 {
                let mut q = Fifo::new(mode, if mode == Mode::Bytes { 20_000 } else { 17 });
                check_conservation(&mut q, seed, 5_000, |q| match mode {
                    Mode::Bytes => q.len_bytes() <= 20_000,
                    _ => q.len_packets() <= 17,
                });
            }
        }
    }
}
