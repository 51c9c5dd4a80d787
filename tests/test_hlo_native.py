"""The compiled fast paths of the HLO parser (hloscope/hlo/_native.c) against the Python code they speed up.

The Python parser, validation and cost walk are the reference: every file is parsed, validated and costed both ways,
and each instruction (every slot: name, shape, opcode, text, positions, operands, called computations), each cost
(every figure, with its type) and each error (message, line, column) must be the same. Mutated real lines check that the compiled code never takes text the
Python code would read differently, or refuse."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from helpers import FIXTURES, hlo_fixture_files, needs_fixtures, python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hloscope.errors import ParseError
from hloscope.hlo import native as native_module
from hloscope.hlo import parser as parser_module
from hloscope.hlo.cost import Cost, CostAnalysis
from hloscope.hlo.parser import parse_hlo_file, parse_hlo_text

NATIVE = native_module.native
# Skipped on a machine without the extension (no compiler), failed where it is required (.ci/run).
needs_native = pytest.mark.skipif(NATIVE is None and not os.environ.get("HLOSCOPE_REQUIRE_NATIVE"),
                                  reason="the C extension is not built here (no compiler)")
DATA = Path(__file__).parent / "data"


def _snapshot(modules) -> list:
    """Everything the parser and validation built, instruction by instruction."""
    out = []
    for module in modules:
        module.validate()
        comps = []
        for comp in module.computations:
            instructions = [
                (i.name, i.shape_text, i.opcode, i.text, i.pos, i.lineno, i._end, i.computation.name,
                 tuple(o.name for o in i.operands), tuple(c.name for c in i.called_computations),
                 i._attrs is not None)
                for i in comp.instructions
            ]
            comps.append((comp.name, comp.is_entry, comp.root.name, comp.lineno, comp.signature, comp.renames,
                          instructions))
        out.append((module.name, module.header, module.lineno, module.end_lineno, module.entry.name,
                    module.async_chains, module.stack_tables, comps))
    return out


def _costs(modules) -> list:
    """Every instruction's cost and every total as the cost walk makes them (repr: an int stays an int)."""
    out = []
    for module in modules:
        analysis = CostAnalysis(module)
        try:
            total = analysis.module_cost()
        except ParseError as error:
            out.append(("error", str(error)))
            continue
        out.append((repr(total), sorted((i.computation.name, i.name, repr(c)) for i, c in analysis.costs.items()),
                    analysis.uncosted))
    return out


def _outcome(parse, *args):
    try:
        modules = parse(*args)
        return _snapshot(modules), _costs(modules)
    except ParseError as error:
        return ("error", str(error))


def _both_ways(monkeypatch, parse, *args):
    compiled = _outcome(parse, *args)
    with monkeypatch.context() as patch:
        patch.setattr(parser_module, "native", None)
        patch.setattr(native_module, "native", None)
        python = _outcome(parse, *args)
    return compiled, python


def _hlo_files() -> list[Path]:
    """Every text file of the fixtures and of tests/data that may hold HLO (those that do not are compared too: the
    same error both ways)."""
    files = []
    for root in (FIXTURES, DATA):
        if root.is_dir():
            files += [path for path in sorted(root.rglob("*")) if path.is_file() and path.suffix in (".hlo", ".txt")
                      and path.stat().st_size < 20_000_000]
    return files


@needs_native
@pytest.mark.parametrize("path", _hlo_files(), ids=lambda p: str(p.relative_to(FIXTURES if FIXTURES in p.parents else DATA)))
def test_every_file_parses_the_same_both_ways(monkeypatch, path):
    compiled, python = _both_ways(monkeypatch, parse_hlo_file, path)
    assert compiled == python


@needs_fixtures
def test_the_files_compared_include_the_real_fixtures():
    assert len(hlo_fixture_files()) >= 16
    assert len(_hlo_files()) >= 60


