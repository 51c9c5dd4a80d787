"""The explain report renderers (terminal, Markdown, HTML) on a constructed comparison, and the HTML in a real browser."""

from __future__ import annotations

import html as html_lib
import io
import json
import re
from pathlib import Path

import pytest
from helpers import ARTIFACTS, CHROMIUM_FLAGS, chromium, command
from rich.console import Console

from hloscope.explain.engine import explain
from hloscope.explain.ledger import OpSeries, RunLedger
from hloscope.explain.report import ConfigDifference, ExplainReport
from hloscope.explain.summary import ModeSummary
from hloscope.render import explain_html, explain_md, explain_term, svg
from hloscope.trace.model import CATEGORIES

WOBBLE = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.015, 0.985, 1.005, 0.995]  # a timed window's small spread


def _steps(median_s: float, spread: list[float] = WOBBLE) -> list[float]:
    return [median_s * w for w in spread]


def _ledger(nodes_ms: dict[str, float], ops: dict[str, tuple[float, float]], wobble: list[float]) -> RunLedger:
    """6 kept profiled steps (the first of 7 dropped as the profiler's warm-up); `ops`: group -> (calls, ms per step)."""
    steps = wobble[:6]
    nodes = {node: [ms * 1e-3 * w for w in steps] for node, ms in nodes_ms.items()}
    series = {group: OpSeries([calls] * 6, [ms * 1e-3 * w for w in steps], ms * 1e-3 / calls, 1.5 * ms * 1e-3 / calls)
              for group, (calls, ms) in ops.items()}
    step_s = [sum(values[i] for values in nodes.values()) for i in range(6)]
    return RunLedger(nodes, series, step_s, 7, {"1": "the profiler's warm-up"}, True, busy_s=step_s)


SLOW_NODES = {"device:matmul/conv": 6.05, "device:fusion/elementwise": 5.9, "device:copy/transpose": 0.05,
              "idle:graph tracing and sync": 14.6}
FAST_NODES = {"device:matmul/conv": 6.0, "device:fusion/elementwise": 3.5, "device:copy/transpose": 0.05,
              "idle:other host": 0.62}
SLOW_OPS = {"vit/encoder/layer/*/mlp/gelu": (12, 2.8), "vit/encoder/layer/*/attention/dot": (24, 1.05),
            "copy.3": (77, 0.11)}
FAST_OPS = {"vit/encoder/layer/*/mlp/gelu": (12, 0.4), "vit/encoder/layer/*/attention/dot": (24, 1.0)}


def _report(baseline: str | None = None) -> ExplainReport:
    """jax (the baseline), torch_xla (slower: batch 16 and bf16 against 8 and fp32, a measured ledger with significant
    parts), pytorch (flagged noisy, within the noise of jax) and a failed mode."""
    settings = {"model": "vit-base", "batch_size": "8", "precision": "fp32", "data": "device"}
    fast = ModeSummary(mode="jax", platform="gpu", step_time_s=0.0102, step_times_s=_steps(0.0102), batch_size=8,
                       settings=settings, precision="fp32", kernels=1032,
                       kernel_kinds={"fusion kLoop": 399, "fusion kInput": 354, "fusion kCustom": 36, "cublas": 243},
                       transposes=12, copies=60, flops=2.1e12, bytes_accessed=4.0e10, compiles_in_window=0,
                       device_busy_s=0.0095, device_idle_s=0.0007,
                       categories_s={"matmul/conv": 0.006, "fusion/elementwise": 0.0035},
                       timeline=[(0.0, 0.006, "matmul/conv"), (0.0062, 0.0033, "fusion/elementwise")],
                       ledger=_ledger(FAST_NODES, FAST_OPS, [1.0, 1.01, 0.99, 1.02, 0.98, 1.005]))
    slow = ModeSummary(mode="torch_xla", platform="gpu", step_time_s=0.0273, step_times_s=_steps(0.0273), batch_size=16,
                       settings={**settings, "batch_size": "16", "precision": "bf16"}, precision="bf16",
                       kernels=1577, kernel_kinds={"fusion kLoop": 900, "fusion kInput": 420, "fusion kCustom": 14,
                                                   "cublas": 243},
                       transposes=96, copies=60, flops=2.1e12, bytes_accessed=6.5e10, compiles_in_window=0,
                       device_busy_s=0.0121, device_idle_s=0.0152,
                       categories_s={"matmul/conv": 0.0062, "fusion/elementwise": 0.0059},
                       timeline=[(0.0, 0.0062, "matmul/conv"), (0.0065, 0.0059, "fusion/elementwise")],
                       ledger=_ledger(SLOW_NODES, SLOW_OPS, [0.99, 1.0, 1.02, 0.985, 1.01, 0.995]),
                       notes=["no memory report beside the module"])
    noisy = ModeSummary(mode="pytorch", platform="gpu", step_time_s=0.0103, batch_size=8, settings=settings,
                        step_times_s=_steps(0.0103, [1.0, 0.5, 1.6, 0.8, 1.3, 0.9, 1.1, 0.7, 1.5, 0.95]), noisy=True)
    failed = ModeSummary(mode="pytorch+compile", status="failed", notes=["RuntimeError: inductor crashed"])
    report = explain([fast, slow, noisy, failed], baseline=baseline)
    report.comparison = {"path": "traces/compare-1", "config": {"model": "vit-base", "batch_size": 32}}
    return report


