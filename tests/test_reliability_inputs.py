"""Across every reader-facing command: broken input is refused with ONE line on stderr that names the file
(with line:column for text formats) and exit code 2, never a traceback.

The commands run as real subprocesses (`python -m hloscope ...`) so that what the user sees on stderr is what is
checked. Small broken files are kept in tests/data/bad/rel_*; broken copies of the real fixtures (cut in half, renamed
to another format) are made at test time in tmp_path. Each subprocess runs under an address-space limit, so a reader
that blows up on a hostile file fails its test instead of taking the machine down.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import (
    BAD,
    FIXTURES,
    GOOD_DUMP,
    HLO_FIXTURE,
    KINETO_FIXTURE,
    STABLEHLO_FIXTURE,
    TORCH_XLA_IR_FIXTURE,
    XPLANE_FIXTURE,
    assert_refused,
    first_good_hlo,
    good_run,
    hloscope,
    needs_fixtures,
)


def _half(source: Path, target: Path) -> Path:
    """The first half of a real file: what a copy interrupted half-way leaves."""
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


# ------------------------------------------------------------------------------------------------- HLO text files

# committed file -> words the message must contain; every one is a text-format error, so line:column is required
HLO_FILES = {
    "rel_empty.hlo": "empty file",
    "rel_garbage.hlo": "binary data",
    "rel_png.hlo": "binary data",
    "rel_kineto_as.hlo": "looks like JSON",
    "rel_hlo_utf16.hlo": "UTF-16",
    "rel_hlo_nul.hlo": "binary data",
    "rel_deep_tuple.hlo": "nested too deeply",
}


def _generated_hlo_inputs(tmp_path: Path) -> dict[str, Path]:
    """Broken HLO inputs made from the real fixtures: cut in half, or another real format under an HLO name."""
    made = {
        "truncated": _half(FIXTURES / HLO_FIXTURE, tmp_path / "truncated.hlo"),
        "xplane_as_hlo": tmp_path / "profile.hlo",
        "gzip_as_hlo": tmp_path / "trace.hlo",
        "kineto_json_as_hlo": tmp_path / "kineto.hlo",
        "stablehlo_as_hlo": tmp_path / "module.stablehlo.hlo",
        "torch_xla_ir_as_hlo": tmp_path / "save1.hlo",
    }
    shutil.copy(FIXTURES / XPLANE_FIXTURE, made["xplane_as_hlo"])
    shutil.copy(FIXTURES / KINETO_FIXTURE, made["gzip_as_hlo"])
    made["kineto_json_as_hlo"].write_bytes(gzip.decompress((FIXTURES / KINETO_FIXTURE).read_bytes()))
    shutil.copy(FIXTURES / STABLEHLO_FIXTURE, made["stablehlo_as_hlo"])
    shutil.copy(FIXTURES / TORCH_XLA_IR_FIXTURE, made["torch_xla_ir_as_hlo"])
    return made


HLO_COMMANDS = {
    "hlo stats": lambda bad, good: ["hlo", "stats", bad],
    "hlo stats --json": lambda bad, good: ["hlo", "stats", "--json", bad],
    "diff BAD GOOD": lambda bad, good: ["diff", "--no-xla-cost", bad, good],
    "diff GOOD BAD": lambda bad, good: ["diff", "--no-xla-cost", "--json", good, bad],
}


@pytest.mark.parametrize("command", list(HLO_COMMANDS))
@pytest.mark.parametrize("name", sorted(HLO_FILES))
@needs_fixtures
def test_broken_hlo_file_is_refused_by_every_hlo_reader(name, command):
    path = BAD / name
    result = hloscope(*HLO_COMMANDS[command](path, first_good_hlo()))
    assert_refused(result, path, position=True, words=(HLO_FILES[name],))


@pytest.mark.parametrize("command", ["hlo stats", "diff BAD GOOD"])
@pytest.mark.parametrize("case, words", [
    ("truncated", ()),
    ("xplane_as_hlo", ("binary data",)),
    ("gzip_as_hlo", ("binary data",)),
    ("kineto_json_as_hlo", ("looks like JSON",)),
    ("stablehlo_as_hlo", ()),
    ("torch_xla_ir_as_hlo", ()),
])
@needs_fixtures
def test_real_files_cut_or_misnamed_are_refused_as_hlo(tmp_path, case, words, command):
    path = _generated_hlo_inputs(tmp_path)[case]
    result = hloscope(*HLO_COMMANDS[command](path, first_good_hlo()))
    assert_refused(result, path, position=True, words=words)


# ---------------------------------------------------------------------------------------------------- trace files

# committed file -> (words, whether line:column is expected)
TRACE_FILES = {
    "rel_empty.pt.trace.json": ("empty file", False),
    "rel_empty.pt.trace.json.gz": ("empty file", False),
    "rel_empty.xplane.pb": ("empty file", False),
    "rel_garbage.pt.trace.json": ("not a JSON trace", False),
    "rel_garbage.pt.trace.json.gz": ("not a JSON trace", False),
    "rel_garbage.xplane.pb": ("not a valid xplane.pb", False),
    "rel_garbage_deflate.pt.trace.json.gz": ("corrupt gzip", False),
    "rel_png.pt.trace.json": ("not a JSON trace", False),
    "rel_png.xplane.pb": ("not a valid xplane.pb", False),
    "rel_hlo_as.pt.trace.json": ("not a JSON trace", False),
    "rel_hlo_as.pt.trace.json.gz": ("not a JSON trace", False),
    "rel_hlo_as.xplane.pb": ("not a valid xplane.pb", False),
    "rel_invalid.pt.trace.json": ("invalid JSON", True),
    "rel_invalid.pt.trace.json.gz": ("invalid JSON", True),
}


@pytest.mark.parametrize("as_json", [False, True], ids=["tables", "json"])
@pytest.mark.parametrize("name", sorted(TRACE_FILES))
def test_broken_trace_file_is_refused(name, as_json):
    path = BAD / name
    words, position = TRACE_FILES[name]
    result = hloscope("trace", "stats", path, *(["--json"] if as_json else []))
    line = assert_refused(result, path, position=position, words=(words,))
    if name.startswith("rel_invalid"):
        assert f"{path}:3:11:" in line  # the missing ',' after "ts": 1 on line 3


def test_deeply_nested_json_trace_is_refused_within_bounded_memory():
    path = BAD / "rel_deep.pt.trace.json"
    # 1 GB is 5000x the file: a reader with bounded memory needs far less; the cap keeps the machine safe.
    result = hloscope("trace", "stats", path, memory_limit=1 << 30, timeout=120)
    assert_refused(result, path)


@pytest.mark.parametrize("case, words", [
    ("truncated_gzip", ("corrupt gzip",)),
    ("truncated_json", ("truncated JSON",)),
    ("truncated_xplane", ("not a valid xplane.pb",)),
    ("hlo_as_trace_json", ("not a JSON trace",)),
    ("hlo_as_xplane", ("not a valid xplane.pb",)),
    ("xplane_as_trace_json_gz", ("not a JSON trace",)),
    ("kineto_as_xplane", ("not a valid xplane.pb",)),
])
@needs_fixtures
def test_real_traces_cut_or_misnamed_are_refused(tmp_path, case, words):
    kineto = FIXTURES / KINETO_FIXTURE
    made = {
        "truncated_gzip": lambda p: _half(kineto, p),
        "truncated_json": lambda p: p.write_bytes(gzip.decompress(kineto.read_bytes())[: kineto.stat().st_size * 3]),
        "truncated_xplane": lambda p: _half(FIXTURES / XPLANE_FIXTURE, p),
        "hlo_as_trace_json": lambda p: shutil.copy(FIXTURES / HLO_FIXTURE, p),
        "hlo_as_xplane": lambda p: shutil.copy(FIXTURES / HLO_FIXTURE, p),
        "xplane_as_trace_json_gz": lambda p: shutil.copy(FIXTURES / XPLANE_FIXTURE, p),
        "kineto_as_xplane": lambda p: shutil.copy(kineto, p),
    }
    names = {"truncated_gzip": "a.pt.trace.json.gz", "truncated_json": "a.pt.trace.json",
             "truncated_xplane": "host.xplane.pb", "hlo_as_trace_json": "b.pt.trace.json", "hlo_as_xplane": "c.xplane.pb",
             "xplane_as_trace_json_gz": "d.trace.json.gz", "kineto_as_xplane": "e.xplane.pb"}
    path = tmp_path / names[case]
    made[case](path)
    assert_refused(hloscope("trace", "stats", "--json", path), path, words=words)


# ------------------------------------------------------------------------------------------ paths and directories


def _nothing_readable(root: Path) -> Path:
    """A directory of files hloscope does not read: notes, a picture, a log."""
    root.mkdir()
    (root / "README.txt").write_text("notes about the run\n")
    shutil.copy(BAD / "rel_png.hlo", root / "plot.png")
    (root / "log.txt").write_bytes(os.urandom(64))
    return root


DIRECTORY_COMMANDS = {
    "hlo stats": (lambda d: ["hlo", "stats", d], "no HLO modules here"),
    "trace stats": (lambda d: ["trace", "stats", d], "no traces found"),
    "diff": (lambda d: ["diff", "--no-xla-cost", d, d], ""),
    "explain": (lambda d: ["explain", d], "no hloscope run here"),
    "tensorboard": (lambda d: ["tensorboard", d, "--port", "1"], ""),
}


@pytest.mark.parametrize("command", list(DIRECTORY_COMMANDS))
@pytest.mark.parametrize("kind", ["empty", "nothing_readable", "missing"])
def test_directory_without_anything_readable_is_refused(tmp_path, command, kind):
    directory = tmp_path / "runs"
    if kind == "empty":
        directory.mkdir()
    elif kind == "nothing_readable":
        _nothing_readable(directory)
    args, words = DIRECTORY_COMMANDS[command]
    result = hloscope(*args(directory))
    expected = ("no such",) if kind == "missing" else ((words,) if words else ())
    assert_refused(result, directory, words=expected)


@pytest.mark.parametrize("command", ["explain", "tensorboard"])
def test_a_file_where_a_directory_is_expected(tmp_path, command):
    path = tmp_path / "notes.txt"
    path.write_text("not a directory\n")
    result = hloscope(command, path, *(["--port", "1"] if command == "tensorboard" else []))
    assert_refused(result, path)


# --------------------------------------------------------------------------------------------------- run directories


RUN_COMMANDS = {
    "hlo stats": lambda run, good: ["hlo", "stats", "--no-xla-cost", run],
    "trace stats": lambda run, good: ["trace", "stats", run],
    "diff": lambda run, good: ["diff", "--no-xla-cost", good, run],
    "explain": lambda run, good: ["explain", run.parent],
}


def _break_run_json(run: Path, case: str) -> tuple[Path, bool, tuple[str, ...]]:
    """Break `run` one way; returns (the file the message must name, line:column expected, words expected)."""
    run_json = run / "run.json"
    record = json.loads(run_json.read_text())
    if case == "empty":
        run_json.write_bytes(b"")
        return run_json, False, ("empty run.json",)
    if case == "truncated":
        _half(run_json, run_json.with_suffix(".half"))
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
    result = hloscope(*RUN_COMMANDS[command](run, good))
    assert_refused(result, named, position=position, words=words)


@pytest.mark.parametrize("command", ["hlo stats", "diff"])
@needs_fixtures
def test_truncated_hlo_inside_a_run_is_named_with_its_position(tmp_path, command):
    good = good_run(tmp_path / "good")
    run = good_run(tmp_path / "broken")
    hlo = next((run / "hlo").glob("*after_optimizations.txt"))
    _half(hlo, hlo.with_suffix(".half")).replace(hlo)
    result = hloscope(*RUN_COMMANDS[command](run, good))
    assert_refused(result, hlo, position=True)


@needs_fixtures
def test_truncated_xplane_inside_a_run_is_named(tmp_path):
    run = good_run(tmp_path / "broken")
    xplane = next(run.rglob("*.xplane.pb"))
    _half(xplane, xplane.with_suffix(".half")).replace(xplane)
    assert_refused(hloscope("trace", "stats", run), xplane, words=("not a valid xplane.pb",))


@pytest.mark.parametrize("command", ["hlo stats", "trace stats", "explain", "diff"])
@needs_fixtures
def test_newer_comparison_is_refused_saying_so(tmp_path, command):
    from hloscope.runs import rundir

    comparison = tmp_path / "compare-1"
    good_run(comparison, "jax")
    rundir.write_comparison(comparison, {"schema_version": 7, "comparison_id": "compare-1", "config": {},
                                         "modes": [{"mode": "jax", "dir": "jax", "status": "ok"}]})
    args = {"hlo stats": ["hlo", "stats", "--no-xla-cost", comparison], "trace stats": ["trace", "stats", comparison],
            "explain": ["explain", comparison], "diff": ["diff", "--no-xla-cost", comparison, comparison / "jax"]}
    result = hloscope(*args[command])
    assert_refused(result, comparison / "comparison.json", words=("newer hloscope", "schema version 7"))


@needs_fixtures
def test_explain_shows_the_readable_runs_and_fails_on_the_broken_one(tmp_path):
    """One broken run never hides the others (its row says why), and the command still exits 2 naming the file."""
    from hloscope.runs import rundir

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


@pytest.mark.parametrize("name", ["rel_garbage.pt.trace.json.gz", "rel_invalid.pt.trace.json", "rel_empty.pt.trace.json"])
def test_tensorboard_with_only_broken_traces_warns_per_run_and_fails(tmp_path, name):
    """The documented exception (docs/tensorboard.md): one warning per run left out, naming its file, then the error."""
    run = tmp_path / "traces" / "cmp" / "pytorch" / "kineto"
    run.mkdir(parents=True)
    trace = run / name.removeprefix("rel_")
    shutil.copy(BAD / name, trace)
    result = hloscope("tensorboard", tmp_path / "traces", "--port", "1", timeout=120)
    assert "Traceback" not in result.stderr and result.code == 2, result.stderr
    *warnings, error = result.stderr.splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("hloscope: warning: run ") and str(trace) in warnings[0]
    assert error.startswith(f"hloscope: error: {tmp_path / 'traces'}: no profile could be read")


# ------------------------------------------------------------------------------------------ real hloscope outputs


@pytest.fixture(scope="module")
def real_run(every_mode_comparison) -> Path:
    """A real `hloscope run --mode jax` (tiny ViT) with its HLO dump and profile: what users feed the readers. The jax
    run of conftest's comparison of every mode; each test changes a copy of it."""
    return every_mode_comparison / "jax"


