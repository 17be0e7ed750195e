"""The report's plots of the named tests (docs/tests.md, docs/reports.md), the three Flent
users read first: the totals (download and upload sums) over time above the probes' RTT
(Flent's ``all_scaled``/``totals``), the CDF of the probes' RTT (``ping_cdf``) and box
plots of the totals and the RTT (``box_totals``). Each point of a sweep is one colour; the
time series are the point's first repeat, the CDF and boxes pool every repeat. A point
whose runs have no probes and no named test draws nothing."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..flent_tests import annotations
from ..probes import totals_series

__all__ = ["fig_flent_totals", "fig_ping_cdf", "fig_box_totals"]


def _run(d: Path) -> Optional[dict[str, Any]]:
    """What the plots need from one run directory (None without probes or tests)."""
    exp = d / "experiment.json"
    probes = d / "probes.parquet"
    experiment = json.loads(exp.read_text()) if exp.exists() else None
    notes = annotations(experiment)
    if not notes and not probes.exists():
        return None
    out: dict[str, Any] = {"pings": {}, "totals": {}}
    warm = float(json.loads((d / "summary.json").read_text()).get("warmup_s", 0.0))
    out["warmup"] = warm
    if probes.exists():
        p = pd.read_parquet(probes)
        for w, g in p[p["mode"] != "oneway"].groupby("workload", sort=True):
            name = notes.get(int(w), {}).get("series", f"workload[{int(w)}] {g['mode'].iloc[0]}")
            out["pings"][name] = (g["time_s"].to_numpy(float), g["rtt_ns"].to_numpy(float) / 1e6)
    if notes:
        ts = pd.read_parquet(d / "timeseries.parquet")
        ts["entity"] = ts["entity"].astype(str)
        ts["metric"] = ts["metric"].astype(str)
        tcp = totals_series(notes, ts, pd.read_parquet(d / "flows.parquet"))
        for role in ("download", "upload"):
            names = sorted({n["series"] for n in notes.values() if n.get("role") == role})
            parts = [tcp[s] for s in names if s in tcp]
            if parts:
                total = parts[0]
                for s in parts[1:]:
                    total = total.add(s, fill_value=0.0)
                out["totals"][role] = total / 1e6
    return out


def _runs(rd: Any, p: str) -> list[dict]:
    runs = []
    for _, d in rd.run_dirs(p):
        r = _run(d)
        if r is not None:
            runs.append(r)
    return runs


def fig_flent_totals(rd: Any, st: dict):
    """Download and upload totals (Mbit/s) and the probes' RTT (ms) against time."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    data = {p: _runs(rd, p) for p in rd.points}
    if not any(data.values()):
        return None
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=("Download total (Mbit/s)", "Upload total (Mbit/s)", "Probe RTT (ms)"))
    for p, runs in data.items():
        if not runs:
            continue
        r = runs[0]
        for row, role in ((1, "download"), (2, "upload")):
            s = r["totals"].get(role)
            if s is not None:
                fig.add_trace(go.Scatter(x=s.index, y=s.to_numpy(), mode="lines", name=f"{p} {role}",
                                         line=dict(color=st[p].colour, dash=st[p].dash), legendgroup=p), row=row, col=1)
        for name, (t, v) in r["pings"].items():
            fig.add_trace(go.Scatter(x=t, y=v, mode="lines", name=f"{p} {name}", legendgroup=p,
                                     line=dict(color=st[p].colour, width=1)), row=3, col=1)
    fig.update_layout(height=720, margin=dict(l=60, r=20, t=60, b=40),
                      title="Totals and latency under load (Flent's all_scaled; first repeat of each point)")
    fig.update_xaxes(title_text="time (s)", row=3, col=1)
    return fig


def fig_ping_cdf(rd: Any, st: dict):
    """ECDF of every probe's RTT after the warm-up, pooled over repeats (Flent's ping_cdf)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    drawn = False
    for p in rd.points:
        vals = []
        for r in _runs(rd, p):
            for t, v in r["pings"].values():
                vals.append(v[(t >= r["warmup"]) & np.isfinite(v)])
        if not vals:
            continue
        x = np.sort(np.concatenate(vals))
        if x.size == 0:
            continue
        fig.add_trace(go.Scatter(x=x, y=np.arange(1, x.size + 1) / x.size, mode="lines", name=p,
                                 line=dict(color=st[p].colour, dash=st[p].dash)))
        drawn = True
    if not drawn:
        return None
    fig.update_layout(title="CDF of the probes' RTT after the warm-up (Flent's ping_cdf)", xaxis_title="RTT (ms)",
                      yaxis_title="cumulative probability", height=380)
    return fig


def fig_box_totals(rd: Any, st: dict):
    """Box plots of the download and upload totals' samples and of the probes' RTT after the
    warm-up, per point (Flent's box_totals)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    data = {p: _runs(rd, p) for p in rd.points}
    if not any(data.values()):
        return None
    fig = make_subplots(rows=1, cols=3, subplot_titles=("Download (Mbit/s)", "Upload (Mbit/s)", "Probe RTT (ms)"))
    for p, runs in data.items():
        cols: dict[int, list] = {1: [], 2: [], 3: []}
        for r in runs:
            for c, role in ((1, "download"), (2, "upload")):
                s = r["totals"].get(role)
                if s is not None:
                    cols[c].append(s[s.index >= r["warmup"]].to_numpy())
            for t, v in r["pings"].values():
                cols[3].append(v[(t >= r["warmup"]) & np.isfinite(v)])
        for c, parts in cols.items():
            if parts:
                fig.add_trace(go.Box(y=np.concatenate(parts), name=p, marker_color=st[p].colour, showlegend=False,
                                     boxpoints=False), row=1, col=c)
    fig.update_layout(title="Totals and RTT after the warm-up (Flent's box_totals)", height=420)
    return fig
