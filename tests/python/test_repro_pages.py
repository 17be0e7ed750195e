"""Reproduction pages say what their files produce (issue 18 §3, sojourn.repro.pages).

For every docs/repro/*.md page: it records the engine fingerprint it was generated with,
and that fingerprint is the engine's now (a short canonical run; an engine whose behaviour
changed must regenerate the pages), and its CI block is exactly what the page's cheap
variant produces now. A failure names the command that regenerates the page. Also: the
repro scripts leave docs/ alone unless asked (`--update-docs`)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import _local  # noqa: F401  (this worktree's python/sojourn first)

sojourn = pytest.importorskip("sojourn")
if sojourn._engine is None:  # pragma: no cover
    pytest.skip("engine not built", allow_module_level=True)

import importlib  # noqa: E402

from sojourn.repro import pages  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_every_repro_page_is_generated():
    on_disk = sorted(p.name for p in pages.DOCS.glob("*.md"))
    assert on_disk == sorted(pages.PAGES), "a reproduction page without a generator (sojourn.repro.pages.PAGES)"


def test_the_fingerprint_is_deterministic_and_short():
    pages.engine_fingerprint.cache_clear()
    a = pages.engine_fingerprint()
    pages.engine_fingerprint.cache_clear()
    assert pages.engine_fingerprint() == a
    assert len(a) == 16 and int(a, 16) >= 0


@pytest.mark.parametrize("page", sorted(pages.PAGES))
def test_page_was_generated_by_this_engine(page):
    problems = pages.check(pages.DOCS / page)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", sorted(pages.PAGES))
def test_page_ci_block_is_what_the_cheap_variant_gives(page, tmp_path):
    module = importlib.import_module(f"sojourn.repro.{pages.PAGES[page]}")
    now = module.ci_block(tmp_path)
    have = pages.block((pages.DOCS / page).read_text(), "ci")
    assert have == now.strip("\n") + "\n", (
        f"{page}: its CI block is not what the cheap variant gives now "
        f"(regenerate: python -m sojourn.repro.{pages.PAGES[page]} --update-docs)\n--- page\n{have}--- now\n{now}")


def test_replace_blocks_writes_nothing_when_a_block_is_missing(tmp_path):
    p = tmp_path / "page.md"
    p.write_text("a\n<!-- BEGIN GENERATED: x -->\nold\n<!-- END GENERATED: x -->\nb\n")
    with pytest.raises(SystemExit, match="no '<!-- BEGIN GENERATED: y -->'"):
        pages.replace_blocks(p, {"x": "new", "y": "other"})
    assert "old" in p.read_text()
    pages.replace_blocks(p, {"x": "new"})
    assert p.read_text() == "a\n<!-- BEGIN GENERATED: x -->\nnew\n<!-- END GENERATED: x -->\nb\n"
    assert pages.block(p.read_text(), "x") == "new\n"


def test_plots_stay_under_the_output_unless_asked(tmp_path):
    assert pages.plot_dir(tmp_path, None, False, "lstf") == tmp_path / "img"
    assert pages.plot_dir(tmp_path, None, True, "lstf") == ROOT / "docs" / "repro" / "img" / "lstf"
    assert pages.plot_dir(tmp_path, "elsewhere", True, "lstf") == Path("elsewhere")


def test_update_docs_refuses_a_partial_run():
    r = subprocess.run([sys.executable, "-m", "sojourn.repro.lstf", "--update-docs", "--only", "literal-codel"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2
    assert "--update-docs regenerates the page from the full sweep" in r.stderr
