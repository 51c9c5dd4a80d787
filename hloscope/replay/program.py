"""One XLA module to replay: read it (HLO text or StableHLO), say whether it can run here, compile it with jaxlib's
XLA for one device, build realistic inputs for its entry parameters, and thread its aliased outputs back as the next
step's inputs (as the training loop does with donated parameters and optimizer state)."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from hloscope.errors import HloscopeError, InputError
from hloscope.files import open_binary, read_text
from hloscope.limits import MAX_REPLAY_MODULE_BYTES
from hloscope.replay.accept import ALLOWED_CUSTOM_CALLS, describe_target
from hloscope.targets.gpu_compile_worker import compile_stablehlo, stablehlo_from_text

_SHAPE = re.compile(r"\b(pred|s4|s8|s16|s32|s64|u4|u8|u16|u32|u64|f16|bf16|f32|f64|c64|c128)\[([\d,]*)\]")
_DTYPES = {"pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64", "u8": "uint8",
           "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16", "bf16": "bfloat16",
           "f32": "float32", "f64": "float64", "c64": "complex64", "c128": "complex128"}


class NotReplayable(HloscopeError):
    """This module cannot run alone here; the message says which module and why, in one line."""


class UnreadableModule(NotReplayable):
    """The module's text is not valid HLO / StableHLO (truncated, damaged): bad input. `input_error` names the file,
    with the parser's line:column when it gives one."""

    def __init__(self, name: str, input_error: InputError):
        self.input_error = input_error
        super().__init__(f"{name}: {input_error}")


# the parsers' own positions: MLIR's diagnostic `error: "-":527:39: expected ...`, XLA's `1224:42: error: ...`
_DIAGNOSTICS = (re.compile(r'error: "[^"\n]*":(\d+):(\d+): (.+)'), re.compile(r"(\d+):(\d+): error: (.+)"))


def _unreadable(path: str, name: str, fmt: str, error: BaseException) -> UnreadableModule:
    """A parser's failure as one InputError naming the file, at the parser's line:column when its text holds one."""
    what = "StableHLO MLIR" if fmt == "mlir" else "HLO text"
    for pattern in _DIAGNOSTICS:
        found = pattern.search(str(error))
        if found:
            return UnreadableModule(name, InputError(path, f"jaxlib cannot parse it as {what}: {found.group(3)[:300]}",
                                                     int(found.group(1)), int(found.group(2))))
    return UnreadableModule(name, InputError(path, f"jaxlib cannot parse it as {what}: {_first_line(error)}"))


