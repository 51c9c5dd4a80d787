"""A whole job's profiles: one trace per rank or host, read in parallel, merged into one job view.

Each file is summarised on its own (`summarize_file`: the `trace_stats` object plus the file's kernel counts by name
and its collectives' start/duration), in this process, a local process pool (`jobs`) or a Dask distributed cluster
(`scheduler`); only those small summaries travel back. `job_view` merges them in file order, so the result does not
depend on where or in which order the files were read. `--state DIR` keeps each summary in its own file, written
atomically, so an interrupted analysis restarts where it stopped.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import msgspec

from hloscope import files as reading
from hloscope.errors import HloscopeError, InputError, MissingDependency, UsageError, warn
from hloscope.files import open_binary
from hloscope.machine import usable_cpus
from hloscope.trace.load import XPLANE_SUFFIX, load_trace, run_dir_of, trace_rank
from hloscope.trace.results import (
    CollectiveView,
    FileError,
    FileSummary,
    JobRank,
    JobView,
    KernelMix,
    MatchedCollective,
    RankMix,
    ShareDelta,
    SlowestStep,
)
from hloscope.trace.stats import trace_stats_and_totals

if TYPE_CHECKING:
    from hloscope.trace.program_categories import CategoryResolver
    from hloscope.trace.state_records import Identity

# Imports inside functions: what only some runs need, kept out of `trace stats` start-up on one trace file: the
# process pool, Dask's logging, --state's hashing and writing, the job view's statistics (~13 ms together) and a run's
# HLO readers (~23 ms).

SUMMARY_VERSION = 1
MIX_THRESHOLD = 0.05  # a rank's kernel mix "differs" when half the L1 distance of its shares to the median is above this
TOP_COLLECTIVES = 10
# One file's summary (see summarize_file), and the successful ones with their job rank, in rank order.
Summary = FileSummary | FileError
_Rows = list[tuple[int, FileSummary]]
# What run_per_file returns for each file (a Summary, an export's result), and calls as each one arrives: (index of
# the file, its result).
R = TypeVar("R")
_Arrived = Callable[[int, R], None]


def median(values: Iterable[float]) -> float:
    """statistics.median, imported for a job view only: it costs `trace stats` of one file 2 ms of imports."""
    from statistics import median as statistics_median

    return statistics_median(values)


# ---------------------------------------------------------------------------------------------------- ranks of files


def job_ranks(files: Sequence[Path]) -> tuple[list[int], str]:
    """The rank of each file in a job: the traces' own ranks (`distributedInfo.rank`, `rank-N` in the name) when every
    file has one and no two share it; otherwise each file's position in the (sorted) file list: per-host xplanes of a
    TensorBoard logdir, torch.profiler's `<host>_<pid>` files. Returns (ranks, "trace" | "file order")."""
    own = [_rank_or_none(file) for file in files]
    known = [rank for rank in own if rank is not None]
    if len(known) == len(own) and len(set(known)) == len(known):
        return known, "trace"
    return list(range(len(files))), "file order"


def ranks_within_modes(files: Sequence[Path], modes: Sequence[str | None]) -> list[int]:
    """The rank of each file within its mode (`job_ranks` of the files of one mode): the runs of a comparison are
    modes, each with its own ranks (one trace: rank 0), never ranks of one job."""
    ranks = [0] * len(files)
    for mode in dict.fromkeys(modes):
        indices = [index for index, file_mode in enumerate(modes) if file_mode == mode]
        for index, rank in zip(indices, job_ranks([files[index] for index in indices])[0]):
            ranks[index] = rank
    return ranks


def _rank_or_none(file: Path) -> int | None:
    """The trace's own rank; None for none and for one beyond 64 bits (that file's own reading refuses it in one
    line, and the others keep their output)."""
    try:
        return trace_rank(file)
    except InputError:
        return None


MAX_RANK = 1 << 31  # no job has more ranks; a larger number in --ranks is a typo


