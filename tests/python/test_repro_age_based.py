"""Seed 000 reproduction (age-based scheduling over AQMs), reduced for CI.

* The shipped experiment files carry the seed's thresholds (6,331,208 B at 1 Gb/s,
  19,500,715 B at 10 Gb/s, nftables tests/nft.cue), its classids, and the seed's exact
  discrete size table.
* A reduced-duration run of the 1 Gb/s set-up (experiments/repro/age-based/ci-1g.sweep.toml:
  the full set-up, 40 s simulated, 5 s warm-up) reproduces the paper's qualitative finding
  (Table III): every age-based variant has a lower mean FCT than its base discipline.
  Why this is sound at 40 s: over seeds 1-6 of this file every one of the 7 pairs had a
  negative gain, on each of three engine versions (without TSQ; with TSQ; with TSQ and the
  HyStart round-start fix): 126/126, the smallest -10.6 % (CoDel). The pairs share the seed,
  so the actors draw the same sizes and think times in every configuration, and the gain's
  seed-to-seed spread is well inside the unpaired 95% interval (about ±15-20 points here).
  The stronger claim, the gain's 95% interval entirely below 0, held for FIFO on every seed
  and version (upper end <= -18 %) and is asserted for it; for the others it failed on some
  seeds (CoDel 2/6, PIE 1/6 with the latest engine; PIE 2/6 without TSQ), so only the
  direction is asserted for them. docs/repro/age-based.md, "CI test", has the tables.
"""

from __future__ import annotations

from pathlib import Path

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

import numpy as np
import pytest

import _local  # noqa: F401  (this worktree's python/sojourn first)
from sojourn import dists
from sojourn.repro import age_based as ab

ROOT = Path(__file__).resolve().parents[2]
DIR = ROOT / "experiments" / "repro" / "age-based"


def _variants(path: Path) -> dict:
    sw = tomllib.loads(path.read_text())
    return {v["name"]: v["set"] for v in sw["variant"]}


@pytest.mark.parametrize("setup", ["1g", "10g"])
def test_shipped_files_carry_the_seed_threshold_and_classids(setup):
    T = {"1g": 6_331_208, "10g": 19_500_715}[setup]
    assert ab.THRESHOLD[setup] == T
    files = [DIR / f"full-{setup}.sweep.toml", DIR / f"short-{setup}.sweep.toml"]
    if setup == "1g":
        files.append(DIR / "ci-1g.sweep.toml")
    want = {"age-pfifofast": ("1:6", "1:0"), "age-cake": ("1:2", "1:1"), "age-cake-strict": ("1:2", "1:1"),
            **{f"age-prio-{q}": ("1:1", "1:2") for q in ("codel", "fqcodel", "pie", "fqpie")}}
    for f in files:
        vs = _variants(f)
        assert set(vs) == {c[0] for c in ab.CONFIGS}, f
        for name, s in vs.items():
            if name.startswith("age-"):
                (rule,) = s["classifier"]
                assert rule["at"] == "client" and rule["hook"] == "output"
                small, large = rule["map"]
                assert small["upto"] == T, (f, name)  # inclusive 0-T, like nft's map
                assert "upto" not in large  # `*`
                assert (small["priority"], large["priority"]) == want[name], (f, name)
            else:
                assert "classifier" not in s, (f, name)  # base variants: no nft table
        # the files are what the generator writes (no hand edits drifted)
        kind = f.name.split("-")[0]
        assert f.read_text() == ab.sweep_text(setup, kind)


@pytest.mark.parametrize("setup", ["1g", "10g"])
def test_size_table_is_the_seed_discretisation(setup):
    d = dists.seed000(setup)
    rows = [line.split() for line in (DIR / f"sizes-{setup}.cdf").read_text().splitlines() if not line.startswith("#")]
    x = np.array([float(r[0]) for r in rows])[1::2]
    p = np.diff(np.concatenate([[0.0], np.array([float(r[1]) for r in rows])[1::2]]))
    assert np.array_equal(x, d.values)
    assert np.allclose(p, d.probs, rtol=1e-12, atol=1e-15)
    # seed_code_facts.md §1: 249 sizes 312,316 .. 1,056,434,894 B (1g); 199 sizes 382,378 .. 66,687,628,479 B (10g)
    n, lo, hi = {"1g": (249, 312_316, 1_056_434_894), "10g": (199, 382_378, 66_687_628_479)}[setup]
    assert (x.size, x[0], x[-1]) == (n, lo, hi)


#: Pairs whose 95% gain interval is asserted to lie below 0 (robustly so on seeds 1-6 of the
#: 40-s CI run, with and without TSQ); the others are checked on the point estimate only.
PAIRS_RESOLVED = {"pfifo"}


def test_every_age_variant_beats_its_base_at_1g(tmp_path):
    import sojourn

    out = tmp_path / "ci-1g"
    sojourn.sweep(str(DIR / "ci-1g.sweep.toml"), str(out), jobs=2, quiet=True)
    data = ab.load(out)
    mt = ab.mean_table(data, "1g")
    assert len(mt) == 7
    for r in mt.itertuples():
        # few flows are still running at the end (those are left out, as in the seed);
        # too many would bias the mean in favour of the discipline that starves them
        f = data.flows[(data.flows["point"] == r.age) & data.flows["after_warmup"].astype(bool)]
        assert (~f["completed"].astype(bool)).mean() < 0.03, r.age
        assert r.age_mean_ms < r.base_mean_ms, f"{r.age}: {r.age_mean_ms:.1f} ms vs {r.base}: {r.base_mean_ms:.1f} ms"
        if r.base in PAIRS_RESOLVED:
            assert r.gain_hi < 0, f"{r.age} over {r.base}: gain {r.gain:+.3f} [{r.gain_lo:+.3f}, {r.gain_hi:+.3f}]"


def test_seed_style_age_pairs_and_end_margin():
    import pandas as pd

    from sojourn.analysis import compare as cmp

    pts = [c[0] for c in ab.CONFIGS]
    want = {"age-pfifofast": "pfifo", "age-prio-codel": "codel", "age-prio-fqcodel": "fqcodel", "age-cake": "cake",
            "age-cake-strict": "cake", "age-prio-pie": "pie", "age-prio-fqpie": "fqpie"}
    assert {p: cmp.age_base(p, pts) for p in pts if p.startswith("age-")} == want
    assert cmp.age_base("age-codel+1Gbit", ["codel+1Gbit", "codel+10Gbit"]) == "codel+1Gbit"
    assert cmp.age_base("age-codel", ["pfifo"]) is None
    # seed 000's end filter: keep flows that end at least `margin` before the end of the run
    runs = pd.DataFrame({"point": ["a"], "seed": [1], "duration_s": [100.0]})
    flows = pd.DataFrame({"point": "a", "seed": 1, "start_s": [10.0, 20.0, 30.0, 50.0],
                          "end_s": [39.0, 40.0, 40.5, float("nan")], "completed": [True, True, True, False],
                          "size_bytes": 1000, "fct_s": [29.0, 20.0, 10.5, float("nan")], "after_warmup": True})
    data = cmp.apply_end_margin(cmp.Data(runs, flows, Path("."), ["a"]), cmp.parse_seconds("60s"))
    assert list(data.flows["before_end"]) == [True, True, False, True]
    assert sorted(cmp.samples(data, "a", "fct")) == [20.0, 29.0]
    assert cmp.parse_seconds("1.5min") == 90.0 and cmp.parse_seconds(None) == 0.0
