"""The HLO parser's compiled fast paths are optional at install (no compiler, no extension: the Python code does
everything), so CI, which has gcc, checks that the extension built and imports: a build that failed silently would
test the Python path only (.ci/run sets HLOSCOPE_REQUIRE_NATIVE)."""

from __future__ import annotations

import importlib
import os

import pytest
from helpers import python

from hloscope.hlo import native

MODULES = ["hloscope.hlo._native"]


def _built(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("name", MODULES)
def test_each_extension_is_built_where_required(name):
    # a machine without a C compiler may run the Python path; where HLOSCOPE_REQUIRE_NATIVE is set it must have built
    assert _built(name) or not os.environ.get("HLOSCOPE_REQUIRE_NATIVE"), (
        f"{name} did not build (see the output of `pip install -e .`)")


def test_the_readers_use_the_extensions_when_built():
    expected = _built("hloscope.hlo._native") and not os.environ.get("HLOSCOPE_PURE_PYTHON")
    assert (native.native is not None) == expected, native.native


@pytest.mark.parametrize("pure_python", [True, False])
def test_hloscope_pure_python_turns_the_extensions_off(pure_python):
    used = python("-c", "from hloscope.hlo import native; print(native.native is not None)", timeout=60,
                  env={"HLOSCOPE_PURE_PYTHON": "1" if pure_python else None})
    assert used.code == 0, used.stderr
    assert used.stdout.strip() == str(not pure_python and _built("hloscope.hlo._native"))
