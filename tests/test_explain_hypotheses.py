"""The explain hypotheses (hloscope.explain.hypotheses) on constructed run summaries: each fires with its numbers in
its claim when the recorded facts support it, stays silent when they do not, labels what rests on an assumed constant,
and the engine attaches it to the largest significant ledger node it can explain, or to the run when none matches."""

from __future__ import annotations

from statistics import median

import pytest

from hloscope.explain import hypotheses as h
from hloscope.explain.engine import explain
from hloscope.explain.ledger import RunLedger
from hloscope.explain.report import ExplainReport
from hloscope.explain.summary import ModeSummary


def _base(mode: str, **overrides) -> ModeSummary:
    """A GPU run with everything the hypotheses read, the same on both sides unless overridden."""
    values = {"mode": mode, "platform": "gpu", "step_time_s": 0.010, "step_times_s": [0.010] * 20, "compiles_in_window": 0,
                  "data": "device", "precision": "fp32", "matmul_precision": "default", "compute_dtype": "float32", "kernels": 400,
                  "transposes": 10, "copies": 5, "converts": 3, "dot_precision": {"default": 100}, "flops": 1e12, "bytes_accessed": 5e9,
                  "settings": {"attention": "eager"}}
    values.update(overrides)
    return ModeSummary(**values)


def _fires(rule, slow, fast) -> h.Annotation:
    annotation = rule(slow, fast)
    assert annotation is not None and annotation.rule == rule.__name__
    assert annotation.claim and annotation.nodes
    return annotation


def test_no_hypothesis_fires_on_two_identical_runs():
    assert [rule(_base("a"), _base("b")) for rule in h.HYPOTHESES] == [None] * len(h.HYPOTHESES)


# ---- each hypothesis: fires with its numbers, silent otherwise ------------------------------------------------------


def test_recompilation_counts_compiles_and_the_slow_steps():
    times = [0.010] * 18 + [0.510, 0.610]
    slow = _base("pytorch+compile", step_times_s=times, compiles_in_window=2)
    found = _fires(h.recompilation, slow, _base("jax"))
    assert "compiled 2 time(s) inside the timed window (jax: 0)" in found.claim
    assert "2 of 20 timed steps took over twice the median (slowest 610.000 ms)" in found.claim
    assert found.evidence["steps_over_twice_median"] == 2 and found.kind == "measured"
    assert "idle:compilation" in found.nodes
    assert h.recompilation(_base("a", compiles_in_window=2), _base("b", compiles_in_window=2)) is None
    assert h.recompilation(_base("a", compiles_in_window=None), _base("b")) is None


def test_kernel_launches_prefers_the_profiles_executions_and_falls_back_to_the_program():
    slow, fast = _base("torch_xla", executed_per_step=342), _base("jax", executed_per_step=265)
    found = _fires(h.kernel_launches, slow, fast)
    assert "executes 342 ops/kernels per step against 265 under jax (1.29x, from the profile" in found.claim
    assert "FLOPs ratio 1.00x" in found.claim
    assert found.evidence == {"executions_per_step": {"torch_xla": 342, "jax": 265},
                              "counted_from": "profile (every executed op, copies included)"}
    # No profile on one side: the compiled programs' kernel counts.
    found = _fires(h.kernel_launches, _base("torch_xla", kernels=800), _base("jax", executed_per_step=265))
    assert "800 ops/kernels per step against 400" in found.claim and "compiled program" in found.evidence["counted_from"]
    # Within 5%, or fewer: silent.
    assert h.kernel_launches(_base("a", executed_per_step=270), _base("b", executed_per_step=265)) is None
    assert h.kernel_launches(_base("a", executed_per_step=200), _base("b", executed_per_step=265)) is None
    assert h.kernel_launches(_base("a", kernels=None), _base("b", kernels=None)) is None


def test_layout_changes_from_executed_copies_or_from_the_program():
    slow = _base("torch_xla", executed_copies_per_step=77, transposes=60, copies=51)
    found = _fires(h.layout_changes, slow, _base("jax", executed_copies_per_step=12))
    assert "executes 77 top-level copies/transposes per step against 12 under jax" in found.claim
    assert "60 transposes and 51 copies (fusion bodies included) against 10 and 5" in found.claim
    assert found.nodes == ("device:copy/transpose", "device:memcpy/memset")
    assert found.evidence["executed_copies_per_step"] == {"torch_xla": 77, "jax": 12}
    only_trace = _fires(h.layout_changes, _base("a", executed_copies_per_step=3), _base("b", executed_copies_per_step=1))
    assert "program" not in only_trace.claim
    assert h.layout_changes(_base("a", executed_copies_per_step=12), _base("b", executed_copies_per_step=12)) is None
    assert h.layout_changes(_base("a", transposes=5, copies=5), _base("b")) is None  # fewer than the other side


