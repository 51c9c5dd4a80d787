"""`--devices N`: which modes run data-parallel, the checks made before anything starts, and the environment a run
process needs before its framework is imported. Imports no framework.

Which modes support N > 1 is said by the registry (`Mode.data_parallel` in hloscope.modes); the others are refused in
one line naming the mode. The global batch stays `--batch-size`: each of the N devices takes batch / N samples, so the
batch must divide by N.

Where the N devices come from: JAX sees every accelerator of the host (the first N GPUs / TPU cores are used); on a
CPU-only host XLA's host platform makes N virtual CPU devices in the one process when `XLA_FLAGS` holds
`--xla_force_host_platform_device_count=N` before the XLA backend starts, which `prepare_environment` sets. The flag
changes only the CPU platform, so it is harmless on a GPU host.
"""

from __future__ import annotations

import os
import re

from hloscope.errors import UsageError
from hloscope.modes import DATA_PARALLEL_MODES, get_mode
from hloscope.runs.xla_flags import HOST_DEVICE_COUNT_FLAG

CPU_DEVICE_COUNT_ENV = "CPU_NUM_DEVICES"  # torch_xla's PJRT CPU client
_FLAG_PATTERN = re.compile(re.escape(HOST_DEVICE_COUNT_FLAG) + r"=\S*")


def check_devices(mode: str, devices: int, batch_size: int) -> None:
    """Refuse, in one line, --devices N for a mode without data parallelism or a batch N does not divide."""
    if devices < 1:
        raise UsageError(f"--devices {devices}: expected a device count >= 1")
    if devices == 1:
        return
    entry = get_mode(mode)
    if not entry.data_parallel:
        why = f" ({entry.data_parallel_note})" if entry.data_parallel_note else ""
        raise UsageError(f"--devices {devices} --mode {mode}: this mode runs on one device only{why}; --devices > 1 "
                         f"works with --mode {', '.join(DATA_PARALLEL_MODES)}")
    if batch_size % devices:
        raise UsageError(f"--devices {devices} --batch-size {batch_size}: the global batch must divide by the device "
                         f"count (each device takes batch / devices samples); try --batch-size "
                         f"{max(devices, batch_size - batch_size % devices)}")


def host_device_flags(flags: str, devices: int) -> str:
    """`flags` (an XLA_FLAGS value) with XLA's host-platform device count set to `devices` (any earlier one removed)."""
    kept = _FLAG_PATTERN.sub("", flags).split()
    return " ".join([*kept, f"{HOST_DEVICE_COUNT_FLAG}={devices}"])


def prepare_environment(mode: str, devices: int, threads: int | None = None) -> None:
    """In a run process, before the mode's framework is imported: for a JAX-based mode with N > 1 devices, let XLA's
    CPU platform have N devices (read once, when JAX starts its backends); for torch_xla, its PJRT CPU client; for
    DDP, torchrun's one OpenMP thread per rank."""
    if devices <= 1 or not get_mode(mode).data_parallel:
        return
    imports = get_mode(mode).imports
    if "jax" in imports:
        os.environ["XLA_FLAGS"] = host_device_flags(os.environ.get("XLA_FLAGS", ""), devices)
    elif "torch_xla" in imports:  # PJRT's CPU client makes this many devices (read when it starts)
        os.environ[CPU_DEVICE_COUNT_ENV] = str(devices)
    else:  # DDP, one process per rank: torchrun's OMP_NUM_THREADS=1 (unless set), read when torch starts OpenMP
        # (set later, in a process that has imported torch, it left inductor's kernels ~10x slower on vit-tiny)
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        if threads is not None:  # --threads N: the ranks share the N CPUs, N // K threads each
            os.environ["OMP_NUM_THREADS"] = str(threads_per_process(mode, devices, threads))


def threads_per_process(mode: str, devices: int, threads: int) -> int:
    """The threads each process of a run may use under --threads N: N, except that DDP's K rank processes share the
    N CPUs, N // K each (at least 1), as torchrun gives each rank its share."""
    imports = get_mode(mode).imports  # DDP: the data-parallel modes that start neither JAX nor torch_xla
    ddp = devices > 1 and bool(get_mode(mode).data_parallel) and "jax" not in imports and "torch_xla" not in imports
    return max(1, threads // devices) if ddp else threads


def how_ranks_are_made(platform: str, devices: int, backend: str) -> str:
    """run.json `environment.devices.made_by` for DDP: N processes started like torchrun's, and what a GPU host changes."""
    started = (f"{devices} processes on this host started like torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, "
               f"MASTER_PORT; rank 0 is the run process), torch.distributed {backend}")
    if platform == "cpu":
        return (f"{started} on the CPU: the ranks share this host's cores and memory and the all-reduce goes through "
                "gloo over loopback TCP; on a GPU host each rank takes one GPU (cuda:LOCAL_RANK) and the all-reduce is "
                "NCCL's (NVLink / PCIe), overlapped with the backward pass by DDP's gradient buckets")
    return f"{started}, rank r on {platform}:r (the all-reduce is NCCL's, overlapped with backward by DDP's buckets)"


def how_devices_are_made(platform: str, devices: int) -> str:
    """run.json `environment.devices.made_by`: where the N devices came from, and what differs on a GPU host."""
    if platform == "cpu":
        return (f"{devices} virtual CPU devices of XLA's host platform in one process (XLA_FLAGS "
                f"{HOST_DEVICE_COUNT_FLAG}={devices}); they share this host's cores and memory, so the collectives are "
                "memory copies: on a GPU host the same step runs on N GPUs and the all-reduce goes over NCCL "
                "(NVLink / PCIe)")
    return f"the first {devices} {platform} devices JAX sees on this host (collectives through XLA's {platform} runtime)"
