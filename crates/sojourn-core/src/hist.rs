//! A log-linear histogram of non-negative integers (delays in ns, sizes in bytes) with a
//! stated precision: every recorded value lands in a bucket whose width is at most 1/128
//! of its lower edge, so any percentile read from it is within 0.8% of the exact order
//! statistic (docs/output-schema.md: percentiles within 0.8%). Memory is fixed
//! (at most 64·128 counters, allocated lazily per exponent), never proportional to the
//! number of samples. `count`, `sum`, `min` and `max` are exact.

const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS; // 128 sub-buckets per power of two

#[derive(Clone, Debug, Default)]
pub struct Histogram {
    /// counts[e] covers [2^(e+7), 2^(e+8)) for e ≥ 1, and e = 0 covers [0, 256) exactly.
    counts: Vec<Vec<u64>>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

#[inline]
fn index(v: u64) -> (usize, usize) {
    if v < 2 * SUB {
        (0, v as usize)
    } else {
        let msb = 63 - v.leading_zeros(); // ≥ 8
        let e = msb - SUB_BITS; // ≥ 1
        let sub = (v >> e) - SUB; // 0..128
        (e as usize, sub as usize)
    }
}

#[inline]
fn bucket_low(e: usize, sub: usize) -> u64 {
    if e == 0 {
        sub as u64
    } else {
        (SUB + sub as u64) << e
    }
}

#[inline]
fn bucket_width(e: usize) -> u64 {
    if e == 0 {
        1
    } else {
        1u64 << e
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: Vec::new(),
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Counts `v`. The common case (its exponent's row exists) is a few instructions,
    /// inlined where the engine measures each packet; allocating a row is out of line.
    #[inline]
    pub fn record(&mut self, v: u64) {
        if v == 0 {
            // Zeros (a packet dequeued the instant it was enqueued: most of them on an
            // idle link) are counted by `count` alone, without touching a row: they are
            // `count` minus what the rows hold (`zeros`). With thousands of links each
            // row is a cold cache line (issue 19).
            self.count += 1;
            self.min = 0;
            return;
        }
        let (e, s) = index(v);
        // An absent or not yet allocated (empty) row fails `s < row.len()`.
        match self.counts.get_mut(e) {
            Some(row) if s < row.len() => row[s] += 1,
            _ => self.record_in_new_row(e, s),
        }
        self.count += 1;
        self.sum += v as u128;
        if v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
    }

    /// `record`'s first sample of exponent `e`: allocates its row, then counts it.
    #[cold]
    #[inline(never)]
    fn record_in_new_row(&mut self, e: usize, s: usize) {
        if self.counts.len() <= e {
            self.counts.resize_with(e + 1, Vec::new);
        }
        let row = &mut self.counts[e];
        *row = vec![
            0;
            if e == 0 {
                2 * SUB as usize
            } else {
                SUB as usize
            }
        ];
        row[s] += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Samples equal to 0: those the rows do not hold (see `record`).
    fn zeros(&self) -> u64 {
        self.count - self.counts.iter().flatten().sum::<u64>()
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    pub fn sum(&self) -> u128 {
        self.sum
    }
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            f64::NAN
        } else {
            self.sum as f64 / self.count as f64
        }
    }
    pub fn min(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min)
    }
    pub fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }

    /// The q-quantile (0 ≤ q ≤ 1) by the nearest-rank rule, reported as the midpoint of its
    /// bucket clamped to [min, max]; within 0.8% of the exact nearest-rank value.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        // Bucket [0, 1) first: the zeros, then the rows (whose first counter, for 0, is 0).
        let mut seen = self.zeros();
        if seen >= rank {
            return Some(0.0);
        }
        for (e, row) in self.counts.iter().enumerate() {
            for (s, &c) in row.iter().enumerate() {
                seen += c;
                if seen >= rank && c > 0 {
                    let lo = bucket_low(e, s) as f64;
                    let mid = lo + (bucket_width(e) as f64 - 1.0) / 2.0;
                    return Some(mid.clamp(self.min as f64, self.max as f64));
                }
            }
        }
        Some(self.max as f64)
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        // Zeros are not in the rows: they add through `count` (below).
        if self.counts.len() < other.counts.len() {
            self.counts.resize_with(other.counts.len(), Vec::new);
        }
        for (e, row) in other.counts.iter().enumerate() {
            if row.is_empty() {
                continue;
            }
            if self.counts[e].is_empty() {
                self.counts[e] = vec![0; row.len()];
            }
            for (a, b) in self.counts[e].iter_mut().zip(row) {
                *a += b;
            }
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Non-empty buckets as (lower edge, upper edge exclusive, count), for CDF plots.
    pub fn buckets(&self) -> Vec<(u64, u64, u64)> {
        let mut out = Vec::new();
        let zeros = self.zeros();
        if zeros > 0 {
            out.push((0, 1, zeros));
        }
        for (e, row) in self.counts.iter().enumerate() {
            for (s, &c) in row.iter().enumerate() {
                if c > 0 {
                    let lo = bucket_low(e, s);
                    out.push((lo, lo + bucket_width(e), c));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn quantiles_within_stated_precision() {
        // Against the exact nearest-rank order statistic of the same samples.
        let mut r = Rng::from_seed(1);
        let mut xs: Vec<u64> = (0..50_000).map(|_| (r.exp(5e6) as u64) + 1).collect();
        let mut h = Histogram::new();
        for &x in &xs {
            h.record(x);
        }
        xs.sort_unstable();
        for q in [0.01, 0.25, 0.5, 0.75, 0.95, 0.99, 0.999] {
            let rank = ((q * xs.len() as f64).ceil() as usize).max(1);
            let exact = xs[rank - 1] as f64;
            let got = h.quantile(q).unwrap();
            assert!(
                (got - exact).abs() / exact <= 1.0 / 128.0,
                "q={q} exact={exact} got={got}"
            );
        }
        let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / xs.len() as f64;
        assert!((h.mean() - mean).abs() < 1e-6 * mean);
        assert_eq!(h.max(), Some(*xs.last().unwrap()));
        assert_eq!(h.min(), Some(xs[0]));
    }

    /// Bucket edges written out: [0, 256) exact, then 128 buckets per power of two
    /// (width 2^(e) from 2^(e+7)); repeated values and values in one bucket add up, and
    /// the rows allocated on first use (in any order) count like the others.
    #[test]
    fn buckets_have_the_stated_edges() {
        let mut h = Histogram::new();
        for v in [
            1000,
            1u64 << 40,
            0,
            255,
            256,
            257,
            511,
            512,
            1003,
            0,
            1_048_575,
        ] {
            h.record(v);
        }
        assert_eq!(
            h.buckets(),
            vec![
                (0, 1, 2),
                (255, 256, 1),
                (256, 258, 2),
                (510, 512, 1),
                (512, 516, 1),
                (1000, 1004, 2),
                (1_044_480, 1_048_576, 1),
                (1 << 40, (1 << 40) + (1 << 33), 1),
            ]
        );
        assert_eq!(h.count(), 11);
        assert_eq!(
            h.sum(),
            1000 + (1u128 << 40) + 255 + 256 + 257 + 511 + 512 + 1003 + 1_048_575
        );
        assert_eq!((h.min(), h.max()), (Some(0), Some(1 << 40)));
    }

    /// Zeros (kept out of the rows) count like any value: 6 zeros and 4 values of 1000
    /// have median 0, 70th percentile 1000's bucket midpoint 1001.5 clamped to max 1000,
    /// buckets [0,1) x6 and [1000,1004) x4; merged twice they double.
    #[test]
    fn zeros_count_like_other_values() {
        let mut h = Histogram::new();
        for v in [0, 1000, 0, 0, 1000, 0, 1000, 0, 0, 1000] {
            h.record(v);
        }
        assert_eq!(
            (h.count(), h.sum(), h.min(), h.max()),
            (10, 4000, Some(0), Some(1000))
        );
        assert_eq!(h.quantile(0.0), Some(0.0));
        assert_eq!(h.quantile(0.6), Some(0.0));
        assert_eq!(h.quantile(0.7), Some(1000.0));
        assert_eq!(h.buckets(), vec![(0, 1, 6), (1000, 1004, 4)]);
        let mut m = Histogram::new();
        m.record(0);
        m.merge(&h);
        m.merge(&h);
        assert_eq!(m.buckets(), vec![(0, 1, 13), (1000, 1004, 8)]);
        assert_eq!(m.quantile(13.0 / 21.0), Some(0.0));
        assert_eq!(m.quantile(14.0 / 21.0), Some(1000.0));
        let mut only = Histogram::new();
        only.record(0);
        assert_eq!((only.quantile(0.5), only.mean()), (Some(0.0), 0.0));
    }

    #[test]
    fn small_values_are_exact_and_merge_adds() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        for v in 0..200 {
            a.record(v);
        }
        for v in 200..400 {
            b.record(v);
        }
        assert_eq!(a.quantile(0.5), Some(99.0));
        a.merge(&b);
        assert_eq!(a.count(), 400);
        assert_eq!(a.max(), Some(399));
        assert_eq!(a.buckets().iter().map(|b| b.2).sum::<u64>(), 400);
    }
}
