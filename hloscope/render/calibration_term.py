"""`hloscope calibrate` on the terminal: three lines a user can act on, then the verdict on this machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from hloscope.render import fmt

if TYPE_CHECKING:  # at run time only its attributes are read
    from hloscope.runs.calibration_record import Calibration


def lines(result: Calibration) -> list[tuple[str, bool]]:
    """(line, good) for the smallest resolvable gap, the A/A pair and the injected delay."""
    out = []
    if result.resolvable_gap_s is not None and result.resolvable_gap_relative is not None:
        out.append((f"smallest gap this machine resolves here: {fmt.ms(result.resolvable_gap_s)} per step "
                    f"({result.resolvable_gap_relative:.1%} of {fmt.ms(result.baseline_step_s)}; from how far processes "
                    f"of one configuration landed apart, {result.processes} per configuration)", True))
    else:
        out.append(("smallest resolvable gap: unmeasured (one process per configuration: use --repeats 3)", False))
    gap = fmt.signed_ms(result.identical_gap_s) if result.identical_gap_s is not None else "-"
    out.append((f"A/A pair (identical options): {result.identical_verdict or 'not timed'}, gap {gap}"
                + (" - called different: explain's verdicts are not to be trusted on this machine now"
                   if result.identical_called_different else ""), not result.identical_called_different))
    gap = fmt.signed_ms(result.delay_gap_s) if result.delay_gap_s is not None else "-"
    where = (f", {fmt.ms(result.delay_found_s)} found in the ledger, most in {result.delay_node}"
             if result.delay_node else ", not found in any host-side part of the ledger")
    slept = f" (slept {fmt.ms(result.delay_slept_s)})" if result.delay_slept_s is not None else ""
    out.append((f"injected host delay {fmt.ms(result.delay_s)}{slept}: {result.delay_verdict or 'not timed'}, "
                f"gap {gap}{where}", result.delay_found))
    return out


def render(result: Calibration, console: Console) -> None:
    for line, good in lines(result):
        console.print(Text.assemble(("ok   " if good else "FAIL ", "green" if good else "red"), line), highlight=False)
    for note in result.notes:
        console.print(Text(f"note: {note}", style="dim"), highlight=False)
    verdict = ("explain can be trusted at these settings on this machine now" if result.trustworthy else
               "explain's verdicts at these settings are not reliable on this machine now: more --repeats, more "
               "--steps, or a quieter machine")
    console.print(Text(verdict, style="bold green" if result.trustworthy else "bold red"), highlight=False)
