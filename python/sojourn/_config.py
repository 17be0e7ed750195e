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


def load(source: PathOrDict) -> tuple[dict, str, Path]:
    """Returns ``(config dict, display name, base directory for relative paths)``."""
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source)), "<dict>", Path.cwd()
    path = Path(source)
    name = str(source)
    try:
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
    return cfg, name, path.resolve().parent


def set_key(cfg: dict, dotted: str, value: Any) -> None:
    """Sets ``a.b.c = value`` in a nested dict (creating tables); list items as ``a[2]``."""
    parts = dotted.split(".")
    cur: Any = cfg
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        idx = None
        if part.endswith("]") and "[" in part:
            part, _, rest = part.partition("[")
            idx = int(rest[:-1])
        if idx is None:
            if last:
                cur[part] = value
                return
            cur = cur.setdefault(part, {})
        else:
            seq = cur.setdefault(part, [])
            while len(seq) <= idx:
                seq.append({})
            if last:
                seq[idx] = value
                return
            cur = seq[idx]
