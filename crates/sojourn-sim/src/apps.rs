//! Application workloads in the simulator (`rpm`, `web`, `video`): the engine side of the
//! experiment model's sans-IO machines ([`sojourn_experiment::apps`]). A machine asks for
//! transfers, self-probe writes on its load connections and stops; this module does them
//! with the simulator's TCP and reports completions back, records the machine's samples
//! in the time series (entity `w{workload}.{entity}`) and builds its summary.json block.
//!
//! **Self probes** ([`Action::Append`]): a load connection's sender holds an unbounded
//! transfer, so the engine models what its socket holds unsent when the probe's bytes are
//! written: as much as it has in flight (Linux autotunes `sk_sndbuf` to about twice the
//! congestion window, `tcp_sndbuf_expand`, and a bulk writer keeps it full, so about one
//! window's worth waits unsent behind the window in flight), or at most the plan's
//! `notsent_lowat` (the socket option `TCP_NOTSENT_LOWAT`, which the draft recommends). The
//! probe's bytes end at sequence `snd_nxt + unsent + bytes` (never before an earlier
//! probe's on the same connection), and its receiver reports when its application has
//! every byte up to there.

use crate::app::{AppDriver, Load};
use crate::dispatch::AnyEndpoint;
use crate::sim::Sim;
use crate::tcp::sender::Source;
use serde_json::Value as J;
use sojourn_core::Time;
use sojourn_experiment::apps::{Action, AppMachine, AppStep, Body, Done, Token};
use std::collections::VecDeque;

impl Sim {
    /// The first wake-up of application generator `a`, if it has one.
    pub(crate) fn start_app(&mut self, a: u32) -> bool {
        let Some(d) = self.apps[a as usize].as_ref().and_then(|g| g.app.as_ref()) else {
            return false;
        };
        if let Some(at) = d.machine.first_wake() {
            self.app_timer(a, at);
        }
        true
    }

    /// Generator `a`'s timer fired; false if it is not an application workload.
    pub(crate) fn wake_app(&mut self, a: u32) -> bool {
        let now = self.now;
        let step = match self.apps[a as usize].as_mut().and_then(|g| g.app.as_mut()) {
            Some(d) => d.machine.wake(now),
            None => return false,
        };
        self.apply_app_step(a, step);
        true
    }

    /// A flow application generator `a` owns completed; false if `a` is no application
    /// workload (the caller then treats it as a generator's).
    pub(crate) fn app_flow_completed(&mut self, a: u32, flow: u32) -> bool {
        let now = self.now;
        let Some(d) = self.apps[a as usize].as_mut().and_then(|g| g.app.as_mut()) else {
            return false;
        };
        let Some((token, handshake)) = d.watching.remove(&flow) else {
            return true;
        };
        let connected_at = if handshake {
            self.flows.get(flow).first_byte
        } else {
            None
        };
        let step = d.machine.done(Done {
            token,
            at: now,
            connected_at,
        });
        self.apply_app_step(a, step);
        true
    }

    /// A load connection's receiver reached a self probe's bytes (its `Completed` note):
    /// true if `flow` is such a connection (the note is then no end of the flow).
    pub(crate) fn app_marker_reached(&mut self, flow: u32) -> bool {
        let a = self.flows.get(flow).owner;
        if a == u32::MAX {
            return false;
        }
        let now = self.now;
        let Some(d) = self.apps[a as usize].as_mut().and_then(|g| g.app.as_mut()) else {
            return false;
        };
        let Some(li) = d.loads.iter().position(|l| l.flow == flow) else {
            return false;
        };
        let sid = d.loads[li].sender;
        if !self.serves(sid, flow) {
            return true;
        }
        let AnyEndpoint::TcpSender(s) = self.endpoint(sid) else {
            return true;
        };
        let rid = s.peer;
        let delivered = match self.endpoint(rid) {
            AnyEndpoint::TcpReceiver(r) => r.delivered,
            _ => return true,
        };
        let mut reached = Vec::new();
        let load = &mut self.app_driver(a).loads[li];
        while let Some(&(at, token)) = load.markers.front() {
            if at > delivered {
                break;
            }
            load.markers.pop_front();
            reached.push(token);
        }
        let next = load.markers.front().map(|m| m.0);
        if let (Some(next), AnyEndpoint::TcpReceiver(r)) = (next, self.endpoint_mut(rid)) {
            r.notify_when_delivered(next);
        }
        for token in reached {
            let step = match self.apps[a as usize].as_mut().and_then(|g| g.app.as_mut()) {
                Some(d) => d.machine.done(Done {
                    token,
                    at: now,
                    connected_at: None,
                }),
                None => break,
            };
            self.apply_app_step(a, step);
        }
        true
    }

