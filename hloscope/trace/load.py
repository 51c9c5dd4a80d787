"""Find and open traces: a trace file, a run directory or a TensorBoard log directory -> `Trace` objects.

xplane.pb files are parsed here by XLA's reader (which holds the XSpace in memory) and their events produced plane by
plane on each iteration; Kineto / Chrome JSON traces are only checked here and streamed each time their events are
iterated, so a multi-GB trace never sits in memory.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import sys
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from hloscope import files
from hloscope.errors import InputError, one_line, warn
from hloscope.runs.layout import COMPARISON_FILE, RUN_FILE
from hloscope.runs.records import RunRecord
from hloscope.trace import kineto, perfetto
from hloscope.trace.model import MAX_EVENT_US, MAX_TIME_US, Event, Flaws, Trace

# Imports inside functions: run directories' and xplane readers, only for those inputs (`trace stats` start-up).

XPLANE_SUFFIX = ".xplane.pb"
JSON_TRACE_SUFFIXES = (".trace.json", ".trace.json.gz")  # PyTorch's *.pt.trace.json[.gz] and JAX's <host>.trace.json.gz


def load_traces(path: str | os.PathLike[str]) -> list[Trace]:
    """Every trace at `path`, in the order of `trace_files`; the first unreadable one raises InputError."""
    return [load_trace(file) for file in trace_files(path)]


def trace_files(path: str | os.PathLike[str]) -> list[Path]:
    """The trace files at `path`: a trace file; a run or comparison directory (its run.json files are read and
    checked, and the traces they list are used, in the comparison's mode order and each run's artifact order); or any
    other directory, searched recursively (sorted by path)."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or directory")
    if not path.is_file() and not path.is_dir():  # a pipe (`<(zcat trace.gz)`), a device, a socket
        raise InputError(path, "not a regular file or directory: save the trace to a file first")
    if path.is_file() and path.name not in (RUN_FILE, COMPARISON_FILE):
        return [path]
    if path.is_file() or (path / RUN_FILE).is_file() or (path / COMPARISON_FILE).is_file():
        files = _traces_of_runs(path)
    else:
        files = find_trace_files(path, any_json=True)
    if not files:
        raise InputError(path, f"no traces found (looked for *{XPLANE_SUFFIX} and Kineto / Chrome trace JSON, "
                               "*.json and *.json.gz)")
    return files


def trace_files_and_modes(path: str | os.PathLike[str]) -> tuple[list[Path], list[str | None]]:
    """`trace_files`, and the mode of each file's run (run.json's `mode`) where the traces come from hloscope runs (a
    run or comparison directory, a folder of runs); None for a trace file or a directory that holds no run. A
    comparison's modes are its runs, not ranks of one job."""
    files = trace_files(path)
    path = Path(path)
    if path.is_file() and path.name not in (RUN_FILE, COMPARISON_FILE):
        return files, [None] * len(files)
    if not (path.is_file() or (path / RUN_FILE).is_file() or (path / COMPARISON_FILE).is_file()):
        return files, [None] * len(files)
    # The record reader is imported here, for run and comparison directories only: a trace file given alone (the
    # common case, timed by benches/bench_trace_stats.py) does not pay for its import, a tenth of the whole command.
    from hloscope.runs import rundir

    mode_of: dict[Path, str] = {}
    for run in rundir.find_runs(path):
        record = rundir.load_run(run, check_artifacts=False)
        for file in _listed_traces(run, record):
            mode_of.setdefault(file, record.mode)
    return files, [mode_of.get(file) for file in files]


