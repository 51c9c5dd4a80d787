"""Every mode end to end on the CPU (tiny ViT, a few steps) through `hloscope compare --dump-hlo --profile`.

One comparison of every mode is run once for the whole session (conftest's every_mode_comparison, which the HLO,
TensorBoard and XProf tests read too: the inductor cold compile alone takes ~30-60 s on two cores); the tests then check what it wrote with the frameworks' own readers: XLA's HLO parser, JAX's xplane reader, TensorBoard.
"""

from __future__ import annotations

import ast
import gzip
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import EVERY_MODE_PROFILE_STEPS, EVERY_MODE_STEPS

from hloscope.machine import free_port
from hloscope.modes import MODES as REGISTRY
from hloscope.modes import get_mode
from hloscope.runs.memory_record import read_ledger
from hloscope.runs.records import ComparisonRecord
from hloscope.runs.rundir import find_runs, load_comparison, load_run

pytestmark = pytest.mark.slow

MODES = ["pytorch", "pytorch+compile", "torch_xla", "torch_xla+compile", "jax"]
STEPS, PROFILE_STEPS = EVERY_MODE_STEPS, EVERY_MODE_PROFILE_STEPS


@pytest.fixture(scope="module")
def comparison(every_mode_comparison) -> ComparisonRecord:
    return load_comparison(every_mode_comparison)


@pytest.fixture(scope="module")
def runs(comparison) -> dict[str, dict]:
    records = [load_run(path) for path in find_runs(comparison.dir)]
    return {record.mode: {**record.to_dict(), "_dir": str(record.dir)} for record in records}  # the JSON, and where


def test_every_mode_completes_and_the_comparison_ranks_them(comparison):
    entries = {entry.mode: entry for entry in comparison.modes}
    assert list(entries) == [mode.name for mode in REGISTRY]
    assert all(entry.status == "ok" for entry in entries.values()), comparison.modes
    assert min(entry.ratio_to_fastest or 0.0 for entry in entries.values()) == pytest.approx(1.0)
    assert all((entry.median_s or 0) > 0 and (entry.throughput_img_s or 0) > 0 for entry in entries.values())


@pytest.mark.parametrize("mode", MODES)
def test_each_run_json_is_complete_and_the_loss_falls(runs, mode):
    record = runs[mode]
    timing = record["timing"]
    assert record["status"] == "ok" and record["error"] is None
    assert len(timing["step_times_s"]) == STEPS and len(timing["profiled_step_times_s"]) == PROFILE_STEPS
    assert timing["p10_s"] <= timing["median_s"] <= timing["p90_s"]
    assert timing["first_step_s"] > 0 and timing["window_mean_s"] > 0
    assert record["loss"]["finite"] and record["loss"]["last"] < record["loss"]["first"]
    assert record["compiles"]["recompiled_in_window"] is False
    assert record["environment"]["precision"]["requested"] == "fp32"
    assert record["environment"]["cpu_model"] and record["environment"]["packages"]["jax"]
    assert record["memory"]["peak_host_rss_bytes"] > 0


@pytest.mark.parametrize("mode", MODES)
def test_each_run_json_has_a_memory_ledger_whose_runtime_share_is_the_peak_minus_the_rest(runs, mode):
    record = runs[mode]
    ledger = read_ledger(record, Path(record["_dir"]) / "run.json")
    assert ledger is not None and not ledger.notes
    assert ledger.peak_bytes == record["memory"]["peak_host_rss_bytes"]  # CPU: no device peak
    assert ledger.bytes_of("parameters") > 0 and ledger.bytes_of("inputs") > 0
    assert ledger.bytes_of("runtime") == ledger.peak_bytes - ledger.accounted_bytes()


@pytest.mark.parametrize("mode", MODES)
def test_each_run_is_what_its_registry_entry_says(runs, mode):
    entry, record = get_mode(mode), runs[mode]
    assert record["config"]["compile_model"] is entry.compile
    assert Path(record["_dir"]).name == entry.dir_name
    assert record["graph"]["kind"] == entry.dumps
    assert entry.trace_format in {a.get("format") for a in record["artifacts"] if a["kind"] == "trace"}
    assert set(record["environment"]["frameworks_imported"]) - {"jax"} <= set(entry.imports)


def test_each_process_imports_only_its_own_framework(runs):
    imported = {mode: set(record["environment"]["frameworks_imported"]) for mode, record in runs.items()}
    assert imported["jax"] == {"jax"}
    assert imported["pytorch"] == imported["pytorch+compile"] == {"torch"}
    # torch_xla's own profiler (torch_xla.debug.profiler) loads JAX when it is installed; nothing else may.
    assert imported["torch_xla"] - {"jax"} == imported["torch_xla+compile"] - {"jax"} == {"torch", "torch_xla"}


def test_precision_in_effect_is_recorded(runs):
    assert runs["jax"]["environment"]["precision"]["jax_default_matmul_precision"] == "highest"
    assert runs["pytorch"]["environment"]["precision"]["float32_matmul_precision"] == "highest"
    assert runs["torch_xla"]["environment"]["precision"]["mat_mul_precision"] == "highest"


