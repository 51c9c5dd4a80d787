"""The hostile inputs of the attack, one class at a time, each against every reader
that meets it. Every command runs as a real subprocess (`python -m hloscope`) under a timeout and an address-space
limit (`test_reliability_inputs.hloscope`), so a hang or a memory bomb fails its test instead of the machine; each
check is "exit 2 + one stderr line naming the file + no traceback", or "a result with one counted warning".

1. user strings are text, never rich markup or raw HTML      5. impossible values refused or skipped with a count
2. one reading layer for every file, whoever names it         6. faults in `compare` never hide finished work
3. only regular files are read (FIFOs never block)            7. `explain` on a corrupt trace: stderr + exit 2
4. memory bounded or refused early
"""

from __future__ import annotations

import gzip
import json
import math
import os
import shutil
from pathlib import Path

import pytest
from helpers import BAD, FIXTURES, assert_refused, first_good_hlo, good_run, hloscope, needs_fixtures
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HOSTILE_NAMES = ["[/]", "neg[/]", "[bold]x[/bold]", "convert_element_type[new_dtype=float32 weak_type=True]",
                 "<script>alert(1)</script>", "a|b`c*d_e_", "tail\\"]


def _hlo(path: Path, op_name: str) -> Path:
    """A tiny valid module whose dot carries `op_name` (metadata) and whose fusion is named after it."""
    quoted = op_name.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text(
        "HloModule jit_f, is_scheduled=true\n\n"
        "ENTRY main {\n"
        "  a = f32[8,8]{1,0} parameter(0)\n"
        "  b = f32[8,8]{1,0} parameter(1)\n"
        f'  ROOT d = f32[8,8]{{1,0}} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, '
        f'metadata={{op_name="{quoted}" source_file="x.py" source_line=1}}\n'
        "}\n")
    return path


