"""run.json and comparison.json as typed records: a real comparison (vit-tiny, jax and pytorch, made by `hloscope
compare`) reads into typed fields and writes back byte for byte, keys this hloscope does not know included; a field
of the wrong type is one InputError naming the file and the field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest
from helpers import assert_refused, hloscope

from hloscope.backends.timing import step_statistics
from hloscope.errors import InputError
from hloscope.runs.memory_record import MemoryLedger
from hloscope.runs.records import (
    ComparisonRecord,
    Environment,
    RunParts,
    RunRecord,
    environment_document,
    memory_document,
    run_document,
)
from hloscope.runs.rundir import load_comparison, load_run, write_comparison, write_run
from hloscope.significance import percentile, spread

REAL = Path(__file__).parent / "data" / "records" / "compare-vit-tiny"


@pytest.mark.parametrize("mode", ["jax", "pytorch"])
def test_a_real_run_json_reads_typed_and_writes_back_the_same_bytes(tmp_path, mode):
    record = load_run(REAL / mode)
    assert isinstance(record, RunRecord) and record.mode == mode and record.status == "ok"
    assert record.dir == REAL / mode and record.config.model == "vit-tiny" and record.config.batch_size == 32
    document = json.loads((REAL / mode / "run.json").read_text())
    timing = document["timing"]
    assert record.timing.step_times_s == timing["step_times_s"] and len(record.timing.step_times_s) == 6
    assert (record.timing.median_s, record.timing.p10_s, record.timing.p90_s) == (
        timing["median_s"], timing["p10_s"], timing["p90_s"])
    assert record.memory.peak_host_rss_bytes == document["memory"]["peak_host_rss_bytes"] > 0
    assert record.environment.packages["numpy"] == document["environment"]["packages"]["numpy"]
    assert record.to_dict() == document
    write_run(tmp_path, record)
    assert (tmp_path / "run.json").read_bytes() == (REAL / mode / "run.json").read_bytes()


def test_a_real_comparison_json_reads_typed_and_writes_back_the_same_bytes(tmp_path):
    comparison = load_comparison(REAL)
    assert isinstance(comparison, ComparisonRecord) and comparison.status == "ok"
    assert [(e.mode, e.dir, e.status) for e in comparison.modes] == [("jax", "jax", "ok"), ("pytorch", "pytorch", "ok")]
    assert comparison.config.modes == ["jax", "pytorch"] and comparison.config.repeats == 1
    fastest = [e for e in comparison.modes if e.ratio_to_fastest == 1.0]
    assert len(fastest) == 1 and all(e.median_s and e.median_s > 0 for e in comparison.modes)
    assert comparison.audit is not None and comparison.audit.ok is True
    write_comparison(tmp_path, comparison)
    assert (tmp_path / "comparison.json").read_bytes() == (REAL / "comparison.json").read_bytes()


def test_keys_another_hloscope_added_are_kept_in_order(tmp_path):
    """A newer writer's blocks (a `startup` section, a new field of `memory`) survive a read and a write back."""
    document = json.loads((REAL / "jax" / "run.json").read_text())
    document["memory"]["device_reserved_bytes"] = 123
    document = {**document, "startup": {"import_s": 1.5, "phases": ["import", "build"]}}
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "run.json").write_text(json.dumps(document, indent=2) + "\n")
    record = load_run(tmp_path / "in")
    assert record.memory.peak_host_rss_bytes == document["memory"]["peak_host_rss_bytes"]
    assert record.section("startup") == {"import_s": 1.5, "phases": ["import", "build"]}
    write_run(tmp_path / "in", record)
    assert json.loads((tmp_path / "in" / "run.json").read_text()) == document
    assert list(json.loads((tmp_path / "in" / "run.json").read_text())) == list(document)


def test_to_dict_is_a_copy():
    record = load_run(REAL / "jax")
    record.to_dict()["timing"]["median_s"] = 1.0
    assert record.to_dict()["timing"]["median_s"] == record.timing.median_s != 1.0


