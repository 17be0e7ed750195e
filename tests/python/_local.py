"""Makes ``sojourn.<module>`` resolve to this worktree's python/sojourn even when another
build of the package (e.g. an installed wheel without these modules) comes first on the path."""

from __future__ import annotations

import pathlib

import sojourn

_LOCAL = str(pathlib.Path(__file__).resolve().parents[2] / "python" / "sojourn")
if _LOCAL not in [str(p) for p in sojourn.__path__]:
    sojourn.__path__.insert(0, _LOCAL)
