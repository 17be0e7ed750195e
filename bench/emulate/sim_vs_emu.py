"""Simulator vs live emulation on the same experiment files (issue #20), as markdown tables
for docs/emulate.md ("Simulator vs emulation"):

1. ``aqm``: CUBIC bulk flows on a dumbbell (10 ms one-way bottleneck delay) through CoDel,
   FQ-CoDel and PIE at 10 and 100 Mbit/s: utilisation and mean qdisc sojourn of the
   bottleneck after warm-up from both engines (the live histogram is reset at the end of
   warm-up as the simulator's is), their differences, Little's-law delay from the queue
   time series as a cross-check, drops after warm-up and the senders' mean SRTT.
2. ``seed000``: seed 000's structure at 100 Mbit/s (experiments/repro/age-based/age-1g.toml
   with the NIC at 100 Mbit/s: 80 closed-loop CUBIC actors, think Exp(1 s), discrete
   bounded Pareto sizes, pfifo_fast without and with the seed's ``ct bytes`` classifier):
   mean FCT of the flows started after warm-up that completed, and the age-based gain
   (mean FCT without / with the classifier) from both engines.

3. ``anchor``: the real-Linux anchor of the sending host (experiments/emulate/sender-side-100m.toml,
   bench/linux/sender_side.sh's set-up: HTB 100 Mbit/s on the client's veth, ``shaper = true``,
   one CUBIC bulk flow and a 500-kB transfer 2 s in, FIFO or 2LPS at 633 kB): the transfer's
   FCT, the bulk flow's goodput and SRTT, the NIC's utilisation and sojourn, from the
   simulator (with and without TSQ) and the live engine (``--anchor-repeats`` runs), next to
   Linux's own numbers (bench/linux/README.md).

Besides the means, the first two parts compare distributions: the bottleneck's per-packet sojourn
histogram (``histograms.parquet``: quantiles and the largest CDF difference, the
Kolmogorov-Smirnov distance D) and every flow's own sojourn quantiles (``packets.parquet``
of the bottleneck, a ``--packet-sample`` fraction of packets) for ``aqm``; the FCT
distribution (log-spaced histogram, quantiles, two-sample KS D) and the mean FCT by size
class for ``seed000``.

    sudo python bench/emulate/sim_vs_emu.py [--part aqm|seed000|anchor|all] [--duration 30s]
        [--warmup 10s] [--repeats 1] [--seed-duration 60s] [--anchor-repeats 3] [--out DIR]

The defaults take about 8 minutes of wall time (6 live AQM runs of 30 s, 2 live seed-000
runs of 60 s, 6 live anchor runs of 4 s, the simulator runs and set-up between them).

Live frames (``--gso-buffers``, docs/emulate.md "GSO buffers"): by default the AQM part
runs the live engine with MTU frames (``SOJOURN_EMULATE_GSO_BUFFERS=0``: the hosts cut
their GSO buffers into segments before the forwarder, so the bottleneck — a router's
link — holds segments, as the simulator's does), and the seed-000 part with GSO buffers
(the discipline sits on the client's own NIC, whose qdisc holds GSO buffers in the
simulator too). ``--gso-buffers on|off`` uses one mode for both parts.

Live runs need root and take their duration of wall time each. Every live row reports the
machine's 1-minute load average before and after it (the live engine shares the two cores
with everything else: a loaded machine delays the hosts' TCP). Numbers are reports, not
assertions. Run it with ``nice -n -5`` when ``uptime`` shows a low load.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd

import sojourn
from sojourn.analysis import stats

ROOT = Path(__file__).resolve().parents[2]

AQM = """
name = "sim-vs-emu-{q}-{rate}"
duration = "{duration}"
warmup = "{warmup}"
seed = {seed}
[topology]
pairs = {flows}
bottleneck = {{ rate = "{rate}", delay = "10ms", qdisc = "{q}" }}
[transport]
cc = "cubic"
[[workload]]
kind = "bulk"
pairs = "all"
[record]
interval = "100ms"
flows = true
packets = ["bottleneck"]
packet_sample = {sample}
"""

# Seed 000's age-based classifier (experiments/repro/age-based/ci-1g.sweep.toml,
# age-pfifofast): ct bytes <= threshold -> priority 1:6 (pfifo_fast band 0), else 1:0 (band 1).
# The seed's 1 Gbit/s threshold is 6,331,208 B; at a tenth of the rate a flow gets a tenth of
# the bytes in the same time, so the default here is a tenth of it.
def classifier(threshold: int) -> list[dict]:
    return [
        {"at": "client", "hook": "output", "map": [{"upto": threshold, "priority": "1:6"}, {"priority": "1:0"}]}
    ]


def load1() -> float:
    return os.getloadavg()[0]


def little_ms(res, warmup_s: float) -> float:
    """Mean queueing delay after warm-up by Little's law, W = L / lambda, from the
    bottleneck's time series (mean queue bytes over mean delivered byte rate)."""
    q = res.series("bottleneck", "queue_bytes")
    thr = res.series("bottleneck", "throughput_bps")
    q, thr = q[q.index > warmup_s], thr[thr.index > warmup_s]
    return float(q.mean() / (thr.mean() / 8.0) * 1e3)


