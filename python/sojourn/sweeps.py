"""Sweeps: a grid of experiments x repeats, run in parallel on local cores, resumable,
merged into one Parquet dataset.

A sweep file (TOML, see docs/sweeps.md)::

    name = "compare-aqm"
    base = "dumbbell-onoff.toml"        # relative to this file; or an inline [base] table
    repeats = 3                          # seeds base_seed .. base_seed+2 (or seeds = [..])
    set = { duration = "20s" }           # optional overrides applied to every point

    [[axis]]                             # cartesian product over all axes
    key = "topology.bottleneck.qdisc"
    values = ["pfifo", { kind = "codel", target = "5ms" }]
    names = ["fifo", "codel"]            # optional labels (default: derived from values)

    [[variant]]                          # optional hand-made list of named override sets,
    name = "age-codel"                   # crossed with the axes
    set = { "topology.bottleneck.qdisc" = { kind = "codel" } }

Each run (point, seed) writes ``OUT/runs/<point>/seed-<n>/`` with :meth:`Result.write`
(atomic, ``summary.json`` last). A run whose ``summary.json`` exists is skipped, so an
interrupted sweep resumes where it stopped. Afterwards ``OUT/runs.parquet`` (one row per
run) and ``OUT/flows.parquet`` (every run's flows, with the point, axis labels and seed)
are (re)written atomically.

``sojourn.sweep(path, out, jobs=None, repeats=None)`` (:func:`run_sweep`) runs a sweep
from Python and returns the runs table.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import re
import signal
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from ._cli_common import ALLOW_LONG, check_cpu, fail
from ._config import ConfigError, load, set_key
from .results import run_row
from .units import parse_seconds

PathLike = Union[str, "os.PathLike[str]"]

#: The most runs (points x seeds) one sweep may hold: the plan, its directories and the
#: merged tables stay small; larger studies are several sweeps.
MAX_RUNS = 100_000
SWEEP_KEYS = {"name", "description", "base", "repeats", "seeds", "seed", "set", "axis", "variant", "link", "end_margin"}
AXIS_KEYS = {"key", "values", "names", "name"}
VARIANT_KEYS = {"name", "set"}
# Columns of runs.parquet that axis label columns must not shadow.
RESERVED = {
    "point", "seed", "run_dir", "experiment", "duration_s", "warmup_s", "events", "link", "link_qdisc", "rate_bps",
    "utilisation", "throughput_bps", "drops", "ecn_marks", "sojourn_mean_ms", "sojourn_p50_ms", "sojourn_p95_ms",
    "sojourn_p99_ms", "sojourn_max_ms", "flows", "flows_sized", "flows_completed", "fct_mean_s", "fct_ci95_s",
    "fct_p50_s", "fct_p75_s", "fct_p95_s", "fct_p99_s", "goodput_mean_bps", "created", "delivered", "dropped",
    "in_network", "conserved", "after_warmup",
}
_SAFE = re.compile(r"[^A-Za-z0-9._=,-]+")


class SweepFailed(RuntimeError):
    """Some runs of a sweep failed (the others are kept and merged)."""


# ------------------------------------------------------------------------------------
# the plan
# ------------------------------------------------------------------------------------


@dataclass
class Point:
    """One grid point: a name (its directory), axis labels (columns) and overrides."""

    name: str
    labels: dict
    overrides: dict


@dataclass
class Plan:
    file: str
    name: str
    base_cfg: dict
    base_dir: Path
    common: dict
    points: list
    seeds: list
    columns: list
    link: Optional[str] = None
    end_margin: Optional[str] = None  # analysis: leave out flows ending in the run's last part
    _cfg_cache: dict = field(default_factory=dict, repr=False)

    def config(self, point: Point) -> dict:
        """The experiment dict of a point (the seed is passed separately)."""
        cfg = copy.deepcopy(self.base_cfg)
        for k, v in self.common.items():
            set_key(cfg, k, copy.deepcopy(v), where=self.file)
        for k, v in point.overrides.items():
            set_key(cfg, k, copy.deepcopy(v), where=self.file)
        return cfg

    def fingerprint(self, point: Point) -> str:
        cfg = self.config(point)
        cfg.pop("seed", None)
        cfg.pop("repeats", None)
        text = json.dumps(cfg, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def runs(self) -> list:
        return [(p, s) for p in self.points for s in self.seeds]

    def to_json(self) -> dict:
        return {
            "schema": "sojourn.sweep",
            "schema_version": 1,
            "sweep": self.file,
            "name": self.name,
            "columns": self.columns,
            "seeds": self.seeds,
            "link": self.link,
            "end_margin": self.end_margin,
            "set": self.common,
            "points": [{"name": p.name, "labels": p.labels, "overrides": p.overrides} for p in self.points],
        }


def run_dir(point: str, seed: int) -> str:
    return f"runs/{point}/seed-{seed}"


def _label(v: Any) -> Optional[str]:
    """A short label for an axis value: scalars as text, a qdisc table by its kind and
    parameters; None when no readable label exists."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        s = str(v)
    elif isinstance(v, dict) and isinstance(v.get("kind"), str):
        parts = [v["kind"]]
        for k, x in v.items():
            if k == "kind":
                continue
            if isinstance(x, (dict, list)):
                return None
            parts.append(f"{k}={x}")
        s = "-".join(parts)
    else:
        return None
    s = _SAFE.sub("-", s).strip("-.")
    return s or None


