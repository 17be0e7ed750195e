"""The live engine streams its packet log while the run proceeds (issue #17, docs/limits.md):
the forwarder moves its rows to the run's thread, which maps their connections to the load
generator's flows and hands them out in chunks of exactly `chunk_rows` rows, the
simulator's sink protocol; `--out` writes them to packets.parquet in row groups. Live
runs need root (CI runs as root)."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

import sojourn
from live_experiments import live, write

# Two flows (a bulk flow and a later transfer) through a 20 Mbit/s pfifo of 30 frames:
# ~1,700 frames/s reach the bottleneck's log, some dropped.
TEXT = """
duration = "3s"
[topology]
pairs = 2
bottleneck = { rate = "20Mbit", delay = "2ms", qdisc = { kind = "pfifo", limit = 30 } }
[transport]
cc = "cubic"
gso = false
[[workload]]
kind = "bulk"
pair = 0
[[workload]]
kind = "transfer"
pair = 1
size = "1MB"
start = "1s"
[record]
interval = "100ms"
packets = ["bottleneck"]
"""


@live
def test_packet_log_streams_in_chunks_with_the_flows_mapped(tmp_path):
    from sojourn import _engine
    from sojourn._stream import arrow_table

    cfg, _name, base = sojourn.api._prepare(write(tmp_path, TEXT), None, None, None)
    chunks = []
    raw = _engine.emulate(cfg, str(base), None, None, None,
                          lambda kind, cols, names: chunks.append((kind, arrow_table(cols))), 1024)
    packets = [t for k, t in chunks if k == "packets"]
    assert len(packets) >= 3, [k for k, _ in chunks]
    assert all(t.num_rows == 1024 for t in packets)
    rest = arrow_table(raw["packets"])
    assert rest.num_rows < 1024 + 4096  # what came after the last chunk, not the whole log
    flows = arrow_table(raw["flows"]).column("flow").to_pylist()
    logged = [f for t in packets for f in t.column("flow").to_pylist()] + rest.column("flow").to_pylist()
    # Every row names one of the run's flows (the bottleneck carries only data frames of
    # the load generator's connections), and both flows appear.
    assert set(logged) <= set(flows), (set(logged), flows)
    assert len(set(logged)) == 2
    # The drops in the log are the flows' drops (pkts_dropped counts them per flow).
    events = [e for t in packets for e in t.column("event").to_pylist()] + rest.column("event").to_pylist()
    f = arrow_table(raw["flows"]).to_pandas()
    assert sum(e.startswith("drop:") for e in events) == int(f["pkts_dropped"].sum())


@live
def test_packet_log_written_by_the_cli_in_row_groups(tmp_path):
    out = tmp_path / "o"
    res = sojourn.emulate(write(tmp_path, TEXT), out=out)
    pf = pq.ParquetFile(out / "packets.parquet")
    assert pf.metadata.num_rows > 1000
    log = pf.read().to_pandas()
    assert set(log["flow"]) <= set(res.flows["flow"])
    assert (log["link"] == "bottleneck").all()
    assert not [p for p in out.iterdir() if p.name.startswith(".sojourn-partial-")]
