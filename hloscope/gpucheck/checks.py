"""One function per invariant of docs/gpu-check.md. Each takes what the tools printed with `--json` (already parsed),
or the records they wrote as hloscope.runs.rundir reads them (typed; the InputError naming the file when it could not
be read), and returns a Check: PASS, FAIL or SKIP with a one-line reason. Nothing here runs a framework or reads a
trace."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hloscope.errors import InputError
from hloscope.runs.records import ComparisonRecord, Timing
from hloscope.runs.replay_record import unsteady_sides
from hloscope.significance import percentile

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"

# How far hloscope's median may lie from the independent clock's (timing_probe): on a GPU the device's own clock
# (CUDA events) or a back-to-back loop; on the CPU dry run the 2 shared cores make two processes' medians differ by
# tens of percent, while a timer that stopped before the device finished would be off by several times.
SYNC_TOLERANCE_GPU = 0.05
SYNC_TOLERANCE_CPU = 0.50
# The replayed program alone against the run's step: the framework's overhead on a GPU is a few percent of a ViT-B
# step; on the CPU dry run the shared cores make two processes differ by more than the overhead.
REPLAY_TOLERANCE_GPU = 0.15
REPLAY_TOLERANCE_CPU = 0.50
# The ledger's nodes add up to each kept step by construction: only float error may separate them.
LEDGER_TOLERANCE = 1e-6


@dataclass
class Check:
    name: str
    status: str
    detail: str

    def line(self) -> str:
        return f"{self.status} {self.name}: {self.detail}"

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail}


def skip(name: str, reason: str) -> Check:
    return Check(name, SKIP, reason)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


# ------------------------------------------------------------------------------------------------------- environment

def check_torch_cuda(env: dict) -> Check:
    """The environment probe's torch facts: a CUDA build that sees a GPU."""
    name = "env: torch is a CUDA build and sees the GPU"
    cuda, available = env.get("torch_cuda"), env.get("torch_cuda_available")
    if not cuda:
        return Check(name, FAIL, f"torch {env.get('torch')} is a CPU build (torch.version.cuda is None)")
    if not available:
        return Check(name, FAIL, f"torch {env.get('torch')} (CUDA {cuda}) sees no GPU: torch.cuda.is_available() is False")
    return Check(name, PASS, f"torch {env.get('torch')}, CUDA {cuda}, {env.get('torch_device_name')}")


def check_jax_cuda(env: dict) -> Check:
    """jaxlib with its CUDA plugin, and a GPU as JAX's default backend (torchax reaches the GPU through it)."""
    name = "env: jax runs on the GPU (jaxlib + CUDA plugin; torchax goes through it)"
    backend, plugin = env.get("jax_backend"), env.get("jax_cuda_plugin")
    # CUDA 12's plugin (what requirements-cuda-target.txt pins) or CUDA 13's (a jax built for CUDA 13)
    plugin_name = env.get("jax_cuda_plugin_name") or "jax-cuda12-plugin"
    if not plugin:
        return Check(name, FAIL, f"jax {env.get('jax')}: no jax CUDA plugin installed (pip install 'jax[cuda12]=="
                                 f"{env.get('jax')}' or 'jax[cuda13]=={env.get('jax')}')")
    if plugin != env.get("jaxlib"):
        return Check(name, FAIL, f"{plugin_name} {plugin} does not match jaxlib {env.get('jaxlib')}")
    if backend != "gpu":
        return Check(name, FAIL, f"jax's default backend is {backend!r}, not 'gpu' ({env.get('jax_error') or ''})")
    return Check(name, PASS, f"jax {env.get('jax')}, jaxlib {env.get('jaxlib')}, {plugin_name} {plugin}, "
                             f"devices {env.get('jax_devices')}")


def check_torch_xla_refused(code: int, stderr: str, *, installed: bool = True) -> Check:
    """`hloscope run --mode torch_xla --device cuda`: exit 2 and exactly one line saying torch_xla has no CUDA. Where
    torch_xla is not installed (`installed` False) the refusal cannot be shown: SKIP, provided the run is refused in
    one line naming the missing package (MissingDependency, exit 3)."""
    name = "torch_xla on CUDA is refused in one line"
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not installed:
        if code == 3 and len(lines) == 1 and "torch_xla" in lines[0]:
            return Check(name, SKIP, f"torch_xla is not installed here, so its CUDA refusal is not exercised; the "
                                     f"torch_xla modes are refused: {lines[0]}")
        return Check(name, FAIL, f"torch_xla is not installed; expected exit 3 and one line naming it, got exit "
                                 f"{code} and {len(lines)} lines: {' | '.join(lines[-2:])}")
    if code != 2:
        return Check(name, FAIL, f"exit code {code}, expected 2; stderr ends: {' | '.join(lines[-2:])}")
    if len(lines) != 1:
        return Check(name, FAIL, f"{len(lines)} lines on stderr, expected 1")
    if "no CUDA" not in lines[0]:
        return Check(name, FAIL, f"the line does not say torch_xla has no CUDA: {lines[0]}")
    return Check(name, PASS, lines[0])


