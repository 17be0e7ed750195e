"""``sojourn test NAME --rate DOWN[/UP] --rtt RTT --qdisc Q``: one of Flent's named tests
(python/sojourn/flent_tests.py, docs/tests.md) on a one-pair dumbbell, run once in the
simulator, written as a run directory and summarised in a table."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .._cli_common import fail
from .._config import ConfigError

TEST_EPILOG = """\
examples:
  sojourn test rrul --rate 100Mbit/20Mbit --rtt 40ms --qdisc fq_codel
  sojourn test rrul --rate 100Mbit --rtt 20ms --qdisc '{kind="pfifo",limit=1000}' --out results/rrul-fifo
  sojourn test voip --rate 10Mbit/2Mbit --rtt 40ms --qdisc pfifo --duration 30s
  flent -i results/rrul-fq_codel/rrul.flent.gz -p all_scaled -o rrul.png   (after `sojourn flent`)

The server is s0 and the client d0: downloads cross `bottleneck` (the first --rate), uploads
`reverse` (the second, default the first); each direction gets --qdisc and half of --rtt.
rtt_fair uses four pairs whose RTTs are 1x, 1.5x, 2x and 3x --rtt.
"""


def build_experiment(name: str, rate: str, rtt: str, qdisc: Any, duration: str, warmup: str, seed: int) -> dict:
    """The experiment `sojourn test` runs (a dict, as a file would hold it). Raises
    ConfigError naming the flag for a bad value."""
    from ..flent_tests import TESTS
    from ..units import parse_rate, parse_seconds

    if name not in TESTS:
        from difflib import get_close_matches

        hint = get_close_matches(name, TESTS, n=1)
        raise ConfigError("NAME", "", f"unknown test {name!r}{f' (did you mean {hint[0]!r}?)' if hint else ''}; known: {', '.join(TESTS)}")
    parts = rate.split("/")
    if len(parts) > 2:
        raise ConfigError("--rate", "", f"expected DOWN or DOWN/UP (e.g. 100Mbit/20Mbit), got {rate!r}")
    rates = []
    for r in parts:
        try:
            rates.append((r, parse_rate(r)))
        except Exception:
            raise ConfigError("--rate", "", f"{r!r} is not a rate (e.g. 100Mbit)") from None
    down, up = rates[0], rates[-1]
    try:
        rtt_s = parse_seconds(rtt)
    except Exception:
        rtt_s = -1.0
    if not rtt_s > 0:
        raise ConfigError("--rtt", "", f"expected a positive duration such as 40ms, got {rtt!r}")
    for flag, v in (("--duration", duration), ("--warmup", warmup)):
        try:
            ok = parse_seconds(v) >= 0
        except Exception:
            ok = False
        if not ok:
            raise ConfigError(flag, "", f"expected a duration such as 60s, got {v!r}")
    half_us = int(round(rtt_s * 1e6 / 2))
    # Hosts attach at 10x the fastest bottleneck (at least 1 Gbit/s), so the bottleneck is
    # the link under test.
    access = max(1e9, 10 * max(down[1], up[1]))
    topo: dict[str, Any] = {
        "kind": "dumbbell", "pairs": 1,
        "bottleneck": {"rate": down[0], "delay": f"{half_us}us", "qdisc": qdisc},
        "reverse": {"rate": up[0], "delay": f"{half_us}us", "qdisc": qdisc},
        "access": {"rate": f"{int(access)}bit", "delay": "0ms"},
    }
    if name == "rtt_fair":
        topo["pairs"] = 4
        # Sender access delays of 0, rtt/4, rtt/2 and rtt: RTTs of 1, 1.5, 2 and 3 x rtt.
        topo["pair_delays"] = [f"{int(round(rtt_s * 1e6 * f))}us" for f in (0, 0.25, 0.5, 1.0)]
    return {"name": f"{name}-{_qdisc_name(qdisc)}", "description": f"sojourn test {name} at {rate}, {rtt} RTT",
            "duration": duration, "warmup": warmup, "seed": seed, "topology": topo,
            "workload": [{"kind": name}]}


def _qdisc_name(q: Any) -> str:
    return q if isinstance(q, str) else str(q.get("kind", "qdisc")) if isinstance(q, dict) else "qdisc"


def _parse_qdisc(text: str) -> Any:
    t = text.strip()
    if t.startswith("{"):
        import tomllib

        try:
            return tomllib.loads(f"q = {t}")["q"]
        except tomllib.TOMLDecodeError as e:
            raise ConfigError("--qdisc", "", f"not a TOML inline table: {e}") from None
    return t


def table_rows(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for the printed table: per named test, its totals and ping; per
    probe workload, its RTT (or one-way delay), loss, jitter and MOS."""
    rows: list[tuple[str, str]] = []
    for key, t in (summary.get("tests") or {}).items():
        for role in ("download", "upload"):
            if f"{role}_bps" in t:
                rows.append((f"{t['test']} {role} total", f"{t[f'{role}_bps'] / 1e6:.2f} Mbit/s"))
        if "mos" in t:
            rows.append((f"{t['test']} MOS (worst stream)", f"{t['mos']:.2f}"))
    for key, p in (summary.get("probes") or {}).items():
        label = p.get("series") or key
        d = p.get("rtt_ms") or p.get("owd_up_ms")
        what = "RTT" if "rtt_ms" in p else "one-way delay"
        if d:
            rows.append((f"{label}: {what} mean / median / p99", f"{d['mean']:.1f} / {d['median']:.1f} / {d['p99']:.1f} ms"))
        rows.append((f"{label}: loss", f"{100 * p['loss']:.2f} %"))
        if p.get("jitter_ms") is not None:
            rows.append((f"{label}: jitter (RFC 3550)", f"{p['jitter_ms']:.2f} ms"))
        if p.get("mos") is not None:
            rows.append((f"{label}: loss with {p['jitter_buffer_ms']:.0f} ms buffer, R, MOS",
                         f"{100 * p['loss_with_buffer']:.2f} %, {p['r']:.1f}, {p['mos']:.2f}"))
    return rows


