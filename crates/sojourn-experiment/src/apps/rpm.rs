//! Responsiveness under working conditions, in round-trips per minute (RPM), as the IETF
//! IPPM draft "Responsiveness under Working Conditions" (draft-ietf-ippm-responsiveness;
//! implemented from revision -06, the latest whose text we could read; section names below
//! are that revision's) defines it. docs/tests.md, "rpm", lists every simplification.
//!
//! One entry runs a phase per direction, one after the other ("Concurrent vs Sequential
//! Uplink and Downlink": sequential tests report one score per direction):
//!
//! - **Working conditions** ("Achieving Steady-State Buffer Utilization"): up to
//!   `connections` load-generating connections (default 16, the draft's MNP) carry
//!   unbounded transfers in the phase's direction. `initial_connections` (the draft's INP)
//!   open at the phase's start and `added_per_interval` (INC) more every `interval` (ID)
//!   until MNP ("Final Algorithm"). By default INP = MNP: all open at once (the draft
//!   allows raising INP "if one has prior knowledge on the capacity of the link"); the
//!   draft's own defaults are `initial_connections = 1`, `added_per_interval = 1`. The
//!   measurement window is the phase's last `window` (MAD × ID = 4 × 1 s by default)
//!   instead of the goodput and responsiveness stability tests. At the phase's end every
//!   load connection stops writing and drains.
//! - **Probes** ("Measuring Responsiveness"): every 1/`probes_per_second` (MPS = 100) a
//!   foreign probe and a self probe. A foreign probe is a new connection: its TCP
//!   handshake (`tcp_f`: connect → SYN-ACK received), a TLS 1.3 handshake abstracted as one
//!   round trip carrying a ClientHello of `tls_client_size` and the server's flight of
//!   `tls_server_size` (`tls_f`: ClientHello sent → server flight received, one round trip
//!   so already normalised; no cryptographic cost), then an HTTP GET of `request_size` and
//!   its response of `response_size` (`http_f`). A self probe is the same GET on a
//!   load-generating connection chosen uniformly at random: the part that travels in the
//!   loaded direction is written behind what that connection's socket already holds, so it
//!   waits for that connection's own backlog (`http_l`).
//! - **Aggregation** ("Aggregating the Measurements"): over the probes launched in the
//!   window and measured before the phase's end, the single-sided trimmed mean of each
//!   data-point type at the TMP percentile (95 %), then
//!   `Foreign = 60000 / ((TM(tcp_f) + TM(tls_f) + TM(http_f)) / 3)`,
//!   `Loaded = 60000 / TM(http_l)`, `RPM = (Foreign + Loaded) / 2`; without TLS the foreign
//!   mean is over `tcp_f` and `http_f` only (the draft's TCP-only case).
//!
//! Not done: the PTC cap (probes ≤ 5 % of capacity) is not enforced (set
//! `probes_per_second` lower on slow links: a foreign probe is about 5 kB, a self probe
//! about 0.2 kB), and no confidence score (the phases have a fixed length).

use crate::apps::vocab::{
    message_bytes, Action, AppStep, AppSummary, Body, Done, Ends, Number, Sample, Token,
};
use sojourn_core::params::{ConfResult, Params, Value};
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, Time};

/// A direction of the load (the server is the workload's `from`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Server → client (downloads, HTTP GETs of large objects).
    Downlink,
    /// Client → server (uploads, HTTP POSTs).
    Uplink,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Downlink => "downlink",
            Direction::Uplink => "uplink",
        }
    }
    fn entity(self) -> &'static str {
        match self {
            Direction::Downlink => "rpm.downlink",
            Direction::Uplink => "rpm.uplink",
        }
    }
}

/// A parsed `kind = "rpm"` workload.
#[derive(Clone, Debug)]
pub struct RpmPlan {
    /// The phases, in order.
    pub directions: Vec<Direction>,
    /// Length of each phase.
    pub phase: Duration,
    /// Load-generating connections per phase at most (the draft's MNP).
    pub connections: u32,
    /// Opened at the phase's start (the draft's INP).
    pub initial_connections: u32,
    /// Opened every `interval` after that, up to `connections` (the draft's INC).
    pub added_per_interval: u32,
    /// The draft's ID.
    pub interval: Duration,
    /// Probe pairs (one foreign, one self) launched per second (the draft's MPS).
    pub probes_per_second: u32,
    /// The measurement window at the end of each phase (the draft's MAD × ID).
    pub window: Duration,
    /// The trimmed mean keeps the samples at or below this percentile (the draft's TMP).
    pub trim_percent: f64,
    /// Foreign probes do a TLS handshake (one abstracted round trip).
    pub tls: bool,
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub tls_client_bytes: u64,
    pub tls_server_bytes: u64,
    /// Unsent bytes a loaded socket holds at most (Linux `TCP_NOTSENT_LOWAT`); `None`:
    /// as much as it has in flight (the engine's model of a full, autotuned send buffer).
    pub notsent_lowat: Option<u64>,
}

