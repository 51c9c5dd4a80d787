"""Find and parse HLO modules behind a path: one HLO text file, an XLA dump directory, or a run directory."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hloscope.errors import InputError, reading
from hloscope.hlo.model import HloModule
from hloscope.hlo.parser import parse_hlo_file
from hloscope.hlo.platform import detect_platform

# Run directories' readers are imported where a run directory is read: `hlo stats FILE` starts without them (~12 ms).

# module_0001.jit_train_step.sm_9.0a_gpu_after_optimizations.txt, module_0002.jit_f.before_optimizations.txt, and the
# reports XLA writes beside them (`report`: `-buffer-assignment`, `-memory-usage-report`, ...)
DUMP_NAME = re.compile(
    r"^module_(?P<id>\d+)\.(?P<name>.+?)\.(?:(?P<prefix>[a-z]+_[\d.]+a?_gpu|gfx\w+?_gpu|[a-z][a-z0-9]*)_)?"
    r"(?P<stage>before_optimizations|after_optimizations)(?P<report>[\w.-]*)\.txt$"
)


def dump_sibling(file: str | os.PathLike[str], suffix: str) -> Path | None:
    """A file XLA dumped for the same module as `file` (its HLO dump or one of its reports), if it exists:
    `module_0001.jit_f.sm_9.0a_gpu_after_optimizations.txt` + `thunk_sequence.txt` -> `module_0001.jit_f.thunk_sequence.txt`."""
    file = Path(file)
    match = DUMP_NAME.match(file.name)
    if match is None:
        return None
    candidate = file.with_name(f"module_{match['id']}.{match['name']}.{suffix}")
    return candidate if candidate.is_file() else None


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
    extra: dict[str, Any] = field(default_factory=dict)


def _siblings(file: Path) -> dict[str, str | None]:
    stem = str(file)[: -len(".txt")] if file.name.endswith(".txt") else str(file)
    found = {"buffer_assignment": stem + "-buffer-assignment.txt", "memory_report": stem + "-memory-usage-report.txt"}
    # lexists, not isfile: a FIFO or unreadable report is listed, then refused in one line by the reading layer
    siblings = {key: (value if os.path.lexists(value) else None) for key, value in found.items()}
    thunk_sequence = dump_sibling(file, "thunk_sequence.txt")
    if thunk_sequence is not None:
        siblings["thunk_sequence"] = str(thunk_sequence)
    return siblings


def load_file(path: str | os.PathLike[str], stage: str | None = None) -> list[LoadedModule]:
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
                buffer_assignment=siblings.get("buffer_assignment"),
                memory_report=siblings.get("memory_report"),
                thunk_sequence=siblings.get("thunk_sequence"),
            )
        )
    return out


def dump_files(directory: Path) -> list[Path]:
    """The HLO module files of an XLA dump directory, grouped by module name with stages in compile order."""
    files = []
    with reading(directory, "an XLA dump directory"):  # a folder that cannot be listed: one line naming it
        entries = list(directory.iterdir())
    for entry in entries:
        match = DUMP_NAME.match(entry.name)
        if match and not match["report"]:
            with reading(entry, "an HLO module file"):  # stat refused (EACCES): one line naming the file
                if not entry.is_file():
                    continue
            files.append((match["name"], match["stage"] != "before_optimizations", int(match["id"]), entry))
    files.sort(key=lambda f: (f[0], f[2], f[1]))
    return [f[3] for f in files]


def load_run_dir(run_dir: Path) -> list[LoadedModule]:
    """The train-step HLO modules a run directory lists in run.json (artifacts of kind 'hlo' with train_step true)."""
    from hloscope.runs import rundir

    record = rundir.load_run(run_dir)
    chosen = [a for a in record.artifacts if a.kind == "hlo" and a.train_step]
    if not chosen:
        raise InputError(Path(run_dir) / "run.json", "lists no HLO artifact of the train step (kind 'hlo', train_step true)")
    out = []
    for artifact in chosen:
        for loaded in load_file(record.artifact_path(artifact), stage=artifact.stage):
            loaded.extra["mode"] = record.mode
            loaded.extra["run_dir"] = str(run_dir)
            out.append(loaded)
    _inherit_platform(out)
    return out


def _inherit_platform(modules: list[LoadedModule]) -> None:
    """A dump's before-optimizations file does not name the platform; its after-optimizations sibling does."""
    known = {}
    for item in modules:
        match = DUMP_NAME.match(Path(item.file).name)
        if match and item.platform != "unknown":
            known[(match["id"], match["name"])] = (item.platform, item.gpu_arch)
    for item in modules:
        match = DUMP_NAME.match(Path(item.file).name)
        if match and item.platform == "unknown" and (match["id"], match["name"]) in known:
            item.platform, item.gpu_arch = known[(match["id"], match["name"])]


def load_modules(path: str | os.PathLike[str]) -> list[LoadedModule]:
    """HLO text file | XLA dump directory | run directory -> parsed modules with file, stage and platform."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or directory")
    if path.is_file():
        return load_file(path)
    if not path.is_dir():  # a pipe (`<(zcat dump.gz)`), a device, a socket
        raise InputError(path, "not a regular file or directory: save the HLO text to a file first")
    if (path / "run.json").is_file() or (path / "comparison.json").is_file():
        from hloscope.runs.rundir import find_runs

        runs = find_runs(path)
        if len(runs) == 1:
            return load_run_dir(runs[0])
        out = []
        for run in runs:  # a comparison: modes without XLA (PyTorch eager, inductor) have no HLO to show
            try:
                out.extend(load_run_dir(run))
            except InputError as error:
                if "lists no HLO artifact" not in error.message:
                    raise
        if not out:
            raise InputError(path, "none of the runs here recorded a train-step HLO module")
        return out
    files = dump_files(path)
    if not files:
        raise InputError(
            path, "no HLO modules here: expected an XLA dump directory (module_*.*_optimizations.txt) or a run directory (run.json)"
        )
    out = []
    for file in files:
        out.extend(load_file(file))
    _inherit_platform(out)
    return out
