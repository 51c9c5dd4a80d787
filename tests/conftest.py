"""Shared test helpers: where the real fixtures are, and how to run the CLI in-process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# CI clones the repository with shared/ beside it; a checkout under /work/main has it at /work/shared.
FIXTURES = Path(os.environ.get("HLOSCOPE_FIXTURES", REPO.parent / "shared" / "fixtures"))
# Real files fetched from public repositories for this project's tests (tests/data/fetched/SOURCES.md): in git,
# unlike ../shared/fixtures, which is read-only input.
FETCHED = REPO / "tests" / "data" / "fetched"
# Screenshots and other artifacts tests leave for a person to look at.
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"real fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture
def real_file(fixtures_dir):
    """A real file by its fixtures-relative name (`tracelens/...`): the repository's fetched copy, else the shared
    fixtures'."""

    def find(relative: str) -> Path:
        fetched = FETCHED / relative
        return fetched if fetched.exists() else fixtures_dir / relative

    return find


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
