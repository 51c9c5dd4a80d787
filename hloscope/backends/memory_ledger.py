"""Measure a run's memory ledger (run.json `memory.ledger`, hloscope/runs/memory_record.py) after its timed window.

The JAX frameworks (modes.JAX_FRAMEWORKS, torchax among them): the train step compiled again, without dump options, and XLA's own memory analysis of it
(`jit(step).lower(state, batch).compile().memory_analysis()`): its argument buffers are traced to parameters, buffers,
optimizer state and batch through the step's pytree (state, images, labels), its outputs and temporaries are XLA's.
The gradients and the activations are estimated inside the temporaries (gradients: the parameters' bytes; activations:
what the VJP of the loss keeps for backward, before XLA optimises).

PyTorch (eager, compile) and PyTorch/XLA: parameters, buffers, gradients and optimizer state from the tensors
themselves; activations from one extra forward (no backward, no update) under `torch.autograd.graph.saved_tensors_hooks`,
counting the storages autograd saves that are neither parameters nor the batch (torch.compile: the eager module's
forward, an estimate of what the compiled graph keeps); temporaries from torch.cuda's peak allocated bytes on CUDA.
torch_xla traces forward and backward into one XLA graph and exposes no buffer assignment of it while it runs (its
metrics count compiles and transfers, not buffers; `xm.get_memory_info` is refused by the CPU client): its temporaries
come from XLA's memory analysis of the step's compiled graph as torch_xla's compilation analysis prints it
(hloscope/backends/torch_xla_analysis.py), its activations are among them and not measured apart. Where the user
set PT_XLA_DEBUG_LEVEL/FILE themselves and --dump-hlo kept the graph, explain reads the temporaries from XLA's buffer
assignment in the dump (hloscope/explain/memory.py).

The runtime's share is the peak (the device's where it reports one, else the process's peak host RSS) minus every
other measured part. Importing this module imports no framework.
"""

from __future__ import annotations

from typing import Any

from hloscope.backends import torch_xla_analysis
from hloscope.backends.optimizers import MOMENTS_PER_PARAMETER
from hloscope.modes import JAX_FRAMEWORKS, get_mode
from hloscope.runs.memory_record import MemoryLedger, MemoryPart

XLA_ANALYSIS = "XLA's memory analysis of the compiled step (jit(step).lower(state, batch).compile().memory_analysis())"
RUNTIME_SOURCE = "{peak} minus the other measured parts: code, caches, allocator slack and whatever was not measured"


def measure(session, memory: dict) -> MemoryLedger:
    """run.json `memory.ledger` for `session` after its timed window; `memory` is the run's `memory` record (its
    peaks). Measuring never fails the run: an error is recorded in place of the ledger's parts."""
    options = session.options
    if options.devices > 1:
        return MemoryLedger(None, "", options.optimizer, error=f"not measured with --devices {options.devices}: the "
                            "ledger describes one device's step")
    try:
        framework = get_mode(options.mode).framework
        if framework in JAX_FRAMEWORKS:
            ledger = xla_ledger(session, memory)
        else:
            ledger = torch_ledger(session, memory, lazy=framework == "torch_xla")
    # the framework may raise anything while compiling or tracing again; the run's timing stands without the ledger
    except Exception as error:  # noqa: BLE001
        return MemoryLedger(None, "", options.optimizer,
                            error=f"memory ledger not measured: {type(error).__name__}: {error}".splitlines()[0])
    return ledger


def peak_of(memory: dict) -> tuple[int | None, str]:
    """The run's peak and what it is: the device's where the framework reports it, else the peak host RSS."""
    if memory.get("device_peak_bytes") is not None:
        return int(memory["device_peak_bytes"]), f"device peak ({memory.get('source') or 'the framework'})"
    rss = memory.get("peak_host_rss_bytes")
    return (int(rss) if rss is not None else None), "peak host RSS of the run's process"


def add_runtime(ledger: MemoryLedger, extra: dict[str, int] | None = None) -> None:
    """The runtime's share: the peak minus every other measured part (None where the peak is unknown)."""
    share = ledger.peak_bytes - ledger.accounted_bytes() if ledger.peak_bytes is not None else None
    ledger.parts.append(MemoryPart("runtime", share, RUNTIME_SOURCE.format(peak=ledger.peak_source), estimate=False,
                                   detail=extra or {}))


# -- XLA modes ------------------------------------------------------------------------------------------------------
def _leaf_bytes(tree) -> int:
    import jax

    return sum(int(leaf.size) * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(tree))


