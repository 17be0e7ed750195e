//! RED — Random Early Detection (Floyd & Jacobson 1993) as Linux `sch_red` + `red.h` do it.
//!
//! - The average `qavg` is a byte EWMA, kept scaled by 2^Wlog, updated at each arrival
//!   from the child's backlog *before* the packet is added:
//!   `qavg += backlog − qavg >> Wlog`.
//! - After an idle period (the queue was found empty by a dequeue), `qavg` decays as if
//!   `m = idle / xmit_time` empty-queue packets had arrived: `qavg · (1 − W)^m`, with
//!   `xmit_time = avpkt / bandwidth` (Floyd & Jacobson §4). sojourn evaluates this formula
//!   exactly; the kernel approximates it with tc's 256-entry shift table (`Stab`).
//! - `qavg < min`: accept. `qavg ≥ max`: hard mark (drop unless `ecn` and ECT, or always
//!   drop with `harddrop`). In between: `qcount`/`qR` marking — `qR` uniform in
//!   `[0, (max−min)/max_P)`, mark when `(qavg − min)·qcount ≥ qR` — which spaces marks
//!   uniformly on `[1, 1/pb]` packets, `pb = max_P·(qavg−min)/(max−min)`. No gentle mode.
//! - Accepted packets go to a byte FIFO of `limit` bytes (the kernel's child bfifo).
//! - `adaptive`: every 500 ms `max_P` grows by `min(1 %, max_P/4)` if `qavg` is above
//!   `min + 0.6(max−min)` and shrinks ×0.9 below `min + 0.4(max−min)` (Floyd, Gummadi &
//!   Shenker 2001; `red_adaptative_algo`), run lazily.

use super::vocab::{
    tc_rate, tc_size, BuildCtx, Dequeue, Discipline, DropReason, Drops, NotLinux, Qdisc, TcKey,
    Verdict,
};
use crate::packet::Packet;
use crate::params::{ConfResult, Params};
use crate::rng::Rng;
use crate::time::{Duration, Time};
use std::collections::VecDeque;

/// `RED_ONE_PERCENT`: 1 % in Q0.32.
const ONE_PERCENT: u32 = 42_949_673;
/// `MAX_P_MIN` / `MAX_P_MAX` bounds of adaptive RED.
const MAX_P_MIN: u32 = ONE_PERCENT;
const MAX_P_MAX: u32 = 50 * ONE_PERCENT;
/// The adaptive timer period (`HZ/2`).
const ADAPT_PERIOD: Duration = Duration::from_ms(500);

/// tc's `tc_red_eval_ewma`: the smallest Wlog in 1..32 with
/// `burst + 1 − min/avpkt ≤ (1 − (1−W)^burst) / W`, W = 2^−Wlog; `None` if the burst is too
/// small (`burst + 1 − min/avpkt < 1`) or no Wlog fits.
pub fn eval_wlog(qth_min: u32, burst: u32, avpkt: u32) -> Option<u32> {
    let a = burst as f64 + 1.0 - qth_min as f64 / avpkt as f64;
    if a < 1.0 {
        return None;
    }
    let mut w = 0.5f64;
    for wlog in 1..32 {
        if a <= (1.0 - (1.0 - w).powi(burst as i32)) / w {
            return Some(wlog);
        }
        w /= 2.0;
    }
    None
}

/// What `red_action` decided for an arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Accept,
    ProbMark,
    HardMark,
}

/// RED's fixed-point law (`struct red_parms`), shared by `red` and SFQ's per-slot RED.
#[derive(Clone, Debug)]
pub(crate) struct RedLaw {
    pub(crate) wlog: u32,
    /// Thresholds scaled by 2^Wlog, like `qavg`.
    qth_min_scaled: u64,
    qth_max_scaled: u64,
    /// `max − min` in bytes (at least 1).
    qth_delta: u32,
    /// Maximum marking probability, Q0.32.
    max_p: u32,
    /// `max_P / delta` (≥ 1): `qR = random_u32 / max_p_delta`.
    max_p_delta: u32,
    /// Adaptive RED's target band, bytes.
    target_min: u64,
    target_max: u64,
}

