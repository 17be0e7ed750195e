"""``sojourn deploy``: an experiment's disciplines and classifiers as Linux ``tc`` and ``nft``
commands (docs/deploy.md).

- :func:`plan` — the commands that realise one node's egress disciplines (each link's typed
  spec dumped as ``tc qdisc replace`` lines, behind htb where the link is shaped) and its
  ``[[classifier]]`` rules (one ``inet`` nftables table named after the experiment, mapping
  ``ct bytes`` to ``skb->priority`` on the output hook of a host or the forward hook of a
  router). What Linux cannot express is refused with :class:`NotDeployable`, one line naming
  the key, pointing to ``sojourn emulate``.
- :func:`check` — what this kernel offers (qdisc kinds probed in a throw-away network
  namespace, nft and its ``ct`` expressions, conntrack byte accounting) and what a plan needs
  that is missing.

Nothing here changes the machine's own network: probes run in a namespace of unique name,
deleted on every exit path. The plan never needs root; probing does.

What does change it lives beside this module: :mod:`sojourn.deploy.apply` (``sojourn deploy
apply`` / ``remove``: a plan put on live devices, atomically) and :mod:`sojourn.deploy.watch`
(``sojourn deploy threshold``: a 2LPS threshold re-chosen from the flows the kernel saw).
"""
from __future__ import annotations

import gzip
import os
import re
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from .._config import ConfigError, check_depth, load, set_key

#: The largest value ``ct bytes`` can hold (a 64-bit counter): the open end of the last range.
CT_BYTES_MAX = 2**64 - 1

#: Linux interface names: at most 15 bytes (IFNAMSIZ 16 with the NUL), no '/', no whitespace.
_IFNAME = re.compile(r"^[A-Za-z0-9_.:@+-]{1,15}$")


class NotDeployable(ConfigError):
    """The experiment asks for something Linux's tc/nftables cannot express (one line)."""


@dataclass
class LinkPlan:
    """One egress link of the node: the device and its ``tc`` command lines."""

    name: str
    to: str
    dev: str
    qdisc: str
    shaped: bool
    tc: list[str]


@dataclass
class Plan:
    """The commands for one node. ``tc`` are full command lines in order; ``nft`` is the
    ruleset text for ``nft -f`` (empty when the node classifies nothing); ``table`` the nft
    table it creates (``inet sojourn_<experiment>``)."""

    experiment: str
    node: str
    links: list[LinkPlan] = field(default_factory=list)
    nft: str = ""
    table: str = ""
    hooks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def tc(self) -> list[str]:
        return [c for link in self.links for c in link.tc]

    def kinds(self) -> list[str]:
        """The tc qdisc kinds the plan uses (``htb`` if shaped), in first-use order."""
        out: list[str] = []
        for c in self.tc:
            k = _tc_kind(c)
            if k and k not in out:
                out.append(k)
        return out

    def script(self) -> str:
        """The plan as a shell script (what ``sojourn deploy plan`` prints)."""
        lines = [f"# sojourn deploy plan: experiment {self.experiment!r}, node {self.node!r}"]
        lines += [f"# {n}" for n in self.notes]
        for link in self.links:
            lines.append(f"# link {link.name} ({self.node} -> {link.to}) on {link.dev}: {link.qdisc}"
                         + (" behind an htb shaper" if link.shaped else ""))
            lines += link.tc
        if self.nft:
            lines.append(f"# classifier: ct bytes -> skb->priority, hook {', '.join(self.hooks)} "
                         f"(table {self.table}; inet: IPv4 and IPv6)")
            lines.append("nft -f - <<'EOF'")
            lines.append(self.nft.rstrip("\n"))
            lines.append("EOF")
        return "\n".join(lines) + "\n"


def _tc_kind(cmd: str) -> Optional[str]:
    """``tc qdisc replace dev X root handle 1: pfifo limit 5`` -> ``pfifo`` (classes: the
    class kind, ``htb``)."""
    toks = cmd.split()
    for i, t in enumerate(toks[:-1]):
        if t in ("handle", "classid"):
            return toks[i + 2] if i + 2 < len(toks) else None
    return None


def _engine():
    from ..api import _engine_or_fail

    return _engine_or_fail()


def _link_keys(cfg: Mapping[str, Any]) -> dict[str, str]:
    """Link name -> the key path of its spec in the file (``topology.links[0]``,
    ``topology.links[0].reverse``, ``topology.bottleneck``…), for refusal messages."""
    topo = cfg.get("topology") or {}
    out: dict[str, str] = {}
    if topo.get("kind", "dumbbell") == "graph":
        for i, link in enumerate(topo.get("links") or []):
            if not isinstance(link, Mapping):
                continue
            name = link.get("name") or f"{link.get('from')}->{link.get('to')}"
            out[name] = f"topology.links[{i}]"
            out[f"{name}.reverse"] = f"topology.links[{i}].reverse"
    else:
        out["bottleneck"] = "topology.bottleneck"
        out["reverse"] = "topology.reverse"
    return out