impl RpmPlan {
    pub(crate) fn parse(p: &mut Params) -> ConfResult<RpmPlan> {
        let directions = match p.choice("directions", &["both", "downlink", "uplink"], "both")? {
            "both" => vec![Direction::Downlink, Direction::Uplink],
            "downlink" => vec![Direction::Downlink],
            _ => vec![Direction::Uplink],
        };
        let phase = p.duration("phase", Duration::from_secs(10))?;
        let window = p.duration("window", Duration::from_secs(4))?;
        if window.is_zero() {
            return Err(p.err("window", "must be positive"));
        }
        if window > phase {
            return Err(p.err(
                "window",
                format!("{window} is longer than `phase` ({phase}): the window is the phase's end"),
            ));
        }
        let connections = p.u32("connections", 16, 1, 256)?;
        let initial_connections = p.u32("initial_connections", connections, 1, connections)?;
        let added_per_interval = p.u32("added_per_interval", 1, 1, 256)?;
        let interval = p.duration("interval", Duration::from_secs(1))?;
        if interval.is_zero() {
            return Err(p.err("interval", "must be positive"));
        }
        let probes_per_second = p.u32("probes_per_second", 100, 1, 1000)?;
        let trim_percent = p.f64_in("trim_percent", 95.0, 1.0, 100.0)?;
        let tls = p.bool("tls", true)?;
        let positive = message_bytes;
        // An HTTP/2 GET (HEADERS frame) and the 1-byte object the draft asks for, with its
        // HEADERS and DATA frames: about 100 B each.
        let request_bytes = positive(p, "request_size", 100)?;
        let response_bytes = positive(p, "response_size", 100)?;
        // A ClientHello padded to 517 B (as browsers send it) and a server flight of about
        // 4 kB (ServerHello … Finished with a certificate chain): with the GET, the ~5 kB
        // per foreign probe the draft estimates ("Measuring Responsiveness").
        let tls_client_bytes = positive(p, "tls_client_size", 517)?;
        let tls_server_bytes = positive(p, "tls_server_size", 4000)?;
        let notsent_lowat = match p.raw("notsent_lowat") {
            None => None,
            Some(Value::Str(s)) if s == "auto" => None,
            Some(_) => Some(p.bytes("notsent_lowat", 0)?),
        };
        if phase.is_zero() {
            return Err(p.err("phase", "must be positive"));
        }
        Ok(RpmPlan {
            directions,
            phase,
            connections,
            initial_connections,
            added_per_interval,
            interval,
            probes_per_second,
            window,
            trim_percent,
            tls,
            request_bytes,
            response_bytes,
            tls_client_bytes,
            tls_server_bytes,
            notsent_lowat,
        })
    }
}

/// The draft's single-sided trimmed mean ("Aggregating the Measurements"): sort, keep the
/// ⌊n · percent / 100⌋ smallest samples (at least one) — those at or below the percentile —
/// and average them. `None` for no samples.
pub fn trimmed_mean(samples: &[f64], percent: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let keep = ((v.len() as f64 * percent / 100.0).floor() as usize).clamp(1, v.len());
    Some(v[..keep].iter().sum::<f64>() / keep as f64)
}

/// The draft's RPM from the trimmed means in milliseconds ("Aggregating the
/// Measurements"): `(foreign, loaded, responsiveness)`. `tls_f = None` is the TCP-only case.
pub fn responsiveness(tcp_f: f64, tls_f: Option<f64>, http_f: f64, http_l: f64) -> (f64, f64, f64) {
    let foreign = match tls_f {
        Some(tls) => 60_000.0 / ((tcp_f + tls + http_f) / 3.0),
        None => 60_000.0 / ((tcp_f + http_f) / 2.0),
    };
    let loaded = 60_000.0 / http_l;
    (foreign, loaded, (foreign + loaded) / 2.0)
}

