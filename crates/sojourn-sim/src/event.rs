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
//! The wheel splits time into slots of 2^14 ns (16.4 µs; 2^12 ns on fast networks, see
//! `slot_shift_for`). Entries due in the current slot
//! (or earlier) are in `near`, a binary heap holding only a few dozen entries; entries due
//! in the next `SLOTS - 1` slots (≈ 1.07 s) are appended to their slot's vector without any
//! ordering (O(1)); entries due later wait in `far`, a binary heap (their pushes are rarely
//! near its top, and each is moved once). When `near` runs dry, the next occupied slot
//! (found in a bitmap) is poured into it, and `far` entries that entered the wheel's span
//! move into their slots. Every entry in `near` is due before every entry in the wheel,
//! and those before every entry in `far`, so popping `near`'s minimum by (time, seq) yields
//! the same order, ties included, as the single heap did: outputs are byte-identical.
//! The engine never schedules before the event being handled, except through a caller bug;
//! such an entry lands in `near` and still pops first, as it would from one heap.
//!
//! Session 8 (issue 19, the sparse rows of the ns-3 comparison: a 10 Mbit/s dumbbell has
//! about one event per 7 slots, so almost every pop refills):
//! - a slot is a singly linked list threaded through one pool of nodes (`nodes`, LIFO
//!   free list), not a vector per slot: no slot ever allocates (the per-slot vectors grew
//!   on first use, ~5 % of the instructions of a 30-s dumbbell run), and the wheel's
//!   fixed memory is 64 KiB of list heads instead of 384 KiB of vector headers;
//! - a summary word per 64 bitmap words finds the next occupied word in at most one
//!   `trailing_zeros` per summary word (four) instead of scanning up to 256 words;
//! - the engine's loop pops with `pop_until(end)`, one call where `peek_time` + `pop`
//!   made two;
//! - when `near` is empty and the next occupied slot (in the rest of the current bitmap
//!   word) holds a single entry and admits no `far` entry (`far_admit`), that entry is
//!   the next event: `take_single`, inlined into the loop, takes it out directly instead
//!   of a call to `refill`, a push into `near` and a pop (−8 % of a sparse run's
//!   instructions).
//!
//! Session 9: `take_single` also looks beyond the current bitmap word (through the
//! summary, out of line), so a lone entry several words ahead is taken directly too
//! (−0.1 to −0.35 % of the instructions of the ns-3 rows' shapes: in those runs most
//! refills pour slots holding several entries).
//!
//! Session 10 (issue 19, many active flows): the wheel spans 2^16 slots (≈ 1.07 s), not
//! 2^14 (≈ 268 ms). With 10,000 flows living on retransmission timeouts (0.77 per sent
//! packet; backed-off RTOs of 400 ms, 800 ms, …) most timer entries lay beyond 268 ms, in
//! `far`: a heap of ~10^4 entries whose every push and pop sifted through ~14 levels, one
//! cold cache line each, and whose entries were all moved once more into the wheel. Filed
//! in a slot instead, such an entry costs one list push and one pour. Measured with
//! callgrind (bench/HISTORY.md "Session 10, many active flows"): −3.0 % instructions and
//! −0.6 % last-level misses in the 10,000-flow run, −0.5 % instructions on a 16-flow
//! dumbbell; the list heads grow from 64 to 256 KiB (cold heads of far slots are touched
//! only when a timer is filed there). 2^15 slots gave −1.4 %.
//!
//! Session 11: the slot width is chosen per run from the fastest link (`slot_shift_for`:
//! 2^12 ns when it sends a full-size frame within 2^14 ns), the span staying 2^30 ns. The
//! lengths of the wheel's arrays are then no longer constants: the hot paths index them
//! without bounds checks (`head_mut`, `occupied_mut`, `summary_mut`: the index is masked
//! by the slot count), and `near`'s heap compares (time, seq) as one u128. Callgrind,
//! run loop: seed 000 2 s 2,204.8 M -> 2,130.4 M instructions (-3.4 %), 16 flows at
//! 10 Mbit/s 134.75 M -> 133.11 M, 10,000 pairs 3 s 689.8 M -> 668.2 M.
//!
//! Session 11 (later): an entry pushed due before everything in `near` is kept out of
//! the heap (`hot`) and pops next without a sift. In seed 000 most pushes into the
//! current slot are such entries (each delivery batch's ACK timer, 1 ns ahead; the
//! ACK's serialisation end, 67 ns ahead): callgrind, run loop, seed 000 2 s
//! 2,082.8 M -> 1,988.7 M (-4.5 %), 16 flows at 10 Mbit/s 134.49 M -> 133.67 M.
//!
//! Tried and measured worse: pouring several following slots into `near` per refill
//! (fewer refills, but each pop then sifts a larger heap: +2 % instructions on the
//! dumbbell). The list order inside a slot does not matter: `near` is a heap.

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
    /// The pop order: (time, seq) as one 128-bit number, compared without a branch (a
    /// `cmp`/`sbb` pair) where the tuple's lexicographic comparison branched on the times.
    #[inline(always)]
    fn key(&self) -> u128 {
        ((self.time as u128) << 64) | self.seq as u128
    }

    #[inline(always)]
    fn before(&self, o: &Entry) -> bool {
        self.key() < o.key()
    }
}

