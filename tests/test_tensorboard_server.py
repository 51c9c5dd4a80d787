"""`hloscope tensorboard` end to end: a real TensorBoard + XProf on 127.0.0.1, asked over HTTP and by headless chromium."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import ARTIFACTS, CHROMIUM_FLAGS, EVERY_MODE_PROFILE_STEPS, chromium, command, hloscope, xprof_kept_steps

from hloscope.modes import MODES, get_mode
from hloscope.tensorboard import server

# compare's default modes (every registered mode; all are installed here): runs are named by mode (`pytorch+compile`)
MODE_NAMES = tuple(mode.name for mode in MODES)
A100_KINETO = "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
AMD_JAX_XPLANE = "tracelens/test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb"
URL_PREFIX = "TensorBoard "
READY_LINE = "Press Ctrl-C to stop."
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_json(url: str):
    """GET a plugin endpoint; TensorBoard gzips its responses."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with _NO_PROXY.open(request, timeout=120) as response:
        body = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    return json.loads(body)


def child_pids(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def is_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@contextmanager
def hloscope_tensorboard(directory: Path, *args: str, timeout_s: float = 180, host: str | None = "127.0.0.1"):
    """Run `hloscope tensorboard DIRECTORY ARGS` until it says it is ready; always killed (whole group) at the end.
    `host=None` leaves out --host (hloscope's default)."""
    # its own runner: the server is read while it runs, then stopped with Ctrl-C
    env = {**os.environ, "PJRT_DEVICE": "CPU"}
    process = subprocess.Popen(
        [sys.executable, "-m", "hloscope", "tensorboard", str(directory), *(["--host", host] if host else []), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout] and None, daemon=True).start()
    try:
        url, ready, stdout, deadline = None, False, [], time.monotonic() + timeout_s
        while not ready and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                if process.poll() is not None:
                    break
                continue
            stdout.append(line)
            if line.startswith(URL_PREFIX):
                url = line.rsplit(" ", 1)[1].strip()
            ready = line.strip() == READY_LINE
        assert url and ready, f"no URL printed; stdout={stdout!r} stderr={process.stderr.read() if process.poll() is not None else ''}"
        yield process, url.split("#")[0], stdout
    finally:
        if process.poll() is None:
            process.terminate()  # hloscope stops its TensorBoard and removes its temporary logdir
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        if process.poll() is None or child_pids(process.pid):
            os.killpg(process.pid, signal.SIGKILL)  # the group we started: hloscope and its TensorBoard child
        process.wait(timeout=30)


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


# --- real GPU traces copied from the fixtures: fast, no framework runs ------------------------------------------------


@pytest.fixture(scope="module")
def fixture_traces(fixtures_dir, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("traces")
    kineto = root / "gpu-cmp" / "pytorch" / "kineto" / "a100_1.1695835535.pt.trace.json.gz"
    kineto.parent.mkdir(parents=True)
    shutil.copy(fixtures_dir / A100_KINETO, kineto)
    xplane = root / "gpu-cmp" / "jax" / "plugins" / "profile" / "2025_01_01_00_00_00" / "mi355.xplane.pb"
    xplane.parent.mkdir(parents=True)
    shutil.copy(fixtures_dir / AMD_JAX_XPLANE, xplane)
    (root / "gpu-cmp" / "comparison.json").write_text('{"schema_version": 1}')
    # a CPU PyTorch run profiled with profile_memory=True: its allocation records, as torch 2.9 writes them
    records = [{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                "args": {"Total Reserved": 0, "Total Allocated": total, "Bytes": size, "Device Id": -1,
                         "Device Type": 0, "Addr": address}}
               for ts, size, total, address in ((10, 4096, 4096, 1), (11, 8192, 12288, 2), (12, -4096, 8192, 1))]
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 5, "dur": 20}
    memory = root / "gpu-cmp" / "pytorch_compile" / "kineto" / "cpu_2.1.pt.trace.json"
    memory.parent.mkdir(parents=True)
    memory.write_text(json.dumps({"traceEvents": [step, *records], "baseTimeNanoseconds": 1}))
    return root


def listening_addresses(port: int) -> set[str]:
    """Local addresses of the TCP sockets listening on `port`, from /proc/net/tcp and tcp6 (state 0A = LISTEN)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def test_gpu_traces_are_listed_and_the_kineto_one_is_readable(fixture_traces):
    before = tree_state(fixture_traces)
    with hloscope_tensorboard(fixture_traces, host=None) as (_, url, stdout):
        # Without --host, TensorBoard listens on 127.0.0.1 only (little-endian hex in /proc/net/tcp).
        assert listening_addresses(urllib.parse.urlsplit(url).port) == {"0100007F"}
        assert sorted(http_json(url + "data/plugin/profile/runs")) == ["jax/gpu-cmp", "pytorch+compile/gpu-cmp",
                                                                       "pytorch/gpu-cmp"]  # fmt: skip
        assert "pytorch/gpu-cmp" in "".join(stdout) and "Kineto -> XSpace" in "".join(stdout)
        tools = http_json(url + "data/plugin/profile/run_tools?run=pytorch/gpu-cmp")
        assert "trace_viewer@" in tools and "kernel_stats" in tools
        hosts = http_json(url + "data/plugin/profile/hosts?run=pytorch/gpu-cmp&tag=trace_viewer@")
        assert hosts == [{"hostname": "a100_1"}]
        query = urllib.parse.urlencode({"run": "pytorch/gpu-cmp", "tag": "trace_viewer@", "host": "a100_1"})
        trace = http_json(url + "data/plugin/profile/data?" + query)
        names = {e.get("name") for e in trace["traceEvents"]}
        assert "ampere_sgemm_32x32_sliced1x4_tn" in names  # a cuBLAS kernel of the A100 trace, on its stream line
        threads = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
        assert {"Stream #7", "Stream #20"} <= threads
        # the allocation records fill XProf's memory profile; the runs without any are named in the output
        memory = tool_data(url, "pytorch+compile/gpu-cmp", "memory_profile")
        summary = memory["memoryProfilePerAllocator"]["cpu"]["profileSummary"]
        assert memory["memoryIds"] == ["cpu"] and int(summary["peakStats"]["peakBytesInUse"]) == 12288
        output = " ".join(stdout)
        assert "memory profile: empty for these runs" in output and "www.gstatic.com" in output
        assert "profiled step" in output
    assert tree_state(fixture_traces) == before  # the plugin's caches went to the generated logdir, not here


# --- a tiny comparison with real traces of every mode, recorded by `hloscope compare --profile` ------------------------

PROFILE_STEPS = EVERY_MODE_PROFILE_STEPS


@pytest.fixture(scope="module")
def comparison(every_mode_comparison, tmp_path_factory) -> Path:
    """`hloscope compare --profile` on the tiny ViT (conftest's, shared): each mode in its own process, profiled by its
    framework's profiler; served from a copy, so that nothing the plugin or XProf writes reaches the other tests."""
    copy = tmp_path_factory.mktemp("served") / every_mode_comparison.name
    shutil.copytree(every_mode_comparison, copy, symlinks=True)
    return copy


@pytest.fixture(scope="module")
def served_comparison(comparison):
    with hloscope_tensorboard(comparison.parent) as (_process, url, _stdout):
        yield url


@pytest.mark.slow
def test_runs_endpoint_lists_every_mode(served_comparison, comparison):
    runs = http_json(served_comparison + "data/plugin/profile/runs")
    assert sorted(runs) == sorted(f"{mode}/{comparison.name}" for mode in MODE_NAMES)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODE_NAMES)
def test_tools_endpoint_offers_the_trace_viewer(served_comparison, comparison, mode):
    query = urllib.parse.urlencode({"run": f"{mode}/{comparison.name}"})  # '+' of `pytorch+compile` sent as %2B
    tools = http_json(served_comparison + f"data/plugin/profile/run_tools?{query}")
    assert {"trace_viewer", "trace_viewer@"} & set(tools), tools


@pytest.mark.slow
def test_pytorch_step_is_in_the_trace_viewer(served_comparison, comparison):
    kineto = next((comparison / "pytorch" / "kineto").glob("*.pt.trace.json*"))
    host = kineto.name.split(".")[0]
    query = urllib.parse.urlencode({"run": f"pytorch/{comparison.name}", "tag": "trace_viewer@", "host": host})
    trace = http_json(served_comparison + "data/plugin/profile/data?" + query)
    names = [e.get("name") for e in trace["traceEvents"] if e.get("ph") == "X"]
    # XProf draws an event under its `step_name` stat: the conversion gives each marker its own name there.
    numbers = json.loads((comparison / "pytorch" / "run.json").read_text())["profile"]["step_numbers"]
    assert len(numbers) == PROFILE_STEPS
    assert sorted(n for n in names if n.startswith("ProfilerStep#")) == sorted(f"ProfilerStep#{n}" for n in numbers)
    assert "aten::mm" in names and "aten::softmax" in names  # the ViT's matmuls and attention, under each step


@pytest.mark.slow
@pytest.mark.browser
def test_profile_page_in_headless_chromium(served_comparison, comparison, tmp_path):
    browser = chromium()
    ARTIFACTS.mkdir(exist_ok=True)
    shots = {
        "tensorboard_profile.png": served_comparison + "#profile",
        # XProf's trace viewer on the PyTorch run: the Kineto trace converted to XSpace, drawn by XProf.
        "tensorboard_pytorch_trace.png": _trace_viewer_page(served_comparison, comparison),
    }
    for name, page in shots.items():
        target = ARTIFACTS / name
        target.unlink(missing_ok=True)
        shot = command(browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={target}",
                       "--window-size=1400,900", "--virtual-time-budget=20000", page, timeout=180)
        assert shot.code == 0, shot.stderr[-2000:]
        assert target.stat().st_size > 20_000, name  # a blank 1400x900 PNG is a few kB
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def tool_data(url: str, run: str, tool: str):
    """One of XProf's tools for a run, as the profile page asks for it: the run's host, then the tool's data."""
    hosts = http_json(url + "data/plugin/profile/hosts?" + urllib.parse.urlencode({"run": run, "tag": tool}))
    query = urllib.parse.urlencode({"run": run, "tag": tool, "host": hosts[0]["hostname"]})
    return http_json(url + "data/plugin/profile/data?" + query)


def recorded_step_ms(run_dir: Path) -> list[float]:
    """The profiled steps' durations (ms) read from the recorded files without hloscope: the ProfilerStep#N events of
    the Kineto JSON, or the `train_step` annotations of the xplane (jaxlib's reader)."""
    kineto = sorted((run_dir / "kineto").glob("*.pt.trace.json"))
    if kineto:
        events = json.loads(kineto[0].read_text())["traceEvents"]
        return [e["dur"] / 1000 for e in sorted(events, key=lambda e: e.get("ts", 0))
                if str(e.get("name", "")).startswith("ProfilerStep#")]
    from jaxlib._profile_data import ProfileData

    (xplane,) = (run_dir / "plugins" / "profile").glob("*/*.xplane.pb")
    markers = sorted((event.start_ns, event.duration_ns / 1e6) for plane in ProfileData.from_file(str(xplane)).planes
                     for line in plane.lines for event in line.events if event.name == "train_step")
    return [ms for _, ms in markers]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODE_NAMES)
