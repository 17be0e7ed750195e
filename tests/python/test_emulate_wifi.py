"""The Wi-Fi medium in the live forwarder (docs/wifi.md, "Live"): one access point and two
stations, a slow one (6.5 Mbit/s) and a fast one (144.4 Mbit/s), both flooded with UDP
from the server. The forwarder drives the core's medium in virtual time, so live and
simulated runs of the same file should agree; the hand-worked truths are in
crates/sojourn-core/tests/wifi_truths.rs (with 4-ms aggregates: 3.0 and 66.4 Mbit/s of IP
packets with airtime fairness; 5.5 Mbit/s each with the FIFO)."""
from __future__ import annotations

from pathlib import Path

import pytest

import sojourn
from live_experiments import live, write

ROOT = Path(__file__).resolve().parents[2]


def two_stations(mac: str) -> str:
    """experiments/wifi/rate-anomaly.toml (6.5 and 144.4 Mbit/s) with both stations
    flooded by UDP at 80 Mbit/s instead of TCP, 5 s."""
    text = (ROOT / "experiments" / "wifi" / "rate-anomaly.toml").read_text()
    for old, new in [('kind = "bulk"', 'kind = "cbr"\nrate = "80Mbit"'), ('duration = "20s"', 'duration = "5s"'),
                     ('warmup = "5s"', 'warmup = "1s"'), ('mac = "airtime"', f'mac = "{mac}"')]:
        assert old in text
        text = text.replace(old, new)
    return text


def down_mbps(res, i: int) -> float:
    return res.summary["links"][f"sta{i}.down"]["throughput_bps"] / 1e6


@live
@pytest.mark.parametrize("mac", ["airtime", "fifo"])
def test_one_ap_two_stations_live_agree_with_the_simulator(tmp_path, mac):
    exp = write(tmp_path, two_stations(mac))
    live_res = sojourn.emulate(exp)
    sim_res = sojourn.run(exp)
    lv = [down_mbps(live_res, i) for i in (0, 1)]
    sm = [down_mbps(sim_res, i) for i in (0, 1)]
    if mac == "airtime":
        # Half the airtime each: the slow station ~3, the fast one ~67 Mbit/s; the medium
        # is the same code in the same virtual time, so live agrees with the simulator.
        assert 2.5 < lv[0] < 3.6 and lv[1] > 55, (lv, sm)
        for a, b in zip(lv, sm):
            assert abs(a - b) <= 0.1 * b, (lv, sm)
    else:
        # The anomaly: the slow station takes more than its half of the airtime (above
        # 3 Mbit/s) and drags the fast one far below its airtime-fair 67 Mbit/s. How far
        # depends on the order frames fill the shared FIFO (exact CBR phases in the
        # simulator, the senders' real timing live): no closer agreement is asked.
        assert lv[0] > 4.0 and lv[1] < 25, (lv, sm)
        assert sm[0] > 4.0 and sm[1] < 25, (lv, sm)
    links = live_res.summary["links"]
    assert links["sta0.down"]["qdisc"] == f"mac80211 {mac}"
