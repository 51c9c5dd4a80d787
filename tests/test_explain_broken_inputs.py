"""`explain` on broken comparisons: a run or a part of one that cannot be read is named on
stderr in one line and fails the command (exit 2) while the readable runs are still explained; run records holding
nonsense values are refused naming the key; labels are unique; what files wrote is printed escaped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import assert_refused, good_run, hloscope, needs_fixtures

from hloscope.errors import InputError
from hloscope.explain.inputs import load_summaries
from hloscope.render import fmt
from hloscope.render.output import fresh_path
from hloscope.runs import rundir


def tiny_run(root: Path, name: str, mode: str | None = None, steps=(0.002, 0.0021, 0.0019, 0.002), **extra) -> Path:
    """A run directory holding only run.json (no HLO, no trace), as rundir writes it."""
    run = rundir.create_run_dir(root, run_id=name)
    record = {"schema_version": 1, "run_id": name, "mode": mode or name, "status": "ok", "error": None,
              "config": {"model": "vit-tiny", "batch_size": 8}, "timing": {"step_times_s": list(steps)}, "artifacts": []}
    rundir.write_run(run, {**record, **extra})
    return run


def comparison(root: Path, *modes: str, name: str = "compare-1") -> Path:
    """A comparison directory of tiny runs (pytorch ten times slower than the others), every mode listed `ok`."""
    directory = root / name
    for mode in modes:
        tiny_run(directory, mode, steps=(0.02, 0.021, 0.019, 0.02) if mode == "pytorch" else (0.002, 0.0021, 0.0019))
    rundir.write_comparison(directory, {"schema_version": 1, "comparison_id": name, "status": "ok", "config": {},
                                        "modes": [{"mode": m, "dir": m, "status": "ok"} for m in modes]})
    return directory


def _damage(run: Path, how: str) -> Path:
    """Break `run` (a mode's directory) one way; returns the path the error must name."""
    run_json = run / "run.json"
    if how == "mode_dir_missing":
        os.remove(run_json)
        os.rmdir(run)
        return run
    if how == "mode_dir_file":
        os.remove(run_json)
        os.rmdir(run)
        run.write_text("not a directory\n")
        return run
    if how == "mode_dir_loop":
        os.remove(run_json)
        os.rmdir(run)
        os.symlink(run.name, run)
        return run
    os.remove(run_json)
    if how == "runjson_fifo":
        os.mkfifo(run_json)
    elif how == "runjson_dir":
        run_json.mkdir()
    elif how == "runjson_loop":
        os.symlink(run_json.name, run_json)
    elif how == "runjson_devzero":
        os.symlink("/dev/zero", run_json)
    return run_json


@pytest.mark.parametrize("how", ["mode_dir_missing", "mode_dir_file", "mode_dir_loop", "runjson_fifo", "runjson_dir",
                                 "runjson_loop", "runjson_devzero"])
def test_an_unreadable_listed_run_is_named_and_fails_while_the_others_are_explained(tmp_path, how):
    """A listed run whose run.json cannot be read (removed, a loop, a device) is named and fails the command; it is
    never shown as `ok` with no figures, or as a run that wrote no directory."""
    directory = comparison(tmp_path, "jax", "pytorch")
    named = _damage(directory / "jax", how)
    result = hloscope("explain", directory, timeout=120)
    assert_refused(result, named)
    assert "unreadable" in result.stdout and "pytorch" in result.stdout  # the readable run is still explained
    assert "no run directory was written" not in result.stdout


@pytest.mark.parametrize("how", ["runjson_fifo", "runjson_dir"])
def test_a_run_directory_given_itself_names_its_broken_run_json(tmp_path, how):
    """A run directory (or a folder of runs) whose run.json is a FIFO or a folder is named as a broken run.json, not
    reported as "no hloscope run here"."""
    run = tiny_run(tmp_path / "runs", "jax")
    named = _damage(run, how)
    for path in (run, tmp_path / "runs"):
        assert_refused(hloscope("explain", path, timeout=120), named)


def test_every_mode_directory_missing_is_one_line_each(tmp_path):
    """Was exit 0, "No run finished with a step time"."""
    directory = comparison(tmp_path, "jax", "pytorch")
    for mode in ("jax", "pytorch"):
        _damage(directory / mode, "mode_dir_missing")
    result = hloscope("explain", directory, timeout=120)
    assert result.code == 2 and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert [line.split(": ")[2] for line in lines] == [str(directory / "jax"), str(directory / "pytorch")], lines


def test_a_mode_that_failed_before_writing_its_directory_is_not_an_error(tmp_path):
    directory = comparison(tmp_path, "jax", "pytorch")
    _damage(directory / "jax", "mode_dir_missing")
    record = json.loads((directory / "comparison.json").read_text())
    record["modes"][0].update(status="failed", error="out of memory")
    rundir.write_comparison(directory, record)
    result = hloscope("explain", directory, timeout=120)
    assert result.code == 0, result.stderr
    assert "out of memory" in result.stdout


@pytest.mark.parametrize("how", ["fifo", "dir", "loop"])
def test_a_comparison_json_that_is_not_a_file_is_refused(tmp_path, how):
    """Was silently read as a plain folder of runs."""
    directory = comparison(tmp_path, "jax", "pytorch")
    file = directory / "comparison.json"
    file.unlink()
    {"fifo": os.mkfifo, "dir": Path.mkdir, "loop": lambda f: os.symlink(f.name, f)}[how](file)
    assert_refused(hloscope("explain", directory, timeout=120), file)


def test_a_comparison_listing_one_run_directory_twice_is_refused(tmp_path):
    """3000 entries naming one directory took minutes (each read again); two showed one run as `jax` and `jax #2`."""
    directory = comparison(tmp_path, "jax", "pytorch")
    record = json.loads((directory / "comparison.json").read_text())
    record["modes"].append({**record["modes"][0], "mode": "jax2"})
    rundir.write_comparison(directory, record)
    assert_refused(hloscope("explain", directory, timeout=120), directory / "comparison.json",
                   words=("mode directory 'jax' is listed twice",))


@needs_fixtures
def test_a_broken_train_step_hlo_is_named_and_noted(tmp_path):
    """A truncated HLO module made explain fall back to kernel names in silence, exit 0."""
    run = good_run(tmp_path / "runs", "jax")
    hlo = next((run / "hlo").glob("*after_optimizations.txt"))
    text = hlo.read_text()
    hlo.write_text(text[: len(text) // 2])
    result = hloscope("explain", run, timeout=300)
    assert_refused(result, hlo)
    assert "HLO not read" in result.stdout


_REPLAY = {"schema_version": 1, "kind": "replay", "status": "ok", "device": {"platform": "cpu"}, "compiler": {},
           "skipped": [], "timing": {"step_times_s": [0.001, 0.0011], "median_s": 0.00105}}


@pytest.mark.parametrize("change, words", [
    ("truncated", "not valid JSON"),
    ({"schema_version": 2}, "written by a newer hloscope"),
    ({"timing": {"step_times_s": [0.001], "median_s": float("nan")}}, "NaN"),
    ({"timing": {"step_times_s": [-1.0]}}, "'timing.step_times_s' holds -1.0"),
    ({"timing": [1]}, "'timing' is list"),
    ({"compiler": "x"}, "'compiler' is str 'x', expected an object"),
    ({"kind": "run"}, "'kind' is 'run', expected 'replay'"),
    ({"status": "weird"}, "unknown status 'weird'"),
])
def test_a_broken_replay_record_is_named_and_not_used(tmp_path, change, words):
    """A broken replay.json was ignored in silence, or its figures used (a newer schema, NaN, wrong types)."""
    directory = comparison(tmp_path, "jax", "pytorch")
    file = directory / "jax" / "replay.json"
    text = json.dumps({**_REPLAY, **change}) if isinstance(change, dict) else json.dumps(_REPLAY)[:40]
    file.write_text(text)
    result = hloscope("explain", directory, "--baseline", "pytorch", "--json", timeout=120)
    assert_refused(result, file, words=(words,))
    jax = next(m for m in json.loads(result.stdout)["modes"] if m["mode"] == "jax")
    assert not (jax.get("replay") or {}).get("program_times_s")


@pytest.mark.parametrize("section, key, value, words", [
    ("config", "batch_size", -4, "'config.batch_size' is -4, expected an integer from 1"),
    ("config", "batch_size", 0, "'config.batch_size' is 0"),
    ("config", "batch_size", 10**30, "'config.batch_size' is 1000000000000000000000000000000"),
    ("config", "batch_size", 4.5, "'config.batch_size' is 4.5"),
    ("config", "devices", 0, "'config.devices' is 0"),
    ("timing", "steps", -5, "'timing.steps' is -5"),
    ("timing", "steps", 6.5, "'timing.steps' is 6.5"),
    ("timing", "steps", "six", "'timing.steps' is 'six'"),
    ("timing", "steps", "1e400", "'timing.steps' is inf"),  # written as the number 1e400
    ("timing", "step_times_s", [0.0, 0.0], "'timing.step_times_s' holds 0.0, not a duration"),
    ("timing", "step_times_s", [1e-300], "'timing.step_times_s' holds 1e-300, not a duration"),
    ("timing", "median_s", 0.0, "'timing.median_s' holds 0.0, not a duration"),
    ("timing", "steps", 7, "'timing.steps' is 7 but 'timing.step_times_s' holds 4 step times"),  # an edited record
])
def test_nonsense_values_of_a_run_record_are_refused_naming_the_key(tmp_path, section, key, value, words):
    """Were accepted: "-0.228 ms per sample", a 33-digit ratio, a run dropped in silence, a 300-digit ratio."""
    run = tiny_run(tmp_path, "jax")
    record = json.loads((run / "run.json").read_text())
    record[section][key] = value
    (run / "run.json").write_text(json.dumps(record).replace('"1e400"', "1e400"))  # read back as inf
    with pytest.raises(InputError) as caught:
        rundir.load_run(run)
    assert caught.value.path == str(run / "run.json") and words in caught.value.message, caught.value.message


def test_the_step_median_is_computed_from_the_step_times_not_trusted(tmp_path):
    run = tiny_run(tmp_path, "jax", steps=(0.001, 0.003, 0.002), timing={"step_times_s": [0.001, 0.003, 0.002],
                                                                          "median_s": 5.0, "mean_s": 7.0})
    (summary,), _ = load_summaries(run)
    assert (summary.step_time_s, summary.mean_s) == (0.002, 0.002)


@pytest.mark.parametrize("extra, status, why", [
    ({"timing": None}, "no steps", "has no 'timing' section"),
    ({"timing": {}}, "no steps", "records no timed step"),
    ({"status": "failed", "error": "killed by SIGKILL"}, "failed", "failed: killed by SIGKILL"),
])
def test_a_run_without_a_step_time_says_why(tmp_path, extra, status, why):
    """A run with no timing was shown as `ok` with `-`, a failed one without its error."""
    run = tiny_run(tmp_path, "jax", **extra)
    (summary,), _ = load_summaries(run)
    assert summary.status == status and any(why in note for note in summary.notes), (summary.status, summary.notes)


def test_runs_of_one_mode_in_two_comparisons_have_unique_labels_and_an_ambiguous_baseline_is_refused(tmp_path):
    """Both jax runs were labelled `jax (jax)`, and `--baseline 'jax (jax)'` picked one of them."""
    comparison(tmp_path / "two", "jax", "pytorch", name="c1")
    comparison(tmp_path / "two", "jax", "pytorch", name="c2")
    result = hloscope("explain", tmp_path / "two", "--json", timeout=120)
    assert result.code == 0, result.stderr
    labels = [m["mode"] for m in json.loads(result.stdout)["modes"]]
    assert sorted(labels) == ["jax (c1/jax)", "jax (c2/jax)", "pytorch (c1/pytorch)", "pytorch (c2/pytorch)"]
    refused = hloscope("explain", tmp_path / "two", "--baseline", "jax", timeout=120)
    assert refused.code == 2 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "ambiguous" in refused.stderr and "'jax (c1/jax)', 'jax (c2/jax)'" in refused.stderr
    chosen = hloscope("explain", tmp_path / "two", "--baseline", "jax (c2/jax)", "--json", timeout=120)
    assert json.loads(chosen.stdout)["baseline"] == "jax (c2/jax)"


def test_a_share_that_rounds_to_zero_keeps_its_sign():
    assert [fmt.share(p, 1.0) for p in (-0.004, 0.004, -1e-5, 1e-5, 0.0, -0.03, 0.005)] == [
        "-0.4%", "0.4%", ">-0.1%", "<0.1%", "0%", "-3%", "0.5%"]


def test_a_dangling_link_takes_the_report_name(tmp_path):
    """`explain --format html` said "use --force" for a dangling explain.html instead of writing explain-2.html."""
    os.symlink(tmp_path / "elsewhere.html", tmp_path / "explain.html")
    assert fresh_path(tmp_path, "explain", ".html") == tmp_path / "explain-2.html"


@pytest.mark.parametrize("form", [(), ("--format", "md", "-o", "-"), ("--format", "html", "-o", "-")])
def test_control_characters_from_files_are_printed_escaped(tmp_path, form):
    """A mode name holding ESC[31m, BEL, a newline and a bidi override reaches the terminal escaped, never raw."""
    directory = comparison(tmp_path, "jax", "pytorch")
    record = json.loads((directory / "jax" / "run.json").read_text())
    record["mode"] = "jax\u202e\x1b[31mRED\x07\n2"
    (directory / "jax" / "run.json").write_text(json.dumps(record))
    result = hloscope("explain", directory, *form, timeout=120)
    assert result.code == 0, result.stderr
    assert not any(c in result.stdout for c in "\x1b\x07\u202e"), result.stdout[:2000]
    assert "RED" in result.stdout


@needs_fixtures
def test_explain_names_a_corrupt_trace_on_stderr_with_exit_2(tmp_path):
    from helpers import assert_no_traceback

    run = good_run(tmp_path / "runs")
    trace = next((run / "plugins").rglob("*.xplane.pb"))
    trace.write_bytes(trace.read_bytes()[:1000])
    result = hloscope("explain", run.parent, timeout=180)
    assert_no_traceback(result)
    assert result.code == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("hloscope: error:")]
    assert len(errors) == 1 and str(trace) in errors[0], result.stderr


@needs_fixtures
def test_explain_shows_the_readable_runs_and_fails_on_the_broken_one(tmp_path):
    """One broken run never hides the others (its row says why), and the command still exits 2 naming the file."""
    comparison = tmp_path / "compare-1"
    good_run(comparison, "jax")
    broken = good_run(comparison, "torch_xla")
    (broken / "run.json").write_text('{"schema_version": 1, "run_id": ')
    rundir.write_comparison(comparison, {"schema_version": 1, "comparison_id": "compare-1", "config": {},
                                         "modes": [{"mode": "jax", "dir": "jax", "status": "ok"},
                                                   {"mode": "torch_xla", "dir": "torch_xla", "status": "ok"}]})
    result = hloscope("explain", "--json", comparison)
    assert_refused(result, broken / "run.json", position=True, words=("not valid JSON",))
    report = json.loads(result.stdout)
    assert {m["mode"]: m["status"] for m in report["modes"]} == {"jax": "ok", "torch_xla": "unreadable"}


@pytest.mark.parametrize("modes, words", [
    ([], "lists no modes: nothing to explain"),
    ([{"dir": "jax", "mode": 7}], "'modes[0].mode' is int 7, expected a string"),
    ([{"dir": "torch_xla", "status": ["failed"], "error": "x"}], "'modes[0].status' is list ['failed'], expected a string"),
    ([{"dir": "torch_xla", "status": "failed", "error": {"why": 1}}], "'modes[0].error' is dict {'why': 1}, expected a string"),
])
@needs_fixtures
def test_explain_names_a_wrong_typed_comparison_entry(tmp_path, modes, words):
    """A comparison.json entry whose mode, status or error is not a string, or a comparison listing no modes, is one line
    naming comparison.json and the entry: never a non-string in the report's table, nor an empty report with exit 0."""
    comparison = tmp_path / "compare-1"
    good_run(comparison, "jax")
    rundir.write_comparison(comparison, {"schema_version": 1, "comparison_id": "compare-1", "config": {},
                                         "modes": modes})
    assert_refused(hloscope("explain", comparison), comparison / "comparison.json", words=(words,))