@pytest.mark.parametrize("name,rank", [
    ("highest", 3), ("HIGHEST", 3), ("fp32", 3), ("float32", 3), ("f32", 3), ("ALG_DOT_F32_F32_F32", 3),
    ("high", 2), ("bf16x3", 2), ("BF16_BF16_F32_X6", 2), ("bf16_bf16_f32_x9", 2),
    ("default", 1), ("tf32", 1), ("bf16", 1), ("medium", 1), ("", 1),
])
def test_precision_rank(name, rank):
    assert h.precision_rank(name) == rank


def test_matmul_precision_compares_the_share_of_full_precision_dots_not_their_count():
    # 100 of 100 dots at fp32 against 100 of 250 under the fast run: more dots there, a smaller share at fp32.
    slow = _base("pytorch", dot_precision={"highest": 100})
    fast = _base("jax", dot_precision={"highest": 100, "default": 150})
    found = _fires(h.matmul_precision, slow, fast)
    assert "100 of 100 dots/convolutions run at full fp32 under pytorch against 100 of 250 under jax" in found.claim
    assert found.nodes == ("device:matmul/conv", "host:inside framework ops") and found.kind == "measured"
    # Twice the full-precision dots, the same share (all of them): no difference in precision.
    assert h.matmul_precision(_base("a", dot_precision={"highest": 200}), _base("b", dot_precision={"highest": 100})) is None
    # The same share within 5 points: silent.
    assert h.matmul_precision(_base("a", dot_precision={"highest": 52, "default": 48}),
                              _base("b", dot_precision={"highest": 50, "default": 50})) is None


def test_matmul_precision_from_the_settings_in_effect():
    found = _fires(h.matmul_precision, _base("pytorch", matmul_precision="highest"), _base("jax", matmul_precision="tf32"))
    assert found.claim == "matmul precision in effect: highest vs tf32"
    assert found.evidence["matmul_precision"] == {"pytorch": "highest", "jax": "tf32"}
    # Different names of the same rank (tf32, bf16, default are all below fp32): silent.
    assert h.matmul_precision(_base("a", matmul_precision="tf32"), _base("b", matmul_precision="default")) is None
    assert h.matmul_precision(_base("a", matmul_precision=None), _base("b", matmul_precision="highest")) is None


def test_more_compute_cites_the_flops_and_the_uncosted_library_calls():
    slow = _base("torch_xla", flops=1.5e12, uncosted_custom_calls=4)
    found = _fires(h.more_compute, slow, _base("jax", uncosted_custom_calls=2))
    assert "does 1.5e+12 FLOPs per step against 1e+12 (1.50x, XLA's cost analysis" in found.claim
    assert "(not counting 4 and 2 library calls" in found.claim
    assert found.evidence["flops"] == {"torch_xla": 1.5e12, "jax": 1e12}
    assert h.more_compute(_base("a", flops=1.04e12), _base("b")) is None  # within 5%
    assert h.more_compute(_base("a", flops=None), _base("b")) is None


@pytest.mark.parametrize("platform,bandwidth", [("gpu", 2.0e12), ("cpu", 2.0e10), ("tpu", 1.2e12), ("", 1.0e11)])
def test_memory_traffic_is_an_estimate_that_names_its_assumed_bandwidth(platform, bandwidth):
    slow, fast = _base("a", platform=platform, bytes_accessed=7e9), _base("b", platform=platform, bytes_accessed=5e9)
    found = _fires(h.memory_traffic, slow, fast)
    assert found.kind == "estimate" and found.evidence["assumed"] == {"memory_bandwidth_B_s": bandwidth}
    assert found.evidence["extra_bytes"] == pytest.approx(2e9)
    assert found.evidence["estimate_s"] == pytest.approx(2e9 / bandwidth)
    assert "accesses 7 GB per step against 5 GB (1.40x)" in found.claim and found.claim.endswith("(estimate)")
    assert f"at an assumed {h._bytes(bandwidth)}/s" in found.claim
    assert h.memory_traffic(_base("a", bytes_accessed=5.1e9), _base("b")) is None


