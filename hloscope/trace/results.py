"""What the trace analyses return, as typed data: one trace's record (`trace stats --json`'s `traces`), the per-file
summary the job view and `--state` are made of, the job document (`modes`, `ranks`, `job`, `jobs`) and the summary of
`trace export`. Renderers read the attributes; `to_dict()` gives the JSON the commands print, key for key.

Fields are in the JSON's key order. A key that only some records hold (`host_ops` of a host-only trace, a trace's
`rank` and `mode` once it is placed in a job) is UNSET where it is absent. A figure that can be written as an integer
(`host_launch_us` is 0 when no launch matched) is a `Number`, so that what is read back from `--state` prints as it
was computed. Every struct pickles: the per-file summaries travel back from pool and Dask workers.
"""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from hloscope.errors import InputError
from hloscope.typed import Record

# A figure as computed: an integer stays one (round(0, 3) is 0), so that a record read back prints the same bytes.
Number = int | float


class _Result(Record, frozen=True, kw_only=True):
    """A part of a trace's record or of the job document."""


# ------------------------------------------------------------------------------------------------ one trace's record


class TopRow(_Result, frozen=True, kw_only=True):
    """A device execution name (kernel, XLA op, memcpy) by total device time."""

    name: str
    count: int
    total_us: Number
    share: Number  # of the trace's device time


class HloOpRow(_Result, frozen=True, kw_only=True):
    """An HLO instruction that device executions name, by total device time."""

    hlo_op: str
    hlo_module: str | None
    count: int
    total_us: Number
    share: Number


class StepRow(_Result, frozen=True, kw_only=True):
    """One profiled step: its host window, the device work placed in it, and its collectives."""

    step: int
    start_us: Number
    host_duration_us: Number
    kernels: int
    device_busy_us: Number
    device_span_us: Number
    device_idle_us: Number
    idle_gaps: int
    largest_gap_us: Number
    host_runtime_us: Number  # host launches of the step's device work
    executions_by_category: dict[str, int]
    categories_us: dict[str, Number]
    # wall time with a collective running (union), and the part of it with no other device work beside it
    collective_us: Number
    collective_exposed_us: Number


class BeforeWindow(_Result, frozen=True, kw_only=True):
    """Device work launched before the profiler started recording: in no step."""

    executions: int
    kernels: int
    device_time_us: Number


class HostOpRow(_Result, frozen=True, kw_only=True):
    """A framework op of a host-only trace, medians over the kept steps."""

    name: str
    calls_per_step: Number
    per_call_us: Number
    max_call_us: Number
    us_per_step: Number
    share_of_step: Number


class HostOps(_Result, frozen=True, kw_only=True):
    """A host-only trace's framework ops per step (step_profile.host_op_table); every field UNSET (`{}`) when no
    step was left after the warm-up and outliers."""

    steps_used: list[int] | UnsetType = UNSET
    dropped: dict[str, str] | UnsetType = UNSET  # step number -> why it was left out
    step_us: Number | UnsetType = UNSET
    parts_us: dict[str, Number] | UnsetType = UNSET
    ops: list[HostOpRow] | UnsetType = UNSET


class TraceRecord(_Result, frozen=True, kw_only=True):
    """One trace's `trace stats` record (docs/trace.md has every key). The totals cover the whole trace; `per_step`
    holds the profiled steps."""

    file: str
    format: str
    steps: int
    step_source: str | None  # "markers", "executions of <module>", or None without steps
    events: int
    kernels: int
    device_time_us: Number
    devices: int
    host_runtime_us: Number
    host_launch_us: Number
    categories: dict[str, Number]
    category_source: str
    category_source_us: dict[str, Number]
    executions_by_category: dict[str, int]
    top: list[TopRow]
    hlo_ops: list[HloOpRow]
    per_step: list[StepRow]
    before_window: BeforeWindow
    host_ops: HostOps | UnsetType = UNSET  # a host-only trace with steps
    rank: int | UnsetType | None = UNSET  # set when the trace is read as a file of a job (None: it names none)
    mode: str | UnsetType = UNSET  # a run's trace: its mode (`rank` then counts within that mode)


# ------------------------------------------------------------------------------------ one file's summary (job view)


class Collectives(_Result, frozen=True, kw_only=True):
    """A trace's collectives in start order, as columns: `name` indexes `names`."""

    names: list[str]
    name: list[int]
    start_us: list[float]
    dur_us: list[float]


