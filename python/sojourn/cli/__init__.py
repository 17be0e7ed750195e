"""The ``sojourn`` command (``sojourn.cli:main``, also ``python -m sojourn``).

This module builds the parser and runs the sub-commands that are one call of the API (run,
emulate, validate, qdiscs, report, flent, --version). ``sweep`` is declared by
:mod:`sojourn.sweeps`; ``compare``, ``deploy`` and ``threshold`` have command modules of
their own beside this one (:mod:`sojourn.cli.compare`, :mod:`sojourn.cli.deploy`,
:mod:`sojourn.cli.threshold`). Bad input is one line on stderr and exit code 2
(:mod:`sojourn._cli_common`)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Mapping, NoReturn, Optional, Sequence

from .._cli_common import ALLOW_LONG, ALLOW_LONG_HELP, check_cpu, describe_estimate, fail, parse_set
from .._config import ConfigError

EPILOG = """\
examples:
  sojourn run experiments/examples/cbr-fifo-overload.toml --out results/cbr
  sojourn run exp.toml --out results/x --seed 3 --duration 60s
  sojourn run exp.toml --out results/x --set topology.bottleneck.qdisc=codel
  sojourn validate exp.toml
  sojourn validate experiments/examples/compare-aqm.sweep.toml   (checks every point)
  sojourn sweep experiments/examples/compare-aqm.sweep.toml --dry-run
  sudo sojourn emulate exp.toml --out results/live --duration 10s
  sudo sojourn emulate --cleanup
  sojourn qdiscs
  sojourn sweep experiments/examples/compare-aqm.sweep.toml --out results/cmp --jobs 2
  sojourn compare results/cmp
  sojourn deploy plan exp.toml --node client --iface eth0
  sojourn report results/cmp -o cmp.html
  sojourn threshold "bounded-pareto alpha=1.2 min=300KiB max=1GiB" --load 0.88
  sojourn test rrul --rate 100Mbit/20Mbit --rtt 40ms --qdisc fq_codel   (Flent's tests: docs/tests.md)

Results: summary.json, flows.parquet, timeseries.parquet (and packets.parquet) in --out;
docs/output-schema.md describes them. Exit code 2 means a mistake in the input.
"""


def _err(msg: str) -> int:
    return fail(msg)


_parse_set = parse_set  # one parser for every command (_cli_common)


def _set_error(e: ConfigError) -> ConfigError:
    """Errors in ``--set`` keys come from the API as ``overrides``; name the option."""
    return ConfigError("--set", e.path, e.msg) if e.file == "overrides" else e


def _discipline_failed(e: BaseException) -> int:
    """A Python discipline raised (or broke its contract) during a run: its own traceback
    (that is the user's code: docs/python-disciplines.md), then one line; exit code 1."""
    import traceback

    cause = e.__cause__
    if cause is not None:
        traceback.print_exception(type(cause), cause, cause.__traceback__, file=sys.stderr)
    print(f"sojourn: {e}", file=sys.stderr)
    return 1


def _threads_arg(v: str) -> Any:
    """``--threads``: a positive count or ``auto`` (the file's ``threads`` key takes the same)."""
    if v == "auto":
        return "auto"
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError("--threads", "", f'a positive count or "auto", not {v!r}')
    return n


def describe_threads(plan: Mapping[str, Any]) -> Optional[str]:
    """One line on how the run is cut over threads, when more than one was asked for."""
    t = plan.get("threads") or {}
    if t.get("asked", 1) <= 1:
        return None
    if t.get("one_thread_because"):
        return f"threads: {t['asked']} asked, one used: {t['one_thread_because']}"
    la = t.get("lookahead_s")
    cut = (f"{t['cut_links']} links cut, lookahead {la * 1e3:.3g} ms" if la is not None
           else "independent parts, no link cut")
    gain = f"; predicted {t['predicted_speedup']:.2g}x" if t.get("predicted_speedup") else ""
    return f"threads: {t['partitions']} partitions ({cut}{gain}); outputs as on one thread"


def cmd_run(a: argparse.Namespace) -> int:
    import sojourn
    from ..disciplines import DisciplineError
    from .. import _outdir
    from ..progress import RunProgress
    from ..analysis.report import print_run

    try:
        sojourn.check_seed(a.seed, "--seed")
        threads = None if a.threads is None else _threads_arg(a.threads)
        out_dir = _outdir.prepare(a.out)  # before any work: a bad --out is refused at once
    except ConfigError as e:
        return _err(str(e))
    try:
        overrides = _parse_set(a.set)
        if threads is not None:
            overrides["threads"] = threads
        plan = sojourn.validate(a.experiment, overrides=overrides | ({"duration": a.duration} if a.duration else {}))
        check_cpu(plan, a.experiment, a.allow_long_run)
        if not a.quiet:
            print(f"{a.experiment}: {describe_estimate(plan)}", file=sys.stderr)
            print_warnings(plan, a.experiment)
            if (t := describe_threads(plan)) is not None:
                print(f"{a.experiment}: {t}", file=sys.stderr)
        with RunProgress(Path(a.experiment).name, quiet=a.quiet) as prog:
            # The time series and packet log stream into a staging directory in --out while
            # the run proceeds (memory flat for any duration); `write` publishes it at once.
            res = sojourn._run_staged(a.experiment, seed=a.seed, duration=a.duration, overrides=overrides,
                                      progress=prog, out=a.out)
    except ConfigError as e:
        out_dir.undo()
        return _err(str(_set_error(e)))
    except KeyboardInterrupt:
        out_dir.undo()
        print("sojourn: interrupted; nothing written", file=sys.stderr)
        return 130
    except DisciplineError as e:
        out_dir.undo()
        return _discipline_failed(e)
    except BaseException:
        out_dir.undo()
        raise
    try:
        out = res.write(a.out, extra=None if a.no_report else (lambda staging: _write_reports(res, staging)))
    except KeyboardInterrupt:
        res.discard()
        out_dir.undo()
        print("sojourn: interrupted; nothing written", file=sys.stderr)
        return 130
    if not a.quiet:
        print_run(res)
        print(f"results in {out}/ (summary.json, flows.parquet, timeseries.parquet{', report.html, report.md' if not a.no_report else ''})")
    return 0


def _write_reports(res, staging: Path) -> None:
    """report.md with its plots and the self-contained report.html, written into the run's
    staging directory so they appear together with the results (results.Result.write)."""
    from ..analysis.htmlreport import write_report
    from ..analysis.report import write_run_report

    write_run_report(res, staging)
    write_report([staging], out=staging / "report.html", source=res.summary.get("experiment"))


def cmd_report(a: argparse.Namespace) -> int:
    from ..analysis.htmlreport import write_report

    try:
        path = write_report(a.dirs, out=Path(a.output) if a.output else None, title=a.title, end_margin=a.end_margin)
    except (FileNotFoundError, KeyError, ValueError) as e:
        return _err(str(e).strip("'\""))
    print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_flent(a: argparse.Namespace) -> int:
    from ..analysis.flent import write_flent

    if a.output and len(a.runs) > 1:
        return _err("flent: -o/--output takes one RUN_DIR")
    for d in a.runs:
        try:
            path = write_flent(d, out=a.output, link=a.link)
        except (FileNotFoundError, KeyError, ValueError) as e:
            return _err(str(e).strip("'\""))
        print(f"wrote {path}", file=sys.stderr)
    return 0


class _Terminated(BaseException):
    """Raised by the SIGTERM handler during a live run (cleanup, then exit 143)."""


def cmd_emulate(a: argparse.Namespace) -> int:
    import signal

    import sojourn
    from .. import _outdir
    from ..disciplines import DisciplineError
    from ..progress import RunProgress
    from ..analysis.report import print_run

    if a.cleanup:
        if a.experiment:
            return _err("emulate --cleanup takes no experiment file")
        try:
            removed, errors = sojourn.emulate_cleanup()
        except (sojourn.PrivilegeError, sojourn.EmulateError) as e:
            return _err(str(e))
        for e in errors:
            print(f"sojourn: cleanup: {e}", file=sys.stderr)
        if not a.quiet:
            print(f"removed {len(removed)} namespace(s) of dead runs" + (f": {' '.join(removed)}" if removed else ""))
        return 1 if errors else 0
    if not a.experiment:
        return _err("emulate: an experiment file is required (or --cleanup)")
    if not a.out:
        return _err("emulate: --out DIR is required")
    try:
        out_dir = _outdir.prepare(a.out)  # before any work: a bad --out is refused at once
    except ConfigError as e:
        return _err(str(e))

    def on_term(signum, frame):
        raise _Terminated()

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        overrides = _parse_set(a.set)
        # Everything the file or this kernel cannot honour is refused before anything starts.
        if a.kernel:
            from .. import kernel_engine

            kernel_engine.check(a.experiment, overrides=overrides, duration=a.duration)
        else:
            sojourn.emulate_check(a.experiment, overrides=overrides, duration=a.duration)
        with RunProgress(Path(a.experiment).name + (" (kernel)" if a.kernel else " (live)"), quiet=a.quiet) as prog:
            # The time series streams into a staging directory of a.out while the run
            # proceeds; the results and the report become visible together below.
            res = sojourn._emulate_staged(a.experiment, seed=a.seed, duration=a.duration, overrides=overrides,
                                          progress=prog, kernel=a.kernel, out=a.out)
    except ConfigError as e:
        out_dir.undo()
        return _err(str(e))
    except sojourn.PrivilegeError as e:
        out_dir.undo()
        return _err(str(e))
    except sojourn.EmulateError as e:
        out_dir.undo()
        print(f"sojourn: emulate failed: {e}", file=sys.stderr)
        return 1
    except DisciplineError as e:
        out_dir.undo()
        return _discipline_failed(e)
    except KeyboardInterrupt:
        out_dir.undo()
        print("sojourn: interrupted; namespaces removed, nothing written", file=sys.stderr)
        return 130
    except _Terminated:
        out_dir.undo()
        print("sojourn: terminated; namespaces removed, nothing written", file=sys.stderr)
        return 143
    except BaseException:
        out_dir.undo()
        raise
    finally:
        signal.signal(signal.SIGTERM, old)
    out = res.write(a.out, extra=None if a.no_report else (lambda staging: _write_reports(res, staging)))
    if not a.quiet:
        print_run(res)
        print(f"results in {out}/ (summary.json, flows.parquet, timeseries.parquet{', report.md' if not a.no_report else ''})")
    return 0


def print_warnings(plan: dict, source: str, shown: int = 5) -> None:
    """The warnings tc would print applying the file (HTB's quantum/r2q), on stderr: the
    first ``shown`` and a count of the rest (a 10,000-subscriber tree may have thousands)."""
    w = plan.get("warnings") or []
    for line in w[:shown]:
        print(f"{source}: warning: {line}", file=sys.stderr)
    if len(w) > shown:
        print(f"{source}: warning: ... and {len(w) - shown} more like these (give the classes a `quantum` "
              "or the tree an `r2q`)", file=sys.stderr)


def cmd_validate(a: argparse.Namespace) -> int:
    import sojourn

    from ..progress import format_span

    try:
        from .. import sweeps as _sweep

        if _sweep.is_sweep_file(a.experiment):
            # A sweep file: every point it expands to is checked by the engine.
            sp = _sweep.load_plan(a.experiment)
            sp.common.update(_parse_set(a.set))
            cpu_s = _sweep.validate_plan(sp, allow_long=a.allow_long_run)
            print(f"{a.experiment}: ok — sweep {sp.name!r}, {len(sp.points)} points x {len(sp.seeds)} seeds "
                  f"= {len(sp.runs())} runs, every point valid; CPU ~{format_span(cpu_s)} estimated in all")
            print("\n".join(_sweep.describe_plan(sp)))
            return 0
        overrides = _parse_set(a.set)
        if a.threads is not None:
            overrides["threads"] = _threads_arg(a.threads)
        plan = sojourn.validate(a.experiment, overrides=overrides)
        check_cpu(plan, a.experiment, a.allow_long_run)
    except ConfigError as e:
        return _err(str(_set_error(e)))
    print(f"{a.experiment}: ok — {plan['name']!r}, {plan['duration_s']:g} s, {len(plan['nodes'])} nodes, "
          f"{len(plan['links'])} links, {plan['workloads']} workload(s), {describe_estimate(plan)}")
    print_warnings(plan, a.experiment)
    if (t := describe_threads(plan)) is not None:
        print(f"{a.experiment}: {t}")
    if plan.get("isp"):
        from ..isp import describe as _isp_describe

        print("\n".join(_isp_describe(plan["isp"])))
    tc = plan.get("links_tc", {})

    def applied(name: str, q: str) -> str:
        if q.startswith("mac80211 "):  # a direction of the Wi-Fi medium: no tc qdisc (docs/wifi.md)
            return "   (the Wi-Fi medium's queues, docs/wifi.md)"
        return f"   (as Linux applies it: {tc[name]})" if name in tc and tc[name] != q else ""

    # A large topology (a 10,000-pair dumbbell has 40,002 links) lists its first links and
    # then counts the rest by discipline, instead of printing a line per link.
    shown = 24
    for name, q in plan["links"][:shown]:
        print(f"  {name:<16} {q}" + applied(name, q))
    rest: dict[str, int] = {}
    for name, q in plan["links"][shown:]:
        key = q + applied(name, q)
        rest[key] = rest.get(key, 0) + 1
    if rest:
        print(f"  ... {len(plan['links']) - shown} more links: "
              + "; ".join(f"{n} x {k.strip()}" for k, n in rest.items()))
    return 0


def cmd_qdiscs(a: argparse.Namespace) -> int:
    import sojourn

    for name, summary in sojourn.qdiscs():
        print(f"{name:<18} {summary}")
    return 0


class _Parser(argparse.ArgumentParser):
    """Usage mistakes are one line (``sojourn run: error: ...``) and exit 2, like every other
    bad input; ``--help`` shows the usage."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        self.exit(2, f"sojourn: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="sojourn",
        description="sojourn: simulate, compare and deploy AQM and packet-scheduling disciplines.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    r = sub.add_parser("run", help="run one experiment and write its results",
                       epilog="examples:\n  sojourn run experiments/examples/cbr-fifo-overload.toml --out results/cbr --seed 2\n"
                              "  sojourn run exp.toml --out results/year --duration 8760h --allow-long-run\n"
                              "  sojourn run big.toml --out results/big --threads auto   (one run cut over every core)\n\n"
                              "Before anything is written, the run's memory estimate is held against what this process\n"
                              "may have (RLIMIT_AS, the cgroup's memory limit, MemAvailable; SOJOURN_MEMORY=<size>\n"
                              "overrides) and its CPU-time estimate against a CPU-day; both are printed at the start\n"
                              "(docs/limits.md).",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("experiment", help="experiment file (TOML)")
    r.add_argument("--out", required=True, help="output directory (created; existing result files are replaced)")
    r.add_argument("--seed", type=int, help="master seed (default: the file's `seed`, else 1)")
    r.add_argument("--duration", help='override the duration, e.g. "60s"')
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a key, e.g. topology.bottleneck.qdisc=codel (repeatable)")
    r.add_argument("--threads", metavar="N",
                   help='cut this one run over N threads ("auto": every core; default: the file\'s `threads`, else 1); '
                        "outputs are byte-identical to one thread; a run that cannot be cut, or whose cut is predicted "
                        "not to pay, says why and runs on one "
                        "(docs/engine.md, \"One run on many cores\")")
    r.add_argument("--quiet", action="store_true", help="no progress bar and no tables")
    r.add_argument("--no-report", action="store_true", help="do not write report.html, report.md and plots")
    r.add_argument(ALLOW_LONG, action="store_true", help=ALLOW_LONG_HELP)
    r.set_defaults(func=cmd_run)

    e = sub.add_parser("emulate", help="run one experiment live: real Linux TCP in namespaces through sojourn's disciplines (root)",
                       epilog="examples:\n"
                              "  sudo sojourn emulate experiments/emulate/fq-codel.toml --out results/live\n"
                              "  sudo sojourn emulate exp.toml --out results/live --duration 10s --set transport.cc=bbr\n"
                              "  sudo sojourn emulate --cleanup        # remove what a killed run left behind\n"
                              "  sudo sojourn emulate exp.toml --out results/kernel --kernel   # the kernel's qdiscs + nft\n"
                              "  sudo sojourn emulate experiments/tests/web-live.toml --out results/web   # rpm, web, video too\n\n"
                              "Same outputs as `run` (summary.json has \"engine\": \"emulate\"); docs/emulate.md says\n"
                              "what is honoured live and what is refused. Takes `duration` of wall-clock time.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("experiment", nargs="?", help="experiment file (TOML)")
    e.add_argument("--out", help="output directory (created; existing result files are replaced)")
    e.add_argument("--seed", type=int, help="master seed (default: the file's `seed`, else 1)")
    e.add_argument("--duration", help='override the duration (wall-clock time), e.g. "10s"')
    e.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a key (repeatable)")
    e.add_argument("--quiet", action="store_true", help="no progress bar and no tables")
    e.add_argument("--no-report", action="store_true", help="do not write report.md and plots")
    e.add_argument("--cleanup", action="store_true", help="remove namespaces left by killed runs, then exit")
    e.add_argument("--kernel", action="store_true",
                   help="the kernel's own qdiscs and nft rules on the hosts' devices (sojourn deploy apply) instead "
                        "of sojourn's disciplines; \"engine\": \"kernel\" (docs/deploy.md)")
    e.set_defaults(func=cmd_emulate)

    v = sub.add_parser("validate", help="check an experiment or sweep file without running it",
                       epilog="examples:\n  sojourn validate exp.toml\n"
                              "  sojourn validate experiments/examples/compare-aqm.sweep.toml  (every point)\n"
                              "  sojourn validate exp.toml --set duration=8760h --allow-long-run\n"
                              "  sojourn validate big.toml --threads 4   (how the run would be cut, and its predicted gain)\n\n"
                              "Prints the run's memory and CPU-time estimates; refuses what `run` would refuse:\n"
                              "memory beyond what this process may have, CPU time beyond a CPU-day (docs/limits.md).",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("experiment", help="experiment file, or sweep file (*.sweep.toml: every point is checked)")
    v.add_argument("--set", action="append", metavar="KEY=VALUE")
    v.add_argument("--threads", metavar="N",
                   help='check the run as cut over N threads ("auto": every core): the plan, its predicted '
                        "speed-up or why it stays on one thread, and its memory")
    v.add_argument(ALLOW_LONG, action="store_true", help=ALLOW_LONG_HELP)
    v.set_defaults(func=cmd_validate)

    rp = sub.add_parser("report", help="write one self-contained HTML report (interactive plots) for a run or a sweep",
                        description="Writes a single HTML file with the summary tables, the experiment and versions, and "
                                    "interactive plots (time series, CDFs of FCT and per-packet sojourn, FCT against size with "
                                    "age-based variants paired, Lorenz curves, throughput against latency). It needs no "
                                    "network access to open. `run` and `compare` write it by default.",
                        epilog="examples:\n  sojourn report results/cbr\n  sojourn report results/aqm -o aqm.html\n"
                               "  sojourn report results/run-a results/run-b -o ab.html --title 'A against B'\n\n"
                               "docs/reports.md describes every plot; docs/statistics.md which interval is which.",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rp.add_argument("dirs", nargs="+", metavar="DIR", help="a run directory, a sweep directory, or several run directories")
    rp.add_argument("-o", "--output", metavar="FILE", help="the HTML file to write (default: DIR/report.html)")
    rp.add_argument("--title", help="the report's title (default: the sweep's or the experiment's name)")
    rp.add_argument("--end-margin", metavar="DURATION",
                    help='leave out flows that end in the last DURATION of their run (default: the sweep file\'s end_margin)')
    rp.set_defaults(func=cmd_report)

    fl = sub.add_parser("flent", help="export a run's time series as a Flent data file (.flent.gz)",
                        description="Writes the bottleneck's throughput and queueing delay (and per-flow goodput, when "
                                    "recorded) as a Flent data file of the tcp_1up test, so `flent -i FILE -p totals` "
                                    "plots it next to testbed measurements.",
                        epilog="examples:\n  sojourn flent results/cbr\n  sojourn flent results/aqm/runs/codel/seed-1 -o codel.flent.gz\n"
                               "  flent -i codel.flent.gz -p totals -o codel.png",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    fl.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (with summary.json and timeseries.parquet)")
    fl.add_argument("-o", "--output", metavar="FILE", help="the file to write (one run only; default RUN_DIR/<experiment>.flent.gz)")
    fl.add_argument("--link", help="the link to export (default: the busiest)")
    fl.set_defaults(func=cmd_flent)

    q = sub.add_parser("qdiscs", help="list the disciplines an experiment can use")
    q.set_defaults(func=cmd_qdiscs)

    try:
        from . import compare as _compare
        from .. import sweeps as _sweeps

        _sweeps.add_parser(sub)
        _compare.add_parser(sub)
    except ImportError:  # pragma: no cover
        pass
    from . import deploy as _deploy

    _deploy.add_parser(sub)
    from . import test as _test

    _test.add_parser(sub)
    # The threshold command's module (scipy.stats, ~0.6 s to import) loads when it runs,
    # not with the parser every other command builds.
    t = sub.add_parser("threshold", help="optimal 2LPS/MLPS threshold from a flow-size distribution and a load", add_help=False)
    t.add_argument("args", nargs=argparse.REMAINDER)
    t.set_defaults(func=_cmd_threshold)
    return p


def _threshold(args: Sequence[str]) -> int:
    from . import threshold as _thr

    return _thr.main(list(args))


def _cmd_threshold(a) -> int:
    return _threshold(a.args)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "threshold":
        # `threshold` has its own parser (and its own --help): hand it every word, even a
        # leading -h/--help, which the top-level parser would otherwise take.
        return _threshold(args[1:])
    p = build_parser()
    a = p.parse_args(args)
    if a.version:
        import sojourn

        from .. import _engine_info

        print(f"sojourn {sojourn.__version__} ({_engine_info.describe()})")
        return 0
    if not getattr(a, "cmd", None):
        p.print_help()
        print("sojourn: no command given (see sojourn --help)", file=sys.stderr)
        return 2
    try:
        return a.func(a)
    except BrokenPipeError:
        # `sojourn validate big.toml | head`: the reader left. Quiet, as a Unix tool killed
        # by SIGPIPE is (exit 128 + 13), without a traceback; stdout goes to /dev/null so
        # the interpreter's final flush does not raise again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141

