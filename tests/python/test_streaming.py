"""Streaming of the time series and the packet log to disk (issue #17): a run with an output
directory writes them in Parquet row groups while it proceeds, so its memory does not grow
with the simulated duration; the files are those the in-memory path writes; an aborted run
leaves nothing; the progress bar's ETA is the remaining simulated time at the rate so far."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import sojourn
from sojourn import cli
from sojourn.progress import RunProgress, eta_seconds, format_eta
from sojourn.results import read_timeseries

# A 1 Gbit/s bottleneck with its packets logged and per-flow series: ~81,000 logged
# packets and ~4,000 time-series rows per simulated second.
EXP = """\
name = "stream-check"
duration = "4s"
seed = 3

[topology]
kind = "dumbbell"
pairs = 2
bottleneck = { rate = "1Gbit", delay = "5ms", qdisc = { kind = "fq_codel" } }
access = { rate = "1Gbit", delay = "1ms" }

[[workload]]
kind = "bulk"
pair = 0

[[workload]]
kind = "cbr"
pair = 1
rate = "200Mbit"

[record]
interval = "1ms"
packets = ["bottleneck"]
flows = true
"""

TABLES = ("timeseries.parquet", "packets.parquet", "flows.parquet", "histograms.parquet", "summary.json")


@pytest.fixture()
def exp(tmp_path) -> Path:
    p = tmp_path / "stream.toml"
    p.write_text(EXP)
    return p


def test_cli_run_streams_the_same_bytes_as_the_in_memory_path(exp, tmp_path):
    # 0.5 s: fewer rows than one row group, so the streamed tables are written by
    # pq.write_table itself, like the in-memory path's.
    mem = sojourn.run(exp, duration="500ms")
    assert mem.packets_table.num_rows > 30_000
    a = mem.write(tmp_path / "mem")
    rc = cli.main(["run", str(exp), "--out", str(tmp_path / "cli"), "--duration", "500ms", "--quiet", "--no-report"])
    assert rc == 0
    for name in TABLES:
        assert (a / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name


def test_streamed_row_groups_equal_pyarrow_writing_the_whole_table(exp, tmp_path, monkeypatch):
    # Row groups of 65,536 rows: 4 s logs ~325,000 packets, five row groups written while
    # the run proceeds. The independent truth is pyarrow writing the whole in-memory table
    # with the same row-group size: the same bytes.
    monkeypatch.setenv("SOJOURN_ROW_GROUP_ROWS", "65536")
    res = sojourn.run(exp, out=tmp_path / "s")
    assert set(res.files) == {"timeseries", "packets"} and res.packets_table is None
    monkeypatch.delenv("SOJOURN_ROW_GROUP_ROWS")
    mem = sojourn.run(exp)
    for kind, table in (("packets", mem.packets_table), ("timeseries", mem.timeseries_table)):
        f = tmp_path / "s" / f"{kind}.parquet"
        assert pq.ParquetFile(f).metadata.num_row_groups >= 4, kind
        pq.write_table(table, tmp_path / f"whole-{kind}.parquet", row_group_size=65536, compression="zstd")
        assert f.read_bytes() == (tmp_path / f"whole-{kind}.parquet").read_bytes(), kind
    # the Result reads the streamed tables back from the published files
    assert res.packets.shape[0] == mem.packets_table.num_rows
    assert (res.packets["sojourn_ms"].to_numpy() == mem.packets["sojourn_ms"].to_numpy()).all()
    assert not [p for p in (tmp_path / "s").iterdir() if p.name.startswith(".sojourn-partial-")]


_CHILD = textwrap.dedent("""\
    import sys, sojourn
    exp, duration, out = sys.argv[1:4]
    if out == "-":
        sojourn.run(exp, duration=duration)
    else:
        sojourn.run(exp, duration=duration, out=out)
    # The peak resident set of this process's own address space. (getrusage's ru_maxrss
    # would not do: Linux carries the forking parent's peak over exec into the child's,
    # so under pytest every child would report at least pytest's own peak.)
    with open("/proc/self/status") as f:
        print(next(l for l in f if l.startswith("VmHWM:")).split()[1])