def _check_name(file: str, where: str, name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise ConfigError(file, where, "expected a non-empty string")
    if "/" in name or "\\" in name or name.startswith(".") or name != name.strip():
        raise ConfigError(file, where, f"{name!r} cannot be a directory name (no '/', no leading '.', no surrounding spaces)")
    return name


def _check_set(file: str, where: str, s: Any) -> dict:
    if not isinstance(s, dict):
        raise ConfigError(file, where, "expected a table of dotted keys, e.g. { \"topology.bottleneck.qdisc\" = \"codel\" }")
    for k in s:
        _check_key(file, f"{where}.{k}" if where else k, k)
    return dict(s)


def _check_key(file: str, where: str, key: str) -> None:
    """The syntax of a dotted override key (``workload[1].rate``), checked when the sweep
    file is read: a bad index is named here rather than in every point."""
    from ._config import check_key

    try:
        check_key(key, file)
    except ConfigError as e:
        raise ConfigError(file, where, e.msg) from None


def _unknown(file: str, where: str, key: str, accepted: set) -> ConfigError:
    import difflib

    close = difflib.get_close_matches(key, sorted(accepted), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(file, where, f"unknown key{hint}; accepted keys: {', '.join(sorted(accepted))}")


def load_plan(path: PathLike, repeats: Optional[int] = None, seeds: Optional[Sequence[int]] = None) -> Plan:
    """Reads and checks a sweep file (structure only; :func:`validate_plan` checks every
    point against the engine). Raises :class:`ConfigError`."""
    sw, file, sdir = load(path)
    unknown = sorted(set(sw) - SWEEP_KEYS)
    if unknown:
        raise _unknown(file, unknown[0], unknown[0], SWEEP_KEYS)
    if "base" not in sw:
        raise ConfigError(file, "base", 'required: base = "experiment.toml" or an inline [base] table')
    b = sw["base"]
    if isinstance(b, str):
        bpath = Path(b) if Path(b).is_absolute() else sdir / b
        try:
            base_cfg, _, base_dir = load(bpath)
        except ConfigError as e:
            raise ConfigError(file, "base", f"{b}: {e.msg}") from None
    elif isinstance(b, dict):
        base_cfg, base_dir = copy.deepcopy(b), sdir
    else:
        raise ConfigError(file, "base", "expected a file name or a table")
    common = _check_set(file, "set", sw.get("set", {}))

    # seeds
    base_seed = sw.get("seed", base_cfg.get("seed", 1))
    if not isinstance(base_seed, int) or isinstance(base_seed, bool) or base_seed < 0:
        raise ConfigError(file, "seed", "expected a non-negative integer")
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_RUNS):
        raise ConfigError("--repeats", "", f"expected an integer in [1, {MAX_RUNS}], got {repeats!r}")
    if "seeds" in sw and "repeats" in sw:
        raise ConfigError(file, "seeds", "give either `seeds` or `repeats`, not both")
    if seeds is not None:
        seed_list = list(seeds)
    elif "seeds" in sw:
        seed_list = sw["seeds"]
        if not isinstance(seed_list, list) or not seed_list or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**64 for s in seed_list):
            raise ConfigError(file, "seeds", "expected a non-empty list of integers in [0, 2^64-1]")
        if len(seed_list) > MAX_RUNS:
            raise ConfigError(file, "seeds", f"{len(seed_list)} seeds; at most {MAX_RUNS}")
        if len(set(seed_list)) != len(seed_list):
            raise ConfigError(file, "seeds", "duplicate seeds")
        if repeats is not None:
            seed_list = seed_list[:repeats] + [max(seed_list) + 1 + i for i in range(max(0, repeats - len(seed_list)))]
    else:
        r = repeats if repeats is not None else sw.get("repeats", base_cfg.get("repeats", 1))
        if not isinstance(r, int) or isinstance(r, bool) or r < 1:
            raise ConfigError(file, "repeats", "expected a positive integer")
        if r > MAX_RUNS:
            raise ConfigError(file, "repeats", f"{r} is out of range [1, {MAX_RUNS}]")
        seed_list = list(range(base_seed, base_seed + r))

    # variants
    variants = sw.get("variant", [])
    if not isinstance(variants, list):
        raise ConfigError(file, "variant", "expected an array of tables ([[variant]])")
    vparts: list = []
    seen: set = set()
    for i, v in enumerate(variants):
        where = f"variant[{i}]"
        if not isinstance(v, dict):
            raise ConfigError(file, where, "expected a table with `name` and `set`")
        bad = sorted(set(v) - VARIANT_KEYS)
        if bad:
            raise _unknown(file, f"{where}.{bad[0]}", bad[0], VARIANT_KEYS)
        name = _check_name(file, f"{where}.name", v.get("name"))
        if name in seen:
            raise ConfigError(file, f"{where}.name", f"duplicate variant name {name!r}")
        seen.add(name)
        vparts.append((name, _check_set(file, f"{where}.set", v.get("set", {}))))

    # axes
    axes = sw.get("axis", [])
    if not isinstance(axes, list):
        raise ConfigError(file, "axis", "expected an array of tables ([[axis]])")
    columns: list = ["variant"] if vparts else []
    aparts: list = []
    for i, a in enumerate(axes):
        where = f"axis[{i}]"
        if not isinstance(a, dict):
            raise ConfigError(file, where, "expected a table with `key` and `values`")
        bad = sorted(set(a) - AXIS_KEYS)
        if bad:
            raise _unknown(file, f"{where}.{bad[0]}", bad[0], AXIS_KEYS)
        key = a.get("key")
        if not isinstance(key, str) or not key:
            raise ConfigError(file, f"{where}.key", 'required: a dotted key, e.g. "topology.bottleneck.qdisc"')
        _check_key(file, f"{where}.key", key)
        values = a.get("values")
        if not isinstance(values, list) or not values:
            raise ConfigError(file, f"{where}.values", "expected a non-empty list")
        col = a.get("name", key.split(".")[-1].split("[")[0])
        if not isinstance(col, str) or not col:
            raise ConfigError(file, f"{where}.name", "expected a non-empty string")
        if col in RESERVED or col in columns:
            col = key
        if col in RESERVED or col in columns:
            raise ConfigError(file, f"{where}.name", f"column name {col!r} is taken; give the axis another `name`")
        columns.append(col)
        if "names" in a:
            names = a["names"]
            if not isinstance(names, list) or len(names) != len(values):
                raise ConfigError(file, f"{where}.names", f"expected a list of {len(values)} labels, one per value")
            labels = [_check_name(file, f"{where}.names[{j}]", n) for j, n in enumerate(names)]
        else:
            labels = []
            for j, v in enumerate(values):
                lab = _label(v)
                labels.append(lab if lab is not None else f"{col}{j}")
        dup = {x for x in labels if labels.count(x) > 1}
        if dup:
            raise ConfigError(file, f"{where}.values", f"two values get the label {sorted(dup)[0]!r}; give `names = [...]`")
        aparts.append([(lab, {key: v}) for lab, v in zip(labels, values)])

    n_points = max(1, len(vparts)) * math.prod(len(x) for x in aparts)
    if n_points * len(seed_list) > MAX_RUNS:
        raise ConfigError(file, "axis", f"{n_points} points x {len(seed_list)} seeds = {n_points * len(seed_list)} runs; "
                                        f"a sweep holds at most {MAX_RUNS} (split it into several sweeps)")
    points: list = []
    vchoices = vparts or [(None, {})]
    for vname, vset in vchoices:
        for combo in itertools.product(*aparts):
            parts = ([vname] if vname is not None else []) + [lab for lab, _ in combo]
            name = "+".join(parts) if parts else "base"
            labels = {}
            if vname is not None:
                labels["variant"] = vname
            ov = dict(vset)
            for col, (lab, kv) in zip(columns[1:] if vname is not None else columns, combo):
                labels[col] = lab
                ov.update(kv)
            points.append(Point(name, labels, ov))
    names = [p.name for p in points]
    if len(set(names)) != len(names):
        d = sorted({n for n in names if names.count(n) > 1})[0]
        raise ConfigError(file, "axis", f"two points are both named {d!r}; give distinct `names`")
    link = sw.get("link")
    if link is not None and not isinstance(link, str):
        raise ConfigError(file, "link", "expected a link name")
    end_margin = sw.get("end_margin")
    if end_margin is not None:
        try:
            if parse_seconds(end_margin) < 0:
                raise ValueError
        except ValueError:
            raise ConfigError(file, "end_margin", f"expected a duration like \"60s\", got {end_margin!r}") from None
        end_margin = str(end_margin)
    name = sw.get("name") or Path(file).name.split(".")[0]
    return Plan(file=file, name=str(name), base_cfg=base_cfg, base_dir=base_dir, common=common,
                points=points, seeds=seed_list, columns=columns, link=link, end_margin=end_margin)


