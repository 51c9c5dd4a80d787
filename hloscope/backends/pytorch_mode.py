"""`--mode pytorch` (eager) and `pytorch+compile` (torch.compile with inductor).

On CUDA the step is timed until `torch.cuda.synchronize()` returns; on the CPU PyTorch runs synchronously.
With --dump-hlo, inductor's generated code (`output_code.py`: Triton kernels on CUDA, C++ kernels on the CPU) is copied
into `<run>/hlo/inductor/` so that the kernels inductor generated can be counted. Eager PyTorch has no graph.
"""

from __future__ import annotations

import contextlib
import shutil
import time
import warnings
from pathlib import Path

from hloscope.backends.base import (INPUT_ANNOTATION, WAIT_ANNOTATION, ProfileResult, RunOptions, Session, host_memory,
                                    thread_settings)
from hloscope.backends.torch_common import (LEARNING_RATE, build_model, check_precision, device_pool, import_torch,
                                           keep_transformers_off_jax, loss_of)
from hloscope.errors import UsageError

torch = import_torch()

INDUCTOR_DEBUG_DIR = ".inductor_debug"  # inside the run directory while the run lasts
COMPILE_KWARGS = {"backend": "inductor", "mode": None, "fullgraph": False, "dynamic": None}  # torch.compile's defaults


def create_session(options: RunOptions, run_dir: Path) -> "PytorchSession":
    return PytorchSession(options, run_dir)


def pick_device(choice: str):
    if choice == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device (torch.cuda.is_available() is False)")
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def apply_precision(precision: str, device) -> "torch.dtype | None":
    """fp32: true fp32 matmuls and convolutions; tf32: TF32 on Ampere+ (PyTorch's 'high'); bf16: autocast to bf16."""
    check_precision(precision)
    with warnings.catch_warnings():  # torch 2.9 warns that its TF32 switches are being renamed; they still apply
        warnings.simplefilter("ignore", UserWarning)
        torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
    return torch.bfloat16 if precision == "bf16" else None