/// Per-queue RED state (`struct red_vars` without the idle start).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RedVars {
    /// Average backlog in bytes, scaled by 2^Wlog.
    pub(crate) qavg: u64,
    /// Packets since the last mark (−1: not in the marking region).
    qcount: i64,
    /// Random mark threshold.
    q_r: u64,
}

impl RedVars {
    /// `red_set_vars`.
    pub(crate) const fn new() -> RedVars {
        RedVars {
            qavg: 0,
            qcount: -1,
            q_r: 0,
        }
    }
}

impl RedLaw {
    /// `red_set_parms` after tc's derivation: Wlog from `burst`/`avpkt`, max_P from
    /// `probability`. `Err` says what tc or `red_check_params` would refuse.
    pub(crate) fn new(
        min: u32,
        max: u32,
        burst: u32,
        avpkt: u32,
        probability: f64,
    ) -> Result<RedLaw, String> {
        if max < min {
            return Err(format!("max ({max} B) must not be below min ({min} B)"));
        }
        let wlog = eval_wlog(min, burst, avpkt).ok_or_else(|| {
            format!(
                "cannot derive the EWMA weight: burst {burst} is too small for \
                 min/avpkt = {min}/{avpkt}; try burst {}",
                1 + min / avpkt
            )
        })?;
        // red_check_params: thresholds scaled by 2^Wlog must fit in 32 bits.
        let fls = |x: u32| 32 - x.leading_zeros();
        if fls(min) + wlog >= 32 || fls(max) + wlog >= 32 {
            return Err(format!(
                "min/max too large for Wlog {wlog} (the kernel needs (max << Wlog) < 2^32)"
            ));
        }
        let qth_delta = (max - min).max(1);
        let max_p = (probability * 4_294_967_296.0).min(u32::MAX as f64) as u32;
        let fifth = (qth_delta / 5) as u64;
        Ok(RedLaw {
            wlog,
            qth_min_scaled: (min as u64) << wlog,
            qth_max_scaled: (max as u64) << wlog,
            qth_delta,
            max_p,
            max_p_delta: (max_p / qth_delta).max(1),
            target_min: min as u64 + 2 * fifth,
            target_max: min as u64 + 3 * fifth,
        })
    }

    /// `red_random`: uniform in `[0, 2^32 / (max_P/delta))`.
    #[inline]
    fn random(&self, rng: &mut Rng) -> u64 {
        rng.next_u32() as u64 / self.max_p_delta as u64
    }

    /// `red_calc_qavg_no_idle_time`: `qavg·(1−W) + backlog·W`, in the 2^Wlog scale.
    #[inline]
    pub(crate) fn ewma(&self, qavg: u64, backlog_bytes: u64) -> u64 {
        qavg - (qavg >> self.wlog) + backlog_bytes
    }

    /// `red_action`: where `v.qavg` lies and whether this packet is marked.
    #[inline]
    pub(crate) fn action(&self, v: &mut RedVars, rng: &mut Rng) -> Action {
        let qavg = v.qavg;
        if qavg < self.qth_min_scaled {
            v.qcount = -1;
            Action::Accept
        } else if qavg >= self.qth_max_scaled {
            v.qcount = -1;
            Action::HardMark
        } else {
            v.qcount += 1;
            if v.qcount == 0 {
                // Entering the marking region: draw the first threshold.
                v.q_r = self.random(rng);
                return Action::Accept;
            }
            // red_mark_probability: max_P·(avg−min)/(max−min) ≥ U/qcount, divisionless.
            let excess = (qavg - self.qth_min_scaled) >> self.wlog;
            if excess * v.qcount as u64 >= v.q_r {
                v.qcount = 0;
                v.q_r = self.random(rng);
                Action::ProbMark
            } else {
                Action::Accept
            }
        }
    }

    /// `red_adaptative_algo` for an (unscaled) average of `qavg_bytes`.
    fn adapt(&mut self, qavg_bytes: u64) {
        if qavg_bytes > self.target_max && self.max_p <= MAX_P_MAX {
            self.max_p += MAX_P_MIN.min(self.max_p / 4);
        } else if qavg_bytes < self.target_min && self.max_p >= MAX_P_MIN {
            self.max_p = (self.max_p / 10) * 9;
        }
        // DIV_ROUND_CLOSEST(max_P, delta), at least 1.
        let d = self.qth_delta;
        self.max_p_delta = ((self.max_p + d / 2) / d).max(1);
    }
}

