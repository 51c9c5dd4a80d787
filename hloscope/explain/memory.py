"""The memory gap between a run and the baseline, explained like the step-time gap: the peak difference first, then
the ledger parts that differ (run.json `memory.ledger`, hloscope/runs/memory_record.py), each annotated by the
hypotheses that apply: the state written to new buffers where the framework does not donate it, optimizer state in a
wider dtype (or another optimizer), activations that are not rematerialised, the runtime's share (allocator caching,
libraries loaded).

Statistics: the parts measured from tensors or from XLA's analysis are exact figures of the program, the same in every
process; the peak (and the runtime's share derived from it) is a process's peak RSS or the device's peak, which varies
between processes. The peak is judged as explain judges a step time (hloscope/explain/engine.py), the process being
the unit:
- a difference under MIN_PEAK_GAP of the baseline's peak is "no difference";
- one inside the spread between processes of either configuration (`compare --repeats`: max - min of its processes'
  peaks) is "cannot tell";
- so is one the process-level test does not resolve: Student's t on the logarithms of the process peaks, the variance
  pooled over the configurations of the report that ran in several processes (the A/A control), at PROCESS_ALPHA
  family-wise over the report's configurations (Holm), the statistics of hloscope/significance.py. A configuration
  whose peaks vary significantly more than the others' (significance.unlike_variations; peaks repeated exactly count
  as measured, no variation) is set apart: it counts in the pool of its own pairs only, so that a framework whose
  host RSS wanders does not hide a difference between two whose peaks XLA fixes. Such a verdict states the smallest
  difference the pair resolves and the processes a side that would resolve this one;
- where the configurations pooled for a pair peaked at exactly the same bytes in each process (a pooled variance of
  0, common for XLA's device figures) the peak is deterministic and any difference of MIN_PEAK_GAP or more is real;
- otherwise "more" or "less"; with one process per side the spread is unmeasured and the verdict is marked
  provisional (tested against the pooled variation where other configurations measured it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from hloscope import units
from hloscope.errors import HloscopeError
from hloscope.explain.hypotheses import Annotation
from hloscope.explain.summary import ModeSummary
from hloscope.files import read_text
from hloscope.hlo.memory import parse_buffer_assignment
from hloscope.hlo.stats import SIBLING_MAX_BYTES
from hloscope.runs.memory_record import PARTS, TITLES, MemoryLedger, read_ledger
from hloscope.runs.records import Environment
from hloscope.runs.rundir import load_run
from hloscope.significance import (
    PROCESS_ALPHA,
    ProcessTest,
    ProcessVariation,
    holm_levels,
    pooled_process_variation,
    process_test,
    processes_needed,
    smallest_resolvable_fraction,
    unlike_variations,
)

MIN_PEAK_GAP = 0.02  # a peak difference below 2% of the baseline's peak is no difference
PART_TOLERANCE = 0.05  # a part differs when it moves by more than 5% of the larger side (exact figures: no noise)
PART_MIN_BYTES = 4096  # and by more than a page: step counters and tuple tables are not a difference


@dataclass
class PartChange:
    """One ledger part of the run against the baseline's. `difference_bytes` None: a side did not measure it."""

    name: str
    title: str
    bytes: int | None
    baseline_bytes: int | None
    difference_bytes: int | None
    source: str
    baseline_source: str
    estimate: bool  # either side's figure is an estimate
    within: str | None = None  # a breakdown of that part (not added to the total again)
    differs: bool = False
    annotations: list[Annotation] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "bytes": self.bytes, "baseline_bytes": self.baseline_bytes,
                "difference_bytes": self.difference_bytes, "differs": self.differs, "estimate": self.estimate,
                "within": self.within, "source": self.source, "baseline_source": self.baseline_source,
                "annotations": [a.to_dict() for a in self.annotations]}


