//! A hint to the CPU that memory will be read soon.

/// Asks the CPU to bring the cache lines of `*r` (its first 256 bytes) towards L1.
#[inline(always)]
#[allow(unsafe_code)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = r as *const T as *const i8;
        let n = std::mem::size_of::<T>().min(256);
        let mut off = 0;
        while off < n {
            // SAFETY: a prefetch never faults and has no effect on program state; the
            // address is inside (or one line past the start of) a live reference.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off)) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
