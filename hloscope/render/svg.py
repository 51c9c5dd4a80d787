"""Inline SVG plots for the HTML report: no scripts, no network, readable without CSS."""

from __future__ import annotations

from html import escape

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac"]
FONT = 'font-family="system-ui,sans-serif" font-size="12"'


# The trace categories and idle time keep one colour in every plot.
FIXED = {"matmul": "#4e79a7", "matmul/conv": "#4e79a7", "elementwise": "#f28e2b", "fusion/elementwise": "#f28e2b",
         "reduction": "#59a14f", "memcpy": "#b07aa1", "memcpy/memset": "#b07aa1", "collective": "#e15759",
         "collective/communication": "#e15759", "other": "#9c755f", "idle": "#d3d3d3"}


def colors(names: list[str]) -> dict[str, str]:
    free = [c for c in PALETTE if c not in FIXED.values()] + PALETTE
    result, i = {}, 0
    for name in names:
        if name in FIXED:
            result[name] = FIXED[name]
        else:
            result[name] = free[i % len(free)]
            i += 1
    return result


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _short(label: str, limit: int = 26) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _open(title: str, width: int, height: int) -> list[str]:
    """The start of a plot: the <svg> element, labelled for screen readers, and its title."""
    # No xmlns: inline <svg> in HTML needs none, and the page then names no URL at all.
    return [f'<svg role="img" aria-label="{escape(title)}" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" {FONT}>',
            f'<text x="0" y="16" font-weight="bold">{escape(title)}</text>']


def bar_chart(title: str, rows: list[tuple[str, float]], unit: str, width: int = 640) -> str:
    """One horizontal bar per row, value printed at the end of the bar."""
    if not rows:
        return ""
    label_w, bar_h, gap, top = 150, 20, 8, 28
    height = top + len(rows) * (bar_h + gap) + 4
    peak = max(v for _, v in rows) or 1.0
    span = width - label_w - 90
    parts = _open(title, width, height)
    for i, (label, value) in enumerate(rows):
        y = top + i * (bar_h + gap)
        w = max(1.0, span * value / peak)
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{escape(label)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{PALETTE[0]}"/>')
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 14}">{escape(_fmt(value))} {escape(unit)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def stacked_chart(title: str, rows: list[tuple[str, dict[str, float]]], unit: str, width: int = 640) -> str:
    """One horizontal bar per row, split into segments by key, with a legend and each row's total."""
    rows = [(label, {k: v for k, v in parts.items() if v > 0}) for label, parts in rows]
    rows = [(label, parts) for label, parts in rows if parts]
    if not rows:
        return ""
    keys = sorted({k for _, parts in rows for k in parts}, key=lambda k: -sum(p.get(k, 0) for _, p in rows))
    color = colors(keys)
    label_w, bar_h, gap, top = 150, 20, 8, 28
    legend_rows = (len(keys) + 2) // 3
    height = top + len(rows) * (bar_h + gap) + 10 + legend_rows * 18
    peak = max(sum(p.values()) for _, p in rows) or 1.0
    span = width - label_w - 120
    out = _open(title, width, height)
    for i, (label, parts) in enumerate(rows):
        y = top + i * (bar_h + gap)
        x = float(label_w)
        out.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{escape(label)}</text>')
        for key in keys:
            value = parts.get(key, 0.0)
            if value <= 0:
                continue
            w = span * value / peak
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="{bar_h}" fill="{color[key]}">'
                       f'<title>{escape(key)}: {escape(_fmt(value))} {escape(unit)}</title></rect>')
            x += w
        out.append(f'<text x="{x + 4:.1f}" y="{y + 14}">{escape(_fmt(sum(parts.values())))} {escape(unit)}</text>')
    legend_y = top + len(rows) * (bar_h + gap) + 10
    for i, key in enumerate(keys):
        lx, ly = (i % 3) * (width // 3), legend_y + (i // 3) * 18
        out.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{color[key]}"/>'
                   f'<text x="{lx + 14}" y="{ly + 9}">{escape(_short(key))}<title>{escape(key)}</title></text>')
    out.append("</svg>")
    return "".join(out)


