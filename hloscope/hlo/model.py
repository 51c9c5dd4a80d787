"""The HLO data model: modules, computations and instructions as XLA prints them.

Instructions keep the text of their line and parse operands and attributes only when asked (most analyses touch a
few attributes of a few instructions), which is what makes the parser fast and small.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cached_property

from hloscope.errors import ParseError
from hloscope.hlo import attrs as scan
from hloscope.hlo.shapes import Shape, parse_shape

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


class HloInstruction:
    """One line `[ROOT] name = shape opcode(operands), attr=value, ...`."""

    # _end, _ops and _attrs are caches left unset until first use: a million instructions are created per 100 MB of
    # text, and every store in __init__ counts (measured: this __init__ takes 40% less time than one that sets them).
    __slots__ = ("_attrs", "_end", "_ops", "computation", "lineno", "name", "opcode", "pos", "shape_text", "text")

    def __init__(self, name, shape_text, opcode, text, pos, lineno, computation):
        self.name = name
        self.shape_text = shape_text
        self.opcode = opcode
        self.text = text  # the instruction's full text (one line, or several for multi-line constants)
        self.pos = pos  # index in `text` just after `opcode(`
        self.lineno = lineno
        self.computation = computation

    def __repr__(self) -> str:
        return f"<HloInstruction {self.name} = {self.shape_text} {self.opcode}(...) line {self.lineno}>"

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
        try:
            return self._end
        except AttributeError:
            pass
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
        try:
            return self._ops
        except AttributeError:
            pass
        if self.opcode in ("constant", "parameter"):
            ops = []
        else:
            try:
                ops = scan.split_operands(self.operand_text)
            except ValueError as error:
                raise self._error(f"bad operand list of '{self.name}': {error}") from None
            renames = self.computation.renames
            if renames:
                ops = [renames.get(n, n) for n in ops]
        self._ops = ops
        return ops

    @property
    def attrs(self) -> dict[str, str]:
        """Attribute name -> raw value text (`kind` -> `kLoop`, `metadata` -> `{op_name="..." ...}`)."""
        try:
            return self._attrs
        except AttributeError:
            pass
        self._attrs = self._scan_attributes()
        return self._attrs

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
        if not hasattr(self, "_attrs"):  # check the attributes without keeping them: most are never asked for
            attrs = self._scan_attributes()
            predecessors = attrs.get("control-predecessors")
            if predecessors:
                comp = self.computation
                for name in scan.name_list(predecessors):
                    name = comp.renames.get(name, name) if comp.renames else name
                    try:
                        comp.instruction(name)
                    except KeyError:
                        raise self._error(f"control predecessor '{name}' of '{self.name}' is not defined in computation "
                                          f"'{comp.name}'", self.text.find("control-predecessors")) from None
            if any(key in attrs for key in CALLED_COMPUTATION_ATTRS):
                self._attrs = attrs
                _ = self.called_computations

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
    def operands(self) -> list[HloInstruction]:
        comp = self.computation
        try:
            return [comp.instruction(n) for n in self.operand_names]
        except KeyError as error:
            raise self._error(f"operand {error} of '{self.name}' is not defined in computation '{comp.name}'") from None

    @property
    def called_computation_names(self) -> list[str]:
        names: list[str] = []
        attrs = self.attrs
        for key in CALLED_COMPUTATION_ATTRS:
            value = attrs.get(key)
            if value is not None:
                names.extend(scan.name_list(value))
        return names

    @property
    def called_computations(self) -> list[HloComputation]:
        module = self.computation.module
        out = []
        for name in self.called_computation_names:
            comp = module.computations_by_name.get(name)
            if comp is None:
                raise self._error(f"'{self.name}' calls computation '{name}', which is not defined in the module")
            out.append(comp)
        return out

    @property
    def fusion_kind(self) -> str | None:
        return self.attrs.get("kind") if self.opcode == "fusion" else None

    @property
    def custom_call_target(self) -> str | None:
        value = self.attrs.get("custom_call_target")
        return scan.unquote(value) if value is not None else None

    @property
    def backend_config(self) -> dict:
        """backend_config as JSON ({} when absent or not JSON)."""
        value = self.attrs.get("backend_config")
        if not value:
            return {}
        if value.startswith('"'):
            value = scan.unquote(value)
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}

    @property
    def metadata(self) -> dict[str, str]:
        value = self.attrs.get("metadata")
        if not value:
            return {}
        try:
            return scan.parse_metadata(value)
        except ValueError as error:
            raise self._error(f"bad metadata of '{self.name}': {error}") from None


class HloComputation:
    __slots__ = ("_by_name", "instructions", "is_entry", "lineno", "module", "name", "renames", "root", "signature")

    def __init__(self, name: str, is_entry: bool, lineno: int, module: HloModule, signature: str = ""):
        self.name = name
        self.is_entry = is_entry
        self.lineno = lineno
        self.module = module
        self.signature = signature
        self.instructions: list[HloInstruction] = []
        self._by_name: dict[str, HloInstruction] | None = None
        self.root: HloInstruction | None = None
        self.renames: dict[str, str] | None = None  # text name -> unique name, where XLA renames (see names.py)

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"

    def instruction(self, name: str) -> HloInstruction:
        if self._by_name is None:
            self._by_name = {i.name: i for i in self.instructions}
        return self._by_name[name]


class HloModule:
    def __init__(self, name: str, header: str, path: str, lineno: int):
        self.name = name
        self.header = header  # the full `HloModule name, attr=...` line
        self.path = path
        self.lineno = lineno
        self.end_lineno = lineno  # the line of the last computation's closing '}'
        self.computations: list[HloComputation] = []
        self.entry: HloComputation | None = None
        # Stack-frame tables printed before the computations by newer XLA (FileNames, FunctionNames, ...).
        self.stack_tables: dict[str, dict[int, str]] = {}
        # Async syntax sugar the parser rewrote (opcodes.py): instruction name -> (wrapped opcode, wrapper computation).
        self.async_chains: dict[str, tuple[str, str]] = {}

    def __repr__(self) -> str:
        return f"<HloModule {self.name}: {len(self.computations)} computations>"

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
        """Parse every lazily parsed part of every instruction (raises ParseError on malformed text)."""
        _ = self.attrs
        for comp in self.computations:
            for instr in comp.instructions:
                instr.validate()

    def all_instructions(self) -> Iterator[HloInstruction]:
        for comp in self.computations:
            yield from comp.instructions
