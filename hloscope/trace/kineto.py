"""Stream PyTorch Kineto / Chrome trace JSON (`.json`, `.json.gz`) into `Event`s without loading the document.

Also reads JAX's `<host>.trace.json.gz`, the Chrome-trace export of an xplane: its process names ("/device:GPU:0",
"/host:CPU") tell device from host, and XLA events carry `hlo_op` / `hlo_module` in their args.

Choice of JSON library, measured on the 109,123-event A100 fixture (35 MB of JSON, docs/trace.md): `json.load` 0.72 s
and 187 MB peak RSS, orjson 0.45 s / 246 MB, ijson (yajl2_c) streaming 0.39 s / 14 MB, msgspec decoding typed structs
of only the needed fields 0.12 s (whole document: 100 MB). hloscope uses msgspec on chunks of whole events (fast and
bounded, hloscope/trace/kineto_chunks.py) and falls back to ijson streaming when a file does not suit chunking.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from hloscope import files
from hloscope.errors import InputError, MissingDependency, reading, warn
from hloscope.files import INT64_MAX, INT64_MIN, int64
from hloscope.trace import kineto_chunks
from hloscope.trace.categories import category_for
from hloscope.trace.model import (
    ANNOTATION,
    FLOW_CORRELATION_BASE,
    HOST_OP,
    KERNEL,
    MAX_EVENT_US,
    MAX_TIME_US,
    MEMCPY,
    MEMSET,
    OTHER,
    RUNTIME,
    SOURCE_NAMES,
    STEP,
    CorrelationIds,
    Event,
    Flaws,
    device_line_executes,
    execution_kind,
)
from hloscope.trace.perfetto import trace_dicts

# Imports inside functions: the streaming fallback only, kept out of `trace stats` start-up.

UINT64_MAX = 2**64 - 1  # rocprofiler writes unsigned 64-bit correlation ids

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# A process, thread or stream id as a trace writes it (Kineto: ints; other writers: strings).
_Id = int | str | None

# Kineto's activity categories (libkineto ActivityType names), and those of PyTorch 1.8/1.9 traces (2021): "Kernel",
# "Memcpy", "Memset", "Runtime", "Operator". MTIA's device queue is "mtia_ccp_events" (libkineto aliases it to
# CONCURRENT_KERNEL); Habana's "hpu_op" is a host-side runtime event (libkineto: HPU_OP = RUNTIME).
_DEVICE_CATS: dict[str | None, str] = {"kernel": KERNEL, "gpu_memcpy": MEMCPY, "gpu_memset": MEMSET, "Kernel": KERNEL, "Memcpy": MEMCPY,
                "Memset": MEMSET, "mtia_ccp_events": KERNEL}
# Events of a device category that are not kernels, by (category, name): MTIA's queue also records its DMA transfers
# (`dma_request`, with args.direction) and its event record / wait markers (a wait is the queue idle until another
# stream reaches an event: not work).
_DEVICE_EVENT_KINDS: dict[tuple[str | None, str], str] = {
    ("mtia_ccp_events", "dma_request"): MEMCPY,
    ("mtia_ccp_events", "event_record"): ANNOTATION,
    ("mtia_ccp_events", "event_wait"): ANNOTATION,
}
_DEVICE_EVENT_KIND_CATS = frozenset(category for category, _ in _DEVICE_EVENT_KINDS)
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver", "mtia_runtime", "xpu_runtime", "xpu_driver",
                 "privateuse1_runtime", "privateuse1_driver", "Runtime", "hpu_op"}
# Host categories of PyTorch's profiler whose kind the category alone decides (step markers aside).
_KINETO_HOST_CATS: dict[str | None, str] = {"cpu_op": HOST_OP, "Operator": HOST_OP, "python_function": HOST_OP, "user_annotation": ANNOTATION,
                     **dict.fromkeys(_RUNTIME_CATS, RUNTIME)}
_STEP_NAME = re.compile(r"ProfilerStep#(\d+)$")
_INTEGER = re.compile(r"[+-]?\d+")
# Categories known not to be device executions although their events may name a stream: device-side sync markers,
# annotations, profiler ranges and bookkeeping.
_NOT_DEVICE_WORK_CATS = {"cuda_sync", "gpu_user_annotation", "cuda_profiler_range", "overhead", "Trace", "ac2g",
                         "external_correlation", "cpu_instant_event", "mtia_insight", "glow_runtime", "collective_comm"}
# A category that no rule knows looks like device work when it names one, or when its events carry a stream.
_DEVICE_LIKE_CAT = re.compile(r"kernel|memcpy|memset|gpu|device|ccp|[hnxt]pu_|accelerator", re.IGNORECASE)
_warned_unclassified: set[str] = set()
_NO_ARGS: dict[str, Any] = {}
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
# Above this much JSON text, a syntax error the streaming parser finds is reported without line:column (finding it
# would mean loading the whole text).
_LOCATE_ERRORS_BELOW = 64 << 20
# The longest JSON token (a string or a number) the streaming parser may meet: yajl and ijson hold a whole token in
# memory, so a 2 GB string (2 MB of gzip) would take gigabytes. A real trace's longest token is a kernel name or a
# Python stack, well under 1 MB.
MAX_TOKEN_BYTES = 16 << 20
# ijson's read size: yajl re-scans a token that spans reads from its start on each read, so a long token costs
# (token / read size) scans of itself (a 16 MB string of escaped quotes: 4 scans, ~3 s; with ijson's default 64 KB
# reads, 256 scans and minutes).
_READ_BYTES = 4 << 20


def _ijson(name: str = "yajl2_c") -> tuple[Any, type[Exception], type[Exception]]:
    """(backend, JSONError, IncompleteJSONError): the yajl2_c backend when built, else ijson's default."""
    try:
        import ijson
    except ImportError as error:  # pragma: no cover - ijson is a declared dependency
        raise MissingDependency("ijson", "to stream Kineto JSON traces") from error
    try:
        backend = ijson.get_backend(name)
    except ImportError:  # a platform without the C extension: the pure-Python backend is slower but correct
        backend = ijson
    return backend, ijson.JSONError, ijson.IncompleteJSONError