// Stages of a probe, the low 3 bits of its transfers' tokens.
const F_CONNECT: u64 = 0; // client → server, with handshake: ClientHello (or the GET)
const F_TLS_SERVER: u64 = 1; // server → client: the server's TLS flight
const F_GET: u64 = 2; // client → server: the GET after TLS
const F_RESPONSE: u64 = 3; // server → client: the response
const S_GET: u64 = 4; // downlink self probe: the GET, client → server
const S_LOADED: u64 = 5; // the part written on the load connection
const S_RESPONSE: u64 = 6; // uplink self probe: the response, server → client
/// Load connections' tokens carry this bit (phase << 16 | connection below it).
const LOAD: Token = 1 << 62;

#[derive(Clone, Debug)]
struct Probe {
    phase: u32,
    launched: Time,
    /// When the HTTP GET was issued (foreign probes), or the TLS handshake began.
    mark: Time,
    load: Token,
    tcp_f: Option<f64>,
    tls_f: Option<f64>,
    http_f: Option<f64>,
    http_l: Option<f64>,
    finished: Option<Time>,
}

/// One `rpm` entry's state machine.
#[derive(Clone, Debug)]
pub struct Rpm {
    plan: RpmPlan,
    pub(super) ends: Ends,
    rng: Rng,
    /// The phase running (== `plan.directions.len()` when all are over).
    phase: usize,
    started: bool,
    next_probe: Time,
    /// Load connections of the running phase opened so far, and when more open.
    opened: u32,
    next_ramp: Time,
    probes: Vec<Probe>,
}

impl Rpm {
    pub fn new(plan: RpmPlan, ends: Ends, rng: Rng) -> Rpm {
        Rpm {
            plan,
            ends,
            rng,
            phase: 0,
            started: false,
            next_probe: ends.start,
            opened: 0,
            next_ramp: Time::MAX,
            probes: Vec::new(),
        }
    }

    /// Start and end of phase `k` (the end cut at the workload's stop).
    fn phase_span(&self, k: usize) -> (Time, Time) {
        let s = self.ends.start + self.plan.phase * k as u64;
        (s, (s + self.plan.phase).min(self.ends.stop))
    }

    /// Load connections phase `k` has open at its end (the ramp's count).
    fn loads_by_end(&self, k: usize) -> u32 {
        let (s, e) = self.phase_span(k);
        let p = &self.plan;
        // Ramp points strictly inside the phase: s + ID, s + 2·ID, … < e.
        let steps = (e.saturating_since(s).as_ns().saturating_sub(1) / p.interval.as_ns()) as u32;
        p.initial_connections
            .saturating_add(steps.saturating_mul(p.added_per_interval))
            .min(p.connections)
    }

    fn dir(&self, k: usize) -> Direction {
        self.plan.directions[k]
    }

    fn load_token(k: usize, i: u32) -> Token {
        LOAD | (k as u64) << 16 | i as u64
    }

    /// Opens `n` more load connections of phase `k` (at most MNP in all).
    fn open_loads(&mut self, k: usize, n: u32, step: &mut AppStep) {
        let (src, dst) = match self.dir(k) {
            Direction::Downlink => (self.ends.server, self.ends.client),
            Direction::Uplink => (self.ends.client, self.ends.server),
        };
        let upto = (self.opened + n).min(self.plan.connections);
        for i in self.opened..upto {
            step.actions.push(Action::Open {
                token: Self::load_token(k, i),
                src,
                dst,
                body: Body::Bulk,
                handshake: true,
            });
        }
        self.opened = upto;
    }

