"""M/G/1 mean response times: formulas against an event simulation, textbook identities,
direct numerical integration, and the exact hyper-exponential solution."""

from __future__ import annotations

import json
import math

import _local  # noqa: F401  (worktree import path)
import numpy as np
import pytest
from scipy import integrate

from sojourn.cli import threshold as cli_threshold
from sojourn import dists as D
from sojourn import mg1sim as S
from sojourn import threshold as T

BP = D.BoundedPareto(1.2, 1.0, 100.0)  # DHR, SCV 3.5: simulations converge in seconds
DISC = D.Discrete([1.0, 10.0, 60.0], [0.8, 0.15, 0.05])  # not DHR: LAS is worse than PS
N_SIM = 300_000


def _agree(analytic: float, est: S.SimEstimate) -> None:
    """Formula within 1 % of the simulation and inside its 99 % interval (widened by the
    0.1 % discretisation allowance of the formula)."""
    assert est.rel_half_width < 0.01, "simulation too short to test at 1 %"
    assert abs(est.mean / analytic - 1.0) < 0.01
    assert abs(est.mean - analytic) <= est.half_width + 1e-3 * analytic


# ---------------------------------------------------------------------------------
# against the event simulation
# ---------------------------------------------------------------------------------


def test_ps_matches_simulation():
    d, load = D.uniform(0.0, 2.0), 0.5
    est = S.batch_means(S.simulate("ps", *S.poisson_jobs(d, load, 600_000, np.random.default_rng(5))),
                        batches=40, level=0.99)
    _agree(T.mean_ps(d, load), est)


@pytest.mark.parametrize(
    "dist,load,disc,th",
    [
        (BP, 0.7, "2lps", (5.4,)),
        (BP, 0.7, "las", ()),
        (BP, 0.7, "srpt", ()),
        (BP, 0.7, "mlps", (2.7, 16.0)),
        (DISC, 0.7, "2lps", (10.0,)),  # threshold on an atom: size-10 jobs stay high
        (DISC, 0.7, "2lps", (4.0,)),
        (DISC, 0.7, "srpt", ()),  # ties between equal sizes (FCFS)
    ],
    ids=["bp-2lps", "bp-las", "bp-srpt", "bp-mlps3", "disc-2lps-atom", "disc-2lps", "disc-srpt"],
)
def test_formula_matches_simulation(dist, load, disc, th):
    est = S.estimate_cv(dist, load, disc, N_SIM, seed=1, thresholds=th, level=0.99)
    if disc == "las":
        analytic = T.mean_las(dist, load)
    elif disc == "srpt":
        analytic = T.mean_srpt(dist, load)
    else:
        analytic = T.mean_mlps(dist, load, list(th))
    _agree(analytic, est)


def test_las_discrete_matches_simulation():
    # equal attained service shared in PS (ties) -- noisier, so a longer run
    est = S.estimate_cv(DISC, 0.5, "las", 400_000, seed=2, level=0.99)
    _agree(T.mean_las(DISC, 0.5), est)


def test_conditional_2lps_matches_simulation():
    # T(x) per size class, including sizes above the threshold (the M^X/G/1-PS part)
    rng = np.random.default_rng(9)
    arr, sz = S.poisson_jobs(DISC, 0.7, N_SIM, rng)
    r = S.simulate("2lps", arr, sz, (4.0,))
    keep = slice(int(0.02 * N_SIM), int(0.98 * N_SIM))
    for x in (1.0, 10.0, 60.0):
        sim = r[keep][sz[keep] == x].mean()
        assert sim == pytest.approx(float(T.response_mlps(DISC, 0.7, [4.0], x)[0]), rel=0.03)


# ---------------------------------------------------------------------------------
# identities and limits
# ---------------------------------------------------------------------------------


def test_2lps_limits_equal_ps():
    for d, load in ((BP, 0.7), (DISC, 0.7), (D.seed000("1g", continuous=True), 0.88)):
        ps = T.mean_ps(d, load)
        assert T.mean_2lps(d, load, d.lo * 1e-6) == pytest.approx(ps, rel=1e-4)
        assert T.mean_2lps(d, load, d.hi * 1.01) == pytest.approx(ps, rel=1e-9)


def test_exponential_all_age_based_equal_ps():
    # memoryless sizes: attained service carries no information, so every work-conserving
    # age-based discipline has the M/M/1 mean 1/(mu - lam)
    d, load = D.Exponential(1.0), 0.8
    assert T.mean_ps(d, load) == pytest.approx(5.0)
    assert T.mean_las(d, load) == pytest.approx(5.0, rel=1e-9)
    for a in (0.1, 1.0, 5.0):
        assert T.mean_2lps(d, load, a) == pytest.approx(5.0, rel=1e-4)
    assert T.mean_mlps(d, load, [0.3, 2.0]) == pytest.approx(5.0, rel=1e-4)


def test_mm1_srpt_against_quadrature():
    # independent implementation of Schrage-Miller with scipy quad for exponential sizes
    load = 0.7
    lam = load
    rho = lambda x: lam * (1 - math.exp(-x) * (1 + x))  # noqa: E731  lam E[X; X <= x]
    m2 = lambda x: 2 * (1 - math.exp(-x) * (1 + x))  # noqa: E731  E[min(X,x)^2]

    def t(x):
        wait = lam * m2(x) / (2 * (1 - rho(x)) ** 2)
        res = integrate.quad(lambda u: 1 / (1 - rho(u)), 0, x)[0]
        return wait + res

    ref = integrate.quad(lambda x: t(x) * math.exp(-x), 0, 50, limit=200)[0]
    assert T.mean_srpt(D.Exponential(1.0), load) == pytest.approx(ref, rel=1e-6)


