"""The compare table reads whole in an 80-column terminal, and shows what a --target (compiled) run produced."""

from __future__ import annotations

from rich.console import Console

from hloscope.render.run_tables import comparison_table
from hloscope.runs.runner import summary_entry

CONFIG = {"model": "vit-tiny", "batch_size": 8, "steps": 20, "precision": "fp32", "data": "loader"}


def render(comparison: dict, width: int = 80) -> str:
    console = Console(width=width, record=True, force_terminal=False)
    console.print(comparison_table(comparison))
    return console.export_text()


def test_a_five_mode_table_fits_80_columns_without_cutting_anything():
    modes = [
        {"mode": "pytorch", "status": "ok", "median_s": 0.01234, "throughput_img_s": 648.3, "first_step_s": 0.5,
         "peak_memory_bytes": 812 * 2**20},
        {"mode": "pytorch+compile", "status": "ok", "median_s": 0.00834, "throughput_img_s": 959.3,
         "first_step_s": 24.1, "peak_memory_bytes": 1812 * 2**20},
        {"mode": "torch_xla+compile", "status": "failed", "error": "killed by signal 9 (SIGKILL; out of memory?)"},
        {"mode": "torch_xla", "status": "interrupted", "first_step_s": 120.5, "peak_memory_bytes": 12412 * 2**20},
        {"mode": "jax", "status": "ok", "median_s": 12.23456, "throughput_img_s": 0.648, "first_step_s": 125.5,
         "peak_memory_bytes": 24120 * 2**20},
    ]
    text = render({"config": CONFIG, "modes": modes})
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for cell in ("torch_xla+compile", "pytorch+compile", "interrupted", "12.340 ms", "1.48x", "12.235 s", "1467x",
                 "24120 MiB", "125.50 s", "0.648"):
        assert cell in text, cell


def test_compiled_runs_show_the_kernels_and_the_roofline_lower_bound():
    record = {"mode": "jax", "_dir": "/x/jax", "status": "compiled", "timing": {}, "memory": {},
              "kernels": {"kernel_launches": 1312, "library_calls": 48}, "roofline": {"serial_s": 0.0123456}}
    entry = summary_entry(record, None)
    assert entry["kernels"] == 1312 and entry["roofline_lower_bound_s"] == 0.0123456
    failed = {"mode": "torch_xla", "status": "failed", "error": "no CUDA plugin"}
    text = render({"config": {**CONFIG, "target": "h100"}, "modes": [entry, failed]})
    assert "…" not in text
    row = next(line for line in text.splitlines() if line.startswith("jax"))
    assert row.split() == ["jax", "12.346", "ms", "1312", "compiled"]
    assert "lower bound" in text and "compiled for h100" in text
    tiny = render({"config": CONFIG, "modes": [{**entry, "roofline_lower_bound_s": 8.2e-6}]})
    assert "0.008 ms" in tiny  # a tiny model's bound is not rounded to 0.01 ms