def timeline_strips(title: str, rows: list[tuple[str, list[tuple[float, float, str]]]], width: int = 640) -> str:
    """One strip per row: a step's device activity (start_s, duration_s, category) on a shared time axis."""
    rows = [(label, spans) for label, spans in rows if spans]
    if not rows:
        return ""
    keys = sorted({c for _, spans in rows for _, _, c in spans})
    color = colors(keys)
    label_w, strip_h, gap, top = 150, 16, 10, 28
    legend = _legend_layout(keys, label_w, width)
    height = top + len(rows) * (strip_h + gap) + 16 + 18 * (max(y for _, y in legend) + 1)
    end = max(s + d for _, spans in rows for s, d, _ in spans) or 1.0
    span = width - label_w - 10
    out = _open(title, width, height)
    for i, (label, spans) in enumerate(rows):
        y = top + i * (strip_h + gap)
        out.append(f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{escape(label)}</text>')
        out.append(f'<rect x="{label_w}" y="{y}" width="{span}" height="{strip_h}" fill="#eeeeee"/>')
        for start, duration, category in spans:
            x = label_w + span * start / end
            out.append(f'<rect x="{x:.2f}" y="{y}" width="{max(span * duration / end, 0.4):.2f}" height="{strip_h}" '
                       f'fill="{color[category]}"/>')
    axis_y = top + len(rows) * (strip_h + gap)
    out.append(f'<text x="{label_w}" y="{axis_y + 4}">0</text>'
               f'<text x="{width - 10}" y="{axis_y + 4}" text-anchor="end">{escape(_fmt(end * 1e3))} ms</text>')
    for key, (lx, line) in zip(keys, legend):
        ly = axis_y + 14 + 18 * line
        out.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{color[key]}"/>'
                   f'<text x="{lx + 14}" y="{ly + 9}">{escape(key)}</text>')
    out.append("</svg>")
    return "".join(out)


LEGEND_CHAR_PX = 7.5  # the widest a character of the 12 px sans-serif font averages in category names


def _legend_layout(keys: list[str], start: int, width: int) -> list[tuple[int, int]]:
    """(x, line) of each legend entry: left to right from `start`, on a new line (from the left edge) when the next
    entry would pass the plot's width, so that every entry is inside the plot at any page width (the SVG scales)."""
    places, x, line = [], start, 0
    for key in keys:
        entry = 14 + int(LEGEND_CHAR_PX * len(key) + 0.5)
        if x + entry > width and x > 0:
            x, line = 0, line + 1
        places.append((x, line))
        x += entry + 18
    return places or [(start, 0)]


def paired_bars(title: str, rows: list[tuple[str, float, float]], unit: str, names: tuple[str, str] = ("A", "B"),
                width: int = 640) -> str:
    """Two bars per row (A above B) on a shared scale, each with its value: e.g. one matched instruction's measured
    time per step on both sides."""
    rows = [r for r in rows if r[1] > 0 or r[2] > 0]
    if not rows:
        return ""
    label_w, bar_h, gap, top = 220, 9, 10, 28
    height = top + len(rows) * (2 * bar_h + gap) + 24
    peak = max(max(a, b) for _, a, b in rows) or 1.0
    span = width - label_w - 90
    color = (PALETTE[0], PALETTE[1])
    out = _open(title, width, height)
    for i, (label, a, b) in enumerate(rows):
        y = top + i * (2 * bar_h + gap)
        out.append(f'<text x="{label_w - 6}" y="{y + bar_h + 4}" text-anchor="end">{escape(_short(label, 34))}'
                   f'<title>{escape(label)}</title></text>')
        for j, value in enumerate((a, b)):
            w = max(0.5, span * value / peak)
            yy = y + j * bar_h
            out.append(f'<rect x="{label_w}" y="{yy}" width="{w:.1f}" height="{bar_h - 1}" fill="{color[j]}">'
                       f'<title>{escape(names[j])}: {escape(_fmt(value))} {escape(unit)}</title></rect>'
                       f'<text x="{label_w + w + 4:.1f}" y="{yy + bar_h - 1}" font-size="10">'
                       f'{escape(_fmt(value))}</text>')
    legend_y = top + len(rows) * (2 * bar_h + gap) + 6
    for j, name in enumerate(names):
        out.append(f'<rect x="{label_w + j * 80}" y="{legend_y}" width="10" height="10" fill="{color[j]}"/>'
                   f'<text x="{label_w + j * 80 + 14}" y="{legend_y + 9}">{escape(name)} ({escape(unit)})</text>')
    out.append("</svg>")
    return "".join(out)
