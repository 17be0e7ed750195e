"""Sweep points on a Dask distributed cluster (docs/sweeps.md, "On a cluster").

The sweep itself (plan, resumption, result layout, merging) lives in :mod:`sojourn.sweeps`;
this module is the transport between the client and workers that may not share a disk
with it:

* :func:`referenced_files` finds the files an experiment names (a link's ``trace``, an
  empirical size distribution's ``file``); :func:`pack_files` reads them on the client,
  so their bytes travel with the task;
* :func:`run_shipped` runs on a worker: it writes those bytes into a private directory in
  the worker's local directory, runs the point with the local pool's streaming writer
  (time series, packet log and flow records go to Parquet row groups while the run
  proceeds, so the worker's memory does not grow with the run) and writes the run
  directory there with :meth:`sojourn.Result.write`; it returns only the directory's
  listing;
* :func:`fetch_run` copies that directory to the client in pieces of
  :data:`FETCH_BYTES` (tasks pinned to that worker, :func:`read_piece`), through
  :func:`install_run` into ``OUT/runs/<point>/seed-<n>/`` with the same staged,
  ``summary.json``-last protocol (resumption after a crash or SIGKILL works as for the
  local pool), then removes it from the worker: the client holds one piece at a time;
* :func:`connect` turns ``--cluster ADDRESS`` into a ``distributed.Client``.

``distributed`` (and ``dask_jobqueue`` for ``slurm:N``) are imported only here, only when a
cluster is asked for: the local pool needs neither.
"""
from __future__ import annotations

import copy
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Union

from ._config import ConfigError

PathLike = Union[str, "os.PathLike[str]"]

#: The most bytes of referenced files one point may ship (traces and CDFs are small text
#: files; the engine itself refuses CDF files over 16 MiB).
MAX_SHIPPED_BYTES = 256 * 1024 * 1024
#: How often (seconds) a run on a worker checks whether its task was cancelled.
CANCEL_POLL_S = 1.0
#: Bytes per piece when the client copies a run directory from its worker.
FETCH_BYTES = 8 * 1024 * 1024
#: Name prefix of a task's private directory on a worker (:func:`remove_run` checks it).
TASK_PREFIX = "sojourn-task-"


# ------------------------------------------------------------------------------------
# files an experiment refers to
# ------------------------------------------------------------------------------------


def _file_slots(cfg: Any) -> Iterator[tuple[dict, str]]:
    """``(table, key)`` of every value in an experiment that names a file the engine reads:
    ``trace = "..."`` of a link (crates/sojourn-experiment: parse_link_spec) and
    ``file = "..."`` of a size distribution ``{ dist = "empirical", file = ... }``
    (dist.rs). Walks tables and arrays at any depth (dumbbell links, graph links,
    workloads), in document order."""
    if isinstance(cfg, dict):
        for k, v in cfg.items():
            if k == "trace" and isinstance(v, str):
                yield cfg, k
            elif k == "file" and isinstance(v, str) and cfg.get("dist") == "empirical":
                yield cfg, k
            else:
                yield from _file_slots(v)
    elif isinstance(cfg, list):
        for v in cfg:
            yield from _file_slots(v)


def referenced_files(cfg: dict) -> list[str]:
    """The file names an experiment refers to, as written (relative to its base directory
    or absolute), each once, in document order."""
    seen: dict = {}
    for t, k in _file_slots(cfg):
        seen.setdefault(t[k], None)
    return list(seen)


def pack_files(cfg: dict, base_dir: PathLike, where: str = "") -> dict[str, bytes]:
    """``{name as written: content}`` of every file the experiment refers to, read on the
    client (relative names resolve against ``base_dir``, as the engine resolves them).
    Raises :class:`ConfigError` for a file that cannot be read."""
    files: dict[str, bytes] = {}
    total = 0
    for name in referenced_files(cfg):
        p = Path(name) if Path(name).is_absolute() else Path(base_dir) / name
        try:
            data = p.read_bytes()
        except OSError as e:
            raise ConfigError(where or str(p), "", f"cannot read {name!r} ({p}) to send it to the cluster: {e.strerror or e}") from None
        total += len(data)
        if total > MAX_SHIPPED_BYTES:
            raise ConfigError(where or str(p), "", f"the files this experiment refers to exceed {MAX_SHIPPED_BYTES >> 20} MiB; "
                                                   "too large to send with every task")
        files[name] = data
    return files


# ------------------------------------------------------------------------------------
# the worker side
# ------------------------------------------------------------------------------------


