"""The registry of modes: the one place that says what `--mode` / `--modes` can be and what each mode is.

Everything that needs a mode list or a per-mode fact reads it from here: the CLI's `--mode` choices and `--modes`
parsing, compare's default set (the modes whose packages are installed), the run-directory names, which frameworks a
run process may import, the Session class the driver builds, the pre-flight check, and `--target`'s graph capture.
Adding a mode is one `Mode(...)` entry below plus its session module (and, if it can be compiled for a GPU target, its
capture function).

This module imports no framework (nor anything heavy): the paths to code (`"module:attribute"`) are imported only
when `resolve` is called, by the one run process that needs them.

Where each mode can run (CPU / GPU / TPU) is said in `runs_on`; in short: eager PyTorch and inductor run on the CPU
and CUDA GPUs; PyTorch/XLA 2.9 (pinned) runs on the CPU and TPUs and has no CUDA backend (on a GPU it needs torch_xla
<= 2.8 with its CUDA plugin); JAX runs on the CPU, CUDA GPUs (jax[cuda12]) and TPUs, and so does torchax (the PyTorch
model traced into JAX).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal, get_args

from hloscope.errors import UsageError

# Kinds of graph a mode dumps with --dump-hlo (run.json `graph.kind`).
DUMPS_XLA_HLO = "xla"            # XLA HLO text (before/after optimizations), buffer assignment, memory report
DUMPS_INDUCTOR = "inductor"      # inductor's generated code (output_code.py); no XLA HLO
DUMPS_NONE = "none"              # eager: no graph at all
# Profile formats written by --profile (run.json artifact `format`).
TRACE_XPLANE = "xplane"          # <run>/plugins/profile/<timestamp>/<host>.xplane.pb (XLA profiler)
TRACE_KINETO = "kineto"          # <run>/kineto/<host>_<pid>.<n>.pt.trace.json (torch.profiler)


@dataclass(frozen=True)
class Mode:
    name: str                       # what the user types: `--mode NAME`, `--modes A,B`; run.json `mode`
    dir_name: str                   # run-directory prefix and its folder inside a comparison (filesystem-friendly)
    framework: str                  # `run --mode FRAMEWORK [--compile-model]` names it with this and `compile`
    compile: bool                   # torch.compile'd (run.json `config.compile_model`)
    packages: tuple[str, ...]       # import names that must be installed (compare skips the mode without them)
    imports: tuple[str, ...]        # the framework modules a run process of this mode loads (and no other)
    session: str                    # "module:Class" of its Session (hloscope.backends.base), imported lazily
    dumps: str                      # DUMPS_XLA_HLO | DUMPS_INDUCTOR | DUMPS_NONE: what --dump-hlo keeps
    trace_format: str               # TRACE_XPLANE | TRACE_KINETO: what --profile writes
    devices: tuple[str, ...]        # where it runs with the pinned versions: "cpu", "cuda", "tpu"
    runs_on: str                    # the same in one line for people, with the version caveats
    target_capture: str | None = None  # "module:function" capturing its train-step graph for --target, or None
    preflight: str | None = None    # "module:function(device)" refusing an impossible device before anything starts
    # --attention values the mode honours (transformers' attn_implementation: eager, sdpa, flash = flash_attention_2)
    attention: tuple[str, ...] = ("eager",)
    attention_note: str = ""       # why the others are refused, said in the one-line refusal
    # --devices N > 1: how the mode runs data-parallel over N devices, in one line for run.json and people; "" where it
    # does not (refused in one line naming the mode). hloscope/backends/devices.py checks and prepares it.
    data_parallel: str = ""
    data_parallel_note: str = ""   # why --devices N > 1 is refused, said in the one-line refusal
    # Donation of the train state (--donate / --no-donate): what the mode does without either (True: the step's state
    # buffers are donated to its outputs; False: the updated state gets new buffers; None: the state is updated in
    # place, where donation does not apply), the values it accepts, and why it refuses the others.
    donates: bool | None = None
    donate_choices: tuple[bool, ...] = ()
    donation_note: str = ""
    # --compile-mode values the mode's torch.compile takes (empty: the mode does not call torch.compile)
    compile_modes: tuple[str, ...] = ()
    compile_mode_note: str = ""

    @property
    def xla(self) -> bool:
        """Whether the mode's train step is an XLA graph (HLO dumps, xplane traces)."""
        return self.dumps == DUMPS_XLA_HLO


