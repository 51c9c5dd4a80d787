"""Issue 14, reliability round two: the hostile inputs of the attack, one class at a time, each against every reader
that meets it. Every command runs as a real subprocess (`python -m hloscope`) under a timeout and an address-space
limit (`test_reliability_inputs.hloscope`), so a hang or a memory bomb fails its test instead of the machine; each
check is "exit 2 + one stderr line naming the file + no traceback", or "a result with one counted warning".

1. user strings are text, never rich markup or raw HTML      5. impossible values refused or skipped with a count
2. one reading layer for every file, whoever names it         6. faults in `compare` never hide finished work
3. only regular files are read (FIFOs never block)            7. `explain` on a corrupt trace: stderr + exit 2
4. memory bounded or refused early
"""

from __future__ import annotations

import gzip
import json
import math
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_reliability_inputs import (BAD, FIXTURES, _good_run, assert_refused, hloscope, needs_fixtures)

HOSTILE_NAMES = ["[/]", "neg[/]", "[bold]x[/bold]", "convert_element_type[new_dtype=float32 weak_type=True]",
                 "<script>alert(1)</script>", "a|b`c*d_e_", "tail\\"]


def _hlo(path: Path, op_name: str) -> Path:
    """A tiny valid module whose dot carries `op_name` (metadata) and whose fusion is named after it."""
    quoted = op_name.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text(
        "HloModule jit_f, is_scheduled=true\n\n"
        "ENTRY main {\n"
        "  a = f32[8,8]{1,0} parameter(0)\n"
        "  b = f32[8,8]{1,0} parameter(1)\n"
        f'  ROOT d = f32[8,8]{{1,0}} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, '
        f'metadata={{op_name="{quoted}" source_file="x.py" source_line=1}}\n'
        "}\n")
    return path


def _kineto(path: Path, names: list[str], durations: list[float] | None = None, opener=open) -> Path:
    durations = durations or [100.0] * len(names)
    events = [{"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 1000 + 500 * i, "dur": dur,
               "args": {"stream": 7, "correlation": i + 1, "device": 0}}
              for i, (name, dur) in enumerate(zip(names, durations))]
    events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 990 + 500 * i,
                "dur": 5, "args": {"correlation": i + 1}} for i in range(len(names))]
    with opener(path, "wt") as handle:
        handle.write(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _no_traceback(result) -> None:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "MarkupError" not in result.stderr, result.stderr[-3000:]


# ------------------------------------------------------------------------------------- 1. user strings are text


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_op_names_with_brackets_print_as_written_in_hlo_stats(tmp_path, name):
    result = hloscope("hlo", "stats", "--no-xla-cost", _hlo(tmp_path / "m.hlo", name), timeout=120)
    _no_traceback(result)
    assert result.code == 0, result.stderr
    assert name[-50:] in result.stdout.replace("\n", ""), result.stdout


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_kernel_names_and_directories_with_brackets_print_as_written_in_trace_stats(tmp_path, name):
    directory = tmp_path / "run[bs32]" / "x[/]y"
    directory.mkdir(parents=True)
    _kineto(directory / "a.pt.trace.json", [name, "gemm"])
    result = hloscope("trace", "stats", tmp_path / "run[bs32]", timeout=120)
    _no_traceback(result)
    assert result.code == 0, result.stderr
    flat = result.stdout.replace("\n", "")
    assert name in flat and "run[bs32]" in flat and "x[/]y" in flat, result.stdout


def test_run_and_comparison_tables_show_user_strings_as_written():
    from io import StringIO

    from rich.console import Console

    from hloscope.run_tables import comparison_table, run_table

    record = {"mode": "jax[/]", "status": "failed", "error": "[bold]boom[/bold] in neg[/]", "config": {"model": "m[x]"},
              "timing": {}, "memory": {}, "artifacts": []}
    comparison = {"config": {"model": "vit[/]"}, "modes": [{"mode": "jax[/]", "status": "failed"}]}
    for table in (run_table(record), comparison_table(comparison)):
        out = StringIO()
        Console(file=out, width=300).print(table)
        assert "[/]" in out.getvalue() and ("[bold]boom[/bold]" in out.getvalue() or "vit[/]" in out.getvalue())


def test_diff_markdown_escapes_html_and_markdown(tmp_path):
    a = _hlo(tmp_path / "a.hlo", "<script>alert(1)</script>")
    b = _hlo(tmp_path / "b<img src=x>.hlo", "a|b")
    out = tmp_path / "report.md"
    result = hloscope("diff", "--no-xla-cost", "--format", "md", "-o", out, a, b, timeout=120)
    _no_traceback(result)
    assert result.code == 0, result.stderr
    text = out.read_text()
    assert "<script>" not in text and "<img" not in text
    assert "&lt;img src=x&gt;" in text