# yajl's integers are 64-bit signed: it refuses larger ones ("integer overflow"), which are valid JSON (rocprofiler
# writes 64-bit unsigned ids). Such files are re-read with ijson's pure-Python tokenizer, which gives Python ints.
_YAJL_INTEGER_OVERFLOW = "integer overflow"


def open_trace_bytes(path: Path) -> io.BufferedIOBase:
    """Open a .json or .json.gz file for binary reading (gzip detected from the magic bytes, not the name), past a
    UTF-8 byte order mark if the text starts with one (JSON parsers may ignore it, RFC 8259; Python's json does)."""
    raw: Any = files.open_binary(path, "a trace file", "save the trace to a file first")  # a FIFO: refused, never opened for reading
    try:
        magic = raw.peek(2)[:2]
        if magic != _GZIP_MAGIC:
            return _past_byte_order_mark(raw)
        stream = gzip.GzipFile(fileobj=raw, mode="rb")
        stream.myfileobj = raw  # closed with the gzip stream (as gzip.open(path) does with the file it opens)
    except BaseException:
        raw.close()
        raise
    return _past_byte_order_mark(stream)


def _past_byte_order_mark(stream: Any) -> io.BufferedIOBase:
    try:
        if stream.peek(len(_UTF8_BOM))[: len(_UTF8_BOM)] == _UTF8_BOM:
            stream.read(len(_UTF8_BOM))
    except BaseException:  # a corrupt gzip header: the caller reports it; the file is not left open
        stream.close()
        raise
    return stream  # type: ignore[no-any-return]


def _sniff_prefix(path: Path, stream: io.BufferedIOBase) -> str:
    """'traceEvents.item' for {"traceEvents": [...]}, 'item' for a bare array; refuse anything that is not JSON."""
    head = stream.peek(256)[:256] if hasattr(stream, "peek") else b""
    stripped = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if not head:
        raise InputError(path, "empty file: not a trace")
    if stripped.startswith(b"{"):
        return "traceEvents.item"
    if stripped.startswith(b"["):
        return "item"
    raise InputError(path, "not a JSON trace: it does not start with '{' or '['")


def _locate_json_error(path: Path) -> tuple[int | None, int | None, str | None]:
    """Line and column of a JSON syntax error, found with the standard library on files whose (decompressed) text is
    small enough to load; larger ones are reported without a position."""
    try:
        with open_trace_bytes(path) as stream:
            text = stream.read(_LOCATE_ERRORS_BELOW + 1)
        if len(text) > _LOCATE_ERRORS_BELOW:
            return None, None, None
        json.loads(text)
    except json.JSONDecodeError as error:
        return error.lineno, error.colno, error.msg
    except UnicodeDecodeError as error:
        line = text.count(b"\n", 0, error.start) + 1
        return line, error.start - text.rfind(b"\n", 0, error.start), "bytes that are not UTF-8 text"
    except (OSError, EOFError, zlib.error, ValueError):
        return None, None, None
    return None, None, None


