"""Pieces shared by the PyTorch and PyTorch/XLA modes: importing torch, precision checks, and their common Session
(the step itself is `hloscope.backends.torch_workload`)."""

from __future__ import annotations

import os
import sys

from hloscope.backends.base import INPUT_ANNOTATION, Session, thread_settings
from hloscope.errors import MissingDependency, UsageError


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
    batch (hloscope/input), the test hook's host delay, then the train step, returned without waiting."""

    workload = None  # hloscope.backends.torch_workload.TorchWorkload, set by setup()

    def batch_count(self) -> int:
        """Batches a --data loader run draws: every warm-up, timed and profiled step, and Kineto's lead-in step."""
        return self.options.warmup + self.options.steps + self.options.profile_steps + 2

    def step(self, index: int):
        with self.annotate(INPUT_ANNOTATION):
            images, labels = self.workload.batch(index)
        self.test_host_delay()
        return self.workload.train_step(images, labels)

    def loss_of(self, outputs) -> float:
        return loss_of(outputs)

    @property
    def model(self):
        return self.workload.model

    @property
    def attn_implementation(self) -> str | None:
        return self.workload.attn_implementation if self.workload is not None else None

    def torch_threads(self) -> dict:
        torch = import_torch()
        return thread_settings(torch_num_threads=torch.get_num_threads(),
                               torch_num_interop_threads=torch.get_num_interop_threads())
