"""The bounds of every numeric option, one place for the commands (cli/options.py turns them into click types) and
the Python API (hloscope.api checks its arguments with `check_range`). Sane limits, not hardware ones (docs/run.md)."""

from __future__ import annotations

import math

from hloscope.errors import UsageError

MAX_SEED = 2**32 - 1  # numpy's, torch's and JAX's generators all take a seed up to 2**32 - 1
MAX_STEPS = 100_000
MAX_WARMUP = 10_000
MAX_PROFILE_STEPS = 1_000
MAX_BATCH_SIZE = 65_536
MAX_SEQ_LEN = 131_072
MAX_TOP_ROWS = 1_000  # rows of a "top N" table (hlo stats, trace stats)
MAX_SOURCE_DEPTH = 256  # path components of an op_name kept (hlo stats --source-depth)
MAX_REPEATS = 100  # compare --repeats: fresh processes per configuration
MAX_TEST_REPEATS = 20  # --test-repeats: fresh processes per configuration of the re-runs
MAX_BUDGET_MIN = 24 * 60.0  # --budget: minutes of re-runs, a day at most
MAX_MIN_GAP = 10.0  # explain --min-gap: a fraction of the baseline's step time
MAX_HOST_DELAY_MS = 60_000.0  # run --inject-host-delay: a minute's sleep per step is already far past any real stall

# Bounds on what a file may make hloscope do (docs/reliability.md), beyond its size:
# an xplane.pb stores each name once and lets every event refer to it; the names and text stats its events refer to,
# counted once per event, may add up to this much (a real trace of 10 million events with 100-character names: 1 GB).
MAX_XPLANE_EXPANDED_BYTES = 2 << 30
# XLA's own cost analysis (hlo stats, diff) runs in one child process for all the modules of a command; it takes
# seconds for real modules but is exponential in the depth of nested calls. Past this many seconds in all (or
# HLOSCOPE_XLA_TIMEOUT_S) the child is killed and the modules it did not finish get no XLA figures, with one warning.
XLA_COST_TIMEOUT_S = 60.0
# `tensorboard` converts a Kineto trace into one XSpace message held whole in memory (~1.3 KB per event: 1.59 GB for
# 1.2 M events); a trace with more events than this is refused before converting (about 2.6 GB at the bound).
MAX_XSPACE_EVENTS = 2_000_000

# A kernel launch as CUDA allows it (CUDA C Programming Guide, "Features and Technical Specifications", compute
# capability 5.0 to 12.x): grid x up to 2^31 - 1, grid y and z up to 65,535; block x and y up to 1,024, z up to 64, at
# most 1,024 threads per block. Shared memory per block: at most what one SM has, 228 KiB on sm_80 (A100: 164 KiB),
# sm_90 and sm_100 (a block may opt in to 227 KiB of it). A thunk_sequence.txt launch outside these is not one XLA made.
MAX_GRID_DIMS = (2**31 - 1, 65_535, 65_535)
MAX_BLOCK_DIMS = (1_024, 1_024, 64)
MAX_THREADS_PER_BLOCK = 1_024
MAX_SHARED_MEMORY_BYTES = 228 << 10


def check_range(name: str, value: float, low: float, high: float) -> None:
    """UsageError unless `value` is a finite number from `low` to `high` (an int where the bounds are ints)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{name} must be a number, not {value!r}")
    if isinstance(low, int) and isinstance(high, int) and not isinstance(value, int):
        raise UsageError(f"{name} must be a whole number, not {value!r}")
    if not math.isfinite(value) or not low <= value <= high:
        raise UsageError(f"{name} must be from {low} to {high}, not {value!r}")

# `hloscope replay` runs XLA on files it did not write (docs/replay.md "What replay accepts"): every bound in one place.
MAX_REPLAY_MODULE_BYTES = 256 << 20  # one HLO / StableHLO module's text, read whole
MAX_REPLAY_ARRAY_BYTES = 16 << 30  # one entry parameter (or, in HLO, any instruction's array): built on the host first
MAX_REPLAY_INPUT_BYTES = 64 << 30  # all entry parameters of one module together
MAX_REPLAY_SAVED_STEPS = 64  # batches in a run's saved step inputs (hloscope saves 3)
MAX_NPY_HEADER_BYTES = 64 << 10  # an .npy member's header beyond its data (numpy writes 128 bytes)
MAX_REPLAY_TIMEOUT_S = 3600.0  # the child process that compiles and executes: killed past this (HLOSCOPE_REPLAY_TIMEOUT_S)