_TORCH_XLA_WHERE = ("CPU and TPU with the pinned torch_xla 2.9 (PJRT_DEVICE=CPU|TPU); no CUDA in 2.9: on a GPU only "
                    "with torch_xla <= 2.8 and its CUDA plugin (PJRT_DEVICE=CUDA)")

# transformers' attn_implementation for the PyTorch modes: eager, sdpa (F.scaled_dot_product_attention) and flash
# (flash_attention_2: the flash-attn package on a CUDA GPU; the session refuses it elsewhere)
_TORCH_ATTENTION = ("eager", "sdpa", "flash")
# --devices N: one process, a jax.sharding.Mesh over N devices (hloscope/backends/sharding.py)
_JAX_DATA_PARALLEL = ("jax.sharding.Mesh over N devices (axis 'data'), the batch sharded on it, parameters and optimizer "
                      "state replicated, one jax.jit step: XLA's SPMD partitioner inserts the gradient all-reduce")
# --devices N for the PyTorch modes: N processes (hloscope/backends/ddp.py)
_DDP_DATA_PARALLEL = ("torch.nn.parallel.DistributedDataParallel over N processes started like torchrun's (RANK, "
                      "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT): gloo on the CPU, NCCL on CUDA GPUs; each rank steps "
                      "on batch / N samples of the same global batch, DDP all-reduces the gradients in backward")
_SPMD_DATA_PARALLEL = ("torch_xla SPMD: torch_xla.runtime.use_spmd(), a Mesh over N devices (axis 'data'), each batch "
                       "mark_sharding'd on it, parameters replicated, one lazy graph: XLA's SPMD partitioner inserts "
                       "the gradient all-reduce")
# torch.compile's `mode` values (--compile-mode); "default" is torch.compile's mode=None
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
COMPILE_MODES: tuple[str, ...] = get_args(CompileMode)
_IN_PLACE = "eager PyTorch updates the state in place; donation does not apply"
_JAX_DONATION = (True, False)  # jax.jit(..., donate_argnums=0) on the train state, or not
_NO_FLASH = "flash_attention_2 needs the flash-attn CUDA extension; PyTorch/XLA 2.9 has no CUDA"

