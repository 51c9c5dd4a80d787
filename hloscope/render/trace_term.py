"""Rich terminal tables for `hloscope trace stats` (rendering only: it reads the typed records of
hloscope/trace/results.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import UnsetType
from rich.console import Console
from rich.table import Table
from rich.text import Text

from hloscope.render import fmt

if TYPE_CHECKING:  # render/ imports no analysis: it reads the records' attributes
    from hloscope.trace.results import HostOps, ModeRow, RankRow, StepRow, TraceRecord

_NAME_WIDTH = 70


def _short(name: str, width: int = _NAME_WIDTH) -> str:
    return fmt.middle_ellipsis(name, width)


def _same_rows(stats: TraceRecord) -> bool:
    """Whether the top kernels are the top HLO instructions, row for row (XLA profiles name each op execution after
    its instruction): then one table says both."""
    top, ops = stats.top, stats.hlo_ops
    return bool(top) and len(top) == len(ops) and all(
        (t.name, t.count, t.total_us) == (o.hlo_op, o.count, o.total_us) for t, o in zip(top, ops))


def render_stats(console: Console, stats: TraceRecord) -> None:
    stats = fmt.printable(stats)  # names from the trace are shown escaped, never run as terminal control
    console.print(Text.assemble(
        (str(stats.file), "bold"),
        f"  ({stats.format}: {stats.events:,} events, {stats.kernels:,} kernels, "
        f"{stats.steps} steps, {stats.devices} device(s))"), highlight=False)
    device_time = stats.device_time_us
    # the totals cover the whole trace (every profiled step, and anything outside them); the step table is per step
    span = f"all {stats.steps} profiled steps" if stats.steps else "the whole trace"
    if device_time or stats.host_runtime_us:
        console.print(
            f"over {span}: device time {fmt.ms_column(device_time)} ms   host dispatch (launches of that work) "
            f"{fmt.ms_column(stats.host_launch_us)} ms   all host runtime API time "
            f"{fmt.ms_column(stats.host_runtime_us)} ms")
    if device_time:
        source = {"hlo": "from the run's HLO", "profiler": "by the profiler's HLO category"}.get(
            stats.category_source, "by kernel name")
        categories = Table(title=f"Device time by category over {span} ({source})", title_justify="left")
        categories.add_column("category")
        categories.add_column("ms", justify="right")
        categories.add_column("share", justify="right")
        for name, total in sorted(stats.categories.items(), key=lambda item: -item[1]):
            if total:
                categories.add_row(Text(str(name)), fmt.ms_column(total), f"{total / device_time:.1%}")
        console.print(categories)
        if not _same_rows(stats):
            top = Table(title=f"Top {len(stats.top)} kernels / ops by total device time over {span}",
                        title_justify="left")
            top.add_column("name", overflow="fold")
            top.add_column("count", justify="right")
            top.add_column("total ms", justify="right")
            top.add_column("share", justify="right")
            for row in stats.top:
                top.add_row(Text(_short(row.name)), f"{row.count:,}", fmt.ms_column(row.total_us), f"{row.share:.1%}")
            console.print(top)
    if stats.hlo_ops:
        what = "kernels / HLO instructions" if _same_rows(stats) else "HLO instructions"
        ops = Table(title=f"Top {len(stats.hlo_ops)} {what} by device time over {span}", title_justify="left")
        ops.add_column("HLO instruction", overflow="fold")
        ops.add_column("module", overflow="fold")
        ops.add_column("count", justify="right")
        ops.add_column("total ms", justify="right")
        ops.add_column("share", justify="right")
        for op in stats.hlo_ops:
            ops.add_row(Text(op.hlo_op), Text(op.hlo_module or ""), f"{op.count:,}", fmt.ms_column(op.total_us),
                        f"{op.share:.1%}")
        console.print(ops)
    if stats.host_ops:
        _host_ops(console, stats.host_ops)
    if stats.per_step:
        _steps(console, stats.per_step)
    early = stats.before_window
    if early.executions:
        console.print(
            f"launched before the profiling window (in no step above): {early.executions:,} device executions "
            f"({early.kernels:,} kernels), {fmt.ms_column(early.device_time_us)} ms of device time", highlight=False)
    console.print()


def _steps(console: Console, per_step: list[StepRow]) -> None:
    """One row per step; a column that is zero in every step (a CPU run has no kernels, no device time) is left
    out, and said so below the table."""
    columns: dict[str, Callable[[StepRow], str]] = {
        "host ms": lambda step: fmt.ms_column(step.host_duration_us),
        "kernels": lambda step: f"{step.kernels:,}",
        "copy/transpose ops": lambda step: f"{step.executions_by_category.get('copy/transpose', 0):,}",
        "device busy ms": lambda step: fmt.ms_column(step.device_busy_us),
        "device idle ms": lambda step: fmt.ms_column(step.device_idle_us),
        "idle gaps": lambda step: f"{step.idle_gaps:,}",
        "launch ms": lambda step: fmt.ms_column(step.host_runtime_us),
        "collective ms": lambda step: fmt.ms_column(step.collective_us),
        "exposed ms": lambda step: fmt.ms_column(step.collective_exposed_us),
    }
    zero = {"0", "0.000"}
    shown = [name for name, cell in columns.items() if any(cell(step) not in zero for step in per_step)]
    table = Table(title="Per step", title_justify="left")
    for column in ("step", *shown):
        table.add_column(column, justify="right")
    for step in per_step:
        table.add_row(str(step.step), *(columns[name](step) for name in shown))
    console.print(table)
    left_out = [name.removesuffix(" ms") for name in columns if name not in shown]
    if left_out:
        console.print(f"zero in every step, not shown: {', '.join(left_out)}", highlight=False, style="dim")


def _host_ops(console: Console, host: HostOps) -> None:
    if not host.ops:
        return
    parts = {} if isinstance(host.parts_us, UnsetType) else host.parts_us
    steps_used = [] if isinstance(host.steps_used, UnsetType) else host.steps_used
    step_us = 0.0 if isinstance(host.step_us, UnsetType) else host.step_us
    dropped = {} if isinstance(host.dropped, UnsetType) else host.dropped
    console.print(
        f"no device executions: the host did the work. Median step {fmt.ms_column(step_us)} ms over steps "
        f"{', '.join(map(str, steps_used))} ({len(dropped)} left out: warm-up, outliers): "
        + ", ".join(f"{fmt.ms_column(us)} ms {node.removeprefix('host:')}"
                    for node, us in sorted(parts.items(), key=lambda kv: -kv[1])),
        highlight=False, markup=False)
    ops = Table(title=f"Top {len(host.ops)} framework ops (top level) by time per step (medians)",
                title_justify="left")
    for column in ("op", "calls/step", "per call ms", "longest ms", "ms/step", "share"):
        ops.add_column(column, justify="left" if column == "op" else "right", overflow="fold")
    for row in host.ops:
        ops.add_row(Text(_short(row.name)), f"{row.calls_per_step:g}", fmt.ms_column(row.per_call_us),
                    fmt.ms_column(row.max_call_us), fmt.ms_column(row.us_per_step), f"{row.share_of_step:.1%}")
    console.print(ops)


def render_modes(console: Console, rows: list[ModeRow]) -> None:
    """The modes of a comparison side by side: separate runs, so no rank or slowest-rank view across them."""
    rows = fmt.printable(rows)
    table = Table(title=f"Modes: {len(rows)} (separate runs; medians over each mode's profiled steps)",
                  title_justify="left")
    for column in ("mode", "traces", "steps", "kernels", "device ms", "launch ms", "step ms", "busy/step ms"):
        table.add_column(column, justify="left" if column == "mode" else "right", overflow="fold")
    for row in rows:
        step, busy = row.median_step_us, row.median_step_busy_us
        table.add_row(Text(row.mode), str(row.traces), str(row.steps), f"{row.kernels:,}",
                      fmt.ms_column(row.device_time_us), fmt.ms_column(row.host_launch_us),
                      "-" if step is None else fmt.ms_column(step), "-" if busy is None else fmt.ms_column(busy))
    console.print(table)


def render_ranks(console: Console, rows: list[RankRow], label: str = "") -> None:
    rows = fmt.printable(rows)
    table = Table(title=f"Per rank{label}", title_justify="left")
    for column in ("rank", "steps", "kernels", "device ms", "launch ms", "busy/step ms", "pre-window ms",
                   "file"):
        table.add_column(column, justify="left" if column == "file" else "right", overflow="fold")
    for row in rows:
        busy = row.median_step_busy_us
        table.add_row(str(row.rank), str(row.steps), f"{row.kernels:,}", fmt.ms_column(row.device_time_us),
                      fmt.ms_column(row.host_launch_us), "-" if busy is None else fmt.ms_column(busy),
                      fmt.ms_column(row.before_window_us), Text(Path(row.file).name))
    console.print(table)
