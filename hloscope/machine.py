"""What this machine gives a process: memory it may still use, the CPUs it may run on, and a free port. One answer
to each question for every part of hloscope (HLO and xplane readers, TensorBoard, the torch_xla backend, tests)."""

from __future__ import annotations

import os

from hloscope.errors import UsageError

try:
    import resource
except ImportError:  # a platform without it (Windows): address_space_left answers None
    resource = None  # type: ignore[assignment]


def available_memory() -> int | None:
    """Bytes this process may still use: Linux's MemAvailable (what can be had without swapping; SC_AVPHYS_PAGES,
    free pages only, is about half of it on a machine with a page cache), capped by what the address-space limit
    (ulimit -v) leaves; None where neither is known."""
    figures = [figure for figure in (_mem_available(), address_space_left()) if figure is not None]
    return min(figures) if figures else None


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def address_space_left() -> int | None:
    """What RLIMIT_AS (ulimit -v) leaves to this process beyond its current virtual size; None when unlimited."""
    if resource is None:
        return None
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status") as f:
            size = next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:")), 0)
        return max(0, soft - size)
    except (OSError, ValueError):
        return None


def gb(n: float) -> str:
    """Bytes in GB (10^9), the one unit hloscope's messages use for memory."""
    return f"{n / 1e9:.1f} GB"


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now on `host` (the OS picks it); the caller binds it a moment later."""
    import socket  # here, not at the top: the readers of HLO and traces import this module, and socket takes ~2 ms

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            return int(probe.getsockname()[1])
    except OSError as error:  # an unknown name, or an address this machine does not have
        raise UsageError(f"cannot listen on --host {host}: {error.strerror or error}") from None


def cpu_affinity() -> int | None:
    """How many CPUs this process may run on (its CPU affinity); None where the platform does not say (not Linux)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def usable_cpus() -> int:
    """CPUs this process may run on (its CPU affinity; the machine's count where affinity is unknown)."""
    return cpu_affinity() or os.cpu_count() or 1


def check_threads(threads: int | None) -> None:
    """--threads N: at least 1, and no more than the CPUs this process may use (one line, exit 2)."""
    if threads is None:
        return
    cpus = usable_cpus()
    if threads < 1 or threads > cpus:
        raise UsageError(f"--threads {threads}: this machine lets hloscope use {cpus} CPU"
                         f"{'' if cpus == 1 else 's'}; give 1 to {cpus}")


def limit_threads(threads: int | None) -> None:
    """--threads N, before any framework is imported: the process's CPU affinity to the first N CPUs it may use
    (every framework's thread pools size themselves from it, and its children inherit it) and OMP_NUM_THREADS=N
    (OpenMP, which PyTorch's intra-op pool follows)."""
    if threads is None:
        return
    check_threads(threads)
    try:
        allowed = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, allowed[:threads])
    except (AttributeError, OSError):
        pass  # no affinity on this platform: the environment variable alone
    os.environ["OMP_NUM_THREADS"] = str(threads)
