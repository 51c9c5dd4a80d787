"""Opening HLO text files safely: missing, empty, binary, non-UTF-8 and too-large files become one clear error."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from hloscope.errors import InputError, ParseError

# Peak memory of `hloscope hlo stats` per byte of HLO text: parsing alone takes 5-6x (benches/bench_hlo_parse.py),
# the whole analysis 8-9x (measured on the generated 100 MB module); the check below refuses a file up front when
# this bound exceeds the memory available, instead of letting the machine kill the process.
PEAK_BYTES_PER_TEXT_BYTE = 10


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_readable(path: str) -> None:
    from hloscope import files

    # the reading layer: a missing or unreadable file, a NUL in the name, a FIFO or a device is one line
    size = files.regular_file(path, "an HLO text file", "save the HLO text to a file first").st_size
    if size == 0:
        raise ParseError(path, "empty file: expected 'HloModule <name>'", 1, 1)
    limit = os.environ.get("HLOSCOPE_HLO_MAX_BYTES")
    max_text: int | None
    if limit is not None and limit.isdigit():
        max_text, why = int(limit), f"HLOSCOPE_HLO_MAX_BYTES={limit}"
    else:
        available = available_memory()
        max_text = available // PEAK_BYTES_PER_TEXT_BYTE if available is not None else None
        why = f"{available / 1e9:.1f} GB of memory available" if available is not None else ""
    if max_text is not None and size > max_text:
        raise InputError(
            path,
            f"{size / 1e6:.0f} MB of HLO text needs about {size * PEAK_BYTES_PER_TEXT_BYTE / 1e9:.1f} GB of memory to analyse "
            f"({PEAK_BYTES_PER_TEXT_BYTE}x the file), over the limit set by {why}; refusing rather than running out of "
            "memory (set HLOSCOPE_HLO_MAX_BYTES to the largest file size to accept)",
        )
    with files.open_binary(path, "an HLO text file", "save the HLO text to a file first") as f:
        try:
            head = f.read(65536)
        except OSError as error:
            raise InputError(path, f"cannot read: {error.strerror or error}") from None
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ParseError(path, "UTF-16 text (byte-order mark); hloscope reads XLA's UTF-8 HLO text: convert it to UTF-8", 1, 1)
    if b"\0" in head:
        index = head.index(b"\0")
        line = head.count(b"\n", 0, index) + 1
        raise ParseError(path, "binary data (NUL byte), not HLO text", line, index - head.rfind(b"\n", 0, index))


def _decode_error_position(path: str) -> tuple[int, int, int]:
    """(line, column, byte) of the first byte that is not UTF-8."""
    line = 1
    with open(path, "rb") as f:
        for raw in f:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as error:
                return line, len(raw[: error.start].decode("utf-8", "replace")) + 1, raw[error.start]
            line += 1
    return line, 1, 0


@contextmanager
def open_text_lines(path: str) -> Iterator[Iterator[str]]:
    """The open UTF-8 text file, to iterate over its lines; a byte that is not UTF-8 raises ParseError at its line
    and column, and a read error InputError."""
    try:
        with open(path, encoding="utf-8") as f:
            yield f
    except UnicodeDecodeError:
        line, col, byte = _decode_error_position(path)
        raise ParseError(path, f"not UTF-8 text (byte 0x{byte:02x}); expected XLA HLO text", line, col) from None
    except OSError as error:
        raise InputError(path, f"cannot read: {error.strerror or error}") from None
