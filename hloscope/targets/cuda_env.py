"""Which Python interpreter has jax's CUDA plugin, for the deviceless GPU compile (run as a subprocess).

Order: `$HLOSCOPE_TARGET_PYTHON`; the checkout's `.venv-cuda` (made by `scripts/setup-cuda-target.sh`); this interpreter,
when it has the plugin itself (a user's `jax[cuda12]` environment on a GPU machine).
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

from hloscope.errors import MissingDependency

ENV_VAR = "HLOSCOPE_TARGET_PYTHON"
SETUP_SCRIPT = "scripts/setup-cuda-target.sh"


def _checkout_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _has_plugin_here() -> bool:
    try:
        metadata.version("jax-cuda12-plugin")
        metadata.version("jax-cuda12-pjrt")
    except metadata.PackageNotFoundError:
        return False
    return True


def find_target_python() -> str | None:
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for root in (_checkout_root(), Path.cwd()):
        candidate = root / ".venv-cuda" / "bin" / "python"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    if _has_plugin_here():
        return sys.executable
    return None


def require_target_python() -> str:
    python = find_target_python()
    if python is None and os.environ.get(ENV_VAR):
        raise MissingDependency("jax-cuda12-plugin", f"{ENV_VAR}={os.environ[ENV_VAR]} is not an executable Python")
    if python is None:
        raise MissingDependency("jax-cuda12-plugin", f"--target compiles with jax's CUDA plugin; create its environment "
                                f"with `bash {SETUP_SCRIPT}` or set {ENV_VAR} to a Python that has jax[cuda12]")
    return python