/// log2 of the wheel's span in ns (2^30 ns ≈ 1.07 s: a few backed-off RTOs' distance),
/// whatever the slot width: a slot of 2^shift ns gives 2^(30 - shift) slots.
const SPAN_SHIFT: u32 = 30;
/// The slot widths a queue may use: 2^11 ns (2.0 µs; 2^19 slots, 2 MiB of list heads) to
/// 2^16 ns (65.5 µs; 2^14 slots).
pub const MIN_SLOT_SHIFT: u32 = 11;
pub const MAX_SLOT_SHIFT: u32 = 16;
/// log2 of the default slot width in ns (16.4 µs).
pub const DEFAULT_SLOT_SHIFT: u32 = 14;
/// log2 of the slot width of a fast network (4.1 µs).
pub const FAST_SLOT_SHIFT: u32 = 12;

/// The slot width (log2, ns) for a run whose fastest link sends `fastest_bps` bit/s
/// (`None`: no link has a known rate).
///
/// When that link serialises a full-size Ethernet frame (1514 B, 12,112 bits) within one
/// default slot (2^14 ns: at >= 739.3 Mbit/s), its events alone fill every default slot
/// and `near`, a binary heap, holds dozens of entries (seed 000 at 10 Gbit/s: ~35 per
/// 2^14-ns slot; each pop sifts through ~5 levels): 2^12-ns slots keep it to a few.
/// Slower networks keep 2^14 ns: a 100 Mbit/s link's frame takes 121 µs, slots hold
/// about one entry already, and narrower ones only lengthen the bitmap searches of the
/// sparse runs. Callgrind (bench/HISTORY.md "Session 11, event queue"), 2^12 against 2^14:
/// seed 000 2 s -3.0 % instructions, a 1 Gbit/s dumbbell (80 flows, 10 Gbit/s access)
/// -3.5 %, a 100 Mbit/s one (64 flows, 1 Gbit/s access) -2.2 %; a 10 Mbit/s one
/// (16 flows, 100 Mbit/s access) +3.7 %: it keeps 2^14. The pop order never depends on
/// the width.
pub fn slot_shift_for(fastest_bps: Option<u64>) -> u32 {
    const FRAME_BITS: u128 = 1514 * 8;
    match fastest_bps {
        // Frame time <= 2^14 ns  <=>  FRAME_BITS * 1e9 <= 2^14 * rate.
        Some(r) if FRAME_BITS * 1_000_000_000 <= (r as u128) << DEFAULT_SLOT_SHIFT => {
            FAST_SLOT_SHIFT
        }
        _ => DEFAULT_SLOT_SHIFT,
    }
}

