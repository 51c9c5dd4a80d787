"""Host scheduling: the per-thread schedstat snapshots (hloscope.backends.scheduling), their place in run.json and in
Session.profile, the ledger's contention split, run.json validation of the new fields, the contention hypothesis, and
one known answer: a run pinned to one CPU beside busy-loop processes waits for that CPU, and explain says so."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import pytest
from helpers import REPO, assert_refused, hloscope

from hloscope.backends import scheduling
from hloscope.backends.base import RunOptions, Session
from hloscope.backends.startup_ledger import COMPILE_CACHE_ENV
from hloscope.errors import InputError
from hloscope.explain.hypotheses import cpu_contention
from hloscope.explain.ledger import RunLedger
from hloscope.explain.summary import ModeSummary
from hloscope.runs import rundir
from hloscope.runs.records import HostScheduling, section_document
from hloscope.trace.step_profile import CONTENTION, HOST_CONTENTION, StepParts, split_contention


def _spin(cpu_s: float) -> None:
    """Run on the CPU until this thread has used `cpu_s` seconds of it (whatever else the machine does)."""
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        pass


# ------------------------------------------------------------------------------------------------- snapshot and diff

def test_the_project_runs_where_schedstat_is_read():
    """hloscope runs on Linux, where /proc gives each thread's scheduler statistics; elsewhere (tested below with the
    platform patched) the figures are left out and a note says so."""
    assert sys.platform.startswith("linux")
    assert scheduling.snapshot() is not None


def test_snapshot_difference_counts_the_main_thread_and_the_others():
    started, release = threading.Event(), threading.Event()

    def worker() -> None:
        started.set()
        _spin(0.05)
        release.wait(10)  # alive when the second snapshot is taken: a thread that ended is not read

    before = scheduling.snapshot()
    thread = threading.Thread(target=worker)
    thread.start()
    started.wait(10)
    _spin(0.05)
    while thread.is_alive() and not release.is_set():
        time.sleep(0.01)
        figures = scheduling.difference(before, scheduling.snapshot())
        assert figures is not None
        if figures["other_threads"]["running_s"] >= 0.045:
            break
    after = scheduling.snapshot()
    release.set()
    thread.join()
    figures = scheduling.difference(before, after)
    assert figures is not None
    main, others = figures["main_thread"], figures["other_threads"]
    assert main["running_s"] >= 0.045 and others["running_s"] >= 0.045, figures
    for group in (main, others):
        assert group["waiting_for_cpu_s"] >= 0 and group["involuntary_switches"] >= 0
    assert others["threads"] >= 1
    assert json.loads(json.dumps(figures)) == figures  # what run.json holds


def test_not_linux_measures_nothing(monkeypatch):
    monkeypatch.setattr(scheduling.sys, "platform", "darwin")
    assert scheduling.snapshot() is None and scheduling.process_cpu() is None
    assert scheduling.difference(None, None) is None and scheduling.other_processes(None, {}) is None
    assert scheduling.Window().finish() is None


def test_process_cpu_leaves_out_this_process_and_its_children():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.2)
        processes = scheduling.process_cpu()
        assert processes is not None and processes  # at least init is readable
        assert os.getpid() not in processes and child.pid not in processes
    finally:
        child.kill()
        child.wait()


def test_other_processes_in_the_window():
    tick = os.sysconf("SC_CLK_TCK")
    before = {1: ("init", 5, 100, 0), 2: ("old", 7, 50, 1), 3: ("idle", 9, 10, 0)}
    after = {1: ("init", 5, 100 + tick, 0), 2: ("new", 8, 3 * tick, 1), 3: ("idle", 9, 10, 0),
             4: ("fresh", 20, tick // 2, 0)}
    measured = scheduling.other_processes(before, after, top=2)
    assert measured is not None
    total, top = measured
    # pid 2 was reused (another start time): all its time is in the window; pid 4 started in it
    assert total == pytest.approx(1 + 3 + (tick // 2) / tick)
    assert top == [{"pid": 2, "command": "new", "cpu_s": 3.0}, {"pid": 1, "command": "init", "cpu_s": 1.0}]
    on_cpu0 = scheduling.other_processes(before, after, top=3, cpus={0})
    assert on_cpu0 is not None and [p["pid"] for p in on_cpu0[1]] == [1, 4]


# ----------------------------------------------------------------------------------------- Session.profile, run.json

class _Loop(Session):
    profile_step_marker = "train_step"

    def profiler(self, result, first, steps):
        return contextlib.nullcontext()

    def step_marker(self, index):
        return contextlib.nullcontext()

    def step(self, index):
        _spin(0.002)
        return index

    def wait(self, outputs):
        pass


def test_profile_records_one_entry_per_recorded_step(tmp_path):
    session = _Loop(RunOptions(steps=2, warmup=1), tmp_path)
    session.profile_lead_in_steps = 1
    record = section_document(session.profile(4).record())
    assert record["step_numbers"] == [4, 5, 6, 7]
    steps = record["host_scheduling"]
    assert [s["step"] for s in steps] == record["step_numbers"]
    for step in steps:
        assert step["main_thread"]["running_s"] > 0 and step["main_thread"]["waiting_for_cpu_s"] >= 0
        assert set(step["other_threads"]) == {"running_s", "waiting_for_cpu_s", "involuntary_switches", "threads"}


def test_profile_without_schedstat_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(scheduling, "snapshot", lambda: None)
    record = section_document(_Loop(RunOptions(steps=2, warmup=1), tmp_path).profile(3).record())
    assert record["host_scheduling"] is None and scheduling.NOT_MEASURED in record["notes"]
    assert json.loads(json.dumps(record))["host_scheduling"] is None


# ---------------------------------------------------------------------------------------------------- ledger split

def _parts(number: int, nodes: dict[str, float], busy: float) -> StepParts:
    return StepParts(number, sum(nodes.values()), busy, dict(nodes), {}, {}, 0)


def test_contention_comes_out_of_other_host_idle_capped_by_it():
    device = {"device:matmul/conv": 0.004, "idle:runtime dispatch": 0.0005, "idle:other host": 0.003}
    parts = [_parts(1, device, 0.004), _parts(2, device, 0.004), _parts(3, device, 0.004), _parts(4, device, 0.004)]
    split_contention(parts, {1: 0.001, 2: 0.05, 3: 0.0})  # step 4 not measured
    assert parts[0].nodes[CONTENTION] == pytest.approx(0.001)
    assert parts[0].nodes["idle:other host"] == pytest.approx(0.002)
    assert parts[1].nodes[CONTENTION] == pytest.approx(0.003)  # capped by the unnamed idle time
    assert parts[1].nodes["idle:other host"] == pytest.approx(0.0, abs=1e-15)
    assert CONTENTION not in parts[2].nodes and CONTENTION not in parts[3].nodes
    for part in parts:
        assert part.nodes["idle:runtime dispatch"] == 0.0005  # a named cause keeps its time
        assert sum(part.nodes.values()) == pytest.approx(part.step_s, rel=1e-12)


def test_contention_on_a_host_only_step():
    nodes = {"host:inside framework ops": 0.010, "host:outside framework ops": 0.002}
    parts = [_parts(7, nodes, 0.0), _parts(8, nodes, 0.0)]
    split_contention(parts, {7: 0.0015, 8: 0.004})
    assert parts[0].nodes[HOST_CONTENTION] == pytest.approx(0.0015)
    assert parts[0].nodes["host:outside framework ops"] == pytest.approx(0.0005)
    assert parts[1].nodes[HOST_CONTENTION] == pytest.approx(0.002)
    assert all(CONTENTION not in p.nodes and p.nodes["host:inside framework ops"] == 0.010 for p in parts)
    assert all(sum(p.nodes.values()) == pytest.approx(p.step_s, rel=1e-12) for p in parts)


def test_a_wait_measured_inside_an_annotation_leaves_that_phase_and_the_rest_leaves_dispatch():
    """The real loaded run: the step thread waited 12 ms a step, none of it inside hloscope/input or hloscope/wait,
    and the trace showed 11 ms of "runtime dispatch" idle against 0.2 ms in a quiet step. With the annotations'
    figures the wait leaves the unnamed host time, then dispatch; the input pipeline keeps its time."""
    nodes = {"device:fusion/elementwise": 0.0009, "idle:input pipeline": 0.0017, "idle:runtime dispatch": 0.01117,
             "idle:other host": 0.0005}
    inside = {"hloscope/input": 0.0, "hloscope/wait": 0.0}
    parts = [_parts(8, nodes, 0.0009)]
    split_contention(parts, {8: 0.01203}, {8: inside})
    assert parts[0].nodes[CONTENTION] == pytest.approx(0.01167)  # all the unnamed and dispatch time there was
    assert parts[0].nodes["idle:runtime dispatch"] == pytest.approx(0.0, abs=1e-12)
    assert parts[0].nodes["idle:input pipeline"] == 0.0017
    assert sum(parts[0].nodes.values()) == pytest.approx(parts[0].step_s, rel=1e-12)
    # the same step read as before the annotations were measured: the wait stays in dispatch but the unnamed 0.5 ms
    old = [_parts(8, nodes, 0.0009)]
    split_contention(old, {8: 0.01203})
    assert old[0].nodes["idle:runtime dispatch"] == 0.01117 and old[0].nodes[CONTENTION] == pytest.approx(0.0005)


def test_a_wait_inside_the_input_annotation_leaves_the_input_pipeline_only():
    nodes = {"device:matmul/conv": 0.004, "idle:input pipeline": 0.006, "idle:runtime dispatch": 0.001,
             "idle:other host": 0.001}
    parts = [_parts(3, nodes, 0.004), _parts(4, nodes, 0.004)]
    split_contention(parts, {3: 0.005, 4: 0.009},
                     {3: {"hloscope/input": 0.005, "hloscope/wait": 0.0}, 4: {"hloscope/input": 0.008}})
    assert parts[0].nodes["idle:input pipeline"] == pytest.approx(0.001) and parts[0].nodes[CONTENTION] == 0.005
    assert parts[0].nodes["idle:runtime dispatch"] == 0.001 and parts[0].nodes["idle:other host"] == 0.001
    # 8 ms inside the input annotation, capped by its 6 ms of idle (the rest overlapped device work); the 1 ms outside
    # every annotation leaves the unnamed host time
    assert parts[1].nodes["idle:input pipeline"] == pytest.approx(0.0, abs=1e-12)
    assert parts[1].nodes["idle:other host"] == pytest.approx(0.0, abs=1e-12)
    assert parts[1].nodes[CONTENTION] == pytest.approx(0.007) and parts[1].nodes["idle:runtime dispatch"] == 0.001
    assert all(sum(p.nodes.values()) == pytest.approx(p.step_s, rel=1e-12) for p in parts)


def test_the_rest_of_a_wait_leaves_the_named_causes_in_proportion_on_a_host_only_step():
    nodes = {"host:input pipeline": 0.002, "host:inside framework ops": 0.006,
             "host:autograd engine and optimizer, outside aten ops": 0.002, "host:outside framework ops": 0.001}
    parts = [_parts(5, nodes, 0.0)]
    split_contention(parts, {5: 0.005}, {5: {"hloscope/input": 0.0}})
    assert parts[0].nodes["host:outside framework ops"] == pytest.approx(0.0, abs=1e-12)
    assert parts[0].nodes["host:inside framework ops"] == pytest.approx(0.006 - 0.003)  # 4 ms of 8 ms named: half
    assert parts[0].nodes["host:autograd engine and optimizer, outside aten ops"] == pytest.approx(0.001)
    assert parts[0].nodes["host:input pipeline"] == 0.002 and parts[0].nodes[HOST_CONTENTION] == pytest.approx(0.005)


class _Annotated(_Loop):
    def step(self, index):
        with self.annotate("hloscope/input"):
            _spin(0.001)
        _spin(0.001)
        return index


def test_profile_records_the_step_threads_time_inside_each_annotation(tmp_path):
    session = _Annotated(RunOptions(steps=2, warmup=1), tmp_path)
    session.profiling = True  # as the driver sets it around profile()
    record = section_document(session.profile(3).record())
    for step in record["host_scheduling"]:
        inside = step["phases"]["hloscope/input"]
        assert set(step["phases"]) == {"hloscope/input"}
        assert 0 < inside["running_s"] <= step["main_thread"]["running_s"]
        assert 0 <= inside["waiting_for_cpu_s"] <= step["main_thread"]["waiting_for_cpu_s"]
    timed = _Annotated(RunOptions(steps=2, warmup=1), tmp_path)
    timed.step(0)  # outside profile(): no annotation, nothing read
    assert timed.phase_times == {}


# ------------------------------------------------------------------------------------------------------ hypothesis

def _summary(mode: str, contention: list[float], host_scheduling: dict | None = None) -> ModeSummary:
    window = None if host_scheduling is None else msgspec.convert(host_scheduling, HostScheduling)
    other = [0.001] * len(contention)
    nodes = {"device:matmul/conv": [0.004] * len(contention), "idle:other host": other, CONTENTION: contention}
    steps = [sum(values) for values in zip(*nodes.values())]
    ledger = RunLedger(nodes, {}, steps, len(steps), {}, True, [0.004] * len(steps))
    return ModeSummary(mode=mode, ledger=ledger, profiled_step_s=sorted(steps)[len(steps) // 2],
                       host_scheduling=window)


def test_contention_hypothesis_names_the_processes():
    window = {"seconds": 0.5, "cpu_count": 4, "cpu_affinity": 1, "main_thread": _THREADS,
              "other_threads": {**_THREADS, "threads": 4}, "other_processes_cpu_s": 1.2,
              "other_processes": [{"pid": 99, "command": "elsewhere", "cpu_s": 0.5}],
              "other_processes_on_run_cpus": [{"pid": 4321, "command": "hog", "cpu_s": 0.4}]}
    slow, fast = _summary("busy", [0.003] * 5, window), _summary("quiet", [0.0] * 5)
    annotation = cpu_contention(slow, fast)
    assert annotation is not None and annotation.nodes[0] == CONTENTION
    assert "waited for a CPU for 3.000 ms per step under busy against 0.000 ms under quiet" in annotation.claim
    assert "schedstat" in annotation.claim and "hog (pid 4321)" in annotation.claim
    assert "1.20 CPU-s of the 2.00 available" in annotation.claim and "1 of the 4 CPUs" in annotation.claim
    assert "elsewhere" not in annotation.claim  # the run confined to one CPU: what ran there is named
    unconfined = cpu_contention(_summary("busy", [0.003] * 5, {**window, "cpu_affinity": 4}), fast)
    assert unconfined is not None and "elsewhere (pid 99)" in unconfined.claim
    assert cpu_contention(fast, slow) is None  # the faster side waited less: nothing to explain
    assert cpu_contention(_summary("a", [0.00001] * 5), fast) is None  # below 1% of the step


# ------------------------------------------------------------------------------------------- run.json validation

def _run_json(root: Path, name: str, profile_scheduling=None, timing_scheduling=None) -> Path:
    run = rundir.create_run_dir(root, run_id=name)
    timing: dict = {"step_times_s": [0.002, 0.0021, 0.0019]}
    if timing_scheduling is not None:
        timing["host_scheduling"] = timing_scheduling
    record = {"schema_version": 1, "run_id": name, "mode": "jax", "status": "ok", "error": None,
              "config": {"model": "vit-tiny", "batch_size": 8}, "timing": timing, "artifacts": [],
              "profile": {"steps": 1, "step_numbers": [13], "host_scheduling": profile_scheduling}}
    rundir.write_run(run, record)
    return run


_THREADS = {"running_s": 0.001, "waiting_for_cpu_s": 0.0, "involuntary_switches": 0}
_GOOD_STEP = {"step": 13, "main_thread": _THREADS, "other_threads": {**_THREADS, "threads": 4}}
_GOOD_WINDOW = {"seconds": 0.1, "cpu_count": 2, "cpu_affinity": 1, "main_thread": _THREADS,
                "other_threads": {**_THREADS, "threads": 4}, "other_processes_cpu_s": 0.0,
                "other_processes": [{"pid": 1, "command": "init", "cpu_s": 0.0}]}


@pytest.mark.parametrize(("profile_scheduling", "timing_scheduling", "where"), [
    ("lots", None, "profile.host_scheduling"),
    ([{**_GOOD_STEP, "main_thread": {**_THREADS, "waiting_for_cpu_s": "1 ms"}}], None,
     "profile.host_scheduling[0].main_thread.waiting_for_cpu_s"),
    ([{**_GOOD_STEP, "main_thread": {**_THREADS, "running_s": -1.0}}], None,
     "profile.host_scheduling[0].main_thread.running_s"),
    ([{**_GOOD_STEP, "other_threads": {**_THREADS, "threads": True}}], None,
     "profile.host_scheduling[0].other_threads.threads"),
    ([{**_GOOD_STEP, "other_threads": [1, 2]}], None, "profile.host_scheduling[0].other_threads"),
    ([7], None, "profile.host_scheduling[0]"),
    ([{**_GOOD_STEP, "phases": {"hloscope/input": {"running_s": 0.001, "waiting_for_cpu_s": -0.002}}}], None,
     "profile.host_scheduling[0].phases[...].waiting_for_cpu_s"),
    ([{**_GOOD_STEP, "phases": ["hloscope/input"]}], None, "profile.host_scheduling[0].phases"),
    (None, "busy", "timing.host_scheduling"),
    (None, {**_GOOD_WINDOW, "other_processes": {"pid": 1}}, "timing.host_scheduling.other_processes"),
    (None, {**_GOOD_WINDOW, "other_processes": [{"pid": "1", "command": "x", "cpu_s": 0}]},
     "timing.host_scheduling.other_processes[0].pid"),
    (None, {**_GOOD_WINDOW, "other_processes": [{"pid": 1, "command": 5, "cpu_s": 0}]},
     "timing.host_scheduling.other_processes[0].command"),
    (None, {**_GOOD_WINDOW, "cpu_count": 2.5}, "timing.host_scheduling.cpu_count"),
    (None, {**_GOOD_WINDOW, "other_processes_on_run_cpus": "x"}, "timing.host_scheduling.other_processes_on_run_cpus"),
    (None, {**_GOOD_WINDOW, "seconds": -0.5}, "timing.host_scheduling.seconds"),
    (None, {**_GOOD_WINDOW, "main_thread": None}, "timing.host_scheduling.main_thread"),
    (None, {key: value for key, value in _GOOD_WINDOW.items() if key != "other_threads"}, "timing.host_scheduling"),
])
def test_load_run_refuses_wrong_host_scheduling(tmp_path, profile_scheduling, timing_scheduling, where):
    run = _run_json(tmp_path, "bad", profile_scheduling, timing_scheduling)
    with pytest.raises(InputError) as caught:
        rundir.load_run(run)
    assert str(run / "run.json") in str(caught.value) and f"'{where}'" in str(caught.value)


_POSITION = {"step": 13, "marker_entered_s": 0.01, "timer_start_s": 0.0101, "timer_stop_s": 0.012,
             "marker_left_s": 0.0121}


@pytest.mark.parametrize(("positions", "where"), [
    ("early", "profile.host_positions"),
    ([{**_POSITION, "timer_start_s": "0.0101"}], "profile.host_positions[0].timer_start_s"),
    ([{**_POSITION, "step": 13.5}], "profile.host_positions[0].step"),
    ([_POSITION, 4], "profile.host_positions[1]"),
])
def test_load_run_refuses_wrong_host_positions(tmp_path, positions, where):
    run = _run_json(tmp_path, "bad", [_GOOD_STEP])
    record = json.loads((run / "run.json").read_text())
    record["profile"]["host_positions"] = positions
    rundir.write_run(run, record)
    with pytest.raises(InputError) as caught:
        rundir.load_run(run)
    assert str(run / "run.json") in str(caught.value) and f"'{where}'" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_load_run_accepts_host_scheduling_and_its_absence(tmp_path):
    good = rundir.load_run(_run_json(tmp_path, "good", [_GOOD_STEP], _GOOD_WINDOW))
    assert [section_document(step) for step in good.profile.host_scheduling or []] == [_GOOD_STEP]
    assert good.timing.host_scheduling is not None and good.timing.host_scheduling.other_threads.threads == 4
    assert rundir.load_run(_run_json(tmp_path, "none")).profile.host_scheduling is None


def test_explain_refuses_a_hostile_host_scheduling_in_one_line(tmp_path):
    run = _run_json(tmp_path, "hostile", [{**_GOOD_STEP, "main_thread": {"waiting_for_cpu_s": {"$gt": 0}}}])
    line = assert_refused(hloscope("explain", run), run / "run.json")
    assert "profile.host_scheduling[0].main_thread" in line


# ---------------------------------------------------------------------------------------- known answer: contention

HOGS = 3
RUN_ARGS = ("run", "--mode", "jax", "--model", "vit-tiny", "--batch-size", "8", "--steps", "150", "--warmup", "3",
            "--profile", "--profile-steps", "5")
# Each hog pins itself to the run's CPU (argv[1]) and stops itself once started, so that its start-up does not slow the
# run's import and compile down; the test lets them all go at once when the run's timed window opens (run.json says
# `phase: timed window`).
HOG = ("import os, signal, sys; os.sched_setaffinity(0, {int(sys.argv[1])}); os.kill(os.getpid(), signal.SIGSTOP)\n"
       "while True: pass")
# `python -m hloscope` pinned to one CPU (argv[1]) before anything starts a thread (threads inherit the affinity).
PINNED_MAIN = ("import os, runpy, sys; os.sched_setaffinity(0, {int(sys.argv.pop(1))}); "
               "sys.argv[0] = 'hloscope'; runpy.run_module('hloscope', run_name='__main__')")


def _profiled_run(out: Path, run_id: str, cpu: int, hogs: list[subprocess.Popen] | None = None) -> dict:
    """A profiled JAX run pinned to `cpu`; with `hogs` (stopped, pinned to the same CPU), they are let go as the
    timed window opens. Returns its run.json. The runs share one persistent compile cache in `out`: the second reads
    the step the first compiled, which shortens its setup, not its timed window or profile."""
    env = {**os.environ, "PJRT_DEVICE": "CPU", "COLUMNS": "200", COMPILE_CACHE_ENV: str(out / "compile-cache")}
    process = subprocess.Popen([sys.executable, "-c", PINNED_MAIN, str(cpu), *RUN_ARGS, "--out", str(out),
                                "--run-id", run_id], cwd=REPO, env=env, text=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    run_json, released = out / run_id / "run.json", hogs is None
    deadline = time.monotonic() + 150
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if not released:
                try:
                    phase = json.loads(run_json.read_text()).get("phase")
                except (OSError, ValueError):
                    phase = None
                if phase is not None:
                    for hog in hogs or []:
                        os.kill(hog.pid, signal.SIGCONT)
                    released = True
            time.sleep(0.002 if not released else 0.05)
        if process.poll() is None:
            pytest.fail(f"hloscope {' '.join(RUN_ARGS)} did not finish in 150 s")
    finally:
        if process.poll() is None:
            process.kill()
        stderr = process.communicate()[1]
    assert process.returncode == 0, stderr[-3000:]
    assert released, "the run ended before its timed window was seen"
    return json.loads(run_json.read_text())


def _state(pid: int) -> str:
    """A process's state letter from /proc (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_busy_loops_on_the_runs_cpu_show_as_contention(tmp_path, cli_run):
    cpu = min(os.sched_getaffinity(0))
    quiet = _profiled_run(tmp_path, "quiet", cpu)
    hogs = [subprocess.Popen([sys.executable, "-c", HOG, str(cpu)]) for _ in range(HOGS)]
    try:
        for hog in hogs:  # each has stopped itself (state T) before the run starts
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and _state(hog.pid) not in ("T", "t"):
                time.sleep(0.01)
        busy = _profiled_run(tmp_path, "busy", cpu, hogs)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    hog_pids = {hog.pid for hog in hogs}
    # per profiled step: the step's thread waited for the CPU the hogs held
    steps = busy["profile"]["host_scheduling"]
    assert [s["step"] for s in steps] == busy["profile"]["step_numbers"]
    waited = [s["main_thread"]["waiting_for_cpu_s"] for s in steps]
    assert sum(w > 0 for w in waited) > len(waited) / 2, waited
    # the timed window: the hogs used the CPU and are named
    window = busy["timing"]["host_scheduling"]
    assert window["cpu_affinity"] == 1 and window["cpu_count"] == os.cpu_count()
    assert window["main_thread"]["waiting_for_cpu_s"] > 0
    # on the run's one CPU the hogs ran (others' processes elsewhere may use more CPU: only the overall list has them)
    sharing = window["other_processes_on_run_cpus"]
    assert {p["pid"] for p in sharing} & hog_pids, f"the hogs {sorted(hog_pids)} are not among {sharing}"
    assert all(p["command"].startswith("python") for p in sharing if p["pid"] in hog_pids), sharing
    assert quiet["timing"]["host_scheduling"]["other_processes_cpu_s"] >= 0

    code, out, err = cli_run("explain", "--json", str(tmp_path / "busy"), str(tmp_path / "quiet"))
    assert code == 0, err[-3000:]
    report = json.loads(out)
    ledger = next(s["ledger"] for label, s in report["summaries"].items() if "busy" in label)
    assert ledger is not None and ledger["node_median_s"].get(CONTENTION, 0.0) > 0, ledger["node_median_s"]
    for index, step_s in enumerate(ledger["step_s"]):  # per kept step, the nodes add up to the step
        assert sum(values[index] for values in ledger["nodes"].values()) == pytest.approx(step_s, rel=1e-9)