def test_overview_step_times_and_framework_ops_over_http(served_comparison, comparison, mode):
    run = f"{mode}/{comparison.name}"
    run_dir = comparison / get_mode(mode).dir_name
    overview = tool_data(served_comparison, run, "overview_page")
    graph = next(t for t in overview if t.get("p", {}).get("step_time_graph_column_ids"))
    shown = [row["c"][-1]["v"] for row in graph["rows"]]
    recorded = recorded_step_ms(run_dir)
    assert len(recorded) == len(json.loads((run_dir / "run.json").read_text())["profile"]["step_numbers"])
    # XProf's step is the marker (host-only profiles); with more than a few steps it drops the first and the last
    expected = [recorded[i] for i in xprof_kept_steps(range(len(recorded)))]
    assert shown == pytest.approx(expected, abs=1e-3)
    summary = next(t for t in overview if t.get("p", {}).get("steptime_ms_average"))["p"]
    assert float(summary["steptime_ms_average"]) == pytest.approx(sum(expected) / len(expected), abs=0.06)
    # XProf takes only profiles whose HLO has a backward scope for training (JAX, torchax); the others' step graph is
    # hidden by its page, which the command says.
    training = next(t for t in overview if "is_training" in t.get("p", {}))["p"]["is_training"]
    assert training == ("true" if get_mode(mode).framework in ("jax", "torchax") else "false")
    table = tool_data(served_comparison, run, "framework_op_stats")[0]
    operations = [row["c"][3]["v"] for row in table["rows"]]
    if get_mode(mode).trace_format == "xplane":  # XLA ops named by their HLO op_name: aten__mm, .../dot_general
        assert len(operations) > 20 and any("aten__mm" in op or "dot_general" in op for op in operations), operations
    else:
        assert "aten::mm" in operations or "aten::addmm" in operations
    # no run of hloscope records allocations (profile_memory): XProf's memory profile has no allocator
    assert tool_data(served_comparison, run, "memory_profile")["memoryIds"] == []


