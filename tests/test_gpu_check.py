"""scripts/gpu-check.sh: its dry run end to end on the CPU (what CI can run of it), and each check of
hloscope.gpucheck.checks on crafted `--json` outputs, with a failing case for each."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from helpers import command

from hloscope.gpucheck import checks
from hloscope.gpucheck.checks import FAIL, PASS, SKIP
from hloscope.gpucheck.main import trim

# Every invariant of docs/gpu-check.md, as SUMMARY.md names it (the start of its line)
INVARIANTS = [
    "env: torch is a CUDA build",
    "env: jax runs on the GPU",
    "torch_xla on CUDA is refused in one line",
    "compare vit-tiny batch 8 fp32 (CPU): every mode finished",
    "explain: a verdict for every mode",
    "explain: the ledger's parts add up to the step",
    "pytorch: kineto trace has GPU kernels on device streams",
    "sync timing pytorch",
    "jax: xplane trace has GPU kernels on device streams",
    "jax: hlo stats kernels = kernels executed per profiled step",
    "jax: replay within",
    "sync timing jax",
    "compare vit-base batch 32 fp32 and bf16",
    "output folder under",
]


@pytest.mark.slow
def test_dry_run(tmp_path: Path) -> None:
    out = tmp_path / "gpu-check"
    # the environment is set up already (CI runs scripts/setup.sh first): HLOSCOPE_PYTHON skips pip
    result = command("bash", "scripts/gpu-check.sh", "--dry-run", "--out", out, timeout=1200,
                     env={"HLOSCOPE_PYTHON": sys.executable})
    summary = (out / "SUMMARY.md").read_text()
    assert result.code == 0, f"exit {result.code}\n{summary}\n{result.stderr[-3000:]}"
    lines = [line[2:] for line in summary.splitlines() if re.match(r"- (PASS|FAIL|SKIP) ", line)]
    for invariant in INVARIANTS:
        found = [line for line in lines if line.split(" ", 1)[1].startswith(invariant)]
        assert found, f"no PASS/FAIL/SKIP line for {invariant!r} in\n{summary}"
    for line in lines:
        status, text = line.split(" ", 1)
        gpu_only = text.startswith("env:") or "device streams" in text or "fp32 and bf16" in text
        assert status == (SKIP if gpu_only else PASS), line
        if status == SKIP:
            assert "dry run: no GPU" in text, line
    assert checks.folder_bytes(out) <= 8e6
    recorded = json.loads((out / "summary.json").read_text())
    assert {c["status"] for c in recorded["checks"]} == {PASS, SKIP}
    assert not list(out.rglob("*.inputs.npz"))


# --------------------------------------------------------------------------------------------------- crafted inputs

GPU_ENV = {"torch": "2.9.0+cu128", "torch_cuda": "12.8", "torch_cuda_available": True, "torch_device_name": "H200",
           "jax": "0.10.2", "jaxlib": "0.10.2", "jax_cuda_plugin": "0.10.2", "jax_backend": "gpu",
           "jax_devices": ["cuda:0"]}


def test_environment_checks() -> None:
    assert checks.check_torch_cuda(GPU_ENV).status == PASS
    assert checks.check_jax_cuda(GPU_ENV).status == PASS
    assert checks.check_torch_cuda({**GPU_ENV, "torch_cuda": None}).status == FAIL
    assert checks.check_torch_cuda({**GPU_ENV, "torch_cuda_available": False}).status == FAIL
    assert checks.check_jax_cuda({**GPU_ENV, "jax_cuda_plugin": None}).status == FAIL
    assert checks.check_jax_cuda({**GPU_ENV, "jax_cuda_plugin": "0.9.0"}).status == FAIL
    assert checks.check_jax_cuda({**GPU_ENV, "jax_backend": "cpu"}).status == FAIL


def test_torch_xla_refusal() -> None:
    line = "hloscope: error: --device cuda --mode torch_xla: torch_xla 2.9.0 has no CUDA support (removed in 2.9)"
    assert checks.check_torch_xla_refused(2, line + "\n").status == PASS
    assert checks.check_torch_xla_refused(1, line).status == FAIL
    assert checks.check_torch_xla_refused(2, "Traceback (most recent call last):\n  ...\n" + line).status == FAIL
    assert checks.check_torch_xla_refused(2, "hloscope: error: something else").status == FAIL


def test_comparison_and_verdicts() -> None:
    rows = [{"mode": "jax", "status": "ok", "median_s": 0.01, "replicate": 1},
            {"mode": "pytorch", "status": "ok", "median_s": 0.02, "replicate": 1}]
    assert checks.check_comparison("x", {"modes": rows}, ["jax", "pytorch"]).status == PASS
    assert checks.check_comparison("x", {"modes": rows}, ["jax", "pytorch", "torchax"]).status == FAIL
    crashed = [rows[0], {**rows[1], "status": "failed", "error": "segfault"}]
    assert checks.check_comparison("x", {"modes": crashed}, ["jax", "pytorch"]).status == FAIL
    assert checks.check_comparison("x", None, ["jax"]).status == FAIL
    verdicts = {"modes": [{"mode": "jax", "verdict": "baseline", "provisional": False},
                          {"mode": "pytorch", "verdict": "slower", "provisional": False}]}
    assert checks.check_verdicts(verdicts).status == PASS
    verdicts["modes"][1]["provisional"] = True
    assert checks.check_verdicts(verdicts).status == FAIL


def test_sync_timing() -> None:
    probe = {"run_median_s": 0.100, "reference_median_s": 0.098, "reference_min_s": 0.095,
             "hloscope_timer_median_s": 0.101, "hloscope_timer_min_s": 0.097, "method": "events"}
    assert checks.check_sync_timing("pytorch", probe, gpu=True).status == PASS
    assert checks.check_sync_timing("pytorch", probe, gpu=False).status == PASS
    # a timer that stops before the device has finished: far below the device's own clock
    unsynced = {**probe, "run_median_s": 0.004, "hloscope_timer_min_s": 0.003}
    assert checks.check_sync_timing("jax", unsynced, gpu=True).status == FAIL
    assert checks.check_sync_timing("jax", unsynced, gpu=False).status == FAIL
    # 8% off: within the CPU's tolerance, not the GPU's
    off = {**probe, "run_median_s": 0.106, "hloscope_timer_min_s": 0.1026}
    assert checks.check_sync_timing("jax", off, gpu=True).status == FAIL
    assert checks.check_sync_timing("jax", off, gpu=False).status == PASS
    # on the CPU the in-process timer decides, not another process's run.json
    busy = {**probe, "run_median_s": 0.030}
    assert checks.check_sync_timing("jax", busy, gpu=False).status == PASS
    assert checks.check_sync_timing("jax", busy, gpu=True).status == FAIL
    assert checks.check_sync_timing("jax", None, gpu=True).status == FAIL


def _trace(fmt: str, kernels_per_step: list[int], devices: int = 1) -> dict:
    per_step = [{"step": 20 + i, "kernels": k} for i, k in enumerate(kernels_per_step)]
    return {"traces": [{"file": f"/x/t.{fmt}", "format": fmt, "kernels": sum(kernels_per_step),
                        "devices": devices, "device_time_us": 1000.0 if devices else 0.0, "per_step": per_step}]}


def test_gpu_kernels() -> None:
    assert checks.check_gpu_kernels("jax", _trace("xplane", [900, 900]), "xplane").status == PASS
    assert checks.check_gpu_kernels("pytorch", _trace("kineto", [1200, 1200]), "kineto").status == PASS
    # a host-only trace (no device, no kernels), the wrong format, a step without kernels
    assert checks.check_gpu_kernels("pytorch", _trace("kineto", [0, 0], devices=0), "kineto").status == FAIL
    assert checks.check_gpu_kernels("jax", _trace("kineto", [5, 5]), "xplane").status == FAIL
    assert checks.check_gpu_kernels("jax", _trace("xplane", [900, 0]), "xplane").status == FAIL
    assert checks.check_gpu_kernels("jax", None, "xplane").status == FAIL


def test_kernel_count() -> None:
    hlo = {"modules": [{"name": "jit_train_step", "stage": "before_optimizations", "kernels": 976},
                       {"name": "jit_train_step", "stage": "after_optimizations", "kernels": 264}]}
    assert checks.check_kernel_count("jax", hlo, _trace("xplane", [264] * 6)).status == PASS
    # one kernel more per step than the program has (cuBLAS split-K's second kernel, say)
    assert checks.check_kernel_count("jax", hlo, _trace("xplane", [265] * 6)).status == FAIL
    assert checks.check_kernel_count("jax", hlo, _trace("xplane", [])).status == FAIL
    only_before = {"modules": hlo["modules"][:1]}
    assert checks.check_kernel_count("jax", only_before, _trace("xplane", [976])).status == FAIL


def test_replay() -> None:
    replay = {"status": "ok", "timing": {"median_s": 0.0100, "min_s": 0.0090}, "trajectory": {"ok": True}}
    run = {"median_s": 0.0105, "min_s": 0.0095}
    assert checks.check_replay("jax", replay, run, gpu=True).status == PASS
    assert checks.check_replay("jax", replay, {"median_s": 0.0143, "min_s": 0.0095}, gpu=True).status == FAIL  # 30%
    assert checks.check_replay("jax", replay, {"median_s": 0.0143, "min_s": 0.0095}, gpu=False).status == PASS
    assert checks.check_replay("jax", replay, {"median_s": 0.0105, "min_s": 0.020}, gpu=False).status == FAIL
    differs = {**replay, "trajectory": {"ok": False}}
    assert checks.check_replay("jax", differs, run, gpu=True).status == FAIL
    assert checks.check_replay("jax", {"status": "not_replayable"}, run, gpu=True).status == FAIL
    assert checks.check_replay("jax", None, run, gpu=True).status == FAIL


def _explain(nodes: dict[str, list[float]], steps: list[float], device: bool = True) -> dict:
    return {"summaries": {"jax": {"run_mode": "jax", "ledger": {"nodes": nodes, "step_s": steps, "device": device}}}}


def test_ledger() -> None:
    nodes = {"device:matmul/conv": [0.006, 0.006], "device:fusion/elementwise": [0.003, 0.0031],
             "idle:runtime dispatch": [0.001, 0.0009]}
    assert checks.check_ledger(_explain(nodes, [0.010, 0.010]), require_device=["jax"]).status == PASS
    # parts that do not add up to the step
    assert checks.check_ledger(_explain(nodes, [0.010, 0.012]), require_device=["jax"]).status == FAIL
    # a GPU run whose ledger has no device categories (host-only profile)
    host = {"host:inside framework ops": [0.010, 0.010]}
    assert checks.check_ledger(_explain(host, [0.010, 0.010], device=False)).status == PASS
    assert checks.check_ledger(_explain(host, [0.010, 0.010], device=False), require_device=["jax"]).status == FAIL
    assert checks.check_ledger({"summaries": {"jax": {"ledger": None}}}).status == FAIL
    assert checks.check_ledger(None).status == FAIL


def test_trim_and_size(tmp_path: Path) -> None:
    run, later = tmp_path / "main" / "c" / "jax", tmp_path / "main" / "c" / "jax-r2"
    for folder in (run, later):
        (folder / "hlo").mkdir(parents=True)
        (folder / "run.json").write_text("{}")
        (folder / "hlo" / "jit_train_step.inputs.npz").write_bytes(b"0" * 4000)
        (folder / "trace.xplane.pb").write_bytes(b"0" * 3000)
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "explain.json").write_text("{}" * 500)
    assert checks.check_size(tmp_path, 5000).status == FAIL
    removed = {r["path"] for r in trim(tmp_path, 5000)}
    assert removed == {"main/c/jax/hlo/jit_train_step.inputs.npz", "main/c/jax-r2/hlo/jit_train_step.inputs.npz",
                       "main/c/jax-r2/trace.xplane.pb"}  # the later process's trace goes first
    assert (run / "trace.xplane.pb").exists() and (tmp_path / "analysis" / "explain.json").exists()
    assert checks.check_size(tmp_path, 5000).status == PASS
    assert json.loads((tmp_path / "TRIMMED.json").read_text())


def test_gpu_plan_parses_as_compare_options() -> None:
    """The GPU plan cannot run here; its comparisons' options are at least what `hloscope compare` accepts, and the
    seed's configuration (ViT-B/16, batch 32, tf32, dumps, profiles, two processes) is the one the invariants read."""
    from hloscope.cli.compare import command as compare
    from hloscope.gpucheck.main import GPU_MODES, make_plan

    plan = make_plan(False, None)
    assert plan.smoke_args is not None
    parsed = [compare.make_context("compare", [*args, "--out", "x"]).params
              for args in (plan.smoke_args, plan.main_args, *(extra for _, extra in plan.extra))]
    assert all(p["device"] == "cuda" and p["modes"] == GPU_MODES for p in parsed)
    smoke, main, fp32, bf16 = parsed
    assert smoke["model"] == "vit-tiny"
    assert (main["model"], main["batch_size"], main["precision"], main["repeats"]) == ("vit-base", 32, "tf32", 2)
    assert main["dump_hlo"] and main["profile"] and not main["no_audit"]
    assert (fp32["precision"], fp32["repeats"], bf16["precision"], bf16["repeats"]) == ("fp32", 2, "bf16", 1)
