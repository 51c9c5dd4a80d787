"""Run directories: unique, never overwritten, atomic, run.json written as strict JSON (NaN as null), and every broken
run.json refused with its file named, by every command that reads it (hlo stats, trace stats, diff, explain): empty,
cut in half, binary, a list, nested 100,000 deep, a 5,000-digit integer, NaN, impossible step times, fields of the
wrong type, an artifact missing, outside the run or holding a NUL, run.json or comparison.json from a newer hloscope;
the slow tests break copies of a real jax run."""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
from helpers import (
    BAD,
    RUN_COMMANDS,
    assert_refused,
    copy_of_run,
    cut_in_half,
    good_run,
    hloscope_forked,
    needs_fixtures,
)

from hloscope.errors import InputError, UsageError
from hloscope.runs import rundir
from hloscope.runs.rundir import (
    create_run_dir,
    find_runs,
    load_comparison,
    load_run,
    write_comparison,
    write_json_atomic,
    write_run,
)

BROKEN = Path(__file__).parent / "data" / "runs"


def test_runs_started_in_the_same_second_get_different_directories(tmp_path):
    made: list[Path] = []
    lock = threading.Lock()

    def make():
        path = create_run_dir(tmp_path, prefix="jax")
        with lock:
            made.append(path)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({p.name for p in made}) == 8
    assert all(p.parent == tmp_path and p.is_dir() for p in made)


def test_an_existing_run_is_never_overwritten(tmp_path):
    run = create_run_dir(tmp_path, "mine")
    write_run(run, {"schema_version": 1, "kept": True})
    with pytest.raises(UsageError, match="already exists"):
        create_run_dir(tmp_path, "mine")
    assert json.loads((run / "run.json").read_text())["kept"] is True


@pytest.mark.parametrize("run_id", ["../escape", "a/b", "..", ".", "/abs", "x/../../y", "", "-flag", "a\\b", "a b"])
def test_run_ids_cannot_escape_the_output_directory(tmp_path, run_id):
    with pytest.raises(UsageError, match="invalid run id"):
        create_run_dir(tmp_path / "out", run_id)
    assert not (tmp_path / "escape").exists()


def test_json_is_written_atomically(tmp_path):
    target = tmp_path / "run.json"
    write_json_atomic(target, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"a": object()})  # fails half-way through serialising
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left behind


@pytest.mark.parametrize("case, message", [
    ("empty", "empty run.json"),
    ("truncated", "not valid JSON"),
    ("garbage", "binary data"),
    ("wrong_format", "top level is a JSON list"),
    ("newer_schema", "newer hloscope"),
    ("missing_keys", "'run_id' is missing"),
    ("missing_artifact", "module_0001.jit_train_step.before_optimizations.txt: listed in"),
    ("escaping_artifact", "points outside the run directory"),
])
def test_broken_run_json_is_refused_naming_the_file(case, message):
    with pytest.raises(InputError) as info:
        load_run(BROKEN / case)
    text = str(info.value)
    assert message in text
    assert str(BROKEN / case) in text
    assert info.value.exit_code == 2


def test_truncated_json_reports_line_and_column():
    with pytest.raises(InputError) as info:
        load_run(BROKEN / "truncated")
    assert info.value.line is not None and info.value.col is not None


def test_missing_run_directory_is_reported(tmp_path):
    with pytest.raises(InputError, match=r"no run\.json here"):
        load_run(tmp_path)
    with pytest.raises(InputError, match="no such file"):
        find_runs(tmp_path / "nowhere")


def test_newer_comparison_is_refused():
    with pytest.raises(InputError, match="newer hloscope"):
        load_comparison(BROKEN / "newer_comparison")


