"""Small inputs that would make a reader do unbounded work: each finishes in bounded time and memory, with its result
or a one-line refusal naming the file (docs/reliability.md, "Bounds on what a file may make hloscope do")."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from helpers import assert_refused, hloscope

from hloscope.hlo import xla
from hloscope.hlo.load import load_modules
from hloscope.limits import MAX_XPLANE_EXPANDED_BYTES
from hloscope.trace.xplane_proto import xspace_class

# Enough for the interpreter, pyarrow and the protobuf runtime; far below what copying the names per event would take.
XPLANE_MEMORY_LIMIT = 3 << 30


def _xplane_with_shared_names(path: Path, events: int, name_bytes: int) -> Path:
    """A device plane and a host plane whose events all refer to one long name, and carry a stat whose value refers
    to another long name (the stat metadata), as XProf's writer stores names: once, by id."""
    space = xspace_class()()
    for plane_name, line_name in (("/device:GPU:0", "Stream #7"), ("/host:CPU", "python3")):
        plane = space.planes.add(name=plane_name, id=1)
        plane.event_metadata[1].id = 1
        plane.event_metadata[1].name = "k" * name_bytes
        for stat_id, stat_name in ((1, "hlo_op"), (2, "h" * name_bytes), (3, "correlation_id")):
            plane.stat_metadata[stat_id].id = stat_id
            plane.stat_metadata[stat_id].name = stat_name
        line = plane.lines.add(name=line_name, id=1, timestamp_ns=1_000)
        for index in range(events):
            event = line.events.add(metadata_id=1, offset_ps=index * 2_000_000, duration_ps=1_000_000)
            event.stats.add(metadata_id=1, ref_value=2)
            event.stats.add(metadata_id=3, int64_value=index)
    path.write_bytes(space.SerializeToString())
    return path


@pytest.mark.parametrize("command", ["stats", "export"])
def test_xplane_whose_events_all_refer_to_one_huge_name_is_refused(tmp_path, command):
    # 2 planes x 2,000 events x two 1 MB names: a 4 MB file that is 8 GB of names if each event had its own copy
    trace = _xplane_with_shared_names(tmp_path / "bomb.xplane.pb", 2_000, 1 << 20)
    assert trace.stat().st_size < 5 << 20
    outs = [tmp_path / "out", "--no-progress", "-j1"] if command == "export" else []
    started = time.monotonic()
    result = hloscope("trace", command, trace, *outs, timeout=60, memory_limit=XPLANE_MEMORY_LIMIT)
    assert_refused(result, trace, words=("names and text",))
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("command", ["stats", "export"])
def test_xplane_with_long_shared_names_below_the_bound_is_read(tmp_path, command):
    # 2 planes x 500 events x two 64 KB names: 128 MB counted per event, each name held once
    trace = _xplane_with_shared_names(tmp_path / "long.xplane.pb", 500, 64 << 10)
    assert MAX_XPLANE_EXPANDED_BYTES > 2 * 500 * 2 * (64 << 10)
    out = tmp_path / "out"
    outs = [out, "--no-progress", "-j1"] if command == "export" else ["--json"]
    result = hloscope("trace", command, trace, *outs, timeout=60, memory_limit=XPLANE_MEMORY_LIMIT)
    assert result.code == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    if command == "export":
        import pyarrow.parquet as pq

        (exported,) = out.glob("rank=*/*.parquet")
        table = pq.read_table(exported, columns=["name", "hlo_op"])
        assert table.num_rows == 1_000
        assert set(table.column("name").to_pylist()) == {"k" * (64 << 10)}


