"""Units in sojourn's experiment files, sweep files and command lines: sizes (``"300KiB"``,
``"1.5MB"``), rates (``"10Mbit"``) and durations (``"100ms"``, ``"1min"``).

There is one parser, the engine's (``sojourn_core::units`` in crates/sojourn-core/src/units.rs,
reached through the ``sojourn._engine`` module): Python never re-implements the unit tables, so
a change there (e.g. what ``Mbps`` means) is made once for both languages. What this module adds
is only the Python-side conveniences: numbers pass through as they are (bytes, bit/s, seconds),
and a bare numeric string is a number of the base unit. docs/experiment-files.md lists the units.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Union

__all__ = ["parse_size", "parse_rate", "parse_seconds", "typed_value"]

Number = Union[int, float]


def _engine():
    try:
        from . import _engine as eng
    except ImportError:  # pragma: no cover - the wheel always ships the engine
        raise ImportError("parsing units needs sojourn's engine (sojourn._engine): run `pip install .`") from None
    return eng


def _plain_number(s: str) -> Optional[float]:
    """``"1500"``, ``"1.5e6"`` -> float; anything with a unit -> None."""
    try:
        return float(s.replace("_", ""))
    except ValueError:
        return None


def parse_size(s: Union[str, Number]) -> float:
    """Bytes in ``"300KiB"``, ``"1GiB"``, ``"1.5MB"``, ``"1500"`` (or a number of bytes).

    B, kB/KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB (and tc's Kb, Mb, Gb) powers
    of 1024. Raises ``ValueError`` with a one-line message on bad input.
    """
    if isinstance(s, (int, float)) and not isinstance(s, bool):
        v = float(s)
    else:
        text = str(s)
        v = _plain_number(text.strip())
        if v is None:
            v = float(_engine().parse_bytes(text))
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"size {s!r} is out of range")
    return v


def parse_rate(s: Union[str, Number]) -> float:
    """bit/s in ``"1Gbit"``, ``"10Mbit"``, ``"87kbit"`` (or a number of bit/s); must be > 0."""
    if isinstance(s, (int, float)) and not isinstance(s, bool):
        v = float(s)
    else:
        v = float(_engine().parse_rate(str(s)))
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"rate {s!r} must be > 0")
    return v


def parse_seconds(v: Union[str, Number, None]) -> float:
    """Seconds in ``60``, ``"60s"``, ``"1min"``, ``"500ms"``; ``None`` is 0."""
    if v is None:
        return 0.0
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    text = str(v).strip()
    x = _plain_number(text)
    if x is not None:
        return x
    return _engine().parse_duration_ns(text) / 1e9


def typed_value(label: Any) -> Any:
    """A swept value as a number when it is one: ``"10Mbit"`` → 1e7 (bit/s), ``"5ms"`` →
    0.005 (s), ``"64KiB"`` → 65536 (bytes); other labels unchanged. ``sojourn.load``'s typed
    columns and the HTML report's parameter plots both read swept values through it."""
    if isinstance(label, (int, float)) and not isinstance(label, bool):
        return float(label)
    s = str(label).strip()
    for parse in (float, parse_rate, parse_seconds, parse_size):
        try:
            return float(parse(s))
        except (ValueError, ImportError):
            continue
    return label
