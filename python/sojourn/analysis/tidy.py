"""``sojourn.load``: results as one tidy pandas DataFrame, for Jupyter and scripts.

A run directory or a whole sweep directory becomes one table with one row per flow (or
per run, or per time-series sample), the point and seed of every row, and the swept
parameters as *typed* columns: a rate is a number of bit/s, a delay a number of seconds,
a size a number of bytes (parsed with the engine's own units grammar), so they sort and
plot as numbers. Loading many runs shows a progress bar, in a terminal and in Jupyter.

Example (docs/reports.md)::

    import sojourn
    flows = sojourn.load("results/aqm")                  # one row per flow of every run
    flows.groupby("point")["fct_s"].median()
    runs = sojourn.load("results/aqm", what="runs")      # one row per run
    ts = sojourn.load("results/aqm", what="timeseries")  # long form: time_s, entity, metric, value
    apps = sojourn.load("results/rrul", what="apps")     # rpm / web / video numbers per entry
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal, Optional, Union

import pandas as pd

__all__ = ["load"]

What = Literal["flows", "runs", "timeseries", "probes", "apps", "app_samples", "subscribers"]


def _progress(total: int, label: str, show: Optional[bool]):
    """A rich progress bar (rich renders in Jupyter too); None when not shown."""
    if show is False or total < 2:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    if show is None and not (console.is_terminal or console.is_jupyter):
        return None
    p = Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                 console=console, transient=True)
    return p


def _typed(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    from ..units import typed_value

    for c in columns:
        if c not in df:
            continue
        vals = {v: typed_value(v) for v in df[c].dropna().unique()}
        if vals and all(isinstance(v, float) for v in vals.values()):
            df[c] = df[c].map(vals).astype(float)
    return df


def load(directory: Union[str, "os.PathLike[str]"], what: What = "flows", progress: Optional[bool] = None) -> pd.DataFrame:
    """Loads a run or sweep directory as one tidy DataFrame.

    ``what``: ``"flows"`` (one row per flow; the columns of flows.parquet plus ``point``,
    ``seed``, the swept parameters and ``after_warmup``), ``"runs"`` (one row per run: the
    key numbers of its summary.json) or ``"timeseries"`` (long form ``time_s, entity,
    metric, value`` plus ``point``, ``seed`` and the swept parameters), ``"probes"`` (one row
    per latency probe or isochronous datagram, probes.parquet's columns plus ``point``,
    ``seed``, the swept parameters and ``after_warmup``; docs/tests.md), ``"apps"`` (one row
    per application workload entry — per direction for ``rpm`` — with its summary.json
    numbers: RPM and trimmed means, page load times, video bitrate, switches, rebuffering;
    docs/tests.md), ``"app_samples"`` (one row per probe, page or segment measurement:
    ``workload, kind, direction, time_s, metric, value``) or ``"subscribers"`` (an isp
    topology's per-subscriber rows, docs/isp.md). Swept parameters
    are numbers where every value parses as one (rates in bit/s, durations in seconds,
    sizes in bytes). ``progress``: None shows a bar in a terminal or notebook when there
    are several runs; True/False force it. Raises FileNotFoundError for a directory that
    holds no finished run.
    """
    from ..results import run_row

    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such directory")
    if what not in ("flows", "runs", "timeseries", "probes", "apps", "app_samples", "subscribers"):
        raise ValueError(f"what must be 'flows', 'runs', 'timeseries', 'probes', 'apps', 'app_samples' or "
                         f"'subscribers', not {what!r}")
    columns: list[str] = []
    runs: list[tuple[str, int, dict, Path]] = []  # (point, seed, labels, dir)
    if (root / "summary.json").exists():
        s = json.loads((root / "summary.json").read_text())
        runs.append((str(s.get("experiment", root.name)), int(s.get("seed", 0)), {}, root))
    elif (root / "runs").is_dir():
        labels: dict[str, dict] = {}
        order: list[str] = []
        sj = root / "sweep.json"
        if sj.exists():
            plan = json.loads(sj.read_text())
            columns = list(plan.get("columns", []))
            for p in plan.get("points", []):
                labels[p["name"]] = p.get("labels", {})
                order.append(p["name"])
        found = sorted({p.parent.parent.name for p in (root / "runs").glob("*/seed-*/summary.json")})
        order = [p for p in order if p in found] + [p for p in found if p not in order]
        for p in order:
            for s in sorted((root / "runs" / p).glob("seed-*/summary.json"), key=lambda x: int(x.parent.name[5:])):
                runs.append((p, int(s.parent.name[5:]), labels.get(p, {}), s.parent))
    if not runs:
        raise FileNotFoundError(f"{root}: no finished run (neither summary.json nor runs/<point>/seed-<n>/summary.json)")

    parts = []
    bar = _progress(len(runs), f"loading {root.name}", progress)
    task = None
    if bar is not None:
        bar.start()
        task = bar.add_task("load", total=len(runs))
    try:
        for point, seed, lab, d in runs:
            summary = json.loads((d / "summary.json").read_text())
            head = {"point": point, "seed": seed, **{c: lab.get(c) for c in columns}}
            if what == "runs":
                parts.append(pd.DataFrame([{**head, "run_dir": str(d), **run_row(summary)}]))
            elif what == "apps":
                from .apps import app_summary_frame

                parts.append(app_summary_frame(summary, head))
            elif what == "app_samples":
                from .apps import sample_rows

                t = pd.read_parquet(d / "timeseries.parquet") if (d / "timeseries.parquet").exists() else None
                a = sample_rows(t)
                for i, (k, v) in enumerate(head.items()):
                    a.insert(i, k, v)
                parts.append(a)
            elif what == "flows":
                f = pd.read_parquet(d / "flows.parquet")
                for i, (k, v) in enumerate(head.items()):
                    f.insert(i, k, v)
                f["after_warmup"] = f["start_s"] >= float(summary.get("warmup_s", 0.0)) if "start_s" in f else True
                parts.append(f)
            elif what == "probes":
                # probes.parquet (docs/tests.md); a run without probe workloads adds no rows.
                f = d / "probes.parquet"
                if f.exists():
                    t = pd.read_parquet(f)
                    for i, (k, v) in enumerate(head.items()):
                        t.insert(i, k, v)
                    t["after_warmup"] = t["time_s"] >= float(summary.get("warmup_s", 0.0))
                    parts.append(t)
            elif what == "subscribers":
                # An isp topology's per-subscriber rows (docs/isp.md); runs of other
                # topologies have none.
                if (d / "subscribers.parquet").exists():
                    f = pd.read_parquet(d / "subscribers.parquet")
                    for i, (k, v) in enumerate(head.items()):
                        f.insert(i, k, v)
                    parts.append(f)
            else:
                t = pd.read_parquet(d / "timeseries.parquet")
                t["entity"] = t["entity"].astype(str)
                t["metric"] = t["metric"].astype(str)
                for i, (k, v) in enumerate(head.items()):
                    t.insert(i, k, v)
                parts.append(t)
            if bar is not None:
                bar.advance(task)
    finally:
        if bar is not None:
            bar.stop()
    if not parts and what == "subscribers":
        raise FileNotFoundError(f"{root}: no subscribers.parquet (not an isp topology, docs/isp.md)")
    if not parts:  # what="probes" and no run has probe workloads (the other kinds add a part per run)
        return pd.DataFrame(columns=["point", "seed", *columns, "time_s", "workload", "flow", "mode", "seq", "rtt_ns",
                                     "owd_up_ns", "owd_down_ns", "lost", "after_warmup"])
    df = pd.concat(parts, ignore_index=True)
    return _typed(df, columns)
