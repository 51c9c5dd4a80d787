"""Rich tables for `hloscope hlo stats` (rendering only: the numbers come from stats.module_stats, typed in
hloscope/hlo/results.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.columns import Columns
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from hloscope.render import fmt

if TYPE_CHECKING:  # render/ imports no analysis: the parts are told apart by their `available` and `joined`
    from hloscope.hlo.results import Measured, ModuleStats, SourceKernels, ThunkCheck, TopInstruction


def _t(value: Any) -> Text:
    """A user-provided string (op name, kernel name, path) as plain text: brackets are never rich markup."""
    return Text("" if value is None else str(value))


def _si(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.4g} {unit}".rstrip()


def _bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for factor, suffix in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(value) >= factor:
            return f"{value / factor:.2f} {suffix}"
    return f"{int(value)} B"


def _counts(title: str, counts: dict[str, int], limit: int = 12) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column("name")
    table.add_column("count", justify="right")
    for key, value in list(counts.items())[:limit]:
        table.add_row(_t(str(key) or "<none>"), str(value))
    if len(counts) > limit:
        table.add_row(f"... {len(counts) - limit} more", "")
    return table


def _after_optimizations_first(results: list[ModuleStats]) -> list[ModuleStats]:
    """Each module's optimized HLO (what runs) before its HLO before optimizations; modules in their order."""
    first: dict[str, int] = {}
    for index, result in enumerate(results):
        first.setdefault(result.name, index)
    return sorted(results, key=lambda r: (first[r.name], r.stage != "after_optimizations"))


def _most_flops(top: list[TopInstruction], width: int) -> Table:
    """The instructions with the most FLOPs; a long op_name is cut in the middle to the room left, keeping its start
    (the program) and its end (the op)."""
    longest = max((len(row.op_name) for row in top), default=0)
    overhead = Measurement.get(Console(width=10_000), Console(width=10_000).options, _flops_table(top, longest)).maximum
    return _flops_table(top, max(20, width - (overhead - longest)))


def _flops_table(top: list[TopInstruction], room: int) -> Table:
    table = Table(title="most FLOPs", title_justify="left", show_edge=False)
    for column in ("instruction", "opcode", "FLOPs", "bytes", "op_name"):
        table.add_column(column, justify="right" if column in ("FLOPs", "bytes") else "left",
                         no_wrap=column == "op_name")
    for row in top:
        table.add_row(_t(row.name), _t(row.opcode), _si(row.flops), _bytes(row.bytes_accessed),
                      _t(fmt.middle_ellipsis(row.op_name, room)))
    return table


def render_stats(results: list[ModuleStats], console: Console | None = None) -> None:
    console = console or Console(markup=False)
    results = fmt.printable(results)  # names from the HLO text are shown escaped, never run as terminal control
    for result in _after_optimizations_first(results):
        console.rule(Text.assemble((str(result.name), "bold"), f"  {result.stage}  {result.platform}"))
        console.print(_t(result.file), style="dim", highlight=False)
        summary = Table(show_header=False, show_edge=False)
        summary.add_column("what")
        summary.add_column("value", justify="right")
        summary.add_column("what")
        summary.add_column("value", justify="right")
        for row in _summary_rows(result):
            summary.add_row(*map(_t, row))
        console.print(summary)
        xla = result.xla_cost
        if xla and xla.available and xla.unknown_custom_calls:
            console.print(_t(f"XLA's cost analysis cannot cost custom calls and counts each as -1 FLOP and -1 byte; "
                             f"its figures above are shown with the {xla.unknown_custom_calls} custom call(s) of this "
                             f"module taken out (as XLA reports them: {xla.flops:,.0f} FLOPs, "
                             f"{xla.bytes_accessed:,.0f} bytes)."), style="dim")
        if result.roofline and result.roofline.available:
            console.print(_t("roofline LOWER BOUND, not a prediction: per launch max(FLOPs / peak FLOP/s, bytes / memory bandwidth) for the GPU in "
                             "the gpu_target_config.pbtxt XLA dumped beside the module; serial = sum over launches, "
                             "aggregate = busiest unit or memory, whichever is longer (docs/gpu-target.md)."), style="dim")
        tables = [
            _counts("kernels by kind", result.kernel_breakdown),
            _counts("fusions by kind", result.fusions),
            _counts("custom calls", result.custom_calls),
            _counts("top-level opcodes", result.entry_opcodes),
            _counts("dot/conv precision", result.precision),
        ]

        console.print(Columns([t for t in tables if t.row_count], padding=(1, 4)))
        if result.top_instructions:
            console.print(_most_flops(result.top_instructions, console.width))
        measured = result.measured or None
        thunk = result.thunk_sequence if result.thunk_sequence and result.thunk_sequence.available else None
        for table in (_measured_table(measured), _launches_table(thunk), _sources_table(result.kernels_by_source)):
            if table is not None:
                console.print(table)


