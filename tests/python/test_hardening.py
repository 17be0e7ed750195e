"""Hardening (issue #17) beyond the bad-input catalogue: overloaded open loops are refused
up front with their offered load and run when allowed, with the backlog counted in the
memory estimate; `sojourn validate` prints that estimate; a closed pipe ends the command
quietly (docs/limits.md)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import sojourn

ROOT = Path(__file__).resolve().parents[2]


def loop(rate: str, **extra) -> dict:
    """2,000 arrivals per second of 10-kB transfers through a bottleneck of `rate`."""
    wl = {"kind": "poisson", "pair": 0, "interval": "0.5ms", "size": "10kB", **extra}
    return {
        "name": "overload", "duration": "2s", "seed": 1,
        "topology": {"kind": "dumbbell", "pairs": 1, "bottleneck": {"rate": rate, "delay": "5ms"},
                     "access": {"rate": "10Gbit", "delay": "1ms"}},
        "workload": [wl],
    }


def test_overloaded_open_loop_refused_with_its_load_and_the_override():
    # 2,000/s × 10,000 B × 8 = 160 Mbit/s of payload; 10,668 B per transfer on the wire
    # (7 segments × 66 B of headers, a 74-B SYN, two 66-B bare segments): 170.7 Mbit/s.
    with pytest.raises(sojourn.ConfigError) as e:
        sojourn.validate(loop("100Mbit"))
    msg = str(e.value)
    assert msg.startswith("<dict>: workload[0]: an open loop offering "), msg
    for part in ("160.0 Mbit/s of payload", "170.7 Mbit/s on the wire", 'link "bottleneck" of 100.0 Mbit/s',
                 "allow_overload = true"):
        assert part in msg, (part, msg)
    sojourn.validate(loop("1Gbit"))  # 17 %: accepted


def test_allowed_overload_runs_and_its_backlog_grows():
    # With the override the run happens; after 2 s most of the ~4,000 arrivals are still
    # in progress: 100 Mbit/s carries at most 100e6 / 8 / 10,668 ≈ 1,172 transfers/s.
    r = sojourn.run(loop("100Mbit", allow_overload=True))
    f = r.summary["flows"]
    assert 3_600 < f["count"] < 4_400, f
    assert f["completed"] <= 2 * 1_172, f
    assert f["count"] - f["completed"] > 1_000, f


def test_allowed_overload_counts_every_arrival_in_the_estimate():
    # 60 s: 120,000 arrivals, each counted as held (4 KiB) when overload is allowed,
    # instead of min(arrivals, 2,000 × 61 s) = 120,000 as well: use 200 s to tell them apart
    # (400,000 arrivals against 122,000 held).
    allowed = dict(loop("1Gbit", allow_overload=True), duration="200s")
    plain = dict(loop("1Gbit"), duration="200s")
    a = sojourn.validate(allowed)["memory_estimate_bytes"]
    b = sojourn.validate(plain)["memory_estimate_bytes"]
    assert a - b == pytest.approx((400_000 - 122_000) * 4096, rel=1e-9)


def test_validate_prints_the_memory_estimate():
    r = subprocess.run([sys.executable, "-m", "sojourn", "validate", "experiments/examples/cbr-fifo-overload.toml"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    # 192 MiB for the engine and the front (201.3 MB), 4 nodes × 4 KiB, 6 links × 16 KiB,
    # one UDP flow and 300 samples × 54 series × 48 B of time series: 202 MB.
    assert "memory ~202 MB estimated" in r.stdout.splitlines()[0], r.stdout


def test_a_closed_pipe_ends_the_command_quietly():
    # `sojourn validate … | head -0`: the reader is gone before the first line is written.
    p = subprocess.Popen([sys.executable, "-m", "sojourn", "validate", "experiments/examples/cbr-fifo-overload.toml"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    p.stdout.close()
    err = p.stderr.read().decode()
    rc = p.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert rc == 141, (rc, err)