def _step_count_bytes(tree) -> int:
    """Bytes of the integer scalars in an optimizer state (TrainState.step, optax's count): its step counts."""
    import jax
    import numpy as np

    return sum(leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(tree)
               if leaf.ndim == 0 and np.issubdtype(leaf.dtype, np.integer))


def xla_ledger(session, memory: dict) -> MemoryLedger:
    import jax

    options = session.options
    state = session.state
    images, labels = session.step_batch()
    # The run's own jitted step, lowered with the arguments it ran on: jit's cache hands back the executable that ran
    # (no compile, no second dump), with its donation. A new jax.jit compiled the step again, without donate_argnums.
    analysis = session.train_step.lower(state, images, labels).compile().memory_analysis()
    peak, peak_source = peak_of(memory)
    ledger = MemoryLedger(peak_bytes=peak, peak_source=peak_source, optimizer=options.optimizer)
    parameters = _leaf_bytes(session.parameters(state))
    buffers = _leaf_bytes(session.buffers(state))
    optimizer_state = _leaf_bytes(state) - parameters - buffers
    counts = _step_count_bytes(session.optimizer_state(state))
    inputs = _leaf_bytes((images, labels))
    pytree = "the step's argument buffers, by the state pytree's leaves"
    ledger.parts += [
        MemoryPart("parameters", parameters, pytree,
                   detail={"tensors": len(jax.tree_util.tree_leaves(session.parameters(state)))}),
        MemoryPart("buffers", buffers, pytree),
        MemoryPart("optimizer_state", optimizer_state, f"{pytree} (the step counts included)",
                   detail={"moments_bytes": optimizer_state - counts, "step_count_bytes": counts,
                           "moments_per_parameter": MOMENTS_PER_PARAMETER[options.optimizer]}),
        MemoryPart("inputs", inputs, "the step's argument buffers: the batch (images, labels)"),
    ]
    if analysis is None:
        ledger.notes.append(f"{jax.default_backend()}: the compiled step offers no memory analysis; outputs and "
                            "temporaries are in the runtime's share")
        add_runtime(ledger)
        return ledger
    output_bytes, alias_bytes = int(analysis.output_size_in_bytes), int(analysis.alias_size_in_bytes)
    temp_bytes = int(analysis.temp_size_in_bytes)
    ledger.compiled = {"argument_bytes": int(analysis.argument_size_in_bytes), "output_bytes": output_bytes,
                       "alias_bytes": alias_bytes, "temp_bytes": temp_bytes,
                       "generated_code_bytes": int(analysis.generated_code_size_in_bytes),
                       "peak_bytes": int(getattr(analysis, "peak_memory_in_bytes", 0)) or None, "source": XLA_ANALYSIS}
    new_outputs = output_bytes - alias_bytes
    ledger.parts += [
        MemoryPart("outputs", new_outputs, f"{XLA_ANALYSIS}: output bytes minus those aliased to arguments (the "
                                           "updated state written to new buffers, the loss, XLA's output tuple)",
                   detail={"state_bytes": parameters + buffers + optimizer_state,
                           "aliased_bytes": alias_bytes}),
        MemoryPart("temporaries", temp_bytes, f"{XLA_ANALYSIS}: temporary buffers"),
        MemoryPart("gradients", parameters, "the parameters' bytes: the gradients have their shapes and dtypes and "
                                            "live in XLA's temporaries", estimate=True, within="temporaries"),
    ]
    residuals = session.workload.residuals
    if residuals is not None:
        kept = jax.eval_shape(residuals, state, images, labels)
        ledger.parts.append(MemoryPart(
            "activations", _leaf_bytes(kept), "jax.vjp residuals of the loss without the parameters and the batch "
                                              "(what autodiff keeps for backward, before XLA fuses or rematerialises)",
            estimate=True, within="temporaries"))
    add_runtime(ledger)
    return ledger


# -- PyTorch modes --------------------------------------------------------------------------------------------------
def _tensor_bytes(tensor) -> int:
    return int(tensor.numel()) * tensor.element_size()


