//! HTB — hierarchical token bucket (Linux `sch_htb`), a classful shaper.
//!
//! Written from the documented behaviour of Linux's HTB (Martin Devera's design notes,
//! tc-htb(8)) and the kernel's observable rules; the facts each piece follows are named
//! where it is used. In short:
//!
//! - Every class has two token buckets kept as *time* in nanoseconds: `tokens` at `rate`
//!   with depth `buffer` (= `burst` at `rate`) and `ctokens` at `ceil` with depth `cbuffer`
//!   (= `cburst` at `ceil`). A packet of `len` bytes costs `len / rate` ns
//!   (`psched_l2t_ns`, with the kernel's multiply-shift rounding). Tokens may go as low
//!   as one minute below zero (`mbuffer`).
//! - Each class is in one of three modes: *can send* (`tokens ≥ 0`), *may borrow*
//!   (`tokens < 0 ≤ ctokens`) or *can't send* (`ctokens < 0`). A class that is not in *can
//!   send* waits in its level's wait queue until the time its tokens cross zero.
//! - Levels: leaves are level 0; an inner class is one level below its parent, the
//!   top-level inner classes being level 7 (`TC_HTB_MAXDEPTH − 1`), as the kernel numbers
//!   them. Dequeue looks at level 0 first, then 1 … 7, and within a level at priority 0
//!   first. At level `L` it serves classes of level `L` that can send, through the chain of
//!   their *may borrow* descendants (the "feeds"): a leaf over its rate is served by the
//!   nearest ancestor that can still send, which lends it its tokens.
//! - Among the classes one level and priority serves, round robin with a deficit per leaf
//!   and level: a leaf keeps the turn until it has sent `quantum` bytes (DRR).
//! - Charging a sent packet walks up to the root: classes at or above the serving level
//!   pay from `tokens`, every class pays from `ctokens`.
//! - Classification (`htb_classify`): `skb->priority` equal to the qdisc's handle `H:0`
//!   goes to the direct queue; equal to a leaf's classid selects that leaf; otherwise the
//!   filters; otherwise the `default` class; if that does not exist (or is not a leaf) the
//!   direct queue, served before any class, unshaped, bounded by `direct_qlen` packets.
//!
//! Leaf qdiscs are built on a class's first packet (pfifo of `tx_queue_len` packets unless
//! given), so an idle class costs its compact [`Class`] record only.

use super::fq::KeyHasher;
use super::minor_set::MinorSet;
use super::vocab::{
    tc_rate, tc_size, BuildCtx, Dequeue, Discipline, DropReason, Drops, Facts, NotLinux, Qdisc,
    TcClass, TcKey, Verdict,
};
use super::{AnyQdisc, Classful, QdiscSpec};
use crate::packet::{Addr, Packet};
use crate::params::{ConfError, ConfResult, Params, Value};
use crate::time::{Duration, Time};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::BuildHasherDefault;

/// `TC_HTB_MAXDEPTH`: levels 0 (leaves) … 7.
pub const MAX_DEPTH: usize = 8;
/// `TC_HTB_NUMPRIO`: priorities 0 … 7.
pub const NUM_PRIO: usize = 8;
/// How far below zero tokens may fall (`cl->mbuffer`, one minute).
const MBUFFER_NS: i64 = 60_000_000_000;
/// iproute2 q_htb.c's default `mtu` for the burst rule ("eth packet len").
pub const TC_DEFAULT_MTU: u64 = 1600;
/// The timer frequency iproute2 reads from `/proc/net/psched` (4th field) on a kernel with
/// high-resolution timers: 10^9 (this machine: `000003e8 00000040 000f4240 3b9aca00`).
pub const TC_HZ: u64 = 1_000_000_000;
/// tc's default `r2q` (q_htb.c sets `rate2quantum = 10`).
pub const DEFAULT_R2Q: u32 = 10;
/// The kernel's quantum clamps when `quantum` is not given.
pub const MIN_QUANTUM: u64 = 1000;
pub const MAX_QUANTUM: u64 = 200_000;

const NONE: u32 = u32::MAX;

/// A rate as the kernel keeps it (`psched_ratecfg`): bytes per second and the multiply /
/// shift pair with which `len / rate` is computed in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub bytes_ps: u64,
    mult: u32,
    shift: u8,
}

impl Rate {
    /// `psched_ratecfg_precompute`: the largest shift for which 10^9·2^shift / rate still
    /// fits in 31 bits, so `len · mult >> shift` is `len / rate` in ns, truncated.
    pub fn new(bits_per_s: u64) -> Rate {
        let bytes_ps = bits_per_s / 8;
        let (mut mult, mut shift) = (1u32, 0u8);
        let mut factor: u64 = 1_000_000_000;
        // A zero rate keeps mult 1, shift 0 (the kernel returns early).
        while let Some(m) = factor.checked_div(bytes_ps) {
            mult = m as u32;
            if mult & (1 << 31) != 0 || factor & (1 << 63) != 0 {
                break;
            }
            factor <<= 1;
            shift += 1;
        }
        Rate {
            bytes_ps,
            mult,
            shift,
        }
    }

    /// `psched_l2t_ns`: nanoseconds to send `len` bytes.
    #[inline]
    pub fn l2t_ns(&self, len: u64) -> i64 {
        ((len * self.mult as u64) >> self.shift) as i64
    }
}

/// tc's `tc_calc_xmittime(rate, size)` as the kernel then holds it (`PSCHED_TICKS2NS`):
/// tc counts in ticks of 64 ns (`/proc/net/psched`: 1000 ns per µs over 64 ns per tick =
/// 15.625 ticks per µs), truncating, and the kernel shifts the ticks back to ns.
pub fn tc_xmittime_ns(rate_bits_per_s: u64, size_bytes: u64) -> i64 {
    let bytes_ps = (rate_bits_per_s / 8).max(1) as u128;
    let ticks = (size_bytes as u128 * 15_625_000 / bytes_ps).min(u32::MAX as u128);
    (ticks as i64) << 6
}

/// iproute2's default burst for a rate: `rate / HZ + mtu` bytes (q_htb.c), HZ = 10^9.
pub fn default_burst_bytes(rate_bits_per_s: u64) -> u64 {
    rate_bits_per_s / 8 / TC_HZ + TC_DEFAULT_MTU
}

/// The kernel's quantum for a leaf without an explicit `quantum`: `rate / r2q` bytes,
/// clamped to [1000, 200000], with tc's warning when clamped.
pub fn auto_quantum(rate_bits_per_s: u64, r2q: u32) -> (u64, Option<&'static str>) {
    let q = rate_bits_per_s / 8 / r2q.max(1) as u64;
    if q < MIN_QUANTUM {
        (MIN_QUANTUM, Some("small"))
    } else if q > MAX_QUANTUM {
        (MAX_QUANTUM, Some("big"))
    } else {
        (q, None)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Mode {
    CantSend,
    MayBorrow,
    CanSend,
}

/// Per-class counters the outputs can report ([`Htb::class_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Bytes / packets this class sent (leaves: dequeued from the leaf; inner classes:
    /// sent by a descendant, as the kernel's `bstats`).
    pub bytes: u64,
    pub packets: u64,
    /// Packets the class's leaf dropped (at enqueue or by its AQM).
    pub drops: u64,
    /// Sum of the sojourn (dequeue time − enqueue stamp) of the packets it sent, ns.
    pub sojourn_sum_ns: u64,
    /// Longest sojourn of a packet it sent, ns.
    pub sojourn_max_ns: u64,
    /// Times the class went over its ceil (entered "can't send").
    pub overlimits: u64,
    /// Packets sent while borrowing (served at a level above the leaf's).
    pub borrowed: u64,
}

/// One class, compact: tokens, modes, scheduling hooks and its counters.
struct Class {
    tokens: i64,
    ctokens: i64,
    /// Last checkpoint (`t_c`), ns.
    t_c: i64,
    /// When the class leaves its wait queue (`pq_key`), ns; valid in mode ≠ CanSend.
    pq_key: i64,
    /// Which of the class's entries in its level's wait queue is live ([`WaitQueue`]).
    wait_gen: u32,
    buffer_ns: i64,
    cbuffer_ns: i64,
    rate: Rate,
    ceil: Rate,
    /// DRR deficit per serving level (`leaf.deficit[level]`).
    deficit: [i32; MAX_DEPTH],
    quantum: i32,
    parent: u32,
    /// Index in `Htb::inner` (inner classes) or NONE.
    inner: u32,
    /// Index in `Htb::leaves` once built, else NONE (leaf classes only).
    leaf: u32,
    /// Index in the spec's leaf specs, NONE = the default pfifo (leaf classes only).
    leaf_spec: u32,
    minor: u16,
    level: u8,
    prio: u8,
    mode: Mode,
    /// Bit `p`: priority `p` is active through this class (`prio_activity`).
    prio_activity: u8,
    stats: ClassStats,
}

/// A round-robin position over a set of classes kept in classid order (an rb-tree row or
/// feed of the kernel): `ptr` is the class whose turn it is, `last_id` a remembered classid
/// to resume from when the pointed class left (`last_ptr_id`). Members are minors; their
/// class is `Htb::class_of_minor`.
#[derive(Default)]
struct Ring {
    members: MinorSet,
    ptr: Option<u16>,
    last_id: Option<u16>,
}

impl Ring {
    /// `htb_next_rb_node`: the next class in classid order, or none at the end.
    #[inline]
    fn advance(&mut self) {
        if let Some(p) = self.ptr {
            self.ptr = self.members.above(p);
        }
    }
    /// `htb_id_find_next_upper`: the member with classid `id`, or the next above it.
    #[inline]
    fn find_upper(&self, id: u16) -> Option<u16> {
        self.members.at_or_above(id)
    }
    #[inline]
    fn first(&self) -> Option<u16> {
        self.members.first()
    }
}

/// A level's wait queue (the kernel's `wait_pq` rb-tree): the classes of that level not in
/// CanSend, by (wake time, class). A binary heap with lazy removal: each entry carries the
/// class's `wait_gen` at its insertion, and removing a class only moves its generation on,
/// so an entry is live iff its generation is the class's; dead entries are dropped when
/// they reach the top. It pops the live entries in the order a `BTreeSet<(i64, u32)>`
/// (an ordered set of (wake time, class)) did, for less: on a 10,000-subscriber tree, where
/// every packet a shaped class sends takes it out of and back into its wait queue, the
/// switch cut the run loop's instructions by 4 % (bench/README.md, "ISP trees on a quiet
/// machine").
///
/// Dead entries are bounded: a removed class's entry stays until its wake time comes, so
/// when dead entries outnumber live ones (plus 64) the heap keeps only its live ones, in
/// O(n) once per as many removals; it never holds much more than twice what the ordered
/// set held.
#[derive(Default)]
struct WaitQueue {
    heap: BinaryHeap<Reverse<(i64, u32, u32)>>,
    /// Classes in this queue (live entries).
    live: u32,
}

/// The feeds of an inner class, one per priority (`inner.clprio[prio]`).
#[derive(Default)]
struct Inner {
    feeds: [Ring; NUM_PRIO],
}

#[derive(Clone, Copy)]
enum Slot {
    Row(usize),
    Feed(u32),
}

/// Which header field an address filter compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FilterField {
    Src,
    Dst,
}

/// The address an address filter matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddrMatch {
    /// A simulator node: the address whose low 32 bits are the node id (IPv4 `n`, IPv6
    /// `fd00::n`). Experiment files name the node; sojourn-experiment resolves the name.
    Node(u32),
    /// An exact IP address.
    Ip(Addr),
}

/// One address filter: packets whose `field` matches `addr` go to class `minor` (as a
/// `tc filter … u32 match ip dst ADDR flowid H:minor` at the root).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HtbFilter {
    pub field: FilterField,
    pub addr: AddrMatch,
    pub minor: u16,
}

/// Address filters ready for lookups: (field, address) → (filter index, class index). A
/// packet takes the first filter in the given order that matches, as tc tries filters in
/// order; hash lookups keep that O(1) for 100 000 per-subscriber filters.
#[derive(Default)]
pub struct AddrFilters {
    node: [HashMap<u32, (u32, u32), BuildHasherDefault<KeyHasher>>; 2],
    ip: [HashMap<Addr, (u32, u32)>; 2],
}