class FileSummary(_Result, frozen=True, kw_only=True):
    """One trace summarised for the job view: its record (with its `rank`), its kernel executions by name and its
    collectives. Also the `result` of a `--state` record."""

    file: str
    stats: TraceRecord
    kernel_counts: dict[str, int]
    collectives: Collectives


class FileError(_Result, frozen=True, kw_only=True):
    """A file that could not be read (or exported): the InputError it raised, in parts."""

    file: str
    error: str
    error_path: str
    line: int | None = None
    col: int | None = None

    def input_error(self) -> InputError:
        return InputError(self.error_path, self.error, self.line, self.col)


# ------------------------------------------------------------------------------------------------- the job document


class RankRow(_Result, frozen=True, kw_only=True):
    """`ranks`: one trace of a multi-rank directory."""

    rank: int
    file: str
    steps: int
    kernels: int
    device_time_us: Number
    host_launch_us: Number
    median_step_busy_us: Number | None
    before_window_us: Number


class ModeRow(_Result, frozen=True, kw_only=True):
    """`modes`: one mode of a comparison, over all its traces."""

    mode: str
    traces: int
    steps: int
    kernels: int
    device_time_us: Number
    host_launch_us: Number
    median_step_us: Number | None
    median_step_busy_us: Number | None


class JobRank(_Result, frozen=True, kw_only=True):
    """The job view's row of one rank."""

    rank: int
    file: str
    host: str
    steps: int
    kernels: int
    device_time_us: Number
    median_step_us: Number | None
    busy_us: Number
    idle_us: Number
    collective_wait_us: Number  # waiting in collectives for later ranks
    last_to_arrive: int  # how often it was the last rank to start a collective


class SlowestStep(_Result, frozen=True, kw_only=True):
    """A step number present on two or more ranks: its slowest rank and how far behind the others it is."""

    step: int
    ranks: int
    slowest_rank: int
    slowest_us: Number
    slowest_busy_us: Number
    median_us: Number
    fastest_us: Number
    behind_median_us: Number
    behind_next_us: Number
    next_rank: int


class MatchedCollective(_Result, frozen=True, kw_only=True):
    """One collective call matched on every rank (kernel name, n-th call)."""

    name: str
    occurrence: int
    start_us: Number
    start_spread_us: Number  # latest start - earliest: waiting
    first_rank: int
    last_rank: int
    shortest_us: Number  # the transfer, once all have arrived
    longest_us: Number


class CollectiveView(_Result, frozen=True, kw_only=True):
    ranks: int
    matched: int
    unmatched: int
    start_spread_us: Number
    transfer_us: Number
    top: list[MatchedCollective]


class ShareDelta(_Result, frozen=True, kw_only=True):
    name: str
    share_delta: Number


class RankMix(_Result, frozen=True, kw_only=True):
    """How far one rank's kernel mix is from the median rank's (half the L1 distance of the shares)."""

    rank: int
    distance: Number
    more: list[ShareDelta]
    less: list[ShareDelta]


class KernelMix(_Result, frozen=True, kw_only=True):
    ranks: list[RankMix]
    differs: list[int]
    threshold: Number


class JobView(_Result, frozen=True, kw_only=True):
    """The job across its ranks (hloscope.trace.job.job_view)."""

    ranks: list[JobRank]
    steps: list[SlowestStep]
    collectives: CollectiveView
    kernel_mix: KernelMix


class ModeJob(_Result, frozen=True, kw_only=True):
    """`jobs[mode]`: the ranks of one mode of a comparison, and their job view."""

    ranks: list[RankRow] | UnsetType = UNSET
    job: JobView | UnsetType = UNSET


class TraceJob(_Result, frozen=True, kw_only=True):
    """`trace stats --json`: every trace's record; a comparison's `modes` and the job of each mode (`jobs`), or
    the ranks and job view of one job (`ranks`, `job`). Keys without content are UNSET."""

    traces: list[TraceRecord]
    modes: list[ModeRow] | UnsetType = UNSET
    jobs: dict[str, ModeJob] | UnsetType = UNSET
    ranks: list[RankRow] | UnsetType = UNSET
    job: JobView | UnsetType = UNSET


# ------------------------------------------------------------------------------------------------------ trace export


class ExportedFile(_Result, frozen=True, kw_only=True):
    """One trace written as Parquet (or kept: `reused` 1, an export of the same trace was there)."""

    file: str
    rank: int
    out: str
    rows: int
    reused: int


class ExportSummary(_Result, frozen=True, kw_only=True):
    """`trace export`: where, how many events and traces, how many kept, and each file written."""

    out: str
    events: int
    traces: int
    reused: int
    files: list[ExportedFile]