def _summary_rows(result: ModuleStats) -> list[tuple[str, str, str, str]]:
    """The module's figures, two per row; XLA's own cost figures with its -1 per custom call taken out."""
    xla = result.xla_cost if result.xla_cost and result.xla_cost.available else None
    # XLA counts every custom call as -1 FLOP and -1 byte ("unknown"): shown with those taken out, and said below
    xla_flops = xla.flops + xla.unknown_custom_calls if xla else None
    xla_bytes = xla.bytes_accessed + xla.unknown_custom_calls if xla else None
    mem = result.memory
    rows = [
        ("computations", str(result.computations), "instructions", str(result.instructions)),
        ("kernels / launch", str(result.kernels), "copies", str(result.copies)),
    ]
    if result.library_flops or result.library_bytes:  # GPU modules calling cuBLAS/cuDNN: XLA cannot cost those
        rows += [
            ("FLOPs", _si(result.flops), "of which cuBLAS/cuDNN", _si(result.library_flops)),
            ("FLOPs without library calls", _si(result.flops - result.library_flops), "same, by XLA's cost analysis", _si(xla_flops)),
            ("bytes accessed", _bytes(result.bytes_accessed), "of which cuBLAS/cuDNN", _bytes(result.library_bytes)),
            ("bytes without library calls", _bytes(result.bytes_accessed - result.library_bytes), "same, by XLA's cost analysis", _bytes(xla_bytes)),
        ]
    else:  # no library calls (CPU, TPU, Trainium, or a GPU module without any): one figure each beside XLA's
        rows += [("FLOPs", _si(result.flops), "by XLA's cost analysis", _si(xla_flops)),
                 ("bytes accessed", _bytes(result.bytes_accessed), "by XLA's cost analysis", _bytes(xla_bytes))]
    rows.append(("parameters", _bytes(mem.parameter_bytes), "outputs", _bytes(mem.output_bytes)))
    ba = mem.buffer_assignment
    if ba and not ba.available:  # a broken sibling report: named, the rest of the analysis stands
        rows.append(("buffer assignment", "unreadable", "", ba.error))
    elif ba and ba.available:
        rows.append(("buffers total", _bytes(ba.total_bytes), "temp", _bytes(ba.temp_bytes)))
    report = mem.memory_report
    if report and not report.available:
        rows.append(("memory report", "unreadable", "", report.error))
    thunk = result.thunk_sequence
    if thunk and not thunk.available:
        rows.append(("XLA thunk sequence", "unreadable", "", thunk.error))
    elif thunk and thunk.available:
        verdict = "agrees" if thunk.agrees else f"DIFFERS: {thunk.reason}"
        kinds = ", ".join(f"{k} {n}" for k, n in thunk.by_kind.items())
        rows.append(("XLA thunk sequence", kinds, "vs hloscope's launches", verdict))
    if result.collectives.count:
        rows.append(("collectives", str(result.collectives.count), "collective bytes", _bytes(result.collectives.bytes)))
    bound = result.roofline
    if bound and bound.available:
        rows.append(("roofline LOWER BOUND", f"{fmt.ms(bound.serial_s)} serial",
                     f"on {bound.device or bound.target}", f"{fmt.ms(bound.aggregate_s)} aggregate"))
    elif bound and not bound.available:
        rows.append(("roofline lower bound", "-", "unavailable", bound.unavailable))
    return rows


def _measured_table(measured: Measured | None) -> Table | None:
    """The instructions that took the most device time in the run's own profile."""
    if not measured:
        return None
    table = Table(title=f"measured device time (profile in the run: {fmt.ms_column(measured.device_time_us)} ms "
                  f"over {measured.events} executions)", title_justify="left", show_edge=False)
    for column in ("instruction", "opcode / fusion kind", "count", "total ms", "share"):
        table.add_column(column, justify="left" if column.startswith(("instr", "opcode")) else "right")
    for row in measured.top:
        table.add_row(_t(row.name), _t(row.fusion_kind or row.opcode or "?"), str(row.count),
                      fmt.ms_column(row.total_us), f"{row.share:.1%}")
    return table


def _launches_table(thunk: ThunkCheck | None) -> Table | None:
    """Every launch of XLA's thunk sequence, with its grid, block and shared memory: joined with the HLO's launches,
    or as XLA lists them where the two do not join."""
    launches = thunk.launches if thunk else None
    if not launches:
        return None
    table = Table(title="launches (XLA thunk sequence: ground truth)", title_justify="left", show_edge=False)
    for column in ("#", "HLO instruction", "thunk", "kernel", "grid", "block", "shared mem"):
        table.add_column(column, justify="right" if column in ("#", "shared mem") else "left")
    for row in launches:
        instruction: str | None
        kernel: str | None
        if row.joined:
            index, instruction, kind, kernel = row.thunk_index, row.name, row.thunk_kind, row.kernel_name
        else:
            index, instruction, kind, kernel = row.index, row.name or row.hlo_op, row.kind, None
        grid, block = row.grid, row.block
        table.add_row(str(index), _t(instruction or ""), _t(kind), _t(kernel or ""),
                      "x".join(map(str, grid)) if grid else "", "x".join(map(str, block)) if block else "",
                      _bytes(row.shared_memory_bytes) if row.shared_memory_bytes is not None else "")
    return table


def _sources_table(sources: list[SourceKernels]) -> Table | None:
    if not sources:
        return None
    table = Table(title="kernels by source (metadata op_name)", title_justify="left", show_edge=False)
    table.add_column("source")
    table.add_column("kernels", justify="right")
    table.add_column("fusions", justify="right")
    for row in sources:
        table.add_row(_t(row.source), str(row.kernels), str(row.fusions))
    return table
