"""The shape of a `trace stats --state` record as msgspec structs: a record is decoded into these (every field present
with its type) before anything of it is used, so a crafted or damaged record is a mismatch, never a KeyError.
Imported only for --state (hloscope/trace/job.py: StateDir)."""

# No `from __future__ import annotations` here: msgspec reads the struct annotations at class creation.
from typing import Any

import msgspec


class StepRow(msgspec.Struct):
    step: int | None
    host_duration_us: float
    kernels: int
    device_busy_us: float
    device_idle_us: float
    idle_gaps: int
    host_runtime_us: float


class Stats(msgspec.Struct):
    file: str
    format: str
    steps: int
    events: int
    kernels: int
    devices: int
    device_time_us: float
    host_launch_us: float
    host_runtime_us: float
    categories: dict[str, float]
    top: list[dict[str, Any]]
    hlo_ops: list[dict[str, Any]]
    per_step: list[StepRow]
    rank: int | None


class Collectives(msgspec.Struct):
    names: list[str]
    name: list[int]
    start_us: list[float]
    dur_us: list[float]


class Result(msgspec.Struct):
    file: str
    stats: Stats
    kernel_counts: dict[str, int]
    collectives: Collectives


class Identity(msgspec.Struct, forbid_unknown_fields=True):
    file: str
    size: int
    mtime_ns: int
    content: str  # BLAKE2b of the trace's bytes
    options: dict[str, Any]
    version: int


class Record(msgspec.Struct, forbid_unknown_fields=True):
    identity: Identity
    result: Result
