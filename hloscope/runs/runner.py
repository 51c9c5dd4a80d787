"""Run several modes, each in its own fresh Python process, and gather them into one comparison directory.

A fresh process per mode keeps frameworks from sharing XLA flags, threads or memory, and means that a crash, a
segfault, the out-of-memory killer or a missing package in one mode never loses the others' results: the parent
reads each child's run.json, and when the child died before finishing it, writes the failure (signal, exit code and
the tail of the child's stderr) into that mode's run.json itself.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec

from hloscope.errors import InputError, warn
from hloscope.modes import get_mode, run_dir_name, run_label
from hloscope.runs.parity import evaluate
from hloscope.runs.records import (
    Audit,
    AuditStage,
    BetweenProcessControl,
    ComparisonEntry,
    ComparisonRecord,
    Configuration,
    RunRecord,
    amended_run,
    comparison_record,
    unfinished_run,
)
from hloscope.runs.rundir import (
    COMPARISON_FILE,
    RUN_FILE,
    OutputError,
    create_numbered,
    leftover_dumps,
    load_run,
    own_folder,
    write_comparison,
    write_run,
)

if TYPE_CHECKING:  # options are built by the cli and the backends; the runner only passes them on
    from hloscope.backends.base import RunOptions

STDERR_TAIL_LINES = 15


class StopRequested(KeyboardInterrupt):
    """A comparison stopped between runs by its caller (explain --test-hypotheses: its time budget is spent): the
    runs that finished are kept and the others recorded as not started, with `reason`, as after a Ctrl-C."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class PlannedRun:
    """One run of a comparison: a mode, and with several device counts (`compare --devices 1,2,4`) its count. A run
    the mode refuses (`refused`: the one line why, from hloscope.backends.devices.check_devices) is recorded without
    starting anything."""

    mode: str
    devices: int | None = None  # None: the comparison has one device count (the options' own); folders named by mode
    refused: str | None = None
    replicate: int = 1  # which fresh process of this configuration (`compare --repeats K`: 1..K)
    # One of several configurations of the same mode (`hloscope calibrate`: "A", "A'", "A+3ms"): its name, used in
    # its folder's and its label's, and the RunOptions fields it sets.
    variant: str | None = None
    changes: tuple[tuple[str, Any], ...] = ()

    @property
    def dir_name(self) -> str:
        name = run_dir_name(self.mode, self.devices)
        if self.variant is not None:
            name += "-" + "".join(c if c.isalnum() else "_" for c in self.variant)
        return name if self.replicate == 1 else f"{name}-r{self.replicate}"

    @property
    def label(self) -> str | None:
        """The name comparison.json and explain give this configuration when it is a variant of its mode."""
        return f"{self.mode} [{self.variant}]" if self.variant is not None else None

    def options(self, options_for: Callable[[str], RunOptions]) -> RunOptions:
        options = options_for(self.mode)
        if self.changes:
            options = dataclasses.replace(options, **dict(self.changes))
        return options if self.devices is None else dataclasses.replace(options, devices=self.devices)


@dataclass
class ModeOutcome:
    mode: str
    returncode: int | None
    wall_s: float
    stderr_log: Path


