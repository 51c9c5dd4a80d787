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
from collections.abc import Callable, Container, Iterable, Sequence
from itertools import chain
from typing import TYPE_CHECKING, TypeAlias, cast

from hloscope.errors import ParseError
from hloscope.hlo.attrs import _split_top_level, name_list
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
# A dense literal's tokens: braces, comments (`/*i0=1*/`), and elements (a complex `(re, im)`, a NaN with its
# payload `nan(0x1)`).
_LITERAL_TOKEN = re.compile(r"[{}]|/\*.*?\*/|\((?:[^()]|\([^()]*\))*\)|[^\s{},()]+(?:\([^()]*\))?")
_NAN_PAYLOAD = re.compile(r"nan\(\s*0x([0-9a-fA-F]+)\s*\)")
# Explicit mantissa bits of the float types whose NaNs carry a payload (any payload that fits them); the `fn` types
# have one NaN (all mantissa bits set) and the `fnuz` types one without mantissa bits, so no other payload.
_NAN_BITS = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52, "c64": 23, "c128": 52, "f8e5m2": 2, "f8e4m3": 3,
             "f8e3m4": 4}
_NAN_ONLY = {"f8e4m3fn": 0b111, "f8e4m3fnuz": 0, "f8e5m2fnuz": 0, "f8e4m3b11fnuz": 0}
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
# A convolution's `dim_labels`: lhs, rhs and output labels, `b01f_01io->b01f`.
_DIM_LABELS = re.compile(r"([0-9bf?]+)_([0-9io?]+)->([0-9bf?]+)")
# `window={size=3x3 stride=2x2 pad=0_1x0_1 ...}`: its fields (space- or comma-separated), and each entry's form.
_WINDOW_FIELDS = {"size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"}
_WINDOW_ENTRY = re.compile(r"-?\d+")
_PAD_ENTRY = re.compile(r"-?\d+_-?\d+")
# `replica_groups=mesh['x'=2,'y'=2, device_ids=(...)] {'x'}`: the mesh's axes, its device ids, the axes grouped.
_MESH = re.compile(r"mesh\[([^\]]*)\]\s*\{([^{}]*)\}")
_MESH_AXIS = re.compile(r"'([^']*)'\s*=\s*(\d+)")
_MESH_IDS = re.compile(r"device_ids\s*=\s*\(([\d\s,]*)\)")
_MESH_USE = re.compile(r"'([^']*)'")
_REPLICA_GROUPED = frozenset({"all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter",
                              "all-to-all", "ragged-all-to-all", "collective-broadcast"})
# A layout's dim level types, `D(D,C+)`: each Dense, Compressed, Singleton or loose compressed (H), `+` non-unique,
# `~` unordered; a physical shape `P(...)` is for a sparse layout only.
_DIM_LEVEL = re.compile(r"(?<![A-Za-z])D\(([^()]*)\)")
_DIM_LEVEL_TYPE = re.compile(r"\s*[DCSH][+~]*\s*")
_SLICE = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]")


def _attr(instr: HloInstruction, key: str) -> str | None:
    """One attribute's text, without splitting the attribute list where it is plain (`, key={1,0}` or `, key=v`
    before any quoted string), nor keeping the split list on the instruction (most are never asked for again)."""
    attrs = instr._attrs
    if attrs is None:
        text = instr.text
        if key not in text:
            return None
        start = instr._end
        if start < 0:
            start = instr._operand_end()
        at = text.find(key + "=", start)
        if at > start and text[at - 1] in ", \t" and '"' not in text[start:at]:
            value = _PLAIN_VALUE.match(text, at + len(key) + 1)
            if value is not None:
                return value.group()
        attrs = instr._scan_attributes()
    return attrs.get(key)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _entries(n: int) -> str:
    return f"{n} entr" + ("y" if n == 1 else "ies")


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


_Check: TypeAlias = "Callable[[_Verifier, HloInstruction, tuple[HloInstruction, ...]], None]"
# An opcode's operand count (None: any), its check (None: none), and whether it is elementwise (operands of the
# result's dimensions).
_Rule: TypeAlias = "tuple[int | None, _Check | None, bool]"


_SHORT_TAIL = 64  # attribute lists up to this long key a check (metadata makes a line's own, and long)


