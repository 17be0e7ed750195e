"""Is a change of the engine a change of the science? Two engines, the same experiments.

An engine change that is not meant to change what an experiment finds (issue 35's canonical
event order: ties broken by class and entity instead of by filing order) still changes the
bytes of every output. This script shows whether it moved any result beyond the
seed-to-seed spread: it runs every case (each bench row of the ns-3 comparison and each
reproduction page's set-up, bench/engine_equivalence.py's CASES) on several seeds with the
engine that ``import sojourn`` finds, and compares two such collections metric by metric:
bottleneck utilisation, sojourn mean and p99, drops, mean FCT and goodput.

    # the old engine (a checkout of the commit before, its engine built in place)
    PYTHONPATH=../old/python python3 bench/engine_equivalence.py collect --out old.json
    # this one
    python3 bench/engine_equivalence.py collect --out new.json
    python3 bench/engine_equivalence.py compare old.json new.json > table.md

A metric is *within the spread* when the new engine's mean over the seeds lies between the
old engine's smallest and largest value over the same seeds, or the old mean within the new
engine's range (a set-up with no random source, e.g. bulk flows started together, gives the
old engine no seed-to-seed spread at all; the new engine's seeded tie order gives it one).
`compare` lists what falls outside both, with the relative change, rather than a verdict.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
EXP = REPO / "experiments" / "repro"
SEEDS = (1, 2, 3, 4, 5)


def _bench_rows() -> list:
    """The ns-3 comparison's rows in their short form (bench/ns3_compare.py)."""
    sys.path.insert(0, str(REPO / "bench"))
    import ns3_compare as n3  # noqa: E402

    out = []
    for s in n3.scenarios(short=True, max_pairs=16):
        if s.row == "C" and s.flows > 64:
            continue
        out.append({"case": f"bench {s.name}", "config": n3.sojourn_config(s), "link": "bottleneck"})
    return out


def _sweep_points(page: str, file: Path, link: str, duration: Optional[str] = None,
                  warmup: Optional[str] = None, only: Optional[set] = None) -> list:
    from sojourn import sweeps

    plan = sweeps.load_plan(file, repeats=1)
    if duration:
        plan.common["duration"] = duration
    if warmup:
        plan.common["warmup"] = warmup
    out, seen = [], set()
    for point, _seed in plan.runs():
        if point.name in seen or (only and point.name not in only):
            continue
        seen.add(point.name)
        out.append({"case": f"{page} {point.name}", "config": plan.config(point), "link": link,
                    "base_dir": str(file.parent)})
    return out


def cases() -> list:
    """Every bench row, and each reproduction page's set-ups at the length of its cheap
    variant (docs/repro/*.md, "CI")."""
    out = _bench_rows()
    # Seed 000: the 13 configurations of the CI sweep (40 s, 5-s warm-up).
    out += _sweep_points("age-based", EXP / "age-based" / "ci-1g.sweep.toml", "nic")
    # Seed 002: the dumbbell's disciplines, 60 s.
    for q in ("pfifo", "codel", "pie", "fq_codel"):
        out.append({"case": f"operating-ranges dumbbell {q}", "file": str(EXP / "operating-ranges" / "dumbbell.toml"),
                    "duration": "60s", "overrides": {"topology.bottleneck.qdisc": q}, "link": "bottleneck"})
    # Seed 001: the gaming set-up with 5 bulk flows, 40 s.
    for q in ("fq_codel", "codel", "sfq"):
        out.append({"case": f"thin-streams gaming {q}", "file": str(EXP / "thin-streams" / "gaming.toml"),
                    "duration": "40s", "overrides": {"topology.bottleneck.qdisc": q}, "link": "bottleneck"})
    # Seed 003: the CUBIC sweep at 15 s.
    out += _sweep_points("cocoa", EXP / "cocoa" / "cubic-100m.sweep.toml", "bottleneck", duration="15s")
    # Seed 004: one LSTF point and its CoDel base, 60 s.
    out.append({"case": "lstf lstf.toml", "file": str(EXP / "lstf" / "lstf.toml"), "duration": "60s",
                "link": "bottleneck"})
    # L4S: Prague and CUBIC through DualPI2, 15 s.
    out.append({"case": "l4s prague-vs-cubic", "file": str(REPO / "experiments" / "l4s" / "prague-vs-cubic.toml"),
                "duration": "15s", "link": "bottleneck"})
    return out


def metrics(summary: dict, link: str) -> dict:
    lk = summary["links"].get(link)
    if lk is None:  # the busiest link
        lk = max(summary["links"].values(), key=lambda v: v.get("tx_bytes", 0))
    so = lk.get("sojourn_ms", {})
    fl = summary.get("flows", {})
    fct = fl.get("fct_s", {})
    gp = fl.get("goodput_bps", {})
    return {
        "utilisation": lk.get("utilisation"),
        "sojourn_mean_ms": so.get("mean"),
        "sojourn_p99_ms": so.get("p99"),
        "drops": lk.get("drops_total"),
        "fct_mean_ms": None if not fct.get("count") else 1e3 * fct["mean"],
        "goodput_mean_mbps": None if not gp.get("count") else gp["mean"] / 1e6,
    }


