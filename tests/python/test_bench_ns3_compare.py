"""bench/ns3_compare.py's sojourn side (the ns-3 side needs the optional `ns3` wheel and
minutes; it is a manual benchmark). The script times sojourn in a fresh process per scenario
(bench/HISTORY.md, "Quiet, full length, end of session 10"): that run must be the very run the
in-process call makes, or the ratio table would compare different simulations."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _script():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import ns3_compare

    return ns3_compare


def test_the_fresh_process_runs_the_same_simulation():
    n = _script()
    row_c_one_flow = next(s for s in n.scenarios(True, 16) if s.row == "C" and s.flows == 1)
    s = dataclasses.replace(row_c_one_flow, duration_s=1.0)
    here = n.run_sojourn(s, 1)
    fresh = n.run_sojourn_fresh(s, 1)
    assert fresh["process"] == "fresh"
    for k in ("bottleneck_packets", "events", "drops", "retransmits", "utilisation", "mean_sojourn_ms"):
        assert fresh[k] == here[k], k
    # One CUBIC flow on 100 Mbit/s for 1 s from a cold start (10 ms RTT): at most the link's
    # 100e6 / 8 / 1514 = 8,256 Ethernet frames, and most of them once slow start is over.
    assert 6_000 < here["bottleneck_packets"] <= 8_257
