"""XLA's opcode list, and the rewrites XLA's parser makes while it reads text, so that computations, instructions and
opcodes are counted exactly as `jaxlib._hlo.hlo_module_from_text` counts them.

- Opcodes: the 133 of `xla/hlo/ir/hlo_opcode.h` (openxla/xla, mirrored as Intel-tensorflow/xla at 756478bb, the same
  list as jaxlib 0.10.2's `HloOpcode`). Anything else is refused, as XLA's `ParseOpcode` refuses it.
- Async "syntax sugar" (`HloParserImpl::ParseOpcode` / `CreateAsyncWrappedComputation`): `X-start`, `X-update`,
  `X-done` where X is an opcode without a native async form become `async-start` / `async-update` / `async-done`, and
  each `X-start` gets a new computation `async_wrapped` holding one `async_param` per operand and the X instruction
  itself (named after its opcode), which carries X's attributes. `all-reduce-start`, `all-gather-start`,
  `collective-permute-start`, `copy-start`, `send` and `recv` are real opcodes and stay as they are.
- Shapes XLA infers when the text leaves them out (`ROOT n = negate(p)`), for the opcodes whose shape follows from
  their operands alone.
- Shapes XLA builds whatever the text says (`DERIVED_SHAPE`): its parser creates send, send-done, recv-done,
  add-dependency and after-all from their operands alone, and recv and infeed from the first element of the written
  tuple, so a written shape that disagrees is silently replaced (XLA's import_async.hlo writes a recv-done
  `(f32[128,21], token[])` of a recv of f32[128,32]: XLA's module holds f32[128,32]).
"""

from __future__ import annotations

from hloscope.hlo.shapes import Shape

OPCODES = frozenset(["abs", "acos", "acosh", "add", "add-dependency", "after-all", "all-gather", "all-gather-done", "all-gather-start", "all-reduce", "all-reduce-done", "all-reduce-start", "all-to-all", "and", "asin", "asinh", "async-done", "async-start", "async-update", "atan2", "atanh", "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "bitcast", "bitcast-convert", "broadcast", "call", "cbrt", "ceil", "cholesky", "clamp", "count-leading-zeros", "collective-broadcast", "collective-permute", "collective-permute-done", "collective-permute-start", "compare", "complex", "concatenate", "conditional", "constant", "convert", "convolution", "copy", "copy-done", "copy-start", "cosine", "cosh", "custom-call", "divide", "domain", "dot", "dynamic-reshape", "dynamic-slice", "dynamic-update-slice", "erf", "exponential", "exponential-minus-one", "fft", "floor", "fusion", "gather", "get-dimension-size", "get-tuple-element", "imag", "infeed", "iota", "is-finite", "log", "log-plus-one", "logistic", "map", "maximum", "minimum", "mulhi", "multiply", "negate", "not", "opt-barrier", "or", "outfeed", "pad", "parameter", "partition-id", "popcnt", "power", "ragged-all-to-all", "ragged-dot", "real", "recv", "recv-done", "reduce", "reduce-precision", "reduce-scatter", "reduce-window", "remainder", "replica-id", "reshape", "reverse", "rng", "rng-bit-generator", "rng-get-and-update-state", "round-nearest-afz", "round-nearest-even", "rsqrt", "scaled-dot", "scan", "scatter", "select", "select-and-scatter", "send", "send-done", "set-dimension-size", "shift-left", "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "sinh", "slice", "sort", "sqrt", "stochastic-convert", "subtract", "tan", "tanh", "topk", "transpose", "triangular-solve", "tuple", "while", "xor"])

# Opcodes with a native async form: `X-start` of these is not sugar (and `X-start` is refused where it is no opcode).
NATIVE_ASYNC = frozenset({"all-gather", "all-reduce", "collective-permute", "copy", "recv", "send"})

_SUFFIXES = (("-start", "async-start"), ("-update", "async-update"), ("-done", "async-done"))


def async_sugar(opcode: str) -> tuple[str, str] | None:
    """('async-start'|'async-update'|'async-done', wrapped opcode) for sugar such as `reduce-scatter-start`, else None."""
    for suffix, async_opcode in _SUFFIXES:
        if opcode.endswith(suffix):
            wrapped = opcode[: -len(suffix)]
            if wrapped in OPCODES and wrapped not in NATIVE_ASYNC:
                return async_opcode, wrapped
            return None
    return None


UNARY_ELEMENTWISE = frozenset(["abs", "acos", "acosh", "asin", "asinh", "atanh", "cbrt", "ceil", "count-leading-zeros", "cosine", "cosh", "erf", "exponential", "exponential-minus-one", "floor", "log", "log-plus-one", "logistic", "negate", "not", "popcnt", "reduce-precision", "round-nearest-afz", "round-nearest-even", "rsqrt", "sign", "sine", "sinh", "sqrt", "tan", "tanh", "copy"])
BINARY_ELEMENTWISE = frozenset(["add", "and", "atan2", "divide", "maximum", "minimum", "multiply", "or", "power", "remainder", "shift-left", "shift-right-arithmetic", "shift-right-logical", "subtract", "xor"])


