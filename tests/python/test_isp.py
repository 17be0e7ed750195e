"""ISP subscriber trees (docs/isp.md): the per-subscriber table, Jain and the Lorenz gap by
hand, subscribers.parquet from a run, sojourn.load, the report, validate's
oversubscription, determinism, and the other engines' view of the same file."""
from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sojourn
from sojourn import isp
from sojourn.analysis.subscribers import fairness

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "experiments" / "isp" / "small.toml"


def _info(names, down, up, rtt_s, active):
    n = len(names)
    return {"subscribers": {"subscriber": names, "plan": list(range(n)), "site": [0] * n, "access": [0] * n,
                            "active": active,
                            "classid": [f"1:{i + 2:x}" for i in range(n)], "server": ["server0"] * n,
                            "rtt_s": rtt_s, "down_bps": down, "up_bps": up, "ceil_down_bps": down, "ceil_up_bps": up}}


def test_subscriber_table_by_hand():
    # sub0: two downloads, 1,000,000 B in 10 s with 30 ms one-way delay and 3,000,000 B with
    # 50 ms: 4 MB x 8 / 10 s = 3.2 Mbit/s of a 10 Mbit/s plan (ratio 0.32); latency weighted
    # by bytes (1 x 30 + 3 x 50) / 4 = 45 ms, base 20 ms (RTT 40 ms), queueing 25 ms.
    # sub1: one upload of 500,000 B: 0.4 Mbit/s of a 2 Mbit/s up plan; no download.
    flows = pd.DataFrame({
        "src": ["server0", "server0", "sub1"], "dst": ["sub0", "sub0", "server0"],
        "start_s": [0.0, 0.0, 0.0], "end_s": [np.nan, np.nan, np.nan],
        "delivered_bytes": [1_000_000, 3_000_000, 500_000], "mean_delay_ms": [30.0, 50.0, 12.0]})
    info = _info(["sub0", "sub1"], [10_000_000, 20_000_000], [1_000_000, 2_000_000], [0.04, 0.02], [True, True])
    t = isp.subscriber_table(flows, info, duration_s=10.0)
    d0 = t[(t.subscriber == "sub0") & (t.direction == "down")].iloc[0]
    assert d0.flows == 2 and d0.delivered_bytes == 4_000_000
    assert d0.achieved_bps == pytest.approx(3.2e6)
    assert d0.achieved_ratio == pytest.approx(0.32)
    assert d0.latency_ms == pytest.approx(45.0)
    assert d0.base_delay_ms == pytest.approx(20.0)
    assert d0.queueing_ms == pytest.approx(25.0)
    u1 = t[(t.subscriber == "sub1") & (t.direction == "up")].iloc[0]
    assert u1.achieved_bps == pytest.approx(0.4e6) and u1.achieved_ratio == pytest.approx(0.2)
    d1 = t[(t.subscriber == "sub1") & (t.direction == "down")].iloc[0]
    assert d1.flows == 0 and d1.achieved_bps == 0.0 and math.isnan(d1.latency_ms)
    assert list(t.columns) == isp.COLUMNS


def test_warmup_window_counts_a_flow_in_proportion():
    # A flow alive 0..10 s delivering 10 MB, warm-up 2 s: 8/10 of it in the 8-s window:
    # 8 MB x 8 / 8 s = 8 Mbit/s.
    flows = pd.DataFrame({"src": ["server0"], "dst": ["sub0"], "start_s": [0.0], "end_s": [np.nan],
                          "delivered_bytes": [10_000_000], "mean_delay_ms": [10.0]})
    t = isp.subscriber_table(flows, _info(["sub0"], [10_000_000], [1_000_000], [0.02], [True]), 10.0, 2.0)
    assert t[t.direction == "down"].achieved_bps.iloc[0] == pytest.approx(8e6)


def _table(ratios, active=None):
    n = len(ratios)
    return pd.DataFrame({"direction": ["down"] * n, "active": active or [True] * n,
                         "achieved_ratio": ratios})


def test_jain_is_one_for_equal_shares():
    assert fairness(_table([0.9, 0.9, 0.9, 0.9]))["jain"] == pytest.approx(1.0)
    assert fairness(_table([0.9, 0.9, 0.9, 0.9]))["lorenz_gap"] == pytest.approx(0.0)


def test_jain_and_lorenz_gap_of_a_hand_worked_vector():
    # (1, 2, 3, 4): Jain = 10^2 / (4 x 30) = 0.8333...; Lorenz curve at 1/4, 2/4, 3/4:
    # 0.1, 0.3, 0.6, so the gap is max(0.15, 0.2, 0.15) = 0.2.
    f = fairness(_table([1.0, 2.0, 3.0, 4.0]))
    assert f["jain"] == pytest.approx(0.833333333, abs=1e-9)
    assert f["lorenz_gap"] == pytest.approx(0.2)
    assert f["subscribers"] == 4 and f["mean_ratio"] == pytest.approx(2.5)
    # Inactive subscribers are left out by default.
    g = fairness(_table([1.0, 1.0, 0.0], active=[True, True, False]))
    assert g["jain"] == pytest.approx(1.0) and g["subscribers"] == 2


