"""``sojourn compare``: one row per point of a sweep (or per run directory) with FCT,
goodput, utilisation, sojourn and drops, 95% confidence intervals, gains against a
baseline and of every ``age-X`` over ``X``; ``compare.md`` and plots (PNG + SVG).

Which flows count (as in summary.json): flows that started after the warm-up; FCT
statistics use the sized flows that completed; goodput every such flow with a finite
goodput. With ``end_margin`` (``--end-margin 60s``) flows that end in the last
``end_margin`` seconds of their run are left out too (seed 000 keeps flows with
start > warm-up and end < duration - 60 s). Per-flow statistics pool the flows of all repeats of a point; "across repeats"
is the interval over the per-repeat means.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .._plots import savefig
from ..results import run_row
from ..units import parse_seconds
from . import stats
from .pairs import age_base, styles

PCTS = (50.0, 75.0, 95.0, 99.0)
METRICS = {
    # metric: (label, unit, scale from stored unit to display unit, lower is better)
    "fct": ("mean FCT", "ms", 1e3, True),
    "goodput": ("mean goodput", "Mbit/s", 1e-6, False),
    "sojourn": ("mean sojourn", "ms", 1.0, True),
}


# Statistics come from sojourn.analysis.stats (the one statistics API; NaN where a thin point
# leaves a number undefined).


def _finite(x) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    return a[np.isfinite(a)]


def _mean_hw(x) -> tuple:
    """(mean, half width of the 95% CI = 1.96 SEM) over samples (flows)."""
    r = stats.mean_ci(x)
    return r["mean"], r["half_width"]


def _repeat_hw(values) -> tuple:
    """(mean, half width of the Student-t 95% CI) across repeats (one value per repeat)."""
    r = stats.repeat_ci(values)
    return r["mean"], r["half_width"]


def _gain3(a, b) -> tuple:
    """(gain, lo, hi): gain = mean(a)/mean(b) - 1 with its 95% delta-method interval."""
    r = stats.gain(a, b, allow_small=True)
    return r["gain"], r["lo"], r["hi"]


# ------------------------------------------------------------------------------------
# loading
# ------------------------------------------------------------------------------------


@dataclass
class Data:
    runs: pd.DataFrame  # one row per run: point, seed, run_dir, run_row() columns
    flows: pd.DataFrame  # flows of all runs with point, seed, after_warmup
    root: Path  # run_dir is relative to this
    points: list  # in sweep order
    end_margin: float = 0.0  # seconds; flows ending later than duration - end_margin left out


def apply_end_margin(data: "Data", margin_s: float) -> "Data":
    """Marks flows that end in the last ``margin_s`` seconds of their run (column
    ``before_end``); the statistics then leave them out. Flows that did not complete keep
    ``before_end`` (they are not in FCT statistics anyway)."""
    data.end_margin = float(margin_s)
    f = data.flows
    if margin_s <= 0 or f.empty or "end_s" not in f:
        return data
    dur = data.runs.set_index(["point", "seed"])["duration_s"]
    d = pd.MultiIndex.from_frame(f[["point", "seed"]]).map(dur.to_dict().get).to_numpy(float)
    end = f["end_s"].to_numpy(float)
    f["before_end"] = ~(np.isfinite(end) & (end > d - margin_s))
    return data


def _flows_of(run_path: Path, point: str, seed: int, warm: float) -> pd.DataFrame:
    f = pd.read_parquet(run_path / "flows.parquet")
    f.insert(0, "seed", seed)
    f.insert(0, "point", point)
    f["after_warmup"] = f["start_s"] >= warm if "start_s" in f else True
    return f


def load(dirs: Sequence) -> Data:
    """A sweep directory (merged files, or its run directories when not merged yet), or
    several run directories (each a point named after the directory)."""
    dirs = [Path(d) for d in dirs]
    for d in dirs:
        if not d.is_dir():
            raise FileNotFoundError(f"{d}: no such directory")
    if len(dirs) == 1 and (dirs[0] / "runs.parquet").exists() and (dirs[0] / "flows.parquet").exists():
        root = dirs[0]
        runs = pd.read_parquet(root / "runs.parquet")
        flows = pd.read_parquet(root / "flows.parquet")
        if "point" not in flows:
            flows = pd.DataFrame(columns=["point", "seed", "after_warmup"])
        return Data(runs, flows, root, list(dict.fromkeys(runs["point"])))
    if len(dirs) == 1 and (dirs[0] / "runs").is_dir():
        root = dirs[0]
        order = []
        sj = root / "sweep.json"
        if sj.exists():
            order = [p["name"] for p in json.loads(sj.read_text()).get("points", [])]
        found = sorted({p.parent.parent.name for p in (root / "runs").glob("*/seed-*/summary.json")})
        order = [p for p in order if p in found] + [p for p in found if p not in order]
        rows, fl = [], []
        for p in order:
            for s in sorted((root / "runs" / p).glob("seed-*/summary.json"), key=lambda x: int(x.parent.name[5:])):
                summ = json.loads(s.read_text())
                seed = int(s.parent.name[5:])
                rows.append({"point": p, "seed": seed, "run_dir": str(s.parent.relative_to(root)), **run_row(summ)})
                fl.append(_flows_of(s.parent, p, seed, float(summ.get("warmup_s", 0.0))))
        if not rows:
            raise FileNotFoundError(f"{root}: no finished runs")
        return Data(pd.DataFrame(rows), pd.concat(fl, ignore_index=True), root, order)
    rows, fl = [], []
    names = [d.name for d in dirs]
    for d in dirs:
        s = d / "summary.json"
        if not s.exists():
            raise FileNotFoundError(f"{d}: neither a sweep directory (runs.parquet) nor a run directory (summary.json)")
        summ = json.loads(s.read_text())
        p = d.name if names.count(d.name) == 1 else f"{d.parent.name}/{d.name}"
        seed = int(summ.get("seed", 0))
        rows.append({"point": p, "seed": seed, "run_dir": str(d.resolve()), **run_row(summ)})
        fl.append(_flows_of(d, p, seed, float(summ.get("warmup_s", 0.0))))
    runs = pd.DataFrame(rows)
    return Data(runs, pd.concat(fl, ignore_index=True), Path("/"), list(dict.fromkeys(runs["point"])))


# ------------------------------------------------------------------------------------
# the table
# ------------------------------------------------------------------------------------


def point_flows(data: Data, p: str) -> pd.DataFrame:
    """The flows of point ``p`` that count: started after the warm-up and, with an end
    margin, not ending in the last ``end_margin`` seconds of their run."""
    f = data.flows[data.flows["point"] == p]
    if "after_warmup" in f:
        f = f[f["after_warmup"].astype(bool)]
    if "before_end" in f:
        f = f[f["before_end"].astype(bool)]
    return f


def fct_flows(f: pd.DataFrame) -> pd.DataFrame:
    """Of the flows ``f``, those FCT statistics use: sized (``size_bytes`` > 0), completed,
    with a finite ``fct_s``."""
    if "fct_s" not in f or "size_bytes" not in f:
        return f.iloc[0:0]
    ok = (f["size_bytes"] > 0) & np.isfinite(f["fct_s"].astype(float))
    if "completed" in f:
        ok &= f["completed"].astype(bool)
    return f[ok]


def goodputs(f: pd.DataFrame) -> np.ndarray:
    """The finite per-flow goodputs (bit/s) of the flows ``f``; empty without the column."""
    return _finite(f["goodput_bps"]) if "goodput_bps" in f else np.array([])


def flow_throughputs(f: pd.DataFrame) -> np.ndarray:
    """Per-flow mean throughput (bit/s) for fairness: 8 size / FCT for completed sized
    flows, else the flows' goodput (e.g. UDP streams); :func:`sojourn.analysis.stats.throughputs`
    is the sized-flows part."""
    s = fct_flows(f)
    if len(s):
        fct = s["fct_s"].to_numpy(float)
        return 8.0 * s["size_bytes"].to_numpy(float)[fct > 0] / fct[fct > 0]
    return goodputs(f)


def samples(data: Data, p: str, metric: str) -> np.ndarray:
    """The samples the gain of ``metric`` is computed over: flows for fct and goodput,
    runs (mean bottleneck sojourn of each repeat) for sojourn."""
    if metric == "fct":
        return _finite(fct_flows(point_flows(data, p))["fct_s"])
    if metric == "goodput":
        f = point_flows(data, p)
        return goodputs(f)
    if metric == "sojourn":
        return _finite(data.runs.loc[data.runs["point"] == p, "sojourn_mean_ms"])
    raise ValueError(f"unknown metric {metric!r} (fct, sojourn, goodput)")


def _per_run_means(f: pd.DataFrame, col: str) -> np.ndarray:
    if f.empty:
        return np.array([])
    return f.groupby("seed")[col].mean().to_numpy(float)


def table(data: Data, metric: str = "fct", baseline: Optional[str] = None) -> pd.DataFrame:
    """One row per point. Units: seconds (fct_*), bit/s (goodput_*), ms (sojourn_*)."""
    if baseline is not None and baseline not in data.points:
        raise KeyError(f"no point named {baseline!r} (points: {', '.join(data.points)})")
    base = samples(data, baseline, metric) if baseline else None
    rows = []
    for p in data.points:
        rs = data.runs[data.runs["point"] == p]
        f = point_flows(data, p)
        ff = fct_flows(f)
        fct = ff["fct_s"].to_numpy(float) if len(ff) else np.array([])
        m, ci = _mean_hw(fct)
        rm, rci = _repeat_hw(_per_run_means(ff, "fct_s")) if len(rs) > 1 else (math.nan, math.nan)
        gp = goodputs(f)
        gm, gci = _mean_hw(gp)
        th = flow_throughputs(f)
        sm = samples(data, p, metric)
        mm, mci = (_repeat_hw(sm) if metric == "sojourn" else _mean_hw(sm))
        row = {
            "point": p, "runs": len(rs), "flows": int(len(f)), "fct_flows": int(fct.size),
            "fct_mean_s": m, "fct_ci_s": ci, "fct_repeats_mean_s": rm, "fct_repeats_ci_s": rci,
            **{f"fct_p{int(q)}_s": v for q, v in zip(PCTS, stats.percentiles(fct, PCTS).values())},
            "goodput_mean_bps": gm, "goodput_ci_bps": gci,
            "utilisation": float(rs["utilisation"].mean()),
            "sojourn_p50_ms": float(rs["sojourn_p50_ms"].mean()), "sojourn_p99_ms": float(rs["sojourn_p99_ms"].mean()),
            "drops": float(rs["drops"].mean()),
            "jain": stats.jain_index(th), "lorenz_gap": stats.lorenz_gap(th),
            "metric": metric, "metric_mean": mm, "metric_ci": mci,
        }
        if base is not None:  # the baseline's own row has no gain
            row["gain"], row["gain_lo"], row["gain_hi"] = (math.nan,) * 3 if p == baseline else _gain3(sm, base)
        rows.append(row)
    return pd.DataFrame(rows)


def age_pairs(data: Data, metric: str = "fct") -> pd.DataFrame:
    """Gain of every age-based point over its base (``age-X`` over ``X``, see
    :func:`age_base`), as seed 000's tables."""
    rows = []
    for p in data.points:
        b = age_base(p, data.points)
        if b is not None:
            g, lo, hi = _gain3(samples(data, p, metric), samples(data, b, metric))
            rows.append({"base": b, "age": p, "metric": metric, "gain": g, "gain_lo": lo, "gain_hi": hi})
    return pd.DataFrame(rows, columns=["base", "age", "metric", "gain", "gain_lo", "gain_hi"])


