"""The explain report as typed data: what the engine returns, what the renderers read (by attribute, so that a renamed
field is a type error, not a silently empty cell), and, through `to_dict()`, the `explain --json` document.

Nested parts are typed where they are made: a run's step spread (hloscope.significance.Spread), the replay split
(hloscope.explain.replay_split.ReplaySplit), an op table row's sides (hloscope.explain.ledger.OpFigures). A
contributor's evidence stays a dict: per run, its seconds in each kept step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hloscope.explain.hypotheses import Annotation
from hloscope.explain.ledger import OpFigures
from hloscope.explain.memory import ModeMemory
from hloscope.explain.replay_split import ReplaySplit
from hloscope.explain.startup import StartupComparison
from hloscope.explain.summary import ModeSummary
from hloscope.significance import Spread

if TYPE_CHECKING:  # the tested block's module reads this one's results
    from hloscope.explain.experiments import TestedBlock


@dataclass
class Contributor:
    """A measured part of the step (a ledger node) whose difference is significant, or the one line that sums the
    parts within noise (`significant` False, node WITHIN_NOISE)."""

    node: str
    title: str
    significant: bool
    seconds: float  # run - baseline, per profiled step (median of each side)
    interval_s: list[float] | None  # 95% bootstrap interval of that difference
    p_value: float | None  # exact two-sided Mann-Whitney U over the kept profiled steps
    claim: str
    evidence: dict[str, Any]  # per run, the node's seconds in each kept step (within noise: node -> seconds)
    annotations: list[Annotation] = field(default_factory=list)  # hypotheses attached to this part
    kind: str = "measured"
    rule: str = "ledger"
    # a part larger than the whole gap: the parts moving against the gap that offset it (its share is above 100%)
    offset_by: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"rule": self.rule, "node": self.node, "title": self.title, "kind": self.kind,
                "significant": self.significant, "seconds": self.seconds, "interval_s": self.interval_s,
                "p_value": self.p_value, "claim": self.claim, "evidence": self.evidence,
                "annotations": [a.to_dict() for a in self.annotations], "offset_by": self.offset_by}


@dataclass
class OpChange:
    """One op of the run and its counterpart in the baseline (hloscope.explain.ops): medians per kept profiled step of
    each side. `matched_by` "structure": paired by the structural match of the two programs (`hloscope diff`), each
    side named by its source op; "name": equal op group names. `matched` False: only one side has this work (the
    other side's name is None and its figures are zero because there is no counterpart, not because it took no
    time)."""

    group: str  # the run's op group; the baseline's where only the baseline has the work
    run: OpFigures
    baseline: OpFigures
    seconds: float  # run - baseline, per step
    p_value: float | None
    significant: bool
    run_name: str | None = None
    baseline_name: str | None = None
    matched: bool = True
    matched_by: str = "name"
    instructions: dict[str, list[str]] = field(default_factory=dict)  # "run"/"baseline": a few of the row's
    instruction_counts: dict[str, int] = field(default_factory=dict)  # "run"/"baseline": how many it has
    match_stages: dict[str, int] = field(default_factory=dict)  # matched pairs by the stage that made them

    def to_dict(self) -> dict:
        return {"group": self.group, "run_name": self.run_name, "baseline_name": self.baseline_name,
                "matched": self.matched, "matched_by": self.matched_by, "run": self.run.to_dict(),
                "baseline": self.baseline.to_dict(),
                "seconds": self.seconds, "p_value": self.p_value, "significant": self.significant,
                "instructions": self.instructions, "instruction_counts": self.instruction_counts,
                "match_stages": self.match_stages}


@dataclass(frozen=True)
class ConfigDifference:
    """A setting the two runs recorded differently (hloscope.runs.settings.differences): its value under this run
    (`a`) and under the baseline (`b`); None on the side that did not set it."""

    field: str
    a: str | None
    b: str | None

    def to_dict(self) -> dict:
        return {"field": self.field, "a": self.a, "b": self.b}


@dataclass
class PerSample:
    """The gap per sample, when the run and the baseline ran different batch sizes."""

    batch: int
    baseline_batch: int
    time_per_sample_s: float
    baseline_time_per_sample_s: float
    gap_s: float
    gap_ci_s: list[float] | None
    ratio: float

    def to_dict(self) -> dict:
        return {"batch_size": {"run": self.batch, "baseline": self.baseline_batch},
                "time_per_sample_s": self.time_per_sample_s,
                "baseline_time_per_sample_s": self.baseline_time_per_sample_s, "gap_s": self.gap_s,
                "gap_ci_s": self.gap_ci_s, "ratio": self.ratio}


@dataclass
class ModeResult:
    """One run against the baseline. Fields stay None where nothing was measured (a failed run, no profile, not
    significant: no causes are sought for a gap that is not there)."""

    mode: str
    status: str
    step_time_s: float | None = None
    # median, p10, p90 (seconds, written under keys without the `_s` suffix: docs/api.md) and n of the timed steps
    step_spread: Spread | None = None
    noisy: bool | None = None
    gap_s: float | None = None
    gap_ci_s: list[float] | None = None
    ratio: float | None = None
    ratio_ci: list[float] | None = None
    significant: bool | None = None
    verdict: str | None = None  # "baseline" | "slower" | "faster" | "no significant difference" | None (not timed)
    config_differences: list[ConfigDifference] = field(default_factory=list)
    tests: dict[str, bool] | None = None  # each condition of significance
    per_sample: PerSample | None = None
    profiled_gap_s: float | None = None
    residual_s: float | None = None  # timed gap - profiled gap
    contributors: list[Contributor] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)  # hypotheses no significant part could take
    ops: list[OpChange] = field(default_factory=list)
    explained_s: float | None = None
    unexplained_s: float | None = None
    notes: list[str] = field(default_factory=list)
    replay: ReplaySplit | None = None  # program on device vs framework overhead (hloscope.explain.replay_split)
    roofline_s: float | None = None  # compiled, not timed: the roofline lower bound per step
    processes: int | None = None  # processes of this configuration that were timed (`compare --repeats`)
    process_medians_s: list[float] = field(default_factory=list)  # each process's median step
    between_process_spread_s: float | None = None  # max - min of those medians; None with one process (unmeasured)
    provisional: bool | None = None  # a side ran in one process: between-process variation unmeasured on it
    # the process-level test (hloscope.significance.process_test): its p-value and the level Holm held it to
    process_p_value: float | None = None
    process_level: float | None = None
    # the smallest gap this pair could have been called different by (process-level test, spreads between processes,
    # the practical minimum), in seconds at the baseline's median; None when between-process variation is unmeasured
    resolvable_gap_s: float | None = None
    # a practical gap the process-level test could not resolve: the processes a side that would (None: not that case,
    # or more than 50)
    processes_needed: int | None = None
    # two runs of one mode with the same settings: the part of the gap their difference in contention accounts for
    # (each one's CPU wait per step beyond their common ratio of waiting to running); None: not that case, unmeasured
    contention_s: float | None = None
    profile_reproduces_gap: bool | None = None  # False: the profiled gap has the other sign, or is off by > the gap
    profile_parts: list[Contributor] = field(default_factory=list)  # then: the profile's parts, not offered as causes
    startup: StartupComparison | None = None  # the time to the first step against the baseline's (explain.startup)
    memory: ModeMemory | None = None  # the memory gap, where both this run and the baseline have a memory ledger

    def to_dict(self) -> dict:
        data = {"mode": self.mode, "status": self.status, "step_time_s": self.step_time_s,
                "step_spread": self.step_spread.to_dict() if self.step_spread is not None else None,
                "noisy": self.noisy, "gap_s": self.gap_s, "gap_ci_s": self.gap_ci_s,
                "ratio": self.ratio, "ratio_ci": self.ratio_ci, "significant": self.significant,
                "verdict": self.verdict, "config_differences": [d.to_dict() for d in self.config_differences], "tests": self.tests,
                "per_sample": self.per_sample.to_dict() if self.per_sample else None,
                "profiled_gap_s": self.profiled_gap_s, "residual_s": self.residual_s,
                "contributors": [c.to_dict() for c in self.contributors],
                "annotations": [a.to_dict() for a in self.annotations], "ops": [o.to_dict() for o in self.ops],
                "explained_s": self.explained_s, "unexplained_s": self.unexplained_s, "notes": self.notes,
                "replay": self.replay.to_dict() if self.replay is not None else None, "roofline_s": self.roofline_s, "replicates": self.processes,
                "process_medians_s": self.process_medians_s,
                "between_process_spread_s": self.between_process_spread_s, "provisional": self.provisional,
                "process_p_value": self.process_p_value, "process_level": self.process_level,
                "resolvable_gap_s": self.resolvable_gap_s, "processes_needed": self.processes_needed,
                "contention_s": self.contention_s,
                "profile_reproduces_gap": self.profile_reproduces_gap,
                "profile_parts": [c.to_dict() for c in self.profile_parts]}
        # only where a run recorded its first step or memory ledger: older runs keep their document as it was
        if self.startup is not None:
            data["startup"] = self.startup.to_dict()
        if self.memory is not None:
            data["memory"] = self.memory.to_dict()
        return data


@dataclass
class ScalingCause:
    """One ledger node of an N-device run against its ideal share: the 1-device run's time in that node / N."""

    node: str
    title: str
    kind: str  # "communication" | "idle" | "compute" (device or host work)
    seconds: float  # median over the N-device run's kept profiled steps minus the 1-device median / N
    interval_s: list[float] | None  # 95% bootstrap interval of that difference
    p_value: float | None  # exact two-sided Mann-Whitney U, N-device steps against the 1-device steps / N
    significant: bool

    def to_dict(self) -> dict:
        return {"node": self.node, "title": self.title, "kind": self.kind, "seconds": self.seconds,
                "interval_s": self.interval_s, "p_value": self.p_value, "significant": self.significant}


