"""`--target`: compile a mode's train step for a named GPU with XLA's deviceless compile, instead of timing it.

1. Build the graph on this machine: JAX's train step lowered for CUDA (StableHLO, `capture_jax`), or the HLO graph
   PyTorch/XLA compiles for its train step, captured on the CPU (`capture_torch_xla`, a subprocess).
2. Compile it for the target GPU in the environment that has jax's CUDA plugin (`gpu_compile_worker.py`, a subprocess:
   see `cuda_env`), falling back from XLA's Triton GEMMs to cuBLAS if the Triton path fails.
3. Keep what the compiler says under the run directory: optimized GPU HLO, buffer assignment, memory-usage report,
   thunk sequence (`hlo/`), XLA's memory analysis (`hlo/<module>.memory_analysis.json`) and the input graph (`input/`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from hloscope.backends import xla_dump
from hloscope.errors import HloscopeError, UsageError
from hloscope.hlo.gpu_spec import GpuTarget, resolve_target
from hloscope.hlo.memory import parse_buffer_assignment
from hloscope.hlo.roofline import roofline_for_module_file
from hloscope.hlo.thunks import parse_thunk_sequence
from hloscope.modes import TARGET_MODES, get_mode, resolve
from hloscope.targets import device_memory
from hloscope.targets.cuda_env import require_target_python

WORKER = Path(__file__).with_name("gpu_compile_worker.py")
COMPILE_TIMEOUT_S = 3600
_DUMP = ".gpu_dump"       # XLA's dump while the compile runs; kept files move to hlo/
_KEEP_ALL_ONLY = (".ll", ".ptx", ".o", ".mlir")
# XLA's record of its own options and passes: kept only with keep_all (gpu_target_config.pbtxt is always kept: the
# roofline of `hloscope hlo stats` reads it)
_COMPILER_STATE = (".config.pbtxt", ".debug_options", ".autotune_results.pbtxt", ".after_spmd_partitioner.txt")


def supports_target(mode: str) -> bool:
    """Whether `mode` can capture one XLA graph of its train step to compile for a GPU target (its registry entry has a
    `target_capture`)."""
    return mode in TARGET_MODES


def require_target_mode(mode: str) -> None:
    if not supports_target(mode):
        raise UsageError(f"--target compiles XLA graphs: use it with --mode {' or '.join(sorted(TARGET_MODES))}, "
                         f"not {mode}")


class TargetCompileError(HloscopeError):
    """The graph could not be captured or compiled; the run is recorded as failed with this message."""


def compile_for_target(mode: str, preset: str, batch_size: int, precision: str, target: str | os.PathLike,
                       run_dir: str | os.PathLike, seed: int = 0, gemm: str = "auto", keep_all: bool = False,
                       seq_len: int | None = None) -> dict:
    """Compile `mode`'s train step for `target` (h100 | a100 | path of a GpuTargetConfigProto text file); a text
    preset's sequences are `seq_len` tokens long (--seq-len; None: the preset's default).

    Returns the pieces of run.json for a compiled run: status ("compiled" or "failed"), error, target, compiles,
    memory, artifacts (paths relative to run_dir), kernels (thunk counts), roofline, notes. Raises UsageError for a mode
    without an XLA graph, InputError for a bad target file, MissingDependency when no environment has the CUDA plugin;
    a capture or compile failure is returned as status "failed" with the reason.
    """
    require_target_mode(mode)
    if gemm not in ("auto", "triton", "cublas"):
        raise UsageError(f"unknown GEMM backend {gemm!r}; choose auto, triton or cublas")
    gpu = resolve_target(target)
    python = require_target_python()
    run_dir = Path(run_dir)
    record: dict = {"status": "failed", "error": None, "target": gpu.to_json(), "compiles": {}, "memory": {},
                    "artifacts": [], "kernels": None, "roofline": None, "notes": []}
    try:
        graph_file, graph = _capture(mode, preset, batch_size, precision, seed, run_dir, seq_len)
        record["compiles"]["capture"] = graph
        record["artifacts"].append(_input_artifact(graph_file, run_dir, graph))
        result = _run_worker(python, graph_file, graph["format"], gpu, run_dir, gemm)
        record["compiles"].update(_compile_facts(result))
        record["target"]["compiler"] = result.get("versions")
        if not result.get("ok"):
            raise TargetCompileError(f"XLA could not compile the {mode} train step for {gpu.name} "
                                     f"({result.get('stage')}): {_first_line(result.get('error'))}")
        record["artifacts"] += _keep_dump(Path(result["dump_dir"]), run_dir, keep_all)
        record["memory"] = _memory(result["memory"], gpu, graph,
                                   _buffer_assignment_bytes(run_dir, record["artifacts"]))
        record["artifacts"].append(_write_memory_analysis(run_dir, result["module_name"], result["memory"], gpu))
        try:
            record["kernels"] = _kernels(run_dir, record["artifacts"])
            record["roofline"] = _roofline(run_dir, record["artifacts"], gpu, record["notes"])
        except HloscopeError as error:  # the compile succeeded; an analysis that cannot read its output is a note
            record["notes"].append(f"analysis of the compiled module failed: {error}")
        record["notes"] += _notes(result, gpu)
        record["status"] = "compiled"
    except TargetCompileError as error:
        record["error"] = str(error)
    finally:
        shutil.rmtree(run_dir / _DUMP, ignore_errors=True)
    return record


def _first_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "unknown error").splitlines() if line.strip()]
    return lines[0] if lines else "unknown error"


def _capture(mode: str, preset: str, batch_size: int, precision: str, seed: int, run_dir: Path,
             seq_len: int | None = None) -> tuple[Path, dict]:
    """The mode's registry `target_capture(preset, batch_size, precision, seed, input_dir, work_dir, seq_len=)` writes
    the train step's graph into input_dir and returns (graph file, facts with `format` and `module`)."""
    input_dir = run_dir / "input"
    input_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    capture_path = get_mode(mode).target_capture
    if capture_path is None:  # compile_for_target's require_target_mode let only such modes through
        raise RuntimeError(f"{mode}: the mode has no target capture")
    capture = resolve(capture_path)
    graph_file, info = capture(preset, batch_size, precision, seed, input_dir, run_dir / _DUMP / "capture",
                               seq_len=seq_len)
    info["seconds"] = round(time.perf_counter() - start, 3)
    return graph_file, info


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _input_artifact(graph_file: Path, run_dir: Path, graph: dict) -> dict:
    kind = "stablehlo" if graph["format"] == "mlir" else "hlo"
    return {"kind": kind, "path": str(graph_file.relative_to(run_dir)), "module": graph["module"],
            "stage": "input", "train_step": True, "format": "mlir" if kind == "stablehlo" else "text"}


