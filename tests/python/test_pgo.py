"""The profile-guided build (docs/pgo.md): the build backend's RUSTFLAGS rule, and — where
CI asks for it (``SOJOURN_EXPECT_PGO=1``, set by .ci/run after ``pip install .``) — that the
installed engine really was optimised with the committed profile."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "pgo" / "sojourn.profdata"


def backend():
    # pgo/sojourn_build.py re-exports maturin's hooks; a stand-in maturin is enough to test
    # its own rule (the test environment need not have maturin).
    sys.modules.setdefault("maturin", types.ModuleType("maturin"))
    spec = importlib.util.spec_from_file_location("sojourn_build", ROOT / "pgo" / "sojourn_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_profile_is_committed_with_its_toolchain():
    assert PROFILE.is_file() and PROFILE.stat().st_size > 100_000
    # The indexed profile format of llvm-profdata starts with the magic 0x8169666f72706cff.
    assert PROFILE.read_bytes()[:8] == b"\xfflprofi\x81"
    assert (ROOT / "pgo" / "rustc-version.txt").read_text().startswith("rustc 1.")


def test_builds_use_the_profile_by_absolute_path():
    flags = backend().profile_flags({})
    assert flags == f"-Cprofile-use={PROFILE}"
    assert Path(flags.split("=", 1)[1]).is_absolute()


def test_the_callers_own_flags_are_kept():
    flags = backend().profile_flags({"RUSTFLAGS": "-Ctarget-cpu=x86-64-v3"})
    assert flags == f"-Ctarget-cpu=x86-64-v3 -Cprofile-use={PROFILE}"


@pytest.mark.parametrize("env", [
    {"SOJOURN_PGO": "0"},
    {"RUSTFLAGS": "-Cprofile-generate=/tmp/raw"},  # pgo/refresh's instrumented build
    {"RUSTFLAGS": "-C profile-use=/elsewhere.profdata"},
])
def test_no_profile_when_told_or_when_the_caller_has_one(env):
    assert backend().profile_flags(env) is None


pgo_expected = pytest.mark.skipif(
    os.environ.get("SOJOURN_EXPECT_PGO") != "1",
    reason="SOJOURN_EXPECT_PGO=1 is set by .ci/run, whose engine comes from `pip install .` "
           "(a `maturin develop` engine is built without the profile)")


@pgo_expected
def test_the_installed_engine_was_optimised_with_the_committed_profile():
    from sojourn import _engine_info

    assert _engine_info.pgo_profile() == hashlib.sha256(PROFILE.read_bytes()).hexdigest()[:16]


@pgo_expected
def test_version_says_how_the_engine_was_built():
    out = subprocess.run([sys.executable, "-m", "sojourn", "--version"], capture_output=True, text=True,
                         check=True).stdout
    digest = hashlib.sha256(PROFILE.read_bytes()).hexdigest()[:16]
    assert out == f"sojourn 0.1.0 (engine optimised with PGO profile {digest})\n"
