"""``sojourn.compare``, the path docs/repro/age-based.md names: it is
:mod:`sojourn.analysis.compare` itself (the same module object, not a copy), so
``sojourn.compare.table is sojourn.analysis.compare.table``."""
import sys

from .analysis import compare as _compare

sys.modules[__name__] = _compare
