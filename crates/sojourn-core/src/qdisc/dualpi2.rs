//! DualPI2, the DualQ Coupled AQM of RFC 9332 with a PI2 base controller, as Linux
//! `sch_dualpi2` (6.17+) runs it.
//!
//! Two FIFOs share one packet limit and one memory limit:
//! - the **L queue** takes L4S traffic: by default packets whose ECN field has its low bit
//!   set, i.e. ECT(1) and CE (RFC 9331 §5.1 identifier; `any_ect` widens it to ECT(0) too);
//! - the **C queue** takes everything else (Not-ECT, ECT(0)).
//!
//! One PI controller (RFC 9332 §2.4, Appendix A) updates the *base* probability `p'` every
//! `tupdate` from the larger of the two head-of-queue sojourn times:
//! `p' += alpha·(qdelay − target) + beta·(qdelay − qdelay_old)`.
//! From it (the coupling, RFC 9332 §2.1):
//! - classic packets are dropped (or CE-marked if ECT) with `p_C = p'²` — applied as two
//!   independent draws against `p'`, as the kernel does;
//! - L packets are CE-marked with `p_CL = k·p'` (`coupling_factor` k = 2), so
//!   `p_C = (p_CL / k)²`;
//! - L packets are in addition marked by the L queue's native step AQM: every L packet
//!   whose sojourn exceeds `step_thresh` (1 ms) is marked (optionally only while the L queue
//!   holds at least `min_qlen_step` packets, or in packets instead of time).
//!
//! Overload (RFC 9332 §4.2.3): when `k·p'` exceeds 1, `drop_on_overload` (the default)
//! treats L packets like classic ones (drop with `p'²`, else mark), keeping the L queue
//! short; `overflow` instead caps `p'` at `1/k` and lets the queues fill to `limit`.
//!
//! The scheduler between the two queues is the kernel's weighted round robin in bytes
//! ("classic protection", RFC 9332 §4.2.2): with `classic_protection = 10` the C queue is
//! guaranteed 10% of the bytes while both are backlogged; otherwise the L queue goes first.
//!
//! Probabilities are the kernel's u32 fixed point (`MAX_PROB = 2³² − 1` ≙ 1), alpha/beta are
//! given in 1/256 Hz (tc's float Hz × 256) and scaled as the kernel scales them, and the
//! random draws are `u32 <= prob`, so that decisions match the kernel's from the same
//! packet timeline and random numbers. The timer runs lazily (see `qdisc/mod.rs`).

use super::vocab::{
    tc_time, BuildCtx, Dequeue, Discipline, DropReason, Drops, Facts, NotLinux, Qdisc, TcKey,
    Verdict,
};
use crate::packet::{Ecn, Packet};
use crate::params::{ConfResult, Params, Value};
use crate::rng::Rng;
use crate::time::{Duration, Time};
use std::collections::VecDeque;

/// Probability 1.0 (`U32_MAX`).
pub const MAX_PROB: u32 = u32::MAX;
/// tc/netlink give alpha and beta in 1/256 Hz.
const ALPHA_BETA_SHIFT: u32 = 8;
/// Internally the kernel keeps them per 64 ns of delay (so that alpha = 1/256 Hz is not 0).
const ALPHA_BETA_GRANULARITY: u32 = 6;
/// Largest alpha/beta netlink accepts (1/256 Hz units).
const ALPHA_BETA_MAX: u32 = (1 << 31) - 1;
/// Weights of the WRR scheduler are percentages: `wc + wl = 100`.
const MAX_WC: i32 = 100;

/// A fraction of `MAX_PROB`.
#[inline]
pub fn prob_fraction(p: u32) -> f64 {
    p as f64 / MAX_PROB as f64
}

/// The kernel's internal gain from tc's 1/256-Hz units: probability (of `MAX_PROB`) per
/// 64 ns of delay, `units · MAX_PROB / 4 / 10⁹` (41 → 44, 819 → 879).
#[inline]
pub fn scale_alpha_beta(units: u32) -> u32 {
    (((units as u64 * MAX_PROB as u64) >> (ALPHA_BETA_SHIFT - ALPHA_BETA_GRANULARITY))
        / 1_000_000_000) as u32
}

/// Which ECN codepoints go to the L queue (`TCA_DUALPI2_ECN_MASK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcnMask {
    /// `l4s_ect` (default): ECT(1) and CE, the L4S identifier (RFC 9331 §5.1).
    L4sEct,
    /// `any_ect`: ECT(0) too (DCTCP in a data centre).
    AnyEct,
}

impl EcnMask {
    /// The ECN field bits that select the L queue (`ect & mask != 0`).
    #[inline]
    fn bits(self) -> u8 {
        match self {
            EcnMask::L4sEct => 0b01,
            EcnMask::AnyEct => 0b11,
        }
    }
}

/// The step threshold of the L queue's native AQM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepThresh {
    /// Sojourn time above this many µs (tc's unit) marks.
    TimeUs(u32),
    /// An L queue longer than this many packets (after the dequeue) marks.
    Packets(u32),
}

/// Typed spec of `dualpi2` (tc's names, the kernel's defaults).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DualPi2Spec {
    /// `limit`, packets in both queues together (10000).
    pub limit: u32,
    /// `memlimit`, bytes of `truesize` in both queues (default `limit · 2 · MTU`).
    pub memlimit_bytes: u32,
    /// `target`, µs (15 ms).
    pub target_us: u32,
    /// `tupdate`, µs (16 ms).
    pub tupdate_us: u32,
    /// `alpha` in 1/256 Hz (41 ≈ 0.16 Hz).
    pub alpha: u32,
    /// `beta` in 1/256 Hz (819 ≈ 3.2 Hz).
    pub beta: u32,
    /// `step_thresh` (1 ms).
    pub step: StepThresh,
    /// `min_qlen_step`, packets (0: always apply the step).
    pub min_qlen_step: u32,
    /// `coupling_factor` k (2).
    pub coupling_factor: u8,
    /// `drop_on_overload` (true) or `overflow`.
    pub drop_on_overload: bool,
    /// `drop_enqueue` (true) or `drop_dequeue` (false, default) for the PI drops/marks.
    pub drop_enqueue: bool,
    /// `classic_protection`, the C queue's WRR weight in % (10).
    pub classic_protection: u8,
    /// `l4s_ect` (default) or `any_ect`.
    pub ecn_mask: EcnMask,
    /// `split_gso` (true) or `no_split_gso`.
    pub split_gso: bool,
    /// `psched_mtu` (1514): the 2-MTU backlog floor and the WRR credit scale.
    pub mtu_bytes: u32,
}

/// tc keywords of `dualpi2` (iproute2's `q_dualpi2.c` input and `tc qdisc show` output).
pub const TC_KEYS: &[TcKey] = &[
    TcKey::Int("limit", "limit"),
    TcKey::Size("memlimit", "memlimit"),
    TcKey::Time("target", "target"),
    TcKey::Time("tupdate", "tupdate"),
    TcKey::Real("alpha", "alpha"),
    TcKey::Real("beta", "beta"),
    TcKey::Text("step_thresh", "step_thresh"),
    TcKey::Int("min_qlen_step", "min_qlen_step"),
    TcKey::Int("coupling_factor", "coupling_factor"),
    TcKey::Flag("drop_on_overload", "drop_on_overload", true),
    TcKey::Flag("overflow", "drop_on_overload", false),
    TcKey::Flag("drop_enqueue", "drop_enqueue", true),
    TcKey::Flag("drop_dequeue", "drop_enqueue", false),
    TcKey::Text("classic_protection", "classic_protection"),
    TcKey::Choice("l4s_ect", "ecn_mask", "l4s_ect"),
    TcKey::Choice("any_ect", "ecn_mask", "any_ect"),
    TcKey::Flag("split_gso", "split_gso", true),
    TcKey::Flag("no_split_gso", "split_gso", false),
    TcKey::Time("max_rtt", "max_rtt"),
    TcKey::Time("typical_rtt", "typical_rtt"),
];

/// tc's float Hz → the 1/256-Hz units it sends (`(u32)(f * 256)` in f32, truncating).
fn hz_to_units(hz: f64) -> u64 {
    ((hz as f32) * 256f32) as u64
}

