"""The HLO parser's compiled fast paths are optional at install (no compiler, no extension: the Python code does
everything), so CI, which has gcc, checks that the extension built and imports: a build that failed silently would
test the Python path only (.ci/run sets HLOSCOPE_REQUIRE_NATIVE)."""

from __future__ import annotations

import importlib
import os

import pytest

from hloscope.hlo import native

MODULES = ["hloscope.hlo._native"]


@pytest.mark.parametrize("name", MODULES)
def test_each_extension_is_built_where_required(name):
    if not os.environ.get("HLOSCOPE_REQUIRE_NATIVE"):
        pytest.skip("HLOSCOPE_REQUIRE_NATIVE is not set (a machine without a C compiler may run the Python path)")
    importlib.import_module(name)  # ImportError: it did not build (see the output of `pip install -e .`)


def test_the_readers_use_the_extensions_when_built():
    if os.environ.get("HLOSCOPE_REQUIRE_NATIVE") and not os.environ.get("HLOSCOPE_PURE_PYTHON"):
        assert native.native is not None
