"""Hostile inputs for the readers, one class at a time, each built here and run through the real command
(`helpers.hloscope`: a child process under a timeout and an address-space limit):

1. numbers too large for their meaning (a step, a rank, an id beyond 64 bits; 5,000 digits)
2. deep nesting, NUL bytes, unreadable files and FIFOs inside dump, run and trace directories
3. crafted `trace stats --state` records: never trusted unless they match the trace they cache
4. output below `trace export OUT` never follows a symbolic link out of OUT
5. names from files never reach the terminal as escape sequences
6. click's own usage errors are the project's one line
"""

from __future__ import annotations

import builtins
import errno
import json
import os
import re
from pathlib import Path

import pytest
from helpers import assert_refused, hloscope

from hloscope.files import int64
from hloscope.tensorboard.kineto_xspace import _step_number, kineto_to_xspace
from hloscope.trace.job import StateDir

BIG = "9" * 5000
# ESC, BEL and the C1 controls (CSI 0x9b among them): none may reach stdout raw
_TERMINAL_CONTROL = re.compile("[\x07\x1b\x80-\x9f]")


def _kineto(path: Path, step: str = "1", kernel: str = "gemm", header: str = "") -> Path:
    """A small Kineto trace: two steps (the first named `ProfilerStep#<step>`), a kernel launched in each."""
    events = []
    for i, name in enumerate((f"ProfilerStep#{step}", "ProfilerStep#2")):
        base = 1000 * i
        events += [
            {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": base, "dur": 900},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": base + 10,
             "dur": 5, "args": {"correlation": i + 1}},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": base + 20, "dur": 100,
             "args": {"stream": 7, "correlation": i + 1, "device": 0}},
        ]
    path.write_text("{" + header + '"schemaVersion": 1, "traceEvents": ' + json.dumps(events) + "}")
    return path


def _hlo(path: Path, body: str = "", tail: str = "", op_name: str = "jit(f)/dot") -> Path:
    quoted = op_name.replace("\\", "\\\\").replace('"', '\\"')
    body = body or (
        "  a = f32[8,8]{1,0} parameter(0)\n"
        "  b = f32[8,8]{1,0} parameter(1)\n"
        "  ROOT d = f32[8,8]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
        f'metadata={{op_name="{quoted}" source_file="x.py" source_line=1}}\n')
    path.write_text("HloModule jit_f, is_scheduled=true\n\nENTRY main {\n" + body + "}\n" + tail)
    return path


def _one_warning(stderr: str, path: Path, words: str) -> None:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hloscope: warning: ") and str(path) in lines[0], stderr
    assert words in lines[0], lines[0]


# ---------------------------------------------------------------------------------- 1. numbers beyond 64 bits


def test_a_step_number_of_5000_digits_is_no_step_and_hides_no_other_trace(tmp_path):
    good = _kineto(tmp_path / "a.pt.trace.json")
    bad = _kineto(tmp_path / "b.pt.trace.json", step=BIG)
    result = hloscope("trace", "stats", "--json", "-j", "1", tmp_path)
    assert result.code == 0, result.stderr[-2000:]
    _one_warning(result.stderr, bad, "beyond 64 bits")
    traces = {Path(t["file"]).name: t for t in json.loads(result.stdout)["traces"]}
    assert traces[good.name]["steps"] == 2 and traces[bad.name]["steps"] == 1  # the good step of the bad file stays


def test_a_step_num_of_5000_digits_is_no_step_or_refused_in_one_line(tmp_path):
    text = _kineto(tmp_path / "t.pt.trace.json").read_text()
    as_text = tmp_path / "text.pt.trace.json"  # a string: read, the marker no step
    as_text.write_text(text.replace('"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2"',
                                    f'"ph": "X", "args": {{"step_num": "{BIG}"}}, "name": "train"'))
    result = hloscope("trace", "stats", "--json", as_text)
    assert result.code == 0, result.stderr
    _one_warning(result.stderr, as_text, "beyond 64 bits")
    as_number = tmp_path / "number.pt.trace.json"  # a JSON number of 5,000 digits: no trace hloscope reads
    as_number.write_text(as_text.read_text().replace(f'"{BIG}"', BIG))
    line = assert_refused(hloscope("trace", "stats", as_number), as_number, words=("digits",))
    assert len(line) < 500


def test_a_step_beyond_int64_is_exported_as_no_step(tmp_path):
    import pyarrow.parquet as pq

    trace = _kineto(tmp_path / "t.pt.trace.json", step=str(2**63))
    result = hloscope("trace", "export", trace, tmp_path / "out")
    assert result.code == 0, result.stderr[-2000:]
    _one_warning(result.stderr, trace, "beyond 64 bits")
    steps = pq.read_table(next((tmp_path / "out").rglob("*.parquet"))).column("step").to_pylist()
    assert set(steps) <= {None, 2}


