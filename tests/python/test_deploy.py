"""`sojourn deploy plan/check`: seed 000's configurations as tc + nft commands (golden, against
the structure docs/repro/age-based.md gives: prio bands 3 with the same leaf per band, 1:1 / 1:2;
pfifo_fast 1:6 / 1:0; CAKE 1:2 / 1:1; the kernel's default parameters), refusals, and — as root
with nft installed — `nft -c` on every ruleset and the printed script run in a throw-away
namespace."""
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
from sojourn._config import tomllib
from live_experiments import upload_scripts

ROOT = Path(__file__).resolve().parents[2]
AGE = ROOT / "experiments" / "repro" / "age-based"
SWEEP = tomllib.loads((AGE / "full-1g.sweep.toml").read_text())
VARIANTS = {v["name"]: v["set"] for v in SWEEP["variant"]}

T = 6331208  # the seed's 1 Gb/s threshold (Table II), inclusive
PRIOMAP = "priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1"  # the kernel's prio2band default
CODEL = "codel limit 1000 target 500us interval 10ms"
FQ_CODEL = "fq_codel limit 10240 flows 1024 quantum 1514 target 500us interval 10ms memory_limit 32Mb ecn drop_batch 64"
PIE = "pie limit 1000 target 500us tupdate 3ms alpha 2 beta 20"
FQ_PIE = ("fq_pie limit 10240 flows 1024 target 500us tupdate 3ms alpha 2 beta 20 quantum 1514 "
          "memory_limit 32Mb ecn_prob 10")
CAKE = "cake unlimited diffserv3 triple-isolate nonat nowash no-ack-filter split-gso rtt 10ms raw overhead 0"


def prio_tree(leaf: str) -> list[str]:
    return [f"tc qdisc replace dev eth0 root handle 1: prio bands 3 {PRIOMAP}",
            f"tc qdisc replace dev eth0 parent 1:1 handle 2: {leaf}",
            f"tc qdisc replace dev eth0 parent 1:2 handle 3: {leaf}",
            f"tc qdisc replace dev eth0 parent 1:3 handle 4: {leaf}"]


# variant -> (tc lines, nft map or None)
GOLDEN = {
    "pfifo": (["tc qdisc replace dev eth0 root handle 1: pfifo limit 1000"], None),
    "age-pfifofast": (["tc qdisc replace dev eth0 root handle 1: pfifo_fast"],
                      "0-6331208 : 1:6, 6331209-18446744073709551615 : 1:0"),
    "codel": ([f"tc qdisc replace dev eth0 root handle 1: {CODEL}"], None),
    "age-prio-codel": (prio_tree(CODEL), "0-6331208 : 1:1, 6331209-18446744073709551615 : 1:2"),
    "fqcodel": ([f"tc qdisc replace dev eth0 root handle 1: {FQ_CODEL}"], None),
    "age-prio-fqcodel": (prio_tree(FQ_CODEL), "0-6331208 : 1:1, 6331209-18446744073709551615 : 1:2"),
    "cake": ([f"tc qdisc replace dev eth0 root handle 1: {CAKE}"], None),
    "age-cake": ([f"tc qdisc replace dev eth0 root handle 1: {CAKE}"],
                 "0-6331208 : 1:2, 6331209-18446744073709551615 : 1:1"),
    "pie": ([f"tc qdisc replace dev eth0 root handle 1: {PIE}"], None),
    "age-prio-pie": (prio_tree(PIE), "0-6331208 : 1:1, 6331209-18446744073709551615 : 1:2"),
    "fqpie": ([f"tc qdisc replace dev eth0 root handle 1: {FQ_PIE}"], None),
    "age-prio-fqpie": (prio_tree(FQ_PIE), "0-6331208 : 1:1, 6331209-18446744073709551615 : 1:2"),
}


def seed_plan(variant: str) -> deploy.Plan:
    return deploy.plan(AGE / "age-1g.toml", "client", "eth0", overrides=VARIANTS[variant])


@pytest.fixture
def sojourn_cli(capsys):
    """Runs `sojourn ARGS` in this process (a subprocess costs seconds of imports each)."""
    from sojourn.cli import main

    def run(*args: str) -> subprocess.CompletedProcess:
        try:
            rc = main(list(args))
        except SystemExit as e:  # argparse usage errors
            rc = e.code
        out = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), rc, out.out, out.err)

    return run


def test_the_twelve_seed_configurations_are_all_covered():
    assert set(GOLDEN) | {"age-cake-strict"} == set(VARIANTS)


@pytest.mark.parametrize("variant", sorted(GOLDEN))
def test_golden_seed000_plans(variant):
    tc, nft_map = GOLDEN[variant]
    p = seed_plan(variant)
    assert p.tc == tc
    if nft_map is None:
        assert p.nft == ""
    else:
        assert p.hooks == ["output"]  # the seed classifies on the sending host's output hook
        assert p.table == "sojourn_seed000_age_1g"
        assert p.nft == (
            "table inet sojourn_seed000_age_1g\n"
            "delete table inet sojourn_seed000_age_1g\n"
            "table inet sojourn_seed000_age_1g {\n"
            '\tcomment "sojourn deploy: seed000-age-1g"\n'
            "\tchain output {\n"
            "\t\ttype filter hook output priority filter; policy accept;\n"
            f"\t\tmeta priority set ct bytes map {{ {nft_map} }}\n"
            "\t}\n"
            "}\n")