def is_sweep_file(path: PathLike) -> bool:
    """True if ``path`` is a sweep file: named ``*.sweep.toml``, or a TOML document with a
    ``base`` experiment and no ``topology`` of its own. Raises :class:`ConfigError` if it
    cannot be read."""
    if str(path).endswith(".sweep.toml"):
        return True
    doc, _, _ = load(path)
    return "base" in doc and "topology" not in doc


def describe_plan(plan: Plan) -> list:
    """One line per point: its name and the keys it sets (for ``--dry-run`` and
    ``validate``)."""
    lines = []
    for p in plan.points:
        sets = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in p.overrides.items())
        lines.append(f"  {p.name:<28} {sets}")
    return lines


def validate_plan(plan: Plan, allow_long: bool = True) -> float:
    """Checks every point with the engine before anything runs (its memory estimate against
    what a process may have, and, unless ``allow_long``, its CPU-time estimate against a
    CPU-day); the error names the point. Returns the CPU seconds all runs are estimated to
    take (every point × its seeds)."""
    from . import api

    total = 0.0
    for p in plan.points:
        try:
            est = api.validate(plan.config(p), base_dir=plan.base_dir)
            check_cpu(est, plan.file, allow_long)
        except ConfigError as e:
            raise ConfigError(plan.file, f"point {p.name!r}: {e.path}" if e.path else f"point {p.name!r}", e.msg) from None
        total += est["cpu_estimate_s"] * len(plan.seeds)
    return total


