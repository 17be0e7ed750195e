//! sojourn-core's import structure and its registry of disciplines (issue 41, item 1;
//! docs/adding-a-qdisc.md): a discipline is declared in one place, beside its code.
//!
//! - The shared vocabulary (`qdisc::vocab`) is a leaf: it imports no other qdisc module.
//! - A discipline imports the vocabulary, never the spec tree (`qdisc` itself, where the
//!   `disciplines!` list generates `QdiscSpec`, `AnyQdisc` and `KINDS`; `qdisc::spec`;
//!   `qdisc::registry`), unless it is classful and holds child specs (age, prio, tbf, htb, drr).
//! - So the largest import circle is that classful tree: `qdisc` and its classful
//!   disciplines, 6 files today.
//! - Every discipline a file declares (`impl Discipline for …`, read from the sources) is
//!   known to the registry (an experiment file can name it) and to the tc import (a tc line
//!   naming it reaches its parser, or is refused as no Linux qdisc when it declares none).

#[path = "support/import_graph.rs"]
mod import_graph;

use import_graph::{cycles, graph_of};
use sojourn_core::params::Value;
use sojourn_core::qdisc::{BuildCtx, QdiscSpec, KINDS};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The modules of the `disciplines!` list in qdisc/mod.rs, and those marked `+ Classful`.
fn listed_modules() -> (BTreeSet<String>, BTreeSet<String>) {
    let text = std::fs::read_to_string(src().join("qdisc/mod.rs")).unwrap();
    let start = text.find("disciplines! {").expect("the disciplines! list");
    let body = &text[start..start + text[start..].find("\n}").unwrap()];
    let (mut all, mut classful) = (BTreeSet::new(), BTreeSet::new());
    for line in body.lines().skip(1) {
        let Some((module, entries)) = line.trim().split_once("::{") else {
            continue;
        };
        all.insert(format!("qdisc::{module}"));
        if entries.contains("+ Classful") {
            classful.insert(format!("qdisc::{module}"));
        }
    }
    (all, classful)
}

#[test]
fn the_largest_import_circle_is_the_classful_tree() {
    let g = graph_of(&src());
    let (listed, classful) = listed_modules();
    // The list was read: it holds the FIFOs and the classful disciplines at least.
    for m in ["qdisc::fifo", "qdisc::age", "qdisc::prio", "qdisc::tbf"] {
        assert!(listed.contains(m), "{m} not in {listed:?}");
    }
    let tree: BTreeSet<String> = [
        "qdisc",
        "qdisc::age",
        "qdisc::prio",
        "qdisc::tbf",
        "qdisc::htb",
        "qdisc::drr",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let derived: BTreeSet<String> = classful
        .iter()
        .cloned()
        .chain(["qdisc".to_string()])
        .collect();
    assert_eq!(
        derived, tree,
        "the classful tree changed: a new classful discipline joins it (update this test)"
    );
    let circles = cycles(&g);
    for c in &circles {
        eprintln!("import circle: {c:?}");
        if c.iter().any(|m| m.starts_with("qdisc")) {
            assert!(
                c.is_subset(&tree),
                "a circle outside the classful tree: {c:?}"
            );
        }
    }
    let largest = circles.iter().map(|c| c.len()).max().unwrap_or(0);
    assert!(largest <= 6, "largest import circle has {largest} files");
    assert!(
        circles.contains(&tree),
        "the classful tree is a circle: {circles:?}"
    );
}

#[test]
fn disciplines_import_the_vocabulary_not_the_spec_tree() {
    let g = graph_of(&src());
    let (listed, classful) = listed_modules();
    let vocab = &g["qdisc::vocab"];
    assert!(
        vocab.iter().all(|m| !m.starts_with("qdisc")),
        "qdisc::vocab must be a leaf of the qdisc tree: {vocab:?}"
    );
    let tree = ["qdisc", "qdisc::spec", "qdisc::registry"];
    for m in listed.difference(&classful) {
        let bad: Vec<&String> = g[m].iter().filter(|t| tree.contains(&t.as_str())).collect();
        assert!(bad.is_empty(), "{m} imports the spec tree: {bad:?}");
    }
    // The registry's machinery names no discipline.
    let reg = &g["qdisc::registry"];
    assert!(reg.iter().all(|m| !listed.contains(m)), "{reg:?}");
}

/// `(kind, reads tc)` for every `impl Discipline for …` in the qdisc sources.
fn declared_in_sources() -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(src().join("qdisc")).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for block in text.split("impl Discipline for ").skip(1) {
            let block = &block[..block.find("\n}\n").expect("the impl's end")];
            let field = |name: &str| -> Option<&str> {
                let rest = &block[block.find(name)?..];
                Some(rest[rest.find('=')? + 1..rest.find(';')?].trim())
            };
            let kind = field("const KIND").expect("const KIND");
            // TC_KEYS defaults to None (no Linux qdisc).
            let tc = field("const TC_KEYS").is_some_and(|v| v != "None");
            out.push((kind.trim_matches('"').to_string(), tc));
        }
    }
    out.sort();
    out
}

