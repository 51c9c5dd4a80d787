"""Run one mode end to end and keep its run.json truthful whatever happens.

The record is written when the run starts (status `running`), and again when it ends: `ok`, `failed` with the error,
or `interrupted` (Ctrl-C) with every step measured so far. Writes are atomic (see rundir.write_json_atomic).
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from hloscope.backends import memory_ledger, scheduling
from hloscope.backends.base import RunOptions, Session
from hloscope.backends.data import PARITY_BATCH
from hloscope.backends.devices import prepare_environment
from hloscope.backends.startup_ledger import RESHAPE_WARNING, StartupLedger, reshape_hook
from hloscope.backends.timing import StepLog, noise_warning, rank_timing, run_loop, step_statistics
from hloscope.errors import HloscopeError
from hloscope.machine import limit_threads
from hloscope.modes import FRAMEWORK_IMPORTS, get_mode, resolve
from hloscope.runs import xla_flags
from hloscope.runs.environment import collect_environment, env_vars
from hloscope.runs.records import Compiles, Environment, Loss, Parity, RunParts, run_document, timing_document
from hloscope.runs.rundir import write_run

# Test hook (documented in docs/run.md): HLOSCOPE_TEST_CRASH="<mode>:<how>[,<mode>:<how>...]" makes that mode fail on
# purpose right after its setup, so tests can check that compare reports the failure and completes the other modes.
# how: raise (Python exception), abort (SIGABRT, like a native crash), segv (SIGSEGV), kill (SIGKILL, like the
# out-of-memory killer), interrupt (KeyboardInterrupt after two timed steps, like Ctrl-C).
TEST_CRASH_ENV = "HLOSCOPE_TEST_CRASH"
# Test hook (documented in docs/run.md): HLOSCOPE_TEST_PRECISION="<mode>:<precision>[,...]" runs that mode in another
# --precision than the rest of a comparison: a deliberately unfair comparison, for checking the fairness audit.
# Recorded in config.precision and as a warning.
TEST_PRECISION_ENV = "HLOSCOPE_TEST_PRECISION"


# The frameworks a run process may have loaded (environment.frameworks_imported): every mode's, and TensorFlow, which
# none needs (transformers would load it if let).
FRAMEWORK_MODULES = (*FRAMEWORK_IMPORTS, "tensorflow")


class ModeFailed(HloscopeError):
    """The mode raised; its run.json says `failed` with the error."""

    exit_code = 1


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def new_parts(options: RunOptions, run_dir: Path) -> RunParts:
    """The record of a run starting (status `running`): its settings and the machine it runs on."""
    return RunParts(run_id=run_dir.name, mode=options.mode, started_at=_now(), config=options.to_json(),
                    environment=msgspec.convert(collect_environment(), Environment))


def new_record(options: RunOptions, run_dir: Path) -> dict:
    """run.json of a run starting (new_parts), as a document."""
    return run_document(new_parts(options, run_dir))


def _write(run_dir: Path, parts: RunParts) -> dict:
    """The record as it stands, written; returns its document."""
    record = run_document(parts)
    write_run(run_dir, record)
    return record


def host_delay_warning(delay_ms: float) -> str:
    """run.json's warning for --inject-host-delay: the steps are longer on purpose, not a real measurement."""
    return (f"--inject-host-delay {delay_ms:g}: every step sleeps {delay_ms:g} ms on the host before its device work "
            "is dispatched, injected on purpose: the step times are not the mode's own")


def load_session(options: RunOptions, run_dir: Path) -> Session:
    """Import the mode's Session class (its module imports its framework) and build it."""
    return resolve(get_mode(options.mode).session)(options, run_dir)


def _crash_hook(mode: str) -> str | None:
    for spec in os.environ.get(TEST_CRASH_ENV, "").split(","):
        target, _, how = spec.strip().partition(":")
        if target == mode and how:
            return how
    return None


def _trigger(how: str | None) -> None:
    """The test hook's crash before the first step (none, or "interrupt", which _timed_steps raises later)."""
    if not how or how == "interrupt":
        return
    if how == "raise":
        raise RuntimeError(f"{TEST_CRASH_ENV}: simulated failure")
    sys.stderr.write(f"{TEST_CRASH_ENV}: simulating {how}\n")
    sys.stderr.flush()
    if how == "abort":
        os.abort()
    if how == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)


