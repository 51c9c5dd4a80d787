"""XLA's own view of a module, where jaxlib is installed: its parser and its HloCostAnalysis (CPU client)."""

from __future__ import annotations

import importlib.util
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from hloscope.errors import UsageError, reading, warn
from hloscope.hlo.load import LoadedModule
from hloscope.hlo.reading import memory_budget, xla_analysis_bytes
from hloscope.limits import XLA_COST_TIMEOUT_S
from hloscope.native_stderr import quiet_native_stderr

# Imports inside functions: only when XLA is called, kept out of `hlo stats` start-up.

TIMEOUT_ENV = "HLOSCOPE_XLA_TIMEOUT_S"


def xla_timeout() -> float:
    """Seconds that XLA's analyses of one command may take in all: HLOSCOPE_XLA_TIMEOUT_S, else XLA_COST_TIMEOUT_S."""
    value = os.environ.get(TIMEOUT_ENV)
    if value:
        try:
            seconds = float(value)
        except ValueError:
            raise UsageError(f"{TIMEOUT_ENV}={value!r}: expected a number of seconds") from None
        if not 0 < seconds <= 86_400:
            raise UsageError(f"{TIMEOUT_ENV}={value!r}: expected seconds from 0 to 86400")
        return seconds
    return XLA_COST_TIMEOUT_S


def run_isolated(texts: Iterable[str], what: str = "cost", timeout: float | None = None) -> list[dict[str, Any]]:
    """XLA's parser (`what="view"`) or parser + HloCostAnalysis on the CPU client (`what="cost"`) for each text, in one
    child process for all of them (hloscope.hlo.xla_worker), fed one text at a time: XLA CHECK-fails (SIGABRT) or
    crashes on some text its parser half accepts, and that must never take hloscope down. A text that kills the child
    gets {"error": "XLA crashed ..."} and a new child takes the texts after it. `timeout` (default `xla_timeout()`)
    bounds the whole call: the child is killed then, and the text it was on and those after it get
    {"error": "...did not finish...", "timed_out": True}. Raises ImportError without jaxlib."""
    if importlib.util.find_spec("jaxlib") is None:
        raise ImportError("jaxlib")
    limit = xla_timeout() if timeout is None else timeout
    deadline = time.monotonic() + limit
    results: list[dict[str, Any]] = []
    worker: _Worker | None = None
    try:
        for text in texts:
            if worker is not None and time.monotonic() >= deadline:
                worker.close()
                worker = None
            if time.monotonic() >= deadline:
                results.append(_timed_out(limit))
                continue
            if worker is None:
                worker = _Worker()
            result = worker.ask(json.dumps({"text": text, "what": what}) + "\n", deadline)
            if result is None:  # out of time: the child was killed
                worker = None
                result = _timed_out(limit)
            elif "crashed" in result and "error" in result:
                worker = None
                result = {"error": result["error"]}
            results.append(result)
    finally:
        if worker is not None:
            worker.close()
    return results


def _timed_out(limit: float) -> dict[str, Any]:
    return {"error": f"XLA's analysis did not finish in {limit:g} s", "timed_out": True}


