"""`--mode jax`: the Flax ViT train step under `jax.jit`, timed until `jax.block_until_ready` returns.

HLO dumps use per-compile XLA options (`jax.jit(..., compiler_options={"xla_dump_to": ...})`), so only the train step's
compilation is dumped (not Flax's ~1,300 op-by-op initialisation modules) and nothing depends on when JAX initialised
its backend. StableHLO comes from `jit(...).lower(...).as_text()`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

from hloscope.backends import xla_dump
from hloscope.backends.base import (
    INPUT_ANNOTATION,
    STEP_MARKER,
    WAIT_ANNOTATION,
    ProfileResult,
    Session,
    thread_settings,
)
from hloscope.backends.data import parity_batch
from hloscope.errors import MissingDependency, UsageError

try:
    import jax
except ImportError:
    raise MissingDependency("jax") from None

from hloscope.backends.data import POOL_SIZE, synthetic_pool, torch_loader
from hloscope.backends.jax_workload import build_jax_workload, to_nhwc
from hloscope.backends.sharding import placement_for
from hloscope.backends.step_inputs import StepInputs

DUMP_DIR = ".xla_dump"  # inside the run directory while the run lasts; its kept files move to hlo/


def pick_device(choice: str):
    """auto: JAX's default device (a GPU when jax[cuda] sees one); cpu/cuda: that platform or a clear error."""
    if choice == "auto":
        return jax.devices()[0]
    platform = "gpu" if choice == "cuda" else choice
    try:
        return jax.devices(platform)[0]
    except RuntimeError:
        available = ", ".join(sorted({d.platform for d in jax.devices()}))
        raise UsageError(f"--device {choice}: JAX sees no {choice} device (available: {available}); "
                         "for CUDA install jax[cuda12]") from None


def keep_transformers_off_torch() -> None:
    """transformers imports torch whenever it is installed, even for its Flax models (seconds of start-up and
    hundreds of MB). In a `run --mode jax` process nothing needs torch, so tell transformers not to load it. Only
    effective before transformers is first imported, and it lasts for the process: a run process, not a library call."""
    if "transformers" not in sys.modules and "torch" not in sys.modules:
        os.environ.setdefault("USE_TORCH", "0")
        os.environ.setdefault("USE_TF", "0")


