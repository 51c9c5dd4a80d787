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

Memory: one block (4 MB) plus the structs of one chunk; a chunk larger than 64 MB makes the fast path give up.
"""

# No `from __future__ import annotations` here: msgspec reads the struct annotations below at class creation.
import io
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import msgspec

    # The decoders of _types(): a chunk of events, and the rest of the document (its `traceEvents`).
    _Decoders = tuple[ModuleType, msgspec.json.Decoder[list[Any]], msgspec.json.Decoder[Any]]

BLOCK_BYTES = 4 << 20
MAX_PENDING_BYTES = 64 << 20
MAX_CUT_ATTEMPTS = 8
_LOOKAHEAD = 256  # bytes of whitespace allowed between "}," and the next event's "{"
_ARRAY_START = re.compile(rb'(?<!\\)"traceEvents"\s*:\s*\[')
_BYTE = re.compile(r" ?\(byte (\d+)\)")


class GiveUp(Exception):
    """The fast path cannot decode this file; use the streaming parser instead."""


class Malformed(Exception):
    """The end of the document is not valid JSON: `message`, and where (1-based line and column; None if unknown)."""

    def __init__(self, message: str, truncated: bool, line: int | None = None, col: int | None = None):
        super().__init__(message)
        self.message, self.truncated, self.line, self.col = message, truncated, line, col


class _Position:
    """Line counting over the text already consumed, so that an error found at the end can say line:column."""

    def __init__(self, consumed: bytes):
        self.offset = len(consumed)  # absolute offset of data[0] in the text
        self.lines = consumed.count(b"\n")  # newlines before it
        self.last_newline = consumed.rfind(b"\n")  # absolute offset of the last of them (-1: none)

    def advance(self, data: bytearray, count: int) -> None:
        newlines = data.count(b"\n", 0, count)
        if newlines:
            self.lines += newlines
            self.last_newline = self.offset + data.rfind(b"\n", 0, count)
        self.offset += count

    def locate(self, data: bytearray, index: int) -> tuple[int, int]:
        newlines = data.count(b"\n", 0, index)
        last = data.rfind(b"\n", 0, index)
        last_newline = self.offset + last if last >= 0 else self.last_newline
        return self.lines + newlines + 1, self.offset + index - last_newline


@lru_cache(maxsize=1)
def _types() -> "_Decoders":
    """msgspec structs for the fields hloscope reads, built lazily (msgspec is optional)."""
    import msgspec

    # gc=False: these hold no containers, and millions of them need not be tracked by the cycle collector.
    class Args(msgspec.Struct, gc=False):
        correlation: int | str | None = None
        correlation_id: int | str | None = None
        stream: int | str | None = None
        hlo_op: str | None = None
        hlo_module: str | None = None
        step_num: int | str | None = None
        name: str | None = None  # process / thread name of "M" events

    class TraceEvent(msgspec.Struct, gc=False):
        ph: str | None = None
        cat: str | None = None
        name: str | int | float | None = None
        ts: float | None = None
        dur: float | None = None
        pid: int | str | None = None
        tid: int | str | None = None
        args: Args | None = None

    class Document(msgspec.Struct):
        traceEvents: list[TraceEvent] = []

    return msgspec, msgspec.json.Decoder(list[TraceEvent]), msgspec.json.Decoder(Document)


def event_chunks(stream: io.BufferedIOBase) -> Iterator[list[Any]]:
    """Lists of decoded events, in file order, read from a binary stream positioned at the start of the document."""
    try:
        msgspec, chunk_decoder, document_decoder = _types()
    except ImportError as error:
        raise GiveUp("msgspec is not installed") from error
    errors = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError)
    # `data` always starts with "[": each chunk is decoded in place as data[: cut + 1] + "]" by overwriting its ","
    # with "]", and the next chunk then starts at that byte, rewritten to "[". Only the short remainder is copied.
    with _ReadAhead(stream, BLOCK_BYTES) as reader:
        before, after = _read_through_array_start(reader, msgspec)
        data = bytearray(b"[") + after  # data[0] stands for the array's own "["
        position = _Position(before[:-1])
        while True:
            decoded = _decode_up_to_last_cut(data, chunk_decoder, errors)
            if decoded is not None:
                events, cut = decoded
                yield events
                data[cut + 1] = ord("[")
                position.advance(data, cut + 1)
                del data[: cut + 1]
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
        line, col = position.locate(data, int(byte.group(1)) - len(head))
        raise Malformed(_BYTE.sub("", message).replace("JSON is malformed: ", ""), False, line, col) from error
    except errors as error:
        raise GiveUp(str(error)) from error


class _ReadAhead:
    """Reads (and for .gz, decompresses) the next block in a thread while the caller decodes this one: zlib and file
    reads release the GIL, so the two overlap on a second core. Errors of the read (a truncated gzip) are raised by
    `read()` in the caller, as if it had read itself; leaving the `with` waits for a read in flight."""

    def __init__(self, stream: io.BufferedIOBase, size: int):
        self._stream = stream
        self._size = size
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hloscope-read")
        self._next = self._pool.submit(stream.read, size)

    def read(self) -> bytes:
        block = self._next.result()
        if block:
            self._next = self._pool.submit(self._stream.read, self._size)
        return block

    def __enter__(self) -> "_ReadAhead":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pool.shutdown(wait=True)


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
            with memoryview(data) as view:
                return decoder.decode(view[: cut + 2]), cut
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
