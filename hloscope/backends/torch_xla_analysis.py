"""torch_xla's own account of each graph it compiles: the "Compilation Analysis" and "Post Compilation Analysis"
blocks it writes with PT_XLA_DEBUG_LEVEL=1 to PT_XLA_DEBUG_FILE (torch_xla/csrc/debug_util.cpp).

Per compiled graph: why torch_xla cut and compiled it ("user torch_xla.sync", "most likely user code trying to access
tensor value before torch_xla.sync", ...), its graph hash (the key of torch_xla's compilation cache, so a new hash
inside the timed window is a recompilation), the Python frames that triggered it, and XLA's memory analysis of the
compiled program (argument, output, aliased, temporary and code sizes). torch_xla prints the sizes in GiB with six
decimals, so each is known to about 1 KiB. At level 1 torch_xla writes only when it compiles (a cached execution
writes nothing), so the timed steps pay nothing for it (measured: 300 cached syncs, same time with and without).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from hloscope.errors import InputError

DEBUG_LEVEL_ENV, DEBUG_FILE_ENV = "PT_XLA_DEBUG_LEVEL", "PT_XLA_DEBUG_FILE"
DEBUG_FILE = "torch_xla_compilations.txt"  # in the run directory
SOURCE = "torch_xla's compilation analysis (PT_XLA_DEBUG_LEVEL=1)"
GIB = 1024 ** 3
SIZE_RESOLUTION_BYTES = GIB // 10 ** 6  # printed as GiB with six decimals
MAX_FILE_BYTES = 64 * 1024 * 1024  # a run's analysis is a few KiB per compiled graph
_COMPILE = "Compilation Analysis: "
_POST = "Post Compilation Analysis: "
_SIZES = {"Graph input size": "argument_bytes", "Graph output size": "output_bytes",
          "Aliased Input size": "alias_bytes", "Intermediate tensor size": "temp_bytes",
          "Compiled program size": "generated_code_bytes"}
_SIZE_LINE = re.compile(r"(?P<name>[A-Za-z ]+): (?P<gib>[0-9]+(?:\.[0-9]+)?) GB$")
_FRAME = re.compile(r"(?P<function>\S+) \((?P<file>.+):(?P<line>[0-9]+)\)$")


@dataclass
class XlaCompilation:
    """One graph torch_xla compiled, as its compilation analysis describes it."""

    cause: str = ""
    graph_hash: str = ""
    frames: list[str] = field(default_factory=list)  # innermost first, "function (file:line)"
    sizes: dict[str, int] = field(default_factory=dict)  # _SIZES' names -> bytes (to SIZE_RESOLUTION_BYTES)

    @property
    def user_frame(self) -> str | None:
        """The innermost frame outside torch_xla and the installed packages: where the user's code asked for it."""
        for frame in self.frames:
            found = _FRAME.match(frame)
            path = found["file"] if found else frame
            if not any(part in path for part in ("site-packages", "dist-packages", "/torch_xla/")):
                return frame
        return self.frames[-1] if self.frames else None


def parse(text: str) -> list[XlaCompilation]:
    """The compiled graphs of a PT_XLA_DEBUG_FILE in the order torch_xla wrote them. Other blocks (Execution Analysis
    at level 2, the unlowered-op report) are skipped; a post-compilation block belongs to the compilation before it."""
    found: list[XlaCompilation] = []
    section = ""
    for line in text.splitlines():
        if line.startswith(_POST):
            _post_line(found, line[len(_POST):].strip())
        elif line.startswith(_COMPILE):
            body = line[len(_COMPILE):]
            if body.startswith("Compilation Cause"):
                found.append(XlaCompilation())
                section = "cause"
            elif found:
                section = _compile_line(found[-1], body, section)
    return found


def _compile_line(current: XlaCompilation, body: str, section: str) -> str:
    stripped = body.strip()
    if body.startswith("Graph Info"):
        return "graph"
    if body.startswith("Python Frame Triggered"):
        return "frames"
    if stripped.startswith(("---", "===")):
        return ""
    if section == "cause" and stripped:
        current.cause = f"{current.cause}; {stripped}" if current.cause else stripped
    elif section == "graph" and stripped.startswith("Graph Hash:"):
        current.graph_hash = stripped.split(":", 1)[1].strip()
    elif section == "frames" and stripped.strip("."):  # torch_xla cuts a deep stack with a line of dots
        current.frames.append(stripped)
    return section


def _post_line(found: list[XlaCompilation], body: str) -> None:
    size = _SIZE_LINE.match(body)
    if not found or size is None or size["name"] not in _SIZES:
        return
    found[-1].sizes[_SIZES[size["name"]]] = round(float(size["gib"]) * GIB)


def read(path: Path) -> list[XlaCompilation]:
    """The compilations recorded in `path` (none when torch_xla has not written it yet)."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return []
    except OSError as error:
        raise InputError(path, f"cannot read torch_xla's compilation analysis: {error.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(path, f"torch_xla's compilation analysis is over {MAX_FILE_BYTES // 2 ** 20} MiB")
    return parse(data.decode("utf-8", errors="replace"))


def configure(run_dir: Path) -> Path | None:
    """Ask torch_xla (before it starts) to write its compilation analysis into the run directory; returns the file,
    or None where the user set PT_XLA_DEBUG_LEVEL or PT_XLA_DEBUG_FILE themselves (theirs is left as it is)."""
    if os.environ.get(DEBUG_LEVEL_ENV) or os.environ.get(DEBUG_FILE_ENV):
        return None
    path = run_dir / DEBUG_FILE
    os.environ[DEBUG_LEVEL_ENV] = "1"
    os.environ[DEBUG_FILE_ENV] = str(path)
    return path
