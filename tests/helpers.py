"""Helpers shared by the test modules (imported as `helpers`: pyproject's pytest `pythonpath`), so that no test module
imports another: where the real fixtures are, XLA's and hloscope's views of an HLO module, running the CLI as a user
does (a subprocess, stderr checked), a run directory made from real files, small inputs the tests build (names that
look like markup, a one-dot HLO module, a Kineto trace of chosen kernels), and headless chromium."""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

from hloscope.cli import main
from hloscope.hlo.xla import run_isolated
from hloscope.runs import rundir
from hloscope.runs.records import decode_comparison, decode_run

# ------------------------------------------------------------------------------------------------------ where files are

REPO = Path(__file__).resolve().parent.parent
# CI clones the repository with shared/ beside it; a checkout under /work/main has it at /work/shared.
FIXTURES = Path(os.environ.get("HLOSCOPE_FIXTURES", REPO.parent / "shared" / "fixtures"))
# Real files fetched from public repositories for this project's tests (tests/data/fetched/SOURCES.md): in git,
# unlike ../shared/fixtures, which is read-only input.
FETCHED = REPO / "tests" / "data" / "fetched"
# Screenshots and other artifacts tests leave for a person to look at.
ARTIFACTS = REPO / "test-artifacts"
# Set by .ci/run: there a missing real fixture fails its test instead of skipping it (tests/conftest.py checks the
# folder once at start-up; `fixture` checks each file).
REQUIRE_FIXTURES_ENV = "HLOSCOPE_REQUIRE_FIXTURES"


def fixtures_missing(reason: str):
    """Skip the test for want of a real fixture, or fail it where the fixtures are required (CI)."""
    if os.environ.get(REQUIRE_FIXTURES_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_FIXTURES_ENV}=1)")
    pytest.skip(reason)


def fixture(relative: str) -> Path:
    """A real file or folder by its fixtures-relative name (`gpu_aot/...`): tests/data/fetched's copy, else the shared
    fixtures'; a missing one skips the test (fails it in CI)."""
    for base in (FETCHED, FIXTURES):
        if (base / relative).exists():
            return base / relative
    fixtures_missing(f"real fixture {relative} not found under {FETCHED} or {FIXTURES}")
    raise AssertionError("unreachable")  # pytest.skip/fail raise


# The settings of conftest's every_mode_comparison (every mode, one process each): steps timed and profiled, warm-up
# steps and batch. Six profiled steps are one above XProf's threshold for dropping the first and last step
# (test_tensorboard_xprof_tools), and the loss still falls over eight steps of four images.
EVERY_MODE_STEPS, EVERY_MODE_WARMUP, EVERY_MODE_PROFILE_STEPS, EVERY_MODE_BATCH = 8, 2, 6, 4
# Its folder in the session's shared temporary folder (conftest's made_once; tests/make_shared.py).
EVERY_MODE = "every_mode"


