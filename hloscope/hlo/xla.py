"""XLA's own view of a module, where jaxlib is installed: its parser and its HloCostAnalysis (CPU client)."""

from __future__ import annotations

import os
from typing import Any

from hloscope.errors import warn
from hloscope.hlo.load import LoadedModule


def run_isolated(texts: list[str], what: str = "cost", timeout: float = 600.0) -> list[dict[str, Any]]:
    """XLA's parser (`what="view"`) or parser + HloCostAnalysis on the CPU client (`what="cost"`) for each text, in a
    child process (hloscope.hlo.xla_worker): XLA CHECK-fails (SIGABRT) or crashes on some text its parser half
    accepts, and that must never take hloscope down. A text that kills the child gets {"error": "XLA crashed ..."}
    and the child is restarted for the texts after it. Raises ImportError without jaxlib."""
    import importlib.util
    import json
    import subprocess
    import sys

    if importlib.util.find_spec("jaxlib") is None:
        raise ImportError("jaxlib")
    results: list[dict[str, Any]] = []
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "JAX_PLATFORMS": "cpu"}
    while len(results) < len(texts):
        pending = texts[len(results):]
        payload = "".join(json.dumps({"text": text, "what": what}) + "\n" for text in pending)
        try:
            proc = subprocess.run([sys.executable, "-m", "hloscope.hlo.xla_worker"], input=payload, capture_output=True,
                                  text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            results.extend({"error": f"XLA's analysis did not finish in {timeout:.0f} s"} for _ in pending)
            break
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                results.append(json.loads(line))
        if len(results) < len(texts):  # the child died on texts[len(results)]
            detail = next((ln[ln.index("Check failed"):].strip() for ln in proc.stderr.splitlines() if "Check failed" in ln), "")
            how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
            results.append({"error": f"XLA crashed ({how}) on this module" + (f": {detail[:160]}" if detail else "")})
    return results


def module_text(loaded: LoadedModule) -> str:
    """The lines of the file that hold this one module (XLA's parser takes one module at a time)."""
    module = loaded.module
    with open(loaded.file, encoding="utf-8") as f:
        lines = [line for number, line in enumerate(f, 1) if module.lineno <= number <= module.end_lineno]
    return "".join(lines)


# XLA's parser holds about 11x the text in memory (benches/README.md), on top of hloscope's own analysis: above this
# size XLA's figure is skipped to stay inside the memory bound hloscope promises.
MAX_XLA_TEXT_BYTES = 50_000_000


def xla_cost_analysis(loaded: LoadedModule) -> dict[str, Any] | None:
    """{'flops', 'transcendentals', 'bytes_accessed'} from XLA's HloCostAnalysis as XLA reports them, and
    'unknown_custom_calls': the custom calls in the module, which that analysis cannot cost and counts as -1 FLOP and
    -1 byte each (HloCostAnalysis::HandleCustomCall marks them "unknown"), so that readers can take those out.
    None without jaxlib; when XLA refuses the module the reason is under 'error'; for huge modules under 'skipped'."""
    import importlib.util

    if importlib.util.find_spec("jaxlib") is None:
        return None
    if os.path.getsize(loaded.file) > MAX_XLA_TEXT_BYTES:
        return {"skipped": f"file over {MAX_XLA_TEXT_BYTES // 1_000_000} MB: XLA's parser would need too much memory"}
    text = module_text(loaded)
    from hloscope.hlo.reading import memory_budget, xla_analysis_bytes

    budget, why = memory_budget()
    needed = xla_analysis_bytes(len(text), text.count("["))
    if budget is not None and needed > budget:  # shape-aware: a huge tuple costs XLA ~1.3 KB per element
        reason = (f"XLA's parser would need about {needed / 1e9:.1f} GB for this module, over the limit set by {why}")
        warn(f"{loaded.file}: {reason}; XLA's figures left empty")
        return {"skipped": reason}
    result = run_isolated([text], "cost")[0]
    if "error" in result:  # XLA refused the module or died on it: hloscope's own analysis goes on
        if "crashed" in result["error"]:  # one line, like hloscope's other warnings
            warn(f"{loaded.file}: {result['error']}; XLA's figures left empty")
        return {"error": result["error"]}
    return {
        **result,
        "unknown_custom_calls": sum(1 for instr in loaded.module.all_instructions() if instr.opcode == "custom-call"),
    }


def _cpu_client() -> Any:  # a jaxlib Client, or None
    """XLA's CPU client in this process (for callers that run XLA themselves; hlo stats uses run_isolated)."""
    from jaxlib import _jax

    from hloscope.native_stderr import quiet_native_stderr

    if not hasattr(_jax, "get_tfrt_cpu_client"):
        return None
    with quiet_native_stderr():
        return _jax.get_tfrt_cpu_client()
