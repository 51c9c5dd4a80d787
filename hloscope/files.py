"""One reading layer for every file hloscope opens, whoever names it (the command line, a run.json, a comparison, a
dump directory, a sibling report): each failure is one InputError naming the file.

- only regular files are read: a FIFO, a device or a socket is refused in one line, never opened for blocking reads
  (`os.stat` first, then `O_NONBLOCK` on open and `fstat` on the descriptor, so a file swapped for a FIFO in between
  is refused too);
- a NUL byte in a path (from a hand-edited run.json) is refused instead of raising ValueError;
- sizes are bounded where the caller reads whole files;
- JSON is parsed with bounded nesting and bounded integers (no RecursionError, no int-conversion ValueError), and
  NaN / Infinity (not JSON) are refused.
"""

from __future__ import annotations

import json
import os
import re
import select
import stat
import time
from typing import Any, BinaryIO

from hloscope.errors import InputError

MAX_JSON_DEPTH = 64  # run.json and comparison.json nest 4 levels; Kineto traces 5
MAX_INT_DIGITS = 40  # the largest integer hloscope records (byte counts, ns timestamps) has 20 digits
PIPE_TIMEOUT_S = 10.0


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def check_path(path: str | os.PathLike) -> str:
    """The path as a string; a NUL byte in it is refused (os functions raise ValueError on it)."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if "\0" in text:
        raise InputError(text.replace("\0", "\\0"), "a NUL byte in the file name: not a path")
    return text


def _stat(name: str) -> os.stat_result:
    """stat(name), a missing or unreadable file being one InputError naming it."""
    try:
        return os.stat(name)
    except FileNotFoundError:
        raise InputError(name, "no such file") from None
    except OSError as error:
        raise InputError(name, f"cannot read: {error.strerror or error}") from None


def regular_file(path: str | os.PathLike, what: str = "file", hint: str = "") -> os.stat_result:
    """stat(path), refusing a missing file, a NUL in the name, a permission error and anything not a regular file."""
    name = check_path(path)
    info = _stat(name)
    if not stat.S_ISREG(info.st_mode):
        if stat.S_ISDIR(info.st_mode):
            raise InputError(name, f"is a directory, expected {what}")
        raise InputError(name, f"not a regular file or directory ({_kind(info.st_mode)}): {hint or 'save it to a file first'}")
    return info


def is_regular(path: str | os.PathLike) -> bool:
    """Whether `path` is a regular file (False for a FIFO, a device, a missing file or a name with a NUL)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def open_binary(path: str | os.PathLike, what: str = "file", hint: str = "") -> BinaryIO:
    """The regular file opened for binary reading; anything else is refused without ever blocking."""
    regular_file(path, what, hint)
    name = check_path(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise InputError(name, f"cannot read: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # swapped for a FIFO or a device since the stat above
            raise InputError(name, f"not a regular file ({_kind(info.st_mode)}): {hint or 'save it to a file first'}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike, what: str = "file", max_bytes: int | None = None, hint: str = "") -> bytes:
    """The whole regular file; larger than `max_bytes` is refused before reading."""
    info = regular_file(path, what, hint)
    if max_bytes is not None and info.st_size > max_bytes:
        raise InputError(check_path(path), f"{info.st_size / 1e6:.1f} MB is too large for {what} "
                                           f"(at most {max_bytes / 1e6:.0f} MB); refusing rather than reading it")
    with open_binary(path, what, hint) as handle:
        try:
            return handle.read() if max_bytes is None else handle.read(max_bytes + 1)
        except OSError as error:
            raise InputError(check_path(path), f"cannot read: {error.strerror or error}") from None


def decode_utf8(data: bytes, path: str | os.PathLike, what: str) -> str:
    """UTF-8 text; a byte that is not UTF-8 is one error at its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        col = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise InputError(check_path(path), f"not {what}: byte 0x{data[error.start]:02x} is not UTF-8 text",
                         line, col) from None


def read_text(path: str | os.PathLike, what: str = "text file", max_bytes: int | None = None, hint: str = "") -> str:
    return decode_utf8(read_bytes(path, what, max_bytes, hint), path, what)


def read_stream_once(path: str | os.PathLike, what: str, max_bytes: int = 16 << 20,
                     timeout_s: float = PIPE_TIMEOUT_S) -> bytes:
    """A regular file, or a pipe such as `<(cat spec)` read to its end exactly once: never blocking longer than
    `timeout_s` (a FIFO nobody writes to reads as empty at once), never more than `max_bytes`. Devices are refused."""
    name = check_path(path)
    info = _stat(name)
    if not stat.S_ISFIFO(info.st_mode):
        return read_bytes(name, what, max_bytes)
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
    chunks: list[bytes] = []
    size, deadline = 0, time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise InputError(name, f"the pipe gave no end of {what} within {timeout_s:.0f} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise InputError(name, f"more than {max_bytes / 1e6:.0f} MB from the pipe: too large for {what}")
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------------------------------ JSON


def json_depth_error(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> int | None:
    """The offset where the JSON text nests deeper than `max_depth`, or None. Strings are skipped, so brackets
    inside them do not count. Linear time, constant memory."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    depth, i, n = 0, 0, len(data)
    while i < n:
        # jump to the next byte that matters
        j = _next_special(data, i)
        if j < 0:
            return None
        c = data[j]
        if c == 0x22:  # '"': skip the string
            k = j + 1
            while True:
                k = data.find(b'"', k)
                if k < 0:
                    return None
                backslashes = 0
                m = k - 1
                while m > j and data[m] == 0x5C:
                    backslashes += 1
                    m -= 1
                if backslashes % 2 == 0:
                    break
                k += 1
            i = k + 1
            continue
        if c in (0x5B, 0x7B):
            depth += 1
            if depth > max_depth:
                return j
        else:
            depth -= 1
        i = j + 1
    return None


_SPECIAL = re.compile(rb'["\[\]{}]')


def _next_special(data: bytes, start: int) -> int:
    match = _SPECIAL.search(data, start)
    return match.start() if match else -1


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _JsonValueError(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _no_constant(name: str) -> Any:
    raise _JsonValueError(f"{name} is not a JSON number")


class _JsonValueError(ValueError):
    pass


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def loads(text: str, path: str | os.PathLike, what: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads with nesting, integer size and NaN/Infinity refused, every failure an InputError naming `path`."""
    name = check_path(path)
    deep = json_depth_error(text, max_depth)
    if deep is not None:
        data = text.encode("utf-8", "surrogatepass")
        line = data.count(b"\n", 0, deep) + 1
        col = len(data[data.rfind(b"\n", 0, deep) + 1: deep].decode("utf-8", "replace")) + 1
        raise InputError(name, f"not a {what}: JSON nested more than {max_depth} levels deep", line, col)
    try:
        return json.loads(text, parse_int=_bounded_int, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise InputError(name, f"not valid JSON ({error.msg}); truncated or not a {what}?",
                         error.lineno, error.colno) from None
    except _JsonValueError as error:
        raise InputError(name, f"not a {what}: {error}") from None
    except (RecursionError, ValueError) as error:  # belt and braces: never a traceback
        raise InputError(name, f"not a {what}: {type(error).__name__}: {error}") from None


def load_json(path: str | os.PathLike, what: str, max_bytes: int = 256 << 20) -> Any:
    data = read_bytes(path, what, max_bytes)
    return loads(decode_utf8(data, path, f"a {what}"), path, what)


def bounded_int(text: str, path: str | os.PathLike, line: int | None = None, col: int | None = None,
                what: str = "number") -> int:
    """int(text) for figures read from text reports, refusing absurdly long digit strings in one line."""
    digits = len(text.strip().lstrip("+-"))
    if digits > MAX_INT_DIGITS:
        raise InputError(check_path(path), f"a {what} of {digits} digits (at most {MAX_INT_DIGITS}): not a real value",
                         line, col)
    try:
        return int(text)
    except ValueError:
        raise InputError(check_path(path), f"not a {what}: {text[:40]!r}", line, col) from None


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def int64(value: object) -> int | None:
    """`value` as an integer that fits a signed 64-bit slot (a step, a rank, an id, a Parquet int64 column), or None:
    for None, a bool, text that is not a whole number, a float that is not whole, and any integer beyond int64. Text
    of more than 20 digits is never given to int() (Python refuses more than 4,300 with a ValueError)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if not value.is_integer():
            return None
        number = int(value)
    elif isinstance(value, str | bytes):
        text = (value.decode("ascii", "replace") if isinstance(value, bytes) else value).strip()
        if not 0 < len(text.lstrip("+-")) <= 20:
            return None
        try:
            number = int(text)
        except ValueError:
            return None
    else:
        return None
    return number if INT64_MIN <= number <= INT64_MAX else None
