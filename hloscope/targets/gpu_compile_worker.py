"""Compile one XLA module for a GPU that is not there (XLA's deviceless compile), in the environment with jax's CUDA plugin.

Run as a script, not imported by hloscope: `python gpu_compile_worker.py REQUEST.json`. It needs only jax, jaxlib and
jax-cuda12-plugin/-pjrt (plus nvidia-cuda-nvcc-cu12 for ptxas), so it also runs in the small `.venv-cuda` that
`scripts/setup-cuda-target.sh` makes. The request says:

    {"module": path, "format": "mlir" | "hlo", "target_config": path of a GpuTargetConfigProto text file,
     "dump_dir": path, "gemm": "auto" | "triton" | "cublas", "result": path of the JSON result to write}

The module is StableHLO (what `jax.jit(...).lower(...)` gives) or HLO text (what torch_xla gives its compiler; XLA's own
parser reads it and jaxlib converts it to StableHLO). It is compiled by the jax client of a compile-only CUDA topology
made from the target file, the same path `jax.jit(...).lower(<ShapeDtypeStructs on that topology>).compile()` takes.
With "gemm": "auto", a failure of XLA's default (Triton) GEMM path is retried with `xla_gpu_enable_triton_gemm=false`
(cuBLAS GEMMs); every attempt is recorded. XLA writes the optimized GPU HLO, buffer assignment, memory-usage report and
thunk_sequence.txt under dump_dir/<attempt>.

This is the one module of hloscope that uses JAX's private modules (`jax._src`: compiler, interpreters.mlir,
lib.xla_client, lib.mlir.ir, lib._jax), for what JAX has no public API for: converting XLA HLO text to StableHLO and
compiling a StableHLO module with XLA options for given devices. `replay` (hloscope/replay/program.py) imports
`stablehlo_from_text` and `compile_stablehlo` from here. They are checked against the pinned jax (requirements.txt):
a jax upgrade re-checks these names first (tests/test_target_compile.py and tests/test_replay.py exercise both paths).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
from importlib import metadata
from typing import Any


def _versions() -> dict:
    out: dict[str, str | None] = {}
    for dist in ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "nvidia-cuda-nvcc-cu12"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def stablehlo_from_text(text: str, fmt: str) -> tuple[str | bytes, list[int]]:
    """The module as StableHLO, and the entry parameters the HLO marks as donatable (`buffer_donor`)."""
    if fmt == "mlir":
        return text, []
    from jax._src.lib import _jax
    from jaxlib import _hlo  # type: ignore[attr-defined]  # private module without stubs

    module = _hlo.hlo_module_from_text(text)
    header = text[:text.find("\n")]
    donor_text = re.search(r"buffer_donor=\{(.*?)\}\s*(?:,\s*\w+=|$)", header)
    donors = [int(n) for n in re.findall(r"\((\d+),", donor_text.group(1))] if donor_text else []
    return _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto()), donors


def compile_stablehlo(client, devices: tuple, module_text: str | bytes, donors: list[int],
                      overrides: dict | None = None, load: bool = False):
    """XLA's compile of a StableHLO module for `devices` of `client`, with the donated parameters marked and XLA debug
    options `overrides`; `load`: also load it onto the devices, to execute it (replay), else compile only (--target)."""
    from jax._src import compiler
    from jax._src.interpreters import mlir
    from jax._src.lib import xla_client as xc
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        module = ir.Module.parse(module_text)
        _mark_donors(module, donors)
        options = compiler.get_compile_options(num_replicas=1, num_partitions=1,
                                               env_options_overrides=overrides or {})
        compile_method = client.compile_and_load if load else client.compile
        return compile_method(module, xc.DeviceList(tuple(devices)), options)


def _mark_donors(module, donors: list[int]) -> None:
    """hlo_to_stablehlo drops HLO's `buffer_donor` (PyTorch/XLA donates its parameter buffers); put it back as JAX
    does for donated arguments (`jax.buffer_donor = true` on the entry function's arguments), which XLA reads."""
    from jax._src.lib.mlir import ir

    if not donors:
        return
    for op in module.body.operations:
        if ir.StringAttr(op.attributes["sym_name"]).value != "main":
            continue
        count = len(op.regions[0].blocks[0].arguments)
        old = op.attributes.get("arg_attrs", None)
        attrs = []
        for i in range(count):
            entries: dict[str, ir.Attribute] = {}
            if old is not None:
                named = ir.DictAttr(old[i])
                entries.update((named[j].name, named[j].attr) for j in range(len(named)))
            if i in donors:
                entries["jax.buffer_donor"] = ir.BoolAttr.get(True)
            attrs.append(ir.DictAttr.get(entries))
        op.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def _memory(executable) -> dict:
    stats = executable.get_compiled_memory_stats()
    names = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes",
             "generated_code_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
             "host_alias_size_in_bytes", "host_temp_size_in_bytes")
    return {name: int(getattr(stats, name)) for name in names if hasattr(stats, name)}