def _copy_of(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "runs" / run.name
    shutil.copytree(run, copy)
    return copy


@pytest.mark.slow
@pytest.mark.parametrize("command", ["hlo stats", "diff", "explain"])
def test_real_run_json_cut_in_half(real_run, tmp_path, command):
    run = _copy_of(real_run, tmp_path)
    _half(run / "run.json", tmp_path / "half.json").replace(run / "run.json")
    args = {"hlo stats": ["hlo", "stats", run], "diff": ["diff", "--no-xla-cost", real_run, run],
            "explain": ["explain", run.parent]}[command]
    assert_refused(hloscope(*args), run / "run.json", position=True, words=("not valid JSON",))


@pytest.mark.slow
@pytest.mark.parametrize("command", ["hlo stats", "diff"])
@pytest.mark.parametrize("stage", ["before_optimizations", "cpu_after_optimizations"])
def test_real_hlo_dump_cut_in_half(real_run, tmp_path, command, stage):
    run = _copy_of(real_run, tmp_path)
    (hlo,) = run.glob(f"hlo/module_*.jit_train_step.{stage}.txt")
    _half(hlo, tmp_path / "half.txt").replace(hlo)
    args = {"hlo stats": ["hlo", "stats", run], "diff": ["diff", "--no-xla-cost", "--stage", "after", real_run, run]}
    # diff compares the after-optimizations modules, and still refuses a run holding a broken module of any stage
    assert_refused(hloscope(*args[command]), hlo, position=True)


@pytest.mark.slow
def test_real_hlo_artifact_deleted_is_named(real_run, tmp_path):
    run = _copy_of(real_run, tmp_path)
    (hlo,) = run.glob("hlo/module_*.jit_train_step.cpu_after_optimizations.txt")
    hlo.unlink()
    for args in (["hlo", "stats", run], ["diff", "--no-xla-cost", real_run, run], ["explain", run.parent]):
        assert_refused(hloscope(*args), hlo, words=("missing",))


@pytest.mark.slow
def test_real_run_from_a_newer_hloscope_is_refused(real_run, tmp_path):
    run = _copy_of(real_run, tmp_path)
    record = json.loads((run / "run.json").read_text())
    record["schema_version"] += 1
    (run / "run.json").write_text(json.dumps(record))
    for args in (["hlo", "stats", run], ["diff", "--no-xla-cost", real_run, run], ["explain", run.parent]):
        assert_refused(hloscope(*args), run / "run.json", words=("newer hloscope",))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["xplane.pb", "trace.json.gz"])
