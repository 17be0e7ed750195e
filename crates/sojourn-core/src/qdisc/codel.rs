//! `codel`: one FIFO managed by the CoDel control law (RFC 8289; Linux `sch_codel.c`).
//!
//! Enqueue tail-drops when `limit` packets are queued (`drop_overlimit`); dequeue runs the
//! shared control law of [`super::codel_law`] on the FIFO, with the qdisc's own byte
//! backlog as the "≤ one MTU left" test. Defaults are Linux's: limit 1000 packets, target
//! 5 ms, interval 100 ms, ecn off, ce_threshold off, mtu = psched_mtu (1514 B).

use super::codel_law::{codel_dequeue, CodelParams, CodelQueue, CodelStats, CodelVars};
use super::vocab::{
    tc_time, BuildCtx, Dequeue, Discipline, DropReason, Drops, NotLinux, Qdisc, TcKey, Verdict,
};
use crate::packet::Packet;
use crate::params::{ConfResult, Params};
use crate::time::{Duration, Time};
use std::collections::VecDeque;

/// The FIFO and its byte backlog (`sch->q`, `sch->qstats.backlog`).
#[derive(Debug, Default)]
struct Fifo {
    packets: VecDeque<Packet>,
    backlog_bytes: u64,
}

impl CodelQueue for Fifo {
    #[inline]
    fn dequeue_head(&mut self, _vars: &CodelVars) -> Option<Packet> {
        let p = self.packets.pop_front()?;
        self.backlog_bytes -= p.len_bytes as u64;
        Some(p)
    }
    #[inline]
    fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }
}

#[derive(Debug)]
pub struct Codel {
    fifo: Fifo,
    /// Tail-drop threshold in packets (`sch->limit`).
    limit: usize,
    params: CodelParams,
    vars: CodelVars,
    stats: CodelStats,
    /// Arrivals tail-dropped at `limit` (`drop_overlimit`).
    drop_overlimit: u64,
}

impl Codel {
    pub fn new(limit: usize, params: CodelParams) -> Codel {
        Codel {
            fifo: Fifo {
                packets: VecDeque::new(),
                backlog_bytes: 0,
            },
            limit,
            params,
            vars: CodelVars::default(),
            stats: CodelStats::default(),
            drop_overlimit: 0,
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
    pub fn params(&self) -> &CodelParams {
        &self.params
    }
    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }
    pub fn stats(&self) -> &CodelStats {
        &self.stats
    }
    pub fn drop_overlimit(&self) -> u64 {
        self.drop_overlimit
    }
}

impl Qdisc for Codel {
    #[inline]
    fn enqueue(&mut self, pkt: Packet, _now: Time, drops: &mut Drops) -> Verdict {
        // sch_codel: accept while qlen < limit (the link already stamped enqueued_at).
        if self.fifo.packets.len() < self.limit {
            self.fifo.backlog_bytes += pkt.len_bytes as u64;
            self.fifo.packets.push_back(pkt);
            return Verdict::Queued;
        }
        self.drop_overlimit += 1;
        drops.push(pkt, DropReason::Overlimit);
        Verdict::Dropped
    }

    #[inline]
    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        match codel_dequeue(
            &mut self.fifo,
            &self.params,
            &mut self.vars,
            &mut self.stats,
            now,
            drops,
        ) {
            Some(p) => Dequeue::Packet(p),
            None => Dequeue::Empty,
        }
    }

    #[inline]
    fn len_packets(&self) -> usize {
        self.fifo.packets.len()
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        self.fifo.backlog_bytes
    }
    fn ecn_marks(&self) -> u64 {
        self.stats.marked_packets
    }
    fn observe(&mut self, _now: Time, emit: &mut dyn FnMut(&str, f64)) {
        emit("count", self.vars.count as f64);
        emit("dropping", if self.vars.dropping { 1.0 } else { 0.0 });
        emit("ldelay_ms", self.vars.ldelay.as_millis_f64());
    }
}

