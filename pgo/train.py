"""The training runs for sojourn's profile-guided build (pgo/refresh; docs/pgo.md).

Run with an instrumented engine first on the path. Every experiment file in experiments/
(sweeps: every point, first seed) runs for a short simulated time, so that every discipline,
congestion control, workload and recorder the project ships is exercised: code a profile
never saw would be optimised as cold (for size). The shapes issue 19 times (seed 000's 10 Gb/s
set-up, the ns-3 comparison's rows) then run longer, so the profile's weights are those of the
runs users time. Bounded: about a minute on one core.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import sojourn  # noqa: E402  (the instrumented build: PYTHONPATH set by pgo/refresh)
from sojourn import sweeps  # noqa: E402

# Simulated seconds per run of the coverage pass, and of the weighted pass.
COVER_S = "1s"


def cover() -> int:
    n = 0
    for path in sorted((ROOT / "experiments").rglob("*.toml")):
        if sweeps.is_sweep_file(path):
            plan = sweeps.load_plan(path, repeats=1)
            todo = [(plan.config(p), plan.seeds[0]) for p in plan.points]
        else:
            todo = [(str(path), None)]
        for cfg, seed in todo:
            try:
                sojourn.run(cfg, seed=seed, duration=COVER_S, base_dir=path.parent,
                            overrides={"warmup": "0s"})
                n += 1
            except sojourn.ConfigError as e:  # a file for another engine only
                print(f"  skipped {path.relative_to(ROOT)}: {e}", file=sys.stderr)
    return n


def weighted() -> None:
    import ns3_compare as nc

    for s in nc.scenarios(short=False, max_pairs=1024):
        sojourn.run(nc.sojourn_config(s), seed=1)
    age = ROOT / "experiments/repro/age-based/age-10g.toml"
    sojourn.run(str(age), duration="30s", overrides={"warmup": "0s"})
    # Issue 36's timed run: an HTB tree of 10,000 subscribers with FQ-CoDel leaves. Its
    # 1-s coverage run is mostly set-up; without this the shaper's and the leaves' paths
    # were weighed as warm, and the profile gained it nothing (bench/README.md, "ISP
    # subscriber trees").
    isp = ROOT / "experiments/isp/scale-10k.toml"
    sojourn.run(str(isp), duration="4s", overrides={"warmup": "0s"})


if __name__ == "__main__":
    t0 = time.perf_counter()
    n = cover()
    t1 = time.perf_counter()
    weighted()
    print(f"pgo/train.py: {n} coverage runs in {t1 - t0:.0f} s, weighted runs in "
          f"{time.perf_counter() - t1:.0f} s (engine {sojourn.__file__})")
