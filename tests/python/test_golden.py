"""Byte identity of simulator outputs: every case of tests/golden/make.py (every example,
each shipped reproduction's CI set-up shortened, the README's main job shortened) must give
the SHA-256 checksums committed in tests/golden/checksums.json. A refactoring must keep them;
an intended output change regenerates them (`python tests/golden/make.py --write`) in the same
commit, saying why. The failing test's id names the run that differs."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import _local  # noqa: F401  (this worktree's python/sojourn first)

_MAKE = Path(__file__).resolve().parents[1] / "golden" / "make.py"
_spec = importlib.util.spec_from_file_location("sojourn_golden_make", _MAKE)
golden = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = golden  # dataclasses need the module registered
_spec.loader.exec_module(golden)

CASES = golden.cases()
WANT = golden.load_checksums()


def test_every_committed_checksum_has_a_case():
    assert sorted(WANT) == sorted(c.name for c in CASES), "regenerate: python tests/golden/make.py --write"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_outputs_are_byte_identical(case):
    got = golden.digest(case)
    want = WANT.get(case.name)
    assert want is not None, f"{case.name}: no committed checksum (new case? regenerate)"
    differ = [k for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)]
    assert not differ, f"{case.name}: {', '.join(differ)} differ from tests/golden/checksums.json"
