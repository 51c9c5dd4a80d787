"""Where a report goes: stdout, or a new file (never over an existing one unless the user says --force).

`-o -` means stdout for every command with -o: each function here reads an output of `-` (STDOUT) as no file."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from hloscope.errors import UsageError
from hloscope.writing import atomic_output

STDOUT = Path("-")


def output_file(output: Path | None) -> Path | None:
    """The file to write, or None for stdout (no -o, or `-o -`)."""
    return None if output is None or output == STDOUT else output


def choose_format(as_json: bool, fmt: str | None, output: Path | None) -> str:
    """'json' | 'md' | 'html' | 'terminal', from --json/--format, else from the output file's suffix."""
    output = output_file(output)
    if as_json and fmt:
        raise UsageError("--json and --format exclude each other")
    if as_json:
        return "json"
    if fmt:
        return fmt
    if output is not None:
        return {".json": "json", ".html": "html", ".htm": "html"}.get(output.suffix.lower(), "md")
    return "terminal"


def check_writable(output: Path | None, force: bool) -> None:
    """Refuse an existing output file (without --force) or a missing folder, before any work is done."""
    output = output_file(output)
    if output is None:
        return
    if output.is_dir():
        raise UsageError(f"{output} is a directory; give a file name")
    if os.path.lexists(output) and not force:  # a symbolic link too, even one that leads nowhere (never followed)
        raise UsageError(f"{output} already exists; use --force to overwrite it")
    if output.parent and not output.parent.is_dir():
        raise UsageError(f"{output.parent}: no such directory")


def fresh_path(directory: Path, stem: str, suffix: str) -> Path:
    """The first of `stem.suffix`, `stem-2.suffix`, `stem-3.suffix`, ... in `directory` that no entry holds yet: a
    file, a folder, a FIFO and a symbolic link (dangling or not) all take the name."""
    path, number = directory / f"{stem}{suffix}", 1
    while os.path.lexists(path):
        number += 1
        path = directory / f"{stem}-{number}{suffix}"
    return path


def deliver(report: Any, form: str, output: Path | None, force: bool, kind: str) -> None:
    """Print or write `report` in `form` (from `choose_format`): JSON (`report` is then the JSON document), or rendered
    (`report` is what the renderers take: diff's document, explain's typed ExplainReport) by the modules
    `hloscope.render.<kind>_md`, `<kind>_html` (text) and `<kind>_term` (straight to a rich console)."""
    if form == "json":
        emit(json.dumps(report, indent=2, default=str) + "\n", output, force)
        return
    renderer = importlib.import_module(f"hloscope.render.{kind}_{'term' if form == 'terminal' else form}")
    if form == "terminal":
        renderer.render(report, Console())
    else:
        emit(renderer.render(report), output, force)


def emit(text: str, output: Path | None, force: bool) -> None:
    output = output_file(output)
    if output is None:
        click.echo(text, nl=not text.endswith("\n"))
        return
    check_writable(output, force)
    try:
        _write(text, output, force)
    except OSError as error:  # a read-only folder, a full disk: one line, not a traceback
        raise UsageError(f"cannot write {output}: {error.strerror or error}") from None
    click.echo(f"wrote {output}", err=True)


def _write(text: str, output: Path, force: bool) -> None:
    """Readers never see a half-written report; without --force, a file that appeared at `output` since the check is
    not overwritten."""
    try:
        with atomic_output(output, text=True, replace=force) as handle:
            handle.write(text)
    except FileExistsError:
        raise UsageError(f"{output} already exists; use --force to overwrite it") from None
