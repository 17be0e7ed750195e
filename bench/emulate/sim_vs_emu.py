"""Simulator vs live emulation on the same experiment files (issue #20), as markdown tables
for docs/emulate.md ("Simulator vs emulation"):

1. ``aqm``: CUBIC bulk flows on a dumbbell (10 ms one-way bottleneck delay) through CoDel,
   FQ-CoDel and PIE at 10 and 100 Mbit/s: utilisation and mean qdisc sojourn of the
   bottleneck after warm-up from both engines (the live histogram is reset at the end of
   warm-up as the simulator's is), their differences, Little's-law delay from the queue
   time series as a cross-check, drops after warm-up and the senders' mean SRTT.
2. ``seed000``: seed 000's structure at 100 Mbit/s (experiments/repro/age-based/age-1g.toml
   with the NIC at 100 Mbit/s: 80 closed-loop CUBIC actors, think Exp(1 s), discrete
   bounded Pareto sizes, pfifo_fast without and with the seed's ``ct bytes`` classifier):
   mean FCT of the flows started after warm-up that completed, and the age-based gain
   (mean FCT without / with the classifier) from both engines.

    sudo python bench/emulate/sim_vs_emu.py [--part aqm|seed000|all] [--duration 30s]
        [--warmup 10s] [--repeats 1] [--out DIR]

Live runs need root and take their duration of wall time each. Every live row reports the
machine's 1-minute load average before and after it (the live engine shares the two cores
with everything else: a loaded machine delays the hosts' TCP). Numbers are reports, not
assertions. Run it with ``nice -n -5`` when ``uptime`` shows a low load.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tomllib
from pathlib import Path

import sojourn

ROOT = Path(__file__).resolve().parents[2]

AQM = """
name = "sim-vs-emu-{q}-{rate}"
duration = "{duration}"
warmup = "{warmup}"
seed = {seed}
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
flows = true
"""

# Seed 000's age-based classifier (experiments/repro/age-based/ci-1g.sweep.toml,
# age-pfifofast): ct bytes <= threshold -> priority 1:6 (pfifo_fast band 0), else 1:0 (band 1).
# The seed's 1 Gbit/s threshold is 6,331,208 B; at a tenth of the rate a flow gets a tenth of
# the bytes in the same time, so the default here is a tenth of it.
def classifier(threshold: int) -> list[dict]:
    return [
        {"at": "client", "hook": "output", "map": [{"upto": threshold, "priority": "1:6"}, {"priority": "1:0"}]}
    ]


def load1() -> float:
    return os.getloadavg()[0]


def little_ms(res, warmup_s: float) -> float:
    """Mean queueing delay after warm-up by Little's law, W = L / lambda, from the
    bottleneck's time series (mean queue bytes over mean delivered byte rate)."""
    q = res.series("bottleneck", "queue_bytes")
    thr = res.series("bottleneck", "throughput_bps")
    q, thr = q[q.index > warmup_s], thr[thr.index > warmup_s]
    return float(q.mean() / (thr.mean() / 8.0) * 1e3)


def mean_srtt_ms(res, warmup_s: float) -> float:
    """Mean of the senders' smoothed RTT samples after warm-up (sim: the model's SRTT;
    emu: TCP_INFO tcpi_rtt)."""
    ts = res.timeseries
    if ts is None or ts.empty:
        return float("nan")
    v = ts[(ts["metric"] == "srtt_ms") & (ts["time_s"] > warmup_s)]["value"]
    return float(v.mean()) if len(v) else float("nan")


def secs(d: str) -> float:
    return float(d.rstrip("s"))


