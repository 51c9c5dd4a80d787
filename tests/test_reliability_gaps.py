"""Issue 14, the gaps left after round two (docs/reliability.md): gzip bombs of one huge token, tensorboard's Kineto
conversion memory, shape-aware HLO memory check, `compare` on a full disk, `running` records with no live writer,
dumps left in `.xla_dump` after a kill, and SIGTERM/SIGKILL against a real `compare`.

Hostile inputs run as real subprocesses under a timeout and an address-space limit (`test_reliability_inputs.hloscope`).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from test_reliability_inputs import assert_refused, hloscope

# ------------------------------------------------------------------------ (a) gzip bombs of one huge token


def _bomb(path: Path, head: bytes, body: bytes, repeat: int, tail: bytes) -> Path:
    with gzip.open(path, "wb", compresslevel=6) as handle:
        handle.write(head)
        for _ in range(repeat):
            handle.write(body)
        handle.write(tail)
    return path


@pytest.mark.parametrize("kind", ["escaped_quotes", "number", "bare_array_string"])
def test_one_huge_token_is_refused_quickly_in_bounded_memory(tmp_path, kind):
    if kind == "escaped_quotes":  # a string of \" repeats: no quote that ends it, 400 MB
        path = _bomb(tmp_path / "b.pt.trace.json.gz", b'{"traceEvents": [{"name": "', b'\\"' * (1 << 19), 400, b'"}]}')
    elif kind == "number":  # a 200 MB integer
        path = _bomb(tmp_path / "b.pt.trace.json.gz", b'{"traceEvents": [{"ts": ', b"1" * (1 << 20), 200, b"}]}")
    else:  # a top-level array (never the chunked fast path): a 200 MB string
        path = _bomb(tmp_path / "b.json.gz", b'[{"name": "', b"A" * (1 << 20), 200, b'"}]')
    result = hloscope("trace", "stats", path, timeout=120, memory_limit=1 << 30)
    assert_refused(result, path, words=("token",))


# ------------------------------------------------------------------ (c) the HLO memory check counts shapes


def _huge_tuple(path: Path, elements: int) -> Path:
    """A valid module whose parameter is one tuple of `elements` scalars: 7 bytes of text per shape."""
    path.write_text("HloModule big\n\nENTRY main {\n  p = (" + ", ".join(["f32[]"] * elements) + ") parameter(0)\n"
                    "  ROOT g = f32[] get-tuple-element(p), index=0\n}\n")
    return path


def test_a_huge_tuple_is_refused_up_front_by_its_shape_count(tmp_path, monkeypatch):
    path = _huge_tuple(tmp_path / "tuple.hlo", 3_000_000)  # 21 MB: 10x is 210 MB, its shapes ~750 MB
    monkeypatch.setenv("HLOSCOPE_HLO_MAX_BYTES", str(30_000_000))  # a 30 MB file would pass the old 10x check
    result = hloscope("hlo", "stats", path, timeout=60, memory_limit=1 << 30)
    line = assert_refused(result, path, words=("3,000,001 shapes",))
    assert "0.8 GB" in line, line


def test_xla_cost_analysis_of_a_huge_tuple_is_skipped_with_one_warning_under_an_address_space_limit(tmp_path):
    path = _huge_tuple(tmp_path / "tuple.hlo", 3_000_000)  # XLA's child would take ~3.3 GB (174x the file)
    result = hloscope("hlo", "stats", "--json", path, timeout=240, memory_limit=int(2.5 * (1 << 30)))
    assert "Traceback" not in result.stderr and result.code == 0, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hloscope: warning: {path}: XLA's parser would need"), lines
    (module,) = json.loads(result.stdout)["modules"]
    assert "XLA's parser would need" in module["xla_cost"]["skipped"]