# ------------------------------------------------------------------------------------------------------- comparisons

def check_comparison(label: str, comparison: ComparisonRecord | InputError | None, modes: Iterable[str]) -> Check:
    """comparison.json: every requested mode ran in every process and finished (`status: ok`)."""
    name = f"compare {label}: every mode finished"
    if comparison is None:
        return Check(name, FAIL, "no comparison.json was written")
    if isinstance(comparison, InputError):
        return Check(name, FAIL, str(comparison))
    wanted = list(modes)
    rows = comparison.modes
    bad = [f"{r.mode} (process {r.replicate or 1}): {r.status} {r.error or ''}".strip()
           for r in rows if r.status != "ok"]
    missing = [m for m in wanted if m not in {r.mode for r in rows}]
    if bad or missing:
        return Check(name, FAIL, "; ".join(bad + [f"{m}: no run" for m in missing]))
    medians: dict[str, list[float]] = {}
    for r in rows:
        medians.setdefault(r.mode or r.dir, []).append(r.median_s or 0.0)
    text = ", ".join(f"{m} {_ms(statistics.median(v))}" for m, v in medians.items())
    return Check(name, PASS, f"{len(rows)} processes ok; pooled medians {text}")


def check_verdicts(explain: dict | None) -> Check:
    """explain gives every mode a verdict, and none is provisional (two processes a mode measure their spread)."""
    name = "explain: a verdict for every mode, none provisional"
    if explain is None:
        return Check(name, FAIL, "no explain --json output")
    rows = explain.get("modes") or []
    if not rows:
        return Check(name, FAIL, "explain reported no mode")
    missing = [r.get("mode") for r in rows if not r.get("verdict")]
    provisional = [r.get("mode") for r in rows if r.get("provisional")]
    if missing or provisional:
        return Check(name, FAIL, f"no verdict: {missing}; provisional: {provisional}")
    return Check(name, PASS, "; ".join(f"{r['mode']}: {r['verdict']}" for r in rows))


# ---------------------------------------------------------------------------------------------------- the invariants

def check_sync_timing(mode: str, probe: dict | None, *, gpu: bool) -> Check:
    """hloscope's step time against an independent clock of the same step (timing_probe): a timer that stops before
    the device has finished reports far less than the device needs. On a GPU: run.json's median against the
    reference's median. On the CPU dry run, where other jobs on the 2 shared cores make two processes differ by several
    times and single steps by 10x: hloscope's own timer run in the probe's process, alternating with the reference,
    fastest step against fastest reference chunk (run.json's median is still shown)."""
    name = f"sync timing {mode}: hloscope's step time vs an independent clock"
    if probe is None:
        return Check(name, FAIL, "the timing probe gave no result")
    run = probe.get("run_median_s")
    if gpu:
        timer, reference = run, probe.get("reference_median_s")
        what, ref_what = "run.json median", "reference median"
    else:
        timer, reference = probe.get("hloscope_timer_min_s"), probe.get("reference_min_s")
        what = f"fastest step of hloscope's timer in the probe's process (run.json median {_ms(run) if run else '-'})"
        ref_what = "fastest reference"
    if not timer or not reference:
        return Check(name, FAIL, f"missing figure: hloscope {timer}, reference {reference}")
    tolerance = SYNC_TOLERANCE_GPU if gpu else SYNC_TOLERANCE_CPU
    off = timer / reference - 1
    detail = (f"{what} {_ms(timer)}, {ref_what} {_ms(reference)} ({probe.get('method')}): {off:+.1%}, "
              f"tolerance {tolerance:.0%}")
    if abs(off) <= tolerance:
        return Check(name, PASS, detail)
    noise = None if gpu else _sample_spread(probe.get("hloscope_timer_s"), probe.get("samples_s"))
    if noise is not None and noise > abs(off):  # the CPU's other jobs move one clock's own steps more than that
        return skip(name, f"cannot tell on this machine: {detail}, but one clock's own steps spread "
                          f"{noise:.0%} (p90 / p10)")
    return Check(name, FAIL, detail)