# ------------------------------------------------------------------------------------
# running
# ------------------------------------------------------------------------------------

_STOP = None  # a multiprocessing Event in workers


def _die_with_parent(parent_pid: int) -> None:
    """Makes the kernel SIGKILL this worker when the sweep process dies (Linux
    ``prctl(PR_SET_PDEATHSIG)``), e.g. killed by the OOM killer, so no worker keeps running
    queued points into directories a re-run then shares. Elsewhere, a watchdog thread
    polls the parent pid."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl")
    except (OSError, AttributeError):
        import threading

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, name="sojourn-parent-watchdog", daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _worker_init(stop, parent_pid: Optional[int] = None) -> None:
    global _STOP
    _STOP = stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    if parent_pid is not None:
        _die_with_parent(parent_pid)


def _run_task(cfg: dict, base_dir: str, seed: int, out: str) -> dict:
    """Runs one (point, seed) and writes its directory. Returns a status dict."""
    from . import api

    stop = _STOP
    t0 = time.perf_counter()
    try:
        # With `out`, the time series and packet log stream to disk while the run
        # proceeds (memory flat for any duration); the run directory appears at once.
        res = api._run_staged(cfg, seed=seed, base_dir=base_dir, out=out,
                              progress=(lambda *a: not stop.is_set()) if stop is not None else None)
    except KeyboardInterrupt:
        return {"status": "aborted"}
    except Exception as e:  # a failed run must not take the sweep down
        return {"status": "failed", "error": f"{type(e).__name__}: {e}"}
    res.write(out)
    return {"status": "done", "wall_s": time.perf_counter() - t0}


def _write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_text_atomic(path: Path, text: str) -> None:
    _write_atomic(path, lambda p: p.write_text(text))


def merge(plan: Plan, out: Path) -> "pd.DataFrame":  # noqa: F821
    """Writes OUT/runs.parquet and OUT/flows.parquet from the finished runs of the plan
    (in plan order: points, then seeds) and returns the runs table."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, tables = [], []
    for p, seed in plan.runs():
        d = out / run_dir(p.name, seed)
        s = d / "summary.json"
        if not s.exists():
            continue
        summary = json.loads(s.read_text())
        rows.append({"point": p.name, **p.labels, "seed": seed, "run_dir": run_dir(p.name, seed), **run_row(summary, plan.link)})
        ft = pq.read_table(d / "flows.parquet")
        n = ft.num_rows
        extra = [("point", pa.array([p.name] * n, pa.string()))]
        extra += [(c, pa.array([p.labels[c]] * n, pa.string())) for c in plan.columns]
        extra += [("seed", pa.array([seed] * n, pa.int64()))]
        warm = float(summary.get("warmup_s", 0.0))
        start = ft.column("start_s").to_numpy() if "start_s" in ft.column_names else None
        after = pa.array((start >= warm) if start is not None else [True] * n, pa.bool_())
        cols = [a for _, a in extra] + ft.columns + [after]
        names = [c for c, _ in extra] + ft.column_names + ["after_warmup"]
        tables.append(pa.Table.from_arrays(cols, names=names))
    runs = pd.DataFrame(rows, columns=["point", *plan.columns, "seed", "run_dir", *run_row({"links": {}}).keys()])
    runs_t = pa.Table.from_pandas(runs, preserve_index=False)
    _write_atomic(out / "runs.parquet", lambda p: pq.write_table(runs_t, p, compression="zstd"))
    if tables:
        try:  # runs may differ in columns (e.g. TCP-only ones): missing ones become null
            flows_t = pa.concat_tables(tables, promote_options="default")
        except TypeError:  # pragma: no cover - pyarrow < 14
            flows_t = pa.concat_tables(tables, promote=True)
    else:
        flows_t = pa.table({"point": pa.array([], pa.string()), "seed": pa.array([], pa.int64())})
    _write_atomic(out / "flows.parquet", lambda p: pq.write_table(flows_t, p, compression="zstd"))
    return runs


