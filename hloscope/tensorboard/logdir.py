"""Find every profile under a directory and lay them out as a TensorBoard logdir whose runs are named `<comparison>/<mode>`.

The profile plugin names a run `<path of the directory holding plugins/>/<session directory>`, so a comparison's
`<cmp>/jax/plugins/profile/2026_11_30_04_05_52/` would show as `<cmp>/jax/2026_11_30_04_05_52`. We build a separate
"view" logdir instead: `<cmp>/plugins/profile/jax/` holds links to the original xplane.pb files (and the XSpace converted
from a Kineto trace), so the run shows as `<cmp>/jax`. The user's directories are only read: the plugin's cache files
and the converted traces go into the view.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from hloscope.errors import InputError, MissingDependency
from hloscope.files import is_regular
from hloscope.modes import BY_NAME, MODES
from hloscope.runs.records import RunRecord
from hloscope.runs.rundir import comparison_run_dir, load_run
from hloscope.tensorboard.convert import KINETO_SUFFIXES, ConversionProgress, convert_kineto_file, is_kineto_file
from hloscope.tensorboard.modules import keep_step_modules_in, step_marker_ms
from hloscope.tensorboard.xla_ops import add_framework_ops, program_ops, xprof_sees_training
from hloscope.trace.perfetto import PERFETTO_SUFFIXES
from hloscope.trace.xplane_proto import xspace_class

XPLANE_SUFFIX = ".xplane.pb"
# Files that mark a directory as one hloscope run or comparison: runs inside it are named from its own name on.
RECORD_FILES = ("run.json", "comparison.json")
_RANK_DIR = re.compile(r"rank-\d+")
# compare's run folders: `<mode folder>`, `-<N>dev` (--devices 1,2: hloscope.modes.run_dir_name), `-r<K>` (the K-th process
# of --repeats: hloscope.runs.runner)
_RUN_FOLDER_SUFFIX = re.compile(r"(-\d+dev)?(-r\d+)?")
MAX_RECORD_BYTES = 64 * 2**20  # a run.json is a few hundred KB; a bigger one is not read just to name a run  # a DDP rank's Kineto folder inside a run (hloscope/backends/ddp.py)


@dataclass(frozen=True)
class Session:
    """One profiling session of one run, as the profile plugin will list it."""

    name: str  # the run name shown in TensorBoard, e.g. "vit-tiny-20261130/jax"
    source: Path  # the session directory (xplane) or the Kineto file
    format: str  # "xplane" or "kineto"
    files: tuple[Path, ...]  # xplane.pb files of the session, or the one Kineto file
    run_dir: Path | None = None  # the run directory it belongs to (its run.json holds the timed steps)

    def signature(self) -> tuple:
        """Changes when a file of the session is rewritten, so the view knows to rebuild it."""
        return tuple((str(path), path.stat().st_mtime_ns, path.stat().st_size) for path in self.files)


def find_sessions(directory: Path, exclude: Path | None = None) -> list[Session]:
    """Every xplane session (`plugins/profile/<session>/*.xplane.pb`) and Kineto trace under `directory`, named.

    Hidden directories and `exclude` (a view logdir that may lie inside `directory`) are skipped.
    Raises InputError when `directory` is missing or holds no profile at all.
    """
    if not directory.is_dir():
        raise InputError(directory, "is a file, expected a directory of runs" if directory.exists() else "no such directory")
    excluded = exclude.resolve() if exclude is not None else None
    inside = directory.resolve()

    def contained(path: Path) -> bool:
        """Never serve what a symlink points to outside `directory` (a link to /etc/hostname is not a profile)."""
        return path.resolve().is_relative_to(inside)

    found: dict[Path, list[tuple[str, Path, str, tuple[Path, ...]]]] = {}  # run dir -> (label, source, format, files)
    for current, subdirs, files in os.walk(directory):
        here = Path(current)
        if (here / RECORD_FILES[1]).is_file():  # a comparison: its run directories as every reader resolves them
            for name in subdirs:
                comparison_run_dir(here, name)  # a linked run folder is refused, as explain and replay refuse it
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and (here / d).resolve() != excluded)
        xplanes = tuple(sorted(here / f for f in files if f.endswith(XPLANE_SUFFIX) and contained(here / f)
                               and is_regular(here / f)))  # TensorBoard would block on a FIFO
        if xplanes and here.parent.name == "profile" and here.parent.parent.name == "plugins":
            found.setdefault(here.parent.parent.parent, []).append((here.name, here, "xplane", xplanes))
        for name in sorted(files):
            path = here / name
            if is_kineto_file(path) and contained(path):  # a FIFO is kept: its conversion refuses it in one line
                if here.parent.name == "kineto" and _RANK_DIR.fullmatch(here.name):  # DDP: <run>/kineto/rank-N/
                    run_dir, label = here.parent.parent, f"{here.name}-{_kineto_label(path)}"
                else:
                    run_dir, label = (here.parent if here.name == "kineto" else here), _kineto_label(path)
                found.setdefault(run_dir, []).append((label, path, "kineto", (path,)))
    if not found:
        raise InputError(
            directory,
            "no profiles found (looked for plugins/profile/<session>/*.xplane.pb and *"
            + " / *".join((*KINETO_SUFFIXES, *PERFETTO_SUFFIXES))
            + "; record some with `hloscope run --profile`)",
        )
    # Names start at the directory above the comparison (or the lone run) that `directory` is or is inside of.
    resolved = directory.resolve()
    base = resolved.parent if _is_record_dir(resolved) or directory in found else resolved
    while _is_record_dir(base) and base != base.parent:
        base = base.parent
    sessions = []
    for run_dir, entries in sorted(found.items()):
        run_name = _run_name(run_dir, base, directory)
        for label, source, trace_format, session_files in sorted(entries):
            name = run_name if len(entries) == 1 else f"{run_name}/{label}"
            sessions.append(Session(name=name, source=source, format=trace_format, files=session_files,
                                    run_dir=run_dir))
    return sessions


def _is_record_dir(directory: Path) -> bool:
    return any((directory / name).is_file() for name in RECORD_FILES)


def _run_name(run_dir: Path, base: Path, directory: Path) -> str:
    """`<mode>/<comparison>`: the mode first, so that the profile plugin's narrow session list, which cuts long names
    at the end, still shows it (`<mode>/compare-20261201-045931`); a lone run keeps its own name. The mode is named as
    everywhere else in hloscope (`pytorch+compile/...`, not its folder `pytorch_compile`)."""
    relative = run_dir.resolve().relative_to(base.resolve()).parts
    if not relative:
        return mode_label(directory.resolve())
    return "/".join((mode_label(run_dir), *relative[:-1]))


def mode_label(run_dir: Path) -> str:
    """A run folder named by its mode: `pytorch_compile` -> `pytorch+compile`, `pytorch_compile-2dev` ->
    `pytorch+compile-2dev`, `pytorch_compile-20261130-041910` (a lone run) -> `pytorch+compile-20261130-041910`. The
    mode is run.json's `mode` when the record says one, else the registered mode whose folder the run's is; any other
    folder keeps its name."""
    folder = run_dir.name
    recorded = _recorded_mode(run_dir)
    if recorded in BY_NAME:  # the record's own run: `<dir name>`, `<dir name>-<N>dev` or `<dir name>-<UTC time>`
        prefix = BY_NAME[recorded].dir_name
        if folder == prefix or folder.startswith(prefix + "-"):
            return recorded + folder.removeprefix(prefix)
        return folder
    for mode in MODES:  # no record: only a registered mode's folder, as compare names it
        suffix = folder.removeprefix(mode.dir_name)
        if folder.startswith(mode.dir_name) and _RUN_FOLDER_SUFFIX.fullmatch(suffix):
            return mode.name + suffix
    return folder


def _recorded_mode(run_dir: Path) -> str | None:
    """run.json's `mode`, or None when there is no readable record (the folder name is used then)."""
    record = _run_record(run_dir)
    return record.mode if record is not None else None


