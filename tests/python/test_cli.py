"""The `sojourn` command and Python API: outputs, determinism, bad input (exit 2)."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import sojourn

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "experiments" / "examples"


def sojourn_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sojourn", *args], capture_output=True, text=True, cwd=ROOT)


def digest(d: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.suffix in (".json", ".parquet") and p.name != "perf.json"}


def test_run_writes_outputs_and_matches_queueing_theory(tmp_path):
    r = sojourn_cli("run", str(EX / "cbr-fifo-overload.toml"), "--out", str(tmp_path / "o"), "--quiet")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "o"
    for f in ["summary.json", "flows.parquet", "timeseries.parquet", "perf.json", "report.md", "queue.png"]:
        assert (out / f).exists(), f
    s = json.loads((out / "summary.json").read_text())
    assert s["schema_version"] == 1
    b = s["links"]["bottleneck"]
    # 12 Mbit/s into 10 Mbit/s: utilisation 1, loss 1/6, delay 100 x 1500 B / 10 Mbit/s = 120 ms.
    assert b["utilisation"] == pytest.approx(1.0, abs=1e-3)
    loss = b["drops_total"] / (b["drops_total"] + b["tx_packets"])
    assert loss == pytest.approx(1 / 6, rel=0.01)
    assert b["sojourn_ms"]["mean"] == pytest.approx(120.0, rel=0.01)
    assert s["accounting"]["conserved"] is True
    flows = pd.read_parquet(out / "flows.parquet")
    assert len(flows) == 1 and flows.loc[0, "kind"] == "udp_cbr"
    ts = pd.read_parquet(out / "timeseries.parquet")
    assert set(ts["metric"].astype(str)) >= {"queue_packets", "throughput_bps"}


def test_same_seed_same_bytes_and_seed_changes_output(tmp_path):
    exp = str(EX / "cellular-trace.toml")
    for name, seed in [("a", "5"), ("b", "5"), ("c", "6")]:
        r = sojourn_cli("run", exp, "--out", str(tmp_path / name), "--seed", seed, "--quiet", "--no-report")
        assert r.returncode == 0, r.stderr
    a, b, c = (digest(tmp_path / n) for n in "abc")
    assert a == b
    assert a["summary.json"] != c["summary.json"]


def test_python_api_returns_frames():
    res = sojourn.run(EX / "rate-schedule.toml", seed=1, duration="12s")
    assert isinstance(res.flows, pd.DataFrame)
    q = res.series("bottleneck", "throughput_bps")
    # 10 Mbit/s until 10 s, then 5 Mbit/s (9 Mbit/s offered).
    assert q.loc[5.0] == pytest.approx(9e6, rel=0.01)
    assert q.loc[11.5] == pytest.approx(5e6, rel=0.01)
    d = sojourn.run({"duration": "2s", "topology": {"kind": "dumbbell", "bottleneck": {"rate": "10Mbit"}},
                     "workload": [{"kind": "cbr", "pair": 0, "rate": "1Mbit"}]})
    assert d.summary["links"]["bottleneck"]["drops_total"] == 0


BAD = [
    ("duration = \"1s\"\n[topology\n", "TOML syntax error"),
    ("duration = \"1s\"\n", "topology: required"),
    ("duration = \"1 fortnight\"\n[topology]\nbottleneck = {rate=\"1Mbit\"}\n[[workload]]\nkind=\"cbr\"\nrate=\"1Mbit\"\n", "duration: unknown duration unit"),
    ("duration = \"1s\"\n[topology]\nbottleneck = {rate=\"1Mbit\", qdisc=\"codle\"}\n[[workload]]\nkind=\"cbr\"\nrate=\"1Mbit\"\n", "did you mean \"codel\""),
    ("duration = \"1s\"\n[topology]\nbottleneck = {rate=\"1Mbit\", qdisc={kind=\"codel\", tagret=\"5ms\"}}\n[[workload]]\nkind=\"cbr\"\nrate=\"1Mbit\"\n", "topology.bottleneck.qdisc.tagret: unknown key"),
]


@pytest.mark.parametrize("text,needle", BAD)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, text, needle):
    exp = tmp_path / "bad.toml"
    exp.write_text(text)
    out = tmp_path / "out"
    r = sojourn_cli("run", str(exp), "--out", str(out))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert needle in lines[0] and "bad.toml" in lines[0], lines[0]
    assert not out.exists()


def test_missing_file_and_validate(tmp_path):
    r = sojourn_cli("run", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "no such file" in r.stderr
    r = sojourn_cli("validate", str(EX / "cellular-trace.toml"))
    assert r.returncode == 0 and "radio" in r.stdout
    r = sojourn_cli("run", str(EX / "cbr-fifo-overload.toml"), "--out", str(tmp_path / "o"), "--set", "topology.bottleneck.qdisc.limit=0")
    assert r.returncode == 2 and "limit" in r.stderr


def test_interrupted_write_leaves_no_summary(tmp_path, monkeypatch):
    res = sojourn.run(EX / "cbr-fifo-underload.toml", duration="1s")
    out = tmp_path / "o"
    res.write(out)
    assert (out / "summary.json").exists()
    import pyarrow.parquet as pq

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", boom)
    with pytest.raises(OSError):
        res.write(out)
    # The old summary was removed before writing began: the directory no longer looks complete.
    assert not (out / "summary.json").exists()
    assert not any(p.name.startswith(".sojourn-partial") for p in out.iterdir())
    with pytest.raises(FileNotFoundError):
        sojourn.Result.read(out)


def test_help_teaches_by_example():
    r = sojourn_cli("--help")
    assert r.returncode == 0 and "examples:" in r.stdout and "sojourn run" in r.stdout
    r = sojourn_cli("qdiscs")
    for k in ["pfifo", "codel", "fq_codel", "cake", "pie", "fq_pie", "fq"]:
        assert k in r.stdout
