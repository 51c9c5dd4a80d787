"""The HLO data model: modules, computations and instructions as XLA prints them.

Instructions keep the text of their line and parse operands and attributes only when asked (most analyses touch a
few attributes of a few instructions), which is what makes the parser fast and small.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any

from hloscope.errors import ParseError
from hloscope.files import json_depth_error
from hloscope.hlo import attrs as scan
from hloscope.hlo.shapes import Shape, parse_shape
from hloscope.hlo.verify import verify_module

# Attributes that name the computations an instruction calls.
CALLED_COMPUTATION_ATTRS = (
    "calls",
    "to_apply",
    "body",
    "condition",
    "true_computation",
    "false_computation",
    "select",
    "scatter",
    "branch_computations",
    "called_computations",
    "async_computation",
)
# Where an attribute list may name other instructions or computations: `, to_apply=`, `, control-predecessors=`, ...
# (a hit inside a quoted string only sends the instruction down the slower, exact path).
_CALLED_KEYS = "|".join(CALLED_COMPUTATION_ATTRS)
_REFERENCE_KEY = re.compile(r"[\s,](?:" + _CALLED_KEYS + r"|control-predecessors)\s*=")
_CALLS_KEY = re.compile(r"[\s,](?:" + _CALLED_KEYS + r")\s*=")
# Validation's fast path, one match per instruction from just after `opcode(`: the operand list without brackets
# (a literal for constant and parameter), the ')' and an attribute list that names no instruction and at most one
# computation, as a bare name (`to_apply=%add`); then the operands must read `a, b` or `%a, %b` exactly, each the name
# of an instruction of the computation, and the computation must exist. What does not pass takes the exact path
# (HloInstruction.validate), which reports any error.
_REFERENCES = (*CALLED_COMPUTATION_ATTRS, "control-predecessors")
_OTHER_ATTRIBUTES = "(?:" + scan.attribute_pattern(_REFERENCES) + ")*+"
_ONE_CALL = (r"(?:\s*,\s*(" + _CALLED_KEYS + r")\s*=\s*%?([A-Za-z_\-.$][\w.\-$]*)(?=\s*(?:,|\Z))"
             + _OTHER_ATTRIBUTES + ")?")
_PLAIN_TAIL = re.compile(r'([^()"{}\[\]]*)\)(?:\s*//.*|' + _OTHER_ATTRIBUTES + _ONE_CALL + r"\s*)\Z", re.S)
_PLAIN_LITERAL_TAIL = re.compile(r'[^()"]*\)' + scan.attribute_list_pattern(_REFERENCES), re.S)
_NO_CALLS: tuple[HloComputation, ...] = ()


class HloInstruction:
    """One line `[ROOT] name = shape opcode(operands), attr=value, ...`."""

    # Caches, filled on first use: the index of the ')' closing the operands (-1: not known yet), the attributes, the
    # resolved operand instructions (their names are read from them: no list of name strings is kept) and the called
    # computations. Validation fills the last two for every instruction; the attributes stay unsplit unless asked for.
    __slots__ = ("_attrs", "_calls", "_end", "_operands", "computation", "lineno", "name", "opcode", "pos",
                 "shape_text", "text")

    def __init__(self, name: str, shape_text: str, opcode: str, text: str, pos: int, lineno: int,
                 computation: HloComputation, end: int = -1):
        self.name = name
        self.shape_text = shape_text
        self.opcode = opcode
        self.text = text  # the instruction's full text (one line, or several for multi-line constants)
        self.pos = pos  # index in `text` just after `opcode(`
        self.lineno = lineno
        self.computation = computation
        self._end = end
        self._attrs: dict[str, str] | None = None
        self._operands: tuple[HloInstruction, ...] | None = None
        self._calls: Sequence[HloComputation] | None = None

    def __repr__(self) -> str:
        return f"<HloInstruction {self.name} = {self.shape_text} {self.opcode}(...) line {self.lineno}>"

    def reset_caches(self, end: int = -1) -> None:
        """Forget what was parsed from the text (the parser calls this when it rewrites the text)."""
        self._end = end
        self._attrs = None
        self._operands = None
        self._calls = None

    # -- lazy parsing ---------------------------------------------------------------------------------------------
    def _error(self, message: str, index: int | None = None) -> ParseError:
        col = (index if index is not None else self.pos) + 1
        line = self.lineno
        if index is not None and "\n" in self.text[:index]:  # multi-line constant: point into the right line
            line += self.text.count("\n", 0, index)
            col = index - self.text.rfind("\n", 0, index)
        return ParseError(self.computation.module.path, message, line, col)

    def _operand_end(self) -> int:
        """Index of the ')' that closes the operand list."""
        end = self._end
        if end >= 0:
            return end
        end = scan.find_closing(self.text, self.pos)
        if end < 0:
            raise self._error(f"expected ')' closing the operands of '{self.name}'", len(self.text.rstrip()))
        self._end = end
        return end

    @property
    def operand_text(self) -> str:
        return self.text[self.pos : self._operand_end()]

    @property
    def operand_names(self) -> list[str]:
        """Operand instruction names, in order (constants and parameters have none)."""
        operands = self._operands
        if operands is not None:
            return [operand.name for operand in operands]
        return self._operand_names()

    def _operand_names(self) -> list[str]:
        if self.opcode in ("constant", "parameter"):
            return []
        try:
            ops = scan.split_operands(self.operand_text)
        except ValueError as error:
            raise self._error(f"bad operand list of '{self.name}': {error}") from None
        renames = self.computation.renames
        if renames:
            ops = [renames.get(n, n) for n in ops]
        return ops

    @property
    def attrs(self) -> dict[str, str]:
        """Attribute name -> raw value text (`kind` -> `kLoop`, `metadata` -> `{op_name="..." ...}`)."""
        attrs = self._attrs
        if attrs is None:
            attrs = self._attrs = self._scan_attributes()
        return attrs

    def _scan_attributes(self) -> dict[str, str]:
        start = self._operand_end() + 1
        try:
            return scan.split_attributes(self.text, start)
        except ValueError as error:
            raise self._error(f"bad attribute list of '{self.name}': {error}", start) from None

    def validate(self) -> None:
        """Parse everything that is otherwise parsed on demand, so malformed text is reported now."""
        _ = self.shape
        for operand in self.operands:
            _ = operand.shape
        self._validate_attributes()

    def _validate_attributes(self) -> None:
        attrs = self._attrs
        if attrs is None:
            start = self._operand_end() + 1
            text = self.text
            if scan.plain_attributes(text, start) and _REFERENCE_KEY.search(text, start) is None:
                self._calls = _NO_CALLS  # well-formed, and naming nothing to resolve: nothing is kept
                return
            attrs = self._scan_attributes()  # check the attributes without keeping them: most are never asked for
        predecessors = attrs.get("control-predecessors")
        if predecessors:
            comp = self.computation
            for name in scan.name_list(predecessors):
                name = comp.renames.get(name, name) if comp.renames else name
                try:
                    predecessor = comp.instruction(name)
                except KeyError:
                    raise self._error(f"control predecessor '{name}' of '{self.name}' is not defined in computation "
                                      f"'{comp.name}'", self.text.find("control-predecessors")) from None
                # XLA's parser takes only instructions read before (no cycle of control edges, none to itself); two
                # instructions share a line only where the parser split one (an instruction alone in the text)
                if predecessor is self or predecessor.lineno > self.lineno or (
                        predecessor.lineno == self.lineno
                        and comp.instructions.index(predecessor) > comp.instructions.index(self)):
                    raise self._error(f"control predecessor '{name}' of '{self.name}' is not defined before it",
                                      self.text.find("control-predecessors"))
        if any(key in attrs for key in CALLED_COMPUTATION_ATTRS):  # (attributes the parser already split included)
            self._attrs = attrs
            _ = self.called_computations
        else:
            self._calls = _NO_CALLS

    def attr(self, key: str, default: str | None = None) -> str | None:
        return self.attrs.get(key, default)

    # -- derived values -------------------------------------------------------------------------------------------
    @property
    def shape(self) -> Shape:
        try:
            return parse_shape(self.shape_text)
        except ValueError as error:
            shown = self.shape_text if len(self.shape_text) <= 60 else self.shape_text[:57] + "..."
            raise self._error(f"bad shape '{shown}' of '{self.name}': {error}", max(self.text.find(self.shape_text), 0)) from None

    @property
    def operands(self) -> tuple[HloInstruction, ...]:
        operands = self._operands
        if operands is not None:
            return operands
        comp = self.computation
        names = self._operand_names()
        if not names:
            self._operands = ()
            return ()
        by_name = comp._by_name or comp.name_index()
        try:
            operands = tuple([by_name[n] for n in names])  # a tuple: one allocation, a third smaller than a list
        except KeyError as error:
            raise self._error(f"operand {error} of '{self.name}' is not defined in computation '{comp.name}'") from None
        self._operands = operands
        return operands

    @property
    def called_computation_names(self) -> list[str]:
        calls = self._calls
        if calls is not None:
            return [comp.name for comp in calls]
        if self._attrs is None and _CALLS_KEY.search(self.text, self._operand_end() + 1) is None:
            return []
        names: list[str] = []
        attrs = self.attrs
        for key in CALLED_COMPUTATION_ATTRS:
            value = attrs.get(key)
            if value is not None:
                names.extend(scan.name_list(value))
        return names

    @property
    def called_computations(self) -> Sequence[HloComputation]:
        calls = self._calls
        if calls is not None:
            return calls
        names = self.called_computation_names
        if not names:
            self._calls = _NO_CALLS
            return _NO_CALLS
        by_name = self.computation.module.computations_by_name
        out: list[HloComputation] = []
        for name in names:
            comp = by_name.get(name)
            if comp is None:
                raise self._error(f"'{self.name}' calls computation '{name}', which is not defined in the module")
            out.append(comp)
        self._calls = out
        return out

    @property
    def fusion_kind(self) -> str | None:
        return self.attrs.get("kind") if self.opcode == "fusion" else None

    @property
    def custom_call_target(self) -> str | None:
        value = self.attrs.get("custom_call_target")
        return scan.unquote(value) if value is not None else None

    @property
    def backend_config(self) -> dict[str, Any]:
        """backend_config as JSON ({} when absent or not JSON)."""
        value = self.attrs.get("backend_config")
        if not value:
            return {}
        if value.startswith('"'):
            value = scan.unquote(value)
        if json_depth_error(value) is not None:  # nested 100,000 deep: no RecursionError, not a config
            return {}
        try:
            parsed: object = json.loads(value)
        except (ValueError, RecursionError):  # also an integer of more than 4,300 digits
            return {}
        return parsed if isinstance(parsed, dict) else {}

    @property
    def metadata(self) -> dict[str, str]:
        if "metadata" not in self.text:  # most instructions: no need to split the attributes
            return {}
        value = self.attrs.get("metadata")
        if not value:
            return {}
        try:
            return scan.parse_metadata(value)
        except ValueError as error:
            raise self._error(f"bad metadata of '{self.name}': {error}") from None


class HloComputation:
    __slots__ = ("_by_name", "_root", "instructions", "is_entry", "lineno", "module", "name", "renames", "signature")

    def __init__(self, name: str, is_entry: bool, lineno: int, module: HloModule, signature: str = ""):
        self.name = name
        self.is_entry = is_entry
        self.lineno = lineno
        self.module = module
        self.signature = signature
        self.instructions: list[HloInstruction] = []
        self._by_name: dict[str, HloInstruction] | None = None
        self._root: HloInstruction | None = None  # set by the parser when it closes the computation
        self.renames: dict[str, str] | None = None  # text name -> unique name, where XLA renames (see names.py)

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"

    @property
    def root(self) -> HloInstruction:
        root = self._root
        # The parser sets every computation's root when it closes it (the last instruction when none says ROOT; it
        # refuses empty computations): only a computation still being read has none.
        if root is None:
            raise RuntimeError(f"computation '{self.name}' has no root yet")
        return root

    @root.setter
    def root(self, instr: HloInstruction) -> None:
        self._root = instr

    @property
    def has_root(self) -> bool:
        """Whether the root is known yet (the parser asks while it reads the computation)."""
        return self._root is not None

    def name_index(self) -> dict[str, HloInstruction]:
        """Instruction name -> instruction, built on first use."""
        by_name = self._by_name
        if by_name is None:
            by_name = self._by_name = {i.name: i for i in self.instructions}
        return by_name

    def instruction(self, name: str) -> HloInstruction:
        return self.name_index()[name]


class HloModule:
    def __init__(self, name: str, header: str, path: str, lineno: int):
        self.name = name
        self.header = header  # the full `HloModule name, attr=...` line
        self.path = path
        self.lineno = lineno
        self.end_lineno = lineno  # the line of the last computation's closing '}'
        self.computations: list[HloComputation] = []
        self._entry: HloComputation | None = None  # set by the parser when it finishes the module
        # Stack-frame tables printed before the computations by newer XLA (FileNames, FunctionNames, ...).
        self.stack_tables: dict[str, dict[int, str]] = {}
        # Async syntax sugar the parser rewrote (opcodes.py): instruction name -> (wrapped opcode, wrapper computation).
        self.async_chains: dict[str, tuple[str, str]] = {}
        self.executed: list[HloComputation] | None = None  # ops.executed_computations, once asked for
        self.by_opcode: dict[str, list[HloInstruction]] | None = None  # ops.instructions_by_opcode, once asked for
        # kernels.launches by platform, once asked for: (computation, instruction, kind) of each launch
        self.launches: dict[str, list[tuple[HloComputation, HloInstruction, str]]] = {}
        self.validated = False  # validate() passed: the text does not change after parsing, so it is not run again

    def __repr__(self) -> str:
        return f"<HloModule {self.name}: {len(self.computations)} computations>"

    @property
    def entry(self) -> HloComputation:
        entry = self._entry
        # The parser sets the entry of every module it returns (the last computation when none says ENTRY; it refuses
        # modules without computations): only a module still being read has none.
        if entry is None:
            raise RuntimeError(f"module '{self.name}' has no entry computation yet")
        return entry

    @entry.setter
    def entry(self, comp: HloComputation) -> None:
        self._entry = comp

    @property
    def has_entry(self) -> bool:
        """Whether the entry computation is known yet (the parser asks while it reads the module)."""
        return self._entry is not None

    @cached_property
    def computations_by_name(self) -> dict[str, HloComputation]:
        return {c.name: c for c in self.computations}

    @cached_property
    def attrs(self) -> dict[str, str]:
        start = self.header.find(",")
        if start < 0:
            return {}
        try:
            return scan.split_attributes(self.header, start)
        except ValueError as error:
            raise ParseError(self.path, f"bad HloModule attributes: {error}", self.lineno, start + 1) from None

    @property
    def is_scheduled(self) -> bool:
        return self.attrs.get("is_scheduled") == "true"

    @property
    def instruction_count(self) -> int:
        return sum(len(c.instructions) for c in self.computations)

    def validate(self) -> None:
        """Parse every lazily parsed part of every instruction, then check what XLA refuses in text that parses
        (verify.py). Raises ParseError on the first problem.

        The same checks, in the same order, as HloInstruction.validate on each instruction, with each distinct shape
        text parsed once (instructions share their shape strings, see the parser)."""
        if self.validated:
            return
        from hloscope.hlo.native import native  # it binds HloInstruction, defined above: imported once this module is

        _ = self.attrs
        parsed: set[str] = set()
        resolve_plain = native.resolve_plain if native is not None else None
        exact: set[HloInstruction] = set()  # what the fast paths left to the exact checks (all but plain operand lists)
        for comp in self.computations:
            self._validate_computation(comp, parsed, resolve_plain, exact)
            comp._by_name = None  # every operand is resolved now: the name index is rebuilt only if asked for again
        verify_module(self, exact)  # what XLA refuses in text that parses: counts, shapes, parameters, called computations
        self.validated = True

    def _validate_computation(self, comp: HloComputation, parsed: set[str], resolve_plain: Any,
                              exact: set[HloInstruction]) -> None:
        """validate() for one computation: the compiled loop (when built) or the plain-line fast path resolves what
        it can, and every other instruction gets HloInstruction's exact checks (and is added to `exact`)."""
        renames = comp.renames
        instructions = comp.instructions
        by_name = None if renames else comp.name_index()
        computations = self.computations_by_name
        index = 0
        while index < len(instructions):
            if resolve_plain is not None and by_name is not None:
                # The compiled loop takes what _resolve_plain_line would (a line ending at its operands, or a plain
                # tail); it hands back the first instruction that needs more, which this loop then checks as it
                # checks every instruction.
                index = resolve_plain(instructions, index, by_name, parsed, computations, _NO_CALLS)
                if index == len(instructions):
                    break
            instr = instructions[index]
            index += 1
            if instr.shape_text not in parsed:
                _ = instr.shape
                parsed.add(instr.shape_text)
            unresolved = instr._operands is None and instr._attrs is None
            if by_name is not None and unresolved and _resolve_plain_line(instr, by_name, parsed, computations):
                continue
            exact.add(instr)
            for operand in instr.operands:
                if operand.shape_text not in parsed:
                    _ = operand.shape
                    parsed.add(operand.shape_text)
            instr._validate_attributes()

    def all_instructions(self) -> Iterator[HloInstruction]:
        for comp in self.computations:
            yield from comp.instructions


