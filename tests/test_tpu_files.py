"""Files of a real TPU run (tests/data/tpu_v5e/SOURCES.md: TPU v5e, libtpu 0.0.42.1, JAX 0.10.2): the train step's
optimized HLO, named with XLA's TPU compilation tag, and its xplane profile, read by `hlo stats` and `trace stats` as
a user reads files copied from a TPU machine."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import our_view, xla_view
from jaxlib import _hlo

from hloscope.backends.xla_dump import classify
from hloscope.hlo.parser import parse_hlo_file

TPU = Path(__file__).parent / "data" / "tpu_v5e"
MODULE = TPU / "module_0343.jit_train_step.cl_933746096.after_optimizations.txt"


def test_the_tpu_dump_is_the_train_steps_optimized_hlo():
    assert classify(MODULE.name) == {"module": "jit_train_step", "module_id": 343, "kind": "hlo",
                                     "stage": "after_optimizations"}


def test_the_tpu_module_parses_as_xlas_own_parser_reads_it():
    (ours,) = parse_hlo_file(MODULE)
    theirs = _hlo.hlo_module_from_text(MODULE.read_text())
    assert our_view(ours) == xla_view(theirs)
    assert len(list(theirs.computations())) == 292


def test_hlo_stats_reads_the_tpu_module(cli_run):
    code, out, err = cli_run("hlo", "stats", str(MODULE), "--json")
    assert code == 0, err
    (module,) = json.loads(out)["modules"]
    assert (module["name"], module["stage"], module["platform"]) == ("jit_train_step", "after_optimizations", "tpu")
    assert (module["computations"], module["instructions"]) == (292, 3001)  # as XLA's parser counts them, above
    assert module["kernels"] == 142 and module["copies"] == 53 and module["is_scheduled"] is True
    # the one custom call (GatherScatterIndicesBitpacked) XLA's cost analysis cannot cost, and counts as -1 FLOP
    assert module["uncosted_custom_calls"] == 1 and 282.0e6 < module["flops"] < 282.2e6


def test_hlo_stats_table_of_a_tpu_module_names_no_gpu_library(cli_run):
    """A TPU module calls no cuBLAS or cuDNN: its table gives each figure once, beside XLA's, with no library rows."""
    code, out, err = cli_run("hlo", "stats", str(MODULE))
    assert code == 0, err
    assert "cuBLAS" not in out and "cuDNN" not in out and "without library calls" not in out
    flops_row = next(line for line in out.splitlines() if line.lstrip().startswith("FLOPs"))
    assert "282 M" in flops_row and "by XLA's cost analysis" in flops_row


def test_trace_stats_reads_the_tpu_profile_step_by_step(cli_run):
    code, out, err = cli_run("trace", "stats", str(TPU / "jax_vit_tiny.xplane.pb"), "--json")
    assert code == 0, err
    (trace,) = json.loads(out)["traces"]
    assert trace["format"] == "xplane" and trace["devices"] == 1 and trace["step_source"] == "markers"
    assert [(s["step"], s["kernels"]) for s in trace["per_step"]] == [(step, 233) for step in range(35, 41)]
    assert trace["kernels"] == 1398 and trace["device_time_us"] > 0
