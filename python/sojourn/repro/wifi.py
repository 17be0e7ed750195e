"""Wi-Fi: "Ending the Anomaly" (Høiland-Jørgensen et al., USENIX ATC 2017). Generates
docs/repro/wifi.md::

    python -m sojourn.repro.wifi --update-docs      # every run (2 files x 3 mac modes x 3 seeds), the page
    python -m sojourn.repro.wifi --out results/wifi # the same numbers, nothing in docs/

Runs ``experiments/repro/wifi/{tcp-download,udp-flood}.toml`` with ``topology.mac`` set to
``fifo`` (the stack before the paper: a FIFO qdisc above a deep driver queue), ``fq_codel``
(mac80211's FQ-CoDel TXQs with AQL: the paper's FQ-MAC) and ``airtime`` (the same with the
airtime deficit round robin), on seeds 1-3, and reports per run: the latency probe's one-way
delay to fast station ``sta0``, the three fast stations' and the slow station's downlink
throughput, the slow station's airtime share and Jain's index of the stations' airtime. The
agreement rows compare the ratios the paper's abstract claims with the measured ones.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

FILES = (("tcp-download.toml", "TCP"), ("udp-flood.toml", "UDP"))
MODES = ("fifo", "fq_codel", "airtime")
SEEDS = (1, 2, 3)
#: the latency probe: the 5th workload, a CBR stream to fast station sta0
PROBE_WORKLOAD = 4
FAST = ("sta0", "sta1", "sta2")
SLOW = "sta3"


def default_exp_dir() -> Path:
    here = Path(__file__).resolve().parents[3] / "experiments" / "repro" / "wifi"
    return here if here.is_dir() else Path("experiments/repro/wifi")


def jain(x: Sequence[float]) -> float:
    """Jain's fairness index of `x`."""
    s = sum(x)
    return s * s / (len(x) * sum(v * v for v in x)) if s > 0 else float("nan")


def run(out: Path, exp_dir: Optional[Path] = None, duration: Optional[str] = None,
        seeds: Sequence[int] = SEEDS, files: Sequence[tuple] = FILES, modes: Sequence[str] = MODES) -> dict:
    """Runs (or reuses, if its summary.json exists) every (file, mode, seed); returns
    (traffic, mode, seed) -> run directory."""
    import sojourn

    exp_dir = exp_dir or default_exp_dir()
    dirs = {}
    for f, label in files:
        for mac in modes:
            for seed in seeds:
                d = out / f"{label.lower()}-{mac}-s{seed}"
                if not (d / "summary.json").exists():
                    sojourn.run(exp_dir / f, seed=seed, duration=duration,
                                overrides={"topology.mac": mac}).write(d)
                dirs[(label, mac, seed)] = d
    return dirs


def row(d: Path) -> dict:
    """One run's numbers (docs/wifi.md, "Outputs")."""
    from ..results import Result

    r = Result.read(d)
    st = r.wifi.set_index("station")
    fl = r.flows
    probe = fl[(fl["dst"] == "sta0") & (fl["kind"] == "udp_cbr") & (fl["workload"] == PROBE_WORKLOAD)]
    return {
        "probe_ms": float(probe["mean_delay_ms"].iloc[0]),
        "probe_max_ms": float(probe["max_delay_ms"].iloc[0]),
        "fast_mbps": float(st.loc[list(FAST), "throughput_down_bps"].sum() / 1e6),
        "slow_mbps": float(st.loc[SLOW, "throughput_down_bps"] / 1e6),
        "slow_air": float(st.loc[SLOW, "airtime_share"]),
        "jain_air": jain(list(st["airtime_share"])),
        "duration_s": float(r.summary["duration_s"]),
    }


def table(dirs: dict) -> pd.DataFrame:
    return pd.DataFrame([{"traffic": t, "mac": m, "seed": s, **row(d)} for (t, m, s), d in dirs.items()])


def md_results(t: pd.DataFrame) -> str:
    one = t[t.seed == min(t.seed)]
    rows = ["| traffic | mac | probe one-way delay mean / max (ms) | 3 fast stations (Mbit/s) | slow station (Mbit/s) "
            "| slow station's airtime | Jain's index of airtime |", "|---|---|---|---|---|---|---|"]
    for r in one.itertuples():
        rows.append(f"| {r.traffic} | {r.mac} | {r.probe_ms:.1f} / {r.probe_max_ms:.1f} | {r.fast_mbps:.1f} | "
                    f"{r.slow_mbps:.2f} | {r.slow_air:.2f} | {r.jain_air:.2f} |")
    out = [f"Seed {min(t.seed)}, {one.duration_s.iloc[0]:g} s per run (statistics after 5 s):", "", "\n".join(rows), ""]
    seeds = sorted(set(t.seed))
    for traffic in sorted(set(t.traffic)):
        for mac in MODES:
            s = t[(t.traffic == traffic) & (t.mac == mac)]
            if len(s) > 1:
                out.append(f"- {traffic} `{mac}` over seeds {seeds[0]}–{seeds[-1]}: probe mean "
                           f"{s.probe_ms.min():.1f}–{s.probe_ms.max():.1f} ms, fast stations "
                           f"{s.fast_mbps.min():.1f}–{s.fast_mbps.max():.1f} Mbit/s, slow station's airtime "
                           f"{s.slow_air.min():.2f}–{s.slow_air.max():.2f}.")
    return "\n".join(out) + "\n"