def test_real_profile_cut_in_half(real_run, tmp_path, name):
    run = _copy_of(real_run, tmp_path)
    (trace,) = run.glob(f"plugins/profile/*/*.{name}")
    _half(trace, tmp_path / "half").replace(trace)
    words = ("not a valid xplane.pb",) if name == "xplane.pb" else ("corrupt gzip",)
    # the xplane through the run directory; JAX's trace.json.gz (skipped there, the xplane says more) as a file
    assert_refused(hloscope("trace", "stats", run if name == "xplane.pb" else trace), trace, words=words)


def _call_chain(path: Path, depth: int) -> Path:
    """Valid HLO (XLA's own parser accepts it) whose computations call each other `depth` deep."""
    lines = ["HloModule chain", ""]
    for i in range(depth):
        body = "negate(p)" if i == 0 else f"call(p), to_apply=comp{i - 1}"
        lines += [f"comp{i} {{", "  p = f32[4]{0} parameter(0)", f"  ROOT r = f32[4]{{0}} {body}", "}", ""]
    lines += ["ENTRY main {", "  p = f32[4]{0} parameter(0)", f"  ROOT r = f32[4]{{0}} call(p), to_apply=comp{depth - 1}",
              "}", ""]
    path.write_text("\n".join(lines))
    return path


