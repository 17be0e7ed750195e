//! Adaptive video (`kind = "video"`): a player fetches segments of `segment` seconds of
//! video, one after the other over one persistent connection (the first request pays
//! the TCP handshake), each at a bitrate from the `bitrates` ladder chosen by the
//! buffer-based rule BBA-0 of Huang et al., "A Buffer-Based Approach to Rate Adaptation"
//! (SIGCOMM 2014, Algorithm 1):
//!
//! With `B` the buffer (seconds of video held), reservoir `r`, cushion `cu`, the ladder
//! `R_min … R_max` and the rate map `f(B)`, linear from `(r, R_min)` to `(r + cu, R_max)`;
//! `Rate+` the next rate above the previous segment's (`R_max` if it was `R_max`) and
//! `Rate−` the next one below (`R_min` if it was `R_min`):
//! - `B ≤ r` → `R_min`; `B ≥ r + cu` → `R_max`;
//! - else if `f(B) ≥ Rate+` → the largest rate strictly below `f(B)`;
//! - else if `f(B) ≤ Rate−` → the smallest rate strictly above `f(B)`;
//! - else the previous rate (the hysteresis that keeps the rate from flapping).
//!
//! The first segment's "previous" rate is `R_min`. A segment of rate `R` is `R × segment
//! / 8` bytes. The player requests the next segment as soon as the last one is in, unless
//! the buffer would exceed `max_buffer`; then it waits until one segment's room is free.
//! Playback starts once `startup_segments` segments are buffered (startup delay: the
//! session's start to then), drains the buffer in real time, stalls when it empties and
//! resumes when the next segment arrives. Rebuffering ratio: stalled time ÷ (playing +
//! stalled time), after startup, up to the run's end (or the workload's stop).

use crate::apps::vocab::{
    message_bytes, Action, AppStep, AppSummary, Body, Done, Ends, Number, Sample, Token,
};
use sojourn_core::params::{ConfError, ConfResult, Params, Value};
use sojourn_core::{units, Duration, Time};

/// A parsed `kind = "video"` workload.
#[derive(Clone, Debug)]
pub struct VideoPlan {
    pub segment: Duration,
    /// The ladder, strictly increasing, bit/s.
    pub bitrates_bps: Vec<u64>,
    pub reservoir: Duration,
    pub cushion: Duration,
    pub max_buffer: Duration,
    pub startup_segments: u32,
    pub request_bytes: u64,
    /// Segments of the video (0: as many as the run allows).
    pub segments: u32,
}

impl VideoPlan {
    pub(crate) fn parse(p: &mut Params) -> ConfResult<VideoPlan> {
        let segment = p.duration("segment", Duration::from_secs(4))?;
        if segment < Duration::from_ms(100) {
            return Err(p.err("segment", format!("{segment} is below 100 ms")));
        }
        let bitrates_bps = match p.raw("bitrates") {
            None => vec![1_000_000, 2_500_000, 5_000_000, 8_000_000],
            Some(Value::Array(a)) if !a.is_empty() => {
                let mut v = Vec::new();
                for (i, x) in a.iter().enumerate() {
                    let key = format!("{}.bitrates[{i}]", p.path());
                    let r = match x {
                        Value::Str(s) => {
                            units::parse_rate(s).map_err(|m| ConfError::new(&key, m))?
                        }
                        _ => {
                            return Err(ConfError::new(
                                key,
                                format!("expected a rate like \"2.5Mbit\", got {}", x.type_name()),
                            ))
                        }
                    };
                    if r == 0 {
                        return Err(ConfError::new(key, "must be positive"));
                    }
                    if v.last().is_some_and(|&l| r <= l) {
                        return Err(ConfError::new(key, "the ladder must increase strictly"));
                    }
                    v.push(r);
                }
                v
            }
            Some(x) => {
                return Err(p.err(
                    "bitrates",
                    format!("expected a non-empty list of rates, got {}", x.type_name()),
                ))
            }
        };
        let max_buffer = p.duration("max_buffer", Duration::from_secs(30))?;
        let reservoir = p.duration("reservoir", Duration::from_secs(10))?;
        let cushion = p.duration("cushion", Duration::from_secs(16))?;
        if cushion.is_zero() {
            return Err(p.err("cushion", "must be positive"));
        }
        if reservoir + cushion > max_buffer {
            return Err(p.err(
                "cushion",
                format!(
                    "reservoir + cushion ({}) exceeds max_buffer ({max_buffer})",
                    reservoir + cushion
                ),
            ));
        }
        if max_buffer < segment {
            return Err(p.err(
                "max_buffer",
                format!("{max_buffer} holds less than one segment ({segment})"),
            ));
        }
        let startup_segments = p.u32("startup_segments", 1, 1, 1000)?;
        if segment * startup_segments as u64 > max_buffer {
            return Err(p.err(
                "startup_segments",
                format!("{startup_segments} segments of {segment} do not fit in max_buffer ({max_buffer})"),
            ));
        }
        let request_bytes = message_bytes(p, "request_size", 300)?;
        let segments = p.u32("segments", 0, 0, u32::MAX)?;
        Ok(VideoPlan {
            segment,
            bitrates_bps,
            reservoir,
            cushion,
            max_buffer,
            startup_segments,
            request_bytes,
            segments,
        })
    }