MODES: tuple[Mode, ...] = (
    Mode(name="pytorch", dir_name="pytorch", framework="pytorch", compile=False,
         packages=("torch", "transformers"), imports=("torch",),
         session="hloscope.backends.pytorch_mode:PytorchSession",
         dumps=DUMPS_NONE, trace_format=TRACE_KINETO, devices=("cpu", "cuda"),
         runs_on="CPU and CUDA GPUs (torch.cuda); not TPU", attention=_TORCH_ATTENTION,
         data_parallel=_DDP_DATA_PARALLEL, donation_note=_IN_PLACE),
    Mode(name="pytorch+compile", dir_name="pytorch_compile", framework="pytorch", compile=True,
         packages=("torch", "transformers"), imports=("torch",),
         session="hloscope.backends.pytorch_mode:PytorchSession",
         dumps=DUMPS_INDUCTOR, trace_format=TRACE_KINETO, devices=("cpu", "cuda"),
         runs_on="CPU (inductor C++ kernels) and CUDA GPUs (Triton kernels); not TPU", attention=_TORCH_ATTENTION,
         data_parallel=_DDP_DATA_PARALLEL + " (torch.compile of the DDP module: dynamo's DDPOptimizer splits the "
                                            "graph at the gradient buckets)",
         donation_note="PyTorch updates the state in place (the optimizer runs eagerly on the compiled model's "
                       "parameters); donation does not apply",
         compile_modes=COMPILE_MODES),
    Mode(name="torch_xla", dir_name="torch_xla", framework="torch_xla", compile=False,
         packages=("torch", "torch_xla", "transformers"), imports=("torch", "torch_xla"),
         session="hloscope.backends.torch_xla_mode:TorchXlaSession",
         dumps=DUMPS_XLA_HLO, trace_format=TRACE_XPLANE, devices=("cpu", "tpu"), runs_on=_TORCH_XLA_WHERE,
         target_capture="hloscope.targets.capture_torch_xla:capture_for_target",
         preflight="hloscope.backends:torch_xla_preflight", attention=("eager", "sdpa"), attention_note=_NO_FLASH,
         data_parallel=_SPMD_DATA_PARALLEL,
         # --no-donate: XLA_ENABLE_PARAM_ALIASING=0 before torch_xla starts (its graphs then alias no parameter)
         donates=True, donate_choices=(True, False)),
    Mode(name="torch_xla+compile", dir_name="torch_xla_compile", framework="torch_xla", compile=True,
         packages=("torch", "torch_xla", "transformers"), imports=("torch", "torch_xla"),
         session="hloscope.backends.torch_xla_mode:TorchXlaSession",
         dumps=DUMPS_XLA_HLO, trace_format=TRACE_XPLANE, devices=("cpu", "tpu"), runs_on=_TORCH_XLA_WHERE,
         # no target capture: dynamo splits the step into several graphs (forward, backward, optimizer)
         preflight="hloscope.backends:torch_xla_preflight", attention=("eager", "sdpa"), attention_note=_NO_FLASH,
         data_parallel_note="under SPMD (torch_xla 2.9, 2 CPU devices) dynamo's openxla graphs train differently from "
                            "one device (vit-tiny batch 8: the same first loss, 2.23297 against 2.22923 after 11 "
                            "steps, where lazy torch_xla SPMD matches to 1e-7): use --mode torch_xla",
         donates=True, donate_choices=(True,),
         donation_note="torch_xla's openxla dynamo bridge aliases the graphs' inputs with their outputs itself "
                       "(torch_xla/_dynamo/dynamo_bridge.py), and hloscope does not turn that off: use --mode torch_xla",
         compile_modes=("default",),
         compile_mode_note="torch.compile passes a mode to its backend, and the openxla backend (aot_autograd) takes "
                           "none"),
    Mode(name="jax", dir_name="jax", framework="jax", compile=False,
         packages=("jax", "flax", "optax", "transformers"), imports=("jax",),
         session="hloscope.backends.jax_mode:JaxSession",
         dumps=DUMPS_XLA_HLO, trace_format=TRACE_XPLANE, devices=("cpu", "cuda", "tpu"),
         runs_on="CPU, CUDA GPUs (jax[cuda12]) and TPU (jax[tpu]); always jitted",
         target_capture="hloscope.targets.capture_jax:capture_for_target",
         data_parallel=_JAX_DATA_PARALLEL, donates=False, donate_choices=_JAX_DONATION,
         attention_note="transformers' Flax models (FlaxViTSelfAttention and the GPT-2, Llama and BERT ones) have one "
                        "attention, softmax(QK^T)V written out in jnp (dot_product_attention_weights), with no "
                        "attn_implementation switch"),
    # PyTorch on XLA that still has a future: the PyTorch model traced by torchax into one jax.jit step (optax SGD).
    Mode(name="torchax", dir_name="torchax", framework="torchax", compile=False,
         packages=("torch", "torchax", "jax", "optax", "transformers"), imports=("torch", "torchax", "jax"),
         session="hloscope.backends.torchax_mode:TorchaxSession",
         dumps=DUMPS_XLA_HLO, trace_format=TRACE_XPLANE, devices=("cpu", "cuda", "tpu"),
         runs_on="wherever JAX runs: CPU, CUDA GPUs (jax[cuda12], from PyPI wheels) and TPU; always jitted",
         target_capture="hloscope.targets.capture_torchax:capture_for_target",
         data_parallel=_JAX_DATA_PARALLEL + " (the torch parameters' JAX arrays, through torchax)",
         donates=False, donate_choices=_JAX_DONATION,
         attention=("eager", "sdpa"), attention_note="flash_attention_2 calls the flash-attn CUDA extension, which "
                                                       "torchax cannot trace into JAX"),
)

BY_NAME: dict[str, Mode] = {mode.name: mode for mode in MODES}
MODE_NAMES: tuple[str, ...] = tuple(BY_NAME)
FRAMEWORKS: tuple[str, ...] = tuple(dict.fromkeys(mode.framework for mode in MODES))
# What `run --mode` accepts: each framework (its plain mode) and every compiled mode by its full name.
CLI_CHOICES: tuple[str, ...] = tuple(dict.fromkeys([*FRAMEWORKS, *(m.name for m in MODES if m.compile)]))
TARGET_MODES: tuple[str, ...] = tuple(mode.name for mode in MODES if mode.target_capture)
DATA_PARALLEL_MODES: tuple[str, ...] = tuple(mode.name for mode in MODES if mode.data_parallel)
FRAMEWORK_IMPORTS: tuple[str, ...] = tuple(dict.fromkeys(name for mode in MODES for name in mode.imports))
# The frameworks whose step is a jax.jit program (JAX itself, and torchax on JAX arrays): XLA's memory analysis of
# the compiled step and jax.monitoring's events describe them.
JAX_FRAMEWORKS: tuple[str, ...] = tuple(dict.fromkeys(mode.framework for mode in MODES if "jax" in mode.imports))
# The module whose presence in sys.modules says a framework's runtime has been imported: jax for the JAX frameworks,
# else the last module its mode imports (torch, torch_xla).
FRAMEWORK_MODULE: dict[str, str] = {mode.framework: "jax" if "jax" in mode.imports else mode.imports[-1]
                                    for mode in MODES}


