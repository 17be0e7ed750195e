"""Per-station results of a Wi-Fi run (``[topology] kind = "wifi"``, docs/wifi.md): summary.json's
``wifi`` block as a tidy table, one row per station (written as ``wifi.parquet``). A leaf, so that
``Result.wifi`` (results) can build it; the report's plot is ``sojourn.analysis.wifi``.
"""
from __future__ import annotations

from typing import Optional

import pandas as pd

COLUMNS = [
    "station", "rate_bps", "airtime_share", "airtime_down_share", "airtime_up_share",
    "throughput_down_bps", "throughput_up_bps", "packets_down", "packets_up", "txops",
    "mean_ampdu_frames", "mpdus_lost", "retry_drops",
]


def stations_frame(summary: dict) -> Optional[pd.DataFrame]:
    """One row per station with the medium's mode (``mac``, ``aql``); None without Wi-Fi."""
    w = summary.get("wifi")
    if not w:
        return None
    df = pd.DataFrame(w["stations"], columns=COLUMNS)
    df.insert(1, "mac", w["mac"])
    df.insert(2, "aql", bool(w["aql"]))
    return df