class RankSet:
    """The ranks `--rank`/`--ranks` ask for, kept as intervals (a membership test, never expanded): `0-999999` costs
    what `0-7` does."""

    def __init__(self, intervals: Iterable[tuple[int, int]] = ()) -> None:
        self.intervals = sorted(intervals)

    def __contains__(self, rank: object) -> bool:
        return isinstance(rank, int) and any(first <= rank <= last for first, last in self.intervals)

    def __bool__(self) -> bool:
        return bool(self.intervals)

    def __str__(self) -> str:
        shown = [str(first) if first == last else f"{first}-{last}" for first, last in self.intervals[:8]]
        return ", ".join(shown) + (", ..." if len(self.intervals) > 8 else "")


def parse_ranks(spec: str, extra: Iterable[int] = ()) -> RankSet:
    """`0-7`, `0,3,5-6` (plus the single ranks `extra`) -> the RankSet; ValueError for anything else: not a rank, a
    reversed range, a rank beyond MAX_RANK."""
    intervals = [(rank, rank) for rank in extra]
    for part in spec.split(",") if spec else ():
        part = part.strip()
        match = re.fullmatch(r"(\d{1,20})(?:\s*-\s*(\d{1,20}))?", part)
        if not match:
            raise ValueError(f"not a rank or range of ranks: {part!r} (expected e.g. 0-7 or 0,3,5-6)")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ValueError(f"empty range of ranks: {part!r} (the first rank comes first: {last}-{first})")
        if last > MAX_RANK:
            raise ValueError(f"rank {last} in {part!r} is beyond any job (at most {MAX_RANK})")
        intervals.append((first, last))
    return RankSet(intervals)


def host_of(file: str | os.PathLike[str]) -> str:
    """The host a profile names in its file name: TensorBoard's `<host>.xplane.pb` (the whole host name, dots
    included: `10.0.0.7_6003`, `node7.cluster.example`), torch.profiler's `<host>_<pid>.<time>.pt.trace.json` (up to
    the first dot), HTA's `rank-N.json.gz` (then the name stem)."""
    name = Path(file).name
    if name.endswith(XPLANE_SUFFIX) and len(name) > len(XPLANE_SUFFIX):
        return name[: -len(XPLANE_SUFFIX)]
    return name.split(".", 1)[0]


# ------------------------------------------------------------------------------------------------ one file's summary


def _resolver(file: Path, cache: dict[Path, CategoryResolver | None] = {}) -> CategoryResolver | None:  # noqa: B006
    # (one cache per process, workers included)
    """The HLO category resolver of the run directory `file` lies in, or None (as `trace stats` always did)."""
    run = run_dir_of(file)
    if run is None:
        return None
    from hloscope.trace.program_categories import resolver_for_run

    if run not in cache:
        try:
            cache[run] = resolver_for_run(run)
        except HloscopeError as error:
            warn(f"{error}: categories of {run} by kernel name only")
            cache[run] = None
    return cache[run]


def summarize_file(file: str, top: int = 10) -> Summary:
    """One trace's summary for the job view (picklable; `to_dict()` is its --state JSON): the `trace_stats` record
    with its `rank`, the kernel executions by name and the collectives (FileSummary); or the FileError of a file
    that cannot be read. Runs anywhere the file is reachable at the same path (a pool worker, a Dask worker)."""
    path = Path(file)
    try:
        rank = trace_rank(path)
        trace = load_trace(path)
        resolver = _resolver(path)
        if resolver is not None:
            from hloscope.trace.program_categories import categorized

            trace = categorized(trace, resolver)
        stats, totals = trace_stats_and_totals(trace, top=top)
    except InputError as error:  # one broken trace does not hide the others
        return FileError(file=str(file), error=error.message, error_path=error.path, line=error.line, col=error.col)
    return FileSummary(file=str(file), stats=msgspec.structs.replace(stats, rank=rank),
                       kernel_counts=totals.kernel_counts, collectives=totals.collectives())


def summary_error(summary: object) -> InputError | None:
    """The InputError of a file that could not be read (a FileError), else None."""
    return summary.input_error() if isinstance(summary, FileError) else None


# ------------------------------------------------------------------------------------------ running over many files


class FileProgress(Protocol):
    """What run_per_file reports progress to: the number of files and those already done, then one call per file."""

    def start(self, total: int, completed: int, label: str) -> None: ...

    def advance(self) -> None: ...

    def stop(self) -> None: ...


