"""One run on many cores (issue 35 §3): wall time of the same run on 1 and on N threads.

Each case runs in this process through ``sojourn.run`` (no output files), first on one
thread, then cut over ``--threads`` threads, alternating for ``--rounds`` rounds; the
outputs are checked byte-identical (summary.json and the flow table) every time, and the
speed-up is the ratio of the median wall times. How the run was cut (partitions, links cut,
lookahead) comes from ``sojourn.validate``.

    python3 bench/threads.py                    # every case, 2 threads, 3 rounds
    python3 bench/threads.py --case halves --threads 2 --rounds 5

The cases: ``halves``, two independent dumbbells (1 Gbit/s bottlenecks, 32 CUBIC flows
each: the planner cuts no link, the halves never synchronise but at the end); ``parking``,
three 300-Mbit/s bottlenecks in a chain with cross traffic at each (5-ms links cut);
``isp``, 10 s of experiments/isp/scale-10k.toml (10,000 subscribers; the uplink's HTB and
the access router stay in one partition, the subscribers' lines are cut); ``isp100k``, 5 s
of experiments/isp/scale-100k.toml.

The planner runs a cut predicted to gain less than 1.1x on one thread (docs/engine.md,
"One run on many cores"): this benchmark sets ``SOJOURN_CUT_ANYWAY=1`` so that such cuts
(the ISP trees) are measured too, and prints the planner's prediction beside the
measurement.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))


def _dumbbell_half(prefix: str, qdisc: str) -> tuple:
    nodes = [f"{prefix}s", f"{prefix}r", f"{prefix}d"]
    links = [
        {"name": f"{prefix}-access", "from": f"{prefix}s", "to": f"{prefix}r", "rate": "10Gbit", "delay": "1ms"},
        {"name": f"{prefix}-bottleneck", "from": f"{prefix}r", "to": f"{prefix}d", "rate": "1Gbit",
         "delay": "10ms", "qdisc": qdisc},
    ]
    work = [{"kind": "bulk", "from": f"{prefix}s", "to": f"{prefix}d", "count": 32}]
    return nodes, links, work


def halves(duration: str) -> dict:
    na, la, wa = _dumbbell_half("a", "fq_codel")
    nb, lb, wb = _dumbbell_half("b", "fq_codel")
    return {"name": "two-halves", "duration": duration, "transport": {"cc": "cubic"},
            "topology": {"kind": "graph", "nodes": na + nb, "links": la + lb},
            "workload": wa + wb, "record": {"interval": "100ms"}}


def parking(duration: str) -> dict:
    routers = ["r0", "r1", "r2", "r3"]
    nodes = routers + ["ls", "ld"] + [f"x{i}" for i in range(3)] + [f"y{i}" for i in range(3)]
    links = [{"name": f"b{i}", "from": routers[i], "to": routers[i + 1], "rate": "300Mbit", "delay": "5ms",
              "qdisc": "fq_codel"} for i in range(3)]
    links += [{"name": "ls", "from": "ls", "to": "r0", "rate": "10Gbit", "delay": "1ms"},
              {"name": "ld", "from": "r3", "to": "ld", "rate": "10Gbit", "delay": "1ms"}]
    work = [{"kind": "bulk", "from": "ls", "to": "ld", "count": 8}]
    for i in range(3):
        links += [{"name": f"x{i}", "from": f"x{i}", "to": routers[i], "rate": "10Gbit", "delay": "1ms"},
                  {"name": f"y{i}", "from": routers[i + 1], "to": f"y{i}", "rate": "10Gbit", "delay": "1ms"}]
        work.append({"kind": "bulk", "from": f"x{i}", "to": f"y{i}", "count": 16})
    return {"name": "parking-lot", "duration": duration, "transport": {"cc": "cubic"},
            "topology": {"kind": "graph", "nodes": nodes, "links": links},
            "workload": work, "record": {"interval": "100ms"}}


def isp(duration: str) -> Path:
    return REPO / "experiments" / "isp" / "scale-10k.toml"


def isp100k(duration: str) -> Path:
    return REPO / "experiments" / "isp" / "scale-100k.toml"


CASES = {"halves": (halves, "10s"), "parking": (parking, "10s"), "isp": (isp, "10s"), "isp100k": (isp100k, "5s")}


def digest(res) -> str:
    h = hashlib.sha256(res.summary_text.encode())
    h.update(res.flows.to_csv(index=False, float_format="%.17g").encode())
    return h.hexdigest()[:16]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", action="append", choices=sorted(CASES), help="a case (repeatable; default all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", help="override every case's duration")
    a = ap.parse_args(argv)
    os.environ["SOJOURN_CUT_ANYWAY"] = "1"
    import sojourn

    print(f"| case | partitions | links cut | lookahead | 1 thread (s) | {a.threads} threads (s) | speed-up | predicted |")
    print("|---|---|---|---|---|---|---|---|")
    for name in a.case or list(CASES):
        make, dur = CASES[name]
        src = make(a.duration or dur)
        # A file keeps its own duration unless --duration says otherwise; the cases' own
        # durations stand for the files too (10 s of scale-10k, 5 s of scale-100k).
        dur_over = {"duration": a.duration or dur} if isinstance(src, Path) else {}
        plan = sojourn.validate(src, overrides={"threads": a.threads, **dur_over})["threads"]
        walls = {1: [], a.threads: []}
        digests = set()
        for _ in range(a.rounds):
            for t in (1, a.threads):
                t0 = time.perf_counter()
                res = sojourn.run(src, overrides={"threads": t, **dur_over})
                walls[t].append(time.perf_counter() - t0)
                digests.add(digest(res))
        if len(digests) != 1:
            print(f"{name}: OUTPUTS DIFFER between 1 and {a.threads} threads", file=sys.stderr)
            return 1
        one, many = statistics.median(walls[1]), statistics.median(walls[a.threads])
        la = plan["lookahead_s"]
        print(f"| {name} | {plan['partitions']} | {plan['cut_links']} | "
              f"{'none' if la is None else f'{la * 1e3:.3g} ms'} | {one:.2f} ({', '.join(f'{w:.2f}' for w in walls[1])}) | "
              f"{many:.2f} ({', '.join(f'{w:.2f}' for w in walls[a.threads])}) | {one / many:.2f}x | "
              f"{plan['predicted_speedup']:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
