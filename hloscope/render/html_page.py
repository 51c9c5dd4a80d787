"""The self-contained HTML page shell shared by the diff and explain reports: inline CSS, no scripts, no network."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from html import escape

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:980px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.6em 0}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td{overflow-wrap:anywhere}td:first-child,th:first-child{text-align:left}
table.figures td,td.n{white-space:nowrap;overflow-wrap:normal}
.claim{margin:.2em 0 .6em}.est{color:#555}pre{background:#f7f7f7;padding:.6em;overflow:auto;font-size:11px}
.note{color:#8a4b00}svg{display:block;margin:.8em 0;max-width:100%;height:auto}
"""


def page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


# A figure: a signed number with its unit or ratio (`+45.2 µs`, `-1,024`, `1.3 GFLOP`, `2.5x`, `+12.0%`), which a
# line break must never split, whatever the table's width.
_FIGURE = re.compile(r"[+\-−~]?\d[\d,.]*(e[+-]?\d+)?\s?(%|x|[A-Za-zµ/]{1,6})?( \([^()]{0,16}\))?")


def _cell(value: object) -> str:
    text = str(value)
    return f'<td class="n">{escape(text)}</td>' if _FIGURE.fullmatch(text) else f"<td>{escape(text)}</td>"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], figures: bool = False) -> str:
    """`figures`: cells hold short names and numbers that must not break across lines (`torch_x|la`, `0.000|ms`).
    In any table, a cell that is one figure (`+45.2 µs`) never breaks inside."""
    head = "".join(f"<th>{escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    opening = '<table class="figures">' if figures else "<table>"
    return f"{opening}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def evidence(data: dict) -> str:
    return (f"<details><summary>evidence</summary><pre>{escape(json.dumps(data, indent=1, default=str))}</pre>"
            "</details>")
