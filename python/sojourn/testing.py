"""The port harness (docs/adding-a-qdisc.md, "Prototype in Python, port to Rust"): the same
packet trace fed to two disciplines, and the first decision where they differ.

A trace is what one link's discipline saw: every arriving packet (with its time) and
every time the link asked for the next packet. :func:`record` takes it from a simulated
run; :func:`synthetic` makes one up. :func:`compare` replays it into two disciplines side
by side — a Python prototype and a built-in, or two built-ins — and compares each
decision: the enqueue verdict, the packet dequeued and its CE mark, and every drop with
its reason. Both are built with the context the recorded discipline had (its link's
random stream included), so a port that draws from ``ctx.rng()`` in the order the
prototype draws from its ``rng`` draws the same numbers.

Example::

    from sojourn import testing
    trace = testing.record("exp.toml", link="bottleneck", seed=1)
    result = testing.compare(trace, {"kind": "python", "module": "codel.py", "class": "CoDel"},
                             "codel", base_dir="examples/disciplines")
    assert result.agree, result
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from .api import Disciplines, Source, _engine_or_fail, _prepare, _resolver, _wrap_engine_error, check_seed

Spec = Union[str, Mapping[str, Any], type]


def record(source: Source, link: str = "bottleneck", seed: Optional[int] = None, duration: Optional[str] = None,
           overrides: Optional[Mapping[str, Any]] = None, base_dir: Optional[Union[str, Path]] = None,
           disciplines: Disciplines = None, max_ops: int = 5_000_000) -> Any:
    """Runs the experiment in the simulator and returns the trace of link ``link``'s
    discipline (a ``sojourn._engine.Trace``: ``len()``, ``counts()`` = (enqueues,
    dequeues), ``columns()``, ``truncated``). At most ``max_ops`` operations are kept (the
    run's first ones: a prefix of a trace is a trace)."""
    eng = _engine_or_fail()
    seed = check_seed(seed)
    cfg, name, base = _prepare(source, overrides, duration, base_dir)
    resolver = _resolver(name, base, disciplines)
    try:
        return eng.record_trace(cfg, str(base), link, seed, resolver, max_ops)
    except eng.ConfigError as e:
        raise _wrap_engine_error(name, e) from None


def synthetic(ops: Sequence[tuple], seed: int = 1, link_rate_bps: int = 0) -> Any:
    """A made-up trace: ``[("enqueue", t_ns, {"length": 1514, "flow": 3, "ecn": 2}),
    ("dequeue", t_ns), …]`` in time order. Packet fields (all optional): ``length`` (1514),
    ``flow`` (0), ``ecn`` (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE), ``dscp``, ``sport``,
    ``dport``, ``proto`` (17), ``src``/``dst`` (IPv4 addresses as integers), ``ct_bytes``.
    Packets are numbered (uid) 1, 2, … in order; ``seed`` seeds the disciplines' random
    generators."""
    return _engine_or_fail().Trace.synthetic(list(ops), seed, link_rate_bps)


@dataclass(frozen=True)
class Difference:
    """The first operation where two disciplines decided differently."""

    index: int
    op: str  # "enqueue" or "dequeue"
    time_ns: int
    uid: Optional[int]  # the arriving packet, for an enqueue
    a: str
    b: str

    def __str__(self) -> str:
        what = f"enqueue of packet uid {self.uid}" if self.op == "enqueue" else "dequeue"
        return (f"first difference at operation {self.index} ({what} at t={self.time_ns / 1e9:.9f} s): "
                f"a: {self.a}; b: {self.b}")


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare` found: ``agree`` over ``ops`` operations, or the first
    :class:`Difference` (``ops`` is then its index)."""

    ops: int
    difference: Optional[Difference]

    @property
    def agree(self) -> bool:
        return self.difference is None

    def __str__(self) -> str:
        if self.difference is None:
            return f"the two disciplines agree on all {self.ops} operations"
        return str(self.difference)


def compare(trace: Any, a: Spec, b: Spec, base_dir: Optional[Union[str, Path]] = None,
            disciplines: Disciplines = None) -> Comparison:
    """Replays ``trace`` into disciplines ``a`` and ``b`` and compares every decision.

    Each is a spec as an experiment file writes it (``"codel"``, ``{"kind": "codel", "ecn":
    True}``, ``{"kind": "python", "module": "codel.py", "class": "CoDel"}``; ``module``
    relative to ``base_dir``, default the current directory), a name in ``disciplines``,
    or a Python class itself (constructed with no parameters but ``rng``)."""
    eng = _engine_or_fail()
    registered = dict(disciplines or {})

    def spec(s: Spec, name: str) -> Any:
        if isinstance(s, type):
            registered[name] = s
            return name
        return dict(s) if isinstance(s, Mapping) else s

    sa, sb = spec(a, "prototype_a"), spec(b, "prototype_b")
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    resolver = _resolver("compare", base, registered)
    try:
        ops, diff = eng.replay(trace, sa, sb, str(base), resolver)
    except eng.ConfigError as e:
        raise _wrap_engine_error("compare", e) from None
    if diff is None:
        return Comparison(ops, None)
    return Comparison(ops, Difference(diff["index"], diff["op"], diff["time_ns"], diff["uid"], diff["a"], diff["b"]))