def _cancel_check():
    """A ``progress`` callback for :func:`sojourn.run` on a Dask worker: returns False (stop
    the run) once the scheduler has released this task (the client cancelled it, was
    interrupted, or died). Reads only the worker's own task table, at most once per
    :data:`CANCEL_POLL_S`; returns None when not on a worker."""
    try:
        from distributed import get_worker
        from distributed.worker import thread_state

        worker = get_worker()
        key = thread_state.key
    except Exception:  # not in a Dask task
        return None
    last = [time.monotonic()]

    def progress(*_a: Any) -> Optional[bool]:
        now = time.monotonic()
        if now - last[0] < CANCEL_POLL_S:
            return None
        last[0] = now
        try:
            ts = worker.state.tasks.get(key)
        except Exception:  # a distributed version without this table: never cancel
            return None
        return not (ts is None or ts.state in ("cancelled", "released", "forgotten"))

    return progress


def _task_root() -> Path:
    """Where a task's directory goes: the Dask worker's own local directory (removed with
    the worker), else the system's temporary directory."""
    try:
        from distributed import get_worker

        return Path(get_worker().local_directory)
    except Exception:  # not in a Dask task
        return Path(tempfile.gettempdir())


def _worker_address() -> Optional[str]:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except Exception:  # not in a Dask task
        return None


def run_shipped(cfg: dict, files: dict[str, bytes], seed: int, engine_hash: Optional[str]) -> dict:
    """Runs one (point, seed) wherever this is called (a Dask worker) and returns
    ``{"status": "done", "dir": run directory on this machine, "files": {relative path:
    size}, "worker": this worker's address, "wall_s": ...}`` (or ``"failed"`` with an
    error, or ``"aborted"``). The run directory stays on the worker until
    :func:`fetch_run` has copied it and :func:`remove_run` removes it.

    The files the experiment refers to are written into the task's private directory and
    the experiment's file names are pointed at them for the engine; the run directory
    records the experiment as the client gave it (``experiment.json``), so its files are
    byte-identical to a local run's. ``engine_hash`` is the client's engine build: a
    worker with another build refuses, because its outputs could differ."""
    from . import api  # not the package facade: it imports sweeps, which imports this

    t0 = time.perf_counter()
    mine = _engine_hash()
    if engine_hash is not None and mine != engine_hash:
        import socket

        return {"status": "failed", "error": f"the worker on {socket.gethostname()} has another sojourn engine build "
                                             f"({(mine or 'unknown')[:12]}, client {engine_hash[:12]}); install the same "
                                             "sojourn on every worker (outputs must be identical)"}
    root = Path(tempfile.mkdtemp(prefix=TASK_PREFIX, dir=_task_root()))
    done = False
    try:
        inputs = root / "in"
        inputs.mkdir()
        local = copy.deepcopy(cfg)
        where: dict[str, str] = {}
        for i, (name, data) in enumerate(files.items()):
            d = inputs / f"f{i}"
            d.mkdir()
            p = d / (Path(name).name or "file")
            p.write_bytes(data)
            where[name] = str(p)
        for t, k in _file_slots(local):
            if t[k] in where:
                t[k] = where[t[k]]
        out = root / "out"
        try:
            # Streamed into a staging directory of `out`, as a local sweep's run is.
            res = api._run_staged(local, seed=seed, base_dir=inputs, progress=_cancel_check(), out=out)
        except KeyboardInterrupt:
            return {"status": "aborted"}
        except Exception as e:  # a failed run must not take the sweep down
            return {"status": "failed", "error": f"{type(e).__name__}: {e}"}
        # As sojourn.run records it from the client's dict (the file names as written).
        res.experiment = {k: v for k, v in cfg.items() if k != "seed"}
        res.write(out)
        shutil.rmtree(inputs, ignore_errors=True)
        listing = {p.relative_to(out).as_posix(): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()}
        done = True
        return {"status": "done", "dir": str(out), "files": listing, "worker": _worker_address(),
                "wall_s": time.perf_counter() - t0}
    finally:
        if not done:
            shutil.rmtree(root, ignore_errors=True)


def read_piece(run_dir: str, rel: str, offset: int, size: int) -> bytes:
    """Up to ``size`` bytes at ``offset`` of file ``rel`` of a run directory that
    :func:`run_shipped` left on this worker."""
    p = Path(run_dir) / rel
    if Path(rel).is_absolute() or ".." in Path(rel).parts or Path(run_dir).parent.name[:len(TASK_PREFIX)] != TASK_PREFIX:
        raise ValueError(f"not a shipped run's file: {run_dir} {rel}")
    with open(p, "rb") as f:
        f.seek(offset)
        return f.read(size)