def run_command(options: RunOptions, comparison_dir: Path, name: str | None = None) -> list[str]:
    """`python -m hloscope run ...` for one mode, writing its run directory inside the comparison directory (named
    `name`, by default the mode's folder name)."""
    mode = get_mode(options.mode)
    command = [sys.executable, "-m", "hloscope", "run", "--mode", mode.framework, "--model", options.model,
               "--batch-size", str(options.batch_size), "--steps", str(options.steps), "--warmup", str(options.warmup),
               "--precision", options.precision, "--device", options.device, "--data", options.data,
               "--seed", str(options.seed), "--out", str(comparison_dir), "--run-id", name or mode.dir_name,
               "--profile-steps", str(options.profile_steps), "--json"]
    command += ["--compile-model"] if mode.compile else []
    command += ["--dump-hlo"] if options.dump_hlo else []
    command += ["--profile"] if options.profile else []
    command += ["--keep-all"] if options.keep_all else []
    command += ["--target", options.target] if options.target else []
    command += ["--max-batch", "--max-batch-compiles", str(options.max_batch_compiles)] if options.max_batch else []
    command += ["--check-parity"] if options.check_parity else []
    command += ["--seq-len", str(options.seq_len)] if options.seq_len else []
    command += ["--attention", options.attention] if options.attention != "eager" else []
    command += ["--optimizer", options.optimizer] if options.optimizer != "sgd" else []
    command += ["--devices", str(options.devices)] if options.devices > 1 else []
    command += ["--inject-host-delay", str(options.inject_host_delay_ms)] if options.inject_host_delay_ms > 0 else []
    command += [] if options.donate is None else ["--donate" if options.donate else "--no-donate"]
    command += ["--compile-mode", options.compile_mode] if options.compile_mode is not None else []
    command += ["--fullgraph"] if options.fullgraph else []
    command += ["--threads", str(options.threads)] if options.threads is not None else []
    # one argument, `=` attached: a value starting with `--` is never read as an option of its own
    command += [f"--xla-flags={options.xla_flags}"] if options.xla_flags is not None else []
    return command


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "did not finish"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (killed: out of memory?)" if -returncode == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exited with code {returncode}"


def stderr_tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def child_phase(run_dir: Path) -> str:
    """Where a running child is, from the run.json it keeps up to date: starting, warming up, timed window."""
    try:
        record = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "starting"
    return record.get("phase") or ("setting up and compiling" if record.get("status") == "running" else "finishing")


def run_mode(options: RunOptions, comparison_dir: Path, timeout_s: float | None = None,
             on_poll: Callable[[str], None] = lambda phase: None, name: str | None = None) -> ModeOutcome:
    """Run one mode to completion in a child process, reporting its phase to `on_poll` about twice a second.
    A Ctrl-C reaches the child too (same process group): the child records `interrupted`, we wait for it, re-raise."""
    logs = comparison_dir / "logs"
    name = name or get_mode(options.mode).dir_name
    stderr_log = logs / f"{name}.stderr.log"
    # HLOSCOPE_STOPPED_BY_SIGINT: the child takes SIGINT as its stop request even if it inherited SIGINT ignored
    env = dict(os.environ, HLOSCOPE_NO_PROGRESS="1", PYTHONUNBUFFERED="1", HLOSCOPE_STOPPED_BY_SIGINT="1")
    start = time.perf_counter()
    log_file: BinaryIO
    try:
        # a new file of its own, never over one or through a link (-2, -3, ... when the name is taken)
        own_folder(logs, "a mode's stderr log")
        stderr_log, log_file = create_numbered(
            logs, lambda n: f"{name}.stderr.log" if n == 1 else f"{name}-{n}.stderr.log")
    except (OSError, InputError) as error:  # a full disk, a link planted as logs/: the mode runs without its log
        why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        _warn_once(f"cannot write {stderr_log}: {why}; the mode runs without its stderr log")
        log_file = open(os.devnull, "wb")  # noqa: SIM115 - closed by the `with` below
    with log_file as err:
        child = subprocess.Popen(run_command(options, comparison_dir, name), stdout=subprocess.DEVNULL, stderr=err, env=env)
        _CHILDREN.append(child)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            returncode = None
            while returncode is None:
                try:
                    returncode = child.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    if deadline is not None and time.monotonic() > deadline:
                        child.kill()
                        child.wait()
                        break
                    on_poll(child_phase(comparison_dir / name))
        except KeyboardInterrupt:
            try:
                child.wait(timeout=30)
            except (subprocess.TimeoutExpired, KeyboardInterrupt):
                child.kill()
                child.wait()
            raise
    return ModeOutcome(options.mode, returncode, time.perf_counter() - start, stderr_log)


