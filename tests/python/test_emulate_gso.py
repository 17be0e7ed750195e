"""`sojourn emulate` in the forwarder's GSO mode (docs/emulate.md, "GSO buffers"): with
`transport.gso = true` (the default) the hosts keep their offloads on and every emulated
link carries their TCP's GSO buffers whole; `gso = false` keeps MTU frames (one MSS per
buffer). Live runs need root (CI runs as root)."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

import sojourn
from live_experiments import live, write

# One CUBIC bulk flow through a 200 Mbit/s pfifo bottleneck (limit 100 frames). At this
# rate Linux's TSO autosizing (pacing_rate >> 10, ~1 ms of data) builds buffers of ~17
# segments, so buffers larger than one 1514-byte frame must reach the discipline.
BULK = """
duration = "3s"
warmup = "1s"
[topology]
bottleneck = { rate = "200Mbit", delay = "2ms", qdisc = { kind = "pfifo", limit = 100 } }
[transport]
cc = "cubic"
[[workload]]
kind = "bulk"
[record]
interval = "100ms"
packets = ["bottleneck"]
"""

MTU_FRAME = 1514  # Ethernet header + 1500-byte IP MTU (the veths' MTU)


def _check_common(res) -> dict:
    s = res.summary
    b = s["links"]["bottleneck"]
    # Conservation, in frames (a GSO buffer is one frame), at the forwarder and per link.
    acc = s["accounting"]
    assert acc["conserved"], acc
    assert acc["created"] == acc["delivered"] + acc["dropped"] + acc["in_network"], acc
    # The serialiser never gives more than the link's capacity (wire bits over the
    # measured period, every segment's headers counted): within 1 % (the rate
    # bound). (How close to 1 one CUBIC flow gets depends on the machine's load: the
    # hosts' TCP shares the CPUs; only that it carried traffic is asserted.)
    assert b["utilisation"] <= 1.01, b
    assert b["utilisation"] >= 0.3, b
    return b


@live
def test_gso_buffers_pass_the_discipline_whole(tmp_path):
    res = sojourn.emulate(write(tmp_path, BULK), out=tmp_path / "o")
    s = res.summary
    assert s["emulate"]["gso_buffers"] is True, s["emulate"]
    assert s["emulate"]["rx_gso_buffers"] > 0, s["emulate"]
    b = _check_common(res)
    # More wire packets than frames: the buffers' segments.
    assert b["tx_segments"] > b["tx_packets"], b
    # The packet log (written to disk) has buffers longer than any MTU frame at the
    # discipline: 200 Mbit/s gives ~17-segment buffers, i.e. ~25 kB.
    log = pq.read_table(tmp_path / "o" / "packets.parquet").to_pandas()
    deq = log[log["event"] == "dequeue"]
    assert len(deq) > 100
    assert deq["len_bytes"].max() > 4 * MTU_FRAME, deq["len_bytes"].describe()
    # The flow's goodput cannot exceed the payload share of the capacity (1448 of every
    # 1514 wire bytes at 200 Mbit/s = 191.3 Mbit/s).
    assert res.flows.goodput_bps.iloc[0] <= 200e6 * 1448 / 1514 * 1.01


@live
def test_gso_false_keeps_mtu_frames(tmp_path):
    res = sojourn.emulate(write(tmp_path, BULK.replace('cc = "cubic"', 'cc = "cubic"\ngso = false')),
                          out=tmp_path / "o")
    s = res.summary
    assert s["emulate"]["gso_buffers"] is False and s["emulate"]["rx_gso_buffers"] == 0, s["emulate"]
    b = _check_common(res)
    assert b["tx_segments"] == b["tx_packets"], b
    log = pq.read_table(tmp_path / "o" / "packets.parquet").to_pandas()
    assert len(log) > 100
    assert log["len_bytes"].max() <= MTU_FRAME


@live
def test_fq_codel_marks_gso_buffers_with_ce(tmp_path):
    # ECN-capable CUBIC through fq_codel in GSO mode: the discipline marks buffers, the
    # forwarder writes CE into each buffer's IP header (the kernel copies it into every
    # segment), the receiver echoes it and the sender's TCP_INFO counts CE deliveries.
    text = (BULK.replace('qdisc = { kind = "pfifo", limit = 100 }', 'qdisc = { kind = "fq_codel", ecn = true }')
            .replace('cc = "cubic"', 'cc = "cubic"\necn = true'))
    res = sojourn.emulate(write(tmp_path, text))
    s = res.summary
    assert s["emulate"]["gso_buffers"] is True and s["emulate"]["rx_gso_buffers"] > 0
    b = _check_common(res)
    assert b["ecn_marks"] > 0, b
    assert res.flows.pkts_ce.iloc[0] > 0, res.flows


@live
def test_cake_keeps_mtu_frames_and_says_why(tmp_path):
    # cake splits GSO buffers itself (split_gso, on by default): the forwarder cannot make
    # frames of split segments, so the hosts segment before it, and the summary says so.
    text = BULK.replace('qdisc = { kind = "pfifo", limit = 100 }', 'qdisc = "cake"')
    res = sojourn.emulate(write(tmp_path, text))
    e = res.summary["emulate"]
    assert e["gso_buffers"] is False and e["rx_gso_buffers"] == 0, e
    assert "topology.bottleneck.qdisc splits GSO buffers" in e["gso_note"], e
    assert res.summary["accounting"]["conserved"]
