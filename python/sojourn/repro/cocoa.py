"""Seed 003 (Bachl, Fabini, Zseby, "Congestion Control Aware Queuing", 2019): CoCoA vs fq and
fq_codel on one flow through a bridged bottleneck. Regenerates docs/repro/cocoa.md's tables
and plots::

    python -m sojourn.repro.cocoa --out results/repro-cocoa --img docs/repro/img/cocoa

Runs the four sweeps of ``experiments/repro/cocoa/`` (resumable: finished runs are cached in
``--out``), then prints the tables (markdown) and writes the PNGs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .. import sweeps as _sweep
from ..results import Result

SWEEPS = ("halving", "bbr", "cubic-100m", "reno-100m")

# The paper's numbers (seed 003, section 4 and the captions of Figures 4, 7 and 8).
PAPER = {
    "fq_min_rtt_after_halving_ms": 100.0,     # Fig. 4 caption: "the minimum delay is 100 ms"
    "cubic_100m": {"fq_codel": {"MB": 2615, "rtt_ms": 101.61},   # Fig. 7 caption
                   "cocoa": {"MB": 2893, "rtt_ms": 130.36}},      # Fig. 8 caption
    "reno_100m": {"fq_codel": {"rtt_ms": 51.34}, "cocoa": {"rtt_ms": 96.78},  # section 4 text
                  "min_gain": 0.20},                                          # "> 20% higher"
    "cubic_min_gain": 0.10,                                                    # "> 10% higher"
}


def default_exp_dir() -> Path:
    """experiments/repro/cocoa of the source tree this module lives in, else of the cwd."""
    here = Path(__file__).resolve().parents[3] / "experiments" / "repro" / "cocoa"
    return here if here.is_dir() else Path("experiments/repro/cocoa")


def run_sweep(name: str, out: Path, exp_dir: Optional[Path] = None, jobs: Optional[int] = None,
              repeats: Optional[int] = None) -> pd.DataFrame:
    """Runs (or resumes) one sweep of the directory; returns its runs table."""
    exp_dir = exp_dir or default_exp_dir()
    return _sweep.run_sweep(exp_dir / f"{name}.sweep.toml", out / name, jobs=jobs, repeats=repeats)


def window(s: pd.Series, t0: float, t1: float) -> pd.Series:
    return s[(s.index > t0) & (s.index <= t1)]


def run_stats(run_dir: Path, windows: Sequence[tuple]) -> dict:
    """Per time window (label, t0, t1): throughput at the bottleneck (Mbit/s), sender SRTT
    min/mean (ms), mean bottleneck queue (packets)."""
    r = Result.read(run_dir)
    thr = r.series("bottleneck", "throughput_bps") / 1e6
    srtt = r.series("flow0", "srtt_ms")
    q = r.series("bottleneck", "queue_packets")
    out = {}
    for label, t0, t1 in windows:
        out[label] = {
            "thr_mbps": float(window(thr, t0, t1).mean()),
            "srtt_min_ms": float(window(srtt, t0, t1).min()),
            "srtt_mean_ms": float(window(srtt, t0, t1).mean()),
            "queue_pkts": float(window(q, t0, t1).mean()),
        }
    return out


def halving_table(out: Path) -> pd.DataFrame:
    """Figures 4-6: before (10-30 s) and after (40-60 s) the rate change."""
    rows = []
    runs = pd.read_parquet(out / "halving" / "runs.parquet")
    for _, r in runs.iterrows():
        st = run_stats(out / "halving" / r.run_dir, [("before", 10, 30), ("after", 40, 60)])
        rows.append({"change": r.variant, "qdisc": r.qdisc,
                     **{f"{k}_{w}": v for w, d in st.items() for k, v in d.items()}})
    return pd.DataFrame(rows)


def bbr_table(out: Path) -> pd.DataFrame:
    rows = []
    runs = pd.read_parquet(out / "bbr" / "runs.parquet")
    for _, r in runs.iterrows():
        st = run_stats(out / "bbr" / r.run_dir, [("before", 10, 30), ("after", 40, 60)])
        rows.append({"qdisc": r.qdisc, **{f"{k}_{w}": v for w, d in st.items() for k, v in d.items()}})
    return pd.DataFrame(rows)


def long_table(out: Path, name: str) -> pd.DataFrame:
    """CUBIC/Reno at 100 Mbit/s for 240 s: total bytes, throughput, time-average SRTT and
    mean of per-packet one-way delay, mean ± std over the seeds."""
    runs = pd.read_parquet(out / name / "runs.parquet")
    rows = []
    for _, r in runs.iterrows():
        res = Result.read(out / name / r.run_dir)
        srtt = res.series("flow0", "srtt_ms")
        fl = res.flows.iloc[0]
        rows.append({"qdisc": r.qdisc, "seed": r.seed, "MB": r.throughput_bps * r.duration_s / 8e6,
                     "thr_mbps": r.throughput_bps / 1e6, "goodput_mbps": fl.goodput_bps / 1e6,
                     "srtt_mean_ms": float(srtt.mean()), "owd_mean_ms": float(fl.mean_delay_ms),
                     "retransmits": int(fl.retransmits), "drops": int(r.drops)})
    df = pd.DataFrame(rows)
    agg = df.groupby("qdisc").agg(["mean", "std", "count"])
    return df, agg


def gain(agg: pd.DataFrame, col: str = "thr_mbps") -> float:
    """CoCoA's relative throughput gain over fq_codel."""
    return float(agg.loc["cocoa", (col, "mean")] / agg.loc["fq_codel", (col, "mean")] - 1)