class _Display:
    """One rich progress bar for the whole sweep (runs done/total, ETA); plain lines when
    stderr is not a terminal; nothing when quiet."""

    def __init__(self, total: int, cached: int, label: str, quiet: bool):
        from .progress import _in_jupyter

        self.quiet = quiet
        self.tty = sys.stderr.isatty() or _in_jupyter()
        self.total, self.done, self.failed = total, cached, 0
        self.cached = cached
        self.running = 0
        self._t0 = time.monotonic()
        self._p = None
        if not quiet and self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                               TextColumn("runs, {task.fields[running]} running {task.fields[note]}"), TimeElapsedColumn(),
                               TextColumn("ETA"),
                               TimeRemainingColumn(), console=Console(stderr=True), transient=False)
            self._p.start()
            self._task = self._p.add_task(label, total=total, completed=cached, note="", running=0)

    def log(self, msg: str) -> None:
        if self.quiet:
            return
        if self._p is not None:
            self._p.console.print(msg, markup=False, highlight=False)
        else:
            print(msg, file=sys.stderr)

    def set_running(self, n: int) -> None:
        """How many runs are executing now (local workers or cluster workers)."""
        self.running = n
        if self._p is not None:
            self._p.update(self._task, running=n)

    def finished(self, what: str, ok: bool) -> None:
        self.done += 1
        self.failed += 0 if ok else 1
        if self._p is not None:
            self._p.update(self._task, advance=1, note=f"({self.failed} failed)" if self.failed else "")
        elif not self.quiet:
            print(f"[{self.done}/{self.total}] {what}; {self.running} running{self.eta()}", file=sys.stderr)

    def eta(self) -> str:
        """'; ETA 3m12s' from the pace of the runs finished in this session."""
        ran = self.done - self.cached
        left = self.total - self.done
        if ran <= 0 or left <= 0:
            return ""
        sec = (time.monotonic() - self._t0) / ran * left
        return f"; ETA {int(sec // 60)}m{int(sec % 60):02d}s" if sec >= 60 else f"; ETA {sec:.0f}s"

    def close(self) -> None:
        if self._p is not None:
            self._p.stop()
            self._p = None


def run_plan(plan: Plan, out: PathLike, jobs: Optional[int] = None, quiet: bool = True,
             cluster: Any = None, connect_timeout_s: float = 10.0) -> dict:
    """Runs every pending (point, seed) of a validated plan. Returns counts
    ``{"total", "cached", "ran", "failed": [(run, error)], "interrupted": bool}``.

    ``cluster`` None runs on a local process pool of ``jobs`` workers; otherwise the runs
    go to a Dask cluster (:func:`sojourn.cluster.connect`: an address, a scheduler file,
    ``slurm:N``, a ``distributed.Client`` or a cluster object); the files the experiment
    refers to travel with the tasks and the run directories come back to this process."""
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= 1024):
        raise ConfigError("--jobs", "", f"expected an integer in [1, 1024], got {jobs!r}")
    if cluster is not None and jobs is not None:
        raise ConfigError("--jobs", "", "applies to the local process pool; with --cluster the workers' threads set the parallelism")
    out = Path(out)
    # Refuse to mix results of a changed point definition with old ones.
    for p in plan.points:
        pj = out / "runs" / p.name / "point.json"
        if pj.exists():
            old = json.loads(pj.read_text()).get("fingerprint")
            if old != plan.fingerprint(p):
                raise ConfigError(plan.file, f"point {p.name!r}",
                                  f"{out}/runs/{p.name} holds runs of a different configuration; use another --out or delete that directory")
    conn = None
    if cluster is not None:
        from .cluster import connect

        conn = connect(cluster, connect_timeout_s)  # before anything is written
    try:
        out.mkdir(parents=True, exist_ok=True)
        from ._outdir import DirLock

        lock = DirLock(out, "sweep").acquire()  # two sweeps on one directory would share run dirs
        try:
            return _run_plan_locked(plan, out, jobs, quiet, conn)
        finally:
            lock.release()
    finally:
        if conn is not None:
            conn.close()


