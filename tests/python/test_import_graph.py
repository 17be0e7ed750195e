"""The Python package imports without circles (DESIGN.md: no circular module imports).

Two checks:

* the static import graph of python/sojourn — every ``import``/``from … import`` in a module,
  function-level ones included — has no cycle. An edge to the package facade
  (``import sojourn``, ``from . import run``) counts as an edge to ``sojourn/__init__.py``,
  which imports ``api``, ``results``, ``tidy`` and (lazily) ``sweeps``: a module that the
  facade reaches must call ``sojourn.api`` instead (issue 13: ``sweeps`` used to call
  ``sojourn.run`` through the facade);
* every module imports on its own, in a fresh interpreter state (a cycle that only works
  in one import order fails here).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "python" / "sojourn"


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (the compiled ``sojourn._engine`` is a leaf)."""
    mods = _modules()
    known = set(mods) | {"sojourn._engine"}

    def owner(name: str) -> str:
        while name not in known:
            name = name.rsplit(".", 1)[0]
        return name

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        pkg = m if path.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "sojourn":
                        edges[m].add(owner(a.name))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] != "sojourn":
                    continue
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    edges[m].add(sub if sub in known else owner(target))
        edges[m].discard(m)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_planted_cycle():
    # A test of the test: a -> b -> c -> a is one cycle; d hangs off it.
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_function_level_and_facade_imports():
    g = import_graph()
    # sweeps calls the engine through sojourn.api inside functions (not the facade).
    assert "sojourn.api" in g["sojourn.sweeps"]
    assert "sojourn" not in g["sojourn.sweeps"]
    # The facade re-exports api and lazily imports sweeps.
    assert {"sojourn.api", "sojourn.sweeps"} <= g["sojourn"]


def test_the_package_import_graph_has_no_cycle():
    found = cycles(import_graph())
    assert found == [], f"import cycles in python/sojourn: {found}"


def test_every_module_imports_on_its_own():
    names = sorted(m for m in _modules() if m != "sojourn")
    # One interpreter; before each import every sojourn module is forgotten, so each is
    # imported first (its own imports then run in its order, not the package's).
    code = (
        "import importlib, sys\n"
        f"names = {names!r}\n"
        "bad = []\n"
        "for n in names:\n"
        "    for k in [k for k in sys.modules if k == 'sojourn' or k.startswith('sojourn.')]:\n"
        "        if k != 'sojourn._engine':\n"
        "            del sys.modules[k]\n"
        "    try:\n"
        "        importlib.import_module(n)\n"
        "    except Exception as e:\n"
        "        bad.append(f'{n}: {type(e).__name__}: {e}')\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