def _modes(report: ExplainReport) -> dict:
    """Each run's result as the JSON document has it (`explain --json`), by mode."""
    return {m["mode"]: m for m in report.to_dict()["modes"]}


def _expected(report: ExplainReport) -> dict:
    """The figures every format must show, formatted here independently of hloscope.render.fmt."""
    slow, noisy = _modes(report)["torch_xla"], _modes(report)["pytorch"]
    (r_lo, r_hi), (g_lo, g_hi) = slow["ratio_ci"], slow["gap_ci_s"]
    (n_lo, n_hi) = noisy["gap_ci_s"]
    contributors = [c for c in slow["contributors"] if c["significant"]]
    (noise,) = [c for c in slow["contributors"] if not c["significant"]]
    return {
        "slow_verdict": f"{slow['ratio']:.2f}x ({r_lo:.2f}-{r_hi:.2f}x), +{slow['gap_s'] * 1e3:.3f} ms "
                        f"(+{g_lo * 1e3:.3f} to +{g_hi * 1e3:.3f} ms): slower",
        "noisy_verdict": f"no significant difference: {noisy['gap_s'] * 1e3:+.3f} ms "
                         f"({n_lo * 1e3:+.3f} to {n_hi * 1e3:+.3f} ms)",
        "contributors": [(c["title"], f"{c['seconds'] * 1e3:+.3f} ms (95% interval {c['interval_s'][0] * 1e3:+.3f} to "
                                      f"{c['interval_s'][1] * 1e3:+.3f} ms), {c['seconds'] / slow['gap_s']:.0%} of the "
                                      f"gap, p = {c['p_value']:.3f}, measured") for c in contributors],
        "within_noise": f"Other parts of the step, each within noise: {noise['seconds'] * 1e3:+.3f} ms",
        "residual": f"residual (timed gap - profiled gap: profiler effect and noise): {slow['residual_s'] * 1e3:+.3f} ms "
                    f"(profiled gap {slow['profiled_gap_s'] * 1e3:+.3f} ms)",
        "step": "27.300 ms (p10-p90 26.877-27.723 ms, 10 steps)",
    }


def test_constructed_report_is_what_the_renderers_are_tested_on():
    """The figures the tests below look for: a significant slower run with three measured contributors, a noisy run
    within the noise, configuration differences, a per-sample comparison and an op table; parts + residual = gap."""
    report = _report()
    slow = _modes(report)["torch_xla"]
    assert slow["verdict"] == "slower" and slow["gap_s"] == pytest.approx(0.0171)
    assert [c["node"] for c in slow["contributors"] if c["significant"]] == [
        "idle:graph tracing and sync", "device:fusion/elementwise", "idle:other host"]
    assert sum(c["seconds"] for c in slow["contributors"]) + slow["residual_s"] == pytest.approx(slow["gap_s"])
    assert slow["config_differences"] == [{"field": "batch_size", "a": "16", "b": "8"},
                                          {"field": "precision", "a": "bf16", "b": "fp32"}]
    assert slow["per_sample"]["time_per_sample_s"] == pytest.approx(0.0273 / 16)
    assert [a["rule"] for a in slow["annotations"]] == ["layout_changes"]
    assert _modes(report)["pytorch"]["verdict"] == "no significant difference" and _modes(report)["pytorch"]["noisy"]
    assert [op["group"] for op in slow["ops"]][:2] == ["vit/encoder/layer/*/mlp/gelu", "copy.3"]