def _line_and_column(path: Path, offset: int | None) -> tuple[int | None, int | None]:
    """1-based line and column (in bytes) of byte `offset` of the trace's text, read again (for an error message)."""
    if offset is None:
        return None, None
    lines, last_newline, read = 0, -1, 0
    try:
        with open_trace_bytes(path) as stream:
            while read < offset:
                block = stream.read(min(_READ_BYTES, offset - read))
                if not block:
                    return None, None
                newlines = block.count(b"\n")
                if newlines:
                    lines += newlines
                    last_newline = read + block.rfind(b"\n")
                read += len(block)
    except (OSError, EOFError, zlib.error):
        return None, None
    return lines + 1, offset - last_newline


def _first_line(error: BaseException) -> str:
    message = error.args[0] if error.args else ""
    if isinstance(message, bytes):  # yajl's messages come as bytes, with the offending text on later lines
        message = message.decode("utf-8", "replace")
    text = str(message).strip().splitlines()
    first = text[0].strip() if text else type(error).__name__
    return "bytes that are not UTF-8 text" if "UTF8" in first else first


def iter_events(path: str | os.PathLike[str], flaws: Flaws | None = None, lean: bool = False) -> Iterator[Event]:
    """Every complete (ph "X") event of a Kineto / Chrome JSON trace, in file order.

    Raises InputError (one line, naming the file) for empty, truncated, corrupt or non-trace input. Memory does not
    grow with the file: one block of the file and one chunk of events at a time, plus the process/thread name tables.
    The msgspec fast path (hloscope/trace/kineto_chunks.py) is tried first; if it gives up, the file is read again
    with ijson, skipping the events already produced. Step markers whose number does not fit 64 bits are counted in
    `flaws` when given (the caller warns), else warned about here. `lean` (with `flaws`): PyTorch's host ops and
    annotations whose times are possible are counted in `flaws.counted` rather than produced, on the fast path.
    """
    path = Path(path)
    produced = 0
    with _open_for_chunks(path) as stream:
        try:
            with _as_input_errors(path):
                prefix = _sniff_prefix(path, stream)
        except kineto_chunks.GiveUp:  # isal could not read the start: the reading below reports why
            prefix = None
        if prefix == "traceEvents.item":
            builder = _EventBuilder(lean=lean and flaws is not None)
            try:
                with _as_input_errors(path):
                    for chunk in kineto_chunks.event_chunks(stream):
                        yield from builder.from_structs(chunk)
                if builder.items == 0:
                    raise InputError(path, "not a trace: no 'traceEvents' list (or it is empty)")
                _warn_unclassified(path, builder, flaws)
                if flaws is not None:
                    flaws.counted += builder.counted
                return
            except kineto_chunks.Malformed as error:
                if error.truncated:
                    raise InputError(path, "truncated JSON: the file ends in the middle of the trace") from error
                line, col = _line_and_column(path, error.offset)
                raise InputError(path, f"invalid JSON: {error.message}", line, col) from error
            except kineto_chunks.GiveUp:
                produced = builder.built  # the streaming parser skips them, those counted among them too
                if flaws is not None:
                    flaws.counted += builder.counted
    with _open(path) as stream:
        with _as_input_errors(path):
            prefix = _sniff_prefix(path, stream)
        yield from _stream_with_ijson(path, stream, prefix, skip=produced, flaws=flaws)


def _open(path: Path) -> io.BufferedIOBase:
    with reading(path, "a trace file"):
        return open_trace_bytes(path)


def _open_for_chunks(path: Path) -> io.BufferedIOBase:
    """The file for the msgspec fast path: a gzip file through ISA-L's inflate (isal.igzip: 35 MB of the A100
    fixture in 0.01 s against zlib's 0.05 s) when isal is installed, otherwise as `_open` opens it."""
    stream = _open(path)
    if not isinstance(stream, gzip.GzipFile):
        return stream
    try:
        from isal import igzip
    except ImportError:
        return stream
    stream.close()
    with reading(path, "a trace file"):
        fast = _IsalGzip(igzip.open(path, "rb"))  # type: ignore[no-untyped-call]  # (isal's open has no annotations)
    try:
        return _past_byte_order_mark(fast)
    except kineto_chunks.GiveUp:  # _past_byte_order_mark closed it
        return _open(path)