/// Validated RED settings (tc names; thresholds in bytes).
#[derive(Clone, Debug, PartialEq)]
pub struct RedParams {
    pub limit: u32,
    pub min: u32,
    pub max: u32,
    pub avpkt: u32,
    pub burst: u32,
    pub probability: f64,
    pub bandwidth_bps: u64,
    pub ecn: bool,
    pub harddrop: bool,
    pub nodrop: bool,
    pub adaptive: bool,
}

#[derive(Debug)]
pub struct Red {
    p: RedParams,
    law: RedLaw,
    vars: RedVars,
    /// ln(1 − W) / xmit_time, per ns (for the idle decay).
    idle_decay_per_ns: f64,
    /// Start of the current idle period (`qidlestart`), if idle.
    idle_start: Option<Time>,
    next_adapt: Time,

    // The child bfifo.
    queue: VecDeque<Packet>,
    backlog_bytes: u64,
    ecn_marks: u64,
    rng: Rng,
}

impl Red {
    /// Builds RED from validated parameters (`Err` explains what tc/the kernel would refuse).
    pub fn new(p: RedParams, rng: Rng) -> Result<Red, String> {
        let law = RedLaw::new(p.min, p.max, p.burst, p.avpkt, p.probability)?;
        let w = 1.0 / (1u64 << law.wlog) as f64;
        let xmit_time_ns = p.avpkt as f64 * 8.0 * 1e9 / p.bandwidth_bps as f64;
        Ok(Red {
            idle_decay_per_ns: (1.0 - w).ln() / xmit_time_ns,
            law,
            vars: RedVars::new(),
            // red_change starts an idle period when the child is empty.
            idle_start: Some(Time::ZERO),
            next_adapt: if p.adaptive {
                Time::ZERO + ADAPT_PERIOD
            } else {
                Time::MAX
            },
            queue: VecDeque::new(),
            backlog_bytes: 0,
            ecn_marks: 0,
            rng,
            p,
        })
    }

    pub fn wlog(&self) -> u32 {
        self.law.wlog
    }
    pub fn params(&self) -> &RedParams {
        &self.p
    }
    /// Current maximum marking probability.
    pub fn max_p(&self) -> f64 {
        self.law.max_p as f64 / 4_294_967_296.0
    }
    /// Current average backlog in bytes (as last computed).
    pub fn qavg_bytes(&self) -> f64 {
        self.vars.qavg as f64 / (1u64 << self.law.wlog) as f64
    }

    /// `qavg` after an idle period that started at `since`: `qavg · (1−W)^(idle/xmit_time)`.
    fn qavg_after_idle(&self, since: Time, now: Time) -> u64 {
        let idle_ns = (now - since).as_ns() as f64;
        (self.vars.qavg as f64 * (self.idle_decay_per_ns * idle_ns).exp()) as u64
    }

    /// `red_calc_qavg` with the backlog before this arrival.
    #[inline]
    fn calc_qavg(&self, now: Time) -> u64 {
        match self.idle_start {
            Some(since) => self.qavg_after_idle(since, now),
            None => self.law.ewma(self.vars.qavg, self.backlog_bytes),
        }
    }

    #[inline]
    fn action(&mut self) -> Action {
        self.law.action(&mut self.vars, &mut self.rng)
    }

    /// `red_adaptative_algo`, run at time `at` (with the idle-decayed average if idle).
    fn adapt(&mut self, at: Time) {
        let qavg = match self.idle_start {
            Some(since) => self.qavg_after_idle(since, at),
            None => self.vars.qavg,
        } >> self.law.wlog;
        self.law.adapt(qavg);
    }

    #[inline]
    fn run_timers(&mut self, now: Time) {
        while self.next_adapt <= now {
            let at = self.next_adapt;
            self.adapt(at);
            self.next_adapt += ADAPT_PERIOD;
        }
    }

    /// Mark (ECN) or drop as `sch_red` does for a prob/hard mark. Returns the packet if it
    /// is to be queued.
    #[inline]
    fn mark_or_drop(&mut self, mut pkt: Packet, hard: bool, drops: &mut Drops) -> Option<Packet> {
        if !self.p.ecn || (hard && self.p.harddrop) {
            drops.push(pkt, DropReason::Early);
            return None;
        }
        if pkt.set_ce() {
            self.ecn_marks += 1;
            Some(pkt)
        } else if self.p.nodrop {
            // Not-ECT in ECN nodrop mode: queue it unmarked.
            Some(pkt)
        } else {
            drops.push(pkt, DropReason::Early);
            None
        }
    }
}

