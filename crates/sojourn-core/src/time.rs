//! Simulated time: integer nanoseconds, never floating point (docs/engine.md, "Time and order").
//!
//! `Time` is an instant since the start of the run; `Duration` a span. Both are u64
//! nanoseconds, enough for 584 years of simulated time.

use core::fmt;
use core::ops::{Add, AddAssign, Div, Mul, Sub, SubAssign};

/// An instant of simulated time, in nanoseconds since the start of the run.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

/// A span of simulated time, in nanoseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(u64::MAX);

    #[inline]
    pub const fn from_ns(ns: u64) -> Time {
        Time(ns)
    }
    #[inline]
    pub const fn as_ns(self) -> u64 {
        self.0
    }
    #[inline]
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later.
    #[inline]
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    /// Signed difference `self - other` in ns (for wrap-free "is it past?" tests).
    #[inline]
    pub fn diff_ns(self, other: Time) -> i64 {
        self.0 as i64 - other.0 as i64
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const MAX: Duration = Duration(u64::MAX);

    #[inline]
    pub const fn from_ns(ns: u64) -> Duration {
        Duration(ns)
    }
    #[inline]
    pub const fn from_us(us: u64) -> Duration {
        Duration(us * 1_000)
    }
    #[inline]
    pub const fn from_ms(ms: u64) -> Duration {
        Duration(ms * 1_000_000)
    }
    #[inline]
    pub const fn from_secs(s: u64) -> Duration {
        Duration(s * 1_000_000_000)
    }
    /// Rounds to the nearest nanosecond; negative and NaN inputs give zero.
    pub fn from_secs_f64(s: f64) -> Duration {
        if s.is_nan() || s <= 0.0 {
            return Duration(0);
        }
        Duration((s * 1e9).round() as u64)
    }
    #[inline]
    pub const fn as_ns(self) -> u64 {
        self.0
    }
    #[inline]
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    #[inline]
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 * 1e-6
    }
    #[inline]
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    #[inline]
    fn add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Time {
    #[inline]
    fn add_assign(&mut self, d: Duration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Sub<Duration> for Time {
    type Output = Time;
    #[inline]
    fn sub(self, d: Duration) -> Time {
        Time(self.0.saturating_sub(d.0))
    }
}
/// `later - earlier`; saturates at zero (an instant never precedes itself in a run).
impl Sub<Time> for Time {
    type Output = Duration;
    #[inline]
    fn sub(self, earlier: Time) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}
impl Add for Duration {
    type Output = Duration;
    #[inline]
    fn add(self, d: Duration) -> Duration {
        Duration(self.0.saturating_add(d.0))
    }
}
impl AddAssign for Duration {
    #[inline]
    fn add_assign(&mut self, d: Duration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Sub for Duration {
    type Output = Duration;
    #[inline]
    fn sub(self, d: Duration) -> Duration {
        Duration(self.0.saturating_sub(d.0))
    }
}
impl SubAssign for Duration {
    #[inline]
    fn sub_assign(&mut self, d: Duration) {
        self.0 = self.0.saturating_sub(d.0);
    }
}
impl Mul<u64> for Duration {
    type Output = Duration;
    #[inline]
    fn mul(self, k: u64) -> Duration {
        Duration(self.0.saturating_mul(k))
    }
}
impl Div<u64> for Duration {
    type Output = Duration;
    #[inline]
    fn div(self, k: u64) -> Duration {
        Duration(self.0 / k)
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}
impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}
impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::units::fmt_duration(*self, f)
    }
}

/// Serialisation time of `bytes` at `rate_bps`, rounded up to the next nanosecond so that a
/// link never sends faster than its rate.
#[inline]
pub fn tx_time(bytes: u64, rate_bps: u64) -> Duration {
    debug_assert!(rate_bps > 0);
    // u64 arithmetic while it cannot overflow (frames up to ~2.3 GB); u128 otherwise.
    if bytes < (u64::MAX / 8_000_000_000) {
        Duration((bytes * 8_000_000_000).div_ceil(rate_bps))
    } else {
        let bits = bytes as u128 * 8 * 1_000_000_000;
        Duration(bits.div_ceil(rate_bps as u128) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_time_is_exact_for_round_rates() {
        // 1500 B at 10 Mbit/s = 1.2 ms exactly.
        assert_eq!(tx_time(1500, 10_000_000), Duration::from_us(1200));
        // 1514 B at 1 Gbit/s = 12.112 us.
        assert_eq!(tx_time(1514, 1_000_000_000), Duration(12_112));
        // 1 B at 3 bit/s rounds up: 8/3 s = 2.666..67 s
        assert_eq!(tx_time(1, 3), Duration(2_666_666_667));
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Time(5) - Time(9), Duration::ZERO);
        assert_eq!(Time(u64::MAX) + Duration(1), Time::MAX);
        assert_eq!(Time(10).diff_ns(Time(20)), -10);
    }
}
