"""Runs larger than the machine (issue 40 §5): the memory estimate is held against what the
process may have (the address-space limit, the cgroup's limit, MemAvailable; SOJOURN_MEMORY
overrides), the CPU-time estimate against a CPU-day (--allow-long-run overrides); both are
printed by `validate` and at the start of `run`. The refusals themselves, through the real
command under the catalogue's 4 GiB cap, are cases of bad_input_catalogue.py ("limits")."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import _local  # noqa: F401  (this worktree's python/sojourn first)
import bad_input_catalogue as cat

ROOT = Path(__file__).resolve().parents[2]


def _address_space(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def sojourn_cli(*args: str, cwd: Path, env: dict | None = None, limit: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sojourn", *args], capture_output=True, text=True, cwd=cwd,
                          env={**{k: v for k, v in os.environ.items() if k != "SOJOURN_MEMORY"}, **(env or {})},
                          preexec_fn=_address_space(limit) if limit else None, timeout=300)


def base(tmp_path: Path) -> Path:
    f = tmp_path / "base.toml"
    f.write_text(cat.BASE_TOML)
    return f


def test_an_address_space_limit_refuses_what_memory_alone_would_allow(tmp_path):
    # 20,000 pairs: 40,002 nodes and 80,002 links, ~1.5 GB estimated; a 2 GiB (2.1 GB)
    # address-space cap leaves less than that once the process and a run's reserve are in.
    f = base(tmp_path)
    capped = sojourn_cli("validate", str(f), "--set", "topology.pairs=20000", cwd=tmp_path, limit=2 << 30)
    assert capped.returncode == 2, capped.stderr
    assert capped.stderr.count("\n") == 1, capped.stderr
    assert "topology.pairs: 20000 pairs (40002 nodes, 80002 links): needs ~" in capped.stderr, capped.stderr
    assert "the address-space limit (RLIMIT_AS 2.1 GB" in capped.stderr, capped.stderr
    free = sojourn_cli("validate", str(f), "--set", "topology.pairs=20000", cwd=tmp_path)
    assert free.returncode == 0, free.stderr


def test_sojourn_memory_replaces_the_machine_figures(tmp_path):
    # Under the catalogue's 4 GiB cap 100,000 pairs are refused (bad_input_catalogue.py);
    # SOJOURN_MEMORY=64GiB says the user accepts it, and validation alone fits in the cap.
    f = base(tmp_path)
    r = sojourn_cli("validate", str(f), "--set", "topology.pairs=100000", cwd=tmp_path, limit=4 << 30,
                    env={"SOJOURN_MEMORY": "64GiB"})
    assert r.returncode == 0, r.stderr
    assert "200002 nodes, 400002 links" in r.stdout.splitlines()[0], r.stdout


def test_validate_prints_both_estimates_and_allow_long_run_passes(tmp_path):
    f = base(tmp_path)
    r = sojourn_cli("validate", str(f), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "memory ~" in r.stdout and "CPU time ~" in r.stdout, r.stdout
    refused = sojourn_cli("validate", str(f), "--set", 'duration="1000000h"', cwd=tmp_path)
    assert refused.returncode == 2 and "--allow-long-run" in refused.stderr, refused.stderr
    allowed = sojourn_cli("validate", str(f), "--set", 'duration="1000000h"', "--allow-long-run", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    # A million hours of a 10 Mbit/s dumbbell is weeks of CPU, whatever the exact figure.
    assert " days (docs/limits.md)" in allowed.stdout.splitlines()[0], allowed.stdout


def test_run_prints_the_estimates_as_it_starts(tmp_path):
    f = base(tmp_path)
    r = sojourn_cli("run", str(f), "--out", str(tmp_path / "out"), "--no-report", "--duration", "0.2s", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"{f}: memory ~") and "CPU time ~" in first, r.stderr
    assert (tmp_path / "out" / "summary.json").exists()


def test_sweep_dry_run_sums_the_estimate_and_checks_every_point(tmp_path):
    f = base(tmp_path)
    sw = tmp_path / "long.sweep.toml"
    sw.write_text(f'base = "{f}"\n[[axis]]\nkey = "duration"\nvalues = ["2s", "1000000h"]\n')
    refused = sojourn_cli("sweep", str(sw), "--dry-run", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "point '1000000h': duration:" in refused.stderr and "--allow-long-run" in refused.stderr, refused.stderr
    allowed = sojourn_cli("sweep", str(sw), "--dry-run", "--allow-long-run", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert "CPU ~" in allowed.stdout and "estimated in all" in allowed.stdout, allowed.stdout
