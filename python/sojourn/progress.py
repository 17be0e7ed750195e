"""A progress bar for long runs (simulated time, events/s and ETA), in a terminal and in
Jupyter (rich renders there as a live widget).

The ETA is the simulated time still to go divided by the run's rate so far (simulated
seconds per wall second, measured from the start of the run): :func:`eta_seconds`. Rich's
own ``TimeRemainingColumn`` averages only the last few updates and shows nothing for runs
longer than a day; this one shows days and years too (a ``duration = "1000000h"`` run says
how long it will really take)."""
from __future__ import annotations

import math
import sys
import time
from typing import Callable, Optional

from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn
from rich.text import Text


def _in_jupyter() -> bool:
    from rich.console import Console

    return Console().is_jupyter


def eta_seconds(sim_s: float, end_s: float, wall_s: float) -> Optional[float]:
    """Wall seconds still needed to simulate up to ``end_s`` at the rate so far
    (``sim_s`` simulated in ``wall_s``); None before there is a rate."""
    if sim_s <= 0.0 or wall_s <= 0.0 or not math.isfinite(sim_s):
        return None
    return max(0.0, end_s - sim_s) * wall_s / sim_s


def format_span(s: float) -> str:
    """A span of seconds in words: ``42s``, ``3:07``, ``2:03:07``, ``4.2 days``, ``3.1 years``
    (an ETA, a CPU-time estimate)."""
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{int(s // 60)}:{int(s % 60):02d}"
    if s < 2 * 86400:
        return f"{int(s // 3600)}:{int(s % 3600 // 60):02d}:{int(s % 60):02d}"
    if s < 2 * 365.25 * 86400:
        return f"{s / 86400:.1f} days"
    return f"{s / (365.25 * 86400):.1f} years"


def format_eta(s: Optional[float]) -> str:
    """``ETA 42s``, ``ETA 3:07``, ``ETA 2:03:07``, ``ETA 4.2 days``, ``ETA 3.1 years``;
    ``ETA -`` when unknown."""
    if s is None or not math.isfinite(s):
        return "ETA -"
    return f"ETA {format_span(s)}"


class _Speed(ProgressColumn):
    def render(self, task: Task) -> Text:
        eps = task.fields.get("eps")
        return Text(f"{eps / 1e6:5.2f} M events/s" if eps else "", style="cyan")


class _Eta(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(format_eta(task.fields.get("eta")), style="magenta")


class RunProgress:
    """Context manager giving a ``progress(sim_s, end_s, events)`` callback; silent when
    ``quiet`` or when neither a terminal nor a notebook would show it (``force`` shows it
    anyway, e.g. on a ``console`` writing to a file). ``clock`` is the wall clock
    (``time.perf_counter``; a test passes a fake one)."""

    def __init__(self, label: str, quiet: bool = False, *, force: bool = False,
                 console=None, clock: Callable[[], float] = time.perf_counter):
        self.enabled = not quiet and (force or sys.stderr.isatty() or _in_jupyter())
        self.label = label
        self.console = console
        self.clock = clock
        self._p: Optional[Progress] = None
        self._t0 = clock()

    def __enter__(self) -> "RunProgress":
        self._t0 = self.clock()
        if self.enabled:
            kw = {} if self.console is None else {"console": self.console}
            self._p = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:.1f}/{task.total:.0f} s simulated"),
                _Speed(),
                _Eta(),
                transient=True,
                **kw,
            )
            self._p.__enter__()
            self._task = self._p.add_task(self.label, total=1.0, eps=0.0, eta=None)
        return self

    def __call__(self, sim_s: float, end_s: float, events: int) -> bool:
        if self._p is not None:
            wall = self.clock() - self._t0
            self._p.update(self._task, completed=sim_s, total=end_s, eps=events / wall if wall > 0 else 0.0,
                           eta=eta_seconds(sim_s, end_s, wall))
        return True

    def __exit__(self, *exc) -> None:
        if self._p is not None:
            self._p.__exit__(*exc)