    /// Bytes of a segment at `rate_bps`.
    pub fn segment_bytes(&self, rate_bps: u64) -> u64 {
        ((rate_bps as u128 * self.segment.as_ns() as u128) / 8_000_000_000) as u64
    }
}

/// BBA-0 (Huang et al. 2014, Algorithm 1; the module's text): the next segment's rate from
/// the previous one and the buffer `buffer` (the ladder strictly increasing).
pub fn bba0(
    ladder: &[u64],
    prev: u64,
    buffer: Duration,
    reservoir: Duration,
    cushion: Duration,
) -> u64 {
    let (min, max) = (ladder[0], ladder[ladder.len() - 1]);
    if buffer <= reservoir {
        return min;
    }
    if buffer >= reservoir + cushion {
        return max;
    }
    let plus = ladder.iter().copied().find(|&r| r > prev).unwrap_or(max);
    let minus = ladder
        .iter()
        .rev()
        .copied()
        .find(|&r| r < prev)
        .unwrap_or(min);
    let x = (buffer - reservoir).as_secs_f64() / cushion.as_secs_f64();
    let f = min as f64 + (max - min) as f64 * x;
    if f >= plus as f64 {
        ladder
            .iter()
            .rev()
            .copied()
            .find(|&r| (r as f64) < f)
            .unwrap_or(min)
    } else if f <= minus as f64 {
        ladder
            .iter()
            .copied()
            .find(|&r| (r as f64) > f)
            .unwrap_or(max)
    } else {
        prev
    }
}

/// One `video` entry's state machine.
#[derive(Clone, Debug)]
pub struct Video {
    plan: VideoPlan,
    pub(super) ends: Ends,
    /// Segments requested and received.
    requested: u32,
    received: u32,
    in_flight: Option<(u32, u64)>,
    prev_rate: u64,
    /// Buffered video and when it was last brought up to date.
    buffer: Duration,
    updated: Time,
    play_started: Option<Time>,
    stalled: bool,
    /// Every segment is in and the buffer ran dry: the video ended.
    ended: bool,
    played: Duration,
    stall: Duration,
    stalls: u32,
    rates: Vec<u64>,
    switches: u32,
    waiting: bool,
}

impl Video {
    pub fn new(plan: VideoPlan, ends: Ends) -> Video {
        let first = plan.bitrates_bps[0];
        Video {
            plan,
            ends,
            requested: 0,
            received: 0,
            in_flight: None,
            prev_rate: first,
            buffer: Duration::ZERO,
            updated: ends.start,
            play_started: None,
            stalled: false,
            ended: false,
            played: Duration::ZERO,
            stall: Duration::ZERO,
            stalls: 0,
            rates: Vec::new(),
            switches: 0,
            waiting: false,
        }
    }

    fn all_requested(&self) -> bool {
        self.plan.segments > 0 && self.requested >= self.plan.segments
    }

    /// Plays (or stalls) from the last update to `now`.
    fn advance(&mut self, now: Time) {
        let dt = now.saturating_since(self.updated);
        self.updated = now.max(self.updated);
        if self.play_started.is_none() || self.ended {
            return;
        }
        if self.stalled {
            self.stall += dt;
        } else if dt >= self.buffer {
            self.played += self.buffer;
            if self.all_requested() && self.in_flight.is_none() {
                self.ended = true;
            } else {
                self.stalled = true;
                self.stalls += 1;
                self.stall += dt - self.buffer;
            }
            self.buffer = Duration::ZERO;
        } else {
            self.played += dt;
            self.buffer -= dt;
        }
    }

    fn token(seg: u32, response: bool) -> Token {
        (seg as u64) << 1 | response as u64
    }

    /// Requests the next segment now if there is room, else wakes when there will be.
    fn next(&mut self, now: Time, step: &mut AppStep) {
        if self.in_flight.is_some() || self.all_requested() || now >= self.ends.stop {
            return;
        }
        let room = Duration(self.plan.max_buffer.as_ns() - self.plan.segment.as_ns());
        if self.buffer > room {
            // Playing (the buffer holds more than nothing): room frees in real time.
            self.waiting = true;
            step.wake_at = Some(now + (self.buffer - room));
            return;
        }
        let p = &self.plan;
        let rate = bba0(
            &p.bitrates_bps,
            self.prev_rate,
            self.buffer,
            p.reservoir,
            p.cushion,
        );
        let seg = self.requested;
        self.requested += 1;
        self.in_flight = Some((seg, rate));
        step.actions.push(Action::Open {
            token: Self::token(seg, false),
            src: self.ends.client,
            dst: self.ends.server,
            body: Body::Sized(self.plan.request_bytes),
            handshake: seg == 0,
        });
    }

    pub fn wake(&mut self, now: Time) -> AppStep {
        let mut step = AppStep::default();
        self.advance(now);
        self.waiting = false;
        self.next(now, &mut step);
        step
    }