    /// Does what application generator `a` asked, records its samples, sets its wake-up.
    fn apply_app_step(&mut self, a: u32, step: AppStep) {
        let g = self.apps[a as usize].as_ref().expect("a live generator");
        let (index, mut cfg) = (g.index, g.cfg.clone());
        let lowat = match &g.app.as_ref().expect("an application").machine {
            AppMachine::Rpm(r) => r.notsent_lowat(),
            _ => None,
        };
        for s in &step.samples {
            let entity = format!("w{index}.{}", s.entity);
            self.series.push(self.now, &entity, s.metric, s.value);
        }
        for act in step.actions {
            match act {
                Action::Open {
                    token,
                    src,
                    dst,
                    body,
                    handshake,
                } => {
                    cfg.handshake = handshake;
                    let (source, size) = match body {
                        Body::Sized(n) => (Source::Sized(n), n),
                        Body::Bulk => (Source::Bulk, 0),
                    };
                    let flow = self.open_tcp(src, dst, source, size, &cfg, index);
                    self.set_flow_owner(flow, a);
                    let d = self.app_driver(a);
                    match body {
                        Body::Sized(_) => {
                            d.watching.insert(flow, (token, handshake));
                        }
                        Body::Bulk => {
                            let sender = self.tcp_sender_of(flow).expect("just opened");
                            self.app_driver(a).loads.push(Load {
                                token,
                                flow,
                                sender,
                                claimed: 0,
                                markers: VecDeque::new(),
                                stopped: false,
                            });
                        }
                    }
                }
                Action::Append { token, load, bytes } => self.append(a, token, load, bytes, lowat),
                Action::Stop { load } => self.stop_load(a, load),
            }
        }
        if let Some(at) = step.wake_at {
            self.app_timer(a, at);
        }
    }

    fn app_driver(&mut self, a: u32) -> &mut AppDriver {
        self.apps[a as usize]
            .as_mut()
            .and_then(|g| g.app.as_deref_mut())
            .expect("an application generator")
    }

    /// A self probe's `bytes` written on load connection `load` (module text).
    fn append(&mut self, a: u32, token: Token, load: Token, bytes: u64, lowat: Option<u64>) {
        let d = self.app_driver(a);
        let Some(li) = d.loads.iter().position(|l| l.token == load) else {
            return;
        };
        let (flow, sid, stopped) = (d.loads[li].flow, d.loads[li].sender, d.loads[li].stopped);
        if stopped || !self.serves(sid, flow) {
            // The load stopped before the probe's request arrived: the probe is lost
            // (it could only have been measured after its phase, outside the window).
            return;
        }
        let AnyEndpoint::TcpSender(s) = self.endpoint(sid) else {
            return;
        };
        let (rid, written) = (s.peer, s.snd_nxt.max(1) - 1);
        let in_flight = s.snd_nxt.saturating_sub(s.snd_una);
        let unsent = lowat.map_or(in_flight, |l| l.min(in_flight));
        let d = self.app_driver(a);
        let l = &mut d.loads[li];
        let end = (written + unsent).max(l.claimed) + bytes;
        l.claimed = end;
        l.markers.push_back((end, token));
        let first = l.markers.len() == 1;
        if first {
            if let AnyEndpoint::TcpReceiver(r) = self.endpoint_mut(rid) {
                r.notify_when_delivered(end);
            }
        }
    }

    /// Load connection `load` stops writing (after the bytes self probes claimed).
    fn stop_load(&mut self, a: u32, load: Token) {
        let d = self.app_driver(a);
        let Some(l) = d.loads.iter_mut().find(|l| l.token == load) else {
            return;
        };
        l.stopped = true;
        let (flow, sid, claimed) = (l.flow, l.sender, l.claimed);
        if !self.serves(sid, flow) {
            return;
        }
        if let AnyEndpoint::TcpSender(s) = self.endpoint_mut(sid) {
            s.stop_writing(1 + claimed);
        }
    }

    /// summary.json's `apps` block: one object per application workload entry, in
    /// generator order (`None` when the run has none, so other runs' summaries keep
    /// their keys).
    pub(crate) fn apps_summary(&self, end: Time) -> Option<J> {
        let mut out = Vec::new();
        for g in self.apps.iter().flatten() {
            let Some(d) = g.app.as_ref() else {
                continue;
            };
            let (server, client) = g.gen.endpoints();
            out.push(sojourn_record::apps::app_entry(
                g.index,
                d.machine.kind(),
                &self.nodes[server as usize].name,
                &self.nodes[client as usize].name,
                d.machine.summary(end),
            ));
        }
        (!out.is_empty()).then_some(J::Array(out))
    }
}
