"""Run directories: the versioned on-disk format every hloscope analysis reads.

A run directory holds `run.json` (one record, schema-versioned) plus the artifacts it lists (`hlo/`, `plugins/profile/`,
`kineto/`). A comparison directory holds `comparison.json` and one run directory per mode. This module creates them
safely (unique names, never overwriting, atomic writes) and reads them back with validation, so that a broken or
foreign file is reported by name instead of failing later inside an analysis.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from hloscope.errors import InputError, UsageError

SCHEMA_VERSION = 1
RUN_FILE = "run.json"
COMPARISON_FILE = "comparison.json"

STATUSES = ("running", "ok", "failed", "interrupted", "compiled", "setup")  # setup: run --setup-only
ARTIFACT_KINDS = ("hlo", "stablehlo", "buffer_assignment", "memory_report", "inductor_code", "trace", "thunk_sequence",
                  "thunk_metadata", "memory_analysis", "live_range", "llvm_ir", "object_file", "other")

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


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write JSON so that readers see either the old file or the complete new one, never a torn write."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file private (0600); a run record gets the permissions of any file the user creates.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            # strict JSON: a NaN or infinite figure (a broken clock) is written as null, never as bare NaN
            json.dump(_finite(data), handle, indent=2, sort_keys=False, default=_json_default, allow_nan=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _finite(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _umask() -> int:
    mask = os.umask(0)  # the only portable way to read the umask is to set it and put it back
    os.umask(mask)
    return mask


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy / framework scalars
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def write_run(run_dir: str | os.PathLike, record: dict) -> Path:
    path = Path(run_dir) / RUN_FILE
    write_json_atomic(path, record)
    return path


def write_comparison(comparison_dir: str | os.PathLike, record: dict) -> Path:
    path = Path(comparison_dir) / COMPARISON_FILE
    write_json_atomic(path, record)
    return path


# ---------------------------------------------------------------------------------------------------------- reading


def _read_json(path: Path, what: str) -> dict:
    from hloscope import files  # the reading layer: regular files only, bounded nesting and integers

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


def load_run(path: str | os.PathLike, check_artifacts: bool = True) -> dict:
    """Read and validate a run directory (or its run.json). Returns the record with `_dir` set to the run directory.

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
    _check_times(run_json, record)
    artifacts = record.setdefault("artifacts", [])
    if not isinstance(artifacts, list) or not all(isinstance(a, dict) and isinstance(a.get("path"), str)
                                                  and isinstance(a.get("kind", ""), str) for a in artifacts):
        raise InputError(run_json, "not a valid run.json: 'artifacts' must be objects with a 'path' and a 'kind'")
    run_dir = run_json.parent
    if check_artifacts:
        for artifact in artifacts:
            target = _inside(run_dir, artifact["path"], run_json)
            if not target.exists():
                kind = artifact.get("kind", "file")
                raise InputError(target, f"listed in {run_json} as a {kind} artifact but missing")
    record["_dir"] = str(run_dir)
    return record


def _check_times(run_json: Path, record: dict) -> None:
    """Step times are durations: a negative, NaN or infinite one (a hand-edited or broken record) is refused, since
    it would rank a mode fastest with a negative ratio."""
    timing = record.get("timing")
    if not isinstance(timing, dict):
        return
    for key, value in timing.items():
        values = value if isinstance(value, list) and key.endswith("_s") else [value] if key.endswith("_s") else []
        for item in values:
            if isinstance(item, (int, float)) and not isinstance(item, bool) and not (0 <= item < 1e9):
                raise InputError(run_json, f"not a valid run.json: 'timing.{key}' holds {item!r}, not a duration "
                                           "(negative, NaN or infinite)")


def _inside(run_dir: Path, relative: str, run_json: Path) -> Path:
    """Resolve an artifact path, refusing one outside the run directory (a hand-edited or hostile record)."""
    if "\0" in relative:
        raise InputError(run_json, f"artifact path {relative!r} holds a NUL byte")
    target = (run_dir / relative).resolve()
    if not target.is_relative_to(run_dir.resolve()):
        raise InputError(run_json, f"artifact path {relative!r} points outside the run directory")
    return target


def artifact_path(record: dict, artifact: dict) -> Path:
    """Absolute path of one artifact of a record returned by load_run."""
    return Path(record["_dir"]) / artifact["path"]


def load_comparison(path: str | os.PathLike) -> dict:
    """Read and validate comparison.json (path: the comparison directory or the file). Sets `_dir`."""
    path = Path(path)
    file = path / COMPARISON_FILE if path.is_dir() else path
    record = _read_json(file, "comparison.json")
    _check_schema(file, record, "comparison.json")
    modes = record.get("modes")
    if not isinstance(modes, list) or not all(isinstance(m, dict) and isinstance(m.get("dir"), str) for m in modes):
        raise InputError(file, "not a valid comparison.json: 'modes' must be a list of objects with a 'dir'")
    for entry in modes:
        check_dir = entry["dir"]
        if "/" in check_dir or "\\" in check_dir or check_dir in ("", ".", ".."):
            raise InputError(file, f"mode directory {check_dir!r} is not a plain name")
    record["_dir"] = str(file.parent)
    return record


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
    if (path / RUN_FILE).is_file():
        return [path]
    if (path / COMPARISON_FILE).is_file():
        comparison = load_comparison(path)
        return [path / m["dir"] for m in comparison["modes"] if (path / m["dir"] / RUN_FILE).is_file()]
    runs = sorted(p.parent for p in path.glob(f"*/{RUN_FILE}"))
    runs += sorted(p.parent for p in path.glob(f"*/*/{RUN_FILE}") if p.parent.parent not in runs)
    if not runs:
        raise InputError(path, "no hloscope run here (no run.json or comparison.json in it or one level below)")
    return runs