class _NoProgress:
    def start(self, total: int, completed: int, label: str) -> None:
        pass

    def advance(self) -> None:
        pass

    def stop(self) -> None:
        pass


def run_per_file(
    function: Callable[..., R],
    files: Sequence[Any],  # one task per file: its path, or what the function takes (trace export: a plan tuple)
    *,
    kwargs: dict[str, Any] | None = None,
    jobs: int | None = None,
    scheduler: str | None = None,
    progress: FileProgress | None = None,
    done: dict[int, R] | None = None,
    on_result: _Arrived[R] | None = None,
    label: str = "traces",
) -> list[R]:
    """`function(file, **kwargs)` for every file, results in file order: serially in this process (`jobs` 1, or one
    file), in a process pool of `jobs` workers (default: every core this process may use), or on the Dask
    distributed cluster at `scheduler` (an address such as tcp://host:8786, or a `distributed.Client`); the workers
    must see the files at the same paths. `done`: results already known (resumed), by index; `on_result(index,
    result)` is called in this process as each result arrives (to save it). `progress`: told the total at the
    start and each file as it arrives (the CLI passes a rich bar, hloscope.render.progress)."""
    kwargs = kwargs or {}
    results: list[R | None] = [None] * len(files)
    for index, result in (done or {}).items():
        results[index] = result
    todo = [index for index, result in enumerate(results) if result is None]
    jobs = usable_cpus() if jobs is None else jobs

    bar = progress or _NoProgress()

    def arrived(index: int, result: R) -> None:
        results[index] = result
        if on_result is not None:
            on_result(index, result)
        bar.advance()

    bar.start(len(files), len(files) - len(todo), label)
    try:
        if scheduler is not None:
            _run_dask(function, files, todo, kwargs, scheduler, arrived)
        elif jobs <= 1 or len(todo) <= 1:
            for index in todo:
                arrived(index, function(files[index], **kwargs))
        else:
            _run_pool(function, files, todo, kwargs, min(jobs, len(todo)), arrived)
    finally:
        bar.stop()
    return results  # type: ignore[return-value]


def _run_pool(function: Callable[..., R], files: Sequence[Any], todo: Iterable[int], kwargs: dict[str, Any],
              workers: int, arrived: _Arrived[R]) -> None:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    # forkserver: workers start from a clean, single-threaded process (this one may run the progress bar's thread)
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        # at most 2 tasks queued per worker: results arrive (and are saved) as files finish
        pending: dict[Future[R], int] = {}
        queue = iter(todo)
        try:
            for index in queue:
                pending[pool.submit(function, files[index], **kwargs)] = index
                if len(pending) >= 2 * workers:
                    break
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=pending.__getitem__):
                    index = pending.pop(future)
                    arrived(index, future.result())
                    following = next(queue, None)
                    if following is not None:
                        pending[pool.submit(function, files[following], **kwargs)] = following
        except BaseException:
            for future in pending:
                future.cancel()
            raise


def _run_dask(function: Callable[..., R], files: Sequence[Any], todo: Sequence[int], kwargs: dict[str, Any],
              scheduler: Any, arrived: _Arrived[R]) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError as error:
        raise MissingDependency("distributed", "--scheduler sends the per-file work to a Dask cluster") from error
    own_client = not isinstance(scheduler, Client)
    client: Any = None
    try:
        if own_client:
            client = _connect(Client, scheduler)
        else:
            client = scheduler
        with client.as_current():  # as_completed looks for "the" client
            futures = client.map(function, [files[i] for i in todo], pure=False, **kwargs)
            index_of = {future.key: index for future, index in zip(futures, todo)}
            for future in as_completed(futures):  # type: ignore[no-untyped-call]
                arrived(index_of[future.key], future.result())
                future.release()
    finally:
        if own_client and client is not None:
            client.close()  # its event loop thread would keep the process alive


# Beyond Dask's connect timeout, for the rest of the handshake (the scheduler's first message) to arrive.
HANDSHAKE_GRACE_S = 10.0