/// Adds `e` to the binary min-heap `h` (sift-up through a hole).
#[inline(always)]
fn heap_push(h: &mut Vec<Entry>, e: Entry) {
    h.push(e);
    let h = h.as_mut_slice();
    let mut i = h.len() - 1;
    while i > 0 {
        let parent = (i - 1) / 2;
        let p = h[parent];
        if !e.before(&p) {
            break;
        }
        h[i] = p;
        i = parent;
    }
    h[i] = e;
}

/// Removes the minimum of the binary min-heap `h` (the former last entry sifts down
/// from the root through a hole).
#[inline(always)]
fn heap_pop(h: &mut Vec<Entry>) -> Option<Entry> {
    let last = h.pop()?;
    let h = h.as_mut_slice();
    let n = h.len();
    if n == 0 {
        return Some(last);
    }
    let top = h[0];
    let mut i = 0;
    loop {
        let l = 2 * i + 1;
        if l >= n {
            break;
        }
        let r = l + 1;
        let c = if r < n && h[r].before(&h[l]) { r } else { l };
        let ce = h[c];
        if !ce.before(&last) {
            break;
        }
        h[i] = ce;
        i = c;
    }
    h[i] = last;
    Some(top)
}

/// No node: the end of a slot's list, or of the free list.
const NIL: u32 = u32::MAX;

/// A wheel entry in the node pool, linked into its slot's list (or the free list).
#[derive(Clone, Copy, Debug)]
struct Node {
    e: Entry,
    next: u32,
}

/// The pending events; ties in time keep insertion order (determinism).
pub struct EventQueue {
    /// An entry due before every entry of `near` (so the next to pop), kept out of the
    /// heap: the engine's most frequent push is due before everything pending (an ACK
    /// sent at the end of the delivery batch, 1 ns later), and it pops next.
    hot: Option<Entry>,
    /// Binary min-heap of the entries due in slot `cur` or earlier.
    near: Vec<Entry>,
    /// Per slot (`slot & mask`) of `cur + 1 .. cur + SLOTS`, the first node of its
    /// unordered list in `nodes`, or `NIL` (`SLOTS = mask + 1 = 2^(30 - shift)`).
    heads: Box<[u32]>,
    /// Every wheel entry lives in this pool, its slot's list threaded through `next`;
    /// freed nodes form a LIFO free list from `free` (reused while still in cache).
    nodes: Vec<Node>,
    free: u32,
    /// Bit `i` set iff slot `i`'s list is not empty.
    occupied: Box<[u64]>,
    /// Bit `w` set iff `occupied[w]` is not zero: the next occupied slot is found with
    /// at most two `trailing_zeros` per summary word instead of a scan of the bitmap.
    summary: Box<[u64]>,
    in_wheel: usize,
    /// Binary min-heap of the entries due in slot `cur + SLOTS` or later.
    far: Vec<Entry>,
    /// The smallest `cur` at which `far`'s earliest entry enters the wheel's span
    /// (`u64::MAX` when `far` is empty): a refill moving `cur` there admits far entries.
    far_admit: u64,
    /// The slot `near` covers.
    cur: u64,
    seq: u64,
    /// log2 of a slot's width in ns (`slot_of(t) = t >> shift`).
    shift: u32,
    /// Slots in the wheel minus one (a power of two minus one).
    mask: u64,
}

impl Default for EventQueue {
    fn default() -> EventQueue {
        EventQueue::new()
    }
}

impl EventQueue {
    pub fn new() -> EventQueue {
        EventQueue::with_slot_shift(DEFAULT_SLOT_SHIFT)
    }

    /// A queue whose wheel slots are 2^`shift` ns wide (`MIN_SLOT_SHIFT..=MAX_SLOT_SHIFT`),
    /// spanning 2^30 ns. The width changes only the cost of the operations, never the pop
    /// order: see `slot_shift_for`.
    pub fn with_slot_shift(shift: u32) -> EventQueue {
        assert!(
            (MIN_SLOT_SHIFT..=MAX_SLOT_SHIFT).contains(&shift),
            "slot shift {shift}"
        );
        let slots = 1usize << (SPAN_SHIFT - shift);
        let words = slots / 64;
        EventQueue {
            hot: None,
            near: Vec::with_capacity(256),
            heads: vec![NIL; slots].into_boxed_slice(),
            nodes: Vec::with_capacity(1024),
            free: NIL,
            occupied: vec![0; words].into_boxed_slice(),
            summary: vec![0; words.div_ceil(64)].into_boxed_slice(),
            in_wheel: 0,
            far: Vec::new(),
            far_admit: u64::MAX,
            cur: 0,
            seq: 0,
            shift,
            mask: slots as u64 - 1,
        }
    }

