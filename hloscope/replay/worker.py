"""The child process of `hloscope replay`: compiles and executes the accepted modules with jaxlib's XLA, so that a
CHECK failure, a crash or a hang inside XLA ends only this process (hloscope.replay.runner turns it into one line).

Reads one JSON request on stdin (runner.replay builds it, after hloscope.replay.accept has checked every module and
the saved inputs); writes lines starting with MARK on stdout: `{"stage": "compile", "index": i}` before each module's
compile, `{"stage": "execute"}` before the steps, then `{"result": {...}}` (the record's parts measured here) or
`{"error": {...}}` (an hloscope error: class, exit code, message, and the file with line:column for bad input).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from hloscope.backends.timing import StepLog, noise_warning, run_loop, step_statistics
from hloscope.errors import HloscopeError, InputError
from hloscope.replay.program import NotReplayable, UnreadableModule, compile_program, loss_index, make_inputs
from hloscope.replay.trajectory import check_trajectory

MARK = "@@hloscope-replay "
# Test hook (docs/replay.md): HLOSCOPE_TEST_REPLAY_CHILD=abort|hang makes the child abort (SIGABRT, as an XLA CHECK
# failure does) or hang as it starts on its first module, before it imports jax.
TEST_CHILD_ENV = "HLOSCOPE_TEST_REPLAY_CHILD"
_FUSION = re.compile(r"=\s*\S+\s+fusion\(")


def _say(message: dict) -> None:
    sys.stdout.write(MARK + json.dumps(message, default=str) + "\n")
    sys.stdout.flush()


def _test_hook() -> None:
    how = os.environ.get(TEST_CHILD_ENV)
    if how == "abort":
        sys.stderr.write("F0000 00:00:00.000000 1 shape_util.cc:1 Check failed: test hook\n")
        sys.stderr.flush()
        os.abort()
    if how == "hang":
        time.sleep(3600)


def execute(request: dict) -> dict:
    """Compile every module, check the run's trajectory, time the step; the record's measured parts."""
    if os.environ.get(TEST_CHILD_ENV) and request["modules"]:
        _say({"stage": "compile", "index": 0})
        _test_hook()
    from hloscope.replay.runner import select_device  # cycle: runner imports this module

    dev = select_device(request["device"])
    batch, steps, warmup = request["batch"], request["steps"], request["warmup"]
    out: dict[str, Any] = {
        "device": {"platform": dev.platform, "kind": dev.device_kind, "count": len(dev.client.devices())},
        "platform_version": getattr(dev.client, "platform_version", None), "modules": [], "skipped": [],
        "warnings": []}
    programs = _compile_all(request["modules"], dev, out["skipped"])
    if not programs:
        return out
    _say({"stage": "execute"})
    saved = request.get("saved_inputs")
    if saved is not None and len(programs) == 1:  # jax, torchax: the run's own start, checked
        out["trajectory"] = check_trajectory(programs[0], Path(saved["dir"]), saved["path"], saved["precision"], dev)
    replayer = _Replayer(programs, dev, batch, request["labels"], request["seed"])
    log = StepLog()
    run_loop(replayer.step, _wait, replayer.loss_of, steps, warmup, log, on_step=replayer.feed_back)
    stats = step_statistics(log.step_times_s, batch or 1, log.window_s)
    out["timing"] = {"step_times_s": log.step_times_s, "warmup_times_s": log.warmup_times_s,
                     "first_step_s": log.first_step_s, **stats}
    if batch is None:
        out["timing"].pop("throughput_img_s", None)
    noise = noise_warning(stats)
    out["timing"]["noisy"] = noise is not None
    if noise:
        out["warnings"].append(noise)
    losses = log.losses if replayer.loss_at is not None else []
    out["loss"] = {"first": losses[0] if losses else None, "last": losses[-1] if losses else None,
                   "finite": all(x == x and abs(x) != float("inf") for x in losses) if losses else None}
    per_module = replayer.per_module_medians(min(steps, 20)) if len(programs) > 1 else None
    for i, program in enumerate(programs):
        out["modules"].append(_module_entry(program, per_module[i] if per_module else None))
    if request.get("profile_dir"):
        out["profile"] = _profile(request["profile_dir"], replayer, request["profile_steps"])
    return out


def _compile_all(modules: list, dev, skipped: list[dict[str, Any]]) -> list:
    """Every module that compiles, in order; each that cannot be replayed is added to `skipped` with why."""
    programs = []
    for index, (name, file, fmt) in enumerate(modules):
        _say({"stage": "compile", "index": index})
        try:
            programs.append(compile_program(file, dev, name=name, fmt=fmt))
        except NotReplayable as why:
            line = str(why) if str(why).startswith(name) else f"{name}: {why}"
            skip: dict[str, Any] = {"module": name, "file": str(file), "reason": line}
            if isinstance(why, UnreadableModule):
                error = why.input_error
                skip["input_error"] = {"path": error.path, "message": error.message, "line": error.line,
                                       "col": error.col}
            skipped.append(skip)
    return programs


def _wait(outputs) -> None:
    for outs in outputs:
        for array in outs:
            array.block_until_ready()


class _Replayer:
    """The compiled programs with their inputs: one step runs each program once; between steps, outputs that the
    run fed back (the state) become the next step's inputs, outside the timer."""

    def __init__(self, programs: list, dev, batch: int | None, labels: int, seed: int):
        self.programs, self.dev, self.batch, self.labels, self.seed = programs, dev, batch, labels, seed
        self.inputs = [make_inputs(p, dev, batch, labels, seed) for p in programs]
        self.hosts: list[list[Any]] = [[None] * len(args) for args in self.inputs]  # donated, not fed back
        self.outputs: list[Any] = [None] * len(programs)  # each program's last outputs (jax arrays)
        # the loss is the first program's scalar loss output; without one, nothing is recorded (run_loop asks)
        self.loss_at = next(((k, at) for k, program in enumerate(programs)
                             if (at := loss_index(program)) is not None), None)

    def step(self, index: int) -> list[Any]:
        self.outputs = [p.executable.execute(args) for p, args in zip(self.programs, self.inputs)]
        return self.outputs

    def loss_of(self, outputs: list[Any]) -> float:
        return float(outputs[self.loss_at[0]][self.loss_at[1]]) if self.loss_at is not None else math.nan

    def feed_back(self, phase: str = "", index: int = 0) -> None:  # run_loop's on_step hook, outside the timer
        for k, (program, args, outs) in enumerate(zip(self.programs, self.inputs, self.outputs)):
            for param, output in program.feeds.items():
                args[param] = outs[output]
            for j, array in enumerate(args):
                if array.is_deleted():  # donated but not fed back: a fresh copy, as the framework keeps its own
                    if self.hosts[k][j] is None:
                        self.hosts[k][j] = make_inputs(_only(program, j), self.dev, self.batch, self.labels,
                                                       self.seed + j)[0]
                    args[j] = _copy(self.hosts[k][j], self.dev)

    def per_module_medians(self, steps: int) -> list[float]:
        """Each module's own median, timed one module at a time (a sync after each), for the table per graph."""
        times: list[list[float]] = [[] for _ in self.programs]
        for _ in range(steps):
            outputs = []
            for k, (program, args) in enumerate(zip(self.programs, self.inputs)):
                start = time.perf_counter()
                outs = program.executable.execute(args)
                _wait([outs])
                times[k].append(time.perf_counter() - start)
                outputs.append(outs)
            self.outputs = outputs
            self.feed_back()
        return [statistics.median(t) for t in times]