def _nested_fusions(path: Path, depth: int) -> Path:
    """A GPU module whose fused computations each call the level below twice: 2**depth paths to the innermost one."""
    lines = ["HloModule nested", "", "fused_0 {", "  p = f32[8] parameter(0)", "  ROOT a = f32[8] add(p, p)", "}", ""]
    for level in range(1, depth + 1):
        lines += [f"fused_{level} {{", "  p = f32[8] parameter(0)",
                  f"  x = f32[8] fusion(p), kind=kLoop, calls=fused_{level - 1}",
                  f"  ROOT y = f32[8] fusion(x), kind=kLoop, calls=fused_{level - 1}", "}", ""]
    lines += ["ENTRY main {", "  p = f32[8] parameter(0)", f"  ROOT r = f32[8] fusion(p), kind=kLoop, calls=fused_{depth}",
              "}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_roofline_of_deeply_nested_fusions_is_linear(tmp_path):
    from helpers import GOOD_DUMP, fixture

    module = _nested_fusions(tmp_path / "module_0001.nested.sm_9.0a_gpu_after_optimizations.txt", 60)
    target = next(fixture(GOOD_DUMP).glob("*gpu_target_config.pbtxt"))
    (tmp_path / "module_0001.nested.gpu_target_config.pbtxt").write_bytes(target.read_bytes())
    started = time.monotonic()
    result = hloscope("hlo", "stats", "--no-xla-cost", "--json", module, timeout=60)
    assert result.code == 0, result.stderr[-2000:]
    assert time.monotonic() - started < 20
    assert '"roofline"' in result.stdout


def _nested_calls(depth: int) -> str:
    """A module whose computations each call the level below twice: XLA's cost analysis is exponential in the depth."""
    lines = ["HloModule calls", "", "c_0 {", "  p = f32[8] parameter(0)", "  ROOT a = f32[8] add(p, p)", "}", ""]
    for level in range(1, depth + 1):
        lines += [f"c_{level} {{", "  p = f32[8] parameter(0)", f"  x = f32[8] call(p), to_apply=c_{level - 1}",
                  f"  ROOT y = f32[8] call(x), to_apply=c_{level - 1}", "}", ""]
    lines += ["ENTRY main {", "  p = f32[8] parameter(0)", f"  ROOT r = f32[8] call(p), to_apply=c_{depth}", "}"]
    return "\n".join(lines) + "\n"


def test_xla_cost_analysis_past_its_time_limit_is_one_warning(tmp_path, monkeypatch):
    module = tmp_path / "calls.hlo"
    module.write_text(_nested_calls(40))  # XLA's analysis would take days
    monkeypatch.setenv("HLOSCOPE_XLA_TIMEOUT_S", "3")
    started = time.monotonic()
    result = hloscope("hlo", "stats", "--json", module, timeout=60)
    assert time.monotonic() - started < 30
    assert result.code == 0, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hloscope: warning: ") and str(module) in lines[0], result.stderr
    assert "did not finish in 3 s" in lines[0]

    (record,) = json.loads(result.stdout)["modules"]
    assert "did not finish" in record["xla_cost"]["error"]
    assert record["computations"] == 42 and record["flops"] > 0  # hloscope's own figures are all there


def test_xla_cost_analysis_of_many_modules_runs_in_one_child(tmp_path, monkeypatch):
    crash = "HloModule crash\n\nENTRY e {\n  p = f32[2,3] parameter(0)\n  ROOT r = f32[7] reshape(p)\n}\n"
    for index in range(30):
        text = (crash if index == 10 else
                f"HloModule m{index}\n\nENTRY e {{\n  p = f32[{index + 1}] parameter(0)\n"
                f"  ROOT a = f32[{index + 1}] add(p, p)\n}}\n")
        (tmp_path / f"module_{index:04d}.m{index}.before_optimizations.txt").write_text(text)
    started: list[object] = []
    real_init = xla._Worker.__init__

    def counting_init(self):
        started.append(self)
        real_init(self)

    monkeypatch.setattr(xla._Worker, "__init__", counting_init)
    modules = load_modules(tmp_path)
    figures = {loaded.module.name: figure for loaded, figure in zip(modules, xla.xla_cost_analyses(modules))}
    assert len(started) == 2  # one child, and one more after the module that crashed it
    assert "crashed" in figures.pop("crash")["error"]
    assert {name: figure["flops"] for name, figure in figures.items()} == {
        f"m{index}": float(index + 1) for index in range(30) if index != 10}


@pytest.fixture
def stranger():
    """start(reply) -> the address of a TCP server on 127.0.0.1 that accepts every connection and sends `reply`
    (nothing: it stays silent)."""
    servers: list[socket.socket] = []

    def start(reply: bytes) -> str:
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)
        accepted: list[socket.socket] = []

        def serve() -> None:
            while True:
                try:
                    connection, _ = server.accept()
                except OSError:  # closed at the end of the test
                    return
                accepted.append(connection)
                if reply:
                    connection.sendall(reply)

        threading.Thread(target=serve, daemon=True).start()
        return f"tcp://127.0.0.1:{server.getsockname()[1]}"

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("reply", [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" * 4],
                         ids=["silent", "http"])
def test_scheduler_address_where_no_dask_scheduler_answers_is_one_line(stranger, monkeypatch, reply):
    from helpers import KINETO_FIXTURE, fixture

    address = stranger(reply)
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", "3s")
    started = time.monotonic()
    result = hloscope("trace", "stats", fixture(KINETO_FIXTURE), "--scheduler", address, timeout=40)
    assert_refused(result, address, words=("cannot connect to a Dask scheduler",))
    assert time.monotonic() - started < 35
