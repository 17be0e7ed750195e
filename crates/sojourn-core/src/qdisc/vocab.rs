//! The words every discipline speaks, in one leaf module that imports nothing of the
//! spec tree: the [`Qdisc`] contract (verdicts, drops, dequeue results), where a discipline
//! is installed ([`BuildCtx`]), what Linux can say of it ([`NotLinux`], [`TcKey`], tc's
//! units), and the [`Discipline`] declaration with which each discipline file names its
//! kind, parser, builder and tc keys beside its code (docs/adding-a-qdisc.md). A
//! discipline file imports from here, never from `registry` or `spec`, so the only import
//! circle among the disciplines is the classful tree that holds child specs.

use crate::packet::Packet;
use crate::params::{ConfResult, Params, Table};
use crate::rng::{splitmix64_mix, Rng};
use crate::time::{Duration, Time};
use std::fmt;

/// Why a packet was dropped; `name()` is the label in outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DropReason {
    /// Tail drop: the qdisc's packet or byte limit.
    Overlimit = 0,
    /// The AQM's control law (CoDel, COBALT, RED/PIE at dequeue).
    Aqm,
    /// Probabilistic drop at enqueue (PIE, RED).
    Early,
    /// fq_codel/CAKE overflow: batch head drop from the fattest flow.
    FattestFlow,
    /// A per-flow packet limit (fq's flow_limit, SFQ depth, CoCoA's learned limit).
    FlowLimit,
    /// A memory (truesize) limit.
    Memory,
    /// Head drop of a full FIFO (pfifo_head_drop).
    HeadDrop,
    /// No free slot/queue for a new flow (SFQ with all slots busy).
    NoSlot,
    /// A packet scheduled too far in the future (fq horizon).
    Horizon,
    /// CoCoA: the learned standing queue dropped from the tail.
    StandingQueue,
    /// A link's random loss model (not a qdisc decision).
    LinkLoss,
}

impl DropReason {
    pub const COUNT: usize = 11;
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::Overlimit,
        DropReason::Aqm,
        DropReason::Early,
        DropReason::FattestFlow,
        DropReason::FlowLimit,
        DropReason::Memory,
        DropReason::HeadDrop,
        DropReason::NoSlot,
        DropReason::Horizon,
        DropReason::StandingQueue,
        DropReason::LinkLoss,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DropReason::Overlimit => "overlimit",
            DropReason::Aqm => "aqm",
            DropReason::Early => "early",
            DropReason::FattestFlow => "fattest_flow",
            DropReason::FlowLimit => "flow_limit",
            DropReason::Memory => "memory",
            DropReason::HeadDrop => "head_drop",
            DropReason::NoSlot => "no_slot",
            DropReason::Horizon => "horizon",
            DropReason::StandingQueue => "standing_queue",
            DropReason::LinkLoss => "link_loss",
        }
    }
}

/// A dropped packet and why.
#[derive(Clone, Copy, Debug)]
pub struct Dropped {
    pub pkt: Packet,
    pub reason: DropReason,
}

/// The sink every discipline drops into. The caller drains it after each call; it is
/// reused, so dropping does not allocate once warmed up.
#[derive(Debug, Default)]
pub struct Drops {
    list: Vec<Dropped>,
}

impl Drops {
    pub fn new() -> Drops {
        Drops {
            list: Vec::with_capacity(64),
        }
    }
    #[inline]
    pub fn push(&mut self, pkt: Packet, reason: DropReason) {
        self.list.push(Dropped { pkt, reason });
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
    pub fn len(&self) -> usize {
        self.list.len()
    }
    pub fn drain(&mut self) -> std::vec::Drain<'_, Dropped> {
        self.list.drain(..)
    }
    pub fn as_slice(&self) -> &[Dropped] {
        &self.list
    }
    pub fn clear(&mut self) {
        self.list.clear()
    }
}

/// What became of the arriving packet (`NET_XMIT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted (`NET_XMIT_SUCCESS`); other packets may still have been dropped.
    Queued,
    /// Accepted, but packets of the same flow were dropped to make room (`NET_XMIT_CN`).
    QueuedCongested,
    /// The arriving packet itself was dropped (it is in the drop sink).
    Dropped,
}

