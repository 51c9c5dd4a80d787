"""Explain's op table: which ops' time changed most between a run and its baseline, each op paired with its
counterpart in the other run.

Where both runs recorded their optimized train-step HLO (XLA modes with --dump-hlo), ops are paired by `hloscope diff`'s
structural matching of the two programs (hloscope.diff.match: fingerprints, then greedy top-down / bottom-up), since
two frameworks never name the same op alike (jax's `.../intermediate/erfc` is torchax's `aten::gelu/erfc`). Each
executed instruction's time per step comes from the ledger (attributed as the time-weighted diff does,
hloscope.diff.timing.instruction_keys); a row gathers the matched pairs whose source ops (HLO `op_name` metadata,
layer indices folded) are the same on both sides, so that every instruction is in exactly one row. An instruction the
matching left without a counterpart is a one-sided row that says so. Executions of other programs, and runs without
HLO on both sides (PyTorch eager, inductor), are paired by op group name, and their rows say that too.

The programs are read only for the pairs explain compares, when it compares them (`ProgramGraph`): a summary keeps
where its modules are, not the modules, so that explaining thousands of runs keeps few graphs in memory.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING

from hloscope.diff.adapt import graph_from_modules
from hloscope.diff.inputs import pick_graphs
from hloscope.diff.match import match_graphs, source_group
from hloscope.diff.timing import SEP
from hloscope.errors import HloscopeError
from hloscope.explain.ledger import OpDelta, OpSeries, RunLedger, op_deltas, series_delta
from hloscope.hlo.load import load_modules

if TYPE_CHECKING:
    from hloscope.diff.graph import Graph, Node
    from hloscope.explain.summary import ModeSummary

STRUCTURE, NAME = "structure", "name"
_JIT_PREFIX = re.compile(r"^(?:jit\([^)]*\)/)+")
_INSTANCE_NUMBER = re.compile(r"([._]\d+)+$")
EXAMPLES = 5  # instruction names listed per side of a row


def instruction_group(op_name: str, instruction: str) -> str:
    """The op group of an instruction: its source op (HLO `op_name`, JAX's jit wrappers dropped, transformation
    wrappers kept, layer indices folded: `.../layer/*/attention/dot_general`); without metadata its name without the
    instance number (`fusion.12` -> `fusion`), as hloscope.trace.step_profile.default_op_group names executions."""
    if op_name:
        return source_group(_JIT_PREFIX.sub("", op_name))
    return _INSTANCE_NUMBER.sub("", instruction.split("(", 1)[0])[:120]


class ProgramGraph:
    """A run's optimized train-step modules as the structural matcher's graph, built when first asked for (`load`)
    and kept until `release`."""

    def __init__(self, load: Callable[[], Graph], modules: list[str]):
        self._load = load
        self._graph: Graph | None = None
        self.modules = modules  # module names, for the report

    def graph(self) -> Graph:
        if self._graph is None:
            self._graph = self._load()
        return self._graph

    def release(self) -> None:
        self._graph = None


def train_step_modules(loaded: list) -> list:
    """The optimized modules of a run's train step as `hloscope diff` compares them (hloscope.diff.inputs.pick_graphs:
    every module after optimizations, a name dumped twice counted once); [] when the run has none after
    optimizations (the profile executes those, not the modules before)."""
    if not any(m.stage == "after_optimizations" for m in loaded):
        return []
    return pick_graphs(loaded, "", None, "after")


def run_program(run_dir: str | Path, modules: list[str]) -> ProgramGraph:
    """The train-step graph of a run directory, read again from its HLO when a comparison needs it."""

    def load() -> Graph:
        return graph_from_modules([m.module for m in train_step_modules(load_modules(Path(run_dir)))])

    return ProgramGraph(load, modules)


def op_rows(run: ModeSummary, baseline: ModeSummary, practical_s: float, top: int | None = 15) -> list[OpDelta]:
    """The op table of `run` against `baseline` (largest change first, `top` rows; None: every row): paired by
    structure when both have a train-step program and per-instruction times, else by op group name."""
    slow, fast = run.ledger, baseline.ledger
    if slow is None or fast is None:  # the engine asks only for runs with a profile
        raise RuntimeError(f"no profile for the op table: {run.mode} against {baseline.mode}")
    if run.program is not None and baseline.program is not None and _placed(slow) and _placed(fast):
        try:
            graph_a, graph_b = run.program.graph(), baseline.program.graph()
        except HloscopeError:  # the HLO went unreadable since it was summarised: the names still pair what they can
            return op_deltas(slow, fast, practical_s, top)
        finally:
            if run is not baseline:
                run.program.release()  # a run is compared once; the baseline's graph serves every run
        return structural_deltas(slow, fast, graph_a, graph_b, practical_s, top)
    return op_deltas(slow, fast, practical_s, top)


def _placed(ledger: RunLedger) -> bool:
    """Whether the ledger has the time of executions that name an instruction of the train step."""
    return any(SEP in key for key in ledger.instructions)


@dataclass
class _Row:
    slow_name: str | None
    fast_name: str | None
    matched: bool
    matched_by: str
    slow_keys: list[str] = field(default_factory=list)
    fast_keys: list[str] = field(default_factory=list)
    stages: Counter = field(default_factory=Counter)


def structural_deltas(slow: RunLedger, fast: RunLedger, graph_a: Graph, graph_b: Graph, practical_s: float,
                      top: int | None = 15) -> list[OpDelta]:
    """The op table from the structural match of the two train-step graphs (`graph_a` is `slow`'s program). One row
    per pair of source ops whose instructions the matching paired (their times summed step by step), one per source
    op of instructions left without a counterpart, and executions of other programs paired by name."""
    matching = match_graphs(graph_a, graph_b)
    rows: dict[tuple, _Row] = {}

    def key_of(node: Node) -> str:
        return f"{node.graph}{SEP}{node.name or node.key}"

    def group_of(node: Node) -> str:
        return instruction_group(node.op_name, node.name or node.key)

    placed_a, placed_b = set(), set()
    for ka, kb in matching.pairs.items():
        na, nb = graph_a.nodes[ka], graph_b.nodes[kb]
        ia, ib = key_of(na), key_of(nb)
        if ia not in slow.instructions and ib not in fast.instructions:
            continue  # neither ran code in the profiled steps (bitcasts, tuples, parameters)
        ga, gb = group_of(na), group_of(nb)
        row = rows.setdefault(("pair", ga, gb), _Row(ga, gb, True, STRUCTURE))
        if ia in slow.instructions:
            row.slow_keys.append(ia)
            placed_a.add(ia)
        if ib in fast.instructions:
            row.fast_keys.append(ib)
            placed_b.add(ib)
        row.stages[matching.how.get(ka, "?")] += 1
    groups_a = {key_of(n): group_of(n) for n in graph_a.nodes.values()}
    groups_b = {key_of(n): group_of(n) for n in graph_b.nodes.values()}
    for key in slow.instructions:
        if SEP in key and key not in placed_a:
            group = groups_a.get(key) or instruction_group("", key.split(SEP, 1)[1])
            rows.setdefault(("a", group), _Row(group, None, False, STRUCTURE)).slow_keys.append(key)
    for key in fast.instructions:
        if SEP in key and key not in placed_b:
            group = groups_b.get(key) or instruction_group("", key.split(SEP, 1)[1])
            rows.setdefault(("b", group), _Row(None, group, False, STRUCTURE)).fast_keys.append(key)
    # executions naming no instruction of the train step (other programs): by name
    for key in set(slow.instructions) | set(fast.instructions):
        if SEP in key:
            continue
        in_a, in_b = key in slow.instructions, key in fast.instructions
        row = rows.setdefault(("name", key), _Row(key if in_a else None, key if in_b else None, in_a and in_b, NAME))
        if in_a:
            row.slow_keys.append(key)
        if in_b:
            row.fast_keys.append(key)
    out = [_delta(row, slow, fast, practical_s) for row in rows.values()]
    out.sort(key=lambda d: (-abs(d.seconds), d.group))
    return out if top is None else out[:top]


def _summed(ledger: RunLedger, keys: list[str]) -> OpSeries | None:
    """The series of several instructions as one: calls and seconds summed step by step; per call, the median over
    the steps of each step's seconds per call; the longest call of any."""
    series = [ledger.instructions[k] for k in keys if k in ledger.instructions]
    if not series:
        return None
    steps = len(ledger.step_s)
    calls = [sum(s.calls[i] for s in series) for i in range(steps)]
    seconds = [sum(s.seconds[i] for s in series) for i in range(steps)]
    per_call = [t / c for t, c in zip(seconds, calls) if c]
    return OpSeries(calls, seconds, median(per_call) if per_call else 0.0, max(s.per_call_max_s for s in series))


def _delta(row: _Row, slow: RunLedger, fast: RunLedger, practical_s: float) -> OpDelta:
    name = row.slow_name if row.slow_name is not None else row.fast_name
    if name is None:  # every row has at least one side
        raise RuntimeError("an op row with neither side")
    return series_delta(name, _summed(slow, row.slow_keys), _summed(fast, row.fast_keys), slow, fast, practical_s,
                        slow_name=row.slow_name, fast_name=row.fast_name, matched=row.matched,
                        matched_by=row.matched_by,
                        instructions={"slow": _examples(row.slow_keys), "fast": _examples(row.fast_keys)},
                        instruction_counts={"slow": len(row.slow_keys), "fast": len(row.fast_keys)},
                        match_stages=dict(row.stages))


def _examples(keys: list[str]) -> list[str]:
    return [k.split(SEP, 1)[-1] for k in keys[:EXAMPLES]]
