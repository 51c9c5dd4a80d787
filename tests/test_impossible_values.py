"""Impossible values in files that are otherwise readable never become printed figures: each is refused in one line
naming the file (line:column for text), or left out with one warning line per file that names it and counts every
class found (docs/reliability.md, "Impossible values").

1. XLA thunk files: launch grids, blocks and shared memory outside CUDA's limits
2. HLO shapes whose element count or byte size overflows 64 bits (XLA's own rule)
3. xplanes: negative offsets and durations, day-long durations, lines with a negative timestamp
4. Kineto JSON: negative and day-long durations, beside step markers beyond 64 bits: still one line
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import assert_refused, fixture, hloscope

from hloscope.errors import InputError
from hloscope.hlo.shapes import parse_shape
from hloscope.hlo.thunks import parse_thunk_sequence_text
from hloscope.trace.xplane_proto import xspace_class


def _one_warning(stderr: str, path: Path, *words: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr:\n{stderr}"
    assert lines[0].startswith("hloscope: warning: ") and str(path) in lines[0], lines[0]
    for word in words:
        assert word in lines[0], f"{word!r} not in: {lines[0]}"
    return lines[0]


# ------------------------------------------------------------------------------------------------- 1. thunk files

_LAUNCH = ("002: kCustomKernel [source | next=005 (3)] loop_pad_fusion grid: [{grid}] threads: [{block}]  "
           "shared_memory: {shmem} bytes\n")


def _launch(grid: str = "800, 1, 1", block: str = "128, 1, 1", shmem: str = "0") -> str:
    return _LAUNCH.format(grid=grid, block=block, shmem=shmem)


@pytest.mark.parametrize("launch, at, words", [
    (_launch(grid="-800, 1, 1"), "grid: [", "grid x of -800"),
    (_launch(grid="800, 0, 1"), "grid: [800, ", "grid y of 0"),
    (_launch(grid="2147483648, 1, 1"), "grid: [", "grid x of 2,147,483,648"),
    (_launch(grid="1, 65536, 1"), "grid: [1, ", "grid y of 65,536"),
    (_launch(block="0, 1, 1"), "threads: [", "block x of 0"),
    (_launch(block="1, 1, 65"), "threads: [1, 1, ", "block z of 65"),
    (_launch(block="128, 16, 1"), "threads: [", "2,048 threads"),
    (_launch(shmem="-1"), "shared_memory: ", "shared memory of -1 bytes"),
    (_launch(shmem="99999999999"), "shared_memory: ", "shared memory of 99,999,999,999 bytes"),
    (_launch(grid="1e30, 1, 1"), "grid: [", "grid x '1e30' is not a whole number"),
    (_launch(block="1, " + "9" * 5000 + ", 1"), "threads: [1, ", "of 5000 digits"),
])
def test_a_launch_outside_cuda_limits_is_refused_at_its_column(launch, at, words):
    with pytest.raises(InputError) as raised:  # ParseError, or bounded_int's InputError at line:col
        parse_thunk_sequence_text("001: kCopy [source | next=002 (1)] kCopy\n" + launch, "t.thunk_sequence.txt")
    error = raised.value
    assert (error.line, error.col) == (2, launch.index(at) + len(at) + 1), str(error)
    assert words in str(error), str(error)


def test_launches_at_cuda_limits_are_read():
    seq = parse_thunk_sequence_text(_launch(grid="2147483647, 65535, 65535", block="1, 1, 64", shmem=str(228 << 10)))
    (thunk,) = seq.thunks
    assert thunk.grid == (2147483647, 65535, 65535) and thunk.block == (1, 1, 64)
    assert thunk.shared_memory_bytes == 228 << 10


def _gpu_module_with_thunks(tmp_path: Path, edit) -> tuple[Path, Path]:
    """A real XLA GPU dump (module, its reports, its thunk_sequence.txt) with the first launch of its thunk file
    edited by `edit(line) -> line`."""
    source = fixture("gpu_aot/mlp_sm90_triton")
    for file in source.glob("module_0001.*"):
        shutil.copy(file, tmp_path / file.name)
    (thunks,) = tmp_path.glob("*.thunk_sequence.txt")
    (module,) = tmp_path.glob("*gpu_after_optimizations.txt")
    lines = thunks.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "grid:" in line)
    lines[first] = edit(lines[first])
    thunks.write_text("".join(lines))
    return module, thunks


@pytest.mark.parametrize("edit, words", [
    (lambda line: re.sub(r"grid: \[\d+", "grid: [-6", line), "grid x of -6"),
    (lambda line: re.sub(r"threads: \[\d+", "threads: [0", line), "block x of 0"),
    (lambda line: re.sub(r"shared_memory: \d+", "shared_memory: 1073741824", line), "1,073,741,824 bytes"),
])
def test_hlo_stats_names_a_thunk_file_with_an_impossible_launch_and_keeps_the_module(tmp_path, edit, words):
    module, thunks = _gpu_module_with_thunks(tmp_path, edit)
    result = hloscope("hlo", "stats", "--json", "--launches", "--no-xla-cost", module, timeout=180)
    assert result.code == 0 and "Traceback" not in result.stderr, result.stderr
    line = _one_warning(result.stderr, thunks, words, "left out")
    assert re.search(re.escape(str(thunks)) + r":\d+:\d+: ", line), line
    (record,) = json.loads(result.stdout)["modules"]
    assert record["flops"] > 0  # the module's own figures stand
    assert set(record["thunk_sequence"]) == {"file", "error"}  # no launch, count or verdict from the broken file
    assert str(thunks) in record["thunk_sequence"]["error"]


# ------------------------------------------------------------------------------------------------------ 2. HLO shapes


@pytest.mark.parametrize("shape", ["f32[4611686018427387904,4]", "f32[9223372036854775807,9223372036854775807]",
                                   "f64[2305843009213693952]", "(f32[2], c128[1152921504606846976])"])
def test_a_shape_beyond_what_xla_can_hold_is_not_a_shape(shape):
    with pytest.raises(ValueError, match=r"64 bits|2\^63"):
        parse_shape(shape)


def test_the_largest_shape_xla_holds_is_read():
    assert parse_shape("s8[9223372036854775807]").byte_size == 2**63 - 1
    assert parse_shape("f32[1152921504606846975,2]").byte_size == 2**63 - 8


@pytest.mark.parametrize("dims", ["1e30", "4611686018427387904,4", "2305843009213693952,2,2"])
def test_hlo_stats_refuses_an_astronomical_shape_at_its_line_and_column(tmp_path, dims):
    path = tmp_path / "huge.hlo"
    path.write_text("HloModule m\n\nENTRY e {\n"
                    f"  p = f32[{dims}] parameter(0)\n"
                    f"  ROOT n = f32[{dims}] negate(p)\n}}\n")
    result = hloscope("hlo", "stats", "--no-xla-cost", path, timeout=120)
    line = assert_refused(result, path, position=True)
    assert f"{path}:4:" in line and result.stdout == ""


# ---------------------------------------------------------------------------------------------------------- 3. xplanes


def _xplane(path: Path, events: list[tuple[int, int]], timestamp_ns: int = 1_000_000) -> Path:
    """A GPU xplane with one stream line at `timestamp_ns`, one kernel per (offset_ps, duration_ps)."""
    space = xspace_class()()
    plane = space.planes.add(name="/device:GPU:0", id=1)
    plane.event_metadata[1].name = "fusion.1"
    line = plane.lines.add(name="Stream #7", id=1, timestamp_ns=timestamp_ns)
    for offset_ps, duration_ps in events:
        line.events.add(metadata_id=1, offset_ps=offset_ps, duration_ps=duration_ps)
    path.write_bytes(space.SerializeToString())
    return path


def test_xplane_events_with_impossible_times_are_left_out_with_one_line_naming_every_class(tmp_path):
    path = _xplane(tmp_path / "bad.xplane.pb", [
        (0, 2_000_000),  # the one real kernel: 2 us
        (-5_000_000, 1_000_000),  # before its line began
        (1_000, -3_000_000), (2_000, -1),  # negative durations
        (3_000, 10**18),  # 11 days
    ])
    result = hloscope("trace", "stats", "--json", path, timeout=120)
    assert result.code == 0, result.stderr
    _one_warning(result.stderr, path, "4 event(s)", "1 with a negative offset_ps", "2 with a negative duration_ps",
                 "1 with a duration_ps longer than a day")
    (stats,) = json.loads(result.stdout)["traces"]
    assert stats["device_time_us"] == 2.0


@pytest.mark.parametrize("events, timestamp_ns, words", [
    ([(-1, 1_000)], 1_000_000, "negative offset_ps"),
    ([(0, -1_000), (0, 10**17)], 1_000_000, "negative duration_ps"),
    ([(0, 1_000)], -5, "timestamp_ns is negative"),
])
def test_an_xplane_whose_every_event_is_impossible_is_refused(tmp_path, events, timestamp_ns, words):
    path = _xplane(tmp_path / "bad.xplane.pb", events, timestamp_ns)
    assert_refused(hloscope("trace", "stats", path, timeout=120), path, words=(words,))


# ---------------------------------------------------------------------------------------------------------- 4. Kineto


def test_kineto_impossible_durations_and_step_markers_are_one_counted_line(tmp_path):
    def kernel(name: str, ts: float, dur: float) -> dict:
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"stream": 7}}

    events = [kernel("neg", 10, -300), kernel("neg2", 20, -1), kernel("huge", 30, 1e300), kernel("good", 40, 100),
              {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#" + "9" * 30, "pid": 1, "tid": 1, "ts": 0,
               "dur": 500}]
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = hloscope("trace", "stats", "--json", path, timeout=120)
    assert result.code == 0, result.stderr
    _one_warning(result.stderr, path, "3 event(s)", "2 with a negative duration", "1 longer than a day",
                 "1 step marker(s) with a step number beyond 64 bits")
    (stats,) = json.loads(result.stdout)["traces"]
    assert stats["device_time_us"] == 100.0
