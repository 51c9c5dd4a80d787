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


def evaluate(probes: list[tuple[str, dict | None]], precision: str) -> dict:
    """comparison.json `parity` from `(mode, run.json parity or None)` pairs in the comparison's order.

    The reference is the first mode with a probe. A mode is `ok` when each quantity is within its tolerance of the
    reference's; a mode whose probe is missing or failed is `not checked` and makes the whole check fail (a comparison
    whose modes may not compute the same thing is not a comparison)."""
    limits = tolerances(precision)
    measured = [(mode, probe) for mode, probe in probes if probe and all(_finite(probe.get(q)) for q in QUANTITIES)]
    # every mode that reaches the comparison below has a probe, so `measured` is not empty there
    reference_mode, reference = measured[0] if measured else (None, {})
    modes, failures = [], []
    for mode, probe in probes:
        entry: dict = {"mode": mode}
        if not probe or not all(_finite(probe.get(q)) for q in QUANTITIES):
            reason = (probe or {}).get("error") or "no parity probe in run.json (the run failed before it?)"
            entry.update(status="not checked", reason=reason)
            failures.append(f"{mode}: not checked ({reason})")
            modes.append(entry)
            continue
        entry.update({q: probe[q] for q in QUANTITIES})
        entry["weights"] = probe.get("weights")
        entry["relative_difference"] = {q: relative_difference(probe[q], reference[q]) for q in QUANTITIES}
        off = [q for q in QUANTITIES if entry["relative_difference"][q] > limits[q]]
        entry["status"] = "ok" if not off else "mismatch"
        for q in off:
            failures.append(f"{mode}: {q} {probe[q]:.6g} vs {reference_mode}'s {reference[q]:.6g} "
                            f"(relative difference {entry['relative_difference'][q]:.2g} > {limits[q]:g})")
        modes.append(entry)
    return {"precision": precision, "tolerance": limits, "reference": reference_mode,
            "ok": bool(measured) and not failures, "modes": modes, "failures": failures}


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parity_lines(parity: dict) -> list[str]:
    """The terminal's summary (80 columns): the tolerances, one line per mode, then the verdict."""
    limits = parity["tolerance"]
    lines = [f"parity ({parity['precision']}) vs {parity.get('reference') or '-'}; relative tolerance: loss "
             f"{limits['loss']:.0e}, grad {limits['grad_norm']:.0e}, w {limits['weights_norm']:.0e}"]
    width = max((len(entry["mode"]) for entry in parity["modes"]), default=0)
    for entry in parity["modes"]:
        if entry["status"] == "not checked":
            lines.append(f"  {entry['mode']:<{width}}  not checked: {entry['reason']}")
            continue
        diff = entry["relative_difference"]
        lines.append(f"  {entry['mode']:<{width}}  loss {entry['loss']:.6f} ({diff['loss']:.0e})  grad "
                     f"{entry['grad_norm']:.5f} ({diff['grad_norm']:.0e})  w {diff['weights_norm']:.0e}  "
                     f"{entry['status']}")
    lines.append("parity ok: every mode computes the same first step" if parity["ok"] else
                 "PARITY FAILED: " + "; ".join(parity["failures"]))
    return lines
