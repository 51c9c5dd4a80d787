"""What `hloscope replay` accepts, decided before any XLA code sees the file (docs/replay.md "What replay accepts").

A module is read through the bounded reader (hloscope.files), then:
- HLO text is parsed and validated by hloscope's own parser; StableHLO is scanned for its custom calls, host transfers
  and `@main` signature;
- every custom call must name a target of ALLOWED_CUSTOM_CALLS exactly (a default-deny list: a target that is not
  there, however it is spelled, escaped or quoted, is refused), and no instruction may send to or receive from the
  host (send, recv, infeed, outfeed);
- entry parameters may not be tokens, and no parameter (in HLO: no instruction) may hold more bytes than the limits
  of hloscope.limits allow.
Each refusal is one InputError naming the file (with line:column where the text gives one). The child that compiles
and executes (hloscope.replay.worker) checks the custom calls again on the module as XLA parsed it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from hloscope.errors import InputError
from hloscope.files import read_text
from hloscope.hlo.parser import parse_hlo_text
from hloscope.hlo.reading import check_readable
from hloscope.limits import MAX_REPLAY_ARRAY_BYTES, MAX_REPLAY_INPUT_BYTES, MAX_REPLAY_MODULE_BYTES

# Custom-call targets replay runs: annotations XLA removes or pure device kernels of jaxlib, none of which calls back
# into a host process. Matched by exact name; anything else is refused.
ALLOWED_CUSTOM_CALLS = frozenset({
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",  # sharding annotations (one device: no-ops)
    "cu_threefry2x32", "cu_threefry2x32_ffi",  # jaxlib's GPU random-bits kernel
})
# Instructions that talk to the host: with no framework on the other side they wait forever (or crash).
HOST_OPCODES = frozenset({"send", "send-done", "recv", "recv-done", "infeed", "outfeed"})
_MLIR_HOST_OPS = re.compile(r"\b(?:stablehlo|mhlo)\.(send|recv|infeed|outfeed)\b")

_ELEMENT_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
                  "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_MLIR_TYPES = {"i1": "pred", "i8": "s8", "i16": "s16", "i32": "s32", "i64": "s64", "ui8": "u8", "ui16": "u16",
               "ui32": "u32", "ui64": "u64", "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64",
               "complex<f32>": "c64", "complex<f64>": "c128"}


@dataclass(frozen=True)
class Parameter:
    """An entry parameter as the module's text declares it: HLO element type (f32, s64, ...) and dimensions."""

    dtype: str
    dims: tuple[int, ...]

    @property
    def text(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"

    @property
    def byte_size(self) -> int:
        size = _ELEMENT_BYTES.get(self.dtype, 8)
        for dim in self.dims:
            size *= dim
        return size


@dataclass
class Accepted:
    """A module replay will hand to XLA: its file, format and entry parameters."""

    name: str
    file: str
    fmt: str  # "hlo" | "mlir"
    parameters: list[Parameter]


def describe_target(target: str) -> str:
    """Why a custom-call target is refused, in a phrase."""
    shown = target if len(target) <= 80 else target[:77] + "..."
    if "callback" in target.lower() or "host" in target.lower():
        return (f"calls back into the host ({shown!r}): the framework's Python is not there to answer it, and replay "
                "runs only custom calls it knows (docs/replay.md)")
    return f"custom call {shown!r} is not one replay runs (allowed: {', '.join(sorted(ALLOWED_CUSTOM_CALLS))})"


def accept_module(path: str | os.PathLike, name: str, fmt: str) -> Accepted:
    """Read and check one module; InputError (one line naming the file) for anything replay does not run."""
    file = os.fspath(path)
    text = read_text(file, "HLO module", MAX_REPLAY_MODULE_BYTES)  # a larger file is refused before it is read
    if fmt == "hlo":  # what `hlo stats` refuses before parsing: empty, binary, or too large for the memory left
        check_readable(file)
    parameters = _check_hlo(file, text) if fmt == "hlo" else _check_mlir(file, text)
    total = sum(p.byte_size for p in parameters)
    if total > MAX_REPLAY_INPUT_BYTES:
        raise InputError(file, f"its entry parameters hold {total / 2**30:.1f} GiB together, over replay's limit of "
                               f"{MAX_REPLAY_INPUT_BYTES / 2**30:.0f} GiB")
    return Accepted(name=name, file=file, fmt=fmt, parameters=parameters)


def _check_hlo(file: str, text: str) -> list[Parameter]:
    try:
        modules = parse_hlo_text(text, file)
        for module in modules:
            module.validate()
    except RecursionError:
        raise InputError(file, "HLO nested too deeply to check: not replayed") from None
    if len(modules) != 1:
        raise InputError(file, f"holds {len(modules)} HLO modules; replay runs one module per file")
    (module,) = modules
    for instr in module.all_instructions():
        if instr.opcode in HOST_OPCODES:
            raise instr._error(f"'{instr.opcode}' talks to the host, which is not there in a replay: not replayed")
        if instr.opcode == "custom-call":
            target = instr.custom_call_target
            if target is None or target not in ALLOWED_CUSTOM_CALLS:
                at = instr.text.find("custom_call_target")
                raise instr._error(describe_target(target or "") if target is not None
                                   else "a custom call without a target", at if at >= 0 else None)
        for leaf in instr.shape.leaves():
            if leaf.element_type != "token" and leaf.byte_size > MAX_REPLAY_ARRAY_BYTES:
                raise instr._error(f"{instr.name} is {leaf} ({leaf.byte_size / 2**30:.1f} GiB), over replay's limit "
                                   f"of {MAX_REPLAY_ARRAY_BYTES / 2**30:.0f} GiB per array")
    parameters: list[Parameter] = []
    entry = module.entry
    params = sorted((i for i in entry.instructions if i.opcode == "parameter"),
                    key=lambda i: int(i.operand_text) if i.operand_text.strip().isdigit() else 0)
    for instr in params:
        for leaf in instr.shape.leaves():
            if leaf.element_type == "token":
                raise instr._error(f"entry parameter {instr.name} is a token: replay cannot make one (it orders "
                                   "host communication, which a replay does not have)")
            if leaf.is_dynamic:
                raise instr._error(f"entry parameter {instr.name} has a dynamic shape ({leaf}): replay needs static "
                                   "shapes")
            if leaf.element_type is None:  # a leaf of a shape is an array, which has an element type
                raise RuntimeError(f"entry parameter {instr.name}: an array leaf without an element type")
            parameters.append(Parameter(leaf.element_type, tuple(leaf.dims)))
    return parameters


# `stablehlo.custom_call @target(` (pretty form) or `call_target_name = "target"` (generic form): a quoted name is
# kept as written, escapes included, so that it can only match the allow-list if it is a plain name.
_MLIR_TARGETS = re.compile(r'custom_call\s*@("(?:[^"\\\n]|\\.)*"|[^\s(<{]+)|call_target_name\s*=\s*("(?:[^"\\\n]|\\.)*")')
_MLIR_CUSTOM_CALL = re.compile(r"\b(?:stablehlo|mhlo)\.custom_call\b")
_MAIN = re.compile(r"func\.func\s+(?:public\s+)?@main\s*\(")
_ARG = re.compile(r"%arg\d+\s*:\s*(tensor<[^>]*(?:<[^>]*>[^>]*)?>|![\w.]+)")


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _check_mlir(file: str, text: str) -> list[Parameter]:
    nul = text.find("\0")  # MLIR's parser stops at a NUL: the rest of the module would go unchecked, or unread
    if nul >= 0:
        raise InputError(file, "a NUL byte, which StableHLO text never holds: not replayed", *_position(text, nul))
    found = 0
    for match in _MLIR_TARGETS.finditer(text):
        raw = match.group(1) or match.group(2)
        target = raw[1:-1] if raw.startswith('"') else raw
        found += 1
        if "\\" in target or target not in ALLOWED_CUSTOM_CALLS:
            raise InputError(file, describe_target(target), *_position(text, match.start()))
    calls = list(_MLIR_CUSTOM_CALL.finditer(text))
    if len(calls) > found:  # a custom call whose target the scan above did not read: refused, never guessed
        raise InputError(file, "a custom call whose target replay cannot read: not replayed",
                         *_position(text, calls[found].start()))
    host = _MLIR_HOST_OPS.search(text)
    if host:
        raise InputError(file, f"'{host.group(0)}' talks to the host, which is not there in a replay: not replayed",
                         *_position(text, host.start()))
    main = _MAIN.search(text)
    if main is None:
        raise InputError(file, "no `func.func @main(...)`: not a StableHLO module replay can run")
    arguments = text[main.end(): _closing(text, main.end() - 1)]
    parameters = []
    for match in _ARG.finditer(arguments):
        line, col = _position(text, main.end() + match.start())
        kind = match.group(1)
        if kind.startswith("!"):
            what = "a token" if kind.endswith(".token") else f"of type {kind}"
            raise InputError(file, f"entry parameter {match.group(0).split(':')[0]} is {what}: replay cannot make "
                                   "one", line, col)
        parameter = _tensor(kind)
        if parameter is None:
            raise InputError(file, f"entry parameter {match.group(0).split(':')[0]} has a type replay does not "
                                   f"build ({kind[:60]})", line, col)
        if parameter.byte_size > MAX_REPLAY_ARRAY_BYTES:
            raise InputError(file, f"entry parameter {match.group(0).split(':')[0]} is {parameter.text} "
                                   f"({parameter.byte_size / 2**30:.1f} GiB), over replay's limit of "
                                   f"{MAX_REPLAY_ARRAY_BYTES / 2**30:.0f} GiB per array", line, col)
        parameters.append(parameter)
    return parameters


def _closing(text: str, open_at: int) -> int:
    """The index of the ')' closing the '(' at `open_at` (strings skipped); the end of the text when there is none."""
    depth, i, n = 0, open_at, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return n


def _tensor(kind: str) -> Parameter | None:
    """`tensor<4x3xf32>` -> Parameter("f32", (4, 3)); None for what replay does not build (dynamic, unknown type)."""
    body = kind[len("tensor<"):-1].split(",")[0].strip()  # drop an encoding (`, #stablehlo.bounds<...>`)
    cut = body.find("complex<") if "complex<" in body else body.rfind("x") + 1
    element, prefix = body[cut:], body[:cut].rstrip("x")
    dtype = _MLIR_TYPES.get(element)
    dims = []
    for part in prefix.split("x") if prefix else []:
        if not part.isdigit() or len(part) > 15:  # `?`: dynamic
            return None
        dims.append(int(part))
    return Parameter(dtype, tuple(dims)) if dtype else None
