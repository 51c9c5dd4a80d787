"""Kineto -> XSpace conversion, checked with XProf's and JAX's own readers on real GPU traces, and the run naming; what
the view leaves out: a trace nested too deeply (refused in bounded memory), files a symlink points to outside the
directory, and runs whose traces are all broken (one warning each, then one error)."""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from helpers import BAD, assert_no_traceback, hloscope

from hloscope.errors import InputError
from hloscope.render.progress import PhaseProgressBar
from hloscope.tensorboard import convert
from hloscope.tensorboard.convert import convert_kineto_file, host_name
from hloscope.tensorboard.logdir import ViewLogdir, find_sessions
from hloscope.trace.xplane_proto import PROTO_FILE, xspace_class

# A100 Kineto trace from HolisticTraceAnalysis (SOURCES.md: 1,408 events, 79 kernels, streams 7 and 20).
ALEXNET = "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"


def load_json(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def alexnet(fixtures_dir, tmp_path_factory):
    source = fixtures_dir / ALEXNET
    xplane, conversion = convert_kineto_file(source, tmp_path_factory.mktemp("alexnet"))
    return source, xplane, conversion


def profile_events(xplane: Path) -> list[tuple[str, str, str, float, dict]]:
    from jax.profiler import ProfileData

    data = ProfileData.from_file(str(xplane))
    return [
        (plane.name, line.name, event.name, event.duration_ns, dict(event.stats))
        for plane in data.planes
        for line in plane.lines
        for event in line.events
    ]


def test_xspace_class_is_xprofs_schema():
    xspace = xspace_class()
    assert xspace.DESCRIPTOR.full_name == "tensorflow.profiler.XSpace"
    assert xspace.DESCRIPTOR.file.name == PROTO_FILE
    event_fields = {f.name: f.number for f in xspace.DESCRIPTOR.fields_by_name["planes"].message_type.fields}
    assert event_fields == {"id": 1, "name": 2, "lines": 3, "event_metadata": 4, "stat_metadata": 5, "stats": 6}


def test_every_complete_event_is_converted(alexnet):
    source, xplane, conversion = alexnet
    raw = load_json(source)["traceEvents"]
    complete = [e for e in raw if e.get("ph") == "X"]
    events = profile_events(xplane)
    assert conversion.events == len(complete) == len(events)
    assert Counter(name for _, _, name, _, _ in events) == Counter(e["name"] for e in complete)
    # Flow arrows and global instant markers are what is left out, and they are counted.
    assert conversion.dropped == Counter(e["ph"] for e in raw if e.get("ph") in ("s", "f") or e.get("s") == "g")


def test_gpu_plane_has_streams_kernels_and_device_properties(alexnet):
    from jax.profiler import ProfileData

    source, xplane, _ = alexnet
    raw = load_json(source)
    planes = {plane.name: plane for plane in ProfileData.from_file(str(xplane)).planes}
    assert set(planes) == {"/host:CPU", "/device:GPU:0"}
    gpu = planes["/device:GPU:0"]
    stats = dict(gpu.stats)
    properties = raw["deviceProperties"][0]
    assert stats["device_name"] == properties["name"] == "NVIDIA A100-PG509-200"
    assert (stats["compute_cap_major"], stats["compute_cap_minor"], stats["core_count"]) == (8, 0, 108)
    assert {"Stream #7", "Stream #20"} <= {line.name for line in gpu.lines}
    kernels = [e for line in gpu.lines for e in line.events if dict(e.stats).get("kineto_category") == "kernel"]
    assert len(kernels) == 79
    # Correlation ids survive under XProf's name, so a kernel can be matched to its cudaLaunchKernel.
    raw_kernels = {(e["name"], e["args"]["correlation"]) for e in raw["traceEvents"] if e.get("cat") == "kernel"}
    assert {(e.name, dict(e.stats)["correlation_id"]) for e in kernels} == raw_kernels


def test_xprof_trace_viewer_shows_every_event_with_a_duration(alexnet):
    from xprof.convert import raw_to_tool_data

    _, xplane, _ = alexnet
    data, content_type = raw_to_tool_data.xspace_to_tool_data([str(xplane)], "trace_viewer", {})
    assert content_type == "application/json"
    trace = json.loads(data)["traceEvents"]
    lines = {(e["pid"], e.get("tid")): e["args"]["name"] for e in trace if e.get("name") == "thread_name"}
    derived = {key for key, name in lines.items() if name.startswith("Framework Ops")}
    shown = Counter(e["name"] for e in trace if e.get("ph") == "X" and (e["pid"], e.get("tid")) not in derived)
    # XProf's trace viewer leaves out zero-length events (docs/tensorboard.md); every other event is drawn.
    expected = Counter(name for _, _, name, duration, _ in profile_events(xplane) if duration > 0)
    assert shown == expected
    assert sum(shown.values()) == 728
    # From the kernels' `tf_op` (the aten op around each launch) XProf derives a "Framework Ops" line on the GPU.
    framework = Counter(e["name"] for e in trace if e.get("ph") == "X" and (e["pid"], e.get("tid")) in derived)
    assert framework and set(framework) <= {n for _, _, n, _, s in profile_events(xplane) if s.get("kineto_category") == "cpu_op"}


def test_xprof_kernel_stats_read_the_launch_details(alexnet):
    from xprof.convert import raw_to_tool_data

    source, xplane, _ = alexnet
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(xplane)], "kernel_stats", {})
    table = json.loads(data)
    columns = [c["id"] for c in table["cols"]]
    rows = [dict(zip(columns, (cell["v"] for cell in row["c"]))) for row in table["rows"]]
    assert sum(row["occurrences"] for row in rows) == 79
    launches = Counter(
        (e["name"], e["args"]["registers per thread"], e["args"]["shared memory"], ",".join(map(str, e["args"]["grid"])),
         ",".join(map(str, e["args"]["block"])))
        for e in load_json(source)["traceEvents"] if e.get("cat") == "kernel"
    )  # fmt: skip
    reported = Counter({(r["kernel_name"], r["registers_per_thread"], r["shmem_bytes"], r["grid_dim"], r["block_dim"]):
                        r["occurrences"] for r in rows})  # fmt: skip
    assert reported == launches


