"""Sweeps on a Dask cluster (issue 19): a two-worker LocalCluster gives per-run files
byte-identical to the local process pool, the files an experiment refers to travel with
the tasks (workers need neither the client's disk nor its cwd), a client killed with
SIGKILL mid-sweep loses and duplicates nothing on resumption, and a bad address is one
line and exit 2."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import sojourn
from sojourn import cli
from sojourn import cluster as cl
from sojourn import sweeps as sw

distributed = pytest.importorskip("distributed", reason="dask[distributed] is in the test extra (pip install '.[test]')")

# A cellular-like trace (Mahimahi format: one delivery opportunity per line, in ms) and a
# flow-size CDF, both referenced by relative names from a subdirectory.
TRACE = "".join(f"{t}\n" for t in range(0, 100, 2))  # 1500 B every 2 ms = 6 Mbit/s, repeating
CDF = "1000 0.0\n10000 0.5\n100000 1.0\n"

SHIPPED_BASE = """
name = "shipped"
duration = "2s"
seed = 3

[topology]
kind = "dumbbell"
pairs = 2
bottleneck = { trace = "inputs/cell.trace", delay = "10ms", qdisc = "pfifo" }
access = { rate = "1Gbit", delay = "1ms" }

[[workload]]
kind = "actors"
pairs = "all"
size = { dist = "empirical", file = "inputs/sizes.cdf" }
think = "20ms"

[record]
interval = "100ms"
links = ["bottleneck"]
"""

SHIPPED_SWEEP = """
base = "shipped.toml"
repeats = 2
[[axis]]
key = "topology.bottleneck.qdisc"
values = ["pfifo", "fq_codel"]
"""

# About 0.2 s per run on a quiet machine (1 Gbit/s of bulk TCP for 1 s): long enough for
# a SIGKILL to land mid-sweep, short enough for CI.
BULK_BASE = """
name = "bulk"
duration = "1s"
seed = 1

[topology]
kind = "dumbbell"
pairs = 4
bottleneck = { rate = "1Gbit", delay = "5ms", qdisc = "fq_codel" }
access = { rate = "10Gbit", delay = "1ms" }

[[workload]]
kind = "bulk"
pairs = "all"
"""

BULK_SWEEP = """
base = "bulk.toml"
repeats = 2
[[axis]]
key = "topology.bottleneck.qdisc"
values = ["pfifo", "codel", "fq_codel"]
"""


@pytest.fixture(scope="module")
def dask_cluster():
    """Two worker processes, one thread each (one run at a time per worker)."""
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as c:
        yield c


def _digests(out: Path) -> dict:
    """sha256 of every file under a sweep directory except the wall-clock ``perf.json``
    files (the one output that measures the machine, docs/sweeps.md) and hidden files."""
    return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != "perf.json" and not any(x.startswith(".") for x in p.relative_to(out).parts)}


def _write_shipped(root: Path) -> Path:
    (root / "inputs").mkdir()
    (root / "inputs" / "cell.trace").write_text(TRACE)
    (root / "inputs" / "sizes.cdf").write_text(CDF)
    (root / "shipped.toml").write_text(SHIPPED_BASE)
    f = root / "s.sweep.toml"
    f.write_text(SHIPPED_SWEEP)
    return f


def test_referenced_files_are_found_where_the_engine_reads_them(tmp_path):
    cfg = {"topology": {"kind": "graph", "links": [{"from": "a", "to": "b", "trace": "t/up.trace"},
                                                   {"from": "b", "to": "a", "trace": "/abs/down.trace"}]},
           "workload": [{"kind": "closed_loop", "size": {"dist": "empirical", "file": "c.cdf"}},
                        {"kind": "cbr", "size": {"dist": "fixed", "value": "1kB"}, "file": "not-a-cdf"}]}
    assert cl.referenced_files(cfg) == ["t/up.trace", "/abs/down.trace", "c.cdf"]


def _task_dirs(dask_worker) -> list:
    """The task directories left in a worker's local directory (run by ``client.run``)."""
    return sorted(p.name for p in Path(dask_worker.local_directory).glob("sojourn-task-*"))


