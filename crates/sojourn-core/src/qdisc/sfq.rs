//! SFQ — Stochastic Fairness Queueing, as Linux `sch_sfq` does it (McKenney 1990, with
//! the kernel's round-robin and drop rules).
//!
//! - Flows are hashed with a salt into `divisor` buckets (`hash & (divisor-1)`); a bucket
//!   owns one of `flows` slots while it has packets. With every slot busy, a packet of a
//!   new bucket is dropped (`NoSlot`).
//! - Slots are served round robin with a credit (`allot`) of `quantum` bytes per round,
//!   kept in 8-byte units (`ceil(len/8)`) as in Linux ≤ 6.12.
//! - A slot that becomes active is inserted *after the current tail*: it is served at the
//!   end of the current round, not at once.
//! - A slot holds at most `depth` packets (tail drop of the arrival, or head drop with
//!   `headdrop`). When the total exceeds `limit`, one packet is dropped from the tail
//!   (head with `headdrop`) of the longest slot. Like the kernel, slots sit in lists
//!   indexed by their depth (`dep[d]`), so the longest slot is found in O(1).
//! - `perturb` (seconds; 0 = off) draws a new salt every period and rehashes the queued
//!   packets into new slots (`sfq_rehash`), which may drop some.
//!
//! - Optional per-slot RED (`redflowlimit`, …): each slot keeps its own RED average of its
//!   byte backlog, updated when a packet arrives for an already active slot; RED marks
//!   (ECN) or drops the arrival — or, with `headdrop`, marks/drops the slot's head.

use super::red::{Action, RedLaw, RedVars};
use super::vocab::{
    tc_size, BuildCtx, Dequeue, Discipline, DropReason, Drops, NotLinux, Qdisc, TcKey, Verdict,
};
use crate::packet::Packet;
use crate::params::{ConfResult, Params, Value};
use crate::rng::Rng;
use crate::time::{Duration, Time};
use std::collections::VecDeque;

/// `SFQ_MAX_DEPTH`: the most packets a slot may hold (and the default limit).
pub const MAX_DEPTH: u32 = 127;
/// `SFQ_MAX_FLOWS` = 0x10000 − SFQ_MAX_DEPTH − 1.
pub const MAX_FLOWS: u32 = 65408;
/// `SFQ_DEFAULT_FLOWS`.
pub const DEFAULT_FLOWS: u32 = 128;
/// `SFQ_DEFAULT_HASH_DIVISOR`.
pub const DEFAULT_DIVISOR: u32 = 1024;

/// "No slot" in the bucket table and the ring.
const NONE: u32 = u32::MAX;

/// Credit in 8-byte units (`SFQ_ALLOT_SIZE`, Linux ≤ 6.12).
#[inline]
fn allot_size(bytes: u32) -> i32 {
    bytes.div_ceil(8) as i32
}

#[derive(Debug)]
struct Slot {
    queue: VecDeque<Packet>,
    /// Next slot in the round-robin ring (valid while active).
    next: u32,
    /// The bucket that owns this slot.
    bucket: u32,
    /// Credit left in this round, in 8-byte units.
    allot: i32,
    backlog_bytes: u64,
    /// Per-slot RED state (used only with `redflowlimit`).
    red: RedVars,
}

/// SFQ settings (tc names), after `sfq_change`'s clamping.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SfqParams {
    /// Packets in all slots.
    pub limit: u32,
    /// Packets per slot.
    pub depth: u32,
    /// Hash buckets (a power of two).
    pub divisor: u32,
    /// Slots.
    pub flows: u32,
    /// Bytes per slot per round.
    pub quantum: u32,
    /// Rehash period (zero: never).
    pub perturb: Duration,
    pub headdrop: bool,
    /// Per-slot RED (`redflowlimit` …), off by default.
    pub red: Option<SfqRed>,
}

/// SFQ's per-slot RED settings (tc names; bytes), after tc's derivation of the defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SfqRed {
    pub redflowlimit: u32,
    pub min: u32,
    pub max: u32,
    pub avpkt: u32,
    pub burst: u32,
    pub probability: f64,
    pub ecn: bool,
    pub harddrop: bool,
}

impl Default for SfqParams {
    /// Linux's defaults on Ethernet (quantum = psched_mtu = 1514).
    fn default() -> Self {
        SfqParams {
            limit: MAX_DEPTH,
            depth: MAX_DEPTH,
            divisor: DEFAULT_DIVISOR,
            flows: DEFAULT_FLOWS,
            quantum: 1514,
            perturb: Duration::ZERO,
            headdrop: false,
            red: None,
        }
    }
}

#[derive(Debug)]
pub struct Sfq {
    // Configuration (tc names).
    limit: u32,
    depth: u32,
    divisor: u32,
    flows: u32,
    quantum_bytes: u32,
    /// `quantum` in allot units.
    scaled_quantum: i32,
    perturb_period: Duration,
    headdrop: bool,
    /// Per-slot RED law and flags (`TC_RED_ECN`, `TC_RED_HARDDROP`).
    red: Option<RedLaw>,
    red_ecn: bool,
    red_harddrop: bool,
    ecn_marks: u64,

    // Hashing.
    rng: Rng,
    salt: u64,
    next_perturb: Time,

    /// Bucket → slot index or NONE (`q->ht`).
    buckets: Vec<u32>,
    slots: Vec<Slot>,
    /// Depth lists (`q->dep`): indices `0..flows` are slots, `flows + d` is the head of the
    /// list of slots holding exactly `d` packets. Depth 0 is the free list.
    dep_next: Vec<u32>,
    dep_prev: Vec<u32>,
    /// Depth of the longest slot.
    cur_depth: u32,
    /// Last slot of the round (`q->tail`); `tail.next` is served next.
    tail: u32,

    qlen: usize,
    backlog_bytes: u64,
    /// Reused buffer for rehashing.
    scratch: Vec<Packet>,
}