def get_mode(name: str) -> Mode:
    try:
        return BY_NAME[name]
    except KeyError:
        raise UsageError(f"unknown mode(s) {name}; choose from {', '.join(MODE_NAMES)}") from None


def mode_name(framework: str, compile_model: bool) -> str:
    """`run --mode pytorch --compile-model` -> `pytorch+compile`. A framework without a compiled variant (JAX, which
    is always jitted) ignores --compile-model."""
    plain = [m for m in MODES if m.framework == framework]
    if not plain:
        get_mode(framework)  # raises: unknown
    for mode in plain:
        if mode.compile == compile_model:
            return mode.name
    return plain[0].name


def run_label(mode: str, devices: int | None) -> str:
    """How a run of `mode` on `devices` devices is named in a comparison over several device counts (`compare
    --devices 1,2,4`): `jax (2 devices)`; the mode alone when the count is unknown."""
    if devices is None:
        return mode
    return f"{mode} ({devices} device{'' if devices == 1 else 's'})"


def run_dir_name(mode: str, devices: int | None) -> str:
    """The folder of a run of `mode` on `devices` devices inside a comparison over several device counts:
    `jax-2dev`; the mode's own folder name when the count is not part of the comparison (None)."""
    name = get_mode(mode).dir_name
    return name if devices is None else f"{name}-{devices}dev"


def parse_device_counts(text: str) -> list[int]:
    """`--devices 1,2,4` (compare): positive counts, each once, in increasing order."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UsageError(f"--devices {text}: expected a device count or a comma-separated list (1,2,4)") from None
    if not counts or counts[0] < 1:
        raise UsageError(f"--devices {text}: expected device counts >= 1")
    return counts


def parse_modes(text: str) -> list[str]:
    """`--modes a,b`: known names, each once, in the order given."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in BY_NAME]
    if unknown:
        raise UsageError(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODE_NAMES)}")
    if not modes:
        raise UsageError("no modes given")
    return list(dict.fromkeys(modes))


def setting_refusal(mode: str, setting: str, value: Any) -> str | None:
    """Why `mode` cannot run with run option `setting` (donate, compile_mode, fullgraph) set to `value`, in one line;
    None when it can (an unset value, None or False for fullgraph, is every mode's own behaviour)."""
    entry = get_mode(mode)
    if setting == "donate" and value is not None and value not in entry.donate_choices:
        return f"--{'' if value else 'no-'}donate --mode {mode}: {entry.donation_note}"
    if setting == "compile_mode" and value is not None and value not in entry.compile_modes:
        why = (entry.compile_mode_note if entry.compile else
               "the mode does not call torch.compile (pytorch+compile and torch_xla+compile do)")
        return f"--compile-mode {value} --mode {mode}: {why}"
    if setting == "fullgraph" and value and not entry.compile:
        return (f"--fullgraph --mode {mode}: the mode does not call torch.compile (pytorch+compile and "
                "torch_xla+compile do)")
    return None


def settings_refusal(mode: str, donate: bool | None, compile_mode: str | None, fullgraph: bool) -> str | None:
    """The first refusal of `setting_refusal` among the mode-specific run options, or None."""
    for setting, value in (("donate", donate), ("compile_mode", compile_mode), ("fullgraph", fullgraph)):
        refusal = setting_refusal(mode, setting, value)
        if refusal is not None:
            return refusal
    return None


def donation_in_effect(mode: str, donate: bool | None) -> bool | None:
    """Whether a run of `mode` donated its state: `--donate/--no-donate` where given, else the mode's own behaviour
    (None: the state is updated in place, where donation does not apply)."""
    return donate if donate is not None else get_mode(mode).donates


def resolve(path: str) -> Any:
    """Import `"package.module:attribute"` (a path from this registry) and return the attribute."""
    module_name, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
