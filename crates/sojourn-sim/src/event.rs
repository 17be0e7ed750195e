//! The pending-event set: a timing wheel in front of two small binary heaps, popping in
//! the canonical event order.
//!
//! **The order** (docs/engine.md, "Event order", a contract): events pop by time; events
//! due at the same nanosecond by class, in the order of [`Event`]'s variants (warm-up end,
//! sample, arrivals, late arrivals, transmission ends, qdisc wake-ups, endpoint timers,
//! application timers); events of one class at one instant by their entity's id under a
//! bijection drawn from the run's seed (`EventQueue::with_order_seed`; application
//! timers, i.e. workload generators, by their id in the file's order). The key is
//! (time, class, permuted id) as one 128-bit number. Nothing in it depends on when or in
//! which order the engine filed its events, so moving, adding or removing filings (an event
//! filed earlier, a no-op event between real ones: `EventQueue::relay_every`) leaves the run
//! unchanged. Two entries with equal keys are the same event for the same entity, and the
//! engine handles them identically, so their relative order does not matter. An event
//! filed for the instant being handled with a key below the current one pops next.
//!
//! **The wheel.** Time is split into slots of 2^14 ns (16.4 µs; 2^12 ns on fast networks,
//! see `slot_shift_for`). Entries due in the current slot (or earlier) are in `near`, a
//! binary heap holding a few dozen entries, with the one due before all of them held out
//! of it (`hot`: the engine's most frequent push, an ACK 1 ns ahead, pops next without a
//! sift); entries due in the next `SLOTS - 1` slots (2^30 ns ≈ 1.07 s in all) are threaded
//! unordered into their slot's linked list in one node pool (O(1), no allocation per slot);
//! entries due later wait in `far`, a binary heap, and move once into their slot when it
//! enters the span. When `near` runs dry, the next occupied slot (found through a bitmap
//! and a summary word per 64 bitmap words) is poured into it; a lone entry in that slot is
//! taken directly (`take_single`). Every entry in `near` is due before every entry in the
//! wheel, and those before every entry in `far`, so popping `near`'s minimum yields the
//! order a single heap over all entries would. Why a wheel, and what each piece saved, is
//! measured in bench/HISTORY.md (sessions 8–11 of issue 19): one heap of ~15,000 lazily
//! cancelled timers was ~40 % of a 10 Gb/s run's instructions.

use sojourn_core::Time;

/// What happens at an event. Ids are dense indices.
///
/// The variants are listed in their *class order*: of two events due at the same
/// nanosecond, the one of the earlier class runs first (docs/engine.md, "Event order").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// End of warm-up: reset the link statistics (before anything else at that instant).
    WarmupEnd,
    /// Time-series sampling tick: it sees the state left by every event before its time.
    Sample,
    /// The head packet in flight on a link reaches the far end.
    Arrive(u32),
    /// The head of a link's reordered (extra-delayed) packets reaches the far end.
    ArriveLate(u32),
    /// A link finished serialising its current packet: packets arriving at the same
    /// instant are already queued behind it.
    TxDone(u32),
    /// A shaper/pacer asked to be woken (`Dequeue::NotBefore`).
    QdiscWake(u32),
    /// An endpoint's deadline (lazily cancelled: checked against the endpoint's state),
    /// by the endpoint's identity (sim.rs's `endpoint_ident`: its flow's identity and its
    /// side, below 2^60), not by its storage slot, which is reused in event order.
    EndpointTimer(u64),
    /// A workload generator's timer.
    AppTimer(u32),
}

/// An event's class: its place in the tie order (the top four bits of [`Entry::tag`]).
mod class {
    pub const WARMUP_END: u64 = 0;
    pub const SAMPLE: u64 = 1;
    pub const ARRIVE: u64 = 2;
    pub const ARRIVE_LATE: u64 = 3;
    pub const TX_DONE: u64 = 4;
    /// The queue's own no-op (`EventQueue::relay_every`), filed between real classes.
    pub const RELAY: u64 = 5;
    pub const QDISC_WAKE: u64 = 6;
    pub const ENDPOINT_TIMER: u64 = 7;
    pub const APP_TIMER: u64 = 8;
}

