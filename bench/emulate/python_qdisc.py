"""The rate `sojourn emulate` holds with a discipline written in Python
(docs/python-disciplines.md): one CUBIC bulk flow through examples/disciplines/fifo.py and
through the built-in pfifo (same limit) at several bottleneck rates, GSO buffers (the
default) and MTU frames. Needs root.

    sudo python bench/emulate/python_qdisc.py [--rates 100Mbit,1Gbit,2500Mbit,10Gbit] [--secs 4] [--reps 1]

Prints a Markdown table (medians over the repetitions, the two disciplines interleaved so
both meet the same load) with the machine's 1-minute load average before each run. The
forwarder's thread calls the class, taking the GIL for each call.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import sojourn

EX = Path(__file__).resolve().parents[2] / "examples" / "disciplines"

TEXT = """
duration = "{secs}s"
warmup = "0s"
[topology]
bottleneck = {{ rate = "{rate}", delay = "1ms", qdisc = {qdisc} }}
access = {{ rate = "40Gbit" }}
[transport]
cc = "cubic"
gso = {gso}
[[workload]]
kind = "bulk"
"""

QDISCS = {
    "pfifo": '{ kind = "pfifo", limit = 1000 }',
    "python FIFO": f'{{ kind = "python", module = "{EX / "fifo.py"}", class = "Fifo", limit = 1000 }}',
}


def one(tmp: Path, rate: str, secs: float, qdisc: str, gso: bool) -> dict:
    p = tmp / "exp.toml"
    p.write_text(TEXT.format(secs=secs, rate=rate, qdisc=QDISCS[qdisc], gso=str(gso).lower()))
    load = os.getloadavg()[0]
    res = sojourn.emulate(p)
    s = res.summary
    b = s["links"]["bottleneck"]
    frames = s["accounting"]["created"]
    return {
        "goodput": float(res.flows.goodput_bps.iloc[0]),
        "util": b["utilisation"],
        "frames_per_s": frames / s["emulate"]["wall_seconds"],
        "cpu_ns_frame": s["emulate"]["forwarder_cpu_seconds"] * 1e9 / max(frames, 1),
        "conserved": s["accounting"]["conserved"],
        "load": load,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="100Mbit,1Gbit,2500Mbit,10Gbit")
    ap.add_argument("--secs", type=float, default=4.0)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--mtu-only", action="store_true", help="MTU frames (gso = false) only")
    a = ap.parse_args()
    print("| bottleneck | frames | qdisc | goodput Gbit/s | bottleneck utilisation | frames/s | forwarder CPU ns/frame | conserved | load (1 min) |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for rate in a.rates.split(","):
            for gso in ([False] if a.mtu_only else [True, False]):
                runs: dict[str, list[dict]] = {q: [] for q in QDISCS}
                for _ in range(a.reps):
                    for q in QDISCS:
                        runs[q].append(one(Path(d), rate, a.secs, q, gso))
                for q, rs in runs.items():
                    med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
                    loads = ", ".join(f"{r['load']:.1f}" for r in rs)
                    print(f"| {rate} | {'GSO buffers' if gso else 'MTU (gso = false)'} | {q} | {med('goodput') / 1e9:.3f} | "
                          f"{med('util'):.3f} | {med('frames_per_s'):.0f} | {med('cpu_ns_frame'):.0f} | "
                          f"{all(r['conserved'] for r in rs)} | {loads} |", flush=True)


if __name__ == "__main__":
    main()