def _connect(client_class: Any, scheduler: str) -> Any:
    """A Dask client of the scheduler at `scheduler`, or UsageError in one line naming the address: refused,
    unreachable, or something there that is no Dask scheduler. Bounded in time whatever answers there: Dask's connect
    timeout (`distributed.comm.timeouts.connect`, 30 s) for connecting and reading its handshake, and the whole
    attempt runs in a thread that is given up that long plus HANDSHAKE_GRACE_S later (a port that accepts and stays
    silent). A reply that is no Dask message (an HTTP server: its first bytes read as a length of exabytes) fails
    there too. Dask's own log lines about the attempt are kept off stderr."""
    import logging

    address = scheduler_address(scheduler)
    seconds = _connect_timeout()
    outcome: dict[str, Any] = {}

    def connect() -> None:
        try:
            outcome["client"] = client_class(address, timeout=seconds, set_as_default=False)
        # A thread body: anything a stranger's reply provokes in Dask's reader (MemoryError, OverflowError included)
        # is handed to the caller as a failed connect.
        except BaseException as error:  # noqa: BLE001
            outcome["error"] = error

    quiet = [logging.getLogger(name) for name in ("distributed", "tornado")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        thread = threading.Thread(target=connect, name="hloscope-dask-connect", daemon=True)
        thread.start()
        thread.join(seconds + HANDSHAKE_GRACE_S)
    finally:
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)
    if thread.is_alive():  # left behind: a daemon thread does not keep the process alive
        raise UsageError(f"--scheduler {scheduler}: cannot connect to a Dask scheduler: no handshake from it within "
                         f"{seconds + HANDSHAKE_GRACE_S:g} s")
    error = outcome.get("error")
    if isinstance(error, MemoryError | OverflowError):
        raise UsageError(f"--scheduler {scheduler}: cannot connect to a Dask scheduler: what answered there is not one "
                         "(its reply is no Dask message)")
    if error is not None:
        raise UsageError(f"--scheduler {scheduler}: cannot connect to a Dask scheduler: {_first_line(error)}")
    return outcome["client"]


def _connect_timeout() -> float:
    """Dask's connect timeout in seconds (`distributed.comm.timeouts.connect`, settable as
    DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT), 30 when it cannot be read."""
    try:
        from dask.config import get
        from dask.utils import parse_timedelta

        seconds = parse_timedelta(get("distributed.comm.timeouts.connect"), default="seconds")
    # no dask; or a value it cannot parse: by the text, dask raises KeyError or IndexError (LookupError),
    # AttributeError, OverflowError (ArithmeticError), ValueError or TypeError
    except (ImportError, LookupError, AttributeError, ArithmeticError, ValueError, TypeError):
        return 30.0
    return float(seconds) if isinstance(seconds, int | float) and 0 < seconds < 86_400 else 30.0


