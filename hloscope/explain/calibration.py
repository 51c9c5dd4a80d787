"""What `hloscope calibrate` concludes from its three configurations of one mode, each run in several processes: A,
A' (the same options again: an A/A pair) and A with a known host delay injected before every step (outside any
annotation, so nothing in the trace says where it is). Pure: reads explain's report, no I/O; the record it
returns is hloscope/runs/calibration_record.py's.

- the smallest gap this machine resolves at these settings: the one explain states for the A/A pair
  (`resolvable_gap_s`: its process-level test, the spreads between processes and the practical minimum), or, where
  that is unmeasured, the largest spread between processes of one configuration at A's median step;
- whether explain called the A/A pair different (it must not);
- whether it found the delay: a significant gap, and significant host-side parts of the ledger (device idle while the
  host ..., or host time on a host-only trace) that add up to the delay the host really slept (the runs measure it:
  a loaded machine wakes a sleeping host late), and in which node most of it landed.
"""

from __future__ import annotations

from collections.abc import Iterable

from hloscope.explain.report import ExplainReport, ModeResult
from hloscope.runs.calibration_record import Calibration

# The delay counts as found at its size when the host-side parts found for it are within this fraction of what the
# device waited for (a sleep never ends early but may end late on a loaded machine: the larger of the sleep the runs
# measured and the timed gap).
DELAY_TOLERANCE = 0.25
HOST_NODES = ("idle:", "host:")


def calibration(report: ExplainReport, mode: str, identical: str, delayed: str, delay_s: float,
                slept_s: float | None = None) -> Calibration:
    """The calibration of `mode` from explain's report on its configurations (labels `identical` and `delayed`,
    explained against A as the baseline); `slept_s`: the sleep the delayed runs measured (runs.rundir
    measured_host_delay_s), else the delay asked for stands for it."""
    base = next((m for m in report.modes if m.verdict == "baseline"), None)
    same, slow = _find(report, identical), _find(report, delayed)
    noise = report.process_noise
    base_step = base.step_time_s if base is not None else None
    # the A/A pair's own statement (its process-level test and spreads), else the control at the baseline's median
    resolvable = (same.resolvable_gap_s if same is not None and same.resolvable_gap_s is not None
                  else noise.relative * base_step if noise is not None and base_step is not None else None)
    notes = []
    if noise is None:
        notes.append("each configuration ran in one process: the smallest resolvable gap is unmeasured")
    parts = host_side_parts((c.node, c.seconds, c.significant) for c in (slow.contributors if slow else []))
    found_s = sum(parts.values())
    slept = slept_s if slept_s is not None else delay_s
    found = slow is not None and delay_found(slow.verdict, found_s, slept, slow.gap_s)
    if slow is not None and slow.verdict == "slower" and not found:
        notes.append(f"the delay's gap was significant but the host-side parts of the ledger add up to "
                     f"{found_s * 1e3:.3f} ms against {slept * 1e3:.3f} ms slept ({delay_s * 1e3:.3f} ms asked for)")
    called = same is not None and same.verdict not in (None, "no significant difference", "baseline")
    return Calibration(
        mode=mode, processes=(base.processes or 1) if base is not None else 0, baseline_step_s=base_step,
        resolvable_gap_s=resolvable,
        resolvable_gap_relative=resolvable / base_step if resolvable is not None and base_step else None,
        identical_verdict=same.verdict if same else None, identical_gap_s=same.gap_s if same else None,
        identical_gap_ci_s=same.gap_ci_s if same else None, identical_called_different=called,
        delay_s=delay_s, delay_slept_s=slept_s, delay_verdict=slow.verdict if slow else None, delay_gap_s=slow.gap_s if slow else None,
        delay_gap_ci_s=slow.gap_ci_s if slow else None, delay_found_s=found_s,
        delay_node=max(parts, key=lambda node: parts[node]) if parts else None, delay_nodes=parts,
        delay_found=found, trustworthy=found and not called and same is not None, notes=notes)


def host_side_parts(contributors: Iterable[tuple[str, float, bool]]) -> dict[str, float]:
    """node -> seconds of the ledger parts, given as (node, seconds, significant), that a host delay lands in: the
    significant host-side nodes (device idle for a host cause, or host time) that grew."""
    return {node: seconds for node, seconds, significant in contributors
            if significant and node.startswith(HOST_NODES) and seconds > 0}


def delay_found(verdict: str | None, found_s: float, slept_s: float, gap_s: float | None) -> bool:
    """Whether a delayed configuration's verdict and host-side parts (`found_s`, summed) find a host delay that slept
    `slept_s`: the gap is "slower", and the parts are within DELAY_TOLERANCE of the sleep or of what the device waited
    for (a sleep never ends early but may end late on a loaded machine: the larger of the sleep and the timed gap)."""
    waited = max(slept_s, gap_s or 0.0)
    return verdict == "slower" and min(abs(found_s - slept_s), abs(found_s - waited)) <= DELAY_TOLERANCE * waited


def _find(report: ExplainReport, label: str) -> ModeResult | None:
    return next((m for m in report.modes if m.mode == label), None)
