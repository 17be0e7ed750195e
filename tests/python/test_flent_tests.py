"""Flent's named tests, latency probes, VoIP metrics and the E-model (issue 37;
python/sojourn/flent_tests.py, emodel.py, probes.py, analysis/{flent_export,flent_plots}.py,
docs/tests.md). Truths are literals worked by hand in the comments."""
from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sojourn
from sojourn.emodel import CODECS, idd, ie_eff, mos_from_r, r_factor, rfc3550_jitter
from sojourn.flent_tests import expand
from sojourn.probes import voip_metrics

ROOT = Path(__file__).resolve().parents[2]
RRUL = ROOT / "experiments" / "tests" / "rrul-pfifo.toml"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sojourn", *args], capture_output=True, text=True, cwd=ROOT)


# ------------------------------------------------------------------------------------
# E-model (ITU-T G.107) and RFC 3550 jitter at literal points
# ------------------------------------------------------------------------------------


def test_default_r_is_93_2_and_its_mos_4_41():
    # Annex B: 1 + 0.035*93.2 + 93.2*(93.2-60)*(100-93.2)*7e-6 = 1 + 3.262 + 0.14729 = 4.409
    assert r_factor(0.0, 0.0) == pytest.approx(93.2)
    assert round(mos_from_r(93.2), 2) == 4.41
    assert mos_from_r(-5.0) == 1.0 and mos_from_r(120.0) == 4.5


def test_delay_impairment_at_two_literal_points():
    # Up to 100 ms Idd = 0.
    assert idd(100.0) == 0.0 and idd(40.0) == 0.0
    # Ta = 200 ms: X = log2(2) = 1; Idd = 25*((1+1)^(1/6) - 3*(1+(1/3)^6)^(1/6) + 2)
    #   = 25*(1.122462 - 3*1.000228 + 2) = 25*0.121777 = 3.0444; R = 90.156, MOS = 4.343.
    assert idd(200.0) == pytest.approx(3.0444, abs=1e-4)
    assert r_factor(200.0, 0.0) == pytest.approx(90.1556, abs=1e-3)
    assert mos_from_r(r_factor(200.0, 0.0)) == pytest.approx(4.343, abs=1e-3)
    # Ta = 400 ms: X = 2; (1+64)^(1/6) = 2.005175; (1+(2/3)^6)^(1/6) = 1.0877915^(1/6) = 1.014124;
    #   Idd = 25*(2.005175 - 3.042373 + 2) = 25*0.962802 = 24.070; R = 69.130, MOS = 3.556.
    assert idd(400.0) == pytest.approx(24.070, abs=1e-3)
    assert mos_from_r(r_factor(400.0, 0.0)) == pytest.approx(3.556, abs=1e-3)


def test_loss_impairment_at_two_literal_points():
    g711 = CODECS["g711"]  # G.113 Appendix I: Ie = 0, Bpl = 25.1 (with PLC)
    assert (g711.ie, g711.bpl, g711.interval_ns, g711.payload_bytes) == (0.0, 25.1, 20_000_000, 160)
    # Ppl = 1 %, random loss (BurstR = 1): Ie,eff = 0 + 95*1/(1 + 25.1) = 95/26.1 = 3.6398;
    #   R = 89.560, MOS = 4.328.
    assert ie_eff(1.0, 0.0, 25.1) == pytest.approx(3.6398, abs=1e-4)
    assert mos_from_r(r_factor(0.0, 1.0)) == pytest.approx(4.328, abs=1e-3)
    # Ppl = 5 %: Ie,eff = 95*5/(5 + 25.1) = 475/30.1 = 15.781; R = 77.419, MOS = 3.923.
    assert ie_eff(5.0, 0.0, 25.1) == pytest.approx(15.781, abs=1e-3)
    assert mos_from_r(r_factor(0.0, 5.0)) == pytest.approx(3.923, abs=1e-3)
    with pytest.raises(ValueError):
        ie_eff(101.0, 0.0, 25.1)


def test_rfc3550_jitter_on_a_literal_sequence_of_transit_times():
    # Transit times 10, 12, 11, 15, 15 (sent every 20): |D| = 2, 1, 4, 0 and J += (|D| - J)/16:
    #   2/16 = 0.125; 0.125 + (1 - 0.125)/16 = 0.1796875; + (4 - 0.1796875)/16 = 0.41845703125;
    #   + (0 - 0.41845703125)/16 = 0.392303466796875.
    sent = [0, 20, 40, 60, 80]
    recv = [s + t for s, t in zip(sent, [10, 12, 11, 15, 15])]
    assert rfc3550_jitter(sent, recv) == 0.392303466796875
    assert rfc3550_jitter([0], [10]) is None


