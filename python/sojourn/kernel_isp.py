"""``sojourn emulate --kernel`` for ``[topology] kind = "isp"`` (docs/isp.md, "The other
engines").

The subscriber trees of an isp topology sit on routers (the core's uplink, the access
router's upstream), which live in sojourn's forwarder; the kernel engine needs each queue on
a host's device. With one server the two trees move to where all their traffic passes:

- **downstream**: the core's tree (``sojourn deploy plan --node core``, its ``u32 match ip
  dst`` filters) goes on the server's device, every packet to a subscriber leaving there;
- **upstream**: the access router's tree (``--node access``, ``match ip src``) goes on every
  subscriber's device; each subscriber's packets meet only its own class there, so the
  subscribers do not share the upstream's rate among them in the kernel (each is shaped to
  its up plan, under a root at the upstream's rate of its own).

Each tree is the child of a ``tbf`` at its link's rate with a one-packet bucket, the
device of the uplink (upstream): a tbf dequeues its child only when it has the tokens for
the packet, as a busy link does, so the tree sees the dequeues a link of that rate gives
it. Without it, on a veth far faster than the tree, a class with tokens of its own sends
without asking its parent and an oversubscribed tree leaves faster than its root
(bench/linux/htb_oversub.sh measured both: docs/isp.md, "Checked against the kernel").

The filters name the subscribers' addresses in ``topology.addresses``; live, every host has
the private address the live engine gave it, so the plan is made with a scratch prefix and
each ``/32`` is rewritten to the subscriber's address read from its namespace. The
forwarder's links become wires: every rate (uplink, upstream, lines, plans) far above any
plan, so no queue forms there and it only adds the delays.
"""
from __future__ import annotations

import copy
import ipaddress
import json
import re
from typing import Any, Mapping

from . import deploy as _d
from ._config import ConfigError
from .deploy import apply as _apply

#: The prefix the plans number subscribers from before their live addresses replace it.
PLAN_PREFIX = "100.64.0.0/10"
#: One packet: the bucket of the tbf standing for the uplink's device (a 1514-B frame).
DEVICE_BUCKET = "1514b"
#: The tbf's own queue: it holds at most the one packet it peeked from the tree.
DEVICE_LIMIT_BYTES = 30000

_SUB = re.compile(r"^sub(\d+)$")
_ADDR = re.compile(r"match ip (dst|src) (\d+\.\d+\.\d+\.\d+)/32")


def is_isp(cfg: Mapping[str, Any]) -> bool:
    topo = cfg.get("topology")
    return isinstance(topo, Mapping) and topo.get("kind") == "isp"


def _refuse(name: str, topo: Mapping[str, Any]) -> None:
    for key, what in (("servers", "one server carries the downstream tree on its device"),
                      ("access_routers", "one access router: one upstream tree"),
                      ("sites", "the trees are applied as one level of subscriber classes")):
        v = topo.get(key)
        if v is not None and v != 1 and not (key == "sites" and v in ({}, None)):
            raise ConfigError(name, f"topology.{key}", f"the kernel engine runs isp trees with {what}; "
                              f"got {v!r} (use `sojourn emulate` without --kernel)")
    line = topo.get("line")
    if isinstance(line, Mapping) and "qdisc" in line:
        # the subscribers' devices carry the upstream tree: no device is left for the line's
        raise ConfigError(name, "topology.line.qdisc", "the kernel engine puts the upstream tree on each "
                          "subscriber's device, which leaves none for the line's discipline "
                          "(use `sojourn emulate` without --kernel)")


def _with_prefix(cfg: dict) -> dict:
    c = copy.deepcopy(cfg)
    c["topology"]["addresses"] = PLAN_PREFIX
    return c


def planned_address(node: str) -> str:
    """The address the plans give subscriber ``node`` (subscriber i: the prefix's i + 1)."""
    m = _SUB.match(node)
    if m is None:
        raise ValueError(f"{node!r} is not a subscriber node")
    return str(ipaddress.ip_network(PLAN_PREFIX).network_address + int(m.group(1)) + 1)


