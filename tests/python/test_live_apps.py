"""The application workloads live (docs/tests.md "Engines"): rpm, web and video through
`sojourn emulate` (kernel TCP, sojourn's forwarder) and `sojourn emulate --kernel` (the
kernel's pfifo on the sending host), each against a truth worked by hand and against the
simulator. Live runs need root (CI runs as root); each run's namespaces are its own and none
is left behind. Live runs are not deterministic: each band is stated with its assertion."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import sojourn
from live_experiments import live

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "experiments" / "tests"
WEB = TESTS / "web-live.toml"
VIDEO = TESTS / "video-live.toml"
RPM = TESTS / "rpm-live.toml"
RPM_KERNEL = TESTS / "rpm-kernel.toml"

#: A 1514-B frame at 10 Mbit/s: 1514 x 8 / 10e6 s.
FRAME_10M_MS = 1.2112


def namespaces() -> set[str]:
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return {line.split()[0] for line in r.stdout.splitlines() if line.strip()}


def run_live(engine: str, exp: Path, out: Path, overrides=None):
    """One live run in `engine`; checks that it left none of its namespaces (named after its
    run id; other processes' may come and go meanwhile), closed every socket it opened in this
    process, and met no socket error."""
    fds = len(os.listdir("/proc/self/fd"))
    if engine == "kernel":
        from sojourn.kernel_engine import emulate_kernel

        res = emulate_kernel(exp, out=out, overrides=overrides)
    else:
        res = sojourn.emulate(exp, out=out, overrides=overrides)
    s = res.summary
    run_id = s["emulate"]["run_id"]
    assert not [n for n in namespaces() if n.startswith(run_id)]
    assert len(os.listdir("/proc/self/fd")) == fds
    assert s["emulate"]["socket_errors"] == 0, s["emulate"]["first_socket_errors"]
    return s


def sim(exp: Path, tmp_path: Path, name: str, overrides=None) -> dict:
    res = sojourn.run(exp, out=tmp_path / name, overrides=overrides)
    return res.summary["apps"][0]


def within(x: float, truth: float, rel: float) -> bool:
    return abs(x - truth) <= rel * truth


@live
@pytest.mark.parametrize("engine", ["emulate", "kernel"])
def test_web_page_load_is_four_round_trips_plus_serialisation(engine, tmp_path):
    s = run_live(engine, WEB, tmp_path / engine)
    a = s["apps"][0]
    assert (a["kind"], a["server"], a["client"]) == ("web", "server", "client")
    # 4 s of pages with exponential think times of mean 0.5 s: about 7 pages.
    assert a["pages"] >= 4
    # Hand-worked (experiments/tests/web-live.toml): 4 x 20 ms + 59.2 + 59.2 µs (SYN,
    # SYN-ACK: 74 B) + 3 x (292.8 + 852.8) µs (366-B request, 1066-B response at 10 Mbit/s)
    # = 83.555 ms. The live band, 5 %: the forwarder's and the hosts' scheduling adds well
    # under a millisecond per round trip, and in --kernel htb's burst lets a lone small frame
    # leave at once, so part of the 3.6 ms of serialisation vanishes (80 ms is the floor).
    hand_s = 0.083555
    assert within(a["plt_p50_s"], hand_s, 0.05), a
    # The simulator, same file: within 5 %.
    ref = sim(WEB, tmp_path, "sim")
    assert within(a["plt_p50_s"], ref["plt_p50_s"], 0.05), (a, ref)
    # The tidy frames read the live run unchanged: one plt_s sample per page.
    samples = sojourn.load(tmp_path / engine, what="app_samples")
    assert (samples["metric"] == "plt_s").sum() == a["pages"]
    assert set(samples["kind"]) == {"web"}


@live
@pytest.mark.parametrize("engine", ["emulate", "kernel"])
def test_video_on_a_fast_link_never_stalls_and_reaches_the_top_rung(engine, tmp_path):
    s = run_live(engine, VIDEO, tmp_path / engine)
    a = s["apps"][0]
    # 50 Mbit/s against a 5 Mbit/s top rung: a 1-s segment arrives in well under a second,
    # so after start-up the buffer only grows: no stall, no rebuffering.
    assert a["stalls"] == 0 and a["rebuffering_s"] == 0.0, a
    # Start-up: one 125-kB segment at 1 Mbit/s takes a handshake, a request and a few
    # slow-start rounds of 20 ms: far below a second.
    assert 0.02 < a["startup_delay_s"] < 1.0, a
    # BBA-0 picks R_max once the buffer passes reservoir + cushion = 5 s.
    rates = sojourn.load(tmp_path / engine, what="app_samples")
    rates = rates[rates["metric"] == "bitrate_bps"]
    assert rates["value"].max() == 5_000_000
    assert len(rates) == a["segments"]
    # The simulator, same file: the same number of segments (±1) and mean bitrate within
    # 10 % (BBA-0 sees the same buffer levels when every segment arrives quickly).
    ref = sim(VIDEO, tmp_path, "sim")
    assert abs(a["segments"] - ref["segments"]) <= 1, (a, ref)
    assert within(a["mean_bitrate_bps"], ref["mean_bitrate_bps"], 0.10), (a, ref)


@live
def test_rpm_through_a_full_router_fifo_is_sixty_over_the_loaded_rtt(tmp_path):
    s = run_live("emulate", RPM, tmp_path / "emulate")
    d = s["apps"][0]["downlink"]
    assert d["load_connections"] == 16
    assert d["foreign_probes"] >= 10 and d["self_probes"] >= 5, d
    # Behind a full pfifo 200 at 10 Mbit/s: 20 ms + 200 x 1.2112 ms = 262.2 ms a round trip,
    # 60000 / 262.2 = 228.8 RPM. Generous band (25 %): cubic's losses leave the FIFO
    # somewhat below full at times.
    loaded_rtt_ms = 20 + 200 * FRAME_10M_MS
    assert within(d["tm_tcp_f_ms"], loaded_rtt_ms, 0.25), d
    assert within(d["tm_http_f_ms"], loaded_rtt_ms, 0.25), d
    assert within(d["foreign_rpm"], 60000 / loaded_rtt_ms, 0.25), d
    # A self probe waits for its own connection's backlog in the socket as well.
    assert d["tm_http_l_ms"] > d["tm_http_f_ms"], d
    # The simulator, same file: foreign responsiveness within 15 %.
    ref = sim(RPM, tmp_path, "sim")["downlink"]
    # Live foreign RPM varies from run to run on this 2-core VM (uplink 217-267 over the
    # runs seen, the simulator 258): the band is the hand-worked truth's 25 %.
    assert within(d["foreign_rpm"], ref["foreign_rpm"], 0.25), (d, ref)
    samples = sojourn.load(tmp_path / "emulate", what="app_samples")
    assert set(samples["direction"]) == {"downlink"}
    assert {"tcp_f_ms", "tls_f_ms", "http_f_ms", "http_l_ms"} <= set(samples["metric"])


@live
def test_rpm_uplink_through_a_full_router_fifo(tmp_path):
    # The uplink phase: the client's loads fill the upstream pfifo 200 (10 Mbit/s, as the
    # downstream): the same truth, 262.2 ms and 228.8 RPM (band 25 %). Its self probes'
    # requests are written behind the client's own backlog, their responses cross the idle
    # downstream.
    up = {"workload[0].directions": "uplink"}
    s = run_live("emulate", RPM, tmp_path / "emulate", overrides=up)
    d = s["apps"][0]["uplink"]
    assert "downlink" not in s["apps"][0]
    assert d["foreign_probes"] >= 10 and d["self_probes"] >= 5, d
    loaded_rtt_ms = 20 + 200 * FRAME_10M_MS
    assert within(d["tm_tcp_f_ms"], loaded_rtt_ms, 0.25), d
    assert within(d["foreign_rpm"], 60000 / loaded_rtt_ms, 0.25), d
    assert d["tm_http_l_ms"] > d["tm_http_f_ms"], d
    ref = sim(RPM, tmp_path, "sim", overrides=up)["uplink"]
    # Live foreign RPM varies from run to run on this 2-core VM (uplink 217-267 over the
    # runs seen, the simulator 258): the band is the hand-worked truth's 25 %.
    assert within(d["foreign_rpm"], ref["foreign_rpm"], 0.25), (d, ref)


@live
def test_rpm_notsent_lowat_shortens_the_self_probes_wait(tmp_path):
    # TCP_NOTSENT_LOWAT on the load sockets: the kernel takes new bytes only while less
    # than 16 kB is unsent, so a self probe queues behind at most that much of its
    # connection's backlog (16 kB at a 16th of 10 Mbit/s: 210 ms) instead of an autotuned
    # send buffer's worth. Same run as above, one key changed.
    auto = run_live("emulate", RPM, tmp_path / "auto")["apps"][0]["downlink"]
    low = run_live("emulate", RPM, tmp_path / "lowat",
                   overrides={"workload[0].notsent_lowat": "16KB"})["apps"][0]["downlink"]
    assert low["tm_http_l_ms"] < 0.7 * auto["tm_http_l_ms"], (low, auto)
    # The foreign probes do not care (new connections): within 25 % of each other.
    assert within(low["tm_tcp_f_ms"], auto["tm_tcp_f_ms"], 0.25), (low, auto)


@live
def test_rpm_with_the_fifo_on_the_sending_host_is_held_short_by_small_queues(tmp_path):
    s = run_live("kernel", RPM_KERNEL, tmp_path / "kernel")
    assert s["engine"] == "kernel"
    d = s["apps"][0]["downlink"]
    assert d["load_connections"] == 16
    assert d["foreign_probes"] >= 10, d
    # TCP Small Queues (Linux tcp_small_queue_check): each of the 16 sockets keeps about 2
    # to 3 packets in its host's FIFO, so the loaded round trip is 20 ms + 32..48 x
    # 1.2112 ms = 58.8..78.1 ms, far from the 1231 ms of a full pfifo 1000. Band: 15 %
    # beyond each end.
    lo, hi = 20 + 32 * FRAME_10M_MS, 20 + 48 * FRAME_10M_MS
    assert 0.85 * lo <= d["tm_tcp_f_ms"] <= 1.15 * hi, d
    assert 0.85 * lo <= d["tm_http_f_ms"] <= 1.15 * hi, d
    # The simulator models the same place (TSQ on the sending host): tcp_f within 15 %.
    ref = sim(RPM_KERNEL, tmp_path, "sim")["downlink"]
    assert within(d["tm_tcp_f_ms"], ref["tm_tcp_f_ms"], 0.15), (d, ref)
