"""Per-subscriber results of isp topologies (docs/isp.md) for analysis: the fairness of a
``subscribers.parquet`` table and the active subscribers of a report's point. The table
itself is written by :mod:`sojourn.isp`."""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from . import stats

__all__ = ["fairness", "subscribers_of"]


def fairness(table: pd.DataFrame, direction: str = "down", active_only: bool = True) -> dict:
    """Jain's index and the Lorenz gap of ``achieved_ratio`` across subscribers (the
    active ones by default) in one direction, with their count and the mean ratio."""
    t = table[table["direction"] == direction]
    if active_only:
        t = t[t["active"]]
    x = t["achieved_ratio"].to_numpy(dtype=float)
    x = x[~np.isnan(x)]
    return {"subscribers": int(x.size), "jain": stats.jain_index(x), "lorenz_gap": stats.lorenz_gap(x),
            "mean_ratio": float(x.mean()) if x.size else math.nan}


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
