"""Per-station results of a Wi-Fi run (``[topology] kind = "wifi"``, docs/wifi.md).

``stations_frame(summary)`` (from the leaf ``sojourn.wifi``) turns summary.json's ``wifi``
block into a tidy table, one row per station (written as ``wifi.parquet`` next to
summary.json); ``fig_wifi`` is the HTML report's plot of airtime shares and downlink
throughput per station and point.
"""
from __future__ import annotations

import json

from ..wifi import COLUMNS, stations_frame  # noqa: F401  (re-exported: the report's and notebooks' name)


def fig_wifi(rd, st):
    """Airtime share and downlink throughput per station, one bar group per point (the
    first repeat of each); None when no run has a Wi-Fi medium."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = []
    for p in rd.points:
        dirs = rd.run_dirs(p)
        if not dirs:
            continue
        f = dirs[0][1] / "summary.json"
        if not f.exists():
            continue
        df = stations_frame(json.loads(f.read_text()))
        if df is not None:
            rows.append((p, df))
    if not rows:
        return None
    fig = make_subplots(rows=1, cols=2, subplot_titles=("airtime share", "downlink throughput (Mbit/s)"))
    for p, df in rows:
        s = st[p]
        fig.add_trace(go.Bar(x=df["station"], y=df["airtime_share"], name=p, marker_color=s.colour,
                             legendgroup=p), row=1, col=1)
        fig.add_trace(go.Bar(x=df["station"], y=df["throughput_down_bps"] / 1e6, name=p, marker_color=s.colour,
                             legendgroup=p, showlegend=False), row=1, col=2)
    fig.update_layout(barmode="group", height=380, margin=dict(l=60, r=20, t=60, b=40),
                      title="Per-station airtime and throughput on the Wi-Fi medium (after warm-up)")
    return fig