impl Sfq {
    /// An SFQ with explicit parameters (already validated and clamped like `sfq_change`).
    /// `Err` if the RED settings are refused (see [`RedLaw`]).
    pub fn new(p: SfqParams, mut rng: Rng) -> Result<Sfq, String> {
        let SfqParams {
            limit,
            depth,
            divisor,
            flows,
            quantum: quantum_bytes,
            perturb: perturb_period,
            headdrop,
            red,
        } = p;
        let red_law = match red {
            Some(r) => Some(RedLaw::new(r.min, r.max, r.burst, r.avpkt, r.probability)?),
            None => None,
        };
        assert!(divisor.is_power_of_two() && flows >= 1 && depth >= 1 && limit >= 1);
        let salt = rng.next_u64();
        let nlinks = (flows + depth + 1) as usize;
        let mut q = Sfq {
            limit,
            depth,
            divisor,
            flows,
            quantum_bytes,
            scaled_quantum: allot_size(quantum_bytes),
            perturb_period,
            headdrop,
            red: red_law,
            red_ecn: red.is_some_and(|r| r.ecn),
            red_harddrop: red.is_some_and(|r| r.harddrop),
            ecn_marks: 0,
            rng,
            salt,
            next_perturb: if perturb_period.is_zero() {
                Time::MAX
            } else {
                Time::ZERO + perturb_period
            },
            buckets: vec![NONE; divisor as usize],
            slots: (0..flows)
                .map(|_| Slot {
                    queue: VecDeque::new(),
                    next: NONE,
                    bucket: NONE,
                    allot: 0,
                    backlog_bytes: 0,
                    red: RedVars::new(),
                })
                .collect(),
            dep_next: (0..nlinks as u32).collect(),
            dep_prev: (0..nlinks as u32).collect(),
            cur_depth: 0,
            tail: NONE,
            qlen: 0,
            backlog_bytes: 0,
            scratch: Vec::new(),
        };
        // Every slot starts on the depth-0 (free) list, like sfq_init's sfq_link loop.
        for x in 0..flows {
            q.link(x, 0);
        }
        Ok(q)
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }
    pub fn depth(&self) -> u32 {
        self.depth
    }
    pub fn flows(&self) -> u32 {
        self.flows
    }
    pub fn divisor(&self) -> u32 {
        self.divisor
    }
    pub fn quantum(&self) -> u32 {
        self.quantum_bytes
    }

    #[inline]
    fn bucket_of(&self, pkt: &Packet) -> u32 {
        // skb_get_hash_perturb(skb, perturbation) & (divisor - 1)
        pkt.key.hash(self.salt) & (self.divisor - 1)
    }

    // ---- depth lists (sfq_link / sfq_unlink / sfq_inc / sfq_dec) ----

    /// Puts slot `x` at the head of the list for depth `d`.
    #[inline]
    fn link(&mut self, x: u32, d: u32) {
        let head = self.flows + d;
        let n = self.dep_next[head as usize];
        self.dep_next[x as usize] = n;
        self.dep_prev[x as usize] = head;
        self.dep_next[head as usize] = x;
        self.dep_prev[n as usize] = x;
    }

    #[inline]
    fn unlink(&mut self, x: u32) {
        let n = self.dep_next[x as usize];
        let p = self.dep_prev[x as usize];
        self.dep_next[p as usize] = n;
        self.dep_prev[n as usize] = p;
    }

    /// Slot `x` grew to `d` packets.
    #[inline]
    fn inc(&mut self, x: u32, d: u32) {
        self.unlink(x);
        if d > self.cur_depth {
            self.cur_depth = d;
        }
        self.link(x, d);
    }

    /// Slot `x` shrank to `d` packets.
    #[inline]
    fn dec(&mut self, x: u32, d: u32) {
        let alone = self.dep_next[x as usize] == self.dep_prev[x as usize];
        self.unlink(x);
        if alone && self.cur_depth == d + 1 {
            self.cur_depth -= 1;
        }
        self.link(x, d);
    }

    /// Appends `pkt` to slot `x`, activating the slot at the end of the round if it was
    /// empty (`slot->allot = quantum`).
    #[inline(always)]
    fn slot_push(&mut self, x: u32, pkt: Packet) {
        let len = pkt.len_bytes as u64;
        let slot = &mut self.slots[x as usize];
        slot.queue.push_back(pkt);
        slot.backlog_bytes += len;
        let d = slot.queue.len() as u32;
        self.qlen += 1;
        self.backlog_bytes += len;
        self.inc(x, d);
        if d == 1 {
            // A new flow joins the ring after the current tail and becomes the tail:
            // served last in the round, so new flows cannot starve old ones.
            if self.tail == NONE {
                self.slots[x as usize].next = x;
            } else {
                let t = self.tail as usize;
                self.slots[x as usize].next = self.slots[t].next;
                self.slots[t].next = x;
            }
            self.tail = x;
            self.slots[x as usize].allot = self.scaled_quantum;
        }
    }

    /// `sfq_drop`: drops one packet from the longest slot (tail, or head with headdrop).
    /// Returns the dropped packet's uid.
    fn drop_longest(&mut self, drops: &mut Drops) -> Option<u64> {
        let d = self.cur_depth;
        let x = if d > 1 {
            self.dep_next[(self.flows + d) as usize]
        } else if d == 1 {
            // Every slot holds one packet: drop the slot served next and unlink it.
            let t = self.tail as usize;
            let x = self.slots[t].next;
            self.slots[t].next = self.slots[x as usize].next;
            let b = self.slots[x as usize].bucket;
            self.buckets[b as usize] = NONE;
            x
        } else {
            return None;
        };
        let slot = &mut self.slots[x as usize];
        let pkt = if self.headdrop {
            slot.queue.pop_front()
        } else {
            slot.queue.pop_back()
        }
        .expect("slot on a depth list is non-empty");
        let len = pkt.len_bytes as u64;
        slot.backlog_bytes -= len;
        let left = slot.queue.len() as u32;
        self.dec(x, left);
        self.qlen -= 1;
        self.backlog_bytes -= len;
        let uid = pkt.uid;
        drops.push(pkt, DropReason::Overlimit);
        Some(uid)
    }

