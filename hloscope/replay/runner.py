"""Replay a run's train-step program(s), or one HLO/StableHLO file, with jaxlib's XLA, timed like `hloscope run`.

The step is every replayable train-step module of the run, executed in the order the framework runs them (torch_xla's
lazy step: one graph; torch_xla+compile: dynamo's graphs by module id, i.e. compile order, which is their order in the
step; JAX: its one jit), with outputs that alias inputs fed back as the next step's inputs. The timer and statistics
are `hloscope run`'s (hloscope.backends.timing): the clock stops after the outputs are ready on the device.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from hloscope.errors import HloscopeError, InputError, MissingDependency, UsageError
from hloscope.explain.collect import summarize_run
from hloscope.files import read_text
from hloscope.limits import MAX_REPLAY_MODULE_BYTES, MAX_REPLAY_TIMEOUT_S
from hloscope.modes import BY_NAME
from hloscope.replay.accept import accept_module
from hloscope.replay.inputs import load_saved
from hloscope.replay.program import module_format
from hloscope.replay.trajectory import saved_inputs
from hloscope.replay.worker import MARK, fusions, instructions
from hloscope.runs.records import RunRecord
from hloscope.runs.replay_record import (
    FrameworkDevice,
    ReplayComparison,
    ReplayCompilers,
    ReplayConfig,
    ReplayDevice,
    ReplayLoss,
    ReplayModule,
    ReplayProfile,
    ReplayRecord,
    ReplaySource,
    ReplayTiming,
    ReplayXla,
    RunXla,
    SkippedModule,
    Trajectory,
    overhead_anomaly,
    unsteady_sides,
    write_replay,
)
from hloscope.runs.rundir import load_run
from hloscope.significance import median_difference

PROFILE_DIR = "replay-profile"
INPUTS = ("images ~ N(0,1) of the run's batch shape, weights and optimizer state ~ N(0,0.02), float scalars 0.01, "
          "integer labels uniform in [0, num_labels), step counters 0")


class _Skip(msgspec.Struct, frozen=True, kw_only=True):
    """A module the child did not replay; `input_error` when its file could not be read (path, message, line, col)."""

    module: str
    file: str
    reason: str
    input_error: dict[str, Any] | None = None


class _Measured(msgspec.Struct, frozen=True, kw_only=True):
    """The child's result (hloscope.replay.worker.execute): the record's parts measured there, typed."""

    device: ReplayDevice
    platform_version: str | None = None
    modules: list[ReplayModule] = []
    skipped: list[_Skip] = []
    warnings: list[str] = []
    trajectory: Trajectory | UnsetType = UNSET
    timing: ReplayTiming | UnsetType = UNSET
    loss: ReplayLoss | UnsetType = UNSET
    profile: ReplayProfile | UnsetType = UNSET


def select_device(name: str):
    """The first jax device of `name` (cpu | cuda); --device cuda without a GPU is refused in one line."""
    try:
        import jax
    except ImportError as error:
        raise MissingDependency(f"replay needs jax and jaxlib ({error})") from None
    if name not in ("cpu", "cuda"):
        raise UsageError(f"--device {name}: choose cpu or cuda")
    try:
        devices = jax.devices(name)
    except RuntimeError:
        devices = []
    if not devices:
        raise UsageError("--device cuda: no GPU here (jax has no CUDA backend on this machine); replay the run on a "
                         "GPU box with jax's CUDA plugin (`pip install 'jax[cuda12]'`)")
    return devices[0]


def modules_of(path: Path) -> tuple[RunRecord | None, Path | None, list[tuple[str, Path, str]]]:
    """(run record or None, run directory or None, [(module name, file, format)] in execution order)."""
    if path.is_dir() or path.name == "run.json":
        run = load_run(path)
        run_dir = path if path.is_dir() else path.parent
        train = [a for a in run.artifacts if a.train_step]
        stablehlo = [a for a in train if a.kind == "stablehlo"]
        before = [a for a in train if a.kind == "hlo" and a.stage == "before_optimizations"]
        chosen = stablehlo or sorted(before, key=lambda a: (a.module_id or 0, a.path))
        if not chosen:
            raise UsageError(f"{run_dir}: no train-step XLA program in this run: replay needs a run of an XLA mode "
                             "made with --dump-hlo")
        return run, run_dir, [(str(a.module or Path(a.path).name)[:200], run.artifact_path(a),
                               "mlir" if a.kind == "stablehlo" else "hlo") for a in chosen]
    if not path.exists():
        raise InputError(path, "no such file or directory")
    return None, None, [(path.name, path, module_format(path))]


def replay(path: str | os.PathLike, device: str = "cpu", steps: int = 50, warmup: int = 10, profile: bool = False,
           profile_steps: int = 6, seed: int = 0, on_skip=lambda line: None,
           timeout_s: float | None = None) -> ReplayRecord:
    """Replay and record; returns the record, its `written` the replay.json written (None when it could not be).

    Every module and the run's saved inputs are checked first (hloscope.replay.accept, .inputs: InputError for what
    replay does not run); XLA then compiles and executes in a child process (hloscope.replay.worker) bounded by
    `timeout_s` (HLOSCOPE_REPLAY_TIMEOUT_S, else MAX_REPLAY_TIMEOUT_S): its crash, abort or time-out is one
    InputError naming the module."""
    if steps < 1 or warmup < 1:
        raise UsageError("--steps and --warmup must be at least 1")
    if device not in ("cpu", "cuda"):
        raise UsageError(f"--device {device}: choose cpu or cuda")
    path = Path(path)
    run, run_dir, wanted = modules_of(path)
    accepted = [accept_module(file, name, fmt) for name, file, fmt in wanted]
    batch = run.config.batch_size if run is not None else None
    model_config = run.config.model_config if run is not None else None
    labels = model_config.num_labels if model_config is not None else None
    labels = labels if labels is not None and 0 < labels <= 10**7 else None
    saved = _checked_saved_inputs(run, accepted)
    base = run_dir or path.parent
    logdir = _new_profile_dir(base) if profile else None
    request = {"modules": [[a.name, a.file, a.fmt] for a in accepted], "device": device, "steps": steps,
               "warmup": warmup, "seed": seed, "batch": batch, "labels": labels, "saved_inputs": saved,
               "profile_dir": str(logdir) if logdir else None, "profile_steps": profile_steps}
    try:
        result = _measured(run_child(request, [a.file for a in accepted], path, timeout_s), path)
    finally:
        if logdir is not None:
            _discard_if_empty(logdir)
    record = ReplayRecord(
        status="running", created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        source=ReplaySource(path=str(path), run_id=run.run_id if run else None, mode=run.mode if run else None,
                            batch_size=batch, num_labels=labels),
        config=ReplayConfig(device=device, steps=steps, warmup=warmup, seed=seed, profile=profile),
        device=result.device, compiler=_compiler(run, result.platform_version),
        skipped=_skipped(result.skipped, len(wanted), on_skip), warnings=list(result.warnings), inputs=INPUTS)
    if not result.modules:
        return write_replay(msgspec.structs.replace(record, status="not_replayable"), run_dir, path)
    record = _replayed(record, result, run, run_dir, logdir)
    return write_replay(msgspec.structs.replace(record, status="partial" if record.skipped else "ok"), run_dir, path)


def _measured(result: dict, source: Path) -> _Measured:
    """The child's result, typed; one that does not fit the record is an HloscopeError naming the source."""
    try:
        return msgspec.convert(result, _Measured)
    except msgspec.ValidationError as error:
        raise HloscopeError(f"{source}: replay's XLA process gave a result that does not fit the replay record "
                            f"({error})") from None


