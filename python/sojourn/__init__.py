"""sojourn: a laboratory for Active Queue Management and packet scheduling.

Quick start::

    import sojourn
    res = sojourn.run("experiments/examples/cbr-fifo-overload.toml", seed=1)
    res.summary["links"]["bottleneck"]["utilisation"]
    res.flows                                   # pandas DataFrame, one row per flow
    res.series("bottleneck", "queue_packets")   # a time series
    flows = sojourn.load("results/aqm")         # a run or a whole sweep as one tidy DataFrame

The engine is Rust (``sojourn._engine``); this package is the front-end: configuration
loading, results I/O, statistics, plots and the ``sojourn`` command.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from ._config import ConfigError
from .api import (
    SEED_MAX,
    EmulateError,
    PrivilegeError,
    Source,
    __version__,
    check_seed,
    emulate_check,
    emulate_cleanup,
    qdiscs,
    run,
    validate,
)
from .api import _engine_or_fail, _run_staged  # noqa: F401  (callers: sojourn._engine_or_fail, cli)
from .api import _emulate_staged as _emulate_staged_forwarder
from .api import emulate as _emulate_forwarder
from .results import Result
from .analysis.tidy import load

__all__ = ["run", "emulate", "emulate_cleanup", "validate", "qdiscs", "sweep", "load", "Result", "ConfigError",
           "PrivilegeError", "EmulateError", "__version__"]


def emulate(
    source: Source,
    seed: Optional[int] = None,
    duration: Optional[str] = None,
    overrides: Optional[Mapping[str, Any]] = None,
    progress: Optional[Callable[[float, float, int], Optional[bool]]] = None,
    base_dir: Optional[Union[str, Path]] = None,
    kernel: bool = False,
    out: Optional[Union[str, Path]] = None,
    disciplines: Optional[Mapping[str, type]] = None,
) -> Result:
    """Runs one experiment live: :func:`sojourn.api.emulate` (sojourn's forwarder with the
    simulator's disciplines, docs/emulate.md), or with ``kernel=True`` the kernel's own
    disciplines and classifiers (tc and nft put on the hosts' devices by ``sojourn deploy
    apply``; :mod:`sojourn.kernel_engine`, docs/deploy.md), ``result.summary["engine"] ==
    "kernel"``. Arguments and result as for :func:`run` (with ``out`` the results are
    written there and the time series streams to disk while the run proceeds). (The choice is made here, in the
    facade, so that ``api`` and ``kernel_engine``, which uses ``api``, import no circle.)

    Example::

        res = sojourn.emulate("experiments/emulate/fq-codel.toml", duration="5s")
        res.summary["links"]["bottleneck"]["sojourn_ms"]["mean"]
    """
    if kernel:
        from .kernel_engine import emulate_kernel

        if disciplines:
            raise ConfigError("disciplines", "", "the kernel engine runs the kernel's own qdiscs; a Python "
                              "discipline runs live in sojourn's forwarder: emulate without kernel=True")
        return emulate_kernel(source, seed=seed, duration=duration, overrides=overrides, progress=progress,
                              base_dir=base_dir, out=out)
    return _emulate_forwarder(source, seed=seed, duration=duration, overrides=overrides, progress=progress,
                              base_dir=base_dir, out=out, disciplines=disciplines)


def _emulate_staged(source: Source, kernel: bool = False, **kw: Any) -> Result:
    """:func:`emulate` with ``out`` left staged (``Result.write`` publishes it, with the
    report): the CLI's writer."""
    if kernel:
        from .kernel_engine import emulate_kernel

        return emulate_kernel(source, publish=False, **kw)
    return _emulate_staged_forwarder(source, **kw)


def sweep(path: Union[str, Path], out: Union[str, Path], jobs: Optional[int] = None,
          repeats: Optional[int] = None, seeds: Optional[Sequence[int]] = None, quiet: bool = True,
          cluster: Any = None, connect_timeout_s: float = 10.0):
    """Runs a sweep file (docs/sweeps.md): validates every point first, runs every (point,
    seed) on ``jobs`` local processes (finished runs are kept and skipped on a rerun) and
    returns the runs table (a pandas DataFrame, one row per run). ``cluster`` sends the
    runs to Dask instead: an address (``"tcp://host:8786"``), a scheduler file, ``"slurm:N"``,
    a ``distributed.Client`` or a cluster object (``LocalCluster``, dask-jobqueue's
    ``SLURMCluster``); same layout, resumption and per-run bytes. The machinery is the
    :mod:`sojourn.sweeps` module (:func:`sojourn.sweeps.run_sweep`).

    Example::

        runs = sojourn.sweep("experiments/examples/compare-aqm.sweep.toml", "results/aqm", jobs=2)
        from dask_jobqueue import SLURMCluster
        cluster = SLURMCluster(cores=1, processes=1, memory="2GB", walltime="02:00:00")
        cluster.scale(jobs=16)
        runs = sojourn.sweep("big.sweep.toml", "results/big", cluster=cluster)
    """
    from .sweeps import run_sweep

    return run_sweep(path, out, jobs=jobs, repeats=repeats, seeds=seeds, quiet=quiet, cluster=cluster,
                     connect_timeout_s=connect_timeout_s)
