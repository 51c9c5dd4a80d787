"""The memory ledger of a run (run.json `memory.ledger`): what one training step's memory is made of, part by part, with
how each part was measured. hloscope/backends/memory_ledger.py measures it; explain reads it through here only.

Parts (PARTS, in this order): the parameters, the model's buffers (BatchNorm statistics, position ids), the gradients,
the optimizer state, the activations kept for backward, the temporaries (workspace), the step's inputs (one batch), its
outputs (XLA: the buffers the compiled step writes, the updated state among them), and the runtime's own share (code,
caches, allocator slack, everything else in the peak: the peak minus the other parts, labelled as such).

A part `within` another is a breakdown of it (XLA's temporaries hold the gradients and the activations: they are
estimated inside that one measured figure) and is not added again to the total. `estimate` True: the figure rests on
an assumption that `source` names (the bytes autodiff keeps before XLA optimises, an eager forward standing in for a
compiled one); `bytes` None: not measured, `source` says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hloscope.errors import InputError

PARTS = ("parameters", "buffers", "gradients", "optimizer_state", "activations", "temporaries", "inputs", "outputs",
         "runtime")
TITLES = {"parameters": "parameters", "buffers": "model buffers", "gradients": "gradients",
          "optimizer_state": "optimizer state", "activations": "activations kept for backward",
          "temporaries": "temporaries / workspace", "inputs": "inputs (one batch)", "outputs": "step outputs",
          "runtime": "runtime's own share"}
# XLA's memory analysis of the compiled step (CompiledMemoryStats): the figures the XLA modes' parts add up to
COMPILED_FIELDS = ("argument_bytes", "output_bytes", "alias_bytes", "temp_bytes", "generated_code_bytes",
                   "peak_bytes")


@dataclass
class MemoryPart:
    name: str  # one of PARTS
    bytes: int | None  # None: not measured (source says why)
    source: str  # how it was measured, or why it was not
    estimate: bool = False
    within: str | None = None  # a breakdown of that part: not added to the total again
    detail: dict[str, int] = field(default_factory=dict)  # e.g. optimizer state: moments_bytes, step_count_bytes

    def to_dict(self) -> dict:
        data: dict = {"name": self.name, "bytes": self.bytes, "source": self.source, "estimate": self.estimate}
        if self.within:
            data["within"] = self.within
        if self.detail:
            data["detail"] = dict(self.detail)
        return data


@dataclass
class MemoryLedger:
    """One run's memory, part by part. `peak_bytes`: the run's peak (the device's where it reports one, else the
    process's peak host RSS: `peak_source` says which); `compiled`: XLA's memory analysis of the train step (XLA modes)
    with its `source`, None elsewhere; `error`: why measuring failed (the run stands without the parts)."""

    peak_bytes: int | None
    peak_source: str
    optimizer: str
    parts: list[MemoryPart] = field(default_factory=list)
    compiled: dict | None = None  # XLA's CompiledMemoryStats figures (COMPILED_FIELDS) and their source
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def part(self, name: str) -> MemoryPart | None:
        return next((p for p in self.parts if p.name == name), None)

    def bytes_of(self, name: str) -> int | None:
        part = self.part(name)
        return part.bytes if part is not None else None

    def accounted_bytes(self) -> int:
        """The measured top-level parts except the runtime's share (which is the peak minus this)."""
        return sum(p.bytes for p in self.parts if p.bytes is not None and p.within is None and p.name != "runtime")

    def to_dict(self) -> dict:
        if self.error is not None:  # measuring failed: the optimizer and why, nothing else
            return {"optimizer": self.optimizer, "error": self.error}
        return {"peak_bytes": self.peak_bytes, "peak_source": self.peak_source, "optimizer": self.optimizer,
                "parts": [p.to_dict() for p in self.parts], "compiled": self.compiled, "notes": list(self.notes)}


def _int_or_none(value, where: str, path: Path) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(path, f"not a valid run.json: '{where}' is {value!r:.40}, expected a byte count")
    return value


def _text(value, where: str, path: Path) -> str:
    if not isinstance(value, str):
        raise InputError(path, f"not a valid run.json: '{where}' is {value!r:.40}, expected a string")
    return value


def read_ledger(run: dict, path: str | Path) -> MemoryLedger | None:
    """run.json's `memory.ledger` as typed data; None when the run has none (recorded before the ledger, or a run that
    did not reach its timed window). A field of the wrong type is an InputError naming run.json and the field."""
    path = Path(path)
    memory = run.get("memory")
    if not isinstance(memory, dict) or memory.get("ledger") is None:
        return None
    raw = memory["ledger"]
    if not isinstance(raw, dict):
        raise InputError(path, f"not a valid run.json: 'memory.ledger' is {type(raw).__name__}, expected an object")
    if "error" in raw:  # measuring failed; the run itself stands
        error = _text(raw["error"], "memory.ledger.error", path)
        return MemoryLedger(None, "", str(raw.get("optimizer") or ""), notes=[error], error=error)
    parts_raw = raw.get("parts") or []
    if not isinstance(parts_raw, list):
        raise InputError(path, "not a valid run.json: 'memory.ledger.parts' is not a list")
    parts = []
    for index, item in enumerate(parts_raw):
        where = f"memory.ledger.parts[{index}]"
        if not isinstance(item, dict) or item.get("name") not in PARTS:
            raise InputError(path, f"not a valid run.json: '{where}' is not a memory part (name one of "
                                   f"{', '.join(PARTS)})")
        detail = item.get("detail") or {}
        if not isinstance(detail, dict):
            raise InputError(path, f"not a valid run.json: '{where}.detail' is not an object")
        within = item.get("within")
        parts.append(MemoryPart(
            name=item["name"], bytes=_int_or_none(item.get("bytes"), f"{where}.bytes", path),
            source=_text(item.get("source", ""), f"{where}.source", path), estimate=item.get("estimate") is True,
            within=_text(within, f"{where}.within", path) if within is not None else None,
            detail={str(k): v for k, v in detail.items()
                    if _int_or_none(v, f"{where}.detail.{k}", path) is not None}))
    compiled = raw.get("compiled")
    if compiled is not None:
        if not isinstance(compiled, dict):
            raise InputError(path, "not a valid run.json: 'memory.ledger.compiled' is not an object")
        for key in COMPILED_FIELDS:
            _int_or_none(compiled.get(key), f"memory.ledger.compiled.{key}", path)
    notes = raw.get("notes") or []
    return MemoryLedger(peak_bytes=_int_or_none(raw.get("peak_bytes"), "memory.ledger.peak_bytes", path),
                        peak_source=_text(raw.get("peak_source", ""), "memory.ledger.peak_source", path),
                        optimizer=_text(raw.get("optimizer", ""), "memory.ledger.optimizer", path), parts=parts,
                        compiled=compiled, notes=[str(n) for n in notes] if isinstance(notes, list) else [])
