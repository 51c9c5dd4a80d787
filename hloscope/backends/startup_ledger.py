"""run.json `startup`: where the time to the first step went, and why a mode compiled again inside the timed window.

The driver marks the phase boundaries with its own clock (importing the mode's framework, the session's setup, the
first step, the timed window); inside each phase the framework's own instrumentation says how much was tracing,
lowering, compiling or reading a persistent compile cache:

- JAX: `jax.monitoring` duration events (`/jax/core/compile/jaxpr_trace_duration`, `.../jaxpr_to_mlir_module_duration`,
  `.../backend_compile_duration`, `/jax/compilation_cache/cache_retrieval_time_sec`) and its cache hit/miss events;
  inside the window, `jax_explain_cache_misses` says which argument changed.
- torch.compile: `torch._dynamo.utils.compilation_time_metrics` (dynamo's and inductor's timed regions, nested: the
  parts below are differences of nested regions, so that they do not overlap), the FX graph and AOT autograd cache
  counters, and dynamo's compilation records (`recompile_reason`: the guard that failed).
- torch_xla: `torch_xla.debug.metrics` (CompileTime, ExecuteTime, CachedCompile/UncachedCompile, PersistentCacheHit/Miss);
  inside the window, its compilation analysis (hloscope/backends/torch_xla_analysis.py) gives each new graph's hash,
  torch_xla's reason to compile it and the Python frame that asked for it.

What a phase's framework parts do not cover is its `unaccounted` part (the first step's first execution where the
framework does not time it, Python between the timed regions), so that the parts add up to the phase exactly.

HLOSCOPE_COMPILE_CACHE=DIR (docs/run.md) points each framework's persistent compile cache at DIR: a second run with
the same DIR finds its programs there.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hloscope.backends import torch_xla_analysis
from hloscope.modes import FRAMEWORK_MODULE, JAX_FRAMEWORKS
from hloscope.runs.records import (
    UNREADABLE_CACHE_COUNT,
    CompileCache,
    Startup,
    StartupPart,
    StartupPhase,
    StartupRecompilation,
    StartupWindow,
)

COMPILE_CACHE_ENV = "HLOSCOPE_COMPILE_CACHE"
# Test hook (documented in docs/run.md): HLOSCOPE_TEST_RESHAPE="<mode>[,<mode>...]" drops the last sample of every
# batch from the second timed step on, so that the mode meets a new input shape inside the timed window and compiles
# again: what a recompilation report is checked on. Recorded as a warning.
TEST_RESHAPE_ENV = "HLOSCOPE_TEST_RESHAPE"

DRIVER_SOURCE = "hloscope's clock (time.perf_counter around the phase)"
UNACCOUNTED = "unaccounted"
JAX_EVENTS = {  # jax.monitoring duration event -> part
    "/jax/core/compile/jaxpr_trace_duration": "tracing (jaxpr trace)",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering (jaxpr to StableHLO)",
    "/jax/core/compile/backend_compile_duration": "compilation (XLA backend compile)",
    "/jax/compilation_cache/cache_retrieval_time_sec": "persistent cache read (hits)",
}
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
EXECUTION_PART = "execution (after the last compile: dispatch, run, wait)"
EXECUTION_SOURCE = ("hloscope's clock (time.perf_counter) from the last jax.monitoring backend-compile event to the "
                    "step's end")
JAX_COUNTS = {"/jax/compilation_cache/cache_hits": "persistent_cache_hits",
              "/jax/compilation_cache/cache_misses": "persistent_cache_misses"}
JAX_MISS_LOGGER = "jax._src.interpreters.partial_eval"  # where jax_explain_cache_misses writes TRACING CACHE MISS


def reshape_hook(mode: str) -> bool:
    """Whether HLOSCOPE_TEST_RESHAPE names `mode`."""
    return mode in {name.strip() for name in os.environ.get(TEST_RESHAPE_ENV, "").split(",")}


RESHAPE_WARNING = (f"{TEST_RESHAPE_ENV}: every batch loses its last sample from the second timed step on (test hook): "
                   "the timed window includes a recompilation on purpose")


@dataclass
class Phase:
    """A span of the run the driver timed (imports, setup, first step, timed window), split into the framework's parts
    and what they leave unaccounted."""

    name: str
    seconds: float
    parts: list[StartupPart] = field(default_factory=list)

    @property
    def unaccounted_s(self) -> float:
        return self.seconds - sum(p.seconds for p in self.parts)

    def written(self) -> StartupPhase:
        return StartupPhase(name=self.name, seconds=self.seconds, parts=list(self.parts),
                            unaccounted_s=self.unaccounted_s)


class Probe:
    """A framework's cumulative compile-time figures, read at the phase boundaries and subtracted."""

    source = ""

    def totals(self) -> dict[str, float]:
        """Part name -> cumulative seconds so far (parts that do not overlap)."""
        return {}

    def counts(self) -> dict[str, int]:
        """Cumulative cache hits and misses, compiles."""
        return {}

    def window_opening(self) -> None:
        """Just before the timed window: start collecting why the framework compiles again."""

    def recompilations(self) -> list[StartupRecompilation]:
        """What the framework says about each compile since `window_opening`: cause and cost."""
        return []

    def execution(self, start: float, end: float) -> StartupPart | None:
        """The first step's execution where the framework does not time it but its last compile's end is known: from
        that end to the step's `end` (dispatch, run and wait), when the compile ended between `start` and `end`."""
        return None

    def close(self) -> None:
        pass


