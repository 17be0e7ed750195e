"""The application workloads (rpm, web, video) in the three engines, with the shipped files of
experiments/tests (each states its hand-worked truth). Prints the markdown table of
docs/tests.md "Live: the application workloads in `emulate` and `--kernel`".

    sudo python bench/tests/apps_engines.py [--seed 1]

rpm-live.toml is a dumbbell (the FIFO at a router: in sojourn's forwarder live), so it runs in
the simulator and `emulate`; rpm-kernel.toml is a two-host graph (the FIFO on the sending
host's device), which `emulate --kernel` needs; web-live.toml and video-live.toml are graphs
and run everywhere.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import sojourn
from sojourn.kernel_engine import emulate_kernel

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "experiments" / "tests"

#: (file, engines, the phase's direction for rpm)
RUNS = [
    ("web-live.toml", ("simulate", "emulate", "kernel"), None),
    ("video-live.toml", ("simulate", "emulate", "kernel"), None),
    ("rpm-live.toml", ("simulate", "emulate"), "downlink"),
    ("rpm-live.toml", ("simulate", "emulate"), "uplink"),
    ("rpm-kernel.toml", ("simulate", "emulate", "kernel"), "downlink"),
    ("rpm-kernel.toml", ("simulate", "kernel"), "uplink"),
]


def one(engine: str, path: Path, seed: int, direction) -> dict:
    o = {"workload[0].directions": direction} if direction else None
    if engine == "simulate":
        return sojourn.run(path, seed=seed, overrides=o).summary
    if engine == "emulate":
        return sojourn.emulate(path, seed=seed, overrides=o).summary
    return emulate_kernel(path, seed=seed, overrides=o).summary


def row(name: str, engine: str, a: dict, direction) -> str:
    if a["kind"] == "web":
        return (f"| {name} | {engine} | {a['pages']} pages | PLT p50 {a['plt_p50_s'] * 1e3:.1f} ms, "
                f"mean {a['plt_mean_s'] * 1e3:.1f} ms, max {a['plt_max_s'] * 1e3:.1f} ms |")
    if a["kind"] == "video":
        return (f"| {name} | {engine} | {a['segments']} segments | mean {a['mean_bitrate_bps'] / 1e6:.2f} Mbit/s, "
                f"{a['switches']} switches, {a['stalls']} stalls, startup {a['startup_delay_s'] * 1e3:.0f} ms |")
    d = a[direction]
    name = f"{name} {direction}"

    def ms(k: str) -> str:
        return "—" if d[k] is None else f"{d[k]:.1f}"

    return (f"| {name} | {engine} | {d['foreign_probes']} + {d['self_probes']} probes | RPM {d['rpm']:.0f} "
            f"(foreign {d['foreign_rpm']:.0f}, loaded {d['loaded_rpm']:.0f}); TM tcp_f {ms('tm_tcp_f_ms')}, "
            f"tls_f {ms('tm_tls_f_ms')}, http_f {ms('tm_http_f_ms')}, http_l {ms('tm_http_l_ms')} ms |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    t0 = time.perf_counter()
    print("| file | engine | measured | numbers |")
    print("|---|---|---|---|")
    for name, engines, direction in RUNS:
        for engine in engines:
            s = one(engine, TESTS / name, a.seed, direction)
            print(row(name, engine, s["apps"][0], direction), flush=True)
    print(f"\n({time.perf_counter() - t0:.0f} s wall)")


if __name__ == "__main__":
    main()
