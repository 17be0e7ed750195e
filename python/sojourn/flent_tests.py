"""Flent's named tests as workloads (docs/tests.md): ``[[workload]] kind = "rrul"`` (and
``rrul_be``, ``tcp_nup``, ``tcp_ndown``, ``tcp_upload``, ``tcp_download``, ``rtt_fair``,
``voip``, ``game``) expands, before the engine sees the file, into the engine's own
workloads: ``bulk`` TCP flows with Flent's DSCP marks, ``ping`` probes (ICMP-like and
irtt-like UDP) and ``isochronous`` streams. Each workload the expansion writes carries a
``test`` table (test name, Flent series name, role) that the analysis reads back from
experiment.json: summary.json's ``tests`` block, the report's Flent plots and
``sojourn flent``.

Where the test runs: between a *server* (netperf's far end, the side downloads come from)
and a *client* (where Flent runs). On a dumbbell, pair ``i`` (``pair = i``, default 0) has
the server on the sender side ``s<i>`` and the client on the receiver side ``d<i>``, so
downloads cross ``bottleneck`` and uploads ``reverse``; on a graph give ``server`` and
``client`` node names.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Optional

from ._config import ConfigError

__all__ = ["TESTS", "expand", "DSCP"]

#: DSCP code points of the per-hop behaviours Flent's tests name (RFC 2474 class selectors
#: CSn = 8n; RFC 3246 EF = 46): rrul marks its four flows each way CS0 (BE), CS1 (BK),
#: CS5 and EF, and its UDP probes EF, CS1 and CS0.
DSCP = {"BE": 0, "BK": 8, "CS5": 40, "EF": 46}

#: Flent's sampling step (``--step-size``, default 0.2 s), which it also gives ping and irtt
#: as their interval.
STEP = "200ms"

#: Keys a test table accepts, by test (beyond ``kind``).
_COMMON = {"pair", "server", "client", "start", "stop", "cc", "ping_interval"}
_KEYS = {
    "rrul": _COMMON,
    "rrul_be": _COMMON,
    "tcp_upload": _COMMON,
    "tcp_download": _COMMON,
    "tcp_nup": _COMMON | {"streams"},
    "tcp_ndown": _COMMON | {"streams"},
    "rtt_fair": (_COMMON - {"pair", "server", "client"}) | {"pairs"},
    "voip": (_COMMON - {"cc"}) | {"codec", "jitter_buffer", "direction", "dscp"},
    "game": (_COMMON - {"cc"}) | {"interval", "packet_size", "direction", "dscp"},
}
TESTS = tuple(_KEYS)

#: Frame bytes around an RTP payload: RTP 12 + UDP 8 + IPv4 20 + Ethernet 14.
RTP_FRAME_OVERHEAD = 54
#: Frame bytes around a UDP payload: UDP 8 + IPv4 20 + Ethernet 14.
UDP_FRAME_OVERHEAD = 42


def _err(file: str, path: str, msg: str) -> ConfigError:
    return ConfigError(file, path, msg)


def expand(cfg: dict, file: str = "<dict>") -> dict:
    """``cfg`` with every named-test workload replaced by the workloads it stands for (a
    copy; ``cfg`` itself is returned when it has none). Raises :class:`ConfigError` (one
    line naming the key) for a bad test parameter."""
    wl = cfg.get("workload")
    if not isinstance(wl, list) or not any(isinstance(w, dict) and w.get("kind") in _KEYS for w in wl):
        return cfg
    out = copy.deepcopy(cfg)
    topo = out.get("topology") if isinstance(out.get("topology"), dict) else {}
    new: list = []
    any_test = False
    for i, w in enumerate(wl):
        if not (isinstance(w, dict) and w.get("kind") in _KEYS):
            new.append(copy.deepcopy(w))
            continue
        any_test = True
        new.extend(_expand_one(w, f"workload[{i}]", topo, file))
    out["workload"] = new
    if any_test:
        # Flent samples every 0.2 s and plots per-flow throughput: record the same unless
        # the file says otherwise.
        rec = out.setdefault("record", {})
        if isinstance(rec, dict):
            rec.setdefault("interval", STEP)
            rec.setdefault("flows", True)
    return out


def _endpoints(w: dict, path: str, topo: dict, file: str) -> tuple[str, str]:
    """(server, client) node names of a single-path test."""
    has_names = "server" in w or "client" in w
    if has_names:
        if "pair" in w:
            raise _err(file, f"{path}.pair", "give either server/client or pair, not both")
        for k in ("server", "client"):
            if not isinstance(w.get(k), str):
                raise _err(file, f"{path}.{k}", "required with server/client (a node name)")
        if w["server"] == w["client"]:
            raise _err(file, f"{path}.client", "must differ from `server`")
        return w["server"], w["client"]
    if topo.get("kind", "dumbbell") != "dumbbell":
        raise _err(file, f"{path}.server", "required (node names) on a graph topology, with `client`")
    pairs = topo.get("pairs", 1)
    pair = w.get("pair", 0)
    if not isinstance(pair, int) or isinstance(pair, bool) or not isinstance(pairs, int) or not 0 <= pair < pairs:
        raise _err(file, f"{path}.pair", f"expected a pair index in 0..{pairs if isinstance(pairs, int) else '?'}, got {pair!r}")
    return f"s{pair}", f"d{pair}"


def _count(w: dict, path: str, key: str, default: int, file: str) -> int:
    v = w.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 64:
        raise _err(file, f"{path}.{key}", f"expected a whole number of streams in 1..64, got {v!r}")
    return v


def _expand_one(w: dict, path: str, topo: dict, file: str) -> list:
    name = w["kind"]
    for k in w:
        if k != "kind" and k not in _KEYS[name]:
            from difflib import get_close_matches

            hint = get_close_matches(k, sorted(_KEYS[name]), n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise _err(file, f"{path}.{k}", f"unknown key for the {name} test{more}; known: {', '.join(sorted(_KEYS[name]))}")
    common = {k: w[k] for k in ("start", "stop") if k in w}
    ping_interval = w.get("ping_interval", STEP)
    tcp = dict(common)
    if "cc" in w:
        tcp["cc"] = w["cc"]

    def bulk(src: str, dst: str, label: str, role: str, dscp: int = 0) -> dict:
        t = {"kind": "bulk", "from": src, "to": dst, **tcp,
             "test": {"name": name, "series": label, "role": role, "source": path}}
        if dscp:
            t["dscp"] = dscp
        return t

    def ping(src: str, dst: str, label: str, protocol: str = "icmp", dscp: int = 0) -> dict:
        t = {"kind": "ping", "protocol": protocol, "from": src, "to": dst, "interval": ping_interval, **common,
             "test": {"name": name, "series": label, "role": "ping", "source": path}}
        if dscp:
            t["dscp"] = dscp
        return t

    if name == "rtt_fair":
        return _rtt_fair(w, path, topo, file, bulk, ping)
    server, client = _endpoints(w, path, topo, file)
    up = lambda label, dscp=0: bulk(client, server, label, "upload", dscp)  # noqa: E731
    down = lambda label, dscp=0: bulk(server, client, label, "download", dscp)  # noqa: E731
    icmp = ping(client, server, "Ping (ms) ICMP")
    if name == "rrul":
        # Flent's rrul: four TCP flows each way marked BE, BK, CS5 and EF, ICMP ping and
        # three irtt-like UDP round trips marked EF, BK and BE.
        out = [up(f"TCP upload {m}", DSCP[m]) for m in ("BE", "BK", "CS5", "EF")]
        out += [down(f"TCP download {m}", DSCP[m]) for m in ("BE", "BK", "CS5", "EF")]
        out += [ping(client, server, f"Ping (ms) UDP {m}", "udp", DSCP[m]) for m in ("EF", "BK", "BE")]
        return out + [icmp]
    if name == "rrul_be":
        # The same eight flows and probes, every one best effort (rrul_be's series names).
        sfx = ["", "2", "3", "4"]
        out = [up(f"TCP upload BE{s}") for s in sfx] + [down(f"TCP download BE{s}") for s in sfx]
        out += [ping(client, server, f"Ping (ms) UDP BE{k}", "udp") for k in (1, 2, 3)]
        return out + [icmp]
    if name == "tcp_upload":
        return [up("TCP upload"), icmp]
    if name == "tcp_download":
        return [down("TCP download"), icmp]
    if name == "tcp_nup":
        n = _count(w, path, "streams", 4, file)
        return [up(f"TCP upload::{k + 1}") for k in range(n)] + [icmp]
    if name == "tcp_ndown":
        n = _count(w, path, "streams", 4, file)
        return [down(f"TCP download::{k + 1}") for k in range(n)] + [icmp]
    return _isochronous(w, path, file, name, server, client, common, icmp)


def _rtt_fair(w: dict, path: str, topo: dict, file: str, bulk: Callable, ping: Callable) -> list:
    """Flent's rtt_fair: one flow each way and an ICMP ping to each of several hosts at
    different distances; here the pairs of a dumbbell, whose RTTs differ by their
    `pair_delays`. Flent marks them BE, BE, BK, BK (labels BE1, BE2, BK1, BK2)."""
    if topo.get("kind", "dumbbell") != "dumbbell":
        raise _err(file, f"{path}.kind", "rtt_fair runs on a dumbbell (one pair per RTT, `pair_delays`)")
    n = topo.get("pairs", 1)
    sel = w.get("pairs", "all")
    if sel == "all" and isinstance(n, int):
        idx = list(range(n))
    elif isinstance(sel, list) and sel and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n for i in sel):
        idx = list(sel)
    else:
        raise _err(file, f"{path}.pairs", f'expected "all" or a list of pair indices in 0..{n}, got {sel!r}')
    if len(idx) < 2:
        raise _err(file, f"{path}.pairs", "rtt_fair needs at least two pairs (flows of different RTTs)")
    marks = ["BE", "BE", "BK", "BK"]
    out = []
    for k, i in enumerate(idx):
        mark = marks[k % 4]
        label = f"{mark}{(k // 4) * 2 + k % 2 + 1}"
        # Flent names a series by its label and its host; here the host is the server node.
        out.append(bulk(f"d{i}", f"s{i}", f"TCP upload {label} s{i}", "upload", DSCP[mark]))
        out.append(bulk(f"s{i}", f"d{i}", f"TCP download {label} s{i}", "download", DSCP[mark]))
        out.append(ping(f"d{i}", f"s{i}", f"Ping (ms) ICMP{k + 1} s{i}"))
    return out


def _isochronous(w: dict, path: str, file: str, name: str, server: str, client: str, common: dict, icmp: dict) -> list:
    """``voip`` and ``game``: isochronous UDP streams client->server (up), server->client
    (down) or both, plus an ICMP ping."""
    from .emodel import CODECS

    direction = w.get("direction", "both")
    if direction not in ("both", "up", "down"):
        raise _err(file, f"{path}.direction", f'expected "both", "up" or "down", got {direction!r}')
    dscp = w.get("dscp", DSCP["EF"])
    if not isinstance(dscp, int) or isinstance(dscp, bool) or not 0 <= dscp <= 63:
        raise _err(file, f"{path}.dscp", f"expected a DSCP code point in 0..63, got {dscp!r}")
    meta: dict[str, Any] = {"name": name}
    if name == "voip":
        codec = w.get("codec", "g711")
        if codec not in CODECS:
            raise _err(file, f"{path}.codec", f"unknown codec {codec!r}; known: {', '.join(CODECS)}")
        c = CODECS[codec]
        interval = f"{c.interval_ns // 1_000_000}ms"
        size = f"{c.payload_bytes + RTP_FRAME_OVERHEAD}B"
        meta["codec"] = codec
        jb = w.get("jitter_buffer", "60ms")
        _check_duration(jb, f"{path}.jitter_buffer", file)
        meta["jitter_buffer"] = jb
    else:
        # A game's state updates: sojourn's default 20 ms / 100 B of payload (a 50 Hz tick).
        interval = w.get("interval", "20ms")
        _check_duration(interval, f"{path}.interval", file)
        size = w.get("packet_size", f"{100 + UDP_FRAME_OVERHEAD}B")
    out = []
    for d, (a, b) in (("up", (client, server)), ("down", (server, client))):
        if direction in ("both", d):
            series = "VoIP" if name == "voip" else "Game"
            out.append({"kind": "isochronous", "from": a, "to": b, "interval": interval, "packet_size": size,
                        "dscp": dscp, **common,
                        "test": {**meta, "series": f"{series} {d}", "role": name, "direction": d, "source": path}})
    return out + [icmp]


def _check_duration(v: Any, path: str, file: str) -> None:
    from .units import parse_seconds

    try:
        ok = isinstance(v, str) and parse_seconds(v) >= 0
    except Exception:  # the engine's duration parser raises its own ConfigError
        ok = False
    if not ok:
        raise _err(file, path, f'expected a duration such as "60ms", got {v!r}')


def annotations(cfg: Optional[dict]) -> dict[int, dict]:
    """The ``test`` annotations of an expanded experiment, by workload index."""
    wl = (cfg or {}).get("workload") or []
    return {i: w["test"] for i, w in enumerate(wl) if isinstance(w, dict) and isinstance(w.get("test"), dict)}