#[test]
fn the_registry_and_the_tc_import_know_every_declared_discipline() {
    let declared = declared_in_sources();
    let names: BTreeSet<&str> = declared.iter().map(|(k, _)| k.as_str()).collect();
    // The 20 disciplines `sojourn qdiscs` lists today (docs/disciplines/), and whether
    // Linux has the qdisc (docs/deploy.md); a new one is declared by its file and its line
    // alone.
    let known: &[(&str, bool)] = &[
        ("pfifo", true),
        ("bfifo", true),
        ("pfifo_head_drop", true),
        ("codel", true),
        ("fq_codel", true),
        ("fq", true),
        ("cocoa", false),
        ("cake", true),
        ("pie", true),
        ("fq_pie", true),
        ("dualpi2", true),
        ("sfq", true),
        ("red", true),
        ("prio", true),
        ("pfifo_fast", true),
        ("tbf", true),
        ("lstf_codel", false),
        ("age", false),
        ("las", false),
        ("srpt", false),
        // Not a discipline of the core's own: a class the Python front plugs in
        // (qdisc/external.rs, docs/python-disciplines.md).
        ("python", false),
    ];
    for (kind, linux) in known {
        let found = declared.iter().find(|(k, _)| k == kind);
        assert_eq!(found.map(|(_, tc)| tc), Some(linux), "{kind}");
    }
    assert_eq!(
        declared.len(),
        names.len(),
        "a kind declared twice: {declared:?}"
    );
    let registered: BTreeSet<&str> = KINDS.iter().map(|k| k.name).collect();
    assert_eq!(
        registered, names,
        "declared but not in the disciplines! list"
    );

    let ctx = BuildCtx::default();
    // Kinds whose parser requires keys (no defaults, as tc has none).
    let required = ["red", "tbf", "age"];
    // An external discipline needs the front that resolves it, absent here.
    let asks_for_keys = |kind: &str, msg: &str| {
        (required.contains(&kind) && msg.contains("needs"))
            || (kind == "python" && msg.contains("Python front"))
    };
    for (kind, reads_tc) in &declared {
        // An experiment file can name it (red, tbf and age then ask for their required
        // keys, in their own parser).
        match QdiscSpec::parse(&Value::Str(kind.clone()), "q", &ctx) {
            Ok(q) => assert_eq!(q.kind(), kind),
            Err(e) => assert!(asks_for_keys(kind, &e.msg), "{kind}: {e}"),
        }
        // A tc line naming it reaches its parser, or is refused as no Linux qdisc.
        let tc = QdiscSpec::from_tc_args(kind, &[], &ctx);
        match tc {
            Ok(q) => assert_eq!(q.kind(), kind),
            Err(e) if *reads_tc => assert!(asks_for_keys(kind, &e.msg), "{kind}: {e}"),
            Err(e) => assert_eq!(
                e.msg,
                format!("{kind} is not a Linux qdisc sojourn reads back")
            ),
        }
    }
}
