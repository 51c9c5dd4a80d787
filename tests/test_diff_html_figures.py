"""`diff --format html`: a figure in a table cell (`+45.2 µs`, `+8,803`, `3.39 T`) never breaks across lines, at any
page width: such cells are marked to stay whole (`white-space: nowrap`), names still wrap anywhere."""

from __future__ import annotations

import re

from hloscope import api
from hloscope.render import diff_html
from hloscope.render.html_page import CSS, table

TINY = "gpu_aot/vit_tiny_sm90_triton"
BASE = "gpu_aot/vit_base_sm90_cublas"


def test_figures_never_break_inside():
    html = table(["", "A", "B", "B - A"], [["time", "12.5 µs", "57.7 µs", "+45.2 µs"],
                                           ["instructions", "3,156", "11,959", "+8,803"],
                                           ["name", "fusion.12", "a long name with words", "-"]])
    cells = re.findall(r"<td( class=\"n\")?>([^<]*)</td>", html)
    figures = {text for marked, text in cells if marked}
    assert figures == {"12.5 µs", "57.7 µs", "+45.2 µs", "3,156", "11,959", "+8,803"}  # names and "-" wrap as before
    assert "td.n{white-space:nowrap" in CSS.replace("table.figures td,", "")


def test_diff_side_by_side_difference_column_is_whole(real_file):
    a = next(real_file(TINY).glob("*after_optimizations.txt"))
    b = next(real_file(BASE).glob("*after_optimizations.txt"))
    html = diff_html.render(api.diff(a, b))
    side = html[html.index("<h2>Side by side</h2>"):html.index("</table>", html.index("<h2>Side by side</h2>"))]
    rows = re.findall(r"<tr>(.*?)</tr>", side)[1:]
    differences = [re.findall(r"<td[^>]*>[^<]*</td>", row)[-1] for row in rows]
    numeric = [cell for cell in differences if re.search(r">[+\-]?\d", cell)]
    assert len(numeric) >= 5
    assert all(cell.startswith('<td class="n">') for cell in numeric), numeric
