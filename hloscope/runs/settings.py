"""What a run was set to, and what was set differently between two runs: the configuration a fair comparison must
hold equal (explain lists the differences first; compare's fairness audit tabulates them before timing).

`settings(run)` flattens the fields of run.json that change what a step computes or how fast it can run (model and
its size, batch, precision and matmul precision in effect, data path, attention, device, threads, library versions,
XLA flags) into `name -> text`; `differences(a, b)` lists the names whose values differ. The mode itself (framework,
compile) is what a comparison compares and is not listed.

A setting recorded by one run only is a difference (the other side is None: "not set") when its absence means
something: an environment variable (`env.*`: XLA_FLAGS set on one run, unset on the other), an option of the run
(the `config` keys: model, batch_size, seq_len, model_config.*, inject_host_delay_ms...) and the machine (`machine.*`).
Facts that each framework reports in its own way stay differences only when both runs recorded them (ONE_SIDED_IGNORED):
package versions (`packages.*`: jax's version in a PyTorch run's record says nothing about that run), thread figures
(`threads.*`: torch_num_threads exists in the PyTorch modes only) and the precision in effect ("compute dtype in
effect", "matmul precision in effect": PyTorch reports no compute dtype without autocast), and the environment variables
a framework or hloscope sets for itself during the mode's setup (PJRT_DEVICE and XLA_HLO_DEBUG by the torch_xla mode,
TORCHINDUCTOR_CACHE_DIR by inductor). In XLA_FLAGS, the flags that change nothing about the step are left out before
comparing: where a dump goes, and `--xla_cpu_enable_fast_math=false` (XLA's default, which torch_xla adds on import).
"""

from __future__ import annotations

import msgspec

from hloscope.modes import BY_NAME, donation_in_effect
from hloscope.runs.records import Environment, RunRecord

# config keys that are not about the work or its speed: how long to run, what to record, where.
_NOT_CONFIG = {"mode", "steps", "warmup", "dump_hlo", "profile", "profile_steps", "keep_all", "out", "run_id",
               "compile_model", "seed", "json", "timeout",
               # --xla-flags: the flags in effect are compared once, as env.XLA_FLAGS, whether given or inherited
               "xla_flags"}
# config values that mean "not set": a run without an injected delay reads the same as a record from before the option.
# Unlike backends/base.py's _UNSET_OPTIONS (keys not written when unset), this key is always written, as 0.
_UNSET_CONFIG = {"inject_host_delay_ms": 0}
# what a record from before an option ran with: SGD was the only optimizer before --optimizer
_BEFORE_THE_OPTION = {"optimizer": "sgd"}
# Settings each framework reports in its own way: a difference only where both runs recorded them (module docstring).
ONE_SIDED_IGNORED_PREFIXES = ("packages.", "threads.")
ONE_SIDED_IGNORED = ("matmul precision in effect", "compute dtype in effect", "env.PJRT_DEVICE", "env.XLA_HLO_DEBUG",
                     "env.TORCHINDUCTOR_CACHE_DIR")
# XLA_FLAGS entries that change nothing about the step: where a dump goes, XLA's own default that torch_xla adds
_INERT_XLA_FLAGS = ("--xla_dump", "--xla_cpu_enable_fast_math=false")
# environment keys that identify the machine the same way in every framework's record (each framework names its
# device differently, `cpu:0` / `xla:0`: the platform is compared instead, from explain.collect).
_MACHINE = ("cpu_model", "cpu_count", "hostname", "gpu_name", "gpu_count")
# Environment variables that change threading or compilation.
_ENV_PREFIXES = ("XLA_", "OMP_", "MKL_", "TF_", "JAX_", "PJRT_", "TORCH", "PYTORCH", "CUDA_", "NCCL_", "HLOSCOPE_TEST")