class _IsalGzip(io.BufferedIOBase):
    """isal's gzip reader, whose errors (a truncated or corrupt file) become `GiveUp`: the file is then read again
    with the standard library's gzip and ijson, which report it with the same message, line and column as always."""

    def __init__(self, stream: io.BufferedIOBase):
        self._stream = stream

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        try:
            return self._stream.read(size)
        except Exception as error:
            raise kineto_chunks.GiveUp(f"isal: {error}") from error

    def peek(self, size: int = 0) -> bytes:
        try:
            return self._stream.peek(size)  # type: ignore[attr-defined,no-any-return]
        except Exception as error:
            raise kineto_chunks.GiveUp(f"isal: {error}") from error

    def close(self) -> None:
        self._stream.close()
        super().close()


@contextlib.contextmanager
def _as_input_errors(path: Path) -> Iterator[None]:
    """Decompression errors, whichever parser meets them, become one-line InputErrors."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise InputError(path, f"truncated or corrupt gzip data ({_first_line(error)})") from error


class TokenTooLong(Exception):
    """The JSON text runs longer than MAX_TOKEN_BYTES without a string ending: one token that would be held whole."""


class _TokenGuard(io.RawIOBase):
    """A read-through wrapper that refuses a token longer than `limit` before the parser buffers it.

    It counts the bytes since the last `"` not preceded by a backslash: inside a string that is the string's length so
    far; outside strings, a number's or whitespace's (a trace has names every few hundred bytes). Escaped quotes never
    reset the count, so a string of `\\"` repeats is measured too. O(1) Python work per block."""

    def __init__(self, stream: io.BufferedIOBase, limit: int = MAX_TOKEN_BYTES):
        self._stream = stream
        self._limit = limit
        self._since_quote = 0
        self._last = b""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        block = self._stream.read(size)
        if block:
            self._count(block)
        return block

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        block = self.read(len(view))
        view[: len(block)] = block
        return len(block)

    def _count(self, block: bytes) -> None:
        clean = (self._last + block).replace(b'\\"', b"")
        quote = clean.rfind(b'"')
        if quote < 0:  # no unescaped quote in this block
            self._since_quote += len(block)
        else:
            self._since_quote = len(clean) - quote - 1
        self._last = block[-1:] if block[-1:] == b"\\" else b""
        if self._since_quote > self._limit:
            raise TokenTooLong(self._since_quote)


def _stream_with_ijson(path: Path, stream: io.BufferedIOBase, prefix: str, skip: int,
                       backend: str = "yajl2_c", flaws: Flaws | None = None) -> Iterator[Event]:
    ijson, json_error, incomplete_json_error = _ijson(backend)
    guarded = _TokenGuard(stream)
    builder = _EventBuilder()
    try:
        with _as_input_errors(path):
            for raw in _event_items(path, ijson, guarded, top_is_array=prefix == "item"):
                event = builder.from_dict(path, raw, build=builder.complete_events >= skip)
                if event is not None:
                    yield event
        if builder.items == 0:
            raise InputError(path, "not a trace: no 'traceEvents' list (or it is empty)")
        _warn_unclassified(path, builder, flaws)
    except json_error as error:
        if backend != "python" and _YAJL_INTEGER_OVERFLOW in _first_line(error):
            # every complete event counted so far was produced (or skipped as already produced)
            with _open(path) as again:
                yield from _stream_with_ijson(path, again, prefix, max(skip, builder.complete_events), "python", flaws)
            return
        if isinstance(error, incomplete_json_error) and "premature EOF" in str(error):
            raise InputError(path, "truncated JSON: the file ends in the middle of the trace") from error
        line, col, message = _locate_json_error(path)
        detail = message or _first_line(error)
        digits = re.search(r"[0-9]{100,}", detail)
        if digits:  # Python's int() refuses more than 4,300 digits: ijson reports it as an unexpected symbol
            raise InputError(path, f"not a trace: a number of {len(digits.group()):,} digits or more", line,
                             col) from error
        shown = detail if len(detail) <= 200 else detail[:200] + "..."
        raise InputError(path, f"invalid JSON: {shown}", line, col) from error
    except UnicodeDecodeError as error:
        raise InputError(path, "invalid JSON: bytes that are not UTF-8 text") from error
    except TokenTooLong:
        raise InputError(path, f"not a trace: a JSON token (string or number) longer than {MAX_TOKEN_BYTES >> 20} MB; "
                               "refusing rather than holding it in memory (a gzip bomb?)") from None


BAD_STEP_MARKERS = "step marker(s) with a step number beyond 64 bits: read as plain events, not steps"


def iter_perfetto_events(path: str | os.PathLike[str], flaws: Flaws | None = None) -> Iterator[Event]:
    """Every complete event of a Perfetto protobuf trace (hloscope.trace.perfetto), built as the JSON reader builds
    a Kineto trace's, so that both forms of one profile give the same events and the same statistics."""
    path = Path(path)
    builder = _EventBuilder()
    for raw in trace_dicts(path):
        event = builder.from_dict(path, raw)
        if event is not None:
            yield event
    if builder.complete_events == 0:
        raise InputError(path, "not a trace: no complete slice in this Perfetto trace")
    _warn_unclassified(path, builder, flaws)


