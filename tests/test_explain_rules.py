"""The explain rules on constructed comparisons where the right answer is known."""

from __future__ import annotations

import pytest

from hloscope.explain.engine import explain, explain_pair
from hloscope.explain.rules import LAUNCH_COST_S, precision_rank
from hloscope.explain.summary import ModeSummary


def _base(mode: str, **overrides) -> ModeSummary:
    values = dict(mode=mode, platform="gpu", step_time_s=0.010, mean_s=0.010, step_times_s=[0.010] * 20,
                  compiles_in_window=0, data="device", matmul_precision="default", kernels=400,
                  kernel_kinds={"fusion kLoop": 200, "fusion kInput": 100, "cublas": 100}, transposes=10,
                  copies=5, dot_precision={"default": 100}, flops=1e12, bytes_accessed=5e9)
    values.update(overrides)
    return ModeSummary(**values)


def _rules(contributors) -> list[str]:
    return [c.rule for c in contributors]


def test_twice_the_kernels_for_the_same_flops_ranks_kernel_launches_first():
    fast = _base("jax")
    slow = _base("torch_xla", step_time_s=0.014, kernels=800,
                 kernel_kinds={"fusion kLoop": 600, "fusion kInput": 100, "cublas": 100})
    contributors = explain_pair(slow, fast)
    assert _rules(contributors)[0] == "kernel_launches"
    top = contributors[0]
    assert top.evidence["kernels"] == {"torch_xla": 800, "jax": 400}
    assert top.seconds == pytest.approx(400 * LAUNCH_COST_S["gpu"])
    assert top.evidence["by_kind_delta"] == {"fusion kLoop": 400}
    assert "800 kernels per step against 400 (2.00x" in top.claim
    assert "more_compute" not in _rules(contributors)  # same FLOPs: no compute claim


def test_recompiles_in_the_window_are_found_and_sized_from_the_outlier_steps():
    fast = _base("jax")
    times = [0.010] * 18 + [0.510, 0.610]
    slow = _base("pytorch+compile", step_time_s=0.010, mean_s=sum(times) / 20, step_times_s=times, compiles_in_window=2)
    contributors = explain_pair(slow, fast)
    assert _rules(contributors) == ["recompilation"]
    assert contributors[0].seconds == pytest.approx((0.5 + 0.6) / 20)
    assert contributors[0].evidence["outlier_steps"] == 2
    assert "compiled 2 time(s) inside the timed window" in contributors[0].claim


def test_fp32_against_tf32_precision_is_found_and_sized_by_matmul_time():
    fast = _base("jax", matmul_precision="tf32", categories_s={"matmul/conv": 0.004, "fusion/elementwise": 0.003},
                 device_busy_s=0.007, device_idle_s=0.001)
    slow = _base("pytorch", step_time_s=0.016, matmul_precision="highest",
                 dot_precision={"highest": 100}, categories_s={"matmul/conv": 0.010, "fusion/elementwise": 0.003},
                 device_busy_s=0.013, device_idle_s=0.001)
    contributors = explain_pair(slow, fast)
    names = _rules(contributors)
    # Both explain the same 6 ms: on a tie the specific cause ranks before the generic device time.
    assert names[:2] == ["matmul_precision", "device_time"]
    precision = next(c for c in contributors if c.rule == "matmul_precision")
    assert precision.seconds == pytest.approx(0.006)
    assert "100 of 100 dots/convolutions run at full fp32" in precision.claim
    assert "highest vs tf32" in precision.claim
    assert "kernel_launches" not in names and "host_bound" not in names


def test_data_loader_against_device_data_blames_host_idle_and_the_input_pipeline():
    fast = _base("jax", device_busy_s=0.008, device_idle_s=0.002)
    slow = _base("pytorch", step_time_s=0.030, data="loader", device_busy_s=0.008, device_idle_s=0.022)
    contributors = explain_pair(slow, fast)
    assert _rules(contributors) == ["host_bound", "input_pipeline"]
    assert contributors[0].seconds == pytest.approx(0.020)
    assert "73% of its step" in contributors[0].claim
    assert contributors[1].seconds is None
    assert contributors[1].claim.endswith("its step takes 30 ms against 10 ms, its device idles 22 ms per step against 2 ms")


