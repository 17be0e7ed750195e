//! `prio` (Linux `sch_prio`) and `pfifo_fast` (the kernel's built-in default qdisc).
//!
//! **prio**: `bands` child qdiscs served in strict priority, band 0 first. A packet's band
//! comes from `skb->priority` (`major << 16 | minor`), as `prio_classify` does without
//! filters:
//! - major == this qdisc's `handle`: band `minor − 1`; if that is not a valid band
//!   (minor 0 or minor > bands), `priomap[0]`;
//! - otherwise, if major ≠ 0: `priomap[0]` (the kernel zeroes a foreign major);
//! - otherwise `priomap[priority & 15]`.
//!
//! Each band is its own child instance (default pfifo of `tx_queue_len` packets). Dequeue
//! asks each band in order and returns the first packet; if none has one it reports the
//! earliest `NotBefore` among the bands (shaped children), else `Empty`.
//!
//! **pfifo_fast**: three rings of `tx_queue_len` packets each; band =
//! `priomap[priority & 15]` with the same default priomap. There is no `major == handle`
//! override (`pfifo_fast_enqueue` indexes `prio2band[skb->priority & TC_PRIO_MAX]`
//! directly), so priority 1:6 goes to band 0 and 1:0 to band 1.
//!
//! Forwarded IPv4 packets get `skb->priority = rt_tos2priority(tos)` in Linux; sojourn's
//! classifiers set `Packet::priority`, and [`rt_tos2priority`] gives the kernel mapping.

use super::vocab::{
    BuildCtx, Dequeue, Discipline, DropReason, Drops, Facts, NotLinux, Qdisc, TcKey, Verdict,
};
use super::{AnyQdisc, Classful, QdiscSpec};
use crate::packet::Packet;
use crate::params::{ConfError, ConfResult, Params, Value};
use crate::time::Time;
use std::collections::VecDeque;

/// tc's default priomap (`TC_PRIO_*` → band), indexed by `priority & 15`.
pub const DEFAULT_PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
/// `TCQ_PRIO_BANDS`.
pub const MAX_BANDS: u32 = 16;
/// `TC_PRIO_MAX`.
const TC_PRIO_MAX: u32 = 15;

/// The kernel's `rt_tos2priority(tos)` (`ip_tos2prio[IPTOS_TOS(tos) >> 1]`): the
/// `skb->priority` a forwarded IPv4 packet gets from its TOS byte.
/// 0x10 (low delay) → 6 (interactive), 0x08 (throughput) → 2 (bulk), 0x18 → 4
/// (interactive bulk), everything else in the low bits → 0 (best effort).
pub fn rt_tos2priority(tos: u8) -> u32 {
    const IP_TOS2PRIO: [u32; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];
    IP_TOS2PRIO[((tos & 0x1E) >> 1) as usize]
}

pub struct Prio {
    bands: Vec<AnyQdisc>,
    priomap: [u8; 16],
    /// Major number of this qdisc's handle (`handle 1:` → 1).
    handle: u32,
    qlen: usize,
    backlog_bytes: u64,
}

impl Prio {
    pub fn new(bands: Vec<AnyQdisc>, priomap: [u8; 16], handle: u32) -> Prio {
        assert!(bands.len() >= 2 && bands.len() <= MAX_BANDS as usize);
        assert!(priomap.iter().all(|&b| (b as usize) < bands.len()));
        let qlen = bands.iter().map(|b| b.len_packets()).sum();
        let backlog_bytes = bands.iter().map(|b| b.len_bytes()).sum();
        Prio {
            bands,
            priomap,
            handle,
            qlen,
            backlog_bytes,
        }
    }

    pub fn bands(&self) -> usize {
        self.bands.len()
    }
    pub fn band(&self, i: usize) -> &AnyQdisc {
        &self.bands[i]
    }

    /// `prio_classify` without filters.
    #[inline]
    pub fn classify(&self, priority: u32) -> usize {
        let major = priority >> 16;
        if major != self.handle {
            let p = if major != 0 { 0 } else { priority };
            return self.priomap[(p & TC_PRIO_MAX) as usize] as usize;
        }
        let band = (priority & 0xFFFF).wrapping_sub(1) as usize;
        if band >= self.bands.len() {
            self.priomap[0] as usize
        } else {
            band
        }
    }