def test_a_late_datagram_behind_the_jitter_buffer_counts_as_lost():
    # One-way delays 50, 50, 120, 55 ms and one lost; a 60-ms buffer plays out at 50 + 60 =
    # 110 ms: the 120-ms datagram is late. Loss 1/5 in the network, 2/5 with the buffer;
    # mouth-to-ear 110 + 20 (one frame) = 130 ms: X = log2(1.3) = 0.378512, X^6 = 0.0029409,
    # (1 + X^6)^(1/6) = 1.0004895, (X/3)^6 = 4.03e-6 -> 3*1.0000007 = 3.0000020;
    # Idd = 25*(1.0004895 - 3.0000020 + 2) = 25*0.0004875 = 0.0122;
    # Ie,eff = 95*40/(40 + 25.1) = 58.3717; R = 93.2 - 0.0122 - 58.3717 = 34.816;
    # MOS = 1 + 0.035*34.816 + 34.816*(-25.184)*65.184*7e-6 = 1 + 1.21856 - 0.40008 = 1.818.
    sent = np.arange(5) * 20e6
    owd = np.array([50e6, 50e6, 120e6, 55e6, np.nan])
    m = voip_metrics(sent, owd, 20_000_000, 60_000_000)
    assert (m["count"], m["lost"], m["late"]) == (5, 1, 1)
    assert m["loss"] == 0.2 and m["loss_with_buffer"] == 0.4
    assert m["mouth_to_ear_ms"] == 130.0
    assert m["r"] == pytest.approx(34.816, abs=1e-3)
    assert m["mos"] == pytest.approx(1.818, abs=1e-3)


# ------------------------------------------------------------------------------------
# the named tests as workloads
# ------------------------------------------------------------------------------------


def test_rrul_expands_into_flents_eight_marked_flows_and_four_probes():
    cfg = {"topology": {"kind": "dumbbell", "pairs": 1}, "workload": [{"kind": "rrul"}]}
    wl = expand(cfg)["workload"]
    bulk = [w for w in wl if w["kind"] == "bulk"]
    # Flent's rrul: CS0 (BE), CS1 (BK), CS5, EF each way; CS1 = 8, CS5 = 40 (RFC 2474 class
    # selectors 8n), EF = 46 (RFC 3246).
    up = [(w["test"]["series"], w.get("dscp", 0)) for w in bulk if (w["from"], w["to"]) == ("d0", "s0")]
    down = [(w["test"]["series"], w.get("dscp", 0)) for w in bulk if (w["from"], w["to"]) == ("s0", "d0")]
    assert up == [("TCP upload BE", 0), ("TCP upload BK", 8), ("TCP upload CS5", 40), ("TCP upload EF", 46)]
    assert down == [("TCP download BE", 0), ("TCP download BK", 8), ("TCP download CS5", 40), ("TCP download EF", 46)]
    pings = [(w["protocol"], w.get("dscp", 0), w["interval"], w["test"]["series"]) for w in wl if w["kind"] == "ping"]
    assert pings == [("udp", 46, "200ms", "Ping (ms) UDP EF"), ("udp", 8, "200ms", "Ping (ms) UDP BK"),
                     ("udp", 0, "200ms", "Ping (ms) UDP BE"), ("icmp", 0, "200ms", "Ping (ms) ICMP")]
    assert expand(cfg)["record"] == {"interval": "200ms", "flows": True}
    assert cfg["workload"] == [{"kind": "rrul"}]  # the caller's dict is left alone


def test_each_named_test_validates():
    for name in ("rrul", "rrul_be", "tcp_nup", "tcp_ndown", "tcp_upload", "tcp_download", "voip", "game"):
        plan = sojourn.validate(RRUL, overrides={"workload": [{"kind": name}]})
        assert plan, name
    plan = sojourn.validate(RRUL, overrides={"topology.pairs": 2, "topology.pair_delays": ["0ms", "10ms"],
                                             "workload": [{"kind": "rtt_fair"}]})
    assert plan


