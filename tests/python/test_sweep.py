"""Sweeps and compare: grid expansion, resumability, determinism, up-front validation,
merging, and the compare statistics against an independent recomputation."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import sojourn
from sojourn import cli
from sojourn.analysis import compare, stats
from sojourn import sweeps as sw
from sojourn._config import ConfigError

BASE = """
name = "tiny"
duration = "2s"
seed = 7

[topology]
kind = "dumbbell"
pairs = 2
bottleneck = { rate = "10Mbit", delay = "5ms", qdisc = "pfifo" }
access = { rate = "1Gbit", delay = "1ms" }

[[workload]]
kind = "onoff"
pairs = "all"
count = 4
rate = "4Mbit"
on_time = "100ms"
off_time = "100ms"

[[workload]]
kind = "cbr"
pair = 0
rate = "200kbit"
packet_size = "200B"

[record]
interval = "100ms"
links = ["bottleneck"]
"""


def write(dir: Path, name: str, text: str) -> Path:
    p = dir / name
    p.write_text(text)
    return p


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return write(tmp_path, "tiny.toml", BASE)


def sweep_file(tmp_path: Path, body: str) -> Path:
    return write(tmp_path, "s.sweep.toml", 'base = "tiny.toml"\n' + body)


QDISC_AXIS = """
[[axis]]
key = "topology.bottleneck.qdisc"
values = ["pfifo", { kind = "codel", target = "5ms" }, "fq_codel"]
"""


# --------------------------------------------------------------------------- planning


def test_cartesian_product_size_and_naming(tmp_path, base):
    f = sweep_file(tmp_path, "repeats = 3\n" + QDISC_AXIS + """
[[axis]]
key = "topology.bottleneck.rate"
values = ["10Mbit", "20Mbit"]
names = ["slow", "fast"]

[[variant]]
name = "plain"

