"""Explain's op table pairs ops across frameworks by `hloscope diff`'s structural match of the two programs, and diff
sorts device time into categories as `trace stats` does.

First on two small hand-written HLO modules (one op named three ways) with synthetic ledgers; then on real runs of
the tiny ViT under jax and torchax (--dump-hlo --profile), made once for the module (or the folder at
$HLOSCOPE_TEST_OPS_RUNS holding jax/ and torchax/ run directories)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import hloscope

from hloscope.diff.adapt import graph_from_modules
from hloscope.diff.inputs import load_side
from hloscope.diff.match import match_graphs, source_group
from hloscope.diff.timing import SEP
from hloscope.explain.collect import summarize_run
from hloscope.explain.engine import explain
from hloscope.explain.ledger import OpFigures, OpSeries, RunLedger
from hloscope.explain.ops import NAME, STRUCTURE, ProgramGraph, op_rows, structural_deltas
from hloscope.explain.replicates import merge_ledgers
from hloscope.explain.report import OpChange
from hloscope.explain.summary import ModeSummary
from hloscope.hlo.parser import parse_hlo_text
from hloscope.render import explain_md
from hloscope.render.explain_views import op_label

_BODIES = """
gelu_body {
  p0 = f32[8,16]{1,0} parameter(0)
  erf.1 = f32[8,16]{1,0} erf(p0)
  ROOT multiply.1 = f32[8,16]{1,0} multiply(p0, erf.1)
}

