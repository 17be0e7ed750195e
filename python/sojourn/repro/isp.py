"""ISP subscriber trees: plan against achieved rate and latency under load for 1,000
subscribers behind an HTB tree with FIFO, FQ-CoDel and CAKE leaves, and what
oversubscription does (issue 36). Generates docs/repro/isp.md::

    python -m sojourn.repro.isp --update-docs                 # every run, rewrites the page
    python -m sojourn.repro.isp --out results/isp --duration 10s

Runs ``experiments/isp/subscribers-1000.toml`` for each leaf (``pfifo``, ``fq_codel``,
``cake``) and each uplink rate in :data:`UPLINKS` (the 100 active subscribers' plans add up
to 4 Gbit/s, so 5, 2 and 1 Gbit/s put the active demand at 0.8x, 2x and 4x the uplink) and
reports, over the active subscribers' downloads after the warm-up: the mean achieved rate
per plan, the achieved / plan ratio, Jain's index and the Lorenz gap of that ratio, and
the latency under load (the queueing delay in the subscriber's class: ``sojourn.isp``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

LEAVES = ("pfifo", "fq_codel", "cake")
UPLINKS = ("5Gbit", "2Gbit", "1Gbit")
EXP = "subscribers-1000.toml"


def default_exp_dir() -> Path:
    here = Path(__file__).resolve().parents[3] / "experiments" / "isp"
    return here if here.is_dir() else Path("experiments/isp")


def run(out: Path, exp_dir: Optional[Path] = None, duration: Optional[str] = None,
        leaves: Sequence[str] = LEAVES, uplinks: Sequence[str] = UPLINKS, exp: str = EXP) -> dict:
    """Runs (or reuses, if its summary.json exists) each (leaf, uplink); returns
    (leaf, uplink) -> run directory."""
    import sojourn

    exp_dir = exp_dir or default_exp_dir()
    dirs = {}
    for up in uplinks:
        for leaf in leaves:
            d = out / f"{leaf}-{up}"
            if not (d / "summary.json").exists():
                sojourn.run(exp_dir / exp, duration=duration,
                            overrides={"topology.leaf": leaf, "topology.uplink.rate": up}).write(d)
            dirs[(leaf, up)] = d
    return dirs


def row(d: Path) -> dict:
    """One run's numbers (active subscribers' downloads)."""
    from ..analysis.subscribers import fairness
    from ..results import Result

    r = Result.read(d)
    f = fairness(r.subscribers, "down")
    a = _down_active(d)
    q = a["queueing_ms"].to_numpy(float)
    q = q[np.isfinite(q)]
    per_plan = a.groupby("plan_bps")["achieved_bps"].mean()
    up = r.summary["links"]["uplink"]
    return {
        "demand_x": float(a["plan_bps"].sum()) / float(up["rate_bps"]),
        "utilisation": float(up["utilisation"]),
        "jain": f["jain"], "lorenz_gap": f["lorenz_gap"], "mean_ratio": f["mean_ratio"],
        "min_ratio": float(a["achieved_ratio"].min()),
        "q50_ms": float(np.percentile(q, 50)) if q.size else float("nan"),
        "q95_ms": float(np.percentile(q, 95)) if q.size else float("nan"),
        "per_plan_mbps": {int(k): float(v) / 1e6 for k, v in per_plan.items()},
        "drops": int(up["drops_total"]),
        "duration_s": float(r.summary["duration_s"]),
    }


def table(dirs: dict) -> pd.DataFrame:
    rows = []
    for (leaf, up), d in dirs.items():
        rows.append({"leaf": leaf, "uplink": up, **row(d)})
    return pd.DataFrame(rows)


def md_table(t: pd.DataFrame) -> str:
    plans = sorted({k for m in t["per_plan_mbps"] for k in m})
    head = ("| uplink | active plans / uplink | leaf | uplink utilisation | "
            + " | ".join(f"{p / 1e6:g}-Mbit/s plan: got (Mbit/s)" for p in plans)
            + " | achieved / plan: mean, min | Jain | Lorenz gap | latency under load p50 / p95 (ms) | uplink drops |")
    rows = [head, "|" + "---|" * (9 + len(plans))]
    for r in t.itertuples():
        got = " | ".join(f"{r.per_plan_mbps.get(p, float('nan')):.1f}" for p in plans)
        rows.append(f"| {r.uplink} | {r.demand_x:.1f}x | {r.leaf} | {100 * r.utilisation:.1f}% | {got} | "
                    f"{r.mean_ratio:.3f}, {r.min_ratio:.3f} | {r.jain:.4f} | {r.lorenz_gap:.4f} | "
                    f"{r.q50_ms:.1f} / {r.q95_ms:.1f} | {r.drops} |")
    return "\n".join(rows) + "\n"


def md_findings(t: pd.DataFrame) -> str:
    """What the table says, in words (every number from the table)."""
    out = []
    for up, g in t.groupby("uplink", sort=False):
        demand = float(g["demand_x"].iloc[0])
        got = {r.leaf: r for r in g.itertuples()}
        fifo = got.get("pfifo")
        aqm = [got[l] for l in ("fq_codel", "cake") if l in got]
        plans = sorted({k for m in g["per_plan_mbps"] for k in m})
        if demand < 1.0:
            ratios = ", ".join(f"{r.leaf} {r.mean_ratio:.3f}" for r in g.itertuples())
            out.append(f"- **uplink {up} (active demand {demand:.1f}x the uplink)**: every active subscriber is "
                       f"shaped by its own class; mean achieved / plan {ratios} (a saturated CUBIC download's "
                       "payload is at most 1448/1514 = 0.956 of its plan).")
        else:
            spread = ", ".join(
                f"{r.leaf} " + "/".join(f"{r.per_plan_mbps[p]:.1f}" for p in plans) for r in g.itertuples())
            out.append(f"- **uplink {up} (active demand {demand:.1f}x)**: the uplink is the bottleneck (utilisation at least "
                       f"{100 * min(g['utilisation']):.1f}%) and every plan gets about the same rate, "
                       f"{' / '.join(f'{p / 1e6:g}' for p in plans)}-Mbit/s plans: {spread} Mbit/s: HTB serves the "
                       "classes round robin by quantum (from their own tokens or borrowing from the root), and with r2q "
                       "10 every plan above 16 Mbit/s has the same clamped 200,000-B quantum (docs/isp.md). Jain of achieved / "
                       f"plan {min(g['jain']):.3f}–{max(g['jain']):.3f}: the premium plans fall furthest below theirs.")
        if fifo is not None and aqm:
            out.append(f"  Latency under load (median over active subscribers): pfifo {fifo.q50_ms:.0f} ms, "
                       + ", ".join(f"{r.leaf} {r.q50_ms:.1f} ms" for r in aqm)
                       + f"; uplink drops pfifo {fifo.drops}, " + ", ".join(f"{r.leaf} {r.drops}" for r in aqm) + ".")
    return "\n".join(out) + "\n"


def _down_active(d: Path) -> pd.DataFrame:
    from ..results import Result

    t = Result.read(d).subscribers
    return t[(t["direction"] == "down") & t["active"]]


def _scatter(a, s: pd.DataFrame, i: int, leaf: str) -> None:
    # Leaves side by side around each plan (x jittered by 5 %), the diagonal is the plan.
    a.scatter(s["plan_bps"] / 1e6 * (1.0 + 0.05 * (i - 1)), s["achieved_bps"] / 1e6, s=8, alpha=0.6, label=leaf)


def _cdf(a, s: pd.DataFrame, i: int, leaf: str) -> None:
    q = np.sort(s["queueing_ms"].dropna().to_numpy(float))
    if q.size:
        a.plot(np.maximum(q, 1e-2), np.arange(1, q.size + 1) / q.size, label=leaf)


def plot(dirs: dict, img: Path) -> list:
    """One figure per view, one panel per uplink rate, one series per leaf."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    ups = sorted({u for _, u in dirs}, key=lambda u: -float(u.rstrip("Gbit")))
    leaves = [l for l in LEAVES if any(k[0] == l for k in dirs)]
    views = (("plan-vs-achieved.png", _scatter, "plan (Mbit/s)", "achieved (Mbit/s)", False),
             ("latency-cdf.png", _cdf, "latency under load (ms, log)", "CDF over active subscribers", True))
    for name, draw, xlabel, ylabel, logx in views:
        fig, ax = plt.subplots(1, len(ups), figsize=(4.2 * len(ups), 3.2), squeeze=False)
        for a, up in zip(ax[0], ups):
            for i, leaf in enumerate(leaves):
                if (leaf, up) in dirs:
                    draw(a, _down_active(dirs[(leaf, up)]), i, leaf)
            if logx:
                a.set_xscale("log")
            else:
                top = a.get_xlim()[1]
                a.plot([0, top], [0, top], color="grey", ls=":", lw=0.8)
            a.set_title(f"uplink {up}", fontsize=9)
            a.set_xlabel(xlabel)
            a.set_ylabel(ylabel)
            a.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(img / name, dpi=80)
        plt.close(fig)
    return [v[0] for v in views]


