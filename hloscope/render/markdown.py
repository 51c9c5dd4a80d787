"""Markdown text that shows exactly as written, for every renderer that writes Markdown.

Every string that comes from the runs (mode names, op names, kernel names, settings, paths) goes through `text()`:
HTML is written as entities (no raw `<script>` reaches a Markdown viewer), Markdown punctuation that could start a
link, emphasis, code or a table cell is backslash-escaped, and line breaks become spaces, so a string never starts a
block. Underscores inside a word (`torch_xla`, `device_idle_us`) never emphasise in CommonMark and are left as they are.
"""

from __future__ import annotations

import re

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKSLASHED = set("\\`*[]|~")
# An underscore run that could open or close emphasis: not between two letters or digits.
_EDGE_UNDERSCORES = re.compile(r"(?<![0-9A-Za-z_])_+|_+(?![0-9A-Za-z_])")


def text(value: object) -> str:
    """A user-provided string as Markdown inline text that shows exactly as written."""
    raw = " ".join(str(value).split()) if value is not None else "-"
    escaped = "".join(_ENTITIES.get(c) or ("\\" + c if c in _BACKSLASHED else c) for c in raw)
    opens = re.search(r"(?<![0-9A-Za-z_])_+(?=\S)", raw)
    closes = re.search(r"(?<=\S)_+(?![0-9A-Za-z_])", raw)
    if opens and closes:  # only a pair can emphasise: a lone leading `__cudnn$conv...` prints as written
        escaped = _EDGE_UNDERSCORES.sub(lambda m: "\\_" * len(m.group()), escaped)
    return escaped


def line_start(line: str) -> str:
    """A line that begins with escaped user text: what would make it a heading, list, quote or rule is escaped."""
    if re.match(r"[-+=#>]", line):
        return "\\" + line
    return re.sub(r"^(\d+)([.)])", r"\1\\\2", line)


def row(cells) -> str:
    """A table row of cells already escaped."""
    return "| " + " | ".join(cells) + " |"
