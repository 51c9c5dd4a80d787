"""Kineto trace file -> `<host>.xplane.pb` file, for TensorBoard's profile plugin."""

from __future__ import annotations

import contextlib
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import ijson

from hloscope.errors import InputError
from hloscope.limits import MAX_XSPACE_EVENTS
from hloscope.tensorboard.kineto_xspace import Conversion, kineto_to_xspace
from hloscope.trace.kineto import open_trace_bytes
from hloscope.trace.load import load_trace
from hloscope.trace.perfetto import PERFETTO_SUFFIXES, is_perfetto_file, is_protobuf, trace_dicts

KINETO_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
# How often (events) the conversion tells its progress: often enough for a bar, rarely enough to cost nothing.
PROGRESS_EVERY = 20_000


class ConversionProgress(Protocol):
    """Told how far a conversion is (a 232 MB trace takes over a minute): one phase at a time, each with a total
    (bytes of the file) or None where the total is not known (events counted)."""

    def phase(self, description: str, total: int | None) -> None: ...

    def update(self, completed: int) -> None: ...

    def stop(self) -> None: ...


def is_kineto_file(path: Path) -> bool:
    """A PyTorch profiler trace: Kineto JSON, or a Perfetto trace (`.pftrace`, protobuf or JSON by content)."""
    return path.name.endswith((*KINETO_SUFFIXES, *PERFETTO_SUFFIXES))


def host_name(path: Path) -> str:
    """The profiled worker: torch's trace handler names files `<host>_<pid>.<time>.pt.trace.json[.gz]`."""
    name = path.name
    for suffix in (".gz", ".json", *PERFETTO_SUFFIXES, ".trace", ".pt"):
        name = name.removesuffix(suffix)
    worker = name.split(".", 1)[0] or "pytorch"
    # The plugin reads the host back from `<host>.xplane.pb`; keep it to characters that are safe in a file name.
    return re.sub(r"[^A-Za-z0-9_.-]", "_", worker)


def read_kineto(path: Path, progress: ConversionProgress | None = None
                ) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """The trace's top-level fields that the XSpace needs (`baseTimeNanoseconds`, `deviceProperties`) and its
    `traceEvents`, streamed one at a time. Raises InputError naming the file when it is not one (while iterating, too).

    Opened with the trace reader's `open_trace_bytes` (gzip told by its magic bytes) and parsed with ijson's C backend,
    like `hloscope trace`. The raw events are never all held: each is turned into its compact XSpace form as it
    comes (the whole list once took ~14x the file: 1.9 GB for 135 MB).
    """
    if is_perfetto_file(path) and is_protobuf(path):  # the same events, decoded from Perfetto's packets
        return {}, _perfetto_events(path, progress)
    backend = _backend(ijson)
    header: dict[str, Any] = {}
    with _read_errors(path, ijson):
        for key in HEADER_KEYS:  # small values; each pass skips the events in C without building them
            with open_trace_bytes(path) as stream:
                for value in backend.items(stream, key, use_float=True):
                    header[key] = value
                    break
    return header, _events(path, backend, ijson, progress)


HEADER_KEYS = ("baseTimeNanoseconds", "deviceProperties")


def _events(path: Path, backend: Any, ijson: Any, progress: ConversionProgress | None) -> Iterator[dict[str, Any]]:
    seen = False
    count = 0
    with _read_errors(path, ijson), open_trace_bytes(path) as stream:
        # the file's bytes read so far: a gzip stream's own file, or the plain file
        position = (getattr(stream, "fileobj", None) or stream).tell
        if progress is not None:
            progress.phase(f"converting {path.name} to XSpace", path.stat().st_size)
        for event in backend.items(stream, "traceEvents.item", use_float=True):
            seen = True
            count += 1
            if progress is not None and count % PROGRESS_EVERY == 0:
                progress.update(position())
            if count > MAX_XSPACE_EVENTS:  # the up-front count (_check_streaming) skips some kinds of events
                raise too_many_events(path)
            if isinstance(event, dict):
                yield event
    if not seen:
        raise InputError(path, "not a Kineto trace: no 'traceEvents' list")


def _perfetto_events(path: Path, progress: ConversionProgress | None) -> Iterator[dict[str, Any]]:
    if progress is not None:
        progress.phase(f"converting {path.name} to XSpace (events)", None)
    for count, event in enumerate(trace_dicts(path), 1):
        if count > MAX_XSPACE_EVENTS:
            raise too_many_events(path)
        if progress is not None and count % PROGRESS_EVERY == 0:
            progress.update(count)
        yield event


@contextlib.contextmanager
def _read_errors(path: Path, ijson: Any) -> Iterator[None]:
    try:
        yield
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except (OSError, EOFError, zlib.error) as error:
        raise InputError(path, f"cannot read Kineto trace: truncated or corrupt ({error})") from None
    except ijson.JSONError as error:
        raise InputError(path, f"not a Kineto trace: invalid JSON ({str(error).splitlines()[0]})") from None


def _backend(ijson: Any) -> Any:
    try:
        return ijson.get_backend("yajl2_c")
    except ImportError:  # no C extension on this platform: the pure-Python backend is slower but correct
        return ijson


def too_many_events(path: Path) -> InputError:
    return InputError(path, f"too many events to convert for TensorBoard: more than {MAX_XSPACE_EVENTS:,} (the "
                            "conversion holds every event in memory, ~1.3 KB each); read it with `hloscope trace stats` "
                            "or `hloscope trace export`, or profile fewer steps")


def _check_streaming(source: Path, progress: ConversionProgress | None = None) -> None:
    """Read the trace once with `hloscope trace`'s streaming reader before converting it: only a regular file,
    nesting, gzip, JSON and impossible event times are refused or counted there in bounded memory (a 200 KB file of
    nested arrays once grew past 8 GB in ijson), and a trace of more events than the conversion may hold
    (MAX_XSPACE_EVENTS) is refused as soon as the count passes it, before anything is converted."""
    if progress is not None:
        progress.phase(f"checking {source.name} (events)", None)
    for count, _ in enumerate(load_trace(source).events, 1):
        if count > MAX_XSPACE_EVENTS:
            raise too_many_events(source)
        if progress is not None and count % PROGRESS_EVERY == 0:
            progress.update(count)


def convert_kineto_file(source: Path, session_dir: Path, progress: ConversionProgress | None = None
                        ) -> tuple[Path, Conversion]:
    """Write `session_dir/<host>.xplane.pb` for one Kineto trace; returns its path and the conversion summary.
    `progress`, when given, is told each phase and how far it is, and stopped at the end."""
    try:
        _check_streaming(source, progress)
        if progress is not None:
            progress.phase(f"reading {source.name}'s header", None)
        trace, events = read_kineto(source, progress)
        host = host_name(source)
        try:
            conversion = kineto_to_xspace(trace, events, host)
        except ValueError as error:
            raise InputError(source, f"not a usable Kineto trace: {error}") from None
        if progress is not None:
            progress.phase(f"writing {host}.xplane.pb", None)
        session_dir.mkdir(parents=True, exist_ok=True)
        target = session_dir / f"{host}.xplane.pb"
        target.write_bytes(conversion.xspace.SerializeToString())
    finally:
        if progress is not None:
            progress.stop()
    return target, conversion
