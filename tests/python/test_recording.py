"""The time-series hand-off from the engine (docs/output-schema.md, timeseries.parquet):
the entity and metric dictionaries list names in the order their series first appear, and
the per-row dictionary codes the engine computes are the ones the names give."""
from __future__ import annotations

import pyarrow as pa

import sojourn
from sojourn import _engine
from sojourn._stream import arrow_table, name_series

# One pair through an fq_codel bottleneck, sampled at 0, 100, 200 and 300 ms.
CFG = {
    "duration": "300ms",
    "record": {"interval": "100ms"},
    "topology": {
        "kind": "dumbbell",
        "pairs": 1,
        "bottleneck": {"rate": "10Mbit", "delay": "5ms", "qdisc": {"kind": "fq_codel"}},
        "access": {"rate": "100Mbit", "delay": "1ms"},
    },
    "workload": [{"kind": "bulk", "pairs": "all", "count": 1}],
}

LINKS = ["bottleneck", "reverse", "s0.up", "s0.down", "d0.down", "d0.up"]


def test_dictionaries_in_first_appearance_order():
    ts = sojourn.run(CFG, seed=1).timeseries_table
    # 6 links x 2 rows + fq_codel's 3 at time 0; 6 x 5 + 3 at each later sample.
    assert ts.num_rows == 15 + 3 * 33
    ent, met = ts.column("entity").combine_chunks(), ts.column("metric").combine_chunks()
    assert ent.dictionary.to_pylist() == LINKS
    assert met.dictionary.to_pylist() == [
        "queue_packets", "queue_bytes", "new_flows", "old_flows", "memory_usage_bytes",
        "throughput_bps", "drops", "ecn_marks",
    ]
    # The first sample's rows: each link's queue_packets, queue_bytes (codes 0, 1), the
    # bottleneck's fq_codel metrics after its own (codes 2, 3, 4).
    assert ent.indices.to_pylist()[:15] == [0, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert met.indices.to_pylist()[:15] == [0, 1, 2, 3, 4, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1]


def test_engine_codes_equal_the_codes_of_the_names():
    # The engine's entity_code / metric_code columns against the names looked up row by
    # row in Python (the independent path: each row's series id -> its names).
    cfg, _name, base = sojourn.api._prepare(CFG, None, None, None)
    raw = _engine.run(cfg, str(base), 1, None)
    rows, names = arrow_table(raw["timeseries"]), arrow_table(raw["series_names"])
    assert {"entity_code", "metric_code"} <= set(rows.column_names)
    ids = rows.column("series").to_pylist()
    for key in ("entity", "metric"):
        per_series = names.column(key).to_pylist()
        uniq = []
        for v in per_series:
            if v not in uniq:
                uniq.append(v)
        want = [uniq.index(per_series[i]) for i in ids]
        assert rows.column(f"{key}_code").to_pylist() == want
    with_codes = name_series(rows, names)
    without = name_series(rows.drop_columns(["entity_code", "metric_code"]), names)
    assert with_codes.equals(without)
    assert with_codes.column_names == ["time_s", "entity", "metric", "value"]
    # A slice (a streamed row group) keeps its codes.
    part = name_series(rows.slice(20, 30), names)
    assert part.column("entity").to_pylist() == without.column("entity").to_pylist()[20:50]
    assert isinstance(part.column("metric").type, pa.DictionaryType)