# Lines the compiled code must hand back, or read exactly as Python does: operand lists, attribute tails, strings,
# brackets, whitespace Python's regular expressions count as spaces, names XLA's printer never writes.
TRICKY_LINES = [
    "  %s = f32[2]{0} add(%a, %b)",
    "  %s = f32[2]{0} add(%a, b)",
    "  %s = f32[2]{0} add(a, %b)",
    "  %s = f32[2]{0} add(a,b)",
    "  %s = f32[2]{0} add(a, , b)",
    "  %s = f32[2]{0} add(a, b, )",
    "  %s = f32[2]{0} add(%%a, b)",
    "  %s = f32[2]{0} add(a, undefined)",
    "  %s = f32[2]{0} add(a, b), metadata={op_name=\"x\\\"y\" source_file=\"f.py\" source_line=3}",
    "  %s = f32[2]{0} add(a, b), metadata={op_name=\"unterminated}",
    "  %s = f32[2]{0} add(a, b) // a comment",
    "  %s = f32[2]{0} add(a, b) /* a comment */",
    "  %s = f32[2]{0} add(a, b),",
    "  %s = f32[2]{0} add(a, b), x=",
    "  %s = f32[2]{0} add(a, b), x= ,y=1",
    "  %s = f32[2]{0} add(a, b), x=)",
    "  %s = f32[2]{0} add(a, b), x={{{{{{1}}}}}}",
    "  %s = f32[2]{0} add(a, b), x={{{{{1}}}}}",
    "  %s = f32[2]{0} add(a, b), x={1)",
    "  %s = f32[2]{0} add(a, b)\x1c, x=1",
    "  %s = f32[2]{0} add(a, b),\x1fx=1",
    "  %s = f32[2]{0} add(a, b), control-predecessors={a}",
    "  %s = f32[2]{0} add(a, b), control-predecessors={nope}",
    "  %s = f32[2]{0} add(a, b), calls=%sum",
    "  %s = f32[2]{0} add(a, b), calls=sum, x=1",
    "  %s = f32[2]{0} add(a, b), calls=undefined",
    "  %s = f32[2]{0} add(a, b), calls=sum, to_apply=sum",
    "  %s = f32[2]{0} add(a, b), calls={sum}",
    "  %s = f32[2]{0} add(a, b), calls=sum x",
    "  %s = f32[2]{0} add(a, b), callsx=sum",
    "  %s = f32[2]{0} add(a, b), select=sum",
    "  %s = f32[2]{0} add(a, b), selects=sum",
    "  %s = f32[2]{0} add(a, b), to_apply =  sum ",
    "  %s = f32[2]{0} add(a, b), sharding={devices=[2]0,1}, frontend_attributes={a=\"b\"}",
    "  %s = f32[2]{0} add(a, b), x=\"a\\",
    "  %s = f32[2]{0} add(a, (b))",
    "  %s = f32[2]{0} add(a, f32[2]{0} b)",
    "  %s = f32[2]{0} add(a, b",
    "  %s = f32[2]{0} frobnicate(a, b)",
    "  %s = f32[2]{0} reduce-scatter-start(a, b)",
    "  ROOT %s = f32[2]{0} add(a, b)",
    "  ROOT  %s = f32[2]{0} add(a, b)",
    "  ROOT = f32[2]{0} add(a, b)",
    "\t%s = f32[2]{0} add(a, b)",
    "  %s  = f32[2]{0} add(a, b)",
    "  %s = f32[2]{0}  add(a, b)",
    "  %s = f32[2] {0} add(a, b)",
    "  %s = (f32[2]{0}, f32[2]{0}) tuple(a, b)",
    "  %s = f32[2]{0} add(a, b), x=1, x=2",
    "  %s = f32[2]{0} parameter(2)",
    "  %s = f32[2]{0} parameter(0)",
    "  %s = f32[2]{0} parameter( 2)",
    "  %s = f32[2]{0} parameter(02)",
    "  %s = f32[2]{0} parameter(99999999999999999999)",
    "  %s = f32[2]{0} constant({1, 2})",
    "  %s = f32[2]{0} constant({1, 2}), x=\"(\"",
    "  %s = f32[2]{0} constant(\"(\")",
    "  %s = f32[2]{0} après(a, b)",
    "  %é = f32[2]{0} add(a, b)",
    "  %s = f32[2]{0} add(a, b), x=\"é\"",
    "  %s = f32[2]{0} send(a, b)",
    "  %s = f32[2]{0} add(a, b), x={",
    "  %s = f32[2]{0} add(a, b), x={\n    1}",
    "  %s = f32[2]{0} add(a,\n    b)",
    "  %s = f32[2]{0} add(a, b), dimensions={0}, to_apply=sum, metadata={op_name=\"jit(f)/add\"}",
    # a comment opened at the end of a line the compiled scan would take: the next line is inside it, no instruction
    "  %s = f32[2]{0} add(a, b) /* from here\n  z = f32[2]{0} add(a, b)\n  */",
]