""")


def _peak_rss_mb(exp: Path, duration: str, out: str, env: dict) -> float:
    """Peak resident memory of a child process running one experiment."""
    r = subprocess.run([sys.executable, "-c", _CHILD, str(exp), duration, out], env=env,
                       capture_output=True, text=True, check=True)
    return int(r.stdout.split()[-1]) / 1024.0  # kB


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from Linux /proc")
def test_memory_stays_flat_when_the_run_is_four_times_longer(exp, tmp_path):
    env = dict(os.environ, SOJOURN_ROW_GROUP_ROWS="65536")
    short = _peak_rss_mb(exp, "3s", str(tmp_path / "short"), env)   # ~240,000 logged packets
    long_ = _peak_rss_mb(exp, "12s", str(tmp_path / "long"), env)   # ~970,000 logged packets
    # Held in memory (the API without `out`), the same long run grows with its length:
    # this shows the measurement sees growth where there is some.
    held = _peak_rss_mb(exp, "12s", "-", env)
    assert pq.ParquetFile(tmp_path / "long" / "packets.parquet").metadata.num_rows > 900_000
    assert long_ < 1.3 * short, (short, long_)
    assert held > 1.5 * long_, (long_, held)


def test_an_aborted_streamed_run_leaves_nothing(exp, tmp_path):
    calls = []

    def stop_after_two(sim_s, end_s, events):
        calls.append(sim_s)
        return len(calls) < 3

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        sojourn.run(exp, out=out, progress=stop_after_two, duration="10s")
    assert len(calls) == 3
    assert not out.exists() or list(out.iterdir()) == []


def test_row_group_size_from_the_environment_is_checked(exp, tmp_path, monkeypatch):
    monkeypatch.setenv("SOJOURN_ROW_GROUP_ROWS", "1000")
    with pytest.raises(sojourn.ConfigError, match="multiple of 65536"):
        sojourn.run(exp, out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_eta_is_the_remaining_simulated_time_at_the_rate_so_far():
    # 60 of 3600 simulated seconds in 10 wall seconds: 3540 s to go at 6 s/s = 590 s.
    assert eta_seconds(60.0, 3600.0, 10.0) == 590.0
    assert format_eta(590.0) == "ETA 9:50"
    assert format_eta(42.4) == "ETA 42s"
    assert format_eta(2 * 3600 + 3 * 60 + 7) == "ETA 2:03:07"
    assert format_eta(4.2 * 86400) == "ETA 4.2 days"
    # duration = "1000000h" (3.6e9 s) simulated at 10 s per wall second: 3.6e8 s, 11.4 years
    assert format_eta(eta_seconds(100.0, 3.6e9, 10.0)) == "ETA 11.4 years"
    assert eta_seconds(0.0, 10.0, 5.0) is None and format_eta(None) == "ETA -"


def test_progress_bar_shows_the_eta_with_a_fake_clock():
    from rich.console import Console

    buf = io.StringIO()
    now = [100.0]
    con = Console(file=buf, force_terminal=True, width=160)
    with RunProgress("x.toml", force=True, console=con, clock=lambda: now[0]) as bar:
        now[0] = 110.0
        assert bar(60.0, 3600.0, 1_000_000) is True
        bar._p.refresh()
    text = buf.getvalue()
    assert "ETA 9:50" in text and "60.0/3600 s simulated" in text


def test_progress_is_silent_when_quiet_or_not_a_terminal(capsys):
    with RunProgress("x.toml", quiet=True) as bar:
        bar(1.0, 2.0, 10)
    assert bar._p is None
    with RunProgress("x.toml") as bar:  # pytest's stderr is not a terminal
        bar(1.0, 2.0, 10)
    assert bar._p is None
    assert capsys.readouterr().err == ""


def test_report_reads_a_very_long_series_thinned(exp, tmp_path):
    res = sojourn.run(exp, duration="1s", out=tmp_path / "r")
    full = res.timeseries
    times = sorted(full["time_s"].unique())
    cap = len(full) // 4
    k = -(-len(full) // cap)  # the documented rule: every ceil(rows / max_rows)-th sample time
    assert k in (4, 5)
    thin = read_timeseries(tmp_path / "r" / "timeseries.parquet", max_rows=cap)
    kept = sorted(thin["time_s"].unique())
    assert kept == times[::k]
    # every series of a kept sample time is kept
    t0 = kept[1]
    assert len(thin[thin["time_s"] == t0]) == len(full[full["time_s"] == t0])
    assert len(read_timeseries(tmp_path / "r" / "timeseries.parquet")) == len(full)


def test_ctrl_c_during_a_streamed_cli_run_leaves_nothing(exp, tmp_path):
    import signal
    import time

    out = tmp_path / "out"
    env = dict(os.environ, SOJOURN_ROW_GROUP_ROWS="65536")
    p = subprocess.Popen([sys.executable, "-m", "sojourn", "run", str(exp), "--out", str(out), "--duration", "1000s",
                          "--quiet", "--no-report"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        streamed = []
        while not streamed and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)
            streamed = list(out.glob(".sojourn-partial-*/packets.parquet"))
        assert streamed, "no row group was streamed into the partial directory"
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "nothing written" in err
    assert not out.exists()  # --out was created by this run: removed with everything in it


# Many short transfers (Poisson arrivals, 2,000 in the first 10 s) next to a bulk flow that
# lives the whole run; receivers linger 60 s after the FIN (TIME_WAIT), so by 75 s every
# transfer's record is final and handed out while the run proceeds.
TRANSFERS = """\
name = "stream-flows"
duration = "75s"
seed = 4

