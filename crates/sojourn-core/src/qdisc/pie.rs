//! PIE, Proportional Integral controller Enhanced (RFC 8033), as Linux `sch_pie` runs it.
//!
//! A single FIFO whose arrivals are dropped (or ECN-marked) at random with a probability
//! `prob` that a PI controller updates every `tupdate` from the queueing delay:
//! `prob += alpha·(qdelay − target) + beta·(qdelay − qdelay_old)` (RFC 8033 §4.2), with the
//! Linux refinements: automatic scaling of alpha/beta at low `prob`, a 2% step cap, a +2%
//! boost above 250 ms, a −prob/64 decay when the queue stays empty, a 150-ms burst
//! allowance drained by real dequeue gaps, and de-randomised drops (`accu_prob`).
//!
//! Arithmetic follows the kernel's integers (`include/net/pie.h`): probability is a u64 with
//! `MAX_PROB = 2^56 − 1` ≙ 1.0, times are psched ticks of 64 ns, and u64/u32 wrap-around is
//! reproduced where the kernel has it, so that sojourn makes the same decisions the kernel
//! would from the same packet timeline and random numbers.
//!
//! [`PieParams`] and [`PieVars`] (with `drop_early`, `process_dequeue`,
//! `calculate_probability` and the lazy timer) are shared with `fq_pie`, which runs one
//! `PieVars` per flow.

use super::vocab::{
    tc_time, BuildCtx, Dequeue, Discipline, DropReason, Drops, NotLinux, Qdisc, TcKey, Verdict,
};
use crate::packet::Packet;
use crate::params::{ConfResult, Params};
use crate::rng::Rng;
use crate::time::{Duration, Time};
use std::collections::VecDeque;

/// Probability 1.0 in the kernel's fixed point (`U64_MAX >> BITS_PER_BYTE`).
pub const MAX_PROB: u64 = u64::MAX >> 8;
/// psched time: nanoseconds >> 6 (64-ns ticks).
const PSCHED_SHIFT: u32 = 6;
const PSCHED_TICKS_PER_SEC: u64 = 1_000_000_000 >> PSCHED_SHIFT;
/// `dq_tstamp` before the first dequeue (and after a re-init).
const DTIME_INVALID: u64 = u64::MAX;
/// `dq_count` when no rate-measurement cycle runs (the kernel's −1 in a u64).
const DQCOUNT_INVALID: u64 = u64::MAX;
/// Bytes of backlog needed to start (and dequeued to finish) a drain-rate measurement.
const QUEUE_THRESHOLD: u64 = 16384;
/// Fixed-point shift of `avg_dq_rate` (bytes per tick << 8).
const PIE_SCALE: u32 = 8;
/// Burst allowance after (re-)initialisation: 150 ms.
const BURST_ALLOWANCE_TICKS: u64 = ns_to_ticks(150_000_000);
/// Delay above which Linux adds 2% per update (non-linear boost): 250 ms.
const NONLINEAR_DELAY_TICKS: u64 = ns_to_ticks(250_000_000);
/// The kernel arms the first update `HZ/2` jiffies (500 ms) after `pie_init`.
pub const FIRST_UPDATE: Duration = Duration::from_ms(500);

/// Nanoseconds to psched ticks (`PSCHED_NS2TICKS`).
#[inline]
pub const fn ns_to_ticks(ns: u64) -> u64 {
    ns >> PSCHED_SHIFT
}

/// Psched ticks to milliseconds (for probes).
#[inline]
fn ticks_to_ms(ticks: u64) -> f64 {
    (ticks << PSCHED_SHIFT) as f64 * 1e-6
}

/// A kernel probability as a fraction (values above `MAX_PROB`, which Linux can reach
/// after the 250-ms boost, read as 1).
#[inline]
pub fn prob_fraction(prob: u64) -> f64 {
    prob.min(MAX_PROB) as f64 / MAX_PROB as f64
}

/// A fraction as a kernel probability (tests and tools).
pub fn prob_from_fraction(p: f64) -> u64 {
    (p.clamp(0.0, 1.0) * MAX_PROB as f64) as u64
}

/// Controller parameters (`struct pie_params`), shared by `pie` and `fq_pie`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PieParams {
    /// Target queueing delay, psched ticks (tc gives µs; `PSCHED_NS2TICKS(us·1000)`).
    pub target_ticks: u64,
    /// Interval between probability updates.
    pub tupdate: Duration,
    /// alpha in tc units of 1/16 (2 ⇒ 0.125 Hz).
    pub alpha: u32,
    /// beta in tc units of 1/16 (20 ⇒ 1.25 Hz).
    pub beta: u32,
    pub ecn: bool,
    pub bytemode: bool,
    /// Little's-law delay from a drain-rate estimate instead of per-packet timestamps.
    pub dq_rate_estimator: bool,
    /// `psched_mtu` (1514): the small-queue threshold is `2·mtu` and bytemode scales by it.
    pub mtu_bytes: u32,
}

impl PieParams {
    /// Linux defaults (`pie_params_init`).
    pub fn linux_default(mtu_bytes: u32) -> PieParams {
        PieParams {
            target_ticks: ns_to_ticks(15_000_000),
            tupdate: Duration::from_ms(15),
            alpha: 2,
            beta: 20,
            ecn: false,
            bytemode: false,
            dq_rate_estimator: false,
            mtu_bytes,
        }
    }

    /// Reads the PIE parameters common to `pie` and `fq_pie` by their tc names.
    pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<PieParams> {
        Ok(PieControl::parse(p, ctx)?.params)
    }
}

/// The PIE controller settings as tc gives them: the target in whole µs (what tc sends)
/// and the kernel's `pie_params` derived from it. Shared by `pie` and `fq_pie` specs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PieControl {
    pub target_us: u64,
    pub params: PieParams,
}

impl PieControl {
    /// Reads `target`, `tupdate`, `alpha`, `beta`, `ecn`, `bytemode`, `dq_rate_estimator`.
    pub fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<PieControl> {
        let d = PieParams::linux_default(ctx.mtu_bytes);
        let target = p.duration("target", Duration::from_ms(15))?;
        // tc sends µs; 0 is not sent at all (the kernel keeps its default), so refuse it.
        let target_us = target.as_ns() / 1000;
        if target_us == 0 {
            return Err(p.err("target", "must be at least 1us (tc ignores 0)"));
        }
        if target_us > u32::MAX as u64 {
            return Err(p.err("target", "must fit tc's 32-bit microseconds"));
        }
        let tupdate = p.duration("tupdate", d.tupdate)?;
        if tupdate.is_zero() {
            return Err(p.err(
                "tupdate",
                "must be positive (with 0 Linux would update the probability only once)",
            ));
        }
        // iproute2 accepts 0..32 and does not send 0 (the kernel keeps 2 / 20).
        let alpha = p.u32("alpha", d.alpha, 1, 32)?;
        let beta = p.u32("beta", d.beta, 1, 32)?;
        let params = PieParams {
            target_ticks: ns_to_ticks(target_us * 1000),
            tupdate,
            alpha,
            beta,
            ecn: p.bool("ecn", d.ecn)?,
            bytemode: p.bool("bytemode", d.bytemode)?,
            dq_rate_estimator: p.bool("dq_rate_estimator", d.dq_rate_estimator)?,
            mtu_bytes: ctx.mtu_bytes,
        };
        Ok(PieControl { target_us, params })
    }

