//! The routing table's size accounting (`routing::core_count`, `Routes::heap_bytes`), which
//! docs/limits.md's memory estimate uses, pinned by mutation testing (docs/testing.md,
//! "Scores (session 7)"). The rule (docs/limits.md, "Topology size"): a node with exactly
//! one neighbour is a leaf; every other node is a *core* node, and only core nodes share
//! the C × C table of 4-byte link ids.

use sojourn_experiment::routing::{core_count, Routes};

/// Links of a dumbbell: routers 0 and 1 (link ids 0, 1), then per pair s_i = 2 + 2i,
/// d_i = 3 + 2i with s_i ↔ 0 and 1 ↔ d_i.
fn dumbbell(pairs: u32) -> (usize, Vec<(u32, u32)>) {
    let mut links = vec![(0, 1), (1, 0)];
    for i in 0..pairs {
        let (s, d) = (2 + 2 * i, 3 + 2 * i);
        links.extend([(s, 0), (0, s), (1, d), (d, 1)]);
    }
    (2 + 2 * pairs as usize, links)
}

#[test]
fn core_nodes_are_the_nodes_without_exactly_one_neighbour() {
    // A dumbbell of 1000 pairs: the two routers.
    let (n, links) = dumbbell(1000);
    assert_eq!(core_count(n, &links), 2);
    // A star: hub 0 and four hosts, each by a link each way: the hub alone.
    let star: Vec<(u32, u32)> = (1..5).flat_map(|h| [(0, h), (h, 0)]).collect();
    assert_eq!(core_count(5, &star), 1);
    // A ring of five routers: every node has two neighbours.
    let ring: Vec<(u32, u32)> = (0..5).map(|i| (i, (i + 1) % 5)).collect();
    assert_eq!(core_count(5, &ring), 5);
    // Two nodes that only see each other are both kept (neither hangs off a router), and a
    // node without links is kept too.
    assert_eq!(core_count(3, &[(0, 1), (1, 0)]), 3);
    // The table Routes builds has the same side.
    assert_eq!(Routes::new(5, &star, &[]).core_nodes(), 1);
}

/// Bytes held: per node its route entry (three u32 and a flag: 16 B) and its destination
/// entry (two u32: 8 B), 4 B per core × core cell, 12 B per explicit route (three u32). The
/// 1000-pair dumbbell: 2002 × 24 + 2 × 2 × 4 = 48 064 B; with one explicit route 48 076 B.
#[test]
fn heap_bytes_counts_24_bytes_per_node_4_per_table_cell_12_per_route() {
    let (n, links) = dumbbell(1000);
    assert_eq!(Routes::new(n, &links, &[]).heap_bytes(), 48_064);
    assert_eq!(Routes::new(n, &links, &[(2, 3, 2)]).heap_bytes(), 48_076);
    // Two explicit routes for the same (node, destination): the last one is kept, once.
    assert_eq!(
        Routes::new(n, &links, &[(2, 3, 2), (2, 3, 2)]).heap_bytes(),
        48_076
    );
    // A ring of five routers: 5 × 24 + 25 × 4 = 220 B.
    let ring: Vec<(u32, u32)> = (0..5).map(|i| (i, (i + 1) % 5)).collect();
    assert_eq!(Routes::new(5, &ring, &[]).heap_bytes(), 220);
}