def _run_worker(python: str, graph_file: Path, fmt: str, gpu: GpuTarget, run_dir: Path, gemm: str) -> dict:
    work = run_dir / _DUMP
    work.mkdir(parents=True, exist_ok=True)
    spec_file = work / "target.txtpb"
    spec_file.write_text(gpu.text, encoding="utf-8")
    request = {"module": str(graph_file.resolve()), "format": fmt, "target_config": str(spec_file.resolve()),
               "dump_dir": str(work.resolve()), "gemm": gemm, "result": str((work / "result.json").resolve())}
    request_file = work / "request.json"
    request_file.write_text(json.dumps(request), encoding="utf-8")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # the worker passes its dump options per compile; user flags would change the compile
    try:
        done = subprocess.run([python, str(WORKER), str(request_file)], env=env, capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise TargetCompileError(f"the GPU compile did not finish within {COMPILE_TIMEOUT_S} s") from None
    except OSError as error:
        raise TargetCompileError(f"cannot start the CUDA-plugin Python {python}: {error}") from None
    result_file = Path(request["result"])
    if not result_file.is_file():
        raise TargetCompileError(f"the GPU compile worker ({python}) exited with {done.returncode}: "
                                 f"{_last_line(done.stderr)}")
    return json.loads(result_file.read_text(encoding="utf-8"))


def _compile_facts(result: dict) -> dict:
    attempts = [{k: v for k, v in a.items() if k != "dump_dir"} for a in result.get("attempts", [])]
    for attempt in attempts:
        if "error" in attempt:
            attempt["error"] = _first_line(attempt["error"])[:500]
    fell_back = len(attempts) > 1 and attempts[-1].get("ok", False) and attempts[-1]["gemm"] == "cublas"
    return {"target_compile_s": result.get("compile_seconds"), "gemm_backend": result.get("gemm_backend"),
            "triton_gemm_fallback": fell_back, "donated_parameters": result.get("buffer_donors"),
            "fallback_reason": attempts[0].get("error") if fell_back else None, "attempts": attempts,
            "autotuned": False}


def _keep_dump(dump_dir: Path, run_dir: Path, keep_all: bool) -> list[dict]:
    if not keep_all:
        for path in dump_dir.iterdir():
            if path.name.endswith(_KEEP_ALL_ONLY) or path.name.endswith(_COMPILER_STATE):
                path.unlink()

    def extra(entry: dict) -> dict:
        if entry["path"].endswith(".thunk_metadata.txt"):
            return {"kind": "thunk_metadata", "stage": "after_optimizations", "format": "text"}
        if entry["path"].endswith(".thunk_sequence_after_thunk_passes.txt"):
            return {"kind": "thunk_sequence", "stage": "after_thunk_passes", "format": "text"}
        return {"platform": "gpu"}

    return xla_dump.collect(dump_dir, run_dir, keep_all=True, is_train_step=lambda entry: True, dest="hlo",
                            extra=extra)


def _memory(stats: dict, gpu: GpuTarget, graph: dict, buffer_assignment_bytes: int | None) -> dict:
    """XLA's memory analysis of the GPU executable (bytes), the peak it implies for one step against the target's
    memory (`target_peak`), and the step's memory ledger (`ledger`, hloscope/targets/device_memory.py)."""
    figures = device_memory.analysis_bytes(stats)
    out: dict[str, Any] = {"source": "xla_memory_analysis",
                           **{name: figures[name] for name in ("argument_bytes", "output_bytes", "alias_bytes",
                                                               "temp_bytes")}}
    peak = device_memory.step_peak_bytes(stats)
    if peak is not None:
        out["device_peak_estimate_bytes"] = peak
    out["generated_code_bytes"] = figures["generated_code_bytes"]
    out["target_peak"] = device_memory.target_peak(stats, gpu, buffer_assignment_bytes)
    out["ledger"] = device_memory.target_ledger(stats, graph.get("arguments"), str(graph.get("optimizer") or "sgd"))
    return out


def _buffer_assignment_bytes(run_dir: Path, artifacts: list[dict]) -> int | None:
    """The "Total bytes used" of XLA's buffer assignment of the compiled step (thread-local allocations aside)."""
    # the assignment itself (format "text"), not its "-values" listing
    paths = [run_dir / a["path"] for a in artifacts if a["kind"] == "buffer_assignment" and a.get("format") == "text"]
    if not paths:
        return None
    path = paths[0]
    try:
        return int(parse_buffer_assignment(path.read_text(encoding="utf-8"), str(path))["total_bytes"])
    except (HloscopeError, OSError, UnicodeDecodeError):  # the compile stands; the cross-check is left out
        return None


def peak_at_batch(mode: str, preset: str, batch_size: int, precision: str, gpu: GpuTarget, python: str,
                  scratch_dir: Path, seed: int = 0, gemm: str = "auto", seq_len: int | None = None) -> dict:
    """`--max-batch`: capture and compile `mode`'s step at `batch_size` for `gpu` in `scratch_dir` (removed after),
    keeping only what the search records: the peak, whether it fits, and the time each stage took. A failed capture or
    compile is returned with its reason (status "failed")."""
    start = time.perf_counter()
    point: dict[str, Any] = {"batch_size": batch_size, "status": "failed", "peak_bytes": None, "fits": None}
    try:
        graph_file, graph = _capture(mode, preset, batch_size, precision, seed, scratch_dir, seq_len)
        point["capture_s"] = graph["seconds"]
        point["reused_graph_builder"] = bool(graph.get("reused_workload"))
        result = _run_worker(python, graph_file, graph["format"], gpu, scratch_dir, gemm)
        point["compile_s"] = result.get("compile_seconds")
        if not result.get("ok"):
            raise TargetCompileError(f"XLA could not compile the step ({result.get('stage')}): "
                                     f"{_first_line(result.get('error'))}")
        point["gemm_backend"] = result.get("gemm_backend")
        peak = device_memory.step_peak_bytes(result["memory"])
        point.update(status="compiled", peak_bytes=peak, fits=None if peak is None else device_memory.fits(peak, gpu))
    except TargetCompileError as error:
        point["error"] = _short(str(error), 300)
    finally:
        shutil.rmtree(scratch_dir, ignore_errors=True)
    point["seconds"] = round(time.perf_counter() - start, 3)
    return point


def _write_memory_analysis(run_dir: Path, module: str, stats: dict, gpu: GpuTarget) -> dict:
    path = run_dir / "hlo" / f"{module}.memory_analysis.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"module": module, "target": gpu.name, "device": gpu.device, **stats}, indent=1),
                    encoding="utf-8")
    return {"kind": "memory_analysis", "path": str(path.relative_to(run_dir)), "module": module,
            "stage": "after_optimizations", "train_step": True, "format": "json", "platform": "gpu"}


