"""The per-module record of `hloscope hlo stats` as typed data: what `hloscope.hlo.stats` builds, `api.hlo_stats`
returns and the terminal renderer reads, with `to_dict()` giving exactly the JSON `hlo stats --json` prints.

Every part is a frozen Struct whose fields are in the JSON's key order. A key that only some modules have (XLA's
thunk sequence, XLA's cost, the roofline, measured time, the reports XLA wrote beside the module) is UNSET where it is
absent, so that `to_dict()` writes exactly the keys the command prints; `None` is a key printed as null. Maps whose keys
come from the module (opcodes, fusion kinds, custom-call targets, precisions, thunk kinds) stay dicts. Figures keep
the type the analysis gave them: FLOPs and bytes from the cost model are floats, counts and sizes are ints.

Where a part is either figures or the reason there are none (a report that could not be read, XLA's cost refused or
skipped, no roofline), the two are separate Structs told apart by `available` (a class attribute, not a key of the
JSON: True on the figures), so that a renderer, which imports no analysis, narrows them without isinstance.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from msgspec import UNSET, UnsetType

from hloscope.typed import Record


class _Section(Record, frozen=True, kw_only=True):
    """A part of a module's record."""


class Unreadable(_Section, frozen=True, kw_only=True):
    """A report beside the module that could not be read (buffer assignment, memory report): why, in one line. The
    module's own figures stand."""

    available: ClassVar[Literal[False]] = False

    error: str


class BufferAllocation(_Section, frozen=True, kw_only=True):
    """One allocation of XLA's buffer assignment, with the names of its first three values."""

    index: int
    size: int
    kind: str  # parameter | output | constant | temp | thread_local
    shape: str | None
    values: list[str]


class BufferAssignment(_Section, frozen=True, kw_only=True):
    """XLA's `*-buffer-assignment.txt`: allocations, the bytes they use (thread-local ones apart), by kind, and the
    five largest."""

    available: ClassVar[Literal[True]] = True

    allocations: int
    total_bytes: int
    temp_bytes: int
    bytes_by_kind: dict[str, int]
    largest: list[BufferAllocation]


class MemoryReport(_Section, frozen=True, kw_only=True):
    """XLA's `*-memory-usage-report.txt`: total bytes, and per memory space where the report names them."""

    available: ClassVar[Literal[True]] = True

    total_bytes: int
    by_memory_space: dict[str, int]


class ModuleMemory(_Section, frozen=True, kw_only=True):
    """Bytes of the entry computation's parameters and output, and what XLA's reports beside the module say."""

    parameter_bytes: int
    parameters: int
    output_bytes: int
    buffer_assignment: BufferAssignment | Unreadable | UnsetType = UNSET
    memory_report: MemoryReport | Unreadable | UnsetType = UNSET


class CollectiveOps(_Section, frozen=True, kw_only=True):
    """The collectives of one opcode: how many, the bytes they produce, and their device groups as written
    ({groups: count})."""

    count: int
    bytes: int
    replica_groups: dict[str, int]


class Collectives(_Section, frozen=True, kw_only=True):
    """Every collective of the module (async ones once, by the collective they wrap): count, bytes, by opcode."""

    count: int
    bytes: int
    by_opcode: dict[str, CollectiveOps]


class LayoutCount(_Section, frozen=True, kw_only=True):
    """Transposes or copies: at the top level (kernels of their own), inside fusions, and the bytes they write."""

    top_level: int
    in_fusions: int
    bytes: int


class LayoutChanges(_Section, frozen=True, kw_only=True):
    """Transposes and copies (copy-start among them), where layouts change."""

    transpose: LayoutCount
    copy: LayoutCount


class Matmul(_Section, frozen=True, kw_only=True):
    """One dot, convolution or matmul/convolution library call: operand and output types, precision, algorithm."""

    name: str
    computation: str
    opcode: str  # `custom-call:<target>` for library calls
    operand_types: list[str | None]
    output_type: str | None
    operand_precision: list[str]
    algorithm: str | None


class SourceKernels(_Section, frozen=True, kw_only=True):
    """The launches whose metadata op_name falls in one source layer (`hloscope.hlo.attribution.layer_of`)."""

    source: str
    kernels: int
    fusions: int
    kinds: dict[str, int]


class TopInstruction(_Section, frozen=True, kw_only=True):
    """A top-level instruction (entry or control-flow body) and its cost."""

    name: str
    opcode: str
    flops: float
    transcendentals: float
    library_flops: float
    library_bytes: float
    bytes_accessed: float
    op_name: str


class Siblings(_Section, frozen=True, kw_only=True):
    """The names of the files XLA wrote beside the module (None: not there)."""

    buffer_assignment: str | None
    memory_report: str | None
    thunk_sequence: str | None


class JoinedLaunch(_Section, frozen=True, kw_only=True):
    """One launch of the HLO joined with its thunk of XLA's thunk sequence: the HLO instruction (`kind` as
    `hloscope.hlo.kernels.classify`, `detail` its fusion kind or custom-call target) and XLA's ground truth."""

    joined: ClassVar[Literal[True]] = True

    name: str
    kind: str
    opcode: str
    detail: str
    computation: str
    thunk_index: int
    thunk_kind: str
    kernel_name: str | None
    grid: list[int] | None
    block: list[int] | None
    shared_memory_bytes: int | None
    reused_kernel: bool  # XLA launches a kernel it emitted for another, identical fusion