def _resolve_plain_line(instr: HloInstruction, by_name: dict[str, HloInstruction], parsed: set[str],
                        computations: dict[str, HloComputation]) -> bool:
    """Resolve an instruction whose line ends at its operands or with a plain tail (most lines) without splitting
    its attributes; False when the line needs the exact checks, which also report any error."""
    text = instr.text
    end = instr._end
    # Most lines end at the ')' the parser found (no '(' before it): no attributes, nothing to match.
    bare = end >= 0 and ((end == len(text) - 2 and text[-1] == "\n") or end == len(text) - 1)
    if instr.opcode in ("constant", "parameter"):
        if bare or _PLAIN_LITERAL_TAIL.match(text, instr.pos) is not None:
            instr._operands = ()
            instr._calls = _NO_CALLS
            return True
        return False
    match = None if bare else _PLAIN_TAIL.match(text, instr.pos)
    if not bare and match is None:
        return False
    names = text[instr.pos : end] if match is None else match.group(1)
    operands: tuple[HloInstruction, ...] | None = ()
    if names:
        if names[0] == "%":
            names = names[1:].replace(", %", ", ")
        try:  # names hold no '%', ',' or space: any other text fails the look-up
            operands = None if "%" in names else tuple([by_name[n] for n in names.split(", ")])
        except KeyError:  # the exact path reports it
            operands = None
    calls: Sequence[HloComputation] | None = _NO_CALLS
    if match is not None and match.group(2) is not None:
        callee = computations.get(match.group(3))
        calls = (callee,) if callee is not None else None  # None: the exact path reports it
    if operands is None or calls is None:
        return False
    for operand in operands:
        if operand.shape_text not in parsed:
            _ = operand.shape
            parsed.add(operand.shape_text)
    instr._operands = operands
    instr._calls = calls
    return True
