"""docs/repro/wifi.md: runs tcp-download.toml and udp-flood.toml with each `mac` mode
(fifo, fq_codel, airtime) and prints the comparison table the page shows.

    python experiments/repro/wifi/compare.py [--duration 30s] [--seed 1]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import sojourn

HERE = Path(__file__).resolve().parent
MODES = ["fifo", "fq_codel", "airtime"]


def jain(x):
    s = sum(x)
    return s * s / (len(x) * sum(v * v for v in x)) if s > 0 else float("nan")


def one(file: str, mac: str, duration: str, seed: int) -> dict:
    res = sojourn.run(str(HERE / file), seed=seed, duration=duration, overrides={"topology.mac": mac})
    st = res.wifi.set_index("station")
    flows = res.flows
    probe = flows[(flows["dst"] == "sta0") & (flows["kind"] == "udp_cbr") & (flows["workload"] == 4)]
    air = list(st["airtime_share"])
    return {
        "mac": mac,
        "probe_ms": float(probe["mean_delay_ms"].iloc[0]),
        "probe_max_ms": float(probe["max_delay_ms"].iloc[0]),
        "fast_mbps": float(st.loc[["sta0", "sta1", "sta2"], "throughput_down_bps"].sum() / 1e6),
        "slow_mbps": float(st.loc["sta3", "throughput_down_bps"] / 1e6),
        "slow_air": float(st.loc["sta3", "airtime_share"]),
        "jain_air": jain(air),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", default="30s")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    print("| traffic | mac | probe one-way delay mean / max (ms) | 3 fast stations (Mbit/s) | slow station (Mbit/s) "
          "| slow station's airtime | Jain's index of airtime |")
    print("|---|---|---|---|---|---|---|")
    for file, label in (("tcp-download.toml", "TCP"), ("udp-flood.toml", "UDP")):
        for mac in MODES:
            r = one(file, mac, a.duration, a.seed)
            print(f"| {label} | {mac} | {r['probe_ms']:.1f} / {r['probe_max_ms']:.1f} | {r['fast_mbps']:.1f} "
                  f"| {r['slow_mbps']:.2f} | {r['slow_air']:.2f} | {r['jain_air']:.2f} |")


if __name__ == "__main__":
    main()
