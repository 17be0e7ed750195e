"""Seed 002 reproduction: Kuhn et al., "Operating ranges, tunability and performance of
CoDel and PIE" (Computer Communications 2016). docs/repro/operating-ranges.md.

Regenerate everything (sweeps are resumable; the plots and tables need only the results)::

    python -m sojourn.repro.operating_ranges --run --jobs 2

Reads the sweep outputs under ``--results`` (default ``results/operating-ranges/<sweep>``),
writes the figures (PNG) and ``summary.md`` (every number quoted in the doc) to ``--out``
(default ``docs/repro/img/operating-ranges``).

The seed's plot style (its Figure 2): for every configuration a box spanning the first to
third quartile of the queueing delay minus the target (x, Δ = δ − τ) and of the bottleneck
utilisation averaged over 5 s (y), with the two medians as a point.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[3]
if not (REPO / "experiments").is_dir():
    # An installed package: use the checkout in the working directory (as the docs do).
    REPO = Path.cwd().resolve()
EXP_DIR = REPO / "experiments" / "repro" / "operating-ranges"
SWEEPS = ["congestion", "rtt", "capacity", "target", "interval", "pie-dynamics", "mix"]
LINK = "bottleneck"
PACKET_BITS = 1500 * 8  # the paper's packet size, for BDPs and Table 1

# ------------------------------------------------------------------------------------
# per-run samples
# ------------------------------------------------------------------------------------


def qdisc_kind(desc: str) -> str:
    """``codel(target=5ms, ...)`` -> ``codel``; ``pfifo(limit=84)`` -> ``droptail``."""
    k = desc.split("(")[0].strip()
    return "droptail" if k in ("pfifo", "bfifo") else k


def qdisc_param_ms(desc: str, name: str) -> Optional[float]:
    """A duration parameter of a configured qdisc description, in ms (None if absent)."""
    m = re.search(rf"\b{name}=([0-9.]+)(us|ms|s)\b", desc)
    if not m:
        return None
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]


class Run:
    """One run's output directory (or a :class:`sojourn.Result`), loaded lazily."""

    def __init__(self, src):
        self._res = None
        self.dir = None
        if hasattr(src, "summary"):
            self._res = src
            self.summary = src.summary
        else:
            import json

            self.dir = Path(src)
            self.summary = json.loads((self.dir / "summary.json").read_text())
        self._cache: dict = {}

    def _table(self, name: str) -> Optional[pd.DataFrame]:
        if name not in self._cache:
            if self._res is not None:
                self._cache[name] = getattr(self._res, name)
            else:
                f = self.dir / f"{name}.parquet"
                self._cache[name] = pd.read_parquet(f) if f.exists() else None
        return self._cache[name]

    @property
    def timeseries(self) -> pd.DataFrame:
        return self._table("timeseries")

    @property
    def packets(self) -> Optional[pd.DataFrame]:
        return self._table("packets")

    @property
    def flows(self) -> pd.DataFrame:
        return self._table("flows")

    @property
    def link(self) -> dict:
        return self.summary["links"][LINK]

    def series(self, entity: str, metric: str) -> pd.Series:
        ts = self.timeseries
        s = ts[(ts.entity == entity) & (ts.metric == metric)]
        return pd.Series(s.value.to_numpy(), index=s.time_s.to_numpy())


def utilisation_samples(run) -> np.ndarray:
    """Bottleneck utilisation per recording interval (5 s in the sweeps): bits sent in the
    interval / capacity. Every interval of the run counts, as in the paper (60 per 300 s)."""
    r = run if isinstance(run, Run) else Run(run)
    return r.series(LINK, "throughput_bps").to_numpy() / float(r.link["rate_bps"])


def delay_samples(run, flows: Optional[Sequence[int]] = None) -> np.ndarray:
    """Per-packet queueing delay (qdisc sojourn, ms) of the logged packets that left the
    bottleneck, optionally only those of ``flows``."""
    r = run if isinstance(run, Run) else Run(run)
    p = r.packets
    if p is None:
        raise ValueError("no packets.parquet: the run needs [record] packets = [\"bottleneck\"]")
    p = p[(p.link == LINK) & (p.event == "dequeue")]
    if flows is not None:
        p = p[p.flow.isin(list(flows))]
    return p.sojourn_ms.to_numpy()


