//! Application workloads (`rpm`, `web`, `video`; sojourn_experiment::apps and the engine's
//! apps.rs) against hand-worked truths: page load times to the nanosecond on an idle
//! link, the video player on a link far faster and one slower than its ladder, the
//! responsiveness of a FIFO and of FQ-CoDel, and determinism (docs/tests.md).

use serde_json::Value as J;
use sojourn_sim::{run_toml, Column, RunOutput};

fn app(out: &RunOutput) -> &J {
    &out.summary["apps"][0]
}

fn num(v: &J) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The samples of `entity`/`metric` from the time series, in time order.
fn samples(out: &RunOutput, entity: &str, metric: &str) -> Vec<f64> {
    let col = |cols: &sojourn_sim::Columns, name: &str| -> Column {
        cols.0
            .iter()
            .find(|(n, _)| n == name)
            .expect(name)
            .1
            .clone()
    };
    let (Column::U32(ids), Column::Str(ents), Column::Str(mets)) = (
        col(&out.series_names, "series"),
        col(&out.series_names, "entity"),
        col(&out.series_names, "metric"),
    ) else {
        panic!("series names")
    };
    let Some(i) = (0..ids.len()).find(|&i| ents[i] == entity && mets[i] == metric) else {
        return Vec::new();
    };
    let (Column::U32(series), Column::F64(value)) = (
        col(&out.timeseries, "series"),
        col(&out.timeseries, "value"),
    ) else {
        panic!("time series")
    };
    (0..series.len())
        .filter(|&k| series[k] == ids[i])
        .map(|k| value[k])
        .collect()
}

/// One dumbbell pair: a bottleneck of `rate` with `delay` each way, the default 1 Gbit/s
/// access links without delay, and one workload of the TOML keys `workload`.
fn one_pair(duration: &str, rate: &str, delay: &str, workload: &str) -> RunOutput {
    run_toml(&format!(
        "duration = \"{duration}\"\n[topology]\nbottleneck = {{ rate = \"{rate}\", delay = \"{delay}\" }}\n\
         [[workload]]\n{workload}\n"
    ))
    .unwrap()
}

/// One page of an HTML document of 1000 B and `objects` objects of 1000 B, requests of
/// 300 B, over `connections`, on a dumbbell whose bottleneck is 10 Mbit/s with 5 ms each
/// way (RTT 10 ms) and whose access links are 1 Gbit/s without delay.
fn page(objects: u32, connections: u32) -> f64 {
    let out = one_pair(
        "2s",
        "10Mbit",
        "5ms",
        &format!(
            "kind = \"web\"\nobjects = {objects}\nconnections = {connections}\n\
             html_size = \"1000B\"\nobject_size = \"1000B\"\nrequest_size = \"300B\"\npages = 1"
        ),
    );
    assert_eq!(num(&app(&out)["pages"]), 1.0);
    num(&app(&out)["plt_max_s"])
}

// Hand-worked one-way times (µs) client d0 → server s0 over d0.up (1 Gbit/s, 0.008 µs/B),
// the 10 Mbit/s link (0.8 µs/B, 5000 µs) and s0.down (1 Gbit/s), and back the same way.
// Frames: SYN and SYN-ACK 74 B; data = payload + 66 B (IP 20 + TCP 20 + timestamps 12 +
// Ethernet 14): a 300-B request is 366 B, a 1000-B response 1066 B (one segment: far
// under the initial window of 10 segments, so no round trip waits for an ACK).
//   alone:                 T(F)  = 5000 + (0.008 + 0.8 + 0.008)·F = 5000 + 0.816·F
//   behind a 66-B ACK the same host sent just before (the ACK holds the slow link for
//   52.8 µs after its 0.528 µs on the fast one, which the data's own fast hop overlaps):
//                          T'(F) = 0.528 + 52.8 + 0.8·F + 5000 + 0.008·F = 5053.328 + 0.808·F
// The engine carries a request and its response as separate transfers, so the side that
// receives one acknowledges it with its own 66-B ACK just before it sends the next (a
// real server piggybacks it): every response and every request after the first on a
// connection goes T'. The handshake's ACK rides on the first request (T).
//   T(74) = 5060.384, T(366) = 5298.656, T'(366) = 5349.056, T'(1066) = 5914.656.

