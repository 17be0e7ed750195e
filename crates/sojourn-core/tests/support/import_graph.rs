//! Reads a crate's sources into its import map and finds the circles in it; shared by the
//! import-structure tests of sojourn-core and sojourn-sim (each includes this file with
//! `#[path]`). Every `crate::a::b` and `super::a` path outside `#[cfg(test)]` code is an
//! arrow from the module that writes it to the module it names, and so is a path that
//! starts with one of the module's own child modules (`fifo::Fifo` in `qdisc/mod.rs`, a
//! `pub use spec::X` re-export): a parent that names its children depends on them.

#![allow(dead_code)] // each including test uses its own part

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub type Graph = BTreeMap<String, BTreeSet<String>>;

pub fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
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
pub fn module_of(src: &Path, file: &Path) -> String {
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
pub fn path_after(text: &str) -> Vec<String> {
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
pub fn arrows(module: &str, text: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
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
    // Paths through the module's own children (`fifo::Fifo`, `pub use spec::X`).
    let children: Vec<&String> = known
        .iter()
        .filter(|k| parent(k) == module && *k != module)
        .collect();
    for child in children {
        let name = child.rsplit("::").next().unwrap_or(child);
        let pat = format!("{name}::");
        for (i, _) in code.match_indices(&pat) {
            let before = code[..i].chars().last();
            if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                out.insert(child.clone());
                break;
            }
        }
    }
    out
}

pub fn parent(module: &str) -> String {
    module
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_string())
}

pub fn join(base: &str, rest: &str) -> String {
    if base.is_empty() {
        rest.to_string()
    } else {
        format!("{base}::{rest}")
    }
}

pub fn graph_of(src: &Path) -> Graph {
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
pub fn cycles(g: &Graph) -> Vec<BTreeSet<String>> {
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