/// The odd multiplier of the entity permutation (2^32 / golden ratio, rounded to odd) and
/// its inverse modulo 2^32: `K * K_INV = 1 (mod 2^32)`.
const PERM_K: u32 = 0x9e37_79b1;
const PERM_K_INV: u32 = inverse_mod_2_32(PERM_K);
/// The 60-bit entity ids (endpoint identities) and their permutation's odd multiplier
/// (2^64 / golden ratio, odd) with its inverse modulo 2^64, hence modulo 2^60.
pub const ENTITY_MASK: u64 = (1 << 60) - 1;
const PERM_K60: u64 = 0x9e37_79b9_7f4a_7c15;
const PERM_K60_INV: u64 = inverse_mod_2_64(PERM_K60);

/// The inverse of odd `k` modulo 2^64 (six Newton steps: 3 · 2^6 > 64 bits).
const fn inverse_mod_2_64(k: u64) -> u64 {
    let mut x = k;
    let mut i = 0;
    while i < 6 {
        x = x.wrapping_mul(2u64.wrapping_sub(k.wrapping_mul(x)));
        i += 1;
    }
    x
}

/// The inverse of odd `k` modulo 2^32 (Newton's iteration doubles the correct low bits:
/// `x = k` is right to 3 bits for odd `k`, five steps give 96 > 32).
const fn inverse_mod_2_32(k: u32) -> u32 {
    let mut x = k;
    let mut i = 0;
    while i < 5 {
        x = x.wrapping_mul(2u32.wrapping_sub(k.wrapping_mul(x)));
        i += 1;
    }
    x
}

/// A pending event: its time and its tie-break `tag` (class in the top four bits, the
/// permuted entity id in the low 60), 16 bytes. The event itself is decoded from the
/// tag when it pops.
#[derive(Clone, Copy, Debug)]
struct Entry {
    time: u64,
    tag: u64,
}