def test_input_pipeline_only_when_one_side_loads_through_a_dataloader():
    found = _fires(h.input_pipeline, _base("jax (loader)", data="loader"), _base("jax (device)"))
    assert found.claim == "jax (loader) uses --data loader while jax (device) uses --data device"
    assert found.nodes[0] == "idle:input pipeline" and "host:input pipeline" in found.nodes
    assert h.input_pipeline(_base("a", data="loader"), _base("b", data="loader")) is None
    assert h.input_pipeline(_base("a", data="device"), _base("b", data=None)) is None


def test_compute_dtype_cites_the_setting_the_dtype_and_the_converts():
    slow = _base("jax (bf16)", platform="cpu", precision="bf16", compute_dtype="bfloat16", converts=210)
    found = _fires(h.compute_dtype, slow, _base("jax (fp32)", platform="cpu"))
    assert "jax (bf16) ran with --precision bf16 against fp32 under jax (fp32)" in found.claim
    assert "(computing in bfloat16 against float32)" in found.claim
    assert "its program has 210 convert instructions against 3" in found.claim
    assert "on a CPU bf16 arithmetic is usually emulated" in found.claim
    assert found.nodes == ("device:", "host:inside framework ops")
    on_gpu = _fires(h.compute_dtype, _base("a", precision="bf16"), _base("b"))
    assert "emulated" not in on_gpu.claim
    assert h.compute_dtype(_base("a", compute_dtype="bfloat16"), _base("b")) is None  # the same --precision
    assert h.compute_dtype(_base("a", precision=None), _base("b")) is None


def test_attention_implementation():
    found = _fires(h.attention, _base("pytorch", settings={"attention": "eager"}), _base("jax", settings={"attention": "sdpa"}))
    assert found.claim == "attention: eager under pytorch, sdpa under jax"
    assert h.attention(_base("a"), _base("b")) is None
    assert h.attention(_base("a", settings={}), _base("b", settings={"attention": "sdpa"})) is None


def test_eager_ops_against_a_compiled_program_and_not_against_the_same_dispatch():
    slow = _base("pytorch", kernels=None, framework_ops=1027)
    found = _fires(h.eager_ops, slow, _base("jax", kernels=265))
    assert found.claim == ("pytorch dispatched 1,027 PyTorch ops (aten::*, nested ones included) per profiled step, "
                           "one by one from Python, where jax runs a compiled program of 265 kernels")
    assert found.evidence == {"framework_ops_per_step": {"pytorch": 1027, "jax": None}}
    compiled = _fires(h.eager_ops, _base("pytorch+compile", kernels=None, framework_ops=3254),
                      _base("pytorch", kernels=None, framework_ops=1027))
    assert "one by one" not in compiled.claim and "against 1,027 under pytorch" in compiled.claim
    # Both eager, the same ops (--data device vs loader): not what differs.
    assert h.eager_ops(_base("a", kernels=None, framework_ops=1027), _base("b", kernels=None, framework_ops=1027)) is None
    assert h.eager_ops(_base("torch_xla", framework_ops=300), _base("jax")) is None  # it has an XLA program
    assert h.eager_ops(_base("jax", kernels=None), _base("b")) is None  # no framework ops


# ---- the engine attaches each hypothesis to a node, or to the run ---------------------------------------------------


def _ledger(nodes: dict[str, list[float]]) -> RunLedger:
    n = len(next(iter(nodes.values())))
    steps = [sum(values[i] for values in nodes.values()) for i in range(n)]
    busy = [sum(v[i] for k, v in nodes.items() if k.startswith("device:")) for i in range(n)]
    return RunLedger(nodes, {}, steps, n + 1, {"0": "profiler warm-up"}, True, busy)


WOBBLE = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0]


def _series(seconds: float) -> list[float]:
    return [seconds * w for w in WOBBLE]


def _timed(ms: float) -> list[float]:
    return [ms * 1e-3 * (1 + 0.01 * ((i % 5) - 2)) for i in range(20)]


def _run(mode: str, ms: float, nodes: dict[str, float], **fields) -> ModeSummary:
    steps = _timed(ms)
    return ModeSummary(mode=mode, platform="cpu", step_times_s=steps, step_time_s=median(steps),
                       ledger=_ledger({node: _series(s) for node, s in nodes.items()}), **fields)


def _entry(report: ExplainReport, mode: str) -> dict:
    """One run's result as `explain --json` prints it."""
    return {m["mode"]: m for m in report.to_dict()["modes"]}[mode]