impl AddrFilters {
    /// `class_of(minor)` is the class index a filter's classid names.
    pub fn new(filters: &[HtbFilter], class_of: impl Fn(u16) -> u32) -> AddrFilters {
        let mut f = AddrFilters::default();
        for (i, flt) in filters.iter().enumerate() {
            let v = (i as u32, class_of(flt.minor));
            let d = flt.field as usize;
            match flt.addr {
                AddrMatch::Node(n) => {
                    f.node[d].entry(n).or_insert(v);
                }
                AddrMatch::Ip(a) => {
                    f.ip[d].entry(a).or_insert(v);
                }
            }
        }
        f
    }

    /// The class of the first filter `pkt` matches.
    #[inline]
    pub fn classify(&self, pkt: &Packet) -> Option<u32> {
        if self.node[0].is_empty()
            && self.node[1].is_empty()
            && self.ip[0].is_empty()
            && self.ip[1].is_empty()
        {
            return None;
        }
        let mut best: Option<(u32, u32)> = None;
        for (d, addr) in [pkt.key.src_addr, pkt.key.dst_addr].into_iter().enumerate() {
            // A node id names the simulator's address of that node (IPv4 `n` or IPv6
            // `fd00::n`), whose low 32 bits are the id.
            let sim = addr.v4_bits().is_some() || addr.octets()[0] == 0xfd;
            // Empty maps are not asked: a lookup hashes its key first.
            let hits = [
                (sim && !self.node[d].is_empty())
                    .then(|| self.node[d].get(&addr.low32()))
                    .flatten(),
                (!self.ip[d].is_empty())
                    .then(|| self.ip[d].get(&addr))
                    .flatten(),
            ];
            for &(fi, ci) in hits.into_iter().flatten() {
                if best.is_none_or(|(bf, _)| fi < bf) {
                    best = Some((fi, ci));
                }
            }
        }
        best.map(|(_, c)| c)
    }
}

/// One class of the typed spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HtbClassSpec {
    /// Minor of the classid (`H:minor`).
    pub minor: u16,
    /// Minor of the parent class, `None` for a class directly under the qdisc.
    pub parent: Option<u16>,
    pub rate_bps: u64,
    pub ceil_bps: u64,
    pub burst_bytes: u64,
    pub cburst_bytes: u64,
    /// An explicit `quantum` (bytes); `None`: rate / r2q clamped to [1000, 200000].
    pub quantum_bytes: Option<u32>,
    pub prio: u8,
    /// Index into [`HtbSpec::leaves`] of this leaf's qdisc; `None`: pfifo of
    /// `tx_queue_len` packets (Linux's default leaf). Always `None` for inner classes.
    pub leaf: Option<u32>,
}

/// Typed spec of `htb`.
#[derive(Clone, Debug, PartialEq)]
pub struct HtbSpec {
    /// Major of the qdisc handle (`H:`); classids are `H:minor`.
    pub handle: u16,
    /// Minor of the default class; 0 = none (unclassified packets go to the direct queue).
    pub default_minor: u16,
    pub r2q: u32,
    pub direct_qlen: u32,
    /// Classes in the order given; parents need not come first.
    pub classes: Vec<HtbClassSpec>,
    /// Distinct leaf qdisc specs, shared by the classes that name them.
    pub leaves: Vec<QdiscSpec>,
    /// The default leaf (pfifo of `tx_queue_len`).
    pub default_leaf: Box<QdiscSpec>,
    pub filters: Vec<HtbFilter>,
}

/// The part of a classid after `H:` in tc's hex (`"1:10"` → (1, 0x10)).
pub fn parse_classid(s: &str) -> Option<(u16, u16)> {
    let (maj, min) = s.trim().split_once(':')?;
    let maj = if maj.is_empty() {
        0
    } else {
        u16::from_str_radix(maj, 16).ok()?
    };
    let min = if min.is_empty() {
        0
    } else {
        u16::from_str_radix(min.trim_start_matches("0x"), 16).ok()?
    };
    Some((maj, min))
}

/// `handle`: `"1:"` (tc's hex) or a major number; 1 by default.
pub fn read_handle(p: &mut Params) -> ConfResult<u16> {
    match p.raw("handle") {
        None => Ok(1),
        Some(Value::Int(h)) if (1..=0xFFFF).contains(h) => Ok(*h as u16),
        Some(Value::Str(s)) => match u16::from_str_radix(s.trim().trim_end_matches(':'), 16) {
            Ok(h) if h >= 1 => Ok(h),
            _ => Err(p.err(
                "handle",
                format!("{s:?} is not a tc handle major like \"1:\" (hex, 1..ffff)"),
            )),
        },
        Some(v) => Err(p.err(
            "handle",
            format!("expected \"1:\" or a major number, got {}", v.type_name()),
        )),
    }
}

/// A classid key (`"1:10"`) of a class under handle `h`; returns the minor.
pub fn read_classid(p: &mut Params, key: &str, h: u16) -> ConfResult<Option<u16>> {
    let Some(v) = p.raw(key) else { return Ok(None) };
    let Value::Str(s) = v else {
        return Err(p.err(
            key,
            format!(
                "expected a classid like \"{h:x}:10\", got {}",
                v.type_name()
            ),
        ));
    };
    match parse_classid(s) {
        Some((maj, min)) if maj == h && min != 0 => Ok(Some(min)),
        Some((maj, 0)) if maj == h => Ok(Some(0)),
        Some((maj, _)) => Err(p.err(
            key,
            format!("{s:?}: major {maj:x} is not this htb's handle {h:x}:"),
        )),
        None => Err(p.err(
            key,
            format!("{s:?} is not a classid like \"{h:x}:10\" (hex major:minor)"),
        )),
    }
}