def _sample_spread(*samples: object) -> float | None:
    """The larger p90 / p10 - 1 of the samples given (lists of positive seconds), None without two of each."""
    spreads = []
    for values in samples:
        ordered = sorted(float(v) for v in values if isinstance(v, int | float)) if isinstance(values, list) else []
        if len(ordered) < 2:
            return None
        low = percentile(ordered, 0.10)
        if low <= 0:
            return None
        spreads.append(percentile(ordered, 0.90) / low - 1)
    return max(spreads) if spreads else None


def check_gpu_kernels(label: str, trace_stats: dict | None, fmt: str) -> Check:
    """`trace stats --json` of a GPU run: its trace (format `fmt`) has device kernels on the device's streams in
    every profiled step."""
    name = f"{label}: {fmt} trace has GPU kernels on device streams"
    if trace_stats is None:
        return Check(name, FAIL, "no trace stats output")
    traces = [t for t in trace_stats.get("traces") or [] if t.get("format") == fmt]
    if not traces:
        return Check(name, FAIL, f"no {fmt} trace among {[t.get('format') for t in trace_stats.get('traces') or []]}")
    problems, shown = [], []
    for trace in traces:
        file = Path(str(trace.get("file"))).name
        if not trace.get("devices") or not trace.get("kernels") or not trace.get("device_time_us"):
            problems.append(f"{file}: {trace.get('kernels')} kernels on {trace.get('devices')} devices")
            continue
        empty = [s.get("step") for s in trace.get("per_step") or [] if not s.get("kernels")]
        if not trace.get("per_step"):
            problems.append(f"{file}: no steps found")
        elif empty:
            problems.append(f"{file}: steps without kernels {empty}")
        shown.append(f"{file}: {trace['kernels']} kernels, {trace['device_time_us'] / 1e3:.1f} ms on "
                     f"{trace['devices']} device(s)")
    if problems:
        return Check(name, FAIL, "; ".join(problems))
    return Check(name, PASS, "; ".join(shown))


def train_step_kernels(hlo_stats: dict) -> tuple[int, list[str]]:
    """Kernels per step from `hlo stats --json`: the after-optimization modules of the train step (all after-optimization
    modules where none is named after it)."""
    after = [m for m in hlo_stats.get("modules") or [] if m.get("stage") == "after_optimizations"]
    step = [m for m in after if "train_step" in str(m.get("name"))] or after
    return sum(int(m.get("kernels") or 0) for m in step), [str(m.get("name")) for m in step]


def check_kernel_count(label: str, hlo_stats: dict | None, trace_stats: dict | None) -> Check:
    """The compiled program's kernel count (static, copies excluded) equals the kernels the profile executed in each
    profiled step (memcpy/memset excluded)."""
    name = f"{label}: hlo stats kernels = kernels executed per profiled step"
    if hlo_stats is None or trace_stats is None:
        return Check(name, FAIL, "missing hlo stats or trace stats output")
    expected, modules = train_step_kernels(hlo_stats)
    if not modules:
        return Check(name, FAIL, "no after-optimization HLO module in hlo stats")
    steps = [s for t in trace_stats.get("traces") or [] for s in t.get("per_step") or []]
    if not steps:
        return Check(name, FAIL, "the profile has no steps")
    counts = [int(s.get("kernels") or 0) for s in steps]
    differing = {s.get("step"): c for s, c in zip(steps, counts) if c != expected}
    detail = f"{'+'.join(modules)}: {expected} kernels; profile per step: {sorted(set(counts))}"
    if differing:
        return Check(name, FAIL, f"{detail}; steps that differ: {differing}")
    return Check(name, PASS, f"{detail} ({len(counts)} steps)")


