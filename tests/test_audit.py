"""The fairness audit of `compare` (hloscope/runs/audit.py): every setting in effect per mode, mismatches flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import hloscope, run_record
from rich.console import Console

from hloscope.render.run_tables import audit_table
from hloscope.runs.audit import audit, mismatch_lines, mode_settings
from hloscope.runs.records import RunRecord


def _record(mode: str, precision: str = "fp32", *, compute="float32", matmul="highest", key="matmul_precision",
            in_place=True, **environment) -> RunRecord:
    return run_record({"mode": mode, "status": "setup",
            "config": {"mode": mode, "model": "vit-tiny", "batch_size": 8, "precision": precision, "data": "device",
                       "device": "auto", "attention": "eager", "model_config": {"hidden_size": 64}},
            "environment": {"cpu_model": "AMD EPYC", "cpu_count": 2, "device": "cpu",
                            "packages": {"torch": "2.9.0", "jax": "0.10.2"},
                            "precision": {"requested": precision, key: matmul, "compute_dtype": compute,
                                          "param_dtype": "float32"},
                            "attention": {"implementation": "eager"},
                            "compile": {"api": mode, "backend": "xla"},
                            "donation": {"state_in_place": in_place, "how": "..."},
                            "threads": {"cpu_affinity": 2}, "env": {}, **environment}})


def test_the_same_settings_under_framework_specific_names_are_no_mismatch():
    # PyTorch's `high` and JAX's `tensorfloat32` are both TF32; torch_xla names its setting mat_mul_precision
    result = audit([("pytorch", _record("pytorch", "tf32", matmul="high"), None),
                    ("jax", _record("jax", "tf32", matmul="tensorfloat32", in_place=False), None),
                    ("torch_xla", _record("torch_xla", "tf32", matmul="high", key="mat_mul_precision"), None)])
    assert result.ok and result.mismatches == []
    rows = {row.setting: row for row in result.rows}
    assert rows["matmul precision in effect"].values == {"pytorch": "tf32", "jax": "tf32", "torch_xla": "tf32"}
    assert rows["matmul precision in effect"].status == "same"
    # how each mode compiles and updates its state differs by design: shown, not flagged
    assert {row.setting for row in result.by_design} == {"compile.api", "donation.state_in_place"}
    assert "donation.how" not in rows


def test_one_mode_in_bf16_is_flagged():
    result = audit([("pytorch", _record("pytorch"), None),
                    ("jax", _record("jax", "bf16", compute="bfloat16", matmul="default"), None)])
    assert not result.ok
    flagged = {row.setting for row in result.mismatches}
    assert flagged == {"precision", "compute dtype in effect", "matmul precision in effect"}
    assert "MISMATCH precision: pytorch=fp32, jax=bf16" in mismatch_lines(result)


def test_a_setting_only_one_framework_records_is_not_a_mismatch_and_errors_are_listed():
    result = audit([("pytorch", _record("pytorch"), None),
                    ("torch_xla", _record("torch_xla", env={"PJRT_DEVICE": "CPU"}), None),
                    ("jax", None, "jax could not be set up")])
    assert result.ok and result.errors == {"jax": "jax could not be set up"}
    (row,) = [row for row in result.rows if row.setting == "env.PJRT_DEVICE"]
    assert row.status == "recorded by some"
    console = Console(width=200, record=True)
    console.print(audit_table(result))
    text = console.export_text()
    assert "not audited: jax could not be set up" in text
    assert "some modes" in text and "MISMATCH" not in text


def test_settings_reuse_explains_and_add_the_audit_fields():
    settings = mode_settings(_record("jax", "bf16", compute="bfloat16"))
    assert settings["precision"] == "bf16" and settings["attention"] == "eager"  # run_settings.settings
    assert settings["matmul precision in effect"] == "bfloat16 inputs"
    assert settings["parameter dtype"] == "float32" and settings["donation.state_in_place"] == "True"


@pytest.mark.slow
def test_compare_audits_before_timing_and_flags_a_mode_run_in_bf16(tmp_path, cli_run, monkeypatch):
    done = hloscope("compare", "--repeats", "1", "--modes", "pytorch,torchax,jax", "--model", "vit-tiny", "--batch-size",
                    "2", "--steps", "2", "--warmup", "1", "--out", tmp_path, "--json", timeout=900, memory_limit=None,
                    env={"HLOSCOPE_TEST_PRECISION": "jax:bf16"})
    assert done.code == 0, done.stderr[-3000:]
    comparison = json.loads(done.stdout)
    audit_record = comparison["audit"]
    assert audit_record["ok"] is False
    for stage in ("before_timing", "timed_runs"):
        assert audit_record[stage]["modes"] == ["pytorch", "torchax", "jax"]
        (row,) = [row for row in audit_record[stage]["mismatches"] if row["setting"] == "precision"]
        assert row["values"] == {"pytorch": "fp32", "torchax": "fp32", "jax": "bf16"}
    assert "MISMATCH precision: pytorch=fp32, torchax=fp32, jax=bf16" in done.stderr
    assert "fairness audit (before timing)" in done.stderr
    # the audit's set-up processes leave nothing in the comparison directory
    assert sorted(p.name for p in (Path(tmp_path) / comparison["comparison_id"]).iterdir()) == [
        "comparison.json", "jax", "logs", "pytorch", "torchax"]
    # explain lists the mismatch first, in every renderer (terminal, Markdown, HTML) and in its JSON
    directory = str(Path(tmp_path) / comparison["comparison_id"])

    # explain reads the comparison in this process (no framework to start), at the terminal width hloscope() gives
    monkeypatch.setenv("COLUMNS", "200")

    def explain(*form: str) -> str:
        code, out, err = cli_run("explain", directory, *form)
        assert code == 0, err[-3000:]
        return out

    report = json.loads(explain("--json"))
    assert "MISMATCH precision: pytorch=fp32, torchax=fp32, jax=bf16" in report["comparison"]["audit_mismatches"]
    for form, then in (([], "Step time"), (["--format", "md"], "Comparison: "),
                       (["--format", "html", "-o", "-"], "Comparison: ")):
        out = explain(*form)
        heading = out.index("The modes did not run the same settings")
        assert heading < out.index("MISMATCH precision: pytorch=fp32, torchax=fp32, jax=bf16") < out.index(then)
