//! One run on many cores (issue 35 §3; docs/engine.md, "One run on many cores"):
//! conservative parallel simulation with outputs byte-identical to the single-threaded run.
//!
//! **The cut.** The nodes are split into partitions across links with a propagation delay;
//! the smallest delay of a cut link is the *lookahead* `L`. Every partition builds the whole
//! network (the same numbers everywhere: links, flows, endpoint slots) but only its own nodes
//! send, forward and receive; workload generators run in every partition alike (they are
//! open-loop: their decisions depend on their own random streams only), so every flow is
//! opened, and numbered, in every partition, and its endpoints start only in the partitions
//! of their nodes.
//!
//! **The windows.** Time is cut into windows of `L`. Each partition runs its own events of the
//! window in the canonical order (docs/engine.md, "Event order"), then hands the packets that
//! entered a cut link's flight since the last window to the partition of its far end
//! (`Sim::ship`): each arrives at least `L` after the window's start, so in a later window
//! there, where it becomes an `Arrive` event with the same key as in the single-threaded run.
//! One barrier a window; nothing else is shared. Because a partition handles its events in
//! the global order restricted to it, and every number it hands out belongs to a node it owns
//! (docs/engine.md, "Identity by owner"), it does exactly what the single-threaded run does at
//! its nodes, and the merged outputs are that run's bytes.
//!
//! **What stays on one thread** ([`plan`] says why): a Wi-Fi medium, adaptive classifiers
//! (told of every finished flow anywhere), closed-loop and application workloads (a
//! completion at a receiver steers a generator that every partition runs), probes, Python
//! disciplines (the GIL), the packet log and flow time series (not merged yet), and a
//! network no delayed link splits.

use crate::config::Experiment;
use crate::partition::Part;
use crate::sim::{Progress, Sim};
use crate::workload::{TcpKind, WorkloadPlan};
use sojourn_core::{Duration, Packet, Time};
use sojourn_experiment::cost::COST_PER_LINK_PACKET_S;
use sojourn_record::metrics::TimeSeries;
use sojourn_record::RunOutput;
use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// A barrier that spins before it yields: a window is often shorter than a sleep and a
/// wake-up through the kernel (`std::sync::Barrier`), and with more threads than cores the
/// yield lets the others run.
struct SpinBarrier {
    parties: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    /// A partition failed (an engine panic): the others stop at their next barrier
    /// instead of waiting for it forever.
    poisoned: AtomicBool,
}

impl SpinBarrier {
    fn new(parties: usize) -> SpinBarrier {
        SpinBarrier {
            parties,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        }
    }

    fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    fn wait(&self) {
        let gen = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.parties {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == gen {
            if self.poisoned.load(Ordering::Acquire) {
                panic!("sojourn engine: another partition of this run failed");
            }
            if spins < 1 << 12 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Packets shipped to one partition: (link, arrival time, packet).
type Mailbox = Mutex<Vec<(u32, Time, Packet)>>;

/// How a run is cut over threads.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Per node, its partition (`0..parts`).
    pub owner: Vec<u16>,
    pub parts: usize,
    /// The smallest propagation delay of a cut link: the windows' length.
    pub lookahead: Duration,
    /// The links that join two partitions.
    pub cut_links: Vec<u32>,
    /// The heaviest partition's share of the estimated work (the planner's weights).
    pub heaviest_share: f64,
    /// The estimated packets per simulated second crossing the cut (shipped).
    pub shipped_per_s: f64,
    /// The estimated packets per simulated second arriving at links, in all.
    pub link_packets_per_s: f64,
}

impl Plan {
    /// The speed-up the cut should give over one thread, all as shares of one thread's
    /// work: the heaviest partition's, the shipping ([`Plan::shipped_share`]) and the
    /// windows' barriers ([`Plan::window_share`]).
    pub fn predicted_speedup(&self) -> f64 {
        1.0 / (self.heaviest_share + self.shipped_share() + self.window_share()).max(1e-9)
    }

    /// Shipping as a share of one thread's work: a shipped packet costs about what a
    /// packet arriving at a link costs ([`SHIPPED_PACKET_COST`]).
    pub fn shipped_share(&self) -> f64 {
        SHIPPED_PACKET_COST * self.shipped_per_s / self.link_packets_per_s.max(1e-9)
    }

    /// The windows' barriers ([`WINDOW_COST_S`] each) as a share of one thread's work (the
    /// cost model's [`COST_PER_LINK_PACKET_S`] per link packet); none for independent parts,
    /// which meet once, at the end.
    pub fn window_share(&self) -> f64 {
        if self.cut_links.is_empty() {
            return 0.0;
        }
        let work_s = self.link_packets_per_s * COST_PER_LINK_PACKET_S;
        WINDOW_COST_S / self.lookahead.as_secs_f64().max(1e-9) / work_s.max(1e-12)
    }
}

/// One window's barrier and mailbox exchange, measured on 2 cores (SOJOURN_PARALLEL_STATS=1):
/// 9.4 µs a window on the parking lot, 3–7 µs on a lightly loaded dumbbell.
pub const WINDOW_COST_S: f64 = 10e-6;

/// A shipped packet's cost (copied to a mailbox, filed at the far end, its link off the
/// fast path) against a link packet's in the serial run. Fitted to bench/threads.py on 2
/// cores (2026-11-30): the 10,000-subscriber tree (heaviest partition ~84 % of the work, 32 %
/// of the packets crossing the cut) ran at 0.88x, the parking lot (50 %, 13 %) at 1.55x;
/// 1.0 predicts 0.86x and, with its barriers, 1.50x.
pub const SHIPPED_PACKET_COST: f64 = 1.0;

/// A cut predicted to gain less than this runs on one thread instead (`plan`): the outputs
/// are the same, and one thread is then as fast or faster.
pub const MIN_SPEEDUP: f64 = 1.1;

/// [`cut`], unless the cut is predicted not to pay ([`Plan::predicted_speedup`] below
/// [`MIN_SPEEDUP`]): then why it runs on one thread. `SOJOURN_CUT_ANYWAY=1` in the
/// environment keeps such a cut (to measure it: bench/threads.py).
pub fn plan(exp: &Experiment, threads: usize) -> Result<Plan, String> {
    let plan = cut(exp, threads)?;
    let speedup = plan.predicted_speedup();
    if speedup < MIN_SPEEDUP && std::env::var_os("SOJOURN_CUT_ANYWAY").is_none_or(|v| v != "1") {
        return Err(format!(
            "the cut would not pay: predicted {speedup:.2}x (its heaviest partition has ~{:.0} % \
             of the work, shipping costs ~{:.0} % and a barrier every {:.3} ms ~{:.0} %; \
             SOJOURN_CUT_ANYWAY=1 cuts anyway)",
            100.0 * plan.heaviest_share,
            100.0 * plan.shipped_share(),
            plan.lookahead.as_secs_f64() * 1e3,
            100.0 * plan.window_share()
        ));
    }
    Ok(plan)
}

/// How `exp` is cut over at most `threads` threads, or why it cannot be.
///
/// Nodes joined by a link without a propagation delay (or with a delay schedule or
/// reordering, whose arrivals are not a fixed FIFO) stay together. The candidate cuts are
/// none (the network's own disconnected parts) and "every link of delay >= d" for up to 24
/// delays d; each candidate's pieces are packed into at most `threads` partitions by a work
/// estimate (the packets per second the workloads offer to the links a node sends on and
/// receives from: sojourn-experiment's cost model), and the candidate whose heaviest
/// partition is lightest wins, a longer lookahead breaking near-ties.
pub fn cut(exp: &Experiment, threads: usize) -> Result<Plan, String> {
    if threads <= 1 {
        return Err("one thread asked for".into());
    }
    if exp.wifi.is_some() {
        return Err("a Wi-Fi medium is one partition".into());
    }
    if exp.classifiers.iter().any(|c| c.adapt.is_some()) {
        return Err("an adaptive classifier hears of every finished flow at once".into());
    }
    if !exp.record.packet_links.is_empty() {
        return Err("the packet log is not merged across threads yet".into());
    }
    if exp.record.flow_series {
        return Err("flow time series are not merged across threads yet".into());
    }
    if exp.any_external_qdisc() {
        return Err("a Python discipline holds the GIL".into());
    }
    for w in &exp.workloads {
        match w {
            WorkloadPlan::Probe(_) => return Err("probes are not merged across threads yet".into()),
            WorkloadPlan::Tcp(t) => match &t.kind {
                TcpKind::Bulk
                | TcpKind::Transfer { .. }
                | TcpKind::Thin { .. }
                | TcpKind::Poisson { .. } => {}
                TcpKind::App(_) => {
                    return Err(format!(
                        "workload {}: an application steers its flows by their completions",
                        t.index
                    ))
                }
                _ => {
                    return Err(format!(
                        "workload {}: a closed loop waits for its flows' completions",
                        t.index
                    ))
                }
            },
            WorkloadPlan::Udp(_) => {}
        }
    }
    let n = exp.node_names.len();
    let splittable = |l: &crate::config::LinkPlan| {
        !l.delay.is_zero() && l.delay_schedule.is_empty() && l.reorder == 0.0
    };
    let mut delays: Vec<Duration> = exp
        .links
        .iter()
        .filter(|l| splittable(l))
        .map(|l| l.delay)
        .collect();
    delays.sort_unstable();
    delays.dedup();
    // At most 24 thresholds, spread over the distinct delays (a tree of 10,000
    // subscribers has about as many): each costs a pass over the links.
    const THRESHOLDS: usize = 24;
    if delays.len() > THRESHOLDS {
        let k = delays.len();
        delays = (0..THRESHOLDS)
            .map(|i| delays[i * (k - 1) / (THRESHOLDS - 1)])
            .collect();
        delays.dedup();
    }
    // A node's work: the packets that arrive at its links (it enqueues, dequeues and
    // transmits them) and at it over its links (it forwards them, or its endpoints handle
    // them), at the rates the workloads offer (sojourn-experiment's cost model).
    let arrivals = sojourn_experiment::cost::link_arrivals_per_s(exp);
    let mut node_weight = vec![0f64; n];
    for (l, &a) in exp.links.iter().zip(&arrivals) {
        node_weight[l.from as usize] += a;
        node_weight[l.to as usize] += a;
    }
    // Candidate cuts: none (the network's own components), then the links of delay >= d
    // for each delay d, longest first. Each candidate's pieces are packed into at most
    // `threads` partitions, heaviest first into the lightest; the candidate with the
    // lightest heaviest partition wins, a longer lookahead breaking near-ties (within 5 %).
    let cut_at = |d: Option<Duration>| -> (Vec<usize>, usize) {
        let mut uf = UnionFind::new(n);
        for l in &exp.links {
            if !splittable(l) || d.is_none_or(|d| l.delay < d) {
                uf.union(l.from as usize, l.to as usize);
            }
        }
        uf.labels()
    };
    let pack = |labels: &[usize], count: usize| -> (Vec<u16>, usize, f64) {
        let mut weight = vec![0f64; count];
        for (x, &c) in labels.iter().enumerate() {
            weight[c] += node_weight[x];
        }
        let parts = threads.min(count);
        let mut order: Vec<usize> = (0..count).collect();
        order.sort_by(|&a, &b| weight[b].total_cmp(&weight[a]).then(a.cmp(&b)));
        let mut load = vec![0f64; parts];
        let mut piece_part = vec![0u16; count];
        for c in order {
            let p = (0..parts)
                .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
                .expect("a partition");
            load[p] += weight[c];
            piece_part[c] = p as u16;
        }
        let heaviest = load.iter().copied().fold(0.0, f64::max);
        (piece_part, parts, heaviest)
    };
    let mut best: Option<(Vec<usize>, Vec<u16>, usize, f64)> = None;
    for d in std::iter::once(None).chain(delays.iter().rev().map(|&d| Some(d))) {
        let (labels, count) = cut_at(d);
        if count < 2 {
            continue;
        }
        let (piece_part, parts, heaviest) = pack(&labels, count);
        if best.as_ref().is_none_or(|b| heaviest < b.3 * 0.95) {
            best = Some((labels, piece_part, parts, heaviest));
        }
    }
    let Some((labels, piece_part, parts, heaviest)) = best else {
        return Err("no link with a propagation delay splits the network".into());
    };
    let owner: Vec<u16> = labels.iter().map(|&c| piece_part[c]).collect();
    let cut_links: Vec<u32> = exp
        .links
        .iter()
        .enumerate()
        .filter(|(_, l)| owner[l.from as usize] != owner[l.to as usize])
        .map(|(i, _)| i as u32)
        .collect();
    let lookahead = cut_links
        .iter()
        .map(|&i| exp.links[i as usize].delay)
        .min()
        .unwrap_or(exp.duration + Duration::from_ns(1));
    let total: f64 = node_weight.iter().sum();
    let shipped_per_s = cut_links.iter().map(|&l| arrivals[l as usize]).sum();
    Ok(Plan {
        owner,
        parts,
        lookahead,
        cut_links,
        heaviest_share: if total > 0.0 { heaviest / total } else { 1.0 },
        shipped_per_s,
        link_packets_per_s: arrivals.iter().sum(),
    })
}

struct UnionFind(Vec<usize>);

impl UnionFind {
    fn new(n: usize) -> UnionFind {
        UnionFind((0..n).collect())
    }
    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }
    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.0[a.max(b)] = a.min(b);
        }
    }
    /// Each element's piece (numbered by its smallest element's order) and the count.
    fn labels(&mut self) -> (Vec<usize>, usize) {
        let n = self.0.len();
        let mut label = vec![usize::MAX; n];
        let mut count = 0;
        let out = (0..n)
            .map(|x| {
                let r = self.find(x);
                if label[r] == usize::MAX {
                    label[r] = count;
                    count += 1;
                }
                label[r]
            })
            .collect();
        (out, count)
    }
}