def _run_plan_locked(plan: Plan, out: Path, jobs: Optional[int], quiet: bool, conn: Any = None) -> dict:
    _write_text_atomic(out / "sweep.json", json.dumps(plan.to_json(), indent=2, sort_keys=True, default=str) + "\n")
    for p in plan.points:
        d = out / "runs" / p.name
        d.mkdir(parents=True, exist_ok=True)
        _write_text_atomic(d / "point.json", json.dumps({"point": p.name, "labels": p.labels, "overrides": p.overrides,
                                                          "fingerprint": plan.fingerprint(p)}, indent=2, sort_keys=True, default=str) + "\n")
    all_runs = plan.runs()
    pending = [(p, s) for p, s in all_runs if not (out / run_dir(p.name, s) / "summary.json").exists()]
    cached = len(all_runs) - len(pending)
    stats = {"total": len(all_runs), "cached": cached, "ran": 0, "failed": [], "interrupted": False}
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(pending) or 1))
    disp = _Display(len(all_runs), cached, plan.name, quiet)
    if cached:
        disp.log(f"{cached} of {len(all_runs)} runs already done in {out} (cached)")

    def finished(p: Point, s: int, r: dict) -> None:
        what = f"{p.name} seed {s}"
        if r["status"] == "done":
            stats["ran"] += 1
            disp.finished(f"{what} ({r['wall_s']:.1f} s)", True)
        elif r["status"] == "failed":
            stats["failed"].append((run_dir(p.name, s), r["error"]))
            disp.log(f"run {run_dir(p.name, s)} failed: {r['error']}")
            disp.finished(f"{what} FAILED", False)

    tasks = [(p, s, (plan.config(p), str(plan.base_dir), s, str(out / run_dir(p.name, s)))) for p, s in pending]
    try:
        if conn is not None:
            if tasks:
                disp.log(f"running on the Dask cluster: {conn.description}")
                _run_on_cluster(conn, plan, out, pending, finished, disp)
        elif jobs == 1:
            for p, s, args in tasks:
                disp.set_running(1)
                r = _run_task(*args)
                if r["status"] == "aborted":
                    raise KeyboardInterrupt
                finished(p, s, r)
        elif tasks:
            ctx = multiprocessing.get_context("spawn")
            stop = ctx.Event()
            ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init, initargs=(stop, os.getpid()))
            futs = {ex.submit(_run_task, *args): (p, s) for p, s, args in tasks}
            try:
                todo = set(futs)
                while todo:
                    done, todo = wait(todo, timeout=1.0, return_when=FIRST_COMPLETED)
                    disp.set_running(min(jobs, sum(1 for f in todo if f.running())))
                    for f in done:
                        p, s = futs[f]
                        try:
                            r = f.result()
                        except Exception as e:  # e.g. a worker died, or the disk is full
                            r = {"status": "failed", "error": f"{type(e).__name__}: {e}"}
                        finished(p, s, r)
            except KeyboardInterrupt:
                # Ask running simulations to stop at their next progress tick, drop the
                # queued ones, and wait for the workers (a second Ctrl-C kills them).
                stop.set()
                for f in futs:
                    f.cancel()
                disp.log("interrupted: stopping the running simulations (Ctrl-C again to kill them)")
                try:
                    ex.shutdown(wait=True, cancel_futures=True)
                except KeyboardInterrupt:
                    for proc in list(getattr(ex, "_processes", {}).values()):
                        proc.kill()
                    ex.shutdown(wait=False, cancel_futures=True)
                raise
            ex.shutdown(wait=True)
    except KeyboardInterrupt:
        stats["interrupted"] = True
    finally:
        disp.close()
    return stats


