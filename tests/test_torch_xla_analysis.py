"""torch_xla's compilation analysis (PT_XLA_DEBUG_LEVEL=1) read into one record per compiled graph: its hash, why
torch_xla compiled it, the frame that asked, and XLA's memory analysis of the program; what torch_xla writes at higher
levels or for other reports is skipped, and a run's graphs and recompilations come from it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import hloscope

from hloscope.backends import torch_xla_analysis
from hloscope.backends.startup_ledger import TEST_RESHAPE_ENV
from hloscope.errors import InputError

DATA = Path(__file__).parent / "data" / "torch_xla" / "compilations.txt"
GIB = 1024 ** 3


def test_a_real_file_gives_each_compiled_graph_with_its_hash_cause_frame_and_sizes():
    first, second = torch_xla_analysis.read(DATA)
    assert first.graph_hash == "2520bd550034eefea147f8b6035d48bd"
    assert second.graph_hash == "1a926eaafd8386a90eba1d35192615ed"
    assert first.cause == second.cause == "user torch_xla.sync"
    assert first.frames[0].startswith("sync (") and ".........." not in first.frames
    # the innermost frame outside torch_xla and the installed packages
    assert first.user_frame == "wait (/repo/hloscope/backends/torch_xla_mode.py:137)"
    assert first.sizes == {"argument_bytes": round(0.000394 * GIB), "output_bytes": round(0.000858 * GIB),
                           "alias_bytes": round(0.000303 * GIB), "temp_bytes": round(0.001329 * GIB),
                           "generated_code_bytes": 0}


def test_execution_analysis_and_other_reports_are_not_compilations():
    text = DATA.read_text()
    level_two = text.replace("Compilation Analysis: ", "Execution Analysis: ")  # what level 2 adds for every run
    unlowered = "Unlowered Op usage summary (more of these ops, lower performance)\nFRAME (count=3):\n"
    found = torch_xla_analysis.parse(level_two + unlowered + text)
    assert [g.graph_hash for g in found] == [g.graph_hash for g in torch_xla_analysis.parse(text)]


def test_a_cut_or_garbled_file_gives_what_it_holds_and_never_fails():
    text = DATA.read_text()
    cut = text[: text.index("Intermediate tensor size")]  # torch_xla still writing its first graph
    (graph,) = torch_xla_analysis.parse(cut)
    assert "temp_bytes" not in graph.sizes and graph.graph_hash
    assert torch_xla_analysis.parse("Post Compilation Analysis: Graph input size: 1.0 GB\n") == []
    assert torch_xla_analysis.parse("Compilation Analysis: Graph Hash: x\n\x00\xff") == []


def test_an_oversized_file_is_one_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(torch_xla_analysis, "MAX_FILE_BYTES", 100)
    path = tmp_path / "big.txt"
    path.write_text("x" * 101)
    with pytest.raises(InputError, match=r"big\.txt"):
        torch_xla_analysis.read(path)
    assert torch_xla_analysis.read(tmp_path / "missing.txt") == []


def test_the_users_own_debug_settings_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.delenv(torch_xla_analysis.DEBUG_LEVEL_ENV, raising=False)
    monkeypatch.setenv(torch_xla_analysis.DEBUG_FILE_ENV, str(tmp_path / "mine.txt"))
    assert torch_xla_analysis.configure(tmp_path) is None
    assert os.environ[torch_xla_analysis.DEBUG_FILE_ENV] == str(tmp_path / "mine.txt")
    monkeypatch.setenv(torch_xla_analysis.DEBUG_FILE_ENV, "")  # unset, and restored after the test
    monkeypatch.setenv(torch_xla_analysis.DEBUG_LEVEL_ENV, "")
    assert torch_xla_analysis.configure(tmp_path) == tmp_path / torch_xla_analysis.DEBUG_FILE
    assert os.environ[torch_xla_analysis.DEBUG_LEVEL_ENV] == "1"


@pytest.mark.slow
def test_a_torch_xla_run_records_its_new_graph_and_the_steps_temporaries(tmp_path):
    """Known answer: the batch shape changes inside the timed window (test hook), so torch_xla compiles one new graph
    there; the run names its hash, torch_xla's cause and its cost, and the memory ledger's temporaries are XLA's
    analysis of the step's graph."""
    result = hloscope("run", "--mode", "torch_xla", "--model", "vit-tiny", "--batch-size", "8", "--steps", "3",
                      "--warmup", "2", "--out", str(tmp_path), "--run-id", "r", timeout=900, memory_limit=None,
                      env={TEST_RESHAPE_ENV: "torch_xla"})
    assert result.code == 0, result.stderr[-3000:]
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    graphs = torch_xla_analysis.read(tmp_path / "r" / torch_xla_analysis.DEBUG_FILE)
    assert len(graphs) >= 2
    (recompiled,) = run["startup"]["window"]["recompilations"]
    assert recompiled["graph_hash"] == graphs[-1].graph_hash
    assert recompiled["source"] == torch_xla_analysis.SOURCE and recompiled["seconds"] > 0
    assert graphs[-1].graph_hash in recompiled["cause"] and recompiled["frame"]
    ledger = run["memory"]["ledger"]
    (temporaries,) = [p for p in ledger["parts"] if p["name"] == "temporaries"]
    assert temporaries["bytes"] == ledger["compiled"]["temp_bytes"] > 0
    assert temporaries["bytes"] in {g.sizes["temp_bytes"] for g in graphs}
