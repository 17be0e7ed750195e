//! The pending-event set: a timing wheel in front of two small binary heaps, popping in
//! (time, insertion sequence) order exactly as one min-heap over all entries would.
//!
//! Why not one binary heap (what this was until issue 19): the pending set is not small.
//! Endpoint deadlines are re-armed lazily — an earlier deadline pushes a new entry and the
//! superseded one stays until its time (an RTO ~200 ms ahead) — so seed 000's 10 Gb/s run
//! held ~15,000 pending entries while almost every push is for the next microseconds
//! (serialisation ends, arrivals). Each such push sifted up ~11 levels of that heap and each
//! pop sifted down ~14: callgrind put the heap at ~40 % of the run's instructions.
//!
//! The wheel splits time into slots of 2^14 ns (16.4 µs). Entries due in the current slot
//! (or earlier) are in `near`, a binary heap holding only a few dozen entries; entries due
//! in the next `SLOTS - 1` slots (≈ 268 ms) are appended to their slot's vector without any
//! ordering (O(1)); entries due later wait in `far`, a binary heap (their pushes are rarely
//! near its top, and each is moved once). When `near` runs dry, the next occupied slot
//! (found in a bitmap) is poured into it, and `far` entries that entered the wheel's span
//! move into their slots. Every entry in `near` is due before every entry in the wheel,
//! and those before every entry in `far`, so popping `near`'s minimum by (time, seq) yields
//! the same order, ties included, as the single heap did: outputs are byte-identical.
//! The engine never schedules before the event being handled, except through a caller bug;
//! such an entry lands in `near` and still pops first, as it would from one heap.

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
    #[inline(always)]
    fn before(&self, o: &Entry) -> bool {
        (self.time, self.seq) < (o.time, o.seq)
    }
}

/// log2 of a slot's width in ns (16.4 µs: a few dozen events of a 10 Gb/s link).
const SLOT_SHIFT: u32 = 14;
/// Slots in the wheel (span 2^28 ns ≈ 268 ms: an RTO's distance).
const SLOTS: u64 = 1 << 14;
const WORDS: usize = (SLOTS / 64) as usize;

#[inline(always)]
fn slot_of(time: u64) -> u64 {
    time >> SLOT_SHIFT
}

