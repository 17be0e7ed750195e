"""Seed 000 reproduction: age-based scheduling over FIFO, CoDel, FQ-CoDel, CAKE, PIE, FQ-PIE.

Regenerate everything in docs/repro/age-based.md (after running the sweeps it names):

    python -m sojourn.repro.age_based --1g results/age-1g --10g results/age-10g \\
        --thresholds-1g results/age-thr-1g --thresholds-10g results/age-thr-10g \\
        --out docs/repro/img/age-based --markdown docs/repro/age-based.tables.md

``python -m sojourn.repro.age_based --write-files experiments/repro/age-based`` rewrites the
shipped sweep files and size tables from the definitions below (they are generated, so the
twelve configurations of the four sweeps cannot drift apart).

Statistics come from :mod:`sojourn.analysis.compare` (which uses :mod:`sojourn.analysis.stats`): mean FCT
± 1.96·SEM over flows, gain = mean_age / mean_base − 1, percentiles by linear
interpolation, FCT per logarithmic size bin, Lorenz curves of per-flow mean throughput.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from ..analysis import compare as cmp
from ..analysis import stats
from ..units import parse_seconds

# ------------------------------------------------------------------------------------------
# the set-ups (seed 000, Tables I and II; thresholds from tests/nft.cue of
# UniVe-NeDS-Lab/linux_age_based_scheduler; docs/repro/age-based.md, "set-up" table)
# ------------------------------------------------------------------------------------------

THRESHOLD = {"1g": 6_331_208, "10g": 19_500_715}

#: analytic optimum 2LPS threshold (docs/threshold.md, `sojourn threshold seed000-1g --load
#: 0.88` and `seed000-10g --load 0.92`), and the other thresholds of the threshold study
ANALYTIC_THRESHOLD = {"1g": 11_500_000, "10g": 312_000_000}
THRESHOLD_STUDY = {
    "1g": [2_000_000, 11_500_000, 30_000_000],  # + the seed's, from the short comparison
    "10g": [60_000_000, 312_000_000],
}

#: the age-based variants of the threshold study
THRESHOLD_VARIANTS = {"1g": ("age-pfifofast", "age-prio-codel", "age-prio-fqcodel"),
                      "10g": ("age-prio-codel", "age-prio-fqcodel")}

SETUP = {
    "1g": {"rate": "1Gbit", "actors": 80, "think": "1s", "alpha": 1.2, "range": "300 KiB–1 GiB",
           "duration": "6h", "warmup": "3600s", "short_duration": "15min", "short_warmup": "150s", "short_margin": "60s",
           "ci_duration": "40s", "ci_warmup": "5s", "load": 0.88, "rtt_ms": 0.710},
    "10g": {"rate": "10Gbit", "actors": 150, "think": "0.35s", "alpha": 1.1, "range": "373 KiB–62 GiB",
            "duration": "4h", "warmup": "1800s", "short_duration": "100s", "short_warmup": "20s", "short_margin": "5s",
            "load": 0.92, "rtt_ms": 0.270},
}

CODEL = '{ kind = "codel", interval = "10ms", target = "0.5ms" }'
FQ_CODEL = '{ kind = "fq_codel", interval = "10ms", target = "0.5ms" }'
PIE = '{ kind = "pie", tupdate = "3ms", target = "0.5ms" }'
FQ_PIE = '{ kind = "fq_pie", tupdate = "3ms", target = "0.5ms" }'
CAKE = '{ kind = "cake", rtt = "10ms" }'

#: the seed's twelve configurations (+ the strict CAKE extension), in table order:
#: (name, qdisc spec (TOML), classifier priorities (small, large) or None, paper name)
CONFIGS = [
    ("pfifo", '"pfifo"', None, "FIFO"),
    ("age-pfifofast", '"pfifo_fast"', ("1:6", "1:0"), "Age-b. FIFO"),
    ("codel", CODEL, None, "CoDel"),
    ("age-prio-codel", f'{{ kind = "prio", bands = 3, child = {CODEL} }}', ("1:1", "1:2"), "Age-b. CoDel"),
    ("fqcodel", FQ_CODEL, None, "FQ-CoDel"),
    ("age-prio-fqcodel", f'{{ kind = "prio", bands = 3, child = {FQ_CODEL} }}', ("1:1", "1:2"), "Age-b. FQ-CoDel"),
    ("cake", CAKE, None, "CAKE"),
    ("age-cake", CAKE, ("1:2", "1:1"), "Age-b. CAKE"),
    ("age-cake-strict", '{ kind = "cake", rtt = "10ms", tin_mode = "strict" }', ("1:2", "1:1"), None),
    ("pie", PIE, None, "PIE"),
    ("age-prio-pie", f'{{ kind = "prio", bands = 3, child = {PIE} }}', ("1:1", "1:2"), "Age-b. PIE"),
    ("fqpie", FQ_PIE, None, "FQ-PIE"),
    ("age-prio-fqpie", f'{{ kind = "prio", bands = 3, child = {FQ_PIE} }}', ("1:1", "1:2"), "Age-b. FQ-PIE"),
]
BASES = ["pfifo", "codel", "fqcodel", "cake", "pie", "fqpie"]
#: base -> its age-based variant(s), first = the seed's
AGE_OF = {"pfifo": ["age-pfifofast"], "codel": ["age-prio-codel"], "fqcodel": ["age-prio-fqcodel"],
          "cake": ["age-cake", "age-cake-strict"], "pie": ["age-prio-pie"], "fqpie": ["age-prio-fqpie"]}

# ------------------------------------------------------------------------------------------
# the paper's numbers (seed 000, section V), as docs/repro/age-based.md lists them:
# Table III (1 Gb/s) and Table IV (10 Gb/s): mean FCT and its 95% CI in ms, age-based and base
# version; Table V (1 Gb/s) and Table VI (10 Gb/s): P50/P75/P95/P99 in ms.
# ------------------------------------------------------------------------------------------

PAPER_MEAN = {  # base: (age mean, age CI, base mean, base CI, gain %)
    "1g": {"pfifo": (123.0, 1.46, 154.3, 0.748, -20.0), "cake": (127.2, 1.37, 142.1, 0.906, -10.0),
           "fqcodel": (119.4, 1.5, 137.6, 0.966, -13.0), "codel": (118.1, 1.47, 122.2, 0.971, -3.3),
           "fqpie": (126.0, 1.14, 138.7, 0.824, -9.1), "pie": (119.4, 1.27, 130.9, 0.813, -8.8)},
    "10g": {"pfifo": (40.59, 0.398, 44.39, 0.317, -8.6), "cake": (184.8, 10.3, 659.9, 16.4, -72.0),
            "fqcodel": (37.83, 0.464, 39.17, 0.417, -3.4), "codel": (38.66, 0.441, 41.98, 0.366, -7.9),
            "fqpie": (37.47, 0.468, 40.81, 0.414, -8.2), "pie": (37.58, 0.447, 41.3, 0.395, -9.0)},
}
PAPER_PCT = {  # point: (P50, P75, P95, P99)
    "1g": {"age-pfifofast": (33.04, 51.86, 145.9, 1466), "pfifo": (85.16, 149.2, 389.6, 1147),
           "age-cake": (42.24, 69.32, 218.3, 1138), "cake": (59.19, 105.2, 364.7, 1334),
           "age-prio-fqcodel": (35.02, 56.37, 176.2, 951.2), "fqcodel": (52.18, 94.06, 351.8, 1339),
           "age-prio-codel": (34.07, 53.77, 184.4, 974.6), "codel": (38.97, 76.13, 303.7, 1202),
           "age-prio-fqpie": (40.48, 64.61, 201.8, 1326), "fqpie": (54.22, 96.3, 355.6, 1327),
           "age-prio-pie": (32.97, 51.94, 146.6, 1216), "pie": (44.28, 89.34, 366.9, 1231)},
    "10g": {"age-pfifofast": (11.89, 23.49, 79.29, 545.7), "pfifo": (18.25, 34.06, 106.2, 529.7),
            "age-cake": (4.423, 7.82, 32.59, 968.4), "cake": (162.6, 308.1, 1351, 5948),
            "age-prio-fqcodel": (10.67, 21.31, 75.4, 507.6), "fqcodel": (11.35, 22.55, 87.87, 527.4),
            "age-prio-codel": (11.47, 22.98, 79.2, 522.4), "codel": (14.73, 29.44, 101.5, 509.5),
            "age-prio-fqpie": (9.523, 17.91, 71.15, 551.4), "fqpie": (12.17, 22.24, 91.71, 557.8),
            "age-prio-pie": (9.717, 17.46, 68.05, 553.7), "pie": (14.38, 25.41, 94.61, 528)},
}


def paper_mean(setup: str, point: str) -> tuple:
    """(mean, CI) in ms of the paper for a point name, or (nan, nan)."""
    for base, (am, aci, bm, bci, _) in PAPER_MEAN[setup].items():
        if point == base:
            return bm, bci
        if point == AGE_OF[base][0]:
            return am, aci
    return math.nan, math.nan


# ------------------------------------------------------------------------------------------
# shipped files
# ------------------------------------------------------------------------------------------


def classifier_toml(threshold: int, prios: tuple) -> str:
    return (f'[{{ at = "client", hook = "output", map = [{{ upto = {threshold}, priority = "{prios[0]}" }}, '
            f'{{ priority = "{prios[1]}" }}] }}]')


def sweep_text(setup: str, length: str) -> str:
    """A sweep file: ``length`` is "full", "short" or "ci" (the CI test's reduced run)."""
    s = SETUP[setup]
    T = THRESHOLD[setup]
    if length == "full":
        dur, warm, what = s["duration"], s["warmup"], "full length, as the paper"
    elif length == "short":
        dur, warm, what = s["short_duration"], s["short_warmup"], "SHORT version (same set-up, shorter run)"
    else:
        dur, warm, what = s["ci_duration"], s["ci_warmup"], "CI version (tests/python/test_repro_age_based.py)"
    one = "sojourn sweep experiments/repro/age-based/{f} --out results/age-{setup} && sojourn compare results/age-{setup}"
    fname = {"full": f"full-{setup}.sweep.toml", "short": f"short-{setup}.sweep.toml", "ci": f"ci-{setup}.sweep.toml"}[length]
    lines = [
        f"# GENERATED by `python -m sojourn.repro.age_based --write-files experiments/repro/age-based`; edit",
        f"# python/sojourn/repro/age_based.py, not this file.",
        f"#",
        f"# Seed 000 (Age-based CoDel and his friends), {setup} set-up (age-{setup}.toml: {s['rate']}, "
        f"{s['actors']} actors, think Exp({s['think']}),",
        f"# discrete bounded Pareto alpha {s['alpha']}, {s['range']}), the twelve configurations of Table III/IV",
        f"# (+ age-cake-strict, a sojourn extension), {what}: {dur}, warm-up {warm},",
        (f"# flows ending in the last {'60s' if length == 'full' else s['short_margin']} left out (end_margin)." if length != "ci" else
         "# no end margin (a 60-s margin is longer than the run; unfinished flows are left out as always)."),
        f"# Parameters: CoDel/FQ-CoDel interval 10 ms target 0.5 ms; PIE/FQ-PIE tupdate 3 ms target 0.5 ms;",
        f"# CAKE rtt 10 ms; threshold {T:,} B (inclusive, ct bytes both directions, IP bytes) on the",
        f"# client's output hook; prio bands 3 with the same leaf on every band, 1:1 / 1:2; pfifo_fast",
        f"# 1:6 / 1:0; CAKE 1:2 (Best Effort) / 1:1 (Bulk). The `age` discipline is the one-line form of",
        f"# prio + classifier ({{ kind = \"age\", thresholds = [{T}], child = ... }}); the prio form mirrors the seed.",
        f"#   " + one.format(f=fname, setup=setup),
        f'name = "seed000-{setup}-{length}"',
        f'base = "age-{setup}.toml"',
        f"repeats = {3 if length == 'full' else 1}" + ("                    # as the paper; `--repeats 1` for one pass" if length == "full" else ""),
        f'link = "nic"',
    ] + ({"full": ['end_margin = "60s"'], "short": [f'end_margin = "{s["short_margin"]}"'], "ci": []}[length]) + [
        f'set = {{ duration = "{dur}", warmup = "{warm}" }}',
    ]
    for name, q, prios, _ in CONFIGS:
        lines += ["", "[[variant]]", f'name = "{name}"']
        kv = [f'"topology.links[0].qdisc" = {q}']
        if prios:
            kv.append(f'"classifier" = {classifier_toml(T, prios)}')
        lines.append("set = { " + ", ".join(kv) + " }")
    return "\n".join(lines) + "\n"


def threshold_sweep_text(setup: str) -> str:
    """The threshold study: age-pfifofast, age-prio-codel and age-prio-fqcodel at several
    thresholds (short length), beside their bases."""
    s = SETUP[setup]
    ths = THRESHOLD_STUDY[setup]
    lines = [
        "# GENERATED by `python -m sojourn.repro.age_based --write-files experiments/repro/age-based`.",
        "#",
        f"# One step past seed 000 ({setup} set-up, SHORT length {s['short_duration']}, warm-up {s['short_warmup']}):",
        f"# {', '.join(THRESHOLD_VARIANTS[setup])} at the analytic 2LPS optimum of `sojourn threshold`",
        f"# (~{ANALYTIC_THRESHOLD[setup]:,} B, docs/threshold.md) and a few other thresholds (the classifier's",
        f"# inclusive upper bound of the first band). The seed's threshold ({THRESHOLD[setup]:,} B) and the bases",
        f"# are the same runs as in short-{setup}.sweep.toml (same length and seed), not repeated here.",
        f"#   sojourn sweep experiments/repro/age-based/thresholds-{setup}.sweep.toml --out results/age-thr-{setup}",
        f'name = "seed000-{setup}-thresholds"',
        f'base = "age-{setup}.toml"',
        "repeats = 1",
        'link = "nic"',
        f'end_margin = "{s["short_margin"]}"',
        f'set = {{ duration = "{s["short_duration"]}", warmup = "{s["short_warmup"]}" }}',
    ]
    for name, q, prios, _ in CONFIGS:
        if name not in THRESHOLD_VARIANTS[setup]:
            continue
        lines += ["", "[[variant]]", f'name = "{name}"',
                  "set = { " + f'"topology.links[0].qdisc" = {q}, "classifier" = {classifier_toml(THRESHOLD[setup], prios)}' + " }"]
    lines += ["", "[[axis]]", 'key = "classifier[0].map[0].upto"', "values = [" + ", ".join(str(t) for t in ths) + "]",
              "names = [" + ", ".join(f'"T={t / 1e6:.4g}MB"' for t in ths) + "]", 'name = "threshold"']
    return "\n".join(lines) + "\n"


def rtt_sweep_text(setup: str = "1g") -> str:
    """Sensitivity to the host latency: the short comparison of FIFO and CoDel with the
    paper's measured ping RTT (Table I) as propagation delay, half each way."""
    s = SETUP[setup]
    one_way = f"{s['rtt_ms'] / 2 * 1000:.0f}us"
    lines = [
        "# GENERATED by `python -m sojourn.repro.age_based --write-files experiments/repro/age-based`.",
        "#",
        f"# Sensitivity of seed 000's {setup} set-up to the path RTT: the paper's measured ping RTT",
        f"# ({s['rtt_ms']} ms, Table I) as propagation delay ({one_way} each way) instead of 50 us; SHORT length.",
        f"#   sojourn sweep experiments/repro/age-based/rtt-{setup}.sweep.toml --out results/age-rtt-{setup}",
        f'name = "seed000-{setup}-rtt"',
        f'base = "age-{setup}.toml"',
        "repeats = 1",
        'link = "nic"',
        f'end_margin = "{s["short_margin"]}"',
        f'set = {{ duration = "{s["short_duration"]}", warmup = "{s["short_warmup"]}", "topology.links[0].delay" = "{one_way}" }}',
    ]
    for name, q, prios, _ in CONFIGS:
        if name not in ("pfifo", "age-pfifofast", "codel", "age-prio-codel"):
            continue
        kv = [f'"topology.links[0].qdisc" = {q}']
        if prios:
            kv.append(f'"classifier" = {classifier_toml(THRESHOLD[setup], prios)}')
        lines += ["", "[[variant]]", f'name = "{name}"', "set = { " + ", ".join(kv) + " }"]
    return "\n".join(lines) + "\n"


def size_cdf_text(setup: str) -> str:
    """The seed's discrete bounded Pareto as a step CDF for the `empirical` size sampler."""
    from ..dists import SEED000, seed000

    d = seed000(setup)
    a, lo, hi, pts = SEED000[setup]
    lines = [f"# seed 000 ({setup} set-up) flow sizes: discrete bounded Pareto alpha={a}, grid",
             f"# x = round(1024^linspace(log1024 {lo:.0f}, log1024 {hi:.0f}, {pts})), sizes = round(midpoints),",
             "# weights = bounded-Pareto CDF differences (UniVe-NeDS-Lab/linux_age_based_scheduler",
             "# analysis/stats.py). Generated by sojourn.repro.age_based from sojourn.dists.seed000.",
             "# Written as a step CDF (each atom twice: the probability below it, then up to it), so the",
             "# `empirical` sampler's linear interpolation returns exactly the atoms with their weights.",
             f"# {len(d.values)} atoms, mean {d.mean:.0f} B, median {d.median:.0f} B"]
    prev = 0.0
    cum = np.cumsum(d.probs)
    cum[-1] = 1.0
    for v, c in zip(d.values, cum):
        lines.append(f"{int(v)} {prev:.17g}")
        lines.append(f"{int(v)} {c:.17g}")
        prev = c
    return "\n".join(lines) + "\n"


def write_files(directory: Path) -> list:
    directory = Path(directory)
    out = []
    for setup in ("1g", "10g"):
        files = {f"full-{setup}.sweep.toml": sweep_text(setup, "full"),
                 f"short-{setup}.sweep.toml": sweep_text(setup, "short"),
                 f"thresholds-{setup}.sweep.toml": threshold_sweep_text(setup),
                 f"sizes-{setup}.cdf": size_cdf_text(setup)}
        if "ci_duration" in SETUP[setup]:
            files[f"ci-{setup}.sweep.toml"] = sweep_text(setup, "ci")
            files[f"rtt-{setup}.sweep.toml"] = rtt_sweep_text(setup)
        for n, text in files.items():
            (directory / n).write_text(text)
            out.append(directory / n)
    return out


# ------------------------------------------------------------------------------------------
# analysis
# ------------------------------------------------------------------------------------------


def load(directory, end_margin=None) -> cmp.Data:
    """A sweep directory with the flow filters of the seed (warm-up, end margin: the sweep
    file's ``end_margin`` unless given)."""
    import json

    data = cmp.load([directory])
    if end_margin is None:
        sj = Path(directory) / "sweep.json"
        end_margin = json.loads(sj.read_text()).get("end_margin") if sj.exists() else None
    return cmp.apply_end_margin(data, parse_seconds(end_margin))


def fct_ms(data: cmp.Data, point: str) -> np.ndarray:
    """FCT samples (ms) of a point: completed sized flows after the warm-up and before the
    end margin."""
    return cmp.samples(data, point, "fct") * 1e3


def mean_table(data: cmp.Data, setup: str) -> pd.DataFrame:
    """Table III/IV: per base discipline, mean FCT ± CI of the age-based and the base
    version and the gain, sojourn's and the paper's."""
    rows = []
    for base in BASES:
        for age in AGE_OF[base]:
            if base not in data.points or age not in data.points:
                continue
            a, b = fct_ms(data, age), fct_ms(data, base)
            ra, rb = stats.mean_ci(a), stats.mean_ci(b)
            am, aci, bm, bci = ra["mean"], ra["half_width"], rb["mean"], rb["half_width"]
            rg = stats.gain(a, b, allow_small=True)
            g, glo, ghi = rg["gain"], rg["lo"], rg["hi"]
            pam, paci, pbm, pbci, pg = PAPER_MEAN[setup][base] if age == AGE_OF[base][0] else (math.nan,) * 5
            rows.append({"base": base, "age": age, "age_mean_ms": am, "age_ci_ms": aci, "base_mean_ms": bm,
                         "base_ci_ms": bci, "gain": g, "gain_lo": glo, "gain_hi": ghi, "flows_age": a.size,
                         "flows_base": b.size, "paper_age_ms": pam, "paper_age_ci_ms": paci, "paper_base_ms": pbm,
                         "paper_base_ci_ms": pbci, "paper_gain": pg / 100.0})
    return pd.DataFrame(rows)


def pct_table(data: cmp.Data, setup: str) -> pd.DataFrame:
    """Table V/VI: P50/P75/P95/P99 (ms) per point, sojourn's and the paper's."""
    rows = []
    for name, _, _, paper in CONFIGS:
        if name not in data.points:
            continue
        ps = list(stats.percentiles(fct_ms(data, name), cmp.PCTS).values())
        pp = PAPER_PCT[setup].get(name, (math.nan,) * 4)
        rows.append({"point": name, **{f"p{q}": v for q, v in zip((50, 75, 95, 99), ps)},
                     **{f"paper_p{q}": v for q, v in zip((50, 75, 95, 99), pp)}})
    return pd.DataFrame(rows)


def extra_table(data: cmp.Data, setup: str) -> pd.DataFrame:
    """Per point: flows, share of flows at most the threshold, utilisation, drops, sojourn
    p50/p99, Jain's index and Lorenz gap of per-flow mean throughput, wall time."""
    import json

    t = cmp.table(data, "fct")
    rows = []
    for r in t.itertuples():
        f = cmp.fct_flows(cmp.point_flows(data, r.point))
        share = float((f["size_bytes"] <= THRESHOLD[setup]).mean()) if len(f) else math.nan
        wall, pkts = math.nan, math.nan
        for rr in data.runs[data.runs["point"] == r.point].itertuples():
            pj = data.root / rr.run_dir / "perf.json"
            sj = data.root / rr.run_dir / "summary.json"
            if pj.exists():
                wall = json.loads(pj.read_text()).get("wall_seconds", math.nan)
            if sj.exists():
                pkts = json.loads(sj.read_text()).get("accounting", {}).get("created", math.nan)
        rows.append({"point": r.point, "flows": r.fct_flows, "share_le_threshold": share, "utilisation": r.utilisation,
                     "drops": r.drops, "sojourn_p50_ms": r.sojourn_p50_ms, "sojourn_p99_ms": r.sojourn_p99_ms,
                     "jain": r.jain, "lorenz_gap": r.lorenz_gap, "wall_s": wall, "packets": pkts})
    return pd.DataFrame(rows)


def threshold_table(data: cmp.Data, base_data: Optional[cmp.Data], setup: str) -> pd.DataFrame:
    """Mean FCT ± CI per (age variant, threshold), with the gain over the base discipline
    (from ``base_data``, the short comparison at the same length and seed)."""
    rows = []
    pts = [(data, p) for p in data.points]
    if base_data is not None:  # the seed's threshold: the short comparison's runs
        pts = [(base_data, p) for p in THRESHOLD_VARIANTS[setup] if p in base_data.points] + pts
    for d, p in pts:
        name, _, label = p.partition("+")
        if not label:
            label = f"T={THRESHOLD[setup] / 1e6:.4g}MB"
        x = fct_ms(d, p)
        base = cmp.age_base(name, BASES)
        r = stats.mean_ci(x)
        m, ci = r["mean"], r["half_width"]
        g = glo = ghi = math.nan
        if base_data is not None and base in base_data.points:
            rg = stats.gain(x, fct_ms(base_data, base), allow_small=True)
            g, glo, ghi = rg["gain"], rg["lo"], rg["hi"]
        thr = THRESHOLD[setup] if d is base_data else float(label.split("=")[1][:-2]) * 1e6
        rows.append({"variant": name, "threshold_bytes": thr,
                     "label": label, "mean_ms": m, "ci_ms": ci, "base": base, "gain": g, "gain_lo": glo, "gain_hi": ghi})
    t = pd.DataFrame(rows)
    return t.sort_values(["variant", "threshold_bytes"], kind="stable").reset_index(drop=True) if len(t) else t


# ------------------------------------------------------------------------------------------
# rendering
# ------------------------------------------------------------------------------------------


def _f(x, d=1) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{x:.{d}f}"


def _g(x) -> str:
    return "–" if not np.isfinite(x) else f"{100 * x:+.1f} %"


def markdown_tables(setup: str, mt: pd.DataFrame, pt: pd.DataFrame, et: pd.DataFrame,
                    tt: Optional[pd.DataFrame] = None, label: str = "") -> str:
    n = {"1g": ("III", "V"), "10g": ("IV", "VI")}[setup]
    out = [f"#### {setup}: mean FCT (Table {n[0]}){label}", "",
           "| discipline | age-based (ms) | base (ms) | gain [95% CI] | paper age-based | paper base | paper gain |",
           "|---|---|---|---|---|---|---|"]
    for r in mt.itertuples():
        out.append(f"| {r.base} / {r.age} | {_f(r.age_mean_ms)} ± {_f(r.age_ci_ms)} | {_f(r.base_mean_ms)} ± {_f(r.base_ci_ms)} | "
                   f"{_g(r.gain)} [{_g(r.gain_lo)}, {_g(r.gain_hi)}] | "
                   + (f"{_f(r.paper_age_ms)} ± {_f(r.paper_age_ci_ms, 2)} | {_f(r.paper_base_ms)} ± {_f(r.paper_base_ci_ms, 2)} | "
                      f"{_g(r.paper_gain)} |" if np.isfinite(r.paper_age_ms) else "(not in the paper) | | |"))
    out += ["", f"#### {setup}: FCT percentiles (Table {n[1]}), ms — sojourn / paper{label}", "",
            "| point | P50 | P75 | P95 | P99 |", "|---|---|---|---|---|"]
    for r in pt.itertuples():
        cells = [f"{_f(getattr(r, f'p{q}'))} / {_f(getattr(r, f'paper_p{q}'))}" for q in (50, 75, 95, 99)]
        out.append(f"| {r.point} | " + " | ".join(cells) + " |")
    out += ["", f"#### {setup}: other statistics{label}", "",
            "| point | flows | ≤ threshold | util | drops | sojourn p50 / p99 (ms) | Jain | Lorenz gap | wall (s) | packets |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for r in et.itertuples():
        out.append(f"| {r.point} | {r.flows} | {_f(100 * r.share_le_threshold)} % | {_f(100 * r.utilisation)} % | {r.drops:.0f} | "
                   f"{_f(r.sojourn_p50_ms, 2)} / {_f(r.sojourn_p99_ms, 2)} | {_f(r.jain, 3)} | {_f(r.lorenz_gap, 3)} | "
                   f"{_f(r.wall_s)} | {r.packets:,.0f} |")
    if tt is not None and len(tt):
        out += ["", f"#### {setup}: threshold study (mean FCT, ms; gain over the base discipline){label}", "",
                "| variant | threshold | mean FCT (ms) | gain over base [95% CI] |", "|---|---|---|---|"]
        for r in tt.itertuples():
            mark = " (seed)" if r.threshold_bytes and abs(r.threshold_bytes - THRESHOLD[setup]) < 1e3 else (
                " (analytic opt.)" if abs(r.threshold_bytes - ANALYTIC_THRESHOLD[setup]) < 1e3 else "")
            out.append(f"| {r.variant} | {r.threshold_bytes / 1e6:.4g} MB{mark} | {_f(r.mean_ms)} ± {_f(r.ci_ms)} | "
                       f"{_g(r.gain)} [{_g(r.gain_lo)}, {_g(r.gain_hi)}] |")
    return "\n".join(out) + "\n"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out: Path, name: str, made: list) -> None:
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=90)
    fig.savefig(out / f"{name}.svg")
    _plt().close(fig)
    made.append(name)


