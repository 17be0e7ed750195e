"""Reproductions of the seed papers: one module per paper, each with a ``main(argv)``
that runs the shipped sweeps in ``experiments/repro/<name>/`` and writes the tables and
plots of ``docs/repro/<name>.md``."""