def test_find_runs_lists_a_comparisons_modes_in_order(tmp_path):
    comparison = create_run_dir(tmp_path, prefix="compare")
    for name in ("pytorch", "jax"):
        run = create_run_dir(comparison, name)
        write_run(run, {"schema_version": 1, "run_id": name, "mode": name, "status": "ok", "config": {}, "artifacts": []})
    write_comparison(comparison, {"schema_version": 1, "comparison_id": comparison.name,
                                  "modes": [{"mode": "pytorch", "dir": "pytorch"}, {"mode": "jax", "dir": "jax"},
                                            {"mode": "torch_xla", "dir": "torch_xla"}]})  # this one never ran
    assert find_runs(comparison) == [comparison / "pytorch", comparison / "jax"]
    assert find_runs(comparison / "jax" / "run.json") == [comparison / "jax"]
    assert find_runs(tmp_path) == [comparison / "jax", comparison / "pytorch"]
    assert load_run(comparison / "jax").dir == comparison / "jax"


def test_missing_artifacts_can_be_tolerated_on_request(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(BROKEN / "missing_artifact", run)
    assert load_run(run, check_artifacts=False).artifacts[0].kind == "hlo"


def test_cli_refuses_an_escaping_run_id_in_one_line(cli_run, tmp_path):
    code, _out, err = cli_run("run", "--mode", "jax", "--model", "vit-tiny", "--out", str(tmp_path), "--run-id", "../x")
    assert code == 2
    assert err.count("\n") == 1 and "invalid run id" in err and "Traceback" not in err
    assert not (tmp_path.parent / "x").exists()


def test_cli_refuses_an_unknown_model_before_making_a_directory(cli_run, tmp_path):
    code, _, err = cli_run("run", "--mode", "jax", "--model", "vit-huge", "--out", str(tmp_path / "out"))
    assert code == 2 and "unknown model preset 'vit-huge'" in err
    assert not (tmp_path / "out").exists()


def test_run_json_gets_the_permissions_of_an_ordinary_file(tmp_path):
    old = os.umask(0o022)
    try:
        write_json_atomic(tmp_path / "run.json", {"schema_version": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "run.json").stat().st_mode) == 0o644


def _break_run_json(run: Path, case: str) -> tuple[Path, bool, tuple[str, ...]]:
    """Break `run` one way; returns (the file the message must name, line:column expected, words expected)."""
    run_json = run / "run.json"
    record = json.loads(run_json.read_text())
    if case == "empty":
        run_json.write_bytes(b"")
        return run_json, False, ("empty run.json",)
    if case == "truncated":
        cut_in_half(run_json, run_json.with_suffix(".half"))
        run_json.with_suffix(".half").replace(run_json)
        return run_json, True, ("not valid JSON",)
    if case == "garbage":
        shutil.copy(BAD / "rel_garbage.hlo", run_json)
        return run_json, False, ("binary data",)
    if case == "png":
        shutil.copy(BAD / "rel_png.hlo", run_json)
        return run_json, False, ()
    if case == "list":
        run_json.write_text(json.dumps([record]))
        return run_json, False, ("JSON list",)
    if case == "newer_schema":
        record["schema_version"] = 99
        run_json.write_text(json.dumps(record))
        return run_json, False, ("newer hloscope", "schema version 99")
    if case.startswith("missing_"):
        kind = case.removeprefix("missing_")
        missing = run / next(a["path"] for a in record["artifacts"] if a["kind"] == kind)
        missing.unlink()
        return missing, False, ("missing",)
    raise AssertionError(case)


RUN_JSON_CASES = ["empty", "truncated", "garbage", "png", "list", "newer_schema", "missing_hlo"]


@pytest.mark.parametrize("command, case", [
    (command, case if command != "trace stats" or case != "missing_hlo" else "missing_trace")
    for command in RUN_COMMANDS for case in RUN_JSON_CASES
])
@needs_fixtures
def test_broken_run_json_is_refused_by_every_command(tmp_path, case, command):
    good = good_run(tmp_path / "good")
    run = good_run(tmp_path / "broken")
    named, position, words = _break_run_json(run, case)
    result = hloscope_forked(*RUN_COMMANDS[command](run, good))
    assert_refused(result, named, position=position, words=words)


@pytest.mark.parametrize("command", list(RUN_COMMANDS))
@needs_fixtures
def test_an_artifact_path_outside_the_run_is_refused(tmp_path, command):
    """A hand-edited or hostile run.json cannot make hloscope read files outside its run directory."""
    good = good_run(tmp_path / "good")
    run = good_run(tmp_path / "broken")
    record = json.loads((run / "run.json").read_text())
    for artifact in record["artifacts"]:
        artifact["path"] = "../../../../../../etc/hostname"
    (run / "run.json").write_text(json.dumps(record))
    result = hloscope_forked(*RUN_COMMANDS[command](run, good))
    assert_refused(result, run / "run.json", words=("points outside the run directory",))


@pytest.mark.parametrize("command", list(RUN_COMMANDS))
@needs_fixtures
def test_an_artifact_kind_of_the_wrong_type_is_named(tmp_path, command):
    """An artifact whose kind is not a string (a list) is one line naming run.json, from every command that reads the
    run."""
    good = good_run(tmp_path / "good")
    run = good_run(tmp_path / "broken")
    record = json.loads((run / "run.json").read_text())
    record["artifacts"][0]["kind"] = ["hlo"]
    (run / "run.json").write_text(json.dumps(record))
    assert_refused(hloscope_forked(*RUN_COMMANDS[command](run, good)), run / "run.json",
                   words=("'artifacts' must be objects with a 'path' and a 'kind'",))


@pytest.mark.parametrize("command", ["explain", "diff"])
@pytest.mark.parametrize("section, key, value, words", [
    ("timing", "median_s", "fast", "'timing.median_s' is str 'fast', expected a number"),
    ("timing", None, 0.002, "'timing' is float 0.002, expected an object"),
    ("timing", "throughput_img_s", [1], "'timing.throughput_img_s' is list [1], expected a number"),
])
@needs_fixtures
def test_wrong_typed_run_record_field_is_named(tmp_path, command, section, key, value, words):
    """A hand-edited field of the wrong type is one line naming run.json and the field, before explain's collector
    or a renderer sees it."""
    good = good_run(tmp_path / "good")
    run = good_run(tmp_path / "broken")
    record = json.loads((run / "run.json").read_text())
    if key is None:
        record[section] = value
    else:
        record[section][key] = value
    (run / "run.json").write_text(json.dumps(record))
    result = hloscope_forked(*RUN_COMMANDS[command](run, good))
    assert_refused(result, run / "run.json", words=(words,))


@pytest.mark.parametrize("command", ["hlo stats", "trace stats", "explain", "diff"])
@needs_fixtures
def test_newer_comparison_is_refused_saying_so(tmp_path, command):
    comparison = tmp_path / "compare-1"
    good_run(comparison, "jax")
    rundir.write_comparison(comparison, {"schema_version": 7, "comparison_id": "compare-1", "config": {},
                                         "modes": [{"mode": "jax", "dir": "jax", "status": "ok"}]})
    args = {"hlo stats": ["hlo", "stats", "--no-xla-cost", comparison], "trace stats": ["trace", "stats", comparison],
            "explain": ["explain", comparison], "diff": ["diff", "--no-xla-cost", comparison, comparison / "jax"]}
    result = hloscope_forked(*args[command])
    assert_refused(result, comparison / "comparison.json", words=("newer hloscope", "schema version 7"))


# Every command that reads a comparison, as argv: the comparison and a scratch folder (trace export's OUT)
COMPARISON_COMMANDS = {
    "hlo stats": lambda cmp, out: ["hlo", "stats", "--no-xla-cost", cmp],
    "trace stats": lambda cmp, out: ["trace", "stats", cmp],
    "trace export": lambda cmp, out: ["trace", "export", "--jobs", "1", cmp, out],
    "diff": lambda cmp, out: ["diff", "--no-xla-cost", cmp, cmp / "good"],
    "explain": lambda cmp, out: ["explain", cmp],
    "replay": lambda cmp, out: ["replay", cmp, "--steps", "1", "--warmup", "1"],
}


def _comparison_with(tmp_path: Path, jax_dir: str) -> Path:
    """A comparison of two runs, `good` (a folder of its own) and `jax`, listed under the `dir` given."""
    comparison = tmp_path / "compare-1"
    good_run(comparison, "good")
    modes = [{"mode": "jax", "dir": "good", "status": "ok"}, {"mode": "jax", "dir": jax_dir, "status": "ok"}]
    rundir.write_comparison(comparison, {"schema_version": 1, "comparison_id": "compare-1", "config": {},
                                         "modes": modes})
    return comparison


@pytest.mark.parametrize("command", list(COMPARISON_COMMANDS))
@needs_fixtures
def test_a_mode_directory_that_is_a_link_out_of_the_comparison_is_refused_by_every_command(tmp_path, command):
    """A comparison's run directory that is a symbolic link to a run elsewhere is refused in one line naming it, by
    every command that reads comparisons (one resolver, rundir.comparison_run_dir), as an artifact path leading out
    of its run is: nothing there is read or written."""
    elsewhere = good_run(tmp_path / "elsewhere", "jax")
    comparison = _comparison_with(tmp_path, "jax")
    (comparison / "jax").symlink_to(elsewhere, target_is_directory=True)
    before = sorted(p.name for p in elsewhere.iterdir())
    result = hloscope_forked(*COMPARISON_COMMANDS[command](comparison, tmp_path / "out"))
    assert_refused(result, comparison / "jax", words=("symbolic link", "points outside the comparison directory"))
    assert sorted(p.name for p in elsewhere.iterdir()) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", list(COMPARISON_COMMANDS))
@pytest.mark.parametrize("listed", ["../elsewhere/jax", "/tmp", "..", "a\u0000b"])
@needs_fixtures
def test_a_mode_directory_listed_as_a_path_is_refused_by_every_command(tmp_path, command, listed):
    good_run(tmp_path / "elsewhere", "jax")
    comparison = _comparison_with(tmp_path, listed)
    result = hloscope_forked(*COMPARISON_COMMANDS[command](comparison, tmp_path / "out"))
    assert_refused(result, comparison / "comparison.json", words=("is not a plain name",))


def test_a_linked_run_found_in_a_comparison_cut_short_is_refused(tmp_path):
    """A comparison cut short (status running, its writer gone) lists the run folders it did not: one found through a
    link is listed failed with why, its run.json never read, and explain refuses it in one line naming the link."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "run.json").write_text("{}")
    comparison = tmp_path / "compare-1"
    comparison.mkdir()
    (comparison / "jax").symlink_to(elsewhere, target_is_directory=True)
    (comparison / "comparison.json").write_text(json.dumps({
        "schema_version": 1, "status": "running", "modes": [],
        "writer": {"pid": 2**22 + 12345, "host": "elsewhere.invalid"}}))
    (entry,) = load_comparison(comparison).modes
    assert entry.status == "failed" and entry.recovered and entry.mode == "jax"
    assert entry.error.startswith(f"{comparison / 'jax'}: a run directory of the comparison is a symbolic link")
    result = hloscope_forked("explain", comparison)
    assert "Traceback" not in result.stderr and result.code == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("hloscope: error:")] == [
        f"hloscope: error: {entry.error}"]


@needs_fixtures
def test_tensorboard_refuses_a_linked_mode_directory(tmp_path):
    from hloscope.tensorboard.logdir import find_sessions

    elsewhere = good_run(tmp_path / "elsewhere", "jax")
    comparison = _comparison_with(tmp_path, "jax")
    (comparison / "jax").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(InputError, match="points outside the comparison directory") as refused:
        find_sessions(comparison)
    assert refused.value.path == str(comparison / "jax")


def test_new_files_are_never_written_over_or_through_a_link(tmp_path):
    """rundir.create_numbered (every log a comparison gets): a name taken by a file, a folder or a link, dangling or
    not, is skipped, never opened; rundir.own_folder refuses a link or a file in place of the folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_text("kept")
    logs = rundir.own_folder(tmp_path / "logs", "a log")
    (logs / "a.log").symlink_to(outside / "victim")
    (logs / "a-2.log").symlink_to(outside / "kept")
    (logs / "a-3.log").mkdir()
    path, handle = rundir.create_numbered(logs, lambda n: "a.log" if n == 1 else f"a-{n}.log")
    with handle:
        handle.write(b"mine")
    assert path == logs / "a-4.log" and path.read_bytes() == b"mine"
    assert sorted(p.name for p in outside.iterdir()) == ["kept"] and (outside / "kept").read_text() == "kept"
    with pytest.raises(FileExistsError):
        rundir.create_new_file(logs / "a.log")
    (tmp_path / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError, match="is a symbolic link"):
        rundir.own_folder(tmp_path / "linked", "a log")
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="is not a folder"):
        rundir.own_folder(tmp_path / "file", "a log")