    /// Runs `op` on band `b` and keeps the totals in step with the child.
    #[inline]
    fn on_band<R>(&mut self, b: usize, op: impl FnOnce(&mut AnyQdisc) -> R) -> R {
        let child = &mut self.bands[b];
        let (p0, b0) = (child.len_packets(), child.len_bytes());
        let r = op(child);
        self.qlen = self.qlen + child.len_packets() - p0;
        self.backlog_bytes = self.backlog_bytes + child.len_bytes() - b0;
        r
    }
}

impl Qdisc for Prio {
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        let b = self.classify(pkt.priority);
        self.on_band(b, |c| c.enqueue(pkt, now, drops))
    }

    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        // Strict priority: the first band that yields a packet wins (prio_dequeue).
        let mut earliest: Option<Time> = None;
        for b in 0..self.bands.len() {
            match self.on_band(b, |c| c.dequeue(now, drops)) {
                Dequeue::Packet(p) => return Dequeue::Packet(p),
                Dequeue::Empty => {}
                Dequeue::NotBefore(t) => earliest = Some(earliest.map_or(t, |e| e.min(t))),
            }
        }
        match earliest {
            Some(t) => Dequeue::NotBefore(t),
            None => Dequeue::Empty,
        }
    }

    #[inline]
    fn len_packets(&self) -> usize {
        self.qlen
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    fn ecn_marks(&self) -> u64 {
        self.bands.iter().map(|b| b.ecn_marks()).sum()
    }
    fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
        for (i, band) in self.bands.iter_mut().enumerate() {
            emit(&format!("band{i}.packets"), band.len_packets() as f64);
            band.observe(now, &mut |name, v| emit(&format!("band{i}.{name}"), v));
        }
    }
}

/// Reads `priomap` (16 band numbers, each below `bands`).
fn read_priomap(p: &mut Params, bands: u32) -> ConfResult<[u8; 16]> {
    let Some(v) = p.raw("priomap") else {
        if let Some(i) = DEFAULT_PRIOMAP.iter().position(|&b| b as u32 >= bands) {
            return Err(p.err(
                "bands",
                format!(
                    "the default priomap sends priority {i} to band {}; with bands = {bands} \
                     give a `priomap` of 16 bands below {bands}",
                    DEFAULT_PRIOMAP[i]
                ),
            ));
        }
        return Ok(DEFAULT_PRIOMAP);
    };
    let Value::Array(items) = v else {
        return Err(p.err(
            "priomap",
            format!("expected an array of 16 bands, got {}", v.type_name()),
        ));
    };
    if items.len() != 16 {
        return Err(p.err(
            "priomap",
            format!(
                "expected 16 bands (one per priority 0..15), got {}",
                items.len()
            ),
        ));
    }
    let mut map = [0u8; 16];
    for (i, it) in items.iter().enumerate() {
        match it {
            Value::Int(b) if *b >= 0 && (*b as u64) < bands as u64 => map[i] = *b as u8,
            other => {
                return Err(p.err(
                    "priomap",
                    format!("entry {i} ({other:?}) is not a band in 0..{bands}"),
                ))
            }
        }
    }
    Ok(map)
}

/// Reads `handle`: an integer major number, or tc's hex form `"1:"`/`"10:"`.
fn read_handle(p: &mut Params) -> ConfResult<u32> {
    match p.raw("handle") {
        None => Ok(1),
        Some(Value::Int(h)) if *h >= 1 && *h <= 0xFFFF => Ok(*h as u32),
        Some(Value::Str(s)) => {
            let t = s.trim().trim_end_matches(':');
            match u32::from_str_radix(t, 16) {
                Ok(h) if (1..=0xFFFF).contains(&h) => Ok(h),
                _ => Err(p.err(
                    "handle",
                    format!("{s:?} is not a tc handle major like \"1:\" (hex, 1..ffff)"),
                )),
            }
        }
        Some(v) => Err(p.err(
            "handle",
            format!("expected a major number in 1..65535 or \"1:\", got {v:?}"),
        )),
    }
}

/// Builds `prio [bands N] [priomap P0 .. P15] [handle H] [children | child]`.
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Prio> {
    Ok(*PrioSpec::parse(p, ctx)?.build(ctx))
}

/// Typed spec of `prio`: bands, priomap, handle and one child spec per band.
#[derive(Clone, Debug, PartialEq)]
pub struct PrioSpec {
    pub bands: u32,
    pub priomap: [u8; 16],
    /// Major number of the qdisc handle, matched against `skb->priority`'s major.
    pub handle: u32,
    /// One spec per band (a single `child` is repeated; default pfifo).
    pub children: Vec<QdiscSpec>,
}

