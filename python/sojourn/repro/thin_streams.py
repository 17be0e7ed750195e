"""Seed 001 (Grigorescu, Kulatunga, Fairhurst, Kuhn, EuCNC 2015): thin streams and flow
starvation with FQ-CoDel. Runs the four sweeps of experiments/repro/thin-streams/ and
writes the plots and tables of docs/repro/thin-streams.md::

    python -m sojourn.repro.thin_streams --out results/thin-streams \\
        --img docs/repro/img/thin-streams --jobs 2

``--studies gaming,mixed,starvation,dos`` picks studies; ``--repeats`` and ``--duration``
shorten the runs; ``--report-only`` re-plots finished sweeps (sweeps are resumable, so a
second call only runs what is missing).

Measures (all at the bottleneck R1 -> R2, after the experiment's warm-up):
- thin-stream queueing delay: ``sojourn_ms`` of every dequeued packet of the thin flow(s)
  (packets.parquet), pooled over seeds;
- thin-stream packet loss: packets of the thin flow dropped at the bottleneck;
- TCP throughput: bytes of the bulk flow dequeued at the bottleneck / measured time.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

HERE = Path(__file__).resolve()
#: The source tree's sweep files; an installed package falls back to the working directory's
#: (run from a checkout, as the docs do).
EXP_DIR = HERE.parents[3] / "experiments" / "repro" / "thin-streams"
if not EXP_DIR.is_dir():
    EXP_DIR = Path("experiments/repro/thin-streams").resolve()
STUDIES = ("gaming", "mixed", "starvation", "dos")

#: Display names, in the paper's words.
LABELS = {
    "codel": "CoDel",
    "sfq": "SFQ",
    "fq_codel_wp": "FQ-CoDel WP",
    "fq_codel": "FQ-CoDel",
    "fq_codel_wp_100ms": "FQ-CoDel WP 100ms",
    "fq_codel_wspm": "FQ-CoDel WSPM",
    "droptail": "DropTail",
}
#: The disciplines of experiments/repro/thin-streams/*.sweep.toml, for direct runs.
QDISCS = {
    "codel": {"kind": "codel", "limit": 33, "target": "5ms", "interval": "100ms"},
    "sfq": {"kind": "sfq", "limit": 33},
    "fq_codel_wp": {"kind": "fq_codel", "limit": 33, "ecn": False, "new_flow_priority": False},
    "fq_codel": {"kind": "fq_codel", "limit": 33, "ecn": False},
    "fq_codel_wp_100ms": {"kind": "fq_codel", "limit": 33, "ecn": False, "new_flow_priority": False, "target": "100ms"},
    "fq_codel_wspm": {"kind": "fq_codel", "limit": 33, "ecn": False, "starvation_prevention": False},
    "droptail": {"kind": "pfifo", "limit": 33},
}
LINK_RATE_BPS = 2_000_000


# ---------------------------------------------------------------------------------------
# Per-run measures


def flows_of(flows: pd.DataFrame, workload: int) -> list[int]:
    return [int(f) for f in flows.loc[flows["workload"] == workload, "flow"]]


def thin_delays(packets: pd.DataFrame, flows: pd.DataFrame, workload: int, warmup_s: float) -> np.ndarray:
    """Queueing delays (ms) of the dequeued packets of `workload`'s flows after warm-up."""
    ids = flows_of(flows, workload)
    sel = packets[(packets["event"] == "dequeue") & packets["flow"].isin(ids) & (packets["time_s"] >= warmup_s)]
    return sel["sojourn_ms"].to_numpy(dtype=float)


def data_delays(packets: pd.DataFrame, flows: pd.DataFrame, workload: int, warmup_s: float) -> np.ndarray:
    """As :func:`thin_delays`, but only data packets (TCP pure ACKs of the reverse path
    never cross the bottleneck in this direction, so this is the same set; kept for UDP)."""
    return thin_delays(packets, flows, workload, warmup_s)


def drops_of(packets: pd.DataFrame, flows: pd.DataFrame, workload: int, warmup_s: float) -> int:
    ids = flows_of(flows, workload)
    sel = packets[(packets["event"] != "dequeue") & packets["flow"].isin(ids) & (packets["time_s"] >= warmup_s)]
    return int(len(sel))


