"""ResNet presets: transformers' ResNetForImageClassification / FlaxResNetForImageClassification, random
init, no downloads; BatchNorm in training mode, its running statistics carried by every train step (Flax
`batch_stats` in the JAX state, PyTorch buffers through torchax). Every mode runs resnet-tiny on the CPU, the XLA modes'
programs are read by XLA's parser (jaxlib._hlo), and the first step agrees across modes (--check-parity)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import hloscope, python

from hloscope.backends.data import synthetic_pool
from hloscope.errors import UsageError
from hloscope.models.presets import ALL_PRESETS, RESNET_PRESETS, get_preset

REPO = Path(__file__).resolve().parents[1]


def test_resnet_presets_name_paired_pytorch_and_flax_classes():
    import transformers
    assert {"resnet-50", "resnet-tiny"} <= set(ALL_PRESETS)
    for preset in RESNET_PRESETS.values():
        assert preset.flax_class == "Flax" + preset.torch_class and preset.kind == "image"
        for name in (preset.config_class, preset.torch_class, preset.flax_class):
            assert hasattr(transformers, name), name
    # resnet-50 is transformers' default ResNetConfig (microsoft/resnet-50's shape) with 1000 labels
    default = transformers.ResNetConfig()
    kwargs = get_preset("resnet-50").transformers_config_kwargs()
    for key in ("embedding_size", "hidden_sizes", "depths", "layer_type", "num_channels"):
        assert kwargs[key] == getattr(default, key), key
    assert get_preset("resnet-tiny").config_kwargs()["image_size"] == 32


def test_resnet_presets_take_images_not_sequences():
    with pytest.raises(UsageError, match="takes images, not sequences"):
        get_preset("resnet-tiny", 16)
    images, labels = synthetic_pool(get_preset("resnet-tiny"), 3, 0, pool_size=1)[0]
    assert images.shape == (3, 3, 32, 32) and images.dtype.name == "float32" and set(labels) <= set(range(10))


@pytest.mark.slow
def test_parameter_counts_match_the_pytorch_model(probed):
    """resnet-50's 25.6M parameters (torchvision's ResNet-50 has 25,557,032; transformers' ResNet-50 the same), counted
    on the model hloscope builds."""
    assert probed["parameters"]["resnet-50"] == 25_557_032
    assert probed["parameters"]["resnet-tiny"] == 10_874


# One process for the parameter counts and the three modes' running statistics (each model is built under its own
# torch.manual_seed): the counts and eager PyTorch and JAX before torchax, whose default environment is process-wide.
PROBE = """
import json
import numpy as np
import jax
import torch
from hloscope.models.presets import get_preset
from hloscope.backends.data import synthetic_pool
from hloscope.backends.torch_workload import build_model
from hloscope.backends.jax_workload import build_jax_workload
from hloscope.backends.torchax_workload import build_torchax_workload
out = {"parameters": {name: sum(p.numel() for p in build_model(get_preset(name), 0).parameters())
                      for name in ("resnet-50", "resnet-tiny")}}