    pub fn wake(&mut self, now: Time) -> AppStep {
        let mut step = AppStep::default();
        while self.phase < self.plan.directions.len() {
            let (s, e) = self.phase_span(self.phase);
            if s >= e {
                // The workload stopped before this phase.
                self.phase = self.plan.directions.len();
                break;
            }
            if !self.started {
                if now < s {
                    step.wake_at = Some(s);
                    return step;
                }
                self.started = true;
                self.next_probe = s;
                self.opened = 0;
                self.next_ramp = s + self.plan.interval;
                self.open_loads(self.phase, self.plan.initial_connections, &mut step);
            }
            if now >= e {
                for i in 0..self.opened {
                    step.actions.push(Action::Stop {
                        load: Self::load_token(self.phase, i),
                    });
                }
                self.phase += 1;
                self.started = false;
                continue;
            }
            while self.next_ramp <= now {
                self.open_loads(self.phase, self.plan.added_per_interval, &mut step);
                self.next_ramp += self.plan.interval;
            }
            while self.next_probe <= now {
                self.launch(now, &mut step);
                let gap = Duration::from_ns(1_000_000_000 / self.plan.probes_per_second as u64);
                self.next_probe += gap;
            }
            let ramp = if self.opened < self.plan.connections {
                self.next_ramp
            } else {
                Time::MAX
            };
            step.wake_at = Some(self.next_probe.min(ramp).min(e));
            return step;
        }
        step
    }

    /// Launches a foreign and a self probe now.
    fn launch(&mut self, now: Time, step: &mut AppStep) {
        let k = self.phase;
        let (server, client) = (self.ends.server, self.ends.client);
        let base = |id: usize| (id as u64) << 3;
        // Foreign probe: a new connection from the client.
        let id = self.probes.len();
        let first = if self.plan.tls {
            self.plan.tls_client_bytes
        } else {
            self.plan.request_bytes
        };
        step.actions.push(Action::Open {
            token: base(id) | F_CONNECT,
            src: client,
            dst: server,
            body: Body::Sized(first),
            handshake: true,
        });
        self.probes.push(Probe {
            phase: k as u32,
            launched: now,
            mark: now,
            load: 0,
            tcp_f: None,
            tls_f: None,
            http_f: None,
            http_l: None,
            finished: None,
        });
        // Self probe: on a load connection drawn uniformly ("Measuring Responsiveness").
        let id = self.probes.len();
        let load = Self::load_token(k, self.rng.below(self.opened as u64) as u32);
        match self.dir(k) {
            Direction::Downlink => step.actions.push(Action::Open {
                token: base(id) | S_GET,
                src: client,
                dst: server,
                body: Body::Sized(self.plan.request_bytes),
                handshake: false,
            }),
            Direction::Uplink => step.actions.push(Action::Append {
                token: base(id) | S_LOADED,
                load,
                bytes: self.plan.request_bytes,
            }),
        }
        self.probes.push(Probe {
            phase: k as u32,
            launched: now,
            mark: now,
            load,
            tcp_f: None,
            tls_f: None,
            http_f: None,
            http_l: None,
            finished: None,
        });
    }

    pub fn done(&mut self, d: Done) -> AppStep {
        let mut step = AppStep::default();
        if d.token & LOAD != 0 {
            return step;
        }
        let id = (d.token >> 3) as usize;
        let (server, client) = (self.ends.server, self.ends.client);
        let Some(p) = self.probes.get_mut(id) else {
            return step;
        };
        let dir = self.plan.directions[p.phase as usize];
        let ms = |a: Time, b: Time| (a.saturating_since(b)).as_millis_f64();
        let plan = &self.plan;
        // The probe's next transfer on its connection, if any: (stage, from the server,
        // bytes); every one after the first rides on the open connection.
        let mut next: Option<(Token, bool, u64)> = None;
        match d.token & 7 {
            F_CONNECT => {
                let connected = d.connected_at.unwrap_or(d.at);
                let tcp = ms(connected, p.launched);
                p.tcp_f = Some(tcp);
                step.samples.push(sample(dir, "tcp_f_ms", tcp));
                p.mark = connected;
                next = Some(if plan.tls {
                    (F_TLS_SERVER, true, plan.tls_server_bytes)
                } else {
                    (F_RESPONSE, true, plan.response_bytes)
                });
            }
            F_TLS_SERVER => {
                let tls = ms(d.at, p.mark);
                p.tls_f = Some(tls);
                step.samples.push(sample(dir, "tls_f_ms", tls));
                p.mark = d.at;
                next = Some((F_GET, false, plan.request_bytes));
            }
            F_GET => next = Some((F_RESPONSE, true, plan.response_bytes)),
            F_RESPONSE => {
                let http = ms(d.at, p.mark);
                p.http_f = Some(http);
                p.finished = Some(d.at);
                step.samples.push(sample(dir, "http_f_ms", http));
            }
            S_GET => step.actions.push(Action::Append {
                token: (d.token & !7) | S_LOADED,
                load: p.load,
                bytes: plan.response_bytes,
            }),
            S_LOADED if dir == Direction::Uplink => {
                next = Some((S_RESPONSE, true, plan.response_bytes));
            }
            S_LOADED | S_RESPONSE => {
                let l = ms(d.at, p.launched);
                p.http_l = Some(l);
                p.finished = Some(d.at);
                step.samples.push(sample(dir, "http_l_ms", l));
            }
            _ => {}
        }
        if let Some((stage, from_server, bytes)) = next {
            let (src, dst) = if from_server {
                (server, client)
            } else {
                (client, server)
            };
            step.actions.push(Action::Open {
                token: (d.token & !7) | stage,
                src,
                dst,
                body: Body::Sized(bytes),
                handshake: false,
            });
        }
        step
    }