def _run_on_cluster(conn: Any, plan: Plan, out: Path, pending: list, finished: Callable, disp: "_Display") -> None:
    """Submits every pending run to the Dask cluster and copies each finished run
    directory from its worker as it arrives (client-side, atomic, piece by piece:
    :func:`sojourn.cluster.fetch_run`).
    Interrupted (Ctrl-C): the tasks are cancelled; runs already executing stop at their
    next progress tick (:func:`sojourn.cluster._cancel_check`)."""
    import uuid

    from distributed import as_completed

    from .cluster import _engine_hash, fetch_run, pack_files, run_shipped, running_count

    client = conn.client
    session = uuid.uuid4().hex[:12]
    ehash = _engine_hash()
    futs: dict = {}
    # Every point's files are read before anything is submitted (an unreadable one stops
    # the sweep before it starts), and go to the cluster once per point, not once per seed.
    packed: dict = {}
    for p, _ in pending:
        if p.name not in packed:
            cfg = plan.config(p)
            packed[p.name] = (cfg, pack_files(cfg, plan.base_dir, where=f"{plan.file}: point {p.name!r}"))
    shipped = {name: (cfg, client.scatter(files, hash=True) if files else {}) for name, (cfg, files) in packed.items()}
    del packed
    for p, s in pending:
        cfg, files = shipped[p.name]
        f = client.submit(run_shipped, cfg, files, s, ehash, key=f"sojourn-{session}-{p.name}-seed-{s}", pure=False)
        futs[f] = (p, s)
    keys = {f.key for f in futs}
    ac = as_completed(list(futs), with_results=True, raise_errors=False, loop=client.loop)
    last_poll = 0.0
    try:
        while not ac.is_empty():
            batch = ac.next_batch(block=False)
            now = time.monotonic()
            if now - last_poll >= 1.0 or batch:
                disp.set_running(running_count(client, keys))
                last_poll = now
            if not batch:
                time.sleep(0.1)
                continue
            for f, r in batch:
                p, s = futs.pop(f)
                keys.discard(f.key)
                if isinstance(r, BaseException):  # the task raised (a worker died three times, ...)
                    r = {"status": "failed", "error": f"{type(r).__name__}: {r}"}
                elif r.get("status") == "done":
                    try:
                        fetch_run(client, r, out / run_dir(p.name, s))
                        r = {k: v for k, v in r.items() if k not in ("dir", "files", "worker")}
                    except Exception as e:  # OSError here, or the worker lost mid-copy
                        r = {"status": "failed", "error": f"writing {run_dir(p.name, s)}: {e}"}
                elif r.get("status") == "aborted":
                    r = {"status": "failed", "error": "stopped on its worker"}
                f.release()
                finished(p, s, r)
    except KeyboardInterrupt:
        disp.log("interrupted: cancelling the cluster's tasks (running ones stop within a second or two)")
        try:
            client.cancel(list(futs), force=True)
        except Exception:
            pass
        raise


def run_sweep(path: PathLike, out: PathLike, jobs: Optional[int] = None, repeats: Optional[int] = None,
              seeds: Optional[Sequence[int]] = None, quiet: bool = True, cluster: Any = None,
              connect_timeout_s: float = 10.0) -> "pd.DataFrame":  # noqa: F821
    """Loads, validates (every point, before running any), runs and merges a sweep.
    Returns the runs table (one row per run). Raises :class:`ConfigError` for a bad sweep
    file or point (or a cluster it cannot connect to), :class:`SweepFailed` when runs
    failed, ``KeyboardInterrupt`` when interrupted (finished runs are kept; rerun to
    resume). ``cluster``: see :func:`run_plan` (None: local processes)."""
    if seeds is not None and (isinstance(seeds, (str, bytes)) or not all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**64 for x in seeds)):
        raise ConfigError("seeds", "", "expected a list of integers in [0, 2^64-1]")
    plan = load_plan(path, repeats=repeats, seeds=seeds)
    validate_plan(plan)
    st = run_plan(plan, out, jobs=jobs, quiet=quiet, cluster=cluster, connect_timeout_s=connect_timeout_s)
    runs = merge(plan, Path(out))
    if st["interrupted"]:
        raise KeyboardInterrupt
    if st["failed"]:
        raise SweepFailed("; ".join(f"{r}: {e}" for r, e in st["failed"]))
    return runs




# ------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------

SWEEP_EPILOG = """\
examples:
  sojourn sweep experiments/examples/compare-aqm.sweep.toml --out results/aqm
  sojourn sweep my.sweep.toml --out results/my --jobs 2 --repeats 5
  sojourn compare results/aqm --baseline pfifo --plots
  sojourn sweep long.sweep.toml --out results/long --allow-long-run   # points beyond a CPU-day

on a Dask cluster (pip install 'sojourn[cluster]'; workers need the same sojourn, not the same disk):
  dask scheduler --port 8786 &  dask worker tcp://HOST:8786 --nworkers 2 --nthreads 1 &
  sojourn sweep my.sweep.toml --out results/my --cluster tcp://HOST:8786
  sojourn sweep my.sweep.toml --out results/my --cluster scheduler.json   # dask scheduler --scheduler-file
  sojourn sweep my.sweep.toml --out results/my --cluster slurm:8          # dask-jobqueue SLURMCluster, 8 jobs

Each run goes to OUT/runs/<point>/seed-<n>/; finished runs are skipped when the command is
repeated (resume after Ctrl-C or a crash, with either backend). OUT/runs.parquet has one row
per run and OUT/flows.parquet every flow of every run. See docs/sweeps.md.
"""

