"""Golden byte-identity checksums of simulator outputs.

Runs a fixed set of experiments (every example under experiments/examples, each shipped
reproduction's CI set-up with shortened durations, and a shortened README main job) and
records, per run, the SHA-256 of its canonical outputs:

* ``summary``: the bytes of summary.json exactly as the engine writes them;
* ``flows``, ``timeseries`` and (when packet logging is on) ``packets``: the Arrow tables
  rendered canonically (column names, types and values as little-endian bytes, strings
  UTF-8), NOT the Parquet file bytes, which depend on the pyarrow version.

Usage (from the repository root, with the package built from this tree)::

    python tests/golden/make.py            # check: recompute and compare, exit 1 on a difference
    python tests/golden/make.py --write    # regenerate tests/golden/checksums.json
    python tests/golden/make.py --list     # the runs and their wall times

tests/python/test_golden.py runs the same comparison under pytest, one test per run.

Regenerating is legitimate only when a change alters simulator outputs ON PURPOSE (a fidelity
fix, a new summary field): regenerate in the same commit and say in its message which outputs
change and why. A refactoring that should not change behaviour must leave every checksum as
it is; a difference then is a bug.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[2]
CHECKSUMS = Path(__file__).resolve().parent / "checksums.json"
EX = ROOT / "experiments" / "examples"
REPRO = ROOT / "experiments" / "repro"


@dataclass
class Case:
    """One run: an experiment file (or one point of a sweep file) with overrides."""

    name: str
    file: Path
    point: Optional[str] = None  # sweep point name (file is a .sweep.toml)
    duration: Optional[str] = None
    overrides: dict = field(default_factory=dict)
    seed: Optional[int] = None

    def config(self) -> tuple[Any, Optional[Path], Optional[int]]:
        """(source, base_dir, seed) for ``sojourn.run``."""
        if self.point is None:
            return self.file, None, self.seed
        from sojourn import sweeps as sw

        plan = sw.load_plan(self.file)
        (pt,) = [p for p in plan.points if p.name == self.point]
        seed = self.seed if self.seed is not None else plan.seeds[0]
        return plan.config(pt), plan.base_dir, seed


def _sweep_cases(prefix: str, file: Path, points: Optional[list] = None, **kw: Any) -> list:
    from sojourn import sweeps as sw

    plan = sw.load_plan(file)
    names = [p.name for p in plan.points]
    if points is not None:
        missing = sorted(set(points) - set(names))
        assert not missing, f"{file}: no point {missing}"
        names = [n for n in names if n in points]
    return [Case(f"{prefix}/{n}", file, point=n, **kw) for n in names]


def cases() -> list:
    """The runs, in a fixed order. Durations are cut so that the whole set takes about a
    minute; what matters is that every discipline, workload kind and engine path these
    files exercise runs, not how long."""
    out: list = []
    # every example (single files at their own duration: they are cheap)
    for f in sorted(EX.glob("*.toml")):
        if f.name.endswith(".sweep.toml"):
            continue
        out.append(Case(f"examples/{f.stem}", f))
    out += _sweep_cases("examples/compare-aqm", EX / "compare-aqm.sweep.toml", duration="20s")

    # seed 000 (age-based): the CI sweep's configurations (tests/python/test_repro_age_based.py)
    ab = REPRO / "age-based"
    out += _sweep_cases("repro/age-based/ci-1g", ab / "ci-1g.sweep.toml",
                        duration="8s", overrides={"warmup": "2s"})
    # seed 003 (CoCoA): the three sweeps the CI test runs (tests/python/test_repro_cocoa.py)
    cc = REPRO / "cocoa"
    for s, d in (("halving", "40s"), ("cubic-100m", "15s"), ("reno-100m", "15s")):
        out += _sweep_cases(f"repro/cocoa/{s}", cc / f"{s}.sweep.toml", duration=d)
    # seed 004 (LSTF): the CI test's four points with its 50-ms interval (tests/python/test_repro_lstf.py)
    out += _sweep_cases("repro/lstf", REPRO / "lstf" / "lstf.sweep.toml",
                        points=["literal-codel", "literal-a0.5", "intended-codel", "intended-a0.5"],
                        duration="320s", overrides={"record.interval": "50ms"})
    # operating ranges: the CI test's direct runs of dumbbell.toml (tests/python/test_repro_operating_ranges.py)
    orr = REPRO / "operating-ranges" / "dumbbell.toml"
    out.append(Case("repro/operating-ranges/pie-light", orr, duration="60s",
                    overrides={"workload[0].count": 4, "topology.bottleneck.qdisc": "pie"}))
    out.append(Case("repro/operating-ranges/pie-16", orr, duration="60s",
                    overrides={"workload[0].count": 16, "topology.bottleneck.qdisc": "pie"}))
    out.append(Case("repro/operating-ranges/codel", orr, duration="60s",
                    overrides={"topology.bottleneck.qdisc": "codel"}))
    # thin streams: the CI test's gaming runs (tests/python/test_repro_thin_streams.py)
    from sojourn.repro import thin_streams as ts

    for q in ("fq_codel", "codel", "sfq", "fq_codel_wp", "fq_codel_wp_100ms"):
        out.append(Case(f"repro/thin-streams/gaming-{q}", ts.EXP_DIR / "gaming.toml", duration="40s", seed=1,
                        overrides={"topology.bottleneck.qdisc": ts.QDISCS[q], "workload[1].count": 5,
                                   "warmup": "5s"}))
    # L4S (docs/repro/l4s.md): Prague's own window arithmetic (cong_control), its AccECN
    # feedback, DCTCP's with any_ect, all through DualPI2
    l4 = ROOT / "experiments" / "l4s"
    for name, f, ov in (("prague", "prague-vs-cubic", {}),
                        ("prague-accecn", "prague-vs-cubic", {"workload[0].ecn": "accecn"}),
                        ("dctcp", "dctcp-vs-cubic", {})):
        out.append(Case(f"repro/l4s/{name}", l4 / f"{f}.toml", duration="20s",
                        overrides={"warmup": "5s", **ov}))
    # engine paths no shipped file uses: loss and reordering on the wire, device transmit
    # rings (with an AQM that drops at dequeue), a shaper link, a rate schedule with CAKE
    ca = EX / "compare-aqm.sweep.toml"
    engine = [
        ("loss-reorder", "fq_codel", {"topology.bottleneck.loss": 0.01, "topology.bottleneck.reorder": 0.02,
                                      "topology.bottleneck.reorder_delay": "3ms", "topology.access.loss": 0.001}),
        ("tx-ring-codel", "codel", {"topology.access.tx_ring": 8, "topology.bottleneck.tx_ring": 4}),
        ("shaper-cake", "cake", {"topology.bottleneck.shaper": True, "topology.access.tx_ring": 16}),
        ("shaper-pfifo-lossy", "pfifo", {"topology.bottleneck.shaper": True, "topology.bottleneck.loss": 0.005}),
    ]
    for name, point, ov in engine:
        out.append(Case(f"engine/{name}", ca, point=point, duration="15s", overrides=ov))
    # the README's main job, shortened
    out += _sweep_cases("readme/short-1g", ab / "short-1g.sweep.toml", duration="5s", overrides={"warmup": "1s"})
    return out


# ---------------------------------------------------------------------------------------
# canonical rendering


def table_digest(table: Any) -> str:
    """SHA-256 of an Arrow table rendered canonically: per column its name, its logical type
    and its values (validity bitmap, then values as little-endian fixed-width bytes, or
    UTF-8 strings each prefixed by its length; dictionary columns decoded first)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    h = hashlib.sha256()
    h.update(f"rows={table.num_rows}\n".encode())
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        h.update(f"{name}:{col.type}\n".encode())
        h.update(np.asarray(pc.is_valid(col).to_numpy(zero_copy_only=False), dtype=np.uint8).tobytes())
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            for s in col.to_pylist():
                b = b"" if s is None else s.encode()
                h.update(len(b).to_bytes(8, "little") + b)
        elif pa.types.is_boolean(col.type):
            h.update(np.asarray(col.fill_null(False).to_numpy(zero_copy_only=False), dtype=np.uint8).tobytes())
        else:
            v = col.fill_null(0).to_numpy(zero_copy_only=False)
            h.update(np.ascontiguousarray(v, dtype=v.dtype.newbyteorder("<")).tobytes())
    return h.hexdigest()