_SCHEDULER = re.compile(r"(tcp|tls|ws|wss|ucx)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


def scheduler_address(address: str) -> str:
    """`--scheduler`'s address as Dask takes it, `scheme://host:port` (tcp, tls, ws, wss, ucx); UsageError otherwise,
    before anything connects."""
    match = _SCHEDULER.fullmatch(address.strip())
    if not match or not 0 < int(match.group(3)) < 65536:
        raise UsageError(f"--scheduler {address!r}: not a scheduler address (expected scheme://host:port, e.g. "
                         "tcp://10.0.0.1:8786)")
    return address.strip()


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


# ----------------------------------------------------------------------------------------------- resumable state


class StateDir:
    """Per-file results kept under DIR, one JSON file each, written atomically (temporary file + rename): a restart
    reuses what is there and reads only the files still missing or changed.

    A record is a cache of one trace, checked against that trace, never trusted on its own: it is used only when the
    trace has the size, modification time (ns) and BLAKE2b digest of its bytes that the record names (read again in
    full: a file rewritten in place with the same size and time is read again too), under the same options and
    summary version, and when the record has a summary's shape (decoded into typed msgspec structs, so a missing key
    or a value of another type is a mismatch, never a KeyError) with figures that agree with each other. Anything
    else in DIR, a FIFO, a folder, a file too large, JSON nested too deep, a record of another version, is ignored:
    the trace is read again. A record that cannot be written (a folder or FIFO in its place, a full disk) is skipped
    with one warning; the analysis goes on."""

    def __init__(self, directory: str | os.PathLike[str], options: dict[str, Any]):
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise UsageError(f"--state: {directory}: not a directory") from None
        except OSError as error:
            raise UsageError(f"--state: {directory}: cannot create: {error.strerror or error}") from None
        if not self.directory.is_dir():
            raise UsageError(f"--state: {directory}: not a directory")
        self.options = options
        self._seen: dict[str, tuple[int, int]] = {}  # file -> (size, mtime_ns) before its summary was computed
        self._warned = False

    def _path(self, file: str) -> Path:
        return self.directory / f"{_text_digest(os.path.abspath(file))[:32]}.json"

    def load(self, files: Sequence[str]) -> dict[int, Summary]:
        done: dict[int, Summary] = {}
        for index, file in enumerate(files):
            try:
                info = os.stat(file)
            except (OSError, ValueError):
                continue
            self._seen[file] = (info.st_size, info.st_mtime_ns)
            result = self._cached(file, info)
            if result is not None:
                done[index] = result
        return done

    def _cached(self, file: str, info: os.stat_result) -> FileSummary | None:
        """The record's summary when it is one of this very trace, else None (never an exception)."""
        try:
            data = reading.read_bytes(self._path(file), "summary record", max_bytes=MAX_STATE_RECORD_BYTES)
        except InputError:  # absent, a FIFO, a folder, unreadable, too large
            return None
        if reading.json_depth_error(data, MAX_STATE_DEPTH) is not None:
            return None
        record = _decode_record(data)
        if record is None:
            return None
        identity, result = record
        if (identity.file != os.path.abspath(file) or identity.size != info.st_size
                or identity.mtime_ns != info.st_mtime_ns or identity.version != SUMMARY_VERSION
                or identity.options != self.options):
            return None
        if identity.content != _file_digest(file, info):  # the bytes themselves, not only what stat says
            return None
        return result

    def save(self, file: str, result: Summary) -> None:
        if isinstance(result, FileError):
            return  # an unreadable file is tried again next time
        from hloscope.writing import atomic_output  # only for --state: tempfile costs `trace stats` 3 ms of imports

        path = self._path(file)
        try:
            info = os.stat(file)
            if self._seen.get(file, (info.st_size, info.st_mtime_ns)) != (info.st_size, info.st_mtime_ns):
                return  # the trace changed while it was read: no record of it
            content = _file_digest(file, info)
            if content is None or _consistent(result) is None:
                return
            identity = {"file": os.path.abspath(file), "size": info.st_size, "mtime_ns": info.st_mtime_ns,
                        "content": content, "options": self.options, "version": SUMMARY_VERSION}
            existing = os.lstat(path) if os.path.lexists(path) else None
            if existing is not None and not stat.S_ISREG(existing.st_mode):
                raise IsADirectoryError(errno.EEXIST, "something that is not a record is in its place", str(path))
            with atomic_output(path, text=True) as handle:
                handle.write(json.dumps({"identity": identity, "result": result.to_dict()}))
        except (OSError, ValueError) as error:
            if not self._warned:
                self._warned = True
                warn(f"--state: {path}: cannot keep this summary ({getattr(error, 'strerror', None) or error}); "
                     "the analysis goes on without it")


MAX_STATE_RECORD_BYTES = 64 << 20  # a summary is a few KB to a few MB (kernel counts of a large trace)
MAX_STATE_DEPTH = 8  # record -> result -> stats -> per_step -> step -> categories: 6


def _text_digest(text: str) -> str:
    import hashlib  # only for --state: trace stats starts without it

    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _file_digest(file: str, info: os.stat_result) -> str | None:
    """BLAKE2b of the trace's bytes, read with the bounded reader (a FIFO is never opened for reading); None when
    it cannot be read or is not the file `info` describes any more."""
    import hashlib

    digest = hashlib.blake2b(digest_size=32)
    size = 0
    try:
        with open_binary(file, "trace") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
            after = os.fstat(handle.fileno())
    except (InputError, OSError):
        return None
    if size != info.st_size or (after.st_size, after.st_mtime_ns) != (info.st_size, info.st_mtime_ns):
        return None
    return digest.hexdigest()


def _decode_record(data: bytes) -> tuple[Identity, FileSummary] | None:
    """(identity, summary) of a record in the shape hloscope writes, or None: decoded into the typed summary (every
    field present with its type), then checked for figures that agree (_consistent)."""
    from hloscope.trace.state_records import Record  # only for --state

    try:
        record = msgspec.json.decode(data, type=Record)
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError, ValueError, RecursionError):
        return None
    if _consistent(record.result) is None:
        return None
    return record.identity, record.result


