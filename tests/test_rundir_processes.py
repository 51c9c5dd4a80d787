"""Run directories made by real processes: unique across processes started in the same second, run ids cannot escape
--out, and an output directory that cannot be made is one line. Atomic run.json writes, same-second threads and
escaping run ids in-process are covered by tests/test_rundir.py."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from helpers import REPO, hloscope

_MAKE_DIR = """
import sys, time
from hloscope.runs.rundir import create_run_dir
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
print(create_run_dir(sys.argv[1], prefix="jax").name)
"""


def test_processes_started_in_the_same_second_get_different_run_directories(tmp_path):
    start = time.time() + 3  # every process is waiting by then; they all create their directory at once
    children = [subprocess.Popen([sys.executable, "-c", _MAKE_DIR, str(tmp_path), str(start)], cwd=REPO, text=True,
                                 stdout=subprocess.PIPE) for _ in range(4)]
    names = [child.communicate(timeout=120)[0].strip() for child in children]
    assert all(child.returncode == 0 for child in children)
    assert len(set(names)) == 4 and sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


@pytest.mark.parametrize("run_id", ["../x", "/tmp/x", "..", "a/../../x"])
def test_run_id_cannot_escape_out_as_a_real_command(tmp_path, run_id):
    out = tmp_path / "out"
    done = hloscope("run", "--mode", "jax", "--model", "vit-tiny", "--out", out, "--run-id", run_id)
    assert done.code == 2 and done.stderr.count("\n") == 1 and "invalid run id" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["out"])
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize("command", ["run", "compare"])
def test_an_output_directory_that_cannot_be_made_is_one_line(tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    out = blocker / "traces"
    args = ["--mode", "jax"] if command == "run" else ["--modes", "jax"]
    done = hloscope(command, *args, "--model", "vit-tiny", "--steps", "1", "--warmup", "1", "--out", out)
    assert done.code == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [f"hloscope: error: cannot create output directory {out}: Not a directory"]
    assert blocker.read_text() == "not a directory\n"
