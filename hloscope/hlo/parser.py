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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from hloscope.errors import ParseError
from hloscope.files import int64
from hloscope.hlo import attrs as scan
from hloscope.hlo.attrs import find_closing
from hloscope.hlo.model import CALLED_COMPUTATION_ATTRS, HloComputation, HloInstruction, HloModule
from hloscope.hlo.names import check_unique_in_computation, uniquify_instruction_names
from hloscope.hlo.native import native
from hloscope.hlo.opcodes import DERIVED_SHAPE, OPCODES, async_sugar, derived_shape, infer_shape
from hloscope.hlo.reading import check_readable, open_text_lines
from hloscope.hlo.shapes import parse_shape
from hloscope.hlo.verify import used_before_definition

_NAME = r"[A-Za-z_\-.$][\w.\-$]*"
# The common case in one match, as XLA prints it (single spaces): `  [ROOT] name = f32[2,3]{1,0} opcode(`.
# The shape is only delimited here; Shape parsing validates it when it is used. Anything else takes the slow path.
_INSTRUCTION = re.compile(rf"[ \t]*(ROOT )?%?({_NAME}) = ([a-z][a-z0-9]*\[[^ ]*) ([a-z][a-z0-9\-]*)\(")
# The slow path: any spacing, tuple shapes (scanned for their closing parenthesis).
_INSTRUCTION_HEAD = re.compile(rf"[ \t]*(ROOT[ \t]+)?%?({_NAME})[ \t]*=[ \t]*")
_ARRAY_SHAPE = re.compile(r"[a-z][a-z0-9]*\[[^\]\n]*\](?:\{[^}\n]*\})?")
_OPCODE = re.compile(r"[ \t]*([a-z][a-z0-9\-]*)\(")  # `(f32[2], s32[])parameter(0)`: no space needed
_BUFFER_SHAPE = re.compile(r"b[ \t]*\(")  # XLA's buffer shape, `b(f32[2,4])`
_OPCODE_AT = re.compile(r"([a-z][a-z0-9\-]*)\(")  # an instruction written without a shape: `n = negate(p)`
# A computation's closing brace, with what XLA may print after it (`}, execution_thread="..."`) and a comment.
_CLOSE = re.compile(r'\}[ \t]*(?:,[ \t]*execution_thread[ \t]*=[ \t]*"[^"]*")?[ \t]*(?://.*)?$')
# A nested operand, `add(f32[2] parameter(0), ...)`: an instruction written in place of an operand name (its shape an
# array, a tuple or a buffer `b(...)`).
_NESTED = re.compile(r"[ \t\n]*(?:((?:b[ \t]*)?\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)|[a-z][a-z0-9]*\[[^\]]*\](?:\{[^}]*\})?)[ \t\n]+)?([a-z][a-z0-9\-]*)\(", re.S)
# Line endings after which XLA's text goes on: an instruction continued on the next line.
_CONTINUES = ("{\n", ",\n", "(\n", "=\n")
_PLAIN_OPCODES = OPCODES - {"parameter"} - DERIVED_SHAPE
_COMPUTATION = re.compile(
    rf"[ \t]*(ENTRY[ \t]+)?%?({_NAME})[ \t]*(\(.*\)[ \t]*->.*?)?[ \t]*(,[ \t]*execution_thread=\"[^\"]*\")?[ \t]*\{{[ \t]*$"
)
_MODULE = re.compile(rf"HloModule[ \t]+%?({_NAME}):?[ \t]*(?:,|$|//|/\*)")
_STACK_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_STACK_ENTRY = re.compile(r"[ \t]*(\d+)[ \t]+(.*?)\s*$")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_SHAPED_OPERAND = re.compile(rf"(.*\S)\s+%?({_NAME})")  # `f32[2]{0} %a`: an operand's shape and name
_INLINE_COMMENT = re.compile(r"/\*.*?\*/")  # `ENTRY /*comment*/ c1 {`: XLA's lexer skips it


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused: it would rescan the module's object graph again and again while the parser
    creates millions of instructions, or the analyses resolve their operands (none of them is garbage): pausing it
    makes large modules ~30% faster to parse and the analyses of `hlo stats` ~8% faster. Their garbage has no cycles."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def open_brackets_python(text: str) -> tuple[int, int]:
    """(unclosed parentheses, unclosed braces and square brackets) of an instruction's text so far."""
    if text.count("(") == text.count(")") and text.count("{") == text.count("}") and text.count("[") == text.count("]"):
        return 0, 0  # the common case, decided without looking at quoted strings
    if '"' in text:
        text = _STRING.sub("", text)
    return text.count("(") - text.count(")"), text.count("{") + text.count("[") - text.count("}") - text.count("]")