    /// log2 of the slot width in ns.
    pub fn slot_shift(&self) -> u32 {
        self.shift
    }

    #[inline(always)]
    fn slot_of(&self, time: u64) -> u64 {
        time >> self.shift
    }

    /// The wheel index of absolute slot `s`, and the places of its list head, of its
    /// bitmap word and of that word's summary bit, without bounds checks (issue 19: with
    /// a slot width chosen per run the array lengths are no longer constants, and the
    /// three checks cost ~2 % of a sparse run's instructions).
    #[inline(always)]
    fn index(&self, s: u64) -> usize {
        (s & self.mask) as usize
    }

    #[inline(always)]
    fn head_mut(&mut self, i: usize) -> &mut u32 {
        debug_assert!(i < self.heads.len());
        // SAFETY: every caller's `i` is `s & mask` (`index`) or `w * 64 + b` with `b < 64`
        // and `w` a (checked) index of `occupied` (`take_single_beyond`), and
        // `heads.len() == mask + 1 == 64 * occupied.len()` (`with_slot_shift`): in both
        // cases `i <= mask < heads.len()`.
        unsafe { self.heads.get_unchecked_mut(i) }
    }

    #[inline(always)]
    fn occupied_mut(&mut self, i: usize) -> &mut u64 {
        debug_assert!(i / 64 < self.occupied.len());
        // SAFETY: `i <= mask` (see `head_mut`) and `occupied.len() == (mask + 1) / 64`.
        unsafe { self.occupied.get_unchecked_mut(i / 64) }
    }

    #[inline(always)]
    fn summary_mut(&mut self, i: usize) -> &mut u64 {
        debug_assert!(i / 4096 < self.summary.len());
        // SAFETY: `i <= mask` (see `head_mut`) and
        // `summary.len() == ceil((mask + 1) / 64 / 64)`.
        unsafe { self.summary.get_unchecked_mut(i / 4096) }
    }

    pub fn len(&self) -> usize {
        self.hot.is_some() as usize + self.near.len() + self.in_wheel + self.far.len()
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
        let s = self.slot_of(e.time);
        if s <= self.cur {
            match self.hot {
                Some(h) if e.before(&h) => {
                    heap_push(&mut self.near, h);
                    self.hot = Some(e);
                }
                Some(_) => heap_push(&mut self.near, e),
                None => {
                    if self.near.first().is_none_or(|m| e.before(m)) {
                        self.hot = Some(e);
                    } else {
                        heap_push(&mut self.near, e);
                    }
                }
            }
        } else if s - self.cur <= self.mask {
            self.file_in_slot(s, e);
        } else {
            heap_push(&mut self.far, e);
            self.set_far_admit();
        }
    }

    /// Recomputes `far_admit` after `far` changed.
    #[inline]
    fn set_far_admit(&mut self) {
        self.far_admit = self.far.first().map_or(u64::MAX, |f| {
            ((f.time >> self.shift) + 1).saturating_sub(self.mask + 1)
        });
    }

    #[inline(always)]
    fn file_in_slot(&mut self, s: u64, e: Entry) {
        let i = self.index(s);
        let next = *self.head_mut(i);
        let n = if self.free != NIL {
            let n = self.free;
            let node = &mut self.nodes[n as usize];
            self.free = node.next;
            *node = Node { e, next };
            n
        } else {
            self.nodes.push(Node { e, next });
            self.nodes.len() as u32 - 1
        };
        *self.head_mut(i) = n;
        *self.occupied_mut(i) |= 1 << (i % 64);
        *self.summary_mut(i) |= 1 << ((i / 64) % 64);
        self.in_wheel += 1;
    }

