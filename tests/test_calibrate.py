"""`hloscope calibrate` and `api.calibrate` end to end on the tiny ViT, and calibration.json as a record: written
once, typed, versioned, and refused naming the file and the field when it is not one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import hloscope

from hloscope import api
from hloscope.backends.base import RunOptions
from hloscope.errors import HloscopeError, InputError, UsageError
from hloscope.runs.calibration_record import CALIBRATION_FILE, Calibration, load_calibration, write_calibration
from hloscope.runs.records import SCHEMA_VERSION
from hloscope.runs.rundir import OutputError

DELAY_MS = 20.0  # several steps of the tiny preset: a delay the runs' own sleep measurement sees whatever the load


@pytest.mark.slow
def test_calibrate_writes_the_record_it_prints(tmp_path: Path) -> None:
    result = hloscope("calibrate", "--mode", "jax", "--model", "vit-tiny", "--batch-size", "8", "--steps", "5",
                      "--warmup", "2", "--profile-steps", "2", "--repeats", "1", "--delay", str(DELAY_MS),
                      "--out", tmp_path, "--json", memory_limit=None, timeout=600)
    assert result.code == 0, result.stderr[-3000:]
    (directory,) = tmp_path.glob("calibrate-*")
    printed = json.loads(result.stdout)
    assert json.loads((directory / CALIBRATION_FILE).read_text()) == printed
    record = load_calibration(directory)
    assert record.to_dict() == printed and record.dir == str(directory)
    assert (record.schema_version, record.kind, record.mode, record.processes) == (SCHEMA_VERSION, "calibration",
                                                                                 "jax", 1)
    assert record.delay_s == pytest.approx(DELAY_MS / 1e3)
    # a sleep never ends early: what the delayed runs measured is at least what was asked for
    assert record.delay_slept_s is not None and record.delay_slept_s >= record.delay_s
    # one process per configuration: the spread between processes is unmeasured, and the record says so
    assert record.resolvable_gap_s is None
    assert any("one process" in note for note in record.notes)
    assert record.identical_verdict is not None and record.delay_verdict is not None
    assert record.trustworthy == (record.delay_found and not record.identical_called_different)
    # the directory is an ordinary comparison: explain reads its three configurations
    report = api.explain(directory, baseline="jax [A]")
    assert {mode.mode for mode in report.modes} == {"jax [A]", "jax [A']", f"jax [A+{DELAY_MS:g}ms]"}


def test_calibrate_says_in_one_error_when_nothing_ran(tmp_path: Path) -> None:
    options = RunOptions(mode="jax", model="vit-tiny", batch_size=8, steps=2, warmup=1)
    # a second is far too short for a process that imports jax: each one is stopped, and calibrate has nothing
    with pytest.raises(HloscopeError, match="jax never ran: nothing to calibrate"):
        api.calibrate(options, tmp_path, repeats=1, timeout_s=1)
    (directory,) = tmp_path.glob("calibrate-*")
    assert not (directory / CALIBRATION_FILE).exists()


@pytest.mark.parametrize(("arguments", "message"), [
    ({"repeats": 0}, "repeats must be from 1"),
    ({"delay_ms": float("nan")}, "delay_ms must be from"),
])
def test_calibrate_refuses_bounds_before_running(tmp_path: Path, arguments: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        api.calibrate(RunOptions(mode="jax", model="vit-tiny"), tmp_path, **arguments)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("options", "message"), [
    (RunOptions(mode="jax", model="no-such-preset"), "no-such-preset"),
    (RunOptions(mode="no-such-mode", model="vit-tiny"), "unknown mode"),
    (RunOptions(mode="jax", model="vit-tiny", compile_mode="max-autotune"), "compile"),
])
def test_calibrate_refuses_what_no_run_could_do_before_making_anything(tmp_path: Path, options: RunOptions,
                                                                      message: str) -> None:
    with pytest.raises(UsageError, match=message):
        api.calibrate(options, tmp_path)
    assert not list(tmp_path.iterdir())


def test_a_figure_too_large_for_a_float_is_refused(tmp_path: Path) -> None:
    file = tmp_path / CALIBRATION_FILE
    text = json.dumps(_record().to_dict()).replace('"delay_gap_s": 0.0032', '"delay_gap_s": 1e400')
    assert "1e400" in text
    file.write_text(text)
    with pytest.raises(InputError, match="delay_gap_s"):
        load_calibration(file)


def _record() -> Calibration:
    return Calibration(mode="jax", processes=3, baseline_step_s=0.004, resolvable_gap_s=0.0002,
                       resolvable_gap_relative=0.05, identical_verdict="no significant difference",
                       identical_gap_s=-0.00001, identical_gap_ci_s=[-0.0001, 0.0001], identical_called_different=False,
                       delay_s=0.003, delay_slept_s=0.0031, delay_verdict="slower", delay_gap_s=0.0032,
                       delay_gap_ci_s=[0.003, 0.0034], delay_found_s=0.0031, delay_node="idle: host",
                       delay_nodes={"idle: host": 0.0031}, delay_found=True, trustworthy=True)


def test_the_record_is_written_once_and_reads_back_as_written(tmp_path: Path) -> None:
    written = write_calibration(_record(), tmp_path)
    text = (tmp_path / CALIBRATION_FILE).read_text()
    assert list(json.loads(text))[:3] == ["schema_version", "kind", "mode"]
    assert load_calibration(tmp_path / CALIBRATION_FILE) == written
    with pytest.raises(OutputError, match="a file is there already"):  # never over a record already there
        write_calibration(_record(), tmp_path)
    assert (tmp_path / CALIBRATION_FILE).read_text() == text


@pytest.mark.parametrize(("change", "message"), [
    ({"schema_version": SCHEMA_VERSION + 1}, "written by a newer hloscope"),
    ({"kind": "replay"}, "not a calibration record: 'kind' is 'replay'"),
    ({"processes": "three"}, "'processes' is str"),
    ({"delay_s": -1}, "'delay_s'"),
    ({"delay_nodes": {"idle: host": "a lot"}}, r"'delay_nodes\[\.\.\.\]' holds a string"),
    ({"processes": -5}, "'processes'"),
    ({"identical_gap_s": 1e12}, "'identical_gap_s'"),
])
def test_a_damaged_record_is_refused_naming_the_field(tmp_path: Path, change: dict, message: str) -> None:
    file = tmp_path / CALIBRATION_FILE
    file.write_text(json.dumps({**_record().to_dict(), **change}))
    with pytest.raises(InputError, match=message) as caught:
        load_calibration(file)
    assert caught.value.path == str(file)
