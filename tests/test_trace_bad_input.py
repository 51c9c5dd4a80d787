"""Broken trace files (kept in tests/data/bad/trace_*) get one line on stderr naming the file, and exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

BAD = Path(__file__).parent / "data" / "bad"

# file -> words the one-line message must contain
CASES = {
    "trace_empty.json": "empty file",
    "trace_empty.json.gz": "empty file",
    "trace_empty.xplane.pb": "empty file",
    "trace_truncated.json.gz": "truncated or corrupt gzip",
    "trace_truncated.pt.trace.json": "truncated JSON",
    "trace_truncated.xplane.pb": "truncated or corrupt",
    "trace_garbage.json": "not a JSON trace",
    "trace_garbage.json.gz": "not a JSON trace",
    "trace_not_gzip.json.gz": "not a JSON trace",
    "trace_garbage.xplane.pb": "not a valid xplane.pb",
    "trace_invalid.json": "invalid JSON",
    "trace_not_a_trace.json": "no 'traceEvents'",
    "trace_wrong_format.json": "not a JSON object",
    "trace_wrong_format.json.gz": "not a JSON trace",
    "trace_wrong_format.xplane.pb": "not a valid xplane.pb",
    "trace_event_without_ts.json": "no numeric 'ts'",
}


def test_every_bad_trace_file_has_a_case():
    on_disk = {path.name for path in BAD.glob("trace_*")}
    assert on_disk == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("as_json", [False, True])
def test_bad_trace_is_refused_in_one_line(cli_run, name, as_json):
    path = BAD / name
    args = ["trace", "stats", str(path)] + (["--json"] if as_json else [])
    code, _stdout, stderr = cli_run(*args)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert str(path) in lines[0]
    assert CASES[name] in lines[0]
    assert "Traceback" not in stderr


def test_invalid_json_reports_line_and_column(cli_run):
    path = BAD / "trace_invalid.json"
    # Line 4 misses the comma between "ts": 5 and "dur"; the column is the one json.loads reports for it.
    line4 = path.read_text().splitlines()[3]
    column = line4.index('"dur"') + 1
    code, _, stderr = cli_run("trace", "stats", str(path))
    assert code == 2
    assert f"{path}:4:{column}: invalid JSON" in stderr


def test_missing_path_and_empty_directory(cli_run, tmp_path):
    code, _, stderr = cli_run("trace", "stats", str(tmp_path / "nope.json"))
    assert code == 2 and "no such file" in stderr
    code, _, stderr = cli_run("trace", "stats", str(tmp_path))
    assert code == 2 and "no traces found" in stderr and str(tmp_path) in stderr


def test_one_bad_trace_does_not_hide_the_good_ones(cli_run, tmp_path, fixtures_dir):
    import json
    import shutil

    shutil.copy(fixtures_dir / "hta" / "triton_example__triton_example.json.gz", tmp_path / "a.pt.trace.json.gz")
    shutil.copy(BAD / "trace_truncated.pt.trace.json", tmp_path / "b.pt.trace.json")
    shutil.copy(BAD / "trace_truncated.xplane.pb", tmp_path / "c.xplane.pb")  # refused when read, before any stats
    shutil.copy(fixtures_dir / "hta" / "triton_example__triton_example.json.gz", tmp_path / "d.pt.trace.json.gz")
    code, stdout, stderr = cli_run("trace", "stats", str(tmp_path), "--json")
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 2 and "b.pt.trace.json:" in lines[0] and "c.xplane.pb:" in lines[1]
    traces = json.loads(stdout)["traces"]
    assert [Path(t["file"]).name for t in traces] == ["a.pt.trace.json.gz", "d.pt.trace.json.gz"]
    assert [t["kernels"] for t in traces] == [1, 1]


def test_xplane_larger_than_free_memory_is_refused(cli_run, fixtures_dir, monkeypatch):
    """XLA's reader holds the whole XSpace: a file that cannot fit is refused up front, never killed mid-way."""
    from hloscope.trace import xplane

    path = fixtures_dir / "tracelens" / "test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb"
    just_too_little = xplane.XPLANE_MEMORY_FACTOR * path.stat().st_size - 1
    monkeypatch.setattr(xplane, "available_memory", lambda: just_too_little)
    code, _, stderr = cli_run("trace", "stats", str(path))
    assert code == 2
    assert f"{path}: too large to read here" in stderr and "GB is available" in stderr
    assert len(stderr.strip().splitlines()) == 1