def _under_device(lines: list[str], dev: str, rate_bps: int) -> list[str]:
    """``lines`` (one htb tree, root handle 1:) as the child of a tbf at ``rate_bps``."""
    out = [f"tc qdisc replace dev {dev} root handle 9: tbf rate {rate_bps}bit burst {DEVICE_BUCKET} "
           f"limit {DEVICE_LIMIT_BYTES}"]
    for c in lines:
        out.append(c.replace(" root handle 1: htb", " parent 9:1 handle 1: htb"))
    return out


def _tree_link(p: _d.Plan, link: str) -> _d.LinkPlan:
    return next(lk for lk in p.links if lk.name == link)


def host_plan(cfg: dict, node: str, dev: str, base, addresses: Mapping[str, str]) -> _d.Plan:
    """The plan for host ``node`` on device ``dev``: the server carries the downstream tree,
    a subscriber the upstream one; ``addresses`` ``{subscriber node: live IPv4}`` replace the
    planned ones in the filters (empty: the planned ones stay, for the trial)."""
    c = _with_prefix(cfg)
    m = _d._prepare(c, None, base)[2]
    if _SUB.match(node):
        router, link = "access", "upstream"
    else:
        router, link = "core", "uplink"
    rate = next(lk["rate_bps"] for lk in m["links"] if lk["name"] == link)
    src = _d.plan(c, router, {link: dev}, base_dir=base)
    lp = _tree_link(src, link)
    back = {planned_address(n): a for n, a in addresses.items()}

    def live(cmd: str) -> str:
        return _ADDR.sub(lambda mt: f"match ip {mt.group(1)} {back.get(mt.group(2), mt.group(2))}/32", cmd)

    tc = _under_device([live(x) for x in lp.tc], dev, rate)
    p = _d.Plan(experiment=src.experiment, node=node)
    p.links.append(_d.LinkPlan(link, lp.to, dev, lp.qdisc, True, tc))
    return p


def plans(cfg: dict, name: str, base) -> dict[str, _d.Plan]:
    """``{host: plan}`` (device placeholder ``eth0``, planned addresses) for the trial;
    raises :class:`ConfigError` for an isp file the kernel engine cannot run."""
    topo = cfg.get("topology") or {}
    _refuse(name, topo)
    try:
        m = _d._prepare(_with_prefix(cfg), None, base)[2]
        hosts = [n for n in m["nodes"] if _SUB.match(n) or n.startswith("server")]
        return {n: host_plan(cfg, n, "eth0", base, {}) for n in hosts}
    except ConfigError as e:
        if e.file == "<dict>":
            raise ConfigError(name, e.path, e.msg) from None
        raise


def wire_config(cfg: dict, wire_rate: str) -> dict:
    """The isp topology the forwarder runs: every rate ``wire_rate`` (uplink, upstream, lines,
    every plan and its ceils) and pfifo leaves, so its trees never queue; no link outputs."""
    w = copy.deepcopy(cfg)
    t = w["topology"]
    for k in ("uplink", "upstream", "line"):
        v = t.get(k)
        spec = dict(v) if isinstance(v, Mapping) else {}
        spec["rate"] = wire_rate
        spec.pop("qdisc", None)
        t[k] = spec
    plans_ = []
    for pl in t.get("plans") or []:
        q = dict(pl)
        for k in ("down", "up"):
            q[k] = wire_rate
        q.pop("ceil_down", None)
        q.pop("ceil_up", None)
        plans_.append(q)
    if plans_:
        t["plans"] = plans_
    t["leaf"] = {"kind": "pfifo", "limit": 100000}
    w.pop("classifier", None)
    w.setdefault("record", {})["links"] = "none"
    return w


def live_address(ns: str, dev: str) -> str:
    """The first IPv4 address of ``dev`` in namespace ``ns``."""
    r = _d._run(["ip", "-n", ns, "-j", "-4", "addr", "show", "dev", dev])
    for entry in json.loads(r.stdout or "[]"):
        for a in entry.get("addr_info") or []:
            if a.get("family") == "inet":
                return a["local"]
    raise _apply.DeployError(f"no IPv4 address on {dev} in {ns}: the isp tree's filters match IPv4")


__all__ = ["is_isp", "plans", "host_plan", "wire_config", "live_address", "planned_address", "PLAN_PREFIX"]