def test_tensorboard_conversion_reads_a_huge_step_name_as_no_step():
    assert _step_number("ProfilerStep#" + BIG) is None and _step_number("ProfilerStep#" + str(2**63)) is None
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#" + BIG, "pid": 1, "tid": 1, "ts": 0,
               "dur": 10, "args": {"step_num": BIG}}]
    kineto_to_xspace({"deviceProperties": [{"id": BIG}, 7]}, iter(events), host="h")


@pytest.mark.parametrize("where", ["name", "header"])
def test_a_rank_beyond_int64_is_refused_naming_its_file_while_the_others_are_read(tmp_path, where):
    good = _kineto(tmp_path / "rank-1.json")
    if where == "name":
        bad = _kineto(tmp_path / f"rank-{'1' * 200}.json")
    else:
        bad = _kineto(tmp_path / "other.json", header=f'"distributedInfo": {{"rank": {"7" * 5000}}}, ')
    for command in (("trace", "stats", "-j", "1", tmp_path), ("trace", "export", "-j", "1", tmp_path, tmp_path / "out")):
        result = hloscope(*command)
        assert_refused(result, bad, words=("64 bits", "rank"))
        assert (good.name in result.stdout) if command[1] == "stats" else ("1 trace(s)" in result.stdout)


@pytest.mark.parametrize("case", ["stack_frame_id", "parameter_number", "dimension", "element_bits", "window"])
def test_hlo_numbers_beyond_64_bits_are_refused_at_their_line_and_column(tmp_path, case):
    a = "  a = f32[8,8]{1,0} parameter(0)\n  b = f32[8,8]{1,0} parameter(1)\n"
    bodies = {
        "stack_frame_id": ("", f'\nFileNames\n{BIG} "x.py"\n'),
        "parameter_number": (f"  a = f32[8]{{0}} parameter({BIG})\n  ROOT d = f32[8]{{0}} add(a, a)\n", ""),
        "dimension": (f"  a = f32[{2**64},8]{{1,0}} parameter(0)\n  ROOT d = f32[8]{{0}} negate(a)\n", ""),
        "element_bits": (f"  a = s4[8]{{0:E({BIG})}} parameter(0)\n  ROOT d = s4[8]{{0}} negate(a)\n", ""),
        "window": (a + f"  ROOT c = f32[8,8]{{1,0}} convolution(a, b), window={{size={BIG}x1}}, "
                   "dim_labels=bf_io->bf\n", ""),
    }
    body, tail = bodies[case]
    path = _hlo(tmp_path / "m.hlo", body, tail)
    line = assert_refused(hloscope("hlo", "stats", path), path, position=True)
    assert re.search("64 bits|digits", line) and "4300" not in line


def test_unit_int64_bounds_text_without_converting_it():
    assert [int64(v) for v in ("12", " -5 ", 3.0, str(2**63 - 1))] == [12, -5, 3, 2**63 - 1]
    assert all(int64(v) is None for v in (BIG, str(2**63), 1e300, float("nan"), 2.5, "", "x", True, None, [1]))


# ------------------------------------------------------------------------- 5. no terminal escapes from names

ESCAPES = "\x1b]52;c;aGk=\x07clip\x1b]0;title\x07\x1b[31mred\x9bcsi"


def test_escape_sequences_in_names_never_reach_the_terminal(tmp_path):
    trace = _kineto(tmp_path / "t.pt.trace.json", kernel="k" + ESCAPES)
    module = _hlo(tmp_path / "m.hlo", op_name="jit(f)/" + ESCAPES)
    for command in (("trace", "stats", trace), ("hlo", "stats", module)):
        result = hloscope(*command)
        assert result.code == 0, result.stderr[-2000:]
        assert "\\x1b" in result.stdout and not _TERMINAL_CONTROL.search(result.stdout), result.stdout[-2000:]


# ----------------------------------------------------------------------------- 6. click's errors in one line


@pytest.mark.parametrize("args", [("hlo", "stats"), ("trace", "stats"), ("trace", "export", "x"), ("diff", "x"),
                                  ("replay",), ("trace", "stats", "--top", "0", "x")])
def test_click_usage_errors_are_one_line(args):
    result = hloscope(*args)
    assert result.code == 2 and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hloscope: error: ") and "--help" in lines[0], result.stderr


@pytest.mark.parametrize("args", [("hlo", "stats"), ("trace", "stats"), ("trace", "export", "{}", "{}/out"),
                                  ("diff", "{}", "{}"), ("explain",), ("replay",), ("tensorboard",)])
