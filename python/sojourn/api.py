"""The package's functions (``sojourn.run``, ``validate``, ``emulate``, ``qdiscs`` …), kept
out of ``sojourn/__init__.py`` so that modules of the package (sweeps, the CLI, the
reproductions) call them without importing the package facade, which imports them back
(tests/python/test_import_structure.py keeps the import graph free of cycles).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

from ._config import ConfigError, check_depth, set_key
from ._config import load as _load_config
from .results import Result

try:
    from . import _engine
    __version__ = _engine.version()
except ImportError:  # pragma: no cover - the analytics modules work without the engine
    _engine = None  # type: ignore[assignment]
    __version__ = "0.1.0"

Source = Union[str, Path, Mapping[str, Any]]
#: Python disciplines registered by name (``disciplines={"my_aqm": MyAqm}``).
Disciplines = Optional[Mapping[str, type]]


def _engine_or_fail():
    if _engine is None:
        raise ImportError("sojourn's engine (sojourn._engine) is not built: run `pip install .` at the repository root")
    return _engine


def _live_engine():
    eng = _engine_or_fail()
    if not hasattr(eng, "emulate"):
        raise EmulateError("live emulation needs Linux (network namespaces); this build of the engine has none")
    return eng


def _prepare(source: Source, overrides: Optional[Mapping[str, Any]] = None, duration: Optional[str] = None,
             base_dir: Optional[Union[str, Path]] = None) -> tuple[dict, str, Path]:
    cfg, name, base = _load_config(source)
    if base_dir is not None:  # relative paths (traces) of a dict config resolve here
        base = Path(base_dir)
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError("overrides", "", f"expected a dict of dotted keys, got {type(overrides).__name__}")
    if overrides:
        check_depth(dict(overrides), "overrides")
    for k, v in (overrides or {}).items():
        set_key(cfg, k, v, where="overrides")
    if duration is not None:
        if not isinstance(duration, str):
            raise ConfigError("duration", "", f'expected a duration string like "60s", got {duration!r}')
        cfg["duration"] = duration
    # Flent's named tests (kind = "rrul", ...) become the engine's workloads (docs/tests.md).
    from .flent_tests import expand

    cfg = expand(cfg, name)
    return cfg, name, base


#: Seeds are unsigned 64-bit integers (the engine's random streams are derived from them).
SEED_MAX = 2**64 - 1


def check_seed(seed: Any, where: str = "seed") -> Optional[int]:
    """``None`` or an integer in ``[0, 2**64 - 1]``; anything else raises :class:`ConfigError`."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(where, "", f"expected an integer in [0, {SEED_MAX}], got {seed!r}")
    if not 0 <= seed <= SEED_MAX:
        raise ConfigError(where, "", f"{seed} is out of range [0, {SEED_MAX}]")
    return seed


def _wrap_engine_error(name: str, e: Exception) -> ConfigError:
    return ConfigError(name, getattr(e, "path", ""), getattr(e, "msg", str(e)))


def _resolver(name: str, base: Path, disciplines: Disciplines) -> Any:
    """The engine's resolver of Python disciplines (docs/python-disciplines.md): ``kind =
    "python"`` specs resolve their ``module`` against ``base``; ``disciplines`` names
    classes given from Python. A bad ``disciplines`` argument is a :class:`ConfigError`."""
    from .disciplines import Resolver, SpecError

    try:
        return Resolver(base, disciplines)
    except SpecError as e:
        raise ConfigError(name, e.key, e.msg) from None


