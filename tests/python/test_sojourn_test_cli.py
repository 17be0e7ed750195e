"""`sojourn test` comparing disciplines and running in the live engines (issue 37, "in one
command ... in all three engines"; python/sojourn/cli/test.py, docs/tests.md)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sojourn.cli.test import split_qdiscs

ROOT = Path(__file__).resolve().parents[2]
live = pytest.mark.skipif(os.geteuid() != 0, reason="live runs need root and `ip netns` (CI runs as root)")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sojourn", *args], capture_output=True, text=True, cwd=ROOT)


def netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_qdiscs_split_at_commas_outside_tables():
    assert split_qdiscs(["pfifo,fq_codel", '{kind="pfifo",limit=100}', "cake"]) == [
        "pfifo", "fq_codel", '{kind="pfifo",limit=100}', "cake"]


def test_rrul_compares_fifo_fq_codel_and_cake_in_one_command(tmp_path):
    out = tmp_path / "rrul"
    r = cli("test", "rrul", "--rate", "100Mbit/20Mbit", "--rtt", "40ms", "--qdisc", "pfifo,fq_codel,cake",
            "--duration", "8s", "--warmup", "2s", "--out", str(out))
    assert r.returncode == 0, r.stderr
    for q in ("pfifo", "fq_codel", "cake"):
        assert (out / q / "summary.json").exists() and (out / q / f"rrul-{q}.flent.gz").exists()
    assert (out / "rtt_cdf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "comparison.md").read_text()
    assert "| metric | pfifo | fq_codel | cake |" in md
    icmp = {}
    for q in ("pfifo", "fq_codel", "cake"):
        s = json.loads((out / q / "summary.json").read_text())
        icmp[q] = icmp_median_ms(s)
    # pfifo's default 1000 packets behind a 20 Mbit/s upstream: RTTs of hundreds of ms
    # (1000 x 0.6 ms = 606 ms when full); FQ-CoDel and CAKE keep the sparse probes within a
    # few ms of the 40-ms base (RFC 8290 §4.1.1).
    assert icmp["pfifo"] > 100 and 40 <= icmp["fq_codel"] < 45 and 40 <= icmp["cake"] < 45, icmp


def test_bad_test_arguments_are_one_line_and_exit_2(tmp_path):
    r = cli("test", "rrul", "--rate", "10Mbit", "--rtt", "20ms", "--qdisc", "pfifo,,cake", "--out", str(tmp_path / "a"))
    assert r.returncode == 2 and "--qdisc" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = cli("test", "rrul", "--rate", "10Mbit", "--rtt", "20ms", "--qdisc", "pfifo", "--qdisc", "pfifo",
            "--out", str(tmp_path / "b"))
    assert r.returncode == 2 and "the same discipline twice" in r.stderr, r.stderr
    r = cli("test", "rtt_fair", "--rate", "10Mbit", "--rtt", "20ms", "--engine", "kernel", "--out", str(tmp_path / "c"))
    assert r.returncode == 2 and "rtt_fair needs the dumbbell" in r.stderr, r.stderr
    assert not any((tmp_path / d).exists() for d in "abc")


def live_rrul(out: Path, qdisc: str, engine: str) -> None:
    """rrul at 20/5 Mbit/s, 20 ms, 8 s (2 s of warm-up) through `qdisc` in a live engine."""
    r = cli("test", "rrul", "--rate", "20Mbit/5Mbit", "--rtt", "20ms", "--qdisc", qdisc,
            "--engine", engine, "--duration", "8s", "--warmup", "2s", "--out", str(out))
    assert r.returncode == 0, r.stderr


def icmp_median_ms(s: dict) -> float:
    return [p for p in s["probes"].values() if p["mode"] == "icmp"][0]["rtt_ms"]["median"]


@live
def test_rrul_runs_in_the_kernel_engine_with_its_fifo_on_the_hosts(tmp_path):
    out = tmp_path / "k"
    live_rrul(out, '{kind="pfifo",limit=100}', "kernel")
    s = json.loads((out / "summary.json").read_text())
    assert s["engine"] == "kernel"
    t = s["tests"]["workload[0]"]
    # Both directions saturated: downloads near 20 Mbit/s of frames (1448/1514 of it as
    # payload: 19.1), uploads near 5 (4.8); the probes wait behind the upstream FIFO, which
    # TSQ keeps short on the sending host: above the 20-ms base, below a full 100 x 2.4 ms.
    assert 0.8 * 19.1e6 < t["download_bps"] < 20e6 and 0.8 * 4.78e6 < t["upload_bps"] < 5e6, t
    icmp = icmp_median_ms(s)
    assert 20 < icmp < 20 + 242, icmp
    # The run's own namespaces are gone (others' runs may come and go meanwhile).
    assert not {h["namespace"] for h in s["kernel"]["hosts"].values()} & netns()


@live
def test_rrul_compares_fifo_and_fq_codel_live_through_emulate(tmp_path):
    out = tmp_path / "e"
    live_rrul(out, "pfifo,fq_codel", "emulate")
    med = {}
    for q in ("pfifo", "fq_codel"):
        s = json.loads((out / q / "summary.json").read_text())
        assert s["engine"] == "emulate"
        med[q] = icmp_median_ms(s)
    # Kernel TCP fills the forwarder's 1000-packet FIFOs (2.4 ms a frame upstream at
    # 5 Mbit/s): far above the 20-ms base; FQ-CoDel keeps the probes near it.
    assert med["pfifo"] > 60 and 20 <= med["fq_codel"] < 30, med
    assert "| metric | pfifo | fq_codel |" in (out / "comparison.md").read_text()


def test_a_live_engine_failure_keeps_finished_results_and_removes_the_rest(tmp_path, monkeypatch, capsys):
    """A live run that fails mid-comparison (an EmulateError on the second discipline)
    exits 1 and leaves no empty directory behind: the first discipline's finished result
    stays, the failed and the unrun ones are removed (the engine is faked here: what is
    tested is the command's clean-up, the live runs are tested above)."""
    import sojourn
    from sojourn.cli import main
    from sojourn.cli import test as cli_test
    from sojourn.deploy import apply as _apply

    calls = []

    def fake_run(a, exp, out):
        calls.append(out.name)
        if len(calls) == 2:
            raise sojourn.EmulateError("the forwarder stopped")
        (out / "summary.json").write_text("{}")
        return object()

    monkeypatch.setattr(cli_test, "_run_one", fake_run)
    monkeypatch.setattr(_apply, "require_privilege", lambda what: None)
    top = tmp_path / "cmp"
    rc = main(["test", "rrul", "--rate", "20Mbit", "--rtt", "20ms", "--qdisc", "pfifo,fq_codel,cake",
               "--engine", "emulate", "--out", str(top)])
    err = capsys.readouterr().err
    assert rc == 1 and calls == ["pfifo", "fq_codel"]
    assert "failed on fq_codel: the forwarder stopped" in err and len(err.strip().splitlines()) == 1, err
    assert (top / "pfifo" / "summary.json").exists()
    assert not (top / "fq_codel").exists() and not (top / "cake").exists()