@dataclass
class Shape:
    dtype: str  # HLO element type: f32, s64, ...
    dims: tuple[int, ...]

    @property
    def text(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


@dataclass
class Program:
    """A compiled module and what its compiled HLO says about its entry: parameter and output shapes, and which output
    feeds which parameter at the next step."""

    name: str
    file: str
    fmt: str  # "hlo" | "mlir"
    executable: Any  # jaxlib's LoadedExecutable (execute, hlo_modules): jaxlib._jax ships no stubs
    compiled_hlo: str
    parameters: list[Shape]
    outputs: list[Shape]
    feeds: dict[int, int]  # parameter index -> output index threaded into it at the next step
    feeds_from: str  # "input_output_alias" | "matching shapes" | "none"
    donors: int = 0
    compile_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def module_format(path: str | os.PathLike) -> str:
    """'mlir' for StableHLO/MHLO text, 'hlo' for HLO text, from the file's beginning."""
    with open_binary(path, "HLO module") as f:
        head = f.read(1 << 16).decode("utf-8", "replace").lstrip()
    if head.startswith("HloModule"):
        return "hlo"
    if head.startswith(("module", "#loc", "func.func")) or "func.func" in head:
        return "mlir"
    raise InputError(path, "neither HLO text (`HloModule ...`) nor StableHLO MLIR (`module ...`): cannot replay it")


def check_replayable(name: str, text: str, fmt: str, devices: int) -> None:
    """Raise NotReplayable (one line: module and reason) for what jaxlib cannot run alone on `devices` devices.
    (What replay refuses to run at all, custom calls and host transfers, hloscope.replay.accept has refused before.)"""
    if fmt == "hlo":
        header = text[: text.find("\n")]
        parts = re.search(r"num_partitions=(\d+)", header)
        replicas = re.search(r"replica_count=(\d+)", header)
        needed = max(int(parts.group(1)) if parts else 1, 1) * max(int(replicas.group(1)) if replicas else 1, 1)
        sharded = "sharding={devices=[" in text or needed > 1
    else:
        parts = re.search(r"mhlo\.num_partitions = (\d+)", text)
        replicas = re.search(r"mhlo\.num_replicas = (\d+)", text)
        needed = max(int(parts.group(1)) if parts else 1, 1) * max(int(replicas.group(1)) if replicas else 1, 1)
        sharded = needed > 1
    if sharded and needed > devices:
        raise NotReplayable(f"{name}: a sharded module for {needed} devices; {devices} device(s) here")
    if sharded:
        raise NotReplayable(f"{name}: a sharded module (SPMD partitions or replicas): replay runs one device's program")


def compile_program(path: str | os.PathLike, device, name: str | None = None, fmt: str | None = None) -> Program:
    """Compile the module at `path` with jaxlib's XLA for `device` (a jax Device). Raises NotReplayable."""
    path = str(path)
    fmt = fmt or module_format(path)
    name = name or Path(path).name
    text = read_text(path, "HLO module", MAX_REPLAY_MODULE_BYTES)
    check_replayable(name, text, fmt, len(device.client.devices()))
    try:
        module_text, donors = stablehlo_from_text(text, fmt)
        operations = _operations(module_text)
    except Exception as error:  # noqa: BLE001  # jaxlib's HLO parser, MLIR's: their error types differ by version
        raise _unreadable(path, name, fmt, error) from None
    _check_operations(path, operations)
    start = time.perf_counter()
    try:
        executable = compile_stablehlo(device.client, (device,), module_text, donors, load=True)
    except Exception as error:  # noqa: BLE001  # XLA's compile refusals, any type: the module is not replayable
        if fmt == "mlir" and str(error).startswith("Unable to parse module"):  # MLIR's parser, within the compile
            raise _unreadable(path, name, fmt, error) from None
        message = _first_line(error)
        if "custom" in message.lower() and "call" in message.lower():
            raise NotReplayable(f"{name}: a custom call has no {device.platform} implementation in jaxlib: "
                                f"{message}") from None
        raise NotReplayable(f"{name}: jaxlib's XLA cannot compile it for {device.platform}: {message}") from None
    compile_s = time.perf_counter() - start
    compiled = executable.hlo_modules()[0].to_string()
    parameters, outputs = entry_shapes(compiled)
    feeds, how = _feeds(compiled, parameters, outputs)
    return Program(name=name, file=path, fmt=fmt, executable=executable, compiled_hlo=compiled,
                   parameters=parameters, outputs=outputs, feeds=feeds, feeds_from=how, donors=len(donors),
                   compile_s=compile_s)


def _operations(module_text: str | bytes) -> list[tuple[str, str | None]]:
    """(operation name, custom-call target or None) of every operation of the module as MLIR parses it: what XLA will
    compile, whatever the text looked like to hloscope's own checks."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    found: list[tuple[str, str | None]] = []
    with mlir.make_ir_context():
        module = ir.Module.parse(module_text)
        stack = [module.operation]
        while stack:
            op = stack.pop()
            target = None
            if op.name.endswith(".custom_call"):
                try:
                    target = ir.StringAttr(op.attributes["call_target_name"]).value
                except (KeyError, ValueError):  # no target, or not a string: nothing the allow-list names
                    target = ""
            found.append((op.name, target))
            for region in op.regions:
                for block in region.blocks:
                    stack.extend(child.operation for child in block.operations)
    return found


def _check_operations(path: str, operations: list[tuple[str, str | None]]) -> None:
    """The allow-list of hloscope.replay.accept, once more on the parsed module: InputError for a custom call it does
    not name exactly or an operation that talks to the host."""
    for op, target in operations:
        if target is not None and target not in ALLOWED_CUSTOM_CALLS:
            raise InputError(path, describe_target(target))
        if op.split(".")[-1] in ("send", "recv", "infeed", "outfeed"):
            raise InputError(path, f"'{op}' talks to the host, which is not there in a replay: not replayed")


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__)[:300]


def entry_shapes(hlo_text: str) -> tuple[list[Shape], list[Shape]]:
    """Parameter and output shapes from the compiled module's `entry_computation_layout={(params)->outputs}`."""
    header = hlo_text[: hlo_text.find("\n")]
    match = re.search(r"entry_computation_layout=\{\((.*)\)->(.*)\}", header)
    if match is None:
        raise NotReplayable("the compiled module has no entry_computation_layout")
    params = [Shape(d, tuple(int(x) for x in dims.split(",") if x)) for d, dims in _SHAPE.findall(match.group(1))]
    outs = [Shape(d, tuple(int(x) for x in dims.split(",") if x)) for d, dims in _SHAPE.findall(match.group(2))]
    return params, outs


def _feeds(hlo_text: str, parameters: list[Shape], outputs: list[Shape]) -> tuple[dict[int, int], str]:
    """Which output becomes which parameter at the next step: XLA's input_output_alias where the module donates
    (torch_xla's buffer_donor, jax's donate_argnums); otherwise the outputs that repeat the parameters' shapes in order
    (a functional train step returns its new state first, in the order it took it: JAX's `(state, batch) -> (state,
    loss)`)."""
    header = hlo_text[: hlo_text.find("\n")]
    aliases = re.findall(r"\{(\d*)\}: \((\d+), \{\}", header[header.find("input_output_alias="):]
                         if "input_output_alias=" in header else "")
    feeds = {int(p): int(o or 0) for o, p in aliases}
    if feeds:
        return feeds, "input_output_alias"
    feeds = {}
    for index, (param, out) in enumerate(zip(parameters, outputs)):
        if param != out:
            break
        feeds[index] = index
    if any(out.dims for out in outputs[len(feeds):]):  # not a state-in, state-out step (a forward graph, say)
        feeds = {}
    return feeds, ("matching shapes" if feeds else "none")


def make_inputs(program: Program, device, batch_size: int | None, num_labels: int | None, seed: int = 0) -> list:
    """Realistic values for every entry parameter, on `device`: the batch of images ~ N(0, 1), weights and optimizer
    state ~ N(0, 0.02), float scalars (learning rate, scales) 0.01, integer vectors of the batch's length (labels)
    uniform in [0, num_labels), integer scalars (step counters) 0, unsigned scalars (RNG seeds) a fixed seed."""
    import jax

    # 64-bit parameters need x64 while their arrays are placed (device_put narrows int64 labels to int32 otherwise);
    # the arrays keep their type after it. Only for this: a global switch would change every later JAX program of the
    # process (a notebook's, or another command's in the same process: it changed the --target capture's arguments).
    wide = any(shape.dtype in ("s64", "u64", "f64", "c128") for shape in program.parameters)
    with jax.enable_x64(wide):
        return _place_inputs(program, device, batch_size, num_labels, seed)


def _place_inputs(program: Program, device, batch_size: int | None, num_labels: int | None, seed: int) -> list:
    import jax

    rng = np.random.default_rng(seed)
    classes = max(int(num_labels or 2), 1)
    arrays = []
    for shape in program.parameters:
        dtype = _numpy_dtype(shape.dtype)
        dims = shape.dims
        if shape.dtype == "pred":
            value = np.zeros(dims, dtype=bool)
        elif shape.dtype.startswith(("s", "u")):
            if len(dims) == 1 and batch_size and dims[0] == batch_size:
                value = rng.integers(0, classes, size=dims).astype(dtype)
            elif not dims and shape.dtype.startswith("u"):
                value = np.array((20260101 + seed) % (int(np.iinfo(dtype).max) + 1), dtype=dtype)  # any seed fits
            else:
                value = np.zeros(dims, dtype=dtype)
        elif not dims:
            value = np.array(0.01, dtype=dtype)
        elif batch_size and len(dims) == 4 and dims[0] == batch_size:
            value = rng.standard_normal(dims).astype(dtype)
        else:
            value = (0.02 * rng.standard_normal(dims)).astype(dtype)
        arrays.append(jax.device_put(value, device))
    return arrays


def _numpy_dtype(hlo_type: str):
    if hlo_type == "bf16":
        return ml_dtypes.bfloat16
    if hlo_type not in _DTYPES:
        raise NotReplayable(f"parameters of type {hlo_type} are not supported by replay")
    return np.dtype(_DTYPES[hlo_type])


def loss_index(program: Program) -> int | None:
    """The output most likely to be the loss: the first floating-point scalar that is not fed back."""
    fed = set(program.feeds.values())
    for index, shape in enumerate(program.outputs):
        if not shape.dims and shape.dtype.startswith(("f", "bf")) and index not in fed:
            return index
    return None
