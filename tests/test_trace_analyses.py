"""Pure analyses over events: category rules, busy time and idle gaps, step assignment."""

from __future__ import annotations

import pytest

from hloscope.hlo.parser import parse_hlo_text
from hloscope.trace.categories import category_for, category_of
from hloscope.trace.hlo_map import measured_instructions
from hloscope.trace.model import KERNEL, MEMCPY, RUNTIME, STEP, Event
from hloscope.trace.stats import summarize_events
from hloscope.trace.steps import busy_summary


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(...)", "matmul/conv"),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "matmul/conv"),
        ("ampere_sgemm_128x64_tn", "matmul/conv"),
        ("triton_tem_fused_mm_0", "matmul/conv"),
        ("gemm_fusion_dot_1", "matmul/conv"),
        ("cudnn::detail::implicit_convolve_sgemm", "matmul/conv"),
        ("convolution.4", "matmul/conv"),
        ("dot_general.3", "matmul/conv"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "collective/communication"),
        ("all-reduce.1", "collective/communication"),
        ("reduce-scatter", "collective/communication"),
        ("Memcpy HtoD (Pinned -> Device)", "memcpy/memset"),
        ("copy.3", "memcpy/memset"),
        ("input_reduce_fusion_2", "reduction"),
        ("triton_red_fused_sum_0", "reduction"),
        ("triton_per_fused__softmax_0", "reduction"),
        ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", "reduction"),
        ("loop_add_fusion_1", "fusion/elementwise"),
        ("convert_element_type_fusion", "fusion/elementwise"),
        ("triton_poi_fused_add_cos_sin_0", "fusion/elementwise"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "fusion/elementwise"),
        ("void tensorflow::functor::FillPhiloxRandomKernelLaunch<...>", "other"),
    ],
)
def test_category_rules(name, category):
    assert category_of(name) == category


def test_memory_kinds_are_memory_whatever_the_name():
    assert category_for("MemcpyH2D", MEMCPY) == "memcpy/memset"
    assert category_for("Some DMA", MEMCPY) == "memcpy/memset"


def test_busy_time_and_idle_gaps_over_overlapping_streams():
    # Two streams: [0,10] and [5,12] overlap; gap 12..20; [20,25]; gap 25..30; [30,31].
    busy = busy_summary([(20.0, 25.0), (0.0, 10.0), (30.0, 31.0), (5.0, 12.0)])
    assert busy.busy_us == 12 + 5 + 1
    assert busy.span_us == 31
    assert busy.idle_us == 31 - 18
    assert busy.gaps == 2
    assert busy.largest_gap_us == 8
    assert busy_summary([]).busy_us == 0


def _event(name, start, dur, kind=KERNEL, device=True, step=None, correlation=None, module=None, op=None):
    return Event(name=name, start_us=start, dur_us=dur, kind=kind, device=device, lane="l", process="p",
                 category=category_of(name), step=step, correlation=correlation, hlo_module=module, hlo_op=op)


def test_kernels_go_to_the_step_that_launched_them():
    events = [
        _event("ProfilerStep#1", 0, 100, kind=STEP, device=False, step=1),
        _event("ProfilerStep#2", 100, 100, kind=STEP, device=False, step=2),
        _event("cudaLaunchKernel", 90, 2, kind=RUNTIME, device=False, correlation=7),
        _event("cudaLaunchKernel", 150, 2, kind=RUNTIME, device=False, correlation=8),
        # Launched at 90 in step 1, runs at 120 (inside step 2's host interval): belongs to step 1.
        _event("gemm_a", 120, 10, correlation=7),
        _event("gemm_b", 160, 30, correlation=8),
    ]
    stats = summarize_events(events)
    assert [(s.step, s.kernels, s.device_busy_us, s.host_runtime_us) for s in stats.per_step] == [
        (1, 1, 10.0, 2.0),
        (2, 1, 30.0, 2.0),
    ]
    assert stats.host_runtime_us == 4.0
    assert stats.device_time_us == 40.0
    assert stats.top[0].to_dict() == {"name": "gemm_b", "count": 1, "total_us": 30.0, "share": 0.75}


def test_an_xla_execution_belongs_to_the_step_it_started_in():
    # The step-2 marker starts while step 1's program is still running; its ops stay in step 1.
    events = [
        _event("train", 0, 50, kind=STEP, device=False, step=1),
        _event("train", 100, 50, kind=STEP, device=False, step=2),
    ]
    for base in (90, 160):  # one execution of module m per step, three ops each
        events += [_event(f"op{i}", base + 5 * i, 4, module="m", op=f"op{i}") for i in range(3)]
    stats = summarize_events(events)
    assert [s.kernels for s in stats.per_step] == [3, 3]


def test_no_step_markers_means_no_steps():
    stats = summarize_events([_event("gemm", 0, 1)])
    assert stats.steps == 0 and stats.per_step == [] and stats.kernels == 1


def test_measured_instructions_keep_only_the_module_and_name_fusion_kinds():
    (module,) = parse_hlo_text(
        "HloModule jit_f\n\n"
        "fused_add {\n  p0 = f32[4] parameter(0)\n  ROOT a = f32[4] add(p0, p0)\n}\n\n"
        "ENTRY main {\n  x = f32[4] parameter(0)\n  loop_add_fusion.1 = f32[4] fusion(x), kind=kLoop, calls=fused_add\n"
        "  ROOT n = f32[4] negate(loop_add_fusion.1)\n}\n"
    )

    def op(name, dur, hlo_module="jit_f", hlo_op=None):
        return Event(name=name, start_us=0.0, dur_us=dur, kind=KERNEL, device=True, lane="s", process="p",
                     hlo_op=hlo_op, hlo_module=hlo_module)  # fmt: skip

    events = [op("loop_add_fusion_1", 3.0), op("loop_add_fusion_1", 5.0), op("n", 2.0, hlo_op="n"),
              op("n", 40.0, hlo_module="jit_g", hlo_op="n"), op("other_kernel", 10.0)]  # fmt: skip
    measured = measured_instructions(module, events)
    assert measured["device_time_us"] == 20.0 and measured["events"] == 4 and measured["matched_us"] == 10.0
    rows = [(r["name"], r["opcode"], r["fusion_kind"], r["count"], r["total_us"], r["share"]) for r in measured["top"]]
    assert rows == [("loop_add_fusion.1", "fusion", "kLoop", 2, 8.0, 0.4), ("n", "negate", None, 1, 2.0, 0.1)]
    assert measured_instructions(module, [op("n", 1.0, hlo_module="jit_g", hlo_op="n")]) is None
