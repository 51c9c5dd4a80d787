"""FLOPs, transcendentals and bytes accessed with the conventions of XLA's HloCostAnalysis
(xla/service/hlo_cost_analysis.cc), as the CPU client configures it (pointer size 8: a tuple counts 8 bytes per
element). Totals are over the entry computation, with fusions, calls, while loops (one iteration) and conditionals
(the most expensive branch) costed through the computations they call, as XLA does.

Custom calls are unknown to the generic analysis (it reports -1). cuBLAS GEMMs and cuDNN forward convolutions are
costed the way XLA's GpuHloCostAnalysis does (dot / convolution FLOPs from the call's dimension numbers, default
bytes) and also reported apart as `library_flops`, so that `flops - library_flops` is the generic figure; other
custom calls count 0 and are listed as `uncosted`."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from hloscope.errors import ParseError
from hloscope.files import int64
from hloscope.hlo.model import HloComputation, HloInstruction, HloModule
from hloscope.hlo.opcodes import OPCODES
from hloscope.hlo.shapes import Shape, first_element

POINTER_SIZE = 8
TRANSCENDENTAL = {
    "acosh", "erf", "exponential", "log", "logistic", "power", "sqrt", "cbrt", "rsqrt", "tanh", "sine", "cosine",
    "exponential-minus-one", "log-plus-one", "atan2", "tan",
}
ELEMENTWISE = TRANSCENDENTAL | {
    "abs", "add", "and", "ceil", "clamp", "compare", "complex", "convert", "count-leading-zeros", "divide", "floor",
    "imag", "is-finite", "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt", "real", "reduce-precision",
    "remainder", "round-nearest-afz", "round-nearest-even", "select", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "sign", "subtract", "xor", "atan2", "stochastic-convert", "bitcast-convert", "asin", "acos",
    "asinh", "atanh", "sinh", "cosh", "mulhi",
}
ZERO_BYTES = {"parameter", "constant", "get-tuple-element", "bitcast", "domain", "after-all", "add-dependency"}


@dataclass(slots=True)
class Cost:
    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_accessed: float = 0.0
    library_flops: float = 0.0  # the part of `flops` done by cuBLAS/cuDNN calls
    library_bytes: float = 0.0  # the part of `bytes_accessed` read and written by them

    def add(self, other: Cost, scale: float = 1.0, with_bytes: bool = True) -> None:
        self.flops += other.flops * scale
        self.transcendentals += other.transcendentals * scale
        self.library_flops += other.library_flops * scale
        if with_bytes:
            self.bytes_accessed += other.bytes_accessed * scale
            self.library_bytes += other.library_bytes * scale


# Instruction name -> its users in one computation (see _users).
_Users = dict[str, list[HloInstruction]]
# The cost of the many instructions that cost nothing, shared (instruction costs are never changed in place).
_ZERO = Cost()
# What a malformed instruction raises while it is costed (reported as a ParseError naming it).
_COST_ERRORS = (IndexError, KeyError, ValueError, ZeroDivisionError, AttributeError, TypeError)


def shape_size(shape: Shape) -> int:
    """The CPU client's shape size (CpuExecutable::ShapeSizeBytes), which its HloCostAnalysis uses: XLA's
    ShapeUtil::ByteSizeOf(shape, pointer_size=8) (a tuple is its index table; packed sub-byte elements, `E(4)`, are
    counted packed), plus a 4-byte size per dimension of a dynamic array (`f32[<=8,4]`); an opaque value is a pointer."""
    parts = shape.tuple_shapes
    if parts is not None:
        return POINTER_SIZE * len(parts)
    if shape.dynamic:
        return shape.byte_size + 4 * len(shape.dims)
    if shape.element_type == "opaque":
        return POINTER_SIZE
    return shape.byte_size



def _int(text: object) -> int:
    """A whole number of the HLO text (a window size, a group count, an index); ValueError for anything else and for
    one beyond 64 bits, never an int() of 5,000 digits."""
    number = int64(text)
    if number is None:
        shown = str(text)
        raise ValueError(f"{shown[:24]}{'...' if len(shown) > 24 else ''} is not a whole number of at most 64 bits")
    return number


def _ints(text: str) -> list[int]:
    return [_int(x) for x in re.findall(r"-?\d+", text)]


def _window(text: str | None) -> list[dict[str, int]]:
    """`{size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=..}` -> one dict per spatial dimension."""
    if not text:
        return []
    fields = dict(re.findall(r"(\w+)=([\dx_\-]+)", text))
    sizes = [_int(s) for s in fields.get("size", "").split("x") if s]
    n = len(sizes)

    def per_dim(key: str, default: int) -> list[int]:
        value = fields.get(key)
        return [_int(v) for v in value.split("x")] if value else [default] * n

    pads = [tuple(_int(p) for p in d.split("_")) for d in fields["pad"].split("x")] if "pad" in fields else [(0, 0)] * n
    strides, base, win = per_dim("stride", 1), per_dim("lhs_dilate", 1), per_dim("rhs_dilate", 1)
    return [
        {"size": sizes[i], "stride": strides[i], "pad_low": pads[i][0], "pad_high": pads[i][1],
         "base_dilation": base[i], "window_dilation": win[i]}
        for i in range(n)
    ]


def _conv_flops(instr: HloInstruction) -> float:
    """HloCostAnalysis::GetConvolutionFlops: 2 x FMAs over the valid (non-padding) window positions."""
    lhs, rhs = (o.shape for o in instr.operands[:2])
    out = first_element(instr.shape)
    labels = instr.attrs.get("dim_labels", "")
    match = re.fullmatch(r"(\w+)_(\w+)->(\w+)", labels)
    if not match:
        return 0.0
    lhs_l, rhs_l, out_l = match.groups()
    window = _window(instr.attrs.get("window"))
    spatial = len(window)
    input_feature = lhs.dims[lhs_l.index("f")]
    output_feature = out.dims[out_l.index("f")]
    batch = lhs.dims[lhs_l.index("b")]
    counts: list[int] = []
    if spatial == 0:
        counts = [1]
    for d, w in enumerate(window):
        k_lim = rhs.dims[rhs_l.index(str(d))]
        o_lim = out.dims[out_l.index(str(d))]
        i_lim = lhs.dims[lhs_l.index(str(d))]
        if (i_lim == o_lim and k_lim == o_lim and i_lim == w["base_dilation"] and w["window_dilation"] == 1
                and max(1, i_lim - 1) == w["stride"] and w["pad_low"] == 0 and w["pad_high"] == 0):
            counts.append(i_lim)
            continue
        if (i_lim == 1 and k_lim == o_lim and w["window_dilation"] == 1 and w["base_dilation"] == 1 and w["stride"] == 1
                and w["pad_high"] == o_lim - 1 and w["pad_low"] == o_lim - 1):
            counts.append(o_lim)
            continue
        valid = 0
        for k in range(k_lim):
            if w["stride"] == 1 and w["base_dilation"] == 1:
                base = w["pad_low"] - k * w["window_dilation"]
                valid += max(min(i_lim + base, o_lim) - max(base, 0), 0)
                continue
            for o in range(o_lim):
                undilated = o * w["stride"] - w["pad_low"] + k * w["window_dilation"]
                index = undilated // w["base_dilation"] if w["base_dilation"] > 1 else undilated
                if undilated != index * w["base_dilation"] or index < 0 or index >= i_lim:
                    continue
                valid += 1
        counts.append(valid)
    feature_groups = _int(instr.attrs.get("feature_group_count", "1"))
    batch_groups = _int(instr.attrs.get("batch_group_count", "1"))
    return 2.0 * (input_feature // feature_groups) * output_feature * (batch // batch_groups) * math.prod(counts)


def _dot_flops(instr: HloInstruction) -> float:
    lhs = instr.operands[0].shape
    width = 1
    for dim in _ints(instr.attrs.get("lhs_contracting_dims", "")):
        width *= lhs.dims[dim]
    return 2.0 * instr.shape.elements * width


def _ragged_dot_flops(instr: HloInstruction) -> float:
    """HloCostAnalysis::HandleRaggedDot: a dot's FLOPs over the output with one dimension deleted per rhs group
    dimension, as XLA deletes them (dimension 0, then dimension 1 of what is left, ...: positions, not the group
    dimensions' own numbers)."""
    dims = list(first_element(instr.shape).dims)
    for index in range(len(_ints(instr.attrs.get("rhs_group_dims", "")))):
        del dims[index]
    lhs = instr.operands[0].shape
    width = math.prod(lhs.dims[d] for d in _ints(instr.attrs.get("lhs_contracting_dims", "")))
    return 2.0 * math.prod(dims) * width


def _fft_flops(instr: HloInstruction) -> float:
    """HloCostAnalysis::HandleFft, for every fft_type (FFT, IFFT, RFFT, IRFFT): 2 (FMA) x 4 (FMAs per complex
    multiply) x the product of floor(log2(n)) over fft_length x the elements of the input (complex for IRFFT)."""
    log_factors = math.prod(n.bit_length() - 1 for n in _ints(instr.attrs.get("fft_length", "")))
    return 2.0 * 4 * log_factors * first_element(instr.operands[0].shape).elements


def _minor_to_major(shape: Shape) -> list[int]:
    """The layout's minor-to-major order; XLA's parser gives a shape written without a layout the default one."""
    if shape.layout is None:
        return list(range(len(shape.dims) - 1, -1, -1))
    return _ints(shape.layout.split(":")[0])


def _transpose_is_bitcast(instr: HloInstruction) -> bool:
    out, operand = instr.shape, instr.operands[0].shape
    perm = _ints(instr.attrs.get("dimensions", ""))
    out_m2m = _minor_to_major(out)
    in_m2m = _minor_to_major(operand)
    return [perm[m] for m in out_m2m] == in_m2m if len(perm) == len(out_m2m) else False


class CostAnalysis:
    """Per-instruction costs of one module, memoised; `module_cost()` is XLA's total."""

    def __init__(self, module: HloModule):
        self.module = module
        self.costs: dict[HloInstruction, Cost] = {}  # keyed by the instruction itself (identity): no id() integers
        self.uncosted: list[str] = []
        self._computation_costs: dict[str, Cost] = {}
        self._in_progress: set[str] = set()
        self._facts_by_text: dict[str, tuple[int, int, int]] = {}
        from hloscope.hlo.native import native  # imports this module: not at the top

        self._common = native.cost_common if native is not None else None

    def computation_cost(self, comp: HloComputation) -> Cost:
        cached = self._computation_costs.get(comp.name)
        if cached is None:
            if comp.name in self._in_progress:  # XLA refuses call graphs with cycles; so do we, without recursing
                raise ParseError(self.module.path, f"computation '{comp.name}' calls itself", comp.lineno, 1)
            self._in_progress.add(comp.name)
            flops = transcendentals = bytes_accessed = library_flops = library_bytes = 0.0
            costs = self.costs
            instruction_cost = self.instruction_cost
            elementwise = self._elementwise
            facts_by_text = self._facts_by_text
            common = self._common
            instructions = comp.instructions
            index = 0
            try:
                while index < len(instructions):
                    if common is not None:
                        # The compiled loop takes what the branches below would (known costs, zero-cost,
                        # elementwise and default-bytes-only instructions), adding to the same sums in the same
                        # order; it hands back the first instruction that needs more.
                        sums = [flops, transcendentals, bytes_accessed, library_flops, library_bytes]
                        index = common(instructions, index, costs, facts_by_text, ZERO_BYTES, ELEMENTWISE,
                                       TRANSCENDENTAL, DEFAULT_BYTES_ONLY, _ZERO, sums)
                        flops, transcendentals, bytes_accessed, library_flops, library_bytes = sums
                        if index == len(instructions):
                            break
                    instr = instructions[index]
                    index += 1
                    cost = costs.get(instr)
                    if cost is None:  # the commonest opcodes costed here, without instruction_cost's calls
                        op = instr.opcode
                        if op in ZERO_BYTES:
                            costs[instr] = _ZERO
                            continue
                        if op in ELEMENTWISE:
                            cost = costs[instr] = elementwise(instr)
                        else:
                            cost = instruction_cost(instr)
                    if cost is not _ZERO:
                        flops += cost.flops
                        transcendentals += cost.transcendentals
                        bytes_accessed += cost.bytes_accessed
                        library_flops += cost.library_flops
                        library_bytes += cost.library_bytes
            except _COST_ERRORS as error:
                raise self._cannot_cost(instr, error) from None
            cached = Cost(flops, transcendentals, bytes_accessed, library_flops, library_bytes)
            self._in_progress.discard(comp.name)
            self._computation_costs[comp.name] = cached
        return cached

    def module_cost(self) -> Cost:
        # Cost callees before callers, so that a deep call chain (XLA accepts hundreds of nested calls) is costed
        # without deep recursion: each computation_cost then finds its callees already in the cache.
        for comp in self._callees_first(self.module.entry):
            self.computation_cost(comp)
        return self.computation_cost(self.module.entry)

    def _callees_first(self, root: HloComputation) -> list[HloComputation]:
        """Computations reachable from root, each after every computation it calls (iterative post-order)."""
        order: list[HloComputation] = []
        done: set[str] = set()
        on_path: set[str] = {root.name}
        stack = [(root, iter(_callees(root)))]
        while stack:
            comp, callees = stack[-1]
            callee = next(callees, None)
            if callee is None:
                stack.pop()
                on_path.discard(comp.name)
                done.add(comp.name)
                order.append(comp)
            elif callee.name in on_path:  # XLA refuses call graphs with cycles
                raise ParseError(self.module.path, f"computation '{callee.name}' calls itself", callee.lineno, 1)
            elif callee.name not in done:
                on_path.add(callee.name)
                stack.append((callee, iter(_callees(callee))))
        return order

    def instruction_cost(self, instr: HloInstruction) -> Cost:
        cost = self.costs.get(instr)
        if cost is None:
            try:
                cost = self._cost(instr)
            except _COST_ERRORS as error:
                raise self._cannot_cost(instr, error) from None
            self.costs[instr] = cost
        return cost

    def _cannot_cost(self, instr: HloInstruction, error: Exception) -> ParseError:
        """The error that costing `instr` raised, as a ParseError naming it (one from a nested instruction as it is)."""
        if isinstance(error, ParseError):
            return error
        return ParseError(self.module.path, f"cannot cost '{instr.name}' ({instr.opcode}): {error!r}", instr.lineno, 1)

    def _facts(self, instr: HloInstruction) -> tuple[int, int, int]:
        """(output bytes as XLA's Preprocess counts them, shape_size, elements) of an instruction's shape, computed
        once per distinct shape text: modules repeat a few hundred shapes thousands of times."""
        facts = self._facts_by_text.get(instr.shape_text)
        if facts is None:
            shape = instr.shape
            out = shape_size(shape) if shape.tuple_shapes is None else sum(shape_size(s) for s in shape.leaves())
            facts = self._facts_by_text[instr.shape_text] = (out, shape_size(shape), shape.elements)
        return facts

    def _default_bytes(self, instr: HloInstruction) -> float:
        """XLA's HloCostAnalysis::Preprocess: every leaf of the output (a tuple-shaped result such as
        batch-norm-training's, sort's, topk's or rng-bit-generator's counts all its arrays, not its index table), plus
        each operand's size (a tuple operand counts only its index table)."""
        facts_by_text = self._facts_by_text
        total = (facts_by_text.get(instr.shape_text) or self._facts(instr))[0]
        for operand in instr.operands:
            total += (facts_by_text.get(operand.shape_text) or self._facts(operand))[1]
        return total

    def _elementwise(self, instr: HloInstruction) -> Cost:
        """Elementwise ops: one FLOP (or transcendental) per output element, and the default bytes."""
        count = self._facts(instr)[2]
        if instr.opcode in TRANSCENDENTAL:
            return Cost(0.0, count, self._default_bytes(instr))
        return Cost(count, 0.0, self._default_bytes(instr))

    def _cost(self, instr: HloInstruction) -> Cost:
        op = instr.opcode
        if op in ZERO_BYTES:
            return _ZERO
        if op in DEFAULT_BYTES_ONLY:  # copy, broadcast, reshape, concatenate, pad, ...: no handler below
            return Cost(bytes_accessed=self._default_bytes(instr))
        if op in ELEMENTWISE:  # the commonest case first
            return self._elementwise(instr)
        handler = _HANDLERS.get(op)
        if handler is not None:
            return handler(self, instr)
        return Cost(bytes_accessed=self._default_bytes(instr))

    # One handler per opcode family that XLA's HloCostAnalysis counts differently from the default bytes.

    def _custom_call(self, instr: HloInstruction) -> Cost:
        flops = self._library_flops(instr)
        if flops is None:
            self.uncosted.append(instr.name)
            return Cost()
        size = self._default_bytes(instr)
        return Cost(flops=flops, bytes_accessed=size, library_flops=flops, library_bytes=size)

    def _with_flops(self, instr: HloInstruction, flops: float) -> Cost:
        return Cost(flops=flops, bytes_accessed=self._default_bytes(instr))

    def _dot(self, instr: HloInstruction) -> Cost:
        return self._with_flops(instr, _dot_flops(instr))

    def _convolution(self, instr: HloInstruction) -> Cost:
        return self._with_flops(instr, _conv_flops(instr))

    def _ragged_dot(self, instr: HloInstruction) -> Cost:
        return self._with_flops(instr, _ragged_dot_flops(instr))

    def _fft(self, instr: HloInstruction) -> Cost:
        return self._with_flops(instr, _fft_flops(instr))

    def _sort(self, instr: HloInstruction) -> Cost:
        elements = instr.operands[0].shape.elements
        return self._with_flops(instr, elements * math.ceil(math.log2(elements)) if elements > 1 else 0)

    def _all_reduce(self, instr: HloInstruction) -> Cost:  # bytes: the default (every leaf of the output, each operand)
        return self._with_flops(instr, sum(s.elements for s in instr.shape.leaves()))

    def _rng(self, instr: HloInstruction) -> Cost:
        return Cost(transcendentals=sum(s.elements for s in instr.shape.leaves()),
                    bytes_accessed=self._default_bytes(instr))

    def _tuple(self, instr: HloInstruction) -> Cost:
        return Cost(bytes_accessed=shape_size(instr.shape))

    def _opt_barrier(self, instr: HloInstruction) -> Cost:  # measured against XLA: the index table plus every array carried
        return Cost(bytes_accessed=shape_size(instr.shape) + instr.shape.byte_size)

    def _transpose(self, instr: HloInstruction) -> Cost:
        if _transpose_is_bitcast(instr):
            return _ZERO
        return Cost(bytes_accessed=self._default_bytes(instr))

    def _outfeed(self, instr: HloInstruction) -> Cost:  # HandleOutfeed: every array its operands carry, no output
        return Cost(bytes_accessed=sum(shape_size(leaf) for operand in instr.operands for leaf in operand.shape.leaves()))

    def _slice(self, instr: HloInstruction) -> Cost:
        return Cost(bytes_accessed=shape_size(instr.shape) * 2)

    def _indexed_read(self, instr: HloInstruction) -> Cost:  # dynamic-slice, gather: output twice plus the indices
        return Cost(bytes_accessed=shape_size(instr.shape) * 2 + shape_size(instr.operands[1].shape))

    def _dynamic_update_slice(self, instr: HloInstruction) -> Cost:
        operands = instr.operands
        return Cost(bytes_accessed=shape_size(operands[1].shape) * 2 + shape_size(operands[2].shape))

    def _applied_cost(self, instr: HloInstruction) -> Cost:
        cost = Cost(bytes_accessed=self._default_bytes(instr))
        self._applied(instr, cost)
        return cost

    def _call(self, instr: HloInstruction) -> Cost:
        return self._copy_of(self.computation_cost(instr.called_computations[0]))

    def _while(self, instr: HloInstruction) -> Cost:
        total = Cost()
        for comp in instr.called_computations:  # body and condition: one iteration
            total.add(self.computation_cost(comp))
        return total

    def _conditional(self, instr: HloInstruction) -> Cost:
        branches = [self.computation_cost(c) for c in instr.called_computations]
        return Cost(*(max(getattr(b, key) for b in branches)
                      for key in ("flops", "transcendentals", "bytes_accessed", "library_flops", "library_bytes")))

    def _triangular_solve(self, instr: HloInstruction) -> Cost:
        a, b = (o.shape for o in instr.operands[:2])
        return Cost(flops=2.0 * a.dims[-1] * b.elements,
                    bytes_accessed=shape_size(instr.shape) + shape_size(a) / 2 + shape_size(b))

    def _cholesky(self, instr: HloInstruction) -> Cost:
        a = instr.operands[0].shape
        return Cost(flops=float(a.dims[-1] * a.elements // 3), bytes_accessed=shape_size(a))

    @staticmethod
    def _copy_of(cost: Cost) -> Cost:
        return Cost(cost.flops, cost.transcendentals, cost.bytes_accessed, cost.library_flops, cost.library_bytes)

    @staticmethod
    def _library_flops(instr: HloInstruction) -> float | None:
        """FLOPs of a cuBLAS GEMM or cuDNN forward convolution call (GpuHloCostAnalysis), None for other targets."""
        target = instr.custom_call_target or ""
        out = first_element(instr.shape)
        if target.startswith("__cublas$"):
            config = instr.backend_config.get("gemm_backend_config") or {}
            dims = (config.get("dot_dimension_numbers") or {}).get("lhs_contracting_dimensions")
            if dims is None:
                return None
            lhs = instr.operands[0].shape
            width = math.prod(lhs.dims[_int(d)] for d in dims)
            return 2.0 * out.elements * width
        if target in ("__cudnn$convForward", "__cudnn$convBiasActivationForward"):
            return _conv_flops(instr)
        return None

    def _applied(self, instr: HloInstruction, cost: Cost) -> None:
        """reduce / reduce-window / map / select-and-scatter / scan: the applied function's cost (FLOPs and
        transcendentals, not bytes) times its applications as XLA counts them."""
        op = instr.opcode
        if op == "select-and-scatter":
            select, scatter = (self.module.computations_by_name[n] for n in (instr.attrs["select"].lstrip("%"), instr.attrs["scatter"].lstrip("%")))
            source = instr.operands[1].shape.elements
            window_size = math.prod(w["size"] for w in _window(instr.attrs.get("window")))
            cost.add(self.computation_cost(select), source * (window_size - 1), with_bytes=False)
            cost.add(self.computation_cost(scatter), source, with_bytes=False)
            return
        function = self.computation_cost(instr.called_computations[0])
        out = first_element(instr.shape)
        if op == "map":
            count = instr.shape.elements
        elif op == "scan":  # HandleScan: the elements of operand 1, whatever the scan dimension and carries
            count = instr.operands[1].shape.elements
        elif op == "reduce":
            count = instr.operands[0].shape.elements - out.elements
        else:
            window = _window(instr.attrs.get("window"))
            count = (math.prod(w["size"] for w in window) - 1) * out.elements
            reduced = [w for w in window if w["size"] != 1]
            padded = [w for w in window if w["pad_low"] or w["pad_high"]]
            if len(reduced) == 1 and len(padded) == 1 and instr.shape.tuple_shapes is None:
                for d, w in enumerate(window):
                    if (w["size"] != 1 and w["pad_low"] and w["pad_high"] and w["pad_low"] == w["pad_high"]
                            and w["size"] == 2 * w["pad_low"] + 1):
                        if w["pad_low"] == instr.shape.dims[d] - 1:
                            span = instr.shape.dims[d]
                            count = out.elements // span + (span - 1)
                        break
        cost.add(function, count, with_bytes=False)

    def _scatter(self, instr: HloInstruction) -> Cost:
        operands = instr.operands
        n = (len(operands) - 1) // 2
        updates = operands[n + 1 :]
        update_size = sum(shape_size(u.shape) for u in updates)
        cost = Cost(bytes_accessed=update_size * 3 + shape_size(operands[n].shape))
        cost.add(self.computation_cost(instr.called_computations[0]), updates[0].shape.elements, with_bytes=False)
        return cost

    # -- fusions: XLA costs the fused computation's flops, and bytes at the fusion's boundary -------------------------
    def _fusion(self, instr: HloInstruction) -> Cost:
        body = instr.called_computations[0]
        if instr.fusion_kind == "kCustom":
            for inner in body.instructions:  # XLA costs a custom gather/scatter fusion as that one op
                if inner.opcode == "gather":
                    return Cost(bytes_accessed=shape_size(inner.shape) * 2 + shape_size(inner.operands[1].shape))
                if inner.opcode == "scatter":
                    return self._scatter(inner)
        body_cost = self.computation_cost(body)
        cost = Cost(body_cost.flops, body_cost.transcendentals, 0.0, body_cost.library_flops)
        cost.bytes_accessed += self._fusion_output_bytes(instr, body)
        for inner_instr in body.instructions:  # large constants are read from memory
            if inner_instr.opcode == "constant" and inner_instr.shape.elements > 1:
                cost.bytes_accessed += shape_size(inner_instr.shape)
        users = _users(body)
        params = sorted((i for i in body.instructions if i.opcode == "parameter"), key=_parameter_number)
        for param in params:
            if param.shape.tuple_shapes is not None:
                cost.bytes_accessed += self._tuple_parameter_bytes(param, users)
            else:
                cost.bytes_accessed += self._parameter_read_bytes(param, users)
        return cost

    def _fusion_output_bytes(self, instr: HloInstruction, body: HloComputation) -> float:
        root = body.root
        shape = instr.shape
        parts = shape.tuple_shapes
        if parts is None:
            return self._output_leaf_bytes(shape, root)
        total = 0.0
        for index, sub in enumerate(parts):
            element_root = root.operands[index] if root.opcode == "tuple" else root
            total += self._subshape_bytes(sub, element_root)
        return total

    def _subshape_bytes(self, shape: Shape, root: HloInstruction) -> float:
        parts = shape.tuple_shapes
        if parts is not None:  # nested tuples: XLA visits every array subshape
            return sum(self._subshape_bytes(s, root) for s in parts)
        return self._output_leaf_bytes(shape, root)

    @staticmethod
    def _output_leaf_bytes(shape: Shape, root: HloInstruction) -> float:
        if root.opcode == "dynamic-update-slice":
            return shape_size(root.operands[1].shape)
        return shape_size(shape)

    def _tuple_parameter_bytes(self, param: HloInstruction, users: _Users) -> float:
        total = 0.0

        def walk(node: HloInstruction, shape: Shape) -> None:
            nonlocal total
            parts = shape.tuple_shapes
            if parts is None:
                total += self._parameter_read_bytes(node, users)
                return
            for index, sub in enumerate(parts):
                child = node
                for user in users.get(node.name, ()):
                    if user.opcode == "get-tuple-element" and _int(user.attrs.get("index", "-1")) == index:
                        child = user
                        break
                walk(child, sub)

        walk(param, param.shape)
        return total

    def _parameter_read_bytes(self, hlo: HloInstruction, users: _Users) -> float:
        """HloCostAnalysis::FusionParameterReadBytes."""
        size = 0.0
        seen_trivial = False
        own = shape_size(hlo.shape)
        for user in users.get(hlo.name, ()):
            op = user.opcode
            if op == "fusion":
                size += self._nested_fusion_read_bytes(hlo, user, users)
            elif op == "slice" or (op == "dynamic-slice" and user.operands[0] is hlo):
                size += shape_size(user.shape)
            elif op in ("broadcast", "reshape"):
                size += own
            elif op == "dynamic-update-slice" and user.operands[0] is hlo:
                pass  # updated in place: not read
            elif not seen_trivial:
                seen_trivial = True
                size += own
        return size

    def _nested_fusion_read_bytes(self, hlo: HloInstruction, user: HloInstruction, users: _Users) -> float:
        """FusionParameterReadBytes for a fusion user: what the nested fusion reads of `hlo`, once per operand use."""
        nested = user.called_computations[0]
        nested_users = _users(nested)
        nested_params = sorted((i for i in nested.instructions if i.opcode == "parameter"), key=_parameter_number)
        root = nested.root
        fusion_users = users.get(user.name, ())
        size = 0.0
        for idx, operand_name in enumerate(user.operand_names):
            if operand_name != hlo.name:
                continue
            nested_seen = False
            param = nested_params[idx]
            simple = not root.operand_names or root.operands[0] is param
            for fusion_user in fusion_users:
                fop = fusion_user.opcode
                reads_window = fop == "slice" or (fop == "dynamic-slice" and fusion_user.operands[0] is user)
                if simple and reads_window:
                    size += shape_size(fusion_user.shape)
                elif simple and fop == "dynamic-update-slice" and fusion_user.operands[0] is user:
                    pass  # updated in place: not read
                elif not nested_seen:
                    nested_seen = True
                    indexed = simple and fop in ("dynamic-slice", "dynamic-update-slice")
                    size += shape_size(user.shape) if indexed else self._parameter_read_bytes(param, nested_users)
        return size


_Handler = Callable[[CostAnalysis, HloInstruction], Cost]
# The opcodes XLA's HloCostAnalysis counts differently from their default bytes, each with its handler.
_HANDLERS: dict[str, _Handler] = {
    "custom-call": CostAnalysis._custom_call,
    "dot": CostAnalysis._dot, "scaled-dot": CostAnalysis._dot,
    "convolution": CostAnalysis._convolution, "ragged-dot": CostAnalysis._ragged_dot, "fft": CostAnalysis._fft,
    "tuple": CostAnalysis._tuple, "opt-barrier": CostAnalysis._opt_barrier, "transpose": CostAnalysis._transpose,
    "outfeed": CostAnalysis._outfeed, "slice": CostAnalysis._slice,
    "dynamic-slice": CostAnalysis._indexed_read, "gather": CostAnalysis._indexed_read,
    "dynamic-update-slice": CostAnalysis._dynamic_update_slice, "scatter": CostAnalysis._scatter,
    **dict.fromkeys(("reduce", "reduce-window", "map", "select-and-scatter", "scan"), CostAnalysis._applied_cost),
    "sort": CostAnalysis._sort, "all-reduce": CostAnalysis._all_reduce, "all-reduce-start": CostAnalysis._all_reduce,
    "rng": CostAnalysis._rng, "rng-bit-generator": CostAnalysis._rng, "fusion": CostAnalysis._fusion,
    "call": CostAnalysis._call, "async-start": CostAnalysis._call, "while": CostAnalysis._while,
    "conditional": CostAnalysis._conditional, "triangular-solve": CostAnalysis._triangular_solve,
    "cholesky": CostAnalysis._cholesky,
}
# Everything else but the free and elementwise opcodes (copy, broadcast, reshape, concatenate, pad, ...) costs its
# default bytes alone; the compiled loop (hlo/native.py) relies on this set too.
DEFAULT_BYTES_ONLY = set(OPCODES) - ZERO_BYTES - ELEMENTWISE - set(_HANDLERS)


def _parameter_number(instr: HloInstruction) -> int:
    return _int(instr.operand_text.strip() or 0)


def _callees(comp: HloComputation) -> list[HloComputation]:
    return [callee for instr in comp.instructions for callee in instr.called_computations]


def _users(comp: HloComputation) -> _Users:
    """name -> users, each user listed once per distinct operand use (XLA's users() holds each user once)."""
    users: dict[str, list[HloInstruction]] = {}
    for instr in comp.instructions:
        for name in dict.fromkeys(instr.operand_names):
            users.setdefault(name, []).append(instr)
    return users


def module_cost(module: HloModule) -> tuple[Cost, CostAnalysis]:
    analysis = CostAnalysis(module)
    return analysis.module_cost(), analysis