# ------------------------------------------------------------------------------------
# per-point statistics of a sweep
# ------------------------------------------------------------------------------------


def _q(x: np.ndarray, qs=(25, 50, 75)) -> list:
    return [float(v) for v in np.percentile(x, qs)] if len(x) else [math.nan] * len(qs)


def point_table(sweep_dir: Path) -> pd.DataFrame:
    """One row per point: AQM, target, quartiles of utilisation, delay and Δ = delay − target
    over all samples of all seeds (the paper pools its 10 seeds the same way)."""
    runs = pd.read_parquet(sweep_dir / "runs.parquet")
    rows = []
    for point, g in runs.groupby("point", sort=False):
        utils, delays, drops = [], [], []
        desc = ""
        for rd in g.run_dir:
            r = Run(sweep_dir / rd)
            desc = r.link["qdisc"]
            utils.append(utilisation_samples(r))
            delays.append(delay_samples(r))
            drops.append(r.link["drops_total"])
        u, d = np.concatenate(utils), np.concatenate(delays)
        kind = qdisc_kind(desc)
        target = qdisc_param_ms(desc, "target") or 0.0
        tcp = str(g["tcp"].iloc[0]) if "tcp" in g.columns else "cubic"
        row = {"point": point, "aqm": kind, "tcp": tcp, "qdisc": desc, "target_ms": target, "seeds": len(g),
               "util_n": len(u), "delay_n": len(d), "drops_per_run": float(np.mean(drops))}
        for name, x in (("util", u), ("delay", d), ("delta", d - target)):
            q25, q50, q75 = _q(x)
            row.update({f"{name}_q25": q25, f"{name}_q50": q50, f"{name}_q75": q75})
        row["util_mean"] = float(np.mean(u))
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------
# plots
# ------------------------------------------------------------------------------------

COLORS = {"codel": "tab:blue", "pie": "tab:red", "droptail": "tab:gray"}
MARKERS = ["o", "s", "^", "D", "v", "P"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def operating_boxes(ax, table: pd.DataFrame, label, color=None, marker=None, x="delta", y="util",
                    yscale=100.0) -> None:
    """The seed's Figure 2 style: a rectangle over the quartiles of x and y, the medians as
    a point; ``label``, ``color``, ``marker`` map a row to its legend entry and style."""
    from matplotlib.patches import Rectangle

    for i, (_, r) in enumerate(table.iterrows()):
        c = color(r) if color else COLORS.get(r.aqm, f"C{i}")
        m = marker(r) if marker else MARKERS[i % len(MARKERS)]
        x0, x1 = r[f"{x}_q25"], r[f"{x}_q75"]
        y0, y1 = r[f"{y}_q25"] * yscale, r[f"{y}_q75"] * yscale
        ax.add_patch(Rectangle((x0, y0), max(x1 - x0, 1e-3), max(y1 - y0, 1e-3), fill=False, ec=c, lw=1.3))
        ax.plot([r[f"{x}_q50"]], [r[f"{y}_q50"] * yscale], marker=m, color=c, ls="", ms=6, label=label(r))
    ax.autoscale_view()
    ax.grid(alpha=0.3)


def _finish(fig, ax, path: Path, xlabel="Δ = queueing delay − target (ms)", ylabel="bottleneck utilisation (%)",
            legend=True) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if legend:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    _plt().close(fig)


def _split(point: str) -> list:
    return point.split("+")


def fig_simple(table: pd.DataFrame, path: Path, title: str, label, marker=None) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4.2))
    operating_boxes(ax, table, label=label, marker=marker)
    ax.axvline(0, color="k", lw=0.6)
    ax.set_title(title, fontsize=10)
    _finish(fig, ax, path)