def settle_run(options: RunOptions, comparison_dir: Path, outcome: ModeOutcome | None, status: str = "failed",
               reason: str | None = None, name: str | None = None) -> RunRecord:
    """The mode's final run record. A child that died before writing its final run.json gets one written for it."""
    run_dir = comparison_dir / (name or get_mode(options.mode).dir_name)
    record = None
    if (run_dir / RUN_FILE).is_file():
        try:
            # the parent completes the child's record (every key kept, with the dumps a cut-short run left)
            record = load_run(run_dir, check_artifacts=False)
        except InputError:
            record = None
    if record is not None and record.status != "running":
        if record.status == "failed" and outcome is not None:
            record = amended_run(record, {"stderr_tail": stderr_tail(outcome.stderr_log)})
        if any(a.leftover for a in record.artifacts):  # dumps of an interrupted run: list them
            _write_run_or_warn(run_dir, record)
        return record
    if reason is None and outcome is not None:
        reason = describe_exit(outcome.returncode) if outcome.returncode is not None else "timed out"
    run_dir.mkdir(exist_ok=True)
    parts: dict[str, Any] = {"status": status, "error": reason}
    if outcome is not None:
        parts["stderr_tail"] = tail = stderr_tail(outcome.stderr_log)
        if tail and status == "failed":
            parts["error"] = f"{reason}; stderr ends with: {tail.splitlines()[-1]}"
    if record is None:
        record = unfinished_run(run_dir / RUN_FILE, run_dir.name, options.mode, options.to_json(), status, reason)
    listed = {a.path for a in record.artifacts}
    leftovers = [a for a in leftover_dumps(run_dir) if a["path"] not in listed]  # killed or timed out
    record = amended_run(record, parts, leftovers)
    _write_run_or_warn(run_dir, record)
    return record


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warn(message)


def _write_run_or_warn(run_dir: Path, record: RunRecord) -> None:
    """A run record the parent settles: a full disk keeps it in memory (and in comparison.json when that can be
    written) with one warning, and the next modes are still tried."""
    try:
        write_run(run_dir, record)
    except OutputError as error:
        _warn_once(f"{error}; {record.mode} is recorded as {record.status} in comparison.json only")


class _ComparisonWriter:
    """comparison.json rewritten after each mode. The first write must succeed (nothing has run yet); a later one
    that fails (disk full) is one warning and the modes go on; the final write raises OutputError (exit 2) if the
    disk is still full, and readers then find comparison.json `running` with no live writer and read every run
    directory in it (rundir.load_comparison)."""

    def __init__(self, comparison_dir: Path):
        self.comparison_dir = comparison_dir
        self.failed: OutputError | None = None

    def write(self, comparison: ComparisonRecord, final: bool = False) -> None:
        try:
            write_comparison(self.comparison_dir, comparison)
            self.failed = None
        except OutputError as error:
            if final:
                raise OutputError(f"{error} (every finished run is in its run directory under {self.comparison_dir}; "
                                  "explain, trace stats and hlo stats read them from there)") from None
            self.failed = error
            _warn_once(f"{error}; going on with the next modes")


