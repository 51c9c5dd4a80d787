"""How the host's CPUs were shared while the run ran (Linux /proc; standard library only).

Per thread of this process, the kernel's schedstat (`/proc/self/task/<tid>/schedstat`) holds the time the thread ran
on a CPU and the time it was runnable but waiting in a run queue for one. Waiting time is CPU contention: the thread
had work and no core was free for it. Involuntary context switches (preempted while it still had work) come from
getrusage: the calling thread's (RUSAGE_THREAD) and the process's (RUSAGE_SELF), two system calls instead of a
`status` file per thread, which costs three times a schedstat read. A snapshot reads every thread's schedstat once
(about 12 us a thread, plus the listing: 0.2 ms for JAX's 17 threads on 2 cores); the difference of two snapshots
splits it into the thread that runs the step (the main thread, the one taking the snapshots) and the sum over the
others (the runtime's thread pools, loader threads, profiler threads). Threads that ended between the snapshots are
lost from the times (their switches stay in the process's count); threads that started count from zero.

Across the whole machine, `/proc/<pid>/stat` (user + system time, and the CPU each last ran on) tells which other
processes held the CPUs during a window: one read per process, no per-thread reads, so that a machine with thousands
of processes stays cheap. A run confined to some CPUs (taskset, a container's cpuset) only competes with what runs
there, so the processes last seen on those CPUs are also listed apart.

Elsewhere (macOS, Windows, a /proc that cannot be read) every function returns None and run.json says why (NOT_MEASURED).
The measurements use the standard library only; what run.json records of them is typed in hloscope/runs/records.py.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
from dataclasses import dataclass

from hloscope.runs.records import (
    HostScheduling,
    OtherThreads,
    PhaseScheduling,
    ProcessCpu,
    StepScheduling,
    ThreadTimes,
)

NOT_MEASURED = ("host scheduling (time waiting for a CPU, from /proc/<pid>/task/<tid>/schedstat) is measured on Linux "
                "only: not measured here")
TOP_PROCESSES = 3
MAX_PROCESSES = 100_000  # a bound on one pass over /proc
_TASKS = "/proc/self/task"


@dataclass(frozen=True)
class Snapshot:
    """Cumulative counters: per thread (nanoseconds on a CPU, nanoseconds runnable but waiting for one), and the
    involuntary context switches of the main thread and of the whole process."""

    main_tid: int
    threads: dict[int, tuple[int, int]]
    main_switches: int
    process_switches: int


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def _thread(tid: int) -> tuple[int, int] | None:
    schedstat = _read(f"{_TASKS}/{tid}/schedstat")
    try:
        running, waiting = schedstat.split()[:2]  # type: ignore[union-attr]
        return int(running), int(waiting)
    except (AttributeError, ValueError):
        return None


def thread_times() -> tuple[int, int] | None:
    """The calling thread's counters now: (nanoseconds on a CPU, nanoseconds runnable but waiting for one); None where
    they cannot be read. One schedstat read, for the host annotations of a profiled step (Session.annotate)."""
    if not sys.platform.startswith("linux"):
        return None
    return _thread(threading.get_native_id())


def snapshot() -> Snapshot | None:
    """Every thread's counters now, the calling thread being the one that runs the step. None where they cannot be
    read (not Linux, no schedstat in this kernel, /proc not mounted)."""
    if not sys.platform.startswith("linux"):
        return None
    main_tid = threading.get_native_id()
    try:
        tids = [int(name) for name in os.listdir(_TASKS)]
    except (OSError, ValueError):
        return None
    threads = {tid: times for tid in tids if (times := _thread(tid)) is not None}
    if main_tid not in threads:
        return None
    main, process = resource.getrusage(resource.RUSAGE_THREAD), resource.getrusage(resource.RUSAGE_SELF)
    return Snapshot(main_tid, threads, main.ru_nivcsw, process.ru_nivcsw)


def _figures(running_ns: int, waiting_ns: int, switches: int) -> dict:
    return {"running_s": max(running_ns, 0) / 1e9, "waiting_for_cpu_s": max(waiting_ns, 0) / 1e9,
            "involuntary_switches": max(switches, 0)}


def difference(before: Snapshot | None, after: Snapshot | None) -> dict | None:
    """run.json's figures between two snapshots: `main_thread` and `other_threads` (summed, with how many threads were
    seen) {running_s, waiting_for_cpu_s, involuntary_switches}. None when either snapshot is missing."""
    if before is None or after is None or before.main_tid != after.main_tid:
        return None
    main_switches = after.main_switches - before.main_switches
    other_switches = after.process_switches - before.process_switches - main_switches
    running = waiting = 0
    for tid, (end_running, end_waiting) in after.threads.items():
        if tid == after.main_tid:
            continue
        start_running, start_waiting = before.threads.get(tid, (0, 0))
        running += max(end_running - start_running, 0)
        waiting += max(end_waiting - start_waiting, 0)
    start_main, end_main = before.threads[before.main_tid], after.threads[after.main_tid]
    return {"main_thread": _figures(end_main[0] - start_main[0], end_main[1] - start_main[1], main_switches),
            "other_threads": {**_figures(running, waiting, other_switches), "threads": len(after.threads) - 1}}


def step_scheduling(step: int, figures: dict, phases: dict[str, tuple[int, int]] | None = None) -> StepScheduling:
    """run.json `profile.host_scheduling`'s entry of one profiled step from its `difference`, with the step thread's
    counters inside each host annotation (name -> nanoseconds running, waiting) where they were read."""
    inside = {name: PhaseScheduling(running_s=max(running, 0) / 1e9, waiting_for_cpu_s=max(waiting, 0) / 1e9)
              for name, (running, waiting) in (phases or {}).items()}
    return StepScheduling(step=step, main_thread=ThreadTimes(**figures["main_thread"]),
                          other_threads=OtherThreads(**figures["other_threads"]),
                          **({"phases": inside} if phases is not None else {}))


# pid -> (command, start time in ticks since boot, user + system ticks, the CPU it last ran on)
Processes = dict[int, tuple[str, int, int, int]]


def process_cpu() -> Processes | None:
    """CPU time of every other process now: pid -> (command, start time, user + system ticks, last CPU), leaving out
    this process and its children (DataLoader workers, data-parallel ranks: part of the run). One read per process;
    unreadable ones (gone, another user's under hidepid) are skipped. None where /proc cannot be listed."""
    if not sys.platform.startswith("linux"):
        return None
    me = os.getpid()
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()][:MAX_PROCESSES]
    except OSError:
        return None
    out: Processes = {}
    for pid in pids:
        if pid == me:
            continue
        raw = _read(f"/proc/{pid}/stat")
        if not raw:
            continue
        head, _, tail = raw.rpartition(b")")
        fields = tail.split()
        try:
            if int(fields[1]) == me:
                continue
            command = head.partition(b"(")[2].decode("utf-8", "replace")
            out[pid] = (command, int(fields[19]), int(fields[11]) + int(fields[12]), int(fields[36]))
        except (IndexError, ValueError):
            continue
    return out


