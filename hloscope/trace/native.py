"""The compiled loops over a trace's Events (hloscope/trace/_stats_native.c), or None where they were not built (pip
install without a C compiler) or HLOSCOPE_PURE_PYTHON=1 is set: then the Python code does everything.

Each function is the twin of the Python code it names, which stays the one definition of what it computes: it takes
the common cases and hands the rest back to that code, in order (tests/test_trace_stats_native.py compares both ways):

- `Checked(events, possible, finish, max_event_us, max_time_us)`: `load.CheckedEvents.__iter__`.
- `add_all(accumulator, events)`: `stats._Accumulator.add` for each event (an accumulator of exactly the class
  stats.py registers with `set_accumulator_class`).
- `dispatched_time(launch_corr, launch_dur, exec_corr)`: `stats._dispatched_time`.
- `place(exec_corr, exec_anchor, launch_corr, launch_start, launch_dur, window_start, window_end, host_windows,
  flow_base)`: `stats._place`.
- `step_figures(exec_start, exec_end, step_of_execution, exec_is_kernel, exec_category, steps, categories,
  collective_index)`: `stats._step_figures` (None for a NaN time: the Python code sorts those).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from hloscope.trace.model import CATEGORY_INDEX, COLLECTIVE, DEVICE_EXEC_KINDS, KERNEL, RUNTIME, STEP, Event


def _load() -> Any:
    if os.environ.get("HLOSCOPE_PURE_PYTHON"):
        return None
    try:
        module = importlib.import_module("hloscope.trace._stats_native")
    except ImportError:
        return None
    # raises if Event's slots are not the ones _stats_native.c reads
    module.setup(Event, DEVICE_EXEC_KINDS, KERNEL, RUNTIME, STEP, COLLECTIVE, CATEGORY_INDEX)
    return module


events_native = _load()