def _link_key(keys: Mapping[str, str], name: str) -> str:
    if name in keys:
        return keys[name]
    if re.match(r"^s\d+\.", name):
        return "topology.sender_access"
    if re.match(r"^d\d+\.", name):
        return "topology.receiver_access"
    return f"link {name!r}"


def _table_name(experiment: str) -> str:
    """nft table of an experiment: ``sojourn_`` + the name with everything but letters,
    digits and ``_`` replaced by ``_`` (nft identifiers), at most 64 characters."""
    return ("sojourn_" + re.sub(r"[^A-Za-z0-9_]", "_", experiment))[:64]


def _classid(prio: int) -> str:
    """skb->priority as nft writes a tc handle: ``major:minor`` in hexadecimal."""
    return f"{prio >> 16:x}:{prio & 0xFFFF:x}"


def nft_map(ranges: Sequence[tuple[int, int]]) -> str:
    """``[(upto inclusive, priority)]`` -> ``0-6331208 : 1:6, 6331209-18446744073709551615 : 1:0``.
    The last range is closed at the counter's maximum (the model's ``*``)."""
    parts = []
    lo = 0
    for upto, prio in ranges:
        hi = min(int(upto), CT_BYTES_MAX)
        parts.append(f"{lo}-{hi} : {_classid(int(prio))}" if hi > lo else f"{lo} : {_classid(int(prio))}")
        if hi == CT_BYTES_MAX:
            break
        lo = hi + 1
    return ", ".join(parts)