    /// The connection a transfer rides on (`AppMachine::connection`): a foreign probe's
    /// stages share its own connection (its token without the stage bits); a self probe's
    /// request and response ride on its load connection, in both directions.
    pub fn connection(&self, token: Token) -> Token {
        if token & LOAD != 0 {
            return token;
        }
        match token & 7 {
            S_GET | S_LOADED | S_RESPONSE => self
                .probes
                .get((token >> 3) as usize)
                .map_or(token & !7, |p| p.load),
            _ => token & !7,
        }
    }

    /// A foreign probe's connection carries transfers until its response is in.
    pub fn keeps(&self, conn: Token) -> bool {
        if conn & LOAD != 0 {
            return true;
        }
        self.probes
            .get((conn >> 3) as usize)
            .is_some_and(|p| p.finished.is_none())
    }

    /// What the engine's socket model needs for a self probe: the lowat, if any.
    pub fn notsent_lowat(&self) -> Option<u64> {
        self.plan.notsent_lowat
    }

    pub fn summary(&self, _end: Time) -> AppSummary {
        let mut out = AppSummary::default();
        for (k, &dir) in self.plan.directions.iter().enumerate() {
            let (s, e) = self.phase_span(k);
            let from = Time(e.as_ns().saturating_sub(self.plan.window.as_ns())).max(s);
            let mut sets: [Vec<f64>; 4] = Default::default();
            let (mut foreign, mut own) = (0u64, 0u64);
            for p in &self.probes {
                let counted = p.phase as usize == k
                    && p.launched >= from
                    && p.finished.is_some_and(|f| f <= e);
                if !counted {
                    continue;
                }
                if p.http_l.is_some() {
                    own += 1;
                } else {
                    foreign += 1;
                }
                for (set, v) in sets.iter_mut().zip([p.tcp_f, p.tls_f, p.http_f, p.http_l]) {
                    set.extend(v);
                }
            }
            let tmp = self.plan.trim_percent;
            let tm: Vec<Option<f64>> = sets.iter().map(|v| trimmed_mean(v, tmp)).collect();
            let tls = if self.plan.tls { tm[1] } else { None };
            let rpm = match (tm[0], tm[2], tm[3]) {
                (Some(t), Some(h), Some(l)) if !self.plan.tls || tls.is_some() => {
                    Some(responsiveness(t, tls, h, l))
                }
                _ => None,
            };
            out.sections.push((
                dir.name(),
                vec![
                    ("rpm", Number::Real(rpm.map(|r| r.2))),
                    ("foreign_rpm", Number::Real(rpm.map(|r| r.0))),
                    ("loaded_rpm", Number::Real(rpm.map(|r| r.1))),
                    ("tm_tcp_f_ms", Number::Real(tm[0])),
                    ("tm_tls_f_ms", Number::Real(tls)),
                    ("tm_http_f_ms", Number::Real(tm[2])),
                    ("tm_http_l_ms", Number::Real(tm[3])),
                    ("foreign_probes", Number::Count(foreign)),
                    ("self_probes", Number::Count(own)),
                    (
                        "load_connections",
                        Number::Count(self.loads_by_end(k) as u64),
                    ),
                    ("window_start_s", Number::Real(Some(from.as_secs_f64()))),
                    ("window_end_s", Number::Real(Some(e.as_secs_f64()))),
                ],
            ));
        }
        out
    }
}

