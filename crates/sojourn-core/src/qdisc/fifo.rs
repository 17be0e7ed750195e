//! FIFOs: `pfifo` (packet limit), `bfifo` (byte limit), `pfifo_head_drop`.
//!
//! Linux `sch_fifo.c` semantics: pfifo tail-drops when `qlen >= limit` (default
//! `tx_queue_len` = 1000); bfifo drops when `backlog + len > limit` (default
//! `tx_queue_len · psched_mtu` bytes); pfifo_head_drop, when full, drops the head and
//! accepts the arrival.

use super::spec::TcKey;
use super::{BuildCtx, Dequeue, DropReason, Drops, Qdisc, Verdict};
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

/// Typed spec of `pfifo`, `pfifo_head_drop` (limit in packets) and `bfifo` (in bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FifoSpec {
    pub limit: u64,
}

impl FifoSpec {
    /// `pfifo [limit PACKETS]` (default `tx_queue_len`).
    pub fn parse_pfifo(p: &mut Params, ctx: &BuildCtx) -> ConfResult<FifoSpec> {
        let limit = p.u64("limit", ctx.tx_queue_len as u64, 1, u32::MAX as u64)?;
        Ok(FifoSpec { limit })
    }

    /// `bfifo [limit BYTES]` (default `tx_queue_len × psched_mtu`).
    pub fn parse_bfifo(p: &mut Params, ctx: &BuildCtx) -> ConfResult<FifoSpec> {
        let default = ctx.tx_queue_len as u64 * ctx.mtu_bytes as u64;
        let limit = p.bytes("limit", default)?;
        if limit == 0 {
            return Err(p.err("limit", "a byte limit must be positive"));
        }
        Ok(FifoSpec { limit })
    }

    /// `pfifo_head_drop [limit PACKETS]`.
    pub fn parse_head_drop(p: &mut Params, ctx: &BuildCtx) -> ConfResult<FifoSpec> {
        Self::parse_pfifo(p, ctx)
    }

    pub fn build_packets(&self) -> Fifo {
        Fifo::new(Mode::Packets, self.limit)
    }
    pub fn build_bytes(&self) -> Fifo {
        Fifo::new(Mode::Bytes, self.limit)
    }
    pub fn build_head_drop(&self) -> Fifo {
        Fifo::new(Mode::HeadDrop, self.limit)
    }

    /// `limit N` (packets; `tc qdisc show` prints `limit Np`).
    pub fn tc_args_packets(&self) -> Vec<String> {
        vec!["limit".into(), self.limit.to_string()]
    }
    /// `limit SIZE` (bytes, in tc's size units).
    pub fn tc_args_bytes(&self) -> Vec<String> {
        vec!["limit".into(), super::spec::tc_size(self.limit)]
    }
}

/// tc keywords of `pfifo` and `pfifo_head_drop`.
pub const TC_KEYS_PACKETS: &[TcKey] = &[TcKey::Int("limit", "limit")];
/// tc keywords of `bfifo`.
pub const TC_KEYS_BYTES: &[TcKey] = &[TcKey::Size("limit", "limit")];

/// `pfifo [limit PACKETS]`.
pub fn pfifo(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Fifo> {
    Ok(FifoSpec::parse_pfifo(p, ctx)?.build_packets())
}

/// `bfifo [limit BYTES]`.
pub fn bfifo(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Fifo> {
    Ok(FifoSpec::parse_bfifo(p, ctx)?.build_bytes())
}

/// `pfifo_head_drop [limit PACKETS]`.
pub fn pfifo_head_drop(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Fifo> {
    Ok(FifoSpec::parse_head_drop(p, ctx)?.build_head_drop())
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
