"""Export a run's time series as a Flent data file (``.flent.gz``), so ``flent`` can plot
it next to testbed measurements.

Flent's data file is gzipped JSON (file format version 4): ``metadata`` (the test NAME,
TITLE, TIME, LENGTH, STEP_SIZE, …), ``x_values`` (sample times in seconds), ``results``
(one array of y values per series name, aligned with ``x_values``, ``null`` where a series
has no sample) and ``raw_values``. Flent draws a file with the plots of the test its
``NAME`` names (and counts a file without ``raw_values`` as empty), so sojourn writes the series of Flent's single-upload test ``tcp_1up``:
``TCP upload`` is the bottleneck's throughput in Mbit/s and ``Ping (ms) ICMP`` its
queueing delay in ms (queue bytes / rate: the delay a probe would add at the bottleneck,
without the path's propagation delay). Per-flow goodput, when recorded, follows as extra
series (``sojourn goodput flowN``); Flent keeps them in the data. docs/reports.md has an
example.
"""
from __future__ import annotations

import datetime as _dt
import gzip
import json
import math
from pathlib import Path
from typing import Optional, Union

import pandas as pd

__all__ = ["write_flent"]

FLENT_FILE_FORMAT = 4


def write_flent(run_dir: Union[str, Path], out: Optional[Union[str, Path]] = None, link: Optional[str] = None) -> Path:
    """Writes ``RUN_DIR/<experiment>.flent.gz`` (or ``out``) from a run directory's
    summary.json and timeseries.parquet; returns its path. ``link`` defaults to the busiest
    link (the one ``sojourn compare`` reports). Raises FileNotFoundError/ValueError."""
    from ..results import pick_link

    d = Path(run_dir)
    sfile = d / "summary.json"
    if not sfile.exists():
        raise FileNotFoundError(f"{d}: not a run directory (no summary.json)")
    summary = json.loads(sfile.read_text())
    name = pick_link(summary, link)
    if name is None:
        raise ValueError(f"{d}: no link {link!r} in this run" if link else f"{d}: the run has no link")
    ts = pd.read_parquet(d / "timeseries.parquet")
    if ts.empty:
        raise ValueError(f"{d}: no time series recorded (set [record] interval, e.g. \"100ms\")")
    ts["entity"] = ts["entity"].astype(str)
    ts["metric"] = ts["metric"].astype(str)
    wide = ts.pivot_table(index="time_s", columns=["entity", "metric"], values="value", aggfunc="first").sort_index()
    x = [float(v) for v in wide.index]
    rate = summary["links"][name].get("rate_bps")

    def col(entity: str, metric: str, scale: float = 1.0) -> list:
        if (entity, metric) not in wide.columns:
            return [None] * len(x)
        return [None if (v is None or not math.isfinite(v)) else float(v) * scale for v in wide[(entity, metric)].tolist()]

    # A run of a named test (docs/tests.md) is exported as that test, with its series.
    test = _named_test(d, ts)
    test_name, test_params = "tcp_1up", {}
    if test is not None:
        test_name, x, results, test_params = test
    else:
        results = {"TCP upload": col(name, "throughput_bps", 1e-6)}
        if rate:
            results["Ping (ms) ICMP"] = col(name, "queue_bytes", 8.0 / float(rate) * 1e3)
        for entity in sorted({e for e, m in wide.columns if e.startswith("flow") and m == "goodput_bps"},
                             key=lambda e: int(e[4:]) if e[4:].isdigit() else 0):
            results[f"sojourn goodput {entity}"] = col(entity, "goodput_bps", 1e-6)
    step = float(pd.Series(x).diff().median()) if len(x) > 1 else 0.0
    when = _dt.datetime.fromtimestamp(sfile.stat().st_mtime, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    meta = {
        "NAME": test_name,
        "TITLE": summary.get("experiment", d.name),
        "NOTE": f"exported by sojourn {summary.get('sojourn_version', '')} from {d}: simulated link {name!r} "
                f"({summary['links'][name].get('qdisc', '')}), seed {summary.get('seed')}; "
                + ("probes and flows as the test's series" if test is not None else "'Ping (ms) ICMP' is the bottleneck's queueing delay"),
        "HOST": "sojourn", "HOSTS": ["sojourn"] * (4 if test_name == "rtt_fair" else 1), "LOCAL_HOST": "sojourn",
        "TIME": when, "T0": when,
        "LENGTH": float(summary.get("duration_s", x[-1] if x else 0.0)),
        "TOTAL_LENGTH": float(summary.get("duration_s", x[-1] if x else 0.0)),
        "STEP_SIZE": step,
        "TEST_PARAMETERS": test_params,
        "SERIES_META": {k: {"UNITS": _units(k)} for k in results},
    }
    # raw_values: per series, the samples as Flent's runners record them (absolute time
    # "t", value "val"); Flent counts a file with none as empty.
    t0 = sfile.stat().st_mtime
    raw = {k: [{"t": t0 + xi, "val": v} for xi, v in zip(x, ys) if v is not None] for k, ys in results.items()}
    obj = {"version": FLENT_FILE_FORMAT, "metadata": meta, "x_values": x, "results": results, "raw_values": raw}
    path = Path(out) if out else d / f"{summary.get('experiment', 'sojourn')}.flent.gz"
    tmp = path.with_name(f".{path.name}.tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as fp:
        json.dump(obj, fp)
    tmp.replace(path)
    return path


def _units(series: str) -> str:
    if series.startswith("Ping") or series in ("VoIP", "VoIP::delay", "VoIP::jitter"):
        return "ms"
    if series == "VoIP::loss":
        return "count"
    if series.endswith("fairness"):
        return "Idx"
    return "Mbits/s"


def _named_test(d: Path, ts: pd.DataFrame):
    """(NAME, x, results, TEST_PARAMETERS) when the run in ``d`` is a named test."""
    exp = d / "experiment.json"
    if not exp.exists():
        return None
    from .flent_export import test_results

    probes = d / "probes.parquet"
    flows = pd.read_parquet(d / "flows.parquet")
    return test_results(json.loads(exp.read_text()), ts, flows, pd.read_parquet(probes) if probes.exists() else None)