def compile_module(request: dict) -> dict:
    from jax.experimental import topologies

    with open(request["target_config"], encoding="utf-8") as f:
        spec_text = f.read()
    result: dict = {"ok": False, "versions": _versions(), "attempts": []}
    try:
        topology = topologies.get_topology_desc(platform="cuda", target_config=spec_text, topology="1x1x1")
    except Exception as error:  # noqa: BLE001  # jax's topology API, any type: reported as this stage's failure
        result["error"] = f"cannot make a CUDA topology from {request['target_config']}: {error}"
        result["stage"] = "topology"
        return result
    device: Any = topology.devices[0]  # a jaxlib Device: jaxlib._jax ships no stubs, so mypy cannot see its attributes
    result["device_kind"] = device.device_kind
    client = device.client
    try:
        with open(request["module"], encoding="utf-8") as f:
            module_text, donors = stablehlo_from_text(f.read(), request["format"])
        result["buffer_donors"] = len(donors)
    # The file, jaxlib's HLO parser, MLIR's: reported as this stage's failure
    except Exception as error:  # noqa: BLE001
        result["error"] = f"cannot read {request['module']} as {request['format']}: {error}"
        result["stage"] = "parse"
        return result

    gemm = request.get("gemm", "auto")
    plan = {"auto": ["triton", "cublas"], "triton": ["triton"], "cublas": ["cublas"]}[gemm]
    for backend in plan:
        dump_dir = os.path.join(request["dump_dir"], backend)
        overrides = {"xla_dump_to": dump_dir, "xla_dump_hlo_as_text": True}
        if backend == "cublas":
            overrides["xla_gpu_enable_triton_gemm"] = False
        attempt = {"gemm": backend, "dump_dir": dump_dir, "ok": False}
        result["attempts"].append(attempt)
        start = time.perf_counter()
        try:
            executable = compile_stablehlo(client, tuple(topology.devices), module_text, donors, overrides)
        except Exception as error:  # noqa: BLE001  # XLA's compile errors, any type: this attempt failed, try the next
            attempt["seconds"] = round(time.perf_counter() - start, 3)
            attempt["error"] = f"{type(error).__name__}: {error}"
            continue
        attempt["seconds"] = round(time.perf_counter() - start, 3)
        attempt["ok"] = True
        result.update(ok=True, gemm_backend=backend, dump_dir=dump_dir, memory=_memory(executable),
                      module_name=executable.hlo_modules()[0].name, compile_seconds=attempt["seconds"])
        break
    if not result["ok"]:
        result["stage"] = "compile"
        result["error"] = result["attempts"][-1].get("error", "compile failed")
    return result


def main(argv: list[str]) -> int:
    # The CUDA plugin must not try to open a GPU (there is none; cuInit fails and the plugin never registers); the
    # compile-only topology does not need one. Set here, before jax is imported, not at import: replay imports this
    # module into a process whose platforms are its own.
    os.environ["JAX_PLATFORMS"] = "cpu"
    with open(argv[1], encoding="utf-8") as f:
        request = json.load(f)
    try:
        result = compile_module(request)
    except ImportError as error:
        result = {"ok": False, "stage": "import", "error": f"jax with its CUDA plugin is not importable here: {error}"}
    except Exception as error:  # noqa: BLE001  # the child's boundary: any failure reaches the parent as a result file
        result = {"ok": False, "stage": "internal", "error": f"{type(error).__name__}: {error}",
                  "traceback": traceback.format_exc()}
    with open(request["result"], "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