/// The 1/256-Hz units as the exact decimal tc reads back to the same units.
fn units_to_hz(units: u32) -> String {
    let x = units as f64 / 256.0;
    // n/256 has at most 8 decimals; print them all and trim.
    let s = format!("{x:.8}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

impl DualPi2Spec {
    /// The kernel's defaults (`dualpi2_reset_default`) on a device of `mtu_bytes`.
    pub fn linux_default(mtu_bytes: u32) -> DualPi2Spec {
        DualPi2Spec {
            limit: 10_000,
            memlimit_bytes: memory_limit(10_000, mtu_bytes),
            target_us: 15_000,
            tupdate_us: 16_000,
            alpha: 41,
            beta: 819,
            step: StepThresh::TimeUs(1000),
            min_qlen_step: 0,
            coupling_factor: 2,
            drop_on_overload: true,
            drop_enqueue: false,
            classic_protection: 10,
            ecn_mask: EcnMask::L4sEct,
            split_gso: true,
            mtu_bytes,
        }
    }
}

impl Discipline for DualPi2Spec {
    const KIND: &'static str = "dualpi2";
    const SUMMARY: &'static str =
        "DualQ Coupled AQM with PI2: L4S and classic queues (RFC 9332, Linux sch_dualpi2)";
    type Qdisc = Box<DualPi2>;

    /// `dualpi2 [limit P] [memlimit B] [target T] [tupdate T] [alpha HZ] [beta HZ]
    /// [step_thresh T|Np] [min_qlen_step P] [coupling_factor K] [drop_on_overload|overflow]
    /// [drop_enqueue|drop_dequeue] [classic_protection PCT] [l4s_ect|any_ect]
    /// [split_gso|no_split_gso] [max_rtt T [typical_rtt T]]`.
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let d = DualPi2Spec::linux_default(ctx.mtu_bytes);
        // tc sends 0 for none of these (it omits zero), so 0 cannot be asked for.
        let limit = p.u32("limit", d.limit, 1, u32::MAX)?;
        let memlimit_bytes = match p.bytes_opt("memlimit")? {
            None => memory_limit(limit, ctx.mtu_bytes),
            Some(0) => return Err(p.err("memlimit", "must be positive (tc does not send 0)")),
            Some(b) if b > u32::MAX as u64 => {
                return Err(p.err("memlimit", "must fit the kernel's 32-bit byte count"))
            }
            Some(b) => b as u32,
        };
        let us = |p: &mut Params, key: &str, default_us: u32| -> ConfResult<u32> {
            let dd = p.duration(key, Duration::from_us(default_us as u64))?;
            let v = dd.as_ns() / 1000;
            if v == 0 {
                return Err(p.err(key, "must be at least 1us (tc does not send 0)"));
            }
            if !dd.as_ns().is_multiple_of(1000) {
                return Err(p.err(key, "must be a whole number of microseconds (tc's unit)"));
            }
            u32::try_from(v).map_err(|_| p.err(key, "must fit tc's 32-bit microseconds"))
        };
        let mut target_us = us(p, "target", d.target_us)?;
        let mut tupdate_us = us(p, "tupdate", d.tupdate_us)?;
        let gain = |p: &mut Params, key: &str, default: u32| -> ConfResult<u32> {
            if !p.has(key) {
                let _ = p.raw(key);
                return Ok(default);
            }
            let hz = p.f64(key, 0.0)?;
            // tc sends (u32)(f32 · 256); the kernel accepts 1..=2^31-1 of those units.
            let u = hz_to_units(hz);
            if hz < 0.0 || u > ALPHA_BETA_MAX as u64 {
                return Err(p.err(key, format!("{hz} Hz is out of range [1/256, 2^23)")));
            }
            let u = u as u32;
            if u == 0 {
                return Err(p.err(key, format!("{hz} Hz rounds to 0 in tc's 1/256-Hz units")));
            }
            Ok(u)
        };
        let mut alpha = gain(p, "alpha", d.alpha)?;
        let mut beta = gain(p, "beta", d.beta)?;
        let step = match p.raw("step_thresh") {
            None => d.step,
            Some(v) => parse_step(v).map_err(|m| p.err("step_thresh", m))?,
        };
        let min_qlen_step = p.u32("min_qlen_step", d.min_qlen_step, 0, u32::MAX)?;
        let coupling_factor = p.u32("coupling_factor", 2, 1, 255)? as u8;
        let drop_on_overload = p.bool("drop_on_overload", d.drop_on_overload)?;
        let drop_enqueue = p.bool("drop_enqueue", d.drop_enqueue)?;
        let classic_protection = match p.raw("classic_protection") {
            None => d.classic_protection,
            Some(v) => parse_percent(v).map_err(|m| p.err("classic_protection", m))?,
        };
        let ecn_mask = match p.choice("ecn_mask", &["l4s_ect", "any_ect"], "l4s_ect")? {
            "any_ect" => EcnMask::AnyEct,
            _ => EcnMask::L4sEct,
        };
        let split_gso = p.bool("split_gso", d.split_gso)?;
        // tc's helper (RFC 9332 Appendix A.1): target, tupdate, alpha and beta derived from
        // the RTT range; they override explicit values, as tc does.
        let max_rtt = p.duration_opt("max_rtt")?;
        let typical_rtt = p.duration_opt("typical_rtt")?;
        if max_rtt.is_some() || typical_rtt.is_some() {
            let to_us = |x: Option<Duration>| x.map(|d| (d.as_ns() / 1000) as u32).unwrap_or(0);
            let (mut rtt_max, mut rtt_typ) = (to_us(max_rtt), to_us(typical_rtt));
            if rtt_typ == 0 {
                rtt_typ = (rtt_max / 6).max(1);
            } else if rtt_max == 0 {
                rtt_max = rtt_typ.saturating_mul(6);
            } else if rtt_typ > rtt_max {
                return Err(p.err("typical_rtt", "must be <= max_rtt"));
            }
            if rtt_max == 0 {
                return Err(p.err("max_rtt", "must be at least 1us"));
            }
            target_us = rtt_typ;
            let t = if (rtt_typ as f64) < rtt_max as f64 / 3.0 {
                rtt_typ as f64
            } else {
                rtt_max as f64 / 3.0
            };
            tupdate_us = (t as u32).max(1);
            let alpha_hz =
                tupdate_us as f64 / rtt_max as f64 / rtt_max as f64 * 1e6 * 0.1f32 as f64;
            // (At most 0.3/1us = 300 kHz: within the kernel's range for any max_rtt.)
            let beta_hz = 0.3f32 as f64 / rtt_max as f64 * 1e6;
            alpha = (alpha_hz * 256.0) as u32;
            beta = (beta_hz * 256.0) as u32;
            if alpha == 0 || beta == 0 {
                return Err(p.err("max_rtt", "is too large: alpha/beta round down to 0"));
            }
        }
        Ok(DualPi2Spec {
            limit,
            memlimit_bytes,
            target_us,
            tupdate_us,
            alpha,
            beta,
            step,
            min_qlen_step,
            coupling_factor,
            drop_on_overload,
            drop_enqueue,
            classic_protection,
            ecn_mask,
            split_gso,
            mtu_bytes: ctx.mtu_bytes,
        })
    }

    fn build(&self, ctx: &BuildCtx) -> Box<DualPi2> {
        Box::new(DualPi2::new(self.clone(), ctx.rng()))
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS);

    /// Every parameter, in `tc qdisc show` order (tc accepts them all back).
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        let k = "dualpi2";
        let mut a: Vec<String> = vec![
            "limit".into(),
            self.limit.to_string(),
            "memlimit".into(),
            self.memlimit_bytes.to_string(),
            "target".into(),
            tc_time(k, "target", Duration::from_us(self.target_us as u64))?,
            "tupdate".into(),
            tc_time(k, "tupdate", Duration::from_us(self.tupdate_us as u64))?,
            "alpha".into(),
            units_to_hz(self.alpha),
            "beta".into(),
            units_to_hz(self.beta),
            "step_thresh".into(),
            match self.step {
                StepThresh::TimeUs(us) => tc_time(k, "step_thresh", Duration::from_us(us as u64))?,
                StepThresh::Packets(n) => format!("{n}p"),
            },
            "min_qlen_step".into(),
            self.min_qlen_step.to_string(),
            "coupling_factor".into(),
            self.coupling_factor.to_string(),
        ];
        a.push(
            if self.drop_on_overload {
                "drop_on_overload"
            } else {
                "overflow"
            }
            .into(),
        );
        a.push(
            if self.drop_enqueue {
                "drop_enqueue"
            } else {
                "drop_dequeue"
            }
            .into(),
        );
        a.push("classic_protection".into());
        a.push(format!("{}%", self.classic_protection));
        a.push(
            match self.ecn_mask {
                EcnMask::L4sEct => "l4s_ect",
                EcnMask::AnyEct => "any_ect",
            }
            .into(),
        );
        a.push(
            if self.split_gso {
                "split_gso"
            } else {
                "no_split_gso"
            }
            .into(),
        );
        Ok(a)
    }

    /// `split_gso` cuts GSO buffers into segments at enqueue.
    fn facts(&self) -> Facts {
        Facts {
            splits_gso: self.split_gso,
            ..Facts::default()
        }
    }
}

/// The kernel's default memory limit: `limit · 2 · MTU` (per-packet overhead rule of thumb),
/// saturated at `U32_MAX`.
pub fn memory_limit(limit: u32, mtu_bytes: u32) -> u32 {
    (limit as u64 * 2 * mtu_bytes as u64).min(u32::MAX as u64) as u32
}

