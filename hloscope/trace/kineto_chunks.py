"""Fast path for Kineto / Chrome JSON: cut the `traceEvents` array into chunks of whole events and decode each chunk
with msgspec into small typed structs that hold only the fields hloscope reads (the rest is skipped in C).

How the cuts stay correct: a chunk ends at a `}` followed by `,` and the `{` of the next event (the last such place
in the bytes read so far). Every chunk must decode on its own as `[chunk]`. The first chunk starts right after the
array's `[`; if a cut fell inside a string, the chunk would end in an unterminated string, and if it fell inside a
nested object, its brackets would not balance: either way it does not decode, and the cut before it is tried. So a
chunk that decodes holds whole events at the array's own depth and ends between two events, and by induction so does
every chunk. The bytes before the array are checked as `prefix]}` and the bytes after the last cut as
`{"traceEvents": [tail`. Anything unexpected (values of odd types, a syntax error, no usable cut in 64 MB) raises
`GiveUp`, and the caller re-reads the file with the streaming ijson parser, which reports errors precisely.

Memory: one block (4 MB) plus the structs of one chunk and the text they were decoded from (their input shapes are
views of it); a chunk larger than 64 MB makes the fast path give up.
"""

# No `from __future__ import annotations` here: msgspec reads the struct annotations below at class creation.
import io
import re
import threading
from collections.abc import Iterator
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    # What _types() makes: the decoders of a chunk of events and of the rest of the document (its `traceEvents`), and
    # the classes of a decoded event and of its args.
    _Decoders = tuple[ModuleType, msgspec.json.Decoder[list[Any]], msgspec.json.Decoder[Any], type, type]

BLOCK_BYTES = 4 << 20
MAX_PENDING_BYTES = 64 << 20
MAX_CUT_ATTEMPTS = 8
_LOOKAHEAD = 256  # bytes of whitespace allowed between "}," and the next event's "{"
_ARRAY_START = re.compile(rb'(?<!\\)"traceEvents"\s*:\s*\[')
_BYTE = re.compile(r" ?\(byte (\d+)\)")


class GiveUp(Exception):
    """The fast path cannot decode this file; use the streaming parser instead."""


class Malformed(Exception):
    """The end of the document is not valid JSON: `message`, and where: `offset`, the error's byte offset in the
    (decompressed) text, None if unknown. The caller turns it into a line and column by reading the text again: on
    the fast path, counting newlines as it goes would cost every trace ~10 ms (35 MB of JSON) for the rare error."""

    def __init__(self, message: str, truncated: bool, offset: int | None = None):
        super().__init__(message)
        self.message, self.truncated, self.offset = message, truncated, offset


@lru_cache(maxsize=1)
def _types() -> "_Decoders":
    """msgspec structs for the fields hloscope reads, built at the first JSON trace read."""
    # gc=False: these hold no containers, and millions of them need not be tracked by the cycle collector.
    class Args(msgspec.Struct, gc=False):
        correlation: int | str | None = None
        correlation_id: int | str | None = None
        stream: int | str | None = None
        hlo_op: str | None = None
        hlo_module: str | None = None
        step_num: int | str | None = None
        name: str | None = None  # process / thread name of "M" events
        # the op's input shapes (torch.profiler with record_shapes=True) as their JSON text: building the nested lists
        # only to write them out again cost more than the rest of the event (kineto._shapes_text)
        input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")

    class TraceEvent(msgspec.Struct, gc=False):  # (in the order Kineto writes the keys, which msgspec tries first)
        ph: str | None = None
        cat: str | None = None
        name: str | int | float | None = None
        pid: int | str | None = None
        tid: int | str | None = None
        ts: float | None = None
        dur: float | None = None
        args: Args | None = None

    class Document(msgspec.Struct):
        traceEvents: list[TraceEvent] = []

    return msgspec, msgspec.json.Decoder(list[TraceEvent]), msgspec.json.Decoder(Document), TraceEvent, Args


