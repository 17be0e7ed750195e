//! What a lingering connection costs the engine (docs/limits.md, "TIME_WAIT"). A finished
//! transfer's receiver stays 60 s after the FIN (Linux's TIME_WAIT length), answering
//! retransmissions; at 2,000 transfers per second ~120,000 of them are held at once. Like
//! Linux, which swaps the full socket for a small `inet_timewait_sock`, the engine swaps
//! the receiver for a compact [`sojourn_sim::tcp::receiver::TimeWait`].
//!
//! Measured here with a counting allocator: the live heap bytes between two moments of a
//! run whose held connections grow (every arrival lingers 60 s, the run is shorter), over
//! the growth of the held records: everything a lingering connection holds (its endpoint,
//! its flow record, its timer event), at the allocator's request sizes.

use sojourn_sim::sim::Sim;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            LIVE.fetch_add(l.size() as isize, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size() as isize, Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            LIVE.fetch_add(new as isize - l.size() as isize, Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Heap bytes per held connection between `from_s` and `to_s` of simulated time, and the
/// held counts at both moments.
fn bytes_per_held(per_s: u32, from_s: u64, to_s: u64) -> (f64, usize, usize) {
    let text = format!(
        r#"
        duration = "{to_s}s"
        [topology]
        kind = "dumbbell"
        pairs = 1
        bottleneck = {{ rate = "1Gbit", delay = "5ms", qdisc = {{ kind = "fq_codel" }} }}
        [[workload]]
        kind = "poisson"
        pair = 0
        interval = "{}us"
        size = "10kB"
        "#,
        1_000_000 / per_s
    );
    let exp = sojourn_experiment::parse_str(&text, Path::new(".")).unwrap();
    let mut sim = Sim::new(&exp, 1);
    sim.start_apps();
    sim.release_final_flows();
    let mut at: Vec<(isize, usize)> = Vec::new();
    let marks = [from_s * 1_000_000_000, to_s * 1_000_000_000 - 100_000_000];
    sim.run_ticks(&mut |sim: &mut Sim| {
        sim.flows.release(sim.now);
        drop(sim.flows.take_released(usize::MAX));
        if at.len() < 2 && sim.now.0 >= marks[at.len()] {
            at.push((LIVE.load(Relaxed), sim.flows.held()));
        }
        at.len() < 2
    });
    assert_eq!(at.len(), 2);
    let ((b0, h0), (b1, h1)) = (at[0], at[1]);
    ((b1 - b0) as f64 / (h1 - h0) as f64, h0, h1)
}

#[test]
fn a_lingering_connection_holds_a_few_hundred_bytes() {
    // 500 transfers/s from 10 s to 40 s: ~15,000 more connections held (none released yet:
    // each lingers 60 s).
    let (per, h0, h1) = bytes_per_held(500, 10, 40);
    eprintln!("TIME_WAIT: {per:.0} heap bytes per held connection ({h0} -> {h1} held)");
    assert!(h1 - h0 > 14_000, "{h0} -> {h1}");
    assert!(per < BUDGET, "{per:.0} B per lingering connection");
}

/// At most 1 KiB of heap per lingering connection, at the allocator's request sizes:
/// measured 841 B with the compact TIME_WAIT state, 1,096 B when the whole receiver
/// lingered (docs/limits.md, "TIME_WAIT").
const BUDGET: f64 = 1024.0;
