"""`compare --replay` and `hloscope replay COMPARISON_DIR`: each XLA mode's run of a comparison replayed in its own
subprocess (`python -m hloscope replay RUN_DIR --json`), one after another, so that a replay that fails, crashes or
hangs costs only its own entry: the comparison and the other replays are kept. Each replay writes its replay.json in
its run directory (which explain reads); comparison.json's mode entry gets a `replay` summary, or the error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from msgspec import UNSET, UnsetType

from hloscope.errors import InputError
from hloscope.modes import BY_NAME
from hloscope.runs.records import ComparisonEntry, ComparisonRecord
from hloscope.runs.replay_record import ReplayRecord, decode_replay
from hloscope.runs.rundir import comparison_run_dir, create_new_file, create_numbered, load_run, own_folder
from hloscope.runs.runner import STDERR_TAIL_LINES, describe_exit
from hloscope.runs.settings import device_platform


def replayable_entries(comparison: ComparisonRecord) -> list[ComparisonEntry]:
    """The mode entries of a comparison that a replay applies to: XLA modes (hloscope.modes `xla=True`) that ran; of
    a mode run in several processes (`--repeats`), the first (one program, replayed once)."""
    return [entry for entry in comparison.modes
            if entry.mode in BY_NAME and BY_NAME[entry.mode].xla and entry.status == "ok"
            and (entry.replicate or 1) == 1]


def replay_device(run_dir: Path, device: str) -> str:
    """cpu | cuda for the replay of a run: --device cuda/cpu as given; auto: the platform the run ran on."""
    if device in ("cpu", "cuda"):
        return device

    try:
        environment = load_run(run_dir, check_artifacts=False).environment
    except InputError:  # the replay itself names the unreadable run.json
        return "cpu"
    return "cuda" if device_platform(environment) == "gpu" else "cpu"


def replay_run(run_dir: Path, steps: int, warmup: int, device: str, timeout_s: float | None, log: Path,
               profile: bool = False, err: BinaryIO | None = None) -> dict:
    """Replay one run in a child process; its summary for comparison.json (status ok, partial, not_replayable,
    failed; `refused` when the child refused a file of the run as bad input, exit code 2). The child's stderr goes to
    `err`, a new file at `log` (`rundir.create_numbered`); without it `log` is created here, never over a file or
    through a link."""
    command = [sys.executable, "-m", "hloscope", "replay", str(run_dir), "--steps", str(steps), "--warmup",
               str(warmup), "--device", device, "--json"] + (["--profile"] if profile else [])
    env = dict(os.environ, HLOSCOPE_NO_PROGRESS="1", PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    try:
        handle = err if err is not None else create_new_file(log)
    except OSError as error:
        return {"status": "failed", "error": f"could not write its stderr log {log}: {error.strerror or error}"}
    with handle:
        try:
            child = subprocess.run(command, stdout=subprocess.PIPE, stderr=handle, env=env, timeout=timeout_s,
                                   check=False)
        except subprocess.TimeoutExpired:
            return _failed(f"timed out after {timeout_s:g} s", handle, log, start)
        except OSError as error:
            return {"status": "failed", "error": f"could not start the replay: {error.strerror or error}"}
        try:
            document = json.loads(child.stdout.decode("utf-8", "replace"))
        except ValueError:
            document = None
        if child.returncode == 2:  # bad input: a file of the run is damaged; the child named it in its last line
            return _refused(run_dir, handle, log, start)
        if not isinstance(document, dict) or child.returncode not in (0, 1):
            return _failed(_describe(child.returncode), handle, log, start)
        try:
            record = decode_replay(run_dir, document)
        except InputError as error:
            return _failed(f"the replay printed a record that cannot be read: {error}", handle, log, start)
        return _summary(record, log, start)


def _tail(handle: BinaryIO, lines: int = STDERR_TAIL_LINES) -> str:
    """The last lines the child wrote to its stderr log, read back through the handle it was given (never the log's
    name again: what is there now may not be the file replay made)."""
    try:
        handle.flush()
        end = os.fstat(handle.fileno()).st_size
        text = os.pread(handle.fileno(), 64 * 1024, max(0, end - 64 * 1024)).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _summary(record: ReplayRecord, log: Path, start: float) -> dict:
    """comparison.json's `replay` summary of a mode's replay record."""
    median = record.timing.median_s if record.timing else None
    comparison = record.comparison or None
    note = comparison.overhead_note if comparison else UNSET
    out: dict[str, Any] = {
        "status": record.status, "file": Path(record.written).name if record.written else None, "median_s": median,
        "overhead_s": comparison.overhead_s if comparison else None,
        "overhead_ci_s": comparison.overhead_ci_s if comparison else None,
        "overhead_anomaly": comparison.overhead_anomaly if comparison else None,
        "overhead_note": None if isinstance(note, UnsetType) else note, "wall_s": time.perf_counter() - start,
        "log": f"{log.parent.name}/{log.name}"}
    skipped = [skip.reason for skip in record.skipped]
    if skipped:
        out["skipped"] = skipped
    if record.status == "not_replayable":
        out["error"] = "; ".join(skipped) or "nothing in the run could be replayed"
    if record.trajectory:
        out["trajectory_ok"] = record.trajectory.ok
    return out


def _refused(run_dir: Path, handle: BinaryIO, log: Path, start: float) -> dict:
    """A replay the child refused as bad input (exit code 2): not replayable, `refused`, with the child's one line,
    which names the file."""
    tail = _tail(handle)
    last = tail.splitlines()[-1] if tail else f"{run_dir}: a file of the run cannot be read (the replay said no more)"
    return {"status": "not_replayable", "refused": True, "error": last.removeprefix("hloscope: error: "),
            "wall_s": time.perf_counter() - start, "log": f"{log.parent.name}/{log.name}"}


def _failed(reason: str, handle: BinaryIO, log: Path, start: float) -> dict:
    tail = _tail(handle)
    last = tail.splitlines()[-1] if tail else ""
    return {"status": "failed", "error": f"{reason}; stderr ends with: {last}" if last else reason,
            "stderr_tail": tail, "wall_s": time.perf_counter() - start, "log": f"{log.parent.name}/{log.name}"}


def _describe(returncode: int) -> str:
    return f"the replay {describe_exit(returncode)}"


def replay_comparison(comparison: ComparisonRecord, steps: int, warmup: int, device: str = "auto",
                      timeout_s: float | None = None, profile: bool = False,
                      on_start: Callable[[str], None] = lambda mode: None,
                      on_done: Callable[[str, dict], None] = lambda mode, replay: None,
                      ) -> list[tuple[ComparisonEntry, dict]]:
    """Replay every XLA mode's run of the comparison in turn: (its entry, the `replay` summary for that entry of
    comparison.json) for each (the caller writes comparison.json, or not). A run directory that is a link
    (`rundir.comparison_run_dir`) is refused as bad input (`refused`, never replayed) and the others are replayed; a
    `logs` that is a link or no folder (`rundir.own_folder`) is refused in one InputError before any replay."""
    logs = comparison.dir / "logs"
    try:
        own_folder(logs, "a replay's stderr log")
    except OSError:  # a full disk, a read-only comparison: each replay that cannot make its log says so in its entry
        pass
    done = []
    for entry in replayable_entries(comparison):
        mode = entry.mode or entry.dir
        on_start(mode)
        try:
            run_dir = comparison_run_dir(comparison.dir, entry.dir)
        except InputError as error:  # a link out of the comparison: refused as bad input, never replayed
            replay = {"status": "not_replayable", "refused": True, "error": str(error)}
            done.append((entry, replay))
            on_done(mode, replay)
            continue
        try:
            log, err = _new_log(logs, entry.dir)
        except OSError as error:
            replay = {"status": "failed", "error": f"could not write its stderr log in {logs}: "
                                                   f"{error.strerror or error}"}
        else:
            replay = replay_run(run_dir, steps, warmup, replay_device(run_dir, device), timeout_s, log, profile, err)
        done.append((entry, replay))
        on_done(mode, replay)
    return done


def _new_log(logs: Path, name: str) -> tuple[Path, BinaryIO]:
    """logs/<mode dir>.replay.stderr.log, or -2, -3, ... when the name is taken (never overwritten, never written
    through a link, a dangling one included): the path and its open handle."""
    return create_numbered(logs, lambda n: f"{name}.replay.stderr.log" if n == 1 else f"{name}.replay-{n}.stderr.log")