def test_extra_transposes_from_layout_conventions():
    fast = _base("jax", transposes=10, copies=5)
    slow = _base("torch_xla", step_time_s=0.011, transposes=58, copies=5, kernels=448,
                 kernel_kinds={"fusion kLoop": 248, "fusion kInput": 100, "cublas": 100})
    contributors = explain_pair(slow, fast)
    names = _rules(contributors)
    assert "layout_changes" in names and "kernel_launches" in names
    layout = contributors[names.index("layout_changes")]
    assert layout.seconds == pytest.approx(48 * LAUNCH_COST_S["gpu"])  # no trace: extra count x launch cost
    assert "58 transposes and 5 copies against 10 and 5 under jax (+48 layout changes)" in layout.claim
    with_trace = explain_pair(_base("torch_xla", step_time_s=0.011, transposes=58, copies=5, layout_kernel_s=0.0009),
                              _base("jax", layout_kernel_s=0.0002))
    (measured,) = [c for c in with_trace if c.rule == "layout_changes"]
    assert measured.seconds == pytest.approx(0.0007) and measured.evidence["sized"] == "measured in the trace"


def test_more_bytes_accessed_is_memory_traffic_sized_by_bandwidth():
    fast = _base("jax", bytes_accessed=5e9)
    slow = _base("torch_xla", step_time_s=0.013, bytes_accessed=9e9)
    (only,) = explain_pair(slow, fast)
    assert only.rule == "memory_traffic"
    assert only.seconds == pytest.approx(4e9 / 2.0e12)  # 2 ms at the assumed 2 TB/s of a GPU
    assert "accesses 9 GB per step against 5 GB (1.80x)" in only.claim
    assert _rules(explain_pair(_base("torch_xla", step_time_s=0.013, bytes_accessed=5.2e9), fast)) == []  # 4%: not more


def test_same_programs_and_no_trace_give_no_contributors():
    assert explain_pair(_base("a", step_time_s=0.011), _base("b")) == []


def test_report_ranks_modes_against_the_fastest_and_keeps_failed_modes():
    summaries = [_base("jax"), _base("torch_xla", step_time_s=0.020, kernels=900),
                 ModeSummary(mode="pytorch", status="failed")]
    report = explain(summaries)
    assert report["fastest"] == "jax"
    by_mode = {m["mode"]: m for m in report["modes"]}
    assert by_mode["jax"]["contributors"] == [] and by_mode["jax"]["ratio"] == 1.0
    assert by_mode["torch_xla"]["gap_s"] == pytest.approx(0.010)
    assert by_mode["torch_xla"]["ratio"] == pytest.approx(2.0)
    assert by_mode["torch_xla"]["contributors"][0]["rule"] == "kernel_launches"
    assert by_mode["torch_xla"]["unexplained_s"] == pytest.approx(0.010 - 500 * LAUNCH_COST_S["gpu"])
    assert by_mode["pytorch"]["status"] == "failed" and by_mode["pytorch"]["gap_s"] is None


@pytest.mark.parametrize("name,rank", [("highest", 3), ("HIGHEST", 3), ("dot_f32_f32_f32", 3), ("fp32", 3),
                                       ("high", 2), ("dot_bf16_bf16_f32_x3", 2), ("default", 1), ("tf32", 1),
                                       ("dot_tf32_tf32_f32", 1), ("bf16", 1)])
def test_precision_rank(name, rank):
    assert precision_rank(name) == rank


def test_no_estimate_exceeds_the_gap():
    fast = _base("jax", device_busy_s=0.002, device_idle_s=0.0)
    slow = _base("jax-bf16", step_time_s=0.011, device_busy_s=0.009, device_idle_s=0.0)
    top = explain_pair(slow, fast)[0]
    assert top.rule == "device_time"
    assert top.seconds == pytest.approx(0.001) and top.evidence["estimate_before_cap_s"] == pytest.approx(0.007)


def test_bf16_against_fp32_on_a_cpu_names_the_precision_setting():
    fast = _base("jax fp32", platform="cpu", precision="fp32", compute_dtype="float32", converts=0)
    slow = _base("jax bf16", platform="cpu", step_time_s=0.013, precision="bf16", compute_dtype="bfloat16", converts=423)
    contributors = explain_pair(slow, fast)
    assert _rules(contributors) == ["compute_dtype"]
    claim = contributors[0].claim
    assert "--precision bf16 against fp32" in claim and "423 convert instructions against 0" in claim
    assert "emulated" in claim