def _artifact_path(run_dir: Path, artifacts: list[dict], kind: str, stage: str = "after_optimizations") -> Path | None:
    for entry in artifacts:
        if entry["kind"] == kind and entry.get("stage") == stage:
            return run_dir / entry["path"]
    return None


def _kernels(run_dir: Path, artifacts: list[dict]) -> dict | None:
    path = _artifact_path(run_dir, artifacts, "thunk_sequence")
    if path is None:
        return None
    summary = parse_thunk_sequence(path).summary()
    summary.pop("launch_list")
    summary["file"] = str(path.relative_to(run_dir))
    return summary


def _roofline(run_dir: Path, artifacts: list[dict], gpu: GpuTarget, notes: list[str]) -> dict | None:
    path = _artifact_path(run_dir, artifacts, "hlo")
    if path is None:
        return None
    result = roofline_for_module_file(path, gpu)
    if result.get("unavailable"):
        notes.append(f"roofline: {result['unavailable']}")
        return None
    return result.get("step")


def _short(error: str | None, limit: int = 140) -> str:
    line = _first_line(error)
    return line if len(line) <= limit else line[:limit].rstrip() + "..."


def _notes(result: dict, gpu: GpuTarget) -> list[str]:
    notes = [f"compiled for {gpu.device} (sm_{gpu.compute_capability}) by XLA's deviceless compile: never run, not "
             "timed, not autotuned (cuBLAS algorithm 0, cuDNN algo -1, default Triton tilings)"]
    attempts = result.get("attempts", [])
    if len(attempts) > 1 and result.get("gemm_backend") == "cublas":
        notes.append("XLA's Triton GEMM path failed for this graph, so GEMMs were compiled as cuBLAS calls "
                     f"(--xla_gpu_enable_triton_gemm=false): {_short(attempts[0].get('error'))}")
    return notes
