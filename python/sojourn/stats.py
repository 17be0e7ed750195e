"""``sojourn.stats``, the path docs/statistics.md and docs/output-schema.md name: it is
:mod:`sojourn.analysis.stats` itself (the same module object, not a copy), so
``sojourn.stats.repeat_ci is sojourn.analysis.stats.repeat_ci``."""
import sys

from .analysis import stats as _stats

sys.modules[__name__] = _stats
