"""`api.diff_table` / `api.diff_frame`: one row per matched pair and per one-sided group, holding the figures
`hloscope diff --json` prints for the same inputs (real XLA GPU compilations, SOURCES.md: gpu_aot), and with measured
time the report's timed pairs, in its order, and its totals."""

from __future__ import annotations

import json

import pytest

from hloscope import api
from hloscope.diff.compare import diff_report
from hloscope.diff.graph import Graph, Node
from hloscope.diff.match import match_graphs
from hloscope.diff.pipeline import Compared
from hloscope.diff.tables import COLUMNS, diff_table
from hloscope.diff.timing import StepTimes

SM90 = "gpu_aot/vit_base_sm90_cublas"
SM80 = "gpu_aot/vit_base_sm80_cublas"


def _opcodes(group: dict) -> str:
    return ", ".join(f"{opcode} {n}" for opcode, n in group["opcodes"].items())


def test_rows_hold_the_json_figures(cli_run, fixtures_dir):
    a, b = fixtures_dir / SM90, fixtures_dir / SM80
    code, out, err = cli_run("diff", str(a), str(b), "--json", "--no-xla-cost")
    assert code == 0, err
    printed = json.loads(out)
    table = api.diff_table(a, b)
    assert table.column_names == [name for name, _ in COLUMNS]
    rows = table.to_pylist()
    pairs = [r for r in rows if r["kind"] == "matched"]
    assert len(pairs) == printed["matched"] == printed["matching"]["a_instructions"] - printed["matching"]["only_in_a"]
    assert all(r["count_a"] == r["count_b"] == 1 and r["time_a_s"] is None and r["delta_s"] is None for r in pairs)
    assert {r["graph_a"] for r in pairs} == {printed["a"]["name"]}
    assert {r["graph_b"] for r in pairs} == {printed["b"]["name"]}
    assert {r["how"] for r in pairs} == set(printed["matching"]["by_stage"])
    assert sum(1 for r in pairs if r["how"] == "exact") == printed["matching"]["by_stage"]["exact"]
    for kind, side in (("only_in_a", "a"), ("only_in_b", "b")):
        groups = [r for r in rows if r["kind"] == kind]
        other = "b" if side == "a" else "a"
        assert len(groups) >= len(printed[kind])  # the report keeps the first 50
        for row, group in zip(groups, printed[kind]):
            assert (row[f"source_{side}"], row[f"count_{side}"], row["sources"], row[f"opcode_{side}"]) == (
                group["op_name"], group["count"], group["sources"], _opcodes(group))
            assert row[f"graph_{side}"] == ", ".join(group["graphs"])
            assert row[f"count_{other}"] is None and row[f"source_{other}"] is None and row["time_a_s"] is None
    frame = api.diff_frame(a, b)
    assert len(frame) == table.num_rows and str(frame["count_a"].dtype) == "Int64"
    assert frame[frame["kind"] == "only_in_b"]["count_b"].sum() >= sum(g["count"] for g in printed["only_in_b"])


def _graph(prefix: str, graph: str, spec: list[tuple[str, str, list[str], str]]) -> Graph:
    result = Graph()
    for name, opcode, operands, op_name in spec:
        result.add(Node(key=prefix + name, opcode=opcode, shape="f32[4]", operands=tuple(prefix + o for o in operands),
                        op_name=op_name, detail="kLoop" if opcode == "fusion" else "", name=name, graph=graph))
    result.roots = [prefix + spec[-1][0]]
    return result


def _times(module: str, seconds: dict[str, float]) -> StepTimes:
    per_instruction = {(module, name): value for name, value in seconds.items()}
    return StepTimes(per_instruction=per_instruction, executions=dict.fromkeys(per_instruction, 1),
                     per_module={module: sum(seconds.values())}, module_executions={module: len(seconds)},
                     unplaced_s=0.0, device_s=sum(seconds.values()), steps=3, kept=[1, 2, 3])


def test_measured_time_rows_are_the_reports_pairs_and_totals():
    a = _graph("a/", "ma", [("p", "parameter", [], ""), ("e", "exponential", ["p"], "f/exp"),
                            ("f", "fusion", ["e"], "f/mul"), ("n", "negate", ["f"], "f/neg"),
                            ("t", "transpose", ["n"], "f/layer/0/t"), ("u", "transpose", ["t"], "f/layer/1/t")])
    b = _graph("b/", "mb", [("p", "parameter", [], ""), ("e", "exponential", ["p"], "g/exp"),
                            ("f", "fusion", ["e"], "g/mul"), ("n", "negate", ["f"], "g/neg"),
                            ("c", "copy", ["n"], "g/copy")])
    times_a = _times("ma", {"e": 3e-6, "f": 5e-6, "n": 1e-6, "t": 2e-6, "u": 4e-6})
    times_b = _times("mb", {"e": 3e-6, "f": 1e-6, "n": 2e-6, "c": 7e-6})
    matching = match_graphs(a, b)
    report = diff_report({"name": "ma"}, {"name": "mb"}, a, b, matching, match_rate={}, compared="", notes=[],
                         times_a=times_a, times_b=times_b).to_dict()
    rows = diff_table(Compared(a, b, matching, times_a, times_b)).to_pylist()
    pairs = [r for r in rows if r["kind"] == "matched"]
    timed = [r for r in pairs if r["time_a_s"] or r["time_b_s"]]
    printed = report["time_weighted"]
    assert len(timed) == printed["pairs_total"] == 3
    assert [(r["name_a"], r["name_b"], r["opcode_a"], r["source_a"], r["source_b"], r["how"], r["time_a_s"],
             r["time_b_s"], r["delta_s"]) for r in timed] == [
        (p["a"], p["b"], p["opcode"], p["source_a"], p["source_b"], p["how"], p["a_s"], p["b_s"], p["delta_s"])
        for p in printed["pairs"]]
    assert pairs[0]["name_a"] == "f" and pairs[0]["opcode_a"] == "fusion kLoop"  # the largest change first
    totals = printed["totals"]
    assert sum(r["delta_s"] for r in pairs) == pytest.approx(totals["b"]["matched_s"] - totals["a"]["matched_s"])
    (only_a,) = [r for r in rows if r["kind"] == "only_in_a"]
    (group_a,) = report["only_in_a"]
    assert (only_a["source_a"], only_a["count_a"], only_a["sources"], only_a["time_a_s"], only_a["delta_s"]) == (
        group_a["op_name"], 2, 2, group_a["time_s"], -group_a["time_s"])
    assert only_a["time_a_s"] == pytest.approx(totals["a"]["only_s"])
    (only_b,) = [r for r in rows if r["kind"] == "only_in_b"]
    assert (only_b["opcode_b"], only_b["time_b_s"], only_b["delta_s"], only_b["graph_b"]) == ("copy 1", 7e-6, 7e-6, "mb")
    assert only_b["time_b_s"] == pytest.approx(totals["b"]["only_s"])
