//! Static routes: which link a packet at node `at` heading for node `dst` leaves by.
//!
//! The rule (docs/engine.md, "Routing"): fewest hops; among equally short paths, the one whose
//! link ids, read from the destination backwards, are lexicographically smallest (links are
//! numbered in declaration order). That is exactly what a breadth-first search backwards from
//! the destination produces when it visits each node's incoming links in declaration order
//! and keeps the first discovery. Explicit `[[topology.routes]]` entries then replace single
//! (node, destination) entries.
//!
//! Size: a table over all node pairs is N² entries (20,002 nodes in a 10,000-pair dumbbell:
//! 1.6 GB). Most nodes of large topologies are hosts hanging off one router, so a node whose
//! only neighbour is one other node (a *leaf*) is kept out of the table:
//!
//! - from a leaf, every route leaves by its first link towards its router (the only way out);
//! - towards a leaf, every route is the route towards its router, except at the router
//!   itself, which uses its first link towards the leaf.
//!
//! Both follow from the search above: a leaf discovers nothing (its only in-neighbour is
//! already visited when the leaf is reached), and a search from a leaf is the search from its
//! router one level later. The remaining *core* nodes get a core × core table from one search
//! per core node over adjacency lists: O(C·(C + L)) time and C² entries for C core nodes and
//! L links, plus O(N) for the leaves (a dumbbell has C = 2 whatever its size).
//!
//! This module knows nodes and links only by index (no dependency on the experiment model).

/// "No route" (also "no such link").
pub const NO_ROUTE: u32 = u32::MAX;
/// Marks a leaf in `NodeRoute::core` and a core node in `DstRoute::down`.
const LEAF: u32 = u32::MAX;
const CORE: u32 = u32::MAX - 1;

#[derive(Clone, Copy, Debug)]
struct NodeRoute {
    /// Index among core nodes, or `LEAF`.
    core: u32,
    /// Leaf: its first link to its router (`NO_ROUTE` if it has none). Core: unused.
    up: u32,
    /// Leaf: its router's core index. Core: unused.
    attach_core: u32,
    /// Some explicit route starts here (checked before the computed ones).
    overridden: bool,
}

#[derive(Clone, Copy, Debug)]
struct DstRoute {
    /// The core column that routes towards this node: its own core index, or its router's.
    col: u32,
    /// Leaf: its router's first link to it (`NO_ROUTE` if none: nothing reaches it).
    /// Core: `CORE`.
    down: u32,
}

/// Static routing for one topology (see the module documentation for the rule and size).
#[derive(Clone, Debug)]
pub struct Routes {
    nodes: Vec<NodeRoute>,
    dsts: Vec<DstRoute>,
    /// Number of core nodes (the table's side).
    cores: usize,
    /// `table[at_core * cores + dst_core]` = egress link, or `NO_ROUTE`.
    table: Vec<u32>,
    /// Explicit routes `(at, dst, via)`, sorted by `(at, dst)`, the last entry of a
    /// duplicate kept (as if applied in order).
    overrides: Vec<(u32, u32, u32)>,
}

/// Per node: its only neighbour (in either direction), `NONE` for none, `MANY` for several.
const NONE: u32 = u32::MAX;
const MANY: u32 = u32::MAX - 1;

fn only_neighbour(nodes: usize, links: &[(u32, u32)]) -> Vec<u32> {
    let mut only = vec![NONE; nodes];
    let mut note = |x: u32, y: u32| {
        let o = &mut only[x as usize];
        if *o == NONE {
            *o = y;
        } else if *o != y {
            *o = MANY;
        }
    };
    for &(f, t) in links {
        note(f, t);
        note(t, f);
    }
    only
}

/// A leaf: exactly one neighbour, which is not itself a leaf candidate pointing back (of
/// two nodes that only see each other, neither is a leaf) and not the node itself.
fn is_leaf(only: &[u32], x: usize) -> bool {
    let r = only[x];
    r != NONE && r != MANY && r as usize != x && only[r as usize] != x as u32
}

