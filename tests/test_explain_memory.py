"""explain's memory section on known ledgers: two run directories whose run.json `memory.ledger` says exactly what
each step's memory is made of, and what explain, its --json and its three renderers make of the difference."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import good_run, hloscope, run_record

from hloscope import api
from hloscope.cli.run import build_options
from hloscope.explain.memory import MIN_PEAK_GAP, MemorySide, compare, memory_results, peak_tests
from hloscope.explain.replicates import group_processes
from hloscope.explain.summary import ModeSummary
from hloscope.hlo.memory import parse_buffer_assignment
from hloscope.runs import rundir
from hloscope.runs.memory_record import MemoryLedger, MemoryPart
from hloscope.runs.records import Environment
from hloscope.runs.runner import run_command
from hloscope.runs.settings import differences, settings
from hloscope.significance import PROCESS_ALPHA

MiB = 1 << 20
STEPS = [0.010, 0.0101, 0.0099, 0.0100, 0.0102, 0.0098]


def xla_ledger(peak: int, activations: int = 2 * MiB, optimizer: str = "sgd") -> dict:
    """A JAX-like ledger: 1 MiB of parameters, the state not donated (written to new buffers)."""
    state = MiB + 4
    return {"peak_bytes": peak, "peak_source": "peak host RSS of the run's process", "optimizer": optimizer,
            "parts": [{"name": "parameters", "bytes": MiB, "source": "pytree", "detail": {"tensors": 10}},
                      {"name": "buffers", "bytes": 0, "source": "pytree"},
                      {"name": "optimizer_state", "bytes": 4, "source": "pytree",
                       "detail": {"moments_bytes": 0, "step_count_bytes": 4}},
                      {"name": "inputs", "bytes": 98336, "source": "batch"},
                      {"name": "outputs", "bytes": state + 40, "source": "xla",
                       "detail": {"state_bytes": state, "aliased_bytes": 0}},
                      {"name": "temporaries", "bytes": 6 * MiB, "source": "xla"},
                      {"name": "gradients", "bytes": MiB, "source": "params", "estimate": True,
                       "within": "temporaries"},
                      {"name": "activations", "bytes": activations, "source": "vjp", "estimate": True,
                       "within": "temporaries"},
                      {"name": "runtime", "bytes": peak - (MiB + 4 + 98336 + state + 40 + 6 * MiB), "source": "rss"}],
            "compiled": {"argument_bytes": MiB + 4 + 98336, "output_bytes": state + 40, "alias_bytes": 0,
                         "temp_bytes": 6 * MiB, "generated_code_bytes": 0, "peak_bytes": None, "source": "xla"},
            "notes": []}


def torch_ledger(peak: int, activations: int = MiB) -> dict:
    parts = [{"name": "parameters", "bytes": MiB, "source": "tensors", "detail": {"tensors": 10}},
             {"name": "buffers", "bytes": 0, "source": "tensors"},
             {"name": "gradients", "bytes": MiB, "source": "tensors"},
             {"name": "optimizer_state", "bytes": 0, "source": "tensors",
              "detail": {"moments_bytes": 0, "step_count_bytes": 0}},
             {"name": "inputs", "bytes": 98336, "source": "tensors"},
             {"name": "activations", "bytes": activations, "source": "saved_tensors_hooks"},
             {"name": "temporaries", "bytes": None, "source": "not measured: the CPU allocator keeps no statistics"}]
    accounted = 2 * MiB + 98336 + activations
    parts.append({"name": "runtime", "bytes": peak - accounted, "source": "rss"})
    return {"peak_bytes": peak, "peak_source": "peak host RSS of the run's process", "optimizer": "sgd",
            "parts": parts, "compiled": None, "notes": []}


def write(root: Path, name: str, mode: str, ledger: dict, in_place: bool) -> Path:
    run = rundir.create_run_dir(root, run_id=name)
    rundir.write_run(run, {"schema_version": 1, "run_id": name, "mode": mode, "status": "ok", "error": None,
                           "config": {"model": "vit-tiny", "batch_size": 8, "data": "device", "precision": "fp32"},
                           "environment": {"platform": "cpu", "frameworks_imported": [mode.split("+")[0]],
                                           "donation": {"state_in_place": in_place, "how": f"{mode}'s update"}},
                           "timing": {"step_times_s": STEPS}, "memory": {"ledger": ledger}, "artifacts": []})
    return run


@pytest.fixture
def pair(tmp_path):
    jax_run = write(tmp_path, "jax", "jax", xla_ledger(600 * MiB, activations=3 * MiB), in_place=False)
    torch_run = write(tmp_path, "pytorch", "pytorch", torch_ledger(500 * MiB), in_place=True)
    return jax_run, torch_run


def test_the_peak_difference_comes_first_then_the_parts_that_differ_with_their_hypotheses(pair):
    jax_run, torch_run = pair
    report = api.explain(jax_run, torch_run, baseline="pytorch")
    memory = report.mode("jax").memory
    assert memory is not None
    assert (memory.peak_bytes, memory.baseline_peak_bytes, memory.difference_bytes) == (600 * MiB, 500 * MiB,
                                                                                        100 * MiB)
    assert memory.verdict == "more" and memory.provisional  # one process per side: the RSS spread is unmeasured
    differing = [p.name for p in memory.differing]
    assert "runtime" in differing and "activations" in differing and "parameters" not in differing
    outputs = next(p for p in memory.parts if p.name == "outputs")
    donation = [a for a in outputs.annotations if a.rule == "donation_missing"]
    assert donation and donation[0].evidence["cost_bytes"] == MiB + 4  # the state written to new buffers
    activations = next(p for p in memory.parts if p.name == "activations")
    assert [a.rule for a in activations.annotations] == ["activations_not_rematerialised"]
    assert activations.annotations[0].kind == "estimate"  # the JAX side's figure is vjp's residuals
    assert report.mode("pytorch").memory.verdict == "baseline"
    document = report.to_dict()
    assert {m["mode"]: m["memory"]["verdict"] for m in document["modes"]} == {"jax": "more", "pytorch": "baseline"}


def test_the_terminal_markdown_and_html_reports_show_the_memory_section(pair, tmp_path):
    jax_run, torch_run = pair
    for fmt_args, marker in (((), "Memory"), (("--format", "md"), "## Memory"),
                             (("--format", "html", "-o", "-"), "<h2>Memory")):
        result = hloscope("explain", jax_run, torch_run, "--baseline", "pytorch", *fmt_args)
        assert result.code == 0, result.stderr
        words = " ".join(result.stdout.split())  # the terminal wraps at its width
        assert marker in words
        assert "state not donated" in words and "activations not rematerialised" in words
    result = hloscope("explain", jax_run, torch_run, "--baseline", "pytorch", "--json")
    modes = {m["mode"]: m for m in json.loads(result.stdout)["modes"]}
    assert modes["jax"]["memory"]["difference_bytes"] == 100 * MiB


def test_a_small_peak_difference_is_no_difference_and_one_inside_the_process_spread_cannot_tell():
    def side(*peaks: int) -> MemorySide:
        return MemorySide([MemoryLedger(peak, "peak host RSS", "sgd", [MemoryPart("parameters", MiB, "t")])
                           for peak in peaks], Environment())

    assert compare(side(505 * MiB), side(500 * MiB)).verdict == "no difference"  # 1% of the baseline's peak
    spread = compare(side(530 * MiB, 560 * MiB, 545 * MiB), side(500 * MiB, 540 * MiB))
    assert spread.verdict == "cannot tell" and spread.spread_bytes == 40 * MiB and not spread.provisional
    assert compare(side(620 * MiB, 625 * MiB), side(500 * MiB, 505 * MiB)).verdict == "more"


def peaks(*mebibytes: float) -> MemorySide:
    """One configuration whose processes peaked at these sizes (MiB, in halves at the finest), one process each."""
    return MemorySide([MemoryLedger(int(m * MiB), "peak host RSS", "sgd", [MemoryPart("parameters", MiB, "t")])
                       for m in mebibytes], Environment())


def test_a_separation_just_beyond_each_spread_but_inside_the_process_variation_cannot_tell():
    # each side spreads by 30 MiB and they separate by 32 MiB: beyond either spread, but three processes a side of a
    # machine whose processes land ~3% apart cannot tell 6% from nothing (t on the log peaks: p = 0.06)
    memory = compare(peaks(532, 547, 562), peaks(500, 515, 530))
    assert memory.difference_bytes == 32 * MiB and memory.spread_bytes == 30 * MiB
    assert memory.verdict == "cannot tell" and not memory.provisional
    assert PROCESS_ALPHA < memory.process_p_value < 0.1 and memory.process_level == PROCESS_ALPHA
    assert memory.resolvable_bytes > 50 * MiB  # the smallest difference three processes a side resolve here
    assert memory.processes_needed is not None and 3 < memory.processes_needed <= 12
    assert f"--repeats {memory.processes_needed}" in memory.why
    assert not any(p.differs for p in memory.parts if p.name == "runtime")  # no part explains a difference not there


def test_the_process_variation_is_pooled_over_the_report_and_held_by_holm():
    base, run, other = peaks(500, 505, 510), peaks(530, 535, 540), peaks(480, 487, 490)
    tests = peak_tests({"base": base, "run": run, "other": other}, "base")
    assert set(tests) == {"run", "other"} and tests["run"].variation.df == 6  # three configurations of three
    assert sorted(t.level for t in tests.values()) == [PROCESS_ALPHA / 2, PROCESS_ALPHA]
    memory = compare(run, base, peak_test=tests["run"])
    assert memory.verdict == "more" and memory.process_p_value == tests["run"].test.p_value


def test_a_configuration_whose_peaks_vary_unlike_the_others_sets_the_noise_of_its_own_pairs_only():
    """Pooling assumes the configurations vary alike: one whose processes peak 30% apart (a host RSS that wanders)
    beside two whose processes land 1% apart is set apart. The quiet pair's 6% is then judged as the pair alone
    judges it; the noisy configuration's own gap is still held to its own variation."""
    base, run, noisy = peaks(500, 505, 510), peaks(530, 535, 540), peaks(450, 520, 600)
    alone = compare(run, base)
    assert alone.verdict == "more"  # the pair alone: 6% against processes 1% apart
    tests = peak_tests({"base": base, "run": run, "noisy": noisy}, "base")
    assert tests["run"].variation.df == 4 and tests["noisy"].variation.df == 6
    memory = compare(run, base, peak_test=tests["run"])
    assert memory.verdict == "more" and memory.process_p_value == alone.process_p_value
    assert compare(noisy, base, peak_test=tests["noisy"]).verdict == "cannot tell"


