"""Perfetto protobuf traces (.pftrace) read where Kineto JSON is read, with the same results on the same profile.

torch 2.9's Kineto writes JSON even to a path ending .pftrace (checked here), so the protobuf form of the same
profile is written by `to_perfetto` below with Perfetto's TrackEvent layout: thread track descriptors, interned event
names, SLICE_BEGIN / SLICE_END pairs, debug annotations for the arguments, one packet at a time.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import hloscope, python

from hloscope.errors import InputError
from hloscope.tensorboard.convert import convert_kineto_file
from hloscope.trace.load import load_trace
from hloscope.trace.perfetto import TYPE_SLICE_BEGIN, TYPE_SLICE_END, message_classes

PROFILE_ONE_STEP = """
import sys, torch
from torch.profiler import ProfilerActivity, profile, schedule
model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ready = lambda prof: prof.export_chrome_trace(sys.argv[1])  # Kineto exports a profile once
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=2),
             on_trace_ready=ready) as prof:
    for _ in range(3):
        model(torch.randn(8, 32)).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        prof.step()
"""


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> Path:
    """Two tiny training steps profiled by torch.profiler and exported to a .pftrace path; the same bytes also as
    the usual .pt.trace.json."""
    folder = tmp_path_factory.mktemp("torch")
    done = python("-c", PROFILE_ONE_STEP, folder / "w_1.1.pftrace", timeout=600)
    assert done.code == 0, done.stderr[-3000:]
    (folder / "w_1.1.pt.trace.json").write_bytes((folder / "w_1.1.pftrace").read_bytes())
    return folder


def _packet(**fields) -> bytes:
    packet = message_classes()["TracePacket"](**fields)
    body = packet.SerializeToString()
    return b"\x0a" + _varint(len(body)) + body  # Trace.packet (field 1, length-delimited)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def to_perfetto(events: list[dict], target: Path) -> None:
    """Kineto's complete events as a Perfetto protobuf trace: one thread track per (pid, tid), names interned on
    sequence 1, each event a SLICE_BEGIN / SLICE_END pair on its track, its arguments as debug annotations."""
    classes = message_classes()
    by_track: dict[tuple, list[dict]] = defaultdict(list)
    names = {}
    for event in events:
        if event.get("ph") == "X":
            by_track[(event["pid"], event["tid"])].append(event)
            names.setdefault(event["name"], len(names) + 1)
    interned = classes["InternedData"]()
    for name, iid in names.items():
        interned.event_names.add(iid=iid, name=name)
    chunks = [_packet(trusted_packet_sequence_id=1, sequence_flags=1, interned_data=interned)]
    for uuid, ((pid, tid), track_events) in enumerate(sorted(by_track.items(), key=str), 1):
        descriptor = classes["TrackDescriptor"](uuid=uuid)
        descriptor.thread.pid, descriptor.thread.tid = pid, tid
        chunks.append(_packet(trusted_packet_sequence_id=1, track_descriptor=descriptor))
        open_ends: list[int] = []
        for event in sorted(track_events, key=lambda e: (e["ts"], -e["dur"])):
            start, end = round(event["ts"] * 1000), round((event["ts"] + event["dur"]) * 1000)
            while open_ends and open_ends[-1] <= start:
                chunks.append(_end(uuid, open_ends.pop()))
            begin = classes["TrackEvent"](type=TYPE_SLICE_BEGIN, track_uuid=uuid, name_iid=names[event["name"]],
                                          categories=[event.get("cat", "")])  # fmt: skip
            for key, value in (event.get("args") or {}).items():
                annotation = begin.debug_annotations.add(name=key)
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    annotation.string_value = json.dumps(value) if not isinstance(value, str) else value
                elif isinstance(value, int):
                    annotation.int_value = value
                else:
                    annotation.double_value = value
            chunks.append(_packet(trusted_packet_sequence_id=1, timestamp=start, track_event=begin))
            open_ends.append(end)
        while open_ends:
            chunks.append(_end(uuid, open_ends.pop()))
    target.write_bytes(b"".join(chunks))


def _end(uuid: int, end_ns: int) -> bytes:
    event = message_classes()["TrackEvent"](type=TYPE_SLICE_END, track_uuid=uuid)
    return _packet(trusted_packet_sequence_id=1, timestamp=end_ns, track_event=event)


def test_torch_writes_json_even_to_a_pftrace_path_and_it_is_read_as_json(profiled):
    pftrace = profiled / "w_1.1.pftrace"
    assert pftrace.read_bytes().lstrip()[:1] == b"{"  # JSON, whatever the name says
    trace = load_trace(pftrace)
    assert trace.format == "kineto"
    names = [event.name for event in trace.events]
    assert len(names) > 100 and {"ProfilerStep#1", "ProfilerStep#2", "aten::addmm"} <= set(names)


def _stats(path: Path) -> dict:
    result = hloscope("trace", "stats", path, "--json")
    assert result.code == 0, result.stderr[-2000:]
    (trace,) = json.loads(result.stdout)["traces"]
    return trace


def test_perfetto_protobuf_gives_the_same_events_and_statistics(profiled, tmp_path):
    # Kineto's span records name their process and thread ("Spans", "PyTorch Profiler"): Perfetto's thread tracks take
    # numbers, so the comparison is on the events of the numbered threads (every op and step marker)
    trace_json = json.loads((profiled / "w_1.1.pt.trace.json").read_text())
    events = [e for e in trace_json["traceEvents"] if isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int)]
    assert len(events) > 0.9 * len(trace_json["traceEvents"])
    source = tmp_path / "numbered.pt.trace.json"
    source.write_text(json.dumps({**trace_json, "traceEvents": events}))
    protobuf = tmp_path / "w_1.1.pftrace"
    to_perfetto(events, protobuf)
    trace = load_trace(protobuf)
    assert trace.format == "perfetto"

    def summary(trace_events):
        return sorted((e.name, e.start_us, e.dur_us) for e in trace_events)

    ours, theirs = summary(trace.events), summary(load_trace(source).events)
    assert [name for name, _, _ in ours] == [name for name, _, _ in theirs]
    # times: integer nanoseconds in the protobuf, microseconds with 3 decimals in the JSON
    assert [t for _, *times in ours for t in times] == pytest.approx([t for _, *times in theirs for t in times],
                                                                     abs=0.002)  # fmt: skip
    from_json, from_protobuf = _stats(source), _stats(protobuf)
    assert [s["step"] for s in from_protobuf["per_step"]] == [s["step"] for s in from_json["per_step"]] != []
    for ours, theirs in zip(from_protobuf["per_step"], from_json["per_step"], strict=True):
        assert ours["host_duration_us"] == pytest.approx(theirs["host_duration_us"], abs=0.01)
    assert from_protobuf["events"] == from_json["events"]


@pytest.mark.parametrize(("content", "message"), [
    (b"\x12\x03abc", "not a Perfetto trace: byte 0 starts field 2"),
    (b"\x0a\x05ab", "truncated Perfetto trace"),
    (b"\x0a\x02\xff\xff", "not a Perfetto trace: packet 0 does not decode"),
    (b"\x0a", "truncated Perfetto trace"),
])
def test_bad_perfetto_file_is_one_line_exit_2(tmp_path, content, message):
    bad = tmp_path / "bad.pftrace"
    bad.write_bytes(content)
    with pytest.raises(InputError, match=message):
        list(load_trace(bad).events)
    result = hloscope("trace", "stats", bad)
    assert result.code == 2
    assert result.stderr.strip().count("\n") == 0 and str(bad) in result.stderr and "Traceback" not in result.stderr


def test_tensorboard_converts_the_perfetto_form_like_the_json(profiled, tmp_path):
    trace_json = json.loads((profiled / "w_1.1.pt.trace.json").read_text())
    events = [e for e in trace_json["traceEvents"] if isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int)]
    source = tmp_path / "src" / "w_1.1.pt.trace.json"
    source.parent.mkdir()
    source.write_text(json.dumps({"traceEvents": events}))
    to_perfetto(events, tmp_path / "src" / "w_1.1.pftrace")
    _, from_json = convert_kineto_file(source, tmp_path / "json")
    xplane, from_protobuf = convert_kineto_file(tmp_path / "src" / "w_1.1.pftrace", tmp_path / "protobuf")
    assert xplane.name == "w_1.xplane.pb"
    assert from_protobuf.events == from_json.events == sum(1 for e in events if e["ph"] == "X")
    assert from_protobuf.step_ms == pytest.approx(from_json.step_ms, abs=1e-5) and len(from_json.step_ms) == 2
