//! Packets propagating on links: one pool shared by every link, each link's in-flight FIFO
//! a list through it.
//!
//! Why (issue 19, many active flows): with a `VecDeque` per link, a packet starting its
//! serialisation was copied into that link's own buffer, last written when that link last
//! carried a packet — with 10,000 active flows, about a second earlier, so every line of
//! the ~200-byte copy was a cache miss (12 % of the run's last-level write misses). Here a
//! packet goes into the slot most recently freed by any link (a LIFO free list): a packet
//! that just arrived somewhere left it, so it is in cache. The pool holds as many slots
//! as packets were ever propagating at once; a link holds three numbers.
//!
//! Arrival times on one link never decrease (see `link.rs`), so each list is a FIFO and
//! only its head's arrival is a pending event, as before.

use sojourn_core::device::BurstCursor;
use sojourn_core::packet::{SegmentBase, SegmentCut};
use sojourn_core::{Duration, Packet, Time};

/// No slot (end of a list).
const NIL: u32 = u32::MAX;

/// One propagating packet. `align(64)`: a slot covers whole cache lines only.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Slot {
    pkt: Packet,
    /// Arrival time at the far end.
    at: Time,
    /// The next packet on the same link (`NIL` for the last).
    next: u32,
    /// Wire packets this slot holds: 1, or a run's segments not arrived yet (see
    /// [`FlightPool::push_run`]); `pkt` is the first of them.
    segs: u32,
    /// The arrival time of the next packet on the same link, written when that packet is
    /// linked behind this one (valid while `next != NIL`). The arrival that takes this
    /// packet off its list files the next one's arrival from here, a line it reads anyway,
    /// instead of from the next packet's slot, last written half a path earlier: with
    /// 10,000 active flows that read was a cache miss on a third of the arrival path's
    /// samples (`perf annotate`, issue 35 §2).
    next_at: Time,
}

/// The rest of a run ([`FlightPool::push_run`]): what cuts its next segments.
#[derive(Clone, Copy, Default)]
struct Run {
    /// What the cuts read of the GSO buffer (not the whole ~200-byte buffer).
    base: SegmentBase,
    cursor: BurstCursor,
    /// The next segment's cut and arrival time, known since the current one became
    /// current (its `Arrive` event is pushed before the current segment moves on).
    pending: SegmentCut,
    pending_at: Time,
    delay: Duration,
    /// The engine's uid of segment 1 (segment `i > 0` gets `first_uid + i - 1`).
    first_uid: u64,
}

