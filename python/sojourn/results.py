"""Run results: the summary, the flow and time-series tables, and their files.

Files in an output directory (schema in docs/output-schema.md):

* ``summary.json`` - deterministic summary (same experiment + seed => same bytes);
  written last, so its presence marks a complete result;
* ``flows.parquet`` - one row per flow;
* ``timeseries.parquet`` - long form: ``time_s, entity, metric, value``;
* ``packets.parquet`` - one row per logged packet event (when ``[record] packets`` is set);
* ``wifi.parquet`` - with ``kind = "wifi"``: one row per station (airtime shares,
  throughput, aggregation; docs/wifi.md);
* ``histograms.parquet`` - the buckets of each link's per-packet sojourn histogram
  (``link, lo_ns, hi_ns, count``), so percentiles can be pooled across repeats;
* ``experiment.json`` - the experiment as run (after ``--set`` overrides; seed separate);
* ``perf.json`` - wall-clock time and speed (not deterministic, hence separate).
"""
from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ._stream import COMPRESSION
from ._stream import arrow_table as _arrow_table
from ._stream import name_series

SUMMARY = "summary.json"


def _timeseries_table(ts_cols: list, name_cols: list) -> pa.Table:
    """Long-form time series with dictionary-encoded ``entity`` and ``metric`` columns."""
    return name_series(_arrow_table(ts_cols), _arrow_table(name_cols))


