//! sojourn-emu stands beside the simulator, not on it (issue 41, docs/architecture.md): the
//! two engines share the core, the experiment model and the recording crate, and neither
//! reaches into the other. This test reads the crate's manifest and every Rust source
//! (library, tests, examples).

use std::path::{Path, PathBuf};

/// The simulator's crate name, in its manifest spelling and as a Rust path. Built from
/// parts so that this file does not contain the names it looks for.
fn names() -> [String; 2] {
    [["sojourn", "-sim"].concat(), ["sojourn", "_sim"].concat()]
}

/// Every `.rs` file below `roots`, depth first.
fn rust_sources(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut todo = roots.to_vec();
    let mut found = Vec::new();
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            match p.extension() {
                _ if p.is_dir() => todo.push(p),
                Some(x) if x == "rs" => found.push(p),
                _ => {}
            }
        }
    }
    found
}

#[test]
fn the_manifest_does_not_name_the_simulator() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let [crate_name, _] = names();
    assert!(
        !manifest.contains(&crate_name),
        "crates/sojourn-emu/Cargo.toml names {crate_name}: the emulator must not depend on \
         the simulator (share the piece through sojourn-core, sojourn-experiment or \
         sojourn-record)"
    );
}

#[test]
fn no_source_reaches_into_the_simulator() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = rust_sources(&["src", "tests", "examples"].map(|d| root.join(d)));
    // The library, its tests and examples: a vacuous pass (a moved directory) must fail.
    assert!(files.len() >= 12, "found only {} sources", files.len());
    let [_, path] = names();
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| std::fs::read_to_string(f).unwrap().contains(&path))
        .map(|f| f.strip_prefix(root).unwrap().display().to_string())
        .collect();
    assert!(offenders.is_empty(), "{path} named in {offenders:?}");
}