def validate(source: Source, overrides: Optional[Mapping[str, Any]] = None, base_dir: Optional[Union[str, Path]] = None,
             disciplines: Disciplines = None) -> dict:
    """Checks an experiment (file path or dict) without running it; returns its plan
    (nodes, links with their qdiscs, number of workloads, and ``threads``: how the run is
    cut over the threads it asks for, or ``one_thread_because``). Raises :class:`ConfigError`.
    ``base_dir`` is where relative paths of a dict config resolve (default: the cwd);
    ``disciplines`` as for :func:`run` (Python disciplines are imported and checked)."""
    eng = _engine_or_fail()
    cfg, name, base = _prepare(source, overrides, base_dir=base_dir)
    try:
        return eng.validate(cfg, str(base), _resolver(name, base, disciplines))
    except eng.ConfigError as e:
        raise _wrap_engine_error(name, e) from None


def run(
    source: Source,
    seed: Optional[int] = None,
    duration: Optional[str] = None,
    overrides: Optional[Mapping[str, Any]] = None,
    progress: Union[bool, Callable[[float, float, int], Optional[bool]], None] = None,
    base_dir: Optional[Union[str, Path]] = None,
    out: Optional[Union[str, Path]] = None,
    disciplines: Disciplines = None,
) -> Result:
    """Runs one experiment and returns its :class:`Result`.

    ``source`` is a path to a TOML experiment file or an equivalent dict; ``seed``
    overrides the file's seed; ``duration`` (e.g. ``"30s"``) its duration; ``overrides``
    sets dotted keys (``{"topology.bottleneck.qdisc": "codel"}``); ``base_dir`` is where
    relative paths of a dict config resolve. ``progress(sim_s,
    end_s, events)`` is called about every 65k events; returning ``False`` aborts.
    ``progress=True`` shows a progress bar with an ETA (in a terminal or a Jupyter notebook).

    ``out``: write the results into this directory, as ``sojourn run --out`` does. The time
    series and packet log are then streamed to disk in Parquet row groups while the run
    proceeds, so memory stays flat however long the run; the result's
    :attr:`~Result.timeseries` and :attr:`~Result.packets` read them from there. Without
    ``out`` they are held in memory and returned, and a run whose tables would not fit is
    refused with the estimate (docs/limits.md).

    ``overrides={"threads": N}`` (or ``"auto"``) cuts this one run over N threads, with the
    same results as on one (docs/engine.md, "One run on many cores").

    ``disciplines``: Python disciplines by name, ``{"my_aqm": MyAqm}``; the experiment
    then names one as ``qdisc = "my_aqm"`` (or ``{ kind = "my_aqm", ...parameters }``).
    Files may also name a class in a file, ``{ kind = "python", module = "my_aqm.py",
    class = "MyAqm" }`` (docs/python-disciplines.md). A discipline that raises during the
    run stops it with :class:`sojourn.disciplines.DisciplineError` (its ``__cause__`` is
    the discipline's exception); nothing is written.
    """
    res = _run_staged(source, seed, duration, overrides, progress, base_dir, out, disciplines)
    if out is not None:
        res.write(out)
    return res