impl HtbSpec {
    /// Validates a spec made in code (the ISP topology builds classes directly): the same
    /// checks as a file, errors under `path`.
    pub fn check(&self, path: &str) -> ConfResult<()> {
        let err = |m: String| Err(ConfError::new(path, m));
        let mut index: HashMap<u16, usize> = HashMap::with_capacity(self.classes.len());
        for (i, c) in self.classes.iter().enumerate() {
            if c.minor == 0 {
                return err(format!("classes[{i}]: classid minor 0 is the qdisc itself"));
            }
            if index.insert(c.minor, i).is_some() {
                return err(format!(
                    "classes[{i}]: duplicate classid {:x}:{:x}",
                    self.handle, c.minor
                ));
            }
        }
        let mut has_children = vec![false; self.classes.len()];
        for (i, c) in self.classes.iter().enumerate() {
            let name = format!("{:x}:{:x}", self.handle, c.minor);
            if c.rate_bps < 8 {
                return err(format!("classes[{i}] ({name}): rate must be at least 8bit"));
            }
            if c.rate_bps > c.ceil_bps {
                return err(format!(
                    "classes[{i}] ({name}): rate {} is above its ceil {}",
                    tc_rate(c.rate_bps),
                    tc_rate(c.ceil_bps)
                ));
            }
            if c.burst_bytes == 0 || c.cburst_bytes == 0 {
                return err(format!(
                    "classes[{i}] ({name}): burst and cburst must be positive"
                ));
            }
            if c.prio as usize >= NUM_PRIO {
                return err(format!(
                    "classes[{i}] ({name}): prio {} is not in 0..7",
                    c.prio
                ));
            }
            if let Some(l) = c.leaf {
                if l as usize >= self.leaves.len() {
                    return err(format!(
                        "classes[{i}] ({name}): leaf spec {l} does not exist"
                    ));
                }
            }
            if let Some(pm) = c.parent {
                let Some(&pi) = index.get(&pm) else {
                    return err(format!(
                        "classes[{i}] ({name}): parent {:x}:{pm:x} is not a class of this htb",
                        self.handle
                    ));
                };
                has_children[pi] = true;
                let parent = &self.classes[pi];
                for (what, v) in [("rate", c.rate_bps), ("ceil", c.ceil_bps)] {
                    if v > parent.ceil_bps {
                        return err(format!(
                            "classes[{i}] ({name}): {what} {} exceeds its parent {:x}:{pm:x}'s \
                             ceil {}",
                            tc_rate(v),
                            self.handle,
                            tc_rate(parent.ceil_bps)
                        ));
                    }
                }
            }
        }
        // Cycles and depth: walk up from each class.
        for (i, c) in self.classes.iter().enumerate() {
            let mut depth = 0;
            let mut cur = c.parent;
            while let Some(pm) = cur {
                depth += 1;
                if depth > self.classes.len() {
                    return err(format!(
                        "classes[{i}] ({:x}:{:x}): its parents form a cycle",
                        self.handle, c.minor
                    ));
                }
                cur = self.classes[index[&pm]].parent;
            }
            // Leaves are level 0 and inner classes levels 7 down to 1: at most 7 inner
            // levels above a leaf (the kernel: "tree is too deep").
            if depth >= MAX_DEPTH {
                return err(format!(
                    "classes[{i}] ({:x}:{:x}): the tree is too deep (at most {} levels of \
                     classes, as Linux)",
                    self.handle, c.minor, MAX_DEPTH
                ));
            }
        }
        for (i, c) in self.classes.iter().enumerate() {
            if has_children[i] && c.leaf.is_some() {
                return err(format!(
                    "classes[{i}] ({:x}:{:x}): a leaf qdisc on a class that has children \
                     (only leaf classes hold a qdisc)",
                    self.handle, c.minor
                ));
            }
        }
        for (i, f) in self.filters.iter().enumerate() {
            match index.get(&f.minor) {
                None => {
                    return err(format!(
                        "filters[{i}]: classid {:x}:{:x} is not a class of this htb",
                        self.handle, f.minor
                    ))
                }
                Some(&ci) if has_children[ci] => {
                    return err(format!(
                        "filters[{i}]: classid {:x}:{:x} is an inner class; filters must \
                         name a leaf (Linux would fall back to the default class)",
                        self.handle, f.minor
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The kernel's warnings for this tree, as tc prints them: `quantum of class 10001 is
    /// big. Consider r2q change.` for each class whose automatic quantum was clamped.
    pub fn warnings(&self) -> Vec<String> {
        self.classes
            .iter()
            .filter(|c| c.quantum_bytes.is_none())
            .filter_map(|c| {
                auto_quantum(c.rate_bps, self.r2q).1.map(|w| {
                    format!(
                        "quantum of class {:X} is {w}. Consider r2q change.",
                        (self.handle as u32) << 16 | c.minor as u32
                    )
                })
            })
            .collect()
    }

    /// The quantum the kernel gives class `c`.
    pub fn quantum_of(&self, c: &HtbClassSpec) -> u64 {
        match c.quantum_bytes {
            Some(q) => q as u64,
            None => auto_quantum(c.rate_bps, self.r2q).0,
        }
    }

    /// Adds a leaf spec (or finds an equal one), returning its index for
    /// [`HtbClassSpec::leaf`].
    pub fn leaf_index(&mut self, spec: QdiscSpec) -> u32 {
        intern_leaf(&mut self.leaves, spec)
    }

    fn parse_class(
        &mut self,
        v: &Value,
        path: &str,
        ctx: &BuildCtx,
        leaf_cache: &mut Vec<(Value, u32)>,
    ) -> ConfResult<()> {
        let Value::Table(t) = v else {
            return Err(ConfError::new(
                path,
                format!("expected a class table, got {}", v.type_name()),
            ));
        };
        let mut p = Params::new(path, t);
        let h = self.handle;
        let minor = read_classid(&mut p, "classid", h)?.ok_or_else(|| {
            p.err(
                "classid",
                format!("each class needs `classid`, e.g. \"{h:x}:10\""),
            )
        })?;
        if minor == 0 {
            return Err(p.err("classid", "minor 0 is the qdisc itself, not a class"));
        }
        let parent = read_classid(&mut p, "parent", h)?.filter(|&m| m != 0);
        let rate = match p.rate_opt("rate")? {
            Some(r) if r >= 8 => r,
            Some(_) => return Err(p.err("rate", "must be at least 8bit")),
            None => {
                return Err(p.err(
                    "rate",
                    "required (tc: \"rate\" is required), e.g. rate = \"10Mbit\"",
                ))
            }
        };
        let ceil = match p.rate_opt("ceil")? {
            Some(c) if c >= 8 => c,
            Some(_) => return Err(p.err("ceil", "must be at least 8bit")),
            None => rate,
        };
        if rate > ceil {
            return Err(p.err(
                "rate",
                format!(
                    "{} is above the class's ceil {}",
                    tc_rate(rate),
                    tc_rate(ceil)
                ),
            ));
        }
        let burst = match p.bytes_opt("burst")? {
            Some(0) => return Err(p.err("burst", "must be positive")),
            Some(b) => b,
            None => default_burst_bytes(rate),
        };
        let cburst = match p.bytes_opt("cburst")? {
            Some(0) => return Err(p.err("cburst", "must be positive")),
            Some(b) => b,
            None => default_burst_bytes(ceil),
        };
        let quantum = match p.bytes_opt("quantum")? {
            Some(0) => return Err(p.err("quantum", "must be positive")),
            Some(q) if q > i32::MAX as u64 => {
                return Err(p.err("quantum", "must be below 2^31 bytes"))
            }
            Some(q) => Some(q as u32),
            None => None,
        };
        let prio = p.u32("prio", 0, 0, NUM_PRIO as u32 - 1)? as u8;
        let leaf = match p.raw("qdisc") {
            None => None,
            Some(lv) => {
                if let Some((_, i)) = leaf_cache.iter().find(|(v, _)| v == lv) {
                    Some(*i)
                } else {
                    let spec = QdiscSpec::parse(lv, &p.key_path("qdisc"), ctx)?;
                    let i = self.leaf_index(spec);
                    leaf_cache.push((lv.clone(), i));
                    Some(i)
                }
            }
        };
        p.finish()?;
        self.classes.push(HtbClassSpec {
            minor,
            parent,
            rate_bps: rate,
            ceil_bps: ceil,
            burst_bytes: burst,
            cburst_bytes: cburst,
            quantum_bytes: quantum,
            prio,
            leaf,
        });
        Ok(())
    }
}

/// Reads one address filter `{ dst = NODE | "ADDR", classid = "H:M" }` (or `src`) of a
/// classful qdisc with handle `h`; a node is given by its id here (experiment files name
/// it; sojourn-experiment puts the id in).
pub fn parse_filter(v: &Value, path: &str, h: u16) -> ConfResult<HtbFilter> {
    let Value::Table(t) = v else {
        return Err(ConfError::new(
            path,
            format!(
                "expected a filter table like {{ dst = \"sub3\", classid = \"1:13\" }}, got {}",
                v.type_name()
            ),
        ));
    };
    let mut p = Params::new(path, t);
    let minor = read_classid(&mut p, "classid", h)?
        .filter(|&m| m != 0)
        .ok_or_else(|| p.err("classid", format!("required, e.g. \"{h:x}:10\"")))?;
    let src = p.raw("src");
    let dst = p.raw("dst");
    let (field, key, v) = match (src, dst) {
        (Some(_), Some(_)) => {
            return Err(p.err("dst", "give either `src` or `dst` (one address per filter)"))
        }
        (Some(v), None) => (FilterField::Src, "src", v),
        (None, Some(v)) => (FilterField::Dst, "dst", v),
        (None, None) => {
            return Err(p.err(
                "dst",
                "a filter needs `dst` or `src`: a node name or an IP address",
            ))
        }
    };
    let addr = match v {
        Value::Int(n) if *n >= 0 && *n <= u32::MAX as i64 => AddrMatch::Node(*n as u32),
        Value::Str(s) => match s.parse::<std::net::IpAddr>() {
            Ok(ip) => AddrMatch::Ip(Addr::from(ip)),
            Err(_) => {
                return Err(p.err(
                    key,
                    format!(
                        "{s:?} is neither an IP address nor a node of the experiment \
                         (node names are resolved in experiment files only)"
                    ),
                ))
            }
        },
        other => {
            return Err(p.err(
                key,
                format!(
                    "expected a node name or an IP address, got {}",
                    other.type_name()
                ),
            ))
        }
    };
    p.finish()?;
    Ok(HtbFilter { field, addr, minor })
}

impl Discipline for HtbSpec {
    const KIND: &'static str = "htb";
    const SUMMARY: &'static str =
        "Hierarchical token bucket: classes with rate/ceil, borrowing, DRR (Linux sch_htb)";
    type Qdisc = Box<Htb>;

    /// `htb [handle H:] [default MINOR] [r2q N] [direct_qlen N] classes = [...]
    /// [filters = [...]]`.
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let handle = read_handle(p)?;
        let default_minor = match p.raw("default") {
            None => 0,
            Some(Value::Str(s)) => {
                // tc reads `default 30` as hex (get_u32 base 16); "1:30" names the class.
                let s = s.trim();
                let min = if s.contains(':') {
                    match parse_classid(s) {
                        Some((maj, m)) if maj == handle => Some(m),
                        _ => None,
                    }
                } else {
                    u16::from_str_radix(s.trim_start_matches("0x"), 16).ok()
                };
                min.ok_or_else(|| {
                    p.err(
                        "default",
                        format!(
                            "{s:?} is not a class minor in tc's hex (\"30\") or a classid \
                             \"{handle:x}:30\""
                        ),
                    )
                })?
            }
            Some(v) => {
                return Err(p.err(
                    "default",
                    format!(
                        "expected a string such as \"30\" (hex, as tc) or \"{handle:x}:30\", \
                         got {}",
                        v.type_name()
                    ),
                ))
            }
        };
        let r2q = p.u32("r2q", DEFAULT_R2Q, 1, u32::MAX)?;
        // The kernel: direct_qlen defaults to the device's tx_queue_len.
        let direct_qlen = p.u32("direct_qlen", ctx.tx_queue_len.max(2), 1, u32::MAX)?;
        let default_leaf = QdiscSpec::parse(&Value::Str("pfifo".into()), "htb.leaf", ctx)?;
        let mut spec = HtbSpec {
            handle,
            default_minor,
            r2q,
            direct_qlen,
            classes: Vec::new(),
            leaves: Vec::new(),
            default_leaf: Box::new(default_leaf),
            filters: Vec::new(),
        };
        let classes_path = p.key_path("classes");
        let filters_path = p.key_path("filters");
        let mut cache = Vec::new();
        each_item(p, "classes", "class", |v, path| {
            spec.parse_class(v, &path, ctx, &mut cache)
        })?;
        each_item(p, "filters", "filter", |v, path| {
            spec.filters.push(parse_filter(v, &path, handle)?);
            Ok(())
        })?;
        // Tree checks name the class by index under `classes`.
        spec.check(&classes_path).map_err(|e| {
            if e.msg.starts_with("filters[") {
                ConfError::new(filters_path.clone(), e.msg)
            } else {
                e
            }
        })?;
        Ok(spec)
    }

    fn build(&self, ctx: &BuildCtx) -> Box<Htb> {
        Box::new(Htb::new(self, ctx))
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS);

    /// The qdisc line: `default MINOR r2q N direct_qlen N` (classes, leaves and filters
    /// are lines of their own: [`Classful::tc_classes`], [`Classful::tc_filters`]).
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        Ok(self.qdisc_args())
    }

    /// The handle is semantic (classids and `skb->priority` name it).
    /// The handle is semantic: classids and `skb->priority` name it.
    const TC_HANDLE_KEY: Option<&'static str> = Some("handle");

    fn facts(&self) -> Facts {
        Facts::with_tc_handle(self.handle)
    }
}

/// tc keywords of the `htb` qdisc line.
pub const TC_KEYS: &[TcKey] = &[
    TcKey::Text("default", "default"),
    TcKey::Int("r2q", "r2q"),
    TcKey::Int("direct_qlen", "direct_qlen"),
];

impl HtbSpec {
    fn qdisc_args(&self) -> Vec<String> {
        vec![
            "default".into(),
            format!("{:x}", self.default_minor),
            "r2q".into(),
            self.r2q.to_string(),
            "direct_qlen".into(),
            self.direct_qlen.to_string(),
        ]
    }

    /// The arguments of `tc class add dev X parent P classid H:M htb ARGS` for class `c`.
    pub fn class_args(&self, c: &HtbClassSpec) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "rate".into(),
            tc_rate(c.rate_bps),
            "ceil".into(),
            tc_rate(c.ceil_bps),
            "burst".into(),
            tc_size(c.burst_bytes),
            "cburst".into(),
            tc_size(c.cburst_bytes),
        ];
        // Only an explicit quantum: otherwise the kernel computes the same one from r2q.
        if let Some(q) = c.quantum_bytes {
            a.extend(["quantum".into(), q.to_string()]);
        }
        a.extend(["prio".into(), c.prio.to_string()]);
        a
    }

    /// Classes with parents before children (the order tc needs to create them).
    fn classes_top_down(&self) -> Vec<&HtbClassSpec> {
        let index: HashMap<u16, usize> = self
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.minor, i))
            .collect();
        let depth = |c: &HtbClassSpec| {
            let mut d = 0;
            let mut cur = c.parent;
            while let Some(m) = cur {
                d += 1;
                cur = self.classes[index[&m]].parent;
            }
            d
        };
        let mut v: Vec<(usize, &HtbClassSpec)> =
            self.classes.iter().map(|c| (depth(c), c)).collect();
        v.sort_by_key(|(d, _)| *d);
        v.into_iter().map(|(_, c)| c).collect()
    }
}

impl Classful for HtbSpec {
    /// The explicit leaf specs (shared specs are listed once).
    fn children(&self) -> Vec<&QdiscSpec> {
        self.leaves.iter().collect()
    }
    /// One tc child per class with an explicit leaf, under that class (classes without
    /// one keep the default pfifo Linux makes itself).
    fn tc_children(&self) -> Vec<&QdiscSpec> {
        explicit_leaves(&self.leaves, self.classes.iter().map(|c| (c.minor, c.leaf))).0
    }
    fn tc_child_minors(&self) -> Vec<u16> {
        explicit_leaves(&self.leaves, self.classes.iter().map(|c| (c.minor, c.leaf))).1
    }
    /// `parent H:[P] classid H:M htb rate … ceil … burst … cburst … [quantum …] prio …`.
    fn tc_classes(&self) -> Result<Vec<TcClass>, NotLinux> {
        Ok(self
            .classes_top_down()
            .into_iter()
            .map(|c| TcClass {
                parent: self.handle,
                parent_minor: c.parent.unwrap_or(0),
                classid: (self.handle, c.minor),
                kind: "htb",
                args: self.class_args(c),
            })
            .collect())
    }
    fn tc_filters(&self) -> Result<Vec<String>, NotLinux> {
        tc_filter_lines("htb", self.handle, &self.filters)
    }
    /// Children read back from a tc tree hang under the classes they name.
    fn attach(&mut self, children: Vec<(u16, QdiscSpec)>) -> ConfResult<()> {
        let minors: Vec<u16> = self.classes.iter().map(|c| c.minor).collect();
        for (i, l) in attach_to_classes("htb", self.handle, &minors, &mut self.leaves, children)? {
            self.classes[i].leaf = Some(l);
        }
        self.check("tc")
    }
}

