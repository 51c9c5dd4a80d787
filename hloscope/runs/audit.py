"""The fairness audit of `compare`: every setting in effect per mode, and which ones differ.

Before timing, compare sets every mode up in its own process (`run --setup-only --json`: the session's setup and what
it reports, no step) and builds, from each record, the settings that a fair comparison holds equal: explain's
`settings()` (model, batch, precision requested, data path, device, attention, machine, package versions, threads, the
XLA/OMP/MKL/TF/JAX/PJRT/TORCH environment variables), plus the precision in effect normalised across frameworks
(compute dtype, parameter dtype, matmul precision: PyTorch's `high` and JAX's `tensorfloat32` are both TF32), the
device platform, compile API and options, and buffer donation. After timing it is built again from the timed runs'
run.json (dynamo's graph breaks and recompiles are known only then).

A setting is a `mismatch` when two or more modes recorded it with different values (a setting only some frameworks
record is not one: `PJRT_DEVICE` exists only for torch_xla). Two kinds of setting differ by design and are listed
apart, not flagged: how the mode compiles (`compile.*`: that is what the comparison compares) and whether the optimizer
updates the state in place (`donation.*`: a property of the framework's update, reported because it changes memory
and copies).

Nothing here imports a framework.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import msgspec

from hloscope.errors import InputError
from hloscope.modes import get_mode
from hloscope.runs.layout import RUN_FILE
from hloscope.runs.records import Audit, AuditRow, AuditStage, ComparisonEntry, Environment, RunRecord, decode_run
from hloscope.runs.rundir import load_run
from hloscope.runs.runner import run_command
from hloscope.runs.settings import compute_dtype, matmul_precision, settings

BY_DESIGN_PREFIXES = ("compile.", "donation.")
# Matmul precision names -> one vocabulary (torch: highest/high/medium; JAX: highest/tensorfloat32/bfloat16/default;
# torch_xla: highest/high/default).
_MATMUL = {"highest": "fp32", "float32": "fp32", "high": "tf32", "tensorfloat32": "tf32", "medium": "bf16",
           "bfloat16": "bf16", "default": "default"}


def _matmul(environment: Environment, compute: str | None) -> str | None:
    raw = matmul_precision(environment)
    if compute and compute not in ("float32", "fp32"):
        # Under autocast / a bf16 compute dtype the matmuls take bf16 inputs: the fp32-matmul setting does not apply.
        return f"{compute} inputs"
    if raw is None:
        return None
    return _MATMUL.get(raw, raw)


def mode_settings(record: RunRecord) -> dict[str, str]:
    """One mode's settings in effect, `name -> text`, from its run.json (timed, compiled or `--setup-only`)."""
    environment = record.environment
    compute = compute_dtype(environment)
    out = settings(record, _matmul(environment, compute), compute)
    if environment.precision is not None and environment.precision.param_dtype:
        out["parameter dtype"] = environment.precision.param_dtype
    for section, part in (("compile", environment.compile), ("donation", environment.donation)):
        if part is not None:
            for key, value in msgspec.structs.asdict(part).items():
                if key == "how":  # the sentence behind state_in_place: in run.json, too long for the table
                    continue
                if isinstance(value, dict):
                    value = ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "none"
                if value is not None and not isinstance(value, list):
                    out[f"{section}.{key}"] = str(value)
    total = record.compiles.total or {}
    for key in ("dynamo_graph_breaks", "dynamo_recompiles"):
        if key in total:
            out[f"compile.{key}"] = str(total[key])
    # config.target / check_parity are options of the comparison, the same for every mode by construction
    return out