def _text(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def settings(run: RunRecord, matmul_precision: str | None = None, compute_dtype: str | None = None) -> dict[str, str]:
    """The run's settings that matter for a comparison, flattened to text."""
    # every option the run recorded, those this hloscope has no field for included (a newer writer's)
    config = {**_BEFORE_THE_OPTION, **run.section("config")}
    environment = run.environment
    out = _config_settings(config)
    model_config = config["model_config"] if isinstance(config.get("model_config"), dict) else {}
    recorded = environment.attention.implementation if environment.attention is not None else None
    out.setdefault("attention", _text(recorded or config.get("attention") or model_config.get("attn_implementation")
                                      or "eager"))
    out.pop("model_config.attn_implementation", None)
    for key in _MACHINE:
        value = getattr(environment, key)
        if value not in (None, ""):
            out[f"machine.{key}"] = _text(value)
    platform = device_platform(environment)
    if platform:
        out["machine.device platform"] = platform
    if matmul_precision:
        out["matmul precision in effect"] = matmul_precision
    if compute_dtype:
        out["compute dtype in effect"] = compute_dtype
    out.update(_flat("packages", environment.packages))
    if environment.threads is not None:
        out.update(_flat("threads", msgspec.structs.asdict(environment.threads)))
    out.update(_env_settings(environment.env))
    return out


def _config_settings(config: dict) -> dict[str, str]:
    """The run's options, one level of nesting flattened (`model_config.hidden_size`); unset ones left out."""
    out: dict[str, str] = {}
    for key, value in config.items():
        if key in _NOT_CONFIG or value is None or (key in _UNSET_CONFIG and value == _UNSET_CONFIG[key]):
            continue
        if isinstance(value, dict):
            out.update(_flat(key, value))
        elif not isinstance(value, list):
            out[key] = _text(value)
    return out


def _flat(prefix: str, values: object) -> dict[str, str]:
    """`prefix.name -> text` for the plain values of a dict (nested dicts and lists, and nulls, left out)."""
    if not isinstance(values, dict):
        return {}
    return {f"{prefix}.{name}": _text(value) for name, value in values.items()
            if not isinstance(value, (dict, list)) and value is not None}


def _env_settings(env: object) -> dict[str, str]:
    """The environment variables that change threading or compilation; in XLA_FLAGS, the inert flags left out."""
    if not isinstance(env, dict):
        return {}
    out: dict[str, str] = {}
    for name, value in env.items():
        if name.startswith(_ENV_PREFIXES) and not isinstance(value, (dict, list)):
            if name == "XLA_FLAGS":  # where a dump goes differs per run; torch_xla adds XLA's default
                value = " ".join(f for f in str(value).split() if not f.startswith(_INERT_XLA_FLAGS))
            if value:
                out[f"env.{name}"] = _text(value)
    return out


def one_sided_counts(name: str) -> bool:
    """Whether a setting recorded by one run only is a difference (the module docstring says which are)."""
    return not (name.startswith(ONE_SIDED_IGNORED_PREFIXES) or name in ONE_SIDED_IGNORED)


def differences(a: dict[str, str], b: dict[str, str]) -> list[dict]:
    """[{"field", "a", "b"}] for every setting the runs recorded with different values, and for every setting one run
    recorded and the other did not where that absence means something (`one_sided_counts`): None on the side that
    did not set it."""
    out = []
    for name in sorted(set(a) | set(b)):
        first, second = a.get(name), b.get(name)
        if first == second or ((first is None or second is None) and not one_sided_counts(name)):
            continue
        out.append({"field": name, "a": first, "b": second})
    return out


def device_platform(environment: Environment) -> str:
    """cpu | gpu | tpu | "" from the device fields the backends record (their names differ by framework)."""
    for key in ("backend", "device_type", "pjrt_device", "device_kind", "device", "device_name", "platform"):
        text = str(getattr(environment, key) or "").lower()
        if "cuda" in text or "gpu" in text or "rocm" in text:
            return "gpu"
        if "tpu" in text:
            return "tpu"
        if text.startswith("cpu"):
            return "cpu"
    return ""


def matmul_precision(environment: Environment) -> str | None:
    """The matmul precision the run had in effect (environment.precision, each framework's name for it)."""
    return environment.precision.matmul() if environment.precision is not None else None


def compute_dtype(environment: Environment) -> str | None:
    """The dtype the run computed in (environment.precision.compute_dtype: autocast's, else the parameters')."""
    return (environment.precision.compute_dtype or None) if environment.precision is not None else None


# Where a re-run's options keep what the run had in effect without asking (explain --test-hypotheses): the threads it
# could use, its donation, torch.compile's mode and fullgraph. Not a RunOptions field: a re-run keeps asking for what
# the run asked for, and only a tested setting is set to the faster side's value.
IN_EFFECT = "in_effect"


def in_effect(run: RunRecord) -> dict:
    """What a run had in effect for the settings `--threads`, `--donate`, `--compile-mode` and `--fullgraph` set,
    whether asked for or the mode's own: the CPUs it could use (environment.threads.cpu_affinity), whether it donated
    its state (its config's donate, else its mode's behaviour; None where the state is updated in place), and for the
    modes that call torch.compile, its mode ("default" for torch.compile's None) and fullgraph. None: not known."""
    config = run.section("config")
    mode = run.mode
    threads = config.get("threads") or (run.environment.threads.cpu_affinity if run.environment.threads else None)
    out: dict = {"threads": threads if isinstance(threads, int) and not isinstance(threads, bool) else None,
                 "donate": None, "compile_mode": None, "fullgraph": None}
    entry = BY_NAME.get(mode) if isinstance(mode, str) else None
    if entry is None:
        return out
    donate = config.get("donate")
    out["donate"] = donation_in_effect(entry.name, donate if isinstance(donate, bool) else None)
    recorded = run.environment.donation.state_in_place if run.environment.donation is not None else None
    if isinstance(recorded, bool) and out["donate"] is not None:  # what the run reported having done wins
        out["donate"] = recorded
    if entry.compile:
        out["compile_mode"] = config.get("compile_mode") or "default"
        out["fullgraph"] = bool(config.get("fullgraph"))
    return out