def mean_srtt_ms(res, warmup_s: float) -> float:
    """Mean of the senders' smoothed RTT samples after warm-up (sim: the model's SRTT;
    emu: TCP_INFO tcpi_rtt)."""
    ts = res.timeseries
    if ts is None or ts.empty:
        return float("nan")
    v = ts[(ts["metric"] == "srtt_ms") & (ts["time_s"] > warmup_s)]["value"]
    return float(v.mean()) if len(v) else float("nan")


QS = (0.1, 0.5, 0.9, 0.99)


def sojourn_hist(res, link: str) -> pd.DataFrame:
    h = res.histograms
    if h is None or h.empty:
        return pd.DataFrame(columns=["lo_ns", "hi_ns", "count"])
    return h[h["link"] == link]


def ks_hist(a: pd.DataFrame, b: pd.DataFrame) -> float:
    """Largest difference between two bucketed CDFs (both engines use the same bucket
    edges, so evaluating both step functions at every edge is exact up to a bucket)."""
    xa, ya = stats.hist_cdf(a["lo_ns"], a["hi_ns"], a["count"])
    xb, yb = stats.hist_cdf(b["lo_ns"], b["hi_ns"], b["count"])
    if len(xa) == 0 or len(xb) == 0:
        return float("nan")
    xs = np.union1d(xa, xb)

    def at(x, y):
        i = np.searchsorted(x, xs, side="right") - 1
        return np.where(i >= 0, y[np.clip(i, 0, None)], 0.0)

    return float(np.max(np.abs(at(xa, ya) - at(xb, yb))))


def per_flow_sojourn(res, warmup_s: float) -> dict[int, list[float]]:
    """Each flow's sojourn quantiles (ms) at the bottleneck after warm-up, from the
    packet log (dequeues only)."""
    p = res.packets
    if p is None or p.empty:
        return {}
    p = p[(p["event"] == "dequeue") & (p["time_s"] > warmup_s)]
    out = {}
    for flow, g in p.groupby("flow"):
        if int(flow) == 4294967295 or len(g) < 20:
            continue
        out[int(flow)] = [float(v) for v in np.quantile(g["sojourn_ms"].to_numpy(), QS)] + [len(g)]
    return out


def secs(d: str) -> float:
    return float(d.rstrip("s"))


@contextlib.contextmanager
def gso_buffers(on: bool):
    """The live engine's GSO mode for the runs inside (docs/emulate.md "GSO buffers")."""
    key = "SOJOURN_EMULATE_GSO_BUFFERS"
    old = os.environ.get(key)
    if on:
        os.environ.pop(key, None)
    else:
        os.environ[key] = "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old