impl Discipline for PrioSpec {
    const KIND: &'static str = "prio";
    const SUMMARY: &'static str =
        "Strict priority over child qdiscs chosen by skb->priority (Linux sch_prio)";
    type Qdisc = Box<Prio>;

    /// `prio [bands N] [priomap P0 .. P15] [handle H] [children | child]`.
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let bands = p.u32("bands", 3, 2, MAX_BANDS)?;
        let priomap = read_priomap(p, bands)?;
        let handle = read_handle(p)?;
        let children_path = p.key_path("children");
        let child_path = p.key_path("child");
        let children = p.raw("children");
        let child = p.raw("child");
        let mut out = Vec::with_capacity(bands as usize);
        match (children, child) {
            (Some(_), Some(_)) => {
                return Err(p.err(
                    "child",
                    "give either `children` (one spec per band) or `child` (one spec for all)",
                ))
            }
            (Some(Value::Array(specs)), None) => {
                if specs.len() != bands as usize {
                    return Err(p.err(
                        "children",
                        format!(
                            "expected {bands} child specs (one per band), got {}",
                            specs.len()
                        ),
                    ));
                }
                for (i, s) in specs.iter().enumerate() {
                    out.push(QdiscSpec::parse(s, &format!("{children_path}[{i}]"), ctx)?);
                }
            }
            (Some(v), None) => {
                return Err(p.err(
                    "children",
                    format!("expected an array of qdisc specs, got {}", v.type_name()),
                ))
            }
            (None, spec) => {
                let default = Value::Str("pfifo".into());
                let one = QdiscSpec::parse(spec.unwrap_or(&default), &child_path, ctx)?;
                out.resize(bands as usize, one);
            }
        }
        Ok(PrioSpec {
            bands,
            priomap,
            handle,
            children: out,
        })
    }

    /// Band `i`'s child gets `ctx.child(i)`.
    fn build(&self, ctx: &BuildCtx) -> Box<Prio> {
        let bands = QdiscSpec::build_children(&self.children, ctx);
        Box::new(Prio::new(bands, self.priomap, self.handle))
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS);
    /// The handle is semantic (priority overrides name it): a tc tree keeps it.
    const TC_HANDLE_KEY: Option<&'static str> = Some("handle");

    /// `bands N priomap P0 … P15` (children are tc nodes of their own, at `H:band+1`).
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        let mut a = vec!["bands".into(), self.bands.to_string(), "priomap".into()];
        a.extend(self.priomap.iter().map(|b| b.to_string()));
        Ok(a)
    }

    /// prio's `handle` is semantic: priority overrides `major:band` match it.
    fn facts(&self) -> Facts {
        Facts::with_tc_handle(self.handle as u16)
    }
}

impl Classful for PrioSpec {
    fn children(&self) -> Vec<&QdiscSpec> {
        self.children.iter().collect()
    }

    /// `prio_find`: classes :1 … :bands (minor − 1 is the band); `1:` is no class.
    fn attach(&mut self, children: Vec<(u16, QdiscSpec)>) -> ConfResult<()> {
        for (minor, c) in children {
            let band = match (minor as usize).checked_sub(1) {
                Some(b) if b < self.children.len() => b,
                _ => {
                    return Err(ConfError::new(
                        "tc",
                        format!("prio has no class :{minor:x}"),
                    ))
                }
            };
            self.children[band] = c;
        }
        Ok(())
    }
}

/// tc keywords of `prio`.
pub const TC_KEYS: &[TcKey] = &[
    TcKey::Int("bands", "bands"),
    TcKey::Ints("priomap", "priomap", 16),
];

/// Typed spec of `pfifo_fast` (no parameters; each band holds `tx_queue_len` packets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfifoFastSpec {
    pub limit_per_band: u32,
}

impl Discipline for PfifoFastSpec {
    const KIND: &'static str = "pfifo_fast";
    const SUMMARY: &'static str =
        "Linux's default 3-band priority FIFO (priority & 15 through the priomap)";
    type Qdisc = Box<PfifoFast>;

    fn parse(_p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        Ok(PfifoFastSpec {
            limit_per_band: ctx.tx_queue_len,
        })
    }