def timed_median_ms(run_dir: Path | None) -> float | None:
    """The run's timed median step (run.json `timing.median_s`) in ms, or None without a readable record."""
    record = _run_record(run_dir) if run_dir is not None else None
    median = record.timing.median_s if record is not None else None
    return median * 1000 if median is not None and median > 0 else None


def _run_record(run_dir: Path) -> RunRecord | None:
    """The run's run.json as hloscope.runs.rundir reads it (only to name the run and show its timed step), or None
    when there is none or it is not a valid record: the run is then shown by its folder name, without a timed step."""
    record = run_dir / "run.json"
    if not is_regular(record):  # a FIFO named run.json would block
        return None
    try:
        if record.stat().st_size > MAX_RECORD_BYTES:
            return None
        return load_run(record, check_artifacts=False)
    except (OSError, InputError):  # unreadable, or not a valid run.json
        return None


def _kineto_label(path: Path) -> str:
    """`host_123.1796011551657941891.pt.trace.json` -> `kineto-1796011551657941891` (the part after the host)."""
    stem = path.name
    for suffix in (*KINETO_SUFFIXES, *PERFETTO_SUFFIXES):
        stem = stem.removesuffix(suffix)
    _, _, rest = stem.partition(".")
    return f"kineto-{rest or stem}"