def _run(tmp: Path, name: str, *extra: str) -> Path:
    out = tmp / name
    r = subprocess.run([sys.executable, "-m", "sojourn", "run", str(SMALL), "--out", str(out), "--duration", "4s",
                        "--quiet", *extra], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return out


def test_run_writes_subscribers_and_is_deterministic(tmp_path):
    a = _run(tmp_path, "a")
    b = _run(tmp_path, "b")
    assert (a / "subscribers.parquet").read_bytes() == (b / "subscribers.parquet").read_bytes()
    t = pd.read_parquet(a / "subscribers.parquet")
    # 8 subscribers x 2 directions; active = 0.5 of 8.
    assert len(t) == 16 and int(t[t.direction == "down"].active.sum()) == 4
    act = t[t.active]
    # Every active subscriber moved data both ways and none beat its plan's ceiling.
    assert (act.flows == 1).all() and (act.achieved_bps > 0).all()
    assert (act.achieved_bps <= act.ceil_bps * 1.01).all()
    # sojourn.load and Result.read see the same table.
    df = sojourn.load(a, what="subscribers")
    assert len(df) == 16 and {"point", "seed"} <= set(df.columns)
    assert sojourn.Result.read(a).subscribers.equals(t)
    # The report has the two subscriber figures.
    page = (a / "report.html").read_text() if (a / "report.html").exists() else ""
    if page:
        assert "plot-subscriber-rates" in page and "plot-subscriber-latency" in page


def test_report_has_subscriber_figures(tmp_path):
    a = _run(tmp_path, "a")
    from sojourn.analysis.htmlreport import write_report

    page = write_report([a], tmp_path / "r.html").read_text()
    assert "plot-subscriber-rates" in page and "plot-subscriber-latency" in page


def test_other_topologies_write_no_subscriber_table(tmp_path):
    res = sojourn.run(ROOT / "experiments" / "examples" / "cbr-fifo-overload.toml", duration="6s")
    out = res.write(tmp_path / "cbr")
    assert not (out / "subscribers.parquet").exists()
    with pytest.raises(FileNotFoundError, match="no subscribers.parquet"):
        sojourn.load(out, what="subscribers")


def test_validate_prints_the_oversubscription():
    r = subprocess.run([sys.executable, "-m", "sojourn", "validate", str(SMALL)], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    # Down: 4 x 50 + 4 x 20 = 280 Mbit/s of plans over 200 Mbit/s = 1.40;
    # up: 4 x 10 + 4 x 5 = 60 over 50 = 1.20.
    assert "oversubscription: down 1.40" in r.stdout and "up 1.20" in r.stdout, r.stdout
    assert "8 subscribers (4 active)" in r.stdout


def test_deploy_plan_emits_the_htb_tree():
    r = subprocess.run([sys.executable, "-m", "sojourn", "deploy", "plan", str(SMALL), "--node", "core",
                        "--iface", "uplink=eth1", "--iface", "server0.down=eth0"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # The root class at the uplink's 200 Mbit/s, one class per subscriber, each with its
    # fq_codel leaf, and one filter per subscriber on its real address: sub0 is the first
    # host of 100.64.0.0/24 and holds the first subscriber class, 1:2.
    assert "root handle 1: htb" in out
    assert "classid 1:1 htb rate 200Mbit ceil 200Mbit" in out
    assert out.count("tc class replace dev eth1") == 1 + 8, out
    assert out.count(" fq_codel limit") == 8, out
    assert out.count("tc filter replace dev eth1") == 8, out
    assert "match ip dst 100.64.0.1/32 flowid 1:2" in out
    # The upstream tree is the access router's, with source filters.
    r = subprocess.run([sys.executable, "-m", "sojourn", "deploy", "plan", str(SMALL), "--node", "access",
                        "--iface", "upstream=eth0", *[x for i in range(8) for x in ("--iface", f"sub{i}.down=s{i}")]],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "match ip src 100.64.0.8/32 flowid 1:9" in r.stdout
    assert "classid 1:1 htb rate 50Mbit ceil 50Mbit" in r.stdout


LIVE4 = """
duration = "4s"
warmup = "1s"
[topology]
kind = "isp"
subscribers = 4
uplink = { rate = "40Mbit" }
upstream = { rate = "10Mbit" }
line = { rate = "100Mbit" }
plans = [ { down = "10Mbit", up = "2Mbit", share = 1 } ]
rtt = "20ms"
leaf = { kind = "fq_codel" }
[transport]
cc = "cubic"
[[workload]]
kind = "bulk"
between = "servers->subscribers"
[record]
interval = "100ms"
"""


def _can_live() -> bool:
    sys.path.insert(0, str(Path(__file__).parent))
    from live_experiments import can_make_namespaces

    return can_make_namespaces()


@pytest.mark.skipif(not _can_live(), reason="live emulation needs root and `ip netns` (CI runs as root)")
def test_emulate_runs_a_four_subscriber_tree(tmp_path):
    # Real kernel CUBIC through sojourn's HTB in the forwarder: 4 subscribers on 10 Mbit/s
    # plans behind 40 Mbit/s, all downloading. No subscriber beats its class's 10 Mbit/s
    # (payload at most 1448/1514 of it, plus 5 % for the live clock), and each gets most
    # of it.
    exp = tmp_path / "isp4.toml"
    exp.write_text(LIVE4)
    res = sojourn.emulate(exp)
    out = res.write(tmp_path / "live")
    t = pd.read_parquet(out / "subscribers.parquet")
    down = t[t.direction == "down"]
    assert len(down) == 4 and (down.flows == 1).all()
    assert (down.achieved_bps <= 10e6 * 1448 / 1514 * 1.05).all(), down[["subscriber", "achieved_bps"]]
    assert (down.achieved_bps >= 0.75 * 10e6 * 1448 / 1514).all(), down[["subscriber", "achieved_bps"]]