#[test]
fn web_page_load_time_on_an_idle_link_is_rounds_of_rtt_plus_serialisation() {
    // The HTML alone: SYN + SYN-ACK + request + response = 2 round trips:
    // 2·5060.384 + 5298.656 + 5914.656 = 21 334.080 µs.
    assert!((page(0, 1) - 0.021_334_080).abs() < 1e-9, "{}", page(0, 1));
    // Two objects on the one connection, each a request and a response (2 more rounds):
    // 21 334.080 + 2·(5349.056 + 5914.656) = 43 861.504 µs = 4 RTT + serialisation.
    assert!((page(2, 1) - 0.043_861_504).abs() < 1e-9, "{}", page(2, 1));
    // Three objects one after the other on one connection: 5 rounds.
    // 21 334.080 + 3·11 263.712 = 55 125.216 µs.
    assert!((page(3, 1) - 0.055_125_216).abs() < 1e-9, "{}", page(3, 1));
}

#[test]
fn web_parallel_connections_save_a_round_and_share_the_link() {
    // Three objects over up to 6 connections: object 1 rides on the HTML's connection,
    // objects 2 and 3 open two new ones. From the HTML's end t0 = 21 334.080 µs (times
    // below are from t0), on the client's fast link: ACK 66 (done 0.528), request 1
    // (3.456), SYN (4.048), SYN (4.640); the slow link serialises them in that order:
    // ACK to 53.328, request to 346.128, SYN to 405.328, SYN to 464.528; the SYNs reach
    // the server at 5405.920 and 5465.120. Request 1 reaches it at 5349.056: its ACK and
    // response hold the server's slow link from 5349.584 to 6255.184, so the SYN-ACKs
    // (ready at 5406.512 and 5465.712 after their fast hop) go at 6255.184 → 6314.384
    // and → 6373.584 and reach the client at 11 314.976 and 11 374.176. Object 1's
    // response arrives at 11 263.712; the client's ACK of it holds the slow link to
    // 11 317.040. Request 2 (T(366) after the SYN-ACK, the handshake's ACK riding on it)
    // takes the slow link 11 317.904 → 11 610.704, request 3 waits for it → 11 903.504:
    // they reach the server at 16 613.632 and 16 906.432. Response 2: ACK 16 614.160 →
    // 16 666.960, data → 17 519.760 on the slow link, at the client 22 528.288.
    // Response 3: its ACK waits for response 2 (17 519.760 → 17 572.560), data →
    // 18 425.360, at the client 23 433.888. PLT = 21 334.080 + 23 433.888 = 44 767.968 µs:
    // 4 rounds where one connection needs 5 (55 125.216 above).
    assert!((page(3, 6) - 0.044_767_968).abs() < 1e-9, "{}", page(3, 6));
}

fn video(rate: &str, duration: &str) -> RunOutput {
    one_pair(
        duration,
        rate,
        "10ms",
        "kind = \"video\"\nsegment = \"2s\"\nbitrates = [\"1Mbit\", \"2.5Mbit\", \"5Mbit\", \"8Mbit\"]\n\
         reservoir = \"2s\"\ncushion = \"4s\"\nmax_buffer = \"10s\"",
    )
}

#[test]
fn video_on_a_fast_link_climbs_to_the_top_rate_and_never_stalls() {
    // 100 Mbit/s, 12 times the top rung: a segment takes a few tens of ms, so the buffer
    // at each request is about 2 s × segments received. BBA-0 with r = 2 s, cu = 4 s,
    // f(B) = 1 + 7 (B − 2)/4 Mbit/s: B ≈ 0 → 1; B ≈ 2 (≤ r) → 1; B ≈ 4: f ≈ 4.5, Rate+ =
    // 2.5 → 2.5; B ≈ 6 (just below r + cu): f ≈ 8, Rate+ = 5 → 5; B ≈ 8 ≥ 6 → 8; and 8 from
    // then on (the buffer stays between 8 and 10 s).
    let out = video("100Mbit", "60s");
    let rates = samples(&out, "w0.video", "bitrate_bps");
    assert_eq!(rates[..5], [1e6, 1e6, 2.5e6, 5e6, 8e6]);
    assert!(rates[4..].iter().all(|&r| r == 8e6), "{rates:?}");
    let a = app(&out);
    assert_eq!(num(&a["switches"]), 3.0);
    assert_eq!(num(&a["stalls"]), 0.0);
    assert_eq!(num(&a["rebuffering_ratio"]), 0.0);
    // In 60 s the player plays ~60 s and holds at most 10 s: 30 to 35 segments.
    let n = num(&a["segments"]);
    assert!((30.0..=35.0).contains(&n), "{n}");
    assert_eq!(n as usize, rates.len());
}