def test_cake_strict_tins_are_refused_naming_the_key(sojourn_cli):
    r = sojourn_cli("deploy", "plan", str(AGE / "age-1g.toml"), "--node", "client",
                    "--set", 'topology.links[0].qdisc={kind="cake", rtt="10ms", tin_mode="strict"}')
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "topology.links[0].qdisc" in lines[0] and "tin_mode" in lines[0] and "sojourn emulate" in lines[0]


@pytest.mark.parametrize("qdisc", ["lstf_codel", "las", "srpt", "cocoa"])
def test_disciplines_linux_lacks_are_refused(qdisc, sojourn_cli):
    r = sojourn_cli("deploy", "plan", str(AGE / "age-1g.toml"), "--node", "client",
                    "--set", f'topology.links[0].qdisc="{qdisc}"')
    assert r.returncode == 2, r.stdout
    assert r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1
    assert "topology.links[0].qdisc" in r.stderr and "emulate" in r.stderr


def test_payload_counting_has_no_nft_equivalent():
    cls = [{"at": "client", "hook": "output", "bytes": "payload", "map": [{"upto": T, "priority": "1:6"}, {"priority": "1:0"}]}]
    with pytest.raises(deploy.NotDeployable, match=r"classifier\[0\]\.bytes"):
        deploy.plan(AGE / "age-1g.toml", "client", "eth0",
                    overrides={"topology.links[0].qdisc": "pfifo_fast", "classifier": cls})


def test_router_classifies_on_forward_and_original_direction():
    cfg = {
        "name": "r", "duration": "1s",
        "topology": {"kind": "graph", "nodes": ["a", "r", "b"],
                     "links": [{"name": "ar", "from": "a", "to": "r", "rate": "1Gbit"},
                               {"name": "rb", "from": "r", "to": "b", "rate": "100Mbit", "qdisc": "pfifo_fast"}]},
        "classifier": [{"at": "r", "hook": "forward", "direction": "original",
                        "map": [{"upto": 1000, "priority": "1:6"}, {"priority": "1:0"}]}],
        "workload": [{"kind": "bulk", "from": "a", "to": "b"}],
    }
    p = deploy.plan(cfg, "r", {"rb": "eth1"}, device_rate="1Gbit")
    # rb (100 Mbit/s on a 1 Gbit/s device) is shaped: htb root, class at the link rate, leaf under
    # it; htb takes 2:, not the 1: the map writes (htb sends priority == its handle, 1:0, to its
    # unshaped direct queue)
    assert [lk.dev for lk in p.links] == ["ar.reverse", "eth1"]
    assert p.links[1].tc == ["tc qdisc replace dev eth1 root handle 2: htb default 1",
                             "tc class replace dev eth1 parent 2: classid 2:1 htb rate 100Mbit ceil 100Mbit",
                             "tc qdisc replace dev eth1 parent 2:1 handle 3: pfifo_fast"]
    assert p.hooks == ["forward"]
    assert "type filter hook forward priority filter;" in p.nft
    assert "meta priority set ct original bytes map { 0-1000 : 1:6, 1001-18446744073709551615 : 1:0 }" in p.nft


def test_bad_arguments_are_one_line_exit_2(sojourn_cli):
    for args, needle in [
        (["--node", "nobody"], "no node named 'nobody'"),
        (["--node", "client", "--iface", "x" * 16], "not a Linux interface name"),
        (["--node", "client", "--iface", "nic2=eth0", "--iface", "nic=eth1"], "no egress link"),
        (["--node", "client", "--device-rate", "fast"], "--device-rate"),
    ]:
        r = sojourn_cli("deploy", "plan", str(AGE / "age-1g.toml"), *args)
        assert r.returncode == 2, (args, r.stdout)
        assert r.stdout == ""
        assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, (args, r.stderr)


# -------- live: root and nft (CI runs as root and installs nftables) ---------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces for tc/nft")
needs_nft = pytest.mark.skipif(shutil.which("nft") is None, reason="nft not installed (Debian package nftables)")


@needs_root
@needs_nft
def test_nft_accepts_every_generated_ruleset():
    plans = [seed_plan(v) for v in GOLDEN if GOLDEN[v][1]]
    assert len(plans) == 6
    with deploy.Netns() as ns:
        for p in plans:
            ok, msg = deploy.nft_check(p.nft, ns)
            assert ok, msg
        # the check can fail: a ruleset nft refuses
        ok, _ = deploy.nft_check("table inet x { chain c { meta priority set ct bytes map { 0-1 : } } }", ns)
        assert not ok