def _once(attribute: str | None = None, any_tail: bool = False) -> Callable[[_Check], _Check]:
    """Run a check once per distinct result shape text, operand shape texts and value of `attribute`: it reads
    nothing else (its messages aside), so an instruction that repeats them passes as the first one did.

    The value is read with _attr, a function of the text after the operands (the tail): a short tail stands for it
    (cheaper than finding the attribute in it), a long one is read. With `any_tail`, the tail stands for all the
    check reads of the attributes, however long (for checks of few, costly instructions: custom calls)."""
    def wrap(check: _Check) -> _Check:
        def once(self: _Verifier, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
            tail = value = None
            if any_tail or attribute is not None:
                end = instr._end
                tail = instr.text[end if end >= 0 else instr._operand_end() :]
                if len(tail) > _SHORT_TAIL and not any_tail and attribute is not None:
                    tail, value = None, _attr(instr, attribute)
            texts = operands[0].shape_text if len(operands) == 1 else tuple([o.shape_text for o in operands])
            key = (check, instr.shape_text, tail, value, texts)
            passed = self.passed
            if key not in passed:
                check(self, instr, operands)
                passed.add(key)
        return once
    return wrap


class _Verifier:
    def __init__(self, module: HloModule):
        self.module = module
        self.parameter_counts: dict[str, int] = {}
        self.signatures: set[tuple[str, str]] = set()  # (declared result, root shape) texts found compatible
        # Computations the parser built for async syntax sugar (`call-start()`): XLA's parser leaves the wrapped
        # instruction's operands to the async ops, so their count is not checked there.
        self.wrappers = {wrapper for _, wrapper in module.async_chains.values()}
        self.async_callees: dict[str, HloInstruction] = {}  # computation -> the async-start that calls it
        # What a check found right, keyed by the check and all it reads (shape texts, attribute values):
        # instructions that repeat it are not checked again.
        self.passed: set[tuple[object, ...]] = set()
        # Each computation's place in the text and, built where two instructions share a line (nested operands, an
        # instruction alone in the text), each instruction's place in its computation.
        self.computation_index = {comp: index for index, comp in enumerate(module.computations)}
        self.positions: dict[HloComputation, dict[HloInstruction, int]] = {}

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
        for instr in [i for i in comp.instructions if i._calls]:  # (validation resolved them)
            self.callees(instr, instr._calls or ())
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
        by_name, counts = self.module.computations_by_name, self.parameter_counts
        for name in value.strip("{}").split(","):
            callee = by_name.get(name.strip().lstrip("%"))
            if callee is None:
                continue  # validation reports an undefined computation
            count = counts.get(callee.name)
            if count is None:
                count = self.parameters_of(callee)
            if count != expected:
                raise self.error(instr, f"'{instr.name}' ({instr.opcode}) passes {_count(expected, 'argument')} to "
                                        f"'{callee.name}', but '{callee.name}' takes {_count(count, 'parameter')}",
                                 key + "=")

    # -- instructions -----------------------------------------------------------------------------------------------
    def defined_later(self, instr: HloInstruction, operand: HloInstruction) -> None:
        """An operand on the instruction's line or after it (the loop's cheap test): refused unless it is defined
        before the instruction on the same line. XLA's parser reads a computation in order and looks each operand up
        among the instructions already read, so an operand defined later, or the instruction itself, "does not
        exist": refusing both keeps the def-use graph acyclic."""
        if operand is not instr and operand.lineno == instr.lineno and not self.after(operand, instr):
            return
        raise used_before_definition(instr, operand)

    def after(self, other: HloInstruction, instr: HloInstruction) -> bool:
        """Whether `other` comes after `instr` in their computation (`instr` itself included)."""
        comp = instr.computation
        positions = self.positions.get(comp)
        if positions is None:
            positions = self.positions[comp] = {item: index for index, item in enumerate(comp.instructions)}
        return positions.get(other, -1) >= positions.get(instr, -1)

    def callees(self, instr: HloInstruction, calls: Sequence[HloComputation]) -> None:
        """XLA's parser reads computations in order and looks a called one up among those already read: a computation
        calls only computations defined before it, so the call graph has no cycle (a computation that calls itself,
        directly or through others, is refused even where nothing runs it)."""
        index = self.computation_index
        here = index.get(instr.computation, -1)
        for callee in calls:
            if index.get(callee, -1) < here:
                continue
            from hloscope.hlo.model import CALLED_COMPUTATION_ATTRS  # (model imports this module: not at the top)

            attrs = instr.attrs
            key = next((key for key in CALLED_COMPUTATION_ATTRS if callee.name in name_list(attrs.get(key) or "")), None)
            attribute = None if key is None else key + "="
            if callee is instr.computation:
                raise self.error(instr, f"computation '{callee.name}' calls itself ('{instr.name}' calls it)",
                                 attribute)
            raise self.error(instr, f"'{instr.name}' calls computation '{callee.name}', which is defined after "
                                    f"'{instr.computation.name}' (line {callee.lineno}): a computation may call only "
                                    "computations defined before it", attribute)

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

    @_once()
    def reshape(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        shape, source = instr.shape, operands[0].shape
        if _static(shape) and _static(source) and shape.elements != source.elements:
            raise self.error(instr, f"reshape '{instr.name}' changes the element count: {source} has "
                                    f"{source.elements} elements, {shape} has {shape.elements}")

    @_once("dimensions")
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

    @_once("dimensions")
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

    @_once("slice")
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

    @_once("dimensions")
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

    @_once("index")
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
        if opcode in ("reduce", "map", "reduce-window"):  # reduce: its inputs, then their initial values
            self.calls(instr, "to_apply", count)
        elif opcode in ("call", "fusion", "async-start"):
            self.calls(instr, "to_apply" if opcode == "call" else "calls", count)
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
        if selector.element_type == "pred" and not two_way:
            raise self.error(instr, f"conditional '{instr.name}': a pred selector takes true_computation and "
                                    "false_computation, not branch_computations", "branch_computations=")
        self.calls(instr, "true_computation", 1)
        self.calls(instr, "false_computation", 1)
        self.calls(instr, "branch_computations", 1)

    def async_chain(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        """async-update and async-done take one async-start or async-update; an update keeps its operand's shape;
        each op of the chain calls the start's computation and runs on its thread."""
        if len(operands) != 1 or operands[0].opcode not in ("async-start", "async-update"):
            raise self.error(instr, f"'{instr.name}' ({instr.opcode}) takes a single async-start or async-update")
        if instr.opcode == "async-update" and not _compatible(instr.shape, operands[0].shape):
            raise self.error(instr, f"async-update '{instr.name}' is {instr.shape}, its operand "
                                    f"'{operands[0].name}' is {operands[0].shape}: an update keeps the shape")
        start = operands[0]
        for _ in range(len(instr.computation.instructions)):  # operands come first: no cycle
            if start.opcode == "async-start":
                break
            theirs = start._operands if start._operands is not None else start.operands
            if len(theirs) != 1:
                return  # its own check refuses it
            start = theirs[0]
        calls = _attr(instr, "calls")
        if calls is not None and calls.lstrip("%") != (_attr(start, "calls") or "").lstrip("%"):
            raise self.error(instr, f"{instr.opcode} '{instr.name}' calls {calls.lstrip('%')}, its async-start "
                                    f"'{start.name}' calls {(_attr(start, 'calls') or 'nothing').lstrip('%')}", "calls=")
        thread = _attr(instr, "async_execution_thread") if "async_execution_thread" in instr.text else None
        if thread is not None:
            theirs_thread = (_attr(start, "async_execution_thread") if "async_execution_thread" in start.text
                             else None) or '"main"'
            if thread != theirs_thread:
                raise self.error(instr, f"{instr.opcode} '{instr.name}' runs on thread {thread}, its async-start "
                                        f"'{start.name}' on {theirs_thread}", "async_execution_thread=")

    def async_start(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        parts = instr.shape.tuple_shapes
        if parts is None or len(parts) < 2 or parts[0].tuple_shapes is None:
            raise self.error(instr, f"async-start '{instr.name}' must have the shape ((operand shapes), output "
                                    f"shape, ...), not {instr.shape}")
        calls = _attr(instr, "calls")
        if calls is not None:
            callee = calls.lstrip("%")
            first = self.async_callees.setdefault(callee, instr)
            if first is not instr:
                raise self.error(instr, f"async-start '{instr.name}' calls '{callee}', which async-start "
                                        f"'{first.name}' (line {first.lineno}) already calls: one async op per "
                                        "computation", "calls=")
        self.called(instr, operands)

    def minimum_one(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        if not operands:
            raise self.error(instr, f"'{instr.name}' ({instr.opcode}) needs at least one operand")

    @_once(any_tail=True)
    def custom_call(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        """The API version is one XLA knows; operand layout constraints give one shape per operand, each the
        operand's."""
        if "window=" in instr.text:
            self.window(instr)
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

    def window(self, instr: HloInstruction) -> None:
        """Each field of `window={...}` has one entry per window dimension (as many as `size`); pads are `lo_hi`."""
        value = _attr(instr, "window")
        if value is None:
            return
        body = value.strip()
        if not (body.startswith("{") and body.endswith("}")):
            raise self.error(instr, f"bad window of '{instr.name}': {value}", "window=")
        entries: dict[str, list[str]] = {}
        for field in body[1:-1].replace(",", " ").split():
            key, _, text = field.partition("=")
            if key not in _WINDOW_FIELDS or not text:
                raise self.error(instr, f"bad window of '{instr.name}': '{field}' is not one of "
                                        f"{', '.join(sorted(_WINDOW_FIELDS))} with a value", "window=")
            pattern = _PAD_ENTRY if key == "pad" else _WINDOW_ENTRY
            pieces = text.split("x")
            for piece in pieces:
                if pattern.fullmatch(piece) is None:
                    raise self.error(instr, f"bad window of '{instr.name}': {key}={text} ("
                                            + ("each pad is low_high" if key == "pad" else "integers")
                                            + " separated by 'x')", "window=")
            entries[key] = pieces
        size = entries.get("size")
        for key, pieces in entries.items():
            if size is not None and len(pieces) != len(size):
                raise self.error(instr, f"bad window of '{instr.name}': {key} has {_entries(len(pieces))}, size has "
                                        f"{len(size)}", "window=")

    def convolution(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        self.window(instr)
        value = _attr(instr, "dim_labels")
        if value is None:
            return
        match = _DIM_LABELS.fullmatch(value.strip())
        if match is None:
            raise self.error(instr, f"bad dim_labels of '{instr.name}': {value} (expected lhs_rhs->output, as "
                                    "b01f_01io->b01f)", "dim_labels=")
        rank = len(match.group(1))
        for part, labels in zip(("lhs", "rhs", "output"), match.groups()):
            if len(labels) != rank:
                raise self.error(instr, f"bad dim_labels of '{instr.name}': {value}: the lhs, rhs and output labels "
                                        "must have the same rank", "dim_labels=")
            named = [c for c in labels if c != "?"]
            if len(set(named)) != len(named):
                raise self.error(instr, f"bad dim_labels of '{instr.name}': the {part} labels {labels} name a "
                                        "dimension twice", "dim_labels=")

    def reduce_window(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        self.called(instr, operands)
        self.window(instr)

    def select_and_scatter(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        self.window(instr)

    def one_dimension(self, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        """all-gather and reduce-scatter gather or scatter along the one dimension `dimensions` names."""
        dims = _attr(instr, "dimensions")
        if dims is not None and _INTS.search(dims) is None:
            raise self.error(instr, f"{instr.opcode} '{instr.name}' needs one dimension in dimensions={{...}}",
                             "dimensions=")

    def mesh(self, instr: HloInstruction) -> None:
        """`replica_groups=mesh[...] {...}`: device ids one per device of the mesh, and grouped axes that are the
        mesh's, by name or index (XLA's parser dies on one that is not)."""
        value = _attr(instr, "replica_groups")
        if value is None or not value.startswith("mesh"):
            return
        match = _MESH.match(instr.text, instr.text.find("mesh[", instr._operand_end()))
        if match is None:
            return
        axes = _MESH_AXIS.findall(match.group(1))
        names = {name for name, _ in axes}
        ids = _MESH_IDS.search(match.group(1))
        if ids is not None and axes:
            devices = 1
            for _, size in axes:
                devices *= int(size)
            count = len(_INTS.findall(ids.group(1)))
            if count != devices:
                raise self.error(instr, f"'{instr.name}' ({instr.opcode}): the mesh has {_count(devices, 'device')}"
                                        f", its device_ids name {count}", "device_ids=")
        for axis in _MESH_USE.findall(match.group(2)):
            if axis in names or (axis.isdigit() and int(axis) < len(axes)):
                continue
            raise self.error(instr, f"'{instr.name}' ({instr.opcode}): axis '{axis}' is not an axis of the mesh "
                                    f"(named {', '.join(repr(n) for n, _ in axes) or 'none'}, or indexed 0 to "
                                    f"{len(axes) - 1})", "'" + axis + "'")

    def layouts(self, instr: HloInstruction) -> None:
        """Dim level types in a layout are D, C, S or H (with + or ~); a physical shape only in a sparse layout."""
        text = instr.shape_text
        for match in _DIM_LEVEL.finditer(text):
            for item in match.group(1).split(","):
                if _DIM_LEVEL_TYPE.fullmatch(item) is None:
                    raise instr._error(f"bad layout of '{instr.name}': '{item.strip()}' in {match.group()} is not a "
                                       "dim level type (D, C, S or H)", instr.text.find(match.group()))
        colon = text.find(":")
        if colon >= 0 and text.find("P(", colon) >= 0:
            levels = "".join(m.group(1) for m in _DIM_LEVEL.finditer(text))
            if not any(c in levels for c in "CSH"):
                raise instr._error(f"bad layout of '{instr.name}': a physical shape P(...) is only for a sparse "
                                   "layout", instr.text.find("P(", instr.text.find(text)))

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
    "reduce-window": _Verifier.reduce_window,
    "select-and-scatter": _Verifier.select_and_scatter,
    "convolution": _Verifier.convolution,
    "all-gather": _Verifier.one_dimension,
    "all-gather-start": _Verifier.one_dimension,
    "reduce-scatter": _Verifier.one_dimension,
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


def _literal(verifier: _Verifier, instr: HloInstruction) -> None:
    """A dense literal nested as its shape: one level of braces per dimension, each holding as many entries as the
    dimension, elements only at the innermost level; and NaN payloads that the element type can hold."""
    shape = instr.shape
    start, end = instr.pos, instr._operand_end()
    text = instr.text
    if shape.tuple_shapes is not None or shape.dynamic or text.find("...", start, end) >= 0:
        return
    if text.find("nan(", start, end) >= 0:
        _nan_payloads(instr, shape.element_type or "", start, end)
    dims = shape.dims
    rank = len(dims)
    if rank == 0 or (text.find("{", start, end) < 0 and text.find("}", start, end) < 0):
        return  # a scalar, or an array written without braces: not read here
    depth, seen = 0, [0] * (rank + 1)
    for token in _LITERAL_TOKEN.finditer(text, start, end):
        kind = token.group()
        if kind[0] == "/":
            continue
        if kind == "{":
            if depth == rank:
                raise instr._error(f"constant '{instr.name}': the literal is nested deeper than the "
                                   f"{_count(rank, 'dimension')} of {shape}", token.start())
            if depth:
                seen[depth - 1] += 1
            seen[depth] = 0
            depth += 1
        elif kind == "}":
            if depth == 0:
                raise instr._error(f"constant '{instr.name}': unbalanced '}}' in the literal", token.start())
            if seen[depth - 1] != dims[depth - 1]:
                raise instr._error(f"constant '{instr.name}': {_entries(seen[depth - 1])} in dimension {depth - 1} of "
                                   f"{shape}, which has {dims[depth - 1]}", token.start())
            depth -= 1
        elif depth == 0:
            raise instr._error(f"constant '{instr.name}': {kind} outside the literal's braces", token.start())
        elif depth != rank:
            raise instr._error(f"constant '{instr.name}': element {kind} at nesting level {depth}, {shape} has its "
                               f"elements at level {rank}", token.start())
        else:
            seen[depth - 1] += 1
    if depth:
        raise instr._error(f"constant '{instr.name}': the literal leaves {_count(depth, 'brace')} open", end)


def _nan_payloads(instr: HloInstruction, element_type: str, start: int, end: int) -> None:
    bits = _NAN_BITS.get(element_type)
    only = _NAN_ONLY.get(element_type)
    if bits is None and only is None:
        return
    for match in _NAN_PAYLOAD.finditer(instr.text, start, end):
        payload = int(match.group(1), 16)
        if (payload < 1 << bits) if bits is not None else payload in (0, only):
            continue
        raise instr._error(f"constant '{instr.name}': NaN payload 0x{match.group(1)} does not fit {element_type}"
                           + (f" ({bits} mantissa bits)" if bits is not None else " (it has a single NaN)"),
                           match.start())


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


def used_before_definition(instr: HloInstruction, operand: HloInstruction) -> ParseError:
    """The error for an operand defined after the instruction that uses it, or that is the instruction itself, at the
    operand's name in the operand list."""
    at = re.search(r"(?<![\w.\-$])%?" + re.escape(operand.name) + r"(?![\w.\-$])", instr.text[instr.pos :])
    where = instr.pos + at.start() if at else None
    if operand is instr:
        return instr._error(f"'{instr.name}' is its own operand: an operand must be defined before its use", where)
    return instr._error(f"operand '{operand.name}' of '{instr.name}' is used before its definition (line "
                        f"{operand.lineno})", where)


def verify_module(module: HloModule, exact: Container[HloInstruction] | None = None) -> None:
    """Raise ParseError at the first thing in `module` that XLA refuses (see the module docstring); the operands of
    every instruction must be resolved (HloModule.validate does it, then calls this). `exact`: the instructions whose
    operand lists validation did not find plain (a list of names: no operand shape written in it), where those
    shapes are checked; None: every instruction's.

    Linear and cheap: an elementwise instruction whose operands share its shape text (most of them) costs a string
    comparison, each pair of shape texts, each signature, is checked once, and the checks of shapes and attributes
    once per distinct combination of what they read (_once)."""
    verifier = _Verifier(module)
    verifier.module_attributes()
    for comp in module.computations:
        verifier.computation(comp)
    pairs: set[tuple[str, str]] = set()  # (result, operand) shape texts an elementwise op was found right with
    layouts: set[str] = set()  # shape texts with layout items (`T(8,128)`, `D(D,C)`) found right
    written = _Every() if exact is None else exact
    every = chain.from_iterable([comp.instructions for comp in module.computations])  # one loop over all of them
    _instructions(verifier, every, pairs, layouts, written)


class _Every:
    """Holds every instruction."""

    def __contains__(self, item: object) -> bool:
        return True


def _instructions(verifier: _Verifier, instructions: Iterable[HloInstruction], pairs: set[tuple[str, str]],
                  layouts: set[str], written: Container[HloInstruction]) -> None:
    """The checks of each instruction, in order; the common ones inline (a call per instruction would cost as much
    as they do)."""
    rules = _RULES
    for instr in instructions:
        opcode = instr.opcode
        shape_text = instr.shape_text
        if "(" in shape_text and shape_text not in layouts:  # layouts with tiles, dim level types, ...
            verifier.layouts(instr)
            layouts.add(shape_text)
        operands = instr._operands if instr._operands is not None else instr.operands
        text = instr.text
        if operands:
            # No operand defined after its use or at it (XLA's parser reads a computation in order: no cycle in the
            # def-use graph), and operand shapes written in the operand list agree with the operands'.
            lineno = instr.lineno
            for operand in operands:
                if operand.lineno >= lineno:
                    verifier.defined_later(instr, operand)
            if instr in written and "[" in text[instr.pos : instr._operand_end()]:
                _declared_operands(verifier, instr, operands)
        elif opcode == "parameter" or opcode == "constant":  # (neither has operands)
            if opcode == "constant":
                _constant(verifier, instr)
                _literal(verifier, instr)
            continue
        if "result_accuracy" in text:
            verifier.result_accuracy(instr)
        arity, check, elementwise = rules.get(opcode, _NO_RULE)
        if arity is not None and len(operands) != arity:
            verifier.arity(instr, operands)
        if check is not None:
            check(verifier, instr, operands)
        elif elementwise:
            for operand in operands:  # each pair of shape texts checked once
                theirs = operand.shape_text
                if theirs != shape_text and (shape_text, theirs) not in pairs:
                    verifier.same_dims(instr, operand)
                    pairs.add((shape_text, theirs))


def _grouped(check: _Check | None) -> _Check:
    """Collectives with replica groups: a mesh (`replica_groups=mesh[...]`) first, then their own check (none of them
    has a fixed operand count to check before the mesh)."""
    def grouped(verifier: _Verifier, instr: HloInstruction, operands: tuple[HloInstruction, ...]) -> None:
        if "mesh[" in instr.text:
            verifier.mesh(instr)
        if check is not None:
            check(verifier, instr, operands)
    return grouped


# Per opcode: (its fixed operand count or None, its check or None, whether it is elementwise); opcodes with none of
# them are not here. Built once: an instruction looks its opcode up once.
_NO_RULE: _Rule = (None, None, False)
_RULES: dict[str, _Rule] = {
    **{opcode: (arity, None, False) for opcode, arity in _ARITY.items()},
    **{opcode: (_ARITY.get(opcode), None, True) for opcode in _SAME_DIMS},
    **{opcode: (_ARITY.get(opcode), check, False) for opcode, check in _CHECKS.items()},
    **{opcode: (_ARITY.get(opcode), _grouped(_CHECKS.get(opcode)), False) for opcode in _REPLICA_GROUPED},
}
