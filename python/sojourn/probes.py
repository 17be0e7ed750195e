"""What users feel, from probes.parquet and the named tests' annotations (docs/tests.md):
summary.json's ``probes`` block (per probe workload: RTT and one-way delay statistics,
loss; for isochronous streams RFC 3550 jitter, loss behind a de-jitter buffer and the
G.107 MOS) and ``tests`` block (per named test: upload and download totals, the ICMP
ping's statistics).

Only probes sent after the warm-up count. A probe with no answer by the end of the run
is lost (the engine leaves out probes sent during the run's last second, whose answer
may still be on its way).
"""
from __future__ import annotations

import json
import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from .emodel import CODECS, mos_from_r, r_factor, rfc3550_jitter
from .flent_tests import annotations

__all__ = ["summarise", "attach", "voip_metrics", "totals_series"]


def _stats_ms(v: pd.Series) -> Optional[dict]:
    v = v.dropna()
    if v.empty:
        return None
    ms = v.to_numpy(dtype=float) / 1e6
    return {"mean": float(ms.mean()), "median": float(np.median(ms)), "p99": float(np.quantile(ms, 0.99)),
            "min": float(ms.min()), "max": float(ms.max())}


def voip_metrics(sent_ns: np.ndarray, owd_ns: np.ndarray, interval_ns: int, jitter_buffer_ns: int,
                 codec: str = "g711") -> dict:
    """Metrics of one isochronous stream given per datagram (in sending order) its send
    time and one-way delay (NaN = never arrived).

    * ``jitter_ms``: RFC 3550 §6.4.1's jitter after the last datagram, datagrams taken in
      arrival order;
    * the de-jitter buffer: a fixed playout delay of the smallest one-way delay seen plus
      ``jitter_buffer_ns``; a datagram arriving after its playout time is late, and a late
      datagram is as good as lost (``late``, ``loss_with_buffer``);
    * the E-model (G.107): mouth-to-ear delay Ta = playout delay + one packet interval (the
      frame being filled before it is sent), loss = loss with the buffer; ``r``, ``mos``.
    """
    arrived = ~np.isnan(owd_ns)
    n = len(owd_ns)
    out: dict[str, Any] = {"count": int(n), "lost": int(n - arrived.sum()),
                           "loss": float((n - arrived.sum()) / n) if n else 0.0}
    if not arrived.any():
        out.update({"jitter_ms": None, "late": 0, "loss_with_buffer": 1.0 if n else 0.0, "r": None, "mos": 1.0})
        return out
    s, d = sent_ns[arrived], owd_ns[arrived]
    order = np.argsort(s + d, kind="stable")
    j = rfc3550_jitter(s[order], (s + d)[order])
    out["jitter_ms"] = None if j is None else j / 1e6
    playout = float(d.min()) + jitter_buffer_ns
    late = int((d > playout).sum())
    lost_b = (n - arrived.sum()) + late
    out["late"] = late
    out["loss_with_buffer"] = float(lost_b / n)
    ta_ms = (playout + interval_ns) / 1e6
    out["mouth_to_ear_ms"] = ta_ms
    r = r_factor(ta_ms, 100.0 * lost_b / n, CODECS[codec])
    out["r"] = r
    out["mos"] = mos_from_r(r)
    return out


def summarise(probes: Optional[pd.DataFrame], experiment: Optional[dict], warmup_s: float,
              timeseries: Optional[pd.DataFrame] = None, flows: Optional[pd.DataFrame] = None) -> dict:
    """summary.json's ``probes`` and ``tests`` blocks (either may be empty)."""
    from .units import parse_seconds

    notes = annotations(experiment)
    wl = (experiment or {}).get("workload") or []
    block: dict[str, Any] = {}
    if probes is not None and not probes.empty:
        p = probes[probes["time_s"] >= warmup_s]
        for w, g in p.groupby("workload", sort=True):
            w = int(w)
            mode = str(g["mode"].iloc[0])
            entry: dict[str, Any] = {"mode": mode, "count": int(len(g)), "lost": int(g["lost"].sum()),
                                     "loss": float(g["lost"].mean()) if len(g) else 0.0}
            if w in notes:
                entry["series"] = notes[w].get("series")
            for col in ("rtt_ns", "owd_up_ns", "owd_down_ns"):
                st = _stats_ms(g[col])
                if st is not None:
                    entry[col.replace("_ns", "_ms")] = st
            if mode == "oneway":
                t = wl[w] if w < len(wl) and isinstance(wl[w], dict) else {}
                note = notes.get(w, {})
                interval_ns = int(round(parse_seconds(t.get("interval", "20ms")) * 1e9))
                jb = int(round(parse_seconds(note.get("jitter_buffer", "60ms")) * 1e9))
                codec = note.get("codec", "g711")
                per_flow = []
                for _, f in g.groupby("flow", sort=True):
                    per_flow.append(voip_metrics(f["time_s"].to_numpy() * 1e9, f["owd_up_ns"].to_numpy(float),
                                                 interval_ns, jb, codec))
                # One stream per workload entry in the tests; with several, the worst MOS.
                worst = min(per_flow, key=lambda m: m["mos"])
                entry.update({k: v for k, v in worst.items() if k not in ("count", "lost", "loss")})
                entry["jitter_buffer_ms"] = jb / 1e6
                if note.get("role") != "voip":
                    # The E-model rates voice; a game stream keeps its delay, jitter, loss.
                    for k in ("r", "mos", "mouth_to_ear_ms"):
                        entry.pop(k, None)
            block[f"workload[{w}]"] = entry
    tests = _tests_block(notes, block, timeseries, flows, warmup_s)
    return {"probes": block, "tests": tests}


