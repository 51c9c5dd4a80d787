"""What explain takes from a run's replay record (hloscope.runs.replay_record): the step split into the program on the
device (its replayed median, measured) and the framework's overhead (step minus replay, with a bootstrap interval over
both samples), and between two XLA modes, the gap split into program difference and overhead difference. Without a
replay the split is inferred from the profile (device busy vs idle time) and says so."""

from __future__ import annotations

from statistics import median
from typing import TYPE_CHECKING

from msgspec import UNSET, UnsetType

from hloscope.modes import MODES
from hloscope.runs.replay_record import ReplayUnread, overhead_anomaly, unsteady_sides
from hloscope.significance import hierarchical_median_difference, median_difference, median_gap_difference
from hloscope.typed import Record

if TYPE_CHECKING:
    from hloscope.explain.summary import ModeSummary

XLA_MODES = tuple(mode.name for mode in MODES if mode.xla)  # the modes whose step is an XLA program to replay
INFERRED_NOTE = ("no replay.json: the program/overhead split is inferred from the profile's device busy and idle time "
                 "(run `hloscope replay RUN_DIR` to measure it)")


class ReplayGap(Record, frozen=True, kw_only=True):
    """Between two replayed XLA programs: the program gap (median replayed program minus the baseline's) and the
    overhead gap ((step - program) minus the baseline's), each with its 95% bootstrap interval."""

    program_gap_s: float
    program_gap_ci_s: list[float]
    overhead_gap_s: float
    overhead_gap_ci_s: list[float]


class ReplaySplit(Record, frozen=True, kw_only=True):
    """A run's step as the program on the device and the framework's overhead. `measured` True: from a replay record
    (`file`; the overhead is step minus replayed program, with its interval, flagged `overhead_anomaly` where it is not
    measurable). False: no usable replay, said in `note`; the profile's device busy and idle time per profiled step
    stand in (`source`) where there is a profile. Keys that a case does not have are UNSET, left out of `to_dict()`."""

    measured: bool
    note: str | UnsetType = UNSET  # inferred: why there is no measurement
    file: str | UnsetType = UNSET  # measured: the replay record
    program_s: float | UnsetType = UNSET
    overhead_s: float | UnsetType = UNSET
    overhead_ci_s: list[float] | UnsetType = UNSET
    overhead_anomaly: bool | UnsetType = UNSET
    overhead_note: str | UnsetType = UNSET  # why the overhead is not measurable (only with an anomaly)
    compiler: str | UnsetType | None = UNSET  # the replay's XLA
    run_compiler: str | UnsetType | None = UNSET  # the run's XLA
    skipped_modules: list[str] | UnsetType = UNSET
    source: str | UnsetType = UNSET  # inferred: where program_s and overhead_s come from
    # measured, with a profile: the profile's idle estimate of the overhead, and whether the interval holds it
    inferred_overhead_s: float | UnsetType = UNSET
    inferred_within_interval: bool | UnsetType = UNSET
    against_baseline: ReplayGap | UnsetType = UNSET  # both this run and the baseline replayed


def _is_xla(summary: ModeSummary) -> bool:
    return str(summary.mode).startswith(XLA_MODES) or summary.kernels is not None


def split(summary: ModeSummary, reference: ModeSummary) -> ReplaySplit | None:
    """The `replay` field of a mode's explain entry (None for a mode without an XLA program)."""
    if not _is_xla(summary) or not summary.step_times_s:
        return None
    replay = summary.replay
    if replay is None or isinstance(replay, ReplayUnread):
        note = INFERRED_NOTE if replay is None else f"{replay.error}; {INFERRED_NOTE}"
        if summary.device_busy_s is not None and summary.profiled_step_s is not None:
            return ReplaySplit(measured=False, note=note, program_s=summary.device_busy_s,
                               overhead_s=summary.profiled_step_s - summary.device_busy_s,
                               source="profile: device busy / idle per profiled step")
        return ReplaySplit(measured=False, note=note)
    program = replay.program_times_s
    # several processes: resample them, then their steps, as the gap's own interval does
    overhead = (hierarchical_median_difference(summary.processes, [program]) if len(summary.processes) > 1
                else median_difference(summary.step_times_s, program))
    if overhead is None:  # both samples have steps: step_times_s checked above, read_replay keeps no empty replay
        raise RuntimeError(f"{summary.mode}: no steps to set the replay against")
    flag = overhead_anomaly(overhead.estimate, unsteady_sides(summary.noisy, summary.host_scheduling, replay.noisy))
    inferred: float | UnsetType = UNSET
    within: bool | UnsetType = UNSET
    if summary.device_busy_s is not None and summary.profiled_step_s is not None:
        idle = summary.profiled_step_s - summary.device_busy_s
        low, high = overhead.as_list()
        inferred, within = idle, low <= idle <= high
    against: ReplayGap | UnsetType = UNSET
    other_replay = reference.replay
    if reference is not summary and _is_xla(reference) and other_replay is not None \
            and not isinstance(other_replay, ReplayUnread):
        other = other_replay.program_times_s
        program_gap = median_difference(program, other)
        if program_gap is None:  # read_replay keeps no replay without steps (an empty one is unread)
            raise RuntimeError(f"{reference.mode}: a replay without steps")
        overhead_gap = median_gap_difference(summary.step_times_s, program, reference.step_times_s, other)
        against = ReplayGap(program_gap_s=program_gap.estimate, program_gap_ci_s=program_gap.as_list(),
                            overhead_gap_s=overhead_gap.estimate, overhead_gap_ci_s=overhead_gap.as_list())
    return ReplaySplit(
        measured=True, file=replay.file, program_s=median(program), overhead_s=overhead.estimate,
        overhead_ci_s=overhead.as_list(), overhead_anomaly=flag.anomaly,
        overhead_note=flag.note if flag.note is not None else UNSET, compiler=replay.compiler,
        run_compiler=replay.run_compiler, skipped_modules=list(replay.skipped), inferred_overhead_s=inferred,
        inferred_within_interval=within, against_baseline=against)
