"""The replay record (`replay.json`, `replay-2.json`, ... in a run directory): where it is, how it is validated, and
what analyses read of it, as typed data. `hloscope replay` (hloscope/replay/runner.py) writes it; explain reads it
through here only, so that neither imports the other.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hloscope.runs.records import HostScheduling
from hloscope.runs.rundir import load_record

# replay.json, then replay-2.json, ... (a replay never overwrites an earlier record); at most 9 digits: a file named
# with thousands of them is no record of ours, and int() of it would be refused.
REPLAY_NAME = re.compile(r"^replay(?:-(\d{1,9}))?\.json$")
STATUSES = ("running", "ok", "partial", "not_replayable", "failed")
# The optional sections of a record: null or of this type (rundir.load_record checks them).
SHAPE: dict[str, type] = {"source": dict, "config": dict, "device": dict, "compiler": dict, "timing": dict,
                          "comparison": dict, "framework_device": dict, "modules": list, "skipped": list,
                          "warnings": list}


@dataclass(frozen=True)
class ReplaySummary:
    """What explain uses of a run's newest replay: the replayed program's step times and which XLA compiled it."""

    file: str
    program_times_s: list[float]
    device: str | None = None  # platform the program was replayed on
    compiler: str | None = None  # the replay's XLA (jaxlib version)
    run_compiler: str | None = None  # the XLA of the run it replays
    skipped: list[str] = field(default_factory=list)  # modules not replayed, with why
    noisy: bool = False  # the replay flagged its timed steps as noisy


@dataclass(frozen=True)
class ReplayUnread:
    """A replay record that is there but cannot be used (unreadable, invalid, or with no replayed step): why."""

    error: str


def latest_replay(run_dir: str | os.PathLike[str]) -> Path | None:
    """The newest replay record of a run directory (replay.json, replay-2.json, ...: the highest number)."""
    best, number = None, -1
    try:
        names = os.listdir(run_dir)
    except OSError:
        return None
    for name in names:
        match = REPLAY_NAME.match(name)
        if match:
            n = int(match.group(1) or 1)
            if n > number:
                best, number = Path(run_dir) / name, n
    return best


def read_replay(path: Path) -> ReplaySummary | ReplayUnread:
    """A replay record (latest_replay gives a run's newest), validated as run.json is and reduced to what explain uses;
    a valid record with no replayed step is a ReplayUnread saying so. Raises InputError naming the file for a record
    that cannot be read or is not valid: it is never half used."""
    record = load_record(path, "replay record", "replay", STATUSES, SHAPE)
    timing = record.get("timing") or {}
    times = [float(t) for t in timing.get("step_times_s") or [] if isinstance(t, (int, float)) and t > 0]
    if not times:
        return ReplayUnread(f"{path.name} has no replayed steps (status {record.get('status')})")
    compiler = _section(record, "compiler")
    skipped = [str(s.get("reason")) for s in record.get("skipped") or [] if isinstance(s, dict)]
    return ReplaySummary(file=path.name, program_times_s=times, device=_text(_section(record, "device"), "platform"),
                         compiler=_text(_section(compiler, "replay"), "xla"),
                         run_compiler=_text(_section(compiler, "run"), "xla"), skipped=skipped,
                         noisy=timing.get("noisy") is True)


def _section(part: dict[str, object], key: str) -> dict[str, object]:
    value = part.get(key)
    return value if isinstance(value, dict) else {}


def _text(part: dict[str, object], key: str) -> str | None:
    value = part.get(key)
    return value if isinstance(value, str) else None


# The run's main thread waiting for a CPU this share of its timed window or more: its steps carry the machine's load.
CONTENDED_SHARE = 0.1


def unsteady_sides(run_noisy: object, run_host_scheduling: HostScheduling | None, replay_noisy: object) -> list[str]:
    """Why a run's steps and its replayed program's cannot be set against each other: the run's timed steps flagged
    noisy, its main thread waiting for a CPU (run.json `timing.host_scheduling`), the replay's steps flagged noisy."""
    reasons = ["run timing noisy"] if run_noisy is True else []
    if run_host_scheduling is not None:
        waiting, seconds = run_host_scheduling.main_thread.waiting_for_cpu_s, run_host_scheduling.seconds
        if waiting is not None and seconds and waiting / seconds >= CONTENDED_SHARE:
            reasons.append(f"run waited for a CPU {waiting / seconds:.0%} of its timed window")
    if replay_noisy is True:
        reasons.append("replay timing noisy")
    return reasons


def overhead_anomaly(overhead_s: float, unsteady: Sequence[str] = ()) -> dict[str, object]:
    """The flag every measured overhead (step minus replayed program) carries. It is an anomaly, not an overhead,
    when the program alone is slower than the whole step (a busy machine, another compile), or when a side was timed
    under load (`unsteady`, from unsteady_sides): the two are timed minutes apart in different processes, so a load
    that came and went moves their difference either way. `overhead_note` says so."""
    if unsteady:
        return {"overhead_anomaly": True, "overhead_note": f"{'; '.join(unsteady)}: overhead not measurable here"}
    if overhead_s >= 0:
        return {"overhead_anomaly": False}
    return {"overhead_anomaly": True, "overhead_note": f"replay slower than the run by {-overhead_s * 1e3:.3f} ms: "
                                                      "overhead not measurable here"}
