"""Report files (-o) never overwrite a user's file, nor a file hloscope did not create; one that cannot be written is
one line on stderr (hloscope/render/output.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import hloscope

from hloscope.errors import UsageError
from hloscope.render import output


def _explain_input(root: Path) -> Path:
    """The smallest comparison explain reads: one run record."""
    run = root / "cmp" / "jax"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "schema_version": 1, "run_id": "jax", "mode": "jax", "status": "ok", "config": {}, "artifacts": [],
        "timing": {"step_times_s": [0.002, 0.002, 0.002], "median_s": 0.002, "mean_s": 0.002}}))
    return run.parent


@pytest.mark.parametrize("suffix", [".md", ".html", ".json"])
def test_report_never_overwrites_a_users_file(tmp_path, suffix):
    comparison = _explain_input(tmp_path)
    mine = tmp_path / f"report{suffix}"
    mine.write_text("the user's own notes\n")
    done = hloscope("explain", comparison, "-o", mine)
    assert done.code == 2 and done.stderr.count("\n") == 1 and "already exists" in done.stderr
    assert "Traceback" not in done.stderr
    assert mine.read_text() == "the user's own notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmp", mine.name]  # no temporary file left either


def test_report_temporary_file_never_clobbers_a_users_file(tmp_path):
    """The old writer used the fixed name .<output>.tmp beside the output, overwriting (then deleting) any such file."""
    comparison = _explain_input(tmp_path)
    decoy = tmp_path / ".report.md.tmp"
    decoy.write_text("keep me\n")
    done = hloscope("explain", comparison, "-o", tmp_path / "report.md")
    assert done.code == 0, done.stderr
    assert decoy.read_text() == "keep me\n"
    assert "| jax |" in (tmp_path / "report.md").read_text()
    mode = (tmp_path / "report.md").stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # what any other tool's open() would have given, not mkstemp's 0600


def test_report_force_replaces_and_a_directory_is_refused(tmp_path):
    comparison = _explain_input(tmp_path)
    target = tmp_path / "report.json"
    target.write_text("old\n")
    done = hloscope("explain", comparison, "-o", target, "--force")
    assert done.code == 0, done.stderr
    assert json.loads(target.read_text())["fastest"] == "jax"
    folder = tmp_path / "folder.md"
    folder.mkdir()
    done = hloscope("explain", comparison, "-o", folder, "--force")
    assert done.code == 2 and done.stderr.count("\n") == 1 and "is a directory" in done.stderr
    assert "Traceback" not in done.stderr and list(folder.iterdir()) == []


def test_report_appearing_during_the_work_is_not_overwritten(tmp_path, monkeypatch):
    """Checked before the work and again, atomically, when the report is placed (a hard link refuses existing files)."""
    target = tmp_path / "report.md"
    monkeypatch.setattr(output, "check_writable", lambda path, force: None)  # the early check passed, then:
    target.write_text("written meanwhile by someone else\n")
    with pytest.raises(UsageError, match="already exists"):
        output.emit("# report\n", target, force=False)
    assert target.read_text() == "written meanwhile by someone else\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_a_report_that_cannot_be_written_is_one_line(tmp_path):
    comparison = _explain_input(tmp_path)
    done = hloscope("explain", comparison, "-o", "/proc/hloscope-report.md")  # /proc takes no new files, even as root
    assert done.code == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == ["hloscope: error: cannot write /proc/hloscope-report.md: No such file or directory"]
