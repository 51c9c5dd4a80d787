"""explain lists the fairness audit's mismatches first: a comparison whose modes did not run the same
settings says so before any step time, in every renderer. The audit is built by hloscope.runs.audit from the runs'
own run.json, as compare builds it; the pages are read back with html.parser and json.load."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import run_record

from hloscope.runs.audit import audit
from hloscope.runs.records import section_document

MISMATCH = "MISMATCH precision: jax=fp32, pytorch=bf16"


def _run(directory: Path, mode: str, steps: list[float], precision: str) -> dict:
    directory.mkdir(parents=True)
    record = {"schema_version": 1, "run_id": directory.name, "mode": mode, "status": "ok", "error": None,
              "config": {"model": "vit-tiny", "batch_size": 8, "data": "device", "precision": precision},
              "environment": {"platform": "cpu", "precision": {"requested": precision}},
              "timing": {"step_times_s": steps, "median_s": sorted(steps)[len(steps) // 2],
                         "mean_s": sum(steps) / len(steps), "first_step_s": 1.5},
              "compiles": {"in_window": {"xla_compiles": 0}}, "artifacts": []}
    (directory / "run.json").write_text(json.dumps(record))
    return record


def _mismatched(root: Path, with_audit: bool = True) -> Path:
    """jax in fp32 and pytorch in bf16 (the deliberately unfair comparison of HLOSCOPE_TEST_PRECISION)."""
    jax = _run(root / "jax", "jax", [0.002 + 1e-5 * (i % 3) for i in range(10)], "fp32")
    pytorch = _run(root / "pytorch", "pytorch", [0.004 + 1e-5 * (i % 3) for i in range(10)], "bf16")
    comparison = {"schema_version": 1, "comparison_id": root.name, "config": {"model": "vit-tiny", "batch_size": 8},
                  "modes": [{"mode": "jax", "dir": "jax", "status": "ok"},
                            {"mode": "pytorch", "dir": "pytorch", "status": "ok"}]}
    if with_audit:
        records = [("jax", run_record(jax), None), ("pytorch", run_record(pytorch), None)]
        comparison["audit"] = {"before_timing": section_document(audit(records)),
                               "timed_runs": section_document(audit(records, stage="timed runs")), "ok": False}
    (root / "comparison.json").write_text(json.dumps(comparison))
    return root


def test_the_json_report_carries_the_audit_mismatches(cli_run, tmp_path):
    code, out, err = cli_run("explain", str(_mismatched(tmp_path / "cmp")), "--json")
    assert code == 0, err
    report = json.loads(out)
    # the same mismatch before timing and in the timed runs is listed once
    assert report["comparison"]["audit_mismatches"] == [MISMATCH]
    code, out, _ = cli_run("explain", str(_mismatched(tmp_path / "fair", with_audit=False)), "--json")
    assert code == 0 and "audit_mismatches" not in json.loads(out)["comparison"]


def test_the_terminal_report_starts_with_the_mismatches(cli_run, tmp_path):
    code, out, err = cli_run("explain", str(_mismatched(tmp_path / "cmp")))
    assert code == 0, err
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    assert lines[0].startswith("The modes did not run the same settings")
    assert lines[1] == MISMATCH
    assert lines[2].startswith("Step time")  # then the report as before
    code, out, _ = cli_run("explain", str(_mismatched(tmp_path / "fair", with_audit=False)))
    assert code == 0 and "did not run the same settings" not in out and out.lstrip().startswith("Step time")


def test_the_markdown_report_starts_with_the_mismatches(cli_run, tmp_path):
    code, out, err = cli_run("explain", str(_mismatched(tmp_path / "cmp")), "--format", "md")
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0] == "# Why the runs differ"
    assert lines[1].startswith("**The modes did not run the same settings")
    assert lines[2] == f"- {MISMATCH}"
    assert lines[3].startswith("Comparison: ")


class _Text(HTMLParser):
    """The page's text in order, with the tag each piece sits in."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.pieces: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        self.stack.append(tag)

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop() != tag:
            pass

    def handle_data(self, data):
        if data.strip() and "style" not in self.stack and "script" not in self.stack and "title" not in self.stack:
            self.pieces.append((self.stack[-1] if self.stack else "", data.strip()))


def test_the_html_report_starts_with_the_mismatches(cli_run, tmp_path):
    page = tmp_path / "explain.html"
    code, _, err = cli_run("explain", str(_mismatched(tmp_path / "cmp")), "-o", str(page))
    assert code == 0, err
    parser = _Text()
    parser.feed(page.read_text())
    texts = [text for _, text in parser.pieces]
    assert texts[0] == "Why the runs differ"
    assert texts[1].startswith("The modes did not run the same settings")
    assert texts[2] == MISMATCH
    assert texts[3].startswith("Comparison:")


@pytest.mark.parametrize("audit_record", [{"before_timing": {"mismatches": "precision"}},
                                          {"before_timing": {"mismatches": [{"setting": 3, "values": {}}]}},
                                          ["not", "an", "object"]])
def test_a_malformed_audit_is_one_line_naming_the_file(cli_run, tmp_path, audit_record):
    root = _mismatched(tmp_path / "cmp", with_audit=False)
    comparison = json.loads((root / "comparison.json").read_text())
    comparison["audit"] = audit_record
    (root / "comparison.json").write_text(json.dumps(comparison))
    code, _, err = cli_run("explain", str(root))
    assert code == 2 and err.count("\n") == 1 and "comparison.json" in err and "audit" in err
    assert "Traceback" not in err
