"""The only package that runs torch, torch_xla or JAX. One module per framework, imported only when its mode runs.

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


def preflight(mode: str, device: str) -> None:
    """Refuse combinations that cannot work before anything is created or imported (package metadata only)."""
    if mode.startswith("torch_xla") and device == "cuda":
        from importlib import metadata

        try:
            version = metadata.version("torch_xla")
        except metadata.PackageNotFoundError:
            return  # the run itself reports the missing package
        check_torch_xla_cuda(version)


def check_torch_xla_cuda(version: str) -> None:
    """torch_xla removed its CUDA plugin in 2.9 (deprecated in 2.8): say so instead of failing deep inside PJRT."""
    major, minor = (int(part) for part in version.split(".")[:2])
    if (major, minor) >= (2, 9):
        raise UsageError(f"--device cuda --mode torch_xla: torch_xla {version} has no CUDA support (removed in 2.9); "
                         "on a GPU install torch_xla<=2.8 with its CUDA plugin (torch_xla[cuda]) and the matching "
                         "torch, "
                         "or use --mode pytorch / jax")
