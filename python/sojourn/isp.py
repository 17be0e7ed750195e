"""Per-subscriber results of an ISP subscriber tree (``[topology] kind = "isp"``, docs/isp.md).

A run of an isp topology writes ``subscribers.parquet`` next to ``flows.parquet``: one row
per subscriber and direction (``down``: server to subscriber, through the ``uplink`` HTB
tree; ``up``: subscriber to server, through ``upstream``), tidy, with

* the subscriber's plan (``plan_bps``, ``ceil_bps``), site, base RTT and whether it was
  active (selected by the topology's ``active`` fraction);
* ``achieved_bps``: payload bytes its flows in that direction delivered over the
  measurement window (warm-up to the end of the run; flows that started before the
  warm-up ended count only in proportion, see :func:`subscriber_table`), and
  ``achieved_ratio`` = achieved / plan;
* ``latency_ms``: the mean one-way delay of its delivered data packets (weighted by
  delivered bytes), ``base_delay_ms`` = half its base RTT, and ``queueing_ms`` = their
  difference: the latency under load, which on this topology is the sojourn in the
  subscriber's own HTB class (every other link on the path is faster than the plan);
* ``flows``: its flows in that direction.

:func:`sojourn.analysis.subscribers.fairness` gives Jain's index and the Lorenz gap of
``achieved_ratio`` across the active subscribers (a subscriber who gets its plan scores 1, whatever the plan, so unequal
plans do not read as unfairness). The run's summary is not changed.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np
import pandas as pd

__all__ = ["plan_frame", "subscriber_table", "describe", "attach", "FILE"]

FILE = "subscribers.parquet"

COLUMNS = ["subscriber", "direction", "plan", "site", "access", "active", "classid", "server", "rtt_s",
           "plan_bps", "ceil_bps", "flows", "delivered_bytes", "achieved_bps", "achieved_ratio",
           "latency_ms", "base_delay_ms", "queueing_ms"]


def plan_frame(isp: Mapping[str, Any]) -> pd.DataFrame:
    """The subscribers of ``validate``'s ``isp`` entry as a DataFrame (one row each)."""
    return pd.DataFrame(dict(isp["subscribers"]))


def subscriber_table(flows: pd.DataFrame, isp: Mapping[str, Any], duration_s: float,
                     warmup_s: float = 0.0) -> pd.DataFrame:
    """One row per subscriber and direction (module docstring). ``flows`` is a run's
    flows table. A flow's delivered bytes are counted in the window [warm-up, end] in
    proportion to the part of its life (start to end, or to the run's end) inside it: the
    flows table holds totals, not a time series, so this assumes a steady rate over the
    flow's life (exact for flows that start after the warm-up)."""
    subs = plan_frame(isp)
    window = max(duration_s - warmup_s, 1e-12)
    f = flows
    start = f["start_s"].to_numpy(dtype=float)
    end = f["end_s"].to_numpy(dtype=float)
    end = np.where(np.isnan(end), duration_s, end)
    life = np.maximum(end - start, 1e-12)
    inside = np.clip(end - np.maximum(start, warmup_s), 0.0, None)
    frac = np.where(start >= warmup_s, 1.0, inside / life)
    delivered = f["delivered_bytes"].to_numpy(dtype=float) * frac
    delay = f["mean_delay_ms"].to_numpy(dtype=float)
    src = f["src"].astype(str).to_numpy()
    dst = f["dst"].astype(str).to_numpy()
    rows = []
    names = set(subs["subscriber"])
    for direction, who, plan_col, ceil_col in (("down", dst, "down_bps", "ceil_down_bps"),
                                                ("up", src, "up_bps", "ceil_up_bps")):
        # A hash lookup: np.isin on object arrays sorts both sides (6 s for 63,604 flows
        # against 10,000 names; bench/README.md, "ISP trees: the run's own post-processing").
        sel = pd.Series(who).isin(names).to_numpy()
        g = pd.DataFrame({"subscriber": who[sel], "delivered": delivered[sel],
                          "wdelay": np.nan_to_num(delay[sel]) * delivered[sel],
                          "weight": np.where(np.isnan(delay[sel]), 0.0, delivered[sel])})
        agg = g.groupby("subscriber", sort=False).agg(flows=("delivered", "size"), delivered_bytes=("delivered", "sum"),
                                                      wdelay=("wdelay", "sum"), weight=("weight", "sum"))
        t = subs.set_index("subscriber").join(agg, how="left")
        t["flows"] = t["flows"].fillna(0).astype("int64")
        t["delivered_bytes"] = t["delivered_bytes"].fillna(0.0)
        t["direction"] = direction
        t["plan_bps"] = t[plan_col].astype(float)
        t["ceil_bps"] = t[ceil_col].astype(float)
        t["achieved_bps"] = t["delivered_bytes"] * 8.0 / window
        t["achieved_ratio"] = t["achieved_bps"] / t["plan_bps"]
        w = t["weight"].fillna(0.0)
        t["latency_ms"] = np.where(w > 0, t["wdelay"].fillna(0.0) / w.where(w > 0, 1.0), math.nan)
        t["base_delay_ms"] = t["rtt_s"] * 1e3 / 2.0
        t["queueing_ms"] = t["latency_ms"] - t["base_delay_ms"]
        rows.append(t.reset_index())
    out = pd.concat(rows, ignore_index=True)
    out["delivered_bytes"] = out["delivered_bytes"].round().astype("int64")
    return out[COLUMNS]