    pub fn done(&mut self, d: Done) -> AppStep {
        let mut step = AppStep::default();
        let Some((seg, rate)) = self.in_flight else {
            return step;
        };
        if d.token >> 1 != seg as u64 {
            return step;
        }
        if d.token & 1 == 0 {
            step.actions.push(Action::Open {
                token: Self::token(seg, true),
                src: self.ends.server,
                dst: self.ends.client,
                body: Body::Sized(self.plan.segment_bytes(rate)),
                handshake: false,
            });
            return step;
        }
        self.advance(d.at);
        self.in_flight = None;
        self.received += 1;
        self.buffer += self.plan.segment;
        if self.stalled {
            self.stalled = false;
        }
        if self.play_started.is_none() && self.received >= self.plan.startup_segments {
            self.play_started = Some(d.at);
        }
        if !self.rates.is_empty() && rate != self.prev_rate {
            self.switches += 1;
        }
        self.prev_rate = rate;
        self.rates.push(rate);
        step.samples.push(Sample {
            entity: "video",
            metric: "bitrate_bps",
            value: rate as f64,
        });
        step.samples.push(Sample {
            entity: "video",
            metric: "buffer_s",
            value: self.buffer.as_secs_f64(),
        });
        self.next(d.at, &mut step);
        step
    }

    /// Every request and segment rides on the session's one connection.
    pub fn connection(_token: Token) -> Token {
        0
    }

    pub fn summary(&self, end: Time) -> AppSummary {
        let mut v = self.clone();
        v.advance(end.min(self.ends.stop));
        let watched = v.played + v.stall;
        let mean_rate = if v.rates.is_empty() {
            None
        } else {
            Some(v.rates.iter().map(|&r| r as f64).sum::<f64>() / v.rates.len() as f64)
        };
        let startup = v
            .play_started
            .map(|t| t.saturating_since(self.ends.start).as_secs_f64());
        AppSummary {
            sections: vec![(
                "",
                vec![
                    ("segments", Number::Count(v.rates.len() as u64)),
                    ("mean_bitrate_bps", Number::Real(mean_rate)),
                    ("switches", Number::Count(v.switches as u64)),
                    ("stalls", Number::Count(v.stalls as u64)),
                    ("startup_delay_s", Number::Real(startup)),
                    ("played_s", Number::Real(Some(v.played.as_secs_f64()))),
                    ("rebuffering_s", Number::Real(Some(v.stall.as_secs_f64()))),
                    (
                        "rebuffering_ratio",
                        Number::Real(
                            (!watched.is_zero())
                                .then(|| v.stall.as_secs_f64() / watched.as_secs_f64()),
                        ),
                    ),
                ],
            )],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LADDER: [u64; 4] = [1_000_000, 2_500_000, 5_000_000, 8_000_000];

    fn s(x: u64) -> Duration {
        Duration::from_secs(x)
    }

    #[test]
    fn bba0_reservoir_cushion_and_hysteresis() {
        // r = 10 s, cu = 16 s: f(B) = 1 + 7 (B − 10) / 16 Mbit/s.
        let (r, cu) = (s(10), s(16));
        // In the reservoir: R_min whatever came before; past r + cu = 26 s: R_max.
        assert_eq!(bba0(&LADDER, 8_000_000, s(10), r, cu), 1_000_000);
        assert_eq!(bba0(&LADDER, 1_000_000, s(26), r, cu), 8_000_000);
        // B = 18 s: f = 1 + 7·8/16 = 4.5 Mbit/s. From 1 Mbit/s, Rate+ = 2.5 ≤ 4.5: up to
        // the largest rate below 4.5, 2.5 Mbit/s (one rung, not to 5).
        assert_eq!(bba0(&LADDER, 1_000_000, s(18), r, cu), 2_500_000);
        // From 2.5: Rate+ = 5 > 4.5 and Rate− = 1 < 4.5: stay.
        assert_eq!(bba0(&LADDER, 2_500_000, s(18), r, cu), 2_500_000);
        // From 8: Rate− = 5 ≥ 4.5: down to the smallest rate above 4.5, 5 Mbit/s.
        assert_eq!(bba0(&LADDER, 8_000_000, s(18), r, cu), 5_000_000);
        // B = 22 s: f = 1 + 7·12/16 = 6.25: from 5, Rate+ = 8 > 6.25, Rate− = 2.5: stay.
        assert_eq!(bba0(&LADDER, 5_000_000, s(22), r, cu), 5_000_000);
    }

    #[test]
    fn segment_bytes_are_rate_times_duration() {
        let p = VideoPlan {
            segment: s(4),
            bitrates_bps: LADDER.to_vec(),
            reservoir: s(10),
            cushion: s(16),
            max_buffer: s(30),
            startup_segments: 1,
            request_bytes: 300,
            segments: 0,
        };
        // 2.5 Mbit/s × 4 s / 8 = 1 250 000 B.
        assert_eq!(p.segment_bytes(2_500_000), 1_250_000);
    }
}
