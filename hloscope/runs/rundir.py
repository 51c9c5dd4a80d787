"""Run directories: the versioned on-disk format every hloscope analysis reads.

A run directory holds `run.json` (one record, schema-versioned) plus the artifacts it lists (`hlo/`, `plugins/profile/`,
`kineto/`). A comparison directory holds `comparison.json` and one run directory per mode. This module creates them
safely (unique names, never overwriting, atomic writes) and reads them back with validation, so that a broken or
foreign file is reported by name instead of failing later inside an analysis.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import socket
import stat
import time
from collections.abc import Callable, Collection
from pathlib import Path
from statistics import median
from typing import Any, BinaryIO

from hloscope import files  # the reading layer: regular files only, bounded nesting and integers
from hloscope.errors import InputError, UsageError, warn
from hloscope.runs.layout import COMPARISON_FILE, DUMP_MODULE_PREFIX, DUMP_REPORT_KIND, RUN_FILE
from hloscope.runs.records import SCHEMA_VERSION, ComparisonRecord, RunRecord, decode_comparison, decode_run
from hloscope.writing import atomic_output

# re-exported: the layout's names and the schema version are read through rundir too
__all__ = ["COMPARISON_FILE", "RUN_FILE", "SCHEMA_VERSION"]

STATUSES = ("running", "ok", "failed", "interrupted", "compiled", "setup")  # setup: run --setup-only
ARTIFACT_KINDS = ("hlo", "stablehlo", "buffer_assignment", "memory_report", "inductor_code", "trace", "thunk_sequence",
                  "thunk_metadata", "memory_analysis", "live_range", "llvm_ir", "object_file", "program_inputs", "other")

# Test hook (docs/reliability.md): "run.json@3,comparison.json@2" makes the 3rd and every later write of run.json in a
# process (and the 2nd of comparison.json) fail with OSError(ENOSPC), as a disk that fills up and stays full.
TEST_ENOSPC_ENV = "HLOSCOPE_TEST_ENOSPC"
_writes: dict[str, int] = {}


class OutputError(UsageError):
    """A run record could not be written (disk full, quota, read-only): one line naming the file, exit code 2."""


_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_REQUIRED_RUN_KEYS = {"schema_version": int, "run_id": str, "mode": str, "status": str, "config": dict}


# ---------------------------------------------------------------------------------------------------------- writing


def check_run_id(run_id: str) -> str:
    """A run id is one path component of safe characters: it can never escape the output directory."""
    if not _RUN_ID.match(run_id) or run_id in (".", "..") or ".." in run_id:
        raise UsageError(f"invalid run id {run_id!r}: use letters, digits, '.', '_', '+', '-' "
                         "(no path separators, no '..')")
    return run_id


def create_run_dir(out: str | os.PathLike, run_id: str | None = None, prefix: str = "run") -> Path:
    """Create a new, empty directory under `out` and return it.

    With `run_id`, that exact name is used and an existing directory is an error (nothing is overwritten). Without it,
    the name is `<prefix>-<UTC timestamp>` and a `-2`, `-3`, ... suffix is added when another run took the name in the
    same second; `os.mkdir` is atomic, so two processes can never end up sharing a directory.
    """
    out_path = Path(out)
    try:
        out_path.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # read-only, not a directory, no permission: one line, not a traceback
        raise UsageError(f"cannot create output directory {out_path}: {error.strerror or error}") from None
    if run_id is not None:
        check_run_id(run_id)
        path = out_path / run_id
        try:
            path.mkdir()
        except FileExistsError:
            raise UsageError(f"{path} already exists; hloscope never overwrites a run "
                             "(choose another --run-id)") from None
        return path
    stem = f"{check_run_id(prefix)}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    for attempt in range(1, 10_000):
        path = out_path / (stem if attempt == 1 else f"{stem}-{attempt}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise UsageError(f"could not find a free run directory name under {out_path}")


def _fault_hook(path: Path) -> None:
    spec = os.environ.get(TEST_ENOSPC_ENV)
    if not spec:
        return
    count = _writes[path.name] = _writes.get(path.name, 0) + 1
    for item in spec.split(","):
        name, _, start = item.strip().partition("@")
        if name == path.name and count >= int(start or 1):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def write_json_atomic(path: str | os.PathLike, data: Any, replace: bool = True) -> None:
    """Write JSON so that readers see either the old file or the complete new one, never a torn write. A write the
    file system refuses (disk full, quota, read-only) is an OutputError naming the file; the old file stays.
    `replace=False`: never over a file already at `path` (an OutputError says it is there)."""
    path = Path(path)
    try:
        with atomic_output(path, text=True, replace=replace) as handle:
            # strict JSON: a NaN or infinite figure (a broken clock) is written as null, never as bare NaN
            json.dump(_finite(data), handle, indent=2, sort_keys=False, default=_json_default, allow_nan=False)
            handle.write("\n")
            _fault_hook(path)
    except FileExistsError:
        raise OutputError(f"cannot write {path}: a file is there already (it is left as it is)") from None
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from None


def create_new_file(path: str | os.PathLike) -> BinaryIO:
    """A new file at `path`, open for writing (and for reading back through its descriptor): created here
    (`O_CREAT | O_EXCL`), never an existing file, and never through a symbolic link (`O_NOFOLLOW`; with `O_EXCL` a
    link there, even a dangling one, fails the call too).
    FileExistsError when anything holds the name; other OSErrors (a full disk, a read-only folder) reach the caller.
    For every file hloscope writes under a name of its own into a folder that may hold someone else's files (a
    comparison's `logs/`, a run directory)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.fdopen(os.open(path, flags, 0o644), "wb")


