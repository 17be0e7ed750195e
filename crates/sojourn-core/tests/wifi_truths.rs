//! Truths of the Wi-Fi medium, against numbers worked by hand from the 802.11 timing
//! constants (not from the code's own functions). Throughputs are of IP packets (1500 B;
//! the simulator's 1514-byte lengths include the Ethernet header).
//!
//! Fixed costs of one opportunity, AC_BE, 5 GHz OFDM: AIFS 16 + 3 × 9 = 43 µs; mean
//! backoff 15 / 2 × 9 = 67.5 µs; SIFS 16 µs; block ack at 24 Mbit/s 20 + 3 × 4 = 32 µs.
//! Total 158.5 µs plus the PPDU. A 1500-byte IP packet is a 1538-byte MPDU (26 + 8 + 4
//! bytes of 802.11 header, LLC/SNAP, FCS), a 1542-byte A-MPDU subframe with its
//! delimiter, 1544 when padded (every subframe but the last).

use sojourn_core::qdisc::Drops;
use sojourn_core::rng::Rng;
use sojourn_core::wifi::{Dir, Mac, Medium, PhyRate, Rate, Standard, StationConfig, WifiConfig};
use sojourn_core::{Packet, Time};

const IP_BITS: f64 = 1500.0 * 8.0;

fn ht20(mcs: u8, streams: u8, gi_ns: u32) -> Rate {
    Rate::Phy(PhyRate {
        standard: Standard::Ht,
        width_mhz: 20,
        mcs,
        streams,
        gi_ns,
    })
}

/// 6.5 Mbit/s (HT20 MCS 0, long GI) and 144.4 Mbit/s (HT20 MCS 15, short GI).
fn slow() -> Rate {
    ht20(0, 1, 800)
}
fn fast() -> Rate {
    ht20(7, 2, 400)
}

struct Run {
    medium: Medium,
    uid: u64,
    /// (station, enqueue time, delivery time) of packets to watch.
    watched: Vec<(usize, Time, Time)>,
}

impl Run {
    fn new(cfg: WifiConfig, rates: &[Rate]) -> Run {
        let stations = rates.iter().map(|&r| StationConfig::fixed(r)).collect();
        Run {
            medium: Medium::new(cfg, stations, Rng::stream(1, "wifi", 0)),
            uid: 0,
            watched: Vec::new(),
        }
    }

    fn send(&mut self, sta: usize, len: u32, flow: u32, now: Time, drops: &mut Drops) {
        self.uid += 1;
        let mut p = Packet::synthetic(self.uid, flow, len);
        p.created_at = now;
        self.medium.enqueue(Dir::Down, sta, p, now, drops);
    }

    /// Runs for `secs`, keeping the downlink queues of `saturated` stations above
    /// `backlog` packets (enqueued in turn, so a FIFO interleaves them), and sending a
    /// 100-byte ping to `ping` every 10 ms if set. Returns delivered downlink bits per
    /// second per station, measured after the first second.
    fn go(
        &mut self,
        secs: u64,
        saturated: &[usize],
        backlog: u64,
        ping: Option<usize>,
        uplink: &[usize],
    ) -> Vec<f64> {
        let mut drops = Drops::new();
        let mut now = Time::ZERO;
        let end = Time::from_ns(secs * 1_000_000_000);
        let warm = Time::from_ns(1_000_000_000);
        let n = self.medium.stations();
        let mut bits = vec![0.0; n];
        let mut next_ping = Time::ZERO;
        let mut sent_at = std::collections::HashMap::new();
        while now < end {
            // Top up each saturated station's queue; stop at the first drop.
            for &s in saturated {
                while self.medium.queued(Dir::Down, s) < backlog && drops.is_empty() {
                    self.send(s, 1514, s as u32, now, &mut drops);
                }
            }
            assert!(drops.is_empty(), "the test's backlog fits the queues");
            for &s in uplink {
                while self.medium.queued(Dir::Up, s) < 200 {
                    self.uid += 1;
                    let p = Packet::synthetic(self.uid, 100 + s as u32, 1514);
                    self.medium.enqueue(Dir::Up, s, p, now, &mut drops);
                }
            }
            if let Some(p) = ping {
                if now >= next_ping {
                    self.send(p, 114, 1000, now, &mut drops);
                    sent_at.insert(self.uid, now);
                    next_ping += sojourn_core::Duration::from_ms(10);
                }
            }
            let Some(t) = self.medium.poll(now) else {
                now = next_ping;
                continue;
            };
            now = t;
            let watched = &mut self.watched;
            self.medium.tx_done(now, &mut drops, |dir, sta, pkt| {
                if dir == Dir::Up {
                    return;
                }
                if pkt.len_bytes == 114 {
                    if let Some(&at) = sent_at.get(&pkt.uid) {
                        if at >= warm {
                            watched.push((sta, at, now));
                        }
                    }
                } else if now >= warm {
                    bits[sta] += IP_BITS;
                }
            });
            drops.clear();
        }
        let span = (secs - 1) as f64;
        bits.iter().map(|b| b / span / 1e6).collect()
    }
}

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * want
}