def digest(case: Case) -> dict:
    """Runs one case; returns its checksums."""
    import sojourn

    src, base_dir, seed = case.config()
    res = sojourn.run(src, seed=seed, duration=case.duration, overrides=case.overrides, base_dir=base_dir)
    d = {
        "summary": hashlib.sha256(res.summary_text.encode()).hexdigest(),
        "flows": table_digest(res.flows_table),
        "timeseries": table_digest(res.timeseries_table),
    }
    if res.packets_table is not None:
        d["packets"] = table_digest(res.packets_table)
    return d


def load_checksums() -> dict:
    return json.loads(CHECKSUMS.read_text())["runs"]


def _run_all(cs: list, jobs: int, log: Callable[[str], None]) -> dict:
    out: dict = {}
    if jobs <= 1:
        for c in cs:
            t0 = time.perf_counter()
            out[c.name] = digest(c)
            log(f"{time.perf_counter() - t0:7.2f}s  {c.name}")
        return out
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as ex:
        for c, d in zip(cs, ex.map(digest, cs)):
            out[c.name] = d
            log(f"  done  {c.name}")
    return out


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="regenerate: python tests/golden/make.py --write  (only for an intended "
                                        "output change; say why in the commit message)")
    ap.add_argument("--write", action="store_true", help="regenerate tests/golden/checksums.json")
    ap.add_argument("--list", action="store_true", help="run each case and print its wall time")
    ap.add_argument("--jobs", type=int, default=1, help="parallel runs (default 1)")
    ap.add_argument("--only", default=None, help="run only the cases whose name contains this string")
    a = ap.parse_args(argv)
    cs = [c for c in cases() if a.only is None or a.only in c.name]
    t0 = time.perf_counter()
    got = _run_all(cs, a.jobs, (lambda s: print(s, flush=True)) if (a.list or a.jobs > 1) else (lambda s: None))
    wall = time.perf_counter() - t0
    if a.write:
        if a.only is not None:
            print("--write regenerates every case; drop --only", file=sys.stderr)
            return 2
        CHECKSUMS.write_text(json.dumps({"about": "sha256 of canonical simulator outputs; regenerate with "
                                                  "`python tests/golden/make.py --write` (see that file)",
                                         "runs": got}, indent=1, sort_keys=True) + "\n")
        print(f"wrote {CHECKSUMS} ({len(got)} runs, {wall:.1f} s)")
        return 0
    want = load_checksums()
    bad = []
    for name, d in got.items():
        w = want.get(name)
        if w is None:
            bad.append(f"{name}: not in checksums.json (new case: regenerate)")
        elif w != d:
            bad.append(f"{name}: differs in {', '.join(k for k in sorted(set(d) | set(w)) if d.get(k) != w.get(k))}")
    if a.only is None:
        bad += [f"{n}: in checksums.json but no longer run" for n in sorted(set(want) - set(got))]
    for b in bad:
        print(b)
    print(f"{len(got)} runs, {len(bad)} differ ({wall:.1f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