def find_trace_files(directory: Path, any_json: bool = False) -> list[Path]:
    """xplane.pb and *.trace.json[.gz] files under `directory`. With `any_json` (a directory that is no run: HTA's
    layout, `rank-0.json.gz`, `rank-1.json.gz`, ...), also every other *.json[.gz] whose beginning holds a Kineto /
    Chrome trace; the other JSON files are skipped with one note each on stderr."""
    found = []
    for root, _, names in os.walk(directory):
        for name in names:
            if name.endswith((XPLANE_SUFFIX, *JSON_TRACE_SUFFIXES, *perfetto.PERFETTO_SUFFIXES)):
                found.append(Path(root, name))
            elif any_json and name.endswith(OTHER_JSON_SUFFIXES) and name not in (RUN_FILE, COMPARISON_FILE):
                file = Path(root, name)
                why = _not_a_trace(file)
                if why is None:
                    found.append(file)
                else:
                    print(f"hloscope: note: {one_line(f'{file}: skipped, {why}')}", file=sys.stderr, flush=True)
    return _without_duplicate_profiles(sorted(found))


OTHER_JSON_SUFFIXES = (".json", ".json.gz")
# How much of a JSON file is looked at to tell a trace: Kineto writes "traceEvents" after its small header
# (schemaVersion, deviceProperties, distributedInfo, ...).
_SNIFF_BYTES = 1 << 20
_RANK_IN_HEADER = re.compile(rb'"distributedInfo"\s*:\s*\{[^}]*?"rank"\s*:\s*(\d+)')
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[-_]?(\d+)", re.IGNORECASE)


def _not_a_trace(file: Path) -> str | None:
    """Why a JSON file found in a directory is not a Kineto / Chrome trace (None: it is one). A FIFO, a device or a
    socket is never opened: it is skipped for what it is."""
    if not files.is_regular(file):
        return "not a regular file (a FIFO, a device, a socket or a link to nothing)"
    try:
        head = _head(file, _SNIFF_BYTES)
    except InputError as error:
        return error.message
    start = head.lstrip(b" \t\r\n\xef\xbb\xbf")[:1]
    if start == b"{" and b'"traceEvents"' in head:
        return None
    if start == b"[" and b'"ph"' in head:
        return None
    return "not a Kineto / Chrome trace (no traceEvents near its start)"


def trace_rank(file: str | os.PathLike[str]) -> int | None:
    """The distributed rank a Kineto trace was recorded on: its header's `distributedInfo.rank`, else a `rank-N` /
    `rank_N` / `rankN` in its file name; None for neither (xplanes included)."""
    path = Path(file)
    if not path.name.endswith(XPLANE_SUFFIX):
        try:
            match = _RANK_IN_HEADER.search(_head(path, _SNIFF_BYTES))
        except InputError:
            match = None
        if match:
            return _rank(path, match.group(1).decode("ascii"), "its header's distributedInfo.rank")
    named = _RANK_IN_NAME.search(path.name)
    return _rank(path, named.group(1), "the rank in its file name") if named else None


def _rank(path: Path, digits: str, where: str) -> int:
    """A rank as written, refused in one line naming the file when it does not fit 64 bits (a 5,000-digit rank)."""
    rank = files.int64(digits)
    if rank is None:
        shown = digits if len(digits) <= 24 else f"{digits[:12]}...({len(digits):,} digits)"
        raise InputError(path, f"{where} {shown} does not fit in 64 bits: not a rank")
    return rank


def _without_duplicate_profiles(files: list[Path]) -> list[Path]:
    """JAX writes <host>.trace.json.gz beside <host>.xplane.pb for the same profile: keep the xplane (more detail).
    Each file once, in the order given."""
    kept = []
    for file in dict.fromkeys(files):
        if file.name.endswith(JSON_TRACE_SUFFIXES):
            stem = file.name[: file.name.index(".trace.json")]
            if (file.parent / f"{stem}{XPLANE_SUFFIX}").exists():
                continue
        kept.append(file)
    return kept


def _traces_of_runs(path: Path) -> list[Path]:
    """The traces of the hloscope runs at `path`, with their run.json (and comparison.json) validated."""
    from hloscope.runs import rundir

    files = []
    for run in rundir.find_runs(path):
        record = rundir.load_run(run, check_artifacts=False)  # an HLO file missing is not this command's concern
        files += _listed_traces(run, record)
    return _without_duplicate_profiles(files)