def _skipped(skips: list[_Skip], wanted: int, on_skip) -> list[SkippedModule]:
    """The modules the child did not replay, each told to `on_skip` in one line. When every one of the `wanted`
    modules was unreadable, there is nothing to replay and only bad input to blame: the first one's InputError
    (exit 2)."""
    unreadable: list[InputError] = []
    for skip in skips:
        bad = skip.input_error
        if bad is not None:
            unreadable.append(InputError(bad["path"], bad["message"], bad.get("line"), bad.get("col")))
        else:
            on_skip(f"not replayed: {skip.reason}")
    if unreadable and len(unreadable) == wanted:
        raise unreadable[0]
    for error in unreadable:  # the other modules are replayed; the damaged file is named, with its line:column
        on_skip(f"not replayed: {error}")
    return [SkippedModule(module=skip.module, file=skip.file, reason=skip.reason) for skip in skips]


def _replayed(record: ReplayRecord, result: _Measured, run: RunRecord | None, run_dir: Path | None,
              logdir: Path | None) -> ReplayRecord:
    """The record of a replay that ran: its timing and loss, each module beside the run's own compile of it, the
    profile, and the run's step against the replayed program."""
    timing = result.timing
    if isinstance(timing, UnsetType):
        raise HloscopeError(f"{record.source.path}: replay's XLA process replayed modules without timing them")
    profile: ReplayProfile | UnsetType = UNSET
    if logdir is not None and os.path.isdir(logdir):
        profile = msgspec.structs.replace(result.profile or ReplayProfile(), logdir=str(logdir),
                                          xplane=_xplanes(logdir))
    return msgspec.structs.replace(
        record, modules=[_beside_run(entry, run, run_dir) for entry in result.modules], trajectory=result.trajectory,
        timing=timing, loss=result.loss, profile=profile, comparison=_against_run(run, timing),
        framework_device=_framework_device(run_dir, timing) if run is not None and run_dir is not None else UNSET)