/// `tc filter` arguments for address filters: `parent H: protocol ip prio 1 u32 match ip
/// dst A/32 flowid H:M` (IPv6: `protocol ipv6 prio 2 … match ip6 dst A/128`). Node filters
/// need the node's real address, which only the experiment's deployment knows.
pub fn tc_filter_lines(
    kind: &'static str,
    handle: u16,
    filters: &[HtbFilter],
) -> Result<Vec<String>, NotLinux> {
    filters
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let dir = match f.field {
                FilterField::Src => "src",
                FilterField::Dst => "dst",
            };
            match f.addr {
                AddrMatch::Node(n) => Err(NotLinux::new(
                    kind,
                    format!(
                        "filters[{i}] matches node {n} by name; deploy cannot know its address on the test bed: give the address (`{dir} = \"10.0.0.3\"`)"
                    ),
                )),
                AddrMatch::Ip(a) => {
                    let ip = std::net::IpAddr::from(a);
                    let (proto, prio, m, len) = if ip.is_ipv4() {
                        ("ip", 1, "ip", 32)
                    } else {
                        ("ipv6", 2, "ip6", 128)
                    };
                    Ok(format!(
                        "parent {handle:x}: protocol {proto} prio {prio} u32 match {m} {dir} {ip}/{len} flowid {handle:x}:{:x}",
                        f.minor
                    ))
                }
            }
        })
        .collect()
}

/// The built shaper.
pub struct Htb {
    handle: u16,
    default_class: u32,
    classes: Vec<Class>,
    /// Class index by minor (`NONE` where there is none; [`Htb::class_of`]).
    class_of_minor: Vec<u32>,
    inner: Vec<Inner>,
    /// `hlevel[level].hprio[prio].row`: classes of that level that can send, per priority.
    rows: Vec<Ring>,
    row_mask: [u8; MAX_DEPTH],
    /// Bit `level`: some class is of that level (dequeue visits only those).
    levels_used: u8,
    /// Classes not in CanSend, by (wake time, class).
    wait: [WaitQueue; MAX_DEPTH],
    direct: VecDeque<Packet>,
    direct_qlen: usize,
    direct_pkts: u64,
    leaves: Leaves,
    filters: AddrFilters,
    /// Bytes in the direct queue.
    direct_bytes: u64,
    overlimits: u64,
}

impl Htb {
    pub fn new(spec: &HtbSpec, ctx: &BuildCtx) -> Htb {
        let n = spec.classes.len();
        // Class index by minor (the spec was validated: every parent and filter names one).
        let mut class_of_minor = vec![
            NONE;
            spec.classes
                .iter()
                .map(|c| c.minor as usize + 1)
                .max()
                .unwrap_or(0)
        ];
        for (i, c) in spec.classes.iter().enumerate() {
            class_of_minor[c.minor as usize] = i as u32;
        }
        let by_minor = |m: u16| class_of_minor[m as usize];
        let parent_of = |c: &HtbClassSpec| c.parent.map_or(NONE, by_minor);
        let mut has_children = vec![false; n];
        for c in &spec.classes {
            if let Some(m) = c.parent {
                has_children[by_minor(m) as usize] = true;
            }
        }
        // Inner levels from the top: a top-level inner class is level 7, its inner
        // children 6, … (the kernel numbers a new parent `parent's level − 1`).
        let depth = |mut i: usize| {
            let mut d = 0;
            while let Some(m) = spec.classes[i].parent {
                i = by_minor(m) as usize;
                d += 1;
            }
            d
        };
        let mut classes = Vec::with_capacity(n);
        let mut inner = Vec::new();
        for (i, c) in spec.classes.iter().enumerate() {
            let level = if has_children[i] {
                (MAX_DEPTH - 1 - depth(i)) as u8
            } else {
                0
            };
            let inner_idx = if has_children[i] {
                inner.push(Inner::default());
                (inner.len() - 1) as u32
            } else {
                NONE
            };
            let quantum = spec.quantum_of(c).min(i32::MAX as u64) as i32;
            let buffer_ns = tc_xmittime_ns(c.rate_bps, c.burst_bytes);
            let cbuffer_ns = tc_xmittime_ns(c.ceil_bps, c.cburst_bytes);
            classes.push(Class {
                tokens: buffer_ns,
                ctokens: cbuffer_ns,
                t_c: 0,
                pq_key: 0,
                wait_gen: 0,
                buffer_ns,
                cbuffer_ns,
                rate: Rate::new(c.rate_bps),
                ceil: Rate::new(c.ceil_bps),
                deficit: [0; MAX_DEPTH],
                quantum,
                parent: parent_of(c),
                inner: inner_idx,
                leaf: NONE,
                leaf_spec: c.leaf.unwrap_or(NONE),
                minor: c.minor,
                level,
                prio: c.prio,
                mode: Mode::CanSend,
                prio_activity: 0,
                stats: ClassStats::default(),
            });
        }
        let default_class = match class_of_minor.get(spec.default_minor as usize) {
            Some(&i) if i != NONE && classes[i as usize].level == 0 => i,
            _ => NONE,
        };
        let filters = AddrFilters::new(&spec.filters, by_minor);
        let levels_used = classes.iter().fold(0u8, |m, c: &Class| m | 1 << c.level);
        Htb {
            handle: spec.handle,
            default_class,
            classes,
            class_of_minor,
            inner,
            rows: (0..MAX_DEPTH * NUM_PRIO).map(|_| Ring::default()).collect(),
            row_mask: [0; MAX_DEPTH],
            levels_used,
            wait: Default::default(),
            direct: VecDeque::new(),
            direct_qlen: spec.direct_qlen as usize,
            direct_pkts: 0,
            leaves: Leaves::new(&spec.leaves, &spec.default_leaf, ctx),
            filters,
            direct_bytes: 0,
            overlimits: 0,
        }
    }
}

/// The leaf qdiscs of a classful discipline (htb, drr): each built on its class's first
/// packet from the class's spec (or the default pfifo) with its own random stream
/// (`ctx.child(class index)`), and the packets and bytes they hold in all.
pub struct Leaves {
    built: Vec<AnyQdisc>,
    specs: Vec<QdiscSpec>,
    default: QdiscSpec,
    ctx: BuildCtx,
    packets: usize,
    bytes: u64,
}

impl Leaves {
    pub fn new(specs: &[QdiscSpec], default: &QdiscSpec, ctx: &BuildCtx) -> Leaves {
        Leaves {
            built: Vec::new(),
            specs: specs.to_vec(),
            default: default.clone(),
            ctx: ctx.clone(),
            packets: 0,
            bytes: 0,
        }
    }

    /// The leaf whose index `slot` holds (NONE until built), building it now from spec
    /// `spec` (NONE: the default) for class `class`.
    #[inline]
    pub fn ensure(&mut self, slot: &mut u32, spec: u32, class: u32) -> u32 {
        if *slot == NONE {
            let s = match spec {
                NONE => &self.default,
                i => &self.specs[i as usize],
            };
            self.built.push(s.build(&self.ctx.child(class as u64)));
            *slot = (self.built.len() - 1) as u32;
        }
        *slot
    }

    /// The leaf at `slot`, if built.
    pub fn get(&self, slot: u32) -> Option<&AnyQdisc> {
        self.built.get(slot as usize)
    }

    /// Packets the leaf at `slot` holds (0 if not built).
    #[inline]
    pub fn queued(&self, slot: u32) -> usize {
        self.get(slot).map_or(0, |q| q.len_packets())
    }

    /// Runs `op` on the leaf at `slot` with the totals kept in step; also gives how many
    /// packets it dropped.
    #[inline]
    pub fn with<R>(
        &mut self,
        slot: u32,
        drops: &mut Drops,
        op: impl FnOnce(&mut AnyQdisc, &mut Drops) -> R,
    ) -> (R, u64) {
        let q = &mut self.built[slot as usize];
        let ((n0, b0), d0) = (q.backlog(), drops.len());
        let r = op(q, drops);
        let (n1, b1) = q.backlog();
        self.packets = self.packets + n1 - n0;
        self.bytes = self.bytes + b1 - b0;
        (r, (drops.len() - d0) as u64)
    }

    /// Packets and bytes all leaves hold.
    #[inline]
    pub fn totals(&self) -> (usize, u64) {
        (self.packets, self.bytes)
    }

    /// How many leaves have been built.
    pub fn count(&self) -> usize {
        self.built.len()
    }

    pub fn ecn_marks(&self) -> u64 {
        self.built.iter().map(|q| q.ecn_marks()).sum()
    }

    /// The leaf's queue and own series, named `PREFIX.name`.
    pub fn observe(&mut self, slot: u32, now: Time, prefix: &str, emit: &mut dyn FnMut(&str, f64)) {
        if let Some(q) = self.built.get_mut(slot as usize) {
            emit(&format!("{prefix}.queue"), q.len_packets() as f64);
            q.observe(now, &mut |k, v| emit(&format!("{prefix}.{k}"), v));
        }
    }
}

/// The index of `spec` among `specs`, added if no equal one is there (classes with equal
/// leaves share one spec).
pub fn intern_leaf(specs: &mut Vec<QdiscSpec>, spec: QdiscSpec) -> u32 {
    match specs.iter().position(|s| *s == spec) {
        Some(i) => i as u32,
        None => {
            specs.push(spec);
            (specs.len() - 1) as u32
        }
    }
}

/// The explicit leaves of `(class minor, leaf index)` pairs and their minors, for tc: each
/// leaf hangs under its class.
pub fn explicit_leaves(
    specs: &[QdiscSpec],
    classes: impl Iterator<Item = (u16, Option<u32>)>,
) -> (Vec<&QdiscSpec>, Vec<u16>) {
    classes
        .filter_map(|(m, l)| l.map(|l| (&specs[l as usize], m)))
        .unzip()
}

/// Children read back from a tc tree, by class minor: `(class position, leaf index)` for
/// each, or an error naming a minor that is no class of this `kind` qdisc.
pub fn attach_to_classes(
    kind: &str,
    handle: u16,
    minors: &[u16],
    specs: &mut Vec<QdiscSpec>,
    children: Vec<(u16, QdiscSpec)>,
) -> ConfResult<Vec<(usize, u32)>> {
    children
        .into_iter()
        .map(
            |(minor, spec)| match minors.iter().position(|&m| m == minor) {
                Some(i) => Ok((i, intern_leaf(specs, spec))),
                None => Err(ConfError::new(
                    "tc",
                    format!("{kind} has no class {handle:x}:{minor:x}"),
                )),
            },
        )
        .collect()
}

/// Calls `f(item, its path)` for each item of the array at `key` (nothing if absent); `what`
/// names the items for the error when it is no array.
pub fn each_item<'a>(
    p: &mut Params<'a>,
    key: &str,
    what: &str,
    mut f: impl FnMut(&'a Value, String) -> ConfResult<()>,
) -> ConfResult<()> {
    let path = p.key_path(key);
    match p.raw(key) {
        None => Ok(()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| f(v, format!("{path}[{i}]"))),
        Some(v) => Err(p.err(
            key,
            format!("expected an array of {what} tables, got {}", v.type_name()),
        )),
    }
}

/// Where a classified packet goes.
enum Target {
    Class(u32),
    Direct,
}

