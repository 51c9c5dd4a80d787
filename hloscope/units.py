"""How hloscope writes times and sizes, one rule each, for the analyses' sentences and every renderer.

Times: milliseconds with three decimals below one second ("0.045 ms", "12.300 ms": a 1 ms CPU step and a 20 us GPU
kernel keep the same unit and the same precision everywhere), seconds with three decimals from one second up
("2.350 s"). Sizes: decimal units, three significant digits ("17.9 MB").
"""

from __future__ import annotations


def ms(seconds: float | None) -> str:
    """A duration: `12.300 ms`, `2.350 s` from one second up, `-` when unknown."""
    if seconds is None:
        return "-"
    return f"{seconds:.3f} s" if abs(seconds) >= 1 else f"{seconds * 1e3:.3f} ms"


def size(n: float | None) -> str:
    """A byte count: `17.9 MB`, `512 B`, `-` when unknown."""
    if n is None:
        return "-"
    for factor, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(n) >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n:.0f} B"
