"""Crash safety and determinism of what a run writes (issue #17): SVGs are byte-identical
for the same seed, stale partial directories of dead processes are removed (live ones
kept), the report is written inside the staged write, a second sweep on a locked
directory is refused, and sweep workers die with their parent."""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sojourn
from sojourn import _outdir
from sojourn.analysis.report import write_run_report

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "experiments" / "examples"


def _digests(d: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())
            if p.is_file() and p.name != "perf.json"}


def test_same_seed_gives_byte_identical_svgs_and_report(tmp_path):
    res = sojourn.run(EX / "cbr-fifo-overload.toml", seed=3, duration="8s")
    a = res.write(tmp_path / "a", extra=lambda d: write_run_report(res, d))
    time.sleep(1.1)  # a date in the SVG would now differ
    res2 = sojourn.run(EX / "cbr-fifo-overload.toml", seed=3, duration="8s")
    b = res2.write(tmp_path / "b", extra=lambda d: write_run_report(res2, d))
    da, db = _digests(a), _digests(b)
    assert any(n.endswith(".svg") for n in da), sorted(da)
    assert "report.md" in da
    assert da == db
    assert b"<dc:date>" not in (a / "queue.svg").read_bytes()
    assert not [p for p in a.iterdir() if p.name.startswith(".sojourn-partial-")]


def test_stale_partials_of_dead_processes_are_removed_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".sojourn-partial-{dead.pid}-1-abcd"
    stale.mkdir()
    (stale / "flows.parquet").write_bytes(b"x")
    live = _outdir.staging_dir(tmp_path)  # owned by this (live) process
    other = tmp_path / ".sojourn-partial-zzz"  # old-style name, fresh: kept
    other.mkdir()
    removed = _outdir.clean_stale_partials(tmp_path)
    assert removed == [stale.name]
    assert live.exists() and other.exists() and not stale.exists()


def test_a_second_sweep_on_a_locked_directory_is_refused(tmp_path):
    lock = _outdir.DirLock(tmp_path, "sweep").acquire()
    try:
        with pytest.raises(sojourn.ConfigError, match=r"another sweep \(pid \d+\) is running"):
            _outdir.DirLock(tmp_path, "sweep").acquire()
    finally:
        lock.release()
    _outdir.DirLock(tmp_path, "sweep").acquire().release()  # free again


def test_sweep_workers_die_with_their_parent(tmp_path):
    """A parent killed with SIGKILL (as by the OOM killer) takes its workers with it."""
    code = (
        "import multiprocessing, os, sys, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from sojourn import sweeps\n"
        "ctx = multiprocessing.get_context('spawn')\n"
        "ex = ProcessPoolExecutor(1, mp_context=ctx, initializer=sweeps._worker_init, initargs=(ctx.Event(), os.getpid()))\n"
        "print(ex.submit(os.getpid).result(), flush=True)\n"
        "time.sleep(60)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    worker = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    for _ in range(100):
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        # reap if it became our child's zombie elsewhere; otherwise wait
        time.sleep(0.1)
    else:
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker outlived its parent by 10 s")


def test_declared_python_floor_is_the_tested_one():
    """pyproject's requires-python is what CI runs (tomllib needs 3.11; 3.9/3.10 were
    declared but crashed on import, issue #17)."""
    import tomllib

    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert spec == ">=3.11"
    assert sys.version_info >= (3, 11)