def _warn_unclassified(path: Path, builder: _EventBuilder, flaws: Flaws | None = None) -> None:
    """One warning per file: complete events that look like device work but that no category rule reads as such
    (a vendor's device category hloscope does not know yet) are counted as host events, not device time. The step
    markers whose number does not fit int64 (`ProfilerStep#` and 5,000 digits, not steps) go into `flaws` (said in
    the caller's one line about the file's impossible values), or, without it, into another warning."""
    if flaws is not None and builder.bad_steps:
        flaws.read_otherwise[BAD_STEP_MARKERS] += builder.bad_steps
        builder.bad_steps = 0
    unclassified = builder.unclassified
    if str(path) in _warned_unclassified or not (unclassified or builder.bad_steps):
        return
    _warned_unclassified.add(str(path))
    if builder.bad_steps:
        warn(f"{path}: {builder.bad_steps:,} {BAD_STEP_MARKERS}")
    if not unclassified:
        return
    total = sum(unclassified.values())
    listed = ", ".join(f"{category!r}: {count:,}" for category, count in sorted(unclassified.items(), key=lambda i: -i[1]))
    warn(f"{path}: {total:,} event(s) look like device work but no rule classifies their category ({listed}): "
         "counted as host events, not device time")


# Trace events nest a few levels (event -> args -> shape lists). Deeper input is not a trace, and building it would
# cost memory quadratic in the depth inside ijson's item builder, so the streaming parser stops there.
MAX_DEPTH = 64


def _event_items(path: Path, ijson: Any, stream: _TokenGuard, top_is_array: bool) -> Iterator[Any]:
    """The items of the trace's event list, built from ijson's token stream (C tokenizer) with a depth limit;
    the rest of the document is still tokenized, so truncation and syntax errors after the list are found."""
    import ijson as ijson_package

    depth = 0
    in_events = False
    events_depth = 1 if top_is_array else 2
    top_key = None
    builder = None
    for kind, value in ijson.basic_parse(stream, use_float=True, buf_size=_READ_BYTES):
        opening = kind == "start_map" or kind == "start_array"
        if opening:
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError(path, f"not a trace: JSON nested more than {MAX_DEPTH} levels deep")
        elif kind == "end_map" or kind == "end_array":
            depth -= 1
        if builder is not None:  # inside one item
            builder.event(kind, value)
            if depth == events_depth:
                yield builder.value
                builder = None
        elif in_events:
            if depth < events_depth:  # the list's own end
                in_events = False
            elif opening:
                builder = ijson_package.ObjectBuilder()
                builder.event(kind, value)
            else:
                yield value  # a scalar item: refused by the caller
        elif kind == "map_key" and depth == 1:
            top_key = value
        elif kind == "start_array" and depth == events_depth and (top_is_array or top_key == "traceEvents"):
            in_events = True