def _artifacts(record: dict, kind: str) -> list[dict]:
    return [a for a in record["artifacts"] if a["kind"] == kind]


def test_every_hlo_artifact_parses_with_xlas_own_parser(runs):
    from jaxlib import _hlo

    parsed = 0
    for mode in ("jax", "torch_xla", "torch_xla+compile"):
        record = runs[mode]
        for artifact in _artifacts(record, "hlo"):
            text = (Path(record["_dir"]) / artifact["path"]).read_text()
            module = _hlo.hlo_module_from_text(text)
            assert len(module.computations()) > 0
            parsed += 1
    assert parsed >= 6


@pytest.mark.parametrize("mode", ["jax", "torch_xla", "torch_xla+compile"])
def test_xla_modes_keep_the_train_step_module_with_both_stages(runs, mode):
    record = runs[mode]
    train = [a for a in record["artifacts"] if a.get("train_step") and a["kind"] != "trace"]
    stages = {(a["kind"], a["stage"]) for a in train}
    assert {("hlo", "before_optimizations"), ("hlo", "after_optimizations"), ("buffer_assignment", "after_optimizations"),
            ("memory_report", "after_optimizations")} <= stages
    hlo_dir = Path(record["_dir"]) / "hlo"
    assert not list(hlo_dir.glob("*.ll")) and not list(hlo_dir.glob("*.o"))  # dropped without --keep-all
    if mode.startswith("torch_xla"):  # XLA_HLO_DEBUG: every instruction says which aten op and Python line made it
        assert record["environment"]["env"]["XLA_HLO_DEBUG"] == "1"
        assert not record["compiles"]["recompiled_in_window"]  # turning frame capture off in the window changed nothing
        after = [Path(record["_dir"]) / a["path"] for a in train if (a["kind"], a["stage"]) == ("hlo", "after_optimizations")]
        lines = [line for path in after for line in path.read_text().splitlines() if " = " in line]
        assert sum('op_name="aten__' in line for line in lines) > len(lines) / 3
    if mode == "jax":
        assert {a["module"] for a in train} == {"jit_train_step"}
        assert len(_artifacts(record, "hlo")) == 2  # exactly one module: Flax's init modules are not kept
        stablehlo = Path(record["_dir"]) / _artifacts(record, "stablehlo")[0]["path"]
        assert stablehlo.read_text().startswith("module @jit_train_step")


def test_inductor_output_code_is_kept_and_eager_says_it_has_no_graph(runs):
    compiled = runs["pytorch+compile"]
    code = _artifacts(compiled, "inductor_code")
    assert {a["stage"] for a in code} >= {"forward", "backward"}
    kernels = 0
    for artifact in code:
        source = (Path(compiled["_dir"]) / artifact["path"]).read_text()
        ast.parse(source)
        kernels += source.count("cpp_fused_")
    assert kernels > 0
    assert runs["pytorch"]["graph"]["kind"] == "none" and not _artifacts(runs["pytorch"], "hlo")


def test_every_xplane_reads_with_jax_profile_data_and_has_step_markers(runs):
    from jax.profiler import ProfileData

    for mode in ("jax", "torch_xla", "torch_xla+compile"):
        record = runs[mode]
        xplanes = [a for a in _artifacts(record, "trace") if a["format"] == "xplane"]
        assert len(xplanes) == 1 and xplanes[0]["path"].startswith("plugins/profile/")
        profile = ProfileData.from_file(str(Path(record["_dir"]) / xplanes[0]["path"]))
        names = {event.name for plane in profile.planes for line in plane.lines for event in line.events}
        assert any("train_step" in name for name in names), mode


def test_pytorch_profiles_are_kineto_json_with_profiler_steps(runs):
    for mode in ("pytorch", "pytorch+compile"):
        record = runs[mode]
        traces = _artifacts(record, "trace")
        assert traces and all(a["format"] == "kineto" and a["path"].startswith("kineto/") for a in traces)
        path = Path(record["_dir"]) / traces[0]["path"]
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as handle:
            events = json.load(handle)["traceEvents"]
        steps = {e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")}
        assert len(steps) == PROFILE_STEPS


def test_tensorboard_lists_the_profiled_runs(comparison):
    port = free_port()
    tensorboard = Path(sys.executable).with_name("tensorboard")
    server = subprocess.Popen([str(tensorboard), "--logdir", str(comparison.dir), "--host", "127.0.0.1",
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        runs: list = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(runs) < 3:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/profile/runs", timeout=5) as reply:
                    body = reply.read()
                    if reply.headers.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    runs = json.loads(body)
            except OSError:
                time.sleep(0.5)
                continue
            time.sleep(0.5)
        names = " ".join(str(run) for run in runs)
        for directory in ("jax", "torch_xla", "torch_xla_compile"):
            assert f"{directory}/" in names, runs
    finally:
        server.terminate()
        server.wait(timeout=30)
