"""HLO analysis of modules JAX compiles here, as hloscope's JAX mode produces them (slow: compiles with XLA)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from helpers import our_view, python, xla_view

from hloscope.backends.jax_workload import build_jax_workload
from hloscope.hlo.cost import module_cost
from hloscope.hlo.load import load_modules
from hloscope.hlo.parser import parse_hlo_file, parse_hlo_text
from hloscope.hlo.stats import module_stats

pytestmark = pytest.mark.slow


def _xla_total(cost_analysis) -> dict:
    return cost_analysis[0] if isinstance(cost_analysis, (list, tuple)) else cost_analysis


def test_vit_tiny_train_step_cost_is_xlas():
    """The optimized CPU module of the tiny-ViT train step: FLOPs and bytes are compiled.cost_analysis()'s (XLA sums
    in float: a relative 1e-4 covers its rounding; the module has no custom calls, whose cost XLA does not know)."""
    import jax

    workload = build_jax_workload("vit-tiny", batch_size=8)
    compiled = jax.jit(workload.train_step).lower(workload.state, *workload.batch).compile()
    text = compiled.as_text()
    (module,) = parse_hlo_text(text)
    from jaxlib import _hlo
    assert our_view(module) == xla_view(_hlo.hlo_module_from_text(text))
    ours, _analysis = module_cost(module)
    theirs = _xla_total(compiled.cost_analysis())
    assert ours.flops == pytest.approx(theirs["flops"], rel=1e-4)
    assert ours.bytes_accessed == pytest.approx(theirs["bytes accessed"], rel=1e-4)
    assert ours.flops > 1e6  # a real train step, not an empty module
    # The CPU module has dots (or oneDNN custom calls) and fusions.
    assert any(i.opcode == "fusion" for i in module.all_instructions())


MLP_SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, optax
    def loss_fn(params, x, y):
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        logits = h @ params["w2"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    tx = optax.sgd(0.1)
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss
    params = {"w1": jnp.ones((32, 64)) * 0.01, "b1": jnp.zeros(64), "w2": jnp.ones((64, 10)) * 0.01}
    x, y = jnp.ones((16, 32)), jnp.zeros(16, dtype=jnp.int32)
    print(float(jax.jit(train_step)(params, tx.init(params), x, y)[2]))
    """
)


def test_jax_dump_directory(tmp_path, cli_run):
    """XLA_FLAGS=--xla_dump_to in a subprocess, then the dump directory as a user gives it to `hlo stats`."""
    dump = tmp_path / "dump"
    env = {"XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_module_re=train_step", "JAX_PLATFORMS": "cpu"}
    done = python("-c", MLP_SCRIPT, env=env)
    assert done.code == 0, done.stderr[-3000:]
    modules = load_modules(dump)
    assert [(m.module.name, m.stage) for m in modules] == [
        ("jit_train_step", "before_optimizations"), ("jit_train_step", "after_optimizations")
    ]
    before, after = modules
    assert after.platform == "cpu" and before.platform == "cpu"
    assert after.buffer_assignment and after.memory_report
    from jaxlib import _hlo
    for item in modules:
        (module,) = parse_hlo_file(item.file)
        assert our_view(module) == xla_view(_hlo.hlo_module_from_text(Path(item.file).read_text()))
    stats = module_stats(after)
    # w1, b1, w2 and their SGD state (none for plain sgd), x, y: parameters 32*64 + 64 + 64*10 floats + x + y
    assert stats.memory.parameter_bytes == 4 * (32 * 64 + 64 + 64 * 10 + 16 * 32 + 16)
    assert stats.to_dict()["memory"]["buffer_assignment"]["total_bytes"] > 0
    assert stats.kernels > 0 and stats.fusions
    code, out, err = cli_run("hlo", "stats", "--json", str(dump))
    assert code == 0, err
    reported = json.loads(out)["modules"]
    assert [m["stage"] for m in reported] == ["before_optimizations", "after_optimizations"]
    for m in reported:
        assert m["xla_cost"]["flops"] == pytest.approx(m["flops"], rel=1e-4, abs=sum(m["custom_calls"].values()) + 1)


SHARDED_SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(jax.devices(), ("data",))
    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)
    def step(w, x):
        return w - 0.1 * jax.grad(loss)(w, x)
    w = jax.device_put(jnp.ones((64, 32)), NamedSharding(mesh, P()))
    x = jax.device_put(jnp.ones((16, 64)), NamedSharding(mesh, P("data")))
    print(jax.jit(step)(w, x).sum())
    """
)


def test_data_parallel_step_has_its_all_reduce(tmp_path):
    """Two CPU devices, batch sharded: the gradient all-reduce shows up with the bytes of the gradient."""
    dump = tmp_path / "dump"
    flags = f"--xla_dump_to={dump} --xla_dump_hlo_module_re=step --xla_force_host_platform_device_count=2"
    done = python("-c", SHARDED_SCRIPT, env={"XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"})
    assert done.code == 0, done.stderr[-3000:]
    after = [m for m in load_modules(dump) if m.stage == "after_optimizations"]
    assert len(after) == 1 and after[0].platform == "cpu"
    stats = module_stats(after[0])
    collectives = stats.collectives.by_opcode
    (op,) = [name for name in collectives if name.startswith("all-reduce")]
    assert collectives[op].count >= 1
    assert collectives[op].bytes >= 64 * 32 * 4  # the f32[64,32] gradient (XLA may combine it with the loss)
    assert stats.kernel_breakdown["collective"] == collectives[op].count


def test_stats_on_a_run_directory_hloscope_wrote(every_mode_comparison, cli_run):
    """`hloscope run --mode jax --dump-hlo` (the jax run of conftest's comparison of every mode), then `hloscope hlo
    stats RUN_DIR`: the train step, both stages."""
    run_dir = every_mode_comparison / "jax"
    code, out, err = cli_run("hlo", "stats", "--json", str(run_dir))
    assert code == 0, err
    modules = json.loads(out)["modules"]
    assert [(m["name"], m["stage"], m["platform"]) for m in modules] == [
        ("jit_train_step", "before_optimizations", "cpu"), ("jit_train_step", "after_optimizations", "cpu")
    ]
    after = modules[1]
    assert after["flops"] == pytest.approx(after["xla_cost"]["flops"], rel=1e-4)
    assert after["bytes_accessed"] == pytest.approx(after["xla_cost"]["bytes_accessed"], rel=1e-4)
    assert after["memory"]["buffer_assignment"]["total_bytes"] > after["memory"]["parameter_bytes"] > 0
    assert after["kernels"] < modules[0]["kernels"]  # fusion merged ops into fewer kernels
