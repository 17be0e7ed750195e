//! Deterministic random streams (docs/engine.md, "Randomness").
//!
//! One master seed; every consumer (flow, actor, qdisc) draws from its own stream derived
//! from `(seed, kind, id)`, so adding a flow does not perturb the others. The generator is
//! xoshiro256++ seeded through splitmix64: small, fast, and stable across versions because
//! it is our own code (no dependency whose output could change under us).

/// The splitmix64 finaliser: a bijective 64-bit mixer.
#[inline]
pub fn splitmix64_mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of a short label, to turn a stream kind such as `"flow"` into a number.
pub const fn label_hash(s: &str) -> u64 {
    let b = s.as_bytes();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < b.len() {
        h ^= b[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
        i += 1;
    }
    h
}

/// xoshiro256++.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator from a single 64-bit seed.
    pub fn from_seed(seed: u64) -> Rng {
        let mut x = seed;
        let mut s = [0u64; 4];
        for w in &mut s {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            *w = splitmix64_mix(x);
        }
        if s == [0; 4] {
            s[0] = 1;
        }
        Rng { s }
    }

    /// The independent stream for `(master seed, kind, id)`.
    pub fn stream(master: u64, kind: &str, id: u64) -> Rng {
        let k = splitmix64_mix(
            master
                ^ splitmix64_mix(label_hash(kind) ^ splitmix64_mix(id.wrapping_add(0x1234_5678))),
        );
        Rng::from_seed(k)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = (self.s[0].wrapping_add(self.s[3]))
            .rotate_left(23)
            .wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in [0, 1) with 53 bits.
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [0, n) (Lemire's multiply-shift; n > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [lo, hi).
    #[inline]
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }

    /// Exponential with the given mean (inverse transform on (0, 1]).
    #[inline]
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }

    /// Bernoulli(p).
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let mut a = Rng::stream(42, "flow", 3);
        let mut b = Rng::stream(42, "flow", 3);
        let mut c = Rng::stream(42, "flow", 4);
        let mut d = Rng::stream(43, "flow", 3);
        let xa: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        let xd: Vec<u64> = (0..8).map(|_| d.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        assert_ne!(xa, xd);
    }

    #[test]
    fn moments_match_distributions() {
        // Law of large numbers with n = 200k: mean of U(0,1) within 0.005 of 1/2,
        // mean of Exp(2) within 2% of 2.
        let mut r = Rng::from_seed(7);
        let n = 200_000;
        let mu: f64 = (0..n).map(|_| r.f64()).sum::<f64>() / n as f64;
        assert!((mu - 0.5).abs() < 0.005, "{mu}");
        let me: f64 = (0..n).map(|_| r.exp(2.0)).sum::<f64>() / n as f64;
        assert!((me - 2.0).abs() < 0.04, "{me}");
        let mut hits = [0u32; 10];
        for _ in 0..n {
            hits[r.below(10) as usize] += 1;
        }
        for h in hits {
            assert!((h as f64 - 20_000.0).abs() < 600.0, "{hits:?}");
        }
    }
}
