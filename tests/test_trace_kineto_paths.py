"""The two Kineto decoders agree: msgspec on chunks of whole events (fast path) and ijson streaming (fallback)."""

from __future__ import annotations

import gzip
import json

import pytest

from hloscope.errors import InputError
from hloscope.trace import kineto, kineto_chunks
from hloscope.trace.load import load_trace
from hloscope.trace.stats import trace_stats

FIXTURES = [
    "hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta/triton_example__triton_example.json.gz",
    "tracelens/traces__b200__eager_trace.json.gz",
]


def _ijson_only(path):
    with kineto.open_trace_bytes(path) as stream:
        return list(kineto._stream_with_ijson(path, stream, "traceEvents.item", skip=0))


@pytest.mark.parametrize("relative", FIXTURES)
def test_fast_path_and_streaming_parser_give_the_same_events(fixtures_dir, relative):
    path = fixtures_dir / relative
    with gzip.open(path) as stream:
        chunks = list(kineto_chunks.event_chunks(stream))  # the fast path takes these files whole
    assert sum(len(chunk) for chunk in chunks) == len(json.loads(gzip.decompress(path.read_bytes()))["traceEvents"])
    assert list(kineto.iter_events(path)) == _ijson_only(path)


def test_fallback_midway_yields_every_event_once(fixtures_dir, tmp_path):
    """An event the fast path cannot type (a string timestamp) deep in the file: the events already produced are
    skipped by the streaming parser, which reads the rest."""
    source = fixtures_dir / "hta/nccl_parser_config__nccl_data.json.gz"
    document = json.loads(gzip.decompress(source.read_bytes()))
    events = document["traceEvents"]
    complete = [event for event in events if event.get("ph") == "X"]
    complete[-10]["ts"] = str(complete[-10]["ts"])  # valid for Chrome's viewer, not for the typed decoder
    text = json.dumps(document, indent=1)  # one key per line: plenty of "},\n" cut points
    assert len(text) > 2 * kineto_chunks.BLOCK_BYTES
    path = tmp_path / "odd.pt.trace.json"
    path.write_text(text)
    decoded_before_giving_up = 0
    with open(path, "rb") as stream, pytest.raises(kineto_chunks.GiveUp):
        for chunk in kineto_chunks.event_chunks(stream):
            decoded_before_giving_up += len(chunk)
    assert decoded_before_giving_up > 1000
    read = list(kineto.iter_events(path))
    assert len(read) == len(complete)
    assert [(event.name, event.start_us) for event in read] == [(e["name"], float(e["ts"])) for e in complete]


def test_minified_trace_is_cut_between_events(tmp_path, fixtures_dir, monkeypatch):
    source = fixtures_dir / "hta/trace_filter__sampled_rank-0.json.gz"
    document = json.loads(gzip.decompress(source.read_bytes()))
    path = tmp_path / "min.trace.json"
    path.write_text(json.dumps(document, separators=(",", ":")))  # no newline anywhere
    monkeypatch.setattr(kineto_chunks, "BLOCK_BYTES", 64 << 10)
    with open(path, "rb") as stream:
        chunks = list(kineto_chunks.event_chunks(stream))
    assert len(chunks) > 10  # cut at "},{" as it went, not decoded whole
    assert sum(len(chunk) for chunk in chunks) == len(document["traceEvents"])
    assert list(kineto.iter_events(path)) == _ijson_only(path)


def test_cuts_inside_strings_and_nested_objects_are_not_taken(tmp_path, monkeypatch):
    """Event names holding "},{" and args holding lists of objects: tiny blocks put many wrong cut candidates last;
    the fast path must still give exactly the streaming parser's events."""
    events = []
    for index in range(400):
        events.append({"ph": "X", "cat": "kernel", "name": f'k{index} }},{{"ph": "X"}}, {{lambda()#1}}', "pid": 0,
                       "tid": 7, "ts": index * 10.0, "dur": 2.0,
                       "args": {"correlation": index, "stream": 7, "shapes": [{"a": [1, {"b": 2}]}, {"c": 3}]}})
    path = tmp_path / "tricky.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}, separators=(",", ":")))
    monkeypatch.setattr(kineto_chunks, "BLOCK_BYTES", 300)
    with open(path, "rb") as stream:
        chunks = list(kineto_chunks.event_chunks(stream))
    assert len(chunks) > 50
    read = list(kineto.iter_events(path))
    assert read == _ijson_only(path)
    assert [event.name for event in read] == [event["name"] for event in events]


def test_syntax_error_at_the_end_of_a_large_file_has_its_position(fixtures_dir, tmp_path, monkeypatch):
    """Found by the fast path after all its chunks (no second read), with the line:column json.loads gives."""
    text = gzip.decompress((fixtures_dir / "hta/triton_example__triton_example.json.gz").read_bytes()).decode()
    broken = text.replace('"traceEvents": [', '"traceEvents": [\n  {"ph": "X", "name": "k", "ts": 1, "dur": 1},' * 1, 1)
    broken = broken.rstrip().removesuffix("}") + ',\n  "x": [1 2]\n}\n'
    path = tmp_path / "late.pt.trace.json"
    path.write_text(broken)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(broken)
    monkeypatch.setattr(kineto_chunks, "BLOCK_BYTES", 512)  # many chunks before the error
    monkeypatch.setattr(kineto, "_stream_with_ijson", None)  # the streaming parser must not be needed
    with pytest.raises(InputError) as refused:
        list(kineto.iter_events(path))
    assert (refused.value.line, refused.value.col) == (expected.value.lineno, expected.value.colno)
    assert "invalid JSON" in str(refused.value)


@pytest.mark.parametrize("layout", ["object", "array"])
@pytest.mark.parametrize("compressed", [False, True])
def test_a_utf8_byte_order_mark_is_skipped_as_python_json_does(fixtures_dir, tmp_path, layout, compressed):
    """RFC 8259 lets parsers ignore a BOM; `json.loads` of the bytes does. Both decoders read past it."""
    text = gzip.decompress((fixtures_dir / FIXTURES[1]).read_bytes())
    if layout == "array":
        text = json.dumps(json.loads(text)["traceEvents"]).encode()
    data = b"\xef\xbb\xbf" + text
    path = tmp_path / ("trace.json.gz" if compressed else "trace.json")
    path.write_bytes(gzip.compress(data) if compressed else data)
    reference = json.loads(data)  # Python's json: bytes with a BOM are read as utf-8-sig
    events = reference["traceEvents"] if layout == "object" else reference
    stats = trace_stats(load_trace(path)).to_dict()
    assert stats["events"] == sum(1 for e in events if e.get("ph") == "X")
    assert stats["kernels"] == sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "kernel") > 0