    /// `congestion_drop` of `sfq_enqueue`: drop the arrival, or with `headdrop` drop the
    /// slot's head and append the arrival in its place (slot length unchanged).
    fn congestion_drop(
        &mut self,
        x: u32,
        pkt: Packet,
        reason: DropReason,
        drops: &mut Drops,
    ) -> Verdict {
        if !self.headdrop {
            drops.push(pkt, reason);
            return Verdict::Dropped;
        }
        let slot = &mut self.slots[x as usize];
        let head = slot.queue.pop_front().expect("active slot is non-empty");
        let (old, new) = (head.len_bytes as u64, pkt.len_bytes as u64);
        slot.backlog_bytes = slot.backlog_bytes - old + new;
        self.backlog_bytes = self.backlog_bytes - old + new;
        slot.queue.push_back(pkt);
        drops.push(head, reason);
        Verdict::QueuedCongested
    }

    /// Runs every perturbation tick due at or before `now` (lazy timer).
    #[inline(always)]
    fn run_timers(&mut self, now: Time, drops: &mut Drops) {
        if self.next_perturb <= now {
            self.perturb_until(now, drops);
        }
    }

    #[cold]
    #[inline(never)]
    fn perturb_until(&mut self, now: Time, drops: &mut Drops) {
        while self.next_perturb <= now {
            self.next_perturb += self.perturb_period;
            // sfq_perturbation: new salt; rehash queued packets if any.
            self.salt = self.rng.next_u64();
            if self.tail != NONE {
                self.rehash(drops);
            }
        }
    }

    /// `sfq_rehash`: empties every slot (in slot order, each head to tail) and re-enqueues
    /// the packets under the new salt. Packets that find no free slot or a full slot are
    /// dropped.
    fn rehash(&mut self, drops: &mut Drops) {
        let mut list = std::mem::take(&mut self.scratch);
        for x in 0..self.flows {
            if self.slots[x as usize].queue.is_empty() {
                continue;
            }
            while let Some(p) = self.slots[x as usize].queue.pop_front() {
                let d = self.slots[x as usize].queue.len() as u32;
                self.dec(x, d);
                list.push(p);
            }
            let slot = &mut self.slots[x as usize];
            slot.backlog_bytes = 0;
            slot.red = RedVars::new();
            self.buckets[slot.bucket as usize] = NONE;
        }
        self.tail = NONE;
        self.qlen = 0;
        self.backlog_bytes = 0;
        for p in list.drain(..) {
            let b = self.bucket_of(&p);
            let mut x = self.buckets[b as usize];
            if x == NONE {
                x = self.dep_next[self.flows as usize];
                if x >= self.flows {
                    drops.push(p, DropReason::NoSlot);
                    continue;
                }
                self.buckets[b as usize] = x;
                self.slots[x as usize].bucket = b;
            }
            if self.slots[x as usize].queue.len() as u32 >= self.depth {
                drops.push(p, DropReason::FlowLimit);
                continue;
            }
            if let Some(law) = &self.red {
                // sfq_rehash refreshes the slot's average (no marking decision).
                let slot = &mut self.slots[x as usize];
                slot.red.qavg = law.ewma(slot.red.qavg, slot.backlog_bytes);
            }
            self.slot_push(x, p);
        }
        self.scratch = list;
    }
}

impl Qdisc for Sfq {
    fn enqueue(&mut self, mut pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        self.run_timers(now, drops);
        let b = self.bucket_of(&pkt);
        let mut x = self.buckets[b as usize];
        if x == NONE {
            // A new bucket takes a free slot (head of the depth-0 list).
            x = self.dep_next[self.flows as usize];
            if x >= self.flows {
                drops.push(pkt, DropReason::NoSlot);
                return Verdict::Dropped;
            }
            self.buckets[b as usize] = x;
            let slot = &mut self.slots[x as usize];
            slot.bucket = b;
            slot.backlog_bytes = 0;
            slot.red = RedVars::new();
        } else {
            if let Some(law) = &self.red {
                // Per-slot RED on the slot's byte backlog before this packet.
                let slot = &mut self.slots[x as usize];
                slot.red.qavg = law.ewma(slot.red.qavg, slot.backlog_bytes);
                let may_mark = match law.action(&mut slot.red, &mut self.rng) {
                    Action::Accept => None,
                    // sfq_prob_mark: ecn; sfq_hard_mark: ecn without harddrop.
                    Action::ProbMark => Some(self.red_ecn),
                    Action::HardMark => Some(self.red_ecn && !self.red_harddrop),
                };
                if let Some(may_mark) = may_mark {
                    let marked = may_mark
                        && ((self.headdrop && slot.queue.front_mut().is_some_and(|h| h.set_ce()))
                            || pkt.set_ce());
                    if marked {
                        self.ecn_marks += 1;
                    } else {
                        return self.congestion_drop(x, pkt, DropReason::Early, drops);
                    }
                }
            }
            if self.slots[x as usize].queue.len() as u32 >= self.depth {
                // Per-slot depth limit.
                return self.congestion_drop(x, pkt, DropReason::FlowLimit, drops);
            }
        }
        let uid = pkt.uid;
        self.slot_push(x, pkt);
        if self.qlen <= self.limit as usize {
            return Verdict::Queued;
        }
        // Over the total limit: drop from the longest slot.
        let before = self.slots[x as usize].queue.len();
        let dropped = self.drop_longest(drops);
        if dropped == Some(uid) {
            Verdict::Dropped
        } else if self.slots[x as usize].queue.len() != before {
            // NET_XMIT_CN: a packet of the arrival's own slot was dropped.
            Verdict::QueuedCongested
        } else {
            Verdict::Queued
        }
    }

    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        self.run_timers(now, drops);
        loop {
            if self.tail == NONE {
                return Dequeue::Empty;
            }
            let a = self.slots[self.tail as usize].next;
            let slot = &mut self.slots[a as usize];
            if slot.allot <= 0 {
                // Credit used up: this slot becomes the tail (end of round) with a new
                // quantum, and the next one gets its turn.
                slot.allot += self.scaled_quantum;
                self.tail = a;
                continue;
            }
            let pkt = slot.queue.pop_front().expect("active slot is non-empty");
            let len = pkt.len_bytes;
            slot.backlog_bytes -= len as u64;
            let left = slot.queue.len() as u32;
            let next_a = slot.next;
            self.dec(a, left);
            self.qlen -= 1;
            self.backlog_bytes -= len as u64;
            if left == 0 {
                // The slot leaves the ring and frees its bucket; its allot is not charged.
                let slot = &self.slots[a as usize];
                self.buckets[slot.bucket as usize] = NONE;
                if next_a == a {
                    self.tail = NONE;
                } else {
                    let t = self.tail as usize;
                    self.slots[t].next = next_a;
                }
            } else {
                self.slots[a as usize].allot -= allot_size(len);
            }
            return Dequeue::Packet(pkt);
        }
    }

    #[inline]
    fn len_packets(&self) -> usize {
        self.qlen
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    fn ecn_marks(&self) -> u64 {
        self.ecn_marks
    }
    fn observe(&mut self, _now: Time, emit: &mut dyn FnMut(&str, f64)) {
        // The perturbation timer is not run here: a rehash may drop packets and `observe`
        // has no drop sink. It runs at the next enqueue/dequeue, which is when its effect
        // becomes visible anyway (time series may show the pre-rehash slot layout).
        let active = (0..self.flows)
            .filter(|&x| !self.slots[x as usize].queue.is_empty())
            .count();
        emit("active_slots", active as f64);
        emit("longest_slot", self.cur_depth as f64);
    }
}

