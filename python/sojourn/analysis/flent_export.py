"""Flent data files of the named tests (docs/tests.md): a run of ``rrul``, ``rrul_be``,
``tcp_nup``, ``tcp_ndown``, ``tcp_upload``, ``tcp_download``, ``rtt_fair`` or ``voip`` is
written under the test's own ``NAME`` with the test's own series names, so that ``flent``
draws its plots of that test (``all_scaled``, ``ping_cdf``, ``box_totals``, ``voip_delay``).

Series, sampled on the run's time-series grid (Flent's 0.2 s step by default):

* each TCP flow's goodput in Mbit/s (``TCP upload BE`` …), from the per-flow
  ``goodput_bps`` series, with the aggregates Flent computes when it runs a test (``TCP
  upload sum``/``avg``, ``TCP download sum``/``avg``, ``TCP totals``, ``… fairness`` as Jain's
  index, ``Ping (ms) avg``);
* each probe's RTT in ms (``Ping (ms) ICMP``, ``Ping (ms) UDP EF`` …): at each sample time
  the last probe sent in the step before it, ``null`` when that probe was lost;
* ``voip``: the first stream's one-way delay (``VoIP::delay``), its running RFC 3550 jitter
  (``VoIP::jitter``) and the datagrams lost per step (``VoIP::loss``).
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..flent_tests import annotations
from ..probes import totals_series

__all__ = ["test_results", "EXPORTED"]

#: The named tests with a Flent counterpart of the same name.
EXPORTED = ("rrul", "rrul_be", "tcp_nup", "tcp_ndown", "tcp_upload", "tcp_download", "rtt_fair", "voip")


def _on_grid(x: np.ndarray, s: pd.Series) -> list:
    """``s`` (indexed by time) at the grid times ``x`` (exact sample times of the same
    recorder; NaN/missing -> None)."""
    m = dict(zip(np.round(s.index.to_numpy(float), 9), s.to_numpy(float)))
    out = []
    for t in np.round(x, 9):
        v = m.get(t)
        out.append(None if v is None or not math.isfinite(v) else float(v))
    return out


def _probe_on_grid(x: np.ndarray, t: np.ndarray, v: np.ndarray) -> list:
    """At each grid time, the value of the last probe sent in the step up to it."""
    step = float(np.median(np.diff(x))) if len(x) > 1 else 0.2
    idx = np.searchsorted(t, x, side="right") - 1
    out = []
    for xi, i in zip(x, idx):
        if i < 0 or xi - t[i] >= step or not math.isfinite(v[i]):
            out.append(None)
        else:
            out.append(float(v[i]))
    return out


def _fairness(cols: list[list]) -> list:
    """Jain's fairness index per sample: (sum x)^2 / (n * sum x^2)."""
    out = []
    for row in zip(*cols):
        xs = [v for v in row if v is not None]
        sq = sum(v * v for v in xs)
        out.append(None if not xs or sq == 0 else sum(xs) ** 2 / (len(xs) * sq))
    return out


def _combine(cols: list[list], how: str) -> list:
    out = []
    for row in zip(*cols):
        xs = [v for v in row if v is not None]
        out.append(None if not xs else (sum(xs) if how == "sum" else sum(xs) / len(xs)))
    return out


def test_results(experiment: Optional[dict], ts: pd.DataFrame, flows: pd.DataFrame,
                 probes: Optional[pd.DataFrame]) -> Optional[tuple[str, list, dict, dict]]:
    """(test NAME, x_values, results, TEST_PARAMETERS) for a run of a named test, or None
    when the run has none. Raises ValueError for a test Flent has no counterpart of."""
    notes = annotations(experiment)
    if not notes:
        return None
    name = next(iter(notes.values()))["name"]
    if name not in EXPORTED:
        raise ValueError(f"the {name} test has no Flent counterpart (exported: {', '.join(EXPORTED)})")
    mine = {w: n for w, n in notes.items() if n["name"] == name and n.get("source") == next(iter(notes.values())).get("source")}
    x = np.array(sorted(set(ts["time_s"].to_numpy(float)))) if not ts.empty else np.array([])
    results: dict[str, list] = {}
    tcp = totals_series(mine, ts, flows)
    for series in sorted(tcp):
        results[series] = _on_grid(x, tcp[series] / 1e6)
    params: dict[str, Any] = {}
    for role in ("upload", "download"):
        names = sorted({n["series"] for n in mine.values() if n.get("role") == role})
        cols = [results[s] for s in names if s in results]
        if not cols:
            continue
        if name in ("rrul", "rrul_be", "rtt_fair", "tcp_nup", "tcp_ndown"):
            results[f"TCP {role} sum"] = _combine(cols, "sum")
            results[f"TCP {role} avg"] = _combine(cols, "avg")
        if name in ("rtt_fair", "tcp_nup", "tcp_ndown"):
            results[f"TCP {role} fairness"] = _fairness(cols)
        if name == "tcp_nup" and role == "upload":
            params["upload_streams"] = str(len(cols))
        if name == "tcp_ndown" and role == "download":
            params["download_streams"] = str(len(cols))
    if name in ("rrul", "rrul_be"):
        flows_cols = [results[s] for s in sorted(tcp)]
        results["TCP totals"] = _combine(flows_cols, "sum")
    pings = []
    if probes is not None and not probes.empty:
        for w, n in sorted(mine.items()):
            g = probes[probes["workload"] == w].sort_values("time_s")
            if g.empty:
                continue
            t = g["time_s"].to_numpy(float)
            if n.get("role") == "ping":
                results[n["series"]] = _probe_on_grid(x, t, g["rtt_ns"].to_numpy(float) / 1e6)
                pings.append(results[n["series"]])
            elif n.get("role") == "voip" and "VoIP::delay" not in results:
                owd = g["owd_up_ns"].to_numpy(float)
                results["VoIP::delay"] = _probe_on_grid(x, t, owd / 1e6)
                results["VoIP::jitter"] = _probe_on_grid(x, t, _running_jitter(t, owd) / 1e6)
                lost = g["lost"].to_numpy(bool)
                step = float(np.median(np.diff(x))) if len(x) > 1 else 0.2
                results["VoIP::loss"] = [float(lost[(t > xi - step) & (t <= xi)].sum()) for xi in x]
                results["VoIP"] = results["VoIP::delay"]
    if pings and name in ("rrul", "rrul_be", "rtt_fair"):
        results["Ping (ms) avg"] = _combine(pings, "avg")
    return name, [float(v) for v in x], results, params


def _running_jitter(t_s: np.ndarray, owd_ns: np.ndarray) -> np.ndarray:
    """RFC 3550 §6.4.1's jitter after each datagram (datagrams in sending order; a lost one
    leaves the estimate where it was)."""
    out = np.full(len(owd_ns), np.nan)
    j, prev = 0.0, None
    for i, d in enumerate(owd_ns):
        if not math.isfinite(d):
            out[i] = j if prev is not None else np.nan
            continue
        if prev is not None:
            j += (abs(d - prev) - j) / 16.0
        prev = d
        out[i] = j
    return out