    /// `target T tupdate T alpha A beta B [ecn] [bytemode] [dq_rate_estimator]` (the
    /// kernel's defaults for the three switches are off, as `tc qdisc show` omits them).
    pub fn tc_args(&self, kind: &'static str, a: &mut Vec<String>) -> Result<(), NotLinux> {
        let p = &self.params;
        a.extend([
            "target".into(),
            tc_time(kind, "target", Duration::from_us(self.target_us))?,
            "tupdate".into(),
            tc_time(kind, "tupdate", p.tupdate)?,
            "alpha".into(),
            p.alpha.to_string(),
            "beta".into(),
            p.beta.to_string(),
        ]);
        for (on, word) in [
            (p.ecn, "ecn"),
            (p.bytemode, "bytemode"),
            (p.dq_rate_estimator, "dq_rate_estimator"),
        ] {
            if on {
                a.push(word.into());
            }
        }
        Ok(())
    }
}

/// tc keywords of the PIE controller (both `pie` and `fq_pie`).
macro_rules! pie_tc_keys {
    ($($extra:expr),* $(,)?) => {
        &[
            TcKey::Int("limit", "limit"),
            TcKey::Time("target", "target"),
            TcKey::Time("tupdate", "tupdate"),
            TcKey::Int("alpha", "alpha"),
            TcKey::Int("beta", "beta"),
            TcKey::Flag("ecn", "ecn", true),
            TcKey::Flag("noecn", "ecn", false),
            TcKey::Flag("bytemode", "bytemode", true),
            TcKey::Flag("nobytemode", "bytemode", false),
            TcKey::Flag("dq_rate_estimator", "dq_rate_estimator", true),
            TcKey::Flag("no_dq_rate_estimator", "dq_rate_estimator", false),
            $($extra),*
        ]
    };
}
pub(crate) use pie_tc_keys;

/// tc keywords of `pie`.
pub const TC_KEYS_PIE: &[TcKey] = pie_tc_keys!();

/// Typed spec of `pie`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PieSpec {
    /// `limit`, packets (1000).
    pub limit: u32,
    pub control: PieControl,
}

impl Discipline for PieSpec {
    const KIND: &'static str = "pie";
    const SUMMARY: &'static str =
        "PIE: PI-controlled early drop on queueing delay (RFC 8033, Linux sch_pie)";
    type Qdisc = Box<Pie>;

    /// `pie [limit P] [target T] [tupdate T] [alpha A] [beta B] [ecn] [bytemode]
    /// [dq_rate_estimator]`.
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let limit = p.u32("limit", 1000, 1, u32::MAX)?;
        let control = PieControl::parse(p, ctx)?;
        Ok(PieSpec { limit, control })
    }

    fn build(&self, ctx: &BuildCtx) -> Box<Pie> {
        Box::new(Pie::new(self.control.params.clone(), self.limit, ctx.rng()))
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS_PIE);

    /// `limit N target T tupdate T alpha A beta B [ecn] [bytemode] [dq_rate_estimator]`.
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        let mut a = vec!["limit".into(), self.limit.to_string()];
        self.control.tc_args("pie", &mut a)?;
        Ok(a)
    }
}

/// Controller state of one PIE queue (`struct pie_vars`); all times in psched ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieVars {
    /// Current queueing delay estimate.
    pub qdelay: u64,
    /// The estimate at the previous update.
    pub qdelay_old: u64,
    /// Remaining burst allowance (no early drops while > 0).
    pub burst_time: u64,
    /// Time of the last dequeue (timestamp mode) or start of the measurement cycle.
    pub dq_tstamp: u64,
    /// Drop probability, `MAX_PROB` ≙ 1.
    pub prob: u64,
    /// Probability accumulated since the last drop (de-randomisation).
    pub accu_prob: u64,
    /// Bytes dequeued in the current drain-rate cycle, or `DQCOUNT_INVALID`.
    pub dq_count: u64,
    /// Average drain rate, bytes per tick << `PIE_SCALE`.
    pub avg_dq_rate: u32,
    /// Backlog at the previous update (kept for parity with the kernel; unused).
    pub backlog_old: u32,
}

impl Default for PieVars {
    fn default() -> Self {
        PieVars::new()
    }
}

impl PieVars {
    /// A zeroed `pie_vars` after `pie_vars_init` (the kernel allocates it zeroed).
    pub fn new() -> PieVars {
        let mut v = PieVars {
            qdelay: 0,
            qdelay_old: 0,
            burst_time: 0,
            dq_tstamp: 0,
            prob: 0,
            accu_prob: 0,
            dq_count: 0,
            avg_dq_rate: 0,
            backlog_old: 0,
        };
        v.reinit();
        v
    }

    /// `pie_vars_init`: a fresh burst allowance and measurement cycle; `prob`, `qdelay`
    /// and `qdelay_old` are left as they are.
    #[inline]
    pub fn reinit(&mut self) {
        self.burst_time = BURST_ALLOWANCE_TICKS;
        self.dq_tstamp = DTIME_INVALID;
        self.accu_prob = 0;
        self.dq_count = DQCOUNT_INVALID;
        self.avg_dq_rate = 0;
    }

    /// `pie_drop_early`: should the arriving packet of `len_bytes` be dropped (or marked),
    /// given `backlog_bytes` already queued? RFC 8033 §4.1 and §5.1 (burst allowance),
    /// with Linux's always-on de-randomisation (RFC 8033 §5.4).
    #[inline]
    pub fn drop_early(
        &mut self,
        p: &PieParams,
        backlog_bytes: u32,
        len_bytes: u32,
        rng: &mut Rng,
    ) -> bool {
        // Burst allowance left: never drop early.
        if self.burst_time > 0 {
            return false;
        }
        // Low delay and low probability: don't bother (RFC 8033 §4.1 safeguard, on the
        // current qdelay as Linux does).
        if self.qdelay < p.target_ticks / 2 && self.prob < MAX_PROB / 5 {
            return false;
        }
        // Fewer than two MTU-sized packets queued (like RED's min_th).
        if backlog_bytes < 2 * p.mtu_bytes {
            return false;
        }
        // Bytemode: small packets see a proportionally smaller probability.
        let local_prob = if p.bytemode && len_bytes <= p.mtu_bytes {
            len_bytes as u64 * (self.prob / p.mtu_bytes as u64)
        } else {
            self.prob
        };
        // De-randomisation: never drop before 0.85 accumulated, always at 8.5.
        if local_prob == 0 {
            self.accu_prob = 0;
        } else {
            self.accu_prob = self.accu_prob.wrapping_add(local_prob);
        }
        if self.accu_prob < (MAX_PROB / 100) * 85 {
            return false;
        }
        if self.accu_prob >= (MAX_PROB / 2) * 17 {
            return true;
        }
        // 56-bit uniform draw against local_prob (kernel: 8 random bytes >> 8).
        if (rng.next_u64() >> 8) < local_prob {
            self.accu_prob = 0;
            return true;
        }
        false
    }

