"""Seed 000's structure at 100 Mbit/s from the three engines side by side (issue #14,
docs/deploy.md): the simulator, the live emulator with sojourn's pfifo_fast in its forwarder,
and the kernel (`emulate --kernel`: the kernel's htb + pfifo_fast and the nft ct-bytes map on
the client's device). Plain pfifo against the seed's age-based pfifo_fast (threshold 633120 B,
the 1 Gbit/s threshold scaled with the sizes); mean FCT, P50/P99, flows <= T and > T, and the
gain of the age-based variant, as a markdown table.

    sudo python bench/deploy/three_engines.py [--duration 60s] [--warmup 10s] [--out DIR] [--doc docs/deploy.md]
    python bench/deploy/three_engines.py --sizes        # (re)writes experiments/deploy/sizes-100m.cdf

The experiment is experiments/deploy/seed000-100m.toml. Live runs need root and take
`duration` of wall time each (4 of them); numbers are reports, not assertions. With `--doc`
the table replaces the block between the THREE-ENGINES markers of that page.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

import sojourn

ROOT = Path(__file__).resolve().parents[2]
EXP = ROOT / "experiments" / "deploy" / "seed000-100m.toml"
T = 633120  # bytes: the seed's 1 Gbit/s threshold (Table II, 6331208 B) / 10, as the sizes
AGE = {"topology.links[0].qdisc": "pfifo_fast",
       "classifier": [{"at": "client", "hook": "output",
                       "map": [{"upto": T, "priority": "1:6"}, {"priority": "1:0"}]}]}
CONFIGS = {"pfifo": {}, "age-pfifo_fast": AGE}
ENGINES = ["simulate", "emulate", "kernel"]
BEGIN, END = "<!-- THREE-ENGINES:BEGIN (bench/deploy/three_engines.py) -->", "<!-- THREE-ENGINES:END -->"


def write_sizes() -> Path:
    """sizes-100m.cdf: the seed's 1g step CDF with every size divided by 10 (rounded)."""
    src = ROOT / "experiments" / "repro" / "age-based" / "sizes-1g.cdf"
    out = ["# seed 000's 1g flow-size law (sizes-1g.cdf: discrete bounded Pareto alpha 1.2, 300 KiB - 1 GiB,",
           "# 249 atoms) with every size divided by 10 and rounded: the seed's set-up scaled to 100 Mbit/s",
           "# (same load with the same 80 actors and 1 s think time, same threshold relative to the sizes:",
           "# 6331208 B / 10 = 633120 B). Derived from sizes-1g.cdf by bench/deploy/three_engines.py --sizes.",
           "# Step CDF as sizes-1g.cdf (each atom twice). 249 atoms."]
    for line in src.read_text().splitlines():
        if line and not line.startswith("#"):
            s, p = line.split()
            out.append(f"{round(int(s) / 10)} {p}")
    dst = EXP.parent / "sizes-100m.cdf"
    dst.write_text("\n".join(out) + "\n")
    return dst


def run(engine: str, overrides: dict, duration: str, warmup: str):
    ov = dict(overrides, warmup=warmup)
    if engine == "simulate":
        return sojourn.run(EXP, duration=duration, overrides=ov)
    return sojourn.emulate(EXP, duration=duration, overrides=ov, kernel=(engine == "kernel"))


def stats(res, warmup_s: float) -> dict:
    f = res.flows
    f = f[f["completed"] & (f["size_bytes"] > 0) & (f["start_s"] >= warmup_s)]
    fct = f["fct_s"].to_numpy()
    small = f[f["size_bytes"] <= T]["fct_s"].to_numpy()
    large = f[f["size_bytes"] > T]["fct_s"].to_numpy()

    def mean(a):
        return float(np.mean(a)) if len(a) else float("nan")

    return {"flows": int(len(fct)), "mean_ms": mean(fct) * 1e3,
            "p50_ms": float(np.quantile(fct, 0.5)) * 1e3 if len(fct) else float("nan"),
            "p99_ms": float(np.quantile(fct, 0.99)) * 1e3 if len(fct) else float("nan"),
            "small_flows": int(len(small)), "small_mean_ms": mean(small) * 1e3,
            "large_flows": int(len(large)), "large_mean_ms": mean(large) * 1e3,
            "utilisation": res.summary["links"].get("nic", {}).get("utilisation")}


def table(rows: dict, duration: str, warmup: str) -> str:
    head = ("| engine | qdisc | flows completed | mean FCT (ms) | P50 (ms) | P99 (ms) | flows ≤ T | mean FCT ≤ T (ms) "
            "| flows > T | mean FCT > T (ms) | utilisation |")
    lines = [head, "|" + "---|" * 11]
    for e in ENGINES:
        for c in CONFIGS:
            r = rows.get(f"{e}/{c}")
            if r is None:
                continue
            u = "" if r["utilisation"] is None else f"{r['utilisation']:.3f}"
            lines.append(f"| {e} | {c} | {r['flows']} | {r['mean_ms']:.1f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
                         f"{r['small_flows']} | {r['small_mean_ms']:.1f} | {r['large_flows']} | {r['large_mean_ms']:.1f} | {u} |")
    lines += ["", "Gain of age-based pfifo_fast over pfifo (1 − FCT_age / FCT_pfifo; positive = faster):", "",
              "| engine | all flows | flows ≤ T | flows > T |", "|---|---|---|---|"]
    for e in ENGINES:
        a, b = rows.get(f"{e}/pfifo"), rows.get(f"{e}/age-pfifo_fast")
        if a and b:
            g = [1 - b[k] / a[k] for k in ("mean_ms", "small_mean_ms", "large_mean_ms")]
            lines.append(f"| {e} | {g[0]:+.1%} | {g[1]:+.1%} | {g[2]:+.1%} |")
    lines += ["", f"experiments/deploy/seed000-100m.toml, T = {T} B, {duration} runs with {warmup} of warm-up "
              "(flows started after it), seed 1, one run per cell."]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", default="60s")
    ap.add_argument("--warmup", default="10s")
    ap.add_argument("--engines", default=",".join(ENGINES), help="comma-separated subset of simulate,emulate,kernel")
    ap.add_argument("--out", help="also write the raw numbers as JSON here")
    ap.add_argument("--doc", help="replace the THREE-ENGINES block of this markdown page with the table")
    ap.add_argument("--sizes", action="store_true", help="write experiments/deploy/sizes-100m.cdf and exit")
    a = ap.parse_args(argv)
    if a.sizes:
        print(write_sizes())
        return 0
    engines = [e for e in a.engines.split(",") if e]
    if any(e != "simulate" for e in engines) and os.geteuid() != 0:
        print("three_engines: the live engines need root", file=sys.stderr)
        return 2
    rows = {}
    for e in engines:
        for c, ov in CONFIGS.items():
            print(f"running {e} / {c} ...", file=sys.stderr, flush=True)
            rows[f"{e}/{c}"] = stats(run(e, ov, a.duration, a.warmup), float(a.warmup.rstrip("s")))
    md = table(rows, a.duration, a.warmup)
    print(md)
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "three_engines.json").write_text(json.dumps(rows, indent=2) + "\n")
    if a.doc:
        page = Path(a.doc)
        text = page.read_text()
        i, j = text.index(BEGIN), text.index(END)
        page.write_text(text[: i + len(BEGIN)] + "\n" + md + "\n" + text[j:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
