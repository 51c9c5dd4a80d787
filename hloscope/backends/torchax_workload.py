"""The torchax training step, shared by `hloscope run --mode torchax` and the GPU-target capture of its graph.

The PyTorch model of the PyTorch modes (`torch_workload.build_model`: HuggingFace's ViTForImageClassification, NCHW
input, seeded, the model's own cross-entropy loss) runs through torchax's JAX interop: its parameters and buffers
become JAX arrays, and `torch.func`-style functional calls of the module, inside a torchax environment, trace into JAX
operations. The whole step (forward, loss, `jax.value_and_grad`, optimizer) is one `jax.jit` function, like the JAX
mode's, so its graph is one XLA module `jit_train_step` that meets the same XLA compiler.

Optimizer: optax (--optimizer: SGD or AdamW, hyper-parameters as every other mode), not torch.optim through torchax: the
update is then the same JAX code as the JAX mode's, and the comparison with it isolates the model's two
implementations (PyTorch modules traced by torchax against Flax modules).

--precision: fp32 / tf32 set `jax_default_matmul_precision` like the JAX mode (`highest` / `tensorfloat32`); bf16 runs
the forward under torchax's autocast (`torchax.amp.autocast`, PyTorch's CUDA autocast policy: matmuls and
convolutions in bf16) with fp32 parameters, like `torch.autocast` in the PyTorch modes. torchax 0.0.13's autocast
fails on ops whose "promote" policy gets a list of tensors (`aten.cat`, `aten.stack`: "'list' object has no attribute
'dtype'"); `_complete_torchax_autocast` replaces its policy function, for this process, with one that promotes the floating
tensors inside the list to the widest of their dtypes, which is what PyTorch's autocast does for these ops. Its policy
is also keyed by aten ops, but torchax dispatches `F.linear` and `torch.conv2d` at the torch-function level (and
convolution as `aten.convolution`), so without help the Linear and patch-embedding layers stayed fp32 (12 of 53 dots in
bf16 on vit-tiny) and the loss was computed in bf16; those keys are added with PyTorch's policy for them (linear and
convolution in lower precision, cross-entropy in fp32): then every dot and convolution of the step is bf16 and the
loss fp32, as under torch.autocast.

Importing this module imports nothing; `build_torchax_workload` imports torch, torchax, JAX, optax and transformers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hloscope.backends.jax_workload import apply_precision, kept_for_backward
from hloscope.backends.optimizers import optax_optimizer
from hloscope.backends.torch_workload import build_model
from hloscope.errors import MissingDependency
from hloscope.models.presets import Preset, ResNetPreset, get_preset

# hloscope.backends.data (numpy, ~90 ms) is imported in build_torchax_workload, with the frameworks: so importing this
# module imports nothing.


def keep_transformers_off_flax() -> None:
    """transformers imports Flax (and TensorFlow) whenever installed; a torchax run needs torch and JAX, not Flax.
    Only effective before transformers is first imported; lasts for the process (a run process)."""
    if "transformers" not in sys.modules:
        os.environ.setdefault("USE_FLAX", "0")
        os.environ.setdefault("USE_TF", "0")


def import_torchax():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise MissingDependency("torch") from None
    try:
        import torchax
    except ImportError:
        raise MissingDependency("torchax==0.0.13") from None
    try:
        import optax
    except ImportError:
        raise MissingDependency("optax") from None
    return torchax, optax


# the execute_policy _complete_torchax_autocast installed into torchax.amp (None until it has)
_installed_policy: Callable[..., Any] | None = None


def _complete_torchax_autocast() -> None:
    """torchax 0.0.13 `amp.execute_policy(PROMOTE, ...)` reads `.dtype` of every positional argument, so `cat` and
    `stack` (a list of tensors, then an int) raise. Promote the floating tensors found anywhere in the arguments."""
    import torch
    from torch.utils import _pytree as pytree
    from torchax import amp

    global _installed_policy
    original = amp.execute_policy
    if original is _installed_policy:  # already completed in this process
        return

    def execute_policy(policy, args, kwargs, target_lower_fp):
        if policy is not amp.CastPolicy.PROMOTE:
            return original(policy, args, kwargs, target_lower_fp)

        def is_float(a):
            return isinstance(a, torch.Tensor) and a.is_floating_point()

        floats = [a for a in pytree.tree_leaves((args, kwargs)) if is_float(a)]
        if not floats:
            return args, kwargs
        widest = max((a.dtype.itemsize, str(a.dtype), a.dtype) for a in floats)[2]
        return pytree.tree_map_only(is_float, lambda a: a.to(widest), (args, kwargs))

    _installed_policy = execute_policy
    amp.execute_policy = execute_policy
    for func in (torch._C._nn.linear, torch.conv2d, torch.ops.aten.convolution.default):
        amp.autocast_policy.setdefault(func, amp.CastPolicy.LOWER_PRECISION_FP)
    # PyTorch's autocast runs cross_entropy_loss in fp32; torchax's map has that aten op, but torchax decomposes
    # F.cross_entropy into these two, which it does not list
    for func in (torch.ops.aten._log_softmax.default, torch.ops.aten.nll_loss_forward.default):
        amp.autocast_policy.setdefault(func, amp.CastPolicy.FP32)


@dataclass
class TorchaxWorkload:
    train_step: Callable[..., Any]  # (state, images, labels) -> (state, loss); pure, not jitted
    state: Any                      # (params, buffers, opt_state): dicts of JAX arrays named like the state dict
    batch: tuple[Any, Any]          # (images NCHW, labels) on the default device
    matmul_precision: str | None
    dtype: str                      # compute dtype: float32, or bfloat16 under torchax's autocast
    attn_implementation: str | None
    model: Any = None               # the torch module (its weights are the JAX arrays in `state`)
    # --check-parity: (state, images, labels) -> (loss, gradient global norm, weights global norm), pure, no update
    probe: Callable[..., Any] | None = None
    weights: str = "transformers' PyTorch model initialised under torch.manual_seed(--seed), as JAX arrays"
    # the memory ledger: (state, images, labels) -> what autodiff keeps for backward (jax_workload.kept_for_backward)
    residuals: Callable[..., Any] | None = None


def _write_back_batch_norm_statistics(env, torch) -> None:
    """torchax 0.0.13's batch norm in training mode (`jaten._aten__native_batch_norm_legit`) computes the new running
    mean and variance and drops them: the buffers would keep their initial values. Override the two aten entry points
    (`native_batch_norm`, where F.batch_norm arrives, and `_native_batch_norm_legit`) with PyTorch's functional batch
    norm, whose new running statistics (unbiased variance, as eager PyTorch) are copied into the buffers in place."""

    def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
        out, mean, rstd, new_mean, new_var = torch.ops.aten._native_batch_norm_legit_functional.default(
            input, weight, bias, running_mean, running_var, training, momentum, eps)
        if training and running_mean is not None:
            running_mean.copy_(new_mean)
            running_var.copy_(new_var)
        return out, mean, rstd

    for op in (torch.ops.aten.native_batch_norm.default, torch.ops.aten._native_batch_norm_legit.default):
        env.override_op_definition(op, batch_norm)


def build_torchax_workload(preset: Preset | str, batch_size: int, precision: str = "fp32", seed: int = 0,
                           attention: str = "eager", optimizer: str = "sgd") -> TorchaxWorkload:
    """The PyTorch model of `seed`, its weights as JAX arrays, the optax optimizer's state and one batch, ready to jit and time."""
    keep_transformers_off_flax()
    torchax, optax = import_torchax()
    import jax
    import jax.numpy as jnp
    import torch
    from torchax.interop import JittableModule

    from hloscope.backends.data import synthetic_pool

    if isinstance(preset, str):
        preset = get_preset(preset)
    matmul_precision, dtype = apply_precision(precision)
    model = build_model(preset, seed, attention=attention)
    model.train()
    module = JittableModule(model)  # parameters and buffers by name; tied weights once
    env = torchax.default_env()
    params = env.t2j_copy(dict(module.params))
    buffers = env.t2j_copy(dict(module.buffers))
    tx = optax_optimizer(optimizer)
    autocast_dtype = torch.bfloat16 if dtype == "bfloat16" else None
    if autocast_dtype is not None:
        _complete_torchax_autocast()

    # BatchNorm (ResNet) updates its running statistics in place during the training forward: torch.func's functional
    # call writes them into the buffer tensors it was given, whose new JAX values the step returns as the new buffers.
    # The other presets' buffers (position ids, masks) never change: their step passes them through untouched.
    stateful = isinstance(preset, ResNetPreset)
    if stateful:
        _write_back_batch_norm_statistics(env, torch)

    def loss_fn(params, buffers, images, labels):
        t_params, t_buffers, t_images, t_labels = env.j2t_iso((params, buffers, images, labels))
        with env:
            if autocast_dtype is not None:
                from torchax.amp import autocast

                with autocast("jax", dtype=autocast_dtype, env=env):
                    loss = module.functional_call("forward", t_params, t_buffers, **{preset.input_name: t_images},
                                                  labels=t_labels).loss
            else:
                loss = module.functional_call("forward", t_params, t_buffers, **{preset.input_name: t_images},
                                              labels=t_labels).loss
        return env.t2j_iso(loss).astype(jnp.float32), (env.t2j_iso(t_buffers) if stateful else buffers)

    def train_step(state, images, labels):
        params, buffers, opt_state = state
        (loss, buffers), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, buffers, images, labels)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), buffers, opt_state), loss

    def probe(state, images, labels):
        params, buffers, _ = state
        (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, buffers, images, labels)
        return loss, optax.global_norm(grads), optax.global_norm(params)

    def residuals(state, images, labels):
        params, buffers, _ = state
        return kept_for_backward(lambda p: loss_fn(p, buffers, images, labels), params, buffers, images, labels,
                                 has_aux=True)

    state = (params, buffers, tx.init(params))
    images, labels = synthetic_pool(preset, batch_size, seed, pool_size=1)[0]
    batch = (jax.device_put(images), jax.device_put(labels))
    return TorchaxWorkload(train_step=train_step, state=state, batch=batch, matmul_precision=matmul_precision,
                           dtype=dtype, attn_implementation=getattr(model.config, "_attn_implementation", None),
                           model=model, probe=probe, residuals=residuals)