def subtract(after: dict, before: dict) -> dict:
    return {key: after[key] - before.get(key, 0) for key in after if after[key] - before.get(key, 0)}


def phase_of(name: str, seconds: float, after: dict[str, float], before: dict[str, float], source: str) -> Phase:
    """A phase whose framework parts are the difference of two probe readings (parts that did not grow left out)."""
    spent = subtract(after, before)
    return Phase(name, seconds, [StartupPart(part, value, source) for part, value in spent.items() if value > 0])


class JaxProbe(Probe):
    source = "jax.monitoring duration events"

    def __init__(self) -> None:
        import jax

        self.jax = jax
        self.seconds: dict[str, float] = {}
        self.events: dict[str, int] = {}
        self.misses: list[str] = []
        self.handler: logging.Handler | None = None
        self.last_compile_end: float | None = None  # time.perf_counter() when XLA's backend compile last returned
        jax.monitoring.register_event_duration_secs_listener(self._duration)
        jax.monitoring.register_event_listener(self._event)

    def _duration(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        part = JAX_EVENTS.get(event)
        if part is not None:
            self.seconds[part] = self.seconds.get(part, 0.0) + duration_secs
        if event == BACKEND_COMPILE_EVENT:  # reported as the compile returns
            self.last_compile_end = time.perf_counter()

    def _event(self, event: str, **kwargs: str | int) -> None:
        name = JAX_COUNTS.get(event)
        if name is not None:
            self.events[name] = self.events.get(name, 0) + 1

    def totals(self) -> dict[str, float]:
        # the backend compile event spans the persistent cache lookup: a hit's read is its own part, not compilation
        totals = dict(self.seconds)
        compile_part, read_part = JAX_EVENTS[BACKEND_COMPILE_EVENT], \
            JAX_EVENTS["/jax/compilation_cache/cache_retrieval_time_sec"]
        if compile_part in totals and read_part in totals:
            totals[compile_part] = max(totals[compile_part] - totals[read_part], 0.0)
        return totals

    def counts(self) -> dict[str, int]:
        return dict(self.events)

    def execution(self, start: float, end: float) -> StartupPart | None:
        if self.last_compile_end is None or not start < self.last_compile_end < end:
            return None
        return StartupPart(EXECUTION_PART, end - self.last_compile_end, EXECUTION_SOURCE)

    def window_opening(self) -> None:
        collected = self.misses

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                collected.append(record.getMessage())

        logger = logging.getLogger(JAX_MISS_LOGGER)
        self.handler = Collect(logging.WARNING)
        logger.addHandler(self.handler)
        logger.propagate = False  # into run.json, not onto the terminal in the middle of the timed steps
        self.explained_before = bool(self.jax.config.values.get("jax_explain_cache_misses"))
        self.jax.config.update("jax_explain_cache_misses", True)

    def recompilations(self) -> list[StartupRecompilation]:
        return [StartupRecompilation(cause=message, source="jax_explain_cache_misses (TRACING CACHE MISS)")
                for message in self.misses]

    def close(self) -> None:
        for unregister, listener in (("unregister_event_duration_listener", self._duration),
                                     ("unregister_event_listener", self._event)):
            try:
                getattr(self.jax.monitoring, unregister)(listener)
            except (AttributeError, ValueError, AssertionError):
                pass
        if self.handler is not None:
            logger = logging.getLogger(JAX_MISS_LOGGER)
            logger.removeHandler(self.handler)
            logger.propagate = True
            self.jax.config.update("jax_explain_cache_misses", self.explained_before)
            self.handler = None


class DynamoProbe(Probe):
    source = "torch._dynamo.utils.compilation_time_metrics"

    def __init__(self) -> None:
        from torch._dynamo import utils

        self.utils = utils
        self.seen: set[str] = set()

    def totals(self) -> dict[str, float]:
        """Disjoint parts from dynamo's and inductor's nested timed regions: a frame's compile (`compile_inner`)
        holds the backend call, which holds AOT autograd and inductor's `compile_fx_inner` (FX graph cache lookup, then
        on a miss `fx_codegen_and_compile`: lowering, then `compile_to_module`: code generation, then the C++/Triton
        compile and load); the backward graph is compiled on the first backward call (`backward._backward_impl`)."""
        timed = {name: sum(values) for name, values in self.utils.compilation_time_metrics.items()}

        def t(name: str) -> float:
            return timed.get(name, 0.0)

        compile_fx = t("compile_fx_inner")
        lowering = t("fx_codegen_and_compile")
        to_module = t("GraphLowering.compile_to_module")
        codegen = t("GraphLowering.codegen")
        return {"tracing (dynamo capture, guards)": t("_compile.compile_inner") - t("OutputGraph.call_user_compiler"),
                "tracing (AOT autograd, graph passes)": (t("OutputGraph.call_user_compiler")
                                                         + t("backward._backward_impl") - compile_fx),
                "persistent cache (FX graph cache lookup and load)": compile_fx - lowering,
                "lowering (inductor FX graph to IR)": lowering - to_module,
                "compilation (inductor code generation)": codegen,
                "compilation (C++/Triton compile and load)": to_module - codegen}

    def counts(self) -> dict[str, int]:
        from torch._dynamo.utils import counters

        return {"fx_graph_cache_hits": counters["inductor"]["fxgraph_cache_hit"],
                "fx_graph_cache_misses": counters["inductor"]["fxgraph_cache_miss"],
                "aot_autograd_cache_hits": counters["aot_autograd"]["autograd_cache_hit"],
                "aot_autograd_cache_misses": counters["aot_autograd"]["autograd_cache_miss"],
                "dynamo_frames_compiled": counters["stats"]["unique_graphs"]}

    def _records(self) -> list:
        return list(self.utils.get_compilation_metrics())

    def window_opening(self) -> None:
        self.seen = {str(record.compile_id) for record in self._records()}

    def recompilations(self) -> list[StartupRecompilation]:
        found = []
        for record in self._records():
            if str(record.compile_id) in self.seen:
                continue
            found.append(StartupRecompilation(
                cause=record.recompile_reason or record.fail_reason or "first compile of this frame",
                frame=f"{record.co_name} ({record.co_filename}:{record.co_firstlineno})",
                compile_id=str(record.compile_id), seconds=record.entire_frame_compile_time_s,
                source="torch._dynamo.utils.get_compilation_metrics() recompile_reason"))
        return found


class TorchXlaProbe(Probe):
    source = "torch_xla.debug.metrics"

    def __init__(self, dynamo: bool) -> None:
        import torch_xla.debug.metrics as metrics

        self.metrics = metrics
        self.dynamo = DynamoProbe() if dynamo else None

    def _metric_s(self, name: str) -> float:
        data = self.metrics.metric_data(name)
        return data[1] / 1e9 if data else 0.0  # (samples, accumulated nanoseconds, recent samples)

    def _counter(self, name: str) -> int:
        return self.metrics.counter_value(name) or 0

    def totals(self) -> dict[str, float]:
        totals = {"compilation (XLA backend compile)": self._metric_s("CompileTime"),
                  "execution (ExecuteTime)": self._metric_s("ExecuteTime")}
        if self.dynamo is not None:  # dynamo's capture; openxla compiles through the same CompileTime
            dynamo = self.dynamo.totals()
            totals["tracing (dynamo capture, guards)"] = dynamo["tracing (dynamo capture, guards)"]
        return totals

    def counts(self) -> dict[str, int]:
        return {"cached_compiles": self._counter("CachedCompile"), "uncached_compiles": self._counter("UncachedCompile"),
                "persistent_cache_hits": self._counter("PersistentCacheHit"),
                "persistent_cache_misses": self._counter("PersistentCacheMiss"),
                # found in the cache but not loadable: torch_xla 2.9's CPU client cannot deserialize what it wrote, so
                # every process compiles again however warm the cache (explain's startup says so)
                UNREADABLE_CACHE_COUNT: self._counter("PersistentCacheDeserializeFailure")}

    def window_opening(self) -> None:
        self.compiles_before = self.metrics.metric_data("CompileTime")[0] if self.metrics.metric_data("CompileTime") \
            else 0
        self.graphs_before = len(self._graphs())
        if self.dynamo is not None:
            self.dynamo.window_opening()

    @staticmethod
    def _graphs() -> list[torch_xla_analysis.XlaCompilation]:
        """The graphs torch_xla's compilation analysis has recorded so far (none where it writes no file)."""
        file = os.environ.get(torch_xla_analysis.DEBUG_FILE_ENV)
        return torch_xla_analysis.read(Path(file)) if file else []

    def recompilations(self) -> list[StartupRecompilation]:
        found = self.dynamo.recompilations() if self.dynamo is not None else []
        data = self.metrics.metric_data("CompileTime")
        compiled = (data[0] if data else 0) - getattr(self, "compiles_before", 0)
        if compiled <= 0:
            return found
        graphs = self._graphs()[getattr(self, "graphs_before", 0):]
        if not graphs:
            found.append(StartupRecompilation(
                cause=f"{compiled} new graph(s) compiled by XLA (a graph hash not in torch_xla's compilation cache: "
                      "the traced graph changed)",
                source="torch_xla.debug.metrics CompileTime count"))
            return found
        # CompileTime's recent samples are (timestamp, nanoseconds), one per compile, in order
        seconds = [value / 1e9 for _, value in (data[2] if data else [])][-len(graphs):]
        for index, graph in enumerate(graphs):
            found.append(StartupRecompilation(
                cause=f"new graph {graph.graph_hash} compiled by XLA (torch_xla: {graph.cause}): its hash was not in "
                      "torch_xla's compilation cache, so the traced graph changed",
                graph_hash=graph.graph_hash, frame=graph.user_frame,
                seconds=seconds[index] if len(seconds) == len(graphs) else None, source=torch_xla_analysis.SOURCE))
        return found


def xla_caches_off(framework: str) -> list[str]:
    """Turn off the persistent XLA caches `framework` reads (jax's, torch_xla's), whoever set them (an inherited
    JAX_COMPILATION_CACHE_DIR or XLA_PERSISTENT_CACHE_PATH too), before its first compile: for --dump-hlo, since XLA
    dumps only what it compiles. Returns the caches turned off."""
    if framework in JAX_FRAMEWORKS:
        import jax

        jax.config.update("jax_enable_compilation_cache", False)
        return ["jax"]
    if framework == "torch_xla":  # read when torch_xla's runtime starts, after this
        os.environ.pop("XLA_PERSISTENT_CACHE_PATH", None)
        return ["XLA"]
    return []


def configure_compile_cache(framework: str, compiled: bool, directory: Path, dump_hlo: bool = False) -> CompileCache:
    """Point the framework's persistent compile caches at folders of `directory` (one per cache, so that the modes of
    a comparison can share it), before their first compile; returns run.json `startup.compile_cache`. With `dump_hlo`
    the XLA caches (jax's, torch_xla's) are left out: XLA dumps only what it compiles, so a program read from the cache
    would leave the dump without its module before optimisation, buffer assignment and memory report."""
    folders: dict[str, str] = {}
    left_out = []
    if dump_hlo:
        left_out = xla_caches_off(framework)
    elif framework in JAX_FRAMEWORKS:
        import jax

        folders["jax_compilation_cache_dir"] = str(directory / "jax")
        jax.config.update("jax_compilation_cache_dir", folders["jax_compilation_cache_dir"])
        # cache every program, however small or quick to compile, so that a second run finds them all
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    if framework == "torch_xla" and not dump_hlo:  # read when torch_xla's runtime starts (torch_xla.runtime.initialize_cache's way)
        folders["XLA_PERSISTENT_CACHE_PATH"] = os.environ["XLA_PERSISTENT_CACHE_PATH"] = str(directory / "xla")
        os.environ["XLA_PERSISTENT_CACHE_READ_ONLY"] = "0"
    if framework == "pytorch" or (framework == "torch_xla" and compiled):
        # inductor's FX graph and AOT autograd caches live there (read when inductor compiles)
        folders["TORCHINDUCTOR_CACHE_DIR"] = os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(directory / "inductor")
    for folder in folders.values():
        Path(folder).mkdir(parents=True, exist_ok=True)
    if left_out:
        why = (f"{' and '.join(left_out)} cache not used: --dump-hlo dumps what XLA compiles, and a program read from "
               "the cache is not compiled")
        return CompileCache(dir=str(directory), folders=folders, left_out=why)
    return CompileCache(dir=str(directory), folders=folders)




def make_probe(mode: str, framework: str, compiled: bool) -> Probe | None:
    """The probe for `mode`'s framework once the session has imported it; None before. JAX's events reach only a
    listener registered before them (its probe starts when the mode's module is loaded); dynamo's and torch_xla's
    figures are cumulative since the process started, so their probes can start late."""
    # a probe never imports its framework itself (torch_xla must start after the session has set PJRT_DEVICE and
    # XLA_FLAGS; a stand-in session imports nothing): it starts once the framework's module is there
    if FRAMEWORK_MODULE.get(framework) not in sys.modules:
        return None
    if framework in JAX_FRAMEWORKS:
        return JaxProbe()
    if framework == "torch_xla":
        return TorchXlaProbe(dynamo=compiled)
    if framework == "pytorch" and compiled:
        return DynamoProbe()
    return Probe()  # eager PyTorch compiles nothing: its phases are the driver's clock alone


class StartupLedger:
    """Collects run.json `startup` as the driver passes the phase boundaries (mark_* in the order of the run)."""

    def __init__(self, mode: str, framework: str, compiled: bool, clock: Callable[[], float], dump_hlo: bool = False):
        self.mode, self.framework, self.compiled, self.clock = mode, framework, compiled, clock
        self.dump_hlo = dump_hlo
        self.started = clock()
        self.marks: dict[str, float] = {}
        self.readings: dict[str, tuple[dict[str, float], dict[str, int]]] = {}
        self.probe: Probe | None = None
        self.phases: list[Phase] = []
        self.cache: CompileCache | None = None
        directory = os.environ.get(COMPILE_CACHE_ENV)
        self.cache_dir = Path(directory) if directory else None
        self.window: StartupWindow | None = None

    def restart(self) -> None:
        """The imports phase starts here: the driver is about to load the mode's module."""
        self.started = self.clock()

    def _read(self, name: str) -> None:
        self.marks[name] = self.clock()
        if self.probe is None:
            self.probe = make_probe(self.mode, self.framework, self.compiled)
        self.readings[name] = (self.probe.totals(), self.probe.counts()) if self.probe is not None else ({}, {})

    def imported(self) -> None:
        """The mode's module (and its framework) is imported: the probe can start listening."""
        self.marks["imported"] = self.clock()
        self.phases.append(Phase("imports", self.marks["imported"] - self.started,
                                 [StartupPart("imports (the mode's framework and model libraries)",
                                       self.marks["imported"] - self.started, DRIVER_SOURCE)]))
        if self.cache_dir is not None:
            self.cache = configure_compile_cache(self.framework, self.compiled, self.cache_dir, self.dump_hlo)
        elif self.dump_hlo:  # a cache set outside hloscope would leave the dump without what it read
            xla_caches_off(self.framework)
        self._read("setup start")

    def setup_done(self) -> None:
        self._read("setup end")
        self.phases.append(self._phase("setup", "setup start", "setup end"))

    def first_step_started(self) -> None:
        self._read("first step start")

    def first_step_done(self, first_step_s: float | None) -> None:
        self._read("first step end")
        phase = self._phase("first step", "first step start", "first step end")
        if first_step_s is not None:  # the loop's own measure of the step, the figure run.json reports
            phase.seconds = first_step_s
            # the loop's clock starts after the mark: the step ends no later than mark + first_step_s
            start = self.marks["first step start"]
            execution = self.probe.execution(start, start + first_step_s) if self.probe is not None else None
            if execution is not None:
                phase.parts.append(execution)
        self.phases.append(phase)

    def window_opening(self) -> None:
        self._read("window start")
        if self.probe is not None:
            self.probe.window_opening()

    def window_closed(self) -> None:
        self._read("window end")
        if self.probe is None:
            return
        spent = self._phase("timed window", "window start", "window end")
        before, after = self.readings["window start"][1], self.readings["window end"][1]
        compiles = [p for p in spent.parts if not p.name.startswith("execution")]
        self.window = StartupWindow(compile_parts=compiles, compile_s=sum(p.seconds for p in compiles),
                                    counts=subtract(after, before), recompilations=self.probe.recompilations())

    def _phase(self, name: str, start: str, end: str) -> Phase:
        seconds = self.marks[end] - self.marks[start]
        if self.probe is None:
            return Phase(name, seconds)
        return phase_of(name, seconds, self.readings[end][0], self.readings[start][0], self.probe.source)

    def record(self) -> Startup:
        """run.json `startup`."""
        counts = {}
        if "first step end" in self.readings and "setup start" in self.readings:
            counts = subtract(self.readings["first step end"][1], self.readings["setup start"][1])
        total = sum(p.seconds for p in self.phases)
        return Startup(phases=[p.written() for p in self.phases], total_s=total, cache_counts=counts,
                       compile_cache=self.cache,
                       framework_source=self.probe.source if self.probe is not None and self.probe.source else None,
                       window=self.window)

    def close(self) -> None:
        if self.probe is not None:
            self.probe.close()