def fig_by_tcp(table: pd.DataFrame, path: Path, title: str, label, marker=None) -> None:
    """One panel per congestion control (the rtt and interval sweeps run CUBIC and NewReno)."""
    plt = _plt()
    tcps = list(dict.fromkeys(table.tcp))
    fig, axes = plt.subplots(1, len(tcps), figsize=(5.2 * len(tcps), 4.2), squeeze=False)
    for ax, tcp in zip(axes[0], tcps):
        operating_boxes(ax, table[table.tcp == tcp], label=label, marker=marker)
        ax.axvline(0, color="k", lw=0.6)
        ax.set_title(f"{title} — TCP {tcp}", fontsize=9)
        ax.set_xlabel("Δ = queueing delay − target (ms)")
        ax.set_ylabel("bottleneck utilisation (%)")
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def fig_target(table: pd.DataFrame, path: Path) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    loads = ["light", "moderate", "heavy"]
    for ax, aqm in zip(axes, ["codel", "pie"]):
        t = table[table.aqm == aqm]
        tcol = {5.0: "tab:green", 10.0: "tab:orange", 20.0: "tab:purple"}
        operating_boxes(ax, t, label=lambda r: f"{_split(r.point)[0]} τ={r.target_ms:g} ms",
                        color=lambda r: tcol.get(r.target_ms, "k"),
                        marker=lambda r: MARKERS[loads.index(_split(r.point)[0])])
        ax.axvline(0, color="k", lw=0.6)
        ax.set_title(f"Fig. 7{'ab'[aqm == 'pie']}: {aqm.upper() if aqm == 'pie' else 'CoDel'}, target 5/10/20 ms", fontsize=10)
        ax.set_xlabel("Δ = queueing delay − target (ms)")
        ax.set_ylabel("bottleneck utilisation (%)")
        ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _window(s: pd.Series, t0: float, t1: float) -> pd.Series:
    return s[(s.index >= t0) & (s.index < t1)]


def per_second_delay(run: Run) -> pd.Series:
    d = run.packets
    d = d[(d.link == LINK) & (d.event == "dequeue")]
    return d.groupby(np.floor(d.time_s)).sojourn_ms.mean()


def fig_pie_dynamics(sweep_dir: Path, names: Sequence[str], path: Path, title: str, t0=100.0, t1=160.0,
                     delay=True) -> dict:
    """PIE's per-second mean queueing delay and its `prob` probe over a window (Figs 5, 9).
    Returns per variant the std of prob and of the per-second delay over the whole run."""
    plt = _plt()
    runs = pd.read_parquet(sweep_dir / "runs.parquet")
    nrows = 2 if delay else 1
    fig, axes = plt.subplots(nrows, 1, figsize=(8, 2.6 * nrows), sharex=True, squeeze=False)
    stats = {}
    for i, name in enumerate(names):
        g = runs[runs.point == name]
        if g.empty:
            continue
        r = Run(sweep_dir / g.run_dir.iloc[0])
        prob = r.series(LINK, "prob")
        dly = per_second_delay(r)
        stats[name] = {"prob_mean": float(prob[prob.index > 10].mean()), "prob_std": float(prob[prob.index > 10].std()),
                       "prob_max": float(prob.max()), "delay_1s_std": float(dly.std()),
                       "delay_1s_max": float(dly.max()), "delay_1s_mean": float(dly.mean()),
                       "empty_s": int((dly.reindex(np.arange(0, float(r.summary["duration_s"]))).fillna(0) < 0.5).sum())}
        w = _window(prob, t0, t1)
        axes[-1][0].plot(w.index, w.values * 100, color=f"C{i}", lw=1, label=name)
        if delay:
            wd = _window(dly, t0, t1)
            axes[0][0].step(wd.index, wd.values, where="post", color=f"C{i}", lw=1, label=name)
    if delay:
        axes[0][0].axhline(20, color="k", lw=0.6, ls="--")
        axes[0][0].set_ylabel("queueing delay (ms, 1-s mean)")
        axes[0][0].legend(fontsize=7)
        axes[0][0].set_title(title, fontsize=10)
    else:
        axes[0][0].set_title(title, fontsize=10)
    axes[-1][0].set_ylabel("PIE drop probability (%)")
    axes[-1][0].set_xlabel("time (s)")
    axes[-1][0].legend(fontsize=7)
    for a in axes[:, 0]:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return stats


# ------------------------------------------------------------------------------------
# Table 1
# ------------------------------------------------------------------------------------


