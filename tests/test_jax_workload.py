"""The JAX workload's initial weights: compiled with cheaper options than XLA's default, and still Flax's own values."""

from __future__ import annotations

import numpy as np
import pytest

from hloscope.backends.jax_workload import INIT_COMPILER_OPTIONS, build_jax_workload, init_compiler_options


@pytest.mark.slow
def test_the_initial_weights_are_flaxs_bit_for_bit():
    """The workload initialises the model with INIT_COMPILER_OPTIONS on a CPU; the values must be those of Flax's
    init_weights compiled with XLA's defaults, leaf by leaf and bit for bit (from the same seed)."""
    import jax
    import jax.numpy as jnp
    from transformers import FlaxViTForImageClassification, ViTConfig

    from hloscope.models.presets import get_preset

    assert init_compiler_options() == INIT_COMPILER_OPTIONS  # the tests run on a CPU
    preset = get_preset("vit-tiny")
    model = FlaxViTForImageClassification(
        ViTConfig(**preset.vit_config_kwargs(), attn_implementation="eager"), seed=3, dtype=jnp.float32,
        _do_init=False, input_shape=(1, preset.image_size, preset.image_size, preset.num_channels))
    flax_defaults = jax.jit(model.init_weights, static_argnums=1)(model.key, model.input_shape)
    built = build_jax_workload(preset, batch_size=2, seed=3).state.params
    expected, got = jax.tree_util.tree_flatten_with_path(flax_defaults)[0], jax.tree_util.tree_leaves(built)
    assert len(expected) == len(got) == 40
    for (path, want), have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(np.asarray(have), np.asarray(want), err_msg=jax.tree_util.keystr(path))
