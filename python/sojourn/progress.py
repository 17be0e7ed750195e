"""A progress bar for long runs (simulated time, events/s and ETA), in a terminal and in
Jupyter (rich renders there as a live widget)."""
from __future__ import annotations

import sys
import time
from typing import Optional

from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn, TimeRemainingColumn
from rich.text import Text


def _in_jupyter() -> bool:
    from rich.console import Console

    return Console().is_jupyter


class _Speed(ProgressColumn):
    def render(self, task: Task) -> Text:
        eps = task.fields.get("eps")
        return Text(f"{eps / 1e6:5.2f} M events/s" if eps else "", style="cyan")


class RunProgress:
    """Context manager giving a ``progress(sim_s, end_s, events)`` callback; silent when
    ``quiet`` or when neither a terminal nor a notebook would show it."""

    def __init__(self, label: str, quiet: bool = False):
        self.enabled = not quiet and (sys.stderr.isatty() or _in_jupyter())
        self.label = label
        self._p: Optional[Progress] = None
        self._t0 = time.perf_counter()

    def __enter__(self) -> "RunProgress":
        if self.enabled:
            self._p = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:.1f}/{task.total:.0f} s simulated"),
                _Speed(),
                TimeRemainingColumn(),
                transient=True,
            )
            self._p.__enter__()
            self._task = self._p.add_task(self.label, total=1.0, eps=0.0)
        return self

    def __call__(self, sim_s: float, end_s: float, events: int) -> bool:
        if self._p is not None:
            wall = time.perf_counter() - self._t0
            self._p.update(self._task, completed=sim_s, total=end_s, eps=events / wall if wall > 0 else 0.0)
        return True

    def __exit__(self, *exc) -> None:
        if self._p is not None:
            self._p.__exit__(*exc)
