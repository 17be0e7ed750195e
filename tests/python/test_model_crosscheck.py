"""One source of truth across the language boundary (issue 13): the size-distribution
grammar and sampler and the units parser live in the engine (Rust); Python reaches them
through ``sojourn._engine`` and keeps its closed-form analytics. These tests check that both
sides describe the same law:

* the engine's draws (from a seed) have the mean and CDF of the law ``dists.from_spec``
  builds from the same spec, checked against the law's analytic values;
* the engine's own analytic mean (``SizeDist::mean`` in Rust, an independent formula)
  equals Python's to 1e-9;
* the same seed gives the same samples on both sides (the literals are asserted by the Rust
  test ``dist::tests::the_draws_python_sees`` too);
* units: Python's parsers give the engine's numbers (literals from the unit definitions);
* ``--set``: Python's ``parse_set``/``set_key`` are the engine's (TOML values, the messages of
  the bad-input catalogue as literal lines).

Tolerance for sample means: 4.5 standard errors, with the standard error from the law's
analytic second moment (a false alarm has probability below 1e-5 per check).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import _local  # noqa: F401  (this worktree's python/sojourn first)
from sojourn import dists as D
from sojourn import units as U
from sojourn import _engine as E

N = 200_000

SPECS = {
    "fixed": "50kB",
    "uniform": {"dist": "uniform", "min": "100B", "max": "900B"},
    "exponential": {"dist": "exponential", "mean": "30kB"},
    "pareto": {"dist": "pareto", "alpha": 1.5, "min": "2kB", "max": "2MB"},
    "pareto-grid": {"dist": "pareto", "alpha": 1.2, "min": "2kB", "max": "2MB", "grid": 20},
    "choice": {"dist": "choice", "values": ["15kB", 44000, "73kB", "102kB"]},
}


@pytest.fixture(params=sorted(SPECS))
def spec(request):
    return SPECS[request.param]


def test_engine_draws_have_the_python_laws_mean(spec):
    law = D.from_spec(spec)
    x = D.engine_sample(spec, N, seed=11)
    var = law.moment(2) - law.mean**2
    se = math.sqrt(max(var, 0.0) / N)
    assert abs(x.mean() - law.mean) <= 4.5 * se + 1.0, (x.mean(), law.mean, se)


def test_engine_and_python_analytic_means_agree(spec):
    assert E.size_dist_spec(spec)["mean"] == pytest.approx(D.from_spec(spec).mean, rel=1e-9)


def test_engine_draws_follow_the_python_cdf(spec):
    """Kolmogorov distance between the empirical CDF of the draws and the law's CDF at the
    law's deciles; sup |F_n - F| < 1.95 / sqrt(n) with probability 0.999 (DKW)."""
    law = D.from_spec(spec)
    x = np.sort(D.engine_sample(spec, N, seed=12))
    qs = np.unique(law.ppf(np.linspace(0.05, 0.95, 19)))
    emp = np.searchsorted(x, qs, side="right") / N
    # Whole-byte rounding: a continuous law is compared at x + 1/2.
    cont = not isinstance(law, D.Discrete)
    want = law.cdf(qs + 0.5) if cont else law.cdf(qs)
    assert np.max(np.abs(emp - want)) < 1.95 / math.sqrt(N) + (2e-3 if cont else 0.0)


def test_same_seed_same_samples_on_both_sides():
    spec = {"dist": "exponential", "mean": "30kB"}
    # The Rust test dist::tests::the_draws_python_sees asserts these three numbers.
    assert list(D.engine_sample(spec, 3, seed=1)) == [50_078, 41_243, 3_166]
    assert np.array_equal(D.engine_sample(spec, 1000, seed=5), D.engine_sample(spec, 1000, seed=5))


def test_bounded_pareto_mean_is_the_closed_form():
    # E[X] = L^a / (1 - (L/H)^a) * a / (a - 1) * (L^(1-a) - H^(1-a)) with a = 1.5, L = 2000,
    # H = 2e6, by hand: 89442.72 / 0.99996838 * 3 * (0.02236068 - 0.00070711) = 5810.45.
    assert D.from_spec(SPECS["pareto"]).mean == pytest.approx(5810.45, rel=1e-6)


def test_bad_specs_are_the_engines_messages():
    with pytest.raises(ValueError, match=r"size\.dist: unknown value \"paretoo\""):
        D.from_spec({"dist": "paretoo"})
    with pytest.raises(ValueError, match=r"size\.max: must not be below `min`"):
        D.from_spec({"dist": "uniform", "min": "2kB", "max": "1kB"})


def test_empirical_cdf_file(tmp_path):
    f = tmp_path / "cdf.txt"
    f.write_text("# bytes probability\n1000 0.2\n10000 0.7\n200000 1.0\n")
    spec = {"dist": "empirical", "file": "cdf.txt"}
    law = D.from_spec(spec, base_dir=tmp_path)
    # 0.2 at 1000 B (an atom), then linear pieces: E = 0.2*1000 + 0.5*5500 + 0.3*105000.
    assert law.mean == pytest.approx(0.2 * 1000 + 0.5 * 5500 + 0.3 * 105_000)
    x = D.engine_sample(spec, N, seed=3, base_dir=tmp_path)
    assert abs((x == 1000).mean() - 0.2) < 4.5 * math.sqrt(0.16 / N)