def _diff_counts(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {key: after.get(key, 0) - before.get(key, 0) for key in after}


def set_timing(parts: RunParts, window_measured: bool | None = None, profiled: bool | None = None,
               **fields: object) -> None:
    """Fields of the run's typed timing changed, and whether its timed window closed (its host scheduling is then
    recorded, null when unmeasured) and steps were profiled."""
    parts.timing = msgspec.structs.replace(parts.timing, **fields)
    parts.window_measured = parts.window_measured if window_measured is None else window_measured
    parts.profiled = parts.profiled if profiled is None else profiled


def fill_timing(parts: RunParts, log: StepLog, batch_size: int) -> None:
    """The timed steps and their summary into the run's timing, and the loss part."""
    fields: dict[str, Any] = {"step_times_s": list(log.step_times_s), "warmup_times_s": list(log.warmup_times_s),
                              "first_step_s": log.first_step_s,
                              **step_statistics(log.step_times_s, batch_size, log.window_s)}
    if log.host_sleeps_s is not None:  # --inject-host-delay: how long each timed step really slept
        fields["injected_host_delay_s"] = list(log.host_sleeps_s)
    if log.window_s is None and log.step_times_s:  # interrupted inside the window: the steps that finished
        fields["window_mean_s"] = sum(log.step_times_s) / len(log.step_times_s)
    set_timing(parts, **fields)
    losses = list(log.losses)
    if losses:
        first, last = losses[0], losses[-1]
        parts.loss = Loss(first=first, last=last, finite=all(math.isfinite(x) for x in losses),
                          falling=len(losses) > 1 and last < first)


def parity_probe(session: Session, options: RunOptions) -> Parity:
    """run.json `parity`: the mode's probe (loss, gradient and weight norms on the shared first batch, initial
    weights) with what it was computed on; a mode without a probe, or whose probe raised, records why."""
    started = time.perf_counter()

    def probed(**figures: Any) -> Parity:
        return Parity(precision=options.precision, seed=options.seed, batch=PARITY_BATCH, attention=options.attention,
                      **figures)

    try:
        probe = session.parity()
    except NotImplementedError as error:
        return probed(error=str(error))
    # The framework's probe may raise anything: a parity failure, not a lost timing
    except Exception as error:  # noqa: BLE001
        return probed(error=f"{type(error).__name__}: {error}".splitlines()[0])
    return probed(**probe, seconds=round(time.perf_counter() - started, 3))


def _precision_hook(mode: str) -> str | None:
    for spec in os.environ.get(TEST_PRECISION_ENV, "").split(","):
        target, _, precision = spec.strip().partition(":")
        if target == mode and precision:
            return precision
    return None


def rank_sequence(options: RunOptions, run_dir: Path) -> None:
    """A data-parallel rank other than 0 (hloscope.backends.ddp): what `execute` runs, in the same order (every
    collective of a step is matched across ranks), without run.json: setup, the parity probe, the warm-up and timed
    steps, the gathering of step times, the profile."""
    session = load_session(options, run_dir)
    try:
        session.setup()
        if options.check_parity:
            session.parity()
        log = StepLog()
        run_loop(session.step, session.wait, session.loss_of, options.steps, options.warmup, log)
        session.rank_step_times(list(log.step_times_s))
        if options.profile:
            session.profiling = True
            session.profile(options.profile_steps)
    finally:
        session.close()


def _late_environment(parts: RunParts, session: Session) -> None:
    """Device and precision facts of a run that did not finish, when setup got far enough to know them."""
    if "framework" in parts.framework:
        return
    try:
        parts.framework.update(session.info())
    # a framework half set up may raise anything here; the run's own error is what run.json must keep
    except Exception:  # noqa: BLE001, S110
        pass


def _finished(parts: RunParts, status: str, error: str | None, startup: StartupLedger, run_dir: Path) -> dict:
    """The record's last fields, written: status, error, the frameworks imported, the startup ledger."""
    # Which frameworks this process imported: a JAX run must not pay for importing torch, and vice versa.
    parts.frameworks_imported = sorted(m for m in FRAMEWORK_MODULES if m in sys.modules)
    parts.status, parts.error, parts.finished_at, parts.phase = status, error, _now(), None
    parts.startup = startup.record()
    return _write(run_dir, parts)


def _timed_steps(session: Session, options: RunOptions, log: StepLog, parts: RunParts, run_dir: Path,
                 startup: StartupLedger, interrupt: bool, on_step: Callable[[str, int], None]) -> dict[str, int]:
    """The warm-up and timed steps into `log`, with the timed window's host scheduling and, for DDP, every rank's
    times in the run's parts; returns the compile counters as the window opened. `interrupt`: the test hook that stops
    the run after two timed steps."""
    counts: dict[str, dict[str, int]] = {}
    window: list[scheduling.Window] = []

    def window_start() -> None:
        counts["before"] = session.compile_counts()
        startup.window_opening()
        session.window_starting()
        # Say where the run is (outside the timed region): a run killed from now on was past its compile.
        parts.phase = "timed window"
        _write(run_dir, parts)
        window.append(scheduling.Window())  # last: the processes' and threads' counters as the window opens

    def step_done(phase: str, index: int) -> None:
        if interrupt and phase == "timed" and len(log.step_times_s) >= 2:
            raise KeyboardInterrupt
        if index == 0:
            startup.first_step_done(log.first_step_s)
        on_step(phase, index)

    startup.first_step_started()
    run_loop(session.step, session.wait, session.loss_of, options.steps, options.warmup, log,
             on_window_start=window_start, on_step=step_done,
             slept=session.take_host_sleep if options.inject_host_delay_ms > 0 else None)
    host_scheduling = window[0].finish() if window else None  # first: as close to the window's end as can be
    if window:
        startup.window_closed()
    set_timing(parts, window_measured=True, host_scheduling=host_scheduling,
               host_scheduling_note=scheduling.NOT_MEASURED if window and host_scheduling is None else None)
    per_rank = session.rank_step_times(list(log.step_times_s))  # DDP: every rank's, gathered after the window
    if per_rank:
        log.step_times_s[:], ranks = rank_timing(per_rank, options.batch_size // len(per_rank))
        set_timing(parts, ranks=ranks,
                   step_is="the slowest rank's time of each step (timing.ranks: each rank's own)")
    return counts["before"]


def _deliberate_changes(options: RunOptions, forced_precision: str | None, reshape: bool) -> list[str]:
    """Warnings for what this run changes on purpose: a test hook's precision or batch, an injected host delay."""
    messages = []
    if forced_precision:
        messages.append(f"{TEST_PRECISION_ENV}: {options.mode} runs in {forced_precision} on purpose (test hook)")
    if options.inject_host_delay_ms > 0:
        messages.append(host_delay_warning(options.inject_host_delay_ms))
    if reshape:
        messages.append(RESHAPE_WARNING)
    return messages


def _compiles(before: dict[str, int], after: dict[str, int]) -> Compiles:
    """run.json `compiles`: the counters before the timed window, in it, and in all."""
    in_window = _diff_counts(after, before)
    return Compiles(before_window=before, in_window=in_window, total=after,
                    recompiled_in_window=any(v > 0 for v in in_window.values()))


def _profile(session: Session, steps: int, parts: RunParts, run_dir: Path) -> None:
    """The profiled steps, after the timed window: their times, the profile's record and its files."""
    parts.phase = "profiling"
    _write(run_dir, parts)
    session.profiling = True
    try:
        result = session.profile(steps)
    finally:
        session.profiling = False
    # --inject-host-delay: how long each profiled step really slept
    set_timing(parts, profiled=True, profiled_step_times_s=result.step_times_s,
               profiled_injected_host_delay_s=result.host_sleeps_s)
    parts.profile = result.record()
    parts.artifacts.extend(result.artifacts)


def execute(options: RunOptions, run_dir: Path,
            on_step: Callable[[str, int], None] = lambda phase, index: None,
            warn: Callable[[str], None] = lambda message: None, setup_only: bool = False) -> dict:
    """Run `options.mode` into `run_dir` (which exists and is empty) and return the final record. `setup_only`
    (compare's fairness audit): set the mode up, record the settings in effect (status `setup`) and stop: no step.

    Raises MissingDependency (framework not installed), ModeFailed (the mode raised) or KeyboardInterrupt, always
    after writing run.json.
    """
    xla_flags.apply(options.xla_flags)  # before any framework starts, and before the record notes the environment
    limit_threads(options.threads)  # --threads: the CPU affinity and OMP_NUM_THREADS, before any framework starts
    forced_precision = _precision_hook(options.mode)
    if forced_precision:
        options = dataclasses.replace(options, precision=forced_precision)
    parts = new_parts(options, run_dir)
    reshape = reshape_hook(options.mode)
    for message in _deliberate_changes(options, forced_precision, reshape):
        parts.warnings.append(message)
        warn(message)
    _write(run_dir, parts)
    log = StepLog()
    session: Session | None = None
    crash = _crash_hook(options.mode)
    entry = get_mode(options.mode)
    startup = StartupLedger(options.mode, entry.framework, entry.compile, time.perf_counter, options.dump_hlo)

    def finish(status: str, error: str | None = None) -> dict:
        fill_timing(parts, log, options.batch_size)
        if status != "ok" and session is not None:
            _late_environment(parts, session)
        return _finished(parts, status, error, startup, run_dir)

    try:
        started = time.perf_counter()
        prepare_environment(options.mode, options.devices, options.threads)  # --devices N: XLA_FLAGS before JAX is imported
        startup.restart()
        session = load_session(options, run_dir)
        startup.imported()
        session.trim_batch_from = max(options.warmup, 1) + 1 if reshape else None
        session.setup()
        startup.setup_done()
        # what setup set (XLA_FLAGS for a dump, PJRT_DEVICE, ...)
        parts.environment = msgspec.structs.replace(parts.environment, env=env_vars())
        set_timing(parts, setup_s=time.perf_counter() - started)
        if setup_only:
            parts.framework.update(session.info())
            parts.graph = getattr(session, "graph", {})
            return finish("setup")
        if options.check_parity:  # before the first step: the weights are still the initial ones
            parts.parity = parity_probe(session, options)
            _write(run_dir, parts)
        _trigger(crash)
        before = _timed_steps(session, options, log, parts, run_dir, startup,
                              interrupt=crash == "interrupt", on_step=on_step)
        parts.compiles = _compiles(before, session.compile_counts())
        if parts.compiles.recompiled_in_window:
            message = (f"{options.mode} compiled again inside the timed window ({parts.compiles.in_window}): "
                       "the step times include compilation; raise --warmup or look for changing shapes")
            parts.warnings.append(message)
            warn(message)
        parts.memory = session.memory()
        parts.memory_ledger = memory_ledger.measure(session, parts.memory)
        fill_timing(parts, log, options.batch_size)
        noisy = noise_warning(timing_document(parts.timing, parts.window_measured, parts.profiled))
        set_timing(parts, noisy=noisy is not None)
        if noisy:
            parts.warnings.append(noisy)
            warn(noisy)
        if options.profile:
            _profile(session, options.profile_steps, parts, run_dir)
        parts.artifacts[:0] = session.artifacts()
        parts.framework.update(session.info())
        parts.graph = getattr(session, "graph", {})
        return finish("ok")
    except KeyboardInterrupt:
        finish("interrupted", "interrupted by the user (Ctrl-C); the steps measured so far are kept")
        raise
    except HloscopeError as error:  # missing package, impossible option: the user's one-line message, its exit code
        finish("failed", str(error))
        raise
    # The mode's boundary: any framework error is this run's recorded failure
    except Exception as error:  # noqa: BLE001
        parts.error_traceback = traceback.format_exc(limit=20)
        sys.stderr.write(parts.error_traceback)
        message = f"{type(error).__name__}: {error}".strip()
        finish("failed", message)
        raise ModeFailed(f"{options.mode} failed: {message.splitlines()[0] if message else type(error).__name__} "
                         f"(run.json in {run_dir})") from None
    finally:
        startup.close()
        if session is not None:
            try:
                session.close()
            # the framework's teardown may raise anything; it must not replace the run's outcome, already written
            except Exception:  # noqa: BLE001, S110
                pass