def _write_run_json(run: Path, text: str) -> Path:
    (run / "run.json").write_text(text)
    return run / "run.json"


@pytest.mark.parametrize("case", ["deep", "huge_int", "nan", "nul_artifact"])
@needs_fixtures
def test_hostile_run_json_is_one_line_for_every_command(tmp_path, case):
    run = good_run(tmp_path / "runs")
    record = json.loads((run / "run.json").read_text())
    if case == "deep":
        text = '{"schema_version": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    elif case == "huge_int":
        text = json.dumps(record).replace('"batch_size": 8', '"batch_size": ' + "9" * 5000)
    elif case == "nan":
        text = json.dumps(record).replace('"median_s": 0.002', '"median_s": NaN')
    else:
        record["artifacts"][0]["path"] = "hlo/a\u0000b.txt"
        text = json.dumps(record)
    named = _write_run_json(run, text)
    commands = [["hlo", "stats", "--no-xla-cost", run], ["explain", run.parent]]
    commands += [] if case == "nul_artifact" else [["trace", "stats", run]]  # an HLO artifact: only a warning there
    for args in commands:
        assert_refused(hloscope_forked(*args, timeout=120, memory_limit=2 << 30), named)


@pytest.mark.parametrize("value", ["-0.002", "1e400"])
@needs_fixtures
def test_impossible_step_times_are_refused(tmp_path, value):
    run = good_run(tmp_path / "runs")
    text = (run / "run.json").read_text().replace('"median_s": 0.002', f'"median_s": {value}')
    named = _write_run_json(run, text)
    assert_refused(hloscope_forked("explain", run.parent, timeout=120), named, words=("timing.median_s",))