def aqm(a) -> list[dict]:
    rows = []
    for rate in ["10Mbit", "100Mbit"]:
        for q in ["codel", "fq_codel", "pie"]:
            for rep in range(a.repeats):
                cfg = tomllib.loads(
                    AQM.format(
                        q=q,
                        rate=rate,
                        duration=a.duration,
                        warmup=a.warmup,
                        flows=a.flows,
                        seed=1 + rep,
                        sample=a.packet_sample,
                    )
                )
                sim_res = sojourn.run(cfg)
                l0 = load1()
                with gso_buffers(a.gso_buffers == "on"):
                    emu_res = sojourn.emulate(cfg)
                l1 = load1()
                sim = sim_res.summary["links"]["bottleneck"]
                emu = emu_res.summary["links"]["bottleneck"]
                w = secs(a.warmup)
                row = {
                    "rate": rate,
                    "qdisc": q,
                    "seed": 1 + rep,
                    "sim_util": sim["utilisation"],
                    "emu_util": emu["utilisation"],
                    "sim_sojourn_ms": sim["sojourn_ms"].get("mean"),
                    "emu_sojourn_ms": emu["sojourn_ms"].get("mean"),
                    "sim_p99_ms": sim["sojourn_ms"].get("p99"),
                    "emu_p99_ms": emu["sojourn_ms"].get("p99"),
                    "sim_little_ms": little_ms(sim_res, w),
                    "emu_little_ms": little_ms(emu_res, w),
                    "sim_drops": sim["drops_total"],
                    "emu_drops": emu["drops_total"],
                    "sim_srtt_ms": mean_srtt_ms(sim_res, w),
                    "emu_srtt_ms": mean_srtt_ms(emu_res, w),
                    "load_before": l0,
                    "load_after": l1,
                    "emu_gso_buffers": emu_res.summary["emulate"].get("gso_buffers", False),
                }
                hs, he = sojourn_hist(sim_res, "bottleneck"), sojourn_hist(emu_res, "bottleneck")
                row["sim_q_ms"] = [v / 1e6 for v in stats.hist_quantiles(hs["lo_ns"], hs["hi_ns"], hs["count"], QS)]
                row["emu_q_ms"] = [v / 1e6 for v in stats.hist_quantiles(he["lo_ns"], he["hi_ns"], he["count"], QS)]
                row["ks_d"] = ks_hist(hs, he)
                row["sim_flows"] = per_flow_sojourn(sim_res, w)
                row["emu_flows"] = per_flow_sojourn(emu_res, w)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def print_aqm(rows: list[dict]) -> None:
    print(
        "| rate | qdisc | seed | util sim | util emu | Δ points | mean sojourn sim (ms) | emu (ms) | emu/sim "
        "| p99 sim / emu (ms) | Little sim / emu (ms) | drops sim / emu | SRTT sim / emu (ms) | load 1 min |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r["emu_sojourn_ms"] / r["sim_sojourn_ms"]
        print(
            f"| {r['rate']} | {r['qdisc']} | {r['seed']} | {r['sim_util']:.3f} | {r['emu_util']:.3f} | "
            f"{(r['emu_util'] - r['sim_util']) * 100:+.1f} | {r['sim_sojourn_ms']:.2f} | {r['emu_sojourn_ms']:.2f} | "
            f"{ratio:.2f} | {r['sim_p99_ms']:.1f} / {r['emu_p99_ms']:.1f} | {r['sim_little_ms']:.2f} / {r['emu_little_ms']:.2f} | "
            f"{r['sim_drops']} / {r['emu_drops']} | {r['sim_srtt_ms']:.1f} / {r['emu_srtt_ms']:.1f} | "
            f"{r['load_before']:.1f} → {r['load_after']:.1f} |"
        )


def fmt_q(v: list[float]) -> str:
    return " / ".join(f"{x:.2f}" for x in v)


def print_aqm_distributions(rows: list[dict]) -> None:
    qs = "/".join(f"p{int(q * 100)}" for q in QS)
    print(f"\nBottleneck sojourn distribution ({qs}, ms) and the KS distance D between the engines' histograms:\n")
    print(f"| rate | qdisc | seed | sim {qs} | emu {qs} | KS D |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['rate']} | {r['qdisc']} | {r['seed']} | {fmt_q(r['sim_q_ms'])} | {fmt_q(r['emu_q_ms'])} | {r['ks_d']:.3f} |")
    print(f"\nPer flow at the bottleneck (packet log, {qs} of sojourn in ms; packets logged):\n")
    print(f"| rate | qdisc | flow | sim {qs} | emu {qs} | packets sim / emu |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        for f in sorted(set(r["sim_flows"]) | set(r["emu_flows"])):
            s, e = r["sim_flows"].get(f), r["emu_flows"].get(f)
            cell = lambda v: fmt_q(v[:-1]) if v else "–"  # noqa: E731
            n = f"{s[-1] if s else 0} / {e[-1] if e else 0}"
            print(f"| {r['rate']} | {r['qdisc']} | {f} | {cell(s)} | {cell(e)} | {n} |")


FCT_BINS_S = [0.0, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, float("inf")]
SIZE_CLASSES = [(0, 1 << 20, "< 1 MiB"), (1 << 20, 10 << 20, "1–10 MiB"), (10 << 20, 1 << 62, "≥ 10 MiB")]


def fct_sample(res, warmup_s: float) -> pd.DataFrame:
    f = res.flows
    f = f[(f["start_s"] >= warmup_s) & f["fct_s"].notna() & (f["size_bytes"] > 0)]
    return f[["size_bytes", "fct_s"]]


def seed000(a) -> list[dict]:
    base = ROOT / "experiments/repro/age-based/age-1g.toml"
    rows = []
    for name, over in [
        ("pfifo_fast", {"topology.links[0].qdisc": "pfifo_fast"}),
        ("age-pfifo_fast", {"topology.links[0].qdisc": "pfifo_fast", "classifier": classifier(a.threshold)}),
    ]:
        o = {
            "topology.links[0].rate": "100Mbit",
            "warmup": a.seed_warmup,
            "record.interval": "1s",
            **over,
        }
        row = {"variant": name}
        # sim_notsq: the simulator without TCP Small Queues — what the live hosts' TCP sees
        # when the NIC's qdisc runs in the forwarder (the skb is freed when the frame
        # reaches the forwarder, so TSQ never holds a socket back; docs/emulate.md).
        runs = [
            ("sim", lambda: sojourn.run(base, duration=a.seed_duration, overrides=o)),
            ("sim_notsq", lambda: sojourn.run(base, duration=a.seed_duration, overrides={**o, "transport.tsq": False})),
            ("emu", lambda: sojourn.emulate(base, duration=a.seed_duration, overrides=o)),
        ]
        row["emu_gso_buffers"] = False
        for eng, go in runs:
            l0 = load1()
            with gso_buffers(a.gso_buffers != "off"):
                res = go()
            if eng == "emu":
                row["load_before"], row["load_after"] = l0, load1()
                row["emu_gso_buffers"] = res.summary["emulate"].get("gso_buffers", False)
            s = res.summary
            f = s["flows"]
            row[f"{eng}_fct_mean_s"] = f["fct_s"].get("mean")
            row[f"{eng}_fct_p50_s"] = f["fct_s"].get("p50")
            row[f"{eng}_completed"] = f["completed"]
            row[f"{eng}_util"] = s["links"]["nic"]["utilisation"]
            row[f"{eng}_sojourn_ms"] = s["links"]["nic"]["sojourn_ms"].get("mean")
            fs = fct_sample(res, secs(a.seed_warmup))
            row[f"{eng}_fct"] = fs["fct_s"].tolist()
            row[f"{eng}_size"] = fs["size_bytes"].tolist()
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if not isinstance(v, list)}), file=sys.stderr, flush=True)
    return rows