def _trace_viewer_page(url: str, comparison: Path) -> str:
    kineto = next((comparison / "pytorch" / "kineto").glob("*.pt.trace.json*"))
    data = "/data/plugin/profile/data?" + urllib.parse.urlencode(
        {"run": f"pytorch/{comparison.name}", "tag": "trace_viewer@", "host": kineto.name.split(".")[0]}
    )
    query = urllib.parse.urlencode({"is_streaming": "true", "is_oss": "true", "trace_data_url": data})
    return url + "data/plugin/profile/trace_viewer_index.html?" + query


@pytest.mark.slow
def test_ctrl_c_stops_tensorboard_and_leaves_nothing_behind(comparison):
    before = tree_state(comparison)
    with hloscope_tensorboard(comparison) as (process, _url, stdout):
        assert f"jax/{comparison.name}" in "".join(stdout)  # pointed at the comparison itself: same names
        children = child_pids(process.pid)
        assert children, "TensorBoard runs as a child process"
        process.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
        assert process.wait(timeout=60) == 0
        stderr = process.stderr.read()
        assert "Traceback" not in stderr
        assert not any(is_alive(pid) for pid in children)
    assert tree_state(comparison) == before


# --- errors: one line, exit code ------------------------------------------------------------------------------------


def test_missing_directory_is_exit_2(cli_run, tmp_path):
    code, _, err = cli_run("tensorboard", str(tmp_path / "nope"))
    assert code == 2
    assert err.strip() == f"hloscope: error: {tmp_path / 'nope'}: no such directory"


