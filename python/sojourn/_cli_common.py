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


#: A run estimated beyond this much CPU time is refused unless ``--allow-long-run`` is
#: given (docs/limits.md, "How long a run takes"): a CPU-day.
CPU_BUDGET_S = 86_400.0

#: The option that lets a run beyond :data:`CPU_BUDGET_S` start, and its help.
ALLOW_LONG = "--allow-long-run"
ALLOW_LONG_HELP = ("run even when the CPU-time estimate exceeds a CPU-day (printed at the start and by "
                   "`sojourn validate`; docs/limits.md), e.g. --duration 8760h --allow-long-run")


def describe_estimate(plan: dict) -> str:
    """What validation estimated for a run: ``memory ~202 MB estimated, CPU time ~2s``."""
    from .dists import format_bytes
    from .progress import format_span

    return (f"memory ~{format_bytes(plan['memory_estimate_bytes'], digits=3)} estimated, "
            f"CPU time ~{format_span(plan['cpu_estimate_s'])} (docs/limits.md)")


def check_cpu(plan: dict, where: str, allow_long: bool) -> None:
    """Raises :class:`ConfigError` (key ``duration``) when the run's CPU estimate exceeds
    :data:`CPU_BUDGET_S` and ``allow_long`` is false: one line with both numbers."""
    from ._config import ConfigError
    from .progress import format_span

    need = plan["cpu_estimate_s"]
    if allow_long or need <= CPU_BUDGET_S:
        return
    raise ConfigError(where, "duration",
                      f"{plan['duration_s']:g} s of simulated time at ~{plan['link_packets_per_s']:.3g} link packets "
                      f"per simulated second needs ~{format_span(need)} of CPU time ({need:.3g} s), beyond the budget "
                      f"of a CPU-day ({CPU_BUDGET_S:.0f} s); shorten the duration or pass "
                      f"{ALLOW_LONG} to run it anyway (docs/limits.md)")
