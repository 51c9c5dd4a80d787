"""HLO text -> HloModule objects, in pure Python.

Line-oriented: XLA prints one instruction per line (multi-dimensional constants are the one exception), so each line
is matched by one compiled regular expression that captures name, shape and opcode. Operands and attributes stay as
text in the instruction and are split only when an analysis asks for them (see model.py). Any text XLA would refuse
at the level this parser looks at is reported as ParseError(path, message, line, column).
"""

from __future__ import annotations

import gc
import io
import os
import re
from collections.abc import Iterable

from hloscope.errors import ParseError
from hloscope.hlo.attrs import find_closing
from hloscope.hlo.model import HloComputation, HloInstruction, HloModule
from hloscope.hlo.names import uniquify_instruction_names

_NAME = r"[A-Za-z_\-.$][\w.\-$]*"
# The common case in one match, as XLA prints it (single spaces): `  [ROOT] name = f32[2,3]{1,0} opcode(`.
# The shape is only delimited here; Shape parsing validates it when it is used. Anything else takes the slow path.
_INSTRUCTION = re.compile(rf"[ \t]*(ROOT )?%?({_NAME}) = ([a-z][a-z0-9]*\[[^ ]*) ([a-z][a-z0-9\-]*)\(")
# The slow path: any spacing, tuple shapes (scanned for their closing parenthesis).
_INSTRUCTION_HEAD = re.compile(rf"[ \t]*(ROOT[ \t]+)?%?({_NAME})[ \t]*=[ \t]*")
_ARRAY_SHAPE = re.compile(r"[a-z][a-z0-9]*\[[^\]\n]*\](?:\{[^}\n]*\})?")
_OPCODE = re.compile(r"[ \t]+([a-z][a-z0-9\-]*)\(")
_COMPUTATION = re.compile(
    rf"[ \t]*(ENTRY[ \t]+)?%?({_NAME})[ \t]*(\(.*\)[ \t]*->.*?)?[ \t]*(,[ \t]*execution_thread=\"[^\"]*\")?[ \t]*\{{[ \t]*$"
)
_MODULE = re.compile(rf"HloModule[ \t]+%?({_NAME})[ \t]*(?:,|$)")
_STACK_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_STACK_ENTRY = re.compile(r"[ \t]*(\d+)[ \t]+(.*?)\s*$")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _open_brackets(text: str) -> tuple[int, int]:
    """(unclosed parentheses, unclosed braces and square brackets) of an instruction's text so far."""
    if text.count("(") == text.count(")") and text.count("{") == text.count("}") and text.count("[") == text.count("]"):
        return 0, 0  # the common case, decided without looking at quoted strings
    if '"' in text:
        text = _STRING.sub("", text)
    return text.count("(") - text.count(")"), text.count("{") + text.count("[") - text.count("}") - text.count("]")


def _is_open(text: str) -> bool:
    """Does an instruction's text continue on the next line (unclosed brackets, or a trailing comma)?"""
    parens, braces = _open_brackets(text)
    return parens > 0 or braces > 0 or text.rstrip().endswith(",")


def _closes_computation(last: HloInstruction | None) -> bool:
    """A lone '}' closes the computation unless it closes a brace block the last instruction left open."""
    if last is None:
        return True
    parens, braces = _open_brackets(last.text)
    return not (braces > 0 and parens <= 0)


def _column(line: str) -> int:
    return len(line) - len(line.lstrip()) + 1


def _wrong_format(line: str) -> str | None:
    text = line.strip()
    if text.startswith(("module @", "module {", "func.func", "#loc", "\"builtin.module\"")):
        return "this is MLIR/StableHLO text, not XLA HLO text (dump HLO with XLA_FLAGS=--xla_dump_to or as_text(dialect='hlo'))"
    if text.startswith(("{", "[")):
        return "this looks like JSON, not XLA HLO text"
    return None


