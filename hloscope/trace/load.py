"""Find and open traces: a trace file, a run directory or a TensorBoard log directory -> `Trace` objects.

xplane.pb files are parsed here by XLA's reader (which holds the XSpace in memory) and their events produced plane by
plane on each iteration; Kineto / Chrome JSON traces are only checked here and streamed each time their events are
iterated, so a multi-GB trace never sits in memory.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

from hloscope.errors import InputError
from hloscope.trace import kineto, xplane
from hloscope.trace.model import EventStream, Trace

XPLANE_SUFFIX = ".xplane.pb"
JSON_TRACE_SUFFIXES = (".trace.json", ".trace.json.gz")  # PyTorch's *.pt.trace.json[.gz] and JAX's <host>.trace.json.gz


def load_traces(path: str | os.PathLike) -> list[Trace]:
    """Every trace at `path` (a file, or a directory searched recursively), sorted by file name."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or directory")
    if path.is_file():
        return [load_trace(path)]
    files = find_trace_files(path)
    if not files:
        raise InputError(path, f"no traces found (looked for *{XPLANE_SUFFIX}, *.trace.json and *.trace.json.gz)")
    return [load_trace(file) for file in files]


def find_trace_files(directory: Path) -> list[Path]:
    """xplane.pb and *.trace.json[.gz] files under `directory`; JAX's trace.json.gz is skipped when its xplane.pb
    (the same profile, with more detail) is beside it."""
    found = []
    for root, _, names in os.walk(directory):
        for name in names:
            if name.endswith(XPLANE_SUFFIX):
                found.append(Path(root, name))
            elif name.endswith(JSON_TRACE_SUFFIXES):
                stem = name[: name.index(".trace.json")]
                if not (Path(root) / f"{stem}{XPLANE_SUFFIX}").exists():
                    found.append(Path(root, name))
    return sorted(found)


def load_trace(path: str | os.PathLike) -> Trace:
    """One trace file: *.pb is an xplane; JSON traces are told apart (Kineto or JAX's Chrome export) by content."""
    path = Path(path)
    if path.name.endswith(".pb"):
        return Trace(file=str(path), format="xplane", events=xplane.XSpaceEvents(path))
    head = _head(path)
    if not head:
        raise InputError(path, "empty file: not a trace")
    if head.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] in (b"{", b"["):
        kind = "chrome" if (b'"/host:' in head or b'"/device:' in head) else "kineto"
        return Trace(file=str(path), format=kind, events=EventStream(lambda: kineto.iter_events(path)))
    if path.name.endswith((".json", ".gz")) or head[:1] in (b"{", b"["):
        raise InputError(path, "not a JSON trace: it does not start with '{' or '['")
    return Trace(file=str(path), format="xplane", events=xplane.XSpaceEvents(path))


def _head(path: Path, size: int = 65536) -> bytes:
    """The first bytes of the file, decompressed when it is gzip."""
    try:
        with kineto.open_trace_bytes(path) as stream:
            return stream.read(size)
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise InputError(path, f"truncated or corrupt gzip data ({error})") from error
    except IsADirectoryError as error:
        raise InputError(path, "is a directory, not a trace file") from error
    except OSError as error:
        raise InputError(path, f"cannot read: {error.strerror or error}") from error
