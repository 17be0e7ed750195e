"""Reproductions of the seed papers: scripts that turn sweep output into the papers' tables
and figures (one module per paper, each with ``main(argv)``)."""