    fn build(&self, _ctx: &BuildCtx) -> Box<PfifoFast> {
        Box::new(PfifoFast::new(self.limit_per_band as usize))
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(&[]);

    /// `pfifo_fast` takes no arguments (its bands and priomap are fixed).
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        Ok(Vec::new())
    }
}

/// Linux's default qdisc: three bands of `tx_queue_len`-entry rings.
#[derive(Debug)]
pub struct PfifoFast {
    bands: [VecDeque<Packet>; 3],
    /// Ring size of each band (`tx_queue_len`).
    limit: usize,
    backlog_bytes: u64,
}

impl PfifoFast {
    pub fn new(limit_per_band: usize) -> PfifoFast {
        PfifoFast {
            bands: Default::default(),
            limit: limit_per_band.max(1),
            backlog_bytes: 0,
        }
    }

    pub fn limit_per_band(&self) -> usize {
        self.limit
    }

    /// `prio2band[priority & TC_PRIO_MAX]`, no handle override.
    #[inline]
    pub fn classify(priority: u32) -> usize {
        DEFAULT_PRIOMAP[(priority & TC_PRIO_MAX) as usize] as usize
    }

    pub fn band_len(&self, b: usize) -> usize {
        self.bands[b].len()
    }
}

impl Qdisc for PfifoFast {
    #[inline]
    fn enqueue(&mut self, pkt: Packet, _now: Time, drops: &mut Drops) -> Verdict {
        let band = &mut self.bands[Self::classify(pkt.priority)];
        if band.len() >= self.limit {
            drops.push(pkt, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        self.backlog_bytes += pkt.len_bytes as u64;
        band.push_back(pkt);
        Verdict::Queued
    }

    #[inline]
    fn dequeue(&mut self, _now: Time, _drops: &mut Drops) -> Dequeue {
        for band in &mut self.bands {
            if let Some(p) = band.pop_front() {
                self.backlog_bytes -= p.len_bytes as u64;
                return Dequeue::Packet(p);
            }
        }
        Dequeue::Empty
    }

    #[inline]
    fn len_packets(&self) -> usize {
        self.bands.iter().map(|b| b.len()).sum()
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    fn ecn_marks(&self) -> u64 {
        0
    }
    fn observe(&mut self, _now: Time, emit: &mut dyn FnMut(&str, f64)) {
        for (i, b) in self.bands.iter().enumerate() {
            emit(&format!("band{i}.packets"), b.len() as f64);
        }
    }
}

/// Builds `pfifo_fast` (no parameters; each band holds `tx_queue_len` packets).
pub fn pfifo_fast(p: &mut Params, ctx: &BuildCtx) -> ConfResult<PfifoFast> {
    Ok(*PfifoFastSpec::parse(p, ctx)?.build(ctx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Table;
    use crate::qdisc::testkit::{check_conservation, pkt};

    fn build(pairs: Vec<(&str, Value)>) -> ConfResult<Prio> {
        crate::qdisc::testkit::build_from(from_params, pairs, &BuildCtx::default())
    }

    fn with_prio(uid: u64, priority: u32) -> Packet {
        let mut p = pkt(uid, 1, 100);
        p.priority = priority;
        p
    }

    fn spec(kind: &str, kv: &[(&str, Value)]) -> Value {
        let mut t = vec![("kind".to_string(), Value::Str(kind.into()))];
        t.extend(kv.iter().map(|(k, v)| (k.to_string(), v.clone())));
        Value::Table(Table(t))
    }

    #[test]
    fn rt_tos2priority_examples() {
        // From the kernel table: TOS 0x10 (lowdelay) → 6 → band 0; 0x08 (throughput)
        // → 2 → band 2; DSCP EF (TOS 0xB8) → 4 → band 1; 0 → 0 → band 1.
        let cases = [
            (0x10u8, 6u32, 0usize),
            (0x08, 2, 2),
            (0xB8, 4, 1),
            (0x00, 0, 1),
        ];
        for (tos, prio, band) in cases {
            assert_eq!(rt_tos2priority(tos), prio, "tos {tos:#x}");
            assert_eq!(PfifoFast::classify(prio), band, "tos {tos:#x}");
        }
        // The ECN bit (0x01 of the old TOS field) does not matter.
        assert_eq!(rt_tos2priority(0x11), 6);
    }

    #[test]
    fn default_priomap_for_all_16_priorities() {
        // tc-prio(8): "1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1".
        let q = build(vec![]).unwrap();
        assert_eq!(q.bands(), 3);
        let expect = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
        let mut q = q;
        let mut d = Drops::new();
        for (prio, &band) in expect.iter().enumerate() {
            assert_eq!(q.classify(prio as u32), band, "priority {prio}");
            let before = q.band(band).len_packets();
            q.enqueue(with_prio(prio as u64, prio as u32), Time(0), &mut d);
            assert_eq!(q.band(band).len_packets(), before + 1);
        }
        // Children default to pfifo with tx_queue_len = 1000.
        match q.band(0) {
            AnyQdisc::Pfifo(f) => assert_eq!(f.limit(), 1000),
            _ => panic!("default child is pfifo"),
        }
    }

    #[test]
    fn strict_priority_band_0_first() {
        let mut q = build(vec![]).unwrap();
        let mut d = Drops::new();
        // Arrivals in reverse priority: band 2 (prio 1), band 1 (prio 0), band 0 (prio 6).
        let mut uid = 0;
        for &prio in &[1u32, 0, 6] {
            for _ in 0..3 {
                q.enqueue(with_prio(uid, prio), Time(0), &mut d);
                uid += 1;
            }
        }
        let out: Vec<u32> = (0..9)
            .map(|_| q.dequeue(Time(0), &mut d).packet().unwrap().priority)
            .collect();
        assert_eq!(out, vec![6, 6, 6, 0, 0, 0, 1, 1, 1]);
        // A high-priority arrival overtakes queued low-priority ones.
        q.enqueue(with_prio(50, 1), Time(0), &mut d);
        q.enqueue(with_prio(51, 1), Time(0), &mut d);
        assert_eq!(q.dequeue(Time(0), &mut d).packet().unwrap().uid, 50);
        q.enqueue(with_prio(52, 7), Time(0), &mut d);
        assert_eq!(q.dequeue(Time(0), &mut d).packet().unwrap().uid, 52);
        assert!(matches!(q.dequeue(Time(0), &mut d), Dequeue::Packet(p) if p.uid == 51));
        assert!(matches!(q.dequeue(Time(0), &mut d), Dequeue::Empty));
    }

    #[test]
    fn major_equal_to_handle_picks_band_minor_minus_1() {
        let q = build(vec![
            ("bands", Value::Int(4)),
            ("handle", Value::Str("1:".into())),
        ])
        .err()
        .is_none();
        assert!(q);
        let q = build(vec![("bands", Value::Int(4))]).unwrap();
        assert_eq!(q.classify(0x1_0001), 0);
        assert_eq!(q.classify(0x1_0002), 1);
        assert_eq!(q.classify(0x1_0004), 3);
        // minor 0 or beyond the bands: priomap[0] (= 1).
        assert_eq!(q.classify(0x1_0000), 1);
        assert_eq!(q.classify(0x1_0005), 1);
        // A foreign major is zeroed first (prio_classify): 2:6 → priomap[0], not [6].
        assert_eq!(q.classify(0x2_0006), 1);
        // handle 10: (hex) is major 0x10.
        let q = build(vec![("handle", Value::Str("10:".into()))]).unwrap();
        assert_eq!(q.classify(0x10_0003), 2);
        assert_eq!(q.classify(0x1_0003), 1);
    }

    #[test]
    fn child_spec_gives_each_band_its_own_instance() {
        let mut q = build(vec![("child", spec("pfifo", &[("limit", Value::Int(2))]))]).unwrap();
        let mut d = Drops::new();
        for i in 0..3 {
            q.enqueue(with_prio(i, 6), Time(0), &mut d);
            q.enqueue(with_prio(10 + i, 0), Time(0), &mut d);
        }
        assert_eq!(q.band(0).len_packets(), 2);
        assert_eq!(q.band(1).len_packets(), 2);
        assert_eq!(q.len_packets(), 4);
        assert_eq!(
            d.drain()
                .filter(|x| x.reason == DropReason::Overlimit)
                .count(),
            2
        );
        // children: one spec per band, counted.
        let e = build(vec![(
            "children",
            Value::Array(vec![Value::Str("pfifo".into()), Value::Str("bfifo".into())]),
        )])
        .err()
        .unwrap();
        assert_eq!(e.path, "q.children");
        let e = build(vec![(
            "children",
            Value::Array(vec![
                Value::Str("pfifo".into()),
                Value::Str("bfifo".into()),
                Value::Str("nope".into()),
            ]),
        )])
        .err()
        .unwrap();
        assert_eq!(e.path, "q.children[2].kind");
        // bands 2 needs a priomap (the default uses band 2).
        assert!(build(vec![("bands", Value::Int(2))]).is_err());
        let map = Value::Array((0..16).map(|i| Value::Int(i % 2)).collect());
        let q = build(vec![("bands", Value::Int(2)), ("priomap", map)]).unwrap();
        assert_eq!(q.classify(3), 1);
    }

    #[test]
    fn shaped_band_does_not_block_lower_bands() {
        // Band 0 is a 1 Mbit/s tbf: once its burst is spent it answers NotBefore; prio
        // then serves band 1 (like prio_dequeue, which takes the first band with a
        // packet). With band 1 empty, the earliest NotBefore is reported.
        let tbf = spec(
            "tbf",
            &[
                ("rate", Value::Str("1Mbit".into())),
                ("burst", Value::Int(1514)),
                ("limit", Value::Int(100_000)),
            ],
        );
        let mut q = build(vec![(
            "children",
            Value::Array(vec![
                tbf,
                Value::Str("pfifo".into()),
                Value::Str("pfifo".into()),
            ]),
        )])
        .unwrap();
        let mut d = Drops::new();
        for i in 0..3 {
            let mut p = with_prio(i, 6);
            p.len_bytes = 1000;
            q.enqueue(p, Time(0), &mut d);
        }
        q.enqueue(with_prio(10, 0), Time(0), &mut d);
        assert_eq!(q.dequeue(Time(0), &mut d).packet().unwrap().uid, 0);
        assert_eq!(q.dequeue(Time(0), &mut d).packet().unwrap().uid, 10);
        match q.dequeue(Time(0), &mut d) {
            // 514 B of tokens left; 1000 B need 486 B more = 3.888 ms at 1 Mbit/s.
            Dequeue::NotBefore(t) => assert_eq!(t, Time(3_888_000)),
            other => panic!("{other:?}"),
        }
        assert_eq!(q.len_packets(), 2);
        assert_eq!(q.dequeue(Time(3_888_000), &mut d).packet().unwrap().uid, 1);
    }

    #[test]
    fn pfifo_fast_uses_priority_and_15_without_handle_override() {
        let mut q = PfifoFast::new(1000);
        let mut d = Drops::new();
        // The age-based seed: 1:6 → band 0, 1:0 → band 1.
        q.enqueue(with_prio(0, 0x1_0000), Time(0), &mut d);
        q.enqueue(with_prio(1, 0x1_0006), Time(0), &mut d);
        assert_eq!((q.band_len(0), q.band_len(1)), (1, 1));
        assert_eq!(q.dequeue(Time(0), &mut d).packet().unwrap().uid, 1);
        assert_eq!(q.dequeue(Time(0), &mut d).packet().unwrap().uid, 0);
        // Each band is its own ring of tx_queue_len packets.
        let mut q = PfifoFast::new(4);
        for i in 0..6 {
            q.enqueue(with_prio(i, 1), Time(0), &mut d); // band 2
            q.enqueue(with_prio(100 + i, 6), Time(0), &mut d); // band 0
        }
        assert_eq!((q.band_len(0), q.band_len(2)), (4, 4));
        assert_eq!(d.len(), 4);
        let q = super::super::build(&Value::Str("pfifo_fast".into()), "q", &BuildCtx::default())
            .unwrap();
        match q {
            AnyQdisc::PfifoFast(f) => assert_eq!(f.limit_per_band(), 1000),
            _ => panic!(),
        }
    }

    #[test]
    fn conservation_property() {
        for seed in 0..10 {
            let mut q = build(vec![(
                "children",
                Value::Array(vec![
                    spec("pfifo", &[("limit", Value::Int(5))]),
                    spec("bfifo", &[("limit", Value::Int(20_000))]),
                    spec("sfq", &[("limit", Value::Int(30))]),
                ]),
            )])
            .unwrap();
            check_conservation(&mut q, seed, 4_000, |q| {
                q.band(0).len_packets() <= 5
                    && q.band(1).len_bytes() <= 20_000
                    && q.band(2).len_packets() <= 30
            });
            let mut f = PfifoFast::new(7);
            check_conservation(&mut f, seed, 4_000, |f| (0..3).all(|b| f.band_len(b) <= 7));
        }
    }
}
