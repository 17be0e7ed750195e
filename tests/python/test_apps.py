"""Application workloads in the Python front (docs/tests.md): summary.json's `apps` block
as tidy frames (`sojourn.load(..., what="apps" | "app_samples")`), the report's RPM, PLT
and video plots, and byte-identical outputs for the same file and seed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import _local  # noqa: F401  (this worktree's python/sojourn first)
import sojourn
from sojourn.analysis import apps

ROOT = Path(__file__).resolve().parents[2]

# rpm, web and video side by side, one per dumbbell pair: a few seconds of simulation.
EXP = """\
name = "apps-mix"
duration = "6s"
seed = 5
topology = { pairs = 3, bottleneck = { rate = "20Mbit", delay = "10ms", qdisc = "fq_codel" }, reverse = { rate = "20Mbit", delay = "10ms", qdisc = "fq_codel" } }
workload = [
  { kind = "rpm", pair = 0, phase = "3s", window = "2s", connections = 4, probes_per_second = 20 },
  { kind = "web", pair = 1, objects = 6, think = "300ms" },
  { kind = "video", pair = 2, segment = "1s", reservoir = "1s", cushion = "2s", max_buffer = "5s" },
]
record = { interval = "100ms" }
"""


def run(tmp: Path, name: str) -> Path:
    f = tmp / "apps.toml"
    f.write_text(EXP)
    out = tmp / name
    r = subprocess.run([sys.executable, "-m", "sojourn", "run", str(f), "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> Path:
    return run(tmp_path_factory.mktemp("apps"), "a")


def test_apps_frame_is_summary_json_per_entry_and_direction(result):
    s = json.loads((result / "summary.json").read_text())
    kinds = [a["kind"] for a in s["apps"]]
    assert kinds == ["rpm", "web", "video"]
    df = sojourn.load(result, what="apps")
    # rpm: a row per direction; web and video: one row each.
    assert list(df["kind"]) == ["rpm", "rpm", "web", "video"]
    assert list(df["direction"][:2]) == ["downlink", "uplink"]
    rpm = s["apps"][0]
    for i, d in enumerate(["downlink", "uplink"]):
        assert df["rpm"].iloc[i] == rpm[d]["rpm"]
        # The draft's formula over the trimmed means the frame carries.
        r = df.iloc[i]
        foreign = 60000 / ((r["tm_tcp_f_ms"] + r["tm_tls_f_ms"] + r["tm_http_f_ms"]) / 3)
        assert abs((foreign + 60000 / r["tm_http_l_ms"]) / 2 - r["rpm"]) < 1e-9 * r["rpm"]
    assert df["pages"].iloc[2] == s["apps"][1]["pages"] >= 2
    assert df["segments"].iloc[3] == s["apps"][2]["segments"] >= 3
    assert set(df["point"]) == {"apps-mix"} and set(df["seed"]) == {5}


def test_app_samples_are_every_measurement(result):
    smp = sojourn.load(result, what="app_samples")
    s = json.loads((result / "summary.json").read_text())
    web = smp[(smp["kind"] == "web") & (smp["metric"] == "plt_s")]
    # One page-load sample per finished page; its time is the page's end.
    assert len(web) == s["apps"][1]["pages"]
    assert abs(web["value"].mean() - s["apps"][1]["plt_mean_s"]) < 1e-12
    vid = smp[(smp["kind"] == "video") & (smp["metric"] == "bitrate_bps")]
    assert len(vid) == s["apps"][2]["segments"]
    assert set(vid["value"]) <= {1e6, 2.5e6, 5e6, 8e6}
    probes = smp[smp["kind"] == "rpm"]
    assert set(probes["direction"]) == {"downlink", "uplink"}
    assert set(probes["metric"]) == {"tcp_f_ms", "tls_f_ms", "http_f_ms", "http_l_ms"}
    assert (probes["value"] > 0).all()


def test_the_report_shows_the_app_plots(result):
    page = (result / "report.html").read_text()
    for anchor in ("rpm", "plt-cdf", "video"):
        assert f"id='{anchor}'" in page, anchor


def test_runs_without_apps_have_empty_frames(tmp_path):
    f = tmp_path / "bulk.toml"
    f.write_text('duration = "1s"\n[topology]\nbottleneck = { rate = "10Mbit" }\n[[workload]]\nkind = "bulk"\n')
    out = tmp_path / "b"
    r = subprocess.run([sys.executable, "-m", "sojourn", "run", str(f), "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "apps" not in json.loads((out / "summary.json").read_text())
    assert apps.summary_rows(json.loads((out / "summary.json").read_text())) == []
    assert sojourn.load(out, what="app_samples").empty
    page = (out / "report.html").read_text()
    assert "id='rpm'" not in page


def test_same_file_and_seed_give_identical_outputs(tmp_path, result):
    again = run(tmp_path, "b")
    for name in ("summary.json", "flows.parquet", "timeseries.parquet"):
        assert (again / name).read_bytes() == (result / name).read_bytes(), name


def test_load_names_the_new_choices():
    with pytest.raises(ValueError, match="'apps', 'app_samples'"):
        sojourn.load(ROOT, what="nothing")
