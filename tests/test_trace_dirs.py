"""Directories laid out the way HTA expects (`rank-0.json.gz`, `rank-1.json.gz`, any *.json[.gz] with
Kineto content) are read by `trace stats DIR`, with the rank of each trace and a per-rank summary; JSON files in
them that are not traces are skipped with a note. Checked against `json.load` of each file."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from hloscope.trace.load import find_trace_files

RANKS = "hta/trace_filter_ranks"
ROCPROF = "tracelens/rocprof__908_results.json.gz"


@pytest.fixture
def hta_dir(real_file, tmp_path):
    source = real_file(RANKS)
    directory = tmp_path / "traces"
    shutil.copytree(source, directory)
    (directory / "sampled_rank-1.json.gz").rename(directory / "rank-1.json.gz")  # HTA's own naming, no .trace.
    (directory / "config.json").write_text('{"world_size": 2}')
    shutil.copy(real_file(ROCPROF), directory / "rocprof.json.gz")  # a missing fixture skips (fails in CI)
    return directory


def _reference(path) -> dict:
    document = json.loads(gzip.decompress((path).read_bytes()))
    events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
    return {"rank": document["distributedInfo"]["rank"], "kernels": sum(e.get("cat") == "kernel" for e in events),
            "events": len(events)}


def test_hta_directory_is_read_per_rank(hta_dir, cli_run):
    code, out, err = cli_run("trace", "stats", "--json", str(hta_dir))
    assert code == 0, err
    document = json.loads(out)
    expected = {p.name: _reference(p) for p in sorted(hta_dir.glob("*rank-*.json.gz"))}
    got = {t["file"].rsplit("/", 1)[-1]: t for t in document["traces"]}
    assert got.keys() == expected.keys() == {"sampled_rank-0.json.gz", "rank-1.json.gz"}
    for name, reference in expected.items():
        assert got[name]["rank"] == reference["rank"]
        assert got[name]["kernels"] == reference["kernels"]
        assert got[name]["events"] == reference["events"]
    assert [row["rank"] for row in document["ranks"]] == [0, 1]
    assert [row["kernels"] for row in document["ranks"]] == [expected["sampled_rank-0.json.gz"]["kernels"],
                                                             expected["rank-1.json.gz"]["kernels"]]
    assert "config.json: skipped" in err
    assert "rocprof.json.gz: skipped" in err


def test_hta_directory_tables(hta_dir, cli_run):
    code, out, err = cli_run("trace", "stats", str(hta_dir))
    assert code == 0, err
    assert "Per rank" in out


def test_run_directories_still_ignore_other_json(real_file, tmp_path):
    """Inside a run directory only *.trace.json[.gz] and xplanes are traces, as before."""
    shutil.copy(real_file(RANKS) / "sampled_rank-0.json.gz", tmp_path / "rank-0.json.gz")
    assert find_trace_files(tmp_path) == []
    assert find_trace_files(tmp_path, any_json=True) == [tmp_path / "rank-0.json.gz"]
