"""XLA's own view of a module, where jaxlib is installed: its parser and its HloCostAnalysis (CPU client)."""

from __future__ import annotations

import re
from functools import lru_cache

from hloscope.hlo.load import LoadedModule


@lru_cache(maxsize=1)
def _cpu_client():
    from jaxlib import _jax

    return _jax.get_tfrt_cpu_client() if hasattr(_jax, "get_tfrt_cpu_client") else None


def module_texts(path: str) -> list[str]:
    """A file's modules as separate texts (XLA's parser takes one module at a time)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    chunks = re.split(r"(?m)^(?=HloModule\b)", text)
    return [c for c in chunks if c.lstrip().startswith("HloModule")] or [text]


def xla_cost_analysis(loaded: LoadedModule) -> dict | None:
    """{'flops', 'transcendentals', 'bytes_accessed'} from XLA's HloCostAnalysis, or None without jaxlib
    (or when XLA refuses the module; the reason is returned under 'error')."""
    try:
        from jaxlib import _hlo, _jax
    except ImportError:
        return None
    try:
        client = _cpu_client()
        if client is None:
            return None
        text = module_texts(loaded.file)[loaded.index]
        module = _hlo.hlo_module_from_text(text)
        raw = _jax.hlo_module_cost_analysis(client, module)
    except Exception as error:  # XLA raises its own status errors; they must not stop hloscope's own analysis
        return {"error": str(error).splitlines()[0][:200]}
    return {
        "flops": float(raw.get("flops", 0.0)),
        "transcendentals": float(raw.get("transcendentals", 0.0)),
        "bytes_accessed": float(raw.get("bytes accessed", 0.0)),
    }
