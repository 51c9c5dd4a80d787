"""Replay a run's train-step program(s), or one HLO/StableHLO file, with jaxlib's XLA, timed like `hloscope run`.

The step is every replayable train-step module of the run, executed in the order the framework runs them (torch_xla's
lazy step: one graph; torch_xla+compile: dynamo's graphs by module id, i.e. compile order, which is their order in the
step; JAX: its one jit), with outputs that alias inputs fed back as the next step's inputs. The timer and statistics
are `hloscope run`'s (hloscope.backends.timing): the clock stops after the outputs are ready on the device.
"""

from __future__ import annotations

import math
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hloscope.errors import InputError, MissingDependency, UsageError
from hloscope.modes import BY_NAME
from hloscope.replay.program import NotReplayable, Program, UnreadableModule, compile_program, loss_index, make_inputs
from hloscope.replay.trajectory import check_trajectory, saved_inputs

SCHEMA_VERSION = 1
REPLAY_FILE = "replay.json"
REPLAY_NAME = re.compile(r"^replay(?:-(\d+))?\.json$")
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


def modules_of(path: Path) -> tuple[dict | None, Path | None, list[tuple[str, Path, str]]]:
    """(run record or None, run directory or None, [(module name, file, format)] in execution order)."""
    from hloscope.replay.program import module_format
    from hloscope.runs.rundir import artifact_path, load_run

    if path.is_dir() or path.name == "run.json":
        run = load_run(path)
        run_dir = path if path.is_dir() else path.parent
        train = [a for a in run.get("artifacts", []) if a.get("train_step")]
        stablehlo = [a for a in train if a.get("kind") == "stablehlo"]
        before = [a for a in train if a.get("kind") == "hlo" and a.get("stage") == "before_optimizations"]
        chosen = stablehlo or sorted(before, key=lambda a: (a.get("module_id") or 0, a.get("path")))
        if not chosen:
            raise UsageError(f"{run_dir}: no train-step XLA program in this run: replay needs a run of an XLA mode "
                             "made with --dump-hlo")
        return run, run_dir, [(a.get("module") or Path(a["path"]).name, artifact_path(run, a),
                               "mlir" if a.get("kind") == "stablehlo" else "hlo") for a in chosen]
    if not path.exists():
        raise InputError(path, "no such file or directory")
    return None, None, [(path.name, path, module_format(path))]


