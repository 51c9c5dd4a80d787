"""The explain report renderers (terminal, Markdown, HTML) on a constructed comparison, and the HTML in a real browser."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from hloscope.explain.engine import explain
from hloscope.explain.summary import ModeSummary
from hloscope.render import explain_html, explain_md, explain_term

from conftest import ARTIFACTS


def _report() -> dict:
    fast = ModeSummary(mode="jax", platform="gpu", step_time_s=0.0102, step_times_s=[0.0102] * 10, kernels=1032,
                       kernel_kinds={"fusion kLoop": 399, "fusion kInput": 354, "fusion kCustom": 36, "cublas": 243},
                       transposes=12, copies=60, flops=2.1e12, bytes_accessed=4.0e10, compiles_in_window=0,
                       device_busy_s=0.0095, device_idle_s=0.0007, categories_s={"matmul/conv": 0.006, "fusion/elementwise": 0.0035},
                       timeline=[(0.0, 0.006, "matmul/conv"), (0.0062, 0.0033, "fusion/elementwise")])
    slow = ModeSummary(mode="torch_xla", platform="gpu", step_time_s=0.0273, step_times_s=[0.0273] * 10, kernels=1577,
                       kernel_kinds={"fusion kLoop": 900, "fusion kInput": 420, "fusion kCustom": 14, "cublas": 243},
                       transposes=96, copies=60, flops=2.1e12, bytes_accessed=6.5e10, compiles_in_window=0,
                       device_busy_s=0.0121, device_idle_s=0.0152, categories_s={"matmul/conv": 0.0062, "fusion/elementwise": 0.0059},
                       timeline=[(0.0, 0.0062, "matmul/conv"), (0.0065, 0.0059, "fusion/elementwise")],
                       notes=["no memory report beside the module"])
    failed = ModeSummary(mode="pytorch", status="failed")
    report = explain([fast, slow, failed])
    report["comparison"] = {"path": "traces/compare-1", "config": {"model": "vit-base", "batch_size": 32}}
    return report


def _numbers_shown(text: str) -> None:
    for figure in ("10.200 ms", "27.300 ms", "2.68x", "17.100 ms", "1,577", "1,032", "15.200 ms"):
        assert figure in text, figure
    assert "Device idle, waiting for the host" in text and "More kernel launches" in text
    assert "1577 kernels per step against 1032" in text


def test_markdown_report_shows_the_comparison_numbers():
    text = explain_md.render(_report())
    _numbers_shown(text)
    assert "| pytorch | failed |" in text
    assert text.index("Device idle") < text.index("More kernel launches")  # ranked by estimated seconds


def test_terminal_report_shows_the_comparison_numbers():
    """The table's columns carry their unit in the header ("step ms"), so its figures appear without it; at 80
    columns no mode name or figure is cut, and a claim wraps under its own text."""
    for width in (250, 80):
        buffer = io.StringIO()
        explain_term.render(_report(), Console(file=buffer, width=width, color_system=None))
        text = buffer.getvalue()
        rows = {line.split()[0]: line.split() for line in text.splitlines() if line.split()[:1] in (["jax"], ["torch_xla"])}
        assert rows["torch_xla"][:8] == ["torch_xla", "ok", "27.300", "2.68x", "17.100", "1,577", "15.200", "0"]
        assert rows["jax"][:8] == ["jax", "ok", "10.200", "1.00x", "0.000", "1,032", "0.700", "0"]
        assert "…" not in text and max(len(line.rstrip()) for line in text.splitlines()) <= width
        flowing = " ".join(text.split())  # claims as one line, however the terminal wrapped them
        assert "(+17.100 ms per step)" in flowing and "1. Device idle, waiting for the host" in flowing
        assert "More kernel launches" in flowing and "1577 kernels per step against 1032" in flowing
        assert "the device is idle 15.2 ms per step under torch_xla against 0.7 ms under jax" in flowing


def test_html_report_is_self_contained_with_plots():
    html = explain_html.render(_report())
    _numbers_shown(html.replace("&#x27;", "'"))
    assert html.count("<svg") == 4  # step time, kernels by category, device time by category, timeline strips
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "http" not in html  # no URL at all, not even the SVG namespace (inline SVG in HTML needs none)
    assert '<table class="figures"><thead><tr><th>mode</th>' in html  # names and figures never break mid-word
    assert "<script" not in html and "@import" not in html


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.mark.browser
def test_html_report_renders_in_headless_chromium(tmp_path: Path):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (bash scripts/install-browser.sh)")
    page = tmp_path / "explain.html"
    page.write_text(explain_html.render(_report()), encoding="utf-8")
    flags = CHROMIUM_FLAGS + [f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    _numbers_shown(dom.stdout.replace("&#x27;", "'"))
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "explain_report_constructed.png"
    shot.unlink(missing_ok=True)
    run = subprocess.run([chromium, *flags, "--hide-scrollbars", "--window-size=1100,2200", f"--screenshot={shot}",
                          page.as_uri()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.stat().st_size > 20_000  # a rendered page with plots, not a blank image