def _consistent(result: FileSummary) -> FileSummary | None:
    """`result` when its figures agree: one file named throughout, its rank recorded, as many step rows as steps, the
    kernel counts adding up to the kernels, each collective naming one of its names. None otherwise."""
    stats = result.stats
    if not (result.file == stats.file and stats.steps == len(stats.per_step)
            and stats.kernels == sum(result.kernel_counts.values()) and stats.rank is not msgspec.UNSET):
        return None
    columns = result.collectives
    if not len(columns.name) == len(columns.start_us) == len(columns.dur_us):
        return None
    if any(not 0 <= index < len(columns.names) for index in columns.name):
        return None
    return result


# --------------------------------------------------------------------------------------------------- the job view


def job_view(summaries: Sequence[Summary], ranks: Sequence[int], top: int = TOP_COLLECTIVES,
             mix_threshold: float = MIX_THRESHOLD) -> JobView:
    """The job across its ranks, from the per-file summaries (errors left out) and each one's job rank:

    - `ranks`: per rank, steps, median step time, device busy and idle over its steps, kernels, time waiting in
      collectives for later ranks, how often it was the last to arrive;
    - `steps`: per step number present on two or more ranks, the slowest rank, its step time, the median and how
      far the slowest is behind the median and behind the next slowest;
    - `collectives`: each collective matched across ranks (same kernel name, n-th call on every rank): the spread of
      its start (latest start - earliest: waiting) apart from its shortest duration on any rank (the transfer,
      once all have arrived); totals and the `top` by spread;
    - `kernel_mix`: per rank, how far its kernel mix (each kernel name's share of its kernels) is from the median mix
      (half the L1 distance: 0 same, 1 disjoint), with the kernels it runs more or less than the median; `differs`:
      the ranks above `mix_threshold`.
    Deterministic: the same summaries give the same view, whatever order they were computed in."""
    rows: _Rows = sorted(((rank, summary) for rank, summary in zip(ranks, summaries)
                          if isinstance(summary, FileSummary)), key=lambda pair: (pair[0], pair[1].file))
    collectives, wait_by_rank, last_by_rank = _collectives(rows, top)
    per_rank: list[JobRank] = []
    for rank, summary in rows:
        stats = summary.stats
        steps = stats.per_step
        durations = [step.host_duration_us for step in steps]
        per_rank.append(JobRank(
            rank=rank, file=summary.file, host=host_of(summary.file), steps=stats.steps, kernels=stats.kernels,
            device_time_us=stats.device_time_us, median_step_us=round(median(durations), 3) if durations else None,
            busy_us=round(sum(step.device_busy_us for step in steps), 3),
            idle_us=round(sum(step.device_idle_us for step in steps), 3),
            collective_wait_us=wait_by_rank.get(rank, 0.0), last_to_arrive=last_by_rank.get(rank, 0),
        ))
    return JobView(ranks=per_rank, steps=_steps(rows), collectives=collectives,
                   kernel_mix=_kernel_mix(rows, mix_threshold))


def _steps(rows: _Rows) -> list[SlowestStep]:
    by_step: dict[int, list[tuple[float, int, float]]] = {}
    for rank, summary in rows:
        for step in summary.stats.per_step:
            by_step.setdefault(step.step, []).append((step.host_duration_us, rank, step.device_busy_us))
    out: list[SlowestStep] = []
    for number in sorted(by_step):
        times = by_step[number]
        if len(times) < 2:
            continue
        ordered = sorted(times, key=lambda t: (-t[0], t[1]))
        slowest, following = ordered[0], ordered[1]
        middle = median(t[0] for t in times)
        out.append(SlowestStep(step=number, ranks=len(times), slowest_rank=slowest[1],
                               slowest_us=round(slowest[0], 3), slowest_busy_us=round(slowest[2], 3),
                               median_us=round(middle, 3), fastest_us=round(ordered[-1][0], 3),
                               behind_median_us=round(slowest[0] - middle, 3),
                               behind_next_us=round(slowest[0] - following[0], 3), next_rank=following[1]))
    return out