class ThunkLaunch(_Section, frozen=True, kw_only=True):
    """One thunk of XLA's thunk sequence as XLA wrote it (listed when it does not join the HLO's launches)."""

    joined: ClassVar[Literal[False]] = False

    index: int
    kind: str
    category: str  # kernel | library | copy | other
    name: str | None
    hlo_op: str | None
    grid: list[int] | None
    block: list[int] | None
    threads_per_block: int | None
    blocks: int | None
    shared_memory_bytes: int | None
    depth: int


class ThunkCheck(_Section, frozen=True, kw_only=True):
    """XLA's launch list (thunk_sequence.txt beside an optimized GPU module) against hloscope's: its thunks by kind,
    whether the two agree launch for launch (else why not), and with `--launches` every launch."""

    available: ClassVar[Literal[True]] = True

    file: str
    by_kind: dict[str, int]
    agrees: bool
    reason: str | None
    launches: list[JoinedLaunch] | list[ThunkLaunch] | UnsetType = UNSET


class UnreadableThunkSequence(_Section, frozen=True, kw_only=True):
    """XLA's thunk sequence beside the module could not be read: which file, and why in one line."""

    available: ClassVar[Literal[False]] = False

    file: str
    error: str


class XlaCost(_Section, frozen=True, kw_only=True):
    """XLA's own HloCostAnalysis of the module, as XLA reports it: it counts each custom call as -1 FLOP and -1 byte
    (`unknown_custom_calls` of them)."""

    available: ClassVar[Literal[True]] = True

    flops: float
    transcendentals: float
    bytes_accessed: float
    unknown_custom_calls: int


class XlaCostError(_Section, frozen=True, kw_only=True):
    """XLA refused the module, crashed on it or ran out of time: its message."""

    available: ClassVar[Literal[False]] = False

    error: str


class XlaCostSkipped(_Section, frozen=True, kw_only=True):
    """XLA was not asked: the module is too large for its parser within hloscope's memory bound."""

    available: ClassVar[Literal[False]] = False

    skipped: str


class Roofline(_Section, frozen=True, kw_only=True):
    """The step's roofline lower bound for the GPU XLA compiled the module for (`hloscope.hlo.roofline`)."""

    available: ClassVar[Literal[True]] = True

    label: str
    target: str
    device: str  # e.g. "NVIDIA H100 80GB HBM3"
    memory_bandwidth_bytes_s: float
    launches: int
    flops: float
    bytes: float
    serial_s: float
    aggregate_s: float
    compute_s_by_unit: dict[str, float]
    memory_bound_launches: int
    compute_bound_launches: int
    launches_without_compute_peak: int
    by_kind_s: dict[str, float]
    uncosted: list[str]


class RooflineUnavailable(_Section, frozen=True, kw_only=True):
    """No roofline: the target XLA dumped lacks the figures a roofline needs, or could not be read."""

    available: ClassVar[Literal[False]] = False

    unavailable: str


class MeasuredInstruction(_Section, frozen=True, kw_only=True):
    """An instruction by the device time the run's profile measured for it."""

    name: str
    opcode: str | None  # None: not an instruction of this module's text
    fusion_kind: str | None
    count: int
    total_us: float
    share: float  # of the module's measured device time


class Measured(_Section, frozen=True, kw_only=True):
    """The module's device time in its run's own profile (`hloscope.trace.hlo_map.measured_instructions`)."""

    device_time_us: float
    events: int
    matched_us: float  # device time whose instruction is in this module's text
    top: list[MeasuredInstruction]

    @classmethod
    def from_dict(cls, found: dict[str, Any]) -> Measured:
        """The typed section of `measured_instructions`' result."""
        return cls(device_time_us=found["device_time_us"], events=found["events"], matched_us=found["matched_us"],
                   top=[MeasuredInstruction(**row) for row in found["top"]])


class ModuleStats(_Section, frozen=True, kw_only=True):
    """One module of `hloscope hlo stats`: the summary first (kernels, fusions, custom calls, FLOPs, bytes, memory,
    collectives), then more detail; XLA's cost (`xla_cost`: None without jaxlib, UNSET when not asked), the roofline
    and measured time where there are such."""

    name: str
    file: str
    stage: str  # before_optimizations | after_optimizations | unknown
    platform: str  # cpu | gpu | tpu | neuron | unknown
    computations: int
    instructions: int
    opcodes: dict[str, int]
    fusions: dict[str, int]  # by kind; kCustom by backend (`kCustom:__triton_gemm`)
    kernels: int  # launches per execution, copies apart
    custom_calls: dict[str, int]
    flops: float
    bytes_accessed: float
    memory: ModuleMemory
    collectives: Collectives
    # more detail
    module_index: int
    gpu_arch: str | None
    is_scheduled: bool
    entry: str
    entry_opcodes: dict[str, int]
    kernel_breakdown: dict[str, int]
    copies: int
    transcendentals: float
    library_flops: float
    library_bytes: float
    uncosted_custom_calls: int
    layout_changes: LayoutChanges
    precision: dict[str, int]  # `bf16 x bf16 -> f32 [default]` -> count
    matmuls: list[Matmul]
    kernels_by_source: list[SourceKernels]
    top_instructions: list[TopInstruction]
    siblings: Siblings
    thunk_sequence: ThunkCheck | UnreadableThunkSequence | UnsetType = UNSET
    xla_cost: XlaCost | XlaCostError | XlaCostSkipped | UnsetType | None = UNSET
    roofline: Roofline | RooflineUnavailable | UnsetType = UNSET
    measured: Measured | UnsetType = UNSET