/// The result of a dequeue attempt.
#[derive(Clone, Copy, Debug)]
pub enum Dequeue {
    Packet(Packet),
    /// Nothing queued (possibly after AQM drops).
    Empty,
    /// Packets are queued but may not leave before this time (shaper/pacer watchdog).
    NotBefore(Time),
}

impl Dequeue {
    pub fn packet(self) -> Option<Packet> {
        match self {
            Dequeue::Packet(p) => Some(p),
            _ => None,
        }
    }
}

/// A queueing discipline (sans-IO: time comes in as `now`, drops go out through `drops`).
pub trait Qdisc {
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict;
    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue;
    /// Packets queued (`qlen`).
    fn len_packets(&self) -> usize;
    /// Bytes queued (`backlog`), in `qdisc_pkt_len` units.
    fn len_bytes(&self) -> u64;
    /// Both at once (one dispatch instead of two for a parent that tracks its children's
    /// backlog around every operation, as HTB and DRR do).
    #[inline]
    fn backlog(&self) -> (usize, u64) {
        (self.len_packets(), self.len_bytes())
    }
    /// CE marks applied so far (children included).
    fn ecn_marks(&self) -> u64;
    /// Internal state for time series (e.g. PIE's drop probability), reported through
    /// `emit(name, value)`; lazy timers are first brought up to `now`.
    fn observe(&mut self, _now: Time, _emit: &mut dyn FnMut(&str, f64)) {}
}

impl<Q: Qdisc + ?Sized> Qdisc for Box<Q> {
    #[inline]
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        (**self).enqueue(pkt, now, drops)
    }
    #[inline]
    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        (**self).dequeue(now, drops)
    }
    #[inline]
    fn len_packets(&self) -> usize {
        (**self).len_packets()
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        (**self).len_bytes()
    }
    #[inline]
    fn backlog(&self) -> (usize, u64) {
        (**self).backlog()
    }
    fn ecn_marks(&self) -> u64 {
        (**self).ecn_marks()
    }
    fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
        (**self).observe(now, emit)
    }
}

/// What a discipline may know about where it is installed.
#[derive(Clone, Debug)]
pub struct BuildCtx {
    /// `psched_mtu`: device MTU + hard header length (1514 on Ethernet).
    pub mtu_bytes: u32,
    /// The device's `tx_queue_len` (1000): default pfifo/prio limits.
    pub tx_queue_len: u32,
    /// Rate of the link the qdisc feeds, bit/s (0 if unknown or variable).
    pub link_rate_bps: u64,
    /// Seed of this qdisc instance's random stream (derived from the master seed and the link).
    pub seed: u64,
}

impl Default for BuildCtx {
    fn default() -> Self {
        BuildCtx {
            mtu_bytes: 1514,
            tx_queue_len: 1000,
            link_rate_bps: 0,
            seed: 1,
        }
    }
}