def _beside_run(entry: ReplayModule, run: RunRecord | None, run_dir: Path | None) -> ReplayModule:
    """A replayed module with what the run's own XLA made of the same graph, when the run kept its optimized HLO."""
    after = _run_optimized(run, run_dir, entry.module)
    if after is None:
        return entry
    return msgspec.structs.replace(entry, run_fusions=fusions(after), run_instructions=instructions(after))


def _checked_saved_inputs(run: RunRecord | None, accepted: list) -> dict | None:
    """The run's saved step inputs for the child, after load_saved has checked them against the one module's
    parameters (InputError naming the .npz otherwise); None without them or with several modules."""
    saved = saved_inputs(run)
    if saved is None or run is None or len(accepted) != 1:
        return None
    load_saved(run.artifact_path(saved), accepted[0].parameters, accepted[0].name)
    return {"dir": str(run.dir), "path": saved.path, "precision": run.config.precision or "fp32"}


def _timeout(timeout_s: float | None) -> float:
    if timeout_s is not None:
        return timeout_s
    try:
        value = float(os.environ.get("HLOSCOPE_REPLAY_TIMEOUT_S", ""))
    except ValueError:
        return MAX_REPLAY_TIMEOUT_S
    return value if 0 < value <= MAX_REPLAY_TIMEOUT_S else MAX_REPLAY_TIMEOUT_S