@pytest.mark.parametrize("change,where,expected", [
    (lambda d: d["config"].update(model=7), "'config.model' is int 7", "a string"),
    (lambda d: d["timing"].update(noisy="no"), "'timing.noisy' is str 'no'", "true or false"),
    (lambda d: d["environment"].update(packages=["jax"]), "'environment.packages' is list ['jax']", "an object"),
    (lambda d: d["loss"].update(first="2.3"), "'loss.first' is str '2.3'", "a number"),
    (lambda d: d["compiles"].update(recompiled_in_window=0), "'compiles.recompiled_in_window' is int 0",
     "true or false"),
    (lambda d: d.update(parity={"precision": "fp32", "loss": "2.3"}), "'parity.loss' is str '2.3'", "a number"),
    # the settings each framework had in effect
    (lambda d: d["environment"]["precision"].update(matmul_precision=3),
     "'environment.precision.matmul_precision' is int 3", "a string"),
    (lambda d: d["environment"].update(attention="eager"), "'environment.attention' is str 'eager'", "an object"),
    (lambda d: d["environment"]["compile"].update(fullgraph="yes"), "'environment.compile.fullgraph' is str 'yes'",
     "true or false"),
    (lambda d: d["environment"]["donation"].update(state_in_place=1),
     "'environment.donation.state_in_place' is int 1", "true or false"),
    (lambda d: d["environment"]["threads"].update(cpu_affinity=-2), "'environment.threads.cpu_affinity' is int -2",
     "an integer >= 0"),
    # figures out of their range: a negative size or count, no CPU, a step numbered below zero
    (lambda d: d["memory"].update(peak_host_rss_bytes=-5), "'memory.peak_host_rss_bytes' is int -5",
     "an integer >= 0"),
    (lambda d: d["environment"].update(cpu_count=0), "'environment.cpu_count' is int 0", "an integer >= 1"),
    (lambda d: d["config"]["model_config"].update(num_labels=-1), "'config.model_config.num_labels' is int -1",
     "an integer >= 1"),
    (lambda d: d.update(profile={"step_numbers": [3, -1]}), "'profile.step_numbers[1]' is int -1", "an integer >= 0"),
    # a data-parallel run's ranks
    (lambda d: d["timing"].update(ranks=[{"rank": 0, "step_times_s": [0.01], "steps": 1, "median_s": "fast"}]),
     "'timing.ranks[0].median_s' is str 'fast'", "a number"),
    (lambda d: d["timing"].update(ranks=[{"rank": -1, "step_times_s": [0.01], "steps": 1}]),
     "'timing.ranks[0].rank' is int -1", "an integer >= 0"),
])
def test_a_field_of_the_wrong_type_names_the_file_and_the_field(tmp_path, change, where, expected):
    document = json.loads((REAL / "jax" / "run.json").read_text())
    change(document)
    (tmp_path / "run.json").write_text(json.dumps(document))
    with pytest.raises(InputError) as caught:
        load_run(tmp_path)
    message = str(caught.value)
    assert message == f"{tmp_path / 'run.json'}: not a valid run.json: {where}, expected {expected}", message


def test_a_loss_beyond_the_largest_float_is_refused(tmp_path):
    """JSON's 1e400 reads as infinity, which no run records (a diverged loss is written as null)."""
    document = json.loads((REAL / "jax" / "run.json").read_text())
    document["loss"]["first"] = 12345.5
    (tmp_path / "run.json").write_text(json.dumps(document).replace("12345.5", "1e400"))
    with pytest.raises(InputError, match=r"'loss.first' is float inf, expected a number <= 1.7e\+308"):
        load_run(tmp_path)


