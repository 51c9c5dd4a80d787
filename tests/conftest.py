"""Shared fixtures: the real files, the CLI in-process, a real comparison made once per session; and the rule that a
CI run without the real fixtures fails instead of skipping a third of the suite (helpers.py has the plain helpers)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import (
    DEVICE_RUN_BATCH,
    DEVICE_RUN_CLEARED_ENV,
    DEVICE_RUN_PROFILE_STEPS,
    DEVICE_RUN_PROFILED,
    DEVICE_RUN_STEPS,
    DEVICE_RUN_WARMUP,
    EVERY_MODE,
    FIXTURES,
    LOADER_RUN_BATCH,
    LOADER_RUN_STEPS,
    LOADER_RUN_WARMUP,
    REQUIRE_FIXTURES_ENV,
    cli_invoke,
    fixture,
    fixtures_missing,
    hloscope,
    made_once_in,
    make_every_mode_comparison,
)

from hloscope.backends.startup_ledger import COMPILE_CACHE_ENV
from hloscope.targets.cuda_env import find_target_python


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `name` that `make(folder)` filled, made once per test session however many pytest-xdist workers
    ask for it (scripts/test.sh runs one a CPU): helpers.made_once_in, in the session's shared temporary folder."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # one process: the session's fixtures are its own
        folder = tmp_path_factory.mktemp(name)
        make(folder)
        return folder
    return made_once_in(tmp_path_factory.getbasetemp().parent, name, make)  # one per session, above every worker's


# The fixtures that may read the every-mode comparison: conftest's `comparison` is it unless $HLOSCOPE_TEST_COMPARISON
# names another, and a module with its own `comparison` fixture is counted too (it only goes out later).
EVERY_MODE_READERS = ("every_mode_comparison", "comparison")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The order pytest-xdist hands out test files in (scripts/test.sh turns its own reordering off): the files with
    the most tests first, as pytest-xdist orders them, except that the files that may read the every-mode comparison
    come after all others, by when shared_runs_started_early has made it. Each worker computes the same order."""
    files: dict[Path, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    readers = {path for path, tests in files.items()
               if any(name in item.fixturenames for item in tests for name in EVERY_MODE_READERS)}
    ordered = sorted(files, key=lambda path: (path in readers, -len(files[path])))  # stable: ties keep pytest's order
    items[:] = [item for path in ordered for item in files[path]]


@pytest.fixture(scope="session", autouse=True)
def shared_runs_started_early(request, tmp_path_factory):
    """The every-mode comparison takes one CPU for a minute or more, and a worker that needed it while another made it
    waited with its own CPU idle. So, when a collected test surely reads it (every_mode_comparison among its fixtures,
    directly or through real_run), the first worker to start makes it in a background process of its own
    (tests/make_shared.py) while the workers run the files that do not read it (pytest_collection_modifyitems);
    made_once waits for that process as for another worker. Stopped at the session's end if still running."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None or not any(
            "every_mode_comparison" in item.fixturenames for item in request.session.items):
        yield
        return
    shared = tmp_path_factory.getbasetemp().parent
    try:
        os.close(os.open(shared / f"{EVERY_MODE}.started", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:  # another worker started it
        yield
        return
    with (shared / f"{EVERY_MODE}.log").open("w") as log:
        maker = subprocess.Popen([sys.executable, str(Path(__file__).with_name("make_shared.py")), str(shared)],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    yield
    if maker.poll() is None:  # the session ended first (-x, a subset): nothing waits for it any more
        os.killpg(maker.pid, signal.SIGKILL)
        maker.wait()


# Inductor checks which vector ISA the C++ compiler can build for in every process that compiles CPU kernels: three
# Python subprocesses that import torch, about 12 s of CPU in each pytorch+compile run of the suite. TORCHINDUCTOR_
# VEC_ISA_OK=1 trusts the CPU's flags instead; it is set for the suite only where it picks the ISA the checks pick.
VEC_ISA_ENV = "TORCHINDUCTOR_VEC_ISA_OK"
_PICKED_ISA = "from torch._inductor.cpu_vec_isa import pick_vec_isa; print(pick_vec_isa())"


def _trust_the_checked_vector_isa() -> None:
    if VEC_ISA_ENV in os.environ:
        return
    probes = [subprocess.Popen([sys.executable, "-c", _PICKED_ISA], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, env={**os.environ, **extra})
              for extra in ({}, {VEC_ISA_ENV: "1"})]
    try:
        checked, trusted = (probe.communicate(timeout=300)[0].strip() for probe in probes)
    except subprocess.TimeoutExpired:  # a machine too slow to tell: every run probes for itself, as without this
        for probe in probes:
            probe.kill()
            probe.wait()
        return
    if all(probe.returncode == 0 for probe in probes) and checked and checked == trusted:
        os.environ[VEC_ISA_ENV] = "1"


# Every framework run of the suite reads and writes one persistent compile cache (jax, XLA's and inductor's; see
# docs/run.md, HLOSCOPE_COMPILE_CACHE): a program the suite already compiled, the same preset and settings in another
# test, is read back instead of compiled again, 1 to 3 s of CPU in each of the suite's ~180 runs. The tests of start-up
# itself (cold against warm) give their runs a cache of their own; a --dump-hlo run reads none of XLA's caches, since
# XLA dumps only what it compiles.
_SHARED_CACHE = pytest.StashKey[str]()


def _share_one_compile_cache(config: pytest.Config) -> None:
    if COMPILE_CACHE_ENV in os.environ:  # the caller chose one
        return
    folder = tempfile.mkdtemp(prefix="hloscope-suite-compile-cache-")
    os.environ[COMPILE_CACHE_ENV] = folder
    config.stash[_SHARED_CACHE] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_SHARED_CACHE, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(COMPILE_CACHE_ENV, None)


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # once, in the process that starts pytest-xdist's workers
        _trust_the_checked_vector_isa()
        _share_one_compile_cache(config)
    # The Ctrl-C tests start hloscope as a terminal would, with SIGINT at its default. A test run started with SIGINT
    # ignored (a background job of a non-interactive shell) would pass that on to every child, which then could not
    # be interrupted; Python's own handler here makes exec'd children start with the default.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.environ.get(REQUIRE_FIXTURES_ENV) == "1" and not (FIXTURES.is_dir() and any(FIXTURES.iterdir())):
        raise pytest.UsageError(f"{REQUIRE_FIXTURES_ENV}=1 and the real fixtures are missing at {FIXTURES} "
                                "(clone the repository with shared/ beside it, or set HLOSCOPE_FIXTURES)")


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        fixtures_missing(f"real fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture
def real_file():
    """A real file by its fixtures-relative name (`tracelens/...`): the repository's fetched copy, else the shared
    fixtures' (helpers.fixture)."""
    return fixture


@pytest.fixture
def cli_run():
    """Run `hloscope ARGS...` in-process; returns (exit_code, stdout, stderr) (cli_invoke)."""
    return cli_invoke


@pytest.fixture(scope="session")
def cuda_plugin() -> str:
    """The Python with jax's CUDA plugin that `--target` compiles with (.venv-cuda, or $HLOSCOPE_TARGET_PYTHON).
    scripts/setup.sh always makes it, so a missing one fails the test that needs it."""
    python = find_target_python()
    assert python is not None, ("no environment with jax's CUDA plugin: run `bash scripts/setup-cuda-target.sh` "
                                "(scripts/setup.sh does), or set HLOSCOPE_TARGET_PYTHON")
    return python


@pytest.fixture(scope="session")
def comparison(request) -> Path:
    """A real comparison holding jax and torch_xla+compile runs of the tiny ViT recorded with --dump-hlo --profile: the
    one at $HLOSCOPE_TEST_COMPARISON, else every_mode_comparison (made once per session, shared)."""
    given = os.environ.get("HLOSCOPE_TEST_COMPARISON")
    if given and (Path(given) / "torch_xla_compile" / "run.json").is_file():
        return Path(given)
    return request.getfixturevalue("every_mode_comparison")


@pytest.fixture(scope="session")
def every_mode_comparison(tmp_path_factory) -> Path:
    """`hloscope compare` of every mode (compare's default --modes) on the tiny ViT with --dump-hlo --profile, made once
    per session for every test that reads a real run of a mode: the run records, the HLO dumps, the traces, TensorBoard
    and XProf on them (a test that changes a run copies it first). The settings are helpers' EVERY_MODE_*. Without the
    fairness audit (one set-up process a mode, before timing): no reader checks it, and test_audit.py runs it."""

    root = made_once(tmp_path_factory, EVERY_MODE, make_every_mode_comparison)
    (found,) = [p for p in root.iterdir() if (p / "comparison.json").is_file()]
    return found


@pytest.fixture(scope="session")
def target_comparison(tmp_path_factory) -> tuple[Path, dict]:
    """`hloscope compare --modes jax,torch_xla --target h100` of the tiny ViT at batch 8 (each mode's train step
    compiled for the H100, not timed), made once per session for the tests that read a compiled run of either mode:
    the comparison directory and the document compare printed with --json. Needs the CUDA plugin's environment
    (cuda_plugin)."""

    def make(root: Path) -> None:
        result = hloscope("compare", "--repeats", "1", "--modes", "jax,torch_xla", "--model", "vit-tiny",
                          "--batch-size", "8", "--target", "h100", "--out", root / "out", "--json", timeout=1200,
                          memory_limit=None)  # fmt: skip
        assert result.code == 0, result.stderr[-2000:]
        (root / "printed.json").write_text(result.stdout)

    root = made_once(tmp_path_factory, "target_h100", make)
    (directory,) = [p for p in (root / "out").iterdir() if (p / "comparison.json").is_file()]
    return directory, json.loads((root / "printed.json").read_text())


@pytest.fixture(scope="session")
def real_run(every_mode_comparison) -> Path:
    """A real `hloscope run --mode jax` (tiny ViT) with its HLO dump and profile: what users feed the readers. The jax
    run of every_mode_comparison; a test that changes it works on a copy (helpers.copy_of_run)."""
    return every_mode_comparison / "jax"


@pytest.fixture(scope="session")
def torch_cpu_trace(tmp_path_factory) -> tuple[Path, dict[str, tuple[int, float, float]]]:
    """A real PyTorch CPU trace of three profiled training steps (record_shapes on), and torch's key_averages() of
    them: {op: (calls, self CPU us, CPU us)}."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    folder = tmp_path_factory.mktemp("torch_cpu")
    trace = folder / "host_1.pt.trace.json"
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = torch.randn(16, 32)
    averages: dict[str, tuple[int, float, float]] = {}

    def ready(profiler) -> None:
        profiler.export_chrome_trace(str(trace))
        for row in profiler.key_averages():
            averages[row.key] = (row.count, row.self_cpu_time_total, row.cpu_time_total)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, on_trace_ready=ready,
                 schedule=schedule(wait=0, warmup=1, active=3)) as profiler:
        for _ in range(4):
            optimizer.zero_grad()
            model(batch).sum().backward()
            optimizer.step()
            profiler.step()
    assert trace.is_file() and averages
    return trace, averages


@pytest.fixture(scope="session")
def device_run(tmp_path_factory):
    """`device_run(mode, devices)`: run.json of a real `hloscope run --mode MODE --devices N` of the tiny ViT with
    --dump-hlo, profiled for the modes in DEVICE_RUN_PROFILED (helpers' DEVICE_RUN_* settings), made once per session
    for every test that reads it (the one- and multi-device records, HLO and traces, collectives, memory per device or
    rank, the loss against one device's). The device count and torch.distributed's job variables of this test run are cleared: the run sets its
    own."""
    made: dict[tuple[str, int], dict] = {}

    def run(mode: str, devices: int) -> dict:
        if (mode, devices) not in made:
            profiled = mode in DEVICE_RUN_PROFILED
            profile = ["--profile", "--profile-steps", str(DEVICE_RUN_PROFILE_STEPS)] if profiled else []

            def make(out: Path) -> None:
                result = hloscope("run", "--mode", mode, "--model", "vit-tiny", "--batch-size", str(DEVICE_RUN_BATCH),
                                  "--steps", str(DEVICE_RUN_STEPS), "--warmup", str(DEVICE_RUN_WARMUP), "--devices",
                                  str(devices), "--dump-hlo", *profile, "--out", out, "--run-id", f"{mode}{devices}",
                                  timeout=600, memory_limit=None,
                                  env={"HLOSCOPE_NO_PROGRESS": "1", **DEVICE_RUN_CLEARED_ENV})  # fmt: skip
                assert result.code == 0, result.stderr[-3000:]

            out = made_once(tmp_path_factory, f"{mode.replace('+', '_')}{devices}", make)
            directory = out / f"{mode}{devices}"
            made[mode, devices] = {**json.loads((directory / "run.json").read_text()), "_dir": str(directory)}
        return made[mode, devices]

    return run


@pytest.fixture(scope="session")
def loader_run(tmp_path_factory):
    """`loader_run(mode, data="loader")`: the directory of a real profiled `hloscope run --mode MODE --data DATA` of the
    tiny ViT (helpers' LOADER_RUN_* settings, the default six profiled steps), made once per session for every test
    that reads one: the profile's step markers and host annotations, the input pipeline's node, the recorded
    configuration. `pytorch+compile` and the like are the framework with --compile-model."""
    made: dict[tuple[str, str], Path] = {}

    def run(mode: str, data: str = "loader") -> Path:
        if (mode, data) not in made:
            framework, _, compiled = mode.partition("+")
            run_id = f"{framework}{'_compile' if compiled else ''}_{data}"

            def make(out: Path) -> None:
                result = hloscope("run", "--mode", framework, "--model", "vit-tiny", "--batch-size",
                                  str(LOADER_RUN_BATCH), "--steps", str(LOADER_RUN_STEPS), "--warmup",
                                  str(LOADER_RUN_WARMUP), "--profile", "--data", data, "--out", out, "--run-id", run_id,
                                  "--json", *(["--compile-model"] if compiled else []), timeout=600, memory_limit=None,
                                  env={"HLOSCOPE_NO_PROGRESS": "1"})  # fmt: skip
                assert result.code == 0, result.stderr[-3000:]

            made[mode, data] = made_once(tmp_path_factory, f"loader_{run_id}", make) / run_id
        return made[mode, data]

    return run

