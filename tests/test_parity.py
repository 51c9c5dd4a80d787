"""--check-parity: the comparison of the modes' first-step probes (hloscope/runs/parity.py), and, slow, a real comparison
in which every mode starts from the same weights and agrees on the first batch's loss and gradient norm."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from helpers import hloscope

from hloscope.runs.parity import evaluate, parity_lines, tolerances
from hloscope.runs.records import Parity, section_document


def _probe(loss=2.366469, grad=5.150369, weights=18.766718, **extra) -> Parity:
    return Parity(loss=loss, grad_norm=grad, weights_norm=weights, **extra)


def test_modes_within_tolerance_agree():
    parity = evaluate([("pytorch", _probe()), ("jax", _probe(grad=5.150368)), ("torchax", _probe(loss=2.3664695))],
                      "fp32")
    assert parity.ok and parity.reference == "pytorch" and parity.failures == []
    assert [m.status for m in parity.modes] == ["ok", "ok", "ok"]
    difference = parity.modes[1].relative_difference
    assert difference is not None and difference.grad_norm == pytest.approx(1e-6 / 5.150369, rel=1e-3)
    assert parity_lines(parity)[-1].startswith("parity ok")
    assert all(len(line) <= 80 for line in parity_lines(parity))


def test_a_loss_off_by_more_than_the_precisions_tolerance_fails():
    # 2.375 is what torchax 0.0.13's bf16 autocast gave before hloscope completed its policy (loss in bf16)
    probes = [("pytorch", _probe(loss=2.366479)), ("torchax", _probe(loss=2.375))]
    assert evaluate(probes, "bf16").ok is False
    failed = evaluate(probes, "bf16")
    assert failed.modes[1].status == "mismatch" and "torchax: loss 2.375" in failed.failures[0]
    assert parity_lines(failed)[-1].startswith("PARITY FAILED: torchax: loss")
    assert evaluate(probes, "fp32").ok is False
    assert tolerances("bf16")["loss"] > tolerances("tf32")["loss"] > tolerances("fp32")["loss"]


def test_different_weights_fail_in_every_precision():
    for precision in ("fp32", "tf32", "bf16"):
        parity = evaluate([("pytorch", _probe()), ("jax", _probe(weights=18.9))], precision)
        assert not parity.ok and "weights_norm" in parity.failures[0]


def test_a_mode_without_a_probe_is_not_checked_and_fails_the_check():
    parity = evaluate([("pytorch", _probe()), ("jax", None), ("torchax", Parity(error="torchax has no parity probe"))],
                      "fp32")
    assert not parity.ok
    assert [m.status for m in parity.modes] == ["ok", "not checked", "not checked"]
    assert "torchax has no parity probe" in parity.failures[1]
    alone = evaluate([("jax", None)], "fp32")
    assert alone == msgspec.structs.replace(alone, ok=False, reference=None)


def test_the_parity_written_keeps_null_weights_and_leaves_out_what_a_mode_lacks():
    """comparison.json `parity` as written: a checked mode's figures in one order, its weights null when its probe
    did not say; a mode not checked has its status and reason only."""
    parity = section_document(evaluate([("pytorch", _probe()), ("jax", None)], "fp32"))
    assert list(parity) == ["precision", "tolerance", "reference", "ok", "modes", "failures"]
    checked, unchecked = parity["modes"]
    assert list(checked) == ["mode", "loss", "grad_norm", "weights_norm", "weights", "relative_difference", "status"]
    assert checked["weights"] is None
    assert unchecked == {"mode": "jax", "status": "not checked",
                         "reason": "no parity probe in run.json (the run failed before it?)"}
    assert list(unchecked) == ["mode", "status", "reason"]


MODES = ["pytorch", "torch_xla", "jax", "torchax"]


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_every_mode_starts_from_the_same_weights_and_computes_the_same_first_step(tmp_path, precision):
    # --no-audit: the audit's set-up processes check nothing parity needs (test_audit.py runs the audit)
    done = hloscope("compare", "--repeats", "1", "--modes", ",".join(MODES), "--model", "vit-tiny", "--batch-size", "4",
                    "--steps", "3", "--warmup", "1", "--precision", precision, "--check-parity", "--no-audit", "--out",
                    tmp_path, "--json", timeout=900, memory_limit=None)
    assert done.code == 0, done.stderr[-3000:]
    comparison = json.loads(done.stdout)
    parity = comparison["parity"]
    assert parity["ok"], parity["failures"]
    assert [m["mode"] for m in parity["modes"]] == MODES and parity["precision"] == precision
    for entry in comparison["modes"]:
        record = json.loads((Path(tmp_path) / comparison["comparison_id"] / entry["dir"] / "run.json").read_text())
        probe = record["parity"]
        assert probe["precision"] == precision and probe["parameters"] == 40 and "seconds" in probe
        # the probe ran on the first batch of the pool with the initial weights: the first step's loss is the same
        assert record["loss"]["first"] == pytest.approx(probe["loss"], rel=1e-6)
    jax = json.loads((Path(tmp_path) / comparison["comparison_id"] / "jax" / "run.json").read_text())
    assert "convert_pytorch_state_dict_to_flax" in jax["parity"]["weights"]
