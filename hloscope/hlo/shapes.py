"""HLO shapes: `f32[8,64]{1,0}`, `bf16[128,8]{1,0:T(8,128)(2,1)}`, `(f32[], s32[2])`, `token[]`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from math import prod

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
_COMMENT = re.compile(r"/\*.*?\*/")
_DIM = re.compile(r"(?:<=)?(\d+)|\?")


@dataclass(frozen=True)
class Shape:
    element_type: str | None = None  # None for tuples
    dims: tuple[int, ...] = ()
    layout: str | None = None  # the text inside `{...}`, e.g. "1,0:T(8,128)(2,1)"
    tuple_shapes: tuple[Shape, ...] | None = None

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
        assert element_type is not None  # an array has an element type (only tuples have none)
        return prod(self.dims) * ELEMENT_BYTES.get(element_type, 4)

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
        text = f"{self.element_type}[{','.join(map(str, self.dims))}]"
        return text + (f"{{{self.layout}}}" if self.layout is not None else "")


def first_element(shape: Shape) -> Shape:
    """A tuple's first element (the result of a library call, of a multi-output op), or the array itself."""
    parts = shape.tuple_shapes
    return parts[0] if parts is not None else shape


def _parse(text: str, pos: int) -> tuple[Shape, int]:
    if text.startswith("(", pos):
        elements: list[Shape] = []
        pos += 1
        while True:
            while pos < len(text) and text[pos] in " ,":
                pos += 1
            if pos >= len(text):
                raise ValueError("unclosed '(' in tuple shape")
            if text[pos] == ")":
                return Shape(tuple_shapes=tuple(elements)), pos + 1
            element, pos = _parse(text, pos)
            elements.append(element)
    match = _ARRAY.match(text, pos)
    if match is None:
        raise ValueError(f"expected a shape like f32[2,3]{{1,0}} at '{text[pos:pos + 20]}'")
    element_type, dims_text, layout = match.groups()
    if element_type not in ELEMENT_BYTES:
        raise ValueError(f"unknown element type '{element_type}'")
    dims: list[int] = []
    if dims_text.strip():
        for dim in dims_text.split(","):
            dim_match = _DIM.fullmatch(dim.strip())
            if dim_match is None:
                raise ValueError(f"bad dimension '{dim}'")
            dims.append(int(dim_match.group(1)) if dim_match.group(1) else 0)
    return Shape(element_type, tuple(dims), layout), match.end()


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