def table1(targets=(("pie", 20.0), ("codel", 5.0)), rtt_ms: float = 100.0) -> pd.DataFrame:
    """Seed 002 Table 1 from first principles: transmission time of 1500 B, BDP at a 100-ms
    base RTT in 1500-B packets, and the queue (in packets) each AQM's target stands for
    (target / transmission time): PIE aims at that average, CoDel at that maximum."""
    cols = {}
    for kbps in (500, 1000, 2000):
        tx_ms = PACKET_BITS / (kbps * 1e3) * 1e3
        col = {"transmission time of 1500 B (ms)": tx_ms,
               "BDP (1500-B packets)": kbps * 1e3 * rtt_ms / 1e3 / PACKET_BITS,
               "buffer used here (packets, BDP rounded up)": math.ceil(kbps * 1e3 * rtt_ms / 1e3 / PACKET_BITS)}
        for aqm, tau in targets:
            what = "avg." if aqm == "pie" else "max."
            col[f"{'PIE' if aqm == 'pie' else 'CoDel'}: {what} queue aimed, τ={tau:g} ms (packets)"] = tau / tx_ms
        cols[f"{kbps} kbit/s"] = col
    return pd.DataFrame(cols)


# ------------------------------------------------------------------------------------
# traffic mix (§6)
# ------------------------------------------------------------------------------------


def mix_tables(sweep_dir: Path) -> tuple:
    """Per point of the mix sweep: CBR (per-flow goodput every 1 s, per-packet delay),
    small-file download times by size, bulk goodput at dest_FTP every 1 s."""
    runs = pd.read_parquet(sweep_dir / "runs.parquet")
    cbr_rows, sf_rows, bulk = [], [], {}
    for point, g in runs.groupby("point", sort=False):
        cg, cd, fct, bg = [], [], [], []
        desc = ""
        for rd in g.run_dir:
            r = Run(sweep_dir / rd)
            desc = r.link["qdisc"]
            f = r.flows
            cbr = f[f.workload == 0].flow.tolist()
            ts = r.timeseries
            gp = ts[ts.metric == "goodput_bps"]
            # CBR: cumulative goodput at dest_CBR divided by N_CBR, per second
            c = gp[gp.entity.isin([f"flow{i}" for i in cbr])].groupby("time_s").value.sum() / max(len(cbr), 1)
            cg.append(c[c.index > 1.0].to_numpy())
            cd.append(delay_samples(r, cbr))
            sf = f[(f.workload == 1) & f.completed]
            fct.append(sf[["size_bytes", "fct_s"]])
            ftp = [f"flow{i}" for i in f[f.workload == 2].flow]
            b = gp[gp.entity.isin(ftp)].groupby("time_s").value.sum()
            bg.append(b[b.index > 1.0].to_numpy())
        case, aqm = _split(point)
        target = qdisc_param_ms(desc, "target") or 0.0
        cgs, cds = np.concatenate(cg), np.concatenate(cd)
        row = {"point": point, "case": case, "aqm": aqm, "target_ms": target}
        for name, x in (("goodput_kbps", cgs / 1e3), ("delay", cds), ("delta", cds - target)):
            q25, q50, q75 = _q(x)
            row.update({f"{name}_q25": q25, f"{name}_q50": q50, f"{name}_q75": q75})
        cbr_rows.append(row)
        fd = pd.concat(fct)
        for size, h in fd.groupby("size_bytes"):
            p5, p25, p50, p75, p95 = _q(h.fct_s.to_numpy(), (5, 25, 50, 75, 95))
            sf_rows.append({"case": case, "aqm": aqm, "size_kB": size / 1e3, "n": len(h), "p5": p5, "p25": p25,
                            "p50": p50, "p75": p75, "p95": p95})
        bulk[point] = np.concatenate(bg)
    return pd.DataFrame(cbr_rows), pd.DataFrame(sf_rows), bulk


MIX_ORDER = ["droptail", "codel-5ms", "codel-20ms", "pie-5ms", "pie-20ms"]
MIX_COLORS = {"droptail": "tab:gray", "codel-5ms": "tab:cyan", "codel-20ms": "tab:blue", "pie-5ms": "tab:orange",
              "pie-20ms": "tab:red"}


