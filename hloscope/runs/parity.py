"""--check-parity: do the modes of a comparison compute the same thing?

Each run under `--check-parity` starts from the same weights (the seeded PyTorch model's: the PyTorch modes and torchax
use that model directly, the JAX mode converts its state dict to Flax with transformers' own converter) and, before
its first step, probes the shared first batch: the loss, the global L2 norm of the gradients and of the weights
(run.json `parity`, written by the driver). This module compares those probes across the modes of a comparison
(comparison.json `parity`), with a tolerance that depends on the precision: fp32 must agree to float32 rounding
(different op orders and fused kernels), TF32 matmuls keep 10 mantissa bits, bf16 keeps 8.

Nothing here imports a framework.
"""

from __future__ import annotations

import math

from hloscope.runs.records import ComparisonParity, Parity, ParityFigures, ParityMode

# Relative tolerances per --precision: (loss, gradient norm). The weights' norm must agree to WEIGHTS_RTOL in every
# precision (the parameters are fp32 everywhere): a mismatch there means the modes did not start from the same weights.
# Measured on vit-tiny, batch 8, CPU: fp32 modes agree to 3e-7 (grad norm); bf16 (autocast / Flax bf16 compute) to 4e-5
# (loss) and 9e-4 (grad norm); the limits leave 50x room for larger models and GPUs, and still catch a loss computed in
# bf16 instead of fp32 (torchax's autocast before hloscope completed its policy: 3.6e-3 off).
TOLERANCES: dict[str, dict[str, float]] = {
    "fp32": {"loss": 1e-4, "grad_norm": 1e-3},
    "tf32": {"loss": 1e-3, "grad_norm": 2e-2},
    "bf16": {"loss": 2e-3, "grad_norm": 5e-2},
}
WEIGHTS_RTOL = 1e-5
QUANTITIES = ("loss", "grad_norm", "weights_norm")


def tolerances(precision: str) -> dict[str, float]:
    return {**TOLERANCES.get(precision, TOLERANCES["bf16"]), "weights_norm": WEIGHTS_RTOL}


def relative_difference(value: float, reference: float) -> float:
    return abs(value - reference) / max(abs(reference), 1e-12)


def evaluate(probes: list[tuple[str, Parity | None]], precision: str) -> ComparisonParity:
    """comparison.json `parity` from `(mode, run.json parity or None)` pairs in the comparison's order.

    The reference is the first mode with a probe. A mode is `ok` when each quantity is within its tolerance of the
    reference's; a mode whose probe is missing or failed is `not checked` and makes the whole check fail (a comparison
    whose modes may not compute the same thing is not a comparison)."""
    limits = tolerances(precision)
    measured = [(mode, figures) for mode, probe in probes if (figures := _figures(probe)) is not None]
    # every mode that reaches the comparison below has a probe, so `measured` is not empty there
    reference_mode, reference = measured[0] if measured else (None, {})
    modes, failures = [], []
    for mode, probe in probes:
        figures = _figures(probe)
        if probe is None or figures is None:
            reason = (probe.error if probe is not None else None) or \
                "no parity probe in run.json (the run failed before it?)"
            modes.append(ParityMode(mode=mode, status="not checked", reason=reason))
            failures.append(f"{mode}: not checked ({reason})")
            continue
        difference = {q: relative_difference(figures[q], reference[q]) for q in QUANTITIES}
        off = [q for q in QUANTITIES if difference[q] > limits[q]]
        modes.append(ParityMode(mode=mode, loss=figures["loss"], grad_norm=figures["grad_norm"],
                                weights_norm=figures["weights_norm"], weights=probe.weights,
                                relative_difference=ParityFigures(**difference), status="ok" if not off else "mismatch"))
        for q in off:
            failures.append(f"{mode}: {q} {figures[q]:.6g} vs {reference_mode}'s {reference[q]:.6g} "
                            f"(relative difference {difference[q]:.2g} > {limits[q]:g})")
    return ComparisonParity(precision=precision, tolerance=ParityFigures(**limits), reference=reference_mode,
                            ok=bool(measured) and not failures, modes=modes, failures=failures)


def _figures(probe: Parity | None) -> dict[str, float] | None:
    """The probe's quantities (loss, gradient and weights norms), or None where one is missing or not finite."""
    if probe is None:
        return None
    figures = {q: getattr(probe, q) for q in QUANTITIES}
    return figures if all(_finite(value) for value in figures.values()) else None


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parity_lines(parity: ComparisonParity) -> list[str]:
    """The terminal's summary (80 columns): the tolerances, one line per mode, then the verdict."""
    limits = parity.tolerance or ParityFigures(**tolerances(parity.precision or ""))
    lines = [f"parity ({parity.precision}) vs {parity.reference or '-'}; relative tolerance: loss "
             f"{limits.loss:.0e}, grad {limits.grad_norm:.0e}, w {limits.weights_norm:.0e}"]
    width = max((len(entry.mode) for entry in parity.modes), default=0)
    for entry in parity.modes:
        diff = entry.relative_difference
        if entry.status == "not checked" or diff is None or entry.loss is None or entry.grad_norm is None:
            lines.append(f"  {entry.mode:<{width}}  not checked: {entry.reason}")
            continue
        lines.append(f"  {entry.mode:<{width}}  loss {entry.loss:.6f} ({diff.loss:.0e})  grad "
                     f"{entry.grad_norm:.5f} ({diff.grad_norm:.0e})  w {diff.weights_norm:.0e}  "
                     f"{entry.status}")
    lines.append("parity ok: every mode computes the same first step" if parity.ok else
                 "PARITY FAILED: " + "; ".join(parity.failures))
    return lines