    /// `pie_process_dequeue`, after a packet of `len_bytes` enqueued at `enqueued_ticks`
    /// left at `now_ticks` with `backlog_bytes` still queued: updates the delay sample
    /// (timestamp mode) or the drain-rate estimate (RFC 8033 §5.3), and drains the burst
    /// allowance by the time elapsed between dequeues.
    #[inline]
    pub fn process_dequeue(
        &mut self,
        p: &PieParams,
        now_ticks: u64,
        enqueued_ticks: u64,
        len_bytes: u32,
        backlog_bytes: u32,
    ) {
        // The kernel keeps dtime in a u32 of ticks.
        let dtime: u32;
        if !p.dq_rate_estimator {
            // Timestamp mode: the sojourn of this packet is the delay sample; an emptied
            // queue reads as zero delay.
            self.qdelay = now_ticks.wrapping_sub(enqueued_ticks);
            dtime = if self.dq_tstamp != DTIME_INVALID {
                now_ticks.wrapping_sub(self.dq_tstamp) as u32
            } else {
                0
            };
            self.dq_tstamp = now_ticks;
            if backlog_bytes == 0 {
                self.qdelay = 0;
            }
            if dtime == 0 {
                return;
            }
        } else {
            // Start a measurement cycle once QUEUE_THRESHOLD bytes are queued.
            if backlog_bytes as u64 >= QUEUE_THRESHOLD && self.dq_count == DQCOUNT_INVALID {
                self.dq_tstamp = now_ticks;
                self.dq_count = 0;
            }
            if self.dq_count == DQCOUNT_INVALID {
                return;
            }
            self.dq_count += len_bytes as u64;
            if self.dq_count < QUEUE_THRESHOLD {
                return;
            }
            let count = (self.dq_count << PIE_SCALE) as u32;
            dtime = now_ticks.wrapping_sub(self.dq_tstamp) as u32;
            if dtime == 0 {
                return;
            }
            let rate = count / dtime;
            // EWMA with weight 1/8 (RFC 8033 §5.3 uses the same form).
            self.avg_dq_rate = if self.avg_dq_rate == 0 {
                rate
            } else {
                (self.avg_dq_rate - (self.avg_dq_rate >> 3)) + (rate >> 3)
            };
            if (backlog_bytes as u64) < QUEUE_THRESHOLD {
                self.dq_count = DQCOUNT_INVALID;
            } else {
                self.dq_count = 0;
                self.dq_tstamp = now_ticks;
            }
        }
        // Burst allowance drains by real time between dequeues (Linux), not per tupdate.
        if self.burst_time > 0 {
            self.burst_time = self.burst_time.saturating_sub(dtime as u64);
        }
    }

    /// `pie_calculate_probability`: one controller update (RFC 8033 §4.2 with Linux's
    /// additions), given the queue's current byte backlog.
    pub fn calculate_probability(&mut self, p: &PieParams, backlog_bytes: u32) {
        let qdelay: u64;
        let qdelay_old: u64;
        if p.dq_rate_estimator {
            // Little's law on the estimated drain rate (u32 arithmetic as in the kernel).
            qdelay_old = self.qdelay;
            self.qdelay_old = self.qdelay;
            // (0 while there is no estimate yet.)
            qdelay = (backlog_bytes << PIE_SCALE)
                .checked_div(self.avg_dq_rate)
                .unwrap_or(0) as u64;
        } else {
            qdelay = self.qdelay;
            qdelay_old = self.qdelay_old;
        }

        // A zero delay with a non-empty queue means a very small queue: no decay below.
        let mut update_prob = !(qdelay == 0 && backlog_bytes != 0);

        // alpha, beta from tc's 1/16 units to probability per tick of delay.
        let mut alpha = (p.alpha as u64 * (MAX_PROB / PSCHED_TICKS_PER_SEC)) >> 4;
        let mut beta = (p.beta as u64 * (MAX_PROB / PSCHED_TICKS_PER_SEC)) >> 4;

        // Auto-tuning (RFC 8033 §4.2 table): /2 below 10%, then /4 more per decade
        // below 1%, 0.1%, 0.01%, 0.001%, 0.0001%.
        if self.prob < MAX_PROB / 10 {
            alpha >>= 1;
            beta >>= 1;
            let mut power: u64 = 100;
            while self.prob < MAX_PROB / power && power <= 1_000_000 {
                alpha >>= 2;
                beta >>= 2;
                power *= 10;
            }
        }

        // delta in the kernel's s64 with u64 wrap-around semantics.
        let mut delta: i64 =
            (alpha as i64).wrapping_mul(qdelay.wrapping_sub(p.target_ticks) as i64);
        delta =
            delta.wrapping_add((beta as i64).wrapping_mul(qdelay.wrapping_sub(qdelay_old) as i64));

        let oldprob = self.prob;

        // Increase in steps of at most 2% once prob >= 10%.
        if delta > (MAX_PROB / 50) as i64 && self.prob >= MAX_PROB / 10 {
            delta = ((MAX_PROB / 100) * 2) as i64;
        }
        // Linux's non-linear boost for very high delays.
        if qdelay > NONLINEAR_DELAY_TICKS {
            delta = delta.wrapping_add((MAX_PROB / 50) as i64);
        }

        self.prob = self.prob.wrapping_add(delta as u64);
        if delta > 0 {
            // u64 overflow: saturate (note prob may legitimately exceed MAX_PROB before).
            if self.prob < oldprob {
                self.prob = MAX_PROB;
                update_prob = false;
            }
        } else if self.prob > oldprob {
            self.prob = 0;
        }

        // Two updates in a row with an empty queue: decay by 1/64 (RFC: ×0.98).
        if qdelay == 0 && qdelay_old == 0 && update_prob {
            self.prob -= self.prob / 64;
        }

        self.qdelay = qdelay;
        self.backlog_old = backlog_bytes;

        // Idle/low-delay with zero probability: restart (fresh burst allowance).
        if self.qdelay < p.target_ticks / 2
            && self.qdelay_old < p.target_ticks / 2
            && self.prob == 0
            && (!p.dq_rate_estimator || self.avg_dq_rate > 0)
        {
            self.reinit();
        }

        if !p.dq_rate_estimator {
            self.qdelay_old = qdelay;
        }
    }

    /// The lazy `tupdate` timer: runs every update due at or before `now` (the timer's
    /// instants are `*next_update`, `+tupdate`, …), with the queue's backlog, which cannot
    /// have changed since the last operation.
    #[inline]
    pub fn run_timer(
        &mut self,
        p: &PieParams,
        backlog_bytes: u32,
        next_update: &mut Time,
        now: Time,
    ) {
        if now >= *next_update {
            self.catch_up(p, backlog_bytes, next_update, now);
        }
    }

