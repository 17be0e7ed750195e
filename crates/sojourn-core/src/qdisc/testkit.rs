//! Shared test harness for disciplines: synthetic packets and the conservation property
//! (every packet offered leaves exactly once, as a delivery or as a drop, and limits hold).

use super::vocab::{BuildCtx, Dequeue, Drops, Qdisc, Verdict};
use crate::packet::{Ecn, Packet};
use crate::params::{ConfResult, Params, Table, Value};
use crate::rng::Rng;
use crate::time::{Duration, Time};
use std::collections::HashSet;

/// An iteration cap for a test loop whose progress depends on the code under test: a
/// mutated law must fail the test with a message naming the loop, never hang it.
pub struct Bound {
    left: u64,
    what: &'static str,
}

impl Bound {
    /// At most `cap` iterations of the loop described by `what`.
    pub fn new(cap: u64, what: &'static str) -> Self {
        Bound { left: cap, what }
    }

    /// Counts one iteration; fails the test once the loop has run `cap` times.
    #[track_caller]
    pub fn tick(&mut self) {
        assert!(
            self.left > 0,
            "test loop did not finish within its iteration cap: {}",
            self.what
        );
        self.left -= 1;
    }
}

/// Builds a discipline from `(key, value)` parameters through its `from_params`, rejecting
/// unread keys as the registry does (path `q`).
pub fn build_from<Q>(
    from_params: impl Fn(&mut Params, &BuildCtx) -> ConfResult<Q>,
    pairs: Vec<(&str, Value)>,
    ctx: &BuildCtx,
) -> ConfResult<Q> {
    let table = Table(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
    let mut p = Params::new("q", &table);
    let q = from_params(&mut p, ctx)?;
    p.finish()?;
    Ok(q)
}

/// CoDel parameters varied by `seed` for property tests: ECN on for even seeds, target
/// 0.5–11.5 ms, interval 5–16 ms, a 1-ms `ce_threshold` on every third seed.
pub fn varied_codel_params(seed: u64) -> super::codel_law::CodelParams {
    let mut params = super::codel_law::CodelParams::linux_default(1514);
    params.ecn = seed.is_multiple_of(2);
    params.target = Duration::from_us(500 + 1000 * seed);
    params.interval = Duration::from_ms(5 + seed);
    if seed.is_multiple_of(3) {
        params.ce_threshold = Some(Duration::from_ms(1));
    }
    params
}

/// The key path the registry names when building `kind` with `key = value` fails.
pub fn rejected_path(kind: &str, key: &str, value: Value) -> String {
    let mut t = Table::default();
    t.insert("kind", Value::Str(kind.into()));
    t.insert(key, value);
    match super::build(&Value::Table(t), "q", &BuildCtx::default()) {
        Err(e) => e.path,
        Ok(_) => panic!("{kind} accepted {key}"),
    }
}

/// A synthetic packet of `len` bytes in flow `flow`.
pub fn pkt(uid: u64, flow: u32, len: u32) -> Packet {
    Packet::synthetic(uid, flow, len)
}

/// Drives `q` with `n` random operations (arrivals from up to 40 flows with sizes 64–1514 B,
/// half of them ECN-capable, dequeues, time jumps up to 5 ms), then drains it. Asserts
/// conservation (each uid delivered or dropped exactly once, nothing invented), that
/// `len_packets`/`len_bytes` agree with the count of packets inside, and `limit_ok` after
/// every operation. Panics on violation.
pub fn check_conservation<Q: Qdisc>(
    q: &mut Q,
    seed: u64,
    n: usize,
    limit_ok: impl Fn(&Q) -> bool,
) -> Trace {
    check_conservation_with(q, seed, n, limit_ok, |_, _| {})
}

/// What became of each packet, in order: `(time ns, uid, outcome)` with outcome −1 for a
/// delivery and the [`DropReason`](super::DropReason) number for a drop. Two runs of the
/// same discipline and seed must give the same trace (determinism).
pub type Trace = Vec<(u64, u64, i8)>;

/// [`check_conservation`] with `shape(&mut packet, now)` applied to every synthetic packet
/// before it is offered, so a test can give packets sockets, pacing rates, DSCPs, TCP
/// headers… (`len_bytes` must not be changed: the accounting relies on it). Returns the
/// run's [`Trace`].
pub fn check_conservation_with<Q: Qdisc>(
    q: &mut Q,
    seed: u64,
    n: usize,
    limit_ok: impl Fn(&Q) -> bool,
    mut shape: impl FnMut(&mut Packet, Time),
) -> Trace {
    let mut trace: Trace = Vec::new();
    let mut rng = Rng::from_seed(seed);
    let mut drops = Drops::new();
    let mut now = Time(1_000);
    let mut offered: HashSet<u64> = HashSet::new();
    let mut gone: HashSet<u64> = HashSet::new();
    let mut inside_pkts: i64 = 0;
    let mut inside_bytes: i64 = 0;
    let mut sizes = std::collections::HashMap::new();
    let nflows = 1 + rng.below(40) as u32;
    let settle = |drops: &mut Drops,
                  gone: &mut HashSet<u64>,
                  inside_pkts: &mut i64,
                  inside_bytes: &mut i64,
                  sizes: &std::collections::HashMap<u64, u32>,
                  trace: &mut Trace,
                  now: Time| {
        for d in drops.drain() {
            trace.push((now.0, d.pkt.uid, d.reason as i8));
            assert!(
                gone.insert(d.pkt.uid),
                "packet {} dropped twice or after delivery",
                d.pkt.uid
            );
            *inside_pkts -= 1;
            *inside_bytes -= sizes[&d.pkt.uid] as i64;
        }
    };
    for uid in 0..n as u64 {
        match rng.below(10) {
            0..=5 => {
                let flow = rng.below(nflows as u64) as u32;
                let len = if rng.chance(0.3) {
                    64 + rng.below(200) as u32
                } else {
                    1000 + rng.below(515) as u32
                };
                let mut p = pkt(uid, flow, len);
                if rng.chance(0.5) {
                    p.ecn = Ecn::Ect0;
                }
                p.enqueued_at = now;
                p.priority = rng.below(4) as u32;
                shape(&mut p, now);
                debug_assert_eq!(p.len_bytes, len, "shape must not change the length");
                offered.insert(uid);
                sizes.insert(uid, len);
                inside_pkts += 1;
                inside_bytes += len as i64;
                let v = q.enqueue(p, now, &mut drops);
                if v == Verdict::Dropped {
                    assert!(
                        drops.as_slice().iter().any(|d| d.pkt.uid == uid),
                        "Verdict::Dropped but arrival not in sink"
                    );
                }
                settle(
                    &mut drops,
                    &mut gone,
                    &mut inside_pkts,
                    &mut inside_bytes,
                    &sizes,
                    &mut trace,
                    now,
                );
            }
            6..=8 => {
                match q.dequeue(now, &mut drops) {
                    Dequeue::Packet(p) => {
                        assert!(offered.contains(&p.uid), "dequeued a packet never offered");
                        assert!(gone.insert(p.uid), "packet {} delivered twice", p.uid);
                        trace.push((now.0, p.uid, -1));
                        inside_pkts -= 1;
                        inside_bytes -= sizes[&p.uid] as i64;
                    }
                    Dequeue::Empty => {}
                    Dequeue::NotBefore(t) => assert!(t > now, "NotBefore must be in the future"),
                }
                settle(
                    &mut drops,
                    &mut gone,
                    &mut inside_pkts,
                    &mut inside_bytes,
                    &sizes,
                    &mut trace,
                    now,
                );
            }
            _ => now += Duration(rng.below(5_000_000)),
        }
        assert_eq!(
            q.len_packets() as i64,
            inside_pkts,
            "len_packets disagrees with packets inside"
        );
        assert_eq!(
            q.len_bytes() as i64,
            inside_bytes,
            "len_bytes disagrees with bytes inside"
        );
        assert!(limit_ok(q), "limit violated");
    }
    // Drain: a work-conserving or shaped qdisc must eventually hand everything out.
    let mut guard = 0;
    loop {
        guard += 1;
        assert!(guard < 10_000_000, "drain did not terminate");
        match q.dequeue(now, &mut drops) {
            Dequeue::Packet(p) => {
                assert!(gone.insert(p.uid), "packet {} delivered twice", p.uid);
                trace.push((now.0, p.uid, -1));
                inside_pkts -= 1;
                inside_bytes -= sizes[&p.uid] as i64;
            }
            Dequeue::Empty => {
                settle(
                    &mut drops,
                    &mut gone,
                    &mut inside_pkts,
                    &mut inside_bytes,
                    &sizes,
                    &mut trace,
                    now,
                );
                if q.len_packets() == 0 {
                    break;
                }
                // Empty with packets inside is allowed only transiently; move time on.
                now += Duration::from_ms(1);
            }
            Dequeue::NotBefore(t) => {
                assert!(t > now);
                now = t;
            }
        }
        settle(
            &mut drops,
            &mut gone,
            &mut inside_pkts,
            &mut inside_bytes,
            &sizes,
            &mut trace,
            now,
        );
    }
    assert_eq!(inside_pkts, 0);
    assert_eq!(inside_bytes, 0);
    assert_eq!(q.len_bytes(), 0);
    assert_eq!(gone, offered, "some packet vanished");
    trace
}