/// Reads the CoDel parameters shared by `codel` and `fq_codel` (tc names `target`,
/// `interval`, `ecn`, `ce_threshold`) with the given `ecn` default.
pub fn codel_params(p: &mut Params, ctx: &BuildCtx, ecn_default: bool) -> ConfResult<CodelParams> {
    let target = p.duration("target", Duration::from_ms(5))?;
    if target.is_zero() {
        return Err(p.err("target", "target must be positive (e.g. \"5ms\")"));
    }
    let interval = p.duration("interval", Duration::from_ms(100))?;
    if interval.is_zero() {
        return Err(p.err("interval", "interval must be positive (e.g. \"100ms\")"));
    }
    // Linux accepts target > interval (CoDel then waits `interval` above a target it can
    // rarely reach); so does sojourn.
    let ecn = p.bool("ecn", ecn_default)?;
    let ce_threshold = p.duration_opt("ce_threshold")?;
    Ok(CodelParams {
        target,
        interval,
        mtu_bytes: ctx.mtu_bytes,
        ecn,
        ce_threshold,
    })
}

/// Typed spec of `codel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelSpec {
    /// `limit`, packets (1000).
    pub limit: u64,
    pub params: CodelParams,
}

impl Discipline for CodelSpec {
    const KIND: &'static str = "codel";
    const SUMMARY: &'static str = "CoDel AQM over one FIFO (RFC 8289, Linux sch_codel)";
    type Qdisc = Codel;

    /// `codel [limit PACKETS] [target TIME] [interval TIME] [ecn BOOL] [ce_threshold TIME]`.
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let limit = p.u64("limit", 1000, 1, u32::MAX as u64)?;
        let params = codel_params(p, ctx, false)?;
        Ok(CodelSpec { limit, params })
    }

    fn build(&self, _ctx: &BuildCtx) -> Codel {
        Codel::new(self.limit as usize, self.params)
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS);

    /// `limit N target T interval T [ecn] [ce_threshold T]` (`tc qdisc show` order).
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        let mut a = vec!["limit".into(), self.limit.to_string()];
        codel_tc_args("codel", &self.params, &mut a)?;
        if self.params.ecn {
            a.push("ecn".into());
        }
        Ok(a)
    }
}

/// `target T [ce_threshold T] interval T` of codel and fq_codel, in tc's order.
pub fn codel_tc_args(
    kind: &'static str,
    c: &CodelParams,
    a: &mut Vec<String>,
) -> Result<(), NotLinux> {
    a.extend(["target".into(), tc_time(kind, "target", c.target)?]);
    if let Some(ce) = c.ce_threshold {
        a.extend(["ce_threshold".into(), tc_time(kind, "ce_threshold", ce)?]);
    }
    a.extend(["interval".into(), tc_time(kind, "interval", c.interval)?]);
    Ok(())
}

/// tc keywords of `codel`.
pub const TC_KEYS: &[TcKey] = &[
    TcKey::Int("limit", "limit"),
    TcKey::Time("target", "target"),
    TcKey::Time("interval", "interval"),
    TcKey::Time("ce_threshold", "ce_threshold"),
    TcKey::Flag("ecn", "ecn", true),
    TcKey::Flag("noecn", "ecn", false),
];

