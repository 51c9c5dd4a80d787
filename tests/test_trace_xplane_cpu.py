"""XLA CPU runs: each op XLA's CPU runtime executes is in the step that dispatched it, found through PjRt's run id
and the thread-pool hand-offs the profiler records, however the hand-off regions of worker threads interleave."""

from __future__ import annotations

from pathlib import Path

from hloscope.trace.load import load_traces
from hloscope.trace.stats import trace_stats
from hloscope.trace.xplane_proto import xspace_class

EXECUTE = "CommonPjRtLoadedExecutable::Execute (jit_train_step)"
STATS = ("step_num", "_pt", "_p", "_ct", "_c", "run_id", "hlo_op", "hlo_module")


class _Host:
    """A /host:CPU plane written the way jax 0.10's profiler writes an XLA CPU run (the events, stats and flow
    types of a real `--mode jax` trace)."""

    def __init__(self) -> None:
        self.space = xspace_class()()
        self.plane = self.space.planes.add(id=1, name="/host:CPU")
        for key, name in enumerate(STATS, 1):
            self.plane.stat_metadata[key].id, self.plane.stat_metadata[key].name = key, name
        self.names: dict[str, int] = {}

    def line(self, name: str):
        return self.plane.lines.add(id=len(self.plane.lines) + 1, name=name, timestamp_ns=1_000_000)

    def event(self, line, name: str, at_us: float, dur_us: float = 0.0, **stats: int | str) -> None:
        if name not in self.names:
            key = self.names[name] = len(self.names) + 1
            self.plane.event_metadata[key].id, self.plane.event_metadata[key].name = key, name
        event = line.events.add(metadata_id=self.names[name], offset_ps=int(at_us * 1e6), duration_ps=int(dur_us * 1e6))
        for stat, value in stats.items():
            key = STATS.index(stat) + 1
            if isinstance(value, str):
                event.stats.add(metadata_id=key, str_value=value)
            elif value >= 1 << 63:
                event.stats.add(metadata_id=key, uint64_value=value)
            else:
                event.stats.add(metadata_id=key, int64_value=value)

    def op(self, line, name: str, at_us: float, run: int | None) -> None:
        run_stat = {} if run is None else {"run_id": run}
        self.event(line, name, at_us, 5.0, hlo_op=name, hlo_module="jit_train_step", **run_stat)

    def write(self, path: Path) -> Path:
        path.write_bytes(self.space.SerializeToString())
        return path


def _three_steps(run_ids: bool, crossing: bool) -> _Host:
    """Three steps, each dispatching one execution of jit_train_step from the Python thread (an Execute event with
    its run id, and a hand-off to the PjRt client thread inside it) whose op runs on an Eigen thread.
    `crossing`: the client thread's StopRegion of step 0 went unrecorded and its take-over of step 1's hand-off too
    (a loaded machine), so its step 1 hand-off to the Eigen thread is recorded inside step 0's region; in step 2 it
    starts a region again. `run_ids`: the ops carry PjRt's run id (jax 0.10), else not (older XLA)."""
    host = _Host()
    python, client, eigen = host.line("python"), host.line("tf_XLAPjRtCpuClient/1"), host.line("tf_XLAEigen/2")
    for step in range(3):
        at, run, flow = step * 1000.0, -572299471 + step, 10 * step + 1
        host.event(python, "train_step", at, 900.0, step_num=step)
        # the flow id is the run id's bits unsigned (as in the real trace), the stat signed
        host.event(python, EXECUTE, at + 10, 100.0, _pt=5, _p=run + (1 << 64), run_id=run)
        host.event(python, "ThreadpoolListener::Record", at + 20, _pt=15, _p=flow)
        if not (crossing and step == 1):
            host.event(client, "ThreadpoolListener::StartRegion", at + 30, _ct=15, _c=flow)
        host.event(client, "ThreadpoolListener::Record", at + 40, _pt=15, _p=flow + 1)
        if not crossing:
            host.event(client, "ThreadpoolListener::StopRegion", at + 45)
        host.event(eigen, "ThreadpoolListener::StartRegion", at + 50, _ct=15, _c=flow + 1)
        host.op(eigen, "fusion.1", at + 60, run if run_ids else None)
        if step == 2:  # an op of the same region without a run id: its region says which hand-off it came from
            host.op(eigen, "fusion.2", at + 70, None)
        host.event(eigen, "ThreadpoolListener::StopRegion", at + 80)
    return host


def test_each_xla_cpu_op_is_in_the_step_of_its_execution_when_hand_offs_cross_steps(tmp_path):
    path = _three_steps(run_ids=True, crossing=True).write(tmp_path / "cpu.xplane.pb")
    (trace,) = load_traces(path)
    steps = trace_stats(trace).to_dict()["per_step"]
    assert [(s["step"], s["kernels"]) for s in steps] == [(0, 1), (1, 1), (2, 2)]
    assert [s["device_busy_us"] for s in steps] == [5.0, 5.0, 10.0]


def test_xla_cpu_ops_without_a_run_id_are_in_the_step_of_their_first_hand_off(tmp_path):
    """Older XLA: no run id on the ops; each op's region, followed back through the hand-offs, says its step."""
    path = _three_steps(run_ids=False, crossing=False).write(tmp_path / "cpu.xplane.pb")
    (trace,) = load_traces(path)
    steps = trace_stats(trace).to_dict()["per_step"]
    assert [(s["step"], s["kernels"]) for s in steps] == [(0, 1), (1, 1), (2, 2)]
    assert [s["device_busy_us"] for s in steps] == [5.0, 5.0, 10.0]
