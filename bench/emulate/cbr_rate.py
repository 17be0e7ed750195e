"""Can the live forwarder hold a link's rate with MTU frames? (issue 40 §3)

CBR UDP at 1.2× a bottleneck's rate into a 1000-packet pfifo (Linux's txqueuelen) through
`sojourn emulate`, 1500-byte packets (1514-byte frames), 10 Gbit/s access links so that
only the bottleneck limits. Queueing theory: utilisation 1.0 and 1 − 1/1.2 = 16.7 % of the
bottleneck's arrivals dropped. Prints, per rate and repeat: the bottleneck's utilisation
(wire bits over capacity in the measured period), its drops over its arrivals, the
receiving application's goodput against the payload the link can carry, the forwarder's
CPU time per second of run, frames the kernel dropped before the forwarder read them, the
run's warning (if `emulate` gave one) and the machine's 1-minute load.

    sudo python bench/emulate/cbr_rate.py [--rates 100Mbit,1Gbit] [--reps 3] [--duration 10s]

Needs root (network namespaces). Reports, never asserts; run it with ``nice -n -5`` when
``uptime`` shows a low load: the forwarder shares two cores with the hosts' senders and
receivers and everything else on the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import sojourn
from sojourn.units import parse_rate

def config(rate: str, offered_bps: int, duration: str, warmup: str) -> dict:
    """The experiment: a dumbbell whose bottleneck runs pfifo 1000 at `rate`, CBR at
    `offered_bps` of 1500-byte packets."""
    return {
        "name": f"cbr-rate-{rate}",
        "duration": duration,
        "warmup": warmup,
        "seed": 1,
        "topology": {
            "kind": "dumbbell",
            "pairs": 1,
            "bottleneck": {"rate": rate, "delay": "1ms", "qdisc": {"kind": "pfifo", "limit": 1000}},
            "access": {"rate": "10Gbit", "delay": "100us"},
        },
        "workload": [{"kind": "cbr", "pair": 0, "rate": f"{offered_bps}bit", "packet_size": "1500B"}],
        "record": {"interval": "100ms", "links": ["bottleneck"]},
    }


def one(rate: str, duration: str, warmup: str) -> dict:
    bps = parse_rate(rate)
    cfg = config(rate, int(bps * 1.2), duration, warmup)
    l0 = os.getloadavg()[0]
    res = sojourn.emulate(cfg)
    l1 = os.getloadavg()[0]
    s = res.summary
    b = s["links"]["bottleneck"]
    e = s["emulate"]
    # Over the measured period (after warm-up): frames sent on by the link and dropped.
    received = b["tx_packets"] + b["drops_total"]
    flow = res.flows.iloc[0]
    return {
        "rate": rate,
        "utilisation": b["utilisation"],
        "drops_pct": 100.0 * b["drops_total"] / received if received else float("nan"),
        # What the receiving application read, against the most 1472-byte UDP payloads in
        # 1514-byte frames can carry at the link's rate (independent of the forwarder's
        # own accounting; over the flow's whole life, warm-up included).
        "goodput_share": float(flow["goodput_bps"]) / (bps * 1472 / 1514),
        "forwarder_cpu_per_s": e["forwarder_cpu_seconds"] / e["wall_seconds"],
        "kernel_drops": e.get("rx_kernel_drops"),
        "warning": e.get("warning"),
        "load": f"{l0:.1f} → {l1:.1f}",
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="100Mbit,1Gbit")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--warmup", default="2s")
    a = ap.parse_args(argv)
    print("| bottleneck | utilisation | drops / arrivals (%) | receiver goodput / payload capacity | forwarder CPU s per s | kernel drops | warning | load 1 min |")
    print("|---|---|---|---|---|---|---|---|")
    for rep in range(a.reps):
        for rate in a.rates.split(","):
            r = one(rate, a.duration, a.warmup)
            print(json.dumps(r), file=sys.stderr, flush=True)
            print(
                f"| {r['rate']} | {r['utilisation']:.3f} | {r['drops_pct']:.1f} | {r['goodput_share']:.3f} | {r['forwarder_cpu_per_s']:.2f} | "
                f"{r['kernel_drops']} | {r['warning'] or ''} | {r['load']} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
