"""The command-line entry point: help, version, and one-line errors, from every command that reads a path: a directory
that is empty, holds nothing hloscope reads or does not exist, a file where a directory is expected, a pipe or a device
(refused without blocking), a file name holding a newline."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import BAD, assert_refused, hloscope, python

from hloscope import __version__
from hloscope.cli import COMMANDS


def test_help_lists_every_command(cli_run):
    code, out, _ = cli_run("--help")
    assert code == 0
    for name in COMMANDS:
        assert name in out


def test_version(cli_run):
    code, out, _ = cli_run("--version")
    assert code == 0
    assert __version__ in out


def test_unknown_command_is_a_usage_error(cli_run):
    code, _, err = cli_run("no-such-command")
    assert code == 2
    assert "no-such-command" in err
    assert "Traceback" not in err


def test_python_dash_m_entry_point():
    result = hloscope("--help", timeout=60, memory_limit=None)  # uncapped: the plain `python -m hloscope`, no runpy
    assert result.code == 0
    assert "compare" in result.stdout


def test_help_does_not_import_frameworks():
    # `hloscope --help` (and the file-analysis commands) must not pay for torch or jax at start-up.
    code = ("import sys; from hloscope.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'jax', 'torch_xla') if m in sys.modules))")
    result = python("-c", code, timeout=60)
    assert result.code == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def _nothing_readable(root: Path) -> Path:
    """A directory of files hloscope does not read: notes, a picture, a log."""
    root.mkdir()
    (root / "README.txt").write_text("notes about the run\n")
    shutil.copy(BAD / "rel_png.hlo", root / "plot.png")
    (root / "log.txt").write_bytes(os.urandom(64))
    return root


DIRECTORY_COMMANDS = {
    "hlo stats": (lambda d: ["hlo", "stats", d], "no HLO modules here"),
    "trace stats": (lambda d: ["trace", "stats", d], "no traces found"),
    "diff": (lambda d: ["diff", "--no-xla-cost", d, d], ""),
    "explain": (lambda d: ["explain", d], "no hloscope run here"),
    "tensorboard": (lambda d: ["tensorboard", d, "--port", "1"], ""),
}


@pytest.mark.parametrize("command", list(DIRECTORY_COMMANDS))
@pytest.mark.parametrize("kind", ["empty", "nothing_readable", "missing"])
def test_directory_without_anything_readable_is_refused(tmp_path, command, kind):
    directory = tmp_path / "runs"
    if kind == "empty":
        directory.mkdir()
    elif kind == "nothing_readable":
        _nothing_readable(directory)
    args, words = DIRECTORY_COMMANDS[command]
    result = hloscope(*args(directory))
    expected = ("no such",) if kind == "missing" else ((words,) if words else ())
    assert_refused(result, directory, words=expected)


@pytest.mark.parametrize("command", ["explain", "tensorboard"])
def test_a_file_where_a_directory_is_expected(tmp_path, command):
    path = tmp_path / "notes.txt"
    path.write_text("not a directory\n")
    result = hloscope(command, path, *(["--port", "1"] if command == "tensorboard" else []))
    assert_refused(result, path)


@pytest.mark.parametrize("command", ["hlo stats", "trace stats", "diff"])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_pipe_or_device_is_refused_without_blocking(tmp_path, command, kind):
    """`hloscope hlo stats <(zcat dump.gz)` passes a pipe: refused at once (reading it would block or never end)."""
    if kind == "fifo":
        path = tmp_path / "dump.hlo"
        os.mkfifo(path)  # nobody writes to it: opening it for reading would block forever
    else:
        path = Path("/dev/zero")  # endless
    args = {"hlo stats": ["hlo", "stats", path], "trace stats": ["trace", "stats", path],
            "diff": ["diff", "--no-xla-cost", path, path]}[command]
    assert_refused(hloscope(*args, timeout=120), path, words=("not a regular file or directory",))


@pytest.mark.parametrize("command", ["hlo stats", "trace stats"])
def test_a_newline_in_the_file_name_keeps_the_error_on_one_line(tmp_path, command):
    path = tmp_path / ("bad\nname" + (".hlo" if command == "hlo stats" else ".pt.trace.json"))
    shutil.copy(BAD / "rel_garbage.hlo", path)
    result = hloscope(*command.split(), path)
    assert result.code == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and str(path).replace("\n", "\\n") in result.stderr
