"""``sojourn threshold DIST --load RHO``: optimal 2LPS/MLPS thresholds of an M/G/1 queue.

Prints the optimal threshold(s) and the mean response time under PS, 2LPS (at the optimum
and at ``--threshold``), MLPS (``--levels K``), LAS and SRPT; optionally the curve of the
mean response time against the threshold (``--plot out.png`` writes PNG and SVG) and JSON.

DIST is a distribution spec (see :func:`sojourn.dists.parse_dist`), e.g.
``"bounded-pareto alpha=1.2 min=300KiB max=1GiB"``, ``seed000-1g``, ``exponential mean=1MB``,
``empirical path=sizes.csv``, the path of a ``flows.parquet`` from an earlier run
(column ``size_bytes``), or a workload's size law as an experiment file writes it,
``'{ dist = "pareto", alpha = 1.2, min = "2kB", max = "2MB", grid = 20 }'``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from .. import dists, threshold

__all__ = ["main", "build_parser", "parse_rate"]

from ..units import parse_rate  # noqa: E402  (the engine's units; re-exported)


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _ArgError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="sojourn threshold",
        description="Optimal age-based (2LPS/MLPS) thresholds of an M/G/1 queue with "
        "Poisson arrivals, and the mean response times of PS, 2LPS, MLPS, LAS and SRPT.",
    )
    p.add_argument("dist", nargs="+", help='size distribution, e.g. "bounded-pareto alpha=1.2 '
                   'min=300KiB max=1GiB", seed000-1g, "exponential mean=1MB", FILE.parquet, or an '
                   'experiment file\'s size law: \'{ dist = "pareto", alpha = 1.2, min = "2kB", max = "2MB" }\'')
    p.add_argument("--load", required=True, type=float, help="offered load rho in (0, 1)")
    p.add_argument("--levels", type=int, default=2, help="number of PS levels (default 2 = 2LPS)")
    p.add_argument("--threshold", help="also evaluate 2LPS at this threshold (size, e.g. 6331208B)")
    p.add_argument("--link-rate", help="report times in seconds at this rate (e.g. 1Gbit)")
    p.add_argument("--plot", help="write the mean-response-vs-threshold curve to this PNG (+ .svg)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


def _compute(args: argparse.Namespace) -> dict:
    dist = dists.parse_dist(args.dist)
    load = float(args.load)
    if not (0.0 < load < 1.0):
        raise ValueError(f"--load must be in (0, 1), got {args.load}")
    if args.levels < 1:
        raise ValueError(f"--levels must be >= 1, got {args.levels}")
    rate = parse_rate(args.link_rate) if args.link_rate else None
    user_a = dists.parse_size(args.threshold) if args.threshold else None
    if user_a is not None and not user_a > 0:
        raise ValueError("--threshold must be > 0")

    res2 = threshold.optimal_threshold(dist, load)
    rows: list[dict] = [
        {"discipline": "PS", "thresholds_bytes": [], "mean": threshold.mean_ps(dist, load)},
        {"discipline": "2LPS (optimal)", "thresholds_bytes": res2.thresholds, "mean": res2.mean},
    ]
    if user_a is not None:
        rows.append(
            {"discipline": "2LPS (given)", "thresholds_bytes": [user_a],
             "mean": threshold.mean_2lps(dist, load, user_a)}
        )
    if args.levels > 2:
        resk = threshold.optimal_thresholds(dist, load, args.levels)
        rows.append(
            {"discipline": f"MLPS-{args.levels} (optimal)", "thresholds_bytes": resk.thresholds,
             "mean": resk.mean}
        )
    rows.append({"discipline": "LAS", "thresholds_bytes": [], "mean": threshold.mean_las(dist, load)})
    rows.append({"discipline": "SRPT", "thresholds_bytes": [], "mean": threshold.mean_srpt(dist, load)})
    ps = rows[0]["mean"]
    for r in rows:
        r["vs_ps"] = r["mean"] / ps - 1.0
        r["mean_s"] = threshold.to_seconds(r["mean"], rate) if rate else None
    lo, hi = threshold.flat_interval(dist, load, res2)
    out = {
        "distribution": dist.name,
        "mean_size_bytes": dist.mean,
        "median_size_bytes": dist.median,
        "load": load,
        "arrival_rate_per_byte": threshold.arrival_rate(dist, load),
        "link_rate_bps": rate,
        "time_unit": "seconds" if rate else "byte-times (size / service rate)",
        "optimal_threshold_bytes": res2.threshold,
        "fraction_below_threshold": float(dist.cdf(res2.threshold)),
        "within_1pct_of_optimum_bytes": [lo, hi],
        "results": rows,
    }
    if args.plot:
        out["plot"] = _plot(dist, load, res2, user_a, rate, Path(args.plot))
    return out


def _plot(
    dist: dists.SizeDist,
    load: float,
    res: threshold.ThresholdResult,
    user_a: float | None,
    rate: float | None,
    path: Path,
) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = threshold.threshold_curve(dist, load, n=40, n_grid=150)
    scale = (8.0 / rate) if rate else 1.0
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.plot(curve["threshold_bytes"], curve["mean_2lps"] * scale, label="2LPS")
    ax.axhline(curve["mean_ps"].iloc[0] * scale, color="gray", ls="--", label="PS")
    ax.axhline(threshold.mean_las(dist, load) * scale, color="tab:green", ls=":", label="LAS")
    ax.axvline(res.threshold, color="tab:red", lw=0.8, label=f"optimum {dists.format_bytes(res.threshold)}")
    if user_a is not None:
        ax.axvline(user_a, color="tab:purple", lw=0.8, ls="-.", label=f"given {dists.format_bytes(user_a)}")
    ax.set_xscale("log")
    ax.set_xlabel("threshold a (bytes)")
    ax.set_ylabel("mean response time (s)" if rate else "mean response time (byte-times)")
    ax.set_title(f"{dist.name}, load {load:g}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path = path if path.suffix.lower() == ".png" else path.with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    from .._plots import savefig

    savefig(fig, path, dpi=120)
    svg = path.with_suffix(".svg")
    savefig(fig, svg)
    plt.close(fig)
    return [str(path), str(svg)]


def _fmt_time(v: float, rate: float | None) -> str:
    if rate:
        s = threshold.to_seconds(v, rate)
        return f"{s * 1e3:.4g} ms" if s < 1 else f"{s:.4g} s"
    return f"{v:.5g}"


def _print_table(out: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    rate = out["link_rate_bps"]
    t = Table(title=f"M/G/1 mean response time — {out['distribution']}, load {out['load']:g}")
    t.add_column("discipline")
    t.add_column("threshold(s)")
    t.add_column("mean response" + (" (at link rate)" if rate else " (byte-times)"), justify="right")
    t.add_column("vs PS", justify="right")
    for r in out["results"]:
        ths = ", ".join(f"{a:,.0f} B" for a in r["thresholds_bytes"]) or "-"
        t.add_row(r["discipline"], ths, _fmt_time(r["mean"], rate), f"{100 * r['vs_ps']:+.2f} %")
    c = Console()
    c.print(t)
    lo, hi = out["within_1pct_of_optimum_bytes"]
    c.print(
        f"optimal 2LPS threshold: {out['optimal_threshold_bytes']:,.0f} B "
        f"({100 * out['fraction_below_threshold']:.2f} % of flows at or below it); "
        f"mean within 1 % of the optimum for a in [{lo:,.0f}, {hi:,.0f}] B"
    )
    if "plot" in out:
        c.print("wrote " + ", ".join(out["plot"]))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sojourn threshold``; returns the exit code (2 on bad input)."""
    try:
        args = build_parser().parse_args(list(argv) if argv is not None else sys.argv[1:])
        out = _compute(args)
    except (_ArgError, ValueError, KeyError, OSError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"sojourn threshold: error: {msg}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print_table(out)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