def test_deeply_nested_computations_do_not_crash_hlo_stats(tmp_path):
    path = _call_chain(tmp_path / "chain.hlo", 400)
    result = hloscope("hlo", "stats", "--json", "--no-xla-cost", path)
    assert "Traceback" not in result.stderr, result.stderr[-1500:]
    assert result.code == 0, result.stderr[-1500:]
    (module,) = json.loads(result.stdout)["modules"]
    assert module["computations"] == 401
    assert module["flops"] == 4  # the one negate of f32[4] at the bottom of the chain, as XLA's HloCostAnalysis counts


@pytest.mark.parametrize("command", ["hlo stats", "trace stats", "diff"])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_pipe_or_device_is_refused_without_blocking(tmp_path, command, kind):
    """`hloscope hlo stats <(zcat dump.gz)` passes a pipe: refused at once (reading it would block or never end)."""
    if kind == "fifo":
        path = tmp_path / "dump.hlo"
        os.mkfifo(path)  # nobody writes to it: opening it for reading would block forever
    else:
        path = Path("/dev/zero")  # endless
    args = {"hlo stats": ["hlo", "stats", path], "trace stats": ["trace", "stats", path],
            "diff": ["diff", "--no-xla-cost", path, path]}[command]
    assert_refused(hloscope(*args, timeout=120), path, words=("not a regular file or directory",))


