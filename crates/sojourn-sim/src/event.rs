//! The pending-event set: a binary min-heap ordered by (time, insertion sequence).
//!
//! Why a plain binary heap: the simulator keeps the pending set small by design — one
//! event per busy link (serialisation end), one per link with packets in flight (head
//! arrival; the rest wait in the link's own FIFO since propagation delay is constant), one
//! per endpoint deadline (lazily re-armed, never one per ACK) and one per application
//! timer. With a few hundred to a few thousand pending entries a binary heap of 24-byte
//! entries stays in L1/L2 cache; bench/ measures it (docs/engine.md gives the numbers and
//! the alternatives we tried on paper: calendar queues pay off only with 10^5+ entries).

use sojourn_core::Time;

/// What happens at an event. Ids are dense indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A link finished serialising its current packet.
    TxDone(u32),
    /// The head packet in flight on a link reaches the far end.
    Arrive(u32),
    /// The head of a link's reordered (extra-delayed) packets reaches the far end.
    ArriveLate(u32),
    /// A shaper/pacer asked to be woken (`Dequeue::NotBefore`).
    QdiscWake(u32),
    /// An endpoint's deadline (lazily cancelled: checked against the endpoint's state).
    EndpointTimer(u32),
    /// A workload generator's timer.
    AppTimer(u32),
    /// Time-series sampling tick.
    Sample,
    /// End of warm-up: reset the link statistics.
    WarmupEnd,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    time: u64,
    seq: u64,
    ev: Event,
}

impl Entry {
    #[inline]
    fn before(&self, o: &Entry) -> bool {
        self.time < o.time || (self.time == o.time && self.seq < o.seq)
    }
}

/// Min-heap of events; ties in time keep insertion order (determinism).
#[derive(Default)]
pub struct EventQueue {
    heap: Vec<Entry>,
    seq: u64,
}

impl EventQueue {
    pub fn new() -> EventQueue {
        EventQueue {
            heap: Vec::with_capacity(1024),
            seq: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    // Always inlined: called on every hop from a handful of hot sites, and the call's
    // prologue/epilogue cost as much as the typical one-level sift-up.
    #[inline(always)]
    pub fn push(&mut self, time: Time, ev: Event) {
        let e = Entry {
            time: time.0,
            seq: self.seq,
            ev,
        };
        self.seq += 1;
        self.heap.push(e);
        // sift up
        let h = &mut self.heap;
        let mut i = h.len() - 1;
        while i > 0 {
            let parent = (i - 1) / 2;
            if e.before(&h[parent]) {
                h[i] = h[parent];
                i = parent;
            } else {
                break;
            }
        }
        h[i] = e;
    }

    #[inline]
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.first().map(|e| Time(e.time))
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        let h = &mut self.heap;
        let n = h.len();
        if n == 0 {
            return None;
        }
        let top = h[0];
        let last = h[n - 1];
        h.pop();
        let n = n - 1;
        if n > 0 {
            // sift down `last` from the root
            let mut i = 0;
            loop {
                let l = 2 * i + 1;
                if l >= n {
                    break;
                }
                let r = l + 1;
                let c = if r < n && h[r].before(&h[l]) { r } else { l };
                if h[c].before(&last) {
                    h[i] = h[c];
                    i = c;
                } else {
                    break;
                }
            }
            h[i] = last;
        }
        Some((Time(top.time), top.ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_core::rng::Rng;

    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut q = EventQueue::new();
        let mut r = Rng::from_seed(3);
        let mut items = Vec::new();
        for i in 0..5000u32 {
            let t = r.below(200);
            q.push(Time(t), Event::AppTimer(i));
            items.push((t, i));
        }
        items.sort(); // by time then by i (= insertion order)
        for (t, i) in items {
            let (tt, ev) = q.pop().unwrap();
            assert_eq!((tt.0, ev), (t, Event::AppTimer(i)));
        }
        assert!(q.pop().is_none());
    }

    /// Interleaved pushes and pops (the engine's pattern) against a sorted reference.
    #[test]
    fn interleaved_push_pop_matches_a_sorted_reference() {
        let mut q = EventQueue::new();
        let mut r = Rng::from_seed(11);
        let mut reference = std::collections::BTreeSet::new();
        let mut now = 0u64;
        let mut seq = 0u64;
        for i in 0..20_000u32 {
            for _ in 0..r.below(3) {
                let t = now + r.below(50);
                q.push(Time(t), Event::AppTimer(i));
                reference.insert((t, seq, i));
                seq += 1;
            }
            if r.below(2) == 0 {
                let expect = reference.pop_first();
                let got = q.pop();
                assert_eq!(got, expect.map(|(t, _, i)| (Time(t), Event::AppTimer(i))));
                if let Some((t, _, _)) = expect {
                    now = t;
                }
            }
            assert_eq!(q.len(), reference.len());
        }
    }
}
