//! TBF — token bucket filter (Linux `sch_tbf`), a shaper over any child qdisc.
//!
//! Tokens are kept as *time*, in nanoseconds, like the kernel: the bucket holds at most
//! `buffer = burst / rate` ns of transmission, refills with elapsed time, and a packet of
//! `len` bytes costs `len / rate` ns (`psched_l2t_ns`). With `peakrate`, a second bucket
//! of one `mtu` at the peak rate limits the burst's own speed.
//!
//! Dequeue peeks at the child's head by dequeuing it and keeping it aside (the kernel's
//! `qdisc_peek_dequeued`); it leaves when both buckets have enough tokens, otherwise
//! `dequeue` answers `NotBefore(now + missing tokens)` — the qdisc watchdog.
//! Packets larger than `burst` (or `mtu` with peakrate) could never leave and are dropped
//! at enqueue, as in the kernel. The default child is a bfifo of `limit` bytes
//! (tc: `limit`, or `latency` → `limit = rate·latency + burst`).

use super::vocab::{
    tc_rate, tc_size, BuildCtx, Dequeue, Discipline, DropReason, Drops, Facts, NotLinux, Qdisc,
    TcKey, Verdict,
};
use super::{AnyQdisc, Classful, QdiscSpec};
use crate::packet::Packet;
use crate::params::{ConfError, ConfResult, Params, Table, Value};
use crate::time::{Duration, Time};

/// `psched_l2t_ns`: time to send `len` bytes at `rate_bps`, truncated like the kernel's
/// multiply-shift.
#[inline]
fn l2t_ns(rate_bps: u64, len: u64) -> i64 {
    (len as u128 * 8_000_000_000 / rate_bps as u128) as i64
}

pub struct Tbf {
    rate_bps: u64,
    /// 0 when there is no peak-rate bucket.
    peak_rate_bps: u64,
    /// Bucket depth as time (`q->buffer`).
    buffer_ns: i64,
    /// Peak bucket depth as time (`q->mtu`).
    mtu_ns: i64,
    /// Largest packet that can ever pass (`q->max_size`).
    max_size: u32,
    burst_bytes: u64,
    /// Tokens (ns) at the last checkpoint.
    tokens: i64,
    ptokens: i64,
    /// Last checkpoint (`q->t_c`).
    t_c: Time,
    child: AnyQdisc,
    /// The child's head, dequeued to look at it (`qdisc_peek_dequeued`).
    stash: Option<Packet>,
}

impl Tbf {
    /// A TBF at `rate_bps` with a bucket of `burst_bytes`; `peak` = (peak rate, mtu bytes).
    pub fn new(rate_bps: u64, burst_bytes: u64, peak: Option<(u64, u64)>, child: AnyQdisc) -> Tbf {
        assert!(rate_bps > 0 && burst_bytes > 0);
        let buffer_ns = l2t_ns(rate_bps, burst_bytes);
        let mut max_size = burst_bytes.min(u32::MAX as u64) as u32;
        let (peak_rate_bps, mtu_ns) = match peak {
            Some((pr, mtu)) => {
                max_size = max_size.min(mtu.min(u32::MAX as u64) as u32);
                (pr, l2t_ns(pr, mtu))
            }
            None => (0, 0),
        };
        Tbf {
            rate_bps,
            peak_rate_bps,
            buffer_ns,
            mtu_ns,
            max_size,
            burst_bytes,
            tokens: buffer_ns,
            ptokens: mtu_ns,
            t_c: Time::ZERO,
            child,
            stash: None,
        }
    }

    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }
    pub fn burst_bytes(&self) -> u64 {
        self.burst_bytes
    }
    pub fn child(&self) -> &AnyQdisc {
        &self.child
    }
}