@needs_root
@needs_nft
def test_printed_script_applies_in_a_namespace_idempotently():
    p = deploy.plan(AGE / "age-1g.toml", "client", "sja", overrides=VARIANTS["age-pfifofast"])
    script = p.script()
    with deploy.Netns() as ns:
        for _ in range(2):  # applying twice changes nothing
            r = ns.exec("sh", "-e", "-c", script)
            assert r.returncode == 0, r.stderr
        tables = ns.exec("nft", "list", "tables").stdout.split()
        assert tables.count("sojourn_seed000_age_1g") == 1
        listed = ns.exec("nft", "list", "table", "inet", "sojourn_seed000_age_1g").stdout
        assert "meta priority set ct bytes map { 0-6331208 : 1:6, 6331209-18446744073709551615 : 1:0 }" in listed
        q = ns.exec("tc", "qdisc", "show", "dev", "sja").stdout
        assert q.startswith("qdisc pfifo_fast 1: root"), q
        # the kernel turned conntrack byte accounting on for the rule (docs/deploy.md, conntrack accounting)
        assert ns.exec("cat", "/proc/sys/net/netfilter/nf_conntrack_acct").stdout.strip() == "1"


@needs_root
def test_check_probes_a_namespace_and_removes_it():
    before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    c = deploy.check(seed_plan("pfifo"))
    after = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert [ln for ln in after.splitlines() if ln.startswith("sjdep")] == \
        [ln for ln in before.splitlines() if ln.startswith("sjdep")]
    # pfifo and htb are built into every kernel sojourn supports (NET_SCH_FIFO is not optional
    # with NET_SCHED; htb is in every distribution kernel), so the probe must find them
    assert c.qdiscs["pfifo"] is True and c.qdiscs["pfifo_fast"] is True
    assert c.missing == []


def test_dualpi2_plan_is_tcs_own_line_and_check_names_the_kernel_option():
    # tc-dualpi2(8) with the kernel's defaults (sch_dualpi2.c, dualpi2_reset_default).
    p = deploy.plan(AGE / "age-1g.toml", "client", "eth0",
                    overrides={"topology.links[0].qdisc": "dualpi2", "classifier": []})
    assert p.tc == ["tc qdisc replace dev eth0 root handle 1: dualpi2 limit 10000 memlimit 30280000 target 15ms "
                    "tupdate 16ms alpha 0.16015625 beta 3.19921875 step_thresh 1ms min_qlen_step 0 "
                    "coupling_factor 2 drop_on_overload drop_dequeue classic_protection 10% l4s_ect split_gso"]
    c = deploy.check(p)
    if c.qdiscs["dualpi2"] is False:  # this machine's kernel (live_linux.md) has no sch_dualpi2
        assert any("CONFIG_NET_SCH_DUALPI2" in m for m in c.missing), c.missing
    elif c.qdiscs["dualpi2"] is None:
        pytest.skip("kernel not probed: needs root or a readable /proc/config.gz")


def test_check_without_plan_needs_no_root_for_the_listing(sojourn_cli):
    r = sojourn_cli("deploy", "check")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("qdisc kinds (")


SERVER, CLIENT = upload_scripts("127.0.0.1")


@needs_root
@needs_nft
def test_the_map_really_classifies_a_flow_crossing_the_threshold():
    """A 300 kB upload over a 100,000-byte threshold: its first packets leave with priority 1:6,
    the rest with 1:0 (the map's rule), counted after the output hook in postrouting."""
    cls = [{"at": "client", "hook": "output", "map": [{"upto": 100000, "priority": "1:6"}, {"priority": "1:0"}]}]
    p = deploy.plan(AGE / "age-1g.toml", "client", "lo", overrides={"topology.links[0].qdisc": "pfifo_fast", "classifier": cls})
    count = ("table inet sjcount {\n chain post {\n  type filter hook postrouting priority 100; policy accept;\n"
             "  tcp dport 5201 meta priority 1:6 counter\n  tcp dport 5201 meta priority 1:0 counter\n }\n}\n")
    with deploy.Netns() as ns:
        ns.ip("link", "set", "lo", "up")
        assert ns.exec("nft", "-f", "-", input=p.nft).returncode == 0
        assert ns.exec("nft", "-f", "-", input=count).returncode == 0
        srv = subprocess.Popen(["ip", "netns", "exec", ns.name, sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
        try:
            assert srv.stdout.readline().strip() == "ready"
            r = ns.exec(sys.executable, "-c", CLIENT)
            assert r.returncode == 0, r.stderr
            assert srv.stdout.readline().strip() == "300000"
        finally:
            srv.kill()
            srv.wait()
        listed = ns.exec("nft", "list", "table", "inet", "sjcount").stdout
    got = {m[0]: int(m[1]) for m in re.findall(r"meta priority (1:[06]) counter packets \d+ bytes (\d+)", listed)}
    assert set(got) == {"1:6", "1:0"}, listed
    # before the threshold: data (more than the handshake), at most 100,000 bytes counted
    # (ct bytes includes the packet being classified, and lo sends buffers up to 64 KiB)
    assert 1000 < got["1:6"] <= 100000
    # after it: the rest of the 300 kB (payload + headers)
    assert got["1:0"] >= 300000 - 100000
