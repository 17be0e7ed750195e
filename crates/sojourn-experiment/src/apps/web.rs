//! Web page loads (`kind = "web"`): the client fetches a page — an HTML document and
//! `objects` embedded objects — over at most `connections` parallel HTTP/1.1 keep-alive
//! connections (6: what browsers open per host), in two dependency rounds: the HTML
//! first (it names the objects), then every object, each connection taking the next
//! object from the page's queue as soon as its previous response is in. The page load
//! time (PLT) runs from the page's start to the last object's last byte; then the client
//! thinks and loads the next page.
//!
//! Each page is a new site: its connections are new (the HTML's request and each other
//! connection's first request pay a TCP handshake), and later requests on a connection
//! ride on it without one. Every request and response is its own transfer in the engine,
//! so a response starts from the initial window again (Linux's
//! `tcp_slow_start_after_idle` does the same after an idle RTO; a busy keep-alive
//! connection would keep its window: docs/tests.md says so).

use crate::apps::vocab::{
    describe, message_bytes, Action, AppStep, AppSummary, Body, Done, Ends, Number, Sample, Token,
};
use crate::dist::{IntervalDist, SizeDist};
use sojourn_core::params::{ConfResult, Params};
use sojourn_core::rng::Rng;
use sojourn_core::{Duration, Time};
use std::collections::VecDeque;
use std::path::Path;

/// A parsed `kind = "web"` workload.
#[derive(Clone, Debug)]
pub struct WebPlan {
    /// Embedded objects per page (besides the HTML).
    pub objects: u32,
    pub html_size: SizeDist,
    pub object_size: SizeDist,
    /// Parallel connections per page.
    pub connections: u32,
    /// Between a page's end and the next page's start.
    pub think: IntervalDist,
    pub request_bytes: u64,
    /// Pages to load (0: until the workload's stop or the run's end).
    pub pages: u32,
}

impl WebPlan {
    pub(crate) fn parse(base_dir: &Path, p: &mut Params) -> ConfResult<WebPlan> {
        let objects = p.u32("objects", 20, 0, 10_000)?;
        let html_size =
            SizeDist::parse(p, "html_size", base_dir)?.unwrap_or(SizeDist::Fixed(30_000));
        let object_size = SizeDist::parse(p, "object_size", base_dir)?
            .unwrap_or(SizeDist::Exponential { mean: 20_000.0 });
        let connections = p.u32("connections", 6, 1, 64)?;
        let think = IntervalDist::parse(p, "think", true)?
            .unwrap_or(IntervalDist::Fixed(Duration::from_secs(2)));
        let request_bytes = message_bytes(p, "request_size", 300)?;
        let pages = p.u32("pages", 0, 0, u32::MAX)?;
        Ok(WebPlan {
            objects,
            html_size,
            object_size,
            connections,
            think,
            request_bytes,
            pages,
        })
    }

    /// Mean bytes of a page (requests included).
    pub fn mean_page_bytes(&self) -> f64 {
        let n = self.objects as f64;
        self.html_size.mean() + n * self.object_size.mean() + (n + 1.0) * self.request_bytes as f64
    }
}

#[derive(Clone, Debug, Default)]
struct Conn {
    /// Its first request went out (with the handshake).
    opened: bool,
    busy: bool,
}

/// One `web` entry's state machine.
#[derive(Clone, Debug)]
pub struct Web {
    plan: WebPlan,
    pub(super) ends: Ends,
    rng: Rng,
    page: u64,
    page_start: Time,
    loading: bool,
    /// Sizes of the objects of the current page not yet requested (round 2).
    queue: VecDeque<u64>,
    /// Objects of round 2 whose responses are not in yet.
    outstanding: u32,
    objects: Vec<u64>,
    conns: Vec<Conn>,
    plts_s: Vec<f64>,
    done_pages: u32,
}

// Tokens: page << 32 | object << 2 | connection-stage bit; object 0 is the HTML.
const RESPONSE: u64 = 1;

impl Web {
    pub fn new(plan: WebPlan, ends: Ends, rng: Rng) -> Web {
        Web {
            plan,
            ends,
            rng,
            page: 0,
            page_start: Time::ZERO,
            loading: false,
            queue: VecDeque::new(),
            outstanding: 0,
            objects: Vec::new(),
            conns: Vec::new(),
            plts_s: Vec::new(),
            done_pages: 0,
        }
    }

    fn token(&self, object: u32, conn: usize, response: bool) -> Token {
        self.page << 32 | (object as u64) << 8 | (conn as u64) << 1 | response as u64
    }