def create_numbered(folder: Path, name: Callable[[int], str], limit: int = 1000) -> tuple[Path, BinaryIO]:
    """(path, open handle) of a new file in `folder` (create_new_file): `name(1)`, else the first of `name(2)`, ...
    that nothing holds (a file, a folder, a link, dangling or not, is never written over or through)."""
    for n in range(1, limit + 1):
        path = folder / name(n)
        try:
            return path, create_new_file(path)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"{name(2)} ... {name(limit)} all exist: no name left", str(folder / name(1)))


def own_folder(path: Path, what: str) -> Path:
    """`path` as a folder hloscope writes into inside a directory that may hold someone else's files (a comparison's
    `logs/`): made here when missing; a symbolic link or anything but a folder there is refused in one InputError
    naming it (never followed: what is written there stays inside the directory). Other OSErrors (a full disk, a
    read-only directory) reach the caller."""
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        pass
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        raise InputError(path, f"is a symbolic link (to {_link_target(path)}): {what} is written only into a folder "
                               "of its own there, never through a link; nothing written")
    if not stat.S_ISDIR(mode):
        raise InputError(path, f"is not a folder: {what} cannot be written there; nothing written")
    return path


def _link_target(path: Path) -> str:
    try:
        return repr(os.readlink(path))
    except OSError:
        return "an unreadable target"


