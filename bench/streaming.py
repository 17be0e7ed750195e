"""Memory and speed of a run that streams its time series, packet log and flow records to
disk (`sojourn run`, `sojourn.run(out=...)`) against one that holds them in memory
(`sojourn.run()` without `out`), at two lengths of the same experiment (docs/limits.md).

    python bench/streaming.py                 # 10 s and 40 s of a 1 Gbit/s bottleneck
    python bench/streaming.py 20s 80s
    python bench/streaming.py --streamed-only 40s 160s
    python bench/streaming.py --transfers 80s 320s   # 2,000 short transfers per second
    python bench/streaming.py --overload --streamed-only 10s 30s   # the same on 100 Mbit/s

Each run is a fresh child process; its peak resident memory is its own VmHWM (Linux).
Wall times are compared as ratios within one invocation (the machine is shared)."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

EXP = """\
name = "bench-streaming"
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
interval = "10ms"
packets = ["bottleneck"]
flows = true
"""

# Many short transfers: Poisson arrivals of 10-kB transfers, 2,000 per second (160 Mbit/s
# offered) on a 1 Gbit/s bottleneck (flow records; each receiver lingers 60 s after its
# FIN, so ~120,000 connections are held at any time after the first minute). On a link
# the load exceeds, open transfers pile up without bound whatever is streamed.
TRANSFERS = """\
name = "bench-transfers"
seed = 3
[topology]
kind = "dumbbell"
pairs = 1
bottleneck = { rate = "1Gbit", delay = "5ms", qdisc = { kind = "fq_codel" } }
[[workload]]
kind = "poisson"
pair = 0
interval = "0.5ms"
size = "10kB"
"""

CHILD = """\
import sys, time, sojourn
exp, duration, out = sys.argv[1:4]
t0 = time.perf_counter()
if out == "-":
    r = sojourn.run(exp, duration=duration)
    r.write(sys.argv[4])
else:
    r = sojourn.run(exp, duration=duration, out=out)
wall = time.perf_counter() - t0
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
f = r.summary["flows"]
print(wall, int(hwm) / 1024, r.summary["links"]["bottleneck"]["tx_packets"], f["count"], f.get("completed", 0))
"""


def one(exp: Path, duration: str, streamed: bool, work: Path) -> tuple[float, float, int, int, int]:
    out = str(work / f"{duration}-{'s' if streamed else 'm'}")
    argv = [sys.executable, "-c", CHILD, str(exp), duration] + ([out] if streamed else ["-", out])
    r = subprocess.run(argv, capture_output=True, text=True, check=True)
    w, mb, pk, fl, done = r.stdout.split()
    return float(w), float(mb), int(pk), int(fl), int(done)


def main() -> None:
    args = sys.argv[1:]
    modes = (True,) if "--streamed-only" in args else (False, True)
    durs = [a for a in args if not a.startswith("--")] or ["10s", "40s"]
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        exp = work / "exp.toml"
        if "--overload" in args:
            # 170.7 Mbit/s offered on the wire on 100 Mbit/s: refused unless allowed
            # (docs/limits.md, "Overloaded open loops"); the backlog then grows.
            text = TRANSFERS.replace('rate = "1Gbit"', 'rate = "100Mbit"') + "allow_overload = true\n"
        else:
            text = TRANSFERS if "--transfers" in args else EXP
        exp.write_text(text)
        rows = {}
        for d in durs:
            for streamed in modes:
                rows[(d, streamed)] = one(exp, d, streamed, work)
                w, mb, pk, fl, done = rows[(d, streamed)]
                print(f"{d:>6} {'streamed' if streamed else 'in memory':>9}: peak {mb:7.1f} MB, "
                      f"{pk} bottleneck packets, {fl} flows ({fl - done} not completed), wall {w:6.2f} s",
                      flush=True)
        a, b = durs[0], durs[-1]
        for streamed in modes:
            print(f"{'streamed' if streamed else 'in memory':>9}: peak RSS {b}/{a} = "
                  f"{rows[(b, streamed)][1] / rows[(a, streamed)][1]:.2f}")
        for d in durs if len(modes) == 2 else []:
            print(f"{d:>6}: wall streamed / in memory = {rows[(d, True)][0] / rows[(d, False)][0]:.2f}")


if __name__ == "__main__":
    if os.environ.get("SOJOURN_ROW_GROUP_ROWS"):
        print(f"SOJOURN_ROW_GROUP_ROWS={os.environ['SOJOURN_ROW_GROUP_ROWS']}")
    main()
