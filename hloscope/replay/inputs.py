"""A run's saved step inputs (`hlo/jit_train_step.inputs.npz`, hloscope.backends.step_inputs), read as untrusted:
through the bounded reader, every zip member's declared size checked against what the program's parameters need
before anything is decompressed, the `.npy` headers read without pickle, and each array's type and shape equal to its
entry parameter's. Anything else is one InputError naming the file."""

from __future__ import annotations

import io
import os
import re
import zipfile
from collections.abc import Sequence
from typing import Any, Protocol

import ml_dtypes

from hloscope.errors import InputError
from hloscope.files import open_binary, regular_file
from hloscope.limits import MAX_NPY_HEADER_BYTES, MAX_REPLAY_SAVED_STEPS
from hloscope.replay.accept import Parameter

_NAME = re.compile(r"^(?:state_(\d{1,6})|batch(\d{1,6})_(\d{1,6})|losses|dtypes)\.npy$")
# numpy's own dtypes by the name step_inputs records; bfloat16 is stored as uint16 (ml_dtypes' types have no .npy form)
_HLO_OF = {"bool": "pred", "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64", "uint8": "u8",
           "uint16": "u16", "uint32": "u32", "uint64": "u64", "float16": "f16", "float32": "f32", "float64": "f64",
           "complex64": "c64", "complex128": "c128", "bfloat16": "bf16"}
_DTYPES_BYTES = 1 << 20  # the `dtypes` member: one short string per array


class ParameterShape(Protocol):
    dtype: str
    dims: tuple[int, ...]

    @property
    def text(self) -> str: ...


def _bytes(shape: ParameterShape) -> int:
    return Parameter(shape.dtype, tuple(shape.dims)).byte_size


def load_saved(path: str | os.PathLike, parameters: Sequence[ParameterShape], module: str) -> dict[str, Any]:
    """The saved arrays by name (`state_<i>`, `batch<k>_<j>`, `losses`), each checked against `parameters` (the
    program's entry parameters, state first, then one step's batch). Raises InputError naming the file."""
    file = os.fspath(path)
    bound = _file_bound(parameters)
    info = regular_file(file, "saved step inputs (.npz)")
    if info.st_size > bound:
        raise InputError(file, f"{info.st_size / 1e6:.1f} MB is more than {module}'s parameters can need "
                               f"({bound / 1e6:.1f} MB for {MAX_REPLAY_SAVED_STEPS} steps): not read")
    with open_binary(file, "saved step inputs (.npz)") as handle:
        try:
            with zipfile.ZipFile(handle) as archive:
                members = _plan(file, archive.infolist(), parameters, module)
                raw = {name: _read_member(file, archive, member, limit) for name, (member, limit) in members.items()}
        except InputError:
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError,
                RuntimeError) as error:
            raise InputError(file, f"not a saved step-inputs file (.npz): {_first_line(error)}") from None
    arrays = {name: _array(file, name, data) for name, data in raw.items()}
    return _typed(file, arrays, parameters, module)


def _file_bound(parameters: Sequence[ParameterShape]) -> int:
    batch = sum(_bytes(p) for p in parameters)  # a step's batch is a part of the parameters; bounded by all of them
    headers = (len(parameters) * (MAX_REPLAY_SAVED_STEPS + 1) + 2) * (MAX_NPY_HEADER_BYTES + 1024)
    return batch * (MAX_REPLAY_SAVED_STEPS + 1) + headers + _DTYPES_BYTES + MAX_REPLAY_SAVED_STEPS * 8


def _plan(file: str, members: list[zipfile.ZipInfo], parameters: Sequence[ParameterShape],
          module: str) -> dict[str, tuple[zipfile.ZipInfo, int]]:
    """Each member's name and the most bytes it may declare, refusing unknown or duplicated names, encryption and
    any declared size beyond its parameter's before a byte is decompressed."""
    if len(members) > len(parameters) * (MAX_REPLAY_SAVED_STEPS + 1) + 2:
        raise InputError(file, f"{len(members)} members: more than {module}'s {len(parameters)} parameters can use")
    plan: dict[str, tuple[zipfile.ZipInfo, int]] = {}
    for member in members:
        match = _NAME.match(member.filename)
        if match is None:
            raise InputError(file, f"member {member.filename[:80]!r} is not one hloscope saves (state_<i>.npy, "
                                   "batch<k>_<j>.npy, losses.npy, dtypes.npy)")
        name = member.filename[:-4]
        if name in plan:
            raise InputError(file, f"member {member.filename!r} is there twice")
        if member.flag_bits & 0x1:
            raise InputError(file, f"member {member.filename!r} is encrypted")
        if name == "dtypes":
            limit = _DTYPES_BYTES
        elif name == "losses":
            limit = MAX_REPLAY_SAVED_STEPS * 8
        else:
            parameter = _parameter_of(file, name, match, parameters, module)
            limit = _bytes(parameter)
        if member.file_size > limit + MAX_NPY_HEADER_BYTES:
            what = name if name in ("dtypes", "losses") else f"{name} (parameter {parameter.text})"
            raise InputError(file, f"member {member.filename!r} declares {member.file_size:,} bytes uncompressed, "
                                   f"more than {what} can hold ({limit + MAX_NPY_HEADER_BYTES:,}): not decompressed")
        plan[name] = (member, limit + MAX_NPY_HEADER_BYTES)
    return plan