def _sections_in_order(text: str) -> None:
    """Configuration differences first, then the per-sample line, the ranked contributors with their annotations
    beneath, the within-noise line, the residual, the run's own hypotheses, the op table."""
    torch_xla = text.index("torch_xla against jax")
    order = [text.index(marker, torch_xla) for marker in (
        "batch_size", "1.706 ms per sample against 1.275 ms, 1.34x", "Device idle while the host traces",
        "Device time in fusion/elementwise", "More memory traffic (estimate)", "Device idle, the host running Python",
        "Other parts of the step, each within noise", "residual (timed gap - profiled gap",
        "ypotheses with no significant part of the step to explain", "Layout changes (copies, transposes)",
        "mlp/gelu", "copy.3")]  # (the op name's end: at 80 columns its middle is cut)
    assert order == sorted(order), order


def _figures_shown(text: str, report: ExplainReport) -> None:
    flowing = " ".join(text.split())
    expected = _expected(report)
    for key in ("slow_verdict", "noisy_verdict", "within_noise", "residual", "step"):
        assert expected[key] in flowing, (key, expected[key])
    for title, figures in expected["contributors"]:
        assert title in flowing and figures in flowing, figures
    assert "2.68x (2.64-2.72x), +17.100 ms (+16.793 to +17.407 ms): slower" in flowing  # the same, written out
    assert "torch_xla ran with --precision bf16 against fp32 under jax" in flowing
    assert "jax: profiled step 1 left out: the profiler's warm-up" in flowing
    assert "pytorch+compile" in flowing and "RuntimeError: inductor crashed" in flowing
    _sections_in_order(flowing)


def test_markdown_report_shows_the_comparison_figures():
    report = _report()
    text = explain_md.render(report)
    _figures_shown(text, report)
    assert "| pytorch | ok **noisy** | 10.300 ms | 7.004-15.553 ms |" in text
    assert "| torch_xla | ok | 27.300 ms | 26.877-27.723 ms | 2.68x (2.64-2.72x) | +17.100 ms (+16.793 to +17.407 ms) " \
           "| slower | 1,577 | 15.200 ms | 0 |" in text
    assert "| pytorch+compile | failed |" in text
    assert "| batch_size | 16 | 8 |\n| precision | bf16 | fp32 |" in text
    # The op table: calls/step, per-call median and time/step under torch_xla, then under jax, then the change.
    assert "| vit/encoder/layer/\\*/mlp/gelu | 12 | 233 µs | 2.793 ms | 12 | 33.3 µs | 0.401 ms | +2.392 ms \\* |" in text
    # an op only one run has says so; the other side's cells are empty, not zero
    assert ("| copy.3 (only in torch_xla: no op of that name in jax) | 77 | 1.43 µs | 0.110 ms | - | - | - "
            "| +0.110 ms \\* |") in text
    assert "ops paired by name (the two runs have no optimized HLO to match by structure)" in text
    assert "| vit/encoder/layer/\\*/attention/dot | 24 | 43.8 µs | 1.047 ms | 24 | 41.7 µs | 1.002 ms | +0.045 ms |" in text
    assert "    - *More memory traffic (estimate)*: torch_xla accesses 65 GB" in text  # indented beneath its part


def _terminal(report: ExplainReport, width: int) -> str:
    buffer = io.StringIO()
    explain_term.render(report, Console(file=buffer, width=width, color_system=None))
    return buffer.getvalue()