class JaxSession(Session):
    profile_step_marker = f"{STEP_MARKER} (jax.profiler.StepTraceAnnotation, step_num = N)"

    def prepare_imports(self) -> None:
        """Before the workload is built: environment variables that keep unneeded frameworks out of the process."""
        if self.options.data == "device" and not self.options.check_parity:  # parity converts the torch weights
            keep_transformers_off_torch()

    def build_workload(self):
        """The step to jit and its state (`train_step`, `state`, `batch`, `dtype`): Flax's ViT here, the PyTorch ViT
        through torchax in the torchax mode (a subclass)."""
        options = self.options
        return build_jax_workload(options.preset, options.batch_size, options.precision, options.seed,
                                  torch_weights=options.check_parity, optimizer=options.optimizer)

    def parameters(self, state):
        """The trainable parameters in the step's state (a pytree)."""
        return state.params

    def buffers(self, state):
        """The model's non-trainable state in the step's state: BatchNorm's running statistics (ResNet), else none."""
        return getattr(state, "batch_stats", None)

    def optimizer_state(self, state):
        """The optimizer's part of the step's state: optax's state and TrainState's step count."""
        return (state.opt_state, state.step)

    def step_batch(self):
        """One batch as the train step takes it (the memory ledger's inputs)."""
        return self._pool_or_fresh_batch()

    def parity(self) -> dict:
        images, labels = parity_batch(self.options.preset, self.options.batch_size, self.options.seed)
        images = self.placement.put_batch(self.images(images))
        labels = self.placement.put_batch(labels)
        loss, grad_norm, weights_norm = jax.jit(self.workload.probe)(self.state, images, labels)
        return {"loss": float(loss), "grad_norm": float(grad_norm), "weights_norm": float(weights_norm),
                "parameters": len(jax.tree_util.tree_leaves(self.parameters(self.state))),
                "weights": self.workload.weights}

    def images(self, images_nchw):
        """The shared NCHW images in the layout the model takes (Flax's ViT: NHWC); token ids as they are."""
        return to_nhwc(images_nchw) if self.options.preset.kind == "image" else images_nchw

    def setup(self) -> None:
        options = self.options
        self.prepare_imports()
        self.device = pick_device(options.device)
        jax.config.update("jax_default_device", self.device)
        # --devices N: a mesh over N devices, batch sharded, state replicated (hloscope/backends/sharding.py)
        self.placement = placement_for(self.device, options.devices, options.batch_size)
        self.compiles = 0
        jax.monitoring.register_event_duration_secs_listener(self._count_compile)
        workload = self.build_workload()
        self.workload = workload
        # Commit the state to the device like the batches: jit keys its cache on committedness, and the step's outputs
        # are committed, so uncommitted inputs would make the second step compile again.
        self.state = self.placement.put_state(workload.state)
        # --dump-hlo: the initial state (host copies, taken before the first step) and the first steps' batches and
        # losses, saved with the program for replay's loss-trajectory check (hloscope/backends/step_inputs.py)
        self.step_inputs = StepInputs() if options.dump_hlo else None
        compiler_options = {}
        if options.dump_hlo:
            self.dump_dir = self.run_dir / DUMP_DIR
            compiler_options = {"xla_dump_to": str(self.dump_dir), "xla_dump_hlo_module_re": "jit_train_step",
                                "xla_dump_hlo_as_text": True}
        self.train_step_compiler_options = compiler_options
        # --donate: the state's buffers are donated to the step's outputs (the updated state is written over them)
        self.train_step = jax.jit(workload.train_step, compiler_options=compiler_options or None,
                                  donate_argnums=(0,) if options.donate else (), **self.placement.jit_kwargs())
        if options.data == "device":
            self.pool = [(self.placement.put_batch(self.images(images)), self.placement.put_batch(labels))
                         for images, labels in synthetic_pool(options.preset, options.batch_size, options.seed)]
            # trimmed on the host and placed now: slicing device arrays in the timed window would compile the slice
            self.trimmed_pool = [(self.placement.put_batch(self.images(images[:-1])),
                                  self.placement.put_batch(labels[:-1]))
                                 for images, labels in synthetic_pool(options.preset, options.batch_size, options.seed)
                                 ] if self.trim_batch_from is not None else []
        else:
            n_batches = options.warmup + options.steps + options.profile_steps + 1
            self.batches = iter(torch_loader(options.preset, options.batch_size, n_batches, options.seed))
        self.graph = {"kind": "xla", "module": "jit_train_step"}

    def _count_compile(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            self.compiles += 1

    def _batch(self, index: int):
        trim = self.trim_batch_from is not None and index >= self.trim_batch_from
        if self.options.data == "device":
            return (self.trimmed_pool if trim else self.pool)[index % POOL_SIZE]
        images, labels = next(self.batches)
        if trim:
            images, labels = images[:-1], labels[:-1]
        batch = (self.placement.put_batch(self.images(images.numpy())),
                 self.placement.put_batch(labels.numpy().astype("int32")))
        # device_put only enqueues the host-to-device copy: wait for it here, so that the whole transfer lies in the
        # input phase (hloscope/input), not in the train step's dispatch, as PyTorch's `.to(device)` does
        return jax.block_until_ready(batch)

    def annotation(self, name: str):
        return jax.profiler.TraceAnnotation(name)

    def step(self, index: int):
        with self.annotate(INPUT_ANNOTATION):
            images, labels = self._batch(index)
        self.inject_host_delay()
        if self.step_inputs is not None and index == 0:
            self.step_inputs.capture_initial(self.state)  # before the step donates it
        self.state, loss = self.train_step(self.state, images, labels)
        if self.step_inputs is not None:
            self.step_inputs.record(index, (images, labels), loss)
        return self.state, loss

    def wait(self, outputs) -> None:
        with self.annotate(WAIT_ANNOTATION):
            jax.block_until_ready(outputs)

    def loss_of(self, outputs) -> float:
        return float(outputs[1])

    def compile_counts(self) -> dict[str, int]:
        # jit's own count of compiled variants: a private method of the jitted function (no public API says it)
        cache_size: Any = getattr(self.train_step, "_cache_size")  # noqa: B009
        return {"xla_compiles": self.compiles, "jit_cache_entries": cache_size()}

    def device_memory(self) -> dict | None:
        """The first device's peak (run.json `memory.device_peak_bytes`, as before); with --devices N > 1 also every
        device's (`memory.devices`), or, where memory_stats() is None (XLA's CPU devices), a note saying so."""
        per_device = [(device, device.memory_stats()) for device in self.placement.devices]  # None on the CPU
        stats = per_device[0][1]
        memory: dict = {}
        if stats:
            memory = {"device_peak_bytes": stats.get("peak_bytes_in_use"), "device_bytes_limit": stats.get("bytes_limit"),
                      "source": "jax Device.memory_stats()"}
        if len(per_device) > 1:
            memory["devices"] = [{"id": device.id, "peak_bytes": (s or {}).get("peak_bytes_in_use"),
                                  "bytes_limit": (s or {}).get("bytes_limit")} for device, s in per_device]
            if not all(s for _, s in per_device):
                memory["devices_note"] = (
                    f"jax Device.memory_stats() is None on {self.device.platform} devices: no per-device peak; the "
                    "N devices share this process's memory (peak_host_rss_bytes)")
        return memory or None

    @contextlib.contextmanager
    def profiler(self, result: ProfileResult, first: int, steps: int):
        """JAX's profiler (xplane.pb under <run>/plugins/profile/<timestamp>/)."""
        before = xla_dump.list_profile_files(self.run_dir)
        with jax.profiler.trace(str(self.run_dir)):
            yield
        result.artifacts = xla_dump.find_profile_files(self.run_dir, before)

    def step_marker(self, index: int):
        """StepTraceAnnotation around the batch (hloscope/input), the dispatch and the device wait (hloscope/wait)."""
        return jax.profiler.StepTraceAnnotation(STEP_MARKER, step_num=index)

    def artifacts(self) -> list[dict]:
        if not self.options.dump_hlo:
            return []
        images, labels = self._pool_or_fresh_batch()
        stablehlo = self.train_step.lower(self.state, images, labels).as_text()
        hlo_dir = self.run_dir / "hlo"
        hlo_dir.mkdir(exist_ok=True)
        (hlo_dir / "jit_train_step.stablehlo.mlir").write_text(stablehlo, encoding="utf-8")
        entries = [{"kind": "stablehlo", "path": "hlo/jit_train_step.stablehlo.mlir", "module": "jit_train_step",
                    "stage": "stablehlo", "train_step": True, "format": "mlir"}]
        entries += xla_dump.collect(self.dump_dir, self.run_dir, self.options.keep_all,
                                    is_train_step=lambda entry: entry["module"] == "jit_train_step")
        saved = self.step_inputs.save(self.run_dir, "jit_train_step") if self.step_inputs is not None else None
        return entries + ([saved] if saved else [])

    def _pool_or_fresh_batch(self):
        if self.options.data == "device":
            return self.pool[0]
        return self.workload.batch

    def info(self) -> dict:
        matmul = jax.default_matmul_precision.value
        return {"framework": "jax", "backend": jax.default_backend(), "device": str(self.device),
                "device_kind": self.device.device_kind, "platform": self.device.platform,
                "precision": {"requested": self.options.precision,
                              "jax_default_matmul_precision": matmul,
                              "matmul_precision": matmul or "default",
                              "compute_dtype": self.workload.dtype, "param_dtype": "float32"},
                # transformers' Flax models have one attention, softmax(QK^T)V written out in jnp
                # (dot_product_attention_weights); a convolutional preset has none
                "attention": {"implementation": "eager", "source": (
                    f"{self.options.preset.flax_class} (dot_product_attention_weights)"
                    if self.options.preset.has_attention
                    else f"{self.options.preset.flax_class} (convolutional: no attention)")},
                # Per-compile XLA options, without the dump ones (--dump-hlo: they change no code, only what is kept).
                "compile": {"api": "jax.jit", "backend": "xla", "options": {
                    key: value for key, value in (getattr(self, "train_step_compiler_options", None) or {}).items()
                    if not key.startswith("xla_dump")}},
                "donation": self.donation(),
                "threads": thread_settings(), **self.devices_info()}

    def donation(self) -> dict:
        """run.json `environment.donation`: whether jit donates the state (--donate) or writes the updated state to new
        buffers (the default)."""
        if self.options.donate:
            return {"state_in_place": True,
                    "how": "jax.jit(..., donate_argnums=(0,)): the state's buffers are donated to the updated state"}
        return {"state_in_place": False,
                "how": "jax.jit without donate_argnums: new buffers for the updated state every step"}

    def devices_info(self) -> dict:
        """run.json `environment.devices` with --devices N > 1: mesh, shardings, how the devices were made."""
        placement = getattr(self, "placement", None)
        described = placement.describe() if placement is not None else None
        return {"devices": described} if described else {}

    def close(self) -> None:
        try:
            jax.monitoring.unregister_event_duration_listener(self._count_compile)
        except (AttributeError, ValueError, AssertionError):
            pass
