"""`--mode torch_xla` (lazy tensors, one graph per step) and `torch_xla+compile` (torch.compile with openxla).

A step is timed until `torch_xla.sync()` has cut and dispatched the step's graph and `xm.wait_device_ops()` has waited
for the device to finish it. torch_xla reads XLA_FLAGS and PJRT_DEVICE when its runtime starts, so both are set before
torch_xla is imported (this module imports it only in `setup`).

Which dumped graph is the train step: every module XLA compiles is kept and tagged with the step it was compiled in.
In lazy mode the graph hash of each warm-up step's pending graph is taken before its sync; the modules compiled at the
first step whose hash equals the last warm-up step's hash are the ones the timed window executes. With openxla, dynamo
compiles the forward and backward graphs inside the step call, so every module compiled during the steps is marked.
"""

from __future__ import annotations

import contextlib
import os
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from hloscope.backends import check_torch_xla_cuda, torch_xla_analysis, xla_dump
from hloscope.backends.base import (
    INPUT_ANNOTATION,
    STEP_MARKER,
    SYNC_ANNOTATION,
    WAIT_ANNOTATION,
    ProfileResult,
    RunOptions,
    compile_kwargs,
)
from hloscope.backends.torch_common import TorchSession, check_precision, import_torch, keep_transformers_off_jax
from hloscope.backends.torch_workload import build_torch_workload
from hloscope.errors import MissingDependency
from hloscope.machine import free_port

if TYPE_CHECKING:
    from hloscope.backends.torch_xla_spmd import Spmd

import_torch()  # a missing torch fails here, with its install line, before any setup

DUMP_DIR = ".xla_dump"
PRECISIONS = {"fp32": "highest", "tf32": "high", "bf16": "default"}  # torch_xla.backends.set_mat_mul_precision
# torch_xla's switch for aliasing the parameters' buffers with the graph's outputs (donation; on by default), read by
# its runtime when it starts
PARAM_ALIASING_ENV = "XLA_ENABLE_PARAM_ALIASING"
COMPILE_KWARGS = {"backend": "openxla", "mode": None, "fullgraph": False, "dynamic": None}  # torch.compile's defaults


def aliasing_on() -> bool:
    """Whether torch_xla aliases the parameters' buffers with the graph's outputs: its switch, on unless set to 0 or
    false (torch_xla reads it as a boolean when its runtime starts)."""
    value = os.environ.get(PARAM_ALIASING_ENV)
    return value is None or value.strip().lower() not in ("0", "false")


def torch_xla_version() -> str:
    try:
        return metadata.version("torch_xla")
    except metadata.PackageNotFoundError:
        raise MissingDependency("torch_xla") from None


def configure_runtime(options: RunOptions, dump_dir: Path | None) -> str:
    """Set PJRT_DEVICE and XLA_FLAGS before torch_xla starts its runtime; returns the PJRT device type."""
    version = torch_xla_version()
    if options.device == "cuda":
        check_torch_xla_cuda(version)
        os.environ["PJRT_DEVICE"] = "CUDA"
    elif options.device == "cpu":
        os.environ["PJRT_DEVICE"] = "CPU"
    elif not os.environ.get("PJRT_DEVICE"):
        # auto: torch_xla would warn and pick the CPU; say it ourselves (TPU hosts set PJRT_DEVICE=TPU).
        os.environ["PJRT_DEVICE"] = "CPU"
    if dump_dir is not None:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_dump_to={dump_dir} --xla_dump_hlo_as_text").strip()
        # op_type/op_name/source_file metadata on every HLO instruction (aten op and Python line), so that diff/explain
        # can group torch_xla's work by source op. It makes torch_xla record Python frames for every IR node it
        # traces, which slows the step ~1.8x on vit-tiny: `window_starting` turns that off once the warm-up has
        # compiled the step's graphs (docs/run.md has the figures).
        os.environ.setdefault("XLA_HLO_DEBUG", "1")
    if options.donate is not None:  # --no-donate: the lazy graphs alias no parameter buffer with their outputs;
        os.environ[PARAM_ALIASING_ENV] = "1" if options.donate else "0"  # --donate: they do, whatever was exported
    return os.environ["PJRT_DEVICE"]


