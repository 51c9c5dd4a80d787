"""The rule for real fixtures: a missing one skips its test on a developer's machine and fails it in CI."""

from __future__ import annotations

import pytest
from _pytest.outcomes import Failed, Skipped
from helpers import FIXTURES, REQUIRE_FIXTURES_ENV, fixture


def test_missing_fixture_skips_outside_ci(monkeypatch):
    monkeypatch.delenv(REQUIRE_FIXTURES_ENV, raising=False)
    with pytest.raises(Skipped, match=r"no/such/fixture\.hlo"):
        fixture("no/such/fixture.hlo")


def test_missing_fixture_fails_in_ci(monkeypatch):
    monkeypatch.setenv(REQUIRE_FIXTURES_ENV, "1")
    with pytest.raises(Failed, match=r"no/such/fixture\.hlo"):
        fixture("no/such/fixture.hlo")


def test_present_fixture_is_found(fixtures_dir):
    found = fixture("openxla_xla/gpu_tests/kernel_reuse.hlo")
    assert found == FIXTURES / "openxla_xla/gpu_tests/kernel_reuse.hlo" and found.is_file()
