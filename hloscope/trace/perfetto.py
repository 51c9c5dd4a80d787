"""Perfetto protobuf traces (`.pftrace`) -> the Chrome-trace event dicts the Kineto reader and the XSpace conversion
take, in bounded memory.

A Perfetto trace is a `perfetto.protos.Trace`: a sequence of `packet` fields (field 1), each a `TracePacket`. The file
is read one packet at a time (never the whole message) and each packet is decoded by the protobuf runtime with a
descriptor of only the fields read here (field numbers as in Perfetto's protos/perfetto/trace: trace_packet.proto,
track_event/track_event.proto, track_descriptor.proto, process_descriptor.proto, thread_descriptor.proto,
interned_data.proto, debug_annotation.proto); the parser skips the others. What is read:

- track descriptors: a thread track (pid, tid, thread name) or a process track (pid, process name) -> the `M`
  `process_name` / `thread_name` records of a Chrome trace; any other track is a lane of its parent's process;
- track events: SLICE_BEGIN / SLICE_END pairs on a track -> one complete (`X`) event each, INSTANT -> an `i` event;
  name and categories inline or interned (per packet sequence, cleared with SEQ_INCREMENTAL_STATE_CLEARED); debug
  annotations -> `args`.

Timestamps are the packets' absolute `timestamp` (ns, the trace's default clock); packets whose time is delta-encoded
against a clock snapshot are not supported (they read as time 0 and are refused as such by the caller's checks).
torch 2.9's Kineto does not write Perfetto protobuf: `export_chrome_trace("x.pftrace")` writes JSON (read as JSON by
its content); Perfetto's own SDK and converters do.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from hloscope import files
from hloscope.errors import InputError

# Imports inside functions: protobuf only for Perfetto files, kept out of `trace stats` start-up.

PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace")
# A packet bigger than this is not a trace packet of a profiler (they are bytes to kilobytes): refused, never buffered.
MAX_PACKET_BYTES = 64 * 2**20
MAX_OPEN_SLICES = 100_000  # begun and not ended on one track: deeper than any real call stack, and bounded memory
TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT = 1, 2, 3
SEQ_INCREMENTAL_STATE_CLEARED = 1

_OPTIONAL, _REPEATED = 1, 3
_STRING, _INT64, _UINT64, _INT32, _UINT32, _BOOL, _DOUBLE, _MESSAGE = 9, 3, 4, 5, 13, 8, 1, 11
# message -> [(field, number, type, label, message type)]
_MESSAGES: tuple[tuple[str, list[tuple[str, int, int, int, str | None]]], ...] = (
    ("TracePacket", [("timestamp", 8, _UINT64, _OPTIONAL, None),
                     ("trusted_packet_sequence_id", 10, _UINT32, _OPTIONAL, None),
                     ("track_event", 11, _MESSAGE, _OPTIONAL, "TrackEvent"),
                     ("interned_data", 12, _MESSAGE, _OPTIONAL, "InternedData"),
                     ("sequence_flags", 13, _UINT32, _OPTIONAL, None),
                     ("track_descriptor", 60, _MESSAGE, _OPTIONAL, "TrackDescriptor")]),
    ("TrackEvent", [("category_iids", 3, _UINT64, _REPEATED, None),
                    ("debug_annotations", 4, _MESSAGE, _REPEATED, "DebugAnnotation"),
                    ("type", 9, _INT32, _OPTIONAL, None),
                    ("name_iid", 10, _UINT64, _OPTIONAL, None),
                    ("track_uuid", 11, _UINT64, _OPTIONAL, None),
                    ("categories", 22, _STRING, _REPEATED, None),
                    ("name", 23, _STRING, _OPTIONAL, None)]),
    ("DebugAnnotation", [("name_iid", 1, _UINT64, _OPTIONAL, None), ("bool_value", 2, _BOOL, _OPTIONAL, None),
                         ("uint_value", 3, _UINT64, _OPTIONAL, None), ("int_value", 4, _INT64, _OPTIONAL, None),
                         ("double_value", 5, _DOUBLE, _OPTIONAL, None), ("string_value", 6, _STRING, _OPTIONAL, None),
                         ("name", 10, _STRING, _OPTIONAL, None)]),
    ("TrackDescriptor", [("uuid", 1, _UINT64, _OPTIONAL, None), ("name", 2, _STRING, _OPTIONAL, None),
                         ("process", 3, _MESSAGE, _OPTIONAL, "ProcessDescriptor"),
                         ("thread", 4, _MESSAGE, _OPTIONAL, "ThreadDescriptor"),
                         ("parent_uuid", 5, _UINT64, _OPTIONAL, None)]),
    ("ProcessDescriptor", [("pid", 1, _INT32, _OPTIONAL, None), ("process_name", 6, _STRING, _OPTIONAL, None)]),
    ("ThreadDescriptor", [("pid", 1, _INT32, _OPTIONAL, None), ("tid", 2, _INT32, _OPTIONAL, None),
                          ("thread_name", 5, _STRING, _OPTIONAL, None)]),
    ("InternedData", [("event_categories", 1, _MESSAGE, _REPEATED, "InternedString"),
                      ("event_names", 2, _MESSAGE, _REPEATED, "InternedString"),
                      ("debug_annotation_names", 3, _MESSAGE, _REPEATED, "InternedString")]),
    # EventCategory, EventName and DebugAnnotationName share this layout: iid = 1, name = 2
    ("InternedString", [("iid", 1, _UINT64, _OPTIONAL, None), ("name", 2, _STRING, _OPTIONAL, None)]),
)


@functools.cache
def message_classes() -> dict[str, Any]:
    """The protobuf message classes of the Perfetto subset above, from a descriptor built here (private pool)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name="hloscope/perfetto_subset.proto", package="perfetto.protos",
                                              syntax="proto2")
    for message_name, fields in _MESSAGES:
        message = file.message_type.add(name=message_name)
        for field_name, number, kind, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = f".perfetto.protos.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"perfetto.protos.{name}"))
            for name, _ in _MESSAGES}