class _Worker:
    """One hloscope.hlo.xla_worker child: a request line in, a result line out, each answer awaited until a
    deadline. Its stderr goes to a temporary file (read only to say why it crashed)."""

    def __init__(self) -> None:
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "JAX_PLATFORMS": "cpu"}
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  # lives as long as the child; closed by close()
        self.proc = subprocess.Popen([sys.executable, "-m", "hloscope.hlo.xla_worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, env=env, bufsize=0)
        self._buffer = b""

    def ask(self, request: str, deadline: float) -> dict[str, Any] | None:
        """The child's answer; {"error": ..., "crashed": True} when it died (it is then closed); None when the
        deadline passed first (the child is then killed)."""
        if self.proc.stdin is None or self.proc.stdout is None:  # started with stdin=PIPE, stdout=PIPE
            raise RuntimeError("the XLA child process has no pipes")
        data = memoryview(request.encode())
        stdin = self.proc.stdin.fileno()
        os.set_blocking(stdin, False)  # a text of 50 MB is written as the child reads it, within the deadline too
        while data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [stdin], [], left)[1]:
                self.close()
                return None
            try:
                data = data[os.write(stdin, data[: 1 << 20]):]
            except BlockingIOError:
                continue
            except OSError:  # the child is gone (broken pipe)
                return self._crashed()
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.close()
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return self._crashed()
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            answer = json.loads(line)
        except ValueError:
            return self._crashed()
        return answer if isinstance(answer, dict) else self._crashed()

    def _crashed(self) -> dict[str, Any]:
        self._stop()
        self._stderr.seek(0)
        stderr = self._stderr.read()[-(1 << 20):].decode("utf-8", "replace")
        self.close()
        detail = next((ln[ln.index("Check failed"):].strip() for ln in stderr.splitlines() if "Check failed" in ln), "")
        code = self.proc.returncode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return {"error": f"XLA crashed ({how}) on this module" + (f": {detail[:160]}" if detail else ""),
                "crashed": True}

    def close(self) -> None:
        """Stop the child (killed when it is still running) and close its pipes and stderr file."""
        self._stop()
        for stream in (self.proc.stdin, self.proc.stdout, self._stderr):
            if stream is not None:
                stream.close()

    def _stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def module_text(loaded: LoadedModule) -> str:
    """The lines of the file that hold this one module (XLA's parser takes one module at a time)."""
    module = loaded.module
    with reading(loaded.file, "an HLO text file"), open(loaded.file, encoding="utf-8", errors="replace") as f:
        lines = [line for number, line in enumerate(f, 1) if module.lineno <= number <= module.end_lineno]
    return "".join(lines)


# XLA's parser holds about 11x the text in memory (benches/README.md), on top of hloscope's own analysis: above this
# size XLA's figure is skipped to stay inside the memory bound hloscope promises.
MAX_XLA_TEXT_BYTES = 50_000_000


def xla_cost_analysis(loaded: LoadedModule) -> dict[str, Any] | None:
    """XLA's figures for one module: `xla_cost_analyses([loaded])[0]`."""
    return xla_cost_analyses([loaded])[0]


def xla_cost_analyses(modules: Sequence[LoadedModule]) -> list[dict[str, Any] | None]:
    """For each module, {'flops', 'transcendentals', 'bytes_accessed'} from XLA's HloCostAnalysis as XLA reports
    them, and 'unknown_custom_calls': the custom calls in the module, which that analysis cannot cost and counts as -1
    FLOP and -1 byte each (HloCostAnalysis::HandleCustomCall marks them "unknown"), so that readers can take those out.
    None without jaxlib; when XLA refuses the module the reason is under 'error'; for huge modules under 'skipped'.

    All modules go to one child process, one text at a time, within one overall time limit (`xla_timeout()`): the
    modules it does not reach get 'error' and one warning line says so; hloscope's own figures are unaffected."""
    if not modules:
        return []
    if importlib.util.find_spec("jaxlib") is None:
        return [None] * len(modules)
    results: list[dict[str, Any] | None] = [None] * len(modules)
    asked: list[int] = []
    for index, loaded in enumerate(modules):
        skipped = _too_large(loaded)
        if skipped is not None:
            results[index] = skipped
        else:
            asked.append(index)

    def texts() -> Iterator[str]:  # read one at a time: a dump's texts are never all in memory
        for index in asked:
            yield module_text(modules[index])

    timed_out = []
    for index, result in zip(asked, run_isolated(texts(), "cost")):
        loaded = modules[index]
        if "error" in result:  # XLA refused the module, died on it or ran out of time: hloscope's analysis goes on
            if result.get("timed_out"):
                timed_out.append(loaded.file)
            elif "crashed" in result["error"]:  # one line, like hloscope's other warnings
                warn(f"{loaded.file}: {result['error']}; XLA's figures left empty")
            results[index] = {"error": result["error"]}
        else:
            results[index] = {**result, "unknown_custom_calls": sum(
                1 for instr in loaded.module.all_instructions() if instr.opcode == "custom-call")}
    if timed_out:
        others = len(timed_out) - 1
        also = f" (and {others} other module{'s' if others > 1 else ''})" if others else ""
        warn(f"{timed_out[0]}{also}: XLA's cost analysis did not finish in {xla_timeout():g} s "
             f"(limit: {TIMEOUT_ENV}); XLA's figures left empty")
    return results


def _too_large(loaded: LoadedModule) -> dict[str, Any] | None:
    """{'skipped': why} when XLA's parser would need more memory than this module may take; None to go ahead."""
    if os.path.getsize(loaded.file) > MAX_XLA_TEXT_BYTES:
        return {"skipped": f"file over {MAX_XLA_TEXT_BYTES // 1_000_000} MB: XLA's parser would need too much memory"}
    text = module_text(loaded)

    budget, why = memory_budget()
    needed = xla_analysis_bytes(len(text), text.count("["))
    if budget is not None and needed > budget:  # shape-aware: a huge tuple costs XLA ~1.3 KB per element
        reason = (f"XLA's parser would need about {needed / 1e9:.1f} GB for this module, over the limit set by {why}")
        warn(f"{loaded.file}: {reason}; XLA's figures left empty")
        return {"skipped": reason}
    return None


def _cpu_client() -> Any:  # a jaxlib Client, or None
    """XLA's CPU client in this process (for callers that run XLA themselves; hlo stats uses run_isolated)."""
    from jaxlib import _jax

    if not hasattr(_jax, "get_tfrt_cpu_client"):
        return None
    with quiet_native_stderr():
        return _jax.get_tfrt_cpu_client()
