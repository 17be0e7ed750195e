"""Flow-size distributions for workloads and for the M/G/1 threshold analysis.

Every distribution is a distribution of flow sizes in bytes (a non-negative random
variable X) and exposes the same interface (:class:`SizeDist`):

* ``cdf(x)``, ``sf(x)`` = P(X > x), ``sf_left(x)`` = P(X >= x), ``pdf(x)`` (density of the
  continuous part) and ``pmf(x)`` (mass of atoms), ``ppf(q)``;
* ``mean``, ``moment(k)``;
* the *partial* (truncated) moments the queueing formulas need:
  ``lim1(x)`` = E[min(X, x)] and ``lim2(x)`` = E[min(X, x)^2];
* ``expect(g)`` = E[g(X)] (exact sum for discrete laws, Gauss-Legendre quadrature on a
  log-spaced partition of the support for continuous ones);
* ``sample(rng, n)`` with a :class:`numpy.random.Generator`.

Distributions:

``BoundedPareto``            continuous bounded Pareto(alpha, L, H):
                             F(x) = (1 - (L/x)^alpha) / (1 - (L/H)^alpha) on [L, H].
``Discrete``                 atoms with probabilities (empirical flows table, fixed size, and
                             the seed's discretised bounded Pareto).
``discrete_bounded_pareto``  the construction of seed 000 (UniVe-NeDS-Lab
                             linux_age_based_scheduler, analysis notebooks): a grid
                             x = round(1024^linspace(log1024 L, log1024 H, n)), the bounded-
                             Pareto CDF evaluated on the grid with L = x[0], H = x[-1], then
                             sizes = round(midpoints) with weights = CDF differences.
                             ``seed000-1g`` (alpha 1.2, 300 KiB..1 GiB, 250 points) and
                             ``seed000-10g`` (alpha 1.1, 1024^1.85..1024^3.6, 200 points).
``Exponential``, ``LogNormal``, ``PiecewiseLinearCdf`` (empirical CDF file, and ``uniform``).

:func:`from_spec` reads a distribution written as in an experiment file (``size = "50kB"``,
``size = { dist = "pareto", alpha = 1.2, min = "2kB", max = "2MB", grid = 20 }``, …): the
engine parses it (one grammar, crates/sojourn-experiment/src/dist.rs) and this module returns
the exact law the engine draws from, with its closed-form partial moments;
:func:`engine_sample` draws with the engine's own sampler (same numbers as the simulator for
the same generator). docs/experiment-files.md documents that grammar.

:func:`parse_dist` turns a command-line spec string of the threshold analysis into a
distribution (laws the experiment files do not have: log-normal, the seed's discretised
Pareto, flows tables), e.g.
``"bounded-pareto alpha=1.2 min=300KiB max=1GiB"``, ``"seed000-1g"``,
``"exponential mean=1MB"``, ``"empirical path=sizes.csv"``. Sizes take the units of the
rest of sojourn, parsed by the engine (:func:`sojourn.units.parse_size`): B, kB, MB, GB
(powers of 1000) and KiB, MiB, GiB (powers of 1024).
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from functools import cached_property
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

FloatArray = NDArray[np.float64]

__all__ = [
    "SizeDist",
    "BoundedPareto",
    "Discrete",
    "Exponential",
    "LogNormal",
    "PiecewiseLinearCdf",
    "HyperExponential",
    "fit_hyperexponential",
    "discrete_bounded_pareto",
    "seed000",
    "fixed",
    "uniform",
    "from_sizes",
    "from_cdf_file",
    "from_flows_file",
    "parse_size",
    "parse_dist",
    "from_spec",
    "engine_sample",
    "format_bytes",
]

# --------------------------------------------------------------------------------------
# units
# --------------------------------------------------------------------------------------

# One parser of units for Rust and Python: sojourn.units calls the engine's.
from .units import parse_size  # noqa: E402  (re-exported: dists.parse_size)


def format_bytes(x: float, digits: int = 4) -> str:
    """Human-readable byte count with SI prefixes and ``digits`` significant digits (``6.33 MB``)."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.{digits}g} {unit}"
    return f"{x:.{digits}g} B"


# --------------------------------------------------------------------------------------
# base class
# --------------------------------------------------------------------------------------

# Gauss-Legendre nodes on [-1, 1] used by every continuous quadrature below.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)