def test_run_json_is_strict_json_even_with_a_nan_clock(tmp_path):
    rundir.write_run(tmp_path, {"timing": {"median_s": math.nan, "steps": [1.0, math.inf]}})
    text = (tmp_path / "run.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["timing"] == {"median_s": None, "steps": [1.0, None]}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["hlo stats", "diff", "explain"])
def test_real_run_json_cut_in_half(real_run, tmp_path, command):
    run = copy_of_run(real_run, tmp_path)
    cut_in_half(run / "run.json", tmp_path / "half.json").replace(run / "run.json")
    args = {"hlo stats": ["hlo", "stats", run], "diff": ["diff", "--no-xla-cost", real_run, run],
            "explain": ["explain", run.parent]}[command]
    assert_refused(hloscope_forked(*args), run / "run.json", position=True, words=("not valid JSON",))


@pytest.mark.slow
def test_real_run_from_a_newer_hloscope_is_refused(real_run, tmp_path):
    run = copy_of_run(real_run, tmp_path)
    record = json.loads((run / "run.json").read_text())
    record["schema_version"] += 1
    (run / "run.json").write_text(json.dumps(record))
    for args in (["hlo", "stats", run], ["diff", "--no-xla-cost", real_run, run], ["explain", run.parent]):
        assert_refused(hloscope_forked(*args), run / "run.json", words=("newer hloscope",))


@pytest.mark.slow
def test_real_hlo_artifact_deleted_is_named(real_run, tmp_path):
    run = copy_of_run(real_run, tmp_path)
    (hlo,) = run.glob("hlo/module_*.jit_train_step.cpu_after_optimizations.txt")
    hlo.unlink()
    for args in (["hlo", "stats", run], ["diff", "--no-xla-cost", real_run, run], ["explain", run.parent]):
        assert_refused(hloscope_forked(*args), hlo, words=("missing",))
