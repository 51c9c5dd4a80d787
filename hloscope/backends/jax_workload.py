"""The JAX training step, shared by `hloscope run --mode jax` and the GPU-target compiler.

`jax.jit(w.train_step).lower(w.state, *w.batch)` is exactly the step that `run --mode jax` times: HuggingFace's
FlaxViTForImageClassification (NHWC input), a Flax TrainState with optax SGD (or AdamW: --optimizer), softmax cross-entropy.
Importing this module imports no framework; its builders import JAX, Flax, optax and transformers (`_imports`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from hloscope.backends.optimizers import optax_optimizer
from hloscope.backends.torch_workload import build_model
from hloscope.errors import MissingDependency, UsageError
from hloscope.models.presets import Preset, ResNetPreset, TextPreset, get_preset

# hloscope.backends.data (numpy, ~90 ms) is imported in the builders too, after JAX.

# --precision -> (jax_default_matmul_precision, compute dtype name). fp32 asks for true fp32 matmuls (XLA's GPU default
# would use TF32); bf16 follows Flax's recommended way: bf16 compute dtype, fp32 parameters.
PRECISIONS = {"fp32": ("highest", "float32"), "tf32": ("tensorfloat32", "float32"), "bf16": (None, "bfloat16")}


def _imports():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        raise MissingDependency("jax") from None
    try:
        import optax
    except ImportError:
        raise MissingDependency("optax") from None
    try:
        from flax.training.train_state import TrainState
    except ImportError:
        raise MissingDependency("flax") from None
    try:
        from transformers import FlaxViTForImageClassification, ViTConfig
    except ImportError as error:
        raise MissingDependency("transformers<5", f"FlaxViTForImageClassification: {error}") from None
    return jax, jnp, optax, TrainState, FlaxViTForImageClassification, ViTConfig


@dataclass
class JaxWorkload:
    train_step: Callable[..., Any]  # (state, images, labels) -> (state, loss); pure, not jitted
    state: Any                      # flax TrainState
    batch: tuple[Any, Any]          # (images NHWC, labels) on the default device
    matmul_precision: str | None
    dtype: str
    # --check-parity: (state, images, labels) -> (loss, gradient global norm, weights global norm), pure, no update
    probe: Callable[..., Any] | None = None
    weights: str = "FlaxViTForImageClassification initialised by Flax from --seed"
    # the memory ledger: (state, images, labels) -> what autodiff keeps for backward (kept_for_backward); pure
    residuals: Callable[..., Any] | None = None


# The initialisation runs once, so how fast its code runs does not matter; how long XLA takes to compile it does (on a
# CPU it took longer than the train step's own compile). LLVM at level 1 instead of XLA's default compiles it with a
# third of the CPU time and gives the same values, bit for bit: every preset, measured against the default (vit-tiny:
# 1.2 s against 3.0 s; resnet-tiny 1.2 against 3.9; vit-base 3.8 against 4.6). tests/test_jax_workload.py checks it.
# CPU only: the only backend it was measured on.
INIT_COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}


def init_compiler_options() -> dict[str, Any] | None:
    """INIT_COMPILER_OPTIONS where the model is initialised on a CPU (JAX's default device, a Device or a platform
    name, else the default backend), else XLA's defaults."""
    import jax

    config: Any = jax.config  # its flags are attributes that jax's type stubs do not declare
    device = config.jax_default_device
    platform = getattr(device, "platform", device) or jax.default_backend()
    return INIT_COMPILER_OPTIONS if platform == "cpu" else None


def apply_precision(precision: str) -> tuple[str | None, str]:
    """Set JAX's process-wide matmul precision for --precision; returns (matmul precision, compute dtype)."""
    import jax

    if precision not in PRECISIONS:
        raise UsageError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    matmul_precision, dtype = PRECISIONS[precision]
    jax.config.update("jax_default_matmul_precision", matmul_precision)
    return matmul_precision, dtype