@pytest.mark.parametrize("command", ["hlo stats", "trace stats"])
def test_a_newline_in_the_file_name_keeps_the_error_on_one_line(tmp_path, command):
    path = tmp_path / ("bad\nname" + (".hlo" if command == "hlo stats" else ".pt.trace.json"))
    shutil.copy(BAD / "rel_garbage.hlo", path)
    result = hloscope(*command.split(), path)
    assert result.code == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and str(path).replace("\n", "\\n") in result.stderr


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
    result = hloscope(*RUN_COMMANDS[command](run, good))
    assert_refused(result, run / "run.json", words=("points outside the run directory",))


@pytest.mark.parametrize("command", ["hlo stats", "diff"])
@needs_fixtures
def test_xla_dump_directory_with_a_module_cut_in_half(tmp_path, command):
    dump = tmp_path / "dump"
    shutil.copytree(FIXTURES / GOOD_DUMP, dump)
    (hlo,) = dump.glob("*gpu_after_optimizations.txt")
    _half(hlo, tmp_path / "half").replace(hlo)
    args = ["hlo", "stats", dump] if command == "hlo stats" else ["diff", "--no-xla-cost", FIXTURES / GOOD_DUMP, dump]
    assert_refused(hloscope(*args), hlo, position=True)


@needs_fixtures
def test_broken_sibling_file_is_reported_inside_the_result(tmp_path):
    """The documented exception (docs/hlo.md): a garbage buffer assignment beside a module does not stop the analysis;
    the module's memory section says what is wrong with which file, and so does one warning line."""
    dump = tmp_path / "dump"
    shutil.copytree(FIXTURES / GOOD_DUMP, dump)
    (assignment,) = dump.glob("*-buffer-assignment.txt")
    shutil.copy(BAD / "rel_garbage.hlo", assignment)
    result = hloscope("hlo", "stats", "--json", "--no-xla-cost", dump)
    warnings = result.stderr.splitlines()
    assert result.code == 0 and len(warnings) == 1 and warnings[0].startswith("hloscope: warning: "), result.stderr
    assert str(assignment) in warnings[0] and "left out" in warnings[0]
    (after,) = [m for m in json.loads(result.stdout)["modules"] if m["stage"] == "after_optimizations"]
    error = after["memory"]["buffer_assignment"]["error"]
    assert str(assignment) in error