#[test]
fn video_below_the_lowest_rung_rebuffers_as_worked_by_hand() {
    // 500 kbit/s, half the lowest rung. Every segment is 1 Mbit/s × 2 s = 250 000 B:
    // 172 segments of 1448 B and one of 944 B, 173 × 66 B of headers: 261 418 B on the
    // wire = 4.182 688 s at 500 kbit/s. A segment's cycle adds a request round trip
    // (20 ms + 366 B each way ≈ 5.9 ms) to about 4.21 s; the first adds the handshake's
    // round trip (20 ms + 2 × 74 B ≈ 2.4 ms): startup ≈ 4.182 688 + 0.020 + 0.0059 +
    // 0.020 + 0.0024 ≈ 4.231 s. Each later segment then plays 2 s and stalls ≈ 2.21 s:
    // rebuffering ratio ≈ 2.21 / 4.21 ≈ 0.52.
    let out = video("500kbit", "60s");
    let a = app(&out);
    assert_eq!(num(&a["mean_bitrate_bps"]), 1e6);
    assert_eq!(num(&a["switches"]), 0.0);
    let startup = num(&a["startup_delay_s"]);
    assert!((startup - 4.231).abs() < 0.002, "{startup}");
    let ratio = num(&a["rebuffering_ratio"]);
    assert!((ratio - 0.52).abs() < 0.02, "{ratio}");
    // Every segment after the first arrives after the buffer ran dry.
    assert_eq!(num(&a["stalls"]), num(&a["segments"]) - 1.0);
}

fn rpm(qdisc: &str) -> RunOutput {
    run_toml(&format!(
        r#"
        duration = "12s"
        seed = 3
        [topology]
        bottleneck = {{ rate = "20Mbit", delay = "10ms", qdisc = {qdisc} }}
        reverse = {{ rate = "20Mbit", delay = "10ms", qdisc = {qdisc} }}
        [[workload]]
        kind = "rpm"
        phase = "6s"
        window = "3s"
        connections = 8
        probes_per_second = 50
        "#
    ))
    .unwrap()
}

#[test]
fn rpm_of_fq_codel_is_near_the_base_rtt_and_fifo_is_bloated() {
    // Base RTT 20 ms. FQ-CoDel gives a new connection's SYN the sparse-flow priority: the
    // TCP handshake of a foreign probe stays within 2 ms of the base in both directions.
    let fq = rpm("\"fq_codel\"");
    for dir in ["downlink", "uplink"] {
        let d = &app(&fq)[dir];
        let tcp = num(&d["tm_tcp_f_ms"]);
        assert!((20.0..22.0).contains(&tcp), "{dir}: tcp_f {tcp}");
        // A self probe waits behind its own connection's backlog: never faster.
        assert!(num(&d["tm_http_l_ms"]) > tcp, "{dir}");
        assert!(num(&d["foreign_probes"]) > 100.0, "{dir}");
    }
    // pfifo limit 1000 at 20 Mbit/s holds up to 1000 × 1514 B = 606 ms: every probe
    // queues behind part of it, where FQ-CoDel's stays near 5 ms (its target).
    let fifo = rpm("{ kind = \"pfifo\", limit = 1000 }");
    for dir in ["downlink", "uplink"] {
        let (f, q) = (&app(&fifo)[dir], &app(&fq)[dir]);
        assert!(
            num(&f["tm_tcp_f_ms"]) > 100.0,
            "{dir}: {}",
            f["tm_tcp_f_ms"]
        );
        assert!(num(&f["rpm"]) < 400.0, "{dir}: {}", f["rpm"]);
        assert!(num(&q["rpm"]) > 3.0 * num(&f["rpm"]), "{dir}");
        // The RPM is the draft's formula of the trimmed means summary.json reports.
        let rpm = (60_000.0
            / ((num(&f["tm_tcp_f_ms"]) + num(&f["tm_tls_f_ms"]) + num(&f["tm_http_f_ms"])) / 3.0)
            + 60_000.0 / num(&f["tm_http_l_ms"]))
            / 2.0;
        assert!((num(&f["rpm"]) - rpm).abs() < 1e-9 * rpm);
    }
}

