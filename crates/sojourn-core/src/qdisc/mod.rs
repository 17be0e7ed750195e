//! The queueing-discipline interface (docs/adding-a-qdisc.md) and the enum that
//! dispatches to every discipline without `Box<dyn>` on the hot path.
//!
//! Contract, mirroring a Linux qdisc:
//! - The caller (a link) stamps `pkt.enqueued_at = now` before [`Qdisc::enqueue`]; disciplines
//!   read that stamp for sojourn times and never re-stamp (children of a parent see the same
//!   stamp, like `skb->tstamp` set once by the root).
//! - `enqueue` may drop the arriving packet or others (fq_codel's fattest flow, head drop);
//!   every dropped packet goes into `drops` exactly once with a [`DropReason`].
//! - `dequeue` returns a packet, `Empty`, or `NotBefore(t)`: a shaper or pacer holding
//!   packets that may leave only at `t` (the kernel's qdisc watchdog). AQMs that drop at
//!   the head put those drops into `drops`.
//! - ECN: a "mark" sets CE via [`Packet::set_ce`] and is counted in `ecn_marks`, never a drop.
//! - Periodic timers (PIE's tupdate, adaptive RED) run lazily: before handling an operation
//!   at `now` a discipline runs every tick due at or before `now`. This is exactly what a
//!   timer event would do, because a qdisc's state only changes at its own operations.

pub mod age;
pub mod cake;
pub mod cobalt;
pub mod cocoa;
pub mod codel;
pub mod codel_law;
pub mod drr_lists;
pub mod dualpi2;
pub mod fifo;
pub mod flow_heap;
pub mod fq;
pub mod fq_codel;
pub mod fq_pie;
pub mod las;
pub mod lstf_codel;
pub mod pie;
pub mod prio;
pub mod red;
pub mod registry;
pub mod sfq;
pub mod spec;
pub mod srpt;
pub mod tbf;

use crate::packet::Packet;
use crate::time::Time;

pub use registry::{build, build_kind, describe, BuildCtx, KINDS};
pub use spec::{NotLinux, QdiscSpec, TcClass, TcNode, TcParent, TcShaped, TcTree};

/// Why a packet was dropped; `name()` is the label in outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DropReason {
    /// Tail drop: the qdisc's packet or byte limit.
    Overlimit = 0,
    /// The AQM's control law (CoDel, COBALT, RED/PIE at dequeue).
    Aqm,
    /// Probabilistic drop at enqueue (PIE, RED).
    Early,
    /// fq_codel/CAKE overflow: batch head drop from the fattest flow.
    FattestFlow,
    /// A per-flow packet limit (fq's flow_limit, SFQ depth, CoCoA's learned limit).
    FlowLimit,
    /// A memory (truesize) limit.
    Memory,
    /// Head drop of a full FIFO (pfifo_head_drop).
    HeadDrop,
    /// No free slot/queue for a new flow (SFQ with all slots busy).
    NoSlot,
    /// A packet scheduled too far in the future (fq horizon).
    Horizon,
    /// CoCoA: the learned standing queue dropped from the tail.
    StandingQueue,
    /// A link's random loss model (not a qdisc decision).
    LinkLoss,
}

impl DropReason {
    pub const COUNT: usize = 11;
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::Overlimit,
        DropReason::Aqm,
        DropReason::Early,
        DropReason::FattestFlow,
        DropReason::FlowLimit,
        DropReason::Memory,
        DropReason::HeadDrop,
        DropReason::NoSlot,
        DropReason::Horizon,
        DropReason::StandingQueue,
        DropReason::LinkLoss,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DropReason::Overlimit => "overlimit",
            DropReason::Aqm => "aqm",
            DropReason::Early => "early",
            DropReason::FattestFlow => "fattest_flow",
            DropReason::FlowLimit => "flow_limit",
            DropReason::Memory => "memory",
            DropReason::HeadDrop => "head_drop",
            DropReason::NoSlot => "no_slot",
            DropReason::Horizon => "horizon",
            DropReason::StandingQueue => "standing_queue",
            DropReason::LinkLoss => "link_loss",
        }
    }
}

/// A dropped packet and why.
#[derive(Clone, Copy, Debug)]
pub struct Dropped {
    pub pkt: Packet,
    pub reason: DropReason,
}

/// The sink every discipline drops into. The caller drains it after each call; it is
/// reused, so dropping does not allocate once warmed up.
#[derive(Debug, Default)]
pub struct Drops {
    list: Vec<Dropped>,
}