def test_pytorch_eager_on_a_cpu_names_the_ops_it_dispatches():
    fast = _base("jax", platform="cpu")
    slow = ModeSummary(mode="pytorch", platform="cpu", step_time_s=0.004, framework_ops=1210)
    (only,) = explain_pair(slow, fast)
    assert only.rule == "eager_ops" and only.seconds is None
    assert "dispatched 1,210 PyTorch ops" in only.claim and "one compiled program of 400 kernels" in only.claim


def test_pytorch_eager_on_a_cpu_is_sized_by_its_time_in_aten_ops():
    """168 ms timed step; the profiled step took 222 ms, 201 ms of it inside aten ops (90.6%): ~152 ms of the timed
    step is host work in ops, against 1.49 ms of device time per step under JAX (XLA's CPU runtime)."""
    fast = _base("jax", platform="cpu", step_time_s=0.0017, device_busy_s=0.00149, device_idle_s=0.00021)
    slow = ModeSummary(mode="pytorch", platform="cpu", step_time_s=0.168, framework_ops=1027,
                       framework_op_s=0.201, framework_step_s=0.222)
    only = next(c for c in explain_pair(slow, fast) if c.rule == "eager_ops")
    host_s = 0.201 / 0.222 * 0.168
    assert only.seconds == pytest.approx(host_s - 0.00149)
    assert only.evidence["host_op_share"] == pytest.approx(0.201 / 0.222)
    for number in ("201 ms of the 222 ms profiled step", "(91%", f"~{host_s * 1e3:.3g} ms of the 168 ms timed step",
                   "against 1.49 ms device busy per step under jax", "the rest is Python and autograd"):
        assert number in only.claim, (number, only.claim)
    report = explain([fast, slow])
    entry = {m["mode"]: m for m in report["modes"]}["pytorch"]
    # The rest of the step is the time outside aten ops (host_outside_ops): the two split the whole gap.
    outside = {c["rule"]: c for c in entry["contributors"]}["host_outside_ops"]
    assert outside["seconds"] == pytest.approx((0.168 - host_s) - (0.0017 - 0.00149))
    assert entry["unexplained_s"] == pytest.approx(0.0, abs=1e-12)


def test_compiled_pytorch_against_eager_on_a_cpu_compares_time_in_aten_ops():
    fast = ModeSummary(mode="pytorch", platform="cpu", step_time_s=0.100, framework_ops=1000,
                       framework_op_s=0.090, framework_step_s=0.120)
    slow = ModeSummary(mode="pytorch+compile", platform="cpu", step_time_s=0.200, framework_ops=3000,
                       framework_op_s=0.600, framework_step_s=1.000)
    only, outside = sorted(explain_pair(slow, fast), key=lambda c: c.rule)
    assert (only.rule, outside.rule) == ("eager_ops", "host_outside_ops")
    assert only.seconds == pytest.approx(0.6 * 0.200 - 0.75 * 0.100)
    # 40% of its timed step outside aten ops (80 ms) against pytorch's 25% (25 ms).
    assert outside.seconds == pytest.approx(0.4 * 0.200 - 0.25 * 0.100)
    assert "Python, autograd and inductor's generated code" in outside.claim
    assert "inductor's generated code" in only.claim and "75 ms in aten ops per step under pytorch" in only.claim


def test_pytorch_on_a_cpu_names_its_time_outside_aten_ops():
    """A 10 ms timed step whose profiled 20 ms step spent 12 ms in aten ops: 8 ms outside (40%) is ~4 ms of the timed
    step; JAX's 2 ms step keeps its device busy 1.5 ms, so 0.5 ms of it is outside its work: 3.5 ms of the 8 ms gap.
    The ops' side: 6 ms in ops against 1.5 ms of device time, 4.5 ms; the two split the gap."""
    fast = _base("jax", platform="cpu", step_time_s=0.002, device_busy_s=0.0015, device_idle_s=0.0005)
    slow = ModeSummary(mode="pytorch", platform="cpu", step_time_s=0.010, framework_ops=500,
                       framework_op_s=0.012, framework_step_s=0.020)
    by_rule = {c.rule: c for c in explain_pair(slow, fast)}
    outside = by_rule["host_outside_ops"]
    assert outside.title == "Python / autograd host overhead outside framework ops"
    assert outside.seconds == pytest.approx(0.0035) and by_rule["eager_ops"].seconds == pytest.approx(0.0045)
    assert outside.evidence["outside_share"] == pytest.approx(0.4)
    for number in ("8 ms of the 20 ms profiled step", "(40%: Python and autograd)", "~4 ms of the 10 ms timed step",
                   "against 0.5 ms of the 2 ms step outside device busy under jax"):
        assert number in outside.claim, (number, outside.claim)