def _module_with(line: str, name: str = "s") -> str:
    body = line.replace("%s", f"%{name}") if "%s" in line else line
    return (
        "HloModule m\n\n"
        "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT r = f32[] add(x, y)\n}\n\n"
        "ENTRY main {\n  a = f32[2]{0} parameter(0)\n  b = f32[2]{0} parameter(1)\n"
        f"{body}\n"
        "  ROOT t = (f32[2]{0}, f32[2]{0}) tuple(a, b)\n}\n"
    )


@needs_native
@pytest.mark.parametrize("line", TRICKY_LINES)
def test_tricky_lines_read_the_same_both_ways(monkeypatch, line):
    compiled, python = _both_ways(monkeypatch, parse_hlo_text, _module_with(line))
    assert compiled == python


# Cycles XLA's parser refuses, each on a line the compiled scan takes: an instruction its own operand, a name defined
# twice, a control edge to itself or to a later instruction, a call of the computation being read.
CYCLE_LINES = {
    "  %s = f32[2]{0} add(%s, b)": "its own operand",
    "  %s = f32[2]{0} add(s, b)": "its own operand",
    "  a = f32[2]{0} add(a, b)": "defined twice",
    "  b = f32[2]{0} parameter(2)": "defined twice",
    "  %s = f32[2]{0} add(a, b), control-predecessors={%s}": "not defined before it",
    "  %s = f32[2]{0} add(a, b), control-predecessors={t}": "not defined before it",
    "  %s = f32[2]{0} map(a, b), dimensions={0}, to_apply=main": "calls itself",
}


@needs_native
@pytest.mark.parametrize("line", list(CYCLE_LINES))
def test_cycles_are_refused_the_same_both_ways(monkeypatch, line):
    compiled, python = _both_ways(monkeypatch, parse_hlo_text, _module_with(line))
    assert compiled == python
    assert compiled[0] == "error" and CYCLE_LINES[line] in compiled[1], compiled


@needs_native
def test_the_compiled_paths_take_the_common_lines():
    """Not a no-op: the compiled scan makes the plain instructions, and validation resolves their operands."""
    text = _module_with("  %s = f32[2]{0} add(a, b), metadata={op_name=\"x\"}")
    module = parse_hlo_text(text)[0]
    main = module.entry
    resolved = NATIVE.resolve_plain(main.instructions, 0, {i.name: i for i in main.instructions},
                                    {i.shape_text for i in main.instructions}, module.computations_by_name, ())
    taken = [i.name for i in main.instructions[:resolved]]
    assert taken == ["a", "b", "s", "t"]
    assert [o.name for o in main.instruction("s")._operands] == ["a", "b"]


@needs_native
def test_the_compiled_cost_walk_takes_elementwise_instructions():
    module = parse_hlo_text(_module_with("  %s = f32[2]{0} add(a, b)"))[0]
    module.validate()
    main = module.entry
    analysis = CostAnalysis(module)
    facts = {i.shape_text: analysis._facts(i) for i in main.instructions}
    sums = [0.0] * 5
    costs: dict = {}
    taken = NATIVE.cost_common(main.instructions, 0, costs, facts, {"parameter"}, {"add"}, set(), set(), Cost(), sums)
    assert taken == 3  # a, b, s; the tuple is handed back
    assert repr(costs[main.instruction("s")]) == "Cost(flops=2, transcendentals=0.0, bytes_accessed=24, library_flops=0.0, library_bytes=0.0)"
    assert sums == [2.0, 0.0, 24.0, 0.0, 0.0]
    # a cost known already is added as the Python loop adds it: all five figures, ints and floats, in order
    costs[main.instruction("s")] = Cost(1, 2.5, 3, 4.0, 2**60 + 1)
    sums = [0.5, 0.0, 0.0, 0.0, 0.0]
    assert NATIVE.cost_common(main.instructions, 2, costs, facts, set(), set(), set(), set(), Cost(), sums) == 3
    assert sums == [0.5 + 1, 2.5, 3.0, 4.0, float(2**60 + 1)]
    # an opcode that costs its default bytes only: bytes, no FLOPs, as Cost(bytes_accessed=...) makes it
    del costs[main.instruction("s")]
    assert NATIVE.cost_common(main.instructions, 2, costs, facts, set(), set(), set(), {"add"}, Cost(), [0.0] * 5) == 3
    assert repr(costs[main.instruction("s")]) == repr(Cost(bytes_accessed=24))


SEED_FILES = [
    "openxla_xla/gpu_tests/kernel_reuse.hlo",
    "pytorch_xla/keep_rolled_script/log/module_0002.jit_f.after_optimizations.txt",
    "gpu_aot/mlp_sm90_triton/module_0001.jit_train_step.sm_9.0a_gpu_after_optimizations.txt",
    "openxla_xla/gpu_tests/single_instruction.hlo",
]


