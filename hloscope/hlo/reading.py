"""Opening HLO text files safely: missing, empty, binary, non-UTF-8 and too-large files become one clear error."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from hloscope import files
from hloscope.errors import InputError, ParseError
from hloscope.machine import _mem_available, address_space_left, gb

# Peak memory of `hloscope hlo stats` per byte of HLO text: parsing alone takes 5-6x (benches/bench_hlo_parse.py),
# the whole analysis 6x on the generated 110 MB module and 9x on the 3 MB Llama fixture (benches/bench_hlo_stats.py,
# whole-process RSS growth, so Python's own overheads included); the check below refuses a file up front when
# this bound exceeds the memory available, instead of letting the machine kill the process.
PEAK_BYTES_PER_TEXT_BYTE = 10
# ... unless the shapes are dense: every shape (one `[` each: `f32[]`, `bf16[8,8]{1,0}`) becomes objects of its own, about
# 200 bytes in hloscope's parser (a 21 MB module holding one 3,000,000-element tuple `(f32[], f32[], ...)`: 652 MB
# peak), which 10x the file does not cover when a shape takes 7 bytes of text. The estimate is the larger of the two.
PEAK_BYTES_PER_SHAPE = 250
# XLA's own parser and cost analysis (hlo stats below 50 MB, in a child process): about 11x the text, and about 1.3 KB
# per shape (the same tuple: 3.3 GB in the child).
XLA_PEAK_BYTES_PER_TEXT_BYTE = 11
XLA_PEAK_BYTES_PER_SHAPE = 1400
_COUNT_BLOCK = 4 << 20


def memory_budget() -> tuple[int | None, str]:
    """(bytes the analysis may take, what sets that figure): HLOSCOPE_HLO_MAX_BYTES (the largest file size to accept,
    counted as 10x in memory), else MemAvailable and the address-space limit, whichever is smaller; None: unknown."""
    limit = os.environ.get("HLOSCOPE_HLO_MAX_BYTES")
    if limit is not None and limit.isdigit():
        return int(limit) * PEAK_BYTES_PER_TEXT_BYTE, f"HLOSCOPE_HLO_MAX_BYTES={limit}"
    candidates = []
    available = _mem_available()
    if available is not None:
        candidates.append((available, f"{gb(available)} of memory available"))
    address_space = address_space_left()
    if address_space is not None:
        candidates.append((address_space, f"the address-space limit ({gb(address_space)} left)"))
    if not candidates:
        return None, ""
    return min(candidates)


def count_shapes(path: str) -> int:
    """How many shapes the text can hold: its `[` bytes (every array shape has exactly one; a few attributes and names
    add some, so this is an upper bound). C-speed counting, a few hundred ms per GB."""
    return _scan(path, shapes=True)[1]


def _scan(path: str, shapes: bool) -> tuple[bytes, int, int]:
    """(the first bytes of the file, its `[` bytes where `shapes`, else 0, the offset of its first NUL byte or -1), in
    one pass of C-speed searches over blocks of the file (bytes.count, bytes.find: a few hundred ms per GB)."""
    head = b""
    count = 0
    nul = -1
    offset = 0
    with files.open_binary(path, "an HLO text file", "save the HLO text to a file first") as f:  # EACCES: one line
        try:
            while block := f.read(_COUNT_BLOCK):
                if not offset:
                    head = block[:4]
                if shapes:
                    count += block.count(b"[")
                if nul < 0:
                    found = block.find(b"\0")
                    if found >= 0:
                        nul = offset + found
                        if not shapes:
                            break
                offset += len(block)
        except OSError as error:
            raise InputError(path, f"cannot read: {error.strerror or error}") from None
    return head, count, nul


def _position(path: str, offset: int) -> tuple[int, int]:
    """(line, column) of the byte at `offset`, as the parser counts them: lines end at '\\n', '\\r\\n' or '\\r' (text
    mode), columns count characters (a byte that is not UTF-8 counts as one)."""
    line = 1
    start = 0
    with files.open_binary(path, "an HLO text file") as f:
        try:
            for raw in f:
                if start + len(raw) > offset:
                    prefix = raw[: offset - start]
                    line += prefix.count(b"\r")  # a '\r' before the byte (so not followed by '\n'): a line end
                    prefix = prefix[prefix.rfind(b"\r") + 1 :]
                    return line, len(prefix.decode("utf-8", "replace")) + 1
                line += 1 + raw.count(b"\r") - raw.endswith(b"\r\n")
                start += len(raw)
        except OSError as error:
            raise InputError(path, f"cannot read: {error.strerror or error}") from None
    return line, 1


def analysis_bytes(size: int, shapes: int) -> int:
    """Estimated peak of hloscope's own analysis of `size` bytes of text holding `shapes` shapes."""
    return max(size * PEAK_BYTES_PER_TEXT_BYTE, shapes * PEAK_BYTES_PER_SHAPE)


def xla_analysis_bytes(size: int, shapes: int) -> int:
    """Estimated peak of XLA's parser and cost analysis (the child process of hlo stats) on the same text."""
    return max(size * XLA_PEAK_BYTES_PER_TEXT_BYTE, shapes * XLA_PEAK_BYTES_PER_SHAPE)


def check_readable(path: str) -> None:
    # the reading layer: a missing or unreadable file, a NUL in the name, a FIFO or a device is one line
    size = files.regular_file(path, "an HLO text file", "save the HLO text to a file first").st_size
    if size == 0:
        raise ParseError(path, "empty file: expected 'HloModule <name>'", 1, 1)
    budget, why = memory_budget()
    if budget is not None and size * PEAK_BYTES_PER_TEXT_BYTE > budget:  # refused before reading a byte of it
        raise InputError(
            path,
            f"{size / 1e6:.0f} MB of HLO text needs about {size * PEAK_BYTES_PER_TEXT_BYTE / 1e9:.1f} GB of memory to analyse "
            f"({PEAK_BYTES_PER_TEXT_BYTE}x the file), over the limit set by {why}; refusing rather than running out of "
            "memory (set HLOSCOPE_HLO_MAX_BYTES to the largest file size to accept)",
        )
    # One pass over the whole file: a NUL byte anywhere (binary data, or a NUL inside a name, a metadata value or an
    # operand list of otherwise good text) and the shapes the memory estimate counts.
    head, shapes, nul = _scan(path, shapes=budget is not None)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ParseError(path, "UTF-16 text (byte-order mark); hloscope reads XLA's UTF-8 HLO text: convert it to UTF-8", 1, 1)
    if nul >= 0:
        line, col = _position(path, nul)
        raise ParseError(path, "binary data (NUL byte), not HLO text", line, col)
    if budget is not None:
        needed = analysis_bytes(size, shapes)
        if needed > budget:
            raise InputError(
                path,
                f"{size / 1e6:.0f} MB of HLO text holding {shapes:,} shapes needs about {needed / 1e9:.1f} GB of memory "
                f"to analyse ({PEAK_BYTES_PER_SHAPE} bytes per shape: shapes this dense are huge tuples), over the limit "
                f"set by {why}; refusing rather than running out of memory",
            )


def _decode_error_position(path: str) -> tuple[int, int, int]:
    """(line, column, byte) of the first byte that is not UTF-8."""
    line = 1
    with files.open_binary(path, "an HLO text file") as f:
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
