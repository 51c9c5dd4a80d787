"""explain --test-hypotheses for the settings a run has in effect without asking: the CPU threads (--threads), the
donation of the state (--donate / --no-donate), torch.compile's mode and fullgraph. Planning only: which re-run is
planned with which option, and which test cannot run and why, without running a framework."""

from __future__ import annotations

from helpers import run_record

from hloscope.explain.experiments import NOT_TESTED, PairPlan, conclude, plan_tests
from hloscope.explain.hypotheses import Annotation
from hloscope.explain.report import ConfigDifference, Contributor, ModeResult
from hloscope.explain.tested import refuse_what_this_machine_cannot_run, run_options
from hloscope.runs.settings import IN_EFFECT, in_effect


def _result(rules: list[str], differences: list[dict] | None = None) -> ModeResult:
    annotations = [Annotation(rule, rule, "claim", ("device:",)) for rule in rules]
    contributor = Contributor("device:copies", "t", True, 0.01, None, None, "c", {}, annotations=annotations)
    result = ModeResult("slow", "ok", significant=True, verdict="slower", contributors=[contributor])
    result.config_differences = [ConfigDifference(**d) for d in differences or []]
    return result


def _options(mode: str, **config) -> dict:
    """A side's options as explain reads them: its config, with what its record had in effect."""
    record = {"mode": mode, "config": {"mode": mode, **config},
              "environment": {"threads": {"cpu_affinity": config.get("threads") or 2}}}
    return {"mode": mode, **config, IN_EFFECT: in_effect(run_record(record))}


def test_a_thread_difference_plans_a_threads_re_run_with_the_faster_sides_count():
    slow, fast = _options("jax", threads=2), _options("jax", threads=1)
    tests = plan_tests(_result([], [{"field": "threads", "a": "2", "b": "1"},
                                    {"field": "threads.cpu_affinity", "a": "2", "b": "1"}]), slow, fast)
    assert len(tests) == 1
    test = tests[0]
    assert (test.setting, test.slow_value, test.fast_value, test.untestable) == ("threads", 2, 1, None)
    assert test.change == "--threads 2 -> 1" and test.title == "matching the CPU threads"
    plan = PairPlan("jax [a]", "jax [b]", slow, fast, tests)
    assert plan.variants()["slower, threads=1"]["threads"] == 1


def test_a_thread_difference_recorded_only_in_the_environment_is_matched_to_the_recorded_cpus():
    """Neither side asked for --threads: the re-run gets the faster run's CPU affinity as --threads."""
    slow_run = run_record({"mode": "pytorch", "environment": {"threads": {"cpu_affinity": 2}}})
    fast_run = run_record({"mode": "jax", "environment": {"threads": {"cpu_affinity": 1}}})
    slow, fast = {"mode": "pytorch", IN_EFFECT: in_effect(slow_run)}, {"mode": "jax", IN_EFFECT: in_effect(fast_run)}
    tests = plan_tests(_result([], [{"field": "env.OMP_NUM_THREADS", "a": "2", "b": "1"}]), slow, fast)
    assert [(t.setting, t.slow_value, t.fast_value, t.untestable) for t in tests] == [("threads", 2, 1, None)]


def test_layout_changes_where_the_faster_side_donates_plan_a_donate_re_run():
    slow, fast = _options("jax"), _options("torch_xla")
    tests = plan_tests(_result(["layout_changes"]), slow, fast)
    donate = next(t for t in tests if t.setting == "donate")
    assert donate.rules == ["layout_changes"] and donate.untestable is None
    assert (donate.slow_value, donate.fast_value) == (False, True)
    plan = PairPlan("jax", "torch_xla", slow, fast, tests)
    assert plan.variants()["slower, donate=True"]["donate"] is True


def test_a_donation_difference_is_planned_with_the_faster_sides_value():
    slow, fast = _options("torchax", donate=False), _options("torchax", donate=True)
    tests = plan_tests(_result([], [{"field": "donate", "a": "False", "b": "True"}]), slow, fast)
    assert [(t.setting, t.fast_value, t.untestable) for t in tests] == [("donate", True, None)]


def test_layout_changes_where_the_faster_side_does_not_donate_stay_untestable():
    tests = plan_tests(_result(["layout_changes"]), _options("torch_xla"), _options("jax"))
    assert len(tests) == 1 and tests[0].setting is None
    assert "layout choices" in str(tests[0].untestable)


def test_donation_in_eager_pytorch_could_not_be_tested_and_says_why_without_running():
    slow, fast = _options("pytorch"), _options("jax", donate=True)
    tests = plan_tests(_result(["layout_changes"], [{"field": "donate", "a": None, "b": "True"}]), slow, fast)
    donate = next(t for t in tests if t.setting == "donate")
    assert donate.untestable is not None
    assert "eager PyTorch updates the state in place; donation does not apply" in donate.untestable
    plan = PairPlan("pytorch", "jax", slow, fast, tests)
    assert list(plan.variants()) == ["baseline", "slower"]
    tested = conclude(plan, {}, {"baseline": "", "slower": ""}, None, 0, [])
    assert tested.tests[0].verdict == NOT_TESTED and "donation does not apply" in tested.tests[0].why


def test_a_compile_mode_in_a_mode_without_torch_compile_could_not_be_tested():
    slow, fast = _options("jax"), _options("pytorch+compile", compile_mode="reduce-overhead")
    tests = plan_tests(_result([], [{"field": "compile_mode", "a": None, "b": "reduce-overhead"}]), slow, fast)
    assert len(tests) == 1 and tests[0].setting == "compile_mode"
    assert "does not call torch.compile" in str(tests[0].untestable)


