//! Engine behaviour against independent truths: queueing arithmetic, exact delays,
//! schedules and traces, determinism and conservation.

mod tcp_common;
use tcp_common::fingerprint;

use sojourn_sim::config::from_toml;
use sojourn_sim::{run_toml, Column, RunOutput, Sim};
use std::path::Path;

fn link<'a>(out: &'a RunOutput, name: &str) -> &'a serde_json::Value {
    &out.summary["links"][name]
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn col_f64<'a>(c: &'a sojourn_sim::Columns, name: &str) -> &'a [f64] {
    match c.get(name) {
        Some(Column::F64(v)) => v,
        other => panic!("{name}: {other:?}"),
    }
}

/// CBR at rate r into capacity C < r with pfifo limit L: utilisation → 1, drop rate →
/// 1 − C/r, queueing delay of delivered packets → L·size/C.
#[test]
fn cbr_overload_matches_queueing_arithmetic() {
    let out = run_toml(
        r#"
        duration = "30s"
        warmup = "5s"
        [topology]
        kind = "graph"
        nodes = ["src", "dst"]
        [[topology.links]]
        from = "src"
        to = "dst"
        name = "wire"
        rate = "10Mbit"
        delay = "5ms"
        qdisc = { kind = "pfifo", limit = 200 }
        [[workload]]
        kind = "cbr"
        from = "src"
        to = "dst"
        rate = "12Mbit"
        packet_size = "1500B"
        "#,
    )
    .unwrap();
    let l = link(&out, "wire");
    let util = f(&l["utilisation"]);
    // At most one packet that started before the warm-up ended can add to the period.
    let one_packet = 1500.0 * 8.0 / (10e6 * 25.0);
    assert!(
        util > 0.999 && util <= 1.0 + one_packet,
        "utilisation {util}"
    );
    let enq = f(&l["tx_packets"]) + f(&l["drops_total"]);
    let drop_rate = f(&l["drops_total"]) / enq;
    let expect = 1.0 - 10.0 / 12.0;
    assert!(
        (drop_rate - expect).abs() / expect < 0.01,
        "drop rate {drop_rate} vs {expect}"
    );
    // L · size / C = 200 · 1500 · 8 / 10e6 = 240 ms.
    let mean_ms = f(&l["sojourn_ms"]["mean"]);
    assert!(
        (mean_ms - 240.0).abs() / 240.0 < 0.01,
        "sojourn {mean_ms} ms vs 240 ms"
    );
    assert_eq!(out.summary["accounting"]["conserved"], true);
}

/// Below capacity: no drops, no queueing, and end-to-end delay = Σ (propagation +
/// serialisation) to the nanosecond.
#[test]
fn cbr_underload_delay_is_exact() {
    let out = run_toml(
        r#"
        duration = "10s"
        [topology]
        kind = "dumbbell"
        pairs = 1
        bottleneck = { rate = "10Mbit", delay = "20ms" }
        access = { rate = "100Mbit", delay = "1.25ms" }
        [[workload]]
        kind = "cbr"
        pair = 0
        rate = "5Mbit"
        packet_size = "1514B"
        "#,
    )
    .unwrap();
    assert_eq!(out.summary["links"]["bottleneck"]["drops_total"], 0);
    assert_eq!(
        f(&out.summary["links"]["bottleneck"]["sojourn_ms"]["max"]),
        0.0
    );
    // s0.up: 1514·8/100e6 = 121.12 us + 1.25 ms; bottleneck: 1211.2 us + 20 ms;
    // d0.down: 121.12 us + 1.25 ms. Total 23.95344 ms.
    let expect_ns = 121_120 + 1_250_000 + 1_211_200 + 20_000_000 + 121_120 + 1_250_000;
    let mean = col_f64(&out.flows, "mean_delay_ms")[0];
    let max = col_f64(&out.flows, "max_delay_ms")[0];
    assert_eq!((max * 1e6).round() as u64, expect_ns);
    assert!((mean * 1e6 - expect_ns as f64).abs() < 1e-3, "{mean}");
}

fn series(out: &RunOutput, entity: &str, metric: &str) -> Vec<(f64, f64)> {
    let names = &out.series_names;
    let (Some(Column::U32(ids)), Some(Column::Str(ents)), Some(Column::Str(mets))) = (
        names.get("series"),
        names.get("entity"),
        names.get("metric"),
    ) else {
        panic!()
    };
    let id = ids
        .iter()
        .zip(ents.iter().zip(mets))
        .find(|(_, (e, m))| *e == entity && *m == metric)
        .map(|(i, _)| *i)
        .expect("series exists");
    let Some(Column::U32(sid)) = out.timeseries.get("series") else {
        panic!()
    };
    let t = col_f64(&out.timeseries, "time_s");
    let v = col_f64(&out.timeseries, "value");
    sid.iter()
        .enumerate()
        .filter(|(_, &s)| s == id)
        .map(|(i, _)| (t[i], v[i]))
        .collect()
}