def _kineto(path: Path, names: list[str], durations: list[float] | None = None, opener=open) -> Path:
    durations = durations or [100.0] * len(names)
    events = [{"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 1000 + 500 * i, "dur": dur,
               "args": {"stream": 7, "correlation": i + 1, "device": 0}}
              for i, (name, dur) in enumerate(zip(names, durations))]
    events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 990 + 500 * i,
                "dur": 5, "args": {"correlation": i + 1}} for i in range(len(names))]
    with opener(path, "wt") as handle:
        handle.write(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _no_traceback(result) -> None:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "MarkupError" not in result.stderr, result.stderr[-3000:]


# ------------------------------------------------------------------------------------- 1. user strings are text


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_op_names_with_brackets_print_as_written_in_hlo_stats(tmp_path, name):
    result = hloscope("hlo", "stats", "--no-xla-cost", _hlo(tmp_path / "m.hlo", name), timeout=120)
    _no_traceback(result)
    assert result.code == 0, result.stderr
    assert name[-50:] in result.stdout.replace("\n", ""), result.stdout


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_kernel_names_and_directories_with_brackets_print_as_written_in_trace_stats(tmp_path, name):
    directory = tmp_path / "run[bs32]" / "x[/]y"
    directory.mkdir(parents=True)
    _kineto(directory / "a.pt.trace.json", [name, "gemm"])
    result = hloscope("trace", "stats", tmp_path / "run[bs32]", timeout=120)
    _no_traceback(result)
    assert result.code == 0, result.stderr
    flat = result.stdout.replace("\n", "")
    assert name in flat and "run[bs32]" in flat and "x[/]y" in flat, result.stdout


def test_run_and_comparison_tables_show_user_strings_as_written():
    from io import StringIO

    from helpers import comparison_record, run_record
    from rich.console import Console

    from hloscope.render.run_tables import comparison_table, run_table

    record = {"mode": "jax[/]", "status": "failed", "error": "[bold]boom[/bold] in neg[/]", "config": {"model": "m[x]"},
              "timing": {}, "memory": {}, "artifacts": []}
    comparison = {"config": {"model": "vit[/]"}, "modes": [{"mode": "jax[/]", "status": "failed"}]}
    for table in (run_table(run_record(record)), comparison_table(comparison_record(comparison))):
        out = StringIO()
        Console(file=out, width=300).print(table)
        assert "[/]" in out.getvalue() and ("[bold]boom[/bold]" in out.getvalue() or "vit[/]" in out.getvalue())


def test_diff_markdown_escapes_html_and_markdown(tmp_path):
    a = _hlo(tmp_path / "a.hlo", "<script>alert(1)</script>")
    b = _hlo(tmp_path / "b<img src=x>.hlo", "a|b")
    out = tmp_path / "report.md"
    result = hloscope("diff", "--no-xla-cost", "--format", "md", "-o", out, a, b, timeout=120)
    _no_traceback(result)
    assert result.code == 0, result.stderr
    text = out.read_text()
    assert "<script>" not in text and "<img" not in text
    assert "&lt;img src=x&gt;" in text


# --------------------------------------------------- 2. one reading layer, 3. only regular files (never block)


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
        assert_refused(hloscope(*args, timeout=120, memory_limit=2 << 30), named)


@pytest.mark.parametrize("value", ["-0.002", "1e400"])
@needs_fixtures
def test_impossible_step_times_are_refused(tmp_path, value):
    run = good_run(tmp_path / "runs")
    text = (run / "run.json").read_text().replace('"median_s": 0.002', f'"median_s": {value}')
    named = _write_run_json(run, text)
    assert_refused(hloscope("explain", run.parent, timeout=120), named, words=("timing.median_s",))


@pytest.mark.parametrize("sibling, content", [
    ("-buffer-assignment.txt", ""), ("-buffer-assignment.txt", "BufferAssignment:\nallocation 0: size " + "9" * 5000),
    ("-memory-usage-report.txt", "Memory Space: 0\nTotal bytes: " + "9" * 5000), ("-buffer-assignment.txt", None)])
@needs_fixtures
def test_broken_or_hostile_sibling_reports_are_named_inside_the_result(tmp_path, sibling, content):
    module = tmp_path / first_good_hlo().name
    shutil.copy(first_good_hlo(), module)
    report = Path(str(module)[: -len(".txt")] + sibling)
    if content is None:
        os.mkfifo(report)  # a FIFO sibling: never opened for a blocking read
    else:
        report.write_text(content)
    for extra in ([], ["--json"]):
        result = hloscope("hlo", "stats", "--no-xla-cost", *extra, module, timeout=120)
        _no_traceback(result)
        assert result.code == 0, result.stderr
        expected = report.name if extra else "unreadable"  # the table cell is cut to the terminal's width
        assert expected in result.stdout.replace("\n", ""), result.stdout[-2000:]


# A regular file that no one may open for reading, root included (write-only sysfs attribute: the kernel refuses the
# open with EACCES); chmod 0 would not do, as root (CI) reads files without read permission.
UNREADABLE = Path("/sys/bus/cpu/drivers_probe")


@needs_fixtures
def test_unreadable_module_in_a_dump_directory_is_one_line(tmp_path):
    with pytest.raises(PermissionError):
        UNREADABLE.open("rb")
    dump = tmp_path / "dump"
    shutil.copytree(FIXTURES / "gpu_aot" / "mlp_sm90_triton", dump)
    module = sorted(dump.glob("module_*after_optimizations.txt"))[0]
    module.unlink()
    module.symlink_to(UNREADABLE)  # named in the dump as the module it replaces
    assert_refused(hloscope("hlo", "stats", "--no-xla-cost", dump, timeout=120), module, words=("cannot read",))


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
    assert_refused(hloscope("trace", "stats", target, timeout=60), fifo, words=("not a regular file",))


@pytest.mark.parametrize("case, words", [
    ("bad_escape", ("bad escape",)), ("deep", ("nested",)), ("negative", ("core_count",)),
    ("huge_int", ("GpuTargetConfigProto",)), ("fifo", ()), ("device", ("device",))])
def test_hostile_gpu_specs_are_refused_before_any_run(tmp_path, case, words):
    spec = tmp_path / "gpu.txtpb"
    body = 'gpu_device_info { core_count: 132 clock_rate_ghz: 1.98 memory_bandwidth: 3352000000000 }\n'
    if case == "bad_escape":
        spec.write_text('device_description_str: "H100 \\x"\n' + body)
    elif case == "deep":
        spec.write_text("a { " * 5000 + "} " * 5000)
    elif case == "negative":
        spec.write_text(body.replace("132", "-132"))
    elif case == "huge_int":
        spec.write_text(body.replace("core_count: 132", "core_count: " + "9" * 5000))
    elif case == "fifo":
        os.mkfifo(spec)  # nobody writes: reads as empty at once, never blocks
    else:
        spec = Path("/dev/zero")
    out = tmp_path / "out"
    result = hloscope("run", "--mode", "jax", "--target", spec, "--out", out, timeout=60)
    assert_refused(result, spec, words=words)
    assert not out.exists() or not any(out.iterdir()), "a run directory was made for a refused target"


def test_a_target_spec_from_a_pipe_is_read_once():
    import subprocess
    import sys

    from hloscope.hlo import gpu_spec as spec_module

    body = (Path(spec_module.__file__).parent.parent / "data" / "gpu_specs")
    text = next(body.iterdir()).read_text()
    reader, writer = os.pipe()
    path = f"/proc/self/fd/{reader}"
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"],
                             stdin=subprocess.PIPE, stdout=writer)
    os.close(writer)
    child.communicate(text.encode())
    first = spec_module.resolve_target(path)
    second = spec_module.resolve_target(path)  # the pipe is drained: this comes from the one read
    os.close(reader)
    assert first is second and first.core_count