def _run_staged(source: Source, seed: Optional[int] = None, duration: Optional[str] = None,
                overrides: Optional[Mapping[str, Any]] = None,
                progress: Union[bool, Callable[[float, float, int], Optional[bool]], None] = None,
                base_dir: Optional[Union[str, Path]] = None,
                out: Optional[Union[str, Path]] = None, disciplines: Disciplines = None) -> Result:
    """:func:`run`; with ``out``, the time series and packet log stream into a staging
    directory inside ``out`` (``Result.staged``) that :meth:`Result.write` publishes."""
    eng = _engine_or_fail()
    seed = check_seed(seed)
    cfg, name, base = _prepare(source, overrides, duration, base_dir)
    resolver = _resolver(name, base, disciplines)
    stream = open_stream(out)
    t0 = time.perf_counter()
    try:
        kw = stream_kwargs(stream)
        kw["disciplines"] = resolver
        if progress is True:
            from .progress import RunProgress

            with RunProgress(name) as bar:
                raw = eng.run(cfg, str(base), seed, bar, **kw)
        else:
            raw = eng.run(cfg, str(base), seed, progress or None, **kw)
        res = Result.from_engine(raw, stream=stream)
    except BaseException as e:
        discard_stream(stream)
        if isinstance(e, eng.ConfigError):
            raise _wrap_engine_error(name, e) from None
        raise
    wall = time.perf_counter() - t0
    # Neither the seed nor the threads the run was cut over are part of what was run
    # (outputs are byte-identical on any thread count: docs/engine.md).
    res.experiment = {k: v for k, v in cfg.items() if k not in ("seed", "threads")}
    # Probe statistics, jitter, MOS and the named tests' totals (docs/tests.md).
    from .probes import attach

    attach(res, res.experiment)
    from .isp import attach as _isp_attach

    _isp_attach(res, cfg, base)  # subscribers.parquet of an isp topology (docs/isp.md)
    summary_events = res.summary.get("events", 0)
    sim_s = res.summary.get("duration_s", 0.0)
    pkts = sum(l.get("tx_packets", 0) for l in res.summary.get("links", {}).values())
    res.perf = {
        "wall_seconds": wall,
        "events": summary_events,
        "events_per_second": summary_events / wall if wall > 0 else None,
        "link_packets_per_second": pkts / wall if wall > 0 else None,
        "simulated_seconds_per_wall_second": sim_s / wall if wall > 0 else None,
    }
    return res


def open_stream(out: Optional[Union[str, Path]]) -> Any:
    """The streaming writer (:class:`sojourn._stream.RunStream`) of a run whose results go
    to ``out``, writing into a staging directory there; None without ``out``."""
    if out is None:
        return None
    from . import _outdir
    from ._stream import RunStream, row_group_rows

    rg = row_group_rows()
    out_path = _outdir.prepare(out).path
    _outdir.clean_stale_partials(out_path)
    return RunStream(_outdir.staging_dir(out_path), rg)


def stream_kwargs(stream: Any) -> dict:
    """The engine's ``sink``/``chunk_rows`` arguments for ``stream`` (none without)."""
    from ._stream import CHUNK_ROWS

    return {} if stream is None else {"sink": stream, "chunk_rows": CHUNK_ROWS}


def discard_stream(stream: Any) -> None:
    """Closes a run's writer and removes its staging directory (a run that failed)."""
    if stream is not None:
        import shutil

        stream.close()
        shutil.rmtree(stream.staging, ignore_errors=True)


class PrivilegeError(PermissionError):
    """The live engine may not create network namespaces (it needs root)."""


class EmulateError(RuntimeError):
    """A live run failed on the machine's side (a namespace, device, socket or the forwarder)."""


def _live_error(eng: Any, name: str, e: BaseException) -> Optional[Exception]:
    """The public exception for a live engine's error (``emulate`` and ``emulate --kernel``
    share it): its ``ConfigError`` names the file and key, ``PrivilegeError`` and
    ``EmulateError`` keep their message; ``None`` for anything else (re-raised as it is)."""
    if isinstance(e, eng.ConfigError):
        return _wrap_engine_error(name, e)
    if isinstance(e, eng.PrivilegeError):
        return PrivilegeError(str(e))
    if isinstance(e, eng.EmulateError):
        return EmulateError(str(e))
    return None