def test_a_compile_mode_difference_between_compiled_runs_is_planned():
    slow, fast = _options("pytorch+compile"), _options("pytorch+compile", compile_mode="max-autotune")
    tests = plan_tests(_result([], [{"field": "compile_mode", "a": None, "b": "max-autotune"}]), slow, fast)
    assert [(t.setting, t.slow_value, t.fast_value, t.untestable) for t in tests] == [
        ("compile_mode", "default", "max-autotune", None)]


def test_fullgraph_on_the_faster_side_is_planned_for_a_compiled_slower_side_and_refused_otherwise():
    fast = _options("pytorch+compile", fullgraph=True)
    difference = [{"field": "fullgraph", "a": None, "b": "True"}]
    compiled = plan_tests(_result([], difference), _options("torch_xla+compile"), fast)
    assert [(t.setting, t.slow_value, t.fast_value, t.untestable) for t in compiled] == [
        ("fullgraph", False, True, None)]
    eager = plan_tests(_result([], difference), _options("torchax"), fast)
    assert "does not call torch.compile" in str(eager[0].untestable)


def test_a_planned_re_run_is_started_with_the_changed_option(tmp_path):
    """The slower configuration with the faster one's donation: its child run is given --donate, the others not."""
    from hloscope.runs.experiments import _bare, _fields
    from hloscope.runs.runner import PlannedRun, run_command

    slow, fast = _options("jax"), _options("torch_xla")
    plan = PairPlan("jax", "torch_xla", slow, fast, plan_tests(_result(["layout_changes"]), slow, fast))
    configurations = {name: run_options(fields) for name, fields in plan.variants().items()}
    first = next(iter(configurations.values()))
    flags = {}
    for name, options in configurations.items():
        planned = PlannedRun(options.mode, variant=name, changes=tuple(_fields(options).items()))
        command = run_command(planned.options(lambda mode: _bare(mode, first)), tmp_path)
        flags[name] = [arg for arg in command if arg in ("--donate", "--no-donate")]
    assert flags == {"baseline": [], "slower": [], "slower, donate=True": ["--donate"]}


def test_a_donation_change_is_said_as_the_options_that_set_it():
    slow, fast = _options("jax"), _options("torch_xla")
    [donate] = [t for t in plan_tests(_result(["layout_changes"]), slow, fast) if t.setting == "donate"]
    assert donate.change == "--no-donate -> --donate"
    tested = conclude(PairPlan("jax", "torch_xla", slow, fast, [donate]), {}, {"baseline": "", "slower": ""}, None, 0,
                      [])
    assert tested.tests[0].change == "--no-donate -> --donate"


def test_the_report_leads_with_the_option_the_re_run_was_given():
    from hloscope.explain.experiments import HypothesisTest, PairTests, TestedBlock
    from hloscope.render.tested_views import lead_lines

    test = HypothesisTest(["donate"], "matching the donation of the state", "donate", True, False, "cannot tell",
                          "why", change="--donate -> --no-donate")
    block = TestedBlock(60.0, pairs=[PairTests("jax [a]", "jax [b]", None, 1, tests=[test])])
    assert lead_lines(block)[0].startswith("matching the donation of the state (--no-donate) ")


def test_more_threads_than_this_machine_has_could_not_be_tested_here():
    """The faster run was made on a larger machine: no re-run is started for its thread count."""
    from hloscope.machine import usable_cpus

    slow, fast = _options("jax", threads=1), _options("jax", threads=usable_cpus() + 1)
    plan = PairPlan("jax [a]", "jax [b]", slow, fast,
                    plan_tests(_result([], [{"field": "threads", "a": "1", "b": "3"}]), slow, fast))
    assert plan.runnable
    refuse_what_this_machine_cannot_run([plan])
    assert not plan.runnable
    assert f"--threads {usable_cpus() + 1}: this machine lets hloscope use" in str(plan.tests[0].untestable)


def test_a_thread_figure_that_differs_on_the_same_cpus_could_not_be_tested_saying_why():
    """OMP_NUM_THREADS exported on one side only, both runs on the same 2 CPUs: --threads cannot change the thread
    figure alone, so nothing is re-run, and the reason is not that the setting is the same."""
    slow, fast = _options("pytorch"), _options("pytorch")
    differences = [{"field": "env.OMP_NUM_THREADS", "a": "1", "b": None},
                   {"field": "threads.torch_num_threads", "a": "1", "b": "2"}]
    [test] = plan_tests(_result([], differences), slow, fast)
    assert test.setting == "threads" and test.untestable is not None
    assert "not set alone by hloscope" in test.untestable and "cannot hold" not in test.untestable


def test_a_pair_recorded_with_more_threads_than_this_machine_has_is_not_re_run():
    """Both runs were made with --threads beyond this machine's CPUs: every re-run of the pair would ask for them
    again and stop at once, so no test of it runs, whatever its setting."""
    from hloscope.machine import usable_cpus

    too_many = usable_cpus() + 1
    slow = _options("jax", threads=too_many, precision="bf16")
    fast = _options("jax", threads=too_many, precision="fp32")
    plan = PairPlan("jax [a]", "jax [b]", slow, fast, plan_tests(_result(["compute_dtype"]), slow, fast))
    assert [t.setting for t in plan.runnable] == ["precision"]
    refuse_what_this_machine_cannot_run([plan])
    assert not plan.runnable
    assert "cannot re-run the pair as it was recorded" in str(plan.tests[0].untestable)
