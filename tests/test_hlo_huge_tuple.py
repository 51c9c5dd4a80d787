"""The HLO memory check counts shapes (docs/reliability.md): a module whose text is small but whose shapes are many
is refused up front, and XLA's cost analysis of it is skipped with one warning under an address-space limit. Run as
real subprocesses (helpers.hloscope)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import assert_refused, hloscope

# ------------------------------------------------------------------ (c) the HLO memory check counts shapes


def _huge_tuple(path: Path, elements: int) -> Path:
    """A valid module whose parameter is one tuple of `elements` scalars: 7 bytes of text per shape."""
    path.write_text("HloModule big\n\nENTRY main {\n  p = (" + ", ".join(["f32[]"] * elements) + ") parameter(0)\n"
                    "  ROOT g = f32[] get-tuple-element(p), index=0\n}\n")
    return path


def test_a_huge_tuple_is_refused_up_front_by_its_shape_count(tmp_path, monkeypatch):
    path = _huge_tuple(tmp_path / "tuple.hlo", 3_000_000)  # 21 MB: 10x is 210 MB, its shapes ~750 MB
    monkeypatch.setenv("HLOSCOPE_HLO_MAX_BYTES", str(30_000_000))  # a 30 MB file would pass the old 10x check
    result = hloscope("hlo", "stats", path, timeout=60, memory_limit=1 << 30)
    line = assert_refused(result, path, words=("3,000,001 shapes",))
    assert "0.8 GB" in line, line


def test_xla_cost_analysis_of_a_huge_tuple_is_skipped_with_one_warning_under_an_address_space_limit(tmp_path):
    path = _huge_tuple(tmp_path / "tuple.hlo", 3_000_000)  # XLA's child would take ~3.3 GB (174x the file)
    result = hloscope("hlo", "stats", "--json", path, timeout=240, memory_limit=int(2.5 * (1 << 30)))
    assert "Traceback" not in result.stderr and result.code == 0, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hloscope: warning: {path}: XLA's parser would need"), lines
    (module,) = json.loads(result.stdout)["modules"]
    assert "XLA's parser would need" in module["xla_cost"]["skipped"]
