"""--mode torch_xla --devices 2: PyTorch/XLA SPMD over 2 PJRT CPU devices (CPU_NUM_DEVICES). The train
step's optimized HLO, read by XLA's own parser (jaxlib._hlo), holds the gradient all-reduces, and hloscope's
collective bytes equal the model's gradient bytes (counted from the PyTorch model's parameters) plus the loss's
scalars; the loss equals the one-device run on the same global batch. torch_xla+compile is refused in one line."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import helpers
import pytest

from hloscope.backends.devices import CPU_DEVICE_COUNT_ENV, check_devices
from hloscope.backends.torch_workload import build_model
from hloscope.errors import UsageError
from hloscope.models.presets import get_preset

# runs of the frameworks (address space not capped), without the test run's own device count
hloscope = partial(helpers.hloscope, memory_limit=None, timeout=600,
                   env={"HLOSCOPE_NO_PROGRESS": "1", CPU_DEVICE_COUNT_ENV: None})


def test_torch_xla_compile_is_refused_saying_why():
    with pytest.raises(UsageError, match=r"torch_xla\+compile: this mode runs on one device only .*openxla"):
        check_devices("torch_xla+compile", 2, 8)
    check_devices("torch_xla", 2, 8)


def _gradient_bytes() -> int:
    model = build_model(get_preset("vit-tiny"), seed=0)
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


@pytest.mark.slow
def test_spmd_on_two_cpu_devices(device_run):
    one = device_run("torch_xla", 1)  # conftest's, shared with the other device tests
    two = device_run("torch_xla", 2)
    assert two["status"] == "ok" and two["compiles"]["recompiled_in_window"] is False
    assert two["loss"]["first"] == pytest.approx(one["loss"]["first"], rel=1e-5)
    assert two["loss"]["last"] == pytest.approx(one["loss"]["last"], rel=1e-5)
    devices = two["environment"]["devices"]
    assert devices["count"] == 2 and devices["mesh_shape"] == {"data": 2} and devices["per_device_batch"] == 4
    assert two["environment"]["env"].get(CPU_DEVICE_COUNT_ENV) == "2"

    optimized = [a for a in two["artifacts"] if a.get("kind") == "hlo" and a.get("train_step")
                 and a.get("stage") == "after_optimizations"]
    assert len(optimized) == 1, optimized
    path = Path(two["_dir"]) / optimized[0]["path"]
    from jaxlib import _hlo

    module = _hlo.hlo_module_from_text(path.read_text())
    all_reduces = [i for c in module.computations() for i in c.instructions()
                   if i.opcode.name in ("kAllReduce", "kAllReduceStart")]
    assert all_reduces

    stats = hloscope("hlo", "stats", str(path), "--json", "--no-xla-cost")
    assert stats.code == 0, stats.stderr
    by_opcode = json.loads(stats.stdout)["modules"][0]["collectives"]["by_opcode"]
    assert by_opcode["all-reduce"]["count"] == len(all_reduces)
    assert by_opcode["all-reduce"]["replica_groups"] == {"{{0,1}}": len(all_reduces)}
    # every gradient once (fp32), plus a few scalars of the loss (its sum and count over the sharded batch)
    extra = by_opcode["all-reduce"]["bytes"] - _gradient_bytes()
    assert 0 <= extra <= 16, (by_opcode["all-reduce"]["bytes"], _gradient_bytes())