    /// Time of the next event (`&mut`: may pour the next slot into `near`).
    #[inline]
    pub fn peek_time(&mut self) -> Option<Time> {
        if let Some(h) = self.hot {
            return Some(Time(h.time));
        }
        if self.near.is_empty() && !self.refill() {
            return None;
        }
        Some(Time(self.near[0].time))
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        self.pop_until(Time(u64::MAX))
    }

    /// The next event if it is due at or before `end` (the engine's loop: one call where
    /// `peek_time` and `pop` made two).
    #[inline]
    pub fn pop_until(&mut self, end: Time) -> Option<(Time, Event)> {
        if let Some(h) = self.hot {
            if h.time > end.0 {
                return None;
            }
            self.hot = None;
            return Some((Time(h.time), h.ev));
        }
        if self.near.is_empty() {
            if let Some(e) = self.take_single() {
                if e.time > end.0 {
                    self.near.push(e);
                    return None;
                }
                return Some((Time(e.time), e.ev));
            }
            if !self.refill() {
                return None;
            }
        }
        if self.near[0].time > end.0 {
            return None;
        }
        heap_pop(&mut self.near).map(|e| (Time(e.time), e.ev))
    }

    /// `refill` + `heap_pop` for the common case of a sparse run, inlined into the
    /// engine's loop: `near` is empty (the caller checked) and the next occupied slot,
    /// in the rest of `cur + 1`'s bitmap word, holds a single entry and admits no far
    /// entry. That entry is the next event: it is taken out directly, `cur` moved to its
    /// slot as `refill` would. `None` (and nothing changed) in every other case.
    #[inline(always)]
    fn take_single(&mut self) -> Option<Entry> {
        let start = self.index(self.cur + 1);
        let w0 = start / 64;
        let bits = *self.occupied_mut(start) & (!0u64 << (start % 64));
        if bits == 0 {
            return self.take_single_beyond(start);
        }
        let i = w0 * 64 + bits.trailing_zeros() as usize;
        self.take_single_at(i, self.cur + 1 + (i - start) as u64)
    }

    /// `take_single` when the next occupied slot lies beyond `start`'s bitmap word (a
    /// sparse run: a 10 Mbit/s link's events are ~70 slots apart): found through the
    /// summary, as `refill` would.
    #[inline(never)]
    fn take_single_beyond(&mut self, start: usize) -> Option<Entry> {
        if self.in_wheel == 0 {
            return None;
        }
        let w = self.next_word_after(start / 64);
        let i = w * 64 + self.occupied[w].trailing_zeros() as usize;
        let offset = (i as u64).wrapping_sub(start as u64) & self.mask;
        self.take_single_at(i, self.cur + 1 + offset)
    }

    /// Takes the entry of occupied slot index `i` (absolute slot `s`, the first occupied
    /// after `cur`) if it is the slot's only one and `s` admits no far entry.
    #[inline(always)]
    fn take_single_at(&mut self, i: usize, s: u64) -> Option<Entry> {
        let n = *self.head_mut(i);
        let node = self.nodes[n as usize];
        if node.next != NIL || s >= self.far_admit {
            return None;
        }
        self.cur = s;
        *self.head_mut(i) = NIL;
        let w = *self.occupied_mut(i) & !(1 << (i % 64));
        *self.occupied_mut(i) = w;
        if w == 0 {
            *self.summary_mut(i) &= !(1 << ((i / 64) % 64));
        }
        self.nodes[n as usize].next = self.free;
        self.free = n;
        self.in_wheel -= 1;
        Some(node.e)
    }

    /// `near` is empty: advance `cur` to the next slot holding anything and pour it into
    /// `near`. Returns false when nothing is pending.
    #[inline(never)]
    fn refill(&mut self) -> bool {
        if self.in_wheel > 0 {
            let first = self.next_occupied();
            self.pour(first);
        } else if let Some(f) = self.far.first() {
            // Nothing in the wheel's span: jump to the earliest far entry.
            self.cur = self.slot_of(f.time);
        } else {
            return false;
        }
        // The span moved: far entries now inside it go to their slot (or to `near`).
        if self.cur >= self.far_admit {
            self.admit_far();
        }
        true
    }