def test_cluster_outputs_are_byte_identical_to_the_local_pool_and_inputs_travel(tmp_path, dask_cluster, monkeypatch):
    f = _write_shipped(tmp_path)
    local = tmp_path / "local"
    runs_local = sojourn.sweep(f, local, jobs=2)
    assert len(runs_local) == 4 and runs_local["conserved"].all()
    # The trace limits the bottleneck: 1500 B per 2 ms opportunity is 6 Mbit/s at most.
    assert (runs_local["throughput_bps"] <= 6.0e6 * 1.001).all() and (runs_local["throughput_bps"] > 1e6).all()

    # Workers in an empty directory of their own ...
    elsewhere = tmp_path / "worker-cwd"
    elsewhere.mkdir()
    with distributed.Client(dask_cluster, set_as_default=False) as client:
        client.run(os.chdir, str(elsewhere))
        assert set(client.run(os.getcwd).values()) == {str(elsewhere)}
        # ... and the inputs gone from the client's disk as soon as the client has read
        # them for the last point (before any task runs): only the shipped bytes remain.
        real, calls = cl.pack_files, []

        def pack_then_remove(cfg, base_dir, where=""):
            files = real(cfg, base_dir, where)
            calls.append(sorted(files))
            if len(calls) == 2:  # two points
                shutil.move(str(tmp_path / "inputs"), str(tmp_path / ".moved-away"))
            return files

        monkeypatch.setattr(cl, "pack_files", pack_then_remove)
        # Run directories come back from the workers in pieces of 4 KiB (the client holds
        # one piece at a time), and each worker's copy is removed after.
        monkeypatch.setattr(cl, "FETCH_BYTES", 4096)
        remote = tmp_path / "remote"
        runs_remote = sojourn.sweep(f, remote, cluster=client)

        for _ in range(100):  # removal is fire-and-forget: up to ~10 s
            left = [d for ds in client.run(_task_dirs).values() for d in ds]
            if not left:
                break
            time.sleep(0.1)
        assert left == []
    assert calls == [["inputs/cell.trace", "inputs/sizes.cdf"]] * 2
    assert not (tmp_path / "inputs").exists()

    a, b = _digests(local), _digests(remote)
    assert len([k for k in a if k.endswith("summary.json")]) == 4
    assert a == b  # every per-run file, runs.parquet and flows.parquet: the same bytes
    assert runs_local.equals(runs_remote)
    # experiment.json records the file names as written, not the worker's temporary copies
    exp = json.loads((remote / "runs/pfifo/seed-3/experiment.json").read_text())
    assert exp["topology"]["bottleneck"]["trace"] == "inputs/cell.trace"


def test_dask_resumes_after_sigkill_of_the_client(tmp_path, dask_cluster):
    (tmp_path / "bulk.toml").write_text(BULK_BASE)
    f = tmp_path / "b.sweep.toml"
    f.write_text(BULK_SWEEP)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "sojourn", "sweep", str(f), "--out", str(out), "--quiet",
           "--cluster", dask_cluster.scheduler_address]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while not list(out.glob("runs/*/seed-*/summary.json")):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no run finished within 120 s"
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    done_at_kill = sorted(p.parent.relative_to(out).as_posix() for p in out.glob("runs/*/seed-*/summary.json"))
    assert 1 <= len(done_at_kill) < 6, "the sweep must have been killed mid-way"
    for d in done_at_kill:  # what counts as done is complete
        assert pq.read_table(out / d / "flows.parquet").num_rows == 4

    st = sw.run_plan(sw.load_plan(f), out, cluster=dask_cluster)
    assert (st["cached"], st["ran"], st["failed"]) == (len(done_at_kill), 6 - len(done_at_kill), [])
    runs = sw.merge(sw.load_plan(f), out)
    assert len(runs) == 6 and len(set(zip(runs["point"], runs["seed"]))) == 6
    assert not list(out.rglob(".sojourn-partial-*"))

    # Nothing lost or duplicated means: the same bytes as an uninterrupted local sweep.
    ref = tmp_path / "ref"
    sojourn.sweep(f, ref, jobs=1)
    assert _digests(ref) == _digests(out)


