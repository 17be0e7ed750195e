"""Application workloads in results: responsiveness (``rpm``), web page loads (``web``) and
adaptive video (``video``) — docs/tests.md.

The engine writes each application workload entry's numbers to summary.json's ``apps``
list and each measurement (a probe, a page, a segment) to the time series under the
entity ``w{workload}.{rpm.downlink | rpm.uplink | web | video}``. This module turns them
into tidy frames (``sojourn.load(dir, what="apps")`` and ``what="app_samples"``) and the
HTML report's plots (RPM per point, page-load-time CDF, video bitrate timeline).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

__all__ = ["summary_rows", "sample_rows", "app_summary_frame", "fig_rpm", "fig_plt_cdf", "fig_video_bitrate"]

#: Time-series entities of application samples: workload index, kind, direction.
ENTITY = re.compile(r"^w(\d+)\.(rpm|web|video)(?:\.(downlink|uplink))?$")


def summary_rows(summary: dict) -> list[dict[str, Any]]:
    """One dict per application workload entry of a summary.json: ``workload``, ``kind``,
    ``server``, ``client``, ``direction`` (rpm: one row per direction; else None) and the
    entry's numbers (None where the run measured nothing)."""
    rows = []
    for a in summary.get("apps", []) or []:
        head = {k: a.get(k) for k in ("workload", "kind", "server", "client")}
        if a.get("kind") == "rpm":
            for direction in ("downlink", "uplink"):
                if isinstance(a.get(direction), dict):
                    rows.append({**head, "direction": direction, **a[direction]})
        else:
            rest = {k: v for k, v in a.items() if k not in head}
            rows.append({**head, "direction": None, **rest})
    return rows


def sample_rows(ts: pd.DataFrame) -> pd.DataFrame:
    """The application samples of a long time-series frame (``time_s, entity, metric,
    value``) as ``workload, kind, direction, time_s, metric, value``."""
    cols = ["workload", "kind", "direction", "time_s", "metric", "value"]
    if ts is None or ts.empty:
        return pd.DataFrame(columns=cols)
    ent = ts["entity"].astype(str)
    m = ent.str.extract(ENTITY)
    keep = m[0].notna()
    if not keep.any():
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame({
        "workload": m.loc[keep, 0].astype(int).to_numpy(),
        "kind": m.loc[keep, 1].to_numpy(),
        "direction": m.loc[keep, 2].to_numpy(),
        "time_s": ts.loc[keep, "time_s"].to_numpy(float),
        "metric": ts.loc[keep, "metric"].astype(str).to_numpy(),
        "value": ts.loc[keep, "value"].to_numpy(float),
    })
    return out.reset_index(drop=True)


# ------------------------------------------------------------------------------------
# report plots (plotly; htmlreport.write_report adds those that have data and passes its
# `layout`, the one look of every report figure)
# ------------------------------------------------------------------------------------


def _summaries(rd: Any, p: str) -> list[dict]:
    import json

    out = []
    for _, d in rd.run_dirs(p):
        f = Path(d) / "summary.json"
        if f.exists():
            out.extend(summary_rows(json.loads(f.read_text())))
    return out


def fig_rpm(rd: Any, st: dict, layout: Callable[..., None]):
    """Responsiveness per point and direction (mean over repeats; bars)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    found = False
    for p in rd.points:
        rows = [r for r in _summaries(rd, p) if r.get("kind") == "rpm" and r.get("rpm") is not None]
        if not rows:
            continue
        found = True
        dirs = [d for d in ("downlink", "uplink") if any(r["direction"] == d for r in rows)]
        ys = [float(np.mean([r["rpm"] for r in rows if r["direction"] == d])) for d in dirs]
        s = st[p]
        fig.add_trace(go.Bar(x=dirs, y=ys, name=p, marker_color=s.colour))
    if not found:
        return None
    layout(fig, "Responsiveness under working conditions (IETF IPPM draft; higher is better)", "direction",
            "round trips per minute (RPM)")
    fig.update_layout(barmode="group")
    return fig


def _samples(rd: Any, p: str, kind: str, metric: str) -> pd.DataFrame:
    t = rd.timeseries(p)
    if t is None:
        return pd.DataFrame(columns=["workload", "kind", "direction", "time_s", "metric", "value"])
    s = sample_rows(t)
    return s[(s["kind"] == kind) & (s["metric"] == metric)]


def fig_plt_cdf(rd: Any, st: dict, layout: Callable[..., None]):
    """CDF of page load times (the first repeat of each point)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    found = False
    for p in rd.points:
        v = np.sort(_samples(rd, p, "web", "plt_s")["value"].to_numpy(float))
        if v.size == 0:
            continue
        found = True
        s = st[p]
        y = np.arange(1, v.size + 1) / v.size
        fig.add_trace(go.Scatter(x=v * 1e3, y=y, name=p, mode="lines", line=dict(color=s.colour, dash=s.dash, width=1.5),
                                 line_shape="hv"))
    if not found:
        return None
    layout(fig, "CDF of page load time (web workloads, first repeat)", "page load time (ms)", "fraction of pages")
    return fig


def fig_video_bitrate(rd: Any, st: dict, layout: Callable[..., None]):
    """Each segment's bitrate over time (the first repeat of each point)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    found = False
    for p in rd.points:
        v = _samples(rd, p, "video", "bitrate_bps")
        if v.empty:
            continue
        found = True
        s = st[p]
        for w, g in v.groupby("workload"):
            fig.add_trace(go.Scatter(x=g["time_s"], y=g["value"] / 1e6, name=f"{p} w{w}", mode="lines+markers",
                                     line=dict(color=s.colour, dash=s.dash, width=1.5), line_shape="hv"))
    if not found:
        return None
    layout(fig, "Video bitrate per segment (BBA-0; first repeat)", "time (s)", "bitrate (Mbit/s)")
    return fig


def app_summary_frame(summary: dict, head: Optional[dict] = None) -> pd.DataFrame:
    """:func:`summary_rows` as a DataFrame with ``head`` columns in front."""
    rows = [{**(head or {}), **r} for r in summary_rows(summary)]
    return pd.DataFrame(rows)