def check_replay(label: str, replay: dict | None, run_timing: Timing | InputError, *, gpu: bool) -> Check:
    """The replayed program (jaxlib's XLA alone, `replay --json`) takes within the tolerance of the run's step
    (run.json `timing`). On a GPU the medians are compared; on the CPU dry run the fastest steps, which other jobs on
    the shared cores disturb least (replay and run are different processes, minutes apart)."""
    tolerance = REPLAY_TOLERANCE_GPU if gpu else REPLAY_TOLERANCE_CPU
    statistic = "median_s" if gpu else "min_s"
    name = f"{label}: replay within {tolerance:.0%} of the step time"
    if replay is None:
        return Check(name, FAIL, "replay gave no result")
    if replay.get("status") not in ("ok", "partial"):
        return Check(name, FAIL, f"replay status {replay.get('status')}: {replay.get('error') or replay.get('skipped')}")
    if isinstance(run_timing, InputError):
        return Check(name, FAIL, f"no run step time: {run_timing}")
    replayed = (replay.get("timing") or {}).get(statistic)
    step_s = run_timing.median_s if gpu else run_timing.min_s
    if not replayed or not step_s:
        return Check(name, FAIL, f"missing figure: replay {statistic} {replayed}, step {step_s}")
    off = replayed / step_s - 1
    trajectory = replay.get("trajectory") or {}
    which = "median" if gpu else "fastest step"
    detail = (f"{which}: replay {_ms(replayed)}, run {_ms(step_s)}: {off:+.1%}; loss trajectory "
              f"{'same as the run' if trajectory.get('ok') else 'DIFFERS or unchecked'}")
    if trajectory and trajectory.get("ok") is False:
        return Check(name, FAIL, detail)
    if abs(off) <= tolerance:
        return Check(name, PASS, detail)
    if gpu:
        return Check(name, FAIL, detail)
    # On the CPU dry run the two processes run minutes apart beside other jobs. Where either one's own steps spread
    # more than the difference, or a side was timed under load (its steps flagged noisy, the run's main thread waiting
    # for a CPU: a load that lasts the whole window slows every step alike and leaves no spread), the difference says
    # nothing about the replay (as for the sync timing, and as explain's replay split says).
    replay_timing = replay.get("timing") or {}
    noise = _sample_spread(run_timing.step_times_s, replay_timing.get("step_times_s"))
    if noise is not None and noise > abs(off):
        return skip(name, f"cannot tell on this machine: {detail}, but one side's own steps spread {noise:.0%} "
                          "(p90 / p10)")
    unsteady = unsteady_sides(run_timing.noisy, run_timing.host_scheduling, replay_timing.get("noisy"))
    if unsteady:
        return skip(name, f"cannot tell on this machine: {detail}, but {'; '.join(unsteady)}")
    return Check(name, FAIL, detail)


def check_ledger(explain: dict | None, *, require_device: Iterable[str] = ()) -> Check:
    """explain's ledger: in every kept profiled step of every mode the nodes add up to the step; the modes in
    `require_device` have device categories (`device:*` nodes) that are positive and no longer than the step."""
    name = "explain: the ledger's parts add up to the step" + (" with device categories" if require_device else "")
    if explain is None:
        return Check(name, FAIL, "no explain --json output")
    summaries = explain.get("summaries") or {}
    if isinstance(summaries, dict):  # explain --json: {label: summary}
        summaries = [{"mode": label, **summary} for label, summary in summaries.items()]
    if not summaries:
        return Check(name, FAIL, "explain reported no summaries")
    device_modes = set(require_device)
    problems, shown = [], []
    for summary in summaries:
        mode, ledger = summary.get("mode"), summary.get("ledger")
        if not ledger:
            problems.append(f"{mode}: no ledger (no profile?)")
            continue
        nodes: dict[str, list[float]] = ledger.get("nodes") or {}
        steps: list[float] = ledger.get("step_s") or []
        if not steps:
            problems.append(f"{mode}: no kept profiled step")
            continue
        worst = 0.0
        for i, step in enumerate(steps):
            parts = sum(values[i] for values in nodes.values() if i < len(values))
            worst = max(worst, abs(parts - step) / step if step else abs(parts))
        device = [n for n in nodes if n.startswith("device:")]
        device_s = [sum(nodes[n][i] for n in device) for i in range(len(steps))]
        if worst > LEDGER_TOLERANCE:
            problems.append(f"{mode}: parts differ from the step by up to {worst:.2%}")
        if mode in device_modes or summary.get("run_mode") in device_modes:
            if not ledger.get("device") or not device:
                problems.append(f"{mode}: no device categories in the ledger")
            elif any(d <= 0 or d > s * (1 + LEDGER_TOLERANCE) for d, s in zip(device_s, steps)):
                problems.append(f"{mode}: device time outside (0, step] in some step")
        shown.append(f"{mode}: {len(steps)} steps, {len(nodes)} parts ({len(device)} device), "
                     f"device {statistics.median(device_s) / statistics.median(steps):.0%} of the step")
    if problems:
        return Check(name, FAIL, "; ".join(problems))
    return Check(name, PASS, "; ".join(shown))


def check_size(folder: Path, limit_bytes: int) -> Check:
    name = f"output folder under {limit_bytes / 1e6:.0f} MB"
    total = folder_bytes(folder)
    return Check(name, PASS if total <= limit_bytes else FAIL, f"{total / 1e6:.2f} MB in {folder}")


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