preset = get_preset("resnet-tiny")
images, labels = synthetic_pool(preset, 4, 0, pool_size=1)[0]
model = build_model(preset, 0).train()
model(pixel_values=torch.from_numpy(images), labels=torch.from_numpy(labels).long()).loss.backward()
bn = model.resnet.embedder.embedder.normalization
out["pytorch"] = {"mean": bn.running_mean.tolist(), "var": bn.running_var.tolist(), "count": int(bn.num_batches_tracked)}
w = build_jax_workload(preset, 4, "fp32", 0, torch_weights=True)
state, _ = jax.jit(w.train_step)(w.state, *w.batch)
stats = state.batch_stats["resnet"]["embedder"]["embedder"]["normalization"]
out["jax"] = {"mean": np.asarray(stats["mean"]).tolist(), "var": np.asarray(stats["var"]).tolist()}
w = build_torchax_workload(preset, 4, "fp32", 0)
(params, buffers, _), _ = jax.jit(w.train_step)(w.state, *w.batch)
name = "resnet.embedder.embedder.normalization."
out["torchax"] = {"mean": np.asarray(buffers[name + "running_mean"]).tolist(),
                  "var": np.asarray(buffers[name + "running_var"]).tolist(),
                  "count": int(buffers[name + "num_batches_tracked"])}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def probed() -> dict[str, dict]:
    """PROBE's figures: {"parameters": {preset: count}, mode: the first BatchNorm's running statistics}."""
    done = python("-c", PROBE, timeout=600, env=dict.fromkeys(("USE_TORCH", "USE_FLAX", "USE_TF")))
    assert done.code == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_one_step_updates_the_running_statistics_as_eager_pytorch_does(probed):
    """After one training step on the same batch from the same weights, the first BatchNorm's running mean is eager
    PyTorch's in torchax (its buffers, written back) and in JAX (Flax's batch_stats); the running variance is
    PyTorch's (unbiased batch variance) in torchax, and Flax's own (biased) in JAX."""
    import numpy as np

    eager, torchax, flax = probed["pytorch"], probed["torchax"], probed["jax"]
    assert eager["count"] == torchax["count"] == 1
    assert max(abs(m) for m in eager["mean"]) > 1e-3  # the statistics moved from their initial zeros
    np.testing.assert_allclose(torchax["mean"], eager["mean"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(torchax["var"], eager["var"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(flax["mean"], eager["mean"], rtol=1e-5, atol=1e-7)
    # Flax: 0.9 * 1 + 0.1 * biased variance; PyTorch: 0.9 * 1 + 0.1 * unbiased (n / (n - 1), n = 4 * 16 * 16 pixels)
    n = 4 * 16 * 16
    biased_from_eager = 0.9 + (np.asarray(eager["var"]) - 0.9) * (n - 1) / n
    np.testing.assert_allclose(flax["var"], biased_from_eager, rtol=1e-5)


@pytest.mark.slow
def test_every_mode_runs_resnet_tiny_and_computes_the_same_first_step(tmp_path):
    done = hloscope("compare", "--repeats", "1", "--model", "resnet-tiny", "--batch-size", "2", "--steps", "3",
                    "--warmup", "1", "--check-parity", "--dump-hlo", "--no-audit", "--out", tmp_path, "--json",
                    timeout=1200, memory_limit=None)
    assert done.code == 0, done.stderr[-3000:]
    comparison = json.loads(done.stdout)
    assert [entry["mode"] for entry in comparison["modes"]] == [
        "pytorch", "pytorch+compile", "torch_xla", "torch_xla+compile", "jax", "torchax"]
    assert all(entry["status"] == "ok" for entry in comparison["modes"]), comparison["modes"]
    assert comparison["parity"]["ok"], comparison["parity"]["failures"]
    from jaxlib import _hlo

    for mode, folder in (("jax", "jax"), ("torchax", "torchax"), ("torch_xla", "torch_xla"),
                         ("torch_xla+compile", "torch_xla_compile")):
        run_dir = Path(tmp_path) / comparison["comparison_id"] / folder
        run = json.loads((run_dir / "run.json").read_text())
        hlo = [a for a in run["artifacts"] if a["kind"] == "hlo" and a["train_step"]]
        assert hlo, mode
        convolutions = 0
        for artifact in hlo:
            module = _hlo.hlo_module_from_text((run_dir / artifact["path"]).read_text())
            convolutions += sum(instruction.opcode == _hlo.HloOpcode.kConvolution
                                for computation in module.computations() for instruction in computation.instructions())
        # resnet-tiny: stem, 2 bottlenecks of 3 convolutions and one projection shortcut each = 9 forward convolutions;
        # the backward adds the input and weight gradients of each
        assert convolutions >= 9 * 2, (mode, convolutions)


@pytest.mark.parametrize("attention", ["sdpa", "flash"])
def test_attention_other_than_eager_is_refused_in_one_line(cli_run, tmp_path, attention):
    code, _, err = cli_run("run", "--mode", "pytorch", "--model", "resnet-tiny", "--attention", attention, "--out",
                           str(tmp_path / "traces"))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"--attention {attention} --model resnet-tiny: the model has no attention layer" in err
    assert not (tmp_path / "traces").exists()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["jax", "torchax", "torch_xla"])
def test_target_compiles_resnet_tiny_with_the_same_cudnn_convolutions(mode, tmp_path, cuda_plugin):
    """`--target h100`: every framework's ResNet step meets XLA's GPU compiler with the same 26 cuDNN convolutions
    (9 forward, 9 weight gradients, 8 input gradients: the stem's input needs none), read from XLA's thunk sequence;
    the optimized GPU HLO parses with jaxlib._hlo."""
    # without transformers' framework switches, which an earlier import in this process may have set
    done = hloscope("run", "--mode", mode, "--model", "resnet-tiny", "--batch-size", "4", "--target", "h100", "--out",
                    tmp_path, "--run-id", "t", "--json", timeout=900, memory_limit=None,
                    env=dict.fromkeys(("USE_TORCH", "USE_FLAX", "USE_TF")))
    assert done.code == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "t" / "run.json").read_text())
    assert record["status"] == "compiled" and record["kernels"]["by_kind"]["kConvolution"] == 26
    from jaxlib import _hlo

    (optimized,) = [a for a in record["artifacts"] if a["kind"] == "hlo" and a["stage"] == "after_optimizations"]
    module = _hlo.hlo_module_from_text((tmp_path / "t" / optimized["path"]).read_text())
    calls = [instruction.to_string() for computation in module.computations()
             for instruction in computation.instructions() if instruction.opcode == _hlo.HloOpcode.kCustomCall]
    assert sum('custom_call_target="__cudnn$conv' in call for call in calls) == 26