def plot_mean_pairs(setup: str, mt: pd.DataFrame, out: Path, made: list, tag: str = "", suffix: str = "") -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    first = mt.drop_duplicates("base")
    x = np.arange(len(first))
    ax.bar(x - 0.2, first["base_mean_ms"], 0.38, yerr=first["base_ci_ms"], capsize=3, color="#8c8c8c", label="base (sojourn)")
    ax.bar(x + 0.2, first["age_mean_ms"], 0.38, yerr=first["age_ci_ms"], capsize=3, color="#4C72B0", label="age-based (sojourn)")
    ax.plot(x - 0.2, first["paper_base_ms"], "k_", ms=18, mew=2, label="paper")
    ax.plot(x + 0.2, first["paper_age_ms"], "k_", ms=18, mew=2)
    for i, r in enumerate(first.itertuples()):
        y = max(r.base_mean_ms + np.nan_to_num(r.base_ci_ms), r.age_mean_ms + np.nan_to_num(r.age_ci_ms))
        ax.annotate(_g(r.gain).replace("-", "\u2212"), (i, y * 1.03), ha="center", va="bottom", fontsize=8)
    strict = mt[mt["age"] == "age-cake-strict"]
    if len(strict):
        i = list(first["base"]).index("cake")
        ax.plot([i + 0.2], strict["age_mean_ms"], "v", color="#C44E52", label="age-cake-strict")
    ax.set_xticks(x, first["base"])
    ax.set_ylabel("mean FCT (ms), 95% CI")
    if setup == "10g" and np.nanmax(first["paper_base_ms"]) > 5 * np.nanmax(first["base_mean_ms"]):
        ax.set_ylim(0, np.nanmax(first[["base_mean_ms", "age_mean_ms"]].to_numpy()) * 1.6)
    title = f"seed 000, {setup}: mean FCT per discipline pair{tag}"
    if setup == "10g" and np.nanmax(first["paper_base_ms"]) > 5 * np.nanmax(first["base_mean_ms"]):
        title += "\n(the paper's CAKE, 660 / 185 ms, is off scale: host CPU saturation)"
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    top = np.nanmax(first[["base_mean_ms", "age_mean_ms", "paper_base_ms"]].to_numpy(float))
    if not (setup == "10g" and np.nanmax(first["paper_base_ms"]) > 5 * np.nanmax(first["base_mean_ms"])):
        ax.set_ylim(0, top * 1.35)
    ax.legend(fontsize=7, loc="upper right", ncol=4)
    _save(fig, out, f"mean_fct_{setup}{suffix}", made)


