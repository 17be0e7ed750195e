//! Workload schedules as sans-IO state machines: a [`Generator`] says "open a transfer of
//! S bytes from A to B now" and "wake me at t"; the engine (simulator, live emulator) does
//! the I/O and reports back "the transfer you asked me to watch finished at t".
//!
//! Every random choice of a workload (sizes, think times, arrival gaps, the phase of a
//! thin stream) comes from one stream per generator, `Rng::stream(seed, "workload{index}",
//! i)` for the i-th (source, destination) entry of workload `index`, drawn in a fixed
//! order. So two engines given the same experiment and seed offer the same traffic, and
//! the simulator's outputs do not depend on which engine-side code drives the generator.
//!
//! ```
//! use sojourn_experiment::schedule::{Generator, Payload};
//! let exp = sojourn_experiment::parse_str(r#"
//!     duration = "10s"
//!     [topology]
//!     bottleneck = { rate = "10Mbit" }
//!     [[workload]]
//!     kind = "actors"
//!     think = "1s"
//!     size = "50kB"
//! "#, std::path::Path::new(".")).unwrap();
//! let mut gens = Generator::for_workload(&exp, 0, exp.seed);
//! let g = &mut gens[0];
//! let t0 = g.start().expect("a first wake before the end");
//! let step = g.wake(t0);
//! let open = step.open.expect("an actor opens a transfer when it wakes");
//! assert!(matches!(open.payload, Payload::Sized(50_000)));
//! assert!(open.report_completion && step.wake_at.is_none());
//! // ... the engine runs the transfer, then reports its end; the actor thinks again:
//! let next = g.finished(t0 + sojourn_core::Duration::from_ms(300)).wake_at;
//! assert!(next.is_some());
//! ```

use crate::dist::IntervalDist;
use crate::workload::{TcpKind, TcpPlan, WorkloadPlan};
use crate::Experiment;
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, Time};

/// What a transfer carries.
#[derive(Clone, Debug)]
pub enum Payload {
    /// `n` bytes, then the connection closes.
    Sized(u64),
    /// An unbounded transfer (iperf-like bulk).
    Bulk,
    /// A thin stream: one message of `message_bytes` at the open time and then after every
    /// interval drawn from `interval` with `rng`, until `stop`. The engine draws the
    /// intervals itself (with this `rng`, already positioned), over UDP datagrams of at
    /// most MTU − 28 payload bytes if `udp`, else over the TCP connection.
    Messages {
        message_bytes: u32,
        interval: IntervalDist,
        udp: bool,
        stop: Time,
        rng: Rng,
    },
}

/// "Open a transfer now": what a generator asks its engine to do.
#[derive(Clone, Debug)]
pub struct Open {
    /// Node that sends the payload (the connection's initiator unless `reuses_connection`).
    pub src: u32,
    /// Node that receives it.
    pub dst: u32,
    pub payload: Payload,
    /// The size the flow's record reports for flow-completion statistics (0: none; a
    /// request carries none because the transaction's FCT is recorded on its response).
    pub record_size: u64,
    /// The transfer answers on the connection the request opened (a response): no new
    /// handshake.
    pub reuses_connection: bool,
    /// When the transaction began: the flow's recorded start (the request's open time for
    /// a response, else now).
    pub started: Time,
    /// The engine must call [`Generator::finished`] when this transfer completes (the
    /// generator is a closed loop waiting for it).
    pub report_completion: bool,
}

/// What to do after a call: open this transfer (if any), then wake the generator at this
/// time (if any; strictly before the workload's stop).
#[derive(Clone, Debug, Default)]
pub struct Step {
    pub open: Option<Open>,
    pub wake_at: Option<Time>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    NotStarted,
    Thinking,
    Request { started: Time },
    Response,
    Done,
}

/// One generator: one (source, destination) entry of a TCP workload.
#[derive(Clone, Debug)]
pub struct Generator {
    kind: TcpKind,
    src: u32,
    dst: u32,
    start: Time,
    stop: Time,
    rng: Rng,
    phase: Phase,
    transactions_done: u32,
    pending_response: Option<u64>,
}

