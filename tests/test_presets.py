"""Text presets (GPT-2, Llama, BERT) beside the ViTs: paired PyTorch and Flax classes of transformers, random init,
no downloads, `--seq-len`; every mode runs them and they compute the same first step (--check-parity)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import hloscope

from hloscope.backends.data import synthetic_pool
from hloscope.errors import UsageError
from hloscope.models.presets import ALL_PRESETS, TEXT_PRESETS, get_preset

TINY_TEXT = ["gpt2-tiny", "llama-tiny", "bert-tiny"]


def test_every_text_preset_names_a_paired_pytorch_and_flax_class():
    import transformers
    for preset in TEXT_PRESETS.values():
        assert preset.flax_class == "Flax" + preset.torch_class
        for name in (preset.config_class, preset.torch_class):
            assert hasattr(transformers, name), name
        assert preset.config_kwargs()["seq_len"] == preset.seq_len
    assert {"gpt2-small", "gpt2-tiny", "llama-tiny", "llama-1b", "bert-base", "bert-tiny"} <= set(ALL_PRESETS)


def test_seq_len_applies_to_text_presets_only():
    assert get_preset("gpt2-tiny", 16).seq_len == 16 and get_preset("gpt2-tiny").seq_len == 32
    with pytest.raises(UsageError, match="takes images, not sequences"):
        get_preset("vit-tiny", 16)
    with pytest.raises(UsageError, match="sequences of 2 to 128 tokens"):
        get_preset("bert-tiny", 4096)


def test_synthetic_token_batches():
    ids, labels = synthetic_pool(get_preset("gpt2-tiny", 8), 3, 0, pool_size=1)[0]
    assert ids.shape == (3, 8) and ids.dtype.name == "int32" and (labels == ids).all()  # causal LM: shifted inside
    ids, labels = synthetic_pool(get_preset("bert-tiny", 8), 3, 0, pool_size=1)[0]
    assert labels.shape == (3,) and set(labels) <= {0, 1}


@pytest.mark.slow
@pytest.mark.parametrize("model", TINY_TEXT)
def test_text_presets_run_under_every_mode_and_compute_the_same_first_step(tmp_path, model):
    modes = "pytorch,torch_xla,jax,torchax"
    done = hloscope("compare", "--repeats", "1", "--modes", modes, "--model", model, "--seq-len", "16", "--batch-size",
                    "2", "--steps", "3", "--warmup", "1", "--check-parity", "--dump-hlo", "--no-audit", "--out",
                    tmp_path, "--json", timeout=900, memory_limit=None)
    assert done.code == 0, done.stderr[-3000:]
    comparison = json.loads(done.stdout)
    assert all(entry["status"] == "ok" for entry in comparison["modes"]), comparison["modes"]
    assert comparison["parity"]["ok"], comparison["parity"]["failures"]
    jax_run = json.loads((Path(tmp_path) / comparison["comparison_id"] / "jax" / "run.json").read_text())
    assert jax_run["config"]["model_config"]["seq_len"] == 16
    from jaxlib import _hlo

    for mode in ("jax", "torchax", "torch_xla"):
        run = json.loads((Path(tmp_path) / comparison["comparison_id"] / mode / "run.json").read_text())
        hlo = [a for a in run["artifacts"] if a["kind"] == "hlo" and a["train_step"]]
        assert hlo, mode
        for artifact in hlo:
            text = (Path(tmp_path) / comparison["comparison_id"] / mode / artifact["path"]).read_text()
            assert _hlo.hlo_module_from_text(text).computations()
