"""Disciplines written in Python (issue 39, docs/python-disciplines.md): the examples under
examples/disciplines/ are the truths — a Python FIFO is byte-identical to the built-in
pfifo (Linux sch_fifo), a Python CoDel written from RFC 8289 and Linux's fixed-point
control law makes the built-in codel's decisions on a recorded trace — and every broken
class a new user could write is refused in one line before anything runs."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sojourn
from sojourn import testing
from sojourn.disciplines import DisciplineError, Discipline, Rng

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples" / "disciplines"


def _cfg(qdisc, duration="6s", ecn_pairs=(), pairs=4, cbr=None):
    """A dumbbell of `pairs` CUBIC bulk flows (ECN on `ecn_pairs`) and an optional CBR pair."""
    work = [{"kind": "bulk", "pairs": [p for p in range(pairs) if p not in ecn_pairs]}]
    if ecn_pairs:
        work.append({"kind": "bulk", "pairs": list(ecn_pairs), "ecn": True})
    n = pairs
    if cbr:
        work.append({"kind": "cbr", "pair": pairs, "rate": cbr})
        n += 1
    return {
        "name": "pydisc", "duration": duration, "warmup": "1s", "seed": 3,
        "topology": {"kind": "dumbbell", "pairs": n,
                     "bottleneck": {"rate": "10Mbit", "delay": "10ms", "qdisc": qdisc},
                     "access": {"rate": "1Gbit", "delay": "1ms"}},
        "transport": {"cc": "cubic"},
        "workload": work,
        "record": {"interval": "100ms", "links": ["bottleneck"], "packets": ["bottleneck"]},
    }


def _write(tmp: Path, name: str, code: str) -> Path:
    p = tmp / name
    p.write_text(textwrap.dedent(code))
    return p


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.suffix in (".json", ".parquet")}


def test_python_fifo_is_byte_identical_to_pfifo(tmp_path):
    py = {"kind": "python", "module": "fifo.py", "class": "Fifo", "limit": 50}
    builtin = {"kind": "pfifo", "limit": 50}
    a = sojourn.run(_cfg(py, cbr="3Mbit"), base_dir=EX, out=tmp_path / "py")
    b = sojourn.run(_cfg(builtin, cbr="3Mbit"), base_dir=EX, out=tmp_path / "builtin")
    # The queue overflowed (tail drops) and stood (a sojourn well above zero): the FIFO was exercised.
    link = b.summary["links"]["bottleneck"]
    assert link["drops"]["overlimit"] > 20
    fa, fb = _files(tmp_path / "py"), _files(tmp_path / "builtin")
    assert sorted(fa) == sorted(fb) and "packets.parquet" in fa
    # The simulation's outputs (experiment.json is the experiment as given, which names the
    # discipline; perf.json the wall-clock cost).
    for name in ("flows.parquet", "timeseries.parquet", "packets.parquet", "histograms.parquet"):
        assert fa[name] == fb[name], name
    # summary.json differs only in the discipline's label, as written in the file.
    sa, sb = json.loads(fa["summary.json"]), json.loads(fb["summary.json"])
    assert sa["links"]["bottleneck"].pop("qdisc") == "python(module=fifo.py, class=Fifo, limit=50)"
    assert sb["links"]["bottleneck"].pop("qdisc") == "pfifo(limit=50)"
    assert sa == sb


def test_python_codel_makes_the_builtin_codels_decisions_on_a_recorded_trace():
    cfg = _cfg({"kind": "codel", "ecn": True}, duration="8s", ecn_pairs=(0, 1))
    trace = testing.record(cfg, link="bottleneck", base_dir=EX)
    enq, deq = trace.counts()
    assert enq > 5000 and deq > 5000 and not trace.truncated
    py = {"kind": "python", "module": "codel.py", "class": "CoDel", "ecn": True}
    result = testing.compare(trace, py, {"kind": "codel", "ecn": True}, base_dir=EX)
    assert result.agree, str(result)
    assert result.ops == len(trace)
    # The trace holds both kinds of CoDel signal: the run marked and dropped.
    res = sojourn.run(cfg, base_dir=EX)
    link = res.summary["links"]["bottleneck"]
    assert link["drops"]["aqm"] > 0 and link["ecn_marks"] > 0


def test_the_harness_reports_the_first_difference_with_its_time():
    cfg = _cfg({"kind": "codel"}, duration="5s")
    trace = testing.record(cfg, link="bottleneck", base_dir=EX)
    # Two built-ins: CoDel drops at the head where a 1000-packet FIFO keeps everything.
    r = testing.compare(trace, "codel", {"kind": "pfifo"})
    assert not r.agree
    d = r.difference
    assert d.op == "dequeue" and "(aqm)" in d.a and "drops" not in d.b
    assert d.time_ns == trace.columns()["time_ns"][d.index]
    assert f"t={d.time_ns / 1e9:.9f} s" in str(r)
    # A prototype with another target parts from codel at some operation of the same trace.
    off = {"kind": "python", "module": "codel.py", "class": "CoDel", "target": "10ms"}
    r2 = testing.compare(trace, off, "codel", base_dir=EX)
    assert not r2.agree and r2.difference.index > 0


def _example_fifo() -> type:
    """examples/disciplines/fifo.py's class."""
    sys.path.insert(0, str(EX))
    try:
        from fifo import Fifo
    finally:
        sys.path.remove(str(EX))
    return Fifo