class TorchXlaSession(TorchSession):
    profile_step_marker = f"{STEP_MARKER} (torch_xla profiler TraceMe, step_num = N, as xp.StepTrace)"
    profile_annotations: ClassVar[dict[str, str]] = {"input": INPUT_ANNOTATION, "sync": SYNC_ANNOTATION, "wait": WAIT_ANNOTATION}
    # torch_xla's profiler server, started once per process (a second start_server on another port fails)
    _profiler_server: ClassVar[Any] = None
    spmd: Spmd | None = None  # --devices N: the mesh and sharding (hloscope/backends/torch_xla_spmd.py)

    def setup(self) -> None:
        options = self.options
        keep_transformers_off_jax()
        check_precision(options.precision)
        self.dump_dir = self.run_dir / DUMP_DIR if options.dump_hlo else None
        self.pjrt_device = configure_runtime(options, self.dump_dir)
        self.limit_torch_threads()
        self.analysis_file = torch_xla_analysis.configure(self.run_dir)
        self.compile_phase: list[str] = []  # the phase each graph in analysis_file was compiled in, in order
        try:
            import torch_xla
            import torch_xla.backends
            import torch_xla.core.xla_model as xm
            import torch_xla.debug.metrics as metrics
        except ImportError as error:
            raise MissingDependency("torch_xla", str(error)) from None
        self.torch_xla, self.xm, self.metrics = torch_xla, xm, metrics
        if torch_xla.backends.get_mat_mul_precision() != PRECISIONS[options.precision]:
            torch_xla.backends.set_mat_mul_precision(PRECISIONS[options.precision])
        # --devices N: SPMD over a mesh of N devices (use_spmd must come before the first XLA tensor)
        self.spmd = None
        if options.devices > 1:
            from hloscope.backends.torch_xla_spmd import Spmd  # imports torch_xla: only in setup (docstring)

            self.spmd = Spmd(options.devices, options.batch_size)
        self.device = torch_xla.device()
        self.module_phase: dict[str, str] = {}  # dump module name -> phase it was compiled in ("setup", "step 3", ...)
        self.step_hashes: dict[int, str] = {}
        self.workload = build_torch_workload(options.preset, options.batch_size, options.seed, self.device,
                                             precision=options.precision, autocast_device="xla",
                                             compile_kwargs=compile_kwargs(COMPILE_KWARGS, options) if options.compile_model else None,
                                             sync=torch_xla.sync, data=options.data, n_batches=self.batch_count(),
                                             attention=options.attention,
                                             place=self.spmd.place if self.spmd is not None else None,
                                             optimizer_name=options.optimizer)
        torch_xla.sync()
        xm.wait_device_ops()
        self._note_new_modules("setup")
        self.graph = {"kind": "xla", "module": "SyncTensorsGraph" if not options.compile_model else "dynamo/openxla"}
        self.current_index = -1

    # -- the step (hloscope.backends.torch_workload; the graph is cut and dispatched in wait) ---------------------------
    def annotation(self, name: str, **metadata):
        # torch_xla's profiler event (what xp.Trace / xp.StepTrace record) without xp.Trace's IR scope and JAX named
        # scope, so that annotating a profiled step cannot change the graph it traces.
        return self.torch_xla._XLAC.profiler.TraceMe(name, **metadata)

    def step(self, index: int):
        self.current_index = index
        return super().step(index)

    def wait(self, outputs) -> None:
        in_warmup = self.current_index < self.options.warmup
        if in_warmup and not self.options.compile_model:
            tensors = [outputs, *list(self.model.parameters())]
            self.step_hashes[self.current_index] = self.torch_xla._XLAC._get_graph_hash(tensors).hex()
        with self.annotate(SYNC_ANNOTATION):
            self.built_workload.sync()
        with self.annotate(WAIT_ANNOTATION):
            self.xm.wait_device_ops()
        if in_warmup:
            self._note_new_modules(f"step {self.current_index}")

    def window_starting(self) -> None:
        # The graphs the window runs were compiled (with their op_name metadata) during the warm-up; recording Python
        # frames for every traced op from now on would only slow the timed steps. The graph hash ignores it.
        if self.torch_xla._XLAC._get_ir_debug():
            self.torch_xla._XLAC._set_ir_debug(False)

    # -- what it compiled ---------------------------------------------------------------------------------------------
    def _note_new_modules(self, phase: str) -> None:
        if self.analysis_file is not None:
            compiled = len(torch_xla_analysis.read(self.analysis_file))
            self.compile_phase += [phase] * (compiled - len(self.compile_phase))
        if self.dump_dir is None or not self.dump_dir.is_dir():
            return
        for name in os.listdir(self.dump_dir):
            entry = xla_dump.classify(name)
            if entry and entry["kind"] == "hlo":
                self.module_phase.setdefault(entry["module"], phase)

    def compile_counts(self) -> dict[str, int]:
        counts = {"xla_compiles": self.metrics.metric_data("CompileTime")[0] if self.metrics.metric_data("CompileTime")
                  else 0,
                  "uncached_compiles": self.metrics.counter_value("UncachedCompile") or 0}
        if self.options.compile_model:
            from torch._dynamo.utils import counters

            counts["dynamo_unique_graphs"] = counters["stats"]["unique_graphs"]
            counts["dynamo_recompiles"] = sum(counters["recompiles"].values())
        return counts

    def _train_step_phases(self) -> set[str]:
        if self.options.compile_model:
            phases = [*self.module_phase.values(), *self.compile_phase]
            return {phase for phase in phases if phase.startswith("step")} | {"window"}
        last = max(self.step_hashes, default=None)
        if last is None:
            return {"window"}
        first_same = min(i for i, h in self.step_hashes.items() if h == self.step_hashes[last])
        return {f"step {first_same}", "window"}

    def artifacts(self) -> list[dict]:
        if self.dump_dir is None:
            return []
        self._note_new_modules("window")  # anything compiled since the warm-up ran inside the timed window
        phases = self._train_step_phases()
        return xla_dump.collect(self.dump_dir, self.run_dir, self.options.keep_all,
                                is_train_step=lambda entry: self.module_phase.get(entry["module"]) in phases,
                                extra=lambda entry: {"phase": self.module_phase.get(entry["module"], "after window")})

    def step_compilations(self) -> list[torch_xla_analysis.XlaCompilation]:
        """The graphs of the train step that torch_xla compiled (from its compilation analysis; [] without it)."""
        if self.analysis_file is None:
            return []
        self._note_new_modules("window")
        phases = self._train_step_phases()
        compiled = torch_xla_analysis.read(self.analysis_file)
        return [graph for graph, phase in zip(compiled, self.compile_phase, strict=False) if phase in phases]

    # -- memory, profile, info ----------------------------------------------------------------------------------------
    def device_memory(self) -> dict | None:
        if self.spmd is not None:  # torch_xla 2.9 refuses memory info for the SPMD virtual device
            return {"devices_note": "torch_xla SPMD runs the step on one virtual device, for which "
                                    "xm.get_memory_info() is not supported ('MemoryInfo not supported for SPMD "
                                    "virtual device'): no per-device peak; the N devices are this process's "
                                    "(peak_host_rss_bytes)"}
        try:
            # torch_xla's MemoryInfo type names bytes_used and bytes_limit; PJRT clients also report peak_bytes_used
            info: dict[str, Any] = dict(self.xm.get_memory_info(self.device) or {})
        except RuntimeError:  # the CPU client implements no allocator statistics
            return None
        if not info or info.get("peak_bytes_used") is None:
            return None
        return {"device_peak_bytes": info["peak_bytes_used"], "device_bytes_limit": info.get("bytes_limit"),
                "source": "xm.get_memory_info()"}

    @contextlib.contextmanager
    def profiler(self, result: ProfileResult, first: int, steps: int):
        """XLA profiler (xplane.pb under <run>/plugins/profile/<timestamp>/), through torch_xla's profiler server."""
        import torch_xla.debug.profiler as xp

        before = xla_dump.list_profile_files(self.run_dir)
        if TorchXlaSession._profiler_server is None:
            TorchXlaSession._profiler_server = xp.start_server(free_port())
        xp.start_trace(str(self.run_dir))
        try:
            yield
        finally:
            xp.stop_trace()
        result.artifacts = xla_dump.find_profile_files(self.run_dir, before)

    def step_marker(self, index: int):
        """The event xp.StepTrace records (`train_step`, step_num N; _r=1 makes it a step marker), around the batch
        (hloscope/input), tracing the step, the graph sync (hloscope/sync) and the device wait (hloscope/wait).
        xp.StepTrace itself would sync on exit, after the work it marks; the sync here is the step's own, inside."""
        return self.annotation(STEP_MARKER, _r=1, step_num=index)

    def donation(self) -> dict:
        """run.json `environment.donation`: whether the step's graphs alias the parameters' buffers with their outputs."""
        if not aliasing_on():
            return {"state_in_place": False,
                    "how": f"{PARAM_ALIASING_ENV}=0 (--no-donate, or exported): the graph writes the updated state to "
                           "new buffers"}
        return {"state_in_place": True,
                "how": "the step's graph takes the parameter buffers as donated inputs (in-place update semantics)"}

    def info(self) -> dict:
        import torch_xla.runtime as xr

        autocast = "bfloat16" if self.options.precision == "bf16" else None
        mat_mul_precision = self.torch_xla.backends.get_mat_mul_precision()
        try:
            device_kind = self.xm.xla_device_kind(self.device)
        except Exception:  # noqa: BLE001  # an optional fact: torch_xla's runtime raises various types across versions
            device_kind = None
        return {"framework": "torch_xla", "device": str(self.device), "pjrt_device": self.pjrt_device,
                "device_type": xr.device_type(), "device_kind": device_kind, "torch_xla": torch_xla_version(),
                "precision": {"requested": self.options.precision,
                              "mat_mul_precision": mat_mul_precision, "matmul_precision": mat_mul_precision,
                              "autocast": autocast, "compute_dtype": autocast or "float32", "param_dtype": "float32"},
                "attention": {"implementation": self.attn_implementation,
                              "source": f"transformers {self.options.preset.config_class}._attn_implementation"},
                "compile": ({"api": "torch.compile", **compile_kwargs(COMPILE_KWARGS, self.options)}
                            if self.options.compile_model
                            else {"api": "lazy tensors (torch_xla.sync per step)", "backend": "xla"}),
                "donation": self.donation(),
                "threads": self.torch_threads(),
                **({"devices": self.spmd.describe()} if self.spmd is not None else {})}



