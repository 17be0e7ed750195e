"""What every ``sojourn`` sub-command shares: the one-line error convention (message on
stderr prefixed ``sojourn:``, exit code 2; see docs/experiment-files.md). A leaf module, so
``cli``, ``sweeps`` and ``compare`` can all use it without importing each other."""
from __future__ import annotations

import sys


def fail(msg: str) -> int:
    """Prints ``sojourn: msg`` to stderr and returns exit code 2 (bad input)."""
    print(f"sojourn: {msg}", file=sys.stderr)
    return 2


def parse_set(items) -> dict:
    """``--set KEY=VALUE`` items (VALUE in TOML syntax; bare words are strings) as overrides."""
    from ._config import ConfigError, tomllib

    out = {}
    for it in items or []:
        if "=" not in it:
            raise ConfigError("--set", it, "expected KEY=VALUE (VALUE in TOML syntax, bare words are strings)")
        k, v = it.split("=", 1)
        try:
            out[k.strip()] = tomllib.loads(f"v = {v}")["v"]
        except Exception:
            out[k.strip()] = v
    return out
