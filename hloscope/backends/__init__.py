"""The only package that runs torch, torch_xla or JAX. One module per framework, imported only when its mode runs.

Which modes exist, and which Session class implements each, is said by the registry in `hloscope.modes`.
"""

from __future__ import annotations

from hloscope.errors import UsageError
from hloscope.modes import MODES, get_mode, mode_name, parse_modes, resolve

__all__ = ["check_torch_xla_cuda", "mode_name", "parse_modes", "preflight", "torch_xla_preflight"]


def preflight(mode: str, device: str, attention: str = "eager", devices: int = 1, batch_size: int = 1) -> None:
    """Refuse combinations that cannot work before anything is created or imported (the mode's registry check)."""
    from hloscope.backends.devices import check_devices

    entry = get_mode(mode)
    check_devices(mode, devices, batch_size)
    if attention not in entry.attention:
        why = f": {entry.attention_note}" if entry.attention_note else ""
        raise UsageError(f"--attention {attention} --mode {mode}: this mode runs only --attention "
                         f"{' or '.join(entry.attention)}{why}")
    check = entry.preflight
    if check:
        resolve(check)(device)


def torch_xla_preflight(device: str) -> None:
    """torch_xla modes: --device cuda needs a torch_xla with CUDA (package metadata only, nothing imported)."""
    if device != "cuda":
        return
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
        on_cuda = " / ".join(dict.fromkeys(m.framework for m in MODES if "cuda" in m.devices))
        raise UsageError(f"--device cuda --mode torch_xla: torch_xla {version} has no CUDA support (removed in 2.9); "
                         "on a GPU install torch_xla<=2.8 with its CUDA plugin (torch_xla[cuda]) and the matching "
                         "torch, "
                         f"or use --mode {on_cuda}")