def summary_entry(record: RunRecord, outcome: ModeOutcome | None) -> ComparisonEntry:
    """comparison.json's entry for a run: its outcome and summary (a compiled --target run: what XLA generated)."""
    timing, memory = record.timing, record.memory
    peak = memory.device_peak_bytes
    devices = record.config.devices
    compiled = record.status == "compiled"  # --target: not timed; what XLA generated and the roofline's lower bound
    target_peak = memory.target_peak if compiled else None
    max_batch = record.max_batch if compiled else None  # --max-batch
    return ComparisonEntry(
        mode=record.mode, dir=record.dir.name, status=record.status, error=record.error,
        median_s=timing.median_s, mean_s=timing.mean_s, p10_s=timing.p10_s, p90_s=timing.p90_s, std_s=timing.std_s,
        window_mean_s=timing.window_mean_s, steps=len(timing.step_times_s), first_step_s=timing.first_step_s,
        throughput_img_s=timing.throughput_img_s,
        peak_memory_bytes=peak if peak is not None else memory.peak_host_rss_bytes,
        peak_memory_source="device" if peak is not None else ("host_rss" if record.section("memory") else None),
        recompiled_in_window=record.compiles.recompiled_in_window, loss_first=record.loss.first,
        loss_last=record.loss.last, noisy=timing.noisy, warnings=list(record.warnings),
        devices=devices if isinstance(devices, int) else None,
        # --check-parity: the probe before the first step, as run.json holds it
        parity=record.parity,
        kernels=record.kernels.kernel_launches if compiled else None,
        roofline_lower_bound_s=record.roofline.serial_s if compiled else None,
        target_peak_bytes=target_peak.peak_bytes if target_peak is not None else None,
        target_usable_bytes=target_peak.usable_bytes if target_peak is not None else None,
        max_batch=max_batch.batch_size if max_batch is not None else None,
        max_batch_at_least=max_batch.at_least if max_batch is not None else None,
        max_batch_message=max_batch.message if max_batch is not None else None,
        returncode=outcome.returncode if outcome is not None else None,
        wall_s=outcome.wall_s if outcome is not None else None,
        stderr_log=str(outcome.stderr_log.relative_to(outcome.stderr_log.parent.parent)) if outcome is not None else None,
        stderr_tail=record.stderr_tail if record.stderr_tail and record.status != "ok" else None)


def add_ratios(entries: list[ComparisonEntry]) -> list[ComparisonEntry]:
    """The entries with each one's ratio to the fastest successful mode's median (None for the others)."""
    medians = [e.median_s for e in entries if e.status == "ok" and e.median_s]
    fastest = min(medians) if medians else None
    return [msgspec.structs.replace(entry, ratio_to_fastest=entry.median_s / fastest
                                    if entry.status == "ok" and entry.median_s and fastest else None)
            for entry in entries]


_CHILDREN: list[subprocess.Popen] = []  # the mode running now: a SIGTERM / SIGHUP to compare is passed on to it


def _terminate_like_ctrl_c() -> dict:
    """SIGTERM and SIGHUP (a closed terminal, `kill`, a batch system) end `compare` the way Ctrl-C does: the running
    child gets SIGINT (it records `interrupted` with its steps), the modes that finished stay listed, and
    comparison.json says `interrupted`. Returns the previous handlers (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum, frame):
        for child in _CHILDREN:
            if child.poll() is None:
                try:
                    child.send_signal(signal.SIGINT)
                except OSError:
                    pass
        raise KeyboardInterrupt

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is not None:
            previous[number] = signal.signal(number, handler)
    return previous


def _restore_signals(previous: dict) -> None:
    for number, handler in previous.items():
        signal.signal(number, handler)


def refused_entry(planned: PlannedRun, options: RunOptions) -> ComparisonEntry:
    """comparison.json's entry for a (mode, device count) the mode refuses: no run directory, the one line why."""
    if planned.refused is None:  # only refused runs have an entry made here
        raise RuntimeError(f"{planned.mode}: not a refused run")
    return ComparisonEntry(mode=planned.mode, dir=planned.dir_name, status="refused", error=planned.refused,
                           devices=options.devices, steps=0)


def interleaved(plan: list[PlannedRun], repeats: int) -> list[PlannedRun]:
    """`repeats` rounds of the plan, each run a fresh process, round-robin with the order rotated by one each round:
    a drift in the machine's load (another job starting, the CPU warming up) then falls on every configuration alike
    instead of on whichever ran last."""
    if repeats <= 1 or not plan:
        return list(plan)
    rounds = []
    for index in range(repeats):
        shift = index % len(plan)
        rounds += [dataclasses.replace(planned, replicate=index + 1) for planned in plan[shift:] + plan[:shift]]
    return rounds


