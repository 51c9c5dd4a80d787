import sys, jax, jax.numpy as jnp
from jax import lax
def f(w, k, x, s):
    y = lax.conv_general_dilated(x, k, (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = y.reshape(y.shape[0], -1, y.shape[-1])
    m = y.mean(-1, keepdims=True); v = ((y - m) ** 2).mean(-1, keepdims=True)
    y = (y - m) / jnp.sqrt(v + 1e-5) * s
    a = jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", y, y), axis=-1)
    z = jnp.einsum("bqk,bkd->bqd", a, y) @ w
    return jnp.transpose(z, (0, 2, 1)).sum(), jnp.transpose(z, (2, 0, 1)) + 1.0
args = (jnp.ones((16, 16)), jnp.ones((4, 4, 3, 16)), jnp.ones((2, 16, 16, 3)), jnp.ones((16,)))
open(sys.argv[1], "w").write(jax.jit(jax.grad(lambda *a: f(*a)[0], argnums=(0, 1, 3))).lower(*args).compile().as_text())
