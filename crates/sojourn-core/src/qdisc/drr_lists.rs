//! The flow lists of a deficit round robin over hashed flow queues, shared by `fq_codel`,
//! `fq_pie` and CAKE.
//!
//! [`DrrLists`] keeps, for every flow queue of a discipline (by index), its DRR deficit
//! (bytes, may go negative) and its place on at most one of `N` FIFO lists of active
//! queues (intrusive, linked by index: no allocation after construction). CAKE (three
//! lists) moves a queue off the middle of its decaying list, so its lists are doubly
//! linked; fq_codel and fq_pie (two lists) only ever take the head, and skip the back
//! links on their per-packet path.
//!
//! On two lists, [`NEW`] and [`OLD`], it also runs the scheduling of RFC 8290 §4.2 that
//! Linux `sch_fq_codel` and `sch_fq_pie` share:
//! - a queue that becomes active joins the tail of the new list with a full quantum
//!   ([`DrrLists::activate`]);
//! - the next queue to serve is the head of the new list, else of the old list; a queue
//!   whose deficit is used up gets one quantum more and goes to the tail of the old list
//!   ([`DrrLists::next_flow`]);
//! - a queue found empty leaves the lists, except that an emptied *new* queue moves to the
//!   tail of the old list when that list is not empty, so it cannot be "new" (served first)
//!   again before every old queue has had a turn: the anti-starvation rule of RFC 8290 §4.2
//!   ([`DrrLists::retire_empty`]).
//!
//! CAKE's third (decaying) list and its host-scaled quantum keep their own rules in cake.rs
//! and use only the list operations here.

/// "No queue" in the links.
const NIL: u32 = u32::MAX;
/// A queue on no list.
const UNLISTED: u8 = u8::MAX;

/// The list of queues that just became active (`new_flows`).
pub(crate) const NEW: u8 = 0;
/// The list of queues in the DRR rotation (`old_flows`).
pub(crate) const OLD: u8 = 1;

/// One queue's DRR state: its deficit and its links on its list.
#[derive(Clone, Copy, Debug)]
struct Link {
    next: u32,
    prev: u32,
    deficit: i32,
    list: u8,
}

/// The deficits and the `N` lists of active queues of one set of flow queues.
#[derive(Clone, Debug)]
pub(crate) struct DrrLists<const N: usize> {
    links: Vec<Link>,
    heads: [u32; N],
    tails: [u32; N],
}

impl<const N: usize> DrrLists<N> {
    /// Whether `prev` links are kept (only needed to [`Self::remove`] from the middle).
    const BACK_LINKS: bool = N > 2;

    /// `queues` queues, all on no list with deficit 0.
    pub(crate) fn new(queues: usize) -> Self {
        DrrLists {
            links: vec![
                Link {
                    next: NIL,
                    prev: NIL,
                    deficit: 0,
                    list: UNLISTED,
                };
                queues
            ],
            heads: [NIL; N],
            tails: [NIL; N],
        }
    }

    /// The first queue of `list`.
    #[inline(always)]
    pub(crate) fn head(&self, list: u8) -> Option<usize> {
        let h = self.heads[list as usize];
        (h != NIL).then_some(h as usize)
    }

    /// The last queue of `list`.
    #[cfg(test)]
    pub(crate) fn tail(&self, list: u8) -> Option<usize> {
        let t = self.tails[list as usize];
        (t != NIL).then_some(t as usize)
    }

    #[inline(always)]
    pub(crate) fn is_empty(&self, list: u8) -> bool {
        self.heads[list as usize] == NIL
    }

    /// Queues on `list`, counted by a walk (statistics only; no count is kept on the
    /// per-packet path).
    pub(crate) fn len(&self, list: u8) -> usize {
        let mut n = 0;
        let mut cur = self.heads[list as usize];
        while cur != NIL {
            n += 1;
            cur = self.links[cur as usize].next;
        }
        n
    }

    /// The list queue `idx` is on, if any.
    #[cfg(test)]
    pub(crate) fn list_of(&self, idx: usize) -> Option<u8> {
        let l = self.links[idx].list;
        (l != UNLISTED).then_some(l)
    }