/// How many nodes the table [`Routes::new`] builds would hold (its side), without building it.
pub fn core_count(nodes: usize, links: &[(u32, u32)]) -> usize {
    let only = only_neighbour(nodes, links);
    (0..nodes).filter(|&x| !is_leaf(&only, x)).count()
}

impl Routes {
    /// Routes for `nodes` nodes joined by directed `links` (`(from, to)`, indexed in
    /// declaration order), with explicit `overrides` `(at, dst, via)` applied in order.
    pub fn new(nodes: usize, links: &[(u32, u32)], overrides: &[(u32, u32, u32)]) -> Routes {
        let only = only_neighbour(nodes, links);
        let mut nr = vec![
            NodeRoute {
                core: LEAF,
                up: NO_ROUTE,
                attach_core: LEAF,
                overridden: false,
            };
            nodes
        ];
        let mut core_nodes = Vec::new();
        for (x, n) in nr.iter_mut().enumerate() {
            if !is_leaf(&only, x) {
                n.core = core_nodes.len() as u32;
                core_nodes.push(x as u32);
            }
        }
        let cores = core_nodes.len();
        let mut dsts = vec![
            DstRoute {
                col: 0,
                down: NO_ROUTE,
            };
            nodes
        ];
        for x in 0..nodes {
            if nr[x].core != LEAF {
                dsts[x] = DstRoute {
                    col: nr[x].core,
                    down: CORE,
                };
            } else {
                let r = only[x] as usize;
                nr[x].attach_core = nr[r].core;
                dsts[x].col = nr[r].core;
            }
        }
        // First link (lowest id) leaf -> router and router -> leaf.
        for (li, &(f, t)) in links.iter().enumerate() {
            let li = li as u32;
            let (f, t) = (f as usize, t as usize);
            if nr[f].core == LEAF && nr[f].up == NO_ROUTE {
                nr[f].up = li;
            }
            if nr[t].core == LEAF && dsts[t].down == NO_ROUTE {
                dsts[t].down = li;
            }
        }
        // Incoming links of each core node from core nodes, in id order (CSR layout).
        let mut start = vec![0u32; cores + 1];
        for &(f, t) in links {
            if nr[f as usize].core != LEAF && nr[t as usize].core != LEAF {
                start[nr[t as usize].core as usize + 1] += 1;
            }
        }
        for c in 0..cores {
            start[c + 1] += start[c];
        }
        let mut fill = start.clone();
        let mut in_links = vec![(0u32, 0u32); start[cores] as usize]; // (link, from core)
        for (li, &(f, t)) in links.iter().enumerate() {
            let (cf, ct) = (nr[f as usize].core, nr[t as usize].core);
            if cf != LEAF && ct != LEAF {
                in_links[fill[ct as usize] as usize] = (li as u32, cf);
                fill[ct as usize] += 1;
            }
        }
        // One breadth-first search per core destination, backwards over incoming links;
        // a FIFO queue visits nodes level by level in discovery order, so the first
        // discovery is the lexicographically smallest path (module documentation).
        let mut table = vec![NO_ROUTE; cores * cores];
        let mut seen = vec![u32::MAX; cores]; // the destination whose search saw it
        let mut queue = Vec::with_capacity(cores);
        for d in 0..cores {
            queue.clear();
            queue.push(d as u32);
            seen[d] = d as u32;
            let mut head = 0;
            while head < queue.len() {
                let v = queue[head] as usize;
                head += 1;
                for &(li, u) in &in_links[start[v] as usize..start[v + 1] as usize] {
                    if seen[u as usize] != d as u32 {
                        seen[u as usize] = d as u32;
                        table[u as usize * cores + d] = li;
                        queue.push(u);
                    }
                }
            }
        }
        let mut ov: Vec<(usize, (u32, u32, u32))> = overrides.iter().copied().enumerate().collect();
        // By (at, dst), later entries after earlier ones; keep the last of each (at, dst).
        ov.sort_by_key(|&(i, (a, d, _))| (a, d, i));
        let mut kept: Vec<(u32, u32, u32)> = Vec::with_capacity(ov.len());
        for (_, e) in ov {
            match kept.last_mut() {
                Some(k) if (k.0, k.1) == (e.0, e.1) => *k = e,
                _ => kept.push(e),
            }
        }
        for &(a, _, _) in &kept {
            nr[a as usize].overridden = true;
        }
        Routes {
            nodes: nr,
            dsts,
            cores,
            table,
            overrides: kept,
        }
    }

