//! RTT estimation and the retransmission timeout (RFC 6298 with Linux's choices).
//!
//! Linux (`tcp_rtt_estimator`, `__tcp_set_rto`) keeps SRTT with gain 1/8 and the mean
//! deviation with gain 1/4 like RFC 6298 §2, but its minimum RTO is applied to the
//! variance term: `RTO = SRTT + max(4·RTTVAR, rto_min)` (rto_min 200 ms), so an RTO is
//! never less than SRTT + 200 ms. Before the first sample the RTO is 1 s (RFC 6298 §2.1,
//! `TCP_TIMEOUT_INIT`); each expiry doubles it up to 120 s (`TCP_RTO_MAX`, §5.5).

use sojourn_core::{Duration, Time};

#[derive(Clone, Debug)]
pub struct RttEstimator {
    /// Smoothed RTT (ns); zero until the first sample.
    pub srtt_ns: u64,
    /// RTT variation (ns).
    pub rttvar_ns: u64,
    /// Smallest RTT seen (ns), `u64::MAX` before any sample.
    pub min_rtt_ns: u64,
    /// Most recent sample (ns).
    pub latest_ns: u64,
    pub min_rto: Duration,
    pub initial_rto: Duration,
    pub max_rto: Duration,
    /// Number of consecutive RTO expiries (exponential backoff exponent).
    pub backoff: u32,
    /// [`Self::base_rto`] in ns, kept by [`Self::sample`] (the only writer of its inputs
    /// here): every ACK restarts the RTO timer, and this saves recomputing the sum from
    /// SRTT and RTTVAR each time (issue 19).
    base_rto_ns: u64,
}

impl RttEstimator {
    pub fn new(min_rto: Duration, initial_rto: Duration) -> RttEstimator {
        RttEstimator {
            srtt_ns: 0,
            rttvar_ns: 0,
            min_rtt_ns: u64::MAX,
            latest_ns: 0,
            min_rto,
            initial_rto,
            max_rto: Duration::from_ms(120_000),
            backoff: 0,
            base_rto_ns: initial_rto.0,
        }
    }

    pub fn has_sample(&self) -> bool {
        self.srtt_ns > 0
    }

    /// RFC 6298 §2.2/§2.3: first sample sets SRTT = R, RTTVAR = R/2; later ones use the
    /// gains 1/8 and 1/4.
    #[inline]
    pub fn sample(&mut self, rtt: Duration) {
        let r = rtt.0.max(1);
        self.latest_ns = r;
        self.min_rtt_ns = self.min_rtt_ns.min(r);
        if self.srtt_ns == 0 {
            self.srtt_ns = r;
            self.rttvar_ns = r / 2;
        } else {
            let err = self.srtt_ns.abs_diff(r);
            self.rttvar_ns = (3 * self.rttvar_ns + err) / 4;
            self.srtt_ns = (7 * self.srtt_ns + r) / 8;
        }
        // SRTT ≥ 1 from here on: the measured form of `base_rto`.
        let var = (4 * self.rttvar_ns).max(self.min_rto.0);
        self.base_rto_ns = (self.srtt_ns + var).min(self.max_rto.0);
    }

    /// The RTO without backoff: `SRTT + max(4·RTTVAR, rto_min)` (Linux), or the initial RTO
    /// before the first sample.
    #[inline]
    pub fn base_rto(&self) -> Duration {
        Duration(self.base_rto_ns)
    }

    /// The RTO with the current backoff applied (RFC 6298 §5.5), capped at 120 s.
    #[inline]
    pub fn rto(&self) -> Duration {
        if self.backoff == 0 {
            // No backoff: no doubling (a measured `base_rto` is capped already, the
            // initial one is capped here).
            return Duration(self.base_rto_ns.min(self.max_rto.0));
        }
        let b = self.backoff.min(20);
        Duration(self.base_rto().0.saturating_mul(1 << b).min(self.max_rto.0))
    }

    pub fn srtt(&self) -> Duration {
        Duration(self.srtt_ns)
    }

    /// When an RTO started at `now` expires.
    #[inline]
    pub fn rto_deadline(&self, now: Time) -> Time {
        now + self.rto()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6298_first_and_later_samples() {
        let mut r = RttEstimator::new(Duration::from_ms(200), Duration::from_ms(1000));
        assert_eq!(
            r.rto(),
            Duration::from_ms(1000),
            "RFC 6298 §2.1 initial RTO"
        );
        r.sample(Duration::from_ms(100));
        assert_eq!(r.srtt_ns, 100_000_000);
        assert_eq!(r.rttvar_ns, 50_000_000);
        // 4·RTTVAR = 200 ms = rto_min: RTO = 300 ms.
        assert_eq!(r.rto(), Duration::from_ms(300));
        r.sample(Duration::from_ms(180));
        // RTTVAR = 3/4·50 + 1/4·80 = 57.5 ms; SRTT = 7/8·100 + 1/8·180 = 110 ms.
        assert_eq!(r.rttvar_ns, 57_500_000);
        assert_eq!(r.srtt_ns, 110_000_000);
        assert_eq!(r.rto(), Duration::from_ms(340));
    }

    #[test]
    fn linux_min_rto_and_backoff() {
        let mut r = RttEstimator::new(Duration::from_ms(200), Duration::from_ms(1000));
        for _ in 0..50 {
            r.sample(Duration::from_ms(10));
        }
        // Variance collapses; Linux still waits SRTT + 200 ms.
        assert_eq!(r.rto(), Duration::from_ms(210));
        r.backoff = 3;
        assert_eq!(r.rto(), Duration::from_ms(1680));
        r.backoff = 30;
        assert_eq!(r.rto(), Duration::from_ms(120_000), "capped at TCP_RTO_MAX");
    }
}
