"""XLA's own view of a module, where jaxlib is installed: its parser and its HloCostAnalysis (CPU client)."""

from __future__ import annotations

import os
from functools import lru_cache

from hloscope.hlo.load import LoadedModule
from hloscope.native_stderr import quiet_native_stderr


@lru_cache(maxsize=1)
def _cpu_client():
    from jaxlib import _jax

    if not hasattr(_jax, "get_tfrt_cpu_client"):
        return None
    with quiet_native_stderr():
        return _jax.get_tfrt_cpu_client()


def module_text(loaded: LoadedModule) -> str:
    """The lines of the file that hold this one module (XLA's parser takes one module at a time)."""
    module = loaded.module
    with open(loaded.file, encoding="utf-8") as f:
        lines = [line for number, line in enumerate(f, 1) if module.lineno <= number <= module.end_lineno]
    return "".join(lines)


# XLA's parser holds about 11x the text in memory (benches/README.md), on top of hloscope's own analysis: above this
# size XLA's figure is skipped to stay inside the memory bound hloscope promises.
MAX_XLA_TEXT_BYTES = 50_000_000


def xla_cost_analysis(loaded: LoadedModule) -> dict | None:
    """{'flops', 'transcendentals', 'bytes_accessed'} from XLA's HloCostAnalysis as XLA reports them, and
    'unknown_custom_calls': the custom calls in the module, which that analysis cannot cost and counts as -1 FLOP and
    -1 byte each (HloCostAnalysis::HandleCustomCall marks them "unknown"), so that readers can take those out.
    None without jaxlib; when XLA refuses the module the reason is under 'error'; for huge modules under 'skipped'."""
    try:
        from jaxlib import _hlo, _jax
    except ImportError:
        return None
    if os.path.getsize(loaded.file) > MAX_XLA_TEXT_BYTES:
        return {"skipped": f"file over {MAX_XLA_TEXT_BYTES // 1_000_000} MB: XLA's parser would need too much memory"}
    try:
        client = _cpu_client()
        if client is None:
            return None
        text = module_text(loaded)
        module = _hlo.hlo_module_from_text(text)
        raw = _jax.hlo_module_cost_analysis(client, module)
    except Exception as error:  # XLA raises its own status errors; they must not stop hloscope's own analysis
        return {"error": str(error).splitlines()[0][:200]}
    return {
        "flops": float(raw.get("flops", 0.0)),
        "transcendentals": float(raw.get("transcendentals", 0.0)),
        "bytes_accessed": float(raw.get("bytes accessed", 0.0)),
        "unknown_custom_calls": sum(1 for instr in loaded.module.all_instructions() if instr.opcode == "custom-call"),
    }
