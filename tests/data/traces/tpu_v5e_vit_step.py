"""A ViT-shaped train step in plain JAX (no flax/optax on the device machine): dump XLA's HLO and profile 5 steps."""
import os, sys, time
out = sys.argv[1]
os.environ["XLA_FLAGS"] = f"--xla_dump_to={out}/hlo --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=^$"
import jax, jax.numpy as jnp
import numpy as np

B, IMG, P, D, H, L, C = 32, 224, 16, 192, 3, 4, 1000
N = (IMG // P) ** 2
key = jax.random.PRNGKey(0)
def init(key):
    ks = iter(jax.random.split(key, 64))
    w = lambda *s: jax.random.normal(next(ks), s, jnp.float32) * 0.02
    params = {"patch": w(P * P * 3, D), "pos": w(N + 1, D), "cls": w(1, D), "head": w(D, C)}
    for i in range(L):
        params[f"b{i}"] = {"qkv": w(D, 3 * D), "proj": w(D, D), "fc1": w(D, 4 * D), "fc2": w(4 * D, D),
                           "ln1": jnp.ones(D), "ln2": jnp.ones(D)}
    return params
def ln(x, g):
    m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-6) * g
def forward(p, x):
    b = x.shape[0]
    x = x.reshape(b, IMG // P, P, IMG // P, P, 3).transpose(0, 1, 3, 2, 4, 5).reshape(b, N, P * P * 3) @ p["patch"]
    x = jnp.concatenate([jnp.broadcast_to(p["cls"], (b, 1, D)), x], 1) + p["pos"]
    for i in range(L):
        q = p[f"b{i}"]
        h = ln(x, q["ln1"]) @ q["qkv"]
        qq, kk, vv = jnp.split(h.reshape(b, N + 1, 3, H, D // H), 3, axis=2)
        a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", qq[:, :, 0], kk[:, :, 0]) / np.sqrt(D // H), -1)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", a, vv[:, :, 0]).reshape(b, N + 1, D) @ q["proj"]
        x = x + jax.nn.gelu(ln(x, q["ln2"]) @ q["fc1"]) @ q["fc2"]
    return x[:, 0] @ p["head"]
def loss(p, x, y):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(forward(p, x)), y[:, None], 1))
@jax.jit
def train_step(p, x, y):
    l, g = jax.value_and_grad(loss)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), l
params = init(key)
x = jax.random.normal(key, (B, IMG, IMG, 3)); y = jnp.arange(B) % C
params, l = train_step(params, x, y); l.block_until_ready()
times = []
for _ in range(10):
    t = time.perf_counter(); params, l = train_step(params, x, y); l.block_until_ready(); times.append(time.perf_counter() - t)
print("device", jax.devices()[0].device_kind, "median step ms", 1e3 * sorted(times)[5], "loss", float(l))
jax.profiler.start_trace(f"{out}/trace")
for i in range(5):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        params, l = train_step(params, x, y); l.block_until_ready()
jax.profiler.stop_trace()