# ------------------------------------------------------------------------------------
# rendering
# ------------------------------------------------------------------------------------


def _f(x, scale=1.0, d=1) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x * scale:.{d}f}"


def _pm(m, ci, scale=1.0, d=1) -> str:
    if not np.isfinite(m):
        return "-"
    return f"{m * scale:.{d}f} ± {ci * scale:.{d}f}" if np.isfinite(ci) else f"{m * scale:.{d}f}"


def _pct(g, lo=math.nan, hi=math.nan) -> str:
    if not np.isfinite(g):
        return "-"
    s = f"{100 * g:+.1f}%"
    return s + (f" [{100 * lo:+.1f}, {100 * hi:+.1f}]" if np.isfinite(lo) else "")


def rows_for_display(t: pd.DataFrame, metric: str, baseline: Optional[str] = None) -> tuple:
    label, unit, scale, _ = METRICS[metric]
    has_fct = bool((t["fct_flows"] > 0).any())  # FCT columns only when some flow has a size
    heads = ["point", "runs", "flows"]
    if has_fct:
        heads.append("FCT mean ± CI (ms)")
        if t["runs"].max() > 1:
            heads.append("± CI repeats (ms)")
        heads += ["P50", "P75", "P95", "P99 (ms)"]
    heads += ["goodput (Mbit/s)", "util", "sojourn p50/p99 (ms)", "drops/run", "Jain", "Lorenz gap"]
    if metric != "fct":
        heads.append(f"{label} ± CI ({unit})")
    if "gain" in t:
        heads.append(f"gain ({metric})")
    rows = []
    for _, r in t.iterrows():
        row = [r["point"], str(r["runs"]), str(r["flows"])]
        if has_fct:
            row.append(_pm(r["fct_mean_s"], r["fct_ci_s"], 1e3, 1))
            if t["runs"].max() > 1:
                row.append(_pm(r["fct_repeats_mean_s"], r["fct_repeats_ci_s"], 1e3, 1))
            row += [_f(r[f"fct_p{int(q)}_s"], 1e3, 1) for q in PCTS]
        row += [_pm(r["goodput_mean_bps"], r["goodput_ci_bps"], 1e-6, 3), _f(r["utilisation"], 100, 1) + "%",
                f"{_f(r['sojourn_p50_ms'], 1, 2)} / {_f(r['sojourn_p99_ms'], 1, 2)}", _f(r["drops"], 1, 1),
                _f(r["jain"], 1, 3), _f(r["lorenz_gap"], 1, 3)]
        if metric != "fct":
            row.append(_pm(r["metric_mean"], r["metric_ci"], scale, 3 if metric == "goodput" else 2))
        if "gain" in t:
            row.append("baseline" if not np.isfinite(r["gain"]) and r["point"] == baseline else _pct(r["gain"], r["gain_lo"], r["gain_hi"]))
        rows.append(row)
    return heads, rows