def test_terminal_report_shows_the_comparison_figures():
    """Units in the table headers; at 80 columns no mode name or figure is cut and long text wraps under itself."""
    report = _report()
    for width in (250, 80):
        text = _terminal(report, width)
        assert max(len(line.rstrip()) for line in text.splitlines()) <= width
        # only op names are cut (in the middle, on one line with their figures), only where the width needs it
        cut = [line for line in text.splitlines() if "…" in line]
        assert all(re.search(r"[+-]\d+\.\d{3}( \*)?$", line.rstrip()) for line in cut)
        assert bool(cut) == (width == 80)
        rows = {}
        for line in text.splitlines():  # the first line that starts with the name: its table row
            if line.split()[:1] in (["jax"], ["torch_xla"], ["pytorch"], ["copy.3"]):
                rows.setdefault(line.split()[0], line.split())
        assert rows["torch_xla"][:7] == ["torch_xla", "ok", "27.300", "26.877-27.723", "2.68x", "+17.100", "slower"]
        assert rows["jax"][:7] == ["jax", "ok", "10.200", "10.042-10.358", "1.00x", "0.000", "baseline"]
        assert rows["pytorch"][:4] == ["pytorch", "ok", "noisy", "10.300"]
        assert rows["copy.3"][-8:] == ["77", "1.43", "0.110", "-", "-", "-", "+0.110", "*"]
        _figures_shown(text, report)
        flowing = " ".join(text.split())
        assert "noisy (run.json flagged its timed window as noisy)" in flowing
        assert "↳ More memory traffic (estimate): torch_xla accesses 65 GB" in flowing
        assert "2. Device time in fusion/elementwise" in flowing
        if width == 250:  # narrower, the name is cut in the middle
            assert "copy.3 (only in torch_xla: no op of that name in jax)" in flowing


def test_html_report_is_self_contained_with_plots():
    report = _report()
    html = explain_html.render(report)
    _figures_shown(re.sub(r"<[^>]+>", " ", html).replace("&nbsp;", " ").replace("&#x27;", "'"), report)
    assert html.count("<svg") == 4  # step time, kernels by category, device time by category, timeline strips
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "http" not in html  # no URL at all, not even the SVG namespace (inline SVG in HTML needs none)
    assert "<script" not in html and "@import" not in html
    assert '<td>ok <span class="noisy">noisy</span></td>' in html
    assert ('<tr class="significant"><td class="group">copy.3 (only in torch_xla: no op of that name in jax)</td>'
            "<td>77</td><td>1.43</td><td>0.110</td><td>-</td><td>-</td><td>-</td><td>+0.110 *</td></tr>") in html
    assert '<tr><td>batch_size</td><td class="n">16</td><td class="n">8</td></tr>' in html


def test_faster_runs_against_a_chosen_baseline():
    """--baseline torch_xla: jax is faster, by a negative gap with its interval; its contributors are the same parts
    with the sign turned, each a share of the (negative) gap."""
    report = _report(baseline="torch_xla")
    jax = _modes(report)["jax"]
    (r_lo, r_hi), (g_lo, g_hi) = jax["ratio_ci"], jax["gap_ci_s"]
    verdict = (f"{jax['ratio']:.2f}x ({r_lo:.2f}-{r_hi:.2f}x), {jax['gap_s'] * 1e3:+.3f} ms "
               f"({g_lo * 1e3:+.3f} to {g_hi * 1e3:+.3f} ms): faster"
               " (provisional: between-process variation unmeasured on a side that ran once)")
    assert verdict.startswith("0.37x") and "-17.100 ms" in verdict
    top = jax["contributors"][0]
    figures = f"{top['seconds'] * 1e3:+.3f} ms (95% interval"
    assert top["seconds"] < 0 and figures.startswith("-14.")
    md = explain_md.render(report)
    text = " ".join(_terminal(report, 80).split())
    assert f"jax against torch_xla: {verdict}" in text and f"## jax against torch_xla\n\n**{verdict}**" in md
    for shown in (md, text):
        assert "Baseline: torch_xla (chosen with --baseline)" in shown
        assert verdict in shown
        assert figures in shown and f"{top['seconds'] / jax['gap_s']:.0%} of the gap" in shown


HOSTILE = "<script>alert(1)</script> [/red] [bold]x[/bold] **y** `z` | _w_"


def _hostile_report() -> ExplainReport:
    """Every user-provided string carries HTML, rich markup and Markdown: mode names, an op group, a setting, the
    claims that quote them, the path and a note."""
    report = _report()
    entry = report.mode("torch_xla")
    entry.mode = f"torch_xla {HOSTILE}"
    entry.ops[0].group = f"op {HOSTILE}"
    entry.config_differences.append(ConfigDifference(f"env.X {HOSTILE}", HOSTILE, "<b>"))
    entry.contributors[0].claim += HOSTILE
    entry.annotations[0].claim += HOSTILE
    entry.notes.append(HOSTILE)
    report.summaries[f"torch_xla {HOSTILE}"] = report.summaries.pop("torch_xla")
    report.comparison["path"] = f"traces/{HOSTILE}"
    return report


