"""The shape of a `trace stats --state` record: the identity of the trace it caches, and its summary, which is the
job view's own FileSummary (hloscope/trace/results.py: one definition of a trace's record). A record is decoded into
these (every field present with its type) before anything of it is used, so a crafted or damaged record is a
mismatch, never a KeyError. Imported only for --state (hloscope/trace/job.py: StateDir)."""

from __future__ import annotations

from typing import Any

import msgspec

from hloscope.trace.results import FileSummary


class Identity(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    file: str
    size: int
    mtime_ns: int
    content: str  # BLAKE2b of the trace's bytes
    options: dict[str, Any]
    version: int


class Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    identity: Identity
    result: FileSummary