impl BuildCtx {
    /// The context for child `i` of a composite discipline: same device, its own stream.
    pub fn child(&self, i: u64) -> BuildCtx {
        BuildCtx {
            seed: splitmix64_mix(self.seed ^ (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            ..self.clone()
        }
    }
    /// This instance's random generator.
    pub fn rng(&self) -> Rng {
        Rng::from_seed(self.seed)
    }
    /// A per-instance salt for flow hashing (the kernel's per-boot hash seed).
    pub fn hash_salt(&self) -> u64 {
        splitmix64_mix(self.seed ^ 0x5a17)
    }
}

/// Why a spec has no Linux equivalent: one line, usable as a refusal message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotLinux {
    /// The discipline (or the composite's child) that cannot be expressed.
    pub kind: &'static str,
    pub reason: String,
}

impl NotLinux {
    pub fn new(kind: &'static str, reason: impl Into<String>) -> NotLinux {
        NotLinux {
            kind,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for NotLinux {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.reason)
    }
}

impl std::error::Error for NotLinux {}

/// The tc keywords a discipline understands, mapped to experiment-file keys.
#[derive(Clone, Copy, Debug)]
pub enum TcKey {
    /// `word N` → `key = N` (an integer; tc's show suffix `p` for packets is accepted).
    Int(&'static str, &'static str),
    /// `word SIZE` in tc units (`b`, `k`/`kb`, `m`/`mb`, `g`/`gb` = powers of 1024) → bytes.
    Size(&'static str, &'static str),
    /// `word TIME` in tc units (`s`, `ms`, `us`; a bare number is µs) → a duration.
    Time(&'static str, &'static str),
    /// `word RATE` in tc units (`bit`, `kbit`, `mbit`, `gbit`, `bps` = bytes/s, …) → bit/s.
    Rate(&'static str, &'static str),
    /// `word X` → `key = "X"` (a keyword value, e.g. CAKE's `rtt internet`).
    Text(&'static str, &'static str),
    /// `word` alone → `key = value` (a boolean switch such as `ecn` / `noecn`).
    Flag(&'static str, &'static str, bool),
    /// `word` alone → `key = "value"` (a keyword choice such as CAKE's `besteffort`).
    Choice(&'static str, &'static str, &'static str),
    /// `word` followed by `n` integers → `key = [..]` (priomap, weights).
    Ints(&'static str, &'static str, usize),
    /// `word F` → `key = F` (a real number, e.g. RED's probability).
    Real(&'static str, &'static str),
    /// `word` and its `n` values carry nothing sojourn keeps (fq's fixed `bands 3`).
    Ignore(&'static str, usize),
    /// `word SECS` → `key = SECS` (whole seconds; `tc qdisc show`'s `10sec` is accepted).
    Secs(&'static str, &'static str),
}

impl TcKey {
    /// The tc keyword itself (`limit`, `ecn`, …).
    pub fn word(&self) -> &'static str {
        match *self {
            TcKey::Int(w, _)
            | TcKey::Size(w, _)
            | TcKey::Time(w, _)
            | TcKey::Rate(w, _)
            | TcKey::Text(w, _)
            | TcKey::Flag(w, _, _)
            | TcKey::Choice(w, _, _)
            | TcKey::Ints(w, _, _)
            | TcKey::Real(w, _)
            | TcKey::Ignore(w, _)
            | TcKey::Secs(w, _) => w,
        }
    }
}

// ---------------------------------------------------------------------------------------
// tc's units (tc(8) "PARAMETERS"): sizes in powers of 1024, times in µs, rates in bit/s.
// ---------------------------------------------------------------------------------------

/// A duration in tc's syntax, exactly (`5ms`, `100ms`, `1s`, `500us`); `Err` if it is not
/// a whole number of microseconds (tc's time unit).
pub fn tc_time(kind: &'static str, what: &str, d: Duration) -> Result<String, NotLinux> {
    let ns = d.as_ns();
    if !ns.is_multiple_of(1000) {
        return Err(NotLinux::new(
            kind,
            format!("{what} {ns}ns is not a whole number of microseconds (tc's unit)"),
        ));
    }
    let us = ns / 1000;
    Ok(if us != 0 && us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us != 0 && us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    })
}

/// A size in tc's syntax, exactly: `32Mb` / `64Kb` when a whole number of MiB / KiB
/// (tc's `b`, `Kb`, `Mb` are bytes, KiB, MiB), else `1514000b`.
pub fn tc_size(bytes: u64) -> String {
    if bytes != 0 && bytes.is_multiple_of(1 << 20) {
        format!("{}Mb", bytes >> 20)
    } else if bytes != 0 && bytes.is_multiple_of(1 << 10) {
        format!("{}Kb", bytes >> 10)
    } else {
        format!("{bytes}b")
    }
}

/// A rate in tc's syntax, exactly: `100Mbit`, `550Kbit`, `12345bit` (decimal prefixes).
pub fn tc_rate(bits_per_s: u64) -> String {
    let mut v = bits_per_s;
    for unit in ["bit", "Kbit", "Mbit", "Gbit"] {
        if v == 0 || !v.is_multiple_of(1000) {
            return format!("{v}{unit}");
        }
        v /= 1000;
    }
    format!("{v}Tbit")
}

fn split_unit(s: &str) -> Option<(f64, String)> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(s.len());
    // `e` may start a unit ("e" is no tc unit, so only treat it as exponent if digits follow).
    let (num, unit) = s.split_at(end);
    let v: f64 = num.parse().ok()?;
    Some((v, unit.to_ascii_lowercase()))
}

/// tc's `get_size`: `b` (or none) bytes; `k`/`kb`, `m`/`mb`, `g`/`gb` powers of 1024;
/// `kbit`, `mbit`, `gbit` the same divided by 8. A fraction of a byte is truncated, as tc's
/// conversion of the double to an integer does (`1.7` is 1 byte, `0.6kbit` 76).
pub fn parse_tc_size(s: &str) -> Option<u64> {
    let (v, unit) = split_unit(s)?;
    let scale = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1024.0,
        "m" | "mb" => 1024.0 * 1024.0,
        "g" | "gb" => 1024.0 * 1024.0 * 1024.0,
        "kbit" => 1024.0 / 8.0,
        "mbit" => 1024.0 * 1024.0 / 8.0,
        "gbit" => 1024.0 * 1024.0 * 1024.0 / 8.0,
        _ => return None,
    };
    let b = v * scale;
    (b.is_finite() && b >= 0.0 && b < u64::MAX as f64).then(|| b.trunc() as u64)
}

