"""ECN negotiation of the live hosts' kernel TCP, seen in the real handshake headers the
forwarder moves (docs/emulate.md, "ECN and Accurate ECN"): RFC 3168 ECN (`ecn = true`,
net.ipv4.tcp_ecn = 1 on the sender) and Accurate ECN (`ecn = "accecn"`, RFC 9768,
net.ipv4.tcp_ecn = 3 on the sender and AccECN accepted on the receiver). A kernel that
refuses tcp_ecn = 3 makes the live engine refuse `ecn = "accecn"` with the reason, and the
end-to-end AccECN test skips saying so. Live runs need root (CI runs as root)."""
from __future__ import annotations

import pytest

import sojourn
from live_experiments import live, write

BULK = """
duration = "3s"
warmup = "1s"
[topology]
bottleneck = { rate = "20Mbit", delay = "10ms", qdisc = { kind = "fq_codel", ecn = true } }
[transport]
cc = "cubic"
ecn = ECN
[[workload]]
kind = "bulk"
"""


def _exp(tmp_path, ecn: str):
    return write(tmp_path, BULK.replace("ECN", ecn))


def _accecn_refusal(tmp_path) -> str | None:
    """The live engine's refusal of `ecn = "accecn"` on this kernel, or None if it runs."""
    try:
        sojourn.emulate_check(_exp(tmp_path, '"accecn"'))
    except sojourn.ConfigError as e:
        return str(e)
    return None


@live
def test_classic_ecn_handshake_in_the_headers(tmp_path):
    # RFC 3168 §6.1.1: an ECN-setup SYN has ECE and CWR set, an ECN-setup SYN-ACK ECE only.
    res = sojourn.emulate(_exp(tmp_path, "true"))
    h = res.summary["emulate"]["ecn_handshakes"]
    assert h["syn"]["ecn"] >= 1 and h["syn"]["accecn"] == 0, h
    assert h["syn_ack"]["ecn"] >= 1 and h["syn_ack"]["accecn"] == 0, h
    assert res.summary["links"]["bottleneck"]["ecn_marks"] > 0
    assert res.flows.pkts_ce.iloc[0] > 0
    # Without ECN neither side asks (tcp_ecn = 2 only answers).
    res = sojourn.emulate(_exp(tmp_path, "false"))
    h = res.summary["emulate"]["ecn_handshakes"]
    assert h["syn"]["none"] >= 1 and h["syn"]["ecn"] == 0 and h["syn"]["accecn"] == 0, h
    assert h["syn_ack"]["none"] >= 1 and h["syn_ack"]["ecn"] == 0, h


@live
def test_accecn_refused_with_the_kernel_s_reason(tmp_path):
    why = _accecn_refusal(tmp_path)
    if why is None:
        pytest.skip("this kernel accepts net.ipv4.tcp_ecn = 3: AccECN runs (next test)")
    assert "transport.ecn" in why and "tcp_ecn = 3" in why, why


@live
def test_accecn_negotiated_and_marked_end_to_end(tmp_path):
    why = _accecn_refusal(tmp_path)
    if why is not None:
        pytest.skip(f"this kernel cannot negotiate Accurate ECN: {why}")
    # RFC 9768 §3.1.1: an AccECN SYN sets AE, CWR and ECE; the SYN-ACK answers with one of
    # the AccECN encodings (AE, CWR, ECE) = 010, 110, 100 or 111.
    res = sojourn.emulate(_exp(tmp_path, '"accecn"'))
    h = res.summary["emulate"]["ecn_handshakes"]
    assert h["syn"]["accecn"] >= 1, h
    assert h["syn_ack"]["accecn"] >= 1, h
    assert res.summary["links"]["bottleneck"]["ecn_marks"] > 0
    assert res.flows.pkts_ce.iloc[0] > 0
