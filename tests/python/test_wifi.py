"""Wi-Fi runs from Python (docs/wifi.md): the per-station table (wifi.parquet), the
report's plot, determinism of the new outputs, and the shipped examples."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import sojourn

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "experiments" / "wifi" / "rate-anomaly.toml"


def test_station_table_written_and_deterministic(tmp_path):
    a = sojourn.run(str(EXAMPLE), out=tmp_path / "a", duration="8s")
    b = sojourn.run(str(EXAMPLE), out=tmp_path / "b", duration="8s")
    ta = pd.read_parquet(tmp_path / "a" / "wifi.parquet")
    assert list(ta["station"]) == ["sta0", "sta1"]
    assert list(ta["rate_bps"]) == [6_500_000, 144_444_444]  # HT20 MCS 0 long GI; MCS 15 short GI
    assert (ta["mac"] == "airtime").all() and ta["aql"].all()
    assert (tmp_path / "a" / "summary.json").read_bytes() == (tmp_path / "b" / "summary.json").read_bytes()
    assert (tmp_path / "a" / "wifi.parquet").read_bytes() == (tmp_path / "b" / "wifi.parquet").read_bytes()
    assert a.wifi.equals(b.wifi)
    # Airtime fairness: the slow station does not take the fast one's airtime.
    down = ta.set_index("station")["airtime_down_share"]
    assert abs(down["sta0"] - down["sta1"]) < 0.1


def test_report_has_the_station_plot(tmp_path):
    from sojourn.analysis.htmlreport import write_report

    sojourn.run(str(EXAMPLE), out=tmp_path / "r", duration="6s")
    html = write_report([tmp_path / "r"]).read_text()
    assert "Wi-Fi stations" in html


def test_no_wifi_no_table(tmp_path):
    res = sojourn.run(str(ROOT / "experiments" / "examples" / "cbr-fifo-underload.toml"), out=tmp_path / "c",
                      duration="2s")
    assert res.wifi is None
    assert not (tmp_path / "c" / "wifi.parquet").exists()
    assert "wifi" not in json.loads((tmp_path / "c" / "summary.json").read_text())


@pytest.mark.parametrize("path", sorted((ROOT / "experiments" / "wifi").glob("*.toml"))
                         + sorted((ROOT / "experiments" / "repro" / "wifi").glob("*.toml")))
def test_shipped_wifi_files_validate(path):
    sojourn.validate(str(path))