/// Runs `exp` cut as `plan` says, one thread per partition; `progress` is called between
/// windows (on the calling thread) and may return false to abort (then `None`).
pub fn run(
    exp: &Experiment,
    seed: u64,
    plan: &Plan,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Option<RunOutput> {
    let parts = plan.parts;
    let new_part = |index: usize| {
        Box::new(Part {
            index: index as u16,
            owner: plan.owner.clone(),
            shipped: vec![0; exp.links.len()],
            incoming: vec![VecDeque::new(); exp.links.len()],
            outbox: Vec::new(),
            sent_on: Vec::new(),
            in_sent_on: vec![false; exp.links.len()],
        })
    };
    let end = Time::ZERO + exp.duration;
    let lookahead = plan.lookahead.as_ns().max(1);
    // Per destination partition, two mailboxes: window w's packets go to `w % 2`, read
    // after the window's barrier, while window w + 1's go to the other one; so one
    // barrier a window suffices.
    let mailboxes: Vec<[Mailbox; 2]> = (0..parts)
        .map(|_| [Mutex::new(Vec::new()), Mutex::new(Vec::new())])
        .collect();
    let barrier = SpinBarrier::new(parts);
    let abort = AtomicBool::new(false);
    let events = AtomicU64::new(0);
    let end_ns = end.0;

    // One partition's whole run; `tick` runs on partition 0 between windows.
    // SOJOURN_PARALLEL_STATS=1: each partition prints its windows, the time it spent
    // running events and the time it spent shipping and waiting (bench/threads.py).
    let stats = std::env::var_os("SOJOURN_PARALLEL_STATS").is_some();
    let work = |index: usize, tick: &mut dyn FnMut(u64) -> bool| -> Sim {
        let t_build = std::time::Instant::now();
        let mut sim = Sim::build(exp, seed, Some(new_part(index)));
        sim.start_apps();
        let build_s = t_build.elapsed().as_secs_f64();
        let (mut busy, mut sync) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
        let mut window = 0u64;
        let mut counted = 0u64;
        loop {
            let until = Time(((window + 1) * lookahead - 1).min(end.0));
            let t0 = std::time::Instant::now();
            sim.run_until(until, &mut |_| true);
            let t1 = std::time::Instant::now();
            busy += t1 - t0;
            if until == end {
                sim.finish();
            }
            sim.ship();
            let out = std::mem::take(&mut sim.part.as_mut().expect("a partition").outbox);
            if !out.is_empty() {
                let mut by_dest: Vec<Vec<(u32, Time, Packet)>> = vec![Vec::new(); parts];
                for (d, l, at, p) in out {
                    by_dest[d as usize].push((l, at, p));
                }
                for (d, msgs) in by_dest.into_iter().enumerate() {
                    if !msgs.is_empty() {
                        mailboxes[d][(window & 1) as usize]
                            .lock()
                            .expect("a mailbox")
                            .extend(msgs);
                    }
                }
            }
            events.fetch_add(sim.events_processed - counted, Ordering::Relaxed);
            counted = sim.events_processed;
            if index == 0 && !tick(until.0) {
                abort.store(true, Ordering::Relaxed);
            }
            barrier.wait();
            let mine = std::mem::take(
                &mut *mailboxes[index][(window & 1) as usize]
                    .lock()
                    .expect("a mailbox"),
            );
            // Per link the messages come from one partition, in its order; links are
            // independent queues, so the order between them does not matter.
            sim.receive(mine.into_iter());
            sync += t1.elapsed();
            if until == end || abort.load(Ordering::Relaxed) {
                if stats {
                    eprintln!(
                        "partition {index}: {} windows, build {build_s:.3} s, events {:.3} s, ship+wait {:.3} s ({:.1} us a window), {} events",
                        window + 1,
                        busy.as_secs_f64(),
                        sync.as_secs_f64(),
                        sync.as_secs_f64() * 1e6 / (window + 1) as f64,
                        sim.events_processed
                    );
                }
                return sim;
            }
            window += 1;
        }
    };

    let sims: Vec<Sim> = std::thread::scope(|s| {
        let handles: Vec<_> = (1..parts)
            .map(|i| {
                let (work, barrier) = (&work, &barrier);
                s.spawn(move || {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        work(i, &mut |_| true)
                    }))
                    .inspect_err(|_| barrier.poison())
                })
            })
            .collect();
        let mut last_report = 0u64;
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            work(0, &mut |t| {
                // About every 2^16 events of all partitions, as a single-threaded run does.
                let e = events.load(Ordering::Relaxed);
                if e - last_report < 1 << 16 && t < end_ns {
                    return true;
                }
                last_report = e;
                progress(&Progress {
                    now: Time(t),
                    end,
                    events: e,
                })
            })
        }))
        .inspect_err(|_| barrier.poison());
        // Every partition's result, then the first failure (an engine panic, or a
        // progress callback's) goes on up as it would from a run on one thread.
        let mut all = vec![first];
        for h in handles {
            all.push(h.join().expect("a partition's thread catches its panics"));
        }
        let echo = |e: &Box<dyn std::any::Any + Send>| {
            e.downcast_ref::<&str>()
                .is_some_and(|m| m.contains("another partition"))
                || e.downcast_ref::<String>()
                    .is_some_and(|m| m.contains("another partition"))
        };
        let (ok, failed): (Vec<_>, Vec<_>) = all.into_iter().partition(|r| r.is_ok());
        if !failed.is_empty() {
            let mut errs: Vec<_> = failed.into_iter().filter_map(|r| r.err()).collect();
            let i = errs.iter().position(|e| !echo(e)).unwrap_or(0);
            std::panic::resume_unwind(errs.swap_remove(i));
        }
        ok.into_iter()
            .map(|r| r.unwrap_or_else(|_| unreachable!("partitioned into the ok ones")))
            .collect()
    });
    if abort.load(Ordering::Relaxed) {
        return None;
    }
    Some(merge(sims, plan, exp))
}

