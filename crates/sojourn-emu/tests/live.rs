//! End-to-end live runs (root only: they create network namespaces). Each is a few
//! seconds of real kernel TCP through the user-space forwarder.

use sojourn_emu::run::{self, EmuError};
use sojourn_sim::{Column, RunOutput};
use std::path::Path;
use std::sync::Mutex;

/// Live runs share the machine's two cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn skip() -> bool {
    if let Err(why) = sojourn_emu::netns::check_available() {
        eprintln!("skipped: live tests need network namespaces ({why})");
        return true;
    }
    false
}

fn live(text: &str) -> RunOutput {
    let exp = sojourn_sim::config::from_toml(text, Path::new(".")).unwrap();
    match run::run(&exp, exp.seed, &mut |_| true) {
        Ok(o) => o,
        Err(e) => panic!("live run failed: {e}"),
    }
}

fn f64s(o: &RunOutput, col: &str) -> Vec<f64> {
    match o.flows.get(col) {
        Some(Column::F64(v)) => v.clone(),
        _ => panic!("no column {col}"),
    }
}

#[test]
fn cubic_bulk_through_fq_codel() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = live(
        r#"
        duration = "4s"
        warmup = "1s"
        [topology]
        bottleneck = { rate = "20Mbit", delay = "10ms", qdisc = "fq_codel" }
        [transport]
        cc = "cubic"
        [[workload]]
        kind = "bulk"
        [record]
        interval = "100ms"
        flows = true
    "#,
    );
    let s = &o.summary;
    assert_eq!(s["engine"], "emulate");
    let b = &s["links"]["bottleneck"];
    let util = b["utilisation"].as_f64().unwrap();
    // One CUBIC flow keeps a 20 Mbit/s, 20 ms-RTT bottleneck busy after 1 s of warm-up.
    assert!(util > 0.85 && util <= 1.01, "utilisation {util}");
    // fq_codel's target is 5 ms: a standing queue stays near it, far below what a FIFO
    // of 10240 packets (fq_codel's limit) would let a bulk flow build (seconds).
    let mean = b["sojourn_ms"]["mean"].as_f64().unwrap();
    assert!(mean < 15.0, "mean sojourn {mean} ms");
    assert!(s["accounting"]["conserved"].as_bool().unwrap());
    let gp = f64s(&o, "goodput_bps");
    assert!(gp[0] > 15e6 && gp[0] < 20.5e6, "goodput {}", gp[0]);
}

fn strs(o: &RunOutput, col: &str) -> Vec<String> {
    match o.flows.get(col) {
        Some(Column::Str(v)) => v.clone(),
        _ => panic!("no column {col}"),
    }
}

fn u64s(o: &RunOutput, col: &str) -> Vec<u64> {
    match o.flows.get(col) {
        Some(Column::U64(v)) => v.clone(),
        _ => panic!("no column {col}"),
    }
}

fn u32s(o: &RunOutput, col: &str) -> Vec<u32> {
    match o.flows.get(col) {
        Some(Column::U32(v)) => v.clone(),
        _ => panic!("no column {col}"),
    }
}

#[test]
fn every_workload_kind_runs_live() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = live(
        r#"
        duration = "3s"
        [topology]
        pairs = 4
        bottleneck = { rate = "50Mbit", delay = "5ms", qdisc = "fq_codel" }
        [[workload]]
        kind = "cbr"
        pair = 0
        rate = "2Mbit"
        packet_size = "1000B"
        [[workload]]
        kind = "onoff"
        pair = 1
        rate = "2Mbit"
        on_time = "200ms"
        off_time = "200ms"
        [[workload]]
        kind = "thin"
        pair = 2
        message_size = "100B"
        interval = "50ms"
        [[workload]]
        kind = "thin"
        transport = "udp"
        pair = 3
        message_size = "3000B"
        interval = "100ms"
        [[workload]]
        kind = "request_response"
        pair = 0
        response_size = "20KB"
        think = "100ms"
        [[workload]]
        kind = "poisson"
        pair = 1
        interval = "100ms"
        size = "30KB"
        [[workload]]
        kind = "actors"
        pair = 2
        count = 2
        think = "100ms"
        size = { dist = "uniform", min = "5KB", max = "50KB" }
        [[workload]]
        kind = "transfer"
        pair = 3
        size = "2MB"
        [[workload]]
        kind = "bulk"
        pair = 3
        start = "1s"
        cc = "bbr"
    "#,
    );
    let s = &o.summary;
    assert_eq!(s["emulate"]["socket_errors"], 0, "{}", s["emulate"]);
    let kind = strs(&o, "kind");
    let wl = u32s(&o, "workload");
    let delivered = u64s(&o, "delivered_bytes");
    let size = u64s(&o, "size_bytes");
    let end = f64s(&o, "end_s");
    let delay = f64s(&o, "mean_delay_ms");
    let cc = strs(&o, "cc");
    for w in 0..9u32 {
        let rows: Vec<usize> = (0..kind.len()).filter(|&i| wl[i] == w).collect();
        assert!(!rows.is_empty(), "workload {w} made no flow");
        assert!(
            rows.iter().any(|&i| delivered[i] > 0),
            "workload {w} delivered nothing"
        );
    }
    // CBR: 2 Mbit/s of 1000-B frames (958 B payload) for 3 s, far below the bottleneck:
    // 750 datagrams are sent, one every 4 ms. All arrive but those still in flight when the
    // run stops (sent in the last one-way delay, 5 ms + the forwarder's lag under load):
    // at most 10 (40 ms) may be missing, none may be extra.
    let cbr = (0..kind.len()).find(|&i| kind[i] == "udp_cbr").unwrap();
    let per: u64 = 1000 - 42;
    assert!(
        delivered[cbr] <= 750 * per && delivered[cbr] >= 740 * per,
        "cbr delivered {} B = {} datagrams",
        delivered[cbr],
        delivered[cbr] / per
    );
    // One-way delay of a datagram: at least the 5 ms of propagation.
    assert!(
        delay[cbr] >= 5.0 && delay[cbr] < 20.0,
        "cbr delay {}",
        delay[cbr]
    );
    // Every sized TCP flow that completed delivered exactly its size.
    for i in 0..kind.len() {
        if kind[i] == "tcp" && size[i] > 0 && end[i].is_finite() {
            assert_eq!(delivered[i], size[i], "flow {i}");
        }
    }
    let xfer = (0..kind.len()).find(|&i| wl[i] == 7).unwrap();
    assert!(end[xfer].is_finite(), "the 2 MB transfer completed");
    let bulk = (0..kind.len()).find(|&i| wl[i] == 8).unwrap();
    assert_eq!(cc[bulk], "bbr");
    assert!(s["accounting"]["conserved"].as_bool().unwrap());
}

#[test]
fn refusals_name_the_key_before_anything_starts() {
    let exp = sojourn_sim::config::from_toml(
        r#"
        duration = "1s"
        [topology]
        bottleneck = { rate = "10Mbit", delay = "5ms" }
        [transport]
        cc = "vegas"
        [[workload]]
        kind = "bulk"
    "#,
        Path::new("."),
    )
    .unwrap();
    match run::run(&exp, 1, &mut |_| true) {
        Err(EmuError::Refused(e)) => {
            assert_eq!(e.path, "transport.cc");
            // The message names what this kernel offers.
            let offered =
                std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                    .unwrap();
            assert!(e.msg.contains(offered.trim()), "{}", e.msg);
        }
        Ok(_) => panic!("vegas accepted"),
        Err(e) => panic!("wrong error: {e}"),
    }
}
