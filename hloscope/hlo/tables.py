"""The kernels of HLO modules as one pyarrow Table, for notebooks (`api.hlo_kernels_table`): a row per launch of each
module, in schedule order, with the figures `hlo stats` has per kernel. Zero-copy to pandas (`to_pandas()`, nullable
integers as Int64) and polars (`polars.from_arrow`); DuckDB queries it by name.

Every figure is the one `hlo stats --json` prints for the same module: `kind` counts to its `kernel_breakdown`,
`source` groups to its `kernels_by_source` (same `source_depth`), the cost columns are its `top_instructions`'
figures for every launch rather than the top ones, and for an optimized GPU module whose thunk sequence joins the
HLO's launches, the thunk columns are its `thunk_sequence.launches` (`--launches`); null where there is none. A
run's measured time per instruction is `api.ops_table`'s, joined on (`module`, `name`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hloscope.errors import MissingDependency
from hloscope.hlo import kernels
from hloscope.hlo.attribution import layer_of
from hloscope.hlo.cost import module_cost
from hloscope.hlo.load import LoadedModule
from hloscope.hlo.parser import collector_paused
from hloscope.hlo.results import JoinedLaunch, ThunkCheck
from hloscope.hlo.stats import SOURCE_DEPTH, thunk_sequence_check

# column -> pyarrow type name, in the table's order ("int64[]": a list of int64)
KERNEL_COLUMNS = (
    ("module", "string"), ("file", "string"), ("stage", "string"), ("platform", "string"), ("module_index", "int64"),
    ("launch", "int64"),  # position among the module's launches, schedule order
    ("name", "string"), ("kind", "string"), ("opcode", "string"), ("detail", "string"), ("computation", "string"),
    ("op_name", "string"), ("source", "string"),
    ("flops", "float64"), ("transcendentals", "float64"), ("bytes_accessed", "float64"), ("library_flops", "float64"),
    ("library_bytes", "float64"),
    ("thunk_index", "int64"), ("thunk_kind", "string"), ("kernel_name", "string"), ("grid", "int64[]"),
    ("block", "int64[]"), ("shared_memory_bytes", "int64"), ("reused_kernel", "bool_"),
)
# columns that hold nulls (no thunk sequence) -> pandas' nullable type, rather than float or object
_NULLABLE = {"thunk_index": "Int64", "shared_memory_bytes": "Int64", "reused_kernel": "boolean"}


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
    except ImportError as error:
        raise MissingDependency("pyarrow", "the kernels table is a pyarrow Table") from error
    return pa


def kernels_table(modules: Sequence[LoadedModule], source_depth: int = SOURCE_DEPTH) -> Any:
    """Every launch of every module in `modules` (as `hloscope.hlo.load.load_modules` reads them), one row each."""
    pa = _pyarrow()
    fields = [(name, pa.list_(pa.int64()) if kind == "int64[]" else getattr(pa, kind)()) for name, kind in KERNEL_COLUMNS]
    described = [{"name": name, "field_name": name, "pandas_type": "int64" if kind == "Int64" else "bool",
                  "numpy_type": kind, "metadata": None} for name, kind in _NULLABLE.items()]
    pandas = {"index_columns": [], "column_indexes": [], "columns": described, "creator": {"library": "hloscope"},
              "pandas_version": "2.0.0"}
    schema = pa.schema(fields, metadata={b"pandas": json.dumps(pandas).encode()})
    rows: list[dict[str, Any]] = []
    for loaded in modules:
        with collector_paused():
            rows += module_kernels(loaded, source_depth)
    return pa.Table.from_pylist(rows, schema=schema)


def module_kernels(loaded: LoadedModule, source_depth: int = SOURCE_DEPTH) -> list[dict[str, Any]]:
    """The rows of one module: its launches (`hloscope.hlo.kernels.launches`), each with its cost and source, and
    XLA's thunk where the module's thunk sequence joins them."""
    module = loaded.module
    module.validate()
    platform = loaded.platform
    _, analysis = module_cost(module)
    known = analysis.costs
    check = thunk_sequence_check(loaded, with_launches=True)
    joined: list[JoinedLaunch | None] = [None] * len(kernels.launches(module, platform))
    if isinstance(check, ThunkCheck) and check.agrees and check.launches:
        joined = [row if isinstance(row, JoinedLaunch) else None for row in check.launches]
    layers: dict[str, str] = {}
    rows = []
    for position, ((comp, instr, kind), thunk) in enumerate(zip(kernels.launches(module, platform), joined)):
        cost = known.get(instr) or analysis.instruction_cost(instr)
        op_name = instr.metadata.get("op_name", "")
        source = layers.get(op_name)
        if source is None:
            source = layers[op_name] = layer_of(op_name, source_depth)
        rows.append({
            "module": module.name, "file": loaded.file, "stage": loaded.stage, "platform": platform,
            "module_index": loaded.index, "launch": position, "name": instr.name, "kind": kind,
            "opcode": instr.opcode, "detail": instr.fusion_kind or instr.custom_call_target or "",
            "computation": comp.name, "op_name": op_name, "source": source, "flops": cost.flops,
            "transcendentals": cost.transcendentals, "bytes_accessed": cost.bytes_accessed,
            "library_flops": cost.library_flops, "library_bytes": cost.library_bytes,
            "thunk_index": thunk.thunk_index if thunk else None, "thunk_kind": thunk.thunk_kind if thunk else None,
            "kernel_name": thunk.kernel_name if thunk else None, "grid": thunk.grid if thunk else None,
            "block": thunk.block if thunk else None,
            "shared_memory_bytes": thunk.shared_memory_bytes if thunk else None,
            "reused_kernel": thunk.reused_kernel if thunk else None,
        })
    return rows
