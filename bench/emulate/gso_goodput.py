"""Goodput of one CUBIC bulk flow through `sojourn emulate` on a fast link, with the
forwarder's GSO mode (`transport.gso = true`, the default: the hosts' GSO buffers pass
every link whole) and without it (`gso = false`: MTU frames), and the forwarder's CPU time
per frame and per wire packet (docs/emulate.md, "GSO buffers"). Needs root.

    sudo python bench/emulate/gso_goodput.py [--rate 10Gbit] [--secs 6] [--reps 2]

Prints a Markdown table (medians over the repetitions, interleaved so every cell meets the
same load) with the machine's 1-minute load average before each run.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import sojourn

TEXT = """
duration = "{secs}s"
warmup = "0s"   # counters over the whole run, as the forwarder CPU time
[topology]
bottleneck = {{ rate = "{rate}", delay = "1ms", qdisc = {qdisc} }}
access = {{ rate = "40Gbit" }}   # the access links (default 1 Gbit/s) never limit
[transport]
cc = "cubic"
gso = {gso}
[[workload]]
kind = "bulk"
"""

QDISCS = {"pfifo": '{ kind = "pfifo", limit = 1000 }', "fq_codel": '"fq_codel"'}


def one(tmp: Path, rate: str, secs: float, qdisc: str, gso: bool) -> dict:
    p = tmp / f"{qdisc}-{gso}.toml"
    p.write_text(TEXT.format(secs=secs, rate=rate, qdisc=QDISCS[qdisc], gso=str(gso).lower()))
    load = os.getloadavg()[0]
    res = sojourn.emulate(p)
    s = res.summary
    e = s["emulate"]
    frames = s["accounting"]["created"]
    # Every frame crosses exactly one of the two bottleneck directions: their wire packets
    # are the run's (data segments one way, ACKs the other).
    segs = sum(s["links"][n]["tx_segments"] for n in ("bottleneck", "reverse"))
    cpu = e["forwarder_cpu_seconds"]
    b = s["links"]["bottleneck"]
    return {
        "goodput": float(res.flows.goodput_bps.iloc[0]),
        "util": b["utilisation"],
        "gso_buffers": e["gso_buffers"],
        "rx_gso": e["rx_gso_buffers"],
        "frames": frames,
        "segs": segs,
        "cpu_ns_frame": cpu * 1e9 / max(frames, 1),
        "cpu_ns_seg": cpu * 1e9 / max(segs, 1),
        "cpu_share": cpu / e["wall_seconds"],
        "retrans": int(res.flows.retransmits.iloc[0]),
        "conserved": s["accounting"]["conserved"],
        "load": load,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="10Gbit")
    ap.add_argument("--secs", type=float, default=6.0)
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    cells = [(q, g) for g in (True, False) for q in QDISCS]
    results: dict = {c: [] for c in cells}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(a.reps):
            for c in cells:
                results[c].append(one(Path(d), a.rate, a.secs, *c))
    print(f"| frames | qdisc | goodput Gbit/s | bottleneck utilisation | forwarder CPU ns/frame | "
          f"forwarder CPU ns/wire packet | forwarder CPU % of wall | GSO buffers received | retransmits | conserved | load (1 min) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (q, g), rs in results.items():
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        print(f"| {'GSO buffers' if g else 'MTU (gso = false)'} | {q} | {med('goodput') / 1e9:.2f} | "
              f"{med('util'):.3f} | {med('cpu_ns_frame'):.0f} | {med('cpu_ns_seg'):.0f} | "
              f"{100 * med('cpu_share'):.0f} | {int(med('rx_gso'))} | "
              f"{'/'.join(str(r['retrans']) for r in rs)} | {all(r['conserved'] for r in rs)} | "
              f"{', '.join('%.2f' % r['load'] for r in rs)} |")


if __name__ == "__main__":
    main()
