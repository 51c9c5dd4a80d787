"""Which of XProf's tools can show a run, from the planes of its XSpace (what XProf's converters read)."""

from __future__ import annotations

from pathlib import Path

from hloscope.errors import MissingDependency
from hloscope.trace.xplane_proto import xspace_class

# XProf (xplane_to_op_stats.cc) builds its device op database, which op profile, HLO op stats and the roofline model
# read, only from "/device:GPU:" and "/device:TPU:" planes; an XLA CPU profile runs its HLO on "/host:CPU" threads.
DEVICE_PREFIXES = ("/device:GPU:", "/device:TPU:")
CPU_NOTE = ("op profile, HLO op stats and roofline model show nothing for these CPU profiles: XProf builds them only "
            "from GPU/TPU device planes, and on the CPU, XLA and PyTorch run their ops on host threads (hloscope hlo stats RUN and "
            "hloscope trace stats RUN give the per-op times)")


def plane_names(xplanes: list[Path]) -> set[str]:
    names: set[str] = set()
    for path in xplanes:
        space = xspace_class()()
        space.ParseFromString(path.read_bytes())
        names.update(plane.name for plane in space.planes)
    return names


def is_cpu_only(xplanes: list[Path]) -> bool:
    """True when no plane of the session is a GPU or TPU: XProf's device-op tools have nothing to read."""
    try:
        from google.protobuf.message import DecodeError
    except ImportError:  # no protobuf runtime: the planes cannot be read
        return False
    try:
        return not any(name.startswith(DEVICE_PREFIXES) for name in plane_names(xplanes))
    except (OSError, DecodeError, RuntimeError, ValueError, MissingDependency):  # unreadable, undecodable, no schema
        return False
