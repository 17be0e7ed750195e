"""Seed 003 (Bachl, Fabini, Zseby, "Congestion Control Aware Queuing", 2019): CoCoA vs fq and
fq_codel on one flow through a bridged bottleneck. Regenerates docs/repro/cocoa.md's tables
and plots::

    python -m sojourn.repro.cocoa --update-docs

Runs the four sweeps of ``experiments/repro/cocoa/`` (resumable: finished runs are cached in
``--out``), then prints the tables (markdown) and writes the PNGs under ``<out>/img``
(``--img`` elsewhere). ``--update-docs`` writes the PNGs to docs/repro/img/cocoa and rewrites
the page's generated blocks (sojourn.repro.pages).
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


def _halving_md(t: pd.DataFrame) -> str:
    rows = ["| change | qdisc | throughput before | min / mean SRTT before | throughput after | min / mean SRTT after "
            "| mean queue after |", "|---|---|---|---|---|---|---|"]
    for r in t.sort_values(["change", "qdisc"], ascending=[False, False]).itertuples():
        rows.append(f"| {r.change} | {'CoCoA' if r.qdisc == 'cocoa' else r.qdisc} | {r.thr_mbps_before:.2f} Mbit/s | "
                    f"{r.srtt_min_ms_before:.1f} / {r.srtt_mean_ms_before:.1f} ms | {r.thr_mbps_after:.2f} Mbit/s | "
                    f"{r.srtt_min_ms_after:.1f} / {r.srtt_mean_ms_after:.1f} ms | {r.queue_pkts_after:.1f} pkts |")
    h = t.set_index(["change", "qdisc"])
    fq, co = h.loc[("halved", "fq")], h.loc[("halved", "cocoa")]
    return ("\n".join(rows) + f"\n\nAfter the halving fq's minimum SRTT is **{fq.srtt_min_ms_after:.1f} ms** "
            f"(paper: about {PAPER['fq_min_rtt_after_halving_ms']:.0f} ms), CoCoA's **{co.srtt_min_ms_after:.1f} ms**; "
            f"throughput after the change {fq.thr_mbps_after:.2f} (fq) and {co.thr_mbps_after:.2f} Mbit/s (CoCoA).\n")


def _long_md(agg: pd.DataFrame, key: str, with_mb: bool) -> str:
    rows = []
    if with_mb:
        rows += ["| qdisc | sojourn total | paper total | sojourn mean SRTT | paper average RTT | retransmissions |",
                 "|---|---|---|---|---|---|"]
    else:
        rows += ["| qdisc | total | mean SRTT | paper average RTT |", "|---|---|---|---|"]
    for q in ("fq_codel", "cocoa"):
        pp = PAPER[key].get(q, {})
        name = "CoCoA" if q == "cocoa" else q
        mb, srtt = agg.loc[q, ("MB", "mean")], agg.loc[q, ("srtt_mean_ms", "mean")]
        if with_mb:
            rows.append(f"| {name} | {mb:.0f} MB | {pp['MB']} MB | {srtt:.1f} ms | {pp['rtt_ms']} ms | "
                        f"{agg.loc[q, ('retransmits', 'mean')]:.0f} |")
        else:
            rows.append(f"| {name} | {mb:.0f} MB | {srtt:.1f} ms | {pp['rtt_ms']} ms |")
    g = gain(agg)
    bar = PAPER["cubic_min_gain"] if key == "cubic_100m" else PAPER["reno_100m"]["min_gain"]
    n = int(agg.iloc[0][("MB", "count")])
    std = max(float(agg.loc[q, ("MB", "std")]) if n > 1 else 0.0 for q in ("fq_codel", "cocoa"))
    return ("\n".join(rows) + f"\n\nThroughput gain of CoCoA over fq_codel: **{100 * g:.1f}%** (paper: more than "
            f"{100 * bar:.0f}%); mean over {n} seed(s), largest std of the totals {std:.1f} MB.\n")


def _bbr_md(t: pd.DataFrame) -> str:
    rows = ["| qdisc | throughput 10–30 s | min / mean SRTT | mean queue | throughput 40–60 s | min / mean SRTT | "
            "mean queue |", "|---|---|---|---|---|---|---|"]
    for r in t.itertuples():
        rows.append(f"| {'CoCoA' if r.qdisc == 'cocoa' else r.qdisc} | {r.thr_mbps_before:.1f} Mbit/s | "
                    f"{r.srtt_min_ms_before:.1f} / {r.srtt_mean_ms_before:.1f} ms | {r.queue_pkts_before:.1f} pkts | "
                    f"{r.thr_mbps_after:.1f} Mbit/s | {r.srtt_min_ms_after:.1f} / {r.srtt_mean_ms_after:.1f} ms | "
                    f"{r.queue_pkts_after:.1f} pkts |")
    same = len({(round(r.thr_mbps_after, 6), round(r.srtt_mean_ms_after, 6)) for r in t.itertuples()}) == 1
    return "\n".join(rows) + ("\n\nCoCoA and fq give identical results.\n" if same else
                              "\n\nCoCoA and fq differ.\n")


def page_blocks(out: Path) -> dict:
    """The page's generated blocks from the four sweeps in ``out``."""
    ht, bt = halving_table(out), bbr_table(out)
    _, cagg = long_table(out, "cubic-100m")
    _, ragg = long_table(out, "reno-100m")
    h = ht.set_index(["change", "qdisc"])
    summ = ["| finding | holds in sojourn? |", "|---|---|",
            f"| fq keeps a standing queue after the halving (min RTT ≈ 100 ms) | "
            f"{'yes' if h.loc[('halved', 'fq')].srtt_min_ms_after > 50 else 'no'} "
            f"({h.loc[('halved', 'fq')].srtt_min_ms_after:.1f} ms) |",
            f"| CoCoA keeps the delay near the base RTT at full throughput (halved, doubled) | "
            f"{'yes' if max(h.loc[(c, 'cocoa')].srtt_min_ms_after for c in ('halved', 'doubled')) < 20 else 'no'} "
            f"(min SRTT {h.loc[('halved', 'cocoa')].srtt_min_ms_after:.1f} / "
            f"{h.loc[('doubled', 'cocoa')].srtt_min_ms_after:.1f} ms) |",
            f"| CUBIC 100 Mbit/s 100 ms: CoCoA > 10% more throughput than fq_codel | "
            f"{'yes' if gain(cagg) > 0.10 else ('direction yes' if gain(cagg) > 0 else 'no')}, {100 * gain(cagg):.1f}% |",
            f"| Reno 100 Mbit/s 50 ms: > 20% more, average RTT 51.3 vs 96.8 ms | "
            f"{'yes' if gain(ragg) > 0.20 else 'no'} ({100 * gain(ragg):.1f}%, "
            f"{ragg.loc['fq_codel', ('srtt_mean_ms', 'mean')]:.1f} vs {ragg.loc['cocoa', ('srtt_mean_ms', 'mean')]:.1f} ms) |",
            f"| BBR: no standing queue | mean queue {bt.queue_pkts_after.max():.1f} packets, min SRTT within "
            f"{(bt.srtt_min_ms_before - 10).abs().max():.1f} ms of the base RTT before the change |"]
    return {"halving": _halving_md(ht), "cubic": _long_md(cagg, "cubic_100m", True),
            "reno": _long_md(ragg, "reno_100m", False), "bbr": _bbr_md(bt), "summary": "\n".join(summ) + "\n"}