    #[inline(always)]
    pub(crate) fn deficit(&self, idx: usize) -> i32 {
        self.links[idx].deficit
    }

    #[inline(always)]
    pub(crate) fn deficit_mut(&mut self, idx: usize) -> &mut i32 {
        &mut self.links[idx].deficit
    }

    /// Takes queue `idx` off its list (nothing if it is on none). Lists with back links only.
    #[inline(always)]
    pub(crate) fn remove(&mut self, idx: usize) {
        assert!(Self::BACK_LINKS, "remove from the middle needs back links");
        let Link {
            next, prev, list, ..
        } = self.links[idx];
        if list == UNLISTED {
            return;
        }
        let l = list as usize;
        if prev == NIL {
            self.heads[l] = next;
        } else {
            self.links[prev as usize].next = next;
        }
        if next == NIL {
            self.tails[l] = prev;
        } else {
            self.links[next as usize].prev = prev;
        }
        let f = &mut self.links[idx];
        f.next = NIL;
        f.prev = NIL;
        f.list = UNLISTED;
    }

    /// Moves queue `idx` to the tail of `list` (`list_move_tail`), from any list or none.
    #[inline(always)]
    pub(crate) fn move_tail(&mut self, idx: usize, list: u8) {
        self.remove(idx);
        self.push_tail(idx, list);
    }

    /// Appends queue `idx`, which is on no list, to `list`.
    #[inline(always)]
    fn push_tail(&mut self, idx: usize, list: u8) {
        let l = list as usize;
        let tail = self.tails[l];
        let f = &mut self.links[idx];
        if Self::BACK_LINKS {
            f.prev = tail;
        }
        f.list = list;
        if tail == NIL {
            self.heads[l] = idx as u32;
        } else {
            self.links[tail as usize].next = idx as u32;
        }
        self.tails[l] = idx as u32;
    }

    /// Takes the head `h` off `list` (what fq_codel and fq_pie ever move): [`Self::remove`]
    /// without the general case, on the per-packet path.
    #[inline(always)]
    fn pop_head(&mut self, h: u32, list: u8) {
        let l = list as usize;
        let f = &mut self.links[h as usize];
        let next = f.next;
        f.next = NIL;
        f.list = UNLISTED;
        self.heads[l] = next;
        if next == NIL {
            self.tails[l] = NIL;
        } else if Self::BACK_LINKS {
            self.links[next as usize].prev = NIL;
        }
    }
}

/// The RFC 8290 §4.2 scheduling on the [`NEW`] and [`OLD`] lists (fq_codel, fq_pie).
impl DrrLists<2> {
    /// A packet arrived for queue `idx`. A queue on no list becomes active: it gets a full
    /// `quantum` and joins the tail of `list` ([`NEW`]; fq_codel's "WP" ablation passes
    /// [`OLD`]). Returns whether it was activated; a queue still listed (even if empty)
    /// keeps its list and deficit (RFC 8290 §4.1).
    #[inline(always)]
    pub(crate) fn activate(&mut self, idx: usize, quantum: i32, list: u8) -> bool {
        if self.links[idx].list != UNLISTED {
            return false;
        }
        self.links[idx].deficit = quantum;
        self.push_tail(idx, list);
        true
    }

    /// The queue to serve next: the head of the new list, else of the old one. Queues at
    /// the head with no deficit left get `quantum` more and go to the tail of the old list
    /// first. `None` when both lists are empty.
    #[inline(always)]
    pub(crate) fn next_flow(&mut self, quantum: i32) -> Option<usize> {
        loop {
            // Two branches with constant lists (the list ends stay in registers).
            let h = self.heads[NEW as usize];
            if h != NIL {
                let f = &mut self.links[h as usize];
                if f.deficit > 0 {
                    return Some(h as usize);
                }
                f.deficit += quantum;
                self.pop_head(h, NEW);
                self.push_tail(h as usize, OLD);
                continue;
            }
            let h = self.heads[OLD as usize];
            if h == NIL {
                return None;
            }
            let f = &mut self.links[h as usize];
            if f.deficit > 0 {
                return Some(h as usize);
            }
            f.deficit += quantum;
            self.pop_head(h, OLD);
            self.push_tail(h as usize, OLD);
        }
    }

