//! Address filters that name a node (`AddrMatch::Node`, what an isp topology's HTB trees
//! hold: docs/isp.md) match the simulator's address of that node, whose low 32 bits are the
//! node id. Live, a node's host has the run's private address ([`crate::plan::host_addr`]),
//! so before the forwarder builds a link's discipline every node filter of an HTB or DRR at
//! the link's root becomes an exact-address filter on that host's IPv4 address, and on its
//! IPv6 address too when the run is dual-stack ([`crate::plan::addr6`]); filters keep their
//! order (tc tries them in order), the IPv6 twin right after its IPv4 one.

use crate::plan::{addr6, LivePlan};
use sojourn_core::packet::Addr;
use sojourn_core::qdisc::QdiscSpec;
use sojourn_experiment::isp::filters_on_addresses;
use std::net::IpAddr;

/// `spec` with its node filters rewritten to the live hosts' addresses; a filter naming a
/// node without a host (a router: no packet has its address) is dropped, as it can match
/// nothing live either.
pub fn live_filters(mut spec: QdiscSpec, lp: &LivePlan) -> QdiscSpec {
    filters_on_addresses(&mut spec, |n| {
        let Some(h) = lp.host_of_node.get(n as usize).copied().flatten() else {
            return Vec::new();
        };
        let v4 = lp.hosts[h].addr;
        let mut v = vec![Addr::from(IpAddr::V4(v4))];
        if lp.ipv6 {
            v.push(Addr::from(IpAddr::V6(addr6(v4))));
        }
        v
    });
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::plan;
    use sojourn_core::qdisc::htb::AddrMatch;
    use std::net::Ipv4Addr;

    #[test]
    fn node_filters_become_the_hosts_addresses() {
        let exp = sojourn_experiment::parse_str(
            r#"
            duration = "1s"
            [topology]
            kind = "isp"
            subscribers = 2
            uplink = { rate = "20Mbit" }
            plans = [ { down = "5Mbit", up = "1Mbit", share = 1 } ]
            [[workload]]
            kind = "bulk"
            between = "servers->subscribers"
            "#,
            std::path::Path::new("."),
        )
        .unwrap();
        let lp = plan(&exp, "t").unwrap();
        let uplink = &exp.links[exp.link("uplink").unwrap() as usize];
        let QdiscSpec::Htb(before) = &uplink.qdisc else {
            panic!("htb")
        };
        assert!(matches!(before.filters[0].addr, AddrMatch::Node(_)));
        let QdiscSpec::Htb(after) = live_filters(uplink.qdisc.clone(), &lp) else {
            panic!("htb")
        };
        // Hosts are numbered in node order: server0 is host 0 (10.89.0.1), sub0 host 1
        // (10.89.0.2), sub1 host 2 (10.89.0.3); the routers have none.
        let want: Vec<(AddrMatch, u16)> = [
            (Ipv4Addr::new(10, 89, 0, 2), 2),
            (Ipv4Addr::new(10, 89, 0, 3), 3),
        ]
        .iter()
        .map(|&(a, m)| (AddrMatch::Ip(Addr::from(IpAddr::V4(a))), m))
        .collect();
        let got: Vec<(AddrMatch, u16)> = after.filters.iter().map(|f| (f.addr, f.minor)).collect();
        assert_eq!(got, want);
        // A discipline without filters is left alone.
        let server = &exp.links[0].qdisc;
        assert_eq!(&live_filters(server.clone(), &lp), server);
    }
}