/// `step_thresh`: `"1ms"` (time), `"5p"` / `"5pkt"` / `"5packets"` (packets), or a bare
/// number of µs as tc reads it.
fn parse_step(v: &Value) -> Result<StepThresh, String> {
    let s = match v {
        Value::Str(s) => s.trim(),
        other => {
            return Err(format!(
                "expected a time like \"1ms\" or packets like \"5p\", got {}",
                other.type_name()
            ))
        }
    };
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &s[digits.len()..];
    if matches!(unit, "p" | "pkt" | "pkts" | "packet" | "packets") {
        let n: u32 = digits
            .parse()
            .map_err(|_| format!("expected a packet count like \"5p\", got {s:?}"))?;
        if n == 0 {
            return Err("must be positive (tc does not send 0)".into());
        }
        return Ok(StepThresh::Packets(n));
    }
    let d = if unit.is_empty() {
        super::vocab::parse_tc_time(s).ok_or_else(|| {
            format!("expected a time like \"1ms\" or packets like \"5p\", got {s:?}")
        })?
    } else {
        crate::units::parse_duration(s)?
    };
    if !d.as_ns().is_multiple_of(1000) {
        return Err("must be a whole number of microseconds (tc's unit)".into());
    }
    let us = d.as_ns() / 1000;
    if us == 0 {
        return Err("must be positive (tc does not send 0)".into());
    }
    u32::try_from(us)
        .map(StepThresh::TimeUs)
        .map_err(|_| "must fit tc's 32-bit microseconds".into())
}

/// `classic_protection`: an integer percentage, or tc's `"10%"`.
fn parse_percent(v: &Value) -> Result<u8, String> {
    let x = match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Str(s) => s
            .trim()
            .trim_end_matches('%')
            .parse::<f64>()
            .map_err(|_| format!("expected a percentage like 10 or \"10%\", got {s:?}"))?,
        other => return Err(format!("expected a percentage, got {}", other.type_name())),
    };
    if !(0.0..=100.0).contains(&x) {
        return Err(format!("{x}% is out of range [0, 100]"));
    }
    Ok(x.round() as u8)
}

/// How the classifier placed a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Classic,
    L4s,
}

/// A packet in the L queue with its enqueue-time step decision (`apply_step`).
#[derive(Clone, Copy, Debug)]
struct LEntry {
    pkt: Packet,
    apply_step: bool,
}

/// `sch_dualpi2`.
#[derive(Debug)]
pub struct DualPi2 {
    spec: DualPi2Spec,
    l_queue: VecDeque<LEntry>,
    c_queue: VecDeque<Packet>,
    /// Bytes (`qdisc_pkt_len`) in both queues (`sch->qstats.backlog`).
    backlog_bytes: u64,
    /// `truesize` in both queues.
    memory_used: u64,
    /// PI2 state: base probability p', delay at the last update.
    prob: u32,
    last_qdelay_ns: u64,
    /// Kernel-scaled gains (probability per 64 ns).
    alpha_int: u32,
    beta_int: u32,
    /// Next update (lazy timer).
    next_update: Time,
    /// WRR credit: <= 0 serves the L queue (when the C queue is backlogged).
    credit: i64,
    credit_init: i64,
    rng: Rng,
    gso_scratch: Vec<Packet>,
    /// Statistics (`tc -s qdisc show` xstats).
    pub packets_in_l: u64,
    pub packets_in_c: u64,
    /// CE marks by the PI (coupled or classic) and the step, together (`ecn_mark`).
    pub ecn_mark: u64,
    /// CE marks by the step AQM alone (`step_marks`).
    pub step_marks: u64,
    pub maxq: u32,
    pub dropped: u64,
    pub overlimit: u64,
}

impl DualPi2 {
    /// A DualPI2 created at time 0 (first probability update at `tupdate`).
    pub fn new(spec: DualPi2Spec, rng: Rng) -> DualPi2 {
        let wc = spec.classic_protection as i64;
        let wl = MAX_WC as i64 - wc;
        let credit_init = spec.mtu_bytes as i64 * (wc - wl);
        DualPi2 {
            alpha_int: scale_alpha_beta(spec.alpha),
            beta_int: scale_alpha_beta(spec.beta),
            next_update: Time::ZERO + Duration::from_ns(tupdate_ns(&spec)),
            spec,
            l_queue: VecDeque::new(),
            c_queue: VecDeque::new(),
            backlog_bytes: 0,
            memory_used: 0,
            prob: 0,
            last_qdelay_ns: 0,
            credit: credit_init,
            credit_init,
            rng,
            gso_scratch: Vec::new(),
            packets_in_l: 0,
            packets_in_c: 0,
            ecn_mark: 0,
            step_marks: 0,
            maxq: 0,
            dropped: 0,
            overlimit: 0,
        }
    }

    pub fn spec(&self) -> &DualPi2Spec {
        &self.spec
    }
    /// The base probability p' as a fraction.
    pub fn base_prob(&self) -> f64 {
        prob_fraction(self.prob)
    }
    /// The coupled L marking probability `p_CL = min(k·p', 1)`.
    pub fn prob_l(&self) -> f64 {
        (self.spec.coupling_factor as f64 * self.base_prob()).min(1.0)
    }
    /// The classic drop/mark probability `p_C = p'²`.
    pub fn prob_c(&self) -> f64 {
        self.base_prob() * self.base_prob()
    }
    /// Packets in the L queue / in the C queue.
    pub fn l_len(&self) -> usize {
        self.l_queue.len()
    }
    pub fn c_len(&self) -> usize {
        self.c_queue.len()
    }

    /// The classifier (`dualpi2_skb_classify` without tc filters): the ECN field against
    /// the mask.
    #[inline]
    fn classify(&self, pkt: &Packet) -> Class {
        if (pkt.ecn as u8) & self.spec.ecn_mask.bits() != 0 {
            Class::L4s
        } else {
            Class::Classic
        }
    }

    /// A draw of the kernel's `get_random_u32() <= prob`.
    #[inline]
    fn roll(&mut self, prob: u32) -> bool {
        self.rng.next_u32() <= prob
    }

    /// `must_drop`: the PI decision for a packet (marks it when it survives as CE); true
    /// if it must be dropped. `backlog` is the qdisc's byte backlog without this packet.
    fn must_drop(&mut self, pkt: &mut Packet, class: Class) -> bool {
        // No AQM below two MTUs of standing queue.
        if self.backlog_bytes < 2 * self.spec.mtu_bytes as u64 {
            return false;
        }
        let prob = self.prob;
        let local_l_prob = prob as u64 * self.spec.coupling_factor as u64;
        let overload = local_l_prob > MAX_PROB as u64;
        match class {
            Class::Classic => {
                // p_C = p'^2 as two independent draws.
                if self.roll(prob) && self.roll(prob) {
                    if overload || pkt.ecn == Ecn::NotEct {
                        return true;
                    }
                    self.mark(pkt);
                }
                false
            }
            Class::L4s => {
                if overload {
                    // k·p' >= 100%: with drop_on_overload, classic drops first.
                    if self.spec.drop_on_overload && self.roll(prob) && self.roll(prob) {
                        return true;
                    }
                    self.mark(pkt);
                    return false;
                }
                if self.roll(local_l_prob as u32) {
                    if pkt.ecn == Ecn::NotEct {
                        return true;
                    }
                    self.mark(pkt);
                }
                false
            }
        }
    }

    /// CE-marks an ECN-capable packet (callers have sent Not-ECT ones to a drop).
    #[inline]
    fn mark(&mut self, pkt: &mut Packet) {
        if pkt.set_ce() {
            self.ecn_mark += 1;
        }
    }

    /// The head-of-queue sojourn times (L, C) at `now`, ns (0 for an empty queue).
    fn queue_delays(&self, now: Time) -> (u64, u64) {
        let l = self
            .l_queue
            .front()
            .map(|e| (now - e.pkt.enqueued_at).as_ns())
            .unwrap_or(0);
        let c = self
            .c_queue
            .front()
            .map(|p| (now - p.enqueued_at).as_ns())
            .unwrap_or(0);
        (l, c)
    }

    /// `calculate_probability`: one PI2 update at `now` (RFC 9332 Appendix A.2 `dualpi2_update`).
    pub fn update_probability(&mut self, now: Time) {
        let (ql, qc) = self.queue_delays(now);
        let qdelay = ql.max(qc) as i64;
        let target = self.spec.target_us as i64 * 1000;
        let mut delta = (qdelay - target).wrapping_mul(self.alpha_int as i64);
        delta = delta
            .wrapping_add((qdelay - self.last_qdelay_ns as i64).wrapping_mul(self.beta_int as i64));
        self.last_qdelay_ns = qdelay as u64;
        // Δ per 64 ns of delay (the kernel divides the magnitude by 64: truncation toward
        // zero, as i64 division), added to p' and bounded to [0, 1]. The kernel does this in
        // u32 with wrap checks, which agree for any step below 2^32 (a move of less than
        // 100% in one update); beyond that its arithmetic wraps and sojourn saturates.
        let step = delta / (1i64 << ALPHA_BETA_GRANULARITY);
        let mut new_prob = (self.prob as i64)
            .saturating_add(step)
            .clamp(0, MAX_PROB as i64) as u32;
        // overflow mode: cap so that k·p' stays <= 100% (window fairness while overflowing).
        if !self.spec.drop_on_overload {
            new_prob = new_prob.min(MAX_PROB / self.spec.coupling_factor as u32);
        }
        self.prob = new_prob;
    }

