"""The replay record (`replay.json`, `replay-2.json`, ... in a run directory) as typed data: its sections, where it
is written, how it is validated, and what analyses read of it. `hloscope replay` (hloscope/replay/runner.py) builds a
ReplayRecord and writes it with `write_replay`; explain reads it through `read_replay` only, so that neither imports
the other.

The record is versioned with run.json and comparison.json (records.SCHEMA_VERSION). Units follow docs/api.md:
durations in seconds (fields ending in `_s`). A key the record holds only in some replays (the loss trajectory, the
timing of a replay with no module replayed, a module's own median) is UNSET where it is absent, so that `to_dict()`
writes exactly the keys, in the order, that replay wrote.
"""

from __future__ import annotations

import os
import re
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from hloscope.errors import InputError
from hloscope.runs.records import SCHEMA_VERSION, HostScheduling, Number, convert_section
from hloscope.runs.rundir import create_numbered, load_record, write_json_atomic
from hloscope.typed import Record

KIND = "replay"
# replay.json, then replay-2.json, ... (a replay never overwrites an earlier record); at most 9 digits: a file named
# with thousands of them is no record of ours, and int() of it would be refused.
REPLAY_NAME = re.compile(rf"^{KIND}(?:-(\d{{1,9}}))?\.json$")
STATUSES = ("running", "ok", "partial", "not_replayable", "failed")
# The optional sections of a record: null or of this type (rundir.load_record checks them).
SHAPE: dict[str, type] = {"source": dict, "config": dict, "device": dict, "compiler": dict, "timing": dict,
                          "comparison": dict, "framework_device": dict, "modules": list, "skipped": list,
                          "warnings": list}
# Sections a record may hold as null (hand-made or older records): read as absent. `comparison` is written as null
# when the replay has no run to set against, and read so.
_NULL_IS_ABSENT = frozenset(SHAPE) - {"comparison"} | {"trajectory", "loss", "profile"}
_WHAT = "replay record"


def replay_name(number: int, module_file: str | None = None) -> str:
    """The file name of a run's `number`th replay record: replay.json, replay-2.json, ... (REPLAY_NAME matches them);
    beside a module file named `module_file`, <module_file>.replay.json, <module_file>.replay-2.json, ..."""
    stem = KIND if module_file is None else f"{module_file}.{KIND}"
    return f"{stem}.json" if number == 1 else f"{stem}-{number}.json"


class ReplaySource(msgspec.Struct, frozen=True, kw_only=True):
    """What was replayed: the path given, and for a run directory the run's id, mode, batch size and label count
    (null for a module file)."""

    path: str | None = None
    run_id: str | None = None
    mode: str | None = None
    batch_size: int | None = None
    num_labels: int | None = None


class ReplayConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The options the replay was made with (`hloscope replay`)."""

    device: str | None = None  # cpu | cuda
    steps: int | None = None  # timed executions
    warmup: int | None = None  # untimed executions first, the compile among them
    seed: int | None = None
    profile: bool | None = None


class ReplayDevice(msgspec.Struct, frozen=True, kw_only=True):
    """The jax device the program was replayed on: its platform (cpu, gpu), kind, and how many the client has."""

    platform: str | None = None
    kind: str | None = None
    count: int | None = None


class ReplayXla(msgspec.Struct, frozen=True, kw_only=True):
    """The XLA that compiled the replay: jaxlib's, with the versions of jax and jaxlib and the client's platform."""

    xla: str | None = None  # "jaxlib <version>"
    jax: str | None = None
    jaxlib: str | None = None
    platform_version: str | None = None


class RunXla(msgspec.Struct, frozen=True, kw_only=True):
    """The XLA that compiled the run replayed: the framework's own (torch_xla's bundled one) or jaxlib's."""

    mode: str | None = None
    xla: str | None = None  # null: a mode whose program XLA does not compile


class ReplayCompilers(msgspec.Struct, frozen=True, kw_only=True):
    """Which XLA compiled what: the replay's, and for a run directory the run's and whether they are the same."""

    replay: ReplayXla = msgspec.field(default_factory=ReplayXla)
    run: RunXla | UnsetType = UNSET  # absent for a module file
    same_compiler: bool | UnsetType = UNSET


class ReplayModule(msgspec.Struct, frozen=True, kw_only=True):
    """One replayed module, in execution order: its file, how its state is fed back from step to step (outputs that
    alias inputs), its compile, and what each XLA made of it (fusions and instructions after optimization)."""

    module: str
    file: str
    format: str  # "hlo" | "mlir"
    parameters: int
    outputs: int
    fed_back: int  # parameters fed from the previous step's outputs
    fed_back_from: str  # "input_output_alias" | "matching shapes" | "none"
    donated: int  # parameters the module donates
    compile_s: Number  # jaxlib's compile of it
    replay_fusions: int
    replay_instructions: int
    median_s: Number | UnsetType = UNSET  # several modules: its own median step, timed alone
    run_fusions: int | UnsetType = UNSET  # the run's own optimized HLO of it, when the run kept it
    run_instructions: int | UnsetType = UNSET


