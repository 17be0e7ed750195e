"""crates/sojourn-py (the `sojourn._engine` bridge): errors become the documented Python
exceptions, the GIL is released while a run executes, and the build fingerprint matches the
tree (issue #22)."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

import _local  # noqa: F401  (this worktree's python/sojourn first)
import sojourn
from sojourn import _fingerprint

eng = sojourn._engine
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(eng is None, reason="engine not built")


def cfg(duration: str = "2s", qdisc="pfifo") -> dict:
    return {
        "duration": duration,
        "topology": {"kind": "dumbbell", "pairs": 1,
                     "bottleneck": {"rate": "10Mbit", "delay": "10ms", "qdisc": qdisc}},
        "workload": [{"kind": "bulk", "pair": 0}],
    }


def test_config_errors_are_config_error_with_path_and_msg():
    with pytest.raises(eng.ConfigError) as e:
        eng.validate(cfg(qdisc="nosuchqdisc"), ".")
    assert isinstance(e.value, ValueError)
    assert e.value.path.startswith("topology.bottleneck.qdisc")
    assert "nosuchqdisc" in e.value.msg
    with pytest.raises(eng.ConfigError) as e:
        eng.run({**cfg(), "duration": "-1s"}, ".")
    assert e.value.path == "duration"
    # The front-end turns it into sojourn.ConfigError naming the file and the key.
    with pytest.raises(sojourn.ConfigError) as e:
        sojourn.validate(cfg(qdisc="nosuchqdisc"))
    assert e.value.path.startswith("topology.bottleneck.qdisc")


def test_values_python_cannot_express_in_toml_are_config_errors():
    with pytest.raises(eng.ConfigError) as e:
        eng.validate({**cfg(), "seed": object()}, ".")
    assert e.value.path == "seed" and "unsupported value" in e.value.msg
    with pytest.raises(eng.ConfigError) as e:
        eng.validate({**cfg(), "seed": 2**70}, ".")
    assert e.value.path == "seed" and "out of range" in e.value.msg


def test_progress_false_aborts_with_keyboard_interrupt_and_exceptions_propagate():
    calls = []
    with pytest.raises(KeyboardInterrupt):
        eng.run(cfg("30s"), ".", 1, lambda s, e, n: calls.append(s) or False)
    assert len(calls) == 1

    def boom(s, e, n):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        eng.run(cfg("30s"), ".", 1, boom)


def test_the_gil_is_released_while_a_run_executes():
    # With a 100-s switch interval a thread that holds the GIL keeps it; the main thread
    # can count only if the engine releases the GIL during the run.
    counter = [0]
    window = []
    started, done = threading.Event(), threading.Event()

    def runner():
        started.set()
        before = counter[0]
        eng.run(cfg("20s"), ".", 1, None)
        window.append(counter[0] - before)
        done.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    try:
        t = threading.Thread(target=runner)
        t.start()
        started.wait()
        spins = 0
        while not done.is_set() and spins < 50_000_000:
            counter[0] += 1
            spins += 1
            if spins % 1024 == 0:
                time.sleep(0)  # let the runner take the GIL back when the run ends
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert window and window[0] > 0, "the main thread made no progress during the run"


def test_the_engine_was_built_from_this_tree():
    assert eng.source_hash() == _fingerprint.source_hash(ROOT)
    assert _fingerprint.stale_engine_message(ROOT) is None


def test_the_fingerprint_changes_with_any_engine_source(tmp_path):
    # A copy of the hashed files: same hash; one byte more in one .rs file: another hash.
    import shutil
    for rel in ["Cargo.toml", "Cargo.lock"]:
        shutil.copy(ROOT / rel, tmp_path / rel)
    shutil.copytree(ROOT / "crates", tmp_path / "crates",
                    ignore=shutil.ignore_patterns("target", ".*"))
    assert _fingerprint.source_hash(tmp_path) == eng.source_hash()
    f = tmp_path / "crates" / "sojourn-core" / "src" / "lib.rs"
    f.write_text(f.read_text() + "\n")
    assert _fingerprint.source_hash(tmp_path) != eng.source_hash()
    assert "Rebuild it" in (_fingerprint.stale_engine_message(tmp_path) or "")
