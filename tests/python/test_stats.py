"""Statistics for sojourn compare: fairness indices at their known extremes, interval
coverage over repeated samples, binning and percentiles on constructed data."""

from __future__ import annotations

import math

import _local  # noqa: F401  (worktree import path)
import numpy as np
import pandas as pd
import pytest

from sojourn.analysis import stats as St


def test_jain_extremes():
    assert St.jain_index(np.full(10, 3.3)) == pytest.approx(1.0)
    one_hot = np.zeros(8)
    one_hot[3] = 5.0
    assert St.jain_index(one_hot) == pytest.approx(1 / 8)
    # two flows at 1 and 3: (4^2)/(2*10) = 0.8
    assert St.jain_index(pd.Series([1.0, 3.0])) == pytest.approx(0.8)


def test_lorenz_extremes():
    assert St.lorenz_gap(np.full(50, 7.0)) == pytest.approx(0.0, abs=1e-12)
    one_hot = np.zeros(10)
    one_hot[0] = 1.0
    assert St.lorenz_gap(one_hot) == pytest.approx(1 - 1 / 10)
    lc = St.lorenz_curve([3.0, 1.0, 2.0])
    assert lc["share_flows"].tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1])
    assert lc["share_total"].tolist() == pytest.approx([0, 1 / 6, 3 / 6, 1])
    # Lorenz gap of x = 1..n: max_k (k/n - k(k+1)/(n(n+1))), attained near k = n/2
    n = 100
    k = np.arange(n + 1)
    assert St.lorenz_gap(np.arange(1, n + 1)) == pytest.approx(np.max(k / n - k * (k + 1) / (n * (n + 1))))


def test_mean_ci_basic():
    r = St.mean_ci([1.0, 2.0, 3.0, 4.0])
    sem = np.std([1, 2, 3, 4], ddof=1) / 2
    assert r["mean"] == 2.5 and r["n"] == 4
    assert r["half_width"] == pytest.approx(1.959964 * sem, rel=1e-6)
    assert math.isnan(St.mean_ci([5.0])["half_width"])
    assert St.mean_ci([1.0, np.nan, 3.0])["n"] == 2  # unfinished flows (NaN) dropped


def test_mean_ci_coverage():
    # the 1.96 SEM interval covers the true mean ~95 % of the time (exponential flows, n=400)
    rng = np.random.default_rng(2024)
    hits = 0
    reps = 2000
    for _ in range(reps):
        r = St.mean_ci(rng.exponential(2.0, 400))
        hits += r["lo"] <= 2.0 <= r["hi"]
    assert 0.93 <= hits / reps <= 0.965


def test_repeat_ci_coverage_uses_t():
    # 4 repeats of normal data: the t interval is exact (95 %); a z interval would cover ~88 %
    rng = np.random.default_rng(7)
    hits = 0
    reps = 3000
    for _ in range(reps):
        r = St.repeat_ci(rng.normal(10.0, 1.0, 4))
        hits += r["lo"] <= 10.0 <= r["hi"]
    assert 0.935 <= hits / reps <= 0.965


def test_repeat_ci_from_flows_table():
    df = pd.DataFrame({"repeat": [0, 0, 1, 1, 2, 2], "fct_s": [1.0, 3.0, 2.0, 2.0, 4.0, 4.0]})
    r = St.repeat_ci(df)
    assert r["repeats"] == 3 and r["mean"] == pytest.approx((2 + 2 + 4) / 3)


@pytest.mark.parametrize("method", ["delta", "bootstrap"])
def test_gain_coverage(method):
    # independent exponential samples with means 0.8 and 1.0: true gain -0.2
    rng = np.random.default_rng(11)
    hits = 0
    reps = 400 if method == "delta" else 150
    for i in range(reps):
        g = St.gain(rng.exponential(0.8, 300), rng.exponential(1.0, 300), method=method,
                    n_boot=400, seed=i)
        hits += g["lo"] <= -0.2 <= g["hi"]
    assert 0.90 <= hits / reps <= 0.99


def test_gain_value_and_errors():
    g = St.gain([2.0, 2.0, 2.2, 1.8], [4.0, 4.1, 3.9, 4.0])
    assert g["gain"] == pytest.approx(-0.5)
    assert g["lo"] < -0.5 < g["hi"]
    with pytest.raises(ValueError):
        St.gain([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        St.gain([1.0, 2.0], [1.0, 2.0], method="magic")


def test_percentiles():
    p = St.percentiles(np.arange(1, 101))
    assert p == pytest.approx({"P50": 50.5, "P75": 75.25, "P95": 95.05, "P99": 99.01})


def test_fct_by_size_bins():
    sizes = np.array([150, 120, 1500, 1200, 15000, 12000, 11000], dtype=float)
    fct = sizes / 1000.0  # 1000 B/s
    df = pd.DataFrame({"size_bytes": sizes, "fct_ns": fct * 1e9})
    out = St.fct_by_size(df, bins_per_decade=1)
    assert out["count"].tolist() == [2, 2, 3]
    assert out["mean"].tolist() == pytest.approx([0.135, 1.35, 38000 / 3 / 1000])
    assert out["size_lo"].tolist() == pytest.approx([100, 1000, 10000])
    assert out["count"].sum() == len(sizes)
    out2 = St.fct_by_size(sizes, fct, edges=[100, 1000, 100000])
    assert out2["count"].tolist() == [2, 5]


def test_throughput_and_summary():
    df = pd.DataFrame({"size_bytes": [1000.0, 2000.0, 4000.0], "fct_s": [1.0, 1.0, 2.0],
                       "repeat": [0, 1, 1]})
    th = St.throughputs(df)
    assert th.tolist() == pytest.approx([8000, 16000, 16000])
    s = St.summarize(df)
    assert s["fct_mean_s"] == pytest.approx(4 / 3)
    assert s["jain"] == pytest.approx(St.jain_index([1, 2, 2]))
    assert s["repeats"] == 2
    with pytest.raises(KeyError):
        St.fct_column(pd.DataFrame({"x": [1]}))
