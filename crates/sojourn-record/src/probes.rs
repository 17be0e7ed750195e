//! probes.parquet, the table of every latency probe and isochronous datagram, built the
//! same way by every engine (the simulator's probe endpoints, the live load generator's
//! probe threads): one row per probe with its send time and the delays its mode knows
//! (docs/tests.md; columns in docs/output-schema.md).

use crate::output::{Column, Columns};
use sojourn_core::{Duration, Time};
use sojourn_experiment::probe::ProbeMode;

/// Probes sent during the run's last second are left out of probes.parquet: their answer
/// may still be on its way at the end, and counting it lost would be wrong.
pub const PROBE_GRACE: Duration = Duration::from_secs(1);

/// The columns of probes.parquet, filled row by row.
#[derive(Default)]
pub struct ProbeTable {
    time_s: Vec<f64>,
    workload: Vec<u32>,
    flow: Vec<u32>,
    mode: Vec<String>,
    seq: Vec<u64>,
    rtt_ns: Vec<f64>,
    owd_up_ns: Vec<f64>,
    owd_down_ns: Vec<f64>,
    lost: Vec<bool>,
}

impl ProbeTable {
    /// One probe of `flow` (workload `workload`): sent at `sent`, at the far end at `far`,
    /// its answer back at `back` (`None` = never).
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        flow: u32,
        workload: u32,
        mode: ProbeMode,
        seq: u64,
        sent: Time,
        far: Option<Time>,
        back: Option<Time>,
    ) {
        let span = |a: Option<Time>, b: Option<Time>| match (a, b) {
            (Some(a), Some(b)) => b.0.saturating_sub(a.0) as f64,
            _ => f64::NAN,
        };
        let s = Some(sent);
        // Which delays each mode knows: ping(8) only the round trip, irtt all three, a
        // one-way stream its one-way delay.
        let (rtt, up, down, lost) = match mode {
            ProbeMode::Icmp => (span(s, back), f64::NAN, f64::NAN, back.is_none()),
            ProbeMode::Udp => (span(s, back), span(s, far), span(far, back), back.is_none()),
            ProbeMode::OneWay => (f64::NAN, span(s, far), f64::NAN, far.is_none()),
        };
        self.time_s.push(sent.as_secs_f64());
        self.workload.push(workload);
        self.flow.push(flow);
        self.mode.push(mode.name().to_string());
        self.seq.push(seq);
        self.rtt_ns.push(rtt);
        self.owd_up_ns.push(up);
        self.owd_down_ns.push(down);
        self.lost.push(lost);
    }

    pub fn finish(self) -> Columns {
        Columns(vec![
            ("time_s".into(), Column::F64(self.time_s)),
            ("workload".into(), Column::U32(self.workload)),
            ("flow".into(), Column::U32(self.flow)),
            ("mode".into(), Column::Str(self.mode)),
            ("seq".into(), Column::U64(self.seq)),
            ("rtt_ns".into(), Column::F64(self.rtt_ns)),
            ("owd_up_ns".into(), Column::F64(self.owd_up_ns)),
            ("owd_down_ns".into(), Column::F64(self.owd_down_ns)),
            ("lost".into(), Column::Bool(self.lost)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col<'a>(c: &'a Columns, name: &str) -> &'a [f64] {
        match c.get(name) {
            Some(Column::F64(v)) => v,
            _ => panic!("no column {name}"),
        }
    }

    #[test]
    fn udp_echo_row_has_rtt_and_both_one_way_delays() {
        // Sent at 1 s, at the far end 1.010 s, back at 1.025 s: 25 ms = 10 + 15 ms.
        let mut t = ProbeTable::default();
        t.push(
            3,
            1,
            ProbeMode::Udp,
            0,
            Time(1_000_000_000),
            Some(Time(1_010_000_000)),
            Some(Time(1_025_000_000)),
        );
        let c = t.finish();
        assert_eq!(col(&c, "rtt_ns"), &[25_000_000.0]);
        assert_eq!(col(&c, "owd_up_ns"), &[10_000_000.0]);
        assert_eq!(col(&c, "owd_down_ns"), &[15_000_000.0]);
        assert_eq!(col(&c, "time_s"), &[1.0]);
        assert!(matches!(c.get("lost"), Some(Column::Bool(v)) if v == &[false]));
        assert!(matches!(c.get("mode"), Some(Column::Str(v)) if v == &["udp".to_string()]));
    }

    #[test]
    fn icmp_row_knows_only_the_round_trip_and_unanswered_is_lost() {
        let mut t = ProbeTable::default();
        t.push(
            3,
            1,
            ProbeMode::Icmp,
            0,
            Time(0),
            None,
            Some(Time(40_000_000)),
        );
        t.push(3, 1, ProbeMode::Icmp, 1, Time(200_000_000), None, None);
        let c = t.finish();
        assert_eq!(col(&c, "rtt_ns")[0], 40_000_000.0);
        assert!(col(&c, "owd_up_ns")[0].is_nan() && col(&c, "owd_down_ns")[0].is_nan());
        assert!(col(&c, "rtt_ns")[1].is_nan());
        assert_eq!(col(&c, "time_s"), &[0.0, 0.2]);
        assert!(matches!(c.get("lost"), Some(Column::Bool(v)) if v == &[false, true]));
    }

    #[test]
    fn one_way_row_is_lost_without_an_arrival() {
        let mut t = ProbeTable::default();
        t.push(
            3,
            1,
            ProbeMode::OneWay,
            0,
            Time(0),
            Some(Time(7_000_000)),
            None,
        );
        t.push(3, 1, ProbeMode::OneWay, 1, Time(20_000_000), None, None);
        let c = t.finish();
        assert_eq!(col(&c, "owd_up_ns")[0], 7_000_000.0);
        assert!(col(&c, "rtt_ns")[0].is_nan());
        assert!(matches!(c.get("lost"), Some(Column::Bool(v)) if v == &[false, true]));
    }
}
