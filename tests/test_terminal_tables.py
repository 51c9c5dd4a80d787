"""The terminal tables at 80 columns: `hlo stats` prints each module's optimized HLO first and cuts a long op_name in
the middle (its start and its end stay); `trace stats` of a CPU PyTorch trace leads with the framework ops and
leaves out the step columns that are zero in every step; an XLA trace whose top kernels are its top HLO instructions
prints one table; the totals say they cover every profiled step, the step table that it is per step."""

from __future__ import annotations

import io
import re

from rich.console import Console

from hloscope import api
from hloscope.render.trace_term import render_stats
from hloscope.trace.load import load_trace
from hloscope.trace.model import KERNEL, Event
from hloscope.trace.results import TraceRecord
from hloscope.trace.stats import summarize_events, trace_stats

AOT = "gpu_aot/vit_tiny_sm90_triton"


def test_hlo_stats_after_optimizations_first_and_op_names_cut_in_the_middle(real_file, cli_run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli_run("hlo", "stats", str(real_file(AOT)))
    assert code == 0, err
    stages = re.findall(r"jit_train_step  (\w+_optimizations)", out)
    assert stages == ["after_optimizations", "before_optimizations"]
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 80
    records = api.hlo_stats(real_file(AOT), xla_cost=False)
    after = next(r for r in records if r.stage == "after_optimizations")
    table = out[out.index("most FLOPs"):].split("━╇━", 1)[1]  # the first table's rows, in its order
    rows = [line.split("│") for line in table.splitlines()[1:] if "│" in line][:len(after.top_instructions)]
    assert len(rows) == len(after.top_instructions)
    for cells, row in zip(rows, after.top_instructions):
        shown, op_name = cells[-1].strip(), row.op_name
        head, cut, tail = shown.partition("…")
        assert cells[0].strip().rstrip("…") in row.name
        assert op_name.startswith(head) and op_name.endswith(tail) and (cut or shown == op_name)
        assert not cut or len(tail) > len(head)  # the informative end keeps most of the room


def _render(stats: TraceRecord, width: int = 80) -> str:
    buffer = io.StringIO()
    render_stats(Console(file=buffer, width=width, color_system=None, markup=False), stats)
    return buffer.getvalue()


def test_cpu_pytorch_trace_leads_with_its_ops(torch_cpu_trace):
    text = _render(trace_stats(load_trace(torch_cpu_trace[0])))
    assert text.index("framework ops") < text.index("Per step")
    header = next(line for line in text[text.index("Per step"):].splitlines() if "host ms" in line)
    assert "kernels" not in header and "busy" not in header and "idle" not in header
    assert "zero in every step, not shown: kernels" in " ".join(text.split())
    assert "device time" not in text  # no device: no line of zeros


def _xla_cpu_events() -> list[Event]:
    """XLA CPU ops: each execution is named after its HLO instruction, in two step markers."""
    events = [Event("ProfilerStep#1", 0.0, 100.0, "step", False, "thread 1", "host", step=1),
              Event("ProfilerStep#2", 100.0, 100.0, "step", False, "thread 1", "host", step=2)]
    for start in (0.0, 100.0):
        for offset, (op, duration) in enumerate((("dot.1", 30.0), ("fusion.2", 20.0), ("copy.3", 5.0))):
            events.append(Event(op, start + offset * 31.0, duration, KERNEL, True, "XLA Ops", "/host:CPU",
                                hlo_op=op, hlo_module="jit_train_step"))
    return events


def test_xla_kernels_that_are_hlo_instructions_print_once():
    stats = summarize_events(_xla_cpu_events())
    assert [r.name for r in stats.top] == [r.hlo_op for r in stats.hlo_ops]
    text = " ".join(_render(stats).split())  # titles wrap at 80 columns
    assert "Top 3 kernels / HLO instructions by device time over all 2 profiled steps" in text
    assert "kernels / ops by total device time" not in text
    assert "over all 2 profiled steps: device time 0.110 ms" in text
    assert "Per step" in text


def test_different_kernels_and_instructions_print_both():
    events = _xla_cpu_events()
    events[2] = Event("sgemm_kernel", events[2].start_us, events[2].dur_us, KERNEL, True, "XLA Ops", "/host:CPU",
                      hlo_op="dot.1", hlo_module="jit_train_step")
    text = " ".join(_render(summarize_events(events)).split())
    assert "kernels / ops by total device time over all 2 profiled steps" in text
    assert "Top 3 HLO instructions by device time" in text
