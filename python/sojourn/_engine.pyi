"""Type information for sojourn's compiled engine (crates/sojourn-py/src/lib.rs)."""
from typing import Any, Callable, Optional

class ConfigError(ValueError):
    """A mistake in an experiment: ``path`` is the key path, ``msg`` what was expected."""

    path: str
    msg: str

class PrivilegeError(PermissionError):
    """The live engine may not create network namespaces here (needs root)."""

class EmulateError(RuntimeError):
    """A live run failed (a namespace, device, socket or the forwarder)."""

def validate(cfg: dict[str, Any], base_dir: str, disciplines: Optional[Any] = None) -> dict[str, Any]:
    """Validates an experiment dict; returns name, seed, duration_s, warmup_s, repeats,
    nodes, links ([(name, qdisc description)]), the number of workloads,
    memory_estimate_bytes, cpu_estimate_s and link_packets_per_s (docs/limits.md), and
    threads: {asked, partitions, cut_links, lookahead_s, heaviest_share, shipped_per_s,
    predicted_speedup, one_thread_because} (docs/engine.md,
    "One run on many cores")."""

def run(
    cfg: dict[str, Any],
    base_dir: str,
    seed: Optional[int] = None,
    progress: Optional[Callable[[float, float, int], Optional[bool]]] = None,
    sink: Optional[Callable[[str, list, Optional[list]], None]] = None,
    chunk_rows: int = 65536,
    disciplines: Optional[Any] = None,
) -> dict[str, Any]:
    """Runs one experiment: summary_json (str) and the flows, timeseries, series_names,
    histograms and packets tables as [(name, dtype, data)] columns (packets may be None;
    timeseries rows also carry ``entity_code`` and ``metric_code``, each row's index in the
    dictionaries :func:`sojourn._stream.name_series` builds from the names). With ``sink``, the time series, packet log and finished flows' records are handed to
    ``sink(kind, columns, names)`` in chunks of ``chunk_rows`` rows while the run proceeds
    ("timeseries" with the series names known so far, "packets" and "flows" with None;
    flow records in the order the flows finished) and the result holds the rest; without
    it a run whose tables would not fit in memory is refused with the estimate.
    ``disciplines``: a ``sojourn.disciplines.Resolver`` (every function taking it: without
    it ``kind = "python"`` is refused); a Python discipline that raises stops the run with
    :class:`DisciplineError`."""

def emulate(
    cfg: dict[str, Any],
    base_dir: str,
    seed: Optional[int] = None,
    progress: Optional[Callable[[float, float, int], Optional[bool]]] = None,
    kernel_hook: Optional[Callable[[str, list[tuple[str, str, str]]], None]] = None,
    sink: Optional[Callable[[str, list, Optional[list]], None]] = None,
    chunk_rows: int = 65536,
    disciplines: Optional[Any] = None,
) -> dict[str, Any]:
    """Runs one experiment live (Linux, root): the same tables as :func:`run`.
    ``kernel_hook(stage, [(node, namespace, device)])`` is called with stage ``"setup"``
    before traffic starts and ``"collect"`` after it ended (the kernel engine). With
    ``sink``, the time series is handed out while the run proceeds, as :func:`run` does."""

def emulate_check(cfg: dict[str, Any], base_dir: str, disciplines: Optional[Any] = None) -> None:
    """Raises ConfigError for what the live engine would refuse; creates nothing."""

def emulate_cleanup() -> tuple[list[str], list[str]]:
    """Removes namespaces left by killed live runs: (removed, errors)."""

def qdiscs() -> list[tuple[str, str]]:
    """(name, summary) of every registered discipline."""

def version() -> str:
    """The engine's version."""

def source_hash() -> str:
    """SHA-256 of the engine's sources at build time (crates/**/*.rs and Cargo files); the
    test suite compares it with the tree's to refuse a stale build."""

def pgo_profile() -> str:
    """First 16 hex digits of the SHA-256 of the PGO profile the engine was optimised with
    (pgo/sojourn.profdata at build time, docs/pgo.md), or "" for a build without one."""

