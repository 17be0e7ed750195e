"""`sojourn emulate --kernel` for isp trees (docs/isp.md, "The other engines"): the kernel's
HTB trees on the run's router namespace with filters on the subscribers' live addresses,
against hand-worked HTB answers and the simulator on the same file. Refusals and plans run
everywhere; the live runs need root."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import _local  # noqa: F401  (this worktree's python/sojourn first)
import sojourn
from sojourn import kernel_engine, kernel_isp
from test_isp import LIVE4

ROOT = Path(__file__).resolve().parents[2]

live = pytest.mark.skipif(os.geteuid() != 0, reason="live runs need root and `ip netns` (CI runs as root)")

# test_isp.py's live tree (4 subscribers on 10 Mbit/s plans behind 40 Mbit/s, one CUBIC
# download each) with pfifo leaves: this kernel has no fq_codel.
FOUR = LIVE4.replace('leaf = { kind = "fq_codel" }', 'leaf = { kind = "pfifo", limit = 100 }')
assert FOUR != LIVE4


def _cfg(text: str) -> dict:
    return sojourn._config.tomllib.loads(text)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sojourn", *args], capture_output=True, text=True, cwd=ROOT)


def namespaces() -> set[str]:
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return {line.split()[0] for line in r.stdout.splitlines() if line.strip()}


def test_the_router_carries_both_trees_under_a_tbf_at_their_link_rates(tmp_path):
    ps = kernel_engine.plans(_cfg(FOUR), "four", tmp_path)
    # no line.qdisc: the two trees only, named by the routers deploy plans them for
    assert sorted(ps) == ["uplink", "upstream"]
    assert (ps["uplink"].node, ps["upstream"].node) == ("core", "access")
    tc = ps["uplink"].tc
    # the uplink's device: 40 Mbit/s, a one-packet (1514-B frame) bucket; the tree its child
    assert tc[0] == "tc qdisc replace dev eth0 root handle 9: tbf rate 40000000bit burst 1514b limit 30000"
    assert tc[1].startswith("tc qdisc replace dev eth0 parent 9:1 handle 1: htb")
    assert "classid 1:2 htb rate 10Mbit ceil 10Mbit" in "\n".join(tc)
    assert sum(" u32 match ip dst " in c for c in tc) == 4
    # the upstream: ONE tree for every subscriber (10 Mbit/s root, a source filter each)
    up = ps["upstream"].tc
    assert up[0].startswith("tc qdisc replace dev eth0 root handle 9: tbf rate 10000000bit ")
    assert "match ip src 100.64.0.3/32 flowid 1:4" in "\n".join(up)
    assert sum(" u32 match ip src " in c for c in up) == 4


def test_a_line_qdisc_goes_on_each_subscribers_own_device(tmp_path):
    text = FOUR.replace('line = { rate = "100Mbit" }', 'line = { rate = "100Mbit", qdisc = { kind = "pfifo", limit = 50 } }')
    ps = kernel_engine.plans(_cfg(text), "four", tmp_path)
    assert sorted(ps) == sorted([f"sub{i}.{d}" for i in range(4) for d in ("up", "down")] + ["uplink", "upstream"])
    # both directions of the line: the rate shaped by htb (a veth has none), the line's
    # discipline under it; planned for the node each leaves (the subscriber, its access router)
    assert (ps["sub2.up"].node, ps["sub2.down"].node) == ("sub2", "access")
    for line in (ps["sub2.up"].tc, ps["sub2.down"].tc):
        assert any("htb rate 100Mbit ceil 100Mbit" in c for c in line), line
        assert line[-1].endswith("pfifo limit 50"), line


def test_live_addresses_replace_the_planned_ones(tmp_path):
    p = kernel_isp.tree_plan(_cfg(FOUR), "core", "uplink", "vethX", tmp_path, {"sub1": "10.9.8.7"})
    text = "\n".join(p.tc)
    assert "match ip dst 10.9.8.7/32 flowid 1:3" in text  # sub1 holds the second class
    assert "match ip dst 100.64.0.1/32 flowid 1:2" in text  # sub0 not given: as planned


def test_the_forwarder_runs_the_tree_as_wires():
    w = kernel_engine.wire_config(_cfg(FOUR))
    t = w["topology"]
    assert t["uplink"]["rate"] == t["upstream"]["rate"] == t["line"]["rate"] == "1000Gbit"
    assert t["plans"] == [{"down": "1000Gbit", "up": "1000Gbit", "share": 1}]
    assert t["leaf"] == {"kind": "pfifo", "limit": 100000} and w["record"]["links"] == "none"
    # sites become wires too (a plan faster than its site would be refused)
    s = kernel_engine.wire_config(_cfg(SITES))["topology"]["sites"]
    assert s == {"count": 2, "rate": "1000Gbit", "up": "1000Gbit"}


def test_ipv6_is_refused_in_one_line(tmp_path):
    exp = tmp_path / "e.toml"
    text = FOUR.replace('[transport]\n', "[transport]\nip = 6\n")
    key = "transport.ip"
    assert text != FOUR
    exp.write_text(text)
    out = tmp_path / "out"
    r = cli("emulate", str(exp), "--kernel", "--out", str(out), "--quiet")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and "--kernel" in lines[0], r.stderr
    assert not out.exists()


@live
def test_a_leaf_this_kernel_lacks_is_refused_naming_its_config_option(tmp_path):
    from sojourn import deploy

    with deploy.Netns() as ns:
        if deploy.probe_qdiscs(ns)["fq_codel"]:
            pytest.skip("this kernel has fq_codel")
    exp = tmp_path / "e.toml"
    exp.write_text(FOUR.replace('leaf = { kind = "pfifo", limit = 100 }', 'leaf = { kind = "fq_codel" }'))
    out = tmp_path / "out"
    r = cli("emulate", str(exp), "--kernel", "--out", str(out), "--quiet")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "CONFIG_NET_SCH_FQ_CODEL" in lines[0], r.stderr
    assert not out.exists()


def _write(tmp_path: Path, text: str) -> Path:
    exp = tmp_path / "e.toml"
    exp.write_text(text)
    return exp


def _achieved(text: str, tmp_path: Path, direction: str):
    """``text`` run in the kernel and the simulator: (kernel, simulator) achieved payload
    rates by subscriber in ``direction``, and the kernel's result."""
    import pandas as pd

    exp = _write(tmp_path, text)
    forwarding = Path("/proc/sys/net/ipv4/ip_forward").read_text()
    res = sojourn.emulate(exp, kernel=True)
    # the root namespace untouched: its forwarding as it was, no device of the run in it
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text() == forwarding
    out = res.write(tmp_path / "kernel")
    k = pd.read_parquet(out / "subscribers.parquet")
    k = k[k.direction == direction].set_index("subscriber").achieved_bps
    sim = sojourn.run(exp).subscribers_table.to_pandas()
    sim = sim[sim.direction == direction].set_index("subscriber").achieved_bps
    # nothing left behind: the run's namespaces, its router's among them, are gone
    hosts = res.summary["kernel"]["hosts"]
    run = {h["namespace"].rsplit("-", 1)[0] for h in hosts.values()}
    assert len(run) == 1
    run_id = run.pop()
    assert run_id.startswith("sj")
    assert not {n for n in namespaces() if n.startswith(run_id + "-")}
    root = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert run_id not in root
    return k, sim, res


