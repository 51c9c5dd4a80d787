"""Roofline lower bounds on the real deviceless GPU compilations in fixtures/gpu_aot."""

from __future__ import annotations

import re

import pytest

from hloscope.hlo.gpu_spec import resolve_target
from hloscope.hlo.roofline import find_target_config, roofline_for_module_file
from hloscope.hlo.thunks import parse_thunk_sequence
from hloscope.hlo.xla import _cpu_client

FOLDERS = ["mlp_sm90_triton", "vit_tiny_sm90_triton", "vit_base_sm90_cublas", "vit_base_sm80_cublas"]


def _files(fixtures_dir, folder):
    base = fixtures_dir / "gpu_aot" / folder
    (after,) = base.glob("*gpu_after_optimizations.txt")
    (before,) = base.glob("*before_optimizations.txt")
    (thunks,) = base.glob("*thunk_sequence.txt")
    return after, before, thunks


@pytest.fixture(scope="module")
def rooflines(fixtures_dir):
    return {folder: roofline_for_module_file(_files(fixtures_dir, folder)[0]) for folder in FOLDERS}


@pytest.mark.parametrize("folder", FOLDERS)
def test_one_bound_per_thunk_xla_runs(fixtures_dir, rooflines, folder):
    """Every launch XLA's thunk sequence lists (kernels, library calls, copies) gets exactly one bound."""
    thunks = parse_thunk_sequence(_files(fixtures_dir, folder)[2])
    result = rooflines[folder]
    assert result["step"]["launches"] == len(thunks.thunks)
    kinds = [k["kind"] for k in result["launches"]]
    assert kinds.count("generated") == len(thunks.launches)
    assert kinds.count("copy") == thunks.counts_by_category()["copy"]
    assert kinds.count("cublas") + kinds.count("cudnn") == thunks.counts_by_category()["library"]


@pytest.mark.parametrize("folder", ["vit_base_sm90_cublas", "vit_base_sm80_cublas"])
def test_total_flops_agree_with_xla_cost_analysis(fixtures_dir, rooflines, folder):
    """Costing the optimized GPU module (cuBLAS calls from their dimensions) gives the FLOPs XLA's own HloCostAnalysis
    finds in the module before optimization (dots still dots there)."""
    from jaxlib import _hlo, _jax

    before = _files(fixtures_dir, folder)[1]
    xla = _jax.hlo_module_cost_analysis(_cpu_client(), _hlo.hlo_module_from_text(before.read_text()))
    assert rooflines[folder]["step"]["flops"] == pytest.approx(xla["flops"], rel=2e-3)
    assert xla["flops"] == pytest.approx(3.39e12, rel=1e-2)  # ViT-B/16 train step, batch 32: 3 x 2 x 17.6 GMAC x 32


def test_a_cublas_gemm_by_hand(fixtures_dir, rooflines):
    """The first QKV projection of ViT-Base on H100: f32[6304,768] x f32[768,2304], DEFAULT precision (TF32)."""
    after = _files(fixtures_dir, "vit_base_sm90_cublas")[0]
    line = next(text for text in after.read_text().splitlines() if "%custom-call.284 = " in text)
    m, n = map(int, re.search(r"\(f32\[(\d+),(\d+)\]", line).groups())
    assert (m, n) == (6304, 2304)
    k = 768
    launch = next(x for x in rooflines["vit_base_sm90_cublas"]["launches"] if x["name"] == "custom-call.284")
    flops = 2.0 * m * n * k
    data = 4.0 * (m * k + k * n + m * n)
    h100 = resolve_target("h100")
    assert launch["flops"] == flops and launch["bytes"] == data
    assert launch["unit"] == "tensor_cores_f32"
    assert launch["lower_bound_s"] == pytest.approx(max(flops / h100.matrix_flops_s["f32"], data / 3_352_320_000_000))
    assert launch["limited_by"] == "compute"


def test_a100_file_gives_matmuls_only_their_memory_bound(rooflines):
    """The A100 file has no tensor-core rates: a FLOP bound from CUDA-core rates would not be a lower bound."""
    result = rooflines["vit_base_sm80_cublas"]
    gemms = [k for k in result["launches"] if k["kind"] == "cublas"]
    assert len(gemms) == 243
    assert all(k["compute_s"] is None and k["lower_bound_s"] == k["memory_s"] for k in gemms)
    assert result["step"]["launches_without_compute_peak"] >= 243


@pytest.mark.parametrize("folder", FOLDERS)
def test_step_bound_is_labelled_and_consistent(rooflines, folder):
    step = rooflines[folder]["step"]
    assert "lower bound" in step["label"] and "not a prediction" in step["label"]
    launches = rooflines[folder]["launches"]
    assert step["serial_s"] == pytest.approx(sum(k["lower_bound_s"] for k in launches))
    assert step["aggregate_s"] <= step["serial_s"] * (1 + 1e-9)
    assert step["aggregate_s"] >= step["bytes"] / step["memory_bandwidth_bytes_s"] * (1 - 1e-9)
    assert all(k["lower_bound_s"] >= k["memory_s"] for k in launches)


def test_target_comes_from_the_dumped_config(fixtures_dir):
    after = _files(fixtures_dir, "vit_base_sm80_cublas")[0]
    assert find_target_config(after).name == "module_0001.jit_train_step.gpu_target_config.pbtxt"
    assert roofline_for_module_file(after)["step"]["device"] == "NVIDIA A100-SXM4-80GB"
    # an explicit target wins
    assert roofline_for_module_file(after, resolve_target("h100"))["step"]["device"] == "NVIDIA H100 80GB HBM3"


def test_unavailable_without_a_target(tmp_path, fixtures_dir):
    after = _files(fixtures_dir, "mlp_sm90_triton")[0]
    copy = tmp_path / after.name
    copy.write_text(after.read_text())
    assert "no gpu_target_config" in roofline_for_module_file(copy)["unavailable"]