/// tc's `get_time`: `s`/`sec`/`secs`, `ms`/`msec`/`msecs`, `us`/`usec`/`usecs`, or a bare
/// number of µs.
pub fn parse_tc_time(s: &str) -> Option<Duration> {
    let (v, unit) = split_unit(s)?;
    let ns_per = match unit.as_str() {
        "s" | "sec" | "secs" => 1e9,
        "ms" | "msec" | "msecs" => 1e6,
        "" | "us" | "usec" | "usecs" => 1e3,
        _ => return None,
    };
    let ns = v * ns_per;
    (ns.is_finite() && ns >= 0.0 && ns < u64::MAX as f64).then(|| Duration(ns.round() as u64))
}

/// tc's `get_rate`: `bit` (or a bare number) bit/s, `kbit`/`mbit`/`gbit`/`tbit` decimal,
/// `kibit`/`mibit`/`gibit` binary, `bps`/`kbps`/`mbps`/`gbps` bytes per second.
pub fn parse_tc_rate(s: &str) -> Option<u64> {
    let (v, unit) = split_unit(s)?;
    let scale = match unit.as_str() {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "kibit" => 1024.0,
        "mibit" => 1024.0 * 1024.0,
        "gibit" => 1024.0 * 1024.0 * 1024.0,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => return None,
    };
    let b = v * scale;
    (b.is_finite() && b >= 0.0 && b < u64::MAX as f64).then(|| b.round() as u64)
}

/// Where a qdisc of a tc tree hangs: the root of the device, or a class `major:minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcParent {
    Root,
    Class(u16, u16),
}

/// One `tc qdisc replace dev DEV <parent> handle H: <kind> <args>` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcNode {
    pub parent: TcParent,
    /// Major number of this qdisc's handle (`H:`).
    pub handle: u16,
    /// tc's name of the qdisc (`fq_codel`, `prio`, …).
    pub kind: &'static str,
    /// Arguments in tc's syntax and units, one token per element.
    pub args: Vec<String>,
}

impl fmt::Display for TcNode {
    /// `root handle 1: fq_codel limit 10240 …` / `parent 1:2 handle 2: pfifo limit 1000`
    /// (hex handles, as tc reads and prints them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parent {
            TcParent::Root => write!(f, "root")?,
            TcParent::Class(maj, min) => write!(f, "parent {maj:x}:{min:x}")?,
        }
        write!(f, " handle {:x}: {}", self.handle, self.kind)?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

/// A spec as tc commands: the root first, then children in order (parents before children).
pub type TcTree = Vec<TcNode>;

/// One `tc class replace dev DEV parent H: classid H:M <kind> <args>` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcClass {
    /// Major of the qdisc the class belongs to.
    pub parent: u16,
    /// Minor of the parent class (`parent 1:1`); 0 when the class hangs from the qdisc
    /// itself (`parent 1:`).
    pub parent_minor: u16,
    /// `(major, minor)` of the class.
    pub classid: (u16, u16),
    pub kind: &'static str,
    pub args: Vec<String>,
}