def emulate(
    source: Source,
    seed: Optional[int] = None,
    duration: Optional[str] = None,
    overrides: Optional[Mapping[str, Any]] = None,
    progress: Optional[Callable[[float, float, int], Optional[bool]]] = None,
    base_dir: Optional[Union[str, Path]] = None,
    out: Optional[Union[str, Path]] = None,
    disciplines: Disciplines = None,
) -> Result:
    """Runs one experiment live and returns the same :class:`Result` as :func:`run`.

    The hosts are network namespaces running the kernel's own TCP (reno, cubic, bbr); the
    experiment's links run in sojourn's user-space forwarder with the very disciplines the
    simulator uses (docs/emulate.md). It takes ``duration`` of wall-clock time and needs
    root. Arguments as for :func:`run`; ``progress(elapsed_s, end_s, 0)`` is called about
    every 100 ms. ``result.summary["engine"] == "emulate"``.

    Raises :class:`ConfigError` for a bad file or what cannot be honoured live (naming the
    key), :class:`PrivilegeError` without root, :class:`EmulateError` if the machine fails.
    ``KeyboardInterrupt`` (or any exception a signal handler raises) stops the run after
    removing every namespace and device it created.

    ``out``: the results go into this directory, as for :func:`run`; the time series is
    then streamed to disk while the run proceeds (the same writer as a simulated run's).

    Example::

        res = sojourn.emulate("experiments/emulate/fq-codel.toml", duration="5s")
        res.summary["links"]["bottleneck"]["sojourn_ms"]["mean"]
    """
    res = _emulate_staged(source, seed, duration, overrides, progress, base_dir, out, disciplines)
    if out is not None:
        res.write(out)
    return res


def _emulate_staged(source: Source, seed: Optional[int] = None, duration: Optional[str] = None,
                    overrides: Optional[Mapping[str, Any]] = None,
                    progress: Optional[Callable[[float, float, int], Optional[bool]]] = None,
                    base_dir: Optional[Union[str, Path]] = None,
                    out: Optional[Union[str, Path]] = None, disciplines: Disciplines = None) -> Result:
    """:func:`emulate`; with ``out``, the time series streams into a staging directory
    inside ``out`` (``Result.staged``) that :meth:`Result.write` publishes."""
    eng = _live_engine()
    cfg, name, base = _prepare(source, overrides, duration, base_dir)
    resolver = _resolver(name, base, disciplines)
    stream = open_stream(out)
    t0 = time.perf_counter()
    try:
        raw = eng.emulate(cfg, str(base), seed, progress, **stream_kwargs(stream), disciplines=resolver)
        res = Result.from_engine(raw, stream=stream)
    except BaseException as e:
        discard_stream(stream)
        mapped = _live_error(eng, name, e)
        if mapped is not None:
            raise mapped from None
        raise
    wall = time.perf_counter() - t0
    from .isp import attach as _isp_attach
    from .live_probes import attach_live

    _isp_attach(res, cfg, base)  # subscribers.parquet of an isp topology (docs/isp.md)
    attach_live(res, cfg)  # probe statistics and named tests' totals (docs/tests.md)
    pkts = sum(l.get("tx_packets", 0) for l in res.summary.get("links", {}).values())
    res.perf = {
        "wall_seconds": wall,
        "link_packets_per_second": pkts / wall if wall > 0 else None,
    }
    return res


def emulate_check(source: Source, overrides: Optional[Mapping[str, Any]] = None,
                  duration: Optional[str] = None, base_dir: Optional[Union[str, Path]] = None,
                  disciplines: Disciplines = None) -> None:
    """Raises :class:`ConfigError` if the experiment is invalid or asks for something the
    live engine cannot honour on this kernel (e.g. a congestion control it lacks). Needs
    no privilege and creates nothing."""
    eng = _live_engine()
    cfg, name, base = _prepare(source, overrides, duration, base_dir)
    try:
        eng.emulate_check(cfg, str(base), _resolver(name, base, disciplines))
    except eng.ConfigError as e:
        raise _wrap_engine_error(name, e) from None


def emulate_cleanup() -> tuple[list[str], list[str]]:
    """Removes the namespaces of live runs that died without cleaning up (SIGKILL), as
    listed in their state files; never touches anything else. Returns ``(removed, errors)``."""
    eng = _live_engine()
    try:
        removed, errors = eng.emulate_cleanup()
    except eng.PrivilegeError as e:
        raise PrivilegeError(str(e)) from None
    return list(removed), list(errors)


def qdiscs() -> list[tuple[str, str]]:
    """``(name, summary)`` of every discipline an experiment file can name."""
    return list(_engine_or_fail().qdiscs())
