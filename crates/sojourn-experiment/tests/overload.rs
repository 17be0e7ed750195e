//! Open loops that offer more than their path can carry are refused up front
//! (docs/limits.md, "Overloaded open loops"): their transfers in progress would grow
//! without bound, and with them the memory. `allow_overload = true` runs them anyway, and
//! the memory estimate then counts every arrival as held.

use sojourn_experiment::experiment::held_connections;
use sojourn_experiment::from_toml;
use std::path::Path;

fn parse(rate: &str, workloads: &str, duration: &str) -> Result<f64, String> {
    let text = format!(
        r#"
        duration = "{duration}"
        [topology]
        kind = "dumbbell"
        pairs = 2
        bottleneck = {{ rate = "{rate}", delay = "5ms" }}
        access = {{ rate = "10Gbit", delay = "1ms" }}
        {workloads}
        "#
    );
    from_toml(&text, Path::new("."))
        .map(|e| held_connections(&e))
        .map_err(|e| format!("{}: {}", e.path, e.msg))
}

/// 2,000 arrivals per second (mean gap 0.5 ms) of 10-kB transfers on pair 0.
const TEN_KB_2000_PER_S: &str = r#"
    [[workload]]
    kind = "poisson"
    pair = 0
    interval = "0.5ms"
    size = "10kB""#;

#[test]
fn two_thousand_ten_kb_transfers_per_second_overload_100_mbit_not_1_gbit() {
    // 2,000/s × 10,000 B × 8 = 160 Mbit/s of payload. On the wire each transfer is 7
    // segments of at most 1448 B with 66 B of headers each (IP 20 + TCP 20 + timestamps 12
    // + Ethernet 14), a 74-B SYN and two 66-B bare segments (the handshake's ACK, the
    // FIN): 10,000 + 462 + 74 + 132 = 10,668 B, 170.688 Mbit/s.
    let e = parse("100Mbit", TEN_KB_2000_PER_S, "30s").unwrap_err();
    assert!(e.starts_with("workload[0]: "), "{e}");
    for part in [
        "160.0 Mbit/s of payload",
        "2000 transfers/s × 10000 B mean",
        "170.7 Mbit/s on the wire",
        "link \"bottleneck\" of 100.0 Mbit/s (171 % of its rate)",
        "allow_overload = true",
    ] {
        assert!(e.contains(part), "{part:?} not in {e}");
    }
    // 170.7 Mbit/s on 1 Gbit/s: 17 %, accepted.
    parse("1Gbit", TEN_KB_2000_PER_S, "30s").unwrap();
    // Just above and just below the wire load (170.688 Mbit/s).
    assert!(parse("170Mbit", TEN_KB_2000_PER_S, "30s").is_err());
    parse("171Mbit", TEN_KB_2000_PER_S, "30s").unwrap();
}

#[test]
fn headers_count_small_transfers_overload_before_their_payload_does() {
    // 8,000 transfers/s of 1,448 B: 92.7 Mbit/s of payload, but 1,448 + 66 + 74 + 132 =
    // 1,720 B on the wire each, 110.08 Mbit/s: more than 100 Mbit/s.
    let w = r#"
        [[workload]]
        kind = "poisson"
        pair = 0
        interval = "0.125ms"
        size = 1448"#;
    let e = parse("100Mbit", w, "30s").unwrap_err();
    assert!(e.contains("92.7 Mbit/s of payload"), "{e}");
    assert!(e.contains("110.1 Mbit/s on the wire"), "{e}");
}

#[test]
fn open_loops_crossing_one_link_add_up() {
    // Two loops of 1,000/s × 10 kB (85.3 Mbit/s on the wire each) on the two pairs share
    // the bottleneck: 170.7 Mbit/s together on 100 Mbit/s is refused, on 200 Mbit/s not.
    let w = r#"
        [[workload]]
        kind = "poisson"
        pair = 0
        interval = "1ms"
        size = "10kB"
        [[workload]]
        kind = "small_files"
        pair = 1
        interval = "1ms"
        size = "10kB""#;
    let e = parse("100Mbit", w, "30s").unwrap_err();
    assert!(
        e.contains("160.0 Mbit/s of payload (with the other open loops crossing it"),
        "{e}"
    );
    parse("200Mbit", w, "30s").unwrap();
}

#[test]
fn allow_overload_runs_it_and_counts_every_arrival_as_held() {
    let allowed = format!("{TEN_KB_2000_PER_S}\n    allow_overload = true");
    // 80 s × 2,000/s = 160,000 arrivals, all possibly in progress at the end.
    let held = parse("100Mbit", &allowed, "80s").unwrap();
    assert!((held - 160_000.0).abs() < 1.0, "{held}");
    // Not overloaded: a transfer is held for its 60 s linger plus a second, 2,000 × 61.
    let held = parse("1Gbit", TEN_KB_2000_PER_S, "80s").unwrap();
    assert!((held - 122_000.0).abs() < 1.0, "{held}");
    // One loop allowed does not excuse another crossing the same link.
    let w = format!(
        "{allowed}\n{}",
        TEN_KB_2000_PER_S.replace("pair = 0", "pair = 1")
    );
    let e = parse("300Mbit", &w, "30s").unwrap_err();
    assert!(e.starts_with("workload[1]: "), "{e}");
}

#[test]
fn closed_loops_and_bulk_flows_are_not_open_loops() {
    // 100 actors with 0.1 ms think time would "offer" far more than 10 Mbit/s, but a
    // closed loop waits for each transfer: it cannot pile up.
    let w = r#"
        [[workload]]
        kind = "actors"
        pair = 0
        count = 100
        think = "0.1ms"
        size = "10kB"
        [[workload]]
        kind = "bulk"
        pair = 1"#;
    parse("10Mbit", w, "30s").unwrap();
    // allow_overload is an open loop's key only.
    let e = parse(
        "10Mbit",
        &format!("{w}\n        allow_overload = true"),
        "30s",
    )
    .unwrap_err();
    assert!(
        e.contains("allow_overload") && e.contains("unknown key"),
        "{e}"
    );
}

#[test]
fn a_rate_schedule_is_judged_by_its_mean_over_the_run() {
    // 400 Mbit/s for the first 10 s, then 100 Mbit/s: a mean of 250 Mbit/s over 20 s (the
    // 170.7 Mbit/s loop fits), 175 Mbit/s over 40 s (fits), 130 Mbit/s over 100 s (not).
    let topo = |d: &str| {
        format!(
            r#"
            duration = "{d}"
            [topology]
            kind = "dumbbell"
            pairs = 1
            bottleneck = {{ rate = "400Mbit", rate_schedule = [{{ at = "10s", rate = "100Mbit" }}], delay = "5ms" }}
            access = {{ rate = "10Gbit", delay = "1ms" }}
            {TEN_KB_2000_PER_S}"#
        )
    };
    from_toml(&topo("20s"), Path::new(".")).unwrap();
    from_toml(&topo("40s"), Path::new(".")).unwrap();
    let e = from_toml(&topo("100s"), Path::new(".")).unwrap_err();
    assert!(e.msg.contains("of 130.0 Mbit/s"), "{}", e.msg);
}