impl fmt::Display for TcClass {
    /// `parent 1: classid 1:1 htb rate 10Mbit ceil 10Mbit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "parent {:x}:", self.parent)?;
        if self.parent_minor != 0 {
            write!(f, "{:x}", self.parent_minor)?;
        }
        write!(
            f,
            " classid {:x}:{:x} {}",
            self.classid.0, self.classid.1, self.kind
        )?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

/// A discipline behind a shaper: the root shaping qdisc, its class, and the discipline's
/// tree under that class (see [`QdiscSpec::dump_shaped`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcShaped {
    pub root: TcNode,
    pub class: TcClass,
    pub leaf: TcTree,
}

/// What a discipline says of itself, beside its code: the one declaration the registry
/// lists (`registry.rs`'s `disciplines!`). It is implemented by the discipline's typed
/// spec: parsed and validated once from the experiment file's parameters (or from tc's
/// words, through [`Discipline::TC_KEYS`]), then built infallibly as often as needed.
pub trait Discipline: Sized {
    /// The experiment-file name (`kind = "fq_codel"`), also tc's name of the qdisc.
    const KIND: &'static str;
    /// One line for `sojourn qdiscs`.
    const SUMMARY: &'static str;
    /// tc's keywords mapped to file keys, so a tc line is read by [`Discipline::parse`];
    /// `None` (the default) when Linux has no such qdisc: tc lines naming it are refused.
    const TC_KEYS: Option<&'static [TcKey]> = None;
    /// The file key that holds a tc handle major this kind insists on (see
    /// [`Facts::tc_handle`]), filled from the node's handle when a tc tree is read back.
    const TC_HANDLE_KEY: Option<&'static str> = None;
    /// What [`Discipline::build`] makes (boxed when large, so that `AnyQdisc` stays small).
    type Qdisc: Qdisc;

    /// Every check happens here (ranges, required keys, unknown keys are left to the
    /// caller's `Params::finish`); reads only the device fields of `ctx`, never the seed.
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self>;
    /// Infallible: randomness and hash salts come from `ctx` (`ctx.rng()`, `ctx.hash_salt()`).
    fn build(&self, ctx: &BuildCtx) -> Self::Qdisc;
    /// The arguments of `tc qdisc … KIND ARGS` in tc's syntax and units (`tc qdisc show`
    /// order), or why Linux cannot run this spec, in one line.
    fn tc_args(&self) -> Result<Vec<String>, NotLinux>;
    /// tc's name of the qdisc these arguments are for (the kind itself unless the spec
    /// is realised by another qdisc, as `age` by priority is by `prio`).
    fn tc_kind(&self) -> &'static str {
        Self::KIND
    }
    /// Per-node facts engines and deploy need (see [`Facts`]); none by default.
    fn facts(&self) -> Facts {
        Facts::default()
    }
    /// A spec naming `kind`, which no discipline declares, read as a spec of this one: the
    /// table it stands for, or `None` (the default, for every built-in discipline). The
    /// external discipline claims the names its front registered (`qdisc/external.rs`).
    fn claim(_kind: &str, _table: &Table) -> Option<Table> {
        None
    }
}

/// Facts about one node of a discipline tree that engines and deploy read without knowing
/// the discipline (the tree-wide answers look through the children: `QdiscSpec`'s methods).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The node reads `pkt.ct_bytes`, so the node feeding the link must run conntrack.
    pub needs_conntrack: bool,
    /// A tc handle major this node insists on, because its classifier compares
    /// `skb->priority` with it (prio's and CAKE's `handle`).
    pub tc_handle: Option<u16>,
    /// The node cuts GSO buffers into segments itself: cake and dualpi2 with `split_gso`
    /// (their default, as in Linux), and tbf, which segments a buffer larger than its burst.
    pub splits_gso: bool,
}

impl Facts {
    /// A node whose classifier compares `skb->priority` with its handle major `h`.
    pub fn with_tc_handle(h: u16) -> Facts {
        Facts {
            tc_handle: Some(h),
            ..Facts::default()
        }
    }
}
