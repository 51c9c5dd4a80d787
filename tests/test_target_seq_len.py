"""`--target` on a text preset captures the train step at the run's --seq-len, not the preset's default.

The captured program is read back by XLA's own parser (jaxlib._hlo; JAX's and torchax's StableHLO converted to HLO by
jaxlib's `mlir_module_to_xla_computation` first): the entry computation's token-id parameters (input ids and labels)
are [batch, seq-len] integers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import hloscope, python

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

SEQ_LEN, BATCH = 48, 2  # gpt2-tiny's default sequence is 32 tokens


def _entry_parameters(graph_file: Path) -> list[str]:
    """`s32[2,48]`-style shapes of the entry computation's parameters, as XLA's parser reads them."""
    from jaxlib import _hlo

    text = graph_file.read_text()
    if graph_file.name.endswith(".mlir"):
        from jax._src.lib import _jax

        text = _jax.mlir.mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False).as_hlo_text()
    module = _hlo.hlo_module_from_text(text)
    entry = list(module.computations())[-1]  # XLA prints the entry computation last
    shapes = []
    for instruction in entry.instructions():
        if instruction.opcode == _hlo.HloOpcode.kParameter:
            shapes.append(re.search(r"= (\w+\[[\d,]*\])", instruction.to_string()).group(1))
    return shapes


def _token_parameters(shapes: list[str]) -> list[str]:
    """The integer parameters of rank 2: input ids and labels (the only ones a causal LM's step takes)."""
    return [shape for shape in shapes if re.fullmatch(r"[su](32|64)\[\d+,\d+\]", shape)]


CAPTURE = """
import sys
from pathlib import Path
from hloscope.modes import get_mode, resolve
out = Path(sys.argv[2])
(out / "input").mkdir()
graph_file, _ = resolve(get_mode(sys.argv[1]).target_capture)("gpt2-tiny", {batch}, "fp32", 0, out / "input",
                                                               out / "work", seq_len={seq_len})
print(graph_file)
"""


# transformers' framework switches, removed from a capture's environment: a torchax or jax import earlier in this
# process may have set USE_FLAX=0 / USE_TORCH=0, which would hide the other framework's models from the capture.
WITHOUT_FRAMEWORK_SWITCHES: dict[str, str | None] = dict.fromkeys(("USE_TORCH", "USE_FLAX", "USE_TF"))


@pytest.fixture(scope="module")
def target_run(tmp_path_factory, cuda_plugin) -> tuple[Path, dict]:
    """`hloscope run --mode jax --target h100 --seq-len 48` of gpt2-tiny, made once: its run directory and run.json.
    Its input graph is JAX's capture of the step (the registry's `target_capture`, in the run's own process)."""
    out = tmp_path_factory.mktemp("target")
    done = hloscope("run", "--mode", "jax", "--model", "gpt2-tiny", "--seq-len", str(SEQ_LEN), "--batch-size",
                    str(BATCH), "--target", "h100", "--out", out, "--run-id", "t", "--json", timeout=900,
                    memory_limit=None, env=dict.fromkeys(("USE_TORCH", "USE_FLAX", "USE_TF")))
    assert done.code == 0, done.stderr[-3000:]
    return out / "t", json.loads((out / "t" / "run.json").read_text())


def _input_graph(run_dir: Path, record: dict) -> Path:
    (graph,) = [a for a in record["artifacts"] if a["stage"] == "input"]
    return run_dir / graph["path"]


@pytest.mark.parametrize("mode", ["jax", "torchax", "torch_xla"])
def test_the_captured_step_takes_sequences_of_the_runs_length(mode, tmp_path, request):
    """Each capture in its own process, as `run --target` makes it (the mode registry's `target_capture`); JAX's is
    the one `run --target` made for the test below."""
    if mode == "jax":
        graph_file = _input_graph(*request.getfixturevalue("target_run"))
    else:
        done = python("-c", CAPTURE.format(batch=BATCH, seq_len=SEQ_LEN), mode, tmp_path, timeout=900,
                      env=WITHOUT_FRAMEWORK_SWITCHES)
        assert done.code == 0, done.stderr[-3000:]
        graph_file = Path(done.stdout.strip().splitlines()[-1])
    tokens = _token_parameters(_entry_parameters(graph_file))
    assert tokens, _entry_parameters(graph_file)
    int_type = "s64" if mode == "torch_xla" else "s32"  # torch's token ids are int64
    assert set(tokens) == {f"{int_type}[{BATCH},{SEQ_LEN}]"}


def test_run_target_records_and_compiles_the_seq_len(target_run):
    """`hloscope run --target h100 --seq-len 48`: run.json's config says 48 and the compiled input graph takes it."""
    run_dir, record = target_run
    assert record["status"] == "compiled" and record["config"]["seq_len"] == SEQ_LEN
    assert set(_token_parameters(_entry_parameters(_input_graph(run_dir, record)))) == {f"s32[{BATCH},{SEQ_LEN}]"}
