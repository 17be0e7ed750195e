"""Deterministic figure files: same data => byte-identical PNG and SVG.

Matplotlib's SVG backend embeds the current date and random clip-path/element ids; both
are pinned here (``metadata={"Date": None}`` and the ``svg.hashsalt`` rcParam, which seeds
the ids). PNGs carry no date. Every sojourn plot is saved through :func:`savefig`.
"""
from __future__ import annotations

import os
from typing import Any, Union

#: The salt for SVG element ids (any fixed string makes them reproducible).
SVG_HASHSALT = "sojourn"


def savefig(fig: Any, path: Union[str, "os.PathLike[str]"], **kw: Any) -> None:
    """``fig.savefig(path, **kw)`` with fixed SVG ids and no creation date."""
    import matplotlib

    p = os.fspath(path)
    if p.lower().endswith(".svg"):
        kw.setdefault("metadata", {"Date": None})
        with matplotlib.rc_context({"svg.hashsalt": SVG_HASHSALT}):
            fig.savefig(p, **kw)
    else:
        if p.lower().endswith(".png"):
            kw.setdefault("metadata", {"Software": None})
        fig.savefig(p, **kw)
