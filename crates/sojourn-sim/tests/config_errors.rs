//! Bad input: every mistake is rejected before the run, with the key path and a reason.

use sojourn_sim::config::from_toml;
use std::path::Path;

const GOOD: &str = r#"
duration = "10s"
[topology]
kind = "dumbbell"
pairs = 2
bottleneck = { rate = "10Mbit", delay = "10ms", qdisc = { kind = "pfifo", limit = 100 } }
[[workload]]
kind = "cbr"
pair = 0
rate = "12Mbit"
"#;

fn err(text: &str) -> (String, String) {
    match from_toml(text, Path::new(".")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => (e.path, e.msg),
    }
}

#[test]
fn the_good_file_is_accepted() {
    from_toml(GOOD, Path::new(".")).unwrap();
}

#[test]
fn mistakes_are_named() {
    let cases: Vec<(String, &str, &str)> = vec![
        (
            GOOD.replace("duration = \"10s\"", "duraton = \"10s\""),
            "duration",
            "required",
        ),
        (format!("seeed = 3\n{GOOD}"), "seeed", "unknown key"),
        (
            format!("{GOOD}\nrat = 3\n"),
            "workload[0].rat",
            "did you mean \"rate\"",
        ),
        (
            GOOD.replace("\"10s\"", "\"10 parsecs\""),
            "duration",
            "unknown duration unit",
        ),
        (
            GOOD.replace("\"10s\"", "\"10\""),
            "duration",
            "needs a unit",
        ),
        (
            GOOD.replace("rate = \"10Mbit\"", "rate = \"-10Mbit\""),
            "topology.bottleneck.rate",
            "expected a rate",
        ),
        (
            GOOD.replace("rate = \"10Mbit\"", "rate = \"10MB\""),
            "topology.bottleneck.rate",
            "unknown rate unit",
        ),
        (
            GOOD.replace("kind = \"pfifo\"", "kind = \"pfifoo\""),
            "topology.bottleneck.qdisc.kind",
            "did you mean \"pfifo\"",
        ),
        (
            GOOD.replace("limit = 100", "limt = 100"),
            "topology.bottleneck.qdisc.limt",
            "unknown key",
        ),
        (
            GOOD.replace("limit = 100", "limit = 0"),
            "topology.bottleneck.qdisc.limit",
            "out of range",
        ),
        (
            GOOD.replace("limit = 100", "limit = \"lots\""),
            "topology.bottleneck.qdisc.limit",
            "expected an integer",
        ),
        (
            GOOD.replace("duration = \"10s\"", "duration = \"10s\"\nwarmup = \"20s\""),
            "warmup",
            "must be shorter",
        ),
        (
            GOOD.replace("kind = \"cbr\"", "kind = \"cbrr\""),
            "workload[0].kind",
            "did you mean \"cbr\"",
        ),
        (
            GOOD.replace("pair = 0", "pair = 5"),
            "workload[0].pair",
            "out of range",
        ),
        (
            GOOD.replace("pair = 0", "from = \"s0\"\nto = \"mars\""),
            "workload[0].to",
            "no node named \"mars\"",
        ),
        (
            GOOD.replace("kind = \"dumbbell\"", "kind = \"ring\""),
            "topology.kind",
            "unknown value \"ring\"",
        ),
        (
            GOOD.replace(
                "bottleneck = {",
                "bottleneck = { trace = \"missing.trace\",",
            ),
            "topology.bottleneck.trace",
            "either `rate` or `trace`",
        ),
        (
            GOOD.replace("rate = \"10Mbit\",", "trace = \"/nonexistent/x.trace\","),
            "topology.bottleneck.trace",
            "cannot read trace",
        ),
        (
            format!("{GOOD}\n[record]\nlinks = [\"bottlenek\"]\n"),
            "record.links[0]",
            "no link named \"bottlenek\"",
        ),
        (
            GOOD.replace("[[workload]]", "[workload]"),
            "workload",
            "use [[workload]]",
        ),
        (
            GOOD.replace(
                "rate = \"12Mbit\"",
                "rate = \"12Mbit\"\nstart = \"5s\"\nstop = \"2s\"",
            ),
            "workload[0].stop",
            "must be after",
        ),
        (
            GOOD.replace("pairs = 2", "pairs = 2\npair_delays = [\"1ms\"]"),
            "topology.pair_delays",
            "has 1 entries but pairs = 2",
        ),
        (
            GOOD.replace(
                "= { rate = \"10Mbit\", delay = \"10ms\",",
                "= { rate = \"10Mbit\", delay = \"10ms\", rate_schedule = [{ at = \"5s\" }],",
            ),
            "topology.bottleneck.rate_schedule[0].rate",
            "required",
        ),
        (
            "duration = \"1s\"\n[topology\n".to_string(),
            "",
            "TOML syntax error at line 2",
        ),
    ];
    assert!(cases.len() >= 10);
    for (text, path, needle) in cases {
        let (p, m) = err(&text);
        assert_eq!(p, path, "wrong path for mistake {needle:?} (msg: {m})");
        assert!(m.contains(needle), "message {m:?} lacks {needle:?}");
    }
}