def test_time_outside_aten_ops_never_takes_the_gap_past_its_size():
    """JAX's device time exceeds the slow mode's time in ops (eager_ops sizes 0): the outside-ops part alone is capped
    at the gap. No trace measured, or device kernels present: not fired."""
    fast = _base("jax", platform="cpu", step_time_s=0.004, device_busy_s=0.0039)
    slow = ModeSummary(mode="pytorch", platform="cpu", step_time_s=0.005, framework_ops=500,
                       framework_op_s=0.001, framework_step_s=0.010)
    by_rule = {c.rule: c for c in explain_pair(slow, fast)}
    assert by_rule["eager_ops"].seconds == 0.0 and by_rule["host_outside_ops"].seconds == pytest.approx(0.001)
    assert "host_outside_ops" not in _rules(explain_pair(ModeSummary(mode="pytorch", platform="cpu",
                                                                     step_time_s=0.005, framework_ops=500), fast))
    gpu = ModeSummary(mode="pytorch", platform="gpu", step_time_s=0.005, framework_ops=500, trace_kernels=300,
                      framework_op_s=0.001, framework_step_s=0.010)
    assert "host_outside_ops" not in _rules(explain_pair(gpu, fast))


def test_pytorch_on_a_gpu_leaves_host_cost_to_device_idle_time():
    """With device kernels, the host's time in ops shows up as device idle time (host_bound), not counted twice."""
    fast = _base("jax", device_busy_s=0.008, device_idle_s=0.002, trace_kernels=400)
    slow = ModeSummary(mode="pytorch", platform="gpu", step_time_s=0.020, framework_ops=1210, trace_kernels=900,
                       framework_op_s=0.015, framework_step_s=0.021, device_busy_s=0.009, device_idle_s=0.011)
    eager = next(c for c in explain_pair(slow, fast) if c.rule == "eager_ops")
    assert eager.seconds is None and "host does the work" not in eager.claim


def test_every_claim_cites_numbers():
    """Each rule fired once on a constructed pair (GPU and CPU): every claim states figures, and its evidence too."""
    pairs = [
        (_base("t", step_time_s=0.03, kernels=800, kernel_kinds={"fusion kLoop": 600, "fusion kInput": 100, "cublas": 100},
               transposes=60, compiles_in_window=2, step_times_s=[0.01] * 18 + [0.5, 0.6], data="loader",
               dot_precision={"highest": 100}, matmul_precision="highest", flops=3e12, bytes_accessed=9e9,
               device_busy_s=0.02, device_idle_s=0.01, categories_s={"matmul/conv": 0.015}, precision="fp32"),
         _base("j", device_busy_s=0.009, device_idle_s=0.001, categories_s={"matmul/conv": 0.006}, precision="fp32")),
        (_base("p", platform="cpu", kernels=None, step_time_s=0.168, framework_ops=1210, precision="bf16",
               converts=423, framework_op_s=0.15, framework_step_s=0.2), _base("j", platform="cpu", precision="fp32", converts=0)),
    ]
    seen = set()
    for slow, fast in pairs:
        for contributor in explain_pair(slow, fast):
            seen.add(contributor.rule)
            assert any(ch.isdigit() for ch in contributor.claim), (contributor.rule, contributor.claim)
            assert contributor.evidence, contributor.rule
    assert {"recompilation", "host_bound", "kernel_launches", "layout_changes", "matmul_precision", "more_compute",
            "memory_traffic", "input_pipeline", "compute_dtype", "eager_ops", "host_outside_ops",
            "device_time"} <= seen, seen
