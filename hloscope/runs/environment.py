"""Where a run happened: Python, packages, host, CPU. Framework-specific facts (device name, precision in effect)
are added by the mode's Session.info(). Package versions come from installed metadata: nothing here imports a
framework."""

from __future__ import annotations

import os
import platform
import socket
import sys
from importlib import metadata

from hloscope import __version__

PACKAGES = ("torch", "torch_xla", "torchax", "jax", "jaxlib", "flax", "optax", "transformers", "numpy", "tensorboard",
            "tensorboard-plugin-profile", "xprof", "click", "rich")
ENV_VARS = ("XLA_FLAGS", "PJRT_DEVICE", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "TORCHINDUCTOR_CACHE_DIR",
            "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_HLO_DEBUG", "XLA_IR_DEBUG",
            "XLA_ENABLE_PARAM_ALIASING",  # torch_xla's donation of the parameters' buffers (--donate / --no-donate)
            # thread settings: OpenMP/MKL/OpenBLAS (PyTorch's CPU ops, inductor's C++ kernels), TensorFlow-style
            # thread pools (XLA/TSL), JAX's and torch_xla's CPU device counts, DDP's torchrun variables
            "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_PROC_BIND", "KMP_AFFINITY",
            "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS", "JAX_NUM_CPU_DEVICES", "CPU_NUM_DEVICES",
            "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def package_versions(names=PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect_environment() -> dict:
    return {
        "hloscope": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
        "env": env_vars(),
    }


def env_vars() -> dict[str, str]:
    """The environment variables that change what the frameworks do (a mode may set some of them in its setup)."""
    return {name: os.environ[name] for name in ENV_VARS if name in os.environ}