# The same in one pass of C where built (the parser asks it of each computation's last instruction, twice).
_open_brackets: Callable[[str], tuple[int, int]] = native.open_brackets if native is not None else open_brackets_python


def _is_open(text: str) -> bool:
    """Does an instruction's text continue on the next line (unclosed brackets, or a trailing comma)?"""
    parens, braces = _open_brackets(text)
    return parens > 0 or braces > 0 or text.rstrip().endswith((",", "="))  # `calls=` with its `{` below


def _closes_computation(last: HloInstruction | None) -> bool:
    """A lone '}' closes the computation unless it closes a brace block the last instruction left open."""
    if last is None:
        return True
    parens, braces = _open_brackets(last.text)
    return not (braces > 0 and parens <= 0)


def _is_split_marker(stripped: str) -> bool:
    """`// -----`, the marker between the modules of a test file run with --split-input-file: exactly five dashes, as
    MLIR's splitter (splitAndProcessBuffer) and hlo-opt take it. A longer run of dashes (`// ----------------------`)
    is a decorative comment inside one module: MLIR warns of a near miss and does not split there, and without
    --split-input-file XLA's parser reads the whole file as one module."""
    return stripped.startswith("// -----") and not stripped.startswith("-", 8)


def _opens_comment(text: str) -> bool:
    """Does `text` end inside a /* comment (one it opens and does not close)?"""
    opened = text.rfind("/*")
    if opened < 0:
        return False
    if '"' in text:  # `op_name="a/*b"` opens nothing
        text = _STRING.sub('""', text)
        opened = text.rfind("/*")
    return opened >= 0 and text.find("*/", opened + 2) < 0


def _after_comment(stripped: str) -> str:
    """What follows a /* */ comment that starts a line (`/* x */ n = f32[2] negate(p)`), comments after it aside."""
    close = stripped.find("*/", 2)
    rest = stripped[close + 2 :].strip() if close >= 0 else ""
    return "" if rest.startswith(("//", "/*")) else rest


