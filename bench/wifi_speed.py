"""Speed of a 10-station Wi-Fi run (experiments/wifi/ten-stations.toml; bench/README.md):
wall time per delivered packet and per simulated second, best of --repeats runs.

    python bench/wifi_speed.py [--repeats 3] [--duration 60s]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import sojourn

FILE = Path(__file__).resolve().parents[1] / "experiments" / "wifi" / "ten-stations.toml"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", default="60s")
    a = ap.parse_args()
    best = None
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        res = sojourn.run(str(FILE), duration=a.duration)
        wall = time.perf_counter() - t0
        if best is None or wall < best[0]:
            best = (wall, res)
    wall, res = best
    s = res.summary
    delivered = s["accounting"]["delivered"]
    sim_s = s["duration_s"]
    print(f"{FILE.name}: {sim_s:g} s simulated, {delivered} packets delivered, "
          f"{s['wifi']['txops']} transmission opportunities, {s['events']} events")
    print(f"best of {a.repeats}: {wall:.3f} s wall; {wall * 1e9 / delivered:.0f} ns per delivered packet; "
          f"{wall * 1e3 / sim_s:.1f} ms per simulated second ({sim_s / wall:.1f}x real time)")


if __name__ == "__main__":
    main()
