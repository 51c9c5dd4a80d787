"""Property-based tests (hypothesis) of the trace readers (tests/test_hlo_fuzz.py has the HLO parser's,
tests/test_explain_fuzz.py the run records'): random mutations of real inputs never raise anything but hloscope's own
errors.

- a real Kineto trace (plain and gzip'd), mutated byte-wise: `load_trace` + `trace_stats` return or raise InputError.

In-process and quick (a few hundred examples in seconds); each example writes one small file.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from helpers import FIXTURES, REQUIRE_FIXTURES_ENV
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hloscope.errors import InputError
from hloscope.trace import kineto
from hloscope.trace.load import load_trace
from hloscope.trace.stats import trace_stats

KINETO = FIXTURES / "hta" / "triton_example__triton_example.json.gz"  # 71 events from an A100, 2 KB gzip'd
# Bytes that matter to JSON and to the chunked fast path's cut search ("},\n", "},{"); ASCII only: a byte that is not
# UTF-8 is tests/test_trace_bad_input.py::test_kineto_json_with_a_byte_that_is_not_utf8.
JSON_BYTES = b'{}[],:"0123456789-+eE.nulltruefalse \n\\/X'

# a missing fixture skips only where the fixtures are not required (CI requires them: there the test fails)
needs_fixtures = pytest.mark.skipif(not KINETO.exists() and os.environ.get(REQUIRE_FIXTURES_ENV) != "1",
                                    reason=f"real fixtures not found at {FIXTURES}")
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                          HealthCheck.too_slow])


@st.composite
def mutations(draw, size: int, alphabet: bytes):
    """A few edits of a byte string of length `size`: delete, insert, overwrite, duplicate a slice, or truncate."""
    edits = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "insert", "overwrite", "duplicate", "truncate"]))
        at = draw(st.integers(0, size))
        length = draw(st.integers(1, 64))
        data = draw(st.binary(min_size=1, max_size=8)) if not alphabet else bytes(
            draw(st.lists(st.sampled_from(alphabet), min_size=1, max_size=8)))
        edits.append((kind, at, length, data))
    return edits


def _apply(data: bytes, edits) -> bytes:
    out = bytearray(data)
    for kind, at, length, insert in edits:
        at = min(at, len(out))
        if kind == "delete":
            del out[at:at + length]
        elif kind == "insert":
            out[at:at] = insert
        elif kind == "overwrite":
            out[at:at + len(insert)] = insert
        elif kind == "duplicate":
            out[at:at] = out[max(0, at - length):at]
        else:
            del out[at:]
    return bytes(out)


def _trace_stats_or_input_error(path: Path) -> None:
    try:
        result = trace_stats(load_trace(path)).to_dict()
    except InputError as error:
        assert str(path) in str(error)
        return
    assert result["kernels"] >= 0 and result["events"] >= result["kernels"]


@needs_fixtures
@FAST
@given(edits=mutations(size=20_000, alphabet=JSON_BYTES))
def test_mutated_kineto_json_raises_only_input_errors(tmp_path, edits):
    path = tmp_path / "mutated.pt.trace.json"
    path.write_bytes(_apply(gzip.decompress(KINETO.read_bytes()), edits))
    _trace_stats_or_input_error(path)


@needs_fixtures
@FAST
@given(edits=mutations(size=2_300, alphabet=b""))
def test_mutated_kineto_gzip_raises_only_input_errors(tmp_path, edits):
    path = tmp_path / "mutated.pt.trace.json.gz"
    path.write_bytes(_apply(KINETO.read_bytes(), edits))
    _trace_stats_or_input_error(path)


def test_locating_a_json_syntax_error_loads_at_most_the_limit(tmp_path, monkeypatch):
    """Line:column of a syntax error comes from json.loads on the whole text, so only below a size limit. The limit
    once applied to the compressed size only: a 23 MB .json.gz (300 MB of JSON) with a syntax error near its end took
    1.7 GB to report, against ~60 MB for the same trace without the error."""
    limit = 4096
    monkeypatch.setattr(kineto, "_LOCATE_ERRORS_BELOW", limit)
    loaded: list[int] = []
    real_loads = json.loads
    monkeypatch.setattr(kineto.json, "loads", lambda text, *a, **k: loaded.append(len(text)) or real_loads(text, *a, **k))
    events = ",\n".join(f'{{"ph": "X", "name": "k", "ts": {i}, "dur": 1}}' for i in range(500))
    broken = gzip.compress(('{"traceEvents": [\n' + events + ',\n{"ph": "X" "ts": 1}\n]}\n').encode())
    assert len(broken) < limit  # small compressed, ~20 KB decompressed
    path = tmp_path / "broken.pt.trace.json.gz"
    path.write_bytes(broken)
    with pytest.raises(InputError, match="invalid JSON") as info:
        list(kineto.iter_events(path))
    assert all(size <= limit for size in loaded)
    assert (info.value.line, info.value.col) in ((None, None), (502, 12))  # located some other bounded way, or not
    small = tmp_path / "small.pt.trace.json.gz"
    small.write_bytes(gzip.compress(b'{"traceEvents": [\n{"ph": "X" "ts": 1}\n]}\n'))
    with pytest.raises(InputError, match="invalid JSON") as info:
        list(kineto.iter_events(small))
    assert (info.value.line, info.value.col) == (2, 12)  # still located when it fits