def is_perfetto_file(path: Path) -> bool:
    return path.name.endswith(PERFETTO_SUFFIXES)


def is_protobuf(path: Path) -> bool:
    """Whether a .pftrace holds Perfetto protobuf rather than JSON (torch 2.9 writes JSON under any name)."""
    with files.open_binary(path, "a trace file", "save the trace to a file first") as stream:
        head = stream.read(64)
    # an empty file is refused as such by the caller; JSON starts with '{' or '[' after blanks and a byte order mark
    return bool(head) and head.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] not in (b"{", b"[")


def packets(path: Path) -> Iterator[bytes]:
    """The serialized TracePackets of a Perfetto trace, one at a time. Raises InputError naming the file (with the
    byte offset) for a truncated file, a field that is not a packet, or a packet beyond MAX_PACKET_BYTES."""
    with files.open_binary(path, "a trace file", "save the trace to a file first") as stream:  # buffered by fdopen
        offset = 0
        while True:
            tag, size = _varint(stream)
            if tag is None:
                if size:
                    raise InputError(path, f"truncated Perfetto trace: the file ends inside a field at byte {offset:,}")
                return
            if tag != 0x0A:  # Trace.packet: field 1, length-delimited
                raise InputError(path, f"not a Perfetto trace: byte {offset:,} starts field {tag >> 3} (wire type "
                                       f"{tag & 7}), not a trace packet")
            length, size_length = _varint(stream)
            if length is None:
                raise InputError(path, f"truncated Perfetto trace: the file ends inside a packet length at byte "
                                       f"{offset + size:,}")
            if length > MAX_PACKET_BYTES:
                raise InputError(path, f"not a Perfetto trace: a packet of {length:,} bytes at byte {offset:,} "
                                       f"(more than {MAX_PACKET_BYTES:,})")
            body = stream.read(length)
            if len(body) != length:
                raise InputError(path, f"truncated Perfetto trace: the file ends inside the packet at byte {offset:,}")
            offset += size + size_length + length
            yield body


def _varint(stream: BinaryIO) -> tuple[int | None, int]:
    """A varint and how many bytes it took; (None, 0) at the end of the file, (None, n) when it ends inside one."""
    value = 0
    for count, shift in enumerate(range(0, 70, 7)):
        byte = stream.read(1)
        if not byte:
            return None, count
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return value, count + 1
    return None, 10