def _parameter_of(file: str, name: str, match: re.Match[str], parameters: Sequence[ParameterShape],
                  module: str) -> ParameterShape:
    """The entry parameter a member feeds, by position: state_<i> is parameter i; batch<k>_<j> the j-th after the
    state. The number of state arrays is not known yet: a batch member is bounded by the largest parameter."""
    if match.group(1) is not None:
        index = int(match.group(1))
        if index >= len(parameters):
            raise InputError(file, f"{name}: {module} has {len(parameters)} entry parameters")
        return parameters[index]
    step = int(match.group(2))
    if step >= MAX_REPLAY_SAVED_STEPS:
        raise InputError(file, f"{name}: more than {MAX_REPLAY_SAVED_STEPS} saved steps")
    if int(match.group(3)) >= len(parameters):
        raise InputError(file, f"{name}: {module} has {len(parameters)} entry parameters")
    return max(parameters, key=_bytes)


def _read_member(file: str, archive: zipfile.ZipFile, member: zipfile.ZipInfo, limit: int) -> bytes:
    with archive.open(member) as stream:
        data = stream.read(limit + 1)  # zipfile stops at the declared size and checks the CRC at the end
    if len(data) > limit:
        raise InputError(file, f"member {member.filename!r} holds more than it declares: not read")
    return data


def _array(file: str, name: str, data: bytes):
    """The .npy member as an array, its header read first: the dtype must be plain numbers (no object, no fields,
    native byte order) and the data exactly as long as the shape says, before anything is allocated."""
    import numpy as np

    fp = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp, max_header_size=MAX_NPY_HEADER_BYTES)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp, max_header_size=MAX_NPY_HEADER_BYTES)
        else:
            raise ValueError(f".npy format version {version[0]}.{version[1]}, not one hloscope writes")
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as error:
        raise InputError(file, f"{name}: not a plain numpy array: {_first_line(error)}") from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or not dtype.isnative:
        raise InputError(file, f"{name}: an array of {dtype.str!r}: not a plain numeric array (pickled objects and "
                               "records are never read)")
    count = 1
    for dim in shape:
        count *= dim
    if count * dtype.itemsize != len(data) - fp.tell():
        raise InputError(file, f"{name}: its header says {dtype.str}{list(shape)} ({count * dtype.itemsize:,} bytes), "
                               f"it holds {len(data) - fp.tell():,} bytes of data")
    array = np.frombuffer(data, dtype=dtype, count=count, offset=fp.tell())
    return array.reshape(shape, order="F" if fortran else "C")


def _typed(file: str, arrays: dict[str, Any], parameters: Sequence[ParameterShape], module: str) -> dict[str, Any]:
    """Apply the recorded dtypes (bfloat16 from its uint16 bits) and check every array against its parameter."""
    import numpy as np

    recorded = arrays.pop("dtypes", None)
    dtypes: dict[str, str] = {}
    if recorded is not None:
        if recorded.dtype.kind != "U" or recorded.ndim != 1:
            raise InputError(file, f"dtypes: an array of {recorded.dtype.str!r}, expected strings")
        for item in recorded.tolist():
            key, _, value = str(item).partition("=")
            if value not in _HLO_OF:
                raise InputError(file, f"dtypes: {str(item)[:80]!r} names no type replay reads")
            dtypes[key] = value
    n_state = _count(file, arrays, lambda k: f"state_{k}")
    steps = _count(file, arrays, lambda k: f"batch{k}_0")
    n_batch = _count(file, arrays, lambda j: f"batch0_{j}")
    if not steps:
        raise InputError(file, f"{module}: the saved inputs hold no batch")
    if n_state + n_batch != len(parameters):
        raise InputError(file, f"{module} has {len(parameters)} entry parameters, the file {n_state + n_batch} "
                               f"arrays per step ({n_state} state + {n_batch} batch)")
    expected = {f"state_{i}": i for i in range(n_state)}
    expected.update({f"batch{k}_{j}": n_state + j for k in range(steps) for j in range(n_batch)})
    extra = sorted(set(arrays) - set(expected) - {"losses"})
    if extra:
        raise InputError(file, f"{extra[0]}: not part of {steps} steps of {n_state} state + {n_batch} batch arrays")
    out: dict[str, Any] = {}
    for name, index in expected.items():
        array, parameter = arrays[name], parameters[index]
        logical = dtypes.get(name, str(array.dtype))
        if logical == "bfloat16":
            if array.dtype != np.uint16:
                raise InputError(file, f"{name}: recorded as bfloat16 but stored as {array.dtype}")

            array = array.view(ml_dtypes.bfloat16)
        elif logical != str(array.dtype):
            raise InputError(file, f"{name}: recorded as {logical} but stored as {array.dtype}")
        hlo = _HLO_OF.get(logical, "?")
        if hlo != parameter.dtype or tuple(array.shape) != tuple(parameter.dims):
            shown = f"{hlo}[{','.join(map(str, array.shape))}]"
            raise InputError(file, f"{name}: parameter {index} of {module} is {parameter.text}, the saved array "
                                   f"{shown}")
        out[name] = array
    losses = arrays.get("losses")
    if losses is not None:
        if losses.dtype != np.float64 or losses.shape != (steps,):
            raise InputError(file, f"losses: {losses.dtype}[{','.join(map(str, losses.shape))}], expected "
                                   f"float64[{steps}] (one loss per saved step)")
        out["losses"] = losses
    return out


def _count(file: str, arrays: dict[str, Any], name) -> int:
    n = 0
    while name(n) in arrays:
        n += 1
    return n


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__)[:200]