def describe(isp: Mapping[str, Any]) -> list:
    """Lines ``sojourn validate`` prints for an isp topology: the tree's size and its
    oversubscription (sum of plans / link rate) in each direction."""
    subs = plan_frame(isp)
    n = len(subs)
    active = int(subs["active"].sum())

    def rate(b: float) -> str:
        for unit, k in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
            if b >= k:
                return f"{b / k:g} {unit}"
        return f"{b:g} bit/s"

    plans = subs.groupby(["down_bps", "up_bps"], sort=True).size()
    mix = ", ".join(f"{n_} x {rate(d)}/{rate(u)}" for (d, u), n_ in plans.items())
    routers = int(isp.get("access_routers", 1))
    per = f" on {routers} access routers (each behind its own uplink and HTB trees)" if routers > 1 else ""
    up_each = " each" if routers > 1 else ""
    return [
        f"  isp: {n} subscribers ({active} active){per}, {isp['sites']} sites, {isp['servers']} server(s), "
        f"leaf {isp['leaf']}; plans (down/up): {mix}",
        f"  oversubscription: down {isp['oversubscription_down']:.2f} (sum of plans / uplink "
        f"{rate(isp['uplink_bps'])}{up_each}), up {isp['oversubscription_up']:.2f} (/ upstream "
        f"{rate(isp['upstream_bps'])}{up_each})",
    ]


def isp_info(experiment: Mapping[str, Any], seed: Optional[int] = None, base_dir: str = ".") -> Optional[dict]:
    """``validate``'s ``isp`` entry of an experiment dict (with ``seed``, which draws the
    plans, RTTs and active subscribers), or None when its topology is not an isp tree."""
    topo = experiment.get("topology") or {}
    if topo.get("kind") != "isp":
        return None
    from . import _engine

    cfg = dict(experiment)
    if seed is not None:
        cfg["seed"] = int(seed)
    return _engine.validate(cfg, base_dir).get("isp")


def attach(res: Any, cfg: Mapping[str, Any], base_dir: Any) -> None:
    """Sets ``res.subscribers_table`` (an Arrow table, written as ``subscribers.parquet``
    by :meth:`sojourn.Result.write`) when the run's topology is an isp tree."""
    info = isp_info(cfg, res.summary.get("seed"), str(base_dir))
    if info is None:
        return
    import pyarrow as pa

    t = subscriber_table(res.flows, info, float(res.summary["duration_s"]), float(res.summary.get("warmup_s", 0.0)))
    res.subscribers_table = pa.Table.from_pandas(t, preserve_index=False)