#[inline(always)]
fn heap_push(h: &mut Vec<Entry>, e: Entry) {
    h.push(e);
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

#[inline(always)]
fn heap_pop(h: &mut Vec<Entry>) -> Option<Entry> {
    let last = h.pop()?;
    let n = h.len();
    if n == 0 {
        return Some(last);
    }
    let top = h[0];
    // sift `last` down from the root
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
    Some(top)
}

/// The pending events; ties in time keep insertion order (determinism).
pub struct EventQueue {
    /// Binary min-heap of the entries due in slot `cur` or earlier.
    near: Vec<Entry>,
    /// Entries due in slots `cur + 1 .. cur + SLOTS`, at index `slot & (SLOTS - 1)`, unordered.
    wheel: Vec<Vec<Entry>>,
    /// Bit `i` set iff `wheel[i]` is not empty.
    occupied: Vec<u64>,
    in_wheel: usize,
    /// Binary min-heap of the entries due in slot `cur + SLOTS` or later.
    far: Vec<Entry>,
    /// The slot `near` covers.
    cur: u64,
    seq: u64,
}

impl Default for EventQueue {
    fn default() -> EventQueue {
        EventQueue::new()
    }
}

impl EventQueue {
    pub fn new() -> EventQueue {
        EventQueue {
            near: Vec::with_capacity(256),
            wheel: (0..SLOTS).map(|_| Vec::new()).collect(),
            occupied: vec![0; WORDS],
            in_wheel: 0,
            far: Vec::new(),
            cur: 0,
            seq: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.near.len() + self.in_wheel + self.far.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    // Always inlined: called on every hop from a handful of hot sites.
    #[inline(always)]
    pub fn push(&mut self, time: Time, ev: Event) {
        let e = Entry {
            time: time.0,
            seq: self.seq,
            ev,
        };
        self.seq += 1;
        let s = slot_of(e.time);
        if s <= self.cur {
            heap_push(&mut self.near, e);
        } else if s - self.cur < SLOTS {
            self.file_in_slot(s, e);
        } else {
            heap_push(&mut self.far, e);
        }
    }

    #[inline(always)]
    fn file_in_slot(&mut self, s: u64, e: Entry) {
        let i = (s & (SLOTS - 1)) as usize;
        self.occupied[i / 64] |= 1 << (i % 64);
        self.wheel[i].push(e);
        self.in_wheel += 1;
    }

    /// Time of the next event (`&mut`: may pour the next slot into `near`).
    #[inline]
    pub fn peek_time(&mut self) -> Option<Time> {
        if self.near.is_empty() && !self.refill() {
            return None;
        }
        Some(Time(self.near[0].time))
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        if self.near.is_empty() && !self.refill() {
            return None;
        }
        heap_pop(&mut self.near).map(|e| (Time(e.time), e.ev))
    }

    /// `near` is empty: advance `cur` to the next slot holding anything and pour it into
    /// `near`. Returns false when nothing is pending.
    #[inline(never)]
    fn refill(&mut self) -> bool {
        if self.in_wheel > 0 {
            self.cur = self.next_occupied();
            let i = (self.cur & (SLOTS - 1)) as usize;
            self.occupied[i / 64] &= !(1 << (i % 64));
            // Poured in place and cleared (keeps its capacity): no take/drain of the
            // vector, which cost more than the pour on runs with ~1 entry per slot.
            let slot = &mut self.wheel[i];
            self.in_wheel -= slot.len();
            for &e in slot.iter() {
                heap_push(&mut self.near, e);
            }
            slot.clear();
        } else if let Some(f) = self.far.first() {
            // Nothing in the wheel's span: jump to the earliest far entry.
            self.cur = slot_of(f.time);
        } else {
            return false;
        }
        // The span moved: far entries now inside it go to their slot (or to `near`).
        while let Some(f) = self.far.first() {
            let s = slot_of(f.time);
            if s - self.cur >= SLOTS {
                break;
            }
            let e = heap_pop(&mut self.far).expect("non-empty");
            if s == self.cur {
                heap_push(&mut self.near, e);
            } else {
                self.file_in_slot(s, e);
            }
        }
        true
    }

    /// The first occupied slot after `cur` (the wheel is not empty), as an absolute slot.
    fn next_occupied(&self) -> u64 {
        let start = ((self.cur + 1) & (SLOTS - 1)) as usize;
        let mut w = start / 64;
        let mut bits = self.occupied[w] & (!0u64 << (start % 64));
        loop {
            if bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                let offset = (i as u64).wrapping_sub(start as u64) & (SLOTS - 1);
                return self.cur + 1 + offset;
            }
            w = (w + 1) % WORDS;
            bits = self.occupied[w];
        }
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

    /// The wheel's three regions (`near`, slots, `far`) and the moves between them, with
    /// delays from nanoseconds to minutes, exact ties, jumps over an empty wheel and
    /// pushes due before the last popped event: the pop order is that of a sorted set of
    /// (time, insertion number).
    #[test]
    fn wheel_regions_pop_like_a_sorted_reference() {
        let mut q = EventQueue::new();
        let mut r = Rng::from_seed(19);
        let mut reference = std::collections::BTreeSet::new();
        let mut now = 0u64;
        let mut seq = 0u64;
        let mut popped = 0u32;
        for i in 0..200_000u32 {
            let pushes = if reference.is_empty() { 1 } else { r.below(3) };
            for _ in 0..pushes {
                let delay = match r.below(10) {
                    0 => 0,                        // now (a tie with the head)
                    1..=4 => r.below(20_000),      // within a slot or two
                    5..=7 => r.below(300_000_000), // the wheel's span
                    8 => r.below(60_000_000_000),  // far beyond it
                    _ => (r.below(4) + 1) << 28,   // slot boundaries of the span
                };
                // A few are due before the event being handled (a caller bug the queue
                // still orders correctly).
                let t = if r.below(500) == 0 {
                    now.saturating_sub(r.below(1000))
                } else {
                    now + delay
                };
                q.push(Time(t), Event::AppTimer(i));
                reference.insert((t, seq, i));
                seq += 1;
            }
            if r.below(2) == 0 {
                let expect = reference.pop_first();
                assert_eq!(q.peek_time(), expect.map(|(t, _, _)| Time(t)));
                let got = q.pop();
                assert_eq!(got, expect.map(|(t, _, i)| (Time(t), Event::AppTimer(i))));
                if let Some((t, _, _)) = expect {
                    now = t;
                    popped += 1;
                }
            }
            assert_eq!(q.len(), reference.len());
        }
        while let Some((t, _, i)) = reference.pop_first() {
            assert_eq!(q.pop(), Some((Time(t), Event::AppTimer(i))));
        }
        assert_eq!(q.pop(), None);
        assert!(q.is_empty());
        assert!(popped > 90_000);
    }
}