def build_jax_workload(preset: Preset | str, batch_size: int, precision: str = "fp32", seed: int = 0,
                       torch_weights: bool = False, optimizer: str = "sgd") -> JaxWorkload:
    """Model, optimizer state and one batch of synthetic data from `seed`, ready to jit and time. `torch_weights`
    (--check-parity): start from the seeded PyTorch model's weights, converted to Flax (`parity_weights`); `optimizer`:
    --optimizer (hloscope.backends.optimizers)."""
    jax, jnp, optax, TrainState, FlaxViT, ViTConfig = _imports()

    from hloscope.backends.data import synthetic_pool

    if isinstance(preset, str):
        preset = get_preset(preset)
    matmul_precision, dtype = apply_precision(precision)
    if isinstance(preset, (TextPreset, ResNetPreset)):
        model = _flax_paired_model(preset, seed, getattr(jnp, dtype))
    else:
        config = ViTConfig(**preset.vit_config_kwargs(), attn_implementation="eager")
        model = FlaxViT(config, seed=seed, dtype=getattr(jnp, dtype), _do_init=False,
                        input_shape=(1, preset.image_size, preset.image_size, preset.num_channels))
    if torch_weights:
        params, weights = parity_weights(preset, seed, model)
    else:
        # One jitted program instead of Flax's eager init, which compiles each of its ~75 operations on its own
        # (3-4 s of XLA compiles before the step's own on a CPU): the same keys give the same values.
        params = jax.jit(model.init_weights, static_argnums=1,
                         compiler_options=init_compiler_options())(model.key, model.input_shape)
        weights = f"{preset.flax_class} initialised by Flax from --seed"
    if isinstance(preset, ResNetPreset):  # BatchNorm: its running statistics ride in the state, updated every step
        return _batch_stats_workload(preset, model, params, weights, batch_size, precision, seed, optimizer)
    # The Flax module itself takes NHWC; the HF wrapper's __call__ would transpose from NCHW first.
    state = TrainState.create(apply_fn=model.module.apply, params=params, tx=optax_optimizer(optimizer))
    # TrainState starts with step=0, a weakly typed Python int; after one step it is an int32 array, and jit would
    # compile the step a second time. Start with the array so that the first compile is the only one.
    state = state.replace(step=jnp.asarray(0, dtype=jnp.int32))

    def loss_fn(params, images, labels):
        # Dropout probabilities of these configs are 0, so the deterministic forward is the training one.
        if preset.kind == "text":  # the HF wrapper builds the attention mask and positions; train=False: no dropout
            logits = model(images, params=params, train=False).logits.astype(jnp.float32)
            if preset.task == "causal_lm":  # next-token prediction, as the PyTorch models shift inside their loss
                logits, labels = logits[:, :-1], labels[:, 1:]
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        logits = model.module.apply({"params": params}, images, deterministic=True).logits
        return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels).mean()

    def train_step(state, images, labels):
        loss, grads = jax.value_and_grad(loss_fn)(state.params, images, labels)
        return state.apply_gradients(grads=grads), loss

    def probe(state, images, labels):
        loss, grads = jax.value_and_grad(loss_fn)(state.params, images, labels)
        return loss, optax.global_norm(grads), optax.global_norm(state.params)

    def residuals(state, images, labels):
        return kept_for_backward(lambda params: loss_fn(params, images, labels), state.params, images, labels)

    images, labels = synthetic_pool(preset, batch_size, seed, pool_size=1)[0]
    batch = (jax.device_put(to_nhwc(images) if preset.kind == "image" else images), jax.device_put(labels))
    return JaxWorkload(train_step=train_step, state=state, batch=batch, matmul_precision=matmul_precision, dtype=dtype,
                       probe=probe, weights=weights, residuals=residuals)


def kept_for_backward(loss_of_params: Callable[..., Any], params, *inputs, has_aux: bool = False) -> list:
    """The values `jax.vjp` of `loss_of_params` at `params` keeps for the backward pass (its residuals), without the
    parameters and the inputs themselves: the activations autodiff saves, before XLA fuses or rematerialises. Meant
    for `jax.eval_shape` (shapes and dtypes, nothing computed)."""
    import jax

    pullback = jax.vjp(loss_of_params, params, has_aux=True)[1] if has_aux else jax.vjp(loss_of_params, params)[1]
    known = {id(leaf) for leaf in jax.tree_util.tree_leaves((params, inputs))}
    return [leaf for leaf in jax.tree_util.tree_leaves(pullback) if id(leaf) not in known]


def _flax_paired_model(preset: TextPreset | ResNetPreset, seed: int, dtype):
    """The Flax class paired with the preset's PyTorch class (transformers 4.57: FlaxGPT2LMHeadModel,
    FlaxLlamaForCausalLM, FlaxBertForSequenceClassification, FlaxResNetForImageClassification), randomly initialised
    from `seed`."""
    try:
        import transformers

        config = getattr(transformers, preset.config_class)(**preset.transformers_config_kwargs())
        model_class = getattr(transformers, preset.flax_class)
    except (ImportError, AttributeError) as error:
        raise MissingDependency("transformers<5", f"{preset.flax_class}: {error}") from None
    if isinstance(preset, ResNetPreset):  # the HF wrapper's input shape is NHWC
        shape: tuple[int, ...] = (1, preset.image_size, preset.image_size, preset.num_channels)
    else:
        shape = (1, int(preset.seq_len or 0))
    return model_class(config, seed=seed, dtype=dtype, input_shape=shape, _do_init=False)


