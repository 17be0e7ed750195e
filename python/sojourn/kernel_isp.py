"""``sojourn emulate --kernel`` for ``[topology] kind = "isp"`` (docs/isp.md, "The other
engines").

An ISP shapes its subscribers on a router: the downstream tree on the egress towards the
access network, the upstream tree on the egress towards the core. The kernel engine does
the same with a **router namespace** of the run (``<run id>-rt``, IPv4 forwarding on in it
only) placed between the forwarder and the servers, where every subscriber packet passes:

    subscriber ── forwarder (delays) ── <run>p0 ═ <run>u0 ─┐            ┌─ <run>l0 ═ eth0 server0
                                        <run>p1 ═ <run>u1 ─┤  router   ├─ <run>l1 ═ eth0 server1
                                                           └───────────┘  (bridge <run>br
                                                                          with 2+ servers)

With ``access_routers = K`` each access router gets a namespace of its own
(``<run id>-a<k>``) holding its pair of trees (:meth:`Router._access_routers`).

At the set-up hook, before the forwarder opens its ports, each server's forwarder-side
veth end (``<run>p<k>``, in the forwarder's namespace) is renamed ``<run>l<k>`` and moved
into the router, keeping its MAC (the address the server's static gateway entry names);
a new veth pair takes its place, ``<run>p<k>`` in the forwarder's namespace (same MAC and
offloads as the one it replaces) and ``<run>u<k>`` in the router (the server's MAC, so
the forwarder's frames for the server reach it). The server's namespace is not touched.
The router then routes the experiment's prefix out of ``<run>u0`` and each server's
address towards its ``l`` end (with several servers the ``l`` ends are ports of one bridge,
so one device leads to all of them):

- **downstream**: the core's tree (``sojourn deploy plan --node core``, ``u32 match ip
  dst``) on ``<run>u0``: every packet to a subscriber leaves the router there, whichever
  server sent it, and enters the forwarder on server0's port (the server links are
  identical in the model: the same delay for every server);
- **upstream**: the access router's tree (``--node access``, ``match ip src``) on the
  device towards the servers (``<run>l0``, or the bridge): every subscriber shares it, as
  on the access router's upstream;
- **line**: with ``line.qdisc``, each subscriber's own device carries its line's plan
  (``sub<i>.up``: htb at the line rate with the discipline under it), as any
  kernel-engine host link, and an IFB its ingress redirects to carries the access
  router's port towards it (``sub<i>.down``, :meth:`Router._lines`).

Without a server among the hosts (flows between subscribers only, which cross no tree in
the model) no router is built.

Each tree is the child of a ``tbf`` at its link's rate with a one-packet bucket, the
device of the uplink (upstream): a tbf dequeues its child only when it has the tokens for
the packet, as a busy link does, so the tree sees the dequeues a link of that rate gives
it. Without it, on a veth far faster than the tree, a class with tokens of its own sends
without asking its parent and an oversubscribed tree leaves faster than its root
(bench/linux/htb_oversub.sh measured both: docs/isp.md, "Checked against the kernel").
TCP Small Queues bound what a socket has queued on its own host; the trees are on the
router, so they no longer bound a flow's share of its class as they did when the tree sat
on the sending host (measured: docs/isp.md, "The other engines").

The filters name the subscribers' addresses in ``topology.addresses``; live, every host has
the private address the live engine gave it, so the plan is made with a scratch prefix and
each ``/32`` is rewritten to the subscriber's address read from its namespace. The
forwarder's links become wires: every rate (uplink, upstream, lines, plans) far above any
plan, so no queue forms there and it only adds the delays.

The router namespaces are recorded in the run's state file before they are created (so
``sojourn emulate --cleanup`` removes them after a SIGKILL, as the run's own namespaces)
and deleted at the collection stage and on every exit path (:meth:`Router.delete`). The
root namespace is never touched: every device, route, rule, neighbour entry and sysctl is
set in a namespace of the run.
"""
from __future__ import annotations

import copy
import ipaddress
import json
import re
import sys
from pathlib import Path
from typing import Any, Mapping, Optional

from . import deploy as _d
from ._config import ConfigError
from .deploy import apply as _apply

