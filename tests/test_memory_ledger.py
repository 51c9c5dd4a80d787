"""The memory ledger (run.json `memory.ledger`) on known answers: vit-tiny sessions set up in this process, one step,
then measured as the driver measures them after the timed window."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pytest

from hloscope.backends import memory_ledger
from hloscope.backends.base import RunOptions
from hloscope.backends.driver import load_session
from hloscope.errors import InputError
from hloscope.runs.memory_record import MemoryLedger, read_ledger

COMPILES_WHILE_MEASURED: dict[tuple, int] = {}


@functools.cache
def measured(mode: str, batch: int, optimizer: str = "sgd", donate: bool | None = None) -> MemoryLedger:
    # torch first: a JAX session would otherwise tell transformers (imported once per process) to ignore it
    import torch  # noqa: F401
    options = RunOptions(mode=mode, model="vit-tiny", batch_size=batch, steps=1, warmup=1, device="cpu",
                         optimizer=optimizer, donate=donate)
    with tempfile.TemporaryDirectory(prefix="hloscope-ledger-") as run_dir:  # removed after: nothing left in /tmp
        session = load_session(options, Path(run_dir))
        try:
            session.setup()
            session.wait(session.step(0))
            compiles = getattr(session, "compiles", 0)
            record = memory_ledger.measure(session, session.memory()).to_dict()
            COMPILES_WHILE_MEASURED[(mode, batch, optimizer, donate)] = getattr(session, "compiles", 0) - compiles
        finally:
            session.close()
    ledger = read_ledger({"memory": {"ledger": record}}, "run.json")
    assert ledger is not None and not ledger.notes, record
    return ledger


def parts(ledger: MemoryLedger) -> dict[str, int | None]:
    return {p.name: p.bytes for p in ledger.parts}


@pytest.mark.parametrize("mode", ["jax", "pytorch"])
def test_doubling_the_batch_grows_activations_and_inputs_not_parameters_or_optimizer_state(mode):
    small, large = parts(measured(mode, 8)), parts(measured(mode, 16))
    assert large["inputs"] == 2 * small["inputs"]
    assert small["activations"] > 0
    assert 1.8 * small["activations"] < large["activations"] <= 2 * small["activations"]
    for name in ("parameters", "buffers", "optimizer_state", "gradients"):
        assert large[name] == small[name], name


# AdamW's step counts: one float32 scalar per parameter tensor in torch.optim; optax's one int32 for the whole tree
@pytest.mark.parametrize("mode, counts", [("jax", lambda tensors: 4), ("pytorch", lambda tensors: 4 * tensors)])
def test_adamw_adds_two_moments_per_parameter_byte_and_its_step_counts(mode, counts):
    sgd, adamw = measured(mode, 8), measured(mode, 8, "adamw")
    parameter_bytes = sgd.bytes_of("parameters")
    assert adamw.bytes_of("parameters") == parameter_bytes
    grown = adamw.bytes_of("optimizer_state") - sgd.bytes_of("optimizer_state")
    tensors = sgd.part("parameters").detail["tensors"]
    assert tensors > 10  # vit-tiny: its layers' weights and biases
    assert grown == 2 * parameter_bytes + counts(tensors)
    state = adamw.part("optimizer_state")
    assert state is not None and state.detail["moments_per_parameter"] == 2
    assert state.detail["moments_bytes"] == 2 * parameter_bytes + sgd.part("optimizer_state").detail["moments_bytes"]


@pytest.mark.parametrize("mode", ["jax", "torchax"])
def test_the_xla_modes_parts_add_up_to_xlas_own_totals(mode):
    ledger = measured(mode, 8)
    compiled, bytes_of = ledger.compiled, parts(ledger)
    assert compiled is not None
    assert (bytes_of["parameters"] + bytes_of["buffers"] + bytes_of["optimizer_state"] + bytes_of["inputs"]
            == compiled["argument_bytes"])
    assert bytes_of["outputs"] + compiled["alias_bytes"] == compiled["output_bytes"]
    assert bytes_of["temporaries"] == compiled["temp_bytes"]
    within = [p for p in ledger.parts if p.within == "temporaries"]
    assert {p.name for p in within} == {"gradients", "activations"} and all(p.estimate for p in within)
    assert bytes_of["runtime"] == ledger.peak_bytes - (compiled["argument_bytes"] + bytes_of["outputs"]
                                                       + compiled["temp_bytes"])


@pytest.mark.parametrize("mode", ["jax", "torchax"])
def test_the_ledger_is_the_compiled_step_that_ran_with_its_donation(mode):
    """XLA's analysis of the executable the run timed, taken from jit's cache (no compile): donated, the updated
    state is written over the state's buffers (aliased), so the new outputs are the loss and XLA's output tuple; not
    donated, the whole state is written to new buffers."""
    kept, donated = measured(mode, 8), measured(mode, 8, donate=True)
    assert COMPILES_WHILE_MEASURED[(mode, 8, "sgd", None)] == COMPILES_WHILE_MEASURED[(mode, 8, "sgd", True)] == 0
    state = donated.bytes_of("parameters") + donated.bytes_of("buffers") + donated.bytes_of("optimizer_state")
    assert kept.compiled is not None and donated.compiled is not None
    assert kept.compiled["alias_bytes"] == 0 and kept.bytes_of("outputs") >= state
    # what is left: the float32 loss and XLA's output tuple (a pointer for each leaf of the state)
    assert donated.compiled["alias_bytes"] == state and 4 <= donated.bytes_of("outputs") < 1024


def test_the_pytorch_ledger_measures_tensors_and_leaves_cpu_temporaries_unmeasured():
    ledger = measured("pytorch", 8)
    bytes_of = parts(ledger)
    assert bytes_of["gradients"] == bytes_of["parameters"]  # every parameter has its .grad after a step
    assert bytes_of["optimizer_state"] == 0  # SGD without momentum keeps nothing
    assert bytes_of["temporaries"] is None and "CPU allocator" in ledger.part("temporaries").source
    assert bytes_of["runtime"] == ledger.peak_bytes - ledger.accounted_bytes()


@pytest.mark.parametrize("ledger, message", [
    ("x", "'memory.ledger' is str"),
    ({"parts": [{"name": "weights", "bytes": 1}]}, "memory.ledger.parts[0]"),
    ({"parts": [{"name": "parameters", "bytes": -1, "source": ""}]}, "memory.ledger.parts[0].bytes"),
    ({"parts": [], "compiled": {"temp_bytes": "many"}}, "memory.ledger.compiled.temp_bytes"),
])
def test_a_malformed_ledger_is_refused_naming_run_json_and_the_field(ledger, message):
    with pytest.raises(InputError) as caught:
        read_ledger({"memory": {"ledger": ledger}}, "some/run.json")
    assert "some/run.json" in str(caught.value) and message in str(caught.value)


def test_a_run_without_a_ledger_has_none():
    assert read_ledger({"memory": {"peak_host_rss_bytes": 1}}, "run.json") is None


class _Unbuilt:
    """A session whose setup never ran: measuring it raises inside the framework code."""

    def __init__(self, devices: int = 1):
        self.options = RunOptions(mode="jax", model="vit-tiny", devices=devices)


def test_measuring_never_fails_the_run_an_error_takes_the_ledgers_place():
    record = memory_ledger.measure(_Unbuilt(), {"peak_host_rss_bytes": 1}).to_dict()
    assert list(record) == ["optimizer", "error"]
    assert record["error"].startswith("memory ledger not measured: AttributeError")
    ledger = read_ledger({"memory": {"ledger": record}}, "run.json")
    assert ledger is not None and ledger.notes == [record["error"]] and ledger.peak_bytes is None
    assert ledger.to_dict() == record  # read back, it writes the same
    assert "--devices 2" in (memory_ledger.measure(_Unbuilt(devices=2), {}).error or "")