#[test]
fn app_workloads_are_deterministic() {
    // Three application workloads side by side, one per pair (inline tables).
    let text = r#"
        duration = "4s"
        seed = 11
        topology = { pairs = 3, bottleneck = { rate = "20Mbit", delay = "10ms", qdisc = "fq_codel" } }
        workload = [
          { kind = "rpm", pair = 0, phase = "2s", window = "1s", connections = 4 },
          { kind = "web", pair = 1, objects = 8, object_size = { dist = "exponential", mean = "20kB" },
            think = { dist = "exponential", mean = "200ms" } },
          { kind = "video", pair = 2, segment = "1s" },
        ]
        "#;
    let (a, b) = (run_toml(text).unwrap(), run_toml(text).unwrap());
    assert!(a.summary_json() == b.summary_json());
    // (Debug text: NaN columns — flows without an end — compare unequal as floats.)
    assert!(format!("{:?}", a.timeseries) == format!("{:?}", b.timeseries));
    assert!(format!("{:?}", a.flows) == format!("{:?}", b.flows));
    assert_eq!(a.summary["apps"].as_array().unwrap().len(), 3);
    assert!(num(&a.summary["apps"][1]["pages"]) >= 2.0);
    // Another seed draws other object sizes and think times.
    let c = run_toml(&text.replace("seed = 11", "seed = 12")).unwrap();
    assert_ne!(a.summary["apps"][1], c.summary["apps"][1]);
}

#[test]
fn runs_without_app_workloads_have_no_apps_block() {
    let out = run_toml(
        r#"
        duration = "1s"
        [topology]
        bottleneck = { rate = "10Mbit" }
        [[workload]]
        kind = "bulk"
        "#,
    )
    .unwrap();
    assert!(out.summary.get("apps").is_none());
}

#[test]
fn bad_parameters_name_the_key() {
    let base = "duration = \"1s\"\n[topology]\nbottleneck = { rate = \"10Mbit\" }\n[[workload]]\n";
    let cases = [
        (
            "kind = \"video\"\nbitrates = [\"2Mbit\", \"1Mbit\"]",
            "workload[0].bitrates[1]",
            "increase strictly",
        ),
        (
            "kind = \"video\"\nbitrates = [5]",
            "workload[0].bitrates[0]",
            "expected a rate",
        ),
        (
            "kind = \"video\"\nbitrates = []",
            "workload[0].bitrates",
            "non-empty list",
        ),
        (
            "kind = \"video\"\nreservoir = \"20s\"\ncushion = \"20s\"",
            "workload[0].cushion",
            "exceeds max_buffer",
        ),
        (
            "kind = \"video\"\nstartup_segments = 100",
            "workload[0].startup_segments",
            "do not fit",
        ),
        (
            "kind = \"video\"\nsegment = \"10ms\"",
            "workload[0].segment",
            "below 100 ms",
        ),
        (
            "kind = \"rpm\"\nphase = \"2s\"\nwindow = \"5s\"",
            "workload[0].window",
            "longer than `phase`",
        ),
        (
            "kind = \"rpm\"\ndirections = \"sideways\"",
            "workload[0].directions",
            "downlink",
        ),
        (
            "kind = \"rpm\"\nconnections = 0",
            "workload[0].connections",
            "",
        ),
        (
            "kind = \"rpm\"\nconnections = 4\ninitial_connections = 5",
            "workload[0].initial_connections",
            "",
        ),
        (
            "kind = \"rpm\"\ninterval = \"0s\"",
            "workload[0].interval",
            "positive",
        ),
        (
            "kind = \"rpm\"\nrequest_size = \"0B\"",
            "workload[0].request_size",
            "outside 1 B",
        ),
        (
            "kind = \"web\"\nrequest_size = \"0B\"",
            "workload[0].request_size",
            "outside 1 B..1 GiB",
        ),
        (
            "kind = \"web\"\nconnections = 100",
            "workload[0].connections",
            "",
        ),
        (
            "kind = \"web\"\nobject = \"5kB\"",
            "workload[0].object",
            "unknown key",
        ),
    ];
    for (body, path, msg) in cases {
        let text = format!("{base}{body}\n");
        match sojourn_sim::config::from_toml(&text, std::path::Path::new(".")) {
            Ok(_) => panic!("accepted: {body}"),
            Err(e) => {
                assert_eq!(e.path, path, "{body}: {}", e.msg);
                assert!(e.msg.contains(msg), "{body}: {}", e.msg);
                assert!(!e.msg.contains('\n'), "one line: {}", e.msg);
            }
        }
    }
}
