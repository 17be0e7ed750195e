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
    let mut files = Vec::new();
    for dir in ["src", "tests", "examples"] {
        rs_files(&root.join(dir), &mut files);
    }
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
