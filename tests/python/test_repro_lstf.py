"""Seed 004 reproduction (docs/repro/lstf.md), short enough for CI: 20 simulated minutes of
four points of experiments/repro/lstf/lstf.sweep.toml. Truths: the paper's Table II (CoDel
with the seed's literal 100 s / 5 s never drops; mean queueing delay 35.3 ms, std 2.3 ms),
its finding that LSTFCoDel has a lower mean and a higher variance of delay than CoDel, and
sojourn's own finding on why: with no loss at all, LSTFCoDel's reordering triggers TCP fast
retransmits and halves the TCP flow's window, so its queue and delay are lower because TCP
sends less (the paper reports no throughput)."""
from __future__ import annotations

from pathlib import Path

import pytest

from sojourn.repro import lstf

POINTS = ["literal-codel", "literal-a0.5", "intended-codel", "intended-a0.5"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro-lstf")
    lstf.run(out, only=POINTS, duration="1200s", interval="50ms")
    return lstf.table(out).set_index(["setting", "qdisc"])


def test_literal_codel_never_drops_and_matches_table_ii(table):
    c = table.loc[("literal", "codel")]
    assert c.drops_aqm == 0 and c.drops_overlimit == 0
    assert c.delay_mean_s == pytest.approx(lstf.PAPER_CODEL_DELAY["mean"], rel=0.15)
    assert c.delay_std_s < 2 * lstf.PAPER_CODEL_DELAY["std"]
    assert c.queue_mean_B == pytest.approx(lstf.PAPER_CODEL_QUEUE["mean"], rel=0.15)
    assert c.utilisation > 0.97


def test_lstf_lower_mean_higher_variance_of_delay(table):
    for setting in ("literal", "intended"):
        c, l = table.loc[(setting, "codel")], table.loc[(setting, "lstf_codel")]
        assert l.delay_mean_s < c.delay_mean_s, setting
        assert l.delay_var_s2 > c.delay_var_s2, setting
        assert l.queue_mean_B < c.queue_mean_B, setting
    # The intended units make CoDel drop; the literal ones never do.
    assert table.loc[("intended", "codel")].drops_aqm > 0


def test_lstf_gains_come_from_tcp_spurious_retransmissions(table):
    c, l = table.loc[("literal", "codel")], table.loc[("literal", "lstf_codel")]
    # No packet is lost anywhere, yet TCP retransmits: duplicate ACKs from reordering.
    assert l.drops_aqm == 0 and l.drops_overlimit == 0
    assert c.tcp_retransmits == 0 and l.tcp_retransmits > 100
    assert l.tcp_goodput_kbps < 0.85 * c.tcp_goodput_kbps