def test_las_against_quadrature():
    d, load = D.BoundedPareto(1.2, 307200, 1024**3), 0.88
    lam = load / d.mean
    ref = integrate.quad(
        lambda x: (lam * float(d.lim2(x)) / (2 * (1 - lam * float(d.lim1(x)))) + x)
        / (1 - lam * float(d.lim1(x))) * float(d.pdf(x)),
        d.lo, d.hi, points=[1e6, 1e7, 1e8], limit=400, epsrel=1e-9,
    )[0]
    assert T.mean_las(d, load) == pytest.approx(ref, rel=1e-6)


def test_ordering_for_dhr():
    # DHR sizes: SRPT <= LAS <= MLPS-3(opt) <= 2LPS(opt) <= PS (Aalto, Ayesta, Nyberg-Oksanen)
    for d, load in ((BP, 0.7), (D.seed000("1g", continuous=True), 0.88)):
        srpt, las, ps = T.mean_srpt(d, load), T.mean_las(d, load), T.mean_ps(d, load)
        two = T.optimal_threshold(d, load, n_grid=200, grid_points=20)
        assert srpt < las < two.mean < ps
    three = T.optimal_thresholds(BP, 0.7, 3, n_grid=150)
    assert T.mean_las(BP, 0.7) < three.mean < T.optimal_threshold(BP, 0.7).mean


def test_not_dhr_las_worse_than_ps():
    assert T.mean_las(DISC, 0.7) > T.mean_ps(DISC, 0.7) > T.mean_srpt(DISC, 0.7)


def test_collocation_matches_exact_hyperexponential():
    # widely spread rates mimic a heavy tail; the Laplace-transform solution is exact
    h = D.HyperExponential([0.9, 0.09, 0.01], [1.0, 0.05, 0.001])
    for load in (0.5, 0.9):
        for a in (0.5, 5.0, 50.0, 500.0):
            assert T.mean_2lps(h, load, a) == pytest.approx(T.mean_2lps_hyperexp(h, load, a), rel=2e-4)


def test_mlps_with_many_levels_approaches_las():
    d, load = BP, 0.7
    th = list(np.geomspace(1.01, 99.0, 40))
    m = T.mean_mlps(d, load, th, n_grid=120)
    # (the collocation error of 40 levels is ~1e-4, so allow that much below LAS)
    assert T.mean_las(d, load) * (1 - 5e-4) < m < T.mean_las(d, load) * 1.01
    assert m < T.mean_mlps(d, load, th[::4], n_grid=120)  # more levels, lower mean (DHR)


def test_bad_parameters():
    with pytest.raises(ValueError):
        T.mean_ps(BP, 1.0)
    with pytest.raises(ValueError):
        T.mean_mlps(BP, 0.5, [5.0, 2.0])
    with pytest.raises(ValueError):
        T.mean_2lps(BP, 0.5, -1.0)


# ---------------------------------------------------------------------------------
# seed 000 thresholds
# ---------------------------------------------------------------------------------


def test_seed000_1g_optimum():
    d = D.seed000("1g", continuous=True)
    r = T.optimal_threshold(d, 0.875, n_grid=250, grid_points=25)
    assert 9e6 < r.threshold < 14e6
    seed = T.mean_2lps(d, 0.875, 6_331_208, n_grid=250)
    assert 1.0 < seed / r.mean < 1.02  # the seed's PhFit threshold costs ~1.3 %
    lo, hi = T.flat_interval(d, 0.875, r, n_grid=250)
    assert lo < r.threshold < hi
    for a in (lo, hi):
        assert T.mean_2lps(d, 0.875, a, n_grid=250) == pytest.approx(1.01 * r.mean, rel=1e-4)


def test_seed000_10g_threshold_far_from_optimum():
    d = D.seed000("10g", continuous=True)
    r = T.optimal_threshold(d, 0.92, n_grid=200, grid_points=20)
    assert 2e8 < r.threshold < 5e8
    assert T.mean_2lps(d, 0.92, 19_500_715, n_grid=200) / r.mean > 1.1


# ---------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------


def test_cli_json(capsys):
    rc = cli_threshold.main(["bounded-pareto alpha=1.2 min=1kB max=100kB", "--load", "0.7",
                             "--threshold", "5kB", "--link-rate", "1Mbit", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    names = [r["discipline"] for r in out["results"]]
    assert names == ["PS", "2LPS (optimal)", "2LPS (given)", "LAS", "SRPT"]
    ps = out["results"][0]
    d = D.BoundedPareto(1.2, 1e3, 1e5)
    assert ps["mean_s"] == pytest.approx(d.mean / 0.3 * 8 / 1e6)
    assert out["optimal_threshold_bytes"] == pytest.approx(5.4e3, rel=0.1)


def test_cli_table_and_plot(tmp_path, capsys):
    png = tmp_path / "curve.png"
    rc = cli_threshold.main(["bounded-pareto", "alpha=1.5", "min=1kB", "max=1MB", "--load", "0.5",
                             "--levels", "3", "--plot", str(png)])
    assert rc == 0
    assert png.stat().st_size > 0 and png.with_suffix(".svg").stat().st_size > 0
    assert "MLPS-3" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [["seed000-1g", "--load", "1.5"], ["nonsense"], ["seed000-1g"],
     ["seed000-1g", "--load", "0.5", "--link-rate", "fast"],
     ["seed000-1g", "--load", "0.5", "--threshold", "5 parsec"],
     ["/no/such/flows.parquet", "--load", "0.5"]],
)
def test_cli_errors(argv, capsys):
    assert cli_threshold.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("sojourn threshold: error:") and err.count("\n") == 1
