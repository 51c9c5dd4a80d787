"""Memory: parameter and output bytes from the entry signature, and what XLA's buffer assignment and memory-usage
report (files beside the module) say about allocations."""

from __future__ import annotations

import re
from typing import Any, TypedDict

from hloscope.errors import InputError
from hloscope.files import bounded_int
from hloscope.hlo.model import HloModule

_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+)(.*)$")
_TOTAL_USED = re.compile(r"^Total bytes used: (\d+)")
_REPORT_TOTAL = re.compile(r"^Total bytes: (\d+)")


class Allocation(TypedDict):
    """One allocation of a buffer assignment, with the names of its first three values."""

    index: int
    size: int
    kind: str
    shape: str | None
    values: list[str]


def signature_bytes(module: HloModule) -> dict[str, int]:
    entry = module.entry
    params = [i for i in entry.instructions if i.opcode == "parameter"]
    return {
        "parameter_bytes": sum(p.shape.byte_size for p in params),
        "parameters": len(params),
        "output_bytes": entry.root.shape.byte_size,
    }


def _allocation_kind(tail: str) -> str:
    if "thread-local" in tail:
        return "thread_local"
    if ", parameter " in tail:
        return "parameter"
    if "output shape" in tail:
        return "output"
    if "constant" in tail:
        return "constant"
    if "preallocated-temp" in tail:
        return "temp"
    return "temp"


def parse_buffer_assignment(text: str, path: str = "<string>") -> dict[str, Any]:
    """Totals of an XLA `*-buffer-assignment.txt`: all allocations by kind, and the five largest."""
    if not text.lstrip().startswith("BufferAssignment:"):
        raise InputError(path, "not an XLA buffer assignment (expected 'BufferAssignment:' on the first line)")
    allocations: list[Allocation] = []
    total_used = None
    current: Allocation | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        match = _ALLOCATION.match(line)
        if match:
            tail = match.group(3)
            shape = re.search(r"shape \|(.*?)\|", tail)
            current = {"index": bounded_int(match.group(1), path, lineno, 1, "allocation index"),
                       "size": bounded_int(match.group(2), path, lineno, 1, "allocation size"), "kind": _allocation_kind(tail),
                       "shape": shape.group(1) if shape else None, "values": []}
            allocations.append(current)
            continue
        if current is not None and line.startswith(" value: <"):
            name = re.match(r" value: <\d+ (\S+)", line)
            if name and len(current["values"]) < 3:
                current["values"].append(name.group(1))
            continue
        total = _TOTAL_USED.match(line)
        if total:
            total_used = bounded_int(total.group(1), path, lineno, 1, "byte count")
    by_kind: dict[str, int] = {}
    for alloc in allocations:
        by_kind[alloc["kind"]] = by_kind.get(alloc["kind"], 0) + alloc["size"]
    counted = [a for a in allocations if a["kind"] != "thread_local"]
    largest = sorted(counted, key=lambda a: -a["size"])[:5]
    return {
        "allocations": len(allocations),
        "total_bytes": total_used if total_used is not None else sum(a["size"] for a in counted),
        "temp_bytes": by_kind.get("temp", 0),
        "bytes_by_kind": by_kind,
        "largest": largest,
    }


def parse_memory_report(text: str, path: str = "<string>") -> dict[str, Any]:
    """`*-memory-usage-report.txt`: total bytes per memory space."""
    spaces: dict[str, int] = {}
    space = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.startswith("Memory Space:"):
            space = line.split(":", 1)[1].strip()
        total = _REPORT_TOTAL.match(line)
        if total and space is not None:
            spaces[space] = bounded_int(total.group(1), path, lineno, 1, "byte count")
    if not spaces:
        # Older XLA (torch_xla 2.9's) prints one "Total bytes used: N (...)" line and no memory spaces.
        used = re.search(r"^Total bytes used: (\d+)", text, re.MULTILINE)
        if used:
            return {"total_bytes": bounded_int(used.group(1), path, None, None, "byte count"), "by_memory_space": {}}
        raise InputError(path, "not an XLA memory-usage report (no 'Memory Space:' / 'Total bytes:' lines)")
    return {"total_bytes": sum(spaces.values()), "by_memory_space": spaces}
