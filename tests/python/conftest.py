"""Refuses to test a stale engine (issue #22): when the imported ``sojourn._engine`` was
built from other sources than this tree, the whole run stops with the rebuild command
instead of testing old code. Skipped only without a source tree (an installed wheel)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fingerprint_module():
    # This tree's python/sojourn/_fingerprint.py, whatever sojourn build is installed.
    spec = importlib.util.spec_from_file_location("_sojourn_fingerprint", ROOT / "python" / "sojourn" / "_fingerprint.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def pytest_sessionstart(session):
    if not (ROOT / "crates").is_dir():
        return
    try:
        import sojourn
    except ImportError:
        return
    fp = _fingerprint_module()
    eng = getattr(sojourn, "_engine", None)
    if eng is None:
        return
    built = getattr(eng, "source_hash", lambda: None)()
    tree = fp.source_hash(ROOT)
    if built != tree:
        pytest.exit(
            f"stale engine: {eng.__file__} was built from other sources than {ROOT} "
            f"(engine {built[:12] if built else 'without a build fingerprint'}, tree {tree[:12]}). "
            "Rebuild it: CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 "
            "maturin develop --release   (or: pip install .)",
            returncode=3,
        )