def other_processes(before: Processes | None, after: Processes | None, top: int = TOP_PROCESSES,
                    cpus: set[int] | None = None) -> tuple[float, list[dict]] | None:
    """CPU seconds the other processes used between two `process_cpu` readings (a process that started in between
    counts from zero; one that ended in between is lost): their total, and the `top` largest
    [{pid, command, cpu_s}]. With `cpus`, only the processes last seen on one of them at the second reading."""
    if before is None or after is None:
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    used = []
    for pid, (command, started, ticks, cpu) in after.items():
        if cpus is not None and cpu not in cpus:
            continue
        earlier = before.get(pid)
        base = earlier[2] if earlier is not None and earlier[1] == started else 0
        if ticks > base:
            used.append((ticks - base, pid, command))
    used.sort(key=lambda item: (-item[0], item[1]))
    total = sum(item[0] for item in used) / tick
    return total, [{"pid": pid, "command": command, "cpu_s": ticks / tick} for ticks, pid, command in used[:top]]


class Window:
    """The host's scheduling over a window (the timed steps): this process's threads and the other processes."""

    def __init__(self) -> None:
        self.processes = process_cpu()
        self.started = time.perf_counter()
        self.threads = snapshot()

    def finish(self) -> HostScheduling | None:
        """run.json `timing.host_scheduling`: {seconds, cpu_count, cpu_affinity, main_thread, other_threads,
        other_processes_cpu_s, other_processes, other_processes_on_run_cpus}; None where not measured."""
        threads = difference(self.threads, snapshot())
        seconds = time.perf_counter() - self.started
        now = process_cpu()
        processes = other_processes(self.processes, now)
        if threads is None or processes is None:
            return None
        try:
            allowed: set[int] | None = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            allowed = None
        sharing = other_processes(self.processes, now, cpus=allowed) if allowed is not None else None
        return HostScheduling(
            seconds=seconds, cpu_count=os.cpu_count(), cpu_affinity=len(allowed) if allowed else None,
            main_thread=ThreadTimes(**threads["main_thread"]), other_threads=OtherThreads(**threads["other_threads"]),
            other_processes_cpu_s=processes[0], other_processes=[ProcessCpu(**process) for process in processes[1]],
            other_processes_on_run_cpus=[ProcessCpu(**process) for process in sharing[1]] if sharing is not None
            else None)
