"""The minimal graph the structural matcher works on: instructions with an opcode, a shape, operands and a source op.

Kept apart from the HLO parser's data model so that the matching algorithm is testable on hand-built graphs and does
not change when the parser grows; `hloscope.diff.adapt` builds these graphs from parsed modules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# `{1,0}` layouts, `{...:T(8,128)}` tiles and memory spaces: two frameworks may lay out the same tensor differently,
# and the layout change itself shows up as a copy/transpose instruction, so shapes are compared without layouts.
_LAYOUT = re.compile(r"\{[^{}]*\}")


def strip_layout(shape: str) -> str:
    previous = None
    while previous != shape:
        previous, shape = shape, _LAYOUT.sub("", shape)
    return shape.replace(" ", "")


@dataclass(frozen=True)
class Node:
    """One instruction. `key` is unique within its graph; `operands` are keys of other nodes of the same graph."""

    key: str
    opcode: str
    shape: str
    operands: tuple[str, ...] = ()
    op_name: str = ""
    # What makes two instructions of one opcode different kinds of work: fusion kind, custom-call target, ...
    # Greedy matching requires equal details.
    detail: str = ""
    # A fingerprint of what the instruction calls (a fusion's fused computation): part of the exact fingerprint only,
    # so that two fusions of one kind whose bodies differ still pair up in the greedy stages.
    body: str = ""
    name: str = ""  # the instruction's name as printed, for reports
    graph: str = ""  # the module (one of the graphs of a train step) the instruction belongs to


@dataclass
class Graph:
    """Instructions in definition order (operands before users, as HLO text prints them) plus the roots."""

    nodes: dict[str, Node] = field(default_factory=dict)
    roots: list[str] = field(default_factory=list)

    def add(self, node: Node) -> None:
        self.nodes[node.key] = node

    def users(self) -> dict[str, list[str]]:
        result: dict[str, list[str]] = {key: [] for key in self.nodes}
        for node in self.nodes.values():
            for operand in node.operands:
                if operand in result:
                    result[operand].append(node.key)
        return result
