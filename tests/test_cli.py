"""The command-line entry point: help, version, and one-line errors."""

from __future__ import annotations

import subprocess
import sys

from helpers import hloscope

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
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip().splitlines()[-1] == "[]"
