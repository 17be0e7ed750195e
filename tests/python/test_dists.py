"""Flow-size distributions: the seed's published tables, closed forms against quadrature,
sampling against the law, spec parsing."""

from __future__ import annotations

import math

import _local  # noqa: F401  (worktree import path)
import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from sojourn import dists as D

# ---------------------------------------------------------------------------------
# seed 000 tables (seed_code_facts.md section 1, verified there numerically)
# ---------------------------------------------------------------------------------


def test_seed000_1g_table():
    d = D.seed000("1g")
    assert len(d.values) == 249
    assert d.values[0] == 312_316 and d.values[-1] == 1_056_434_894
    assert d.probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert d.mean == pytest.approx(1.48e6, rel=0.005)
    assert d.median == pytest.approx(545e3, rel=0.002)


def test_seed000_10g_table():
    d = D.seed000("10g")
    assert len(d.values) == 199
    assert d.values[0] == 382_378 and d.values[-1] == 66_687_628_479
    assert d.mean == pytest.approx(2.87e6, rel=0.005)
    assert d.median == pytest.approx(703e3, rel=0.002)


def test_seed000_paper_fraction_below_threshold():
    # paper (seed 000, sec. V): 97.4 % of the 1 Gb/s flows are below the 6.33 MB threshold
    assert float(D.seed000("1g").cdf(6_331_208)) == pytest.approx(0.974, abs=0.002)


def test_seed000_paper_ranges():
    # paper: 10 Gb/s sizes "between 373 KiB and 62 GiB" (the smallest/largest table sizes)
    d = D.seed000("10g")
    assert d.values[0] / 1024 == pytest.approx(373, abs=0.5)
    assert d.values[-1] / 1024**3 == pytest.approx(62, abs=0.2)


def test_discrete_close_to_continuous():
    for s in ("1g", "10g"):
        a, b = D.seed000(s), D.seed000(s, continuous=True)
        assert a.mean == pytest.approx(b.mean, rel=0.01)


# ---------------------------------------------------------------------------------
# closed forms against numerical integration of the survival function
# ---------------------------------------------------------------------------------

LAWS = [
    D.BoundedPareto(1.2, 300 * 1024, 1024**3),
    D.BoundedPareto(1.0, 10.0, 1e4),  # alpha = 1: logarithmic branch
    D.BoundedPareto(2.0, 10.0, 1e4),  # alpha = 2: logarithmic branch of the 2nd moment
    D.Exponential(1e6),
    D.LogNormal(math.log(5e5), 1.3),
    D.uniform(1e3, 1e5),
    D.PiecewiseLinearCdf([1e3, 1e4, 1e6], [0.2, 0.7, 1.0]),
    D.HyperExponential([0.9, 0.1], [1e-5, 1e-7]),
]


def _quad_sf(d, x, k):
    """integral_0^x k t^(k-1) P(X > t) dt by adaptive quadrature on a log scale."""
    pts = [p for p in (d.lo, d.median, d.hi_eff) if 0 < p < x]
    f = lambda t: k * t ** (k - 1) * float(d.sf(t))  # noqa: E731
    return integrate.quad(f, 0, x, points=pts or None, limit=500, epsrel=1e-10)[0]


@pytest.mark.parametrize("d", LAWS, ids=lambda d: d.name)
def test_partial_moments_match_quadrature(d):
    for q in (0.05, 0.5, 0.9, 0.999):
        x = float(d.ppf(q))
        assert float(d.lim1(x)) == pytest.approx(_quad_sf(d, x, 1), rel=1e-6)
        assert float(d.lim2(x)) == pytest.approx(_quad_sf(d, x, 2), rel=1e-6)


@pytest.mark.parametrize("d", LAWS, ids=lambda d: d.name)
def test_mean_and_moments(d):
    top = d.hi_eff
    m1 = _quad_sf(d, top, 1)
    m2 = _quad_sf(d, top, 2)
    assert d.mean == pytest.approx(m1, rel=1e-6)
    assert d.moment(2) == pytest.approx(m2, rel=1e-5)
    assert d.expect(lambda x: x) == pytest.approx(d.mean, rel=1e-6)
    assert float(d.cdf(d.ppf(0.3))) == pytest.approx(0.3, abs=1e-9)


def test_discrete_lim_at_atoms():
    d = D.Discrete([1, 10, 60], [0.8, 0.15, 0.05])
    assert float(d.lim1(10)) == pytest.approx(0.8 * 1 + 0.2 * 10)
    assert float(d.lim2(10)) == pytest.approx(0.8 * 1 + 0.2 * 100)
    assert float(d.sf(10)) == pytest.approx(0.05)
    assert float(d.sf_left(10)) == pytest.approx(0.2)
    assert float(d.partial_mean(10)) == pytest.approx(0.8 + 1.5)


