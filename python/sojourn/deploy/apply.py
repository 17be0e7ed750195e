"""``sojourn deploy apply`` / ``remove``: a plan (:func:`sojourn.deploy.plan`) put on a live
interface, all or nothing, and taken off again (docs/deploy.md, "apply and remove").

The rules, in the order :func:`apply` follows them:

1. **Privilege first.** Changing qdiscs and nftables needs CAP_NET_ADMIN (and CAP_SYS_ADMIN
   to enter a named namespace); without it: :class:`PrivilegeError`, one line, nothing done.
2. **Trial before touching anything.** Every device's tc commands run first on a veth of a
   throw-away namespace (:class:`sojourn.deploy.Netns`), and the nft ruleset is checked with
   ``nft -c`` in the target namespace. A qdisc kind this kernel lacks, an argument tc
   refuses, a missing ``nft`` or a ruleset nft refuses stops here: :class:`DeployError`
   naming it, nothing changed. The trial also yields the exact tree the plan produces
   (``tc -j qdisc show`` and ``tc class show``), used to recognise the plan later.
3. **Only over a default qdisc or over itself.** A device whose root qdisc is the kernel's
   default (handle ``0:``: noqueue, pfifo_fast, mq, fq_codel as default_qdisc) is changed;
   one already carrying exactly the plan's tree is left alone (applying twice changes
   nothing); any other tree is someone else's and is refused (remove it first). So the state
   to restore on rollback and on ``remove`` is always "the kernel's default", and
   ``tc qdisc del dev DEV root`` restores it exactly.
4. **tc, then nft, rolled back on failure.** tc commands run device by device; if one
   fails, every device this apply changed gets its default back and the error names the
   failing command. The classifier is one ``nft -f`` transaction (atomic in the kernel: the
   whole table or nothing); if it fails, the tc changes are rolled back the same way.
5. **Conntrack byte accounting.** After the ruleset is loaded, ``nf_conntrack_acct`` is read
   in the target namespace; the kernel turns it on when a ``ct bytes`` rule loads (measured:
   0 -> 1). If it still reads 0, apply sets it to 1 and says so (``ct bytes`` would read 0
   for every connection otherwise, and the map would put every flow in its first band).

Everything carries the experiment's name: the nft table is ``inet sojourn_<experiment>``
with a ``comment``; tc qdiscs cannot carry a name, so the plan's handles (documented in
docs/deploy.md) are what identifies them, and :func:`remove` only removes a tree identical
to the one its plan produces.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from .. import deploy as _d

ACCT = "/proc/sys/net/netfilter/nf_conntrack_acct"

#: tc's messages when a qdisc kind is not in the kernel (module absent / not built).
_UNKNOWN_KIND = re.compile(r"(Unknown qdisc|Specified qdisc kind is unknown|qdisc kind is unknown|"
                           r"No such file or directory.*kind|Error: Specified qdisc not found)", re.I)

# Linux capability bits (include/uapi/linux/capability.h).
CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21


class DeployError(RuntimeError):
    """Something on the machine's side prevents apply/remove (one line; nothing left half done)."""


class PrivilegeError(DeployError):
    """apply/remove need CAP_NET_ADMIN (root)."""


def _caps() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def require_privilege(what: str, netns: Optional[str] = None) -> None:
    """Raises :class:`PrivilegeError` unless this process may change qdiscs and nftables (and
    enter ``netns``)."""
    caps = _caps()
    need = [CAP_NET_ADMIN] + ([CAP_SYS_ADMIN] if netns else [])
    if not all(caps >> b & 1 for b in need):
        raise PrivilegeError(f"{what} needs root (CAP_NET_ADMIN{' and CAP_SYS_ADMIN' if netns else ''}) "
                             f"to change qdiscs and nftables; run it as root (e.g. sudo sojourn {what} ...)")


def _tc(netns: Optional[str], *args: str) -> subprocess.CompletedProcess:
    return _d._run(["tc", *(["-n", netns] if netns else []), *args])


