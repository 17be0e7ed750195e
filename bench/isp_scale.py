"""ISP subscriber trees at scale (issue 36; results in bench/README.md, "ISP subscriber
trees"): CPU seconds, set-up time, peak RSS, events and instructions per delivered
megabyte of `sojourn run` on experiments/isp/scale-*.toml.

    python bench/isp_scale.py experiments/isp/scale-10k.toml --duration 60s
    python bench/isp_scale.py experiments/isp/scale-10k.toml --duration 10s --set topology.leaf=cake
    python bench/isp_scale.py experiments/isp/scale-100k.toml --duration 5s --no-perf

Each row is one `sojourn run` in a child process (CPU and peak RSS from its rusage;
instructions from `perf stat -e instructions:u` when perf is installed and allowed); the
set-up time is the same file run for 1 ms of simulated time (parse, expand, validate and
build the engine: everything before the first second of traffic). Measured, not asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_child_usage(cmd: list) -> dict:
    """Runs ``cmd``: its exit code, output, wall time, user+sys CPU seconds and peak RSS,
    from this child's own rusage (``wait4``). ``RUSAGE_CHILDREN`` would not do: its peak
    RSS is the largest of every child ever waited for, inherited through fork and exec
    (a set-up row after a 100,000-subscriber run reported that run's 1.98 GB)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"rc": p.returncode, "wall_s": wall, "stdout": out.read(), "stderr": err.read(),
                "cpu_s": ru.ru_utime + ru.ru_stime, "maxrss_mb": ru.ru_maxrss / 1024.0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment")
    ap.add_argument("--duration", default=None)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--no-perf", action="store_true", help="do not count instructions with perf")
    ap.add_argument("--setup-only", action="store_true")
    ap.add_argument("--json", default=None, help="append the row as JSON to this file")
    a = ap.parse_args(argv)
    sets = [x for kv in a.set for x in ("--set", kv)]
    tmp = Path(tempfile.mkdtemp(prefix="isp-bench-"))
    try:
        base = [sys.executable, "-m", "sojourn", "run", a.experiment, "--quiet", "--no-report", *sets]
        if a.setup_only:
            m = run_child_usage(base + ["--duration", "1ms", "--out", str(tmp / "setup")])
            if m["rc"] != 0:
                print(m["stderr"], file=sys.stderr)
                return 1
            row = {"what": "setup", "cpu_s": m["cpu_s"], "wall_s": m["wall_s"], "maxrss_mb": m["maxrss_mb"]}
        else:
            cmd = base + ["--out", str(tmp / "run")] + (["--duration", a.duration] if a.duration else [])
            perf = shutil.which("perf") if not a.no_perf else None
            pfile = tmp / "perf.txt"
            if perf:
                cmd = [perf, "stat", "-x", ",", "-e", "instructions:u", "-o", str(pfile), "--"] + cmd
            m = run_child_usage(cmd)
            if m["rc"] != 0:
                print(m["stderr"], file=sys.stderr)
                return 1
            s = json.loads((tmp / "run" / "summary.json").read_text())
            delivered = 0
            import pandas as pd

            f = pd.read_parquet(tmp / "run" / "flows.parquet", columns=["delivered_bytes"])
            delivered = int(f["delivered_bytes"].sum())
            instr = None
            if perf and pfile.exists():
                mm = re.search(r"^(\d+),[^,]*,instructions", pfile.read_text(), re.M)
                instr = int(mm.group(1)) if mm else None
            mb = delivered / 1e6
            up = s["links"].get("uplink", {})
            row = {"what": "run", "simulated_s": s["duration_s"], "cpu_s": m["cpu_s"], "wall_s": m["wall_s"],
                   "maxrss_mb": m["maxrss_mb"], "events": s["events"], "delivered_mb": mb,
                   "events_per_mb": s["events"] / mb if mb else None,
                   "instructions_per_mb": instr / mb if (instr and mb) else None,
                   "uplink_utilisation": up.get("utilisation"), "uplink_tx_packets": up.get("tx_packets"),
                   "cpu_per_simulated_s": m["cpu_s"] / s["duration_s"],
                   "ns_per_uplink_packet": 1e9 * m["cpu_s"] / up["tx_packets"] if up.get("tx_packets") else None}
        row.update({"experiment": a.experiment, "set": a.set})
        print(json.dumps(row, indent=1))
        if a.json:
            with open(a.json, "a") as fh:
                fh.write(json.dumps(row) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