    /// Makes `s` (occupied, the first occupied slot after `cur`) the current slot and
    /// pours its entries into `near` (a heap: the list's order does not matter),
    /// returning its nodes to the free list.
    #[inline(always)]
    fn pour(&mut self, s: u64) {
        self.cur = s;
        let i = (s & self.mask) as usize;
        let w = i / 64;
        self.occupied[w] &= !(1 << (i % 64));
        if self.occupied[w] == 0 {
            self.summary[w / 64] &= !(1 << (w % 64));
        }
        let mut n = std::mem::replace(&mut self.heads[i], NIL);
        while n != NIL {
            let node = &mut self.nodes[n as usize];
            let (e, next) = (node.e, node.next);
            node.next = self.free;
            self.free = n;
            self.in_wheel -= 1;
            heap_push(&mut self.near, e);
            n = next;
        }
    }

    /// Moves the far entries that entered the wheel's span into their slot (or `near`).
    #[inline(never)]
    fn admit_far(&mut self) {
        while let Some(f) = self.far.first() {
            let s = self.slot_of(f.time);
            if s - self.cur > self.mask {
                break;
            }
            let e = heap_pop(&mut self.far).expect("non-empty");
            if s == self.cur {
                heap_push(&mut self.near, e);
            } else {
                self.file_in_slot(s, e);
            }
        }
        self.set_far_admit();
    }

    /// The first occupied slot after `cur` (the wheel is not empty), as an absolute slot:
    /// the rest of `cur + 1`'s word, then the summary for the next non-empty word (after
    /// it, then from the start: the wheel is circular).
    #[inline(always)]
    fn next_occupied(&self) -> u64 {
        let start = ((self.cur + 1) & self.mask) as usize;
        let w0 = start / 64;
        let bits = self.occupied[w0] & (!0u64 << (start % 64));
        let i = if bits != 0 {
            w0 * 64 + bits.trailing_zeros() as usize
        } else {
            let w = self.next_word_after(w0);
            w * 64 + self.occupied[w].trailing_zeros() as usize
        };
        let offset = (i as u64).wrapping_sub(start as u64) & self.mask;
        self.cur + 1 + offset
    }