@dataclass
class ScalingPoint:
    """One mode on N devices against the same mode on one device, same global batch (strong scaling)."""

    label: str  # the N-device run's name in the report
    devices: int
    step_time_s: float  # median of the N-device run's timed steps
    ideal_step_s: float  # the 1-device median / N
    efficiency: float  # step(1) / (N x step(N)), medians
    efficiency_ci: list[float] | None  # 95% bootstrap interval (resampling both runs' timed steps)
    speedup: float  # step(1) / step(N)
    lost_s: float  # step(N) - step(1) / N: the time per step that perfect scaling would not spend
    lost_ci_s: list[float] | None
    significant: bool  # the engine's gap rules applied to step(N) against step(1) / N
    tests: dict[str, bool] = field(default_factory=dict)
    profiled_lost_s: float | None = None  # the same from the profiled steps' ledgers
    residual_s: float | None = None  # lost_s - profiled_lost_s: what the profile does not account for
    causes: list[ScalingCause] = field(default_factory=list)  # significant nodes, largest loss first
    within_noise_s: float | None = None  # the other nodes' excess, summed
    notes: list[str] = field(default_factory=list)
    provisional: bool = False  # one process on a side: the spread between processes is unmeasured

    def to_dict(self) -> dict:
        return {"label": self.label, "devices": self.devices, "step_time_s": self.step_time_s,
                "ideal_step_s": self.ideal_step_s, "efficiency": self.efficiency,
                "efficiency_ci": self.efficiency_ci, "speedup": self.speedup, "lost_s": self.lost_s,
                "lost_ci_s": self.lost_ci_s, "significant": self.significant, "provisional": self.provisional,
                "tests": self.tests,
                "profiled_lost_s": self.profiled_lost_s, "residual_s": self.residual_s,
                "causes": [c.to_dict() for c in self.causes], "within_noise_s": self.within_noise_s,
                "notes": self.notes}


