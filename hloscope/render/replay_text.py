"""`hloscope replay` on the terminal: the replay record (replay.json) as lines of text."""

from __future__ import annotations

from msgspec import UnsetType

from hloscope.render import fmt
from hloscope.runs.replay_record import ReplayRecord, Trajectory

_ms = fmt.ms


def trajectory_line(trajectory: Trajectory) -> str:
    """One line for the terminal."""
    if not isinstance(trajectory.error, UnsetType):
        return f"loss trajectory not checked: {trajectory.error}"
    pairs = ", ".join(f"{a:.6f}/{b:.6f}" for a, b in zip(trajectory.run_losses or [], trajectory.replay_losses or []))
    verdict = "same as the run" if trajectory.ok else "DIFFERS from the run"
    return (f"loss trajectory from the run's saved state and batches (run/replay): {pairs}: {verdict} (largest "
            f"relative difference {trajectory.max_relative_difference:.1e}, tolerance {trajectory.rtol:g})")


def render_text(record: ReplayRecord) -> str:
    """The record in lines of text, ending with where it was recorded (`written`)."""
    source, lines = record.source, []
    what = f"{source.mode} run {source.run_id}" if source.run_id else source.path
    device = record.device
    lines.append(f"replay of {what} on {device.platform} ({device.kind}), compiled by {record.compiler.replay.xla}")
    run_xla = record.compiler.run.xla if record.compiler.run else None
    if run_xla:
        lines.append(f"  the run was compiled by {run_xla}")
    for skipped in record.skipped:
        lines.append(f"  not replayed: {skipped.reason}")
    timing = record.timing
    if timing:
        lines.append(f"  replayed step: median {_ms(timing.median_s)} (p10 {_ms(timing.p10_s)}, p90 "
                     f"{_ms(timing.p90_s)}, {timing.steps} steps after {record.config.warmup} warm-up; "
                     f"first {_ms(timing.first_step_s)})")
    for module in record.modules:
        parts = [f"{module.parameters} parameters", f"{module.fed_back} fed back ({module.fed_back_from})",
                 f"{module.replay_fusions} fusions in jaxlib's compile"]
        if not isinstance(module.run_fusions, UnsetType):
            parts.append(f"{module.run_fusions} in the run's")
        if not isinstance(module.median_s, UnsetType):
            parts.insert(0, f"median {_ms(module.median_s)} alone")
        lines.append(f"  module {module.module}: " + ", ".join(parts))
    comparison = record.comparison
    if comparison:
        low, high = comparison.overhead_ci_s
        overhead = (f": {comparison.overhead_note}" if comparison.overhead_anomaly else
                    f" = framework overhead {_ms(comparison.overhead_s)} (95% {_ms(low)} to {_ms(high)})")
        lines.append(f"  run's step {_ms(comparison.run_median_s)} - program {_ms(comparison.replay_median_s)}"
                     f"{overhead}; replay/run {comparison.replay_over_run:.2f}")
    if record.trajectory:
        lines.append(f"  {trajectory_line(record.trajectory)}")
    framework = record.framework_device
    if framework and not isinstance(framework.device_busy_s, UnsetType):
        replayed = None if isinstance(framework.replay_median_s, UnsetType) else framework.replay_median_s
        lines.append(f"  the run's own device time per profiled step {_ms(framework.device_busy_s)} (its XLA) vs "
                     f"replay {_ms(replayed)} (jaxlib's XLA)")
    elif framework and framework.note:
        lines.append(f"  {framework.note}")
    if record.profile:
        lines.append(f"  profile: {', '.join(record.profile.xplane) or 'no xplane written'}")
    for warning in record.warnings:
        lines.append(f"  warning: {warning}")
    lines.append(f"  recorded in {record.written}" if record.written else
                 "  not recorded (the directory is not writable)")
    return "\n".join(lines)