#: the cheap variant (tests/python/test_repro_pages.py): the halving sweep at full length
#: (4 runs of 60 s, under a second each) and the CUBIC and Reno sweeps cut to 15 s, one seed
def ci_block(out: Path) -> str:
    """Runs the cheap variant into ``out`` and returns the page's ``ci`` block."""
    run_sweep("halving", out, jobs=1)
    ht = halving_table(out)
    rows = ["| run | throughput after (Mbit/s) | min SRTT after (ms) | mean queue after (pkts) |", "|---|---|---|---|"]
    for r in ht.sort_values(["change", "qdisc"]).itertuples():
        rows.append(f"| halving {r.change}+{r.qdisc} | {r.thr_mbps_after:.4f} | {r.srtt_min_ms_after:.3f} | "
                    f"{r.queue_pkts_after:.3f} |")
    for name in ("cubic-100m", "reno-100m"):
        plan = _sweep.load_plan(default_exp_dir() / f"{name}.sweep.toml", repeats=1)
        plan.common["duration"] = "15s"
        _sweep.validate_plan(plan)
        _sweep.run_plan(plan, out / name, jobs=1)
        _sweep.merge(plan, out / name)
        df, _ = long_table(out, name)
        for r in df.sort_values("qdisc").itertuples():
            rows.append(f"| {name} 15 s {r.qdisc} | {r.thr_mbps:.4f} | – | – |")
    return ("The cheap variant (the halving sweep as shipped; the CUBIC and Reno sweeps cut to 15 s, one seed; "
            "`sojourn.repro.cocoa.ci_block`) gives:\n\n" + "\n".join(rows) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sojourn.repro.cocoa", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/repro-cocoa", help="sweep outputs (cached between calls)")
    ap.add_argument("--img", default=None, help="write the PNGs here (default: <out>/img; docs/repro/img/cocoa "
                                                "with --update-docs)")
    ap.add_argument("--update-docs", action="store_true",
                    help="rewrite docs/repro/cocoa.md's generated blocks and its plots (every sweep)")
    ap.add_argument("--exp-dir", default=None, help="experiments/repro/cocoa (default: the source tree's)")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None, help="override the Reno sweep's 10 repeats")
    ap.add_argument("--only", nargs="*", choices=SWEEPS, default=list(SWEEPS))
    a = ap.parse_args(argv)
    if a.update_docs and (a.exp_dir or a.repeats is not None or list(a.only) != list(SWEEPS)):
        ap.error("--update-docs regenerates the page from every sweep as shipped: no --exp-dir/--repeats/--only")
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
    from . import pages

    img = pages.plot_dir(out, a.img, a.update_docs, "cocoa")
    if True:
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
    print(f"plots: {img}")
    if a.update_docs:
        blocks = {"provenance": pages.provenance("cocoa"), **page_blocks(out), "ci": ci_block(out / "ci")}
        pages.replace_blocks(pages.DOCS / "cocoa.md", blocks)
        print(f"updated {pages.DOCS / 'cocoa.md'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