def md_agreement(t: pd.DataFrame) -> str:
    """The abstract's three claims against the runs: a ratio per seed, its range, and a
    verdict by a rule written here (an order of magnitude: >= 10x on every seed)."""
    def ratio(traffic: str, col: str, a: str, b: str) -> pd.Series:
        x = t[(t.traffic == traffic) & (t.mac == a)].set_index("seed")[col]
        y = t[(t.traffic == traffic) & (t.mac == b)].set_index("seed")[col]
        return x / y

    rows = ["| the paper's claim | sojourn (range over seeds) | agreement |", "|---|---|---|"]
    lat = {k: ratio(k, "probe_ms", "fifo", "airtime") for k in ("TCP", "UDP")}
    verdict = "; ".join(f"{k}: {'agrees' if v.min() >= 10 else ('less than an order of magnitude' if v.min() > 1 else 'disagrees')}"
                        for k, v in lat.items())
    rows.append("| an order of magnitude less latency under load (FIFO → airtime-fair FQ) | "
                + "; ".join(f"{k}: probe delay {v.min():.1f}–{v.max():.1f}× lower" for k, v in lat.items())
                + f" | {verdict} |")
    j = t[t.mac == "airtime"].jain_air
    jf = t[t.mac == "fifo"].jain_air
    rows.append(f"| nearly perfect airtime fairness (TCP and downstream UDP) | Jain's index of airtime with `airtime` "
                f"{j.min():.2f}–{j.max():.2f} (FIFO {jf.min():.2f}–{jf.max():.2f}) | "
                f"{'agrees' if j.min() >= 0.95 else 'disagrees'} |")
    thr = {k: ratio(k, "fast_mbps", "airtime", "fifo") for k in ("TCP", "UDP")}
    rows.append("| large improvements in multi-station throughput | fast stations' total with `airtime` over FIFO: "
                + "; ".join(f"{k} {v.min():.1f}–{v.max():.1f}×" for k, v in thr.items())
                + f" | {'agrees in direction' if min(v.min() for v in thr.values()) > 1 else 'disagrees'}; the size "
                "depends on how slow the slow station is and how many there are |")
    fq = t[t.mac == "fq_codel"].slow_air
    rows.append(f"| FQ in the MAC alone fixes latency, not the anomaly | with `fq_codel` the slow station still takes "
                f"{fq.min():.2f}–{fq.max():.2f} of the airtime (a fair share is 0.25) | "
                f"{'agrees' if fq.min() > 0.3 else 'disagrees'}: round robin by opportunity gives the slow station's "
                "long aggregates as many turns as the fast stations' short ones |")
    return "\n".join(rows) + "\n"


CI_DURATION = "8s"


def ci_block(out: Path) -> str:
    """The cheap variant: udp-flood.toml with airtime fairness, seed 1, 8 simulated seconds."""
    dirs = run(out, duration=CI_DURATION, seeds=(1,), files=(("udp-flood.toml", "UDP"),), modes=("airtime",))
    r = row(dirs[("UDP", "airtime", 1)])
    return (f"The cheap variant (udp-flood.toml, `mac = \"airtime\"`, seed 1, {CI_DURATION} simulated; "
            f"`sojourn.repro.wifi.ci_block`): probe {r['probe_ms']:.3f} ms mean, fast stations "
            f"{r['fast_mbps']:.3f} Mbit/s, slow station {r['slow_mbps']:.3f} Mbit/s with {r['slow_air']:.4f} of "
            f"the airtime, Jain's index of airtime {r['jain_air']:.4f}.\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    from . import pages

    ap = argparse.ArgumentParser(prog="python -m sojourn.repro.wifi", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/repro-wifi")
    ap.add_argument("--duration", default=None, help="simulated time per run (default: the files' 30 s)")
    ap.add_argument("--update-docs", action="store_true", help="rewrite docs/repro/wifi.md's generated blocks")
    ap.add_argument("--exp-dir", default=None)
    a = ap.parse_args(argv)
    out = Path(a.out)
    t0 = time.perf_counter()
    dirs = run(out, Path(a.exp_dir) if a.exp_dir else None, a.duration)
    t = table(dirs)
    print(md_results(t))
    print(md_agreement(t))
    print(f"wall seconds (this call; cached runs cost nothing): {time.perf_counter() - t0:.1f}")
    (out / "report.json").write_text(json.dumps(t.to_dict("records"), indent=1, default=str) + "\n")
    if a.update_docs:
        blocks = {"provenance": pages.provenance("wifi"), "results": md_results(t),
                  "agreement": md_agreement(t), "ci": ci_block(out / "ci")}
        pages.replace_blocks(pages.DOCS / "wifi.md", blocks)
        print(f"updated {pages.DOCS / 'wifi.md'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
