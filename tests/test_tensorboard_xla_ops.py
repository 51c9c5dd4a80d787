"""What the view adds for XProf's tools: framework ops of XLA CPU runs (from the xplane's own HLO) and PyTorch
allocation records for the memory profile, each checked with XProf's own converter."""

from __future__ import annotations

import json
import mmap
from pathlib import Path

import pytest

from hloscope.tensorboard.convert import convert_kineto_file
from hloscope.tensorboard.xla_ops import (
    add_framework_ops,
    hlo_proto_class,
    program_ops,
    tf_op_fullname,
    xprof_sees_training,
)
from hloscope.trace import xplane_proto
from hloscope.trace.xplane_proto import xspace_class


def tool(xplane: Path, name: str):
    from xprof.convert.raw_to_tool_data import xspace_to_tool_data

    data, _ = xspace_to_tool_data([str(xplane)], name, {})
    return json.loads(data if isinstance(data, str) else data.decode())


def _embedded_fields(file_name: str) -> dict[str, dict[str, int]]:
    """Message -> field -> number of one .proto as XProf's own library embeds it."""
    from google.protobuf import descriptor_pb2

    library = xplane_proto._package_file("xprof", "convert/profiler_plugin_c_api.so")
    name = file_name.encode()
    with open(library, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        start = data.find(b"\n" + bytes([len(name)]) + name)
        while start != -1:
            end = xplane_proto._end_of_fields(data, start)
            parsed = descriptor_pb2.FileDescriptorProto()
            parsed.ParseFromString(bytes(data[start:end]))
            if parsed.message_type:
                return {m.name: {f.name: f.number for f in m.field} for m in parsed.message_type}
            start = data.find(b"\n" + bytes([len(name)]) + name, start + 1)
    raise AssertionError(f"{file_name} not in {library}")


def test_hlo_subset_has_xlas_field_numbers():
    real = _embedded_fields("xla/service/hlo.proto") | _embedded_fields("xla/xla_data.proto")
    message = hlo_proto_class().DESCRIPTOR
    seen = set()
    stack = [message]
    while stack:
        descriptor = stack.pop()
        if descriptor.name in seen:
            continue
        seen.add(descriptor.name)
        for field in descriptor.fields:
            assert real[descriptor.name][field.name] == field.number, (descriptor.name, field.name)
            if field.message_type is not None:
                stack.append(field.message_type)
    assert seen == {"HloProto", "HloModuleProto", "HloComputationProto", "HloInstructionProto", "OpMetadata"}


@pytest.mark.parametrize(("op_name", "op_type", "expected"), [
    ("jit(train_step)/jvp(ViT)/vit/dot_general", "", "jit(train_step)/jvp(ViT)/vit/dot_general:dot_general"),
    ("aten__addmm.3/aten__addmm", "aten__addmm", "aten__addmm.3/aten__addmm:aten__addmm"),
    ("jit(step)/jvp(aten::gelu)/erfc", "", "jit(step)/jvp(aten::gelu)/erfc"),  # a ':' of its own: the name alone
    ("model/Dense", "", "model/Dense"),  # not a JAX op type
])
def test_tf_op_fullname(op_name, op_type, expected):
    assert tf_op_fullname(op_name, op_type) == expected


def _space_with_one_xla_op(op_name: str):
    """An XLA CPU xplane in miniature, laid out as jaxlib writes it: the program's HloProto on /host:metadata (with a
    program_id stat), and on a host thread one execution of its `dot.1` with hlo_op (a reference), program_id."""
    hlo = hlo_proto_class()()
    computation = hlo.hlo_module.computations.add(name="main")
    computation.instructions.add(name="p0", opcode="parameter")
    dot = computation.instructions.add(name="dot.1", opcode="dot")
    dot.metadata.op_name = op_name
    space = xspace_class()()
    metadata = space.planes.add(id=1, name="/host:metadata")
    metadata.stat_metadata[1].id, metadata.stat_metadata[1].name = 1, "Hlo Proto"
    metadata.stat_metadata[2].id, metadata.stat_metadata[2].name = 2, "program_id"
    program = metadata.event_metadata[1]
    program.id, program.name = 1, "jit_train_step(150)"
    program.stats.add(metadata_id=1, bytes_value=hlo.SerializeToString())
    program.stats.add(metadata_id=2, uint64_value=150)
    host = space.planes.add(id=2, name="/host:CPU")
    for key, name in enumerate(("hlo_op", "program_id", "dot.1"), 1):
        host.stat_metadata[key].id, host.stat_metadata[key].name = key, name
    host.event_metadata[1].id, host.event_metadata[1].name = 1, "dot.1"
    line = host.lines.add(id=7, name="tf_XLAPjRtCpuClient/7", timestamp_ns=1000)
    for offset in (0, 5_000_000):
        event = line.events.add(metadata_id=1, offset_ps=offset, duration_ps=2_000_000)
        event.stats.add(metadata_id=1, ref_value=3)
        event.stats.add(metadata_id=2, uint64_value=150)
    return space


def test_xla_ops_get_their_framework_op_and_xprof_lists_them(tmp_path):
    op_name = "jit(train_step)/jvp(ViT)/vit/dot_general"
    space = _space_with_one_xla_op(op_name)
    xplane = tmp_path / "before" / "host.xplane.pb"
    xplane.parent.mkdir()
    xplane.write_bytes(space.SerializeToString())
    assert [row["c"][3]["v"] for row in tool(xplane, "framework_op_stats")[0]["rows"]] == ["IDLE"]
    assert add_framework_ops(space) == 2
    assert add_framework_ops(space) == 0  # once only
    served = tmp_path / "after" / "host.xplane.pb"
    served.parent.mkdir()
    served.write_bytes(space.SerializeToString())
    table = tool(served, "framework_op_stats")[0]
    ids = [column["id"] for column in table["cols"]]
    rows = [dict(zip(ids, (cell["v"] for cell in row["c"]))) for row in table["rows"]]
    (dot,) = [row for row in rows if row["operation"] != "IDLE"]
    assert (dot["operation"], dot["type"], dot["occurrences"]) == (op_name, "dot_general", 2)
    assert dot["total_time"] == pytest.approx(4.0)  # two 2 µs executions


def test_xprof_takes_a_profile_for_training_only_from_backward_scopes():
    backward = _space_with_one_xla_op("jit(train_step)/transpose(jvp(ViT))/dot_general")
    forward = _space_with_one_xla_op("jit(train_step)/jvp(ViT)/dot_general")
    assert xprof_sees_training(program_ops(backward)) and not xprof_sees_training(program_ops(forward))
    assert not xprof_sees_training({})  # a converted PyTorch profile: no HLO


def _memory_record(ts: float, size: int, total: int, address: int) -> dict:
    """One PyTorch allocation record as torch.profiler(profile_memory=True) writes it (torch 2.9, CPU)."""
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Total Reserved": 0, "Total Allocated": total, "Bytes": size, "Device Id": -1, "Device Type": 0,
                     "Addr": address, "finished": False, "Ev Idx": int(ts)}}  # fmt: skip


def test_pytorch_allocation_records_fill_xprofs_memory_profile(tmp_path):
    records = [_memory_record(10, 2048, 2048, 1000), _memory_record(11, 4096, 6144, 2000),
               _memory_record(12, -2048, 4096, 1000), _memory_record(13, 8192, 12288, 3000),
               _memory_record(14, -8192, 4096, 3000)]  # fmt: skip
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 5, "dur": 20},
              {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 9, "dur": 10}, *records]
    trace = tmp_path / "w_1.1.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": 1}))
    xplane, conversion = convert_kineto_file(trace, tmp_path / "out")
    assert conversion.memory_records == 5 and conversion.step_ms == [0.02]
    profile = tool(xplane, "memory_profile")
    assert profile["memoryIds"] == ["cpu"]
    summary = profile["memoryProfilePerAllocator"]["cpu"]["profileSummary"]
    assert int(summary["peakStats"]["peakBytesInUse"]) == 12288 == max(r["args"]["Total Allocated"] for r in records)
    assert int(summary["peakBytesUsageLifetime"]) == 12288
