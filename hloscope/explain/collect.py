"""Read what the explain rules need about each mode from its run directory: run.json, the train step's HLO statistics
and the trace statistics. Anything unreadable becomes a note on the mode, never a failure of the whole report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from statistics import fmean, median

import msgspec

from hloscope.diff.timing import SEP, instruction_keys
from hloscope.errors import HloscopeError
from hloscope.explain.ledger import RunLedger
from hloscope.explain.ops import instruction_group, run_program, train_step_modules
from hloscope.explain.startup import read_startup
from hloscope.explain.summary import CpuPerStep, ModeSummary
from hloscope.hlo.load import load_modules
from hloscope.hlo.stats import module_stats
from hloscope.runs.records import CompileCounts, HostScheduling, RunRecord
from hloscope.runs.replay_record import ReplayUnread, latest_replay, read_replay
from hloscope.runs.rundir import load_run
from hloscope.runs.settings import compute_dtype, device_platform, matmul_precision, settings
from hloscope.significance import spread
from hloscope.trace.load import load_traces
from hloscope.trace.model import LAYOUT, MEMORY, Event
from hloscope.trace.program_categories import categorized, category_resolver
from hloscope.trace.stats import trace_stats
from hloscope.trace.step_profile import default_op_group, profile_steps, split_contention, step_parts

# Device events longer than this many per step are not drawn one by one in the timeline strip.
TIMELINE_LIMIT = 4000


def _compiles(in_window: CompileCounts | None) -> int | None:
    """Compilations in the timed window: the largest of the framework's counters, which count the same events in
    different ways (JAX: XLA compiles and jit cache entries; torch_xla: CompileTime and UncachedCompile)."""
    return None if in_window is None else max(in_window.values(), default=0)


def from_run_record(run: RunRecord) -> ModeSummary:
    """The run record's timing and settings."""
    environment = run.environment
    times = list(run.timing.step_times_s)  # the median and mean are computed from them, not trusted
    summary = ModeSummary(
        mode=run.mode, status=run.status, platform=device_platform(environment),
        step_time_s=median(times) if times else None, mean_s=fmean(times) if times else None,
        step_times_s=times, first_step_s=run.timing.first_step_s, throughput_img_s=run.timing.throughput_img_s,
        compiles_in_window=_compiles(run.compiles.in_window), data=run.config.data, precision=run.config.precision,
        matmul_precision=matmul_precision(environment), compute_dtype=compute_dtype(environment),
    )
    summary.step_spread = spread(summary.step_times_s)
    if summary.status == "failed" or (not times and summary.status not in ("compiled", "setup")):
        summary.notes.append(_why_untimed(run))  # compiled / set up only: never meant to time a step
        if summary.status == "ok":
            summary.status = "no steps"
    summary.noisy = run.timing.noisy
    summary.batch_size = run.config.batch_size or None
    devices = run.config.devices
    summary.devices = devices if isinstance(devices, int) and devices else None
    summary.run_mode = summary.mode
    summary.settings = settings(run, summary.matmul_precision, summary.compute_dtype)
    summary.host_scheduling = run.timing.host_scheduling
    summary.host_scheduling_json = run.section("timing").get("host_scheduling")
    summary.cpu_per_step = cpu_per_step(run.timing.host_scheduling, len(times))
    if summary.status == "compiled":
        add_compiled(summary, run)
    summary.first_steps_s = [summary.first_step_s] if summary.first_step_s is not None else []
    if run.has("startup"):  # a part with its own reader (explain.startup), which names the file when it is wrong
        summary.startups = [read_startup(run.document["startup"], run.file)]
    return summary


def cpu_per_step(window: HostScheduling | None, steps: int) -> list[CpuPerStep]:
    """[the process's threads' CPU time per timed step, with the other processes' share of its CPUs] from run.json
    `timing.host_scheduling` (its figures null or seconds, typed on reading); [] where the window was not measured,
    lacks a thread group's figures or has no timed step."""
    if window is None or steps <= 0:
        return []
    main, other = window.main_thread, window.other_threads
    main_running, main_waiting, other_running, other_waiting = (main.running_s, main.waiting_for_cpu_s,
                                                                other.running_s, other.waiting_for_cpu_s)
    if main_running is None or main_waiting is None or other_running is None or other_waiting is None:
        return []
    return [CpuPerStep((main_running + other_running) / steps, (main_waiting + other_waiting) / steps,
                       _others_share(window))]