def _finite(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy / framework scalars
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _proc_stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux /proc), telling a reused pid from the writer."""
    fields = _proc_stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (ValueError, IndexError):
        return None


def _with_writer(record: dict) -> dict:
    """A `running` record names the process writing it, so that a reader can tell a live run from one cut short."""
    if record.get("status") == "running":
        return {**record, "writer": {"pid": os.getpid(), "host": socket.gethostname(),
                                     "start_ticks": _start_ticks(os.getpid())}}
    return {key: value for key, value in record.items() if key != "writer"} if "writer" in record else record


def write_run(run_dir: str | os.PathLike, record: dict | RunRecord) -> Path:
    path = Path(run_dir) / RUN_FILE
    write_json_atomic(path, _with_writer(record.to_dict() if isinstance(record, RunRecord) else record))
    return path


def write_comparison(comparison_dir: str | os.PathLike, record: dict | ComparisonRecord) -> Path:
    path = Path(comparison_dir) / COMPARISON_FILE
    write_json_atomic(path, _with_writer(record.to_dict() if isinstance(record, ComparisonRecord) else record))
    return path


def writer_alive(record: dict) -> bool | None:
    """For a `running` record: True while the process that wrote it runs, False once it is gone, None when that
    cannot be told (no writer recorded, or written on another host)."""
    writer = record.get("writer")
    if not isinstance(writer, dict) or not isinstance(writer.get("pid"), int) or writer.get("host") != socket.gethostname():
        return None
    pid = writer["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's live process
    except (OSError, OverflowError):
        return None
    fields = _proc_stat(pid)
    if fields and fields[0] in (b"Z", b"X"):  # killed, not yet reaped by its parent
        return False
    started = writer.get("start_ticks")
    return started is None or _start_ticks(pid) in (None, started)


_warned_stale: set[str] = set()


def stale_running(file: Path, record: dict, what: str, found: str) -> bool:
    """True when `record` says `running` but no process is writing it any more (killed, timed out, disk full); says so
    once per file on stderr. `found` tells what the reader does with it."""
    if record.get("status") != "running":
        return False
    alive = writer_alive(record)
    if alive:
        return False
    if str(file) not in _warned_stale:
        _warned_stale.add(str(file))
        writer = record.get("writer")
        writer = writer if isinstance(writer, dict) else {}
        why = (f"the {what} that wrote it (pid {writer.get('pid')}) is no longer running: it was cut short (killed, "
               "timed out, or the disk was full)" if alive is False else
               "no live writer can be checked (written elsewhere or by an older hloscope): if nothing is running, it "
               "was cut short")
        warn(f"{file}: says 'running' but {why}; {found}")
    return True


# XLA's dump file names (hloscope/backends/xla_dump.py, which moves them into hlo/ when a run finishes): a run that was
# killed, timed out or interrupted leaves them in the hidden dump directory, where they are listed as found.
DUMP_DIR = ".xla_dump"
_DUMP_NAME = re.compile(DUMP_MODULE_PREFIX + r"(?:[a-z][a-z0-9_.]*_)?"
                        r"(?P<stage>before_optimizations|after_optimizations)(?P<extra>-[a-z-]+)?\.txt$")


def leftover_dumps(run_dir: Path, listed: Collection[str] = ()) -> list[dict]:
    """Artifact entries for the HLO text an interrupted run left in `run_dir/.xla_dump` (not moved, not listed).
    The train step is `jit_train_step` for JAX and torchax; for PyTorch/XLA's numbered graphs, the largest one."""
    dump = run_dir / DUMP_DIR
    if not dump.is_dir():
        return []
    entries = []
    try:
        names = sorted(os.listdir(dump))
    except OSError:
        return []
    for name in names:
        match = _DUMP_NAME.match(name)
        path = f"{DUMP_DIR}/{name}"
        if not match or path in listed or match["extra"] not in DUMP_REPORT_KIND or not os.path.isfile(dump / name):
            continue
        entries.append({"kind": DUMP_REPORT_KIND[match["extra"]], "path": path, "module": str(match["module"]),
                        "module_id": int(match["id"]), "stage": match["stage"], "format": "text",
                        "train_step": False, "leftover": True})
    modules = {str(e["module"]) for e in entries}
    train = {m for m in modules if m.endswith("train_step")}
    if not train and entries:  # PyTorch/XLA: SyncTensorsGraph.N; the step is the largest graph compiled
        hlo = [e for e in entries if e["kind"] == "hlo"]
        if hlo:
            train = {str(max(hlo, key=lambda e: os.path.getsize(dump / Path(str(e["path"])).name))["module"])}
    for entry in entries:
        entry["train_step"] = entry["module"] in train
    return entries


# ---------------------------------------------------------------------------------------------------------- reading


