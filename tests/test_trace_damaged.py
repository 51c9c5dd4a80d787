"""`trace stats` and `trace export` on damaged input, output paths and options: one line on stderr, exit 2, never a
traceback or a hang, nothing of the user's overwritten, and the traces that can be read still read. Inputs are built
from HTA's two real ranks (tests/data/fetched/hta/trace_filter_ranks)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from helpers import FETCHED, assert_refused, hloscope

from hloscope.tensorboard.kineto_xspace import kineto_to_xspace
from hloscope.trace.job import parse_ranks

SOURCE = FETCHED / "hta" / "trace_filter_ranks"
FIRST = "sampled_rank-0"


@pytest.fixture
def traces(tmp_path) -> Path:
    """A folder with the two real ranks."""
    folder = tmp_path / "traces"
    folder.mkdir()
    for file in sorted(SOURCE.glob("*.json.gz")):
        shutil.copy(file, folder / file.name)
    return folder


def _document() -> dict:
    return json.loads(gzip.decompress((SOURCE / f"{FIRST}.json.gz").read_bytes()))


def _write(path: Path, document: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


# ----------------------------------------------------------------------------------------------------- --ranks


def test_a_huge_range_of_ranks_is_a_membership_test_not_a_set(traces):
    wanted = parse_ranks("0-2000000000,7", (3,))
    assert 1_999_999_999 in wanted and 0 in wanted and 2_000_000_001 not in wanted
    result = hloscope("trace", "stats", traces, "--ranks", "1-2000000000", "--json", "--no-progress", "-j1",
                      timeout=120, memory_limit=2 << 30)
    assert result.code == 0, result.stderr
    assert [trace["rank"] for trace in json.loads(result.stdout)["traces"]] == [1]


@pytest.mark.parametrize("spec", ["0-999999999999", "9-2", "0-99999999999999999999999999"])
def test_an_absurd_or_reversed_range_of_ranks_is_one_usage_line(traces, spec):
    result = hloscope("trace", "stats", traces, "--ranks", spec, "--no-progress", "-j1", timeout=60,
                      memory_limit=2 << 30)
    assert_refused(result, Path("--ranks"))


# ----------------------------------------------------------------------------------------------- export targets


def _export(traces: Path, out: Path):
    return hloscope("trace", "export", traces, out, "--no-progress", "-j1", timeout=180)


def test_export_never_replaces_what_it_did_not_write_and_exports_the_other_traces(traces, tmp_path):
    for kind in ("file", "fifo", "symlink", "folder"):
        out = tmp_path / f"out-{kind}"
        target = out / "rank=0" / f"{FIRST}.parquet"
        target.parent.mkdir(parents=True)
        victim = tmp_path / f"victim-{kind}"
        victim.write_text("the user's\n")
        if kind == "file":
            target.write_text("the user's\n")
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "symlink":
            target.symlink_to(victim)
        else:
            target.mkdir()
        result = _export(traces, out)
        assert_refused(result, target, words=("not replaced",))
        assert victim.read_text() == "the user's\n"
        if kind == "file":
            assert target.read_text() == "the user's\n"
        assert (target.is_symlink() if kind == "symlink" else target.is_fifo() if kind == "fifo"
                else target.is_dir() if kind == "folder" else target.is_file())
        assert (out / "rank=1" / "sampled_rank-1.parquet").is_file(), kind  # the other trace is exported
        assert "1 trace(s)" in result.stdout


def test_export_replaces_and_keeps_only_its_own_files(traces, tmp_path):
    out = tmp_path / "out"
    assert _export(traces, out).code == 0
    again = _export(traces, out)
    assert again.code == 0 and "(2 already exported, kept)" in again.stdout, again.stdout + again.stderr
    (traces / f"{FIRST}.json.gz").touch()  # a changed trace: its old export (hloscope's own) is replaced
    os.utime(traces / f"{FIRST}.json.gz", (time.time() + 5, time.time() + 5))
    third = _export(traces, out)
    assert third.code == 0 and "(1 already exported, kept)" in third.stdout, third.stdout + third.stderr


@pytest.mark.parametrize("case", ["out-is-a-file", "rank-folder-is-a-file", "symlink-loop"])
def test_an_unusable_output_folder_is_one_line(traces, tmp_path, case):
    out = tmp_path / "out"
    named = out
    if case == "out-is-a-file":
        out.write_text("mine\n")
    elif case == "rank-folder-is-a-file":
        out.mkdir()
        named = out / "rank=0"
        named.write_text("mine\n")
    else:
        (tmp_path / "loop").symlink_to(out)
        out.symlink_to(tmp_path / "loop")
    result = _export(traces, out)
    assert "Traceback" not in result.stderr
    assert result.code == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert str(named) in result.stderr
    if case != "symlink-loop":
        assert named.read_text() == "mine\n"
    else:  # the loop is left as it was
        assert out.readlink() == tmp_path / "loop" and (tmp_path / "loop").readlink() == out


# ------------------------------------------------------------------------------------------------- --scheduler


@pytest.mark.parametrize("command", ["stats", "export"])
@pytest.mark.parametrize("address", ["garbage!!", "", "tcp://host", "tcp://127.0.0.1:99999"])
def test_a_malformed_scheduler_address_is_one_usage_line_at_once(traces, tmp_path, command, address):
    outs = [tmp_path / "out"] if command == "export" else []
    started = time.monotonic()
    result = hloscope("trace", command, traces, *outs, "--scheduler", address, "--no-progress", timeout=60)
    assert_refused(result, Path("--scheduler"), words=("scheme://host:port",))
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("command", ["stats", "export"])
def test_an_unreachable_scheduler_is_one_line_and_the_process_exits(traces, tmp_path, monkeypatch, command):
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", "2s")
    outs = [tmp_path / "out"] if command == "export" else []
    result = hloscope("trace", command, traces, *outs, "--scheduler", "tcp://127.0.0.1:1", "--no-progress",
                      timeout=90)  # helpers.hloscope fails the test if the process does not exit
    assert_refused(result, Path("--scheduler"), words=("tcp://127.0.0.1:1", "cannot connect"))


# ------------------------------------------------------------------------------------------ Kineto ids of any type


@pytest.mark.parametrize("field", ["pid", "tid"])
@pytest.mark.parametrize("value", [{"a": 1}, [1, 2]])
def test_an_object_or_list_id_is_read_as_its_json_text_everywhere(tmp_path, field, value):
    document = _document()
    events = [event for event in document["traceEvents"] if event.get("ph") == "X"]
    for event in events[:50]:
        event[field] = value
    for event in document["traceEvents"]:
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            event[field] = value  # metadata too
            break
    trace = _write(tmp_path / "damaged" / "rank-0.json", document)
    stats = hloscope("trace", "stats", trace, "--json", "--no-progress", "-j1", timeout=120)
    assert stats.code == 0 and "Traceback" not in stats.stderr, stats.stderr
    export = hloscope("trace", "export", trace, tmp_path / "out", "--no-progress", "-j1", timeout=120)
    assert export.code == 0, export.stderr
    import pyarrow.parquet as pq

    table = pq.read_table(next((tmp_path / "out").rglob("*.parquet")))
    column = "process" if field == "pid" else "lane"
    assert any(json.dumps(value) in text for text in table.column(column).to_pylist())

    assert kineto_to_xspace(document, document["traceEvents"], "host").events > 0


# ------------------------------------------------------------------------------------------------------ --state


def test_a_state_path_that_is_a_file_is_one_usage_line(traces, tmp_path):
    state = tmp_path / "state"
    state.write_text("mine\n")
    result = hloscope("trace", "stats", traces, "--state", state, "--no-progress", "-j1", timeout=60)
    assert_refused(result, state, words=("--state", "not a directory"))
    assert state.read_text() == "mine\n"


def test_a_tampered_cached_summary_is_never_trusted(traces, tmp_path):
    state = tmp_path / "state"
    args = ("trace", "stats", traces, "--state", state, "--json", "--no-progress", "-j1")
    fresh = hloscope(*args, timeout=120)
    assert fresh.code == 0, fresh.stderr
    records = sorted(state.glob("*.json"))
    assert len(records) == 2
    for number, record_file in enumerate(records):
        record = json.loads(record_file.read_text())
        stats = record["result"]["stats"]
        if number == 0:  # numbers of the wrong type
            for key in ("steps", "kernels", "device_time_us", "events"):
                stats[key] = "x"
            for step in stats["per_step"]:
                step["host_duration_us"] = "x"
        else:  # plausible numbers that are not the trace's
            stats["kernels"] += 1000
        record_file.write_text(json.dumps(record))
    again = hloscope(*args, timeout=120)
    assert again.code == 0 and "Traceback" not in again.stderr, again.stderr
    assert json.loads(again.stdout) == json.loads(fresh.stdout)


# ------------------------------------------------------------------------------------------------------ warnings


def test_a_warning_about_a_file_with_control_characters_is_one_escaped_line(tmp_path):
    document = _document()
    for event in document["traceEvents"][:5]:
        if event.get("ph") == "X":
            event["dur"] = -1  # impossible times: skipped with one warning naming the file
    trace = _write(tmp_path / "nl\nname\x1b[31m" / "rank-0.json", document)
    result = hloscope("trace", "stats", trace, "--json", "--no-progress", "-j1", timeout=120)
    assert result.code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hloscope: warning: "), result.stderr
    assert "\x1b" not in result.stderr and "nl\\nname\\x1b[31m" in lines[0]


# ---------------------------------------------------------------------------------------------------- one-writer


def test_every_warning_goes_through_the_one_writer():
    from helpers import REPO

    offenders = [str(path.relative_to(REPO)) for path in (REPO / "hloscope").rglob("*.py")
                 if path.name != "errors.py" and "hloscope: warning:" in path.read_text()]
    assert offenders == [], "write warnings with hloscope.errors.warn (one escaped line)"