/// The single-threaded run's outputs from the partitions' states.
fn merge(mut sims: Vec<Sim>, plan: &Plan, exp: &Experiment) -> RunOutput {
    let mut rest = sims.split_off(1);
    let main = &mut sims[0];
    // Flow records: every partition holds every flow, each counting what happened at its
    // nodes; counters add, the rest is set in one partition only (or alike in all).
    for o in &rest {
        for (m, r) in main.flows.iter_mut().zip(o.flows.iter()) {
            m.add_partition(r);
        }
        main.acct.created += o.acct.created;
        main.acct.delivered += o.acct.delivered;
        main.acct.dropped += o.acct.dropped;
        // Generators' timers, samples and the warm-up's end run in every partition alike:
        // counted once, as partition 0's.
        let replicated = o.event_counts.app_timer + o.event_counts.other;
        main.events_processed += o.events_processed - replicated;
        let mut own = o.event_counts;
        own.app_timer = 0;
        own.other = 0;
        main.event_counts.add(&own);
    }
    let inside: u64 = main.in_network() + rest.iter().map(|s| s.in_network()).sum::<u64>();
    let a = main.acct;
    assert!(
        a.created == a.delivered + a.dropped + inside,
        "sojourn engine bug: conservation violated across partitions: created {} != delivered {} + dropped {} + in network {inside}",
        a.created,
        a.delivered,
        a.dropped
    );
    // Time series: at each sample, the serial run pushes the sampled links in their order;
    // each partition pushed its own. Rows are grouped by (time, link) and replayed in
    // that order, so series ids come out in the serial run's first-push order.
    let rank: std::collections::HashMap<String, usize> = main
        .sampled_link_names()
        .into_iter()
        .enumerate()
        .map(|(k, n)| (n, k))
        .collect();
    let mut all_series: Vec<TimeSeries> = vec![std::mem::take(&mut main.series)];
    for o in &mut rest {
        all_series.push(std::mem::take(&mut o.series));
    }
    let series = merge_series(&all_series, &rank);
    main.series = series;
    let owner_of_link: Vec<usize> = exp
        .links
        .iter()
        .map(|l| plan.owner[l.from as usize] as usize)
        .collect();
    let fct_from = exp.record.fct_from;
    let mut all = sims;
    all.extend(rest);
    let (main, others) = all.split_first_mut().expect("partitions");
    crate::output::collect_merged(main, others, &owner_of_link, inside, fct_from)
}