def _in_ns(netns: Optional[str], *args: str, input: Optional[str] = None) -> subprocess.CompletedProcess:
    return _d._run([*(["ip", "netns", "exec", netns] if netns else []), *args], input=input)


def _words(cmd: str) -> list[str]:
    """A plan's tc command line without the leading ``tc``."""
    w = cmd.split()
    assert w[0] == "tc", cmd
    return w[1:]


def _with_dev(cmd: str, dev: str) -> list[str]:
    w = _words(cmd)
    i = w.index("dev")
    return w[: i + 1] + [dev] + w[i + 2:]


#: Counters ``tc -j qdisc show`` prints among a qdisc's options (without ``-s``): not part of
#: the configuration (htb counts packets it sent unshaped, e.g. an IPv6 router solicitation
#: that left between the root and its class being created).
_COUNTERS = ("direct_packets_stat",)


def qdisc_state(dev: str, netns: Optional[str] = None) -> tuple[list[dict[str, Any]], str]:
    """The device's qdisc tree as ``tc -j qdisc show`` reports it (without ``refcnt``, which
    counts the device's tx queues, and :data:`_COUNTERS`) and its classes as ``tc class show`` prints them: what
    "the same tree" means for apply and remove. Raises :class:`DeployError` if the device
    does not exist."""
    r = _tc(netns, "-j", "qdisc", "show", "dev", dev)
    if r.returncode != 0:
        where = f" in namespace {netns}" if netns else ""
        raise DeployError(f"device {dev!r}{where}: {r.stderr.strip() or 'not found'}")
    tree = json.loads(r.stdout or "[]")
    for q in tree:
        q.pop("refcnt", None)
        for k in _COUNTERS:
            q.get("options", {}).pop(k, None)
    c = _tc(netns, "class", "show", "dev", dev)
    return tree, c.stdout.strip()


def is_default(tree: Sequence[dict[str, Any]]) -> bool:
    """The kernel's own root qdisc (handle 0:, created when the device came up)."""
    roots = [q for q in tree if q.get("root")]
    return not roots or roots[0].get("handle") == "0:"


def _root_text(tree: Sequence[dict[str, Any]]) -> str:
    roots = [q for q in tree if q.get("root")]
    return f"{roots[0]['kind']} {roots[0]['handle']}" if roots else "none"


@dataclass
class DevPlan:
    """One device: its commands, the tree they produce (from the trial) and what is on it now."""

    dev: str
    tc: list[str]
    want: tuple[list[dict[str, Any]], str]
    now: tuple[list[dict[str, Any]], str]

    @property
    def applied(self) -> bool:
        return self.now == self.want


@dataclass
class Report:
    """What apply/remove did. ``devices``: dev -> ``"applied"``, ``"unchanged"``,
    ``"removed"`` or ``"absent"``; ``nft``: ``"loaded"``, ``"deleted"``, ``"absent"`` or
    ``""``; ``acct``: ``nf_conntrack_acct`` after apply (``"1"``), ``acct_set``: whether
    apply had to set it."""

    action: str
    experiment: str
    node: str
    netns: Optional[str]
    table: str
    devices: dict[str, str] = field(default_factory=dict)
    nft: str = ""
    acct: Optional[str] = None
    acct_set: bool = False
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        where = f" (namespace {self.netns})" if self.netns else ""
        lines = [f"deploy {self.action}: experiment {self.experiment!r}, node {self.node!r}{where}"]
        for dev, what in self.devices.items():
            lines.append(f"  dev {dev}: {what}")
        if self.table:
            lines.append(f"  nft table inet {self.table}: {self.nft}")
        if self.acct is not None:
            lines.append(f"  net.netfilter.nf_conntrack_acct = {self.acct}"
                         + (" (was 0: set by sojourn so that ct bytes counts)" if self.acct_set
                            else " (on: the kernel enabled it for the ct bytes rule)"))
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def _by_dev(p: _d.Plan) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for link in p.links:
        out.setdefault(link.dev, []).extend(link.tc)
    return out


