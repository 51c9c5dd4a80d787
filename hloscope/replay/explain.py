"""What explain takes from replays: a run's step split into the program on the device (its replayed median, measured)
and the framework's overhead (step minus replay, with a bootstrap interval over both samples), and between two XLA
modes, the gap split into program difference and overhead difference. Without a replay the split is inferred from the
profile (device busy vs idle time) and says so."""

from __future__ import annotations

import os
from statistics import median

from hloscope.modes import MODES

XLA_MODES = tuple(mode.name for mode in MODES if mode.xla)  # the modes whose step is an XLA program to replay
INFERRED_NOTE = ("no replay.json: the program/overhead split is inferred from the profile's device busy and idle time "
                 "(run `hloscope replay RUN_DIR` to measure it)")


def overhead_anomaly(overhead_s: float) -> dict:
    """The flag every measured overhead carries: a negative one (the program alone slower than the whole step: a busy
    machine, another compile) is a measurement anomaly, not an overhead; `overhead_note` says so in one phrase."""
    if overhead_s >= 0:
        return {"overhead_anomaly": False}
    return {"overhead_anomaly": True, "overhead_note": f"replay slower than the run by {-overhead_s * 1e3:.3f} ms: "
                                                      "overhead not measurable here"}


def replay_of(run_dir: str | os.PathLike) -> dict | None:
    """The newest replay record of a run directory, reduced to what explain uses; None when there is none. An
    unreadable one is returned as {"error": ...} so that explain can note it."""
    from hloscope.errors import HloscopeError
    from hloscope.files import load_json
    from hloscope.replay.runner import latest_replay

    path = latest_replay(run_dir)
    if path is None:
        return None
    try:
        record = load_json(path, "replay record")
        timing = record.get("timing") or {}
        times = [t for t in timing.get("step_times_s") or [] if isinstance(t, (int, float)) and t > 0]
    except (HloscopeError, AttributeError) as error:
        return {"error": f"{path.name} not read: {error}"}
    if not times:
        return {"error": f"{path.name} has no replayed steps (status {record.get('status')})"}
    compiler = record.get("compiler") or {}
    return {"file": path.name, "program_times_s": times, "device": (record.get("device") or {}).get("platform"),
            "compiler": (compiler.get("replay") or {}).get("xla"), "run_compiler": (compiler.get("run") or {}).get("xla"),
            "skipped": [s.get("reason") for s in record.get("skipped") or [] if isinstance(s, dict)]}


def _is_xla(summary) -> bool:
    return str(summary.mode).startswith(XLA_MODES) or summary.kernels is not None


def split(summary, reference) -> dict | None:
    """The `replay` field of a mode's explain entry (None for a mode without an XLA program)."""
    from hloscope.significance import median_difference

    if not _is_xla(summary) or not summary.step_times_s:
        return None
    replay = summary.replay
    if not replay or "error" in replay:
        out = {"measured": False, "note": INFERRED_NOTE if not replay else f"{replay['error']}; {INFERRED_NOTE}"}
        if summary.device_busy_s is not None and summary.profiled_step_s is not None:
            out.update(program_s=summary.device_busy_s, overhead_s=summary.profiled_step_s - summary.device_busy_s,
                       source="profile: device busy / idle per profiled step")
        return out
    program = replay["program_times_s"]
    overhead = median_difference(summary.step_times_s, program)
    if overhead is None:  # both samples have steps: step_times_s checked above, replay_of keeps no empty replay
        raise RuntimeError(f"{summary.mode}: no steps to set the replay against")
    out = {"measured": True, "file": replay["file"], "program_s": median(program),
           "overhead_s": overhead.estimate, "overhead_ci_s": overhead.as_list(), **overhead_anomaly(overhead.estimate),
           "compiler": replay.get("compiler"), "run_compiler": replay.get("run_compiler"),
           "skipped_modules": replay.get("skipped") or []}
    if summary.device_busy_s is not None and summary.profiled_step_s is not None:
        inferred = summary.profiled_step_s - summary.device_busy_s
        low, high = overhead.as_list()
        out["inferred_overhead_s"] = inferred
        out["inferred_within_interval"] = low <= inferred <= high
    if reference is not summary and _is_xla(reference) and reference.replay and "error" not in reference.replay:
        other = reference.replay["program_times_s"]
        program_gap = median_difference(program, other)
        if program_gap is None:  # replay_of keeps no replay without steps (an empty one is an "error")
            raise RuntimeError(f"{reference.mode}: a replay without steps")
        out["against_baseline"] = {
            "program_gap_s": program_gap.estimate, "program_gap_ci_s": program_gap.as_list(),
            **_overhead_gap(summary.step_times_s, program, reference.step_times_s, other)}
    return out


def _overhead_gap(step_a: list[float], prog_a: list[float], step_b: list[float], prog_b: list[float]) -> dict:
    """(median step_a - median prog_a) - (median step_b - median prog_b), percentile bootstrap over the four samples."""
    import numpy as np

    from hloscope.significance import CONFIDENCE, RESAMPLES, SEED

    estimate = (median(step_a) - median(prog_a)) - (median(step_b) - median(prog_b))
    rng = np.random.default_rng(SEED)

    def boot(values: list[float]):
        x = np.asarray(values, dtype=float)
        return np.median(x[rng.integers(0, len(x), (RESAMPLES, len(x)))], axis=1)

    samples = (boot(step_a) - boot(prog_a)) - (boot(step_b) - boot(prog_b))
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(samples, [tail, 1 - tail])
    return {"overhead_gap_s": estimate, "overhead_gap_ci_s": [float(low), float(high)]}