@dataclass
class ModeMemory:
    """A run's memory against the baseline: its peak, the difference and a verdict, then every ledger part (those that
    differ first, largest difference first) and the hypotheses that no part could take."""

    peak_bytes: int | None  # median over the run's processes
    baseline_peak_bytes: int | None
    difference_bytes: int | None
    verdict: str  # "baseline" | "more" | "less" | "no difference" | "cannot tell" | "not measured"
    peak_source: str
    processes: int
    spread_bytes: int | None  # the larger side's max - min of its processes' peaks; None: one process each
    provisional: bool  # one process per side: between-process spread unmeasured
    optimizer: str
    parts: list[PartChange] = field(default_factory=list)
    compiled: dict | None = None  # XLA's memory analysis of the step (XLA modes)
    annotations: list[Annotation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # the process-level test of the peaks (hloscope.significance.process_test): its p-value and the level Holm held it
    # to; None where between-process variation is unmeasured (no configuration of the report ran in several processes)
    process_p_value: float | None = None
    process_level: float | None = None
    # the smallest peak difference this pair could have been called different by (the test's, the spreads between
    # processes and MIN_PEAK_GAP of the baseline's peak, whichever is largest), in bytes; None where unmeasured
    resolvable_bytes: int | None = None
    # a difference the test could not resolve: the processes a side that would (None: not that case, or more than 50)
    processes_needed: int | None = None
    why: str | None = None  # the verdict's reason in one sentence, with its figures

    @property
    def differing(self) -> list[PartChange]:
        return [p for p in self.parts if p.differs]

    def to_dict(self) -> dict:
        return {"peak_bytes": self.peak_bytes, "baseline_peak_bytes": self.baseline_peak_bytes,
                "difference_bytes": self.difference_bytes, "verdict": self.verdict, "peak_source": self.peak_source,
                "processes": self.processes, "spread_bytes": self.spread_bytes, "provisional": self.provisional,
                "optimizer": self.optimizer, "parts": [p.to_dict() for p in self.parts], "compiled": self.compiled,
                "annotations": [a.to_dict() for a in self.annotations], "notes": self.notes,
                "process_p_value": self.process_p_value, "process_level": self.process_level,
                "resolvable_bytes": self.resolvable_bytes, "processes_needed": self.processes_needed,
                "why": self.why}


@dataclass
class MemorySide:
    """What the analysis reads of one configuration: its processes' ledgers and the facts the hypotheses cite."""

    ledgers: list[MemoryLedger]
    environment: Environment  # the first process's run.json `environment`

    @property
    def ledger(self) -> MemoryLedger:
        return self.ledgers[0]

    @property
    def peaks(self) -> list[int]:
        return [ledger.peak_bytes for ledger in self.ledgers if ledger.peak_bytes is not None]


def _read_side(summary: ModeSummary) -> MemorySide | None:
    ledgers: list[MemoryLedger] = []
    environment: Environment | None = None
    for run_dir in summary.run_dirs:
        try:
            record = load_run(run_dir, check_artifacts=False)
        except HloscopeError:  # the run's own reading already says what is wrong with it
            continue
        run = record.to_dict()  # the ledger's reader takes the JSON as written
        ledger = read_ledger(run, Path(run_dir) / "run.json")
        if ledger is not None and ledger.peak_bytes is not None:
            temporaries_from_dump(ledger, run, Path(run_dir))
            ledgers.append(ledger)
            environment = environment or record.environment
    return MemorySide(ledgers, environment or Environment()) if ledgers else None


def temporaries_from_dump(ledger: MemoryLedger, run: dict, run_dir: Path) -> None:
    """Where the run measured no temporaries (torch_xla exposes no buffer assignment while it runs) but --dump-hlo kept
    XLA's buffer assignment of the train step's graphs: their temporary allocations, the largest graph's (the graphs
    run one after another), with the runtime's share recomputed from them. A file that cannot be read is a note."""
    part = ledger.part("temporaries")
    if part is None or part.bytes is not None:
        return
    root = run_dir.resolve()
    files = [artifact["path"] for artifact in run.get("artifacts") or []
             if isinstance(artifact, dict) and artifact.get("kind") == "buffer_assignment"
             and artifact.get("train_step") is True and artifact.get("format") != "values"
             and isinstance(artifact.get("path"), str) and root in (run_dir / artifact["path"]).resolve().parents]
    if not files:
        return
    try:
        temps = [parse_buffer_assignment(read_text(run_dir / name, "XLA buffer assignment", max_bytes=SIBLING_MAX_BYTES),
                                         str(run_dir / name))["temp_bytes"] for name in files]
    except HloscopeError as error:
        ledger.notes.append(f"the temporaries could not be read from the dump: {error}")
        return
    part.bytes = max(temps)
    part.source = (f"XLA's buffer assignment of the train step's graph ({len(files)} dumped by --dump-hlo, the "
                   "largest one's temporary allocations), read by explain")
    runtime = ledger.part("runtime")
    if runtime is not None:
        runtime.bytes = ledger.peak_bytes - ledger.accounted_bytes() if ledger.peak_bytes is not None else None
        runtime.source += "; recomputed by explain with the dump's temporaries"


def memory_results(summaries: list[ModeSummary], baseline: str) -> dict[str, ModeMemory]:
    """Per mode with a memory ledger, its memory against the baseline's (empty when the baseline has none)."""
    sides = {s.mode: side for s in summaries if (side := _read_side(s)) is not None}
    reference = sides.get(baseline)
    if reference is None:
        return {}
    tests = peak_tests(sides, baseline)
    return {mode: compare(side, reference, mode == baseline, tests.get(mode)) for mode, side in sides.items()}


@dataclass(frozen=True)
class PeakTest:
    """One configuration's process peaks against the baseline's: the process-level test, Holm's verdict on it within
    the report, and the variation pooled over the report's configurations that it used."""

    test: ProcessTest
    differs: bool
    level: float
    variation: ProcessVariation


def peak_tests(sides: dict[str, MemorySide], baseline: str) -> dict[str, PeakTest]:
    """label -> the process-level test of each configuration's peaks but the baseline's, the variance pooled over
    the configurations that ran in several processes, those set apart as varying unlike the others counting only for
    their own pair (module docstring), held family-wise to PROCESS_ALPHA (Holm); empty when no configuration ran in
    several processes (or a peak is not positive: no logarithm)."""
    positive: dict[str, list[float]] = {mode: [float(p) for p in side.peaks] for mode, side in sides.items()
                                        if side.peaks and min(side.peaks) > 0}
    if baseline not in positive:
        return {}
    labels = list(positive)
    apart = {labels[index] for index in unlike_variations(list(positive.values()), exact_is_measured=True)}
    found = {mode: pooled_process_variation([peaks for label, peaks in positive.items()
                                             if label not in apart or label in (mode, baseline)])
             for mode in labels if mode != baseline}
    variations = {mode: variation for mode, variation in found.items() if variation is not None}
    if len(variations) < len(found):  # no configuration ran in several processes: unmeasured
        return {}
    tests = {mode: process_test(positive[mode], positive[baseline], variation)
             for mode, variation in variations.items()}
    levels = holm_levels([t.p_value for t in tests.values()], PROCESS_ALPHA)
    return {mode: PeakTest(test, differs, level, variations[mode])
            for (mode, test), (differs, level) in zip(tests.items(), levels, strict=True)}


def _spread(values: list[int]) -> int | None:
    return max(values) - min(values) if len(values) > 1 else None


def compare(side: MemorySide, reference: MemorySide, is_baseline: bool = False,
            peak_test: PeakTest | None = None) -> ModeMemory:
    """`side`'s memory against `reference`'s (the module docstring says how the peak is judged). `peak_test`: the
    report's process-level test of this pair (`peak_tests`); without one the pair is tested on its own (a report of
    these two configurations)."""
    peak, base = int(median(side.peaks)), int(median(reference.peaks))
    spreads = [s for s in (_spread(side.peaks), _spread(reference.peaks)) if s is not None]
    spread = max(spreads) if spreads else None
    difference = peak - base
    if peak_test is None and not is_baseline:
        peak_test = peak_tests({"run": side, "baseline": reference}, "baseline").get("run")
    result = ModeMemory(peak_bytes=peak, baseline_peak_bytes=base, difference_bytes=difference, verdict="baseline",
                        peak_source=side.ledger.peak_source, processes=len(side.ledgers), spread_bytes=spread,
                        provisional=spread is None and not is_baseline, optimizer=side.ledger.optimizer,
                        compiled=side.ledger.compiled, notes=list(side.ledger.notes))
    if not is_baseline:
        _judge_peak(result, side, reference, peak_test)
    if side.ledger.peak_source != reference.ledger.peak_source:
        result.notes.append(f"the peaks are not the same figure: {side.ledger.peak_source} against the baseline's "
                            f"{reference.ledger.peak_source}")
    result.parts = _part_changes(side.ledger, reference.ledger, result.verdict)
    if not is_baseline:
        _annotate(result, side, reference)
    return result


def _judge_peak(result: ModeMemory, side: MemorySide, reference: MemorySide, peak_test: PeakTest | None) -> None:
    """The verdict on the peak difference and its reason (module docstring), with the process-level test's figures
    where between-process variation is measured."""
    difference, base, spread = result.difference_bytes or 0, result.baseline_peak_bytes or 0, result.spread_bytes
    if peak_test is not None:
        result.process_p_value, result.process_level = peak_test.test.p_value, peak_test.level
        smallest = base * smallest_resolvable_fraction(peak_test.variation, len(side.peaks), len(reference.peaks),
                                                       peak_test.level)
        result.resolvable_bytes = math.ceil(max(smallest, MIN_PEAK_GAP * base, spread or 0))
    deterministic = peak_test is not None and peak_test.variation.log_sd == 0.0
    if abs(difference) < MIN_PEAK_GAP * base:
        result.verdict = "no difference"
        result.why = f"under {MIN_PEAK_GAP:.0%} of the baseline's peak"
    elif spread is not None and abs(difference) <= spread:
        result.verdict = "cannot tell"
        result.why = f"inside the spread between processes, {units.size(spread)}"
    elif peak_test is not None and not peak_test.differs:
        result.verdict = "cannot tell"
        result.processes_needed = processes_needed(peak_test.variation, peak_test.test.log_ratio, peak_test.level)
        result.why = (f"inside the variation between processes: process peaks p = {peak_test.test.p_value:.2g}, "
                      f"needs below {peak_test.level:.2g}; the smallest difference this pair resolves is "
                      f"{units.size(result.resolvable_bytes)}")
        if result.processes_needed is not None:
            result.why += (f"; about {result.processes_needed} processes a side would tell this one: "
                           f"`hloscope compare --repeats {result.processes_needed}`")
    else:
        result.verdict = "more" if difference > 0 else "less"
        if deterministic:
            result.why = ("deterministic: the configurations that ran in several processes peaked at exactly the "
                          f"same bytes in each, so a difference of {MIN_PEAK_GAP:.0%} or more is taken as real")
        elif peak_test is not None:
            result.why = f"the process peaks differ: p = {peak_test.test.p_value:.2g}, below {peak_test.level:.2g}"
        if result.provisional:
            result.why = ("provisional: one process per side, the spread between processes is unmeasured"
                          + (f"; {result.why}" if result.why else ""))


def _part_changes(ledger: MemoryLedger, reference: MemoryLedger, verdict: str) -> list[PartChange]:
    changes = []
    for name in PARTS:
        mine, theirs = ledger.part(name), reference.part(name)
        either = mine or theirs
        if either is None:
            continue
        a = mine.bytes if mine is not None else None
        b = theirs.bytes if theirs is not None else None
        difference = a - b if a is not None and b is not None else None
        if name == "runtime":  # the peak minus the rest: as uncertain as the peak
            differs = verdict in ("more", "less") and difference is not None and difference != 0
        else:
            differs = (difference is not None and abs(difference) > PART_MIN_BYTES
                       and abs(difference) > PART_TOLERANCE * max(a or 0, b or 0))
        changes.append(PartChange(
            name=name, title=TITLES[name], bytes=a, baseline_bytes=b, difference_bytes=difference,
            source=mine.source if mine is not None else "not in this run's ledger",
            baseline_source=theirs.source if theirs is not None else "not in the baseline's ledger",
            estimate=bool((mine and mine.estimate) or (theirs and theirs.estimate)),
            within=either.within, differs=differs))
    changes.sort(key=lambda c: (not c.differs, -abs(c.difference_bytes or 0)))
    return changes


# -- hypotheses -----------------------------------------------------------------------------------------------------
def _donation(environment: Environment) -> bool | None:
    return environment.donation.state_in_place if environment.donation is not None else None


def donation_missing(side: MemorySide, reference: MemorySide) -> Annotation | None:
    """The step returns the updated state in new buffers (no donation): the state is held twice at the step's end."""
    if _donation(side.environment) is not False:
        return None
    outputs = side.ledger.part("outputs")
    if outputs is None or outputs.bytes is None:
        return None
    cost = outputs.detail.get("state_bytes", 0) - outputs.detail.get("aliased_bytes", 0)
    if cost <= 0:
        return None
    how = (side.environment.donation.how if side.environment.donation is not None else None) or \
        "the state is not donated"
    return Annotation(
        "donation_missing", "state not donated: updated in new buffers",
        f"the updated state ({units.size(cost)}) is written to new buffers every step while the old one is still "
        f"held ({how}); donating it (jax.jit donate_argnums) would let XLA alias those {units.size(cost)}",
        ("outputs",), evidence={"cost_bytes": cost, "state_in_place": False,
                                "baseline_state_in_place": _donation(reference.environment)})


def optimizer_state_width(side: MemorySide, reference: MemorySide) -> Annotation | None:
    """More optimizer state per parameter byte than the baseline: another optimizer, or its state in a wider dtype."""
    mine, theirs = side.ledger, reference.ledger
    if mine.optimizer != theirs.optimizer:
        return Annotation("optimizer_differs", "another optimizer",
                          f"this run uses {mine.optimizer}, the baseline {theirs.optimizer}: their states differ by "
                          "design", ("optimizer_state",), evidence={"optimizer": mine.optimizer,
                                                                    "baseline_optimizer": theirs.optimizer})
    ratios = []
    for ledger in (mine, theirs):
        state, parameters = ledger.part("optimizer_state"), ledger.bytes_of("parameters")
        moments = state.detail.get("moments_bytes") if state is not None else None
        ratios.append(moments / parameters if moments is not None and parameters else None)
    if ratios[0] is None or ratios[1] is None or ratios[0] <= ratios[1] * (1 + PART_TOLERANCE):
        return None
    return Annotation("optimizer_state_wider", "optimizer state in a wider dtype",
                      f"{ratios[0]:.2f} bytes of optimizer state per parameter byte against the baseline's "
                      f"{ratios[1]:.2f}: the same optimizer keeps its moments in a wider dtype (or more of them)",
                      ("optimizer_state",), evidence={"state_per_parameter_byte": ratios[0],
                                                      "baseline_state_per_parameter_byte": ratios[1]})


def activations_kept(side: MemorySide, reference: MemorySide) -> Annotation | None:
    """More activations kept for backward than the baseline: not rematerialised (or saved in a wider dtype)."""
    mine, theirs = side.ledger.bytes_of("activations"), reference.ledger.bytes_of("activations")
    if mine is None or theirs is None or mine <= theirs * (1 + PART_TOLERANCE) or mine - theirs <= PART_MIN_BYTES:
        return None
    estimate = any(part is not None and part.estimate
                   for part in (side.ledger.part("activations"), reference.ledger.part("activations")))
    return Annotation("activations_not_rematerialised", "activations not rematerialised",
                      f"{units.size(mine)} kept for backward against the baseline's {units.size(theirs)}: the "
                      "baseline recomputes or fuses more of its forward (or saves it in a narrower dtype)",
                      ("activations", "temporaries"), kind="estimate" if estimate else "measured",
                      evidence={"bytes": mine, "baseline_bytes": theirs})


def runtime_share(side: MemorySide, reference: MemorySide) -> Annotation | None:
    """A larger runtime share: libraries and code loaded, caches, and the allocator keeping freed memory."""
    mine, theirs = side.ledger.part("runtime"), reference.ledger.part("runtime")
    if mine is None or theirs is None or mine.bytes is None or theirs.bytes is None or mine.bytes <= theirs.bytes:
        return None
    frameworks = side.environment.frameworks_imported or None  # empty: a run from before they were recorded
    cached = mine.detail.get("allocator_cached_bytes")
    evidence: dict = {"bytes": mine.bytes, "baseline_bytes": theirs.bytes, "frameworks_imported": frameworks}
    claim = (f"the runtime's share is {units.size(mine.bytes - theirs.bytes)} larger: code and libraries loaded "
             f"({', '.join(frameworks) if frameworks else 'not recorded'}), caches")
    if cached is not None:
        evidence["allocator_cached_bytes"] = cached
        claim += f", and {units.size(cached)} the allocator keeps cached beyond its peak allocation"
    else:
        claim += ", and freed memory the allocator keeps"
    return Annotation("allocator_caching", "runtime and allocator caching", claim, ("runtime",), evidence=evidence)


MEMORY_HYPOTHESES = (donation_missing, optimizer_state_width, activations_kept, runtime_share)


def _annotate(result: ModeMemory, side: MemorySide, reference: MemorySide) -> None:
    """Each hypothesis that fires goes to the parts it can explain that differ, else to the mode (donation: always
    to the outputs, whose cost it states, whether or not the baseline differs)."""
    by_name = {p.name: p for p in result.parts}
    for hypothesis in MEMORY_HYPOTHESES:
        annotation = hypothesis(side, reference)
        if annotation is None:
            continue
        targets = [by_name[n] for n in annotation.nodes if n in by_name and
                   (by_name[n].differs or annotation.rule == "donation_missing")]
        for part in targets:
            part.annotations.append(annotation)
        if not targets:
            result.annotations.append(annotation)
