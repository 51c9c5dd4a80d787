"""Where a report goes: stdout, or a new file (never over an existing one unless the user says --force)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from hloscope.errors import UsageError


def choose_format(as_json: bool, fmt: str | None, output: Path | None) -> str:
    """'json' | 'md' | 'html' | 'terminal', from --json/--format, else from the output file's suffix."""
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
    if output is None:
        return
    if output.exists() and not force:
        raise UsageError(f"{output} already exists; use --force to overwrite it")
    if output.parent and not output.parent.is_dir():
        raise UsageError(f"{output.parent}: no such directory")


def emit(text: str, output: Path | None, force: bool) -> None:
    if output is None:
        click.echo(text, nl=not text.endswith("\n"))
        return
    check_writable(output, force)
    tmp = output.with_name(f".{output.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, output)
    click.echo(f"wrote {output}", err=True)
