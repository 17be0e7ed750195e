"""``sojourn test NAME --rate DOWN[/UP] --rtt RTT --qdisc Q [--qdisc Q2 ...] [--engine E]``: one of
Flent's named tests (python/sojourn/flent_tests.py, docs/tests.md) on a one-pair dumbbell, run
once per discipline in the simulator, through ``emulate`` (kernel TCP, sojourn's disciplines in
the forwarder) or ``emulate --kernel`` (the kernel's qdiscs on the hosts), written as run
directories and summarised in a table; several disciplines get one comparison table and a
plot of the probes' RTT distributions side by side."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

from .._cli_common import fail
from .._config import ConfigError

TEST_EPILOG = """\
examples:
  sojourn test rrul --rate 100Mbit/20Mbit --rtt 40ms --qdisc fq_codel
  sojourn test rrul --rate 100Mbit --rtt 20ms --qdisc '{kind="pfifo",limit=1000}' --out results/rrul-fifo
  sojourn test voip --rate 10Mbit/2Mbit --rtt 40ms --qdisc pfifo --duration 30s
  sojourn test rrul --rate 100Mbit/20Mbit --rtt 40ms --qdisc pfifo,fq_codel,cake --out results/rrul
  sudo sojourn test rrul --rate 100Mbit/20Mbit --rtt 40ms --qdisc pfifo,fq_codel,cake --engine emulate --duration 30s
  sudo sojourn test rrul --rate 20Mbit/5Mbit --rtt 20ms --qdisc pfifo --engine kernel --duration 20s
  flent -i results/rrul-fq_codel/rrul.flent.gz -p all_scaled -o rrul.png