def torch_ledger(session, memory: dict, lazy: bool) -> MemoryLedger:
    import torch

    options = session.options
    workload = session.built_workload
    model = workload.model
    peak, peak_source = peak_of(memory)
    ledger = MemoryLedger(peak_bytes=peak, peak_source=peak_source, optimizer=options.optimizer)
    parameters = list(model.parameters())
    tensors = "the tensors' own sizes (numel x element size)"
    parameter_bytes = sum(_tensor_bytes(p) for p in parameters)
    gradient_bytes = sum(_tensor_bytes(p.grad) for p in parameters if p.grad is not None)
    moments = counts = 0
    for per_parameter in workload.optimizer.state.values():
        for value in per_parameter.values():
            if isinstance(value, torch.Tensor):
                if value.numel() == 1 and value.dim() == 0:
                    counts += _tensor_bytes(value)  # AdamW's per-parameter step
                else:
                    moments += _tensor_bytes(value)
    images, labels = session.step_batch()
    ledger.parts += [
        MemoryPart("parameters", parameter_bytes, tensors, detail={"tensors": len(parameters)}),
        MemoryPart("buffers", sum(_tensor_bytes(b) for b in model.buffers()), tensors),
        MemoryPart("gradients", gradient_bytes, f"{tensors}: the .grad of every parameter after the last step"),
        MemoryPart("optimizer_state", moments + counts, f"{tensors}: the optimizer's state",
                   detail={"moments_bytes": moments, "step_count_bytes": counts,
                           "moments_per_parameter": MOMENTS_PER_PARAMETER[options.optimizer]}),
        MemoryPart("inputs", _tensor_bytes(images) + _tensor_bytes(labels), f"{tensors}: one batch"),
    ]
    if lazy:
        lazy_parts(ledger, session)
        add_runtime(ledger)
        return ledger
    eager = getattr(model, "_orig_mod", model)  # torch.compile's wrapper keeps the eager module
    compiled = eager is not model
    ledger.parts.append(MemoryPart("activations", saved_for_backward(eager, workload, images, labels, parameters),
                                   "storages autograd saves for backward in one eager forward (saved_tensors_hooks), "
                                   "without the parameters and the batch" +
                                   ("; the eager module's forward stands in for the compiled graph's" if compiled
                                    else ""), estimate=compiled))
    runtime_extra: dict[str, int] = {}
    if workload.device.type == "cuda":
        allocated = torch.cuda.max_memory_allocated(workload.device)
        temporaries = max(allocated - ledger.accounted_bytes(), 0)
        ledger.parts.append(MemoryPart("temporaries", temporaries, "torch.cuda.max_memory_allocated() minus the "
                                       "other parts"))
        runtime_extra["allocator_cached_bytes"] = torch.cuda.max_memory_reserved(workload.device) - allocated
    else:
        ledger.parts.append(MemoryPart("temporaries", None, "not measured: the CPU allocator keeps no statistics; "
                                       "the temporaries are in the runtime's share"))
    add_runtime(ledger, runtime_extra)
    return ledger


def lazy_parts(ledger: MemoryLedger, session) -> None:
    """torch_xla: the step's temporaries from XLA's memory analysis of its compiled graph, as torch_xla's compilation
    analysis reports it (the largest of the train step's graphs: the others are the first steps' variants)."""
    graphs = [g for g in session.step_compilations() if "temp_bytes" in g.sizes]
    if not graphs:
        ledger.parts.append(MemoryPart("activations", None, "not measured: torch_xla traces forward and backward into "
                                       "one XLA graph and exposes no buffer assignment of it while it runs"))
        ledger.parts.append(MemoryPart("temporaries", None, "not measured (as the activations): in the runtime's "
                                       "share; with --dump-hlo, explain reads them from XLA's buffer assignment of "
                                       "the step's graph"))
        return
    step = max(graphs, key=lambda g: g.sizes["temp_bytes"])
    source = (f"{torch_xla_analysis.SOURCE}: XLA's memory analysis of the step's compiled graph (graph hash "
              f"{step.graph_hash}), printed in GiB to 6 decimals")
    ledger.compiled = {**step.sizes, "peak_bytes": None, "source": source}
    ledger.parts.append(MemoryPart("temporaries", step.sizes["temp_bytes"], f"{source}: temporary buffers",
                                   detail={"resolution_bytes": torch_xla_analysis.SIZE_RESOLUTION_BYTES}))
    ledger.parts.append(MemoryPart("activations", None, "not measured apart: torch_xla traces forward and backward "
                                   "into one XLA graph, whose activations are among its temporaries"))


def saved_for_backward(model, workload, images, labels, parameters: list[Any]) -> int:
    """Bytes of the distinct storages autograd saves for backward in one forward of `model` (no backward: the graph
    is dropped), without the parameters' and the batch's storages, which are counted as their own parts."""
    import torch

    def storage_key(tensor) -> int:
        return tensor.untyped_storage().data_ptr()

    known = {storage_key(t) for t in (*parameters, images, labels)}
    saved: dict[int, int] = {}

    def pack(tensor):
        key = storage_key(tensor)
        if key not in known:
            saved[key] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), workload.autocast():
        workload.model_forward(model, images, labels)
    return sum(saved.values())