impl Htb {
    /// The classes' counters, `(classid minor, stats)`, in the spec's class order.
    pub fn class_stats(&self) -> impl Iterator<Item = (u16, &ClassStats)> + '_ {
        self.classes.iter().map(|c| (c.minor, &c.stats))
    }
    /// Counters of class `H:minor`, if it exists.
    pub fn stats_of(&self, minor: u16) -> Option<&ClassStats> {
        self.class_of(minor)
            .map(|i| &self.classes[i as usize].stats)
    }
    /// The index of class `H:minor`, if it exists.
    #[inline]
    fn class_of(&self, minor: u16) -> Option<u32> {
        self.class_of_minor
            .get(minor as usize)
            .copied()
            .filter(|&i| i != NONE)
    }
    /// Packets sent through the direct queue (`direct_packets_stat`).
    pub fn direct_packets(&self) -> u64 {
        self.direct_pkts
    }
    /// Times any class went over its ceil (`overlimits` of the qdisc).
    pub fn overlimits(&self) -> u64 {
        self.overlimits
    }
    /// Leaf qdiscs built so far (one per class that has seen a packet).
    pub fn leaves_built(&self) -> usize {
        self.leaves.count()
    }
    /// The leaf qdisc of class `H:minor`, once built.
    pub fn leaf_of(&self, minor: u16) -> Option<&AnyQdisc> {
        self.leaves
            .get(self.classes[self.class_of(minor)? as usize].leaf)
    }
    /// Queued packets of class `H:minor` (0 before its leaf exists).
    pub fn class_len_packets(&self, minor: u16) -> usize {
        self.leaf_of(minor).map_or(0, |q| q.len_packets())
    }

    /// `htb_classify` with sojourn's filters (address matches at the root).
    #[inline]
    fn classify(&self, pkt: &Packet) -> Target {
        let prio = pkt.priority;
        if prio >> 16 == self.handle as u32 {
            let minor = (prio & 0xFFFF) as u16;
            if minor == 0 {
                // X:0 selects the direct queue.
                return Target::Direct;
            }
            if let Some(i) = self.class_of(minor) {
                if self.classes[i as usize].level == 0 {
                    return Target::Class(i);
                }
                // An inner class: its own filter chain, which is empty here; fall through
                // to the default class as the kernel does when that chain finds nothing.
                return self.default_target();
            }
        }
        if let Some(i) = self.filters.classify(pkt) {
            return Target::Class(i);
        }
        self.default_target()
    }

    #[inline]
    fn default_target(&self) -> Target {
        if self.default_class == NONE {
            Target::Direct
        } else {
            Target::Class(self.default_class)
        }
    }

    #[inline]
    fn row(&mut self, level: usize, prio: usize) -> &mut Ring {
        &mut self.rows[level * NUM_PRIO + prio]
    }

    fn ring(&mut self, slot: Slot, prio: usize) -> &mut Ring {
        match slot {
            Slot::Row(level) => self.row(level, prio),
            Slot::Feed(i) => &mut self.inner[i as usize].feeds[prio],
        }
    }

    /// `htb_add_class_to_row`.
    fn add_to_row(&mut self, cl: u32, mask: u8) {
        let (level, minor) = {
            let c = &self.classes[cl as usize];
            (c.level as usize, c.minor)
        };
        self.row_mask[level] |= mask;
        for prio in bits(mask) {
            self.row(level, prio).members.insert(minor);
        }
    }

    /// `htb_remove_class_from_row`: a removed class that had the turn passes it on.
    fn remove_from_row(&mut self, cl: u32, mask: u8) {
        let (level, minor) = {
            let c = &self.classes[cl as usize];
            (c.level as usize, c.minor)
        };
        let mut emptied = 0u8;
        for prio in bits(mask) {
            let r = self.row(level, prio);
            if r.ptr == Some(minor) {
                r.advance();
            }
            r.members.remove(minor);
            if r.members.is_empty() {
                emptied |= 1 << prio;
            }
        }
        self.row_mask[level] &= !emptied;
    }

    /// `htb_activate_prios`: hangs `cl` into its parent's feeds while it may borrow, up
    /// to the first ancestor that can send, which goes into its level's row.
    fn activate_prios(&mut self, mut cl: u32) {
        let mut mask = self.classes[cl as usize].prio_activity;
        loop {
            let c = &self.classes[cl as usize];
            let p = c.parent;
            if c.mode != Mode::MayBorrow || p == NONE || mask == 0 {
                break;
            }
            let minor = c.minor;
            let pin = self.classes[p as usize].inner as usize;
            for prio in bits(mask) {
                let feed = &mut self.inner[pin].feeds[prio];
                if !feed.members.is_empty() {
                    // The parent already feeds this priority: nothing changes above it.
                    mask &= !(1 << prio);
                }
                feed.members.insert(minor);
            }
            self.classes[p as usize].prio_activity |= mask;
            cl = p;
        }
        if self.classes[cl as usize].mode == Mode::CanSend && mask != 0 {
            self.add_to_row(cl, mask);
        }
    }

    /// `htb_deactivate_prios`: the reverse of [`Htb::activate_prios`].
    fn deactivate_prios(&mut self, mut cl: u32) {
        let mut mask = self.classes[cl as usize].prio_activity;
        loop {
            let c = &self.classes[cl as usize];
            let p = c.parent;
            if c.mode != Mode::MayBorrow || p == NONE || mask == 0 {
                break;
            }
            let minor = c.minor;
            let pin = self.classes[p as usize].inner as usize;
            let m = mask;
            mask = 0;
            for prio in bits(m) {
                let feed = &mut self.inner[pin].feeds[prio];
                if feed.ptr == Some(minor) {
                    // The class whose turn it was leaves: forget the pointer, remember
                    // the classid to resume from.
                    feed.last_id = Some(minor);
                    feed.ptr = None;
                }
                feed.members.remove(minor);
                if feed.members.is_empty() {
                    mask |= 1 << prio;
                }
            }
            self.classes[p as usize].prio_activity &= !mask;
            cl = p;
        }
        if self.classes[cl as usize].mode == Mode::CanSend && mask != 0 {
            self.remove_from_row(cl, mask);
        }
    }

    /// `htb_activate`: a leaf that got packets joins the schedule with its priority.
    #[inline]
    fn activate(&mut self, cl: u32) {
        let c = &mut self.classes[cl as usize];
        if c.prio_activity == 0 {
            c.prio_activity = 1 << c.prio;
            self.activate_prios(cl);
        }
    }

    /// `htb_deactivate`.
    fn deactivate(&mut self, cl: u32) {
        self.deactivate_prios(cl);
        self.classes[cl as usize].prio_activity = 0;
    }

    /// `htb_class_mode`: the mode after `diff` ns more of tokens; for a mode other than
    /// CanSend also how long until the deciding bucket reaches zero.
    #[inline]
    fn class_mode(c: &Class, diff: i64) -> (Mode, i64) {
        let ctoks = c.ctokens + diff;
        if ctoks < 0 {
            return (Mode::CantSend, -ctoks);
        }
        let toks = c.tokens + diff;
        if toks >= 0 {
            return (Mode::CanSend, diff);
        }
        (Mode::MayBorrow, -toks)
    }

    /// `htb_change_class_mode`: returns the wait (ns) if the new mode is not CanSend.
    fn change_mode(&mut self, cl: u32, diff: i64) -> i64 {
        let c = &self.classes[cl as usize];
        let (new, wait) = Self::class_mode(c, diff);
        if new == c.mode {
            return wait;
        }
        if new == Mode::CantSend {
            self.overlimits += 1;
            self.classes[cl as usize].stats.overlimits += 1;
        }
        if self.classes[cl as usize].prio_activity != 0 {
            if self.classes[cl as usize].mode != Mode::CantSend {
                self.deactivate_prios(cl);
            }
            self.classes[cl as usize].mode = new;
            if new != Mode::CantSend {
                self.activate_prios(cl);
            }
        } else {
            self.classes[cl as usize].mode = new;
        }
        wait
    }

    /// `htb_add_to_wait_tree`.
    fn add_to_wait(&mut self, cl: u32, now: i64, wait: i64) {
        let c = &mut self.classes[cl as usize];
        let mut key = now + wait;
        if key == now {
            key += 1;
        }
        c.pq_key = key;
        c.wait_gen = c.wait_gen.wrapping_add(1);
        let w = &mut self.wait[c.level as usize];
        w.heap.push(Reverse((key, cl, c.wait_gen)));
        w.live += 1;
        if w.heap.len() > 2 * w.live as usize + 64 {
            let classes = &self.classes;
            w.heap
                .retain(|&Reverse((_, cl, gen))| classes[cl as usize].wait_gen == gen);
        }
    }

    /// `htb_safe_rb_erase` from the wait queue: the class's entry dies in place.
    #[inline]
    fn remove_from_wait(&mut self, cl: u32) {
        let c = &mut self.classes[cl as usize];
        c.wait_gen = c.wait_gen.wrapping_add(1);
        self.wait[c.level as usize].live -= 1;
    }

    /// The live entry of `level`'s wait queue with the earliest (wake time, class), dead
    /// entries above it dropped.
    #[inline]
    fn wait_first(&mut self, level: usize) -> Option<(i64, u32)> {
        loop {
            let &Reverse((key, cl, gen)) = self.wait[level].heap.peek()?;
            if self.classes[cl as usize].wait_gen == gen {
                return Some((key, cl));
            }
            self.wait[level].heap.pop();
        }
    }

    /// `htb_charge_class`: `bytes` sent by leaf `cl` served at `level`.
    fn charge(&mut self, mut cl: u32, level: u8, bytes: u64, now: i64) {
        while cl != NONE {
            let c = &mut self.classes[cl as usize];
            let diff = (now - c.t_c).min(MBUFFER_NS);
            if c.level >= level {
                let mut toks = (diff + c.tokens).min(c.buffer_ns) - c.rate.l2t_ns(bytes);
                if toks <= -MBUFFER_NS {
                    toks = 1 - MBUFFER_NS;
                }
                c.tokens = toks;
            } else {
                // A class below the serving level borrowed: it pays no rate tokens, but
                // its checkpoint moves, so it keeps the time it earned.
                c.tokens += diff;
            }
            let mut ctoks = (diff + c.ctokens).min(c.cbuffer_ns) - c.ceil.l2t_ns(bytes);
            if ctoks <= -MBUFFER_NS {
                ctoks = 1 - MBUFFER_NS;
            }
            c.ctokens = ctoks;
            c.t_c = now;
            if c.level > 0 {
                c.stats.bytes += bytes;
                c.stats.packets += 1;
            }
            let old = c.mode;
            let parent = c.parent;
            let wait = self.change_mode(cl, 0);
            let new = self.classes[cl as usize].mode;
            if old != new {
                if old != Mode::CanSend {
                    self.remove_from_wait(cl);
                }
                if new != Mode::CanSend {
                    self.add_to_wait(cl, now, wait);
                }
            }
            cl = parent;
        }
    }

    /// `htb_do_events`: classes of `level` whose wait is over change mode. Returns the
    /// next wake time of that level, if any.
    fn do_events(&mut self, level: usize, now: i64) -> Option<i64> {
        loop {
            let (key, cl) = self.wait_first(level)?;
            if key > now {
                return Some(key);
            }
            self.wait[level].heap.pop();
            self.remove_from_wait(cl);
            let diff = (now - self.classes[cl as usize].t_c).min(MBUFFER_NS);
            let wait = self.change_mode(cl, diff);
            if self.classes[cl as usize].mode != Mode::CanSend {
                self.add_to_wait(cl, now, wait);
            }
        }
    }

    /// `htb_lookup_leaf`: from the row of (`level`, `prio`), follows the turn pointers
    /// down the feeds to a leaf. A pointer past its last class rewinds to the first and
    /// passes the turn on one step above.
    fn lookup_leaf(&mut self, level: usize, prio: usize) -> Option<u32> {
        let mut stk = [Slot::Row(level); MAX_DEPTH];
        let mut sp = 0usize;
        for _ in 0..65535 {
            let ring = self.ring(stk[sp], prio);
            if ring.ptr.is_none() {
                if let Some(id) = ring.last_id {
                    ring.ptr = ring.find_upper(id);
                }
            }
            ring.last_id = None;
            match ring.ptr {
                None => {
                    ring.ptr = Some(ring.first()?);
                    if sp > 0 {
                        sp -= 1;
                        let up = self.ring(stk[sp], prio);
                        up.ptr?;
                        up.advance();
                    }
                }
                Some(minor) => {
                    let cl = self.class_of_minor[minor as usize];
                    let c = &self.classes[cl as usize];
                    if c.level == 0 {
                        return Some(cl);
                    }
                    if sp + 1 >= MAX_DEPTH {
                        return None;
                    }
                    sp += 1;
                    stk[sp] = Slot::Feed(c.inner);
                }
            }
        }
        None
    }

    /// The ring in which leaf `cl` takes turns when served at `level`.
    fn turn_ring(&mut self, cl: u32, level: usize, prio: usize) -> &mut Ring {
        if level == 0 {
            self.row(0, prio)
        } else {
            let p = self.classes[cl as usize].parent;
            let pin = self.classes[p as usize].inner;
            &mut self.inner[pin as usize].feeds[prio]
        }
    }

    /// Runs `op` on class `cl`'s leaf, counting its drops against the class.
    #[inline]
    fn on_leaf<R>(
        &mut self,
        cl: u32,
        drops: &mut Drops,
        op: impl FnOnce(&mut AnyQdisc, &mut Drops) -> R,
    ) -> R {
        let (r, dropped) = self.leaves.with(self.classes[cl as usize].leaf, drops, op);
        self.classes[cl as usize].stats.drops += dropped;
        r
    }

    /// `htb_dequeue_tree`: one packet from the classes (`level`, `prio`) serves.
    fn dequeue_tree(
        &mut self,
        level: usize,
        prio: usize,
        now: Time,
        drops: &mut Drops,
        leaf_wake: &mut Option<Time>,
    ) -> Option<Packet> {
        let mut start = self.lookup_leaf(level, prio);
        let mut cur = start;
        loop {
            let cl = cur?;
            let li = self.classes[cl as usize].leaf;
            if self.leaves.queued(li) == 0 {
                // Emptied by its own qdisc since it was activated: leave the schedule.
                self.deactivate(cl);
                if self.row_mask[level] & (1 << prio) == 0 {
                    return None;
                }
                let next = self.lookup_leaf(level, prio);
                if cur == start {
                    start = next;
                }
                cur = next;
                continue;
            }
            match self.on_leaf(cl, drops, |q, d| q.dequeue(now, d)) {
                Dequeue::Packet(p) => {
                    let len = p.len_bytes as u64;
                    let c = &mut self.classes[cl as usize];
                    c.stats.bytes += len;
                    c.stats.packets += 1;
                    let soj = (now - p.enqueued_at).as_ns();
                    c.stats.sojourn_sum_ns += soj;
                    c.stats.sojourn_max_ns = c.stats.sojourn_max_ns.max(soj);
                    if level > 0 {
                        c.stats.borrowed += 1;
                    }
                    c.deficit[level] -= len.min(i32::MAX as u64) as i32;
                    if c.deficit[level] < 0 {
                        c.deficit[level] += c.quantum;
                        self.turn_ring(cl, level, prio).advance();
                    }
                    if self.leaves.queued(li) == 0 {
                        self.deactivate(cl);
                    }
                    self.charge(cl, level as u8, len, now.0 as i64);
                    return Some(p);
                }
                other => {
                    // A leaf that holds packets but sends none now (a shaper of its own):
                    // pass the turn on and remember when it may send.
                    if let Dequeue::NotBefore(t) = other {
                        *leaf_wake = Some(leaf_wake.map_or(t, |w| w.min(t)));
                    }
                    self.turn_ring(cl, level, prio).advance();
                    cur = self.lookup_leaf(level, prio);
                    if cur == start {
                        return None;
                    }
                }
            }
        }
    }

    /// The leaf of class `cl`, built on first use.
    #[inline]
    fn ensure_leaf(&mut self, cl: u32) -> u32 {
        let c = &mut self.classes[cl as usize];
        self.leaves.ensure(&mut c.leaf, c.leaf_spec, cl)
    }
}