def test_times_start_at_zero_and_keep_the_wall_clock_start(alexnet):
    from jax.profiler import ProfileData

    source, xplane, _ = alexnet
    first_us = min(e["ts"] for e in load_json(source)["traceEvents"] if e.get("ph") == "X")
    data = ProfileData.from_file(str(xplane))
    host = next(plane for plane in data.planes if plane.name == "/host:CPU")
    assert dict(host.stats)["kineto_start_time_ns"] == round(first_us * 1000)
    assert min(e.start_ns for p in data.planes for line in p.lines for e in line.events) == 0


def test_host_name_from_trace_handler_file_names():
    assert host_name(Path("vm_9398.1796011551657941891.pt.trace.json")) == "vm_9398"
    assert host_name(Path("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")) == "rank-0"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b'{"traceEvents": [{"ph": "X", ', "truncated JSON"),
        (b'{"other": 1}', "no 'traceEvents'"),
        (b'{"traceEvents": [{"ph": "X", "name": "op", "ts": "soon", "dur": 1}]}', "complete event 0 has no numeric 'ts'/'dur'"),
    ],
)
def test_bad_kineto_file_is_one_input_error_naming_it(tmp_path, content, message):
    bad = tmp_path / "worker.1.pt.trace.json"
    bad.write_bytes(content)
    with pytest.raises(InputError) as error:
        convert_kineto_file(bad, tmp_path / "out")
    assert str(bad) in str(error.value) and message in str(error.value)
    assert not (tmp_path / "out").exists()


