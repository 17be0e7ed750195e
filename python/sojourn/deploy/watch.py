"""``sojourn deploy threshold --watch``: an adaptive 2LPS threshold on a live classifier
(docs/deploy.md, "Adaptive threshold").

Finished connections and their sizes come from conntrack, through the ``conntrack`` tool
(Debian package conntrack). Only DESTROY events carry a connection's byte counters, and on
this kernel they come late: an entry is destroyed when conntrack's garbage collector reaps its
expired TIME_WAIT state (120 s after the close by default; measured here, no DESTROY event
within 10 s even with a 1 s TIME_WAIT timeout). So each interval the watcher lists the table
(``conntrack -L -p tcp -o extended,id``, which carries the counters) and takes every ASSURED
connection it has not seen before in state TIME_WAIT or CLOSE: a finished connection, seen
within an interval of its close, its counters final. A connection's size is counted as the
map counts it: both directions (``ct bytes``), or the original direction only (``ct
original bytes``). Counters exist because the map's ``ct bytes`` rule switched
``nf_conntrack_acct`` on (``deploy apply`` checks it).

Two policies decide the threshold, every ``interval`` (1 s):

- ``mg1``: the sizes of the connections finished in the last ``window`` seconds are the size
  distribution, their bytes over ``window`` × the link's rate the load; the optimal 2LPS
  threshold of that M/G/1 queue (:func:`sojourn.threshold.optimal_threshold`, on a coarse
  grid so that one decision takes well under the interval) replaces the map's when it moved
  by more than the hysteresis band (relative, default 20 %). With fewer than ``min_flows``
  connections in the window, or a load of 1 or more (no stationary M/G/1), the map is kept.
- ``median``: seed 000's prototype: the threshold becomes the median size of the
  connections finished in the last second (kept when none finished).

Each update is one ``nft -f`` transaction that redefines the experiment's table with the new
map (create if absent, delete, define: atomic in the kernel), so a packet sees either the old
or the new map, never a half-written one. Every decision is a JSON line
(:class:`Decision`).
"""
from __future__ import annotations

import json
import math
import re
import shutil
import statistics
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Callable, Optional, Sequence, TextIO

from .. import deploy as _d
from . import apply as _apply

POLICIES = ("mg1", "median")

#: A connection of ``conntrack -L -o extended,id``: protocol, state, first (original
#: direction) and second (reply) counters, id.
_ENTRY = re.compile(r"^\S+\s+\d+\s+(?P<proto>tcp)\s+\d+\s+\d+\s+(?P<state>[A-Z_]+)\s.*?"
                    r"packets=\d+ bytes=(?P<orig>\d+).*?packets=\d+ bytes=(?P<reply>\d+).*?id=(?P<id>\d+)")

#: TCP states of a connection that has finished (both FINs seen, or reset).
FINISHED = ("TIME_WAIT", "CLOSE")


@dataclass
class Decision:
    """One decision: seconds since the start, the policy, connections it looked at, the load
    estimate (mg1), the candidate threshold, the map's threshold after the decision, whether
    the map was rewritten, and why."""

    t_s: float
    policy: str
    flows: int
    load: Optional[float]
    candidate_bytes: Optional[int]
    threshold_bytes: int
    updated: bool
    reason: str

    def json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def parse_entry(line: str, original_only: bool = False) -> Optional[tuple[int, int]]:
    """``(conntrack id, size in bytes)`` of a finished (TIME_WAIT or CLOSE), ASSURED TCP
    connection of a ``conntrack -L -o extended,id`` line, else None."""
    m = _ENTRY.match(line.strip())
    if m is None or m["state"] not in FINISHED or "[ASSURED]" not in line:
        return None
    return int(m["id"]), int(m["orig"]) + (0 if original_only else int(m["reply"]))


