"""Seed 000's set-up 1 at the paper's scale (1 Gbit/s, the seed's own sizes and think time)
through the kernel (`emulate --kernel`: htb + pfifo_fast and the nft ct-bytes map on the
client's device) and the simulator on the same shortened file, one factor at a time
(issue 40 §2, docs/repro/age-based.md "At the paper's scale on this machine's kernel").

    sudo python bench/deploy/seed000_kernel.py --duration 180s --warmup 30s --json /tmp/s2.jsonl
    sudo python bench/deploy/seed000_kernel.py --gso false --label "offloads off" --json /tmp/s2.jsonl
    sudo python bench/deploy/seed000_kernel.py --limit 100 --label "tx_queue_len 100" --json /tmp/s2.jsonl
    sudo python bench/deploy/seed000_kernel.py --threshold-scale 0.5 --configs age --label "T x 0.5" \
        --base-label baseline --json /tmp/s2.jsonl
    python bench/deploy/seed000_kernel.py --report /tmp/s2.jsonl      # the tables of every row so far

Each (engine, configuration) is one run of experiments/repro/age-based/age-1g.toml for
`--duration` (live runs take it in wall-clock time). Per run: mean FCT by both definitions
(from the first byte written, the seed's; from connect()), for flows started after each of
`--warmups`, split at the threshold; the link's utilisation; and, live, the machine's CPU
busy share over the run (/proc/stat, all cores) and load average — whether the hosts rather
than the link set the pace. Numbers are reports, not assertions.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import sojourn

ROOT = Path(__file__).resolve().parents[2]
EXP = ROOT / "experiments" / "repro" / "age-based" / "age-1g.toml"
T_BYTES = 6331208  # the seed's 1 Gbit/s threshold (Table II)


def configs(limit: int | None, t_scale: float) -> dict[str, dict]:
    """pfifo (the base) and the seed's age-based pfifo_fast with its nft map."""
    t = int(round(T_BYTES * t_scale))
    fifo: dict = {"kind": "pfifo"} if limit is None else {"kind": "pfifo", "limit": limit}
    fast: dict = {"kind": "pfifo_fast"} if limit is None else {"kind": "pfifo_fast", "limit": limit}
    return {"pfifo": {"topology.links[0].qdisc": fifo},
            "age": {"topology.links[0].qdisc": fast,
                    "classifier": [{"at": "client", "hook": "output",
                                    "map": [{"upto": t, "priority": "1:6"}, {"priority": "1:0"}]}]}}


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores from /proc/stat."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + f[4]
    return sum(f) - idle, sum(f)


def flow_stats(flows, warmup_s: float, t_bytes: int) -> dict:
    f = flows[flows["completed"] & (flows["size_bytes"] > 0) & (flows["start_s"] >= warmup_s)]
    out: dict = {"flows": int(len(f))}
    for name, fct in (("first_byte", f["end_s"] - f["first_byte_s"]), ("connect", f["end_s"] - f["start_s"])):
        small = fct[f["size_bytes"] <= t_bytes]
        large = fct[f["size_bytes"] > t_bytes]
        out[name] = {"mean_ms": float(fct.mean() * 1e3), "p50_ms": float(np.quantile(fct, 0.5) * 1e3),
                     "p99_ms": float(np.quantile(fct, 0.99) * 1e3), "small_mean_ms": float(small.mean() * 1e3),
                     "large_mean_ms": float(large.mean() * 1e3), "small_flows": int(len(small)),
                     "large_flows": int(len(large))}
    return out


def run(engine: str, ov: dict, duration: str, warmup: str, seed: int) -> tuple:
    ov = dict(ov, warmup=warmup, seed=seed)
    load0, (b0, t0), w0 = os.getloadavg()[0], cpu_ticks(), time.monotonic()
    if engine == "simulate":
        res = sojourn.run(EXP, duration=duration, overrides=ov)
    else:
        res = sojourn.emulate(EXP, duration=duration, overrides=ov, kernel=True)
    (b1, t1), wall = cpu_ticks(), time.monotonic() - w0
    cpu = (b1 - b0) / max(1, t1 - t0)
    return res, {"cpu_busy": cpu, "load_before": load0, "load_after": os.getloadavg()[0], "wall_s": wall}