    #[inline(never)]
    fn catch_up(&mut self, p: &PieParams, backlog_bytes: u32, next_update: &mut Time, now: Time) {
        while *next_update <= now {
            if now - *next_update < p.tupdate {
                // The last due update: nothing to skip.
                self.calculate_probability(p, backlog_bytes);
                *next_update += p.tupdate;
                break;
            }
            let before = *self;
            self.calculate_probability(p, backlog_bytes);
            *next_update += p.tupdate;
            if *self == before {
                // A fixed point of the update (e.g. an idle queue at prob 0): the other
                // due updates would change nothing, so skip them.
                let behind = (now - *next_update).as_ns() / p.tupdate.as_ns() + 1;
                *next_update += p.tupdate * behind;
                break;
            }
        }
    }
}

/// `sch_pie`: a FIFO with a packet limit and PIE drops at enqueue.
#[derive(Debug)]
pub struct Pie {
    params: PieParams,
    /// Tail-drop limit, packets.
    limit: u32,
    vars: PieVars,
    /// When the next probability update is due (lazy timer).
    next_update: Time,
    queue: VecDeque<Packet>,
    backlog_bytes: u64,
    rng: Rng,
    ecn_marks: u64,
    /// Drops by PIE and by the limit (`stats.dropped`).
    pub dropped: u64,
    /// Drops by the packet limit (`stats.overlimit`).
    pub overlimit: u64,
}

impl Pie {
    /// A PIE created at time 0 (first update at 500 ms).
    pub fn new(params: PieParams, limit: u32, rng: Rng) -> Pie {
        Pie {
            params,
            limit,
            vars: PieVars::new(),
            next_update: Time::ZERO + FIRST_UPDATE,
            queue: VecDeque::new(),
            backlog_bytes: 0,
            rng,
            ecn_marks: 0,
            dropped: 0,
            overlimit: 0,
        }
    }

    /// `pie [limit P] [target T] [tupdate T] [alpha A] [beta B] [ecn] [bytemode]
    /// [dq_rate_estimator]`.
    pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Pie> {
        Ok(*PieSpec::parse(p, ctx)?.build(ctx))
    }

    pub fn params(&self) -> &PieParams {
        &self.params
    }
    pub fn limit(&self) -> u32 {
        self.limit
    }
    pub fn vars(&self) -> &PieVars {
        &self.vars
    }
    /// The current drop probability as a fraction (updates up to the last operation).
    pub fn prob(&self) -> f64 {
        prob_fraction(self.vars.prob)
    }

    #[inline]
    fn run_timer(&mut self, now: Time) {
        self.vars.run_timer(
            &self.params,
            self.backlog_bytes as u32,
            &mut self.next_update,
            now,
        );
    }
}