def audit(records: list[tuple[str, RunRecord | None, str | None]], stage: str = "before timing") -> AuditStage:
    """comparison.json `audit` from `(mode, record or None, error or None)` in the comparison's order."""
    per_mode: dict[str, dict[str, str]] = {}
    errors: dict[str, str] = {}
    for mode, record, error in records:
        if record is None:
            errors[mode] = error or "not set up"
        else:
            per_mode[mode] = mode_settings(record)
    names = sorted({name for values in per_mode.values() for name in values})
    rows, mismatches, by_design = [], [], []
    for name in names:
        values = {mode: values[name] for mode, values in per_mode.items() if name in values}
        distinct = set(values.values())
        if len(values) < 2 or len(distinct) == 1:
            status = "same" if len(values) == len(per_mode) and len(distinct) == 1 else "recorded by some"
        elif name.startswith(BY_DESIGN_PREFIXES):
            status = "by design"
        else:
            status = "mismatch"
        row = AuditRow(setting=name, values=values, status=status)
        rows.append(row)
        if status == "mismatch":
            mismatches.append(row)
        elif status == "by design":
            by_design.append(row)
    return AuditStage(stage=stage, modes=list(per_mode), errors=errors, rows=rows, mismatches=mismatches,
                      by_design=by_design, ok=not mismatches)


def mismatch_lines(stage: AuditStage) -> list[str]:
    """`MISMATCH setting: mode=value, ...` per flagged setting (the terminal's red lines)."""
    return [f"MISMATCH {row.setting}: " + ", ".join(f"{mode}={value}" for mode, value in row.values.items())
            for row in stage.mismatches]


def recorded_mismatch_lines(section: Audit | None) -> list[str]:
    """Every mismatch a comparison.json's audit recorded, for explain to list first: the audit before timing, then
    the timed runs' mismatches it had not seen (`... (in the timed runs)`). [] without an audit or a mismatch."""
    lines: list[str] = []
    for stage, suffix in ((section.before_timing, ""), (section.timed_runs, " (in the timed runs)")) if section else ():
        if stage is not None:
            lines += [line + suffix for line in mismatch_lines(stage)
                      if line not in lines and line + suffix not in lines]
    return lines


def run_audit(modes: list[str], options_for, timeout_s: float | None = None,
              on_mode=lambda mode: None) -> AuditStage:
    """Before timing: set every mode up in its own process (`run --setup-only --json`, in a temporary directory that
    is removed after) and audit what each reports. A mode that cannot be set up is listed with its error."""
    records: list[tuple[str, RunRecord | None, str | None]] = []
    env = dict(os.environ, HLOSCOPE_NO_PROGRESS="1", PYTHONUNBUFFERED="1")
    with tempfile.TemporaryDirectory(prefix="hloscope-audit-") as scratch:
        for mode in modes:
            on_mode(mode)
            command = [*run_command(options_for(mode), Path(scratch)), "--setup-only"]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
            except subprocess.TimeoutExpired:
                records.append((mode, None, f"setup took over {timeout_s:g} s"))
                continue
            try:
                record = json.loads(done.stdout)
            except ValueError:
                record = None
            if isinstance(record, dict) and record.get("status") == "setup":
                # the record the child printed, as its run.json in the scratch directory holds it
                file = Path(scratch) / get_mode(mode).dir_name / RUN_FILE
                try:
                    records.append((mode, decode_run(file, record), None))
                except InputError as error:
                    records.append((mode, None, str(error)))
            else:
                lines = [line for line in done.stderr.splitlines() if line.strip()]
                reason = (record or {}).get("error") if isinstance(record, dict) else None
                records.append((mode, None, reason or (lines[-1] if lines else f"exit code {done.returncode}")))
    return audit(records)


def timed_audit(comparison_dir, entries: list[ComparisonEntry]) -> AuditStage:
    """After timing: the same audit from the timed runs' run.json (modes that failed are listed with their error);
    `entries`: the comparison's entries to audit (with several device counts, the runs at the audited count)."""
    records: list[tuple[str, RunRecord | None, str | None]] = []
    for entry in entries:
        mode = str(entry.mode)
        if entry.status != "ok":
            records.append((mode, None, f"{entry.status}: {entry.error}"))
            continue
        try:
            records.append((mode, load_run(Path(comparison_dir) / entry.dir, check_artifacts=False), None))
        except InputError as error:
            records.append((mode, None, str(error)))
    return audit(records, stage="timed runs")
