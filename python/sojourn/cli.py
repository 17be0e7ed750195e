"""The ``sojourn`` command."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn, Optional, Sequence

from ._cli_common import fail
from ._config import ConfigError

EPILOG = """\
examples:
  sojourn run experiments/examples/cbr-fifo-overload.toml --out results/cbr
  sojourn run exp.toml --out results/x --seed 3 --duration 60s
  sojourn run exp.toml --out results/x --set topology.bottleneck.qdisc=codel
  sojourn validate exp.toml
  sojourn qdiscs
  sojourn sweep experiments/examples/compare-aqm.sweep.toml --out results/cmp --jobs 2
  sojourn compare results/cmp
  sojourn deploy plan exp.toml --node client --iface eth0
  sojourn threshold "bounded-pareto alpha=1.2 min=300KiB max=1GiB" --load 0.88

Results: summary.json, flows.parquet, timeseries.parquet (and packets.parquet) in --out;
docs/output-schema.md describes them. Exit code 2 means a mistake in the input.
"""


def _err(msg: str) -> int:
    return fail(msg)


def _parse_set(items: Sequence[str]) -> dict:
    from ._config import tomllib

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


def _set_error(e: ConfigError) -> ConfigError:
    """Errors in ``--set`` keys come from the API as ``overrides``; name the option."""
    return ConfigError("--set", e.path, e.msg) if e.file == "overrides" else e


def cmd_run(a: argparse.Namespace) -> int:
    import sojourn
    from . import _outdir
    from .progress import RunProgress
    from .report import print_run, write_run_report

    try:
        sojourn.check_seed(a.seed, "--seed")
        out_dir = _outdir.prepare(a.out)  # before any work: a bad --out is refused at once
    except ConfigError as e:
        return _err(str(e))
    try:
        overrides = _parse_set(a.set)
        sojourn.validate(a.experiment, overrides=overrides | ({"duration": a.duration} if a.duration else {}))
        with RunProgress(Path(a.experiment).name, quiet=a.quiet) as prog:
            res = sojourn.run(a.experiment, seed=a.seed, duration=a.duration, overrides=overrides, progress=prog)
    except ConfigError as e:
        out_dir.undo()
        return _err(str(_set_error(e)))
    except KeyboardInterrupt:
        out_dir.undo()
        print("sojourn: interrupted; nothing written", file=sys.stderr)
        return 130
    except BaseException:
        out_dir.undo()
        raise
    out = res.write(a.out, extra=None if a.no_report else (lambda staging: write_run_report(res, staging)))
    if not a.quiet:
        print_run(res)
        print(f"results in {out}/ (summary.json, flows.parquet, timeseries.parquet{', report.md' if not a.no_report else ''})")
    return 0


def cmd_validate(a: argparse.Namespace) -> int:
    import sojourn

    try:
        plan = sojourn.validate(a.experiment, overrides=_parse_set(a.set))
    except ConfigError as e:
        return _err(str(_set_error(e)))
    print(f"{a.experiment}: ok — {plan['name']!r}, {plan['duration_s']:g} s, {len(plan['nodes'])} nodes, "
          f"{len(plan['links'])} links, {plan['workloads']} workload(s)")
    for name, q in plan["links"]:
        print(f"  {name:<16} {q}")
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
                       epilog="example:\n  sojourn run experiments/examples/cbr-fifo-overload.toml --out results/cbr --seed 2",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("experiment", help="experiment file (TOML)")
    r.add_argument("--out", required=True, help="output directory (created; existing result files are replaced)")
    r.add_argument("--seed", type=int, help="master seed (default: the file's `seed`, else 1)")
    r.add_argument("--duration", help='override the duration, e.g. "60s"')
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a key, e.g. topology.bottleneck.qdisc=codel (repeatable)")
    r.add_argument("--quiet", action="store_true", help="no progress bar and no tables")
    r.add_argument("--no-report", action="store_true", help="do not write report.md and plots")
    r.set_defaults(func=cmd_run)

    v = sub.add_parser("validate", help="check an experiment file without running it")
    v.add_argument("experiment")
    v.add_argument("--set", action="append", metavar="KEY=VALUE")
    v.set_defaults(func=cmd_validate)

    q = sub.add_parser("qdiscs", help="list the disciplines an experiment can use")
    q.set_defaults(func=cmd_qdiscs)

    try:
        from . import compare as _compare
        from . import sweeps as _sweeps

        _sweeps.add_parser(sub)
        _compare.add_parser(sub)
    except ImportError:  # pragma: no cover
        pass
    from . import deploy as _deploy

    _deploy.add_parser(sub)
    try:
        from . import cli_threshold as _thr

        t = sub.add_parser("threshold", help="optimal 2LPS/MLPS threshold from a flow-size distribution and a load", add_help=False)
        t.add_argument("args", nargs=argparse.REMAINDER)
        t.set_defaults(func=lambda a: _thr.main(a.args))
    except ImportError:  # pragma: no cover
        pass
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    if a.version:
        import sojourn

        print(f"sojourn {sojourn.__version__}")
        return 0
    if not getattr(a, "cmd", None):
        p.print_help()
        print("sojourn: no command given (see sojourn --help)", file=sys.stderr)
        return 2
    return a.func(a)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