def _trial(p: _d.Plan, netns: Optional[str]) -> dict[str, tuple[list[dict[str, Any]], str]]:
    """Runs each device's commands on a scratch veth (throw-away namespace) and returns the
    tree each produces; checks the ruleset with ``nft -c`` in the target namespace. Raises
    :class:`DeployError` naming what this kernel or machine lacks."""
    if not shutil.which("tc"):
        raise DeployError("tc not found (Debian package iproute2)")
    if p.nft and not shutil.which("nft"):
        raise DeployError("nft not found (Debian package nftables); the plan has a classifier")
    out = {}
    with _d.Netns() as scratch:
        for dev, cmds in _by_dev(p).items():
            for cmd in cmds:
                r = _tc(scratch.name, *_with_dev(cmd, "sja"))
                if r.returncode != 0:
                    kind = _d._tc_kind(cmd) or "?"
                    msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
                    if _UNKNOWN_KIND.search(r.stderr) or (kind in _d.PROBE_KINDS and not _kind_available(scratch, kind)):
                        sym = _d._CONFIG.get(kind)
                        raise DeployError(f"this kernel has no qdisc {kind!r}"
                                          + (f" (CONFIG_{sym} not built)" if sym else "")
                                          + f"; needed by dev {dev}: {' '.join(_words(cmd))} (nothing changed)")
                    raise DeployError(f"tc refused {cmd!r} in a trial namespace: {msg} (nothing changed)")
            out[dev] = qdisc_state("sja", scratch.name)
            r = _tc(scratch.name, "qdisc", "del", "dev", "sja", "root")
    if p.nft:
        ok, msg = _d.nft_check(p.nft, None) if netns is None else _nft_check_in(netns, p.nft)
        if not ok:
            raise DeployError(f"nft refused the classifier ruleset: {msg.splitlines()[0] if msg else 'failed'} "
                              "(nothing changed)")
    return out


def _nft_check_in(netns: str, ruleset: str) -> tuple[bool, str]:
    r = _in_ns(netns, "nft", "-c", "-f", "-", input=ruleset)
    return r.returncode == 0, (r.stderr or r.stdout).strip()


def _kind_available(ns: _d.Netns, kind: str) -> bool:
    r = _tc(ns.name, "qdisc", "add", "dev", "sjb", "root", "handle", "1:", *_d.PROBE_KINDS[kind].split())
    _tc(ns.name, "qdisc", "del", "dev", "sjb", "root")
    return r.returncode == 0


def _check_netns(netns: Optional[str]) -> None:
    if netns is None:
        return
    r = _d._run(["ip", "netns", "list"])
    names = {ln.split()[0] for ln in r.stdout.splitlines() if ln.strip()}
    if netns not in names:
        raise DeployError(f"--netns {netns}: no such network namespace (ip netns list)")


def _restore_default(dev: str, netns: Optional[str]) -> Optional[str]:
    """``tc qdisc del dev DEV root``: the kernel puts its default qdisc back. Returns an
    error text if the device still does not carry a default tree."""
    _tc(netns, "qdisc", "del", "dev", dev, "root")
    try:
        tree, _ = qdisc_state(dev, netns)
    except DeployError as e:
        return str(e)
    return None if is_default(tree) else f"dev {dev} still has {_root_text(tree)}"


def _prepare(p: _d.Plan, netns: Optional[str], what: str) -> list[DevPlan]:
    require_privilege(f"deploy {what}", netns)
    _check_netns(netns)
    now = {dev: qdisc_state(dev, netns) for dev in _by_dev(p)}  # every device exists
    want = _trial(p, netns)
    return [DevPlan(dev, cmds, want[dev], now[dev]) for dev, cmds in _by_dev(p).items()]