class SkippedModule(msgspec.Struct, frozen=True, kw_only=True):
    """A module of the run that was not replayed, and why (one line, naming it)."""

    module: str | None = None
    file: str | None = None
    reason: str


class Trajectory(msgspec.Struct, frozen=True, kw_only=True):
    """The loss-trajectory check (hloscope/replay/trajectory.py): the run's saved program replayed from the run's
    saved state on its saved batches gives the losses the run recorded, within the tolerance of its precision; or why
    it was not checked (`error`, with what was read before it)."""

    file: str  # the saved inputs, relative to the run directory
    steps: int | UnsetType = UNSET
    run_losses: list[Number] | UnsetType = UNSET
    replay_losses: list[Number] | UnsetType = UNSET
    max_relative_difference: Number | UnsetType | None = UNSET
    rtol: Number | UnsetType = UNSET  # the relative tolerance of the run's precision
    precision: str | UnsetType = UNSET
    ok: bool
    error: str | UnsetType = UNSET


class ReplayTiming(msgspec.Struct, frozen=True, kw_only=True):
    """The replayed step timed as `hloscope run` times one (hloscope.backends.timing): run.json's timing keys a
    replay measures, in its order."""

    step_times_s: list[Number] = []
    warmup_times_s: list[Number] = []
    first_step_s: Number | None = None  # the first execution, which follows the compile
    steps: int | None = None
    median_s: Number | None = None
    mean_s: Number | None = None
    p10_s: Number | None = None
    p90_s: Number | None = None
    std_s: Number | None = None
    min_s: Number | None = None
    max_s: Number | None = None
    # images per second at the median (absent for a module file: no batch size; null: a step of no duration)
    throughput_img_s: Number | UnsetType | None = UNSET
    window_s: Number | None = None  # the timed window, from its first step's start to its last step's end
    window_mean_s: Number | None = None
    noisy: bool | None = None  # the timed steps spread widely (a busy machine): see warnings


class ReplayLoss(msgspec.Struct, frozen=True, kw_only=True):
    """The loss output of the first module with one: at the first step and the last timed one (null: no loss)."""

    first: Number | None = None
    last: Number | None = None
    finite: bool | None = None


class ReplayProfile(msgspec.Struct, frozen=True, kw_only=True):
    """`--profile`: the steps run under jax.profiler after the timing, where their trace went, and its xplane files."""

    steps: int | UnsetType = UNSET
    warmup_steps: int | UnsetType = UNSET
    logdir: str | None = None
    xplane: list[str] = []


class ReplayComparison(msgspec.Struct, frozen=True, kw_only=True):
    """The run's timed step against the replayed program: the framework's overhead (run median - replay median) with
    its 95% bootstrap interval, or, flagged as an anomaly, why it cannot be measured here (overhead_anomaly)."""

    run_median_s: Number
    replay_median_s: Number | None = None
    overhead_s: Number
    overhead_ci_s: list[Number]  # [low, high]
    overhead_anomaly: bool | None = None
    overhead_note: str | UnsetType = UNSET  # why the overhead is not measurable here (an anomaly only)
    replay_over_run: Number | None = None
    method: str | None = None


class FrameworkDevice(msgspec.Struct, frozen=True, kw_only=True):
    """The run's own device time per profiled step (its profile, as explain reads it) beside the replay's median of
    the same program; or, with every figure absent, why there is none (`note`)."""

    device_busy_s: Number | UnsetType | None = UNSET
    profiled_step_s: Number | UnsetType | None = UNSET
    device_idle_s: Number | UnsetType | None = UNSET
    replay_median_s: Number | UnsetType | None = UNSET
    source: str | UnsetType = UNSET
    replay_minus_framework_device_s: Number | UnsetType | None = UNSET
    note: str | UnsetType = UNSET


class ReplayRecord(Record, frozen=True, kw_only=True):
    """replay.json: one replay of a run directory's train-step program(s), or of one module file. Its fields are the
    file's keys in their order; `to_dict()` is the JSON `hloscope replay` writes (and, with `written`, prints)."""

    schema_version: int = SCHEMA_VERSION
    kind: str = KIND
    status: str  # ok | partial (a module not replayed) | not_replayable (none replayed); running while it is made
    created_at: str | None = None  # ISO 8601, UTC, to the second
    source: ReplaySource = msgspec.field(default_factory=ReplaySource)
    config: ReplayConfig = msgspec.field(default_factory=ReplayConfig)
    device: ReplayDevice = msgspec.field(default_factory=ReplayDevice)
    compiler: ReplayCompilers = msgspec.field(default_factory=ReplayCompilers)
    modules: list[ReplayModule] = msgspec.field(default_factory=list)
    skipped: list[SkippedModule] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    inputs: str | None = None  # how the program's inputs were made, in words
    trajectory: Trajectory | UnsetType = UNSET  # runs with saved step inputs (--dump-hlo of the JAX modes)
    timing: ReplayTiming | UnsetType = UNSET  # absent when no module was replayed
    loss: ReplayLoss | UnsetType = UNSET
    profile: ReplayProfile | UnsetType = UNSET  # --profile
    comparison: ReplayComparison | UnsetType | None = UNSET  # null: no run timing to set the replay against
    framework_device: FrameworkDevice | UnsetType = UNSET  # a run directory's replay
    # where `hloscope replay` recorded it (null: the directory was not writable): set on the record replay returns
    # and `replay --json` prints, never in the file itself
    written: str | UnsetType | None = UNSET


