"""Scale (issue 19): large topologies validate; a topology whose routing table cannot fit in
memory is refused up front with the estimate (one line, exit 2)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import _local  # noqa: F401  (this worktree's python/sojourn first)

ROOT = Path(__file__).resolve().parents[2]


def sojourn_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sojourn", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def ring_toml(n: int) -> str:
    """A one-way ring of n routers: every node has two neighbours, so every node is in the
    routing table (n x n entries, 4 bytes each), and one CBR flow across it."""
    names = ", ".join(f'"r{i}"' for i in range(n))
    links = "".join(f'[[topology.links]]\nfrom = "r{i}"\nto = "r{(i + 1) % n}"\nrate = "1Gbit"\nduplex = false\n'
                    for i in range(n))
    return (f'duration = "1s"\n[topology]\nkind = "graph"\nnodes = [{names}]\n{links}'
            '[[workload]]\nkind = "cbr"\nfrom = "r0"\nto = "r1"\nrate = "1Mbit"\n')


def test_a_routing_table_too_large_for_memory_is_refused_with_the_estimate(tmp_path):
    # 20,000 core nodes: a 20,000 x 20,000 table of 4-byte link ids is 1.6 GB, more than the
    # 1 GiB allowed here; nothing else in the file comes near (20,000 links, one flow).
    f = tmp_path / "ring.toml"
    f.write_text(ring_toml(20_000))
    r = sojourn_cli("validate", str(f), env={"SOJOURN_MEMORY": "1GiB"})
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert "topology" in r.stderr and "routing table over 20000 core nodes" in r.stderr, r.stderr
    assert "~1.6 GB" in r.stderr, r.stderr


def test_a_large_dumbbell_validates(tmp_path):
    # 10,000 pairs: 20,002 nodes, 40,002 links; the routing table holds the two routers only.
    r = sojourn_cli("validate", str(ROOT / "experiments" / "scale" / "dumbbell-10k-pairs.toml"))
    assert r.returncode == 0, r.stderr
    assert "20002 nodes, 40002 links" in r.stdout
    # The listing stays short: the first links, then the rest counted by discipline.
    assert len(r.stdout.splitlines()) < 40
    assert "39978 more links: 39978 x pfifo" in r.stdout, r.stdout[-300:]