def configurations(entries: list[ComparisonEntry], steps_by_dir: dict[str, list[float]]) -> list[Configuration]:
    """comparison.json `configurations`: the processes of each mode (and device count) pooled: how many were timed,
    each one's median, the pooled median and the spread between processes (max - min of their medians, absolute and
    relative to the pooled median; None with fewer than two timed processes: unmeasured)."""
    groups: dict[tuple[str, Any], list[ComparisonEntry]] = {}
    for entry in entries:
        groups.setdefault((str(entry.mode), entry.devices), []).append(entry)
    out = []
    for (mode, devices), members in groups.items():
        timed = [steps_by_dir[e.dir] for e in members if e.status == "ok" and steps_by_dir.get(e.dir)]
        medians = [median(steps) for steps in timed]
        pooled = median([t for steps in timed for t in steps]) if timed else None
        spread = max(medians) - min(medians) if len(medians) >= 2 else None
        out.append(Configuration(mode=mode, processes=len(members), timed_processes=len(timed),
                                 dirs=[e.dir for e in members], median_s=pooled, process_medians_s=medians,
                                 between_process_spread_s=spread,
                                 between_process_spread=spread / pooled if spread is not None and pooled else None,
                                 devices=devices))
    return out


def between_process_control(rows: list[Configuration]) -> BetweenProcessControl | None:
    """The A/A control: the largest relative spread between processes of one configuration, i.e. the smallest gap
    (as a fraction of a step) this comparison can tell from the machine's own variation; None when unmeasured."""
    measured = [row for row in rows if row.between_process_spread is not None]
    if not measured:
        return None
    worst = max(measured, key=lambda row: row.between_process_spread or 0.0)
    return BetweenProcessControl(
        relative=worst.between_process_spread, configuration=worst.mode, processes=worst.timed_processes,
        meaning="the largest spread between processes of one configuration: gaps smaller than this fraction of a step "
                "cannot be told from the machine's own variation in this comparison")


def _name(entry: ComparisonEntry, planned: PlannedRun, repeats: int) -> ComparisonEntry:
    """A comparison entry's process number (several per configuration) and variant label."""
    if repeats > 1:
        entry = msgspec.structs.replace(entry, replicate=planned.replicate)
    if planned.label is not None:
        entry = msgspec.structs.replace(entry, mode=planned.label, variant=planned.variant)
    return entry