fn sample(dir: Direction, metric: &'static str, value: f64) -> Sample {
    Sample {
        entity: dir.entity(),
        metric,
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::vocab::Ends;

    /// A 5-s downlink phase from time zero with MNP `connections`, INP `initial`, INC
    /// `added` every second, one probe pair a second, the draft's sizes.
    fn downlink(connections: u32, initial: u32, added: u32) -> Rpm {
        let plan = RpmPlan {
            directions: vec![Direction::Downlink],
            phase: Duration::from_secs(5),
            connections,
            initial_connections: initial,
            added_per_interval: added,
            interval: Duration::from_secs(1),
            probes_per_second: 1,
            window: Duration::from_secs(2),
            trim_percent: 95.0,
            tls: true,
            request_bytes: 100,
            response_bytes: 100,
            tls_client_bytes: 517,
            tls_server_bytes: 4000,
            notsent_lowat: None,
        };
        let ends = Ends {
            server: 0,
            client: 1,
            start: Time::ZERO,
            stop: Time::MAX,
        };
        Rpm::new(plan, ends, Rng::stream(1, "t", 0))
    }

    /// The connection map a live engine uses (`AppMachine::connection`): a foreign probe's
    /// four transfers share its connection, which is done once its response is in; a self
    /// probe's request rides on the load connection its bytes are then appended to.
    #[test]
    fn probes_map_onto_their_connections() {
        let mut m = downlink(2, 2, 1);
        let s = m.wake(Time::ZERO);
        let tokens: Vec<Token> = s
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Open { token, .. } => Some(*token),
                _ => None,
            })
            .collect();
        // Two loads, then the foreign probe's ClientHello (probe 0) and the self probe's GET
        // (probe 1).
        assert_eq!(tokens.len(), 4);
        let (loads, foreign, own) = (&tokens[..2], tokens[2], tokens[3]);
        assert_eq!((foreign, own), (F_CONNECT, 8 | S_GET));
        for l in loads {
            assert_eq!(m.connection(*l), *l);
            assert!(m.keeps(*l));
        }
        for stage in [F_CONNECT, F_TLS_SERVER, F_GET, F_RESPONSE] {
            assert_eq!(m.connection(stage), 0);
        }
        let at = |ms| Time::ZERO + Duration::from_ms(ms);
        let done = |m: &mut Rpm, token, ms| {
            m.done(Done {
                token,
                at: at(ms),
                connected_at: Some(at(ms)),
            })
        };
        // The self probe's GET is in: its response goes on the load connection it rides on.
        let s = done(&mut m, own, 20);
        let Some(Action::Append { load, .. }) = s.actions.first().cloned() else {
            panic!("{:?}", s.actions)
        };
        assert!(loads.contains(&load));
        assert_eq!(m.connection(own), load);
        assert_eq!(m.connection(8 | S_LOADED), load);
        // The foreign probe's connection is kept until its response is in.
        for (stage, ms) in [(F_CONNECT, 20), (F_TLS_SERVER, 40), (F_GET, 50)] {
            done(&mut m, stage, ms);
            assert!(m.keeps(0));
        }
        done(&mut m, F_RESPONSE, 60);
        assert!(!m.keeps(0));
    }

    #[test]
    fn every_probe_type_at_140_ms_is_429_rpm() {
        // The brief's hand-worked truth: 60 s / 0.140 s = 428.571… round trips a minute,
        // whichever probe type; with and without TLS.
        let (f, l, r) = responsiveness(140.0, Some(140.0), 140.0, 140.0);
        assert!((f - 428.571_428).abs() < 1e-3, "{f}");
        assert!((l - 428.571_428).abs() < 1e-3, "{l}");
        assert!((r - 428.571_428).abs() < 1e-3, "{r}");
        assert_eq!(r.round(), 429.0);
        let (_, _, r) = responsiveness(140.0, None, 140.0, 140.0);
        assert_eq!(r.round(), 429.0);
    }

    #[test]
    fn foreign_and_loaded_are_averaged_as_rates_not_as_times() {
        // tcp 20, tls 40, http 60 ms: foreign = 60000 / 40 = 1500 RPM; http_l = 300 ms:
        // loaded = 200 RPM; RPM = (1500 + 200) / 2 = 850 — not 60000 / mean time
        // (60000 / ((40 + 300) / 2) = 352.9), so the order matters.
        let (f, l, r) = responsiveness(20.0, Some(40.0), 60.0, 300.0);
        assert_eq!((f, l, r), (1500.0, 200.0, 850.0));
        // TCP-only: (20 + 60) / 2 = 40 ms → 1500 again.
        assert_eq!(responsiveness(20.0, None, 60.0, 300.0).0, 1500.0);
    }

    #[test]
    fn trimmed_mean_drops_the_samples_above_the_percentile() {
        // 1..=20 ms: the 95 % trimmed mean keeps 19 samples (drops the 20): mean 10.
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(trimmed_mean(&v, 95.0), Some(10.0));
        // Unsorted input with one 1000 ms outlier among 10: ⌊9.5⌋ = 9 kept, the outlier
        // goes: (5+1+4+2+3+9+7+8+6)/9 = 5.
        let v = [5.0, 1.0, 1000.0, 4.0, 2.0, 3.0, 9.0, 7.0, 8.0, 6.0];
        assert_eq!(trimmed_mean(&v, 95.0), Some(5.0));
        // 100 % keeps all; one sample stays whatever the percentile.
        assert_eq!(trimmed_mean(&[1.0, 3.0], 100.0), Some(2.0));
        assert_eq!(trimmed_mean(&[7.0], 50.0), Some(7.0));
        assert_eq!(trimmed_mean(&[], 95.0), None);
    }

    /// The draft's ramp ("Final Algorithm"): INP at the start, INC more each ID, up to MNP.
    #[test]
    fn load_connections_ramp_by_inc_every_interval_up_to_mnp() {
        let mut m = downlink(5, 1, 2);
        let bulk = |s: &AppStep| {
            s.actions
                .iter()
                .filter(|a| {
                    matches!(
                        a,
                        Action::Open {
                            body: Body::Bulk,
                            ..
                        }
                    )
                })
                .count()
        };
        let stops = |s: &AppStep| {
            s.actions
                .iter()
                .filter(|a| matches!(a, Action::Stop { .. }))
                .count()
        };
        // 1 at 0 s, 2 at 1 s, 2 at 2 s (5 = MNP), none at 3 s and 4 s; 5 stop at 5 s.
        let mut opened = Vec::new();
        let mut t = Time::ZERO;
        let mut stopped = 0;
        while t < Time::ZERO + Duration::from_secs(6) {
            let s = m.wake(t);
            opened.push((t.as_secs_f64(), bulk(&s)));
            stopped += stops(&s);
            match s.wake_at {
                Some(w) => t = w,
                None => break,
            }
        }
        let at = |x: f64| {
            opened
                .iter()
                .filter(|o| o.0 == x)
                .map(|o| o.1)
                .sum::<usize>()
        };
        assert_eq!(
            [at(0.0), at(1.0), at(2.0), at(3.0), at(4.0)],
            [1, 2, 2, 0, 0]
        );
        assert_eq!(opened.iter().map(|o| o.1).sum::<usize>(), 5);
        assert_eq!(stopped, 5);
        assert_eq!(m.loads_by_end(0), 5);
    }

    #[test]
    fn trimmed_means_per_type_then_the_formula() {
        // The draft's order: a trimmed mean per data-point type, then the formula — not a
        // responsiveness per probe, averaged. Two probes, no trimming (100 %): one with
        // every time 10 ms, one with every time 30 ms. Per type: TM = 20 ms everywhere →
        // 60000 / 20 = 3000 RPM. (Per probe: 6000 and 2000 RPM, averaging to 4000.)
        let tm = |v: &[f64]| trimmed_mean(v, 100.0).unwrap();
        let both = [10.0, 30.0];
        assert_eq!(
            responsiveness(tm(&both), Some(tm(&both)), tm(&both), tm(&both)).2,
            3000.0
        );
        // Each type is trimmed on its own: 20 probes, all 10 ms, except one probe's tcp_f
        // (1000 ms) and another probe's http_l (2000 ms). At 95 % each type drops its own
        // outlier: every TM is 10 ms → 6000 RPM. (Dropping whole probes by their total
        // time would drop only the 2000-ms probe and keep the 1000-ms tcp_f:
        // TM(tcp_f) = (18·10 + 1000)/19 ≈ 62.1 ms.)
        let mut tcp = vec![10.0; 20];
        tcp[0] = 1000.0;
        let mut l = vec![10.0; 20];
        l[1] = 2000.0;
        let ten = vec![10.0; 20];
        let tm = |v: &[f64]| trimmed_mean(v, 95.0).unwrap();
        assert_eq!(
            responsiveness(tm(&tcp), Some(tm(&ten)), tm(&ten), tm(&l)).2,
            6000.0
        );
    }
}