/// Downlink throughputs (Mbit/s) of a saturated slow and fast station over 20 s.
fn saturate_slow_and_fast(cfg: WifiConfig) -> Vec<f64> {
    Run::new(cfg, &[slow(), fast()]).go(21, &[0, 1], 450, None, &[])
}

fn one_frame(mac: Mac) -> WifiConfig {
    WifiConfig {
        mac,
        ampdu_max_frames: 1,
        collisions: false,
        ..WifiConfig::default()
    }
}

/// Rate anomaly: per-packet fairness gives both stations the same packet rate.
/// Before overheads: 1 / (1/6.5 + 1/144.4) = 6.22 Mbit/s each. With one frame per
/// opportunity (a 1542-byte PSDU): at 6.5 Mbit/s 36 µs preamble + ceil(12358 / 26) =
/// 476 symbols × 4 µs = 1940 µs; at 144.4, 40 µs + roundup4(ceil(12358 / 520) = 24 ×
/// 3.6 µs) = 128 µs. With the 158.5 µs of fixed costs: 2098.5 and 286.5 µs per packet;
/// both get 12000 bits per 2385 µs = 5.031 Mbit/s.
#[test]
fn rate_anomaly_with_per_packet_fairness() {
    let tput = saturate_slow_and_fast(one_frame(Mac::Fifo));
    assert!(close(tput[0], 5.031, 0.02), "slow {tput:?}");
    assert!(close(tput[1], 5.031, 0.02), "fast {tput:?}");
}

/// Airtime fairness: half the airtime each; before overheads 3.25 and 72.2 Mbit/s. With
/// one frame per opportunity (times above): 0.5 × 12000 / 2098.5 µs = 2.859 and
/// 0.5 × 12000 / 286.5 µs = 20.94 Mbit/s.
#[test]
fn airtime_fairness_one_frame() {
    let tput = saturate_slow_and_fast(one_frame(Mac::Airtime));
    assert!(close(tput[0], 2.859, 0.03), "slow {tput:?}");
    assert!(close(tput[1], 20.94, 0.03), "fast {tput:?}");
}

/// Airtime fairness with 4-ms aggregates. Slow: 2 frames (3086-byte PSDU, 24710 bits,
/// 951 symbols, 3840 µs; 3 frames would take 5704 µs > 4 ms), an opportunity of
/// 3998.5 µs carrying 24000 bits. Fast: the HT A-MPDU limit of 65535 bytes allows 42
/// frames (42 × 1544 − 2 = 64846 bytes; 43 would be 66390), 518790 bits, 998 symbols
/// × 3.6 = 3592.8 → 3596 µs + 40 = 3636 µs, an opportunity of 3794.5 µs carrying
/// 504000 bits. Half the airtime each: 3.001 and 66.41 Mbit/s (ideal: 3.25 and 72.2).
#[test]
fn airtime_fairness_with_aggregation() {
    let tput = saturate_slow_and_fast(WifiConfig {
        collisions: false,
        ..WifiConfig::default()
    });
    assert!(close(tput[0], 3.001, 0.03), "slow {tput:?}");
    assert!(close(tput[1], 66.41, 0.03), "fast {tput:?}");
}

