"""`--mode torch_xla --devices N`: PyTorch/XLA's SPMD, as its users write data parallelism for one host:
`torch_xla.runtime.use_spmd()` before any XLA tensor exists, a one-axis `Mesh` over the N devices, every batch
annotated with `mark_sharding(batch, mesh, ("data", None, ...))`, the parameters left unannotated (replicated). The
step is still one lazy graph; XLA's SPMD partitioner splits it over the devices and inserts the gradient all-reduce.

On a CPU-only host the N devices are the PJRT CPU client's, `CPU_NUM_DEVICES=N` (set by
hloscope.backends.devices.prepare_environment before torch_xla starts); on a TPU host they are its TPU cores, and SPMD
spans every device of the host, so N must be their number. Imports torch_xla.
"""

from __future__ import annotations

import numpy as np
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

from hloscope.errors import UsageError

DATA_AXIS = "data"


class Spmd:
    def __init__(self, count: int, batch_size: int):
        xr.use_spmd()  # before the first XLA tensor: one virtual device over every device of the host
        available = xr.global_runtime_device_count()
        if available != count:
            raise UsageError(f"--devices {count}: torch_xla's SPMD spans every device of the host and it has "
                             f"{available} ({xr.device_type()}); use --devices {available}")
        self.count = count
        self.batch_size = batch_size
        self.mesh = xs.Mesh(np.arange(count), (count,), (DATA_AXIS,))

    def place(self, tensor):
        """A batch tensor on the device, sharded on its first dimension (the samples) over the mesh."""
        xs.mark_sharding(tensor, self.mesh, (DATA_AXIS, *([None] * (tensor.dim() - 1))))
        return tensor

    def describe(self) -> dict:
        """run.json `environment.devices`."""
        platform = str(xr.device_type())
        made_by = (f"{self.count} devices of the PJRT CPU client in one process (CPU_NUM_DEVICES={self.count}); they "
                   "share this host's cores and memory, so the all-reduce is a memory copy: on a TPU host the mesh "
                   "is the host's TPU cores and the all-reduce goes over the chips' interconnect" if platform == "CPU"
                   else f"the {self.count} {platform} devices of this host, all of them (SPMD spans every device)")
        return {"count": self.count, "platform": platform.lower(), "strategy": "data parallel",
                "engine": "torch_xla SPMD (torch_xla.runtime.use_spmd, xs.Mesh, xs.mark_sharding), one lazy graph",
                "mesh_shape": {DATA_AXIS: self.count}, "batch_sharding": f"mark_sharding(batch, mesh, ('{DATA_AXIS}', "
                                                                      "None, ...))",
                "state_sharding": "replicated (parameters not annotated)", "global_batch": self.batch_size,
                "per_device_batch": self.batch_size // self.count, "processes": 1, "made_by": made_by}
