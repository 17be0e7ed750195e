//! Conntrack byte counting and threshold classification at nodes (seed 000's nftables rule).

use sojourn_sim::{run_toml, Column};

#[test]
fn priority_changes_exactly_at_the_inclusive_threshold() {
    // 1000-B frames = 986 B at the IP layer. Threshold 2958 B = exactly 3 packets: the
    // third packet's count (2958) is still inside 0-T, the fourth (3944) is not.
    let out = run_toml(
        r#"
        duration = "1s"
        [topology]
        kind = "graph"
        nodes = ["client", "server"]
        [[topology.links]]
        name = "nic"
        from = "client"
        to = "server"
        rate = "100Mbit"
        qdisc = "pfifo"
        [[workload]]
        kind = "cbr"
        from = "client"
        to = "server"
        rate = "8Mbit"
        packet_size = "1000B"
        stop = "10ms"
        [[classifier]]
        at = "client"
        map = [{ upto = "2958B", priority = "1:1" }, { priority = "1:2" }]
        [record]
        packets = ["nic"]
        "#,
    )
    .unwrap();
    let p = out.packets.expect("packet log");
    let Some(Column::U32(prio)) = p.get("priority") else {
        panic!()
    };
    let Some(Column::U64(ct)) = p.get("ct_bytes") else {
        panic!()
    };
    assert_eq!(&ct[..5], &[986, 1972, 2958, 3944, 4930]);
    assert_eq!(&prio[..5], &[0x10001, 0x10001, 0x10001, 0x10002, 0x10002]);
}

#[test]
fn classifier_on_output_hook_ignores_forwarded_packets() {
    let out = run_toml(
        r#"
        duration = "1s"
        [topology]
        kind = "graph"
        nodes = ["a", "r", "b"]
        [[topology.links]]
        name = "ar"
        from = "a"
        to = "r"
        rate = "100Mbit"
        [[topology.links]]
        name = "rb"
        from = "r"
        to = "b"
        rate = "100Mbit"
        [[workload]]
        kind = "cbr"
        from = "a"
        to = "b"
        rate = "8Mbit"
        packet_size = "1000B"
        stop = "5ms"
        [[classifier]]
        at = "r"
        map = [{ priority = "1:2" }]
        [record]
        packets = ["rb"]
        "#,
    )
    .unwrap();
    let p = out.packets.unwrap();
    let Some(Column::U32(prio)) = p.get("priority") else {
        panic!()
    };
    assert!(
        prio.iter().all(|&x| x == 0),
        "output hook does not see routed packets"
    );
    let Some(Column::U64(ct)) = p.get("ct_bytes") else {
        panic!()
    };
    assert_eq!(ct[0], 986, "but the router's conntrack still counts them");
}

