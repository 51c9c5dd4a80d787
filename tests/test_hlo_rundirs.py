"""The HLO that `hloscope run --dump-hlo` writes for jax, torch_xla and torch_xla+compile, read by hloscope and by XLA:
the same computations, instructions, opcodes and operands; `hlo stats RUN_DIR` picks the train-step module and its
FLOPs and bytes agree with XLA's HloCostAnalysis within 5% (slow: reads conftest's comparison of every mode)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import our_view, split_for_xla, xla_view

from hloscope.hlo.parser import parse_hlo_file
from hloscope.runs.rundir import find_runs, load_run

pytestmark = pytest.mark.slow

MODES = ["jax", "torch_xla", "torch_xla+compile"]


@pytest.fixture(scope="module")
def runs(every_mode_comparison) -> dict[str, dict]:
    records = {}
    for run_dir in find_runs(every_mode_comparison):
        record = load_run(run_dir).to_dict()
        records[record["mode"]] = {**record, "_dir": str(run_dir)}
    assert set(MODES) <= set(records)
    assert all(records[m]["status"] == "ok" for m in MODES), {m: records[m].get("error") for m in MODES}
    return records


@pytest.mark.parametrize("mode", MODES)
def test_every_dumped_module_agrees_with_xlas_parser(runs, mode):
    from jaxlib import _hlo
    record = runs[mode]
    files = [Path(record["_dir"]) / a["path"] for a in record["artifacts"] if a["kind"] == "hlo"]
    assert files
    for path in files:
        ours = parse_hlo_file(path)
        chunks = split_for_xla(path.read_text())
        assert len(ours) == len(chunks) >= 1
        for module, chunk in zip(ours, chunks):
            theirs = _hlo.hlo_module_from_text(chunk)
            assert module.name == theirs.name
            assert our_view(module) == xla_view(theirs), path.name
            assert module.instruction_count == sum(len(c.instructions()) for c in theirs.computations())


@pytest.mark.parametrize("mode", MODES)
def test_stats_on_the_run_dir_is_the_train_step_within_5_percent_of_xla(runs, mode, cli_run):
    record = runs[mode]
    train = {(a["module"], a["stage"]) for a in record["artifacts"] if a["kind"] == "hlo" and a.get("train_step")}
    code, out, err = cli_run("hlo", "stats", "--json", record["_dir"])
    assert code == 0, err
    modules = json.loads(out)["modules"]
    # exactly the modules run.json marks as the train step (not Flax's init, not torch_xla's setup graphs)
    assert {(m["name"], m["stage"]) for m in modules} == train
    after = [m for m in modules if m["stage"] == "after_optimizations"]
    assert after and all(m["platform"] == "cpu" for m in modules)
    # a real ViT step (torch_xla+compile: dynamo's forward, backward and optimizer graphs together)
    assert sum(m["flops"] for m in after) > 1e6
    for m in after:
        calls = sum(m["custom_calls"].values())  # XLA counts each custom call as -1 FLOP and -1 byte
        assert m["flops"] == pytest.approx(m["xla_cost"]["flops"] + calls, rel=0.05)
        assert m["bytes_accessed"] == pytest.approx(m["xla_cost"]["bytes_accessed"] + calls, rel=0.05)
