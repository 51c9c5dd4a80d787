"""Write the HLO of sharded JAX programs on 8 virtual CPU devices: collectives, async ones included.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python jax_cpu_sharded_collectives.py OUT_DIR

Writes OUT_DIR/jax_cpu_sharded_collectives.{before,after}.hlo (one module each: lowered and compiled HLO)."""

import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

try:
    from jax import shard_map
except ImportError:  # older jax
    from jax.experimental.shard_map import shard_map

mesh = Mesh(jax.devices()[:8], ("x",))


def step(a, b):
    # psum -> all-reduce, all_gather, psum_scatter -> reduce-scatter, all_to_all, ppermute -> collective-permute
    s = jax.lax.psum(a * 2.0, "x")
    g = jax.lax.all_gather(b, "x", tiled=True)
    r = jax.lax.psum_scatter(g, "x", scatter_dimension=0, tiled=True)
    t = jax.lax.all_to_all(a, "x", 0, 0, tiled=True)
    p = jax.lax.ppermute(b, "x", [(i, (i + 1) % 8) for i in range(8)])
    return s + t, r + p


f = jax.jit(shard_map(step, mesh=mesh, in_specs=(P("x"), P("x")), out_specs=(P("x"), P("x"))))
a = jax.device_put(jnp.ones((64, 16), jnp.float32), NamedSharding(mesh, P("x")))
b = jax.device_put(jnp.ones((64, 16), jnp.float32), NamedSharding(mesh, P("x")))
lowered = f.lower(a, b)
out = sys.argv[1] if len(sys.argv) > 1 else "."
with open(os.path.join(out, "jax_cpu_sharded_collectives.before.hlo"), "w") as fh:
    fh.write(lowered.as_text(dialect="hlo"))
with open(os.path.join(out, "jax_cpu_sharded_collectives.after.hlo"), "w") as fh:
    fh.write(lowered.compile().as_text())
