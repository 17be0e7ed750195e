"""``sojourn compare``, the command: the comparison tables (:mod:`sojourn.analysis.compare`) and the
HTML report (:mod:`sojourn.analysis.htmlreport`) of a sweep or of run directories. It sits above both
so neither imports the other's command layer (docs/architecture.md)."""
from __future__ import annotations

import sys
from pathlib import Path

from .._cli_common import fail
from ..analysis.compare import compare
from ..analysis.htmlreport import write_report


def cmd_compare(a) -> int:
    try:
        compare(a.dirs, metric=a.metric, baseline=a.baseline, plots=a.plots, out=a.out, end_margin=a.end_margin)
        out = Path(a.out) if a.out else (Path(a.dirs[0]) if len(a.dirs) == 1 else Path(a.dirs[0]).resolve().parent)
        if not a.no_report:
            write_report(a.dirs, out=out / "report.html", end_margin=a.end_margin)
    except (FileNotFoundError, KeyError, ValueError) as e:
        return fail(str(e).strip("'\""))
    what = ["compare.md"] + ([] if a.no_report else ["report.html"])
    print(f"wrote {out}/" + f" and {out}/".join(what) + (" and plots" if a.plots else ""), file=sys.stderr)
    return 0


COMPARE_EPILOG = """\
examples:
  sojourn compare results/aqm
  sojourn compare results/aqm --baseline pfifo --metric fct --plots
  sojourn compare results/run-a results/run-b --out results/ab

Prints one row per point (mean with 95% CI over flows and across repeats, percentiles,
goodput, utilisation, sojourn, drops), gains against --baseline and of every `age-X` over
`X`; writes DIR/compare.md and DIR/report.html (and PNG+SVG plots with --plots).
"""


def add_parser(sub) -> None:
    """Adds ``compare`` to the ``sojourn`` command's sub-parsers."""
    import argparse

    c = sub.add_parser("compare", help="compare the points of a sweep (tables, gains, plots)",
                       description="Tables of FCT, goodput, utilisation, sojourn and drops per point of a sweep directory "
                                   "(or per run directory), with 95% confidence intervals and gains; writes compare.md and report.html.",
                       epilog=COMPARE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("dirs", nargs="+", metavar="DIR", help="a sweep output directory, or several run directories")
    c.add_argument("--baseline", help="point to compute gains against (gain = mean/mean_baseline - 1)")
    c.add_argument("--metric", choices=["fct", "sojourn", "goodput"], default="fct",
                   help="headline metric for the CI plot and the gains (default: fct)")
    c.add_argument("--plots", action="store_true", help="also write PNG+SVG plots next to compare.md")
    c.add_argument("--out", help="where compare.md and plots go (default: the sweep directory)")
    c.add_argument("--no-report", action="store_true", help="do not write the HTML report (report.html)")
    c.add_argument("--end-margin", metavar="DURATION",
                   help='leave out flows that end in the last DURATION of their run, e.g. "60s" '
                        "(default: the sweep file's end_margin, else 0)")
    c.set_defaults(func=cmd_compare)
