"""Number formatting shared by every renderer, so the terminal, Markdown and HTML reports print the same figures."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import msgspec

from hloscope.errors import one_line

T = TypeVar("T")


def printable(value: T) -> T:
    """`value` with every control character of its strings escaped as error lines escape them (errors.one_line:
    `\\x1b`, `\\n`, `\\u202e`): the one place where the report renderers (terminal, Markdown, HTML) make what
    files wrote (mode names, notes, settings, op names) safe to print. Walks dataclasses, msgspec Structs, dicts,
    lists and tuples (copies; shared objects stay shared); anything else is returned as it is."""
    return _printable(value, {})


def _printable(value: Any, seen: dict[int, Any]) -> Any:
    if isinstance(value, str):
        return one_line(value)
    if id(value) in seen:
        return seen[id(value)]
    if isinstance(value, dict):
        out: Any = {}
        seen[id(value)] = out
        out.update((_printable(k, seen), _printable(v, seen)) for k, v in value.items())
    elif isinstance(value, list):
        out = []
        seen[id(value)] = out
        out.extend(_printable(item, seen) for item in value)
    elif isinstance(value, tuple) and not hasattr(value, "_fields"):
        out = tuple(_printable(item, seen) for item in value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = object.__new__(type(value))
        seen[id(value)] = out
        names = list(vars(value)) if hasattr(value, "__dict__") else [f.name for f in dataclasses.fields(value)]
        for name in names:
            object.__setattr__(out, name, _printable(getattr(value, name), seen))
    elif isinstance(value, msgspec.Struct):  # frozen ones too: a copy with each field made printable
        out = msgspec.structs.replace(value, **{name: _printable(getattr(value, name), seen)
                                                for name in value.__struct_fields__})
    else:
        return value
    seen[id(value)] = out
    return out


def ms(seconds: float | None) -> str:
    """Always milliseconds (tables keep one unit per column): `12.300 ms`; units.ms switches to seconds."""
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
    """`29%`, `-3%`; a share that rounds to 0% keeps its sign with one more digit (`-0.3%`), or is `<0.1%` /
    `>-0.1%` (a part working against the gap is never printed as `-0%`)."""
    if part is None or not whole:
        return "-"
    fraction = part / whole
    for text in (f"{fraction:.0%}", f"{fraction:.1%}"):
        if fraction == 0 or text.strip("-0.%"):
            return text
    return "<0.1%" if fraction > 0 else ">-0.1%"


def signed_ms(seconds: float | None) -> str:
    """`+1.234 ms` / `-0.020 ms`; a value that rounds to zero has no sign."""
    if seconds is None:
        return "-"
    text = ms(abs(seconds))
    if text == ms(0.0):
        return text
    return ("+" if seconds > 0 else "-") + text


def ms_interval(interval: list[float] | tuple[float, float] | None) -> str:
    """A 95% interval of a signed difference: `+1.010 to +1.180 ms`."""
    if not interval or len(interval) != 2 or None in interval:
        return "-"
    low, high = (signed_ms(v).removesuffix(" ms") for v in interval)
    return f"{low} to {high} ms"


def ratio_interval(interval: list[float] | tuple[float, float] | None) -> str:
    """`1.19-1.27x`."""
    if not interval or len(interval) != 2 or None in interval:
        return "-"
    return f"{interval[0]:.2f}-{interval[1]:.2f}x"


def ms_column(microseconds: float | None) -> str:
    """A trace's microseconds as a number of milliseconds for a column whose header says `ms`: `1,234.567`."""
    return "-" if microseconds is None else f"{microseconds / 1000.0:,.3f}"


def us(seconds: float | None) -> str:
    """Short durations (one op call): `9.17 µs`, `220 µs`, `1,100 µs` (3 significant digits)."""
    if seconds is None:
        return "-"
    value = seconds * 1e6
    return f"{value:,.0f} µs" if abs(value) >= 100 else f"{value:.3g} µs"


def p_value(p: float | None) -> str:
    if p is None:
        return "-"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def middle_ellipsis(name: str, width: int) -> str:
    """`name` in at most `width` characters, cut in the middle with an ellipsis, keeping its end, the informative
    part of scoped op names: from a `/` where one fits (`jit…/query/dot_general`), else two thirds of the room."""
    if len(name) <= width:
        return name
    width = max(width, 5)
    budget = width - 1 - 3  # at least three characters of the start
    cuts = [i for i in range(len(name) - budget, len(name)) if name[i] == "/" and i > 0]
    tail = len(name) - cuts[0] if cuts else width - 1 - (width - 1) // 3
    return f"{name[:width - 1 - tail]}…{name[len(name) - tail:]}"
