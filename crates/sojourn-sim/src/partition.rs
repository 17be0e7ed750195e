//! A partition of a run cut over threads (`parallel.rs`): the state a [`crate::sim::Sim`]
//! keeps when it is one of several. A leaf module, so that the engine and the parallel
//! driver both use it without importing each other.

use sojourn_core::{Packet, Time};
use std::collections::VecDeque;

/// A partition's own state inside its [`crate::sim::Sim`].
pub struct Part {
    pub index: u16,
    /// Per node, its partition (a link whose ends differ is cut: `Link::cut`).
    pub owner: Vec<u16>,
    /// Per cut link this partition sends on: how many entries at the head of its in-flight
    /// list were shipped already.
    pub shipped: Vec<u32>,
    /// Per cut link this partition receives on: the packets shipped to it, in arrival order.
    pub incoming: Vec<VecDeque<(Time, Packet)>>,
    /// Shipped this window: (destination partition, link, arrival time, packet).
    pub outbox: Vec<(u16, u32, Time, Packet)>,
    /// The cut links this partition sent on in this window (each once, `sent_on`): what
    /// `Sim::ship` visits, instead of every cut link every window (a tree of 10,000
    /// subscribers cuts ~19,000 links, each a cold line: ~0.9 ms a window).
    pub sent_on: Vec<u32>,
    /// Per link, whether it is in `sent_on`.
    pub in_sent_on: Vec<bool>,
}

impl Part {
    #[inline(always)]
    pub fn owns(&self, node: u32) -> bool {
        self.owner[node as usize] == self.index
    }

    /// A packet entered cut link `l`'s in-flight list here: ship it at the window's end.
    #[inline]
    pub fn sent(&mut self, l: u32) {
        if !self.in_sent_on[l as usize] {
            self.in_sent_on[l as usize] = true;
            self.sent_on.push(l);
        }
    }
}
