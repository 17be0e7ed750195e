"""Seed 004 (C. Ford, "LSTFCoDel: CoDel with LSTF-Style Priority Queuing", 2019): CoDel vs
LSTFCoDel on the paper's FTP + CBR topology, Tables II-VI. Generates docs/repro/lstf.md::

    python -m sojourn.repro.lstf --update-docs       # runs the sweep, rewrites the page
    python -m sojourn.repro.lstf --out results/repro-lstf-3d --duration 259200s \\
        --only literal-codel literal-a0.5 --sample 0.02 --interval 1s   # the paper's 3 days

Runs ``experiments/repro/lstf/lstf.sweep.toml`` (resumable), then prints per setting
(``literal``: the seed's 100 s / 5 s; ``intended``: 100 ms / 5 ms) and per discipline the
mean, variance and standard deviation of the queueing delay (s), the queue length (bytes)
and the slack (s), next to the paper's numbers, and whether LSTFCoDel's mean delay is lower
than CoDel's. Statistics cover t >= ``--from`` (default 300 s, when the CBR source starts).
The plot goes to ``<out>/img`` (``--img`` elsewhere); ``--update-docs`` writes it to
docs/repro/img/lstf and rewrites the page's generated blocks (sojourn.repro.pages).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .. import sweeps as _sweep
from ..results import Result

ALPHAS = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875)

# The paper's tables, transcribed from the paper's text (C. Ford 2019, docs/repro/lstf.md; section IV). Units:
# delay and slack in seconds, queue length in bytes. The text extraction lost some cells
# (None): Table II's variance, Table IV's middle column (the two surviving numbers are the
# mean and the standard deviation: the text says LSTFCoDel's variance and std are "much
# higher" than CoDel's 557,311 B^2 / 746.5 B, which only (mean, std) satisfies), and the
# alpha = 0.125 labels of Tables IV-VI (the first row of each).
PAPER_CODEL_DELAY = {"mean": 0.03532900, "var": None, "std": 0.00228407}          # Table II
PAPER_CODEL_QUEUE = {"mean": 7593.77, "var": 557311.0, "std": 746.532}            # Table III
PAPER_LSTF_QUEUE = {                                                              # Table IV
    0.125: (1598.87, None, 2026.99), 0.25: (1512.69, None, 1944.11), 0.375: (1754.56, None, 2611.96),
    0.5: (1370.88, None, 1790.78), 0.625: (1722.86, None, 2282.86), 0.75: (1608.45, None, 2039.29),
    0.875: (1682.16, None, 1861.80)}
PAPER_LSTF_DELAY = {                                                              # Table V
    0.125: (0.01051590, 0.000713601, 0.0267133), 0.25: (0.00984854, 0.000736556, 0.0271396),
    0.375: (0.01158550, 0.001640950, 0.0405087), 0.5: (0.00859185, 0.000328906, 0.0181358),
    0.625: (0.01101150, 0.000932091, 0.0305302), 0.75: (0.01051490, 0.000859984, 0.0293255),
    0.875: (0.01128840, 0.000844949, 0.0290680)}
PAPER_LSTF_SLACK = {                                                              # Table VI
    0.125: (0.00703307, 0.000136175, 0.0116694), 0.25: (0.00677347, 0.000203010, 0.0142482),
    0.375: (0.00895621, 0.000665736, 0.0258019), 0.5: (0.00509139, 0.000113650, 0.0106607),
    0.625: (0.00770287, 0.000433476, 0.0208201), 0.75: (0.00742405, 0.000457980, 0.0214005),
    0.875: (0.00816796, 0.000540324, 0.0232449)}


def default_exp_dir() -> Path:
    here = Path(__file__).resolve().parents[3] / "experiments" / "repro" / "lstf"
    return here if here.is_dir() else Path("experiments/repro/lstf")


def parse_point(name: str) -> tuple:
    """'literal-a0.5' -> ('literal', 0.5); 'intended-codel' -> ('intended', None)."""
    setting, q = name.split("-", 1)
    return setting, (None if q == "codel" else float(q[1:]))


def run(out: Path, exp_dir: Optional[Path] = None, jobs: Optional[int] = None, only: Optional[Sequence[str]] = None,
        duration: Optional[str] = None, sample: Optional[float] = None, interval: Optional[str] = None) -> pd.DataFrame:
    """Runs (or resumes) the sweep, optionally a subset of its points with another duration,
    packet sample fraction or time-series interval."""
    exp_dir = exp_dir or default_exp_dir()
    plan = _sweep.load_plan(exp_dir / "lstf.sweep.toml")
    if duration:
        plan.common["duration"] = duration
    if sample is not None:
        plan.common["record.packet_sample"] = sample
    if interval:
        plan.common["record.interval"] = interval
    if only:
        plan.points = [p for p in plan.points if p.name in set(only)]
        if not plan.points:
            raise SystemExit(f"no sweep point among {list(only)}")
    _sweep.validate_plan(plan)
    st = _sweep.run_plan(plan, out, jobs=jobs)
    if st["failed"]:
        raise RuntimeError(st["failed"])
    return _sweep.merge(plan, out)


def mvs(x: np.ndarray) -> tuple:
    """(mean, variance, std) of a sample (population variance, as the paper's Welford)."""
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    v = float(x.var())
    return (float(x.mean()), v, math.sqrt(v))


def run_stats(run_dir: Path, t_from: float = 300.0) -> dict:
    """Per-packet queueing delay (s) of the packets the bottleneck dequeued at t >= t_from,
    time-sampled queue length (bytes) and slack (s), TCP goodput and retransmissions."""
    r = Result.read(run_dir)
    p = r.packets
    deq = p[(p.event == "dequeue") & (p.time_s >= t_from)]
    q = r.series("bottleneck", "queue_bytes")
    q = q[q.index >= t_from]
    try:
        slack = r.series("bottleneck", "slack_ms")
        slack = slack[slack.index >= t_from] / 1e3
    except (KeyError, ValueError):
        slack = pd.Series(dtype=float)
    fl = r.flows.set_index("kind")
    tcp = fl.loc["tcp"]
    b = r.summary["links"]["bottleneck"]
    d = mvs(deq.sojourn_ms.to_numpy() / 1e3)
    ql = mvs(q.to_numpy())
    sl = mvs(slack.to_numpy()) if len(slack) else (math.nan,) * 3
    return {"delay_mean_s": d[0], "delay_var_s2": d[1], "delay_std_s": d[2],
            "delay_max_s": float(deq.sojourn_ms.max() / 1e3) if len(deq) else math.nan,
            "queue_mean_B": ql[0], "queue_var_B2": ql[1], "queue_std_B": ql[2],
            "slack_mean_s": sl[0], "slack_var_s2": sl[1], "slack_std_s": sl[2],
            "tcp_goodput_kbps": float(tcp.goodput_bps / 1e3), "tcp_retransmits": int(tcp.retransmits),
            "tcp_rtos": int(tcp.rtos), "drops_aqm": int(b["drops"].get("aqm", 0)),
            "drops_overlimit": int(b["drops"].get("overlimit", 0)), "utilisation": float(b["utilisation"]),
            "packets_logged": int(len(deq)), "duration_s": float(r.summary["duration_s"])}


def table(out: Path, t_from: float = 300.0) -> pd.DataFrame:
    runs = pd.read_parquet(out / "runs.parquet")
    rows = []
    for _, r in runs.iterrows():
        setting, alpha = parse_point(r.point)
        rows.append({"setting": setting, "qdisc": "codel" if alpha is None else "lstf_codel", "alpha": alpha,
                     **run_stats(out / r.run_dir, t_from)})
    df = pd.DataFrame(rows)
    df["_o"] = df.alpha.fillna(-1)
    df = df.sort_values(["setting", "_o"], ascending=[False, True]).drop(columns="_o").reset_index(drop=True)
    # LSTFCoDel's claim: lower mean delay than CoDel of the same setting.
    codel = df[df.qdisc == "codel"].set_index("setting").delay_mean_s
    df["lower_delay_than_codel"] = [None if r.qdisc == "codel" or r.setting not in codel.index
                                    else bool(r.delay_mean_s < codel[r.setting]) for r in df.itertuples()]
    return df


def paper_table() -> pd.DataFrame:
    rows = [{"qdisc": "codel", "alpha": None, "delay_mean_s": PAPER_CODEL_DELAY["mean"],
             "delay_var_s2": PAPER_CODEL_DELAY["var"], "delay_std_s": PAPER_CODEL_DELAY["std"],
             "queue_mean_B": PAPER_CODEL_QUEUE["mean"], "queue_var_B2": PAPER_CODEL_QUEUE["var"],
             "queue_std_B": PAPER_CODEL_QUEUE["std"]}]
    for a in ALPHAS:
        d, q, s = PAPER_LSTF_DELAY[a], PAPER_LSTF_QUEUE[a], PAPER_LSTF_SLACK[a]
        rows.append({"qdisc": "lstf_codel", "alpha": a, "delay_mean_s": d[0], "delay_var_s2": d[1], "delay_std_s": d[2],
                     "queue_mean_B": q[0], "queue_var_B2": q[1], "queue_std_B": q[2],
                     "slack_mean_s": s[0], "slack_var_s2": s[1], "slack_std_s": s[2]})
    return pd.DataFrame(rows)


def plot(out: Path, png: Path, df: pd.DataFrame) -> None:
    """Mean queueing delay and TCP goodput per alpha, CoDel as a horizontal line, per setting,
    with the paper's numbers."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
    pt = paper_table()
    for setting, c in (("literal", "C0"), ("intended", "C1")):
        d = df[df.setting == setting]
        if d.empty:
            continue
        l = d[d.qdisc == "lstf_codel"]
        ax[0].plot(l.alpha, l.delay_mean_s * 1e3, "o-", color=c, label=f"LSTFCoDel ({setting})")
        ax[1].plot(l.alpha, l.tcp_goodput_kbps, "o-", color=c, label=f"LSTFCoDel ({setting})")
        cd = d[d.qdisc == "codel"]
        if len(cd):
            ax[0].axhline(cd.delay_mean_s.iloc[0] * 1e3, color=c, ls="--", label=f"CoDel ({setting})")
            ax[1].axhline(cd.tcp_goodput_kbps.iloc[0], color=c, ls="--", label=f"CoDel ({setting})")
    pl = pt[pt.qdisc == "lstf_codel"]
    ax[0].plot(pl.alpha, pl.delay_mean_s * 1e3, "s:", color="k", label="LSTFCoDel (paper)")
    ax[0].axhline(PAPER_CODEL_DELAY["mean"] * 1e3, color="k", ls=":", label="CoDel (paper)")
    ax[0].set_xlabel("alpha (forgetfulness)")
    ax[0].set_ylabel("mean queueing delay (ms)")
    ax[1].set_xlabel("alpha (forgetfulness)")
    ax[1].set_ylabel("TCP goodput (kbit/s)")
    ax[0].legend(fontsize=6)
    ax[1].legend(fontsize=6)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=80)
    plt.close(fig)


def _fmt(df: pd.DataFrame) -> str:
    return df.to_string(index=False, float_format=lambda v: f"{v:.6g}")


def _n(x, fmt: str) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _alpha(r) -> str:
    return "–" if r.qdisc == "codel" else f"{r.alpha:g}"


def _name(q: str) -> str:
    return "CoDel" if q == "codel" else "LSTFCoDel"


def md_tables(df: pd.DataFrame) -> dict:
    """The page's result tables (blocks ``delay``, ``queue``, ``slack``)."""
    def paper(alpha):
        if alpha is None or (isinstance(alpha, float) and math.isnan(alpha)):
            return PAPER_CODEL_DELAY["mean"], PAPER_CODEL_DELAY["var"], PAPER_CODEL_DELAY["std"]
        return PAPER_LSTF_DELAY[alpha]

    d = ["| setting | qdisc | α | mean | variance | std | max | lower? | paper mean | paper var | paper std |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    q = ["| setting | qdisc | α | mean | variance | std | paper mean | paper std |", "|---|---|---|---|---|---|---|---|"]
    sl = ["| setting | qdisc | α | slack mean | slack std | paper slack mean / std | TCP goodput (kbit/s) | TCP "
          "retransmissions | AQM drops | tail drops | utilisation |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in df.itertuples():
        lit = r.setting == "literal"
        a = None if r.qdisc == "codel" else r.alpha
        pm, pv, ps = paper(a) if lit else (None, None, None)
        lower = "" if r.lower_delay_than_codel is None else ("yes" if r.lower_delay_than_codel else "**no**")
        d.append(f"| {r.setting} | {_name(r.qdisc)} | {_alpha(r)} | {r.delay_mean_s:.5f} | {r.delay_var_s2:.2e} | "
                 f"{r.delay_std_s:.3g} | {r.delay_max_s:.2g} | {lower} | {_n(pm, '.5f')} | "
                 f"{_n(pv, '.2e') if lit and pv is not None else ('(lost)' if lit else '')} | {_n(ps, '.3g')} |")
        if lit:
            pq = PAPER_CODEL_QUEUE if a is None else dict(zip(("mean", "var", "std"), PAPER_LSTF_QUEUE[a]))
            pqm, pqs = f"{pq['mean']:.0f}", f"{pq['std']:.0f}"
        else:
            pqm = pqs = ""
        q.append(f"| {r.setting} | {_name(r.qdisc)} | {_alpha(r)} | {r.queue_mean_B:.0f} | {r.queue_var_B2:.3g} | "
                 f"{r.queue_std_B:.0f} | {pqm} | {pqs} |")
        pslack = f"{PAPER_LSTF_SLACK[a][0]:.4f} / {PAPER_LSTF_SLACK[a][2]:.4f}" if lit and a is not None else ""
        sl.append(f"| {r.setting} | {_name(r.qdisc)} | {_alpha(r)} | {_n(r.slack_mean_s, '.4f')} | "
                  f"{_n(r.slack_std_s, '.4f')} | {pslack} | {r.tcp_goodput_kbps:.0f} | {r.tcp_retransmits} | "
                  f"{r.drops_aqm} | {r.drops_overlimit} | {100 * r.utilisation:.1f}% |")
    return {"delay": "\n".join(d) + "\n", "queue": "\n".join(q) + "\n", "slack": "\n".join(sl) + "\n"}


def _alist(xs) -> str:
    xs = [f"{x:g}" for x in xs]
    return "none" if not xs else ", ".join(xs)


def md_findings(df: pd.DataFrame) -> str:
    """The page's numeric findings (block ``findings``), computed from the table."""
    out = []
    c = df[(df.setting == "literal") & (df.qdisc == "codel")].iloc[0]
    out.append(f"- CoDel, literal settings: mean delay {c.delay_mean_s * 1e3:.1f} ms (paper "
               f"{PAPER_CODEL_DELAY['mean'] * 1e3:.1f}), std {c.delay_std_s * 1e3:.2f} ms (paper "
               f"{PAPER_CODEL_DELAY['std'] * 1e3:.2f}); queue {c.queue_mean_B:.0f} B (paper "
               f"{PAPER_CODEL_QUEUE['mean']:.0f}), std {c.queue_std_B:.0f} B (paper {PAPER_CODEL_QUEUE['std']:.0f}); "
               f"{c.drops_aqm + c.drops_overlimit} drops, utilisation {100 * c.utilisation:.1f}%.")
    for setting in ("literal", "intended"):
        d = df[df.setting == setting]
        l = d[d.qdisc == "lstf_codel"]
        if l.empty:
            continue
        cd = d[d.qdisc == "codel"].iloc[0]
        yes = l[l.lower_delay_than_codel == True].alpha  # noqa: E712
        no = l[l.lower_delay_than_codel == False].alpha  # noqa: E712
        out.append(f"- LSTFCoDel's mean delay is below CoDel's ({cd.delay_mean_s * 1e3:.1f} ms) in the {setting} "
                   f"setting for {'every α' if no.empty else 'α = ' + _alist(yes)}"
                   f"{'' if no.empty else ', not for α = ' + _alist(no)}: "
                   f"{l.delay_mean_s.min() * 1e3:.1f}–{l.delay_mean_s.max() * 1e3:.1f} ms; its delay variance is "
                   f"{(l.delay_var_s2 / cd.delay_var_s2).min():.0f}–{(l.delay_var_s2 / cd.delay_var_s2).max():.0f}× "
                   f"CoDel's; AQM drops {int(l.drops_aqm.sum())} (CoDel: {int(cd.drops_aqm)}).")
    l = df[(df.setting == "literal") & (df.qdisc == "lstf_codel")]
    if len(l):
        out.append(f"- Literal settings, TCP under LSTFCoDel: {l.tcp_retransmits.min()}–{l.tcp_retransmits.max()} "
                   f"retransmissions (CoDel: {c.tcp_retransmits}) with "
                   f"{int(l.drops_aqm.sum() + l.drops_overlimit.sum())} packets dropped anywhere at the bottleneck; "
                   f"goodput {l.tcp_goodput_kbps.min():.0f}–{l.tcp_goodput_kbps.max():.0f} kbit/s (CoDel "
                   f"{c.tcp_goodput_kbps:.0f}); utilisation {100 * l.utilisation.min():.0f}–{100 * l.utilisation.max():.0f}% "
                   f"(CoDel {100 * c.utilisation:.0f}%).")
        best = l.loc[l.delay_mean_s.idxmin()]
        ratio = [r.delay_mean_s / PAPER_LSTF_DELAY[r.alpha][0] for r in l.itertuples()]
        out.append(f"- Lowest mean delay: α = {best.alpha:g} ({best.delay_mean_s * 1e3:.2f} ms; the paper's best is "
                   f"α = 0.5). sojourn's LSTFCoDel mean delays are {min(ratio):.2f}–{max(ratio):.2f}× the paper's.")
    return "\n".join(out) + "\n"


#: the page's cheap variant (what tests/python/test_repro_pages.py re-runs): four points,
#: 320 simulated seconds (20 s after the CBR starts), statistics from 300 s
CI_POINTS = ["literal-codel", "literal-a0.5", "intended-codel", "intended-a0.5"]
CI_DURATION = "320s"


def ci_block(out: Path) -> str:
    """Runs the cheap variant into ``out`` and returns the page's ``ci`` block."""
    run(out, only=CI_POINTS, duration=CI_DURATION, interval="50ms", jobs=1)
    df = table(out)
    rows = ["| point | mean delay (s) | delay std (s) | mean queue (B) | TCP goodput (kbit/s) | TCP retransmissions |",
            "|---|---|---|---|---|---|"]
    for r in df.itertuples():
        point = f"{r.setting}-{'codel' if r.qdisc == 'codel' else f'a{r.alpha:g}'}"
        rows.append(f"| {point} | {r.delay_mean_s:.6f} | {r.delay_std_s:.6f} | {r.queue_mean_B:.1f} | "
                    f"{r.tcp_goodput_kbps:.2f} | {r.tcp_retransmits} |")
    return (f"The cheap variant (points {', '.join(CI_POINTS)}, {CI_DURATION} simulated, statistics from 300 s; "
            "`sojourn.repro.lstf.ci_block`) gives:\n\n" + "\n".join(rows) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    from . import pages

    ap = argparse.ArgumentParser(prog="python -m sojourn.repro.lstf", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/repro-lstf")
    ap.add_argument("--img", default=None, help="write lstf.png here (default: <out>/img; docs/repro/img/lstf "
                                                "with --update-docs)")
    ap.add_argument("--update-docs", action="store_true",
                    help="rewrite docs/repro/lstf.md's generated blocks and its plot (full sweep only)")
    ap.add_argument("--exp-dir", default=None)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--only", nargs="*", default=None, help="sweep points (e.g. literal-codel literal-a0.5)")
    ap.add_argument("--duration", default=None, help='override the run length (file: "3600s")')
    ap.add_argument("--sample", type=float, default=None, help="packet log sample fraction (long runs)")
    ap.add_argument("--interval", default=None, help='time-series interval (file: "10ms")')
    ap.add_argument("--from", dest="t_from", type=float, default=300.0, help="statistics from this time (s)")
    a = ap.parse_args(argv)
    if a.update_docs and (a.only or a.duration or a.sample is not None or a.interval or a.exp_dir or a.t_from != 300.0):
        ap.error("--update-docs regenerates the page from the full sweep: no --only/--duration/--sample/"
                 "--interval/--exp-dir/--from")
    out = Path(a.out)
    t0 = time.perf_counter()
    run(out, Path(a.exp_dir) if a.exp_dir else None, a.jobs, a.only, a.duration, a.sample, a.interval)
    wall = time.perf_counter() - t0
    df = table(out, a.t_from)
    pd.set_option("display.width", 250)
    cols = ["setting", "qdisc", "alpha", "delay_mean_s", "delay_var_s2", "delay_std_s", "delay_max_s",
            "lower_delay_than_codel"]
    print(f"## Queueing delay (s), t >= {a.t_from:g} s (paper: Tables II and V)\n")
    print(_fmt(df[cols]))
    print(f"\n## Queue length (bytes, sampled every record interval), t >= {a.t_from:g} s (paper: Tables III and IV)\n")
    print(_fmt(df[["setting", "qdisc", "alpha", "queue_mean_B", "queue_var_B2", "queue_std_B"]]))
    print("\n## Slack (s) (paper: Table VI) and the TCP flow\n")
    print(_fmt(df[["setting", "qdisc", "alpha", "slack_mean_s", "slack_std_s", "tcp_goodput_kbps",
                   "tcp_retransmits", "tcp_rtos", "drops_aqm", "drops_overlimit", "utilisation"]]))
    print("\n## The paper (seed 004, Tables II-VI; literal settings, 3 simulated days)\n")
    print(_fmt(paper_table()))
    print(f"\nwall seconds (this call; cached runs cost nothing): {wall:.1f}")
    img = pages.plot_dir(out, a.img, a.update_docs, "lstf")
    plot(out, img / "lstf.png", df)
    print(f"plot: {img / 'lstf.png'}")
    (out / "report.json").write_text(json.dumps({"rows": df.to_dict("records"), "wall_s": wall}, indent=1,
                                                default=str) + "\n")
    if a.update_docs:
        blocks = {"provenance": pages.provenance("lstf"), "findings": md_findings(df), **md_tables(df),
                  "ci": ci_block(out / "ci")}
        pages.replace_blocks(pages.DOCS / "lstf.md", blocks)
        print(f"updated {pages.DOCS / 'lstf.md'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
