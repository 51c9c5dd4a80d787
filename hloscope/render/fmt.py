"""Number formatting shared by every renderer, so the terminal, Markdown and HTML reports print the same figures."""

from __future__ import annotations


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f} ms"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def count(value: float | int | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def big(value: float | None) -> str:
    """FLOPs and bytes: 3 significant digits with an SI prefix."""
    if value is None:
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}"
    return f"{value:.3g}"


def share(part: float | None, whole: float | None) -> str:
    if part is None or not whole:
        return "-"
    fraction = part / whole
    return "<1%" if 0 < fraction < 0.005 else f"{fraction:.0%}"