/// Aggregation: one saturated station at VHT 80 MHz MCS 9, two streams, short GI
/// (866.7 Mbit/s, 3120 bits per symbol, preamble 20 + 16 + 2 × 4 = 44 µs).
/// 1 frame: ceil(12358 / 3120) = 4 symbols × 3.6 = 14.4 → 16 µs; PPDU 60 µs; 12000 bits
/// per 218.5 µs = 54.92 Mbit/s. 16 frames: 24702 bytes, 197638 bits, 64 symbols = 230.4
/// → 232 µs, PPDU 276 µs; 192000 bits per 434.5 µs = 441.9 Mbit/s. 64 frames: 98814
/// bytes, 790534 bits, 254 symbols = 914.4 → 916 µs, PPDU 960 µs; 768000 bits per
/// 1118.5 µs = 686.6 Mbit/s.
#[test]
fn throughput_follows_aggregation_size() {
    let vht = Rate::Phy(PhyRate {
        standard: Standard::Vht,
        width_mhz: 80,
        mcs: 9,
        streams: 2,
        gi_ns: 400,
    });
    for (frames, want) in [(1, 54.92), (16, 441.9), (64, 686.6)] {
        let cfg = WifiConfig {
            ampdu_max_frames: frames,
            ..WifiConfig::default()
        };
        let mut r = Run::new(cfg, &[vht]);
        let tput = r.go(6, &[0], 1500, None, &[]);
        assert!(
            close(tput[0], want, 0.02),
            "{frames} frames: {tput:?} vs {want}"
        );
    }
}

/// Latency: a ping to an idle station while another downloads at 144.4 Mbit/s. With
/// FQ-CoDel, airtime fairness and AQL it waits at most for the download's current
/// opportunity (≤ 4 ms PPDU + 158.5 µs) and its own: within 5 ms.
#[test]
fn ping_to_idle_station_stays_low_with_fq_and_aql() {
    let mut r = Run::new(WifiConfig::default(), &[fast(), fast()]);
    r.go(6, &[0], 2000, Some(1), &[]);
    assert!(r.watched.len() > 400);
    let worst = r
        .watched
        .iter()
        .map(|&(_, a, b)| (b - a).as_millis_f64())
        .fold(0.0, f64::max);
    assert!(worst < 5.0, "worst ping delay {worst} ms");
}

/// Without them (one 1000-packet FIFO above a 128-packet driver queue, kept nearly
/// full: 989 + 128 download packets, room left for the ~9 pings in flight), the ping
/// waits behind the FIFO's ~990 packets plus earlier pings, about 1000 packets' airtime: at 42 frames per 3794.5-µs opportunity (90.35 µs per packet)
/// that is 1000 × 90.35 µs = 90.4 ms, plus at most one opportunity.
#[test]
fn ping_waits_behind_the_fifo_without_them() {
    let cfg = WifiConfig {
        mac: Mac::Fifo,
        ..WifiConfig::default()
    };
    let mut r = Run::new(cfg, &[fast(), fast()]);
    r.go(6, &[0], 1117, Some(1), &[]);
    assert!(r.watched.len() > 400);
    let mean = r
        .watched
        .iter()
        .map(|&(_, a, b)| (b - a).as_millis_f64())
        .sum::<f64>()
        / r.watched.len() as f64;
    assert!(close(mean, 90.4, 0.06), "mean ping delay {mean} ms");
}

/// Same seed, same run: the medium is deterministic.
#[test]
fn deterministic_for_a_seed() {
    let run = || {
        let mut r = Run::new(WifiConfig::default(), &[slow(), fast(), fast()]);
        let t = r.go(3, &[0, 1, 2], 300, None, &[1, 2]);
        (t, r.medium.stats.collisions)
    };
    let (a, b) = (run(), run());
    assert_eq!(a.0, b.0);
    assert_eq!(a.1, b.1);
    assert!(a.1 > 0, "three contenders collide sometimes");
}