class _Parser:
    def __init__(self, path: str):
        self.path = path
        self.modules: list[HloModule] = []
        self.module: HloModule | None = None
        self.comp: HloComputation | None = None
        self.table: dict[int, str] | None = None  # the stack-frame table being read
        self.in_wrapper = False  # inside PyTorch/XLA's text around a saved graph
        self.graph_start = 0
        self.lineno = 0

    def error(self, message: str, lineno: int, col: int) -> ParseError:
        return ParseError(self.path, message, lineno, col)

    def run(self, lines: Iterable[str]) -> list[HloModule]:
        # The cyclic garbage collector would rescan the growing object graph again and again while millions of
        # instructions are created (none of them is garbage yet): pausing it makes large modules ~30% faster.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run(lines)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _run(self, lines: Iterable[str]) -> list[HloModule]:
        match_instruction = _INSTRUCTION.match
        # One string object per distinct opcode and shape: modules repeat them thousands of times.
        shared = {}
        share = shared.setdefault
        lineno = 0
        instructions = None
        comp = None
        for lineno, line in enumerate(lines, 1):
            if comp is not None:
                match = match_instruction(line)
                if match is not None:
                    root, name, shape, opcode = match.groups()
                    instr = HloInstruction(name, share(shape, shape), share(opcode, opcode), line, match.end(), lineno, comp)
                    instructions.append(instr)
                    if root is not None:
                        self._set_root(comp, instr, lineno, line)
                    continue
                stripped = line.strip()
                if stripped == "}" and _closes_computation(instructions[-1] if instructions else None):
                    self._close_computation(comp)
                    comp.module.end_lineno = lineno
                    comp = self.comp = None
                elif stripped and not stripped.startswith("//"):
                    self._slow_instruction(line, lineno, comp)
                continue
            comp = self._outside_computation(line, lineno)
            if comp is not None:
                instructions = comp.instructions
        self.lineno = lineno
        return self.finish()

    # -- instructions the one-regex path does not take ------------------------------------------------------------
    def _slow_instruction(self, line: str, lineno: int, comp: HloComputation) -> None:
        """Lines the one-regex path does not take: tuple shapes, and instructions continued over several lines
        (multi-dimensional constants; hand-written test files break long attribute lists)."""
        previous = comp.instructions[-1] if comp.instructions else None
        if previous is not None and (_is_open(previous.text) or line.lstrip().startswith(",")):
            previous.text = previous.text.rstrip("\n") + "\n" + line
            return
        head = _INSTRUCTION_HEAD.match(line)
        if head is None or line.startswith(("{", "}"), head.end()):
            col = _column(line)
            if _COMPUTATION.match(line) or line.lstrip().startswith("HloModule"):
                raise self.error(f"expected '}}' closing computation '{comp.name}' (opened at line {comp.lineno})", lineno, col)
            raise self.error("expected an instruction 'name = shape opcode(operands)' or '}'", lineno, col)
        shape_start = head.end()
        if line.startswith("(", shape_start):
            shape_end = find_closing(line, shape_start + 1) + 1
            if shape_end <= 0:
                raise self.error("expected ')' closing the tuple shape", lineno, len(line.rstrip()) + 1)
        else:
            shape = _ARRAY_SHAPE.match(line, shape_start)
            if shape is None:
                raise self.error("expected a shape such as f32[2,3]{1,0} or (f32[], s32[2])", lineno, shape_start + 1)
            shape_end = shape.end()
        opcode = _OPCODE.match(line, shape_end)
        if opcode is None:
            raise self.error("expected an opcode followed by '(' after the shape", lineno, shape_end + 1)
        instr = HloInstruction(head.group(2), line[shape_start:shape_end], opcode.group(1), line, opcode.end(), lineno, comp)
        comp.instructions.append(instr)
        if head.group(1) is not None:
            self._set_root(comp, instr, lineno, line)

    def _set_root(self, comp: HloComputation, instr: HloInstruction, lineno: int, line: str) -> None:
        if comp.root is not None:
            raise self.error(f"computation '{comp.name}' has a second ROOT (first: '{comp.root.name}')", lineno, _column(line))
        comp.root = instr

    def _close_computation(self, comp: HloComputation) -> None:
        if not comp.instructions:
            raise self.error(f"computation '{comp.name}' has no instructions", comp.lineno, 1)
        last = comp.instructions[-1]
        if _open_brackets(last.text)[0] > 0:
            lines = last.text.rstrip("\n").split("\n")
            raise self.error(f"expected ')' in '{last.name}' before the end of the computation",
                             last.lineno + len(lines) - 1, len(lines[-1]) + 1)
        if comp.root is None:  # XLA takes the last instruction as the root
            comp.root = comp.instructions[-1]

    # -- module level ---------------------------------------------------------------------------------------------
    def _outside_computation(self, line: str, lineno: int) -> HloComputation | None:
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            self.table = None
            return None
        if self._save_tensors_wrapper(stripped, lineno, line):
            return None
        if stripped.startswith("HloModule"):
            match = _MODULE.match(stripped)
            if match is None:
                raise self.error("expected 'HloModule <name>[, attribute=value...]'", lineno, _column(line))
            self._finish_module()
            self.module = HloModule(match.group(1), stripped, self.path, lineno)
            self.modules.append(self.module)
            self.table = None
            return None
        if stripped in _STACK_TABLES and self.module is not None:
            self.table = self.module.stack_tables.setdefault(stripped, {})
            return None
        if self.table is not None:
            entry = _STACK_ENTRY.match(line)
            if entry is None:
                raise self.error("expected '<id> <value>' in a stack-frame table", lineno, _column(line))
            self.table[int(entry.group(1))] = entry.group(2)
            return None
        match = _COMPUTATION.match(line)
        if match is None:
            hint = _wrong_format(line) if not self.modules else None
            if hint:
                raise self.error(hint, lineno, _column(line))
            if _INSTRUCTION.match(line) or _INSTRUCTION_HEAD.match(line):
                raise self.error("instruction outside a computation: expected 'name {' before it", lineno, _column(line))
            expected = "'HloModule <name>' or a computation 'name {'" if not self.modules else "a computation 'name {', 'HloModule' or a comment"
            raise self.error(f"expected {expected}", lineno, _column(line))
        if self.module is None:  # XLA accepts computations without a module header
            self.module = HloModule("", "", self.path, lineno)
            self.modules.append(self.module)
        is_entry = match.group(1) is not None
        if is_entry and self.module.entry is not None:
            raise self.error(f"a second ENTRY computation in module '{self.module.name}'", lineno, _column(line))
        comp = HloComputation(match.group(2), is_entry, lineno, self.module, match.group(3) or "")
        self.module.computations.append(comp)
        if is_entry:
            self.module.entry = comp
        self.comp = comp
        return comp

    def _save_tensors_wrapper(self, stripped: str, lineno: int, line: str) -> bool:
        """PyTorch/XLA's XLA_SAVE_TENSORS_FILE wraps each graph in `[ScheduleSyncTensorsGraph]`, the Python frames
        that synced, `## BEGIN_GRAPH` ... `Graph Hash: ...` `## END_GRAPH`. Skip the wrapper, keep the HLO."""
        if stripped == "## BEGIN_GRAPH":
            self.in_wrapper = False
            self.graph_start = lineno
            return True
        if stripped == "## END_GRAPH" or stripped.startswith("[ScheduleSyncTensorsGraph]"):
            self.in_wrapper = True
            return True
        if stripped.startswith("Graph Hash:") and self.graph_start:
            return True
        if stripped.startswith("IR {") and self.graph_start == lineno - 1:
            raise self.error(
                "this is PyTorch/XLA's IR text, not HLO: save it with XLA_SAVE_TENSORS_FMT=hlo", lineno, _column(line)
            )
        return self.in_wrapper

    def _finish_module(self) -> None:
        module = self.module
        if module is None:
            return
        if not module.computations:
            raise self.error(f"module '{module.name}' has no computations (truncated file?)", module.lineno, 1)
        if module.entry is None:  # XLA takes the last computation as the entry
            module.entry = module.computations[-1]
            module.entry.is_entry = True
        uniquify_instruction_names(module)
        names = module.computations_by_name
        if len(names) != len(module.computations):
            seen = set()
            for comp in module.computations:
                if comp.name in seen:
                    raise self.error(f"computation '{comp.name}' is defined twice", comp.lineno, 1)
                seen.add(comp.name)

    def finish(self) -> list[HloModule]:
        end = self.lineno + 1
        if self.comp is not None:
            comp = self.comp
            raise self.error(
                f"unexpected end of file: computation '{comp.name}' (opened at line {comp.lineno}) is not closed with '}}'",
                end, 1,
            )
        if not self.modules:
            raise self.error("no HLO module found: expected 'HloModule <name>' (empty file?)", 1, 1)
        self._finish_module()
        return self.modules


def parse_hlo_text(text: str, path: str = "<string>") -> list[HloModule]:
    """Parse HLO text holding one or more modules (XLA test files separate them with `// -----`)."""
    if "\0" in text:
        index = text.index("\0")
        line = text.count("\n", 0, index) + 1
        raise ParseError(path, "binary data (NUL byte), not HLO text", line, index - text.rfind("\n", 0, index))
    # Lines as a file read in text mode gives them ('\n', '\r\n' and '\r' end a line), so positions match files.
    return _Parser(path).run(io.StringIO(text, newline=None))


def parse_hlo_file(path: str | os.PathLike) -> list[HloModule]:
    """Parse an HLO text file. Refuses binary files, files that are not UTF-8 and files too large for the memory."""
    from hloscope.hlo.reading import check_readable, open_text_lines

    path = os.fspath(path)
    check_readable(path)
    with open_text_lines(path) as lines:
        return _Parser(path).run(lines)
