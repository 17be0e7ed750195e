//! Fuzzing of the parsers that read user files: experiment files (TOML → validated
//! `Experiment`), Mahimahi traces, size distributions and CDF files. A mutation fuzzer on
//! stable Rust (no cargo-fuzz/nightly needed in CI): it starts from the committed corpus in
//! `fuzz-corpus/`, applies random byte- and token-level mutations, and requires every input
//! to give `Ok` or an `Err` — never a panic, and never more than 20 s (a hang) for one input.
//! Deterministic for a given seed.
//!
//! CI runs each target for `SOJOURN_FUZZ_SECONDS` (default 4 s). Longer runs:
//! `SOJOURN_FUZZ_SECONDS=600 SOJOURN_FUZZ_SEED=$RANDOM cargo test --release -p sojourn-experiment --test fuzz -- --nocapture`
//! (docs/limits.md). A failing input is written to `target/fuzz-failures/`; add it to the
//! corpus with the fix.

use sojourn_core::params::Params;
use sojourn_core::rng::Rng;
use sojourn_experiment::dist::{parse_cdf, SizeDist};
use sojourn_experiment::from_toml;
use sojourn_experiment::link::parse_trace;
use sojourn_experiment::toml_text::parse_toml;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn corpus(kind: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz-corpus")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let v: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(!v.is_empty(), "empty corpus {}", dir.display());
    v
}

/// Tokens that reach the interesting corners of the grammars.
const TOKENS: &[&str] = &[
    "[[",
    "]]",
    "[",
    "]",
    "{",
    "}",
    "=",
    "\"",
    "'",
    ",",
    ".",
    "\n",
    "#",
    "nan",
    "inf",
    "-inf",
    "1e999",
    "-1",
    "0",
    "18446744073709551616",
    "9223372036854775807",
    "1.5",
    "\"10Mbps\"",
    "\"0s\"",
    "\"1000000h\"",
    "kind",
    "dist",
    "count = 10000000",
    "pairs = 100000",
    "[[workload]]",
    "[topology]",
    "qdisc",
    "\u{0}",
    "\u{feff}",
    "é",
    "1e-320",
    "_",
];

fn pick(rng: &mut Rng, n: usize) -> usize {
    rng.below(n as u64) as usize
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seeds[pick(rng, seeds.len())].clone();
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        let len = v.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = pick(rng, len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = pick(rng, len);
                let n = (1 + pick(rng, 16)).min(len - i);
                v.drain(i..i + n);
            }
            2 => {
                let i = pick(rng, len + 1);
                let t = TOKENS[pick(rng, TOKENS.len())].as_bytes();
                v.splice(i..i, t.iter().copied());
            }
            3 if len > 0 => {
                // duplicate a chunk (repeated keys, tables, lines)
                let i = pick(rng, len);
                let n = (1 + pick(rng, 64)).min(len - i);
                let chunk: Vec<u8> = v[i..i + n].to_vec();
                let j = pick(rng, v.len() + 1);
                v.splice(j..j, chunk);
            }
            4 => {
                // splice in part of another corpus entry
                let o = &seeds[pick(rng, seeds.len())];
                if !o.is_empty() {
                    let i = pick(rng, o.len());
                    let n = (1 + pick(rng, 128)).min(o.len() - i);
                    let j = pick(rng, v.len() + 1);
                    v.splice(j..j, o[i..i + n].iter().copied());
                }
            }
            5 if len > 0 => {
                let i = pick(rng, len);
                v[i] = b"0123456789.-e"[pick(rng, 13)];
            }
            _ => {
                // deep nesting
                let i = pick(rng, len + 1);
                let depth = 1 + pick(rng, 200);
                let open = if rng.below(2) == 0 { b'[' } else { b'{' };
                v.splice(i..i, std::iter::repeat_n(open, depth));
            }
        }
    }
    v
}

/// Runs `target` on the corpus, then on mutated inputs for the time budget; panics (with
/// the input saved) if the target panics or takes more than 20 s on one input.
fn fuzz(name: &str, kind: &str, target: impl Fn(&str)) {
    let secs: f64 = std::env::var("SOJOURN_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4.0);
    let seed: u64 = std::env::var("SOJOURN_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(17);
    let seeds = corpus(kind);
    let mut rng = Rng::stream(seed, name, 0);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let per_input = Duration::from_secs(20); // a hang detector, not a speed test
    let mut n = 0u64;
    let mut inputs: Vec<Vec<u8>> = seeds.clone();
    loop {
        let input = inputs.pop().unwrap_or_else(|| mutate(&mut rng, &seeds));
        let text = String::from_utf8_lossy(&input).into_owned();
        let t0 = Instant::now();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target(&text)));
        let slow = t0.elapsed() > per_input;
        if r.is_err() || slow {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-failures");
            let _ = std::fs::create_dir_all(&dir);
            let f = dir.join(format!("{name}-{seed}-{n}"));
            let _ = std::fs::write(&f, &input);
            panic!(
                "{name}: input {n} {} (saved to {})",
                if slow {
                    "took more than 20 s"
                } else {
                    "panicked"
                },
                f.display()
            );
        }
        n += 1;
        if Instant::now() >= end && inputs.is_empty() {
            break;
        }
    }
    eprintln!("fuzz {name}: {n} inputs, seed {seed}, no panic");
    assert!(n > 10, "too few inputs in the time budget");
}

#[test]
fn fuzz_experiment_parser() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/examples");
    fuzz("experiment", "experiment", |text| {
        let _ = from_toml(text, &base);
    });
}

#[test]
fn fuzz_trace_parser() {
    fuzz("trace", "trace", |text| {
        let _ = parse_trace(text, "fuzz.trace");
    });
}

#[test]
fn fuzz_size_distribution_parser() {
    fuzz("dist", "dist", |text| {
        if let Ok(t) = parse_toml(text) {
            let mut p = Params::new("workload[0]", &t);
            if let Ok(Some(d)) = SizeDist::parse(&mut p, "size", Path::new(".")) {
                let _ = d.mean();
            }
        }
    });
}

#[test]
fn fuzz_cdf_parser() {
    fuzz("cdf", "cdf", |text| {
        let _ = parse_cdf(text, "fuzz.cdf");
    });
}
