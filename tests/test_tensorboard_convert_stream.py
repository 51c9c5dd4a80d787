"""TensorBoard's Kineto conversion streams its events (docs/reliability.md), and finds a header Kineto wrote after
them."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import pytest

from hloscope.errors import InputError
from hloscope.tensorboard.convert import convert_kineto_file, read_kineto

# ---------------------------------------------------------- (b) tensorboard's Kineto conversion streams its events


def test_the_kineto_conversion_streams_events_and_finds_a_header_written_after_them(tmp_path):
    path = tmp_path / "host_1.pt.trace.json.gz"
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 10 + i, "dur": 1,
               "args": {"stream": 7, "device": 0, "correlation": i}} for i in range(1000)]
    with gzip.open(path, "wt") as handle:  # Kineto writes baseTimeNanoseconds after the events
        json.dump({"deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], "traceEvents": events,
                   "baseTimeNanoseconds": 1_700_000_000_000_000_000}, handle)
    header, stream = read_kineto(path)
    assert isinstance(stream, Iterator) and not isinstance(stream, list)
    assert header["baseTimeNanoseconds"] == 1_700_000_000_000_000_000 and header["deviceProperties"]
    target, conversion = convert_kineto_file(path, tmp_path / "session")
    assert conversion.events == 1000 and target.stat().st_size > 0
    broken = tmp_path / "cut.pt.trace.json"
    broken.write_text(json.dumps({"traceEvents": events})[:-5000])
    with pytest.raises(InputError):
        _, stream = read_kineto(broken)
        list(stream)
