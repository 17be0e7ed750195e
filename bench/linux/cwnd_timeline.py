"""Timeline of one cwnd_timeline.sh run (issue 40 §4): reads the bpftrace output
(cwnd_trace.bt) and the sender's JSON, prints per-stretch means and the read latencies.

    python3 bench/linux/cwnd_timeline.py TRACE SENDER.json [--label L] [--json]

Columns: cwnd (last ACK of the stretch, and mean), packets_out (mean), the share of ACKs
that found the flow cwnd-limited (Linux's `is_cwnd_limited` latch) and with packets_out ≥
cwnd, cwnd increments, the qdisc backlog (`tc -s`, packets), the ping (ms), and the
receiving application's read latency: for each data segment, the time until the next read
returns (median / p90 / p99, µs).
"""
from __future__ import annotations

import argparse
import bisect
import json
import statistics
import sys

STRETCHES = [(0.5, 1), (1, 2), (2, 5), (5, 10), (10, 15), (15, 20), (20, 25), (25, 30),
             (30, 60), (60, 120)]


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def load(trace: str, sender: str):
    s = json.load(open(sender))
    t0 = s["t0_monotonic"] * 1e9
    acks, data, reads = [], [], []
    for line in open(trace):
        f = line.split()
        if not f or f[0] not in "ADRK" or len(f[0]) != 1:
            continue
        try:
            t = (int(f[1]) - t0) / 1e9
        except ValueError:
            continue
        if f[0] == "A":
            cwnd, pout, maxp, lim, una, nxt, srtt_us, ssth = map(int, f[2:10])
            acks.append((t, cwnd, pout, maxp, lim, srtt_us))
        elif f[0] == "D":
            data.append(t)
        elif f[0] == "R":
            reads.append(t)
    return s, acks, data, reads


def timeline(s, acks, data, reads, secs: float):
    rows = []
    for a, b in STRETCHES:
        if a >= secs:
            break
        w = [x for x in acks if a <= x[0] < b]
        if not w:
            continue
        cw = [x[1] for x in w]
        inc = sum(1 for p, q in zip(w, w[1:]) if q[1] > p[1])
        bl = [p for t, p in s["backlog"] if a <= t < b]
        pg = [r for t, r in s["pings"] if a <= t < b and r is not None]
        lat = []
        for t in (d for d in data if a <= d < b):
            i = bisect.bisect_left(reads, t)
            if i < len(reads):
                lat.append((reads[i] - t) * 1e6)
        rows.append({
            "from_s": a, "to_s": min(b, secs),
            "cwnd_end": cw[-1], "cwnd_mean": statistics.fmean(cw),
            "packets_out_mean": statistics.fmean(x[2] for x in w),
            "cwnd_limited_share": statistics.fmean(x[4] for x in w),
            "full_window_share": statistics.fmean(1.0 if x[2] >= x[1] else 0.0 for x in w),
            "cwnd_increments": inc,
            "srtt_ms": statistics.fmean(x[5] for x in w) / 1e3,
            "backlog_packets": statistics.fmean(bl) if bl else float("nan"),
            "ping_ms": statistics.fmean(pg) if pg else float("nan"),
            "read_latency_us": [pct(lat, 50), pct(lat, 90), pct(lat, 99)],
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("sender")
    ap.add_argument("--label", default="")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    a = ap.parse_args(argv)
    s, acks, data, reads = load(a.trace, a.sender)
    if not acks:
        print(f"cwnd_timeline.py: no ACK lines in {a.trace} (did bpftrace attach?)", file=sys.stderr)
        return 2
    secs = max(t for t, _ in s["backlog"]) if s["backlog"] else acks[-1][0]
    rows = timeline(s, acks, data, reads, secs)
    pings = [r for _, r in s["pings"] if r is not None]
    if a.json:
        print(json.dumps({"label": a.label, "rows": rows, "ping_mean_ms": statistics.fmean(pings)}))
        return 0
    print(f"## {a.label}: {len(acks)} ACKs, {len(data)} segments, {len(reads)} reads; "
          f"ping mean {statistics.fmean(pings):.2f} ms over {len(pings)}")
    print("| s | cwnd end (mean) | packets_out | cwnd-limited | out ≥ cwnd | +cwnd | srtt ms "
          "| backlog | ping ms | read latency µs p50/p90/p99 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        la = "/".join(f"{x:.0f}" for x in r["read_latency_us"])
        print(f"| {r['from_s']:g}–{r['to_s']:g} | {r['cwnd_end']} ({r['cwnd_mean']:.1f}) "
              f"| {r['packets_out_mean']:.1f} | {r['cwnd_limited_share']:.2f} "
              f"| {r['full_window_share']:.2f} | {r['cwnd_increments']} | {r['srtt_ms']:.2f} "
              f"| {r['backlog_packets']:.1f} | {r['ping_ms']:.2f} | {la} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
