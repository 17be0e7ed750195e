//! `[topology] kind = "isp"`: an operator's subscriber tree (issue 36, docs/isp.md).
//!
//! The file names an uplink, a mix of plans and a number of subscribers; this module
//! expands it, like the dumbbell expands `pairs`, into nodes, links and the HTB trees
//! that shape every subscriber to its plan, so every engine reads the same expanded
//! experiment:
//!
//! ```text
//! server0..S-1 ──server{k}.up──▶ core ──uplink (HTB, plans' down rates)──▶ access
//!                                 ◀──upstream (HTB, plans' up rates)───
//! access ──sub{i}.down──▶ sub{i}      sub{i} ──sub{i}.up──▶ access
//! ```
//!
//! The downstream tree on `uplink` is what an operator's shaping box holds (LibreQoS,
//! Preseem, a BNG): a root class at the uplink's rate, optional site classes under it, one
//! class per subscriber with `rate` = its plan and `ceil` = its plan (or `ceil_down`),
//! the chosen leaf discipline in each, and an address filter `dst = <sub{i}'s node>` per
//! subscriber; the upstream tree on `upstream` is the same with the plans' up rates and
//! `src` filters. Subscribers' lines are fast (the uplink's rate unless `line` says
//! otherwise) so the queue is in the subscriber's own HTB class.
//!
//! This module holds the tree's types and what workloads ask of it (`between`); the
//! expansion itself is [`crate::isp_tree`].

use sojourn_core::packet::Addr;
use sojourn_core::params::{ConfResult, Params};
use sojourn_core::qdisc::htb::{AddrMatch, HtbFilter};
use sojourn_core::qdisc::QdiscSpec;
use sojourn_core::Duration;

/// One entry of `plans`: a subscriber plan and the share of subscribers on it.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanMix {
    pub down_bps: u64,
    pub up_bps: u64,
    /// HTB `ceil` of the plan's classes (the plan itself unless `ceil_down`/`ceil_up`).
    pub ceil_down_bps: u64,
    pub ceil_up_bps: u64,
    /// Fraction of subscribers on this plan (the shares as given, normalised to sum 1).
    pub share: f64,
}

/// One subscriber after expansion.
#[derive(Clone, Debug, PartialEq)]
pub struct Subscriber {
    pub name: String,
    pub node: u32,
    /// Index into [`IspPlan::plans`].
    pub plan: u32,
    /// Site index (0 when there are no sites).
    pub site: u32,
    /// Base round-trip time to its server (drawn from `rtt`).
    pub rtt: Duration,
    /// Its server node.
    pub server: u32,
    /// Selected by `active`: workloads' `between` pairs hold only active subscribers.
    pub active: bool,
    /// Its access router (index; `access_routers` > 1 splits the subscribers).
    pub access: u32,
    /// Its HTB class id (the same minor in both trees), `1:<hex minor>` as tc writes it.
    pub classid: String,
}

/// The expanded subscriber tree.
#[derive(Clone, Debug, PartialEq)]
pub struct IspPlan {
    /// The rate of each uplink (one per access router).
    pub uplink_bps: u64,
    pub upstream_bps: u64,
    pub plans: Vec<PlanMix>,
    pub subscribers: Vec<Subscriber>,
    pub servers: Vec<u32>,
    pub sites: u32,
    /// Access routers, each with its own uplink, upstream and pair of HTB trees.
    pub access_routers: u32,
    /// `addresses`: the prefix the subscribers' real addresses are numbered from (deploy
    /// only: subscriber `i` is the prefix's address `i + 1`).
    pub addresses: Option<(std::net::IpAddr, u8)>,
    /// HTB's `r2q` in both trees (None: HTB's default, tc's 10).
    pub r2q: Option<u32>,
    /// The leaf discipline as written (`fq_codel`, `cake(…)`), "pfifo" when none (HTB's
    /// default leaf, as Linux).
    pub leaf: String,
}

