"""GPU targets: XLA GpuTargetConfigProto text files (`--target h100|a100|PATH`) and the peak rates they state.

The shipped files are openxla/xla's own `xla/backends/gpu/target_config/specs/*.txtpb`. We read them with a small
text-format reader (jaxlib exposes no Python class for this proto) into nested dicts, only to show the device and to
derive peak rates for the roofline; XLA itself gets the file's text unchanged.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from hloscope import files
from hloscope.errors import InputError, ParseError

# --target NAME -> file shipped in hloscope/data/gpu_specs/
PRESET_FILES = {"h100": "h100_sxm.txtpb", "a100": "a100_sxm_80.txtpb"}

# xla::PrimitiveType numbers used as keys of the rate tables (xla/xla_data.proto); checked against jaxlib in tests.
PRIMITIVE_TYPES = {1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32", 9: "u64",
                   10: "f16", 11: "f32", 12: "f64", 15: "c64", 16: "bf16", 18: "c128", 19: "f8e5m2", 20: "f8e4m3fn",
                   21: "s4", 22: "u4", 23: "f8e4m3b11fnuz", 24: "f8e5m2fnuz", 25: "f8e4m3fnuz", 28: "f8e4m3",
                   29: "f8e3m4", 32: "f4e2m1fn", 33: "f8e8m0fnu"}

_TOKEN = re.compile(r'\s+|#[^\n]*|(?P<str>"(?:[^"\\]|\\.)*")|(?P<punct>[{}:;,\[\]])|(?P<word>[^\s{}:;,\[\]"#]+)')


def parse_text_proto(text: str, path: str = "<string>") -> dict[str, Any]:
    """Protobuf text format -> nested dicts; a field that occurs more than once becomes a list."""
    tokens = _tokenize(text, path)
    _, out = _parse_fields(tokens, 0, path, top=True)
    return out


def _tokenize(text: str, path: str) -> list[tuple[str, str, int, int]]:
    tokens: list[tuple[str, str, int, int]] = []
    i, line, line_start = 0, 1, 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:  # an unterminated string
            raise ParseError(path, "unterminated string", line, i - line_start + 1)
        kind = m.lastgroup
        if kind:
            tokens.append((kind, m.group(kind), line, i - line_start + 1))
        newlines = text.count("\n", i, m.end())
        if newlines:
            line += newlines
            line_start = text.rindex("\n", i, m.end()) + 1
        i = m.end()
    return tokens


MAX_DEPTH = 16  # GpuTargetConfigProto nests 3 deep


def _parse_value(tokens: list[tuple[str, str, int, int]], pos: int, path: str, field: str,
                 depth: int) -> tuple[int, Any]:
    """The value of `field` at tokens[pos]: a nested message, a string, or a scalar; (position after it, value)."""
    kind, text, line, col = tokens[pos]
    if text == "{":
        if depth >= MAX_DEPTH:
            raise ParseError(path, f"braces nested more than {MAX_DEPTH} deep: not a GpuTargetConfigProto", line, col)
        return _parse_fields(tokens, pos + 1, path, opened_at=(line, col), depth=depth + 1)
    if kind == "str":
        try:
            return pos + 1, bytes(text[1:-1], "utf-8").decode("unicode_escape")
        except UnicodeDecodeError as error:
            raise ParseError(path, f"bad escape in string: {error.reason}", line, col) from None
    if kind == "word":
        return pos + 1, _scalar(text)
    raise ParseError(path, f"bad value {text!r} for field {field!r}", line, col)


def _parse_fields(tokens: list[tuple[str, str, int, int]], pos: int, path: str, top: bool = False,
                  opened_at: tuple[int, int] = (0, 0), depth: int = 0) -> tuple[int, dict[str, Any]]:
    """The fields from tokens[pos] to the '}' closing them (the end of the tokens at the top): (position after it,
    field name -> value: a nested message, a string, a number or a bool; a list where the field repeats)."""
    out: dict[str, Any] = {}
    while pos < len(tokens):
        kind, value, line, col = tokens[pos]
        if kind == "punct" and value == "}":
            if top:
                raise ParseError(path, "unexpected '}'", line, col)
            return pos + 1, out
        if kind != "word":
            raise ParseError(path, f"expected a field name, got {value!r}", line, col)
        pos += 1
        if pos < len(tokens) and tokens[pos][1] == ":":
            pos += 1
        if pos >= len(tokens):
            raise ParseError(path, f"field {value!r} has no value", line, col)
        pos, item = _parse_value(tokens, pos, path, value, depth)
        if pos < len(tokens) and tokens[pos][1] in (",", ";"):
            pos += 1
        if value in out:
            if not isinstance(out[value], list):
                out[value] = [out[value]]
            out[value].append(item)
        else:
            out[value] = item
    if not top:
        raise ParseError(path, "this '{' is never closed", *opened_at)
    return pos, out


def _scalar(text: str) -> str | int | float | bool:
    if len(text) > 40:  # a 5,000-digit "number" is not a spec value (and int() refuses it with a ValueError)
        return text
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text, text)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class GpuTarget:
    """A GPU XLA can compile for, and the peak rates its spec file states."""

    name: str                       # the preset name or the file's stem
    path: str                       # the spec file
    text: str                       # the GpuTargetConfigProto text given to XLA unchanged
    device: str                     # e.g. "NVIDIA H100 80GB HBM3"
    compute_capability: str         # e.g. "9.0a"
    core_count: int | None
    clock_ghz: float | None
    memory_bandwidth_bytes_s: float | None
    vector_flops_s: dict[str, float] = field(default_factory=dict)   # dtype -> peak FLOP/s on CUDA cores
    matrix_flops_s: dict[str, float] = field(default_factory=dict)   # dtype -> peak FLOP/s on tensor cores
    device_memory_bytes: int | None = None  # gpu_device_info.device_memory_size: the whole device's memory

    @property
    def has_roofline(self) -> bool:
        """A roofline needs at least the memory bandwidth and one compute peak."""
        return bool(self.memory_bandwidth_bytes_s and (self.vector_flops_s or self.matrix_flops_s))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "spec_file": self.path, "device": self.device,
                "compute_capability": self.compute_capability, "sm_count": self.core_count,
                "clock_ghz": self.clock_ghz, "memory_bandwidth_bytes_s": self.memory_bandwidth_bytes_s,
                "peak_vector_flops_s": self.vector_flops_s, "peak_matrix_flops_s": self.matrix_flops_s,
                "device_memory_bytes": self.device_memory_bytes}


def _rates(unit: dict[str, Any] | None, cores: int) -> dict[str, float]:
    """rate_infos {key: <PrimitiveType> value {clock_rate_ghz units_per_core ops_per_clock}} -> FLOP/s per dtype.

    ops_per_clock counts fused multiply-adds, i.e. two FLOPs (H100: f32 on CUDA cores 128*132*1.98e9*2 = 66.9
    TFLOP/s, bf16 on tensor cores 4*512*132*1.83e9*2 = 989 TFLOP/s: NVIDIA's dense datasheet figures).
    """
    out = {}
    for info in _as_list((unit or {}).get("rate_infos")):
        value = info.get("value", {})
        dtype = PRIMITIVE_TYPES.get(info.get("key"))
        if dtype is None:  # a type newer than this table: not needed for ViT-sized dtypes
            continue
        try:
            rate = 2.0 * cores * float(value["units_per_core"]) * float(value["ops_per_clock"]) * \
                float(value["clock_rate_ghz"]) * 1e9
        except (KeyError, TypeError, ValueError, OverflowError):
            continue
        if math.isfinite(rate) and rate > 0:  # a negative or absurd rate is no peak: no roofline from it
            out[dtype] = rate
    return out


def target_from_text(text: str, name: str, path: str) -> GpuTarget:
    proto = parse_text_proto(text, path)
    info = proto.get("gpu_device_info")
    if not isinstance(info, dict):
        raise InputError(path, "not a GpuTargetConfigProto: no gpu_device_info { ... } block")
    cc = info.get("cuda_compute_capability")
    if isinstance(cc, dict):
        capability = f"{cc.get('major', 0)}.{cc.get('minor', 0)}"
        if cc.get("feature_extension") == "ACCELERATED_FEATURES":
            capability += "a"
    else:
        rocm = info.get("rocm_compute_capability")
        capability = rocm.get("gcn_arch_name", "rocm") if isinstance(rocm, dict) else "unknown"
    cores = info.get("core_count")
    clock = info.get("clock_rate_ghz")
    if clock is None and isinstance(info.get("clock_rate_khz"), (int, float)):  # older spec files
        clock = info["clock_rate_khz"] / 1e6
    for key, value in (("core_count", cores), ("clock_rate_ghz", clock),
                         ("memory_bandwidth", info.get("memory_bandwidth")), ("fpus_per_core", info.get("fpus_per_core")),
                       ("device_memory_size", info.get("device_memory_size"))):
        if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                      and math.isfinite(value) and value > 0):
            raise InputError(path, f"not a usable GpuTargetConfigProto: gpu_device_info.{key} is {value!r}, "
                                   "expected a positive number")
    vector = _rates(info.get("scalar_unit_description"), cores or 0)
    if not vector and cores and clock and info.get("fpus_per_core"):
        # Without a rate table, fpus_per_core is the f32 FMA units per SM (A100: 64*108*1.41e9*2 = 19.5 TFLOP/s).
        vector = {"f32": 2.0 * cores * info["fpus_per_core"] * clock * 1e9}
    return GpuTarget(name=name, path=path, text=text,
                     device=str(proto.get("device_description_str") or info.get("name") or name),
                     compute_capability=capability, core_count=cores, clock_ghz=clock,
                     memory_bandwidth_bytes_s=info.get("memory_bandwidth"),
                     vector_flops_s=vector, matrix_flops_s=_rates(info.get("matrix_unit_description"), cores or 0),
                     device_memory_bytes=_byte_count(info.get("device_memory_size")))


def _byte_count(value: Any) -> int | None:
    """device_memory_size as bytes (already checked positive); a fractional figure is rounded down."""
    return None if value is None else int(value)


def resolve_target(target: str | os.PathLike[str]) -> GpuTarget:
    """`h100`, `a100` (shipped spec files) or the path of a GpuTargetConfigProto text file."""
    key = os.fspath(target)
    if key.lower() in PRESET_FILES:
        spec = resources.files("hloscope") / "data" / "gpu_specs" / PRESET_FILES[key.lower()]
        return target_from_text(spec.read_text(encoding="utf-8"), key.lower(), str(spec))
    if key in _READ_ONCE:  # `--target <(cat spec)`: a pipe can be read once only
        return _READ_ONCE[key]
    files.check_path(key)
    path = Path(key)
    if not os.path.lexists(path):
        raise InputError(path, f"no such GPU target file (use {', '.join(PRESET_FILES)} or the path of a "
                               "GpuTargetConfigProto .txtpb)")
    # a regular file, or a pipe read to its end once (bounded in time and size); a device is refused
    data = files.read_stream_once(path, "a GPU target file", max_bytes=4 << 20)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, f"cannot read GPU target file: not UTF-8 text ({e.reason} at byte {e.start})") from None
    read = target_from_text(text, path.stem, str(path))
    _READ_ONCE[key] = read
    return read


_READ_ONCE: dict[str, GpuTarget] = {}