impl Drops {
    pub fn new() -> Drops {
        Drops {
            list: Vec::with_capacity(64),
        }
    }
    #[inline]
    pub fn push(&mut self, pkt: Packet, reason: DropReason) {
        self.list.push(Dropped { pkt, reason });
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
    pub fn len(&self) -> usize {
        self.list.len()
    }
    pub fn drain(&mut self) -> std::vec::Drain<'_, Dropped> {
        self.list.drain(..)
    }
    pub fn as_slice(&self) -> &[Dropped] {
        &self.list
    }
    pub fn clear(&mut self) {
        self.list.clear()
    }
}

/// What became of the arriving packet (`NET_XMIT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted (`NET_XMIT_SUCCESS`); other packets may still have been dropped.
    Queued,
    /// Accepted, but packets of the same flow were dropped to make room (`NET_XMIT_CN`).
    QueuedCongested,
    /// The arriving packet itself was dropped (it is in the drop sink).
    Dropped,
}

/// The result of a dequeue attempt.
#[derive(Clone, Copy, Debug)]
pub enum Dequeue {
    Packet(Packet),
    /// Nothing queued (possibly after AQM drops).
    Empty,
    /// Packets are queued but may not leave before this time (shaper/pacer watchdog).
    NotBefore(Time),
}

impl Dequeue {
    pub fn packet(self) -> Option<Packet> {
        match self {
            Dequeue::Packet(p) => Some(p),
            _ => None,
        }
    }
}

/// A queueing discipline (sans-IO: time comes in as `now`, drops go out through `drops`).
pub trait Qdisc {
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict;
    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue;
    /// Packets queued (`qlen`).
    fn len_packets(&self) -> usize;
    /// Bytes queued (`backlog`), in `qdisc_pkt_len` units.
    fn len_bytes(&self) -> u64;
    /// CE marks applied so far (children included).
    fn ecn_marks(&self) -> u64;
    /// Internal state for time series (e.g. PIE's drop probability), reported through
    /// `emit(name, value)`; lazy timers are first brought up to `now`.
    fn observe(&mut self, _now: Time, _emit: &mut dyn FnMut(&str, f64)) {}
}

impl<Q: Qdisc + ?Sized> Qdisc for Box<Q> {
    #[inline]
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        (**self).enqueue(pkt, now, drops)
    }
    #[inline]
    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        (**self).dequeue(now, drops)
    }
    #[inline]
    fn len_packets(&self) -> usize {
        (**self).len_packets()
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        (**self).len_bytes()
    }
    fn ecn_marks(&self) -> u64 {
        (**self).ecn_marks()
    }
    fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
        (**self).observe(now, emit)
    }
}

/// Declares [`AnyQdisc`] with one variant per discipline and forwards the trait to it.
/// Adding a discipline = one line here plus one entry in `registry::KINDS`.
macro_rules! any_qdisc {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        /// Every discipline, dispatched by `match` (no virtual calls on the hot path).
        pub enum AnyQdisc { $($variant($ty)),* }

        impl Qdisc for AnyQdisc {
            #[inline]
            fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
                match self { $(AnyQdisc::$variant(q) => q.enqueue(pkt, now, drops)),* }
            }
            #[inline]
            fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
                match self { $(AnyQdisc::$variant(q) => q.dequeue(now, drops)),* }
            }
            #[inline]
            fn len_packets(&self) -> usize {
                match self { $(AnyQdisc::$variant(q) => q.len_packets()),* }
            }
            #[inline]
            fn len_bytes(&self) -> u64 {
                match self { $(AnyQdisc::$variant(q) => q.len_bytes()),* }
            }
            fn ecn_marks(&self) -> u64 {
                match self { $(AnyQdisc::$variant(q) => q.ecn_marks()),* }
            }
            fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
                match self { $(AnyQdisc::$variant(q) => q.observe(now, emit)),* }
            }
        }
    };
}

any_qdisc! {
    Pfifo(fifo::Pfifo),
    Bfifo(fifo::Bfifo),
    PfifoHeadDrop(fifo::PfifoHeadDrop),
    Codel(codel::Codel),
    FqCodel(Box<fq_codel::FqCodel>),
    Fq(Box<fq::Fq>),
    Cocoa(Box<cocoa::Cocoa>),
    Cake(Box<cake::Cake>),
    Pie(Box<pie::Pie>),
    FqPie(Box<fq_pie::FqPie>),
    DualPi2(Box<dualpi2::DualPi2>),
    Sfq(Box<sfq::Sfq>),
    Red(Box<red::Red>),
    Prio(Box<prio::Prio>),
    PfifoFast(Box<prio::PfifoFast>),
    Tbf(Box<tbf::Tbf>),
    LstfCodel(Box<lstf_codel::LstfCodel>),
    Age(Box<age::Age>),
    Las(Box<las::Las>),
    Srpt(Box<srpt::Srpt>),
}

pub mod testkit;
