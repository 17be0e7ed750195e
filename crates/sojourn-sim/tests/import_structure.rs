//! The import structure across the model/engine boundary (issue 13, docs/architecture.md).
//!
//! The experiment model lives in the crate `sojourn-experiment`, which must not depend on
//! the simulator; inside sojourn-sim the modules that present the model to this crate's
//! users ([`MODEL_MODULES`]) must not import engine modules, so no import circle can run
//! through the boundary. This test reads the sources with the checker it shares with
//! sojourn-core (crates/sojourn-core/tests/support/import_graph.rs): every `crate::a::b`
//! and `super::a` path outside `#[cfg(test)]` code is an arrow from the module that writes
//! it to the module it names.

#[path = "../../sojourn-core/tests/support/import_graph.rs"]
mod import_graph;

use import_graph::{arrows, cycles, graph_of, rs_files, Graph};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// sojourn-sim modules that are the experiment model's face in this crate (re-exports of
/// sojourn-experiment, nothing of the engine).
const MODEL_MODULES: &[&str] = &["config"];

/// Problems across the boundary: model modules importing engine modules, and circles
/// holding modules of both sides.
fn boundary_violations(g: &Graph, model: &[&str]) -> Vec<String> {
    let is_model = |m: &str| {
        model
            .iter()
            .any(|x| m == *x || m.starts_with(&format!("{x}::")))
    };
    let mut bad = Vec::new();
    for (m, to) in g {
        if is_model(m) {
            for t in to.iter().filter(|t| !is_model(t)) {
                bad.push(format!("model module {m} imports engine module {t}"));
            }
        }
    }
    for c in cycles(g) {
        if c.iter().any(|m| is_model(m)) && c.iter().any(|m| !is_model(m)) {
            bad.push(format!("import circle across the boundary: {c:?}"));
        }
    }
    bad
}

fn crate_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

#[test]
fn no_import_circle_across_the_model_engine_boundary() {
    let g = graph_of(&crate_dir("sojourn-sim").join("src"));
    for m in MODEL_MODULES {
        assert!(g.contains_key(*m), "model module {m} not found");
    }
    let bad = boundary_violations(&g, MODEL_MODULES);
    assert!(bad.is_empty(), "{bad:#?}");
    // Inside the engine (issue 41): no circle of more than five modules. Today there is
    // none: the engine applies its generators' steps (workload.rs) instead of applications
    // calling back into it, the endpoint enum stands beside the engine (dispatch.rs), and
    // the congestion controls share a leaf vocabulary (tcp/cc/vocab.rs).
    for c in cycles(&g) {
        eprintln!("engine-internal import circle: {c:?}");
        assert!(
            c.len() <= 5,
            "an import circle of {} modules in sojourn-sim: {c:?}",
            c.len()
        );
    }
}

#[test]
fn the_experiment_model_does_not_depend_on_an_engine() {
    let dir = crate_dir("sojourn-experiment");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    for engine in ["sojourn-sim", "sojourn-emu", "sojourn-py"] {
        assert!(
            !manifest.contains(engine),
            "sojourn-experiment depends on {engine}"
        );
    }
    let mut files = Vec::new();
    rs_files(&dir.join("src"), &mut files);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for engine in ["sojourn_sim", "sojourn_emu"] {
            assert!(!text.contains(engine), "{} names {engine}", f.display());
        }
    }
    // And the model has no circles of its own.
    let g = graph_of(&dir.join("src"));
    let model_cycles = cycles(&g);
    assert!(model_cycles.is_empty(), "{model_cycles:?}");
}

/// The checker itself finds what it is meant to find.
#[test]
fn the_checker_sees_a_circle_through_a_model_module() {
    let known: BTreeSet<String> = ["config", "sim", "tcp", "tcp::apps"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut g = Graph::new();
    g.insert(
        "config".into(),
        arrows("config", "use crate::tcp::TcpConfig;", &known),
    );
    g.insert(
        "tcp::apps".into(),
        arrows("tcp::apps", "use super::{open, IntervalDist};\nuse crate::config::Experiment;\n#[cfg(test)]\nuse crate::sim::Sim;", &known),
    );
    g.insert(
        "tcp".into(),
        arrows(
            "tcp",
            "pub mod apps; use crate::sim::Sim; fn f() { crate::tcp::apps::x() }",
            &known,
        ),
    );
    g.insert(
        "sim".into(),
        arrows(
            "sim",
            "use crate::config::{routing_tables, Experiment};",
            &known,
        ),
    );
    assert_eq!(
        g["tcp::apps"],
        BTreeSet::from(["tcp".into(), "config".into()]),
        "test code ignored"
    );
    assert_eq!(g["tcp"], BTreeSet::from(["sim".into(), "tcp::apps".into()]));
    let bad = boundary_violations(&g, &["config"]);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad[0].contains("config imports engine module tcp"));
    assert!(bad[1].contains("circle"));
}