@pytest.mark.parametrize(("section", "value", "where", "expected"), [
    (("environment", "compile", "options"), {"xla_cpu_enable_fast_math": [True]}, "environment.compile.options[...]",
     "holds a list, expected a number or a string or true or false"),
    (("compiles", "in_window"), {"xla_compiles": "none"}, "compiles.in_window[...]",
     "holds a string, expected an integer"),
])
def test_a_value_of_the_wrong_type_in_an_open_mapping_names_the_file_and_the_mapping(tmp_path, section, value, where,
                                                                                      expected):
    """XLA's compile options and the compile counters are keyed by each framework's own names; their values are typed."""
    document = json.loads((REAL / "jax" / "run.json").read_text())
    *parents, name = section
    holder = document
    for key in parents:
        holder = holder[key]
    holder[name] = value
    (tmp_path / "run.json").write_text(json.dumps(document))
    with pytest.raises(InputError) as caught:
        load_run(tmp_path)
    assert str(caught.value) == f"{tmp_path / 'run.json'}: not a valid run.json: '{where}' {expected}", str(caught.value)


def test_a_wrong_setting_in_effect_is_one_line_and_exit_2(tmp_path):
    shutil.copytree(REAL, tmp_path / "cmp")
    run_json = tmp_path / "cmp" / "pytorch" / "run.json"
    document = json.loads(run_json.read_text())
    document["environment"]["threads"]["torch_num_threads"] = "all"
    run_json.write_text(json.dumps(document))
    line = assert_refused(hloscope("explain", tmp_path / "cmp", "--json", timeout=300), run_json)
    assert "'environment.threads.torch_num_threads' is str 'all', expected an integer" in line, line


def test_a_wrong_comparison_entry_is_one_line_and_exit_2(tmp_path):
    shutil.copytree(REAL, tmp_path / "cmp")
    document = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    document["modes"][1]["median_s"] = "slow"
    (tmp_path / "cmp" / "comparison.json").write_text(json.dumps(document))
    result = hloscope("explain", tmp_path / "cmp", "--json", timeout=300)
    assert result.code == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line == (f"hloscope: error: {tmp_path / 'cmp' / 'comparison.json'}: not a valid comparison.json: "
                    "'modes[1].median_s' is str 'slow', expected a number"), line


@pytest.mark.parametrize("change,where,expected", [
    (lambda d: d["parity"]["modes"][0].update(loss="2.3"), "'parity.modes[0].loss' is str '2.3'", "a number"),
    (lambda d: d["parity"].update(ok="yes"), "'parity.ok' is str 'yes'", "true or false"),
    (lambda d: d["modes"][1]["parity"].update(grad_norm=[5.1]), "'modes[1].parity.grad_norm' is list [5.1]",
     "a number"),
    (lambda d: d["audit"]["before_timing"]["rows"][0].update(values=["eager"]),
     "'audit.before_timing.rows[0].values' is list ['eager']", "an object"),
    (lambda d: d.update(replay={"steps": "five", "device": "cpu"}), "'replay.steps' is str 'five'", "an integer"),
])
def test_a_comparison_part_of_the_wrong_type_names_the_file_and_the_field(tmp_path, change, where, expected):
    document = json.loads((REAL / "comparison.json").read_text())
    document["parity"] = {"precision": "fp32", "modes": [{"mode": "jax", "loss": 2.3, "status": "ok"}]}
    document["modes"][1]["parity"] = {"precision": "fp32", "loss": 2.3, "grad_norm": 5.1}
    change(document)
    (tmp_path / "comparison.json").write_text(json.dumps(document))
    with pytest.raises(InputError) as caught:
        load_comparison(tmp_path)
    message = str(caught.value)
    assert message == f"{tmp_path / 'comparison.json'}: not a valid comparison.json: {where}, expected {expected}", \
        message


