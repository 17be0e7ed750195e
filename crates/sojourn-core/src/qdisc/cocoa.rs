//! `cocoa`: CoCoA / TRAQ, "Congestion Control Aware" queueing (seed 003; the public
//! `sch_cocoa` module, CN-TU/cocoa-qdisc). It is Linux fq with the fixed per-flow packet
//! limit replaced by a limit each flow *learns*:
//!
//! - It measures, per flow, the **standing queue** (the smallest flow queue length seen right
//!   after a dequeue) over loss-free intervals, and the time the flow's queue was **idle**.
//! - Everything happens at enqueue, and only when the flow's queue is full
//!   (`qlen >= flow_max_qlen`). Losses delimit *intervals*; a *guard interval* (GI) lasts at
//!   least `guard_interval` (multiplier) x the previous *longest interval* (LI), at most
//!   `max_monitoring_interval`, and ends at the first loss after that.
//! - At the end of a GI the limit shrinks by the LI's standing queue and that many of the
//!   newest packets are dropped; a full queue after idle time grows the limit by the packets
//!   the idle time could have carried (at most x `max_increase`).
//!
//! The fq scheduler is reused unchanged ([`FqSched`] with [`CocoaPolicy`] as its
//! [`FlowPolicy`]). The seed's bugs are fixed deliberately (see docs/disciplines/cocoa.md);
//! `literal = true` reproduces the seed where its behaviour is defined.

use super::fq::{Admit, FlowPolicy, FqConfig, FqSched};
use super::{BuildCtx, DropReason};
use crate::params::{ConfResult, Params, Value};
use crate::time::{Duration, Time};
use crate::units;

/// `min_queue_length` of an interval without any dequeue (the seed's `ULONG_MAX`).
pub const NO_SAMPLE: u64 = u64::MAX;

/// CoCoA's own parameters (tc names in the doc comments).
#[derive(Clone, Debug, PartialEq)]
pub struct CocoaParams {
    /// `flow_limit`: the initial learned limit of every new flow, packets.
    pub flow_limit: u32,
    /// `guard_interval`: the GI multiplier (1.25).
    pub multiplier: f64,
    /// `max_increase`: an enlargement at most multiplies the limit by this (2.0).
    pub max_increase: f64,
    /// `max_monitoring_interval`: the longest GI (1 s).
    pub max_gi: Duration,
    /// Reproduce the seed's arithmetic where it differs from the fixed version.
    pub literal: bool,
}

impl Default for CocoaParams {
    fn default() -> Self {
        CocoaParams {
            flow_limit: 100,
            multiplier: 1.25,
            max_increase: 2.0,
            max_gi: Duration::from_secs(1),
            literal: false,
        }
    }
}

/// One measurement interval (`struct interval_info`), times in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Time this flow's queue was empty during the interval.
    pub idle_ns: u64,
    /// Smallest flow qlen right after a dequeue; [`NO_SAMPLE`] if none.
    pub min_queue_length: u64,
    pub packets_transmitted: u64,
}

impl Interval {
    /// `cocoa_initialize_interval`.
    fn fresh(now_ns: u64) -> Interval {
        Interval {
            start_ns: now_ns,
            end_ns: now_ns,
            idle_ns: 0,
            min_queue_length: NO_SAMPLE,
            packets_transmitted: 0,
        }
    }
    fn length_ns(&self) -> u64 {
        self.end_ns.wrapping_sub(self.start_ns)
    }
}

/// Per-flow CoCoA state.
#[derive(Clone, Debug)]
pub struct CocoaFlow {
    /// The learned limit (`flow_max_qlen`, a C `int` in the seed).
    pub flow_max_qlen: i32,
    pub current: Interval,
    /// The longest loss-free interval of the running GI (LI).
    pub longest: Interval,
    /// The guard interval (`monitoring_period_start/end_ns`); start == end means "not set".
    pub gi_start_ns: u64,
    pub gi_end_ns: u64,
    pub idle: bool,
    pub became_idle_ns: u64,
    /// The limit was enlarged in the current interval.
    pub enlarge: bool,
}

impl CocoaFlow {
    /// `cocoa_copy_longest_interval_if_needed`: the LI is the longest closed interval.
    fn update_longest(&mut self) {
        if self.current.length_ns() >= self.longest.length_ns() {
            self.longest = self.current;
        }
    }
}

/// Counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CocoaStats {
    pub enlargements: u64,
    pub gi_starts: u64,
    pub shrinks: u64,
    pub standing_queue_drops: u64,
}

/// CoCoA's admission policy plugged into the fq scheduler.
#[derive(Clone, Debug)]
pub struct CocoaPolicy {
    pub params: CocoaParams,
    pub stats: CocoaStats,
}

/// `kind = "cocoa"`.
pub type Cocoa = FqSched<CocoaPolicy>;

impl CocoaPolicy {
    /// `cocoa_initialize_monitoring_interval` + `cocoa_compute_and_set_new_monitoring_interval`:
    /// a new GI from now, `min(max_gi, LI length x multiplier)` long.
    fn start_gi(&mut self, st: &mut CocoaFlow, now_ns: u64) {
        st.gi_start_ns = now_ns;
        st.became_idle_ns = 0;
        st.idle = false;
        st.enlarge = false;
        let scaled = (st.longest.length_ns() as f64 * self.params.multiplier) as u64;
        st.gi_end_ns = now_ns.saturating_add(self.params.max_gi.as_ns().min(scaled));
        self.stats.gi_starts += 1;
    }

    /// `(int)x` as x86-64 compiles it (`cvttsd2si`): NaN and out-of-range give `INT_MIN`.
    fn c_int(x: f64) -> i32 {
        if x.is_nan() || x >= 2_147_483_648.0 || x < -2_147_483_648.0 {
            i32::MIN
        } else {
            x as i32
        }
    }
}

impl FlowPolicy for CocoaPolicy {
    type FlowState = CocoaFlow;

    fn new_flow(&mut self, now: Time) -> CocoaFlow {
        let current = Interval::fresh(now.as_ns());
        CocoaFlow {
            flow_max_qlen: self.params.flow_limit.min(i32::MAX as u32) as i32,
            current,
            longest: current,
            gi_start_ns: now.as_ns(),
            gi_end_ns: now.as_ns(),
            idle: false,
            became_idle_ns: 0,
            enlarge: false,
        }
    }

    fn admit(&mut self, st: &mut CocoaFlow, qlen: u32, now: Time) -> Admit {
        if (qlen as i64) < st.flow_max_qlen as i64 {
            return Admit::Accept;
        }
        let now_ns = now.as_ns();
        let literal = self.params.literal;

        // 1. Enlarge: the flow's queue was idle in this interval, not yet enlarged, and this is
        //    not the flow's first interval (a GI is set). The arrival is accepted.
        if st.current.idle_ns > 0 && !st.enlarge && st.gi_start_ns != st.gi_end_ns {
            let idle = st.current.idle_ns;
            let active = now_ns.wrapping_sub(st.current.start_ns).wrapping_sub(idle);
            // Fix: an all-idle interval (active = 0) has no rate to extrapolate; the seed
            // divides by zero. Literal mode keeps the seed's x86 result.
            if literal || active > 0 {
                st.enlarge = true;
                let inc = st.current.packets_transmitted as f64 / active as f64 * idle as f64;
                let cap = st.flow_max_qlen as f64 * self.params.max_increase;
                st.flow_max_qlen = if literal {
                    st.flow_max_qlen
                        .wrapping_add(Self::c_int(inc))
                        .min(Self::c_int(cap))
                } else {
                    st.flow_max_qlen.saturating_add(inc as i32).min(cap as i32)
                };
                self.stats.enlargements += 1;
                return Admit::Accept;
            }
        }

        // 2. First loss of the flow, or first loss after an enlargement: open a GI.
        if st.gi_start_ns == st.gi_end_ns || st.enlarge {
            st.current.end_ns = now_ns;
            st.update_longest();
            if st.enlarge {
                st.longest = st.current;
            }
            st.enlarge = false;
            self.start_gi(st, now_ns);
            st.current = Interval::fresh(now_ns);
            st.longest = st.current;
            return Admit::Drop(DropReason::FlowLimit);
        }

        // 3. The GI is over: shrink by the LI's standing queue, dropping that many of the
        //    newest packets, and start the next GI.
        if now_ns > st.gi_end_ns {
            st.current.end_ns = now_ns;
            st.update_longest();
            let standing = st.longest.min_queue_length;
            // Fix: an LI without any dequeue has no standing-queue sample (the seed would
            // subtract ULONG_MAX and walk past the list's tail). Also never more than queued.
            let trim = if standing == NO_SAMPLE {
                0
            } else {
                standing.min(qlen as u64) as u32
            };
            if trim > 0 {
                st.flow_max_qlen = st.flow_max_qlen.wrapping_sub(trim as i32);
                if !literal {
                    // Fix: a limit of 0 can never learn again (no dequeue, no idle time).
                    st.flow_max_qlen = st.flow_max_qlen.max(1);
                }
                self.stats.shrinks += 1;
                self.stats.standing_queue_drops += trim as u64;
            }
            self.start_gi(st, now_ns);
            st.current = Interval::fresh(now_ns);
            st.longest = st.current;
            return if trim > 0 {
                Admit::TrimTailThenDrop(trim)
            } else {
                Admit::Drop(DropReason::FlowLimit)
            };
        }

        // 4. A loss inside the GI closes the current interval (the LI keeps the longest).
        st.current.end_ns = now_ns;
        st.update_longest();
        st.current = Interval::fresh(now_ns);
        Admit::Drop(DropReason::FlowLimit)
    }