def nft_ruleset(table: str, hooks: Sequence[str], ranges: Sequence[tuple[int, int]], original_only: bool,
                experiment: str) -> str:
    """The classifier's ruleset for ``nft -f``, one transaction: create the table if absent,
    delete it (so applying twice leaves exactly one copy), then define it."""
    ct = "ct original bytes" if original_only else "ct bytes"
    comment = re.sub(r'["\\\n]', "_", f"sojourn deploy: {experiment}")[:120]
    lines = [f"table inet {table}", f"delete table inet {table}", f"table inet {table} {{",
             f'\tcomment "{comment}"']
    for hook in hooks:
        lines += [f"\tchain {hook} {{",
                  f"\t\ttype filter hook {hook} priority filter; policy accept;",
                  f"\t\tmeta priority set {ct} map {{ {nft_map(ranges)} }}",
                  "\t}"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _prepare(source: Union[str, Path, Mapping[str, Any]], overrides: Optional[Mapping[str, Any]],
             base_dir: Union[None, str, Path] = None):
    cfg, name, base = load(source)
    if base_dir is not None:  # relative paths (size files) of a dict config resolve here
        base = Path(base_dir)
    if overrides:
        check_depth(dict(overrides), "overrides")
        for k, v in overrides.items():
            set_key(cfg, k, v, where="overrides")
    eng = _engine()
    try:
        # Python disciplines are resolved (imported, checked) so that the plan refuses
        # them as Linux cannot run them, naming `sojourn emulate`.
        from ..disciplines import Resolver

        model = eng.deploy_model(cfg, str(base), Resolver(base))
    except eng.ConfigError as e:
        raise ConfigError(name, getattr(e, "path", ""), getattr(e, "msg", str(e))) from None
    return cfg, name, model


def plan(source: Union[str, Path, Mapping[str, Any]], node: str, iface: Union[None, str, Mapping[str, str]] = None,
         overrides: Optional[Mapping[str, Any]] = None, device_rate: Optional[str] = None,
         base_dir: Union[None, str, Path] = None) -> Plan:
    """The ``tc``/``nft`` commands realising ``node``'s egress disciplines and classifiers.

    ``iface`` is the device of the node's only egress link, or ``{link: device}``; by default a
    link's device is its name. ``device_rate`` (e.g. ``"10Gbit"``): links slower than the device
    are shaped with htb at their rate, as are ``shaper = true`` links. Raises
    :class:`ConfigError` for a bad file or argument, :class:`NotDeployable` for what Linux
    cannot express. ``base_dir``: where relative paths of a dict ``source`` resolve."""
    cfg, name, m = _prepare(source, overrides, base_dir)
    if node not in m["nodes"]:
        raise ConfigError("--node", node, f"no node named {node!r}; nodes: {', '.join(m['nodes'])}")
    keys = _link_keys(cfg)
    out = [lk for lk in m["links"] if lk["from"] == node]
    if isinstance(iface, str):
        if len(out) != 1:
            raise ConfigError("--iface", iface, f"node {node!r} has {len(out)} egress links "
                              f"({', '.join(lk['name'] for lk in out) or 'none'}); give LINK=DEV for each")
        iface = {out[0]["name"]: iface}
    iface = dict(iface or {})
    for k in iface:
        if k not in [lk["name"] for lk in out]:
            raise ConfigError("--iface", k, f"no egress link of node {node!r} named {k!r}; its links: "
                              f"{', '.join(lk['name'] for lk in out) or 'none'}")
    dev_bps = None
    if device_rate is not None:
        try:
            dev_bps = _engine().parse_rate(device_rate)
        except ValueError as e:
            raise ConfigError("--device-rate", device_rate, str(e)) from None
    p = Plan(experiment=m["name"], node=node)
    for lk in out:
        key = _link_key(keys, lk["name"])
        dev = iface.get(lk["name"], lk["name"])
        if not _IFNAME.match(dev):
            raise ConfigError("--iface", dev, f"link {lk['name']!r}: {dev!r} is not a Linux interface name "
                              "(1-15 characters, no '/' or spaces); give --iface LINK=DEV")
        if lk["not_linux"] is not None:
            kind, reason = lk["not_linux"]
            raise NotDeployable(name, f"{key}.qdisc", f"{kind}: {reason.rstrip('.')} "
                                "(Linux cannot run it; use `sojourn emulate`)"
                                if "emulate" not in reason else f"{kind}: {reason}")
        shaped = bool(lk["shaper"]) or (dev_bps is not None and lk["rate_bps"] is not None and lk["rate_bps"] < dev_bps)
        if shaped and lk["rate_kind"] != "constant":
            raise NotDeployable(name, f"{key}.rate", f"a {lk['rate_kind']} rate changes over time; tc shapes at one "
                                "fixed rate (use `sojourn emulate`)")
        if shaped:
            tc = [f"tc {obj} replace dev {dev} {args}" for obj, args in lk["tc_shaped"]]
        elif lk.get("tc_lines"):
            # qdiscs, then classes and filters of htb/drr trees, in the order tc runs them
            tc = [f"tc {obj} replace dev {dev} {args}" for obj, args in lk["tc_lines"]]
        else:
            tc = [f"tc qdisc replace dev {dev} {args}" for args in lk["tc"]]
        p.links.append(LinkPlan(lk["name"], lk["to"], dev, lk["qdisc"], shaped, tc))
        if lk["delay_ns"] or lk["loss"]:
            p.notes.append(f"link {lk['name']}: its delay/loss are the network's own and are not deployed")
    # Classifiers at this node: one table, a chain per hook.
    hooks: list[str] = []
    ranges = None
    for i, c in enumerate(m["classifiers"]):
        if node not in c["nodes"]:
            continue
        for h in (["output", "forward"] if c["hook"] == "both" else [c["hook"]]):
            if h not in hooks:
                hooks.append(h)
        if ranges is not None and [tuple(r) for r in c["map"]] != ranges:
            raise NotDeployable(name, f"classifier[{i}].map", f"node {node!r} has two classifiers with different "
                                "maps; one nft map per node (use `sojourn emulate`)")
        ranges = [tuple(r) for r in c["map"]]
        if c.get("adapt_interval_s"):
            p.notes.append(f"classifier[{i}].adapt: the map starts at its written threshold; adapt it live with "
                           "`sojourn deploy threshold --watch --policy median`")
    if ranges is not None:
        node_ix = m["nodes"].index(node)
        direction, counted = m["conntrack"][node_ix] or ("both", "ip")
        if counted != "ip":
            ci = next(i for i, c in enumerate(m["classifiers"]) if node in c["nodes"])
            raise NotDeployable(name, f"classifier[{ci}].bytes", f"{counted!r}: nftables' ct bytes counts IP bytes "
                                "only (set bytes = \"ip\", or use `sojourn emulate`)")
        p.table = _table_name(m["name"])
        p.hooks = hooks
        p.nft = nft_ruleset(p.table, hooks, ranges, direction == "original", m["name"])
    if not p.links and not p.nft:
        raise ConfigError("--node", node, f"node {node!r} has no egress link and no classifier: nothing to deploy")
    return p


# ---------------------------------------------------------------------------------------------
# check: what this kernel offers

#: qdisc kinds probed, with the smallest arguments tc accepts for each.
PROBE_KINDS: dict[str, str] = {
    "pfifo": "pfifo", "bfifo": "bfifo", "pfifo_head_drop": "pfifo_head_drop", "pfifo_fast": "pfifo_fast",
    "prio": "prio", "htb": "htb", "drr": "drr", "tbf": "tbf rate 1mbit burst 10kb latency 50ms",
    "codel": "codel", "fq_codel": "fq_codel", "cake": "cake", "pie": "pie", "fq_pie": "fq_pie",
    "sfq": "sfq", "fq": "fq", "red": "red limit 400000 min 30000 max 90000 avpkt 1000 burst 55 bandwidth 10mbit",
    "netem": "netem", "dualpi2": "dualpi2",
}

#: kernel config symbol of each kind (for reading /proc/config.gz without root).
_CONFIG = {
    "pfifo": "NET_SCH_FIFO", "bfifo": "NET_SCH_FIFO", "pfifo_head_drop": "NET_SCH_FIFO", "pfifo_fast": None,
    "prio": "NET_SCH_PRIO", "htb": "NET_SCH_HTB", "drr": "NET_SCH_DRR", "tbf": "NET_SCH_TBF",
    "codel": "NET_SCH_CODEL",
    "fq_codel": "NET_SCH_FQ_CODEL", "cake": "NET_SCH_CAKE", "pie": "NET_SCH_PIE", "fq_pie": "NET_SCH_FQ_PIE",
    "sfq": "NET_SCH_SFQ", "fq": "NET_SCH_FQ", "red": "NET_SCH_RED", "netem": "NET_SCH_NETEM",
    "dualpi2": "NET_SCH_DUALPI2",
}


def is_root() -> bool:
    return os.geteuid() == 0


def _run(cmd: Sequence[str], input: Optional[str] = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), input=input, capture_output=True, text=True, timeout=20)


