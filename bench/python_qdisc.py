"""The cost of a discipline written in Python (docs/python-disciplines.md), in the simulator:
the same experiment through examples/disciplines/fifo.py and through the built-in pfifo,
in this process, CPU seconds of the run (time.process_time around sojourn.run).

    python bench/python_qdisc.py              # cbr (1 Gbit/s CBR into a 950 Mbit/s link) and row A
    python bench/python_qdisc.py --reps 5

Reported per experiment and discipline: bottleneck packets (transmitted) per CPU second,
and the cost of one call into Python: (CPU s with the Python FIFO - CPU s with pfifo) /
(enqueue + dequeue calls), the calls counted by the engine's own counters (packets that
arrived at the bottleneck + packets it sent). The median of the repetitions is printed
(the machine is shared: compare within one invocation)."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import sojourn

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples" / "disciplines"

CBR = {
    "name": "bench-python-cbr", "duration": "10s", "seed": 1,
    "topology": {"kind": "dumbbell", "pairs": 1,
                 "bottleneck": {"rate": "950Mbit", "delay": "1ms", "qdisc": None},
                 "access": {"rate": "10Gbit", "delay": "0s"}},
    "workload": [{"kind": "cbr", "pair": 0, "rate": "1Gbit"}],
    "record": {"interval": "0s"},
}
# Row A of the ns-3 comparison (bench/README.md), 16 CUBIC flows at 10 Mbit/s.
ROW_A = {
    "name": "bench-python-row-a", "duration": "300s", "seed": 1,
    "topology": {"kind": "dumbbell", "pairs": 16,
                 "bottleneck": {"rate": "10Mbit", "delay": "48ms", "qdisc": None},
                 "access": {"rate": "100Mbit", "delay": "1ms"}},
    "transport": {"cc": "cubic"},
    "workload": [{"kind": "bulk", "pairs": "all", "count": 16}],
    "record": {"interval": "0s"},
}


def once(cfg: dict, qdisc: dict) -> tuple[float, int, int]:
    """CPU seconds of the run, bottleneck packets sent, calls into the discipline."""
    c = {**cfg, "topology": {**cfg["topology"], "bottleneck": {**cfg["topology"]["bottleneck"], "qdisc": qdisc}}}
    t0 = time.process_time()
    res = sojourn.run(c, base_dir=EX)
    cpu = time.process_time() - t0
    link = res.summary["links"]["bottleneck"]
    sent = link["tx_packets"]
    arrived = sent + sum(link["drops"].values()) + link.get("queue_packets_at_end", 0)
    return cpu, sent, arrived + sent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args(argv)
    py = {"kind": "python", "module": "fifo.py", "class": "Fifo", "limit": 1000}
    builtin = {"kind": "pfifo", "limit": 1000}
    for name, cfg in (("cbr", CBR), ("row A", ROW_A)):
        rows = {}
        for label, q in (("python", py), ("pfifo", builtin)):
            runs = [once(cfg, q) for _ in range(a.reps)]
            rows[label] = (statistics.median(r[0] for r in runs), runs[0][1], runs[0][2])
        (cp, sent, calls), (cb, sent_b, _) = rows["python"], rows["pfifo"]
        print(f"{name}: Python FIFO {sent / cp / 1e6:.3f} M bottleneck packets / CPU s "
              f"({cp:.2f} CPU s, {sent} packets); pfifo {sent_b / cb / 1e6:.3f} M ({cb:.2f} CPU s); "
              f"{(cp - cb) / calls * 1e9:.0f} ns per call into Python ({calls} calls)")
        if sent != sent_b:
            print(f"  (the two runs sent different counts: {sent} vs {sent_b})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
