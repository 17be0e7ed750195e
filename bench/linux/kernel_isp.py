"""The kernel engine's isp router against the simulator (docs/isp.md, "The other engines").

    sudo python bench/linux/kernel_isp.py [--runs 3] [FILE ...]

Runs each isp file (default: experiments/isp/kernel/*.toml) ``--runs`` times with
``sojourn emulate --kernel`` and once with the simulator, and prints one markdown row per
active subscriber and direction: the kernel's achieved TCP payload rate (mean, min-max over
the runs), the simulator's, and their ratio. Live runs take their duration in wall-clock
time; the figures depend on the machine's load (docs/isp.md quotes them with the date).
Not run in CI.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import sojourn  # noqa: E402


def achieved(res) -> dict[tuple[str, str], float]:
    t = res.subscribers_table.to_pandas()
    t = t[t.flows > 0]
    return {(r.subscriber, r.direction): float(r.achieved_bps) for r in t.itertuples()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args(argv)
    files = a.files or sorted((ROOT / "experiments" / "isp" / "kernel").glob("*.toml"))
    print("| file | subscriber | direction | kernel, Mbit/s (mean, min-max) | simulator | kernel / simulator |")
    print("|---|---|---|---|---|---|")
    for f in files:
        runs = [achieved(sojourn.emulate(f, kernel=True)) for _ in range(a.runs)]
        sim = achieved(sojourn.run(f))
        for key in sorted(sim):
            ks = [r.get(key, 0.0) / 1e6 for r in runs]
            mean = sum(ks) / len(ks)
            s = sim[key] / 1e6
            print(f"| {f.name} | {key[0]} | {key[1]} | {mean:.2f} ({min(ks):.2f}-{max(ks):.2f}) | {s:.2f} "
                  f"| {mean / s:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