def cmd_sweep(a) -> int:
    from . import _outdir
    from .progress import format_span

    if a.jobs is not None and not 1 <= a.jobs <= 1024:
        return fail(f"--jobs: expected an integer in [1, 1024], got {a.jobs}")
    if a.cluster is not None and a.jobs is not None:
        return fail("--jobs applies to the local process pool; with --cluster the workers' threads set the parallelism")
    if not (0 < a.connect_timeout <= 3600):
        return fail(f"--connect-timeout: expected seconds in (0, 3600], got {a.connect_timeout:g}")
    if a.dry_run:
        try:
            plan = load_plan(a.sweep, repeats=a.repeats)
            cpu_s = validate_plan(plan, allow_long=a.allow_long_run)
        except ConfigError as e:
            return fail(str(e))
        print(f"{plan.name}: {len(plan.points)} points x {len(plan.seeds)} seeds (seeds {', '.join(map(str, plan.seeds))}) "
              f"= {len(plan.runs())} runs; every point validated, CPU ~{format_span(cpu_s)} estimated in all, nothing run")
        print("\n".join(describe_plan(plan)))
        return 0
    if not a.out:
        return fail("sweep: --out is required (or --dry-run to list the points)")
    try:
        out_dir = _outdir.prepare(a.out)  # before any work: a bad --out is refused at once
    except ConfigError as e:
        return fail(str(e))
    try:
        plan = load_plan(a.sweep, repeats=a.repeats)
        cpu_s = validate_plan(plan, allow_long=a.allow_long_run)
    except ConfigError as e:
        out_dir.undo()
        return fail(str(e))
    except KeyboardInterrupt:
        out_dir.undo()
        print("sojourn: interrupted; nothing written", file=sys.stderr)
        return 130
    if not a.quiet:
        print(f"{plan.name}: {len(plan.points)} points x {len(plan.seeds)} seeds = {len(plan.runs())} runs -> {a.out}; "
              f"CPU ~{format_span(cpu_s)} estimated in all (docs/limits.md)", file=sys.stderr)
    try:
        st = run_plan(plan, a.out, jobs=a.jobs, quiet=a.quiet, cluster=a.cluster, connect_timeout_s=a.connect_timeout)
    except ConfigError as e:
        out_dir.undo()
        return fail(str(e))
    runs = merge(plan, Path(a.out))
    if st["interrupted"]:
        print(f"sojourn: interrupted; {len(runs)} of {st['total']} runs are complete in {a.out} (run the same command to resume)", file=sys.stderr)
        return 130
    if not a.quiet:
        print(f"{st['ran']} run(s), {st['cached']} cached, {len(st['failed'])} failed; merged {len(runs)} runs into "
              f"{a.out}/runs.parquet and {a.out}/flows.parquet", file=sys.stderr)
        print(f"next: sojourn compare {a.out}", file=sys.stderr)
    if st["failed"]:
        for r, e in st["failed"]:
            print(f"sojourn: run {r} failed: {e}", file=sys.stderr)
        return 1
    return 0


def add_parser(sub) -> None:
    """Adds ``sweep`` to the ``sojourn`` command's sub-parsers."""
    import argparse

    s = sub.add_parser("sweep", help="run a grid of experiments x repeats in parallel (resumable)",
                       description="Runs every (point, seed) of a sweep file on local cores (or a Dask cluster); "
                                   "finished runs are kept and skipped.",
                       epilog=SWEEP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("sweep", help="sweep file (TOML: base, repeats/seeds, [[axis]], [[variant]])")
    s.add_argument("--out", help="output directory (reused: finished runs are skipped); required unless --dry-run")
    s.add_argument("--dry-run", action="store_true",
                   help="validate every point and list the points and seeds without running anything")
    s.add_argument("--jobs", "-j", type=int, help="parallel runs on the local process pool (default: number of CPUs)")
    s.add_argument("--cluster", metavar="ADDRESS",
                   help="run on a Dask cluster instead: tcp://host:8786, a scheduler file (.json) or slurm:N "
                        "(dask-jobqueue); files the experiment refers to travel with the tasks, results come back here")
    s.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                   help="seconds to wait for the Dask scheduler (default 10)")
    s.add_argument("--repeats", type=int, help="override the number of repeats (seeds base_seed..base_seed+R-1)")
    s.add_argument("--quiet", action="store_true", help="no progress display and no messages")
    s.add_argument(ALLOW_LONG, action="store_true", help="run points whose CPU-time estimate exceeds a CPU-day "
                   "(every point is checked before any runs; docs/limits.md)")
    s.set_defaults(func=cmd_sweep)