def _read_json(path: Path, what: str) -> dict:
    if not os.path.lexists(path):
        raise InputError(path, f"no {what} here (is this a hloscope run directory?)")
    raw = files.read_bytes(path, f"the {what} file", max_bytes=256 << 20)
    if not raw.strip():
        raise InputError(path, f"empty {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(path, f"not a {what}: binary data (byte {error.start} is not UTF-8)") from None
    data = files.loads(text, path, what)
    if not isinstance(data, dict):
        raise InputError(path, f"not a {what}: the top level is a JSON {type(data).__name__}, expected an object")
    return data


def _check_schema(path: Path, data: dict, what: str) -> None:
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(path, f"not a {what}: missing integer 'schema_version'")
    if version > SCHEMA_VERSION:
        raise InputError(path, f"written by a newer hloscope ({what} schema version {version}; this hloscope "
                               f"reads up to {SCHEMA_VERSION}): upgrade hloscope to read it")
    if version < 1:
        raise InputError(path, f"unknown {what} schema version {version}")


def _run_json_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    if path.is_dir():
        return path / RUN_FILE
    return path


def load_run(path: str | os.PathLike, check_artifacts: bool = True) -> RunRecord:
    """Read and validate a run directory (or its run.json). Returns the typed record (its `dir` the run directory);
    for a run cut short, the HLO dumps it left behind are among its artifacts, marked `leftover`.

    Raises InputError naming the file for anything wrong: missing, empty, not JSON, newer schema, missing keys,
    and (with `check_artifacts`) every artifact file the record lists but that is not on disk.
    """
    run_json = _run_json_path(path)
    record = _read_json(run_json, "run.json")
    _check_schema(run_json, record, "run.json")
    for key, kind in _REQUIRED_RUN_KEYS.items():
        if not isinstance(record.get(key), kind):
            raise InputError(run_json, f"not a valid run.json: '{key}' is missing or not a {kind.__name__}")
    if record["status"] not in STATUSES:
        raise InputError(run_json, f"not a valid run.json: unknown status {record['status']!r}")
    check_record_values(run_json, record)
    artifacts = record.setdefault("artifacts", [])
    if not isinstance(artifacts, list) or not all(isinstance(a, dict) and isinstance(a.get("path"), str)
                                                  and isinstance(a.get("kind", ""), str) for a in artifacts):
        raise InputError(run_json, "not a valid run.json: 'artifacts' must be objects with a 'path' and a 'kind'")
    run_dir = run_json.parent
    if record["status"] in ("running", "interrupted", "failed"):
        stale_running(run_json, record, "run", "its steps and files are read as found")
        listed = {a["path"] for a in artifacts}
        artifacts.extend(leftover_dumps(run_dir, listed))
    if check_artifacts:
        for artifact in artifacts:
            target = artifact_inside(run_dir, artifact["path"], run_json)
            if not target.exists():
                kind = artifact.get("kind", "file")
                raise InputError(target, f"listed in {run_json} as a {kind} artifact but missing")
    return decode_run(run_json, record)


# Durations of one step (or a summary of them): a step takes at least a nanosecond. Other durations (std_s, setup_s,
# window_s) may be 0. Every duration is below 1e9 s (30 years).
_STEP_TIMES = ("step_times_s", "warmup_times_s", "profiled_step_times_s", "first_step_s", "median_s", "mean_s", "min_s",
               "max_s", "p10_s", "p90_s", "window_mean_s")
MIN_STEP_S, MAX_DURATION_S = 1e-9, 1e9
# Counts a run record holds: (section, key, smallest, largest). A float, a bool, a string or a value out of range is
# refused: a batch of -4 or 10^30 samples, 0 devices or 6.5 steps is a broken record, not a run.
_COUNTS = (("config", "batch_size", 1, 10**7), ("config", "devices", 1, 10**6), ("config", "steps", 0, 10**9),
           ("config", "warmup", 0, 10**9), ("timing", "steps", 0, 10**9))


def check_record_values(file: Path, record: dict, what: str = "run.json") -> None:
    """Refuse the values of a run record (run.json, or a replay record of the same layout) that make nonsense of the
    figures computed from them, in one InputError naming the file and the key: step times that are not durations
    (negative, zero, NaN, infinite, below a nanosecond) and counts that are not positive integers within bounds."""
    timing = record.get("timing")
    if timing is not None and not isinstance(timing, dict):
        raise InputError(file, f"not a valid {what}: 'timing' is {type(timing).__name__} {timing!r:.40}, expected "
                               "an object")
    for key, value in (timing or {}).items():
        if not key.endswith("_s"):
            continue
        values = value if isinstance(value, list) else [value]
        smallest = MIN_STEP_S if key in _STEP_TIMES else 0.0
        for item in values:
            if item is None and not isinstance(value, list):
                continue
            if not isinstance(item, (int, float)) or isinstance(item, bool):
                raise InputError(file, f"not a valid {what}: 'timing.{key}' {'holds' if item is not value else 'is'} "
                                       f"{type(item).__name__} {item!r:.40}, expected a number")
            if not smallest <= item < MAX_DURATION_S:
                raise InputError(file, f"not a valid {what}: 'timing.{key}' holds {item!r:.40}, not a duration "
                                       f"(expected a number of seconds, at least {smallest:g} and below 1e9)")
    steps, times = (timing or {}).get("steps"), (timing or {}).get("step_times_s")
    if isinstance(steps, int) and not isinstance(steps, bool) and isinstance(times, list) and steps != len(times):
        # hloscope writes both from the same samples: a record where they differ was edited, and its figures
        # (median, intervals, the steps explain counts) would disagree with one another
        raise InputError(file, f"not a valid {what}: 'timing.steps' is {steps} but 'timing.step_times_s' holds "
                               f"{len(times)} step times")
    for section, key, low, high in _COUNTS:
        part = record.get(section)
        value = part.get(key) if isinstance(part, dict) else None
        if value is None or ((section, key) == ("config", "devices") and isinstance(value, list)):
            continue  # compare --devices 1,2,4 records the list in the comparison's config
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InputError(file, f"not a valid {what}: '{section}.{key}' is {value!r:.40}, expected an integer "
                                   f"from {low} to {high:,}")


def load_record(path: Path, what: str, kind: str, statuses: Collection[str] | None, shape: dict[str, type]) -> dict:
    """Read and validate a record written beside run.json in its layout (a replay or calibration record): a readable
    JSON object of this `kind`, a known schema version and status (None: the record has none), the optional keys of `shape` null or of their type, and durations
    and counts that make sense (`check_record_values`)."""
    record = _read_json(path, what)
    _check_schema(path, record, what)
    if record.get("kind") != kind:
        raise InputError(path, f"not a {what}: 'kind' is {record.get('kind')!r:.40}, expected {kind!r}")
    if statuses is not None and record.get("status") not in statuses:
        raise InputError(path, f"not a valid {what}: unknown status {record.get('status')!r:.40}")
    for key, expected in shape.items():
        value = record.get(key)
        if value is not None and not isinstance(value, expected):
            raise InputError(path, f"not a valid {what}: '{key}' is {type(value).__name__} {value!r:.40}, expected "
                                   f"{'an object' if expected is dict else 'a list'}")
    check_record_values(path, record, what)
    return record


def artifact_inside(run_dir: Path, relative: str, run_json: Path) -> Path:
    """Resolve an artifact path, refusing one outside the run directory (a hand-edited or hostile record)."""
    if "\0" in relative:
        raise InputError(run_json, f"artifact path {relative!r} holds a NUL byte")
    try:
        target = (run_dir / relative).resolve()
    except (RuntimeError, OSError) as error:  # a symlink loop: RuntimeError before Python 3.13, OSError (ELOOP) after
        reason = "a symlink loop" if isinstance(error, RuntimeError) else (error.strerror or str(error))
        raise InputError(run_dir / relative, f"cannot resolve it ({reason}); listed in {run_json}") from None
    if not target.is_relative_to(run_dir.resolve()):
        raise InputError(run_json, f"artifact path {relative!r} points outside the run directory")
    return target


def _check_plain_name(file: Path, name: str) -> None:
    if not name or "/" in name or "\\" in name or "\0" in name or name in (".", "..") or os.path.isabs(name):
        raise InputError(file, f"mode directory {name!r} is not a plain name")


def comparison_run_dir(directory: str | os.PathLike, name: str, file: Path | None = None) -> Path:
    """The run directory `name` of the comparison at `directory` (its comparison.json: `file`), as every reader of a
    comparison resolves it (explain, replay, hlo / trace stats and export, diff, tables): a plain name inside the
    comparison, and a folder of the comparison itself, not a symbolic link, which would have a reader read (and
    replay write) a run outside the comparison. A path, '..', an absolute name or a NUL is refused naming
    comparison.json; a link (even one leading inside the comparison) is refused naming it, never followed, as an
    artifact path leading outside its run is (`artifact_inside`). One InputError each (exit 2); a reader that goes
    on past a broken run (explain, replay) names it and goes on past this one too. A missing directory is returned as
    it is: the caller says what a mode without its run directory means."""
    directory = Path(directory)
    _check_plain_name(file if file is not None else directory / COMPARISON_FILE, name)
    path = directory / name
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    except OSError as error:  # the comparison directory cannot be searched: one line naming the run
        raise InputError(path, f"cannot read: {error.strerror or error}") from None
    if stat.S_ISLNK(mode):
        try:
            target = Path(os.path.realpath(path))
            outside = not target.is_relative_to(os.path.realpath(directory))
        except (OSError, ValueError):
            outside = True
        where = ("which points outside the comparison directory" if outside else
                 "not a folder of its own in the comparison")
        raise InputError(path, f"a run directory of the comparison is a symbolic link (to {_link_target(path)}), "
                               f"{where}: not followed")
    return path


def load_comparison(path: str | os.PathLike) -> ComparisonRecord:
    """Read and validate comparison.json (path: the comparison directory or the file); the typed record. A comparison
    cut short lists, after its own entries, the run directories it did not list (marked `recovered`)."""
    path = Path(path)
    file = path / COMPARISON_FILE if path.is_dir() else path
    record = _read_json(file, "comparison.json")
    _check_schema(file, record, "comparison.json")
    modes = record.get("modes")
    if not isinstance(modes, list) or not all(isinstance(m, dict) and isinstance(m.get("dir"), str) for m in modes):
        raise InputError(file, "not a valid comparison.json: 'modes' must be a list of objects with a 'dir'")
    seen: set[str] = set()
    for entry in modes:
        check_dir = entry["dir"]
        _check_plain_name(file, check_dir)  # a link there is refused where the run is read (comparison_run_dir)
        if check_dir in seen:  # compare gives every run its own directory; 3000 entries of one took minutes to read
            raise InputError(file, f"not a valid comparison.json: mode directory {check_dir!r} is listed twice")
        seen.add(check_dir)
    if record.get("status") == "running":
        unlisted = _unlisted_runs(file.parent, {entry["dir"] for entry in modes})
        if stale_running(file, record, "compare", f"reading the {len(modes) + len(unlisted)} run director"
                         f"{'y' if len(modes) + len(unlisted) == 1 else 'ies'} found in it "
                         f"({len(unlisted)} not listed in it)"):
            modes.extend(unlisted)
    return decode_comparison(file, record)


def _unlisted_runs(directory: Path, listed: set[str]) -> list[dict]:
    """Entries for the run directories of a comparison that comparison.json does not list (it was cut short)."""
    entries = []
    for run_json in sorted(directory.glob(f"*/{RUN_FILE}")):
        name = run_json.parent.name
        if name in listed:
            continue
        try:
            comparison_run_dir(directory, name)  # glob follows a linked folder: a run found through a link is not read
            run = _read_json(run_json, "run.json")
        except InputError as error:
            entries.append({"mode": name, "dir": name, "status": "failed", "error": str(error), "recovered": True})
            continue
        timing = run.get("timing")
        timing = timing if isinstance(timing, dict) else {}
        entries.append({"mode": run.get("mode") if isinstance(run.get("mode"), str) else name, "dir": name,
                        "status": run.get("status") if run.get("status") in STATUSES else "failed",
                        "error": run.get("error") if isinstance(run.get("error"), str) else None,
                        "median_s": timing.get("median_s"), "recovered": True})
    return entries


def find_runs(path: str | os.PathLike) -> list[Path]:
    """A run directory, a comparison directory or any folder holding runs -> the run directories in it, sorted.

    A comparison lists its modes in its own order; modes whose run directory is missing are skipped (the comparison
    records why they failed). Raises InputError when the path holds no run at all.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or directory")
    if path.is_file():
        if path.name == RUN_FILE:
            return [path.parent]
        if path.name == COMPARISON_FILE:
            path = path.parent
        else:
            raise InputError(path, "expected a run directory, a comparison directory, run.json or comparison.json")
    if os.path.lexists(path / RUN_FILE):  # a FIFO, folder or loop there is named by load_run, not skipped
        return [path]
    if os.path.lexists(path / COMPARISON_FILE):
        comparison = load_comparison(path)
        runs = [comparison_run_dir(path, m.dir) for m in comparison.modes]
        return [run for run in runs if (run / RUN_FILE).is_file()]
    runs = sorted(p.parent for p in path.glob(f"*/{RUN_FILE}"))
    runs += sorted(p.parent for p in path.glob(f"*/*/{RUN_FILE}") if p.parent.parent not in runs)
    if not runs:
        raise InputError(path, "no hloscope run here (no run.json or comparison.json in it or one level below)")
    return runs


def measured_host_delay_s(comparison_dir: str | os.PathLike, variant: str) -> float | None:
    """How long the host really slept per step in one configuration of a comparison run with --inject-host-delay:
    the median over its timed processes' timed steps of run.json `timing.injected_host_delay_s` (a loaded machine
    wakes a sleeping host late, so this, not the delay asked for, is what the device waited for); None when no
    process of `variant` recorded it."""
    comparison = load_comparison(comparison_dir)
    sleeps = [slept for entry in comparison.modes if entry.variant == variant and entry.status == "ok"
              for slept in (load_run(comparison_run_dir(comparison.dir, entry.dir)).timing.injected_host_delay_s
                            or [])]
    return median(sleeps) if sleeps else None