@pytest.fixture(scope="module")
def rrul_runs(tmp_path_factory):
    """rrul at 100 Mbit/s each way, 20 ms base RTT, 30 s: pfifo 1000 and fq_codel."""
    out = {}
    for q in ("pfifo", "fq_codel"):
        d = tmp_path_factory.mktemp(q)
        ov = {} if q == "pfifo" else {"topology.bottleneck.qdisc": "fq_codel", "topology.reverse.qdisc": "fq_codel"}
        sojourn.run(RRUL, overrides=ov, out=d)
        out[q] = d
    return out


def _icmp(d: Path) -> dict:
    s = json.loads((d / "summary.json").read_text())
    return next(v for v in s["probes"].values() if v["mode"] == "icmp")


def test_rrul_through_pfifo_1000_bloats_the_rtt_by_a_full_queue(rrul_runs):
    # A full FIFO of 1000 packets of 1514 B at 100 Mbit/s holds 1000 x 121.12 us = 121 ms:
    # the probes' RTT reaches 20 ms + 121 ms = 141 ms (+-10 %) when the queue is full (its
    # p99; drop-tail's sawtooth keeps the mean lower, docs/tests.md).
    p99 = _icmp(rrul_runs["pfifo"])["rtt_ms"]["p99"]
    assert 141 * 0.9 <= p99 <= 141 * 1.1, p99
    # The download's one-way delay cannot exceed 10 ms + a full queue (+ one frame being
    # sent and the access links: 0.3 ms).
    s = json.loads((rrul_runs["pfifo"] / "summary.json").read_text())
    udp = [v for v in s["probes"].values() if v["mode"] == "udp"]
    assert all(v["owd_down_ms"]["max"] <= 10 + 121.12 + 0.3 for v in udp)


def test_rrul_through_fq_codel_keeps_the_probes_near_the_base_rtt_and_fills_both_links(rrul_runs):
    icmp = _icmp(rrul_runs["fq_codel"])
    # Sparse flows go first (RFC 8290 §1.3, §4.1.1): the probes see the 20-ms base RTT,
    # plus at most a few ms.
    assert 20.0 <= icmp["rtt_ms"]["median"] <= 23.0 and icmp["rtt_ms"]["p99"] <= 25.0, icmp
    assert icmp["loss"] == 0.0
    s = json.loads((rrul_runs["fq_codel"] / "summary.json").read_text())
    t = s["tests"]["workload[0]"]
    # Goodput of each direction's four flows, >= 90 % of the 100-Mbit/s link (headers take
    # 66 of 1514 B, the other direction's ACKs a little more).
    assert t["download_bps"] >= 90e6 and t["upload_bps"] >= 90e6, t
    for link in ("bottleneck", "reverse"):
        assert s["links"][link]["utilisation"] >= 0.95


def test_probe_outputs_are_byte_identical_for_the_same_seed(rrul_runs, tmp_path):
    again = tmp_path / "again"
    sojourn.run(RRUL, out=again)
    for f in ("probes.parquet", "summary.json", "flows.parquet"):
        assert (again / f).read_bytes() == (rrul_runs["pfifo"] / f).read_bytes(), f


def test_load_reads_the_probes(rrul_runs):
    r = sojourn.Result.read(rrul_runs["pfifo"])
    p = r.probes
    assert list(p.columns) == ["time_s", "workload", "flow", "mode", "seq", "rtt_ns", "owd_up_ns", "owd_down_ns", "lost"]
    # 30 s of probes every 200 ms, less the last second: 145 per probe workload, 4 workloads.
    assert len(p) == 4 * 145
    assert set(p["mode"]) == {"icmp", "udp"}


def test_tidy_load_reads_the_probes_of_a_sweep(tmp_path):
    sweep = (ROOT / "experiments" / "tests" / "rrul-compare.sweep.toml").read_text()
    short = tmp_path / "short.sweep.toml"
    short.write_text(sweep.replace('duration = "60s"', 'duration = "4s"').replace('warmup = "5s"', 'warmup = "1s"'))
    r = cli("sweep", str(short), "--out", str(tmp_path / "s"), "--quiet")
    assert r.returncode == 0, r.stderr
    p = sojourn.load(tmp_path / "s", what="probes")
    # 4 s of probes every 200 ms less the last second: 15 per probe workload, 4 per run, 3 runs.
    assert len(p) == 3 * 4 * 15 and set(p["point"]) == {"pfifo", "fq_codel", "cake"}
    assert {"seed", "rtt_ns", "after_warmup"} <= set(p.columns)
    plain = tmp_path / "plain"
    sojourn.run(ROOT / "experiments" / "examples" / "cbr-fifo-underload.toml", duration="2s", out=plain)
    assert sojourn.load(plain, what="probes").empty


