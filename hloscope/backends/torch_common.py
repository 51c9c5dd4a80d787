"""Pieces shared by the PyTorch and PyTorch/XLA modes: importing torch, precision checks, and their common Session
(the step itself is `hloscope.backends.torch_workload`)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from hloscope.backends.base import INPUT_ANNOTATION, Session, thread_settings
from hloscope.backends.data import parity_batch, synthetic_pool
from hloscope.backends.devices import threads_per_process
from hloscope.backends.torch_workload import as_input
from hloscope.errors import MissingDependency, UsageError

if TYPE_CHECKING:
    from hloscope.backends.torch_workload import TorchWorkload


def import_torch():
    try:
        import torch
    except ImportError:
        raise MissingDependency("torch") from None
    return torch


def keep_transformers_off_jax() -> None:
    """transformers imports JAX/Flax whenever they are installed, even for its PyTorch models. A PyTorch run process
    needs neither, so tell transformers not to load them (only effective before its first import; lasts for the
    process, which is a run process)."""
    if "transformers" not in sys.modules and "jax" not in sys.modules:
        os.environ.setdefault("USE_FLAX", "0")
        os.environ.setdefault("USE_TF", "0")


def check_precision(precision: str) -> None:
    if precision not in ("fp32", "tf32", "bf16"):
        raise UsageError(f"unknown precision {precision!r}; choose fp32, tf32 or bf16")


def loss_of(outputs) -> float:
    return float(outputs.detach().float().cpu().item())


class TorchSession(Session):
    """A mode whose step is the shared PyTorch workload (`self.workload`, built in the subclass's setup): fetch the
    batch (hloscope/input), the injected host delay (--inject-host-delay), then the train step, returned without waiting."""

    workload: TorchWorkload | None = None  # set by the subclass's setup()

    def batch_count(self) -> int:
        """Batches a --data loader run draws: every warm-up, timed and profiled step, and Kineto's lead-in step."""
        return self.options.warmup + self.options.steps + self.options.profile_steps + 2

    @property
    def built_workload(self) -> TorchWorkload:
        """The workload, once setup() has built it (the timing loop never steps a session before its setup)."""
        if self.workload is None:
            raise RuntimeError(f"{type(self).__name__}.setup() has not built the workload")
        return self.workload

    def step(self, index: int):
        workload = self.built_workload
        with self.annotate(INPUT_ANNOTATION):
            images, labels = workload.batch(index)
            if self.trim_batch_from is not None and index >= self.trim_batch_from:
                images, labels = images[:-1], labels[:-1]
        self.inject_host_delay()
        return workload.train_step(images, labels)

    def loss_of(self, outputs) -> float:
        return loss_of(outputs)

    def step_batch(self):
        """One batch on the device, as the step takes it (the memory ledger's inputs): the pool's first, or the first
        batch's shapes from the shared synthetic data with --data loader (drawing from the loader would shift the
        steps' batches)."""
        workload = self.built_workload
        if workload.pool is not None:
            return workload.pool[0]
        torch = import_torch()
        images, labels = synthetic_pool(self.options.preset, self.options.batch_size, self.options.seed, pool_size=1)[0]
        return (as_input(torch, images, self.options.preset).to(workload.device),
                torch.from_numpy(labels).long().to(workload.device))

    def parity(self) -> dict:
        """Forward with the loss and backward on the shared first batch, no optimizer step; gradients cleared after.
        The weights are the seeded PyTorch model's, as in every mode under --check-parity."""
        torch = import_torch()
        workload = self.built_workload
        images, labels = parity_batch(self.options.preset, self.options.batch_size, self.options.seed)

        images = as_input(torch, images, self.options.preset).to(workload.device)
        labels = torch.from_numpy(labels).long().to(workload.device)
        parameters = [p for p in workload.model.parameters() if p.requires_grad]
        workload.optimizer.zero_grad(set_to_none=True)
        with workload.autocast():
            loss = workload.model(**{workload.input_name: images}, labels=labels).loss
        loss.backward()
        with torch.no_grad():
            grad_norm = torch.linalg.vector_norm(torch.stack(
                [torch.linalg.vector_norm(p.grad.float()) for p in parameters if p.grad is not None]))
            weights_norm = torch.linalg.vector_norm(torch.stack(
                [torch.linalg.vector_norm(p.detach().float()) for p in parameters]))
        workload.sync()  # torch_xla: cut and run the graph
        result = {"loss": loss_of(loss), "grad_norm": float(grad_norm.cpu()), "weights_norm": float(weights_norm.cpu()),
                  "parameters": len(parameters),
                  "weights": "transformers' PyTorch model initialised under torch.manual_seed(--seed)"}
        workload.optimizer.zero_grad(set_to_none=True)
        return result

    @property
    def model(self):
        return self.built_workload.model

    @property
    def attn_implementation(self) -> str | None:
        return self.workload.attn_implementation if self.workload is not None else None

    def limit_torch_threads(self) -> None:
        """--threads N: torch's intra-op threads to N (the driver has already set the CPU affinity and
        OMP_NUM_THREADS before torch started)."""
        if self.options.threads is not None:  # DDP's ranks: their share of the N CPUs
            import_torch().set_num_threads(threads_per_process(self.options.mode, self.options.devices,
                                                               self.options.threads))

    def torch_threads(self) -> dict:
        torch = import_torch()
        return thread_settings(torch_num_threads=torch.get_num_threads(),
                               torch_num_interop_threads=torch.get_num_interop_threads())