def _listed_traces(run: Path, record: RunRecord) -> list[Path]:
    run_json = run / RUN_FILE
    listed = [artifact for artifact in record.artifacts if artifact.kind == "trace"]
    if not listed:  # a run made by hand or by an older hloscope: its traces are wherever they are
        return find_trace_files(run)
    from hloscope.runs.rundir import artifact_inside  # for run directories only, as in trace_files_and_modes

    files: list[Path] = []
    for artifact in listed:
        artifact_inside(run, artifact.path, run_json)  # outside the run, a NUL byte, a symlink loop: one line
        target = run / artifact.path
        if not target.exists():
            raise InputError(target, f"listed in {run_json} as a trace artifact but missing")
        files += find_trace_files(target) if target.is_dir() else [target]
    return files


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """One trace file: *.pb is an xplane; JSON traces are told apart (Kineto or JAX's Chrome export) by content."""
    path = Path(path)
    # the reading layer: only a regular file is opened (a FIFO named *.trace.json would block forever)
    files.regular_file(path, "a trace file", "save the trace to a file first")
    if path.name.endswith(".pb"):
        return _xplane_trace(path)
    if perfetto.is_perfetto_file(path) and perfetto.is_protobuf(path):  # torch names JSON .pftrace too: told by content
        return Trace(file=str(path), format="perfetto",
                     events=CheckedEvents(path, lambda flaws: kineto.iter_perfetto_events(path, flaws)))
    head = _head(path)
    if not head:
        raise InputError(path, "empty file: not a trace")
    if head.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] in (b"{", b"["):
        kind = "chrome" if (b'"/host:' in head or b'"/device:' in head) else "kineto"
        return Trace(file=str(path), format=kind,
                     events=CheckedEvents(path, lambda flaws: kineto.iter_events(path, flaws),
                                          lambda flaws: kineto.iter_events(path, flaws, lean=True)))
    if path.name.endswith((".json", ".gz")) or head[:1] in (b"{", b"["):
        raise InputError(path, "not a JSON trace: it does not start with '{' or '['")
    return _xplane_trace(path)


def _xplane_trace(path: Path) -> Trace:
    from hloscope.trace import xplane  # only for xplanes: ~11 ms less start-up for `trace stats` on a JSON trace

    space = xplane.XSpaceEvents(path)
    return Trace(file=str(path), format="xplane", events=CheckedEvents(path, space.events))


_warned: set[str] = set()


class CheckedEvents:
    """The events of one trace with impossible times left out: a negative, NaN, infinite or day-long duration, a
    start that is not a finite time, and what the reader itself finds (an xplane event with a negative offset, on a
    line with a negative timestamp). They would give "device time -307 ms" or "inf ms" and shift idle attribution.
    The rest of the trace is used; one warning line per file names every class found with its count (and the values
    the reader read as something else, such as step markers beyond 64 bits). A trace whose every event is impossible
    is refused in one line."""

    def __init__(self, path: Path, read: Callable[[Flaws], Iterable[Event]],
                 read_lean: Callable[[Flaws], Iterable[Event]] | None = None):
        self.path = path
        self._read = read  # one pass over the reader's events, counting what it leaves out in the Flaws given
        self._read_lean = read_lean or read  # the same, free to count host ops and annotations without producing them
        self.skipped = 0
        self.counted = 0

    def __iter__(self) -> Iterator[Event]:
        return self._checked(self._read)

    def lean(self) -> Iterator[Event]:
        """The events, except that host ops and annotations with possible times (kinds that `trace stats` only
        counts) may be counted rather than produced: `counted` says how many once the pass is over. Building them is
        most of the reading time of a PyTorch trace."""
        return self._checked(self._read_lean)

    def _checked(self, read: Callable[[Flaws], Iterable[Event]]) -> Iterator[Event]:
        flaws = Flaws()
        left_out = flaws.left_out
        kept = 0
        for event in read(flaws):
            if 0 <= event.dur_us <= MAX_EVENT_US and -MAX_TIME_US <= event.start_us <= MAX_TIME_US:  # _impossible's test
                kept += 1
                yield event
                continue
            why = _impossible(event)
            if why is not None:
                left_out[why] += 1
                continue
            kept += 1
            yield event
        self.counted = flaws.counted
        self._finish(flaws, kept + flaws.counted)

    def _finish(self, flaws: Flaws, kept: int) -> None:
        self.skipped = skipped = sum(flaws.left_out.values())
        if skipped and not kept:
            raise InputError(self.path, f"not read: every event has impossible times ({_described(flaws.left_out)})")
        if (skipped or flaws.read_otherwise) and str(self.path) not in _warned:
            _warned.add(str(self.path))
            parts = []
            if skipped:
                parts.append(f"{skipped:,} event(s) with impossible times left out of every figure "
                             f"({_described(flaws.left_out)})")
            parts += [f"{count:,} {what}" for what, count in flaws.read_otherwise.items()]
            warn(f"{self.path}: {'; '.join(parts)}")


