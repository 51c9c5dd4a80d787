"""What explain takes from a run's replay record (hloscope.runs.replay_record): the step split into the program on the
device (its replayed median, measured) and the framework's overhead (step minus replay, with a bootstrap interval over
both samples), and between two XLA modes, the gap split into program difference and overhead difference. Without a
replay the split is inferred from the profile (device busy vs idle time) and says so."""

from __future__ import annotations

from statistics import median

from hloscope.modes import MODES
from hloscope.runs.replay_record import ReplayUnread, overhead_anomaly, unsteady_sides
from hloscope.significance import median_difference, median_gap_difference

XLA_MODES = tuple(mode.name for mode in MODES if mode.xla)  # the modes whose step is an XLA program to replay
INFERRED_NOTE = ("no replay.json: the program/overhead split is inferred from the profile's device busy and idle time "
                 "(run `hloscope replay RUN_DIR` to measure it)")


def _is_xla(summary) -> bool:
    return str(summary.mode).startswith(XLA_MODES) or summary.kernels is not None


def split(summary, reference) -> dict | None:
    """The `replay` field of a mode's explain entry (None for a mode without an XLA program)."""
    if not _is_xla(summary) or not summary.step_times_s:
        return None
    replay = summary.replay
    if replay is None or isinstance(replay, ReplayUnread):
        out: dict = {"measured": False,
                     "note": INFERRED_NOTE if replay is None else f"{replay.error}; {INFERRED_NOTE}"}
        if summary.device_busy_s is not None and summary.profiled_step_s is not None:
            out.update(program_s=summary.device_busy_s, overhead_s=summary.profiled_step_s - summary.device_busy_s,
                       source="profile: device busy / idle per profiled step")
        return out
    program = replay.program_times_s
    overhead = median_difference(summary.step_times_s, program)
    if overhead is None:  # both samples have steps: step_times_s checked above, read_replay keeps no empty replay
        raise RuntimeError(f"{summary.mode}: no steps to set the replay against")
    out = {"measured": True, "file": replay.file, "program_s": median(program),
           "overhead_s": overhead.estimate, "overhead_ci_s": overhead.as_list(),
           **overhead_anomaly(overhead.estimate, unsteady_sides(summary.noisy, summary.host_scheduling,
                                                                replay.noisy)).keys(),
           "compiler": replay.compiler, "run_compiler": replay.run_compiler, "skipped_modules": list(replay.skipped)}
    if summary.device_busy_s is not None and summary.profiled_step_s is not None:
        inferred = summary.profiled_step_s - summary.device_busy_s
        low, high = overhead.as_list()
        out["inferred_overhead_s"] = inferred
        out["inferred_within_interval"] = low <= inferred <= high
    other_replay = reference.replay
    if reference is not summary and _is_xla(reference) and other_replay is not None \
            and not isinstance(other_replay, ReplayUnread):
        other = other_replay.program_times_s
        program_gap = median_difference(program, other)
        if program_gap is None:  # read_replay keeps no replay without steps (an empty one is unread)
            raise RuntimeError(f"{reference.mode}: a replay without steps")
        out["against_baseline"] = {
            "program_gap_s": program_gap.estimate, "program_gap_ci_s": program_gap.as_list(),
            **_overhead_gap(summary.step_times_s, program, reference.step_times_s, other)}
    return out


def _overhead_gap(step_a: list[float], prog_a: list[float], step_b: list[float], prog_b: list[float]) -> dict:
    """(median step_a - median prog_a) - (median step_b - median prog_b), percentile bootstrap over the four samples."""
    gap = median_gap_difference(step_a, prog_a, step_b, prog_b)
    return {"overhead_gap_s": gap.estimate, "overhead_gap_ci_s": gap.as_list()}