/// A rate schedule halves the bottleneck at 5 s: throughput per 0.5-s bin follows it.
#[test]
fn rate_schedule_is_followed() {
    let out = run_toml(
        r#"
        duration = "10s"
        [topology]
        kind = "graph"
        nodes = ["a", "b"]
        [[topology.links]]
        from = "a"
        to = "b"
        name = "l"
        rate = "10Mbit"
        rate_schedule = [{ at = "5s", rate = "5Mbit" }]
        qdisc = { kind = "pfifo", limit = 100 }
        [[workload]]
        kind = "cbr"
        from = "a"
        to = "b"
        rate = "20Mbit"
        packet_size = "1000B"
        [record]
        interval = "500ms"
        links = ["l"]
        "#,
    )
    .unwrap();
    let tp = series(&out, "l", "throughput_bps");
    for (t, v) in tp {
        let expect = if t <= 5.0 { 10e6 } else { 5e6 };
        if (t - 5.0).abs() < 0.6 || t < 0.6 {
            continue; // bins straddling the change or the start
        }
        assert!(
            (v - expect).abs() / expect < 0.01,
            "t={t} throughput {v} vs {expect}"
        );
    }
}

/// A Mahimahi trace: opportunities every ms during the first half of each second.
#[test]
fn trace_delivery_follows_opportunities() {
    let dir = std::env::temp_dir().join(format!("sojourn-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut lines: Vec<String> = (1..=500).map(|ms| ms.to_string()).collect();
    lines.push("1000".into()); // one more opportunity at the period end
    std::fs::write(dir.join("half.trace"), lines.join("\n")).unwrap();
    let text = r#"
        duration = "4s"
        [topology]
        kind = "graph"
        nodes = ["a", "b"]
        [[topology.links]]
        from = "a"
        to = "b"
        name = "cell"
        trace = "half.trace"
        qdisc = { kind = "pfifo", limit = 1000 }
        [[workload]]
        kind = "cbr"
        from = "a"
        to = "b"
        rate = "20Mbit"
        packet_size = "1500B"
        [record]
        interval = "250ms"
        "#;
    let exp = from_toml(text, &dir).unwrap();
    let out = sojourn_sim::run(&exp, 1, &mut |_| true).unwrap();
    // Each 250-ms bin of the "on" half carries 250 opportunities of 1500 B; bins of the
    // "off" half carry at most the single opportunity at the period end (1000 ms) or one
    // delivered at a bin edge (an event at the same instant as the sample may fall either side).
    let tp = series(&out, "cell", "throughput_bps");
    let mut checked = 0;
    for (t, v) in tp {
        if t <= 1.0 {
            continue;
        }
        let phase = ((t - t.floor()) * 4.0).round() as u32 % 4; // 1, 2 = on bins; 3, 0 = off bins
        let bytes = v * 0.25 / 8.0;
        match phase {
            1 | 2 => assert!(
                (bytes - 250.0 * 1500.0).abs() <= 1500.0,
                "t={t} bytes {bytes}"
            ),
            _ => assert!(bytes <= 1500.0, "t={t}: {bytes} B in an off bin"),
        }
        checked += 1;
    }
    assert!(checked >= 10);
    std::fs::remove_dir_all(&dir).ok();
}

const RANDOM_EXP: &str = r#"
    duration = "5s"
    seed = 7
    [topology]
    kind = "dumbbell"
    pairs = 3
    bottleneck = { rate = "10Mbit", delay = "10ms", qdisc = { kind = "pfifo", limit = 50 }, loss = 0.01 }
    [[workload]]
    kind = "onoff"
    pairs = "all"
    count = 6
    rate = "4Mbit"
    on_time = "200ms"
    off_time = "300ms"
    [record]
    interval = "100ms"
    packets = ["bottleneck"]
    flows = true
"#;

#[test]
fn same_seed_same_bytes_different_seed_differs() {
    let exp = from_toml(RANDOM_EXP, Path::new(".")).unwrap();
    let a = sojourn_sim::run(&exp, 7, &mut |_| true).unwrap();
    let b = sojourn_sim::run(&exp, 7, &mut |_| true).unwrap();
    let c = sojourn_sim::run(&exp, 8, &mut |_| true).unwrap();
    assert_eq!(fingerprint(&a), fingerprint(&b));
    assert_ne!(fingerprint(&a), fingerprint(&c));
}

/// Conservation for randomised workloads and topologies (property test over seeds).
#[test]
fn conservation_holds_for_random_workloads() {
    use sojourn_core::rng::Rng;
    for seed in 0..25u64 {
        let mut r = Rng::from_seed(seed);
        let pairs = 1 + r.below(4);
        let limit = 2 + r.below(200);
        let loss = if r.chance(0.5) { 0.02 } else { 0.0 };
        let qdisc = ["pfifo", "bfifo", "pfifo_head_drop"][r.below(3) as usize];
        let n = 1 + r.below(8);
        let rate = 1 + r.below(15);
        let dur_ms = 200 + r.below(3000);
        let text = format!(
            r#"
            duration = "{dur_ms}ms"
            [topology]
            kind = "dumbbell"
            pairs = {pairs}
            bottleneck = {{ rate = "8Mbit", delay = "{d}ms", qdisc = {{ kind = "{qdisc}", limit = {lim} }}, loss = {loss} }}
            access = {{ rate = "50Mbit", delay = "1ms" }}
            [[workload]]
            kind = "onoff"
            pairs = "all"
            count = {n}
            rate = "{rate}Mbit"
            packet_size = "{ps}B"
            on_time = "50ms"
            off_time = "80ms"
            [[workload]]
            kind = "cbr"
            pair = 0
            rate = "1Mbit"
            packet_size = "200B"
            "#,
            d = r.below(50),
            lim = if qdisc == "bfifo" {
                limit * 1500
            } else {
                limit
            },
            ps = 100 + r.below(1400),
        );
        let exp = from_toml(&text, Path::new(".")).unwrap();
        let mut sim = Sim::new(&exp, seed);
        sim.start_apps();
        sim.run(&mut |_| true);
        sim.check_conservation()
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(sim.acct.created > 0);
    }
}

/// A device transmit ring sits between qdisc and wire: the qdisc sojourn excludes it, the
/// end-to-end delay includes it (limit + ring packets ahead of an arrival).
#[test]
fn tx_ring_separates_qdisc_and_device_backlog() {
    let out = run_toml(
        r#"
        duration = "20s"
        warmup = "5s"
        [topology]
        kind = "graph"
        nodes = ["a", "b"]
        [[topology.links]]
        name = "nic"
        from = "a"
        to = "b"
        rate = "10Mbit"
        tx_ring = 16
        qdisc = { kind = "pfifo", limit = 100 }
        [[workload]]
        kind = "cbr"
        from = "a"
        to = "b"
        rate = "12Mbit"
        packet_size = "1500B"
        "#,
    )
    .unwrap();
    let l = link(&out, "nic");
    // 100 packets of 1.2 ms each ahead in the qdisc: 120 ms; the ring adds 16 more.
    // (The accepted arrival comes on average half an arrival gap after a departure: 119.5 ms.)
    let sojourn = f(&l["sojourn_ms"]["mean"]);
    assert!(
        (sojourn - 120.0).abs() / 120.0 < 0.01,
        "qdisc sojourn {sojourn}"
    );
    assert_eq!(l["ring_packets_at_end"], 16);
    let d = col_f64(&out.flows, "max_delay_ms")[0];
    assert!(
        (d - 117.0 * 1.2).abs() < 1.3,
        "end-to-end {d} ms vs (100 + 16 + 1) x 1.2 ms"
    );
    assert_eq!(out.summary["accounting"]["conserved"], true);
}

/// A shaper link (htb on a veth) releases whole packets: each arrives `delay` after its
/// slot *starts*, one serialisation earlier than on a wire, at the same throughput.
#[test]
fn shaper_link_delivers_from_the_start_of_the_slot() {
    let run = |shaper: bool| {
        run_toml(&format!(
            r#"
            duration = "10s"
            [topology]
            kind = "graph"
            nodes = ["a", "b"]
            [[topology.links]]
            name = "l"
            from = "a"
            to = "b"
            rate = "10Mbit"
            delay = "5ms"
            shaper = {shaper}
            [[workload]]
            kind = "cbr"
            from = "a"
            to = "b"
            rate = "5Mbit"
            packet_size = "1500B"
            "#
        ))
        .unwrap()
    };
    let wire = run(false);
    let shaped = run(true);
    // Underload, no queue: the wire delay is serialisation (1.2 ms) + 5 ms, the shaper's 5 ms.
    let d_wire = col_f64(&wire.flows, "max_delay_ms")[0];
    let d_shaped = col_f64(&shaped.flows, "max_delay_ms")[0];
    assert!((d_wire - 6.2).abs() < 1e-6, "wire {d_wire} ms");
    assert!((d_shaped - 5.0).abs() < 1e-6, "shaper {d_shaped} ms");
    let tw = f(&link(&wire, "l")["throughput_bps"]);
    let ts = f(&link(&shaped, "l")["throughput_bps"]);
    assert!((tw - ts).abs() < 1e-3 * tw, "{tw} vs {ts}");
    assert_eq!(shaped.summary["accounting"]["conserved"], true);
}

#[test]
fn shaper_rejects_a_trace_and_a_non_boolean() {
    let base = |extra: &str| {
        format!(
            r#"
            duration = "1s"
            [topology]
            kind = "graph"
            nodes = ["a", "b"]
            [[topology.links]]
            from = "a"
            to = "b"
            {extra}
            [[workload]]
            kind = "cbr"
            from = "a"
            to = "b"
            rate = "1Mbit"
            "#
        )
    };
    let Err(e) = from_toml(&base("rate = \"1Mbit\"\nshaper = \"yes\""), Path::new(".")) else {
        panic!("non-boolean shaper accepted");
    };
    assert!(e.to_string().contains("shaper"), "{e}");
    let dir = std::env::temp_dir().join("sojourn-shaper-trace-test");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.trace"), "1\n2\n").unwrap();
    let Err(e) = from_toml(&base("trace = \"t.trace\"\nshaper = true"), &dir) else {
        panic!("shaper with a trace accepted");
    };
    assert!(e.to_string().contains("shaper"), "{e}");
}

/// The event model (sim.rs): a packet costs one `TxDone` and one `Arrive` per link of a
/// path with propagation delay, a CBR source one endpoint timer per datagram, and nothing
/// else; the counts by kind add up to the events handled. CBR at 5 Mbit/s of 1514-B
/// packets for 1 s: datagram k leaves at k · 2.4224 ms, k = 0 … 412 (413 datagrams). On
/// s0.up (100 Mbit/s, 1.25 ms) its TxDone comes 0.12112 ms after, its Arrive 1.37112 ms;
/// bottleneck (10 Mbit/s, 20 ms) 2.58232 / 22.58232 ms; d0.down 22.70344 / 23.95344 ms.
/// Datagrams 0 … 402 are delivered by 1 s (3 TxDone + 3 Arrive each); 403 has 23.7728 ms
/// left (3 TxDone, 2 Arrive), 404 … 411 between 4.39 and 21.35 ms (2 + 1 each), 412
/// 1.9712 ms (1 + 1): TxDone 3 · 403 + 3 + 16 + 1 = 1229, Arrive 1209 + 2 + 8 + 1 = 1220.
/// The bottleneck and d0.down leave routers and are constant-rate FIFOs: their 816
/// transmission ends are computed at enqueue, not queued (docs/engine.md, "The fast link
/// path"), and only s0.up's 413 (a host's link) are `TxDone` events of the queue; the
/// run's event count still counts all 1229.
#[test]
fn event_counts_follow_the_event_model() {
    let exp = from_toml(
        r#"
        duration = "1s"
        [topology]
        kind = "dumbbell"
        pairs = 1
        bottleneck = { rate = "10Mbit", delay = "20ms" }
        access = { rate = "100Mbit", delay = "1.25ms" }
        [[workload]]
        kind = "cbr"
        pair = 0
        rate = "5Mbit"
        packet_size = "1514B"
        [record]
        interval = "0s"
        "#,
        Path::new("."),
    )
    .unwrap();
    let mut sim = Sim::new(&exp, exp.seed);
    sim.start_apps();
    assert!(sim.run(&mut |_| true));
    let (a, c) = (sim.acct, sim.event_counts);
    assert_eq!((a.created, a.delivered, a.dropped), (413, 403, 0));
    assert_eq!(
        (c.tx_done + c.tx_done_computed, c.arrive, c.timer_due),
        (1229, 1220, 413),
        "{c:?}"
    );
    assert_eq!((c.tx_done, c.tx_done_computed), (413, 816), "{c:?}");
    assert_eq!(
        (
            c.qdisc_wake,
            c.timer_rearmed,
            c.timer_discarded,
            c.app_timer,
            c.other
        ),
        (0, 0, 0, 0, 0),
        "{c:?}"
    );
    assert_eq!(sim.events_processed, 1229 + 1220 + 413);
}
