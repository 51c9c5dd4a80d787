"""XLA's GPU thunk sequence: the ground-truth list of what a compiled GPU executable launches, in order.

XLA writes `<module>.thunk_sequence.txt` next to the optimized GPU HLO when dumping (`--xla_dump_to`). One line per
thunk, e.g. (spacing varies)::

    002: kCustomKernel [source       | next=005 (3)] loop_pad_fusion grid: [800, 1, 1] threads: [128, 1, 1]  shared_memory: 0 bytes
    047: kCublasLtMatmul [prev=046 (1)   | next=048 (1)    ] kCublasLtMatmul

`kCustomKernel` is a kernel XLA generated (a fusion; the name is the kernel's, i.e. the HLO instruction name with `.`
written as `_`, and identical fusions share one kernel name); library calls (`kCublasLtMatmul`, `kGemm`,
`kConvolution`, ...) and copies (`kCopy`) carry no launch dimensions. Nested sequences (`kCommandBuffer`, `kWhile`)
indent their children; those are kept with their depth.

When XLA also wrote `<module>.thunk_metadata.txt` (a text proto with one `thunk_metadata { thunk_info {
profile_annotation: "<hlo op>" thunk_id: N } thunk_kind: ... }` per thunk), `hlo_op` gives each thunk's HLO
instruction, including the library calls.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hloscope import files
from hloscope.errors import InputError, ParseError
from hloscope.files import bounded_int
from hloscope.hlo.load import dump_sibling
from hloscope.limits import MAX_BLOCK_DIMS, MAX_GRID_DIMS, MAX_SHARED_MEMORY_BYTES, MAX_THREADS_PER_BLOCK

# Thunks that launch a kernel XLA generated, library calls, and pure data movement. Anything else (control flow,
# command buffers, collectives) is listed by kind only.
KERNEL_KINDS = frozenset({"kCustomKernel", "kKernel"})
LIBRARY_KINDS = frozenset({"kCublasLtMatmul", "kGemm", "kConvolution", "kCuDnn", "kFft", "kCholesky",
                           "kTriangularSolve", "kNorm", "kCustomCall"})
COPY_KINDS = frozenset({"kCopy", "kMemset32BitValue", "kMemzero", "kDeviceToDeviceCopy", "kHostToDeviceCopy",
                        "kDeviceToHostCopy", "kDynamicMemcpy"})

_LINE = re.compile(r"^(?P<indent>\s*)(?P<index>\d+):\s+(?P<kind>k\w+)\s*\[(?P<deps>[^\]]*)\]\s*(?P<rest>.*?)\s*$")
# Numbers are taken as any token here and checked one by one (_dims, _shared_memory), so that a negative or absurd one
# is refused by name at its column rather than as a malformed line.
_LAUNCH = re.compile(r"^(?P<name>\S+)\s+grid:\s*\[(?P<grid>[^\]]*)\]\s+threads:\s*\[(?P<block>[^\]]*)\]"
                     r"\s+shared_memory:\s*(?P<shmem>\S+)\s*bytes$")
_METADATA = re.compile(r'thunk_metadata\s*\{\s*thunk_info\s*\{(?P<info>[^}]*)\}\s*thunk_kind:\s*"(?P<kind>\w+)"\s*\}')
_ANNOTATION = re.compile(r'profile_annotation:\s*"(?P<op>[^"]*)"')
_THUNK_ID = re.compile(r"thunk_id:\s*(?P<id>\d+)")


@dataclass(frozen=True)
class Thunk:
    index: int                      # the number XLA printed (1-based, in execution order)
    kind: str                       # kCustomKernel, kCublasLtMatmul, kConvolution, kCopy, ...
    name: str | None                # kernel name for launches; None for thunks without one
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    shared_memory_bytes: int | None = None
    depth: int = 0                  # 0 at top level; >0 inside a command buffer / while body
    hlo_op: str | None = None       # from thunk_metadata.txt when present
    line: int = 0

    @property
    def category(self) -> str:
        """'kernel' (XLA-generated), 'library' (cuBLAS/cuDNN/...), 'copy', or 'other'."""
        if self.kind in KERNEL_KINDS:
            return "kernel"
        if self.kind in LIBRARY_KINDS:
            return "library"
        if self.kind in COPY_KINDS:
            return "copy"
        return "other"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "category": self.category, "name": self.name,
                "hlo_op": self.hlo_op, "grid": list(self.grid) if self.grid else None,
                "block": list(self.block) if self.block else None,
                "threads_per_block": _product(self.block) if self.block else None,
                "blocks": _product(self.grid) if self.grid else None,
                "shared_memory_bytes": self.shared_memory_bytes, "depth": self.depth}


@dataclass
class ThunkSequence:
    path: str
    thunks: list[Thunk] = field(default_factory=list)

    def counts_by_kind(self) -> dict[str, int]:
        return dict(Counter(t.kind for t in self.thunks))

    def counts_by_category(self) -> dict[str, int]:
        counts = Counter(t.category for t in self.thunks)
        return {c: counts.get(c, 0) for c in ("kernel", "library", "copy", "other")}

    @property
    def launches(self) -> list[Thunk]:
        """Thunks that launch a generated kernel, with grid/block/shared memory: XLA's own launch list."""
        return [t for t in self.thunks if t.kind in KERNEL_KINDS]

    def summary(self) -> dict[str, Any]:
        """Plain-data summary for JSON output: counts and the launch list."""
        return {"file": self.path, "thunks": len(self.thunks), "by_kind": self.counts_by_kind(),
                "by_category": self.counts_by_category(), "kernel_launches": len(self.launches),
                "library_calls": self.counts_by_category()["library"], "copies": self.counts_by_category()["copy"],
                "launch_list": [t.to_dict() for t in self.thunks]}