@dataclass
class Result:
    """The outcome of one run.

    ``summary`` is the parsed ``summary.json``; ``flows``, ``timeseries`` and ``packets``
    are pandas DataFrames (``packets`` is ``None`` unless packet logging was on).
    """

    summary: dict
    flows_table: Optional[pa.Table]
    timeseries_table: Optional[pa.Table]
    packets_table: Optional[pa.Table] = None
    perf: dict = field(default_factory=dict)
    summary_text: str = ""
    histograms_table: Optional[pa.Table] = None
    experiment: Optional[dict] = None
    #: Tables streamed to disk during the run instead of held in memory (``"timeseries"``,
    #: ``"packets"``, ``"flows"`` -> their Parquet file); their ``*_table`` field is then
    #: None and :attr:`timeseries` / :attr:`packets` / :attr:`flows` read the file.
    files: dict = field(default_factory=dict)
    #: The hidden staging directory a streamed run wrote into, until :meth:`write`
    #: publishes it.
    staged: Optional[Path] = None
    #: One row per latency probe / isochronous datagram (``probes.parquet``,
    #: docs/tests.md); None when the run had no ``ping`` or ``isochronous`` workload.
    probes_table: Optional[pa.Table] = None
    #: Per-subscriber results of an isp topology (``subscribers.parquet``, docs/isp.md).
    subscribers_table: Optional[pa.Table] = None

    @property
    def flows(self) -> pd.DataFrame:
        return self.table("flows").to_pandas()

    def table(self, kind: str) -> Optional[pa.Table]:
        """``"timeseries"``, ``"packets"`` or ``"flows"`` as an Arrow table, read from its
        file when the run streamed it to disk (None when packets were not logged)."""
        t = {"timeseries": self.timeseries_table, "packets": self.packets_table, "flows": self.flows_table}[kind]
        if t is None and kind in self.files:
            t = pq.read_table(self.files[kind])
        return t

    @property
    def timeseries(self) -> pd.DataFrame:
        return self.table("timeseries").to_pandas()

    @property
    def subscribers(self) -> Optional[pd.DataFrame]:
        """Per-subscriber results of an isp topology (docs/isp.md); None otherwise."""
        return None if self.subscribers_table is None else self.subscribers_table.to_pandas()

    @property
    def packets(self) -> Optional[pd.DataFrame]:
        t = self.table("packets")
        return None if t is None else t.to_pandas()

    @property
    def probes(self) -> Optional[pd.DataFrame]:
        """Every probe: ``time_s, workload, flow, mode, seq, rtt_ns, owd_up_ns,
        owd_down_ns, lost`` (docs/tests.md); None without probe workloads."""
        return None if self.probes_table is None else self.probes_table.to_pandas()

    @property
    def histograms(self) -> Optional[pd.DataFrame]:
        """Per-link sojourn histogram buckets: ``link, lo_ns, hi_ns, count``."""
        return None if self.histograms_table is None else self.histograms_table.to_pandas()

    def series(self, entity: str, metric: str) -> pd.Series:
        """One time series, indexed by time in seconds (e.g. ``("bottleneck", "queue_packets")``)."""
        df = self.timeseries
        sel = df[(df["entity"] == entity) & (df["metric"] == metric)]
        if sel.empty:
            known = sorted(set(zip(df["entity"].astype(str), df["metric"].astype(str))))
            raise KeyError(f"no series ({entity!r}, {metric!r}); known: {known[:20]}")
        return pd.Series(sel["value"].to_numpy(), index=sel["time_s"].to_numpy(), name=f"{entity}.{metric}")

    @classmethod
    def from_engine(cls, raw: dict, perf: Optional[dict] = None, stream: Any = None) -> "Result":
        """The result of an engine run; ``stream`` (a :class:`sojourn._stream.RunStream`)
        when the run streamed its time series and packet log: what the engine returns is
        then only their last rows, and the tables that reached a row group stay on disk."""
        text = raw["summary_json"]
        files: dict = {}
        flows = _arrow_table(raw["flows"])
        if stream is None:
            ts = _timeseries_table(raw["timeseries"], raw["series_names"])
            packets = None if raw.get("packets") is None else _arrow_table(raw["packets"])
        else:
            ts = stream.timeseries.finish(_arrow_table(raw["timeseries"]), _arrow_table(raw["series_names"]))
            if ts is None:
                files["timeseries"] = stream.timeseries.path
            packets = None
            if raw.get("packets") is not None:
                packets = stream.packets.finish(_arrow_table(raw["packets"]))
                if packets is None:
                    files["packets"] = stream.packets.path
            flows = stream.flows.finish(flows)
            if flows is None:
                files["flows"] = stream.flows.path
        return cls(
            summary=json.loads(text),
            flows_table=flows,
            timeseries_table=ts,
            packets_table=packets,
            perf=perf or {},
            summary_text=text,
            histograms_table=_arrow_table(raw["histograms"]) if raw.get("histograms") is not None else None,
            files=files,
            staged=None if stream is None else stream.staging,
            probes_table=_arrow_table(raw["probes"]) if raw.get("probes") is not None else None,
        )

    def write(self, out_dir: "str | os.PathLike[str]", extra: Optional[Callable[[Path], Any]] = None) -> Path:
        """Writes the result files atomically: everything is written into a hidden staging
        directory next to them, then renamed into place, ``summary.json`` (the
        completeness marker) removed first and renamed in last. A crash leaves no
        ``summary.json``. ``extra(staging_dir)`` may add files (the report and its plots),
        so that they become visible together with the data. Stale staging directories of
        dead sojourn processes are removed first. A run that streamed its tables into a
        staging directory of ``out_dir`` (:attr:`staged`) is published from there."""
        from ._outdir import clean_stale_partials, staging_dir

        out = Path(out_dir)
        if out.exists() and not out.is_dir():
            from ._config import ConfigError

            raise ConfigError(str(out), "", "exists and is not a directory; results need a directory")
        out.mkdir(parents=True, exist_ok=True)
        clean_stale_partials(out)
        (out / SUMMARY).unlink(missing_ok=True)
        reuse = self.staged is not None and self.staged.is_dir() and self.staged.parent.resolve() == out.resolve()
        staging = self.staged if reuse else staging_dir(out)
        try:
            for kind, table in (("flows", self.flows_table), ("timeseries", self.timeseries_table),
                                ("packets", self.packets_table)):
                dst = staging / f"{kind}.parquet"
                if table is not None:
                    pq.write_table(table, dst, compression=COMPRESSION)
                elif kind in self.files:
                    if Path(self.files[kind]).resolve() != dst.resolve():
                        shutil.copyfile(self.files[kind], dst)
                else:
                    (out / dst.name).unlink(missing_ok=True)
            if self.histograms_table is not None:
                pq.write_table(self.histograms_table, staging / "histograms.parquet", compression=COMPRESSION)
            if self.probes_table is not None:
                pq.write_table(self.probes_table, staging / "probes.parquet", compression=COMPRESSION)
            if self.wifi is not None:  # kind = "wifi": one row per station (docs/wifi.md)
                pq.write_table(pa.Table.from_pandas(self.wifi, preserve_index=False), staging / "wifi.parquet",
                               compression=COMPRESSION)
            if self.subscribers_table is not None:
                pq.write_table(self.subscribers_table, staging / "subscribers.parquet", compression=COMPRESSION)
            if self.experiment is not None:
                (staging / "experiment.json").write_text(json.dumps(self.experiment, indent=2, sort_keys=True, default=str) + "\n")
            (staging / "perf.json").write_text(json.dumps(self.perf, indent=2, sort_keys=True) + "\n")
            # summary.json goes into the staging directory before `extra`, so a report can
            # read the run as a whole; it still becomes visible last (renamed last below).
            (staging / SUMMARY).write_text(self.summary_text or (json.dumps(self.summary, indent=2, sort_keys=True) + "\n"))
            if extra is not None:
                extra(staging)
            publish_staged(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            if reuse:
                self.staged = None
        self.files = {k: out / f"{k}.parquet" for k in self.files}
        return out

    @property
    def wifi(self) -> Optional[pd.DataFrame]:
        """Per-station results of a Wi-Fi run (one row per station), else None."""
        from .wifi import stations_frame

        return stations_frame(self.summary)

    def discard(self) -> None:
        """Removes the staging directory of a streamed run that will not be written."""
        if self.staged is not None:
            shutil.rmtree(self.staged, ignore_errors=True)
            self.staged = None

    @classmethod
    def read(cls, out_dir: "str | os.PathLike[str]") -> "Result":
        """Reads a result directory written by :meth:`write` (refuses incomplete ones)."""
        d = Path(out_dir)
        s = d / SUMMARY
        if not s.exists():
            raise FileNotFoundError(f"{d}: no {SUMMARY} (not a sojourn result, or an incomplete one)")
        text = s.read_text()
        packets = d / "packets.parquet"
        hists = d / "histograms.parquet"
        probes = d / "probes.parquet"
        exp = d / "experiment.json"
        perf = d / "perf.json"
        subs = d / "subscribers.parquet"
        return cls(
            summary=json.loads(text),
            flows_table=pq.read_table(d / "flows.parquet"),
            timeseries_table=pq.read_table(d / "timeseries.parquet"),
            packets_table=pq.read_table(packets) if packets.exists() else None,
            perf=json.loads(perf.read_text()) if perf.exists() else {},
            summary_text=text,
            histograms_table=pq.read_table(hists) if hists.exists() else None,
            experiment=json.loads(exp.read_text()) if exp.exists() else None,
            probes_table=pq.read_table(probes) if probes.exists() else None,
            subscribers_table=pq.read_table(subs) if subs.exists() else None,
        )

    def __repr__(self) -> str:  # pragma: no cover - convenience
        s = self.summary
        return f"<sojourn.Result {s.get('experiment')!r} seed={s.get('seed')} flows={s['flows']['count']} links={len(s['links'])}>"


#: Time-series rows a report reads at most (~100 MB in pandas): a longer series (a long run
#: streamed to disk) is thinned to every k-th sample time for plots, so a report's memory
#: stays bounded whatever the run's length (docs/limits.md).
REPORT_MAX_ROWS = 2_000_000


def read_timeseries(path: "str | os.PathLike[str]", max_rows: int = REPORT_MAX_ROWS) -> pd.DataFrame:
    """``timeseries.parquet`` as a DataFrame for plotting: all of it when it has at most
    ``max_rows`` rows, else every k-th sample time (k = ceil(rows / max_rows); all series
    of a kept time are kept), read row group by row group."""
    f = pq.ParquetFile(path)
    n = f.metadata.num_rows
    k = max(1, -(-n // max_rows))
    if k == 1:
        return f.read().to_pandas()
    parts = []
    ordinal, last = -1, None
    for b in f.iter_batches(batch_size=65536):
        if b.num_rows == 0:
            continue
        t = b.column(b.schema.get_field_index("time_s")).to_numpy()
        new = np.empty(len(t), dtype=bool)
        new[0] = last is None or t[0] != last
        new[1:] = t[1:] != t[:-1]
        idx = ordinal + np.cumsum(new)
        ordinal, last = int(idx[-1]), t[-1]
        keep = idx % k == 0
        if keep.any():
            df = pa.Table.from_batches([b.filter(pa.array(keep))]).to_pandas()
            for c in ("entity", "metric"):
                df[c] = df[c].astype(str)
            parts.append(df)
    return pd.concat(parts, ignore_index=True) if parts else f.schema_arrow.empty_table().to_pandas()


def summary_dict(raw_summary: str) -> Any:
    return json.loads(raw_summary)


# ------------------------------------------------------------------------------------
# one run as one row (runs.parquet of a sweep, `sojourn compare` of run directories)
# ------------------------------------------------------------------------------------


def pick_link(summary: dict, link: Optional[str] = None) -> Optional[str]:
    """The link a run row describes: ``link`` if the run has it, else the bottleneck, else
    the busiest link."""
    links = summary.get("links", {})
    if link:
        return link if link in links else None
    if "bottleneck" in links:
        return "bottleneck"
    if not links:
        return None
    return max(sorted(links), key=lambda n: links[n].get("utilisation", 0.0))


def run_row(summary: dict, link: Optional[str] = None) -> dict:
    """The key numbers of one run (a row of runs.parquet) from its summary.json."""
    nan = math.nan
    name = pick_link(summary, link)
    l = summary["links"].get(name, {}) if name else {}
    sj = l.get("sojourn_ms") or {}  # null in the kernel engine
    f = summary.get("flows", {})
    fct = f.get("fct_s", {})
    g = f.get("goodput_bps", {})
    acc = summary.get("accounting", {})

    def num(d, k):
        v = d.get(k)
        return float(v) if v is not None else nan

    return {
        "experiment": summary.get("experiment", ""),
        "duration_s": float(summary.get("duration_s", nan)),
        "warmup_s": float(summary.get("warmup_s", 0.0)),
        "events": int(summary.get("events", 0)),
        "link": name or "",
        "link_qdisc": str(l.get("qdisc", "")),
        "rate_bps": num(l, "rate_bps"),
        "utilisation": num(l, "utilisation"),
        "throughput_bps": num(l, "throughput_bps"),
        "drops": int(l.get("drops_total", 0)),
        "ecn_marks": int(l.get("ecn_marks") or 0),  # null in the kernel engine
        "sojourn_mean_ms": num(sj, "mean"),
        "sojourn_p50_ms": num(sj, "p50"),
        "sojourn_p95_ms": num(sj, "p95"),
        "sojourn_p99_ms": num(sj, "p99"),
        "sojourn_max_ms": num(sj, "max"),
        "flows": int(f.get("count", 0)),
        "flows_sized": int(f.get("sized", 0)),
        "flows_completed": int(f.get("completed", 0)),
        "fct_mean_s": num(fct, "mean"),
        "fct_ci95_s": num(fct, "ci95"),
        "fct_p50_s": num(fct, "p50"),
        "fct_p75_s": num(fct, "p75"),
        "fct_p95_s": num(fct, "p95"),
        "fct_p99_s": num(fct, "p99"),
        "goodput_mean_bps": num(g, "mean"),
        "created": int(acc.get("created", 0)),
        "delivered": int(acc.get("delivered", 0)),
        "dropped": int(acc.get("dropped", 0)),
        "in_network": int(acc.get("in_network", 0)),
        "conserved": bool(acc.get("conserved", False)),
    }


def publish_staged(staging: Path, out: Path) -> None:
    """Move a staged run's entries into ``out``, summary.json last: a reader that sees the
    summary sees the whole run (the crash-safety rule of docs/limits.md)."""
    for src in sorted(staging.iterdir()):
        if src.name == SUMMARY:
            continue
        dst = out / src.name
        if src.is_dir() and dst.is_dir() and not dst.is_symlink():
            shutil.rmtree(dst)
        os.replace(src, dst)
    os.replace(staging / SUMMARY, out / SUMMARY)
