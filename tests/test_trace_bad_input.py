"""Broken trace files get one line on stderr naming the file (line:column for JSON text), and exit code 2: the ones
kept in tests/data/bad (trace_*, rel_*), JSON nested 100,000 deep (in bounded memory), a byte that is not UTF-8, real
traces cut in half or under another format's name, a broken trace inside a run directory, and a FIFO among traces
(refused without blocking)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import (
    FIXTURES,
    HLO_FIXTURE,
    KINETO_FIXTURE,
    XPLANE_FIXTURE,
    assert_refused,
    copy_of_run,
    cut_in_half,
    good_run,
    hloscope,
    hloscope_forked,
    needs_fixtures,
)

from hloscope.trace import xplane

BAD = Path(__file__).parent / "data" / "bad"

# file -> words the one-line message must contain
CASES = {
    "trace_empty.json": "empty file",
    "trace_empty.json.gz": "empty file",
    "trace_empty.xplane.pb": "empty file",
    "trace_truncated.json.gz": "truncated or corrupt gzip",
    "trace_truncated.pt.trace.json": "truncated JSON",
    "trace_truncated.xplane.pb": "truncated or corrupt",
    "trace_garbage.json": "not a JSON trace",
    "trace_garbage.json.gz": "not a JSON trace",
    "trace_not_gzip.json.gz": "not a JSON trace",
    "trace_garbage.xplane.pb": "not a valid xplane.pb",
    "trace_invalid.json": "invalid JSON",
    "trace_not_a_trace.json": "no 'traceEvents'",
    "trace_wrong_format.json": "not a JSON object",
    "trace_wrong_format.json.gz": "not a JSON trace",
    "trace_wrong_format.xplane.pb": "not a valid xplane.pb",
    "trace_event_without_ts.json": "no numeric 'ts'",
}


def test_every_bad_trace_file_has_a_case():
    on_disk = {path.name for path in BAD.glob("trace_*")}
    assert on_disk == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("as_json", [False, True])
def test_bad_trace_is_refused_in_one_line(cli_run, name, as_json):
    path = BAD / name
    args = ["trace", "stats", str(path)] + (["--json"] if as_json else [])
    code, _stdout, stderr = cli_run(*args)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert str(path) in lines[0]
    assert CASES[name] in lines[0]
    assert "Traceback" not in stderr


def test_invalid_json_reports_line_and_column(cli_run):
    path = BAD / "trace_invalid.json"
    # Line 4 misses the comma between "ts": 5 and "dur"; the column is the one json.loads reports for it.
    line4 = path.read_text().splitlines()[3]
    column = line4.index('"dur"') + 1
    code, _, stderr = cli_run("trace", "stats", str(path))
    assert code == 2
    assert f"{path}:4:{column}: invalid JSON" in stderr


def test_missing_path_and_empty_directory(cli_run, tmp_path):
    code, _, stderr = cli_run("trace", "stats", str(tmp_path / "nope.json"))
    assert code == 2 and "no such file" in stderr
    code, _, stderr = cli_run("trace", "stats", str(tmp_path))
    assert code == 2 and "no traces found" in stderr and str(tmp_path) in stderr


def test_one_bad_trace_does_not_hide_the_good_ones(cli_run, tmp_path, fixtures_dir):
    shutil.copy(fixtures_dir / "hta" / "triton_example__triton_example.json.gz", tmp_path / "a.pt.trace.json.gz")
    shutil.copy(BAD / "trace_truncated.pt.trace.json", tmp_path / "b.pt.trace.json")
    shutil.copy(BAD / "trace_truncated.xplane.pb", tmp_path / "c.xplane.pb")  # refused when read, before any stats
    shutil.copy(fixtures_dir / "hta" / "triton_example__triton_example.json.gz", tmp_path / "d.pt.trace.json.gz")
    code, stdout, stderr = cli_run("trace", "stats", str(tmp_path), "--json")
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 2 and "b.pt.trace.json:" in lines[0] and "c.xplane.pb:" in lines[1]
    traces = json.loads(stdout)["traces"]
    assert [Path(t["file"]).name for t in traces] == ["a.pt.trace.json.gz", "d.pt.trace.json.gz"]
    assert [t["kernels"] for t in traces] == [1, 1]


def test_xplane_larger_than_free_memory_is_refused(cli_run, fixtures_dir, monkeypatch):
    """XLA's reader holds the whole XSpace: a file that cannot fit is refused up front, never killed mid-way."""
    path = fixtures_dir / "tracelens" / "test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb"
    just_too_little = xplane.XPLANE_MEMORY_FACTOR * path.stat().st_size - 1
    monkeypatch.setattr(xplane, "available_memory", lambda: just_too_little)
    code, _, stderr = cli_run("trace", "stats", str(path))
    assert code == 2
    assert f"{path}: too large to read here" in stderr and "GB is available" in stderr
    assert len(stderr.strip().splitlines()) == 1


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
    result = hloscope_forked("trace", "stats", path, *(["--json"] if as_json else []))
    line = assert_refused(result, path, position=position, words=(words,))
    if name.startswith("rel_invalid"):
        assert f"{path}:3:11:" in line  # the missing ',' after "ts": 1 on line 3


def test_deeply_nested_json_trace_is_refused_within_bounded_memory():
    path = BAD / "rel_deep.pt.trace.json"
    # 1 GB is 5000x the file: a reader with bounded memory needs far less; the cap keeps the machine safe.
    result = hloscope_forked("trace", "stats", path, memory_limit=1 << 30, timeout=120)
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
        "truncated_gzip": lambda p: cut_in_half(kineto, p),
        "truncated_json": lambda p: p.write_bytes(gzip.decompress(kineto.read_bytes())[: kineto.stat().st_size * 3]),
        "truncated_xplane": lambda p: cut_in_half(FIXTURES / XPLANE_FIXTURE, p),
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
    assert_refused(hloscope_forked("trace", "stats", "--json", path), path, words=words)


