//! Queueing disciplines (docs/adding-a-qdisc.md). The interface and the vocabulary every
//! discipline speaks live in the leaf [`vocab`]; each discipline declares itself beside its
//! code ([`Discipline`]); the `disciplines!` list below names every declaration once, and
//! [`registry`]'s macro turns it into the typed [`QdiscSpec`] and the [`AnyQdisc`] that
//! dispatches to every discipline without `Box<dyn>` on the hot path; [`spec`] writes and
//! reads a spec's tc tree.
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

#[macro_use]
pub mod registry;
pub mod age;
pub mod cake;
pub mod cobalt;
pub mod cocoa;
pub mod codel;
pub mod codel_law;
pub mod drr;
pub mod drr_lists;
pub mod dualpi2;
pub mod external;
pub mod fifo;
pub mod flow_heap;
pub mod fq;
pub mod fq_codel;
pub mod fq_pie;
pub mod htb;
pub mod las;
pub mod lstf_codel;
pub mod minor_set;
pub mod pie;
pub mod prio;
pub mod red;
pub mod sfq;
pub mod spec;
pub mod srpt;
pub mod tbf;
pub mod tc_lines;
pub mod vocab;

use crate::packet::Packet;
use crate::params::{ConfResult, Table, Value};
use crate::time::Time;

pub use vocab::{
    BuildCtx, Dequeue, Discipline, DropReason, Dropped, Drops, Facts, NotLinux, Qdisc, TcClass,
    TcKey, TcNode, TcParent, TcShaped, TcTree, Verdict,
};

// Every discipline: its module and what it declares (`Variant(SpecType)`, the type that
// implements `Discipline`; `+ Classful` when it holds child specs). Adding a discipline
// is its file, its `pub mod` above and its line here; the order is `sojourn qdiscs`'s.
disciplines! {
    fifo::{Pfifo(PfifoSpec), Bfifo(BfifoSpec), PfifoHeadDrop(PfifoHeadDropSpec)},
    codel::{Codel(CodelSpec)},
    fq_codel::{FqCodel(FqCodelSpec)},
    fq::{Fq(FqConfig)},
    cocoa::{Cocoa(CocoaSpec)},
    cake::{Cake(CakeConfig)},
    pie::{Pie(PieSpec)},
    fq_pie::{FqPie(FqPieSpec)},
    dualpi2::{DualPi2(DualPi2Spec)},
    sfq::{Sfq(SfqSpec)},
    red::{Red(RedSpec)},
    prio::{Prio(PrioSpec) + Classful, PfifoFast(PfifoFastSpec)},
    tbf::{Tbf(TbfSpec) + Classful},
    htb::{Htb(HtbSpec) + Classful},
    drr::{Drr(DrrSpec) + Classful},
    lstf_codel::{LstfCodel(LstfCodelSpec)},
    age::{Age(AgeSpec) + Classful},
    las::{Las(LasSpec)},
    srpt::{Srpt(SrptSpec)},
    external::{External(ExternalSpec)},
}

impl AnyQdisc {
    /// This is a FIFO that would pass `pkt` straight through ([`fifo::Fifo::passes_through`]);
    /// false for every other discipline (their enqueue or dequeue may change their state
    /// even when the packet goes straight out: CoDel's drop state, PIE's estimators, …).
    #[inline]
    pub fn cut_through(&self, pkt: &Packet) -> bool {
        match self {
            AnyQdisc::Pfifo(f) | AnyQdisc::Bfifo(f) | AnyQdisc::PfifoHeadDrop(f) => {
                f.passes_through(pkt)
            }
            _ => false,
        }
    }

    /// This is an empty FIFO: a dequeue now would answer `Empty` and change nothing (a
    /// FIFO keeps no state besides its packets), so an engine may skip it when a
    /// transmission ends. False for every other discipline (CoDel, for one, leaves its
    /// dropping state on an empty dequeue, as Linux's `codel_dequeue` does).
    #[inline]
    pub fn idle(&self) -> bool {
        match self {
            AnyQdisc::Pfifo(f) | AnyQdisc::Bfifo(f) | AnyQdisc::PfifoHeadDrop(f) => f.is_empty(),
            _ => false,
        }
    }
}

impl QdiscSpec {
    /// Builds a composite's children, child `i` with `ctx.child(i)`: each its own random
    /// stream, as the kernel gives each child qdisc its own state.
    pub fn build_children(children: &[QdiscSpec], ctx: &BuildCtx) -> Vec<AnyQdisc> {
        children
            .iter()
            .enumerate()
            .map(|(i, c)| c.build(&ctx.child(i as u64)))
            .collect()
    }
}

/// A discipline whose spec holds child specs (prio's bands, age's levels, tbf's inner
/// qdisc), as tc's classful qdiscs hold a child qdisc per class. Only these disciplines
/// import the spec tree.
pub trait Classful: Discipline {
    /// The child specs, in class order (class `:i+1` holds child `i`).
    fn children(&self) -> Vec<&QdiscSpec>;
    /// The children that get tc lines of their own: all of them, unless the parent's own
    /// arguments already make a child (tbf's `limit` makes its default bfifo).
    fn tc_children(&self) -> Vec<&QdiscSpec> {
        self.children()
    }
    /// The class minor each of [`Classful::tc_children`] hangs from: `:1`, `:2`, … by
    /// default; htb and drr place a leaf under its own classid.
    fn tc_child_minors(&self) -> Vec<u16> {
        (1..=self.tc_children().len() as u16).collect()
    }
    /// `tc class` lines this qdisc needs before its children (htb's and drr's classes);
    /// none by default (prio's and tbf's classes exist with the qdisc).
    fn tc_classes(&self) -> Result<Vec<TcClass>, NotLinux> {
        Ok(Vec::new())
    }
    /// `tc filter` arguments after `dev DEV` (htb's and drr's address filters); none by
    /// default.
    fn tc_filters(&self) -> Result<Vec<String>, NotLinux> {
        Ok(Vec::new())
    }
    /// Hangs children read from a tc tree, `(class minor, spec)` in minor order, where
    /// the kernel's class lookup would; `Err` says what tc would refuse. By default the
    /// discipline is not read back from tc with children (age: Linux has no such qdisc).
    fn attach(&mut self, children: Vec<(u16, QdiscSpec)>) -> ConfResult<()> {
        registry::no_classes(self, children)
    }
}

pub mod testkit;
