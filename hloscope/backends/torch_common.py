"""Pieces shared by the PyTorch and PyTorch/XLA modes: the HuggingFace model, SGD, synthetic batches, precision."""

from __future__ import annotations

import os
import sys

from hloscope.errors import MissingDependency, UsageError
from hloscope.models.presets import VitPreset

LEARNING_RATE = 0.01  # same as the JAX mode


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


def build_model(preset: VitPreset, seed: int):
    """HuggingFace ViTForImageClassification (NCHW input) with eager attention, on the CPU, seeded."""
    torch = import_torch()
    try:
        from transformers import ViTConfig, ViTForImageClassification
    except ImportError as error:
        raise MissingDependency("transformers<5", str(error)) from None
    torch.manual_seed(seed)
    config = ViTConfig(**preset.vit_config_kwargs(), attn_implementation="eager")
    return ViTForImageClassification(config)


def device_pool(preset: VitPreset, batch_size: int, seed: int, device):
    """The shared synthetic pool (same numbers as the JAX mode) as torch tensors on `device`."""
    torch = import_torch()
    from hloscope.backends.data import synthetic_pool

    return [(torch.from_numpy(images).to(device), torch.from_numpy(labels).long().to(device))
            for images, labels in synthetic_pool(preset, batch_size, seed)]


def check_precision(precision: str) -> None:
    if precision not in ("fp32", "tf32", "bf16"):
        raise UsageError(f"unknown precision {precision!r}; choose fp32, tf32 or bf16")


def loss_of(outputs) -> float:
    return float(outputs.detach().float().cpu().item())