--qdisc may be repeated or list names separated by commas: one run per discipline, in
DIR/<discipline>/ (DIR = --out, default results/NAME-compare), then a comparison table,
DIR/comparison.md and DIR/rtt_cdf.png. --engine emulate and kernel need root and take
--duration of wall-clock time each; kernel runs the kernel's own qdiscs on the two hosts'
devices (this machine's kernel has pfifo, bfifo, pfifo_fast, tbf, htb; no fq_codel or cake),
on a two-host graph instead of the dumbbell (rtt_fair needs the dumbbell's four pairs).

The server is s0 and the client d0: downloads cross `bottleneck` (the first --rate), uploads
`reverse` (the second, default the first); each direction gets --qdisc and half of --rtt.
rtt_fair uses four pairs whose RTTs are 1x, 1.5x, 2x and 3x --rtt.
"""


def build_experiment(name: str, rate: str, rtt: str, qdisc: Any, duration: str, warmup: str, seed: int,
                     graph: bool = False) -> dict:
    """The experiment `sojourn test` runs (a dict, as a file would hold it). Raises
    ConfigError naming the flag for a bad value. ``graph``: the two hosts joined directly
    (the queues on their devices, as ``emulate --kernel`` needs) instead of the dumbbell."""
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
    if graph:
        if name == "rtt_fair":
            raise ConfigError("--engine", "", "rtt_fair needs the dumbbell's four pairs; the kernel engine runs "
                              "the two-host graph (use --engine simulate or emulate)")
        # s0 serves, d0 is the client, as on the dumbbell; each direction's queue sits on
        # its sending host's device.
        topo = {"kind": "graph", "nodes": ["s0", "d0"],
                "links": [{"name": "bottleneck", "from": "s0", "to": "d0", "rate": down[0],
                           "delay": f"{half_us}us", "qdisc": qdisc,
                           "reverse": {"rate": up[0], "qdisc": qdisc}}]}
    elif name == "rtt_fair":
        topo["pairs"] = 4
        # Sender access delays of 0, rtt/4, rtt/2 and rtt: RTTs of 1, 1.5, 2 and 3 x rtt.
        topo["pair_delays"] = [f"{int(round(rtt_s * 1e6 * f))}us" for f in (0, 0.25, 0.5, 1.0)]
    return {"name": f"{name}-{_qdisc_name(qdisc)}", "description": f"sojourn test {name} at {rate}, {rtt} RTT",
            "duration": duration, "warmup": warmup, "seed": seed, "topology": topo,
            "workload": [{"kind": name, "server": "s0", "client": "d0"} if graph else {"kind": name}]}


def _qdisc_name(q: Any) -> str:
    return q if isinstance(q, str) else str(q.get("kind", "qdisc")) if isinstance(q, dict) else "qdisc"


def split_qdiscs(values: list[str]) -> list[str]:
    """The disciplines of repeated ``--qdisc`` flags, each split at the commas outside
    braces: ``["pfifo,fq_codel", '{kind="pfifo",limit=100}']`` → three."""
    out: list[str] = []
    for v in values:
        depth, cur = 0, ""
        for ch in v:
            depth += (ch == "{") - (ch == "}")
            if ch == "," and depth == 0:
                out.append(cur.strip())
                cur = ""
            else:
                cur += ch
        out.append(cur.strip())
    if any(not q for q in out):
        raise ConfigError("--qdisc", "", f"an empty discipline in {', '.join(values)!r}")
    return out


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


def _label(q: Any) -> str:
    """A directory-safe name for a discipline: its kind, with the table's other keys."""
    if isinstance(q, str):
        return q
    rest = "-".join(f"{k}{v}" for k, v in q.items() if k != "kind")
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{q.get('kind', 'qdisc')}{'-' + rest if rest else ''}")


def _run_one(a, exp: dict, out: Path) -> Any:
    """One run of ``exp`` into ``out`` with the chosen engine; returns its Result."""
    import sojourn

    if a.engine == "simulate":
        return sojourn.run(exp, out=str(out))
    kernel = a.engine == "kernel"
    if kernel:
        from .. import kernel_engine

        kernel_engine.check(exp)
    else:
        sojourn.emulate_check(exp)
    from ..progress import RunProgress

    with RunProgress(f"{exp['name']} ({a.engine})", quiet=False) as prog:
        res = sojourn._emulate_staged(exp, kernel=kernel, progress=prog, out=str(out))
    res.write(str(out))
    return res


def cmd_test(a) -> int:
    import sojourn
    from .. import _outdir
    from ..analysis.flent import write_flent

    try:
        sojourn.check_seed(a.seed, "--seed")
        qdiscs = [_parse_qdisc(q) for q in split_qdiscs(a.qdisc or ["pfifo_fast"])]
        graph = a.engine == "kernel"
        exps = [build_experiment(a.name, a.rate, a.rtt, q, a.duration, a.warmup, a.seed or 1, graph=graph)
                for q in qdiscs]
        labels = [_label(q) for q in qdiscs]
        if len(set(labels)) != len(labels):
            raise ConfigError("--qdisc", "", f"the same discipline twice: {', '.join(labels)}")
        if len(exps) == 1:
            outs = [Path(a.out) if a.out else Path("results") / exps[0]["name"]]
            top = None
        else:
            top = Path(a.out) if a.out else Path("results") / f"{a.name}-compare"
            outs = [top / lab for lab in labels]
        if a.engine != "simulate":
            from ..deploy import apply as _apply

            try:
                _apply.require_privilege(f"test --engine {a.engine}")
            except _apply.PrivilegeError as e:
                raise ConfigError("--engine", "", str(e)) from None
        top_dir = _outdir.prepare(str(top)) if top else None
        out_dirs = [_outdir.prepare(str(o)) for o in outs]
    except ConfigError as e:
        return fail(str(e))
    results = []
    for i, (exp, out, od) in enumerate(zip(exps, outs, out_dirs)):
        try:
            results.append(_run_one(a, exp, out))
        except ConfigError as e:
            for d in out_dirs:
                d.undo()
            if top_dir:
                top_dir.undo()
            msg = str(e)
            if ".qdisc" in e.path and "topology" in e.path:
                msg = f"--qdisc: {e.msg}"
            return fail(msg)
        except (sojourn.PrivilegeError, sojourn.EmulateError) as e:
            # The disciplines that finished keep their complete results; the failed one's
            # directory and those not run yet are removed (nothing half-written).
            for d in out_dirs[i:]:
                d.undo()
            if top_dir and i == 0:
                top_dir.undo()
            done = f" (finished: {', '.join(str(o) for o in outs[:i])})" if i else ""
            print(f"sojourn: test --engine {a.engine} failed on {labels[i]}: {e}{done}", file=sys.stderr)
            return 1
        except BaseException:
            od.undo()
            raise
    from ..analysis.flent_export import EXPORTED

    flent_files = [write_flent(out) if a.name in EXPORTED else None for out in outs]
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=200)
    engine = "" if a.engine == "simulate" else f", {a.engine}"
    if len(results) == 1:
        tab = Table(title=f"sojourn test {a.name}: {a.rate}, RTT {a.rtt}, {labels[0]}{engine}")
        tab.add_column("metric")
        tab.add_column("value", justify="right")
        for k, v in table_rows(results[0].summary):
            tab.add_row(k, v)
        console.print(tab)
        print(f"results in {outs[0]}/ (summary.json, probes.parquet, flows.parquet, timeseries.parquet)"
              + (f"; Flent file {flent_files[0]}" if flent_files[0] else ""))
        return 0
    rows = comparison_rows([r.summary for r in results])
    tab = Table(title=f"sojourn test {a.name}: {a.rate}, RTT {a.rtt}{engine}")
    tab.add_column("metric")
    for lab in labels:
        tab.add_column(lab, justify="right")
    for k, vals in rows:
        tab.add_row(k, *vals)
    console.print(tab)
    md = [f"# sojourn test {a.name}: {a.rate}, RTT {a.rtt}{engine}", "",
          "| metric | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    md += ["| " + k + " | " + " | ".join(vals) + " |" for k, vals in rows]
    (top / "comparison.md").write_text("\n".join(md) + "\n")
    png = rtt_cdf_plot(outs, labels, top / "rtt_cdf.png", f"{a.name}: {a.rate}, RTT {a.rtt}{engine}")
    print(f"results in {top}/ ({', '.join(labels)}; comparison.md" + (", rtt_cdf.png" if png else "") + ")")
    if all(flent_files):
        print("Flent's own plots of all of them: flent " + " ".join(f"-i {f}" for f in flent_files)
              + " -p ping_cdf -o ping_cdf.png")
    return 0


def comparison_rows(summaries: list[dict]) -> list[tuple[str, list[str]]]:
    """The metrics of :func:`table_rows` side by side, one column per run (``-`` where a
    run lacks one), in the order they first appear."""
    per = [dict(table_rows(s)) for s in summaries]
    keys: list[str] = []
    for d in per:
        keys += [k for k in d if k not in keys]
    return [(k, [d.get(k, "-") for d in per]) for k in keys]


def rtt_cdf_plot(outs: list[Path], labels: list[str], path: Path, title: str) -> Optional[Path]:
    """The distribution of every probe's round trip (or up one-way delay), one line per run
    and probe kind, as Flent's ``ping_cdf`` draws it; ``None`` if no run has probes."""
    import pandas as pd

    frames = []
    for out, lab in zip(outs, labels):
        f = out / "probes.parquet"
        if not f.exists():
            continue
        p = pd.read_parquet(f)
        col = "rtt_ns" if p["rtt_ns"].notna().any() else "owd_up_ns"
        p = p[p[col].notna() & ~p["lost"].astype(bool)]
        for mode, g in p.groupby("mode", observed=True):
            frames.append((lab, str(mode), g[col].to_numpy() / 1e6))
    if not frames:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from matplotlib.ticker import ScalarFormatter

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours = {lab: f"C{i}" for i, lab in enumerate(labels)}
    modes = sorted({m for _, m, _ in frames})
    for lab, mode, v in frames:
        v = np.sort(v)
        ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", color=colours[lab],
                linestyle=("-", "--", ":", "-.")[modes.index(mode) % 4], label=f"{lab} ({mode})")
    lo = min(float(v.min()) for _, _, v in frames if len(v))
    hi = max(float(v.max()) for _, _, v in frames if len(v))
    if lo > 0 and hi / lo >= 3:
        # Latencies that span decades (a bloated FIFO beside FQ-CoDel): log scale, ticks at
        # round values instead of powers of ten.
        from matplotlib.ticker import NullFormatter

        ax.set_xscale("log")
        ax.set_xticks([t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000) if lo <= t <= hi])
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("probe latency (ms, log scale)")
    else:
        ax.set_xlabel("probe latency (ms)")
    ax.set_ylabel("cumulative probability")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def add_parser(sub) -> None:
    """Adds ``test`` to the ``sojourn`` command's sub-parsers."""
    import argparse

    t = sub.add_parser("test", help="run one of Flent's tests (rrul, tcp_nup, voip, ...) on a one-pair dumbbell, "
                                    "per discipline, in any engine",
                       description="Runs a named Flent test (docs/tests.md) through each --qdisc at --rate and --rtt in "
                                   "the simulator (or live: --engine), writes a run directory with its Flent data file "
                                   "per discipline and prints the test's metrics side by side.",
                       epilog=TEST_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("name", metavar="NAME", help="rrul, rrul_be, tcp_nup, tcp_ndown, tcp_upload, tcp_download, rtt_fair, voip, game")
    t.add_argument("--rate", required=True, help="DOWN[/UP] bottleneck rates, e.g. 100Mbit/20Mbit")
    t.add_argument("--rtt", required=True, help="base round-trip time, e.g. 40ms")
    t.add_argument("--qdisc", action="append", help='discipline of both directions: a name or a TOML table, e.g. '
                   '\'{kind="pfifo",limit=1000}\'; repeat it or separate names by commas to compare (default pfifo_fast)')
    t.add_argument("--engine", choices=["simulate", "emulate", "kernel"], default="simulate",
                   help="simulate (default), emulate (kernel TCP through sojourn's forwarder) or kernel (the "
                        "kernel's qdiscs); the live engines need root and take --duration of wall-clock time")
    t.add_argument("--duration", default="60s", help="test length (Flent's default 60s)")
    t.add_argument("--warmup", default="5s", help="left out of the statistics (default 5s)")
    t.add_argument("--seed", type=int, default=None)
    t.add_argument("--out", help="run directory (default results/NAME-QDISC; with several disciplines "
                                 "results/NAME-compare, one subdirectory each)")
    t.set_defaults(func=cmd_test)