impl Qdisc for Tbf {
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        if pkt.len_bytes > self.max_size {
            // tbf_segment: a GSO buffer whose segments fit is cut into them, each
            // enqueued on its own (the engine counts the extra packets).
            let headers = pkt.len_bytes.saturating_sub(pkt.hdr.payload_bytes) / pkt.wire_packets();
            if pkt.gso_segs > 1 && pkt.gso_size as u32 + headers <= self.max_size {
                let mut verdict = Verdict::Dropped;
                let mut segs = Vec::with_capacity(pkt.gso_segs as usize);
                pkt.gso_segment(|seg| segs.push(seg));
                for seg in segs {
                    if self.child.enqueue(seg, now, drops) != Verdict::Dropped {
                        verdict = Verdict::Queued;
                    }
                }
                return verdict;
            }
            // Bigger than the bucket: it could never be sent.
            drops.push(pkt, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        self.child.enqueue(pkt, now, drops)
    }

    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        let len = match &self.stash {
            Some(p) => p.len_bytes as u64,
            None => match self.child.dequeue(now, drops) {
                Dequeue::Packet(p) => {
                    let len = p.len_bytes as u64;
                    self.stash = Some(p);
                    len
                }
                other => return other,
            },
        };
        // Refill with the time since the last checkpoint, capped at the bucket depth.
        let elapsed = ((now - self.t_c).as_ns().min(i64::MAX as u64) as i64).min(self.buffer_ns);
        let mut ptoks = 0i64;
        if self.peak_rate_bps > 0 {
            ptoks = (elapsed + self.ptokens).min(self.mtu_ns) - l2t_ns(self.peak_rate_bps, len);
        }
        let toks = (elapsed + self.tokens).min(self.buffer_ns) - l2t_ns(self.rate_bps, len);
        if toks >= 0 && ptoks >= 0 {
            self.t_c = now;
            self.tokens = toks;
            self.ptokens = ptoks;
            return Dequeue::Packet(self.stash.take().expect("stashed head"));
        }
        // Watchdog: wake when the scarcer bucket has refilled enough.
        let wait = (-toks).max(-ptoks);
        Dequeue::NotBefore(now + Duration(wait as u64))
    }

    #[inline]
    fn len_packets(&self) -> usize {
        self.child.len_packets() + self.stash.is_some() as usize
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        self.child.len_bytes() + self.stash.map_or(0, |p| p.len_bytes as u64)
    }
    fn ecn_marks(&self) -> u64 {
        self.child.ecn_marks()
    }
    fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
        let elapsed = ((now - self.t_c).as_ns().min(i64::MAX as u64) as i64).min(self.buffer_ns);
        let toks = (elapsed + self.tokens).min(self.buffer_ns);
        emit("tokens_bytes", toks as f64 * self.rate_bps as f64 / 8e9);
        self.child
            .observe(now, &mut |name, v| emit(&format!("child.{name}"), v));
    }
}

/// Builds `tbf rate RATE burst BYTES (limit BYTES | latency TIME) [peakrate RATE mtu BYTES]
/// [child SPEC]`.
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Tbf> {
    Ok(*TbfSpec::parse(p, ctx)?.build(ctx))
}

/// Typed spec of `tbf`: rate, bucket, optional peak bucket and the child (by default the
/// bfifo tbf creates from `limit`).
#[derive(Clone, Debug, PartialEq)]
pub struct TbfSpec {
    /// `rate`, bit/s.
    pub rate_bps: u64,
    /// `burst`, bytes.
    pub burst_bytes: u64,
    /// `peakrate` (bit/s) and `mtu` (bytes), if given.
    pub peak: Option<(u64, u64)>,
    pub child: Box<QdiscSpec>,
}

impl TbfSpec {
    /// Whether the child is the bfifo that tbf's own `limit` makes (then no child line).
    pub fn child_is_default_bfifo(&self) -> bool {
        matches!(*self.child, QdiscSpec::Bfifo(_))
    }
}

impl Discipline for TbfSpec {
    const KIND: &'static str = "tbf";
    const SUMMARY: &'static str = "Token bucket shaper over a child qdisc (Linux sch_tbf)";
    type Qdisc = Box<Tbf>;

