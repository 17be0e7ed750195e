"""Probe statistics and Flent test totals for the live engines (``sojourn emulate`` and
``emulate --kernel``; docs/tests.md "Engines").

The live load generator fills probes.parquet with the simulator's columns; this adds the same
``probes`` and ``tests`` blocks to summary.json as a simulated run gets (python/sojourn/probes.py)
and keeps the experiment as run (experiment.json), whose workloads' ``test`` tables
``sojourn flent`` and the report read back. Runs without probes or named tests are left as
they were.
"""
from __future__ import annotations

from typing import Any, Mapping

from .probes import annotations, attach


def attach_live(res: Any, cfg: Mapping[str, Any]) -> None:
    """Adds the probe/test blocks and, for such runs, the experiment to a live result."""
    experiment = {k: v for k, v in cfg.items() if k != "seed"}
    if res.probes_table is None and not annotations(experiment):
        return
    if res.experiment is None:
        res.experiment = experiment
    attach(res, experiment)


__all__ = ["attach_live"]
