"""The public face of the Python package stays put while its modules move (issue 41: the flat
package became ``sojourn.cli``, ``sojourn.deploy`` and ``sojourn.analysis``).

The truths are literals: the names ``sojourn.__all__`` exported and the sub-commands the
``sojourn`` command offered before the move, the entry point pyproject.toml declares, and
every ``sojourn.<name>`` the documentation writes in a code span (README.md, docs/,
CONTRIBUTING.md), which must still name a module or an attribute."""
from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import sojourn

ROOT = Path(__file__).resolve().parents[2]

# sojourn.__all__ before the move (python/sojourn/__init__.py at main edb1ece).
PUBLIC = {"run", "emulate", "emulate_cleanup", "validate", "qdiscs", "sweep", "load", "Result", "ConfigError",
          "PrivilegeError", "EmulateError", "__version__"}

# `sojourn --help` and `sojourn deploy --help` before the move, in their order.
COMMANDS = ["run", "emulate", "validate", "report", "flent", "qdiscs", "sweep", "compare", "deploy", "test", "threshold"]
DEPLOY_ACTIONS = ["plan", "check", "apply", "remove", "threshold"]

# The seed-paper pages (docs/repro/), each run as `python -m sojourn.repro.<page>`.
REPRO_PAGES = ["age_based", "thin_streams", "operating_ranges", "cocoa", "lstf", "l4s", "pages"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def _listed(help_text: str, heading: str) -> list[str]:
    """The sub-command names argparse prints under ``heading`` (four spaces in, one word)."""
    lines = help_text.split("\n")
    start = lines.index(f"  {heading}") + 1
    names = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        m = re.match(r"    (\w[\w-]*)(\s|$)", line)
        if m:
            names.append(m.group(1))
    return names


def test_all_is_unchanged_and_every_name_imports():
    assert set(sojourn.__all__) == PUBLIC
    ns: dict = {}
    exec(f"from sojourn import {', '.join(sorted(PUBLIC))}", ns)
    assert all(n in ns for n in PUBLIC)
    assert callable(ns["run"]) and callable(ns["load"]) and callable(ns["sweep"])
    assert issubclass(ns["ConfigError"], Exception) and isinstance(ns["__version__"], str)


def test_the_console_script_of_pyproject_resolves_to_the_cli():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"sojourn": "sojourn.cli:main"}
    mod, _, attr = scripts["sojourn"].partition(":")
    main = getattr(importlib.import_module(mod), attr)
    assert callable(main)
    from sojourn.__main__ import main as dunder_main

    assert dunder_main is main  # `python -m sojourn` runs the same function


def test_the_command_lists_every_sub_command():
    r = _run("-m", "sojourn", "--help")
    assert r.returncode == 0, r.stderr
    assert _listed(r.stdout, "COMMAND") == COMMANDS
    d = _run("-m", "sojourn", "deploy", "--help")
    assert d.returncode == 0, d.stderr
    assert _listed(d.stdout, "ACTION") == DEPLOY_ACTIONS


def test_the_documented_module_paths_are_the_moved_modules_themselves():
    import sojourn.analysis.compare
    import sojourn.analysis.stats
    import sojourn.compare
    import sojourn.stats

    # docs/statistics.md and docs/repro/age-based.md name sojourn.stats and sojourn.compare:
    # the same module objects, so a patch or attribute on one is seen through the other.
    assert sojourn.stats is sojourn.analysis.stats
    assert sojourn.compare is sojourn.analysis.compare
    from sojourn import stats

    assert stats.repeat_ci is sojourn.analysis.stats.repeat_ci
    assert sojourn.load is sojourn.analysis.tidy.load


@pytest.mark.parametrize("page", REPRO_PAGES)
def test_every_repro_page_runs_as_a_module(page):
    r = _run("-m", f"sojourn.repro.{page}", "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage:"), r.stdout[:200]


def _documented_names() -> dict[str, set[str]]:
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found: dict[str, set[str]] = {}
    for f in files:
        if not f.exists():
            continue
        for span in re.findall(r"`([^`\n]+)`", f.read_text()):
            # a dotted Python name, not part of a path, a file name or a quoted string
            for n in re.findall(r"(?<![\w./\"'-])sojourn(?:\.[A-Za-z_]\w*)+(?![\w\"'/-])", span):
                found.setdefault(n, set()).add(str(f.relative_to(ROOT)))
    return found


def _resolve(name: str) -> bool:
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for p in parts[k:]:
            if not hasattr(obj, p):
                return False
            obj = getattr(obj, p)
        return True
    return False


def test_every_name_the_documentation_gives_resolves():
    names = _documented_names()
    # The scan finds the names the reference pages use (a check that it reads them at all).
    assert {"sojourn.run", "sojourn.load", "sojourn.stats.repeat_ci", "sojourn.compare",
            "sojourn.repro.pages", "sojourn.results.read_timeseries"} <= set(names)
    missing = {n: sorted(where) for n, where in names.items() if not _resolve(n)}
    assert missing == {}, missing


def test_the_name_check_sees_a_missing_name():
    assert _resolve("sojourn.stats.repeat_ci")
    assert not _resolve("sojourn.stats.no_such_function")
    assert not _resolve("sojourn.deploy_apply")  # the module before the move: no alias
