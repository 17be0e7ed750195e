"""``sojourn report``: one self-contained HTML file for a run or a sweep.

The page holds the summary tables (with completed/started flow counts and a warning where
completion is low), the experiment file(s) and versions, and interactive plots (Plotly,
its JavaScript embedded once, so the file opens without network access):

* time series of the bottleneck per point (throughput, queue length, queueing delay,
  drops and marks), warm-up shaded; goodput per flow class (each workload entry) and
  per-flow series (goodput, cwnd, srtt) where recorded;
* CDFs of FCT and of the per-packet sojourn time — the latter pooled across repeats from
  the engine's own histogram buckets (``histograms.parquet``), not from sampled queues;
* box plots of per-repeat means; mean FCT with its interval across repeats (log axis);
* FCT against flow size (mean, median, P99), a discipline and its age-based variant
  paired (same colour, solid vs dashed) with a panel of the per-size-bin ratio
  variant/base; Lorenz curves of per-flow throughput;
* Flent's throughput–latency "ellipsis" plot; for a grid sweep, the metric against each
  swept parameter.

Statistics are those of :mod:`sojourn.analysis.stats`; docs/statistics.md says which interval is
which. The page checks itself when opened (every plot rendered with data, no script
error) and records the outcome in ``<body data-report-status=…>``, which the browser
test reads.
"""
from __future__ import annotations

import html
import json
import math
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from . import apps
from . import compare as cmp
from . import stats
from .flent_plots import fig_box_totals, fig_flent_totals, fig_ping_cdf
from .pairs import PALETTE, Style, age_base, styles
from .wifi import fig_wifi
from ..results import read_timeseries
from . import subscribers as _subscribers
from ..units import parse_seconds, typed_value

__all__ = ["write_report", "styles", "PALETTE", "Style"]

COMPLETION_WARN = 0.95  # below this share of sized flows completed, the table warns


# ------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------


@dataclass
class ReportData:
    data: cmp.Data
    sweep: Optional[dict]
    columns: list[str] = field(default_factory=list)
    title: str = ""

    @property
    def points(self) -> list[str]:
        return self.data.points

    def run_dirs(self, p: str) -> list[tuple[int, Path]]:
        rs = self.data.runs[self.data.runs["point"] == p]
        return [(int(r.seed), self.data.root / r.run_dir) for r in rs.itertuples()]

    def histograms(self, p: str, link: str) -> pd.DataFrame:
        parts = []
        for _, d in self.run_dirs(p):
            f = d / "histograms.parquet"
            if f.exists():
                h = pd.read_parquet(f)
                parts.append(h[h["link"].astype(str) == link])
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["link", "lo_ns", "hi_ns", "count"])

    def timeseries(self, p: str) -> Optional[pd.DataFrame]:
        """The time series of the point's first repeat (None when not recorded)."""
        dirs = self.run_dirs(p)
        if not dirs:
            return None
        f = dirs[0][1] / "timeseries.parquet"
        if not f.exists():
            return None
        t = read_timeseries(f)  # thinned when very long: bounded memory for any run length
        if t.empty:
            return None
        t["entity"] = t["entity"].astype(str)
        t["metric"] = t["metric"].astype(str)
        return t


def _link_of(rd: ReportData, p: str) -> str:
    rs = rd.data.runs[rd.data.runs["point"] == p]
    return str(rs["link"].iloc[0]) if len(rs) and "link" in rs else ""


def load_report_data(dirs: Sequence[Path], end_margin=None) -> ReportData:
    data = cmp.load(dirs)
    sweep = None
    if len(dirs) == 1 and (Path(dirs[0]) / "sweep.json").exists():
        sweep = json.loads((Path(dirs[0]) / "sweep.json").read_text())
    if end_margin is None and sweep is not None:
        end_margin = sweep.get("end_margin")
    data = cmp.apply_end_margin(data, parse_seconds(end_margin))
    columns = [c for c in (sweep or {}).get("columns", []) if c in data.runs]
    title = (sweep or {}).get("name") or (str(data.runs["experiment"].iloc[0]) if len(data.runs) else "sojourn report")
    return ReportData(data, sweep, columns, title)


# ------------------------------------------------------------------------------------
# tables
# ------------------------------------------------------------------------------------


def _per_repeat_fct_means(rd: ReportData, p: str) -> np.ndarray:
    ff = cmp.fct_flows(cmp.point_flows(rd.data, p))
    return ff.groupby("seed")["fct_s"].mean().to_numpy(float) if len(ff) else np.array([])


def summary_table(rd: ReportData) -> pd.DataFrame:
    """One row per point: counts, FCT with both intervals, pooled sojourn percentiles."""
    rows = []
    for p in rd.points:
        rs = rd.data.runs[rd.data.runs["point"] == p]
        f = cmp.point_flows(rd.data, p)
        ff = cmp.fct_flows(f)
        sized = int((f["size_bytes"] > 0).sum()) if "size_bytes" in f else 0
        done = int(len(ff))
        per_flow = stats.mean_ci(ff["fct_s"]) if done else {"mean": math.nan, "half_width": math.nan}
        rep = stats.repeat_ci(_per_repeat_fct_means(rd, p)) if done else {"mean": math.nan, "half_width": math.nan, "repeats": 0}
        h = rd.histograms(p, _link_of(rd, p))
        sj50, sj99 = stats.hist_quantiles(h["lo_ns"], h["hi_ns"], h["count"], (0.5, 0.99)) if len(h) else (math.nan, math.nan)
        pct = stats.percentiles(ff["fct_s"], (50.0, 99.0)) if done else {"P50": math.nan, "P99": math.nan}
        gp = cmp.goodputs(f)
        rows.append({
            "point": p, "runs": len(rs), "flows_started": int(len(f)), "flows_sized": sized, "flows_completed": done,
            "completion": done / sized if sized else math.nan,
            "fct_mean_s": per_flow["mean"], "fct_ci_repeats_s": rep["half_width"], "fct_ci_flows_s": per_flow["half_width"],
            "fct_p50_s": pct["P50"], "fct_p99_s": pct["P99"],
            "goodput_mean_bps": float(gp.mean()) if gp.size else math.nan,
            "utilisation": float(rs["utilisation"].mean()) if len(rs) else math.nan,
            "sojourn_p50_ms": sj50 * 1e-6, "sojourn_p99_ms": sj99 * 1e-6,
            "drops_per_run": float(rs["drops"].mean()) if len(rs) else math.nan,
        })
    return pd.DataFrame(rows)