impl Qdisc for Red {
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        self.run_timers(now);
        self.vars.qavg = self.calc_qavg(now);
        self.idle_start = None;
        let pkt = match self.action() {
            Action::Accept => pkt,
            Action::ProbMark => match self.mark_or_drop(pkt, false, drops) {
                Some(p) => p,
                None => return Verdict::Dropped,
            },
            Action::HardMark => match self.mark_or_drop(pkt, true, drops) {
                Some(p) => p,
                None => return Verdict::Dropped,
            },
        };
        // The child bfifo: tail drop at `limit` bytes (tc's "pdrop").
        let len = pkt.len_bytes as u64;
        if self.backlog_bytes + len > self.p.limit as u64 {
            drops.push(pkt, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        self.backlog_bytes += len;
        self.queue.push_back(pkt);
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Time, _drops: &mut Drops) -> Dequeue {
        self.run_timers(now);
        match self.queue.pop_front() {
            Some(p) => {
                self.backlog_bytes -= p.len_bytes as u64;
                Dequeue::Packet(p)
            }
            None => {
                // red_dequeue: finding the child empty starts an idle period.
                if self.idle_start.is_none() {
                    self.idle_start = Some(now);
                }
                Dequeue::Empty
            }
        }
    }

    #[inline]
    fn len_packets(&self) -> usize {
        self.queue.len()
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    fn ecn_marks(&self) -> u64 {
        self.ecn_marks
    }
    fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
        self.run_timers(now);
        emit("qavg_bytes", self.qavg_bytes());
        emit("max_p", self.max_p());
    }
}

/// `red` from its parameters (see [`RedSpec::parse`]).
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Red> {
    Ok(*RedSpec::parse(p, ctx)?.build(ctx))
}

/// Typed spec of `red`: tc's settings with tc's derived defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct RedSpec {
    pub params: RedParams,
}

impl Discipline for RedSpec {
    const KIND: &'static str = "red";
    const SUMMARY: &'static str =
        "Random Early Detection on the average byte backlog (Linux sch_red)";
    type Qdisc = Box<Red>;

    fn parse(p: &mut Params, _ctx: &BuildCtx) -> ConfResult<Self> {
        let limit =
            match p.bytes_opt("limit")? {
                Some(l) if l > 0 && l <= u32::MAX as u64 => l as u32,
                Some(l) => return Err(p.err("limit", format!("{l} B is out of range [1, 2^32-1]"))),
                None => return Err(p.err(
                    "limit",
                    "red needs `limit` (bytes of its queue), as tc does; e.g. limit = \"400KB\"",
                )),
            };
        let byte_param = |p: &mut Params, key: &str| -> ConfResult<u32> {
            match p.bytes_opt(key)? {
                None => Ok(0),
                Some(v) if v <= u32::MAX as u64 => Ok(v as u32),
                Some(v) => Err(p.err(key, format!("{v} B is too large"))),
            }
        };
        let mut min = byte_param(p, "min")?;
        let mut max = byte_param(p, "max")?;
        let avpkt = match byte_param(p, "avpkt")? {
            0 if p.has("avpkt") => return Err(p.err("avpkt", "avpkt must be positive")),
            0 => 1000,
            a => a,
        };
        // tc (Floyd's REDparameters.txt): max = 3·min or limit/4; min = max/3.
        if max == 0 {
            max = if min > 0 {
                min.saturating_mul(3)
            } else {
                limit / 4
            };
        }
        if min == 0 {
            min = max / 3;
        }
        let burst = p.u32("burst", 0, 0, u32::MAX)?;
        let burst = if burst == 0 {
            ((2 * min as u64 + max as u64) / (3 * avpkt as u64)) as u32
        } else {
            burst
        };
        let probability = p.f64("probability", 0.02)?;
        if !(probability > 0.0 && probability <= 1.0) {
            return Err(p.err(
                "probability",
                format!("{probability} is out of range (0, 1]"),
            ));
        }
        let bandwidth_bps = p.rate_opt("bandwidth")?.unwrap_or(10_000_000);
        if bandwidth_bps == 0 {
            return Err(p.err("bandwidth", "bandwidth must be positive"));
        }
        let ecn = p.bool("ecn", false)?;
        let harddrop = p.bool("harddrop", false)?;
        let nodrop = p.bool("nodrop", false)?;
        let adaptive = p.bool("adaptive", false)?;
        if nodrop && !ecn {
            return Err(p.err("nodrop", "nodrop is only meaningful with ecn = true"));
        }
        let params = RedParams {
            limit,
            min,
            max,
            avpkt,
            burst,
            probability,
            bandwidth_bps,
            ecn,
            harddrop,
            nodrop,
            adaptive,
        };
        // The law's own checks (Wlog/Plog ranges), now, so that build cannot fail.
        RedLaw::new(min, max, burst, avpkt, probability).map_err(|m| {
            let key = if m.contains("burst") { "burst" } else { "max" };
            p.err(key, m)
        })?;
        Ok(RedSpec { params })
    }

