"""Seed 000 reproduction: age-based scheduling over FIFO, CoDel, FQ-CoDel, CAKE, PIE, FQ-PIE.

Regenerate everything in docs/repro/age-based.md (after running the sweeps it names):

    python -m sojourn.repro.age_based --1g results/age-1g --10g results/age-10g \\
        --thresholds-1g results/age-thr-1g --thresholds-10g results/age-thr-10g \\
        --out docs/repro/img/age-based --markdown docs/repro/age-based.tables.md

``python -m sojourn.repro.age_based --write-files experiments/repro/age-based`` rewrites the
shipped sweep files and size tables from the definitions below (they are generated, so the
twelve configurations of the four sweeps cannot drift apart).

Statistics come from :mod:`sojourn.compare` (which uses :mod:`sojourn.stats`): mean FCT
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

from .. import compare as cmp

# ------------------------------------------------------------------------------------------
# the set-ups (seed 000, Tables I and II; thresholds from tests/nft.cue of
# UniVe-NeDS-Lab/linux_age_based_scheduler, see shared/reference/seed_code_facts.md §1)
# ------------------------------------------------------------------------------------------

THRESHOLD = {"1g": 6_331_208, "10g": 19_500_715}

#: analytic optimum 2LPS threshold (docs/threshold.md, `sojourn threshold seed000-1g --load
#: 0.88` and `seed000-10g --load 0.92`), and the other thresholds of the threshold study
ANALYTIC_THRESHOLD = {"1g": 11_500_000, "10g": 312_000_000}
THRESHOLD_STUDY = {
    "1g": [1_000_000, 3_000_000, 6_331_208, 11_500_000, 30_000_000, 100_000_000],
    "10g": [6_331_208, 19_500_715, 60_000_000, 312_000_000],
}

SETUP = {
    "1g": {"rate": "1Gbit", "actors": 80, "think": "1s", "alpha": 1.2, "range": "300 KiB–1 GiB",
           "duration": "6h", "warmup": "3600s", "short_duration": "15min", "short_warmup": "150s",
           "ci_duration": "40s", "ci_warmup": "5s", "load": 0.88, "rtt_ms": 0.710},
    "10g": {"rate": "10Gbit", "actors": 150, "think": "0.35s", "alpha": 1.1, "range": "373 KiB–62 GiB",
            "duration": "4h", "warmup": "1800s", "short_duration": "5min", "short_warmup": "60s",
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
# the paper's numbers, transcribed from the seed text (shared/seeds/000_*.txt, section V):
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
        f"# flows ending in the last 60 s left out (end_margin).",
        f"# Parameters: CoDel/FQ-CoDel interval 10 ms target 0.5 ms; PIE/FQ-PIE tupdate 3 ms target 0.5 ms;",
        f"# CAKE rtt 10 ms; threshold {T:,} B (inclusive, ct bytes both directions, IP bytes) on the",
        f"# client's output hook; prio bands 3 with the same leaf on every band, 1:1 / 1:2; pfifo_fast",
        f"# 1:6 / 1:0; CAKE 1:2 (Best Effort) / 1:1 (Bulk). The `age` discipline is the one-line form of",
        f"# prio + classifier ({{ kind = \"age\", thresholds = [{T}], child = ... }}); the prio form mirrors the seed.",
        f"#   " + one.format(f=fname, setup=setup),
        f'name = "seed000-{setup}-{length}"',
        f'base = "age-{setup}.toml"',
        f"repeats = 1",
        f'link = "nic"',
        f'end_margin = "60s"',
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
        f"# the age-based variants of FIFO, CoDel and FQ-CoDel at the seed's threshold ({THRESHOLD[setup]:,} B),",
        f"# the analytic 2LPS optimum of `sojourn threshold` (~{ANALYTIC_THRESHOLD[setup]:,} B, docs/threshold.md)",
        "# and a few others; the threshold is the classifier's inclusive upper bound for the first band.",
        f"#   sojourn sweep experiments/repro/age-based/thresholds-{setup}.sweep.toml --out results/age-thr-{setup}",
        f'name = "seed000-{setup}-thresholds"',
        f'base = "age-{setup}.toml"',
        "repeats = 1",
        'link = "nic"',
        'end_margin = "60s"',
        f'set = {{ duration = "{s["short_duration"]}", warmup = "{s["short_warmup"]}" }}',
    ]
    for name, q, prios, _ in CONFIGS:
        if name not in ("age-pfifofast", "age-prio-codel", "age-prio-fqcodel"):
            continue
        lines += ["", "[[variant]]", f'name = "{name}"',
                  "set = { " + f'"topology.links[0].qdisc" = {q}, "classifier" = {classifier_toml(THRESHOLD[setup], prios)}' + " }"]
    lines += ["", "[[axis]]", 'key = "classifier[0].map[0].upto"', "values = [" + ", ".join(str(t) for t in ths) + "]",
              "names = [" + ", ".join(f'"T={t / 1e6:.4g}MB"' for t in ths) + "]", 'name = "threshold"']
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
        for n, text in files.items():
            (directory / n).write_text(text)
            out.append(directory / n)
    return out