def test_user_strings_are_text_in_every_format():
    report = _hostile_report()
    html = explain_html.render(report)
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    md = explain_md.render(report)
    assert "<script" not in md and "<b>" not in md and "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "\\*\\*y\\*\\* \\`z\\` \\| \\_w\\_" in md  # no emphasis, code span or table cell out of a name
    # a `|` in a name never adds a table cell: the op table's header and the row of the op group named so
    rows = [line for line in md.splitlines() if line.startswith("| op ")]
    assert len(rows) == 2 and all(line.count(" | ") == 7 for line in rows), rows
    text = _terminal(report, 250)  # rich markup in a name is printed, not applied (an unmatched [/red] would raise)
    assert f"torch_xla {HOSTILE}" in text and f"op {HOSTILE}" in text and f"traces/{HOSTILE}" in text


# Injected into a copy of the page for the test only (the report itself has no script): what the browser laid out.
MEASURE = """<script>
(function () {
  var tables = [];
  document.querySelectorAll("table").forEach(function (t) {
    var box = t.parentElement;
    tables.push({cls: t.className, width: Math.ceil(t.getBoundingClientRect().width), box: box.clientWidth,
                 overflow: box.scrollWidth - box.clientWidth});
  });
  document.body.setAttribute("data-layout", JSON.stringify({window: window.innerWidth,
    page: document.documentElement.scrollWidth, tables: tables}));
})();
</script>"""


def _layout(browser: str, html: str, width: int, tmp_path: Path) -> dict:
    page = tmp_path / f"layout-{width}.html"
    page.write_text(html.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},1000"]
    dom = command(browser, *flags, "--dump-dom", page.as_uri(), timeout=120)
    assert dom.code == 0, dom.stderr[-2000:]
    match = re.search(r'data-layout="([^"]*)"', dom.stdout)
    assert match, dom.stdout[:2000]
    return json.loads(html_lib.unescape(match.group(1)))


@pytest.mark.browser
def test_html_report_renders_in_headless_chromium(tmp_path: Path):
    browser = chromium()
    report = _report()
    page = tmp_path / "explain.html"
    page.write_text(explain_html.render(report), encoding="utf-8")
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = command(browser, *flags, "--dump-dom", page.as_uri(), timeout=120)
    assert dom.code == 0, dom.stderr[-2000:]
    _figures_shown(re.sub(r"<[^>]+>", " ", dom.stdout).replace("&nbsp;", " ").replace("\xa0", " ")
                   .replace("&#x27;", "'"), report)
    ARTIFACTS.mkdir(exist_ok=True)
    for width, height, name in ((1100, 2600, "explain_report_constructed.png"),
                                (800, 3200, "explain_report_constructed_800px.png")):
        shot = ARTIFACTS / name
        shot.unlink(missing_ok=True)
        run = command(browser, *flags, "--hide-scrollbars", f"--window-size={width},{height}", f"--screenshot={shot}",
                      page.as_uri(), timeout=120)
        assert run.code == 0, run.stderr[-2000:]
        assert shot.stat().st_size > 20_000  # a rendered page with plots, not a blank image


@pytest.mark.browser
@pytest.mark.parametrize("width", [800, 1100])
def test_html_tables_fit_the_window(tmp_path: Path, width: int):
    """At 800 px (and wider) the page never scrolls sideways and no table is cut off or needs its own scroll bar:
    intervals wrap under their figures, op groups wrap, the op table names each side once. The hostile report has
    the longest mode names and op groups."""
    browser = chromium()
    for report in (_report(), _hostile_report()):
        layout = _layout(browser, explain_html.render(report), width, tmp_path)
        assert layout["window"] == width
        assert layout["page"] <= width, layout
        classes = [t["cls"] for t in layout["tables"]]
        assert classes.count("steps") == 1 and classes.count("ops") == 1 and "config" in classes, classes
        for table in layout["tables"]:
            assert table["overflow"] <= 0 and table["width"] <= table["box"], table


