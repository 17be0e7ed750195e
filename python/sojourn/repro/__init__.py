"""Reproductions of the seed papers: one module per reproduction, each with ``main(argv)``
(see docs/repro/)."""