def test_corrupt_gzip_is_an_input_error(tmp_path, fixtures_dir):
    truncated = tmp_path / "worker.1.pt.trace.json.gz"
    truncated.write_bytes((fixtures_dir / ALEXNET).read_bytes()[:5000])
    with pytest.raises(InputError, match=r"worker\.1\.pt\.trace\.json\.gz"):
        convert_kineto_file(truncated, tmp_path / "out")


# --- run naming: what the profile plugin will list ------------------------------------------------------------------


def make_layout(root: Path, files: list[str]) -> None:
    for relative in files:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(b"")


COMPARISON = [
    "cmp/comparison.json",
    "cmp/jax/run.json",
    "cmp/jax/plugins/profile/2026_11_30_04_05_52/vm.xplane.pb",
    "cmp/jax/plugins/profile/2026_11_30_04_05_52/vm.trace.json.gz",
    "cmp/torch_xla/plugins/profile/2026_11_30_04_06_00/vm.xplane.pb",
    "cmp/pytorch/kineto/vm_1.17960.pt.trace.json",
    "cmp/pytorch_compile/kineto/vm_2.17961.pt.trace.json.gz",
    "single/plugins/profile/2026_11_30_05_00_00/vm.xplane.pb",
]


def test_runs_are_named_mode_slash_comparison(tmp_path):
    make_layout(tmp_path, COMPARISON)
    names = {s.name: s.format for s in find_sessions(tmp_path)}
    assert names == {"jax/cmp": "xplane", "torch_xla/cmp": "xplane", "pytorch/cmp": "kineto",
                     "pytorch+compile/cmp": "kineto", "single": "xplane"}  # fmt: skip
    # Pointed at the comparison itself, or at one of its runs, the names stay the same.
    assert {s.name for s in find_sessions(tmp_path / "cmp")} == {"jax/cmp", "torch_xla/cmp", "pytorch/cmp",
                                                                 "pytorch+compile/cmp"}  # fmt: skip
    assert [s.name for s in find_sessions(tmp_path / "cmp" / "jax")] == ["jax/cmp"]


def test_runs_are_named_by_mode_not_by_folder(tmp_path):
    make_layout(tmp_path, ["cmp/comparison.json", "cmp/torch_xla_compile-2dev/plugins/profile/2026_a/vm.xplane.pb",
                           "cmp/renamed/plugins/profile/2026_a/vm.xplane.pb", "cmp/other/plugins/profile/2026_a/vm.xplane.pb",
                           "cmp/pytorch_compile-r2/kineto/vm_2.2.pt.trace.json",
                           "pytorch_compile-20261130-041910/kineto/vm_1.1.pt.trace.json"])  # fmt: skip
    record = '{"schema_version": 1, "run_id": "r", "mode": "pytorch+compile", "status": "ok", "config": {}}'
    (tmp_path / "cmp/renamed/run.json").write_text(record)  # a --run-id of the user's choice
    (tmp_path / "pytorch_compile-20261130-041910/run.json").write_text(record)
    assert {s.name for s in find_sessions(tmp_path)} == {"torch_xla+compile-2dev/cmp", "renamed/cmp", "other/cmp",
                                                         "pytorch+compile-r2/cmp",
                                                         "pytorch+compile-20261130-041910"}  # fmt: skip
    assert [s.name for s in find_sessions(tmp_path / "pytorch_compile-20261130-041910")] == [
        "pytorch+compile-20261130-041910"]


def test_several_sessions_of_one_run_keep_their_session_names(tmp_path):
    make_layout(tmp_path, ["cmp/jax/plugins/profile/2026_a/vm.xplane.pb", "cmp/jax/plugins/profile/2026_b/vm.xplane.pb",
                           "cmp/jax/plugins/profile/2026_b/other.xplane.pb"])  # fmt: skip
    sessions = find_sessions(tmp_path)
    assert [(s.name, len(s.files)) for s in sessions] == [("jax/cmp/2026_a", 1), ("jax/cmp/2026_b", 2)]


