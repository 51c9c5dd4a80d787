"""The Kineto reader's compiled event loop (hloscope/trace/_kineto_native.c) against the Python loop it speeds up
(`_EventBuilder.structs_to_events`), and the fast gzip reader (isal) against the standard library's.

The Python loop is the reference: every Kineto / Chrome JSON file of the fixtures is read both ways and every Event
(every field, as repr shows it) and every error must be the same; synthetic chunks cover the cases no fixture has."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest
from helpers import FIXTURES

from hloscope.errors import InputError
from hloscope.trace import kineto, kineto_chunks
from hloscope.trace.model import Event

NATIVE = kineto._native
needs_native = pytest.mark.skipif(NATIVE is None, reason="the C extension is not built here (no compiler)")
DATA = Path(__file__).parent / "data"


def _json_traces() -> list[Path]:
    roots = [root for root in (FIXTURES, DATA) if root.is_dir()]
    return sorted(p for root in roots for p in root.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))


def _read(path: Path, native, monkeypatch) -> tuple[list[str], str | None]:
    """Every Event of the file as repr shows it, and the error that ended the reading (None: none)."""
    monkeypatch.setattr(kineto, "_native", native)
    events: list[str] = []
    try:
        for event in kineto.iter_events(path):
            events.append(repr(event))
    except (InputError, OSError, EOFError, zlib.error) as error:  # iter_events alone lets a damaged gzip's error out
        return events, f"{type(error).__name__}: {error}"
    return events, None


@needs_native
def test_every_fixture_reads_the_same_both_ways(monkeypatch):
    files = _json_traces()
    if not files:
        pytest.skip(f"no JSON traces under {FIXTURES} or {DATA}")
    read_as_traces = 0
    for path in files:
        python = _read(path, None, monkeypatch)
        assert _read(path, NATIVE, monkeypatch) == python, path
        read_as_traces += python[1] is None and len(python[0]) > 0
    assert read_as_traces >= 10 or not FIXTURES.is_dir()


def _trace(tmp_path: Path, events: list[dict], name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


# Every case of the loop: metadata arriving between events (names change, the place cache is cleared), no args,
# correlation ids of every type and size, correlation_id only, string and missing streams, step markers, MTIA's own
# device event kinds, numeric names, no dur, categories no rule knows, XLA events with hlo_op / hlo_module.
_EVENTS = [
    {"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "ts": 10, "dur": 5, "pid": 0, "tid": 7,
     "args": {"correlation": 1, "stream": 7}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 9, "dur": 1, "pid": 1, "tid": 2,
     "args": {"correlation": 1}},
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 8, "dur": 3, "pid": 1, "tid": 2, "args": {}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 8.5, "pid": 1, "tid": 2, "args": {"correlation_id": 3}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "ts": 1, "dur": 100, "pid": 1, "tid": 2,
     "args": {}},
    {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#5", "ts": 101, "dur": 100, "pid": 1, "tid": 2, "args": {}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "ts": 20, "dur": 5, "pid": 0, "tid": 8,
     "args": {"correlation": 2 ** 62, "stream": "8"}},
    {"ph": "X", "cat": "kernel", "name": "k", "ts": 21, "dur": 1, "pid": 0, "tid": 8, "args": {"correlation": 2 ** 64}},
    {"ph": "X", "cat": "kernel", "name": "k", "ts": 22, "dur": 1, "pid": 0, "tid": 8, "args": {"correlation": "17"}},
    {"ph": "X", "cat": "kernel", "name": "k", "ts": 23, "dur": 1, "pid": 0, "tid": 8, "args": {"correlation": -4}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 24, "dur": 2, "pid": 0, "tid": 7,
     "args": {"correlation_id": 5, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": 12345, "ts": 25, "dur": 1, "pid": "gpu", "tid": "s", "args": {}},
    {"ph": "X", "cat": "kernel", "name": "no_args", "ts": 26, "dur": 1, "pid": 0, "tid": 7},
    {"ph": "X", "cat": "mtia_ccp_events", "name": "dma_request", "ts": 27, "dur": 1, "pid": 3, "tid": 1,
     "args": {"correlation": 6}},
    {"ph": "X", "cat": "mtia_ccp_events", "name": "event_wait", "ts": 28, "dur": 1, "pid": 3, "tid": 1, "args": {}},
    {"ph": "X", "cat": "new_gpu_queue", "name": "work", "ts": 29, "dur": 1, "pid": 4, "tid": 1, "args": {"stream": 2}},
    {"ph": "X", "cat": None, "name": "fusion.3", "ts": 30, "dur": 2, "pid": 5, "tid": 1,
     "args": {"hlo_op": "fusion.3", "hlo_module": "jit_train_step"}},
    {"ph": "X", "cat": "Trace", "name": "step", "ts": 31, "dur": 2, "pid": 5, "tid": 1, "args": {"step_num": "9"}},
    {"ph": "B", "name": "begin", "ts": 1, "pid": 1, "tid": 2},
    {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
    {"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "ts": 40, "dur": 5, "pid": 0, "tid": 7,
     "args": {"correlation": 11, "stream": 7}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 41, "dur": 3, "pid": 1, "tid": 2,
     "args": {"correlation": 12}},
]


@needs_native
def test_every_case_of_the_loop_reads_the_same_both_ways(tmp_path, monkeypatch):
    path = _trace(tmp_path, _EVENTS)
    python = _read(path, None, monkeypatch)
    assert python[1] is None and len(python[0]) == sum(e["ph"] == "X" for e in _EVENTS)
    assert _read(path, NATIVE, monkeypatch) == python


@needs_native
def test_an_event_without_ts_is_reported_as_the_python_loop_reports_it(tmp_path, monkeypatch):
    path = _trace(tmp_path, [*_EVENTS[:3], {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 1}])
    python = _read(path, None, monkeypatch)
    assert python[1] is not None and "ts" in python[1]
    assert _read(path, NATIVE, monkeypatch) == python


@needs_native
def test_the_maker_refuses_classes_whose_slots_it_does_not_know():
    event_type, args_type = kineto_chunks.struct_types()
    tables = ["names", "other", 1 << 62, {}, frozenset(), {}, {}, {}, {}, *[print] * 7, kineto_chunks.GiveUp]
    NATIVE.Maker(Event, event_type, args_type, *tables)  # the real classes

    class NotAnEvent:
        __slots__ = ("name",)

    for classes in ((NotAnEvent, event_type, args_type), (event_type, event_type, args_type),
                    (Event, args_type, event_type), (Event, event_type, Event)):
        with pytest.raises(TypeError, match="slot"):
            NATIVE.Maker(*classes, *tables)


def test_gzip_read_by_isal_gives_the_same_events_and_errors(tmp_path, monkeypatch):
    """A .json.gz is decompressed by isal on the fast path; a damaged one is re-read by the standard library, so every
    error names the same cause and place as without isal."""
    text = json.dumps({"traceEvents": _EVENTS * 50}).encode()
    whole = gzip.compress(text)
    cases = {"whole.json.gz": whole, "truncated.json.gz": whole[: len(whole) // 2], "tail.json.gz": whole[:-3],
             "flipped.json.gz": whole[:200] + bytes([whole[200] ^ 0xFF]) + whole[201:],
             "crc.json.gz": whole[:-8] + bytes([whole[-8] ^ 0xFF]) + whole[-7:],
             "bad_end.json.gz": gzip.compress(text[:-1] + b', "x": }')}
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with_isal = _read(path, NATIVE, monkeypatch)
        monkeypatch.setattr(kineto, "_open_for_chunks", kineto._open)
        without = _read(path, NATIVE, monkeypatch)
        monkeypatch.undo()
        assert with_isal == without, name
        assert (without[1] is None) == (name == "whole.json.gz"), (name, without[1])


def test_events_are_made_with_every_field_of_event():
    """The compiled loop writes Event's slots in place: it must know every one of them, in order."""
    assert Event.__slots__ == ("name", "start_us", "dur_us", "kind", "device", "lane", "process", "category", "step",
                               "hlo_op", "hlo_module", "correlation", "category_source")


@needs_native
def test_the_compiled_iterator_ends_after_an_error_and_a_cycle_through_it_is_collected():
    import gc
    import weakref

    decode = kineto_chunks._types()[1].decode
    complete = [e for e in _EVENTS if e["ph"] == "X"][:2]
    no_ts = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 1}
    events = kineto._EventBuilder().from_structs(decode(json.dumps([complete[0], no_ts, complete[1]]).encode()))
    assert isinstance(next(events), Event)
    with pytest.raises(kineto_chunks.GiveUp):
        next(events)
    with pytest.raises(StopIteration):  # finished, as the Python generator is after raising
        next(events)

    class Holder:
        pass

    chunk = decode(json.dumps(complete).encode())
    holder = Holder()
    holder.events = kineto._EventBuilder().from_structs(chunk)  # holder -> iterator -> chunk -> holder
    chunk.append(holder)
    alive = weakref.ref(holder)
    del holder, chunk
    gc.collect()
    assert alive() is None
