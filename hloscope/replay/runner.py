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
from hloscope.runs.replay_record import overhead_anomaly, unsteady_sides
from hloscope.runs.rundir import load_run, write_json_atomic
from hloscope.significance import median_difference

SCHEMA_VERSION = 1
REPLAY_FILE = "replay.json"
PROFILE_DIR = "replay-profile"


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
           timeout_s: float | None = None) -> tuple[dict, Path | None]:
    """Replay and record; returns (record, path of the replay.json written, or None when it could not be written).

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
        result = run_child(request, [a.file for a in accepted], path, timeout_s)
    finally:
        if logdir is not None:
            _discard_if_empty(logdir)
    record: dict = {
        "schema_version": SCHEMA_VERSION, "kind": "replay", "status": "running",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": {"path": str(path), "run_id": run.run_id if run else None, "mode": run.mode if run else None,
                   "batch_size": batch, "num_labels": labels},
        "config": {"device": device, "steps": steps, "warmup": warmup, "seed": seed, "profile": profile},
        "device": result["device"], "compiler": _compiler(run, result.get("platform_version")), "modules": [],
        "skipped": [], "warnings": result.get("warnings", []),
        "inputs": ("images ~ N(0,1) of the run's batch shape, weights and optimizer state ~ N(0,0.02), float "
                   "scalars 0.01, integer labels uniform in [0, num_labels), step counters 0"),
    }
    unreadable: list[InputError] = []
    for skip in result["skipped"]:
        bad = skip.pop("input_error", None)
        record["skipped"].append(skip)
        if bad is not None:
            unreadable.append(InputError(bad["path"], bad["message"], bad.get("line"), bad.get("col")))
        else:
            on_skip(f"not replayed: {skip['reason']}")
    if unreadable and len(unreadable) == len(wanted):  # nothing to replay, and only bad input to blame: exit 2
        raise unreadable[0]
    for error in unreadable:  # the other modules are replayed; the damaged file is named, with its line:column
        on_skip(f"not replayed: {error}")
    if not result["modules"]:
        record["status"] = "not_replayable"
        return record, _write(record, run_dir, path)
    if "trajectory" in result:
        record["trajectory"] = result["trajectory"]
    for key in ("timing", "loss"):
        record[key] = result[key]
    for entry in result["modules"]:
        after = _run_optimized(run, run_dir, entry["module"])
        if after is not None:
            entry["run_fusions"] = fusions(after)
            entry["run_instructions"] = instructions(after)
        record["modules"].append(entry)
    if logdir is not None and os.path.isdir(logdir):
        record["profile"] = {**result.get("profile", {}), "logdir": str(logdir), "xplane": _xplanes(logdir)}
    record["comparison"] = _against_run(run, record)
    if run is not None and run_dir is not None:
        record["framework_device"] = _framework_device(run_dir, record)
    record["status"] = "partial" if record["skipped"] else "ok"
    return record, _write(record, run_dir, path)


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


def _compiler(run: RunRecord | None, platform_version: str | None) -> dict:
    """Which XLA compiled what: the replay's (jaxlib's) and the run's (the framework's own, or bundled)."""
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    replay = {"xla": f"jaxlib {version('jaxlib')}", "jax": version("jax"), "jaxlib": version("jaxlib"),
              "platform_version": platform_version}
    out: dict[str, object] = {"replay": replay}
    if run is not None:
        mode = run.mode
        packages = run.environment.packages
        registered = BY_NAME.get(mode)
        if registered is not None and registered.framework == "torch_xla":
            xla = f"torch_xla {packages.get('torch_xla')}'s bundled XLA (built into torch_xla's _XLAC extension)"
        elif registered is not None and registered.xla:  # JAX's own programs and torchax's, compiled by jaxlib
            xla = f"jaxlib {packages.get('jaxlib')}"
        else:
            xla = None
        out["run"] = {"mode": mode, "xla": xla}
        out["same_compiler"] = xla == replay["xla"]
    return out


def _against_run(run: RunRecord | None, record: dict) -> dict | None:
    """The run's timed step against the replayed program: the framework's overhead, measured, with its interval."""
    if run is None or not run.has("timing"):
        return None
    replayed = record["timing"]["step_times_s"]
    overhead = median_difference(run.timing.step_times_s, replayed)
    if overhead is None:  # no step on one side
        return None
    run_median = run.timing.median_s or overhead.estimate + record["timing"]["median_s"]
    return {"run_median_s": run_median, "replay_median_s": record["timing"]["median_s"],
            "overhead_s": overhead.estimate, "overhead_ci_s": overhead.as_list(),
            **overhead_anomaly(overhead.estimate, unsteady_sides(run.timing.noisy, run.timing.host_scheduling,
                                                                 record["timing"].get("noisy"))),
            "replay_over_run": record["timing"]["median_s"] / run_median if run_median else None,
            "method": "median(run step) - median(replayed step), 95% percentile bootstrap over both samples"}


def _framework_device(run_dir: Path, record: dict) -> dict:
    """The run's own device time per profiled step (from its profile), beside the replay's of the same graph."""
    try:
        summary = summarize_run(run_dir)
    except HloscopeError as error:  # an unreadable run or profile: a note, never a failed replay
        return {"note": f"the run's profile was not read: {str(error).splitlines()[0][:200]}"}
    if summary.device_busy_s is None:
        return {"note": "the run has no profile with device time (run it with --profile)"}
    out = {"device_busy_s": summary.device_busy_s, "profiled_step_s": summary.profiled_step_s,
           "device_idle_s": summary.device_idle_s, "replay_median_s": record["timing"]["median_s"],
           "source": "the run's kept profiled steps (medians), as explain reads them"}
    out["replay_minus_framework_device_s"] = record["timing"]["median_s"] - summary.device_busy_s
    return out


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


def output_path(run_dir: Path | None, source: Path) -> Path:
    """replay.json in the run directory (<file>.replay.json beside a module file); never an existing file."""
    if run_dir is not None:
        folder, stem = run_dir, "replay"
    else:
        folder, stem = source.parent, f"{source.name}.replay"
    candidate = folder / f"{stem}.json"
    n = 2
    while os.path.lexists(candidate):  # a symbolic link there, even one leading nowhere, is never written through
        candidate = folder / f"{stem}-{n}.json"
        n += 1
    return candidate


def _write(record: dict, run_dir: Path | None, source: Path) -> Path | None:
    target = output_path(run_dir, source)
    try:
        # reserve the name: never overwrite, never follow a link (the record then replaces this empty file of ours)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        os.close(fd)
        write_json_atomic(target, record)
    except OSError as error:
        record["warnings"].append(f"replay.json not written: {error}")
        return None
    return target