[[variant]]
name = "thin"
set = { "workload[1].rate" = "100kbit" }
""")
    plan = sw.load_plan(f)
    # 2 variants x 3 qdiscs x 2 rates, each with 3 seeds starting at the base's seed 7.
    assert len(plan.points) == 12
    assert plan.seeds == [7, 8, 9]
    assert len(plan.runs()) == 36
    names = [p.name for p in plan.points]
    assert len(set(names)) == 12
    assert names[:3] == ["plain+pfifo+slow", "plain+pfifo+fast", "plain+codel-target=5ms+slow"]
    assert names[-1] == "thin+fq_codel+fast"
    assert plan.columns == ["variant", "qdisc", "rate"]
    p = plan.points[-1]
    assert p.labels == {"variant": "thin", "qdisc": "fq_codel", "rate": "fast"}
    cfg = plan.config(p)
    assert cfg["topology"]["bottleneck"]["qdisc"] == "fq_codel"
    assert cfg["topology"]["bottleneck"]["rate"] == "20Mbit"
    assert cfg["workload"][1]["rate"] == "100kbit"
    # the base is untouched by the overrides of other points
    assert plan.config(plan.points[0])["workload"][1]["rate"] == "200kbit"
    # --repeats and explicit seeds
    assert sw.load_plan(f, repeats=2).seeds == [7, 8]
    f2 = sweep_file(tmp_path, "seeds = [3, 11]\n" + QDISC_AXIS)
    assert sw.load_plan(f2).seeds == [3, 11]


@pytest.mark.parametrize("body, where", [
    ("[[axis]]\nkey = \"topology.bottleneck.qdisc\"\nvalues = [\"pfifo\", \"codel\"]\nnames = [\"a\"]\n", "axis[0].names"),
    ("[[axis]]\nkey = \"topology.bottleneck.qdisc\"\nvalues = [\"pfifo\", \"pfifo\"]\n", "axis[0].values"),
    ("[[axis]]\nkey = \"x\"\nvalue = [1]\n", "axis[0].value"),
    ("repeat = 2\n", "repeat"),
    ("[[variant]]\nname = \"a/b\"\n", "variant[0].name"),
])
def test_bad_sweep_file_names_the_key(tmp_path, base, body, where):
    with pytest.raises(ConfigError) as e:
        sw.load_plan(sweep_file(tmp_path, body))
    assert e.value.path == where


def test_inline_base(tmp_path):
    inline = "[base]\n" + BASE.replace("[topology]", "[base.topology]").replace("[[workload]]", "[[base.workload]]") \
        .replace("[record]", "[base.record]")
    f = write(tmp_path, "inline.sweep.toml", QDISC_AXIS + inline)
    plan = sw.load_plan(f)
    assert [p.name for p in plan.points] == ["pfifo", "codel-target=5ms", "fq_codel"]
    assert plan.seeds == [7]
    sw.validate_plan(plan)


# --------------------------------------------------------------------------- running


def _tables(out: Path):
    return pq.read_table(out / "runs.parquet").to_pandas(), pq.read_table(out / "flows.parquet").to_pandas()


def _same(a, b) -> None:
    """Identical content (NaN equal to NaN), dtypes included."""
    for x, y in zip(a, b):
        pd.testing.assert_frame_equal(x, y, check_exact=True)


def test_run_resume_merge_and_determinism(tmp_path, base, capsys):
    f = sweep_file(tmp_path, "repeats = 2\n" + QDISC_AXIS)
    out1 = tmp_path / "o1"
    runs = sojourn.sweep(f, out1, jobs=1)
    assert len(runs) == 6
    assert list(runs["point"]) == ["pfifo", "pfifo", "codel-target=5ms", "codel-target=5ms", "fq_codel", "fq_codel"]
    assert list(runs["seed"]) == [7, 8] * 3
    for r in runs.itertuples():
        assert (out1 / r.run_dir / "summary.json").exists()
        assert r.conserved
    # merged flows = concatenation of every run's flows
    _, fl = _tables(out1)
    per_run = sum(pq.read_table(out1 / r / "flows.parquet").num_rows for r in runs["run_dir"])
    assert len(fl) == per_run > 0
    for r in runs.itertuples():
        sel = fl[(fl["point"] == r.point) & (fl["seed"] == r.seed)]
        own = pq.read_table(out1 / r.run_dir / "flows.parquet").to_pandas()
        assert np.array_equal(sel["delivered_bytes"].to_numpy(), own["delivered_bytes"].to_numpy())
        # runs.parquet carries the run's own summary numbers
        s = json.loads((out1 / r.run_dir / "summary.json").read_text())
        assert r.utilisation == s["links"]["bottleneck"]["utilisation"]
        assert r.drops == s["links"]["bottleneck"]["drops_total"]

    # resume: the second invocation runs nothing and leaves the results as they were
    mtimes = {p: p.stat().st_mtime_ns for p in out1.glob("runs/*/seed-*/summary.json")}
    before = _tables(out1)
    assert cli.main(["sweep", str(f), "--out", str(out1), "--jobs", "1"]) == 0
    err = capsys.readouterr().err
    assert "0 run(s), 6 cached" in err
    assert {p: p.stat().st_mtime_ns for p in out1.glob("runs/*/seed-*/summary.json")} == mtimes
    after = _tables(out1)
    _same(before, after)

    # a run whose summary.json is missing (interrupted) is redone, and only that one
    (out1 / "runs/fq_codel/seed-8/summary.json").unlink()
    st = sw.run_plan(sw.load_plan(f), out1, jobs=1)
    assert (st["ran"], st["cached"]) == (1, 5)

    # determinism: the same sweep elsewhere, in parallel, gives the same merged content
    out2 = tmp_path / "o2"
    sojourn.sweep(f, out2, jobs=2)
    _same(_tables(out1), _tables(out2))
    for name in ("runs.parquet", "flows.parquet"):
        assert (out1 / name).read_bytes() == (out2 / name).read_bytes()


def test_bad_axis_value_exits_2_before_running_anything(tmp_path, base, capsys):
    f = sweep_file(tmp_path, """