def run_case(c: dict, seed: int) -> dict:
    import sojourn

    if "config" in c:
        r = sojourn.run(c["config"], seed=seed, base_dir=c.get("base_dir"))
    else:
        r = sojourn.run(c["file"], seed=seed, duration=c.get("duration"), overrides=c.get("overrides"))
    return metrics(r.summary, c["link"])


def collect(out: Path, only: Optional[str]) -> int:
    import sojourn

    todo = [c for c in cases() if not only or only in c["case"]]
    res: dict[str, Any] = {"engine": getattr(sojourn, "__file__", "?"), "seeds": list(SEEDS), "cases": {}}
    if out.exists():
        res = json.loads(out.read_text())
    t0 = time.time()
    for k, c in enumerate(todo):
        if c["case"] in res["cases"]:
            continue
        res["cases"][c["case"]] = [run_case(c, s) for s in SEEDS]
        out.write_text(json.dumps(res, indent=1))
        print(f"[{k + 1}/{len(todo)}] {c['case']} ({time.time() - t0:.0f} s)", file=sys.stderr)
    return 0


def compare(old_p: Path, new_p: Path) -> int:
    old, new = json.loads(old_p.read_text()), json.loads(new_p.read_text())
    names = ["utilisation", "sojourn_mean_ms", "sojourn_p99_ms", "drops", "fct_mean_ms", "goodput_mean_mbps"]
    short = {"utilisation": "util", "sojourn_mean_ms": "sojourn mean", "sojourn_p99_ms": "sojourn p99",
             "drops": "drops", "fct_mean_ms": "mean FCT", "goodput_mean_mbps": "goodput"}
    print("| case | " + " | ".join(short[n] for n in names) + " |")
    print("|---|" + "---|" * len(names))
    total = same = outside = 0
    worst: list = []
    for case, runs in old["cases"].items():
        if case not in new["cases"]:
            continue
        cells = []
        for n in names:
            o = [r[n] for r in runs if r[n] is not None]
            w = [r[n] for r in new["cases"][case] if r[n] is not None]
            if len(o) < 2 or len(w) < 2:
                cells.append("–")
                continue
            total += 1
            mo, mw = statistics.fmean(o), statistics.fmean(w)
            rel = 0.0 if mo == mw else (mw - mo) / max(abs(mo), 1e-12)
            if o == w:
                same += 1
                cells.append(f"{_fmt(mo)} (same)")
                continue
            # Within: the new mean inside the old engine's range over the seeds, or the old
            # mean inside the new one's (a set-up with no random source has no old spread:
            # only the new engine's seeded tie order varies it).
            inside = min(o) <= mw <= max(o) or min(w) <= mo <= max(w)
            if not inside:
                outside += 1
                worst.append((abs(rel), case, n, o, w))
            cells.append(f"{_fmt(mo)} → {_fmt(mw)} ({100 * rel:+.1f} %)" + ("" if inside else " **out**"))
        print(f"| {case} | " + " | ".join(cells) + " |")
    print()
    fixed = [x for x in worst if min(x[3]) == max(x[3])]
    print(f"{total} metric means over {len(old['seeds'])} seeds compared: {same} identical on every seed, "
          f"{total - same - outside} within the other engine's seed-to-seed range, {outside} outside both ranges"
          f" ({len(fixed)} of them in set-ups the seed does not change at all in the old engine)"
          + (":" if worst else "."))
    for rel, case, n, o, w in sorted(worst, reverse=True):
        tag = " (no seed spread)" if min(o) == max(o) else ""
        print(f"- {case}, {short[n]}{tag}: old {_fmt(min(o))}–{_fmt(max(o))} (mean {_fmt(statistics.fmean(o))}), "
              f"new {_fmt(min(w))}–{_fmt(max(w))} (mean {_fmt(statistics.fmean(w))}), {100 * rel:+.1f} %")
    return 0


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.4g}"


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="run every case on every seed with the engine `import sojourn` finds")
    c.add_argument("--out", required=True, type=Path, help="JSON to write (resumes: cases in it are kept)")
    c.add_argument("--only", default=None, help="only the cases whose name contains this")
    k = sub.add_parser("compare", help="a markdown table: old mean -> new mean per case and metric")
    k.add_argument("old", type=Path)
    k.add_argument("new", type=Path)
    sub.add_parser("list", help="the cases")
    a = ap.parse_args(argv)
    if a.cmd == "collect":
        return collect(a.out, a.only)
    if a.cmd == "compare":
        return compare(a.old, a.new)
    for c in cases():
        print(c["case"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