def replay(path: str | os.PathLike, device: str = "cpu", steps: int = 50, warmup: int = 10, profile: bool = False,
           profile_steps: int = 6, seed: int = 0, on_skip=lambda line: None) -> tuple[dict, Path | None]:
    """Replay and record; returns (record, path of the replay.json written, or None when it could not be written)."""
    from hloscope.backends.timing import StepLog, noise_warning, run_loop, step_statistics

    if steps < 1 or warmup < 1:
        raise UsageError("--steps and --warmup must be at least 1")
    path = Path(path)
    run, run_dir, wanted = modules_of(path)
    dev = select_device(device)
    config = (run or {}).get("config") or {}
    batch = config.get("batch_size") if isinstance(config.get("batch_size"), int) else None
    labels = (config.get("model_config") or {}).get("num_labels") if isinstance(config.get("model_config"),
                                                                                 dict) else None
    record: dict = {
        "schema_version": SCHEMA_VERSION, "kind": "replay", "status": "running",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": {"path": str(path), "run_id": (run or {}).get("run_id"), "mode": (run or {}).get("mode"),
                   "batch_size": batch, "num_labels": labels},
        "config": {"device": device, "steps": steps, "warmup": warmup, "seed": seed, "profile": profile},
        "device": {"platform": dev.platform, "kind": dev.device_kind, "count": len(dev.client.devices())},
        "compiler": _compiler(run, dev), "modules": [], "skipped": [], "warnings": [],
        "inputs": ("images ~ N(0,1) of the run's batch shape, weights and optimizer state ~ N(0,0.02), float "
                   "scalars 0.01, integer labels uniform in [0, num_labels), step counters 0"),
    }
    programs: list[Program] = []
    unreadable: list[InputError] = []
    for name, file, fmt in wanted:
        try:
            programs.append(compile_program(file, dev, name=name, fmt=fmt))
        except NotReplayable as why:
            line = str(why) if str(why).startswith(name) else f"{name}: {why}"
            record["skipped"].append({"module": name, "file": str(file), "reason": line})
            if isinstance(why, UnreadableModule):
                unreadable.append(why.input_error)
            else:
                on_skip(f"not replayed: {line}")
    if unreadable and len(unreadable) == len(wanted):  # nothing to replay, and only bad input to blame: exit 2
        raise unreadable[0]
    for error in unreadable:  # the other modules are replayed; the damaged file is named, with its line:column
        on_skip(f"not replayed: {error}")
    if not programs:
        record["status"] = "not_replayable"
        return record, _write(record, run_dir, path)
    saved = saved_inputs(run)
    if saved is not None and run is not None and len(programs) == 1:  # jax, torchax: the run's own start, checked
        record["trajectory"] = check_trajectory(programs[0], run, saved, dev)
    inputs = [make_inputs(p, dev, batch, labels, seed) for p in programs]
    hosts = [[None] * len(args) for args in inputs]  # host copies of donated inputs that are not fed back
    state: dict[str, list[Any]] = {"outputs": [None] * len(programs)}  # each program's last outputs (jax arrays)

    def step(index: int):
        state["outputs"] = [p.executable.execute(args) for p, args in zip(programs, inputs)]
        return state["outputs"]

    def wait(outputs) -> None:
        for outs in outputs:
            for array in outs:
                array.block_until_ready()

    def thread(phase: str = "", index: int = 0) -> None:  # outside the timer: run_loop's on_step hook
        for k, (program, args, outs) in enumerate(zip(programs, inputs, state["outputs"])):
            for param, out in program.feeds.items():
                args[param] = outs[out]
            for j, array in enumerate(args):
                if array.is_deleted():  # donated but not fed back: a fresh copy, as the framework keeps its own
                    if hosts[k][j] is None:
                        hosts[k][j] = make_inputs(_only(program, j), dev, batch, labels, seed + j)[0]
                    args[j] = _copy(hosts[k][j], dev)

    # the loss is the first program's scalar loss output; without one, nothing is recorded (run_loop still asks)
    loss_at = next(((k, index) for k, program in enumerate(programs)
                    if (index := loss_index(program)) is not None), None)

    def loss_of(outputs: list[Any]) -> float:
        return float(outputs[loss_at[0]][loss_at[1]]) if loss_at is not None else math.nan

    log = StepLog()
    run_loop(step, wait, loss_of, steps, warmup, log, on_step=thread)
    stats = step_statistics(log.step_times_s, batch or 1, log.window_s)
    record["timing"] = {"step_times_s": log.step_times_s, "warmup_times_s": log.warmup_times_s,
                        "first_step_s": log.first_step_s, **stats}
    if batch is None:
        record["timing"].pop("throughput_img_s", None)
    noise = noise_warning(stats)
    if noise:
        record["warnings"].append(noise)
    losses = log.losses if loss_at is not None else []
    record["loss"] = {"first": losses[0] if losses else None, "last": losses[-1] if losses else None,
                      "finite": all(x == x and abs(x) != float("inf") for x in losses) if losses else None}
    per_module = _per_module(programs, inputs, state, wait, thread, min(steps, 20)) if len(programs) > 1 else None
    for i, program in enumerate(programs):
        record["modules"].append(_module_entry(program, run, run_dir, per_module[i] if per_module else None))
    if profile:
        record["profile"] = _profile(run_dir or path.parent, step, wait, thread, profile_steps, record)
    record["comparison"] = _against_run(run, record)
    if run is not None and run_dir is not None:
        record["framework_device"] = _framework_device(run_dir, record)
    record["status"] = "partial" if record["skipped"] else "ok"
    return record, _write(record, run_dir, path)


def _only(program: Program, j: int) -> Program:
    from dataclasses import replace

    return replace(program, parameters=[program.parameters[j]])


def _copy(array, device):
    import jax
    import numpy as np

    return jax.device_put(np.asarray(array), device)


def _per_module(programs, inputs, state, wait, thread, steps: int) -> list[float]:
    """Each module's own median, timed one module at a time (a sync after each), for the table per graph."""
    from statistics import median

    times: list[list[float]] = [[] for _ in programs]
    for _ in range(steps):
        outputs = []
        for k, (program, args) in enumerate(zip(programs, inputs)):
            start = time.perf_counter()
            outs = program.executable.execute(args)
            wait([outs])
            times[k].append(time.perf_counter() - start)
            outputs.append(outs)
        state["outputs"] = outputs
        thread()
    return [median(t) for t in times]


_FUSION = re.compile(r"=\s*\S+\s+fusion\(")


def _module_entry(program: Program, run: dict | None, run_dir: Path | None, median_s: float | None) -> dict:
    entry = {"module": program.name, "file": program.file, "format": program.fmt,
             "parameters": len(program.parameters), "outputs": len(program.outputs),
             "fed_back": len(program.feeds), "fed_back_from": program.feeds_from, "donated": program.donors,
             "compile_s": program.compile_s, "replay_fusions": len(_FUSION.findall(program.compiled_hlo)),
             "replay_instructions": _instructions(program.compiled_hlo)}
    if median_s is not None:
        entry["median_s"] = median_s
    after = _run_optimized(run, run_dir, program.name)
    if after is not None:
        entry["run_fusions"] = len(_FUSION.findall(after))
        entry["run_instructions"] = _instructions(after)
    return entry


def _instructions(hlo_text: str) -> int:
    return sum(1 for line in hlo_text.splitlines() if re.match(r"\s+(ROOT\s+)?%?[\w.-]+\s*=", line))