def throughput_bps(packets: pd.DataFrame, flows: pd.DataFrame, workload: int, warmup_s: float, duration_s: float) -> float:
    """Bits of `workload`'s flows dequeued at the bottleneck after warm-up, per second."""
    ids = flows_of(flows, workload)
    sel = packets[(packets["event"] == "dequeue") & packets["flow"].isin(ids) & (packets["time_s"] >= warmup_s)]
    return float(sel["len_bytes"].sum()) * 8.0 / max(duration_s - warmup_s, 1e-9)


def run_gaming(qdisc: str, bulk: int, duration: str = "60s", seed: int = 1, warmup: str = "10s") -> dict:
    """One run of gaming.toml (thin TCP gaming stream beside `bulk` bulk flows) under one of
    :data:`QDISCS`; returns the thin stream's delays and a few counters (used by the CI test)."""
    import sojourn

    r = sojourn.run(EXP_DIR / "gaming.toml", seed=seed, duration=duration,
                    overrides={"topology.bottleneck.qdisc": QDISCS[qdisc], "workload[1].count": bulk, "warmup": warmup})
    p, f = r.packets, r.flows
    w = float(r.summary["warmup_s"])
    d = thin_delays(p, f, 0, w)
    return {
        "delays_ms": d,
        "thin_drops": drops_of(p, f, 0, w),
        "bulk_bps": throughput_bps(p, f, 1, w, float(r.summary["duration_s"])),
        "utilisation": r.summary["links"]["bottleneck"]["utilisation"],
    }


# ---------------------------------------------------------------------------------------
# Sweeps


def _runs(out: Path) -> pd.DataFrame:
    return pq.read_table(out / "runs.parquet").to_pandas()


def _read_run(out: Path, run_dir: str) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    d = out / run_dir
    summary = json.loads((d / "summary.json").read_text())
    packets = pq.read_table(d / "packets.parquet", columns=["time_s", "flow", "len_bytes", "event", "sojourn_ms"]).to_pandas()
    flows = pq.read_table(d / "flows.parquet", columns=["flow", "workload", "kind"]).to_pandas()
    return packets, flows, summary


def _new_flows_mean(out: Path, run_dir: str, warmup_s: float) -> float:
    ts = pq.read_table(out / run_dir / "timeseries.parquet").to_pandas()
    sel = ts[(ts["entity"] == "bottleneck") & (ts["metric"] == "new_flows") & (ts["time_s"] >= warmup_s)]
    return float(sel["value"].mean()) if len(sel) else float("nan")


def pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else float("nan")


def collect_gaming(out: Path) -> pd.DataFrame:
    """One row per (discipline, bulk flows): pooled thin-stream delays and counters."""
    runs = _runs(out)
    rows = []
    for (q, n), g in runs.groupby(["variant", "bulk"], sort=False):
        delays, drops, sent, bulk_bps, util = [], 0, 0, [], []
        for _, r in g.iterrows():
            p, f, s = _read_run(out, r["run_dir"])
            w = float(s["warmup_s"])
            d = thin_delays(p, f, 0, w)
            delays.append(d)
            drops += drops_of(p, f, 0, w)
            sent += len(d)
            bulk_bps.append(throughput_bps(p, f, 1, w, float(s["duration_s"])))
            util.append(s["links"]["bottleneck"]["utilisation"])
        d = np.concatenate(delays)
        rows.append({"qdisc": q, "bulk": int(n), "delays": d, "thin_pkts": len(d), "thin_drops": drops,
                     "thin_loss": drops / max(drops + sent, 1), "p50": pct(d, 50), "p90": pct(d, 90), "p99": pct(d, 99),
                     "bulk_mbps": float(np.mean(bulk_bps)) / 1e6, "utilisation": float(np.mean(util))})
    return pd.DataFrame(rows)


