"""Find and parse HLO modules behind a path: one HLO text file, an XLA dump directory, or a run directory."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from hloscope.errors import InputError
from hloscope.hlo.model import HloModule
from hloscope.hlo.parser import parse_hlo_file
from hloscope.hlo.platform import detect_platform

# module_0001.jit_train_step.sm_9.0a_gpu_after_optimizations.txt, module_0002.jit_f.before_optimizations.txt, ...
DUMP_NAME = re.compile(
    r"^module_(?P<id>\d+)\.(?P<name>.+?)\.(?:(?P<prefix>[\w.]+?)_)?(?P<stage>before_optimizations|after_optimizations)\.txt$"
)
SIBLING_SUFFIXES = ("-buffer-assignment.txt", "-memory-usage-report.txt", "-live-range.txt")


@dataclass
class LoadedModule:
    """A parsed module and what its file name and neighbours say about it."""

    module: HloModule
    file: str
    stage: str  # before_optimizations | after_optimizations | unknown
    platform: str  # cpu | gpu | tpu | neuron | unknown
    gpu_arch: str | None = None  # e.g. sm_9.0a, from the dump file name
    buffer_assignment: str | None = None
    memory_report: str | None = None
    thunk_sequence: str | None = None
    index: int = 0  # position of the module in its file (XLA test files hold several)
    extra: dict = field(default_factory=dict)


def _siblings(file: Path) -> dict[str, str | None]:
    stem = str(file)[: -len(".txt")] if file.name.endswith(".txt") else str(file)
    found: dict[str, str | None] = {
        "buffer_assignment": stem + "-buffer-assignment.txt",
        "memory_report": stem + "-memory-usage-report.txt",
    }
    match = DUMP_NAME.match(file.name)
    if match:
        found["thunk_sequence"] = str(file.parent / f"module_{match['id']}.{match['name']}.thunk_sequence.txt")
    return {key: (value if os.path.isfile(value) else None) for key, value in found.items()}


def load_file(path: str | os.PathLike, stage: str | None = None) -> list[LoadedModule]:
    file = Path(path)
    modules = parse_hlo_file(file)
    match = DUMP_NAME.match(file.name)
    prefix = match["prefix"] if match else None
    if stage is None:
        stage = match["stage"] if match else None
    gpu_arch = None
    if prefix:
        arch = re.match(r"(sm_[\d.]+a?|gfx\w+)", prefix)
        gpu_arch = arch.group(1) if arch else None
    siblings = _siblings(file)
    out = []
    for index, module in enumerate(modules):
        module_stage = stage or ("after_optimizations" if module.is_scheduled else "unknown")
        out.append(
            LoadedModule(
                module=module,
                file=str(file),
                stage=module_stage,
                platform=detect_platform(file.name, module),
                gpu_arch=gpu_arch,
                index=index,
                **siblings,
            )
        )
    return out


def dump_files(directory: Path) -> list[Path]:
    """The HLO module files of an XLA dump directory, grouped by module name with stages in compile order."""
    files = []
    for entry in directory.iterdir():
        match = DUMP_NAME.match(entry.name)
        if match and entry.is_file():
            files.append((match["name"], match["stage"] != "before_optimizations", int(match["id"]), entry))
    files.sort(key=lambda f: (f[0], f[2], f[1]))
    return [f[3] for f in files]


def _run_json_artifacts(run_dir: Path) -> list[dict]:
    try:
        from hloscope import rundir  # the harness's reader validates run.json when it is there
    except ImportError:
        rundir = None
    if rundir is not None and hasattr(rundir, "load_run"):
        record = rundir.load_run(run_dir)
    else:
        path = run_dir / "run.json"
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise InputError(path, f"not a readable run.json: {error}") from None
    artifacts = record.get("artifacts") if isinstance(record, dict) else None
    if not isinstance(artifacts, list):
        raise InputError(run_dir / "run.json", "has no 'artifacts' list")
    return [a for a in artifacts if isinstance(a, dict)]


def load_run_dir(run_dir: Path) -> list[LoadedModule]:
    artifacts = [a for a in _run_json_artifacts(run_dir) if a.get("kind") == "hlo"]
    chosen = [a for a in artifacts if a.get("train_step")]
    if not chosen:
        raise InputError(run_dir / "run.json", "lists no HLO artifact of the train step (kind 'hlo', train_step true)")
    out = []
    for artifact in chosen:
        file = run_dir / str(artifact.get("path", ""))
        if not file.is_file():
            raise InputError(file, "HLO file listed in run.json is missing")
        for loaded in load_file(file, stage=artifact.get("stage")):
            loaded.extra["mode"] = artifact.get("mode")
            out.append(loaded)
    return out


def load_modules(path: str | os.PathLike) -> list[LoadedModule]:
    """HLO text file | XLA dump directory | run directory -> parsed modules with file, stage and platform."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or directory")
    if path.is_file():
        return load_file(path)
    if (path / "run.json").is_file():
        return load_run_dir(path)
    files = dump_files(path)
    if not files:
        raise InputError(
            path, "no HLO modules here: expected an XLA dump directory (module_*.*_optimizations.txt) or a run directory (run.json)"
        )
    out = []
    for file in files:
        out.extend(load_file(file))
    return out