impl Entry {
    /// The pop order: (time, class, permuted entity) as one 128-bit number, compared
    /// without a branch (a `cmp`/`sbb` pair).
    #[inline(always)]
    fn key(&self) -> u128 {
        ((self.time as u128) << 64) | self.tag as u128
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

/// The pending events, popped in the canonical order (time, class, permuted entity):
/// never in the order they were filed (docs/engine.md, "Event order").
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
    /// The time of the last event popped.
    now: u64,
    /// The tag of the last event popped (0 before the first: before every event).
    now_tag: u64,
    /// The run's salts of the entity permutations (`EventQueue::with_order_seed`): of
    /// the 32-bit ids (links) and of the 60-bit endpoint identities.
    salt: u32,
    salt60: u64,
    /// Testing (`relay_every`): every n-th eligible push goes through a relay; 0 = never.
    relay_every: u32,
    relay_count: u32,
    relays_filed: u64,
    /// The entries waiting in relays, by relay index, and the free indices.
    relayed: Vec<Entry>,
    relay_free: Vec<u32>,
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
            now: 0,
            now_tag: 0,
            salt: 0,
            salt60: 0,
            relay_every: 0,
            relay_count: 0,
            relays_filed: 0,
            relayed: Vec::new(),
            relay_free: Vec::new(),
            shift,
            mask: slots as u64 - 1,
        }
    }

    /// The same queue with the tie order among entities of one class drawn from `seed`
    /// (a bijection of the 32-bit ids, so no two entities tie and low ids are not
    /// favoured; the same seed gives the same order).
    pub fn with_order_seed(mut self, seed: u64) -> EventQueue {
        let mut rng = sojourn_core::rng::Rng::stream(seed, "event-order", 0);
        self.salt = rng.next_u32();
        self.salt60 = rng.next_u64() & ENTITY_MASK;
        self
    }

    /// Testing the order contract: from now on, file every `n`-th push due at least 2 ns
    /// after the last popped event through a no-op relay entry due halfway, which files
    /// the real entry when it pops (`n = 0`: never). Relays are a class of their own
    /// between the real ones. Under the canonical order the real events pop in the same
    /// order either way, so a whole run's outputs do not change (tests/order_contract.rs);
    /// under an insertion-order tie-break they would.
    pub fn relay_every(&mut self, n: u32) {
        self.relay_every = n;
    }

    /// How many entries went through a relay.
    pub fn relays_filed(&self) -> u64 {
        self.relays_filed
    }

    /// The permuted id: `(id ^ salt) * K` then its high half folded into the low half,
    /// both bijections of u32.
    #[inline(always)]
    fn permute(&self, id: u32) -> u32 {
        let m = (id ^ self.salt).wrapping_mul(PERM_K);
        m ^ (m >> 16)
    }

    /// The inverse of `permute`.
    #[inline(always)]
    fn unpermute(&self, p: u32) -> u32 {
        let m = p ^ (p >> 16);
        m.wrapping_mul(PERM_K_INV) ^ self.salt
    }

    /// `permute` for a 60-bit endpoint identity: `(id ^ salt) * K mod 2^60`, then its
    /// high 30 bits folded into the low 30, both bijections of the 60-bit ids.
    #[inline(always)]
    fn permute60(&self, id: u64) -> u64 {
        debug_assert!(id <= ENTITY_MASK, "an endpoint identity above 2^60");
        let m = ((id ^ self.salt60).wrapping_mul(PERM_K60)) & ENTITY_MASK;
        m ^ (m >> 30)
    }

    /// The inverse of `permute60`.
    #[inline(always)]
    fn unpermute60(&self, p: u64) -> u64 {
        let m = p ^ (p >> 30);
        (m.wrapping_mul(PERM_K60_INV) & ENTITY_MASK) ^ self.salt60
    }

    #[inline(always)]
    fn tag_of(&self, ev: Event) -> u64 {
        let (c, id) = match ev {
            Event::WarmupEnd => (class::WARMUP_END, 0),
            Event::Sample => (class::SAMPLE, 0),
            Event::Arrive(l) => (class::ARRIVE, self.permute(l)),
            Event::ArriveLate(l) => (class::ARRIVE_LATE, self.permute(l)),
            Event::TxDone(l) => (class::TX_DONE, self.permute(l)),
            Event::QdiscWake(l) => (class::QDISC_WAKE, self.permute(l)),
            Event::EndpointTimer(e) => return (class::ENDPOINT_TIMER << 60) | self.permute60(e),
            // Generators in the file's order: the flows they open at one instant are
            // numbered in that order (flow i on pair i for `pairs = "all"`).
            Event::AppTimer(a) => (class::APP_TIMER, a),
        };
        (c << 60) | id as u64
    }

    /// Whether `ev`, due at the instant of the event popped last, comes before that event
    /// in the canonical order (its key is below the current one), i.e. it would have run
    /// already; false before the first pop. A transmission end the engine computes instead
    /// of filing (`sim/fast_link.rs`) has happened at this instant iff this holds.
    #[inline(always)]
    pub fn runs_before_current(&self, ev: Event) -> bool {
        self.tag_of(ev) < self.now_tag
    }

    /// The event of a real entry's tag; `None` for a relay.
    #[inline(always)]
    fn event_of(&self, tag: u64) -> Option<Event> {
        let low = tag as u32;
        let id = self.unpermute(low);
        Some(match tag >> 60 {
            class::WARMUP_END => Event::WarmupEnd,
            class::SAMPLE => Event::Sample,
            class::ARRIVE => Event::Arrive(id),
            class::ARRIVE_LATE => Event::ArriveLate(id),
            class::TX_DONE => Event::TxDone(id),
            class::QDISC_WAKE => Event::QdiscWake(id),
            class::ENDPOINT_TIMER => Event::EndpointTimer(self.unpermute60(tag & ENTITY_MASK)),
            class::APP_TIMER => Event::AppTimer(low),
            _ => return None,
        })
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

    /// Pending entries (relays and the entries they hold count once each).
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
            tag: self.tag_of(ev),
        };
        if self.relay_every != 0 && self.relay(e) {
            return;
        }
        self.insert(e);
    }

    /// `relay_every`'s filing: true when `e` went into a relay.
    #[inline(never)]
    fn relay(&mut self, e: Entry) -> bool {
        self.relay_count += 1;
        if !self.relay_count.is_multiple_of(self.relay_every) || e.time < self.now.saturating_add(2)
        {
            return false;
        }
        self.relays_filed += 1;
        let r = match self.relay_free.pop() {
            Some(r) => {
                self.relayed[r as usize] = e;
                r
            }
            None => {
                self.relayed.push(e);
                self.relayed.len() as u32 - 1
            }
        };
        self.insert(Entry {
            time: self.now + (e.time - self.now) / 2,
            tag: (class::RELAY << 60) | r as u64,
        });
        true
    }

    /// A relay popped: file the entry it held.
    #[inline(never)]
    fn unrelay(&mut self, tag: u64) {
        let r = tag as u32;
        let e = self.relayed[r as usize];
        self.relay_free.push(r);
        self.insert(e);
    }

    #[inline(always)]
    fn insert(&mut self, e: Entry) {
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
        loop {
            let e = self.pop_entry_until(end)?;
            self.now = e.time;
            match self.event_of(e.tag) {
                Some(ev) => {
                    self.now_tag = e.tag;
                    return Some((Time(e.time), ev));
                }
                None => self.unrelay(e.tag),
            }
        }
    }

    /// The next entry if it is due at or before `end`.
    #[inline(always)]
    fn pop_entry_until(&mut self, end: Time) -> Option<Entry> {
        if let Some(h) = self.hot {
            if h.time > end.0 {
                return None;
            }
            self.hot = None;
            return Some(h);
        }
        if self.near.is_empty() {
            if let Some(e) = self.take_single() {
                if e.time > end.0 {
                    self.near.push(e);
                    return None;
                }
                return Some(e);
            }
            if !self.refill() {
                return None;
            }
        }
        if self.near[0].time > end.0 {
            return None;
        }
        heap_pop(&mut self.near)
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
    use sojourn_core::Duration;

    /// Every kind of event, with its id, for the tests.
    fn event(class: u64, id: u32) -> Event {
        match class {
            0 => Event::WarmupEnd,
            1 => Event::Sample,
            2 => Event::Arrive(id),
            3 => Event::ArriveLate(id),
            4 => Event::TxDone(id),
            5 => Event::QdiscWake(id),
            6 => Event::EndpointTimer(id as u64),
            _ => Event::AppTimer(id),
        }
    }

    /// The documented class order (docs/engine.md, "Event order"), as a literal.
    fn rank(ev: Event) -> u32 {
        match ev {
            Event::WarmupEnd => 0,
            Event::Sample => 1,
            Event::Arrive(_) => 2,
            Event::ArriveLate(_) => 3,
            Event::TxDone(_) => 4,
            Event::QdiscWake(_) => 5,
            Event::EndpointTimer(_) => 6,
            Event::AppTimer(_) => 7,
        }
    }

    fn id(ev: Event) -> u32 {
        match ev {
            Event::WarmupEnd | Event::Sample => 0,
            Event::Arrive(i)
            | Event::ArriveLate(i)
            | Event::TxDone(i)
            | Event::QdiscWake(i)
            | Event::AppTimer(i) => i,
            Event::EndpointTimer(i) => i as u32,
        }
    }

    /// The contract: the same set of events filed in two different orders pops in the
    /// same order; by time, then class in the documented order, then entity in one fixed
    /// order of the ids (the same at every instant and for every class).
    /// At one instant, an event of an earlier class, or of the same class and an entity
    /// earlier in the permutation, counts as run before the event being handled; nothing
    /// does before the first pop.
    #[test]
    fn runs_before_current_follows_the_tie_order() {
        let mut q = EventQueue::new().with_order_seed(3);
        assert!(!q.runs_before_current(Event::WarmupEnd));
        let t = Time(7_000);
        for ev in [
            Event::QdiscWake(1),
            Event::TxDone(2),
            Event::Arrive(3),
            Event::Sample,
        ] {
            q.push(t, ev);
        }
        assert_eq!(q.pop(), Some((t, Event::Sample)));
        assert!(!q.runs_before_current(Event::TxDone(9)));
        assert_eq!(q.pop(), Some((t, Event::Arrive(3))));
        assert!(q.runs_before_current(Event::Sample));
        assert!(!q.runs_before_current(Event::TxDone(9)));
        assert_eq!(q.pop(), Some((t, Event::TxDone(2))));
        // Among transmission ends, the permuted ids decide, for every other link.
        for l in [0u32, 1, 3, 4, 1000, u32::MAX] {
            assert_eq!(
                q.runs_before_current(Event::TxDone(l)),
                q.permute(l) < q.permute(2),
                "link {l}"
            );
        }
        assert_eq!(q.pop(), Some((t, Event::QdiscWake(1))));
        assert!(q.runs_before_current(Event::TxDone(9)));
        assert!(!q.runs_before_current(Event::EndpointTimer(0)));
    }

    #[test]
    fn pop_order_is_canonical_whatever_the_filing_order() {
        for shift in MIN_SLOT_SHIFT..=MAX_SLOT_SHIFT {
            let mut r = Rng::from_seed(3);
            let mut set = std::collections::BTreeSet::new();
            while set.len() < 5000 {
                // Times within a few slots; 8 classes; 40 entities: many exact ties.
                let c = r.below(8);
                let i = if c < 2 { 0 } else { r.below(40) as u32 };
                set.insert((r.below(200_000), c, i));
            }
            let items: Vec<_> = set.into_iter().collect();
            let mut shuffled = items.clone();
            for k in (1..shuffled.len()).rev() {
                shuffled.swap(k, r.below(k as u64 + 1) as usize);
            }
            let mut orders = Vec::new();
            for filing in [&items, &shuffled] {
                let mut q = EventQueue::with_slot_shift(shift).with_order_seed(9);
                for &(t, c, i) in filing.iter() {
                    q.push(Time(t), event(c, i));
                }
                orders.push(std::iter::from_fn(|| q.pop()).collect::<Vec<_>>());
            }
            assert_eq!(orders[0].len(), 5000);
            assert_eq!(orders[0], orders[1]);
            // Time, then class; within one (time, class) the ids keep one fixed order.
            let mut before = std::collections::BTreeSet::new();
            for w in orders[0].windows(2) {
                let ((t0, e0), (t1, e1)) = (w[0], w[1]);
                assert!(t0 <= t1);
                if t0 == t1 {
                    assert!(rank(e0) <= rank(e1), "{e0:?} before {e1:?} at {t0:?}");
                    if rank(e0) == rank(e1) {
                        assert_ne!(id(e0), id(e1));
                        before.insert((id(e0), id(e1)));
                    }
                }
            }
            for &(a, b) in &before {
                assert!(!before.contains(&(b, a)), "ids {a} and {b} swap places");
            }
        }
    }

    /// The tie order among entities is a permutation drawn from the seed: every one of 64
    /// entities due at one instant pops exactly once, the id order is not the natural one
    /// (low ids are not favoured), and another seed gives another order.
    #[test]
    fn entity_order_is_a_seeded_permutation() {
        let order_for = |seed: u64| {
            let mut q = EventQueue::with_slot_shift(DEFAULT_SLOT_SHIFT).with_order_seed(seed);
            for i in 0..64 {
                q.push(Time(1_000), Event::EndpointTimer(i as u64));
            }
            std::iter::from_fn(|| q.pop())
                .map(|(_, e)| id(e))
                .collect::<Vec<u32>>()
        };
        let (a, b) = (order_for(1), order_for(2));
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..64).collect::<Vec<u32>>());
        assert_ne!(a, sorted);
        assert_ne!(a, b);
        assert_eq!(a, order_for(1));
        // The permutation inverts exactly (ids far apart, the largest one included).
        let q = EventQueue::with_slot_shift(DEFAULT_SLOT_SHIFT).with_order_seed(5);
        for i in [0, 1, 2, 65_535, 65_536, 1 << 31, u32::MAX] {
            assert_eq!(q.unpermute(q.permute(i)), i);
        }
        for i in [0u64, 1, 2, 1 << 31, 1 << 35, (1 << 59) + 7, (1 << 60) - 1] {
            let p = q.permute60(i);
            assert!(p < 1 << 60);
            assert_eq!(q.unpermute60(p), i);
        }
    }

    /// Filing events through relays (a no-op class between the real ones, due halfway)
    /// changes neither which events pop nor their order.
    #[test]
    fn relays_leave_the_pop_order_unchanged() {
        for shift in [MIN_SLOT_SHIFT, DEFAULT_SLOT_SHIFT, MAX_SLOT_SHIFT] {
            let mut orders = Vec::new();
            for relay in [0, 1, 3] {
                let mut q = EventQueue::with_slot_shift(shift).with_order_seed(4);
                q.relay_every(relay);
                let mut r = Rng::from_seed(17);
                let mut popped = Vec::new();
                // The engine's pattern: each popped event files 0-2 more, some at the
                // same instant, some far ahead.
                for i in 0..8 {
                    q.push(Time(r.below(1_000)), event(2 + r.below(6), i));
                }
                while let Some((t, e)) = q.pop() {
                    popped.push((t, e));
                    if popped.len() >= 20_000 {
                        break;
                    }
                    // Two when few are pending (the run must not die out), else 0 or 1.
                    let files = if q.len() < 20 { 2 } else { r.below(2) };
                    for _ in 0..files {
                        let d = match r.below(4) {
                            0 => 0,
                            1 => r.below(100),
                            2 => r.below(100_000),
                            _ => r.below(2_000_000_000),
                        };
                        q.push(t + Duration(d), event(2 + r.below(6), r.below(16) as u32));
                    }
                }
                orders.push(popped);
            }
            assert_eq!(orders[0].len(), 20_000);
            assert_eq!(orders[0], orders[1]);
            assert_eq!(orders[0], orders[2]);
        }
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
        let mut n = 0u32; // every entry its own id: no two are the same event
        for _ in 0..20_000u32 {
            for _ in 0..r.below(3) {
                let t = now + r.below(50);
                n += 1;
                q.push(Time(t), Event::AppTimer(n));
                reference.insert((t, q.tag_of(Event::AppTimer(n)), n));
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
    /// (time, tie tag).
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
        let mut popped = 0u32;
        let mut n = 0u32; // every entry its own id: no two are the same event
        for _ in 0..200_000u32 {
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
                n += 1;
                q.push(Time(t), Event::AppTimer(n));
                reference.insert((t, q.tag_of(Event::AppTimer(n)), n));
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
        let span = 1u64 << 30; // the wheel's span, SLOTS << SLOT_SHIFT
        let mut n = 0u32; // every entry its own id: no two are the same event
        for _ in 0..50_000u32 {
            while reference.len() < 1 + r.below(3) as usize {
                let delay = match r.below(4) {
                    0 => r.below(1 << 14),       // this slot or the next
                    1 => r.below(1 << 20),       // within a few words
                    2 => r.below(span),          // anywhere in the span
                    _ => span - 1 - r.below(64), // the span's last slots
                };
                n += 1;
                q.push(Time(now + delay), Event::AppTimer(n));
                reference.insert((now + delay, q.tag_of(Event::AppTimer(n)), n));
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
    /// next; a later one due before it displaces it into the heap; a tie filed later
    /// but of an earlier class pops first; `pop_until` leaves it pending when it is due
    /// after `end`.
    #[test]
    fn entry_due_first_pops_first_with_ties_in_class_order() {
        for shift in MIN_SLOT_SHIFT..=MAX_SLOT_SHIFT {
            let mut q = EventQueue::with_slot_shift(shift);
            q.push(Time(10), Event::TxDone(0));
            q.push(Time(5), Event::AppTimer(1)); // before 10: held out
            q.push(Time(5), Event::TxDone(2)); // a tie, filed later: an earlier class
            q.push(Time(3), Event::TxDone(3)); // before 5: 2 goes to the heap
            q.push(Time(7), Event::TxDone(4));
            assert_eq!(q.len(), 5);
            assert_eq!(q.peek_time(), Some(Time(3)));
            assert_eq!(q.pop_until(Time(2)), None);
            let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
            assert_eq!(
                order,
                [
                    (Time(3), Event::TxDone(3)),
                    (Time(5), Event::TxDone(2)),
                    (Time(5), Event::AppTimer(1)),
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
