"""``sojourn emulate --kernel``: the kernel as an engine (docs/deploy.md, "The kernel as an
engine").

The experiment runs in the live engine's namespaces with its load generator (real TCP), but
each link's discipline is the **kernel's**: ``sojourn deploy apply`` puts the link's plan
(an htb shaper at the link's rate with the discipline under it, exactly ``deploy plan``'s
tc lines) on the sending host's device, and the node's ``[[classifier]]`` as its nft table
(``ct bytes`` -> ``skb->priority`` on the output hook), as seed 000's testbed did on its
client. This machine's kernel has no netem, so the links' propagation delay stays in
sojourn's user-space forwarder, which the hosts' devices lead to anyway: there each link
becomes a plain wire (a FIFO far faster than the link, no classifier) that only adds the
delay. The queue, the scheduling, the dropping and the classification all happen in the
kernel, before the forwarder.

What the kernel engine cannot do is refused before anything is created, one line naming the
key: a topology other than a graph whose links all start at hosts (a router's queue would
have to sit in the forwarder) or an isp tree (python/sojourn/kernel_isp.py runs its trees on
router namespaces of the run), a host with more than one egress link (one device), and
everything ``deploy plan``/``apply`` refuse (a discipline Linux lacks, a kind this kernel
lacks, naming the missing module).

Outputs: the live engine's schema with ``"engine": "kernel"``. Flows and their time series
come from the load generator as for ``emulate``; each link's entry in ``summary.json`` comes
from the kernel's counters (``tc -s qdisc show`` on the device: bytes, packets, drops,
overlimits from the set-up to the end of the load, warm-up included; throughput and
utilisation over that period), with ``sojourn_ms`` null (the kernel does
not export per-packet sojourn times). The forwarder's own link rows (the delay wires) are
not reported.
"""
from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

from . import deploy as _d
from . import kernel_isp as _isp
from .deploy import apply as _apply
from ._config import ConfigError

#: The forwarder's rate for a link whose queue is the kernel's: far above any link, so no
#: queue forms in the forwarder (it only delays).
WIRE_RATE = "1000Gbit"
#: Devices are veths (no rate of their own): every link is shaped at its rate by htb.
DEVICE_RATE = "1000Gbit"


