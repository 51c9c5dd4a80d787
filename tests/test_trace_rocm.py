"""AMD/ROCm profiles: ROCm xplanes (MI300X, an older and a newer ROCm profiler) checked against XProf's own
kernel_stats converter and plain `ProfileData` loops; an MI300X Kineto trace checked against `json.load`.
Fixtures from AMD-AGI/TraceLens (shared/fixtures/SOURCES.md)."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from hloscope.trace.categories import category_of
from hloscope.trace.load import load_trace
from hloscope.trace.stats import trace_stats

LEGACY = "tracelens/traces__mi300__jax_conv_minimal_legacy__chi-mi300x-013.xplane.pb"
NEWER = "tracelens/traces__mi300__jax_conv_minimal_08__tw003.xplane.pb"
MI355 = "tracelens/test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb"
RESNET = "tracelens/traces__mi300__resnet_act_checkpoint.json.gz"


def _fixture(real_file, relative):
    path = real_file(relative)
    return path


def _xprof_kernel_stats(path, tmp_path) -> tuple[float, float]:
    """(kernel executions, total us) from XProf's kernel_stats tool (it caches next to the file: a copy of its own)."""
    from xprof.convert import raw_to_tool_data
    copy = tmp_path / "profile.xplane.pb"
    shutil.copy(path, copy)
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "kernel_stats", {})
    table = json.loads(data)
    columns = [column["id"] for column in table["cols"]]
    rows = [dict(zip(columns, [cell["v"] for cell in row["c"]])) for row in table["rows"]]
    return sum(row["occurrences"] for row in rows), sum(row["total_duration_us"] for row in rows)


def _profile_facts(path) -> dict:
    """Counted with plain ProfileData loops: device events by their stats, and the host calls correlated to them."""
    from jax.profiler import ProfileData

    facts = {"memcpy": 0, "memcpy_us": 0.0, "device_us": 0.0, "launch_us": 0.0, "correlated_host_calls": 0}
    device_ids = set()
    profile = ProfileData.from_file(str(path))
    for plane in profile.planes:
        if plane.name.startswith("/device:GPU"):
            for line in plane.lines:
                for event in line.events:
                    stats = dict(event.stats)
                    facts["device_us"] += event.duration_ns / 1000
                    device_ids.add(stats.get("correlation_id"))
                    if "memcpy_details" in stats:
                        facts["memcpy"] += 1
                        facts["memcpy_us"] += event.duration_ns / 1000
    for plane in profile.planes:
        if plane.name.startswith("/host:"):
            for line in plane.lines:
                for event in line.events:
                    if dict(event.stats).get("correlation_id") in device_ids:
                        facts["correlated_host_calls"] += 1
                        facts["launch_us"] += event.duration_ns / 1000
    return facts


def test_rocm_memcpy_lines_are_copies_not_kernels(real_file, tmp_path):
    """Older ROCm xplanes: `Stream #N(MemcpyOther)` lines of `CopyDeviceToDevice` events with memcpy_details."""
    path = _fixture(real_file, LEGACY)
    kernels, kernel_us = _xprof_kernel_stats(path, tmp_path)
    facts = _profile_facts(path)
    stats = trace_stats(load_trace(path)).to_dict()
    assert kernels == 25 and facts["memcpy"] == 53  # SOURCES.md: not 78 kernels
    assert stats["kernels"] == kernels
    assert stats["executions_by_category"]["memcpy/memset"] == facts["memcpy"]
    assert stats["categories"]["memcpy/memset"] == pytest.approx(facts["memcpy_us"], abs=1e-3)
    assert stats["device_time_us"] == pytest.approx(kernel_us + facts["memcpy_us"], abs=1e-3)
    assert stats["device_time_us"] == pytest.approx(facts["device_us"], abs=1e-3)