class _EventBuilder:
    """Turns decoded trace items (ijson dicts or msgspec structs) into Events, with the tables they need."""

    def __init__(self, lean: bool = False) -> None:
        self.lean = lean  # from_structs counts PyTorch's host ops and annotations with possible times, builds none
        self.counted = 0
        self.items = 0
        self.complete_events = 0
        self.process_names: dict[_Id, str] = {}  # pid -> name, from "M" events (JAX writes them first, Kineto last)
        self.thread_names: dict[tuple[_Id, _Id], str] = {}  # (pid, tid) -> name
        self.lanes: dict[_Id, str] = {}  # stream -> "stream N", built once
        self.pid_names: dict[_Id, str] = {}  # pid -> str(pid) for processes without a name
        self.tid_names: dict[tuple[_Id, _Id], str] = {}  # (pid, tid) -> "thread N" for threads without a name
        # (pid, tid or stream, on device) -> (process, lane); cleared when names arrive
        self.places: dict[tuple[_Id, _Id, bool], tuple[str, str]] = {}
        self.unclassified: dict[str, int] = {}  # category -> device-like events that no rule classifies
        self.bad_steps = 0  # step markers whose number does not fit int64: kept as plain events
        self.correlations = CorrelationIds()
        # (kernel name, kind) -> category: a trace repeats a few hundred kernel names tens of thousands of times
        self.device_categories: dict[tuple[str, str], str] = {}
        self.shapes_texts: dict[bytes, str | None] = {}  # input shapes as written -> their compact JSON text
        self.built = 0  # events produced by from_structs

    def from_dict(self, path: Path, raw: object, build: bool = True) -> Event | None:
        # (the msgspec structs only hold scalar ids: an object or list pid/tid/stream comes this way, see trace_id)
        index = self.items
        self.items += 1
        if not isinstance(raw, dict):
            raise InputError(path, f"not a trace: item {index} of the event list is not a JSON object")
        phase = raw.get("ph")
        args = raw.get("args")
        if not isinstance(args, dict):
            args = _NO_ARGS
        if phase != "X":
            if phase == "M":
                self._metadata(raw.get("name"), trace_id(raw.get("pid")), trace_id(raw.get("tid")), args.get("name"))
            return None
        start = _event_time(raw.get("ts"))
        duration = _event_time(raw.get("dur", 0.0))
        if start is None or duration is None:
            raise InputError(path, f"not a trace: complete event {index} has no numeric 'ts'/'dur'")
        self.complete_events += 1
        if not build:  # produced by an earlier pass: number its correlation id all the same, as that pass did
            self.correlations(_as_id(args.get("correlation", args.get("correlation_id"))))
            return None
        dims = args.get("Input Dims")
        return self._complete(
            raw.get("name"), _text(raw.get("cat")), start, duration, trace_id(raw.get("pid")),
            trace_id(raw.get("tid")), trace_id(args.get("stream")),
            args.get("correlation", args.get("correlation_id")), _text(args.get("hlo_op")),
            _text(args.get("hlo_module")), args.get("step_num"), None if dims is None else _compact_json(dims),
        )

    def from_structs(self, chunk: list[Any]) -> Iterator[Event]:
        """Events of one decoded chunk. The two commonest cases (GPU activity, PyTorch host events) are
        built inline, with their lane and process names cached: this loop runs once per event of traces with millions
        of them. `built` counts the events produced (for the streaming parser, which skips them if this path gives
        up)."""
        device_cats = _DEVICE_CATS
        host_cats = _KINETO_HOST_CATS
        places = self.places
        lean = self.lean
        self.items += len(chunk)
        built = counted = 0
        try:
            for item in chunk:
                args = item.args
                phase = item.ph
                if phase != "X":
                    if phase == "M":
                        self._metadata(item.name, item.pid, item.tid, args.name if args is not None else None)
                    continue
                start = item.ts
                if start is None:  # let the streaming parser report it with its position
                    raise kineto_chunks.GiveUp("complete event without ts")
                duration = item.dur
                if duration is None:
                    duration = 0.0
                name = item.name
                if type(name) is not str:
                    name = str(name)
                category = item.cat
                if args is None:
                    event = self._complete(name, category, start, duration, item.pid, item.tid)
                    built += 1
                    yield event
                    continue
                correlation = args.correlation
                if (type(correlation) is not int or not 0 <= correlation < FLOW_CORRELATION_BASE) and (
                        correlation is not None or args.correlation_id is not None):  # (most host events have neither)
                    correlation = self._renumbered_correlation(correlation, args.correlation_id)
                kind = host_cats.get(category)
                if kind is None:
                    kind = device_cats.get(category)
                    if kind is not None:  # Kineto GPU activity
                        event = self._device_event(item, name, category, kind, start, duration, correlation)
                        built += 1
                        yield event
                        continue
                elif not name.startswith("ProfilerStep#"):  # PyTorch host events: most of a trace
                    # (an event with impossible times is produced all the same, for CheckedEvents to report; the test
                    # is load._impossible's, inline: a function call here cost 10% of `trace stats` on the A100 trace)
                    if lean and kind != RUNTIME and 0 <= duration <= MAX_EVENT_US and -MAX_TIME_US <= start <= MAX_TIME_US:
                        built += 1
                        counted += 1
                        continue
                    place = places.get((item.pid, item.tid, False))
                    if place is None:
                        place = places[(item.pid, item.tid, False)] = (
                            self._process(item.pid), self._thread(item.pid, item.tid)
                        )
                    dims = args.input_dims
                    event = Event(name, start, duration, kind, False, place[1], place[0], OTHER, None, None, None,
                                  correlation, SOURCE_NAMES, category, self._shapes(dims) if dims else None)
                    built += 1
                    yield event
                    continue
                event = self._complete(
                    name, category, start, duration, item.pid, item.tid, args.stream, correlation, args.hlo_op,
                    args.hlo_module, args.step_num, self._shapes(args.input_dims) if args.input_dims else None,
                )
                built += 1
                yield event
        finally:
            self.built += built
            self.counted += counted

    def _device_event(self, item: Any, name: str, category: str, kind: str, start: float, duration: float,
                      correlation: int | None) -> Event:
        """A Kineto GPU activity event of from_structs."""
        if category in _DEVICE_EVENT_KIND_CATS:
            kind = _DEVICE_EVENT_KINDS.get((category, name), kind)
        stream = item.args.stream
        if stream is None:
            stream = item.tid
        key = (item.pid, stream, True)
        place = self.places.get(key)
        if place is None:
            place = self.places[key] = (self._process(item.pid), self._stream_lane(stream))
        named = self.device_categories.get((name, kind))
        if named is None:
            named = self.device_categories[(name, kind)] = category_for(name, kind)
        return Event(name, start, duration, kind, True, place[1], place[0], named, None, None, None, correlation,
                     SOURCE_NAMES, category)

    def _shapes(self, dims: Any) -> str | None:
        """The compact JSON text (`_shapes_text`) of input shapes as written (a msgspec.Raw), kept for the next event
        with the same text: a trace repeats a few thousand texts tens of thousands of times."""
        written = bytes(dims)
        shapes = self.shapes_texts.get(written)
        if shapes is None:
            shapes = _shapes_text(written)
            if len(self.shapes_texts) >= _SHAPES_KEPT:
                self.shapes_texts.clear()
            self.shapes_texts[written] = shapes
        return shapes

    def _renumbered_correlation(self, correlation: int | str | None, correlation_id: int | str | None) -> int | None:
        """The correlation id of a chunk's event whose `correlation` is not an int below FLOW_CORRELATION_BASE."""
        return self.correlations(_as_id(correlation if correlation is not None else correlation_id))

    def _stream_lane(self, stream: _Id) -> str:
        lane = self.lanes.get(stream)
        if lane is None:
            lane = self.lanes[stream] = f"stream {stream}"
        return lane

    def _process(self, pid: _Id) -> str:
        name = self.process_names.get(pid)
        if name is None:
            name = self.pid_names.get(pid)
            if name is None:
                name = self.pid_names[pid] = str(pid)
        return name

    def _thread(self, pid: _Id, tid: _Id) -> str:
        key = (pid, tid)
        name = self.thread_names.get(key)
        if name is None:
            name = self.tid_names.get(key)
            if name is None:
                name = self.tid_names[key] = f"thread {tid}"
        return name

    def _metadata(self, name: object, pid: _Id, tid: _Id, value: object) -> None:
        self.places.clear()
        if name == "process_name":
            self.process_names[pid] = str(value or "")
        elif name == "thread_name":
            self.thread_names[(pid, tid)] = str(value or "")

    def _complete(
        self, name: object, category: str | None, start: float, duration: float, pid: _Id, tid: _Id,
        stream: _Id = None, correlation: int | str | None = None, hlo_op: str | None = None,
        hlo_module: str | None = None, step_num: int | str | None = None, input_shapes: str | None = None,
    ) -> Event:
        if type(name) is not str:
            name = str(name)
        kind = _DEVICE_CATS.get(category)
        if kind is not None:  # Kineto GPU activity: the most common device case, kept short
            kind = _DEVICE_EVENT_KINDS.get((category, name), kind)
            return Event(
                name, start, duration, kind, True, self._stream_lane(stream if stream is not None else tid),
                self._process(pid), category_for(name, kind), None, None, None, self.correlations(_as_id(correlation)),
                SOURCE_NAMES, category,
            )
        process = self._process(pid)
        lane = self._thread(pid, tid)
        device = False
        step = None
        if category in _RUNTIME_CATS:
            kind = RUNTIME
        elif category == "gpu_user_annotation":
            kind, device = ANNOTATION, True
        elif process.startswith("/device:"):  # JAX's Chrome export of an xplane
            device = True
            kind = execution_kind(name) if device_line_executes(process, lane) else ANNOTATION
        elif hlo_op is not None and hlo_op == name:  # XLA's CPU runtime executing an HLO op: the CPU is the device
            kind, device = KERNEL, True
        elif category == "user_annotation":
            kind = ANNOTATION
        else:
            kind = HOST_OP
            if category is not None and category not in _KINETO_HOST_CATS and category not in _NOT_DEVICE_WORK_CATS and (
                    stream is not None or _DEVICE_LIKE_CAT.search(str(category))):
                key = str(category)
                self.unclassified[key] = self.unclassified.get(key, 0) + 1
        if name.startswith("ProfilerStep#"):
            marker = _STEP_NAME.match(name)
            if marker:
                number = int64(marker.group(1))
                if number is None:  # 5,000 digits: no step number, and no int() of it
                    self.bad_steps += 1
                else:
                    kind, step = STEP, number
        elif step_num is not None and not device:  # jax.profiler.StepTraceAnnotation / torch_xla StepTrace
            number = _as_int(step_num)
            if number is not None:
                kind, step = STEP, number
            elif _INTEGER.fullmatch(str(step_num).strip()):  # a whole number beyond int64
                self.bad_steps += 1
        return Event(
            name, start, duration, kind, device, lane, process, category_for(name, kind) if device else OTHER, step,
            hlo_op, hlo_module, self.correlations(_as_id(correlation)), SOURCE_NAMES,
            None if category is None else str(category), input_shapes,
        )