def made_once_in(shared: Path, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `shared/name` that `make(folder)` filled, made by the first process that asks for it under a file lock
    in `shared` (the test session's folder above every pytest-xdist worker's own); the others wait for it, as xdist's
    documentation does for session fixtures. A `make` that failed leaves no mark, so the next process tries again (and
    fails the same way)."""
    folder, done = shared / name, shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


def make_every_mode_comparison(root: Path) -> None:
    """conftest's every_mode_comparison: `hloscope compare` of every mode with --dump-hlo --profile into `root`."""
    result = hloscope("compare", "--repeats", "1", "--model", "vit-tiny", "--batch-size", str(EVERY_MODE_BATCH),
                      "--steps", str(EVERY_MODE_STEPS), "--warmup", str(EVERY_MODE_WARMUP), "--profile-steps",
                      str(EVERY_MODE_PROFILE_STEPS), "--dump-hlo", "--profile", "--no-audit", "--timeout", "900",
                      "--out", root, timeout=2400, memory_limit=None)  # fmt: skip
    assert result.code == 0, result.stderr[-3000:]


# The settings of conftest's loader_run (one profiled run per mode and kind of data, the default six profiled steps):
# timed steps, warm-up steps and batch.
LOADER_RUN_STEPS, LOADER_RUN_WARMUP, LOADER_RUN_BATCH = 5, 2, 4

# The settings of conftest's device_run (one run per mode and device count, with HLO): timed, warm-up and profiled
# steps, and the global batch (eight steps: the loss falls over them). Only the modes in DEVICE_RUN_PROFILED are
# profiled: the DDP test reads each rank's Kineto trace, and a profile makes the other modes' runs much slower.
DEVICE_RUN_STEPS, DEVICE_RUN_WARMUP, DEVICE_RUN_PROFILE_STEPS, DEVICE_RUN_BATCH = 8, 3, 3, 8
DEVICE_RUN_PROFILED = ("pytorch",)
# What device_run removes from its environment: the device counts of this test run (the run sets its own) and the
# variables of a torch.distributed job this test run may be in (each DDP run starts its own ranks).
DEVICE_RUN_CLEARED_ENV: dict[str, str | None] = dict.fromkeys(
    ("XLA_FLAGS", "CPU_NUM_DEVICES", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
     "OMP_NUM_THREADS"))


# ---------------------------------------------------------------------------- HLO modules as XLA's parser and ours see them

# XLA opcode enum names whose text form is not the plain kebab-case of the name.
_OPCODE_TEXT = {
    "Exp": "exponential", "Expm1": "exponential-minus-one", "Log1p": "log-plus-one", "Cos": "cosine", "Sin": "sine",
    "Clz": "count-leading-zeros", "PopulationCount": "popcnt", "OptimizationBarrier": "opt-barrier", "TopK": "topk",
}


def xla_opcode(opcode) -> str:
    name = opcode.name[1:]
    return _OPCODE_TEXT.get(name) or re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def hlo_fixture_files() -> list[Path]:
    """Every HLO text file among the shared fixtures: *.hlo, and *.txt files that hold an HloModule."""
    if not FIXTURES.is_dir():
        return []
    files = []
    for path in sorted(FIXTURES.rglob("*")):
        if path.suffix in (".hlo", ".txt") and path.is_file() and path.name != "SOURCES.md":
            with open(path, "rb") as f:
                if b"HloModule" in f.read(4096):
                    files.append(path)
    return files


# The line between the modules of an XLA test file run with --split-input-file: `// -----`, exactly five dashes (MLIR's
# splitter and hlo-opt split there; a longer run of dashes is a decorative comment inside one module).
SPLIT_MARKER = re.compile(r"(?m)^[ \t]*// -----(?!-).*$")


def split_input_file(text: str) -> list[str]:
    """The chunks of a test file as `--split-input-file` gives them to XLA's parser, one module each (a chunk that
    holds no computation, only comments, is no module)."""
    return [chunk for chunk in SPLIT_MARKER.split(text) if re.search(r"(?m)^[ \t]*[^/\s].*\{[ \t]*$", chunk)]


def split_for_xla(text: str) -> list[str]:
    """XLA test files hold several modules separated by `// -----`; XLA parses one at a time."""
    return [chunk for chunk in SPLIT_MARKER.split(text) if "HloModule" in chunk]


def paired_with_xla(modules: list, chunks: list[str]) -> list[tuple]:
    """hloscope's modules beside XLA's parse of the same chunks (one child process): one module per chunk, each valid
    and named as XLA names it. [(module, XLA's {computation: [(name, opcode, operand names)]})]."""
    views = run_isolated(chunks, "view")
    assert len(modules) == len(chunks)
    pairs = []
    for module, view in zip(modules, views):
        assert "view" in view, view
        module.validate()
        assert module.name == view["name"]
        pairs.append((module, view["view"]))
    return pairs


def xla_view(module) -> dict:
    return {
        c.name: sorted((i.name, xla_opcode(i.opcode), tuple(o.name for o in i.operands())) for i in c.instructions())
        for c in module.computations()
    }


def our_view(module) -> dict:
    return {c.name: sorted((i.name, i.opcode, tuple(i.operand_names)) for i in c.instructions) for c in module.computations}


# ---------------------------------------------------------------- the CLI as a user runs it: one subprocess, stderr checked

BAD = Path(__file__).parent / "data" / "bad"

# Real files the broken inputs are cut from (../shared/fixtures, SOURCES.md).
HLO_FIXTURE = "openxla_xla/gpu_tests/kernel_reuse.hlo"
GOOD_DUMP = "gpu_aot/mlp_sm90_triton"  # a real XLA GPU dump directory (the other side of `diff`)
KINETO_FIXTURE = "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
XPLANE_FIXTURE = "tracelens/test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb"
STABLEHLO_FIXTURE = "pytorch_xla/stablehlo/resnet18_qdq_stablehlo.txt"
TORCH_XLA_IR_FIXTURE = "pytorch_xla/keep_rolled_script/save1.0"

# Address-space cap for each hloscope subprocess: jaxlib and XProf map a few GB of virtual memory at import, the
# analyses of these small inputs need well under 1 GB of it.
MEMORY_LIMIT_BYTES = 6 << 30

needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason=f"real fixtures not found at {FIXTURES}")


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


