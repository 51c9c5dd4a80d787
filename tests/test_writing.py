"""hloscope.writing.atomic_output: the one way every output file is written (run records, reports, trace summaries,
Parquet exports, replay inputs)."""

from __future__ import annotations

import os
import stat

import pytest

from hloscope.writing import atomic_output


def test_the_new_contents_appear_whole_with_the_permissions_of_a_plain_open(tmp_path):
    target = tmp_path / "report.md"
    target.write_text("old")
    old_umask = os.umask(0o027)
    try:
        with atomic_output(target, text=True) as handle:
            handle.write("new ")
            assert target.read_text() == "old"  # readers still see the old file while the new one is written
            handle.write("report")
    finally:
        os.umask(old_umask)
    assert target.read_text() == "new report"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # 0o666 & ~umask, not mkstemp's 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_a_failure_inside_the_block_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "run.json"
    target.write_bytes(b"{}")
    with pytest.raises(RuntimeError), atomic_output(target) as handle:
        handle.write(b"{\"half\": ")
        raise RuntimeError("disk full")
    assert target.read_bytes() == b"{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_without_replace_an_existing_file_is_never_overwritten(tmp_path):
    target = tmp_path / "explain.html"
    with atomic_output(target, text=True, replace=False) as handle:
        handle.write("first")
    assert target.read_text() == "first"
    with pytest.raises(FileExistsError), atomic_output(target, text=True, replace=False) as handle:
        handle.write("second")
    assert target.read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["explain.html"]


def test_a_missing_folder_is_an_os_error_for_the_caller_to_name(tmp_path):
    with pytest.raises(FileNotFoundError), atomic_output(tmp_path / "absent" / "x.json") as handle:
        handle.write(b"x")
