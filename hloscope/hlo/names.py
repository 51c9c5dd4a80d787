"""XLA's NameUniquer, so that instruction names match what XLA's parser makes of text with repeated names.

XLA keeps instruction names unique in a module: when hand-written text reuses a name in another computation, its
parser renames the later one `name.1`, `name.2`, ... (a numeric suffix is split off and re-numbered).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hloscope.hlo.model import HloComputation, HloInstruction, HloModule

_NAME_AT = re.compile(r"[ \t]*(?:ROOT[ \t]+)?%?")  # what comes before an instruction's name in its text


class NameUniquer:
    def __init__(self) -> None:
        self._used: dict[str, set[int]] = {}
        self._next: dict[str, int] = {}

    def unique(self, name: str) -> str:
        root, suffix, has_suffix = name, 0, False
        dot = name.rfind(".")
        if 0 < dot < len(name) - 1:
            tail = name[dot + 1 :]
            if tail.isdigit() and len(tail) <= 18:  # a longer tail is part of the name (no int() of 5,000 digits)
                root, suffix, has_suffix = name[:dot], int(tail), True
        used = self._used.setdefault(root, set())
        if suffix in used:
            next_id = self._next.get(root, 0)
            while next_id in used:
                next_id += 1
            suffix = next_id
            self._next[root] = next_id + 1
        used.add(suffix)
        if suffix == 0:
            return f"{root}.0" if has_suffix else root
        return f"{root}.{suffix}"


def check_unique_in_computation(comp: HloComputation) -> None:
    """XLA's parser refuses a name defined twice in one computation ("instruction already exists"): operands are
    looked up by name in their computation, so the second definition would stand for the first, even for itself
    (`p = f32[4] add(p, p)` after a parameter `p`: a cycle). ParseError at the second definition's name."""
    first: dict[str, HloInstruction] = {}
    for instr in comp.instructions:
        earlier = first.setdefault(instr.name, instr)
        if earlier is not instr:
            at = _NAME_AT.match(instr.text)
            raise instr._error(f"instruction '{instr.name}' is defined twice in computation '{comp.name}' (first at "
                               f"line {earlier.lineno})", at.end() if at is not None else None)


def uniquify_instruction_names(module: HloModule) -> None:
    """Rename instructions whose name is already used in another computation of the module, as XLA's parser does
    (text order); a name defined twice in one computation is refused, as XLA's parser refuses it."""
    names = [instr.name for comp in module.computations for instr in comp.instructions]
    if len(set(names)) == len(names):  # the common case: every name is unique already
        return
    for comp in module.computations:
        check_unique_in_computation(comp)
    uniquer = NameUniquer()
    for comp in module.computations:
        renames = {}
        for instr in comp.instructions:
            new = uniquer.unique(instr.name)
            if new != instr.name:
                renames[instr.name] = new
                instr.name = new
        if renames:
            # An inline computation was renamed once already, in the module its parser read it into: the text's
            # names go through both renames.
            for text_name, first in (comp.renames or {}).items():
                renames[text_name] = renames.get(first, first)
            comp.renames = renames
            comp._by_name = None  # built under the old names
