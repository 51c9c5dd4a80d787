"""Child process that runs XLA's own parser and cost analysis (jaxlib) on HLO texts, so that a CHECK failure or a
crash inside XLA kills only this process (see xla.py).

Reads JSON lines from stdin: {"text": HLO text, "what": "cost" | "view"}; writes one JSON line per request, flushed:
{"flops", "transcendentals", "bytes_accessed"} or {"view": {computation: [[name, opcode enum name, [operands]], ...]},
"name": module name}, or {"error": XLA's message}.
"""

from __future__ import annotations

import json
import sys

from hloscope.native_stderr import quiet_native_stderr


def main() -> int:
    with quiet_native_stderr():
        from jaxlib import _hlo, _jax  # type: ignore[attr-defined]  # private modules without stubs

        client = _jax.get_tfrt_cpu_client() if hasattr(_jax, "get_tfrt_cpu_client") else None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            module = _hlo.hlo_module_from_text(request["text"])
            if request.get("what") == "view":
                result = {"name": module.name, "view": {
                    c.name: [[i.name, i.opcode.name, [o.name for o in i.operands()]] for i in c.instructions()]
                    for c in module.computations()}}
            elif client is None:
                result = {"error": "this jaxlib has no CPU client"}
            else:
                raw = _jax.hlo_module_cost_analysis(client, module)
                result = {"flops": float(raw.get("flops", 0.0)), "transcendentals": float(raw.get("transcendentals", 0.0)),
                          "bytes_accessed": float(raw.get("bytes accessed", 0.0))}
        # The child's boundary: XLA's status errors, any type, reported as data
        except Exception as error:  # noqa: BLE001
            result = {"error": str(error).splitlines()[0][:200] if str(error) else type(error).__name__}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