def event_chunks(stream: io.BufferedIOBase) -> Iterator[list[Any]]:
    """Lists of decoded events, in file order, read from a binary stream positioned at the start of the document."""
    msgspec, chunk_decoder, document_decoder, _, _ = _types()
    errors = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError)
    # `data` always starts with "[": each chunk is decoded in place as data[: cut + 1] + "]" by overwriting its ","
    # with "]", and the next chunk then starts at that byte, rewritten to "[". Only the short remainder is copied, into
    # a new bytearray: the input shapes' Raw texts of the chunk hold views of this one, which may then not be resized.
    with _ReadAhead(stream, BLOCK_BYTES) as reader:
        before, after = _read_through_array_start(reader, msgspec)
        data = bytearray(b"[") + after  # data[0] stands for the array's own "["
        consumed = len(before) - 1  # offset of data[0] in the text
        while True:
            decoded = _decode_up_to_last_cut(data, chunk_decoder, errors)
            if decoded is not None:
                events, cut = decoded
                yield events
                consumed += cut + 1
                data = data[cut + 1 :]
                data[0] = ord("[")
            block = reader.read()
            if not block:
                break
            data += block
            if len(data) > MAX_PENDING_BYTES:
                raise GiveUp("no usable event boundary in 64 MB")
    head = b'{"traceEvents": '
    try:
        yield document_decoder.decode(head + bytes(data)).traceEvents
    except msgspec.DecodeError as error:  # the rest of the file is not JSON: say so, and where
        message = str(error)
        if "truncated" in message:
            raise Malformed(message, truncated=True) from error
        byte = _BYTE.search(message)
        if byte is None or int(byte.group(1)) < len(head):
            raise GiveUp(message) from error
        offset = consumed + int(byte.group(1)) - len(head)
        raise Malformed(_BYTE.sub("", message).replace("JSON is malformed: ", ""), False, offset) from error
    except errors as error:
        raise GiveUp(str(error)) from error


class _ReadAhead:
    """Reads (and for .gz, decompresses) the next block in a thread while the caller decodes this one: zlib and file
    reads release the GIL, so the two overlap on a second core. Errors of the read (a truncated gzip) are raised by
    `read()` in the caller, as if it had read itself; leaving the `with` waits for a read in flight. One plain thread
    per block (a few per trace): concurrent.futures would cost `trace stats` ~3 ms of imports (logging, queue)."""

    def __init__(self, stream: io.BufferedIOBase, size: int):
        self._stream = stream
        self._size = size
        self._start_reading()

    def _start_reading(self) -> None:
        self._block = b""
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._read_block, name="hloscope-read", daemon=True)
        self._thread.start()

    def _read_block(self) -> None:
        try:
            self._block = self._stream.read(self._size)
        # A thread body: any error is raised again in the caller by read()
        except BaseException as error:  # noqa: BLE001
            self._error = error

    def read(self) -> bytes:
        self._thread.join()
        if self._error is not None:
            raise self._error
        block = self._block
        if block:
            self._start_reading()
        return block

    def __enter__(self) -> "_ReadAhead":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._thread.join()


def _decode_up_to_last_cut(data: bytearray, decoder: "msgspec.json.Decoder[list[Any]]",
                           errors: tuple[type[BaseException], ...]) -> tuple[list[Any], int] | None:
    """Decode data[: cut + 1] + "]" for the last cut that works: `}` `,` (whitespace) `{`; (events, cut), or None
    when there is no candidate yet. A cut inside a string or a nested object fails to decode and the one before it is
    tried; after MAX_CUT_ATTEMPTS failures, give up."""
    end = len(data)
    failures = 0
    while failures < MAX_CUT_ATTEMPTS:
        cut = data.rfind(b"},", 0, end)
        if cut < 0:
            return None  # no candidate yet: read more
        end = cut
        following = data[cut + 2 : cut + 2 + _LOOKAHEAD].lstrip(b" \t\r\n")
        if not following.startswith(b"{"):
            continue  # not followed by another event (or not read yet)
        data[cut + 1] = ord("]")
        try:
            return decoder.decode(memoryview(data)[: cut + 2]), cut
        except errors as error:
            data[cut + 1] = ord(",")
            failures += 1
            last_error = error
    raise GiveUp(str(last_error))


def _read_through_array_start(reader: _ReadAhead, msgspec: ModuleType) -> tuple[bytes, bytes]:
    """Read until the `[` of "traceEvents"; check the bytes before it; return (the bytes through it, what follows)."""
    data = b""
    while True:
        match = _ARRAY_START.search(data)
        if match:
            break
        block = reader.read()
        if not block or len(data) > MAX_PENDING_BYTES:
            raise GiveUp("no traceEvents array near the start")
        data += block
    try:
        msgspec.json.decode(data[: match.end()] + b"]}")
    except (msgspec.DecodeError, UnicodeDecodeError) as error:
        raise GiveUp(str(error)) from error
    return data[: match.end()], data[match.end() :]