def test_a_synthetic_trace_and_a_class_given_directly():
    class Lifo(_example_fifo()):
        def dequeue(self, now_ns):
            return self.queue.pop() if self.queue else None

    ops = [("enqueue", 0, {"length": 100}), ("enqueue", 10, {"length": 200}), ("dequeue", 20), ("dequeue", 30)]
    trace = testing.synthetic(ops)
    r = testing.compare(trace, Lifo, "pfifo")
    # pfifo sends uid 1 first; the stack sends uid 2 first, at the first dequeue (t = 20 ns).
    assert (r.difference.index, r.difference.time_ns) == (2, 20)
    assert (r.difference.a, r.difference.b) == ("packet uid 2", "packet uid 1")


def test_registered_names_from_the_api(tmp_path):
    Fifo = _example_fifo()
    a = sojourn.run(_cfg({"kind": "my_fifo", "limit": 50}, duration="3s"), disciplines={"my_fifo": Fifo})
    b = sojourn.run(_cfg({"kind": "pfifo", "limit": 50}, duration="3s"))
    assert a.flows.equals(b.flows)
    c = sojourn.run(_cfg("my_fifo", duration="3s"), disciplines={"my_fifo": Fifo})
    d = sojourn.run(_cfg("pfifo", duration="3s"))
    assert c.flows.equals(d.flows)
    assert isinstance(Fifo(Rng(1)), Discipline)


def test_a_python_discipline_as_the_child_of_a_composite():
    # prio's three bands, each its own Python FIFO of 30 packets: the CBR's band overflows.
    q = {"kind": "prio", "child": {"kind": "python", "module": "fifo.py", "class": "Fifo", "limit": 30}}
    res = sojourn.run(EX / "fifo.toml", duration="5s", overrides={"topology.bottleneck.qdisc": q})
    link = res.summary["links"]["bottleneck"]
    assert link["qdisc"] == "prio(child=python(module=fifo.py, class=Fifo, limit=30))"
    assert link["drops"]["overlimit"] > 0 and res.summary["accounting"]["conserved"]


def test_the_random_generator_is_the_links_stream_and_runs_repeat(tmp_path):
    code = """
        from collections import deque
        class RandomDrop:
            def __init__(self, rng, p=0.02):
                self.rng, self.p, self.q = rng, p, deque()
            def enqueue(self, pkt, now_ns):
                if self.rng.random() < self.p:
                    pkt.drop("early")
                    return False
                self.q.append(pkt)
                return True
            def dequeue(self, now_ns):
                return self.q.popleft() if self.q else None
            def __len__(self):
                return len(self.q)
    """
    _write(tmp_path, "rd.py", code)
    q = {"kind": "python", "module": "rd.py", "class": "RandomDrop"}
    a = sojourn.run(_cfg(q, duration="3s"), base_dir=tmp_path)
    b = sojourn.run(_cfg(q, duration="3s"), base_dir=tmp_path)
    assert a.summary == b.summary and a.flows.equals(b.flows)
    early = a.summary["links"]["bottleneck"]["drops"]["early"]
    assert early > 0
    c = sojourn.run(_cfg(q, duration="3s"), base_dir=tmp_path, seed=4)
    assert c.summary["links"]["bottleneck"]["drops"]["early"] != early
    # The generator is sojourn's xoshiro256++: Rng(seed) draws what Rust's Rng::from_seed does.
    r = Rng(42)
    x = [r.next_u64() for _ in range(2)]
    assert x == [Rng(42).next_u64(), x[1]] and x[0] != x[1]