    /// A request for `object` on connection `c` (its first pays the handshake).
    fn request(&mut self, object: u32, c: usize, step: &mut AppStep) {
        let first = !self.conns[c].opened;
        self.conns[c].opened = true;
        self.conns[c].busy = true;
        step.actions.push(Action::Open {
            token: self.token(object, c, false),
            src: self.ends.client,
            dst: self.ends.server,
            body: Body::Sized(self.plan.request_bytes),
            handshake: first,
        });
    }

    pub fn wake(&mut self, now: Time) -> AppStep {
        let mut step = AppStep::default();
        if self.loading || now >= self.ends.stop {
            return step;
        }
        if self.plan.pages > 0 && self.done_pages >= self.plan.pages {
            return step;
        }
        // A new page: its sizes, drawn in a fixed order (HTML, then each object).
        self.page += 1;
        self.page_start = now;
        self.loading = true;
        self.objects.clear();
        self.objects.push(self.plan.html_size.draw(&mut self.rng));
        for _ in 0..self.plan.objects {
            let s = self.plan.object_size.draw(&mut self.rng);
            self.objects.push(s);
        }
        self.conns = vec![Conn::default(); self.plan.connections as usize];
        self.request(0, 0, &mut step);
        step
    }

    pub fn done(&mut self, d: Done) -> AppStep {
        let mut step = AppStep::default();
        if d.token >> 32 != self.page || !self.loading {
            return step;
        }
        let object = ((d.token >> 8) & 0xff_ffff) as u32;
        let c = ((d.token >> 1) & 0x7f) as usize;
        if d.token & RESPONSE == 0 {
            // The request is in at the server: it answers on the same connection.
            step.actions.push(Action::Open {
                token: self.token(object, c, true),
                src: self.ends.server,
                dst: self.ends.client,
                body: Body::Sized(self.objects[object as usize]),
                handshake: false,
            });
            return step;
        }
        self.conns[c].busy = false;
        if object == 0 {
            // Round 2: every object, over the page's connections.
            self.queue = (1..=self.plan.objects).map(|i| i as u64).collect();
            self.outstanding = self.plan.objects;
        } else {
            self.outstanding -= 1;
        }
        for c in 0..self.conns.len() {
            if self.conns[c].busy {
                continue;
            }
            let Some(o) = self.queue.pop_front() else {
                break;
            };
            self.request(o as u32, c, &mut step);
        }
        if self.outstanding == 0 && self.queue.is_empty() {
            let plt = d.at.saturating_since(self.page_start).as_secs_f64();
            self.plts_s.push(plt);
            self.done_pages += 1;
            self.loading = false;
            step.samples.push(Sample {
                entity: "web",
                metric: "plt_s",
                value: plt,
            });
            let next = d.at + self.plan.think.draw(&mut self.rng);
            if next < self.ends.stop && (self.plan.pages == 0 || self.done_pages < self.plan.pages)
            {
                step.wake_at = Some(next);
            }
        }
        step
    }

    /// The connection a request or response rides on: the page's connection it names
    /// (its token without the object and response bits).
    pub fn connection(token: Token) -> Token {
        token & !((0xff_ffff << 8) | RESPONSE)
    }

    /// A page's connections carry transfers until the page is loaded.
    pub fn keeps(&self, conn: Token) -> bool {
        self.loading && conn >> 32 == self.page
    }

    pub fn summary(&self, _end: Time) -> AppSummary {
        let mut v = self.plts_s.clone();
        let [mean, p50, p95, max] = describe(&mut v);
        AppSummary {
            sections: vec![(
                "",
                vec![
                    ("pages", Number::Count(self.plts_s.len() as u64)),
                    ("objects_per_page", Number::Count(self.plan.objects as u64)),
                    ("connections", Number::Count(self.plan.connections as u64)),
                    ("plt_mean_s", Number::Real(mean)),
                    ("plt_p50_s", Number::Real(p50)),
                    ("plt_p95_s", Number::Real(p95)),
                    ("plt_max_s", Number::Real(max)),
                ],
            )],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_rides_on_the_page_connection_its_token_names() {
        // Page 1, object 3 on connection 2, the response: 1 << 32 | 3 << 8 | 2 << 1 | 1.
        assert_eq!(Web::connection(0x1_0000_0305), 0x1_0000_0004);
        // Its request, and another object on the same connection: the same connection.
        assert_eq!(Web::connection(0x1_0000_0304), 0x1_0000_0004);
        assert_eq!(Web::connection(0x1_0000_0705), 0x1_0000_0004);
        // Connection 0 of page 2 is another connection.
        assert_eq!(Web::connection(0x2_0000_0001), 0x2_0000_0000);
    }
}