/// The set bits of `mask`, lowest first.
#[inline]
fn bits(mask: u8) -> impl Iterator<Item = usize> {
    let mut m = mask;
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let b = m.trailing_zeros() as usize;
        m &= m - 1;
        Some(b)
    })
}

impl Qdisc for Htb {
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        match self.classify(&pkt) {
            Target::Direct => {
                if self.direct.len() < self.direct_qlen {
                    self.direct_bytes += pkt.len_bytes as u64;
                    self.direct.push_back(pkt);
                    self.direct_pkts += 1;
                    Verdict::Queued
                } else {
                    drops.push(pkt, DropReason::Overlimit);
                    Verdict::Dropped
                }
            }
            Target::Class(cl) => {
                let li = self.ensure_leaf(cl);
                let v = self.on_leaf(cl, drops, |q, d| q.enqueue(pkt, now, d));
                if self.leaves.queued(li) > 0 {
                    self.activate(cl);
                }
                v
            }
        }
    }

    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        // The direct queue goes first, unshaped.
        if let Some(p) = self.direct.pop_front() {
            self.direct_bytes -= p.len_bytes as u64;
            return Dequeue::Packet(p);
        }
        if self.leaves.totals().0 == 0 {
            return Dequeue::Empty;
        }
        let t = now.0 as i64;
        // The watchdog: at the latest 5 s on (the kernel's bound), else the first wake.
        let mut next_event = t + 5_000_000_000;
        if self.levels_used != u8::MAX {
            // A level without classes has no events: it would give "none" (t + 1 s).
            next_event = t + 1_000_000_000;
        }
        let mut leaf_wake = None;
        let mut levels = self.levels_used;
        while levels != 0 {
            let level = levels.trailing_zeros() as usize;
            levels &= levels - 1;
            let event = self.do_events(level, t).unwrap_or(t + 1_000_000_000);
            next_event = next_event.min(event);
            let mut m = self.row_mask[level];
            while m != 0 {
                let prio = m.trailing_zeros() as usize;
                m &= m - 1;
                if let Some(p) = self.dequeue_tree(level, prio, now, drops, &mut leaf_wake) {
                    return Dequeue::Packet(p);
                }
            }
        }
        if self.leaves.totals().0 == 0 {
            return Dequeue::Empty;
        }
        let mut wake = Time(next_event as u64);
        if let Some(w) = leaf_wake {
            wake = wake.min(w);
        }
        if wake <= now {
            wake = now + Duration(1);
        }
        Dequeue::NotBefore(wake)
    }

    /// The leaves' packets and the direct queue's.
    #[inline]
    fn len_packets(&self) -> usize {
        self.leaves.totals().0 + self.direct.len()
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        self.leaves.totals().1 + self.direct_bytes
    }
    fn ecn_marks(&self) -> u64 {
        self.leaves.ecn_marks()
    }

    /// `direct.packets`, `overlimits`, and per class `H:M.bytes` / `.packets` / `.drops` /
    /// `.queue` for trees of at most 64 classes (bigger trees: [`Htb::class_stats`]).
    fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
        emit("direct.packets", self.direct.len() as f64);
        emit("overlimits", self.overlimits as f64);
        if self.classes.len() > 64 {
            return;
        }
        for i in 0..self.classes.len() {
            let c = &self.classes[i];
            let name = format!("{:x}:{:x}", self.handle, c.minor);
            emit(&format!("{name}.bytes"), c.stats.bytes as f64);
            emit(&format!("{name}.packets"), c.stats.packets as f64);
            emit(&format!("{name}.drops"), c.stats.drops as f64);
            let leaf = c.leaf;
            self.leaves.observe(leaf, now, &name, emit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Table;
    use crate::qdisc::testkit::{check_conservation, pkt, Bound};

    fn s(x: &str) -> Value {
        Value::Str(x.into())
    }
    fn table(kv: &[(&str, Value)]) -> Value {
        Value::Table(Table(
            kv.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        ))
    }
    /// A class table: classid, parent ("" = none), rate, ceil ("" = rate), extra keys.
    fn class(id: &str, parent: &str, rate: &str, ceil: &str, extra: &[(&str, Value)]) -> Value {
        let mut kv = vec![("classid", s(id)), ("rate", s(rate))];
        if !parent.is_empty() {
            kv.push(("parent", s(parent)));
        }
        if !ceil.is_empty() {
            kv.push(("ceil", s(ceil)));
        }
        kv.extend(extra.iter().cloned());
        table(&kv)
    }
    /// A class under 1:1.
    fn child(id: &str, rate: &str, ceil: &str, extra: &[(&str, Value)]) -> Value {
        class(id, "1:1", rate, ceil, extra)
    }
    /// 1:1 at 100 Mbit/s with `children` under it.
    fn under_100(children: Vec<Value>) -> Htb {
        let mut all = vec![class("1:1", "", "100Mbit", "", &[])];
        all.extend(children);
        build(&[("classes", Value::Array(all))])
    }
    fn spec_of(kv: &[(&str, Value)]) -> ConfResult<HtbSpec> {
        let mut all = vec![("kind", s("htb"))];
        all.extend(kv.iter().cloned());
        match QdiscSpec::parse(&table(&all), "q", &BuildCtx::default())? {
            QdiscSpec::Htb(h) => Ok(h),
            other => panic!("{other:?}"),
        }
    }
    fn build(kv: &[(&str, Value)]) -> Htb {
        *spec_of(kv).unwrap().build(&BuildCtx::default())
    }
    fn err_of(kv: &[(&str, Value)]) -> ConfError {
        spec_of(kv).expect_err("accepted")
    }

    /// The classic tree: 1:1 at 100 Mbit/s, 1:10 rate 30 and 1:20 rate 70, both ceil 100.
    fn thirty_seventy() -> Htb {
        build(&[
            ("default", s("20")),
            (
                "classes",
                Value::Array(vec![
                    class("1:1", "", "100Mbit", "", &[]),
                    class("1:10", "1:1", "30Mbit", "100Mbit", &[]),
                    class("1:20", "1:1", "70Mbit", "100Mbit", &[]),
                ]),
            ),
        ])
    }

    /// A traffic source into class `1:minor`: saturated (`None`: its leaf never runs dry)
    /// or paced at a rate of 1500-byte packets.
    struct Src {
        minor: u16,
        rate_bps: Option<u64>,
        next_at: Time,
    }

    fn sat(minor: u16) -> Src {
        Src {
            minor,
            rate_bps: None,
            next_at: Time::ZERO,
        }
    }

    /// Runs `q` behind a 1 Gbit/s link for `secs` seconds; returns the bytes each source's
    /// class sent, and calls `on_send(now, minor, bytes so far of that class)` per packet.
    fn run(
        q: &mut Htb,
        srcs: &mut [Src],
        secs: u64,
        mut on_send: impl FnMut(Time, u16, u64),
    ) -> HashMap<u16, u64> {
        let until = Time(secs * 1_000_000_000);
        let link_bps = 1_000_000_000u64;
        let mut sent: HashMap<u16, u64> = HashMap::new();
        let mut d = Drops::new();
        let mut now = Time::ZERO;
        let mut link_free = Time::ZERO;
        let mut uid = 0u64;
        let mut bound = Bound::new(50_000_000, "htb test run");
        let mk = |uid: &mut u64, minor: u16, now: Time| {
            let mut p = pkt(*uid, minor as u32, 1500);
            *uid += 1;
            p.priority = 0x1_0000 | minor as u32;
            p.enqueued_at = now;
            p
        };
        loop {
            bound.tick();
            for src in srcs.iter_mut() {
                match src.rate_bps {
                    None => {
                        while q.class_len_packets(src.minor) < 20 {
                            q.enqueue(mk(&mut uid, src.minor, now), now, &mut d);
                        }
                    }
                    Some(r) => {
                        while src.next_at <= now {
                            q.enqueue(mk(&mut uid, src.minor, now), now, &mut d);
                            src.next_at += Duration(1500 * 8 * 1_000_000_000 / r);
                        }
                    }
                }
            }
            let mut wake = srcs
                .iter()
                .filter(|s| s.rate_bps.is_some())
                .map(|s| s.next_at)
                .min()
                .unwrap_or(until);
            if now >= link_free {
                match q.dequeue(now, &mut d) {
                    Dequeue::Packet(p) => {
                        let minor = (p.priority & 0xFFFF) as u16;
                        let b = sent.entry(minor).or_default();
                        *b += p.len_bytes as u64;
                        on_send(now, minor, *b);
                        link_free =
                            now + Duration(p.len_bytes as u64 * 8 * 1_000_000_000 / link_bps);
                        wake = wake.min(link_free);
                    }
                    Dequeue::NotBefore(t) => {
                        assert!(t > now, "a watchdog in the past");
                        wake = wake.min(t);
                    }
                    Dequeue::Empty => {}
                }
            } else {
                wake = wake.min(link_free);
            }
            if wake >= until {
                break;
            }
            now = wake;
        }
        d.clear();
        sent
    }

    fn within(got: u64, want: f64, tol: f64) -> bool {
        (got as f64 - want).abs() <= want * tol
    }

    #[test]
    fn thirty_seventy_both_saturated_share_30_70() {
        let mut q = thirty_seventy();
        let sent = run(&mut q, &mut [sat(0x10), sat(0x20)], 10, |_, _, _| {});
        // 10 s at 30 and 70 Mbit/s: 37.5 MB and 87.5 MB, within 1 %.
        assert!(within(sent[&0x10], 37_500_000.0, 0.01), "{sent:?}");
        assert!(within(sent[&0x20], 87_500_000.0, 0.01), "{sent:?}");
    }

    #[test]
    fn an_idle_sibling_lets_the_other_reach_its_ceil() {
        let mut q = thirty_seventy();
        let sent = run(&mut q, &mut [sat(0x10)], 10, |_, _, _| {});
        // 1:10 borrows up to its ceil, 100 Mbit/s: 125 MB in 10 s.
        assert!(within(sent[&0x10], 125_000_000.0, 0.01), "{sent:?}");
        assert!(q.stats_of(0x10).unwrap().borrowed > 0);
        // With ceil 50 Mbit/s it stops there (62.5 MB), although the parent has more.
        let mut q = under_100(vec![
            child("1:10", "30Mbit", "50Mbit", &[]),
            child("1:20", "70Mbit", "100Mbit", &[]),
        ]);
        let sent = run(&mut q, &mut [sat(0x10)], 10, |_, _, _| {});
        assert!(within(sent[&0x10], 62_500_000.0, 0.01), "{sent:?}");
    }

    #[test]
    fn dead_wait_entries_are_dropped_once_they_outnumber_live_ones() {
        // A class put into its level's wait queue far ahead and taken out again 10,000
        // times leaves 10,000 dead entries in a lazy heap; the queue must drop them once
        // they outnumber the live ones (plus 64), and still give the live entry first.
        let mut q = thirty_seventy();
        let cl = q.class_of(0x10).unwrap();
        for i in 0..10_000 {
            q.add_to_wait(cl, i, 1_000_000_000_000);
            q.remove_from_wait(cl);
        }
        q.add_to_wait(cl, 20_000, 5);
        assert_eq!(q.wait[0].live, 1);
        assert!(
            q.wait[0].heap.len() <= 2 + 64,
            "{} entries",
            q.wait[0].heap.len()
        );
        assert_eq!(q.wait_first(0), Some((20_005, cl)));
    }

    #[test]
    fn lower_prio_borrows_first() {
        // Both at rate 10 of a 100 Mbit/s parent: the 80 Mbit/s spare goes to prio 0
        // first (tc-htb(8): "classes with lower prio field are offered excess bandwidth
        // first"), so prio 0 gets 90 Mbit/s and prio 1 its rate, 10 Mbit/s.
        let mut q = under_100(vec![
            child("1:10", "10Mbit", "100Mbit", &[("prio", Value::Int(1))]),
            child("1:20", "10Mbit", "100Mbit", &[("prio", Value::Int(0))]),
        ]);
        let sent = run(&mut q, &mut [sat(0x10), sat(0x20)], 10, |_, _, _| {});
        assert!(within(sent[&0x20], 112_500_000.0, 0.01), "{sent:?}");
        assert!(within(sent[&0x10], 12_500_000.0, 0.01), "{sent:?}");
    }

    #[test]
    fn spare_bandwidth_is_shared_by_quantum() {
        // Same prio, rate 10 each, quanta 1500 and 3000 B: the 80 Mbit/s spare is split
        // 1:2 (one 1500-byte packet a round against two), so 10 + 80/3 and 10 + 160/3
        // Mbit/s: 36.67 and 63.33 Mbit/s.
        let mut q = under_100(vec![
            child(
                "1:10",
                "10Mbit",
                "100Mbit",
                &[("quantum", Value::Int(1500))],
            ),
            child(
                "1:20",
                "10Mbit",
                "100Mbit",
                &[("quantum", Value::Int(3000))],
            ),
        ]);
        let sent = run(&mut q, &mut [sat(0x10), sat(0x20)], 10, |_, _, _| {});
        assert!(within(sent[&0x10], 45_833_333.0, 0.01), "{sent:?}");
        assert!(within(sent[&0x20], 79_166_667.0, 0.01), "{sent:?}");
    }

    #[test]
    fn a_class_offered_more_than_its_ceil_never_exceeds_it() {
        let mut q = under_100(vec![child("1:10", "10Mbit", "20Mbit", &[])]);
        let mut worst = 0i64;
        let src = Src {
            minor: 0x10,
            rate_bps: Some(50_000_000),
            next_at: Time::ZERO,
        };
        let sent = run(&mut q, &mut [src], 5, |now, _, bytes| {
            // By time t at most cburst (1600 B, tc's default) + one packet over (a class
            // sends while its ctokens are ≥ 0) + 20 Mbit/s · t.
            let allowed = 1600 + 1500 + (now.0 as u128 * 2_500_000 / 1_000_000_000) as i64;
            worst = worst.max(bytes as i64 - allowed);
        });
        assert!(worst <= 0, "exceeded the ceil by {worst} B");
        assert!(within(sent[&0x10], 12_500_000.0, 0.01), "{sent:?}");
        assert!(q.stats_of(0x10).unwrap().drops > 0, "the pfifo overflowed");
        assert!(q.overlimits() > 0);
    }

    #[test]
    fn kernel_arithmetic() {
        // 1500 B at 100 Mbit/s = 12.5 MB/s take 120 µs.
        assert_eq!(Rate::new(100_000_000).l2t_ns(1500), 120_000);
        // 1514 B at 1 Gbit/s: 12.112 µs.
        assert_eq!(Rate::new(1_000_000_000).l2t_ns(1514), 12_112);
        // tc's default burst: rate/10^9 + 1600 B = 1600 B below 8 Gbit/s; 10 Gbit/s →
        // 1.25 GB/s / 10^9 = 1 B more.
        assert_eq!(default_burst_bytes(100_000_000), 1600);
        assert_eq!(default_burst_bytes(10_000_000_000), 1601);
        // 1600 B at 100 Mbit/s: 128 µs = 2000 ticks of 64 ns.
        assert_eq!(tc_xmittime_ns(100_000_000, 1600), 128_000);
        // 1600 B at 30 Mbit/s: 426.67 µs → 6666 ticks (truncated) → 426 624 ns.
        assert_eq!(tc_xmittime_ns(30_000_000, 1600), 426_624);
    }

    #[test]
    fn quantum_from_r2q_and_the_kernel_warnings() {
        // rate/r2q bytes: 5 Mbit/s / 10 = 62 500 B; 100 Mbit/s / 10 = 1 250 000 → 200 000
        // ("big"); 56 kbit/s / 10 = 700 → 1000 ("small").
        let spec = spec_of(&[(
            "classes",
            Value::Array(vec![
                class("1:1", "", "100Mbit", "", &[]),
                class("1:10", "1:1", "5Mbit", "", &[]),
                class("1:11", "1:1", "56kbit", "", &[]),
                class(
                    "1:12",
                    "1:1",
                    "56kbit",
                    "",
                    &[("quantum", Value::Int(1514))],
                ),
            ]),
        )])
        .unwrap();
        let q: Vec<u64> = spec.classes.iter().map(|c| spec.quantum_of(c)).collect();
        assert_eq!(q, vec![200_000, 62_500, 1000, 1514]);
        assert_eq!(
            spec.warnings(),
            vec![
                "quantum of class 10001 is big. Consider r2q change.".to_string(),
                "quantum of class 10011 is small. Consider r2q change.".to_string(),
            ]
        );
        // r2q 100 brings 100 Mbit/s to 125 000 B: no warning for it.
        let spec = spec_of(&[
            ("r2q", Value::Int(100)),
            (
                "classes",
                Value::Array(vec![class("1:1", "", "100Mbit", "", &[])]),
            ),
        ])
        .unwrap();
        assert_eq!(spec.quantum_of(&spec.classes[0]), 125_000);
        assert!(spec.warnings().is_empty());
    }

    #[test]
    fn unclassified_packets_without_a_default_class_go_direct_unshaped() {
        // default 30 names no class: Linux sends such packets through the direct queue,
        // unshaped, bounded by direct_qlen.
        let mut q = build(&[
            ("default", s("30")),
            ("direct_qlen", Value::Int(3)),
            (
                "classes",
                Value::Array(vec![class("1:10", "", "8kbit", "", &[])]),
            ),
        ]);
        let mut d = Drops::new();
        for i in 0..5 {
            q.enqueue(pkt(i, 1, 1500), Time::ZERO, &mut d);
        }
        assert_eq!(q.len_packets(), 3);
        assert_eq!(
            d.drain()
                .filter(|x| x.reason == DropReason::Overlimit)
                .count(),
            2
        );
        // At 8 kbit/s a shaped 1500 B packet would wait 1.5 s; direct ones leave now.
        for uid in 0..3 {
            assert_eq!(q.dequeue(Time::ZERO, &mut d).packet().unwrap().uid, uid);
        }
        assert!(matches!(q.dequeue(Time::ZERO, &mut d), Dequeue::Empty));
        assert_eq!(q.direct_packets(), 3);
        // skb->priority 1:0 is the direct flow; 1:10 selects the class.
        let mut p = pkt(9, 1, 100);
        p.priority = 0x1_0000;
        q.enqueue(p, Time::ZERO, &mut d);
        let mut p = pkt(10, 1, 100);
        p.priority = 0x1_0010;
        q.enqueue(p, Time::ZERO, &mut d);
        assert_eq!(q.class_len_packets(0x10), 1);
        assert_eq!(q.direct_packets(), 4);
    }

    #[test]
    fn address_filters_pick_the_class_first_match_wins() {
        let mut q = build(&[
            ("default", s("1:30")),
            (
                "classes",
                Value::Array(vec![
                    class("1:1", "", "100Mbit", "", &[]),
                    class("1:10", "1:1", "10Mbit", "", &[]),
                    class("1:20", "1:1", "10Mbit", "", &[]),
                    class("1:30", "1:1", "10Mbit", "", &[]),
                ]),
            ),
            (
                "filters",
                Value::Array(vec![
                    table(&[("dst", Value::Int(7)), ("classid", s("1:10"))]),
                    table(&[("src", s("10.0.0.9")), ("classid", s("1:20"))]),
                    table(&[("dst", s("10.0.0.9")), ("classid", s("1:10"))]),
                ]),
            ),
        ]);
        let mut d = Drops::new();
        let with = |uid, src: u32, dst: u32| {
            let mut p = pkt(uid, 1, 100);
            p.key.src_addr = Addr::v4(src);
            p.key.dst_addr = Addr::v4(dst);
            p
        };
        q.enqueue(with(1, 1, 7), Time::ZERO, &mut d); // node 7 → 1:10
        q.enqueue(with(2, 0x0a00_0009, 0x0a00_0009), Time::ZERO, &mut d); // filter 1 first
        q.enqueue(with(3, 2, 3), Time::ZERO, &mut d); // nothing matches → default 1:30
        assert_eq!(q.class_len_packets(0x10), 1);
        assert_eq!(q.class_len_packets(0x20), 1);
        assert_eq!(q.class_len_packets(0x30), 1);
        assert_eq!(q.direct_packets(), 0);
    }

    #[test]
    fn leaves_are_built_on_first_packet() {
        let mut classes = vec![class("1:1", "", "10Gbit", "", &[])];
        for i in 0..10_000u32 {
            classes.push(class(
                &format!("1:{:x}", 0x10 + i),
                "1:1",
                "1Mbit",
                "",
                &[("qdisc", s("fq_codel"))],
            ));
        }
        let spec = spec_of(&[("classes", Value::Array(classes))]).unwrap();
        // One shared leaf spec for 10 000 classes.
        assert_eq!(spec.leaves.len(), 1);
        let mut q = *spec.build(&BuildCtx::default());
        assert_eq!(q.leaves_built(), 0);
        let mut d = Drops::new();
        for (uid, minor) in [(1u64, 0x10u32), (2, 0x11), (3, 0x10)] {
            let mut p = pkt(uid, 1, 100);
            p.priority = 0x1_0000 | minor;
            q.enqueue(p, Time::ZERO, &mut d);
        }
        assert_eq!(q.leaves_built(), 2);
        assert!(matches!(q.leaf_of(0x10), Some(AnyQdisc::FqCodel(_))));
        assert!(q.leaf_of(0x12).is_none());
    }

    #[test]
    fn the_default_leaf_is_pfifo_of_tx_queue_len() {
        let mut q = thirty_seventy();
        let mut d = Drops::new();
        for i in 0..1005 {
            q.enqueue(pkt(i, 1, 100), Time::ZERO, &mut d);
        }
        // default 20: pfifo limit 1000 (tx_queue_len), 5 tail drops.
        assert!(matches!(q.leaf_of(0x20), Some(AnyQdisc::Pfifo(f)) if f.limit() == 1000));
        assert_eq!(q.len_packets(), 1000);
        assert_eq!(d.len(), 5);
        assert_eq!(q.stats_of(0x20).unwrap().drops, 5);
    }

    #[test]
    fn bad_trees_are_refused_with_one_line() {
        let cases: Vec<(Vec<Value>, &str)> = vec![
            (
                vec![class("1:10", "", "40Mbit", "30Mbit", &[])],
                "40Mbit is above the class's ceil 30Mbit",
            ),
            (
                vec![
                    class("1:1", "", "100Mbit", "", &[]),
                    class("1:10", "1:1", "30Mbit", "200Mbit", &[]),
                ],
                "ceil 200Mbit exceeds its parent 1:1's ceil 100Mbit",
            ),
            (
                vec![
                    class("1:1", "", "10Mbit", "", &[]),
                    class("1:10", "1:1", "30Mbit", "", &[]),
                ],
                "rate 30Mbit exceeds its parent 1:1's ceil 10Mbit",
            ),
            (
                vec![
                    class("1:1", "", "100Mbit", "", &[("qdisc", s("fq_codel"))]),
                    class("1:10", "1:1", "30Mbit", "", &[]),
                ],
                "a leaf qdisc on a class that has children",
            ),
            (
                vec![
                    class("1:1", "", "100Mbit", "", &[]),
                    class("1:1", "", "100Mbit", "", &[]),
                ],
                "duplicate classid 1:1",
            ),
            (
                vec![class("1:10", "1:5", "10Mbit", "", &[])],
                "parent 1:5 is not a class of this htb",
            ),
            (
                vec![
                    class("1:10", "1:20", "10Mbit", "", &[]),
                    class("1:20", "1:10", "10Mbit", "", &[]),
                ],
                "its parents form a cycle",
            ),
            (
                vec![class("2:10", "", "10Mbit", "", &[])],
                "is not this htb's handle 1:",
            ),
            (vec![table(&[("classid", s("1:10"))])], "required"),
            (
                vec![class("1:10", "", "10Mbit", "", &[("prio", Value::Int(8))])],
                "prio",
            ),
        ];
        for (classes, want) in cases {
            let e = err_of(&[("classes", Value::Array(classes))]);
            assert!(e.to_string().contains(want), "{e} (wanted {want:?})");
            assert!(e.path.starts_with("q.classes"), "{}", e.path);
            assert!(!e.to_string().contains('\n'));
        }
        // Eight levels of classes: the kernel's "tree is too deep".
        let mut deep = vec![class("1:1", "", "10Mbit", "", &[])];
        for i in 2..=9 {
            deep.push(class(
                &format!("1:{i}"),
                &format!("1:{}", i - 1),
                "10Mbit",
                "",
                &[],
            ));
        }
        let e = err_of(&[("classes", Value::Array(deep))]);
        assert!(e.to_string().contains("too deep"), "{e}");
        // A default naming no class is fine (Linux: the direct queue).
        assert!(spec_of(&[("default", s("99"))]).is_ok());
        let e = err_of(&[("default", Value::Int(30))]);
        assert_eq!(e.path, "q.default");
        let e = err_of(&[
            (
                "classes",
                Value::Array(vec![class("1:1", "", "1Mbit", "", &[])]),
            ),
            (
                "filters",
                Value::Array(vec![table(&[
                    ("dst", s("nosuchnode")),
                    ("classid", s("1:1")),
                ])]),
            ),
        ]);
        assert_eq!(e.path, "q.filters[0].dst");
        let e = err_of(&[
            (
                "classes",
                Value::Array(vec![class("1:1", "", "1Mbit", "", &[])]),
            ),
            (
                "filters",
                Value::Array(vec![table(&[
                    ("dst", Value::Int(3)),
                    ("classid", s("1:2")),
                ])]),
            ),
        ]);
        assert!(e.path.starts_with("q.filters"), "{}", e.path);
    }

    #[test]
    fn tc_lines_round_trip() {
        let spec = spec_of(&[
            ("default", s("30")),
            (
                "classes",
                Value::Array(vec![
                    class("1:1", "", "100Mbit", "", &[]),
                    class(
                        "1:10",
                        "1:1",
                        "30Mbit",
                        "100Mbit",
                        &[(
                            "qdisc",
                            table(&[("kind", s("pfifo")), ("limit", Value::Int(50))]),
                        )],
                    ),
                    class(
                        "1:20",
                        "1:1",
                        "70Mbit",
                        "100Mbit",
                        &[
                            ("prio", Value::Int(1)),
                            ("quantum", Value::Int(3000)),
                            ("burst", s("15KiB")),
                        ],
                    ),
                ]),
            ),
            (
                "filters",
                Value::Array(vec![table(&[
                    ("dst", s("10.0.0.3")),
                    ("classid", s("1:10")),
                ])]),
            ),
        ])
        .unwrap();
        let q = QdiscSpec::Htb(spec);
        let lines: Vec<String> = q
            .tc_lines()
            .unwrap()
            .into_iter()
            .map(|(o, a)| format!("{o} {a}"))
            .collect();
        // tc's syntax; burst/cburst are tc's default rule (1600 B below 8 Gbit/s).
        assert_eq!(
            lines,
            vec![
                "qdisc root handle 1: htb default 30 r2q 10 direct_qlen 1000",
                "class parent 1: classid 1:1 htb rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b prio 0",
                "class parent 1:1 classid 1:10 htb rate 30Mbit ceil 100Mbit burst 1600b cburst 1600b prio 0",
                "class parent 1:1 classid 1:20 htb rate 70Mbit ceil 100Mbit burst 15Kb cburst 1600b quantum 3000 prio 1",
                "qdisc parent 1:10 handle 2: pfifo limit 50",
                "filter parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.3/32 flowid 1:10",
            ]
        );
        let refs: Vec<&str> = lines.iter().map(|l| l.as_str()).collect();
        let back = QdiscSpec::from_tc_lines(&refs, &BuildCtx::default()).unwrap();
        assert_eq!(back, q);
        // As typed: `tc class add dev eth0 …`, handle 2:, a class under the wrong qdisc.
        let typed = [
            "tc qdisc add dev eth0 root handle 2: htb default 10",
            "tc class add dev eth0 parent 2: classid 2:10 htb rate 5mbit",
        ];
        match QdiscSpec::from_tc_lines(&typed, &BuildCtx::default()).unwrap() {
            QdiscSpec::Htb(h) => {
                assert_eq!((h.handle, h.default_minor), (2, 0x10));
                assert_eq!(h.classes[0].rate_bps, 5_000_000);
                assert_eq!(h.classes[0].ceil_bps, 5_000_000);
            }
            other => panic!("{other:?}"),
        }
        let bad = [
            "qdisc root handle 1: htb",
            "class parent 1: classid 1:10 htb rate 5mbit ceil 1mbit",
        ];
        let e = QdiscSpec::from_tc_lines(&bad, &BuildCtx::default()).unwrap_err();
        assert!(e.to_string().contains("above the class's ceil"), "{e}");
        // Node filters have no address a deployment could match.
        let spec = spec_of(&[
            (
                "classes",
                Value::Array(vec![class("1:1", "", "1Mbit", "", &[])]),
            ),
            (
                "filters",
                Value::Array(vec![table(&[
                    ("dst", Value::Int(4)),
                    ("classid", s("1:1")),
                ])]),
            ),
        ])
        .unwrap();
        let e = QdiscSpec::Htb(spec).linux().unwrap_err();
        assert!(
            e.to_string().starts_with("htb: filters[0] matches node 4"),
            "{e}"
        );
    }

    /// Scale (not asserted; `cargo test --release -p sojourn-core --lib htb_scale -- --ignored
    /// --nocapture`): 65 000 subscriber classes (a classid minor is 16 bits, as in Linux) of
    /// 20 Mbit/s with fq_codel leaves (`HTB_LEAF=pfifo` for another kind) under a 10 Gbit/s
    /// root, 10 % of them active.
    #[test]
    #[ignore]
    fn htb_scale() {
        // Minors are 16 bits (as Linux's classids): at most 65 535 classes per htb.
        let n = 65_000u32;
        let t0 = std::time::Instant::now();
        let mut spec = spec_of(&[(
            "classes",
            Value::Array(vec![class("1:1", "", "10Gbit", "", &[])]),
        )])
        .unwrap();
        let leaf = spec.leaf_index(
            QdiscSpec::parse(
                &s(&std::env::var("HTB_LEAF").unwrap_or_else(|_| "fq_codel".into())),
                "q",
                &BuildCtx::default(),
            )
            .unwrap(),
        );
        for i in 0..n {
            spec.classes.push(HtbClassSpec {
                minor: 2 + i as u16,
                parent: Some(1),
                rate_bps: 20_000_000,
                ceil_bps: 20_000_000,
                burst_bytes: default_burst_bytes(20_000_000),
                cburst_bytes: default_burst_bytes(20_000_000),
                quantum_bytes: None,
                prio: 0,
                leaf: Some(leaf),
            });
        }
        spec.check("q").unwrap();
        let mut q = *spec.build(&BuildCtx::default());
        let built = t0.elapsed();
        let mut d = Drops::new();
        let active: Vec<u32> = (0..spec.classes.len() as u32 - 1).step_by(10).collect();
        let t1 = std::time::Instant::now();
        let mut now = Time::ZERO;
        let packets = 2_000_000u64;
        for uid in 0..packets {
            let mut p = pkt(uid, 1, 1500);
            p.priority = 0x1_0000 | (2 + active[(uid % active.len() as u64) as usize]);
            p.enqueued_at = now;
            q.enqueue(p, now, &mut d);
            if let Dequeue::NotBefore(t) = q.dequeue(now, &mut d) {
                now = t;
            }
            now += Duration(1200);
            d.clear();
        }
        let run = t1.elapsed();
        eprintln!(
            "{} classes built in {:?}; {} active; {} enqueue+dequeue pairs in {:?} ({:.0} ns each); leaves built {}",
            spec.classes.len(),
            built,
            active.len(),
            packets,
            run,
            run.as_nanos() as f64 / packets as f64,
            q.leaves_built()
        );
    }

    #[test]
    fn conservation_property() {
        for seed in 0..8 {
            let mut q = build(&[
                ("default", s("20")),
                ("direct_qlen", Value::Int(10)),
                (
                    "classes",
                    Value::Array(vec![
                        class("1:1", "", "20Mbit", "", &[]),
                        class(
                            "1:10",
                            "1:1",
                            "5Mbit",
                            "20Mbit",
                            &[(
                                "qdisc",
                                table(&[("kind", s("pfifo")), ("limit", Value::Int(7))]),
                            )],
                        ),
                        class(
                            "1:20",
                            "1:1",
                            "5Mbit",
                            "10Mbit",
                            &[("qdisc", s("fq_codel")), ("prio", Value::Int(2))],
                        ),
                        class("1:2", "", "1Mbit", "", &[("qdisc", s("sfq"))]),
                    ]),
                ),
                (
                    "filters",
                    Value::Array(vec![
                        table(&[("src", Value::Int(3)), ("classid", s("1:10"))]),
                        table(&[("dst", Value::Int(5)), ("classid", s("1:2"))]),
                    ]),
                ),
            ]);
            let a = check_conservation(&mut q, seed, 4_000, |q| {
                q.class_len_packets(0x10) <= 7 && q.direct.len() <= 10
            });
            let mut q2 = build(&[("default", s("20"))]);
            let _ = check_conservation(&mut q2, seed, 500, |_| true);
            assert!(!a.is_empty());
        }
    }
}
