"""What XLA refuses in a module that parses: the checks of its parser (`hlo_parser.cc`: operand counts, parameter
numbers, the root against the computation's signature, async chains) and of its verifier (`hlo_verifier.cc`:
element counts, permutations, broadcast and slice bounds, elementwise shapes, called computations' parameters) that
the model can make, each refused as ParseError at the line and column of what is wrong.

One pass over the instructions after HloModule.validate resolved their operands: each check reads only the
instruction, its operands' shapes (parsed once per distinct text) and, for the few opcodes that need one, one
attribute. Dynamic shapes (`<=n`, `?`) are checked only where their dimensions cannot matter.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from hloscope.errors import ParseError
from hloscope.hlo.attrs import _split_top_level
from hloscope.hlo.opcodes import BINARY_ELEMENTWISE, UNARY_ELEMENTWISE
from hloscope.hlo.shapes import Shape, parse_shape

if TYPE_CHECKING:
    from hloscope.hlo.model import HloComputation, HloInstruction, HloModule

# Operands each opcode takes where XLA's parser fixes their number (ParseOperands(..., expected_size)).
_ARITY: dict[str, int] = {
    **dict.fromkeys(UNARY_ELEMENTWISE, 1),
    **dict.fromkeys(BINARY_ELEMENTWISE, 2),
    **dict.fromkeys(("is-finite", "real", "imag", "convert", "bitcast-convert", "transpose", "reshape", "broadcast",
                     "slice", "reverse", "get-tuple-element", "cholesky", "fft", "get-dimension-size", "bitcast",
                     "copy-start", "copy-done", "all-gather-done", "all-reduce-done", "collective-permute-done",
                     "send-done", "recv-done", "while"), 1),
    **dict.fromkeys(("compare", "complex", "pad", "triangular-solve", "set-dimension-size", "add-dependency",
                     "stochastic-convert", "send"), 2),
    **dict.fromkeys(("dot", "convolution"), 2),
    **dict.fromkeys(("rng-bit-generator",), 1),
    **dict.fromkeys(("select", "clamp"), 3),
    **dict.fromkeys(("iota", "partition-id", "replica-id", "rng-get-and-update-state"), 0),
}
# Elementwise ops: every array operand has the result's dimensions (the verifier refuses implicit broadcasts).
_SAME_DIMS = UNARY_ELEMENTWISE | BINARY_ELEMENTWISE | {"compare", "convert", "is-finite", "real", "imag", "complex",
                                                       "stochastic-convert"}
_PLAIN_VALUE = re.compile(r'\{[^{}"]*\}(?=\s*(?:,|$))|[^\s,{}()"]+(?=\s*(?:,|$))')
# The values a constant of each type may hold (XLA's parser refuses a literal outside them: `u4[] constant(16)`;
# 64-bit literals are read as int64 and wrap, so `u64[] constant(-1)` is taken). Floats: a value that overflows to
# infinity in the type (its largest finite value plus half a unit in the last place, or more) is refused.
_INT_RANGES = {f"{kind}{bits}": ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if kind == "s" else (0, (1 << bits) - 1))
               for kind in "su" for bits in (1, 2, 4, 8, 16, 32)}
_FLOAT_MAX = {"f16": 65504.0 + 16, "bf16": 3.3895313892515355e38 + 2.0**119, "f32": 3.4028234663852886e38 + 2.0**103,
              "c64": 3.4028234663852886e38 + 2.0**103, "f64": float("inf"), "c128": float("inf")}
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.(])")
_INDEX = r"\{\s*(?:\d+\s*(?:,\s*\d+\s*)*)?\}"  # a shape index, `{0, 1}`
_ALIAS = rf"{_INDEX}\s*:\s*\(\s*\d+\s*,\s*{_INDEX}\s*(?:,\s*[a-z][a-z\-]*\s*)?\)"  # `{1}: (0, {1}, must-alias)`
_DONOR = rf"\(\s*\d+\s*,\s*{_INDEX}\s*\)"  # `(0, {1})`
# The module attributes XLA's parser reads entry by entry: their whole value as it takes it.
_MODULE_VALUES = {
    "input_output_alias": re.compile(rf"\{{\s*(?:{_ALIAS}\s*(?:,\s*{_ALIAS}\s*)*)?\}}"),
    "buffer_donor": re.compile(rf"\{{\s*(?:{_DONOR}\s*(?:,\s*{_DONOR}\s*)*)?\}}"),
}
_API_VERSIONS = {"API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING", "API_VERSION_STATUS_RETURNING_UNIFIED",
                 "API_VERSION_TYPED_FFI"}
_NUMBER_VALUE = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_ACCURACY = re.compile(rf"\{{\s*(?:mode\s*=\s*(?:default|highest)|tolerance\s*=\s*\{{\s*(?:(?:rtol|atol|ulps)\s*=\s*"
                       rf"{_NUMBER_VALUE}\s*(?:,\s*(?:rtol|atol|ulps)\s*=\s*{_NUMBER_VALUE}\s*)*)?\}})\s*\}}", re.I)
_INTS = re.compile(r"-?\d+")
_SLICE = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]")


def _attr(instr: HloInstruction, key: str) -> str | None:
    """One attribute's text, without splitting the attribute list where it is plain (`, key={1,0}` or `, key=v`
    before any quoted string), nor keeping the split list on the instruction (most are never asked for again)."""
    attrs = instr._attrs
    if attrs is None:
        text = instr.text
        if key not in text:
            return None
        start = instr._operand_end()
        at = text.find(key + "=", start)
        if at > start and text[at - 1] in ", \t" and text.find('"', start, at) < 0:
            value = _PLAIN_VALUE.match(text, at + len(key) + 1)
            if value is not None:
                return value.group()
        attrs = instr._scan_attributes()
    return attrs.get(key)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _static(shape: Shape) -> bool:
    """An array with only static dimensions (the checks that compare sizes take only these)."""
    return shape.tuple_shapes is None and not shape.dynamic and shape.element_type not in ("token", "opaque")


def _compatible(a: Shape, b: Shape) -> bool:
    """XLA's ShapeUtil::Compatible, where it can be decided: same element types and dimensions, layouts ignored
    (True where a dynamic dimension or a buffer leaves it open)."""
    if a.tuple_shapes is not None or b.tuple_shapes is not None:
        if a.tuple_shapes is None or b.tuple_shapes is None or len(a.tuple_shapes) != len(b.tuple_shapes):
            return False
        return all(_compatible(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    if a.dynamic or b.dynamic or a.buffer or b.buffer:
        return True
    return a.element_type == b.element_type and a.dims == b.dims


class _Verifier:
    def __init__(self, module: HloModule):
        self.module = module
        self.parameter_counts: dict[str, int] = {}
        self.signatures: set[tuple[str, str]] = set()  # (declared result, root shape) texts found compatible
        # Computations the parser built for async syntax sugar (`call-start()`): XLA's parser leaves the wrapped
        # instruction's operands to the async ops, so their count is not checked there.
        self.wrappers = {wrapper for _, wrapper in module.async_chains.values()}

    def error(self, instr: HloInstruction, message: str, near: str | None = None) -> ParseError:
        """ParseError at `near` in the instruction's text (an attribute), else at its opcode."""
        index = instr.text.find(near, instr._operand_end()) if near else -1
        if index < 0:
            index = instr.pos - len(instr.opcode) - 1
        return instr._error(message, max(index, 0))

    def ints(self, instr: HloInstruction, key: str) -> list[int] | None:
        value = _attr(instr, key)
        if value is None:
            return None
        return [int(v) for v in _INTS.findall(value)]

    # -- computations -----------------------------------------------------------------------------------------------
    def computation(self, comp: HloComputation) -> None:
        numbers: dict[int, HloInstruction] = {}
        for instr in [i for i in comp.instructions if i.opcode == "parameter"]:
            written = instr.text[instr.pos : instr._operand_end()].strip()
            if not written.isdigit():
                raise instr._error(f"expected a parameter number in '{instr.name}', got '{written}'")
            numbers[int(written)] = instr
        for number, instr in numbers.items():
            if number >= len(numbers):
                raise instr._error(f"parameter number {number} of '{instr.name}' is out of range: computation "
                                   f"'{comp.name}' has {_count(len(numbers), 'parameter')}, numbered 0 to {len(numbers) - 1}",
                                   instr.text.find(str(number), instr.pos))
        self.parameter_counts[comp.name] = len(numbers)
        self.signature(comp)

    def signature(self, comp: HloComputation) -> None:
        """XLA's parser: the root's shape must be compatible with the result the computation's signature declares."""
        arrow = comp.signature.rfind("->")
        if arrow < 0:
            return
        key = (comp.signature[arrow + 2 :].strip(), comp.root.shape_text)
        if key[0] == key[1] or key in self.signatures:
            return
        self.signatures.add(key)
        try:
            declared = parse_shape(comp.signature[arrow + 2 :].strip())
        except ValueError as error:
            raise ParseError(self.module.path, f"bad result shape in the signature of '{comp.name}': {error}",
                             comp.lineno, 1) from None
        root = comp.root
        if not _compatible(declared, root.shape):
            raise ParseError(self.module.path, f"the signature of computation '{comp.name}' declares {declared}, "
                             f"its root '{root.name}' is {root.shape}", comp.lineno, 1)

    def parameters_of(self, callee: HloComputation) -> int:
        count = self.parameter_counts.get(callee.name)
        if count is None:
            count = sum(1 for i in callee.instructions if i.opcode == "parameter")
        return count

    def calls(self, instr: HloInstruction, key: str, expected: int) -> None:
        value = _attr(instr, key)
        if value is None:
            return
        by_name = self.module.computations_by_name
        for name in value.strip("{}").split(","):
            callee = by_name.get(name.strip().lstrip("%"))
            if callee is None:
                continue  # validation reports an undefined computation
            count = self.parameters_of(callee)
            if count != expected:
                raise self.error(instr, f"'{instr.name}' ({instr.opcode}) passes {_count(expected, 'argument')} to "
                                        f"'{callee.name}', but '{callee.name}' takes {_count(count, 'parameter')}",
                                 key + "=")

    # -- instructions -----------------------------------------------------------------------------------------------
    def defined_later(self, instr: HloInstruction, operand: HloInstruction) -> None:
        at = re.search(r"(?<![\w.\-$])%?" + re.escape(operand.name) + r"(?![\w.\-$])", instr.text[instr.pos :])
        raise instr._error(f"operand '{operand.name}' of '{instr.name}' is used before its definition (line "
                           f"{operand.lineno})", instr.pos + at.start() if at else None)

    def arity(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        arity = _ARITY.get(instr.opcode)
        if arity is not None and len(operands) != arity:
            raise self.error(instr, f"'{instr.name}' ({instr.opcode}) takes {_count(arity, 'operand')}, "
                                    f"not {len(operands)}")

    def same_dims(self, instr: HloInstruction, operand: HloInstruction) -> None:
        shape, theirs = instr.shape, operand.shape
        if _static(shape) and _static(theirs) and theirs.dims != shape.dims:
            raise self.error(instr, f"'{instr.name}' ({instr.opcode}) is elementwise: operand '{operand.name}' "
                                    f"{theirs} and the result {shape} differ in dimensions")

    def reshape(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        shape, source = instr.shape, operands[0].shape
        if _static(shape) and _static(source) and shape.elements != source.elements:
            raise self.error(instr, f"reshape '{instr.name}' changes the element count: {source} has "
                                    f"{source.elements} elements, {shape} has {shape.elements}")

    def transpose(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        source = operands[0].shape
        permutation = self.ints(instr, "dimensions")
        if permutation is None or source.tuple_shapes is not None:
            return
        rank = len(source.dims)
        if sorted(permutation) != list(range(rank)):
            raise self.error(instr, f"transpose '{instr.name}': dimensions={{{','.join(map(str, permutation))}}} is not "
                                    f"a permutation of the operand's {_count(rank, 'dimension')}", "dimensions=")
        shape = instr.shape
        if _static(shape) and _static(source) and shape.dims != tuple(source.dims[p] for p in permutation):
            raise self.error(instr, f"transpose '{instr.name}' of {source} by {{{','.join(map(str, permutation))}}} "
                                    f"is not {shape}")

    def broadcast(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        source, shape = operands[0].shape, instr.shape
        dims = self.ints(instr, "dimensions")
        if source.tuple_shapes is not None or shape.tuple_shapes is not None:
            return
        if dims is None:
            if source.dims:
                raise self.error(instr, f"broadcast '{instr.name}' of a {len(source.dims)}-dimensional operand needs "
                                        "dimensions={...}")
            return
        if len(dims) != len(source.dims):
            raise self.error(instr, f"broadcast '{instr.name}': dimensions has {len(dims)} entries for an operand of "
                                    f"{_count(len(source.dims), 'dimension')}", "dimensions=")
        for index, dim in enumerate(dims):
            if not 0 <= dim < len(shape.dims):
                raise self.error(instr, f"broadcast '{instr.name}': dimension {dim} is outside the result's "
                                        f"{len(shape.dims)} dimensions", "dimensions=")
            if _static(shape) and _static(source) and shape.dims[dim] != source.dims[index]:
                raise self.error(instr, f"broadcast '{instr.name}': operand dimension {index} ({source.dims[index]}) "
                                        f"maps to result dimension {dim} ({shape.dims[dim]})", "dimensions=")

    def slice(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        source, shape = operands[0].shape, instr.shape
        value = _attr(instr, "slice")
        if value is None or not _static(source):
            return
        bounds = _SLICE.findall(value)
        if len(bounds) != len(source.dims):
            raise self.error(instr, f"slice '{instr.name}' gives {len(bounds)} ranges for an operand of "
                                    f"{_count(len(source.dims), 'dimension')}", "slice=")
        sizes = []
        for dim, (start, limit, stride) in enumerate(bounds):
            first, last, step = int(start), int(limit), int(stride or 1)
            if not (0 <= first <= last <= source.dims[dim]) or step < 1:
                raise self.error(instr, f"slice '{instr.name}': [{start}:{limit}{':' + stride if stride else ''}] is "
                                        f"outside dimension {dim} of {source}", "slice=")
            sizes.append(-(-(last - first) // step))
        if _static(shape) and shape.dims != tuple(sizes):
            raise self.error(instr, f"slice '{instr.name}' of {source} by {value} is {sizes}, not {shape}")

    def concatenate(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        shape = instr.shape
        dims = self.ints(instr, "dimensions")
        if not operands:
            raise self.error(instr, f"concatenate '{instr.name}' needs at least one operand")
        if dims is None or not _static(shape):
            return
        rank = len(shape.dims)
        if len(dims) != 1 or not 0 <= dims[0] < rank:
            raise self.error(instr, f"concatenate '{instr.name}': dimensions must name one of the {_count(rank, 'dimension')}",
                             "dimensions=")
        axis, total = dims[0], 0
        for operand in operands:
            theirs = operand.shape
            if not _static(theirs):
                return
            if len(theirs.dims) != rank or any(a != b for i, (a, b) in enumerate(zip(theirs.dims, shape.dims)) if i != axis):
                raise self.error(instr, f"concatenate '{instr.name}': operand '{operand.name}' {theirs} does not fit "
                                        f"{shape} along dimension {axis}")
            total += theirs.dims[axis]
        if total != shape.dims[axis]:
            raise self.error(instr, f"concatenate '{instr.name}': the operands add up to {total} along dimension "
                                    f"{axis}, the result has {shape.dims[axis]}")

    def get_tuple_element(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        source = operands[0].shape
        index = _attr(instr, "index")
        if source.tuple_shapes is None:
            raise self.error(instr, f"get-tuple-element '{instr.name}' of '{operands[0].name}', which is not a tuple "
                                    f"({source})")
        if index is None or not index.isdigit():
            raise self.error(instr, f"get-tuple-element '{instr.name}' needs index=<n>")
        if int(index) >= len(source.tuple_shapes):
            raise self.error(instr, f"get-tuple-element '{instr.name}': index {index} is out of range for a tuple of "
                                    f"{_count(len(source.tuple_shapes), 'element')}", "index=")
        element = source.tuple_shapes[int(index)]
        if not _compatible(element, instr.shape):
            raise self.error(instr, f"get-tuple-element '{instr.name}' is {instr.shape}, element {index} of "
                                    f"'{operands[0].name}' is {element}")

    def called(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        """Called computations take as many parameters as the instruction passes them arguments."""
        opcode, count = instr.opcode, len(operands)
        if instr.computation.name in self.wrappers:
            return
        if opcode in ("call", "fusion", "async-start"):
            self.calls(instr, "to_apply" if opcode == "call" else "calls", count)
        elif opcode in ("map", "reduce", "reduce-window"):  # reduce: its inputs, then their initial values
            self.calls(instr, "to_apply", count)
        elif opcode == "sort":
            self.calls(instr, "comparator", 2 * count)
            self.calls(instr, "to_apply", 2 * count)
        elif opcode == "conditional":
            self.conditional(instr, operands)

    def conditional(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        if not operands:
            raise self.error(instr, f"conditional '{instr.name}' needs a branch index or predicate operand")
        selector = operands[0].shape
        two_way = _attr(instr, "true_computation") is not None
        allowed = ("pred",) if two_way else ("pred", "s32")
        if selector.tuple_shapes is not None or selector.dims or selector.element_type not in allowed:
            raise self.error(instr, f"conditional '{instr.name}': the first operand must be a scalar "
                                    f"{' or '.join(allowed)}, not {selector}")
        self.calls(instr, "true_computation", 1)
        self.calls(instr, "false_computation", 1)
        self.calls(instr, "branch_computations", 1)

    def async_chain(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        """async-update and async-done take one async-start or async-update; an update keeps its operand's shape."""
        if len(operands) != 1 or operands[0].opcode not in ("async-start", "async-update"):
            raise self.error(instr, f"'{instr.name}' ({instr.opcode}) takes a single async-start or async-update")
        if instr.opcode == "async-update" and not _compatible(instr.shape, operands[0].shape):
            raise self.error(instr, f"async-update '{instr.name}' is {instr.shape}, its operand "
                                    f"'{operands[0].name}' is {operands[0].shape}: an update keeps the shape")

    def async_start(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        parts = instr.shape.tuple_shapes
        if parts is None or len(parts) < 2 or parts[0].tuple_shapes is None:
            raise self.error(instr, f"async-start '{instr.name}' must have the shape ((operand shapes), output "
                                    f"shape, ...), not {instr.shape}")
        self.called(instr, operands)

    def minimum_one(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        if not operands:
            raise self.error(instr, f"'{instr.name}' ({instr.opcode}) needs at least one operand")

    def custom_call(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        """The API version is one XLA knows; operand layout constraints give one shape per operand, each the
        operand's."""
        version = _attr(instr, "api_version")
        if version is not None and version not in _API_VERSIONS:
            raise self.error(instr, f"custom call '{instr.name}': unknown api_version {version} (one of "
                                    f"{', '.join(sorted(_API_VERSIONS))})", "api_version=")
        constraints = _attr(instr, "operand_layout_constraints")
        if constraints is None:
            return
        inner = constraints.strip()[1:-1]
        pieces = _split_top_level(inner) if inner.strip() else []
        if len(pieces) != len(operands):
            raise self.error(instr, f"custom call '{instr.name}': {_count(len(pieces), 'operand layout constraint')} "
                                    f"for {_count(len(operands), 'operand')}", "operand_layout_constraints=")
        for number, (piece, operand) in enumerate(zip(pieces, operands)):
            try:
                shape = parse_shape(piece.strip())
            except ValueError as error:
                raise self.error(instr, f"custom call '{instr.name}': bad operand layout constraint {number}: {error}",
                                 "operand_layout_constraints=") from None
            if not _compatible(shape, operand.shape):
                raise self.error(instr, f"custom call '{instr.name}': operand layout constraint {shape} for operand "
                                        f"{number} is not its shape {operand.shape}", "operand_layout_constraints=")

    def result_accuracy(self, instr: HloInstruction) -> None:
        """`result_accuracy={mode=highest}` or `={tolerance={rtol=..., atol=..., ulps=...}}`, on unary ops only."""
        value = _attr(instr, "result_accuracy")
        if value is None:
            return
        if instr.opcode not in UNARY_ELEMENTWISE:
            raise self.error(instr, f"'{instr.name}' ({instr.opcode}) takes no result_accuracy", "result_accuracy=")
        if _ACCURACY.fullmatch(value) is None:
            raise self.error(instr, f"bad result_accuracy of '{instr.name}': {value} (expected {{mode=default|highest}} "
                                    "or {tolerance={rtol=..., atol=..., ulps=...}})", "result_accuracy=")

    def module_attributes(self) -> None:
        module = self.module
        for key, pattern in _MODULE_VALUES.items():
            value = module.attrs.get(key)
            if value is not None and pattern.fullmatch(value) is None:
                raise ParseError(module.path, f"bad {key} of module '{module.name}': {value}", module.lineno,
                                 module.header.find(key) + 1)

    def infeed(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        """infeed and recv: (data, ..., token[]); XLA's parser CHECK-fails on an array."""
        if not instr.shape.tuple_shapes:
            raise self.error(instr, f"{instr.opcode} '{instr.name}' must have a non-empty tuple shape, not {instr.shape}")


_CHECKS = {
    "reshape": _Verifier.reshape,
    "transpose": _Verifier.transpose,
    "broadcast": _Verifier.broadcast,
    "slice": _Verifier.slice,
    "concatenate": _Verifier.concatenate,
    "get-tuple-element": _Verifier.get_tuple_element,
    "call": _Verifier.called,
    "fusion": _Verifier.called,
    "map": _Verifier.called,
    "reduce": _Verifier.called,
    "reduce-window": _Verifier.called,
    "sort": _Verifier.called,
    "conditional": _Verifier.called,
    "async-start": _Verifier.async_start,
    "async-update": _Verifier.async_chain,
    "async-done": _Verifier.async_chain,
    "dynamic-reshape": _Verifier.minimum_one,
    "infeed": _Verifier.infeed,
    "custom-call": _Verifier.custom_call,
    "recv": _Verifier.infeed,
}


def _constant(verifier: _Verifier, instr: HloInstruction) -> None:
    """Each number of a constant's literal within its type's range (integers, and floats that are finite in it)."""
    element_type = instr.shape.element_type
    ints = _INT_RANGES.get(element_type or "")
    largest = _FLOAT_MAX.get(element_type or "")
    if ints is None and largest is None:
        return
    start, end = instr.pos, instr._operand_end()
    for number in _NUMBER.finditer(instr.text, start, end):
        text = number.group()
        if ints is not None:
            if "." in text or "e" in text or "E" in text:
                continue  # not an integer: XLA's parser says so; hloscope leaves it
            value: float = int(text)
            if ints[0] <= value <= ints[1]:
                continue
            why = f"{element_type} holds {ints[0]} to {ints[1]}"
        else:  # a float type: `ints` and `largest` are not both None (returned above)
            value = float(text)
            if abs(value) < cast(float, largest):
                continue
            why = f"it overflows to infinity in {element_type}"
        raise instr._error(f"constant '{instr.name}': {text} is out of range ({why})", number.start())


def _declared_operands(verifier: _Verifier, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
    """Older text writes each operand's shape before its name (`add(f32[2] %p, ...)`): XLA's parser refuses one that
    is not compatible with the operand's own shape."""
    pieces = _split_top_level(instr.operand_text)
    if len(pieces) != len(operands):
        return
    for piece, operand in zip(pieces, operands):
        words = piece.strip().rsplit(None, 1)
        if len(words) != 2:
            continue
        try:
            declared = parse_shape(words[0])
        except ValueError:
            continue
        if not _compatible(declared, operand.shape):
            raise instr._error(f"'{instr.name}' declares operand '{operand.name}' as {declared}, but it is "
                               f"{operand.shape}", instr.text.find(words[0], instr.pos))


def verify_module(module: HloModule) -> None:
    """Raise ParseError at the first thing in `module` that XLA refuses (see the module docstring); the operands of
    every instruction must be resolved (HloModule.validate does it, then calls this).

    Linear and cheap: an elementwise instruction whose operands share its shape text (most of them) costs a string
    comparison, and each pair of shape texts, each signature, is checked once."""
    verifier = _Verifier(module)
    verifier.module_attributes()
    for comp in module.computations:
        verifier.computation(comp)
    rules = _RULES
    pairs: set[tuple[str, str]] = set()  # (result, operand) shape texts an elementwise op was found right with
    for comp in module.computations:
        for instr in comp.instructions:
            opcode = instr.opcode
            if opcode == "parameter":
                continue
            if opcode == "constant":
                _constant(verifier, instr)
                continue
            operands = instr._operands
            if operands is None:
                operands = instr.operands
            if operands:
                lineno = instr.lineno
                for operand in operands:
                    if operand.lineno > lineno:  # XLA's parser reads a computation in order: no operand ahead of use
                        verifier.defined_later(instr, operand)
                end = instr._end
                if instr.text.find("[", instr.pos, end if end >= 0 else instr._operand_end()) >= 0:
                    _declared_operands(verifier, instr, operands)
            if "result_accuracy" in instr.text:
                verifier.result_accuracy(instr)
            rule = rules.get(opcode)
            if rule is None:
                continue
            arity, check = rule
            if arity is not None and len(operands) != arity:
                verifier.arity(instr, operands)
            if check is not None:
                check(verifier, instr, operands)
            else:  # elementwise
                shape_text = instr.shape_text
                for operand in operands:
                    theirs = operand.shape_text
                    if theirs != shape_text and (shape_text, theirs) not in pairs:
                        verifier.same_dims(instr, operand)
                        pairs.add((shape_text, theirs))


def _count_only(verifier: _Verifier, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
    """Opcodes whose operand count is their only check."""


# Per opcode: (its fixed operand count or None, its check, or None for the elementwise dimensions check); opcodes
# with neither are not here.
_RULES: dict[str, tuple[int | None, Callable[[_Verifier, HloInstruction, tuple[HloInstruction, ...]], None] | None]] = {
    **{opcode: (arity, _count_only) for opcode, arity in _ARITY.items()},
    **{opcode: (_ARITY.get(opcode), None) for opcode in _SAME_DIMS},
    **{opcode: (_ARITY.get(opcode), check) for opcode, check in _CHECKS.items()},
}