/// The partitions' time series as the single-threaded run writes it (see `merge`).
fn merge_series(
    parts: &[TimeSeries],
    rank: &std::collections::HashMap<String, usize>,
) -> TimeSeries {
    // Groups: (time, rank of the entity, partition, first row, rows).
    let mut groups: Vec<(u64, usize, usize, usize, usize)> = Vec::new();
    for (p, ts) in parts.iter().enumerate() {
        let mut i = 0;
        while i < ts.t_ns.len() {
            let entity = &ts.names[ts.series[i] as usize].0;
            let mut j = i + 1;
            while j < ts.t_ns.len()
                && ts.t_ns[j] == ts.t_ns[i]
                && ts.names[ts.series[j] as usize].0 == *entity
            {
                j += 1;
            }
            let r = rank.get(entity.as_str()).copied().unwrap_or(usize::MAX);
            groups.push((ts.t_ns[i], r, p, i, j - i));
            i = j;
        }
    }
    groups.sort_unstable();
    let mut out = TimeSeries::default();
    out.reserve(parts.iter().map(|t| t.len()).sum());
    for (t, _, p, first, len) in groups {
        let ts = &parts[p];
        for k in first..first + len {
            let (en, mn) = &ts.names[ts.series[k] as usize];
            let e = out.entity(en);
            let id = out.series_id(e, mn);
            out.push_id(Time(t), id, ts.value[k]);
        }
    }
    out
}