def _compact_json(value: Any) -> str:
    """An argument's value (input shapes) as compact JSON text, alike from both readers."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_JSON_SPACE = b" \t\r\n"
_PLAIN_SHAPES = b"[],0123456789"
# Longer texts take the slow way: json.dumps refuses an int of more than 4,300 digits, as it always did.
_PLAIN_SHAPES_MAX = 4000
_SHAPES_KEPT = 4096  # distinct input shapes texts an _EventBuilder keeps


def _shapes_text(raw: bytes) -> str | None:
    """`_compact_json` of the input shapes from their JSON text as the file has it (already checked to be valid
    JSON by msgspec). Nested lists of non-negative ints (what torch.profiler writes) only lose their whitespace, which
    gives the same text without building the lists; anything else is decoded and written again."""
    text = raw.translate(None, _JSON_SPACE)
    if text[:1] == b"[" and len(text) < _PLAIN_SHAPES_MAX and not text.translate(None, _PLAIN_SHAPES):
        return text.decode("ascii")
    try:
        value = msgspec.json.decode(raw, type=list[Any] | None)
    except msgspec.ValidationError as error:  # not a list: the streaming parser reads the file (as it always did)
        raise kineto_chunks.GiveUp(str(error)) from error
    return None if value is None else _compact_json(value)


def trace_id(value: Any) -> Any:
    """A pid, tid or stream id as a hashable scalar: numbers and strings as written, an object or a list (which no
    profiler writes, but a damaged trace may hold) as its JSON text. Every reader of Kineto ids goes through here."""
    if isinstance(value, (dict, list)):
        return _json_text(value)
    return value


def _json_text(value: Any) -> str:
    """A value no profiler writes where a name or id belongs, as its JSON text: hashable, and equal for equal values."""
    return json.dumps(value, sort_keys=True, default=str)


def _event_time(value: object) -> float | None:
    """An event's `ts` or `dur` in microseconds: a JSON number, or text holding one (some exporters write them as
    text, and Perfetto reads those too); None for anything else (true, null, "soon"). Text that spells a non-finite
    number stays infinite or NaN, which load's impossible-times test then leaves out with a warning."""
    if type(value) is float or type(value) is int:
        return float(value)
    if type(value) is str:
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _text(value: object) -> str | None:
    """A category, HLO op or module name: text as written; a number, object or list (which no profiler writes, but a
    damaged trace may hold) as its JSON text, so that it stays hashable and matches no known name."""
    if value is None or type(value) is str:
        return value
    return _json_text(value)


def _as_id(value: int | str | float | None) -> int | None:
    """A correlation id: any integer the JSON holds (rocprofiler writes unsigned 64-bit ids, some writers more;
    CorrelationIds renumbers them all), or text of at most 20 digits; None when absent or anything else. Longer text
    never reaches int() (Python refuses more than 4,300 digits)."""
    if value is None or isinstance(value, bool):
        return None
    if type(value) is int:
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) <= UINT64_MAX else None
    if isinstance(value, str):
        digits = value.strip().lstrip("+-")
        return int(value) if 0 < len(digits) <= 20 and digits.isascii() and digits.isdigit() else None
    return None


def _as_int(value: int | str | float | None) -> int | None:
    """An id or step number as an int64, None when absent, not a whole number or beyond int64 (files.int64)."""
    if value is None or (type(value) is int and INT64_MIN <= value <= INT64_MAX):
        return value
    return int64(value)