# The child sets its own address-space limit before importing hloscope: no preexec_fn (Python code run between fork
# and exec, unsafe once this test process has imported JAX and started its threads).
_LIMITED_MAIN = ("import resource, runpy, sys; limit = int(sys.argv.pop(1)); "
                 "resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); sys.argv[0] = 'hloscope'; "
                 "runpy.run_module('hloscope', run_name='__main__', alter_sys=True)")


def hloscope(*args: str | Path, timeout: float = 300, memory_limit: int | None = MEMORY_LIMIT_BYTES,
             env: dict[str, str | None] | None = None) -> Result:
    """Run `python -m hloscope ARGS` in its own process group; on a timeout the whole group (TensorBoard too) is killed.
    `env` is laid over this process's environment (a None value removes the variable); `memory_limit=None` leaves the
    address space uncapped, for runs of the frameworks themselves (torch and torch_xla reserve more than the cap)."""
    if memory_limit is None:
        argv: list[str] = [sys.executable, "-m", "hloscope", *map(str, args)]
    else:
        argv = [sys.executable, "-c", _LIMITED_MAIN, str(memory_limit), *map(str, args)]
    return command(*argv, timeout=timeout, env=env, description=f"hloscope {' '.join(map(str, args))}")


def command(*argv: str | Path, timeout: float = 300, env: dict[str, str | None] | None = None,
            description: str | None = None) -> Result:
    """Run ARGV (a script of the project, or hloscope through `hloscope()`) from the repository root in its own process
    group, with PJRT_DEVICE=CPU and `env` laid over the environment (None removes a variable); on a timeout the whole
    group is killed and the test fails."""
    merged = {**os.environ, "PJRT_DEVICE": "CPU", "COLUMNS": "200", **(env or {})}
    merged = {name: value for name, value in merged.items() if value is not None}
    process = subprocess.Popen(list(map(str, argv)), cwd=REPO, env=merged, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"{description or ' '.join(map(str, argv))} did not finish in {timeout} s")
    return Result(process.returncode, stdout, stderr)


def python(*args: str | Path, timeout: float = 300, env: dict[str, str | None] | None = None) -> Result:
    """Run this Python with ARGS (`"-c", code, ...` or a script) through `command`: a child of its own, for what must
    not run in the test process (a framework's import, a process-wide flag, a dump directory set by XLA_FLAGS)."""
    return command(sys.executable, *args, timeout=timeout, env=env)