def totals_series(notes: dict[int, dict], timeseries: Optional[pd.DataFrame], flows: Optional[pd.DataFrame]) -> dict[str, pd.Series]:
    """Per Flent series name of a TCP flow, its goodput (bit/s) indexed by time (from the
    per-flow ``goodput_bps`` series; empty when per-flow series were not recorded)."""
    if timeseries is None or flows is None or timeseries.empty or flows.empty:
        return {}
    ts = timeseries[timeseries["metric"].astype(str) == "goodput_bps"]
    if ts.empty:
        return {}
    ent = ts["entity"].astype(str)
    out: dict[str, pd.Series] = {}
    for _, f in flows.iterrows():
        note = notes.get(int(f["workload"]))
        if not note or note.get("role") not in ("upload", "download"):
            continue
        sel = ts[ent == f"flow{int(f['flow'])}"]
        if sel.empty:
            continue
        s = pd.Series(sel["value"].to_numpy(float), index=sel["time_s"].to_numpy(float))
        name = note["series"]
        out[name] = out[name].add(s, fill_value=0.0) if name in out else s
    return out


def _tests_block(notes: dict[int, dict], probes: dict, timeseries, flows, warmup_s: float) -> dict:
    if not notes:
        return {}
    series = totals_series(notes, timeseries, flows)
    tests: dict[str, dict] = {}
    for w, note in sorted(notes.items()):
        t = tests.setdefault(note.get("source", f"workload[{w}]"), {"test": note.get("name"), "workloads": []})
        t["workloads"].append(w)
    for key, t in tests.items():
        for role in ("upload", "download"):
            names = sorted({notes[w]["series"] for w in t["workloads"] if notes[w].get("role") == role})
            vals = [series[n][series[n].index >= warmup_s].mean() for n in names if n in series]
            if vals:
                t[f"{role}_bps"] = float(np.nansum(vals))
        icmp = [probes[f"workload[{w}]"] for w in t["workloads"]
                if f"workload[{w}]" in probes and probes[f"workload[{w}]"]["mode"] == "icmp"]
        if icmp and "rtt_ms" in icmp[0]:
            t["ping_rtt_ms"] = icmp[0]["rtt_ms"]
            t["ping_loss"] = icmp[0]["loss"]
        voip = [probes[f"workload[{w}]"] for w in t["workloads"]
                if f"workload[{w}]" in probes and probes[f"workload[{w}]"].get("mos") is not None]
        if voip:
            t["mos"] = min(v["mos"] for v in voip)
    return tests


def attach(res: Any, experiment: Optional[dict]) -> None:
    """Adds the ``probes`` and ``tests`` blocks to a run's summary (and its text) when the
    run has probes or named tests; leaves every other run's summary untouched."""
    if res.probes_table is None and not annotations(experiment):
        return
    probes = res.probes
    flows = res.flows
    ts = res.timeseries
    blocks = summarise(probes, experiment, float(res.summary.get("warmup_s", 0.0)), ts, flows)
    for k, v in blocks.items():
        if v:
            res.summary[k] = _finite(v)
    res.summary_text = json.dumps(res.summary, indent=2, sort_keys=True) + "\n"


def _finite(v: Any) -> Any:
    """JSON has no NaN: a statistic that is not a number becomes null."""
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