def trace_dicts(path: Path) -> Iterator[dict[str, Any]]:
    """The trace as Chrome-trace event dicts (`M` names, `X` complete and `i` instant events, `ts`/`dur` in µs), in
    the order the events end. Raises InputError naming the file for what is not a Perfetto trace."""
    from google.protobuf.message import DecodeError

    classes = message_classes()
    packet_class = classes["TracePacket"]
    tracks: dict[int, tuple[int, int | str]] = {}  # track uuid -> (pid, tid or lane name)
    open_slices: dict[int, list[tuple[int, str, str, dict[str, Any]]]] = {}  # uuid -> stack of begun slices
    interned: dict[int, dict[str, dict[int, str]]] = {}  # sequence -> kind -> iid -> string
    for index, body in enumerate(packets(path)):
        try:
            packet = packet_class.FromString(body)
        except (DecodeError, RuntimeError, ValueError) as error:  # protobuf's refusals
            raise InputError(path, f"not a Perfetto trace: packet {index} does not decode ({error})") from None
        sequence = packet.trusted_packet_sequence_id
        if packet.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED:
            interned.pop(sequence, None)
        if packet.HasField("interned_data"):
            _intern(interned.setdefault(sequence, {}), packet.interned_data)
        if packet.HasField("track_descriptor"):
            yield from _track(packet.track_descriptor, tracks)
        if packet.HasField("track_event"):
            yield from _track_event(path, packet, interned.get(sequence, {}), tracks, open_slices)


def _intern(table: dict[str, dict[int, str]], data: Any) -> None:
    for kind in ("event_categories", "event_names", "debug_annotation_names"):
        strings = table.setdefault(kind, {})
        for entry in getattr(data, kind):
            strings[entry.iid] = entry.name


def _track(descriptor: Any, tracks: dict[int, tuple[int, int | str]]) -> Iterator[dict[str, Any]]:
    if descriptor.HasField("thread"):
        thread = descriptor.thread
        tracks[descriptor.uuid] = (thread.pid, thread.tid)
        name = thread.thread_name or descriptor.name
        if name:
            yield {"ph": "M", "name": "thread_name", "pid": thread.pid, "tid": thread.tid, "args": {"name": name}}
    elif descriptor.HasField("process"):
        process = descriptor.process
        tracks[descriptor.uuid] = (process.pid, process.pid)
        name = process.process_name or descriptor.name
        if name:
            yield {"ph": "M", "name": "process_name", "pid": process.pid, "args": {"name": name}}
    else:  # a lane of its parent's process (a GPU stream, an async track), named by its own name
        pid = tracks.get(descriptor.parent_uuid, (0, 0))[0]
        lane = descriptor.name or str(descriptor.uuid)
        tracks[descriptor.uuid] = (pid, lane)
        yield {"ph": "M", "name": "thread_name", "pid": pid, "tid": lane, "args": {"name": lane}}


def _track_event(path: Path, packet: Any, strings: dict[str, dict[int, str]], tracks: dict[int, tuple[int, int | str]],
                 open_slices: dict[int, list[tuple[int, str, str, dict[str, Any]]]]) -> Iterator[dict[str, Any]]:
    event = packet.track_event
    stack = open_slices.setdefault(event.track_uuid, [])
    pid, tid = tracks.get(event.track_uuid, (0, event.track_uuid))
    if event.type == TYPE_SLICE_END:
        if not stack:  # an end without its begin (the trace started inside the slice): nothing to close
            return
        start, name, category, args = stack.pop()
        yield {"ph": "X", "name": name, "cat": category, "pid": pid, "tid": tid, "ts": start / 1000,
               "dur": max(0, packet.timestamp - start) / 1000, "args": args}
        return
    name = event.name or strings.get("event_names", {}).get(event.name_iid, "")
    categories = list(event.categories) or [strings.get("event_categories", {}).get(i, "") for i in event.category_iids]
    category = categories[0] if categories else ""
    args = {}
    for annotation in event.debug_annotations:
        key = annotation.name or strings.get("debug_annotation_names", {}).get(annotation.name_iid, "")
        args[key] = _annotation_value(annotation)
    if event.type == TYPE_SLICE_BEGIN:
        if len(stack) >= MAX_OPEN_SLICES:
            raise InputError(path, f"not a usable Perfetto trace: slices nested deeper than {MAX_OPEN_SLICES:,} on "
                                   f"track {event.track_uuid}")
        stack.append((packet.timestamp, name, category, args))
    elif event.type == TYPE_INSTANT:
        yield {"ph": "i", "s": "t", "name": name, "cat": category, "pid": pid, "tid": tid,
               "ts": packet.timestamp / 1000, "args": args}


def _annotation_value(annotation: Any) -> Any:
    for field in ("string_value", "int_value", "uint_value", "double_value", "bool_value"):
        if annotation.HasField(field):
            return getattr(annotation, field)
    return None