impl Generator {
    /// The generator of entry `i` of `plan.flows`, with its random stream from `seed`.
    pub fn new(plan: &TcpPlan, i: usize, seed: u64) -> Generator {
        let (src, dst) = plan.flows[i];
        Generator {
            kind: plan.kind.clone(),
            src,
            dst,
            start: Time::ZERO + plan.start,
            stop: plan.stop.map(|s| Time::ZERO + s).unwrap_or(Time::MAX),
            rng: Rng::stream(seed, &format!("workload{}", plan.index), i as u64),
            phase: Phase::NotStarted,
            transactions_done: 0,
            pending_response: None,
        }
    }

    /// Every generator of workload `index` of `exp` (none for a UDP workload).
    pub fn for_workload(exp: &Experiment, index: usize, seed: u64) -> Vec<Generator> {
        match &exp.workloads[index] {
            WorkloadPlan::Tcp(plan) => (0..plan.flows.len())
                .map(|i| Generator::new(plan, i, seed))
                .collect(),
            WorkloadPlan::Udp(_) | WorkloadPlan::Probe(_) => Vec::new(),
        }
    }

    /// (source, destination) node of this generator's entry.
    pub fn endpoints(&self) -> (u32, u32) {
        (self.src, self.dst)
    }

    /// The first wake-up (call once, at time 0): the workload's start, after a first think
    /// time (actors) or arrival gap (Poisson arrivals); `None` if that is not before stop.
    pub fn start(&mut self) -> Option<Time> {
        let first = match &self.kind {
            TcpKind::Actors { think, .. } => self.start + think.draw(&mut self.rng),
            TcpKind::Poisson { interval, .. } => self.start + interval.draw(&mut self.rng),
            _ => self.start,
        };
        (first < self.stop).then_some(first)
    }

    /// The wake-up the engine scheduled is due at `now`.
    pub fn wake(&mut self, now: Time) -> Step {
        if now >= self.stop || self.phase == Phase::Done {
            return Step::default();
        }
        let mut step = Step::default();
        match self.kind.clone() {
            TcpKind::Bulk => {
                step.open = Some(self.open(now, Payload::Bulk, 0, false));
                self.phase = Phase::Done;
            }
            TcpKind::Transfer { size } => {
                step.open = Some(self.open(now, Payload::Sized(size), size, false));
                self.phase = Phase::Done;
            }
            TcpKind::Thin {
                udp,
                message,
                interval,
            } => {
                let payload = Payload::Messages {
                    message_bytes: message,
                    interval,
                    udp,
                    stop: self.stop,
                    rng: self.rng.clone(),
                };
                step.open = Some(self.open(now, payload, 0, false));
                self.phase = Phase::Done;
            }
            TcpKind::Actors { size, .. } => {
                let s = size.draw(&mut self.rng);
                step.open = Some(self.open(now, Payload::Sized(s), s, true));
                self.phase = Phase::Request { started: now };
            }
            TcpKind::Poisson { interval, size } => {
                let s = size.draw(&mut self.rng);
                step.open = Some(self.open(now, Payload::Sized(s), s, false));
                let gap = interval.draw(&mut self.rng);
                step.wake_at = self.think(now, gap);
            }
            TcpKind::RequestResponse {
                request, response, ..
            } => {
                let q = request.draw(&mut self.rng);
                // The request's record carries no size: the transaction's FCT is recorded
                // on the response flow (docs/transport.md).
                step.open = Some(self.open(now, Payload::Sized(q), 0, true));
                self.pending_response = Some(response.draw(&mut self.rng));
                self.phase = Phase::Request { started: now };
            }
            // Application workloads are driven by their `apps::AppMachine`.
            TcpKind::App(_) => self.phase = Phase::Done,
        }
        step
    }