def test_a_hypothesis_annotates_the_largest_significant_node_it_names():
    """bf16 against fp32: matmul time and reductions grew (both significant); compute_dtype names every device node:
    it sits on the largest, the other is listed in also_nodes; the idle node that did not move gets nothing."""
    fast = _run("jax (fp32)", 1.0, {"device:matmul/conv": 4e-4, "device:reduction": 1e-4, "idle:other host": 5e-4},
                precision="fp32")
    slow = _run("jax (bf16)", 2.0, {"device:matmul/conv": 8e-4, "device:reduction": 7e-4, "idle:other host": 5e-4},
                precision="bf16")
    entry = _entry(explain([fast, slow]), "jax (bf16)")
    assert entry["verdict"] == "slower"
    by_node = {c["node"]: c for c in entry["contributors"]}
    assert [c["node"] for c in entry["contributors"] if c["significant"]] == ["device:reduction", "device:matmul/conv"]
    (annotation,) = by_node["device:reduction"]["annotations"]
    assert annotation["rule"] == "compute_dtype" and annotation["also_nodes"] == ["device:matmul/conv"]
    assert "--precision bf16 against fp32" in annotation["claim"]
    assert by_node["device:matmul/conv"]["annotations"] == []
    assert entry["annotations"] == []  # attached: not repeated on the run
    assert sum(c["seconds"] for c in entry["contributors"]) + entry["residual_s"] == pytest.approx(entry["gap_s"])


def test_a_hypothesis_with_no_matching_node_stays_on_the_run():
    """The input pipeline differs, but the time grew in device work: input_pipeline names idle/host nodes only, so
    it is listed on the run, not on the device node."""
    fast = _run("a", 1.0, {"device:matmul/conv": 4e-4, "idle:other host": 6e-4}, data="device")
    slow = _run("b", 2.0, {"device:matmul/conv": 1.4e-3, "idle:other host": 6e-4}, data="loader")
    entry = _entry(explain([fast, slow]), "b")
    (contributor,) = [c for c in entry["contributors"] if c["significant"]]
    assert contributor["node"] == "device:matmul/conv" and contributor["annotations"] == []
    assert [a["rule"] for a in entry["annotations"]] == ["input_pipeline"]


def test_a_node_moving_against_the_gap_gets_no_annotation():
    """The slow run's input pipeline grew while its device time shrank: layout_changes (device nodes only) has no
    node moving with the gap and stays on the run; input_pipeline annotates the idle node."""
    fast = _run("a", 1.0, {"device:copy/transpose": 5e-4, "idle:other host": 5e-4},
                data="device", executed_copies_per_step=10)
    slow = _run("b", 2.0, {"device:copy/transpose": 2e-4, "idle:input pipeline": 1.3e-3, "idle:other host": 5e-4},
                data="loader", executed_copies_per_step=20)
    entry = _entry(explain([fast, slow]), "b")
    by_node = {c["node"]: c for c in entry["contributors"] if c["significant"]}
    assert by_node["device:copy/transpose"]["seconds"] < 0 and by_node["device:copy/transpose"]["annotations"] == []
    assert [a["rule"] for a in by_node["idle:input pipeline"]["annotations"]] == ["input_pipeline"]
    assert [a["rule"] for a in entry["annotations"]] == ["layout_changes"]


def test_no_hypothesis_for_a_gap_that_is_not_significant():
    fast = _run("a", 1.0, {"device:matmul/conv": 4e-4, "idle:other host": 6e-4}, data="device")
    slow = _run("b", 1.01, {"device:matmul/conv": 4e-4, "idle:other host": 6e-4}, data="loader")
    entry = _entry(explain([fast, slow]), "b")
    assert entry["verdict"] == "no significant difference"
    assert entry["contributors"] == [] and entry["annotations"] == []


def test_without_a_profile_the_hypotheses_stay_on_the_run_and_the_estimate_keeps_its_label():
    steps_a, steps_b = _timed(1.0), _timed(2.0)
    fast = ModeSummary(mode="a", platform="cpu", step_times_s=steps_a, step_time_s=median(steps_a), bytes_accessed=1e6)
    slow = ModeSummary(mode="b", platform="cpu", step_times_s=steps_b, step_time_s=median(steps_b), bytes_accessed=3e6,
                       compiles_in_window=1)
    entry = _entry(explain([fast, slow]), "b")
    assert entry["contributors"] == [] and entry["residual_s"] == pytest.approx(entry["gap_s"])
    rules = {a["rule"]: a for a in entry["annotations"]}
    assert set(rules) == {"memory_traffic", "recompilation"}
    assert rules["memory_traffic"]["kind"] == "estimate" and rules["recompilation"]["kind"] == "measured"
    assert rules["memory_traffic"]["evidence"]["assumed"] == {"memory_bandwidth_B_s": 2.0e10}