def _gl_nodes(edges: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Gauss-Legendre nodes/weights for integrating over consecutive [edges[i], edges[i+1]]."""
    lo, hi = edges[:-1], edges[1:]
    half = (hi - lo)[:, None] / 2.0
    mid = (hi + lo)[:, None] / 2.0
    x = (mid + half * _GL_X[None, :]).ravel()
    w = (half * _GL_W[None, :]).ravel()
    return x, w


class SizeDist(ABC):
    """A flow-size distribution (bytes). Vectorised; subclasses fill in the closed forms."""

    #: short description shown in tables and plots
    name: str = "dist"
    #: True when the law is purely atomic
    discrete: bool = False

    # ---- support -----------------------------------------------------------------
    @property
    @abstractmethod
    def lo(self) -> float:
        """Lower end of the support."""

    @property
    @abstractmethod
    def hi(self) -> float:
        """Upper end of the support (may be ``inf``)."""

    @property
    def hi_eff(self) -> float:
        """Finite upper end used for numerics (``ppf(1 - 1e-14)`` for unbounded laws)."""
        return self.hi if math.isfinite(self.hi) else float(self.ppf(1.0 - 1e-14))

    # ---- law -----------------------------------------------------------------------
    @abstractmethod
    def cdf(self, x: ArrayLike) -> FloatArray:
        """P(X <= x)."""

    def sf(self, x: ArrayLike) -> FloatArray:
        """P(X > x)."""
        return 1.0 - self.cdf(x)

    def sf_left(self, x: ArrayLike) -> FloatArray:
        """P(X >= x) (differs from ``sf`` only at atoms)."""
        return self.sf(x) + self.pmf(x)

    def pdf(self, x: ArrayLike) -> FloatArray:
        """Density of the absolutely continuous part (0 for discrete laws)."""
        return np.zeros_like(np.asarray(x, dtype=float))

    def pmf(self, x: ArrayLike) -> FloatArray:
        """Mass of the atom at x (0 for continuous laws)."""
        return np.zeros_like(np.asarray(x, dtype=float))

    @abstractmethod
    def ppf(self, q: ArrayLike) -> FloatArray:
        """Quantile function (generalised inverse of the CDF)."""

    # ---- moments -------------------------------------------------------------------
    @abstractmethod
    def lim1(self, x: ArrayLike) -> FloatArray:
        """E[min(X, x)] = integral_0^x P(X > t) dt."""

    @abstractmethod
    def lim2(self, x: ArrayLike) -> FloatArray:
        """E[min(X, x)^2] = integral_0^x 2 t P(X > t) dt."""

    def moment(self, k: int) -> float:
        """E[X^k] (numerically unless overridden)."""
        return self.expect(lambda x: x**k)

    @cached_property
    def mean(self) -> float:
        """E[X]."""
        return float(self.moment(1))

    @cached_property
    def median(self) -> float:
        """Median (the smallest x with F(x) >= 1/2)."""
        return float(self.ppf(0.5))

    @property
    def scv(self) -> float:
        """Squared coefficient of variation Var[X]/E[X]^2."""
        return self.moment(2) / self.mean**2 - 1.0

    def partial_mean(self, x: ArrayLike) -> FloatArray:
        """E[X; X <= x] = integral_[0,x] t dF(t)."""
        x = np.asarray(x, dtype=float)
        return self.lim1(x) - x * self.sf(x)

    # ---- numerics --------------------------------------------------------------------
    def breakpoints(self) -> FloatArray:
        """Points where the law is not smooth (atoms, ends of the support, CDF knots)."""
        pts = [self.lo]
        if math.isfinite(self.hi):
            pts.append(self.hi)
        return np.asarray(pts, dtype=float)

    @cached_property
    def _t_edges(self) -> FloatArray:
        """Partition of [0, hi_eff]: breakpoints plus a log-spaced refinement."""
        top = self.hi_eff
        bottom = self.lo if self.lo > 0 else float(self.ppf(1e-12))
        bottom = max(bottom, top * 1e-15, 1e-300)
        grid = np.geomspace(bottom, top, 600) if top > bottom else np.array([top])
        pts = np.concatenate([[0.0], self.breakpoints(), grid])
        pts = pts[(pts >= 0) & (pts <= top)]
        return np.unique(pts)

    def integrate_dt(self, h: Callable[[FloatArray], FloatArray]) -> float:
        """integral_0^hi_eff h(t) dt over a partition refined at the law's breakpoints.

        ``h`` must be smooth between breakpoints (true for anything built from ``sf``,
        ``lim1``, ``lim2`` of this law).
        """
        x, w = _gl_nodes(self._t_edges)
        return float(np.sum(w * h(x)))

    @cached_property
    def _quadrature(self) -> tuple[FloatArray, FloatArray]:
        """Nodes and probability weights with sum(w * g(x)) ~ E[g(X)]."""
        x, w = _gl_nodes(self._t_edges)
        return x, w * self.pdf(x)

    def expect(self, g: Callable[[FloatArray], ArrayLike]) -> float:
        """E[g(X)] for a vectorised function g."""
        x, w = self._quadrature
        return float(np.sum(w * np.asarray(g(x), dtype=float)))

    # ---- sampling --------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, n: int | None = None) -> FloatArray:
        """Draws n sizes (bytes, float) by inversion unless overridden."""
        u = rng.random(n)
        return np.asarray(self.ppf(u), dtype=float)

    def describe(self) -> str:
        """One-line description with mean and median."""
        return f"{self.name} (mean {format_bytes(self.mean)}, median {format_bytes(self.median)})"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


# --------------------------------------------------------------------------------------
# bounded Pareto
# --------------------------------------------------------------------------------------


def _power_integral(lo: ArrayLike, hi: ArrayLike, p: float) -> FloatArray:
    """integral_lo^hi t^p dt, including p = -1."""
    lo = np.asarray(lo, dtype=float)
    hi = np.asarray(hi, dtype=float)
    if abs(p + 1.0) < 1e-12:
        return np.log(hi / lo)
    return (hi ** (p + 1.0) - lo ** (p + 1.0)) / (p + 1.0)


class BoundedPareto(SizeDist):
    """Continuous bounded Pareto on [L, H] with shape alpha.

    F(x) = (1 - (L/x)^alpha) / (1 - (L/H)^alpha), f(x) = alpha L^alpha x^(-alpha-1) / (1 - (L/H)^alpha).
    """

    def __init__(self, alpha: float, lo: float, hi: float, name: str | None = None):
        if not (alpha > 0 and math.isfinite(alpha)):
            raise ValueError(f"bounded-pareto: alpha must be > 0, got {alpha}")
        if not (0 < lo < hi and math.isfinite(hi)):
            raise ValueError(f"bounded-pareto: need 0 < min < max < inf, got min={lo} max={hi}")
        self.alpha, self._lo, self._hi = float(alpha), float(lo), float(hi)
        self._z = 1.0 - (self._lo / self._hi) ** self.alpha  # normaliser
        self.name = name or (
            f"bounded-pareto(alpha={alpha:g}, {format_bytes(lo)}..{format_bytes(hi)})"
        )

    @property
    def lo(self) -> float:
        return self._lo

    @property
    def hi(self) -> float:
        return self._hi

    def cdf(self, x: ArrayLike) -> FloatArray:
        x = np.clip(np.asarray(x, dtype=float), self._lo, self._hi)
        return (1.0 - (self._lo / x) ** self.alpha) / self._z

    def pdf(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        inside = (x >= self._lo) & (x <= self._hi)
        xs = np.where(inside, x, self._lo)
        return np.where(
            inside, self.alpha * self._lo**self.alpha * xs ** (-self.alpha - 1.0) / self._z, 0.0
        )

    def ppf(self, q: ArrayLike) -> FloatArray:
        q = np.clip(np.asarray(q, dtype=float), 0.0, 1.0)
        # Rounding can put the inverse a few ulps outside the support at q = 0 or 1.
        return np.clip(self._lo * (1.0 - q * self._z) ** (-1.0 / self.alpha), self._lo, self._hi)

    def moment(self, k: int) -> float:
        a, L = self.alpha, self._lo
        return float(a * L**a * _power_integral(L, self._hi, k - a - 1.0) / self._z)

    def _sf_integral(self, x: FloatArray, k: int) -> FloatArray:
        """integral_L^x k t^(k-1) P(X > t) dt for L <= x <= H."""
        a, L, c = self.alpha, self._lo, (self._lo / self._hi) ** self.alpha
        # P(X > t) = ((L/t)^a - c) / z on [L, H]
        part = L**a * _power_integral(L, x, k - 1.0 - a) - c * (x**k - L**k) / k
        return k * part / self._z

    def lim1(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        xc = np.clip(x, self._lo, self._hi)
        return np.where(x <= self._lo, np.maximum(x, 0.0), self._lo + self._sf_integral(xc, 1))

    def lim2(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        xc = np.clip(x, self._lo, self._hi)
        return np.where(
            x <= self._lo, np.maximum(x, 0.0) ** 2, self._lo**2 + self._sf_integral(xc, 2)
        )


# --------------------------------------------------------------------------------------
# discrete
# --------------------------------------------------------------------------------------


class Discrete(SizeDist):
    """A law with finitely many atoms ``values`` (bytes) and ``probs`` (normalised)."""

    discrete = True

    def __init__(self, values: ArrayLike, probs: ArrayLike | None = None, name: str = "discrete"):
        v = np.asarray(values, dtype=float).ravel()
        if v.size == 0:
            raise ValueError("discrete distribution needs at least one value")
        p = np.ones_like(v) if probs is None else np.asarray(probs, dtype=float).ravel()
        if p.shape != v.shape:
            raise ValueError("values and probabilities differ in length")
        if np.any(~np.isfinite(v)) or np.any(v < 0):
            raise ValueError("sizes must be finite and >= 0")
        if np.any(~np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
            raise ValueError("probabilities must be >= 0 with a positive sum")
        order = np.argsort(v, kind="stable")
        v, p = v[order], p[order]
        # merge equal values
        uv, inv = np.unique(v, return_inverse=True)
        up = np.bincount(inv, weights=p)
        keep = up > 0
        self.values: FloatArray = uv[keep]
        self.probs: FloatArray = up[keep] / up[keep].sum()
        self._cum = np.cumsum(self.probs)
        self._cum[-1] = 1.0
        self._c1 = np.concatenate([[0.0], np.cumsum(self.probs * self.values)])
        self._c2 = np.concatenate([[0.0], np.cumsum(self.probs * self.values**2)])
        self.name = name

    @property
    def lo(self) -> float:
        return float(self.values[0])

    @property
    def hi(self) -> float:
        return float(self.values[-1])

    def cdf(self, x: ArrayLike) -> FloatArray:
        i = np.searchsorted(self.values, np.asarray(x, dtype=float), side="right")
        return np.concatenate([[0.0], self._cum])[i]

    def pmf(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        i = np.clip(np.searchsorted(self.values, x, side="left"), 0, len(self.values) - 1)
        return np.where(self.values[i] == x, self.probs[i], 0.0)

    def ppf(self, q: ArrayLike) -> FloatArray:
        q = np.asarray(q, dtype=float)
        i = np.clip(np.searchsorted(self._cum, q, side="left"), 0, len(self.values) - 1)
        return self.values[i]

    def moment(self, k: int) -> float:
        return float(np.sum(self.probs * self.values**k))

    def lim1(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        i = np.searchsorted(self.values, x, side="right")  # atoms <= x
        return self._c1[i] + x * (1.0 - np.concatenate([[0.0], self._cum])[i])

    def lim2(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        i = np.searchsorted(self.values, x, side="right")
        return self._c2[i] + x**2 * (1.0 - np.concatenate([[0.0], self._cum])[i])

    def breakpoints(self) -> FloatArray:
        return self.values.copy()

    @cached_property
    def _t_edges(self) -> FloatArray:
        # between atoms every function of sf/lim1/lim2 is a polynomial of degree <= 2,
        # so the atoms alone are an exact partition for Gauss-Legendre
        return np.unique(np.concatenate([[0.0], self.values]))

    @cached_property
    def _quadrature(self) -> tuple[FloatArray, FloatArray]:
        return self.values, self.probs

    def sample(self, rng: np.random.Generator, n: int | None = None) -> FloatArray:
        """P proportional to the weights: cumulative sum and a binary search, as Antler's
        ``Random`` does."""
        u = rng.random(n)
        i = np.minimum(np.searchsorted(self._cum, u, side="right"), len(self.values) - 1)
        return self.values[i]


def discrete_bounded_pareto(
    alpha: float, lo: float, hi: float, points: int, name: str | None = None
) -> Discrete:
    """The seed-000 discretisation of a bounded Pareto (see module docstring)."""
    if points < 2:
        raise ValueError("discrete bounded Pareto needs points >= 2")
    if not (0 < lo < hi) or not math.isfinite(hi):
        raise ValueError(f"discrete bounded Pareto needs 0 < min < max, got {lo}, {hi}")
    if not alpha > 0:
        raise ValueError(f"discrete bounded Pareto needs alpha > 0, got {alpha}")
    a, b = math.log(lo, 1024), math.log(hi, 1024)
    x = np.round(np.logspace(a, b, points, base=1024)).astype(np.int64).astype(float)
    L, H = x.min(), x.max()
    cdf = (1.0 - L**alpha * x ** (-alpha)) / (1.0 - (L / H) ** alpha)
    sizes = np.round((x[:-1] + x[1:]) / 2.0)
    weights = np.diff(cdf)
    return Discrete(
        sizes,
        weights,
        name=name
        or f"discrete-bounded-pareto(alpha={alpha:g}, {format_bytes(lo)}..{format_bytes(hi)}, {points} pts)",
    )


#: seed 000 set-ups: (alpha, min, max, points)
SEED000 = {
    "1g": (1.2, 300.0 * 1024.0, 1024.0**3, 250),
    "10g": (1.1, 1024.0**1.85, 1024.0**3.6, 200),
}


def seed000(setup: str, continuous: bool = False) -> SizeDist:
    """Seed 000's flow-size law for ``setup`` in {"1g", "10g"}.

    ``continuous=True`` gives the bounded Pareto the table was discretised from.
    """
    if setup not in SEED000:
        raise ValueError(f"unknown seed000 set-up {setup!r} (use 1g or 10g)")
    alpha, lo, hi, points = SEED000[setup]
    if continuous:
        return BoundedPareto(alpha, lo, hi, name=f"seed000-{setup}-continuous")
    return discrete_bounded_pareto(alpha, lo, hi, points, name=f"seed000-{setup}")


def fixed(size: float) -> Discrete:
    """All flows of one size."""
    if not size > 0:
        raise ValueError(f"fixed size must be > 0, got {size}")
    return Discrete([size], [1.0], name=f"fixed({format_bytes(size)})")


def from_sizes(sizes: ArrayLike, name: str = "empirical") -> Discrete:
    """Empirical law of observed flow sizes (each observation an atom of mass 1/n)."""
    s = np.asarray(sizes, dtype=float).ravel()
    s = s[np.isfinite(s)]
    if s.size == 0:
        raise ValueError("empirical distribution: no sizes")
    if np.any(s <= 0):
        raise ValueError("empirical distribution: sizes must be > 0")
    return Discrete(s, None, name=f"{name} ({s.size} flows)")


# --------------------------------------------------------------------------------------
# exponential, log-normal
# --------------------------------------------------------------------------------------


class Exponential(SizeDist):
    """Exponential sizes with the given mean."""

    def __init__(self, mean: float):
        if not (mean > 0 and math.isfinite(mean)):
            raise ValueError(f"exponential mean must be > 0, got {mean}")
        self.m = float(mean)
        self.name = f"exponential(mean={format_bytes(mean)})"

    @property
    def lo(self) -> float:
        return 0.0

    @property
    def hi(self) -> float:
        return math.inf

    def cdf(self, x: ArrayLike) -> FloatArray:
        return -np.expm1(-np.maximum(np.asarray(x, dtype=float), 0.0) / self.m)

    def sf(self, x: ArrayLike) -> FloatArray:
        return np.exp(-np.maximum(np.asarray(x, dtype=float), 0.0) / self.m)

    def pdf(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        return np.where(x >= 0, np.exp(-np.maximum(x, 0.0) / self.m) / self.m, 0.0)

    def ppf(self, q: ArrayLike) -> FloatArray:
        return -self.m * np.log1p(-np.asarray(q, dtype=float))

    def moment(self, k: int) -> float:
        return float(math.factorial(k) * self.m**k)

    def lim1(self, x: ArrayLike) -> FloatArray:
        x = np.maximum(np.asarray(x, dtype=float), 0.0)
        return -self.m * np.expm1(-x / self.m)

    def lim2(self, x: ArrayLike) -> FloatArray:
        x = np.maximum(np.asarray(x, dtype=float), 0.0)
        u = x / self.m
        return 2.0 * self.m**2 * (-np.expm1(-u) - u * np.exp(-u))

    def sample(self, rng: np.random.Generator, n: int | None = None) -> FloatArray:
        return rng.exponential(self.m, n)


class LogNormal(SizeDist):
    """Log-normal sizes: ln X ~ N(mu, sigma^2)."""

    def __init__(self, mu: float, sigma: float):
        if not (sigma > 0 and math.isfinite(sigma) and math.isfinite(mu)):
            raise ValueError(f"lognormal needs sigma > 0, got {sigma}")
        self.mu, self.sigma = float(mu), float(sigma)
        self.name = f"lognormal(median={format_bytes(math.exp(mu))}, sigma={sigma:g})"

    @property
    def lo(self) -> float:
        return 0.0

    @property
    def hi(self) -> float:
        return math.inf

    def _z(self, x: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore"):
            return (np.log(np.maximum(x, 0.0)) - self.mu) / self.sigma

    def cdf(self, x: ArrayLike) -> FloatArray:
        return special.ndtr(self._z(np.asarray(x, dtype=float)))

    def sf(self, x: ArrayLike) -> FloatArray:
        return special.ndtr(-self._z(np.asarray(x, dtype=float)))

    def pdf(self, x: ArrayLike) -> FloatArray:
        return stats.lognorm.pdf(np.asarray(x, dtype=float), self.sigma, scale=math.exp(self.mu))

    def ppf(self, q: ArrayLike) -> FloatArray:
        return np.exp(self.mu + self.sigma * special.ndtri(np.asarray(q, dtype=float)))

    def moment(self, k: int) -> float:
        return float(math.exp(k * self.mu + 0.5 * (k * self.sigma) ** 2))

    def _lim(self, x: ArrayLike, k: int) -> FloatArray:
        x = np.maximum(np.asarray(x, dtype=float), 0.0)
        z = self._z(x)
        below = self.moment(k) * special.ndtr(z - k * self.sigma)  # E[X^k; X <= x]
        return below + x**k * special.ndtr(-z)

    def lim1(self, x: ArrayLike) -> FloatArray:
        return self._lim(x, 1)

    def lim2(self, x: ArrayLike) -> FloatArray:
        return self._lim(x, 2)

    def sample(self, rng: np.random.Generator, n: int | None = None) -> FloatArray:
        return rng.lognormal(self.mu, self.sigma, n)


# --------------------------------------------------------------------------------------
# piecewise-linear CDF (empirical CDF files, uniform)
# --------------------------------------------------------------------------------------


class PiecewiseLinearCdf(SizeDist):
    """CDF given at knots (x_i, F_i), linear in between; F_0 > 0 is an atom at x_0.

    This is the usual reading of flow-size CDF files (web-search, data-mining workloads):
    sizes are uniform between consecutive knots.
    """

    def __init__(self, x: ArrayLike, F: ArrayLike, name: str = "empirical-cdf"):
        x = np.asarray(x, dtype=float).ravel()
        F = np.asarray(F, dtype=float).ravel()
        if x.size != F.size or x.size < 1:
            raise ValueError("CDF needs matching, non-empty size and cdf columns")
        if np.any(~np.isfinite(x)) or np.any(~np.isfinite(F)):
            raise ValueError("CDF columns must be finite numbers")
        if np.any(np.diff(x) < 0) or np.any(np.diff(F) < 0):
            raise ValueError("CDF must be non-decreasing in both size and cdf")
        if x[0] < 0:
            raise ValueError("sizes must be >= 0")
        if F[0] < 0 or abs(F[-1] - 1.0) > 1e-6:
            raise ValueError(f"CDF must end at 1 (got {F[-1]:g}) and start >= 0")
        F = np.minimum(F / F[-1], 1.0)
        # drop repeated sizes (keep the highest F: a jump = atom there is not supported
        # except at the first knot)
        keep = np.concatenate([np.diff(x) > 0, [True]])
        if np.any((np.diff(x) == 0) & (np.diff(F) > 0) & (np.arange(x.size - 1) > 0)):
            raise ValueError("CDF jumps (atoms) are only supported at the first size")
        x, F = x[keep], F[keep]
        self.x, self.F = x, F
        self.atom = float(F[0])
        self.slope = np.diff(F) / np.diff(x) if x.size > 1 else np.zeros(0)
        # cumulative integral_0^x_i P(X>t) dt and integral_0^x_i 2t P(X>t) dt at knots
        S = 1.0 - F
        dx = np.diff(x)
        i1 = dx * (S[:-1] + S[1:]) / 2.0  # exact for linear S
        # integral of 2 t S(t) over a segment where S is linear: Simpson is exact
        tm = (x[:-1] + x[1:]) / 2.0
        Sm = (S[:-1] + S[1:]) / 2.0
        i2 = dx / 6.0 * (2 * x[:-1] * S[:-1] + 4 * 2 * tm * Sm + 2 * x[1:] * S[1:])
        self._k1 = np.concatenate([[x[0]], x[0] + np.cumsum(i1)])
        self._k2 = np.concatenate([[x[0] ** 2], x[0] ** 2 + np.cumsum(i2)])
        self.name = name

    @property
    def lo(self) -> float:
        return float(self.x[0])

    @property
    def hi(self) -> float:
        return float(self.x[-1])

    def cdf(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        return np.where(x < self.x[0], 0.0, np.interp(x, self.x, self.F))

    def pmf(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        return np.where(x == self.x[0], self.atom, 0.0)

    def pdf(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        if self.x.size < 2:
            return np.zeros_like(x)
        i = np.clip(np.searchsorted(self.x, x, side="right") - 1, 0, self.slope.size - 1)
        inside = (x >= self.x[0]) & (x <= self.x[-1])
        return np.where(inside, self.slope[i], 0.0)

    def ppf(self, q: ArrayLike) -> FloatArray:
        q = np.asarray(q, dtype=float)
        if self.x.size < 2:
            return np.full_like(q, self.x[0])
        # np.interp needs increasing F: drop flat segments (zero mass) from the inverse
        F, xs = self.F, self.x
        inc = np.concatenate([[True], np.diff(F) > 0])
        return np.where(q <= self.atom, xs[0], np.interp(q, F[inc], xs[inc]))

    def _seg(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        i = np.clip(np.searchsorted(self.x, x, side="right") - 1, 0, max(self.x.size - 2, 0))
        return i, np.clip(x, self.x[0], self.x[-1])

    def lim1(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        if self.x.size < 2:
            return np.minimum(np.maximum(x, 0.0), self.x[0])
        i, xc = self._seg(x)
        S0 = 1.0 - self.F[i]
        d = xc - self.x[i]
        val = self._k1[i] + S0 * d - self.slope[i] * d**2 / 2.0
        return np.where(x <= self.x[0], np.maximum(x, 0.0), val)

    def lim2(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        if self.x.size < 2:
            return np.minimum(np.maximum(x, 0.0), self.x[0]) ** 2
        i, xc = self._seg(x)
        x0 = self.x[i]
        S0 = 1.0 - self.F[i]
        s = self.slope[i]
        # integral_x0^xc 2t (S0 - s (t - x0)) dt
        val = self._k2[i] + (S0 + s * x0) * (xc**2 - x0**2) - 2.0 * s * (xc**3 - x0**3) / 3.0
        return np.where(x <= self.x[0], np.maximum(x, 0.0) ** 2, val)

    def breakpoints(self) -> FloatArray:
        return self.x.copy()

    @cached_property
    def _quadrature(self) -> tuple[FloatArray, FloatArray]:
        if self.x.size < 2:
            return np.array([self.x[0]]), np.array([1.0])
        x, w = _gl_nodes(self.x)
        w = w * self.pdf(x)
        if self.atom > 0:
            x = np.concatenate([[self.x[0]], x])
            w = np.concatenate([[self.atom], w])
        return x, w

    def moment(self, k: int) -> float:
        return self.expect(lambda t: t**k)


def uniform(lo: float, hi: float) -> PiecewiseLinearCdf:
    """Uniform sizes on [lo, hi]."""
    if not (0 <= lo < hi and math.isfinite(hi)):
        raise ValueError(f"uniform needs 0 <= min < max, got {lo}, {hi}")
    return PiecewiseLinearCdf([lo, hi], [0.0, 1.0], name=f"uniform({format_bytes(lo)}..{format_bytes(hi)})")


def from_cdf_file(path: str | Path) -> PiecewiseLinearCdf:
    """Reads a two-column CDF file ``size_bytes, cdf`` (CSV with or without header, or
    whitespace separated; ``#`` starts a comment). Sizes are interpolated linearly between
    knots (:class:`PiecewiseLinearCdf`)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{path}: no such file")
    rows: list[tuple[float, float]] = []
    for lineno, raw in enumerate(p.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [s for s in re.split(r"[,\s;]+", line) if s]
        if len(parts) < 2:
            raise ValueError(f"{path}:{lineno}: expected two columns size_bytes, cdf")
        try:
            rows.append((parse_size(parts[0]), float(parts[1])))
        except ValueError:
            if not rows:
                continue  # header line(s)
            raise ValueError(f"{path}:{lineno}: cannot read {line!r} as size_bytes, cdf") from None
    if not rows:
        raise ValueError(f"{path}: no data rows (expected two columns size_bytes, cdf)")
    arr = np.asarray(rows)  # a first knot with F_0 > 0 carries an atom of mass F_0
    try:
        return PiecewiseLinearCdf(arr[:, 0], arr[:, 1], name=f"empirical-cdf({p.name})")
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def from_flows_file(path: str | Path, column: str = "size_bytes") -> Discrete:
    """Empirical law of the ``size_bytes`` column of a flows table (Parquet or CSV)."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        if p.suffix.lower() in (".parquet", ".pq"):
            df = pd.read_parquet(p, columns=[column])
        else:
            df = pd.read_csv(p, usecols=[column])
    except (KeyError, ValueError) as e:
        raise ValueError(f"{path}: cannot read column {column!r}: {e}") from None
    except Exception as e:  # pyarrow errors for corrupt files
        raise ValueError(f"{path}: cannot read flows table: {e}") from None
    try:
        return from_sizes(df[column].to_numpy(dtype=float), name=f"empirical({p.name})")
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


# --------------------------------------------------------------------------------------
# spec strings
# --------------------------------------------------------------------------------------

_SPEC_KEYS: dict[str, tuple[set[str], set[str]]] = {
    # kind: (required keys, optional keys)
    "bounded-pareto": ({"alpha", "min", "max"}, set()),
    "discrete-bounded-pareto": ({"alpha", "min", "max", "points"}, set()),
    "exponential": ({"mean"}, set()),
    "fixed": ({"size"}, set()),
    "uniform": ({"min", "max"}, set()),
    "lognormal": ({"sigma"}, {"mean", "median"}),
    "empirical": ({"path"}, {"column"}),
}

_SPEC_HELP = (
    "bounded-pareto alpha=A min=SIZE max=SIZE | discrete-bounded-pareto alpha=A min=SIZE "
    "max=SIZE points=N | seed000-1g | seed000-10g | exponential mean=SIZE | fixed size=SIZE | "
    "uniform min=SIZE max=SIZE | lognormal mean=SIZE|median=SIZE sigma=S | empirical path=FILE"
)


def _float(kind: str, key: str, s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise ValueError(f"{kind}: {key}={s!r} is not a number") from None
    if not math.isfinite(v):
        raise ValueError(f"{kind}: {key}={s!r} is not finite")
    return v


def parse_dist(spec: str | Sequence[str] | Mapping) -> SizeDist:
    """Parses a distribution spec (a string, or the argv words of one) into a SizeDist.

    The experiment-file notation is accepted too, as a dict or a TOML inline table string
    (``'{ dist = "pareto", alpha = 1.2, min = "2kB", max = "2MB", grid = 20 }'``): the
    engine parses it (:func:`from_spec`), so a workload's size law can be analysed as is.

    A bare path to an existing ``.parquet``/``.csv`` file is read as a flows table
    (column ``size_bytes``) or, for a two-column CDF file, as an empirical CDF.
    Raises ``ValueError`` with a one-line message on bad input.
    """
    if isinstance(spec, Mapping):
        return from_spec(dict(spec))
    text = spec if isinstance(spec, str) else " ".join(spec)
    if text.lstrip().startswith("{"):
        # The experiment-file notation, e.g. '{ dist = "pareto", alpha = 1.2, min = "2kB",
        # max = "2MB" }': parsed by the engine, like a workload's `size`.
        from ._config import tomllib  # tomllib, or tomli before Python 3.11

        try:
            table = tomllib.loads(f"size = {text}")["size"]
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"not a TOML inline table: {e}") from None
        return from_spec(table)
    words = spec.split() if isinstance(spec, str) else [w for s in spec for w in s.split()]
    if not words:
        raise ValueError(f"empty distribution spec (use: {_SPEC_HELP})")
    kind, rest = words[0], words[1:]
    low = kind.lower()
    if low in ("seed000-1g", "seed000-10g", "seed000-1g-continuous", "seed000-10g-continuous"):
        if rest:
            raise ValueError(f"{kind} takes no parameters, got {' '.join(rest)!r}")
        parts = low.split("-")
        return seed000(parts[1], continuous=len(parts) == 3)
    if low not in _SPEC_KEYS:
        p = Path(kind)
        if p.suffix.lower() in (".parquet", ".pq", ".csv", ".txt", ".cdf") or p.exists():
            if rest:
                raise ValueError(f"a file path takes no parameters, got {' '.join(rest)!r}")
            return _load_file(p)
        raise ValueError(f"unknown distribution {kind!r} (use: {_SPEC_HELP})")
    params: dict[str, str] = {}
    for w in rest:
        for item in [s for s in w.split(",") if s]:
            if "=" not in item:
                raise ValueError(f"{kind}: expected key=value, got {item!r}")
            k, v = item.split("=", 1)
            if k in params:
                raise ValueError(f"{kind}: {k} given twice")
            params[k] = v
    required, optional = _SPEC_KEYS[low]
    unknown = set(params) - required - optional
    if unknown:
        raise ValueError(
            f"{kind}: unknown parameter(s) {', '.join(sorted(unknown))} "
            f"(expected {', '.join(sorted(required | optional))})"
        )
    missing = required - set(params)
    if missing:
        raise ValueError(f"{kind}: missing parameter(s) {', '.join(sorted(missing))}")
    size = lambda key: parse_size(params[key])  # noqa: E731
    if low == "bounded-pareto":
        return BoundedPareto(_float(kind, "alpha", params["alpha"]), size("min"), size("max"))
    if low == "discrete-bounded-pareto":
        pts = _float(kind, "points", params["points"])
        if pts != int(pts):
            raise ValueError(f"{kind}: points must be an integer")
        return discrete_bounded_pareto(
            _float(kind, "alpha", params["alpha"]), size("min"), size("max"), int(pts)
        )
    if low == "exponential":
        return Exponential(size("mean"))
    if low == "fixed":
        return fixed(size("size"))
    if low == "uniform":
        return uniform(size("min"), size("max"))
    if low == "lognormal":
        sigma = _float(kind, "sigma", params["sigma"])
        if ("mean" in params) == ("median" in params):
            raise ValueError("lognormal: give exactly one of mean=SIZE or median=SIZE")
        if not sigma > 0:
            raise ValueError("lognormal: sigma must be > 0")
        if "median" in params:
            med = size("median")
            if not med > 0:
                raise ValueError("lognormal: median must be > 0")
            return LogNormal(math.log(med), sigma)
        mean = size("mean")
        if not mean > 0:
            raise ValueError("lognormal: mean must be > 0")
        return LogNormal(math.log(mean) - sigma**2 / 2.0, sigma)
    # empirical
    return _load_file(Path(params["path"]), params.get("column"))


def _load_file(p: Path, column: str | None = None) -> SizeDist:
    if not p.is_file():
        raise ValueError(f"{p}: no such file")
    if p.suffix.lower() in (".parquet", ".pq"):
        return from_flows_file(p, column or "size_bytes")
    if column:
        return from_flows_file(p, column)
    # CSV/text: a flows table if it has a size_bytes column and more than 2 columns or
    # no cdf column; otherwise a CDF file
    head = p.read_text().splitlines()[:1]
    cols = [c.strip().lower() for c in re.split(r"[,;\t]", head[0])] if head else []
    if "size_bytes" in cols and "cdf" not in cols:
        return from_flows_file(p, "size_bytes")
    return from_cdf_file(p)


# --------------------------------------------------------------------------------------
# hyper-exponential (mixtures of exponentials) and a tail fit
# --------------------------------------------------------------------------------------


class HyperExponential(SizeDist):
    """Mixture of exponentials: P(X > x) = sum_i p_i exp(-r_i x)."""

    def __init__(self, probs: ArrayLike, rates: ArrayLike, name: str | None = None):
        p = np.asarray(probs, dtype=float).ravel()
        r = np.asarray(rates, dtype=float).ravel()
        if p.shape != r.shape or p.size == 0:
            raise ValueError("hyper-exponential: probs and rates must match")
        if np.any(p < 0) or np.any(r <= 0) or not np.all(np.isfinite(r)):
            raise ValueError("hyper-exponential: probs >= 0 and rates > 0 required")
        self.p = p / p.sum()
        self.r = r
        self.name = name or f"hyperexp({p.size} phases)"

    @property
    def lo(self) -> float:
        return 0.0

    @property
    def hi(self) -> float:
        return math.inf

    def sf(self, x: ArrayLike) -> FloatArray:
        x = np.maximum(np.asarray(x, dtype=float), 0.0)
        return np.sum(self.p * np.exp(-np.multiply.outer(x, self.r)), axis=-1)

    def cdf(self, x: ArrayLike) -> FloatArray:
        return 1.0 - self.sf(x)

    def pdf(self, x: ArrayLike) -> FloatArray:
        x = np.asarray(x, dtype=float)
        d = np.sum(self.p * self.r * np.exp(-np.multiply.outer(np.maximum(x, 0), self.r)), axis=-1)
        return np.where(x >= 0, d, 0.0)

    def ppf(self, q: ArrayLike) -> FloatArray:
        from scipy.optimize import brentq

        q = np.asarray(q, dtype=float)
        top = float(-np.log(1e-16) / self.r.min())

        def one(v: float) -> float:
            if v <= 0:
                return 0.0
            if v >= 1:
                return math.inf
            hi = top
            while float(self.cdf(hi)) < v:
                hi *= 2
            return brentq(lambda x: float(self.cdf(x)) - v, 0.0, hi, xtol=1e-12 * hi)

        return np.vectorize(one, otypes=[float])(q)

    def moment(self, k: int) -> float:
        return float(np.sum(self.p * math.factorial(k) / self.r**k))

    def lim1(self, x: ArrayLike) -> FloatArray:
        x = np.maximum(np.asarray(x, dtype=float), 0.0)
        return np.sum(self.p / self.r * -np.expm1(-np.multiply.outer(x, self.r)), axis=-1)

    def lim2(self, x: ArrayLike) -> FloatArray:
        x = np.maximum(np.asarray(x, dtype=float), 0.0)
        u = np.multiply.outer(x, self.r)
        return np.sum(2.0 * self.p / self.r**2 * (-np.expm1(-u) - u * np.exp(-u)), axis=-1)

    def sample(self, rng: np.random.Generator, n: int | None = None) -> FloatArray:
        i = rng.choice(self.p.size, size=n, p=self.p)
        return rng.exponential(1.0 / self.r[i])


def fit_hyperexponential(
    dist: SizeDist, phases: int = 7, lo: float | None = None, hi: float | None = None, q: float = 1.5
) -> HyperExponential:
    """Feldmann-Whitt (1998) recursive fit of a hyper-exponential to the tail of ``dist``.

    Matches the survival function at ``phases`` geometrically spaced points c_1 > ... > c_k
    from ``hi`` (default: the 99.999 % quantile) down to ``lo`` (default: the median): each
    phase fits the residual tail at c_i and q*c_i, the last phase takes the remaining mass.
    This stands in for the PhFit fit the seed used (a different algorithm with 4 body + 3
    tail phases); it is used to show how much a fitted law moves the optimal threshold.
    """
    hi = float(dist.ppf(1 - 1e-5)) if hi is None else hi
    lo = float(dist.median) if lo is None else lo
    c = np.geomspace(hi, lo, phases)
    probs, rates = [], []
    resid = lambda t: float(dist.sf(t)) - sum(  # noqa: E731
        pi * math.exp(-ri * t) for pi, ri in zip(probs, rates)
    )
    for ci in c[:-1]:
        f1, f2 = resid(ci), resid(q * ci)
        if f1 <= 0 or f2 <= 0 or f2 >= f1:
            continue
        r = math.log(f1 / f2) / ((q - 1.0) * ci)
        probs.append(f1 * math.exp(r * ci))
        rates.append(r)
    last = 1.0 - sum(probs)
    if last > 0:
        f = resid(c[-1])
        r = -math.log(max(f, 1e-300) / last) / c[-1] if 0 < f < last else 1.0 / c[-1]
        probs.append(last)
        rates.append(r)
    return HyperExponential(probs, rates, name=f"hyperexp-fit({dist.name}, {len(probs)} phases)")


# --------------------------------------------------------------------------------------
# the experiment-file grammar, parsed and sampled by the engine
# --------------------------------------------------------------------------------------

#: Above this many whole-byte values a uniform size law is treated as continuous on
#: [min - 1/2, max + 1/2] (rounding that law gives exactly the engine's discrete uniform).
_UNIFORM_ATOMS_MAX = 1_000_000


def _engine():
    from . import _engine as eng

    return eng


def from_spec(spec, base_dir: str | Path = ".") -> SizeDist:
    """The size law of an experiment-file spec (a size, or a table with ``dist``), exactly as
    the engine draws it: whole bytes, at least 1.

    ``fixed``, ``choice`` and ``uniform`` become :class:`Discrete` laws; ``pareto`` a
    :class:`BoundedPareto` (or, with ``grid = n``, the :class:`Discrete` law of its log grid);
    ``exponential`` an :class:`Exponential`; ``empirical`` a :class:`PiecewiseLinearCdf` of the
    CDF file. The continuous ones ignore the final rounding to whole bytes (it moves the mean
    by less than a byte). Bad specs raise ``ValueError`` with the engine's one-line message.
    """
    try:
        c = _engine().size_dist_spec(spec, str(base_dir))
    except Exception as e:  # the engine's ConfigError is a ValueError too
        raise ValueError(str(e)) from None
    kind = c["dist"]
    if kind == "fixed":
        return fixed(float(c["value"]))
    if kind == "choice":
        return Discrete(np.asarray(c["values"], dtype=float), name="choice")
    if kind == "uniform":
        lo, hi = int(c["min"]), int(c["max"])
        if hi - lo + 1 <= _UNIFORM_ATOMS_MAX:
            return Discrete(np.arange(lo, hi + 1, dtype=float), name=f"uniform({lo}..{hi} B)")
        return PiecewiseLinearCdf([lo - 0.5, hi + 0.5], [0.0, 1.0], name=f"uniform({lo}..{hi} B)")
    if kind == "exponential":
        return Exponential(float(c["mean_param"]))
    if kind == "pareto":
        a, lo, hi, grid = float(c["alpha"]), float(c["min"]), float(c["max"]), int(c["grid"])
        bp = BoundedPareto(a, lo, hi)
        if grid < 2:
            return bp
        n = grid - 1
        k = np.arange(grid, dtype=float)
        at = lambda j: lo * (hi / lo) ** (j / n)  # noqa: E731
        edges_lo = np.where(k == 0, lo, at(k - 0.5))
        edges_hi = np.where(k == n, hi, at(k + 0.5))
        probs = bp.cdf(edges_hi) - bp.cdf(edges_lo)
        return Discrete(np.maximum(np.round(at(k)), 1.0), probs, name=f"pareto-grid({grid})")
    if kind == "empirical":
        pts = np.asarray(c["points"], dtype=float)
        return PiecewiseLinearCdf(pts[:, 0], pts[:, 1], name="empirical-cdf")
    raise ValueError(f"unknown distribution kind {kind!r} from the engine")  # pragma: no cover


def engine_sample(spec, n: int, seed: int, base_dir: str | Path = ".") -> FloatArray:
    """``n`` sizes (bytes) drawn by the engine's sampler for ``spec`` from the generator
    seeded with ``seed`` (``Rng::from_seed``): the numbers the Rust ``SizeDist::draw`` gives."""
    try:
        xs = _engine().sample_sizes(spec, int(n), int(seed), str(base_dir))
    except Exception as e:
        raise ValueError(str(e)) from None
    return np.asarray(xs, dtype=float)