def _blank_comments(line: str) -> str:
    """`/* ... */` comments before the first quoted string of a line, each turned into as many spaces."""
    quote = line.find('"')
    head, tail = (line, "") if quote < 0 else (line[:quote], line[quote:])
    return _INLINE_COMMENT.sub(lambda match: " " * len(match.group()), head) + tail


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
    def __init__(self, path: str, first_line: int = 1, taken: frozenset[str] | set[str] = frozenset()):
        self.path = path
        self.taken = set(taken)  # computation names of the module an inline computation is read for
        self.first_line = first_line
        self.modules: list[HloModule] = []
        self.module: HloModule | None = None
        self.comp: HloComputation | None = None
        self.table: dict[int, str] | None = None  # the stack-frame table being read
        self.in_wrapper = False  # inside PyTorch/XLA's text around a saved graph
        self.async_threads: dict[tuple[int, str], str] = {}  # (module, async op) -> the thread its chain runs on
        self.in_comment = False  # inside a /* ... */ comment spanning lines
        self.header_open = False  # an HloModule header continued on the next line
        self.single_instruction = False  # the text is one instruction (see _single_instruction)
        self.graph_start = 0
        self.lineno = 0
        self._reset_computation()

    def _reset_computation(self) -> None:
        self.pending: HloInstruction | None = None  # an instruction continued on the next lines
        self.pending_head: tuple[str, int] | None = None  # `name = shape` whose opcode is on the next line
        self.parameters: dict[int, HloInstruction] = {}
        self.deferred: list[HloInstruction] = []  # instructions the computation's close must rewrite (see _finish_instruction)

    def error(self, message: str, lineno: int, col: int) -> ParseError:
        return ParseError(self.path, message, lineno, col)

    def run(self, lines: Iterable[str]) -> list[HloModule]:
        with collector_paused():
            return self._run(lines)

    def _run(self, lines: Iterable[str]) -> list[HloModule]:
        # One string object per distinct opcode and shape: modules repeat them thousands of times.
        self.shared: dict[str, str] = {}
        lineno = self.first_line - 1
        if native is None:
            for lineno, line in enumerate(lines, self.first_line):
                self._line(line, lineno)
        else:
            # The compiled scan takes the common instruction lines of a computation and hands back the first line it
            # does not take, which the Python code below reads exactly as it reads every line without the scan.
            scan = native.scan_instructions
            plain = _PLAIN_OPCODES
            shared = self.shared
            remaining = iter(lines)
            handed_back: str | None
            while True:
                comp = self.comp
                if comp is not None and self.pending is None and self.pending_head is None and not self.in_comment:
                    handed_back, lineno = scan(remaining, lineno, comp, comp.instructions, shared, plain,
                                               self.parameters)
                else:
                    handed_back = next(remaining, None)
                    lineno += handed_back is not None
                if handed_back is None:
                    break
                self._line(handed_back, lineno)
        self.lineno = lineno
        return self.finish()

    def _line(self, line: str, lineno: int) -> None:
        comp = self.comp
        if comp is None:
            self.comp = self._outside_computation(line, lineno)
            return
        if self.in_comment:  # a /* ... */ comment over several lines: what it holds is no instruction
            self._comment(line.strip())
            return
        if (self.pending is not None or self.pending_head is not None) and self._continue(line, lineno, comp):
            return
        instructions = comp.instructions
        match = _INSTRUCTION.match(line)
        if match is not None:
            root, name, shape, opcode = match.groups()
            pos = match.end()
            close = line.find(")", pos)
            nested = line.find("(", pos, close) >= 0
            share = self.shared.setdefault
            instr = HloInstruction(name, share(shape, shape), share(opcode, opcode), line, pos, lineno, comp,
                                   -1 if nested else close)
            instructions.append(instr)
            if root is not None:
                self._set_root(comp, instr, lineno, line)
            if opcode not in _PLAIN_OPCODES:
                self._special(instr, match.start(4))
            if nested and opcode != "constant":
                self.deferred.append(instr)  # a nested operand, or older text's tuple-shaped operand
            if line.endswith(_CONTINUES) and _is_open(line):
                self.pending = instr
            elif "/*" in line and _opens_comment(line):
                self.in_comment = True  # `p = f32[2] parameter(0) /* goes on` over the next lines
            return
        stripped = line.strip()
        if stripped.startswith("}") and _CLOSE.match(stripped) and _closes_computation(instructions[-1] if instructions else None):
            self._close_computation(comp)
            comp.module.end_lineno = lineno
            self.comp = None
        elif stripped.startswith("/*") and not _after_comment(stripped):
            self._comment(stripped)
        elif instructions and _opens_comment(instructions[-1].text):
            self.in_comment = True  # the rest of a comment an instruction's line opened (lines the scan took)
            self._comment(stripped)
        elif stripped and not stripped.startswith("//"):
            self._slow_instruction(line, lineno, comp)
            if "/*" in line and _opens_comment(line):
                self.in_comment = True

    def _comment(self, stripped: str) -> None:
        """Lines of a /* ... */ comment (JAX dumps may start with one)."""
        if self.in_comment:
            self.in_comment = "*/" not in stripped
        else:
            self.in_comment = "*/" not in stripped[2:]

    def _continue(self, line: str, lineno: int, comp: HloComputation) -> bool:
        """A line that continues the instruction before it; False when that one turned out complete."""
        if self.pending_head is not None:
            head, head_lineno = self.pending_head
            self.pending_head = None
            self._slow_instruction(head.rstrip() + " " + line.lstrip(), head_lineno, comp)
            return True
        pending = self.pending
        if pending is None:  # nothing continues (the caller checks for a pending head or instruction first)
            return False
        if not _is_open(pending.text):
            self.pending = None
            return False
        pending.text = pending.text.rstrip("\n") + "\n" + line
        if not _is_open(pending.text):
            self.pending = None
            if ("={" in pending.text or "= {" in pending.text or not pending.shape_text
                    or "(" in pending.operand_text) and not (self.deferred and self.deferred[-1] is pending):
                # an inline called computation (`to_apply={ ... }`), a nested operand or no shape: rewritten at '}'
                self.deferred.append(pending)
        return True

    def _special(self, instr: HloInstruction, col: int) -> None:
        """Opcodes that need more than the fast path: parameters (numbers unique), async syntax sugar, shapes XLA
        builds itself, unknown ones."""
        opcode = instr.opcode
        if opcode in DERIVED_SHAPE:
            if not (self.deferred and self.deferred[-1] is instr):
                self.deferred.append(instr)
            return
        if opcode == "parameter":
            close = instr.text.find(")", instr.pos)
            number = instr.text[instr.pos : close].strip()
            if number.isdigit():
                if int64(number) is None:
                    raise self.error(f"parameter number of {len(number):,} digits in '{instr.name}': beyond 64 bits",
                                     instr.lineno, col + 1)
                first = self.parameters.get(int(number))
                if first is not None:
                    raise self.error(f"duplicate parameter number {number} in computation '{instr.computation.name}' "
                                     f"(first: '{first.name}', line {first.lineno})", instr.lineno, col + 1)
                self.parameters[int(number)] = instr
            return
        if opcode in OPCODES:
            return
        if async_sugar(opcode) is not None:
            self.deferred.append(instr)
            return
        raise self.error(f"unknown opcode '{opcode}' (not one of XLA's opcodes)", instr.lineno, col + 1)

    # -- instructions the one-regex path does not take ------------------------------------------------------------
    def _slow_instruction(self, line: str, lineno: int, comp: HloComputation) -> None:
        """Lines the one-regex path does not take: tuple shapes, instructions without a shape, and instructions
        continued over several lines (multi-dimensional constants; hand-written test files break long attribute lists)."""
        if "/*" in line:  # `ROOT c = /*foo*/f32[1]{0} constant({1 /*bar*/})`: blanked, so columns stay right
            line = _blank_comments(line)
        previous = comp.instructions[-1] if comp.instructions else None
        if previous is not None and (_is_open(previous.text) or line.lstrip().startswith(",")):
            previous.text = previous.text.rstrip("\n") + "\n" + line
            return
        instr = self._make_instruction(line, lineno, comp)
        if instr is None:  # `name = shape` with the opcode on the next line
            self.pending_head = (line, lineno)
            return
        comp.instructions.append(instr)
        head = _INSTRUCTION_HEAD.match(line)
        if head is not None and head.group(1) is not None:
            self._set_root(comp, instr, lineno, line)
        if _is_open(instr.text):
            self.pending = instr
        elif ("(" in instr.operand_text or "={" in instr.text or not instr.shape_text) and not (
            self.deferred and self.deferred[-1] is instr
        ):
            self.deferred.append(instr)

    def _make_instruction(self, line: str, lineno: int, comp: HloComputation) -> HloInstruction | None:
        head = _INSTRUCTION_HEAD.match(line)
        if head is None or line.startswith(("{", "}"), head.end()):
            col = _column(line)
            if _COMPUTATION.match(line) or line.lstrip().startswith("HloModule"):
                raise self.error(f"expected '}}' closing computation '{comp.name}' (opened at line {comp.lineno})", lineno, col)
            raise self.error("expected an instruction 'name = shape opcode(operands)' or '}'", lineno, col)
        shape_start = head.end()
        if not line[shape_start:].strip():
            return None
        buffer = _BUFFER_SHAPE.match(line, shape_start)  # `b(f32[2,4])`: not an opcode `b`
        bare = _OPCODE_AT.match(line, shape_start) if buffer is None else None
        opcode: re.Match[str] | None
        if bare is not None:  # no shape: XLA infers it (see _infer_shape)
            shape_end = shape_start
            opcode = bare
        else:
            if buffer is not None or line.startswith("(", shape_start):
                open_at = buffer.end() - 1 if buffer is not None else shape_start
                shape_end = find_closing(line, open_at + 1) + 1
                if shape_end <= 0:
                    kind = "buffer" if buffer is not None else "tuple"
                    raise self.error(f"expected ')' closing the {kind} shape", lineno, len(line.rstrip()) + 1)
            else:
                shape = _ARRAY_SHAPE.match(line, shape_start)
                if shape is None:
                    raise self.error("expected a shape such as f32[2,3]{1,0} or (f32[], s32[2])", lineno, shape_start + 1)
                shape_end = shape.end()
            if not line[shape_end:].strip():
                return None
            opcode = _OPCODE.match(line, shape_end)
            if opcode is None:
                raise self.error("expected an opcode followed by '(' after the shape", lineno, shape_end + 1)
        instr = HloInstruction(head.group(2), line[shape_start:shape_end], opcode.group(1), line, opcode.end(), lineno, comp)
        if instr.opcode not in _PLAIN_OPCODES:
            self._special(instr, opcode.start(1))
        return instr

    def _set_root(self, comp: HloComputation, instr: HloInstruction, lineno: int, line: str) -> None:
        if comp.has_root:
            raise self.error(f"computation '{comp.name}' has a second ROOT (first: '{comp.root.name}')", lineno, _column(line))
        comp.root = instr

    def _close_computation(self, comp: HloComputation) -> None:
        if self.pending_head is not None:
            head, head_lineno = self.pending_head
            raise self.error("expected an opcode after the shape", head_lineno, len(head.rstrip()) + 1)
        if not comp.instructions:
            raise self.error(f"computation '{comp.name}' has no instructions", comp.lineno, 1)
        last = comp.instructions[-1]
        if _open_brackets(last.text)[0] > 0:
            lines = last.text.rstrip("\n").split("\n")
            raise self.error(f"expected ')' in '{last.name}' before the end of the computation",
                             last.lineno + len(lines) - 1, len(lines[-1]) + 1)
        if not comp.has_root:  # XLA takes the last instruction as the root
            comp.root = comp.instructions[-1]
        for instr in list(self.deferred):
            self._rewrite(instr, comp)
        self._reset_computation()

    # -- what XLA's parser builds beyond the text: nested operands, inline computations, async wrappers ------------
    def _rewrite(self, instr: HloInstruction, comp: HloComputation) -> None:
        if instr.opcode != "constant" and "(" in instr.operand_text:
            self._nested_operands(instr, comp)
        if "{" in instr.text[instr._operand_end():]:
            self._inline_computations(instr, comp)
        if instr.opcode in DERIVED_SHAPE:
            self._derive_shape(instr, comp)
        elif not instr.shape_text:
            self._infer_shape(instr, comp)
        if instr.opcode not in OPCODES:
            self._desugar(instr, comp)

    def _replace_text(self, instr: HloInstruction, text: str, pos: int | None = None) -> None:
        instr.text = text
        if pos is not None:
            instr.pos = pos
        instr.reset_caches()

    def _unique_instruction_name(self, base: str, comp: HloComputation) -> str:
        names = {i.name for i in comp.instructions}
        name, n = base, 0
        while name in names:
            n += 1
            name = f"{base}.{n}"
        return name

    def _unique_computation_name(self, base: str, module: HloModule) -> str:
        names = {c.name for c in module.computations} | self.taken
        name, n = base, 0
        while name in names:
            n += 1
            name = f"{base}.{n}"
        return name

    @staticmethod
    def _add_computation(new: HloComputation, before: HloComputation) -> None:
        """Called computations XLA's parser creates go before the computation being read (they are built first)."""
        computations = before.module.computations
        computations.insert(computations.index(before), new)

    def _nested_operands(self, instr: HloInstruction, comp: HloComputation) -> None:
        """`add(f32[2] parameter(0), n)`: each nested instruction becomes one of its own, named `<opcode>.anon`."""
        text, pos = instr.text, instr.pos
        end = instr._operand_end()
        segment = text[pos:end]
        if "/*" in segment:
            segment = scan._COMMENT.sub("", segment)
        try:
            pieces = scan._split_top_level(segment)
        except ValueError as error:  # unbalanced brackets in the operand list: the text is not HLO
            raise instr._error(f"bad operands of '{instr.name}': {error}") from None
        names = []
        changed = False
        for piece in pieces:
            nested = _NESTED.match(piece)
            if nested is None or not piece.rstrip().endswith(")"):
                names.append(piece.strip())
                continue
            name = self._unique_instruction_name(f"{nested.group(2)}.anon", comp)
            line = f"{name} = {piece.strip()}"
            inner = self._make_instruction(line, instr.lineno, comp)
            if inner is None or inner.text.rstrip().endswith(")") is False:
                raise instr._error(f"bad nested operand '{piece.strip()}' of '{instr.name}'")
            comp.instructions.insert(comp.instructions.index(instr), inner)
            comp._by_name = None
            self._rewrite(inner, comp)
            names.append(name)
            changed = True
        if changed:
            self._replace_text(instr, text[:pos] + ", ".join(names) + text[end:])

    def _inline_computations(self, instr: HloInstruction, comp: HloComputation) -> None:
        """`to_apply={ a = ... ROOT s = ... }`: a computation written inside the attribute, which XLA names `_`
        (`_.1`, ... where taken); `branch_computations={{...}, {...}}`: a list of them."""
        attrs = instr.attrs
        for key in CALLED_COMPUTATION_ATTRS:
            value = attrs.get(key)
            if value is None or not value.startswith("{") or "=" not in value:
                continue
            start = instr.text.find(value, instr._operand_end())
            inner = value[1:-1]
            if inner.strip().startswith("{"):
                names, offset = [], start + 1
                for block in scan._split_top_level(inner):
                    at = offset + len(block) - len(block.lstrip())
                    names.append(self._inline_computation(block.strip(), instr.lineno + instr.text.count("\n", 0, at), comp))
                    offset += len(block) + 1
                replacement = "{" + ", ".join(names) + "}"
            else:
                replacement = self._inline_computation(value, instr.lineno + instr.text.count("\n", 0, start), comp)
            self._replace_text(instr, instr.text[:start] + replacement + instr.text[start + len(value):])

    def _inline_computation(self, block: str, first_line: int, comp: HloComputation) -> str:
        """One `{ ... }` block read as a computation of the module (its own inline ones before it); its name."""
        sub = _Parser(self.path, first_line, self.taken | {c.name for c in comp.module.computations})
        body = block[1:-1]
        modules = sub.run(io.StringIO("_ {" + body + ("\n" if not body.endswith("\n") else "") + "}\n", newline=None))
        inner = modules[0]
        main = inner.entry
        main.is_entry = False
        for new in inner.computations:
            new.module = comp.module
            if new is main:
                new.name = self._unique_computation_name("_", comp.module)
            self._add_computation(new, comp)
        return main.name

    def _derive_shape(self, instr: HloInstruction, comp: HloComputation) -> None:
        """send, recv, their -done, infeed, add-dependency, after-all: the shape XLA's parser builds (opcodes.py)."""
        comp._by_name = None
        written = instr.shape if instr.shape_text else None
        derived = derived_shape(instr.opcode, written, [operand.shape for operand in self._operands_before(instr, comp)])
        if derived is not None:
            instr.shape_text = derived
        elif not instr.shape_text:
            self._infer_shape(instr, comp)

    @staticmethod
    def _operands_before(instr: HloInstruction, comp: HloComputation) -> tuple[HloInstruction, ...]:
        """The operands of the instruction being read, whose shapes make its own: each read before it (XLA's parser
        finds no other), never the instruction itself, which a name defined twice would also resolve to."""
        operands = instr.operands
        if any(operand is instr for operand in operands):
            check_unique_in_computation(comp)  # `p = negate(p)` after a parameter `p`: the name defined twice
            raise used_before_definition(instr, instr)
        return operands

    def _infer_shape(self, instr: HloInstruction, comp: HloComputation) -> None:
        comp._by_name = None
        shapes = [operand.shape for operand in self._operands_before(instr, comp)]
        if instr.opcode == "conditional":  # the shape of the branches' roots (they are read before the conditional)
            branches = instr.attrs.get("true_computation") or instr.attrs.get("branch_computations") or ""
            first = scan.name_list(branches)[:1]
            for called in comp.module.computations:
                if first and called.name == first[0] and called.has_root:
                    instr.shape_text = called.root.shape_text
                    return
        inferred = infer_shape(instr.opcode if instr.opcode in OPCODES else "", shapes, instr.attrs)
        if inferred is None:
            raise instr._error(f"'{instr.name}' has no shape, and hloscope infers shapes only for elementwise ops, "
                               "compare, select, tuple, get-tuple-element, dot and conditional: write its shape", instr.pos - len(instr.opcode) - 1)
        instr.shape_text = inferred

    def _desugar(self, instr: HloInstruction, comp: HloComputation) -> None:
        """`reduce-scatter-start(p), ...` -> `async-start(p), calls=async_wrapped` and a computation `async_wrapped`
        holding `async_param`s and the reduce-scatter, as XLA's parser builds it (update/done follow the start)."""
        sugar = async_sugar(instr.opcode)
        if sugar is None:  # _special refused every other opcode outside XLA's list
            raise RuntimeError(f"'{instr.name}': {instr.opcode} is not an async op to rewrite")
        async_opcode, wrapped = sugar
        module = comp.module
        chains = module.async_chains
        end = instr._operand_end()
        operands = instr.text[instr.pos : end]
        head = instr.text[: instr.pos - len(instr.opcode) - 1]
        # The thread each op of the chain runs on, kept on the rewritten op (verify.py: one thread per chain).
        thread = instr.attrs.get("async_execution_thread") if "async_execution_thread" in instr.text else None
        kept = f", async_execution_thread={thread}" if thread is not None else ""
        if async_opcode != "async-start":
            names = instr.operand_names
            origin = chains.get(names[0]) if names else None
            if origin is None or origin[0] != wrapped:
                raise instr._error(f"'{instr.name}' ({instr.opcode}) expects an operand produced by {wrapped}-start"
                                   f" or {wrapped}-update")
            chains[instr.name] = origin
            started = self.async_threads.get((id(module), names[0]), '"main"')
            if thread is not None and thread != started:
                raise instr._error(f"{instr.opcode} '{instr.name}' runs on thread {thread}, the async op it continues "
                                   f"on {started}", instr.text.find("async_execution_thread", end))
            self.async_threads[(id(module), instr.name)] = started
            text = f"{head}{async_opcode}({operands}){kept}\n"
            instr.opcode = async_opcode
            self._replace_text(instr, text, len(head) + len(async_opcode) + 1)
            return
        shape = instr.shape
        parts = shape.tuple_shapes
        operand_shapes = parts[0].tuple_shapes if parts is not None and len(parts) >= 2 else None
        if parts is None or operand_shapes is None:
            raise instr._error(f"the shape of '{instr.name}' ({instr.opcode}) must be a tuple "
                               "((operand shapes), output shape, ...)", max(instr.text.find(instr.shape_text), 0))
        name = self._unique_computation_name("async_wrapped", module)
        wrapper = HloComputation(name, False, instr.lineno, module, "")
        params = []
        for number, operand_shape in enumerate(operand_shapes):
            param_name = "async_param" if number == 0 else f"async_param.{number}"
            text = f"{param_name} = {operand_shape} parameter({number})"
            param = HloInstruction(param_name, str(operand_shape), "parameter", text, len(text) - len(str(number)) - 1,
                                   instr.lineno, wrapper)
            wrapper.instructions.append(param)
            params.append(param_name)
        output = str(parts[1])
        prefix = f"ROOT {wrapped} = {output} {wrapped}("
        text = prefix + ", ".join(params) + instr.text[end:]
        inner = HloInstruction(wrapped, output, wrapped, text, len(prefix), instr.lineno, wrapper)
        wrapper.instructions.append(inner)
        wrapper.root = inner
        self._add_computation(wrapper, comp)
        chains[instr.name] = (wrapped, name)
        self.async_threads[(id(module), instr.name)] = thread or '"main"'
        instr.opcode = "async-start"
        text = f"{head}async-start({operands}), calls={name}{kept}\n"
        self._replace_text(instr, text, len(head) + len("async-start") + 1)

    # -- module level ---------------------------------------------------------------------------------------------
    def _outside_computation(self, line: str, lineno: int) -> HloComputation | None:
        stripped = line.strip()
        if self.header_open:
            self._continue_header(stripped, lineno)
            return None
        if self.in_comment or stripped.startswith("/*"):
            self._comment(stripped)
            return None
        if not stripped or stripped.startswith("//"):
            self.table = None
            if _is_split_marker(stripped) and self.module is not None and self.module.computations:
                self._finish_module()  # XLA's test files: each chunk is a module, with or without 'HloModule'
                self.module = None
            return None
        if (self._save_tensors_wrapper(stripped, lineno, line) or self._module_header(stripped, lineno, line)
                or self._stack_table_line(stripped, lineno, line)):
            return None
        match = _COMPUTATION.match(_INLINE_COMMENT.sub(" ", line) if "/*" in line else line)
        if match is None:
            return self._not_a_computation_head(line, lineno)
        return self._open_computation(match, lineno, line)

    def _continue_header(self, stripped: str, lineno: int) -> None:
        module = self.module
        if module is None:  # header_open is set only by a module's header line
            raise RuntimeError(f"line {lineno}: a module header continues with no module open")
        module.header += " " + stripped
        self.header_open = any(_open_brackets(module.header))

    def _module_header(self, stripped: str, lineno: int, line: str) -> bool:
        if not stripped.startswith("HloModule"):
            return False
        match = _MODULE.match(stripped)
        if match is None:
            raise self.error("expected 'HloModule <name>[, attribute=value...]'", lineno, _column(line))
        self._finish_module()
        self.module = HloModule(match.group(1), stripped, self.path, lineno)
        self.modules.append(self.module)
        self.table = None
        self.header_open = any(_open_brackets(stripped))
        return True

    def _stack_table_line(self, stripped: str, lineno: int, line: str) -> bool:
        """A stack-frame table's title, or one '<id> <value>' entry of the table open now."""
        if stripped in _STACK_TABLES and self.module is not None:
            self.table = self.module.stack_tables.setdefault(stripped, {})
            return True
        if self.table is None:
            return False
        entry = _STACK_ENTRY.match(line)
        if entry is None:
            raise self.error("expected '<id> <value>' in a stack-frame table", lineno, _column(line))
        number = int64(entry.group(1))
        if number is None:
            raise self.error(f"a stack-frame table id of {len(entry.group(1)):,} digits: beyond 64 bits", lineno,
                             _column(line))
        self.table[number] = entry.group(2)
        return True

    def _not_a_computation_head(self, line: str, lineno: int) -> HloComputation | None:
        """A line that opens no computation: a lone instruction (XLA parses one as a module), or an error."""
        hint = _wrong_format(line) if not self.modules else None
        if hint:
            raise self.error(hint, lineno, _column(line))
        if self.module is None and not self.modules and self._single_instruction(line, lineno):
            return self.comp
        if _INSTRUCTION.match(line) or _INSTRUCTION_HEAD.match(line):
            raise self.error("instruction outside a computation: expected 'name {' before it", lineno, _column(line))
        expected = "'HloModule <name>' or a computation 'name {'" if not self.modules else "a computation 'name {', 'HloModule' or a comment"
        raise self.error(f"expected {expected}", lineno, _column(line))

    def _open_computation(self, match: re.Match[str], lineno: int, line: str) -> HloComputation:
        if self.module is None:  # XLA accepts computations without a module header
            self.module = HloModule("", "", self.path, lineno)
            self.modules.append(self.module)
        is_entry = match.group(1) is not None
        if is_entry and self.module.has_entry:
            raise self.error(f"a second ENTRY computation in module '{self.module.name}'", lineno, _column(line))
        comp = HloComputation(match.group(2), is_entry, lineno, self.module, match.group(3) or "")
        self.module.computations.append(comp)
        if is_entry:
            self.module.entry = comp
        self.comp = comp
        self._reset_computation()
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
        if not module.has_entry:  # XLA takes the last computation as the entry
            module.entry = module.computations[-1]
            module.entry.is_entry = True
        if not module.header and not module.name:  # no 'HloModule' line: XLA names the module after its entry
            module.name = f"module_{module.entry.name}"
        uniquify_instruction_names(module)
        names = module.computations_by_name
        if len(names) != len(module.computations):
            seen = set()
            for comp in module.computations:
                if comp.name in seen:
                    raise self.error(f"computation '{comp.name}' is defined twice", comp.lineno, 1)
                seen.add(comp.name)

    def _single_instruction(self, line: str, lineno: int) -> bool:
        """A text that is one instruction, `[name =] shape opcode(shape [name], ...), attributes` (XLA's
        ParseSingleInstruction): a module `_` whose entry `_` holds a parameter per operand (named as the operand,
        else `_<n>`) and the instruction as its root (named `_` when the text names none). False when `line` does not
        read so."""
        head = _INSTRUCTION_HEAD.match(line)
        start = head.end() if head is not None else len(line) - len(line.lstrip())
        if line.startswith("(", start):
            shape_end = find_closing(line, start + 1) + 1
            shape = None
        else:
            array = _ARRAY_SHAPE.match(line, start)
            shape_end = array.end() if array is not None else 0
        opcode = _OPCODE.match(line, shape_end) if shape_end > start else None
        if opcode is None:
            return False
        close = find_closing(line, opcode.end())
        if close < 0:
            return False
        segment = line[opcode.end() : close]
        names, params = [], []
        for number, piece in enumerate(scan._split_top_level(segment) if segment.strip() else []):
            named = _SHAPED_OPERAND.fullmatch(piece.strip())
            shape, name = (named.group(1), named.group(2)) if named is not None else (piece.strip(), f"_{number}")
            try:
                parse_shape(shape)
            except ValueError:
                col = line.find(piece.strip(), opcode.end()) + 1
                raise self.error(f"operand '{piece.strip()}' has no shape: an instruction alone in the text must give "
                                 "each operand's shape", lineno, col) from None
            names.append(name)
            params.append(f"{name} = {shape} parameter({number})\n")
        self.module = HloModule("_", "", self.path, lineno)
        self.modules.append(self.module)
        comp = self.comp = HloComputation("_", True, lineno, self.module)
        self.module.computations.append(comp)
        self.module.entry = comp
        self._reset_computation()
        self.single_instruction = True
        for param in params:
            self._line(param, lineno)
        name = head.group(2) if head is not None else "_"
        self._line(f"ROOT {name} = {line[start:shape_end]} {opcode.group(1)}({', '.join(names)}){line[close + 1:]}", lineno)
        return True

    def finish(self) -> list[HloModule]:
        end = self.lineno + 1
        if self.comp is not None and self.single_instruction and self.pending is None:
            self._close_computation(self.comp)  # the instruction alone in the text: no '}' closes its computation
            self.comp = None
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


def parse_hlo_file(path: str | os.PathLike[str]) -> list[HloModule]:
    """Parse an HLO text file. Refuses binary files, files that are not UTF-8 and files too large for the memory."""
    path = os.fspath(path)
    check_readable(path)
    with open_text_lines(path) as lines:
        return _Parser(path).run(lines)
