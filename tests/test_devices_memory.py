"""Per-device and per-rank memory with --devices N: JAX records every device's memory_stats() (None on XLA's
CPU devices, and run.json says so), DDP gathers each rank's peak memory like its step times, torch_xla SPMD says why it
has no per-device figure."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["jax", "torchax"])
def test_jax_records_every_device_and_says_the_cpu_reports_none(device_run, mode):
    import jax

    record = device_run(mode, 2)
    memory = record["memory"]
    assert [d["id"] for d in memory["devices"]] == record["environment"]["devices"]["ids"] == [0, 1]
    # what the framework exposes on this machine, read here: XLA's CPU devices have no memory statistics
    assert jax.devices("cpu")[0].memory_stats() is None
    assert all(d["peak_bytes"] is None for d in memory["devices"])
    assert memory["devices_note"].startswith("jax Device.memory_stats() is None on cpu devices")
    assert "device_peak_bytes" not in memory and memory["peak_host_rss_bytes"] > 0
    one = device_run(mode, 1)["memory"]
    assert "devices" not in one and "devices_note" not in one  # one device: the record as before


def test_ddp_gathers_each_ranks_memory(device_run):
    record = device_run("pytorch", 2)
    ranks = record["memory"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    for rank in ranks:  # each rank is a process with torch and the model loaded: well over 100 MB resident
        assert rank["peak_host_rss_bytes"] > 100 * 2**20
        assert rank["source"] == "peak host RSS (CPU)"
    # rank 0's figure was taken at the gather, the run's a moment later: the peak can only have grown
    assert ranks[0]["peak_host_rss_bytes"] <= record["memory"]["peak_host_rss_bytes"]
    assert [r["rank"] for r in record["timing"]["ranks"]] == [0, 1]


def test_torch_xla_spmd_says_why_there_is_no_per_device_figure(device_run):
    memory = device_run("torch_xla", 2)["memory"]
    assert "MemoryInfo not supported for SPMD virtual device" in memory["devices_note"]
    assert "device_peak_bytes" not in memory and memory["peak_host_rss_bytes"] > 0