/// `codel [limit PACKETS] [target TIME] [interval TIME] [ecn BOOL] [ce_threshold TIME]`.
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Codel> {
    Ok(CodelSpec::parse(p, ctx)?.build(ctx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Ecn;
    use crate::params::Value;
    use crate::qdisc::testkit::{check_conservation, pkt};

    fn build(t: Vec<(&str, Value)>) -> ConfResult<Codel> {
        crate::qdisc::testkit::build_from(from_params, t, &BuildCtx::default())
    }

    #[test]
    fn defaults_are_linux() {
        let q = build(vec![]).unwrap();
        assert_eq!(q.limit(), 1000);
        assert_eq!(q.params().target, Duration::from_ms(5));
        assert_eq!(q.params().interval, Duration::from_ms(100));
        assert_eq!(q.params().mtu_bytes, 1514);
        assert!(!q.params().ecn);
        assert_eq!(q.params().ce_threshold, None);
        let e = build(vec![("target", Value::Str("0ms".into()))])
            .err()
            .unwrap();
        assert_eq!(e.path, "q.target");
        let e = build(vec![("interval", Value::Int(0))]).err().unwrap();
        assert_eq!(e.path, "q.interval");
        let q = build(vec![
            ("ecn", Value::Bool(true)),
            ("ce_threshold", Value::Str("1ms".into())),
            ("limit", Value::Int(50)),
        ])
        .unwrap();
        assert!(q.params().ecn);
        assert_eq!(q.params().ce_threshold, Some(Duration::from_ms(1)));
        assert_eq!(q.limit(), 50);
    }

    #[test]
    fn tail_drops_at_limit_packets() {
        let mut q = Codel::new(3, CodelParams::linux_default(1514));
        let mut d = Drops::new();
        for i in 0..5 {
            let v = q.enqueue(pkt(i, 1, 100), Time::ZERO, &mut d);
            assert_eq!(v == Verdict::Dropped, i >= 3);
        }
        assert_eq!(q.len_packets(), 3);
        assert_eq!(q.drop_overlimit(), 2);
        assert!(d.drain().all(|x| x.reason == DropReason::Overlimit));
    }

    /// Through the Qdisc interface: a standing queue of old packets is dropped at the head
    /// once sojourn has stayed above target for an interval; nothing is dropped before.
    #[test]
    fn standing_queue_dropped_after_one_interval() {
        let mut q = Codel::new(1000, CodelParams::linux_default(1514));
        let mut d = Drops::new();
        for i in 0..300 {
            let mut p = pkt(i, 1, 1000);
            p.enqueued_at = Time::ZERO;
            q.enqueue(p, Time::ZERO, &mut d);
        }
        // Dequeue one per ms from 10 ms: above target from the start.
        let mut first_drop = None;
        for ms in 10..300u64 {
            let now = Time::from_ns(ms * 1_000_000);
            q.dequeue(now, &mut d);
            if !d.is_empty() && first_drop.is_none() {
                first_drop = Some(ms);
                assert!(d.drain().all(|x| x.reason == DropReason::Aqm));
            }
        }
        // first_above_time = 10 ms + 100 ms; first drop strictly after: 111 ms.
        assert_eq!(first_drop, Some(111));
        // Drops at 111, 211 (+100 ms · 0.99998) and 261 ms (+100 ms · 0.5); the next is due
        // at 317 ms, so at 299 ms CoDel is still dropping with count 3.
        assert!(q.vars().dropping);
        assert_eq!(q.vars().count, 3);
    }

    #[test]
    fn ecn_codel_marks_ect_and_drops_not_ect() {
        let params = CodelParams {
            ecn: true,
            ..CodelParams::linux_default(1514)
        };
        let mut q = Codel::new(1000, params);
        let mut d = Drops::new();
        for i in 0..300 {
            let mut p = pkt(i, 1, 1000);
            p.ecn = if i % 2 == 0 { Ecn::Ect0 } else { Ecn::NotEct };
            q.enqueue(p, Time::ZERO, &mut d);
        }
        let mut delivered_ce = 0;
        for ms in 10..290u64 {
            if let Dequeue::Packet(p) = q.dequeue(Time::from_ns(ms * 1_000_000), &mut d) {
                if p.ecn == Ecn::Ce {
                    delivered_ce += 1;
                }
            }
        }
        for x in d.drain() {
            assert_eq!(x.pkt.ecn, Ecn::NotEct, "only Not-ECT packets are dropped");
        }
        assert!(delivered_ce > 0);
        assert_eq!(q.ecn_marks(), delivered_ce);
    }

    #[test]
    fn codel_conservation_property() {
        for seed in 0..12 {
            let params = crate::qdisc::testkit::varied_codel_params(seed);
            let limit = 20 + 10 * seed as usize;
            let mut q = Codel::new(limit, params);
            check_conservation(&mut q, seed, 5_000, |q| q.len_packets() <= limit);
        }
    }
}