/// Builds `sfq [limit P] [depth P] [divisor N] [flows N] [quantum B] [perturb S] [headdrop]
/// [redflowlimit B [min B] [max B] [avpkt B] [burst P] [probability P] [ecn] [harddrop]]`
/// with tc's RED derivation and the clamping rules of `sfq_change`.
pub fn from_params(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Sfq> {
    Ok(*SfqSpec::parse(p, ctx)?.build(ctx))
}

/// Typed spec of `sfq`: its settings after `sfq_change`'s clamping, RED law checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SfqSpec {
    pub params: SfqParams,
}

impl Discipline for SfqSpec {
    const KIND: &'static str = "sfq";
    const SUMMARY: &'static str =
        "Stochastic Fairness Queueing: hashed slots served round robin (Linux sch_sfq)";
    type Qdisc = Box<Sfq>;

    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let limit_given = p.has("limit");
        let limit = p.u32("limit", MAX_DEPTH, 2, u32::MAX)?;
        let depth = p.u32("depth", MAX_DEPTH, 1, u32::MAX)?;
        let divisor = p.u32("divisor", DEFAULT_DIVISOR, 1, 65536)?;
        if !divisor.is_power_of_two() {
            return Err(p.err(
                "divisor",
                format!("{divisor} is not a power of two (the kernel requires one, at most 65536)"),
            ));
        }
        let flows = p.u32("flows", DEFAULT_FLOWS, 1, u32::MAX)?;
        let quantum = p.bytes("quantum", ctx.mtu_bytes as u64)?;
        // Linux ≤ 6.12 keeps the scaled quantum in a short: 1..=SHRT_MAX units of 8 bytes.
        if quantum == 0 || quantum.div_ceil(8) > i16::MAX as u64 {
            return Err(p.err(
                "quantum",
                format!(
                    "{quantum} B is out of range [1, {}] bytes",
                    i16::MAX as u64 * 8
                ),
            ));
        }
        let perturb = match p.raw("perturb") {
            None => Duration::ZERO,
            Some(Value::Int(s)) if *s >= 0 => Duration::from_secs(*s as u64),
            Some(Value::Int(s)) => return Err(p.err("perturb", format!("{s} is negative"))),
            Some(Value::Str(_)) => {
                let d = p.duration("perturb", Duration::ZERO)?;
                if d.as_ns() % 1_000_000_000 != 0 {
                    return Err(p.err(
                        "perturb",
                        "perturb is a whole number of seconds (tc `perturb SECS`)",
                    ));
                }
                d
            }
            Some(v) => {
                return Err(p.err(
                    "perturb",
                    format!(
                        "expected seconds (an integer) or \"10s\", got {}",
                        v.type_name()
                    ),
                ))
            }
        };
        let headdrop = p.bool("headdrop", false)?;
        let red = red_from_params(p)?;

        // sfq_change's clamping, in its order.
        let depth = depth.min(MAX_DEPTH);
        let mut flows = flows.min(MAX_FLOWS).min(divisor);
        let mut limit_eff = MAX_DEPTH;
        if limit_given {
            limit_eff = limit.min(depth.saturating_mul(flows));
            flows = flows.min(limit_eff);
        }
        if limit_eff < 2 {
            return Err(p.err(
                "limit",
                "the effective limit (min(limit, depth * flows)) must be at least 2",
            ));
        }
        // The RED law's own checks (Wlog/Plog ranges), now, so that build cannot fail.
        if let Some(r) = red {
            RedLaw::new(r.min, r.max, r.burst, r.avpkt, r.probability)
                .map_err(|m| p.err(if m.contains("burst") { "burst" } else { "max" }, m))?;
        }
        Ok(SfqSpec {
            params: SfqParams {
                limit: limit_eff,
                depth,
                divisor,
                flows,
                quantum: quantum as u32,
                perturb,
                headdrop,
                red,
            },
        })
    }

    fn build(&self, ctx: &BuildCtx) -> Box<Sfq> {
        Box::new(Sfq::new(self.params, ctx.rng()).expect("RED law validated by SfqSpec::parse"))
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(TC_KEYS);

    /// `[limit N] quantum N depth N flows N divisor N perturb SECS [headdrop]
    /// [redflowlimit SIZE min SIZE max SIZE avpkt SIZE burst N probability P [ecn]
    /// [harddrop]]`.
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        let q = &self.params;
        // An explicit `limit` also caps `flows` (sfq_change), so the unset default (127 =
        // SFQ_MAX_DEPTH, flows uncapped) is written by leaving `limit` out.
        let mut a: Vec<String> = Vec::new();
        if q.limit != MAX_DEPTH {
            a.extend(["limit".into(), q.limit.to_string()]);
        }
        a.extend([
            "quantum".into(),
            q.quantum.to_string(),
            "depth".into(),
            q.depth.to_string(),
            "flows".into(),
            q.flows.to_string(),
            "divisor".into(),
            q.divisor.to_string(),
            "perturb".into(),
            (q.perturb.as_ns() / 1_000_000_000).to_string(),
        ]);
        if q.headdrop {
            a.push("headdrop".into());
        }
        if let Some(r) = q.red {
            a.extend([
                "redflowlimit".into(),
                tc_size(r.redflowlimit as u64),
                "min".into(),
                tc_size(r.min as u64),
                "max".into(),
                tc_size(r.max as u64),
                "avpkt".into(),
                tc_size(r.avpkt as u64),
                "burst".into(),
                r.burst.to_string(),
                "probability".into(),
                r.probability.to_string(),
            ]);
            if r.ecn {
                a.push("ecn".into());
            }
            if r.harddrop {
                a.push("harddrop".into());
            }
        }
        Ok(a)
    }
}