def _others_share(window: HostScheduling) -> float | None:
    """Other processes' CPU seconds over the window / (window seconds x the CPUs the run could use)."""
    used, seconds, cpus = window.other_processes_cpu_s, window.seconds, window.cpu_affinity or window.cpu_count
    return None if used is None or not seconds or not cpus else used / (seconds * cpus)


def _why_untimed(run: RunRecord) -> str:
    """Why a run has no step time, from its record: its error when it failed, else what its timing lacks."""
    if run.status == "failed":
        return f"failed: {run.error}" if run.error else f"failed ({run.file} records no error)"
    if not run.has("timing"):
        return f"no step time: {run.file} has no 'timing' section"
    return f"no step time: {run.file} records no timed step ('timing.step_times_s' is missing or empty)"


def add_compiled(summary: ModeSummary, run: RunRecord) -> None:
    """What a run compiled for a target GPU (`--target`) recorded instead of timings: the GPU, the roofline lower
    bound, the launches of XLA's thunk sequence and XLA's memory estimate."""
    summary.target = run.target.device or run.target.name
    summary.roofline_s = run.roofline.serial_s
    summary.roofline_aggregate_s = run.roofline.aggregate_s
    summary.thunk_kernels = run.kernels.kernel_launches
    summary.thunk_library_calls = run.kernels.library_calls
    summary.thunk_copies = run.kernels.copies
    summary.memory_estimate_bytes = run.memory.device_peak_estimate_bytes
    if summary.roofline_s is None:
        summary.notes.append("compiled for a target GPU without a roofline lower bound in run.json")