    /// Builds `tbf rate RATE burst BYTES (limit BYTES | latency TIME) [peakrate RATE mtu BYTES]
    /// [child SPEC]`.
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let rate = match p.rate_opt("rate")? {
        Some(r) if r > 0 => r,
        Some(_) => return Err(p.err("rate", "rate must be positive")),
        None => return Err(p.err(
            "rate",
            "tbf needs `rate` (tc: the \"rate\" parameter is mandatory), e.g. rate = \"10Mbit\"",
        )),
    };
        let burst = match (p.bytes_opt("burst")?, p.bytes_opt("buffer")?) {
            (Some(_), Some(_)) => {
                return Err(p.err(
                    "buffer",
                    "`buffer` is tc's other name for `burst`; give one",
                ))
            }
            (Some(b), None) | (None, Some(b)) if b > 0 => b,
            (Some(_), None) | (None, Some(_)) => {
                return Err(p.err("burst", "burst must be positive"))
            }
            (None, None) => {
                return Err(p.err(
                    "burst",
                    format!(
                        "tbf needs `burst` (bucket size in bytes; tc: the \"burst\" parameter is \
                     mandatory), at least one MTU ({} B), e.g. burst = \"32KiB\"",
                        ctx.mtu_bytes
                    ),
                ))
            }
        };
        let peakrate = p.rate_opt("peakrate")?.filter(|&r| r > 0);
        let mtu = p.bytes_opt("mtu")?;
        let peak =
            match (peakrate, mtu) {
                (Some(pr), Some(m)) if m > 0 => {
                    if pr <= rate {
                        return Err(p.err(
                            "peakrate",
                            "peakrate must be higher than rate (the kernel refuses otherwise)",
                        ));
                    }
                    Some((pr, m))
                }
                (Some(_), _) => return Err(p.err(
                    "mtu",
                    "with `peakrate`, `mtu` (the peak bucket size in bytes) is required, as in tc",
                )),
                // mtu without peakrate is accepted and unused, as in Linux.
                (None, _) => None,
            };
        let limit = p.bytes_opt("limit")?;
        let latency = p.duration_opt("latency")?;
        let child_spec = p.raw("child");
        let child_path = p.key_path("child");
        let child = match (child_spec, limit, latency) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(p.err(
                    if limit.is_some() { "limit" } else { "latency" },
                    "`limit`/`latency` size tbf's default bfifo; with `child` the child's own \
                 limit applies, so leave them out",
                ))
            }
            (Some(spec), None, None) => QdiscSpec::parse(spec, &child_path, ctx)?,
            (None, Some(_), Some(_)) => {
                return Err(p.err("latency", "give either `limit` or `latency`, not both"))
            }
            (None, None, None) => {
                return Err(p.err(
                    "limit",
                    "tbf needs `limit` (bytes queued) or `latency` (longest wait), as in tc",
                ))
            }
            (None, l, lat) => {
                let bytes = match (l, lat) {
                    (Some(l), _) => l,
                    (None, Some(lat)) => {
                        // tc: limit = rate·latency + burst (and the peak-rate equivalent, if
                        // smaller).
                        let secs = lat.as_secs_f64();
                        let mut lim = rate as f64 / 8.0 * secs + burst as f64;
                        if let Some((pr, m)) = peak {
                            lim = lim.min(pr as f64 / 8.0 * secs + m as f64);
                        }
                        lim as u64
                    }
                    (None, None) => unreachable!(),
                };
                if bytes == 0 || bytes > u32::MAX as u64 {
                    return Err(p.err("limit", format!("{bytes} B is out of range [1, 2^32-1]")));
                }
                let t = Table(vec![("limit".into(), Value::Int(bytes as i64))]);
                QdiscSpec::parse_kind("bfifo", &t, &child_path, ctx)?
            }
        };
        Ok(TbfSpec {
            rate_bps: rate,
            burst_bytes: burst,
            peak,
            child: Box::new(child),
        })
    }

    fn build(&self, ctx: &BuildCtx) -> Box<Tbf> {
        Box::new(Tbf::new(
            self.rate_bps,
            self.burst_bytes,
            self.peak,
            self.child.build(&ctx.child(0)),
        ))
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS);

    /// `rate R burst B [peakrate R mtu M] limit L`. With a child other than bfifo, `limit`
    /// (which tc requires) sizes a bfifo the child then replaces; the burst is written.
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        let mut a: Vec<String> = vec![
            "rate".into(),
            tc_rate(self.rate_bps),
            "burst".into(),
            tc_size(self.burst_bytes),
        ];
        if let Some((pr, m)) = self.peak {
            a.extend(["peakrate".into(), tc_rate(pr), "mtu".into(), tc_size(m)]);
        }
        let limit = match &*self.child {
            QdiscSpec::Bfifo(f) => f.limit,
            _ => self.burst_bytes,
        };
        a.extend(["limit".into(), tc_size(limit)]);
        Ok(a)
    }

    /// tbf segments a GSO buffer larger than its burst.
    fn facts(&self) -> Facts {
        Facts {
            splits_gso: true,
            ..Facts::default()
        }
    }
}

impl Classful for TbfSpec {
    fn children(&self) -> Vec<&QdiscSpec> {
        vec![&*self.child]
    }

    /// tbf's own `limit` already made a default bfifo child (tbf_change): no line of its own.
    fn tc_children(&self) -> Vec<&QdiscSpec> {
        if self.child_is_default_bfifo() {
            Vec::new()
        } else {
            self.children()
        }
    }

