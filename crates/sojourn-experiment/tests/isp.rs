//! `[topology] kind = "isp"` (docs/isp.md): the expansion into nodes, links and HTB trees,
//! the plan mix, active subscribers, RTTs, `between` selection and bad inputs. Expected
//! values are worked by hand from the files below.

use sojourn_core::Duration;
use sojourn_experiment::{parse_str, Experiment};
use std::path::Path;

const BASE: &str = r#"
duration = "10s"
seed = 3
[topology]
kind = "isp"
subscribers = 10
servers = 2
uplink = { rate = "1Gbit", delay = "5ms" }
upstream = { rate = "200Mbit" }
server_link = { delay = "1ms" }
plans = [ { down = "100Mbit", up = "20Mbit", share = 0.6 },
          { down = "50Mbit", up = "10Mbit", share = 0.4 } ]
rtt = "40ms"
active = 0.3
leaf = { kind = "fq_codel" }
[[workload]]
kind = "bulk"
between = "servers->subscribers"
"#;

fn exp(text: &str) -> Experiment {
    parse_str(text, Path::new(".")).unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> String {
    match parse_str(text, Path::new(".")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn with(line_from: &str, line_to: &str) -> String {
    assert!(BASE.contains(line_from), "{line_from}");
    BASE.replace(line_from, line_to)
}

#[test]
fn expands_into_servers_core_access_and_subscribers() {
    let e = exp(BASE);
    // 2 servers + core + access + 10 subscribers.
    assert_eq!(e.node_names.len(), 14);
    // 2 per server, uplink + upstream, 2 per subscriber.
    assert_eq!(e.links.len(), 2 * 2 + 2 + 2 * 10);
    let up = &e.links[e.link("uplink").unwrap() as usize];
    assert_eq!(e.node_names[up.from as usize], "core");
    assert_eq!(e.node_names[up.to as usize], "access");
    assert_eq!(up.qdisc.kind(), "htb");
    let us = &e.links[e.link("upstream").unwrap() as usize];
    assert_eq!(e.node_names[us.from as usize], "access");
    assert_eq!(us.qdisc.kind(), "htb");
    // Subscriber lines default to the fastest of uplink and upstream: 1 Gbit/s.
    let l = &e.links[e.link("sub7.down").unwrap() as usize];
    assert_eq!(l.rate.initial_bps(), 1_000_000_000);
}

#[test]
fn plan_mix_counts_and_oversubscription() {
    let e = exp(BASE);
    let isp = e.isp.as_ref().unwrap();
    let on = |p: u32| isp.subscribers.iter().filter(|s| s.plan == p).count();
    // 0.6 and 0.4 of 10 subscribers.
    assert_eq!((on(0), on(1)), (6, 4));
    // Down: 6 x 100 + 4 x 50 = 800 Mbit/s over 1 Gbit/s; up: 6 x 20 + 4 x 10 = 160 over 200.
    assert!((isp.oversubscription_down() - 0.8).abs() < 1e-12);
    assert!((isp.oversubscription_up() - 0.8).abs() < 1e-12);
    // Shares are normalised: 3 and 2 mean the same mix as 0.6 and 0.4.
    let e2 = exp(&with("share = 0.6", "share = 3").replace("share = 0.4", "share = 2"));
    let isp2 = e2.isp.as_ref().unwrap();
    assert_eq!(isp2.subscribers.iter().filter(|s| s.plan == 0).count(), 6);
}

#[test]
fn largest_remainder_rounding_of_shares() {
    // 7 subscribers at 1/3, 1/3, 1/3: 2.33 each, the one left over goes to the first.
    let e = exp(&with(
        "plans = [ { down = \"100Mbit\", up = \"20Mbit\", share = 0.6 },\n          { down = \"50Mbit\", up = \"10Mbit\", share = 0.4 } ]",
        "plans = [ { down = \"30Mbit\", up = \"3Mbit\", share = 1 }, { down = \"20Mbit\", up = \"2Mbit\", share = 1 }, { down = \"10Mbit\", up = \"1Mbit\", share = 1 } ]",
    ).replace("subscribers = 10", "subscribers = 7"));
    let isp = e.isp.as_ref().unwrap();
    let on = |p: u32| isp.subscribers.iter().filter(|s| s.plan == p).count();
    assert_eq!((on(0), on(1), on(2)), (3, 2, 2));
}

#[test]
fn active_fraction_selects_pairs_and_between_directions() {
    let e = exp(BASE);
    let isp = e.isp.as_ref().unwrap();
    // round(0.3 x 10) = 3 active subscribers, the dumbbell-style pairs are theirs.
    assert_eq!(isp.subscribers.iter().filter(|s| s.active).count(), 3);
    assert_eq!(e.pairs.len(), 3);
    let flows = e.workloads[0].endpoints();
    assert_eq!(flows, e.pairs);
    for &(srv, sub) in &flows {
        assert!(e.node_names[srv as usize].starts_with("server"));
        assert!(e.node_names[sub as usize].starts_with("sub"));
    }
    // Subscriber i is served by server i mod 2.
    for s in &isp.subscribers {
        let i: u32 = s.name[3..].parse().unwrap();
        assert_eq!(e.node_names[s.server as usize], format!("server{}", i % 2));
    }
    let up = exp(&with(
        "between = \"servers->subscribers\"",
        "between = \"subscribers->servers\"\ncount = 6",
    ));
    let f = up.workloads[0].endpoints();
    assert_eq!(f.len(), 6);
    assert_eq!(f[0], (e.pairs[0].1, e.pairs[0].0));
    assert_eq!(f[3], f[0]);
}

#[test]
fn rtt_sets_the_line_delay() {
    // 40 ms RTT: 20 ms one way, less the server link's 1 ms and the uplink's 5 ms.
    let e = exp(BASE);
    let l = &e.links[e.link("sub0.down").unwrap() as usize];
    assert_eq!(l.delay, Duration::from_ms(14));
    let l = &e.links[e.link("sub0.up").unwrap() as usize];
    assert_eq!(l.delay, Duration::from_ms(14));
    // A distribution: every draw within its bounds, not all equal.
    let e = exp(&with(
        "rtt = \"40ms\"",
        "rtt = { dist = \"uniform\", min = \"20ms\", max = \"100ms\" }",
    ));
    let rtts: Vec<Duration> = e
        .isp
        .as_ref()
        .unwrap()
        .subscribers
        .iter()
        .map(|s| s.rtt)
        .collect();
    assert!(rtts
        .iter()
        .all(|&r| r >= Duration::from_ms(20) && r <= Duration::from_ms(100)));
    assert!(rtts.iter().any(|&r| r != rtts[0]));
}

#[test]
fn same_seed_same_tree_other_seed_other_draws() {
    let a = exp(BASE);
    let b = exp(BASE);
    assert_eq!(a.isp, b.isp);
    let c = exp(&BASE.replace("seed = 3", "seed = 4"));
    let (ia, ic) = (a.isp.unwrap(), c.isp.unwrap());
    let key = |i: &sojourn_experiment::isp::IspPlan| -> Vec<(u32, bool)> {
        i.subscribers.iter().map(|s| (s.plan, s.active)).collect()
    };
    assert_ne!(key(&ia), key(&ic));
}

#[test]
fn class_ids_follow_root_and_sites() {
    let e = exp(BASE);
    let isp = e.isp.as_ref().unwrap();
    // Root 1:1, no sites: subscribers from minor 2, written in hex as tc does (sub9 = 1:b).
    assert_eq!(isp.subscribers[0].classid, "1:2");
    assert_eq!(isp.subscribers[9].classid, "1:b");
    let e = exp(&with(
        "active = 0.3",
        "active = 0.3\nsites = { count = 3, rate = \"400Mbit\" }",
    ));
    let isp = e.isp.as_ref().unwrap();
    // Sites 1:2..1:4, subscribers from 1:5; subscriber i on site i mod 3.
    assert_eq!(isp.subscribers[0].classid, "1:5");
    assert_eq!(isp.subscribers[4].site, 1);
}

#[test]
fn bad_inputs_name_the_key() {
    let cases: Vec<(String, &str)> = vec![
        (
            with(
                "plans = [ { down = \"100Mbit\", up = \"20Mbit\", share = 0.6 },\n          { down = \"50Mbit\", up = \"10Mbit\", share = 0.4 } ]",
                "",
            ),
            "topology.plans: required",
        ),
        (
            with("share = 0.4", "share = -0.4"),
            "topology.plans[1].share: must be positive",
        ),
        (with("active = 0.3", "active = 1.5"), "topology.active"),
        (with("active = 0.3", "active = 0.01"), "topology.active: 0.01 of 10 subscribers selects none"),
        (
            with("down = \"100Mbit\"", "down = \"2Gbit\""),
            "topology.plans[0].down: a plan of 2Gbit is faster than the uplink (1Gbit)",
        ),
        (
            with("up = \"20Mbit\"", "up = \"300Mbit\""),
            "topology.plans[0].up: a plan of 300Mbit is faster than the upstream link (200Mbit)",
        ),
        (
            with("uplink = { rate = \"1Gbit\", delay = \"5ms\" }", "uplink = { rate = \"1Gbit\", qdisc = \"pfifo\" }"),
            "topology.uplink.qdisc: generated by the isp topology",
        ),
        (with("uplink = { rate = \"1Gbit\", delay = \"5ms\" }", ""), "topology.uplink: required"),
        (with("rtt = \"40ms\"", "rtt = \"10ms\""), "topology.rtt: an RTT of 10ms is shorter"),
        (with("subscribers = 10", "subscribers = 0"), "topology.subscribers: required"),
        (with("subscribers = 10", "subscribers = 70000"), "topology.subscribers: 70000 subscribers and 0 sites do not fit one HTB"),
        (
            with("between = \"servers->subscribers\"", "between = \"servers->subscribers\"\npair = 0"),
            "workload[0].pair: give either `between` or from/to/pair(s), not both",
        ),
        (
            with("between = \"servers->subscribers\"", "between = \"subscribers<-servers\""),
            "workload[0].between",
        ),
        (
            with("active = 0.3", "active = 0.3\nsites = { count = 2, rate = \"80Mbit\" }"),
            "topology.plans[0]: its ceil is faster than its site's rate",
        ),
        (
            with("share = 0.6 }", "share = 0.6, ceil_down = \"90Mbit\" }"),
            "topology.plans[0].ceil_down: must not be below `down`",
        ),
        (with("subscribers = 10", "subscriber = 10"), "topology.subscriber"),
    ];
    for (text, want) in cases {
        let got = err(&text);
        assert!(got.contains(want), "want {want:?}, got {got:?}");
        assert!(!got.contains('\n'), "one line: {got:?}");
    }
    // `between` on a dumbbell.
    let got = err(r#"
        duration = "1s"
        [topology]
        bottleneck = { rate = "10Mbit" }
        [[workload]]
        kind = "bulk"
        between = "servers->subscribers"
    "#);
    assert!(
        got.contains("workload[0].between: only on an isp topology"),
        "{got}"
    );
}

#[test]
fn access_routers_split_the_subscribers_into_trees() {
    let e = exp(&with("servers = 2", "servers = 2\naccess_routers = 2"));
    // 2 servers + core + 2 access routers + 10 subscribers.
    assert_eq!(e.node_names.len(), 15);
    assert!(e.node("access").is_none() && e.node("access1").is_some());
    // Subscriber i on router i mod 2: sub0 and sub1 are each the first class of their
    // tree (1:2), sub2 the second of router 0's (1:3).
    let isp = e.isp.as_ref().unwrap();
    let c: Vec<(&str, u32)> = isp.subscribers[..3]
        .iter()
        .map(|s| (s.classid.as_str(), s.access))
        .collect();
    assert_eq!(c, vec![("1:2", 0), ("1:2", 1), ("1:3", 0)]);
    let l = &e.links[e.link("sub1.down").unwrap() as usize];
    assert_eq!(e.node_names[l.from as usize], "access1");
    let u = &e.links[e.link("uplink1").unwrap() as usize];
    assert_eq!(e.node_names[u.to as usize], "access1");
    assert!(e.link("upstream0").is_some() && e.link("uplink").is_none());
    // 800 Mbit/s of down plans over two 1-Gbit/s uplinks.
    assert!((isp.oversubscription_down() - 0.4).abs() < 1e-12);
    // Too many subscribers for one tree: the message says how many routers would do.
    let got = err(&with("subscribers = 10", "subscribers = 70000"));
    assert!(got.contains("split them with access_routers = 2"), "{got}");
}

#[test]
fn addresses_number_the_subscribers_for_deploy() {
    let e = exp(&with(
        "active = 0.3",
        "active = 0.3\naddresses = \"100.64.0.0/28\"",
    ));
    let isp = e.isp.as_ref().unwrap();
    // sub0 is the prefix's first host address, sub9 its tenth.
    let a = |name: &str| isp.address_of(e.node(name).unwrap()).unwrap().to_string();
    assert_eq!(a("sub0"), "100.64.0.1");
    assert_eq!(a("sub9"), "100.64.0.10");
    assert!(isp.address_of(e.node("core").unwrap()).is_none());
    // An IPv6 prefix; host bits given in the prefix are masked off.
    let e = exp(&with(
        "active = 0.3",
        "active = 0.3\naddresses = \"2001:db8::5/64\"",
    ));
    let isp = e.isp.as_ref().unwrap();
    assert_eq!(
        isp.address_of(e.node("sub2").unwrap()).unwrap().to_string(),
        "2001:db8::3"
    );
    // A /29 holds 6 host addresses: too few for 10 subscribers.
    let got = err(&with(
        "active = 0.3",
        "active = 0.3\naddresses = \"100.64.0.0/29\"",
    ));
    assert!(got.contains("topology.addresses: 100.64.0.0/29 holds 6 host addresses, fewer than the 10 subscribers"), "{got}");
    let got = err(&with(
        "active = 0.3",
        "active = 0.3\naddresses = \"100.64.0.0\"",
    ));
    assert!(
        got.contains("topology.addresses: \"100.64.0.0\" is not a prefix"),
        "{got}"
    );
}

#[test]
fn r2q_reaches_both_trees() {
    use sojourn_core::qdisc::QdiscSpec;
    let e = exp(&with("active = 0.3", "active = 0.3\nr2q = 100"));
    for name in ["uplink", "upstream"] {
        let QdiscSpec::Htb(h) = &e.links[e.link(name).unwrap() as usize].qdisc else {
            panic!("htb")
        };
        assert_eq!(h.r2q, 100);
    }
    // Without it, tc's default: 10.
    let e = exp(BASE);
    let QdiscSpec::Htb(h) = &e.links[e.link("uplink").unwrap() as usize].qdisc else {
        panic!("htb")
    };
    assert_eq!(h.r2q, 10);
    let got = err(&with("active = 0.3", "active = 0.3\nr2q = 0"));
    assert!(got.contains("topology.r2q"), "{got}");
}