def test_no_profiles_or_no_directory_is_an_input_error(tmp_path):
    make_layout(tmp_path, ["cmp/comparison.json", "cmp/jax/run.json"])
    with pytest.raises(InputError, match="no profiles found"):
        find_sessions(tmp_path)
    with pytest.raises(InputError, match="no such directory"):
        find_sessions(tmp_path / "missing")


def test_view_links_xplanes_and_skips_a_bad_kineto_trace(tmp_path, fixtures_dir):
    make_layout(tmp_path / "src", ["cmp/jax/plugins/profile/2026_a/vm.xplane.pb",
                                   "cmp/pytorch_compile/kineto/broken.1.pt.trace.json"])  # fmt: skip
    kineto = tmp_path / "src/cmp/pytorch/kineto/rank-0.1.pt.trace.json.gz"
    kineto.parent.mkdir(parents=True)
    kineto.write_bytes((fixtures_dir / ALEXNET).read_bytes())
    before = sorted(p for p in (tmp_path / "src").rglob("*"))
    view = ViewLogdir(tmp_path / "src", tmp_path / "view")
    shown = view.sync()
    assert [s.name for s in shown] == ["jax/cmp", "pytorch/cmp"]
    assert list(view.problems) == ["pytorch+compile/cmp"]
    link = tmp_path / "view/jax/plugins/profile/cmp/vm.xplane.pb"
    assert link.is_symlink() and link.resolve() == (tmp_path / "src/cmp/jax/plugins/profile/2026_a/vm.xplane.pb")
    assert (tmp_path / "view/pytorch/plugins/profile/cmp/rank-0.xplane.pb").stat().st_size > 0
    assert not (tmp_path / "view/pytorch+compile/plugins/profile/cmp").exists()
    assert sorted(p for p in (tmp_path / "src").rglob("*")) == before  # nothing written next to the user's files


def test_view_follows_runs_added_and_removed(tmp_path):
    make_layout(tmp_path / "src", ["cmp/jax/plugins/profile/2026_a/vm.xplane.pb"])
    view = ViewLogdir(tmp_path / "src", tmp_path / "view")
    assert [s.name for s in view.sync()] == ["jax/cmp"]
    make_layout(tmp_path / "src", ["cmp/torch_xla/plugins/profile/2026_b/vm.xplane.pb"])
    assert [s.name for s in view.sync()] == ["jax/cmp", "torch_xla/cmp"]
    shutil.rmtree(tmp_path / "src/cmp/jax")
    assert [s.name for s in view.sync()] == ["torch_xla/cmp"]
    assert not (tmp_path / "view/jax/plugins/profile/cmp").exists()
    assert (tmp_path / "view/torch_xla/plugins/profile/cmp").is_dir()


def test_trace_with_more_events_than_the_conversion_may_hold_is_refused_before_converting(tmp_path, monkeypatch):
    monkeypatch.setattr(convert, "MAX_XSPACE_EVENTS", 1_000)
    events = ",".join(f'{{"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": {i}, "dur": 1}}' for i in range(1_001))
    many = tmp_path / "worker.1.pt.trace.json"
    many.write_text(f'{{"traceEvents": [{events}]}}')
    converted: list[object] = []
    monkeypatch.setattr(convert, "kineto_to_xspace", lambda *args: converted.append(args))
    with pytest.raises(InputError) as error:
        convert_kineto_file(many, tmp_path / "out")
    assert str(many) in str(error.value) and "more than 1,000" in str(error.value)
    assert not converted and not (tmp_path / "out").exists()
    # the conversion's own count holds as well (events the streaming check does not count)
    _, stream = convert.read_kineto(many)
    with pytest.raises(InputError, match="too many events"):
        for _ in stream:
            pass