impl Qdisc for Pie {
    #[inline]
    fn enqueue(&mut self, mut pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        self.run_timer(now);
        if self.queue.len() as u64 >= self.limit as u64 {
            self.overlimit += 1;
            self.dropped += 1;
            self.vars.accu_prob = 0;
            drops.push(pkt, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        if self.vars.drop_early(
            &self.params,
            self.backlog_bytes as u32,
            pkt.len_bytes,
            &mut self.rng,
        ) {
            // Mark instead of drop only while prob <= 10% (Linux; RFC 8033 §5.1).
            if self.params.ecn && self.vars.prob <= MAX_PROB / 10 && pkt.set_ce() {
                self.ecn_marks += 1;
            } else {
                self.dropped += 1;
                self.vars.accu_prob = 0;
                drops.push(pkt, DropReason::Early);
                return Verdict::Dropped;
            }
        }
        self.backlog_bytes += pkt.len_bytes as u64;
        self.queue.push_back(pkt);
        Verdict::Queued
    }

    #[inline]
    fn dequeue(&mut self, now: Time, _drops: &mut Drops) -> Dequeue {
        self.run_timer(now);
        let Some(pkt) = self.queue.pop_front() else {
            return Dequeue::Empty;
        };
        self.backlog_bytes -= pkt.len_bytes as u64;
        self.vars.process_dequeue(
            &self.params,
            ns_to_ticks(now.as_ns()),
            ns_to_ticks(pkt.enqueued_at.as_ns()),
            pkt.len_bytes,
            self.backlog_bytes as u32,
        );
        Dequeue::Packet(pkt)
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
        self.run_timer(now);
        emit("prob", prob_fraction(self.vars.prob));
        emit("qdelay_ms", ticks_to_ms(self.vars.qdelay));
        emit("burst_ms", ticks_to_ms(self.vars.burst_time));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Ecn;
    use crate::qdisc::testkit::{check_conservation, pkt, Bound};

    const MTU: u32 = 1514;

    fn params() -> PieParams {
        PieParams::linux_default(MTU)
    }

    fn ms_ticks(ms: u64) -> u64 {
        ns_to_ticks(ms * 1_000_000)
    }

    /// What one update changes `prob` by, as a fraction, from state (prob, qdelay, qdelay_old).
    fn one_update(p: &PieParams, prob: f64, qdelay_ms: u64, qdelay_old_ms: u64) -> f64 {
        let mut v = PieVars::new();
        v.prob = prob_from_fraction(prob);
        v.qdelay = ms_ticks(qdelay_ms);
        v.qdelay_old = ms_ticks(qdelay_old_ms);
        let before = v.prob;
        v.calculate_probability(p, 100_000);
        (v.prob as f64 - before as f64) / MAX_PROB as f64
    }

    #[test]
    fn autoscaling_follows_rfc8033_table() {
        // RFC 8033 §4.2: alpha and beta are divided by 1, 2, 8, 32, 128, 512, 2048 when p
        // is >= 10%, in [1%,10%), [0.1%,1%), [0.01%,0.1%), [1e-5,1e-4), [1e-6,1e-5), < 1e-6.
        // With qdelay = qdelay_old = target + 10 ms, delta = alpha/div · 0.010 s and
        // alpha = 2/16 = 0.125 Hz.
        let p = params();
        let cases = [
            (0.5, 1.0),
            (0.05, 2.0),
            (0.005, 8.0),
            (0.0005, 32.0),
            (0.00005, 128.0),
            (0.000005, 512.0),
            (0.0000005, 2048.0),
        ];
        for (prob, div) in cases {
            let d = one_update(&p, prob, 25, 25);
            let want = 0.125 * 0.010 / div;
            assert!(
                (d - want).abs() <= want * 1e-3,
                "prob {prob}: delta {d}, RFC table says {want}"
            );
        }
        // beta acts on the change of delay: +4 ms at p >= 10% gives 1.25 · 0.004 = 0.005
        // on top of alpha · (qdelay − target) = 0.125 · 0.004.
        let d = one_update(&p, 0.5, 19, 15);
        let want = 0.125 * 0.004 + 1.25 * 0.004;
        assert!((d - want).abs() < want * 1e-3, "{d} vs {want}");
        // beta is scaled by the same table as alpha (RFC 8033 §4.2: both terms of the
        // update are divided): (0.125 + 1.25) · 0.004 = 0.0055, halved to 0.00275 in
        // [1%, 10%) and divided by 8 to 0.0006875 in [0.1%, 1%).
        for (prob, want) in [(0.05, 0.00275), (0.005, 0.000_687_5)] {
            let d = one_update(&p, prob, 19, 15);
            assert!((d - want).abs() < want * 1e-3, "prob {prob}: {d} vs {want}");
        }
        // Below target the probability falls: alpha · (10 − 15) ms.
        let d = one_update(&p, 0.5, 10, 10);
        assert!((d + 0.125 * 0.005).abs() < 1e-6, "{d}");
    }

    #[test]
    fn step_cap_and_high_delay_boost() {
        let p = params();
        // alpha · (200 − 15) ms = 0.023 > 2% with prob >= 10%: capped at 2%.
        let d = one_update(&p, 0.5, 200, 200);
        assert!((d - 0.02).abs() < 1e-9, "{d}");
        // Below 10% the cap does not apply: 0.023 / 2 = 0.0116.
        let d = one_update(&p, 0.09, 200, 200);
        assert!((d - 0.023125 / 2.0).abs() < 1e-5, "{d}");
        // Above 250 ms Linux adds another 2%.
        let d = one_update(&p, 0.5, 300, 300);
        assert!((d - 0.04).abs() < 1e-9, "{d}");
    }

    #[test]
    fn idle_queue_decays_prob_by_one_64th() {
        // Linux: with qdelay = qdelay_old = 0 the probability, after the (negative)
        // alpha step for delay 0, loses prob/64 per update.
        let p = params();
        let mut v = PieVars::new();
        v.prob = prob_from_fraction(0.5);
        let mut want = 0.5;
        for _ in 0..10 {
            v.calculate_probability(&p, 0);
            want = (want - 0.125 * 0.015) * (63.0 / 64.0);
            assert!((prob_fraction(v.prob) - want).abs() < 1e-9);
        }
        // A queue that is not empty but reads zero delay does not decay (update_prob).
        let mut v = PieVars::new();
        v.prob = prob_from_fraction(0.5);
        v.calculate_probability(&p, 3000);
        assert!((prob_fraction(v.prob) - (0.5 - 0.125 * 0.015)).abs() < 1e-9);
    }

    #[test]
    fn derandomisation_bounds_drop_spacing() {
        // RFC 8033 §5.4 / Linux: accu_prob sums prob per arrival since the last drop; no
        // drop while it is < 0.85, a certain drop once it reaches 8.5. With p = 0.03 the
        // gap g between drops satisfies g·p >= 0.85 and (g−1)·p < 8.5, i.e. 29 <= g <= 284.
        let p = params();
        let mut v = PieVars::new();
        v.burst_time = 0;
        v.qdelay = ms_ticks(20);
        v.prob = prob_from_fraction(0.03);
        let mut rng = Rng::from_seed(3);
        let (mut last, mut drops, mut gmin, mut gmax) = (0u64, 0, u64::MAX, 0);
        for i in 1..=300_000u64 {
            if v.drop_early(&p, 100_000, 1000, &mut rng) {
                v.accu_prob = 0; // the enqueue path resets it on a drop
                let g = i - last;
                gmin = gmin.min(g);
                gmax = gmax.max(g);
                last = i;
                drops += 1;
            }
        }
        assert!(gmin >= 29, "gap {gmin} < 0.85/p");
        assert!(gmax <= 284, "gap {gmax} > 8.5/p");
        // Mean gap: 0.85/p (29 arrivals) plus a geometric wait of mean 1/p ≈ 33: ~62.
        let mean_gap = 300_000.0 / drops as f64;
        assert!((55.0..70.0).contains(&mean_gap), "{mean_gap}");
    }

    #[test]
    fn drop_early_exemptions() {
        let p = params();
        let mut rng = Rng::from_seed(1);
        let mut v = PieVars::new();
        v.prob = prob_from_fraction(0.9);
        v.qdelay = ms_ticks(100);
        v.accu_prob = (MAX_PROB / 2) * 17; // would force a drop
        assert!(
            !v.drop_early(&p, 100_000, 1000, &mut rng),
            "burst allowance"
        );
        v.burst_time = 0;
        assert!(v.drop_early(&p, 100_000, 1000, &mut rng));
        assert!(
            !v.drop_early(&p, 2 * MTU - 1, 1000, &mut rng),
            "backlog < 2 mtu"
        );
        assert!(v.drop_early(&p, 2 * MTU, 1000, &mut rng));
        // Low delay (< target/2) and prob < 20%: no drop; prob >= 20% still drops.
        v.qdelay = ms_ticks(7);
        v.prob = prob_from_fraction(0.19);
        assert!(!v.drop_early(&p, 100_000, 1000, &mut rng));
        v.prob = prob_from_fraction(0.21);
        assert!(v.drop_early(&p, 100_000, 1000, &mut rng));
        // Exactly target/2 (7.5 ms = 117_187 ticks of 64 ns) is not "low delay": the
        // kernel's test is strict (`qdelay < target / 2`).
        v.qdelay = 117_187;
        v.prob = prob_from_fraction(0.19);
        assert!(v.drop_early(&p, 100_000, 1000, &mut rng));
        v.qdelay = 117_186;
        assert!(!v.drop_early(&p, 100_000, 1000, &mut rng));
        // ... and exactly 20 % is not "low probability" either (`prob < MAX_PROB / 5`).
        v.prob = MAX_PROB / 5;
        assert!(v.drop_early(&p, 100_000, 1000, &mut rng));
    }

    #[test]
    fn bytemode_scales_by_size() {
        let mut p = params();
        p.bytemode = true;
        let mut v = PieVars::new();
        v.burst_time = 0;
        v.qdelay = ms_ticks(20);
        v.prob = prob_from_fraction(0.3);
        let mut rng = Rng::from_seed(1);
        v.drop_early(&p, 100_000, 151, &mut rng);
        let want = 0.3 * 151.0 / 1514.0;
        assert!((prob_fraction(v.accu_prob) - want).abs() < 1e-9);
        // Packets larger than the MTU use the plain probability.
        v.accu_prob = 0;
        v.drop_early(&p, 100_000, 3000, &mut rng);
        assert!((prob_fraction(v.accu_prob) - 0.3).abs() < 1e-9);
    }

    /// Result of a constant-rate run.
    #[derive(Default)]
    struct Run {
        arrivals: u64,
        early: Vec<Time>,
        overlimit: u64,
        /// (departure time, sojourn)
        sojourns: Vec<(Time, Duration)>,
        /// (time, prob, qdelay ms) sampled at every update
        samples: Vec<(Time, f64, f64)>,
    }

    /// Arrivals of 1514-B packets every `interarrival` from `start` to `end`, served by a
    /// link that sends one packet per `service`.
    fn drive<Q: Qdisc>(
        q: &mut Q,
        start: Time,
        end: Time,
        interarrival: Duration,
        service: Duration,
        ecn: bool,
    ) -> Run {
        let mut r = Run::default();
        let mut d = Drops::new();
        let mut t_arr = start;
        let mut link_free = start;
        // Samples right after each update instant (500 ms + k·15 ms).
        let mut next_sample = Time::ZERO + FIRST_UPDATE;
        while next_sample < start {
            next_sample += Duration::from_ms(15);
        }
        let mut uid = 0;
        let mut bound = Bound::new(10_000_000, "event loop until end");
        loop {
            bound.tick();
            let dequeue_next = q.len_packets() > 0 && link_free <= t_arr;
            let now = if dequeue_next { link_free } else { t_arr };
            if now >= end {
                break;
            }
            while next_sample <= now {
                let (mut pr, mut qd) = (0.0, 0.0);
                q.observe(next_sample, &mut |k, x| match k {
                    "prob" | "prob_max" => pr = x,
                    "qdelay_ms" => qd = x,
                    _ => {}
                });
                r.samples.push((next_sample, pr, qd));
                next_sample += Duration::from_ms(15);
            }
            if dequeue_next {
                let p = q.dequeue(now, &mut d).packet().expect("packet");
                r.sojourns.push((now, now - p.enqueued_at));
                link_free = now + service;
            } else {
                let mut p = pkt(uid, 1, 1514);
                uid += 1;
                if ecn {
                    p.ecn = Ecn::Ect0;
                }
                p.enqueued_at = now;
                r.arrivals += 1;
                q.enqueue(p, now, &mut d);
                link_free = link_free.max(now);
                t_arr += interarrival;
            }
            for x in d.drain() {
                match x.reason {
                    DropReason::Early => r.early.push(now),
                    DropReason::Overlimit => r.overlimit += 1,
                    other => panic!("unexpected drop reason {other:?}"),
                }
            }
        }
        r
    }

    fn pie_with(params: PieParams) -> Pie {
        Pie::new(params, 1000, Rng::from_seed(7))
    }

    /// 10 Mbit/s: one 1514-B frame per 1.2112 ms.
    const SERVICE: Duration = Duration(1_211_200);

    #[test]
    fn burst_allowance_delays_first_drop_by_150ms_of_dequeues() {
        // Overload starts at 1 s (the 500-ms first update is long past and the idle
        // controller sits at prob 0 with a fresh allowance). Arrivals at twice the
        // service rate: the queue and the delay grow without bound, so PIE must drop —
        // but not before 150 ms of dequeueing have drained the allowance (RFC 8033 §5.1,
        // Linux drains it by the time between dequeues).
        let mut q = pie_with(params());
        let t0 = Time(1_000_000_000);
        let r = drive(
            &mut q,
            t0,
            t0 + Duration::from_secs(3),
            Duration(SERVICE.0 / 2),
            SERVICE,
            false,
        );
        let first = *r
            .early
            .first()
            .expect("PIE never dropped under 2x overload");
        assert!(
            first >= t0 + Duration::from_ms(150),
            "first early drop {first} within the burst allowance"
        );
        assert!(
            first < t0 + Duration::from_secs(1),
            "first drop only at {first}"
        );
        // The allowance drained while dequeueing (not per tupdate): observable as 0.
        let mut burst = f64::NAN;
        q.observe(t0 + Duration::from_secs(3), &mut |k, x| {
            if k == "burst_ms" {
                burst = x
            }
        });
        assert_eq!(burst, 0.0);
    }

    #[test]
    fn burst_drains_by_dequeue_gaps_not_by_updates() {
        // With no dequeues, updates alone never spend the allowance.
        let p = params();
        let mut v = PieVars::new();
        v.qdelay = ms_ticks(30);
        v.qdelay_old = ms_ticks(30);
        for _ in 0..100 {
            v.calculate_probability(&p, 100_000);
        }
        assert_eq!(v.burst_time, BURST_ALLOWANCE_TICKS);
        assert!(v.prob > 0, "Linux keeps updating prob during the allowance");
        // Dequeues 10 ms apart spend exactly 10 ms each (the first only sets dq_tstamp).
        for k in 0..5u64 {
            let now = ms_ticks(1000 + 10 * k);
            v.process_dequeue(&p, now, now - ms_ticks(30), 1514, 50_000);
        }
        assert_eq!(v.burst_time, BURST_ALLOWANCE_TICKS - 4 * ms_ticks(10));
    }

    #[test]
    fn ecn_marks_below_10_percent_and_drops_above() {
        let mut p = params();
        p.ecn = true;
        for (prob, expect_marks) in [
            (MAX_PROB / 20, true),
            (MAX_PROB / 10, true),
            (MAX_PROB / 10 + 1, false),
            (MAX_PROB / 5, false),
        ] {
            let mut q = pie_with(p.clone());
            let mut d = Drops::new();
            // Fill 20 packets before the first update (t < 500 ms): no AQM state yet.
            for i in 0..20 {
                let mut x = pkt(i, 1, 1514);
                x.ecn = Ecn::Ect0;
                q.enqueue(x, Time(0), &mut d);
            }
            q.vars.burst_time = 0;
            q.vars.qdelay = ms_ticks(20);
            q.vars.prob = prob;
            let (mut ect_drops, mut notect_drops) = (0, 0);
            for i in 0..4000u64 {
                let mut x = pkt(100 + i, 1, 1514);
                if i % 2 == 0 {
                    x.ecn = Ecn::Ect0;
                }
                match q.enqueue(x, Time(1000), &mut d) {
                    Verdict::Dropped if i % 2 == 0 => ect_drops += 1,
                    Verdict::Dropped => notect_drops += 1,
                    _ => {
                        q.queue.pop_back(); // keep the backlog constant
                        q.backlog_bytes -= 1514;
                    }
                }
            }
            assert!(notect_drops > 0, "Not-ECT packets are always dropped");
            if expect_marks {
                assert!(q.ecn_marks() > 0);
                assert_eq!(ect_drops, 0, "prob {prob} <= 10%: ECT packets are marked");
            } else {
                assert_eq!(q.ecn_marks(), 0, "prob {prob} > 10%: no marks");
                assert!(ect_drops > 0);
            }
        }
    }

    #[test]
    fn controller_tracks_target_under_constant_overload() {
        // Open-loop arrivals at r = 1.25·C. Once PIE settles, what it accepts must
        // match the service rate (no tail drops: the queue is bounded), so the drop
        // fraction tends to 1 − C/r = 0.2; and the integral term alpha·(qdelay − target)
        // can only be at rest when the delay averages the target (15 ms).
        let mut q = pie_with(params());
        let ia = Duration(SERVICE.0 * 4 / 5);
        let end = Time::ZERO + Duration::from_secs(60);
        let r = drive(&mut q, Time::ZERO, end, ia, SERVICE, false);
        assert_eq!(
            r.overlimit, 0,
            "PIE should keep the queue far from 1000 packets"
        );
        let late = Time::ZERO + Duration::from_secs(20);
        let arrivals_late = (end - late).as_ns() / ia.as_ns();
        let drops_late = r.early.iter().filter(|t| **t >= late).count() as f64;
        let frac = drops_late / arrivals_late as f64;
        assert!((frac - 0.2).abs() < 0.005, "drop fraction {frac}");
        let late_soj: Vec<f64> = r
            .sojourns
            .iter()
            .filter(|(t, _)| *t >= late)
            .map(|(_, s)| s.as_millis_f64())
            .collect();
        let mean = late_soj.iter().sum::<f64>() / late_soj.len() as f64;
        assert!(
            (12.0..18.0).contains(&mean),
            "mean sojourn {mean} ms vs target 15"
        );
        // Direction (RFC 8033 §4.2): samples are taken right after each update, so
        // consecutive samples hold (qdelay_old, qdelay). With the delay above target and
        // not falling both terms are >= 0 and one > 0: prob must rise; below target and
        // not rising it must fall (or stay at 0).
        let mut checked = 0;
        for w in r.samples.windows(2) {
            let ((_, p0, d0), (_, p1, d1)) = (w[0], w[1]);
            if d1 > 15.0 && d1 >= d0 && p0 < 1.0 {
                assert!(
                    p1 > p0,
                    "delay {d0}->{d1} ms above target but prob {p0}->{p1}"
                );
                checked += 1;
            }
            if d1 < 15.0 && d1 <= d0 {
                assert!(
                    p1 < p0 || p1 == 0.0,
                    "delay {d0}->{d1} ms but prob {p0}->{p1}"
                );
                checked += 1;
            }
        }
        assert!(checked > 1000, "{checked}");
    }

    #[test]
    fn rate_estimator_measures_the_drain_rate() {
        // dq_rate_estimator: qdelay = backlog / avg_dq_rate (Little's law). A standing
        // queue of 40 packets drained at 1 Gbit/s (one 1514-B frame per 12.112 us) must
        // read about 40 · 12.112 us = 484.5 us. (At 1 Gbit/s the kernel's rate unit,
        // 1/256 B per 64-ns tick, is 0.05% of the rate; at 10 Mbit/s it is 5% and the
        // integer EWMA has a dead band of ±8 units, see docs/disciplines/pie.md.)
        let service = Duration(12_112);
        let mut p = params();
        p.dq_rate_estimator = true;
        // Target 600 us: above the delay, so prob stays 0 and nothing is dropped (the
        // backlog stays 40 packets), yet the delay is above target/2, so the estimate is
        // not wiped by a re-init (Linux re-inits, clearing avg_dq_rate, when
        // qdelay < target/2 and prob == 0).
        p.target_ticks = ns_to_ticks(600_000);
        let mut q = pie_with(p);
        let mut d = Drops::new();
        let mut uid = 0;
        let mut now = Time(1_000_000_000);
        for _ in 0..40 {
            let mut x = pkt(uid, 1, 1514);
            uid += 1;
            x.enqueued_at = now;
            q.enqueue(x, now, &mut d);
        }
        for _ in 0..20_000 {
            // One departure and one arrival per service time: backlog stays 40 packets.
            q.dequeue(now, &mut d).packet().unwrap();
            let mut x = pkt(uid, 1, 1514);
            uid += 1;
            x.enqueued_at = now;
            q.enqueue(x, now, &mut d);
            now += service;
        }
        assert_eq!(d.len(), 0);
        let rate = q.vars.avg_dq_rate as f64 / 256.0 * PSCHED_TICKS_PER_SEC as f64 * 8.0;
        assert!(
            (rate / 1e9 - 1.0).abs() < 0.01,
            "estimated rate {rate} bit/s"
        );
        let mut qd = 0.0;
        q.observe(now, &mut |k, x| {
            if k == "qdelay_ms" {
                qd = x
            }
        });
        assert!(
            (qd / 0.48448 - 1.0).abs() < 0.01,
            "Little's-law delay {qd} ms"
        );
    }

    /// Linux `pie_process_dequeue` with dq_rate_estimator: a cycle starts when 16 KiB are
    /// queued and completes once `dq_count >= QUEUE_THRESHOLD` (16384 B), here at the
    /// 16th dequeue of 1024 B, 15 000 ticks after the first: rate = 16384 · 256 / 15000
    /// = 279 (1/256 B per tick). With 4 KiB left (< 16 KiB) the cycle stops (dq_count
    /// reads -1) instead of restarting.
    #[test]
    fn rate_measurement_completes_at_exactly_16_kib_and_stops_below_it() {
        let mut p = params();
        p.dq_rate_estimator = true;
        let mut v = PieVars::new();
        let mut backlog: u32 = 20_480;
        let mut t = 1_000_000u64;
        for i in 1..=16 {
            backlog -= 1024;
            v.process_dequeue(&p, t, 0, 1024, backlog);
            if i < 16 {
                assert_eq!(v.avg_dq_rate, 0, "no estimate after {i} KiB");
                assert_eq!(v.dq_count, 1024 * i);
            }
            t += 1000;
        }
        assert_eq!(v.avg_dq_rate, 279);
        assert_eq!(backlog, 4096);
        assert_eq!(v.dq_count, u64::MAX, "below 16 KiB queued: no new cycle");
    }

    /// The auto-tuning thresholds are strict (Linux `prob < MAX_PROB / 10`, then
    /// `prob < MAX_PROB / power`): at exactly 10% alpha is not halved, at exactly 1% it is
    /// halved but not quartered. With qdelay = qdelay_old = target + 1000 ticks only the
    /// alpha term acts: alpha = 2 · ⌊(2^56 − 1)/15 625 000⌋ >> 4 = 576 460 752 per tick.
    #[test]
    fn autoscaling_thresholds_are_strict() {
        let p = params();
        let step = |prob: u64| {
            let mut v = PieVars::new();
            v.prob = prob;
            v.qdelay = p.target_ticks + 1000;
            v.qdelay_old = p.target_ticks + 1000;
            v.calculate_probability(&p, 100_000);
            v.prob - prob
        };
        let ten_percent = 7_205_759_403_792_793; // (2^56 − 1) / 10
        let one_percent = 720_575_940_379_279; // (2^56 − 1) / 100
        assert_eq!(step(ten_percent), 576_460_752_000);
        assert_eq!(step(ten_percent - 1), 288_230_376_000);
        assert_eq!(step(one_percent), 288_230_376_000);
        assert_eq!(step(one_percent - 1), 72_057_594_000);
    }

    /// Linux re-initialises (a fresh 150-ms burst allowance: 2 343 750 ticks) only when
    /// both qdelay and qdelay_old are strictly below target/2 (117 187 ticks) with prob 0,
    /// and, with dq_rate_estimator, only once a drain rate has been measured.
    #[test]
    fn reinit_needs_both_delays_strictly_below_half_target() {
        let p = params();
        let burst_after = |qdelay: u64, qdelay_old: u64| {
            let mut v = PieVars::new();
            v.burst_time = 0;
            v.qdelay = qdelay;
            v.qdelay_old = qdelay_old;
            v.calculate_probability(&p, 10_000);
            assert_eq!(v.prob, 0);
            v.burst_time
        };
        assert_eq!(burst_after(117_186, 117_186), 2_343_750);
        assert_eq!(burst_after(117_187, 117_186), 0);
        assert_eq!(burst_after(117_186, 117_187), 0);
        let mut p = params();
        p.dq_rate_estimator = true;
        for (rate, burst) in [(0, 0), (279, 2_343_750)] {
            let mut v = PieVars::new();
            v.burst_time = 0;
            v.avg_dq_rate = rate;
            v.calculate_probability(&p, 0); // empty queue: qdelay 0
            assert_eq!(v.burst_time, burst, "avg_dq_rate {rate}");
        }
    }

    /// sch_pie tail-drops at `limit` packets and counts the drop twice in its stats: in
    /// `dropped` and in `overlimit` (what `tc -s` shows as "overlimits").
    #[test]
    fn tail_drop_at_limit_counts_overlimit() {
        let mut q = Pie::new(params(), 2, Rng::from_seed(7));
        let mut d = Drops::new();
        for uid in 0..5 {
            q.enqueue(pkt(uid, 1, 1000), Time::ZERO, &mut d);
        }
        assert_eq!(q.len_packets(), 2);
        assert_eq!((q.dropped, q.overlimit), (3, 3));
        assert_eq!(d.len(), 3);
        assert_eq!(
            q.prob(),
            0.0,
            "drop probability starts at 0 (RFC 8033 §4.2)"
        );
    }

    #[test]
    fn idle_queue_reinitialises() {
        // After an overload, once the queue has been empty for a while prob decays to 0
        // and the vars are re-initialised: a fresh 150-ms burst allowance.
        let mut q = pie_with(params());
        let t0 = Time(1_000_000_000);
        drive(
            &mut q,
            t0,
            t0 + Duration::from_secs(2),
            Duration(SERVICE.0 / 2),
            SERVICE,
            false,
        );
        assert!(q.prob() > 0.1);
        assert_eq!(q.vars.burst_time, 0);
        // Drain, then stay idle for 20 s.
        let mut d = Drops::new();
        let mut now = t0 + Duration::from_secs(2);
        let mut bound = Bound::new(100_000, "drain");
        while q.dequeue(now, &mut d).packet().is_some() {
            bound.tick();
            now += SERVICE;
        }
        let mut out = vec![];
        q.observe(now + Duration::from_secs(20), &mut |k, x| {
            out.push((k.to_string(), x))
        });
        assert_eq!(out[0], ("prob".into(), 0.0));
        assert_eq!(
            out[2],
            ("burst_ms".into(), ticks_to_ms(BURST_ALLOWANCE_TICKS))
        );
    }

    #[test]
    fn lazy_timer_equals_eager_timer() {
        // Running the updates only when an operation comes must give exactly what a
        // timer firing at every tupdate gives. The "eager" copy is observed at every
        // update instant (observe runs due updates).
        let p = params();
        let mut lazy = pie_with(p.clone());
        let mut eager = pie_with(p);
        let mut rng = Rng::from_seed(11);
        let (mut dl, mut de) = (Drops::new(), Drops::new());
        let mut now = Time::ZERO;
        let mut next_tick = Time::ZERO + FIRST_UPDATE;
        for uid in 0..60_000u64 {
            now += Duration(rng.below(2_000_000));
            while next_tick <= now {
                eager.observe(next_tick, &mut |_, _| {});
                next_tick += Duration::from_ms(15);
            }
            if rng.chance(0.55) {
                let mut x = pkt(uid, 1, 200 + rng.below(1315) as u32);
                x.enqueued_at = now;
                let a = lazy.enqueue(x, now, &mut dl);
                let b = eager.enqueue(x, now, &mut de);
                assert_eq!(a, b);
            } else {
                let a = lazy.dequeue(now, &mut dl).packet().map(|x| x.uid);
                let b = eager.dequeue(now, &mut de).packet().map(|x| x.uid);
                assert_eq!(a, b);
            }
            assert_eq!(lazy.vars, eager.vars);
        }
        assert_eq!(dl.len(), de.len());
        assert!(dl.len() > 100, "the test should exercise drops");
    }

    #[test]
    fn pie_conservation_property() {
        for mode in 0..4 {
            for seed in 0..8 {
                let mut p = params();
                p.target_ticks = ms_ticks(1);
                match mode {
                    1 => p.dq_rate_estimator = true,
                    2 => p.bytemode = true,
                    3 => p.ecn = true,
                    _ => {}
                }
                let mut q = Pie::new(p, 60, Rng::from_seed(seed));
                check_conservation(&mut q, seed, 6_000, |q| q.len_packets() <= 60);
            }
        }
    }

    #[test]
    fn registry_defaults_follow_linux() {
        use crate::params::{Table, Value};
        let q = crate::qdisc::build(&Value::Str("pie".into()), "q", &BuildCtx::default()).unwrap();
        let crate::qdisc::AnyQdisc::Pie(q) = q else {
            panic!()
        };
        assert_eq!(q.limit(), 1000);
        let p = q.params();
        assert_eq!(p.target_ticks, 234_375, "15 ms in 64-ns ticks");
        assert_eq!(p.tupdate, Duration::from_ms(15));
        assert_eq!((p.alpha, p.beta), (2, 20));
        assert!(!p.ecn && !p.bytemode && !p.dq_rate_estimator);
        let t = Table(vec![
            ("kind".into(), Value::Str("pie".into())),
            ("alpha".into(), Value::Int(33)),
        ]);
        let e = crate::qdisc::build(&Value::Table(t), "q", &BuildCtx::default())
            .err()
            .unwrap();
        assert_eq!(e.path, "q.alpha");
        // ns-2 era settings from seed 002 are plain parameters.
        let t = Table(vec![
            ("kind".into(), Value::Str("pie".into())),
            ("target".into(), Value::Str("20ms".into())),
            ("tupdate".into(), Value::Str("30ms".into())),
        ]);
        assert!(crate::qdisc::build(&Value::Table(t), "q", &BuildCtx::default()).is_ok());
        // tc sends target as a u32 of microseconds: 4294 s fits (2^32 − 1 µs = 4294.97 s),
        // 4295 s does not.
        for (target, ok) in [("4294s", true), ("4295s", false)] {
            let t = Table(vec![
                ("kind".into(), Value::Str("pie".into())),
                ("target".into(), Value::Str(target.into())),
            ]);
            let r = crate::qdisc::build(&Value::Table(t), "q", &BuildCtx::default());
            assert_eq!(r.is_ok(), ok, "target {target}");
            if let Err(e) = r {
                assert_eq!(e.path, "q.target");
            }
        }
    }
}