@settings(max_examples=40, deadline=None)
@given(
    alpha=st.floats(0.3, 3.0),
    lo=st.floats(1.0, 1e6),
    ratio=st.floats(1.5, 1e6),
    q=st.floats(0.0, 1.0),
)
@example(alpha=3.0, lo=1.0, ratio=1508.0, q=1.0)  # ppf(1) overshot hi by rounding
def test_bounded_pareto_properties(alpha, lo, ratio, q):
    d = D.BoundedPareto(alpha, lo, lo * ratio)
    x = float(d.ppf(q))
    l1, l2 = float(d.lim1(x)), float(d.lim2(x))
    assert lo * (1 - 1e-9) <= x <= lo * ratio * (1 + 1e-9)
    assert l1 <= x * (1 + 1e-9) and l1 <= d.mean * (1 + 1e-9)
    assert l2 >= l1**2 * (1 - 1e-9)  # Jensen
    assert float(d.lim1(lo * ratio * 2)) == pytest.approx(d.mean, rel=1e-9)


# ---------------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "d",
    [D.BoundedPareto(1.2, 307200, 1024**3), D.Exponential(1e6), D.LogNormal(13, 1.0),
     D.PiecewiseLinearCdf([1e3, 1e4, 1e6], [0.0, 0.7, 1.0])],
    ids=lambda d: d.name,
)
def test_sampling_matches_cdf(d):
    rng = np.random.default_rng(7)
    x = d.sample(rng, 20000)
    assert stats.kstest(x, d.cdf).pvalue > 1e-3


def test_discrete_sampling_frequencies():
    d = D.seed000("1g")
    rng = np.random.default_rng(3)
    x = d.sample(rng, 200_000)
    # chi-square on deciles of the probability mass
    edges = np.quantile(d.values, np.linspace(0, 1, 11))
    obs = np.histogram(x, bins=edges)[0]
    exp = np.array([d.probs[(d.values >= a) & ((d.values < b) | (b == edges[-1]))].sum()
                    for a, b in zip(edges[:-1], edges[1:])]) * x.size
    assert stats.chisquare(obs, exp).pvalue > 1e-3


# ---------------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------------


def test_parse_size_units():
    assert D.parse_size("300KiB") == 307200
    assert D.parse_size("1GiB") == 2**30
    assert D.parse_size("1MB") == 1e6
    assert D.parse_size("1.5kB") == 1500
    assert D.parse_size("1500") == 1500
    assert D.parse_size("64Kb") == 65536  # tc convention, as in sojourn-core
    for bad in ("1 parsec", "MB", "", "-1MB"):
        with pytest.raises(ValueError):
            D.parse_size(bad)


def test_parse_dist_specs():
    d = D.parse_dist("bounded-pareto alpha=1.2 min=300KiB max=1GiB")
    assert isinstance(d, D.BoundedPareto)
    assert (d.alpha, d.lo, d.hi) == (1.2, 307200, 2**30)
    assert D.parse_dist("seed000-1g").values[0] == 312_316
    assert D.parse_dist("seed000-10g-continuous").lo == pytest.approx(1024**1.85)
    assert D.parse_dist("exponential mean=1MB").mean == pytest.approx(1e6)
    assert D.parse_dist("fixed size=1500B").mean == 1500
    assert D.parse_dist("uniform min=0 max=2kB").mean == pytest.approx(1000)
    ln = D.parse_dist("lognormal mean=1MB sigma=1.5")
    assert ln.mean == pytest.approx(1e6, rel=1e-9)
    d2 = D.parse_dist("discrete-bounded-pareto alpha=1.2 min=300KiB max=1GiB points=250")
    assert np.array_equal(d2.values, D.seed000("1g").values)


@pytest.mark.parametrize(
    "spec",
    ["", "weibull k=2", "bounded-pareto alpha=1.2 min=1MB", "exponential mean=1MB foo=2",
     "exponential mean", "bounded-pareto alpha=x min=1 max=2", "bounded-pareto alpha=1 min=2 max=1",
     "seed000-1g extra=1", "empirical path=/nonexistent/file.csv", "lognormal sigma=1"],
)
def test_parse_dist_errors(spec):
    with pytest.raises(ValueError):
        D.parse_dist(spec)


def test_empirical_cdf_file(tmp_path):
    f = tmp_path / "cdf.csv"
    f.write_text("size_bytes,cdf\n1000,0\n2000,0.5\n4000,1.0\n")
    d = D.parse_dist(f"empirical path={f}")
    assert float(d.cdf(1500)) == pytest.approx(0.25)
    assert d.mean == pytest.approx(0.5 * 1500 + 0.5 * 3000)
    bad = tmp_path / "bad.csv"
    bad.write_text("size_bytes,cdf\n1000,0\n2000,0.9\n1500,1.0\n")
    with pytest.raises(ValueError):
        D.parse_dist(f"empirical path={bad}")


def test_flows_table(tmp_path):
    p = tmp_path / "flows.parquet"
    pd.DataFrame({"size_bytes": [100, 100, 300, 500], "fct_s": [1, 2, 3, 4]}).to_parquet(p)
    d = D.parse_dist(str(p))
    assert d.mean == pytest.approx(250)
    assert float(d.pmf(100)) == pytest.approx(0.5)
    p2 = tmp_path / "noflows.parquet"
    pd.DataFrame({"x": [1]}).to_parquet(p2)
    with pytest.raises(ValueError):
        D.parse_dist(str(p2))
