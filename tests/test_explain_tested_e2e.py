"""explain --test-hypotheses on real runs (tiny ViT, JAX on the CPU, few steps): the slower configuration run again
with one setting changed, interleaved with both, in two processes each. bf16 against fp32: matching the precision
(whichever is slower on this machine at the time) closes the gap; the DataLoader in the step against batches already on
the device: matching the data path closes it;
and a hypothesis that cannot hold on a pair (the precision, identical on both sides) is not tested, never confirmed.

Where the machine's own variation hides a gap in the re-run, the product must say "cannot tell" for that stated reason,
and the checks accept exactly that."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import hloscope

from hloscope.explain.experiments import MEANINGFUL_SHARE

pytestmark = pytest.mark.slow

RUN = ("run", "--mode", "jax", "--model", "vit-tiny", "--batch-size", "16", "--steps", "10", "--warmup", "2", "--json")
CONFIGURATIONS = {"fp32": (), "bf16": ("--precision", "bf16"), "loader": ("--data", "loader")}


@pytest.fixture(scope="module")
def tested(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("tested")
    for name, extra in CONFIGURATIONS.items():
        result = hloscope(*RUN, "--out", out, "--run-id", name, *extra, timeout=600, memory_limit=None)
        assert result.code == 0, result.stderr
    result = hloscope("explain", out / "fp32", out / "bf16", out / "loader", "--baseline", out / "fp32",
                      "--test-hypotheses", "--hypothesis", "compute_dtype", "--hypothesis", "input_pipeline",
                      "--test-repeats", "2", "--budget", "60", "--json", timeout=3600, memory_limit=None)
    assert result.code == 0, result.stderr
    assert "testing hypotheses: budget 60:00" in result.stderr  # the plan comes first
    return out, json.loads(result.stdout)["tested"]


def _test(block: dict, run: str, setting: str) -> dict:
    """The test of `setting` on the pair of `run` and the baseline, whichever side was slower (on this project's CPU,
    bf16 is faster than fp32 at "highest" matmul precision when the machine is quiet, and slower under load)."""
    pair = next(p for p in block["pairs"] if f"jax ({run})" in (p["slow"], p["fast"]))
    return next(t for t in pair["tests"] if t["setting"] == setting)


def _closes_the_gap_or_says_why_not(test: dict) -> None:
    """Confirmed, with the remaining gap zero within its interval (or partly, where the share's interval reaches a
    confirmed share but noise keeps its low end under it); or cannot tell, because the re-run's gap did not reproduce,
    the closure stayed inside the spread between processes, or the share's interval holds both no closure and a
    meaningful one (seen on a loaded CI machine: 109%, -0% to 232%)."""
    if test["verdict"] == "cannot tell":
        if "holds both no closure and a meaningful one" in test["why"]:  # too few steps against this much noise
            low, high = test["closure"]["share_closed_ci"]
            assert low <= 0 and high >= MEANINGFUL_SHARE, test
        else:
            assert "did not reproduce" in test["why"] or "spread between processes" in test["why"], test["why"]
        return
    closure = test["closure"]
    low, high = closure["gap_after_ci_s"]
    assert low <= 0 <= high, closure  # the changed configuration is the faster one: no gap left
    if test["verdict"] == "partly":  # a real closure whose size the noise leaves open: it may be the whole gap
        assert closure["share_closed_ci"][0] > 0 and closure["share_closed_ci"][1] >= 0.5, closure
        return
    assert test["verdict"] == "confirmed", test
    assert closure["share_closed_ci"][0] >= 0.2 and closure["share_closed"] >= 0.5


def test_matching_the_precision_closes_the_bf16_gap(tested):
    _, block = tested
    test = _test(block, "bf16", "precision")
    assert test["change"] in ("--precision bf16 -> fp32", "--precision fp32 -> bf16") and test["processes"] == 2
    _closes_the_gap_or_says_why_not(test)


def test_matching_the_data_path_closes_the_loader_gap(tested):
    _, block = tested
    test = _test(block, "loader", "data")
    assert test["change"] in ("--data loader -> device", "--data device -> loader")
    _closes_the_gap_or_says_why_not(test)


def test_a_hypothesis_that_cannot_hold_is_not_tested(tested):
    """The loader pair has the same precision on both sides: compute_dtype names nothing to change."""
    _, block = tested
    test = _test(block, "loader", "precision")
    assert test["verdict"] == "could not test" and "both sides" in test["why"] and test["closure"] is None


def test_the_re_runs_are_ordinary_comparisons(tested):
    out, block = tested
    for pair in block["pairs"]:
        directory = Path(pair["directory"])
        assert directory.parent == out and directory.name.startswith("tested-")
        labels = {entry["mode"] for entry in json.loads((directory / "comparison.json").read_text())["modes"]}
        assert {"jax [baseline]", "jax [slower]"} <= labels
        result = hloscope("explain", directory, "--baseline", "jax [baseline]", "--json")
        assert result.code == 0, result.stderr