def collect_mixed(out: Path) -> pd.DataFrame:
    runs = _runs(out)
    rows = []
    for (case, q), g in runs.groupby(["variant", "qdisc"], sort=False):
        acc = {"gaming": [], "voip": []}
        drops = {"gaming": 0, "voip": 0}
        for _, r in g.iterrows():
            p, f, s = _read_run(out, r["run_dir"])
            w = float(s["warmup_s"])
            for name, wl in (("gaming", 0), ("voip", 1)):
                acc[name].append(thin_delays(p, f, wl, w))
                drops[name] += drops_of(p, f, wl, w)
        for name in ("gaming", "voip"):
            d = np.concatenate(acc[name])
            rows.append({"case": case, "qdisc": q, "stream": name, "delays": d, "pkts": len(d), "drops": drops[name],
                         "loss": drops[name] / max(drops[name] + len(d), 1),
                         "p50": pct(d, 50), "p90": pct(d, 90), "p99": pct(d, 99)})
    return pd.DataFrame(rows)


def collect_throughput(out: Path, group: Sequence[str], x: str) -> pd.DataFrame:
    """TCP (workload 0) throughput after warm-up per run, with the thin flows' share."""
    runs = _runs(out)
    rows = []
    for _, r in runs.iterrows():
        p, f, s = _read_run(out, r["run_dir"])
        w, dur = float(s["warmup_s"]), float(s["duration_s"])
        row = {k: r[k] for k in group}
        v = str(r[x])
        if v.startswith("l") and "-n" in v:  # dos.sweep.toml: l<Mbit/s>-n<flows>
            row["load"] = float(v[1:].split("-n")[0])
            v = v.split("-n")[1]
        row[x] = int(v.lstrip("n"))
        row["seed"] = int(r["seed"])
        row["tcp_mbps"] = throughput_bps(p, f, 0, w, dur) / 1e6
        row["thin_mbps"] = throughput_bps(p, f, 1, w, dur) / 1e6
        row["thin_drops"] = drops_of(p, f, 1, w)
        row["tcp_drops"] = drops_of(p, f, 0, w)
        row["new_flows_mean"] = _new_flows_mean(out, r["run_dir"], w)
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------
# Plots and tables


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def ecdf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(x)
    return x, np.arange(1, len(x) + 1) / len(x)


def plot_gaming(df: pd.DataFrame, img: Path) -> list[Path]:
    plt = _plt()
    order = [q for q in ("codel", "sfq", "fq_codel_wp", "fq_codel", "fq_codel_wp_100ms", "droptail") if q in set(df["qdisc"])]
    xmax = max(60.0, float(df[df["qdisc"] != "droptail"]["p99"].max()) * 1.1)
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5), sharey=True)
    for ax, q in zip(axes.flat, order):
        for _, r in df[df["qdisc"] == q].sort_values("bulk").iterrows():
            x, y = ecdf(r["delays"])
            ax.step(x, y, where="post", label=f"{r['bulk']} TCP", lw=1.2)
        ax.set_title(LABELS[q] + (" (reference)" if q == "droptail" else ""))
        ax.set_xlim(0, 220 if q == "droptail" else xmax)
        ax.grid(alpha=0.3)
        ax.set_xlabel("thin-stream queueing delay (ms)")
    for ax in axes[:, 0]:
        ax.set_ylabel("CDF")
    axes.flat[0].legend(loc="lower right", fontsize=8)
    fig.suptitle("Seed 001 Fig. 3-4: gaming stream (100 B / 638 ms, TCP) beside 1-5 bulk TCP flows, 2 Mbit/s, RTT 100 ms")
    fig.tight_layout()
    p1 = img / "fig3-4-gaming-cdf.png"
    fig.savefig(p1, dpi=80)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for q in order:
        if q == "droptail":
            continue
        g = df[df["qdisc"] == q].sort_values("bulk")
        ax.plot(g["bulk"], g["p50"], marker="o", label=f"{LABELS[q]} median")
    ax.set_xlabel("bulk TCP flows")
    ax.set_ylabel("thin-stream queueing delay, median (ms)")
    ax.set_xticks(range(1, 6))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    p2 = img / "fig3-4-gaming-median.png"
    fig.savefig(p2, dpi=80)
    plt.close(fig)
    return [p1, p2]