[[axis]]
key = "topology.bottleneck.qdisc"
values = ["pfifo", "fq_codel", { kind = "codel", target = "soon" }]
names = ["fifo", "fqc", "broken"]
""")
    out = tmp_path / "out"
    assert cli.main(["sweep", str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "'broken'" in err and "topology.bottleneck.qdisc.target" in err
    assert not out.exists()  # nothing half-written, not even for the valid points
    # an unknown key in a variant is caught the same way
    f2 = sweep_file(tmp_path, '[[variant]]\nname = "typo"\nset = { "topology.bottleneck.qdsic" = "codel" }\n')
    assert cli.main(["sweep", str(f2), "--out", str(out)]) == 2
    assert "'typo'" in capsys.readouterr().err
    assert not out.exists()


def test_changed_point_definition_is_refused(tmp_path, base, capsys):
    f = sweep_file(tmp_path, QDISC_AXIS)
    out = tmp_path / "o"
    sojourn.sweep(f, out, jobs=1)
    # the same point name now means another configuration: refuse to mix the results
    f.write_text('base = "tiny.toml"\n[[axis]]\nkey = "topology.bottleneck.qdisc"\nvalues = ["codel"]\nnames = ["pfifo"]\n')
    assert cli.main(["sweep", str(f), "--out", str(out)]) == 2
    assert "different configuration" in capsys.readouterr().err


# --------------------------------------------------------------------------- compare


def test_compare_goodput_matches_independent_recomputation(tmp_path, base, capsys):
    f = sweep_file(tmp_path, "repeats = 2\n" + QDISC_AXIS)
    out = tmp_path / "o"
    sojourn.sweep(f, out, jobs=1)
    assert cli.main(["compare", str(out), "--metric", "goodput", "--baseline", "pfifo", "--plots"]) == 0
    printed = capsys.readouterr().out
    data = compare.load([out])
    t = compare.table(data, "goodput", "pfifo").set_index("point")
    fl = pd.read_parquet(out / "flows.parquet")
    runs = pd.read_parquet(out / "runs.parquet")
    for p in ["pfifo", "codel-target=5ms", "fq_codel"]:
        g = fl.loc[(fl["point"] == p) & fl["after_warmup"], "goodput_bps"].to_numpy()
        g = g[np.isfinite(g)]
        assert g.size > 4
        m, hw = g.mean(), 1.96 * g.std(ddof=1) / math.sqrt(g.size)
        assert t.loc[p, "goodput_mean_bps"] == pytest.approx(m, rel=1e-9)
        assert t.loc[p, "goodput_ci_bps"] == pytest.approx(hw, rel=1e-4)
        assert t.loc[p, "metric_mean"] == pytest.approx(m, rel=1e-9)
        assert t.loc[p, "utilisation"] == pytest.approx(runs.loc[runs["point"] == p, "utilisation"].mean())
        assert f"{m / 1e6:.3f} ± {hw / 1e6:.3f}" in printed
        assert f"| {p} | 2 | " in (out / "compare.md").read_text()
    base_m = fl.loc[(fl["point"] == "pfifo") & fl["after_warmup"], "goodput_bps"].mean()
    fq_m = fl.loc[(fl["point"] == "fq_codel") & fl["after_warmup"], "goodput_bps"].mean()
    assert t.loc["fq_codel", "gain"] == pytest.approx(fq_m / base_m - 1, rel=1e-9)
    md = (out / "compare.md").read_text()
    assert "| fq_codel |" in md and "baseline" in md
    for name in ["goodput_ci", "lorenz", "sojourn_cdf"]:
        assert (out / f"{name}.png").exists() and (out / f"{name}.svg").exists()
    # bad baseline: a one-line error, exit 2
    assert cli.main(["compare", str(out), "--baseline", "nope"]) == 2


def _fake_sweep(root: Path, points: dict, seeds=(1, 2)) -> None:
    """A sweep directory with known sized flows (as a TCP workload would produce)."""
    from sojourn.results import run_row

    rng = np.random.default_rng(5)
    rows, flows = [], []
    for p, scale in points.items():
        for s in seeds:
            n = 40
            size = rng.integers(1_000, 10_000_000, n)
            fct = scale * (0.01 + size / 1.25e6) * rng.uniform(0.8, 1.2, n)
            done = rng.uniform(size=n) > 0.1
            start = rng.uniform(0, 10, n)
            flows.append(pd.DataFrame({
                "point": p, "seed": s, "flow": np.arange(n, dtype=np.uint32), "start_s": start,
                "size_bytes": size.astype(np.uint64), "completed": done, "fct_s": np.where(done, fct, np.nan),
                "goodput_bps": 8 * size / fct, "after_warmup": start >= 1.0,
            }))
            summ = {"links": {"bottleneck": {"utilisation": 0.9, "drops_total": 3, "sojourn_ms": {"p50": 1.0, "p99": 9.0, "mean": 2.0 * scale}}}}
            rows.append({"point": p, "seed": s, "run_dir": f"runs/{p}/seed-{s}", **run_row(summ)})
    root.mkdir()
    pd.DataFrame(rows).to_parquet(root / "runs.parquet")
    pd.concat(flows, ignore_index=True).to_parquet(root / "flows.parquet")


def test_compare_fct_matches_independent_recomputation(tmp_path):
    root = tmp_path / "fake"
    _fake_sweep(root, {"codel": 1.0, "age-codel": 0.7, "pfifo": 1.3})
    data = compare.load([root])
    t = compare.table(data, "fct", "pfifo").set_index("point")
    fl = pd.read_parquet(root / "flows.parquet")
    keep = fl["after_warmup"] & fl["completed"] & (fl["size_bytes"] > 0)
    for p in ["codel", "age-codel", "pfifo"]:
        sel = fl[keep & (fl["point"] == p)]
        x = sel["fct_s"].to_numpy()
        assert t.loc[p, "fct_flows"] == x.size
        assert t.loc[p, "fct_mean_s"] == pytest.approx(x.mean(), rel=1e-12)
        assert t.loc[p, "fct_ci_s"] == pytest.approx(1.96 * x.std(ddof=1) / math.sqrt(x.size), rel=1e-4)
        for q in (50, 75, 95, 99):
            assert t.loc[p, f"fct_p{q}_s"] == pytest.approx(np.percentile(x, q), rel=1e-12)
        # across repeats: Student-t over the two per-seed means (t_{0.975,1} = 12.706)
        means = sel.groupby("seed")["fct_s"].mean().to_numpy()
        assert t.loc[p, "fct_repeats_ci_s"] == pytest.approx(12.7062 * means.std(ddof=1) / math.sqrt(2), rel=1e-4)
    mb = fl[keep & (fl["point"] == "pfifo")]["fct_s"].mean()
    ma = fl[keep & (fl["point"] == "codel")]["fct_s"].mean()
    assert t.loc["codel", "gain"] == pytest.approx(ma / mb - 1, rel=1e-12)
    pairs = compare.age_pairs(data, "fct")
    assert list(pairs["base"]) == ["codel"] and list(pairs["age"]) == ["age-codel"]
    age = fl[keep & (fl["point"] == "age-codel")]["fct_s"].mean()
    assert pairs["gain"].iloc[0] == pytest.approx(age / ma - 1, rel=1e-12)
    assert pairs["gain"].iloc[0] < 0 and pairs["gain_lo"].iloc[0] < pairs["gain"].iloc[0] < pairs["gain_hi"].iloc[0]
    # Lorenz gap of equal throughputs is 0; Jain of equal values is 1
    assert stats.lorenz_gap(np.ones(10)) == pytest.approx(0.0)
    assert stats.jain_index(np.ones(10)) == pytest.approx(1.0)
    assert stats.jain_index([1.0, 0.0]) == pytest.approx(0.5)
    # plots and markdown with sized flows
    compare.compare([root], plots=True, quiet=True)
    assert (root / "fct_vs_size.png").exists()
    md = (root / "compare.md").read_text()
    assert "age-codel" in md and f"{age / ma - 1:+.1%}".replace("%", "") in md.replace("%", "")


def test_compare_run_directories(tmp_path, base):
    a, b = tmp_path / "a", tmp_path / "b"
    sojourn.run(base).write(a)
    sojourn.run(base, overrides={"topology.bottleneck.qdisc": "fq_codel"}).write(b)
    t = compare.compare([a, b], metric="sojourn", out=tmp_path / "cmp", quiet=True)
    assert list(t["point"]) == ["a", "b"]
    assert (tmp_path / "cmp" / "compare.md").exists()
    sa = json.loads((a / "summary.json").read_text())["links"]["bottleneck"]["sojourn_ms"]["mean"]
    assert t.loc[0, "metric_mean"] == pytest.approx(sa)


def test_help_has_examples(capsys):
    for cmd in ("sweep", "compare"):
        with pytest.raises(SystemExit):
            cli.main([cmd, "--help"])
        assert "examples:" in capsys.readouterr().out


def test_shipped_example_sweep_validates():
    root = Path(__file__).resolve().parents[2]
    plan = sw.load_plan(root / "experiments/examples/compare-aqm.sweep.toml")
    assert [p.name for p in plan.points] == ["pfifo", "codel", "fq_codel", "pie", "cake", "fq_pie"]
    assert len(plan.seeds) == 2
    sw.validate_plan(plan)