def pairs_table(rd: ReportData) -> pd.DataFrame:
    """Gain of every age-based point over its base: across repeats (bootstrap, paired by
    seed) as the headline, and over flows (delta method) for reference."""
    rows = []
    for p in rd.points:
        b = age_base(p, rd.points)
        if b is None:
            continue
        ga = cmp.samples(rd.data, p, "fct")
        gb = cmp.samples(rd.data, b, "fct")
        g = stats.gain(ga, gb, allow_small=True)
        per_flow = (g["gain"], g["lo"], g["hi"])
        am = rd.data.runs[rd.data.runs["point"] == p]
        # Pair repeats by seed: the same seed draws the same workload in both points.
        ma = pd.Series(_per_repeat_fct_means(rd, p), index=sorted(set(am["seed"]))[: len(_per_repeat_fct_means(rd, p))])
        bm_runs = rd.data.runs[rd.data.runs["point"] == b]
        mb = pd.Series(_per_repeat_fct_means(rd, b), index=sorted(set(bm_runs["seed"]))[: len(_per_repeat_fct_means(rd, b))])
        common = ma.index.intersection(mb.index)
        rep = stats.repeat_gain(ma.loc[common], mb.loc[common], paired=True) if len(common) else stats.repeat_gain([], [])
        rows.append({"base": b, "age": p, "gain": rep["gain"] if np.isfinite(rep["gain"]) else per_flow[0],
                     "gain_lo_repeats": rep["lo"], "gain_hi_repeats": rep["hi"], "repeats": rep["repeats"],
                     "gain_lo_flows": per_flow[1], "gain_hi_flows": per_flow[2]})
    return pd.DataFrame(rows, columns=["base", "age", "gain", "gain_lo_repeats", "gain_hi_repeats", "repeats",
                                       "gain_lo_flows", "gain_hi_flows"])


def _fmt(x: Any, scale: float = 1.0, d: int = 1, unit: str = "") -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return html.escape(str(x))
    return "–" if not np.isfinite(v) else f"{v * scale:,.{d}f}{unit}"


def _ci(m: float, hw: float, scale: float, d: int = 1) -> str:
    if not np.isfinite(m):
        return "–"
    return f"{m * scale:,.{d}f} ± {hw * scale:,.{d}f}" if np.isfinite(hw) else f"{m * scale:,.{d}f}"


def _pct(g: float, lo: float = math.nan, hi: float = math.nan) -> str:
    if not np.isfinite(g):
        return "–"
    return f"{100 * g:+.1f}%" + (f" [{100 * lo:+.1f}, {100 * hi:+.1f}]" if np.isfinite(lo) else "")


