"""Gzip bombs of one huge token (docs/reliability.md): a trace whose single string or number is hundreds of MB (up to a
2 GB string in 2 MB of gzip) is refused quickly in bounded memory. Run as real subprocesses under a timeout and an
address-space limit (helpers.hloscope)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from helpers import assert_refused, hloscope


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


def test_gzip_bomb_of_one_huge_token_is_refused_in_bounded_memory(tmp_path):
    path = tmp_path / "bomb.pt.trace.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(b'{"traceEvents": [{"name": "')
        block = b"A" * (1 << 20)
        for _ in range(2048):  # 2 GB of one string token, ~2 MB compressed
            handle.write(block)
        handle.write(b'"}]}')
    result = hloscope("trace", "stats", path, timeout=240, memory_limit=3 << 30)
    assert_refused(result, path)
