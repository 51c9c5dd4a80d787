"""Shared test helpers: where the real fixtures are, and how to run the CLI in-process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# CI clones the repository with shared/ beside it; a checkout under /work/main has it at /work/shared.
FIXTURES = Path(os.environ.get("HLOSCOPE_FIXTURES", REPO.parent / "shared" / "fixtures"))
# Screenshots and other artifacts tests leave for a person to look at.
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"real fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture
def cli_run():
    """Run `hloscope ARGS...` in-process; returns (exit_code, stdout, stderr)."""
    from click.testing import CliRunner

    from hloscope.cli import main

    def invoke(*args: str):
        runner = CliRunner()
        result = runner.invoke(_entry, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    import click

    @click.command(add_help_option=False,
                   context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    @click.pass_context
    def _entry(ctx):
        main(list(ctx.args))

    return invoke