def _hosts(cfg: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for w in cfg.get("workload") or []:
        if isinstance(w, Mapping):
            for k in ("from", "to"):
                v = w.get(k)
                for n in (v if isinstance(v, list) else [v]):
                    if isinstance(n, str) and n not in out:
                        out.append(n)
    return out


def plans(cfg: dict, name: str, base: Union[str, Path]) -> dict[str, _d.Plan]:
    """``{host node: its deploy plan}`` (device placeholder ``eth0``) for every host with an
    egress link; raises :class:`ConfigError` for what the kernel engine cannot run."""
    topo = cfg.get("topology") or {}
    if _isp.is_isp(cfg):
        return _isp.plans(cfg, name, base)
    if topo.get("kind", "dumbbell") != "graph":
        raise ConfigError(name, "topology.kind", "the kernel engine puts each link's discipline on the sending "
                          "host's device: use a graph topology whose links all start at hosts (routers' queues would "
                          "be in sojourn's forwarder; use `sojourn emulate` without --kernel)")
    hosts = _hosts(cfg)
    try:
        return _plans(cfg, name, base, topo, hosts)
    except ConfigError as e:
        if e.file == "<dict>":
            raise ConfigError(name, e.path, e.msg) from None
        raise


def _plans(cfg: dict, name: str, base, topo: Mapping[str, Any], hosts: list[str]) -> dict[str, _d.Plan]:
    m = _d._prepare(cfg, None, base)[2]
    out: dict[str, _d.Plan] = {}
    for i, link in enumerate(topo.get("links") or []):
        if isinstance(link, Mapping) and link.get("from") not in hosts:
            raise ConfigError(name, f"topology.links[{i}]", f"starts at {link.get('from')!r}, which ends no flow: the "
                              "kernel engine runs a link's discipline on its sending host's device")
    for node in hosts:
        egress = [lk for lk in m["links"] if lk["from"] == node]
        if not egress:
            continue
        if len(egress) > 1:
            raise ConfigError(name, "topology.links", f"host {node!r} sends on {len(egress)} links "
                              f"({', '.join(lk['name'] for lk in egress)}); a host has one device in the kernel engine")
        out[node] = _d.plan(cfg, node, "eth0", device_rate=DEVICE_RATE, base_dir=base)
    return out


def wire_config(cfg: dict) -> dict:
    """The configuration the forwarder runs: every link a fast FIFO wire with the link's
    delay and loss (no classifier: the kernel classifies), no link outputs of its own."""
    if _isp.is_isp(cfg):
        return _isp.wire_config(cfg, WIRE_RATE)
    w = copy.deepcopy(cfg)
    wire = {"kind": "pfifo", "limit": 100000}
    for link in (w.get("topology") or {}).get("links") or []:
        link["rate"] = WIRE_RATE
        link["qdisc"] = dict(wire)
        for k in ("shaper", "tx_ring", "framing_overhead"):
            link.pop(k, None)
        rev = link.get("reverse")
        if isinstance(rev, dict):
            for k in ("rate", "qdisc"):
                if k in rev:
                    rev[k] = WIRE_RATE if k == "rate" else dict(wire)
            for k in ("shaper", "tx_ring", "framing_overhead"):
                rev.pop(k, None)
    w.pop("classifier", None)
    w.setdefault("record", {})["links"] = "none"
    return w


def _tc_stats(ns: str, dev: str) -> list[dict[str, Any]]:
    r = _apply._tc(ns, "-s", "-j", "qdisc", "show", "dev", dev)
    return json.loads(r.stdout or "[]") if r.returncode == 0 else []


def check(source, overrides: Optional[Mapping[str, Any]] = None, duration: Optional[str] = None) -> dict[str, _d.Plan]:
    """Everything the kernel engine refuses, before anything is created: the file, the
    topology, the plans, and (as root) the kernel's support for every qdisc kind and the nft
    ruleset (tried in a throw-away namespace). Returns the plans."""
    from .api import _prepare

    cfg, name, base = _prepare(source, overrides, duration)
    ps = plans(cfg, name, base)
    try:
        _apply.require_privilege("emulate --kernel")
    except _apply.PrivilegeError as e:
        from .api import PrivilegeError

        raise PrivilegeError(str(e)) from None
    _trials(ps, name)
    return ps


def _trials(ps: Mapping[str, _d.Plan], name: str) -> None:
    """Each host's plan tried in a throw-away namespace: a qdisc kind this kernel lacks is a
    :class:`ConfigError` naming the module, before anything is created."""
    for node, p in ps.items():
        try:
            _apply._trial(p, None)
        except _apply.DeployError as e:
            raise ConfigError(name, f"node {p.node!r} (kernel engine)", str(e).replace(" (nothing changed)", "")) from None


def emulate_kernel(source, seed: Optional[int] = None, duration: Optional[str] = None,
                   overrides: Optional[Mapping[str, Any]] = None,
                   progress: Optional[Callable[[float, float, int], Optional[bool]]] = None,
                   base_dir: Optional[Union[str, Path]] = None, out: Optional[Union[str, Path]] = None,
                   publish: bool = True):
    """Runs one experiment with the kernel's qdiscs and nft rules (module docstring); returns
    a :class:`sojourn.Result` with ``summary["engine"] == "kernel"``; with ``out`` its time
    series streams to disk while the run proceeds and the result is written there (with
    ``publish=False`` it stays staged: ``Result.write`` publishes it)."""
    from .api import (EmulateError, PrivilegeError, _live_engine, _live_error, _prepare, discard_stream,
                      open_stream, stream_kwargs)
    from .results import Result

    eng = _live_engine()
    cfg, name, base = _prepare(source, overrides, duration, base_dir)
    ps = plans(cfg, name, base)
    try:
        _apply.require_privilege("emulate --kernel")
    except _apply.PrivilegeError as e:
        raise PrivilegeError(str(e)) from None
    _trials(ps, name)
    wire = wire_config(cfg)
    applied: dict[str, dict[str, Any]] = {}
    clock: dict[str, float] = {}

    isp = _isp.is_isp(cfg)
    router: list[_isp.Router] = []

    def hook(stage: str, hosts: list[tuple[str, str, str]]) -> None:
        if isp:  # the trees on the run's router namespace (kernel_isp)
            if stage == "setup":
                clock.setdefault("setup", time.monotonic())
                router.append(_isp.Router(_isp.run_id_of(hosts)))
                router[0].build(cfg, base, hosts)
                applied.update(router[0].applied)
            else:
                clock.setdefault("collect", time.monotonic())
                router[0].collect()
                router[0].delete()
            return
        for node, ns, dev in hosts:
            if node not in ps:
                continue
            if stage == "setup":
                clock.setdefault("setup", time.monotonic())
                p = _d.plan(cfg, node, dev, device_rate=DEVICE_RATE, base_dir=base)
                rep = _apply.apply(p, ns)
                applied[node] = {"device": dev, "namespace": ns, "tc": p.tc, "nft": p.nft, "table": p.table,
                                 "nf_conntrack_acct": rep.acct, "link": p.links[0].name}
            else:
                clock.setdefault("collect", time.monotonic())
                applied[node]["tc_stats"] = _tc_stats(ns, dev)

    stream = open_stream(out)
    t0 = time.perf_counter()
    try:
        raw = eng.emulate(wire, str(base), seed, progress, hook, **stream_kwargs(stream))
        res = Result.from_engine(raw, stream=stream)
    except BaseException as e:
        discard_stream(stream)
        mapped = _live_error(eng, name, e)
        if mapped is not None:
            raise mapped from None
        if isinstance(e, (_apply.DeployError, OSError)):
            raise EmulateError(f"kernel set-up: {e}") from None
        raise
    finally:  # the router namespace goes on every exit path (kernel_isp.Router.delete)
        for r in router:
            r.delete()
    wall = time.perf_counter() - t0
    if isp:  # subscribers.parquet against the file's plans, not the wires' (docs/isp.md)
        from .isp import attach as _isp_attach

        _isp_attach(res, cfg, base)
    s = res.summary
    s["engine"] = "kernel"
    m = _d._prepare(_isp._with_prefix(cfg) if isp else cfg, None, base)[2]
    # the kernel's counters run from the set-up to the collection: that is their period
    dur = clock.get("collect", 0.0) - clock.get("setup", 0.0)
    links = {}
    by_link = {a["link"]: a for a in applied.values()}
    for lk in m["links"]:
        a = by_link.get(lk["name"])
        if a is None:
            continue
        stats = a.get("tc_stats") or []
        root = next((q for q in stats if q.get("root")), {})
        leaves = [q for q in stats if not q.get("root")]
        sent_b = int(root.get("bytes", 0))
        sent_p = int(root.get("packets", 0))
        drops = sum(int(q.get("drops", 0)) for q in stats)
        rate = lk["rate_bps"]
        links[lk["name"]] = {
            "from": lk["from"], "to": lk["to"], "rate_bps": rate, "delay_ms": lk["delay_ns"] / 1e6,
            "qdisc": lk["qdisc"], "tx_packets": sent_p, "tx_bytes": sent_b,
            "throughput_bps": sent_b * 8 / dur if dur > 0 else 0.0,
            "utilisation": sent_b * 8 / (rate * dur) if rate and dur > 0 else 0.0,
            "drops": {"qdisc": drops} if drops else {}, "drops_total": drops, "ecn_marks": None,
            "sojourn_ms": None, "queue_packets_at_end": int(root.get("qlen", 0)),
            "overlimits": int(root.get("overlimits", 0)),
            "kernel_qdiscs": [f"{q.get('kind')} {q.get('handle')}" for q in [root, *leaves] if q],
            "counted_over_s": dur,
            "counted_from": "set-up to the end of the load (the kernel's counters include the warm-up)",
        }
    s["links"] = links
    s["kernel"] = {
        "wire": f"each link's delay and loss in sojourn's forwarder (a {WIRE_RATE} FIFO), no netem in this kernel",
        "hosts": {node: {k: v for k, v in a.items() if k != "tc_stats"} for node, a in applied.items()},
    }
    res.summary_text = json.dumps(s, indent=2, sort_keys=True) + "\n"
    from .live_probes import attach_live

    attach_live(res, cfg)  # probe statistics and named tests' totals (docs/tests.md)
    if res.histograms_table is not None:
        res.histograms_table = res.histograms_table.slice(0, 0)
    pkts = sum(l.get("tx_packets", 0) for l in links.values())
    res.perf = {"wall_seconds": wall, "link_packets_per_second": pkts / wall if wall > 0 else None}
    if out is not None and publish:
        res.write(out)
    return res


__all__ = ["emulate_kernel", "check", "plans", "wire_config", "WIRE_RATE", "DEVICE_RATE"]
