"""The Python front has no import circles (issue 13): every import between modules of
``python/sojourn`` (at the top of a file or inside a function; ``from . import x``,
``from .x import y``, ``import sojourn.x``, ``import sojourn``) is an arrow, and no module may
reach itself.

The package ``__init__`` (the module ``sojourn``) is the public facade: it re-exports and
hands ``sojourn.sweep(...)`` to ``sojourn.sweeps``, and ``sojourn.sweeps`` still calls
``sojourn.run``/``sojourn.validate`` through it, so arrows into the facade are left out of the
check (moving run/validate out of ``__init__`` would remove that last loop; not done yet)."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "python" / "sojourn"


FACADE = "sojourn"


def _module(path: Path, root: Path = PKG) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def graph(root: Path = PKG) -> dict[str, set[str]]:
    files = sorted(root.rglob("*.py"))
    # compiled modules (sojourn._engine) are import targets too
    known = {_module(f, root) for f in files} | {
        _module(f, root).split(".abi3")[0].split(".cpython")[0] for f in root.rglob("*.so")}
    g: dict[str, set[str]] = {}
    for f in files:
        me = _module(f, root)
        pkg = me if f.name == "__init__.py" else me.rpartition(".")[0]
        out: set[str] = set()
        for node in ast.walk(ast.parse(f.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = pkg
                for _ in range(max(node.level - 1, 0)):
                    base = base.rpartition(".")[0]
                mod = (base + "." + node.module if node.module else base) if node.level else (node.module or "")
                names = [mod] + [f"{mod}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                names = [str(node.args[0].value)]
            for n in names:
                # the longest known module the name starts with
                parts = n.split(".")
                for k in range(len(parts), 0, -1):
                    cand = ".".join(parts[:k])
                    if cand in known:
                        if cand != me and cand != FACADE:
                            out.add(cand)
                        break
        g[me] = out
    return g


def cycles(g: dict[str, set[str]]) -> list[set[str]]:
    def reach(m: str) -> set[str]:
        seen, stack = set(), [m]
        while stack:
            for n in g.get(stack.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    stack.append(n)
        return seen

    r = {m: reach(m) for m in g}
    comps: list[set[str]] = []
    for m in sorted(g):
        if m in r[m] and not any(m in c for c in comps):
            comps.append({n for n in r[m] if m in r.get(n, ())} | {m})
    return comps


def test_no_import_circles_in_the_python_front():
    g = graph()
    assert "sojourn.sweeps" in g and "sojourn.cli" in g and "sojourn.compare" in g
    assert cycles(g) == [], cycles(g)


def test_the_check_sees_a_lazy_circle(tmp_path):
    pkg = tmp_path / "sojourn"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text("def main():\n    from . import sweeps\n")
    (pkg / "sweeps.py").write_text("def f():\n    from .cli import main\n")
    assert cycles(graph(pkg)) == [{"sojourn.cli", "sojourn.sweeps"}]