class Netns:
    """A throw-away network namespace of unique name (``sj`` + random hex) with one veth pair
    inside; deleted on exit, on exceptions and on SIGTERM/SIGHUP (turned into SystemExit)."""

    def __init__(self) -> None:
        self.name = "sjdep" + secrets.token_hex(4)
        self._old: dict[int, Any] = {}

    def __enter__(self) -> "Netns":
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._old[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread: rely on finally
                pass
        r = _run(["ip", "netns", "add", self.name])
        if r.returncode != 0:
            self._restore()
            raise OSError(f"ip netns add {self.name}: {r.stderr.strip()}")
        try:
            self.ip("link", "add", "sja", "type", "veth", "peer", "name", "sjb")
            self.ip("link", "set", "sja", "up")
            self.ip("link", "set", "sjb", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    @staticmethod
    def _on_signal(signum, frame):  # pragma: no cover - exercised by signals only
        raise SystemExit(128 + signum)

    def _restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

    def ip(self, *args: str) -> None:
        r = _run(["ip", "-n", self.name, *args])
        if r.returncode != 0:
            raise OSError(f"ip -n {self.name} {' '.join(args)}: {r.stderr.strip()}")

    def exec(self, *args: str, input: Optional[str] = None) -> subprocess.CompletedProcess:
        return _run(["ip", "netns", "exec", self.name, *args], input=input)

    def __exit__(self, *exc) -> None:
        _run(["ip", "netns", "del", self.name])
        self._restore()


def _config_gz() -> Optional[dict[str, str]]:
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            text = f.read()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            k, v = line[7:].split("=", 1)
            out[k] = v
    return out


def probe_qdiscs(ns: Netns) -> dict[str, bool]:
    """Each kind of :data:`PROBE_KINDS`: can ``tc qdisc add`` create it (on the namespace's veth)."""
    out = {}
    for kind, args in PROBE_KINDS.items():
        r = _run(["tc", "-n", ns.name, "qdisc", "add", "dev", "sja", "root", "handle", "1:", *args.split()])
        out[kind] = r.returncode == 0
        _run(["tc", "-n", ns.name, "qdisc", "del", "dev", "sja", "root"])
    return out


def nft_check(ruleset: str, ns: Optional[Netns] = None) -> tuple[bool, str]:
    """``nft -c -f -`` on a ruleset (inside ``ns`` if given): ``(ok, nft's message)``."""
    cmd = ["nft", "-c", "-f", "-"]
    r = ns.exec(*cmd, input=ruleset) if ns is not None else _run(cmd, input=ruleset)
    return r.returncode == 0, (r.stderr or r.stdout).strip()


#: A ruleset using a ct bytes map, as plans write them (the probe of ``check``).
PROBE_RULESET = nft_ruleset("sojourn_probe", ["output", "forward"], [(633120, 0x10006), (CT_BYTES_MAX, 0x10000)],
                            False, "probe")


@dataclass
class Check:
    """What ``deploy check`` found. ``qdiscs``: kind -> available (None = unknown); ``source``:
    how they were found; ``nft``: path or None; ``nft_ct``: ct bytes maps load (None = not
    tried); ``conntrack_acct``: ``nf_conntrack_acct`` in a fresh namespace before and after
    loading a ct bytes rule; ``missing``: what the plan needs that is absent; ``notes``."""

    qdiscs: dict[str, Optional[bool]]
    source: str
    nft: Optional[str]
    nft_ct: Optional[bool]
    nft_message: str = ""
    conntrack_acct: Optional[tuple[str, str]] = None
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check(plan_: Optional[Plan] = None) -> Check:
    """Probes this machine (see the module docstring); with a plan, lists what it needs that
    is missing. Probing qdiscs and nft needs root (a namespace); without it, qdisc kinds come
    from /proc/config.gz when readable."""
    nft = shutil.which("nft")
    res = Check(qdiscs={k: None for k in PROBE_KINDS}, source="unknown", nft=nft, nft_ct=None)
    if is_root() and shutil.which("ip") and shutil.which("tc"):
        with Netns() as ns:
            res.qdiscs = dict(probe_qdiscs(ns))
            res.source = f"tc qdisc add in a throw-away namespace ({ns.name}, deleted)"
            if nft:
                before = ns.exec("cat", "/proc/sys/net/netfilter/nf_conntrack_acct").stdout.strip() or "?"
                res.nft_ct, res.nft_message = nft_check(PROBE_RULESET, ns)
                if res.nft_ct:
                    ns.exec("nft", "-f", "-", input=PROBE_RULESET)
                    after = ns.exec("cat", "/proc/sys/net/netfilter/nf_conntrack_acct").stdout.strip() or "?"
                    res.conntrack_acct = (before, after)
    else:
        cfg = _config_gz()
        if cfg is not None:
            for k in PROBE_KINDS:
                sym = _CONFIG[k]
                res.qdiscs[k] = True if sym is None else cfg.get(sym) in ("y", "m")
            res.source = "/proc/config.gz (modules marked =m may still fail to load); run as root to probe"
            if cfg.get("NFT_CT") not in ("y", "m"):
                res.nft_ct = False
        else:
            res.source = "not probed: needs root (a network namespace) or a readable /proc/config.gz"
        res.notes.append("probing tc and nft, and the conntrack accounting check, need root (a network namespace)")
    if plan_ is not None:
        for k in plan_.kinds():
            if res.qdiscs.get(k) is False:
                sym = _CONFIG.get(k)
                res.missing.append(f"qdisc {k} (kernel: not available" + (f"; needs CONFIG_{sym})" if sym else ")"))
            elif res.qdiscs.get(k) is None:
                res.missing.append(f"qdisc {k} (unknown: not probed)")
        if plan_.nft:
            if not nft:
                res.missing.append("nft (Debian package nftables)")
            elif res.nft_ct is False:
                res.missing.append("nftables ct expressions (ct bytes map did not load)")
    return res


def check_text(c: Check) -> str:
    lines = [f"qdisc kinds ({c.source}):"]
    have = [k for k, v in c.qdiscs.items() if v]
    lack = [k for k, v in c.qdiscs.items() if v is False]
    unknown = [k for k, v in c.qdiscs.items() if v is None]
    if have:
        lines.append(f"  available: {' '.join(have)}")
    if lack:
        lines.append(f"  missing:   {' '.join(lack)}")
    if unknown:
        lines.append(f"  unknown:   {' '.join(unknown)}")
    lines.append(f"nft: {c.nft or 'not installed (Debian package nftables)'}")
    if c.nft_ct is not None:
        lines.append(f"nft ct bytes map: {'loads' if c.nft_ct else 'refused: ' + c.nft_message}")
    if c.conntrack_acct is not None:
        b, a = c.conntrack_acct
        lines.append(f"net.netfilter.nf_conntrack_acct in a fresh namespace: {b} before, {a} after loading a "
                     "ct bytes rule" + (" (the kernel turned accounting on for the rule)" if (b, a) == ("0", "1") else ""))
    lines += [f"note: {n}" for n in c.notes]
    return "\n".join(lines) + "\n"


__all__ = ["Plan", "LinkPlan", "NotDeployable", "Check", "plan", "check", "check_text", "nft_ruleset", "nft_map",
           "nft_check", "Netns", "PROBE_KINDS", "CT_BYTES_MAX"]