# ------------------------------------------------------------------------------------------------ 4. memory


def test_gzip_bomb_of_one_huge_token_is_refused_in_bounded_memory(tmp_path):
    path = tmp_path / "bomb.pt.trace.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(b'{"traceEvents": [{"name": "')
        block = b"A" * (1 << 20)
        for _ in range(2048):  # 2 GB of one string token, ~2 MB compressed
            handle.write(block)
        handle.write(b'"}]}')
    result = hloscope("trace", "stats", path, timeout=240, memory_limit=3 << 30)
    assert_refused(result, path)


def test_tensorboard_conversion_refuses_deep_nesting_in_bounded_memory(tmp_path):
    (tmp_path / "r").mkdir()
    shutil.copy(BAD / "rel_deep.pt.trace.json", tmp_path / "r" / "host.pt.trace.json")
    result = hloscope("tensorboard", tmp_path / "r", "--port", "1", timeout=120, memory_limit=2 << 30)
    _no_traceback(result)
    assert result.code == 2 and "nested" in result.stderr, result.stderr


# ---------------------------------------------------------------------------------------- 5. values range-checked


# JSON has no NaN or infinity (RFC 8259): a file with those tokens is not JSON and is refused (the next test); any
# number JSON can hold, however impossible as a duration, is skipped with a count.
@given(durations=st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-10**6, 10**6)),
                          min_size=1, max_size=6))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_impossible_kineto_durations_are_skipped_with_one_counted_warning(tmp_path, durations):
    path = tmp_path / "t.pt.trace.json"
    names = [f"k{i}" for i in range(len(durations))] + ["good"]
    _kineto(path, names, [float(d) for d in durations] + [50.0])
    from hloscope.trace import load

    load._warned.clear()
    trace = load.load_trace(path)
    kept = [e for e in trace.events if e.is_device_exec]
    bad = sum(1 for d in durations if not (0 <= d <= load.MAX_EVENT_US))
    assert trace.events.skipped == bad
    assert all(0 <= e.dur_us <= load.MAX_EVENT_US for e in kept)


def test_non_json_infinity_is_refused_naming_the_file_line_and_column(tmp_path):
    path = tmp_path / "t.pt.trace.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": Infinity}]}')
    result = hloscope("trace", "stats", path, timeout=120)
    _no_traceback(result)
    assert result.code == 2 and f"{path}:1:" in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_negative_durations_never_give_negative_device_time(tmp_path):
    path = _kineto(tmp_path / "t.pt.trace.json", ["a", "b", "c"], [-300.0, 1e308, 100.0])
    result = hloscope("trace", "stats", "--json", path, timeout=120)
    _no_traceback(result)
    assert result.code == 0, result.stderr
    (stats,) = json.loads(result.stdout)["traces"]
    assert stats["device_time_us"] == 100.0
    warnings = [line for line in result.stderr.splitlines() if line]
    assert len(warnings) == 1 and "2 event(s)" in warnings[0], result.stderr