def parse_bytes(s: str) -> int:
    """Bytes in a size such as "1500B", "300KiB", "64kB" (ValueError on bad input)."""

def parse_rate(s: str) -> int:
    """Bits per second in a rate such as "10Mbit" (ValueError on bad input)."""

def parse_duration_ns(s: str) -> int:
    """Nanoseconds in a duration such as "100ms", "2min" (ValueError on bad input)."""

def size_dist_spec(spec: Any, base_dir: str = ".", key: str = "size") -> dict[str, Any]:
    """The canonical form of a size distribution spec, with its analytic "mean" in bytes."""

def sample_sizes(spec: Any, n: int, seed: int, base_dir: str = ".") -> list[int]:
    """n sizes drawn by the engine's sampler from Rng::from_seed(seed)."""

def parse_set(item: str) -> tuple[str, Any]:
    """`--set KEY=VALUE` as (KEY, VALUE): VALUE in TOML syntax, bare words are strings."""

def check_key(dotted: str) -> None:
    """Checks a dotted override key such as "workload[1].rate" (ConfigError if bad)."""

def set_key(cfg: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """cfg with dotted = value set (tables and list items created), as a new dict."""

def deploy_model(cfg: dict[str, Any], base_dir: str, disciplines: Optional[Any] = None) -> dict[str, Any]:
    """The deployable view of an experiment (sojourn.deploy): name, nodes, links (per
    direction: name, from, to, rate_kind, rate_bps, shaper, delay_ns, loss, qdisc, not_linux
    = (kind, reason) or None, tc = tc qdisc argument lines or None, tc_shaped = [(object,
    args)] behind htb or None), classifiers (nodes, hook, map = [(upto_bytes, priority)]) and
    conntrack (per node: None or (direction, bytes))."""

class DisciplineError(RuntimeError):
    """A Python discipline raised, or broke its contract, during a run; nothing was written.
    ``__cause__`` is its own exception, with its traceback."""

class Packet:
    """A packet as a Python discipline sees it (crates/sojourn-py/src/pydisc.rs)."""

    uid: int
    length: int
    flow: int
    flow_hash: int
    src: str
    dst: str
    sport: int
    dport: int
    proto: int
    five_tuple: tuple[str, str, int, int, int]
    dscp: int
    ecn: int
    enqueued_at_ns: int
    created_at_ns: int
    ct_bytes: int
    priority: int
    def mark_ce(self) -> bool:
        """Sets CE; True if the packet is ECN-capable (a mark), False for Not-ECT."""
    def drop(self, reason: str = "aqm") -> None:
        """Drops a packet the discipline holds, counted under ``reason``."""

class Rng:
    """sojourn's random generator (xoshiro256++), as a Rust discipline's ``ctx.rng()``."""

    def __init__(self, seed: int) -> None: ...
    def random(self) -> float: ...
    def below(self, n: int) -> int: ...
    def uniform(self, lo: float, hi: float) -> float: ...
    def exp(self, mean: float) -> float: ...
    def chance(self, p: float) -> bool: ...
    def next_u64(self) -> int: ...

class Trace:
    """A packet trace of one discipline (sojourn.testing)."""

    link: str
    truncated: bool
    def __len__(self) -> int: ...
    def counts(self) -> tuple[int, int]: ...
    def columns(self) -> dict[str, list]: ...
    @staticmethod
    def synthetic(ops: list, seed: int = 1, link_rate_bps: int = 0) -> "Trace": ...

def record_trace(cfg: dict[str, Any], base_dir: str, link: str, seed: Optional[int] = None,
                 disciplines: Optional[Any] = None, max_ops: int = 5000000) -> Trace:
    """Runs the experiment in the simulator, recording link ``link``'s discipline."""

def replay(trace: Trace, a: Any, b: Any, base_dir: str,
           disciplines: Optional[Any] = None) -> tuple[int, Optional[dict[str, Any]]]:
    """Replays ``trace`` into specs ``a`` and ``b``: (operations, None) when they agree, or
    (index, {index, op, time_ns, uid, a, b}) at the first difference."""
