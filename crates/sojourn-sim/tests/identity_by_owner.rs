//! Identity by owner (docs/engine.md, "Identity by owner"): what a flow is — its
//! ephemeral port, hence its flow hash and its FQ bucket, its random streams, its
//! endpoints' place in the tie order, its socket number (`fq`'s flow key on the sending
//! host, TSQ's address), its packets' uids — depends only on the history of
//! its own source host, never on how many flows or packets other hosts produced before it.
//! That is what lets a run cut into partitions (issue 35 §3) number everything as the
//! single-threaded run does.
//!
//! The proof here: a network of two disconnected halves, each with its own workloads. The
//! half A's flows, its bottleneck's statistics and its packet log are identical whether
//! half B is loaded or idle. Under the dense numbering this replaced (a flow's port and
//! streams from its creation index among all flows, one packet counter for the whole run)
//! B's flows interleave with A's and every A flow after B's first one is another flow.

use sojourn_sim::config::from_toml;
use sojourn_sim::Sim;
use std::path::Path;

/// Two disjoint dumbbells with short Poisson transfers (handshakes, closing endpoints
/// whose slots and socket numbers are reused) leaving their host through `fq`, bulk flows
/// through fq_codel and CBR, A's workloads first so
/// their indices do not move when B's are removed.
fn experiment(with_b: bool) -> String {
    let mut text = String::from(
        r#"
duration = "3s"
[topology]
kind = "graph"
nodes = ["a1", "a2", "ra", "as", "b1", "b2", "rb", "bs"]
[[topology.links]]
name = "a1-ra"
from = "a1"
to = "ra"
rate = "100Mbit"
delay = "2ms"
[[topology.links]]
name = "a2-ra"
from = "a2"
to = "ra"
rate = "100Mbit"
delay = "3ms"
qdisc = "fq"
[[topology.links]]
name = "a-bottleneck"
from = "ra"
to = "as"
rate = "20Mbit"
delay = "10ms"
qdisc = "fq_codel"
[[topology.links]]
name = "b1-rb"
from = "b1"
to = "rb"
rate = "100Mbit"
delay = "2ms"
[[topology.links]]
name = "b2-rb"
from = "b2"
to = "rb"
rate = "100Mbit"
delay = "3ms"
[[topology.links]]
name = "b-bottleneck"
from = "rb"
to = "bs"
rate = "20Mbit"
delay = "10ms"
qdisc = "fq_codel"
[transport]
cc = "cubic"
[[workload]]
kind = "bulk"
from = "a1"
to = "as"
count = 3
[[workload]]
kind = "poisson"
from = "a2"
to = "as"
interval = "25ms"
size = "30kB"
[[workload]]
kind = "cbr"
from = "a2"
to = "as"
rate = "1Mbit"
"#,
    );
    if with_b {
        text.push_str(
            r#"
[[workload]]
kind = "poisson"
from = "b1"
to = "bs"
interval = "16ms"
size = "20kB"
[[workload]]
kind = "bulk"
from = "b2"
to = "bs"
count = 2
"#,
        );
    }
    text.push_str(
        r#"
[record]
interval = "50ms"
flows = true
packets = ["a-bottleneck"]
"#,
    );
    text
}

/// Half A as the run left it: its flows (all but the dense id, which counts B's flows
/// too), its links' statistics, and the packet log of its bottleneck (uids included).
fn half_a(with_b: bool, seed: u64) -> (Vec<String>, Vec<String>, String, usize) {
    let exp = from_toml(&experiment(with_b), Path::new(".")).unwrap();
    let mut sim = Sim::new(&exp, seed);
    sim.start_apps();
    assert!(sim.run(&mut |_| true));
    sim.check_conservation().unwrap();
    let a_nodes: Vec<u32> = ["a1", "a2", "ra", "as"]
        .iter()
        .map(|n| exp.node_names.iter().position(|m| m == n).unwrap() as u32)
        .collect();
    let b_flows = sim
        .flows
        .iter()
        .filter(|r| !a_nodes.contains(&r.src_node))
        .count();
    let flows = sim
        .flows
        .iter()
        .filter(|r| a_nodes.contains(&r.src_node))
        .map(|r| {
            let mut r = r.clone();
            r.flow = 0;
            format!("{r:?}")
        })
        .collect();
    let links = sim
        .links
        .iter()
        .filter(|l| a_nodes.contains(&l.from))
        .map(|l| format!("{} {:?}", l.name, l.stats))
        .collect();
    let p = &sim.packet_log;
    let packets = format!(
        "{:?} {:?} {:?} {:?} {:?}",
        p.t_ns, p.uid, p.len_bytes, p.event, p.sojourn_ns
    );
    (flows, links, packets, b_flows)
}

#[test]
fn a_flow_is_what_its_own_host_made_of_it() {
    for seed in [1, 7] {
        let (flows_alone, links_alone, packets_alone, none) = half_a(false, seed);
        let (flows_loaded, links_loaded, packets_loaded, b_flows) = half_a(true, seed);
        assert_eq!(none, 0);
        // B opened flows all through the run (Poisson at 60/s for 3 s, and 2 bulk),
        // interleaved with A's 40/s.
        assert!(b_flows > 100, "B opened {b_flows} flows");
        assert!(
            flows_alone.len() > 80,
            "A opened {} flows",
            flows_alone.len()
        );
        assert_eq!(flows_alone.len(), flows_loaded.len());
        for (i, (x, y)) in flows_alone.iter().zip(&flows_loaded).enumerate() {
            assert_eq!(
                x, y,
                "A's flow {i} with B idle and with B loaded (seed {seed})"
            );
        }
        assert_eq!(links_alone, links_loaded, "seed {seed}");
        assert!(packets_alone.len() > 1000);
        assert!(
            packets_alone == packets_loaded,
            "A's packet log (seed {seed})"
        );
    }
}
