"""explain's first-step section: the verdict on a first-step gap (one figure per process), the parts against the
baseline's, bad run.json `startup` blocks refused, and the section in every output form."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from helpers import assert_refused, hloscope
from rich.console import Console

from hloscope.errors import InputError
from hloscope.explain.engine import explain
from hloscope.explain.startup import first_step_verdict, read_startup
from hloscope.explain.summary import ModeSummary
from hloscope.render import explain_html, explain_md, explain_term
from hloscope.runs.records import UNREADABLE_CACHE_COUNT
from hloscope.runs.rundir import create_run_dir, write_run

RUN_JSON = Path("runs/a/run.json")


def startup_block(compile_s: float, first_s: float, hits: int = 0, recompile: str | None = None) -> dict:
    """A run.json `startup` as the driver writes it."""
    window = {"compile_parts": [], "compile_s": 0.0, "counts": {}, "recompilations": []}
    if recompile:
        window = {"compile_parts": [], "compile_s": 4.5, "counts": {},
                  "recompilations": [{"cause": recompile, "source": "jax_explain_cache_misses"}]}
    return {"phases": [
        {"name": "imports", "seconds": 2.0, "parts": [{"name": "imports", "seconds": 2.0, "source": "clock"}],
         "unaccounted_s": 0.0},
        {"name": "setup", "seconds": 3.0, "parts": [], "unaccounted_s": 3.0},
        {"name": "first step", "seconds": first_s,
         "parts": [{"name": "compilation (XLA backend compile)", "seconds": compile_s, "source": "jax.monitoring"}],
         "unaccounted_s": first_s - compile_s}],
        "total_s": 5.0 + first_s, "cache_counts": {"persistent_cache_hits": hits}, "compile_cache": None,
        "framework_source": "jax.monitoring", "window": window}


def summary(mode: str, step_s: float, first_s: float, compile_s: float, **kwargs) -> ModeSummary:
    record = read_startup(startup_block(compile_s, first_s, **kwargs), RUN_JSON)
    return ModeSummary(mode=mode, step_times_s=[step_s * (1 + 0.01 * i) for i in range(10)], step_time_s=step_s,
                       first_step_s=first_s, first_steps_s=[first_s], startups=[record])


@pytest.mark.parametrize(("run", "baseline", "verdict"), [
    ([2.05], [2.0], "no difference"),  # under 5% of the baseline's first step
    ([2.6], [2.0], "cannot tell"),  # 30%: one process a side cannot tell that from a loaded machine
    ([46.6], [2.0], "slower"),
    ([1.0], [46.0], "faster"),
    ([3.0, 2.0, 2.4], [2.0, 2.6, 2.2], "no difference"),  # within the spread between processes
    ([3.0, 3.1, 3.05], [2.0, 2.1, 2.05], "slower"),  # every process apart
    # apart by a little more than each side's spread, not by more than three processes a side can show (p ~0.02)
    ([2.3, 2.4, 2.5], [2.0, 2.1, 2.2], "no difference"),
])
def test_a_first_step_gap_is_judged_on_processes(run, baseline, verdict):
    assert first_step_verdict(run, baseline, 0.05)[1] == verdict


def test_the_slower_first_step_is_split_into_parts_against_the_baseline():
    report = explain([summary("jax", 0.010, 2.0, 1.5), summary("pytorch+compile", 0.011, 46.6, 45.0)],
                     baseline="jax")
    entry = report.mode("pytorch+compile").startup
    assert entry is not None and entry.verdict == "slower"
    assert entry.gap_s == pytest.approx(44.6)
    compile_part = next(p for p in entry.parts if p.name == "compilation (XLA backend compile)")
    assert compile_part.seconds == 45.0 and compile_part.baseline_seconds == 1.5
    assert compile_part.delta_s == pytest.approx(43.5)
    unaccounted = next(p for p in entry.parts if p.phase == "first step" and p.name == "unaccounted")
    first_parts = [p for p in entry.parts if p.phase == "first step"]
    assert sum(p.seconds for p in first_parts) == pytest.approx(46.6)  # the parts add up to the first step
    assert unaccounted.seconds == pytest.approx(1.6)
    assert report.mode("jax").startup.verdict == "baseline"
    document = report.to_dict()
    assert document["modes"][1]["startup"]["parts"][0]["source"] == "clock"


def test_a_cache_the_framework_could_not_load_back_is_named():
    """torch_xla on the CPU writes its persistent cache but cannot deserialize it (PersistentCacheDeserializeFailure):
    a warm cache then saves nothing, and the startup section says why instead of leaving the compile unexplained."""
    block = startup_block(2.4, 2.5)
    block["cache_counts"] = {"uncached_compiles": 1, UNREADABLE_CACHE_COUNT: 1}
    record = read_startup(block, RUN_JSON)
    unreadable = ModeSummary(mode="torch_xla", step_times_s=[0.02] * 10, step_time_s=0.02, first_step_s=2.5,
                             first_steps_s=[2.5], startups=[record])
    report = explain([summary("jax", 0.010, 0.5, 0.1), unreadable], baseline="jax")
    entry = report.mode("torch_xla").startup
    assert entry is not None and any("could not load back" in note for note in entry.notes), entry.notes
    assert not any("could not load back" in note for note in report.mode("jax").startup.notes)


def test_runs_without_a_ledger_keep_their_report_shape():
    plain = ModeSummary(mode="jax", step_times_s=[0.01] * 5, step_time_s=0.01, first_step_s=2.0, first_steps_s=[2.0])
    other = ModeSummary(mode="torch_xla", step_times_s=[0.02] * 5, step_time_s=0.02, first_step_s=2.3,
                        first_steps_s=[2.3])
    document = explain([plain, other]).to_dict()
    assert all("startup" not in mode for mode in document["modes"])
    assert all("startups" not in s and "first_steps_s" not in s for s in document["summaries"].values())


def test_the_section_is_in_every_output_form():
    cause = "TRACING CACHE MISS at step:\n  * at images, now f32[7,32,32,3] and before f32[8,32,32,3]"
    report = explain([summary("jax", 0.010, 2.0, 1.5), summary("pytorch+compile", 0.011, 46.6, 45.0,
                                                               recompile=cause)], baseline="jax")
    buffer = io.StringIO()
    explain_term.render(report, Console(file=buffer, width=200, color_system=None))
    terminal = buffer.getvalue()
    markdown = explain_md.render(report)
    html = explain_html.render(report)
    for text in (terminal, markdown, html):
        assert "Time to the first step" in text
        assert "* at images, now f32" in text.replace("\\", "")  # Markdown escapes the brackets that follow
        assert "+44.60 s, slower" in text


@pytest.mark.parametrize(("block", "field"), [
    ({"phases": {}}, "startup.phases"),
    ({"phases": [{"name": "setup", "seconds": "3", "parts": []}]}, "startup.phases[0].seconds"),
    ({"phases": [{"name": "setup", "seconds": 3, "parts": [7]}]}, "startup.phases[0].parts[0]"),
    ({"phases": [], "cache_counts": {"hits": "many"}}, "startup.cache_counts"),
    ({"phases": [], "window": {"recompilations": [{"cause": 1, "source": "x"}]}},
     "startup.window.recompilations[0].cause"),
    ({"phases": [], "window": {"recompilations": [{"cause": "x", "seconds": "2 s", "source": "y"}]}},
     "startup.window.recompilations[0].seconds"),
    ({"phases": [], "window": {"recompilations": [{"cause": "x", "graph_hash": None, "source": "y"}]}},
     "startup.window.recompilations[0].graph_hash"),
])
def test_a_malformed_startup_block_is_refused_naming_the_file_and_field(block, field):
    with pytest.raises(InputError) as caught:
        read_startup(json.loads(json.dumps(block)), RUN_JSON)
    assert str(RUN_JSON) in str(caught.value) and field in str(caught.value)


def _write_run(root: Path, name: str, mode: str, first_s: float, startup: object) -> Path:
    run = create_run_dir(root, run_id=name)
    steps = [0.010, 0.011, 0.0105, 0.0102]
    write_run(run, {"schema_version": 1, "run_id": name, "mode": mode, "status": "ok", "error": None,
                    "config": {"model": "vit-tiny", "batch_size": 8, "data": "device", "precision": "fp32"},
                    "environment": {"platform": "cpu"}, "artifacts": [], "startup": startup,
                    "timing": {"step_times_s": steps, "first_step_s": first_s}})
    return run


def test_explain_reads_the_ledgers_of_run_directories(tmp_path):
    jax_run = _write_run(tmp_path, "jax", "jax", 2.0, startup_block(1.5, 2.0))
    slow = _write_run(tmp_path, "compiled", "pytorch+compile", 46.6,
                      startup_block(45.0, 46.6, recompile="0/1: tensor 'x' size mismatch at index 0. expected 8"))
    result = hloscope("explain", jax_run, slow, "--baseline", "jax", "--json")
    assert result.code == 0, result.stderr[-2000:]
    modes = {m["mode"]: m for m in json.loads(result.stdout)["modes"]}
    assert modes["pytorch+compile"]["startup"]["verdict"] == "slower"
    assert modes["pytorch+compile"]["startup"]["recompilations"][0]["cause"].endswith("expected 8")
    markdown = hloscope("explain", jax_run, slow, "--baseline", "jax", "--format", "md")
    assert markdown.code == 0 and "## Time to the first step" in markdown.stdout


def test_a_malformed_ledger_fails_explain_in_one_line_naming_run_json(tmp_path):
    run = _write_run(tmp_path, "jax", "jax", 2.0, {"phases": [{"name": "setup", "seconds": [], "parts": []}]})
    assert_refused(hloscope("explain", run), run / "run.json", words=("startup.phases[0].seconds",))
