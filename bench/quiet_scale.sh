#!/usr/bin/env bash
# Issue 19's key speed numbers in one go (≈ 6–10 min on an idle 2-core machine); run from the
# repository root. Prints, in order:
#   1. seed 000's 10 Gb/s run, 60 s simulated (CPU s, link packets per CPU s) and the full
#      4-hour run it projects to (×240) — docs/repro/age-based.md, "Performance";
#   2. `sojourn-bench --short cbr tcp` — the shortened runs of bench/README.md's "Latest
#      results" (its first two rows are the full-length `sojourn-bench cbr tcp`);
#   3. the ns-3 side by side at full length, every row — bench/README.md, the table under
#      "Latest results" (the one it replaces moves to bench/HISTORY.md)
#      (skipped with a note when ns-3's Python bindings cannot be imported).
# ns-3 comes from the `ns3` wheel (bench/README.md, "Side by side with ns-3");
# NS3_PYTHONPATH points at a site-packages holding it if it is not in the current
# interpreter's.
# Env: PYTHON (default python3; must import this checkout's `sojourn`), BENCH (a built
# `sojourn-bench`; default: cargo builds target/release/sojourn-bench), OUT (default
# bench/quiet-<UTC time>) for the outputs, NS3_ARGS (extra ns3_compare.py arguments, e.g.
# "--reps 1" or "--rows A,B").
set -euo pipefail
PYTHON=${PYTHON:-python3}
OUT=${OUT:-bench/quiet-$(date -u +%Y%m%dT%H%M)}
mkdir -p "$OUT"
if [ -z "${BENCH:-}" ]; then
    cargo build --release -q -p sojourn-bench
fi
BIN=${BENCH:-target/release/sojourn-bench}
$PYTHON -c "import sojourn" || { echo "PYTHON=$PYTHON cannot import sojourn (maturin develop --release in a venv)"; exit 2; }
echo "== 1. seed 000, age-10g.toml, 60 s simulated (full run = 240 x this)"
$BIN file experiments/repro/age-based/age-10g.toml --set duration=60s --set warmup=0s | tee "$OUT/age-10g-60s.txt"
awk '/run .* CPU s/ { for (i = 1; i <= NF; i++) if ($i == "CPU" && $(i-2) == "run") printf "  projected full 4-h run: %.1f CPU min\n", $(i-1) * 240 / 60 }' "$OUT/age-10g-60s.txt"
echo "== 2. sojourn-bench --short cbr tcp"
$BIN --short cbr tcp | tee "$OUT/bench-short.txt"
echo "== 3. ns-3 side by side, full length"
if PYTHONPATH="${NS3_PYTHONPATH:-}${NS3_PYTHONPATH:+:}${PYTHONPATH:-}" $PYTHON -c "from ns import ns" >/dev/null 2>&1; then
    PYTHONPATH="${NS3_PYTHONPATH:-}${NS3_PYTHONPATH:+:}${PYTHONPATH:-}" $PYTHON bench/ns3_compare.py ${NS3_ARGS:-} \
        --json "$OUT/ns3.json" --markdown "$OUT/ns3.md"
else
    echo "  ns-3 bindings not importable (pip install ns3, or NS3_PYTHONPATH=...): skipped"
fi
echo "outputs in $OUT"