    /// Runs every update due at or before `now`.
    #[inline]
    fn run_timer(&mut self, now: Time) {
        if now >= self.next_update {
            self.catch_up(now);
        }
    }

    #[inline(never)]
    fn catch_up(&mut self, now: Time) {
        let tupdate = Duration::from_ns(tupdate_ns(&self.spec));
        while self.next_update <= now {
            let at = self.next_update;
            let before = (self.prob, self.last_qdelay_ns);
            self.update_probability(at);
            self.next_update += tupdate;
            // Empty queues at p' = 0 are a fixed point of the update: skip the rest.
            if self.l_queue.is_empty()
                && self.c_queue.is_empty()
                && before == (self.prob, self.last_qdelay_ns)
                && self.next_update <= now
            {
                let behind = (now - self.next_update).as_ns() / tupdate.as_ns() + 1;
                self.next_update += tupdate * behind;
                break;
            }
        }
    }

    /// `dualpi2_enqueue_skb` for one (already classified) packet.
    fn enqueue_one(&mut self, mut pkt: Packet, class: Class, drops: &mut Drops) -> Verdict {
        let qlen = self.l_queue.len() + self.c_queue.len();
        if qlen as u64 >= self.spec.limit as u64
            || self.memory_used + pkt.truesize_bytes as u64 > self.spec.memlimit_bytes as u64
        {
            self.overlimit += 1;
            self.dropped += 1;
            drops.push(pkt, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        if self.spec.drop_enqueue && self.must_drop(&mut pkt, class) {
            self.dropped += 1;
            drops.push(pkt, DropReason::Early);
            return Verdict::Dropped;
        }
        self.memory_used += pkt.truesize_bytes as u64;
        self.maxq = self.maxq.max(qlen as u32);
        self.backlog_bytes += pkt.len_bytes as u64;
        match class {
            Class::L4s => {
                // The step applies if the L queue already holds min_qlen_step packets.
                let apply_step = self.l_queue.len() as u64 >= self.spec.min_qlen_step as u64;
                self.packets_in_l += 1;
                self.l_queue.push_back(LEntry { pkt, apply_step });
            }
            Class::Classic => {
                self.packets_in_c += 1;
                self.c_queue.push_back(pkt);
            }
        }
        Verdict::Queued
    }

    /// `dequeue_packet`: the WRR choice between the queues; returns the packet, its class,
    /// its step flag and the credit change to apply if it is sent.
    fn dequeue_packet(&mut self) -> Option<(Packet, Class, bool, i64)> {
        let c_len = self.c_queue.len();
        let (pkt, class, apply_step, change) =
            if !self.l_queue.is_empty() && (c_len == 0 || self.credit <= 0) {
                let e = self.l_queue.pop_front().expect("non-empty");
                let w = if c_len > 0 {
                    self.spec.classic_protection as i64
                } else {
                    0
                };
                (e.pkt, Class::L4s, e.apply_step, w)
            } else if c_len > 0 {
                let p = self.c_queue.pop_front().expect("non-empty");
                let w = if self.l_queue.is_empty() {
                    0
                } else {
                    -(MAX_WC as i64 - self.spec.classic_protection as i64)
                };
                (p, Class::Classic, false, w)
            } else {
                self.credit = self.credit_init;
                return None;
            };
        self.memory_used -= pkt.truesize_bytes as u64;
        self.backlog_bytes -= pkt.len_bytes as u64;
        Some((pkt, class, apply_step, change * pkt.len_bytes as i64))
    }

    /// `do_step_aqm`: the L queue's native step marking at dequeue. (The kernel drops a
    /// Not-ECT packet here; such packets reach the L queue only through tc filters, which
    /// sojourn does not model, so every L packet here is ECN-capable.)
    fn step_aqm(&mut self, pkt: &mut Packet, apply_step: bool, now: Time) {
        let over = match self.spec.step {
            StepThresh::Packets(n) => self.l_queue.len() as u64 > n as u64,
            StepThresh::TimeUs(us) => {
                // The kernel keeps the threshold in a u32 of ns (saturated).
                let th = (us as u64 * 1000).min(u32::MAX as u64);
                (now - pkt.enqueued_at).as_ns() > th
            }
        };
        if apply_step && over {
            self.mark(pkt);
            self.step_marks += 1;
        }
    }
}

fn tupdate_ns(spec: &DualPi2Spec) -> u64 {
    // convert_us_to_nsec: saturated to a u32 of ns.
    (spec.tupdate_us as u64 * 1000).min(u32::MAX as u64)
}

impl Qdisc for DualPi2 {
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        self.run_timer(now);
        let class = self.classify(&pkt);
        if pkt.gso_segs > 1 && self.spec.split_gso {
            // split_gso: each segment is classified alike and enqueued (and AQM-managed)
            // on its own.
            let mut segs = std::mem::take(&mut self.gso_scratch);
            segs.clear();
            pkt.gso_segment(|s| segs.push(s));
            let mut verdict = Verdict::Dropped;
            for s in segs.drain(..) {
                if self.enqueue_one(s, class, drops) == Verdict::Queued {
                    verdict = Verdict::Queued;
                }
            }
            self.gso_scratch = segs;
            return verdict;
        }
        self.enqueue_one(pkt, class, drops)
    }

    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        self.run_timer(now);
        while let Some((mut pkt, class, apply_step, change)) = self.dequeue_packet() {
            if !self.spec.drop_enqueue && self.must_drop(&mut pkt, class) {
                self.dropped += 1;
                drops.push(pkt, DropReason::Aqm);
                continue;
            }
            if class == Class::L4s {
                self.step_aqm(&mut pkt, apply_step, now);
            }
            self.credit += change;
            return Dequeue::Packet(pkt);
        }
        Dequeue::Empty
    }

