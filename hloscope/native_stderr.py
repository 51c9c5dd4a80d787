"""Silencing native (C++) libraries that write to file descriptor 2 directly, bypassing Python's sys.stderr."""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def quiet_native_stderr():
    """Keep XLA's C++ logging (start-up lines, protobuf reader complaints) out of hloscope's one-line errors."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def native_stdout_to_stderr():
    """Send what native (C++) code writes to file descriptor 1 to 2 instead, where logs go: gloo announces its
    connections on stdout, which is where `run --json` prints its record."""
    try:
        saved = os.dup(1)
    except OSError:
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