def finished(netns: Optional[str], original_only: bool, seen: dict[int, int]) -> list[int]:
    """Sizes of the connections that finished since the last call (``seen``: id -> size of
    those already counted, pruned of entries that left the table)."""
    r = _apply._in_ns(netns, "conntrack", "-L", "-p", "tcp", "-o", "extended,id")
    now: dict[int, int] = {}
    for line in r.stdout.splitlines():
        e = parse_entry(line, original_only)
        if e is not None:
            now[e[0]] = e[1]
    new = [size for cid, size in now.items() if seen.get(cid) != size]
    seen.clear()
    seen.update(now)
    return new


def outside_band(current: int, candidate: float, hysteresis: float) -> bool:
    """Whether ``candidate`` lies outside ``current`` ± ``hysteresis`` × ``current``."""
    return abs(candidate - current) > hysteresis * current


def mg1_candidate(sizes: Sequence[int], window_s: float, rate_bps: float) -> tuple[float, Optional[float]]:
    """``(load, optimal 2LPS threshold or None)`` for connections of ``sizes`` finished in
    ``window_s`` on a link of ``rate_bps``. None when the load is 1 or more, or all sizes are
    equal."""
    from .. import dists
    from ..threshold import optimal_threshold

    load = sum(sizes) * 8.0 / (window_s * rate_bps)
    if not 0 < load < 1 or len(set(sizes)) < 2:
        # (one size only: every threshold at or above it is PS, below it FIFO-then-PS; the
        # 2LPS optimum is not defined by a search between sizes)
        return load, None
    r = optimal_threshold(dists.from_sizes(list(sizes)), load, n_grid=60, grid_points=12, xtol=1e-2)
    return load, float(r.thresholds[0])


class Watcher:
    """The decision loop, without I/O of its own: ``feed`` finished connections, ``tick`` once
    per interval; ``update(threshold)`` rewrites the map (a callable, so tests can watch it)."""

    def __init__(self, policy: str, threshold: int, update: Callable[[int], None], rate_bps: Optional[float],
                 window_s: float = 30.0, hysteresis: float = 0.2, min_flows: int = 20) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy {policy!r}: one of {', '.join(POLICIES)}")
        self.policy, self.threshold, self.update = policy, int(threshold), update
        self.rate_bps, self.window_s, self.hysteresis, self.min_flows = rate_bps, window_s, hysteresis, min_flows
        self.done: deque[tuple[float, int]] = deque()
        self.last_second: list[int] = []
        self.started: Optional[float] = None

    def feed(self, t: float, size: int) -> None:
        self.done.append((t, size))
        self.last_second.append(size)

    def tick(self, now: float, t_s: float) -> Decision:
        if self.started is None:
            self.started = now - t_s
        while self.done and self.done[0][0] < now - self.window_s:
            self.done.popleft()
        if self.policy == "median":
            sizes, self.last_second = self.last_second, []
            if not sizes:
                return Decision(t_s, "median", 0, None, None, self.threshold, False, "no connection finished")
            cand = int(statistics.median(sizes))
            if cand == self.threshold:
                return Decision(t_s, "median", len(sizes), None, cand, self.threshold, False, "unchanged")
            self._set(cand)
            return Decision(t_s, "median", len(sizes), None, cand, self.threshold, True, "median of the last second")
        self.last_second = []
        sizes = [s for _, s in self.done]
        if len(sizes) < self.min_flows:
            return Decision(t_s, "mg1", len(sizes), None, None, self.threshold, False,
                            f"fewer than {self.min_flows} connections in the window")
        assert self.rate_bps
        # the window is only as long as the watch so far (a load, not an average over idle time)
        span = min(self.window_s, max(now - self.started, 1e-3))
        load, cand = mg1_candidate(sizes, span, self.rate_bps)
        if cand is None:
            why = "load >= 1: no M/G/1 optimum" if load >= 1 else "one size only: no threshold between sizes"
            return Decision(t_s, "mg1", len(sizes), load, None, self.threshold, False, why)
        c = int(math.ceil(cand))
        if not outside_band(self.threshold, c, self.hysteresis):
            return Decision(t_s, "mg1", len(sizes), load, c, self.threshold, False,
                            f"within the ±{self.hysteresis:.0%} band")
        self._set(c)
        return Decision(t_s, "mg1", len(sizes), load, c, self.threshold, True, "optimum moved beyond the band")

    def _set(self, threshold: int) -> None:
        self.update(threshold)
        self.threshold = threshold


