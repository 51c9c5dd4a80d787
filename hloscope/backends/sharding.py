"""Where a JAX-based mode's state and batches live: one device (`--devices 1`, today's behaviour), or a
`jax.sharding.Mesh` over N devices for data parallelism (`--devices N`): the batch sharded on the mesh's `data` axis,
parameters and optimizer state replicated, one jitted step whose gradient all-reduce XLA's SPMD partitioner inserts.

Shared by `--mode jax` and `--mode torchax` (a JaxSession). Imports JAX.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from hloscope.backends.devices import how_devices_are_made
from hloscope.errors import UsageError

DATA_AXIS = "data"


class Placement:
    """One device: everything committed to it, the step jitted without shardings."""

    count = 1

    def __init__(self, device: Any):
        self.device = device

    def put_state(self, tree: Any) -> Any:
        return jax.device_put(tree, self.device)

    def put_batch(self, array: Any) -> Any:
        return jax.device_put(array, self.device)

    def jit_kwargs(self) -> dict:
        return {}

    def describe(self) -> dict | None:
        """run.json `environment.devices` (None for one device: the record stays as it was)."""
        return None

    @property
    def devices(self) -> list[Any]:
        """The devices the step runs on, in mesh order."""
        return [self.device]


class DataParallel(Placement):
    """N devices in a one-axis mesh: batch sharded on `data`, state replicated."""

    def __init__(self, device: Any, count: int, batch_size: int):
        super().__init__(device)
        available = jax.devices(device.platform)
        if len(available) < count:
            raise UsageError(f"--devices {count}: JAX sees {len(available)} {device.platform} device(s) "
                             f"({', '.join(str(d) for d in available)})")
        self.count = count
        self.batch_size = batch_size
        self.mesh = Mesh(np.array(available[:count]), (DATA_AXIS,))
        self.data = NamedSharding(self.mesh, PartitionSpec(DATA_AXIS))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())

    @property
    def devices(self) -> list[Any]:
        return list(self.mesh.devices.flat)

    def put_state(self, tree: Any) -> Any:
        return jax.device_put(tree, self.replicated)

    def put_batch(self, array: Any) -> Any:
        return jax.device_put(array, self.data)

    def jit_kwargs(self) -> dict:
        # (state, images, labels) -> (state, loss): state in and out replicated, the batch split on `data`
        return {"in_shardings": (self.replicated, self.data, self.data),
                "out_shardings": (self.replicated, self.replicated)}

    def describe(self) -> dict:
        platform = self.device.platform
        return {"count": self.count, "platform": platform, "ids": [d.id for d in self.mesh.devices.flat],
                "kinds": sorted({d.device_kind for d in self.mesh.devices.flat}),
                "strategy": "data parallel", "engine": "jax.sharding.Mesh + NamedSharding, one jax.jit step (SPMD)",
                "mesh_shape": {DATA_AXIS: self.count}, "batch_sharding": f"PartitionSpec('{DATA_AXIS}')",
                "state_sharding": "replicated (PartitionSpec())", "global_batch": self.batch_size,
                "per_device_batch": self.batch_size // self.count, "processes": 1,
                "made_by": how_devices_are_made(platform, self.count)}


def placement_for(device: Any, devices: int, batch_size: int) -> Placement:
    return DataParallel(device, devices, batch_size) if devices > 1 else Placement(device)