#: A 10 Mbit/s class of 1514-B frames carries 10e6 x 1448/1514 = 9.56 Mbit/s of TCP payload.
PAYLOAD = 1448 / 1514


def _each(n: int, bps: float) -> dict[str, float]:
    return {f"sub{i}": bps for i in range(n)}


def _check(k, sim, hand: dict[str, float], lo: float, hi: float, sim_tol: float) -> None:
    """Each subscriber's kernel rate within [lo, hi] x its hand-worked figure and within
    ``sim_tol`` of the simulator's."""
    assert sorted(k.index) == sorted(hand), k
    for sub, bps in k.items():
        assert lo * hand[sub] <= bps <= hi * hand[sub], (sub, bps, hand[sub])
        assert abs(bps - sim[sub]) <= sim_tol * sim[sub], (sub, bps, sim[sub])


@live
def test_four_subscribers_get_their_plans_in_the_kernel_as_in_the_simulator(tmp_path):
    k, sim, res = _achieved(FOUR, tmp_path, "down")
    # The simulator's CUBIC gets 99 % of 9.56 Mbit/s; the kernel's 91-92 % on this loaded
    # 2-core VM (the tbf standing for the 40 Mbit/s device loses the time its timer fires
    # late: docs/isp.md). Band: each subscriber within [0.8, 1.05] of 9.56 Mbit/s, and
    # within 15 % of the simulator's figure for it.
    _check(k, sim, _each(4, 10e6 * PAYLOAD), 0.80, 1.05, 0.15)
    s = res.summary
    assert s["engine"] == "kernel"
    hosts = s["kernel"]["hosts"]
    # the filters matched the live addresses, not the planned 100.64/10 ones
    assert hosts["uplink"]["namespace"].endswith("-rt") and hosts["uplink"]["node"] == "core"
    assert not any("100.64." in c for c in hosts["uplink"]["tc"])
    assert s["links"]["uplink"]["kernel_qdiscs"][0] == "tbf 9:"