def aqm(a) -> list[dict]:
    rows = []
    for rate in ["10Mbit", "100Mbit"]:
        for q in ["codel", "fq_codel", "pie"]:
            for rep in range(a.repeats):
                cfg = tomllib.loads(
                    AQM.format(q=q, rate=rate, duration=a.duration, warmup=a.warmup, flows=a.flows, seed=1 + rep)
                )
                sim_res = sojourn.run(cfg)
                l0 = load1()
                emu_res = sojourn.emulate(cfg)
                l1 = load1()
                sim = sim_res.summary["links"]["bottleneck"]
                emu = emu_res.summary["links"]["bottleneck"]
                w = secs(a.warmup)
                row = {
                    "rate": rate,
                    "qdisc": q,
                    "seed": 1 + rep,
                    "sim_util": sim["utilisation"],
                    "emu_util": emu["utilisation"],
                    "sim_sojourn_ms": sim["sojourn_ms"].get("mean"),
                    "emu_sojourn_ms": emu["sojourn_ms"].get("mean"),
                    "sim_p99_ms": sim["sojourn_ms"].get("p99"),
                    "emu_p99_ms": emu["sojourn_ms"].get("p99"),
                    "sim_little_ms": little_ms(sim_res, w),
                    "emu_little_ms": little_ms(emu_res, w),
                    "sim_drops": sim["drops_total"],
                    "emu_drops": emu["drops_total"],
                    "sim_srtt_ms": mean_srtt_ms(sim_res, w),
                    "emu_srtt_ms": mean_srtt_ms(emu_res, w),
                    "load_before": l0,
                    "load_after": l1,
                }
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def print_aqm(rows: list[dict]) -> None:
    print(
        "| rate | qdisc | seed | util sim | util emu | Δ points | mean sojourn sim (ms) | emu (ms) | emu/sim "
        "| p99 sim / emu (ms) | Little sim / emu (ms) | drops sim / emu | SRTT sim / emu (ms) | load 1 min |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r["emu_sojourn_ms"] / r["sim_sojourn_ms"]
        print(
            f"| {r['rate']} | {r['qdisc']} | {r['seed']} | {r['sim_util']:.3f} | {r['emu_util']:.3f} | "
            f"{(r['emu_util'] - r['sim_util']) * 100:+.1f} | {r['sim_sojourn_ms']:.2f} | {r['emu_sojourn_ms']:.2f} | "
            f"{ratio:.2f} | {r['sim_p99_ms']:.1f} / {r['emu_p99_ms']:.1f} | {r['sim_little_ms']:.2f} / {r['emu_little_ms']:.2f} | "
            f"{r['sim_drops']} / {r['emu_drops']} | {r['sim_srtt_ms']:.1f} / {r['emu_srtt_ms']:.1f} | "
            f"{r['load_before']:.1f} → {r['load_after']:.1f} |"
        )


def seed000(a) -> list[dict]:
    base = ROOT / "experiments/repro/age-based/age-1g.toml"
    rows = []
    for name, over in [
        ("pfifo_fast", {"topology.links[0].qdisc": "pfifo_fast"}),
        ("age-pfifo_fast", {"topology.links[0].qdisc": "pfifo_fast", "classifier": classifier(a.threshold)}),
    ]:
        o = {
            "topology.links[0].rate": "100Mbit",
            "warmup": a.seed_warmup,
            "record.interval": "1s",
            **over,
        }
        row = {"variant": name}
        # sim_notsq: the simulator without TCP Small Queues — what the live hosts' TCP sees
        # when the NIC's qdisc runs in the forwarder (the skb is freed when the frame
        # reaches the forwarder, so TSQ never holds a socket back; docs/emulate.md).
        runs = [
            ("sim", lambda: sojourn.run(base, duration=a.seed_duration, overrides=o)),
            ("sim_notsq", lambda: sojourn.run(base, duration=a.seed_duration, overrides={**o, "transport.tsq": False})),
            ("emu", lambda: sojourn.emulate(base, duration=a.seed_duration, overrides=o)),
        ]
        for eng, go in runs:
            l0 = load1()
            res = go()
            if eng == "emu":
                row["load_before"], row["load_after"] = l0, load1()
            s = res.summary
            f = s["flows"]
            row[f"{eng}_fct_mean_s"] = f["fct_s"].get("mean")
            row[f"{eng}_fct_p50_s"] = f["fct_s"].get("p50")
            row[f"{eng}_completed"] = f["completed"]
            row[f"{eng}_util"] = s["links"]["nic"]["utilisation"]
            row[f"{eng}_sojourn_ms"] = s["links"]["nic"]["sojourn_ms"].get("mean")
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


ENGINES = [("sim", "sim"), ("sim_notsq", "sim, tsq = false"), ("emu", "emu")]


def print_seed000(rows: list[dict]) -> None:
    print("| variant | engine | mean FCT (s) | median FCT (s) | completed | NIC utilisation | mean sojourn (ms) | load 1 min |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        for eng, label in ENGINES:
            load = f"{r['load_before']:.1f} → {r['load_after']:.1f}" if eng == "emu" else ""
            print(
                f"| {r['variant']} | {label} | {r[f'{eng}_fct_mean_s']:.3f} | {r[f'{eng}_fct_p50_s']:.3f} | "
                f"{r[f'{eng}_completed']} | {r[f'{eng}_util']:.3f} | {r[f'{eng}_sojourn_ms']:.1f} | {load} |"
            )
    if len(rows) == 2:
        print()
        for eng, label in ENGINES:
            g = rows[0][f"{eng}_fct_mean_s"] / rows[1][f"{eng}_fct_mean_s"]
            print(f"- age-based gain ({label}): mean FCT pfifo_fast / age-pfifo_fast = {g:.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["aqm", "seed000", "all"], default="all")
    ap.add_argument("--duration", default="30s")
    ap.add_argument("--warmup", default="10s")
    ap.add_argument("--flows", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="seeds 1..N for every AQM row")
    ap.add_argument("--seed-duration", default="60s", help="seed-000 run length (the seed ran 6 h)")
    ap.add_argument("--seed-warmup", default="10s")
    ap.add_argument("--threshold", type=int, default=633121, help="ct bytes threshold (B) of the age-based variant")
    ap.add_argument("--out", default=None, help="also write the raw numbers as JSON here")
    a = ap.parse_args(argv)
    out = {}
    if a.part in ("aqm", "all"):
        out["aqm"] = aqm(a)
        print_aqm(out["aqm"])
        rs = [r["emu_sojourn_ms"] / r["sim_sojourn_ms"] for r in out["aqm"]]
        print(f"\nemu/sim mean sojourn: median {statistics.median(rs):.2f}, range {min(rs):.2f}–{max(rs):.2f}\n")
    if a.part in ("seed000", "all"):
        out["seed000"] = seed000(a)
        print_seed000(out["seed000"])
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "sim_vs_emu.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