    fn build(&self, ctx: &BuildCtx) -> Box<Red> {
        Box::new(
            Red::new(self.params.clone(), ctx.rng()).expect("RED law validated by RedSpec::parse"),
        )
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS);

    /// `limit SIZE min SIZE max SIZE avpkt SIZE burst N [adaptive] probability P
    /// bandwidth RATE [ecn] [harddrop] [nodrop]` (tc-red(8)).
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        let r = &self.params;
        let mut a: Vec<String> = vec![
            "limit".into(),
            tc_size(r.limit as u64),
            "min".into(),
            tc_size(r.min as u64),
            "max".into(),
            tc_size(r.max as u64),
            "avpkt".into(),
            tc_size(r.avpkt as u64),
            "burst".into(),
            r.burst.to_string(),
        ];
        if r.adaptive {
            a.push("adaptive".into());
        }
        a.extend([
            "probability".into(),
            r.probability.to_string(),
            "bandwidth".into(),
            tc_rate(r.bandwidth_bps),
        ]);
        for (on, w) in [
            (r.ecn, "ecn"),
            (r.harddrop, "harddrop"),
            (r.nodrop, "nodrop"),
        ] {
            if on {
                a.push(w.into());
            }
        }
        Ok(a)
    }
}

/// tc keywords of `red`.
pub const TC_KEYS: &[TcKey] = &[
    TcKey::Size("limit", "limit"),
    TcKey::Size("min", "min"),
    TcKey::Size("max", "max"),
    TcKey::Size("avpkt", "avpkt"),
    TcKey::Int("burst", "burst"),
    TcKey::Real("probability", "probability"),
    TcKey::Rate("bandwidth", "bandwidth"),
    TcKey::Flag("adaptive", "adaptive", true),
    TcKey::Flag("ecn", "ecn", true),
    TcKey::Flag("harddrop", "harddrop", true),
    TcKey::Flag("nodrop", "nodrop", true),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Ecn;
    use crate::params::Value;
    use crate::qdisc::testkit::{check_conservation, pkt, Bound};

    fn build(pairs: &[(&str, Value)]) -> ConfResult<Red> {
        crate::qdisc::testkit::build_from(from_params, pairs.to_vec(), &BuildCtx::default())
    }

    fn int(i: i64) -> Value {
        Value::Int(i)
    }

    #[test]
    fn wlog_matches_tc_formula_by_hand() {
        // a = 55 + 1 − 33333/1000 = 22.67; W = 1/16: 16·(1 − (15/16)^55) = 15.54 < a;
        // W = 1/32: 32·(1 − (31/32)^55) = 26.42 ≥ a  → Wlog 5.
        assert_eq!(eval_wlog(33_333, 55, 1000), Some(5));
        // tc-8 red example: min 30000, burst 55 → a = 26 ≤ 26.42 → 5.
        assert_eq!(eval_wlog(30_000, 55, 1000), Some(5));
        // a = 20 + 1 − 5 = 16: W=1/32 gives 15.04 < 16, W=1/64 gives 17.29 → 6.
        assert_eq!(eval_wlog(5_000, 20, 1000), Some(6));
        // burst + 1 − min/avpkt < 1 is refused ("burst too small").
        assert_eq!(eval_wlog(5_000, 4, 1000), None);
    }

    #[test]
    fn defaults_follow_tc_derivation() {
        // limit 400000: max = limit/4 = 100000, min = max/3 = 33333,
        // burst = (2·33333 + 100000)/(3·1000) = 55, Wlog 5, probability 0.02.
        let r = build(&[("limit", int(400_000))]).unwrap();
        let p = r.params();
        assert_eq!(
            (p.max, p.min, p.avpkt, p.burst),
            (100_000, 33_333, 1000, 55)
        );
        assert_eq!(r.wlog(), 5);
        assert!((r.max_p() - 0.02).abs() < 1e-9);
        assert_eq!(p.bandwidth_bps, 10_000_000);
        // min given: max = 3·min.
        let r = build(&[("limit", int(400_000)), ("min", int(20_000))]).unwrap();
        assert_eq!(r.params().max, 60_000);
        // limit is required (and at least 1 byte), nodrop needs ecn, tiny burst is explained.
        assert!(build(&[]).err().unwrap().msg.contains("limit"));
        assert_eq!(build(&[("limit", int(0))]).err().unwrap().path, "q.limit");
        assert!(build(&[("limit", int(400_000)), ("nodrop", Value::Bool(true))]).is_err());
        let e = build(&[("limit", int(400_000)), ("burst", int(2))])
            .err()
            .unwrap();
        assert_eq!(e.path, "q.burst");
        assert!(build(&[
            ("limit", int(400_000)),
            ("min", int(50_000)),
            ("max", int(40_000))
        ])
        .is_err());
    }

    #[test]
    fn no_marks_below_min() {
        // Backlog never exceeds 30 × 1000 B < min = 33333 B, so qavg < min: nothing drops.
        let mut r = build(&[("limit", int(400_000))]).unwrap();
        let mut d = Drops::new();
        let mut now = Time(0);
        for i in 0..20_000u64 {
            now += Duration::from_us(100);
            assert_eq!(r.enqueue(pkt(i, 1, 1000), now, &mut d), Verdict::Queued);
            if r.len_packets() >= 30 {
                r.dequeue(now, &mut d).packet().unwrap();
            }
        }
        assert!(d.is_empty());
        assert_eq!(r.ecn_marks(), 0);
        assert!(r.qavg_bytes() < 33_333.0 && r.qavg_bytes() > 25_000.0);
    }

    /// Stuffs the queue so that qavg stays at `bytes` (the EWMA's fixed point).
    fn hold_average(r: &mut Red, bytes: u64) {
        let mut uid = 1_000_000;
        while r.backlog_bytes < bytes {
            r.queue.push_back(pkt(uid, 9, 1000));
            r.backlog_bytes += 1000;
            uid += 1;
        }
        r.vars.qavg = r.backlog_bytes << r.law.wlog;
        r.idle_start = None;
    }

    #[test]
    fn hard_mark_above_max() {
        // qavg ≥ max: every arrival is hit. Without ecn: dropped (early).
        let mut r = build(&[
            ("limit", int(10_000_000)),
            ("min", int(30_000)),
            ("max", int(90_000)),
        ])
        .unwrap();
        hold_average(&mut r, 3_000_000);
        let mut d = Drops::new();
        for i in 0..100 {
            assert_eq!(
                r.enqueue(pkt(i, 1, 1000), Time(0), &mut d),
                Verdict::Dropped
            );
        }
        assert!(d.drain().all(|x| x.reason == DropReason::Early));
        // ecn: ECT packets are marked and queued, Not-ECT dropped.
        let mut r = build(&[
            ("limit", int(10_000_000)),
            ("min", int(30_000)),
            ("max", int(90_000)),
            ("ecn", Value::Bool(true)),
        ])
        .unwrap();
        hold_average(&mut r, 3_000_000);
        for i in 0..100 {
            let mut p = pkt(i, 1, 1000);
            p.ecn = if i % 2 == 0 { Ecn::Ect0 } else { Ecn::NotEct };
            let v = r.enqueue(p, Time(0), &mut d);
            assert_eq!(v == Verdict::Queued, i % 2 == 0);
        }
        assert_eq!(r.ecn_marks(), 50);
        assert_eq!(d.drain().count(), 50);
        assert!(r
            .queue
            .iter()
            .filter(|p| p.uid < 100)
            .all(|p| p.ecn == Ecn::Ce));
        // ecn + harddrop: above max even ECT packets are dropped.
        let mut r = build(&[
            ("limit", int(10_000_000)),
            ("min", int(30_000)),
            ("max", int(90_000)),
            ("ecn", Value::Bool(true)),
            ("harddrop", Value::Bool(true)),
        ])
        .unwrap();
        hold_average(&mut r, 3_000_000);
        for i in 0..20 {
            let mut p = pkt(i, 1, 1000);
            p.ecn = Ecn::Ect0;
            assert_eq!(r.enqueue(p, Time(0), &mut d), Verdict::Dropped);
        }
        assert_eq!(r.ecn_marks(), 0);
        // ecn + nodrop: Not-ECT packets pass unmarked.
        let mut r = build(&[
            ("limit", int(10_000_000)),
            ("min", int(30_000)),
            ("max", int(90_000)),
            ("ecn", Value::Bool(true)),
            ("nodrop", Value::Bool(true)),
        ])
        .unwrap();
        hold_average(&mut r, 3_000_000);
        d.clear();
        assert_eq!(r.enqueue(pkt(0, 1, 1000), Time(0), &mut d), Verdict::Queued);
        assert!(d.is_empty());
    }

    #[test]
    fn inter_mark_gaps_are_uniform_on_1_to_inverse_pb() {
        // min 30000, max 90000, probability 0.02, qavg = 60000 → pb = 0.02·0.5 = 0.01.
        // Floyd & Jacobson's "uniform" marking: the gap X between marks is uniform on
        // {1, …, 1/pb} (mean (1/pb + 1)/2 = 50.5), unlike Bernoulli marking (geometric,
        // mean 1/pb = 100).
        let mut r = build(&[
            ("limit", int(1_000_000)),
            ("min", int(30_000)),
            ("max", int(90_000)),
            ("ecn", Value::Bool(true)),
        ])
        .unwrap();
        hold_average(&mut r, 60_000);
        let pb = 0.02 * (60_000.0 - 30_000.0) / (90_000.0 - 30_000.0);
        let mut gaps = vec![];
        let mut since = 0u64;
        let mut bound = Bound::new(10_000_000, "20 000 marking gaps");
        while gaps.len() < 20_000 {
            bound.tick();
            r.vars.qavg = 60_000 << r.law.wlog;
            since += 1;
            if r.action() == Action::ProbMark {
                gaps.push(since);
                since = 0;
            }
        }
        let gaps = &gaps[1..]; // the first gap includes the entry draw
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<u64>() as f64 / n;
        let expect = (1.0 / pb + 1.0) / 2.0;
        assert!(
            (mean - expect).abs() < 0.02 * expect,
            "mean gap {mean} vs {expect}"
        );
        assert_eq!(*gaps.iter().min().unwrap(), 1);
        let max = *gaps.iter().max().unwrap() as f64;
        assert!(max <= 1.0 / pb + 1.0 && max >= 0.97 / pb, "max gap {max}");
        // Uniform: each decile of [1, 100] holds ~10 % of the gaps (binomial sd ≈ 0.2 %).
        for k in 0..10 {
            let lo = 10 * k + 1;
            let hi = 10 * k + 10;
            let frac = gaps.iter().filter(|&&g| g >= lo && g <= hi).count() as f64 / n;
            assert!((frac - 0.1).abs() < 0.012, "decile {k}: {frac}");
        }
        // Variance of a discrete uniform on 1..N: (N² − 1)/12.
        let var = gaps.iter().map(|&g| (g as f64 - mean).powi(2)).sum::<f64>() / n;
        let nn = 1.0 / pb;
        assert!(
            (var - (nn * nn - 1.0) / 12.0).abs() < 0.05 * (nn * nn / 12.0),
            "var {var}"
        );
    }

    #[test]
    fn qavg_is_updated_from_the_backlog_before_enqueue() {
        // First arrival after idle at t=0 with qavg=0: qavg stays 0 (decay of 0), the
        // packet is then queued. Second arrival: qavg = 0 − 0 + 1000 (backlog before).
        let mut r = build(&[("limit", int(400_000))]).unwrap();
        let mut d = Drops::new();
        r.enqueue(pkt(0, 1, 1000), Time(0), &mut d);
        assert_eq!(r.vars.qavg, 0);
        r.enqueue(pkt(1, 1, 1000), Time(1), &mut d);
        assert_eq!(
            r.vars.qavg, 1000,
            "scaled qavg = W·backlog·2^Wlog = backlog"
        );
        r.enqueue(pkt(2, 1, 1000), Time(2), &mut d);
        // qavg = 1000 − 1000/32 + 2000
        assert_eq!(r.vars.qavg, 1000 - 31 + 2000);
    }

    #[test]
    fn idle_time_decays_the_average() {
        // Floyd & Jacobson: after idle time t the average is avg·(1−W)^m with
        // m = t / (avpkt/bandwidth). avpkt 1000 B at 10 Mbit/s = 800 us per packet.
        let mut r = build(&[("limit", int(1_000_000))]).unwrap();
        hold_average(&mut r, 50_000);
        let q0 = r.vars.qavg as f64;
        let mut d = Drops::new();
        let mut bound = Bound::new(100_000, "drain");
        while r.dequeue(Time(0), &mut d).packet().is_some() {
            bound.tick();
        }
        assert_eq!(r.idle_start, Some(Time(0)));
        // 20 packet times of idleness.
        let t = Time::ZERO + Duration::from_us(800 * 20);
        r.enqueue(pkt(1, 1, 1000), t, &mut d);
        let w = 1.0 / (1u64 << r.law.wlog) as f64;
        let expect = q0 * (1.0 - w).powi(20);
        assert!(
            ((r.vars.qavg as f64) - expect).abs() / expect < 1e-6,
            "{} vs {expect}",
            r.vars.qavg
        );
        assert_eq!(r.idle_start, None);
    }

    #[test]
    fn adaptive_red_moves_max_p() {
        // Above min + 0.6·(max − min): max_P += min(1 %, max_P/4) every 500 ms.
        let mut r = build(&[
            ("limit", int(1_000_000)),
            ("min", int(30_000)),
            ("max", int(90_000)),
            ("adaptive", Value::Bool(true)),
        ])
        .unwrap();
        hold_average(&mut r, 80_000);
        let mut emit = |_: &str, _: f64| {};
        r.observe(Time::ZERO + Duration::from_ms(499), &mut emit);
        assert!((r.max_p() - 0.02).abs() < 1e-9);
        r.observe(Time::ZERO + Duration::from_ms(500), &mut emit);
        assert!((r.max_p() - 0.025).abs() < 1e-6, "{}", r.max_p());
        r.observe(Time::ZERO + Duration::from_ms(1000), &mut emit);
        assert!((r.max_p() - 0.03125).abs() < 1e-6, "{}", r.max_p());
        // Below min + 0.4·(max − min): max_P ·= 0.9.
        hold_average(&mut r, 0);
        r.vars.qavg = 35_000 << r.law.wlog;
        r.observe(Time::ZERO + Duration::from_ms(1500), &mut emit);
        assert!((r.max_p() - 0.03125 * 0.9).abs() < 1e-6, "{}", r.max_p());
    }

    #[test]
    fn bfifo_limit_drops_overlimit() {
        let mut r = build(&[
            ("limit", int(5_000)),
            ("min", int(100_000)),
            ("max", int(200_000)),
        ])
        .unwrap();
        let mut d = Drops::new();
        for i in 0..6 {
            r.enqueue(pkt(i, 1, 1000), Time(0), &mut d);
        }
        let x: Vec<(u64, DropReason)> = d.drain().map(|x| (x.pkt.uid, x.reason)).collect();
        assert_eq!(x, vec![(5, DropReason::Overlimit)]);
    }

    #[test]
    fn conservation_property() {
        for seed in 0..15 {
            for (limit, ecn, adaptive) in [(30_000, false, false), (60_000, true, true)] {
                let mut r = build(&[
                    ("limit", int(limit)),
                    ("min", int(3_000)),
                    ("max", int(15_000)),
                    ("burst", int(10)),
                    ("ecn", Value::Bool(ecn)),
                    ("adaptive", Value::Bool(adaptive)),
                ])
                .unwrap();
                r.rng = Rng::from_seed(seed + 100);
                check_conservation(&mut r, seed, 4_000, |r| r.len_bytes() <= limit as u64);
            }
        }
    }
}
