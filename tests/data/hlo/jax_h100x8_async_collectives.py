import os, sys
os.environ["JAX_PLATFORMS"]="cpu"
import jax, jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax import shard_map
spec = open('/work/shared/fixtures/gpu_specs/h100_sxm.txtpb').read()
topo = topologies.get_topology_desc(platform="cuda", target_config=spec, topology="1x8x1")
print(len(topo.devices))
mesh = Mesh(topo.devices, ("x",))
def step(a, b):
    s = jax.lax.psum(a * 2.0, "x")
    g = jax.lax.all_gather(b, "x", tiled=True)
    r = jax.lax.psum_scatter(g, "x", scatter_dimension=0, tiled=True)
    t = jax.lax.all_to_all(a, "x", 0, 0, tiled=True)
    p = jax.lax.ppermute(b, "x", [(i, (i + 1) % 8) for i in range(8)])
    return s + t, r + p
f = jax.jit(shard_map(step, mesh=mesh, in_specs=(P("x"), P("x")), out_specs=(P("x"), P("x"))))
sds = jax.ShapeDtypeStruct((64, 16), jnp.float32, sharding=NamedSharding(mesh, P("x")))
c = f.trace(sds, sds).lower(lowering_platforms=("cuda",)).compile()
open(sys.argv[1], "w").write(c.as_text())