BROKEN = {
    "no-dequeue": ("""
        class MyAqm:
            def __init__(self, rng): self.q = []
            def enqueue(self, pkt, now_ns): return True
            def __len__(self): return 0
    """, "MyAqm (aqm.py) has no method dequeue(self, now_ns)"),
    "enqueue-one-argument": ("""
        class MyAqm:
            def __init__(self, rng): pass
            def enqueue(self, pkt): return True
            def dequeue(self, now_ns): return None
            def __len__(self): return 0
    """, "MyAqm (aqm.py).enqueue(self, pkt) does not take (self, pkt, now_ns)"),
    "no-len": ("""
        class MyAqm:
            def __init__(self, rng): pass
            def enqueue(self, pkt, now_ns): return True
            def dequeue(self, now_ns): return None
    """, "has no method __len__(self)"),
    "constructor-raises": ("""
        class MyAqm:
            def __init__(self, rng): raise RuntimeError("no config")
            def enqueue(self, pkt, now_ns): return True
            def dequeue(self, now_ns): return None
            def __len__(self): return 0
    """, "constructing MyAqm (aqm.py) raised RuntimeError: no config"),
    "constructor-without-rng": ("""
        class MyAqm:
            def __init__(self): pass
            def enqueue(self, pkt, now_ns): return True
            def dequeue(self, now_ns): return None
            def __len__(self): return 0
    """, "cannot be called as MyAqm(rng, )"),
    "not-a-class": ("""
        def MyAqm(rng): return None
    """, "MyAqm (aqm.py) is a function, not a class"),
    "wrong-class-name": ("""
        class MyAQM:
            pass
    """, "aqm.py has no class 'MyAqm'; it defines MyAQM"),
    "syntax-error": ("""
        class MyAqm:
            def enqueue(self, pkt, now_ns) return True
    """, "aqm.py: importing it raised SyntaxError"),
    "import-raises": ("""
        import no_such_module_anywhere
    """, "importing it raised ModuleNotFoundError"),
    "new-instance-not-empty": ("""
        class MyAqm:
            def __init__(self, rng): pass
            def enqueue(self, pkt, now_ns): return True
            def dequeue(self, now_ns): return None
            def __len__(self): return 3
    """, "len() of a new MyAqm (aqm.py) is 3"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_class_is_one_line_and_exit_2(case, tmp_path):
    code, expect = BROKEN[case]
    _write(tmp_path, "aqm.py", code)
    exp = tmp_path / "exp.toml"
    exp.write_text(textwrap.dedent("""\
        duration = "2s"
        [topology]
        pairs = 1
        bottleneck = { rate = "10Mbit", delay = "5ms", qdisc = { kind = "python", module = "aqm.py", class = "MyAqm" } }
        [[workload]]
        kind = "cbr"
        pair = 0
        rate = "5Mbit"
    """))
    r = subprocess.run([sys.executable, "-m", "sojourn", "run", str(exp), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"sojourn: {exp}: topology.bottleneck.qdisc"), lines[0]
    assert expect in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_an_unknown_parameter_names_the_class_and_the_key(tmp_path):
    q = {"kind": "python", "module": "fifo.py", "class": "Fifo", "limt": 5}
    with pytest.raises(sojourn.ConfigError) as e:
        sojourn.validate(_cfg(q), base_dir=EX)
    assert "Fifo (fifo.py)" in str(e.value) and "limt" in str(e.value)


RAISES_MID_RUN = """
    from collections import deque
    class Flaky:
        def __init__(self, rng):
            self.q = deque()
            self.n = 0
        def enqueue(self, pkt, now_ns):
            self.q.append(pkt)
            return True
        def dequeue(self, now_ns):
            self.n += 1
            if self.n == 500:
                return self.q[7]  # a bug: indexing past the end of a short queue
            return self.q.popleft() if self.q else None
        def __len__(self):
            return len(self.q)
"""


def _flaky(tmp: Path, duration: str, rate: str) -> Path:
    """An experiment file whose bottleneck runs the class that raises mid-run."""
    _write(tmp, "flaky.py", RAISES_MID_RUN)
    exp = tmp / "exp.toml"
    exp.write_text(textwrap.dedent(f"""\
        duration = "{duration}"
        [topology]
        pairs = 1
        bottleneck = {{ rate = "10Mbit", delay = "5ms", qdisc = {{ kind = "python", module = "flaky.py", class = "Flaky" }} }}
        [[workload]]
        kind = "cbr"
        pair = 0
        rate = "{rate}"
        [record]
        packets = ["bottleneck"]
    """))
    return exp


def _command_fails_with_the_traceback(tmp: Path, command: str, duration: str, rate: str) -> None:
    """`sojourn COMMAND` of the flaky class: exit 1, the class's traceback (its file and
    line), one last line naming the key, the class and the method, and no --out."""
    exp = _flaky(tmp, duration, rate)
    out = tmp / "out"
    r = subprocess.run([sys.executable, "-m", "sojourn", command, str(exp), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "Traceback (most recent call last)" in r.stderr
    assert f'File "{tmp / "flaky.py"}", line 13, in dequeue' in r.stderr
    assert "IndexError: deque index out of range" in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("sojourn: topology.bottleneck.qdisc: Flaky (flaky.py).dequeue raised IndexError"), last
    assert "nothing was written" in last
    assert not out.exists()


def test_an_exception_mid_run_shows_the_users_traceback_and_writes_nothing(tmp_path):
    _command_fails_with_the_traceback(tmp_path, "run", "5s", "1Mbit")
    exp = tmp_path / "exp.toml"
    # From Python: DisciplineError, the discipline's exception as its cause.
    with pytest.raises(DisciplineError) as e:
        sojourn.run(exp, out=tmp_path / "api")
    assert isinstance(e.value.__cause__, IndexError)
    assert not (tmp_path / "api").exists() or not any((tmp_path / "api").iterdir())


@pytest.mark.parametrize("enqueue, dequeue, length, expect", [
    # the same packet twice
    ("return True", "return self.q[0]", "len(self.q)", "Bad (bad.py).dequeue returned packet uid"),
    ("return True", "return 5", "len(self.q)", "dequeue returned 5; the contract is a packet it holds, or None"),
    # a new user's first bug: no `return True` at the end of enqueue
    ("pass", "return self.q.pop(0)", "len(self.q)", "enqueue returned None; the contract is True (queued) or False"),
    ("pkt.drop('early'); return True", "return self.q.pop(0)", "len(self.q)", "returned True for the packet it dropped"),
    ("return True", "return self.q.pop(0)", "0", "__len__ says 0 packets but the discipline holds"),
    ("pkt.drop('late'); return False", "return self.q.pop(0)", "len(self.q)", "raised ValueError('unknown drop reason"),
])
def test_a_broken_promise_mid_run_stops_the_run(tmp_path, enqueue, dequeue, length, expect):
    _write(tmp_path, "bad.py", f"""
        class Bad:
            def __init__(self, rng):
                self.q = []
            def enqueue(self, pkt, now_ns):
                self.q.append(pkt)
                {enqueue}
            def dequeue(self, now_ns):
                if not self.q:
                    return None
                {dequeue}
            def __len__(self):
                return {length}
    """)
    q = {"kind": "python", "module": "bad.py", "class": "Bad"}
    with pytest.raises(DisciplineError) as e:
        sojourn.run(_cfg(q, duration="2s"), base_dir=tmp_path)
    assert expect in str(e.value)


# A correct queue in a list, for the classes below to break one promise each.
LIST_QUEUE = """
class ListQueue:
    def __init__(self, rng):
        self.q = []
    def enqueue(self, pkt, now_ns):
        self.q.append(pkt)
        return True
    def dequeue(self, now_ns):
        return self.q.pop(0) if self.q else None
    def __len__(self):
        return len(self.q)
"""

SECOND_CONSTRUCTION_RAISES = LIST_QUEUE + """
class Once(ListQueue):
    made = 0
    def __init__(self, rng):
        # Validation's trial instance passes; the run's own (a second one) raises: a
        # constructor that fails only for some seeds would do the same.
        Once.made += 1
        if Once.made > 1:
            raise OSError("second instance")
        super().__init__(rng)
"""


def test_a_constructor_raising_at_build_stops_the_run(tmp_path):
    _write(tmp_path, "once.py", SECOND_CONSTRUCTION_RAISES)
    q = {"kind": "python", "module": "once.py", "class": "Once"}
    with pytest.raises(DisciplineError) as e:
        sojourn.run(_cfg(q, duration="2s"), base_dir=tmp_path)
    assert str(e.value).startswith("topology.bottleneck.qdisc: constructing Once (once.py) raised OSError")
    assert isinstance(e.value.__cause__, OSError)


def test_the_optional_bytes_is_checked_against_what_the_class_holds(tmp_path):
    # The example CoDel keeps `bytes`: a run of its file passes the check at every sample.
    res = sojourn.run(EX / "codel.toml", duration="3s")
    assert res.summary["links"]["bottleneck"]["utilisation"] > 0.9
    _write(tmp_path, "nb.py", LIST_QUEUE + """
class NoBytes(ListQueue):
    bytes = 0  # never updated
""")
    q = {"kind": "python", "module": "nb.py", "class": "NoBytes"}
    with pytest.raises(DisciplineError) as e:
        sojourn.run(_cfg(q, duration="2s"), base_dir=tmp_path)
    assert "NoBytes (nb.py).bytes says 0 but the discipline holds" in str(e.value)


def test_deploy_refuses_a_python_discipline_naming_emulate():
    r = subprocess.run([sys.executable, "-m", "sojourn", "deploy", "plan", str(EX / "fifo.toml"), "--node", "left"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (f"sojourn: {EX / 'fifo.toml'}: topology.bottleneck.qdisc: python: a Python discipline "
                                "has no Linux qdisc; run it live with `sojourn emulate`"), r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("name", ["fifo.toml", "codel.toml", "age2.toml"])
def test_the_examples_validate(name):
    plan = sojourn.validate(EX / name)
    assert dict(plan["links"])["bottleneck"].startswith("python(")


def test_the_age_based_example_serves_young_flows_first():
    # 2LPS (seed 000): transfers that fit under the threshold finish far sooner than behind
    # a FIFO shared with long flows, at the same utilisation.
    fifo = {"topology.bottleneck.qdisc": {"kind": "pfifo", "limit": 200}}
    medians = []
    for overrides in (None, fifo):
        res = sojourn.run(EX / "age2.toml", duration="20s", overrides=overrides)
        f = res.flows
        short = f[(f["size_bytes"] < 100_000) & f["completed"]]
        assert len(short) > 20
        assert res.summary["links"]["bottleneck"]["utilisation"] > 0.95
        medians.append(short["fct_s"].median())
    assert medians[0] < 0.5 * medians[1], medians


# --- live: the forwarder calls the class (emulate, root) ---------------------------------

from live_experiments import live  # noqa: E402


@live
def test_emulate_runs_the_python_fifo_live(tmp_path):
    res = sojourn.emulate(EX / "fifo.toml", duration="3s")
    link = res.summary["links"]["bottleneck"]
    assert res.summary["engine"] == "emulate" and res.summary["accounting"]["conserved"]
    # Four CUBIC flows and 4 Mbit/s of CBR keep the 10 Mbit/s link busy through the class.
    assert link["utilisation"] > 0.9


@live
def test_emulate_stops_on_the_classs_exception_and_cleans_up(tmp_path):
    _command_fails_with_the_traceback(tmp_path, "emulate", "6s", "2Mbit")


@live
def test_emulate_stops_when_the_forwarders_constructor_raises(tmp_path):
    _write(tmp_path, "once.py", SECOND_CONSTRUCTION_RAISES)
    q = {"kind": "python", "module": "once.py", "class": "Once"}
    with pytest.raises(DisciplineError) as e:
        sojourn.emulate(_cfg(q, duration="2s"), base_dir=tmp_path)
    assert "constructing Once (once.py) raised OSError" in str(e.value)
