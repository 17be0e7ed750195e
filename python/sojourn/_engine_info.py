"""How the installed engine was built: what ``sojourn --version`` prints after the version."""
from __future__ import annotations


def pgo_profile() -> str:
    """First 16 hex digits of the SHA-256 of the profile the engine was optimised with
    (``pgo/sojourn.profdata`` at build time; docs/pgo.md), or "" when it was built without
    one (``maturin develop``, ``SOJOURN_PGO=0``) or is not built."""
    try:
        from . import _engine
    except ImportError:
        return ""
    return getattr(_engine, "pgo_profile", lambda: "")()


def describe() -> str:
    """One phrase: ``engine optimised with PGO profile 0123456789abcdef`` or ``engine built
    without a PGO profile``."""
    p = pgo_profile()
    return f"engine optimised with PGO profile {p}" if p else "engine built without a PGO profile"