def test_directory_without_profiles_is_exit_2(cli_run, tmp_path):
    (tmp_path / "cmp" / "jax").mkdir(parents=True)
    code, _, err = cli_run("tensorboard", str(tmp_path))
    assert code == 2
    assert "no profiles found" in err and len(err.strip().splitlines()) == 1


def test_non_loopback_host_warns(cli_run, tmp_path):
    code, _, err = cli_run("tensorboard", str(tmp_path / "nope"), "--host", "0.0.0.0")
    assert "visible to everyone who can reach this machine on the network" in err.splitlines()[0]
    assert code == 2  # and nothing was started: the directory does not exist


@pytest.mark.parametrize("how", ["not found", "import fails"])
@pytest.mark.parametrize(("missing", "package"), [("tensorboard", "tensorboard"), ("xprof", "tensorboard-plugin-profile")])
def test_missing_package_is_one_line_naming_it(cli_run, tmp_path, monkeypatch, missing, package, how):
    if how == "import fails":  # `import tensorboard` / `import xprof` raise ImportError in this process
        monkeypatch.setitem(sys.modules, missing, None)
        with pytest.raises(ImportError):
            __import__(missing)
    else:
        real = importlib.util.find_spec
        monkeypatch.setattr(server.importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a))
    code, _, err = cli_run("tensorboard", str(tmp_path))
    assert code == 3
    assert err.strip().splitlines() == [
        f"hloscope: error: this needs the Python package '{package}', which is not installed"
        + (" (TensorBoard's profile plugin (XProf))" if package != "tensorboard" else "")
        + f": pip install {package}"
    ]


def test_port_in_use_is_one_line_with_tensorboards_reason(fixture_traces):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = hloscope("tensorboard", fixture_traces, "--port", str(port), timeout=180, memory_limit=None)
    assert result.code == 1
    assert result.stderr.strip().splitlines() == [
        f"hloscope: error: TensorBoard exited with code 255: ERROR: TensorBoard could not bind to port {port}, "
        "it was already in use"
    ]