def test_peaks_xla_fixes_exactly_are_not_hidden_by_a_configuration_whose_peaks_vary():
    """Two configurations repeating their peaks to the byte (XLA's figures) and one that varies: the exact pair stays
    deterministic, its 6% real; held to the varying one's variation it could not be told."""
    exact, wider, varying = peaks(500, 500, 500), peaks(530, 530, 530), peaks(560, 600, 640)
    tests = peak_tests({"exact": exact, "wider": wider, "varying": varying}, "exact")
    memory = compare(wider, exact, peak_test=tests["wider"])
    assert memory.verdict == "more" and "deterministic" in memory.why and tests["wider"].variation.log_sd == 0.0
    assert tests["varying"].variation.log_sd > 0.0


def test_a_clear_peak_gap_outside_the_process_variation_is_more():
    memory = compare(peaks(643.5, 650, 656.5), peaks(495, 500, 505))  # +30%, processes 1% apart
    assert memory.verdict == "more" and not memory.provisional
    assert memory.process_p_value < PROCESS_ALPHA and memory.processes_needed is None
    assert memory.resolvable_bytes < memory.difference_bytes
    assert compare(peaks(495, 500, 505), peaks(643.5, 650, 656.5)).verdict == "less"


def test_peaks_equal_within_every_configuration_are_deterministic():
    memory = compare(peaks(525, 525, 525), peaks(500, 500, 500))  # +5%, every process at the same bytes
    assert memory.verdict == "more" and memory.spread_bytes == 0 and not memory.provisional
    assert memory.process_p_value == 0.0 and "deterministic" in memory.why
    assert memory.resolvable_bytes == math.ceil(MIN_PEAK_GAP * 500 * MiB)
    json.dumps(memory.to_dict(), allow_nan=False)  # no NaN nor infinity from a variance of 0
    assert compare(peaks(505, 505, 505), peaks(500, 500, 500)).verdict == "no difference"  # 1%: under the minimum


