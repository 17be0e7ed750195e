//! End-to-end live runs (root only: they create network namespaces). Each is a few
//! seconds of real kernel TCP through the user-space forwarder.

use sojourn_emu::run::{self, EmuError};
use sojourn_record::{Column, RunOutput};
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
    let exp = sojourn_experiment::from_toml(text, Path::new(".")).unwrap();
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
    let exp = sojourn_experiment::from_toml(
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

fn pkt_col<'a>(o: &'a RunOutput, col: &str) -> &'a Column {
    o.packets
        .as_ref()
        .expect("a packet log")
        .get(col)
        .unwrap_or_else(|| panic!("no packet column {col}"))
}

#[test]
fn drops_are_attributed_to_flows_and_logged_per_packet() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Two CBR sources (6 + 9 Mbit/s of 1000-B frames) into a 10 Mbit/s pfifo of 20
    // packets: a third of what arrives is dropped, at the bottleneck only.
    let o = live(
        r#"
        duration = "3s"
        [topology]
        pairs = 2
        bottleneck = { rate = "10Mbit", delay = "2ms", qdisc = { kind = "pfifo", limit = 20 } }
        [[workload]]
        kind = "cbr"
        pair = 0
        rate = "6Mbit"
        packet_size = "1000B"
        [[workload]]
        kind = "cbr"
        pair = 1
        rate = "9Mbit"
        packet_size = "1000B"
        [record]
        packets = ["bottleneck"]
    "#,
    );
    let s = &o.summary;
    assert!(s["accounting"]["conserved"].as_bool().unwrap());
    let b = &s["links"]["bottleneck"];
    let link_drops = b["drops_total"].as_u64().unwrap();
    let sent = u64s(&o, "pkts_sent");
    let dropped = u64s(&o, "pkts_dropped");
    let delivered = u64s(&o, "delivered_bytes");
    let flow_ids = u32s(&o, "flow");
    // Conservation per flow: every datagram the source sent is delivered, dropped, or
    // still queued/propagating at the stop (at most the 20-packet queue + a few in
    // flight). 1000-B frames carry 958 B of payload.
    for i in 0..sent.len() {
        let got = delivered[i] / 958;
        assert!(dropped[i] > 0, "flow {i} lost nothing at 1.5x overload");
        let accounted = got + dropped[i];
        assert!(
            accounted <= sent[i] && sent[i] - accounted <= 30,
            "flow {i}: sent {} ≠ delivered {got} + dropped {}",
            sent[i],
            dropped[i]
        );
    }
    // The flows' drops are the link's (no warm-up: the link counts from the start to the
    // run's duration; a datagram sent just before the end may be dropped just after it).
    let flows_total: u64 = dropped.iter().sum();
    assert!(
        flows_total >= link_drops && flows_total - link_drops <= 5,
        "flows {flows_total} vs link {link_drops}"
    );
    // The packet log: one row per dequeue or drop at the bottleneck, with the flows' ids.
    let Column::Str(event) = pkt_col(&o, "event") else {
        panic!()
    };
    let Column::U32(flow) = pkt_col(&o, "flow") else {
        panic!()
    };
    let Column::F64(soj) = pkt_col(&o, "sojourn_ms") else {
        panic!()
    };
    for (i, &f) in flow_ids.iter().enumerate() {
        let rows = |e: &str| {
            (0..event.len())
                .filter(|&k| flow[k] == f && event[k] == e)
                .count() as u64
        };
        assert_eq!(rows("drop:overlimit"), dropped[i], "flow {f}");
        // The log ends at the run's duration, as the simulator's: dequeued = delivered +
        // the few still being serialised or propagating then (2 ms + 0.8 ms each).
        let deq = rows("dequeue");
        let got = delivered[i] / 958;
        assert!(
            deq + 2 >= got && deq <= got + 8,
            "flow {f}: {deq} dequeued, {got} delivered"
        );
    }
    // A 20-packet FIFO at 10 Mbit/s holds at most 20 × 800 µs = 16 ms.
    let worst = soj.iter().cloned().fold(0.0, f64::max);
    assert!(worst <= 16.0 + 0.5, "sojourn {worst} ms");
}