FLAX_OP = ("jit(train_step)/jit(main)/transpose(jvp(FlaxViTForImageClassification))/vit/encoder/layer/*/attention/"
           "attention/query/dot_general")


def test_terminal_op_table_keeps_each_op_on_one_line(monkeypatch):
    """At 80 columns a long Flax op name is cut in the middle, keeping its informative end, on one line with its
    figures; at 250 columns it is whole."""
    monkeypatch.setitem(SLOW_OPS, FLAX_OP, (24, 0.9))
    monkeypatch.setitem(FAST_OPS, FLAX_OP, (24, 0.3))
    report = _report()
    narrow = _terminal(report, 80)
    (row,) = [line for line in narrow.splitlines() if "query/dot_general" in line]
    assert row.startswith("jit") and "…/query/dot_general " in row and row.split()[1:4] == ["24", "37.5", "0.898"]
    assert max(len(line.rstrip()) for line in narrow.splitlines()) <= 80
    wide = _terminal(report, 250)
    assert FLAX_OP in wide


# What the browser drew of each plot: every text element's box against its SVG's viewBox (the SVG scales with the
# page, so a text outside the viewBox is clipped whatever the window width).
SVG_MEASURE = """<script>
(function () {
  var out = [];
  document.querySelectorAll("svg").forEach(function (svg) {
    var view = svg.viewBox.baseVal;
    svg.querySelectorAll("text").forEach(function (t) {
      var box = t.getBBox();
      out.push({plot: svg.getAttribute("aria-label"), text: t.textContent, right: box.x + box.width,
                bottom: box.y + box.height, width: view.width, height: view.height});
    });
  });
  document.body.setAttribute("data-svg", JSON.stringify(out));
})();
</script>"""


def _svg_texts(browser: str, html: str, width: int, tmp_path: Path) -> list[dict]:
    page = tmp_path / f"svg-{width}.html"
    page.write_text(html.replace("</body>", SVG_MEASURE + "</body>"), encoding="utf-8")
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},1000"]
    dom = command(browser, *flags, "--dump-dom", page.as_uri(), timeout=120)
    assert dom.code == 0, dom.stderr[-2000:]
    match = re.search(r'data-svg="([^"]*)"', dom.stdout)
    assert match, dom.stdout[:2000]
    return json.loads(html_lib.unescape(match.group(1)))


@pytest.mark.browser
@pytest.mark.parametrize("width", [800, 1400])
def test_device_plot_legend_inside_the_plot(tmp_path: Path, width: int):
    """Every category of "One step on the device" has its legend entry inside the plot, at 800 and 1400 px; the runs
    without a strip are named below the plots with the reason."""
    browser = chromium()
    report = _report()
    report.summaries["jax"].timeline = [(i * 1e-4, 1e-4, category) for i, category in enumerate(CATEGORIES)]
    html = explain_html.render(report)
    texts = [t for t in _svg_texts(browser, html, width, tmp_path) if t["plot"] == "One step on the device, per run"]
    assert {t["text"] for t in texts} >= set(CATEGORIES)
    for text in texts:
        assert text["right"] <= text["width"] + 0.5 and text["bottom"] <= text["height"] + 0.5, text
    flowing = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "pytorch+compile is not in the device plots: the run did not finish" in flowing
    assert "pytorch is not in the device plots" in flowing and "jax is not in the device plots" not in flowing


def test_device_plot_legend_laid_out_inside_the_width():
    """Without a browser: each legend entry of the timeline, at the font's widest average character width, ends
    inside the viewBox, and the viewBox is tall enough for its lines."""
    plot = svg.timeline_strips("One step", [("jax", [(i * 1e-4, 1e-4, c) for i, c in enumerate(CATEGORIES)]),
                                            ("torch_xla", [(0.0, 1e-4, CATEGORIES[0])])])
    width, height = (float(v) for v in re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', plot).groups())
    entries = re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="10" height="10" fill="[^"]+"/><text x="[\d.]+" '
                         r'y="[\d.]+">([^<]+)</text>', plot)
    assert [name for _, _, name in entries] == sorted(CATEGORIES)
    for x, y, name in entries:
        assert float(x) + 14 + svg.LEGEND_CHAR_PX * len(name) <= width, name
        assert float(y) + 12 <= height, name
    assert len({y for _, y, _ in entries}) >= 2  # seven categories do not fit one line of 640 px
