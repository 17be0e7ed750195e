"""L4S through DualPI2 (RFC 9332): TCP Prague and DCTCP against CUBIC, and overload
protection. Generates docs/repro/l4s.md::

    python -m sojourn.repro.l4s --update-docs      # runs every experiment, rewrites the page
    python -m sojourn.repro.l4s --out results/l4s  # the same numbers, plots under results/l4s/img
    python -m sojourn.repro.l4s --map-only         # just the coupling map across rates and RTTs

Runs ``experiments/l4s/{prague-vs-cubic,dctcp-vs-cubic,overload}.toml`` (the overload file
twice: Linux's default ``drop_on_overload`` and tc's ``overflow``) and reports, after the
warm-up, per flow: goodput, mean smoothed RTT, the window it implies, its CE-mark or drop
fraction at the bottleneck and the per-packet sojourn (mean, p99) — and from DualPI2's own
probes the mean base probability p', p_CL = k·p' and p_C = p'². The coupling law's
prediction (RFC 9332 §2.1, Appendix B): a scalable flow's window is 2/p_L, a Reno-friendly
classic flow's 1.22/√p_C, so with p_L = k·p' and p_C = p'² the windows stand in the ratio
2/(1.22·k) = 0.82 for k = 2, whatever p' is, and the rates in that ratio times
RTT_C / RTT_L.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from ..results import Result

#: (run name, experiment file, overrides)
RUNS = (
    ("prague-vs-cubic", "prague-vs-cubic.toml", {}),
    # the same with Accurate ECN feedback for the Prague flow (RFC 9768, docs/transport.md)
    ("prague-accecn-vs-cubic", "prague-vs-cubic.toml", {"workload[0].ecn": "accecn"}),
    ("dctcp-vs-cubic", "dctcp-vs-cubic.toml", {}),
    ("overload-drop", "overload.toml", {}),
    ("overload-overflow", "overload.toml", {"topology.bottleneck.qdisc.drop_on_overload": False}),
)

#: Reno's window constant sqrt(3/2) and the scalable one (RFC 9332 Appendix B)
RENO_C = 1.22
SCALABLE_C = 2.0
K = 2


#: the runs with one L4S and one classic TCP flow (the coupling law's set-up)
COUPLED = ("prague-vs-cubic", "prague-accecn-vs-cubic", "dctcp-vs-cubic")

#: A scalable flow that answers CE at most once per round (the stack's CWR state, which
#: both tcp_prague and tcp_dctcp use) under random marks: with m = p·W marks per round, a
#: cycle is the CWR round plus the wait for the next mark (1/m rounds on average), growth
#: is one packet per round throughout and the cut is α·W/2 = m/2 once per cycle, so
#: m/2 = 1 + 1/m, m = 1 + √3 — the window is (1 + √3)/p ≈ 2.73/p, not the per-mark 2/p
#: RFC 9332 Appendix B assumes. With p_L = k·p' and the classic 1.22/√p_C = 1.22/p', the
#: window ratio becomes 2.73/(1.22·k) = 1.12 instead of 0.82 (k = 2).
ONCE_PER_ROUND_C = 1.0 + math.sqrt(3.0)

#: The coupling map (issue 40 §1): both scalable CCs against CUBIC over these bottleneck
#: rates (Mbit/s) and base RTTs (ms; 2 ms of it on the four 0.5-ms access links).
MAP_RATES_MBPS = (10, 40, 100, 400, 1000)
MAP_RTTS_MS = (10, 20, 50, 100)
MAP_CCS = ("prague", "dctcp")
#: Cells whose bandwidth-delay product exceeds this many packets run 240 s with a 120-s
#: warm-up instead of 40 s with 10 s: one packet of growth per round needs that long to
#: settle there.
MAP_LONG_BDP_PKTS = 2000

_MAP_TOML = """name = "l4s-map-{cc}-{rate}m-{rtt}ms"
description = "coupling map cell: {cc} vs CUBIC through DualPI2, {rate} Mbit/s, {rtt} ms base RTT"
duration = "{duration}"
warmup = "{warmup}"
seed = 1

[topology]
kind = "dumbbell"
pairs = 2
bottleneck = {{ rate = "{rate}Mbit", delay = "{owd_ms}ms", qdisc = {qdisc} }}
access = {{ rate = "{access_mbps}Mbit", delay = "0.5ms" }}

