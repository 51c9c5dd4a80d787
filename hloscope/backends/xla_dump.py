"""Turn an XLA `--xla_dump_to` directory into a run's `hlo/` folder and its artifact entries.

XLA names every file `module_NNNN.<module name>.<what>`. We keep the HLO text (before/after optimizations), buffer
assignment, memory-usage report, live ranges and thunk sequences, and drop per-kernel LLVM IR, MLIR and object files
unless `keep_all` (they are most of the bytes and no hloscope analysis reads them).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from hloscope.runs.layout import DUMP_MODULE_PREFIX, DUMP_REPORT_KIND

_NAME = re.compile(DUMP_MODULE_PREFIX + r"(?P<what>.+)$")
_AFTER = re.compile(r"^(?:[a-z][a-z0-9_.]*_)?after_optimizations(?P<extra>-buffer-assignment-values|-buffer-assignment|"
                    r"-memory-usage-report|-live-range)?\.txt$")
_BULKY = (".ll", ".o", ".mlir")


def classify(filename: str) -> dict | None:
    """Artifact fields for one dump file name: kind, module, module_id, stage (None for names XLA does not write)."""
    match = _NAME.match(filename)
    if not match:
        return None
    what = match["what"]
    info = {"module": match["module"], "module_id": int(match["id"])}
    if what == "before_optimizations.txt":
        return {**info, "kind": "hlo", "stage": "before_optimizations"}
    after = _AFTER.match(what)
    if after:
        entry = {**info, "kind": DUMP_REPORT_KIND[after["extra"]], "stage": "after_optimizations"}
        if after["extra"] == "-buffer-assignment-values":
            entry["format"] = "values"
        return entry
    if what == "thunk_sequence.txt":
        return {**info, "kind": "thunk_sequence", "stage": "after_optimizations"}
    if what.endswith(".ll"):
        return {**info, "kind": "llvm_ir", "stage": "codegen"}
    if what.endswith(".o"):
        return {**info, "kind": "object_file", "stage": "codegen"}
    if what.endswith(".mlir"):
        return {**info, "kind": "other", "stage": "codegen", "format": "mlir"}
    return {**info, "kind": "other", "stage": None}


def collect(dump_dir: Path, run_dir: Path, keep_all: bool, is_train_step: Callable[[dict], bool],
            dest: str = "hlo", extra: Callable[[dict], dict] = lambda entry: {}) -> list[dict]:
    """Move the dump's files into `run_dir/dest/` and return their artifact entries (paths relative to run_dir)."""
    target = run_dir / dest
    target.mkdir(parents=True, exist_ok=True)
    artifacts = []
    for path in sorted(dump_dir.iterdir()) if dump_dir.is_dir() else []:
        entry = classify(path.name)
        if entry is None or not path.is_file():
            continue
        if not keep_all and path.name.endswith(_BULKY):
            continue
        shutil.move(str(path), target / path.name)
        entry = {"kind": entry.pop("kind"), "path": f"{dest}/{path.name}", **entry}
        entry["train_step"] = bool(is_train_step(entry))
        entry.update(extra(entry))
        if entry["kind"] in ("hlo", "buffer_assignment", "memory_report", "live_range", "thunk_sequence"):
            entry.setdefault("format", "text")
        artifacts.append(entry)
    shutil.rmtree(dump_dir, ignore_errors=True)
    return artifacts


def find_profile_files(run_dir: Path, before: set[Path]) -> list[dict]:
    """Artifact entries for profiler files written under run_dir/plugins/profile/ since `before` was listed."""
    artifacts = []
    for path in sorted((run_dir / "plugins" / "profile").glob("*/*")):
        if path in before or not path.is_file():
            continue
        name = path.name
        fmt = "xplane" if name.endswith(".xplane.pb") else "trace_json" if name.endswith(".trace.json.gz") else "other"
        artifacts.append({"kind": "trace", "path": str(path.relative_to(run_dir)), "format": fmt,
                          "module": None, "stage": "profile", "train_step": True})
    return artifacts


def list_profile_files(run_dir: Path) -> set[Path]:
    return set((run_dir / "plugins" / "profile").glob("*/*"))
