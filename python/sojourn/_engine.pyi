"""Type information for sojourn's compiled engine (crates/sojourn-py/src/lib.rs)."""
from typing import Any, Callable, Optional

class ConfigError(ValueError):
    """A mistake in an experiment: ``path`` is the key path, ``msg`` what was expected."""

    path: str
    msg: str

def validate(cfg: dict[str, Any], base_dir: str) -> dict[str, Any]:
    """Validates an experiment dict; returns name, seed, duration_s, warmup_s, repeats,
    nodes, links ([(name, qdisc description)]) and the number of workloads."""

def run(
    cfg: dict[str, Any],
    base_dir: str,
    seed: Optional[int] = None,
    progress: Optional[Callable[[float, float, int], Optional[bool]]] = None,
) -> dict[str, Any]:
    """Runs one experiment: summary_json (str) and the flows, timeseries, series_names,
    histograms and packets tables as [(name, dtype, data)] columns (packets may be None)."""

def qdiscs() -> list[tuple[str, str]]:
    """(name, summary) of every registered discipline."""

def version() -> str:
    """The engine's version."""

def parse_quantity(kind: str, text: str) -> float:
    """A quantity in the engine's unit grammar: kind "rate" (bit/s), "duration" (s) or
    "bytes"; raises ValueError with the engine's message."""