max_body {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT maximum.1 = f32[] maximum(a, b)
}
"""
# jax-like: the dense layer's dot, the GELU fusion, the softmax's max.
JAX_HLO = """HloModule jit_train_step
""" + _BODIES + """
ENTRY main {
  x = f32[8,16]{1,0} parameter(0)
  w = f32[16,16]{1,0} parameter(1)
  dot.3 = f32[8,16]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(train_step)/ViT/mlp/dense/dot_general"}
  select_fusion = f32[8,16]{1,0} fusion(dot.3), kind=kLoop, calls=gelu_body, metadata={op_name="jit(train_step)/ViT/mlp/gelu/erf"}
  constant.2 = f32[] constant(-inf)
  ROOT reduce.7 = f32[8]{0} reduce(select_fusion, constant.2), dimensions={1}, to_apply=max_body, metadata={op_name="jit(train_step)/ViT/attention/softmax/reduce_max"}
}
"""
# torchax-like: the same work under other names, and a transposed weight copied first (work jax does not do).
TORCHAX_HLO = """HloModule jit_train_step
""" + _BODIES + """
ENTRY main {
  x.1 = f32[8,16]{1,0} parameter(0)
  w.1 = f32[16,16]{1,0} parameter(1)
  transpose.2 = f32[16,16]{0,1} transpose(w.1), dimensions={1,0}
  copy.5 = f32[16,16]{1,0} copy(transpose.2)
  dot.9 = f32[8,16]{1,0} dot(x.1, copy.5), lhs_contracting_dims={1}, rhs_contracting_dims={1}, metadata={op_name="aten::linear/dot_general"}
  erf_multiply_fusion.4 = f32[8,16]{1,0} fusion(dot.9), kind=kLoop, calls=gelu_body, metadata={op_name="aten::gelu/erf"}
  constant.8 = f32[] constant(-inf)
  ROOT reduce.1 = f32[8]{0} reduce(erf_multiply_fusion.4, constant.8), dimensions={1}, to_apply=max_body, metadata={op_name="aten::_softmax/reduce_max"}
}
"""
STEPS = 5


def _series(ms: float, calls: int = 1, wobble: float = 0.01) -> OpSeries:
    seconds = [ms * 1e-3 * (1 + wobble * (i - 2)) for i in range(STEPS)]
    return OpSeries([calls] * STEPS, seconds, ms * 1e-3 / calls, 1.2 * ms * 1e-3 / calls)


def _ledger(instructions: dict[str, OpSeries]) -> RunLedger:
    step_s = [0.01] * STEPS
    return RunLedger({"device:fusion/elementwise": step_s}, {}, step_s, STEPS + 1, {}, True, step_s, instructions)


def _key(name: str) -> str:
    return f"jit_train_step{SEP}{name}"


JAX_TIMES = {_key("dot.3"): _series(0.30), _key("select_fusion"): _series(0.10), _key("reduce.7"): _series(0.05),
             "infeed": _series(0.02)}  # an execution of another program: paired by name
TORCHAX_TIMES = {_key("dot.9"): _series(0.31), _key("erf_multiply_fusion.4"): _series(0.40),
                 _key("reduce.1"): _series(0.06), _key("transpose.2"): _series(0.08), _key("copy.5"): _series(0.07),
                 "infeed": _series(0.02)}


def _graph(text: str):
    return graph_from_modules(parse_hlo_text(text))


def _by_names(rows) -> dict[tuple, object]:
    return {(r.slow_name, r.fast_name): r for r in rows}


def test_hand_written_programs_pair_by_structure_not_by_name():
    rows = structural_deltas(_ledger(TORCHAX_TIMES), _ledger(JAX_TIMES), _graph(TORCHAX_HLO), _graph(JAX_HLO), 1e-6,
                             top=None)
    by_names = _by_names(rows)
    gelu = by_names[("aten::gelu/erf", "ViT/mlp/gelu/erf")]
    assert gelu.matched and gelu.matched_by == STRUCTURE
    assert gelu.instructions == {"slow": ["erf_multiply_fusion.4"], "fast": ["select_fusion"]}
    assert gelu.slow.seconds == pytest.approx(0.40e-3) and gelu.fast.seconds == pytest.approx(0.10e-3)
    assert gelu.seconds == pytest.approx(0.30e-3) and gelu.significant  # 5 steps a side, clearly apart
    dot = by_names[("aten::linear/dot_general", "ViT/mlp/dense/dot_general")]
    softmax = by_names[("aten::_softmax/reduce_max", "ViT/attention/softmax/reduce_max")]
    assert dot.matched and softmax.matched and dot.fast.calls == 1 and softmax.slow.calls == 1
    # torchax's transpose and copy of the weight have no counterpart: one-sided rows, never a silent zero
    for name in ("transpose", "copy"):
        row = by_names[(name, None)]
        assert not row.matched and row.matched_by == STRUCTURE and row.fast.calls == 0
    other = by_names[("infeed", "infeed")]
    assert other.matched and other.matched_by == NAME
    # every executed instruction is in exactly one row
    for side, times in (("slow", TORCHAX_TIMES), ("fast", JAX_TIMES)):
        assert sum(r.instruction_counts[side] for r in rows) == len(times)
    assert len(by_names) == len(rows) == 6
    assert rows == sorted(rows, key=lambda r: -abs(r.seconds))


def test_without_a_program_on_both_sides_ops_pair_by_name():
    """A run with no optimized HLO (PyTorch eager) has only op group names: rows say they were matched by name, and
    a group only one run has says so."""
    eager = ModeSummary(mode="pytorch", ledger=RunLedger({}, {"aten::mm": _series(0.5), "aten::gelu": _series(0.2)},
                                                        [0.01] * STEPS, STEPS, {}, False))
    compiled = ModeSummary(mode="pytorch+compile", ledger=RunLedger({}, {"aten::mm": _series(0.4)}, [0.01] * STEPS,
                                                                    STEPS, {}, False))
    rows = _by_names(op_rows(eager, compiled, 1e-6))
    assert rows[("aten::mm", "aten::mm")].matched and rows[("aten::mm", "aten::mm")].matched_by == NAME
    gelu = rows[("aten::gelu", None)]
    assert not gelu.matched and gelu.matched_by == NAME and gelu.fast.calls == 0


def test_programs_are_read_when_compared_and_the_run_s_released():
    """The structural pairing runs from the summaries explain compares: each graph is built on demand; the run's is
    let go after its comparison, the baseline's kept for the next run."""
    loads = []

    def program(text: str) -> ProgramGraph:
        return ProgramGraph(lambda: loads.append(text) or _graph(text), ["jit_train_step"])

    run = ModeSummary(mode="torchax", ledger=_ledger(TORCHAX_TIMES), program=program(TORCHAX_HLO))
    base = ModeSummary(mode="jax", ledger=_ledger(JAX_TIMES), program=program(JAX_HLO))
    rows = op_rows(run, base, 1e-6, top=3)
    assert len(rows) == 3 and all(r.matched_by == STRUCTURE for r in rows)
    assert run.program is not None and base.program is not None
    assert run.program._graph is None and base.program._graph is not None
    op_rows(run, base, 1e-6)
    assert loads.count(JAX_HLO) == 1 and loads.count(TORCHAX_HLO) == 2
    assert run.to_dict()["program"] == {"modules": ["jit_train_step"]}