@pytest.mark.parametrize("mode", ["jax", "pytorch"])
def test_the_recorded_percentiles_are_the_one_interpolated_definition(mode):
    """run.json's p10/p90 are significance.percentile of the step times (numpy's default, linear interpolation), the
    definition explain's spreads use: recomputed from the real record's steps they are the written figures exactly."""
    import numpy as np

    record = load_run(REAL / mode)
    times = record.timing.step_times_s
    stats = step_statistics(times, record.config.batch_size or 1)
    assert (stats["p10_s"], stats["p90_s"], stats["median_s"]) == (
        record.timing.p10_s, record.timing.p90_s, record.timing.median_s)
    ordered = sorted(times)
    assert stats["p10_s"] == percentile(ordered, 0.10) and stats["p90_s"] == percentile(ordered, 0.90)
    assert spread(times).to_dict() == {"median": stats["median_s"], "p10": stats["p10_s"], "p90": stats["p90_s"], "n": 6}
    assert stats["p10_s"] == pytest.approx(float(np.percentile(times, 10)), rel=1e-12)
    assert min(times) < stats["p10_s"] < stats["median_s"] < stats["p90_s"] < max(times)  # interpolated, not a sample
    assert stats["p10_s"] not in times and stats["p90_s"] not in times


def test_the_measured_host_sleep_reads_typed_and_older_runs_read_without_it(tmp_path):
    """--inject-host-delay runs record how long each timed and profiled step slept (timing.injected_host_delay_s,
    timing.profiled_injected_host_delay_s); a run without the delay, or from before they were recorded, has neither
    and reads as None; a sleep that is not a duration is refused like a step time."""
    assert load_run(REAL / "jax").timing.injected_host_delay_s is None
    assert load_run(REAL / "jax").timing.profiled_injected_host_delay_s is None
    document = json.loads((REAL / "jax" / "run.json").read_text())
    steps = len(document["timing"]["step_times_s"])
    document["timing"].update(injected_host_delay_s=[0.0031] * steps, profiled_injected_host_delay_s=[0.003, 0.0032])
    (tmp_path / "run.json").write_text(json.dumps(document, indent=2) + "\n")
    record = load_run(tmp_path)
    assert record.timing.injected_host_delay_s == [0.0031] * steps
    assert record.timing.profiled_injected_host_delay_s == [0.003, 0.0032]
    assert record.to_dict() == document
    document["timing"]["injected_host_delay_s"][0] = -0.003
    (tmp_path / "run.json").write_text(json.dumps(document))
    with pytest.raises(InputError) as caught:
        load_run(tmp_path)
    assert "'timing.injected_host_delay_s' holds -0.003, not a duration" in str(caught.value)


@pytest.mark.parametrize("mode", ["jax", "pytorch"])
def test_a_run_built_from_typed_parts_writes_the_environment_and_memory_it_was_measured_with(mode):
    """The driver's parts of a real run: the machine's environment typed, the framework's settings and memory peaks as
    it reported them, the ledger apart; written back, each part has the recorded keys in the recorded order."""
    document = json.loads((REAL / mode / "run.json").read_text())
    environment = document["environment"]
    machine = msgspec.convert(environment, Environment)
    machine_keys = ("hloscope", "python", "platform", "hostname", "cpu_model", "cpu_count", "packages", "env")
    framework = {key: value for key, value in environment.items()
                 if key not in (*machine_keys, "frameworks_imported")}
    written = environment_document(machine, framework, environment["frameworks_imported"])
    assert json.dumps(written) == json.dumps(environment)
    assert list(environment_document(machine, framework)) == list(environment)[:-1]  # a run not ended yet
    ledger = MemoryLedger(None, "", "adamw", error="not measured")
    written_memory = memory_document(document["memory"], ledger)
    assert list(written_memory) == [*document["memory"], "ledger"]
    assert written_memory["ledger"] == {"optimizer": "adamw", "error": "not measured"}
    assert memory_document(None, None) == {}
    parts = RunParts(run_id=document["run_id"], mode=mode, started_at=document["started_at"],
                     config=document["config"], environment=machine, framework=framework,
                     frameworks_imported=environment["frameworks_imported"], memory=document["memory"],
                     status="ok", graph=document["graph"], artifacts=document["artifacts"])
    built = run_document(parts)
    assert list(built) == list(document)
    assert json.dumps(built["environment"]) == json.dumps(environment) and built["memory"] == document["memory"]