    /// The first non-empty bitmap word after `w0`, circularly (`w0` itself last: its low
    /// bits, before the start slot, are slots one turn ahead).
    #[inline(always)]
    fn next_word_after(&self, w0: usize) -> usize {
        let s0 = w0 / 64;
        let above = if w0 % 64 == 63 {
            0
        } else {
            self.summary[s0] & (!0u64 << (w0 % 64 + 1))
        };
        if above != 0 {
            return s0 * 64 + above.trailing_zeros() as usize;
        }
        let n = self.summary.len();
        for k in 1..=n {
            let s = (s0 + k) % n;
            let bits = self.summary[s];
            if bits != 0 {
                return s * 64 + bits.trailing_zeros() as usize;
            }
        }
        unreachable!("the wheel is not empty")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_core::rng::Rng;

    #[test]
    fn pops_in_time_then_insertion_order() {
        for shift in MIN_SLOT_SHIFT..=MAX_SLOT_SHIFT {
            pops_in_time_then_insertion_order_at(shift);
        }
    }

    fn pops_in_time_then_insertion_order_at(shift: u32) {
        let mut q = EventQueue::with_slot_shift(shift);
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
        for shift in MIN_SLOT_SHIFT..=MAX_SLOT_SHIFT {
            interleaved_push_pop_matches_a_sorted_reference_at(shift);
        }
    }

    fn interleaved_push_pop_matches_a_sorted_reference_at(shift: u32) {
        let mut q = EventQueue::with_slot_shift(shift);
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
        for shift in MIN_SLOT_SHIFT..=MAX_SLOT_SHIFT {
            wheel_regions_pop_like_a_sorted_reference_at(shift);
        }
    }

    fn wheel_regions_pop_like_a_sorted_reference_at(shift: u32) {
        let mut q = EventQueue::with_slot_shift(shift);
        let mut r = Rng::from_seed(19);
        let mut reference = std::collections::BTreeSet::new();
        let mut now = 0u64;
        let mut seq = 0u64;
        let mut popped = 0u32;
        for i in 0..200_000u32 {
            let pushes = if reference.is_empty() { 1 } else { r.below(3) };
            for _ in 0..pushes {
                let delay = match r.below(10) {
                    0 => 0,                          // now (a tie with the head)
                    1..=4 => r.below(20_000),        // within a slot or two
                    5..=7 => r.below(1_100_000_000), // the wheel's span
                    8 => r.below(60_000_000_000),    // far beyond it
                    _ => (r.below(4) + 1) << 30,     // slot boundaries of the span
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

    /// A sparse queue (one to three pending entries spread over the whole wheel, the
    /// shape of a slow link's run): every pop searches the bitmap across words and
    /// summary words, often around the wheel's end; slots are reused through the free
    /// list. Same order as a sorted reference.
    #[test]
    fn sparse_entries_across_the_bitmap_pop_like_a_sorted_reference() {
        for shift in MIN_SLOT_SHIFT..=MAX_SLOT_SHIFT {
            sparse_entries_across_the_bitmap_pop_like_a_sorted_reference_at(shift);
        }
    }

    fn sparse_entries_across_the_bitmap_pop_like_a_sorted_reference_at(shift: u32) {
        let mut q = EventQueue::with_slot_shift(shift);
        let mut r = Rng::from_seed(23);
        let mut reference = std::collections::BTreeSet::new();
        let mut now = 0u64;
        let mut seq = 0u64;
        let span = 1u64 << 30; // the wheel's span, SLOTS << SLOT_SHIFT
        for i in 0..50_000u32 {
            while reference.len() < 1 + r.below(3) as usize {
                let delay = match r.below(4) {
                    0 => r.below(1 << 14),       // this slot or the next
                    1 => r.below(1 << 20),       // within a few words
                    2 => r.below(span),          // anywhere in the span
                    _ => span - 1 - r.below(64), // the span's last slots
                };
                q.push(Time(now + delay), Event::AppTimer(i));
                reference.insert((now + delay, seq, i));
                seq += 1;
            }
            let (t, _, id) = reference.pop_first().expect("non-empty");
            assert_eq!(q.pop(), Some((Time(t), Event::AppTimer(id))));
            now = t;
            assert_eq!(q.len(), reference.len());
        }
        // Far more entries than nodes ever held at once were filed: nodes are reused.
        assert!(q.nodes.len() <= 8, "{} nodes", q.nodes.len());
    }

    /// Lone entries several bitmap words apart (a word covers 64 slots, ~1 ms) and across
    /// the wheel's end are taken directly (`take_single_beyond`) in time order, and an entry
    /// due after `end` stays pending; the slot nodes are reused (no refill ever pours them).
    #[test]
    fn lone_entries_words_apart_pop_in_time_order() {
        for shift in MIN_SLOT_SHIFT..=MAX_SLOT_SHIFT {
            lone_entries_words_apart_pop_in_time_order_at(shift);
        }
    }

    fn lone_entries_words_apart_pop_in_time_order_at(shift: u32) {
        let mut q = EventQueue::with_slot_shift(shift);
        // 3 ms, 1 ms, 800 ms and 1,040 ms ahead of 0 (with 2^14-ns slots: slots 183, 61,
        // 48,828 and 63,476).
        for (t, i) in [
            (3_000_000, 0),
            (1_000_000, 1),
            (800_000_000, 2),
            (1_040_000_000, 3),
        ] {
            q.push(Time(t), Event::AppTimer(i));
        }
        assert_eq!(q.pop(), Some((Time(1_000_000), Event::AppTimer(1))));
        assert_eq!(q.pop(), Some((Time(3_000_000), Event::AppTimer(0))));
        assert_eq!(q.pop(), Some((Time(800_000_000), Event::AppTimer(2))));
        // 400 ms after 800 ms (2^14-ns slot 73,242) wraps past the wheel's last slot (the
        // span is 2^30 ns = 1,073.7 ms whatever the width).
        q.push(Time(1_200_000_000), Event::AppTimer(4));
        assert_eq!(q.pop(), Some((Time(1_040_000_000), Event::AppTimer(3))));
        assert_eq!(q.pop_until(Time(1_199_999_999)), None);
        assert_eq!(q.pop(), Some((Time(1_200_000_000), Event::AppTimer(4))));
        assert_eq!(q.pop(), None);
        assert!(q.nodes.len() <= 5);
    }

    /// The slot width rule on hand-worked rates: a 1514-byte frame (12,112 bits) takes
    /// 1,211.2 ns at 10 Gbit/s, 12,112 ns at 1 Gbit/s and 16,384 ns (one 2^14-ns slot)
    /// at 12,112 * 10^9 / 16,384 = 739,257,812.5 bit/s: from 739,257,813 bit/s up a
    /// frame fits in a default slot and the narrow slots are chosen.
    #[test]
    fn slot_width_rule_on_hand_worked_rates() {
        assert_eq!(slot_shift_for(Some(10_000_000_000)), 12);
        assert_eq!(slot_shift_for(Some(1_000_000_000)), 12);
        assert_eq!(slot_shift_for(Some(739_257_813)), 12);
        assert_eq!(slot_shift_for(Some(739_257_812)), 14);
        assert_eq!(slot_shift_for(Some(100_000_000)), 14);
        assert_eq!(slot_shift_for(Some(10_000_000)), 14);
        assert_eq!(slot_shift_for(None), 14);
        assert_eq!(EventQueue::with_slot_shift(12).slot_shift(), 12);
    }

    /// A push due before everything pending is held out of the heap (`hot`) and pops
    /// next; a later one due before it displaces it into the heap; ties keep insertion
    /// order; `pop_until` leaves it pending when it is due after `end`.
    #[test]
    fn entry_due_first_pops_first_with_ties_in_insertion_order() {
        for shift in MIN_SLOT_SHIFT..=MAX_SLOT_SHIFT {
            let mut q = EventQueue::with_slot_shift(shift);
            q.push(Time(10), Event::TxDone(0));
            q.push(Time(5), Event::TxDone(1)); // before 10: held out
            q.push(Time(5), Event::TxDone(2)); // a tie, inserted later: after 1
            q.push(Time(3), Event::TxDone(3)); // before 5: 1 goes to the heap
            q.push(Time(7), Event::TxDone(4));
            assert_eq!(q.len(), 5);
            assert_eq!(q.peek_time(), Some(Time(3)));
            assert_eq!(q.pop_until(Time(2)), None);
            let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
            assert_eq!(
                order,
                [
                    (Time(3), Event::TxDone(3)),
                    (Time(5), Event::TxDone(1)),
                    (Time(5), Event::TxDone(2)),
                    (Time(7), Event::TxDone(4)),
                    (Time(10), Event::TxDone(0)),
                ]
            );
            assert!(q.is_empty());
        }
    }

    /// `pop_until` stops before the first entry after `end` and leaves it pending.
    #[test]
    fn pop_until_leaves_later_entries() {
        for shift in MIN_SLOT_SHIFT..=MAX_SLOT_SHIFT {
            pop_until_leaves_later_entries_at(shift);
        }
    }

    fn pop_until_leaves_later_entries_at(shift: u32) {
        let mut q = EventQueue::with_slot_shift(shift);
        q.push(Time(5_000_000), Event::Sample);
        q.push(Time(1_000), Event::WarmupEnd);
        q.push(Time(5_000_000), Event::TxDone(3));
        assert_eq!(
            q.pop_until(Time(4_999_999)),
            Some((Time(1_000), Event::WarmupEnd))
        );
        assert_eq!(q.pop_until(Time(4_999_999)), None);
        assert_eq!(q.len(), 2);
        assert_eq!(
            q.pop_until(Time(5_000_000)),
            Some((Time(5_000_000), Event::Sample))
        );
        assert_eq!(q.pop(), Some((Time(5_000_000), Event::TxDone(3))));
        assert_eq!(q.pop_until(Time(u64::MAX)), None);
    }
}
