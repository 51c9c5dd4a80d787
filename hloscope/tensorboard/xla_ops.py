"""Framework op names for the XLA ops of an XLA CPU xplane, taken from the HLO the xplane itself carries.

XProf's framework op stats read a `tf_op` stat ("<op name>:<op type>") on host events (xprof
`xplane_to_op_metrics_db.cc`, CollectTfActivities); on a GPU or TPU it finds an XLA op's framework op in the HLO
instead, but an XLA CPU run executes its ops on host threads, where the events carry only `hlo_op`, `hlo_module` and
`program_id`, so the tool showed one `IDLE` row. The `/host:metadata` plane holds each program's `HloProto`; every
instruction's `metadata.op_name` / `op_type` is the framework op that produced it (`jit(train_step)/jvp(...)/dot_general`
for JAX, `aten__addmm.3/aten__addmm` for torch_xla). This module reads them with the protobuf runtime and a descriptor
of only the fields it needs (field numbers as in xla/service/hlo.proto and xla/xla_data.proto; the parser skips the
rest), and writes the `tf_op` stat on each XLA op event of the view's copy.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

METADATA_PLANE = "/host:metadata"
HLO_PROTO_STAT = "Hlo Proto"
# XProf's JAX op type (tsl IsJaxOpType): lowercase start, then lowercase, digits and '_', optionally `[...]`.
_JAX_OP_TYPE = re.compile(r"[a-z_][a-z0-9_]*(\[.*\])?")

# (message, [(field, number, type, message type of a sub-message)]): the subset of xla.HloProto read here.
_MESSAGES = (
    ("HloProto", [("hlo_module", 1, "HloModuleProto")]),
    ("HloModuleProto", [("name", 1, None), ("computations", 3, "HloComputationProto")]),
    ("HloComputationProto", [("name", 1, None), ("instructions", 2, "HloInstructionProto")]),
    ("HloInstructionProto", [("name", 1, None), ("opcode", 2, None), ("metadata", 7, "OpMetadata")]),
    ("OpMetadata", [("op_type", 1, None), ("op_name", 2, None)]),
)
_REPEATED = {"computations", "instructions"}


@functools.cache
def hlo_proto_class() -> Any:
    """The message class of `xla.HloProto` limited to module, computations, instructions and their op metadata."""
    file = descriptor_pb2.FileDescriptorProto(name="hloscope/hlo_subset.proto", package="xla", syntax="proto3")
    for message_name, fields in _MESSAGES:
        message = file.message_type.add(name=message_name)
        for field_name, number, sub_message in fields:
            field = message.field.add(name=field_name, number=number)
            field.label = (descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED if field_name in _REPEATED
                           else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
            if sub_message:
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                field.type_name = f".xla.{sub_message}"
            else:
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
    pool = descriptor_pool.DescriptorPool()  # private: never clashes with a real hlo_pb2 someone imports
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("xla.HloProto"))


def tf_op_fullname(op_name: str, op_type: str) -> str:
    """XProf's "<name>:<type>" for an HLO instruction's framework op. JAX leaves `op_type` empty: the primitive is the
    last component of the name (`.../jvp(...)/dot_general` -> type `dot_general`), as XProf's ModelTracker reads it. A
    name with a ':' of its own is given alone (XProf would split it there)."""
    if ":" in op_name:
        return op_name
    kind = op_type or op_name.rsplit("/", 1)[-1]
    return f"{op_name}:{kind}" if _JAX_OP_TYPE.fullmatch(kind) else op_name


def instruction_ops(hlo_proto: bytes) -> dict[str, str]:
    """Instruction name -> tf_op fullname, for every instruction of the module that has an `op_name`.

    Raises google.protobuf's DecodeError when the bytes are not an HloProto."""
    proto = hlo_proto_class().FromString(hlo_proto)
    ops = {}
    for computation in proto.hlo_module.computations:
        for instruction in computation.instructions:
            if instruction.metadata.op_name:
                ops[instruction.name] = tf_op_fullname(instruction.metadata.op_name, instruction.metadata.op_type)
    return ops


def program_ops(space: Any) -> dict[int, dict[str, str]]:
    """Program id -> (instruction name -> tf_op), for every program whose HloProto the metadata plane holds; the
    program id is the entry's `program_id` stat (JAX), else the event metadata's id (torch_xla writes no stat: its
    ops' `program_id` is that id)."""
    metadata = next((p for p in space.planes if p.name == METADATA_PLANE), None)
    if metadata is None:
        return {}
    names = {key: meta.name for key, meta in metadata.stat_metadata.items()}
    programs = {}
    for key, meta in metadata.event_metadata.items():
        hlo, program = None, key
        for stat in meta.stats:
            if names.get(stat.metadata_id) == HLO_PROTO_STAT and stat.WhichOneof("value") == "bytes_value":
                hlo = stat.bytes_value
            elif names.get(stat.metadata_id) == "program_id":
                program = stat.uint64_value or stat.int64_value
        if hlo is not None:
            programs[program] = instruction_ops(hlo)
    return programs


def xprof_sees_training(programs: dict[int, dict[str, str]]) -> bool:
    """Whether XProf will take the profile for training, which is all that decides if its overview page shows the
    step-time graph and the average step time (xprof `xplane_to_op_stats.cc` sets `is_training` from
    `ModelTracker::IsTraining`): an HLO op_name with a JAX backward scope (`transpose(jvp(...))`) or a TensorFlow
    `gradients` / `gradient_tape` scope. Step markers play no part; a profile without HLO is never "training"."""
    for ops in programs.values():
        for fullname in ops.values():
            for scope in fullname.split("/"):
                if scope.startswith(("transpose(", "gradients", "gradient_tape")):
                    return True
    return False


def add_framework_ops(space: Any, programs: dict[int, dict[str, str]] | None = None) -> int:
    """Write a `tf_op` stat on every XLA op event (named after its `hlo_op`, with `program_id`) of the space's other
    planes whose instruction has an op_name, unless it has one already; returns how many events got one. `programs`
    is `program_ops(space)` when the caller has it already."""
    if programs is None:
        programs = program_ops(space)
    if not programs:
        return 0
    added = 0
    for plane in space.planes:
        if plane.name == METADATA_PLANE:
            continue
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        ids = {name: key for key, name in names.items()}
        if "hlo_op" not in ids or "program_id" not in ids:
            continue
        tf_op_id = ids.get("tf_op")
        for line in plane.lines:
            for event in line.events:
                op, program, has_tf_op = None, None, False
                for stat in event.stats:
                    if stat.metadata_id == ids["hlo_op"]:
                        op = names.get(stat.ref_value) if stat.WhichOneof("value") == "ref_value" else stat.str_value
                    elif stat.metadata_id == ids["program_id"]:
                        program = stat.uint64_value or stat.int64_value
                    elif stat.metadata_id == tf_op_id:
                        has_tf_op = True
                fullname = programs.get(program, {}).get(op or "") if program is not None else None
                if fullname is None or has_tf_op:
                    continue
                if tf_op_id is None:
                    tf_op_id = _new_stat_metadata(plane, "tf_op")
                stat = event.stats.add()
                stat.metadata_id = tf_op_id
                stat.str_value = fullname
                added += 1
    return added


def _new_stat_metadata(plane: Any, name: str) -> int:
    key = max(plane.stat_metadata, default=0) + 1
    plane.stat_metadata[key].id = key
    plane.stat_metadata[key].name = name
    return int(key)
