"""`--mode torchax`: the PyTorch ViT of the PyTorch modes, run through torchax under `jax.jit` (see
`torchax_workload`), timed until `jax.block_until_ready` returns.

Everything after the workload is the JAX mode's (this Session is a JaxSession): the same timer and statistics, the
HLO dumped by JAX's own dump path (per-compile `xla_dump_to` of the `jit_train_step` module, as XLA_FLAGS'
`--xla_dump_to` would but for that one compile), StableHLO from `lower()`, the JAX profiler's xplane with the same step
marker and host annotations, device memory from `Device.memory_stats()`, XLA backend compiles counted by
`jax.monitoring`. What differs: the model (PyTorch modules traced by torchax, NCHW input, the model's own loss) and the
optimizer (optax, SGD or AdamW, on the torch parameters' JAX arrays).
"""

from __future__ import annotations

from hloscope.backends.jax_mode import JaxSession, jax
from hloscope.backends.optimizers import describe
from hloscope.backends.torchax_workload import build_torchax_workload, keep_transformers_off_flax


class TorchaxSession(JaxSession):
    def prepare_imports(self) -> None:
        keep_transformers_off_flax()

    def build_workload(self):
        options = self.options
        return build_torchax_workload(options.preset, options.batch_size, options.precision, options.seed,
                                      attention=options.attention, optimizer=options.optimizer)

    def parameters(self, state):
        return state[0]  # (params, buffers, opt_state)

    def buffers(self, state):
        return state[1]

    def optimizer_state(self, state):
        return state[2]

    def images(self, images_nchw):
        return images_nchw  # the PyTorch model takes NCHW, like the PyTorch modes

    def info(self) -> dict:
        import torchax

        info = super().info()
        matmul = jax.default_matmul_precision.value
        info.update({
            "framework": "torchax",
            "torchax": torchax.__version__,
            "precision": {"requested": self.options.precision,
                          "jax_default_matmul_precision": matmul,
                          "matmul_precision": matmul or "default",
                          "torchax_autocast": self.workload.dtype if self.workload.dtype != "float32" else None,
                          "compute_dtype": self.workload.dtype, "param_dtype": "float32"},
            "attention": {"implementation": self.workload.attn_implementation,
                          "source": f"transformers {self.options.preset.config_class}._attn_implementation "
                                    "(PyTorch model traced by torchax)"},
            "optimizer": f"optax {describe(self.options.optimizer)}, on the JAX arrays of the torch parameters",
        })
        info["compile"] = {**info["compile"], "api": "jax.jit (torchax functional call of the torch module)"}
        return info