def remove_run(run_dir: str) -> None:
    """Removes a task's private directory (the parent of ``run_dir``) from this worker."""
    root = Path(run_dir).parent
    if root.name.startswith(TASK_PREFIX):
        shutil.rmtree(root, ignore_errors=True)


def fetch_run(client: Any, r: dict, out: Path) -> None:
    """Copies the run directory that :func:`run_shipped` reported in ``r`` from its worker
    into ``out`` (:func:`install_run`), :data:`FETCH_BYTES` at a time, then removes it from
    the worker (also when the copy fails)."""
    pin = {"workers": [r["worker"]], "allow_other_workers": False} if r.get("worker") else {}

    def read(rel: str) -> Iterator[bytes]:
        size, offset = r["files"][rel], 0
        while offset < size:
            f = client.submit(read_piece, r["dir"], rel, offset, FETCH_BYTES, pure=False, **pin)
            try:
                data = f.result()
            finally:
                f.release()
            if not data:
                raise OSError(f"{rel} ended at {offset} of {size} bytes on the worker")
            offset += len(data)
            yield data

    try:
        install_run(out, list(r["files"]), read)
    finally:
        try:
            from distributed import fire_and_forget

            fire_and_forget(client.submit(remove_run, r["dir"], pure=False, **pin))
        except Exception:  # the worker is gone: so is its local directory
            pass


def _engine_hash() -> Optional[str]:
    try:
        from . import _engine

        return str(_engine.source_hash())
    except Exception:
        return None


# ------------------------------------------------------------------------------------
# the client side
# ------------------------------------------------------------------------------------


