"""HLO shapes as XLA's parser (hlo_parser.cc ParseShape) reads them: arrays `f32[8,64]{1,0}` with dynamic dimensions
(`f32[<=8,?]`) and a layout after the minor-to-major order (`{1,0:D(D,C)T(8,128)(2,1)L(2)#(u32)*(u32)E(4)S(1)SC(..)M(8)}`:
dimension level types, tiles, tail padding, index and pointer types, element size in bits, memory space, split
configs, dynamic metadata prefix), tuples `(f32[], s32[2])`, buffers `b(f32[2,4])` (an array behind a buffer handle),
`token[]`. Of the layout only the element size changes a byte count: `E(4)` packs elements into 4 bits."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from math import prod

from hloscope.files import INT64_MAX, int64

# Bytes per element as XLA's ShapeUtil::ByteSizeOfPrimitiveType counts them (sub-byte types take a byte unless packed).
ELEMENT_BYTES = {
    "pred": 1, "s1": 1, "u1": 1, "s2": 1, "u2": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1,
    "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "s32": 4, "u32": 4, "f32": 4,
    "s64": 8, "u64": 8, "f64": 8, "c64": 8,
    "c128": 16,
    "f8e5m2": 1, "f8e4m3": 1, "f8e4m3fn": 1, "f8e4m3b11fnuz": 1, "f8e5m2fnuz": 1, "f8e4m3fnuz": 1, "f8e3m4": 1,
    "f8e8m0fnu": 1, "f4e2m1fn": 1,
    "token": 0, "opaque": 0,
}

_ARRAY = re.compile(r"\s*([a-z][a-z0-9]*)\[([^\]]*)\](?:\{([^}]*)\})?\s*")
_BUFFER = re.compile(r"\s*b\s*\(")
# The element size in bits of a layout, `E(n)`: after the ':' and the dimension level types, tiles, tail padding and
# index/pointer types (none of which holds an 'E(').
_ELEMENT_BITS = re.compile(r":.*?E\((\d+)\)")
_COMMENT = re.compile(r"/\*.*?\*/")
_DIM = re.compile(r"(<=)?(\d+)|\?")


@dataclass(frozen=True)
class Shape:
    element_type: str | None = None  # None for tuples
    dims: tuple[int, ...] = ()
    layout: str | None = None  # the text inside `{...}`, e.g. "1,0:T(8,128)(2,1)"
    tuple_shapes: tuple[Shape, ...] | None = None
    # Per dimension, as written: "" (static), "<=" (dynamic, bounded by the size in `dims`) or "?" (unbounded: 0 in
    # `dims`); empty when every dimension is static.
    dynamic: tuple[str, ...] = ()
    element_bits: int = 0  # the layout's element size in bits (`E(4)`), 0 when it has none: then the type's bytes
    buffer: bool = False  # `b(array)`: XLA's BUFFER shape, sized and costed as its array

    @property
    def is_tuple(self) -> bool:
        return self.tuple_shapes is not None

    @property
    def elements(self) -> int:
        return prod(self.dims) if not self.is_tuple else 0

    @property
    def byte_size(self) -> int:
        """Bytes of the data (tuples: the sum over their leaves; no tuple index tables)."""
        if self.tuple_shapes is not None:
            return sum(s.byte_size for s in self.tuple_shapes)
        element_type = self.element_type
        if element_type is None:  # an array has an element type (only tuples have none)
            raise RuntimeError(f"array shape {self} without an element type")
        if self.element_bits:  # XLA's ShapeUtil::ByteSizeOfElements: packed, rounded up to whole bytes
            return -(-prod(self.dims) * self.element_bits // 8)
        return prod(self.dims) * ELEMENT_BYTES.get(element_type, 4)

    @property
    def is_dynamic(self) -> bool:
        """Has a dynamic dimension (`<=n` or `?`), in itself or in a tuple element."""
        if self.tuple_shapes is not None:
            return any(s.is_dynamic for s in self.tuple_shapes)
        return bool(self.dynamic)

    def leaves(self) -> Iterator[Shape]:
        if self.tuple_shapes is not None:
            for s in self.tuple_shapes:
                yield from s.leaves()
        else:
            yield self

    @property
    def tiles(self) -> str | None:
        """The tiling part of the layout (`T(8,128)(2,1)`) if any: TPU layouts have them."""
        if self.tuple_shapes is not None:
            return next((s.tiles for s in self.tuple_shapes if s.tiles), None)
        if self.layout and ":" in self.layout:
            return self.layout.split(":", 1)[1] or None
        return None

    def __str__(self) -> str:
        if self.tuple_shapes is not None:
            return "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
        if self.dynamic:
            dims = ",".join("?" if mark == "?" else f"{mark}{dim}" for mark, dim in zip(self.dynamic, self.dims))
        else:
            dims = ",".join(map(str, self.dims))
        text = f"{self.element_type}[{dims}]" + (f"{{{self.layout}}}" if self.layout is not None else "")
        return f"b({text})" if self.buffer else text


def first_element(shape: Shape) -> Shape:
    """A tuple's first element (the result of a library call, of a multi-output op), or the array itself (an empty
    tuple, `()`, as a custom call wrapped by `custom-call-start` may return: itself, with no elements)."""
    parts = shape.tuple_shapes
    return parts[0] if parts else shape


def _parse(text: str, pos: int) -> tuple[Shape, int]:
    buffer = _BUFFER.match(text, pos)
    if buffer is not None:
        return _parse_buffer(text, buffer.end())
    if text.startswith("(", pos):
        return _parse_tuple(text, pos + 1)
    match = _ARRAY.match(text, pos)
    if match is None:
        raise ValueError(f"expected a shape like f32[2,3]{{1,0}} at '{text[pos:pos + 20]}'")
    element_type, dims_text, layout = match.groups()
    if element_type not in ELEMENT_BYTES:
        raise ValueError(f"unknown element type '{element_type}'")
    dims, dynamic = _parse_dims(dims_text)
    marks = tuple(dynamic) if any(dynamic) else ()
    shape = Shape(element_type, tuple(dims), layout, None, marks, _element_bits(layout))
    _check_size(shape)
    return shape, match.end()


def _parse_buffer(text: str, pos: int) -> tuple[Shape, int]:
    """`b(array)` after its `b(`: XLA's ShapeUtil::MakeValidatedBufferShape, of an array only."""
    array, pos = _parse(text, pos)
    if array.tuple_shapes is not None or array.element_type == "token":
        raise ValueError("a buffer shape b(...) holds an array, not a tuple or token")
    if not text.startswith(")", pos):
        raise ValueError("expected ')' closing the buffer shape b(...)")
    end = pos + 1
    while end < len(text) and text[end] in " \t":
        end += 1
    return replace(array, buffer=True), end


