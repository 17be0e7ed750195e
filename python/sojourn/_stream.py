"""Streaming a run's time series, packet log and flow records to Parquet while it proceeds.

The engine hands the rows over in chunks of :data:`CHUNK_ROWS` (``_engine.run(sink=...)``,
between events, about every 65k events); :class:`RunStream` buffers them per table and
writes one Parquet row group each time :func:`row_group_rows` rows are buffered, into the
run's hidden staging directory (``.sojourn-partial-*``, see :mod:`sojourn._outdir`). The
files become visible only when :meth:`sojourn.Result.write` renames the staging directory's
content into place, so a killed run leaves nothing that looks complete.

Byte identity with the in-memory path (``pq.write_table`` of the whole table): the row
group size is pyarrow's own default (1,048,576 rows), each row group is written from one
contiguous table exactly as ``write_table`` slices it, with the same writer options; a run
with fewer rows than one row group is written by ``write_table`` itself. So both paths give
the same file bytes, with one exception: the time series' ``entity``/``metric`` dictionaries
of a row group hold the series known when it is written, so a series that first appears
after the first row group makes the earlier row groups' dictionaries shorter (same values).

Flow records arrive as flows finish, not in flow-id order (a long transfer finishes after
later short ones; a bulk flow never does). ``flows.parquet`` is in flow-id order with row
group ``g`` holding flows ``g·R .. (g+1)·R−1`` (ids are dense), so :class:`_FlowStream`
spills each chunk, sorted and cut at those boundaries, to small Arrow IPC files in the
staging directory, and at the end writes each row group from its spilled pieces plus the
records the engine still held: one row group in memory at a time, the same bytes.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

#: Rows per chunk handed over by the engine (a multiple of parquet-cpp's 1024-row write
#: batch and a divisor of the row group size).
CHUNK_ROWS = 65536
#: pyarrow's default maximum row group length (``pq.write_table`` without ``row_group_size``).
DEFAULT_ROW_GROUP_ROWS = 1024 * 1024
#: Parquet writer options, the same for streamed and in-memory tables.
COMPRESSION = "zstd"


def row_group_rows() -> int:
    """Rows per Parquet row group of a streamed table: ``SOJOURN_ROW_GROUP_ROWS`` (a
    multiple of 65536; smaller groups hold less memory, larger ones compress a little
    better; the rows written are the same) or pyarrow's default, 1,048,576."""
    v = os.environ.get("SOJOURN_ROW_GROUP_ROWS")
    if not v:
        return DEFAULT_ROW_GROUP_ROWS
    from ._config import ConfigError

    try:
        n = int(v)
    except ValueError:
        n = 0
    if n <= 0 or n % CHUNK_ROWS:
        raise ConfigError("environment variable SOJOURN_ROW_GROUP_ROWS", "",
                          f"expected a positive multiple of {CHUNK_ROWS}, got {v!r}")
    return n


def arrow_table(cols: list) -> pa.Table:
    """An Arrow table from the engine's ``[(name, dtype, data)]`` columns."""
    arrays, names = [], []
    for name, dtype, data in cols:
        if dtype == "str":
            arr = pa.array(data, type=pa.string())
        elif dtype == "bool":
            arr = pa.array(np.frombuffer(data, dtype=np.uint8).astype(bool))
        else:
            arr = pa.array(np.frombuffer(data, dtype=np.dtype(dtype)))
        arrays.append(arr)
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


def name_series(ts: pa.Table, names: pa.Table) -> pa.Table:
    """Long-form time series (``time_s, entity, metric, value``) from rows with series ids
    (``time_s, series, value``) and the ids' names, ``entity`` and ``metric``
    dictionary-encoded in first-appearance order of the series (deterministic). Rows from
    the engine carry each row's dictionary codes (``entity_code``, ``metric_code``,
    computed by the same rule), which are used as they are."""
    cols = []
    ids = None
    for key in ("entity", "metric"):
        per_series = names.column(key).to_pylist()
        uniq = list(dict.fromkeys(per_series))  # distinct names, first appearance first
        if f"{key}_code" in ts.column_names:
            col = ts.column(f"{key}_code")
            # combine_chunks copies even a single chunk
            row_codes = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        else:
            first = {v: i for i, v in enumerate(uniq)}
            codes = np.array([first[v] for v in per_series], dtype=np.int32)
            if ids is None:
                ids = ts.column("series").to_numpy().astype(np.int64)
            row_codes = pa.array(codes[ids] if len(ids) else np.empty(0, dtype=np.int32), type=pa.int32())
        cols.append(pa.DictionaryArray.from_arrays(row_codes, pa.array(uniq, type=pa.string())))
    return pa.Table.from_arrays([ts.column("time_s"), cols[0], cols[1], ts.column("value")],
                                names=["time_s", "entity", "metric", "value"])