/// tc keywords of `sfq`.
pub const TC_KEYS: &[TcKey] = &[
    TcKey::Int("limit", "limit"),
    TcKey::Size("quantum", "quantum"),
    TcKey::Int("depth", "depth"),
    TcKey::Int("flows", "flows"),
    TcKey::Int("divisor", "divisor"),
    TcKey::Secs("perturb", "perturb"),
    TcKey::Flag("headdrop", "headdrop", true),
    TcKey::Size("redflowlimit", "redflowlimit"),
    TcKey::Size("min", "min"),
    TcKey::Size("max", "max"),
    TcKey::Size("avpkt", "avpkt"),
    TcKey::Int("burst", "burst"),
    TcKey::Real("probability", "probability"),
    TcKey::Flag("ecn", "ecn", true),
    TcKey::Flag("harddrop", "harddrop", true),
];

/// The per-slot RED keys, as tc's `sfq_parse_opt` reads them: any of them turns RED on and
/// then `redflowlimit` is required; max = redflowlimit/4, min = max/3,
/// burst = (2·min + max)/(3·avpkt), avpkt 1000, probability 0.02.
fn red_from_params(p: &mut Params) -> ConfResult<Option<SfqRed>> {
    const KEYS: [&str; 8] = [
        "redflowlimit",
        "min",
        "max",
        "avpkt",
        "burst",
        "probability",
        "ecn",
        "harddrop",
    ];
    if !KEYS.iter().any(|k| p.has(k)) {
        return Ok(None);
    }
    let bytes = |p: &mut Params, key: &str| -> ConfResult<u32> {
        match p.bytes_opt(key)? {
            None => Ok(0),
            Some(v) if v <= u32::MAX as u64 => Ok(v as u32),
            Some(v) => Err(p.err(key, format!("{v} B is too large"))),
        }
    };
    let redflowlimit = bytes(p, "redflowlimit")?;
    if redflowlimit == 0 {
        return Err(p.err(
            "redflowlimit",
            "per-slot RED needs `redflowlimit` (bytes per flow), as tc requires",
        ));
    }
    let mut max = bytes(p, "max")?;
    let mut min = bytes(p, "min")?;
    let avpkt = match bytes(p, "avpkt")? {
        0 if p.has("avpkt") => return Err(p.err("avpkt", "avpkt must be positive")),
        0 => 1000,
        a => a,
    };
    if max == 0 {
        max = redflowlimit / 4;
    }
    if min == 0 {
        min = max / 3;
    }
    let burst = match p.u32("burst", 0, 0, u32::MAX)? {
        0 => ((2 * min as u64 + max as u64) / (3 * avpkt as u64)) as u32,
        b => b,
    };
    if max > redflowlimit {
        return Err(p.err("max", "\"max\" is larger than \"redflowlimit\""));
    }
    if min >= max {
        return Err(p.err("min", "\"min\" is not smaller than \"max\""));
    }
    let probability = p.f64("probability", 0.02)?;
    if !(probability > 0.0 && probability <= 1.0) {
        return Err(p.err(
            "probability",
            format!("{probability} is out of range (0, 1]"),
        ));
    }
    Ok(Some(SfqRed {
        redflowlimit,
        min,
        max,
        avpkt,
        burst,
        probability,
        ecn: p.bool("ecn", false)?,
        harddrop: p.bool("harddrop", false)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::testkit::{check_conservation, pkt, Bound};
    use crate::qdisc::Dropped;

    fn sfq() -> Sfq {
        Sfq::new(
            SfqParams {
                ..SfqParams::default()
            },
            Rng::from_seed(3),
        )
        .unwrap()
    }

    /// Flow ids whose buckets differ pairwise under `q`'s salt.
    fn distinct_flows(q: &Sfq, n: usize) -> Vec<u32> {
        let mut seen = std::collections::HashSet::new();
        let mut out = vec![];
        let mut f = 1;
        let mut bound = Bound::new(100_000, "flows in distinct buckets");
        while out.len() < n {
            bound.tick();
            if seen.insert(q.bucket_of(&pkt(0, f, 100))) {
                out.push(f);
            }
            f += 1;
        }
        out
    }

    fn built(t: &[(&str, Value)]) -> ConfResult<Sfq> {
        let tab = crate::params::Table(t.iter().map(|(k, v)| (k.to_string(), v.clone())).collect());
        let mut p = Params::new("q", &tab);
        let q = from_params(&mut p, &BuildCtx::default())?;
        p.finish()?;
        Ok(q)
    }

    #[test]
    fn linux_defaults() {
        // sfq_init: limit 127 (SFQ_MAX_DEPTH, not 128), depth 127, divisor 1024,
        // 128 flows, quantum psched_mtu = 1514.
        let q = built(&[]).unwrap();
        assert_eq!(
            (q.limit(), q.depth(), q.divisor(), q.flows(), q.quantum()),
            (127, 127, 1024, 128, 1514)
        );
        // Default limit: the 128th packet of one flow is refused.
        let mut q = q;
        let mut d = Drops::new();
        for i in 0..128 {
            q.enqueue(pkt(i, 1, 100), Time(0), &mut d);
        }
        assert_eq!(q.len_packets(), 127);
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn clamping_and_rejections_follow_sfq_change() {
        let q = built(&[("limit", Value::Int(100_000))]).unwrap();
        assert_eq!(q.limit(), 127 * 128, "limit = min(limit, depth * flows)");
        let q = built(&[("limit", Value::Int(20)), ("depth", Value::Int(300))]).unwrap();
        assert_eq!((q.limit(), q.depth(), q.flows()), (20, 127, 20));
        let q = built(&[("divisor", Value::Int(64))]).unwrap();
        assert_eq!(q.flows(), 64, "flows = min(flows, divisor)");
        assert!(built(&[("divisor", Value::Int(1000))]).is_err());
        assert!(built(&[("limit", Value::Int(1))]).is_err());
        let e = built(&[("ecn", Value::Bool(true))]).err().unwrap();
        assert_eq!(e.path, "q.redflowlimit");
        assert!(built(&[
            ("redflowlimit", Value::Int(40_000)),
            ("max", Value::Int(50_000))
        ])
        .is_err());
        let q = built(&[("perturb", Value::Int(10))]).unwrap();
        assert_eq!(q.perturb_period, Duration::from_secs(10));
    }

    #[test]
    fn new_flow_waits_for_the_end_of_the_round() {
        // Flows A and B are backlogged; C arrives while A is being served. Linux inserts
        // C after the tail (B), so the order is A, B, C — not A, C, B.
        let mut q = sfq();
        let f = distinct_flows(&q, 3);
        let mut d = Drops::new();
        let mut uid = 0;
        for &fl in &f[..2] {
            for _ in 0..3 {
                q.enqueue(pkt(uid, fl, 1514), Time(0), &mut d);
                uid += 1;
            }
        }
        // One dequeue (from A), which uses A's whole allot (1514 B = 190 units).
        let first = q.dequeue(Time(0), &mut d).packet().unwrap();
        assert_eq!(first.conversation(), f[0]);
        q.enqueue(pkt(uid, f[2], 1514), Time(0), &mut d);
        let order: Vec<u32> = (0..3)
            .map(|_| q.dequeue(Time(0), &mut d).packet().unwrap().conversation())
            .collect();
        assert_eq!(order, vec![f[1], f[2], f[0]]);
    }

    #[test]
    fn byte_fairness_with_8_byte_allot() {
        // Flow A sends 1514-B packets, flow B 64-B packets. Per round each gets
        // quantum = 1514 B = 190 allot units. B: 64 B = 8 units, so B sends packets until
        // its credit is <= 0: ceil(190/8) = 24 packets. A: 1 packet per round.
        let mut q = Sfq::new(
            SfqParams {
                limit: 10_000,
                ..SfqParams::default()
            },
            Rng::from_seed(1),
        )
        .unwrap();
        let f = distinct_flows(&q, 2);
        let mut d = Drops::new();
        for i in 0..100 {
            q.enqueue(pkt(i, f[0], 1514), Time(0), &mut d);
        }
        for i in 100..227 {
            q.enqueue(pkt(i, f[1], 64), Time(0), &mut d);
        }
        let mut bytes = [0u64; 2];
        let mut seq = vec![];
        for _ in 0..(10 + 24 * 4) {
            let p = q.dequeue(Time(0), &mut d).packet().unwrap();
            bytes[(p.conversation() == f[1]) as usize] += p.len_bytes as u64;
            seq.push(p.conversation());
        }
        // First round: A one packet, then B 24 packets.
        assert_eq!(seq[0], f[0]);
        assert!(seq[1..25].iter().all(|&x| x == f[1]));
        assert_eq!(seq[25], f[0]);
        // Over 4 full rounds + change, bytes are within one quantum of each other.
        let diff = bytes[0] as i64 - bytes[1] as i64;
        assert!(diff.unsigned_abs() <= 1514 + 64, "{bytes:?}");
    }

    #[test]
    fn allot_granularity_is_8_bytes() {
        // quantum 16 B = 2 units. A flow of 9-byte packets (2 units each) sends one packet
        // per round; with byte accounting it would send 2 (16 - 9 = 7 > 0).
        let mut q = Sfq::new(
            SfqParams {
                quantum: 16,
                ..SfqParams::default()
            },
            Rng::from_seed(1),
        )
        .unwrap();
        let f = distinct_flows(&q, 2);
        let mut d = Drops::new();
        for i in 0..10 {
            q.enqueue(pkt(i, f[0], 9), Time(0), &mut d);
            q.enqueue(pkt(100 + i, f[1], 9), Time(0), &mut d);
        }
        let seq: Vec<u32> = (0..6)
            .map(|_| q.dequeue(Time(0), &mut d).packet().unwrap().conversation())
            .collect();
        assert_eq!(seq, vec![f[0], f[1], f[0], f[1], f[0], f[1]]);
    }

    #[test]
    fn overflow_drops_the_tail_of_the_longest_slot() {
        let mut q = Sfq::new(
            SfqParams {
                limit: 10,
                ..SfqParams::default()
            },
            Rng::from_seed(2),
        )
        .unwrap();
        let f = distinct_flows(&q, 3);
        let mut d = Drops::new();
        for i in 0..7 {
            q.enqueue(pkt(i, f[0], 1000), Time(0), &mut d);
        }
        for i in 7..10 {
            q.enqueue(pkt(i, f[1], 1000), Time(0), &mut d);
        }
        assert!(d.is_empty());
        // The 11th packet (a third flow) pushes the total over 10: the fat flow's last
        // packet (uid 6) goes, the arrival stays.
        assert_eq!(
            q.enqueue(pkt(10, f[2], 1000), Time(0), &mut d),
            Verdict::Queued
        );
        let dropped: Vec<(u64, DropReason)> = d.drain().map(|x| (x.pkt.uid, x.reason)).collect();
        assert_eq!(dropped, vec![(6, DropReason::Overlimit)]);
        // An arrival of the fat flow itself is the tail it loses: Dropped.
        assert_eq!(
            q.enqueue(pkt(11, f[0], 1000), Time(0), &mut d),
            Verdict::Dropped
        );
        assert_eq!(d.drain().next().unwrap().pkt.uid, 11);
        assert_eq!(q.len_packets(), 10);
        // headdrop: the fat flow loses its head instead.
        let mut q = Sfq::new(
            SfqParams {
                limit: 10,
                headdrop: true,
                ..SfqParams::default()
            },
            Rng::from_seed(2),
        )
        .unwrap();
        for i in 0..10 {
            q.enqueue(pkt(i, f[0], 1000), Time(0), &mut d);
        }
        assert_eq!(
            q.enqueue(pkt(10, f[0], 1000), Time(0), &mut d),
            Verdict::QueuedCongested
        );
        assert_eq!(d.drain().next().unwrap().pkt.uid, 0);
    }

    /// The depth lists agree with the slots: `cur_depth` is the longest slot, every slot
    /// is on the list of its own length, and active slots form one ring.
    fn invariants_hold(q: &Sfq) -> bool {
        let longest = q.slots.iter().map(|s| s.queue.len()).max().unwrap_or(0);
        if q.cur_depth as usize != longest {
            return false;
        }
        for d in 0..=q.depth {
            let head = q.flows + d;
            let mut x = q.dep_next[head as usize];
            let mut steps = 0;
            while x != head {
                // A list longer than the slots is a corrupted (cyclic) list.
                steps += 1;
                if steps > q.slots.len() {
                    return false;
                }
                if q.slots[x as usize].queue.len() != d as usize {
                    return false;
                }
                x = q.dep_next[x as usize];
            }
        }
        let active = q.slots.iter().filter(|s| !s.queue.is_empty()).count();
        let mut ring = 0;
        if q.tail != NONE {
            let mut x = q.tail;
            loop {
                ring += 1;
                x = q.slots[x as usize].next;
                if x == q.tail || ring > q.flows as usize {
                    break;
                }
            }
        }
        ring == active
    }

    #[test]
    fn longest_slot_is_found_through_depth_lists() {
        // Random traffic against the brute-force truth: the O(1) depth lists always name
        // the longest slot, and each overflow drop comes from a slot of maximal length.
        let mut rng = Rng::from_seed(11);
        let mut q = Sfq::new(
            SfqParams {
                limit: 40,
                depth: 20,
                flows: 16,
                ..SfqParams::default()
            },
            Rng::from_seed(12),
        )
        .unwrap();
        let mut d = Drops::new();
        for uid in 0..20_000u64 {
            if rng.chance(0.6) {
                let p = pkt(uid, rng.below(24) as u32, 64 + rng.below(1450) as u32);
                let longest_before = q.cur_depth as usize;
                let b = q.bucket_of(&p);
                let own = if q.buckets[b as usize] == NONE {
                    0
                } else {
                    q.slots[q.buckets[b as usize] as usize].queue.len()
                };
                q.enqueue(p, Time(0), &mut d);
                for x in d.drain() {
                    if x.reason == DropReason::Overlimit {
                        // The victim's slot had maximal length after the arrival.
                        let vb = q.bucket_of(&x.pkt);
                        let vlen = if q.buckets[vb as usize] == NONE {
                            0
                        } else {
                            q.slots[q.buckets[vb as usize] as usize].queue.len()
                        } + 1;
                        assert_eq!(vlen, longest_before.max(own + 1), "uid {uid}");
                    }
                }
            } else {
                q.dequeue(Time(0), &mut d);
            }
            assert!(invariants_hold(&q), "after op {uid}");
        }
    }

    #[test]
    fn slot_exhaustion_drops_new_flows() {
        let mut q = Sfq::new(
            SfqParams {
                flows: 4,
                ..SfqParams::default()
            },
            Rng::from_seed(9),
        )
        .unwrap();
        let f = distinct_flows(&q, 5);
        let mut d = Drops::new();
        for (i, &fl) in f[..4].iter().enumerate() {
            assert_eq!(
                q.enqueue(pkt(i as u64, fl, 100), Time(0), &mut d),
                Verdict::Queued
            );
        }
        assert_eq!(
            q.enqueue(pkt(9, f[4], 100), Time(0), &mut d),
            Verdict::Dropped
        );
        assert_eq!(d.drain().next().unwrap().reason, DropReason::NoSlot);
        // Once a slot frees, the new flow gets in.
        q.dequeue(Time(0), &mut d).packet().unwrap();
        assert_eq!(
            q.enqueue(pkt(10, f[4], 100), Time(0), &mut d),
            Verdict::Queued
        );
    }

    #[test]
    fn depth_limit_drops_arrival_with_flow_limit() {
        let mut q = Sfq::new(
            SfqParams {
                depth: 3,
                ..SfqParams::default()
            },
            Rng::from_seed(9),
        )
        .unwrap();
        let mut d = Drops::new();
        for i in 0..4 {
            q.enqueue(pkt(i, 7, 100), Time(0), &mut d);
        }
        let x: Vec<(u64, DropReason)> = d.drain().map(|x| (x.pkt.uid, x.reason)).collect();
        assert_eq!(x, vec![(3, DropReason::FlowLimit)]);
    }

    #[test]
    fn perturbation_rehashes_queued_packets() {
        let mut q = Sfq::new(
            SfqParams {
                perturb: Duration::from_secs(10),
                ..SfqParams::default()
            },
            Rng::from_seed(4),
        )
        .unwrap();
        let mut d = Drops::new();
        for i in 0..100u64 {
            q.enqueue(pkt(i, (i % 20) as u32, 500), Time(0), &mut d);
        }
        let salt0 = q.salt;
        let before: Vec<u32> = (0..20).map(|fl| q.bucket_of(&pkt(0, fl, 1))).collect();
        // The first tick is at 10 s.
        q.dequeue(Time::ZERO + Duration::from_secs(9), &mut d)
            .packet()
            .unwrap();
        assert_eq!(q.salt, salt0);
        q.dequeue(Time::ZERO + Duration::from_secs(10), &mut d)
            .packet()
            .unwrap();
        assert_ne!(q.salt, salt0);
        let after: Vec<u32> = (0..20).map(|fl| q.bucket_of(&pkt(0, fl, 1))).collect();
        assert_ne!(before, after);
        // Every queued packet now sits in the slot of its new bucket; nothing lost.
        assert!(d.is_empty());
        assert_eq!(q.len_packets(), 98);
        for x in 0..q.flows {
            let s = &q.slots[x as usize];
            for p in &s.queue {
                assert_eq!(q.bucket_of(p), s.bucket);
                assert_eq!(q.buckets[s.bucket as usize], x);
            }
        }
        let total: usize = q.slots.iter().map(|s| s.queue.len()).sum();
        assert_eq!(total, 98);
    }

    fn red_sfq(extra: &[(&str, Value)]) -> Sfq {
        let mut kv = vec![("redflowlimit", Value::Int(40_000))];
        kv.extend(extra.iter().cloned());
        built(&kv).unwrap()
    }

    #[test]
    fn per_slot_red_defaults_follow_tc() {
        // redflowlimit 40000: max = 10000, min = 3333, burst = (6666 + 10000)/3000 = 5,
        // avpkt 1000; a = 5 + 1 − 3.333 = 2.67: W = 1/2 gives 1.94 < a, W = 1/4 gives
        // 4·(1 − 0.75^5) = 3.05 ≥ a → Wlog 2.
        let q = red_sfq(&[]);
        assert_eq!(q.red.as_ref().unwrap().wlog, 2);
        // The docs' example builds: burst (16000 + 60000)/3000 = 25, a = 18 → Wlog 6.
        let q = built(&[
            ("limit", Value::Int(3000)),
            ("depth", Value::Int(127)),
            ("headdrop", Value::Bool(true)),
            ("redflowlimit", Value::Int(100_000)),
            ("min", Value::Int(8000)),
            ("max", Value::Int(60_000)),
            ("probability", Value::Float(0.2)),
            ("ecn", Value::Bool(true)),
        ])
        .unwrap();
        assert_eq!(q.red.as_ref().unwrap().wlog, 6);
        assert!(built(&[
            ("redflowlimit", Value::Int(40_000)),
            ("min", Value::Int(10_000))
        ])
        .is_err());
    }

    /// Fat flow: 3 × 1000 B per step; thin flow: 1 × 200 B per step; 2 dequeues per step.
    fn fat_and_thin(q: &mut Sfq, ect: bool) -> (Vec<Dropped>, u32, u32) {
        let f = distinct_flows(q, 2);
        let mut d = Drops::new();
        let mut all = vec![];
        let mut uid = 0;
        for step in 0..400u64 {
            let now = Time(step * 1000);
            for _ in 0..3 {
                let mut p = pkt(uid, f[0], 1000);
                if ect {
                    p.ecn = crate::packet::Ecn::Ect0;
                }
                q.enqueue(p, now, &mut d);
                uid += 1;
            }
            q.enqueue(pkt(uid, f[1], 200), now, &mut d);
            uid += 1;
            q.dequeue(now, &mut d);
            q.dequeue(now, &mut d);
            all.extend(d.drain());
        }
        (all, f[0], f[1])
    }

    #[test]
    fn per_slot_red_hits_the_fat_flow_only() {
        // Per-flow RED (the point of redflowlimit): the fat slot's average passes max
        // (10000 B) and its arrivals are dropped early; the thin slot stays below min.
        let mut q = red_sfq(&[]);
        let (drops, fat, _thin) = fat_and_thin(&mut q, false);
        assert!(drops.len() > 100, "{}", drops.len());
        assert!(drops
            .iter()
            .all(|x| x.pkt.conversation() == fat && x.reason == DropReason::Early));
        assert_eq!(q.ecn_marks(), 0);
        // The fat slot is held near the RED thresholds, far below depth.
        let fb = q.bucket_of(&pkt(0, fat, 1));
        let fat_bytes = q.slots[q.buckets[fb as usize] as usize].backlog_bytes;
        assert!(fat_bytes <= 12_000, "{fat_bytes}");
    }

    #[test]
    fn per_slot_red_marks_ect_with_ecn() {
        let mut q = red_sfq(&[("ecn", Value::Bool(true))]);
        let (drops, fat, _) = fat_and_thin(&mut q, true);
        assert!(q.ecn_marks() > 100);
        // With ecn and without harddrop even hard marks are CE marks: no early drops; the
        // fat flow is stopped only by the packet limits.
        assert!(drops.iter().all(|x| x.reason != DropReason::Early));
        assert!(drops.iter().all(|x| x.pkt.conversation() == fat));
        // harddrop: above max, drop even ECT packets.
        let mut q = red_sfq(&[("ecn", Value::Bool(true)), ("harddrop", Value::Bool(true))]);
        let (drops, _, _) = fat_and_thin(&mut q, true);
        assert!(drops.iter().any(|x| x.reason == DropReason::Early));
    }

    #[test]
    fn per_slot_red_headdrop_marks_the_head() {
        let mut q = red_sfq(&[("ecn", Value::Bool(true)), ("headdrop", Value::Bool(true))]);
        let mut d = Drops::new();
        let mut uid = 0;
        while q.ecn_marks() == 0 {
            let mut p = pkt(uid, 5, 1000);
            p.ecn = crate::packet::Ecn::Ect0;
            q.enqueue(p, Time(0), &mut d);
            uid += 1;
            assert!(uid < 100);
        }
        let x = q.buckets[q.bucket_of(&pkt(0, 5, 1)) as usize];
        let slot = &q.slots[x as usize];
        assert_eq!(slot.queue.front().unwrap().ecn, crate::packet::Ecn::Ce);
        assert_eq!(slot.queue.back().unwrap().ecn, crate::packet::Ecn::Ect0);
        assert!(d.is_empty());
    }

    #[test]
    fn conservation_property() {
        for seed in 0..12 {
            for (limit, depth, flows, perturb, headdrop) in [
                (127, 127, 128, 0, false),
                (20, 5, 8, 0, true),
                (30, 10, 4, 1, false),
            ] {
                let mut q = Sfq::new(
                    SfqParams {
                        limit,
                        depth,
                        flows,
                        perturb: Duration::from_secs(perturb),
                        headdrop,
                        ..SfqParams::default()
                    },
                    Rng::from_seed(seed),
                )
                .unwrap();
                check_conservation(&mut q, seed, 4_000, |q| {
                    q.len_packets() <= limit as usize
                        && q.slots.iter().all(|s| s.queue.len() <= depth as usize)
                });
            }
            for ecn in [false, true] {
                let mut q = red_sfq(&[
                    ("limit", Value::Int(60)),
                    ("ecn", Value::Bool(ecn)),
                    ("headdrop", Value::Bool(ecn)),
                ]);
                check_conservation(&mut q, seed, 4_000, |q| q.len_packets() <= 60);
            }
        }
    }
}