def test_the_report_shows_flents_plots(rrul_runs, tmp_path):
    from sojourn.analysis.htmlreport import write_report

    page = write_report([rrul_runs["pfifo"], rrul_runs["fq_codel"]], out=tmp_path / "r.html").read_text()
    for k in ("flent-totals", "ping-cdf", "box-totals"):
        assert f"id='{k}'" in page


def test_flent_export_of_rrul_is_drawn_by_flent(rrul_runs, tmp_path):
    r = cli("flent", str(rrul_runs["fq_codel"]), "-o", str(tmp_path / "rrul.flent.gz"))
    assert r.returncode == 0, r.stderr
    obj = json.loads(gzip.open(tmp_path / "rrul.flent.gz", "rt").read())
    assert obj["metadata"]["NAME"] == "rrul"
    res = obj["results"]
    for k in ("TCP upload BE", "TCP download EF", "TCP upload sum", "TCP download sum", "TCP totals",
              "Ping (ms) ICMP", "Ping (ms) UDP EF", "Ping (ms) avg"):
        assert k in res and any(v is not None for v in res[k]), k
    # The sums are the sums of the four flows at every sample.
    i = len(obj["x_values"]) // 2
    four = [res[f"TCP download {m}"][i] for m in ("BE", "BK", "CS5", "EF")]
    assert res["TCP download sum"][i] == pytest.approx(sum(four))
    pytest.importorskip("flent", reason="flent not installed (pip install '.[test]' brings it)")
    for plot in ("all_scaled", "ping_cdf", "box_totals"):
        png = tmp_path / f"{plot}.png"
        p = subprocess.run([sys.executable, "-m", "flent", "-i", str(tmp_path / "rrul.flent.gz"), "-p", plot, "-o", str(png)],
                           capture_output=True, text=True, cwd=tmp_path)
        assert p.returncode == 0 and png.exists() and png.stat().st_size > 10_000, (plot, p.stdout, p.stderr)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sojourn_test_runs_voip_and_prints_its_mos(tmp_path):
    r = cli("test", "voip", "--rate", "10Mbit/2Mbit", "--rtt", "40ms", "--qdisc", "fq_codel", "--duration", "6s",
            "--warmup", "1s", "--out", str(tmp_path / "v"))
    assert r.returncode == 0, r.stderr
    assert "voip MOS (worst stream)" in r.stdout and "VoIP up: jitter" in r.stdout
    s = json.loads((tmp_path / "v" / "summary.json").read_text())
    v = [x for x in s["probes"].values() if x["mode"] == "oneway"]
    # An idle path: one-way 20 ms + serialisations, no loss; Ta = 20.x + 60 (buffer) + 20
    # (one frame) ~ 100 ms, right at G.107's 100-ms knee: R ~ 93.2, MOS 4.41.
    assert len(v) == 2 and all(x["loss"] == 0.0 and round(x["mos"], 2) == 4.41 for x in v)
    assert (tmp_path / "v" / "voip-fq_codel.flent.gz").exists()


def test_rrul_under_load_costs_a_voip_call_on_a_fifo(tmp_path):
    # The same call beside rrul through pfifo 1000 at 10/2 Mbit/s: the upstream FIFO holds
    # up to 1000 x 6.056 ms = 6 s, far beyond the 60-ms buffer: the call is unusable (MOS
    # below 2), while fq_codel keeps it at least "fair" (above 3.6).
    base = {"duration": "20s", "warmup": "5s", "seed": 1, "name": "voip-rrul",
            "topology": {"kind": "dumbbell", "pairs": 1,
                         "bottleneck": {"rate": "10Mbit", "delay": "20ms", "qdisc": {"kind": "pfifo", "limit": 1000}},
                         "reverse": {"rate": "2Mbit", "qdisc": {"kind": "pfifo", "limit": 1000}},
                         "access": {"rate": "1Gbit", "delay": "0ms"}},
            "workload": [{"kind": "rrul"}, {"kind": "voip"}]}
    fifo = sojourn.run(base).summary["tests"]["workload[1]"]["mos"]
    fq = sojourn.run(base, overrides={"topology.bottleneck.qdisc": "fq_codel", "topology.reverse.qdisc": "fq_codel"})
    assert fifo < 2.0 and fq.summary["tests"]["workload[1]"]["mos"] > 3.6, (fifo, fq.summary["tests"])
    assert math.isfinite(fifo)
