"""Pairs of a discipline and its age-based variant (seed 000's naming), and the colours and
line styles that show them as pairs in every plot (report.html and the PNG/SVG plots)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

__all__ = ["age_base", "styles", "Style", "PALETTE"]

# A qualitative palette large enough for seed 000's 13 configurations twice over
# (Plotly's Dark24 followed by Light24): colours are assigned per discipline *family*
# (a discipline and its age-based variant share one), so 48 families before a repeat.
PALETTE: list[str] = [
    "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100", "#750D86",
    "#EB663B", "#511CFB", "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32", "#778AAE",
    "#862A16", "#A777F1", "#620042", "#1616A7", "#DA60CA", "#6C4516", "#0D2A63", "#AF0038",
    "#FD3216", "#00FE35", "#6A76FC", "#FED4C4", "#FE00CE", "#0DF9FF", "#F6F926", "#FF9616",
    "#479B55", "#EEA6FB", "#DC587D", "#D626FF", "#6E899C", "#00B5F7", "#B68E00", "#C9FBE5",
    "#FF0092", "#22FFA7", "#E3EE9E", "#86CE00", "#BC7196", "#7E7DCD", "#FC6955", "#E48F72",
]


def age_base(p: str, points: Sequence[str]) -> Optional[str]:
    """The base point of an age-based point: ``age-X`` -> ``X``; also seed 000's names
    ``age-prio-X`` -> ``X``, ``age-pfifofast`` -> ``pfifo``, and a trailing ``-suffix``
    (``age-cake-strict`` -> ``cake``) when that is what exists. For a point name with axis
    labels (``age-codel+1Gbit``) the labels must match (``codel+1Gbit``)."""
    name, plus, labels = p.partition("+")
    if not name.startswith("age-"):
        return None
    rest = name[4:]
    cands = [rest]
    if rest.startswith("prio-"):
        cands.append(rest[5:])
    cands += [c.replace("pfifofast", "pfifo").replace("pfifo_fast", "pfifo") for c in list(cands)]
    for c in list(cands):
        while "-" in c:
            c = c.rsplit("-", 1)[0]
            cands.append(c)
    for c in cands:
        if c and (c + plus + labels) in points and (c + plus + labels) != p:
            return c + plus + labels
    return None


@dataclass
class Style:
    colour: str
    dash: str  # "solid" for a base discipline, "dash" for its age-based variant
    family: str


def styles(points: Sequence[str]) -> dict[str, Style]:
    """Colour and line style per point: ``age-X`` shares ``X``'s colour, dashed."""
    fam_colour: dict[str, str] = {}
    out: dict[str, Style] = {}
    for p in points:
        base = age_base(p, points)
        fam = base or p
        if fam not in fam_colour:
            fam_colour[fam] = PALETTE[len(fam_colour) % len(PALETTE)]
        out[p] = Style(fam_colour[fam], "dash" if base else "solid", fam)
    return out