class _TableStream:
    """One table's buffer and writer. ``finish`` returns the whole table when it never
    reached a row group (then the caller writes it with ``pq.write_table``), else None
    after writing the last row group and closing the file."""

    def __init__(self, path: Path, rg_rows: int, named: bool):
        self.path = path
        self.rg_rows = rg_rows
        self.named = named  # time series: rows carry series ids, named at write time
        self.names: Optional[pa.Table] = None
        self.parts: list = []
        self.buffered = 0
        self.writer: Optional[pq.ParquetWriter] = None
        self.rows_written = 0

    def add(self, rows: pa.Table, names: Optional[pa.Table] = None) -> None:
        if names is not None:
            self.names = names
        if rows.num_rows:
            self.parts.append(rows)
            self.buffered += rows.num_rows
        while self.buffered >= self.rg_rows:
            self._write(self.rg_rows)

    def _table(self, t: pa.Table) -> pa.Table:
        return name_series(t, self.names) if self.named else t

    def _write(self, n: int) -> None:
        # One contiguous table per row group: what pq.write_table hands parquet-cpp.
        t = pa.concat_tables(self.parts).combine_chunks()
        head, rest = t.slice(0, n), t.slice(n)
        head = self._table(head)
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, head.schema, compression=COMPRESSION)
        self.writer.write_table(head)
        self.rows_written += head.num_rows
        self.parts = [rest.combine_chunks()] if rest.num_rows else []
        self.buffered = rest.num_rows

    def finish(self, rows: pa.Table, names: Optional[pa.Table] = None) -> Optional[pa.Table]:
        self.add(rows, names)
        if self.writer is None:
            parts = self.parts or [rows]
            return self._table(pa.concat_tables(parts).combine_chunks())
        if self.buffered:
            self._write(self.buffered)
        self.close()
        return None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _sorted_by_flow(t: pa.Table) -> pa.Table:
    ids = t.column("flow").to_numpy()
    if len(ids) > 1 and (np.diff(ids.astype(np.int64)) < 0).any():
        t = t.take(pa.array(np.argsort(ids, kind="stable")))
    return t.combine_chunks()


class _FlowStream:
    """``flows.parquet`` from finished flows' records (any order) and, at the end, the
    records still held (in id order). ``finish`` returns the whole table when there are
    fewer rows than one row group (the caller writes it with ``pq.write_table``), else
    None after writing the file row group by row group."""

    def __init__(self, path: Path, rg_rows: int):
        self.path = path
        self.rg_rows = rg_rows
        self.spill_dir = path.parent / ".flows-spill"
        self.pieces: Dict[int, List[Path]] = {}
        self.spilled = 0

    def add(self, rows: pa.Table) -> None:
        if not rows.num_rows:
            return
        rows = _sorted_by_flow(rows)
        groups = rows.column("flow").to_numpy() // self.rg_rows
        cuts = [0, *(np.flatnonzero(np.diff(groups)) + 1).tolist(), len(groups)]
        self.spill_dir.mkdir(exist_ok=True)
        for a, b in zip(cuts[:-1], cuts[1:]):
            g = int(groups[a])
            f = self.spill_dir / f"{g}-{len(self.pieces.get(g, ()))}.arrow"
            with pa.OSFile(str(f), "wb") as sink, ipc.new_file(sink, rows.schema) as w:
                w.write_table(rows.slice(a, b - a))
            self.pieces.setdefault(g, []).append(f)
        self.spilled += rows.num_rows

    def _group(self, g: int, held: pa.Table) -> pa.Table:
        parts = []
        for f in self.pieces.pop(g, []):
            with pa.OSFile(str(f), "rb") as src:
                parts.append(ipc.open_file(src).read_all())
            f.unlink()
        parts.append(held)
        return _sorted_by_flow(pa.concat_tables(parts))

    def finish(self, held: pa.Table) -> Optional[pa.Table]:
        if not self.spilled:
            return held
        total = self.spilled + held.num_rows
        ids = held.column("flow").to_numpy()
        groups = (total + self.rg_rows - 1) // self.rg_rows
        if groups <= 1:
            t = self._group(0, held)
            self.close()
            return t
        bounds = np.searchsorted(ids, np.arange(groups + 1, dtype=np.int64) * self.rg_rows)
        writer = None
        try:
            for g in range(groups):
                a, b = int(bounds[g]), int(bounds[g + 1])
                t = self._group(g, held.slice(a, b - a))
                want = min(self.rg_rows, total - g * self.rg_rows)
                if t.num_rows != want:  # pragma: no cover - an engine bug
                    raise RuntimeError(f"flows.parquet row group {g}: {t.num_rows} rows, expected {want}")
                if writer is None:
                    writer = pq.ParquetWriter(self.path, t.schema, compression=COMPRESSION)
                writer.write_table(t)
        finally:
            if writer is not None:
                writer.close()
        self.close()
        return None

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.spill_dir, ignore_errors=True)
        self.pieces.clear()


class RunStream:
    """The engine's ``sink``: buffers and writes ``timeseries.parquet``,
    ``packets.parquet`` and ``flows.parquet`` into ``staging`` (the run's hidden partial
    directory)."""

    def __init__(self, staging: Path, rg_rows: Optional[int] = None):
        rg = rg_rows or row_group_rows()
        self.staging = Path(staging)
        self.timeseries = _TableStream(self.staging / "timeseries.parquet", rg, named=True)
        self.packets = _TableStream(self.staging / "packets.parquet", rg, named=False)
        self.flows = _FlowStream(self.staging / "flows.parquet", rg)
        self._names_in: Optional[list] = None
        self._names: Optional[pa.Table] = None

    def __call__(self, kind: str, cols: list, names: Optional[list]) -> None:
        if kind == "timeseries":
            # The engine passes the same names object while no series was added: convert
            # it once (a run may have tens of thousands of series).
            if names is not None and names is not self._names_in:
                self._names_in, self._names = names, arrow_table(names)
            self.timeseries.add(arrow_table(cols), self._names if names is not None else None)
        elif kind == "packets":
            self.packets.add(arrow_table(cols))
        elif kind == "flows":
            self.flows.add(arrow_table(cols))
        else:  # pragma: no cover - the engine sends only these three
            raise ValueError(f"unknown stream {kind!r}")

    def close(self) -> None:
        """Closes the files (on an aborted run; the staging directory is removed after)."""
        self.timeseries.close()
        self.packets.close()
        self.flows.close()