#[test]
fn warm_up_starts_the_measured_period_as_in_the_simulator() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Before the end of warm-up a 20 Mbit/s source overloads a 10 Mbit/s pfifo of 50
    // (sojourn ≈ 50 × 800 µs = 40 ms, drops); it stops at 1 s and the queue drains by
    // 1.04 s. After warm-up (1.5 s) a 2 Mbit/s source alone finds an idle link.
    let o = live(
        r#"
        duration = "3s"
        warmup = "1500ms"
        [topology]
        pairs = 2
        bottleneck = { rate = "10Mbit", delay = "2ms", qdisc = { kind = "pfifo", limit = 50 } }
        [[workload]]
        kind = "cbr"
        pair = 0
        rate = "20Mbit"
        packet_size = "1000B"
        stop = "1s"
        [[workload]]
        kind = "cbr"
        pair = 1
        rate = "2Mbit"
        packet_size = "1000B"
        start = "1500ms"
        [record]
        interval = "100ms"
    "#,
    );
    let b = &o.summary["links"]["bottleneck"];
    // The sojourn histogram and the drops cover only the measured period: an idle link
    // (each 800-µs frame alone in a 4 ms gap) — a few ms at most for frames a loaded
    // sending host bunched up, never the 40 ms of the warm-up queue.
    let soj = &b["sojourn_ms"];
    assert!(soj["max"].as_f64().unwrap() < 10.0, "{soj}");
    assert!(soj["mean"].as_f64().unwrap() < 1.0, "{soj}");
    assert_eq!(b["drops_total"], 0, "{b}");
    // 2 Mbit/s of 10: utilisation 0.2 over [1.5 s, 3 s].
    let util = b["utilisation"].as_f64().unwrap();
    assert!((util - 0.2).abs() < 0.01, "utilisation {util}");
    // The overload flow still has its drops (flows count the whole run, as simulated).
    let dropped = u64s(&o, "pkts_dropped");
    assert!(dropped[0] > 100, "{dropped:?}");
    // The time series run over the whole run, from the builder both engines share: the queue
    // was full during the overload (50 packets) and the first drops series is positive.
    let (t, series, value) = match (
        o.timeseries.get("time_s"),
        o.timeseries.get("series"),
        o.timeseries.get("value"),
    ) {
        (Some(Column::F64(t)), Some(Column::U32(s)), Some(Column::F64(v))) => (t, s, v),
        _ => panic!("timeseries columns"),
    };
    let (Some(Column::Str(ent)), Some(Column::Str(met))) =
        (o.series_names.get("entity"), o.series_names.get("metric"))
    else {
        panic!("series names")
    };
    let id = |m: &str| {
        (0..ent.len())
            .find(|&i| ent[i] == "bottleneck" && met[i] == m)
            .unwrap_or_else(|| panic!("no bottleneck {m} series")) as u32
    };
    let q: Vec<(f64, f64)> = (0..t.len())
        .filter(|&i| series[i] == id("queue_packets"))
        .map(|i| (t[i], value[i]))
        .collect();
    assert!(
        q.iter().any(|&(t, v)| t > 0.3 && t < 1.0 && v >= 45.0),
        "{q:?}"
    );
    // Drained by 1.04 s; afterwards only what a delayed sender bunches (≤ 10 ms' worth).
    assert!(q.iter().all(|&(t, v)| t < 1.1 || v <= 12.0), "{q:?}");
    // Samples on the interval's grid, none after the run's duration.
    assert!(q
        .iter()
        .all(|&(t, _)| ((t * 10.0).round() - t * 10.0).abs() < 1e-6 && t <= 3.0));
    let _ = id("ecn_marks");
}

#[test]
fn ipv6_tcp_runs_end_to_end() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // `ip = 6`: the hosts get IPv6 addresses, the kernel's CUBIC runs over IPv6 through
    // a 10 Mbit/s pfifo of 20 packets (it overflows: drops), and a 1 MB transfer
    // completes beside it.
    let o = live(
        r#"
        duration = "4s"
        [topology]
        pairs = 2
        bottleneck = { rate = "10Mbit", delay = "5ms", qdisc = { kind = "pfifo", limit = 20 } }
        [transport]
        ip = 6
        # MTU frames (GSO mode would pass buffers whole): link drops and flow drops then
        # count the same packets, and every full frame is 1514 B.
        gso = false
        [[workload]]
        kind = "bulk"
        pair = 0
        [[workload]]
        kind = "transfer"
        pair = 1
        size = "1MB"
        start = "500ms"
        [record]
        packets = ["bottleneck"]
    "#,
    );
    let s = &o.summary;
    assert!(s["accounting"]["conserved"].as_bool().unwrap());
    let hosts = s["emulate"]["hosts"].as_array().unwrap();
    assert!(hosts.iter().all(|h| h["addr6"]
        .as_str()
        .is_some_and(|a| a.starts_with("fd00:89::"))));
    let size = u64s(&o, "size_bytes");
    let delivered = u64s(&o, "delivered_bytes");
    let end = f64s(&o, "end_s");
    let x = (0..size.len()).find(|&i| size[i] == 1_000_000).unwrap();
    assert!(end[x].is_finite(), "the transfer over IPv6 completed");
    assert_eq!(delivered[x], 1_000_000);
    // The drops are attributed to the flows by their IPv6 5-tuples (the forwarder parses
    // the real headers, the load generator knows its IPv6 sockets): all of them.
    let dropped = u64s(&o, "pkts_dropped");
    let link = s["links"]["bottleneck"]["drops_total"].as_u64().unwrap();
    let total: u64 = dropped.iter().sum();
    assert!(link > 0, "a 20-packet FIFO overflows under CUBIC");
    assert!(
        total >= link && total - link <= 5,
        "flows {total} vs link {link}"
    );
    // Full data frames are 1514 B: MSS 1428 + 40 (IPv6) + 20 (TCP) + 12 (timestamps) + 14.
    let Some(Column::U32(len)) = o.packets.as_ref().unwrap().get("len_bytes") else {
        panic!()
    };
    assert_eq!(len.iter().copied().max(), Some(1514));
}