    fn len_packets(&self) -> usize {
        self.l_queue.len() + self.c_queue.len()
    }
    fn len_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    fn ecn_marks(&self) -> u64 {
        self.ecn_mark
    }
    fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
        self.run_timer(now);
        let (ql, qc) = self.queue_delays(now);
        emit("prob", self.base_prob());
        emit("prob_l", self.prob_l());
        emit("prob_c", self.prob_c());
        emit("delay_l_ms", ql as f64 * 1e-6);
        emit("delay_c_ms", qc as f64 * 1e-6);
        emit("l_packets", self.l_queue.len() as f64);
        emit("c_packets", self.c_queue.len() as f64);
        emit("step_marks", self.step_marks as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Table;
    use crate::qdisc::testkit::{check_conservation, pkt, Bound};

    const MTU: u32 = 1514;

    fn spec() -> DualPi2Spec {
        DualPi2Spec::linux_default(MTU)
    }

    fn q_with(s: DualPi2Spec) -> DualPi2 {
        DualPi2::new(s, Rng::from_seed(7))
    }

    fn ecn_pkt(uid: u64, ecn: Ecn, at: Time) -> Packet {
        let mut p = pkt(uid, 1, 1514);
        p.ecn = ecn;
        p.enqueued_at = at;
        p
    }

    fn parse(kv: &[(&str, Value)]) -> ConfResult<DualPi2Spec> {
        let mut t = Table::default();
        for (k, v) in kv {
            t.insert(k, v.clone());
        }
        let mut p = Params::new("q", &t);
        let s = DualPi2Spec::parse(&mut p, &BuildCtx::default())?;
        p.finish()?;
        Ok(s)
    }

    #[test]
    fn defaults_are_the_kernels() {
        // dualpi2_reset_default / tc-dualpi2(8): limit 10000, memlimit limit·2·MTU,
        // target 15 ms, tupdate 16 ms, alpha 0.16 Hz (41/256), beta 3.2 Hz (819/256),
        // step_thresh 1 ms, min_qlen_step 0, k = 2, drop_on_overload, drop_dequeue,
        // classic_protection 10%, l4s_ect, split_gso.
        let s = parse(&[]).unwrap();
        assert_eq!(s.limit, 10_000);
        assert_eq!(s.memlimit_bytes, 30_280_000);
        assert_eq!((s.target_us, s.tupdate_us), (15_000, 16_000));
        assert_eq!((s.alpha, s.beta), (41, 819));
        assert_eq!(s.step, StepThresh::TimeUs(1000));
        assert_eq!(s.min_qlen_step, 0);
        assert_eq!(s.coupling_factor, 2);
        assert!(s.drop_on_overload && !s.drop_enqueue && s.split_gso);
        assert_eq!(s.classic_protection, 10);
        assert_eq!(s.ecn_mask, EcnMask::L4sEct);
        // The internal gains: 41 · (2^32 − 1) / 4 / 10^9 = 44, 819 → 879.
        assert_eq!(scale_alpha_beta(41), 44);
        assert_eq!(scale_alpha_beta(819), 879);
        assert_eq!(scale_alpha_beta(1), 1);
    }

    #[test]
    fn tc_line_of_the_defaults() {
        // What `tc qdisc show` prints for `tc qdisc add dev X root dualpi2` (modulo the
        // float printing of alpha/beta, which tc reads back to the same 1/256 units).
        let a = spec().tc_args().unwrap().join(" ");
        assert_eq!(
            a,
            "limit 10000 memlimit 30280000 target 15ms tupdate 16ms alpha 0.16015625 \
             beta 3.19921875 step_thresh 1ms min_qlen_step 0 coupling_factor 2 \
             drop_on_overload drop_dequeue classic_protection 10% l4s_ect split_gso"
        );
    }

    #[test]
    fn reads_what_tc_qdisc_show_prints() {
        // iproute2's print_opt for a default dualpi2 (alpha/beta printed with %f).
        let shown = "limit 10000p memlimit 30280000B target 15ms tupdate 16ms alpha 0.160156 \
                     beta 3.199219 step_thresh 1ms min_qlen_step 0p coupling_factor 2 \
                     drop_on_overload drop_dequeue classic_protection 10% l4s_ect split_gso";
        let words: Vec<&str> = shown.split_whitespace().collect();
        let q =
            crate::qdisc::QdiscSpec::from_tc_args("dualpi2", &words, &BuildCtx::default()).unwrap();
        let crate::qdisc::QdiscSpec::DualPi2(s) = q else {
            panic!()
        };
        // %f loses the last digits: tc itself would send (u32)(0.160156f·256) = 40 and
        // (u32)(3.199219f·256) = 819 for these words.
        let mut want = spec();
        want.alpha = 40;
        assert_eq!(s, want);
        let e = crate::qdisc::QdiscSpec::from_tc_args(
            "dualpi2",
            &["step_thresh", "3x"],
            &BuildCtx::default(),
        )
        .unwrap_err();
        assert!(e.path.ends_with("step_thresh"), "{e:?}");
    }

    #[test]
    fn parameters_and_rejections() {
        let s = parse(&[
            ("alpha", Value::Float(0.32)),
            ("beta", Value::Float(6.4)),
            ("step_thresh", Value::Str("5p".into())),
            ("classic_protection", Value::Str("30%".into())),
            ("ecn_mask", Value::Str("any_ect".into())),
            ("limit", Value::Int(100)),
        ])
        .unwrap();
        // tc: (u32)(0.32f · 256) = 81, (u32)(6.4f · 256) = 1638.
        assert_eq!((s.alpha, s.beta), (81, 1638));
        assert_eq!(s.step, StepThresh::Packets(5));
        assert_eq!(s.classic_protection, 30);
        assert_eq!(s.ecn_mask, EcnMask::AnyEct);
        assert_eq!(s.memlimit_bytes, 100 * 2 * 1514);
        // The largest f32 gain below 2^23 Hz (8388607.5) is within the kernel's 2^31 − 1
        // units; 2^23 Hz is not.
        let s = parse(&[("beta", Value::Float(8_388_607.5))]).unwrap();
        assert_eq!(s.beta, 2_147_483_520);
        let s = parse(&[
            ("memlimit", Value::Int(u32::MAX as i64)),
            ("classic_protection", Value::Float(0.0)),
            ("step_thresh", Value::Str("2ms".into())),
        ])
        .unwrap();
        assert_eq!(s.memlimit_bytes, u32::MAX);
        assert_eq!(s.classic_protection, 0);
        assert_eq!(s.step, StepThresh::TimeUs(2000));
        assert_eq!(
            parse(&[("step_thresh", Value::Str("500".into()))])
                .unwrap()
                .step,
            StepThresh::TimeUs(500),
            "a bare number is µs, as tc reads it"
        );
        for (k, v) in [
            ("coupling_factor", Value::Int(0)),
            ("coupling_factor", Value::Int(256)),
            ("alpha", Value::Float(0.001)),
            ("classic_protection", Value::Int(101)),
            ("step_thresh", Value::Str("0p".into())),
            ("target", Value::Str("0ms".into())),
            ("limit", Value::Int(0)),
            ("ecn_mask", Value::Str("ect0".into())),
            ("alpha", Value::Float(8_388_608.0)),
            ("step_thresh", Value::Str("1500ns".into())),
            ("step_thresh", Value::Str("0us".into())),
            ("step_thresh", Value::Int(5)),
            ("tupdate", Value::Str("1500ns".into())),
            ("memlimit", Value::Int(0)),
            ("memlimit", Value::Int(1 << 32)),
            ("classic_protection", Value::Int(-1)),
        ] {
            let e = parse(&[(k, v)]).unwrap_err();
            assert_eq!(e.path, format!("q.{k}"), "{e:?}");
        }
        // A negative gain is out of range; 0 Hz is in range but is 0 of tc's 1/256-Hz units.
        let e = parse(&[("alpha", Value::Float(-1.0))]).unwrap_err();
        assert!(e.msg.contains("out of range"), "{}", e.msg);
        let e = parse(&[("beta", Value::Float(0.0))]).unwrap_err();
        assert!(e.msg.contains("rounds to 0"), "{}", e.msg);
    }

    #[test]
    fn max_rtt_helper_follows_rfc9332_appendix_a1() {
        // max_rtt 100 ms, typical 15 ms: target 15 ms, tupdate min(15 ms, 100/3 ms) = 15 ms,
        // alpha = 0.1·tupdate/max_rtt² = 0.1·0.015/0.01 = 0.15 Hz → 38 units (tc truncates
        // 38.4), beta = 0.3/max_rtt = 3 Hz → 768 units.
        let s = parse(&[
            ("max_rtt", Value::Str("100ms".into())),
            ("typical_rtt", Value::Str("15ms".into())),
        ])
        .unwrap();
        assert_eq!((s.target_us, s.tupdate_us), (15_000, 15_000));
        assert_eq!((s.alpha, s.beta), (38, 768));
        // typical above max/3: tupdate = max/3 = 33333 us, alpha = 0.1·0.0333/0.01 = 0.333
        // Hz → 85 units.
        let s = parse(&[
            ("max_rtt", Value::Str("100ms".into())),
            ("typical_rtt", Value::Str("50ms".into())),
        ])
        .unwrap();
        assert_eq!(
            (s.target_us, s.tupdate_us, s.alpha, s.beta),
            (50_000, 33_333, 85, 768)
        );
        // max_rtt alone: typical = max/6 = 10 ms; alpha = 0.1·0.01/0.0036 = 0.278 Hz → 71,
        // beta = 0.3/0.06 = 5 Hz → 1280.
        let s = parse(&[("max_rtt", Value::Str("60ms".into()))]).unwrap();
        assert_eq!(
            (s.target_us, s.tupdate_us, s.alpha, s.beta),
            (10_000, 10_000, 71, 1280)
        );
        // typical_rtt alone: max = 6·typical = 120 ms: beta = 2.5 Hz → 640.
        let s = parse(&[("typical_rtt", Value::Str("20ms".into()))]).unwrap();
        assert_eq!(
            (s.target_us, s.tupdate_us, s.alpha, s.beta),
            (20_000, 20_000, 35, 640)
        );
        // Equal is allowed, typical > max is not; a 10-s max_rtt rounds alpha to 0.
        assert!(parse(&[
            ("max_rtt", Value::Str("30ms".into())),
            ("typical_rtt", Value::Str("30ms".into())),
        ])
        .is_ok());
        let e = parse(&[
            ("max_rtt", Value::Str("30ms".into())),
            ("typical_rtt", Value::Str("31ms".into())),
        ])
        .unwrap_err();
        assert_eq!(e.path, "q.typical_rtt");
        let e = parse(&[("max_rtt", Value::Str("10s".into()))]).unwrap_err();
        assert_eq!(e.path, "q.max_rtt");
    }

    #[test]
    fn classifier_sends_ect1_and_ce_to_l_and_the_rest_to_c() {
        let mut q = q_with(spec());
        let mut d = Drops::new();
        for (i, e) in [Ecn::Ect1, Ecn::Ce, Ecn::Ect0, Ecn::NotEct]
            .into_iter()
            .enumerate()
        {
            q.enqueue(ecn_pkt(i as u64, e, Time(0)), Time(0), &mut d);
        }
        assert_eq!((q.l_len(), q.c_len()), (2, 2));
        // any_ect: ECT(0) joins the L queue too.
        let mut s = spec();
        s.ecn_mask = EcnMask::AnyEct;
        let mut q = q_with(s);
        for (i, e) in [Ecn::Ect1, Ecn::Ce, Ecn::Ect0, Ecn::NotEct]
            .into_iter()
            .enumerate()
        {
            q.enqueue(ecn_pkt(i as u64, e, Time(0)), Time(0), &mut d);
        }
        assert_eq!((q.l_len(), q.c_len()), (3, 1));
        assert_eq!(q.packets_in_l, 3);
        assert_eq!(q.packets_in_c, 1);
    }

    #[test]
    fn one_pi_update_from_a_known_state() {
        // p' = 0, qdelay 20 ms, previous 15 ms, target 15 ms, default gains:
        // Δp = alpha·(20−15) ms + beta·(20−15) ms = (0.16015625 + 3.19921875)·0.005
        //    = 0.016796875 (the kernel's integer scaling truncates a little below).
        let mut q = q_with(spec());
        let mut d = Drops::new();
        q.enqueue(ecn_pkt(1, Ecn::NotEct, Time(0)), Time(0), &mut d);
        q.last_qdelay_ns = 15_000_000;
        q.update_probability(Time(20_000_000));
        let p = q.base_prob();
        assert!((p / 0.016796875 - 1.0).abs() < 2e-3, "p' = {p}");
        assert!(p < 0.016796875);
        assert_eq!(q.last_qdelay_ns, 20_000_000);
        // The larger of the two head delays drives it: an L head 30 ms old.
        let mut q = q_with(spec());
        q.enqueue(
            ecn_pkt(1, Ecn::NotEct, Time(10_000_000)),
            Time(10_000_000),
            &mut d,
        );
        q.enqueue(ecn_pkt(2, Ecn::Ect1, Time(0)), Time(10_000_000), &mut d);
        q.last_qdelay_ns = 30_000_000;
        q.update_probability(Time(30_000_000));
        // Δp = alpha·15 ms = 0.16015625·0.015 = 0.00240234.
        let p = q.base_prob();
        assert!((p / 0.002_402_343_75 - 1.0).abs() < 3e-3, "p' = {p}");
        // Below target with p' = 0: stays 0 (no wrap to a huge probability).
        let mut q = q_with(spec());
        q.update_probability(Time(1_000_000_000));
        assert_eq!(q.prob, 0);
        // Saturation at 1 instead of wrapping.
        let mut q = q_with(spec());
        q.enqueue(ecn_pkt(1, Ecn::NotEct, Time(0)), Time(0), &mut d);
        q.prob = MAX_PROB - 10;
        q.update_probability(Time(2_000_000_000));
        assert_eq!(q.prob, MAX_PROB);
    }

    #[test]
    fn pi_update_edges() {
        // Empty queues, p' = 0.5: the integral term alone lowers it by
        // alpha·target = 0.16015625 Hz · 15 ms = 0.00240234.
        let mut q = q_with(spec());
        q.prob = MAX_PROB / 2;
        q.update_probability(Time(1_000_000_000));
        let drop = 0.5 - q.base_prob();
        assert!((drop / 0.002_402_343_75 - 1.0).abs() < 3e-3, "{drop}");
        // |Δ| below one unit of 64 ns·gain leaves p' as it is (no spurious 0 or 1).
        let mut d = Drops::new();
        for off in [1i64, -1] {
            let mut q = q_with(spec());
            q.enqueue(ecn_pkt(1, Ecn::NotEct, Time(0)), Time(0), &mut d);
            q.prob = MAX_PROB / 2;
            let at = (15_000_000 + off) as u64;
            q.last_qdelay_ns = at;
            q.update_probability(Time(at));
            assert_eq!(q.prob, MAX_PROB / 2, "delay 15 ms {off:+} ns");
        }
    }

    #[test]
    fn updates_run_every_tupdate_from_creation() {
        // One packet queued at 0 (never dequeued): no update before 16 ms, one at 16 ms
        // (qdelay 16 ms > target 15 ms), the next at 32 ms.
        let mut q = q_with(spec());
        let mut d = Drops::new();
        q.enqueue(ecn_pkt(1, Ecn::NotEct, Time(0)), Time(0), &mut d);
        q.observe(Time(15_999_999), &mut |_, _| {});
        assert_eq!(q.prob, 0);
        q.observe(Time(16_000_000), &mut |_, _| {});
        let p1 = q.prob;
        assert!(p1 > 0);
        q.observe(Time(31_999_999), &mut |_, _| {});
        assert_eq!(q.prob, p1);
        q.observe(Time(32_000_000), &mut |_, _| {});
        assert!(q.prob > p1);
        assert_eq!(q.last_qdelay_ns, 32_000_000);
        // Idle at p' = 0: the skipped updates keep the grid (16 ms · n).
        let mut q = q_with(spec());
        q.observe(Time(1_005_000_000), &mut |_, _| {});
        assert_eq!(q.next_update, Time(1_008_000_000));
        assert_eq!(q.prob, 0);
    }

    #[test]
    fn observe_reports_probabilities_and_delays() {
        let mut q = q_with(spec());
        let mut d = Drops::new();
        q.enqueue(
            ecn_pkt(1, Ecn::Ect1, Time(1_000_000)),
            Time(1_000_000),
            &mut d,
        );
        q.enqueue(
            ecn_pkt(2, Ecn::NotEct, Time(3_000_000)),
            Time(3_000_000),
            &mut d,
        );
        q.prob = MAX_PROB / 10;
        q.next_update = Time::MAX;
        let mut got = std::collections::HashMap::new();
        q.observe(Time(10_000_000), &mut |k, v| {
            got.insert(k.to_string(), v);
        });
        assert!((got["prob"] - 0.1).abs() < 1e-9);
        assert!((got["prob_l"] - 0.2).abs() < 1e-9);
        assert!((got["prob_c"] - 0.01).abs() < 1e-9);
        assert!((got["delay_l_ms"] - 9.0).abs() < 1e-9);
        assert!((got["delay_c_ms"] - 7.0).abs() < 1e-9);
        assert_eq!((got["l_packets"], got["c_packets"]), (1.0, 1.0));
        assert_eq!(got["step_marks"], 0.0);
    }

    #[test]
    fn pi_drops_happen_where_configured() {
        // p' = 1 and a standing classic backlog: with drop_dequeue (default) arrivals are
        // all queued and the drops happen at dequeue (reason aqm); with drop_enqueue they
        // happen on arrival (reason early) and never at dequeue.
        for enqueue_side in [false, true] {
            let mut s = spec();
            s.drop_enqueue = enqueue_side;
            let mut q = q_with(s);
            let mut d = Drops::new();
            for i in 0..3 {
                q.enqueue(ecn_pkt(i, Ecn::NotEct, Time(0)), Time(0), &mut d);
            }
            q.prob = MAX_PROB;
            q.next_update = Time::MAX;
            for i in 3..10 {
                q.enqueue(ecn_pkt(i, Ecn::NotEct, Time(0)), Time(0), &mut d);
            }
            let at_enqueue: Vec<DropReason> = d.drain().map(|x| x.reason).collect();
            if enqueue_side {
                assert_eq!(at_enqueue, vec![DropReason::Early; 7]);
            } else {
                assert!(at_enqueue.is_empty());
            }
            let mut sent = 0;
            let mut bound = Bound::new(100_000, "drain");
            while q.dequeue(Time(1), &mut d).packet().is_some() {
                bound.tick();
                sent += 1;
            }
            let at_dequeue: Vec<DropReason> = d.drain().map(|x| x.reason).collect();
            if enqueue_side {
                assert!(at_dequeue.is_empty());
                assert_eq!(sent, 3);
            } else {
                // Drops until fewer than 2 MTU remain behind the head.
                assert_eq!(at_dequeue, vec![DropReason::Aqm; 8]);
                assert_eq!(sent, 2);
            }
            assert_eq!(q.dropped, if enqueue_side { 7 } else { 8 });
        }
        // k = 1 and p' = 1: k·p' is exactly 1, not overload: classic ECT is marked.
        let mut s = spec();
        s.coupling_factor = 1;
        let (marks, drops) = fractions(s, 1.0, Ecn::Ect0, 1000);
        assert_eq!((marks, drops), (1.0, 0.0));
    }

    #[test]
    fn overflow_mode_caps_the_base_probability_at_one_over_k() {
        let mut s = spec();
        s.drop_on_overload = false;
        let mut q = q_with(s);
        let mut d = Drops::new();
        q.enqueue(ecn_pkt(1, Ecn::NotEct, Time(0)), Time(0), &mut d);
        q.prob = MAX_PROB - 10;
        q.update_probability(Time(2_000_000_000));
        assert_eq!(q.prob, MAX_PROB / 2);
        assert!((q.prob_l() - 1.0).abs() < 1e-9);
    }

    /// Marks and drops of `n` packets of codepoint `ecn` offered at base probability `p`
    /// (a standing backlog of classic packets keeps the 2-MTU floor satisfied; the step is
    /// out of the way).
    fn fractions(s: DualPi2Spec, p: f64, ecn: Ecn, n: u64) -> (f64, f64) {
        let mut q = q_with(s);
        let mut d = Drops::new();
        let (mut marks, mut drops) = (0u64, 0u64);
        for i in 0..n {
            q.prob = (p * MAX_PROB as f64) as u32;
            q.backlog_bytes = 10 * 1514; // standing queue (not dequeued here)
            let mut x = ecn_pkt(i, ecn, Time(1));
            let class = q.classify(&x);
            let was_ce = x.ecn == Ecn::Ce;
            if q.must_drop(&mut x, class) {
                drops += 1;
            } else if x.ecn == Ecn::Ce && !was_ce {
                marks += 1;
            }
        }
        let _ = &mut d;
        (marks as f64 / n as f64, drops as f64 / n as f64)
    }

    #[test]
    fn coupling_law_p_c_equals_p_cl_over_k_squared() {
        // RFC 9332 §2.1: p_CL = k·p', p_C = p'², so p_C = (p_CL/k)² with k = 2.
        let mut s = spec();
        s.step = StepThresh::TimeUs(u32::MAX);
        let n = 400_000;
        for (p, want_l, want_c) in [(0.1, 0.2, 0.01), (0.2, 0.4, 0.04), (0.3, 0.6, 0.09)] {
            let (p_cl, drop_l) = fractions(s.clone(), p, Ecn::Ect1, n);
            let (mark_c, drop_c_ect) = fractions(s.clone(), p, Ecn::Ect0, n);
            let (_, p_c) = fractions(s.clone(), p, Ecn::NotEct, n);
            assert_eq!(drop_l, 0.0);
            assert_eq!(drop_c_ect, 0.0, "ECT(0) in C is marked, not dropped");
            assert!((p_cl - want_l).abs() < 0.005, "p_CL {p_cl} at p' {p}");
            assert!((p_c - want_c).abs() < 0.002, "p_C {p_c} at p' {p}");
            assert!(
                (mark_c - want_c).abs() < 0.002,
                "C marks {mark_c} at p' {p}"
            );
            let law = (p_cl / 2.0).powi(2);
            assert!((p_c - law).abs() < 0.003, "p_C {p_c} vs (p_CL/k)^2 {law}");
        }
        // The discipline's reported probabilities obey the law exactly.
        let mut q = q_with(spec());
        q.prob = MAX_PROB / 8;
        assert!((q.prob_c() - (q.prob_l() / 2.0).powi(2)).abs() < 1e-12);
        assert!((q.prob_l() - 0.25).abs() < 1e-9 && (q.prob_c() - 0.015625).abs() < 1e-9);
        // k = 4: p_CL = 0.4 at p' = 0.1.
        let mut s4 = s.clone();
        s4.coupling_factor = 4;
        let (p_cl, _) = fractions(s4, 0.1, Ecn::Ect1, n);
        assert!((p_cl - 0.4).abs() < 0.005, "{p_cl}");
    }

    #[test]
    fn overload_drops_l_packets_with_the_classic_probability() {
        // k·p' > 1 (p' = 0.6): drop_on_overload drops L packets with p'² = 0.36 and marks
        // the rest; overflow marks them all.
        let mut s = spec();
        s.step = StepThresh::TimeUs(u32::MAX);
        let (marks, drops) = fractions(s.clone(), 0.6, Ecn::Ect1, 200_000);
        assert!((drops - 0.36).abs() < 0.005, "{drops}");
        assert!((marks - 0.64).abs() < 0.005, "{marks}");
        // Classic ECT packets are dropped (not marked) in overload.
        let (marks, drops) = fractions(s.clone(), 0.6, Ecn::Ect0, 200_000);
        assert_eq!(marks, 0.0);
        assert!((drops - 0.36).abs() < 0.005, "{drops}");
        s.drop_on_overload = false;
        let (marks, drops) = fractions(s, 0.6, Ecn::Ect1, 200_000);
        assert_eq!((marks, drops), (1.0, 0.0));
    }

    #[test]
    fn no_aqm_below_two_mtus_of_backlog() {
        let mut q = q_with(spec());
        q.prob = MAX_PROB;
        q.backlog_bytes = 2 * 1514 - 1;
        let mut x = ecn_pkt(1, Ecn::NotEct, Time(0));
        assert!(!q.must_drop(&mut x, Class::Classic));
        q.backlog_bytes = 2 * 1514;
        assert!(q.must_drop(&mut x, Class::Classic));
    }

    #[test]
    fn step_marks_l_packets_above_the_threshold_only() {
        // tc-dualpi2(8): L packets whose sojourn *exceeds* step_thresh (1 ms) are marked.
        for (sojourn_ns, marked) in [(999_999, false), (1_000_000, false), (1_000_001, true)] {
            let mut q = q_with(spec());
            let mut d = Drops::new();
            q.enqueue(ecn_pkt(1, Ecn::Ect1, Time(0)), Time(0), &mut d);
            let p = q.dequeue(Time(sojourn_ns), &mut d).packet().unwrap();
            assert_eq!(p.ecn == Ecn::Ce, marked, "sojourn {sojourn_ns} ns");
            assert_eq!(q.step_marks, marked as u64);
            assert_eq!(q.ecn_marks(), marked as u64);
        }
        // Classic packets never see the step.
        let mut q = q_with(spec());
        let mut d = Drops::new();
        q.enqueue(ecn_pkt(1, Ecn::Ect0, Time(0)), Time(0), &mut d);
        let p = q.dequeue(Time(5_000_000), &mut d).packet().unwrap();
        assert_eq!(p.ecn, Ecn::Ect0);
        // In packets: marked while more than N packets remain in the L queue.
        let mut s = spec();
        s.step = StepThresh::Packets(2);
        let mut q = q_with(s);
        for i in 0..5 {
            q.enqueue(ecn_pkt(i, Ecn::Ect1, Time(0)), Time(0), &mut d);
        }
        let marks: Vec<bool> = (0..5)
            .map(|_| q.dequeue(Time(0), &mut d).packet().unwrap().ecn == Ecn::Ce)
            .collect();
        // After each dequeue 4, 3, 2, 1, 0 remain: > 2 for the first two.
        assert_eq!(marks, [true, true, false, false, false]);
        // min_qlen_step 3: only packets that found >= 3 ahead of them at enqueue.
        let mut s = spec();
        s.min_qlen_step = 3;
        let mut q = q_with(s);
        for i in 0..5 {
            q.enqueue(ecn_pkt(i, Ecn::Ect1, Time(0)), Time(0), &mut d);
        }
        let marks: Vec<bool> = (0..5)
            .map(|_| q.dequeue(Time(2_000_000), &mut d).packet().unwrap().ecn == Ecn::Ce)
            .collect();
        assert_eq!(marks, [false, false, false, true, true]);
    }

    #[test]
    fn wrr_gives_the_classic_queue_its_protected_share() {
        // Both queues backlogged with equal packets: classic_protection 10% serves 1 C
        // packet per 9 L packets (the L queue starts, its initial credit being negative).
        let mut q = q_with(spec());
        let mut d = Drops::new();
        for i in 0..200 {
            q.enqueue(ecn_pkt(i, Ecn::Ect1, Time(0)), Time(0), &mut d);
            q.enqueue(ecn_pkt(1000 + i, Ecn::NotEct, Time(0)), Time(0), &mut d);
        }
        let mut order = String::new();
        for _ in 0..100 {
            let p = q.dequeue(Time(0), &mut d).packet().unwrap();
            order.push(if p.uid >= 1000 { 'C' } else { 'L' });
        }
        assert_eq!(order.matches('C').count(), 10, "{order}");
        assert!(order.starts_with("LLLLLLLLLC"), "{order}");
        // classic_protection 50: alternate.
        let mut s = spec();
        s.classic_protection = 50;
        let mut q = q_with(s);
        for i in 0..20 {
            q.enqueue(ecn_pkt(i, Ecn::Ect1, Time(0)), Time(0), &mut d);
            q.enqueue(ecn_pkt(1000 + i, Ecn::NotEct, Time(0)), Time(0), &mut d);
        }
        let order: String = (0..10)
            .map(|_| {
                if q.dequeue(Time(0), &mut d).packet().unwrap().uid >= 1000 {
                    'C'
                } else {
                    'L'
                }
            })
            .collect();
        assert_eq!(order, "LCLCLCLCLC");
        // With both queues empty the credit is reset: a fresh 9:1 cycle.
        let mut bound = Bound::new(100_000, "drain");
        while q.dequeue(Time(0), &mut d).packet().is_some() {
            bound.tick();
        }
        let mut q = q_with(spec());
        for i in 0..20 {
            q.enqueue(ecn_pkt(i, Ecn::Ect1, Time(0)), Time(0), &mut d);
            q.enqueue(ecn_pkt(1000 + i, Ecn::NotEct, Time(0)), Time(0), &mut d);
        }
        for _ in 0..9 {
            q.dequeue(Time(0), &mut d);
        }
        assert!(q.credit > 0);
        let mut bound = Bound::new(100_000, "drain");
        while q.dequeue(Time(0), &mut d).packet().is_some() {
            bound.tick();
        }
        assert_eq!(q.credit, -121_120);
        // Serving the L queue while the C queue is empty leaves the credit alone.
        let mut q = q_with(spec());
        for i in 0..30 {
            q.enqueue(ecn_pkt(i, Ecn::Ect1, Time(0)), Time(0), &mut d);
        }
        for _ in 0..5 {
            q.dequeue(Time(0), &mut d);
        }
        assert_eq!(q.credit, -121_120);
        for i in 0..5 {
            q.enqueue(ecn_pkt(1000 + i, Ecn::NotEct, Time(0)), Time(0), &mut d);
        }
        let order: String = (0..10)
            .map(|_| {
                if q.dequeue(Time(0), &mut d).packet().unwrap().uid >= 1000 {
                    'C'
                } else {
                    'L'
                }
            })
            .collect();
        assert_eq!(order, "LLLLLLLLLC");
    }

    #[test]
    fn limits_drop_at_the_tail() {
        let mut s = spec();
        s.limit = 3;
        let mut q = q_with(s);
        let mut d = Drops::new();
        for i in 0..4 {
            q.enqueue(ecn_pkt(i, Ecn::Ect1, Time(0)), Time(0), &mut d);
        }
        assert_eq!(q.len_packets(), 3);
        assert_eq!(d.as_slice()[0].reason, DropReason::Overlimit);
        assert_eq!(d.as_slice()[0].pkt.uid, 3);
        // memlimit in truesize: two 1514-B frames (2880 B each) fit 6000 B, not three.
        let mut s = spec();
        s.memlimit_bytes = 6000;
        let mut q = q_with(s);
        let mut d = Drops::new();
        for i in 0..3 {
            q.enqueue(ecn_pkt(i, Ecn::NotEct, Time(0)), Time(0), &mut d);
        }
        assert_eq!(q.len_packets(), 2);
        assert_eq!(d.len(), 1);
        assert_eq!((q.overlimit, q.dropped), (1, 1));
        // Dequeued packets give their memory back: 3 × 2880 B fill 8640 B; after one
        // leaves, one more fits, a second does not.
        let mut s = spec();
        s.memlimit_bytes = 3 * 2880;
        let mut q = q_with(s);
        let mut d = Drops::new();
        for i in 0..3 {
            q.enqueue(ecn_pkt(i, Ecn::NotEct, Time(0)), Time(0), &mut d);
        }
        q.dequeue(Time(0), &mut d).packet().unwrap();
        assert_eq!(
            q.enqueue(ecn_pkt(3, Ecn::NotEct, Time(0)), Time(0), &mut d),
            Verdict::Queued
        );
        assert_eq!(
            q.enqueue(ecn_pkt(4, Ecn::NotEct, Time(0)), Time(0), &mut d),
            Verdict::Dropped
        );
        // Exactly full is allowed.
        let mut s = spec();
        s.memlimit_bytes = 2 * 2880;
        let mut q = q_with(s);
        for i in 0..2 {
            q.enqueue(ecn_pkt(i, Ecn::NotEct, Time(0)), Time(0), &mut d);
        }
        assert_eq!(q.len_packets(), 2);
        // The default memory limit saturates at the kernel's u32.
        assert_eq!(memory_limit(10_000, 1514), 30_280_000);
        assert_eq!(memory_limit(2_000_000, 1514), u32::MAX);
    }

    /// Open-loop arrivals of `ecn` packets every `ia` into a link serving one per
    /// `service` from `t0` for `secs`: (drop fraction, mean sojourn ms) after `settle` s.
    fn drive(q: &mut DualPi2, ecn: Ecn, ia: Duration, service: Duration, secs: u64) -> (f64, f64) {
        let mut d = Drops::new();
        let end = Time::ZERO + Duration::from_secs(secs);
        let late = Time::ZERO + Duration::from_secs(secs / 3);
        let (mut t_arr, mut link_free) = (Time::ZERO, Time::ZERO);
        let (mut arrivals, mut drops, mut soj, mut n_soj) = (0u64, 0u64, 0.0, 0u64);
        let mut uid = 0;
        let mut bound = Bound::new(10_000_000, "event loop until end");
        loop {
            bound.tick();
            let dq = q.len_packets() > 0 && link_free <= t_arr;
            let now = if dq { link_free } else { t_arr };
            if now >= end {
                break;
            }
            if dq {
                if let Some(p) = q.dequeue(now, &mut d).packet() {
                    if now >= late {
                        soj += (now - p.enqueued_at).as_millis_f64();
                        n_soj += 1;
                    }
                    link_free = now + service;
                }
            } else {
                let x = ecn_pkt(uid, ecn, now);
                uid += 1;
                if now >= late {
                    arrivals += 1;
                }
                q.enqueue(x, now, &mut d);
                link_free = link_free.max(now);
                t_arr += ia;
            }
            for x in d.drain() {
                if now >= late {
                    drops += 1;
                }
                assert_ne!(x.reason, DropReason::Overlimit);
            }
        }
        (drops as f64 / arrivals as f64, soj / n_soj as f64)
    }

    #[test]
    fn pi_controller_holds_classic_delay_at_target_under_overload() {
        // Classic arrivals at 1.25× the 10 Mbit/s service: at rest the accepted rate must
        // equal the service rate (drop fraction 1 − 1/1.25 = 0.2) and the integral term
        // alpha·(qdelay − target) is at rest only at the 15-ms target.
        let service = Duration(1_211_200);
        let mut q = q_with(spec());
        let (frac, mean) = drive(
            &mut q,
            Ecn::NotEct,
            Duration(service.0 * 4 / 5),
            service,
            90,
        );
        assert!((frac - 0.2).abs() < 0.01, "drop fraction {frac}");
        assert!((12.0..18.0).contains(&mean), "mean sojourn {mean} ms vs 15");
        // p_C = p'² = 0.2 ⇒ p' ≈ 0.447.
        assert!((q.base_prob() - 0.447).abs() < 0.1, "p' {}", q.base_prob());
    }

    #[test]
    fn lazy_timer_equals_eager_timer() {
        let mut lazy = q_with(spec());
        let mut eager = q_with(spec());
        let mut rng = Rng::from_seed(3);
        let (mut dl, mut de) = (Drops::new(), Drops::new());
        let mut now = Time::ZERO;
        let tup = Duration::from_ms(16);
        let mut next_tick = Time::ZERO + tup;
        for uid in 0..60_000u64 {
            // Mostly sub-tupdate gaps, sometimes idle periods of many updates.
            now += Duration(if rng.chance(0.01) {
                rng.below(400_000_000)
            } else {
                rng.below(1_000_000)
            });
            while next_tick <= now {
                eager.observe(next_tick, &mut |_, _| {});
                next_tick += tup;
            }
            if rng.chance(0.56) {
                let e = [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce][rng.below(4) as usize];
                let x = ecn_pkt(uid, e, now);
                assert_eq!(
                    lazy.enqueue(x, now, &mut dl),
                    eager.enqueue(x, now, &mut de)
                );
            } else {
                let a = lazy.dequeue(now, &mut dl).packet().map(|x| (x.uid, x.ecn));
                let b = eager.dequeue(now, &mut de).packet().map(|x| (x.uid, x.ecn));
                assert_eq!(a, b);
            }
            assert_eq!(
                (lazy.prob, lazy.last_qdelay_ns),
                (eager.prob, eager.last_qdelay_ns)
            );
            assert_eq!(lazy.next_update, eager.next_update);
        }
        assert!(
            dl.len() > 100,
            "the test should exercise drops: {}",
            dl.len()
        );
        assert!(lazy.ecn_marks() > 100);
    }

    #[test]
    fn split_gso_segments_are_queued_one_by_one() {
        let mut q = q_with(spec());
        let mut d = Drops::new();
        let mut p = ecn_pkt(1, Ecn::Ect1, Time(0));
        p.gso_segs = 4;
        p.gso_size = 1448;
        p.hdr.payload_bytes = 4 * 1448;
        p.len_bytes = 4 * 1448 + 4 * 66;
        assert_eq!(q.enqueue(p, Time(0), &mut d), Verdict::Queued);
        assert_eq!(q.l_len(), 4);
        assert_eq!(q.len_bytes(), 4 * 1514);
        let mut s = spec();
        s.split_gso = false;
        let mut q = q_with(s);
        q.enqueue(p, Time(0), &mut d);
        assert_eq!(q.l_len(), 1);
    }

    #[test]
    fn dualpi2_conservation_property() {
        for mode in 0..4 {
            for seed in 0..8 {
                let mut s = spec();
                s.limit = 60;
                s.target_us = 1000;
                match mode {
                    1 => s.drop_enqueue = true,
                    2 => s.drop_on_overload = false,
                    3 => s.step = StepThresh::Packets(3),
                    _ => {}
                }
                let mut q = DualPi2::new(s, Rng::from_seed(seed));
                check_conservation(&mut q, seed, 6_000, |q| q.len_packets() <= 60);
            }
        }
    }
}
