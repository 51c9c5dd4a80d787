"""Run directories: unique, never overwritten, atomic, and every broken run.json refused with its file named."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from hloscope.errors import InputError, UsageError
from hloscope.runs.rundir import (
    create_run_dir,
    find_runs,
    load_comparison,
    load_run,
    write_comparison,
    write_json_atomic,
    write_run,
)

BROKEN = Path(__file__).parent / "data" / "runs"


def test_runs_started_in_the_same_second_get_different_directories(tmp_path):
    made: list[Path] = []
    lock = threading.Lock()

    def make():
        path = create_run_dir(tmp_path, prefix="jax")
        with lock:
            made.append(path)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({p.name for p in made}) == 8
    assert all(p.parent == tmp_path and p.is_dir() for p in made)


def test_an_existing_run_is_never_overwritten(tmp_path):
    run = create_run_dir(tmp_path, "mine")
    write_run(run, {"schema_version": 1, "kept": True})
    with pytest.raises(UsageError, match="already exists"):
        create_run_dir(tmp_path, "mine")
    assert json.loads((run / "run.json").read_text())["kept"] is True


@pytest.mark.parametrize("run_id", ["../escape", "a/b", "..", ".", "/abs", "x/../../y", "", "-flag", "a\\b", "a b"])
def test_run_ids_cannot_escape_the_output_directory(tmp_path, run_id):
    with pytest.raises(UsageError, match="invalid run id"):
        create_run_dir(tmp_path / "out", run_id)
    assert not (tmp_path / "escape").exists()


def test_json_is_written_atomically(tmp_path):
    target = tmp_path / "run.json"
    write_json_atomic(target, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"a": object()})  # fails half-way through serialising
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left behind


@pytest.mark.parametrize("case, message", [
    ("empty", "empty run.json"),
    ("truncated", "not valid JSON"),
    ("garbage", "binary data"),
    ("wrong_format", "top level is a JSON list"),
    ("newer_schema", "newer hloscope"),
    ("missing_keys", "'run_id' is missing"),
    ("missing_artifact", "module_0001.jit_train_step.before_optimizations.txt: listed in"),
    ("escaping_artifact", "points outside the run directory"),
])
def test_broken_run_json_is_refused_naming_the_file(case, message):
    with pytest.raises(InputError) as info:
        load_run(BROKEN / case)
    text = str(info.value)
    assert message in text
    assert str(BROKEN / case) in text
    assert info.value.exit_code == 2


def test_truncated_json_reports_line_and_column():
    with pytest.raises(InputError) as info:
        load_run(BROKEN / "truncated")
    assert info.value.line is not None and info.value.col is not None


def test_missing_run_directory_is_reported(tmp_path):
    with pytest.raises(InputError, match=r"no run\.json here"):
        load_run(tmp_path)
    with pytest.raises(InputError, match="no such file"):
        find_runs(tmp_path / "nowhere")


def test_newer_comparison_is_refused():
    with pytest.raises(InputError, match="newer hloscope"):
        load_comparison(BROKEN / "newer_comparison")


def test_find_runs_lists_a_comparisons_modes_in_order(tmp_path):
    comparison = create_run_dir(tmp_path, prefix="compare")
    for name in ("pytorch", "jax"):
        run = create_run_dir(comparison, name)
        write_run(run, {"schema_version": 1, "run_id": name, "mode": name, "status": "ok", "config": {}, "artifacts": []})
    write_comparison(comparison, {"schema_version": 1, "comparison_id": comparison.name,
                                  "modes": [{"mode": "pytorch", "dir": "pytorch"}, {"mode": "jax", "dir": "jax"},
                                            {"mode": "torch_xla", "dir": "torch_xla"}]})  # this one never ran
    assert find_runs(comparison) == [comparison / "pytorch", comparison / "jax"]
    assert find_runs(comparison / "jax" / "run.json") == [comparison / "jax"]
    assert find_runs(tmp_path) == [comparison / "jax", comparison / "pytorch"]
    assert load_run(comparison / "jax").dir == comparison / "jax"


def test_missing_artifacts_can_be_tolerated_on_request(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(BROKEN / "missing_artifact", run)
    assert load_run(run, check_artifacts=False).artifacts[0].kind == "hlo"


def test_cli_refuses_an_escaping_run_id_in_one_line(cli_run, tmp_path):
    code, _out, err = cli_run("run", "--mode", "jax", "--model", "vit-tiny", "--out", str(tmp_path), "--run-id", "../x")
    assert code == 2
    assert err.count("\n") == 1 and "invalid run id" in err and "Traceback" not in err
    assert not (tmp_path.parent / "x").exists()


def test_cli_refuses_an_unknown_model_before_making_a_directory(cli_run, tmp_path):
    code, _, err = cli_run("run", "--mode", "jax", "--model", "vit-huge", "--out", str(tmp_path / "out"))
    assert code == 2 and "unknown model preset 'vit-huge'" in err
    assert not (tmp_path / "out").exists()


def test_run_json_gets_the_permissions_of_an_ordinary_file(tmp_path):
    import os
    import stat

    from hloscope.runs.rundir import write_json_atomic

    old = os.umask(0o022)
    try:
        write_json_atomic(tmp_path / "run.json", {"schema_version": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "run.json").stat().st_mode) == 0o644
