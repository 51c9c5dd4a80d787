"""--devices N: the registry's data-parallel modes, the one-line refusals, and a JAX step over 2 virtual CPU
devices (XLA_FLAGS --xla_force_host_platform_device_count) whose optimized HLO holds the gradient all-reduce, checked
with XLA's own parser (jaxlib._hlo) beside hloscope's collective count."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hloscope.backends.base import RunOptions
from hloscope.backends.devices import check_devices, host_device_flags, threads_per_process
from hloscope.errors import UsageError
from hloscope.modes import BY_NAME, DATA_PARALLEL_MODES, MODES
from hloscope.runs.xla_flags import HOST_DEVICE_COUNT_FLAG

# the mode that runs on one device only, for the refusals (openxla's dynamo bridge keeps one device)
ONE_DEVICE = "torch_xla+compile"


def _mode_args(name: str) -> list[str]:
    """`run`'s spelling of a mode: `--mode FRAMEWORK [--compile-model]`."""
    mode = BY_NAME[name]
    return [mode.framework, *(["--compile-model"] if mode.compile else [])]


def test_the_registry_says_which_modes_run_data_parallel():
    assert {"jax", "torchax", "pytorch", "pytorch+compile"} <= set(DATA_PARALLEL_MODES)
    assert [mode.name for mode in MODES if not mode.data_parallel] == [ONE_DEVICE]
    assert all(bool(mode.data_parallel) == (mode.name in DATA_PARALLEL_MODES) for mode in MODES)


def test_ddp_ranks_share_the_threads_of_a_run():
    """--threads N with DDP's K rank processes: N // K each (at least 1), so that the ranks together use N CPUs; the
    one-process modes (JAX, torch_xla SPMD) keep N."""
    assert [threads_per_process("pytorch", 2, n) for n in (1, 2, 4)] == [1, 1, 2]
    assert threads_per_process("pytorch+compile", 1, 2) == 2
    assert threads_per_process("jax", 2, 2) == threads_per_process("torch_xla", 2, 2) == 2


def test_one_device_is_todays_run():
    assert RunOptions().devices == 1
    assert RunOptions().to_json()["devices"] == 1
    check_devices("pytorch", 1, 7)  # every mode, any batch


def test_refusals_are_one_line_naming_the_mode_or_the_batch():
    with pytest.raises(UsageError, match="must divide by the device count"):
        check_devices("jax", 3, 8)
    with pytest.raises(UsageError, match="must divide by the device count"):
        check_devices("pytorch", 3, 8)


def test_a_one_device_mode_is_refused_by_name():
    with pytest.raises(UsageError, match=re.escape(f"--mode {ONE_DEVICE}: this mode runs on one device only")):
        check_devices(ONE_DEVICE, 2, 8)


def test_the_host_device_count_replaces_an_earlier_one_and_keeps_other_flags():
    flags = host_device_flags(f"--xla_dump_to=/x {HOST_DEVICE_COUNT_FLAG}=4", 2)
    assert flags.split() == ["--xla_dump_to=/x", f"{HOST_DEVICE_COUNT_FLAG}=2"]


@pytest.mark.parametrize("args, expected", [
    (("run", "--mode", "jax", "--devices", "3", "--batch-size", "8"), "--devices 3 --batch-size 8"),
    (("run", "--mode", "pytorch", "--devices", "3", "--batch-size", "8"), "--devices 3 --batch-size 8"),
    pytest.param(("run", "--mode", *_mode_args(ONE_DEVICE), "--devices", "2", "--batch-size", "8"),
                 f"--mode {ONE_DEVICE}"),
    pytest.param(("compare", "--repeats", "1", "--modes", f"jax,{ONE_DEVICE}", "--devices", "2", "--batch-size", "8", "--no-audit"),
                 f"--mode {ONE_DEVICE}"),
    (("compare", "--repeats", "1", "--modes", "jax", "--devices", "1,two", "--no-audit"), "--devices 1,two: expected a device count"),
    (("compare", "--repeats", "1", "--modes", "jax", "--devices", "0,2", "--no-audit"), "--devices 0,2: expected device counts >= 1"),
])
def test_the_cli_refuses_in_one_line_before_any_directory(cli_run, tmp_path, args, expected):
    code, _, err = cli_run(*args, "--model", "vit-tiny", "--out", str(tmp_path / "out"))
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["jax", "torchax"])
def test_on_two_devices_the_step_trains_and_holds_the_all_reduce(device_run, cli_run, mode):
    record = device_run(mode, 2)
    assert record["status"] == "ok"
    assert record["config"]["devices"] == 2
    assert record["loss"]["finite"] and record["loss"]["falling"]
    devices = record["environment"]["devices"]
    assert devices["count"] == 2 and devices["mesh_shape"] == {"data": 2} and devices["per_device_batch"] == 4
    assert f"{HOST_DEVICE_COUNT_FLAG}=2" in record["environment"]["env"]["XLA_FLAGS"]
    assert record["compiles"]["recompiled_in_window"] is False

    optimized = [a for a in record["artifacts"] if a.get("kind") == "hlo" and a.get("train_step")
                 and a.get("stage") == "after_optimizations"]
    assert optimized, record["artifacts"]
    path = Path(record["_dir"]) / optimized[0]["path"]
    # XLA's own parser: the partitioned step has an all-reduce (the gradients, combined)
    from jaxlib import _hlo

    module = _hlo.hlo_module_from_text(path.read_text())
    opcodes = [i.opcode.name for c in module.computations() for i in c.instructions()]
    assert sum(name in ("kAllReduce", "kAllReduceStart") for name in opcodes) >= 1, sorted(set(opcodes))
    # hloscope's count agrees
    code, out, err = cli_run("hlo", "stats", str(path), "--json", "--no-xla-cost")
    assert code == 0, err
    collectives = json.loads(out)["modules"][0]["collectives"]
    assert collectives["count"] >= 1 and collectives["bytes"] > 0, collectives


@pytest.mark.slow
def test_one_device_records_no_mesh(device_run):
    record = device_run("jax", 1)
    assert record["status"] == "ok" and record["config"]["devices"] == 1
    assert "devices" not in record["environment"]
    assert HOST_DEVICE_COUNT_FLAG not in (record["environment"]["env"].get("XLA_FLAGS") or "")