def _terminal():
    """A terminal (colourless, so that its text reads plainly), the conversion's progress bar on it, and what it
    shows."""
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=120)
    return console, PhaseProgressBar(console), out


def _handed_back(console, out: io.StringIO) -> bool:
    """The bar is gone from the terminal: the cursor is shown again, and a line printed next is the last thing on it
    (a bar still running would be drawn again below it)."""
    console.print("next line")
    text = out.getvalue()
    return text.rfind("\x1b[?25h") > text.rfind("\x1b[?25l") and text.endswith("next line\n")


def test_conversion_shows_its_phases_and_bytes_read(tmp_path, monkeypatch):
    monkeypatch.setattr(convert, "PROGRESS_EVERY", 100)
    events = ",".join(f'{{"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": {i}, "dur": 1}}' for i in range(1_000))
    trace = tmp_path / "worker.1.pt.trace.json"
    trace.write_text(f'{{"traceEvents": [{events}], "baseTimeNanoseconds": 5}}')
    console, bar, out = _terminal()
    convert_kineto_file(trace, tmp_path / "out", bar)
    text = out.getvalue()
    # one phase after the other: the events checked, the header, the bytes converted, the file written
    shown = [text.find(line) for line in ("checking worker.1.pt.trace.json (events) 1,000",
                                          "reading worker.1.pt.trace.json's header",
                                          "converting worker.1.pt.trace.json to XSpace", "writing worker.xplane.pb")]
    assert -1 not in shown and shown == sorted(shown), text
    read = re.findall(r"to XSpace \S* (\d+\.\d)/(\d+\.\d) kB", text)
    total = f"{trace.stat().st_size / 1000:.1f}"
    assert read and all(size == total for _, size in read), text
    assert 0 < float(read[-1][0]) <= float(total), text
    assert _handed_back(console, out), text


def test_conversion_stops_its_progress_on_bad_input(tmp_path):
    bad = tmp_path / "worker.1.pt.trace.json"
    bad.write_text('{"traceEvents": [')
    console, bar, out = _terminal()
    with pytest.raises(InputError):
        convert_kineto_file(bad, tmp_path / "out", bar)
    assert "checking worker.1.pt.trace.json (events)" in out.getvalue()
    assert _handed_back(console, out), out.getvalue()


def test_phase_progress_bar_draws_each_phase_on_its_console():
    from rich.console import Console

    out = io.StringIO()
    bar = PhaseProgressBar(Console(file=out, force_terminal=True, width=100))
    bar.phase("checking trace.json (events)", None)
    bar.update(40_000)
    bar.phase("converting trace.json to XSpace", 2_000_000)
    bar.update(1_000_000)
    bar.stop()
    bar.stop()  # twice: nothing left to stop
    text = out.getvalue()
    assert "checking trace.json" in text and "converting trace.json to XSpace" in text and "1.0/2.0 MB" in text


def test_tensorboard_conversion_refuses_deep_nesting_in_bounded_memory(tmp_path):
    (tmp_path / "r").mkdir()
    shutil.copy(BAD / "rel_deep.pt.trace.json", tmp_path / "r" / "host.pt.trace.json")
    result = hloscope("tensorboard", tmp_path / "r", "--port", "1", timeout=120, memory_limit=2 << 30)
    assert_no_traceback(result)
    assert result.code == 2 and "nested" in result.stderr, result.stderr


def test_tensorboard_never_follows_symlinks_out_of_its_directory(tmp_path):
    profile = tmp_path / "runs" / "jax" / "plugins" / "profile" / "s1"
    profile.mkdir(parents=True)
    (profile / "host.xplane.pb").symlink_to("/etc/hostname")
    (tmp_path / "runs" / "jax" / "x.pt.trace.json").symlink_to("/etc/hostname")

    with pytest.raises(InputError, match="no profiles found"):
        find_sessions(tmp_path / "runs")


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