def report(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = ["| factor | engine | seed | warm-up | FCT from | mean FCT pfifo / age (ms) | gain all | gain ≤ T | gain > T "
             "| flows pfifo / age | utilisation pfifo / age | CPU busy (live) |", "|" + "---|" * 12]
    by: dict = {}
    for r in rows:
        by.setdefault((r["label"], r["engine"], r.get("seed", 1)), {})[r["config"]] = r
    for (label, engine, seed), d in by.items():
        a, b = d.get("pfifo"), d.get("age")
        if a is None and b is not None and b.get("base_label"):
            # an age row measured against another factor's pfifo run (the base has no threshold)
            a = by.get((b["base_label"], engine, seed), {}).get("pfifo")
        if not (a and b):
            continue
        for w in a["stats"]:
            for defn in ("first_byte", "connect"):
                x, y = a["stats"][w][defn], b["stats"][w][defn]
                g = [1 - y[k] / x[k] for k in ("mean_ms", "small_mean_ms", "large_mean_ms")]
                cpu = "" if engine == "simulate" else f"{a['host']['cpu_busy']:.0%} / {b['host']['cpu_busy']:.0%}"
                lines.append(f"| {label} | {engine} | {seed} | {w} s | {defn} | {x['mean_ms']:.1f} / {y['mean_ms']:.1f} "
                             f"| {g[0]:+.1%} | {g[1]:+.1%} | {g[2]:+.1%} | {a['stats'][w]['flows']} / "
                             f"{b['stats'][w]['flows']} | {a['utilisation']:.3f} / {b['utilisation']:.3f} | {cpu} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", default="180s")
    ap.add_argument("--warmup", default="30s", help="the runs' warm-up (flows started after it are counted)")
    ap.add_argument("--warmups", default="", help="more warm-ups to count from, seconds, comma-separated (post hoc)")
    ap.add_argument("--engines", default="kernel,simulate")
    ap.add_argument("--configs", default="pfifo,age")
    ap.add_argument("--gso", choices=["true", "false"], help="transport.gso (live: the veths' offloads)")
    ap.add_argument("--limit", type=int, help="the qdiscs' limit in packets (tx_queue_len; default 1000)")
    ap.add_argument("--threshold-scale", type=float, default=1.0, help="threshold = 6331208 B x this")
    ap.add_argument("--label", default="baseline")
    ap.add_argument("--seed", type=int, default=1, help="the run's seed (the actors' sizes and think times)")
    ap.add_argument("--base-label", help="with --configs age: compare with the pfifo run of this label (same "
                                         "engine and seed), e.g. for --threshold-scale, which leaves pfifo as it is")
    ap.add_argument("--json", help="append one JSON line per run to this file")
    ap.add_argument("--report", help="print the table of a --json file and exit")
    a = ap.parse_args(argv)
    if a.report:
        print(report(Path(a.report)))
        return 0
    engines = [e for e in a.engines.split(",") if e]
    if "kernel" in engines and os.geteuid() != 0:
        print("seed000_kernel: the kernel engine needs root", file=sys.stderr)
        return 2
    t_bytes = int(round(T_BYTES * a.threshold_scale))
    cfgs = configs(a.limit, a.threshold_scale)
    extra = {} if a.gso is None else {"transport.gso": a.gso == "true"}
    warm = [float(a.warmup.rstrip("s"))] + [float(x) for x in a.warmups.split(",") if x]
    for e in engines:
        for c in a.configs.split(","):
            print(f"running {e} / {c} ({a.label}) ...", file=sys.stderr, flush=True)
            res, host = run(e, {**cfgs[c], **extra}, a.duration, a.warmup, a.seed)
            row = {"label": a.label, "engine": e, "config": c, "seed": a.seed, "duration": a.duration,
                   "threshold_bytes": t_bytes, "base_label": a.base_label,
                   "utilisation": res.summary["links"]["nic"].get("utilisation"), "host": host,
                   "stats": {f"{w:g}": flow_stats(res.flows, w, t_bytes) for w in warm}}
            print(json.dumps(row), flush=True)
            if a.json:
                with open(a.json, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
