"""run.json `startup`: the phases the driver times add up to their measured seconds with the framework's parts and what
they leave unaccounted; the parts taken from nested framework timers do not overlap; recompilations keep their
cause. Stand-in probes and sessions: no framework runs here (tests/test_startup_e2e.py runs JAX)."""

from __future__ import annotations

import itertools
import time

import msgspec
import pytest

from hloscope.backends import driver, startup_ledger, timing
from hloscope.backends.base import RunOptions
from hloscope.backends.startup_ledger import DynamoProbe, JaxProbe, Probe, StartupLedger
from hloscope.runs.records import StartupPart, StartupRecompilation, section_document
from hloscope.runs.rundir import create_run_dir, load_run
from tests.test_run_driver import FakeSession


class ScriptedProbe(Probe):
    """Cumulative compile seconds that grow by the given amounts at each reading."""

    source = "scripted"

    def __init__(self, steps: list[dict[str, float]]):
        self.steps = iter(steps)
        self.total: dict[str, float] = {}

    def totals(self) -> dict[str, float]:
        for name, seconds in next(self.steps, {}).items():
            self.total[name] = self.total.get(name, 0.0) + seconds
        return dict(self.total)

    def counts(self) -> dict[str, int]:
        return {"cache_hits": 2}

    def recompilations(self) -> list[StartupRecompilation]:
        return [StartupRecompilation(cause="size of images changed from 8 to 7", source="scripted")]


def ticking(*instants: float):
    times = iter(instants)
    return lambda: next(times)


def test_each_phase_is_its_parts_plus_what_they_leave_unaccounted(monkeypatch):
    probe = ScriptedProbe([{}, {"compilation": 3.0}, {}, {"tracing": 0.5, "compilation": 4.0}, {}, {"compilation": 1.0}])
    monkeypatch.setattr(startup_ledger, "make_probe", lambda *args: probe)
    # clock: created, restart, imported, setup start, setup end, first step start, first step end, window start/end
    ledger = StartupLedger("jax", "jax", False, ticking(0.0, 1.0, 3.0, 3.0, 8.0, 8.0, 14.0, 15.0, 17.0))
    ledger.restart()
    ledger.imported()
    ledger.setup_done()
    ledger.first_step_started()
    ledger.first_step_done(5.9)  # the loop's own measure of the step
    ledger.window_opening()
    ledger.window_closed()
    record = section_document(ledger.record())
    phases = {p["name"]: p for p in record["phases"]}
    assert [p["name"] for p in record["phases"]] == ["imports", "setup", "first step"]
    assert phases["imports"]["seconds"] == 2.0 and phases["setup"]["seconds"] == 5.0
    assert phases["first step"]["seconds"] == 5.9  # timing.first_step_s, not the ledger's own clock
    for phase in record["phases"]:
        parts = sum(p["seconds"] for p in phase["parts"])
        assert parts + phase["unaccounted_s"] == pytest.approx(phase["seconds"])
    assert {p["name"]: p["seconds"] for p in phases["setup"]["parts"]} == {"compilation": 3.0}
    assert {p["name"]: p["seconds"] for p in phases["first step"]["parts"]} == {"tracing": 0.5, "compilation": 4.0}
    assert phases["first step"]["unaccounted_s"] == pytest.approx(1.4)
    assert record["total_s"] == pytest.approx(12.9)
    assert record["window"]["compile_s"] == 1.0
    assert record["window"]["recompilations"][0]["cause"] == "size of images changed from 8 to 7"


def test_without_its_framework_imported_a_phase_is_the_driver_clock_alone(monkeypatch):
    monkeypatch.setattr(startup_ledger, "FRAMEWORK_MODULE", {"jax": "a_module_nobody_imported"})
    ledger = StartupLedger("jax", "jax", False, ticking(0.0, 0.0, 1.0, 1.0, 2.5, 2.5, 3.0))
    ledger.restart()
    ledger.imported()
    ledger.setup_done()
    ledger.first_step_started()
    ledger.first_step_done(None)
    record = section_document(ledger.record())
    assert record["framework_source"] is None
    setup = record["phases"][1]
    assert setup == {"name": "setup", "seconds": 1.5, "parts": [], "unaccounted_s": 1.5}


def test_dynamo_parts_are_differences_of_nested_timers_and_cover_every_compile(monkeypatch):
    from torch._dynamo import utils

    # figures of a real vit-tiny-like compile, as dynamo's timers hold them: each nested timer inside its parent
    metrics = {"_compile.compile_inner": [43.85], "OutputGraph.call_user_compiler": [43.66],
               "compile_fx_inner": [40.32, 3.12], "fx_codegen_and_compile": [40.30, 3.10],
               "GraphLowering.compile_to_module": [40.05, 3.07], "GraphLowering.codegen": [28.37, 0.44],
               "backward._backward_impl": [3.13]}
    monkeypatch.setattr(utils, "compilation_time_metrics", metrics)
    parts = DynamoProbe().totals()
    assert all(seconds >= 0 for seconds in parts.values()), parts
    assert sum(parts.values()) == pytest.approx(43.85 + 3.13)  # the frame's compile and the backward's, once each
    assert parts["compilation (inductor code generation)"] == pytest.approx(28.81)
    assert parts["compilation (C++/Triton compile and load)"] == pytest.approx(40.05 + 3.07 - 28.81)
    assert parts["persistent cache (FX graph cache lookup and load)"] == pytest.approx(0.04)


@pytest.fixture
def jax_probe():
    """A JaxProbe listening to jax.monitoring, as the driver starts one once JAX is imported; the events are sent
    through jax.monitoring as JAX's compiler sends them."""
    probe = JaxProbe()
    yield probe
    probe.close()