@pytest.mark.parametrize("name, position", [("rel_empty.hlo", False), ("rel_garbage.hlo", False),
                                            ("rel_png.hlo", False), ("rel_kineto_as.hlo", True)])
def test_broken_gpu_target_file_is_refused_before_any_run(tmp_path, name, position):
    """`run --target PATH` reads a GpuTargetConfigProto text file: refused in one line, and no run directory is made."""
    path = BAD / name
    out = tmp_path / "out"
    result = hloscope("run", "--mode", "jax", "--model", "vit-tiny", "--target", path, "--out", out)
    assert_refused(result, path, position=position)
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize("name", ["rel_not_utf8_header.pt.trace.json", "rel_not_utf8_event.pt.trace.json"])
def test_kineto_json_with_a_byte_that_is_not_utf8(name):
    path = BAD / name
    assert_refused(hloscope("trace", "stats", path), path, words=("UTF-8",))


@pytest.mark.slow
def test_xplane_with_a_corrupt_name_is_refused_in_one_line(real_run, tmp_path):
    (xplane,) = real_run.glob("plugins/profile/*/*.xplane.pb")
    data = xplane.read_bytes()
    at = data.find(b"jit_train_step")
    broken = tmp_path / "host.xplane.pb"
    broken.write_bytes(data[: at + 3] + b"\xff" + data[at + 4 :])  # one byte of an event name that is not UTF-8
    assert_refused(hloscope("trace", "stats", broken), broken, words=("not a valid xplane.pb",))


@pytest.mark.parametrize("command", ["explain", "diff"])
@pytest.mark.parametrize("section, key, value, words", [
    ("timing", "median_s", "fast", "'timing.median_s' is str 'fast', expected a number"),
    ("timing", None, 0.002, "'timing' is float 0.002, expected an object"),
    ("timing", "throughput_img_s", [1], "'timing.throughput_img_s' is list [1], expected a number"),
])
@needs_fixtures
def test_wrong_typed_run_record_field_is_named(tmp_path, command, section, key, value, words):
    """Found by mutating the values of a real run.json: a hand-edited field of the wrong type crashed explain's
    collector and the renderers; now it is one line naming run.json and the field."""
    good = good_run(tmp_path / "good")
    run = good_run(tmp_path / "broken")
    record = json.loads((run / "run.json").read_text())
    if key is None:
        record[section] = value
    else:
        record[section][key] = value
    (run / "run.json").write_text(json.dumps(record))
    result = hloscope(*RUN_COMMANDS[command](run, good))
    assert_refused(result, run / "run.json", words=(words,))


@pytest.mark.parametrize("modes, words", [
    ([], "lists no modes: nothing to explain"),
    ([{"dir": "jax", "mode": 7}], "'modes[0].mode' is int 7, expected a string"),
    ([{"dir": "torch_xla", "status": ["failed"], "error": "x"}], "'modes[0].status' is list ['failed'], expected a string"),
    ([{"dir": "torch_xla", "status": "failed", "error": {"why": 1}}], "'modes[0].error' is dict {'why': 1}, expected a string"),
])
@needs_fixtures
def test_explain_names_a_wrong_typed_comparison_entry(tmp_path, modes, words):
    """These once reached rich's table as non-strings (NotRenderableError traceback), or gave an empty report, exit 0."""
    from hloscope.runs import rundir

    comparison = tmp_path / "compare-1"
    good_run(comparison, "jax")
    rundir.write_comparison(comparison, {"schema_version": 1, "comparison_id": "compare-1", "config": {},
                                         "modes": modes})
    assert_refused(hloscope("explain", comparison), comparison / "comparison.json", words=(words,))


@pytest.mark.parametrize("command", list(RUN_COMMANDS))
@needs_fixtures
def test_an_artifact_kind_of_the_wrong_type_is_named(tmp_path, command):
    """A list as an artifact's kind crashed explain (unhashable type) before rundir checked it."""
    good = good_run(tmp_path / "good")
    run = good_run(tmp_path / "broken")
    record = json.loads((run / "run.json").read_text())
    record["artifacts"][0]["kind"] = ["hlo"]
    (run / "run.json").write_text(json.dumps(record))
    assert_refused(hloscope(*RUN_COMMANDS[command](run, good)), run / "run.json",
                   words=("'artifacts' must be objects with a 'path' and a 'kind'",))
