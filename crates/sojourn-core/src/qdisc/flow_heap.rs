//! Per-flow FIFO queues under a min-heap of backlogged flows, shared by the reference
//! schedulers `las` (key: attained service) and `srpt` (key: remaining work).
//!
//! Flows are found by `pkt.hash` and hold their packets in arrival order. Each backlogged
//! flow has one valid heap entry `(key, sequence, index)`: the smallest key is served, and
//! among equal keys the flow scheduled first (the sequence grows with every scheduling, so
//! a served flow that keeps its key goes behind the others: round robin among ties). Only
//! the served flow's key changes, so a dequeue is one pop and at most one push (no
//! allocation once warm). An overflow drop that empties a flow leaves its entry behind; such
//! entries are recognised by their sequence and skipped when they reach the top.
//!
//! On overflow (`limit` packets) the newest packet of the backlogged flow with the largest
//! key (the one served last) is dropped, possibly the arrival itself: dropping from it
//! disturbs the schedule least. Finding it scans the heap, only on overflow (as fq_codel's
//! fattest-flow search scans its backlogs).
//!
//! A discipline chooses whether a flow's slot is released as soon as it has nothing queued
//! (`srpt`: it keeps no per-flow memory) or kept with its state `S` until the discipline
//! forgets it (`las`: attained service outlives short idle periods).

use super::vocab::{Dequeue, DropReason, Drops, Verdict};
use crate::packet::Packet;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// A flow's sequence when it has no valid heap entry.
const UNSCHEDULED: u64 = u64::MAX;

/// One flow: its packets and the discipline's state `S` for it.
#[derive(Debug, Default)]
pub(crate) struct HeapFlow<S> {
    pub hash: u32,
    pub queue: VecDeque<Packet>,
    /// Sequence of the flow's valid heap entry (entries with another one are stale).
    seq: u64,
    pub state: S,
}

/// Heap entry: (key, sequence, flow index), smallest first.
type Entry = Reverse<(u64, u64, u32)>;

/// The flows, the heap and the qdisc's packet and byte counts.
#[derive(Debug)]
pub(crate) struct FlowHeap<S> {
    flows: Vec<HeapFlow<S>>,
    free: Vec<u32>,
    by_hash: HashMap<u32, u32>,
    heap: BinaryHeap<Entry>,
    next_seq: u64,
    limit: usize,
    /// Release a flow's slot when it empties (else it stays until [`FlowHeap::forget`]).
    release_emptied: bool,
    qlen: usize,
    backlog_bytes: u64,
}

impl<S: Default> FlowHeap<S> {
    pub(crate) fn new(limit: usize, release_emptied: bool) -> FlowHeap<S> {
        assert!(limit >= 1);
        FlowHeap {
            flows: Vec::new(),
            free: Vec::new(),
            by_hash: HashMap::new(),
            heap: BinaryHeap::new(),
            next_seq: 0,
            limit,
            release_emptied,
            qlen: 0,
            backlog_bytes: 0,
        }
    }

    /// The flow with hash `hash`, if it has a slot.
    #[inline(always)]
    pub(crate) fn lookup(&self, hash: u32) -> Option<u32> {
        self.by_hash.get(&hash).copied()
    }

