"""`--mode pytorch` (eager) and `pytorch+compile` (torch.compile with inductor).

On CUDA the step is timed until `torch.cuda.synchronize()` returns; on the CPU PyTorch runs synchronously.
With --devices N (N > 1), DistributedDataParallel over N processes (hloscope.backends.ddp): this process is rank 0,
each rank steps on its slice of the global batch, and writes its Kineto trace under `<run>/kineto/rank-N/`.
With --dump-hlo, inductor's generated code (`output_code.py`: Triton kernels on CUDA, C++ kernels on the CPU) is copied
into `<run>/hlo/inductor/` so that the kernels inductor generated can be counted. Eager PyTorch has no graph.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import warnings
from importlib.util import find_spec
from pathlib import Path

from hloscope.backends.base import WAIT_ANNOTATION, ProfileResult, compile_kwargs
from hloscope.backends.ddp import ProcessGroup
from hloscope.backends.torch_common import TorchSession, check_precision, import_torch, keep_transformers_off_jax
from hloscope.backends.torch_workload import build_torch_workload
from hloscope.errors import UsageError
from hloscope.modes import TRACE_KINETO

torch = import_torch()

INDUCTOR_DEBUG_DIR = ".inductor_debug"  # inside the run directory while the run lasts
COMPILE_KWARGS = {"backend": "inductor", "mode": None, "fullgraph": False, "dynamic": None}  # torch.compile's defaults


def pick_device(choice: str):
    if choice == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device (torch.cuda.is_available() is False)")
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def apply_precision(precision: str) -> None:
    """fp32: true fp32 matmuls and convolutions; tf32: TF32 on Ampere+ (PyTorch's 'high'); bf16: autocast to bf16
    (the workload's autocast)."""
    check_precision(precision)
    with warnings.catch_warnings():  # torch 2.9 warns that its TF32 switches are being renamed; they still apply
        warnings.simplefilter("ignore", UserWarning)
        torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
        torch.backends.cudnn.allow_tf32 = precision == "tf32"


def check_flash(attention: str, device) -> None:
    """--attention flash is transformers' flash_attention_2: the flash-attn package's CUDA kernels."""
    if attention != "flash":
        return

    if device.type != "cuda":
        raise UsageError(f"--attention flash: transformers' flash_attention_2 runs the flash-attn package's CUDA kernels; "
                         f"the device is {device.type} (use --attention sdpa or eager, or a CUDA GPU)")
    if find_spec("flash_attn") is None:
        raise UsageError("--attention flash: transformers' flash_attention_2 needs the flash-attn package "
                         "(pip install flash-attn); it is not installed")


class PytorchSession(TorchSession):
    profile_step_marker = "ProfilerStep#N (torch.profiler schedule)"
    profile_notes = ("Kineto's schedule warm-up step ran before the recorded steps (not in the trace)",)
    profile_lead_in_steps = 1  # Kineto's schedule warm-up step: run, not recorded
    host_memory_source = "peak host RSS (CPU)"

    group = None  # hloscope.backends.ddp.ProcessGroup with --devices N > 1
    completed = False  # the run went through to its artifacts (DDP: the other ranks end on their own)

    def setup(self) -> None:
        options = self.options
        keep_transformers_off_jax()
        self.device = pick_device(options.device)
        check_flash(options.attention, self.device)
        wrap = shard = None
        if options.devices > 1:  # DDP: start (or join) the N ranks before the model is built
            group = self.group = ProcessGroup(options, self.run_dir, self.device.type)
            self.device = group.device
            shard = group.shard

            def wrap(model):
                from torch.nn.parallel import DistributedDataParallel

                return DistributedDataParallel(model, device_ids=[group.local_rank] if group.backend == "nccl"
                                               else None)
        apply_precision(options.precision)
        self.limit_torch_threads()
        if options.compile_model:
            if options.dump_hlo:
                self._enable_inductor_debug()
            self.graph = {"kind": "inductor", "note": "torch.compile(backend='inductor'): FX graphs compiled to "
                                                      "generated kernels (see inductor_code artifacts)"}
        else:
            self.graph = {"kind": "none", "note": "eager PyTorch runs operator by operator: there is no graph to dump"}
        self.workload = build_torch_workload(options.preset, options.batch_size, options.seed, self.device,
                                             precision=options.precision, autocast_device=self.device.type,
                                             compile_kwargs=compile_kwargs(COMPILE_KWARGS, options) if options.compile_model else None,
                                             data=options.data, n_batches=self.batch_count(),
                                             attention=options.attention, wrap=wrap, shard=shard,
                                             optimizer_name=options.optimizer)

    def _enable_inductor_debug(self) -> None:
        """Ask inductor to write its debug trace (FX graphs, IR, output_code.py) under the run directory.

        The FX graph cache is turned off so that the code is generated (and written) even when a previous run
        compiled the same graphs."""
        import torch._inductor.config as inductor_config

        self.debug_dir = self.run_dir / INDUCTOR_DEBUG_DIR
        inductor_config.trace.enabled = True
        inductor_config.trace.debug_dir = str(self.debug_dir)
        inductor_config.fx_graph_cache = False

    def annotation(self, name: str):
        return torch.profiler.record_function(name)

    def wait(self, outputs) -> None:
        with self.annotate(WAIT_ANNOTATION):  # on the CPU the step has already finished: an empty annotation
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)

    def loss_of(self, outputs) -> float:
        """The global batch's loss: with DDP, the mean of the ranks' losses (each over its equal slice)."""
        loss = super().loss_of(outputs)
        return self.group.mean(loss) if self.group is not None else loss

    def rank_step_times(self, step_times_s: list[float]) -> list[list[float]] | None:
        """DDP: every rank's step times, and in the same gather each rank's memory after its timed window (run.json
        `memory.ranks`)."""
        if self.group is None:
            return None
        gathered = self.group.gather((list(step_times_s), super().memory()))
        self.rank_memory = [{"rank": rank, **memory} for rank, (_, memory) in enumerate(gathered)]
        return [list(times) for times, _ in gathered]

    def memory(self) -> dict:
        memory = super().memory()
        if getattr(self, "rank_memory", None):
            memory["ranks"] = self.rank_memory
        return memory

    def compile_counts(self) -> dict[str, int]:
        if not self.options.compile_model:
            return {}
        from torch._dynamo.utils import counters

        return {"dynamo_unique_graphs": counters["stats"]["unique_graphs"],
                "dynamo_recompiles": sum(counters["recompiles"].values()),
                "dynamo_graph_breaks": sum(counters["graph_break"].values())}

    def device_memory(self) -> dict | None:
        if self.device.type != "cuda":
            return None
        return {"device_peak_bytes": torch.cuda.max_memory_allocated(self.device),
                "device_peak_reserved_bytes": torch.cuda.max_memory_reserved(self.device),
                "source": "torch.cuda.max_memory_allocated()"}

    @contextlib.contextmanager
    def profiler(self, result: ProfileResult, first: int, steps: int):
        """torch.profiler (Kineto) with CPU (and CUDA) activities, written to <run>/kineto/.

        Kineto's own warm-up step (schedule warmup=1, the lead-in step) runs first and is not in the trace; the
        `steps` recorded steps follow, and the first of them is still marked as the profile's warm-up, as in every
        mode. The profiler's step counter starts at the run's step index, so `ProfilerStep#N` wraps `step(N)`: from
        one `profiler.step()` (see step_marker) to the next, i.e. the timer, the batch (hloscope/input), the step and
        the wait (hloscope/wait)."""
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

        out = self.run_dir / "kineto"
        if self.group is not None:  # one folder per rank; the rank is also in each trace's distributedInfo
            out = out / f"rank-{self.group.rank}"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
        cycle = schedule(wait=0, warmup=1, active=steps)
        profiler = profile(activities=activities, schedule=lambda number: cycle(max(number - first, 0)),
                           on_trace_ready=tensorboard_trace_handler(str(out)), record_shapes=False)
        # Number the profiler's steps like the run's: ProfilerStep#<first> is Kineto's untraced warm-up step, and
        # ProfilerStep#N wraps step(N). The schedule is shifted by `first`, so only the marker names change.
        profiler.step_num = first
        profiler.current_action = profiler.schedule(first)
        self._kineto = profiler
        with profiler:
            yield
        if self.group is not None:
            self.group.barrier()  # every rank has written its trace
            out = self.run_dir / "kineto"
        result.artifacts = [{"kind": "trace", "path": str(path.relative_to(self.run_dir)), "format": TRACE_KINETO,
                             "module": None, "stage": "profile", "train_step": True}
                            for path in sorted(out.rglob("*.json*"))]

    @contextlib.contextmanager
    def step_marker(self, index: int):
        """Kineto's `ProfilerStep#N` runs from one `profiler.step()` to the next: close it after the step."""
        yield
        self._kineto.step()

    def artifacts(self) -> list[dict]:
        self.completed = True  # the driver asks for the artifacts once every step of the run has finished
        if not (self.options.dump_hlo and self.options.compile_model):
            return []
        return collect_inductor_code(self.debug_dir, self.run_dir, self.options.keep_all)

    def info(self) -> dict:
        device_name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
        autocast_dtype = self.workload.autocast_dtype if self.workload is not None else None
        autocast = str(autocast_dtype).replace("torch.", "") if autocast_dtype else None
        return {"framework": "pytorch", "device": str(self.device), "device_name": device_name,
                "device_kind": device_name, "torch_cuda": torch.version.cuda,
                "precision": {"requested": self.options.precision,
                              "float32_matmul_precision": torch.get_float32_matmul_precision(),
                              "matmul_precision": torch.get_float32_matmul_precision(),
                              **_tf32_switches(),
                              "autocast": autocast, "compute_dtype": autocast or "float32",
                              "param_dtype": "float32"},
                "attention": {"implementation": self.attn_implementation,
                              "source": f"transformers {self.options.preset.config_class}._attn_implementation"},
                "compile": ({"api": "torch.compile", **compile_kwargs(COMPILE_KWARGS, self.options)}
                            if self.options.compile_model
                            else {"api": None, "backend": "eager"}),
                "donation": {"state_in_place": True, "how": "optimizer.step() updates the parameters in place"},
                "threads": self.torch_threads(),
                **({"devices": self.group.describe(self.options.batch_size)} if self.group is not None else {})}

    def close(self) -> None:
        if self.group is not None:
            for failure in self.group.close(self.completed):
                print(f"hloscope: {self.options.mode} --devices {self.options.devices}: {failure}", file=sys.stderr,
                      flush=True)


def _tf32_switches() -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return {"cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}


def collect_inductor_code(debug_dir: Path, run_dir: Path, keep_all: bool) -> list[dict]:
    """Copy each compiled graph's output_code.py (and with keep_all, its whole debug folder) into hlo/inductor/."""
    artifacts = []
    target = run_dir / "hlo" / "inductor"
    for code in sorted(debug_dir.rglob("output_code.py")):
        graph = code.parent.name  # e.g. model__0_forward_1.0 / model__0_backward_2.1
        destination = target / graph
        destination.mkdir(parents=True, exist_ok=True)
        if keep_all:
            shutil.copytree(code.parent, destination, dirs_exist_ok=True)
        else:
            shutil.copy2(code, destination / "output_code.py")
        artifacts.append({"kind": "inductor_code", "path": f"hlo/inductor/{graph}/output_code.py", "module": graph,
                          "stage": "backward" if "backward" in graph else "forward" if "forward" in graph else "graph",
                          "train_step": True, "format": "python"})
    shutil.rmtree(debug_dir, ignore_errors=True)
    return artifacts
