//! Scale (issue 19): a 10,000-pair dumbbell builds and runs briefly. No timing is asserted
//! (bench/ measures speed); the truths are the conservation law, the link capacity and the
//! dumbbell's wiring (every flow ends where its pair says).

use sojourn_sim::{Column, Sim};
use std::path::Path;

fn col_str<'a>(c: &'a sojourn_sim::Columns, name: &str) -> &'a [String] {
    match c.get(name) {
        Some(Column::Str(v)) => v,
        other => panic!("{name}: {other:?}"),
    }
}

fn col_u64<'a>(c: &'a sojourn_sim::Columns, name: &str) -> &'a [u64] {
    match c.get(name) {
        Some(Column::U64(v)) => v,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn ten_thousand_pairs_build_run_and_conserve_packets() {
    let text = r#"
        duration = "1s"
        [topology]
        kind = "dumbbell"
        pairs = 10000
        bottleneck = { rate = "100Mbit", delay = "4ms", qdisc = "fq_codel" }
        access = { rate = "1Gbit", delay = "500us" }
        [[workload]]
        kind = "bulk"
        pairs = "all"
        [record]
        interval = "100ms"
        links = ["bottleneck"]
    "#;
    let exp = sojourn_sim::config::from_toml(text, Path::new(".")).unwrap();
    assert_eq!(exp.node_names.len(), 20_002);
    assert_eq!(exp.links.len(), 40_002);
    let mut sim = Sim::new(&exp, exp.seed);
    // The routing table holds the two routers only; hosts are leaves.
    assert_eq!(sim.routes.core_nodes(), 2);
    sim.start_apps();
    assert!(sim.run(&mut |_| true));
    sim.check_conservation()
        .expect("created = delivered + dropped + inside");
    let a = sim.acct;
    assert!(a.delivered > 20_000, "{a:?}");
    let out = sojourn_sim::output::collect(&mut sim, exp.record.fct_from);
    assert_eq!(out.summary["accounting"]["conserved"], true);
    // Every flow runs from s_i to d_i (pairs = "all": flow i on pair i).
    let (src, dst) = (col_str(&out.flows, "src"), col_str(&out.flows, "dst"));
    assert_eq!(src.len(), 10_000);
    for i in [0usize, 1, 4_999, 9_999] {
        assert_eq!(
            (src[i].as_str(), dst[i].as_str()),
            (&*format!("s{i}"), &*format!("d{i}"))
        );
    }
    // Capacity: everything delivered crossed the 100 Mbit/s bottleneck in 1 s (plus at
    // most one packet being serialised when the run ended).
    let delivered: u64 = col_u64(&out.flows, "delivered_bytes").iter().sum();
    assert!(delivered > 0);
    assert!(
        delivered as f64 <= 100e6 / 8.0 * 1.0 + 1514.0,
        "{delivered} bytes through 100 Mbit/s in 1 s"
    );
    // Many flows got data through, on their own pair's path.
    let flowing = col_u64(&out.flows, "delivered_bytes")
        .iter()
        .filter(|&&b| b > 0)
        .count();
    assert!(flowing > 1_000, "{flowing} flows delivered data");
}
