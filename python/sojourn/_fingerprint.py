"""The engine's build fingerprint, computed from a source tree.

``sojourn._engine.source_hash()`` is fixed when the extension module is built
(crates/sojourn-py/build.rs); :func:`source_hash` computes the same SHA-256 from the files
of a checkout, so a test run can tell a stale engine (built from other sources) from a
current one. The hash covers every ``crates/**/*.rs`` and ``crates/**/Cargo.toml`` plus the
workspace ``Cargo.toml`` and ``Cargo.lock``, in path order, each as ``path NUL content NUL``
(hidden and ``target`` directories are skipped)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Optional, Union


def source_hash(root: Union[str, Path]) -> str:
    """SHA-256 (hex) of the engine's sources under the repository ``root``."""
    root = Path(root).resolve()
    files = []
    for d, dirs, names in os.walk(root / "crates"):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x != "target"]
        for n in names:
            if not n.startswith(".") and (n.endswith(".rs") or n == "Cargo.toml"):
                files.append(Path(d) / n)
    for n in ("Cargo.toml", "Cargo.lock"):
        if (root / n).is_file():
            files.append(root / n)
    h = hashlib.sha256()
    for rel, p in sorted((p.relative_to(root).as_posix(), p) for p in files):
        h.update(rel.encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def stale_engine_message(root: Union[str, Path]) -> Optional[str]:
    """None if the imported engine was built from the sources under ``root`` (or there is
    no source tree to compare with); otherwise a one-paragraph explanation with the fix."""
    root = Path(root)
    if not (root / "crates").is_dir():
        return None  # an installed wheel used without a source tree: nothing to compare
    try:
        from . import _engine
    except ImportError:
        return None  # no engine at all: the tests that need it say so themselves
    built = getattr(_engine, "source_hash", lambda: None)()
    tree = source_hash(root)
    if built == tree:
        return None
    return (f"the imported engine ({_engine.__file__}) was built from other sources than this tree "
            f"(engine {built[:12] if built else 'without a build fingerprint'}, tree {tree[:12]}). "
            "Rebuild it: `CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 "
            "maturin develop --release` (fast, in a venv) or `pip install .`")
