"""One way to write a file that others may be reading: `atomic_output`.

Every file hloscope writes (run records, reports, trace summaries and exports, a run's replay inputs) is written under
a fresh temporary name in the target's directory and put in place in one step, so a reader sees the old file or the
whole new one, never a torn write; an interrupted or failed write leaves neither a partial file nor the temporary.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], text: bool = False, replace: bool = True) -> Iterator[IO[Any]]:
    """A handle to write `path`'s new contents to (UTF-8 text when `text`), put in place when the block ends.

    `replace=True` replaces whatever is at `path`; `replace=False` never does: the last step raises FileExistsError
    when a file appeared at `path` meanwhile (outputs that must not overwrite anything the user has). The file gets the
    permissions a plain open() would give (mkstemp's are 0600) and is flushed to disk before it is put in place.
    OSError (a missing or read-only folder, a full disk) reaches the caller, who names the file in its own terms.
    """
    path = Path(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        handle: IO[Any] = os.fdopen(fd, "w", encoding="utf-8") if text else os.fdopen(fd, "wb")
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(temporary, path)
        else:
            _place_new(Path(temporary), path)
    finally:
        Path(temporary).unlink(missing_ok=True)  # gone already once it was put in place


def _place_new(temporary: Path, path: Path) -> None:
    """Move `temporary` to `path` only if nothing is there: a hard link is atomic and refuses an existing file."""
    try:
        os.link(temporary, path)
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links: check once more, then rename
        if path.exists():
            raise FileExistsError(f"{path} already exists") from None
        os.replace(temporary, path)


def _umask() -> int:
    mask = os.umask(0)  # the only portable way to read the umask is to set it and put it back
    os.umask(mask)
    return mask
