"""scripts/gpu-check.sh: its dry run end to end on the CPU (what CI can run of it), and each check of
hloscope.gpucheck.checks on crafted `--json` outputs, with a failing case for each."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from helpers import command, comparison_record, run_record

from hloscope.cli.compare import command as compare
from hloscope.errors import InputError
from hloscope.gpucheck import checks
from hloscope.gpucheck import main as gpucheck
from hloscope.gpucheck.checks import FAIL, PASS, SKIP
from hloscope.gpucheck.main import GPU_MODES, make_plan, pin_differences, requirement_pins, trim
from hloscope.runs.records import Timing

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
        if gpu_only:
            assert status == SKIP and "dry run: no GPU" in text, line
        elif (text.startswith("sync timing") or "replay within" in text) and status == SKIP:  # a busy CPU: the
            # product says it cannot tell
            assert "cannot tell on this machine" in text, line
        else:
            assert status == PASS, line
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
    # the lent GPU machine's jax is built for CUDA 13: its plugin is jax-cuda13-plugin
    cuda13 = {**GPU_ENV, "torch": "2.11.0+cu130", "torch_cuda": "13.0", "jax": "0.11.2", "jaxlib": "0.11.2",
              "jax_cuda_plugin": "0.11.2", "jax_cuda_plugin_name": "jax-cuda13-plugin"}
    assert checks.check_torch_cuda(cuda13).status == PASS
    assert "jax-cuda13-plugin 0.11.2" in checks.check_jax_cuda(cuda13).detail
    assert checks.check_jax_cuda({**cuda13, "jax_cuda_plugin": "0.10.2"}).status == FAIL


def test_torch_xla_refusal() -> None:
    line = "hloscope: error: --device cuda --mode torch_xla: torch_xla 2.9.0 has no CUDA support (removed in 2.9)"
    assert checks.check_torch_xla_refused(2, line + "\n").status == PASS
    assert checks.check_torch_xla_refused(1, line).status == FAIL
    assert checks.check_torch_xla_refused(2, "Traceback (most recent call last):\n  ...\n" + line).status == FAIL
    assert checks.check_torch_xla_refused(2, "hloscope: error: something else").status == FAIL
    # no torch_xla at all (the lent GPU machine): refused as a missing package in one line, and the check says so
    missing = "hloscope: error: this needs the Python package 'torch_xla', which is not installed: pip install torch_xla"
    assert checks.check_torch_xla_refused(3, missing + "\n", installed=False).status == SKIP
    assert checks.check_torch_xla_refused(1, "Traceback ...\nImportError: torch_xla", installed=False).status == FAIL
    assert checks.check_torch_xla_refused(2, line, installed=False).status == FAIL


def test_comparison_and_verdicts() -> None:
    rows = [{"mode": "jax", "status": "ok", "median_s": 0.01, "replicate": 1},
            {"mode": "pytorch", "status": "ok", "median_s": 0.02, "replicate": 1}]
    comparison = comparison_record({"modes": rows})
    assert checks.check_comparison("x", comparison, ["jax", "pytorch"]).status == PASS
    assert checks.check_comparison("x", comparison, ["jax", "pytorch", "torchax"]).status == FAIL
    crashed = [rows[0], {**rows[1], "status": "failed", "error": "segfault"}]
    assert checks.check_comparison("x", comparison_record({"modes": crashed}), ["jax", "pytorch"]).status == FAIL
    assert checks.check_comparison("x", None, ["jax"]).status == FAIL
    unreadable = checks.check_comparison("x", InputError("cmp/comparison.json", "empty comparison.json"), ["jax"])
    assert unreadable.status == FAIL and "cmp/comparison.json: empty comparison.json" in unreadable.detail
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
    # on a busy CPU, when one clock's own steps spread more than the two clocks differ: cannot tell, never a PASS
    noisy = {**probe, "hloscope_timer_min_s": 0.041, "reference_min_s": 0.100,
             "hloscope_timer_s": [0.041, 0.06, 0.09, 0.12, 0.2], "samples_s": [0.100, 0.11, 0.12, 0.13, 0.14]}
    cannot = checks.check_sync_timing("pytorch", noisy, gpu=False)
    assert cannot.status == SKIP and cannot.detail.startswith("cannot tell on this machine")
    steady = {**noisy, "hloscope_timer_s": [0.041, 0.042, 0.043, 0.044, 0.045]}
    assert checks.check_sync_timing("pytorch", steady, gpu=False).status == FAIL
    assert checks.check_sync_timing("pytorch", {**noisy, "run_median_s": 0.041}, gpu=True).status == FAIL  # no noise rule


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
    assert checks.check_replay("jax", replay, _timing(run), gpu=True).status == PASS
    off = _timing({"median_s": 0.0143, "min_s": 0.0095})
    assert checks.check_replay("jax", replay, off, gpu=True).status == FAIL  # 30%
    assert checks.check_replay("jax", replay, off, gpu=False).status == PASS
    assert checks.check_replay("jax", replay, _timing({"median_s": 0.0105, "min_s": 0.020}), gpu=False).status == FAIL
    # the CPU dry run, 53% apart (seen beside other jobs): a run whose own steps spread 2x cannot tell; one whose
    # steps hold within 10% fails
    spread = {"median_s": 0.0011, "min_s": 0.000862, "step_times_s": [0.000862, 0.0011, 0.0009, 0.0019, 0.0021]}
    slower = {**replay, "timing": {"min_s": 0.001321, "step_times_s": [0.001321, 0.0014, 0.0013, 0.00135, 0.0014]}}
    busy = checks.check_replay("jax", slower, _timing(spread), gpu=False)
    assert busy.status == SKIP and "cannot tell on this machine" in busy.detail, busy
    steady = {**spread, "step_times_s": [0.000862, 0.00087, 0.00088, 0.0009, 0.00089]}
    assert checks.check_replay("jax", slower, _timing(steady), gpu=False).status == FAIL
    # a real dry run beside CI's other worker (ms): the replay's fastest step 84% above the run's, whose own steps
    # spread 2x (run.json keeps them as `step_times_s`; `steps` there is their count)
    run_ms = [3.055, 2.573, 2.309, 1.519, 1.307, 1.144, 1.582, 1.692, 1.975, 1.879]
    replay_ms = [3.518, 2.685, 2.469, 2.525, 2.521, 2.419, 2.58, 2.503, 2.556, 2.436, 2.314, 2.449, 2.406, 2.103,
                 2.227, 2.555, 2.271, 2.139, 2.484, 2.319]
    recorded = checks.check_replay(
        "jax", {**replay, "timing": {"min_s": min(replay_ms) / 1e3, "step_times_s": [t / 1e3 for t in replay_ms]}},
        _timing({"min_s": min(run_ms) / 1e3, "steps": 10, "step_times_s": [t / 1e3 for t in run_ms]}), gpu=False)
    assert recorded.status == SKIP and "cannot tell on this machine" in recorded.detail, recorded
    # the other way round, another real loaded dry run: the run's fastest step 2.4x the replay's and its steps within
    # 1.6x, but its main thread waited for a CPU 23% of its timed window (a load that lasted the whole window); a quiet
    # run fails
    run_ms = [3.086, 2.605, 2.512, 3.829, 4.099, 2.96, 2.707, 2.547, 2.521, 2.44]
    replay_ms = [1.286, 1.2, 1.261, 1.407, 1.256, 1.09, 1.123, 1.113, 1.062, 1.021, 1.223, 1.134, 1.157, 1.036, 1.202,
                 1.064, 1.098, 1.021, 1.13, 1.026]
    window = {"seconds": 0.0321, "main_thread": {"running_s": 0.00873, "waiting_for_cpu_s": 0.00741},
              "other_threads": {}, "other_processes": []}
    faster = {**replay, "timing": {"min_s": min(replay_ms) / 1e3, "step_times_s": [t / 1e3 for t in replay_ms]}}
    loaded = {"min_s": min(run_ms) / 1e3, "noisy": False, "step_times_s": [t / 1e3 for t in run_ms],
              "host_scheduling": window}
    recorded = checks.check_replay("jax", faster, _timing(loaded), gpu=False)
    assert recorded.status == SKIP and "run waited for a CPU 23% of its timed window" in recorded.detail, recorded
    quiet = {**window, "main_thread": {"running_s": 0.00873, "waiting_for_cpu_s": 0.0001}}
    assert checks.check_replay("jax", faster, _timing({**loaded, "host_scheduling": quiet}), gpu=False).status == FAIL
    assert checks.check_replay("jax", faster, _timing({**loaded, "host_scheduling": quiet, "noisy": True}),
                               gpu=False).status == SKIP
    differs = {**replay, "trajectory": {"ok": False}}
    assert checks.check_replay("jax", differs, _timing(run), gpu=True).status == FAIL
    assert checks.check_replay("jax", {"status": "not_replayable"}, _timing(run), gpu=True).status == FAIL
    assert checks.check_replay("jax", None, _timing(run), gpu=True).status == FAIL
    unreadable = checks.check_replay("jax", replay, InputError("jax/run.json", "empty run.json"), gpu=True)
    assert unreadable.status == FAIL and "jax/run.json: empty run.json" in unreadable.detail


def _timing(parts: dict) -> Timing:
    """run.json `timing` holding `parts`, typed as the check reads it."""
    return run_record({"timing": parts}).timing


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


# ------------------------------------------------------------------------------------- the lent GPU machine's wheels

REPO = Path(__file__).resolve().parents[1]
# what `gpu-check` runs needs beyond pyproject.toml's dependencies and its frameworks extra: xplane (protobuf), the HLO
# inputs' dtypes (ml_dtypes), explain's significance tests (scipy)
CHECK_ALSO_NEEDS = ["numpy", "protobuf", "ml-dtypes", "scipy"]
# the frameworks the machine brings at its own versions (jax's CUDA plugin must match its jaxlib; torch is its CUDA
# build): SUMMARY.md lists how they differ from the pins, nothing is carried for them
MACHINE_VERSIONS_USED = {"torch", "jax", "jaxlib", "flax", "optax"}
MACHINE_PACKAGES_USING_CARRIED = [("accelerate 1.15.0", "huggingface-hub>=0.21.0")]


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _listed(path: Path) -> dict[str, str | None]:
    """`name[==version]` lines (comments and blank lines skipped) -> {normalised name: version or None}."""
    found: dict[str, str | None] = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert _name(name) not in found, f"{name} twice in {path.name}: two versions stop the whole install"
            found[_name(name)] = version or None
    return found


def _device_and_wheels() -> tuple[dict[str, str | None], dict[str, str | None]]:
    return _listed(REPO / "tests" / "data" / "gpu-device-packages.txt"), _listed(REPO / "scripts" / "gpu-wheels.txt")


def _satisfied(requirement, device: dict[str, str | None], wheels: dict[str, str | None]) -> str | None:
    """None when the wheels or the machine provide `requirement` (a machine's package of unread version counts), else
    why not."""
    name = _name(requirement.name)
    if name in wheels:
        version = wheels[name]
        return None if version and requirement.specifier.contains(version, prereleases=True) else \
            f"{requirement}: the wheel list has {name}=={version}"
    if name not in device:
        return f"{requirement}: neither on the machine nor in scripts/gpu-wheels.txt"
    version = device[name]
    if version is None or name in MACHINE_VERSIONS_USED or requirement.specifier.contains(version, prereleases=True):
        return None
    return f"{requirement}: the machine has {name} {version} and scripts/gpu-wheels.txt carries none"


def test_gpu_wheels_cover_what_the_check_needs() -> None:
    """Every package hloscope's GPU check imports is on the lent GPU machine at a usable version or in the wheel list
    scripts/gpu-wheels.sh downloads (nothing is downloaded here)."""
    from packaging.requirements import Requirement

    device, wheels = _device_and_wheels()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    needed = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["frameworks"]
              + CHECK_ALSO_NEEDS]
    needed = [r for r in needed if _name(r.name) != "torch-xla"]  # absent there by design: refused in one line
    assert {"transformers", "torchax", "msgspec", "ijson", "click", "rich", "jax", "flax"} <= {_name(r.name) for r
                                                                                            in needed}
    problems = [why for r in needed if (why := _satisfied(r, device, wheels))]
    assert not problems, "\n".join(problems)
    # transformers < 5: the Flax ViT of the jax and torchax modes
    assert wheels["transformers"] and int(wheels["transformers"].split(".")[0]) < 5
    # a wheel is carried only for a package the machine lacks or has at another version
    same = [n for n, v in wheels.items() if device.get(n) is not None and device.get(n) == v]
    assert not same, f"carried though the machine has the same version: {same}"


def test_gpu_wheels_requirements_are_met() -> None:
    """Each carried wheel's own requirements (its Requires-Dist for Python 3.12 on Linux x86-64, read from this
    environment, which holds the same versions) are met by the machine or by another carried wheel."""
    from packaging.requirements import Requirement

    device, wheels = _device_and_wheels()
    where = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
             "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
             "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
    problems, read = [], []
    for name, version in wheels.items():
        try:
            if metadata.version(name) != version:
                continue
        except metadata.PackageNotFoundError:
            continue
        read.append(name)
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate(where):
                continue
            if why := _satisfied(requirement, device, wheels):
                problems.append(f"{name}: {why}")
    assert {"transformers", "tokenizers", "huggingface-hub"} <= set(read), read  # the pinned set holds them
    # the machine's own packages that import a carried one at run time: transformers imports accelerate when present
    # (accelerate 1.15.0's Requires-Dist, read from its wheel on 2026-12-02)
    for name, text in MACHINE_PACKAGES_USING_CARRIED:
        if why := _satisfied(Requirement(text), device, wheels):
            problems.append(f"{name} (on the machine): {why}")
    assert not problems, "\n".join(problems)


def test_gpu_wheels_script_reads_the_list() -> None:
    """gpu-wheels.sh downloads for the machine's Python (cp312, manylinux x86-64) into the git-ignored .whl/ and
    enforces the carry limit."""
    script = (REPO / "scripts" / "gpu-wheels.sh").read_text()
    assert "scripts/gpu-wheels.txt" in script and "--python-version 3.12" in script and "--no-deps" in script
    assert "limit_mib=60" in script
    assert "/.whl/" in (REPO / ".gitignore").read_text().splitlines()


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel of one module, built by hand (no network, no build backend)."""
    files = {f"{name}.py": "VALUE = 42\n",
             f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                  "Tag: py3-none-any\n"}
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()}"
              f",{len(text.encode())}" for path, text in files.items()]
    files[f"{name}-{version}.dist-info/RECORD"] = "\n".join([*record, f"{name}-{version}.dist-info/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def test_wheels_mode_installs_offline_and_runs_from_the_source_tree(tmp_path: Path) -> None:
    """HLOSCOPE_WHEELS: the wheels are installed with --no-index into HLOSCOPE_SITE, which is on PYTHONPATH after the
    source tree, and scripts/setup.sh is not run."""
    (tmp_path / "wheels").mkdir()
    _wheel(tmp_path / "wheels", "hloscope_wheel_probe", "0.0.1")
    site = tmp_path / "site"
    probe = ("import hloscope, hloscope_wheel_probe, os; print(hloscope.__file__); print(hloscope_wheel_probe.__file__)"
             "; print(os.environ['PYTHONPATH'])")
    result = command("bash", "scripts/gpu-check.sh", "--help", timeout=120,
                     env={"HLOSCOPE_PYTHON": sys.executable, "HLOSCOPE_WHEELS": str(tmp_path / "wheels"),
                          "HLOSCOPE_SITE": str(site), "PIP_INDEX_URL": "http://127.0.0.1:9/nothing"})
    assert result.code == 0, result.stderr[-2000:]
    assert "--budget-s" in result.stdout and "1 wheels" in result.stdout
    assert (site / "hloscope_wheel_probe.py").exists()
    ran = command(sys.executable, "-c", probe, env={"PYTHONPATH": f"{REPO}:{site}"})
    assert ran.stdout.splitlines()[0].startswith(str(REPO / "hloscope"))
    empty = command("bash", "scripts/gpu-check.sh", "--help", env={"HLOSCOPE_WHEELS": str(tmp_path / "none")})
    assert empty.code == 2 and "holds no wheels" in empty.stderr


# ---------------------------------------------------------------------------------------------------- time budget

def test_budget_skips_the_optional_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--budget-s: once spent, the smoke test and the fp32/bf16 comparisons are SKIPped with the reason and never
    started; the required steps still run."""
    started: list[str] = []

    def fake_run_step(ctx: gpucheck.Context, name: str, argv: list[str], timeout: float | None = None) -> gpucheck.Ran:
        started.append(name)
        return gpucheck.Ran(0, "", "", 0.0)

    monkeypatch.setattr(gpucheck, "run_step", fake_run_step)
    monkeypatch.setattr(gpucheck.shutil, "which", lambda name: None)
    gpucheck.main(["--out", str(tmp_path / "out"), "--budget-s", "0", "--modes", "pytorch,jax"])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    skipped = {c["name"]: c["detail"] for c in summary["checks"] if c["status"] == SKIP}
    for label in ("vit-tiny smoke test", "vit-base batch 32 fp32", "vit-base batch 32 bf16"):
        assert skipped[f"compare {label}: every mode finished"].startswith("time budget: "), skipped
    assert "compare main" in started and "torch_xla on cuda" in started
    assert not {"compare smoke", "compare fp32", "compare bf16"} & set(started), started
    assert summary["budget_s"] == 0
    # without a budget every step is started
    started.clear()
    gpucheck.main(["--out", str(tmp_path / "all"), "--modes", "pytorch,jax"])
    assert {"compare smoke", "compare main", "compare fp32", "compare bf16"} <= set(started)


def test_budget_hard_end_starts_no_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the budget and its grace no step is started (its check then fails: not verified); before it a step's
    timeout is cut to the time left."""
    ctx = gpucheck.Context(tmp_path, gpucheck.make_plan(True, None), timeout=900, budget=0)
    monkeypatch.setattr(gpucheck, "BUDGET_GRACE_S", 0.0)
    ran = gpucheck.run_step(ctx, "late", [sys.executable, "-c", "print(1)"])
    assert ran.code == 124 and "not started" in ran.stderr and ctx.steps[-1]["exit"] == "not started"
    monkeypatch.setattr(gpucheck, "BUDGET_GRACE_S", 2.0)
    ran = gpucheck.run_step(ctx, "slow", [sys.executable, "-c", "import time; time.sleep(30)"])
    assert ran.code == 124 and ran.seconds < 20 and "did not finish" in ran.stderr


def test_pin_differences() -> None:
    """The machine's versions against requirements.txt's pins: recorded in SUMMARY.md, never a FAIL."""
    pins = requirement_pins()
    assert pins["torch"] == "2.9.0" and pins["jax"] == "0.10.2"  # `jax[cpu]==0.10.2`: the extra is dropped
    same = {name: pins[name] for name in ("torch", "torch_xla", "torchax", "jax", "jaxlib", "flax", "optax",
                                          "transformers", "click", "rich", "msgspec", "ijson", "isal")}
    assert pin_differences({**same, "torch": "2.9.0+cu128"}, pins) == []
    lent = {**same, "torch": "2.11.0+cu130", "jax": "0.11.2", "jaxlib": "0.11.2", "torch_xla": None}
    assert pin_differences(lent, pins) == ["torch 2.11.0+cu130 (pinned 2.9.0)", "torch_xla not installed (pinned "
                                           "2.9.0)", "jax 0.11.2 (pinned 0.10.2)", "jaxlib 0.11.2 (pinned 0.10.2)"]
