"""The Python front has no import circles (issue 13): every import between modules of
``python/sojourn`` (at the top of a file or inside a function; ``from . import x``,
``from .x import y``, ``import sojourn.x``, ``import sojourn``) is an arrow, and no module may
reach itself.

Arrows into the package ``__init__`` (the module ``sojourn``, the public facade) count too:
the facade re-exports ``sojourn.api`` and hands ``sojourn.sweep(...)`` to ``sojourn.sweeps``,
so a module it reaches must call ``sojourn.api`` rather than ``import sojourn`` (``sweeps``
used to call ``sojourn.run`` through the facade: the last loop, removed). Every module also
imports on its own, first, in a fresh interpreter state."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "python" / "sojourn"


def _module(path: Path, root: Path = PKG) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def graph(root: Path = PKG) -> dict[str, set[str]]:
    files = sorted(root.rglob("*.py"))
    # compiled modules (sojourn._engine, known by its committed .pyi stub or its built .so)
    # are import targets too
    known = {_module(f, root) for f in files} | {
        _module(f, root).split(".abi3")[0].split(".cpython")[0]
        for f in [*root.rglob("*.so"), *root.rglob("*.pyi")]}
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
                subs = [f"{mod}.{a.name}" for a in node.names]
                # `from pkg import sub` is an arrow to the submodule only; `from pkg
                # import name` (a name defined in pkg) is an arrow to pkg.
                names = [n for n in subs if n in known] or [mod]
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
                        if cand != me:
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
    assert "sojourn.sweeps" in g and "sojourn.cli" in g and "sojourn.analysis.compare" in g
    assert cycles(g) == [], cycles(g)


def test_the_check_sees_a_lazy_circle(tmp_path):
    pkg = tmp_path / "sojourn"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text("def main():\n    from . import sweeps\n")
    (pkg / "sweeps.py").write_text("def f():\n    from .cli import main\n")
    assert cycles(graph(pkg)) == [{"sojourn.cli", "sojourn.sweeps"}]


def test_the_facade_is_an_arrow_and_sweeps_goes_around_it():
    g = graph()
    assert {"sojourn.api", "sojourn.sweeps", "sojourn.analysis.tidy"} <= g["sojourn"]
    assert "sojourn.api" in g["sojourn.sweeps"]
    assert "sojourn" not in g["sojourn.sweeps"], "sweeps must call sojourn.api, not the facade"


def test_the_check_sees_a_circle_through_the_facade(tmp_path):
    pkg = tmp_path / "sojourn"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def sweep():\n    from .sweeps import f\n")
    (pkg / "sweeps.py").write_text("def f():\n    import sojourn\n")
    assert cycles(graph(pkg)) == [{"sojourn", "sojourn.sweeps"}]


def test_every_module_imports_on_its_own():
    names = sorted(m for m in graph() if m != "sojourn")
    # One interpreter; before each import every sojourn module but the compiled engine
    # (an extension initialises once per process) is forgotten, so each module is
    # imported first and its imports run in its own order.
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


# The families of docs/architecture.md ("The Python front"), top of its table first: an
# import may point down the table or within a row, never up.
FAMILY_ROWS = [
    ("the command", ["sojourn.cli", "sojourn.__main__"]),
    ("reproductions", ["sojourn.repro"]),
    ("the facade", ["sojourn"]),
    ("analysis", ["sojourn.analysis"]),
    ("deploy", ["sojourn.deploy", "sojourn.kernel_engine", "sojourn.kernel_isp"]),
    ("the API and sweeps", ["sojourn.api", "sojourn.sweeps", "sojourn.cluster", "sojourn.testing", "sojourn.isp"]),
    ("leaves", ["sojourn._config", "sojourn._cli_common", "sojourn.units", "sojourn.disciplines", "sojourn.results", "sojourn._stream",
                "sojourn._outdir", "sojourn.progress", "sojourn._plots", "sojourn.dists", "sojourn.threshold",
                "sojourn.mg1sim", "sojourn._engine_info", "sojourn._fingerprint",
                "sojourn.flent_tests", "sojourn.probes", "sojourn.emodel", "sojourn.wifi", "sojourn.live_probes"]),
    ("the engine", ["sojourn._engine"]),
]
# The paths the documentation names for two moved modules: the modules themselves.
ALIASES = {"sojourn.stats": "sojourn.analysis.stats", "sojourn.compare": "sojourn.analysis.compare"}


def _row(module: str) -> int:
    best = None
    for i, (_, prefixes) in enumerate(FAMILY_ROWS):
        for p in prefixes:
            if module == p or (p != "sojourn" and module.startswith(p + ".")):
                if best is None or len(p) > best[1]:
                    best = (i, len(p))
    assert best is not None, f"{module} belongs to no family of docs/architecture.md"
    return best[0]


def test_every_module_has_a_family_and_imports_only_down_the_table():
    g = graph()
    up = []
    for src, dsts in g.items():
        if src in ALIASES:
            assert dsts == {ALIASES[src]}, (src, dsts)  # an alias imports its module and nothing else
            continue
        for dst in dsts:
            if _row(dst) < _row(src):
                up.append(f"{src} ({FAMILY_ROWS[_row(src)][0]}) -> {dst} ({FAMILY_ROWS[_row(dst)][0]})")
    assert up == [], "\n".join(sorted(up))


def test_analysis_runs_no_engine_and_deploy_knows_no_report():
    g = graph()
    for src, dsts in g.items():
        if src.startswith("sojourn.analysis"):
            bad = {d for d in dsts if d.split(".")[:2] in (["sojourn", "api"], ["sojourn", "sweeps"], ["sojourn", "cluster"],
                                                            ["sojourn", "deploy"], ["sojourn", "kernel_engine"], ["sojourn", "kernel_isp"], ["sojourn", "cli"])}
            assert not bad, (src, bad)
        if src.startswith("sojourn.deploy") or src in ("sojourn.kernel_engine", "sojourn.kernel_isp"):
            bad = {d for d in dsts if d.split(".")[:2] in (["sojourn", "analysis"], ["sojourn", "cli"])}
            assert not bad, (src, bad)


def test_the_family_check_sees_an_arrow_up(tmp_path):
    pkg = tmp_path / "sojourn"
    (pkg / "analysis").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "analysis" / "__init__.py").write_text("")
    (pkg / "analysis" / "stats.py").write_text("from ..cli import main\n")
    (pkg / "cli.py").write_text("def main():\n    pass\n")
    g = graph(pkg)
    assert g["sojourn.analysis.stats"] == {"sojourn.cli"}
    assert _row("sojourn.analysis.stats") > _row("sojourn.cli")


def test_building_the_command_line_does_not_import_scipy():
    """Every ``sojourn`` command builds the whole parser first; scipy.stats takes about a
    second to import, so only the commands that compute with it (``compare``, ``threshold``,
    the statistics) may load it. It used to come in through ``compare``'s module and
    ``threshold``'s, for ``sojourn run`` too (bench/README.md, "ISP trees: the run's own
    post-processing")."""
    code = ("import sys; from sojourn.cli import build_parser; build_parser(); "
            "print(sorted(m for m in sys.modules if m == 'scipy' or m.startswith('scipy.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(PKG.parent)})
    assert out.stdout.strip() == "[]", out.stdout
