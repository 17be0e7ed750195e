//! Embeds a fingerprint of the engine's sources in the extension module
//! (`_engine.source_hash()`), so the Python tests can refuse to test an engine built from
//! other sources than the tree they run in (tests/python/conftest.py): SHA-256 over every
//! `crates/**/*.rs` and `crates/**/Cargo.toml` plus the workspace `Cargo.toml` and
//! `Cargo.lock`, in path order, each as `path NUL content NUL`. `sojourn._fingerprint`
//! computes the same hash in Python.
//!
//! Also records the profile the engine was optimised with (`_engine.pgo_profile()`):
//! the first 16 hex digits of the SHA-256 of the file named by `-Cprofile-use=` in the
//! build's RUSTFLAGS (pgo/sojourn_build.py adds it, docs/pgo.md), or "" without one.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // Build outputs and hidden directories are not sources.
        if name.starts_with('.') || name == "target" {
            continue;
        }
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if name.ends_with(".rs") || name == "Cargo.toml" {
            out.push(p);
        }
    }
}

/// SHA-256 prefix of the `-Cprofile-use` file of this build, or "".
fn pgo_profile() -> String {
    // Cargo passes the build's RUSTFLAGS to build scripts, separated by 0x1f.
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let Some(path) = flags
        .split('\x1f')
        .find_map(|f| f.strip_prefix("-Cprofile-use="))
    else {
        return String::new();
    };
    println!("cargo:rerun-if-changed={path}");
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("-Cprofile-use={path}: {e}"));
    Sha256::digest(&bytes)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn main() {
    println!("cargo:rustc-env=SOJOURN_PGO_PROFILE={}", pgo_profile());
    println!("cargo:rerun-if-env-changed=RUSTFLAGS");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest
        .join("../..")
        .canonicalize()
        .expect("the workspace root");
    let mut files = Vec::new();
    collect(&root.join("crates"), &mut files);
    for f in ["Cargo.toml", "Cargo.lock"] {
        let p = root.join(f);
        if p.is_file() {
            files.push(p);
        }
    }
    let mut rel: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|p| {
            let r = p.strip_prefix(&root).expect("under the root");
            let r = r
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            (r, p)
        })
        .collect();
    rel.sort();
    let mut h = Sha256::new();
    for (r, p) in &rel {
        h.update(r.as_bytes());
        h.update([0u8]);
        h.update(std::fs::read(p).expect("readable source"));
        h.update([0u8]);
    }
    let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=SOJOURN_SOURCE_HASH={digest}");
    println!("cargo:rerun-if-changed={}", root.join("crates").display());
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
}
