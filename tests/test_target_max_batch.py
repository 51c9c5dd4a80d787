"""Peak device memory of a step compiled for a target GPU, and `--max-batch`: the search on known peaks (no compile),
the figures against XLA's own, and the search end to end on vit-tiny against a small fake GPU (a PATH target whose
device_memory_size is a few MiB, so that it ends after a few compiles)."""

from __future__ import annotations

import json

import pytest
from helpers import run_record

from hloscope.backends.base import RunOptions
from hloscope.errors import InputError
from hloscope.hlo.gpu_spec import resolve_target, target_from_text
from hloscope.models.presets import get_preset
from hloscope.render.run_tables import compiled_comparison_table, compiled_run_table
from hloscope.runs.memory_record import read_ledger
from hloscope.runs.records import decode_entry, decode_run, entry_document
from hloscope.runs.runner import run_command, summary_entry
from hloscope.targets import device_memory
from hloscope.targets.max_batch import search_max_batch

MIB = 2**20


def linear_peaks(per_image: int, fixed: int, usable: int):
    """A step whose peak is fixed + per_image x batch; returns (first point at a batch, try_batch, the batches tried)."""
    tried: list[int] = []

    def point(batch: int) -> dict:
        peak = fixed + per_image * batch
        return {"batch_size": batch, "status": "compiled", "peak_bytes": peak, "fits": peak <= usable}

    def try_batch(batch: int) -> dict:
        tried.append(batch)
        return point(batch)

    return point, try_batch, tried


