//! The simulator's table of flow records ([`FlowTable`]): a run that streams its outputs
//! hands finished records out ([`FlowTable::release`]), so it holds only the active ones.
//! The record itself is every engine's ([`sojourn_record::flows::FlowRecord`]).

use sojourn_core::{Duration, Time};
use sojourn_record::flows::FlowRecord;
use std::collections::BTreeMap;

/// All flows of a run, indexed by flow id (ids are dense, in creation order).
///
/// A run that holds its outputs in memory keeps every record to the end. A streamed run
/// ([`FlowTable::set_release`]) hands each record out once nothing can change it any more
/// (its endpoints closed, none of its packets in the network, past its last per-flow
/// sample), so memory follows the active flows, not all flows ever. Records live in a
/// window over ids `base..`; a long-lived flow at the window's front moves to `old`
/// (a map), so one bulk flow does not pin every later record.
#[derive(Default)]
pub struct FlowTable {
    window: Vec<Option<FlowRecord>>,
    base: u32,
    old: BTreeMap<u32, FlowRecord>,
    next: u32,
    live: usize,
    /// Released records are handed out (None: a run that keeps them all).
    release: Option<Release>,
    /// Flows whose endpoints all closed, checked at each [`FlowTable::release`].
    closing: Vec<u32>,
    /// Records released and not yet taken, in release order.
    released: Vec<FlowRecord>,
}

/// When a closed flow's record is final.
#[derive(Clone, Copy)]
struct Release {
    /// With `[record] flows`, a flow's goodput is sampled until one interval after its
    /// end (`Sim::sample`).
    sample_interval: Option<Duration>,
}

impl FlowTable {
    pub fn add(&mut self, mut rec: FlowRecord) -> u32 {
        let id = self.next;
        self.next += 1;
        rec.flow = id;
        self.window.push(Some(rec));
        self.live += 1;
        id
    }
    #[inline]
    pub fn get_mut(&mut self, flow: u32) -> &mut FlowRecord {
        match flow.checked_sub(self.base) {
            Some(i) => self.window[i as usize]
                .as_mut()
                .expect("a flow's record lives while it has endpoints or packets"),
            None => self.old_mut(flow),
        }
    }
    /// [`Self::get_mut`] for a flow below the window: rare (a long flow outliving the
    /// ones after it), and out of line so that the B-tree walk's registers are not every
    /// caller's (issue 19: the TCP receiver's per-segment path saved and restored six).
    #[cold]
    #[inline(never)]
    fn old_mut(&mut self, flow: u32) -> &mut FlowRecord {
        self.old
            .get_mut(&flow)
            .expect("a flow's record lives while it has endpoints or packets")
    }
    #[inline]
    pub fn get(&self, flow: u32) -> &FlowRecord {
        match flow.checked_sub(self.base) {
            Some(i) => self.window[i as usize].as_ref(),
            None => self.old.get(&flow),
        }
        .expect("a flow's record lives while it has endpoints or packets")
    }
    /// Flows created so far (released or not).
    pub fn len(&self) -> usize {
        self.next as usize
    }
    pub fn is_empty(&self) -> bool {
        self.next == 0
    }
    /// Records held (not released), in id order.
    pub fn iter(&self) -> impl Iterator<Item = &FlowRecord> {
        self.old.values().chain(self.window.iter().flatten())
    }
    /// Records held (not released), in id order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut FlowRecord> {
        self.old
            .values_mut()
            .chain(self.window.iter_mut().flatten())
    }
    /// Records held now (the active flows, and every flow in a run that keeps them).
    pub fn held(&self) -> usize {
        self.live
    }

    /// Hands records out once final (a streamed run); `sample_interval` as for per-flow
    /// series (`[record] flows`).
    pub fn set_release(&mut self, sample_interval: Option<Duration>) {
        self.release = Some(Release { sample_interval });
    }

    /// An endpoint of `flow` was created.
    pub fn endpoint_opened(&mut self, flow: u32) {
        self.get_mut(flow).open_endpoints += 1;
    }

    /// An endpoint of `flow` closed.
    pub fn endpoint_closed(&mut self, flow: u32) {
        let rec = self.get_mut(flow);
        rec.open_endpoints -= 1;
        if rec.open_endpoints == 0 && self.release.is_some() {
            self.closing.push(flow);
        }
    }

    /// Releases the closed flows that nothing can change any more (at `now`, between
    /// events), then trims the window. Returns how many records are waiting in
    /// [`FlowTable::take_released`].
    pub fn release(&mut self, now: Time) -> usize {
        let Some(r) = self.release else { return 0 };
        let mut i = 0;
        while i < self.closing.len() {
            let flow = self.closing[i];
            let rec = self.get(flow);
            let sampled_out = match r.sample_interval {
                None => true,
                // Sampled while `end + interval >= now` (a flow without an end forever).
                Some(iv) => rec.end.is_some_and(|e| e + iv < now),
            };
            if rec.in_network == 0 && sampled_out {
                self.closing.swap_remove(i);
                let rec = match flow.checked_sub(self.base) {
                    Some(k) => self.window[k as usize].take(),
                    None => self.old.remove(&flow),
                };
                self.released.extend(rec);
                self.live -= 1;
            } else {
                i += 1;
            }
        }
        // Trim: drop released records from the window's front; when the window is much
        // longer than the flows it holds, move its live front records (long-lived flows)
        // to `old`.
        let mut front = 0;
        while front < self.window.len() {
            if self.window[front].is_some() && self.window.len() - front <= 2 * self.live + 4096 {
                break;
            }
            if let Some(rec) = self.window[front].take() {
                self.old.insert(rec.flow, rec);
            }
            front += 1;
        }
        if front > 0 {
            self.window.drain(..front);
            self.base += front as u32;
        }
        self.released.len()
    }

    /// Takes up to `n` released records (in release order).
    pub fn take_released(&mut self, n: usize) -> Vec<FlowRecord> {
        let n = n.min(self.released.len());
        let rest = self.released.split_off(n);
        std::mem::replace(&mut self.released, rest)
    }
}