def markdown(t: pd.DataFrame, pairs: pd.DataFrame, metric: str, baseline: Optional[str], title: str, plots: Sequence[str]) -> str:
    heads, rows = rows_for_display(t, metric, baseline)
    out = [f"# {title}", "",
           "Mean with 95% CI: ± 1.96·SEM over the flows of all repeats; '± CI repeats' is the Student-t interval over the "
           "per-repeat means. Percentiles over flows (linear interpolation). Utilisation, sojourn percentiles (from each "
           "run's histogram) and drops are means over repeats. Flows: started after the warm-up; FCT over completed sized flows.", ""]
    if baseline:
        out += [f"Gain = {METRICS[metric][0]} / {METRICS[metric][0]} of `{baseline}` − 1, with its 95% CI.", ""]
    out += ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    if len(pairs):
        out += ["", f"## age-based variants ({METRICS[metric][0]}: gain = age-X / X − 1)", "", "| base | age | gain [95% CI] |", "|---|---|---|"]
        out += [f"| {r.base} | {r.age} | {_pct(r.gain, r.gain_lo, r.gain_hi)} |" for r in pairs.itertuples()]
    for p in plots:
        out += ["", f"![{p}]({p}.png)"]
    return "\n".join(out) + "\n"


def print_tables(t: pd.DataFrame, pairs: pd.DataFrame, metric: str, title: str, console=None, baseline: Optional[str] = None) -> None:
    from rich.console import Console
    from rich.table import Table

    # Not a terminal (a pipe, a log): wide enough that no number is cut off.
    console = console or (Console() if sys.stdout.isatty() else Console(width=400))
    heads, rows = rows_for_display(t, metric, baseline)
    tab = Table(title=title)
    for h in heads:
        tab.add_column(h, justify="left" if h == "point" else "right")
    for r in rows:
        tab.add_row(*r)
    console.print(tab)
    if len(pairs):
        pt = Table(title=f"age-based variants: gain of {METRICS[metric][0]} (age-X / X − 1, 95% CI)")
        for h in ["base", "age", "gain"]:
            pt.add_column(h, justify="right" if h == "gain" else "left")
        for r in pairs.itertuples():
            pt.add_row(r.base, r.age, _pct(r.gain, r.gain_lo, r.gain_hi))
        console.print(pt)