def test_a_missing_path_is_one_line_naming_it(tmp_path, args):
    missing = tmp_path / "missing"
    argv = [a.format(missing) for a in args]
    if len(argv) == len(args) and "{}" not in "".join(args):
        argv.append(str(missing))
    assert_refused(hloscope(*argv), missing)


# ------------------------------------------------------------------ 4. output never follows a link out of OUT


def test_trace_export_never_writes_through_a_symlink_below_out(tmp_path):
    trace = _kineto(tmp_path / "t.pt.trace.json")
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(outside, out / "rank=0")
    result = hloscope("trace", "export", trace, out)
    assert_refused(result, out / "rank=0", words=("symbolic link",))
    assert list(outside.iterdir()) == [] and (out / "rank=0").is_symlink()


def test_report_output_never_replaces_what_a_dangling_link_names(tmp_path):
    module = _hlo(tmp_path / "m.hlo")
    link = tmp_path / "report.md"
    os.symlink(tmp_path / "elsewhere.md", link)
    result = hloscope("diff", module, module, "-o", link)
    assert result.code == 2 and "already exists" in result.stderr and not (tmp_path / "elsewhere.md").exists()


# ------------------------------------------------------------------------- 3. crafted --state records


def _record_path(state: Path, trace: Path) -> Path:
    return StateDir(state, {"top": 10})._path(str(trace))


def _traces_by_name(stdout: str) -> dict[str, dict]:
    return {Path(t["file"]).name: t for t in json.loads(stdout)["traces"]}


def test_state_entries_that_are_not_records_are_ignored_without_blocking(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    folder = tmp_path / "traces"
    folder.mkdir()
    hostile = {
        "fifo": None, "folder": None,
        "deep": "[" * 100_000 + "]" * 100_000,
        "shape": json.dumps({"identity": 1, "result": [], "digest": "x"}),
        "huge_int": '{"identity": {"size": ' + BIG + "}}",
        "recursion": '{"result": ' * 5000 + "1" + "}" * 5000,
    }
    for name, text in hostile.items():
        record = _record_path(state, _kineto(folder / f"{name}.pt.trace.json"))
        if name == "fifo":
            os.mkfifo(record)
        elif name == "folder":
            record.mkdir()
        else:
            record.write_text(text)
    result = hloscope("trace", "stats", "--json", "-j", "1", "--state", state, folder, timeout=120)
    assert result.code == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert len(result.stderr.splitlines()) <= 1  # at most one warning: a summary that could not be kept
    traces = _traces_by_name(result.stdout)
    assert len(traces) == len(hostile) and all(t["steps"] == 2 and t["kernels"] == 2 for t in traces.values())


def test_a_state_record_is_used_only_for_the_very_trace_it_caches(tmp_path):
    state = tmp_path / "state"
    folder = tmp_path / "traces"
    folder.mkdir()
    forged, rewritten = _kineto(folder / "a.pt.trace.json"), _kineto(folder / "b.pt.trace.json")
    first = hloscope("trace", "stats", "--json", "-j", "1", "--state", state, folder)
    assert first.code == 0, first.stderr
    # a record whose figures were changed (its identity still the trace's, the old self-digest recomputed)
    path = _record_path(state, forged)
    record = json.loads(path.read_text())
    record["result"]["stats"].update(kernels=4242, steps=999, device_time_us=123456789.0)
    path.write_text(json.dumps(record))
    legacy = dict(record, digest="0" * 64)  # the older format, with a digest of the result only
    # a trace rewritten in place: same size, same modification time, other bytes
    info = rewritten.stat()
    rewritten.write_text(rewritten.read_text().replace('"gemm"', '"gemx"'))
    os.utime(rewritten, ns=(info.st_atime_ns, info.st_mtime_ns))
    again = hloscope("trace", "stats", "--json", "-j", "1", "--state", state, folder)
    assert again.code == 0, again.stderr
    traces = _traces_by_name(again.stdout)
    assert traces["a.pt.trace.json"]["kernels"] == 2 and traces["a.pt.trace.json"]["steps"] == 2
    assert traces["b.pt.trace.json"]["top"][0]["name"] == "gemx"
    path.write_text(json.dumps(legacy))
    assert _traces_by_name(hloscope("trace", "stats", "--json", "-j", "1", "--state", state, forged).stdout)[
        "a.pt.trace.json"]["kernels"] == 2


# ---------------------------------------------- 2. deep nesting, NUL bytes, unreadable files, FIFOs in folders


def test_a_backend_config_nested_100000_deep_reads_as_no_config(tmp_path):
    deep = "{" + '"a":{' * 100_000 + "}" * 100_001
    quoted = deep.replace('"', '\\"')
    path = tmp_path / "deep.hlo"
    path.write_text(
        "HloModule jit_f, is_scheduled=true\n\n"
        "fused {\n  p = f32[8]{0} parameter(0)\n  ROOT n = f32[8]{0} negate(p)\n}\n\n"
        "ENTRY main {\n  a = f32[8]{0} parameter(0)\n"
        f'  f = f32[8]{{0}} fusion(a), kind=kCustom, calls=fused, backend_config="{quoted}"\n'
        f'  ROOT c = f32[8]{{0}} custom-call(f), custom_call_target="__cublas$gemm", backend_config={deep}\n'
        "}\n")
    for command in (("hlo", "stats", "--json", "--no-xla-cost", path), ("diff", "--json", path, path)):
        result = hloscope(*command, memory_limit=2 << 30)
        assert result.code == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]


