"""One error family for everything the user can get wrong; `hloscope.cli.main` turns it into one line on stderr."""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager


class HloscopeError(Exception):
    """An error the user can act on. Never shown as a traceback."""

    exit_code = 1


class InputError(HloscopeError):
    """A file hloscope was asked to read is missing, empty, truncated or not what it should be."""

    exit_code = 2

    def __init__(self, path: str | os.PathLike, message: str, line: int | None = None, col: int | None = None):
        self.path = os.fspath(path)
        self.message = message
        self.line = line
        self.col = col
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.col is not None:
                where += f":{self.col}"
        return f"{where}: {self.message}"


class ParseError(InputError):
    """Malformed text: always carries line and column (1-based)."""


class MissingDependency(HloscopeError):
    """A framework or tool that a command needs is not installed."""

    exit_code = 3

    def __init__(self, package: str, why: str = ""):
        self.package = package
        extra = f" ({why})" if why else ""
        super().__init__(f"this needs the Python package '{package}', which is not installed{extra}: pip install {package}")


class UsageError(HloscopeError):
    """Options that contradict each other or name something that does not exist."""

    exit_code = 2


@contextmanager
def reading(path: str | os.PathLike, what: str):
    """Turn the OS errors of opening or reading `path` into one InputError naming it; `what` is the file expected."""
    try:
        yield
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except IsADirectoryError:
        raise InputError(path, f"is a directory, not {what}") from None
    except OSError as error:
        raise InputError(path, f"cannot read: {error.strerror or error}") from None


# ------------------------------------------------------------------------------------------- lines on stderr


# C0 and C1 controls (ESC starts a terminal escape sequence, CR and BEL rewrite or beep), line and paragraph
# separators, and the marks that reorder text on screen (bidi overrides and isolates).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def one_line(text: str) -> str:
    """`text` as one line of plain text: every control character (a newline or an escape sequence from a file name
    or a quoted input line) written as Python writes it, `\\n`, `\\x1b`, `\\u202e`, so that it can neither break
    nor recolour the line. Error and warning lines go through here."""
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


def warn(message: str) -> None:
    """The one way hloscope writes a warning: `hloscope: warning: MESSAGE` on stderr, on one line (see one_line)."""
    sys.stderr.write(f"hloscope: warning: {one_line(message)}\n")
    sys.stderr.flush()