def _product(dims: tuple[int, ...]) -> int:
    out = 1
    for d in dims:
        out *= d
    return out


def _dims(text: str, path: str, line: int, col: int, what: str, bounds: tuple[int, int, int]) -> tuple[int, int, int]:
    """A launch's grid or block, `[x, y, z]`: three whole numbers, each from 1 to its CUDA bound (limits.py); anything
    else is a ParseError at the offending number."""
    parts = text.split(",")
    if len(parts) != 3:
        raise ParseError(path, f"expected three {what} dimensions, got [{text[:60]}]", line, col)
    dims: list[int] = []
    offset = 0
    for axis, part, bound in zip("xyz", parts, bounds):
        at = col + offset + len(part) - len(part.lstrip())
        offset += len(part) + 1
        number = part.strip()
        if not re.fullmatch(r"[+-]?\d+", number):
            raise ParseError(path, f"{what} {axis} {number[:40]!r} is not a whole number", line, at)
        value = bounded_int(number, path, line, at, f"{what} dimension")
        if not 1 <= value <= bound:
            raise ParseError(path, f"{what} {axis} of {value:,}: a CUDA launch has 1 to {bound:,} there, not a launch "
                                   "XLA made", line, at)
        dims.append(value)
    return dims[0], dims[1], dims[2]


def _threads(block: tuple[int, int, int], path: str, line: int, col: int) -> tuple[int, int, int]:
    threads = _product(block)
    if threads > MAX_THREADS_PER_BLOCK:
        raise ParseError(path, f"a block of {block[0]} x {block[1]} x {block[2]} = {threads:,} threads: a CUDA block has "
                               f"at most {MAX_THREADS_PER_BLOCK:,}", line, col)
    return block


def _shared_memory(text: str, path: str, line: int, col: int) -> int:
    if not re.fullmatch(r"[+-]?\d+", text):
        raise ParseError(path, f"shared memory {text[:40]!r} is not a whole number of bytes", line, col)
    value = bounded_int(text, path, line, col, "shared memory size")
    if not 0 <= value <= MAX_SHARED_MEMORY_BYTES:
        raise ParseError(path, f"shared memory of {value:,} bytes: a CUDA block has 0 to {MAX_SHARED_MEMORY_BYTES:,} "
                               f"({MAX_SHARED_MEMORY_BYTES >> 10} KiB), not a launch XLA made", line, col)
    return value


def parse_thunk_sequence_text(text: str, path: str = "<string>") -> ThunkSequence:
    """Parse the text of a thunk_sequence.txt. Raises ParseError (with line:column) on a line that is not a thunk."""
    seq = ThunkSequence(path=path)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        m = _LINE.match(raw)
        if not m:
            raise ParseError(path, f"not a thunk line: {raw.strip()[:80]!r}", lineno, len(raw) - len(raw.lstrip()) + 1)
        kind, rest = m["kind"], m["rest"]
        depth = len(m["indent"]) // 4
        launch = _LAUNCH.match(rest)
        if launch:
            col = m.start("rest") + 1
            block_col = col + launch.start("block")
            seq.thunks.append(Thunk(
                index=bounded_int(m["index"], path, lineno, m.start("index") + 1, "thunk index"), kind=kind,
                name=launch["name"],
                grid=_dims(launch["grid"], path, lineno, col + launch.start("grid"), "grid", MAX_GRID_DIMS),
                block=_threads(_dims(launch["block"], path, lineno, block_col, "block", MAX_BLOCK_DIMS), path, lineno,
                               block_col),
                shared_memory_bytes=_shared_memory(launch["shmem"], path, lineno, col + launch.start("shmem")),
                depth=depth, line=lineno))
        else:
            if "grid:" in rest:
                raise ParseError(path, f"malformed launch dimensions: {rest[:80]!r}", lineno, m.start("rest") + 1)
            # Library calls and copies repeat their kind as the name; keep None for "no name".
            name = rest if rest and rest != kind else None
            seq.thunks.append(Thunk(index=bounded_int(m["index"], path, lineno, m.start("index") + 1, "thunk index"),
                                    kind=kind, name=name,
                                    depth=depth, line=lineno))
    if not seq.thunks:
        raise InputError(path, "no thunks found (empty or not a thunk_sequence.txt)")
    return seq