#[test]
fn median_policy_threshold_follows_the_sizes_and_the_map_uses_it() {
    // Seed 000's per-second median policy (`adapt`): 20 kB uploads for 3 s, then 200 kB
    // uploads. A finished connection's count is its payload plus the IP/TCP headers of both
    // directions seen by then (tens of packets of 52-60 B), so each second's median lies a
    // little above 20,000 B, then a little above 200,000 B.
    let out = run_toml(
        r#"
        duration = "6500ms"
        seed = 3
        [topology]
        kind = "graph"
        nodes = ["client", "server"]
        [[topology.links]]
        name = "nic"
        from = "client"
        to = "server"
        rate = "100Mbit"
        delay = "1ms"
        qdisc = "pfifo_fast"
        [[workload]]
        kind = "poisson"
        from = "client"
        to = "server"
        interval = "100ms"
        size = "20000B"
        stop = "3s"
        [[workload]]
        kind = "poisson"
        from = "client"
        to = "server"
        interval = "200ms"
        size = "200000B"
        start = "3s"
        stop = "6s"
        [[classifier]]
        at = "client"
        map = [{ upto = "6331208B", priority = "1:6" }, { priority = "1:0" }]
        adapt = { policy = "median", interval = "1s" }
        [record]
        interval = "0s"
        packets = ["nic"]
        "#,
    )
    .unwrap();
    let (Some(Column::F64(t)), Some(Column::U32(sid)), Some(Column::F64(v))) = (
        out.timeseries.get("time_s"),
        out.timeseries.get("series"),
        out.timeseries.get("value"),
    ) else {
        panic!("timeseries columns")
    };
    let Some(Column::Str(metric)) = out.series_names.get("metric") else {
        panic!()
    };
    let id = metric
        .iter()
        .position(|m| m == "classifier_threshold_bytes")
        .expect("threshold series") as u32;
    let changes: Vec<(f64, f64)> = (0..t.len())
        .filter(|&i| sid[i] == id)
        .map(|i| (t[i], v[i]))
        .collect();
    // changes happen only at interval ends (whole seconds)
    assert!(
        changes.iter().all(|(ts, _)| (ts - ts.round()).abs() < 1e-9),
        "{changes:?}"
    );
    let at = |s: f64| {
        changes
            .iter()
            .rfind(|(ts, _)| *ts <= s + 1e-9)
            .map(|c| c.1)
            .expect("a threshold by then")
    };
    for s in [1.0, 2.0, 3.0] {
        assert!((20_000.0..21_500.0).contains(&at(s)), "{s}: {changes:?}");
    }
    for s in [5.0, 6.0] {
        assert!((200_000.0..212_000.0).contains(&at(s)), "{s}: {changes:?}");
    }
    // the map in force is the one the classifier applied: every logged client packet's
    // priority is 1:6 iff its count is within the threshold set at the last whole second
    let p = out.packets.expect("packet log");
    let (Some(Column::F64(pt)), Some(Column::U32(prio)), Some(Column::U64(ct))) =
        (p.get("time_s"), p.get("priority"), p.get("ct_bytes"))
    else {
        panic!("packet columns")
    };
    let mut checked = 0;
    for i in 0..pt.len() {
        let s = pt[i].floor();
        if s < 1.0 || pt[i] - s < 0.05 {
            // before the first change, or dequeued within 50 ms of a boundary (classified
            // on enqueue, possibly before it)
            continue;
        }
        let th = at(s) as u64;
        assert_eq!(
            prio[i] == 0x10006,
            ct[i] <= th,
            "t {} count {} threshold {th}",
            pt[i],
            ct[i]
        );
        checked += 1;
    }
    assert!(checked > 200, "{checked}"); // GSO buffers: one logged packet carries many segments
}

#[test]
fn the_median_policy_needs_a_two_level_map() {
    let base = r#"
        duration = "1s"
        [topology]
        kind = "graph"
        nodes = ["client", "server"]
        [[topology.links]]
        name = "nic"
        from = "client"
        to = "server"
        rate = "100Mbit"
        [[workload]]
        kind = "bulk"
        from = "client"
        to = "server"
        [[classifier]]
        at = "client"
    "#;
    for (rest, path) in [
        (
            r#"map = [{ upto = "1KB", priority = "1:1" }, { upto = "2KB", priority = "1:2" }, { priority = "1:3" }]
            adapt = { policy = "median" }"#,
            "classifier[0].adapt",
        ),
        (
            r#"map = [{ upto = "1KB", priority = "1:1" }, { priority = "1:2" }]
            adapt = { policy = "mean" }"#,
            "classifier[0].adapt.policy",
        ),
        (
            r#"map = [{ upto = "1KB", priority = "1:1" }, { priority = "1:2" }]
            adapt = { interval = "0s" }"#,
            "classifier[0].adapt.interval",
        ),
        (
            r#"map = [{ upto = "1KB", priority = "1:1" }, { priority = "1:2" }]
            adapt = "median""#,
            "classifier[0].adapt",
        ),
    ] {
        let e = run_toml(&format!("{base}{rest}\n")).err().expect("refused");
        assert_eq!(e.path, path, "{e}");
    }
}
