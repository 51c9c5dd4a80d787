"""A diff as one pyarrow Table, for notebooks (`api.diff_table`): a row per matched pair of instructions and per
one-sided group, with both sides' names, opcodes and source ops and, when both sides were profiled, their measured
device time per step. Zero-copy to pandas (`to_pandas()`, nullable integers as Int64) and polars.

Every figure is the one `hloscope diff` computes for the same two inputs: the pairs of the structural matching (all of
them, where the report keeps their count and the timed pairs that changed most), the one-sided groups of the report
(all of them, where it keeps the first 50), ranked as the report ranks them.
"""

from __future__ import annotations

import json
from typing import Any

from hloscope.diff.compare import node_times, opcode_label
from hloscope.diff.match import group_by_source, source_group
from hloscope.diff.pipeline import Compared
from hloscope.diff.report import SourceGroup
from hloscope.errors import MissingDependency

MATCHED, ONLY_IN_A, ONLY_IN_B = "matched", "only_in_a", "only_in_b"

# column -> pyarrow type name, in the table's order
COLUMNS = (("kind", "string"), ("graph_a", "string"), ("graph_b", "string"), ("name_a", "string"),
           ("name_b", "string"), ("opcode_a", "string"), ("opcode_b", "string"), ("source_a", "string"),
           ("source_b", "string"), ("how", "string"), ("count_a", "int64"), ("count_b", "int64"),
           ("sources", "int64"), ("time_a_s", "float64"), ("time_b_s", "float64"), ("delta_s", "float64"))
# integer columns with nulls (the side a group is not on; a pair has no `sources`): pandas' Int64, not float
_NULLABLE_INTEGERS = ("count_a", "count_b", "sources")


def diff_table(compared: Compared) -> Any:
    """Matched pairs first (with measured time: ranked by the size of B - A, as the report's `time_weighted.pairs`,
    of which they are a superset; without: in A's definition order), then A's one-sided groups, then B's.

    kind: matched | only_in_a | only_in_b. graph_*, name_*, opcode_*, source_*: each side's module, instruction,
    opcode (a fusion with its kind) and source op (layer indices folded, as the groups); a group fills its own side
    only, with its modules joined by ", ", no name, and its opcodes as "fusion 3, add 2". how: the matcher's stage
    that made a pair. count_*: instructions (1 for each side of a pair; a group's count on its side). sources: a
    group's distinct source ops. time_*_s: measured device time per step of each side (null without a profile on both
    sides); delta_s: B - A, a group's absent side counted as 0."""
    try:
        import pyarrow as pa
    except ImportError as error:
        raise MissingDependency("pyarrow", "the diff table is a pyarrow Table") from error
    rows = [*_pair_rows(compared), *_group_rows(compared, ONLY_IN_A), *_group_rows(compared, ONLY_IN_B)]
    fields = [(name, getattr(pa, kind)()) for name, kind in COLUMNS]
    return pa.Table.from_pylist(rows, schema=pa.schema(fields, metadata=_pandas_metadata(_NULLABLE_INTEGERS)))


def _timed(compared: Compared) -> bool:
    return compared.times_a is not None and compared.times_b is not None


def _pair_rows(compared: Compared) -> list[dict[str, Any]]:
    graph_a, graph_b, matching = compared.graph_a, compared.graph_b, compared.matching
    timed = _timed(compared)
    ta, tb = (node_times(graph_a, compared.times_a), node_times(graph_b, compared.times_b)) if timed else ({}, {})
    rows: list[dict[str, Any]] = []
    for ka, kb in matching.pairs.items():
        na, nb = graph_a.nodes[ka], graph_b.nodes[kb]
        a_s, b_s = (ta.get(ka, 0.0), tb.get(kb, 0.0)) if timed else (None, None)
        rows.append({"kind": MATCHED, "graph_a": na.graph, "graph_b": nb.graph, "name_a": na.name or ka,
                     "name_b": nb.name or kb, "opcode_a": opcode_label(na), "opcode_b": opcode_label(nb),
                     "source_a": source_group(na.op_name), "source_b": source_group(nb.op_name),
                     "how": matching.how.get(ka), "count_a": 1, "count_b": 1, "sources": None, "time_a_s": a_s,
                     "time_b_s": b_s, "delta_s": b_s - a_s if a_s is not None and b_s is not None else None})
    if timed:  # the report's order of its timed pairs
        rows.sort(key=lambda row: (-abs(row["delta_s"]), row["name_a"]))
    return rows


def _group_rows(compared: Compared, kind: str) -> list[dict[str, Any]]:
    timed = _timed(compared)
    if kind == ONLY_IN_A:
        graph, keys, times, side = compared.graph_a, compared.matching.only_in_a, compared.times_a, "a"
    else:
        graph, keys, times, side = compared.graph_b, compared.matching.only_in_b, compared.times_b, "b"
    groups = group_by_source(graph, keys, times=node_times(graph, times) if timed else None)
    return [_group_row(group, kind, side, timed) for group in groups]


def _group_row(group: SourceGroup, kind: str, side: str, timed: bool) -> dict[str, Any]:
    graphs = ", ".join(group.graphs) if group.graphs else None
    row: dict[str, Any] = {name: None for name, _ in COLUMNS}
    time_s = group.time_s if timed and isinstance(group.time_s, float) else None
    row.update({"kind": kind, f"graph_{side}": graphs, f"opcode_{side}": _opcodes(group.opcodes),
                f"source_{side}": group.op_name, f"count_{side}": group.count, "sources": group.sources,
                f"time_{side}_s": time_s})
    if time_s is not None:
        row["delta_s"] = time_s if side == "b" else -time_s
    return row


def _opcodes(opcodes: dict[str, int]) -> str:
    return ", ".join(f"{opcode} {n}" for opcode, n in opcodes.items())


def _pandas_metadata(columns: tuple[str, ...]) -> dict[bytes, bytes]:
    """Schema metadata that makes `to_pandas()` give the integer `columns`, which hold nulls, as Int64 rather than
    float64; every other column as pyarrow converts it."""
    described = [{"name": name, "field_name": name, "pandas_type": "int64", "numpy_type": "Int64", "metadata": None}
                 for name in columns]
    document = {"index_columns": [], "column_indexes": [], "columns": described, "creator": {"library": "hloscope"},
                "pandas_version": "2.0.0"}
    return {b"pandas": json.dumps(document).encode()}
