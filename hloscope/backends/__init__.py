"""The only package that runs torch, torch_xla or JAX. One module per framework, imported only when its mode runs.

Which modes exist, and which Session class implements each, is said by the registry in `hloscope.modes`.
"""

from __future__ import annotations

from importlib import metadata

from hloscope.backends.devices import check_devices
from hloscope.errors import UsageError
from hloscope.modes import MODES, get_mode, mode_name, parse_modes, resolve

__all__ = ["check_torch_xla_cuda", "mode_name", "parse_modes", "preflight", "torch_xla_preflight"]


# Model families torch_xla 2.9's openxla dynamo backend cannot train (torch.compile(model, backend="openxla")), with the
# error it raises. Cause, upstream (torch_xla/_dynamo/dynamo_bridge.py): the bridge dedups the forward graph's outputs
# when it traces them (Deduper, by IR/data id) and maps the compiled graph's run-time outputs back through that
# permutation, but the graph returns a different number of outputs at run time: GPT-2's forward traces 60 distinct
# outputs and returns 58 (recover() indexes past the end); BERT's traces 68, dedups them to 67 and returns 68, so every
# output after the duplicate shifts by one and the `loss` slot receives the (batch, 2) logits. Measured on gpt2-tiny and
# bert-tiny (docs/run.md); Llama, the ViTs and the ResNets compile and train.
OPENXLA_DYNAMO_BROKEN = {
    "gpt2": "IndexError: list index out of range (in torch_xla/_dynamo/dynamo_bridge.py Deduper.recover: the compiled "
            "forward returns 58 of the 60 outputs its bridge traced)",
    "bert": "RuntimeError: grad can be implicitly created only for scalar outputs (torch_xla/_dynamo/dynamo_bridge.py "
            "maps 68 run-time outputs through a 67-output dedup: the loss slot gets the logits)",
}


def preflight(mode: str, device: str, attention: str = "eager", devices: int = 1, batch_size: int = 1,
              preset=None) -> None:
    """Refuse combinations that cannot work before anything is created or imported (the mode's registry check)."""
    entry = get_mode(mode)
    check_devices(mode, devices, batch_size)
    if attention != "eager" and preset is not None and not preset.has_attention:
        raise UsageError(f"--attention {attention} --model {preset.name}: the model has no attention layer "
                         "(use --attention eager, the default)")
    family = getattr(preset, "family", None)
    if entry.framework == "torch_xla" and entry.compile and family in OPENXLA_DYNAMO_BROKEN:
        raise UsageError(f"--mode {mode} --model {preset.name}: torch_xla's openxla dynamo backend cannot train "
                         f"{family} models (torch_xla 2.9 fails with {OPENXLA_DYNAMO_BROKEN[family]}); use --mode "
                         "torch_xla (lazy) or torchax")
    if attention not in entry.attention:
        why = f": {entry.attention_note}" if entry.attention_note else ""
        raise UsageError(f"--attention {attention} --mode {mode}: this mode runs only --attention "
                         f"{' or '.join(entry.attention)}{why}")
    check = entry.preflight
    if check:
        resolve(check)(device)


def torch_xla_preflight(device: str) -> None:
    """torch_xla modes: --device cuda needs a torch_xla with CUDA (package metadata only, nothing imported)."""
    if device != "cuda":
        return

    try:
        version = metadata.version("torch_xla")
    except metadata.PackageNotFoundError:
        return  # the run itself reports the missing package
    check_torch_xla_cuda(version)


def check_torch_xla_cuda(version: str) -> None:
    """torch_xla removed its CUDA plugin in 2.9 (deprecated in 2.8): say so instead of failing deep inside PJRT."""
    major, minor = (int(part) for part in version.split(".")[:2])
    if (major, minor) >= (2, 9):
        on_cuda = " / ".join(dict.fromkeys(m.framework for m in MODES if "cuda" in m.devices))
        raise UsageError(f"--device cuda --mode torch_xla: torch_xla {version} has no CUDA support (removed in 2.9); "
                         "on a GPU install torch_xla<=2.8 with its CUDA plugin (torch_xla[cuda]) and the matching "
                         "torch, "
                         f"or use --mode {on_cuda}")
