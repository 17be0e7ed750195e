//! Which station's queue the access point serves next, and how much airtime a station may
//! have queued below mac80211 (Airtime Queue Limits).
//!
//! The airtime-fairness scheduler is mac80211's deficit round robin on airtime (the
//! scheduler of Linux 5.0–5.18 `ieee80211_next_txq`, from ath9k's): active stations sit in
//! a round-robin list; the head is served if its deficit is not negative, otherwise it gets
//! its weight (default 256 µs, `IEEE80211_DEFAULT_AIRTIME_WEIGHT`) added and moves to the
//! tail; the airtime of every transmission is charged to its station's deficit when it
//! completes (`ieee80211_sta_register_airtime`). With equal weights every backlogged
//! station gets the same share of airtime, whatever its rate.
//!
//! AQL (`IEEE80211_DEFAULT_AQL_TXQ_LIMIT_L/H`, `IEEE80211_AQL_THRESHOLD`): a station may
//! have at most 12 ms of estimated airtime queued in the driver/firmware, or 5 ms while the
//! whole interface has more than 24 ms queued.

/// Kernel defaults, in µs.
pub const DEFAULT_AIRTIME_WEIGHT_US: u32 = 256;
pub const AQL_TXQ_LIMIT_LOW_US: u64 = 5_000;
pub const AQL_TXQ_LIMIT_HIGH_US: u64 = 12_000;
pub const AQL_THRESHOLD_US: u64 = 24_000;

/// How the next station is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// One transmission opportunity per backlogged station in turn.
    RoundRobin,
    /// Deficit round robin on airtime.
    Airtime,
}

/// Round robin over stations, optionally with airtime deficits.
pub struct Scheduler {
    policy: Policy,
    /// Per station: weight (µs per round) and deficit (ns).
    weight_ns: Vec<i64>,
    deficit_ns: Vec<i64>,
    /// Round-robin position: the station served first next time.
    next: usize,
}

impl Scheduler {
    pub fn new(policy: Policy, weights_us: &[u32]) -> Scheduler {
        Scheduler {
            policy,
            weight_ns: weights_us.iter().map(|&w| w as i64 * 1000).collect(),
            deficit_ns: vec![0; weights_us.len()],
            next: 0,
        }
    }

    /// The station to serve among those for which `ready(s)` holds, `None` if none is.
    /// Deterministic: stations are visited in index order from the round-robin position.
    pub fn pick(&mut self, ready: impl Fn(usize) -> bool) -> Option<usize> {
        let n = self.weight_ns.len();
        if n == 0 || !(0..n).any(&ready) {
            return None;
        }
        match self.policy {
            Policy::RoundRobin => {
                let s = (0..n).map(|k| (self.next + k) % n).find(|&s| ready(s))?;
                self.next = (s + 1) % n;
                Some(s)
            }
            Policy::Airtime => loop {
                // Visiting only ready stations is the kernel's active list: a station
                // with nothing queued is not on it and gets no refills.
                let start = self.next;
                for k in 0..n {
                    let s = (start + k) % n;
                    if !ready(s) {
                        continue;
                    }
                    if self.deficit_ns[s] >= 0 {
                        // Served; stays at the head until its deficit runs out.
                        self.next = s;
                        return Some(s);
                    }
                    self.deficit_ns[s] += self.weight_ns[s];
                    self.next = (s + 1) % n;
                }
            },
        }
    }

    /// Charges `airtime_ns` used by (or for) station `s`.
    pub fn charge(&mut self, s: usize, airtime_ns: u64) {
        if self.policy == Policy::Airtime {
            self.deficit_ns[s] -= airtime_ns as i64;
        }
    }
}

/// The AQL limit of one station in ns, given the interface's total queued airtime.
pub fn aql_limit_ns(
    interface_pending_ns: u64,
    low_us: u64,
    high_us: u64,
    threshold_us: u64,
) -> u64 {
    if interface_pending_ns > threshold_us * 1000 {
        low_us * 1000
    } else {
        high_us * 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_skips_idle_stations() {
        let mut s = Scheduler::new(Policy::RoundRobin, &[256, 256, 256]);
        let ready = |i: usize| i != 1;
        assert_eq!(s.pick(ready), Some(0));
        assert_eq!(s.pick(ready), Some(2));
        assert_eq!(s.pick(ready), Some(0));
        assert_eq!(s.pick(|_| false), None);
    }

    #[test]
    fn airtime_drr_gives_equal_airtime_to_unequal_transmissions() {
        let mut s = Scheduler::new(Policy::Airtime, &[256, 256]);
        // Station 0's transmissions take 2 ms, station 1's 0.25 ms: over a long run
        // each should get half the airtime, i.e. station 1 eight times the turns.
        let mut air = [0u64; 2];
        let mut turns = [0u64; 2];
        for _ in 0..9000 {
            let st = s.pick(|_| true).unwrap();
            let t = if st == 0 { 2_000_000 } else { 250_000 };
            s.charge(st, t);
            air[st] += t;
            turns[st] += 1;
        }
        let share0 = air[0] as f64 / (air[0] + air[1]) as f64;
        assert!((share0 - 0.5).abs() < 0.01, "share {share0}");
        assert!((turns[1] as f64 / turns[0] as f64 - 8.0).abs() < 0.2);
    }

    #[test]
    fn aql_switches_to_the_low_limit_above_24_ms() {
        assert_eq!(aql_limit_ns(24_000_000, 5_000, 12_000, 24_000), 12_000_000);
        assert_eq!(aql_limit_ns(24_000_001, 5_000, 12_000, 24_000), 5_000_000);
    }
}
