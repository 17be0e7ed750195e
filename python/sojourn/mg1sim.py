"""Event simulation of an M/G/1 queue under PS, MLPS (2LPS), LAS/FB and SRPT.

Pure Python (heapq), independent of the analytic formulas in :mod:`sojourn.threshold`,
which it validates. Sizes are work units (bytes); the server does one unit per time unit.

* MLPS (PS is MLPS without thresholds): jobs whose attained service lies in
  [a_{j-1}, a_j) form level j; the lowest non-empty level is served and shares the server
  equally. Each level keeps a *virtual clock* V_j (service received by each of its jobs
  while the level was served) and a heap of the clock values at which its jobs leave the
  level (complete, or reach a_j and move down), so every event costs O(log n).
* LAS/FB: groups of jobs with equal attained service form a stack (new arrivals start a
  group at 0 on top); the top group is served in PS until a member completes or it catches
  up with the next group, which it then merges with.
* SRPT: preemptive, the job with the least remaining work runs; ties go to the earlier
  arrival.

``simulate`` returns the response time of every job (in arrival order);
:func:`batch_means` gives a confidence interval that respects the correlation between
consecutive jobs.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from .dists import SizeDist

FloatArray = NDArray[np.float64]

__all__ = ["poisson_jobs", "simulate", "batch_means", "SimEstimate", "estimate", "estimate_cv"]


def poisson_jobs(
    dist: SizeDist, load: float, n: int, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """n Poisson arrivals of rate load/E[X] and their sizes."""
    lam = load / dist.mean
    arrivals = np.cumsum(rng.exponential(1.0 / lam, n))
    sizes = dist.sample(rng, n)
    return arrivals, sizes


def _sim_mlps(arr: FloatArray, size: FloatArray, thresholds: Sequence[float]) -> FloatArray:
    bounds = [0.0, *[float(a) for a in thresholds], math.inf]
    k = len(bounds) - 1
    n = len(arr)
    resp = np.full(n, np.nan)
    V = [0.0] * k
    heaps: list[list[tuple[float, int]]] = [[] for _ in range(k)]
    t = 0.0
    nxt = 0
    arr_l = arr.tolist()
    size_l = size.tolist()
    while nxt < n or any(heaps):
        j = next((i for i in range(k) if heaps[i]), -1)
        if j < 0:  # idle: jump to the next arrival
            t = arr_l[nxt]
            dt_event = math.inf
        else:
            cnt = len(heaps[j])
            dt_event = (heaps[j][0][0] - V[j]) * cnt
        t_arr = arr_l[nxt] if nxt < n else math.inf
        if j >= 0 and t + dt_event <= t_arr:
            # a job leaves level j (completes or reaches the next threshold)
            t += dt_event
            target, job = heapq.heappop(heaps[j])
            V[j] = target
            if size_l[job] <= bounds[j + 1]:
                resp[job] = t - arr_l[job]
            else:
                w = min(size_l[job], bounds[j + 2]) - bounds[j + 1]
                heapq.heappush(heaps[j + 1], (V[j + 1] + w, job))
        else:
            if j >= 0:
                V[j] += (t_arr - t) / len(heaps[j])
            t = t_arr
            job = nxt
            nxt += 1
            heapq.heappush(heaps[0], (V[0] + min(size_l[job], bounds[1]), job))
    return resp


def _sim_las(arr: FloatArray, size: FloatArray) -> FloatArray:
    n = len(arr)
    resp = np.full(n, np.nan)
    arr_l = arr.tolist()
    size_l = size.tolist()
    # stack of groups [attained, heap of (size, job)]; top = last = least attained, served
    groups: list[list] = []
    t = 0.0
    nxt = 0
    while nxt < n or groups:
        t_arr = arr_l[nxt] if nxt < n else math.inf
        if groups:
            g = groups[-1]
            cnt = len(g[1])
            dt_done = (g[1][0][0] - g[0]) * cnt
            dt_merge = (groups[-2][0] - g[0]) * cnt if len(groups) > 1 else math.inf
            dt = min(dt_done, dt_merge)
        else:
            dt = math.inf
        if t + dt <= t_arr:
            t += dt
            g = groups[-1]
            if dt_done <= dt_merge:
                g[0] = g[1][0][0]
                _, job = heapq.heappop(g[1])
                resp[job] = t - arr_l[job]
                if not g[1]:
                    groups.pop()
            else:
                below = groups[-2]
                groups.pop()
                small, big = (g[1], below[1]) if len(g[1]) < len(below[1]) else (below[1], g[1])
                for item in small:
                    heapq.heappush(big, item)
                below[1] = big
        else:
            if groups:
                groups[-1][0] += (t_arr - t) / len(groups[-1][1])
            t = t_arr
            job = nxt
            nxt += 1
            if groups and groups[-1][0] == 0.0:
                heapq.heappush(groups[-1][1], (size_l[job], job))
            else:
                groups.append([0.0, [(size_l[job], job)]])
    return resp


def _sim_srpt(arr: FloatArray, size: FloatArray) -> FloatArray:
    n = len(arr)
    resp = np.full(n, np.nan)
    arr_l = arr.tolist()
    size_l = size.tolist()
    waiting: list[tuple[float, int]] = []  # (remaining, job): ties -> lower job id first
    cur: list | None = None  # [remaining, job]
    t = 0.0
    nxt = 0
    while nxt < n or cur is not None:
        t_arr = arr_l[nxt] if nxt < n else math.inf
        if cur is not None and t + cur[0] <= t_arr:
            t += cur[0]
            resp[cur[1]] = t - arr_l[cur[1]]
            cur = list(heapq.heappop(waiting)) if waiting else None
            continue
        if cur is not None:
            cur[0] -= t_arr - t
        t = t_arr
        job = nxt
        nxt += 1
        s = size_l[job]
        if cur is None:
            cur = [s, job]
        elif s < cur[0]:
            heapq.heappush(waiting, (cur[0], cur[1]))
            cur = [s, job]
        else:
            heapq.heappush(waiting, (s, job))
    return resp


def simulate(
    discipline: str,
    arrivals: FloatArray,
    sizes: FloatArray,
    thresholds: Sequence[float] = (),
) -> FloatArray:
    """Response times of every job under ``discipline`` in {"ps", "mlps", "2lps", "las",
    "srpt"}. ``thresholds`` (bytes) for mlps/2lps."""
    arr = np.asarray(arrivals, dtype=float)
    sz = np.asarray(sizes, dtype=float)
    d = discipline.lower()
    if d == "ps":
        return _sim_mlps(arr, sz, ())
    if d in ("mlps", "2lps"):
        th = sorted(float(a) for a in thresholds)
        if d == "2lps" and len(th) != 1:
            raise ValueError("2lps needs exactly one threshold")
        return _sim_mlps(arr, sz, th)
    if d in ("las", "fb"):
        return _sim_las(arr, sz)
    if d == "srpt":
        return _sim_srpt(arr, sz)
    raise ValueError(f"unknown discipline {discipline!r}")


@dataclass
class SimEstimate:
    """Mean response time with a batch-means confidence interval."""

    mean: float
    half_width: float
    batches: int
    jobs: int

    @property
    def rel_half_width(self) -> float:
        return self.half_width / self.mean


def batch_means(
    resp: FloatArray, batches: int = 40, warmup: float = 0.02, tail: float = 0.02, level: float = 0.95
) -> SimEstimate:
    """Mean of ``resp`` (in arrival order) with a t-interval over ``batches`` batch means,
    dropping the first ``warmup`` and last ``tail`` fractions (empty-start and drain bias)."""
    r = np.asarray(resp, dtype=float)
    n = r.size
    r = r[int(n * warmup) : n - int(n * tail)]
    m = r.size // batches
    bm = r[: m * batches].reshape(batches, m).mean(axis=1)
    hw = stats.t.ppf(0.5 + level / 2, batches - 1) * bm.std(ddof=1) / math.sqrt(batches)
    return SimEstimate(float(bm.mean()), float(hw), batches, m * batches)


def estimate(
    dist: SizeDist,
    load: float,
    discipline: str,
    n: int,
    seed: int,
    thresholds: Sequence[float] = (),
    batches: int = 40,
) -> SimEstimate:
    """Simulates n Poisson jobs and returns the batch-means estimate of E[T]."""
    rng = np.random.default_rng(seed)
    arr, sz = poisson_jobs(dist, load, n, rng)
    return batch_means(simulate(discipline, arr, sz, thresholds), batches)


def _trimmed_batches(r: FloatArray, batches: int, warmup: float, tail: float) -> FloatArray:
    n = r.size
    r = r[int(n * warmup) : n - int(n * tail)]
    m = r.size // batches
    return r[: m * batches].reshape(batches, m).mean(axis=1)


def estimate_cv(
    dist: SizeDist,
    load: float,
    discipline: str,
    n: int,
    seed: int,
    thresholds: Sequence[float] = (),
    batches: int = 50,
    warmup: float = 0.02,
    tail: float = 0.02,
    level: float = 0.95,
) -> SimEstimate:
    """E[T] of ``discipline`` with PS as a control variate.

    The same arrivals and sizes are also run under PS, whose mean E[X]/(1 - rho) is known
    exactly; regressing the discipline's batch means on the PS batch means removes most of
    the noise of the arrival process (the controlled estimator is unbiased for any fixed
    coefficient; the t-interval uses batches - 2 degrees of freedom).
    """
    rng = np.random.default_rng(seed)
    arr, sz = poisson_jobs(dist, load, n, rng)
    y = _trimmed_batches(simulate(discipline, arr, sz, thresholds), batches, warmup, tail)
    x = _trimmed_batches(simulate("ps", arr, sz), batches, warmup, tail)
    mu_x = dist.mean / (1.0 - load)
    xc = x - x.mean()
    beta = float(np.dot(xc, y - y.mean()) / np.dot(xc, xc))
    est = y.mean() - beta * (x.mean() - mu_x)
    resid = (y - y.mean()) - beta * xc
    s2 = float(np.dot(resid, resid)) / (batches - 2)
    se = math.sqrt(s2 * (1.0 / batches + (x.mean() - mu_x) ** 2 / np.dot(xc, xc)))
    hw = stats.t.ppf(0.5 + level / 2, batches - 2) * se
    m = (n - int(n * warmup) - int(n * tail)) // batches
    return SimEstimate(float(est), float(hw), batches, m * batches)