def run_comparison(modes: list[str], options_for: Callable[[str], RunOptions], comparison_dir: Path, config: dict,
                   on_mode_start: Callable[[str], None] = lambda mode: None,
                   on_mode_phase: Callable[[str, str], None] = lambda mode, phase: None,
                   on_mode_done: Callable[[ComparisonEntry], None] = lambda entry: None,
                   timeout_s: float | None = None, audit_before: AuditStage | None = None,
                   plan: list[PlannedRun] | None = None, repeats: int = 1,
                   should_stop: Callable[[PlannedRun], str | None] = lambda planned: None) -> ComparisonRecord:
    """Run `modes` one after another (or the runs of `plan`: each mode at each device count), `repeats` fresh
    processes of each, interleaved (see `interleaved`); comparison.json is rewritten after each so a Ctrl-C keeps
    what finished. A refused run is recorded as `refused` and the others go on; it does not make the comparison
    partial. `should_stop`, asked before each run, stops the comparison there with its reason (StopRequested)."""
    plan = interleaved(plan if plan is not None else [PlannedRun(mode) for mode in modes], repeats)
    steps_by_dir: dict[str, list[float]] = {}
    entries: list[ComparisonEntry] = []  # comparison.json `modes`, one entry per run as it settles
    audit: Audit | None = None
    if audit_before is not None:  # compare's fairness audit (hloscope/runs/audit.py), made before timing
        audit = Audit(before_timing=audit_before, ok=audit_before.ok)
    comparison = functools.partial(comparison_record, comparison_dir / COMPARISON_FILE, config,
                                   comparison_id=comparison_dir.name,
                                   started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), audit=audit)
    writer = _ComparisonWriter(comparison_dir)
    # nothing has run yet: a full disk here is one line, exit 2
    write_comparison(comparison_dir, comparison(entries, status="running"))
    previous = _terminate_like_ctrl_c()
    named = lambda planned: {"name": planned.dir_name}  # noqa: E731
    try:
        for planned in plan:
            options = planned.options(options_for)
            if planned.refused is not None:
                entry = refused_entry(planned, options)
            else:
                reason = should_stop(planned)
                if reason is not None:
                    raise StopRequested(reason)
                on_mode_start(planned.label or planned.mode)
                outcome = run_mode(options, comparison_dir, timeout_s,
                                   on_poll=functools.partial(on_mode_phase, planned.mode), **named(planned))
                record = settle_run(options, comparison_dir, outcome, **named(planned))
                entry = summary_entry(record, outcome)
                if record.timing.step_times_s:
                    steps_by_dir[entry.dir] = list(record.timing.step_times_s)
            entries = add_ratios([*entries, _name(entry, planned, repeats)])
            writer.write(comparison(entries, status="running"))
            on_mode_done(entries[-1])
    except KeyboardInterrupt as stop:
        stopped = stop.reason if isinstance(stop, StopRequested) else "the comparison was interrupted (Ctrl-C)"
        for planned in plan[len(entries):]:
            options = planned.options(options_for)
            if planned.refused is not None:
                entries.append(refused_entry(planned, options))
                continue
            started = (comparison_dir / planned.dir_name).is_dir()
            record = settle_run(options, comparison_dir, None, status="interrupted",
                                reason="interrupted by the user (Ctrl-C)" if started else
                                f"not started: {stopped}", **named(planned))
            entries.append(_name(summary_entry(record, None), planned, repeats))
        try:
            writer.write(comparison(add_ratios(entries), status="interrupted",
                                    finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())), final=True)
        except OutputError as error:
            _warn_once(str(error))
        raise
    finally:
        _restore_signals(previous)
    statuses = [e.status for e in entries if e.status != "refused"]
    status = ("ok" if statuses and all(s in ("ok", "compiled") for s in statuses) else
              "partial" if any(s in ("ok", "compiled") for s in statuses) else "failed")
    finished_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows = configurations(entries, steps_by_dir)
    if audit is not None and audit_before is not None:
        from hloscope.runs.audit import timed_audit  # cycle: audit imports runner

        # with several device counts the audit compares the modes at the count it set them up at (the smallest): the
        # device count, and with it XLA_FLAGS or WORLD_SIZE, differs between a mode's runs by design
        audited = plan[0].devices if plan else None
        timed = timed_audit(comparison_dir, [e for e in entries if (audited is None or e.devices == audited)
                                             and (e.replicate or 1) == 1])  # one process per mode
        audit = msgspec.structs.replace(audit, timed_runs=timed, ok=bool(audit_before.ok and timed.ok))
    parity = None
    if config.get("check_parity"):
        # every run, a mode's runs at several device counts each under its own name (the same first step at every N);
        # a refused count ran nothing to check
        by_devices = bool(plan) and plan[0].devices is not None
        parity = evaluate([(run_label(str(e.mode), e.devices) if by_devices else str(e.mode), e.parity)
                           for e in entries if e.status != "refused" and (e.replicate or 1) == 1],
                          config.get("precision", "fp32"))
    final = comparison(entries, status=status, finished_at=finished_at, configurations=rows,
                       between_process_spread=between_process_control(rows), parity=parity, audit=audit)
    writer.write(final, final=True)
    return final


def run_variants(mode: str, options: RunOptions, variants: dict[str, dict[str, Any]], directory: Path,
                 repeats: int, timeout_s: float | None = None,
                 on_start: Callable[[str], None] = lambda label: None) -> ComparisonRecord:
    """Several configurations of one mode, each `options` with some fields changed (`variants`: name -> RunOptions
    fields), each in `repeats` fresh processes interleaved as compare runs modes, into one comparison directory whose
    labels are `mode [name]`: `hloscope calibrate` and the known-answer experiments of explain."""
    plan = [PlannedRun(mode, variant=name, changes=tuple(changes.items())) for name, changes in variants.items()]
    config = {k: v for k, v in options.to_json().items() if k not in ("mode", "compile_model")}
    config.update(modes=[mode], repeats=repeats, variants=variants)
    return run_comparison([mode], lambda name: options, directory, config, on_mode_start=on_start,
                          timeout_s=timeout_s, plan=plan, repeats=repeats)