/// A link's in-flight FIFO: a list of pool slots, in arrival order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlightList {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for FlightList {
    fn default() -> FlightList {
        FlightList {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

impl FlightList {
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The shared slots of every link's [`FlightList`].
#[derive(Default)]
pub struct FlightPool {
    slots: Vec<Slot>,
    /// Free slots, the most recently freed last (reused first: still in cache).
    free: Vec<u32>,
    /// Per slot, its run's state while it holds one (indexed like `slots`; grown on the
    /// first run in a slot, read only for slots with `segs > 1`).
    runs: Vec<Run>,
    /// Wire packets held beyond one per used slot (the runs' later segments).
    extra: usize,
}

impl FlightPool {
    /// Appends a copy of `pkt`, arriving at `at`, to `list`; returns the copy (a GSO
    /// segment is cut in place there).
    ///
    /// A reused slot is written field by field: the packet is copied once, straight from
    /// `pkt` into the slot. (Building a `Slot` value first and assigning it copied the
    /// ~200 bytes twice, a local in between: two `memcpy` calls per packet, 4.6 % of seed
    /// 000's instructions; issue 19, session 10.)
    #[inline(always)]
    pub fn push_back(&mut self, list: &mut FlightList, at: Time, pkt: &Packet) -> &mut Packet {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    pkt: *pkt,
                    at,
                    next: NIL,
                    segs: 1,
                    next_at: Time::ZERO,
                });
                self.slots.len() as u32 - 1
            }
        };
        // Linked first, so the slot is looked up once, for writing and for the answer.
        self.append(i, list, at);
        let s = &mut self.slots[i as usize];
        s.pkt = *pkt;
        s.at = at;
        s.next = NIL;
        s.segs = 1;
        &mut s.pkt
    }

    /// Appends the segments of a GSO buffer propagating on one link as a single entry of
    /// `list` (a *run*): `buffer` is copied once, cut to its first segment (`first`,
    /// arriving at `at`), and each later segment is cut in place, from the buffer kept
    /// aside, when the one before it has arrived and moved on ([`FlightPool::run_front`],
    /// [`FlightPool::advance_run`]). `cursor` gives the later segments' cuts and
    /// serialisation ends, `delay` the medium's constant propagation delay (arrivals are
    /// `Propagation::arrival_time` without a schedule: never before the previous one),
    /// `first_uid` the engine's uid of segment 1 (then 2, 3…). The list counts every
    /// segment (`len`), as if each had its own slot.
    ///
    /// Why (issue 19, session 11): seed 000's sender hands its NIC 64-KiB buffers of ~32
    /// segments; copying the buffer into a slot per segment at the start (a 208-byte
    /// copy), linking and unlinking each, cost ~44 instructions per segment more than
    /// cutting each in place when it arrives (seed 000 2 s: −2.45 % instructions).
    #[allow(clippy::too_many_arguments)]
    pub fn push_run(
        &mut self,
        list: &mut FlightList,
        at: Time,
        buffer: &Packet,
        first: &SegmentCut,
        mut cursor: BurstCursor,
        delay: Duration,
        first_uid: u64,
    ) {
        let pkt = self.push_back(list, at, buffer);
        buffer.apply_cut(first, pkt);
        let Some((pending, end)) = cursor.next_segment() else {
            return; // one segment: an ordinary slot
        };
        let n = cursor.remaining() + 2;
        let i = list.tail as usize;
        self.slots[i].segs = n;
        list.len += n - 1;
        self.extra += (n - 1) as usize;
        if self.runs.len() <= i {
            self.runs.resize(self.slots.len(), Run::default());
        }
        let run = &mut self.runs[i];
        run.base = buffer.segment_base();
        run.cursor = cursor;
        run.pending = pending;
        run.pending_at = (end + delay).max(at);
        run.delay = delay;
        run.first_uid = first_uid;
    }

    /// When the head of `list` is a run with more than one segment left: takes its
    /// current segment out of the list (one packet fewer) and returns the slot, whose
    /// packet is that segment (read it in place, then [`FlightPool::advance_run`]), and
    /// the next segment's arrival time. `None` (and nothing changes) otherwise.
    #[inline(always)]
    pub fn run_front(&mut self, list: &mut FlightList) -> Option<(u32, Time)> {
        let h = list.head;
        if h == NIL || self.slots[h as usize].segs <= 1 {
            return None;
        }
        list.len -= 1;
        self.extra -= 1;
        Some((h, self.runs[h as usize].pending_at))
    }

    /// Cuts run slot `i`'s next segment in place (its current one has arrived and been
    /// handled, [`FlightPool::run_front`]); the slot stays at the head of its list. A run
    /// down to its last segment is an ordinary slot. Inlined into the arrival (seed 000
    /// 2 s: −36 M instructions against a call on main 55b48cc, once the event queue's own
    /// code there shrank; before that the inlined copy made that code spill, +9 M).
    #[inline(always)]
    pub fn advance_run(&mut self, i: u32) {
        let s = &mut self.slots[i as usize];
        let run = &mut self.runs[i as usize];
        let cut = run.pending;
        run.base.cut_in_place(&cut, &mut s.pkt);
        s.pkt.uid = run.first_uid + (cut.index - 1) as u64;
        let at = run.pending_at;
        s.at = at;
        s.segs -= 1;
        if s.segs > 1 {
            let (next, end) = run.cursor.next_segment().expect("segments left");
            run.pending = next;
            run.pending_at = (end + run.delay).max(at);
        }
    }

    /// Appends a copy of slot `i`'s packet (a run's current segment, which stays in its
    /// slot) to `list`, arriving at `at`.
    #[inline]
    pub fn push_copy(&mut self, i: u32, list: &mut FlightList, at: Time) {
        let pkt = self.slots[i as usize].pkt;
        self.push_back(list, at, &pkt);
    }

    /// The first packet of `list` and its arrival time.
    #[inline]
    pub fn front(&self, list: &FlightList) -> Option<(Time, &Packet)> {
        (list.head != NIL).then(|| {
            let s = &self.slots[list.head as usize];
            (s.at, &s.pkt)
        })
    }

    /// The arrival time of the second packet of `list`.
    #[inline]
    pub fn second_at(&self, list: &FlightList) -> Option<Time> {
        let h = self.slots.get(list.head as usize)?;
        (h.next != NIL).then(|| self.slots[h.next as usize].at)
    }

    /// The last packet of `list` and its arrival time.
    #[inline]
    pub fn back(&self, list: &FlightList) -> Option<(Time, &Packet)> {
        (list.tail != NIL).then(|| {
            let s = &self.slots[list.tail as usize];
            (s.at, &s.pkt)
        })
    }

    /// Removes the first packet of `list` (its slot is reused next).
    #[inline(always)]
    pub fn pop_front(&mut self, list: &mut FlightList) -> Option<(Time, Packet)> {
        let i = self.unlink_front(list)?;
        let s = &self.slots[i as usize];
        let out = (s.at, s.pkt);
        self.free(i);
        Some(out)
    }

    /// Takes the first packet of `list` out of it without freeing its slot: the caller
    /// works on the packet in place ([`FlightPool::packet`]) and then either hands the
    /// slot to another list ([`FlightPool::relink_back`]) or frees it
    /// ([`FlightPool::free`]). Returns the slot.
    #[inline(always)]
    pub fn unlink_front(&mut self, list: &mut FlightList) -> Option<u32> {
        if list.head == NIL {
            return None;
        }
        let i = list.head;
        list.head = self.slots[i as usize].next;
        if list.head == NIL {
            list.tail = NIL;
        }
        list.len -= 1;
        Some(i)
    }

    /// The arrival time of the packet that followed slot `i` on its list when `i` was
    /// taken off it ([`FlightPool::unlink_front`]; there must have been one): the new
    /// head's, read from `i`'s own slot (see `Slot::next_at`).
    #[inline(always)]
    pub fn successor_at(&self, i: u32) -> Time {
        let s = &self.slots[i as usize];
        debug_assert!(s.next != NIL, "slot {i} had no successor");
        s.next_at
    }

    /// Hints the CPU to fetch the slot at the head of `list` (the next arrival on its link,
    /// whose slot was written half a path ago): the arrival path's first read of a packet
    /// was its costliest stall with many subscribers (bench/README.md, "ISP trees").
    #[inline(always)]
    pub fn prefetch_head(&self, list: &FlightList) {
        if let Some(s) = self.slots.get(list.head as usize) {
            sojourn_core::prefetch::prefetch(s);
        }
    }

    /// The packet in slot `i` (taken out by [`FlightPool::unlink_front`]).
    #[inline(always)]
    pub fn packet(&self, i: u32) -> &Packet {
        &self.slots[i as usize].pkt
    }

    /// The packet in slot `i`, to change in place.
    #[inline(always)]
    pub fn packet_mut(&mut self, i: u32) -> &mut Packet {
        &mut self.slots[i as usize].pkt
    }

    /// Appends slot `i` (unlinked, its packet in place: no copy) to `list`, arriving at `at`.
    #[inline(always)]
    pub fn relink_back(&mut self, i: u32, list: &mut FlightList, at: Time) {
        let s = &mut self.slots[i as usize];
        s.at = at;
        s.next = NIL;
        self.append(i, list, at);
    }

    /// Links slot `i` (its `next` already NIL), arriving at `at`, at the tail of `list`.
    #[inline(always)]
    fn append(&mut self, i: u32, list: &mut FlightList, at: Time) {
        if list.tail == NIL {
            list.head = i;
        } else {
            let t = &mut self.slots[list.tail as usize];
            t.next = i;
            t.next_at = at;
        }
        list.tail = i;
        list.len += 1;
    }

    /// The entries of `list` from its head, with their arrival times (a run's slot gives
    /// its current segment only: the partitioned engine, which reads lists with this, keeps
    /// runs off the links it cuts).
    pub fn iter<'a>(&'a self, list: &FlightList) -> impl Iterator<Item = (Time, &'a Packet)> + 'a {
        let mut i = list.head;
        let mut left = list.len;
        std::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            let s = &self.slots[i as usize];
            left -= 1;
            i = s.next;
            Some((s.at, &s.pkt))
        })
    }

    /// Frees slot `i` (unlinked; reused next).
    #[inline(always)]
    pub fn free(&mut self, i: u32) {
        self.free.push(i);
    }

    /// Packets held by all lists.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len() + self.extra
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(uid: u64) -> Packet {
        Packet::synthetic(uid, 1, 1000)
    }

    /// Each list is a FIFO of its own however the lists interleave, and the pool holds
    /// exactly the packets pushed and not popped (conservation), reusing freed slots.
    #[test]
    fn lists_are_fifos_and_the_pool_conserves_packets() {
        let mut pool = FlightPool::default();
        let mut a = FlightList::default();
        let mut b = FlightList::default();
        assert_eq!(pool.pop_front(&mut a).map(|(_, p)| p.uid), None);
        pool.push_back(&mut a, Time(10), &pkt(1));
        pool.push_back(&mut b, Time(5), &pkt(2));
        pool.push_back(&mut a, Time(20), &pkt(3));
        assert_eq!((a.len(), b.len(), pool.len()), (2, 1, 3));
        assert_eq!(pool.front(&a).map(|(t, p)| (t, p.uid)), Some((Time(10), 1)));
        assert_eq!(pool.back(&a).map(|(t, p)| (t, p.uid)), Some((Time(20), 3)));
        assert_eq!(pool.second_at(&a), Some(Time(20)));
        assert_eq!(pool.second_at(&b), None);
        let (t, p) = pool.pop_front(&mut a).unwrap();
        assert_eq!((t, p.uid), (Time(10), 1));
        // The freed slot is the next one used (by another list).
        pool.push_back(&mut b, Time(6), &pkt(4)).uid = 40;
        assert_eq!(pool.slots.len(), 3);
        assert_eq!(pool.len(), 3);
        let uids = |pool: &mut FlightPool, l: &mut FlightList| {
            let mut v = vec![];
            while let Some((t, p)) = pool.pop_front(l) {
                v.push((t.0, p.uid));
            }
            v
        };
        assert_eq!(uids(&mut pool, &mut b), vec![(5, 2), (6, 40)]);
        assert_eq!(uids(&mut pool, &mut a), vec![(20, 3)]);
        assert!(pool.is_empty() && a.is_empty() && b.is_empty());
        assert_eq!(
            (pool.front(&a).is_none(), pool.back(&b).is_none()),
            (true, true)
        );
    }

    /// A run (one slot for a GSO buffer's segments) delivers what a slot per segment
    /// delivers: each segment as `Packet::segment` cuts it, with the engine's uids, at
    /// `max(end + delay, previous arrival)`; the list and the pool count every segment;
    /// a packet queued behind the run comes after its last segment; the slot is an
    /// ordinary one for the last segment, and freed after it.
    #[test]
    fn a_run_holds_a_buffers_segments_in_one_slot() {
        use sojourn_core::device::{Device, Poll, RateModel};
        use sojourn_core::qdisc::{fifo::pfifo_with_limit, AnyQdisc, Drops};
        // 2 x 1448 + 1000 B of payload, 66 B of headers per segment: 1514, 1514 and
        // 1066-B frames, at 10 Mbit/s 1,211,200 ns, 1,211,200 ns and 852,800 ns.
        let mut buffer = Packet::synthetic(7, 1, 2 * 1514 + 1066);
        buffer.hdr.payload_bytes = 2 * 1448 + 1000;
        buffer.hdr.seq = 1000;
        buffer.gso_segs = 3;
        buffer.gso_size = 1448;
        let mut dev = Device::new(
            AnyQdisc::Pfifo(pfifo_with_limit(10)),
            RateModel::Constant(10_000_000),
            0,
            0,
            false,
        );
        let mut drops = Drops::new();
        dev.enqueue(buffer, Time::ZERO, &mut drops);
        let r = dev.poll(Time::ZERO, &mut drops, &mut |_| {}, |_, _| unreachable!());
        assert!(matches!(r, Poll::Burst { segments: 3 }));
        let mut pool = FlightPool::default();
        let (mut list, mut other) = (FlightList::default(), FlightList::default());
        // Another list's packet first, so the run's slot is not slot 0.
        pool.push_back(&mut other, Time(1), &pkt(1));
        let delay = Duration(5_000_000);
        dev.take_burst(|b, mut cursor, last| {
            assert_eq!(last, Time(3_275_200));
            let (first, end) = cursor.next_segment().expect("three segments");
            // The previous packet on this link arrives after this one would: held back.
            let at = (end + delay).max(Time(6_300_000));
            pool.push_run(&mut list, at, b, &first, cursor, delay, 100);
        })
        .expect("a burst");
        pool.push_back(&mut list, Time(9_000_000), &pkt(2));
        assert_eq!((list.len(), pool.len()), (4, 5));
        let mut got = vec![];
        while !list.is_empty() {
            if let Some((s, next_at)) = pool.run_front(&mut list) {
                let p = *pool.packet(s);
                got.push((pool.slots[s as usize].at.0, p.uid, p.hdr.seq));
                assert_eq!(pool.front(&list).map(|(_, q)| q.uid), Some(p.uid));
                let mut want = buffer.segment(got.len() as u32 - 1);
                if got.len() > 1 {
                    want.uid = 100 + got.len() as u64 - 2;
                }
                assert_eq!(format!("{p:?}"), format!("{want:?}"));
                // A hop stamps the segment in place; the next cut must not keep it.
                pool.packet_mut(s).enqueued_at = Time(42);
                pool.advance_run(s);
                assert_eq!(pool.front(&list).map(|(t, _)| t), Some(next_at));
            } else {
                let s = pool.unlink_front(&mut list).expect("not empty");
                let p = *pool.packet(s);
                if p.uid != 2 {
                    let want = {
                        let mut w = buffer.segment(2);
                        w.uid = 101;
                        w
                    };
                    assert_eq!(format!("{p:?}"), format!("{want:?}"));
                }
                got.push((pool.slots[s as usize].at.0, p.uid, p.hdr.seq));
                pool.free(s);
            }
            assert_eq!(pool.len(), list.len() + 1);
        }
        assert_eq!(
            got,
            vec![
                // 1,211,200 + 5 ms is before the held-back 6.3 ms.
                (6_300_000, 7, 1000),
                (7_422_400, 100, 2448),
                (8_275_200, 101, 3896),
                (9_000_000, 2, 0),
            ]
        );
        assert_eq!(pool.len(), 1);
    }

    /// A randomised run against one `VecDeque` per list (the structure this replaces):
    /// every pop returns what the deque returns, for 5 lists and 10,000 operations, with
    /// heads moved between lists in place (`unlink_front` + `relink_back`) or freed.
    #[test]
    fn behaves_like_a_deque_per_list() {
        use std::collections::VecDeque;
        let mut rng = sojourn_core::rng::Rng::from_seed(7);
        let mut pool = FlightPool::default();
        let mut lists = [FlightList::default(); 5];
        let mut deques: Vec<VecDeque<(Time, u64)>> = vec![VecDeque::new(); 5];
        for uid in 0..10_000u64 {
            let k = (rng.next_u64() % 5) as usize;
            let op = rng.next_u64() % 6;
            if op < 2 {
                let got = pool.pop_front(&mut lists[k]).map(|(t, p)| (t, p.uid));
                assert_eq!(got, deques[k].pop_front());
            } else if op == 2 {
                // The engine's arrival: the head taken out in place, then either moved on
                // to another list with a new arrival time (a cut-through hop: same packet,
                // no copy) or freed after being read.
                let j = (rng.next_u64() % 5) as usize;
                let got = pool.unlink_front(&mut lists[k]);
                assert_eq!(got.is_some(), !deques[k].is_empty());
                if let Some(s) = got {
                    let (_, uid) = deques[k].pop_front().expect("same length");
                    assert_eq!(pool.packet(s).uid, uid);
                    // The new head's arrival, read from the slot just taken off.
                    if let Some(&(next_at, _)) = deques[k].front() {
                        assert_eq!(pool.successor_at(s), next_at);
                    }
                    if rng.next_u64().is_multiple_of(2) {
                        pool.packet_mut(s).uid = uid + 1_000_000;
                        pool.relink_back(s, &mut lists[j], Time(uid + 7));
                        deques[j].push_back((Time(uid + 7), uid + 1_000_000));
                    } else {
                        pool.free(s);
                    }
                }
            } else {
                pool.push_back(&mut lists[k], Time(uid), &pkt(uid));
                deques[k].push_back((Time(uid), uid));
            }
            for (list, deque) in lists.iter().zip(&deques) {
                assert_eq!(list.len(), deque.len());
                assert_eq!(
                    pool.back(list).map(|(t, p)| (t, p.uid)),
                    deque.back().copied()
                );
            }
            assert_eq!(
                pool.front(&lists[k]).map(|(t, p)| (t, p.uid)),
                deques[k].front().copied()
            );
            assert_eq!(pool.second_at(&lists[k]), deques[k].get(1).map(|e| e.0));
        }
        assert_eq!(pool.len(), deques.iter().map(|d| d.len()).sum::<usize>());
    }
}
