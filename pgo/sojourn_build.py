"""sojourn's PEP 517 build backend: maturin's, with the engine optimised by the committed
profile (profile-guided optimisation, docs/pgo.md).

``pip install .`` builds through here. Every hook is maturin's; the wheel and editable
hooks first add ``-Cprofile-use=<pgo/sojourn.profdata>`` to ``RUSTFLAGS`` (an absolute
path: cargo runs rustc from different directories for different crates). ``SOJOURN_PGO=0``
builds without the profile. A profile made for other code only costs the optimisation of
the functions that changed (rustc warns; ``bash pgo/check`` fails in CI until
``bash pgo/refresh`` is run): the build itself never depends on it.
"""
from __future__ import annotations

import os
from pathlib import Path

import maturin
from maturin import *  # noqa: F401,F403  (every other PEP 517 hook, unchanged)

PROFILE = Path(__file__).resolve().parent / "sojourn.profdata"


def profile_flags(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> str | None:
    """The ``RUSTFLAGS`` value a build should use, or None to leave the environment as is."""
    if environ.get("SOJOURN_PGO", "1") == "0" or not PROFILE.is_file():
        return None
    flags = environ.get("RUSTFLAGS", "")
    if "-Cprofile-" in flags.replace(" ", ""):  # the caller chose its own profile
        return None
    return f"{flags} -Cprofile-use={PROFILE}".strip()


def _with_profile() -> None:
    flags = profile_flags()
    if flags is not None:
        os.environ["RUSTFLAGS"] = flags


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _with_profile()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _with_profile()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
