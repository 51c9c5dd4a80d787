"""The API functions behind trace stats, trace export, replay and tensorboard return what those commands print
(their --json, their summary line, their one-line refusals), on real traces and a small module."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from trace_job_data import make_job

from hloscope import api
from hloscope.errors import InputError, UsageError
from hloscope.runs import rundir

ALEXNET = "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
TRITON = "hta/triton_example__triton_example.json.gz"
XPLANE = "tracelens/test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb"
# f(w, x) = (sum(w * x), w - x): a train step in miniature, replayed on the CPU
MODULE = """HloModule step, entry_computation_layout={(f32[4,3]{1,0}, f32[4,3]{1,0})->(f32[], f32[4,3]{1,0})}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}

ENTRY %step (p0: f32[4,3], p1: f32[4,3]) -> (f32[], f32[4,3]) {
  %p0 = f32[4,3]{1,0} parameter(0)
  %p1 = f32[4,3]{1,0} parameter(1)
  %multiply = f32[4,3]{1,0} multiply(%p0, %p1)
  %zero = f32[] constant(0)
  %reduce = f32[] reduce(%multiply, %zero), dimensions={0,1}, to_apply=%add
  %subtract = f32[4,3]{1,0} subtract(%p0, %p1)
  ROOT %tuple = (f32[], f32[4,3]{1,0}) tuple(%reduce, %subtract)
}
"""
# what a replay measures anew each time
MEASURED = {"created_at", "timing", "warnings", "loss"}


def _run_record(mode: str) -> dict:
    return {"schema_version": 1, "run_id": mode, "mode": mode, "status": "ok", "error": None, "config": {},
            "environment": {}, "timing": {}, "artifacts": []}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Three ranks of one job (HTA's two real ranks, time-shifted; rank 1 with another kernel mix)."""
    return make_job(tmp_path_factory.mktemp("job") / "job", ranks=3, straggler=2, odd_mix=1)


@pytest.fixture
def comparison(fixtures_dir, tmp_path):
    """A comparison of a PyTorch mode (a Kineto trace) and a JAX mode (an xplane)."""
    folder = tmp_path / "cmp"
    for mode, fixture, name in [("pytorch", TRITON, "kineto/vm.1.pt.trace.json.gz"),
                                ("jax", XPLANE, "plugins/profile/2026_01_01/vm.xplane.pb")]:
        (folder / mode / name).parent.mkdir(parents=True)
        shutil.copy(fixtures_dir / fixture, folder / mode / name)
        rundir.write_run(folder / mode, _run_record(mode))
    rundir.write_comparison(folder, {"schema_version": 1, "comparison_id": "cmp", "config": {}, "modes": [
        {"mode": "pytorch", "dir": "pytorch"}, {"mode": "jax", "dir": "jax"}]})
    return folder


def test_trace_job_is_what_trace_stats_prints_for_a_job(cli_run, job):
    document = api.trace_job(job, top=3, jobs=1)
    code, out, err = cli_run("trace", "stats", str(job), "--json", "--top", "3", "-j", "1")
    assert code == 0, err
    assert json.dumps(document.to_dict(), indent=1) + "\n" == out  # byte for byte
    assert [r.rank for r in document.ranks or []] == [0, 1, 2] and document.job and document.job.ranks


def test_trace_job_is_what_trace_stats_prints_for_some_ranks_of_a_comparison(cli_run, job, comparison):
    assert set(api.trace_job(job, ranks="1-2", jobs=1).to_dict()) == {"traces", "ranks", "job"}
    code, out, err = cli_run("trace", "stats", str(job), "--ranks", "1-2", "--json", "-j", "1")
    assert code == 0, err
    assert json.loads(json.dumps(api.trace_job(job, rank=[1, 2], jobs=1).to_dict())) == json.loads(out)
    document = api.trace_job(comparison, jobs=1)
    code, out, err = cli_run("trace", "stats", str(comparison), "--json", "-j", "1")
    assert code == 0, err
    assert json.loads(json.dumps(document.to_dict())) == json.loads(out)
    assert [row.mode for row in document.modes or []] == ["pytorch", "jax"]


def test_trace_job_hands_unreadable_traces_to_the_caller_or_raises(cli_run, fixtures_dir, tmp_path):
    shutil.copy(fixtures_dir / ALEXNET, tmp_path / "a.pt.trace.json.gz")
    (tmp_path / "b.pt.trace.json").write_text('{"traceEvents": [')
    failures: list[InputError] = []
    document = api.trace_job(tmp_path, jobs=1, failures=failures)
    code, out, err = cli_run("trace", "stats", str(tmp_path), "--json", "-j", "1")
    assert code == 2 and json.loads(out) == document.to_dict()
    assert [str(error) for error in failures] == [err.strip().removeprefix("hloscope: error: ")]
    assert "b.pt.trace.json" in str(failures[0])
    with pytest.raises(InputError, match=r"b\.pt\.trace\.json: truncated JSON"):
        api.trace_job(tmp_path, jobs=1)
    with pytest.raises(UsageError, match="has rank"):
        api.trace_job(tmp_path, rank=[7])