def test_pooled_processes_keep_their_instructions():
    """`compare --repeats`: the processes of one configuration pooled into one ledger still pair by structure."""
    pooled = merge_ledgers([_ledger(TORCHAX_TIMES), _ledger(TORCHAX_TIMES)])
    assert set(pooled.instructions) == set(TORCHAX_TIMES)
    assert pooled.instructions[_key("dot.9")].seconds == 2 * TORCHAX_TIMES[_key("dot.9")].seconds
    rows = structural_deltas(pooled, _ledger(JAX_TIMES), _graph(TORCHAX_HLO), _graph(JAX_HLO), 1e-6, top=None)
    assert _by_names(rows)[("aten::gelu/erf", "ViT/mlp/gelu/erf")].matched


def test_labels_name_both_sides_or_the_missing_one():
    figures = OpFigures(1, 1e-4, 1e-4, 1e-4)
    zero = OpFigures(0, 0.0, None, None)
    paired = OpChange("aten::gelu/erf", figures, figures, 0.0, None, False, run_name="aten::gelu/erf",
                      baseline_name="ViT/mlp/gelu/erf", matched_by=STRUCTURE)
    assert op_label(paired, "torchax", "jax") == "aten::gelu/erf ↔ ViT/mlp/gelu/erf"
    only = OpChange("transpose", figures, zero, 1e-4, None, False, run_name="transpose", matched=False,
                    matched_by=STRUCTURE)
    assert op_label(only, "torchax", "jax") == "transpose (only in torchax: no counterpart in jax's program)"
    base_only = OpChange("aten::gelu", zero, figures, -1e-4, None, False, baseline_name="aten::gelu", matched=False)
    assert op_label(base_only, "pytorch+compile", "pytorch") == (
        "aten::gelu (only in pytorch: no op of that name in pytorch+compile)")


# ------------------------------------------------------------------------------------------ real jax and torchax runs

MODES = ("jax", "torchax")


@pytest.fixture(scope="module")
def runs(request) -> Path:
    """Profiled jax and torchax runs with their HLO: those of conftest's every_mode_comparison (made once per session),
    or the folder $HLOSCOPE_TEST_OPS_RUNS names."""
    given = os.environ.get("HLOSCOPE_TEST_OPS_RUNS")
    if given and all((Path(given) / mode / "run.json").is_file() for mode in MODES):
        return Path(given)
    return request.getfixturevalue("every_mode_comparison")


@pytest.fixture(scope="module")
def summaries(runs):
    return {mode: summarize_run(runs / mode) for mode in MODES}


@pytest.fixture(scope="module")
def table(summaries) -> list:
    """Every row of jax's op table against torchax."""
    return op_rows(summaries["jax"], summaries["torchax"], 0.0, top=None)


@pytest.fixture(scope="module")
def diff(runs) -> dict:
    done = hloscope("diff", runs / "jax", runs / "torchax", "--json")
    assert done.code == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _timed_on_both_sides(row) -> bool:
    return row.matched and row.matched_by == STRUCTURE and row.slow.seconds > 0 and row.fast.seconds > 0


def test_real_runs_pair_the_gelu_fusion_once(table, runs):
    """The GELU (erf-based) fusion is one row, jax's and torchax's fusions side by side, the pairs diff makes: every
    instruction pair of diff's structural matching whose jax side is the forward erf (all of them, not only the 50
    that diff --json lists, ranked by a measured time that moves with the machine's load)."""
    forward = [r for r in table if r.slow_name and "intermediate/erf" in r.slow_name and "backward" not in r.slow_name]
    assert len(forward) == 1, [(r.slow_name, r.fast_name) for r in forward]
    (gelu,) = forward
    assert _timed_on_both_sides(gelu) and "gelu" in (gelu.fast_name or "")
    jax, torchax = (load_side(runs / mode, None, None, False) for mode in ("jax", "torchax"))
    graph_a = graph_from_modules([m.module for m in jax.graphs])
    graph_b = graph_from_modules([m.module for m in torchax.graphs])
    pairs = {(graph_a.nodes[a].name, graph_b.nodes[b].name) for a, b in match_graphs(graph_a, graph_b).pairs.items()
             if "intermediate/erf" in (group := source_group(graph_a.nodes[a].op_name)) and "backward" not in group}
    assert pairs and all(a in gelu.instructions["slow"] and b in gelu.instructions["fast"] for a, b in pairs), pairs