    /// A fresh slot for hash `hash` (which has none), its state `S::default()`.
    pub(crate) fn insert(&mut self, hash: u32) -> u32 {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.flows.push(HeapFlow::default());
                (self.flows.len() - 1) as u32
            }
        };
        let f = &mut self.flows[i as usize];
        f.hash = hash;
        f.seq = UNSCHEDULED;
        f.state = S::default();
        self.by_hash.insert(hash, i);
        i
    }

    #[inline(always)]
    pub(crate) fn flow(&self, idx: u32) -> &HeapFlow<S> {
        &self.flows[idx as usize]
    }

    #[inline(always)]
    pub(crate) fn flow_mut(&mut self, idx: u32) -> &mut HeapFlow<S> {
        &mut self.flows[idx as usize]
    }

    /// The packet limit.
    #[cfg(test)]
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Flows with a slot (backlogged or remembered).
    pub(crate) fn known_flows(&self) -> usize {
        self.by_hash.len()
    }

    #[inline(always)]
    fn entry_valid(&self, e: &Entry) -> bool {
        let f = &self.flows[e.0 .2 as usize];
        f.seq == e.0 .1 && !f.queue.is_empty()
    }

    /// Flows with packets queued (a scan of the heap).
    pub(crate) fn backlogged_flows(&self) -> usize {
        self.heap.iter().filter(|e| self.entry_valid(e)).count()
    }

    /// Releases the slot of flow `idx` (which has nothing queued).
    fn release(&mut self, idx: u32) {
        let f = &mut self.flows[idx as usize];
        f.seq = UNSCHEDULED;
        let h = f.hash;
        self.by_hash.remove(&h);
        self.free.push(idx);
    }

    /// Releases every idle flow for which `forget` says so.
    pub(crate) fn forget(&mut self, forget: impl Fn(&HeapFlow<S>) -> bool) {
        let mut freed = Vec::new();
        for &i in self.by_hash.values() {
            let f = &self.flows[i as usize];
            if f.queue.is_empty() && forget(f) {
                freed.push(i);
            }
        }
        for i in freed {
            self.release(i);
        }
    }

    /// Puts flow `idx` into the heap with `key`, behind every flow already there with the
    /// same key.
    #[inline(always)]
    pub(crate) fn schedule(&mut self, idx: u32, key: u64) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.flows[idx as usize].seq = seq;
        self.heap.push(Reverse((key, seq, idx)));
    }

    /// Appends `pkt` to flow `idx`; returns whether the flow was idle (then the caller
    /// schedules it).
    #[inline(always)]
    pub(crate) fn push(&mut self, idx: u32, pkt: Packet) -> bool {
        let f = &mut self.flows[idx as usize];
        let was_idle = f.queue.is_empty();
        f.queue.push_back(pkt);
        self.qlen += 1;
        self.backlog_bytes += pkt.len_bytes as u64;
        was_idle
    }

    /// After an arrival to flow `arrival` (the packet with uid `arrival_uid`): at most
    /// `limit` packets stay, else the newest packet of the flow with the largest key is
    /// dropped. The arrival's verdict.
    pub(crate) fn enforce_limit(
        &mut self,
        arrival: u32,
        arrival_uid: u64,
        drops: &mut Drops,
    ) -> Verdict {
        if self.qlen <= self.limit {
            return Verdict::Queued;
        }
        let victim = self
            .heap
            .iter()
            .filter(|e| self.entry_valid(e))
            .max_by_key(|e| (e.0 .0, e.0 .1))
            .map(|e| e.0 .2)
            .expect("a backlogged flow exists");
        let f = &mut self.flows[victim as usize];
        let p = f.queue.pop_back().expect("valid entries are backlogged");
        let emptied = f.queue.is_empty();
        self.qlen -= 1;
        self.backlog_bytes -= p.len_bytes as u64;
        if emptied && self.release_emptied {
            self.release(victim);
        }
        let dropped_arrival = p.uid == arrival_uid;
        drops.push(p, DropReason::Overlimit);
        if dropped_arrival {
            Verdict::Dropped
        } else if victim == arrival {
            Verdict::QueuedCongested
        } else {
            Verdict::Queued
        }
    }

    /// Dequeues the head packet of the flow with the smallest key. `rekey` then sees the
    /// flow (without that packet) and the packet, updates the flow's state and returns
    /// its new key, with which the flow is scheduled again if it still has packets (an
    /// emptied flow's slot is released if the discipline keeps no idle flows).
    #[inline(always)]
    pub(crate) fn dequeue_min(
        &mut self,
        rekey: impl FnOnce(&mut HeapFlow<S>, &Packet) -> u64,
    ) -> Dequeue {
        while let Some(e) = self.heap.pop() {
            if !self.entry_valid(&e) {
                continue; // emptied by an overflow drop
            }
            let idx = e.0 .2;
            let f = &mut self.flows[idx as usize];
            let p = f.queue.pop_front().expect("valid entries are backlogged");
            self.qlen -= 1;
            self.backlog_bytes -= p.len_bytes as u64;
            let key = rekey(f, &p);
            if !f.queue.is_empty() {
                self.schedule(idx, key);
            } else if self.release_emptied {
                self.release(idx);
            } else {
                f.seq = UNSCHEDULED;
            }
            return Dequeue::Packet(p);
        }
        Dequeue::Empty
    }

    #[inline(always)]
    pub(crate) fn len_packets(&self) -> usize {
        self.qlen
    }

    #[inline(always)]
    pub(crate) fn len_bytes(&self) -> u64 {
        self.backlog_bytes
    }
}
