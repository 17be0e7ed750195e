"""Generated reproduction pages (docs/repro/*.md): provenance, engine fingerprint, CI blocks.

A reproduction page states only numbers its script wrote. The script fills the page's
generated blocks, each between ``<!-- BEGIN GENERATED: tag -->`` and
``<!-- END GENERATED: tag -->``; text outside the blocks states no result. Every page has

* a ``provenance`` block: the sojourn version and the **engine fingerprint** — the SHA-256
  of the outputs of a short canonical run (:data:`CANONICAL`, three experiments of a few
  simulated seconds that exercise TCP with and without a handshake, GSO on and off, TSQ on
  a shaped host queue, CUBIC/BBR/NewReno, fq_codel and PIE, UDP, and sources in lockstep
  whose packets meet a FIFO in exact ties);
* a ``ci`` block: the numbers of the page's cheap variant (what its script's
  ``ci_block()`` computes in seconds).

``tests/python/test_repro_pages.py`` fails while a page's fingerprint differs from the
engine's (its numbers were produced by an engine that behaves differently) or its ``ci``
block differs from what the cheap variant produces now, naming the command that regenerates
the page. Each repro script takes ``--update-docs`` to rewrite its page's blocks (and its
plots under docs/repro/img/); without it, plots go under the run's ``--out`` directory and
the page is left alone.

    python -m sojourn.repro.pages --fingerprint     # the current engine's fingerprint
    python -m sojourn.repro.pages --check           # every page against the engine
"""
from __future__ import annotations

import argparse
import hashlib
import io
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Optional, Sequence

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs" / "repro"

#: page file -> the module that generates it
PAGES = {
    "lstf.md": "lstf",
    "cocoa.md": "cocoa",
    "thin-streams.md": "thin_streams",
    "operating-ranges.md": "operating_ranges",
    "age-based.md": "age_based",
    "l4s.md": "l4s",
}

BEGIN = "<!-- BEGIN GENERATED: {} -->"
END = "<!-- END GENERATED: {} -->"

# The canonical run: small, deterministic, and sensitive to the TCP model (handshake and
# quick-ACKs, slow start, TSQ and truesize on a shaped host queue, GSO on/off, three
# congestion controls), to two AQMs and to the order of simultaneous events. Changing it
# changes every page's fingerprint.
CANONICAL = (
    """
duration = "4s"
seed = 7
[topology]
kind = "dumbbell"
pairs = 3
bottleneck = { rate = "20Mbit", delay = "10ms", qdisc = "fq_codel" }
[[workload]]
kind = "bulk"
pair = 0
cc = "cubic"
[[workload]]
kind = "bulk"
pair = 1
cc = "bbr"
start = "0.5s"
[[workload]]
kind = "poisson"
pair = 2
interval = "125ms"
size = { dist = "pareto", alpha = 1.2, min = "2KiB", max = "2MiB" }
[[workload]]
kind = "cbr"
pair = 2
rate = "1Mbit"
[record]
interval = "100ms"
""",
    """
duration = "3s"
seed = 3
[transport]
gso = false
cc = "reno"
[topology]
kind = "graph"
nodes = ["client", "server"]
[[topology.links]]
name = "nic"
from = "client"
to = "server"
rate = "100Mbit"
delay = "25us"
shaper = true
qdisc = "pie"
reverse = { rate = "10Gbit", qdisc = "pfifo", delay = "25us" }
[[workload]]
kind = "bulk"
from = "client"
to = "server"
[[workload]]
kind = "transfer"
from = "client"
to = "server"
start = "1s"
size = "300kB"
[[workload]]
kind = "transfer"
from = "client"
to = "server"
start = "2s"
size = "100kB"
gso = true
cc = "cubic"
[record]
interval = "50ms"
""",
    # Lockstep (issue 35): identical CBR sources and TCP flows on identical paths meet a small
    # FIFO in exact ties, so the fingerprint also changes when the order of simultaneous
    # events does (the two runs above have too few consequential ties to notice).
    """
duration = "2s"
seed = 5
[topology]
kind = "dumbbell"
pairs = 4
bottleneck = { rate = "20Mbit", delay = "5ms", qdisc = { kind = "pfifo", limit = 20 } }
access = { rate = "100Mbit", delay = "1ms" }
[[workload]]
kind = "cbr"
pairs = "all"
rate = "6Mbit"
packet_size = "1000B"
[[workload]]
kind = "bulk"
pairs = "all"
cc = "reno"
[record]
interval = "10ms"
""",
)


