"""`sojourn deploy apply/remove` on a veth in a namespace of unique name: the plan as the kernel
shows it (tc qdisc show, nft list), applied twice = once, removed = as before, a failure
midway rolled back, refusals (no privilege, a missing qdisc module, someone else's qdisc), and
the map really classifying: a flow crossing the threshold changes priority (nft counters) and
conntrack accounting is on."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import _local  # noqa: F401  (this worktree's python/sojourn first)
from sojourn import deploy
from sojourn.deploy import apply as deploy_apply
from live_experiments import upload_scripts

ROOT = Path(__file__).resolve().parents[2]
AGE = ROOT / "experiments" / "repro" / "age-based" / "age-1g.toml"
T = 6331208  # the seed's 1 Gb/s threshold (Table II)
AGE_PFIFOFAST = {"topology.links[0].qdisc": "pfifo_fast",
                 "classifier": [{"at": "client", "hook": "output",
                                 "map": [{"upto": T, "priority": "1:6"}, {"priority": "1:0"}]}]}

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces for tc/nft")
needs_nft = pytest.mark.skipif(shutil.which("nft") is None, reason="nft not installed (Debian package nftables)")


def seed_plan(dev: str = "sja", overrides=None, device_rate: str = "10Gbit") -> deploy.Plan:
    # a 1 Gbit/s link on a (veth) device taken as 10 Gbit/s: shaped by htb, the seed's
    # pfifo_fast under it, the ct bytes map on the output hook
    return deploy.plan(AGE, "client", dev, overrides=overrides or AGE_PFIFOFAST, device_rate=device_rate)


def state(ns: deploy.Netns, dev: str = "sja") -> tuple[str, str, str]:
    """What the kernel shows: qdiscs, classes, and the whole nft ruleset of the namespace."""
    q = ns.exec("tc", "qdisc", "show", "dev", dev).stdout
    c = ns.exec("tc", "class", "show", "dev", dev).stdout
    n = ns.exec("nft", "list", "ruleset").stdout
    return q, c, n


def test_the_shaper_takes_a_handle_the_classifier_does_not_write():
    # htb sends skb->priority == its own handle (X:0) to its unshaped direct queue; the map
    # writes 1:0, so htb must not be 1: (the kernel's htb_classify)
    p = seed_plan("eth0")
    assert p.tc == ["tc qdisc replace dev eth0 root handle 2: htb default 1",
                    "tc class replace dev eth0 parent 2: classid 2:1 htb rate 1Gbit ceil 1Gbit",
                    "tc qdisc replace dev eth0 parent 2:1 handle 3: pfifo_fast"]


@needs_root
@needs_nft
def test_apply_twice_then_remove_leaves_the_device_as_before():
    p = seed_plan()
    with deploy.Netns() as ns:
        before = state(ns)
        assert before[0].startswith("qdisc noqueue 0: root"), before  # veth's default
        rep = deploy_apply.apply(p, ns.name)
        assert rep.devices["sja"].startswith("applied")
        q, c, n = state(ns)
        assert q.startswith("qdisc htb 2: root"), q
        assert "qdisc pfifo_fast 3: parent 2:1 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1" in q
        assert "class htb 2:1 root leaf 3: prio 0 rate 1Gbit ceil 1Gbit" in c
        assert "table inet sojourn_seed000_age_1g {" in n
        assert "meta priority set ct bytes map { 0-6331208 : 1:6, 6331209-18446744073709551615 : 1:0 }" in n
        assert 'comment "sojourn deploy: seed000-age-1g"' in n
        # the kernel switched conntrack byte accounting on for the rule (docs/deploy.md, conntrack accounting)
        assert rep.acct == "1" and not rep.acct_set
        assert ns.exec("cat", "/proc/sys/net/netfilter/nf_conntrack_acct").stdout.strip() == "1"
        applied = state(ns)
        rep2 = deploy_apply.apply(p, ns.name)
        assert rep2.devices["sja"].startswith("unchanged")
        assert state(ns) == applied
        rm = deploy_apply.remove(p, ns.name)
        assert rm.devices["sja"].startswith("removed") and rm.nft == "deleted"
        assert state(ns) == before
        # removing again is harmless
        rm2 = deploy_apply.remove(p, ns.name)
        assert rm2.devices["sja"].startswith("absent") and rm2.nft == "absent"
        assert state(ns) == before


@needs_root
@needs_nft
@pytest.mark.parametrize("fail_after", [1, 2])
def test_a_failure_midway_is_rolled_back(fail_after):
    p = seed_plan()
    with deploy.Netns() as ns:
        before = state(ns)
        with pytest.raises(deploy_apply.DeployError, match="rolled back: sja restored") as e:
            deploy_apply.apply(p, ns.name, _fail_after=fail_after)
        assert "sojourn_injected_failure" in str(e.value)
        # the htb root (and class) had been created before the failure: all gone, no table
        assert state(ns) == before


@needs_root
@needs_nft
def test_a_ruleset_nft_refuses_changes_nothing():
    p = seed_plan()
    p.nft = p.nft.replace("ct bytes map", "ct bogus map")
    with deploy.Netns() as ns:
        before = state(ns)
        with pytest.raises(deploy_apply.DeployError, match="nft refused"):
            deploy_apply.apply(p, ns.name)
        assert state(ns) == before


@needs_root
def test_someone_elses_qdisc_is_neither_replaced_nor_removed():
    p = seed_plan()
    with deploy.Netns() as ns:
        assert ns.exec("tc", "qdisc", "add", "dev", "sja", "root", "handle", "7:", "pfifo", "limit", "77").returncode == 0
        before = state(ns)
        for action in (deploy_apply.apply, deploy_apply.remove):
            with pytest.raises(deploy_apply.DeployError, match="carries pfifo 7:"):
                action(p, ns.name)
            assert state(ns) == before


def _kernel_has(kind: str) -> bool:
    with deploy.Netns() as ns:
        return deploy.probe_qdiscs(ns)[kind]


@needs_root
def test_a_qdisc_the_kernel_lacks_is_named_before_anything_changes():
    if _kernel_has("codel"):
        pytest.skip("this kernel has codel")
    p = seed_plan(overrides={"topology.links[0].qdisc": "codel"})
    with deploy.Netns() as ns:
        before = state(ns)
        with pytest.raises(deploy_apply.DeployError, match=r"this kernel has no qdisc 'codel' \(CONFIG_NET_SCH_CODEL"):
            deploy_apply.apply(p, ns.name)
        assert state(ns) == before


@needs_root
def test_a_missing_device_or_namespace_is_one_line():
    p = seed_plan("sjnosuchdev")
    with deploy.Netns() as ns:
        with pytest.raises(deploy_apply.DeployError, match="device 'sjnosuchdev'"):
            deploy_apply.apply(p, ns.name)
    with pytest.raises(deploy_apply.DeployError, match="no such network namespace"):
        deploy_apply.apply(p, "sjdep-does-not-exist")


def _unprivileged_prefix() -> list[str]:
    """As `nobody` if this Python can run as nobody, else root with every capability dropped
    (the same refusal either way; test_emulate.py does the same)."""
    nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    r = subprocess.run([*nobody, sys.executable, "-c", "import sojourn._engine"], capture_output=True, cwd=ROOT)
    if r.returncode == 0:
        return nobody
    return ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privilege needs root to start from")
@pytest.mark.parametrize("action", ["apply", "remove"])
def test_refused_without_privilege(action):
    before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    r = subprocess.run([*_unprivileged_prefix(), sys.executable, "-m", "sojourn", "deploy", action, str(AGE),
                        "--node", "client", "--iface", "eth0"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "root" in lines[0] and "CAP_NET_ADMIN" in lines[0], r.stderr
    assert r.stdout == ""
    # nothing created (other engineers' runs come and go meanwhile: only the trials' names are ours)
    after = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert {ln for ln in after.splitlines() if ln.startswith("sjdep")} <= set(before.splitlines())


SERVER, CLIENT = upload_scripts("10.77.0.2")


@needs_root
@needs_nft
def test_applied_map_moves_a_flow_to_the_bulk_band_when_it_crosses_the_threshold():
    """A 300 kB upload from the client namespace over the applied plan (threshold 100,000
    bytes): its first packets leave with priority 1:6 (pfifo_fast band 0), the rest with 1:0
    (band 1), counted after the output hook in postrouting; every byte crossed the htb class."""
    cls = [{"at": "client", "hook": "output", "map": [{"upto": 100000, "priority": "1:6"}, {"priority": "1:0"}]}]
    p = seed_plan(overrides={"topology.links[0].qdisc": "pfifo_fast", "classifier": cls})
    count = ("table inet sjcount {\n chain post {\n  type filter hook postrouting priority 100; policy accept;\n"
             "  tcp dport 5201 meta priority 1:6 counter\n  tcp dport 5201 meta priority 1:0 counter\n }\n}\n")
    with deploy.Netns() as client, deploy.Netns() as server:
        # one wire: the client's sja to the server's sjb (each Netns came with its own pair)
        client.ip("link", "del", "sja")
        server.ip("link", "del", "sja")
        client.ip("link", "add", "sja", "type", "veth", "peer", "name", "sjb", "netns", server.name)
        client.ip("addr", "add", "10.77.0.1/24", "dev", "sja")
        client.ip("link", "set", "sja", "up")
        server.ip("addr", "add", "10.77.0.2/24", "dev", "sjb")
        server.ip("link", "set", "sjb", "up")
        rep = deploy_apply.apply(p, client.name)
        assert rep.acct == "1"
        assert client.exec("nft", "-f", "-", input=count).returncode == 0
        srv = subprocess.Popen(["ip", "netns", "exec", server.name, sys.executable, "-c", SERVER],
                               stdout=subprocess.PIPE, text=True)
        try:
            assert srv.stdout.readline().strip() == "ready"
            r = client.exec(sys.executable, "-c", CLIENT)
            assert r.returncode == 0, r.stderr
            assert srv.stdout.readline().strip() == "300000"
        finally:
            srv.kill()
            srv.wait()
        listed = client.exec("nft", "list", "table", "inet", "sjcount").stdout
        tc = client.exec("tc", "-s", "class", "show", "dev", "sja").stdout
    got = {m[0]: int(m[1]) for m in re.findall(r"meta priority (1:[06]) counter packets \d+ bytes (\d+)", listed)}
    assert set(got) == {"1:6", "1:0"}, listed
    assert 1000 < got["1:6"] <= 100000  # ct bytes counts the packet being classified too
    assert got["1:0"] >= 300000 - 100000
    # everything went through the shaper's class (none unshaped through htb's direct queue)
    sent = int(re.search(r"class htb 2:1 .*?\n\s*Sent (\d+) bytes", tc, re.S).group(1))
    assert sent >= 300000, tc