def test_one_process_a_side_is_provisional_and_untested():
    memory = compare(peaks(560), peaks(500))
    assert memory.verdict == "more" and memory.provisional and memory.spread_bytes is None
    assert (memory.process_p_value, memory.process_level, memory.resolvable_bytes) == (None, None, None)
    assert memory.why.startswith("provisional")


def test_explain_tests_the_peaks_of_each_configurations_processes(tmp_path):
    def configuration(label: str, *mebibytes: float) -> ModeSummary:
        members = [ModeSummary(mode=label, step_times_s=STEPS, run_mode="jax",
                               run_dirs=[str(write(tmp_path, f"{label}-{i}", "jax", xla_ledger(int(m * MiB)),
                                                   in_place=False))])
                   for i, m in enumerate(mebibytes)]
        (pooled,) = group_processes(members)
        return pooled

    found = memory_results([configuration("base", 500, 515, 530), configuration("run", 532, 547, 562),
                            configuration("far", 650, 665, 680)], "base")
    assert found["base"].verdict == "baseline" and found["base"].process_p_value is None
    assert found["run"].verdict == "cannot tell" and found["run"].processes_needed is not None
    assert found["far"].verdict == "more" and found["far"].process_p_value < found["far"].process_level
    assert {found["run"].process_level, found["far"].process_level} == {PROCESS_ALPHA, PROCESS_ALPHA / 2}