ENGINES = [("sim", "sim"), ("sim_notsq", "sim, tsq = false"), ("emu", "emu")]

ANCHOR = ROOT / "experiments/emulate/sender-side-100m.toml"
ANCHOR_AGE = '{ kind = "age", thresholds = ["633kB"], child = "pfifo" }'
# Linux 6.18.44 on this machine, bench/linux/sender_side.sh (bench/linux/README.md and
# docs/transport.md "Linux 6.18 next to sojourn"): the 500-kB FCT by qdisc, and the bulk
# flow's RTT before the transfer (10.9 ms in the full-buffer mode, 3.8-6.0 ms stalled).
ANCHOR_LINUX = {
    "fifo": "1007-1012 ms (11 of 24 runs) or 94-209 ms (13 of 24); RTT 10.9 ms (or 3.8-6.0)",
    "age": "40.8-46.5 ms (10 runs)",
}


def anchor(a) -> list[dict]:
    rows = []
    for variant, over in [("fifo", {}), ("age", {"topology.links[0].qdisc": tomllib.loads("q = " + ANCHOR_AGE)["q"]})]:
        runs = [("sim", lambda: sojourn.run(ANCHOR, overrides=over)),
                ("sim, tsq = false", lambda: sojourn.run(ANCHOR, overrides={**over, "transport.tsq": False}))]
        runs += [("emu", lambda: sojourn.emulate(ANCHOR, overrides=over))] * a.anchor_repeats
        for eng, go in runs:
            l0 = load1()
            res = go()
            l1 = load1()
            f = res.flows.sort_values("start_s")
            fct = f[f["size_bytes"] == 500_000]["fct_s"]
            bulk = f[f["size_bytes"] == 0]
            nic = res.summary["links"]["nic"]
            ts = res.timeseries
            srtt = float("nan")
            if ts is not None and not ts.empty and len(bulk):
                # The bulk flow alone, before the transfer starts at 2 s.
                v = ts[(ts["metric"] == "srtt_ms") & (ts["entity"] == f"flow{int(bulk['flow'].iloc[0])}")]
                v = v[(v["time_s"] > 1.0) & (v["time_s"] < 2.0)]
                srtt = float(v["value"].mean()) if len(v) else float("nan")
            row = {
                "variant": variant,
                "engine": eng,
                "fct_ms": float(fct.iloc[0]) * 1e3 if len(fct) and fct.notna().iloc[0] else float("nan"),
                "bulk_goodput_mbps": float(bulk["goodput_bps"].iloc[0]) / 1e6 if len(bulk) else float("nan"),
                "srtt_ms": srtt,
                "util": nic["utilisation"],
                "sojourn_ms": nic["sojourn_ms"].get("mean"),
                "drops": nic["drops_total"],
                "gso_buffers": res.summary.get("emulate", {}).get("gso_buffers"),
                "load": f"{l0:.1f} → {l1:.1f}" if eng == "emu" else "",
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def print_anchor(rows: list[dict]) -> None:
    print("| qdisc | engine | 500-kB FCT (ms) | bulk goodput (Mbit/s) | bulk SRTT 1-2 s (ms) | NIC utilisation | NIC mean sojourn (ms) | NIC drops | load 1 min |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        eng = r["engine"] + (" (GSO buffers)" if r["gso_buffers"] else " (MTU frames)" if r["gso_buffers"] is False else "")
        print(
            f"| {r['variant']} | {eng} | {r['fct_ms']:.1f} | {r['bulk_goodput_mbps']:.1f} | {r['srtt_ms']:.2f} | "
            f"{r['util']:.3f} | {r['sojourn_ms']:.2f} | {r['drops']} | {r['load']} |"
        )
    for v, text in ANCHOR_LINUX.items():
        print(f"| {v} | Linux 6.18 (bench/linux) | {text} | | | | | | |")


def print_seed000(rows: list[dict]) -> None:
    print("| variant | engine | mean FCT (s) | median FCT (s) | completed | NIC utilisation | mean sojourn (ms) | load 1 min |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        for eng, label in ENGINES:
            load = f"{r['load_before']:.1f} → {r['load_after']:.1f}" if eng == "emu" else ""
            print(
                f"| {r['variant']} | {label} | {r[f'{eng}_fct_mean_s']:.3f} | {r[f'{eng}_fct_p50_s']:.3f} | "
                f"{r[f'{eng}_completed']} | {r[f'{eng}_util']:.3f} | {r[f'{eng}_sojourn_ms']:.1f} | {load} |"
            )
    if len(rows) == 2:
        print()
        for eng, label in ENGINES:
            g = rows[0][f"{eng}_fct_mean_s"] / rows[1][f"{eng}_fct_mean_s"]
            print(f"- age-based gain ({label}): mean FCT pfifo_fast / age-pfifo_fast = {g:.2f}")
    from scipy.stats import ks_2samp

    edges = " | ".join(
        f"{lo:g}–{hi:g} s" if hi != float("inf") else f"≥ {lo:g} s" for lo, hi in zip(FCT_BINS_S, FCT_BINS_S[1:])
    )
    print("\nFCT distribution of the completed flows (fraction per bin), quantiles and the two-sample KS test against the simulator:\n")
    print(f"| variant | engine | {edges} | p10 / p50 / p90 / p99 (s) | KS D vs sim (p-value) |")
    print("|---|---|" + "---|" * (len(FCT_BINS_S) - 1) + "---|---|")
    for r in rows:
        for eng, label in ENGINES:
            x = np.asarray(r[f"{eng}_fct"], dtype=float)
            if x.size == 0:
                continue
            h, _ = np.histogram(x, bins=FCT_BINS_S)
            frac = " | ".join(f"{v / x.size:.2f}" for v in h)
            q = " / ".join(f"{v:.3f}" for v in np.quantile(x, QS))
            if eng == "sim":
                ks = ""
            else:
                t = ks_2samp(x, np.asarray(r["sim_fct"], dtype=float))
                ks = f"{t.statistic:.3f} ({t.pvalue:.2g})"
            print(f"| {r['variant']} | {label} | {frac} | {q} | {ks} |")
    print("\nMean FCT (s) by flow size (completed flows; count in brackets):\n")
    print("| variant | engine | " + " | ".join(c[2] for c in SIZE_CLASSES) + " |")
    print("|---|---|" + "---|" * len(SIZE_CLASSES))
    for r in rows:
        for eng, label in ENGINES:
            x = np.asarray(r[f"{eng}_fct"], dtype=float)
            sz = np.asarray(r[f"{eng}_size"], dtype=float)
            cells = []
            for lo, hi, _ in SIZE_CLASSES:
                m = (sz >= lo) & (sz < hi)
                cells.append(f"{x[m].mean():.3f} ({int(m.sum())})" if m.any() else "–")
            print(f"| {r['variant']} | {label} | " + " | ".join(cells) + " |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["aqm", "seed000", "anchor", "all"], default="all")
    ap.add_argument("--duration", default="30s")
    ap.add_argument("--warmup", default="10s")
    ap.add_argument("--flows", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="seeds 1..N for every AQM row")
    ap.add_argument("--seed-duration", default="60s", help="seed-000 run length (the seed ran 6 h)")
    ap.add_argument("--seed-warmup", default="10s")
    ap.add_argument("--threshold", type=int, default=633121, help="ct bytes threshold (B) of the age-based variant")
    ap.add_argument("--packet-sample", type=float, default=0.25, help="fraction of bottleneck packets logged (per-flow sojourn)")
    ap.add_argument("--anchor-repeats", type=int, default=3, help="live runs of each anchor variant")
    ap.add_argument("--out", default=None, help="also write the raw numbers as JSON here")
    ap.add_argument("--gso-buffers", choices=["per-part", "on", "off"], default="per-part",
                    help="live frames: MTU frames for aqm and GSO buffers for seed000 (per-part), or one mode for both")
    a = ap.parse_args(argv)
    out = {}
    if a.part in ("aqm", "all"):
        out["aqm"] = aqm(a)
        print_aqm(out["aqm"])
        modes = {r["emu_gso_buffers"] for r in out["aqm"]}
        print(f"\nlive frames: {', '.join('GSO buffers' if m else 'MTU frames' for m in sorted(modes))}\n")
        print_aqm_distributions(out["aqm"])
        rs = [r["emu_sojourn_ms"] / r["sim_sojourn_ms"] for r in out["aqm"]]
        print(f"\nemu/sim mean sojourn: median {statistics.median(rs):.2f}, range {min(rs):.2f}–{max(rs):.2f}\n")
    if a.part in ("seed000", "all"):
        out["seed000"] = seed000(a)
        print_seed000(out["seed000"])
        modes = {r["emu_gso_buffers"] for r in out["seed000"]}
        print(f"\nlive frames: {', '.join('GSO buffers' if m else 'MTU frames' for m in sorted(modes))}\n")
    if a.part in ("anchor", "all"):
        out["anchor"] = anchor(a)
        print_anchor(out["anchor"])
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "sim_vs_emu.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