def _add(total: dict, part: dict | None) -> None:
    for key, value in (part or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value


def kernel_kinds(stats: dict) -> dict[str, int]:
    """Kernels by kind: generated kernels split by fusion kind, then library calls and the rest. Copies are left out,
    as the HLO analysis leaves them out of its kernel count (they are memcpys; the layout rule counts them)."""
    kinds = {f"fusion {k}": v for k, v in (stats.get("fusions") or {}).items()}
    for kind, n in (stats.get("kernel_breakdown") or {}).items():
        if kind == "copy" or (kind == "generated" and kinds):
            continue
        kinds[kind] = kinds.get(kind, 0) + n
    return kinds


def add_hlo(summary: ModeSummary, stats: list[dict]) -> None:
    """Sum the statistics of the modules one step runs (torch_xla may run several graphs per step)."""
    if not stats:
        return
    opcodes: dict = {}
    for s in stats:
        _add(summary.fusions, s.get("fusions"))
        _add(summary.custom_calls, s.get("custom_calls"))
        _add(opcodes, s.get("opcodes"))
        precision = s.get("dot_precision") or s.get("precision") or {}
        if isinstance(precision, dict):
            _add(summary.dot_precision, precision)
        _add(summary.kernel_kinds, kernel_kinds(s))
        summary.uncosted_custom_calls += s.get("uncosted_custom_calls") or 0
    summary.kernels = sum(s.get("kernels") or 0 for s in stats)
    summary.transposes, summary.copies = opcodes.get("transpose", 0), opcodes.get("copy", 0)
    summary.converts = opcodes.get("convert", 0)
    # a total only when every module has the figure (XLA's GPU cost analysis may give none)
    flops = [f for s in stats if isinstance(f := s.get("flops"), (int, float))]
    summary.flops = sum(flops) if len(flops) == len(stats) else None
    accessed = [b for s in stats if isinstance(b := s.get("bytes_accessed"), (int, float))]
    summary.bytes_accessed = sum(accessed) if len(accessed) == len(stats) else None
    platform = stats[0].get("platform")
    if not summary.platform and isinstance(platform, str):
        summary.platform = {"gpu": "gpu", "tpu": "tpu", "cpu": "cpu"}.get(platform, "")


def add_profile(summary: ModeSummary, trace, stats: dict, warmup: int = 1,
                category_of: Callable[[Event], str] | None = None,
                op_group_of: Callable[[Event], str] | None = None,
                waiting_s: dict[int, float] | None = None,
                phase_waiting_s: dict[int, dict[str, float]] | None = None) -> None:
    """The run's ledger from its trace: each profiled step split into measured parts (hloscope.trace.step_profile),
    warm-up and outlier steps dropped, and the figures the report shows, as medians over the kept steps.
    `waiting_s` (step number -> seconds the main thread waited for a CPU, `waiting_for_cpu`) splits the contention
    out of the host time it inflated, placed by `phase_waiting_s` (step number -> {host annotation: seconds of that
    wait inside it}) where the run measured it (step_profile.split_contention)."""
    windows = [(w["step"], w["start_us"], w["start_us"] + w["host_duration_us"]) for w in stats.get("per_step") or []]
    if not windows:
        if stats.get("kernels"):
            summary.notes.append("the trace has no step markers: per-step device time is unknown")
        return
    parts = step_parts(trace.events, windows, category_of, op_group_of)
    if waiting_s:
        split_contention(parts, waiting_s, phase_waiting_s)
    profile = profile_steps(parts, warmup)
    if not profile.kept:
        summary.notes.append("no profiled step left after dropping the warm-up and outlier steps")
        return
    set_ledger(summary, RunLedger.from_profile(profile, getattr(op_group_of, "group_of_key", None)))
    kept = profile.kept_steps()
    if profile.device:
        summary.executed_per_step = median(sum(s.executions.values()) for s in kept)
        summary.executed_copies_per_step = median(s.executions.get(LAYOUT, 0) + s.executions.get(MEMORY, 0)
                                                  for s in kept)
        by_number = {w.get("step"): w for w in stats.get("per_step") or []}
        rows = [by_number.get(s.number) or {} for s in kept]
        summary.trace_kernels = median(r.get("kernels", 0) for r in rows)
        summary.host_dispatch_s = median(r.get("host_runtime_us", 0.0) for r in rows) / 1e6
    if any(s.framework_ops for s in kept):
        summary.framework_ops = round(median(s.framework_ops for s in kept))
    middle = profile.kept[len(profile.kept) // 2]
    window = (stats["per_step"][middle] if middle < len(stats["per_step"]) else None)
    if window is not None:
        following = stats["per_step"][middle + 1]["start_us"] if middle + 1 < len(stats["per_step"]) else None
        summary.timeline = step_timeline(trace.events, window, following)


def set_ledger(summary: ModeSummary, ledger: RunLedger) -> None:
    """The summary's ledger and the figures derived from it (medians over its kept steps): the profiled step and,
    where a device ran the program, its busy and idle time and the device time by category."""
    summary.ledger = ledger
    summary.profiled_step_s = median(ledger.step_s)
    if ledger.device:
        summary.device_busy_s = median(ledger.busy_s)
        summary.device_idle_s = median(step - busy for step, busy in zip(ledger.step_s, ledger.busy_s))
        summary.categories_s = {node.removeprefix("device:"): ledger.node_median(node)
                                for node in ledger.nodes if node.startswith("device:")}
        summary.layout_kernel_s = summary.categories_s.get(LAYOUT, 0.0) + summary.categories_s.get(MEMORY, 0.0)


def step_timeline(events, window: dict, next_start_us: float | None = None) -> list[tuple[float, float, str]]:
    """One step's device executions (start_s relative to the step, duration_s, category), for the timeline strip.
    As in `trace stats`, device executions that start before the next step does belong to the step (JAX and
    PyTorch/XLA run a step's program after its marker has ended)."""
    start, end = window["start_us"], window["start_us"] + window.get("host_duration_us", 0.0)
    device_end = float("inf") if next_start_us is None else max(end, next_start_us)
    spans: list[tuple[float, float, str]] = []
    for event in events:
        if event.is_device_exec and start <= event.start_us < device_end and len(spans) < TIMELINE_LIMIT:
            spans.append(((event.start_us - start) / 1e6, event.dur_us / 1e6, event.category))
    return spans


def summarize_run(run_dir: str | Path) -> ModeSummary:
    """Everything known about one mode's run directory (I/O happens here, not in the rules)."""
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    summary = from_run_record(run)

    replay_file = latest_replay(run_dir)
    if replay_file is not None:
        try:  # validated as run.json is: a broken record is named, never half used
            summary.replay = read_replay(replay_file)
        except HloscopeError as error:
            summary.replay = ReplayUnread(f"{replay_file.name} not read: {error}")
            summary.unreadable_files.append(str(error))
    op_groups, categories = None, None
    kinds = {a.kind for a in run.artifacts}
    if "hlo" in kinds:
        try:
            loaded = load_modules(run_dir)
            after = [m for m in loaded if m.stage == "after_optimizations"] or loaded
            add_hlo(summary, [module_stats(m).to_dict() for m in after])
            step_modules = train_step_modules(loaded)
            if step_modules:  # explain's op table pairs their instructions by structure with another run's
                op_groups = InstructionGroups([m.module for m in step_modules])
                summary.program = run_program(run_dir, [m.module.name for m in step_modules])
            categories = category_resolver(after) or None
        except HloscopeError as error:  # the categories fall back to kernel names: said in the report and on stderr
            summary.notes.append(f"HLO not read: {error}")
            summary.unreadable_files.append(str(error))
    else:
        summary.notes.append("no XLA HLO in this run (PyTorch without XLA has none; XLA modes need --dump-hlo)")
    if "trace" in kinds:
        try:
            warmup = _warmup_steps(run)
            for trace in load_traces(run_dir):
                if categories is not None:  # XLA ops take the category of what their HLO computes, not of their name
                    trace = categorized(trace, categories)
                stats = trace_stats(trace).to_dict()
                if not stats.get("per_step") and not stats.get("kernels"):
                    continue
                add_profile(summary, trace, stats, warmup, op_group_of=op_groups, waiting_s=waiting_for_cpu(run),
                            phase_waiting_s=waiting_inside_annotations(run))
                break
        except HloscopeError as error:
            summary.notes.append(f"trace not read: {error}")
            summary.unreadable_files.append(str(error))
    elif summary.status != "compiled":  # a run compiled for a target GPU never ran: there is nothing to profile
        summary.notes.append("no profiler trace in this run (run with --profile)")
    return summary


def waiting_for_cpu(run: RunRecord) -> dict[int, float]:
    """Step number -> seconds the thread running the step waited for a CPU (run.json `profile.host_scheduling`,
    validated by load_run); empty where the run did not measure it."""
    return {step.step: float(step.main_thread.waiting_for_cpu_s) for step in run.profile.host_scheduling or []
            if step.step is not None and step.main_thread.waiting_for_cpu_s is not None}


def waiting_inside_annotations(run: RunRecord) -> dict[int, dict[str, float]]:
    """Step number -> {host annotation name: seconds the step's thread waited for a CPU inside it} (run.json
    `profile.host_scheduling[].phases`); empty for runs from before they were measured."""
    return {step.step: {name: float(phase.waiting_for_cpu_s) for name, phase in step.phases.items()}
            for step in run.profile.host_scheduling or []
            if step.step is not None and not isinstance(step.phases, msgspec.UnsetType)}


def _warmup_steps(run: RunRecord) -> int:
    """How many profiled steps are the profiler's warm-up (run.json `profile.warmup_steps`; 1 for older runs)."""
    value = run.profile.warmup_steps
    return value if value is not None and value >= 0 else 1


class InstructionGroups:
    """Op key of an XLA execution: its instruction, `module<SEP>instruction` (found as the time-weighted diff finds
    it, hloscope.diff.timing.instruction_keys), so that explain's op table can pair instructions across runs by
    structure; executions of other programs by name (step_profile.default_op_group). `group_of_key` gives a key's op
    group: the instruction's source op (HLO `op_name` metadata, layer indices folded: `.../layer/*/attention/
    dot_general`; hloscope.explain.ops.instruction_group), what the ledger's op groups are."""

    def __init__(self, modules: list) -> None:
        self._key, self._by_name = instruction_keys(modules), default_op_group
        self._groups: dict[str, str] = {}
        for module in modules:
            for instruction in module.all_instructions():
                self._groups.setdefault(f"{module.name}{SEP}{instruction.name}",
                                        instruction_group(instruction.metadata.get("op_name", ""), instruction.name))

    def __call__(self, event: Event) -> str:
        return self._key(event) or self._by_name(event)

    def group_of_key(self, key: str) -> str:
        return self._groups.get(key, key)