@lru_cache(maxsize=1)
def engine_fingerprint() -> str:
    """First 16 hex digits of the SHA-256 over the canonical runs' summary.json bytes and
    flow tables (rendered as CSV with full float precision)."""
    import sojourn

    from .._config import tomllib  # tomli below Python 3.11

    h = hashlib.sha256()
    for text in CANONICAL:
        res = sojourn.run(tomllib.loads(text))
        h.update(res.summary_text.encode())
        buf = io.StringIO()
        res.flows.to_csv(buf, index=False, float_format="%.17g")
        h.update(buf.getvalue().encode())
    return h.hexdigest()[:16]


def engine_version() -> str:
    try:
        from importlib.metadata import version

        return version("sojourn")
    except Exception:  # pragma: no cover - not installed as a distribution
        return "unknown"


def provenance(module: str, note: str = "", prose_generated: bool = True) -> str:
    """The provenance block's text for a page generated by ``sojourn.repro.<module>``.
    ``prose_generated`` False says that the page's prose still quotes the generated tables
    by hand (pages not yet converted)."""
    where = ("Every number on this page is in a generated block" if prose_generated else
             "The tables (and the files they include) are generated; numbers in the prose are quoted from "
             "them by hand")
    return (
        f"Generated by `python -m sojourn.repro.{module} --update-docs` with sojourn "
        f"{engine_version()}, engine fingerprint `{engine_fingerprint()}` "
        f"(`python -m sojourn.repro.pages --fingerprint`). {where}; `tests/python/test_repro_pages.py` "
        "fails when the engine's fingerprint or the CI block below no longer matches, until the page is "
        "regenerated."
        + (f"\n\n{note}" if note else "")
        + "\n"
    )


def block(text: str, tag: str) -> Optional[str]:
    """The content of block ``tag`` in ``text`` (None if absent)."""
    b, e = BEGIN.format(tag), END.format(tag)
    i, j = text.find(b), text.find(e)
    if i < 0 or j < i:
        return None
    return text[i + len(b) : j].strip("\n") + "\n"


def replace_blocks(page: Path, blocks: Mapping[str, str]) -> None:
    """Rewrites the named blocks of ``page``; every tag must exist (one clear error if not),
    and nothing is written unless all of them do."""
    src = page.read_text()
    for tag, content in blocks.items():
        b, e = BEGIN.format(tag), END.format(tag)
        i, j = src.find(b), src.find(e)
        if i < 0 or j < i:
            raise SystemExit(f"{page}: no '{b}' ... '{e}' block")
        src = src[: i + len(b)] + "\n" + content.strip("\n") + "\n" + src[j:]
    page.write_text(src)


def fingerprint_of(page: Path) -> Optional[str]:
    """The engine fingerprint a page records (None if it records none)."""
    p = block(page.read_text(), "provenance") or ""
    m = re.search(r"engine fingerprint `([0-9a-f]{16})`", p)
    return m.group(1) if m else None


