"""The XSpace protobuf classes (tsl's `xplane.proto`), taken from what the installed profiler packages ship.

No installed package exports a Python `xplane_pb2` today: XProf, jaxlib and torch_xla compile `xplane.proto` into their
C++ libraries only (TensorFlow ships `tensorflow.tsl.profiler.protobuf.xplane_pb2`, but it is far too heavy to require).
So we first try the Python modules that may exist, and otherwise read the protobuf compiler's serialized
`FileDescriptorProto` that XProf's (or jaxlib's) library embeds for its own reflection, and let the protobuf runtime build
message classes from it. Messages are then built and serialized by the protobuf library itself, with exactly the schema
that XProf reads.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import mmap
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from hloscope.errors import MissingDependency

PROTO_FILE = "tsl/profiler/protobuf/xplane.proto"
PROTO_PACKAGE = "tensorflow.profiler"
# Python modules that carry xplane_pb2 in some installations (TensorFlow, future XProf releases). Each is imported only
# when its file exists, because importing some of these packages has side effects (TensorFlow start-up, plugin logging).
PYTHON_MODULES = (
    "tsl.profiler.protobuf.xplane_pb2",
    "xprof.protobuf.xplane_pb2",
    "tensorboard_plugin_profile.protobuf.xplane_pb2",
    "tensorflow.tsl.profiler.protobuf.xplane_pb2",
)
# (package, library inside it) whose C++ code embeds the descriptor; XProf's first, since XProf is the reader.
NATIVE_LIBRARIES = (
    ("xprof", "convert/profiler_plugin_c_api.so"),
    ("jaxlib", "libjax_common.so"),
)


@functools.cache
def xspace_class() -> Any:
    """The `tensorflow.profiler.XSpace` message class. Raises MissingDependency when no installed package has it."""
    for module_name in PYTHON_MODULES:
        package, _, rest = module_name.partition(".")
        if _package_file(package, rest.replace(".", "/") + ".py") is None:
            continue
        try:
            return importlib.import_module(module_name).XSpace
        # importing a third party's package runs its code (TensorFlow's start-up, a protobuf version clash): whatever
        # it raises, that module is not usable, and the next source is tried
        except Exception:  # noqa: BLE001, S112
            continue
    for package, library in NATIVE_LIBRARIES:
        path = _package_file(package, library)
        if path is None:
            continue
        descriptor = read_embedded_descriptor(path)
        if descriptor is not None:
            return _classes_from_descriptor(descriptor)["XSpace"]
    raise MissingDependency("xprof", "its profiler library defines the XSpace protobuf schema")


def _package_file(package: str, relative: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    return None


def read_embedded_descriptor(library: Path) -> bytes | None:
    """The serialized FileDescriptorProto of xplane.proto inside a compiled library, or None when it is not there.

    protoc's C++ output stores it as one byte string that starts with field 1 (the file name). Its length is not stored
    next to it, so we walk the top-level fields of FileDescriptorProto (all length-delimited or varint) until a byte
    that cannot start one of them; the result must then parse as a FileDescriptorProto for this file and package.
    """
    name = PROTO_FILE.encode()
    header = b"\n" + bytes([len(name)]) + name
    with open(library, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        start = data.find(header)
        while start != -1:
            end = _end_of_fields(data, start)
            if end is not None:
                blob = bytes(data[start:end])
                parsed = descriptor_pb2.FileDescriptorProto()
                try:
                    parsed.ParseFromString(blob)
                except (DecodeError, RuntimeError, ValueError):  # protobuf's refusals, as trace.xplane catches them
                    parsed = None
                if parsed is not None and parsed.package == PROTO_PACKAGE and parsed.message_type:
                    return blob
            start = data.find(header, start + 1)
    return None


# FileDescriptorProto's top-level fields: 1-12 and 14 (edition); 13 is unused.
_FIELD_NUMBERS = set(range(1, 13)) | {14}


def _end_of_fields(data: mmap.mmap, start: int) -> int | None:
    position = start
    while position < len(data):
        tag, after_tag = _varint(data, position)
        if tag is None:
            break
        field, wire_type = tag >> 3, tag & 7
        if field not in _FIELD_NUMBERS or wire_type not in (0, 2):
            break
        value, after_value = _varint(data, after_tag)
        if value is None:
            break
        position = after_value + value if wire_type == 2 else after_value
    return position if position > start else None


def _varint(data: mmap.mmap, position: int) -> tuple[int | None, int]:
    value = 0
    for shift in range(0, 64, 7):
        if position >= len(data):
            return None, position
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
    return None, position


def _classes_from_descriptor(serialized: bytes) -> dict[str, Any]:
    # A private pool, so that a real xplane_pb2 imported later by someone else never clashes with ours.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(serialized))
    file_descriptor = pool.FindFileByName(PROTO_FILE)
    return {
        name: message_factory.GetMessageClass(descriptor)
        for name, descriptor in file_descriptor.message_types_by_name.items()
    }