def run_child(request: dict, files: list[str], source: Path, timeout_s: float | None = None) -> dict:
    """Run hloscope.replay.worker on `request`; its result, or its error raised here. A child that crashes,
    aborts or runs past the time bound is one InputError naming the module it was compiling (the source when it was
    executing several)."""
    limit = _timeout(timeout_s)
    root = str(Path(__file__).resolve().parent.parent.parent)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    if request["device"] == "cpu":
        env.setdefault("JAX_PLATFORMS", "cpu")  # never start a GPU plugin for a CPU replay
    stdout: str | bytes | None
    stderr: str | bytes | None
    code: int | None
    try:
        child = subprocess.run([sys.executable, "-m", "hloscope.replay.worker"], input=json.dumps(request),
                               capture_output=True, text=True, timeout=limit, env=env, check=False)
        stdout, stderr, code = child.stdout, child.stderr, child.returncode
    except subprocess.TimeoutExpired as expired:
        stdout, stderr, code = expired.stdout, expired.stderr, None
    except OSError as error:
        raise HloscopeError(f"could not start replay's XLA process: {error.strerror or error}") from None
    messages = []
    for line in _text(stdout).splitlines():
        if line.startswith(MARK):
            try:
                messages.append(json.loads(line[len(MARK):]))
            except ValueError:
                continue
    stage = next((m for m in reversed(messages) if "stage" in m), None)
    blame = files[stage["index"]] if stage and stage.get("index") is not None and stage["index"] < len(files) else (
        files[0] if len(files) == 1 else str(source))
    doing = "compiling" if stage and stage.get("stage") == "compile" else "running" if stage else "starting on"
    final = messages[-1] if messages and ("result" in messages[-1] or "error" in messages[-1]) else None
    if code is None:
        raise InputError(blame, f"XLA did not finish {doing} it within {limit:g} s: stopped, not replayed "
                                "(HLOSCOPE_REPLAY_TIMEOUT_S sets the bound)")
    if final is None:
        detail = next((ln[ln.index("Check failed"):].strip() for ln in _text(stderr).splitlines()
                       if "Check failed" in ln), "")
        raise InputError(blame, f"XLA {_died(code)} while {doing} it: not replayed"
                                + (f" ({detail[:200]})" if detail else ""))
    if "error" in final:
        raise _rebuilt(final["error"], blame)
    result: dict = final["result"]
    return result


def _text(output: str | bytes | None) -> str:
    if isinstance(output, bytes):
        return output.decode("utf-8", "replace")
    return output or ""


def _died(code: int) -> str:
    if code < 0:
        try:
            return f"crashed ({signal.Signals(-code).name})"
        except ValueError:
            return f"crashed (signal {-code})"
    return f"stopped with exit code {code}"


def _rebuilt(error: dict, blame: str) -> HloscopeError:
    """The child's error as the same kind of hloscope error here."""
    message = str(error.get("message"))
    kind = error.get("class")
    if error.get("path") is not None:
        return InputError(str(error["path"]), message, error.get("line"), error.get("col"))
    if kind == "UsageError":
        return UsageError(message)
    if kind == "XlaFailure":
        return InputError(blame, f"XLA failed on it: {message}")
    rebuilt = HloscopeError(message)
    rebuilt.exit_code = int(error.get("exit_code") or 1)
    return rebuilt


def _run_optimized(run: RunRecord | None, run_dir: Path | None, module: str) -> str | None:
    """The run's own optimized HLO of `module` (what the framework's XLA made of the same graph), read bounded."""
    if run is None or run_dir is None:
        return None
    for artifact in run.artifacts:
        if artifact.kind == "hlo" and artifact.stage == "after_optimizations" and artifact.module == module:
            try:
                return read_text(run.artifact_path(artifact), "HLO module", MAX_REPLAY_MODULE_BYTES)
            except InputError:
                return None
    return None


def _compiler(run: RunRecord | None, platform_version: str | None) -> ReplayCompilers:
    """Which XLA compiled what: the replay's (jaxlib's) and the run's (the framework's own, or bundled)."""
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    replay = ReplayXla(xla=f"jaxlib {version('jaxlib')}", jax=version("jax"), jaxlib=version("jaxlib"),
                       platform_version=platform_version)
    if run is None:
        return ReplayCompilers(replay=replay)
    mode = run.mode
    packages = run.environment.packages
    registered = BY_NAME.get(mode)
    if registered is not None and registered.framework == "torch_xla":
        xla = f"torch_xla {packages.get('torch_xla')}'s bundled XLA (built into torch_xla's _XLAC extension)"
    elif registered is not None and registered.xla:  # JAX's own programs and torchax's, compiled by jaxlib
        xla = f"jaxlib {packages.get('jaxlib')}"
    else:
        xla = None
    return ReplayCompilers(replay=replay, run=RunXla(mode=mode, xla=xla), same_compiler=xla == replay.xla)