def test_real_runs_pair_matmuls_and_attention(table):
    timed = [r for r in table if _timed_on_both_sides(r)]

    def rows(*words: str, other: tuple[str, ...] = ()) -> list:
        return [r for r in timed if all(w in (r.slow_name or "") for w in words)
                and (not other or any(o in (r.fast_name or "") for o in other))]

    assert rows("patch_embeddings/projection/conv_general_dilated", other=("aten::convolution",))
    assert rows("intermediate/dense/dot_general", other=("linear",))
    assert rows("output/dense/dot_general", other=("linear",))
    assert rows("attention/attention/reduce_max", other=("aten::_softmax",))  # softmax
    assert rows("attention/attention/", "dot_general", other=("bmm", "matmul"))  # QK^T and softmax x V


def test_real_runs_list_each_instruction_once_and_one_sided_work_says_so(table, summaries):
    assert len({(r.slow_name, r.fast_name) for r in table}) == len(table)
    for side, mode in (("slow", "jax"), ("fast", "torchax")):
        ledger = summaries[mode].ledger
        assert sum(r.instruction_counts[side] for r in table) == len(ledger.instructions)
        for step in range(len(ledger.step_s)):  # the op groups hold the instructions' time, step by step
            total = sum(s.seconds[step] for s in ledger.instructions.values())
            assert total == pytest.approx(sum(series.seconds[step] for series in ledger.ops.values()))
    matched = [r for r in table if r.matched]
    one_sided = [r for r in table if not r.matched]
    assert len(matched) > 3 * len(one_sided) > 0
    for row in one_sided:
        assert (row.slow_name is None) != (row.fast_name is None)
        absent = row.fast if row.fast_name is None else row.slow
        assert absent.calls == 0
        change = OpChange(row.group, row.slow, row.fast, row.seconds, row.p_value, row.significant,
                          run_name=row.slow_name, baseline_name=row.fast_name, matched=False,
                          matched_by=row.matched_by)
        present, other = ("jax", "torchax") if row.slow_name is not None else ("torchax", "jax")
        why = f"no counterpart in {other}'s program" if row.matched_by == STRUCTURE else f"no op of that name in {other}"
        assert op_label(change, "jax", "torchax").endswith(f"(only in {present}: {why})")


def test_explain_report_carries_the_pairing(summaries):
    """Through the engine, its JSON and a renderer: explain's op table of torchax against jax. The real summaries,
    with torchax's timed steps made jax's shifted by three times jax's slowest step, so that the gap is significant
    and the op table is drawn (8 timed steps on a loaded machine may not show the real gap, nor a 1.5x scaling of
    steps that vary by 5x there)."""
    jax = summaries["jax"]
    shift = 3 * max(jax.step_times_s)  # beyond any spread of jax's steps
    torchax = replace(summaries["torchax"], step_times_s=[t + shift for t in jax.step_times_s])
    report = explain([jax, torchax], baseline="jax")
    (entry,) = [m for m in report.to_dict()["modes"] if m["mode"] == "torchax"]
    assert entry["verdict"] == "slower" and entry["ops"]
    for op in entry["ops"]:
        assert op["matched"] == (op["run_name"] is not None and op["baseline_name"] is not None)
        assert op["matched_by"] in (STRUCTURE, NAME) and set(op["instructions"]) == {"run", "baseline"}
    assert any(op["matched_by"] == STRUCTURE and op["matched"] for op in entry["ops"])
    markdown = explain_md.render(report)
    assert "ops paired by the structural match of the two programs" in markdown and " ↔ " in markdown


@pytest.mark.parametrize("mode", MODES)
def test_diff_sorts_time_into_categories_as_trace_stats(runs, diff, mode):
    """One definition of an op's category: diff's per-category device time is trace stats' for the same trace."""
    done = hloscope("trace", "stats", runs / mode, "--json")
    assert done.code == 0, done.stderr[-3000:]
    (stats,) = json.loads(done.stdout)["traces"]
    assert stats["category_source"] == "hlo"
    side = diff["traces"]["a" if mode == "jax" else "b"]
    assert side["categories"] == stats["categories"]
    assert stats["categories"]["matmul/conv"] > 0
