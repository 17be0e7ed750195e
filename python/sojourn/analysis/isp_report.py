"""The HTML report's per-subscriber figures for isp topologies (docs/isp.md): each
subscriber's achieved rate against its plan (a scatter, one marker per active subscriber
and direction) and the CDF of its latency under load (the queueing delay in its own HTB
class). Runs without ``subscribers.parquet`` add nothing."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

__all__ = ["subscribers_of", "fig_subscriber_rates", "fig_subscriber_latency"]


def subscribers_of(rd: Any, p: str) -> Optional[pd.DataFrame]:
    """The active subscribers' rows of every repeat of point ``p`` (None without any)."""
    parts = []
    for seed, d in rd.run_dirs(p):
        f = d / "subscribers.parquet"
        if f.exists():
            t = pd.read_parquet(f)
            t.insert(0, "seed", seed)
            parts.append(t[t["active"]])
    return pd.concat(parts, ignore_index=True) if parts else None


def fig_subscriber_rates(rd: Any, st: dict):
    """Plan (x) against achieved rate (y), Mbit/s, downstream filled, upstream open; the
    diagonal is 'got its plan'."""
    import plotly.graph_objects as go

    from .htmlreport import _layout

    fig = go.Figure()
    top = 0.0
    for p in rd.points:
        t = subscribers_of(rd, p)
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


def fig_subscriber_latency(rd: Any, st: dict):
    """CDF over active subscribers of their downstream latency under load."""
    import plotly.graph_objects as go

    from .htmlreport import _decimate, _ecdf, _layout

    fig = go.Figure()
    for p in rd.points:
        t = subscribers_of(rd, p)
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