@pytest.mark.parametrize("address, says", [
    ("tcp://127.0.0.1:9", "cannot connect to the Dask scheduler at tcp://127.0.0.1:9 within 1 s"),
    ("banana", "'banana': expected a scheduler address like tcp://host:8786"),
    ("slurm:zero", "expected slurm:N"),
])
def test_bad_cluster_address_is_one_line_and_exit_2(tmp_path, capsys, address, says):
    (tmp_path / "bulk.toml").write_text(BULK_BASE)
    f = tmp_path / "b.sweep.toml"
    f.write_text(BULK_SWEEP)
    out = tmp_path / "never"
    t0 = time.monotonic()
    rc = cli.main(["sweep", str(f), "--out", str(out), "--cluster", address, "--connect-timeout", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    msgs = [x for x in err if x.startswith("sojourn:")]
    assert len(msgs) == 1 and msgs == err[-1:] and says in msgs[0], err
    assert not out.exists()  # nothing written


def test_jobs_and_cluster_together_are_refused(tmp_path, capsys):
    (tmp_path / "bulk.toml").write_text(BULK_BASE)
    f = tmp_path / "b.sweep.toml"
    f.write_text(BULK_SWEEP)
    rc = cli.main(["sweep", str(f), "--out", str(tmp_path / "o"), "--jobs", "2", "--cluster", "tcp://127.0.0.1:9"])
    assert rc == 2 and "--jobs applies to the local process pool" in capsys.readouterr().err


FAKE_SBATCH = """#!/bin/sh
# A one-machine stand-in for Slurm's sbatch: runs the job script dask-jobqueue wrote (a
# `dask worker` command) in a new session and prints the job id the way sbatch does.
job="$(mktemp "${TMPDIR:-/tmp}/sojourn-fake-slurm-XXXXXX")"
cp "$1" "$job"
setsid sh "$job" > "$job.log" 2>&1 < /dev/null &
echo "Submitted batch job $!"
"""

FAKE_SCANCEL = """#!/bin/sh
# scancel JOBID...: the fake job id is the session leader's pid: end its whole group.
for j in "$@"; do kill -TERM -- "-$j" 2>/dev/null; done
exit 0
"""


def test_slurm_form_runs_through_dask_jobqueue(tmp_path, monkeypatch, capsys):
    """`--cluster slurm:N` end to end with stand-ins for sbatch/scancel (no Slurm on the CI
    machine): dask-jobqueue writes the job script, "submits" it, its worker joins, the
    runs match the local pool byte for byte, and the job is cancelled at the end."""
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is in the test extra (pip install '.[test]')")
    import dask

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("scancel", FAKE_SCANCEL), ("squeue", "#!/bin/sh\nexit 0\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    f = _write_shipped(tmp_path)
    local = tmp_path / "local"
    sojourn.sweep(f, local, jobs=1)
    with dask.config.set({"jobqueue.slurm.cores": 1, "jobqueue.slurm.memory": "1GB", "jobqueue.slurm.processes": 1,
                          "jobqueue.slurm.python": sys.executable, "jobqueue.slurm.interface": None}):
        rc = cli.main(["sweep", str(f), "--out", str(tmp_path / "slurm"), "--cluster", "slurm:1", "--connect-timeout", "30"])
    assert rc == 0, capsys.readouterr().err
    assert _digests(local) == _digests(tmp_path / "slurm")
    jobs = [p for p in tmp_path.glob("sojourn-fake-slurm-*") if p.suffix != ".log"]
    assert len(jobs) == 1 and "#SBATCH" in jobs[0].read_text()  # one job, written by dask-jobqueue
    # ... and cancelled when the sweep closed its cluster: no process runs the job any more
    deadline = time.monotonic() + 20
    while _running_job(jobs[0]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running_job(jobs[0])


def _running_job(job: Path) -> bool:
    for d in Path("/proc").iterdir():
        try:
            if str(job).encode() in (d / "cmdline").read_bytes():
                return True
        except OSError:
            pass
    return False