def install_run(out: Path, files: list, read: Callable[[str], Iterator[bytes]]) -> None:
    """Writes the run directory files ``files`` (relative paths) whose bytes ``read(rel)``
    yields piece by piece (:func:`fetch_run`) into ``out`` atomically, like
    :meth:`sojourn.Result.write`: ``summary.json`` (the completeness marker) removed
    first, everything staged in a hidden directory named after this process, renamed into
    place, ``summary.json`` last; files of an earlier partial attempt that the new run
    does not have are removed. A crash at any point leaves no ``summary.json``, so a
    rerun redoes the run (nothing half-written counts as done)."""
    from ._outdir import PARTIAL_PREFIX, clean_stale_partials, staging_dir
    from .results import SUMMARY, publish_staged

    if SUMMARY not in files:
        raise ValueError(f"a returned run has no {SUMMARY}")
    out.mkdir(parents=True, exist_ok=True)
    clean_stale_partials(out)
    (out / SUMMARY).unlink(missing_ok=True)
    staging = staging_dir(out)
    try:
        for rel in files:
            parts = Path(rel).parts
            if Path(rel).is_absolute() or ".." in parts or not parts:
                raise ValueError(f"a returned run holds an unsafe path {rel!r}")
            p = staging / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            with open(p, "wb") as f:
                for piece in read(rel):
                    f.write(piece)
        tops = {Path(rel).parts[0] for rel in files}
        for e in list(out.iterdir()):
            if e.name not in tops and not e.name.startswith(PARTIAL_PREFIX) and not e.name.startswith("."):
                shutil.rmtree(e) if e.is_dir() and not e.is_symlink() else e.unlink()
        publish_staged(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@dataclass
class Connection:
    """A connected ``distributed.Client`` and what to close when the sweep is done."""

    client: Any
    description: str
    owned: list  # objects this module created (closed by :meth:`close`), newest last

    def close(self) -> None:
        for o in reversed(self.owned):
            try:
                o.close()
            except Exception:  # closing a half-dead connection must not mask the result
                pass
        self.owned = []


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise ConfigError("--cluster", "", "needs Dask distributed: pip install 'sojourn[cluster]' "
                                           "(or pip install 'dask[distributed]')") from None
    return distributed


def connect(cluster: Any, timeout_s: float = 10.0) -> Connection:
    """Connects to a cluster given as:

    * an address string: ``tcp://host:8786`` (any ``scheme://`` distributed knows, or
      ``host:port``);
    * a scheduler file written by ``dask scheduler --scheduler-file F`` (a path ending in
      ``.json``);
    * ``slurm:N``: a dask-jobqueue ``SLURMCluster()`` configured from Dask's configuration
      (``~/.config/dask/jobqueue.yaml`` or ``DASK_JOBQUEUE__SLURM__*`` variables), scaled
      to N Slurm jobs, closed (jobs cancelled) when the sweep ends;
    * a ``distributed.Client`` (used as is, not closed) or a cluster object with a
      ``scheduler_address`` (``LocalCluster``, ``SLURMCluster``, ...; not closed).

    Raises :class:`ConfigError` (one line) when it cannot connect within ``timeout_s``."""
    distributed = _import_distributed()
    if isinstance(cluster, distributed.Client):
        return Connection(cluster, f"client {cluster.scheduler.address}", [])
    if hasattr(cluster, "scheduler_address") and not isinstance(cluster, str):
        c = _client(distributed, cluster, timeout_s, str(cluster.scheduler_address))
        return Connection(c, f"cluster {cluster.scheduler_address}", [c])
    if not isinstance(cluster, str) or not cluster.strip():
        raise ConfigError("--cluster", "", f"expected an address like tcp://host:8786, a scheduler file, or slurm:N; got {cluster!r}")
    addr = cluster.strip()
    if addr.startswith("slurm:"):
        n = addr[len("slurm:"):]
        if not n.isdigit() or not 1 <= int(n) <= 100_000:
            raise ConfigError("--cluster", "", f"{addr!r}: expected slurm:N with N the number of Slurm jobs (e.g. slurm:4)")
        try:
            from dask_jobqueue import SLURMCluster
        except ImportError:
            raise ConfigError("--cluster", "", "slurm:N needs dask-jobqueue: pip install 'sojourn[slurm]'") from None
        import shlex

        try:
            sc = SLURMCluster()
        except Exception as e:
            msg = " ".join(str(e).split())  # one line (dask-jobqueue's hints span several)
            raise ConfigError("--cluster", "", f"{addr}: cannot start a SLURMCluster (configure it in Dask's jobqueue.slurm "
                                               f"settings, docs/sweeps.md): {type(e).__name__}: {msg}") from None
        submit = shlex.split(getattr(sc.job_cls, "submit_command", None) or "sbatch")[0]
        if shutil.which(submit) is None:
            # dask-jobqueue submits in the background and only logs the failure: the sweep
            # would wait for workers that never come.
            sc.close()
            raise ConfigError("--cluster", "", f"{addr}: {submit!r} is not on PATH; run the sweep on a Slurm submit host")
        try:
            sc.scale(jobs=int(n))
        except Exception as e:
            sc.close()
            raise ConfigError("--cluster", "", f"{addr}: cannot submit Slurm jobs: {type(e).__name__}: {' '.join(str(e).split())}") from None
        try:
            c = _client(distributed, sc, timeout_s, addr)
        except ConfigError:
            sc.close()
            raise
        return Connection(c, f"{addr} (scheduler {sc.scheduler_address})", [sc, c])
    if addr.endswith(".json"):
        if not Path(addr).is_file():
            raise ConfigError("--cluster", "", f"scheduler file {addr} does not exist")
        c = _client(distributed, None, timeout_s, addr, scheduler_file=addr)
        return Connection(c, f"scheduler file {addr}", [c])
    if "://" not in addr:
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError("--cluster", "", f"{addr!r}: expected a scheduler address like tcp://host:8786, "
                                               "a scheduler file (.json) or slurm:N")
        addr = f"tcp://{addr}"
    c = _client(distributed, addr, timeout_s, addr)
    return Connection(c, addr, [c])


def _client(distributed, target, timeout_s: float, shown: str, scheduler_file: Optional[str] = None):
    import logging

    # A failed connection is reported in one line below; distributed's own retries would
    # otherwise log tracebacks on the way.
    log = logging.getLogger("distributed")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        if scheduler_file is not None:
            return distributed.Client(scheduler_file=scheduler_file, timeout=timeout_s, set_as_default=False)
        return distributed.Client(target, timeout=timeout_s, set_as_default=False)
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError("--cluster", "", f"cannot connect to the Dask scheduler at {shown} within {timeout_s:g} s: {msg}") from None
    finally:
        log.setLevel(level)


def running_count(client: Any, keys: set) -> int:
    """How many of ``keys`` are executing on a worker now (one scheduler query)."""
    try:
        processing = client.processing()
        threads = sum(client.nthreads().values())
    except Exception:
        return 0
    # `processing` also lists tasks a worker holds queued behind its busy threads.
    return min(threads, sum(1 for ks in processing.values() for k in ks if k in keys))
