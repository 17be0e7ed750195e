//! ISP subscriber trees in the simulator (docs/isp.md): the shares an HTB tree gives
//! saturated subscribers, worked by hand, and determinism. Every subscriber is saturated
//! by a UDP CBR stream of 1514-B frames (1472 B of payload after the 42 B of Ethernet,
//! IPv4 and UDP headers), so a class shaped to R bit/s of frames delivers
//! R x 1472 / 1514 bit/s of payload.

use sojourn_experiment::parse_str;
use sojourn_sim::Column;
use std::collections::BTreeMap;
use std::path::Path;

/// Payload bit/s delivered to each destination over the run (`duration` s).
fn delivered_by_dst(text: &str, seed: u64, duration: f64) -> BTreeMap<String, f64> {
    let e = parse_str(text, Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let out = sojourn_sim::run(&e, seed, &mut |_| true).unwrap();
    let (Some(Column::Str(dst)), Some(Column::U64(bytes))) =
        (out.flows.get("dst"), out.flows.get("delivered_bytes"))
    else {
        panic!("flows columns")
    };
    let mut m = BTreeMap::new();
    for (d, b) in dst.iter().zip(bytes) {
        *m.entry(d.clone()).or_insert(0.0) += *b as f64 * 8.0 / duration;
    }
    m
}

fn tree(uplink: &str, plans: &str, n: u32, cbr: &str) -> String {
    format!(
        r#"
duration = "10s"
seed = 1
[topology]
kind = "isp"
subscribers = {n}
uplink = {{ rate = "{uplink}" }}
plans = {plans}
rtt = "20ms"
[[workload]]
kind = "cbr"
between = "servers->subscribers"
rate = "{cbr}"
[record]
interval = "0s"
"#
    )
}

/// Half the subscribers on `a`, half on `b` Mbit/s down (a tenth of that up).
fn plans(a: u32, b: u32) -> String {
    format!(
        r#"[ {{ down = "{a}Mbit", up = "{}Mbit", share = 0.5 }}, {{ down = "{b}Mbit", up = "{}Mbit", share = 0.5 }} ]"#,
        a / 10,
        b / 10
    )
}

#[test]
fn plans_below_the_uplink_are_each_met_within_2_percent() {
    // 4 subscribers, two on 10 and two on 30 Mbit/s: 2 x 10 + 2 x 30 = 80 Mbit/s under a
    // 100 Mbit/s uplink, each offered 60 Mbit/s: every class gets its own rate (= its
    // ceil), nothing more.
    let text = tree("100Mbit", &plans(10, 30), 4, "60Mbit");
    let e = parse_str(&text, Path::new(".")).unwrap();
    let isp = e.isp.as_ref().unwrap();
    let got = delivered_by_dst(&text, 1, 10.0);
    assert_eq!(got.len(), 4);
    for s in &isp.subscribers {
        let plan = isp.plans[s.plan as usize].down_bps as f64;
        // Payload of a 1514-B frame: 1472 B.
        let want = plan * 1472.0 / 1514.0;
        let g = got[&s.name];
        assert!((g / want - 1.0).abs() < 0.02, "{}: {g} vs {want}", s.name);
    }
    // The two 10 Mbit/s subscribers: 9.72 Mbit/s of payload each (hand: 10e6 x 1472/1514).
    let low: Vec<f64> = isp
        .subscribers
        .iter()
        .filter(|s| s.plan == 0)
        .map(|s| got[&s.name])
        .collect();
    for g in low {
        assert!((g - 9.722e6).abs() < 0.02 * 9.722e6, "{g}");
    }
}

#[test]
fn twice_oversubscribed_equal_plans_share_the_uplink_equally() {
    // 4 x 20 Mbit/s = 80 Mbit/s of plans behind 40 Mbit/s (2x). Every class stays within
    // its own rate (it is offered 30 but can only get a quarter of the wire), so HTB's
    // round robin among equal-priority leaves with equal quanta gives each 40/4 = 10
    // Mbit/s of frames: 9.72 Mbit/s of payload.
    let text = tree(
        "40Mbit",
        r#"[ { down = "20Mbit", up = "2Mbit", share = 1 } ]"#,
        4,
        "30Mbit",
    );
    let got = delivered_by_dst(&text, 1, 10.0);
    assert_eq!(got.len(), 4);
    for (name, g) in &got {
        assert!((g / 9.722e6 - 1.0).abs() < 0.03, "{name}: {g}");
    }
}

#[test]
fn same_seed_same_outputs() {
    let text = tree("50Mbit", &plans(20, 10), 6, "15Mbit");
    let e = parse_str(&text, Path::new(".")).unwrap();
    let a = sojourn_sim::run(&e, 5, &mut |_| true).unwrap();
    let b = sojourn_sim::run(&e, 5, &mut |_| true).unwrap();
    assert_eq!(a.summary_json(), b.summary_json());
    // Debug text: NaN columns (no FCT for CBR) compare equal as text, not as floats.
    assert_eq!(format!("{:?}", a.flows), format!("{:?}", b.flows));
}
