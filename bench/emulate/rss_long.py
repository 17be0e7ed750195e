"""Memory of a long live run with the packet log on (issue #17, docs/limits.md): runs
`sojourn emulate` (a CUBIC bulk flow through a pfifo bottleneck, `[record] packets` on
it) as a child process and samples its resident set size every few seconds. With the
packet log streamed to disk the RSS stays flat; held in memory it grows with the run.
Needs root.

    sudo python bench/emulate/rss_long.py [--duration 180s] [--rate 100Mbit] [--every 10]

Prints the RSS samples (MiB) and the peak; `PYTHONPATH` chooses the package measured.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEXT = """
duration = "{duration}"
[topology]
bottleneck = {{ rate = "{rate}", delay = "5ms", qdisc = {{ kind = "pfifo", limit = 200 }} }}
[transport]
cc = "cubic"
gso = false   # MTU frames: one packet-log row per segment
[[workload]]
kind = "bulk"
[record]
interval = "100ms"
packets = ["bottleneck"]
"""


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", default="180s")
    ap.add_argument("--rate", default="100Mbit")
    ap.add_argument("--every", type=float, default=10.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        exp = Path(d) / "long.toml"
        exp.write_text(TEXT.format(duration=a.duration, rate=a.rate))
        out = Path(d) / "out"
        p = subprocess.Popen([sys.executable, "-m", "sojourn", "emulate", str(exp), "--out", str(out), "--quiet"])
        t0 = time.monotonic()
        samples = []
        while p.poll() is None:
            time.sleep(a.every)
            try:
                samples.append((time.monotonic() - t0, rss_mib(p.pid)))
            except OSError:
                break
        rc = p.wait()
        size = (out / "packets.parquet").stat().st_size if (out / "packets.parquet").exists() else 0
        rows = 0
        if size:
            import pyarrow.parquet as pq
            rows = pq.ParquetFile(out / "packets.parquet").metadata.num_rows
        print(f"exit {rc}; packets.parquet {size / 2**20:.1f} MiB, {rows} rows; load {os.getloadavg()[0]:.1f}")
        print("RSS (MiB) by wall second: " + ", ".join(f"{t:.0f}s {r:.0f}" for t, r in samples))
        print(f"peak sampled RSS: {max((r for _, r in samples), default=0):.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
