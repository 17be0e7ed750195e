"""Loading experiment files: TOML text -> dict, with overrides and clear errors."""
from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Union

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
#: The largest list index ``--set``/``set_key`` accepts (``workload[N]``): no experiment
#: has that many entries in one list, and a larger one would only build a huge list.
MAX_INDEX = 9999
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


def _split_index(part: str, where: str, dotted: str) -> tuple[str, Optional[int]]:
    """``"workload[2]"`` -> ``("workload", 2)``; ``"rate"`` -> ``("rate", None)``."""
    if "[" not in part and "]" not in part:
        if not part:
            raise ConfigError(where, dotted, "empty key name (two dots, or a leading/trailing dot)")
        return part, None
    name, bracket, rest = part.partition("[")
    if not bracket or not rest.endswith("]") or not name:
        raise ConfigError(where, dotted, f"malformed list index in {part!r}; expected NAME[N], e.g. workload[0]")
    text = rest[:-1].strip()
    if not text.isdigit():  # also refuses "-1" and "x"
        raise ConfigError(where, dotted, f"list index {text!r} in {part!r} is not a non-negative integer")
    idx = int(text)
    if idx > MAX_INDEX:
        raise ConfigError(where, dotted, f"list index {idx} is too large (at most {MAX_INDEX})")
    return name, idx


def set_key(cfg: dict, dotted: str, value: Any, where: str = "--set") -> None:
    """Sets ``a.b.c = value`` in a nested dict (creating tables); list items as ``a[2]``.

    An index past the end appends empty tables up to it (at most :data:`MAX_INDEX`), as
    sojourn-experiment's ``overrides::set_key`` does. Mistakes raise :class:`ConfigError` naming ``where`` (``--set``, a sweep
    file) and the key: a non-numeric or too large index, a path through a value that is
    not a table."""
    if not isinstance(dotted, str) or not dotted.strip():
        raise ConfigError(where, str(dotted), "expected a dotted key such as topology.bottleneck.qdisc")
    parts = dotted.strip().split(".")
    cur: Any = cfg
    walked = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        name, idx = _split_index(part.strip(), where, dotted)
        here = f"{walked}.{name}" if walked else name
        if not isinstance(cur, dict):
            raise ConfigError(where, dotted, f"{walked} is {_kind(cur)}, not a table, so it has no key {name!r}")
        if idx is None:
            if last:
                cur[name] = value
                return
            nxt = cur.setdefault(name, {})
            cur, walked = nxt, here
            continue
        seq = cur.setdefault(name, [])
        if not isinstance(seq, list):
            raise ConfigError(where, dotted, f"{here} is {_kind(seq)}, not a list, so it has no entry [{idx}]")
        while len(seq) <= idx:  # new entries are empty tables (bounded by MAX_INDEX)
            seq.append({})
        if last:
            seq[idx] = value
            return
        cur, walked = seq[idx], f"{here}[{idx}]"


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return f"a boolean ({v})"
    if isinstance(v, (int, float)):
        return f"a number ({v!r})"
    if isinstance(v, str):
        return f"a string ({v[:40]!r})"
    if isinstance(v, list):
        return "a list"
    return f"a {type(v).__name__}"