@dataclass
class ModeScaling:
    """A mode's scaling from one device to each N it ran on (`compare --devices 1,2,4`)."""

    mode: str  # run.json's mode
    reference: str  # the 1-device run's name in the report
    step_time_s: float  # the 1-device median
    batch_size: int | None  # the global batch, the same at every N
    shared_cpu: bool  # the N devices are CPU devices (or gloo ranks) sharing one host's cores: no speed-up expected
    cpu_cores: int | None  # that host's cores, as run.json records them
    points: list[ScalingPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # device counts not timed (refused, failed) and why

    def to_dict(self) -> dict:
        return {"mode": self.mode, "reference": self.reference, "step_time_s": self.step_time_s,
                "batch_size": self.batch_size, "shared_cpu": self.shared_cpu, "cpu_cores": self.cpu_cores,
                "points": [p.to_dict() for p in self.points], "notes": self.notes}


@dataclass(frozen=True)
class ProcessNoise:
    """The A/A control of a comparison: how far processes of one configuration landed from each other. `relative` is
    the largest (max - min) / median of the process medians over every configuration that ran in several processes;
    at the baseline's median it is the smallest gap this comparison can resolve between configurations whose
    variation is alike (`alike` is the control without those set apart)."""

    relative: float
    configuration: str  # the configuration whose processes spread most
    processes: int  # its processes
    # the same control as a variance: the standard deviation of log process medians pooled over every configuration
    # that ran in several processes, and its degrees of freedom (hloscope.significance.pooled_process_variation)
    log_sd: float | None = None
    df: int | None = None
    # the configurations whose processes vary significantly more than the others' (an F-test on the log variances,
    # hloscope.significance.unlike_variations): each sets the noise only of the pairs it is part of
    set_apart: tuple[str, ...] = ()
    # the same control over the configurations not set apart: what a pair of them is held to; None when none is
    alike: ProcessNoise | None = None

    def to_dict(self) -> dict:
        return {"relative": self.relative, "configuration": self.configuration, "processes": self.processes,
                "log_sd": self.log_sd, "df": self.df, "set_apart": list(self.set_apart),
                "alike": self.alike.to_dict() if self.alike is not None else None}


@dataclass
class ExplainReport:
    """Every run against the baseline. `basis`: "step_time" (timed runs) or "roofline_lower_bound" (runs compiled for
    a target GPU, not timed). `comparison`: what the comparison directories record (config, audit mismatches)."""

    baseline: str | None
    basis: str
    modes: list[ModeResult]
    summaries: dict[str, ModeSummary]
    baseline_chosen: bool = False
    method: dict[str, Any] | None = None  # how gaps and parts were judged, in words and thresholds
    comparison: dict[str, Any] = field(default_factory=dict)
    scaling: list[ModeScaling] = field(default_factory=list)  # per mode run at several device counts
    process_noise: ProcessNoise | None = None  # the A/A control (None: no configuration ran twice)
    tested: TestedBlock | None = None  # --test-hypotheses: the controlled re-runs (None: not asked for)

    def to_dict(self) -> dict:
        """The `explain --json` document."""
        noise = self.process_noise
        document = {
            "fastest": self.baseline,  # kept for readers of earlier reports: the reference of every gap
            "baseline": self.baseline, "baseline_chosen": self.baseline_chosen, "basis": self.basis,
            "method": self.method, "between_process_spread": noise.to_dict() if noise is not None else None,
            "modes": [m.to_dict() for m in self.modes],
            "summaries": {mode: s.to_dict() for mode, s in self.summaries.items()},
            "comparison": self.comparison, "scaling": [s.to_dict() for s in self.scaling]}
        if self.tested is not None:  # only when asked for: the document without it stays as it was
            document["tested"] = self.tested.to_dict()
        return document

    def mode(self, name: str) -> ModeResult:
        """The result of one run by its mode name (KeyError when there is none)."""
        for result in self.modes:
            if result.mode == name:
                return result
        raise KeyError(name)
