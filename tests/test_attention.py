"""--attention eager|sdpa|flash: honoured where the mode can, refused in one line where it cannot, recorded per mode."""

from __future__ import annotations

import json
from functools import partial

import helpers
import pytest

from hloscope.backends import preflight
from hloscope.errors import UsageError
from hloscope.modes import MODES, get_mode

# runs of the frameworks themselves: their address space is not capped
hloscope = partial(helpers.hloscope, memory_limit=None, timeout=600)


def test_every_mode_runs_eager_and_says_why_it_refuses_the_others():
    for mode in MODES:
        assert mode.attention[0] == "eager" and set(mode.attention) <= {"eager", "sdpa", "flash"}
        if set(mode.attention) != {"eager", "sdpa", "flash"}:
            assert mode.attention_note, mode.name
    assert get_mode("jax").attention == ("eager",)
    assert "sdpa" in get_mode("torchax").attention and "flash" not in get_mode("torchax").attention


def test_refused_in_one_line_before_anything_starts():
    with pytest.raises(UsageError, match=r"--attention sdpa --mode jax: this mode runs only --attention eager: "
                                         r"transformers. Flax models \(FlaxViTSelfAttention and the GPT-2, Llama and BERT ones\)"):
        preflight("jax", "cpu", "sdpa")
    with pytest.raises(UsageError, match="flash_attention_2 needs the flash-attn CUDA extension"):
        preflight("torch_xla", "cpu", "flash")
    preflight("pytorch", "cpu", "sdpa")  # honoured


def test_the_cli_refuses_with_exit_2_and_no_run_directory(tmp_path):
    done = hloscope("run", "--mode", "jax", "--attention", "flash", "--model", "vit-tiny", "--out", str(tmp_path))
    assert done.code == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "--attention flash --mode jax" in done.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_flash_on_the_cpu_is_refused_by_the_pytorch_session(tmp_path):
    done = hloscope("run", "--mode", "pytorch", "--attention", "flash", "--device", "cpu", "--model", "vit-tiny",
                    "--out", str(tmp_path))
    assert done.code == 2 and "Traceback" not in done.stderr
    assert "flash_attention_2 runs the flash-attn package's CUDA kernels; the device is cpu" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["pytorch", "torchax"])
def test_sdpa_is_recorded_in_run_json(tmp_path, mode):
    done = hloscope("run", "--mode", mode, "--attention", "sdpa", "--model", "vit-tiny", "--batch-size", "2",
                    "--steps", "2", "--warmup", "1", "--out", str(tmp_path), "--json")
    assert done.code == 0, done.stderr[-2000:]
    record = json.loads(done.stdout)
    assert record["config"]["attention"] == "sdpa"
    assert record["environment"]["attention"]["implementation"] == "sdpa"