    /// sch_tbf has one class and `tbf_find` answers it for every classid: a child added at
    /// `1:2` (or `1:`) hangs in class :1, and `tc qdisc show` still prints the parent it
    /// was added with. A second qdisc cannot hang there beside it (tc refuses the add; a
    /// replace takes the first one's place).
    fn attach(&mut self, mut children: Vec<(u16, QdiscSpec)>) -> ConfResult<()> {
        if children.len() != 1 {
            return Err(ConfError::new(
                "tc",
                format!("tbf has one class; {} qdiscs hang under it", children.len()),
            ));
        }
        let (_, c) = children.pop().expect("one child");
        *self.child = c;
        Ok(())
    }
}

/// tc keywords of `tbf`.
pub const TC_KEYS: &[TcKey] = &[
    TcKey::Rate("rate", "rate"),
    TcKey::Size("burst", "burst"),
    TcKey::Size("buffer", "buffer"),
    TcKey::Size("limit", "limit"),
    TcKey::Time("latency", "latency"),
    TcKey::Rate("peakrate", "peakrate"),
    TcKey::Size("mtu", "mtu"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_buffer_larger_than_the_bucket_is_segmented() {
        // tbf_segment (Linux): a 10-segment GSO buffer (15140 B) through a 5000-B bucket
        // goes through as 10 frames of 1514 B; an ordinary oversize packet is dropped.
        let mut q = build(vec![
            ("rate", s("8Mbit")),
            ("burst", s("5000B")),
            ("limit", s("100000B")),
        ])
        .unwrap();
        let mut p = Packet::synthetic(1, 1, 10 * 1514);
        p.hdr.payload_bytes = 10 * 1448;
        p.gso_segs = 10;
        p.gso_size = 1448;
        let mut drops = Drops::new();
        assert_ne!(q.enqueue(p, Time::ZERO, &mut drops), Verdict::Dropped);
        assert!(drops.is_empty());
        assert_eq!(q.len_packets(), 10);
        assert_eq!(q.len_bytes(), 10 * 1514);
        let big = Packet::synthetic(2, 1, 6000);
        assert_eq!(q.enqueue(big, Time::ZERO, &mut drops), Verdict::Dropped);
        assert_eq!(drops.len(), 1);
        // A bucket of 1500 B: each 1514-B segment (1448 B + 66 B of headers) is larger
        // than the bucket, so `skb_gso_validate_mac_len` fails and the buffer is dropped.
        let mut q = build(vec![
            ("rate", s("8Mbit")),
            ("burst", s("1500B")),
            ("limit", s("100000B")),
        ])
        .unwrap();
        let mut p = Packet::synthetic(3, 1, 10 * 1514);
        p.hdr.payload_bytes = 10 * 1448;
        p.gso_segs = 10;
        p.gso_size = 1448;
        assert_eq!(q.enqueue(p, Time::ZERO, &mut drops), Verdict::Dropped);
        assert_eq!(q.len_packets(), 0);
    }
    #[test]
    fn segments_of_a_split_buffer_are_packets_of_their_own_and_the_victims_are_named() {
        // tbf_segment hands each segment to the child (here a 4542-B bfifo: room for three
        // 1514-B frames). Segments 3..9 overflow it; each drop must name its own segment
        // (uid = buffer uid + index << 48, its own sequence number), not the buffer.
        let mut q = build(vec![
            ("rate", s("8Mbit")),
            ("burst", s("5000B")),
            ("limit", s("4542B")),
        ])
        .unwrap();
        let mut p = Packet::synthetic(5, 1, 10 * 1514);
        p.hdr.seq = 4_294_960_000; // segments cross the 32-bit wrap: nothing compares raw
        p.hdr.payload_bytes = 10 * 1448;
        p.gso_segs = 10;
        p.gso_size = 1448;
        let mut drops = Drops::new();
        assert_eq!(q.enqueue(p, Time::ZERO, &mut drops), Verdict::Queued);
        let gone: Vec<(u64, u64)> = drops
            .as_slice()
            .iter()
            .map(|d| (d.pkt.uid, d.pkt.hdr.seq))
            .collect();
        let want: Vec<(u64, u64)> = (3..10u64)
            .map(|i| (5 + (i << 48), 4_294_960_000 + i * 1448))
            .collect();
        assert_eq!(gone, want);
        let kept: Vec<u64> = (0..3)
            .map(|_| match q.dequeue(Time(1_000_000_000), &mut drops) {
                Dequeue::Packet(p) => p.uid,
                d => panic!("expected a packet, got {d:?}"),
            })
            .collect();
        assert_eq!(kept, vec![5, 5 + (1 << 48), 5 + (2 << 48)]);
    }

    use crate::qdisc::testkit::{check_conservation, pkt, Bound};

    fn build(pairs: Vec<(&str, Value)>) -> ConfResult<Tbf> {
        crate::qdisc::testkit::build_from(from_params, pairs, &BuildCtx::default())
    }

    fn s(x: &str) -> Value {
        Value::Str(x.into())
    }

    #[test]
    fn long_run_throughput_equals_rate() {
        // Keep the queue backlogged, honour NotBefore, and measure the steady state.
        for (rate, len) in [
            (10_000_000u64, 1514u32),
            (7_300_000, 1000),
            (1_000_000_000, 1514),
        ] {
            let mut q = build(vec![
                ("rate", Value::Str(format!("{rate}bit"))),
                ("burst", Value::Int(20_000)),
                ("limit", Value::Int(1_000_000)),
            ])
            .unwrap();
            let mut d = Drops::new();
            let mut now = Time(0);
            let mut uid = 0;
            let mut sent = 0u64;
            let (mut t0, mut b0) = (Time(0), 0u64);
            let mut bound = Bound::new(100_000, "5 000 deliveries");
            while sent < 5_000 {
                bound.tick();
                let mut fill = Bound::new(100, "refill to 50 packets");
                while q.len_packets() < 50 {
                    fill.tick();
                    q.enqueue(pkt(uid, 1, len), now, &mut d);
                    uid += 1;
                }
                match q.dequeue(now, &mut d) {
                    Dequeue::Packet(_) => {
                        sent += 1;
                        if sent == 1_000 {
                            (t0, b0) = (now, sent * len as u64);
                        }
                    }
                    Dequeue::NotBefore(t) => now = t,
                    Dequeue::Empty => panic!("backlogged"),
                }
            }
            let bytes = sent * len as u64 - b0;
            let measured = bytes as f64 * 8.0 / (now - t0).as_secs_f64();
            assert!(
                (measured / rate as f64 - 1.0).abs() < 0.005,
                "rate {rate}: measured {measured}"
            );
            assert!(d.is_empty());
        }
    }

    #[test]
    fn full_burst_passes_at_once_after_idle() {
        // burst = 10 × 1514 B: after idle, exactly 10 full packets leave at the same
        // instant; the 11th waits one packet time at the rate (1514 B at 10 Mbit/s =
        // 1.2112 ms).
        let mut q = build(vec![
            ("rate", s("10Mbit")),
            ("burst", Value::Int(15_140)),
            ("limit", Value::Int(100_000)),
        ])
        .unwrap();
        let mut d = Drops::new();
        let now = Time::ZERO + Duration::from_secs(3);
        for i in 0..20 {
            q.enqueue(pkt(i, 1, 1514), now, &mut d);
        }
        for i in 0..10 {
            assert_eq!(q.dequeue(now, &mut d).packet().unwrap().uid, i);
        }
        match q.dequeue(now, &mut d) {
            Dequeue::NotBefore(t) => assert_eq!(t, now + Duration(1_211_200)),
            other => panic!("{other:?}"),
        }
        assert_eq!(q.len_packets(), 10);
        assert_eq!(q.len_bytes(), 15_140);
        // Idle longer than the bucket depth does not give more than `burst`.
        let later = now + Duration::from_secs(10);
        let mut n = 0;
        let mut bound = Bound::new(1_000, "burst after idle");
        while let Dequeue::Packet(_) = q.dequeue(later, &mut d) {
            bound.tick();
            n += 1;
        }
        assert_eq!(n, 10);
    }

    #[test]
    fn peakrate_spaces_the_burst() {
        // peakrate 20 Mbit/s with a one-packet peak bucket: burst packets leave one
        // 1514-B peak time (605.6 us) apart.
        let mut q = build(vec![
            ("rate", s("10Mbit")),
            ("burst", Value::Int(15_140)),
            ("limit", Value::Int(100_000)),
            ("peakrate", s("20Mbit")),
            ("mtu", Value::Int(1514)),
        ])
        .unwrap();
        let mut d = Drops::new();
        let now = Time::ZERO + Duration::from_secs(1);
        for i in 0..3 {
            q.enqueue(pkt(i, 1, 1514), now, &mut d);
        }
        assert!(q.dequeue(now, &mut d).packet().is_some());
        match q.dequeue(now, &mut d) {
            Dequeue::NotBefore(t) => assert_eq!(t, now + Duration(605_600)),
            other => panic!("{other:?}"),
        }
        assert!(q
            .dequeue(now + Duration(605_600), &mut d)
            .packet()
            .is_some());
        // Packets beyond the peak bucket (mtu) can never pass: dropped at enqueue.
        assert_eq!(q.enqueue(pkt(9, 1, 1515), now, &mut d), Verdict::Dropped);
    }

    #[test]
    fn child_drops_are_preserved() {
        let child = Value::Table(Table(vec![
            ("kind".into(), s("pfifo")),
            ("limit".into(), Value::Int(3)),
        ]));
        let mut q = build(vec![
            ("rate", s("1Mbit")),
            ("burst", Value::Int(3000)),
            ("child", child),
        ])
        .unwrap();
        let mut d = Drops::new();
        let v: Vec<Verdict> = (0..5)
            .map(|i| q.enqueue(pkt(i, 1, 1000), Time(0), &mut d))
            .collect();
        assert_eq!(v[3], Verdict::Dropped);
        let x: Vec<(u64, DropReason)> = d.drain().map(|x| (x.pkt.uid, x.reason)).collect();
        assert_eq!(
            x,
            vec![(3, DropReason::Overlimit), (4, DropReason::Overlimit)]
        );
        // The default child is a bfifo of `limit` bytes.
        let mut q = build(vec![
            ("rate", s("1Mbit")),
            ("burst", Value::Int(3000)),
            ("limit", Value::Int(2500)),
        ])
        .unwrap();
        for i in 0..3 {
            q.enqueue(pkt(i, 1, 1000), Time(0), &mut d);
        }
        assert_eq!(q.len_bytes(), 2000);
        assert_eq!(d.drain().count(), 1);
        // Packets bigger than the bucket are dropped at enqueue.
        assert_eq!(
            q.enqueue(pkt(7, 1, 3001), Time(0), &mut d),
            Verdict::Dropped
        );
    }

    #[test]
    fn parameters_follow_tc() {
        assert_eq!(
            build(vec![("burst", Value::Int(3000))]).err().unwrap().path,
            "q.rate"
        );
        let e = build(vec![("rate", s("1Mbit")), ("limit", Value::Int(3000))])
            .err()
            .unwrap();
        assert_eq!(e.path, "q.burst");
        assert!(e.msg.contains("mandatory"));
        let e = build(vec![("rate", s("1Mbit")), ("burst", Value::Int(3000))])
            .err()
            .unwrap();
        assert_eq!(e.path, "q.limit");
        // latency → limit = rate·latency + burst = 125000 B/s · 0.05 s + 3000 = 9250 B.
        let q = build(vec![
            ("rate", s("1Mbit")),
            ("burst", Value::Int(3000)),
            ("latency", s("50ms")),
        ])
        .unwrap();
        match q.child() {
            AnyQdisc::Bfifo(f) => assert_eq!(f.limit(), 9250),
            _ => panic!(),
        }
        assert!(build(vec![
            ("rate", s("1Mbit")),
            ("burst", Value::Int(3000)),
            ("limit", Value::Int(3000)),
            ("peakrate", s("2Mbit")),
        ])
        .is_err());
        assert!(build(vec![
            ("rate", s("1Mbit")),
            ("burst", Value::Int(3000)),
            ("limit", Value::Int(3000)),
            ("peakrate", s("1Mbit")),
            ("mtu", Value::Int(1514)),
        ])
        .is_err());
    }

    #[test]
    fn conservation_property() {
        for seed in 0..10 {
            let mut q = build(vec![
                ("rate", s("50Mbit")),
                ("burst", Value::Int(10_000)),
                ("limit", Value::Int(200_000)),
            ])
            .unwrap();
            check_conservation(&mut q, seed, 4_000, |q| q.len_bytes() <= 200_000 + 1514);
            let child = Value::Table(Table(vec![
                ("kind".into(), s("sfq")),
                ("limit".into(), Value::Int(40)),
            ]));
            let mut q = build(vec![
                ("rate", s("5Mbit")),
                ("burst", Value::Int(3_028)),
                ("peakrate", s("100Mbit")),
                ("mtu", Value::Int(1514)),
                ("child", child),
            ])
            .unwrap();
            check_conservation(&mut q, seed, 4_000, |q| q.len_packets() <= 41);
        }
    }
}
