//! A set of 16-bit class minors kept in ascending order: HTB's rows and feeds (the
//! kernel's rb-trees of active classes, keyed by classid) with membership, the first
//! member and the next member at or above an id in a few word operations.
//!
//! Two levels of bits: one per minor (`words`) and one per non-empty word (`summary`), so
//! a search skips 4,096 minors per summary bit. A `BTreeMap<u16, _>` did the same work
//! with node searches and rebalancing; on a 10,000-subscriber tree the switch cut the run
//! loop's instructions by 2.2 % (bench/README.md, "ISP trees on a quiet machine"). The words
//! grow to the largest minor inserted, so a ring that never holds a class costs nothing
//! (64 KiB of minors = 8 KiB of bits at most).

/// Minors in ascending order (see the module documentation).
#[derive(Clone, Default, Debug)]
pub struct MinorSet {
    /// Bit `m % 64` of `words[m / 64]`: minor `m` is a member.
    words: Vec<u64>,
    /// Bit `w % 64` of `summary[w / 64]`: `words[w]` is not zero.
    summary: Vec<u64>,
    len: u32,
}

impl MinorSet {
    /// Adds `m`; false if it was a member already.
    #[inline]
    pub fn insert(&mut self, m: u16) -> bool {
        let w = m as usize / 64;
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
            self.summary.resize(w / 64 + 1, 0);
        }
        let bit = 1u64 << (m % 64);
        if self.words[w] & bit != 0 {
            return false;
        }
        self.words[w] |= bit;
        self.summary[w / 64] |= 1u64 << (w % 64);
        self.len += 1;
        true
    }

    /// Removes `m`; false if it was not a member.
    #[inline]
    pub fn remove(&mut self, m: u16) -> bool {
        let w = m as usize / 64;
        let bit = 1u64 << (m % 64);
        match self.words.get_mut(w) {
            Some(word) if *word & bit != 0 => {
                *word &= !bit;
                if *word == 0 {
                    self.summary[w / 64] &= !(1u64 << (w % 64));
                }
                self.len -= 1;
                true
            }
            _ => false,
        }
    }

    #[inline]
    pub fn contains(&self, m: u16) -> bool {
        self.words
            .get(m as usize / 64)
            .is_some_and(|w| w & (1u64 << (m % 64)) != 0)
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// The smallest member.
    #[inline]
    pub fn first(&self) -> Option<u16> {
        self.at_or_above(0)
    }

    /// The smallest member `≥ id` (the kernel's `htb_id_find_next_upper`).
    #[inline]
    pub fn at_or_above(&self, id: u16) -> Option<u16> {
        let w = id as usize / 64;
        let here = *self.words.get(w)? & (!0u64 << (id % 64));
        if here != 0 {
            return Some((w * 64) as u16 + here.trailing_zeros() as u16);
        }
        self.first_word_from(w + 1)
            .map(|w2| (w2 * 64) as u16 + self.words[w2].trailing_zeros() as u16)
    }

    /// The smallest member `> id` (the kernel's `rb_next` from `id`'s node).
    #[inline]
    pub fn above(&self, id: u16) -> Option<u16> {
        if id == u16::MAX {
            None
        } else {
            self.at_or_above(id + 1)
        }
    }

    /// The first non-zero word at index `≥ w`.
    #[inline]
    fn first_word_from(&self, w: usize) -> Option<usize> {
        let mut s = w / 64;
        if s >= self.summary.len() {
            return None;
        }
        let mut bits = self.summary[s] & (!0u64 << (w % 64));
        loop {
            if bits != 0 {
                return Some(s * 64 + bits.trailing_zeros() as usize);
            }
            s += 1;
            bits = *self.summary.get(s)?;
        }
    }

    /// The members in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        std::iter::successors(self.first(), move |&m| self.above(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Against `BTreeSet<u16>` (the ordered set it replaces) over a pseudo-random sequence
    /// of inserts and removes spread over the whole u16 range and clustered at both ends
    /// and at word and summary boundaries.
    #[test]
    fn agrees_with_an_ordered_set() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges: [u16; 12] = [
            0, 1, 63, 64, 65, 127, 4095, 4096, 4097, 65_471, 65_534, 65_535,
        ];
        let mut s = MinorSet::default();
        let mut t = BTreeSet::new();
        for i in 0..20_000 {
            let r = next();
            let m = match r % 4 {
                0 => edges[(r >> 8) as usize % edges.len()],
                1 => (r >> 16) as u16 % 300,
                _ => (r >> 16) as u16,
            };
            if (r >> 40) % 3 == 0 {
                assert_eq!(s.remove(m), t.remove(&m), "remove {m} at step {i}");
            } else {
                assert_eq!(s.insert(m), t.insert(m), "insert {m} at step {i}");
            }
            assert_eq!(s.len(), t.len());
            assert_eq!(s.is_empty(), t.is_empty());
            let q = (next() >> 16) as u16;
            assert_eq!(
                s.at_or_above(q),
                t.range(q..).next().copied(),
                "at_or_above {q}"
            );
            assert_eq!(
                s.above(q),
                t.range(q..).find(|&&k| k > q).copied(),
                "above {q}"
            );
            assert_eq!(s.contains(q), t.contains(&q));
            assert_eq!(s.first(), t.first().copied());
        }
        assert!(s.iter().eq(t.iter().copied()));
    }

    #[test]
    fn hand_worked_searches() {
        let mut s = MinorSet::default();
        assert_eq!(s.first(), None);
        assert_eq!(s.at_or_above(5), None);
        for m in [3u16, 64, 4100, 65_535] {
            assert!(s.insert(m));
        }
        assert!(!s.insert(64));
        assert_eq!(s.first(), Some(3));
        assert_eq!(s.above(3), Some(64));
        assert_eq!(s.at_or_above(64), Some(64));
        assert_eq!(s.above(64), Some(4100));
        assert_eq!(s.at_or_above(4101), Some(65_535));
        assert_eq!(s.above(65_535), None);
        assert!(s.remove(4100));
        assert!(!s.remove(4100));
        assert_eq!(s.above(64), Some(65_535));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![3, 64, 65_535]);
    }
}