def plot_runs(out: Path, name: str, points: Sequence[str], png: Path, title: str, limit: bool = True) -> None:
    """Throughput and sender SRTT over time (and CoCoA's learned limit), one line per point,
    like the paper's (a)/(b) panels."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = 3 if limit else 2
    fig, ax = plt.subplots(n, 1, figsize=(7, 2.1 * n), sharex=True)
    for p in points:
        r = Result.read(out / name / "runs" / p / "seed-1")
        thr = r.series("bottleneck", "throughput_bps") / 1e6
        srtt = r.series("flow0", "srtt_ms")
        ax[0].plot(thr.index, thr.values, lw=0.8, label=p)
        ax[1].plot(srtt.index, srtt.values, lw=0.8, label=p)
        if limit:
            try:
                lim = r.series("bottleneck", "flow0.limit")
                ax[2].plot(lim.index, lim.values, lw=0.8, label=f"{p}: learned limit")
            except (KeyError, ValueError):
                pass
            q = r.series("bottleneck", "queue_packets")
            ax[2].plot(q.index, q.values, lw=0.6, alpha=0.7, label=f"{p}: queue")
    ax[0].set_ylabel("throughput (Mbit/s)")
    ax[1].set_ylabel("sender SRTT (ms)")
    ax[0].set_title(title, fontsize=9)
    ax[0].legend(fontsize=7)
    ax[1].legend(fontsize=7)
    if limit:
        ax[2].set_ylabel("packets")
        ax[2].legend(fontsize=7)
    ax[-1].set_xlabel("time (s)")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=80)
    plt.close(fig)


def md(df: pd.DataFrame, floatfmt: str = ".2f") -> str:
    try:
        return df.to_markdown(index=False, floatfmt=floatfmt)
    except ImportError:  # tabulate missing
        return df.to_string(index=False)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sojourn.repro.cocoa", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/repro-cocoa", help="sweep outputs (cached between calls)")
    ap.add_argument("--img", default=None, help="write the PNGs here (e.g. docs/repro/img/cocoa)")
    ap.add_argument("--exp-dir", default=None, help="experiments/repro/cocoa (default: the source tree's)")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None, help="override the Reno sweep's 10 repeats")
    ap.add_argument("--only", nargs="*", choices=SWEEPS, default=list(SWEEPS))
    a = ap.parse_args(argv)
    out = Path(a.out)
    exp = Path(a.exp_dir) if a.exp_dir else None
    walls = {}
    for name in a.only:
        t0 = time.perf_counter()
        run_sweep(name, out, exp, jobs=a.jobs, repeats=a.repeats if name == "reno-100m" else None)
        walls[name] = time.perf_counter() - t0
    report = {}
    if "halving" in a.only:
        t = halving_table(out)
        print("## Rate halved / doubled at 30 s (CUBIC, 20 Mbit/s, 10 ms)\n")
        print(md(t[["change", "qdisc", "thr_mbps_before", "srtt_min_ms_before", "srtt_mean_ms_before",
                    "thr_mbps_after", "srtt_min_ms_after", "srtt_mean_ms_after", "queue_pkts_after"]]))
        print()
        report["halving"] = t.to_dict("records")
    if "bbr" in a.only:
        t = bbr_table(out)
        print("## BBR v1, 50 Mbit/s, base RTT 10 ms halved at 30 s\n")
        print(md(t[["qdisc", "thr_mbps_before", "srtt_min_ms_before", "srtt_mean_ms_before", "queue_pkts_before",
                    "thr_mbps_after", "srtt_min_ms_after", "srtt_mean_ms_after", "queue_pkts_after"]]))
        print()
        report["bbr"] = t.to_dict("records")
    for name, key in (("cubic-100m", "cubic_100m"), ("reno-100m", "reno_100m")):
        if name not in a.only:
            continue
        df, agg = long_table(out, name)
        print(f"## {name}: 240 s, mean (std) over {int(agg.iloc[0][('MB', 'count')])} seed(s)\n")
        rows = []
        for q in agg.index:
            pp = PAPER[key].get(q, {})
            rows.append({"qdisc": q, "MB": agg.loc[q, ("MB", "mean")], "MB std": agg.loc[q, ("MB", "std")],
                         "paper MB": pp.get("MB", float("nan")),
                         "SRTT mean (ms)": agg.loc[q, ("srtt_mean_ms", "mean")],
                         "paper avg RTT (ms)": pp.get("rtt_ms", float("nan")),
                         "one-way delay (ms)": agg.loc[q, ("owd_mean_ms", "mean")],
                         "retransmits": agg.loc[q, ("retransmits", "mean")]})
        print(md(pd.DataFrame(rows)))
        g = gain(agg)
        print(f"\nCoCoA throughput gain over fq_codel: {100 * g:.1f}% "
              f"(paper: > {100 * (PAPER['cubic_min_gain'] if key == 'cubic_100m' else PAPER['reno_100m']['min_gain']):.0f}%)\n")
        report[key] = {"gain": g, "runs": df.to_dict("records")}
    if a.img:
        img = Path(a.img)
        if "halving" in a.only:
            plot_runs(out, "halving", ["halved+fq", "halved+cocoa"], img / "halved.png",
                      "CUBIC, 20 Mbit/s halved at 30 s, base RTT 10 ms (paper Fig. 4, 5)")
            plot_runs(out, "halving", ["doubled+fq", "doubled+cocoa"], img / "doubled.png",
                      "CUBIC, 20 Mbit/s doubled at 30 s, base RTT 10 ms (paper Fig. 6)")
        if "bbr" in a.only:
            plot_runs(out, "bbr", ["fq", "cocoa"], img / "bbr.png",
                      "BBR v1, 50 Mbit/s, base RTT 10 ms halved at 30 s (paper Fig. 9)")
        if "cubic-100m" in a.only:
            plot_runs(out, "cubic-100m", ["fq_codel", "cocoa"], img / "cubic-100m.png",
                      "CUBIC, 100 Mbit/s, base RTT 100 ms (paper Fig. 7, 8)")
        if "reno-100m" in a.only:
            plot_runs(out, "reno-100m", ["fq_codel", "cocoa"], img / "reno-100m.png",
                      "Reno, 100 Mbit/s, base RTT 50 ms (seed 1 of the sweep)")
    print("wall seconds per sweep (this call, cached runs cost nothing): "
          + ", ".join(f"{k} {v:.1f}" for k, v in walls.items()))
    (out / "report.json").write_text(json.dumps(report, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