def check(page: Path, ci_text: Optional[str] = None) -> list:
    """Problems of one page against the current engine (empty = up to date)."""
    module = PAGES[page.name]
    fix = f"regenerate: python -m sojourn.repro.{module} --update-docs"
    out = []
    fp = fingerprint_of(page)
    now = engine_fingerprint()
    if fp is None:
        out.append(f"{page.name}: records no engine fingerprint ({fix})")
    elif fp != now:
        out.append(f"{page.name}: generated by engine {fp}, the engine is now {now}: its numbers may "
                   f"have changed ({fix})")
    if ci_text is not None:
        have = block(page.read_text(), "ci")
        if have is None:
            out.append(f"{page.name}: no CI block ({fix})")
        elif have != ci_text.strip("\n") + "\n":
            out.append(f"{page.name}: the CI block differs from what the cheap variant gives now ({fix})\n"
                       f"--- page\n{have}--- now\n{ci_text}")
    return out


def carry_over(page: Path, why: str, ci_text: str) -> None:
    """Re-stamps ``page`` for the current engine without re-running its long studies: the
    provenance block gets the current fingerprint and a paragraph saying which engine
    produced the other blocks and why they stand (``why``: where the evidence that the
    engine change did not move them is), and the CI block is rewritten from ``ci_text``.
    For an engine change shown not to move results (e.g. issue 35's event order); the next
    full regeneration (``--update-docs``) replaces the paragraph."""
    text = page.read_text()
    old = block(text, "provenance") or ""
    old_fp = fingerprint_of(page) or "unknown"
    now = engine_fingerprint()
    if old_fp == now:
        raise SystemExit(f"{page.name}: already generated by engine {now}; nothing to carry over")
    first, _, notes = old.partition("\n\n")
    prose_generated = "Every number on this page is in a generated block" in first
    module = PAGES[page.name]
    carried = (f"**Carried over from engine `{old_fp}`.** Only this block and the CI block were regenerated "
               f"with engine `{now}`; every other generated block on this page, and the prose quoting it, comes "
               f"from engine `{old_fp}`. {why} The next `python -m sojourn.repro.{module} --update-docs` "
               "regenerates everything and drops this paragraph.")
    kept = [n for n in notes.strip("\n").split("\n\n") if n and not n.startswith("**Carried over from engine")]
    note = "\n\n".join([carried] + kept)
    replace_blocks(page, {"provenance": provenance(module, note=note, prose_generated=prose_generated),
                          "ci": ci_text})


def plot_dir(out: Path, img: Optional[str], update_docs: bool, page_img: str) -> Path:
    """Where a repro script writes its plots: ``--img`` if given, docs/repro/img/<page> with
    ``--update-docs``, else ``<out>/img`` (never into docs/ unless asked)."""
    if img:
        return Path(img)
    if update_docs:
        return DOCS / "img" / page_img
    return out / "img"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sojourn.repro.pages", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fingerprint", action="store_true", help="print the engine fingerprint")
    ap.add_argument("--check", action="store_true", help="check every page's recorded fingerprint")
    ap.add_argument("--carry-over", metavar="WHY",
                    help="re-stamp every page (or --page) for this engine without its long studies: new "
                         "provenance and CI blocks, a paragraph naming the engine of the rest and WHY it stands")
    ap.add_argument("--page", action="append", default=None, help="with --carry-over: only this page (repeatable)")
    a = ap.parse_args(argv)
    if a.carry_over:
        import importlib
        import tempfile

        for name in a.page or list(PAGES):
            if name not in PAGES:
                ap.error(f"--page {name}: not a reproduction page (one of {', '.join(PAGES)})")
            module = importlib.import_module(f"sojourn.repro.{PAGES[name]}")
            with tempfile.TemporaryDirectory() as tmp:
                ci_text = module.ci_block(Path(tmp))
            carry_over(DOCS / name, a.carry_over, ci_text)
            print(f"{name}: carried over to engine {engine_fingerprint()}")
        return 0
    if a.check:
        bad = [p for name in PAGES for p in check(DOCS / name)]
        print("\n".join(bad) if bad else f"every page matches engine {engine_fingerprint()}")
        return 1 if bad else 0
    print(engine_fingerprint())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