    /// The transfer opened with `report_completion` finished at `now`.
    pub fn finished(&mut self, now: Time) -> Step {
        let mut step = Step::default();
        match (self.phase, self.kind.clone()) {
            (Phase::Request { .. }, TcpKind::Actors { think, .. }) => {
                let gap = think.draw(&mut self.rng);
                step.wake_at = self.think(now, gap);
            }
            (Phase::Request { started }, TcpKind::RequestResponse { .. }) => {
                // The server answers on the open connection.
                let size = self.pending_response.take().unwrap_or(1);
                step.open = Some(Open {
                    src: self.dst,
                    dst: self.src,
                    payload: Payload::Sized(size),
                    record_size: size,
                    reuses_connection: true,
                    started,
                    report_completion: true,
                });
                self.phase = Phase::Response;
            }
            (Phase::Response, TcpKind::RequestResponse { think, count, .. }) => {
                self.transactions_done += 1;
                if count > 0 && self.transactions_done >= count {
                    self.phase = Phase::Done;
                } else {
                    let gap = think.draw(&mut self.rng);
                    step.wake_at = self.think(now, gap);
                }
            }
            _ => {}
        }
        step
    }

    fn open(&self, now: Time, payload: Payload, record_size: u64, watch: bool) -> Open {
        Open {
            src: self.src,
            dst: self.dst,
            payload,
            record_size,
            reuses_connection: false,
            started: now,
            report_completion: watch,
        }
    }

    /// Next wake-up after a pause, unless it falls at or after stop (then done).
    fn think(&mut self, now: Time, gap: Duration) -> Option<Time> {
        let at = now + gap;
        if at < self.stop {
            self.phase = Phase::Thinking;
            Some(at)
        } else {
            self.phase = Phase::Done;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::SizeDist;

    fn plan(kind: TcpKind, stop: Option<Duration>) -> TcpPlan {
        TcpPlan {
            index: 0,
            flows: vec![(0, 1)],
            cfg: Default::default(),
            start: Duration::from_ms(100),
            stop,
            kind,
            allow_overload: false,
        }
    }

    /// A closed loop never has two transfers open: it opens only after the previous one
    /// finished and a think time passed.
    #[test]
    fn request_response_alternates_and_stops_after_count() {
        let p = plan(
            TcpKind::RequestResponse {
                request: SizeDist::Fixed(100),
                response: SizeDist::Fixed(5000),
                think: IntervalDist::Fixed(Duration::from_ms(10)),
                count: 2,
            },
            None,
        );
        let mut g = Generator::new(&p, 0, 1);
        let t0 = g.start().unwrap();
        assert_eq!(
            t0,
            Time::ZERO + Duration::from_ms(100),
            "no think before the first"
        );
        let q = g.wake(t0).open.unwrap();
        assert_eq!((q.src, q.dst, q.record_size), (0, 1, 0));
        let t1 = t0 + Duration::from_ms(5);
        let r = g.finished(t1).open.unwrap();
        assert_eq!(
            (r.src, r.dst, r.record_size),
            (1, 0, 5000),
            "server answers"
        );
        assert!(r.reuses_connection);
        assert_eq!(r.started, t0, "the transaction starts at the request");
        let t2 = t1 + Duration::from_ms(7);
        let next = g.finished(t2).wake_at.unwrap();
        assert_eq!(next, t2 + Duration::from_ms(10));
        g.wake(next).open.unwrap();
        g.finished(next + Duration::from_ms(1));
        let last = g.finished(next + Duration::from_ms(2));
        assert!(
            last.open.is_none() && last.wake_at.is_none(),
            "2 transactions"
        );
    }

    #[test]
    fn nothing_opens_at_or_after_stop() {
        let p = plan(
            TcpKind::Poisson {
                interval: IntervalDist::Fixed(Duration::from_ms(400)),
                size: SizeDist::Fixed(1000),
            },
            Some(Duration::from_ms(1000)),
        );
        let mut g = Generator::new(&p, 0, 1);
        // Arrivals at 0.5 s and 0.9 s; the next (1.3 s) is past stop.
        let mut at = g.start();
        let mut opens = Vec::new();
        let mut bound = sojourn_core::qdisc::testkit::Bound::new(100, "generator wakes");
        while let Some(t) = at {
            bound.tick();
            let s = g.wake(t);
            opens.push(t);
            assert!(s.open.is_some());
            at = s.wake_at;
        }
        assert_eq!(
            opens,
            vec![
                Time::ZERO + Duration::from_ms(500),
                Time::ZERO + Duration::from_ms(900)
            ]
        );
        assert!(g.wake(Time::ZERO + Duration::from_ms(1000)).open.is_none());
    }
}