def test_trace_export_writes_what_the_command_reports(cli_run, job, tmp_path):
    done = api.trace_export(job, tmp_path / "api", jobs=1)
    code, out, err = cli_run("trace", "export", str(job), str(tmp_path / "cli"), "-j", "1")
    assert code == 0, err
    assert out == (f"{done.events:,} events of {done.traces} trace(s) in {tmp_path / 'cli'} "
                   f"({done.reused} already exported, kept)\n")
    assert done.traces == 3 and done.reused == 0 and done.events > 0
    assert [f.rank for f in done.files] == [0, 1, 2]
    assert sum(f.rows for f in done.files) == done.events
    assert list(done.to_dict()) == ["out", "events", "traces", "reused", "files"]
    assert list(done.to_dict()["files"][0]) == ["file", "rank", "out", "rows", "reused"]
    for written in done.files:  # the same files, byte for byte
        made = tmp_path / "cli" / written.out.removeprefix(str(tmp_path / "api") + "/")
        assert made.read_bytes() == (tmp_path / "api" / made.relative_to(tmp_path / "cli")).read_bytes()
    again = api.trace_export(job, tmp_path / "api", ranks="0", jobs=1)
    assert again.traces == 1 and again.reused == 1


def test_replay_is_what_the_command_prints(cli_run, tmp_path):
    module = tmp_path / "module_0000.step.before_optimizations.txt"
    module.write_text(MODULE)
    record = api.replay(module, steps=3, warmup=1)
    code, out, err = cli_run("replay", str(module), "--json", "--steps", "3", "--warmup", "1")
    assert code == 0, err
    printed = json.loads(out)
    assert record.status == "ok" and record.written == str(tmp_path / (module.name + ".replay.json"))
    assert printed["written"] == str(tmp_path / (module.name + ".replay-2.json"))  # never overwritten
    same = json.loads(json.dumps(record.to_dict(), default=str))
    assert list(same) == list(printed)  # the same keys, in the same order
    for key in MEASURED | {"written", "modules"}:
        same.pop(key, None)
        printed.pop(key, None)
    assert same == printed
    assert len(record.timing.step_times_s) == 3


def test_replay_leaves_the_callers_environment_as_it_was(tmp_path, monkeypatch):
    """XLA runs in the child, which gets JAX_PLATFORMS=cpu in its own environment: the caller's is not changed."""
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    module = tmp_path / "module_0000.step.before_optimizations.txt"
    module.write_text(MODULE)
    before = dict(os.environ)
    assert api.replay(module, steps=2, warmup=1).status == "ok"
    assert dict(os.environ) == before


def test_replays_refuse_a_comparison_without_xla_runs_as_the_command(cli_run, tmp_path):
    rundir.write_comparison(tmp_path, {"schema_version": 1, "comparison_id": "c", "config": {}, "modes": [
        {"mode": "torch_xla", "dir": "torch_xla", "status": "failed"}]})
    with pytest.raises(UsageError) as refused:
        api.replays(tmp_path)
    code, out, err = cli_run("replay", str(tmp_path), "--json")
    assert code == 2 and out == ""
    assert err == f"hloscope: error: {refused.value}\n"
    assert "no run of an XLA mode" in err


def test_tensorboard_view_holds_each_profile_and_writes_nothing_under_the_directory(fixtures_dir, tmp_path):
    source = tmp_path / "traces" / "run" / "plugins" / "profile" / "2026_01_01"
    source.mkdir(parents=True)
    shutil.copy(fixtures_dir / XPLANE, source / "vm.xplane.pb")
    view, shown = api.tensorboard_view(tmp_path / "traces", tmp_path / "logdir")
    assert [run.format for run in shown] == ["xplane"]
    assert list(view.session_dir(shown[0].name).glob("*.xplane.pb"))
    assert view.root == tmp_path / "logdir" and view.problems == {}
    assert sorted(p.name for p in (tmp_path / "traces").rglob("*")) == ["2026_01_01", "plugins", "profile", "run",
                                                                        "vm.xplane.pb"]
    with pytest.raises(InputError, match="no such directory"):
        api.tensorboard_view(tmp_path / "nothing", tmp_path / "logdir2")
