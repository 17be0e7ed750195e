//! The import structure across the model/engine boundary (issue 13, docs/architecture.md).
//!
//! The experiment model lives in the crate `sojourn-experiment`, which must not depend on
//! the simulator; inside sojourn-sim the modules that present the model to this crate's
//! users ([`MODEL_MODULES`]) must not import engine modules, so no import circle can run
//! through the boundary. This test reads the sources: every `crate::a::b` and
//! `super::a` path outside `#[cfg(test)]` code is an arrow from the module that writes it
//! to the module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// sojourn-sim modules that are the experiment model's face in this crate (re-exports of
/// sojourn-experiment, nothing of the engine).
const MODEL_MODULES: &[&str] = &["config"];

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/tcp/apps.rs` → `tcp::apps`, `src/tcp/mod.rs` → `tcp`, `src/lib.rs` → ``.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts.join("::")
}

/// Identifier paths starting at `at` in `text` (`a::b::c` → ["a", "b", "c"]).
fn path_after(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let id: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if id.is_empty() {
            break;
        }
        rest = &rest[id.len()..];
        out.push(id);
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    out
}

/// Arrows from `module` (source `text`) to the modules of `known` it names.
fn arrows(module: &str, text: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    // Test code may reach anywhere and comments are not imports: neither is part of the
    // import structure.
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or("")
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let code = code.as_str();
    let mut out = BTreeSet::new();
    for (root, base) in [("crate::", String::new()), ("super::", parent(module))] {
        for (i, _) in code.match_indices(root) {
            let before = code[..i].chars().last();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue; // `foo_crate::` or a longer path such as `a::super::`
            }
            let mut segs = path_after(&code[i + root.len()..]);
            // `use super::{a, b}` / `use crate::{…}`: every item of the group.
            let group = code[i + root.len()..].starts_with('{');
            let names: Vec<Vec<String>> = if group {
                let body = &code[i + root.len() + 1..];
                let body = &body[..body.find('}').unwrap_or(0)];
                body.split(',').map(|s| path_after(s.trim())).collect()
            } else {
                vec![std::mem::take(&mut segs)]
            };
            for segs in names {
                // The longest prefix that is a module.
                let mut target = None;
                for n in 1..=segs.len() {
                    let cand = join(&base, &segs[..n].join("::"));
                    if known.contains(&cand) {
                        target = Some(cand);
                    }
                }
                let t = target.unwrap_or_else(|| base.clone());
                if t != module && !t.is_empty() {
                    out.insert(t);
                }
            }
        }
    }
    out
}

fn parent(module: &str) -> String {
    module
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_string())
}

fn join(base: &str, rest: &str) -> String {
    if base.is_empty() {
        rest.to_string()
    } else {
        format!("{base}::{rest}")
    }
}

fn graph_of(src: &Path) -> Graph {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    let known: BTreeSet<String> = files.iter().map(|f| module_of(src, f)).collect();
    files
        .iter()
        .map(|f| {
            let m = module_of(src, f);
            let text = std::fs::read_to_string(f).unwrap();
            let a = arrows(&m, &text, &known);
            (m, a)
        })
        .collect()
}

/// Strongly connected components with more than one module (Tarjan's algorithm is
/// overkill for ~40 modules: reachability both ways).
fn cycles(g: &Graph) -> Vec<BTreeSet<String>> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(m) = stack.pop() {
            for n in g.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    stack.push(n.clone());
                }
            }
        }
        seen
    };
    let mut comps: Vec<BTreeSet<String>> = Vec::new();
    let all: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|m| (m, reach(m))).collect();
    for m in g.keys() {
        if comps.iter().any(|c| c.contains(m)) {
            continue;
        }
        let comp: BTreeSet<String> = all[m]
            .iter()
            .filter(|n| all.get(n).is_some_and(|r| r.contains(m)))
            .cloned()
            .chain(std::iter::once(m.clone()))
            .collect();
        if comp.len() > 1 {
            comps.push(comp);
        }
    }
    comps
}

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
    // The engine's own circles (the simulator calls its endpoints and applications, which
    // call back into it) are reported, not forbidden.
    for c in cycles(&g) {
        eprintln!("engine-internal import circle: {c:?}");
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