def test_fifos_in_a_trace_folder_are_never_opened(tmp_path):
    good = _kineto(tmp_path / "good.pt.trace.json")
    for name in ("rank-3.json", "other.json.gz"):
        os.mkfifo(tmp_path / name)
    result = hloscope("trace", "stats", "--json", tmp_path, timeout=60)
    assert result.code == 0, result.stderr[-2000:]
    assert [Path(t["file"]).name for t in json.loads(result.stdout)["traces"]] == [good.name]
    assert all("not a regular file" in line for line in result.stderr.splitlines()), result.stderr
    for name in ("rank-3.json", "other.json.gz"):
        (tmp_path / name).unlink()
    os.mkfifo(tmp_path / "named.pt.trace.json")  # a trace's own name: refused in one line, the others still read
    assert_refused(hloscope("trace", "stats", tmp_path, timeout=60), tmp_path / "named.pt.trace.json",
                   words=("FIFO",))


@pytest.mark.parametrize("where", ["hlo", "trace"])
def test_a_nul_byte_in_an_artifact_path_is_one_line_for_every_command(tmp_path, where):
    from helpers import FIXTURES, fixtures_missing, good_run  # the run is made of real fixture files

    if not FIXTURES.is_dir():
        fixtures_missing(f"real fixtures not found at {FIXTURES}")
    run = good_run(tmp_path / "runs")
    record = json.loads((run / "run.json").read_text())
    artifact = next(a for a in record["artifacts"] if a["kind"] == where)
    artifact["path"] += "\u0000x"
    (run / "run.json").write_text(json.dumps(record))
    # (an HLO artifact is only a warning for trace stats: the trace is read with categories by kernel name)
    commands = [["explain", run.parent], *([["hlo", "stats", "--no-xla-cost", run], ["diff", run, run], ["replay", run]]
                                            if where == "hlo" else
                                            [["trace", "stats", run], ["trace", "export", run, tmp_path / "out"]])]
    for args in commands:
        assert_refused(hloscope(*args, timeout=120, memory_limit=2 << 30), run / "run.json", words=("NUL",))


def _dump(tmp_path: Path) -> Path:
    dump = tmp_path / "dump"
    dump.mkdir()
    _hlo(dump / "module_0001.jit_f.before_optimizations.txt")
    _hlo(dump / "module_0001.jit_f.sm_9.0_gpu_after_optimizations.txt")
    return dump


def _deny(monkeypatch, locked: Path, *, listing: bool = False) -> None:
    """Make `locked` unreadable as EACCES would (these tests may run as root, whom chmod does not stop): opening it
    fails; with `listing`, a folder that cannot be listed or looked into either."""
    def denied(path) -> bool:
        try:
            text = os.fsdecode(os.fspath(path))
        except TypeError:
            return False
        return text == str(locked) or (listing and text.startswith(f"{locked}/"))

    def guard(real):
        def call(path, *args, **kwargs):
            if denied(path):
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
            return real(path, *args, **kwargs)
        return call

    monkeypatch.setattr(builtins, "open", guard(builtins.open))
    monkeypatch.setattr(os, "open", guard(os.open))
    if listing:
        monkeypatch.setattr(os, "listdir", guard(os.listdir))
        monkeypatch.setattr(os, "scandir", guard(os.scandir))
        monkeypatch.setattr(os, "stat", guard(os.stat))


@pytest.mark.parametrize("listing", [False, True])
def test_an_unreadable_file_or_folder_in_a_dump_is_one_line_naming_it(tmp_path, monkeypatch, cli_run, listing):
    dump = _dump(tmp_path)
    locked = dump / "module_0001.jit_f.before_optimizations.txt"
    _deny(monkeypatch, locked, listing=listing)
    if listing:  # a folder inside the dump that cannot be looked into: the folder or a file in it is named
        locked.unlink()
        locked.mkdir()
    for args in (["hlo", "stats", "--no-xla-cost", str(dump)], ["diff", str(dump), str(dump)]):
        code, _, err = cli_run(*args)
        lines = err.splitlines()
        assert code == 2 and len(lines) == 1 and str(locked) in lines[0] and "Permission denied" in lines[0], err