[[workload]]
kind = "bulk"
pair = 0
cc = "{cc}"

[[workload]]
kind = "bulk"
pair = 1
cc = "cubic"

[record]
interval = "100ms"
links = ["bottleneck"]
flows = true
packets = ["bottleneck"]
packet_sample = {sample}
"""


def map_cell_toml(cc: str, rate_mbps: int, rtt_ms: int) -> str:
    """The experiment file of one map cell: one ``cc`` flow (DCTCP sends ECT(0), so its
    DualPI2 classifies with ``any_ect``) and one CUBIC flow, equal base RTTs."""
    long = rate_mbps * 1e6 * rtt_ms / 1e3 / (1500 * 8) > MAP_LONG_BDP_PKTS
    qdisc = '{ kind = "dualpi2", ecn_mask = "any_ect" }' if cc == "dctcp" else '"dualpi2"'
    return _MAP_TOML.format(cc=cc, rate=rate_mbps, rtt=rtt_ms, owd_ms=(rtt_ms - 2) / 2, qdisc=qdisc,
                            duration="240s" if long else "40s", warmup="120s" if long else "10s",
                            access_mbps=max(1000, 10 * rate_mbps), sample=min(0.25, 25.0 / rate_mbps))


def coupling_map(out: Path) -> pd.DataFrame:
    """Runs (or reuses) every map cell under ``out``; one row per cell."""
    import sojourn

    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for cc in MAP_CCS:
        for rate in MAP_RATES_MBPS:
            for rtt in MAP_RTTS_MS:
                name = f"{cc}-{rate}m-{rtt}ms"
                d = out / name
                if not (d / "summary.json").exists():
                    f = out / f"{name}.toml"
                    f.write_text(map_cell_toml(cc, rate, rtt))
                    sojourn.run(f).write(d)
                df, pr = flow_stats(d)
                c = coupling(df, pr)
                l = df[df.cc == cc].iloc[0]
                cu = df[df.cc == "cubic"].iloc[0]
                rtt_ratio = cu.srtt_ms / l.srtt_ms
                rows.append({
                    "cc": cc, "rate_mbps": rate, "rtt_ms": rtt,
                    "l_mbps": l.goodput_mbps, "c_mbps": cu.goodput_mbps,
                    "rate_ratio": c["rate_ratio"], "law": c["rate_ratio_pred"],
                    "law_once_per_round": ONCE_PER_ROUND_C / (RENO_C * K) * rtt_ratio,
                    "ce_frac": l.ce_frac, "alpha": l.alpha,
                    "w_times_p": l.window_pkts * l.ce_frac if l.ce_frac > 0 else math.nan,
                    "utilisation": pr["utilisation"],
                    "duration_s": float(Result.read(d).summary["duration_s"]),
                })
    return pd.DataFrame(rows)


def md_map(m: pd.DataFrame) -> str:
    rows = ["| cc | rate (Mbit/s) | base RTT (ms) | L / C goodput (Mbit/s) | rate ratio | law (2/p) | "
            "law (once per round) | CE fraction | mean α | W·p | utilisation |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in m.itertuples():
        flag = "" if r.utilisation >= 0.95 else " (not settled)"
        wp = "–" if r.w_times_p != r.w_times_p else f"{r.w_times_p:.2f}"
        rows.append(f"| {r.cc} | {r.rate_mbps} | {r.rtt_ms} | {r.l_mbps:.1f} / {r.c_mbps:.1f} | "
                    f"{r.rate_ratio:.2f} | {r.law:.2f} | {r.law_once_per_round:.2f} | {100 * r.ce_frac:.2f}% | "
                    f"{100 * r.alpha:.2f}% | {wp} | {100 * r.utilisation:.1f}%{flag} |")
    settled = m[m.utilisation >= 0.95]
    out = ["\n".join(rows), ""]
    for cc in MAP_CCS:
        s = settled[settled.cc == cc]
        if not len(s):
            continue
        q = s.rate_ratio / s.law_once_per_round
        out.append(f"- **{cc}**, the {len(s)} settled cells: rate ratio ÷ the once-per-round law between "
                   f"{q.min():.2f} and {q.max():.2f} (median {q.median():.2f}); ÷ the 2/p law median "
                   f"{(s.rate_ratio / s.law).median():.2f}; W·p median {s.w_times_p.median():.2f} "
                   f"(per-mark response: 2, once per round: {ONCE_PER_ROUND_C:.2f}); mean α ÷ CE fraction "
                   f"median {(s.alpha / s.ce_frac).median():.2f}.")
    return "\n".join(out) + "\n"


def plot_map(m: pd.DataFrame, img: Path) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(1, len(MAP_CCS), figsize=(4.5 * len(MAP_CCS), 3.2), sharey=True, squeeze=False)
    for a, cc in zip(ax[0], MAP_CCS):
        for rtt in MAP_RTTS_MS:
            s = m[(m.cc == cc) & (m.rtt_ms == rtt)].sort_values("rate_mbps")
            y = s.rate_ratio / s.law_once_per_round
            a.plot(s.rate_mbps, y, marker="o", label=f"{rtt} ms")
            un = s[s.utilisation < 0.95]
            a.plot(un.rate_mbps, (un.rate_ratio / un.law_once_per_round), "x", color="k", ms=9)
        a.axhline(1.0, color="grey", lw=0.8)
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_title(f"{cc} vs CUBIC through DualPI2", fontsize=9)
        a.set_xlabel("bottleneck rate (Mbit/s)")
        a.set_ylabel("rate ratio ÷ once-per-round law")
        a.legend(fontsize=7, title="base RTT", title_fontsize=7)
    fig.tight_layout()
    fig.savefig(img / "coupling-map.png", dpi=80)
    plt.close(fig)
    return "coupling-map.png"


def default_exp_dir() -> Path:
    here = Path(__file__).resolve().parents[3] / "experiments" / "l4s"
    return here if here.is_dir() else Path("experiments/l4s")


def run(out: Path, exp_dir: Optional[Path] = None, only: Optional[Sequence[str]] = None,
        duration: Optional[str] = None) -> dict:
    """Runs (or reuses, if its summary.json exists) each experiment; returns name -> run dir."""
    import sojourn

    exp_dir = exp_dir or default_exp_dir()
    dirs = {}
    for name, f, ov in RUNS:
        if only and name not in only:
            continue
        d = out / name
        if not (d / "summary.json").exists():
            sojourn.run(exp_dir / f, duration=duration, overrides=ov or None).write(d)
        dirs[name] = d
    return dirs


def _after(s: pd.Series, t0: float) -> pd.Series:
    return s[s.index >= t0]


def flow_stats(run_dir: Path) -> tuple:
    """(per-flow table, bottleneck probes) after the warm-up."""
    r = Result.read(run_dir)
    t0 = float(r.summary.get("warmup_s", 0.0) or 0.0)
    fl = r.flows
    pk = r.packets
    pk = pk[(pk.time_s >= t0) & (pk.link == "bottleneck")]
    rows = []
    for f in fl.itertuples():
        ent = f"flow{f.flow}"
        gs = r.series(ent, "goodput_bps")
        good = _after(gs, t0).mean()
        # the overload runs' unresponsive flow sends from 20 s to 40 s
        good_ov = gs[(gs.index >= 20.0) & (gs.index < 40.0)].mean()
        try:
            srtt = _after(r.series(ent, "srtt_ms"), t0).mean()
        except (KeyError, ValueError):
            srtt = math.nan
        try:
            alpha = float(_after(r.series(ent, "dctcp_alpha"), t0).mean())
        except (KeyError, ValueError):
            alpha = math.nan
        p = pk[pk.flow == f.flow]
        dq = p[p.event == "dequeue"]
        drops = int((p.event != "dequeue").sum())
        ce = float((dq.ecn == 3).mean()) if len(dq) else math.nan
        rows.append({"flow": int(f.flow), "cc": f.cc or "udp", "goodput_mbps": good / 1e6,
                     "goodput_20_40_mbps": good_ov / 1e6, "srtt_ms": srtt,
                     "window_pkts": good * srtt / 1e3 / (1448 * 8) if srtt == srtt else math.nan,
                     "ce_frac": ce, "alpha": alpha, "drop_frac": drops / max(1, len(p)),
                     "sojourn_mean_ms": float(dq.sojourn_ms.mean()), "sojourn_p99_ms": float(dq.sojourn_ms.quantile(0.99)),
                     # (prague: ECT(1); dctcp: ECT(0), in these runs with any_ect)
                     "queue": "L" if f.cc in ("prague", "dctcp") else "C"})
    probes = {m: float(_after(r.series("bottleneck", m), t0).mean())
              for m in ("prob", "prob_l", "prob_c", "delay_l_ms", "delay_c_ms")}
    b = r.summary["links"]["bottleneck"]
    probes["utilisation"] = float(b["utilisation"])
    probes["tail_drops"] = int(b["drops"].get("overlimit", 0))
    probes["aqm_drops"] = int(b["drops"].get("aqm", 0))
    probes["ecn_marks"] = int(b["ecn_marks"])
    return pd.DataFrame(rows), probes


def coupling(df: pd.DataFrame, probes: dict) -> dict:
    """The coupling law's predictions against what the run measured (two TCP flows, one
    per queue)."""
    l = df[df.cc.isin(["prague", "dctcp"])].iloc[0]
    c = df[df.cc == "cubic"].iloc[0]
    window_pred = SCALABLE_C / (RENO_C * K)
    return {
        "rate_ratio": l.goodput_mbps / c.goodput_mbps,
        "rate_ratio_pred": window_pred * c.srtt_ms / l.srtt_ms,
        "window_ratio": l.window_pkts / c.window_pkts,
        "window_ratio_pred": window_pred,
        "l_share": l.goodput_mbps / (l.goodput_mbps + c.goodput_mbps),
        "p_c_meas": c.drop_frac, "p_c_probe": probes["prob_c"],
        "p_l_meas": l.ce_frac, "p_cl_probe": probes["prob_l"],
        "law_from_meas": (l.ce_frac / K) ** 2,
    }


def table(out: Path, dirs: dict) -> dict:
    res = {}
    for name, d in dirs.items():
        df, pr = flow_stats(d)
        res[name] = {"flows": df, "probes": pr}
        if name in COUPLED:
            res[name]["coupling"] = coupling(df, pr)
    return res


def plot(dirs: dict, img: Path) -> list:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    made = []
    # 1. goodput over time, Prague/DCTCP vs CUBIC
    pairs = [n for n in ("prague-vs-cubic", "dctcp-vs-cubic") if n in dirs]
    if pairs:
        fig, ax = plt.subplots(1, len(pairs), figsize=(4.5 * len(pairs), 3), squeeze=False)
        for a, n in zip(ax[0], pairs):
            r = Result.read(dirs[n])
            for f in r.flows.itertuples():
                s = r.series(f"flow{f.flow}", "goodput_bps").rolling(10, min_periods=1).mean()
                a.plot(s.index, s / 1e6, label=f.cc)
            a.set_title(n, fontsize=9)
            a.set_xlabel("time (s)")
            a.set_ylabel("goodput (Mbit/s, 1-s mean)")
            a.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(img / "goodput.png", dpi=80)
        plt.close(fig)
        made.append("goodput.png")
    # 2. per-packet sojourn CDF at the bottleneck, per flow
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for n in pairs:
        r = Result.read(dirs[n])
        pk = r.packets
        pk = pk[(pk.event == "dequeue") & (pk.time_s >= float(r.summary.get("warmup_s", 0.0) or 0.0))]
        for f in r.flows.itertuples():
            x = np.sort(pk[pk.flow == f.flow].sojourn_ms.to_numpy())
            if len(x):
                ax.plot(x, np.arange(1, len(x) + 1) / len(x), label=f"{f.cc} ({n.split('-')[0]} run)")
    ax.set_xscale("log")
    ax.axvline(1.0, color="grey", ls=":", lw=0.8)
    ax.axvline(15.0, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("sojourn at the bottleneck (ms, log)")
    ax.set_ylabel("CDF")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(img / "sojourn-cdf.png", dpi=80)
    plt.close(fig)
    made.append("sojourn-cdf.png")
    # 3. overload: queue delays over time in both modes
    ov = [n for n in ("overload-drop", "overload-overflow") if n in dirs]
    if ov:
        fig, ax = plt.subplots(1, len(ov), figsize=(4.5 * len(ov), 3), squeeze=False)
        for a, n in zip(ax[0], ov):
            r = Result.read(dirs[n])
            for m, lab in (("delay_l_ms", "L queue head"), ("delay_c_ms", "C queue head")):
                s = r.series("bottleneck", m)
                a.plot(s.index, s, label=lab)
            a.set_yscale("symlog", linthresh=1.0)
            a.set_title(n, fontsize=9)
            a.set_xlabel("time (s)")
            a.set_ylabel("queue delay (ms)")
            a.axvspan(20, 40, color="grey", alpha=0.15)
            a.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(img / "overload.png", dpi=80)
        plt.close(fig)
        made.append("overload.png")
    return made


def md_flows(res: dict) -> str:
    rows = ["| run | flow | cc | queue | goodput (Mbit/s) | SRTT (ms) | window (pkts) | CE-marked | dropped | "
            "sojourn mean (ms) | sojourn p99 (ms) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, v in res.items():
        for f in v["flows"].itertuples():
            rows.append(f"| {name} | {f.flow} | {f.cc} | {f.queue} | {f.goodput_mbps:.2f} | {f.srtt_ms:.1f} | "
                        f"{f.window_pkts:.1f} | {100 * f.ce_frac:.2f}% | {100 * f.drop_frac:.2f}% | "
                        f"{f.sojourn_mean_ms:.3f} | {f.sojourn_p99_ms:.3f} |")
    rows += ["", "| run | mean p' | mean p_CL = k·p' | mean p_C = p'² | L head delay (ms) | C head delay (ms) | "
             "utilisation | CE marks | AQM drops | tail drops |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, v in res.items():
        p = v["probes"]
        rows.append(f"| {name} | {p['prob']:.4f} | {p['prob_l']:.4f} | {p['prob_c']:.5f} | {p['delay_l_ms']:.3f} | "
                    f"{p['delay_c_ms']:.2f} | {100 * p['utilisation']:.1f}% | {p['ecn_marks']} | {p['aqm_drops']} | "
                    f"{p['tail_drops']} |")
    return "\n".join(rows) + "\n"


def md_findings(res: dict) -> str:
    out = []
    for name in COUPLED:
        if name not in res:
            continue
        c = res[name]["coupling"]
        fl = res[name]["flows"]
        l = fl[fl.cc.isin(["prague", "dctcp"])].iloc[0]
        cu = fl[fl.cc == "cubic"].iloc[0]
        out.append(
            f"- **{name}**: {l.cc} {l.goodput_mbps:.1f} Mbit/s vs CUBIC {cu.goodput_mbps:.1f} Mbit/s "
            f"({100 * c['l_share']:.0f}% / {100 - 100 * c['l_share']:.0f}%); rate ratio {c['rate_ratio']:.2f}, the "
            f"coupling law predicts {c['rate_ratio_pred']:.2f} (window ratio 0.82 × RTT ratio "
            f"{cu.srtt_ms:.1f}/{l.srtt_ms:.1f} ms), or {c['rate_ratio_pred'] * ONCE_PER_ROUND_C / SCALABLE_C:.2f} "
            f"for a response once per round (window ratio 1.12); measured window ratio {c['window_ratio']:.2f}. "
            f"L-queue sojourn p99 {l.sojourn_p99_ms:.3f} ms (mean {l.sojourn_mean_ms:.3f}) against the classic "
            f"queue's {cu.sojourn_p99_ms:.1f} ms (mean {cu.sojourn_mean_ms:.1f}; target 15 ms). Marking: "
            f"{100 * c['p_l_meas']:.2f}% of {l.cc}'s packets CE (mean p_CL probe {100 * c['p_cl_probe']:.2f}%, the "
            f"rest is the 1-ms step), CUBIC dropped {100 * c['p_c_meas']:.3f}% (mean p_C probe "
            f"{100 * c['p_c_probe']:.3f}%). Its mean α {l.alpha:.4f} against the CE fraction of its packets "
            f"{l.ce_frac:.4f}.")
    for name in ("overload-drop", "overload-overflow"):
        if name not in res:
            continue
        fl = res[name]["flows"]
        p = res[name]["probes"]
        u = fl[fl.cc == "udp"].iloc[0]
        l = fl[fl.cc == "prague"].iloc[0]
        cu = fl[fl.cc == "cubic"].iloc[0]
        out.append(
            f"- **{name}**: while the unresponsive ECT(0) flow sends (48 Mbit/s offered, 20–40 s) it gets "
            f"{u.goodput_20_40_mbps:.1f} Mbit/s, Prague {l.goodput_20_40_mbps:.2f} and CUBIC "
            f"{cu.goodput_20_40_mbps:.2f} Mbit/s. Over 10–60 s: {100 * u.drop_frac:.1f}% of its packets dropped and "
            f"{100 * u.ce_frac:.1f}% CE-marked; its sojourn p99 is {u.sojourn_p99_ms:.0f} ms; Prague averages "
            f"{l.goodput_mbps:.1f} Mbit/s with an L-queue p99 of {l.sojourn_p99_ms:.3f} ms; CUBIC "
            f"{cu.goodput_mbps:.1f} Mbit/s; {p['tail_drops']} tail drops.")
    return "\n".join(out) + "\n"


CI_DURATION = "15s"


def ci_block(out: Path) -> str:
    """The cheap variant: prague-vs-cubic for 15 simulated seconds."""
    dirs = run(out, only=["prague-vs-cubic"], duration=CI_DURATION)
    df, pr = flow_stats(dirs["prague-vs-cubic"])
    c = coupling(df, pr)
    rows = ["| flow | cc | goodput (Mbit/s) | SRTT (ms) | sojourn p99 (ms) |", "|---|---|---|---|---|"]
    for f in df.itertuples():
        rows.append(f"| {f.flow} | {f.cc} | {f.goodput_mbps:.3f} | {f.srtt_ms:.2f} | {f.sojourn_p99_ms:.3f} |")
    return (f"The cheap variant (prague-vs-cubic, {CI_DURATION} simulated; `sojourn.repro.l4s.ci_block`) gives "
            f"mean p' {pr['prob']:.5f}, rate ratio {c['rate_ratio']:.3f} (predicted {c['rate_ratio_pred']:.3f}):\n\n"
            + "\n".join(rows) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    from . import pages

    ap = argparse.ArgumentParser(prog="python -m sojourn.repro.l4s", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/repro-l4s")
    ap.add_argument("--img", default=None, help="plots here (default <out>/img; docs/repro/img/l4s with --update-docs)")
    ap.add_argument("--update-docs", action="store_true", help="rewrite docs/repro/l4s.md's generated blocks and plots")
    ap.add_argument("--exp-dir", default=None)
    ap.add_argument("--map-only", action="store_true",
                    help="only the coupling map across rates and RTTs (40 cells; a few minutes of CPU)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    t0 = time.perf_counter()
    if a.map_only:
        m = coupling_map(out / "map")
        print(md_map(m))
        img = pages.plot_dir(out, a.img, a.update_docs, "l4s")
        print(f"plot: {img / plot_map(m, img)}")
        if a.update_docs:
            pages.replace_blocks(pages.DOCS / "l4s.md", {"map": md_map(m)})
            print(f"updated {pages.DOCS / 'l4s.md'} (map block)")
        return 0
    dirs = run(out, Path(a.exp_dir) if a.exp_dir else None)
    res = table(out, dirs)
    wall = time.perf_counter() - t0
    print(md_flows(res))
    print(md_findings(res))
    print(f"wall seconds (this call; cached runs cost nothing): {wall:.1f}")
    img = pages.plot_dir(out, a.img, a.update_docs, "l4s")
    for p in plot(dirs, img):
        print(f"plot: {img / p}")
    m = coupling_map(out / "map")
    print(md_map(m))
    print(f"plot: {img / plot_map(m, img)}")
    (out / "report.json").write_text(json.dumps(
        {k: {"flows": v["flows"].to_dict("records"), "probes": v["probes"], "coupling": v.get("coupling")}
         for k, v in res.items()}, indent=1, default=str) + "\n")
    if a.update_docs:
        blocks = {"provenance": pages.provenance("l4s"), "results": md_flows(res), "findings": md_findings(res),
                  "map": md_map(m), "ci": ci_block(out / "ci")}
        pages.replace_blocks(pages.DOCS / "l4s.md", blocks)
        print(f"updated {pages.DOCS / 'l4s.md'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