    /// Queue `idx` (returned by [`DrrLists::next_flow`]) has nothing to send. It leaves the
    /// lists, unless it was new, `anti_starvation` is on and old queues are waiting: then
    /// it goes to the tail of the old list (RFC 8290 §4.2). fq_codel's "WSPM" ablation
    /// turns `anti_starvation` off.
    #[inline(always)]
    pub(crate) fn retire_empty(&mut self, idx: usize, anti_starvation: bool) {
        if self.links[idx].list == NEW {
            debug_assert_eq!(self.heads[NEW as usize], idx as u32, "not a head");
            self.pop_head(idx as u32, NEW);
            if anti_starvation && !self.is_empty(OLD) {
                self.push_tail(idx, OLD);
            }
        } else {
            debug_assert_eq!(self.heads[OLD as usize], idx as u32, "not a head");
            self.pop_head(idx as u32, OLD);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(l: &DrrLists<2>, list: u8) -> Vec<usize> {
        let mut out = Vec::new();
        let mut cur = l.head(list);
        while let Some(i) = cur {
            out.push(i);
            let n = l.links[i].next;
            cur = (n != NIL).then_some(n as usize);
        }
        out
    }

    /// RFC 8290 §4.2: new queues are served first; a queue that used its quantum goes to
    /// the tail of the old list with one quantum more.
    #[test]
    fn new_list_first_then_refill_to_old_tail() {
        let mut l = DrrLists::<2>::new(4);
        assert!(l.activate(2, 1514, NEW));
        assert!(l.activate(0, 1514, NEW));
        assert!(
            !l.activate(2, 1514, NEW),
            "a listed queue is not re-activated"
        );
        assert_eq!(l.next_flow(1514), Some(2));
        *l.deficit_mut(2) -= 1600; // one packet larger than the quantum
        assert_eq!(l.next_flow(1514), Some(0), "2 used its quantum");
        assert_eq!((order(&l, NEW), order(&l, OLD)), (vec![0], vec![2]));
        assert_eq!(l.deficit(2), 1514 - 1600 + 1514);
        *l.deficit_mut(0) = 0; // exactly used up: its turn ends too
        assert_eq!(l.next_flow(1514), Some(2));
        assert_eq!(order(&l, OLD), vec![2, 0]);
        assert_eq!((l.len(NEW), l.len(OLD)), (0, 2));
    }

    /// RFC 8290 §4.2: an emptied new queue goes to the old list if it is not empty (and
    /// leaves if it is); an emptied old queue leaves.
    #[test]
    fn emptied_new_queue_passes_through_old_list() {
        let mut l = DrrLists::<2>::new(3);
        l.activate(0, 100, NEW);
        l.retire_empty(0, true);
        assert_eq!(l.list_of(0), None, "no old queues: it leaves");
        l.activate(1, 100, OLD);
        l.activate(0, 100, NEW);
        l.retire_empty(0, true);
        assert_eq!(order(&l, OLD), vec![1, 0]);
        assert!(!l.activate(0, 100, NEW), "still listed: not new again");
        l.retire_empty(1, true);
        assert_eq!(order(&l, OLD), vec![0], "an old queue leaves");
        l.activate(2, 100, NEW);
        l.retire_empty(2, false);
        assert_eq!(
            l.list_of(2),
            None,
            "without anti-starvation a new queue leaves"
        );
    }

    /// CAKE moves a queue off the middle of a list.
    #[test]
    fn move_from_the_middle_keeps_both_lists_linked() {
        let mut l = DrrLists::<3>::new(5);
        for i in 0..4 {
            l.move_tail(i, 2);
        }
        l.move_tail(2, 0);
        l.remove(1);
        let walk = |list: u8| {
            let mut v = Vec::new();
            let mut c = l.head(list);
            while let Some(i) = c {
                v.push(i);
                let n = l.links[i].next;
                c = (n != NIL).then_some(n as usize);
            }
            v
        };
        assert_eq!(walk(2), vec![0, 3]);
        assert_eq!(walk(0), vec![2]);
        assert_eq!((l.tail(2), l.len(2), l.len(0)), (Some(3), 2, 1));
        assert_eq!(l.links[3].prev, 0);
        assert_eq!(l.list_of(1), None);
    }
}
