"""`--mode torchax` end to end on the CPU (tiny ViT): the PyTorch model traced by torchax under jax.jit is timed, its
HLO dumped and parsed by XLA's and hloscope's parsers, its xplane carries the step markers, and `--target h100`
compiles its graph with the same XLA GPU compiler as JAX's."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import helpers
import pytest
from helpers import EVERY_MODE_BATCH, EVERY_MODE_PROFILE_STEPS, EVERY_MODE_STEPS, EVERY_MODE_WARMUP

from hloscope.backends.torch_workload import LEARNING_RATE, build_model, device_pool
from hloscope.hlo.parser import parse_hlo_file
from hloscope.models.presets import get_preset
from hloscope.runs.rundir import load_run
from hloscope.targets.compile import compile_for_target

pytestmark = pytest.mark.slow  # torchax is pinned (requirements.txt): its absence fails the run, not skips it

STEPS, WARMUP, PROFILE_STEPS, BATCH = EVERY_MODE_STEPS, EVERY_MODE_WARMUP, EVERY_MODE_PROFILE_STEPS, EVERY_MODE_BATCH


# runs of the frameworks themselves: their address space is not capped
hloscope = partial(helpers.hloscope, memory_limit=None, timeout=600)


@pytest.fixture(scope="module")
def run(every_mode_comparison) -> dict:
    """The torchax run of conftest's comparison of every mode (--dump-hlo --profile), read only: its JSON, and where
    it is."""
    run_dir = every_mode_comparison / "torchax"
    record = {**load_run(run_dir).to_dict(), "_dir": str(run_dir)}
    assert record["status"] == "ok"
    return record


def _artifacts(record: dict, kind: str) -> list[dict]:
    return [a for a in record["artifacts"] if a["kind"] == kind]


def test_a_torchax_run_completes_timed_like_every_mode_and_its_loss_falls(run):
    timing = run["timing"]
    assert run["status"] == "ok" and run["mode"] == "torchax" and Path(run["_dir"]).name == "torchax"
    assert len(timing["step_times_s"]) == STEPS and len(timing["profiled_step_times_s"]) == PROFILE_STEPS
    assert timing["p10_s"] <= timing["median_s"] <= timing["p90_s"] and timing["first_step_s"] > 0
    assert run["loss"]["finite"] and run["loss"]["last"] < run["loss"]["first"]
    assert run["compiles"]["recompiled_in_window"] is False and run["compiles"]["total"]["jit_cache_entries"] == 1
    assert run["memory"]["peak_host_rss_bytes"] > 0
    environment = run["environment"]
    assert environment["framework"] == "torchax" and environment["packages"]["torchax"] == "0.0.13"
    assert set(environment["frameworks_imported"]) == {"torch", "torchax", "jax"}  # no Flax model, no torch_xla
    assert environment["precision"]["jax_default_matmul_precision"] == "highest"
    assert environment["attention"]["implementation"] == "eager"
    assert environment["optimizer"].startswith("optax SGD")
    assert run["graph"] == {"kind": "xla", "module": "jit_train_step"}


def test_the_pytorch_model_computes_the_pytorch_modes_first_loss(run):
    """Same weights (the seeded PyTorch model), same batch, same loss function as `--mode pytorch`."""
    import torch

    preset = get_preset("vit-tiny")
    model = build_model(preset, 0)
    images, labels = device_pool(preset, BATCH, 0, "cpu")[0]
    with torch.no_grad():
        loss = model(pixel_values=images, labels=labels).loss.item()
    assert run["loss"]["first"] == pytest.approx(loss, rel=1e-5)
    assert LEARNING_RATE == 0.01


def test_its_hlo_parses_with_xla_and_hloscope(run):
    from jaxlib import _hlo

    hlo = _artifacts(run, "hlo")
    assert {a["stage"] for a in hlo} == {"before_optimizations", "after_optimizations"}
    assert {a["module"] for a in hlo} == {"jit_train_step"} and all(a["train_step"] for a in hlo)
    for artifact in hlo:
        path = Path(run["_dir"]) / artifact["path"]
        assert len(_hlo.hlo_module_from_text(path.read_text()).computations()) > 0
        (module,) = parse_hlo_file(path)
        assert module.name == "jit_train_step"
    assert (Path(run["_dir"]) / _artifacts(run, "stablehlo")[0]["path"]).read_text().startswith("module @jit_train_step")
    stats = hloscope("hlo", "stats", run["_dir"], "--json")
    assert stats.code == 0, stats.stderr[-2000:]


def test_its_trace_has_the_step_markers_and_annotations(run):
    from jax.profiler import ProfileData

    (xplane,) = [a for a in _artifacts(run, "trace") if a["format"] == "xplane"]
    profile = ProfileData.from_file(str(Path(run["_dir"]) / xplane["path"]))
    names = [event.name for plane in profile.planes for line in plane.lines for event in line.events]
    assert sum(name == "train_step" for name in names) == PROFILE_STEPS
    assert {"hloscope/input", "hloscope/wait"} <= set(names)
    assert run["profile"]["usable_step_numbers"] == list(range(WARMUP + STEPS + 1, WARMUP + STEPS + PROFILE_STEPS))
    stats = hloscope("trace", "stats", run["_dir"], "--json")
    assert stats.code == 0, stats.stderr[-2000:]


def test_target_h100_compiles_the_torchax_graph_with_the_same_compiler_as_jax(tmp_path, cuda_plugin, target_comparison):
    torchax = compile_for_target("torchax", "vit-tiny", 8, "fp32", "h100", tmp_path / "torchax")
    assert torchax["status"] == "compiled", torchax["error"]
    assert torchax["compiles"]["capture"]["framework"] == "torchax"
    (after,) = [a for a in torchax["artifacts"] if a["kind"] == "hlo" and a["stage"] == "after_optimizations"]
    (module,) = parse_hlo_file(tmp_path / "torchax" / after["path"])
    assert module.name == "jit_train_step"
    assert torchax["kernels"] and torchax["roofline"]["label"]
    # jax's run of the same preset, batch and target, compiled once for the session (conftest)
    jax = load_run(target_comparison[0] / "jax").to_dict()
    assert jax["status"] == "compiled", jax["error"]
    assert torchax["target"]["compiler"] == jax["target"]["compiler"]