def plot_mixed(df: pd.DataFrame, img: Path) -> Path:
    plt = _plt()
    cases = [c for c in ("case1", "case2", "case3") if c in set(df["case"])]
    qs = [q for q in ("fq_codel", "fq_codel_wp", "fq_codel_wp_100ms", "codel", "sfq") if q in set(df["qdisc"])]
    fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 4.2), sharey=True, squeeze=False)
    titles = {"case1": "case 1: 1 game, 1 TCP, 1 VoIP", "case2": "case 2: 1 game, 1 TCP, 5 VoIP", "case3": "case 3: 1 game, 5 TCP, 1 VoIP"}
    for ax, c in zip(axes[0], cases):
        data, pos, colors = [], [], []
        for i, q in enumerate(qs):
            for j, s in enumerate(("gaming", "voip")):
                r = df[(df["case"] == c) & (df["qdisc"] == q) & (df["stream"] == s)]
                if len(r):
                    data.append(r.iloc[0]["delays"])
                    pos.append(i * 3 + j)
                    colors.append("tab:blue" if s == "gaming" else "tab:orange")
        bp = ax.boxplot(data, positions=pos, widths=0.8, whis=(5, 95), showfliers=False, patch_artist=True)
        for patch, col in zip(bp["boxes"], colors):
            patch.set_facecolor(col)
            patch.set_alpha(0.6)
        ax.set_xticks([i * 3 + 0.5 for i in range(len(qs))])
        ax.set_xticklabels([LABELS[q] for q in qs], rotation=30, ha="right", fontsize=8)
        ax.set_title(titles[c], fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("queueing delay (ms); box = quartiles, whiskers 5-95 %")
    from matplotlib.patches import Patch

    axes[0][-1].legend(handles=[Patch(color="tab:blue", alpha=0.6, label="gaming"), Patch(color="tab:orange", alpha=0.6, label="VoIP")], fontsize=8)
    fig.suptitle("Seed 001 Fig. 5: thin TCP streams with different inter-packet times")
    fig.tight_layout()
    p = img / "fig5-mixed.png"
    fig.savefig(p, dpi=80)
    plt.close(fig)
    return p


def plot_throughput(df: pd.DataFrame, img: Path, panel: str, x: str, name: str, title: str,
                    residual: Optional[callable] = None, xlabel: str = "", logx: bool = False) -> Path:
    plt = _plt()
    panels = list(dict.fromkeys(df[panel])) if panel else [None]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4), sharey=True, squeeze=False)
    for ax, pv in zip(axes[0], panels):
        sub = df if pv is None else df[df[panel] == pv]
        for q in dict.fromkeys(sub["qdisc"]):
            g = sub[sub["qdisc"] == q].groupby(x)["tcp_mbps"]
            m, lo, hi = g.mean(), g.min(), g.max()
            ax.errorbar(m.index, m.values, yerr=[m.values - lo.values, hi.values - m.values], marker="o", capsize=3, label=LABELS.get(q, q))
        if residual is not None:
            xs = np.array(sorted(set(sub[x])))
            ax.plot(xs, [residual(v, pv) for v in xs], "k--", lw=1, label="2 Mbit/s - sparse load")
        ax.set_title(str(pv) if pv is not None else "")
        if logx:
            ax.set_xscale("log")
        ax.set_xlabel(xlabel or x)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel("TCP throughput at the bottleneck (Mbit/s)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    p = img / name
    fig.savefig(p, dpi=80)
    plt.close(fig)
    return p


def _fmt(v: float, nd: int = 1) -> str:
    return "–" if v != v else f"{v:.{nd}f}"


def table_gaming(df: pd.DataFrame) -> str:
    lines = ["| discipline | bulk flows | thin p50 (ms) | p90 | p99 | thin loss | bulk Mbit/s | utilisation |", "|---|---|---|---|---|---|---|---|"]
    for _, r in df.sort_values(["qdisc", "bulk"], key=lambda s: s.map(lambda v: list(LABELS).index(v) if v in LABELS else v)).iterrows():
        lines.append(f"| {LABELS[r['qdisc']]} | {r['bulk']} | {_fmt(r['p50'])} | {_fmt(r['p90'])} | {_fmt(r['p99'])} | "
                     f"{100 * r['thin_loss']:.1f} % | {r['bulk_mbps']:.2f} | {r['utilisation']:.3f} |")
    return "\n".join(lines)


def table_mixed(df: pd.DataFrame) -> str:
    lines = ["| case | discipline | stream | p50 (ms) | p90 | p99 | loss |", "|---|---|---|---|---|---|---|"]
    for _, r in df.iterrows():
        lines.append(f"| {r['case']} | {LABELS[r['qdisc']]} | {r['stream']} | {_fmt(r['p50'])} | {_fmt(r['p90'])} | {_fmt(r['p99'])} | {100 * r['loss']:.1f} % |")
    return "\n".join(lines)


def table_throughput(df: pd.DataFrame, panel: Optional[str], x: str) -> str:
    keys = ([panel] if panel else []) + ["qdisc", x]
    g = df.groupby(keys, sort=False).agg(tcp_m=("tcp_mbps", "mean"), tcp_min=("tcp_mbps", "min"), thin_m=("thin_mbps", "mean"),
                                        thin_drops_m=("thin_drops", "mean"), newf=("new_flows_mean", "mean")).reset_index()
    head = ([panel] if panel else []) + ["discipline", x, "TCP Mbit/s (mean)", "TCP min", "thin Mbit/s", "thin drops/run", "mean new-list length"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in g.iterrows():
        cells = ([str(r[panel])] if panel else []) + [LABELS.get(r["qdisc"], r["qdisc"]), str(r[x]), f"{r['tcp_m']:.3f}", f"{r['tcp_min']:.3f}",
                                                     f"{r['thin_m']:.3f}", f"{r['thin_drops_m']:.0f}", _fmt(r["newf"], 2)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Driver


def _sweep(study: str, out: Path, jobs: Optional[int], repeats: Optional[int], duration: Optional[str]) -> Path:
    from sojourn import sweeps as sw

    src = EXP_DIR / f"{'starvation' if study == 'starvation' else study}.sweep.toml"
    dest = out / study
    if duration is not None:
        # A shortened copy of the sweep: same points, a `set` of the duration.
        from .._config import tomllib

        spec = tomllib.loads(src.read_text())
        spec.setdefault("set", {})["duration"] = duration
        tmp = EXP_DIR / f".{study}-{duration}.sweep.toml"
        tmp.write_text(_dump_toml(spec))
        try:
            sw.run_sweep(tmp, dest, jobs=jobs, repeats=repeats)
        finally:
            tmp.unlink(missing_ok=True)
    else:
        sw.run_sweep(src, dest, jobs=jobs, repeats=repeats)
    return dest


def _dump_toml(spec: dict) -> str:
    """Minimal TOML writer for sweep specs (tables of scalars, lists and inline tables)."""

    def val(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {val(x)}" for k, x in v.items()) + " }"
        raise TypeError(type(v))

    lines = []
    for k, v in spec.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v) and k in ("axis", "variant"):
            continue
        lines.append(f"{k} = {val(v)}")
    for k in ("variant", "axis"):
        for t in spec.get(k, []):
            lines.append(f"\n[[{k}]]")
            lines.extend(f"{kk} = {val(vv)}" for kk, vv in t.items())
    return "\n".join(lines) + "\n"


def report(out: Path, img: Path, studies: Iterable[str]) -> str:
    img.mkdir(parents=True, exist_ok=True)
    parts = []
    if "gaming" in studies and (out / "gaming" / "runs.parquet").exists():
        df = collect_gaming(out / "gaming")
        plot_gaming(df, img)
        parts.append("### Figures 3-4 (gaming stream beside bulk TCP)\n\n" + table_gaming(df))
    if "mixed" in studies and (out / "mixed" / "runs.parquet").exists():
        df = collect_mixed(out / "mixed")
        plot_mixed(df, img)
        parts.append("### Figure 5 (gaming and VoIP streams)\n\n" + table_mixed(df))
    if "starvation" in studies and (out / "starvation" / "runs.parquet").exists():
        df = collect_throughput(out / "starvation", ["variant", "qdisc"], "thin")

        def residual(n, variant):
            frame = 142 if variant == "frame142" else 100
            return max(0.0, (LINK_RATE_BPS - n * frame * 8 / 0.030) / 1e6)

        plot_throughput(df, img, "variant", "thin", "fig6-starvation.png",
                        "Seed 001 Fig. 6: one bulk TCP flow beside N thin UDP flows (a packet every 30 ms each)",
                        residual, "thin UDP flows")
        parts.append("### Figure 6 (starvation)\n\n" + table_throughput(df, "variant", "thin"))
    if "dos" in studies and (out / "dos" / "runs.parquet").exists():
        df = collect_throughput(out / "dos", ["qdisc"], "variant").rename(columns={"variant": "flows"})
        df["load"] = df["load"].map(lambda v: f"sparse load {v:.1f} Mbit/s")
        plot_throughput(df, img, "load", "flows", "dos-new-list.png",
                        "DoS: one bulk TCP flow beside N sparse UDP flows (100-B frames) of a fixed total load",
                        lambda n, pv: 2.0 - float(pv.split()[2]), "sparse flows (log scale)", logx=True)
        parts.append("### DoS (many sparse flows, fixed total load)\n\n" + table_throughput(df, "load", "flows"))
    text = "\n\n".join(parts) + "\n"
    (img / "tables.md").write_text(text)
    return text


#: the cheap variant (tests/python/test_repro_pages.py): the gaming stream beside five bulk
#: flows, 40 simulated seconds per discipline (5-s warm-up)
def ci_block(out: Optional[Path] = None) -> str:
    """Runs the cheap variant and returns the page's ``ci`` block (``out`` is unused: the
    runs are kept in memory)."""
    rows = ["| qdisc | thin packets | median delay (ms) | p90 delay (ms) | max delay (ms) |", "|---|---|---|---|---|"]
    for q in ("fq_codel", "codel", "sfq", "fq_codel_wp", "fq_codel_wp_100ms"):
        d = run_gaming(q, 5, duration="40s", warmup="5s")["delays_ms"]
        rows.append(f"| {q} | {len(d)} | {np.median(d):.4f} | {np.percentile(d, 90):.4f} | {np.max(d):.4f} |")
    return ("The cheap variant (`gaming.toml` with 5 bulk flows, 40 s, 5-s warm-up, seed 1, per discipline; "
            "`sojourn.repro.thin_streams.ci_block`) gives:\n\n" + "\n".join(rows) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sojourn.repro.thin_streams", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/thin-streams", help="sweep output directory (one sub-directory per study)")
    ap.add_argument("--img", default=None, help="where plots and tables.md go (default: <out>/img; "
                                                "docs/repro/img/thin-streams with --update-docs)")
    ap.add_argument("--update-docs", action="store_true",
                    help="write plots and tables.md into docs/repro/img/thin-streams and rewrite the page's "
                         "generated blocks (every study, as shipped)")
    ap.add_argument("--studies", default=",".join(STUDIES), help="comma-separated subset of " + ",".join(STUDIES))
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None, help="override the sweep files' repeats")
    ap.add_argument("--duration", default=None, help='shorten every run (e.g. "60s")')
    ap.add_argument("--report-only", action="store_true", help="only plot/tabulate finished sweeps")
    a = ap.parse_args(argv)
    studies = [s.strip() for s in a.studies.split(",") if s.strip()]
    bad = [s for s in studies if s not in STUDIES]
    if bad:
        ap.error(f"unknown studies {bad}; known: {', '.join(STUDIES)}")
    if a.update_docs and (studies != list(STUDIES) or a.repeats is not None or a.duration):
        ap.error("--update-docs regenerates the page from every study as shipped: no --studies/--repeats/--duration")
    from . import pages

    out = Path(a.out)
    img = pages.plot_dir(out, a.img, a.update_docs, "thin-streams")
    if not a.report_only:
        from sojourn._config import ConfigError

        for s in studies:
            try:
                _sweep(s, out, a.jobs, a.repeats, a.duration)
            except ConfigError as e:  # e.g. --duration shorter than a warm-up
                sys.stderr.write(f"thin_streams: {e}\n")
                return 2
    text = report(out, img, studies)
    sys.stdout.write(text)
    if a.update_docs:
        pages.replace_blocks(pages.DOCS / "thin-streams.md",
                             {"provenance": pages.provenance("thin_streams", prose_generated=False), "ci": ci_block()})
        print(f"updated {pages.DOCS / 'thin-streams.md'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