    fn enqueued(&mut self, st: &mut CocoaFlow, now: Time) {
        // Idle time of this flow's queue is added when the next packet is accepted.
        if st.idle {
            st.idle = false;
            st.current.idle_ns += now.as_ns().saturating_sub(st.became_idle_ns);
        }
    }

    fn dequeued(&mut self, st: &mut CocoaFlow, qlen_after: u32, now: Time) {
        st.current.packets_transmitted += 1;
        if qlen_after == 0 {
            st.idle = true;
            st.became_idle_ns = now.as_ns();
        }
        st.current.min_queue_length = st.current.min_queue_length.min(qlen_after as u64);
    }

    fn observes_flows(&self) -> bool {
        true
    }

    fn observe_flow(&self, label: u32, st: &CocoaFlow, qlen: u32, emit: &mut dyn FnMut(&str, f64)) {
        emit(&format!("flow{label}.limit"), st.flow_max_qlen as f64);
        emit(&format!("flow{label}.qlen"), qlen as f64);
    }
}

/// A duration given as a string (`"1s"`) or as a number of seconds (tc passes a double).
fn seconds_or_duration(p: &mut Params, key: &str, default: Duration) -> ConfResult<Duration> {
    match p.raw(key) {
        None => Ok(default),
        Some(Value::Str(s)) => units::parse_duration(s).map_err(|m| p.err(key, m)),
        Some(Value::Float(x)) if x.is_finite() && *x >= 0.0 => Ok(Duration::from_secs_f64(*x)),
        Some(Value::Int(i)) if *i >= 0 => Ok(Duration::from_secs(*i as u64)),
        Some(v) => Err(p.err(
            key,
            format!(
                "expected seconds (1.0) or a duration (\"1s\"), got {}",
                v.type_name()
            ),
        )),
    }
}

impl Cocoa {
    pub fn new(mut fq: FqConfig, params: CocoaParams) -> Cocoa {
        fq.flow_limit = params.flow_limit;
        // The seed's FLOW_TIMEOUT: flows are forgotten after 10 s idle (fq: 3 s).
        fq.gc_age = Duration::from_secs(10);
        fq.gc_only_when_crowded = params.literal;
        FqSched::with_policy(
            fq,
            CocoaPolicy {
                params,
                stats: CocoaStats::default(),
            },
        )
    }
}

/// Builder for `kind = "cocoa"`: every fq parameter plus CoCoA's own.
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Cocoa> {
    let fq = FqConfig::from_params(p, ctx)?;
    let d = CocoaParams::default();
    let params = CocoaParams {
        flow_limit: fq.flow_limit,
        multiplier: p.f64_in("guard_interval", d.multiplier, 1e-3, 1e3)?,
        max_increase: p.f64_in("max_increase", d.max_increase, 1.0, 1e3)?,
        max_gi: seconds_or_duration(p, "max_monitoring_interval", d.max_gi)?,
        literal: p.bool("literal", false)?,
    };
    if params.max_gi.is_zero() {
        return Err(p.err(
            "max_monitoring_interval",
            "a zero maximum GI would end every GI at the next loss; use a positive duration",
        ));
    }
    Ok(Cocoa::new(fq, params))
}