[topology]
kind = "dumbbell"
pairs = 2
bottleneck = { rate = "100Mbit", delay = "5ms", qdisc = { kind = "fq_codel" } }

[[workload]]
kind = "bulk"
pair = 0

[[workload]]
kind = "poisson"
pair = 1
interval = "5ms"
stop = "10s"
size = "10kB"
"""


def test_streamed_flow_records_give_the_in_memory_flows_file(tmp_path):
    exp = tmp_path / "flows.toml"
    exp.write_text(TRANSFERS)
    mem = sojourn.run(exp)
    assert mem.flows_table.num_rows > 1_900
    a = mem.write(tmp_path / "mem")
    res = sojourn.run(exp, out=tmp_path / "s")
    for name in ("flows.parquet", "summary.json", "timeseries.parquet"):
        assert (a / name).read_bytes() == (tmp_path / "s" / name).read_bytes(), name
    assert not (tmp_path / "s" / ".flows-spill").exists()
    assert res.flows["flow"].tolist() == list(range(mem.flows_table.num_rows))


def test_flow_row_groups_equal_pyarrow_writing_the_whole_table(tmp_path):
    # The writer alone, with row groups of 1,000 rows: 5,500 records arriving in a
    # shuffled order, 5,000 of them as "finished" chunks and 500 held at the end (in id
    # order), give the bytes pyarrow writes for the whole table sorted by flow id.
    import numpy as np
    import pyarrow as pa

    from sojourn._stream import _FlowStream

    n = 5_500
    rng = np.random.default_rng(7)
    ids = rng.permutation(n).astype(np.uint32)
    t = pa.table({"flow": ids, "kind": [f"k{i % 3}" for i in ids], "fct_s": ids * 0.5,
                  "completed": (ids % 2 == 0)})
    held = sorted(ids[5_000:].tolist())
    done = t.slice(0, 5_000)
    fs = _FlowStream(tmp_path / "flows.parquet", 1_000)
    for k in range(0, 5_000, 700):
        fs.add(done.slice(k, 700))
    last = t.take(pa.array(np.argsort(ids)[held]))
    assert last.column("flow").to_pylist() == held
    assert fs.finish(last) is None
    whole = t.take(pa.array(np.argsort(ids)))
    pq.write_table(whole, tmp_path / "whole.parquet", row_group_size=1_000, compression="zstd")
    assert (tmp_path / "flows.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    assert pq.ParquetFile(tmp_path / "flows.parquet").metadata.num_row_groups == 6
    assert not fs.spill_dir.exists()
