//! The frame buffers: fixed-size slots in lazily allocated chunks; a slot index is 24
//! bits, carried in the low bits of the [`Packet::uid`] the qdisc holds.

use sojourn_core::Packet;

pub(super) const SLOT_BITS: u32 = 24;
pub(super) const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

pub(super) struct Pool {
    pub(super) chunks: Vec<Box<[u8]>>,
    pub(super) slot_bytes: usize,
    /// Slots per chunk (chunks of ~2 MiB).
    pub(super) chunk_slots: usize,
    /// Bytes before the frame in each slot (the `virtio_net_hdr` in GSO mode, else 0).
    pub(super) hdr: usize,
    pub(super) lens: Vec<u32>,
    pub(super) free: Vec<u32>,
    pub(super) max_slots: usize,
}

impl Pool {
    pub(super) fn new(slot_bytes: usize, max_slots: usize, hdr: usize) -> Pool {
        Pool {
            chunks: Vec::new(),
            slot_bytes,
            chunk_slots: ((2 << 20) / slot_bytes).clamp(1, 1024),
            hdr,
            lens: Vec::new(),
            free: Vec::new(),
            max_slots: max_slots.min(1 << SLOT_BITS),
        }
    }

    pub(super) fn alloc(&mut self) -> Option<u32> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        let cs = self.chunk_slots;
        let have = self.chunks.len() * cs;
        if have + cs > self.max_slots.max(cs) {
            return None;
        }
        self.chunks
            .push(vec![0u8; cs * self.slot_bytes].into_boxed_slice());
        self.lens.resize(have + cs, 0);
        // Hand out low slots first.
        self.free
            .extend((have as u32 + 1..(have + cs) as u32).rev());
        Some(have as u32)
    }

    #[inline]
    pub(super) fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }

    #[inline]
    pub(super) fn ptr(&mut self, slot: u32) -> *mut u8 {
        let s = slot as usize;
        let off = (s % self.chunk_slots) * self.slot_bytes;
        self.chunks[s / self.chunk_slots][off..].as_mut_ptr()
    }

    /// The slot's bytes as the socket moves them (virtio header + frame in GSO mode).
    #[inline]
    pub(super) fn raw(&self, slot: u32) -> &[u8] {
        let s = slot as usize;
        let off = (s % self.chunk_slots) * self.slot_bytes;
        &self.chunks[s / self.chunk_slots][off..off + self.lens[s] as usize]
    }

    /// The Ethernet frame in the slot.
    #[inline]
    pub(super) fn frame(&self, slot: u32) -> &[u8] {
        &self.raw(slot)[self.hdr..]
    }

    #[inline]
    pub(super) fn frame_mut(&mut self, slot: u32) -> &mut [u8] {
        let s = slot as usize;
        let off = (s % self.chunk_slots) * self.slot_bytes;
        let len = self.lens[s] as usize;
        &mut self.chunks[s / self.chunk_slots][off + self.hdr..off + len]
    }
}

#[inline]
pub(super) fn slot_of(p: &Packet) -> u32 {
    (p.uid & SLOT_MASK) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_hands_out_distinct_slots_and_reuses_them() {
        let mut p = Pool::new(2048, 2048, 0);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        assert_ne!(a, b);
        p.release(a);
        assert_eq!(p.alloc(), Some(a));
        let mut n = 2;
        let mut bound = sojourn_core::qdisc::testkit::Bound::new(10_000, "allocate until full");
        while p.alloc().is_some() {
            bound.tick();
            n += 1;
        }
        assert_eq!(n, 2048, "bounded by max_slots");
    }
}