def decode_replay(file: Path, document: dict[str, Any]) -> ReplayRecord:
    """The typed replay record of a JSON document (`file`: where it came from, named in errors). A section of the
    wrong shape is one InputError naming the file and the field; keys this hloscope does not know are ignored."""
    body = {key: value for key, value in document.items() if not (value is None and key in _NULL_IS_ABSENT)}
    if not isinstance(body.get("status"), str):
        raise InputError(file, f"not a valid {_WHAT}: 'status' is missing or not a string")
    parts = {info.name: _typed(file, info.encode_name, info.type, body[info.encode_name])
             for info in msgspec.structs.fields(ReplayRecord) if info.encode_name in body}
    return ReplayRecord(**parts)


def _typed(file: Path, key: str, kind: Any, value: Any) -> Any:
    """One top-level key of a record as its type; a list item by item, so that an error names the item:
    'modules[2].compile_s'."""
    if typing.get_origin(kind) is list and isinstance(value, list):
        (item,) = typing.get_args(kind)
        return [convert_section(file, part, item, f"{key}[{index}]", _WHAT) for index, part in enumerate(value)]
    return convert_section(file, value, kind, key, _WHAT)


def load_replay(path: Path) -> ReplayRecord:
    """Read and validate a replay record, as run.json is (rundir.load_record: a JSON object of kind replay, a known
    schema version and status, durations and counts that make sense), typed. Raises InputError naming the file for
    a record that cannot be read or is not valid."""
    return decode_replay(path, load_record(path, _WHAT, KIND, STATUSES, SHAPE))


def write_replay(record: ReplayRecord, run_dir: Path | None, source: Path) -> ReplayRecord:
    """Write `record` under a new name: replay.json in the run directory (<file>.replay.json beside a module file),
    else the first of replay-2.json, ... that nothing holds, never over a file and never through a link
    (rundir.create_numbered reserves it; the record then replaces that empty file of ours). The record with `written`
    set to the file, or to None with a warning saying why when the directory cannot take it."""
    folder, module_file = (run_dir, None) if run_dir is not None else (source.parent, source.name)
    try:
        target, reserved = create_numbered(folder, lambda n: replay_name(n, module_file))
        reserved.close()
        write_json_atomic(target, record.to_dict())
    except OSError as error:
        return msgspec.structs.replace(record, warnings=[*record.warnings, f"replay.json not written: {error}"],
                                       written=None)
    return msgspec.structs.replace(record, written=str(target))


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
    """A replay record (latest_replay gives a run's newest), validated (load_replay) and reduced to what explain uses;
    a valid record with no replayed step is a ReplayUnread saying so. Raises InputError naming the file for a record
    that cannot be read or is not valid: it is never half used."""
    record = load_replay(path)
    timing = record.timing or ReplayTiming()
    times = [float(t) for t in timing.step_times_s if t > 0]
    if not times:
        return ReplayUnread(f"{path.name} has no replayed steps (status {record.status})")
    run = record.compiler.run
    return ReplaySummary(file=path.name, program_times_s=times, device=record.device.platform,
                         compiler=record.compiler.replay.xla, run_compiler=run.xla if run else None,
                         skipped=[skipped.reason for skipped in record.skipped], noisy=timing.noisy is True)


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


class OverheadFlag(typing.NamedTuple):
    """Whether a measured overhead (step minus replayed program) is an anomaly rather than an overhead, and why."""

    anomaly: bool
    note: str | None = None

    def keys(self) -> dict[str, object]:
        """The record's keys for it: `overhead_anomaly`, and `overhead_note` when there is one."""
        return {"overhead_anomaly": self.anomaly, **({"overhead_note": self.note} if self.note is not None else {})}


def overhead_anomaly(overhead_s: float, unsteady: Sequence[str] = ()) -> OverheadFlag:
    """The flag every measured overhead (step minus replayed program) carries. It is an anomaly, not an overhead,
    when the program alone is slower than the whole step (a busy machine, another compile), or when a side was timed
    under load (`unsteady`, from unsteady_sides): the two are timed minutes apart in different processes, so a load
    that came and went moves their difference either way. The note says so."""
    if unsteady:
        return OverheadFlag(True, f"{'; '.join(unsteady)}: overhead not measurable here")
    if overhead_s >= 0:
        return OverheadFlag(False)
    return OverheadFlag(True, f"replay slower than the run by {-overhead_s * 1e3:.3f} ms: overhead not measurable here")