def _two_levels(p: _d.Plan, ranges: Sequence[tuple[int, int]]) -> tuple[int, int, int]:
    if len(ranges) != 2:
        raise _apply.DeployError(f"the node's map has {len(ranges)} ranges; the adaptive threshold is 2LPS "
                                 "(two ranges: young, old)")
    (t, young), (_, old) = ranges
    return int(t), int(young), int(old)


def watch(source, node: str, iface=None, netns: Optional[str] = None, policy: str = "mg1",
          duration_s: float = 60.0, interval_s: float = 1.0, window_s: float = 30.0, hysteresis: float = 0.2,
          min_flows: int = 20, rate_bps: Optional[float] = None, device_rate: Optional[str] = None,
          overrides=None, out: Optional[TextIO] = None) -> list[Decision]:
    """Watches finished connections at ``node`` (in ``netns``) for ``duration_s`` and adapts
    the threshold of its applied map (module docstring). The table must have been applied
    (``deploy apply``). Returns the decisions (also written to ``out`` as JSON lines)."""
    policy = "mg1" if policy == "m/g/1" else policy
    _apply.require_privilege("deploy threshold --watch", netns)
    if shutil.which("conntrack") is None:
        raise _apply.DeployError("conntrack not found (Debian package conntrack): the watcher lists the connection table")
    _apply._check_netns(netns)
    p = _d.plan(source, node, iface, overrides=overrides, device_rate=device_rate)
    if not p.nft:
        raise _apply.DeployError(f"node {node!r} has no classifier: nothing to adapt")
    cfg, _, m = _d._prepare(source, overrides)
    cls = next(c for c in m["classifiers"] if node in c["nodes"])
    threshold, young, old = _two_levels(p, [tuple(r) for r in cls["map"]])
    ct = m["conntrack"][m["nodes"].index(node)] or ("both", "ip")
    original_only = ct[0] == "original"
    if _apply._in_ns(netns, "nft", "list", "table", "inet", p.table).returncode != 0:
        raise _apply.DeployError(f"table inet {p.table} is not loaded{' in ' + netns if netns else ''}: "
                                 "run `sojourn deploy apply` first")
    if policy == "mg1" and rate_bps is None:
        rates = [lk.get("rate_bps") for lk in m["links"] if lk["from"] == node]
        rate_bps = rates[0] if rates and rates[0] else None
        if rate_bps is None:
            raise _apply.DeployError("policy mg1 needs the link's rate (a constant rate in the file, or --link-rate)")

    def update(t: int) -> None:
        ruleset = _d.nft_ruleset(p.table, p.hooks, [(t, young), (_d.CT_BYTES_MAX, old)], original_only, p.experiment)
        r = _apply._in_ns(netns, "nft", "-f", "-", input=ruleset)
        if r.returncode != 0:
            raise _apply.DeployError(f"nft -f (map update to {t} B): {r.stderr.strip()}")

    w = Watcher(policy, threshold, update, rate_bps, window_s, hysteresis, min_flows)
    seen: dict[int, int] = {}
    finished(netns, original_only, seen)  # connections already finished before the watch: not counted
    decisions: list[Decision] = []
    t0 = time.monotonic()
    k = 1
    while True:
        due = t0 + k * interval_s
        if due > t0 + duration_s + 1e-9:
            break
        time.sleep(max(0.0, due - time.monotonic()))
        now = time.time()
        for size in finished(netns, original_only, seen):
            w.feed(now, size)
        d = w.tick(now, round(k * interval_s, 3))
        decisions.append(d)
        if out is not None:
            out.write(d.json() + "\n")
            out.flush()
        k += 1
    return decisions


__all__ = ["watch", "Watcher", "Decision", "parse_entry", "finished", "outside_band", "mg1_candidate", "POLICIES"]
