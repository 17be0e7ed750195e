"""Mean response times of the M/G/1 queue under PS, LAS (FB), SRPT, 2LPS and MLPS, and the
optimal 2LPS / MLPS thresholds.

Model: Poisson arrivals of rate ``lam = load / E[X]``; a job of size x bytes needs x units of
work; the server does 1 byte of work per time unit. All times below are therefore in
"byte-times"; divide by the link rate in bytes/s (``to_seconds``) to get seconds.

Formulas (X_x = min(X, x), rho_x = lam E[X_x], W_x = lam E[X_x^2] / (2 (1 - rho_x)) is the
mean unfinished work truncated at x, i.e. Pollaczek-Khinchine for sizes X_x):

* PS:    E[T] = E[X] / (1 - rho).
* LAS:   T(x) = (W_x + x) / (1 - rho_x)   (Kleinrock; Schrage 1967).
* SRPT:  T(x) = lam E[X_x^2] / (2 (1 - rho(x-)) (1 - rho(x))) + int_0^x dt / (1 - rho(t-)),
         rho(x) = lam E[X; X <= x]  (Schrage & Miller 1966; FCFS among equal sizes).
* MLPS with thresholds 0 = a_0 < a_1 < ... < a_{k-1} < a_k = inf and PS inside every level
  (Kleinrock 1976 sec. 4.7; Aalto, Ayesta & Nyberg-Oksanen, SIGMETRICS 2004): a job of size
  x in (a_{j-1}, a_j] reaches attained service a_{j-1} at the end of the busy period of the
  work truncated at a_{j-1}, then shares level j in PS, stretched by the busy periods of the
  higher levels:

      T(x) = (W_{a_{j-1}} + a_{j-1} + alpha_j(x - a_{j-1})) / (1 - rho_{a_{j-1}}).

  alpha_j(y) is the conditional response time of an M^X/G/1-PS queue seen in "level-j time"
  (the time when no higher level is busy): batches arrive at rate lam (one per higher-level
  busy period), a batch holds the N jobs of that busy period that reach a_{j-1},
  with E[N] = p / (1 - rho_{a}) and E[N(N-1)]/E[N] = b = lam (2 p a + lam E[N] E[X_a^2]) / (1 - rho_a)
  (a = a_{j-1}, p = P(X > a)); a job's work in the level is Y = min(X, a_j) - a given X > a.
  phi = alpha_j' solves the Kleinrock-Muntz-Rodemich integral equation (G(t) = P(X > a + t)
  for t < a_j - a, 0 beyond; c = lam / (1 - rho_a)):

      phi(t) = 1 + b G(t)/p + c int_0^inf phi(u) G(u + t) du + c int_0^t phi(s) G(t - s) ds.

  The first integral counts jobs present when the tagged job enters the level that are still
  there when it has received t, the second those arriving afterwards, b G(t)/p its batch
  partners. The kernel's row sums are at most c E[(X - a)^+] = (rho - rho_a)/(1 - rho_a) < 1, so the
  equation has a unique bounded solution. We solve it by collocation: phi piecewise constant
  on a log-spaced partition of [0, a_j - a] refined at the atoms of X (the kernel integrals are
  exact, from ``lim1``), midpoint collocation, a dense linear solve. The seed code solved the
  same equation for a hyper-exponential fit of X with Bansal's (2003) linear system; this
  module solves it for the actual law. 2LPS is MLPS with one threshold.

Everything is validated against an independent event simulation (``sojourn.mg1sim``) in
tests/python/test_threshold.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from .dists import HyperExponential, SizeDist

FloatArray = NDArray[np.float64]

__all__ = [
    "arrival_rate",
    "mean_ps",
    "mean_las",
    "mean_srpt",
    "mean_2lps",
    "mean_mlps",
    "mean_2lps_hyperexp",
    "response_ps",
    "response_las",
    "response_srpt",
    "response_mlps",
    "optimal_threshold",
    "optimal_thresholds",
    "threshold_curve",
    "flat_interval",
    "ThresholdResult",
    "to_seconds",
]


def _check_load(load: float) -> None:
    if not (0.0 < load < 1.0):
        raise ValueError(f"load must be in (0, 1) for a stable M/G/1 queue, got {load}")


def arrival_rate(dist: SizeDist, load: float) -> float:
    """lam = load / E[X] (jobs per byte-time)."""
    _check_load(load)
    return load / dist.mean


def to_seconds(t_bytes: float | FloatArray, link_rate_bps: float) -> float | FloatArray:
    """Converts a time in byte-times (1 byte served per time unit) to seconds at a link rate."""
    return t_bytes * 8.0 / link_rate_bps


# ------------------------------------------------------------------------------------
# PS, LAS, SRPT
# ------------------------------------------------------------------------------------


def response_ps(dist: SizeDist, load: float, x: ArrayLike) -> FloatArray:
    """Conditional mean response time of a size-x job under PS: x / (1 - rho)."""
    _check_load(load)
    return np.asarray(x, dtype=float) / (1.0 - load)


def mean_ps(dist: SizeDist, load: float) -> float:
    """E[T] under PS = E[X] / (1 - rho) (insensitive to the size law beyond its mean)."""
    _check_load(load)
    return dist.mean / (1.0 - load)


def response_las(dist: SizeDist, load: float, x: ArrayLike) -> FloatArray:
    """Conditional mean response time under LAS/FB: (W_x + x) / (1 - rho_x)."""
    lam = arrival_rate(dist, load)
    x = np.asarray(x, dtype=float)
    rho_x = lam * dist.lim1(x)
    w_x = lam * dist.lim2(x) / (2.0 * (1.0 - rho_x))
    return (w_x + x) / (1.0 - rho_x)


def mean_las(dist: SizeDist, load: float) -> float:
    """E[T] under LAS/FB."""
    return dist.expect(lambda x: response_las(dist, load, x))


def _srpt_rho(dist: SizeDist, lam: float, x: FloatArray, left: bool) -> FloatArray:
    """lam E[X; X <= x] (left=False) or lam E[X; X < x] (left=True)."""
    tail = dist.sf_left(x) if left else dist.sf(x)
    return lam * (dist.lim1(x) - x * tail)


def _srpt_wait(dist: SizeDist, lam: float, x: FloatArray) -> FloatArray:
    r = _srpt_rho(dist, lam, x, left=False)
    rl = _srpt_rho(dist, lam, x, left=True)
    return lam * dist.lim2(x) / (2.0 * (1.0 - rl) * (1.0 - r))


def response_srpt(dist: SizeDist, load: float, x: ArrayLike) -> FloatArray:
    """Conditional mean response time under SRPT (Schrage-Miller)."""
    from .dists import _gl_nodes

    lam = arrival_rate(dist, load)
    x = np.atleast_1d(np.asarray(x, dtype=float))
    # residence int_0^x dt / (1 - rho(t-)) on a partition that contains every x
    edges = np.unique(np.concatenate([dist._t_edges, np.maximum(x, 0.0)]))
    t, w = _gl_nodes(edges)
    h = w / (1.0 - _srpt_rho(dist, lam, t, left=True))
    cum = np.concatenate([[0.0], np.cumsum(h.reshape(edges.size - 1, -1).sum(axis=1))])
    res = cum[np.searchsorted(edges, np.maximum(x, 0.0))]
    return _srpt_wait(dist, lam, x) + res


def mean_srpt(dist: SizeDist, load: float) -> float:
    """E[T] under SRPT: E[wait(X)] + int_0^inf P(X > t) / (1 - rho(t-)) dt."""
    lam = arrival_rate(dist, load)
    wait = dist.expect(lambda x: _srpt_wait(dist, lam, x))
    res = dist.integrate_dt(
        lambda t: dist.sf(t) / (1.0 - _srpt_rho(dist, lam, t, left=True))
    )
    return wait + res


# ------------------------------------------------------------------------------------
# MLPS
# ------------------------------------------------------------------------------------


@dataclass
class _Level:
    """Solution of one PS level (a_prev, a_next] of an MLPS discipline."""

    a_prev: float
    a_next: float
    rho_prev: float
    w_prev: float
    edges: FloatArray  # partition of [0, delta]
    phi: FloatArray  # alpha' per cell
    contribution: float  # E[T; a_prev < X <= a_next]


def _level_grid(dist: SizeDist, a_prev: float, delta: float, n_grid: int) -> FloatArray:
    top = delta
    scale = max(min(delta, max(a_prev, dist.mean)), top * 1e-12)
    pts = [np.array([0.0, top]), np.geomspace(scale * 1e-7, top, n_grid)]
    bp = dist.breakpoints() - a_prev
    pts.append(bp[(bp > 0) & (bp < top)])
    edges = np.unique(np.concatenate(pts))
    return edges[(edges >= 0) & (edges <= top)]


def _solve_level(
    dist: SizeDist, lam: float, a_prev: float, a_next: float, n_grid: int
) -> _Level:
    p = float(dist.sf(a_prev)) if a_prev > 0 else 1.0
    m1 = float(dist.lim1(a_prev))
    m2 = float(dist.lim2(a_prev))
    rho_prev = lam * m1
    w_prev = lam * m2 / (2.0 * (1.0 - rho_prev))
    top = min(a_next, dist.hi_eff)
    if p <= 0.0 or top <= a_prev:
        return _Level(a_prev, a_next, rho_prev, w_prev, np.array([0.0, 0.0]), np.zeros(1), 0.0)
    sf_next = float(dist.sf(a_next)) if math.isfinite(a_next) else 0.0
    q = p - sf_next  # P(a_prev < X <= a_next)
    delta = top - a_prev

    if a_prev == 0.0:
        # first level: plain M/G/1-PS on sizes min(X, a_1); phi = 1 / (1 - rho_{a_1})
        if math.isfinite(a_next):
            rho_next = lam * float(dist.lim1(a_next))
            contribution = float(dist.partial_mean(a_next)) / (1.0 - rho_next)
        else:
            rho_next = lam * dist.mean
            contribution = dist.mean / (1.0 - rho_next)
        edges = np.array([0.0, delta])
        phi = np.array([1.0 / (1.0 - rho_next)])
        return _Level(a_prev, a_next, 0.0, 0.0, edges, phi, contribution)

    def S(x: FloatArray) -> FloatArray:  # int_0^x G(t) dt
        return dist.lim1(a_prev + np.clip(x, 0.0, delta)) - m1

    c = lam / (1.0 - rho_prev)
    en = p / (1.0 - rho_prev)
    b = lam * (2.0 * p * a_prev + lam * en * m2) / (1.0 - rho_prev)

    edges = _level_grid(dist, a_prev, delta, n_grid)
    lo, hi = edges[:-1], edges[1:]
    mid = (lo + hi) / 2.0
    m = mid[:, None]
    K = c * (S(m + hi[None, :]) - S(m + lo[None, :]))  # present at entry, still there
    K += c * (S(m - lo[None, :]) - S(m - hi[None, :]))  # arrived later, still there
    G_mid = dist.sf(a_prev + mid)
    rhs = 1.0 + b * G_mid / p
    A = np.eye(mid.size) - K
    phi = np.linalg.solve(A, rhs)
    # E[alpha(X - a_prev); a_prev < X <= a_next] = int phi(t) (G(t) - P(X > a_next)) dt
    cell = (S(hi) - S(lo)) - sf_next * (hi - lo)
    contribution = (q * (w_prev + a_prev) + float(np.dot(phi, cell))) / (1.0 - rho_prev)
    return _Level(a_prev, a_next, rho_prev, w_prev, edges, phi, contribution)


def _levels(
    dist: SizeDist, load: float, thresholds: Sequence[float], n_grid: int
) -> list[_Level]:
    lam = arrival_rate(dist, load)
    a = [float(t) for t in thresholds]
    if any(not (t > 0 and math.isfinite(t)) for t in a):
        raise ValueError(f"thresholds must be finite and > 0, got {thresholds}")
    if any(y <= x for x, y in zip(a, a[1:])):
        raise ValueError(f"thresholds must be strictly increasing, got {thresholds}")
    bounds = [0.0, *a, math.inf]
    return [
        _solve_level(dist, lam, bounds[j], bounds[j + 1], n_grid) for j in range(len(bounds) - 1)
    ]


def mean_mlps(
    dist: SizeDist, load: float, thresholds: Sequence[float], n_grid: int = 400
) -> float:
    """E[T] under MLPS with PS in every level and the given thresholds (bytes).

    ``thresholds=[]`` is PS, one threshold is 2LPS. ``n_grid`` sets the number of log-spaced
    collocation cells per level (plus one per atom of a discrete law).
    """
    return float(sum(lv.contribution for lv in _levels(dist, load, thresholds, n_grid)))


def mean_2lps(dist: SizeDist, load: float, a: float, n_grid: int = 400) -> float:
    """E[T] under 2LPS (PS+PS) with threshold a bytes."""
    return mean_mlps(dist, load, [a], n_grid)


def response_mlps(
    dist: SizeDist, load: float, thresholds: Sequence[float], x: ArrayLike, n_grid: int = 400
) -> FloatArray:
    """Conditional mean response time T(x) under MLPS(PS) (2LPS with one threshold)."""
    levels = _levels(dist, load, thresholds, n_grid)
    x = np.atleast_1d(np.asarray(x, dtype=float))
    out = np.empty_like(x)
    for i, xi in enumerate(x):
        lv = next(lv for lv in levels if xi <= lv.a_next)
        y = xi - lv.a_prev
        e = lv.edges
        covered = np.clip(np.minimum(e[1:], y) - e[:-1], 0.0, None)
        alpha = float(np.dot(lv.phi, covered))
        if y > e[-1]:  # beyond the numerical grid (unbounded laws): last phi
            alpha += (y - e[-1]) * float(lv.phi[-1])
        out[i] = (lv.w_prev + lv.a_prev + alpha) / (1.0 - lv.rho_prev)
    return out


def mean_2lps_hyperexp(dist: HyperExponential, load: float, a: float) -> float:
    """E[T] of 2LPS for a hyper-exponential law, solved exactly through Laplace transforms.

    With G(t) = sum_i g_i exp(-r_i t), the transform of the integral equation evaluated at
    s = r_j gives a linear system in z_j = integral phi(t) exp(-r_j t) dt (the route of
    Bansal 2003, also used by the seed's toolkit):

        z_j (1 - c sum_i g_i/(r_j + r_i)) - c sum_i g_i z_i/(r_j + r_i) = 1/r_j + (b/p) sum_i g_i/(r_j + r_i)

    and int phi G = sum_i g_i z_i. Independent of the collocation solver; used to check it.
    """
    lam = arrival_rate(dist, load)
    r, q = dist.r, dist.p
    g = q * np.exp(-r * a)
    p = float(g.sum())
    m1, m2 = float(dist.lim1(a)), float(dist.lim2(a))
    rho_a = lam * m1
    w = lam * m2 / (2.0 * (1.0 - rho_a))
    c = lam / (1.0 - rho_a)
    b = lam * (2.0 * p * a + lam * (p / (1.0 - rho_a)) * m2) / (1.0 - rho_a)
    R = 1.0 / (r[:, None] + r[None, :])
    M = np.diag(1.0 - c * (R @ g)) - c * R * g[None, :]
    rhs = 1.0 / r + (b / p) * (R @ g) if p > 0 else 1.0 / r
    z = np.linalg.solve(M, rhs)
    return (m1 - a * p + p * (w + a) + float(g @ z)) / (1.0 - rho_a)


# ------------------------------------------------------------------------------------
# optimisation
# ------------------------------------------------------------------------------------


@dataclass
class ThresholdResult:
    """Optimal thresholds and the resulting mean response time (byte-times)."""

    thresholds: list[float]
    mean: float
    mean_ps: float
    #: curve used to bracket the optimum (log-spaced thresholds, E[T]) for 2LPS
    grid: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)

    @property
    def threshold(self) -> float:
        """The (first) threshold."""
        return self.thresholds[0]

    @property
    def gain_vs_ps(self) -> float:
        """E[T]/E[T_PS] - 1 (negative = better than PS)."""
        return self.mean / self.mean_ps - 1.0


def _search_range(dist: SizeDist, lo: float | None, hi: float | None) -> tuple[float, float]:
    lo = float(lo) if lo is not None else max(dist.lo, float(dist.ppf(1e-3)), 1e-9)
    hi = float(hi) if hi is not None else float(dist.ppf(1.0 - 1e-6))
    if not (0 < lo < hi):
        raise ValueError(f"empty threshold search range [{lo}, {hi}]")
    return lo, hi


def threshold_curve(
    dist: SizeDist,
    load: float,
    lo: float | None = None,
    hi: float | None = None,
    n: int = 60,
    n_grid: int = 300,
) -> pd.DataFrame:
    """E[T] of 2LPS against the threshold a (log-spaced from lo to hi).

    Columns: ``threshold_bytes``, ``mean_2lps``, ``mean_ps``, ``ratio_ps`` (= mean/PS),
    ``frac_below`` (= P(X <= a)). Times in byte-times.
    """
    lo, hi = _search_range(dist, lo, hi)
    a = np.geomspace(lo, hi, n)
    ps = mean_ps(dist, load)
    t = np.array([mean_2lps(dist, load, ai, n_grid) for ai in a])
    return pd.DataFrame(
        {
            "threshold_bytes": a,
            "mean_2lps": t,
            "mean_ps": ps,
            "ratio_ps": t / ps,
            "frac_below": dist.cdf(a),
        }
    )


def optimal_threshold(
    dist: SizeDist,
    load: float,
    lo: float | None = None,
    hi: float | None = None,
    n_grid: int = 400,
    grid_points: int = 40,
    xtol: float = 1e-4,
) -> ThresholdResult:
    """The 2LPS threshold minimising E[T].

    A log-spaced grid over [lo, hi] (default: the 0.1 % to 99.9999 % quantiles) guards
    against local minima; the best grid cell and its neighbours are then refined with
    bounded Brent minimisation on log(a) to a relative tolerance ``xtol``.
    """
    lo, hi = _search_range(dist, lo, hi)
    coarse = lambda la: mean_2lps(dist, load, math.exp(la), min(n_grid, 150))  # noqa: E731
    f = lambda la: mean_2lps(dist, load, math.exp(la), n_grid)  # noqa: E731
    la = np.linspace(math.log(lo), math.log(hi), grid_points)
    vals = np.array([coarse(v) for v in la])
    i = int(np.argmin(vals))
    left, right = la[max(i - 1, 0)], la[min(i + 1, la.size - 1)]
    best_la, best = la[i], f(la[i])
    if right > left:
        res = optimize.minimize_scalar(
            f, bounds=(left, right), method="bounded", options={"xatol": xtol}
        )
        if res.fun <= best:
            best_la, best = float(res.x), float(res.fun)
    grid = pd.DataFrame({"threshold_bytes": np.exp(la), "mean_2lps": vals})
    return ThresholdResult([math.exp(best_la)], float(best), mean_ps(dist, load), grid)


def optimal_thresholds(
    dist: SizeDist,
    load: float,
    levels: int,
    lo: float | None = None,
    hi: float | None = None,
    n_grid: int = 120,
) -> ThresholdResult:
    """Optimal thresholds of MLPS with ``levels`` PS levels (levels - 1 thresholds).

    levels = 1 is PS, 2 is :func:`optimal_threshold`. For more levels: Nelder-Mead on the
    log-gaps (which keeps thresholds ordered), started from thresholds spread around the
    2LPS optimum and from a log-uniform spread over [lo, hi]; the best result wins.
    """
    if levels < 1 or levels != int(levels):
        raise ValueError(f"levels must be an integer >= 1, got {levels}")
    if levels == 1:
        m = mean_ps(dist, load)
        return ThresholdResult([], m, m)
    two = optimal_threshold(dist, load, lo, hi)
    if levels == 2:
        return two
    lo, hi = _search_range(dist, lo, hi)
    k = levels - 1
    llo, lhi = math.log(lo), math.log(hi)

    def unpack(z: FloatArray) -> list[float]:
        # z[0] = log a_1, z[i] = log of the log-gap (keeps a strictly increasing)
        la = [z[0]]
        for g in z[1:]:
            la.append(la[-1] + math.exp(g) + 1e-9)
        return [math.exp(min(max(v, llo - 5), lhi + 5)) for v in la]

    def f(z: FloatArray) -> float:
        try:
            return mean_mlps(dist, load, unpack(z), n_grid)
        except (ValueError, np.linalg.LinAlgError):
            return math.inf

    a2 = math.log(two.threshold)
    starts = []
    # around the 2LPS optimum, one threshold below and the rest above
    first = a2 - 1.0
    starts.append(np.array([first] + [math.log(1.5)] * (k - 1)))
    spread = np.linspace(llo + 0.2 * (lhi - llo), lhi - 0.2 * (lhi - llo), k)
    starts.append(np.array([spread[0]] + [math.log(max(d, 1e-3)) for d in np.diff(spread)]))
    best: tuple[float, list[float]] = (two.mean, [two.threshold])
    for z0 in starts:
        res = optimize.minimize(
            f, z0, method="Nelder-Mead", options={"xatol": 1e-2, "fatol": 1e-6 * two.mean, "maxiter": 200}
        )
        if res.fun < best[0]:
            best = (float(res.fun), unpack(res.x))
    # polish with a fine grid
    m = mean_mlps(dist, load, best[1], 400)
    return ThresholdResult(best[1], m, mean_ps(dist, load))


def flat_interval(
    dist: SizeDist,
    load: float,
    result: ThresholdResult | None = None,
    tol: float = 0.01,
    n_grid: int = 250,
) -> tuple[float, float]:
    """[lo, hi]: the thresholds a with E[T_2LPS(a)] <= (1 + tol) min_a E[T_2LPS(a)].

    Found by root bracketing on each side of the optimum (E[T](a) is unimodal in practice;
    the grid of ``optimal_threshold`` is used to bracket).
    """
    res = result or optimal_threshold(dist, load, n_grid=n_grid)
    a0, target = res.threshold, res.mean * (1.0 + tol)
    g = lambda la: mean_2lps(dist, load, math.exp(la), n_grid) - target  # noqa: E731
    lo_s, hi_s = _search_range(dist, None, None)
    l0 = math.log(a0)

    def side(direction: int, limit: float) -> float:
        step = 0.05
        prev = l0
        while True:
            cur = l0 + direction * step
            if (direction < 0 and cur <= limit) or (direction > 0 and cur >= limit):
                cur = limit
                if g(cur) <= 0:
                    return math.exp(cur)
                break
            if g(cur) > 0:
                break
            prev = cur
            step *= 1.6
        r = optimize.brentq(g, min(prev, cur), max(prev, cur), xtol=1e-6)
        return math.exp(r)

    return side(-1, math.log(lo_s) - 5.0), side(+1, math.log(max(hi_s, dist.hi_eff)) + 1.0)