def cli_invoke(*args: str) -> tuple[int, str, str]:
    """Run `hloscope ARGS...` in this process, through main() as the program does (an error is one line and an exit
    code); returns (exit code, stdout, stderr). conftest's `cli_run`, for a fixture of any scope."""
    import click
    from click.testing import CliRunner

    @click.command(add_help_option=False,
                   context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    @click.pass_context
    def entry(ctx):
        main(list(ctx.args))

    result = CliRunner().invoke(entry, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


# hloscope's CLI and the readers' modules imported once, in a process that then forks one child per command: each child
# is a process of its own as `python -m hloscope` is (its own stdout and stderr files on fds 1 and 2, where native code
# writes too; its environment, address-space cap, process group and exit status), without the imports' CPU (half a
# second; replay's, ml_dtypes among them, several). No framework is imported here, and nothing that starts a thread
# but numpy's OpenBLAS, which stops its threads before a fork and starts them again after.
_PRESTARTED_MAIN = r"""
import json, os, resource, runpy, sys
import hloscope.cli, hloscope.cli.diff, hloscope.cli.explain, hloscope.cli.hlo, hloscope.cli.replay, hloscope.cli.trace
import hloscope.diff.pipeline, hloscope.explain.engine, hloscope.render.job_term, hloscope.render.trace_term
import hloscope.replay.runner, hloscope.trace.job, hloscope.trace.xplane
requests, replies = os.fdopen(int(sys.argv[1])), os.fdopen(int(sys.argv[2]), "w", buffering=1)
for line in requests:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        requests.close()
        replies.close()
        os.setsid()
        for fd, name in ((1, request["stdout"]), (2, request["stderr"])):
            opened = os.open(name, os.O_WRONLY | os.O_TRUNC)
            os.dup2(opened, fd)
            os.close(opened)
        os.environ.clear()
        os.environ.update(request["env"])
        if request["limit"] is not None:
            resource.setrlimit(resource.RLIMIT_AS, (request["limit"], request["limit"]))
        sys.argv = ["hloscope", *request["args"]]
        runpy.run_module("hloscope", run_name="__main__", alter_sys=True)
        sys.exit(0)
    replies.write(f"{pid}\n")
    replies.write(f"{os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}\n")
"""


@dataclass
class _Prestarted:
    process: subprocess.Popen
    requests: int  # the pipes' file descriptors, read and written unbuffered: a select() sees every byte not yet read
    replies: int
    env: dict[str, str]
    pending: bytes = b""

    def reply(self, timeout: float | None = None) -> int | None:
        """The next number the process wrote, None when none came within `timeout` seconds."""
        while b"\n" not in self.pending:
            if not select.select([self.replies], [], [], timeout)[0]:
                return None
            data = os.read(self.replies, 4096)
            if not data:
                raise RuntimeError(f"the prestarted hloscope process ended (exit {self.process.wait()})")
            self.pending += data
        line, self.pending = self.pending.split(b"\n", 1)
        return int(line)


_prestarted: list[_Prestarted] = []
_READ_AT_START = ("PYTHON", "LD_", "MALLOC_", "OMP_", "OPENBLAS_", "MKL_")


def _prestarted_process(env: dict[str, str]) -> _Prestarted:
    if not _prestarted:
        to_server, requests = os.pipe()
        replies, from_server = os.pipe()
        process = subprocess.Popen([sys.executable, "-c", _PRESTARTED_MAIN, str(to_server), str(from_server)],
                                   cwd=REPO, env=env, pass_fds=(to_server, from_server))
        os.close(to_server)
        os.close(from_server)
        _prestarted.append(_Prestarted(process, requests, replies, env))
        atexit.register(os.close, requests)  # the process's loop ends, and the process with it
    return _prestarted[0]


def hloscope_forked(*args: str | Path, timeout: float = 300, memory_limit: int | None = MEMORY_LIMIT_BYTES,
                    env: dict[str, str | None] | None = None) -> Result:
    """`hloscope(ARGS)` for the commands that read files (hlo, trace, diff, replay, explain), in a child forked from a
    process that has imported hloscope's CLI: the same separate process, stdout, stderr and exit status for a fraction
    of the CPU. Settings read when the interpreter or a native library starts (PYTHON*, LD_*, thread counts) that
    differ from that process's start a fresh one instead."""
    merged = {**os.environ, "PJRT_DEVICE": "CPU", "COLUMNS": "200", **(env or {})}
    merged = {name: value for name, value in merged.items() if value is not None}
    server = _prestarted_process(merged)
    startup = {name for name in {*merged, *server.env} if name.startswith(_READ_AT_START)}
    if any(merged.get(name) != server.env.get(name) for name in startup):
        return hloscope(*args, timeout=timeout, memory_limit=memory_limit, env=env)
    with tempfile.TemporaryDirectory() as folder:
        out, err = Path(folder, "stdout"), Path(folder, "stderr")
        out.touch()
        err.touch()
        request = {"args": list(map(str, args)), "env": merged, "limit": memory_limit, "stdout": str(out),
                   "stderr": str(err)}
        os.write(server.requests, (json.dumps(request) + "\n").encode())
        pid = server.reply()
        code = server.reply(timeout)
        if code is None:
            os.killpg(pid, signal.SIGKILL)  # its own group (setsid), with whatever it started
            server.reply()
            pytest.fail(f"hloscope {' '.join(map(str, args))} did not finish in {timeout} s")
        # read as subprocess reads a child's text output: the locale's encoding, universal newlines
        return Result(code, out.read_text(), err.read_text())


def assert_refused(result: Result, path: Path, *, position: bool = False, words: tuple[str, ...] = (),
                   code: int = 2) -> str:
    """Exit code 2 and exactly one line on stderr, `hloscope: error: PATH[:LINE:COL]: ...`; returns that line."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.code == code, f"exit {result.code}, stderr: {result.stderr[-2000:]}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{result.stderr[-2000:]}"
    line = lines[0]
    assert line.startswith("hloscope: error: "), line
    assert str(path) in line, f"{path} not named in: {line}"
    if position:
        assert re.search(re.escape(str(path)) + r":\d+:\d+: \S", line), f"no line:column after the file in: {line}"
    for word in words:
        assert word in line, f"{word!r} not in: {line}"
    return line


def assert_no_traceback(result: Result) -> None:
    """Neither a Python traceback nor rich's MarkupError (a user string read as markup) on stderr."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "MarkupError" not in result.stderr, result.stderr[-3000:]


def cut_in_half(source: Path, target: Path) -> Path:
    """The first half of a real file: what a copy interrupted half-way leaves."""
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


# Every command that reads a run directory, as argv for `hloscope()`: the run to read and a good run beside it (the
# other side of `diff`).
RUN_COMMANDS = {
    "hlo stats": lambda run, good: ["hlo", "stats", "--no-xla-cost", run],
    "trace stats": lambda run, good: ["trace", "stats", run],
    "diff": lambda run, good: ["diff", "--no-xla-cost", good, run],
    "explain": lambda run, good: ["explain", run.parent],
}


def copy_of_run(run: Path, tmp_path: Path) -> Path:
    """A copy of a real run directory under `tmp_path/runs`, for a test that changes it."""
    copy = tmp_path / "runs" / run.name
    shutil.copytree(run, copy)
    return copy


def first_good_hlo() -> Path:
    """A real XLA GPU module after optimizations (the other side of `diff` in the bad-input tests)."""
    return next((FIXTURES / GOOD_DUMP).glob("*gpu_after_optimizations.txt"))


def good_run(root: Path, name: str = "jax") -> Path:
    """A run directory as the harness writes it (rundir.write_run), holding a real XLA GPU dump and a real xplane."""
    run = rundir.create_run_dir(root, run_id=name)
    (run / "hlo").mkdir()
    artifacts = []
    for file in sorted((FIXTURES / GOOD_DUMP).glob("module_0001.*optimizations*.txt")):
        shutil.copy(file, run / "hlo" / file.name)
        if file.name.endswith("optimizations.txt"):
            stage = "before_optimizations" if "before" in file.name else "after_optimizations"
            artifacts.append({"kind": "hlo", "path": f"hlo/{file.name}", "module": "jit_train_step", "stage": stage,
                              "train_step": True})
    profile = run / "plugins" / "profile" / "2026_11_30_05_00_00"
    profile.mkdir(parents=True)
    shutil.copy(FIXTURES / XPLANE_FIXTURE, profile / "host.xplane.pb")
    artifacts.append({"kind": "trace", "path": str((profile / "host.xplane.pb").relative_to(run)), "format": "xplane",
                      "module": None, "stage": "profile", "train_step": True})
    steps = [0.002, 0.0021, 0.0019, 0.002]
    rundir.write_run(run, {"schema_version": 1, "run_id": name, "mode": "jax", "status": "ok", "error": None,
                           "config": {"model": "vit-tiny", "batch_size": 8, "data": "device", "precision": "fp32"},
                           "environment": {"platform": "cpu"},
                           "timing": {"step_times_s": steps, "median_s": 0.002, "mean_s": sum(steps) / 4,
                                      "first_step_s": 1.0},
                           "artifacts": artifacts})
    return run


def comparison_of(root: Path, pytorch_trace: Path) -> Path:
    """A comparison of two modes as `hloscope compare` lays it out: jax (a real XLA dump and xplane) and pytorch (a
    real CPU trace)."""
    directory = root / "compare-1"
    directory.mkdir()
    good_run(directory, "jax")

    run = rundir.create_run_dir(directory, run_id="pytorch")
    (run / "profile").mkdir()
    shutil.copy(pytorch_trace, run / "profile" / pytorch_trace.name)
    rundir.write_run(run, {"schema_version": 1, "run_id": "pytorch", "mode": "pytorch", "status": "ok", "error": None,
                           "config": {"model": "vit-tiny", "batch_size": 8}, "environment": {"platform": "cpu"},
                           "timing": {"step_times_s": [0.002, 0.002], "median_s": 0.002, "mean_s": 0.002,
                                      "first_step_s": 1.0},
                           "artifacts": [{"kind": "trace", "path": f"profile/{pytorch_trace.name}", "format": "kineto",
                                          "module": None, "stage": "profile", "train_step": True}]})
    rundir.write_comparison(directory, {"schema_version": 1, "comparison_id": "compare-1", "config": {},
                                        "modes": [{"mode": "jax", "dir": "jax"}, {"mode": "pytorch", "dir": "pytorch"}]})
    return directory


# ------------------------------------------------------------------------------------- small inputs built by the tests

# Names a user's files may hold that look like rich markup, HTML or Markdown: every renderer prints them as written.
HOSTILE_NAMES = ["[/]", "neg[/]", "[bold]x[/bold]", "convert_element_type[new_dtype=float32 weak_type=True]",
                 "<script>alert(1)</script>", "a|b`c*d_e_", "tail\\"]


def tiny_dot_module(path: Path, op_name: str) -> Path:
    """A tiny valid module whose dot carries `op_name` (metadata) and whose fusion is named after it."""
    quoted = op_name.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text(
        "HloModule jit_f, is_scheduled=true\n\n"
        "ENTRY main {\n"
        "  a = f32[8,8]{1,0} parameter(0)\n"
        "  b = f32[8,8]{1,0} parameter(1)\n"
        f'  ROOT d = f32[8,8]{{1,0}} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, '
        f'metadata={{op_name="{quoted}" source_file="x.py" source_line=1}}\n'
        "}\n")
    return path


def kineto_trace(path: Path, names: list[str], durations: list[float] | None = None, opener=open) -> Path:
    """A Kineto trace of one kernel per name (100 us each unless `durations` says otherwise), each with its launch."""
    durations = durations or [100.0] * len(names)
    events = [{"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 1000 + 500 * i, "dur": dur,
               "args": {"stream": 7, "correlation": i + 1, "device": 0}}
              for i, (name, dur) in enumerate(zip(names, durations))]
    events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 990 + 500 * i,
                "dur": 5, "args": {"correlation": i + 1}} for i in range(len(names))]
    with opener(path, "wt") as handle:
        handle.write(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


# ------------------------------------------------------------------------------------------------------ headless chromium

def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def chromium() -> str:
    """Headless chromium for the browser tests. Missing, it fails the test wherever scripts/install-browser.sh can
    install it (root with apt-get, as in CI) and in CI: only a machine where it cannot install (not root) skips them."""
    binary = chromium_binary()
    if binary is None:
        how = "chromium is not installed: run `bash scripts/install-browser.sh` (as root: it installs Debian's chromium)"
        installable = os.geteuid() == 0 and shutil.which("apt-get") is not None
        if installable or os.environ.get(REQUIRE_FIXTURES_ENV) == "1":
            pytest.fail(how)
        pytest.skip(f"{how}; it cannot install here (not root, or no apt-get)")
    return binary


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


# ------------------------------------------------------------------------------------------------------ run records


def run_record(parts: dict, file: Path = Path("run.json")):
    """The typed run record (hloscope.runs.records.RunRecord) of a run.json holding `parts`; the keys every run.json
    has (schema version, id, mode, status, config) are filled in where `parts` leaves them out."""
    document = {"schema_version": 1, "run_id": "run", "mode": "jax", "status": "ok", "config": {}, **parts}
    return decode_run(file, document)


def comparison_record(parts: dict, file: Path = Path("comparison.json")):
    """The typed comparison record (hloscope.runs.records.ComparisonRecord) of a comparison.json holding `parts`; an
    entry without a run directory gets its mode's name as one."""
    modes = [{"dir": entry.get("mode", "run"), **entry} for entry in parts.get("modes", [])]
    return decode_comparison(file, {"schema_version": 1, **parts, "modes": modes})


# XProf's step database (xplane_to_step_events.cc, ConvertStepEventsToStepDb) drops the first and the last step as
# possibly incomplete only when it holds more than this many steps; with this many or fewer it keeps every step.
XPROF_DROP_INCOMPLETE_STEPS_ABOVE = 5


def xprof_kept_steps(steps) -> list[int]:
    ordered = sorted(steps)
    return ordered[1:-1] if len(ordered) > XPROF_DROP_INCOMPLETE_STEPS_ABOVE else ordered
