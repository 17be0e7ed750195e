"""`sojourn deploy threshold --watch`: parsing conntrack's table, the two policies' decisions
against hand-computed schedules and the M/G/1 scale law, and live in namespaces: a workload
whose sizes change mid-run, the threshold following it, the map never half-written."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import _local  # noqa: F401  (this worktree's python/sojourn first)
from sojourn import deploy
from sojourn.deploy import apply as deploy_apply
from sojourn.deploy import watch as deploy_watch

ROOT = Path(__file__).resolve().parents[2]
AGE = ROOT / "experiments" / "repro" / "age-based" / "age-1g.toml"

# Lines as conntrack 1.4.7 prints them (`conntrack -L -p tcp -o extended,id`), captured here.
TIME_WAIT = ("ipv4     2 tcp      6 119 TIME_WAIT src=127.0.0.1 dst=127.0.0.1 sport=60028 dport=5555 packets=6 "
             "bytes=50320 src=127.0.0.1 dst=127.0.0.1 sport=5555 dport=60028 packets=3 bytes=164 [ASSURED] mark=0 "
             "use=1 id=622806268")
ESTABLISHED = TIME_WAIT.replace("119 TIME_WAIT", "431999 ESTABLISHED")


def test_finished_connections_are_read_with_the_maps_counting():
    assert deploy_watch.parse_entry(TIME_WAIT) == (622806268, 50320 + 164)  # ct bytes: both directions
    assert deploy_watch.parse_entry(TIME_WAIT, original_only=True) == (622806268, 50320)
    assert deploy_watch.parse_entry(ESTABLISHED) is None  # still running: its size is not final
    assert deploy_watch.parse_entry(TIME_WAIT.replace(" [ASSURED]", "")) is None  # never saw a reply
    assert deploy_watch.parse_entry(TIME_WAIT.replace("TIME_WAIT", "CLOSE")) == (622806268, 50484)  # reset


def test_hysteresis_band():
    assert not deploy_watch.outside_band(100000, 110000, 0.2)
    assert not deploy_watch.outside_band(100000, 120000, 0.2)  # the band's edge is inside
    assert deploy_watch.outside_band(100000, 120001, 0.2)
    assert deploy_watch.outside_band(100000, 79999, 0.2)


def test_median_policy_follows_a_hand_computed_schedule():
    written = []
    w = deploy_watch.Watcher("median", 6331208, written.append, None)
    schedule = [  # (sizes finished in that second, the map's threshold after it)
        ([10000, 30000, 20000], 20000),
        ([], 20000),                       # nothing finished: kept
        ([100000, 400000], 250000),        # even count: the mean of the middle two
        ([250000], 250000),                # unchanged: no rewrite
        ([5, 7, 1000, 9, 3], 7),
    ]
    for k, (sizes, want) in enumerate(schedule, 1):
        for s in sizes:
            w.feed(1000.0 + k - 0.5, s)
        d = w.tick(1000.0 + k, float(k))
        assert d.threshold_bytes == want, (k, d)
    assert written == [20000, 250000, 7]  # the map was rewritten three times only


def test_mg1_optimum_scales_with_the_sizes_at_equal_load():
    # M/G/1 in byte-times: sizes c·X at the same load give response times c·T, so the optimal
    # 2LPS threshold is c times the one for X (a law of the model, not of the code).
    base = [3000, 5000, 8000, 12000, 20000, 30000, 50000, 80000, 150000, 400000] * 3
    rate = sum(base) * 8 / 10.0 / 0.5  # load 0.5 over a 10 s window
    load_a, a = deploy_watch.mg1_candidate(base, 10.0, rate)
    load_b, b = deploy_watch.mg1_candidate([10 * s for s in base], 10.0, 10 * rate)
    assert load_a == pytest.approx(load_b) and 0 < load_a < 1
    assert b / a == pytest.approx(10, rel=0.02)
    # and the optimum is a real threshold between the smallest and the largest size
    assert 3000 < a < 400000


def test_mg1_keeps_the_map_inside_the_band_and_moves_it_outside():
    base = [3000, 5000, 8000, 12000, 20000, 30000, 50000, 80000, 150000, 400000] * 3
    rate = sum(base) * 8 / 10.0 / 0.5  # load 0.5 over a 10 s window
    _, opt = deploy_watch.mg1_candidate(base, 10.0, rate)
    for start, moved in ((int(opt * 1.1), False), (int(opt * 2), True)):
        written = []
        w = deploy_watch.Watcher("mg1", start, written.append, rate, window_s=10.0, hysteresis=0.2, min_flows=20)
        for s in base:
            w.feed(995.0, s)
        d = w.tick(1000.0, 10.0)  # ten seconds into the watch: the whole window counts
        assert d.load == pytest.approx(0.5)
        assert d.updated is moved and written == ([d.candidate_bytes] if moved else [])
        assert d.threshold_bytes == (d.candidate_bytes if moved else start)
    # one size only (a degenerate law: no threshold between sizes): kept, no crash
    w = deploy_watch.Watcher("mg1", 1234, written.append, rate, min_flows=20)
    for _ in range(30):
        w.feed(999.0, 20640)
    d = w.tick(1000.0, 10.0)
    assert not d.updated and d.threshold_bytes == 1234 and "one size only" in d.reason
    # too few connections: kept
    w = deploy_watch.Watcher("mg1", 1234, written.append, rate, min_flows=20)
    w.feed(999.0, 5000)
    d = w.tick(1000.0, 10.0)
    assert not d.updated and d.threshold_bytes == 1234 and "fewer than 20" in d.reason


# -------- live ------------------------------------------------------------------------------

live = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("conntrack"),
                          reason="needs root, nft and conntrack (Debian packages nftables, conntrack)")

SERVER = """
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.78.0.2", 5201)); s.listen(64); s.settimeout(30)
print("ready", flush=True)
def serve(c):
    c.settimeout(10)
    while c.recv(65536):
        pass
    c.close()