CI_DURATION = "5s"


def ci_block(out: Path) -> str:
    """The cheap variant: experiments/isp/small.toml (8 subscribers), 5 simulated seconds,
    FQ-CoDel leaves."""
    from ..analysis.subscribers import fairness
    from ..results import Result

    dirs = run(out, duration=CI_DURATION, leaves=("fq_codel",), uplinks=("200Mbit",), exp="small.toml")
    t = Result.read(dirs[("fq_codel", "200Mbit")]).subscribers
    rows = ["| subscriber | direction | plan (Mbit/s) | achieved (Mbit/s) | latency under load (ms) |",
            "|---|---|---|---|---|"]
    for r in t[t["active"]].itertuples():
        rows.append(f"| {r.subscriber} | {r.direction} | {r.plan_bps / 1e6:g} | {r.achieved_bps / 1e6:.3f} | "
                    f"{r.queueing_ms:.2f} |")
    f = fairness(t, "down")
    return (f"The cheap variant (experiments/isp/small.toml, {CI_DURATION} simulated; "
            f"`sojourn.repro.isp.ci_block`): downstream Jain {f['jain']:.4f}, Lorenz gap {f['lorenz_gap']:.4f}:\n\n"
            + "\n".join(rows) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    from . import pages

    ap = argparse.ArgumentParser(prog="python -m sojourn.repro.isp", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/repro-isp")
    ap.add_argument("--duration", default=None, help="simulated time per run (default: the file's 20 s)")
    ap.add_argument("--img", default=None, help="plots here (default <out>/img; docs/repro/img/isp with --update-docs)")
    ap.add_argument("--update-docs", action="store_true", help="rewrite docs/repro/isp.md's generated blocks and plots")
    ap.add_argument("--exp-dir", default=None)
    a = ap.parse_args(argv)
    out = Path(a.out)
    t0 = time.perf_counter()
    dirs = run(out, Path(a.exp_dir) if a.exp_dir else None, a.duration)
    t = table(dirs)
    wall = time.perf_counter() - t0
    text = md_table(t)
    print(text)
    print(md_findings(t))
    print(f"wall seconds (this call; cached runs cost nothing): {wall:.1f}")
    img = pages.plot_dir(out, a.img, a.update_docs, "isp")
    for p in plot(dirs, img):
        print(f"plot: {img / p}")
    (out / "report.json").write_text(json.dumps(t.to_dict("records"), indent=1, default=str) + "\n")
    if a.update_docs:
        dur = sorted(set(t["duration_s"]))
        # The runs' own wall time (perf.json), whether this call ran them or found them.
        run_wall = sum(json.loads((d / "perf.json").read_text()).get("wall_seconds", 0.0) for d in dirs.values())
        setup = (f"Runs of {', '.join(f'{d:g}' for d in dur)} simulated seconds each (warm-up 5 s), "
                 f"{len(dirs)} runs, {run_wall:.0f} s of wall time in all on this 2-core machine shared with "
                 "other work.\n")
        blocks = {"provenance": pages.provenance("isp"), "results": text, "setup": setup,
                  "findings": md_findings(t),
                  "ci": ci_block(out / "ci")}
        pages.replace_blocks(pages.DOCS / "isp.md", blocks)
        print(f"updated {pages.DOCS / 'isp.md'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
