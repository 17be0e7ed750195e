"""Simulator vs live emulation on the same experiment files (issue #20): CUBIC bulk flows
through CoDel, FQ-CoDel and PIE at 10 and 100 Mbit/s; utilisation and mean qdisc sojourn
of the bottleneck from both engines, as a markdown table.

    sudo python bench/emulate/sim_vs_emu.py [--duration 20s] [--flows 2] [--out DIR]

Live runs need root and take `duration` of wall time each (6 of them). Numbers are
reports, not assertions: the live engine shares the machine with everything else.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import sojourn

TEMPLATE = """
name = "sim-vs-emu-{q}-{rate}"
duration = "{duration}"
warmup = "{warmup}"
seed = 1
[topology]
pairs = {flows}
bottleneck = {{ rate = "{rate}", delay = "10ms", qdisc = "{q}" }}
[transport]
cc = "cubic"
[[workload]]
kind = "bulk"
pairs = "all"
[record]
interval = "100ms"
"""


def little_ms(res, warmup: str) -> float:
    """Mean queueing delay after warm-up by Little's law, W = L / lambda, from the
    bottleneck's time series (mean queue bytes over mean delivered byte rate). The live
    forwarder's sojourn histogram covers the whole run (slow start included); this
    measure covers the same period in both engines."""
    w = float(warmup.rstrip("s"))
    q = res.series("bottleneck", "queue_bytes")
    thr = res.series("bottleneck", "throughput_bps")
    q, thr = q[q.index > w], thr[thr.index > w]
    return float(q.mean() / (thr.mean() / 8.0) * 1e3)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", default="20s")
    ap.add_argument("--warmup", default="5s")
    ap.add_argument("--flows", type=int, default=2)
    ap.add_argument("--out", default=None, help="also write the raw numbers as JSON here")
    a = ap.parse_args(argv)
    rows = []
    for rate in ["10Mbit", "100Mbit"]:
        for q in ["codel", "fq_codel", "pie"]:
            cfg = TEMPLATE.format(q=q, rate=rate, duration=a.duration, warmup=a.warmup, flows=a.flows)
            import tomllib

            d = tomllib.loads(cfg)
            sim_res = sojourn.run(d)
            emu_res = sojourn.emulate(d)
            sim = sim_res.summary["links"]["bottleneck"]
            emu = emu_res.summary["links"]["bottleneck"]
            row = {
                "rate": rate,
                "qdisc": q,
                "sim_util": sim["utilisation"],
                "emu_util": emu["utilisation"],
                "sim_sojourn_ms": sim["sojourn_ms"].get("mean"),
                "emu_sojourn_ms": emu["sojourn_ms"].get("mean"),
                "sim_little_ms": little_ms(sim_res, a.warmup),
                "emu_little_ms": little_ms(emu_res, a.warmup),
                "sim_drops": sim["drops_total"],
                "emu_drops": emu["drops_total"],
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    print("| rate | qdisc | utilisation sim | utilisation emu | mean sojourn sim (ms) | mean sojourn emu (ms, whole run) "
          "| Little's-law delay after warm-up sim (ms) | same, emu (ms) | drops sim | drops emu |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['rate']} | {r['qdisc']} | {r['sim_util']:.3f} | {r['emu_util']:.3f} | "
              f"{r['sim_sojourn_ms']:.2f} | {r['emu_sojourn_ms']:.2f} | {r['sim_little_ms']:.2f} | {r['emu_little_ms']:.2f} | "
              f"{r['sim_drops']} | {r['emu_drops']} |")
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "sim_vs_emu.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