def test_jax_cache_reads_are_taken_out_of_the_backend_compile_that_spans_them(jax_probe):
    import jax

    jax.monitoring.record_event_duration_secs("/jax/core/compile/backend_compile_duration", 0.30)
    jax.monitoring.record_event_duration_secs("/jax/compilation_cache/cache_retrieval_time_sec", 0.25)
    jax.monitoring.record_event_duration_secs("/jax/core/compile/jaxpr_trace_duration", 0.5)
    jax.monitoring.record_event_duration_secs("/jax/some/other_event", 9.0)
    jax.monitoring.record_event("/jax/compilation_cache/cache_hits")
    assert jax_probe.totals() == {"compilation (XLA backend compile)": pytest.approx(0.05),
                                  "persistent cache read (hits)": 0.25, "tracing (jaxpr trace)": 0.5}
    assert jax_probe.counts() == {"persistent_cache_hits": 1}


def test_jax_first_execution_runs_from_the_last_compile_to_the_steps_end(jax_probe, monkeypatch):
    import jax

    start = time.perf_counter()
    assert jax_probe.execution(start, start + 6.0) is None  # nothing compiled: nothing to time from
    jax.monitoring.record_event_duration_secs(startup_ledger.BACKEND_COMPILE_EVENT, 4.0)  # sent as the compile returns
    returned = time.perf_counter()
    end = returned + 0.5  # the step ends half a second after the compile returned
    part = jax_probe.execution(start, end)
    assert part is not None and part.source == startup_ledger.EXECUTION_SOURCE
    assert 0.5 <= part.seconds <= end - start, part
    assert jax_probe.execution(returned, end) is None  # compiled before this phase: another phase's compile

    class Compiled(ScriptedProbe):
        def execution(self, start, end):
            return StartupPart("execution", end - 13.0, "clock") if start < 13.0 < end else None

    monkeypatch.setattr(startup_ledger, "make_probe", lambda *args: Compiled([{}, {}, {}, {"compilation": 4.0}]))
    # clock: created, restart, imported, setup start, setup end, first step start, first step end
    ledger = StartupLedger("jax", "jax", False, ticking(0.0, 1.0, 3.0, 3.0, 8.0, 8.0, 14.0))
    ledger.restart()
    ledger.imported()
    ledger.setup_done()
    ledger.first_step_started()
    ledger.first_step_done(5.9)
    (first,) = [p for p in section_document(ledger.record())["phases"] if p["name"] == "first step"]
    # the step ran from 8.0 for 5.9 s: compiled until 13.0, executed until 13.9
    assert {p["name"]: p["seconds"] for p in first["parts"]} == {"compilation": 4.0,
                                                                 "execution": pytest.approx(0.9)}
    assert first["unaccounted_s"] == pytest.approx(1.0)


def test_the_driver_writes_the_ledger_with_the_first_step_it_timed(tmp_path, monkeypatch):
    seconds = itertools.chain([0.75], itertools.repeat(0.01))

    def timed(step, wait, index):
        outputs = step(index)
        wait(outputs)
        return outputs, next(seconds)

    monkeypatch.setattr(timing, "timed", timed)
    monkeypatch.setattr(driver, "load_session", lambda options, run_dir: FakeSession(options, run_dir))
    monkeypatch.setattr(startup_ledger, "FRAMEWORK_MODULE", {})
    monkeypatch.delenv(startup_ledger.COMPILE_CACHE_ENV, raising=False)  # a run given no persistent cache
    FakeSession.recompile_at, FakeSession.fail_at = set(), None
    run_dir = create_run_dir(tmp_path, "run")
    driver.execute(RunOptions(mode="jax", model="vit-tiny", batch_size=4, steps=3, warmup=2), run_dir)
    startup = load_run(run_dir).section("startup")
    assert [p["name"] for p in startup["phases"]] == ["imports", "setup", "first step"]
    first = startup["phases"][2]
    assert first["seconds"] == 0.75 == load_run(run_dir).timing.first_step_s
    assert first["unaccounted_s"] == 0.75 and startup["compile_cache"] is None


def test_the_reshape_hook_names_its_modes(monkeypatch):
    monkeypatch.setenv(startup_ledger.TEST_RESHAPE_ENV, "pytorch+compile, jax")
    assert startup_ledger.reshape_hook("jax") and startup_ledger.reshape_hook("pytorch+compile")
    assert not startup_ledger.reshape_hook("torch_xla")


def test_a_run_that_dumps_its_hlo_compiles_everything(tmp_path, monkeypatch):
    """XLA dumps only what it compiles: with --dump-hlo the XLA caches are not used (and the record says why), so the
    dump is whole; inductor's cache, which dumps nothing, still is."""
    for name in ("TORCHINDUCTOR_CACHE_DIR", "XLA_PERSISTENT_CACHE_PATH", "XLA_PERSISTENT_CACHE_READ_ONLY"):
        monkeypatch.delenv(name, raising=False)  # set by the configuration below: restored after the test
    dumping = startup_ledger.configure_compile_cache("torch_xla", True, tmp_path, dump_hlo=True)
    assert set(dumping.folders) == {"TORCHINDUCTOR_CACHE_DIR"}
    assert "XLA cache not used: --dump-hlo" in str(dumping.left_out)
    plain = startup_ledger.configure_compile_cache("pytorch", True, tmp_path)
    assert set(plain.folders) == {"TORCHINDUCTOR_CACHE_DIR"} and "left_out" not in msgspec.to_builtins(plain)
