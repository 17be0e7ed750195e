"""Every shipped file is checked (issue #22): each experiment and sweep file under
experiments/ validates — for a sweep, every point it expands to is checked by the engine —
and `sojourn sweep --dry-run` lists the points without running anything."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import _local  # noqa: F401  (this worktree's python/sojourn first)
from sojourn import cli

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for p in (ROOT / "experiments").rglob("*.toml"))


def test_the_shipped_files_are_found():
    # 25 sweep files and the experiments they build on when this test was written.
    assert sum(f.name.endswith(".sweep.toml") for f in FILES) >= 25
    assert len(FILES) >= 38


@pytest.mark.parametrize("path", FILES, ids=[str(f.relative_to(ROOT / "experiments")) for f in FILES])
def test_every_shipped_file_validates(path, capsys):
    rc = cli.main(["validate", str(path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    if path.name.endswith(".sweep.toml"):
        assert "every point valid" in out, out


def test_validate_names_the_bad_point_of_a_sweep(tmp_path, capsys):
    f = tmp_path / "bad.sweep.toml"
    f.write_text(
        'repeats = 1\n'
        '[[axis]]\nkey = "topology.bottleneck.qdisc"\nvalues = ["pfifo", "nosuchqdisc"]\n'
        '[base]\nduration = "1s"\n[base.topology]\nkind = "dumbbell"\npairs = 1\n'
        'bottleneck = { rate = "10Mbit", delay = "1ms" }\n'
        '[[base.workload]]\nkind = "bulk"\npair = 0\n'
    )
    rc = cli.main(["validate", str(f)])
    _, err = capsys.readouterr()
    assert rc == 2
    assert "nosuchqdisc" in err and err.count("\n") == 1, err


def test_sweep_dry_run_lists_points_and_runs_nothing(tmp_path):
    sw = ROOT / "experiments" / "examples" / "compare-aqm.sweep.toml"
    r = subprocess.run([sys.executable, "-m", "sojourn", "sweep", str(sw), "--dry-run"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "6 points x 2 seeds" in r.stdout and "= 12 runs" in r.stdout
    for q in ["pfifo", "codel", "fq_codel", "pie", "cake", "fq_pie"]:
        assert f'topology.bottleneck.qdisc="{q}"' in r.stdout
    assert list(tmp_path.iterdir()) == []
    # Without --dry-run, --out is required: one line, exit 2.
    r = subprocess.run([sys.executable, "-m", "sojourn", "sweep", str(sw)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and "--out" in r.stderr and r.stderr.count("\n") == 1, r.stderr