def _parse_tuple(text: str, pos: int) -> tuple[Shape, int]:
    """A tuple's elements after its '(', up to and past its ')'."""
    elements: list[Shape] = []
    while True:
        while pos < len(text) and text[pos] in " ,":
            pos += 1
        if pos >= len(text):
            raise ValueError("unclosed '(' in tuple shape")
        if text[pos] == ")":
            return Shape(tuple_shapes=tuple(elements)), pos + 1
        element, pos = _parse(text, pos)
        elements.append(element)


def _parse_dims(dims_text: str) -> tuple[list[int], list[str]]:
    """Sizes (0 for an unbounded `?`) and dynamic marks ('<=' bounds, '?', or '') of `2,<=4,?`."""
    dims: list[int] = []
    dynamic: list[str] = []
    if not dims_text.strip():
        return dims, dynamic
    for dim in dims_text.split(","):
        dim_match = _DIM.fullmatch(dim.strip())
        if dim_match is None:
            raise ValueError(f"bad dimension '{dim}'")
        bound, size = dim_match.groups()
        if size is not None and int64(size) is None:
            raise ValueError(f"a dimension of {len(size):,} digits: beyond 64 bits")
        dims.append(int(size) if size is not None else 0)
        dynamic.append("?" if size is None else bound or "")
    return dims, dynamic


def _element_bits(layout: str | None) -> int:
    """The element size in bits a layout's `E(n)` sets, else 0."""
    if layout is None or "E(" not in layout:
        return 0
    bits_match = _ELEMENT_BITS.search(layout)
    if bits_match and len(bits_match.group(1)) > 4:
        raise ValueError(f"an element size of {len(bits_match.group(1)):,} digits in bits")
    return int(bits_match.group(1)) if bits_match else 0


def _check_size(shape: Shape) -> None:
    """XLA's rule (ShapeUtil::ValidateShapeSize): an array's element count, and its size in bytes, fit a signed 64-bit
    integer; `f32[4611686018427387904,4]` overflows both and is not a shape XLA accepts. Refused here, so that no
    figure is ever computed from it."""
    elements = 1
    for dim in shape.dims:
        elements *= dim
        if elements > INT64_MAX:
            raise ValueError(f"{len(shape.dims)} dimensions whose product overflows 64 bits: no array XLA can hold")
    if shape.byte_size > INT64_MAX:
        raise ValueError(f"{elements:,} elements of {shape.element_type}: {shape.byte_size:,} bytes, beyond "
                         "2^63 - 1 bytes, more than XLA can address")


@lru_cache(maxsize=65536)
def parse_shape(text: str) -> Shape:
    """Parse a shape; raises ValueError when it is malformed."""
    clean = _COMMENT.sub("", text) if "/*" in text else text
    try:
        shape, end = _parse(clean, 0)
    except RecursionError:  # a tuple nested thousands deep: malformed, not a crash
        raise ValueError("tuple shape nested too deeply") from None
    if clean[end:].strip():
        raise ValueError(f"unexpected text after the shape: '{clean[end:end + 20]}'")
    return shape