# ------------------------------------------------------------------------------------
# plots
# ------------------------------------------------------------------------------------


def _sojourn_cdf(data: Data, p: str) -> tuple:
    """(x ms, CDF, kind) of a point's bottleneck sojourn: pooled over repeats from the
    engine's per-packet histograms (histograms.parquet); result directories written before
    histograms existed fall back to the packet log, then to sampled queue bytes / rate."""
    rs = data.runs[data.runs["point"] == p]
    hs, pk, ts = [], [], []
    for r in rs.itertuples():
        d = data.root / r.run_dir
        if (d / "histograms.parquet").exists():
            h = pd.read_parquet(d / "histograms.parquet")
            hs.append(h[h["link"].astype(str) == r.link])
        elif (d / "packets.parquet").exists():
            x = pd.read_parquet(d / "packets.parquet", columns=["link", "event", "sojourn_ms"])
            sel = (x["link"].astype(str) == r.link) & (x["event"].astype(str) == "dequeue")
            pk.append(x.loc[sel, "sojourn_ms"].to_numpy(float))
        elif (d / "timeseries.parquet").exists() and np.isfinite(r.rate_bps) and r.rate_bps > 0:
            x = pd.read_parquet(d / "timeseries.parquet")
            sel = (x["entity"].astype(str) == r.link) & (x["metric"].astype(str) == "queue_bytes")
            ts.append(x.loc[sel, "value"].to_numpy(float) * 8.0 / r.rate_bps * 1e3)
    if hs:
        h = pd.concat(hs, ignore_index=True)
        x, y = stats.hist_cdf(h["lo_ns"], h["hi_ns"], h["count"])
        return x * 1e-6, y, "per packet, engine histogram"
    for arrs, kind in ((pk, "per packet, packet log"), (ts, "queue bytes / rate, sampled")):
        if arrs:
            v = np.sort(np.concatenate(arrs))
            return v, np.arange(1, v.size + 1) / v.size, kind
    return np.array([]), np.array([]), ""