# 4 subscribers on 10 Mbit/s up plans behind a 20 Mbit/s upstream, each uploading with CUBIC.
SHARED_UP = FOUR.replace('upstream = { rate = "10Mbit" }', 'upstream = { rate = "20Mbit" }').replace(
    'up = "2Mbit"', 'up = "10Mbit"').replace('between = "servers->subscribers"', 'between = "subscribers->servers"')
assert 'upstream = { rate = "20Mbit" }' in SHARED_UP and 'up = "10Mbit"' in SHARED_UP and "subscribers->servers" in SHARED_UP


@live
def test_the_subscribers_share_one_upstream(tmp_path):
    k, sim, res = _achieved(SHARED_UP, tmp_path, "up")
    # By hand (HTB): the 20 Mbit/s device is the bottleneck, no class gets its 10 Mbit/s
    # rate, so none runs out of its own tokens and equal quanta share the root: 5 Mbit/s
    # of frames each, 20 in all: 4.78 and 19.13 Mbit/s of payload. Each subscriber shaped
    # alone (the trees on their own devices) would get its 10 (38 in all). Measured: the
    # kernel 4.56 each (18.2 in all: the tbf's late timer, as downstream), the simulator
    # 4.75. Band: the sum within [0.85, 1.02] x 19.13, each within [0.85, 1.05] x 4.78 and
    # within 15 % of the simulator.
    assert 0.85 * 20e6 * PAYLOAD <= k.sum() <= 1.02 * 20e6 * PAYLOAD, k
    _check(k, sim, _each(4, 5e6 * PAYLOAD), 0.85, 1.05, 0.15)
    assert res.summary["links"]["upstream"]["kernel_qdiscs"][0] == "tbf 9:"


# Two servers (sub0, sub2 on server0; sub1, sub3 on server1), 4 subscribers on 20 Mbit/s
# plans behind 40 Mbit/s, one CUBIC download each.
SERVERS = FOUR.replace('subscribers = 4\n', 'subscribers = 4\nservers = 2\n').replace('down = "10Mbit"', 'down = "20Mbit"')
assert "servers = 2" in SERVERS and 'down = "20Mbit"' in SERVERS


# Two sites of 15 Mbit/s under a 40 Mbit/s uplink; 3 subscribers (sub0 and sub2 on site 0,
# sub1 on site 1), each a 5 Mbit/s plan that may borrow up to 15; a pfifo on each line.
SITES = FOUR.replace('subscribers = 4\n', 'subscribers = 3\nsites = { count = 2, rate = "15Mbit", up = "5Mbit" }\n').replace(
    'plans = [ { down = "10Mbit", up = "2Mbit", share = 1 } ]',
    'plans = [ { down = "5Mbit", ceil_down = "15Mbit", up = "1Mbit", share = 1 } ]').replace(
    'line = { rate = "100Mbit" }', 'line = { rate = "100Mbit", qdisc = { kind = "pfifo", limit = 50 } }')
assert "sites" in SITES and "ceil_down" in SITES and "limit = 50" in SITES