def _only(program, j: int):
    return replace(program, parameters=[program.parameters[j]])


def _copy(array, device):
    import jax
    import numpy as np

    return jax.device_put(np.asarray(array), device)


def _module_entry(program, median_s: float | None) -> dict:
    entry = {"module": program.name, "file": program.file, "format": program.fmt,
             "parameters": len(program.parameters), "outputs": len(program.outputs),
             "fed_back": len(program.feeds), "fed_back_from": program.feeds_from, "donated": program.donors,
             "compile_s": program.compile_s, "replay_fusions": len(_FUSION.findall(program.compiled_hlo)),
             "replay_instructions": instructions(program.compiled_hlo)}
    if median_s is not None:
        entry["median_s"] = median_s
    return entry


def instructions(hlo_text: str) -> int:
    return sum(1 for line in hlo_text.splitlines() if re.match(r"\s+(ROOT\s+)?%?[\w.-]+\s*=", line))


def fusions(hlo_text: str) -> int:
    return len(_FUSION.findall(hlo_text))


def _profile(logdir: str, replayer: _Replayer, steps: int) -> dict:
    """`steps` more steps under jax.profiler into `logdir`, a fresh folder the parent made (never a symlink)."""
    import jax

    jax.profiler.start_trace(logdir)
    try:
        for index in range(steps):
            with jax.profiler.StepTraceAnnotation("train_step", step_num=index):
                _wait(replayer.step(index))
            replayer.feed_back()
    finally:
        jax.profiler.stop_trace()
    return {"steps": steps, "warmup_steps": 1, "logdir": logdir}


def main() -> int:
    try:
        request = json.loads(sys.stdin.read(16 << 20))
        _say({"result": execute(request)})
    except InputError as error:
        _say({"error": {"class": type(error).__name__, "exit_code": error.exit_code, "message": error.message,
                        "path": error.path, "line": error.line, "col": error.col}})
    except HloscopeError as error:
        _say({"error": {"class": type(error).__name__, "exit_code": error.exit_code, "message": str(error)}})
    # The child's boundary: XLA's runtime errors (out of memory, a failed execution), any type, one line in the parent
    except Exception as error:  # noqa: BLE001
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        _say({"error": {"class": "XlaFailure", "exit_code": 2,
                        "message": f"{type(error).__name__}: {(lines[0] if lines else '')[:300]}"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
