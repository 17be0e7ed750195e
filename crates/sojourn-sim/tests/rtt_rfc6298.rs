//! The RTT estimator and RTO (`tcp/rtt.rs`) against RFC 6298 and Linux's choices, pinned by
//! mutation testing (docs/testing.md, "Scores (session 7)"). Every number is worked by hand
//! from the RFC's rules:
//! - §2.1: before any measurement RTO = 1 s;
//! - §2.2: the first measurement R gives SRTT = R, RTTVAR = R/2;
//! - §2.3: later ones RTTVAR = (1 − β)·RTTVAR + β·|SRTT − R'| with the *old* SRTT, then
//!   SRTT = (1 − α)·SRTT + α·R', α = 1/8, β = 1/4;
//! - RTO = SRTT + max(G, K·RTTVAR), K = 4, with Linux's 200-ms minimum taking G's place
//!   (`__tcp_set_rto`: `srtt + max(4·rttvar, rto_min)`, so never below SRTT + 200 ms);
//! - §5.5: each expiry doubles the RTO; Linux caps it at 120 s (`TCP_RTO_MAX`; §2.5 allows
//!   a maximum of at least 60 s);
//! - Linux's `tcp_rtt_estimator` keeps SRTT at least 1 (a 0 measurement still counts).
//!
//! Also the simulator's addresses (`tcp::node_addr`): node n is the IPv4 address with
//! those 32 bits, or the IPv6 unique local address fd00::n (RFC 4193).

use sojourn_core::packet::Addr;
use sojourn_core::{Duration, Time};
use sojourn_sim::tcp::node_addr;
use sojourn_sim::tcp::rtt::RttEstimator;

fn linux() -> RttEstimator {
    RttEstimator::new(Duration::from_ms(200), Duration::from_ms(1000))
}

const MS: u64 = 1_000_000;

#[test]
fn before_the_first_measurement_the_rto_is_one_second() {
    let r = linux();
    assert!(!r.has_sample());
    assert_eq!(r.srtt(), Duration(0));
    assert_eq!(r.base_rto(), Duration(1000 * MS));
    assert_eq!(r.rto(), Duration(1000 * MS));
    // An RTO armed at 2 s expires at 3 s.
    assert_eq!(r.rto_deadline(Time(2000 * MS)), Time(3000 * MS));
}

/// R = 300 ms: SRTT 300 ms, RTTVAR 150 ms, RTO = 300 + max(600, 200) = 900 ms.
#[test]
fn the_first_measurement_sets_srtt_and_half_of_it_as_rttvar() {
    let mut r = linux();
    r.sample(Duration(300 * MS));
    assert!(r.has_sample());
    assert_eq!(r.srtt(), Duration(300 * MS));
    assert_eq!(r.rttvar_ns, 150 * MS);
    assert_eq!(r.rto(), Duration(900 * MS));
    assert_eq!(r.rto_deadline(Time(1000 * MS)), Time(1900 * MS));
    assert_eq!((r.min_rtt_ns, r.latest_ns), (300 * MS, 300 * MS));
}

/// After R = 300 ms, R' = 100 ms: |SRTT − R'| = 200 ms with the old SRTT, so RTTVAR =
/// 3/4·150 + 1/4·200 = 162.5 ms, SRTT = 7/8·300 + 1/8·100 = 275 ms, RTO = 275 + 650 = 925
/// ms. (SRTT updated first would give RTTVAR 156.25 ms.) Then R'' = 400 ms: |275 − 400| =
/// 125, RTTVAR = 3/4·162.5 + 1/4·125 = 153.125 ms, SRTT = 7/8·275 + 1/8·400 = 290.625 ms.
#[test]
fn later_measurements_use_gains_one_eighth_and_one_quarter() {
    let mut r = linux();
    r.sample(Duration(300 * MS));
    r.sample(Duration(100 * MS));
    assert_eq!(r.rttvar_ns, 162_500_000);
    assert_eq!(r.srtt_ns, 275_000_000);
    assert_eq!(r.rto(), Duration(925 * MS));
    r.sample(Duration(400 * MS));
    assert_eq!(r.rttvar_ns, 153_125_000);
    assert_eq!(r.srtt_ns, 290_625_000);
    assert_eq!(r.rto(), Duration(290_625_000 + 612_500_000));
    assert_eq!((r.min_rtt_ns, r.latest_ns), (100 * MS, 400 * MS));
}

/// Linux's minimum applies to the variance term: with RTTVAR near 0 the RTO is SRTT + 200
/// ms. Samples of exactly 40 ms from the start: RTTVAR 20, 15, 11.25, … ms; once 4·RTTVAR <
/// 200 ms (from the first sample on: 80 ms) the RTO is 240 ms.
#[test]
fn the_minimum_of_200_ms_is_added_to_srtt() {
    let mut r = linux();
    r.sample(Duration(40 * MS));
    assert_eq!(r.rto(), Duration(240 * MS));
    for _ in 0..5 {
        r.sample(Duration(40 * MS));
    }
    assert_eq!(r.srtt_ns, 40 * MS);
    assert_eq!(r.rto(), Duration(240 * MS));
}

/// A measurement of 0 (a timestamp echo in the same nanosecond) still counts: SRTT 1 ns,
/// RTO 200 ms + 1 ns.
#[test]
fn a_zero_measurement_counts_as_one_nanosecond() {
    let mut r = linux();
    r.sample(Duration(0));
    assert!(r.has_sample());
    assert_eq!(r.srtt(), Duration(1));
    assert_eq!(r.rto(), Duration(200 * MS + 1));
}

/// §5.5: 900 ms doubles to 1.8, 3.6, 7.2 s; the initial 1 s to 8 s after three expiries;
/// never above 120 s, however many expiries (also past 2^64 ns).
#[test]
fn each_expiry_doubles_the_rto_up_to_120_s() {
    let mut r = linux();
    r.backoff = 3;
    assert_eq!(r.rto(), Duration(8000 * MS));
    r.sample(Duration(300 * MS));
    r.backoff = 0;
    assert_eq!(r.rto(), Duration(900 * MS));
    r.backoff = 1;
    assert_eq!(r.rto(), Duration(1800 * MS));
    r.backoff = 3;
    assert_eq!(r.rto(), Duration(7200 * MS));
    assert_eq!(
        r.base_rto(),
        Duration(900 * MS),
        "the base does not back off"
    );
    r.backoff = 100;
    assert_eq!(r.rto(), Duration(120_000 * MS));
}

/// A 200-s measurement: SRTT + 4·RTTVAR = 600 s, capped at 120 s even without backoff.
#[test]
fn the_rto_never_exceeds_120_s() {
    let mut r = linux();
    r.sample(Duration(200_000 * MS));
    assert_eq!(r.base_rto(), Duration(120_000 * MS));
    assert_eq!(r.rto(), Duration(120_000 * MS));
}

/// Node 5 is 0.0.0.5 (as `::ffff:0.0.0.5`), or fd00::5 over IPv6.
#[test]
fn node_addresses_are_the_node_number() {
    assert_eq!(node_addr(5, false), Addr::v4(5));
    assert_eq!(node_addr(5, false).v4_bits(), Some(5));
    let mut o = [0u8; 16];
    o[0] = 0xfd;
    o[15] = 5;
    assert_eq!(node_addr(5, true).octets(), o);
    assert_eq!(node_addr(0x0102_0304, true).low32(), 0x0102_0304);
}
