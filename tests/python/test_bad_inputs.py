"""The catalogue of bad inputs (bad_input_catalogue.py): every case prints one line naming
what and where, exits 2, and leaves nothing in the output location; never a traceback, a
crash or a hang. All cases run in one capped subprocess (bad_input_runner.py); the cases
marked ``cli=True`` also run through the real ``sojourn`` command, each in its own capped
process."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import bad_input_catalogue as cat  # noqa: E402

MEM_BYTES = 4 << 30  # address space: numpy/pyarrow reserve much more than they touch
BATCH_CPU_S = 300
CLI_CPU_S = 60


def _limits(mem: int, cpu: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def test_catalogue_is_large_and_ids_unique():
    ids = [c.id for c in cat.CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert len(ids) >= 150, len(ids)
    kinds = {c.kind for c in cat.CASES}
    assert kinds == {"set", "toml", "cli", "sweep", "api"}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("bad-inputs")
    out = work / "results.jsonl"
    proc = subprocess.run([sys.executable, str(HERE / "bad_input_runner.py"), str(out), str(work / "w")],
                          capture_output=True, text=True, cwd=work, preexec_fn=_limits(MEM_BYTES, BATCH_CPU_S),
                          timeout=900)
    recs: dict = {}
    started = None
    for line in out.read_text().splitlines() if out.exists() else []:
        r = json.loads(line)
        if r.get("started"):
            started = r["id"]
            continue
        recs[r["id"]] = r
        started = None
    if started is not None:  # the process died inside this case
        recs[started] = {"id": started, "rc": None,
                         "error": f"the runner died (exit {proc.returncode}) in this case: {proc.stderr[-2000:]}"}
    recs["__proc__"] = {"rc": proc.returncode, "stderr": proc.stderr[-3000:]}
    return recs


def check(rec: dict, case: "cat.Case") -> None:
    assert "error" not in rec, rec["error"]
    err = rec.get("stderr", "")
    assert "Traceback" not in err and "Traceback" not in rec.get("stdout", ""), err
    assert rec["rc"] == 2, f"exit {rec['rc']}, expected 2; stderr: {err!r}"
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one line, got {len(lines)}: {err[:1000]!r}"
    assert lines[0].startswith("sojourn"), lines[0]
    assert len(lines[0]) < 600, f"message of {len(lines[0])} characters"
    assert case.expect in lines[0], f"{case.expect!r} not in {lines[0]!r}"
    assert not rec.get("left"), f"left in the output location: {rec['left']}"


@pytest.mark.parametrize("case", cat.CASES, ids=[c.id for c in cat.CASES])
def test_bad_input(case, results):
    rec = results.get(case.id)
    if rec is None:
        pytest.fail(f"case did not run; runner exit {results['__proc__']['rc']}: {results['__proc__']['stderr']}")
    check(rec, case)


CLI_CASES = [c for c in cat.CASES if c.cli]


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.id for c in CLI_CASES])
def test_bad_input_through_the_command(case, tmp_path):
    """The same cases through the real ``sojourn`` command (a fresh process each)."""
    import bad_input_runner as runner

    common = runner.setup(tmp_path / "w")
    p = runner.case_paths(tmp_path / "w", case)
    if case.kind == "api":
        pytest.skip("API case")
    argv = runner.argv_of(case, common, p)
    before = runner.snapshot(p["dir"])
    # The command runs the same sojourn package this test imported (the installed wheel in
    # CI, the editable tree in development): the source tree alone has no compiled engine.
    import sojourn

    pkg_root = str(Path(sojourn.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=pkg_root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        r = subprocess.run([sys.executable, "-m", "sojourn", *argv], capture_output=True, text=True, cwd=tmp_path,
                           preexec_fn=_limits(MEM_BYTES, CLI_CPU_S), timeout=120, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("hang: no exit within 120 s")
    after = runner.snapshot(p["dir"])
    rec = {"rc": r.returncode, "stderr": r.stderr, "stdout": r.stdout,
           "left": sorted(k for k in after if k not in before or after[k] != before[k])}
    if r.returncode < 0:
        rec["error"] = f"killed by signal {-r.returncode}: {r.stderr[-2000:]}"
    check(rec, case)
