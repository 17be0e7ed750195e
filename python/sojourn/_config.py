"""Loading experiment files: TOML text -> dict, with overrides and clear errors."""
from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any, Mapping, Union

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(ValueError):
    """A mistake in an experiment file.

    ``file`` is the file (or ``<dict>``), ``path`` the key path (``topology.bottleneck.rate``),
    ``msg`` the reason. ``str(err)`` is the one-line message the CLI prints.
    """

    def __init__(self, file: str, path: str, msg: str):
        self.file, self.path, self.msg = file, path, msg
        where = f"{file}: {path}: " if path else f"{file}: "
        super().__init__(where + msg)


PathOrDict = Union[str, Path, Mapping[str, Any]]

#: How deep tables and arrays may nest (experiment files need about 6 levels; the engine
#: refuses more than 64, sojourn-py's MAX_DEPTH).
MAX_DEPTH = 64
#: Experiment and sweep files larger than this are refused before they are parsed.
MAX_FILE_BYTES = 16 * 1024 * 1024


def check_depth(obj: Any, file: str, path: str = "", depth: int = 0) -> None:
    """Raises :class:`ConfigError` when tables/arrays nest deeper than :data:`MAX_DEPTH`
    (without recursing deeper than that itself, so a cyclic dict is refused too)."""
    if depth > MAX_DEPTH:
        shown = path if len(path) <= 80 else path[:60] + "…"
        raise ConfigError(file, shown, f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if isinstance(v, (Mapping, list, tuple)):
                check_depth(v, file, f"{path}.{k}" if path else str(k), depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            if isinstance(v, (Mapping, list, tuple)):
                check_depth(v, file, f"{path}[{i}]", depth + 1)


def load(source: PathOrDict) -> tuple[dict, str, Path]:
    """Returns ``(config dict, display name, base directory for relative paths)``."""
    if isinstance(source, Mapping):
        check_depth(source, "<dict>")
        return copy.deepcopy(dict(source)), "<dict>", Path.cwd()
    if not isinstance(source, (str, Path)):
        raise ConfigError(str(type(source).__name__), "", "expected an experiment file path or a dict")
    path = Path(source)
    name = str(source)
    try:
        if path.is_file() and path.stat().st_size > MAX_FILE_BYTES:
            raise ConfigError(name, "", f"file is {path.stat().st_size} bytes; experiment files are limited to {MAX_FILE_BYTES} bytes")
        if path.exists() and not path.is_file() and not path.is_dir():
            raise ConfigError(name, "", "not a regular file (a FIFO, device or socket); expected an experiment file (.toml)")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(name, "", "no such file") from None
    except IsADirectoryError:
        raise ConfigError(name, "", "is a directory, expected an experiment file (.toml)") from None
    except OSError as e:
        raise ConfigError(name, "", f"cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(name, "", "not UTF-8 text") from None
    try:
        cfg = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(name, "", f"TOML syntax error: {e}") from None
    except RecursionError:
        raise ConfigError(name, "", f"tables or arrays nested too deeply (at most {MAX_DEPTH} levels)") from None
    check_depth(cfg, name)
    return cfg, name, path.resolve().parent


def _model():
    """The engine module, whose sojourn-experiment holds the one override grammar."""
    try:
        from . import _engine as eng
    except ImportError:  # pragma: no cover - the wheel always ships the engine
        raise ImportError("overrides need sojourn's engine (sojourn._engine): run `pip install .`") from None
    return eng


def check_key(dotted: str, where: str) -> None:
    """Checks the syntax of a dotted key (``workload[1].rate``) with the engine's parser
    (crates/sojourn-experiment/src/overrides.rs); :class:`ConfigError` naming ``where``."""
    eng = _model()
    try:
        eng.check_key(dotted)
    except eng.ConfigError as e:
        raise ConfigError(where, e.path, e.msg) from None


def set_key(cfg: dict, dotted: str, value: Any, where: str = "--set") -> None:
    """Sets ``a.b.c = value`` in a nested dict (creating tables); list items as ``a[2]``.

    The engine applies it (crates/sojourn-experiment/src/overrides.rs, the one
    implementation for ``--set``, the API's ``overrides`` and sweep files): an index past
    the end appends empty tables up to it (at most 9999). Mistakes raise
    :class:`ConfigError` naming ``where`` (``--set``, a sweep file) and the key: a
    non-numeric or too large index, a path through a value that is not a table."""
    if not isinstance(dotted, str):
        raise ConfigError(where, str(dotted), "expected a dotted key such as topology.bottleneck.qdisc")
    eng = _model()
    try:
        new = eng.set_key(cfg, dotted, value)
    except eng.ConfigError as e:
        raise ConfigError(where, e.path, e.msg) from None
    cfg.clear()
    cfg.update(new)