@live
def test_sites_bound_what_their_subscribers_borrow(tmp_path):
    k, sim, res = _achieved(SITES, tmp_path, "down")
    # By hand (HTB): the uplink (40) is not the bottleneck (the sites add up to 30). Each
    # class sends its own 5 Mbit/s, then borrows from its site up to the site's 15: site 0
    # splits its 15 between sub0 and sub2 (equal quanta: 7.5 each), site 1 gives sub1 all of
    # its 15. Flat (no sites) each would get 15. Payload: 7.17, 14.35, 7.17 Mbit/s.
    # Measured: kernel 7.14, 14.18, 7.09; simulator 7.09, 14.18, 7.14. Band: each within
    # [0.9, 1.05] of the hand figure and within 10 % of the simulator.
    _check(k, sim, {"sub0": 7.5e6 * PAYLOAD, "sub1": 15e6 * PAYLOAD, "sub2": 7.5e6 * PAYLOAD}, 0.90, 1.05, 0.10)
    # the line's pfifo on each subscriber's device carried its ACKs, the one on its IFB
    # (the access router's port towards it) its download
    links = res.summary["links"]
    for i in range(3):
        for d in ("up", "down"):
            assert "pfifo" in " ".join(links[f"sub{i}.{d}"]["kernel_qdiscs"])
        assert links[f"sub{i}.up"]["tx_packets"] > 0
        # its counters run from the set-up: at least the payload of the 3 measured seconds
        assert links[f"sub{i}.down"]["tx_bytes"] * 8 >= k[f"sub{i}"] * 3.0
    hosts = res.summary["kernel"]["hosts"]
    assert hosts["sub1.down"]["namespace"] == hosts["sub1.up"]["namespace"]
    assert hosts["sub1.down"]["device"] != hosts["sub1.up"]["device"]  # the IFB, not eth0


# Two access routers (sub0, sub2 on access0; sub1, sub3 on access1), each behind its own
# 20 Mbit/s uplink; 20 Mbit/s plans, one CUBIC download each.
ACCESS = FOUR.replace('subscribers = 4\n', 'subscribers = 4\naccess_routers = 2\n').replace(
    'uplink = { rate = "40Mbit" }', 'uplink = { rate = "20Mbit" }').replace('down = "10Mbit"', 'down = "20Mbit"')
assert "access_routers = 2" in ACCESS and 'uplink = { rate = "20Mbit" }' in ACCESS


@live
@pytest.mark.parametrize("which", ["servers", "access"])
def test_equal_quanta_share_each_device(tmp_path, which):
    k, sim, res = _achieved(SERVERS if which == "servers" else ACCESS, tmp_path, "down")
    # By hand: every class below its 20 Mbit/s rate, equal quanta share each 40 (servers)
    # or 20 Mbit/s (each access router's two subscribers) device: 10 Mbit/s of frames each,
    # 9.56 of payload, whichever server sends. One tree per server would give each its 20;
    # one tree for all four behind 20 would give 5. Measured: kernel 8.78-8.93 (servers),
    # 9.06-9.21 (access), simulator 9.44-9.56. Band: each in [0.8, 1.05] x 9.56 and within
    # 15 % of the simulator.
    _check(k, sim, _each(4, 10e6 * PAYLOAD), 0.80, 1.05, 0.15)
    hosts = res.summary["kernel"]["hosts"]
    if which == "access":  # one namespace per access router holds its two trees
        assert hosts["uplink0"]["namespace"] == hosts["upstream0"]["namespace"] != hosts["uplink1"]["namespace"]
        assert hosts["uplink1"]["namespace"].endswith("-a1")
        assert set(res.summary["links"]) >= {"uplink0", "uplink1", "upstream0", "upstream1"}
    else:  # one tree on the router's port, two servers behind its bridge
        assert hosts["uplink"]["namespace"].endswith("-rt")
        assert res.summary["links"]["uplink"]["tx_packets"] > 0