def _run_optimized(run: dict | None, run_dir: Path | None, module: str) -> str | None:
    """The run's own optimized HLO of `module` (what the framework's XLA made of the same graph)."""
    if run is None or run_dir is None:
        return None
    for artifact in run.get("artifacts", []):
        if (artifact.get("kind") == "hlo" and artifact.get("stage") == "after_optimizations"
                and artifact.get("module") == module):
            try:
                return (run_dir / artifact["path"]).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return None
    return None


def _compiler(run: dict | None, device) -> dict:
    """Which XLA compiled what: the replay's (jaxlib's) and the run's (the framework's own, or bundled)."""
    from importlib import metadata

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    replay = {"xla": f"jaxlib {version('jaxlib')}", "jax": version("jax"), "jaxlib": version("jaxlib"),
              "platform_version": getattr(device.client, "platform_version", None)}
    out: dict[str, object] = {"replay": replay}
    if run is not None:
        mode = str(run.get("mode") or "")
        packages = ((run.get("environment") or {}).get("packages") or {})
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


def _against_run(run: dict | None, record: dict) -> dict | None:
    """The run's timed step against the replayed program: the framework's overhead, measured, with its interval."""
    from hloscope.replay.explain import overhead_anomaly
    from hloscope.significance import median_difference

    timing = (run or {}).get("timing") or {}
    times = timing.get("step_times_s")
    replayed = record["timing"]["step_times_s"]
    if not isinstance(times, list):
        return None
    overhead = median_difference(times, replayed)
    if overhead is None:  # no step on one side
        return None
    run_median = timing.get("median_s") or overhead.estimate + record["timing"]["median_s"]
    return {"run_median_s": run_median, "replay_median_s": record["timing"]["median_s"],
            "overhead_s": overhead.estimate, "overhead_ci_s": overhead.as_list(), **overhead_anomaly(overhead.estimate),
            "replay_over_run": record["timing"]["median_s"] / run_median if run_median else None,
            "method": "median(run step) - median(replayed step), 95% percentile bootstrap over both samples"}


def _framework_device(run_dir: Path, record: dict) -> dict:
    """The run's own device time per profiled step (from its profile), beside the replay's of the same graph."""
    try:
        from hloscope.explain.collect import summarize_run

        summary = summarize_run(run_dir)
    except Exception as error:  # any unreadable part: a note, never a failed replay
        return {"note": f"the run's profile was not read: {str(error).splitlines()[0][:200]}"}
    if summary.device_busy_s is None:
        return {"note": "the run has no profile with device time (run it with --profile)"}
    out = {"device_busy_s": summary.device_busy_s, "profiled_step_s": summary.profiled_step_s,
           "device_idle_s": summary.device_idle_s, "replay_median_s": record["timing"]["median_s"],
           "source": "the run's kept profiled steps (medians), as explain reads them"}
    out["replay_minus_framework_device_s"] = record["timing"]["median_s"] - summary.device_busy_s
    return out


def _profile(base: Path, step, wait, thread, steps: int, record: dict) -> dict:
    import jax

    logdir = base / PROFILE_DIR
    before = set(logdir.rglob("*.xplane.pb")) if logdir.exists() else set()
    jax.profiler.start_trace(str(logdir))
    try:
        for index in range(steps):
            with jax.profiler.StepTraceAnnotation("train_step", step_num=index):
                wait(step(index))
            thread()
    finally:
        jax.profiler.stop_trace()
    new = sorted(set(logdir.rglob("*.xplane.pb")) - before)
    return {"steps": steps, "warmup_steps": 1, "logdir": str(logdir), "xplane": [str(p) for p in new]}


def output_path(run_dir: Path | None, source: Path) -> Path:
    """replay.json in the run directory (<file>.replay.json beside a module file); never an existing file."""
    if run_dir is not None:
        folder, stem = run_dir, "replay"
    else:
        folder, stem = source.parent, f"{source.name}.replay"
    candidate = folder / f"{stem}.json"
    n = 2
    while candidate.exists():
        candidate = folder / f"{stem}-{n}.json"
        n += 1
    return candidate


def _write(record: dict, run_dir: Path | None, source: Path) -> Path | None:
    from hloscope.runs.rundir import write_json_atomic

    target = output_path(run_dir, source)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # reserve the name: never overwrite
        os.close(fd)
        write_json_atomic(target, record)
    except OSError as error:
        record["warnings"].append(f"replay.json not written: {error}")
        return None
    return target


def latest_replay(run_dir: str | os.PathLike) -> Path | None:
    """The newest replay record of a run directory (replay.json, replay-2.json, ...: the highest number)."""
    best, number = None, -1
    try:
        names = os.listdir(run_dir)
    except OSError:
        return None
    for name in names:
        match = REPLAY_NAME.match(name)
        if match:
            n = int(match.group(1) or 1)
            if n > number:
                best, number = Path(run_dir) / name, n
    return best
