"""Known answers for run.json `startup` on real JAX runs of the tiny ViT: a second run with the first run's persistent
compile cache (a directory inside the output folder) moves the first step's time from compilation to cache reads; a
batch shape changed inside the timed window (the HLOSCOPE_TEST_RESHAPE test hook) is reported as a recompilation
with the argument that changed; the parts of every phase add up to its measured time with what is unaccounted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import hloscope

from hloscope.backends.startup_ledger import COMPILE_CACHE_ENV, EXECUTION_PART, EXECUTION_SOURCE, TEST_RESHAPE_ENV

pytestmark = pytest.mark.slow

COMPILE = "compilation (XLA backend compile)"
CACHE_READ = "persistent cache read (hits)"


# An XLA flag that changes nothing here, inherited by the cold run and given as the option (two arguments) to the warm
# one: the same flags in effect, so the warm run must read the cold one's programs (jax's cache key also reads the
# command line's --xla arguments, which the option's must not add to)
FLAG = "--xla_cpu_enable_fast_min_max=false"


def _run(out: Path, name: str, env: dict[str, str | None], *extra: str) -> dict:
    result = hloscope("run", "--mode", "jax", "--model", "vit-tiny", "--batch-size", "8", "--steps", "3",
                      "--warmup", "2", "--out", str(out), "--run-id", name, *extra, timeout=900, memory_limit=None,
                      env=env)
    assert result.code == 0, result.stderr[-3000:]
    return json.loads((out / name / "run.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("startup")
    cache = str(out / "compile-cache")
    cold = _run(out, "cold", {COMPILE_CACHE_ENV: cache, TEST_RESHAPE_ENV: None, "XLA_FLAGS": FLAG})
    warm = _run(out, "warm", {COMPILE_CACHE_ENV: cache, TEST_RESHAPE_ENV: "jax", "XLA_FLAGS": None},
                "--xla-flags", FLAG)
    return {"cold": cold, "warm": warm}


def _first_step(run: dict) -> dict:
    (phase,) = [p for p in run["startup"]["phases"] if p["name"] == "first step"]
    return phase


def _part(phase: dict, name: str) -> float:
    return sum(p["seconds"] for p in phase["parts"] if p["name"] == name)


def test_a_warm_cache_moves_the_first_step_from_compilation_to_cache_reads(runs):
    cold, warm = _first_step(runs["cold"]), _first_step(runs["warm"])
    assert _part(cold, COMPILE) > 0 and _part(cold, CACHE_READ) == 0
    assert _part(warm, CACHE_READ) > 0
    assert _part(warm, COMPILE) < _part(cold, COMPILE)  # what the cold run compiled, the warm one read
    assert runs["cold"]["startup"]["cache_counts"].get("persistent_cache_misses", 0) > 0
    assert runs["cold"]["startup"]["cache_counts"].get("persistent_cache_hits", 0) == 0
    assert runs["warm"]["startup"]["cache_counts"].get("persistent_cache_hits", 0) > 0
    assert runs["warm"]["startup"]["cache_counts"].get("persistent_cache_misses", 0) == 0  # the reshape aside
    sources = {p["name"]: p["source"] for p in cold["parts"]}
    assert sources.pop(EXECUTION_PART) == EXECUTION_SOURCE  # the first execution, after the last compile
    assert set(sources.values()) == {"jax.monitoring duration events"}


def test_a_shape_changed_in_the_timed_window_is_a_recompilation_with_its_cause(runs):
    warm = runs["warm"]
    assert warm["compiles"]["recompiled_in_window"]
    window = warm["startup"]["window"]
    assert window["compile_s"] > 0
    (recompile,) = window["recompilations"]
    assert "now f32[7,32,32,3] and before f32[8,32,32,3]" in recompile["cause"]
    assert "now i32[7] and before i32[8]" in recompile["cause"]
    cold = runs["cold"]
    assert not cold["compiles"]["recompiled_in_window"] and cold["startup"]["window"]["recompilations"] == []


@pytest.mark.parametrize("name", ["cold", "warm"])
def test_the_parts_add_up_to_each_measured_phase(runs, name):
    run = runs[name]
    startup = run["startup"]
    assert [p["name"] for p in startup["phases"]] == ["imports", "setup", "first step"]
    assert _first_step(run)["seconds"] == run["timing"]["first_step_s"]
    for phase in startup["phases"]:
        parts = sum(p["seconds"] for p in phase["parts"])
        assert parts + phase["unaccounted_s"] == pytest.approx(phase["seconds"])
        # the framework's timers measure inside the phase and do not overlap: they never exceed it
        assert phase["unaccounted_s"] >= -1e-3 * phase["seconds"], phase
    assert startup["total_s"] == pytest.approx(sum(p["seconds"] for p in startup["phases"]))