#: The prefix the plans number subscribers from before their live addresses replace it.
PLAN_PREFIX = "100.64.0.0/10"
#: One packet: the bucket of the tbf standing for the uplink's device (a 1514-B frame).
DEVICE_BUCKET = "1514b"
#: The tbf's own queue: it holds at most the one packet it peeked from the tree.
DEVICE_LIMIT_BYTES = 30000
#: Devices are veths (no rate of their own): a line is shaped at its rate by htb.
DEVICE_RATE = "1000Gbit"
#: The live engine's per-run state files (crates/sojourn-emu/src/netns.rs, ``state_dir``).
STATE_DIRS = ("/run/sojourn", "/tmp/sojourn-emu")

_SUB = re.compile(r"^sub(\d+)$")
_ADDR = re.compile(r"match ip (dst|src) (\d+\.\d+\.\d+\.\d+)/32")
#: The trees' routers and links (one access router: deploy's node and link names).
TREES = {"core": "uplink", "access": "upstream"}


def is_isp(cfg: Mapping[str, Any]) -> bool:
    topo = cfg.get("topology")
    return isinstance(topo, Mapping) and topo.get("kind") == "isp"


def _ip_version(cfg: Mapping[str, Any]) -> tuple[str, Any]:
    """The first ``ip`` key of the file's transports (global, then per workload)."""
    t = cfg.get("transport")
    if isinstance(t, Mapping) and "ip" in t:
        return "transport.ip", t["ip"]
    for i, w in enumerate(cfg.get("workload") or []):
        t = w.get("transport") if isinstance(w, Mapping) else None
        if isinstance(t, Mapping) and "ip" in t:
            return f"workload[{i}].transport.ip", t["ip"]
    return "", 4


def _refuse(name: str, cfg: Mapping[str, Any]) -> None:
    key, v = _ip_version(cfg)
    if v == 6:
        raise ConfigError(name, key, "the kernel engine's isp router forwards IPv4 and the trees' filters match "
                          "IPv4 addresses; got 6 (use `sojourn emulate` without --kernel)")


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


def _line_qdisc(cfg: Mapping[str, Any]) -> bool:
    line = (cfg.get("topology") or {}).get("line")
    return isinstance(line, Mapping) and "qdisc" in line


def tree_plan(cfg: dict, node: str, link: str, dev: str, base, addresses: Mapping[str, str]) -> _d.Plan:
    """The plan of the tree on ``link`` of router ``node`` (``"core"``'s ``uplink``:
    downstream, ``"access"``'s ``upstream``: upstream; ``uplink<a>``/``access<a>`` with
    several access routers) on ``dev`` under its device's tbf; ``addresses`` ``{subscriber
    node: live IPv4}`` replace the planned ones in the filters (empty: the planned ones
    stay, for the trial)."""
    c = _with_prefix(cfg)
    m = _d._prepare(c, None, base)[2]
    rate = next(lk["rate_bps"] for lk in m["links"] if lk["name"] == link)
    src = _d.plan(c, node, {link: dev}, base_dir=base)
    lp = next(lk for lk in src.links if lk.name == link)
    back = {planned_address(n): a for n, a in addresses.items()}

    def live(cmd: str) -> str:
        return _ADDR.sub(lambda mt: f"match ip {mt.group(1)} {back.get(mt.group(2), mt.group(2))}/32", cmd)

    tc = _under_device([live(x) for x in lp.tc], dev, rate)
    p = _d.Plan(experiment=src.experiment, node=node)
    p.links.append(_d.LinkPlan(link, lp.to, dev, lp.qdisc, True, tc))
    return p