def _against_run(run: RunRecord | None, timing: ReplayTiming) -> ReplayComparison | None:
    """The run's timed step against the replayed program: the framework's overhead, measured, with its interval."""
    if run is None or not run.has("timing"):
        return None
    overhead = median_difference(run.timing.step_times_s, timing.step_times_s)
    replay_median = timing.median_s
    if overhead is None or replay_median is None:  # no step on one side
        return None
    run_median = run.timing.median_s or overhead.estimate + replay_median
    flag = overhead_anomaly(overhead.estimate, unsteady_sides(run.timing.noisy, run.timing.host_scheduling,
                                                              timing.noisy))
    return ReplayComparison(
        run_median_s=run_median, replay_median_s=replay_median, overhead_s=overhead.estimate,
        overhead_ci_s=overhead.as_list(), overhead_anomaly=flag.anomaly,
        overhead_note=flag.note if flag.note is not None else UNSET,
        replay_over_run=replay_median / run_median if run_median else None,
        method="median(run step) - median(replayed step), 95% percentile bootstrap over both samples")


def _framework_device(run_dir: Path, timing: ReplayTiming) -> FrameworkDevice:
    """The run's own device time per profiled step (from its profile), beside the replay's of the same graph."""
    try:
        summary = summarize_run(run_dir)
    except HloscopeError as error:  # an unreadable run or profile: a note, never a failed replay
        return FrameworkDevice(note=f"the run's profile was not read: {str(error).splitlines()[0][:200]}")
    if summary.device_busy_s is None:
        return FrameworkDevice(note="the run has no profile with device time (run it with --profile)")
    replay_median = timing.median_s
    return FrameworkDevice(
        device_busy_s=summary.device_busy_s, profiled_step_s=summary.profiled_step_s,
        device_idle_s=summary.device_idle_s, replay_median_s=replay_median,
        source="the run's kept profiled steps (medians), as explain reads them",
        replay_minus_framework_device_s=None if replay_median is None else replay_median - summary.device_busy_s)


def _new_profile_dir(base: Path) -> Path:
    """A fresh folder for --profile in `base`: replay-profile, else replay-profile-2, ...; made here with mkdir, which
    never follows or reuses what is there (a symbolic link planted under the name is skipped, never written through),
    so the profile lands inside `base` and overwrites nothing."""
    for n in range(1, 1000):
        candidate = base / (PROFILE_DIR if n == 1 else f"{PROFILE_DIR}-{n}")
        try:
            os.mkdir(candidate, 0o755)
        except FileExistsError:
            continue
        except OSError as error:
            raise InputError(candidate, f"cannot create the profile folder: {error.strerror or error}") from None
        if not stat.S_ISDIR(os.lstat(candidate).st_mode):  # replaced since: never written through
            raise InputError(candidate, "replaced while replay made it: not written")
        return candidate
    raise InputError(base, f"{PROFILE_DIR}-2 ... {PROFILE_DIR}-999 all exist: no name left for the profile")


def _discard_if_empty(logdir: Path) -> None:
    """Remove the profile folder replay made when the child wrote nothing in it (it failed, or nothing ran)."""
    try:
        os.rmdir(logdir)  # only an empty folder: a profile, or anything else put there, stays
    except OSError:
        pass


def _xplanes(logdir: Path) -> list[str]:
    """The xplane files the child wrote under `logdir` (symbolic links neither followed nor listed)."""
    found = []
    for folder, _dirs, names in os.walk(logdir, followlinks=False):
        found += [os.path.join(folder, n) for n in names if n.endswith(".xplane.pb")
                  and stat.S_ISREG(os.lstat(os.path.join(folder, n)).st_mode)]
    return sorted(found)