@pytest.mark.parametrize("relative", [LEGACY, NEWER, MI355])
def test_rocm_xplane_host_launch_time_is_every_correlated_call(real_file, relative, tmp_path):
    """hipModuleLaunchKernel, hipExtModuleLaunchKernel, hipMemcpyDtoDAsync and the older profiler's launches named
    after their kernel: every host call correlated with device work is host dispatch, as for Kineto."""
    path = _fixture(real_file, relative)
    facts = _profile_facts(path)
    stats = trace_stats(load_trace(path)).to_dict()
    assert facts["correlated_host_calls"] > 0
    assert stats["host_launch_us"] == pytest.approx(facts["launch_us"], abs=1e-3)
    if relative == NEWER:
        kernels, _ = _xprof_kernel_stats(path, tmp_path)
        assert stats["kernels"] == kernels == 235


# Real AMD kernel names from the fixtures and the category each belongs to.
AMD_KERNELS = [
    (LEGACY, "Cijk_Ailk_Bljk_BBS_BH_MT256x128x64_MI16x16x16x1", "matmul/conv"),  # Tensile / hipBLASLt
    (LEGACY, "Im3d2Col", "matmul/conv"),  # MIOpen's im2col step of a 3-D convolution
    (NEWER, "__amd_rocclr_copyBuffer.kd", "memcpy/memset"),  # ROCclr's blit kernel for copies
    (RESNET, "_ZN2ck16tensor_operation6device37kernel_batched_gemm_xdlops_", "matmul/conv"),  # Composable Kernel
    (RESNET, "batched_transpose_16x32_half", "copy/transpose"),
    (RESNET, "SubTensorOpWithCastTensor1d", "fusion/elementwise"),  # MIOpen tensor op
    (RESNET, "ncclDevKernel_Generic", "collective/communication"),  # RCCL keeps NCCL's kernel names
    (MI355, "void ck_tile::kentry<ck_tile::gfx950_t, 2, ck_tile::FmhaFwdKernel<", "matmul/conv"),
]


def _device_names(path) -> dict[str, float]:
    totals: dict[str, float] = {}
    for event in load_trace(path).events:
        if event.is_device_exec and event.kind == "kernel":
            totals[event.name] = totals.get(event.name, 0.0) + event.dur_us
    return totals


@pytest.mark.parametrize("relative,prefix,category", AMD_KERNELS)
def test_amd_kernel_names_are_classified(real_file, relative, prefix, category):
    names = [name for name in _device_names(_fixture(real_file, relative)) if name.startswith(prefix)]
    assert names, prefix
    assert {category_of(name) for name in names} == {category}


@pytest.mark.parametrize("relative", [LEGACY, NEWER, MI355, RESNET])
def test_amd_kernels_left_to_no_rule_are_negligible(real_file, relative):
    totals = _device_names(_fixture(real_file, relative))
    unmatched = sum(us for name, us in totals.items() if category_of(name) == "other")
    assert unmatched <= 0.005 * sum(totals.values())


def test_mi300_kineto_launches_against_json(real_file):
    """ROCm Kineto traces put hipLaunchKernel / hipMemcpyWithStream / hipExtModuleLaunchKernel under cuda_runtime:
    host dispatch is every such call whose correlation id is a device execution's."""
    path = _fixture(real_file, RESNET)
    events = [e for e in json.loads(gzip.decompress((path).read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    correlations = {e["args"]["correlation"] for e in device}
    runtime = [e for e in events if e.get("cat") == "cuda_runtime"]
    assert any(e["name"].startswith("hip") for e in runtime)
    stats = trace_stats(load_trace(path)).to_dict()
    assert stats["kernels"] == sum(e["cat"] == "kernel" for e in events) == 2995
    assert stats["device_time_us"] == pytest.approx(sum(e["dur"] for e in device), abs=1e-3)
    assert stats["host_runtime_us"] == pytest.approx(sum(e["dur"] for e in runtime), abs=1e-3)
    launched = sum(e["dur"] for e in runtime if e["args"].get("correlation") in correlations)
    assert stats["host_launch_us"] == pytest.approx(launched, abs=1e-3)
