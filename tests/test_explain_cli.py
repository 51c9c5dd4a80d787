"""hloscope explain on hand-written run and comparison directories: fast, no framework, every input path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def _run(directory: Path, mode: str, steps: list[float], in_window: int = 0, data: str = "device") -> Path:
    directory.mkdir(parents=True)
    ordered = sorted(steps)
    record = {"schema_version": 1, "run_id": directory.name, "mode": mode, "status": "ok", "error": None,
              "config": {"model": "vit-tiny", "batch_size": 8, "data": data, "precision": "fp32"},
              "environment": {"platform": "cpu", "precision": {"requested": "fp32"}},
              "timing": {"step_times_s": steps, "median_s": ordered[len(ordered) // 2], "mean_s": sum(steps) / len(steps),
                         "first_step_s": 1.5},
              "compiles": {"in_window": {"xla_compiles": in_window}}, "artifacts": []}
    (directory / "run.json").write_text(json.dumps(record))
    return directory


def _comparison(root: Path) -> Path:
    _run(root / "jax", "jax", [0.002] * 10)
    _run(root / "torch_xla", "torch_xla", [0.004] * 8 + [0.9, 1.0], in_window=2)
    (root / "comparison.json").write_text(json.dumps({
        "schema_version": 1, "comparison_id": root.name, "config": {"model": "vit-tiny", "batch_size": 8},
        "modes": [{"mode": "jax", "dir": "jax", "status": "ok"}, {"mode": "torch_xla", "dir": "torch_xla", "status": "ok"},
                  {"mode": "pytorch", "dir": "pytorch", "status": "failed", "error": "ModuleNotFoundError: torch"}]}))
    return root


def test_explain_json_from_run_records_only(cli_run, tmp_path):
    code, out, err = cli_run("explain", str(_comparison(tmp_path / "cmp")), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["fastest"] == "jax"
    by_mode = {m["mode"]: m for m in report["modes"]}
    slow = by_mode["torch_xla"]
    assert slow["gap_s"] == pytest.approx(0.002) and slow["verdict"] == "slower"
    assert slow["gap_ci_s"][0] > 0 and slow["tests"] == {"interval_excludes_zero": True, "at_least_min_gap": True,
                                                         "beyond_step_spread": True, "beyond_process_spread": True,
                                                         "processes_differ": True}
    # No profile: nothing measured to split the gap into, so no contributors; the whole gap is the residual and the
    # recompilations stand as a hypothesis for the run, with their counts.
    assert slow["contributors"] == [] and slow["residual_s"] == pytest.approx(0.002)
    assert any("torch_xla has no usable profile" in note for note in slow["notes"])
    (recompiled,) = [a for a in slow["annotations"] if a["rule"] == "recompilation"]
    assert recompiled["evidence"]["compiles_in_window"] == {"torch_xla": 2, "jax": 0}
    assert recompiled["evidence"]["steps_over_twice_median"] == 2 and recompiled["kind"] == "measured"
    assert by_mode["pytorch"]["status"] == "failed"
    assert report["summaries"]["pytorch"]["notes"] == ["ModuleNotFoundError: torch"]
    assert any("no XLA HLO" in n for n in report["summaries"]["jax"]["notes"])
    assert report["comparison"]["config"] == {"model": "vit-tiny", "batch_size": 8}


def test_explain_markdown_file_is_never_overwritten(cli_run, tmp_path):
    comparison = _comparison(tmp_path / "cmp")
    out = tmp_path / "explain.md"
    assert cli_run("explain", str(comparison), "-o", str(out))[0] == 0
    text = out.read_text()
    assert "| pytorch | failed |" in text
    assert "| torch_xla | ok | 4.000 ms | 4.000-910.000 ms | 2.00x (" in text and "| +2.000 ms (+2.000 to +" in text
    # Significant, but without a profile there are no measured parts: the hypotheses stand for the run as a whole.
    assert "**2.00x (" in text and "): slower (provisional" in text and "torch_xla has no usable profile" in text
    hypotheses = text.index("Hypotheses with no significant part of the step to explain")
    assert text.index("Recompilation inside the timed window") > hypotheses
    code, _, err = cli_run("explain", str(comparison), "-o", str(out))
    assert code == 2 and "already exists" in err and out.read_text() == text


def test_explain_a_folder_of_runs_of_one_mode(cli_run, tmp_path):
    _run(tmp_path / "runs" / "a", "jax", [0.002] * 5)
    _run(tmp_path / "runs" / "b", "jax", [0.003] * 5, data="loader")
    code, out, err = cli_run("explain", str(tmp_path / "runs"), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["fastest"] == "jax (a)"
    slow = {m["mode"]: m for m in report["modes"]}["jax (b)"]
    assert slow["verdict"] == "slower" and slow["ratio"] == pytest.approx(1.5)
    assert slow["config_differences"] == [{"field": "data", "a": "loader", "b": "device"}]
    assert [a["rule"] for a in slow["annotations"]] == ["input_pipeline"]


def test_explain_runs_named_separately_with_a_chosen_baseline(cli_run, tmp_path):
    a = _run(tmp_path / "a", "jax", [0.002] * 5)
    b = _run(tmp_path / "b", "jax", [0.00201] * 5)
    c = _run(tmp_path / "c", "torch_xla", [0.004] * 5)
    code, out, err = cli_run("explain", str(a), str(b), str(c), "--baseline", "torch_xla", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["baseline"] == "torch_xla" and report["baseline_chosen"] is True
    by_mode = {m["mode"]: m for m in report["modes"]}
    assert set(by_mode) == {"jax (a)", "jax (b)", "torch_xla"}
    assert by_mode["jax (a)"]["verdict"] == "faster" and by_mode["jax (a)"]["gap_s"] == pytest.approx(-0.002)
    code, out, err = cli_run("explain", str(a), str(b), "--json")
    entry = {m["mode"]: m for m in json.loads(out)["modes"]}["jax (b)"]
    assert entry["verdict"] == "no significant difference" and entry["contributors"] == []  # 0.5%: under --min-gap
    code, _, err = cli_run("explain", str(a), str(b), "--baseline", "pytorch")
    assert code == 2 and "--baseline 'pytorch' is not a timed run here" in err and err.count("\n") == 1


def test_bad_inputs(cli_run, tmp_path):
    code, _, err = cli_run("explain", str(tmp_path / "nothing"))
    assert code == 2 and "no such file or directory" in err and err.count("\n") == 1
    (tmp_path / "empty").mkdir()
    code, _, err = cli_run("explain", str(tmp_path / "empty"))
    assert code == 2 and "no hloscope run here" in err
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "comparison.json").write_text('{"schema_version": 1, "modes": [')
    code, _, err = cli_run("explain", str(broken))
    assert code == 2 and "comparison.json:1:" in err and "Traceback" not in err


def test_without_an_argument_the_newest_comparison_under_traces(cli_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli_run("explain")
    assert code == 2 and "no comparison under traces/" in err and err.count("\n") == 1
    old = _comparison(tmp_path / "traces" / "compare-b")
    _comparison(tmp_path / "traces" / "compare-a")  # named before compare-b, but its comparison.json is newer
    os.utime(old / "comparison.json", (1_000_000, 1_000_000))  # written last wins, whatever the names say
    (tmp_path / "traces" / "README.md").write_text("not a comparison")
    code, out, err = cli_run("explain", "--json")
    assert code == 0, err
    assert json.loads(out)["comparison"]["path"] == str(Path("traces") / "compare-a")
    assert "explaining traces/compare-a" in err


def test_html_without_output_is_a_new_file_in_the_comparison(cli_run, tmp_path):
    comparison = _comparison(tmp_path / "cmp")
    code, out, err = cli_run("explain", str(comparison), "--format", "html")
    assert code == 0, err
    first = comparison / "explain.html"
    assert out == "" and f"wrote {first}" in err
    page = first.read_text()
    assert page.startswith("<!DOCTYPE html>") and "Recompilation inside the timed window" in page
    assert "<b>2.00x (" in page and "): slower (provisional" in page and '<table class="steps">' in page
    assert "http" not in page  # nothing to fetch, not even an SVG namespace URL
    first.write_text("the user's own notes")  # a second report never replaces the first
    code, _, err = cli_run("explain", str(comparison), "--format", "html")
    assert code == 0 and f"wrote {comparison / 'explain-2.html'}" in err
    assert first.read_text() == "the user's own notes" and "<svg" in (comparison / "explain-2.html").read_text()
    code, out, _ = cli_run("explain", str(comparison), "--format", "html", "-o", "-")  # '-': stdout, as before
    assert code == 0 and out.startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in comparison.glob("explain*")) == ["explain-2.html", "explain.html"]