def cmd_test(a) -> int:
    import sojourn
    from .. import _outdir
    from ..analysis.flent import write_flent

    try:
        sojourn.check_seed(a.seed, "--seed")
        exp = build_experiment(a.name, a.rate, a.rtt, _parse_qdisc(a.qdisc), a.duration, a.warmup, a.seed or 1)
        out = Path(a.out) if a.out else Path("results") / exp["name"]
        out_dir = _outdir.prepare(str(out))
    except ConfigError as e:
        return fail(str(e))
    try:
        res = sojourn.run(exp, out=str(out))
    except ConfigError as e:
        out_dir.undo()
        msg = str(e)
        if "topology.bottleneck.qdisc" in e.path or "topology.reverse.qdisc" in e.path:
            msg = f"--qdisc: {e.msg}"
        return fail(msg)
    except BaseException:
        out_dir.undo()
        raise
    from ..analysis.flent_export import EXPORTED

    flent_file = write_flent(out) if a.name in EXPORTED else None
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=200)
    tab = Table(title=f"sojourn test {a.name}: {a.rate}, RTT {a.rtt}, {_qdisc_name(exp['topology']['bottleneck']['qdisc'])}")
    tab.add_column("metric")
    tab.add_column("value", justify="right")
    for k, v in table_rows(res.summary):
        tab.add_row(k, v)
    console.print(tab)
    print(f"results in {out}/ (summary.json, probes.parquet, flows.parquet, timeseries.parquet)"
          + (f"; Flent file {flent_file}" if flent_file else ""))
    return 0


def add_parser(sub) -> None:
    """Adds ``test`` to the ``sojourn`` command's sub-parsers."""
    import argparse

    t = sub.add_parser("test", help="run one of Flent's tests (rrul, tcp_nup, voip, ...) once on a one-pair dumbbell",
                       description="Runs a named Flent test (docs/tests.md) through --qdisc at --rate and --rtt in the "
                                   "simulator, writes a run directory with its Flent data file and prints the test's metrics.",
                       epilog=TEST_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("name", metavar="NAME", help="rrul, rrul_be, tcp_nup, tcp_ndown, tcp_upload, tcp_download, rtt_fair, voip, game")
    t.add_argument("--rate", required=True, help="DOWN[/UP] bottleneck rates, e.g. 100Mbit/20Mbit")
    t.add_argument("--rtt", required=True, help="base round-trip time, e.g. 40ms")
    t.add_argument("--qdisc", default="pfifo_fast", help='discipline of both directions: a name or a TOML table, e.g. \'{kind="pfifo",limit=1000}\' (default pfifo_fast)')
    t.add_argument("--duration", default="60s", help="test length (Flent's default 60s)")
    t.add_argument("--warmup", default="5s", help="left out of the statistics (default 5s)")
    t.add_argument("--seed", type=int, default=None)
    t.add_argument("--out", help="run directory (default results/NAME-QDISC)")
    t.set_defaults(func=cmd_test)