@pytest.mark.parametrize("start", [1, 8, 32, 100, 1000])
def test_search_finds_the_largest_batch_that_fits(start):
    usable = 100 * MIB
    point, try_batch, tried = linear_peaks(per_image=MIB // 3, fixed=10 * MIB, usable=usable)
    expected = (usable - 10 * MIB) // (MIB // 3)
    result = search_max_batch(point(start), try_batch, usable, max_compiles=32)
    assert result["batch_size"] == expected and result["exact"] and not result["at_least"]
    assert result["smallest_not_fitting"] == expected + 1
    peaks = {c["batch_size"]: c for c in result["compiles"]}
    assert peaks[expected]["fits"] and not peaks[expected + 1]["fits"]  # both compiled: the answer is checked
    assert [c["batch_size"] for c in result["compiles"]] == [start, *tried]
    assert result["message"].startswith(f"{expected} (batch {expected + 1} needs")


def test_search_grows_geometrically_then_bisects():
    point, try_batch, tried = linear_peaks(per_image=MIB, fixed=0, usable=40 * MIB)
    result = search_max_batch(point(8), try_batch, 40 * MIB, max_compiles=32)
    assert tried == [16, 32, 64, 48, 40, 44, 42, 41]
    assert result["batch_size"] == 40


def test_a_larger_batch_needing_less_is_said_with_the_answer():
    """vit-tiny on an H100 (XLA 0.10): batches 2-4 and 9-16 compile with cuBLAS, batch 8 with Triton and needs less
    than half of batch 4's peak. The search's answer stands on what it compiled, and says that it skipped batches
    whose fit its neighbours do not tell."""
    peaks = {2: 3.9, 4: 5.4, 8: 2.37, 16: 9.5, 12: 7.6, 10: 6.8, 9: 6.4}

    def try_batch(batch: int) -> dict:
        peak = int(peaks[batch] * MIB)
        return {"batch_size": batch, "status": "compiled", "peak_bytes": peak, "fits": peak <= int(5.4 * MIB)}

    result = search_max_batch(try_batch(2), try_batch, int(5.4 * MIB), max_compiles=32)
    assert [c["batch_size"] for c in result["compiles"]] == [2, 4, 8, 16, 12, 10, 9]
    assert result["batch_size"] == 8 and result["exact"]
    assert result["message"].startswith("8 (batch 9 needs 6.4 MiB")
    assert ("the peak does not grow with the batch here (batch 8 needs 2.4 MiB, batch 4 5.4 MiB: XLA chose other "
            "kernels), so batches not compiled may fit or not") in result["message"]
    # peaks that grow with the batch: no such words
    point, grow, _ = linear_peaks(per_image=MIB, fixed=0, usable=40 * MIB)
    assert "does not grow" not in search_max_batch(point(8), grow, 40 * MIB, max_compiles=32)["message"]


def test_when_even_batch_1_does_not_fit_it_says_so():
    point, try_batch, tried = linear_peaks(per_image=MIB, fixed=50 * MIB, usable=40 * MIB)
    result = search_max_batch(point(8), try_batch, 40 * MIB, max_compiles=32)
    assert tried == [4, 2, 1]
    assert result["batch_size"] is None and not result["exact"] and not result["at_least"]
    assert result["message"] == "none: even batch 1 needs 51.0 MiB, more than the 40.0 MiB usable"


def test_a_search_cut_short_by_its_bound_says_at_least():
    point, try_batch, tried = linear_peaks(per_image=1, fixed=0, usable=10**12)
    result = search_max_batch(point(32), try_batch, 10**12, max_compiles=4)
    assert tried == [64, 128, 256] and len(result["compiles"]) == 4
    assert result["batch_size"] == 256 and result["at_least"] and result["stopped_by"] == "compiles"
    assert result["message"].startswith("at least 256: batch 256 still fits")
    assert "bound of 4 compiles" in result["message"]
    # cut during the bisection: a lower bound with the batch known not to fit
    point, try_batch, _ = linear_peaks(per_image=MIB, fixed=0, usable=40 * MIB)
    result = search_max_batch(point(8), try_batch, 40 * MIB, max_compiles=5)
    assert result["batch_size"] == 32 and result["smallest_not_fitting"] == 48 and result["at_least"]
    assert result["message"].startswith("at least 32, below 48: the search stopped at its bound of 5 compiles")


def test_a_failed_compile_stops_the_search_with_its_reason():
    def try_batch(batch: int) -> dict:
        return {"batch_size": batch, "status": "failed", "peak_bytes": None, "fits": None, "error": "XLA said no"}

    first = {"batch_size": 8, "status": "compiled", "peak_bytes": 1, "fits": True}
    result = search_max_batch(first, try_batch, 100, max_compiles=10)
    assert result["batch_size"] == 8 and result["at_least"] and result["stopped_by"] == "failure"
    assert "batch 16 failed to compile: XLA said no" in result["message"]


def test_a_search_past_its_time_bound_stops():
    ticks = iter(range(0, 10_000, 100))
    point, try_batch, tried = linear_peaks(per_image=1, fixed=0, usable=10**12)
    result = search_max_batch(point(8), try_batch, 10**12, max_compiles=50, time_budget_s=250,
                              clock=lambda: float(next(ticks)))
    assert result["stopped_by"] == "time" and result["at_least"] and len(tried) < 5


STATS = {"argument_size_in_bytes": 723_000, "output_size_in_bytes": 325_000, "alias_size_in_bytes": 300_000,
         "temp_size_in_bytes": 9_000_000, "generated_code_size_in_bytes": 12_345}


def test_peak_and_ledger_add_up_to_xla_s_figures():
    gpu = resolve_target("h100")
    peak = device_memory.target_peak(STATS, gpu, buffer_assignment_bytes=9_748_000)
    assert peak is not None
    assert peak["peak_bytes"] == 723_000 + 325_000 + 9_000_000 - 300_000
    assert peak["usable_bytes"] == int(84942979072 * 0.75) and peak["device_memory_bytes"] == 84942979072
    assert peak["reserve_bytes"] + peak["usable_bytes"] == peak["device_memory_bytes"]
    assert peak["headroom_bytes"] == peak["usable_bytes"] - peak["peak_bytes"] and peak["fits"] is True
    assert peak["generated_code_bytes"] == 12_345
    arguments = {"parameters": 400_000, "buffers": 0, "optimizer_state": 4, "inputs": 322_000}
    ledger = device_memory.target_ledger(STATS, arguments, "sgd")
    assert ledger is not None
    parts = {p["name"]: p["bytes"] for p in ledger["parts"]}
    assert parts["outputs"] == 325_000 - 300_000 and parts["temporaries"] == 9_000_000
    assert parts["runtime"] == 723_000 - sum(arguments.values())  # arguments not traced to the state or batch
    assert sum(parts.values()) == ledger["peak_bytes"] == peak["peak_bytes"]
    typed = read_ledger({"memory": {"ledger": ledger}}, "run.json")  # the form timed runs' ledgers are read in
    assert typed is not None and typed.accounted_bytes() + typed.bytes_of("runtime") == peak["peak_bytes"]


def test_a_step_larger_than_the_usable_memory_does_not_fit():
    spec = resolve_target("a100").text.replace("device_memory_size: 85100068864", "device_memory_size: 10000000")
    gpu = target_from_text(spec, "small", "small.txtpb")
    peak = device_memory.target_peak(STATS, gpu, None)
    assert peak is not None and peak["usable_bytes"] == 7_500_000
    assert peak["fits"] is False and peak["headroom_bytes"] == 7_500_000 - peak["peak_bytes"] < 0


def test_a_bad_device_memory_is_refused_naming_the_file(tmp_path):
    spec = tmp_path / "bad.txtpb"
    spec.write_text(resolve_target("h100").text.replace("device_memory_size: 84942979072",
                                                        "device_memory_size: -5"))
    with pytest.raises(InputError, match=r"bad\.txtpb.*device_memory_size is -5"):
        resolve_target(str(spec))


def test_cli_bad_target_file_is_one_line_exit_2(cli_run, tmp_path):
    spec = tmp_path / "broken.txtpb"
    spec.write_text("gpu_device_info { core_count: 132\n")
    code, _out, err = cli_run("run", "--mode", "jax", "--model", "vit-tiny", "--target", str(spec), "--max-batch",
                             "--out", str(tmp_path / "out"))
    assert code == 2 and "broken.txtpb" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_cli_max_batch_without_a_target_is_refused(cli_run, tmp_path):
    code, _out, err = cli_run("run", "--mode", "jax", "--model", "vit-tiny", "--max-batch", "--out", str(tmp_path))
    assert code == 2 and "--max-batch" in err and "--target" in err
    assert not any(tmp_path.iterdir())


def test_cli_max_batch_needs_the_device_memory_in_the_target_file(cli_run, tmp_path):
    spec = tmp_path / "no_memory.txtpb"
    spec.write_text("\n".join(line for line in resolve_target("h100").text.splitlines()
                              if "device_memory_size" not in line))
    code, _out, err = cli_run("run", "--mode", "jax", "--model", "vit-tiny", "--target", str(spec), "--max-batch",
                             "--out", str(tmp_path / "out"))
    assert code == 2 and "no_memory.txtpb" in err and "device_memory_size" in err, err
    assert len(err.strip().splitlines()) == 1


def test_compare_passes_the_search_on_and_reports_it_per_mode(tmp_path):
    options = RunOptions(mode="jax", model="vit-tiny", target="h100", max_batch=True, max_batch_compiles=5)
    command = run_command(options, tmp_path)
    assert command[command.index("--max-batch-compiles") + 1] == "5" and "--max-batch" in command
    assert "max_batch" not in RunOptions(mode="jax").to_json()  # runs without the search keep their config keys
    record = run_record({"mode": "jax", "status": "compiled", "timing": {}, "memory": {
        "target_peak": {"peak_bytes": 7_480_844, "usable_bytes": 8_199_999}},
        "max_batch": {"batch_size": 20, "at_least": False, "message": "20 (batch 21 needs 7.9 MiB > 7.8 MiB usable)"}},
        tmp_path / "jax" / "run.json")
    written = entry_document(summary_entry(record, None))
    entry = decode_entry(tmp_path / "comparison.json", written)
    # after the keys every entry has, what a compiled run adds, in the order compare has always written them
    assert list(written)[list(written).index("warnings") + 1:] == [
        "kernels", "roofline_lower_bound_s", "target_peak_bytes", "target_usable_bytes", "max_batch",
        "max_batch_at_least", "max_batch_message", "ratio_to_fastest"]
    assert (entry.target_peak_bytes, entry.target_usable_bytes, entry.max_batch) == (7_480_844, 8_199_999, 20)
    assert entry.max_batch_at_least is False and entry.max_batch_message.startswith("20 (batch 21")


@pytest.mark.slow
@pytest.mark.usefixtures("cuda_plugin")  # fails where .venv-cuda is missing (conftest)
def test_max_batch_end_to_end_on_a_small_fake_gpu(cli_run, tmp_path):
    """vit-tiny's JAX step against an H100 spec whose device memory is 6.6 MiB (4.9 MiB usable): from batch 2 the
    search doubles to 4 (too large), then bisects at 3: three compiles of ~10 s each (longer searches: the tests on
    known peaks above). Batches 2 to 4 compile with cuBLAS (Triton cannot tile their GEMMs), so their peaks grow with
    the batch (batch 8's Triton step needs less than batch 4's). XLA rematerialises towards the usable memory, so the
    peaks depend on the device's size: here batch 2 needs 4.86 MiB and batch 4 4.98 MiB, either side of 4.94 usable."""
    spec = tmp_path / "small_h100.txtpb"
    spec.write_text(resolve_target("h100").text.replace("device_memory_size: 84942979072",
                                                        "device_memory_size: 6900000"))
    code, out, err = cli_run("run", "--mode", "jax", "--model", "vit-tiny", "--batch-size", "2", "--target",
                             str(spec), "--max-batch", "--out", str(tmp_path / "out"), "--json")
    assert code == 0, err[-2000:]
    document = json.loads(out)
    (run_dir,) = (tmp_path / "out").iterdir()
    record = decode_run(run_dir / "run.json", json.loads((run_dir / "run.json").read_text()))
    assert record.status == "compiled" and record.max_batch is not None and record.memory.target_peak is not None

    # the run's own peak: XLA's memory analysis and its buffer assignment agree, and the ledger adds up to it
    peak = record.memory.target_peak
    (analysis_file,) = [a for a in record.artifacts if a.kind == "memory_analysis"]
    analysis = json.loads(record.artifact_path(analysis_file).read_text())
    assert peak.peak_bytes == (analysis["argument_size_in_bytes"] + analysis["output_size_in_bytes"]
                               + analysis["temp_size_in_bytes"] - analysis["alias_size_in_bytes"])
    assert peak.buffer_assignment_bytes == peak.peak_bytes
    assert peak.usable_bytes == int(6900000 * 0.75) and peak.headroom_bytes == peak.usable_bytes - peak.peak_bytes
    ledger = read_ledger(document, run_dir / "run.json")
    preset = get_preset("vit-tiny")
    image_bytes = preset.num_channels * preset.image_size**2 * 4 + 4  # float32 pixels, an int32 label
    assert ledger is not None and ledger.accounted_bytes() + (ledger.bytes_of("runtime") or 0) == peak.peak_bytes
    assert ledger.bytes_of("parameters") and ledger.bytes_of("inputs") == 2 * image_bytes

    search = record.max_batch
    compiles = {c.batch_size: c for c in search.compiles}
    assert search.compiles[0].run and search.compiles[0].batch_size == 2
    assert search.compiles[0].peak_bytes == peak.peak_bytes
    assert [c.batch_size for c in search.compiles] == [2, 4, 3]  # doubled first, then bisected
    assert all(c.status == "compiled" and c.peak_bytes for c in search.compiles)
    assert all(c.fits == (c.peak_bytes <= peak.usable_bytes) for c in search.compiles)
    # the peak grows with the batch: at least by the extra batch's own bytes (it is an argument of the step)
    assert compiles[4].peak_bytes - compiles[2].peak_bytes >= 2 * image_bytes
    found = search.batch_size
    assert found is not None and search.exact and not search.at_least
    assert compiles[found].fits and not compiles[found + 1].fits  # the answer fits, one more does not
    assert len(search.compiles) <= 12 and str(found) in search.message


def test_a_wrong_max_batch_in_run_json_is_one_line_naming_the_field():
    from helpers import run_record

    with pytest.raises(InputError, match=r"run\.json.*'max_batch\.compiles\[0\]\.peak_bytes' is str 'big'"):
        run_record({"status": "compiled", "max_batch": {"compiles": [{"batch_size": 8, "peak_bytes": "big"}]}})


def test_the_target_tables_show_the_peak_the_headroom_and_the_answer():
    from helpers import run_record
    from rich.console import Console

    peak = device_memory.target_peak(STATS, resolve_target("h100"), None)
    compiles = [{"batch_size": 16, "peak_bytes": 1000, "fits": True, "run": True},
                {"batch_size": 32, "peak_bytes": 3000, "fits": False}]
    record = run_record({"status": "compiled", "config": {"model": "vit-tiny", "batch_size": 16},
                         "target": {"name": "h100", "device": "NVIDIA H100 80GB HBM3"},
                         "memory": {"device_peak_estimate_bytes": peak["peak_bytes"], "target_peak": peak},
                         "max_batch": {"batch_size": 16, "at_least": True, "smallest_not_fitting": 32,
                                       "message": "at least 16, below 32: the search stopped", "compiles": compiles}})
    console = Console(width=200, record=True)
    console.print(compiled_run_table(record))
    console.print(compiled_comparison_table([record]))
    text = console.export_text()
    usable_mib = f"{int(84942979072 * 0.75) / MIB:,.1f}"
    assert f"9.3 MiB of {usable_mib} MiB usable" in text and "MiB, fits" in text
    assert "at least 16, below 32: the search stopped" in text and "16: 0.0 MiB fits, 32: 0.0 MiB does not fit" in text
    assert "at least 16" in text.split("max batch (--max-batch)")[-1].splitlines()[0]