while True:
    try:
        c, _ = s.accept()
    except OSError:
        break
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""
CLIENT = """
import socket, sys, time
# phase A: 20 kB uploads every 50 ms for 4.5 s; phase B: 200 kB uploads every 100 ms for 5 s
t0 = time.monotonic()
for size, gap, until in ((20000, 0.05, 4.5), (200000, 0.1, 9.5)):
    while time.monotonic() - t0 < until:
        c = socket.create_connection(("10.78.0.2", 5201), timeout=10)
        c.sendall(b"x" * size); c.shutdown(socket.SHUT_WR); c.recv(1); c.close()
        time.sleep(gap)
"""


@live
def test_the_median_threshold_follows_a_changing_workload_and_the_map_is_never_half_written():
    cls = [{"at": "client", "hook": "output", "map": [{"upto": 6331208, "priority": "1:6"}, {"priority": "1:0"}]}]
    ov = {"topology.links[0].qdisc": "pfifo_fast", "classifier": cls}
    p = deploy.plan(AGE, "client", "sja", overrides=ov, device_rate="10Gbit")
    maps: list[str] = []
    stop = threading.Event()
    with deploy.Netns() as client, deploy.Netns() as server:
        client.ip("link", "del", "sja")
        server.ip("link", "del", "sja")
        client.ip("link", "add", "sja", "type", "veth", "peer", "name", "sjb", "netns", server.name)
        client.ip("addr", "add", "10.78.0.1/24", "dev", "sja")
        client.ip("link", "set", "sja", "up")
        server.ip("addr", "add", "10.78.0.2/24", "dev", "sjb")
        server.ip("link", "set", "sjb", "up")
        deploy_apply.apply(p, client.name)

        def poll() -> None:  # what a packet could see at any moment: the table's map
            while not stop.is_set():
                maps.append(client.exec("nft", "list", "table", "inet", p.table).stdout)
                time.sleep(0.01)

        poller = threading.Thread(target=poll)
        srv = subprocess.Popen(["ip", "netns", "exec", server.name, sys.executable, "-c", SERVER],
                               stdout=subprocess.PIPE, text=True)
        out: list[deploy_watch.Decision] = []
        try:
            assert srv.stdout.readline().strip() == "ready"
            poller.start()
            watcher = threading.Thread(target=lambda: out.extend(deploy_watch.watch(
                AGE, "client", "sja", netns=client.name, policy="median", duration_s=10.0, overrides=ov,
                device_rate="10Gbit")))
            watcher.start()
            r = client.exec(sys.executable, "-c", CLIENT)
            assert r.returncode == 0, r.stderr
            watcher.join(timeout=30)
        finally:
            stop.set()
            if poller.is_alive():
                poller.join()
            srv.kill()
            srv.wait()
    lines = [json.loads(d.json()) for d in out]
    assert len(lines) == 10 and all(d["policy"] == "median" for d in lines)
    # ct bytes of a 20,000-byte upload: payload + headers of both directions (a few dozen
    # packets of 52-66 header bytes), so a little above 20,000; of 200,000: above 200,000
    phase_a = [d["threshold_bytes"] for d in lines if 2 <= d["t_s"] <= 4]
    phase_b = [d["threshold_bytes"] for d in lines if 8 <= d["t_s"] <= 10]
    assert phase_a and all(20000 < t < 24000 for t in phase_a), lines
    assert phase_b and all(200000 < t < 215000 for t in phase_b), lines
    # every listing taken during the run holds one complete map: two ranges covering every count
    assert len(maps) > 50
    thresholds = set()
    for text in maps:
        m = re.findall(r"meta priority set ct bytes map \{ 0-(\d+) : 1:6, (\d+)-18446744073709551615 : 1:0 \}", text)
        assert len(m) == 1, text
        lo, hi = int(m[0][0]), int(m[0][1])
        assert hi == lo + 1
        thresholds.add(lo)
    assert {t for t in thresholds if 20000 < t < 24000} and {t for t in thresholds if 200000 < t < 215000}
