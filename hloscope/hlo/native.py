"""The parser's compiled fast paths (`_native.c`), or None where the extension was not built.

Each compiled function takes only the common case and hands everything else back to the Python code, which stays the
one definition of what the text means: a line or instruction is processed exactly as the Python code would process it,
or not at all (tests/test_hlo_native.py parses every fixture both ways and compares every instruction).

- `bind(HloInstruction, Cost)`: the two classes whose objects the functions below read and make (native.py binds them
  at import; a class whose slots differ from the ones _native.c knows is refused).
- `scan_instructions(lines, lineno, comp, instructions, shared, plain, parameters)`: reads lines from the iterator
  `lines` (`lineno`: the number of the last line read) while each is an instruction the parser's one-regex path takes
  with nothing more to do (a plain opcode or a parameter with a new number, no nested operand, not continued on the
  next line; a first ROOT sets the computation's root), appending an HloInstruction to `instructions` as
  parser._Parser does. Returns (the first line it did not take, its number), or (None, the last line's number) at the
  end.
- `resolve_plain(instructions, index, by_name, parsed, computations, no_calls)`: from `index`, resolves the operands
  (and the one called computation) of each instruction that HloModule.validate's fast path takes (a line ending at its
  operand list, or a plain attribute tail) and whose shape and operands' shapes are already in `parsed`; returns the
  index of the first instruction it did not take.
- `open_brackets(text)`: parser.open_brackets_python in one pass.
- `cost_common(instructions, index, costs, facts_by_text, zero_bytes, elementwise, transcendental, default_only, zero,
  sums)`: CostAnalysis.computation_cost's loop from `index` for instructions whose cost is known, that cost nothing,
  that are elementwise or that cost their default bytes only (cost.DEFAULT_BYTES_ONLY), with shapes already in
  `facts_by_text`; adds each cost to the five running `sums` (a list of floats, updated in place) in the order and
  with the conversions of the Python loop. Returns the index of the first instruction it did not take.

HLOSCOPE_PURE_PYTHON=1 in the environment turns them off (the Python path alone, as on a machine without a compiler).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from hloscope.hlo.cost import Cost
from hloscope.hlo.model import HloInstruction


def _load() -> ModuleType | None:
    if os.environ.get("HLOSCOPE_PURE_PYTHON"):
        return None
    try:
        module = importlib.import_module("hloscope.hlo._native")
    except ImportError:  # installed without a C compiler: the Python path does everything
        return None

    module.bind(HloInstruction, Cost)  # raises if their slots are not the ones _native.c reads and writes
    return module


native = _load()