def fig_mix(cbr: pd.DataFrame, sf: pd.DataFrame, bulk: dict, out: Path) -> None:
    plt = _plt()
    # Figure 11: CBR goodput (y) vs delta of CBR packets (x), without DropTail (as the paper)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, case in zip(axes, ["case1", "case2"]):
        t = cbr[(cbr.case == case) & (cbr.aqm != "droptail")]
        operating_boxes(ax, t, label=lambda r: r.aqm, color=lambda r: MIX_COLORS[r.aqm],
                        marker=lambda r: "o" if r.aqm.startswith("codel") else "s", y="goodput_kbps", yscale=1.0)
        ax.axvline(0, color="k", lw=0.6)
        ax.set_title(f"Fig. 11: CBR, traffic {case.replace('case', 'case ')}", fontsize=10)
        ax.set_xlabel("Δ = queueing delay of CBR packets − target (ms)")
        ax.set_ylabel("CBR goodput per flow (kbit/s, 1-s samples)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fig11_mix_cbr.png", dpi=90)
    plt.close(fig)
    # Figure 12: small-file download time, boxes 25-75 with 5/95 whiskers and the median
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    sizes = sorted(sf.size_kB.unique())
    for ax, case in zip(axes, ["case1", "case2"]):
        t = sf[sf.case == case]
        w = 0.8 / len(MIX_ORDER)
        for j, aqm in enumerate(MIX_ORDER):
            for k, s in enumerate(sizes):
                r = t[(t.aqm == aqm) & (t.size_kB == s)]
                if r.empty:
                    continue
                r = r.iloc[0]
                x = k + (j - (len(MIX_ORDER) - 1) / 2) * w
                ax.add_patch(_plt().Rectangle((x - w * 0.4, r.p25), w * 0.8, r.p75 - r.p25, fc=MIX_COLORS[aqm],
                                              alpha=0.6, ec="k", lw=0.5))
                ax.plot([x, x], [r.p5, r.p25], color="k", lw=0.6)
                ax.plot([x, x], [r.p75, r.p95], color="k", lw=0.6)
                ax.plot([x - w * 0.4, x + w * 0.4], [r.p50, r.p50], color="k", lw=1)
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels([f"{s:g} kB" for s in sizes])
        ax.set_xlim(-0.6, len(sizes) - 0.4)
        ax.set_title(f"Fig. 12: small-file download time, traffic {case.replace('case', 'case ')}", fontsize=10)
        ax.set_ylabel("download time (s): 5/25/50/75/95 %")
        ax.grid(alpha=0.3, axis="y")
        ax.autoscale_view()
    from matplotlib.patches import Patch

    axes[0].legend(handles=[Patch(color=MIX_COLORS[a], label=a) for a in MIX_ORDER], fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fig12_mix_small_files.png", dpi=90)
    plt.close(fig)
    # Figure 13: CDF of the bulk goodput at dest_FTP (1-s samples)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, case in zip(axes, ["case1", "case2"]):
        for aqm in MIX_ORDER:
            x = np.sort(bulk.get(f"{case}+{aqm}", np.array([]))) / 1e6
            if len(x):
                ax.plot(x, np.arange(1, len(x) + 1) / len(x), color=MIX_COLORS[aqm], label=aqm)
        ax.set_xlabel("bulk goodput at dest_FTP (Mbit/s, 1-s samples)")
        ax.set_title(f"Fig. 13: bulk goodput CDF, traffic {case.replace('case', 'case ')}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("CDF")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fig13_mix_bulk_cdf.png", dpi=90)
    plt.close(fig)


# ------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------

OP_COLS = ["point", "seeds", "util_n", "delay_n", "util_q25", "util_q50", "util_q75", "util_mean", "delay_q25",
           "delay_q50", "delay_q75", "delta_q50", "drops_per_run"]


def _md(df: pd.DataFrame, floatfmt: str = ".3g") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(str(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            if isinstance(v, (float, np.floating)):
                cells.append(format(v, floatfmt) if not math.isnan(v) else "")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _op_md(t: pd.DataFrame) -> str:
    t = t[OP_COLS].copy()
    for c in ("util_q25", "util_q50", "util_q75", "util_mean"):
        t[c] = t[c] * 100
    return _md(t.rename(columns={c: c.replace("util_", "util% ") for c in t.columns}))


def _rel(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return str(p)


def run_sweeps(results: Path, jobs: int, repeats: Optional[int], only: Sequence[str]) -> dict:
    from .. import sweeps as sw

    walls = {}
    for s in only:
        t0 = time.time()
        sw.run_sweep(EXP_DIR / f"{s}.sweep.toml", results / s, jobs=jobs,
                     repeats=None if s == "pie-dynamics" else repeats, quiet=True)
        walls[s] = time.time() - t0
        print(f"sweep {s}: {walls[s]:.0f} s wall", flush=True)
    return walls


#: the cheap variant (tests/python/test_repro_pages.py): dumbbell.toml for 60 s, PIE with 4
#: and 16 flows and CoDel with the file's flows, seed 1
CI_RUNS = (("pie, 4 flows", {"workload[0].count": 4, "topology.bottleneck.qdisc": "pie"}),
           ("pie, 16 flows", {"workload[0].count": 16, "topology.bottleneck.qdisc": "pie"}),
           ("codel", {"topology.bottleneck.qdisc": "codel"}))


def ci_block(out: Optional[Path] = None) -> str:
    """Runs the cheap variant and returns the page's ``ci`` block (``out`` is unused)."""
    import sojourn

    rows = ["| run | utilisation | mean delay (ms) | p50 delay (ms) | drops |", "|---|---|---|---|---|"]
    for name, ov in CI_RUNS:
        r = sojourn.run(EXP_DIR / "dumbbell.toml", seed=1, duration="60s", overrides=ov)
        b = r.summary["links"]["bottleneck"]
        so = b["sojourn_ms"]
        rows.append(f"| {name} | {b['utilisation']:.6f} | {so['mean']:.4f} | {so['p50']:.4f} | {b['drops_total']} |")
    return ("The cheap variant (`dumbbell.toml`, 60 s, seed 1; `sojourn.repro.operating_ranges.ci_block`) "
            "gives, at the bottleneck:\n\n" + "\n".join(rows) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sojourn.repro.operating_ranges", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=str(REPO / "results" / "operating-ranges"),
                    help="directory holding one sweep output per sweep file")
    ap.add_argument("--out", default=None, help="figures and summary.md (default: <results>/img; "
                                                "docs/repro/img/operating-ranges with --update-docs)")
    ap.add_argument("--update-docs", action="store_true",
                    help="write the figures and summary.md into docs/repro/img/operating-ranges and rewrite "
                         "the page's generated blocks (every sweep, as shipped)")
    ap.add_argument("--run", action="store_true", help="run (or resume) the sweeps first")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=None, help="override the sweeps' 10 seeds")
    ap.add_argument("--only", default=",".join(SWEEPS), help="comma-separated subset of " + ",".join(SWEEPS))
    ap.add_argument("--table1", action="store_true", help="print Table 1 and exit")
    a = ap.parse_args(argv)
    t1 = table1()
    if a.table1:
        print(_md(t1.reset_index().rename(columns={"index": ""}), ".2f"))
        return 0
    from . import pages

    results = Path(a.results)
    out = pages.plot_dir(results, a.out, a.update_docs, "operating-ranges")
    only = [s for s in a.only.split(",") if s]
    if a.update_docs and (only != SWEEPS or a.repeats is not None):
        ap.error("--update-docs regenerates the page from every sweep as shipped: no --only/--repeats")
    bad = sorted(set(only) - set(SWEEPS))
    if bad:
        ap.error(f"unknown sweep {bad[0]!r}; known: {', '.join(SWEEPS)}")
    if a.run:
        run_sweeps(results, a.jobs, a.repeats, only)
    out.mkdir(parents=True, exist_ok=True)
    md = ["# operating-ranges: numbers behind the figures", "",
          f"Generated by `python -m sojourn.repro.operating_ranges` from `{_rel(results)}`. Utilisation in % of the "
          "bottleneck capacity (5-s samples pooled over seeds); delay = per-packet qdisc sojourn (ms, "
          "logged sample); Δ = delay − target.", ""]
    have = lambda s: s in only and (results / s / "runs.parquet").exists()  # noqa: E731
    if have("congestion"):
        t = point_table(results / "congestion")
        load = ["light", "moderate", "heavy"]
        fig_simple(t, out / "fig3_congestion.png", "Fig. 3: congestion level (RTT 100 ms, 4/16/64 flows)",
                   label=lambda r: f"{r.aqm} {_split(r.point)[0]}",
                   marker=lambda r: MARKERS[load.index(_split(r.point)[0])])
        md += ["## Figure 3 — congestion level", "", _op_md(t), ""]
    if have("rtt"):
        t = point_table(results / "rtt")
        rtts = ["rtt100", "rtt200", "rtt300"]
        fig_by_tcp(t, out / "fig4_rtt.png", "Fig. 4: base RTT 100/200/300 ms, light load",
                   label=lambda r: _split(r.point)[0], marker=lambda r: MARKERS[rtts.index(_split(r.point)[0].split("-")[1])])
        md += ["## Figure 4 — base RTT", "", _op_md(t), ""]
    if have("pie-dynamics"):
        st5 = fig_pie_dynamics(results / "pie-dynamics", ["rtt100", "rtt300"], out / "fig5_pie_rtt.png",
                               "Fig. 5: PIE at base RTT 100 vs 300 ms (light load)")
        st9 = fig_pie_dynamics(results / "pie-dynamics", ["tupdate30", "tupdate100", "tupdate300"],
                               out / "fig9_pie_tupdate.png", "Fig. 9: PIE drop probability, RTT 300 ms, tupdate 30/100/300 ms")
        st = pd.DataFrame({**st5, **st9}).T.reset_index().rename(columns={"index": "variant"})
        md += ["## Figures 5 and 9 — PIE over time (one seed; prob statistics after 10 s; delay = 1-s means; "
               "empty_s = seconds whose mean delay < 0.5 ms)", "", _md(st), ""]
    if have("capacity"):
        t = point_table(results / "capacity")
        caps = ["500k", "1000k", "2000k"]
        fig_simple(t, out / "fig6_capacity.png", "Fig. 6: bottleneck 0.5/1/2 Mbit/s, light load, RTT 100 ms",
                   label=lambda r: r.point, marker=lambda r: MARKERS[caps.index(r.point.split("-")[1])])
        md += ["## Figure 6 — low capacity", "", _op_md(t), ""]
    md += ["## Table 1 (computed)", "", _md(t1.reset_index().rename(columns={"index": ""}), ".2f"), ""]
    if have("target"):
        t = point_table(results / "target")
        fig_target(t, out / "fig7_target.png")
        md += ["## Figure 7 — target delay", "", _op_md(t), ""]
    if have("interval"):
        t = point_table(results / "interval")
        lam = ["30ms", "100ms", "200ms", "300ms"]
        fig_by_tcp(t, out / "fig8_interval.png", "Fig. 8: λ at RTT 300 ms, light load",
                   label=lambda r: _split(r.point)[0].replace("-", " λ="),
                   marker=lambda r: MARKERS[lam.index(_split(r.point)[0].split("-")[1])])
        md += ["## Figure 8 — update interval (RTT 300 ms)", "", _op_md(t), ""]
    if have("mix"):
        cbr, sf, bulk = mix_tables(results / "mix")
        fig_mix(cbr, sf, bulk, out)
        bt = pd.DataFrame([{"point": k, "n": len(v), "p10_Mbps": np.percentile(v, 10) / 1e6,
                            "median_Mbps": np.median(v) / 1e6, "mean_Mbps": np.mean(v) / 1e6}
                           for k, v in bulk.items()])
        md += ["## Figure 11 — CBR goodput (kbit/s per flow, 1-s samples) and per-packet delay", "",
               _md(cbr.drop(columns=["case", "aqm"])), "",
               "## Figure 12 — small-file download time (s)", "", _md(sf), "",
               "## Figure 13 — bulk goodput at dest_FTP (sum of the FTP flows, 1-s samples)", "", _md(bt), ""]
    (out / "summary.md").write_text("\n".join(md) + "\n")
    print(f"wrote {out}/summary.md and the figures")
    if a.update_docs:
        pages.replace_blocks(pages.DOCS / "operating-ranges.md",
                             {"provenance": pages.provenance("operating_ranges", prose_generated=False), "ci": ci_block()})
        print(f"updated {pages.DOCS / 'operating-ranges.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