class PytorchSession(Session):
    def setup(self) -> None:
        options = self.options
        keep_transformers_off_jax()
        self.device = pick_device(options.device)
        self.autocast_dtype = apply_precision(options.precision, self.device)
        model = build_model(options.preset, options.seed).to(self.device)
        model.train()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
        if options.compile_model:
            if options.dump_hlo:
                self._enable_inductor_debug()
            model = torch.compile(model, **COMPILE_KWARGS)
            self.graph = {"kind": "inductor", "note": "torch.compile(backend='inductor'): FX graphs compiled to "
                                                      "generated kernels (see inductor_code artifacts)"}
        else:
            self.graph = {"kind": "none", "note": "eager PyTorch runs operator by operator: there is no graph to dump"}
        self.attn_implementation = getattr(getattr(model, "config", None), "_attn_implementation", None)
        self.model = model
        if options.data == "device":
            self.pool = device_pool(options.preset, options.batch_size, options.seed, self.device)
        else:
            from hloscope.backends.data import torch_loader

            n_batches = options.warmup + options.steps + options.profile_steps + 2
            self.batches = iter(torch_loader(options.preset, options.batch_size, n_batches, options.seed))

    def _enable_inductor_debug(self) -> None:
        """Ask inductor to write its debug trace (FX graphs, IR, output_code.py) under the run directory.

        The FX graph cache is turned off so that the code is generated (and written) even when a previous run
        compiled the same graphs."""
        import torch._inductor.config as inductor_config

        self.debug_dir = self.run_dir / INDUCTOR_DEBUG_DIR
        inductor_config.trace.enabled = True
        inductor_config.trace.debug_dir = str(self.debug_dir)
        inductor_config.fx_graph_cache = False

    def _batch(self, index: int):
        if self.options.data == "device":
            return self.pool[index % len(self.pool)]
        images, labels = next(self.batches)
        return images.to(self.device), labels.to(self.device)

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def annotation(self, name: str):
        return torch.profiler.record_function(name)

    def step(self, index: int):
        with self.annotate(INPUT_ANNOTATION):
            images, labels = self._batch(index)
        self.test_host_delay()
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            loss = self.model(pixel_values=images, labels=labels).loss
        loss.backward()
        self.optimizer.step()
        return loss

    def wait(self, outputs) -> None:
        with self.annotate(WAIT_ANNOTATION):  # on the CPU the step has already finished: an empty annotation
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)

    def loss_of(self, outputs) -> float:
        return loss_of(outputs)

    def compile_counts(self) -> dict[str, int]:
        if not self.options.compile_model:
            return {}
        from torch._dynamo.utils import counters

        return {"dynamo_unique_graphs": counters["stats"]["unique_graphs"],
                "dynamo_recompiles": sum(counters["recompiles"].values()),
                "dynamo_graph_breaks": sum(counters["graph_break"].values())}

    def memory(self) -> dict:
        memory = host_memory()
        if self.device.type == "cuda":
            memory.update({"device_peak_bytes": torch.cuda.max_memory_allocated(self.device),
                           "device_peak_reserved_bytes": torch.cuda.max_memory_reserved(self.device),
                           "source": "torch.cuda.max_memory_allocated()"})
        else:
            memory["source"] = "peak host RSS (CPU)"
        return memory

    def profile(self, steps: int) -> ProfileResult:
        """torch.profiler (Kineto) over `steps` steps, one schedule step each, written to <run>/kineto/.

        Kineto's own warm-up step (schedule warmup=1) runs first and is not in the trace; the `steps` recorded steps
        follow, and the first of them is still marked as the profile's warm-up, as in every mode. The profiler's
        step counter starts at the global step index, so `ProfilerStep#N` wraps `step(N)`: from the previous
        `profiler.step()` to the next, i.e. the timer, the batch (hloscope/input), the step and the wait
        (hloscope/wait)."""
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

        result = ProfileResult(step_marker="ProfilerStep#N (torch.profiler schedule)",
                               annotations={"input": INPUT_ANNOTATION, "wait": WAIT_ANNOTATION},
                               notes=["Kineto's schedule warm-up step ran before the recorded steps (not in the trace)"])
        out = self.run_dir / "kineto"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
        first = self.options.warmup + self.options.steps
        cycle = schedule(wait=0, warmup=1, active=steps)
        profiler = profile(activities=activities, schedule=lambda number: cycle(max(number - first, 0)),
                           on_trace_ready=tensorboard_trace_handler(str(out)), record_shapes=False)
        # Number the profiler's steps like the run's: ProfilerStep#<first> is Kineto's untraced warm-up step, and
        # ProfilerStep#N wraps step(N). The schedule is shifted by `first`, so only the marker names change.
        profiler.step_num = first
        profiler.current_action = profiler.schedule(first)
        with profiler:
            for offset in range(steps + 1):
                start = time.perf_counter()
                self.wait(self.step(first + offset))
                if offset:
                    result.step_times_s.append(time.perf_counter() - start)
                    result.step_numbers.append(first + offset)
                profiler.step()
        result.artifacts = [{"kind": "trace", "path": str(path.relative_to(self.run_dir)), "format": "kineto",
                             "module": None, "stage": "profile", "train_step": True}
                            for path in sorted(out.glob("*.json*"))]
        return result

    def artifacts(self) -> list[dict]:
        if not (self.options.dump_hlo and self.options.compile_model):
            return []
        return collect_inductor_code(self.debug_dir, self.run_dir, self.options.keep_all)

    def info(self) -> dict:
        device_name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
        autocast = str(self.autocast_dtype).replace("torch.", "") if self.autocast_dtype else None
        return {"framework": "pytorch", "device": str(self.device), "device_name": device_name,
                "device_kind": device_name, "torch_cuda": torch.version.cuda,
                "precision": {"requested": self.options.precision,
                              "float32_matmul_precision": torch.get_float32_matmul_precision(),
                              "matmul_precision": torch.get_float32_matmul_precision(),
                              **_tf32_switches(),
                              "autocast": autocast, "compute_dtype": autocast or "float32",
                              "param_dtype": "float32"},
                "attention": {"implementation": getattr(self, "attn_implementation", None),
                              "source": "transformers ViTConfig._attn_implementation"},
                "compile": ({"api": "torch.compile", **COMPILE_KWARGS} if self.options.compile_model
                            else {"api": None, "backend": "eager"}),
                "threads": thread_settings(torch_num_threads=torch.get_num_threads(),
                                           torch_num_interop_threads=torch.get_num_interop_threads())}


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
