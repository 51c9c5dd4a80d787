"""`--data loader`: drawing the batch from the DataLoader is inside the timed step in every mode.

The real loader is wrapped so that every batch costs 40 ms more to draw; each mode's timed steps must all include it.
(With `--data device` the same steps take a few milliseconds on vit-tiny.) Each mode runs in a fresh Python, as
`hloscope run` does: torch_xla cannot start after plain PyTorch's autograd engine has.
"""

from __future__ import annotations

import json

import pytest
from helpers import python

pytestmark = pytest.mark.slow

LOADER_COST_S = 0.040

SCRIPT = """
import json, sys, time
from pathlib import Path
from hloscope.backends import data, driver
from hloscope.backends.base import RunOptions

real = data.torch_loader

def slow_loader(*args, **kwargs):
    for batch in real(*args, **kwargs):
        time.sleep(float(sys.argv[3]))
        yield batch

data.torch_loader = slow_loader  # pytorch and torch_xla import it at setup
if sys.argv[1] == "jax":
    from hloscope.backends import jax_mode
    jax_mode.torch_loader = slow_loader
run_dir = Path(sys.argv[2])
run_dir.mkdir()
options = RunOptions(mode=sys.argv[1], model="vit-tiny", batch_size=4, steps=4, warmup=2, data="loader")
record = driver.execute(options, run_dir)
print(json.dumps({"status": record["status"], "steps": record["timing"]["step_times_s"], "loss": record["loss"]}))
"""


@pytest.mark.parametrize("mode", ["pytorch", "jax", "torch_xla"])
def test_the_loaders_cost_is_part_of_every_timed_step(tmp_path, mode):
    result = python("-c", SCRIPT, mode, tmp_path / mode, str(LOADER_COST_S))
    assert result.code == 0, result.stderr[-2000:]
    record = json.loads(result.stdout.splitlines()[-1])
    assert record["status"] == "ok" and record["loss"]["finite"]
    assert len(record["steps"]) == 4 and min(record["steps"]) >= LOADER_COST_S
