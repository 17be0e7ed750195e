"""What sojourn makes of finished runs: statistics, comparison tables, reports, loaders.

- :mod:`~sojourn.analysis.stats` — the one statistics API (FCT intervals over flows and
  across repeats, gains, percentiles, fairness; docs/statistics.md);
- :mod:`~sojourn.analysis.compare` — ``sojourn compare``'s tables, gains and PNG/SVG plots;
- :mod:`~sojourn.analysis.htmlreport` — ``report.html``, the self-contained page
  (docs/reports.md); :mod:`~sojourn.analysis.report` — one run's terminal table and
  ``report.md``;
- :mod:`~sojourn.analysis.tidy` — :func:`sojourn.load`, results as one tidy DataFrame;
- :mod:`~sojourn.analysis.flent` — a run's time series as a Flent data file;
- :mod:`~sojourn.analysis.pairs` — a discipline and its age-based variant, and their colours.

Everything here reads result directories (docs/output-schema.md) and never runs the
engine. ``sojourn.stats`` and ``sojourn.compare``, the paths the documentation names, are
the same modules as ``sojourn.analysis.stats`` and ``sojourn.analysis.compare``.
"""
