"""What every ``sojourn`` sub-command shares: the one-line error convention (message on
stderr prefixed ``sojourn:``, exit code 2; see docs/experiment-files.md). A leaf module, so
the commands of ``sojourn.cli`` and ``sweeps`` (which declares ``sojourn sweep``) use it
without importing each other."""
from __future__ import annotations

import sys


def fail(msg: str) -> int:
    """Prints ``sojourn: msg`` to stderr and returns exit code 2 (bad input)."""
    print(f"sojourn: {msg}", file=sys.stderr)
    return 2


def parse_set(items) -> dict:
    """``--set KEY=VALUE`` items (VALUE in TOML syntax; bare words are strings) as overrides,
    parsed by the engine (crates/sojourn-experiment/src/overrides.rs, the one parser)."""
    from ._config import ConfigError, _model

    eng = _model()
    out = {}
    for it in items or []:
        try:
            k, v = eng.parse_set(it)
        except eng.ConfigError as e:
            raise ConfigError("--set", e.path, e.msg) from None
        out[k] = v
    return out