    /// The number of nodes kept in the core table (the others are leaves).
    pub fn core_nodes(&self) -> usize {
        self.cores
    }

    /// Bytes held by the tables (for docs/limits.md's accounting).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<NodeRoute>()
            + self.dsts.len() * std::mem::size_of::<DstRoute>()
            + self.table.len() * 4
            + self.overrides.len() * 12
    }

    fn overridden(&self, at: u32, dst: u32) -> Option<u32> {
        self.overrides
            .binary_search_by_key(&(at, dst), |&(a, d, _)| (a, d))
            .ok()
            .map(|i| self.overrides[i].2)
    }

    /// The link a packet at `at` heading for `dst` (≠ `at`) leaves by, or [`NO_ROUTE`].
    pub fn next(&self, at: u32, dst: u32) -> u32 {
        let n = self.nodes[at as usize];
        if n.overridden {
            if let Some(v) = self.overridden(at, dst) {
                return v;
            }
        }
        let d = self.dsts[dst as usize];
        if d.down == NO_ROUTE {
            return NO_ROUTE; // a leaf nothing has a link to
        }
        if n.core == LEAF {
            // Out by the only way out, if the router gets there.
            let reaches = n.attach_core == d.col
                || self.table[n.attach_core as usize * self.cores + d.col as usize] != NO_ROUTE;
            return if reaches { n.up } else { NO_ROUTE };
        }
        if n.core == d.col {
            return d.down; // `dst` is a leaf of this router (at != dst, so not the router)
        }
        self.table[n.core as usize * self.cores + d.col as usize]
    }

    /// [`Routes::next`] for a destination known to be reachable (the engine's per-packet
    /// lookup; validation checked every flow's path): skips the reachability tests.
    #[inline]
    pub fn hop(&self, at: u32, dst: u32) -> u32 {
        let n = self.nodes[at as usize];
        if n.overridden {
            if let Some(v) = self.overridden(at, dst) {
                return v;
            }
        }
        if n.core == LEAF {
            return n.up;
        }
        let d = self.dsts[dst as usize];
        if n.core == d.col {
            d.down
        } else {
            self.table[n.core as usize * self.cores + d.col as usize]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_core::rng::Rng;

    /// The reference: Floyd–Warshall hop distances, then, per destination, the best path
    /// by the stated rule (fewest hops; link ids read from the destination backwards,
    /// smallest first) by direct recursion over all shortest paths. Independent of the
    /// search the implementation uses.
    fn reference(
        nodes: usize,
        links: &[(u32, u32)],
        overrides: &[(u32, u32, u32)],
    ) -> Vec<Vec<u32>> {
        const INF: u32 = u32::MAX / 4;
        let mut dist = vec![vec![INF; nodes]; nodes];
        for (i, row) in dist.iter_mut().enumerate() {
            row[i] = 0;
        }
        for &(f, t) in links {
            dist[f as usize][t as usize] = dist[f as usize][t as usize].min(1);
        }
        for k in 0..nodes {
            let via_k = dist[k].clone();
            for row in dist.iter_mut() {
                let dik = row[k];
                if dik == INF {
                    continue;
                }
                for (d, &dkj) in row.iter_mut().zip(&via_k) {
                    *d = (*d).min(dik + dkj);
                }
            }
        }
        let mut table = vec![vec![NO_ROUTE; nodes]; nodes];
        for dst in 0..nodes {
            // key[u] = link ids of u's best path, destination end first.
            let mut key: Vec<Option<Vec<u32>>> = vec![None; nodes];
            key[dst] = Some(Vec::new());
            let mut order: Vec<usize> = (0..nodes).filter(|&u| dist[u][dst] < INF).collect();
            order.sort_by_key(|&u| dist[u][dst]);
            for &u in &order {
                if u == dst {
                    continue;
                }
                let mut best: Option<(Vec<u32>, u32)> = None;
                for (li, &(f, t)) in links.iter().enumerate() {
                    if f as usize == u && dist[t as usize][dst] + 1 == dist[u][dst] {
                        let mut k = key[t as usize].clone().expect("closer node done first");
                        k.push(li as u32);
                        if best.as_ref().is_none_or(|(b, _)| k < *b) {
                            best = Some((k, li as u32));
                        }
                    }
                }
                let (k, l) = best.expect("a node at distance d has a neighbour at d-1");
                key[u] = Some(k);
                table[u][dst] = l;
            }
        }
        for &(a, d, v) in overrides {
            table[a as usize][d as usize] = v;
        }
        table
    }

    /// A random connected topology: a core of `core` routers (a random spanning tree plus
    /// extra links, some one-way, some parallel) and `leaves` hosts, each on one router by
    /// one to three links (some one-way only).
    fn random_topology(
        rng: &mut Rng,
        core: u32,
        extra: u32,
        leaves: u32,
    ) -> (usize, Vec<(u32, u32)>) {
        let mut links = Vec::new();
        let pick = |rng: &mut Rng, n: u32| (rng.next_u64() % n as u64) as u32;
        for v in 1..core {
            let u = pick(rng, v);
            links.push((u, v));
            links.push((v, u));
        }
        for _ in 0..extra {
            let (a, b) = (pick(rng, core), pick(rng, core));
            if a != b {
                links.push((a, b));
                if !rng.next_u64().is_multiple_of(4) {
                    links.push((b, a));
                }
            }
        }
        for h in 0..leaves {
            let x = core + h;
            let r = pick(rng, core);
            match rng.next_u64() % 8 {
                0 => links.push((x, r)), // sends only
                1 => links.push((r, x)), // receives only
                2 => {
                    links.push((x, r));
                    links.push((r, x));
                    links.push((x, r)); // parallel
                }
                _ => {
                    links.push((x, r));
                    links.push((r, x));
                }
            }
        }
        // Shuffle the declaration order: ids must not follow the construction.
        for i in (1..links.len()).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            links.swap(i, j);
        }
        ((core + leaves) as usize, links)
    }

    fn check_against_reference(nodes: usize, links: &[(u32, u32)], overrides: &[(u32, u32, u32)]) {
        let r = Routes::new(nodes, links, overrides);
        let want = reference(nodes, links, overrides);
        for (at, want_at) in want.iter().enumerate() {
            for (dst, &want_hop) in want_at.iter().enumerate() {
                if at == dst {
                    continue;
                }
                let got = r.next(at as u32, dst as u32);
                assert_eq!(got, want_hop, "next hop at {at} towards {dst}");
                if got != NO_ROUTE {
                    assert_eq!(
                        r.hop(at as u32, dst as u32),
                        got,
                        "hop at {at} towards {dst}"
                    );
                }
            }
        }
    }

    #[test]
    fn random_graphs_match_the_reference() {
        for seed in 0..12u64 {
            let mut rng = Rng::from_seed(0x5ca1e + seed);
            let core = 20 + (seed as u32 * 17) % 130;
            let (n, links) = random_topology(&mut rng, core, core / 2, 2 * core);
            let mut overrides = Vec::new();
            for k in 0..3 {
                let (f, _) = links[(k * 7 + seed as usize) % links.len()];
                let via = links.iter().position(|&(a, _)| a == f).unwrap() as u32;
                overrides.push((f, (seed as u32 * 31 + k as u32) % n as u32, via));
            }
            check_against_reference(n, &links, &overrides);
        }
    }

    #[test]
    fn every_next_hop_lies_on_a_shortest_path() {
        let mut rng = Rng::from_seed(19);
        let (n, links) = random_topology(&mut rng, 300, 200, 300);
        let r = Routes::new(n, &links, &[]);
        // Hop distances by plain BFS over successors, per destination (reversed).
        for dst in (0..n).step_by(7) {
            let mut dist = vec![u32::MAX; n];
            dist[dst] = 0;
            let mut q = std::collections::VecDeque::from([dst]);
            while let Some(v) = q.pop_front() {
                for &(f, t) in &links {
                    if t as usize == v && dist[f as usize] == u32::MAX {
                        dist[f as usize] = dist[v] + 1;
                        q.push_back(f as usize);
                    }
                }
            }
            for at in 0..n {
                if at == dst {
                    continue;
                }
                let l = r.next(at as u32, dst as u32);
                if dist[at] == u32::MAX {
                    assert_eq!(l, NO_ROUTE, "{at} cannot reach {dst}");
                } else {
                    let (f, t) = links[l as usize];
                    assert_eq!(f as usize, at, "link {l} leaves {at}");
                    assert_eq!(dist[t as usize] + 1, dist[at], "{at}->{dst} via {l}");
                }
            }
        }
    }

    /// Hand-checked ties. Nodes: 0 = a, 1 = b, 2 = c, 3 = d, 4 = host h on d; a reaches d
    /// by a→b→d or a→c→d. The rule compares the link nearest the destination first.
    #[test]
    fn ties_compare_the_link_nearest_the_destination_first() {
        let links = [(0, 2), (0, 1), (2, 3), (1, 3), (3, 4), (4, 3)];
        let r = Routes::new(5, &links, &[]);
        assert_eq!(r.next(0, 3), 0);
        assert_eq!(r.next(0, 4), 0, "towards the host as towards its router");
        assert_eq!(r.next(3, 4), 4, "the router uses its link to the host");
        assert_eq!(r.next(4, 0), NO_ROUTE, "d has no link back towards a");
        // Now a→b is declared before a→c, but c→d still before b→d: a→c wins (id 1), not
        // the first link leaving a (a→b, id 0).
        let links = [(0, 1), (0, 2), (2, 3), (1, 3)];
        let r = Routes::new(4, &links, &[]);
        assert_eq!(r.next(0, 3), 1);
        assert_eq!(r.next(1, 3), 3);
        assert_eq!(r.next(3, 0), NO_ROUTE);
    }

    /// A dumbbell's hosts are leaves: the table holds the two routers only.
    #[test]
    fn a_dumbbell_keeps_two_core_nodes() {
        // 0 left, 1 right, then s_i = 2 + 2i, d_i = 3 + 2i.
        let pairs = 1000u32;
        let mut links = vec![(0, 1), (1, 0)];
        for i in 0..pairs {
            let (s, d) = (2 + 2 * i, 3 + 2 * i);
            links.extend([(s, 0), (0, s), (1, d), (d, 1)]);
        }
        let r = Routes::new(2 + 2 * pairs as usize, &links, &[]);
        assert_eq!(r.core_nodes(), 2);
        assert!(r.heap_bytes() < 64 * 1024, "{} bytes", r.heap_bytes());
        // s7 -> d7: s7.up (id 2 + 4*7), bottleneck (0), d7.down (id 2 + 4*7 + 2).
        assert_eq!(r.next(16, 17), 30);
        assert_eq!(r.next(0, 17), 0);
        assert_eq!(r.next(1, 17), 32);
        assert_eq!(r.next(17, 16), 33);
        assert_eq!(r.next(1, 16), 1);
        assert_eq!(r.next(0, 16), 31);
    }

    #[test]
    fn later_overrides_win() {
        let links = [(0, 1), (1, 0), (0, 1)];
        let r = Routes::new(2, &links, &[(0, 1, 2), (0, 1, 0), (0, 1, 2)]);
        assert_eq!(r.next(0, 1), 2);
        assert_eq!(r.hop(0, 1), 2);
        assert_eq!(r.next(1, 0), 1);
    }
}