@live
def test_a_failed_set_up_leaves_nothing_behind(tmp_path, monkeypatch):
    made: list[str] = []
    build = kernel_isp.Router.build

    def failing(self, *a, **kw):
        build(self, *a, **kw)  # everything wired and applied, then the hook fails
        made.append(self.ns)
        raise kernel_isp._apply.DeployError("injected failure after the router was built")

    monkeypatch.setattr(kernel_isp.Router, "build", failing)
    exp = tmp_path / "four.toml"
    exp.write_text(FOUR)
    with pytest.raises(Exception, match="injected failure"):
        sojourn.emulate(exp, kernel=True)
    assert made and made[0].endswith("-rt")
    run = made[0][: -len("-rt")]
    assert not {n for n in namespaces() if n.startswith(run)}


def test_unequal_plans_above_the_uplink_by_hand_and_deterministic(tmp_path):
    # experiments/isp/oversub-unequal.toml: 20 and 30 Mbit/s plans behind 30 Mbit/s, both
    # offered 40 Mbit/s of 1514-B frames, tc's one-MTU bursts. By hand (Linux's HTB): the
    # 20 Mbit/s class sends 2 frames a turn before its own tokens run out, the 30 Mbit/s
    # class its 200,000-B quantum (132 frames) and never runs out: 2/134 of 30 Mbit/s =
    # 0.448 Mbit/s of frames. The kernel measured 0.42 of 28.0 (1.50 %) with
    # bench/linux/htb_oversub.sh (docs/isp.md, "Checked against the kernel").
    exp = ROOT / "experiments" / "isp" / "oversub-unequal.toml"
    a = sojourn.run(exp).write(tmp_path / "a")
    b = sojourn.run(exp).write(tmp_path / "b")
    for f in ("summary.json", "flows.parquet", "subscribers.parquet"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    import pandas as pd

    t = pd.read_parquet(a / "subscribers.parquet")
    down = t[t.direction == "down"].set_index("subscriber").achieved_bps * 1514 / 1472
    assert abs(down["sub0"] - 30e6 * 2 / 134) <= 0.05 * 30e6 * 2 / 134, down
    assert down["sub1"] >= 29.4e6, down


@live
def test_a_killed_run_leaves_its_routers_to_cleanup(tmp_path):
    # SIGKILL runs no exit path: the router namespaces were recorded in the run's state
    # file, so `sojourn emulate --cleanup` removes them with the run's own.
    import signal
    import time

    exp = tmp_path / "access.toml"
    exp.write_text(ACCESS)
    before = namespaces()
    p = subprocess.Popen([sys.executable, "-m", "sojourn", "emulate", str(exp), "--kernel", "--out",
                          str(tmp_path / "out"), "--quiet"], cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        routers: set[str] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            routers = {n for n in namespaces() - before if n.endswith("-a1")}
            if routers:
                break
            time.sleep(0.2)
        assert len(routers) == 1, "the run never built its access routers"
        run = routers.pop()[: -len("-a1")]
        time.sleep(0.5)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    left = {n for n in namespaces() if n.startswith(run + "-")}
    assert {f"{run}-rt", f"{run}-a0", f"{run}-a1"} <= left  # SIGKILL ran nothing
    r = cli("emulate", "--cleanup")
    assert r.returncode == 0, r.stderr
    assert not {n for n in namespaces() if n.startswith(run + "-")}, r.stdout


@live
def test_flows_between_subscribers_cross_no_tree(tmp_path):
    # sub0 -> sub1 goes sub0.up, access, sub1.down in the model: no uplink, no upstream, so
    # no plan shapes it, only the 100 Mbit/s lines (their pfifo under htb at the line rate):
    # 95.6 Mbit/s of payload by hand. No server is a host, so the run builds no router.
    text = SITES.replace('between = "servers->subscribers"', 'from = "sub0"\nto = "sub1"')
    assert text != SITES
    res = sojourn.emulate(_write(tmp_path, text), kernel=True)
    hosts = res.summary["kernel"]["hosts"]
    assert sorted(hosts) == ["sub0.down", "sub0.up", "sub1.down", "sub1.up"]
    goodput = res.flows_table.to_pandas().goodput_bps
    assert len(goodput) == 1 and 0.80 * 100e6 * PAYLOAD <= goodput[0] <= 1.02 * 100e6 * PAYLOAD, goodput