def _batch_stats_workload(preset: ResNetPreset, model, variables, weights: str, batch_size: int, precision: str,
                          seed: int, optimizer: str = "sgd") -> JaxWorkload:
    """ResNet's step: the forward in training mode (BatchNorm normalises with the batch's statistics) with
    `mutable=["batch_stats"]`, whose updated running statistics replace the state's (a TrainState with a
    `batch_stats` field, as in Flax's ImageNet example); the optimizer on the parameters only."""
    jax, jnp, optax, _, _, _ = _imports()
    from flax.training.train_state import TrainState

    from hloscope.backends.data import synthetic_pool

    class BatchStatsState(TrainState):
        batch_stats: Any = None

    matmul_precision, dtype = PRECISIONS[precision]
    state = BatchStatsState.create(apply_fn=model.module.apply, params=variables["params"],
                                   batch_stats=variables["batch_stats"], tx=optax_optimizer(optimizer))
    state = state.replace(step=jnp.asarray(0, dtype=jnp.int32))  # as for the other presets: one compile

    def loss_fn(params, batch_stats, images, labels):
        outputs, mutated = model.module.apply({"params": params, "batch_stats": batch_stats}, images,
                                              deterministic=False, mutable=["batch_stats"])
        loss = optax.softmax_cross_entropy_with_integer_labels(outputs.logits.astype(jnp.float32), labels).mean()
        return loss, mutated["batch_stats"]

    def train_step(state, images, labels):
        (loss, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, state.batch_stats,
                                                                               images, labels)
        return state.apply_gradients(grads=grads).replace(batch_stats=batch_stats), loss

    def probe(state, images, labels):
        (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, state.batch_stats, images, labels)
        return loss, optax.global_norm(grads), optax.global_norm(state.params)

    def residuals(state, images, labels):
        return kept_for_backward(lambda params: loss_fn(params, state.batch_stats, images, labels), state.params,
                                 state.batch_stats, images, labels, has_aux=True)

    images, labels = synthetic_pool(preset, batch_size, seed, pool_size=1)[0]
    batch = (jax.device_put(to_nhwc(images)), jax.device_put(labels))
    return JaxWorkload(train_step=train_step, state=state, batch=batch, matmul_precision=matmul_precision, dtype=dtype,
                       probe=probe, weights=weights, residuals=residuals)


def parity_weights(preset: Preset, seed: int, flax_model) -> tuple[Any, str]:
    """The seeded PyTorch model's weights (`torch_workload.build_model`, as every PyTorch mode and torchax start from)
    as Flax parameters, converted by transformers' own `convert_pytorch_state_dict_to_flax` (Linear kernels
    transposed, convolution kernels to HWIO, LayerNorm weight -> scale). Imports torch: only under --check-parity."""
    try:
        from transformers.modeling_flax_pytorch_utils import convert_pytorch_state_dict_to_flax
    except ImportError as error:
        raise MissingDependency("transformers<5", f"convert_pytorch_state_dict_to_flax: {error}") from None
    from flax.traverse_util import flatten_dict, unflatten_dict

    torch_model = build_model(preset, seed)
    # The converter reads only the Flax model's base prefix and its parameters' names and shapes: the shape tree
    # stands for parameters never initialised (the model is built with _do_init=False)
    target = SimpleNamespace(base_model_prefix=flax_model.base_model_prefix, params=flax_model.params_shape_tree)
    params = convert_pytorch_state_dict_to_flax(torch_model.state_dict(), target)
    # The state dict also holds tied copies (GPT-2's lm_head.weight = wte): keep only what the Flax model has
    own = flatten_dict(flax_model.params_shape_tree)
    params = unflatten_dict({key: value for key, value in flatten_dict(params).items() if key in own})
    return params, ("transformers' PyTorch model initialised under torch.manual_seed(--seed), converted to Flax by "
                    "transformers.modeling_flax_pytorch_utils.convert_pytorch_state_dict_to_flax")


def to_nhwc(images_nchw):
    """Flax's ViT module takes NHWC; the shared synthetic data is NCHW (PyTorch's layout)."""
    return images_nchw.transpose(0, 2, 3, 1)