def test_run_json_is_strict_json_even_with_a_nan_clock(tmp_path):
    from hloscope.runs import rundir

    rundir.write_run(tmp_path, {"timing": {"median_s": math.nan, "steps": [1.0, math.inf]}})
    text = (tmp_path / "run.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["timing"] == {"median_s": None, "steps": [1.0, None]}


# ------------------------------------------------------------------------------------------ 6. faults in compare


def _fake_compare(tmp_path, monkeypatch, outcomes):
    """run_comparison with each mode's child replaced: `outcomes[mode]` is a status to record, or 'sigterm' to have
    the parent receive SIGTERM while that mode runs."""
    import signal

    from hloscope.backends.base import RunOptions
    from hloscope.runs import rundir
    from hloscope.runs import runner as compare_runner

    def fake_run_mode(options, comparison_dir, timeout_s=None, on_poll=None, name=None):
        run = comparison_dir / options.mode
        run.mkdir()
        what = outcomes[options.mode]
        if what == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        rundir.write_run(run, {"schema_version": 1, "mode": options.mode, "status": what, "error": None,
                               "timing": {"step_times_s": [0.01] * 20, "median_s": 0.01}})
        return None

    monkeypatch.setattr(compare_runner, "run_mode", fake_run_mode)
    monkeypatch.setattr(compare_runner, "settle_run", lambda options, d, outcome, status="failed", reason=None, name=None:
                        {**rundir._read_json(d / options.mode / "run.json", "run.json"), "_dir": str(d / options.mode)}
                        if (d / options.mode / "run.json").exists() else
                        {"mode": options.mode, "status": status, "error": reason, "_dir": str(d / options.mode)})
    monkeypatch.setattr(compare_runner, "get_mode", lambda mode: type("M", (), {"dir_name": mode})(), raising=False)
    options = lambda mode: RunOptions(mode=mode)  # noqa: E731
    return compare_runner.run_comparison(list(outcomes), options, tmp_path, {})


def test_every_mode_failed_is_failed_not_partial(tmp_path, monkeypatch):
    comparison = _fake_compare(tmp_path, monkeypatch, {"jax": "failed", "pytorch": "failed"})
    assert comparison["status"] == "failed"
    assert json.loads((tmp_path / "comparison.json").read_text())["status"] == "failed"


def test_sigterm_to_compare_is_handled_like_ctrl_c_and_keeps_finished_runs(tmp_path, monkeypatch):
    with pytest.raises(KeyboardInterrupt):
        _fake_compare(tmp_path, monkeypatch, {"jax": "ok", "pytorch": "sigterm", "torch_xla": "ok"})
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert comparison["status"] == "interrupted"
    assert next((e["mode"], e["status"]) for e in comparison["modes"]) == ("jax", "ok")
    assert {e["mode"] for e in comparison["modes"]} == {"jax", "pytorch", "torch_xla"}


def test_tensorboard_never_follows_symlinks_out_of_its_directory(tmp_path):
    from hloscope.tensorboard.logdir import find_sessions

    profile = tmp_path / "runs" / "jax" / "plugins" / "profile" / "s1"
    profile.mkdir(parents=True)
    (profile / "host.xplane.pb").symlink_to("/etc/hostname")
    (tmp_path / "runs" / "jax" / "x.pt.trace.json").symlink_to("/etc/hostname")
    from hloscope.errors import InputError

    with pytest.raises(InputError, match="no profiles found"):
        find_sessions(tmp_path / "runs")


# ------------------------------------------------------------------------------ 7. explain on a corrupt trace


@needs_fixtures
def test_explain_names_a_corrupt_trace_on_stderr_with_exit_2(tmp_path):
    run = good_run(tmp_path / "runs")
    trace = next((run / "plugins").rglob("*.xplane.pb"))
    trace.write_bytes(trace.read_bytes()[:1000])
    result = hloscope("explain", run.parent, timeout=180)
    _no_traceback(result)
    assert result.code == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("hloscope: error:")]
    assert len(errors) == 1 and str(trace) in errors[0], result.stderr