def _seed_texts() -> list[str]:
    texts = [(FIXTURES / relative).read_text() for relative in SEED_FILES if (FIXTURES / relative).is_file()]
    return texts or [_module_with(line) for line in TRICKY_LINES]


SEED_TEXTS = _seed_texts()
NOISE = [*'(){}[]",=%/ \t\\x\x1c.-_0:;', ", ", ", %", "//", "/*", "*/", "ROOT ", "\n", "é"]


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_mutated_real_modules_read_the_same_both_ways(monkeypatch, seed, edits):
    """A real module with a few characters of its instruction lines inserted, deleted or replaced: the same module
    or the same error both ways (most mutations keep the module valid, so the compiled code's taking is tested)."""
    rng = random.Random(seed)
    lines = rng.choice(SEED_TEXTS).split("\n")
    instruction_lines = [k for k, line in enumerate(lines) if " = " in line and "(" in line] or [0]
    for _ in range(edits):
        k = rng.choice(instruction_lines)
        line = lines[k]
        at = rng.randrange(len(line) + 1)
        action = rng.randrange(3)
        if action == 0:
            line = line[:at] + rng.choice(NOISE) + line[at:]
        elif action == 1:
            line = line[:at] + line[at + 1:]
        else:
            line = line[:at] + rng.choice(NOISE) + line[at + 1:]
        lines[k] = line
    compiled, python = _both_ways(monkeypatch, parse_hlo_text, "\n".join(lines))
    assert compiled == python


@needs_native
@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=list('(){}[]"\\\nab ,=é'), max_size=24))
def test_open_brackets_counts_as_the_python_code(text):
    assert NATIVE.open_brackets(text) == parser_module.open_brackets_python(text)


HOSTILE_CALLS = r'''
from hloscope.hlo import native
from hloscope.hlo.cost import Cost
from hloscope.hlo.model import HloInstruction
from hloscope.hlo.parser import _PLAIN_OPCODES, parse_hlo_text

N = native.native

def refused(call, kind):
    try:
        call()
    except kind:
        return
    raise AssertionError(f"not refused: {call}")

# a list is no iterator: refused, not read through a missing tp_iternext
refused(lambda: N.scan_instructions(["a"], 0, None, [], {}, _PLAIN_OPCODES, {}), TypeError)
# negative indexes: refused, not read before the list
refused(lambda: N.resolve_plain([], -10**8, {}, set(), {}, ()), ValueError)
refused(lambda: N.cost_common([], -10**8, {}, {}, set(), set(), set(), set(), Cost(), [0.0] * 5), ValueError)

module = parse_hlo_text("HloModule m\nENTRY e {\n  a = f32[2]{0} parameter(0)\n  ROOT n = f32[2]{0} negate(a)\n}\n")[0]
entry = module.entry
a, n = entry.instructions

# an opcode that is not a str: handed back with no exception left set
n.opcode = 5
assert N.resolve_plain([n], 0, {"a": a}, {"f32[2]{0}"}, {}, ()) == 0
n.opcode = "negate"
module.validate()

# a str subclass whose hash runs Python code (here: emptying the list being walked): handed back, no crash
instructions = [a, n]
class Evil(str):
    def __hash__(self):
        instructions.clear()
        return str.__hash__(self)
n.opcode = Evil("negate")
facts = {"f32[2]{0}": (8, 8, 2)}
assert N.cost_common(instructions, 1, {}, facts, set(), {"negate"}, set(), set(), Cost(), [0.0] * 5) == 1
n.opcode = "negate"

# a refused bind() keeps the classes bound before it
class Bad:
    __slots__ = ("flops", "library_bytes", "library_flops", "transcendentals", "zzz")
refused(lambda: N.bind(HloInstruction, Bad), TypeError)
costs = {}
assert N.cost_common([a, n], 0, costs, facts, {"parameter"}, {"negate"}, set(), set(), Cost(), [0.0] * 5) == 2
assert repr(costs[n]) == repr(Cost(2, 0.0, 16)), costs[n]
print("ok")
'''


@needs_native
def test_hostile_direct_calls_are_refused_or_handed_back_without_a_crash():
    """Arguments the parser never passes, given to the extension directly: each is refused or handed back; run in a
    child process, so that a crash fails this test and not the whole run."""
    done = python("-c", HOSTILE_CALLS, timeout=120)
    assert done.code == 0 and done.stdout.strip() == "ok", (done.code, done.stderr[-2000:])