def _wide(v) -> bool:
    """A log axis pays off when the positive values span more than two decades."""
    a = np.asarray(v, dtype=float)
    a = a[np.isfinite(a) & (a > 0)]
    return a.size > 1 and a.max() / a.min() > 100.0


def write_plots(data: Data, t: pd.DataFrame, metric: str, out: Path) -> list:
    """PNG + SVG plots for papers (the interactive versions are in report.html). A
    discipline and its age-based variant share a colour (the variant dashed or hatched);
    axes are logarithmic where the values span more than two decades."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    st = styles(data.points)
    ls = {"solid": "-", "dash": "--"}
    made = []

    def save(fig, name):
        fig.tight_layout()
        for ext in ("png", "svg"):
            savefig(fig, out / f"{name}.{ext}", dpi=120)
        plt.close(fig)
        made.append(name)

    label, unit, scale, _ = METRICS[metric]
    ok = t[np.isfinite(t["metric_mean"])]
    if len(ok):
        fig, ax = plt.subplots(figsize=(max(5, 0.7 * len(ok) + 2), 3.8))
        x = np.arange(len(ok))
        multi = metric != "sojourn" and bool((ok["runs"] > 1).any()) and "fct_repeats_ci_s" in ok and metric == "fct"
        if multi:  # the interval across repeats: runs are the independent unit
            mean = ok["fct_repeats_mean_s"].to_numpy(float)
            ci = ok["fct_repeats_ci_s"].to_numpy(float)
            what = "95% CI across repeats"
        else:
            mean = ok["metric_mean"].to_numpy(float)
            ci = ok["metric_ci"].to_numpy(float)
            what = "95% CI across repeats" if metric == "sojourn" else "95% CI over flows (flows are correlated: too narrow)"
        ax.bar(x, mean * scale, yerr=np.where(np.isfinite(ci), ci, 0) * scale, capsize=4,
               color=[st[p].colour for p in ok["point"]], hatch=None, edgecolor="black", linewidth=0.4)
        for bar, p in zip(ax.patches, ok["point"]):
            if st[p].dash == "dash":
                bar.set_hatch("//")
        ax.set_xticks(x, ok["point"], rotation=30, ha="right")
        ax.set_ylabel(f"{label} ({unit})")
        ax.set_title(f"{label} with {what}", fontsize=9)
        if _wide(mean):
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3, which="both")
        save(fig, f"{metric}_ci")

    fig, ax = plt.subplots(figsize=(7, 4))
    any_size = False
    for p in data.points:
        ff = fct_flows(point_flows(data, p))
        if ff.empty:
            continue
        b = stats.fct_by_size(ff)
        if len(b):
            ax.errorbar(b["size_center"], b["mean"] * 1e3, yerr=np.nan_to_num(b["half_width"].to_numpy(float)) * 1e3,
                        marker="o", ms=3, capsize=2, label=p, color=st[p].colour, ls=ls[st[p].dash])
            any_size = True
    if any_size:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("flow size (bytes)")
        ax.set_ylabel("mean FCT (ms)")
        ax.set_title("a discipline and its age-based variant share a colour (variant dashed)", fontsize=8)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, ncol=2)
        save(fig, "fct_vs_size")
    else:
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 5))
    any_l = False
    for p in data.points:
        th = flow_throughputs(point_flows(data, p))
        if th.size:
            lc = stats.lorenz_curve(th)
            ax.plot(lc["share_flows"], lc["share_total"], label=f"{p} (gap {stats.lorenz_gap(th):.3f})", lw=1.2,
                    color=st[p].colour, ls=ls[st[p].dash])
            any_l = True
    if any_l:
        ax.plot([0, 1], [0, 1], "k:", lw=0.8, label="equality")
        ax.set_xlabel("share of flows")
        ax.set_ylabel("share of total throughput")
        ax.set_title("Lorenz curves of per-flow throughput")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        save(fig, "lorenz")
    else:
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    kinds, allx = set(), []
    for p in data.points:
        x, y, kind = _sojourn_cdf(data, p)
        if x.size:
            ax.plot(x, y, label=p, lw=1.2, color=st[p].colour, ls=ls[st[p].dash])
            kinds.add(kind)
            allx.append(x)
    if kinds:
        v = np.concatenate(allx)
        if _wide(v):
            ax.set_xscale("log")
            pos = v[v >= 1e-3]
            if pos.size:
                ax.set_xlim(pos.min(), v.max() * 1.1)
        ax.set_xlabel(f"bottleneck sojourn (ms; {', '.join(sorted(kinds))})")
        ax.set_ylabel("CDF")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, ncol=2)
        save(fig, "sojourn_cdf")
    else:
        plt.close(fig)
    return made


# ------------------------------------------------------------------------------------
# command
# ------------------------------------------------------------------------------------


def compare(dirs: Sequence, metric: str = "fct", baseline: Optional[str] = None, plots: bool = False,
            out: Optional[Path] = None, console=None, quiet: bool = False, end_margin=None) -> pd.DataFrame:
    """Loads, prints (unless quiet) and writes ``compare.md`` (and plots); returns the table.
    The command (:mod:`sojourn.cli.compare`) also writes ``report.html``
    (:func:`sojourn.analysis.htmlreport.write_report`).
    ``end_margin`` (seconds or "60s"): leave out flows ending in the last part of a run;
    None = the sweep file's ``end_margin`` (sweep.json), else 0."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (fct, sojourn, goodput)")
    data = load(dirs)
    if end_margin is None:  # the sweep file's end_margin, if any
        sj = Path(dirs[0]) / "sweep.json"
        end_margin = json.loads(sj.read_text()).get("end_margin") if len(dirs) == 1 and sj.exists() else None
    data = apply_end_margin(data, parse_seconds(end_margin))
    t = table(data, metric, baseline)
    pairs = age_pairs(data, metric)
    dirs = [Path(d) for d in dirs]
    out = Path(out) if out else (dirs[0] if len(dirs) == 1 else dirs[0].resolve().parent)
    out.mkdir(parents=True, exist_ok=True)
    title = f"comparison of {', '.join(str(d) for d in dirs)}"
    made = write_plots(data, t, metric, out) if plots else []
    md = markdown(t, pairs, metric, baseline, title, made)
    if data.end_margin > 0:
        md = md.replace("Flows: started after the warm-up;",
                        f"Flows: started after the warm-up and ended at least {data.end_margin:g} s before the end of the run;", 1)
    (out / "compare.md").write_text(md)
    if not quiet:
        print_tables(t, pairs, metric, title, console, baseline)
    return t