def parse_thunk_metadata_text(text: str) -> dict[int, tuple[str, str]]:
    """thunk_metadata.txt -> {thunk_id: (thunk_kind, hlo_op)} for the thunks that have an id."""
    out: dict[int, tuple[str, str]] = {}
    for m in _METADATA.finditer(text):
        tid, op = _THUNK_ID.search(m["info"]), _ANNOTATION.search(m["info"])
        if tid and op and len(tid["id"]) <= 30:  # an absurd id names no thunk
            out[int(tid["id"])] = (m["kind"], op["op"])
    return out


def metadata_path_for(thunk_sequence_path: str | os.PathLike[str]) -> Path:
    p = Path(thunk_sequence_path)
    return p.with_name(p.name.replace("thunk_sequence.txt", "thunk_metadata.txt"))


def parse_thunk_sequence(path: str | os.PathLike[str]) -> ThunkSequence:
    """Read `*.thunk_sequence.txt` (and its sibling thunk_metadata.txt, when XLA wrote one, for HLO op names)."""
    p = Path(path)
    text = files.read_text(p, "a thunk_sequence.txt", max_bytes=1 << 30)
    seq = parse_thunk_sequence_text(text, os.fspath(p))
    meta_path = metadata_path_for(p)
    if meta_path != p and files.is_regular(meta_path):
        meta = parse_thunk_metadata_text(files.read_bytes(meta_path, "a thunk_metadata.txt", max_bytes=1 << 30)
                                         .decode("utf-8", "replace"))
        seq.thunks = [_with_op(t, meta.get(t.index)) for t in seq.thunks]
    return seq


def _with_op(thunk: Thunk, meta: tuple[str, str] | None) -> Thunk:
    if meta is None or meta[0] != thunk.kind:
        return thunk
    return Thunk(**{**thunk.__dict__, "hlo_op": meta[1]})


def find_thunk_sequence(module_file: str | os.PathLike[str]) -> Path | None:
    """The thunk_sequence.txt XLA wrote beside a GPU HLO dump file (or one of its reports), or None.

    `module_0001.jit_train_step.sm_9.0a_gpu_after_optimizations.txt` -> `module_0001.jit_train_step.thunk_sequence.txt`.
    """
    return dump_sibling(module_file, "thunk_sequence.txt")


_CATEGORY_OF_KERNEL_KIND = {"generated": "kernel", "cublas": "library", "cudnn": "library", "copy": "copy"}


def _sanitized(name: str) -> str:
    """The kernel name XLA gives an HLO instruction (and GPU traces show): characters outside [A-Za-z0-9_$] -> '_'."""
    return re.sub(r"[^A-Za-z0-9_$]", "_", name)


def attach_launches(kernel_rows: list[dict[str, Any]], seq: ThunkSequence) -> dict[str, Any]:
    """Join the HLO launch list (`hloscope.hlo.kernels.kernel_list(module, "gpu")`, schedule order) with XLA's thunk
    sequence (execution order), one to one, so each HLO launch gets its ground-truth grid, block and shared memory.

    Both lists are in the same order; the join checks the category of every pair (generated kernel / library call /
    copy) and, where XLA wrote thunk_metadata.txt, the HLO op name. Returns {"agrees": bool, "reason": str | None,
    "launches": rows (copies of kernel_rows with thunk_index, thunk_kind, kernel_name, grid, block,
    shared_memory_bytes, reused_kernel)}; `reused_kernel` is True where XLA launches a kernel it already emitted for
    an identical fusion (the thunk's kernel name is another instruction's).
    """
    top = [t for t in seq.thunks if t.depth == 0 and t.category != "other"]
    if len(top) != len(kernel_rows):
        return {"agrees": False, "launches": [],
                "reason": f"{len(kernel_rows)} launches in the HLO, {len(top)} thunks in {seq.path}"}
    rows = []
    for position, (row, thunk) in enumerate(zip(kernel_rows, top)):
        expected = _CATEGORY_OF_KERNEL_KIND.get(str(row.get("kind")), "kernel")
        if expected != thunk.category or (thunk.hlo_op is not None and thunk.hlo_op != row.get("name")):
            return {"agrees": False, "launches": [],
                    "reason": f"launch {position + 1}: HLO {row.get('name')} ({row.get('kind')}) vs thunk "
                              f"{thunk.index} {thunk.kind} {thunk.hlo_op or thunk.name or ''}".rstrip()}
        rows.append({**row, "thunk_index": thunk.index, "thunk_kind": thunk.kind, "kernel_name": thunk.name,
                     "grid": list(thunk.grid) if thunk.grid else None,
                     "block": list(thunk.block) if thunk.block else None,
                     "shared_memory_bytes": thunk.shared_memory_bytes,
                     "reused_kernel": bool(thunk.name) and thunk.name != _sanitized(row.get("name", ""))})
    return {"agrees": True, "reason": None, "launches": rows}