@needs_fixtures
def test_truncated_xplane_inside_a_run_is_named(tmp_path):
    run = good_run(tmp_path / "broken")
    xplane = next(run.rglob("*.xplane.pb"))
    cut_in_half(xplane, xplane.with_suffix(".half")).replace(xplane)
    assert_refused(hloscope_forked("trace", "stats", run), xplane, words=("not a valid xplane.pb",))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["xplane.pb", "trace.json.gz"])
def test_real_profile_cut_in_half(real_run, tmp_path, name):
    run = copy_of_run(real_run, tmp_path)
    (trace,) = run.glob(f"plugins/profile/*/*.{name}")
    cut_in_half(trace, tmp_path / "half").replace(trace)
    words = ("not a valid xplane.pb",) if name == "xplane.pb" else ("corrupt gzip",)
    # the xplane through the run directory; JAX's trace.json.gz (skipped there, the xplane says more) as a file
    assert_refused(hloscope_forked("trace", "stats", run if name == "xplane.pb" else trace), trace, words=words)


@pytest.mark.slow
def test_xplane_with_a_corrupt_name_is_refused_in_one_line(real_run, tmp_path):
    (xplane,) = real_run.glob("plugins/profile/*/*.xplane.pb")
    data = xplane.read_bytes()
    at = data.find(b"jit_train_step")
    broken = tmp_path / "host.xplane.pb"
    broken.write_bytes(data[: at + 3] + b"\xff" + data[at + 4 :])  # one byte of an event name that is not UTF-8
    assert_refused(hloscope_forked("trace", "stats", broken), broken, words=("not a valid xplane.pb",))


@pytest.mark.parametrize("name", ["rel_not_utf8_header.pt.trace.json", "rel_not_utf8_event.pt.trace.json"])
def test_kineto_json_with_a_byte_that_is_not_utf8(name):
    path = BAD / name
    assert_refused(hloscope_forked("trace", "stats", path), path, words=("UTF-8",))


@pytest.mark.parametrize("where", ["trace_dir", "listed_artifact"])
@needs_fixtures
def test_a_fifo_among_traces_is_refused_without_blocking(tmp_path, where):
    if where == "trace_dir":
        directory = tmp_path / "traces"
        directory.mkdir()
        fifo = directory / "host.xplane.pb"
        os.mkfifo(fifo)
        target = directory
    else:
        run = good_run(tmp_path / "runs")
        fifo = next((run / "plugins").rglob("*.xplane.pb"))
        fifo.unlink()
        os.mkfifo(fifo)
        target = run
    assert_refused(hloscope_forked("trace", "stats", target, timeout=60), fifo, words=("not a regular file",))


def test_an_xplane_without_protobuf_installed_is_one_line_naming_the_package(tmp_path):
    """A bare Python (a TPU VM's system Python has jax but not protobuf): reading an xplane says what to install."""
    shadow = tmp_path / "shadow" / "google"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'google.protobuf'\")\n")
    trace = Path(__file__).parent / "data" / "tpu_v5e" / "jax_vit_tiny.xplane.pb"
    env = {"PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])}
    result = hloscope("trace", "stats", trace, env=env)
    assert result.code == 3 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("hloscope: error: this needs the Python package 'protobuf', which is not installed "
                                     "(an xplane profile is a protobuf message): pip install protobuf")


# Every field an event's reader looks up, given each JSON type a damaged or hand-written trace may hold there.
_ODD_VALUES = {"list": [1], "object": {"a": 1}, "number": 7, "true": True, "null": None, "text": "7"}
_EVENT_FIELDS = ("cat", "name", "ph", "pid", "tid", "ts", "dur", "args", "args.stream", "args.correlation",
                 "args.hlo_op", "args.hlo_module", "args.step_num", "args.Input Dims")


@pytest.mark.parametrize("value", sorted(_ODD_VALUES))
@pytest.mark.parametrize("field", _EVENT_FIELDS)
def test_any_json_type_in_an_event_field_is_read_or_refused_in_one_line(cli_run, tmp_path, field, value):
    """A Kineto event whose field holds another JSON type than profilers write is either read (an unknown category
    or op name as its JSON text, a numeric text time as the number) or refused in one line naming the file; a
    time that is not a number at all (true, null, a list) is refused."""
    document = json.loads((Path(__file__).parent / "data" / "traces" / "pytorch18_excerpt.json").read_text())
    events = [event for event in document["traceEvents"] if event.get("ph") == "X"]
    for event in events:  # every complete event: the host ops, the device copies and the kernels
        target, key = (event.setdefault("args", {}), field[5:]) if field.startswith("args.") else (event, field)
        target[key] = _ODD_VALUES[value]
    path = tmp_path / "odd.pt.trace.json"
    path.write_text(json.dumps(document))
    for command in (("trace", "stats", str(path), "--json"), ("trace", "export", str(path), str(tmp_path / "out"))):
        code, _, stderr = cli_run(*command)
        assert code in (0, 2) and "Traceback" not in stderr, stderr
        assert code == 0 or (len(stderr.strip().splitlines()) == 1 and str(path) in stderr), stderr
        if field in ("ts", "dur") and value in ("list", "object", "true"):
            assert code == 2 and "no numeric 'ts'/'dur'" in stderr, stderr
        if field in ("cat", "args.hlo_op", "args.hlo_module") or (field in ("ts", "dur") and value == "text"):
            assert code == 0, stderr
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
