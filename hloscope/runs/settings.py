"""What a run was set to, and what was set differently between two runs: the configuration a fair comparison must
hold equal (explain lists the differences first; compare's fairness audit tabulates them before timing).

`settings(run)` flattens the fields of run.json that change what a step computes or how fast it can run (model and
its size, batch, precision and matmul precision in effect, data path, attention, device, threads, library versions,
XLA flags) into `name -> text`; `differences(a, b)` lists the names whose values differ. The mode itself (framework,
compile) is what a comparison compares and is not listed.
"""

from __future__ import annotations

# config keys that are not about the work or its speed: how long to run, what to record, where.
_NOT_CONFIG = {"mode", "steps", "warmup", "dump_hlo", "profile", "profile_steps", "keep_all", "out", "run_id",
               "compile_model", "seed", "json", "timeout"}
# environment keys that identify the machine the same way in every framework's record (each framework names its
# device differently, `cpu:0` / `xla:0`: the platform is compared instead, from explain.collect).
_MACHINE = ("cpu_model", "cpu_count", "hostname", "gpu_name", "gpu_count")
# Environment variables that change threading or compilation.
_ENV_PREFIXES = ("XLA_", "OMP_", "MKL_", "TF_", "JAX_", "PJRT_", "TORCH", "PYTORCH", "CUDA_", "NCCL_", "HLOSCOPE_TEST")


def _text(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _section(record: dict, key: str) -> dict:
    """record[key] when it is a dict (run.json is user-editable: anything else counts as absent)."""
    value = record.get(key)
    return value if isinstance(value, dict) else {}


def settings(run: dict, matmul_precision: str | None = None, compute_dtype: str | None = None) -> dict[str, str]:
    """The run's settings that matter for a comparison, flattened to text."""
    out: dict[str, str] = {}
    config = _section(run, "config")
    for key, value in config.items():
        if key in _NOT_CONFIG or value is None:
            continue
        if isinstance(value, dict):
            for inner, item in value.items():
                if not isinstance(item, (dict, list)) and item is not None:
                    out[f"{key}.{inner}"] = _text(item)
        elif not isinstance(value, list):
            out[key] = _text(value)
    model_config = _section(config, "model_config")
    environment = _section(run, "environment")
    recorded = _section(environment, "attention").get("implementation")
    out.setdefault("attention", _text(recorded or config.get("attention") or model_config.get("attn_implementation")
                                      or "eager"))
    out.pop("model_config.attn_implementation", None)
    for key in _MACHINE:
        if environment.get(key) not in (None, "", [], {}):
            out[f"machine.{key}"] = _text(environment[key])
    platform = device_platform(environment)
    if platform:
        out["machine.device platform"] = platform
    if matmul_precision:
        out["matmul precision in effect"] = matmul_precision
    if compute_dtype:
        out["compute dtype in effect"] = compute_dtype
    for section in ("packages", "threads"):
        values = environment.get(section)
        if isinstance(values, dict):
            for name, version in values.items():
                if not isinstance(version, (dict, list)) and version is not None:
                    out[f"{section}.{name}"] = _text(version)
    env = environment.get("env")
    if isinstance(env, dict):
        for name, value in env.items():
            if name.startswith(_ENV_PREFIXES) and not isinstance(value, (dict, list)):
                if name == "XLA_FLAGS":  # where a dump goes differs per run and changes nothing about the step
                    value = " ".join(f for f in str(value).split() if not f.startswith("--xla_dump"))
                if value:
                    out[f"env.{name}"] = _text(value)
    return out


def differences(a: dict[str, str], b: dict[str, str]) -> list[dict]:
    """[{"field", "a", "b"}] for every setting both runs recorded with different values. A setting only one run
    recorded is not a difference: frameworks record different things (PyTorch has no compute-dtype field, hloscope
    sets XLA_FLAGS only for the XLA modes' dumps)."""
    return [{"field": name, "a": a[name], "b": b[name]} for name in sorted(set(a) & set(b)) if a[name] != b[name]]


def device_platform(environment: dict) -> str:
    """cpu | gpu | tpu | "" from the device fields the backends record (their names differ by framework)."""
    for key in ("backend", "device_type", "pjrt_device", "device_kind", "device", "device_name", "platform"):
        text = str(environment.get(key) or "").lower()
        if "cuda" in text or "gpu" in text or "rocm" in text:
            return "gpu"
        if "tpu" in text:
            return "tpu"
        if text.startswith("cpu"):
            return "cpu"
    return ""


def precision_setting(environment: dict, name: str) -> str | None:
    """The first setting under environment.precision whose key contains `name` (frameworks name them differently)."""
    precision = environment.get("precision")
    if isinstance(precision, dict):
        for key, value in precision.items():
            if name in key and isinstance(value, str) and value:
                return value
    return None