@pytest.mark.parametrize(
    "text,bytes_",
    [("300KiB", 307_200), ("1GiB", 2**30), ("1.5kB", 1500), ("64Kb", 65_536), ("1500", 1500)],
)
def test_sizes_are_the_engines(text, bytes_):
    assert U.parse_size(text) == bytes_
    assert E.parse_bytes(text) == bytes_


def test_rates_and_durations_are_the_engines():
    assert U.parse_rate("10Mbit") == E.parse_rate("10Mbit") == 10_000_000
    assert U.parse_seconds("1min") == 60.0 and E.parse_duration_ns("1min") == 60 * 10**9
    assert U.parse_seconds("500ms") == 0.5 and U.parse_seconds(60) == 60.0
    for bad in ("10 furlongs", "Mbit"):
        with pytest.raises(ValueError):
            U.parse_rate(bad)
    with pytest.raises(ValueError, match="needs a unit"):
        E.parse_duration_ns("60")


def test_a_swept_label_is_typed_with_the_engines_units():
    # docs/reports.md: "20Mbit" -> 20000000.0 bit/s, "5ms" -> 0.005 s, "64KiB" -> 65536.0 bytes
    assert U.typed_value("20Mbit") == 20_000_000.0
    assert U.typed_value("5ms") == 0.005
    assert U.typed_value("64KiB") == 65_536.0
    assert U.typed_value(3) == 3.0 and U.typed_value("2.5") == 2.5
    assert U.typed_value("fq_codel") == "fq_codel" and U.typed_value(True) is True


def test_the_threshold_cli_reads_the_experiment_file_notation():
    inline = '{ dist = "pareto", alpha = 1.5, min = "2kB", max = "2MB" }'
    assert D.parse_dist(inline).mean == pytest.approx(5810.45, rel=1e-6)
    assert D.parse_dist(SPECS["choice"]).mean == pytest.approx((15_000 + 44_000 + 73_000 + 102_000) / 4)
    with pytest.raises(ValueError, match="size.alpha"):
        D.parse_dist('{ dist = "pareto", alpha = -1, min = "2kB", max = "2MB" }')


# --- `--set` overrides: one grammar, one parser (crates/sojourn-experiment/src/overrides.rs) ---

def test_set_values_are_toml_and_bare_words_strings():
    from sojourn._cli_common import parse_set

    got = parse_set(["topology.bottleneck.qdisc=codel", "seed = 7", "a=1.5", "b=true",
                     "c=[1, \"x\"]", "d={ kind = \"red\" }", "e=10Mbit", "f=x=y"])
    assert got == {"topology.bottleneck.qdisc": "codel", "seed": 7, "a": 1.5, "b": True,
                   "c": [1, "x"], "d": {"kind": "red"}, "e": "10Mbit", "f": "x=y"}
    assert [type(v) for v in got.values()] == [str, int, float, bool, list, dict, str, str]


def test_set_key_creates_tables_pads_lists_and_keeps_the_dict():
    from sojourn._config import set_key

    cfg = {"duration": "1s", "workload": [{"kind": "cbr"}]}
    same = cfg
    set_key(cfg, "workload[2].rate", "1Mbit")
    set_key(cfg, " topology . bottleneck.qdisc ", {"kind": "pie", "target": "15ms"})
    assert same is cfg
    assert cfg == {"duration": "1s", "workload": [{"kind": "cbr"}, {}, {"rate": "1Mbit"}],
                   "topology": {"bottleneck": {"qdisc": {"kind": "pie", "target": "15ms"}}}}


@pytest.mark.parametrize("key,line", [
    ("workload[x].rate", "--set: workload[x].rate: list index 'x' in 'workload[x]' is not a non-negative integer"),
    ("workload[100000000].rate", "--set: workload[100000000].rate: list index 100000000 is too large (at most 9999)"),
    ("duration.value", "--set: duration.value: duration is a string ('1s'), not a table, so it has no key 'value'"),
    ("workload.rate", "--set: workload.rate: workload is a list, not a table, so it has no key 'rate'"),
    ("a..b", "--set: a..b: empty key name (two dots, or a leading/trailing dot)"),
])
def test_set_key_messages_are_the_engines(key, line):
    from sojourn._config import ConfigError, set_key

    with pytest.raises(ConfigError) as e:
        set_key({"duration": "1s", "workload": []}, key, 1)
    assert str(e.value) == line
    with pytest.raises(E.ConfigError) as e:  # the engine's own words, one line
        E.set_key({"duration": "1s", "workload": []}, key, 1)
    assert str(e.value) == line.removeprefix("--set: ")