impl IspPlan {
    /// Sum of the subscribers' down plans over the uplink's rate (the operator's
    /// oversubscription ratio; above 1 the plans cannot all be met at once).
    pub fn oversubscription_down(&self) -> f64 {
        let sum: f64 = self
            .subscribers
            .iter()
            .map(|s| self.plans[s.plan as usize].down_bps as f64)
            .sum();
        sum / (self.uplink_bps as f64 * self.access_routers as f64)
    }
    /// The same for the up plans against the upstream link.
    pub fn oversubscription_up(&self) -> f64 {
        let sum: f64 = self
            .subscribers
            .iter()
            .map(|s| self.plans[s.plan as usize].up_bps as f64)
            .sum();
        sum / (self.upstream_bps as f64 * self.access_routers as f64)
    }
    /// The real address of the subscriber at node `node` (`addresses`), None without
    /// `addresses` or for another node.
    pub fn address_of(&self, node: u32) -> Option<std::net::IpAddr> {
        let (net, _) = self.addresses?;
        let first = self.subscribers.first()?.node;
        let i = node.checked_sub(first)? as usize;
        let s = self.subscribers.get(i)?;
        (s.node == node).then(|| nth_address(net, i as u128 + 1))
    }

    /// (server, subscriber) node pairs of the active subscribers, in subscriber order.
    pub fn active_pairs(&self) -> Vec<(u32, u32)> {
        self.subscribers
            .iter()
            .filter(|s| s.active)
            .map(|s| (s.server, s.node))
            .collect()
    }
}

/// The largest minor class id tc accepts (16 bits) — one HTB holds at most this many
/// classes below its handle, root and sites included.
pub const MAX_MINOR: u32 = 0xffff;

/// The default subscriber RTT when `rtt` is not given.
pub const DEFAULT_RTT: Duration = Duration::from_ms(20);

/// A workload's `between = "servers->subscribers" | "subscribers->servers"`: the active
/// subscribers' (server, subscriber) pairs, downstream or upstream.
pub(crate) fn parse_between(isp: Option<&IspPlan>, p: &mut Params) -> ConfResult<Vec<(u32, u32)>> {
    let Some(isp) = isp else {
        return Err(p.err(
            "between",
            "only on an isp topology (use from/to or pair(s))",
        ));
    };
    for k in ["from", "to", "pair", "pairs"] {
        if p.has(k) {
            return Err(p.err(k, "give either `between` or from/to/pair(s), not both"));
        }
    }
    let dir = p.choice(
        "between",
        &["servers->subscribers", "subscribers->servers"],
        "servers->subscribers",
    )?;
    let pairs = isp.active_pairs();
    Ok(if dir == "servers->subscribers" {
        pairs
    } else {
        pairs.into_iter().map(|(a, b)| (b, a)).collect()
    })
}

/// The address `k` after `net`.
fn nth_address(net: std::net::IpAddr, k: u128) -> std::net::IpAddr {
    match net {
        std::net::IpAddr::V4(a) => {
            std::net::IpAddr::V4((u32::from(a).wrapping_add(k as u32)).into())
        }
        std::net::IpAddr::V6(a) => std::net::IpAddr::V6((u128::from(a).wrapping_add(k)).into()),
    }
}

/// Rewrites the node filters of an HTB or DRR at the root of `spec` (what the isp trees
/// hold: `AddrMatch::Node`, which matches the simulator's address of a node) into exact
/// address filters on `addrs(node)`, in order (tc tries filters in order), every address
/// of a node in turn; a node without an address loses its filter (nothing can match it).
/// Live runs and deploy use it: there a node has a real address.
pub fn filters_on_addresses(spec: &mut QdiscSpec, addrs: impl Fn(u32) -> Vec<Addr>) {
    let filters = match spec {
        QdiscSpec::Htb(s) => &mut s.filters,
        QdiscSpec::Drr(s) => &mut s.filters,
        _ => return,
    };
    if !filters.iter().any(|f| matches!(f.addr, AddrMatch::Node(_))) {
        return;
    }
    let mut out: Vec<HtbFilter> = Vec::with_capacity(filters.len());
    for f in filters.iter() {
        match f.addr {
            AddrMatch::Node(n) => out.extend(addrs(n).into_iter().map(|a| HtbFilter {
                addr: AddrMatch::Ip(a),
                ..*f
            })),
            AddrMatch::Ip(_) => out.push(*f),
        }
    }
    *filters = out;
}