def trees(m: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``[(access router, its uplink, its upstream)]`` of the expanded model ``m``."""
    out = []
    for lk in m["links"]:
        if lk["from"] == "core" and lk["name"].startswith("uplink"):
            up = next(u for u in m["links"] if u["from"] == lk["to"] and u["to"] == "core")
            out.append((lk["to"], lk["name"], up["name"]))
    return out


def line_plan(cfg: dict, node: str, link: str, dev: str, base) -> _d.Plan:
    """Subscriber ``node``'s line ``link`` on ``dev``: htb at the line's rate with
    ``line.qdisc`` under it, as the kernel engine shapes any host's link. ``sub<i>.up``
    leaves the subscriber (its own device); ``sub<i>.down`` leaves its access router
    (planned for that node, applied on the subscriber's ingress device)."""
    c = _with_prefix(cfg)
    sender = node if link.endswith(".up") else next(
        lk["from"] for lk in _d._prepare(c, None, base)[2]["links"] if lk["name"] == link)
    p = _d.plan(c, sender, {link: dev}, device_rate=DEVICE_RATE, base_dir=base)
    p.links = [lk for lk in p.links if lk.name == link]
    return p


def plans(cfg: dict, name: str, base) -> dict[str, _d.Plan]:
    """``{link: plan}`` (device placeholder ``eth0``, planned addresses) for the trial: each
    access router's two trees (``uplink``, ``upstream``; ``uplink0``… with several) and,
    with ``line.qdisc``, each subscriber's line (``sub<i>.up``); raises
    :class:`ConfigError` for an isp file the kernel engine cannot run."""
    _refuse(name, cfg)
    try:
        m = _d._prepare(_with_prefix(cfg), None, base)[2]
        out = {}
        for acc, down, up in trees(m):
            out[down] = tree_plan(cfg, "core", down, "eth0", base, {})
            out[up] = tree_plan(cfg, acc, up, "eth0", base, {})
        if _line_qdisc(cfg):
            for n in m["nodes"]:
                if _SUB.match(n):
                    for d in ("up", "down"):
                        out[f"{n}.{d}"] = line_plan(cfg, n, f"{n}.{d}", "eth0", base)
        return out
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
    sites = t.get("sites")
    if isinstance(sites, Mapping):
        t["sites"] = {**sites, **{k: wire_rate for k in ("rate", "up") if k in sites}}
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


def _ip(*args: str) -> str:
    r = _d._run(["ip", *args])
    if r.returncode != 0:
        raise _apply.DeployError(f"ip {' '.join(args)}: {r.stderr.strip() or 'failed'}")
    return r.stdout


def live_address(ns: str, dev: str) -> str:
    """The first IPv4 address of ``dev`` in namespace ``ns``."""
    for entry in json.loads(_ip("-n", ns, "-j", "-4", "addr", "show", "dev", dev) or "[]"):
        for a in entry.get("addr_info") or []:
            if a.get("family") == "inet":
                return a["local"]
    raise _apply.DeployError(f"no IPv4 address on {dev} in {ns}: the isp tree's filters match IPv4")


def _link(ns: str, dev: str) -> dict[str, Any]:
    return json.loads(_ip("-n", ns, "-j", "link", "show", "dev", dev))[0]


def _gateway(ns: str, dev: str) -> tuple[str, str]:
    """The host's route to the experiment's prefix: ``(prefix, gateway address)``."""
    for r in json.loads(_ip("-n", ns, "-j", "-4", "route", "show", "dev", dev) or "[]"):
        if r.get("gateway") and r.get("dst") not in (None, "default"):
            return r["dst"], r["gateway"]
    raise _apply.DeployError(f"no route via a gateway on {dev} in {ns}: not a live engine host")


#: Reads (and with a JSON argument sets) a device's offloads in the namespace it runs in,
#: with the legacy ethtool ioctls the live engine uses (crates/sojourn-emu/src/netns.rs):
#: no ethtool program needed. Prints the state read back as JSON.
_OFFLOADS_PY = r"""
import ctypes, fcntl, json, socket, struct, sys
dev, want = sys.argv[1], json.loads(sys.argv[2])
CMDS = {"tx_checksum": (0x16, 0x17), "scatter_gather": (0x18, 0x19), "tso": (0x1e, 0x1f),
        "gso": (0x23, 0x24), "gro": (0x2b, 0x2c)}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def call(cmd, data=0):
    buf = ctypes.create_string_buffer(struct.pack("II", cmd, data), 8)
    fcntl.ioctl(s.fileno(), 0x8946, struct.pack("16sP16x", dev.encode(), ctypes.addressof(buf)))
    return struct.unpack("II", buf.raw)[1]
for k in ("tx_checksum", "scatter_gather", "tso", "gso", "gro"):  # checksum first, GRO last
    if k in want:
        call(CMDS[k][1], int(want[k]))
print(json.dumps({k: bool(call(g)) for k, (g, _) in CMDS.items()}))
"""


def offloads(ns: str, dev: str, want: Optional[Mapping[str, bool]] = None) -> dict[str, bool]:
    """``dev``'s offloads in ``ns`` (set to ``want`` first, if given)."""
    r = _d._run(["ip", "netns", "exec", ns, sys.executable, "-c", _OFFLOADS_PY, dev, json.dumps(dict(want or {}))])
    if r.returncode != 0:
        why = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
        raise _apply.DeployError(f"offloads of {dev} in {ns}: {why}")
    return json.loads(r.stdout)


def _sysctl(ns: str, key: str, value: str) -> None:
    path = "/proc/sys/" + key.replace(".", "/")
    r = _d._run(["ip", "netns", "exec", ns, "sh", "-c", f"echo {value} > {path}"])
    if r.returncode != 0:
        raise _apply.DeployError(f"sysctl {key}={value} in {ns}: {r.stderr.strip()}")


#: The next hop every route between the run's routers names: each device's own permanent
#: neighbour entry gives its peer's MAC, so no router needs an address or ARP (a link-local
#: address, never on a wire of the experiment).
HOP = "169.254.0.1"


class Router:
    """The run's router namespaces (module docstring). :meth:`build` wires them in and
    applies the trees; :meth:`collect` reads their counters; :meth:`delete` removes them
    (idempotent: safe on every exit path)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.ns = f"{run_id}-rt"
        self.fw = f"{run_id}-fw"
        #: Namespaces this router created (the core's, then one per access router).
        self.created: list[str] = []
        #: ``{link: {device, namespace, tc, link}}`` of every plan applied.
        self.applied: dict[str, dict[str, Any]] = {}

    def name(self, role: str) -> str:
        return f"{self.run_id}{role}"[:15]

    def _netns(self, ns: str) -> None:
        """Creates router namespace ``ns``, first recorded in the run's state file (the
        live engine's stale-run cleanup deletes every ``netns`` line of a dead run's file)."""
        for d in STATE_DIRS:
            f = Path(d) / f"{self.run_id}.state"
            if f.exists():
                with open(f, "a") as fh:
                    fh.write(f"netns {ns}\n")
                break
        _ip("netns", "add", ns)
        self.created.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        # A router: IPv4 forwarding in this namespace only; no reverse-path filter (packets
        # for server k arrive on its port, the route back to their source is server0's);
        # no IPv6, so nothing of its own goes into the links.
        for key, v in (("net.ipv6.conf.all.disable_ipv6", "1"), ("net.ipv6.conf.default.disable_ipv6", "1"),
                       ("net.ipv4.conf.all.rp_filter", "0"), ("net.ipv4.conf.default.rp_filter", "0"),
                       ("net.ipv4.ip_forward", "1")):
            _sysctl(ns, key, v)

    def _pair(self, a: tuple[str, str], b: tuple[str, str], off: Mapping[str, bool]) -> tuple[str, str]:
        """A veth pair ``a`` = (namespace, name) ↔ ``b``, offloads ``off`` on both ends, up,
        each end's next hop :data:`HOP` its peer; returns the two MACs."""
        _ip("link", "add", a[1], "netns", a[0], "type", "veth", "peer", "name", b[1], "netns", b[0])
        macs = []
        for ns, dev in (a, b):
            offloads(ns, dev, off)
            _ip("-n", ns, "link", "set", "dev", dev, "up")
            macs.append(_link(ns, dev)["address"])
        _ip("-n", a[0], "neigh", "replace", HOP, "lladdr", macs[1], "nud", "permanent", "dev", a[1])
        _ip("-n", b[0], "neigh", "replace", HOP, "lladdr", macs[0], "nud", "permanent", "dev", b[1])
        return macs[0], macs[1]

    def build(self, cfg: dict, base, hosts: list[tuple[str, str, str]]) -> None:
        """Wires the routers between the forwarder and the servers (``hosts``: the live
        engine's ``(node, namespace, device)``, in its host order) and applies the plans."""
        index = {n: k for k, (n, _, _) in enumerate(hosts)}
        servers = [(n, ns, dev) for n, ns, dev in hosts if n.startswith("server")]
        subs = [(n, ns, dev) for n, ns, dev in hosts if _SUB.match(n)]
        if servers:
            self._router(cfg, base, index, servers, subs)
        # Without a server among the hosts (flows between subscribers only) no packet
        # crosses a tree, in the model as here: no router, only the lines.
        if _line_qdisc(cfg):
            for n, ns, dev in subs:
                self._lines(cfg, base, n, ns, dev, index[n])

    def _router(self, cfg, base, index: Mapping[str, int], servers, subs) -> None:
        """The router namespace between the forwarder and ``servers``, with the trees."""
        self._netns(self.ns)
        lan_ends = []
        prefix = gateway = gw_mac = None
        off: dict[str, bool] = {}
        for node, ns, dev in servers:
            k = index[node]
            port = self.name(f"p{k}")
            old = _link(self.fw, port)
            off = offloads(self.fw, port)
            host = _link(ns, dev)
            if prefix is None:
                prefix, gateway = _gateway(ns, dev)
                gw_mac = old["address"]
            mtu = str(old.get("mtu", 1500))
            lan = self.name(f"l{k}")
            _ip("-n", self.fw, "link", "set", "dev", port, "down")
            _ip("-n", self.fw, "link", "set", "dev", port, "name", lan)
            _ip("-n", self.fw, "link", "set", "dev", lan, "netns", self.ns)
            up = self.name(f"u{k}")
            _ip("link", "add", port, "netns", self.fw, "address", old["address"], "mtu", mtu, "type", "veth",
                "peer", "name", up, "netns", self.ns, "address", host["address"], "mtu", mtu)
            for n_, d_ in ((self.fw, port), (self.ns, up)):
                got = offloads(n_, d_, off)
                if got != off:
                    raise _apply.DeployError(f"offloads of {d_} in {n_}: {got} after setting {off}")
                _ip("-n", n_, "link", "set", "dev", d_, "up")
            _ip("-n", self.ns, "link", "set", "dev", lan, "up")
            lan_ends.append((lan, live_address(ns, dev), host["address"]))
        if len(lan_ends) == 1:
            lan_dev = lan_ends[0][0]
        else:  # one device towards every server: a bridge with the servers' ends as ports
            lan_dev = self.name("br")
            _ip("-n", self.ns, "link", "add", lan_dev, "type", "bridge")
            for lan, _, _ in lan_ends:
                _ip("-n", self.ns, "link", "set", "dev", lan, "master", lan_dev)
            _ip("-n", self.ns, "link", "set", "dev", lan_dev, "up")
        for _, addr, mac in lan_ends:
            _ip("-n", self.ns, "neigh", "replace", addr, "lladdr", mac, "nud", "permanent", "dev", lan_dev)
            _ip("-n", self.ns, "route", "replace", f"{addr}/32", "dev", lan_dev)
        down = self.name(f"u{index[servers[0][0]]}")
        _ip("-n", self.ns, "neigh", "replace", gateway, "lladdr", gw_mac, "nud", "permanent", "dev", down)
        addrs = {n: live_address(ns, dev) for n, ns, dev in subs}
        m = _d._prepare(_with_prefix(cfg), None, base)[2]
        pairs = trees(m)
        if len(pairs) == 1:
            # One access router: both trees on this namespace's own devices.
            _ip("-n", self.ns, "route", "replace", prefix, "via", gateway, "dev", down, "onlink")
            acc, dl, ul = pairs[0]
            self._apply(dl, tree_plan(cfg, "core", dl, down, base, addrs), self.ns, down)
            self._apply(ul, tree_plan(cfg, acc, ul, lan_dev, base, addrs), self.ns, lan_dev)
        else:
            self._access_routers(cfg, base, m, pairs, addrs, off, prefix, gateway, down, lan_dev,
                                 [a for _, a, _ in lan_ends])

    def _lines(self, cfg, base, node: str, ns: str, dev: str, k: int) -> None:
        """Subscriber ``node``'s line disciplines: ``sub<i>.up`` on its device's egress;
        ``sub<i>.down`` (the access router's port towards it) on an IFB device its
        device's ingress redirects every packet to (``tc`` ingress + ``mirred``): the
        queue the line's rate forms there, after the forwarder's delay rather than before
        it (a constant delay in front of a FIFO server does not change its queue)."""
        self._apply(f"{node}.up", line_plan(cfg, node, f"{node}.up", dev, base), ns, dev)
        ifb = self.name(f"i{k}")
        # a veth's queue length (an ifb's is 32): htb takes its direct_qlen from it, and
        # the plan was tried on a veth
        _ip("-n", ns, "link", "add", ifb, "txqueuelen", "1000", "type", "ifb")
        _ip("-n", ns, "link", "set", "dev", ifb, "up")
        self._apply(f"{node}.down", line_plan(cfg, node, f"{node}.down", ifb, base), ns, ifb)
        for args in (("qdisc", "add", "dev", dev, "handle", "ffff:", "ingress"),
                     ("filter", "add", "dev", dev, "parent", "ffff:", "protocol", "all", "prio", "1", "u32",
                      "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", ifb)):
            r = _apply._tc(ns, *args)
            if r.returncode != 0:
                raise _apply.DeployError(f"tc {' '.join(args)} in {ns}: {r.stderr.strip() or 'failed'}")

    def _access_routers(self, cfg, base, m, pairs, addrs, off, prefix, gateway, down, lan_dev, server_addrs) -> None:
        """K access routers: one namespace each (``<run>-a<a>``) between this one's two
        sides, its downstream tree on its egress back towards the forwarder's side (``dn``)
        and its upstream tree on its egress towards the servers' side (``up``). This
        namespace hands each packet to its subscriber's access router and takes it back:
        downstream by destination (a route per subscriber), upstream by source (a rule per
        subscriber), and what comes back from an access router by the device it arrives on
        (a rule per device, tried first), so no packet loops."""
        of = {lk["from"]: lk["to"] for lk in m["links"] if _SUB.match(lk["from"])}
        out_table = 100  # what comes back from an access router's downstream side: the forwarder
        _ip("-n", self.ns, "route", "replace", prefix, "via", gateway, "dev", down, "onlink", "table", str(out_table))
        for a, (acc, dl, ul) in enumerate(pairs):
            ns_a = f"{self.run_id}-a{a}"
            self._netns(ns_a)
            north, south = self.name(f"n{a}"), self.name(f"s{a}")
            up_dev, dn_dev = self.name("up"), self.name("dn")
            self._pair((self.ns, north), (ns_a, up_dev), off)
            self._pair((self.ns, south), (ns_a, dn_dev), off)
            # the access router: subscribers (the prefix) down, servers (their /32s) up
            _ip("-n", ns_a, "route", "replace", prefix, "via", HOP, "dev", dn_dev, "onlink")
            for addr in server_addrs:
                _ip("-n", ns_a, "route", "replace", f"{addr}/32", "via", HOP, "dev", up_dev, "onlink")
            table = str(200 + a)
            _ip("-n", self.ns, "route", "replace", "default", "via", HOP, "dev", south, "onlink", "table", table)
            _ip("-n", self.ns, "rule", "add", "iif", north, "lookup", "main", "priority", "100")
            _ip("-n", self.ns, "rule", "add", "iif", south, "lookup", str(out_table), "priority", "110")
            for n, addr in addrs.items():
                if of.get(n) == acc:
                    _ip("-n", self.ns, "route", "replace", f"{addr}/32", "via", HOP, "dev", north, "onlink")
                    _ip("-n", self.ns, "rule", "add", "from", f"{addr}/32", "lookup", table, "priority", "200")
            self._apply(dl, tree_plan(cfg, "core", dl, dn_dev, base, addrs), ns_a, dn_dev)
            self._apply(ul, tree_plan(cfg, acc, ul, up_dev, base, addrs), ns_a, up_dev)

    def _apply(self, link: str, p: _d.Plan, ns: str, dev: str) -> None:
        _apply.apply(p, ns)
        self.applied[link] = {"node": p.node, "device": dev, "namespace": ns, "tc": p.tc, "nft": p.nft,
                              "table": p.table, "nf_conntrack_acct": None, "link": link}

    def collect(self) -> None:
        """Each applied plan's ``tc -s qdisc`` counters, into ``applied[link]["tc_stats"]``."""
        for a in self.applied.values():
            r = _apply._tc(a["namespace"], "-s", "-j", "qdisc", "show", "dev", a["device"])
            a["tc_stats"] = json.loads(r.stdout or "[]") if r.returncode == 0 else []

    def delete(self) -> None:
        """Removes the router namespaces (their devices, and with them their veth peers in
        the forwarder's namespace, go with them)."""
        while self.created:
            ns = self.created.pop()
            if Path("/run/netns", ns).exists():
                _ip("netns", "delete", ns)


def run_id_of(hosts: list[tuple[str, str, str]]) -> str:
    """The live run's id: its host namespaces are ``<run id>-h<k>``."""
    return hosts[0][1].rsplit("-", 1)[0]


__all__ = ["is_isp", "plans", "tree_plan", "line_plan", "wire_config", "live_address", "planned_address",
           "offloads", "Router", "run_id_of", "PLAN_PREFIX"]