def apply(p: _d.Plan, netns: Optional[str] = None, _fail_after: Optional[int] = None) -> Report:
    """Puts plan ``p`` on its devices (in ``netns``, default: this process's namespace), all
    or nothing (module docstring). ``_fail_after`` (tests only) makes the command after the
    first ``_fail_after`` tc commands fail, to exercise the rollback."""
    devs = _prepare(p, netns, "apply")
    rep = Report("apply", p.experiment, p.node, netns, p.table)
    for d in devs:
        if not d.applied and not is_default(d.now[0]):
            raise DeployError(f"dev {d.dev} carries {_root_text(d.now[0])}, not the kernel's default qdisc nor this "
                              f"plan's tree; remove it first (tc qdisc del dev {d.dev} root) - nothing changed")
    changed: list[str] = []
    done = 0

    def rollback(reason: str) -> DeployError:
        errs = [e for e in (_restore_default(dev, netns) for dev in changed) if e]
        back = (f"rolled back: {', '.join(changed)} restored to the kernel's default qdisc" if changed
                else "nothing had been changed")
        return DeployError(f"{reason}; {back}" + (f" (restore failed: {'; '.join(errs)})" if errs else ""))

    for d in devs:
        if d.applied:
            rep.devices[d.dev] = "unchanged (already this plan's tree)"
            continue
        changed.append(d.dev)
        for cmd in d.tc:
            args = _with_dev(cmd, d.dev)
            if _fail_after is not None and done == _fail_after:
                args = ["qdisc", "replace", "dev", d.dev, "root", "handle", "1:", "sojourn_injected_failure"]
            r = _tc(netns, *args)
            done += 1
            if r.returncode != 0:
                raise rollback(f"tc {' '.join(args)}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'failed'}")
        if qdisc_state(d.dev, netns) != d.want:
            raise rollback(f"dev {d.dev}: the tree after applying differs from the trial's")
        rep.devices[d.dev] = f"applied (was the default {_root_text(d.now[0])})"
    if p.nft:
        r = _in_ns(netns, "nft", "-f", "-", input=p.nft)
        if r.returncode != 0:
            msg = (r.stderr or r.stdout).strip().splitlines()
            raise rollback(f"nft -f: {msg[0] if msg else 'failed'}")
        rep.nft = "loaded (one nft -f transaction)"
        acct = _in_ns(netns, "cat", ACCT).stdout.strip()
        if acct == "0":
            w = _in_ns(netns, "sh", "-c", f"echo 1 > {ACCT}")
            if w.returncode != 0:
                raise rollback(f"{ACCT} reads 0 and could not be set: {w.stderr.strip()}")
            rep.acct_set = True
            acct = _in_ns(netns, "cat", ACCT).stdout.strip()
        rep.acct = acct or None
    return rep


def remove(p: _d.Plan, netns: Optional[str] = None) -> Report:
    """Takes plan ``p`` off its devices: a device carrying exactly the plan's tree gets the
    kernel's default qdisc back; one already at its default is left alone; any other tree is
    refused (nothing changed). The nft table is deleted if present (one command, atomic)."""
    devs = _prepare(p, netns, "remove")
    rep = Report("remove", p.experiment, p.node, netns, p.table)
    for d in devs:
        if not d.applied and not is_default(d.now[0]):
            raise DeployError(f"dev {d.dev} carries {_root_text(d.now[0])}, not this plan's tree; not removing it "
                              "(nothing changed)")
    for d in devs:
        if d.applied:
            err = _restore_default(d.dev, netns)
            if err:
                raise DeployError(f"tc qdisc del dev {d.dev} root: {err}")
            rep.devices[d.dev] = "removed (the kernel's default qdisc is back)"
        else:
            rep.devices[d.dev] = "absent (already the kernel's default)"
    if p.table:
        have = _in_ns(netns, "nft", "list", "table", "inet", p.table)
        if have.returncode == 0:
            r = _in_ns(netns, "nft", "delete", "table", "inet", p.table)
            if r.returncode != 0:
                raise DeployError(f"nft delete table inet {p.table}: {r.stderr.strip()}")
            rep.nft = "deleted"
        else:
            rep.nft = "absent"
        rep.notes.append("nf_conntrack_acct is left as it is (a namespace-wide setting other rules may rely on)")
    return rep


__all__ = ["apply", "remove", "Report", "DeployError", "PrivilegeError", "qdisc_state", "is_default",
           "require_privilege"]