def test_another_optimizer_is_named_on_the_optimizer_state(tmp_path):
    adamw = xla_ledger(600 * MiB, optimizer="adamw")
    adamw["parts"][2] = {"name": "optimizer_state", "bytes": 2 * MiB + 8, "source": "pytree",
                         "detail": {"moments_bytes": 2 * MiB, "step_count_bytes": 8}}
    a = write(tmp_path, "a", "jax", adamw, in_place=False)
    b = write(tmp_path, "b", "torchax", xla_ledger(600 * MiB), in_place=False)
    memory = api.explain(a, b, baseline="torchax").mode("jax").memory
    state = next(p for p in memory.parts if p.name == "optimizer_state")
    assert state.differs and state.difference_bytes == 2 * MiB + 4
    assert [a.rule for a in state.annotations] == ["optimizer_differs"]


def test_runs_without_a_ledger_keep_their_explain_document(tmp_path):
    run = good_run(tmp_path)
    assert "memory" not in api.explain(run).to_dict()["modes"][0]


def test_the_optimizer_is_a_setting_of_the_fairness_audit():
    base = {"config": {"model": "vit-tiny", "optimizer": "sgd"}, "environment": {}}
    other = {"config": {"model": "vit-tiny", "optimizer": "adamw"}, "environment": {}}
    assert differences(settings(run_record(base)), settings(run_record(other))) == [
        {"field": "optimizer", "a": "sgd", "b": "adamw"}]


def test_compare_passes_the_optimizer_to_each_mode():
    values = {"model": "vit-tiny", "batch_size": 8, "steps": 6, "warmup": 2, "precision": "fp32", "device": "cpu",
              "data": "device", "seed": 0, "dump_hlo": False, "profile": False, "profile_steps": 6,
              "keep_all": False}
    command = run_command(build_options("jax", **values, optimizer="adamw"), Path("out"))
    assert command[command.index("--optimizer") + 1] == "adamw"
    assert "--optimizer" not in run_command(build_options("jax", **values), Path("out"))


def test_the_same_optimizer_with_more_state_per_parameter_byte_is_a_wider_dtype():
    def side(parameter_bytes: int, moments: int) -> MemorySide:
        parts = [MemoryPart("parameters", parameter_bytes, "t"),
                 MemoryPart("optimizer_state", moments + 4, "t", detail={"moments_bytes": moments,
                                                                        "step_count_bytes": 4})]
        return MemorySide([MemoryLedger(500 * MiB, "peak host RSS", "adamw", parts)], Environment())

    # bf16 parameters with fp32 moments (4 state bytes per parameter byte) against fp32 parameters and moments (2)
    memory = compare(side(MiB, 4 * MiB), side(2 * MiB, 4 * MiB))
    state = next(p for p in memory.parts if p.name == "optimizer_state")
    assert not state.differs  # the same bytes: nothing to explain on this part
    assert [a.rule for a in memory.annotations] == ["optimizer_state_wider"]
    assert memory.annotations[0].evidence == {"state_per_parameter_byte": 4.0,
                                              "baseline_state_per_parameter_byte": 2.0}
    assert compare(side(MiB, 2 * MiB), side(MiB, 2 * MiB)).annotations == []


def test_torch_xlas_temporaries_come_from_the_dumped_buffer_assignment(tmp_path):
    from helpers import fixture

    source = fixture("gpu_aot/vit_tiny_sm90_triton/module_0001.jit_train_step.sm_9.0a_gpu_after_optimizations"
                     "-buffer-assignment.txt")
    ledger = torch_ledger(900 * MiB)
    for part in ledger["parts"]:
        if part["name"] == "activations":
            part["bytes"] = None  # torch_xla: not measured while it runs
    run = write(tmp_path, "torch_xla", "torch_xla", ledger, in_place=True)
    (run / "hlo").mkdir()
    (run / "hlo" / source.name).write_text(source.read_text())
    record = rundir.load_run(run, check_artifacts=False).to_dict()
    record["artifacts"] = [{"kind": "buffer_assignment", "path": f"hlo/{source.name}", "module": "SyncTensorsGraph",
                            "stage": "after_optimizations", "train_step": True}]
    rundir.write_run(run, record)
    other = write(tmp_path, "pytorch", "pytorch", torch_ledger(500 * MiB), in_place=True)
    memory = api.explain(run, other, baseline="pytorch").mode("torch_xla").memory
    temporaries = next(p for p in memory.parts if p.name == "temporaries")
    expected = parse_buffer_assignment(source.read_text())["temp_bytes"]
    assert expected > 0 and temporaries.bytes == expected and "buffer assignment" in temporaries.source
    runtime = next(p for p in memory.parts if p.name == "runtime")
    assert runtime.bytes == 900 * MiB - (2 * MiB + 98336 + expected)  # recomputed: the peak minus the rest