def _summary_html(t: pd.DataFrame) -> str:
    multi = bool((t["runs"] > 1).any())
    heads = ["point", "runs", "flows started", "completed / sized", "FCT mean (ms)",
             "± 95% CI across repeats" if multi else "± 95% CI across repeats (needs ≥ 2 runs)",
             "± 95% CI over flows (too narrow)", "FCT P50 (ms)", "FCT P99 (ms)", "goodput (Mbit/s)", "util",
             "sojourn P50 / P99 (ms)", "drops / run"]
    out = ["<table class='num'><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in heads) + "</tr></thead><tbody>"]
    for r in t.itertuples():
        warn = np.isfinite(r.completion) and r.completion < COMPLETION_WARN
        comp = f"{r.flows_completed} / {r.flows_sized}" + (f" ({100 * r.completion:.0f}%)" if np.isfinite(r.completion) else "")
        comp_cell = f"<td class='warn' title='mean FCT is biased towards the flows that finished'>⚠ {comp}</td>" if warn else f"<td>{comp}</td>"
        out.append(
            "<tr>" + f"<td class='name'>{html.escape(r.point)}</td><td>{r.runs}</td><td>{r.flows_started}</td>" + comp_cell
            + f"<td>{_fmt(r.fct_mean_s, 1e3)}</td><td>{_fmt(r.fct_ci_repeats_s, 1e3)}</td><td>{_fmt(r.fct_ci_flows_s, 1e3)}</td>"
            + f"<td>{_fmt(r.fct_p50_s, 1e3)}</td><td>{_fmt(r.fct_p99_s, 1e3)}</td><td>{_fmt(r.goodput_mean_bps, 1e-6, 3)}</td>"
            + f"<td>{_fmt(r.utilisation, 100, 1, '%')}</td><td>{_fmt(r.sojourn_p50_ms, 1, 2)} / {_fmt(r.sojourn_p99_ms, 1, 2)}</td>"
            + f"<td>{_fmt(r.drops_per_run, 1, 1)}</td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _pairs_html(pt: pd.DataFrame) -> str:
    if pt.empty:
        return ""
    out = ["<h2 id='pairs'>Age-based variants against their base</h2>",
           "<p>gain = mean FCT(age-X) / mean FCT(X) − 1; negative is faster. The headline interval is a percentile "
           "bootstrap across repeats, paired by seed; the interval over flows treats the flows of one run as "
           "independent and is shown for reference only.</p>",
           "<table class='num'><thead><tr><th>base</th><th>age-based</th><th>gain</th><th>95% CI across repeats</th>"
           "<th>repeats</th><th>95% CI over flows (too narrow)</th></tr></thead><tbody>"]
    for r in pt.itertuples():
        rep = f"[{100 * r.gain_lo_repeats:+.1f}, {100 * r.gain_hi_repeats:+.1f}]" if np.isfinite(r.gain_lo_repeats) else "– (needs ≥ 2 repeats)"
        fl = f"[{100 * r.gain_lo_flows:+.1f}, {100 * r.gain_hi_flows:+.1f}]" if np.isfinite(r.gain_lo_flows) else "–"
        out.append(f"<tr><td class='name'>{html.escape(r.base)}</td><td class='name'>{html.escape(r.age)}</td>"
                   f"<td>{_pct(r.gain)}</td><td>{rep}</td><td>{r.repeats}</td><td>{fl}</td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


# ------------------------------------------------------------------------------------
# figures
# ------------------------------------------------------------------------------------

MAX_POINTS_PER_TRACE = 2000


def _decimate(x: np.ndarray, y: np.ndarray, n: int = MAX_POINTS_PER_TRACE) -> tuple[np.ndarray, np.ndarray]:
    """Bin means down to at most n points (a long run's series stays light in the page)."""
    if x.size <= n:
        return x, y
    k = int(math.ceil(x.size / n))
    m = (x.size // k) * k
    return x[:m].reshape(-1, k).mean(axis=1), y[:m].reshape(-1, k).mean(axis=1)


def _layout(fig, title: str, x: str, y: str, logx: bool = False, logy: bool = False, height: int = 380) -> None:
    fig.update_layout(title=title, height=height, margin=dict(l=60, r=20, t=50, b=50), template="plotly_white",
                      legend=dict(font=dict(size=10)), hovermode="closest")
    # Only ever force "log": forcing "linear" would break categorical axes (bar, box).
    fig.update_xaxes(showline=True, mirror=True, linecolor="#999")
    fig.update_yaxes(title_text=y, showline=True, mirror=True, linecolor="#999")
    if x:
        fig.update_xaxes(title_text=x)
    if logx:
        fig.update_xaxes(type="log")
    if logy:
        fig.update_yaxes(type="log")


def _wide_range(values: np.ndarray) -> bool:
    """Log axis when the positive values span more than two decades."""
    v = values[np.isfinite(values) & (values > 0)]
    return v.size > 1 and v.max() / v.min() > 100.0


def fig_timeseries(rd: ReportData, st: dict[str, Style]):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    metrics = [("throughput_bps", "throughput (Mbit/s)", 1e-6), ("queue_packets", "queue (packets)", 1.0),
               ("queue_delay_ms", "queueing delay (ms) = queue bytes / rate", 1.0), ("drops", "drops per interval", 1.0),
               ("ecn_marks", "ECN marks per interval", 1.0)]
    series: dict[str, pd.DataFrame] = {}
    for p in rd.points:
        t = rd.timeseries(p)
        if t is not None:
            series[p] = t
    if not series:
        return None
    present = []
    for m, label, scale in metrics:
        for p, t in series.items():
            link = _link_of(rd, p)
            sel = t[(t["entity"] == link) & (t["metric"] == ("queue_bytes" if m == "queue_delay_ms" else m))]
            if len(sel) and (m not in ("drops", "ecn_marks") or sel["value"].sum() > 0):
                present.append((m, label, scale))
                break
    if not present:
        return None
    fig = make_subplots(rows=len(present), cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        subplot_titles=[lab for _, lab, _ in present])
    warm = float(rd.data.runs["warmup_s"].max()) if "warmup_s" in rd.data.runs else 0.0
    for i, (m, label, scale) in enumerate(present, start=1):
        for p, t in series.items():
            link = _link_of(rd, p)
            src = "queue_bytes" if m == "queue_delay_ms" else m
            sel = t[(t["entity"] == link) & (t["metric"] == src)]
            if sel.empty:
                continue
            x = sel["time_s"].to_numpy(float)
            y = sel["value"].to_numpy(float) * scale
            if m == "queue_delay_ms":
                rate = float(rd.data.runs.loc[rd.data.runs["point"] == p, "rate_bps"].iloc[0])
                if not (np.isfinite(rate) and rate > 0):
                    continue
                y = y * 8.0 / rate * 1e3
            x, y = _decimate(x, y)
            s = st[p]
            fig.add_trace(go.Scatter(x=x, y=y, name=p, legendgroup=p, showlegend=(i == 1), mode="lines",
                                       line=dict(color=s.colour, dash=s.dash, width=1.3)), row=i, col=1)
    if warm > 0:
        fig.add_vrect(x0=0, x1=warm, fillcolor="#888", opacity=0.12, line_width=0, annotation_text="warm-up",
                      annotation_position="top left", row="all", col=1)
    _layout(fig, "Bottleneck over time (first repeat of each point)", "", "", height=220 * len(present) + 80)
    fig.update_xaxes(title_text="time (s)", row=len(present), col=1)
    return fig


def fig_flow_series(rd: ReportData, st: dict[str, Style], max_flows: int = 12):
    """Per-flow goodput / cwnd / srtt when the run recorded flow series (a single point)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if len(rd.points) != 1:
        return None
    t = rd.timeseries(rd.points[0])
    if t is None:
        return None
    flows = t[t["entity"].str.startswith("flow")]
    if flows.empty:
        return None
    metrics = [m for m in ("goodput_bps", "cwnd_bytes", "cwnd_packets", "cwnd", "srtt_ms", "srtt_s") if (flows["metric"] == m).any()]
    if not metrics:
        return None
    ents = list(dict.fromkeys(flows["entity"]))[:max_flows]
    fig = make_subplots(rows=len(metrics), cols=1, shared_xaxes=True, vertical_spacing=0.05, subplot_titles=metrics)
    for i, m in enumerate(metrics, start=1):
        for j, e in enumerate(ents):
            sel = flows[(flows["entity"] == e) & (flows["metric"] == m)]
            if sel.empty:
                continue
            x, y = _decimate(sel["time_s"].to_numpy(float), sel["value"].to_numpy(float) * (1e-6 if m == "goodput_bps" else 1.0))
            fig.add_trace(go.Scatter(x=x, y=y, name=e, legendgroup=e, showlegend=(i == 1), mode="lines",
                                       line=dict(color=PALETTE[j % len(PALETTE)], width=1.1)), row=i, col=1)
    _layout(fig, f"Per-flow series (first {len(ents)} flows; goodput in Mbit/s)", "", "", height=220 * len(metrics) + 80)
    fig.update_xaxes(title_text="time (s)", row=len(metrics), col=1)
    return fig


def fig_class_series(rd: ReportData, st: dict[str, Style]):
    """Goodput per flow class (each ``[[workload]]`` entry: its kind and index) over time,
    one panel per class, every point a line — from the per-flow series of the first repeat
    (recorded with ``[record] flows = true``)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    per_point: dict[str, pd.DataFrame] = {}
    for p in rd.points:
        t = rd.timeseries(p)
        dirs = rd.run_dirs(p)
        if t is None or not dirs:
            continue
        g = t[t["entity"].str.startswith("flow") & (t["metric"] == "goodput_bps")]
        if g.empty:
            continue
        flows = pd.read_parquet(dirs[0][1] / "flows.parquet", columns=["flow", "kind", "workload"])
        cls = {int(r.flow): f"workload[{int(r.workload)}] ({r.kind})" for r in flows.itertuples()}
        g = g.assign(cls=g["entity"].str[4:].astype(int).map(cls)).dropna(subset=["cls"])
        per_point[p] = g.groupby(["cls", "time_s"])["value"].sum().reset_index()
    if not per_point:
        return None
    classes = sorted({c for df in per_point.values() for c in df["cls"].unique()})
    fig = make_subplots(rows=len(classes), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=[f"{c}: goodput (Mbit/s)" for c in classes])
    for i, c in enumerate(classes, start=1):
        for p, df in per_point.items():
            sel = df[df["cls"] == c]
            if sel.empty:
                continue
            x, y = _decimate(sel["time_s"].to_numpy(float), sel["value"].to_numpy(float) * 1e-6)
            s = st[p]
            fig.add_trace(go.Scatter(x=x, y=y, name=p, legendgroup=p, showlegend=(i == 1), mode="lines",
                                     line=dict(color=s.colour, dash=s.dash, width=1.3)), row=i, col=1)
    _layout(fig, "Goodput per flow class (sum over the class's flows, first repeat of each point)", "", "",
            height=200 * len(classes) + 90)
    fig.update_xaxes(title_text="time (s)", row=len(classes), col=1)
    return fig


def _ecdf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(x[np.isfinite(x)])
    return x, np.arange(1, x.size + 1) / x.size


def fig_fct_cdf(rd: ReportData, st: dict[str, Style]):
    import plotly.graph_objects as go

    fig = go.Figure()
    allv = []
    for p in rd.points:
        ff = cmp.fct_flows(cmp.point_flows(rd.data, p))
        if ff.empty:
            continue
        x, y = _ecdf(ff["fct_s"].to_numpy(float) * 1e3)
        allv.append(x)
        x, y = _decimate(x, y)
        s = st[p]
        fig.add_trace(go.Scatter(x=x, y=y, name=p, mode="lines", line=dict(color=s.colour, dash=s.dash, width=1.5)))
    if not allv:
        return None
    _layout(fig, "CDF of flow completion time (completed sized flows, all repeats)", "FCT (ms)", "fraction of flows",
            logx=_wide_range(np.concatenate(allv)))
    return fig


def fig_sojourn_cdf(rd: ReportData, st: dict[str, Style]):
    import plotly.graph_objects as go

    fig = go.Figure()
    allv = []
    for p in rd.points:
        h = rd.histograms(p, _link_of(rd, p))
        if h.empty:
            continue
        x, y = stats.hist_cdf(h["lo_ns"], h["hi_ns"], h["count"])
        x = x * 1e-6
        allv.append(x)
        s = st[p]
        fig.add_trace(go.Scatter(x=x, y=y, name=p, mode="lines", line=dict(color=s.colour, dash=s.dash, width=1.5)))
    if not allv:
        return None
    v = np.concatenate(allv)
    logx = _wide_range(v)
    _layout(fig, "CDF of per-packet sojourn time at the bottleneck (engine histogram, pooled over repeats; "
                 "packets that found an idle link have sojourn 0 and start the curves)",
            "sojourn (ms)", "fraction of packets", logx=logx)
    if logx:  # from the smallest positive bucket above 1 µs: zero-sojourn packets are not plotted on a log axis
        pos = v[v >= 1e-3]
        if pos.size:
            fig.update_xaxes(range=[math.log10(pos.min()), math.log10(v.max()) + 0.05])
    return fig


def fig_mean_ci(rd: ReportData, st: dict[str, Style], t: pd.DataFrame):
    import plotly.graph_objects as go

    ok = t[np.isfinite(t["fct_mean_s"])]
    if ok.empty:
        return None
    multi = bool((ok["runs"] > 1).any())
    err = (ok["fct_ci_repeats_s"] if multi else ok["fct_ci_flows_s"]).to_numpy(float) * 1e3
    fig = go.Figure(go.Bar(x=ok["point"], y=ok["fct_mean_s"] * 1e3, marker_color=[st[p].colour for p in ok["point"]],
                           marker_pattern_shape=["/" if st[p].dash == "dash" else "" for p in ok["point"]],
                           error_y=dict(type="data", array=np.nan_to_num(err), visible=True)))
    what = "95% CI across repeats" if multi else "95% CI over flows (single run: too narrow, flows are correlated)"
    _layout(fig, f"Mean FCT with {what}", "", "mean FCT (ms)", logy=_wide_range(ok["fct_mean_s"].to_numpy(float)))
    return fig


def fig_box(rd: ReportData, st: dict[str, Style]):
    import plotly.graph_objects as go

    if rd.data.runs.groupby("point").size().max() < 2:
        return None
    fig = go.Figure()
    vals = []
    for p in rd.points:
        m = _per_repeat_fct_means(rd, p) * 1e3
        if m.size == 0:
            continue
        vals.append(m)
        fig.add_trace(go.Box(y=m, name=p, boxpoints="all", jitter=0.3, marker_color=st[p].colour, line=dict(color=st[p].colour)))
    if not vals:
        return None
    _layout(fig, "Per-repeat mean FCT (each point is one independent run)", "", "mean FCT (ms)",
            logy=_wide_range(np.concatenate(vals)))
    fig.update_layout(showlegend=False)
    return fig


def fig_fct_vs_size(rd: ReportData, st: dict[str, Style]):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    bins: dict[str, pd.DataFrame] = {}
    for p in rd.points:
        ff = cmp.fct_flows(cmp.point_flows(rd.data, p))
        if len(ff) < 2:
            continue
        bins[p] = size_bins(ff)
    if not bins:
        return None
    pairs = [(age_base(p, rd.points), p) for p in rd.points if age_base(p, rd.points) in bins and p in bins]
    cols = ["mean", "median", "p99"]
    rows = 2 if pairs else 1
    titles = ["mean FCT (ms)", "median FCT (ms)", "P99 FCT (ms)"] + (["ratio age-X / X of the mean per size bin"] if pairs else [])
    specs = [[{}, {}, {}]] + ([[{"colspan": 3}, None, None]] if pairs else [])
    fig = make_subplots(rows=rows, cols=3, specs=specs, subplot_titles=titles, vertical_spacing=0.14, horizontal_spacing=0.06)
    for j, c in enumerate(cols, start=1):
        for p, b in bins.items():
            s = st[p]
            fig.add_trace(go.Scatter(x=b["size_center"], y=b[c] * 1e3, name=p, legendgroup=p, showlegend=(j == 1),
                                     mode="lines+markers", marker=dict(size=4),
                                     line=dict(color=s.colour, dash=s.dash, width=1.4)), row=1, col=j)
        fig.update_xaxes(type="log", title_text="flow size (bytes)", row=1, col=j)
        fig.update_yaxes(type="log", row=1, col=j)
    if pairs:
        for base, p in pairs:
            a, b = bins[p].set_index("size_center"), bins[base].set_index("size_center")
            common = a.index.intersection(b.index)
            ratio = (a.loc[common, "mean"] / b.loc[common, "mean"]).to_numpy(float)
            fig.add_trace(go.Scatter(x=common, y=ratio, name=f"{p} / {base}", mode="lines+markers", showlegend=True,
                                     marker=dict(size=5), line=dict(color=st[p].colour, width=1.6)), row=2, col=1)
        fig.add_hline(y=1.0, line=dict(color="#444", dash="dot", width=1), row=2, col=1)
        fig.update_xaxes(type="log", title_text="flow size (bytes)", row=2, col=1)
        fig.update_yaxes(type="log", title_text="ratio (below 1: age-based faster)", row=2, col=1)
    fig.update_layout(title="FCT against flow size (logarithmic bins; a discipline and its age-based variant share a colour, "
                            "the variant dashed)", height=760 if pairs else 420, template="plotly_white",
                      margin=dict(l=60, r=20, t=70, b=50), legend=dict(font=dict(size=10)))
    return fig


def size_bins(ff: pd.DataFrame, per_decade: int = 4) -> pd.DataFrame:
    """Mean, median and P99 FCT per logarithmic size bin (``per_decade`` bins per decade)."""
    size = ff["size_bytes"].to_numpy(float)
    fct = ff["fct_s"].to_numpy(float)
    ok = (size > 0) & np.isfinite(fct)
    size, fct = size[ok], fct[ok]
    edges = 10.0 ** np.arange(math.floor(math.log10(size.min()) * per_decade) / per_decade,
                              math.log10(size.max()) + 1.0 / per_decade + 1e-9, 1.0 / per_decade)
    idx = np.clip(np.searchsorted(edges, size, side="right") - 1, 0, len(edges) - 2)
    rows = []
    for i in np.unique(idx):
        v = fct[idx == i]
        rows.append({"size_center": float(math.sqrt(edges[i] * edges[i + 1])), "count": int(v.size),
                     "mean": float(v.mean()), "median": float(np.median(v)), "p99": float(np.quantile(v, 0.99))})
    return pd.DataFrame(rows)


def fig_lorenz(rd: ReportData, st: dict[str, Style]):
    import plotly.graph_objects as go

    fig = go.Figure()
    any_l = False
    for p in rd.points:
        th = cmp.flow_throughputs(cmp.point_flows(rd.data, p))
        if th.size < 2:
            continue
        lc = stats.lorenz_curve(th)
        x, L = _decimate(lc["share_flows"].to_numpy(float), lc["share_total"].to_numpy(float))
        s = st[p]
        fig.add_trace(go.Scatter(x=x, y=L, name=f"{p} (gap {stats.lorenz_gap(th):.3f})", mode="lines",
                                   line=dict(color=s.colour, dash=s.dash, width=1.5)))
        any_l = True
    if not any_l:
        return None
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], name="equality", mode="lines", line=dict(color="#000", dash="dot", width=1)))
    _layout(fig, "Lorenz curves of per-flow throughput (the gap is the largest distance to equality)",
            "share of flows (slowest first)", "share of total throughput", height=460)
    return fig


def _ellipse(x: np.ndarray, y: np.ndarray, n: int = 60) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """The 1-σ ellipse of (x, y) samples (from their covariance matrix)."""
    if x.size < 3:
        return None
    cov = np.cov(np.vstack([x, y]))
    if not np.all(np.isfinite(cov)):
        return None
    vals, vecs = np.linalg.eigh(cov)
    vals = np.clip(vals, 0, None)
    t = np.linspace(0, 2 * math.pi, n)
    circle = np.vstack([np.cos(t), np.sin(t)])
    pts = vecs @ (np.sqrt(vals)[:, None] * circle)
    return x.mean() + pts[0], y.mean() + pts[1]


def fig_ellipsis(rd: ReportData, st: dict[str, Style]):
    """Flent's throughput–latency plot: per point, the mean of the bottleneck's (queueing
    delay, throughput) samples after the warm-up and their 1-σ ellipse."""
    import plotly.graph_objects as go

    fig = go.Figure()
    drawn = False
    for p in rd.points:
        t = rd.timeseries(p)
        if t is None:
            continue
        link = _link_of(rd, p)
        rate = float(rd.data.runs.loc[rd.data.runs["point"] == p, "rate_bps"].iloc[0])
        warm = float(rd.data.runs.loc[rd.data.runs["point"] == p, "warmup_s"].iloc[0])
        q = t[(t["entity"] == link) & (t["metric"] == "queue_bytes") & (t["time_s"] > warm)].set_index("time_s")["value"]
        th = t[(t["entity"] == link) & (t["metric"] == "throughput_bps") & (t["time_s"] > warm)].set_index("time_s")["value"]
        both = pd.concat([q, th], axis=1, join="inner").dropna()
        if len(both) < 3 or not (np.isfinite(rate) and rate > 0):
            continue
        x = both.iloc[:, 0].to_numpy(float) * 8.0 / rate * 1e3
        y = both.iloc[:, 1].to_numpy(float) * 1e-6
        s = st[p]
        e = _ellipse(x, y)
        if e is not None:
            fig.add_trace(go.Scatter(x=e[0], y=e[1], mode="lines", line=dict(color=s.colour, dash=s.dash, width=1.2),
                                     legendgroup=p, showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=[x.mean()], y=[y.mean()], mode="markers+text", name=p, legendgroup=p, text=[p],
                                 textposition="top center", marker=dict(color=s.colour, size=9)))
        drawn = True
    if not drawn:
        return None
    _layout(fig, "Throughput against queueing delay (mean and 1-σ ellipse of the samples after the warm-up; "
                 "up and left is better)", "queueing delay at the bottleneck (ms)", "throughput (Mbit/s)", height=480)
    fig.update_xaxes(autorange="reversed")
    return fig


def fig_param(rd: ReportData, st: dict[str, Style], t: pd.DataFrame):
    """For a grid sweep: mean FCT (and P99 sojourn) against each swept parameter."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    cols = [c for c in rd.columns if rd.data.runs[c].nunique() > 1]
    # Only parameters with numeric values (a rate, a delay, a size, a number) make a curve;
    # named variants are already the rows of every other plot.
    cols = [c for c in cols if all(isinstance(typed_value(v), float) for v in rd.data.runs[c].unique())]
    if not cols:
        return None
    first = rd.data.runs.drop_duplicates("point").set_index("point")
    tt = t.set_index("point")
    fig = make_subplots(rows=len(cols), cols=2, subplot_titles=[f"{m} against {c}" for c in cols for m in ("mean FCT (ms)", "sojourn P99 (ms)")],
                        vertical_spacing=0.12)
    for i, c in enumerate(cols, start=1):
        others = [o for o in cols if o != c]
        groups = first.groupby(others) if others else [("all", first)]
        for gi, (g, sub) in enumerate(groups):
            xs = [typed_value(v) for v in sub[c]]
            numeric = all(isinstance(v, float) for v in xs)
            order = np.argsort(xs) if numeric else np.arange(len(xs))
            pts = [sub.index[k] for k in order]
            x = [xs[k] for k in order]
            name = ", ".join(f"{o}={v}" for o, v in zip(others, g if isinstance(g, tuple) else (g,))) if others else c
            # By position, not hash(): str hashes are salted per process, colours must not be.
            colour = PALETTE[gi % len(PALETTE)]
            for j, m in enumerate(("fct_mean_s", "sojourn_p99_ms"), start=1):
                y = tt.loc[pts, m].to_numpy(float) * (1e3 if m == "fct_mean_s" else 1.0)
                err = tt.loc[pts, "fct_ci_repeats_s"].to_numpy(float) * 1e3 if m == "fct_mean_s" else None
                fig.add_trace(go.Scatter(x=x, y=y, name=name, legendgroup=str(g), showlegend=(j == 1), mode="lines+markers",
                                         line=dict(color=colour),
                                         error_y=dict(type="data", array=np.nan_to_num(err), visible=True) if err is not None else None),
                              row=i, col=j)
            if numeric and len(x) > 1 and max(x) / max(min(x), 1e-300) > 100:
                fig.update_xaxes(type="log", row=i, col=1)
                fig.update_xaxes(type="log", row=i, col=2)
        fig.update_xaxes(title_text=f"{c} (SI base unit: bit/s, s or bytes)", row=i)
    fig.update_layout(title="Metrics against the swept parameters (interval: 95% CI across repeats)",
                      height=360 * len(cols) + 60, template="plotly_white", margin=dict(l=60, r=20, t=70, b=50))
    return fig


# ------------------------------------------------------------------------------------
# the page
# ------------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;max-width:1280px;padding:16px 24px;color:#222}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.86em}th,td{border:1px solid #ddd;padding:4px 8px}
th{background:#f4f6f8;text-align:left}table.num td{text-align:right}td.name{text-align:left;font-family:monospace}
td.warn{background:#fff3cd;color:#7a5400;font-weight:600}.note{color:#555;font-size:.9em}
.plot{margin:1em 0;border:1px solid #eee;border-radius:4px}.banner{background:#fff3cd;border:1px solid #e0c060;padding:8px 12px;border-radius:4px}
pre{background:#f7f7f7;padding:10px;overflow:auto;font-size:.8em;max-height:400px}details{margin:.5em 0}
nav a{margin-right:1em}
"""

# First thing in <head>: collects script errors from everything that runs after it.
ERROR_TRAP = ("<script>window.__sojournErrors=[];window.addEventListener('error',function(e){"
              "window.__sojournErrors.push(String(e.message||e));});</script>")

SELF_CHECK = """
<script>
(function(){
  var errors=window.__sojournErrors||[];
  function check(){
    var plots=document.querySelectorAll('.plot');var empty=[];
    plots.forEach(function(d){
      var g=d.querySelector('.plotly-graph-div');var data=(g&&g._fullData)||[];var n=0;
      data.forEach(function(t){if(t.visible===false)return;var k=t._length||(t.x&&t.x.length)||(t.y&&t.y.length)||0;n+=k;});
      // Drawn marks: trace paths with a visible extent (an axis that cannot place the
      // data leaves them empty even though the figure has data).
      var marks=0;d.querySelectorAll('.cartesianlayer .trace path, .cartesianlayer .trace .point path').forEach(function(pth){
        try{var b=pth.getBBox();if(b.width+b.height>1)marks++;}catch(e){}});
      if(!g||!d.querySelector('.main-svg')||n===0||marks===0){empty.push(d.id);}
    });
    var imgs=[];document.querySelectorAll('img').forEach(function(i){if(!(i.complete&&i.naturalWidth>0))imgs.push(i.src.slice(0,60));});
    var ok=errors.length===0&&empty.length===0&&imgs.length===0&&plots.length>0;
    document.body.setAttribute('data-report-status',ok?'ok':'error');
    document.body.setAttribute('data-report-detail',JSON.stringify({plots:plots.length,empty:empty,errors:errors,images:imgs}));
  }
  if(document.readyState==='complete'){setTimeout(check,200);}else{window.addEventListener('load',function(){setTimeout(check,200);});}
})();
</script>
"""


# isp topologies (docs/isp.md): per-subscriber figures from subscribers.parquet


def fig_subscriber_rates(rd: ReportData, st: dict[str, Style]):
    """Plan (x) against achieved rate (y), Mbit/s, downstream filled, upstream open; the
    diagonal is 'got its plan'."""
    import plotly.graph_objects as go

    fig = go.Figure()
    top = 0.0
    for p in rd.points:
        t = _subscribers.subscribers_of(rd, p)
        if t is None or t.empty:
            continue
        s = st[p]
        for direction, symbol in (("down", "circle"), ("up", "circle-open")):
            u = t[t["direction"] == direction]
            if u.empty:
                continue
            # Jitter the plan a little so subscribers on one plan do not hide each other.
            x = u["plan_bps"].to_numpy(float) / 1e6
            jit = 1.0 + 0.04 * (np.linspace(-1.0, 1.0, len(x)) if len(x) > 1 else np.zeros(1))
            y = u["achieved_bps"].to_numpy(float) / 1e6
            top = max(top, float(np.nanmax(x)), float(np.nanmax(y)) if len(y) else 0.0)
            fig.add_trace(go.Scattergl(x=x * jit, y=y, name=f"{p} ({direction})", mode="markers",
                                       marker=dict(color=s.colour, symbol=symbol, size=5, opacity=0.6),
                                       text=u["subscriber"].astype(str), hovertemplate="%{text}: plan %{x:.1f}, got %{y:.1f} Mbit/s"))
    if not fig.data:
        return None
    fig.add_trace(go.Scatter(x=[0, top * 1.05], y=[0, top * 1.05], name="plan", mode="lines",
                             line=dict(color="#888", dash="dot", width=1)))
    _layout(fig, "Per-subscriber rate: achieved against plan (active subscribers, all repeats)",
            "plan (Mbit/s)", "achieved (Mbit/s)")
    return fig


def fig_subscriber_latency(rd: ReportData, st: dict[str, Style]):
    """CDF over active subscribers of their downstream latency under load."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for p in rd.points:
        t = _subscribers.subscribers_of(rd, p)
        if t is None or t.empty:
            continue
        u = t[t["direction"] == "down"]
        x, y = _ecdf(u["queueing_ms"].to_numpy(float))
        if x.size == 0:
            continue
        x, y = _decimate(x, y)
        s = st[p]
        fig.add_trace(go.Scatter(x=x, y=y, name=p, mode="lines", line=dict(color=s.colour, dash=s.dash, width=1.5)))
    if not fig.data:
        return None
    _layout(fig, "CDF over active subscribers of their latency under load (downstream: mean one-way delay less "
                 "half the base RTT, i.e. the sojourn in the subscriber's HTB class)",
            "queueing delay (ms)", "fraction of subscribers")
    return fig


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    try:
        from .. import _engine

        out["sojourn engine"] = _engine.version()
    except ImportError:  # pragma: no cover
        pass
    for pkg in ("sojourn", "numpy", "pandas", "pyarrow", "scipy", "plotly"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:  # pragma: no cover
            pass
    return out


def _experiment_blocks(rd: ReportData, dirs: Sequence[Path]) -> str:
    parts = []
    if rd.sweep is not None:
        f = rd.sweep.get("sweep")
        text = None
        if f:
            cand = Path(f)
            if not cand.is_absolute():
                cand = (Path(dirs[0]) / cand) if not cand.exists() else cand
            if cand.exists() and cand.stat().st_size < 1_000_000:
                text = cand.read_text(errors="replace")
        parts.append(f"<details><summary>sweep file <code>{html.escape(str(f))}</code></summary><pre>"
                     f"{html.escape(text if text is not None else json.dumps(rd.sweep, indent=2, default=str))}</pre></details>")
    for p in rd.points[:50]:
        for _, d in rd.run_dirs(p)[:1]:
            e = d / "experiment.json"
            if e.exists():
                parts.append(f"<details><summary>experiment of <code>{html.escape(p)}</code> (as run, after overrides)</summary>"
                             f"<pre>{html.escape(e.read_text(errors='replace'))}</pre></details>")
    return "\n".join(parts)


def write_report(dirs: Sequence, out: Optional[Path] = None, title: Optional[str] = None,
                 end_margin=None, source: Optional[str] = None) -> Path:
    """Writes one self-contained HTML report for a run directory, several run
    directories, or a sweep directory; returns its path (default ``DIR/report.html``).
    ``source`` names where the runs are in the page (default: the directories given)."""
    import plotly
    import plotly.offline

    dirs = [Path(d) for d in dirs]
    rd = load_report_data(dirs, end_margin)
    if title:
        rd.title = title
    st = styles(rd.points)
    t = summary_table(rd)
    pt = pairs_table(rd)
    figs = [
        ("timeseries", "Time series", fig_timeseries(rd, st)),
        ("classes", "Flow classes", fig_class_series(rd, st)),
        ("flows", "Per-flow series", fig_flow_series(rd, st)),
        ("mean", "Mean FCT", fig_mean_ci(rd, st, t)),
        ("box", "Across repeats", fig_box(rd, st)),
        ("fct-cdf", "FCT CDF", fig_fct_cdf(rd, st)),
        ("sojourn-cdf", "Sojourn CDF", fig_sojourn_cdf(rd, st)),
        ("fct-size", "FCT vs size", fig_fct_vs_size(rd, st)),
        ("lorenz", "Fairness", fig_lorenz(rd, st)),
        ("ellipsis", "Throughput vs latency", fig_ellipsis(rd, st)),
        ("params", "Swept parameters", fig_param(rd, st, t)),
        ("flent-totals", "Totals and latency (Flent)", fig_flent_totals(rd, st)),
        ("ping-cdf", "Latency CDF (Flent)", fig_ping_cdf(rd, st)),
        ("box-totals", "Box totals (Flent)", fig_box_totals(rd, st)),
        ("rpm", "Responsiveness (RPM)", apps.fig_rpm(rd, st, _layout)),
        ("plt-cdf", "Page load time CDF", apps.fig_plt_cdf(rd, st, _layout)),
        ("video", "Video bitrate", apps.fig_video_bitrate(rd, st, _layout)),
        ("wifi", "Wi-Fi stations", fig_wifi(rd, st)),
        ("subscriber-rates", "Subscribers: plan vs achieved", fig_subscriber_rates(rd, st)),
        ("subscriber-latency", "Subscribers: latency under load", fig_subscriber_latency(rd, st)),
    ]
    figs = [(k, name, f) for k, name, f in figs if f is not None]
    low = t[np.isfinite(t["completion"]) & (t["completion"] < COMPLETION_WARN)]
    banner = ""
    if len(low):
        names = ", ".join(f"{r.point} ({100 * r.completion:.0f}%)" for r in low.itertuples())
        banner = (f"<p class='banner'>⚠ Low completion: {html.escape(names)} of the sized flows finished before the end. "
                  "Their mean FCT is biased towards the flows that finished (short ones); compare percentiles and "
                  "completion counts, or run longer.</p>")
    nav = " ".join(f"<a href='#{k}'>{html.escape(name)}</a>" for k, name, _ in figs)
    body = [f"<h1>{html.escape(rd.title)}</h1>",
            f"<p class='note'>{len(rd.points)} point(s), {len(rd.data.runs)} run(s) from {html.escape(source or ', '.join(str(d) for d in dirs))}. "
            "Flows counted: started after the warm-up" + (f" and ended at least {rd.data.end_margin:g} s before the end" if rd.data.end_margin > 0 else "")
            + "; FCT over completed sized flows.</p>",
            f"<nav><a href='#summary'>Summary</a> <a href='#pairs'>Age-based gains</a> {nav} <a href='#about'>Experiment &amp; versions</a></nav>",
            banner, "<h2 id='summary'>Summary</h2>",
            "<p class='note'>The interval across repeats (Student-t over per-run means) is the one to quote; the interval over "
            "flows treats the flows of one run as independent (they share a queue, and sizes are heavy-tailed), so it is "
            "too narrow. Sojourn percentiles are pooled over repeats from the engine's per-packet histograms "
            "(within 0.8%). See docs/statistics.md.</p>",
            _summary_html(t), _pairs_html(pt)]
    for k, name, f in figs:
        div = f.to_html(full_html=False, include_plotlyjs=False, div_id=f"plot-{k}",
                        config={"responsive": True, "displaylogo": False, "toImageButtonOptions": {"format": "svg"}})
        body.append(f"<h2 id='{k}'>{html.escape(name)}</h2><div class='plot' id='{k}-box'>{div}</div>")
    vers = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in _versions().items())
    body.append(f"<h2 id='about'>Experiment and versions</h2><table>{vers}</table>{_experiment_blocks(rd, dirs)}")
    page = ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"{ERROR_TRAP}<title>{html.escape(rd.title)} — sojourn report</title><style>{CSS}</style>"
            f"<script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script></head><body>"
            + "\n".join(body) + SELF_CHECK + "</body></html>\n")
    out_path = Path(out) if out else (dirs[0] / "report.html" if len(dirs) == 1 else dirs[0].resolve().parent / "report.html")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out_path)
    return out_path