def _collectives(rows: _Rows, top: int) -> tuple[CollectiveView, dict[int, float], dict[int, int]]:
    """Match each rank's collectives by (kernel name, occurrence): the n-th call of a collective kernel on one rank
    is the n-th on every other (NCCL/RCCL and XLA issue collectives in the same order on every rank of a group).
    Returns the view, and each rank's time waiting for later ranks and how often it was the last to arrive."""
    calls: dict[tuple[str, int], dict[int, tuple[float, float]]] = {}
    ranks_with = []
    for rank, summary in rows:
        record = summary.collectives
        if not record.name:
            continue
        ranks_with.append(rank)
        seen: dict[int, int] = {}
        names = record.names
        for name_index, start, duration in zip(record.name, record.start_us, record.dur_us):
            occurrence = seen.get(name_index, 0)
            seen[name_index] = occurrence + 1
            calls.setdefault((names[name_index], occurrence), {})[rank] = (start, duration)
    wanted = len(ranks_with)
    matched: list[MatchedCollective] = []
    wait_by_rank = dict.fromkeys(ranks_with, 0.0)
    last_by_rank = dict.fromkeys(ranks_with, 0)
    for (name, occurrence), by_rank in calls.items():
        if wanted < 2 or len(by_rank) != wanted:
            continue
        starts = sorted((start, rank) for rank, (start, _) in by_rank.items())
        latest, last_rank = max(starts, key=lambda s: (s[0], -s[1]))
        for start, rank in starts:
            wait_by_rank[rank] += latest - start
        last_by_rank[last_rank] += 1
        durations = [duration for _, duration in by_rank.values()]
        matched.append(MatchedCollective(name=name, occurrence=occurrence, start_us=round(starts[0][0], 3),
                                         start_spread_us=round(latest - starts[0][0], 3), first_rank=starts[0][1],
                                         last_rank=last_rank, shortest_us=round(min(durations), 3),
                                         longest_us=round(max(durations), 3)))
    matched.sort(key=lambda c: (c.start_us, c.name, c.occurrence))
    view = CollectiveView(
        ranks=wanted,
        matched=len(matched),
        unmatched=sum(1 for by_rank in calls.values() if len(by_rank) != wanted) if wanted >= 2 else len(calls),
        start_spread_us=round(sum(c.start_spread_us for c in matched), 3),
        transfer_us=round(sum(c.shortest_us for c in matched), 3),
        top=sorted(matched, key=lambda c: (-c.start_spread_us, c.start_us, c.name))[:top],
    )
    return view, {rank: round(us, 3) for rank, us in wait_by_rank.items()}, last_by_rank


def _kernel_mix(rows: _Rows, threshold: float) -> KernelMix:
    shares: list[tuple[int, dict[str, float]]] = []
    for rank, summary in rows:
        counts = summary.kernel_counts
        total = sum(counts.values())
        shares.append((rank, {name: count / total for name, count in counts.items()} if total else {}))
    if len(shares) < 2:
        return KernelMix(ranks=[], differs=[], threshold=threshold)
    names = sorted({name for _, share in shares for name in share})
    typical = {name: median(share.get(name, 0.0) for _, share in shares) for name in names}
    out: list[RankMix] = []
    for rank, share in shares:
        deltas = {name: share.get(name, 0.0) - typical[name] for name in names}
        distance = 0.5 * sum(abs(delta) for delta in deltas.values())
        more = sorted((n for n in names if deltas[n] > 0), key=lambda n: (-deltas[n], n))[:3]
        less = sorted((n for n in names if deltas[n] < 0), key=lambda n: (deltas[n], n))[:3]
        out.append(RankMix(rank=rank, distance=round(distance, 4),
                           more=[ShareDelta(name=n, share_delta=round(deltas[n], 4)) for n in more],
                           less=[ShareDelta(name=n, share_delta=round(deltas[n], 4)) for n in less]))
    return KernelMix(ranks=out, differs=[row.rank for row in out if row.distance > threshold], threshold=threshold)
