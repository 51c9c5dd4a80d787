"""The only package that runs torch, torch_xla or JAX. One module per framework; each is imported only when its mode runs.

Mode names are what users type (`--modes`); `MODE_MODULES` maps each to the module that implements it.
"""

from __future__ import annotations

from hloscope.errors import UsageError

MODE_MODULES: dict[str, str] = {
    "pytorch": "hloscope.backends.pytorch_mode",
    "pytorch+compile": "hloscope.backends.pytorch_mode",
    "torch_xla": "hloscope.backends.torch_xla_mode",
    "torch_xla+compile": "hloscope.backends.torch_xla_mode",
    "jax": "hloscope.backends.jax_mode",
}
ALL_MODES = tuple(MODE_MODULES)
# The framework each mode needs, for a clear "install X" message before anything runs.
MODE_PACKAGES: dict[str, tuple[str, ...]] = {
    "pytorch": ("torch", "transformers"),
    "pytorch+compile": ("torch", "transformers"),
    "torch_xla": ("torch", "torch_xla", "transformers"),
    "torch_xla+compile": ("torch", "torch_xla", "transformers"),
    "jax": ("jax", "flax", "optax", "transformers"),
}


def mode_name(framework: str, compile_model: bool) -> str:
    """`run --mode pytorch --compile-model` -> `pytorch+compile`; JAX is always jitted."""
    if framework == "jax":
        return "jax"
    return f"{framework}+compile" if compile_model else framework


def parse_modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODE_MODULES]
    if unknown:
        raise UsageError(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(ALL_MODES)}")
    if not modes:
        raise UsageError("no modes given")
    return list(dict.fromkeys(modes))