class ViewLogdir:
    """A generated TensorBoard logdir that mirrors the sessions found under a directory, kept in sync by `sync()`."""

    def __init__(self, source: Path, root: Path, progress: ConversionProgress | None = None):
        self.source = source
        self.progress = progress  # told how far a Kineto trace's conversion is
        self.root = root
        self.problems: dict[str, str] = {}  # session name -> why it is not in the view (an unreadable Kineto trace)
        self._built: dict[str, tuple] = {}  # session name -> signature it was built from (or failed on)
        # session name -> the XLA modules its view keeps (those that ran in the profiled steps) and how many it left out
        self.module_filters: dict[str, tuple[list[str], int]] = {}
        # session name -> XLA op events of its view given their framework op (`tf_op`) from the xplane's HLO
        self.framework_ops: dict[str, int] = {}
        # session name -> its profiled steps' durations (ms, step markers in time order), for the profiled median
        self.step_ms: dict[str, list[float]] = {}
        # sessions XProf takes for training (it shows their step-time graph): XLA HLO with gradient metadata
        self.training: set[str] = set()
        # session name -> allocation records XProf's memory profile draws (PyTorch `[memory]` events), when any
        self.memory_records: dict[str, int] = {}

    def sync(self) -> list[Session]:
        """Add, rebuild or remove the sessions that are new, changed or gone since the last call; returns those shown.

        A trace that cannot be converted is left out and recorded in `problems`; the others are still shown.
        """
        shown = []
        sessions = find_sessions(self.source, exclude=self.root)
        for gone in set(self._built) - {session.name for session in sessions}:  # deleted under DIR: drop it too
            shutil.rmtree(self.session_dir(gone), ignore_errors=True)
            self._built.pop(gone)
            for table in (self.module_filters, self.framework_ops, self.step_ms, self.memory_records):
                table.pop(gone, None)
            self.training.discard(gone)
            self.problems.pop(gone, None)
        for session in sessions:
            signature = session.signature()
            if self._built.get(session.name) != signature:
                self._built[session.name] = signature
                try:
                    self._build(session)
                    self.problems.pop(session.name, None)
                except InputError as error:
                    self.problems[session.name] = str(error)
            if session.name not in self.problems:
                shown.append(session)
        return shown

    def session_dir(self, name: str) -> Path:
        """Where the plugin finds the session named `name`: `<tb run>/plugins/profile/<last component>`."""
        tb_run, _, profile_run = name.rpartition("/")
        return self.root / tb_run / "plugins" / "profile" / profile_run

    def _prepared_copy(self, session: Session, xplane: Path, target: Path) -> bool:
        """Write a copy of `xplane` with what XProf needs and the recorded file lacks: its module list (graph viewer,
        memory viewer) holds only the XLA modules that ran in the profiled steps (hloscope.tensorboard.modules), and
        every XLA op event carries its framework op from the xplane's own HLO (hloscope.tensorboard.xla_ops: framework
        op stats). Records the session's profiled step times. False when there is nothing to change or the xplane
        cannot be read that way (then the original is linked, as before)."""
        try:
            from google.protobuf.message import DecodeError
        except ImportError:  # no protobuf runtime, so no schema to read it with: serve the file as it is
            return False
        try:
            space = xspace_class()()
            space.ParseFromString(xplane.read_bytes())
            kept = keep_step_modules_in(space)
            programs = program_ops(space)
            if xprof_sees_training(programs):
                self.training.add(session.name)
            framework_ops = add_framework_ops(space, programs)
            self.step_ms.setdefault(session.name, []).extend(step_marker_ms(space))
            if kept is None and not framework_ops:
                return False
            target.write_bytes(space.SerializeToString())
        except (OSError, DecodeError, RuntimeError, ValueError, MissingDependency):
            # not readable, not decodable with XProf's schema (protobuf's errors, as trace.xplane reads them), or no
            # schema at all: serve the file as it is
            target.unlink(missing_ok=True)
            return False
        if kept is not None:
            self.module_filters[session.name] = (kept.kept, kept.dropped)
        self.framework_ops[session.name] = self.framework_ops.get(session.name, 0) + framework_ops
        return True

    def _build(self, session: Session) -> None:
        target = self.session_dir(session.name)
        if target.exists():  # ours: a session that changed since it was last built
            shutil.rmtree(target)
        try:
            for table in (self.module_filters, self.framework_ops, self.step_ms, self.memory_records):
                table.pop(session.name, None)
            self.training.discard(session.name)
            if session.format == "kineto":
                _, conversion = convert_kineto_file(session.source, target, self.progress)
                self.step_ms[session.name] = conversion.step_ms
                if conversion.memory_records:
                    self.memory_records[session.name] = conversion.memory_records
                return
            target.mkdir(parents=True)
            for xplane in session.files:
                if not self._prepared_copy(session, xplane, target / xplane.name):
                    (target / xplane.name).symlink_to(xplane.resolve())
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)  # no half-built run: the plugin would list it without tools
            raise
