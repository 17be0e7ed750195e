"""Flent's RRUL comparison (issue 37) in the three engines: FIFO, FQ-CoDel and CAKE at
100/20 Mbit/s and 40 ms base RTT, short runs (live runs take their duration in wall-clock
time). Prints the markdown table of docs/tests.md "Engines".

    sudo python bench/tests/rrul_engines.py [--duration 15s]

Simulator and `emulate` run the dumbbell of experiments/tests/rrul-compare.sweep.toml (the
queues at the routers, in sojourn's forwarder live); `emulate --kernel` needs each queue on a
host's device, so it runs the same links as a two-host graph (FIFO only: this kernel has no
fq_codel or cake), and the simulator runs that graph too for reference.
"""
from __future__ import annotations

import argparse
import copy
import tomllib
from pathlib import Path

import sojourn
from sojourn.kernel_engine import emulate_kernel

ROOT = Path(__file__).resolve().parents[2]


def dumbbell(qdisc: str, duration: str) -> dict:
    sweep = tomllib.loads((ROOT / "experiments/tests/rrul-compare.sweep.toml").read_text())
    cfg = copy.deepcopy(sweep["base"])
    cfg["duration"] = duration
    cfg["topology"]["bottleneck"]["qdisc"] = qdisc
    cfg["topology"]["reverse"]["qdisc"] = qdisc
    return cfg


def graph(duration: str) -> dict:
    cfg = tomllib.loads((ROOT / "experiments/tests/rrul-live.toml").read_text())
    cfg["duration"] = duration
    cfg["warmup"] = "5s"
    link = cfg["topology"]["links"][0]
    link.update(rate="100Mbit", delay="20ms", qdisc="pfifo")
    link["reverse"] = {"rate": "20Mbit", "qdisc": "pfifo"}
    return cfg


def row(engine: str, topo: str, qdisc: str, res) -> str:
    t = res.summary["tests"]["workload[0]"]
    p = res.probes
    p = p[(p["time_s"] >= float(res.summary["warmup_s"])) & ~p["lost"]]
    icmp = p[p["mode"] == "icmp"]["rtt_ns"] / 1e6
    udp = p[p["mode"] == "udp"]["rtt_ns"] / 1e6
    loss = t.get("ping_loss", 0.0)
    return (f"| {engine} | {topo} | {qdisc} | {t['download_bps'] / 1e6:.1f} / {t['upload_bps'] / 1e6:.1f} | "
            f"{icmp.mean():.1f} / {icmp.quantile(0.99):.1f} | {udp.mean():.1f} / {udp.quantile(0.99):.1f} | {100 * loss:.1f} % |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", default="15s")
    a = ap.parse_args()
    rows = ["| engine | topology | qdisc | download / upload goodput (Mbit/s) | ICMP RTT mean / p99 (ms) | UDP RTT mean / p99 (ms) | ICMP loss |",
            "|---|---|---|---|---|---|---|"]
    for q in ("pfifo", "fq_codel", "cake"):
        cfg = dumbbell(q, a.duration)
        rows.append(row("simulate", "dumbbell", q, sojourn.run(cfg)))
        rows.append(row("emulate", "dumbbell", q, sojourn.emulate(cfg)))
    g = graph(a.duration)
    rows.append(row("simulate", "graph", "pfifo", sojourn.run(g)))
    rows.append(row("emulate", "graph", "pfifo", sojourn.emulate(g)))
    rows.append(row("kernel", "graph", "pfifo", emulate_kernel(g)))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
