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

use sojourn_core::{Packet, Time};

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
                });
                self.slots.len() as u32 - 1
            }
        };
        // Linked first, so the slot is looked up once, for writing and for the answer.
        self.append(i, list);
        let s = &mut self.slots[i as usize];
        s.pkt = *pkt;
        s.at = at;
        s.next = NIL;
        &mut s.pkt
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
        self.append(i, list);
    }

    /// Links slot `i` (its `next` already NIL) at the tail of `list`.
    #[inline(always)]
    fn append(&mut self, i: u32, list: &mut FlightList) {
        if list.tail == NIL {
            list.head = i;
        } else {
            self.slots[list.tail as usize].next = i;
        }
        list.tail = i;
        list.len += 1;
    }

    /// Frees slot `i` (unlinked; reused next).
    #[inline(always)]
    pub fn free(&mut self, i: u32) {
        self.free.push(i);
    }

    /// Packets held by all lists.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
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