def infer_shape(opcode: str, operand_shapes: list[Shape], attrs: dict[str, str]) -> str | None:
    """The shape text XLA's shape inference gives an instruction written without one, for the opcodes whose result
    follows from their operands alone; None where hloscope does not infer it."""
    if opcode in UNARY_ELEMENTWISE and len(operand_shapes) == 1:
        return str(operand_shapes[0])
    if opcode in BINARY_ELEMENTWISE and len(operand_shapes) == 2:
        return str(operand_shapes[0])
    if opcode == "is-finite" and len(operand_shapes) == 1 and not operand_shapes[0].is_tuple:
        return str(Shape("pred", operand_shapes[0].dims, operand_shapes[0].layout, dynamic=operand_shapes[0].dynamic))
    if opcode == "compare" and len(operand_shapes) == 2 and not operand_shapes[0].is_tuple:
        return str(Shape("pred", operand_shapes[0].dims, operand_shapes[0].layout, dynamic=operand_shapes[0].dynamic))
    if opcode in ("select", "clamp") and len(operand_shapes) == 3:
        return str(operand_shapes[1])
    if opcode == "tuple":
        return str(Shape(tuple_shapes=tuple(operand_shapes)))
    if opcode == "get-tuple-element" and len(operand_shapes) == 1 and operand_shapes[0].tuple_shapes is not None:
        elements = operand_shapes[0].tuple_shapes
        index = attrs.get("index", "")
        if index.isdigit() and len(index) <= 18 and int(index) < len(elements):
            return str(elements[int(index)])
    if opcode in ("opt-barrier", "add-dependency", "bitcast") and operand_shapes:
        return str(operand_shapes[0])
    if opcode == "dot" and len(operand_shapes) == 2:
        return _dot_shape(operand_shapes[0], operand_shapes[1], attrs)
    return None


def _dot_shape(lhs: Shape, rhs: Shape, attrs: dict[str, str]) -> str | None:
    """ShapeInference::InferDotOpShape: the batch dimensions, then lhs's and rhs's other free dimensions."""
    if lhs.tuple_shapes is not None or rhs.tuple_shapes is not None or lhs.dynamic or rhs.dynamic:
        return None

    def dims(key: str) -> list[int]:
        return [int(d) for d in attrs.get(key, "{}").strip("{} ").split(",") if d.strip()]

    lhs_batch, rhs_batch = dims("lhs_batch_dims"), dims("rhs_batch_dims")
    lhs_used = set(lhs_batch) | set(dims("lhs_contracting_dims"))
    rhs_used = set(rhs_batch) | set(dims("rhs_contracting_dims"))
    if any(d >= len(lhs.dims) for d in lhs_used) or any(d >= len(rhs.dims) for d in rhs_used):
        return None
    out = [lhs.dims[d] for d in lhs_batch]
    out += [size for d, size in enumerate(lhs.dims) if d not in lhs_used]
    out += [size for d, size in enumerate(rhs.dims) if d not in rhs_used]
    return str(Shape(lhs.element_type, tuple(out)))


# Opcodes whose shape XLA's parser builds itself (HloInstruction::CreateSend / CreateSendDone / CreateRecv /
# CreateRecvDone / CreateInfeed / CreateAddDependency / CreateAfterAll), not taking the written one.
DERIVED_SHAPE = frozenset(["add-dependency", "after-all", "infeed", "recv", "recv-done", "send", "send-done"])


def derived_shape(opcode: str, written: Shape | None, operand_shapes: list[Shape]) -> str | None:
    """The shape text XLA gives an instruction of `DERIVED_SHAPE` (None where it cannot be built: XLA refuses or
    CHECK-fails on such text; the written shape then stays)."""
    first = written.tuple_shapes[0] if written is not None and written.tuple_shapes else None
    if opcode in ("recv", "infeed"):  # (data, u32[] context, token[]) / (data, token[]), data as written
        if first is None:
            return None
        return f"({first}, u32[], token[])" if opcode == "recv" else f"({first}, token[])"
    if opcode == "send" and len(operand_shapes) == 2:
        return f"({operand_shapes[0]}, u32[], token[])"
    if opcode == "recv-done" and len(operand_shapes) == 1 and operand_shapes[0].tuple_shapes:
        return f"({operand_shapes[0].tuple_shapes[0]}, token[])"
    if opcode in ("send-done", "after-all"):
        return "token[]"
    if opcode == "add-dependency" and len(operand_shapes) == 2:
        return str(operand_shapes[0])
    return None
