"""The PyTorch training step, shared by `run --mode pytorch[+compile]`, `run --mode torch_xla[+compile]` and the
GPU-target capture of PyTorch/XLA's graph (`hloscope.targets.capture_torch_xla`), as `jax_workload.py` is for JAX.

HuggingFace's ViTForImageClassification (NCHW input, eager attention), seeded; SGD or AdamW (--optimizer); the model's own cross-entropy
loss; the synthetic batches every framework shares (`hloscope.backends.data`). What differs between the modes is a
parameter, never a copy: the device, the autocast device type, the compile wrapper (`torch.compile` keyword arguments
or None) and the sync hook (`torch_xla.sync`, which cuts and dispatches a lazy graph; nothing for eager PyTorch).
Each mode sets its framework's matmul precision itself (different APIs) before building.
Importing this module imports nothing; `build_torch_workload` imports torch and transformers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hloscope.backends.optimizers import LEARNING_RATE as LEARNING_RATE  # every mode's, re-exported
from hloscope.backends.optimizers import torch_optimizer
from hloscope.errors import MissingDependency
from hloscope.models.presets import Preset

# hloscope.backends.data (numpy, ~90 ms) and torch_common (a cycle) are imported inside the builders, with torch: so
# importing this module imports nothing.

# --attention -> transformers' attn_implementation
ATTN_IMPLEMENTATIONS = {"eager": "eager", "sdpa": "sdpa", "flash": "flash_attention_2"}


def build_model(preset: Preset, seed: int, attention: str = "eager"):
    """The preset's PyTorch model (ViTForImageClassification, NCHW input, for the ViTs; `preset.torch_class` for the
    text presets), on the CPU, seeded; `attention` is transformers' `attn_implementation` (eager by default, as the
    benchmark)."""
    from hloscope.backends.torch_common import import_torch  # cycle: torch_common imports this

    torch = import_torch()
    try:
        import transformers

        config_class = getattr(transformers, preset.config_class)
        model_class = getattr(transformers, preset.torch_class)
    except (ImportError, AttributeError) as error:
        raise MissingDependency("transformers<5", str(error)) from None
    torch.manual_seed(seed)
    config = config_class(**preset.transformers_config_kwargs(),
                          attn_implementation=ATTN_IMPLEMENTATIONS.get(attention, attention))
    return model_class(config)


def device_pool(preset: Preset, batch_size: int, seed: int, device):
    """The shared synthetic pool (same numbers as the JAX mode) as torch tensors on `device`."""
    from hloscope.backends.data import synthetic_pool
    from hloscope.backends.torch_common import import_torch  # cycle: torch_common imports this

    torch = import_torch()
    return [(as_input(torch, images, preset).to(device), torch.from_numpy(labels).long().to(device))
            for images, labels in synthetic_pool(preset, batch_size, seed)]


def as_input(torch, array, preset):
    """The model's input as a torch tensor: float images, or token ids as int64 (what embeddings take)."""
    tensor = torch.from_numpy(array)
    return tensor.long() if preset.kind == "text" else tensor


@dataclass
class TorchWorkload:
    model: Any                      # the module the step calls (torch.compile'd when asked)
    optimizer: Any                  # --optimizer (SGD or AdamW) over the model's parameters
    device: Any                     # torch.device the model and batches live on
    autocast_dtype: Any             # torch.bfloat16 for --precision bf16, else None
    autocast_device: str            # torch.autocast's device_type: "cpu", "cuda", "xla"
    sync: Callable[[], None]        # the mode's device sync hook (torch_xla.sync); a no-op for eager PyTorch
    pool: list | None = None        # --data device: batches already on the device, cycled
    batches: Any = None             # --data loader: an iterator over the DataLoader
    input_name: str = "pixel_values"  # the model's keyword for its input (input_ids for the text presets)
    shard: Callable[[Any], Any] | None = None  # --devices N under DDP: this rank's slice of a global batch
    place: Callable[[Any], Any] | None = None  # --devices N under torch_xla SPMD: a batch on the device, sharded

    @property
    def attn_implementation(self) -> str | None:
        return getattr(getattr(self.model, "config", None), "_attn_implementation", None)

    def batch(self, index: int):
        """Step `index`'s (images, labels) on the device: a pool lookup, or the DataLoader's next batch moved over."""
        if self.pool is not None:
            return self.pool[index % len(self.pool)]
        images, labels = next(self.batches)
        if self.shard is not None:
            images, labels = self.shard(images), self.shard(labels)
        images, labels = images.to(self.device), labels.to(self.device)
        if self.place is not None:
            images, labels = self.place(images), self.place(labels)
        return images, labels

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        import torch

        return torch.autocast(device_type=self.autocast_device, dtype=self.autocast_dtype)

    def model_forward(self, model, images, labels):
        """`model`'s forward with the loss on one batch (the step's, or the eager module's for the memory ledger)."""
        return model(**{self.input_name: images}, labels=labels).loss

    def train_step(self, images, labels):
        """One training step: forward with the loss, backward, optimizer update. Returns the loss tensor without waiting
        for the device (and, under torch_xla, without cutting the graph: that is `sync`)."""
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.model_forward(self.model, images, labels)
        loss.backward()
        self.optimizer.step()
        return loss


def build_torch_workload(preset: Preset, batch_size: int, seed: int, device, *, precision: str,
                         autocast_device: str, compile_kwargs: dict | None = None,
                         sync: Callable[[], None] = lambda: None, data: str = "device",
                         n_batches: int = 0, attention: str = "eager", wrap: Callable[[Any], Any] | None = None,
                         shard: Callable[[Any], Any] | None = None,
                         place: Callable[[Any], Any] | None = None, optimizer_name: str = "sgd") -> TorchWorkload:
    """Model on `device` in training mode, `wrap(model)` when given (DistributedDataParallel), the optimizer, then
    `torch.compile(model, **compile_kwargs)` when given (`optimizer_name`: --optimizer), and the batches: the shared synthetic pool (`data="device"`)
    or the benchmark's DataLoader of `n_batches` batches, each cut to `shard(batch)` when given (a rank's slice) and
    passed through `place(tensor)` once on the device when given (SPMD's sharding annotation)."""
    from hloscope.backends.torch_common import check_precision, import_torch  # cycle: torch_common imports this

    torch = import_torch()
    check_precision(precision)
    model = build_model(preset, seed, attention).to(device)
    # Moving a module to an XLA device unties shared parameters (GPT-2's embedding and LM head: 29 parameters instead
    # of 28 under torch_xla, found by --check-parity); transformers re-ties them. A no-op on the CPU and CUDA.
    if getattr(model, "tie_weights", None) is not None:
        model.tie_weights()
    model.train()
    if wrap is not None:
        model = wrap(model)
    optimizer = torch_optimizer(optimizer_name, model.parameters())
    if compile_kwargs is not None:
        model = torch.compile(model, **compile_kwargs)
    workload = TorchWorkload(model=model, optimizer=optimizer, device=device,
                             autocast_dtype=torch.bfloat16 if precision == "bf16" else None,
                             autocast_device=autocast_device, sync=sync, input_name=preset.input_name, shard=shard,
                             place=place)
    if data == "device":
        workload.pool = device_pool(preset, batch_size, seed, device)
        if shard is not None:
            workload.pool = [(shard(images), shard(labels)) for images, labels in workload.pool]
        if place is not None:
            workload.pool = [(place(images), place(labels)) for images, labels in workload.pool]
    else:
        from hloscope.backends import data as data_module

        workload.batches = iter(data_module.torch_loader(preset, batch_size, n_batches, seed))
    return workload