def plot_fct_vs_size(setup: str, data: cmp.Data, out: Path, made: list, suffix: str = "") -> None:
    plt = _plt()
    fig, axs = plt.subplots(2, 3, figsize=(10, 5.6), sharex=True, sharey=True)
    for ax, base in zip(axs.ravel(), BASES):
        for p, c in zip([base] + AGE_OF[base], ["#8c8c8c", "#4C72B0", "#C44E52"]):
            if p not in data.points:
                continue
            b = stats.fct_by_size(cmp.fct_flows(cmp.point_flows(data, p)))
            b = b[b["count"] >= 5]
            ax.plot(b["size_center"], b["mean"] * 1e3, marker="o", ms=2.5, lw=1.2, color=c, label=p)
        ax.axvline(THRESHOLD[setup], color="k", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="upper left")
    for ax in axs[1]:
        ax.set_xlabel("flow size (bytes); dotted: threshold")
    for ax in axs[:, 0]:
        ax.set_ylabel("mean FCT (ms)")
    fig.suptitle(f"seed 000, {setup}: mean FCT vs flow size (5 bins per decade)", fontsize=10)
    _save(fig, out, f"fct_vs_size_{setup}{suffix}", made)


def plot_lorenz(setup: str, data: cmp.Data, out: Path, made: list, suffix: str = "") -> None:
    plt = _plt()
    fig, axs = plt.subplots(2, 3, figsize=(9, 6), sharex=True, sharey=True)
    for ax, base in zip(axs.ravel(), BASES):
        for p, c in zip([base] + AGE_OF[base][:1], ["#8c8c8c", "#4C72B0"]):
            if p not in data.points:
                continue
            th = cmp.flow_throughputs(cmp.point_flows(data, p))
            lc = stats.lorenz_curve(th)
            x, L = lc["share_flows"].to_numpy(), lc["share_total"].to_numpy()
            k = max(1, x.size // 400)
            gap = stats.lorenz_gap(th)
            ax.plot(x[::k], L[::k], color=c, lw=1.2, label=f"{p}: gap {gap:.3f}")
            i = int(np.argmax(x - L))
            ax.plot([x[i], x[i]], [L[i], x[i]], color=c, lw=0.8, ls="--")
        ax.plot([0, 1], [0, 1], "k:", lw=0.8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    for ax in axs[1]:
        ax.set_xlabel("share of flows")
    for ax in axs[:, 0]:
        ax.set_ylabel("share of mean throughput")
    fig.suptitle(f"seed 000, {setup}: Lorenz curves of per-flow mean throughput (dashed: the gap)", fontsize=10)
    _save(fig, out, f"lorenz_{setup}{suffix}", made)


def plot_thresholds(setup: str, tt: pd.DataFrame, base_data: Optional[cmp.Data], out: Path, made: list, suffix: str = "") -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for (v, g), c in zip(tt.groupby("variant", sort=False), ["#8c8c8c", "#4C72B0", "#55A868", "#C44E52"]):
        g = g.sort_values("threshold_bytes")
        ax.errorbar(g["threshold_bytes"], g["mean_ms"], yerr=g["ci_ms"], marker="o", ms=3, capsize=2, color=c, label=v)
        b = cmp.age_base(v, BASES)
        if base_data is not None and b in base_data.points:
            ax.axhline(stats.mean_ci(fct_ms(base_data, b))["mean"], color=c, ls=":", lw=1)
    ax.axvline(THRESHOLD[setup], color="k", ls="--", lw=0.8)
    ax.axvline(ANALYTIC_THRESHOLD[setup], color="k", ls="-.", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("threshold (bytes); dashed: seed, dash-dot: analytic optimum; dotted: base")
    ax.set_ylabel("mean FCT (ms)")
    ax.set_title(f"seed 000, {setup}: mean FCT vs 2LPS threshold")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    _save(fig, out, f"thresholds_{setup}{suffix}", made)


# ------------------------------------------------------------------------------------------
# command
# ------------------------------------------------------------------------------------------


def analyse(setup: str, directory, out: Path, thr_dir=None, label: str = "", plots: bool = True, suffix: str = "") -> str:
    data = load(directory)
    mt, pt, et = mean_table(data, setup), pct_table(data, setup), extra_table(data, setup)
    tt = None
    made: list = []
    if thr_dir is not None and Path(thr_dir).exists():
        tt = threshold_table(load(thr_dir), data, setup)
    if plots:
        out.mkdir(parents=True, exist_ok=True)
        plot_mean_pairs(setup, mt, out, made, label, suffix)
        plot_fct_vs_size(setup, data, out, made, suffix)
        plot_lorenz(setup, data, out, made, suffix)
        if tt is not None and len(tt):
            plot_thresholds(setup, tt, data, out, made, suffix)
    return markdown_tables(setup, mt, pt, et, tt, label)


def replace_block(doc: Path, tag: str, text: str) -> None:
    """Replaces what lies between ``<!-- BEGIN GENERATED: tag -->`` and ``<!-- END GENERATED: tag -->``."""
    src = doc.read_text()
    b, e = f"<!-- BEGIN GENERATED: {tag} -->", f"<!-- END GENERATED: {tag} -->"
    i, j = src.find(b), src.find(e)
    if i < 0 or j < i:
        raise SystemExit(f"{doc}: no '{b}' ... '{e}' block")
    doc.write_text(src[: i + len(b)] + "\n" + text + src[j:])


#: the cheap variant (tests/python/test_repro_pages.py): ci-1g.sweep.toml (the full 1 Gb/s
#: set-up, 13 configurations) cut to 8 s with a 2-s warm-up, seed 1
def ci_block(out: Path) -> str:
    """Runs the cheap variant into ``out`` and returns the page's ``ci`` block."""
    from .. import sweeps as _sweep

    d = Path(__file__).resolve().parents[3] / "experiments" / "repro" / "age-based"
    if not d.is_dir():
        d = Path("experiments/repro/age-based")
    plan = _sweep.load_plan(d / "ci-1g.sweep.toml", repeats=1)
    plan.common["duration"] = "8s"
    plan.common["warmup"] = "2s"
    _sweep.validate_plan(plan)
    _sweep.run_plan(plan, out, jobs=1)
    runs = _sweep.merge(plan, out)
    rows = ["| configuration | flows completed | mean FCT (ms) | utilisation |", "|---|---|---|---|"]
    for r in runs.sort_values("point").itertuples():
        res = __import__("sojourn").results.Result.read(out / r.run_dir)
        fl = res.summary["flows"]
        rows.append(f"| {r.point} | {fl['completed']} | {1e3 * fl['fct_s']['mean']:.4f} | "
                    f"{res.summary['links']['nic']['utilisation']:.6f} |")
    return ("The cheap variant (`ci-1g.sweep.toml` cut to 8 s with a 2-s warm-up, seed 1; "
            "`sojourn.repro.age_based.ci_block`) gives:\n\n" + "\n".join(rows) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sojourn.repro.age_based",
                                 description="Seed 000 reproduction: Tables III-VI next to the paper's, plots.")
    ap.add_argument("--1g", dest="g1", metavar="DIR", help="sweep output of short-1g or full-1g")
    ap.add_argument("--10g", dest="g10", metavar="DIR", help="sweep output of short-10g or full-10g")
    ap.add_argument("--thresholds-1g", metavar="DIR", help="sweep output of thresholds-1g")
    ap.add_argument("--thresholds-10g", metavar="DIR", help="sweep output of thresholds-10g")
    ap.add_argument("--out", default=None, help="where the plots go (PNG + SVG; default: <--1g or --10g dir>/img, "
                                                "docs/repro/img/age-based with --update-docs)")
    ap.add_argument("--update-docs", action="store_true",
                    help="plots into docs/repro/img/age-based, the tables into docs/repro/age-based.md's blocks "
                         "(as --doc), plus its provenance and CI blocks")
    ap.add_argument("--markdown", help="also write the tables to this file (default: print them)")
    ap.add_argument("--doc", help="replace the generated blocks of this Markdown file (between "
                                  "'<!-- BEGIN GENERATED: 1g -->' and '<!-- END GENERATED: 1g -->', same for 10g)")
    ap.add_argument("--label", default="", help="appended to table titles, e.g. ' — short, no TSQ'")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--suffix", default="", help="appended to plot names and to the doc block tags (e.g. '-notsq')")
    ap.add_argument("--write-files", metavar="DIR", help="(re)write the generated sweep files and size tables into DIR")
    a = ap.parse_args(argv)
    if a.write_files:
        for f in write_files(Path(a.write_files)):
            print(f"wrote {f}", file=sys.stderr)
        if not (a.g1 or a.g10):
            return 0
    if not (a.g1 or a.g10):
        ap.error("give --1g and/or --10g (sweep output directories)")
    from . import pages

    a.out = str(pages.plot_dir(Path(a.g1 or a.g10), a.out, a.update_docs, "age-based"))
    if a.update_docs:
        a.doc = str(pages.DOCS / "age-based.md")
    text = []
    for setup, d, td in (("1g", a.g1, a.thresholds_1g), ("10g", a.g10, a.thresholds_10g)):
        if d:
            t = analyse(setup, d, Path(a.out), td, a.label, not a.no_plots, a.suffix)
            text.append(t)
            if a.doc:
                replace_block(Path(a.doc), setup + a.suffix, t)
                print(f"updated the {setup}{a.suffix} block of {a.doc}", file=sys.stderr)
    if a.update_docs:
        pages.replace_blocks(Path(a.doc), {"provenance": pages.provenance("age_based", note=(
            "Regenerated after issue 18's TCP fixes (quick-ACKs after the handshake; truesize of one-segment "
            "buffers) with this engine: the 1 Gb/s and 10 Gb/s short comparisons with their threshold studies "
            "(blocks `1g`, `10g`), the plots and the CI block; the RTT table and the prose quote these runs. "
            "Only the \"Without TSQ\" tables come from an older engine (a7b0b4c), as that section says."), prose_generated=False), "ci": ci_block(Path(a.g1 or a.g10) / "ci")})
        print(f"updated the provenance and CI blocks of {a.doc}", file=sys.stderr)
    md = "\n".join(text)
    if a.markdown:
        Path(a.markdown).write_text(md)
        print(f"wrote {a.markdown}", file=sys.stderr)
    else:
        print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
