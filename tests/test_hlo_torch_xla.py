"""HLO that PyTorch/XLA writes (its XLA build prints the older text style): parsed like XLA parses it (slow)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from helpers import our_view, python, xla_view

from hloscope.hlo.load import load_modules
from hloscope.hlo.stats import module_stats

pytestmark = pytest.mark.slow

STEP = textwrap.dedent(
    """
    import torch, torch_xla
    dev = torch_xla.device()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.ones(8, 16, device=dev), torch.zeros(8, dtype=torch.long, device=dev)
    for _ in range(2):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        torch_xla.sync()
    """
)


def test_torch_xla_dump_directory(tmp_path, cli_run):
    from jaxlib import _hlo
    done = python("-c", STEP, env={"XLA_FLAGS": f"--xla_dump_to={tmp_path}"})
    assert done.code == 0, done.stderr[-3000:]
    modules = load_modules(tmp_path)
    # two graphs (first step, then the steady-state step), each before and after optimizations, grouped by name
    assert len(modules) == 4
    names = [m.module.name for m in modules]
    assert names == sorted(names) and all(n.startswith("SyncTensorsGraph.") for n in names)
    assert [m.stage for m in modules[:2]] == ["before_optimizations", "after_optimizations"]
    for item in modules:
        assert item.platform == "cpu"
        assert our_view(item.module) == xla_view(_hlo.hlo_module_from_text(Path(item.file).read_text()))
    after = [m for m in modules if m.stage == "after_optimizations"]
    for item in after:
        stats = module_stats(item)
        assert stats.fusions.get("kLoop", 0) > 0 and stats.to_dict()["memory"]["buffer_assignment"]["total_bytes"] > 0
        # Linear(16, 32) and Linear(32, 4) weights and biases are parameters of the step
        assert stats.memory.parameter_bytes >= 4 * (16 * 32 + 32 + 32 * 4 + 4)
    code, out, err = cli_run("hlo", "stats", "--json", str(tmp_path))
    assert code == 0, err
    for module in json.loads(out)["modules"]:
        assert module["xla_cost"]["flops"] == pytest.approx(module["flops"], rel=1e-4, abs=sum(module["custom_calls"].values()) + 1)
        assert module["xla_cost"]["bytes_accessed"] == pytest.approx(module["bytes_accessed"], rel=1e-4, abs=sum(module["custom_calls"].values()) + 1)