def _described(counts: Counter[str]) -> str:
    """`2 with a negative duration, 1 longer than a day`: every class found, the commonest first."""
    return ", ".join(f"{count:,} {why}" for why, count in counts.most_common())


NEGATIVE_DURATION = "with a negative duration"
NAN_DURATION = "with a duration that is not a number"
INFINITE_DURATION = "with an infinite duration"
DAY_LONG = "longer than a day"
NAN_START = "with a start that is not a number"
START_OUT_OF_RANGE = "with a start more than 3,000 years from 1970"


def _impossible(event: Event) -> str | None:
    """Why an event's times are impossible (the class the warning counts), or None."""
    duration, start = event.dur_us, event.start_us
    if not 0 <= duration <= MAX_EVENT_US:  # also True for NaN
        if duration != duration:
            return NAN_DURATION
        if duration < 0:
            return NEGATIVE_DURATION
        return INFINITE_DURATION if math.isinf(duration) else DAY_LONG
    if not -MAX_TIME_US <= start <= MAX_TIME_US:
        return NAN_START if start != start else START_OUT_OF_RANGE
    return None


def _head(path: Path, size: int = 65536) -> bytes:
    """The first bytes of the file, decompressed when it is gzip."""
    try:
        with kineto.open_trace_bytes(path) as stream:
            return stream.read(size)
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise InputError(path, f"truncated or corrupt gzip data ({error})") from error
    except IsADirectoryError as error:
        raise InputError(path, "is a directory, not a trace file") from error
    except OSError as error:
        raise InputError(path, f"cannot read: {error.strerror or error}") from error


def run_dir_of(path: str | os.PathLike[str], levels: int = 8) -> Path | None:
    """The run directory (holding run.json) that a trace file lies in, if any."""
    current = Path(path).resolve()
    for parent in [current, *current.parents][: levels + 1]:
        if (parent / RUN_FILE).is_file():
            return parent
    return None


def device_events_by_run(path: str | os.PathLike[str]) -> tuple[dict[Path, list[Event]], list[InputError]]:
    """({run directory: the device executions of its traces}, [why a run's traces could not be read]) for a run or
    comparison directory (for `hloscope hlo stats`, which shows them beside the HLO of the same run); ({}, []) for
    anything else. A broken trace costs only its run's measured time."""
    from hloscope.runs import rundir

    path = Path(path)
    if not ((path / RUN_FILE).is_file() or (path / COMPARISON_FILE).is_file()):
        return {}, []
    found: dict[Path, list[Event]] = {}
    errors: list[InputError] = []
    for run in rundir.find_runs(path):
        try:
            files = _without_duplicate_profiles(_listed_traces(run, rundir.load_run(run, check_artifacts=False)))
            found[run.resolve()] = [e for file in files for e in load_trace(file).events if e.is_device_exec]
        except InputError as error:
            errors.append(error)
    return found, errors
