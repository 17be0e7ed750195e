"""Human-readable output: terminal tables and a Markdown report with plots for one run."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable

from rich.console import Console
from rich.table import Table

from .._plots import savefig
from ..results import Result, read_timeseries


def _fmt(x, digits: int = 2, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, int):
        return f"{x}{unit}"
    return f"{x:.{digits}f}{unit}"


def _rate(bps: float) -> str:
    if bps is None:
        return "-"
    for div, u in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bps >= div:
            return f"{bps / div:.2f} {u}"
    return f"{bps:.0f} bit/s"


#: Rows of the links table (terminal and report.md). A 10,000-pair dumbbell has 40,002
#: links, 20,002 of them busy: beyond this many the busiest are shown and the rest counted.
LINKS_SHOWN = 24


def interesting_links(summary: dict, limit: int | None = None) -> list[str]:
    """Links worth showing: those that queued, dropped or were busy more than 1%, in the
    file's order. With ``limit``, at most that many: those that dropped most, then the
    busiest (``summary.json`` still lists every link)."""
    out = []
    for name, l in summary["links"].items():
        if l["drops_total"] > 0 or l["utilisation"] > 0.01 or ((l["sojourn_ms"] or {}).get("max") or 0) > 0:
            out.append(name)
    if limit is not None and len(out) > limit:
        links = summary["links"]
        keep = set(sorted(out, key=lambda n: (-links[n]["drops_total"], -links[n]["utilisation"]))[:limit])
        out = [n for n in out if n in keep]
    return out or list(summary["links"])[:1]


def links_not_shown(summary: dict, shown: list[str]) -> str:
    """One sentence on the links a bounded table leaves out ("" when it shows them all)."""
    n = len(interesting_links(summary))
    if n <= len(shown):
        return ""
    return (f"{n:,} links queued, dropped or were busy; the {len(shown)} that dropped most, then the "
            f"busiest, are shown ({n - len(shown):,} more in summary.json)")


def links_table(res: Result, names: Iterable[str] | None = None) -> Table:
    s = res.summary
    t = Table(title=f"{s['experiment']} (seed {s['seed']}, {s['duration_s']:g} s {'live' if s.get('engine') == 'emulate' else 'simulated'})")
    for c in ["link", "qdisc", "util", "throughput", "drops", "ECN marks", "sojourn mean", "p50", "p99", "max"]:
        t.add_column(c, justify="left" if c in ("link", "qdisc") else "right")
    shown = list(names) if names is not None else interesting_links(s, LINKS_SHOWN)
    if names is None and (rest := links_not_shown(s, shown)):
        t.caption = rest
    for name in shown:
        l = s["links"][name]
        sj = l["sojourn_ms"] or {}
        drops = ", ".join(f"{k} {v}" for k, v in l["drops"].items()) or "0"
        t.add_row(
            name,
            l["qdisc"],
            f"{100 * l['utilisation']:.1f}%",
            _rate(l["throughput_bps"]),
            drops,
            str(l["ecn_marks"]),
            _fmt(sj.get("mean"), 2, " ms"),
            _fmt(sj.get("p50"), 2, " ms"),
            _fmt(sj.get("p99"), 2, " ms"),
            _fmt(sj.get("max"), 2, " ms"),
        )
    return t


def flows_table(res: Result) -> Table:
    f = res.summary["flows"]
    t = Table(title="flows (started after warm-up)")
    for c in ["flows", "sized", "completed", "FCT mean ± 95% CI", "FCT p50", "FCT p99", "goodput mean"]:
        t.add_column(c, justify="right")
    fct = f["fct_s"]
    g = f["goodput_bps"]
    fct_mean = f"{fct['mean'] * 1e3:.1f} ± {fct['ci95'] * 1e3:.1f} ms" if fct.get("count") else "-"
    t.add_row(
        str(f["count"]),
        str(f["sized"]),
        str(f["completed"]),
        fct_mean,
        _fmt(fct.get("p50", float("nan")) * 1e3 if fct.get("count") else None, 1, " ms"),
        _fmt(fct.get("p99", float("nan")) * 1e3 if fct.get("count") else None, 1, " ms"),
        _rate(g.get("mean")) if g.get("count") else "-",
    )
    return t


def print_run(res: Result, console: Console | None = None) -> None:
    import sys

    # Not a terminal (a pipe, a log): wide enough that no column is cut to "bott…".
    console = console or (Console() if sys.stdout.isatty() else Console(width=400))
    console.print(links_table(res))
    if res.summary["flows"]["count"]:
        console.print(flows_table(res))
    acc = res.summary["accounting"]
    ok = "[green]conserved[/green]" if acc["conserved"] else "[red]NOT conserved[/red]"
    console.print(
        f"packets: created {acc['created']}, delivered {acc['delivered']}, dropped {acc['dropped']}, "
        f"in network {acc['in_network']} — {ok}"
    )
    p = res.perf
    if res.summary.get("engine") == "emulate":
        em = res.summary.get("emulate", {})
        console.print(
            f"[dim]live: {em.get('wall_seconds', 0):.2f} s wall, forwarder CPU {em.get('forwarder_cpu_seconds', 0):.2f} s, "
            f"kernel {em.get('kernel', '?')}, socket errors {em.get('socket_errors', 0)}[/dim]"
        )
        if em.get("warning"):
            from rich.markup import escape

            console.print(f"[yellow]warning: {escape(em['warning'])}[/yellow]", highlight=False)
    elif p.get("wall_seconds") and "events" in p:  # the kernel engine counts no events
        console.print(
            f"[dim]{p['wall_seconds']:.2f} s wall, {p['events'] / 1e6:.2f} M events "
            f"({p['events_per_second'] / 1e6:.1f} M/s), {p['link_packets_per_second'] / 1e6:.2f} M link-packets/s[/dim]"
        )


def write_run_report(res: Result, out_dir: Path) -> Path:
    """Writes ``report.md`` with queue and throughput plots (PNG + SVG) of the busy links."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    s = res.summary
    names = interesting_links(s, LINKS_SHOWN)
    # A streamed run's series are read from disk, thinned when very long (bounded memory).
    ts = res.timeseries if res.timeseries_table is not None else read_timeseries(res.files["timeseries"])
    figs = []
    for metric, ylabel, fname in [("queue_packets", "queue (packets)", "queue"), ("throughput_bps", "throughput (Mbit/s)", "throughput")]:
        fig, ax = plt.subplots(figsize=(8, 3.2))
        plotted = False
        for n in names:
            sel = ts[(ts["entity"] == n) & (ts["metric"] == metric)]
            if sel.empty:
                continue
            y = sel["value"] / (1e6 if metric == "throughput_bps" else 1)
            ax.plot(sel["time_s"], y, label=n, lw=1)
            plotted = True
        if not plotted:
            plt.close(fig)
            continue
        ax.set_xlabel("time (s)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        for ext in ("png", "svg"):
            savefig(fig, out_dir / f"{fname}.{ext}", dpi=120)
        plt.close(fig)
        figs.append(fname)
    warning = (s.get("emulate") or {}).get("warning")
    lines = [f"# {s['experiment']}", "", s.get("description") or "", "",
             *([f"**Warning:** {warning}", ""] if warning else []),
             f"seed {s['seed']}, {s['duration_s']:g} s simulated (warm-up {s['warmup_s']:g} s), {s['events']} events.", "",
             "| link | qdisc | utilisation | throughput | drops | ECN marks | sojourn mean | p99 |", "|---|---|---|---|---|---|---|---|"]
    for n in names:
        l = s["links"][n]
        sj = l["sojourn_ms"] or {}  # null from the kernel engine: no per-packet sojourn
        lines.append(f"| {n} | `{l['qdisc']}` | {100 * l['utilisation']:.1f}% | {_rate(l['throughput_bps'])} | {l['drops_total']} | {l['ecn_marks']} | {_fmt(sj.get('mean'), 2, ' ms')} | {_fmt(sj.get('p99'), 2, ' ms')} |")
    if rest := links_not_shown(s, names):
        lines += ["", rest + "."]
    f = s["flows"]
    if f["fct_s"].get("count"):
        lines += ["", f"Flows: {f['count']} ({f['completed']} of {f['sized']} sized flows completed); mean FCT {f['fct_s']['mean'] * 1e3:.1f} ± {f['fct_s']['ci95'] * 1e3:.1f} ms (95% CI)."]
    for fig in figs:
        lines += ["", f"![{fig}]({fig}.png)"]
    acc = s["accounting"]
    lines += ["", f"Accounting: created {acc['created']} = delivered {acc['delivered']} + dropped {acc['dropped']} + in network {acc['in_network']} ({'conserved' if acc['conserved'] else 'NOT conserved'})."]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
